//! The Kustomization reconciler (`kustomize.toolkit.fluxcd.io/v1`), with Flux
//! kustomize-controller's behaviour.
//!
//! # Expected flow
//! Steps `[check_source, fetch_artifact, build, apply, prune, check_health]`:
//! - [`check_source`](check_source_step): reads the `spec.sourceRef` object (GitRepository,
//!   OCIRepository, Bucket or ExternalArtifact, generically) and its `status.artifact`; then
//!   checks that every `spec.dependsOn` Kustomization is Ready for its current generation; then
//!   picks the apply engine ([`target`]): the controller's own, one for the remote cluster of
//!   `spec.kubeConfig.secretRef`, and/or one impersonating `spec.serviceAccountName`.
//! - [`fetch_artifact`](fetch_artifact_step): downloads the artifact, verifies its digest and
//!   extracts it into a temporary directory — unless the artifact digest, the generation and
//!   the substitution variables equal those of the last build, whose objects are then reused
//!   (the apply still runs, so drift is corrected every interval; the last builds are kept in
//!   a bounded [`cache`], and one evicted is built again).
//! - [`build`](build_step): builds `spec.path` with the native kustomize engine. A path without
//!   a kustomization file gets one listing every manifest below it (as Flux does). Flux's
//!   overrides (`targetNamespace`, `namePrefix`, `nameSuffix`, `patches`, `images`,
//!   `components`) are applied by an overlay kustomization generated on top of the path
//!   (both kept in memory over the extracted artifact, see [`render`]);
//!   `commonMetadata` is added to every object's metadata and `postBuild.substitute` /
//!   `substituteFrom` variables are substituted with Flux's syntax ([`envsubst`]: `${var}`,
//!   defaults, bash string functions, `$${var}` for a literal), except in objects annotated or labelled
//!   `kustomize.toolkit.fluxcd.io/substitute: disabled`.
//! - [`apply`](apply_step): before the first write, records in the status the inventory grown
//!   by every object about to be applied and, unless exactly these objects of this revision
//!   are already applied, `Reconciling=True` / `Ready=Unknown` naming the revision (so a crash
//!   leaves "in progress" and a deletion finds everything); then server-side applies the
//!   objects in stages under the field manager [`FIELD_MANAGER`], labelled with their owner,
//!   and records `status.inventory` of what was applied. With
//!   the annotation [`drift::DRIFT_ANNOTATION`]`: report` it only diffs (server-side dry run)
//!   and reports the `Drifted` condition and a `DriftDetected` Event instead ([`drift`]).
//! - [`prune`](prune_step): with `spec.prune`, deletes objects of the previous inventory that
//!   left the build (only those still labelled with this owner).
//! - [`check_health`](check_health_step): with `spec.wait` (every applied object) or
//!   `spec.healthChecks`, waits until the objects are healthy (judged by `spec.healthCheckExprs`
//!   for the kinds they match, else by kstatus), bounded by `spec.timeout` from
//!   the end of the apply — without holding a worker: one look per pass, then the reconcile is
//!   pending and looks again after a short delay, skipping the apply of what it already
//!   applied ([`runtime::wait`]); a new generation or revision, a suspension or a deletion
//!   ends the wait; sets `Healthy`, `lastAppliedRevision`, `lastAppliedOriginRevision` and the
//!   `Ready` message `Applied revision: <revision>`.
//!
//! Once objects are built, the outcome of apply, prune and health is recorded in
//! `status.history` ([`history`]): one entry per digest of the applied objects and outcome.
//!
//! Reconciles are also triggered ([`triggers`]) when a watched source (GitRepository,
//! OCIRepository, Bucket) gets a new artifact revision or digest, and when a `dependsOn`
//! Kustomization becomes Ready. Failures are retried after `spec.retryInterval` (default: the
//! interval), as in Flux.
//!
//! On deletion (the object read afresh, not from the watch cache), the inventory is deleted when `spec.deletionPolicy` asks for it (the default
//! `MirrorPrune` follows `spec.prune`; `Orphan` keeps the objects; `WaitForTermination` also
//! waits, up to `spec.timeout` from the deletion request, until the deleted objects are gone,
//! looking once per pass like the health check), through the same apply
//! engine (remote cluster, impersonation) as the apply.
//!
//! # Errors
//! Reasons are Flux's: `ArtifactFailed` (source missing or without an artifact: retried after
//! 30 s), `DependencyNotReady` (retried after 30 s, or when the dependency becomes Ready),
//! `BuildFailed` (message naming the file), `ReconciliationFailed` (naming each object that
//! failed, e.g. forbidden to the impersonated ServiceAccount; what was applied is kept in the
//! inventory), `PruneFailed`, `HealthCheckFailed` (naming each unhealthy object);
//! `InvalidKubeConfig` (stalled) for a kubeconfig that is unusable or uses exec/auth-provider
//! plugins or files; `InvalidCELExpression` (stalled, checked before the source) for a
//! `healthCheckExprs` list that does not parse. Fields not implemented
//! (`kubeConfig.configMapRef`) are refused with `Stalled=True`, reason `FeatureGateDisabled`.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use capstan_api::Kustomization;
use capstan_api::kustomize::v1::{DeletionPolicy, KustomizationStatus};
use capstan_api::meta::{Artifact, NamespacedObjectKindReference, condition, reason};
use capstan_apply::{
    Action, ApplyOptions, ChangeSet, DeleteOptions, Inventory, ObjectRef, Owner, ResourceManager,
    set_owner_labels,
};
use capstan_source::artifact::Limits;
use futures::stream::BoxStream;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::events::EventType;
use kube::runtime::reflector;
use kube::{Api, Client, Resource, ResourceExt};

pub mod cache;
mod decrypt;
pub mod drift;
pub mod envsubst;
pub mod history;
mod remote;
pub mod render;
pub mod target;
pub mod triggers;
pub mod variables;

pub use render::{
    ManifestError, PostBuildError, RenderError, SubstituteError, render, render_local, render_with,
    substitute,
};

use crate::error::ReconcileError;
use crate::runtime::{
    self, ConditionStatus, Reconciler, Step, StepContext, StepFuture, StepOutcome,
};

/// The field manager of every apply (Flux's, so that ownership interoperates).
pub const FIELD_MANAGER: &str = "kustomize-controller";

/// Annotation (or label) value `disabled` under this key turns substitution off for an object.
pub const SUBSTITUTE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/substitute";

/// The artifact metadata key holding the origin revision.
pub const ORIGIN_REVISION_KEY: &str = "org.opencontainers.image.revision";

/// How long to wait before looking again at a source that is missing or has no artifact.
pub const SOURCE_RETRY: Duration = Duration::from_secs(30);

/// How long to wait before looking again at a dependency that is not Ready (Flux's
/// `--requeue-dependency` default); a dependency becoming Ready triggers at once anyway.
pub const DEPENDENCY_RETRY: Duration = Duration::from_secs(30);

const DEFAULT_SOURCE_API_VERSION: &str = "source.toolkit.fluxcd.io/v1";
const OVERLAY_DIR: &str = "overlay";

impl runtime::Kind for Kustomization {
    const READY_REASON: &'static str = reason::RECONCILIATION_SUCCEEDED;

    fn interval(&self) -> Result<Option<Duration>, capstan_api::Error> {
        Kustomization::interval(self).map(Some)
    }
}

/// The Kustomization reconciler: the apply engine it applies, prunes and waits with.
#[derive(Debug)]
pub struct KustomizationReconciler {
    manager: ResourceManager,
    limits: Limits,
    /// The last build of each Kustomization (`namespace/name`), keyed by [`build_key`].
    builds: cache::BuildCache,
    /// Whether remote bases are fetched (Flux's default) or refused (`--no-remote-bases`).
    remote_bases: bool,
    tenancy: crate::tenancy::Tenancy,
    steps: [Step<Self>; 6],
}

impl KustomizationReconciler {
    /// A reconciler applying through `client` as [`FIELD_MANAGER`].
    pub fn new(client: Client) -> Self {
        Self {
            manager: ResourceManager::new(client, FIELD_MANAGER),
            limits: Limits::default(),
            builds: cache::BuildCache::default(),
            remote_bases: true,
            tenancy: crate::tenancy::Tenancy::default(),
            steps: [
                Step {
                    name: "check_source",
                    run: check_source_step,
                },
                Step {
                    name: "fetch_artifact",
                    run: fetch_artifact_step,
                },
                Step {
                    name: "build",
                    run: build_step,
                },
                Step {
                    name: "apply",
                    run: apply_step,
                },
                Step {
                    name: "prune",
                    run: prune_step,
                },
                Step {
                    name: "check_health",
                    run: check_health_step,
                },
            ],
        }
    }

    /// Sets the limits artifacts are extracted within.
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Fetches remote bases (`resources:` entries naming a Git repository, as kustomize and
    /// Flux allow by default) when `enabled`; refuses them otherwise (`--no-remote-bases`),
    /// the build failing with a message naming the kustomization file and the entry.
    #[must_use]
    pub fn with_remote_bases(mut self, enabled: bool) -> Self {
        self.remote_bases = enabled;
        self
    }

    /// Applies the multi-tenancy lockdown: a `sourceRef` into another namespace refused
    /// (`--no-cross-namespace-refs`), the default ServiceAccount impersonated when
    /// `spec.serviceAccountName` is empty (`--default-service-account`).
    #[must_use]
    pub fn with_tenancy(mut self, tenancy: crate::tenancy::Tenancy) -> Self {
        self.tenancy = tenancy;
        self
    }

    /// The apply engine.
    pub fn manager(&self) -> &ResourceManager {
        &self.manager
    }

    /// Sets how much of the last builds is kept ([`cache::CacheLimits`]).
    #[must_use]
    pub fn with_build_cache(mut self, limits: cache::CacheLimits) -> Self {
        self.builds = cache::BuildCache::new(limits);
        self
    }

    fn cached_build(&self, object: &str, key: &str) -> Option<Vec<DynamicObject>> {
        self.builds.get(object, key)
    }

    fn store_build(&self, object: String, key: String, objects: Vec<DynamicObject>) {
        self.builds.insert(object, key, objects);
    }

    fn forget_build(&self, object: &str) {
        self.builds.remove(object);
    }
}

/// What a build depends on: the object's identity (`metadata.uid`: a Kustomization deleted and
/// created again under the same name starts at generation 1 again), its generation, the
/// artifact digest and the substitution variables (which may come from ConfigMaps and Secrets).
fn build_key(
    uid: Option<&str>,
    digest: &str,
    generation: Option<i64>,
    variables: Option<&BTreeMap<String, String>>,
) -> String {
    let variables = variables.map(|v| serde_json::to_string(v).unwrap_or_default());
    format!(
        "{}|{digest}|{}|{}",
        uid.unwrap_or_default(),
        generation.unwrap_or_default(),
        variables.unwrap_or_default()
    )
}

/// Data handed between the steps of one reconcile.
#[derive(Debug, Default)]
pub struct KustomizationState {
    /// The source's artifact.
    artifact: Option<Artifact>,
    /// The extracted artifact.
    dir: Option<tempfile::TempDir>,
    /// The built objects.
    objects: Vec<DynamicObject>,
    /// Whether `objects` holds this reconcile's build (fresh or cached).
    built: bool,
    /// The substitution variables.
    variables: Option<BTreeMap<String, String>>,
    /// The [`build_key`] of this reconcile.
    build_key: String,
    /// The objects applied by this reconcile.
    inventory: Option<Inventory>,
    /// The inventory before this reconcile.
    previous: Option<Inventory>,
    /// The apply engine of a remote cluster or an impersonated identity, when the spec asks.
    manager: Option<ResourceManager>,
    /// When the reconcile started.
    started: Option<std::time::Instant>,
    /// The [`history::digest`] of the objects applied.
    digest: Option<String>,
    /// The artifact revision and origin revision, for the history.
    revisions: BTreeMap<String, String>,
    /// The health wait this pass resumes (the objects are applied).
    awaiting: Option<runtime::Wait>,
    /// `spec.healthCheckExprs`, parsed once at reconcile start (an invalid list stalls there).
    health_exprs: capstan_apply::HealthExprs,
}

impl KustomizationState {
    /// The apply engine of this reconcile.
    fn manager<'a>(&'a self, reconciler: &'a KustomizationReconciler) -> &'a ResourceManager {
        self.manager.as_ref().unwrap_or(&reconciler.manager)
    }
}

/// Records this reconcile in `status.history` with outcome `status`, once objects were built.
fn record_history(cx: &mut StepContext<KustomizationReconciler>, status: &str) {
    let Some(digest) = cx.state.digest.clone() else {
        return;
    };
    let duration = cx.state.started.map(|s| s.elapsed()).unwrap_or_default();
    history::upsert(
        &mut cx.status.history,
        &digest,
        jiff::Timestamp::now(),
        duration,
        status,
        cx.state.revisions.clone(),
    );
}

impl Reconciler for KustomizationReconciler {
    type Object = Kustomization;
    type State = KustomizationState;
    const CONTROLLER_NAME: &'static str = "kustomize-controller";

    fn steps(&self) -> &[Step<Self>] {
        &self.steps
    }

    fn triggers(
        &self,
        client: &Client,
        store: reflector::Store<Kustomization>,
    ) -> Vec<BoxStream<'static, reflector::ObjectRef<Kustomization>>> {
        triggers::all(client, &store)
    }

    /// Flux's `spec.retryInterval` (default: the interval) instead of the backoff; never
    /// below [`runtime::MIN_INTERVAL`] (shorter ones are refused by `check_source`).
    fn retry_interval(&self, object: &Kustomization) -> Option<Duration> {
        object
            .retry_interval()
            .ok()
            .map(|delay| delay.max(runtime::MIN_INTERVAL))
    }

    async fn cleanup(&self, object: &Kustomization) -> Result<(), ReconcileError> {
        self.forget_build(&format!(
            "{}/{}",
            object.namespace().unwrap_or_default(),
            object.name_any()
        ));
        if !object.deletes_on_removal() {
            return Ok(());
        }
        let Some(status) = object.status.as_ref().and_then(|s| s.inventory.as_ref()) else {
            return Ok(());
        };
        let inventory = Inventory::from_status(status).map_err(|e| {
            ReconcileError::stalled(reason::PRUNE_FAILED, format!("invalid inventory: {e}"))
                .with_source(e)
        })?;
        let options = DeleteOptions {
            owner: Some(owner_of(object)),
            ..DeleteOptions::default()
        };
        let manager = match target::manager_for(
            self.manager.client(),
            object,
            self.tenancy.default_service_account.as_deref(),
        )
        .await
        {
            Ok(manager) => manager.unwrap_or_else(|| self.manager.clone()),
            Err(error) => {
                // As Flux: without a client for the target cluster the objects cannot be
                // deleted; they are left in place rather than blocking the deletion.
                tracing::error!(
                    %error,
                    objects = inventory.objects().len(),
                    "cannot prune on deletion, leaving the objects"
                );
                return Ok(());
            }
        };
        let deleted = delete_objects(manager.clone(), inventory.objects().to_vec(), options)
            .await
            .map_err(|e| {
                ReconcileError::transient(reason::PRUNE_FAILED, format!("prune failed: {e}"))
                    .with_source(e)
            })?;
        if object.deletion_policy() != DeletionPolicy::WaitForTermination {
            return Ok(());
        }
        let deleted: Vec<ObjectRef> = deleted
            .with_action(capstan_apply::Action::Deleted)
            .cloned()
            .collect();
        let timeout = health_timeout(object)?;
        // One look per pass; the runtime looks again after the `Waiting` delay, so the wait
        // holds no worker. The deadline counts from the deletion request.
        let results = manager.check_health(&deleted).await;
        let remaining: Vec<String> = results
            .into_iter()
            .filter(|r| r.status != capstan_apply::Status::NotFound)
            .map(|r| r.object.to_string())
            .collect();
        if remaining.is_empty() {
            return Ok(());
        }
        let waited = object
            .meta()
            .deletion_timestamp
            .as_ref()
            .and_then(|requested| {
                jiff::Timestamp::now()
                    .duration_since(requested.0)
                    .try_into()
                    .ok()
            })
            .unwrap_or_default();
        if waited >= timeout {
            return Err(ReconcileError::transient(
                reason::PRUNE_FAILED,
                format!(
                    "timed out after {timeout:?} waiting for termination of: {}",
                    remaining.join(", ")
                ),
            ));
        }
        Err(ReconcileError::waiting(
            termination_poll(waited, timeout),
            reason::PRUNE_FAILED,
            format!("waiting for termination of: {}", remaining.join(", ")),
        ))
    }
}

async fn apply_objects(
    manager: ResourceManager,
    objects: Vec<DynamicObject>,
    options: ApplyOptions,
) -> Result<capstan_apply::ChangeSet, capstan_apply::Error> {
    manager.apply_all_staged(&objects, &options).await
}

async fn delete_objects(
    manager: ResourceManager,
    objects: Vec<ObjectRef>,
    options: DeleteOptions,
) -> Result<capstan_apply::ChangeSet, capstan_apply::Error> {
    manager.delete_all(&objects, &options).await
}

/// The delay before the next look at objects terminating, `waited` into `timeout`: a quarter
/// of the time waited, between [`runtime::wait::FIRST_POLL`] and [`runtime::wait::MAX_POLL`],
/// and never past the timeout.
fn termination_poll(waited: Duration, timeout: Duration) -> Duration {
    (waited / 4)
        .clamp(runtime::wait::FIRST_POLL, runtime::wait::MAX_POLL)
        .min(timeout.saturating_sub(waited))
}

/// What one look at the awaited objects says, as [`ResourceManager::wait_for`] would: any
/// Failed fails at once, all Current passes, otherwise the wait goes on until it expires.
fn health_verdict(
    results: Vec<capstan_apply::HealthResult>,
    wait: &runtime::Wait,
    now: std::time::Instant,
) -> Result<bool, capstan_apply::Error> {
    let failed: Vec<_> = results
        .iter()
        .filter(|r| r.status == capstan_apply::Status::Failed)
        .cloned()
        .collect();
    if !failed.is_empty() {
        return Err(capstan_apply::Error::HealthFailed { failed });
    }
    if results
        .iter()
        .all(|r| r.status == capstan_apply::Status::Current)
    {
        return Ok(true);
    }
    if wait.expired(now) {
        let pending = results
            .into_iter()
            .filter(|r| r.status != capstan_apply::Status::Current)
            .collect();
        return Err(capstan_apply::Error::HealthTimeout {
            timeout: wait.timeout(),
            pending,
        });
    }
    Ok(false)
}

/// The key of the health wait of what this reconcile applied: generation, revision and the
/// digest of the objects.
fn health_wait_key(cx: &StepContext<KustomizationReconciler>, digest: &str) -> String {
    format!(
        "{}|{}|{digest}",
        cx.object.metadata.generation.unwrap_or_default(),
        cx.state
            .revisions
            .get(history::REVISION_KEY)
            .map_or("", String::as_str),
    )
}

fn owner_of(object: &Kustomization) -> Owner {
    Owner {
        name: object.name_any(),
        namespace: object.namespace().unwrap_or_default(),
    }
}

/// Spec fields this reconciler does not implement yet: refused (stalled) rather than ignored.
fn unsupported_fields(object: &Kustomization) -> Vec<&'static str> {
    let spec = &object.spec;
    let mut fields = Vec::new();
    if spec
        .kube_config
        .as_ref()
        .is_some_and(|k| k.config_map_ref.is_some())
    {
        fields.push("spec.kubeConfig.configMapRef");
    }
    fields
}

/// Refuses (stalled) a `spec.retryInterval` that does not parse or is below
/// [`runtime::MIN_INTERVAL`]: failures would be retried in a hot loop.
fn check_retry_interval(object: &Kustomization) -> Result<(), ReconcileError> {
    if object.spec.retry_interval.is_none() {
        return Ok(());
    }
    let delay = object.retry_interval().map_err(|e| {
        ReconcileError::stalled(runtime::INVALID_INTERVAL, e.to_string()).with_source(e)
    })?;
    if delay < runtime::MIN_INTERVAL {
        return Err(ReconcileError::stalled(
            runtime::INVALID_INTERVAL,
            format!(
                "spec.retryInterval: {} is below the minimum of {}",
                capstan_api::format_go_duration(delay),
                capstan_api::format_go_duration(runtime::MIN_INTERVAL)
            ),
        ));
    }
    Ok(())
}

/// `spec.timeout` as written, else Flux's default (the interval, at least 30 s).
fn health_timeout(object: &Kustomization) -> Result<Duration, ReconcileError> {
    let parsed = match &object.spec.timeout {
        Some(text) => capstan_api::parse_go_duration(text).map_err(|e| e.to_string()),
        None => object.timeout().map_err(|e| e.to_string()),
    };
    parsed.map_err(|e| ReconcileError::stalled("InvalidTimeout", format!("spec.timeout: {e}")))
}

/// Reads the source object generically and returns its artifact.
async fn source_artifact(
    client: &Client,
    object: &Kustomization,
    tenancy: &crate::tenancy::Tenancy,
) -> Result<Artifact, ReconcileError> {
    let source = &object.spec.source_ref;
    let namespace = object.source_namespace().unwrap_or_default().to_owned();
    if tenancy.refuses(&object.namespace().unwrap_or_default(), &namespace) {
        // Flux's message; stalled until the spec (or the controller's flags) change.
        return Err(ReconcileError::stalled(
            crate::tenancy::ACCESS_DENIED,
            format!(
                "can't access '{}/{namespace}/{}', cross-namespace references have been blocked",
                source.kind.as_str(),
                source.name
            ),
        ));
    }
    let api_version = source
        .api_version
        .as_deref()
        .unwrap_or(DEFAULT_SOURCE_API_VERSION);
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, source.kind.as_str());
    let resource = ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
    let display = format!("{}/{}/{}", source.kind.as_str(), namespace, source.name);
    let found = api.get_opt(&source.name).await.map_err(|e| {
        ReconcileError::transient(
            reason::ARTIFACT_FAILED,
            format!("cannot get source '{display}': {e}"),
        )
        .with_source(e)
    })?;
    // With one watched namespace, a source elsewhere is never reconciled here: say so.
    let unwatched = tenancy
        .unwatched(&namespace)
        .map(|why| format!(" ({why})"))
        .unwrap_or_default();
    let Some(found) = found else {
        return Err(ReconcileError::waiting(
            SOURCE_RETRY,
            reason::ARTIFACT_FAILED,
            format!("Source '{display}' not found{unwatched}"),
        ));
    };
    let artifact = found
        .data
        .get("status")
        .and_then(|s| s.get("artifact"))
        .and_then(|a| serde_json::from_value::<Artifact>(a.clone()).ok());
    artifact.ok_or_else(|| {
        // A source that failed for its generation is reported as failed (retried, and
        // triggered again by the source's first artifact), not as one to wait for.
        let source = serde_json::to_value(&found).unwrap_or_default();
        match crate::sources::failure(&source) {
            Some(failure) => ReconcileError::transient(
                reason::ARTIFACT_FAILED,
                format!("Source '{display}' is not ready: {failure}"),
            ),
            None => ReconcileError::waiting(
                SOURCE_RETRY,
                reason::ARTIFACT_FAILED,
                format!("Source '{display}' is not ready, artifact not found{unwatched}"),
            ),
        }
    })
}

/// Resolves the source artifact and checks `spec.dependsOn`.
fn check_source_step(cx: &mut StepContext<KustomizationReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        let unsupported = unsupported_fields(&cx.object);
        if !unsupported.is_empty() {
            return Err(ReconcileError::stalled(
                reason::FEATURE_GATE_DISABLED,
                format!(
                    "{} not supported by this controller yet",
                    unsupported.join(", ")
                ),
            ));
        }
        // An invalid list stalls (`InvalidCELExpression`): Flux checks it at reconcile start,
        // before the source.
        cx.state.health_exprs = crate::health_exprs::parse(&cx.object.spec.health_check_exprs)?;
        check_retry_interval(&cx.object)?;
        cx.state.started = Some(std::time::Instant::now());
        let artifact = source_artifact(&cx.client, &cx.object, &cx.reconciler.tenancy).await?;
        runtime::depends::check_watched::<Kustomization, _>(
            &cx.client,
            cx.object.as_ref(),
            Some(&artifact.revision),
            DEPENDENCY_RETRY,
            &cx.reconciler.tenancy,
        )
        .await?;
        cx.state.manager = target::manager_for(
            &cx.client,
            &cx.object,
            cx.reconciler.tenancy.default_service_account.as_deref(),
        )
        .await?;
        cx.status.last_attempted_revision = Some(artifact.revision.clone());
        cx.state
            .revisions
            .insert(history::REVISION_KEY.to_owned(), artifact.revision.clone());
        if let Some(origin) = artifact.metadata.get(ORIGIN_REVISION_KEY) {
            cx.state
                .revisions
                .insert(history::ORIGIN_REVISION_KEY.to_owned(), origin.clone());
        }
        cx.event_metadata.extend(
            [
                (runtime::events::REVISION_KEY, Some(&artifact.revision)),
                (
                    runtime::events::ORIGIN_REVISION_KEY,
                    artifact.metadata.get(ORIGIN_REVISION_KEY),
                ),
            ]
            .into_iter()
            .filter_map(|(key, value)| Some((key.to_owned(), value?.clone()))),
        );
        cx.state.artifact = Some(artifact);
        Ok(StepOutcome::next())
    })
}

/// Downloads the artifact, verifies its digest and extracts it.
fn fetch_artifact_step(cx: &mut StepContext<KustomizationReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        let Some(artifact) = cx.state.artifact.as_ref() else {
            return Ok(StepOutcome::next());
        };
        let failed = |message: String| ReconcileError::transient(reason::ARTIFACT_FAILED, message);
        let digest = capstan_source::Digest::from_str(&artifact.digest).map_err(|e| {
            failed(format!(
                "invalid artifact digest '{}': {e}",
                artifact.digest
            ))
            .with_source(e)
        })?;
        let variables = substitution_variables(cx).await?;
        let key = build_key(
            cx.object.metadata.uid.as_deref(),
            &artifact.digest,
            cx.object.metadata.generation,
            variables.as_ref(),
        );
        let object = format!("{}/{}", cx.namespace(), cx.name());
        if let Some(objects) = cx.reconciler.cached_build(&object, &key) {
            tracing::debug!("artifact and inputs unchanged, reusing the last build");
            cx.state.objects = objects;
            cx.state.built = true;
            return Ok(StepOutcome::next());
        }
        let dir = capstan_source::temp::dir("kustomization").map_err(|e| {
            failed(format!("cannot create a temporary directory: {e}")).with_source(e)
        })?;
        let target = dir.path().join("source");
        capstan_source::fetch::fetch_artifact(
            &artifact.url,
            &digest,
            &target,
            &cx.reconciler.limits,
        )
        .await
        .map_err(|e| {
            failed(format!(
                "failed to download artifact from {}: {e}",
                artifact.url
            ))
            .with_source(e)
        })?;
        cx.state.dir = Some(dir);
        cx.state.variables = variables;
        cx.state.build_key = key;
        Ok(StepOutcome::next())
    })
}

/// Builds `spec.path` with the overrides, `commonMetadata` and substitutions.
fn build_step(cx: &mut StepContext<KustomizationReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        if cx.state.built {
            return Ok(StepOutcome::next());
        }
        let Some(dir) = cx.state.dir.as_ref() else {
            return Ok(StepOutcome::next());
        };
        let root = dir.path().join("source");
        let object = cx.object.clone();
        let variables = cx.state.variables.take();
        let loader = cx.reconciler.remote_bases.then(|| {
            std::sync::Arc::new(remote::GitRemoteLoader::new(
                tokio::runtime::Handle::current(),
                cx.reconciler.limits,
            ))
        });
        let engine_loader = loader
            .clone()
            .map(|l| l as std::sync::Arc<dyn capstan_kustomize::RemoteLoader>);
        let keys = decrypt::keys(&cx.client, &cx.object).await?;
        let decrypting = keys.is_some();
        let built = tokio::task::spawn_blocking(move || match keys {
            Some(keys) => decrypt::render(&root, &object, variables.as_ref(), engine_loader, &keys),
            None => render_with(&root, &object, variables.as_ref(), engine_loader)
                .map_err(decrypt::DecryptError::from),
        })
        .await
        .map_err(|e| {
            ReconcileError::transient(reason::BUILD_FAILED, "build task failed").with_source(e)
        })?;
        match built {
            Ok(objects) => {
                // A build with remote bases or decryption depends on more than the source
                // revision (the bases' refs, the keys Secret, read again each time as Flux
                // does); and decrypted Secrets are not kept past the reconcile.
                if !decrypting && !loader.as_ref().is_some_and(|l| l.used()) {
                    cx.reconciler.store_build(
                        format!("{}/{}", cx.namespace(), cx.name()),
                        std::mem::take(&mut cx.state.build_key),
                        objects.clone(),
                    );
                }
                cx.state.objects = objects;
                cx.state.built = true;
                cx.state.dir = None;
                Ok(StepOutcome::next())
            }
            Err(error) => Err(ReconcileError::from_error(
                crate::error::ErrorClass::Transient,
                reason::BUILD_FAILED,
                error,
            )),
        }
    })
}

/// The variables of `postBuild` ([`variables::collect`], as the CLI reads them), read with the
/// controller's client in the object's namespace.
async fn substitution_variables(
    cx: &StepContext<KustomizationReconciler>,
) -> Result<Option<BTreeMap<String, String>>, ReconcileError> {
    variables::collect(
        cx.object.spec.post_build.as_ref(),
        Some(&cx.client),
        &cx.namespace(),
    )
    .await
    .map_err(|e| {
        ReconcileError::from_error(crate::error::ErrorClass::Transient, reason::BUILD_FAILED, e)
    })
}

/// Applies the objects in stages and records the inventory.
fn apply_step(cx: &mut StepContext<KustomizationReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        if !cx.state.built {
            return Ok(StepOutcome::next());
        }
        let previous = match cx.status.inventory.as_ref() {
            Some(status) => Inventory::from_status(status).map_err(|e| {
                ReconcileError::stalled(
                    reason::RECONCILIATION_FAILED,
                    format!("invalid status.inventory: {e}"),
                )
                .with_source(e)
            })?,
            None => Inventory::default(),
        };
        let mut objects = std::mem::take(&mut cx.state.objects);
        set_owner_labels(&mut objects, &cx.name(), &cx.namespace());
        let options = ApplyOptions {
            force: cx.object.spec.force.unwrap_or(false),
            ..ApplyOptions::default()
        };
        let manager = cx.state.manager(&cx.reconciler).clone();
        if drift::report_only(cx.object.annotations()) {
            return report_drift(cx, manager, objects, options).await;
        }
        cx.remove_condition(drift::DRIFTED_CONDITION);
        let digest = history::digest(&objects);
        cx.state.digest = Some(digest.clone());
        cx.event_metadata
            .insert(runtime::events::TOKEN_KEY.to_owned(), digest.clone());
        if let Some(wait) = cx.wait_in_flight(&health_wait_key(cx, &digest)) {
            // A pass of this reconcile applied these very objects and waits for their health:
            // look again without applying again.
            tracing::debug!(looks = wait.looks, "waiting for health, apply done");
            cx.state.started = Some(wait.started);
            cx.state.awaiting = Some(wait);
            return Ok(StepOutcome::next());
        }
        record_apply_in_progress(cx, &manager, &previous, &objects, &options, &digest).await?;
        match apply_objects(manager, objects.clone(), options).await {
            Ok(changeset) => {
                tracing::info!(changes = %changeset.to_string().trim_end().replace('\n', ", "), "applied");
                publish_changes(cx, &changeset).await;
                let inventory = Inventory::from_changeset(&changeset);
                cx.status.inventory = Some(inventory.to_status());
                cx.state.inventory = Some(inventory);
                cx.state.previous = Some(previous);
                Ok(StepOutcome::next())
            }
            Err(capstan_apply::Error::Partial { changeset, errors }) => {
                // Keep what was applied owned, so that nothing leaks from the inventory.
                let mut inventory = previous;
                for entry in Inventory::from_changeset(&changeset).objects() {
                    inventory.add(entry.clone());
                }
                cx.status.inventory = Some(inventory.to_status());
                record_history(cx, reason::RECONCILIATION_FAILED);
                let failed: Vec<String> = errors.iter().map(ToString::to_string).collect();
                Err(ReconcileError::transient(
                    reason::RECONCILIATION_FAILED,
                    capstan_api::message::summarize_after(
                        &format!(
                            "apply failed for {} of {} objects ({} applied): ",
                            errors.len(),
                            objects.len(),
                            changeset.entries.len(),
                        ),
                        &failed,
                    ),
                ))
            }
            Err(error) => {
                record_history(cx, reason::RECONCILIATION_FAILED);
                Err(ReconcileError::transient(
                    reason::RECONCILIATION_FAILED,
                    format!("apply failed: {error}"),
                )
                .with_source(error))
            }
        }
    })
}

/// Before the first write to the cluster, records in the status what the apply may write:
/// the inventory grows to the previous one and every object about to be applied, so that a
/// deletion (or a prune after a crash) finds whatever an interrupted apply left; and, unless
/// exactly these objects of this revision are already applied, `Reconciling=True` and
/// `Ready=Unknown` naming the revision, so that a crash leaves "in progress", not the
/// `Ready=True` of the previous revision. Nothing is written when nothing changes.
async fn record_apply_in_progress(
    cx: &mut StepContext<KustomizationReconciler>,
    manager: &ResourceManager,
    previous: &Inventory,
    objects: &[DynamicObject],
    options: &ApplyOptions,
    digest: &str,
) -> Result<(), ReconcileError> {
    let mut pending = previous.clone();
    for reference in manager.references(objects, options).await {
        pending.add(reference);
    }
    cx.status.inventory = Some(pending.to_status());
    let revision = cx
        .state
        .revisions
        .get(history::REVISION_KEY)
        .cloned()
        .unwrap_or_default();
    let written = if already_applied(&cx.object, &cx.status, &revision, digest) {
        cx.write_status().await
    } else {
        cx.mark_progressing(&format!("Applying revision: {revision}"))
            .await
    };
    written.map_err(|e| {
        ReconcileError::transient(
            reason::RECONCILIATION_FAILED,
            format!("cannot record the apply in progress: {e}"),
        )
        .with_source(e)
    })
}

/// Whether `status` says that the objects of `digest`, from `revision`, were applied by this
/// generation and are Ready: a re-apply of them only corrects drift.
fn already_applied(
    object: &Kustomization,
    status: &KustomizationStatus,
    revision: &str,
    digest: &str,
) -> bool {
    status.observed_generation == object.metadata.generation
        && status.last_applied_revision.as_deref() == Some(revision)
        && status
            .conditions
            .iter()
            .any(|c| c.type_ == condition::READY && c.status == "True")
        && status.history.first().is_some_and(|last| {
            last.digest == digest && last.last_reconciled_status == reason::RECONCILIATION_SUCCEEDED
        })
}

/// Report-only drift mode: diffs instead of applying, records the `Drifted` condition and
/// publishes a `DriftDetected` Warning Event when the drift found changed.
async fn report_drift(
    cx: &mut StepContext<KustomizationReconciler>,
    manager: ResourceManager,
    objects: Vec<DynamicObject>,
    options: ApplyOptions,
) -> Result<StepOutcome, ReconcileError> {
    let revision = cx
        .state
        .revisions
        .get(history::REVISION_KEY)
        .cloned()
        .unwrap_or_default();
    let drifts = match manager.diff(&objects, &options).await {
        Ok(drifts) => drifts,
        Err(capstan_apply::Error::Diff { errors, .. }) => {
            let failed: Vec<String> = errors.iter().map(ToString::to_string).collect();
            return Err(ReconcileError::transient(
                reason::RECONCILIATION_FAILED,
                capstan_api::message::summarize_after("drift detection failed: ", &failed),
            ));
        }
        Err(error) => {
            return Err(ReconcileError::transient(
                reason::RECONCILIATION_FAILED,
                format!("drift detection failed: {error}"),
            )
            .with_source(error));
        }
    };
    let report = drift::Report::new(&drifts);
    let message = report.message(&revision);
    let previous = cx
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == drift::DRIFTED_CONDITION)
        .map(|c| c.message.clone());
    if report.has_drift() {
        cx.set_condition(
            drift::DRIFTED_CONDITION,
            ConditionStatus::True,
            drift::DRIFT_DETECTED,
            &message,
        );
        if previous.as_deref() != Some(message.as_str()) {
            tracing::info!(%message, "drift detected");
            cx.publish_event(
                EventType::Warning,
                drift::DRIFT_DETECTED,
                &message,
                "DriftDetection",
            )
            .await;
        }
    } else {
        cx.set_condition(
            drift::DRIFTED_CONDITION,
            ConditionStatus::False,
            drift::NO_DRIFT,
            &message,
        );
    }
    cx.set_ready_message(format!(
        "Drift report for revision {revision}: {} drifted, {} missing (report only, nothing applied)",
        report.drifted.len(),
        report.missing.len()
    ));
    Ok(StepOutcome::next())
}

/// Publishes Flux's change-set Event when `changeset` changed something: a `Normal` Event,
/// reason `Progressing` (kustomize-controller's Ready reason while it applies), its note one
/// `Kind/namespace/name <action>` line per object created, configured or deleted, with the
/// revision in the metadata.
async fn publish_changes(cx: &StepContext<KustomizationReconciler>, changeset: &ChangeSet) {
    if let Some(note) = change_note(changeset) {
        cx.publish_event(EventType::Normal, reason::PROGRESSING, &note, "Reconcile")
            .await;
    }
}

/// The lines of what `changeset` changed (unchanged and skipped objects left out, as Flux's
/// `HasChanged`), within an Event note's [`runtime::events::MAX_MESSAGE`] bytes: the lines that
/// fit and `(and N more)`. `None` when nothing changed.
fn change_note(changeset: &ChangeSet) -> Option<String> {
    /// Room kept for the `(and N more)` line.
    const MORE: usize = 24;
    let lines: Vec<String> = changeset
        .entries
        .iter()
        .filter(|e| !matches!(e.action, Action::Unchanged | Action::Skipped))
        .map(ToString::to_string)
        .collect();
    let mut note = String::new();
    for (index, line) in lines.iter().enumerate() {
        let room = if index + 1 == lines.len() {
            runtime::events::MAX_MESSAGE
        } else {
            runtime::events::MAX_MESSAGE - MORE
        };
        if note.len() + line.len() + 1 > room {
            return Some(format!("{note}(and {} more)", lines.len() - index));
        }
        note.push_str(line);
        note.push('\n');
    }
    note.pop();
    (!note.is_empty()).then_some(note)
}

/// Deletes objects that left the build, when `spec.prune` is set.
fn prune_step(cx: &mut StepContext<KustomizationReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        if !cx.object.spec.prune {
            return Ok(StepOutcome::next());
        }
        let (Some(previous), Some(current)) = (&cx.state.previous, &cx.state.inventory) else {
            return Ok(StepOutcome::next());
        };
        let stale = previous.diff(current);
        if stale.is_empty() {
            return Ok(StepOutcome::next());
        }
        let options = DeleteOptions {
            owner: Some(owner_of(&cx.object)),
            ..DeleteOptions::default()
        };
        let manager = cx.state.manager(&cx.reconciler).clone();
        match delete_objects(manager, stale, options).await {
            Ok(changeset) => {
                tracing::info!(changes = %changeset.to_string().trim_end().replace('\n', ", "), "pruned");
                publish_changes(cx, &changeset).await;
                Ok(StepOutcome::next())
            }
            Err(error) => {
                record_history(cx, reason::PRUNE_FAILED);
                Err(ReconcileError::transient(
                    reason::PRUNE_FAILED,
                    format!("prune failed: {error}"),
                )
                .with_source(error))
            }
        }
    })
}

/// The objects `spec.healthChecks` names; a missing `apiVersion` is taken from the inventory.
fn health_check_objects(
    references: &[NamespacedObjectKindReference],
    inventory: Option<&Inventory>,
    default_namespace: &str,
) -> Result<Vec<ObjectRef>, String> {
    references
        .iter()
        .map(|reference| {
            let namespace = reference.namespace.as_deref().unwrap_or(default_namespace);
            let api_version = match &reference.api_version {
                Some(v) => v.clone(),
                None => inventory
                    .and_then(|inventory| {
                        inventory.objects().iter().find(|o| {
                            o.kind == reference.kind
                                && o.name == reference.name
                                && (o.namespace == namespace || o.namespace.is_empty())
                        })
                    })
                    .map(ObjectRef::api_version)
                    .ok_or_else(|| {
                        format!(
                            "health check {}/{namespace}/{} has no apiVersion and is not in the inventory",
                            reference.kind, reference.name
                        )
                    })?,
            };
            Ok(ObjectRef::new(
                &api_version,
                &reference.kind,
                namespace,
                &reference.name,
            ))
        })
        .collect()
}

/// Records a successful apply of `artifact` in `status`; returns the `Ready` message.
fn record_applied(status: &mut KustomizationStatus, artifact: Artifact) -> String {
    status.last_applied_origin_revision = artifact.metadata.get(ORIGIN_REVISION_KEY).cloned();
    let message = format!("Applied revision: {}", artifact.revision);
    status.last_applied_revision = Some(artifact.revision);
    message
}

/// The objects whose health this reconcile awaits: every applied object with `spec.wait`, and
/// those `spec.healthChecks` names; `None` when nothing was applied.
fn awaited_objects(
    cx: &StepContext<KustomizationReconciler>,
) -> Result<Option<Vec<ObjectRef>>, ReconcileError> {
    let Some(inventory) = cx.state.inventory.as_ref() else {
        return Ok(None);
    };
    let mut objects = if cx.object.spec.wait == Some(true) {
        inventory.objects().to_vec()
    } else {
        Vec::new()
    };
    let checks = health_check_objects(
        &cx.object.spec.health_checks,
        Some(inventory),
        &cx.namespace(),
    )
    .map_err(|message| ReconcileError::stalled(reason::HEALTH_CHECK_FAILED, message))?;
    for check in checks {
        if !objects.contains(&check) {
            objects.push(check);
        }
    }
    Ok(Some(objects))
}

/// Checks health (`spec.wait` or `spec.healthChecks`) and records the applied revision.
///
/// One look per pass: while the objects are progressing, the step is pending and the runtime
/// looks again after a short delay (the worker is free meanwhile), until they are healthy, one
/// fails, or `spec.timeout` (from the first look, right after the apply) passes.
/// Sets `Healthy` (`True`, or `False` with `HealthCheckFailed` naming each unhealthy object).
fn check_health_step(cx: &mut StepContext<KustomizationReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        let Some(digest) = cx.state.digest.clone() else {
            return Ok(StepOutcome::next());
        };
        let wait = if let Some(wait) = cx.state.awaiting.take() {
            Some(wait)
        } else {
            let Some(objects) = awaited_objects(cx)? else {
                return Ok(StepOutcome::next());
            };
            if objects.is_empty() {
                None
            } else {
                let timeout = health_timeout(&cx.object)?;
                Some(cx.look(&health_wait_key(cx, &digest), timeout, || objects))
            }
        };
        match wait {
            None => cx.remove_condition(condition::HEALTHY),
            Some(wait) => {
                // Flux consults its Job reader first unless it impersonates or targets a
                // remote cluster (then the expressions come first).
                let mut exprs = cx.state.health_exprs.clone();
                if cx.state.manager.is_none() {
                    exprs = exprs.with_builtin_jobs();
                }
                let manager = cx.state.manager(&cx.reconciler).with_health_exprs(exprs);
                let results = manager.check_health(&wait.objects).await;
                let now = std::time::Instant::now();
                match health_verdict(results, &wait, now) {
                    Ok(true) => {
                        let elapsed = now.saturating_duration_since(wait.started);
                        let message = format!(
                            "Health check passed in {:?}",
                            Duration::from_millis(
                                u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
                            )
                        );
                        cx.set_condition(
                            condition::HEALTHY,
                            ConditionStatus::True,
                            reason::SUCCEEDED,
                            &message,
                        );
                    }
                    Ok(false) => return Ok(StepOutcome::pending(wait.next_poll(now))),
                    Err(error) => {
                        let message = error.to_string();
                        cx.set_condition(
                            condition::HEALTHY,
                            ConditionStatus::False,
                            reason::HEALTH_CHECK_FAILED,
                            &message,
                        );
                        record_history(cx, reason::HEALTH_CHECK_FAILED);
                        return Err(ReconcileError::transient(
                            reason::HEALTH_CHECK_FAILED,
                            message,
                        )
                        .with_source(error));
                    }
                }
            }
        }
        if let Some(artifact) = cx.state.artifact.take() {
            let message = record_applied(&mut cx.status, artifact);
            cx.set_ready_message(message);
        }
        record_history(cx, reason::RECONCILIATION_SUCCEEDED);
        Ok(StepOutcome::next())
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::Value;

    use super::render::*;
    use super::*;

    #[test]
    fn the_change_note_lists_what_changed_within_an_event_note() {
        let mut changeset = ChangeSet::default();
        changeset.push(ObjectRef::new("v1", "Namespace", "", "x"), Action::Created);
        changeset.push(
            ObjectRef::new("v1", "ConfigMap", "x", "same"),
            Action::Unchanged,
        );
        changeset.push(
            ObjectRef::new("apps/v1", "Deployment", "y", "z"),
            Action::Configured,
        );
        changeset.push(
            ObjectRef::new("v1", "ConfigMap", "x", "kept"),
            Action::Skipped,
        );
        assert_eq!(
            change_note(&changeset).as_deref(),
            Some("Namespace/x created\nDeployment/y/z configured")
        );

        let mut unchanged = ChangeSet::default();
        unchanged.push(
            ObjectRef::new("v1", "ConfigMap", "x", "same"),
            Action::Unchanged,
        );
        assert_eq!(change_note(&unchanged), None);

        let mut many = ChangeSet::default();
        for i in 0..200 {
            many.push(
                ObjectRef::new("v1", "ConfigMap", "apps", &format!("config-{i}")),
                Action::Created,
            );
        }
        let note = change_note(&many).unwrap();
        assert!(note.len() <= runtime::events::MAX_MESSAGE, "{}", note.len());
        assert!(
            note.starts_with("ConfigMap/apps/config-0 created\n"),
            "{note}"
        );
        let shown = note.lines().count() - 1;
        assert!(
            note.ends_with(&format!("(and {} more)", 200 - shown)),
            "{note}"
        );
    }

    fn kustomization(spec: &Value) -> Kustomization {
        let mut full = serde_json::json!({
            "interval": "10m",
            "prune": false,
            "sourceRef": {"kind": "GitRepository", "name": "repo"},
        });
        full.as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        let mut object = Kustomization::new("apps", serde_json::from_value(full).unwrap());
        object.metadata.namespace = Some("flux-system".into());
        object
    }

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn substitutes_variables_defaults_and_escapes() {
        let variables = vars(&[("env", "prod"), ("replicas", "3")]);
        assert_eq!(
            substitute(
                "name: app-${env}\nreplicas: ${replicas}\nzone: ${zone:=eu}\nx: ${missing}.\n",
                &variables
            )
            .unwrap(),
            "name: app-prod\nreplicas: 3\nzone: eu\nx: .\n"
        );
        assert_eq!(
            substitute("a: $${env} $HOME $", &variables).unwrap(),
            "a: ${env} $HOME $"
        );
        assert!(
            substitute("a: ${env", &variables)
                .unwrap_err()
                .to_string()
                .contains("unterminated")
        );
        assert!(
            substitute("a: ${bad-name}", &variables)
                .unwrap_err()
                .to_string()
                .contains("bad-name")
        );
    }

    #[test]
    fn refuses_paths_leaving_the_source() {
        let root = Path::new("/tmp/src");
        assert_eq!(
            resolve_path(root, "./apps/prod").unwrap(),
            root.join("apps/prod")
        );
        assert_eq!(resolve_path(root, "./").unwrap(), root);
        assert!(
            resolve_path(root, "../etc")
                .unwrap_err()
                .to_string()
                .contains("spec.path")
        );
    }

    #[test]
    fn overlay_holds_only_the_overrides_given() {
        assert!(overlay_kustomization(&kustomization(&serde_json::json!({})), "..").is_none());
        let object = kustomization(&serde_json::json!({
            "targetNamespace": "prod",
            "namePrefix": "p-",
            "images": [{"name": "nginx", "newTag": "1.27"}],
            "components": ["./components/a"],
        }));
        let overlay = overlay_kustomization(&object, "../apps").unwrap();
        assert_eq!(overlay["namespace"], "prod");
        assert_eq!(overlay["namePrefix"], "p-");
        assert_eq!(overlay["resources"], serde_json::json!(["../apps"]));
        assert_eq!(overlay["images"][0]["newTag"], "1.27");
        assert_eq!(
            overlay["components"],
            serde_json::json!(["../apps/components/a"])
        );
        assert!(overlay.get("nameSuffix").is_none());
    }

    const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: apps\ndata:\n  env: ${env:=dev}\n";
    const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: apps\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.25\n";

    fn source(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join("source").join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    fn names(objects: &[Value]) -> Vec<String> {
        objects.iter().map(describe_value).collect()
    }

    #[test]
    fn generates_a_kustomization_listing_the_manifests() {
        let dir = source(&[
            ("apps/web/deployment.yaml", DEPLOYMENT),
            ("apps/config.yaml", CONFIG_MAP),
            ("apps/values.json", "{\"replicas\": 3}\n"),
            ("apps/README.md", "docs"),
        ]);
        let object = kustomization(&serde_json::json!({"path": "./apps"}));
        let objects = build_objects(&dir.path().join("source"), &object).unwrap();
        assert_eq!(
            names(&objects),
            ["ConfigMap/apps/settings", "Deployment/apps/web"]
        );
    }

    #[test]
    fn applies_flux_overrides_through_an_overlay() {
        let dir = source(&[
            (
                "apps/kustomization.yaml",
                "resources: [config.yaml, deployment.yaml]\n",
            ),
            ("apps/config.yaml", CONFIG_MAP),
            ("apps/deployment.yaml", DEPLOYMENT),
        ]);
        let object = kustomization(&serde_json::json!({
            "path": "apps",
            "targetNamespace": "prod",
            "namePrefix": "p-",
            "nameSuffix": "-s",
            "images": [{"name": "nginx", "newTag": "1.27"}],
            "patches": [{"patch": "- op: replace\n  path: /spec/replicas\n  value: 2\n",
                         "target": {"kind": "Deployment"}}],
        }));
        let objects = build_objects(&dir.path().join("source"), &object).unwrap();
        assert_eq!(
            names(&objects),
            ["ConfigMap/prod/p-settings-s", "Deployment/prod/p-web-s"]
        );
        let deployment = &objects[1];
        assert_eq!(deployment["spec"]["replicas"], 2);
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1.27"
        );
    }

    #[test]
    fn overrides_apply_to_the_source_root() {
        let dir = source(&[("config.yaml", CONFIG_MAP)]);
        let object = kustomization(&serde_json::json!({"targetNamespace": "prod"}));
        let objects = build_objects(&dir.path().join("source"), &object).unwrap();
        assert_eq!(names(&objects), ["ConfigMap/prod/settings"]);
    }

    #[test]
    fn components_are_relative_to_the_path() {
        let dir = source(&[
            ("apps/kustomization.yaml", "resources: [config.yaml]\n"),
            ("apps/config.yaml", CONFIG_MAP),
            (
                "apps/components/team/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonLabels:\n  team: web\n",
            ),
        ]);
        let object = kustomization(&serde_json::json!({
            "path": "./apps",
            "components": ["./components/team"],
        }));
        let objects = build_objects(&dir.path().join("source"), &object).unwrap();
        assert_eq!(objects[0]["metadata"]["labels"]["team"], "web");
    }

    #[test]
    fn build_errors_name_the_file() {
        let dir = source(&[("apps/kustomization.yaml", "resources: [missing.yaml]\n")]);
        let object = kustomization(&serde_json::json!({"path": "apps"}));
        let error = build_objects(&dir.path().join("source"), &object)
            .unwrap_err()
            .to_string();
        assert!(error.contains("missing.yaml"), "{error}");
        assert!(
            !error.contains(&dir.path().display().to_string()),
            "{error}"
        );
        let object = kustomization(&serde_json::json!({"path": "nowhere"}));
        let error = build_objects(&dir.path().join("source"), &object)
            .unwrap_err()
            .to_string();
        assert!(error.contains("'nowhere'"), "{error}");
    }

    #[test]
    fn finishing_substitutes_and_adds_common_metadata() {
        let objects = capstan_kustomize::parse_documents(&format!(
            "{CONFIG_MAP}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: raw\n  namespace: apps\n  annotations:\n    {SUBSTITUTE_ANNOTATION}: disabled\ndata:\n  env: ${{env}}\n"
        ))
        .unwrap();
        let object = kustomization(&serde_json::json!({
            "commonMetadata": {"labels": {"team": "a", "env": "${env}"}, "annotations": {"owner": "ops"}},
        }));
        let variables = vars(&[("env", "prod")]);
        let finished = finish_objects(objects, &object, Some(&variables)).unwrap();
        assert_eq!(finished[0].data["data"]["env"], "prod");
        assert_eq!(finished[1].data["data"]["env"], "${env}");
        for object in &finished {
            assert_eq!(object.labels()["team"], "a");
            assert_eq!(object.annotations()["owner"], "ops");
        }
        // commonMetadata is part of the build, so it is substituted too (as in Flux).
        assert_eq!(finished[0].labels()["env"], "prod");
        assert_eq!(
            finished[1].labels()["env"],
            "${env}",
            "substitution disabled there"
        );
    }

    #[test]
    fn health_checks_take_the_api_version_from_the_inventory() {
        let inventory = Inventory::new([ObjectRef::new("apps/v1", "Deployment", "apps", "web")]);
        let references: Vec<NamespacedObjectKindReference> =
            serde_json::from_value(serde_json::json!([
                {"kind": "Deployment", "name": "web", "namespace": "apps"},
                {"apiVersion": "v1", "kind": "Service", "name": "web"},
            ]))
            .unwrap();
        let objects = health_check_objects(&references, Some(&inventory), "flux-system").unwrap();
        assert_eq!(objects[0].api_version(), "apps/v1");
        assert_eq!(objects[1].namespace, "flux-system");
        let unknown: Vec<NamespacedObjectKindReference> =
            serde_json::from_value(serde_json::json!([{"kind": "Job", "name": "x"}])).unwrap();
        assert!(
            health_check_objects(&unknown, Some(&inventory), "ns")
                .unwrap_err()
                .contains("Job/ns/x")
        );
    }

    #[test]
    fn refuses_fields_not_implemented_yet() {
        assert!(unsupported_fields(&kustomization(&serde_json::json!({}))).is_empty());
        let object = kustomization(&serde_json::json!({
            "serviceAccountName": "sa",
            "kubeConfig": {"secretRef": {"name": "k"}},
        }));
        assert!(unsupported_fields(&object).is_empty());
        let object = kustomization(&serde_json::json!({
            "kubeConfig": {"configMapRef": {"name": "k"}},
        }));
        assert_eq!(
            unsupported_fields(&object),
            ["spec.kubeConfig.configMapRef"]
        );
    }

    #[test]
    fn records_the_applied_and_origin_revisions() {
        let mut artifact: Artifact = serde_json::from_value(serde_json::json!({
            "path": "p", "url": "http://x/p", "revision": "latest@sha256:abc",
            "digest": "sha256:abc", "lastUpdateTime": "2026-01-01T00:00:00Z",
            "metadata": {ORIGIN_REVISION_KEY: "main@sha1:123"},
        }))
        .unwrap();
        let mut status = KustomizationStatus::default();
        let message = record_applied(&mut status, artifact.clone());
        assert_eq!(message, "Applied revision: latest@sha256:abc");
        assert_eq!(
            status.last_applied_revision.as_deref(),
            Some("latest@sha256:abc")
        );
        assert_eq!(
            status.last_applied_origin_revision.as_deref(),
            Some("main@sha1:123")
        );
        artifact.metadata.clear();
        record_applied(&mut status, artifact);
        assert!(status.last_applied_origin_revision.is_none());
    }

    #[test]
    fn build_keys_follow_identity_digest_generation_and_variables() {
        let variables = vars(&[("env", "prod")]);
        let uid = Some("u1");
        let key = build_key(uid, "sha256:a", Some(1), Some(&variables));
        assert_eq!(key, build_key(uid, "sha256:a", Some(1), Some(&variables)));
        assert_ne!(
            key,
            build_key(Some("u2"), "sha256:a", Some(1), Some(&variables))
        );
        assert_ne!(key, build_key(uid, "sha256:b", Some(1), Some(&variables)));
        assert_ne!(key, build_key(uid, "sha256:a", Some(2), Some(&variables)));
        assert_ne!(key, build_key(uid, "sha256:a", Some(1), None));
        assert_ne!(
            key,
            build_key(uid, "sha256:a", Some(1), Some(&vars(&[("env", "dev")])))
        );
    }

    #[test]
    fn only_the_same_objects_of_the_same_revision_count_as_already_applied() {
        let mut object = kustomization(&serde_json::json!({}));
        object.metadata.generation = Some(2);
        let mut status = KustomizationStatus {
            observed_generation: Some(2),
            last_applied_revision: Some("main@sha1:a".into()),
            ..KustomizationStatus::default()
        };
        crate::runtime::conditions::set_condition(
            &mut status.conditions,
            condition::READY,
            ConditionStatus::True,
            reason::RECONCILIATION_SUCCEEDED,
            "Applied revision: main@sha1:a",
            Some(2),
        );
        history::upsert(
            &mut status.history,
            "sha256:objects",
            jiff::Timestamp::UNIX_EPOCH,
            Duration::from_secs(1),
            reason::RECONCILIATION_SUCCEEDED,
            BTreeMap::new(),
        );
        assert!(already_applied(
            &object,
            &status,
            "main@sha1:a",
            "sha256:objects"
        ));
        assert!(
            !already_applied(&object, &status, "main@sha1:b", "sha256:objects"),
            "a new revision"
        );
        assert!(
            !already_applied(&object, &status, "main@sha1:a", "sha256:other"),
            "other objects (e.g. new variables)"
        );
        object.metadata.generation = Some(3);
        assert!(
            !already_applied(&object, &status, "main@sha1:a", "sha256:objects"),
            "a new generation"
        );
        object.metadata.generation = Some(2);
        history::upsert(
            &mut status.history,
            "sha256:objects",
            jiff::Timestamp::UNIX_EPOCH,
            Duration::from_secs(1),
            reason::HEALTH_CHECK_FAILED,
            BTreeMap::new(),
        );
        assert!(
            !already_applied(&object, &status, "main@sha1:a", "sha256:objects"),
            "the last attempt failed"
        );
    }
}
