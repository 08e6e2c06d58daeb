//! The HelmRelease reconciler (`helm.toolkit.fluxcd.io/v2`), with Flux helm-controller's
//! behaviour, on the native Helm engine, Helm-compatible release storage
//! ([`crate::helm_storage`]) and the shared apply engine.
//!
//! # Expected flow
//! Steps `[check_source, load_chart, release]`:
//! - [`check_source`](check_source_step): refuses fields not implemented (stalled); creates or
//!   updates the HelmChart templated by `spec.chart` (`<namespace>-<name>` in the source's
//!   namespace, [`chart`]), deleting the one recorded in `status.helmChart` when it changed
//!   (or `chartRef` replaced `chart`); checks `spec.dependsOn` (HelmReleases Ready); reads the
//!   chart source (the HelmChart or `spec.chartRef`) and its artifact; picks the target
//!   cluster and identity (`spec.kubeConfig`, `spec.serviceAccountName`).
//! - [`load_chart`](load_chart_step): composes the values ([`values`]: `valuesFrom` in order,
//!   then `values`), downloads the chart artifact (digest checked, extracted within limits;
//!   the last charts are kept by digest) and loads it; records `lastAttemptedRevision` (the
//!   chart version), `lastAttemptedRevisionDigest` (OCI charts), `lastAttemptedConfigDigest`,
//!   `lastAttemptedGeneration`, `storageNamespace`, resetting the failure counters when the
//!   chart or values changed.
//! - [`release`](release_step): the release state machine ([`action`]): install, upgrade,
//!   test, rollback or uninstall remediation, unlock, drift correction — rendering with
//!   [`render`] (lookups answered by the target cluster, post-renderers applied), applying with
//!   the apply engine and waiting for health without holding a worker.
//!
//! On deletion (and when the release target changes) the release is uninstalled
//! (`uninstall.keepHistory`, `deletionPropagation`, `disableWait`, hooks unless
//! `uninstall.disableHooks`; a deletion's hooks and wait for its objects requeue rather than
//! hold a worker) and the templated HelmChart deleted; as Flux, a deletion whose kubeConfig
//! Secret or ServiceAccount is gone skips the uninstall; a suspended HelmRelease is left alone.
//!
//! Reconciles are also triggered by a new artifact of the chart source (HelmChart,
//! OCIRepository), a `dependsOn` HelmRelease becoming Ready, and a change of a `valuesFrom`
//! ConfigMap or Secret labelled `reconcile.fluxcd.io/watch: Enabled`.
//!
//! # Errors
//! Flux's reasons: `ArtifactFailed` (source missing, chart not loadable), `SourceNotReady`,
//! `DependencyNotReady`, `ValuesError`, and the release reasons of [`action`].

use std::collections::{BTreeMap, VecDeque};
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use capstan_api::meta::{Artifact, reason as meta_reason};
use capstan_api::{ExternalArtifact, FluxKind, HelmChart, HelmRelease, OCIRepository};
use capstan_apply::ResourceManager;
use capstan_helm::chart::Chart;
use capstan_source::artifact::Limits;
use futures::stream::BoxStream;
use kube::runtime::reflector;
use kube::{Client, ResourceExt};

pub mod action;
pub mod chart;
pub mod hooks;
pub mod render;
pub mod status;
pub mod values;

pub use render::{ClusterInfo, RenderError, Rendered, release_name, render_local};

use crate::error::{ErrorClass, ReconcileError};
use crate::helm_storage::HelmStorage;
use crate::runtime::depends::{ObjectKey, References};
use crate::runtime::triggers::{self, WatchedKind};
use crate::runtime::{self, Reconciler, Step, StepContext, StepFuture, StepOutcome};

/// The field manager of every apply (Flux's).
pub const FIELD_MANAGER: &str = "helm-controller";

/// How long to wait before looking again at a source that is missing or not ready, and at a
/// dependency that is not Ready (Flux's `--requeue-dependency` default).
pub const DEPENDENCY_RETRY: Duration = Duration::from_secs(30);

/// The reason of a source without an artifact (Flux's).
pub const SOURCE_NOT_READY: &str = "SourceNotReady";

/// How many loaded charts are kept, by artifact digest.
const CHART_CACHE: usize = 32;

/// How long the target cluster's capabilities are reused.
const CAPABILITIES_TTL: Duration = Duration::from_secs(300);

/// The chart source kinds whose artifacts trigger a reconcile.
pub const WATCHED_SOURCE_KINDS: [WatchedKind; 3] = [
    WatchedKind::of(&HelmChart::INFO),
    WatchedKind::of(&OCIRepository::INFO),
    WatchedKind::of(&ExternalArtifact::INFO),
];

impl runtime::Kind for HelmRelease {
    const READY_REASON: &'static str = capstan_api::helm::v2::reason::INSTALL_SUCCEEDED;

    fn interval(&self) -> Result<Option<Duration>, capstan_api::Error> {
        HelmRelease::interval(self).map(Some)
    }
}

impl References for HelmRelease {
    fn source(&self) -> Option<ObjectKey> {
        chart::source_of(self).map(|s| ObjectKey::new(s.kind, &s.namespace, &s.name))
    }

    fn depends_on(&self) -> Vec<ObjectKey> {
        let own = self.namespace().unwrap_or_default();
        self.spec
            .depends_on
            .iter()
            .map(|d| {
                let namespace = d.namespace.as_deref().unwrap_or(&own);
                ObjectKey::new(Self::INFO.kind, namespace, &d.name)
            })
            .collect()
    }

    fn config_refs(&self) -> Vec<ObjectKey> {
        let own = self.namespace().unwrap_or_default();
        self.spec
            .values_from
            .iter()
            .map(|v| ObjectKey::new(values::kind_name(v.kind), &own, &v.name))
            .collect()
    }
}

/// The HelmRelease reconciler.
pub struct HelmReleaseReconciler {
    client: Client,
    limits: Limits,
    charts: Mutex<VecDeque<(String, Arc<Chart>)>>,
    capabilities: Mutex<Option<(Instant, ClusterInfo)>>,
    tenancy: crate::tenancy::Tenancy,
    steps: [Step<Self>; 3],
}

impl HelmReleaseReconciler {
    /// A reconciler using `client` (the controller's own cluster).
    pub fn new(client: Client) -> Self {
        Self {
            client,
            limits: Limits::default(),
            charts: Mutex::default(),
            capabilities: Mutex::default(),
            tenancy: crate::tenancy::Tenancy::default(),
            steps: [
                Step {
                    name: "check_source",
                    run: check_source_step,
                },
                Step {
                    name: "load_chart",
                    run: load_chart_step,
                },
                Step {
                    name: "release",
                    run: release_step,
                },
            ],
        }
    }

    /// Applies the multi-tenancy lockdown: a chart source (`spec.chart.spec.sourceRef`,
    /// `spec.chartRef`) in another namespace refused (`--no-cross-namespace-refs`), the default
    /// ServiceAccount impersonated when `spec.serviceAccountName` is empty
    /// (`--default-service-account`).
    #[must_use]
    pub fn with_tenancy(mut self, tenancy: crate::tenancy::Tenancy) -> Self {
        self.tenancy = tenancy;
        self
    }

    /// Sets the limits chart artifacts are extracted within.
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    fn cached_chart(&self, digest: &str) -> Option<Arc<Chart>> {
        let charts = self.charts.lock().unwrap_or_else(PoisonError::into_inner);
        charts
            .iter()
            .find(|(d, _)| d == digest)
            .map(|(_, c)| c.clone())
    }

    fn store_chart(&self, digest: String, chart: Arc<Chart>) {
        let mut charts = self.charts.lock().unwrap_or_else(PoisonError::into_inner);
        charts.retain(|(d, _)| *d != digest);
        charts.push_front((digest, chart));
        charts.truncate(CHART_CACHE);
    }

    /// The `.Capabilities` of the cluster `client` reaches: the controller's own cluster's are
    /// kept for a while; a remote cluster's are read each time. A cluster whose discovery fails
    /// gets Helm's defaults.
    async fn cluster_info(&self, client: &Client, remote: bool) -> ClusterInfo {
        let own = !remote;
        if own {
            let cached = self
                .capabilities
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some((at, info)) = cached
                && at.elapsed() < CAPABILITIES_TTL
            {
                return info;
            }
        }
        match render::capabilities(client).await {
            Ok(info) => {
                if own {
                    *self
                        .capabilities
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) =
                        Some((Instant::now(), info.clone()));
                }
                info
            }
            Err(error) => {
                tracing::warn!(%error, "cannot discover the cluster's capabilities, using Helm's defaults");
                ClusterInfo::default()
            }
        }
    }

    /// The target of `object`: apply engine and storage on the target cluster (its
    /// `kubeConfig` and `serviceAccountName`), release name and namespace; `exprs` judge the
    /// health of the kinds they match in its waits.
    async fn target_for(
        &self,
        object: &HelmRelease,
        exprs: capstan_apply::HealthExprs,
    ) -> Result<action::Target, ReconcileError> {
        // The Kustomization's target logic, shared: the same fields mean the same there.
        let mut probe = capstan_api::Kustomization::new(
            &object.name_any(),
            serde_json::from_value(serde_json::json!({
                "interval": "1m", "prune": false,
                "sourceRef": {"kind": "GitRepository", "name": "-"},
            }))
            .map_err(|e| {
                ReconcileError::stalled(meta_reason::RECONCILIATION_FAILED, e.to_string())
            })?,
        );
        probe.metadata.namespace = object.namespace();
        probe.spec.kube_config = object.spec.kube_config.clone();
        probe.spec.service_account_name = object.spec.service_account_name.clone();
        let remote = crate::kustomization::target::manager_for(
            &self.client,
            &probe,
            self.tenancy.default_service_account.as_deref(),
        )
        .await?;
        let client = remote
            .as_ref()
            .map_or_else(|| self.client.clone(), |m| m.client().clone());
        let storage_namespace = object.storage_namespace().unwrap_or_default().to_owned();
        Ok(action::Target {
            manager: ResourceManager::new(client.clone(), FIELD_MANAGER).with_health_exprs(exprs),
            storage: HelmStorage::new(client, &storage_namespace),
            name: release_name(object),
            namespace: object.target_namespace().unwrap_or("default").to_owned(),
            remote: remote.is_some(),
        })
    }
}

impl std::fmt::Debug for HelmReleaseReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HelmReleaseReconciler")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Data handed between the steps of one reconcile.
#[derive(Debug, Default)]
pub struct HelmReleaseState {
    source: Option<chart::ChartSource>,
    artifact: Option<Artifact>,
    chart: Option<Arc<Chart>>,
    values: Option<values::Values>,
    target: Option<action::Target>,
    /// `status.storageNamespace` before this reconcile.
    previous_storage_namespace: Option<String>,
}

impl Reconciler for HelmReleaseReconciler {
    type Object = HelmRelease;
    type State = HelmReleaseState;
    const CONTROLLER_NAME: &'static str = "helm-controller";

    fn steps(&self) -> &[Step<Self>] {
        &self.steps
    }

    fn triggers(
        &self,
        client: &Client,
        store: reflector::Store<HelmRelease>,
    ) -> Vec<BoxStream<'static, reflector::ObjectRef<HelmRelease>>> {
        let mut all = triggers::sources(client, &store, &WATCHED_SOURCE_KINDS);
        all.push(triggers::dependencies::<HelmRelease, _>(client, &store));
        all.extend(triggers::configs(client, &store));
        all
    }

    fn retry_interval(&self, object: &HelmRelease) -> Option<Duration> {
        let upgrade = object
            .status
            .as_ref()
            .and_then(|s| s.last_attempted_release_action)
            == Some(capstan_api::helm::v2::ReleaseAction::Upgrade);
        object
            .retry_interval(upgrade)
            .ok()
            .flatten()
            .map(|d| d.max(runtime::MIN_INTERVAL))
    }

    fn retrying(&self, object: &HelmRelease, error: &ReconcileError) -> Option<String> {
        // helm-controller's `ErrRetryAfterInterval`: a failed install or upgrade under the
        // `RetryOnFailure` strategy.
        let upgrade = match error.reason.as_str() {
            capstan_api::helm::v2::reason::INSTALL_FAILED => false,
            capstan_api::helm::v2::reason::UPGRADE_FAILED => true,
            _ => return None,
        };
        let interval = object.retry_interval(upgrade).ok().flatten()?;
        Some(format!(
            "retrying after {}",
            capstan_api::format_go_duration(interval)
        ))
    }

    async fn cleanup(&self, object: &HelmRelease) -> Result<(), ReconcileError> {
        if object.suspended() {
            return Ok(());
        }
        let status = object.status.clone().unwrap_or_default();
        // As Flux: only the release this HelmRelease made (the latest snapshot of its
        // history) is uninstalled, by the name and namespace recorded there; none, nothing.
        if let (Some(storage_namespace), Some(latest)) =
            (status.storage_namespace.as_deref(), status.history.first())
        {
            // As Flux: without the identity to uninstall with (the kubeConfig Secret or the
            // ServiceAccount is gone, e.g. its namespace is being deleted), the uninstall is
            // skipped rather than retried forever.
            if let Some(why) = self.identity_gone(object).await? {
                tracing::error!(reason = %why, "skipping Helm release uninstallation");
                return self.delete_chart(&status).await;
            }
            // Any other failure is retried with the finalizer kept: the release is still there.
            // The uninstall hooks' waits use the expressions; an invalid list does not hold the
            // deletion up (it is said, and the hooks are judged without it).
            let exprs =
                crate::health_exprs::parse(&object.spec.health_check_exprs).unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "healthCheckExprs ignored for the uninstall");
                    capstan_apply::HealthExprs::default()
                });
            let target = self.target_for(object, exprs).await?;
            let target = action::Target {
                storage: HelmStorage::new(target.manager.client().clone(), storage_namespace),
                name: latest.name.clone(),
                namespace: latest.namespace.clone(),
                ..target
            };
            let last = target.storage.last(&target.name).await.map_err(|e| {
                ReconcileError::from_error(
                    ErrorClass::Transient,
                    capstan_api::helm::v2::reason::UNINSTALL_FAILED,
                    e,
                )
            })?;
            if let Some(last) =
                last.filter(|r| r.status() != capstan_helm::release::Status::Uninstalled)
            {
                let progress =
                    action::uninstall_with(object, &target, last, action::DeletionWait::Requeue)
                        .await
                        .map_err(|e| {
                            ReconcileError::transient(
                                capstan_api::helm::v2::reason::UNINSTALL_FAILED,
                                format!(
                                    "Helm uninstall failed for release {}/{}: {e}",
                                    target.namespace, target.name
                                ),
                            )
                        })?;
                // The objects are still being deleted: looked at again later, the worker freed.
                if let action::UninstallProgress::Waiting(delay) = progress {
                    return Err(ReconcileError::waiting(
                        delay,
                        capstan_api::helm::v2::reason::UNINSTALL_FAILED,
                        format!(
                            "waiting for the objects of release {}/{} to be deleted",
                            target.namespace, target.name
                        ),
                    ));
                }
            }
        }
        self.delete_chart(&status).await
    }
}

impl HelmReleaseReconciler {
    /// Why the release cannot be uninstalled, if its identity is gone (Flux's rule): the
    /// `spec.kubeConfig` Secret does not exist, or (without `kubeConfig`) the
    /// `spec.serviceAccountName` ServiceAccount does not. A failure to tell is retried.
    async fn identity_gone(&self, object: &HelmRelease) -> Result<Option<String>, ReconcileError> {
        let namespace = object.namespace().unwrap_or_default();
        let failed = |what: String, error: kube::Error| {
            ReconcileError::with_context(
                ErrorClass::Transient,
                capstan_api::helm::v2::reason::UNINSTALL_FAILED,
                what,
                error,
            )
        };
        if let Some(kube_config) = object.spec.kube_config.as_ref() {
            let Some(secret_ref) = kube_config.secret_ref.as_ref() else {
                return Ok(None);
            };
            let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
                kube::Api::namespaced(self.client.clone(), &namespace);
            let found = secrets.get_opt(&secret_ref.name).await.map_err(|e| {
                failed(
                    format!(
                        "failed to build REST client getter to uninstall release: cannot get Secret '{namespace}/{}'",
                        secret_ref.name
                    ),
                    e,
                )
            })?;
            return Ok(found.is_none().then(|| {
                format!(
                    "the kubeConfig Secret '{namespace}/{}' not found",
                    secret_ref.name
                )
            }));
        }
        let Some(account) = self
            .tenancy
            .service_account(object.spec.service_account_name.as_deref())
        else {
            return Ok(None);
        };
        let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
            kube::Api::namespaced(self.client.clone(), &namespace);
        let found = accounts.get_opt(&account).await.map_err(|e| {
            failed(
                format!(
                    "failed to confirm ServiceAccount '{account}' can be used to uninstall release"
                ),
                e,
            )
        })?;
        Ok(found
            .is_none()
            .then(|| format!("the ServiceAccount '{namespace}/{account}' not found")))
    }

    /// Deletes the HelmChart the HelmRelease templated, if any.
    async fn delete_chart(
        &self,
        status: &capstan_api::helm::v2::HelmReleaseStatus,
    ) -> Result<(), ReconcileError> {
        if let Some(key) = status.helm_chart.as_deref() {
            chart::delete_chart(&self.client, key).await.map_err(|e| {
                ReconcileError::transient(
                    meta_reason::ARTIFACT_FAILED,
                    format!("failed to delete HelmChart '{key}': {e}"),
                )
            })?;
        }
        Ok(())
    }
}

/// Fields not implemented: refused (stalled) rather than ignored.
fn unsupported_fields(object: &HelmRelease) -> Vec<&'static str> {
    let spec = &object.spec;
    let mut fields = Vec::new();
    if spec
        .kube_config
        .as_ref()
        .is_some_and(|k| k.config_map_ref.is_some())
    {
        fields.push("spec.kubeConfig.configMapRef");
    }
    // `poller` is the kstatus wait every action does; Helm's legacy readiness checks are not.
    if spec
        .wait_strategy
        .as_ref()
        .is_some_and(|w| w.name == capstan_api::helm::v2::WaitStrategyName::Legacy)
    {
        fields.push("spec.waitStrategy.name: legacy");
    }
    if matches!(
        spec.post_render_strategy,
        Some(
            capstan_api::helm::v2::PostRenderStrategy::Combined
                | capstan_api::helm::v2::PostRenderStrategy::Separate
        )
    ) {
        fields.push("spec.postRenderStrategy");
    }
    fields
}

/// The HelmChart template, `dependsOn`, the chart source and the target.
fn check_source_step(cx: &mut StepContext<HelmReleaseReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        let unsupported = unsupported_fields(&cx.object);
        if !unsupported.is_empty() {
            return Err(ReconcileError::stalled(
                meta_reason::FEATURE_GATE_DISABLED,
                format!(
                    "{} not supported by this controller yet",
                    unsupported.join(", ")
                ),
            ));
        }
        // They judge the health of the kinds they match in every wait (install, upgrade,
        // rollback, hooks); an invalid list stalls (`InvalidCELExpression`) before the source.
        let exprs = crate::health_exprs::parse(&cx.object.spec.health_check_exprs)?;
        if cx.object.spec.chart.is_none() && cx.object.spec.chart_ref.is_none() {
            return Err(ReconcileError::stalled(
                meta_reason::ARTIFACT_FAILED,
                "either spec.chart or spec.chartRef must be set",
            ));
        }
        if let Some(source) = chart::source_of(&cx.object) {
            let own = cx.object.namespace().unwrap_or_default();
            if cx.reconciler.tenancy.refuses(&own, &source.namespace) {
                // Flux's message; stalled until the spec (or the controller's flags) change.
                return Err(ReconcileError::stalled(
                    crate::tenancy::ACCESS_DENIED,
                    format!(
                        "cross-namespace references are not allowed: cannot access {} {}/{}",
                        source.kind, source.namespace, source.name
                    ),
                ));
            }
        }
        let wanted = chart::template_chart_key(&cx.object);
        if let Some(recorded) = cx.status.helm_chart.clone()
            && Some(&recorded) != wanted.as_ref()
        {
            chart::delete_chart(&cx.client, &recorded)
                .await
                .map_err(|e| {
                    ReconcileError::transient(
                        meta_reason::ARTIFACT_FAILED,
                        format!("failed to delete HelmChart '{recorded}': {e}"),
                    )
                })?;
            cx.status.helm_chart = None;
        }
        if wanted.is_some() {
            chart::apply_template(&cx.client, &cx.object)
                .await
                .map_err(|e| {
                    ReconcileError::transient(
                        meta_reason::ARTIFACT_FAILED,
                        format!("failed to run server-side apply of the HelmChart: {e}"),
                    )
                })?;
            cx.status.helm_chart = wanted;
        }
        runtime::depends::check_watched::<HelmRelease, _>(
            &cx.client,
            cx.object.as_ref(),
            None,
            DEPENDENCY_RETRY,
            &cx.reconciler.tenancy,
        )
        .await?;
        let Some(source) = chart::source_of(&cx.object) else {
            return Ok(StepOutcome::next());
        };
        let state = chart::read_source(&cx.client, &source).await.map_err(|e| {
            ReconcileError::transient(
                meta_reason::ARTIFACT_FAILED,
                format!("could not get Source object: {e}"),
            )
        })?;
        // With one watched namespace, a source elsewhere is never reconciled here: say so.
        let unwatched = cx
            .reconciler
            .tenancy
            .unwatched(&source.namespace)
            .map(|why| format!(" ({why})"))
            .unwrap_or_default();
        let artifact = match state {
            chart::SourceState::Missing => {
                return Err(ReconcileError::waiting(
                    DEPENDENCY_RETRY,
                    meta_reason::ARTIFACT_FAILED,
                    format!("could not get Source object: {source} not found{unwatched}"),
                ));
            }
            chart::SourceState::NotReady(message) => {
                return Err(ReconcileError::waiting(
                    DEPENDENCY_RETRY,
                    SOURCE_NOT_READY,
                    format!("{message}{unwatched}"),
                ));
            }
            chart::SourceState::Ready(artifact) => artifact,
        };
        cx.state.target = Some(cx.reconciler.target_for(&cx.object, exprs).await?);
        cx.state.source = Some(source);
        cx.state.artifact = Some(artifact);
        Ok(StepOutcome::next())
    })
}

/// Values, the chart, and the `lastAttempted*` fields.
fn load_chart_step(cx: &mut StepContext<HelmReleaseReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        let (Some(artifact), Some(source)) = (cx.state.artifact.clone(), cx.state.source.clone())
        else {
            return Ok(StepOutcome::next());
        };
        // Retried: a missing referent may appear (as Flux retries).
        let values = values::compose(&cx.client, &cx.object)
            .await
            .map_err(|e| ReconcileError::transient(values::VALUES_ERROR, e.to_string()))?;
        let chart = if let Some(chart) = cx.reconciler.cached_chart(&artifact.digest) {
            chart
        } else {
            let chart = Arc::new(load_chart(&artifact, &cx.reconciler.limits).await?);
            cx.reconciler
                .store_chart(artifact.digest.clone(), chart.clone());
            chart
        };
        let config_digest = values::digest(&values);
        // Flux's chart digest tracking: an OCI chart's version carries its revision digest.
        let (tracked, oci_digest) = chart::track_revision(&chart, &source, &artifact)?;
        if !Arc::ptr_eq(&tracked, &chart) {
            cx.reconciler
                .store_chart(artifact.digest.clone(), tracked.clone());
        }
        let chart = tracked;
        let version = chart.metadata.version.clone();
        // Flux resets the failure counters when the spec (its generation), the chart or the
        // values changed.
        let new_generation = cx.status.last_attempted_generation.is_some()
            && cx.status.last_attempted_generation != cx.object.metadata.generation;
        if new_generation
            || cx.status.last_attempted_revision.is_some()
                && (cx.status.last_attempted_revision.as_deref() != Some(version.as_str())
                    || cx.status.last_attempted_config_digest.as_deref()
                        != Some(config_digest.as_str()))
        {
            cx.status.install_failures = None;
            cx.status.upgrade_failures = None;
            cx.status.failures = None;
        }
        let storage_namespace = cx.object.storage_namespace().unwrap_or_default().to_owned();
        cx.state.previous_storage_namespace =
            cx.status.storage_namespace.replace(storage_namespace);
        cx.status.last_attempted_generation = cx.object.metadata.generation;
        cx.status.last_attempted_revision = Some(version.clone());
        cx.status.last_attempted_revision_digest = oci_digest;
        cx.status.last_attempted_config_digest = Some(config_digest.clone());
        cx.status.last_attempted_values_checksum = None;
        cx.status.last_release_revision = None;
        // Flux's HelmRelease Event metadata: keys prefixed with the API group.
        let mut metadata = vec![
            (runtime::events::REVISION_KEY, version),
            (runtime::events::TOKEN_KEY, config_digest),
            ("app-version", chart.metadata.app_version.clone()),
        ];
        if let Some(digest) = cx.status.last_attempted_revision_digest.clone() {
            metadata.push(("oci-digest", digest));
        }
        for (key, value) in metadata.into_iter().filter(|(_, v)| !v.is_empty()) {
            cx.event_metadata
                .insert(format!("{}/{key}", HelmRelease::INFO.group), value);
        }
        cx.state.chart = Some(chart);
        cx.state.values = Some(values);
        Ok(StepOutcome::next())
    })
}

/// Downloads, verifies and loads the chart of `artifact`.
async fn load_chart(artifact: &Artifact, limits: &Limits) -> Result<Chart, ReconcileError> {
    let failed = |message: String| ReconcileError::transient(meta_reason::ARTIFACT_FAILED, message);
    let digest = capstan_source::Digest::from_str(&artifact.digest).map_err(|e| {
        failed(format!(
            "Could not load chart: invalid artifact digest '{}': {e}",
            artifact.digest
        ))
    })?;
    let dir = capstan_source::temp::dir("helmrelease")
        .map_err(|e| failed(format!("cannot create a temporary directory: {e}")))?;
    let target = dir.path().join("chart");
    capstan_source::fetch::fetch_artifact(&artifact.url, &digest, &target, limits)
        .await
        .map_err(|e| {
            failed(format!(
                "Could not load chart: failed to download artifact from {}: {}",
                capstan_source::redact::url(&artifact.url),
                capstan_source::redact::error_chain(&e)
            ))
        })?;
    tokio::task::spawn_blocking(move || {
        let path = chart::chart_dir(&target)?;
        let loaded = capstan_helm::chart::load(&path).map_err(|e| e.message);
        drop(dir);
        loaded
    })
    .await
    .map_err(|e| failed(format!("Could not load chart: {e}")))?
    .map_err(|e| failed(format!("Could not load chart: {e}")))
}

/// The release state machine ([`action`]).
fn release_step(cx: &mut StepContext<HelmReleaseReconciler>) -> StepFuture<'_> {
    Box::pin(async move { action::reconcile(cx).await })
}

/// Values of `object` composed with data given locally (for `capstan build helmrelease`):
/// `data` maps `(kind, name)` (`ConfigMap`/`Secret`) of each `valuesFrom` referent to its data (`None`: absent).
///
/// # Errors
/// As [`values::compose`].
pub fn local_values(
    object: &HelmRelease,
    data: &BTreeMap<(String, String), values::Data>,
) -> Result<values::Values, values::ValuesError> {
    values::merge_references(object, &object.namespace().unwrap_or_default(), data)
}
