//! The `capstan` binary as a user runs it: `dev`, `install --export`, `kustomize build`.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use capstan_testkit::{corpus, eventually};

use crate::helm_cli::{assert_helm_media_types, skopeo_manifest};
use crate::support::{self, Dev, kubectl};

/// GET over plain HTTP/1.0, returning (status line, body).
async fn http_get(url: &str) -> (String, String) {
    let rest = url.strip_prefix("http://").expect("http URL");
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let mut stream = tokio::net::TcpStream::connect(host).await.expect("connect");
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

/// Runs `git` in `dir` with a fixed identity.
fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Newcomer")
        .env("GIT_AUTHOR_EMAIL", "newcomer@capstan.invalid")
        .env("GIT_COMMITTER_NAME", "Newcomer")
        .env("GIT_COMMITTER_EMAIL", "newcomer@capstan.invalid")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The README's walkthrough: `capstan dev` serves the API with Capstan's CRDs, the artifact
/// server, the example fleet and the registry holding its chart, reconciles the fleet to Ready
/// (the Helm app config included), a change pushed to the fleet's Git repository lands in the
/// cluster, and so does a new chart version pushed to the registry and picked in the app config.
#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn capstan_dev_reconciles_the_example_fleet_and_a_pushed_change_lands() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    // Keep reading stderr so the child never blocks on a full pipe; collect it for asserts.
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (mut child, said) = support::spawn_dev(
        support::capstan_command()
            .args([
                "dev",
                "--listen",
                "127.0.0.1:0",
                "--storage-addr",
                "127.0.0.1:0",
                "--git-listen",
                "127.0.0.1:0",
                "--registry-listen",
                "127.0.0.1:0",
                // Flux's flag; two workers per kind are enough for the fleet's health waits.
                "--concurrent",
                "2",
                "--kubeconfig",
            ])
            .arg(&kubeconfig)
            .arg("--storage-path")
            .arg(dir.path().join("artifacts"))
            .arg("--git-root")
            .arg(dir.path().join("git"))
            .arg("--registry-root")
            .arg(dir.path().join("registry")),
        Some(log.clone()),
    )
    .await;
    let mut artifacts = None;
    let mut fleet = None;
    let mut registry = None;
    for line in &said {
        if let Some(url) = line.strip_prefix("capstan dev: artifacts, /metrics and /healthz at ") {
            artifacts = Some(url.trim().to_owned());
        }
        if let Some(rest) = line.strip_prefix("capstan dev: example fleet at ") {
            fleet = rest.split_whitespace().next().map(str::to_owned);
        }
        if let Some(rest) = line.strip_prefix("capstan dev: OCI registry at http://") {
            registry = rest.split_whitespace().next().map(str::to_owned);
        }
    }
    let artifacts = artifacts.expect("capstan dev prints the artifact server address");
    let fleet = fleet.expect("capstan dev prints the example fleet's Git URL");
    let registry = registry.expect("capstan dev prints the registry's address");

    let (status, body) = http_get(&format!("{artifacts}/healthz")).await;
    assert!(status.contains("200"), "{status}");
    assert_eq!(body.trim(), "ok");
    let (status, _) = http_get(&format!("{artifacts}/metrics")).await;
    assert!(status.contains("200"), "{status}");

    let home = dir.path();
    let out = kubectl(&kubeconfig, home, &["get", "crd", "-o", "name"])
        .await
        .ok();
    for crd in [
        "gitrepositories.source.toolkit.fluxcd.io",
        "kustomizations.kustomize.toolkit.fluxcd.io",
        "helmreleases.helm.toolkit.fluxcd.io",
    ] {
        assert!(
            out.stdout.contains(crd),
            "{crd} missing from:\n{}",
            out.stdout
        );
    }

    // The fleet: the root Kustomization applies clusters/local, whose Kustomizations apply
    // the namespaces, then dev, then prod (dependsOn), each waiting for health.
    let ready = |name: &'static str| {
        let kubeconfig = kubeconfig.clone();
        async move {
            let out = kubectl(
                &kubeconfig,
                home,
                &[
                    "wait",
                    "--for=condition=Ready",
                    "--timeout=90s",
                    "-n",
                    "flux-system",
                    &format!("kustomization/{name}"),
                ],
            )
            .await;
            out.ok();
        }
    };
    for name in [
        "fleet",
        "infrastructure",
        "apps-dev",
        "apps-prod",
        "apps-helm",
    ] {
        ready(name).await;
    }
    // kubectl prints the CRD's printer columns; a `date` column reads as an age, as on a cluster.
    let table = kubectl(
        &kubeconfig,
        home,
        &["get", "kustomizations", "-n", "flux-system"],
    )
    .await
    .ok();
    let mut lines = table.stdout.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "AGE", "READY", "STATUS"],
        "{}",
        table.stdout
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert!(
        row[1].ends_with('s') && row[1].trim_end_matches('s').parse::<u32>().is_ok(),
        "AGE is an age like `12s`: {}",
        table.stdout
    );
    assert_eq!(row[2], "True");
    let replicas = kubectl(
        &kubeconfig,
        home,
        &[
            "get",
            "deploy",
            "hello",
            "-n",
            "hello-prod",
            "-o",
            "jsonpath={.spec.replicas}",
        ],
    )
    .await
    .ok();
    assert_eq!(replicas.stdout, "3", "the prod overlay's patch");
    let greeting = |namespace: &'static str| {
        let kubeconfig = kubeconfig.clone();
        async move {
            kubectl(
                &kubeconfig,
                home,
                &[
                    "get",
                    "configmap",
                    "-n",
                    namespace,
                    "-l",
                    "app.kubernetes.io/name=hello",
                    "-o",
                    "jsonpath={.items[*].data.greeting}",
                ],
            )
            .await
            .ok()
            .stdout
        }
    };
    assert_eq!(
        greeting("hello-prod").await,
        "hello from production",
        "postBuild substitution"
    );
    assert_eq!(greeting("hello-dev").await, "hello from dev");

    // A newcomer clones the fleet, changes the dev greeting and pushes.
    let clone = dir.path().join("clone");
    git(
        dir.path(),
        &["clone", "-q", &fleet, &clone.to_string_lossy()],
    );
    let file = clone.join("apps/dev/kustomization.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("hello from dev", "hello from a pushed commit"),
    )
    .unwrap();
    git(&clone, &["commit", "-q", "-am", "Change the dev greeting"]);
    git(&clone, &["push", "-q", "origin", "main"]);
    eventually(
        Duration::from_secs(60),
        "the pushed change to land (the old ConfigMap is pruned too)",
        || async { (greeting("hello-dev").await == "hello from a pushed commit").then_some(()) },
    )
    .await;
    let printed = log.lock().unwrap().clone();
    assert!(
        printed.contains("✔ Kustomization/apps-prod: Applied revision: main@sha1:"),
        "capstan dev reports readiness:\n{printed}"
    );

    // The Helm app config: the chart capstan dev published, as Helm's media types (skopeo, an
    // independent client, reads the registry), released at the version and image it names.
    capstan_testkit::require("skopeo");
    let manifest = skopeo_manifest(&format!("docker://{registry}/charts/hello:0.1.0"));
    assert_helm_media_types(&manifest);
    let image = || {
        let kubeconfig = kubeconfig.clone();
        async move {
            kubectl(
                &kubeconfig,
                home,
                &[
                    "get",
                    "deploy",
                    "hello",
                    "-n",
                    "hello-helm",
                    "-o",
                    "jsonpath={.spec.template.spec.containers[0].image}",
                ],
            )
            .await
            .ok()
            .stdout
        }
    };
    assert_eq!(image().await, "ghcr.io/stefanprodan/podinfo:6.7.1");

    // CI publishes chart 0.2.0 with the CLI; the app config picks it and a new image tag.
    let chart = clone.join("charts/hello/Chart.yaml");
    let text = std::fs::read_to_string(&chart).unwrap();
    std::fs::write(&chart, text.replace("version: 0.1.0", "version: 0.2.0")).unwrap();
    let out = capstan(&[
        "helm",
        "package",
        &clone.join("charts/hello").to_string_lossy(),
        "-d",
        &dir.path().to_string_lossy(),
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = capstan(&[
        "helm",
        "push",
        &dir.path().join("hello-0.2.0.tgz").to_string_lossy(),
        &format!("oci://{registry}/charts"),
        "--plain-http",
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = clone.join("apps/helm/app-config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("tag: 0.1.0", "tag: 0.2.0")
            .replace("tag: 6.7.1", "tag: 6.7.2"),
    )
    .unwrap();
    git(
        &clone,
        &["commit", "-q", "-am", "hello 0.2.0 with podinfo 6.7.2"],
    );
    git(&clone, &["push", "-q", "origin", "main"]);
    // The new values may land before the new chart (an upgrade with chart 0.1.0 first), as in
    // Flux; the release ends deployed at 0.2.0 with its history kept.
    let release = || {
        let kubeconfig = kubeconfig.clone();
        async move {
            kubectl(
                &kubeconfig,
                home,
                &["get", "hr", "hello", "-n", "hello-helm", "-o", "json"],
            )
            .await
            .ok()
            .json()
        }
    };
    let history = eventually(
        Duration::from_secs(90),
        "the chart upgrade to land",
        || async {
            let history = release().await["status"]["history"].clone();
            // An OCI chart's version carries its digest, as Flux's (`0.2.0+<12 hex>`).
            (history[0]["chartVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("0.2.0+"))
                && history[0]["status"] == "deployed")
                .then_some(history)
        },
    )
    .await;
    assert_eq!(image().await, "ghcr.io/stefanprodan/podinfo:6.7.2");
    let oldest = history.as_array().and_then(|h| h.last()).unwrap();
    assert_eq!(oldest["version"], 1, "{history}");
    assert!(
        oldest["chartVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("0.1.0+")),
        "{history}"
    );
    let printed = log.lock().unwrap().clone();
    assert!(
        printed.contains("✔ HelmRelease/hello-helm/hello: "),
        "capstan dev reports the release:\n{printed}"
    );
    child.kill().await.unwrap();
}

#[tokio::test]
async fn install_export_prints_the_committed_manifests() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["install", "--export"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../manifests/install.yaml"
    ))
    .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), committed);
}

#[tokio::test]
async fn kustomize_build_prints_what_kubectl_kustomize_prints() {
    let root = corpus("kustomize");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args([
            "kustomize",
            "build",
            "ex-helloworld-03-overlays-staging/overlays/staging",
        ])
        .current_dir(&root)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected =
        std::fs::read_to_string(root.join("ex-helloworld-03-overlays-staging.expected.yaml"))
            .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);

    let missing = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["kustomize", "build", "own-err-missing-resource"])
        .current_dir(&root)
        .output()
        .await
        .unwrap();
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("nope.yaml") && stderr.contains("resources"),
        "{stderr}"
    );
}

async fn capstan(args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(args)
        .output()
        .await
        .unwrap()
}

/// `capstan push artifact` produces Flux's media types and annotations (inspected with
/// skopeo), signs with a cosign key, and `capstan pull artifact --verify-key` pulls only what
/// a trusted key signed.
#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn push_signs_and_pull_verifies_artifacts_in_a_real_registry() {
    use capstan_source::oci::SigningKey;
    let registry = capstan_testkit::Registry::start().await;
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    std::fs::create_dir_all(source.join("apps")).unwrap();
    std::fs::write(source.join("apps/app.yaml"), "kind: ConfigMap\n").unwrap();
    let key = SigningKey::generate();
    let key_file = dir.path().join("cosign.key");
    std::fs::write(&key_file, key.to_pkcs8_pem()).unwrap();
    let public = dir.path().join("cosign.pub");
    std::fs::write(&public, key.public_key("cosign.pub").to_pem()).unwrap();
    let other = dir.path().join("other.pub");
    std::fs::write(
        &other,
        SigningKey::generate().public_key("other.pub").to_pem(),
    )
    .unwrap();

    let signed_url = format!("{}:v1", registry.url("apps/signed"));
    let path = source.to_string_lossy().into_owned();
    let out = capstan(&[
        "push",
        "artifact",
        &signed_url,
        "--path",
        &path,
        "--source",
        "https://example.invalid/fleet.git",
        "--revision",
        "main@sha1:0123456789abcdef0123456789abcdef01234567",
        "--insecure",
        "--sign-key",
        &key_file.to_string_lossy(),
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let digest = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(digest.starts_with("sha256:"), "prints the digest: {digest}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(".sig"),
        "reports the signature tag"
    );

    // skopeo, an independent client, sees Flux's manifest.
    capstan_testkit::require("skopeo");
    let manifest = skopeo_manifest(&format!("docker://{}/apps/signed:v1", registry.address));
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.cncf.flux.config.v1+json"
    );
    assert_eq!(
        manifest["layers"][0]["mediaType"],
        "application/vnd.cncf.flux.content.v1.tar+gzip"
    );
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.revision"],
        "main@sha1:0123456789abcdef0123456789abcdef01234567"
    );
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.source"],
        "https://example.invalid/fleet.git"
    );

    // Pull with the right key: verified, extracted, revision printed.
    let output = dir.path().join("pulled");
    let out = capstan(&[
        "pull",
        "artifact",
        &signed_url,
        "--output",
        &output.to_string_lossy(),
        "--insecure",
        "--verify-key",
        &other.to_string_lossy(),
        "--verify-key",
        &public.to_string_lossy(),
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("verified {digest}")));
    assert_eq!(
        std::fs::read_to_string(output.join("apps/app.yaml")).unwrap(),
        "kind: ConfigMap\n"
    );

    // Only a foreign key: refused, nothing extracted.
    let refused = dir.path().join("refused");
    let out = capstan(&[
        "pull",
        "artifact",
        &signed_url,
        "--output",
        &refused.to_string_lossy(),
        "--insecure",
        "--verify-key",
        &other.to_string_lossy(),
    ])
    .await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("verifying the signature"));
    assert!(!refused.join("apps").exists(), "nothing extracted");

    // An unsigned artifact: refused.
    let unsigned_url = format!("{}:v1", registry.url("apps/unsigned"));
    let out = capstan(&[
        "push",
        "artifact",
        &unsigned_url,
        "--path",
        &path,
        "--source",
        "s",
        "--revision",
        "r",
        "--insecure",
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = capstan(&[
        "pull",
        "artifact",
        &unsigned_url,
        "--output",
        &refused.to_string_lossy(),
        "--insecure",
        "--verify-key",
        &public.to_string_lossy(),
    ])
    .await;
    assert!(!out.status.success(), "an unsigned artifact is refused");
    assert!(!refused.join("apps").exists());
}

/// `capstan dev` refuses flags that its other flags make meaningless (the example's servers
/// without the example, the controllers' storage and workers without controllers) as clap
/// refuses any bad combination (exit code 2, both flags named), instead of ignoring them.
#[tokio::test]
async fn dev_refuses_flags_it_would_ignore() {
    for (flags, given, turned_off) in [
        (
            &["--no-example", "--git-listen", "127.0.0.1:0"][..],
            "--git-listen",
            "--no-example",
        ),
        (
            &["--no-controllers", "--git-listen", "127.0.0.1:0"][..],
            "--git-listen",
            "--no-controllers",
        ),
        (
            &["--no-example", "--registry-root", "/tmp/r"][..],
            "--registry-root",
            "--no-example",
        ),
        (
            &["--no-controllers", "--concurrent", "2"][..],
            "--concurrent",
            "--no-controllers",
        ),
        (
            &["--storage-path", "/tmp/a", "--no-controllers"][..],
            "--storage-path",
            "--no-controllers",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
            .arg("dev")
            .args(flags)
            .args(["--listen", "127.0.0.1:0", "--kubeconfig"])
            .arg(dir.path().join("kubeconfig"))
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(30), out)
            .await
            .unwrap_or_else(|_| panic!("capstan dev {flags:?} was not refused: it started"))
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(
            stderr.contains(given) && stderr.contains(turned_off),
            "{flags:?}: {stderr}"
        );
        assert!(!dir.path().join("kubeconfig").exists(), "{flags:?}");
    }
}

/// `capstan dev --no-example` still creates Flux's namespace `flux-system`, as the example and
/// `flux install` do, and says so.
#[tokio::test(flavor = "multi_thread")]
async fn dev_without_the_example_still_creates_flux_system() {
    let Dev {
        dir,
        kubeconfig,
        mut child,
        said,
    } = Dev::start(&[]).await;
    assert!(
        said.iter()
            .any(|line| line.starts_with("capstan dev: namespace flux-system created")),
        "{said:#?}"
    );
    assert!(
        !said.iter().any(|line| line.contains("example fleet at")),
        "{said:#?}"
    );
    let out = kubectl(
        &kubeconfig,
        dir.path(),
        &["get", "namespace", "flux-system", "-o", "name"],
    )
    .await
    .ok();
    assert_eq!(out.stdout.trim(), "namespace/flux-system");
    child.kill().await.ok();
}

/// Without a kubeconfig, the Flux-like verbs say why once and end with what to do.
#[tokio::test]
async fn a_missing_kubeconfig_is_reported_once_with_a_hint_last() {
    let home = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["get", "kustomizations"])
        .env("HOME", home.path())
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(
        stderr.trim_end().lines().last(),
        Some("hint: pass --kubeconfig, or export KUBECONFIG=.capstan/kubeconfig for capstan dev"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("(os error 2)").count(), 1, "{stderr}");
    assert!(stderr.contains(".kube/config"), "{stderr}");
}

/// `push/pull artifact` refuse an address without `oci://` before contacting anything: a
/// typo must not send the artifact to Docker Hub.
#[tokio::test]
async fn artifact_addresses_without_oci_scheme_are_refused_offline() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("{address}/app:v1");
    for args in [
        vec![
            "push",
            "artifact",
            &url,
            "--path",
            dir.path().to_str().unwrap(),
            "--source",
            "https://example.invalid/repo",
            "--revision",
            "main@sha1:0",
            "--insecure",
        ],
        vec![
            "pull",
            "artifact",
            &url,
            "--output",
            dir.path().to_str().unwrap(),
            "--insecure",
        ],
    ] {
        let out = capstan(&args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "invalid URL '{url}': an artifact address must start with oci://"
            )),
            "{stderr}"
        );
    }
    let connected = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(connected.is_err(), "capstan contacted {address}");
}
