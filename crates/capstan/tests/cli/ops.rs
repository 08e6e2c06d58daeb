//! Running Capstan in a cluster: `capstan check [--pre]` and `capstan uninstall` against
//! `capstan dev` (control plane and controllers) with a reconciled Kustomization, and the OCI
//! image of `scripts/build-image`, judged by skopeo, a chroot and a real registry.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::commands::{Env, assert_contains};
use capstan_testkit::Run;

/// A workload the Kustomization deploys: it must survive `capstan uninstall`.
const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: ghcr.io/stefanprodan/podinfo:6.7.0
";

/// A chart in the same repository, released by a HelmRelease whose release must survive too.
const CHART: &str = "apiVersion: v2
name: hello
version: 0.1.0
";

const CHART_CONFIG_MAP: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: hello
data:
  release: {{ .Release.Name }}
";

const HELM_RELEASE: &str = "apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: hello
  namespace: flux-system
spec:
  interval: 1m
  targetNamespace: default
  storageNamespace: default
  chart:
    spec:
      chart: ./charts/hello
      sourceRef:
        kind: GitRepository
        name: fleet
";

/// What `capstan install` puts in the cluster, as far as `check` and `uninstall` read it: the
/// controller Deployment and cluster-scoped RBAC, labelled as the installer labels them.
fn installed(rollout: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: capstan-controller
  namespace: flux-system
  labels:
    app.kubernetes.io/part-of: capstan
    app.kubernetes.io/instance: flux-system
    app.kubernetes.io/component: controller
  annotations:
    sim.capstan.dev/rollout: {rollout}
spec:
  replicas: 1
  selector:
    matchLabels: {{app.kubernetes.io/component: controller}}
  template:
    metadata:
      labels: {{app.kubernetes.io/component: controller}}
    spec:
      serviceAccountName: capstan-controller
      containers:
        - name: manager
          image: ghcr.io/capstan/capstan:v0.1.0
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: capstan-controller
  namespace: flux-system
  labels:
    app.kubernetes.io/part-of: capstan
    app.kubernetes.io/instance: flux-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: capstan-reconciler
  labels:
    app.kubernetes.io/part-of: capstan
    app.kubernetes.io/instance: flux-system
rules:
  - apiGroups: ['*']
    resources: ['*']
    verbs: ['*']
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: not-capstans
rules: []
"
    )
}

/// `kubectl apply` of a manifest written into the test's directory.
async fn apply(env: &Env, name: &str, yaml: &str) {
    let path = env.dir.path().join(name);
    std::fs::write(&path, yaml).unwrap();
    env.kubectl(&["apply", "-f", path.to_str().unwrap()])
        .await
        .ok();
}

/// Whether `kubectl get <args>` finds the object (any failure but NotFound fails the test).
async fn exists(env: &Env, args: &[&str]) -> bool {
    let mut get = vec!["get"];
    get.extend_from_slice(args);
    let run = env.kubectl(&get).await;
    if run.status != 0 {
        assert_contains(&run.stderr, "NotFound");
    }
    run.status == 0
}

#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn check_then_uninstall_keeps_the_workloads_and_removes_every_capstan_object() {
    let env = Env::start().await;

    // --pre: the embedded control plane is Kubernetes 1.33, Flux's minimum.
    let run = env.capstan(&["check", "--pre"]).await.ok();
    assert_contains(&run.stderr, "✔ Kubernetes 1.33.0");
    assert_contains(&run.stderr, ">=1.33.0-0");
    assert_contains(&run.stderr, "✔ prerequisites checks passed");

    // capstan dev's controllers are its Pod in flux-system; another namespace has none.
    let run = env.capstan(&["check", "--timeout", "1s"]).await.ok();
    assert_contains(&run.stderr, "✔ capstan-controller-0: pod ready");
    let run = env
        .capstan(&["check", "--timeout", "1s", "-n", "capstan-system"])
        .await
        .fails();
    assert_contains(
        &run.stderr,
        "✗ no controllers found in the 'capstan-system' namespace with the label selector 'app.kubernetes.io/part-of=capstan'",
    );
    assert_contains(&run.stderr, "✔ gitrepositories.source.toolkit.fluxcd.io/v1");
    assert_contains(&run.stderr, "✗ check failed");

    // A controller whose rollout never completes fails the check once the timeout is over.
    apply(&env, "installed.yaml", &installed("hang")).await;
    let run = env.capstan(&["check", "--timeout", "2s"]).await.fails();
    assert_contains(&run.stderr, "✗ capstan-controller: deployment not ready");
    env.kubectl(&[
        "delete",
        "deployment",
        "capstan-controller",
        "-n",
        "flux-system",
    ])
    .await
    .ok();
    apply(&env, "installed.yaml", &installed("complete")).await;
    let run = env.capstan(&["check"]).await.ok();
    assert_contains(&run.stderr, "✔ capstan-controller: deployment ready");
    assert_contains(&run.stderr, "► ghcr.io/capstan/capstan:v0.1.0");
    assert_contains(
        &run.stderr,
        "✔ kustomizations.kustomize.toolkit.fluxcd.io/v1",
    );
    assert_contains(&run.stderr, "✔ helmreleases.helm.toolkit.fluxcd.io/v2");
    assert_contains(&run.stderr, "✔ all checks passed");

    // A fleet: a GitRepository and a pruning Kustomization that deployed `web`. Were its
    // finalizer to run, the prune would delete `web`.
    let sha = env.commit(&[
        ("apps/web.yaml", WEB),
        ("charts/hello/Chart.yaml", CHART),
        ("charts/hello/templates/config-map.yaml", CHART_CONFIG_MAP),
    ]);
    let run = env.create_git_fleet().await;
    assert_contains(&run.stderr, &format!("✔ fetched revision main@sha1:{sha}"));
    let run = env
        .capstan(&[
            "create",
            "kustomization",
            "apps",
            "--source",
            "GitRepository/fleet",
            "--path",
            "./apps",
            "--prune",
        ])
        .await
        .ok();
    assert_contains(&run.stderr, "✔ Kustomization apps is ready");
    let ks = env.get_json("kustomization", "apps").await;
    assert_eq!(
        ks["metadata"]["finalizers"][0], "finalizers.fluxcd.io",
        "{ks}"
    );
    apply(&env, "release.yaml", HELM_RELEASE).await;
    capstan_testkit::eventually(
        std::time::Duration::from_secs(60),
        "the HelmRelease to be Ready",
        || async {
            let hr = env.get_json("helmrelease", "hello").await;
            let ready = hr["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            ready.then_some(())
        },
    )
    .await;
    assert!(exists(&env, &["configmap", "hello", "-n", "default"]).await);
    let web_uid = env
        .kubectl(&["get", "deployment", "web", "-n", "default", "-o", "json"])
        .await
        .ok()
        .json()["metadata"]["uid"]
        .clone();

    // --dry-run says what would go and changes nothing.
    let run = env.capstan(&["uninstall", "--dry-run"]).await.ok();
    assert_contains(
        &run.stderr,
        "✔ Kustomization/flux-system/apps finalizers deleted (dry run)",
    );
    assert_contains(
        &run.stderr,
        "✔ GitRepository/flux-system/fleet deleted (dry run)",
    );
    assert_contains(
        &run.stderr,
        "✔ Deployment/flux-system/capstan-controller deleted (dry run)",
    );
    assert_contains(
        &run.stderr,
        "✔ CustomResourceDefinition/kustomizations.kustomize.toolkit.fluxcd.io deleted (dry run)",
    );
    assert_contains(&run.stderr, "✔ Namespace/flux-system deleted (dry run)");
    let ks = env.get_json("kustomization", "apps").await;
    assert_eq!(
        ks["metadata"]["finalizers"][0], "finalizers.fluxcd.io",
        "{ks}"
    );
    assert!(exists(&env, &["clusterrole", "capstan-reconciler"]).await);

    // Without --silent it asks; with stdin closed it aborts, changing nothing.
    let run = env.capstan(&["uninstall"]).await.fails();
    assert_contains(&run.stderr, "aborting");
    assert!(exists(&env, &["kustomization", "apps", "-n", "flux-system"]).await);

    let run = env.capstan(&["uninstall", "--silent"]).await.ok();
    assert_contains(
        &run.stderr,
        "► deleting components in flux-system namespace",
    );
    assert_contains(
        &run.stderr,
        "✔ Kustomization/flux-system/apps finalizers deleted",
    );
    assert_contains(&run.stderr, "✔ Kustomization/flux-system/apps deleted");
    assert_contains(
        &run.stderr,
        "✔ HelmRelease/flux-system/hello finalizers deleted",
    );
    assert_contains(&run.stderr, "✔ ClusterRole/capstan-reconciler deleted");
    assert_contains(&run.stderr, "✔ uninstall finished");

    // The workload stays, untouched and not being deleted.
    let web = env
        .kubectl(&["get", "deployment", "web", "-n", "default", "-o", "json"])
        .await
        .ok()
        .json();
    assert_eq!(web["metadata"]["uid"], web_uid);
    assert!(web["metadata"]["deletionTimestamp"].is_null(), "{web}");
    // So does the Helm release: its objects and its storage (no uninstall ran).
    assert!(exists(&env, &["configmap", "hello", "-n", "default"]).await);
    let releases = env
        .kubectl(&[
            "get",
            "secrets",
            "-n",
            "default",
            "-l",
            "owner=helm",
            "-o",
            "name",
        ])
        .await
        .ok()
        .stdout;
    assert!(releases.contains("sh.helm.release.v1."), "{releases}");
    // No Capstan CRD, installed object or namespace is left, nothing held by a finalizer.
    let crds = env.kubectl(&["get", "crd", "-o", "name"]).await.ok().stdout;
    assert!(!crds.contains("toolkit.fluxcd.io"), "{crds}");
    assert!(!exists(&env, &["clusterrole", "capstan-reconciler"]).await);
    assert!(exists(&env, &["clusterrole", "not-capstans"]).await);
    capstan_testkit::eventually(
        std::time::Duration::from_secs(30),
        "the flux-system namespace to be gone",
        || async { (!exists(&env, &["namespace", "flux-system"]).await).then_some(()) },
    )
    .await;

    // And check now says why Capstan is not there.
    let run = env.capstan(&["check", "--timeout", "1s"]).await.fails();
    assert_contains(
        &run.stderr,
        "✗ CustomResourceDefinition gitrepositories.source.toolkit.fluxcd.io not found",
    );
    assert_contains(&run.stderr, "✗ check failed");

    // A second uninstall finds nothing to do and still succeeds.
    let run = env.capstan(&["uninstall", "--silent"]).await.ok();
    assert_contains(&run.stderr, "✔ Namespace/flux-system not found");
}

/// `capstan install` on `capstan dev`, checked, then uninstalled: no object of the
/// installation is left, whatever its kind.
#[tokio::test(flavor = "multi_thread")]
async fn an_installation_checks_healthy_and_uninstalls_without_a_trace() {
    let env = Env::start().await;
    env.capstan(&["install", "--timeout", "60s"]).await.ok();
    let run = env.capstan(&["check", "--timeout", "60s"]).await.ok();
    assert_contains(&run.stderr, "✔ capstan-controller: deployment ready");
    assert_contains(
        &run.stderr,
        &format!("► version v{}\n", env!("CARGO_PKG_VERSION")),
    );
    assert_contains(&run.stderr, "✔ all checks passed");

    let labelled = |kind: &'static str| {
        let env = &env;
        async move {
            env.kubectl(&[
                "get",
                kind,
                "-A",
                "-l",
                "app.kubernetes.io/part-of=capstan",
                "-o",
                "name",
            ])
            .await
            .ok()
            .stdout
        }
    };
    let kinds = [
        "deployments",
        "services",
        "networkpolicies",
        "serviceaccounts",
        "resourcequotas",
        "clusterroles",
        "clusterrolebindings",
    ];
    for kind in kinds {
        assert!(!labelled(kind).await.is_empty(), "no {kind} installed");
    }

    let run = env.capstan(&["uninstall", "--silent"]).await.ok();
    assert_contains(
        &run.stderr,
        "✔ Deployment/flux-system/capstan-controller deleted",
    );
    for kind in kinds.into_iter().chain(["customresourcedefinitions"]) {
        assert_eq!(labelled(kind).await, "", "{kind} left after uninstall");
    }
    let crds = env.kubectl(&["get", "crd", "-o", "name"]).await.ok().stdout;
    assert!(!crds.contains("toolkit.fluxcd.io"), "{crds}");
    capstan_testkit::eventually(
        std::time::Duration::from_secs(30),
        "the flux-system namespace to be gone",
        || async { (!exists(&env, &["namespace", "flux-system"]).await).then_some(()) },
    )
    .await;
}

/// The repository root.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(command: &mut Command) -> Run {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    out.into()
}

/// Reads a blob of an OCI layout by digest.
fn blob(layout: &Path, digest: &str) -> Vec<u8> {
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    std::fs::read(layout.join("blobs/sha256").join(hex)).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn the_image_runs_capstan_as_non_root_from_its_one_layer_and_pushes_with_skopeo() {
    capstan_testkit::require("skopeo");
    let registry = capstan_testkit::Registry::start().await;
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("oci");
    let binary = env!("CARGO_BIN_EXE_capstan");
    let remote = format!("docker://{}/capstan:test", registry.address);
    let built = run(Command::new(repo_root().join("scripts/build-image"))
        .args([
            "--binary",
            binary,
            "--source",
            "https://example.test/capstan",
        ])
        .arg("--output")
        .arg(&layout)
        .args(["--push", &remote, "--insecure"]))
    .ok();
    let digest = built.stdout.trim().to_owned();
    assert!(digest.starts_with("sha256:"), "{}", built.stdout);

    // skopeo reads the layout: user, entrypoint, labels.
    let config = run(Command::new("skopeo")
        .args(["inspect", "--config"])
        .arg(format!("oci:{}", layout.display())))
    .ok()
    .json();
    assert_eq!(config["config"]["User"], "65532:65532", "{config}");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/capstan"])
    );
    let labels = &config["config"]["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.source"],
        "https://example.test/capstan"
    );
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    let revision = labels["org.opencontainers.image.revision"]
        .as_str()
        .unwrap_or_default();
    assert!(
        revision.len() == 40 && revision.chars().all(|c| c.is_ascii_hexdigit()),
        "{labels}"
    );
    assert!(
        labels["org.opencontainers.image.created"]
            .as_str()
            .is_some_and(|c| c.ends_with('Z')),
        "{labels}"
    );

    // One layer, unpacked to a root filesystem: the binary, exactly the libraries ldd names,
    // the passwd/group of user 65532, and no shell.
    let index: Value = serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap())
        .expect("index.json");
    assert_eq!(index["manifests"][0]["digest"], digest.as_str());
    // Tagged as the install manifests pull it: v<version>.
    assert_eq!(
        index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
        format!("v{}", env!("CARGO_PKG_VERSION")),
        "{index}"
    );
    let manifest: Value = serde_json::from_slice(&blob(&layout, &digest)).unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    let layer = layout.join("blobs/sha256").join(
        layers[0]["digest"]
            .as_str()
            .unwrap()
            .trim_start_matches("sha256:"),
    );
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir(&rootfs).unwrap();
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&layer)
        .arg("-C")
        .arg(&rootfs))
    .ok();
    // The OpenSSH client too (GitRepositories over ssh run it), with its libraries.
    let ssh = run(Command::new("sh").args(["-c", "readlink -f \"$(command -v ssh)\""]))
        .ok()
        .stdout;
    let ldd = run(Command::new("ldd").arg(binary)).ok().stdout
        + &run(Command::new("ldd").arg(ssh.trim())).ok().stdout;
    let mut libraries: Vec<&str> = ldd
        .lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let (&[_, "=>", path, ..] | &[path, ..]) = words.as_slice() else {
                return None;
            };
            path.starts_with('/').then_some(path)
        })
        .collect();
    libraries.sort_unstable();
    libraries.dedup();
    let mut expected: Vec<String> = [
        "capstan",
        "usr/bin/ssh",
        "etc/group",
        "etc/nsswitch.conf",
        "etc/passwd",
        "etc/ssl/certs/ca-certificates.crt",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain(
        libraries
            .iter()
            .map(|l| l.trim_start_matches('/').to_owned()),
    )
    .collect();
    expected.sort();
    let files = run(Command::new("find")
        .arg(".")
        .args(["-type", "f", "-printf", "%P\\n"])
        .current_dir(&rootfs))
    .ok()
    .stdout;
    let mut files: Vec<String> = files.lines().map(str::to_owned).collect();
    files.sort();
    assert_eq!(files, expected);
    assert!(!rootfs.join("bin/sh").exists());
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    assert_contains(&passwd, "nonroot:x:65532:65532:");

    // The binary runs there as user 65532 (we are root in CI, so chroot works; otherwise an
    // unprivileged user namespace maps us to root for the chroot).
    let root = run(Command::new("id").arg("-u")).ok().stdout.trim() == "0";
    let version = if root {
        run(Command::new("chroot")
            .arg("--userspec=65532:65532")
            .arg(&rootfs)
            .args(["/capstan", "--version"]))
    } else {
        run(Command::new("unshare")
            .args(["--user", "--map-root-user", "chroot"])
            .arg(&rootfs)
            .args(["/capstan", "--version"]))
    }
    .ok();
    assert_eq!(
        version.stdout.trim(),
        format!("capstan {}", env!("CARGO_PKG_VERSION"))
    );

    // ssh runs there as 65532 too, on PATH, and through a fetch's `ssh` link to /capstan (as
    // the source controller runs it: no shell in the image), with that fetch's ssh_config.
    assert_eq!(config["config"]["Env"][0], "PATH=/usr/bin:/", "{config}");
    let fetch_dir = rootfs.join("tmp/capstan-git-test");
    std::fs::create_dir(&fetch_dir).unwrap();
    std::os::unix::fs::symlink("/capstan", fetch_dir.join("ssh")).unwrap();
    std::fs::write(fetch_dir.join("ssh_config"), "Host *\n  BatchMode yes\n").unwrap();
    // ssh opens /dev/null, which container runtimes provide: so does the chroot here.
    std::fs::create_dir(rootfs.join("dev")).unwrap();
    std::fs::write(rootfs.join("dev/null"), "").unwrap();
    let in_chroot = r#"mount --bind /dev/null "$0/dev/null" && exec chroot "$@""#;
    for ssh in ["/usr/bin/ssh", "/tmp/capstan-git-test/ssh"] {
        let ran = if root {
            run(Command::new("unshare")
                .args(["--mount", "sh", "-c", in_chroot])
                .arg(&rootfs)
                .arg("--userspec=65532:65532")
                .arg(&rootfs)
                .args([ssh, "-V"]))
        } else {
            run(Command::new("unshare")
                .args([
                    "--user",
                    "--map-root-user",
                    "--mount",
                    "sh",
                    "-c",
                    in_chroot,
                ])
                .arg(&rootfs)
                .arg(&rootfs)
                .args([ssh, "-V"]))
        }
        .ok();
        assert_contains(&ran.stderr, "OpenSSH_");
    }

    // Pushed to the registry as built: the same manifest, the same config.
    let pushed = run(Command::new("skopeo").args(["inspect", "--tls-verify=false", &remote]))
        .ok()
        .json();
    assert_eq!(pushed["Digest"], digest.as_str(), "{pushed}");
    assert_eq!(pushed["Labels"], *labels);
    let pushed_config =
        run(Command::new("skopeo").args(["inspect", "--config", "--tls-verify=false", &remote]))
            .ok()
            .json();
    assert_eq!(pushed_config["config"]["User"], "65532:65532");
}

/// The revision label follows the commit the binary says it was built from (`--version`, set by
/// `CAPSTAN_COMMIT` at build time), not whatever the checkout holds now.
#[test]
fn the_revision_label_is_the_commit_the_binary_names() {
    use std::os::unix::fs::PermissionsExt;
    capstan_testkit::require("skopeo");
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("capstan");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    std::fs::write(
        &binary,
        format!("#!/bin/sh\necho 'capstan 9.8.7 (commit {commit})'\n"),
    )
    .unwrap();
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    let layout = dir.path().join("oci");
    run(Command::new(repo_root().join("scripts/build-image"))
        .arg("--binary")
        .arg(&binary)
        .arg("--output")
        .arg(&layout)
        .args(["--source", "https://example.test/capstan"]))
    .ok();
    let config = run(Command::new("skopeo")
        .args(["inspect", "--config"])
        .arg(format!("oci:{}", layout.display())))
    .ok()
    .json();
    let labels = &config["config"]["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.revision"], commit,
        "{labels}"
    );
    assert_eq!(
        labels["org.opencontainers.image.version"], "9.8.7",
        "{labels}"
    );

    // An output directory holding anything but an OCI layout is never replaced.
    let precious = dir.path().join("precious");
    std::fs::create_dir(&precious).unwrap();
    std::fs::write(precious.join("notes.txt"), "keep me").unwrap();
    let refused = run(Command::new(repo_root().join("scripts/build-image"))
        .arg("--binary")
        .arg(&binary)
        .arg("--output")
        .arg(&precious))
    .fails();
    assert_contains(
        &refused.stderr,
        "is not an OCI layout: refusing to replace it",
    );
    assert!(precious.join("notes.txt").exists());
}
