//! Helpers for Kustomization tests: the Kustomization controller beside an [`Env`], a Git source
//! and a few objects. Shared by the `controllers` and `hostile` test binaries.

use std::time::Duration;

use capstan_api::{GitRepository, Kustomization};
use capstan_controllers::kustomization::KustomizationReconciler;
use capstan_controllers::runtime::{Controllers, Metrics, RuntimeConfig};
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

use crate::support::{Env, GitServer, eventually};

pub(crate) const NAMESPACE: &str = "apps";

/// The Kustomization controller, stopped on drop.
pub(crate) struct KustomizeController {
    shutdown: CancellationToken,
    metrics: Metrics,
}

impl KustomizeController {
    pub(crate) fn start(env: &Env) -> Self {
        Self::start_with(env.client.clone())
    }

    /// The controller talking to the control plane through `client`.
    pub(crate) fn start_with(client: kube::Client) -> Self {
        let shutdown = CancellationToken::new();
        let config = RuntimeConfig {
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(2),
            ..RuntimeConfig::default()
        };
        let controllers =
            Controllers::new(client.clone(), config).register(KustomizationReconciler::new(client));
        let metrics = controllers.metrics().clone();
        tokio::spawn(controllers.run(shutdown.clone()));
        Self { shutdown, metrics }
    }

    /// How many reconciles of the Kustomization `name` (in [`NAMESPACE`]) this controller has
    /// run, suspended ones included (`gotk_reconcile_duration_seconds_count`).
    pub(crate) fn reconciles(&self, name: &str) -> u64 {
        let series = format!(
            "gotk_reconcile_duration_seconds_count{{kind=\"Kustomization\",name=\"{name}\",namespace=\"{NAMESPACE}\"}} "
        );
        self.metrics
            .encode()
            .lines()
            .find_map(|line| line.strip_prefix(&series))
            .and_then(|count| count.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for KustomizeController {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The inventory entry ids of a Kustomization, in status order.
pub(crate) fn inventory_ids(object: &Kustomization) -> Vec<String> {
    let inventory = object.status.as_ref().and_then(|s| s.inventory.as_ref());
    inventory
        .expect("a Kustomization with an inventory")
        .entries
        .iter()
        .map(|e| e.id.clone())
        .collect()
}

pub(crate) fn config_map() -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {NAMESPACE}\ndata:\n  env: dev\n"
    )
}

pub(crate) fn deployment(image: &str, annotations: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {NAMESPACE}\n{annotations}spec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: web\n        image: {image}\n"
    )
}

/// Starts the environment, a Git server with `files`, a GitRepository `repo` Ready on it and
/// the Kustomization controller; returns the commit too.
pub(crate) async fn setup(files: &[(&str, &str)]) -> (Env, GitServer, KustomizeController, String) {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let (upstream, commit) = serve_source(&env, files).await;
    let controller = KustomizeController::start(&env);
    (env, upstream, controller, commit)
}

/// A Git server with `files` (one commit on `main`) and the GitRepository `repo` of it, waited
/// for until its artifact is that commit; returns the server and the commit.
pub(crate) async fn serve_source(env: &Env, files: &[(&str, &str)]) -> (GitServer, String) {
    let upstream = GitServer::start().await;
    let commit = upstream.commit(files, "first");
    env.create_git_repository(
        NAMESPACE,
        "repo",
        serde_json::json!({"url": upstream.url(), "interval": "10m", "ref": {"branch": "main"}}),
    )
    .await;
    wait_source_revision(env, &format!("main@sha1:{commit}")).await;
    (upstream, commit)
}

pub(crate) async fn wait_source_revision(env: &Env, revision: &str) {
    env.wait_for(
        NAMESPACE,
        "repo",
        "the source revision",
        |o: &GitRepository| {
            o.status
                .as_ref()
                .and_then(|s| s.artifact.as_ref())
                .is_some_and(|a| a.revision == revision)
        },
    )
    .await;
}

pub(crate) fn kustomizations(env: &Env) -> Api<Kustomization> {
    Api::namespaced(env.client.clone(), NAMESPACE)
}

pub(crate) async fn create_kustomization(env: &Env, name: &str, spec: serde_json::Value) {
    let mut full = serde_json::json!({
        "interval": "10m",
        "prune": false,
        "sourceRef": {"kind": "GitRepository", "name": "repo"},
    });
    full.as_object_mut()
        .unwrap()
        .extend(spec.as_object().unwrap().clone());
    let object: Kustomization = serde_json::from_value(serde_json::json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": full,
    }))
    .unwrap();
    kustomizations(env)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

pub(crate) fn ready(object: &Kustomization) -> Option<(String, String, String)> {
    condition(object, "Ready")
}

pub(crate) fn condition(object: &Kustomization, type_: &str) -> Option<(String, String, String)> {
    object
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Waits until the Kustomization's `Ready` condition satisfies `check`.
pub(crate) async fn wait_ready(
    env: &Env,
    name: &str,
    what: &str,
    check: impl Fn(&str, &str, &str) -> bool,
) -> Kustomization {
    let api = kustomizations(env);
    let check = &check;
    eventually(Duration::from_secs(40), what, || {
        let api = api.clone();
        async move {
            api.get_opt(name).await.ok().flatten().filter(|o| {
                ready(o).is_some_and(|(status, reason, message)| check(&status, &reason, &message))
            })
        }
    })
    .await
}

pub(crate) async fn request_reconcile<K>(api: &Api<K>, name: &str, token: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({
            "metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}
        })),
    )
    .await
    .unwrap();
}
