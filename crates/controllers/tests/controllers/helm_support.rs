//! The HelmRelease fixture: [`ReleaseEnv`], the environment with a `docker-registry` and the
//! HelmRelease controller, charts packaged and pushed by Helm's own SDK and read through an
//! OCIRepository (`chartRef`), HelmReleases created from what a test states, and the release
//! records read back from Helm's storage. Shared by the HelmRelease tests.

use std::path::{Path, PathBuf};
use std::time::Duration;

use capstan_api::HelmRelease;
use capstan_controllers::helm_release::HelmReleaseReconciler;
use capstan_controllers::helm_storage::HelmStorage;
use capstan_controllers::runtime::{Controllers, RuntimeConfig};
use capstan_helm::release::{Release, Status};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

pub(crate) use crate::support::condition;
use crate::support::{Env, Registry, eventually, wait_for};

pub(crate) const NAMESPACE: &str = "apps";
const HELM_CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";

/// The HelmRelease controller, stopped on drop.
pub(crate) struct HelmController {
    shutdown: CancellationToken,
}

impl HelmController {
    /// The controller with the default number of workers.
    pub(crate) fn start(env: &Env) -> Self {
        Self::with_workers(env, RuntimeConfig::default().concurrency)
    }

    /// The controller with `workers` workers.
    pub(crate) fn with_workers(env: &Env, workers: u16) -> Self {
        let shutdown = CancellationToken::new();
        let config = RuntimeConfig {
            concurrency: workers,
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(2),
            ..RuntimeConfig::default()
        };
        let controllers = Controllers::new(env.client.clone(), config)
            .register(HelmReleaseReconciler::new(env.client.clone()));
        tokio::spawn(controllers.run(shutdown.clone()));
        Self { shutdown }
    }
}

impl Drop for HelmController {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The environment (namespace [`NAMESPACE`] created), a registry and the HelmRelease
/// controller; derefs to the [`Env`].
pub(crate) struct ReleaseEnv {
    pub(crate) env: Env,
    pub(crate) registry: Registry,
    workers: u16,
    controller: Option<HelmController>,
}

impl std::ops::Deref for ReleaseEnv {
    type Target = Env;

    fn deref(&self) -> &Env {
        &self.env
    }
}

impl ReleaseEnv {
    pub(crate) async fn start() -> Self {
        Self::with_workers(RuntimeConfig::default().concurrency).await
    }

    /// [`ReleaseEnv::start`] with a controller of `workers` workers.
    pub(crate) async fn with_workers(workers: u16) -> Self {
        let env = Env::start().await;
        env.namespace(NAMESPACE).await;
        let registry = Registry::start().await;
        let controller = Some(HelmController::with_workers(&env, workers));
        Self {
            env,
            registry,
            workers,
            controller,
        }
    }

    /// Stops the HelmRelease controller (it may be mid-reconcile).
    pub(crate) fn stop_controller(&mut self) {
        self.controller = None;
    }

    /// Starts a new HelmRelease controller (stopping the running one).
    pub(crate) fn restart_controller(&mut self) {
        self.controller = None;
        self.controller = Some(HelmController::with_workers(&self.env, self.workers));
    }

    /// The objects of kind `K` in [`NAMESPACE`].
    pub(crate) fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    pub(crate) fn releases(&self) -> Api<HelmRelease> {
        self.api()
    }

    /// Packages `chart` with Helm's SDK and pushes it to `<registry>/charts/<name>`; returns
    /// the `oci://` URL of the chart's repository.
    pub(crate) fn push_chart(&self, chart: &Path) -> String {
        push_chart(&self.registry, chart)
    }

    /// An OCIRepository `name` selecting the Helm chart layer of `url:tag` (copied as it is).
    pub(crate) async fn chart_source(&self, name: &str, url: &str, tag: &str) {
        let object: capstan_api::OCIRepository = serde_json::from_value(serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "url": url, "interval": "10m", "insecure": true, "ref": {"tag": tag},
                "layerSelector": {"mediaType": HELM_CHART_LAYER, "operation": "copy"},
            },
        }))
        .unwrap();
        self.api::<capstan_api::OCIRepository>()
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }

    /// Pushes `chart` and creates the OCIRepository `source` at the chart's version.
    pub(crate) async fn serve_chart(&self, source: &str, chart: &Path) {
        let url = self.push_chart(chart);
        self.chart_source(source, &url, &chart_version(chart)).await;
    }

    /// Serves podinfo's chart (6.14.1) as the OCIRepository `podinfo`.
    pub(crate) async fn serve_podinfo(&self) {
        self.serve_chart("podinfo", &podinfo()).await;
    }

    /// Creates the HelmRelease `name` from JSON `spec`.
    pub(crate) async fn create(&self, name: &str, spec: serde_json::Value) {
        let object: HelmRelease = serde_json::from_value(serde_json::json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec,
        }))
        .unwrap();
        self.releases()
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }

    /// Creates the HelmRelease `name` of the chart of the OCIRepository `source`, with
    /// [`chart_ref_spec`]'s spec.
    pub(crate) async fn release(&self, name: &str, source: &str, extra: serde_json::Value) {
        self.create(name, chart_ref_spec(source, extra)).await;
    }

    /// [`ReleaseEnv::release`], then waits until it is Ready (installed).
    pub(crate) async fn install(
        &self,
        name: &str,
        source: &str,
        extra: serde_json::Value,
    ) -> HelmRelease {
        self.release(name, source, extra).await;
        self.wait_ready(name, "installed").await
    }

    /// Patches the HelmRelease `name` with the post-renderer of [`hang_rollout`].
    pub(crate) async fn hang(&self, name: &str) {
        self.patch(
            name,
            serde_json::json!({"spec": {"postRenderers": hang_rollout()}}),
        )
        .await;
    }

    /// Merge-patches the HelmRelease `name`.
    pub(crate) async fn patch(&self, name: &str, patch: serde_json::Value) {
        self.releases()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    /// Asks for a reconcile of `name` (`reconcile.fluxcd.io/requestedAt: token`).
    pub(crate) async fn request_reconcile(&self, name: &str, token: &str) {
        self.patch(
            name,
            serde_json::json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}}),
        )
        .await;
    }

    /// Waits until the request `token` of `name` is handled, and returns the HelmRelease.
    pub(crate) async fn request_handled(&self, name: &str, what: &str, token: &str) -> HelmRelease {
        self.wait(name, what, |o| {
            o.status
                .as_ref()
                .and_then(|s| s.reconcile_request.last_handled_reconcile_at.as_deref())
                == Some(token)
        })
        .await
    }

    /// Waits until `check` holds for the HelmRelease `name`, and returns it.
    pub(crate) async fn wait(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&HelmRelease) -> bool,
    ) -> HelmRelease {
        wait_for(&self.releases(), name, what, check).await
    }

    /// Waits until `name` is Ready for its generation ([`ready_for_generation`]).
    pub(crate) async fn wait_ready(&self, name: &str, what: &str) -> HelmRelease {
        self.wait(name, what, ready_for_generation).await
    }

    /// Waits until `name` is Stalled.
    pub(crate) async fn wait_stalled(&self, name: &str) -> HelmRelease {
        self.wait(name, "stalled", |o| condition_is(o, "Stalled", "True"))
            .await
    }

    /// Deletes the HelmRelease `name` and waits until it is gone.
    pub(crate) async fn delete_release(&self, name: &str) {
        self.releases()
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
        self.wait_gone(name).await;
    }

    /// Waits until the HelmRelease `name` is gone (its finalizer done).
    pub(crate) async fn wait_gone(&self, name: &str) {
        eventually(Duration::from_secs(60), "the HelmRelease gone", || {
            let api = self.releases();
            async move { api.get_opt(name).await.unwrap().is_none().then_some(()) }
        })
        .await;
    }

    /// The statuses of the release's records, oldest first, as Helm's storage holds them.
    pub(crate) async fn records(&self, name: &str) -> Vec<(i64, Status)> {
        self.stored(name)
            .await
            .iter()
            .map(|r| (r.version, r.status()))
            .collect()
    }

    /// The records of the release `name`, oldest first, as Helm's storage holds them.
    pub(crate) async fn stored(&self, name: &str) -> Vec<Release> {
        HelmStorage::new(self.client.clone(), NAMESPACE)
            .history(name)
            .await
            .unwrap()
    }

    /// Revision `version` of the release `name` as Helm's storage holds it.
    pub(crate) async fn record(&self, name: &str, version: i64) -> Release {
        HelmStorage::new(self.client.clone(), NAMESPACE)
            .get(name, version)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("release {name} v{version}"))
    }

    /// Runs one request of Helm's SDK (`capstan_testkit::helm_repo::helm_sdk`) against the
    /// control plane, in [`NAMESPACE`].
    pub(crate) async fn sdk(
        &self,
        request: serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            capstan_apiserver::kubeconfig(&self.api_url(), "test"),
        )
        .unwrap();
        let mut request = request;
        request["kubeconfig"] = serde_json::json!(kubeconfig);
        request["namespace"] = serde_json::json!(NAMESPACE);
        tokio::task::spawn_blocking(move || capstan_testkit::helm_repo::helm_sdk(&request))
            .await
            .unwrap()
    }
}

/// A HelmRelease spec: every 10 minutes, the chart of the OCIRepository `source`, and the
/// top-level fields of `extra` (which override those).
pub(crate) fn chart_ref_spec(source: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut spec = serde_json::json!({
        "interval": "10m",
        "chartRef": {"kind": "OCIRepository", "name": source},
    });
    if let serde_json::Value::Object(extra) = extra {
        spec.as_object_mut().unwrap().extend(extra);
    }
    spec
}

/// Packages `chart` with Helm's SDK and pushes it to `<registry>/charts/<name>`; returns the
/// `oci://` URL of the chart's repository.
fn push_chart(registry: &Registry, chart: &Path) -> String {
    let remote = registry.url("charts");
    capstan_testkit::helm_repo::sdk_push_chart(chart, &remote);
    format!("{remote}/{}", chart_field(chart, "name"))
}

/// A top-level field of `chart`'s `Chart.yaml` (unquoted).
fn chart_field(chart: &Path, field: &str) -> String {
    let text = std::fs::read_to_string(chart.join("Chart.yaml")).unwrap();
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("{field} in {}", chart.display()))
        .trim()
        .trim_matches('"')
        .to_owned()
}

/// The version of `chart` (its `Chart.yaml`).
pub(crate) fn chart_version(chart: &Path) -> String {
    chart_field(chart, "version")
}

pub(crate) fn podinfo() -> PathBuf {
    capstan_testkit::corpus("podinfo/src/charts/podinfo")
}

/// A post-renderer that makes the simulated rollout of every Deployment hang.
pub(crate) fn hang_rollout() -> serde_json::Value {
    serde_json::json!([{"kustomize": {"patches": [hang_patch()]}}])
}

/// The kustomize patch of [`hang_rollout`].
pub(crate) fn hang_patch() -> serde_json::Value {
    serde_json::json!({
        "target": {"kind": "Deployment"},
        "patch": "- op: add\n  path: /metadata/annotations\n  value: {\"sim.capstan.dev/rollout\": \"hang\"}\n",
    })
}

/// Whether condition `type_` has status `status`.
pub(crate) fn condition_is(object: &HelmRelease, type_: &str, status: &str) -> bool {
    condition(object, type_).is_some_and(|c| c.0 == status)
}

/// Whether condition `type_` has reason `reason`.
pub(crate) fn reason_is(object: &HelmRelease, type_: &str, reason: &str) -> bool {
    condition(object, type_).is_some_and(|c| c.1 == reason)
}

/// The reason of the Ready condition.
pub(crate) fn ready_reason(object: &HelmRelease) -> String {
    condition(object, "Ready").unwrap().1
}

pub(crate) fn ready_for_generation(object: &HelmRelease) -> bool {
    object.status.as_ref().is_some_and(|s| {
        s.observed_generation == object.metadata.generation
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// The status's history, newest first, `(version, status)`.
pub(crate) fn history(object: &HelmRelease) -> Vec<(i64, String)> {
    object
        .status
        .as_ref()
        .map(|s| {
            s.history
                .iter()
                .map(|h| (h.version, h.status.clone()))
                .collect()
        })
        .unwrap_or_default()
}
