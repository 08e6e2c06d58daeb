//! `capstan install`: the generated manifests apply to the embedded control plane (`capstan dev
//! --no-controllers`) with `kubectl apply --server-side` and with `capstan install`, and
//! `capstan controller`, run out of cluster as the installed ServiceAccount, reconciles a
//! GitRepository and a Kustomization with the installed RBAC, and is refused without one rule.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

use capstan_testkit::{GitServer, Run, eventually};

use crate::support;

const ACCOUNT: &str = "system:serviceaccount:flux-system:capstan-controller";

/// The control plane alone, with what these tests add to it.
struct ControlPlane(support::ControlPlane);

impl std::ops::Deref for ControlPlane {
    type Target = support::ControlPlane;
    fn deref(&self) -> &support::ControlPlane {
        &self.0
    }
}

impl ControlPlane {
    async fn start() -> Self {
        Self(support::ControlPlane::start().await)
    }

    /// A copy of the kubeconfig whose user impersonates `user` (kubeconfig's `as:`).
    fn impersonating(&self, user: &str) -> PathBuf {
        let text = std::fs::read_to_string(&self.kubeconfig).unwrap();
        assert_eq!(text.matches("  user: {}\n").count(), 1, "{text}");
        let copy = self.dir.path().join("impersonating-kubeconfig");
        std::fs::write(
            &copy,
            text.replace("  user: {}\n", &format!("  user:\n    as: {user}\n")),
        )
        .unwrap();
        copy
    }

    /// `capstan controller` with `kubeconfig`; its stderr is collected into the returned log.
    fn controller(&self, kubeconfig: &Path) -> (tokio::process::Child, Arc<Mutex<String>>) {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args(["controller", "--storage-addr", "127.0.0.1:0"])
            .args(["--receiver-addr", "127.0.0.1:0"])
            .arg("--storage-path")
            .arg(self.dir.path().join("artifacts"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .env_remove("RUNTIME_NAMESPACE")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        (child, log)
    }
}

/// The export applies with kubectl's server-side apply over what `capstan dev` created (its
/// tenancy objects), `capstan install` applies the same objects again (idempotent) and says why
/// it does not wait on a control plane without nodes; the objects carry the contract labels.
#[tokio::test(flavor = "multi_thread")]
async fn install_manifests_apply_with_kubectl_and_with_capstan_install() {
    let plane = ControlPlane::start().await;
    // capstan dev created the tenancy objects from the same generator (issue 13).
    for account in ["kustomize-controller", "helm-controller"] {
        plane
            .kubectl(&["-n", "flux-system", "get", "serviceaccount", account])
            .await
            .ok();
    }
    let reconciler = plane
        .kubectl(&[
            "get",
            "clusterrolebinding",
            "cluster-reconciler-flux-system",
            "-o",
            "json",
        ])
        .await
        .ok()
        .json();
    assert_eq!(reconciler["roleRef"]["name"], "cluster-admin");

    let export = plane.capstan(&["install", "--export"]).await.ok();
    let file = plane.dir.path().join("install.yaml");
    std::fs::write(&file, &export.stdout).unwrap();
    let applied = plane
        .kubectl(&["apply", "--server-side", "-f", file.to_str().unwrap()])
        .await
        .ok();
    assert!(
        applied
            .stdout
            .contains("deployment.apps/capstan-controller serverside-applied"),
        "{}",
        applied.stdout
    );
    assert!(
        applied
            .stdout
            .contains("networkpolicy.networking.k8s.io/allow-egress serverside-applied"),
        "{}",
        applied.stdout
    );

    let install = plane.capstan(&["install"]).await.ok();
    assert!(install.stderr.contains("applied"), "{}", install.stderr);
    assert!(install.stderr.contains("no nodes"), "{}", install.stderr);
    plane.capstan(&["install", "--wait=false"]).await.ok();

    let deployment = plane
        .kubectl(&[
            "-n",
            "flux-system",
            "get",
            "deployment",
            "capstan-controller",
            "-o",
            "json",
            "--show-managed-fields",
        ])
        .await
        .ok()
        .json();
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    assert_eq!(labels["app.kubernetes.io/part-of"], "capstan");
    assert_eq!(labels["app.kubernetes.io/component"], "controller");
    let managers: Vec<&str> = deployment["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"capstan"), "{managers:?}");
    let services = plane
        .kubectl(&[
            "-n",
            "flux-system",
            "get",
            "services",
            "-l",
            "app.kubernetes.io/part-of=capstan",
            "-o",
            "name",
        ])
        .await
        .ok();
    assert!(
        services.stdout.contains("service/source-controller")
            && services.stdout.contains("service/webhook-receiver"),
        "{}",
        services.stdout
    );

    watch_one_namespace(&plane, &deployment).await;
}

/// `capstan install --watch-all-namespaces=false` sets what Flux's manifests set: the flag, and
/// `RUNTIME_NAMESPACE` from the Pod's own namespace (`deployment` is the default install's).
async fn watch_one_namespace(plane: &ControlPlane, deployment: &serde_json::Value) {
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert!(
        container["args"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("--watch-all-namespaces=true")),
        "{container}"
    );
    plane
        .capstan(&["install", "--watch-all-namespaces=false", "--wait=false"])
        .await
        .ok();
    let deployment = plane
        .kubectl(&[
            "-n",
            "flux-system",
            "get",
            "deployment",
            "capstan-controller",
            "-o",
            "json",
        ])
        .await
        .ok()
        .json();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args = container["args"].as_array().unwrap();
    assert!(
        args.contains(&serde_json::json!("--watch-all-namespaces=false"))
            && !args.contains(&serde_json::json!("--watch-all-namespaces=true")),
        "{container}"
    );
    let env = container["env"].as_array().unwrap();
    let runtime_namespace = env
        .iter()
        .find(|e| e["name"] == "RUNTIME_NAMESPACE")
        .expect("RUNTIME_NAMESPACE");
    assert_eq!(
        runtime_namespace["valueFrom"]["fieldRef"]["fieldPath"], "metadata.namespace",
        "{container}"
    );
}

/// On a cluster with nodes `capstan install` waits for the Deployment: Ready (the embedded control
/// plane's workload simulator rolls it out), and a rollout that hangs ends in a timeout naming
/// what it saw.
#[tokio::test(flavor = "multi_thread")]
async fn capstan_install_waits_for_the_deployment_and_times_out_on_a_hung_rollout() {
    let plane = ControlPlane::start().await;
    let node = plane.dir.path().join("node.yaml");
    std::fs::write(
        &node,
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: worker-1\n",
    )
    .unwrap();
    plane
        .kubectl(&["create", "-f", node.to_str().unwrap()])
        .await
        .ok();
    let install = plane.capstan(&["install", "--timeout", "60s"]).await.ok();
    assert!(
        install.stderr.contains("capstan-controller is ready"),
        "{}",
        install.stderr
    );
    plane
        .kubectl(&[
            "-n",
            "flux-system",
            "annotate",
            "deployment",
            "capstan-controller",
            "sim.capstan.dev/rollout=hang",
        ])
        .await
        .ok();
    let hung = plane
        .capstan(&["install", "--concurrent", "5", "--timeout", "2s"])
        .await
        .fails();
    assert!(
        hung.stderr
            .contains("timed out after 2s waiting for Deployment flux-system/capstan-controller")
            && hung
                .stderr
                .contains("hint: kubectl -n flux-system describe deployment"),
        "{}",
        hung.stderr
    );
}

/// The RBAC proof. With `cluster-reconciler-flux-system` limited to Flux's two appliers (the multi-tenant
/// lockdown: Capstan's own account is not a cluster administrator), `capstan controller` run
/// as `flux-system:capstan-controller` elects itself and reconciles a GitRepository, a
/// Kustomization applying as `kustomize-controller` and a HelmRelease (its HelmChart from the
/// same repository) installing as `helm-controller` to Ready, without one Forbidden; with the
/// leases rule removed from its ClusterRole, it is refused (the check can fail).
#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn the_installed_service_account_is_enough_and_one_rule_less_is_forbidden() {
    let plane = ControlPlane::start().await;
    plane.capstan(&["install"]).await.ok();
    let subjects = plane
        .kubectl(&[
            "get",
            "clusterrolebinding",
            "cluster-reconciler-flux-system",
            "-o",
            "jsonpath={.subjects[*].name}",
        ])
        .await
        .ok();
    assert_eq!(
        subjects.stdout,
        "kustomize-controller helm-controller capstan-controller"
    );
    plane
        .kubectl(&[
            "patch",
            "clusterrolebinding",
            "cluster-reconciler-flux-system",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/subjects/2"}]"#,
        ])
        .await
        .ok();

    let git = GitServer::start().await;
    git.commit(
        &[
            (
                "app/proof.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: proof\n---\n\
                 apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: proof\n  \
                 namespace: proof\ndata:\n  applied-by: kustomize-controller\n",
            ),
            (
                "charts/proof/Chart.yaml",
                "apiVersion: v2\nname: proof\nversion: 0.1.0\n",
            ),
            (
                "charts/proof/templates/configmap.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n\
                 data:\n  installed-by: helm-controller\n",
            ),
        ],
        "proof",
    );
    let objects = plane.dir.path().join("sync.yaml");
    std::fs::write(
        &objects,
        format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  \
             name: proof\n  namespace: flux-system\nspec:\n  interval: 1m\n  url: {}\n  \
             ref:\n    branch: main\n---\n\
             apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  \
             name: proof\n  namespace: flux-system\nspec:\n  interval: 1m\n  path: ./app\n  \
             prune: true\n  serviceAccountName: kustomize-controller\n  sourceRef:\n    \
             kind: GitRepository\n    name: proof\n---\n\
             apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  \
             name: proof\n  namespace: flux-system\nspec:\n  interval: 1m\n  \
             targetNamespace: proof-helm\n  serviceAccountName: helm-controller\n  \
             install:\n    createNamespace: true\n  chart:\n    spec:\n      \
             chart: ./charts/proof\n      sourceRef:\n        kind: GitRepository\n        \
             name: proof\n",
            git.url()
        ),
    )
    .unwrap();
    plane
        .kubectl(&["apply", "-f", objects.to_str().unwrap()])
        .await
        .ok();

    let as_controller = plane.impersonating(ACCOUNT);
    // The impersonated account cannot do what it has no rule for.
    let denied = plane
        .kubectl_with(&as_controller, &["-n", "proof", "create", "configmap", "x"])
        .await
        .fails();
    assert!(denied.stderr.contains("forbidden"), "{}", denied.stderr);

    let (mut controller, log) = plane.controller(&as_controller);
    let ready = |kind: &'static str| {
        let plane = &plane;
        async move {
            let status = plane
                .kubectl(&[
                    "-n",
                    "flux-system",
                    "get",
                    kind,
                    "proof",
                    "-o",
                    r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#,
                ])
                .await;
            (status.stdout == "True").then_some(())
        }
    };
    eventually(Duration::from_secs(90), "the GitRepository Ready", || {
        ready("gitrepository")
    })
    .await;
    eventually(Duration::from_secs(90), "the Kustomization Ready", || {
        ready("kustomization")
    })
    .await;
    eventually(Duration::from_secs(90), "the HelmRelease Ready", || {
        ready("helmrelease")
    })
    .await;
    let installed = plane
        .kubectl(&[
            "-n",
            "proof-helm",
            "get",
            "configmap",
            // Flux's release name with a target namespace: <targetNamespace>-<name>.
            "proof-helm-proof",
            "-o",
            "jsonpath={.data.installed-by}",
        ])
        .await
        .ok();
    assert_eq!(installed.stdout, "helm-controller");
    let applied = plane
        .kubectl(&[
            "-n",
            "proof",
            "get",
            "configmap",
            "proof",
            "-o",
            "jsonpath={.data.applied-by}",
        ])
        .await
        .ok();
    assert_eq!(applied.stdout, "kustomize-controller");
    let lease = plane
        .kubectl(&[
            "-n",
            "flux-system",
            "get",
            "lease",
            "capstan-leader-election",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ])
        .await
        .ok();
    assert!(!lease.stdout.is_empty());
    let first = log.lock().unwrap().clone();
    assert!(
        !first.to_lowercase().contains("forbidden"),
        "the installed RBAC is not enough:\n{first}"
    );
    controller.kill().await.unwrap();

    // One rule less: the leases rule.
    let rules = plane
        .kubectl(&[
            "get",
            "clusterrole",
            "capstan-controller-flux-system",
            "-o",
            "json",
        ])
        .await
        .ok()
        .json();
    let index = rules["rules"]
        .as_array()
        .unwrap()
        .iter()
        .position(|r| r["resources"] == serde_json::json!(["leases"]))
        .expect("a leases rule");
    plane
        .kubectl(&[
            "patch",
            "clusterrole",
            "capstan-controller-flux-system",
            "--type=json",
            "-p",
            &format!(r#"[{{"op":"remove","path":"/rules/{index}"}}]"#),
        ])
        .await
        .ok();
    let (_controller, log) = plane.controller(&as_controller);
    eventually(
        Duration::from_secs(30),
        "the controller to be refused the Lease",
        || {
            let log = log.clone();
            async move {
                let log = log.lock().unwrap();
                (log.contains("cannot acquire the leader lease") && log.contains("forbidden"))
                    .then_some(())
            }
        },
    )
    .await;
}

/// A GitRepository in `namespace`, as YAML.
fn git_repository(namespace: &str) -> String {
    format!(
        "apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: fleet
  namespace: {namespace}
spec:
  interval: 1m
  url: https://example.invalid/fleet.git
"
    )
}

/// With Capstan installed in flux-system, `capstan install -n second` is refused (both
/// controllers would reconcile every namespace) and creates nothing; a second installation made
/// anyway (the export applied with kubectl) is uninstalled alone: its components go, flux-system's
/// Deployment, the CRDs and every Flux object stay, and so does the namespace holding one; the
/// last installation's uninstall then removes the CRDs.
#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn a_second_installation_is_refused_and_uninstalling_one_keeps_the_other() {
    let plane = ControlPlane::start().await;
    plane.capstan(&["install", "--wait=false"]).await.ok();
    let refused = plane
        .capstan(&["install", "-n", "second", "--wait=false"])
        .await
        .fails();
    assert!(
        refused.stderr.contains(
            "refusing to install Capstan in namespace second: it is already installed in \
             namespace flux-system"
        ),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("capstan uninstall -n flux-system"),
        "{}",
        refused.stderr
    );
    let refused = plane
        .capstan(&[
            "bootstrap",
            "git",
            "--url",
            "https://example.invalid/fleet.git",
            "--path",
            "clusters/one",
            "-n",
            "second",
            "--silent",
        ])
        .await
        .fails();
    assert!(
        refused.stderr.contains(
            "refusing to bootstrap Capstan in namespace second: it is already installed in \
             namespace flux-system"
        ),
        "{}",
        refused.stderr
    );
    let namespace = plane.kubectl(&["get", "namespace", "second"]).await;
    assert_ne!(namespace.status, 0, "{}", namespace.stdout);
    // Installing over the same namespace (an upgrade) is not another installation.
    plane.capstan(&["install", "--wait=false"]).await.ok();

    let export = plane
        .capstan(&["install", "--export", "-n", "second"])
        .await
        .ok();
    let path = plane.dir.path().join("second.yaml");
    std::fs::write(&path, export.stdout).unwrap();
    // The CRDs are shared: the first installation's labels on them conflict.
    plane
        .kubectl(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            path.to_str().unwrap(),
        ])
        .await
        .ok();
    for namespace in ["flux-system", "second"] {
        let path = plane.dir.path().join(format!("{namespace}-repo.yaml"));
        std::fs::write(&path, git_repository(namespace)).unwrap();
        plane
            .kubectl(&["apply", "-f", path.to_str().unwrap()])
            .await
            .ok();
    }

    let run = plane
        .capstan(&["uninstall", "-n", "second", "--silent"])
        .await
        .ok();
    for said in [
        "✔ Deployment/second/capstan-controller deleted",
        "Capstan is still installed in namespace flux-system: keeping the toolkit.fluxcd.io \
         custom resource definitions and every custom object",
        "Namespace/second kept: it holds 1 toolkit.fluxcd.io object(s)",
    ] {
        assert!(run.stderr.contains(said), "{said:?} in {}", run.stderr);
    }
    assert!(
        !run.stderr.contains("CustomResourceDefinition/"),
        "{}",
        run.stderr
    );
    let gone = plane
        .kubectl(&["-n", "second", "get", "deployment", "capstan-controller"])
        .await;
    assert_ne!(gone.status, 0, "{}", gone.stdout);
    plane
        .kubectl(&[
            "-n",
            "flux-system",
            "get",
            "deployment",
            "capstan-controller",
        ])
        .await
        .ok();
    plane
        .kubectl(&["get", "clusterrole", "capstan-controller-flux-system"])
        .await
        .ok();
    for namespace in ["flux-system", "second"] {
        plane
            .kubectl(&["-n", namespace, "get", "gitrepository", "fleet"])
            .await
            .ok();
    }

    let run = plane.capstan(&["uninstall", "--silent"]).await.ok();
    assert!(
        run.stderr
            .contains("CustomResourceDefinition/gitrepositories.source.toolkit.fluxcd.io deleted"),
        "{}",
        run.stderr
    );
}

/// Against a cluster nothing listens for, `capstan install`, `bootstrap` and `uninstall` each
/// say so in one line, naming the server, with no log line and no repeated cause.
#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_cluster_is_said_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: 'https://127.0.0.1:{port}'}}
contexts:
- name: c
  context: {{cluster: c, user: u}}
current-context: c
users:
- name: u
  user: {{token: t0ken}}
"
        ),
    )
    .unwrap();
    let said =
        format!("cannot reach the cluster at https://127.0.0.1:{port}: connection refused\n");
    for (args, prefix) in [
        (&["install", "--wait=false"][..], "error: "),
        (
            &[
                "bootstrap",
                "git",
                "--url",
                "https://example.invalid/fleet.git",
                "--path",
                "clusters/one",
                "--silent",
            ][..],
            "✗ ",
        ),
        (&["uninstall", "--silent"][..], "✗ "),
    ] {
        let run: Run = support::capstan(&kubeconfig, args)
            .current_dir(dir.path())
            .env_remove("RUST_LOG")
            .output()
            .await
            .unwrap()
            .into();
        assert_ne!(run.status, 0);
        assert_eq!(run.stderr, format!("{prefix}{said}"), "{args:?}");
    }
}
