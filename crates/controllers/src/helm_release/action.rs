//! The release state machine, as Flux's helm-controller runs it (`AtomicRelease`): the state
//! of the release is determined from Helm's storage and the HelmRelease's status
//! ([`determine`]), the action for that state runs (`act`), and this repeats until the release
//! is in sync, an action waits for the cluster, or the retries are exhausted. Remediation,
//! drift, the test action and the uninstall are submodules.
//!
//! # Expected flow
//! - Absent → install; Unmanaged (a release this object did not record, e.g. installed by
//!   Helm) or OutOfSync (chart, values, post-renderers or common metadata changed) → upgrade;
//!   Locked (a `pending-*` record no wait of ours owns, e.g. after a restart) → unlock (marked
//!   `failed`); Failed → remediation (rollback, or uninstall, per the active remediation and
//!   its retries), or upgrade when none applies; Untested → test; Drifted → correct
//!   (`driftDetection.mode: enabled`) or report (`warn`); InSync → done.
//! - An install or upgrade installs CRDs by policy and maps every kind of its manifest
//!   (Helm's `Build`: an unserved kind fails it, no record stored, nothing written); an
//!   install, upgrade or rollback then writes a `pending-install`/`pending-upgrade`/
//!   `pending-rollback` record, runs the `pre-*` hooks (a running
//!   hook Job or Pod is stored `Running` and looked at again on the next pass, like the
//!   objects' health: no hook holds a worker), applies the manifest with the apply engine
//!   (server-side apply, field manager `helm-controller`), prunes what left the manifest
//!   (upgrade, rollback), then waits for kstatus health of the applied objects (unless
//!   `disableWait`; Jobs unless `disableWaitForJobs`) — one look per pass, the worker freed in
//!   between ([`StepContext::look`]) — bounded by the action's timeout, counted from the
//!   action's start; then the `post-*` hooks run (the same way), the record becomes
//!   `deployed` (the previous one `superseded`), the history is pruned to `maxHistory`, and
//!   the snapshot is recorded.
//! - A failure marks the record `failed` and counts (`installFailures`/`upgradeFailures`).
//!
//! # Errors
//! Conditions and reasons are Flux's: `Released` (`InstallSucceeded`, `InstallFailed`,
//! `UpgradeSucceeded`, `UpgradeFailed`), `Remediated` (`RollbackSucceeded`, `RollbackFailed`,
//! `UninstallSucceeded`, `UninstallFailed`), `TestSuccess` (`TestSucceeded`, `TestFailed`),
//! `Drifted` (`DriftDetected`, `NoDriftDetected`). Exhausted retries stall the HelmRelease
//! with the reason and message of the last failure.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_api::HelmRelease;
use capstan_api::helm::v2::{CrdsPolicy, DriftDetectionMode, ReleaseAction, condition, reason};
use capstan_api::meta::annotation;
use capstan_apply::{ApplyOptions, DeleteOptions, Inventory, ObjectRef, ResourceManager};
use capstan_helm::chart::Chart;
use capstan_helm::output::HookEvent;
use capstan_helm::release::{self, Release, Status};
use kube::api::DynamicObject;
use kube::runtime::events::EventType;
use kube::{Client, ResourceExt};

use super::render::{self, ClusterInfo, RenderRequest, Rendered};
use super::values::{self, Values};
use super::{HelmReleaseReconciler, hooks, status};
use crate::error::ReconcileError;
use crate::helm_storage::HelmStorage;
use crate::runtime::{ConditionStatus, StepContext, StepOutcome};

mod drift;
mod remediation;
mod test;
mod uninstall;

use self::drift::{drift, drift_mode, drifted};
use self::remediation::{allow_retry, remediate};
use self::test::{test, test_from};
pub(super) use self::uninstall::{DeletionWait, UninstallProgress, uninstall_with};

type Cx = StepContext<HelmReleaseReconciler>;

/// The reason of a `Released=False` after unlocking a stale pending release (Flux's).
pub const PENDING_RELEASE: &str = "PendingRelease";
/// The reason of a stalled HelmRelease out of retries, when no release condition says more.
pub const RETRIES_EXCEEDED: &str = "RetriesExceeded";

/// Where and as what a release is made: the target cluster's apply engine and storage, the
/// release name and namespace.
#[derive(Clone, Debug)]
pub struct Target {
    /// The apply engine (field manager `helm-controller`) of the target cluster.
    pub manager: ResourceManager,
    /// Helm's storage in the storage namespace of the target cluster.
    pub storage: HelmStorage,
    /// The release name.
    pub name: String,
    /// The release namespace.
    pub namespace: String,
    /// Whether the target is another cluster than the controller's (`spec.kubeConfig`).
    pub remote: bool,
}

impl Target {
    fn client(&self) -> &Client {
        self.manager.client()
    }

    /// Every record of the release, oldest first.
    async fn history(&self) -> Result<Vec<Release>, ReconcileError> {
        self.storage
            .history(&self.name)
            .await
            .map_err(storage_error)
    }

    /// The newest record of the release.
    async fn last(&self) -> Result<Option<Release>, ReconcileError> {
        self.storage.last(&self.name).await.map_err(storage_error)
    }

    /// Stores `record` again.
    async fn update(&self, record: &Release) -> Result<(), ReconcileError> {
        self.storage.update(record).await.map_err(storage_error)
    }
}

/// The state of a release compared with its HelmRelease (Flux's `ReleaseStatus`).
#[derive(Debug)]
pub enum ReleaseState {
    /// No release (or only an uninstalled one).
    Absent,
    /// The last record is pending and no wait of ours owns it.
    Locked(Box<Release>),
    /// A release this HelmRelease did not record.
    Unmanaged(String),
    /// Deployed, but the chart, values or post-renderers changed.
    OutOfSync(String),
    /// The last release failed.
    Failed,
    /// Deployed, tests enabled and not run.
    Untested,
    /// Deployed, but the cluster drifted from the manifest: each object that drifted (or is
    /// missing), with what changed.
    Drifted(Vec<(ObjectRef, String)>),
    /// Deployed and in sync.
    InSync,
}

/// What one step of the release loop left.
enum Progress {
    /// Determine the state again.
    Continue,
    /// A wait is in flight: end this pass.
    Pending(StepOutcome),
    /// In sync: the reconcile is done.
    Done,
}

/// Runs the release loop (see the module docs) for the chart and values in `cx.state`.
pub(super) async fn reconcile(cx: &mut Cx) -> Result<StepOutcome, ReconcileError> {
    let (Some(target), Some(chart), Some(values)) = (
        cx.state.target.clone(),
        cx.state.chart.clone(),
        cx.state.values.clone(),
    ) else {
        return Ok(StepOutcome::next());
    };
    handle_reset(cx);
    Box::pin(handle_target_change(cx, &target, &chart)).await?;
    let last = target.last().await?;
    if let Some(last) = last
        && let Progress::Pending(outcome) = Box::pin(resume_in_flight(cx, &target, last)).await?
    {
        return Ok(outcome);
    }
    for _ in 0..8 {
        let state = Box::pin(determine(cx, &target, &chart, &values)).await?;
        tracing::debug!(?state, "release state");
        match Box::pin(act(cx, &target, &chart, &values, state)).await? {
            Progress::Continue => {}
            Progress::Pending(outcome) => return Ok(outcome),
            Progress::Done => return Ok(StepOutcome::next()),
        }
    }
    Err(ReconcileError::transient(
        meta_reason::RECONCILIATION_FAILED,
        "the release did not settle after several actions; retrying",
    ))
}

mod meta_reason {
    pub use capstan_api::meta::reason::*;
}

fn storage_error(error: crate::helm_storage::StorageError) -> ReconcileError {
    ReconcileError::from_error(
        crate::error::ErrorClass::Transient,
        meta_reason::RECONCILIATION_FAILED,
        error,
    )
}

/// Flux's release target change: when the storage namespace, the release namespace or name
/// (or, with `upgrade.chartNameChangeStrategy: Reinstall`, the chart name) differ from the
/// current release's, that release is uninstalled first and the history and failures cleared.
async fn handle_target_change(
    cx: &mut Cx,
    target: &Target,
    chart: &Chart,
) -> Result<(), ReconcileError> {
    let (Some(previous_namespace), Some(current)) = (
        cx.state.previous_storage_namespace.clone(),
        cx.status.history.first().cloned(),
    ) else {
        return Ok(());
    };
    let reinstall = cx
        .object
        .spec
        .upgrade
        .as_ref()
        .and_then(|u| u.chart_name_change_strategy)
        == Some(capstan_api::helm::v2::ChartNameChangeStrategy::Reinstall);
    let changed = previous_namespace != target.storage.namespace()
        || current.namespace != target.namespace
        || current.name != target.name
        || (reinstall && current.chart_name != chart.metadata.name);
    if !changed {
        return Ok(());
    }
    tracing::info!("release target changed: uninstalling the current release");
    let storage = HelmStorage::new(target.client().clone(), &previous_namespace);
    let old = Target {
        storage,
        name: current.name.clone(),
        namespace: current.namespace.clone(),
        ..target.clone()
    };
    if let Some(last) = old.last().await?
        && last.status() != Status::Uninstalled
    {
        uninstall_with(&cx.object, &old, last, DeletionWait::InPlace)
            .await
            .map_err(|e| {
                ReconcileError::transient(
                    reason::UNINSTALL_FAILED,
                    format!(
                        "Helm uninstall failed for release {}/{}: {e}",
                        old.namespace, old.name
                    ),
                )
            })?;
    }
    cx.status.history.clear();
    cx.status.install_failures = None;
    cx.status.upgrade_failures = None;
    cx.status.failures = None;
    Ok(())
}

/// `reconcile.fluxcd.io/resetAt`: a new token clears the failure counters.
fn handle_reset(cx: &mut Cx) {
    if let Some(token) = requested(cx, annotation::RESET_REQUESTED_AT)
        && cx.status.last_handled_reset_at.as_deref() != Some(token.as_str())
    {
        cx.status.install_failures = None;
        cx.status.upgrade_failures = None;
        cx.status.failures = None;
        cx.status.last_handled_reset_at = Some(token);
    }
}

/// Whether `reconcile.fluxcd.io/forceAt` asks for a release now (a token not handled yet).
fn force_requested(cx: &Cx) -> Option<String> {
    let token = requested(cx, annotation::FORCE_REQUESTED_AT)?;
    (cx.status.last_handled_force_at.as_deref() != Some(token.as_str())).then_some(token)
}

/// The token of a `forceAt`/`resetAt` request, honoured only when it equals
/// `reconcile.fluxcd.io/requestedAt`, as Flux does (`flux reconcile hr --force|--reset` sets
/// both): a stale `forceAt` left on the object never forces a later reconcile.
fn requested(cx: &Cx, name: &str) -> Option<String> {
    let annotations = cx.object.annotations();
    let token = annotations.get(name)?;
    (annotations.get(annotation::RECONCILE_REQUESTED_AT) == Some(token)).then(|| token.clone())
}

/// Flux's digest of `spec.postRenderers` (empty when there are none).
pub fn post_renderers_digest(object: &HelmRelease) -> Option<String> {
    (!object.spec.post_renderers.is_empty()).then(|| {
        values::sha256(&serde_json::to_vec(&object.spec.post_renderers).unwrap_or_default())
    })
}

/// Flux's digest of `spec.commonMetadata` (empty when absent).
pub fn common_metadata_digest(object: &HelmRelease) -> Option<String> {
    object
        .spec
        .common_metadata
        .as_ref()
        .map(|c| values::sha256(&serde_json::to_vec(c).unwrap_or_default()))
}

async fn determine(
    cx: &Cx,
    target: &Target,
    chart: &Chart,
    values: &Values,
) -> Result<ReleaseState, ReconcileError> {
    let Some(last) = target.last().await? else {
        return Ok(ReleaseState::Absent);
    };
    if last.status().is_pending() {
        return Ok(ReleaseState::Locked(Box::new(last)));
    }
    let Some(current) = cx.status.history.first() else {
        if last.status() == Status::Uninstalled {
            return Ok(ReleaseState::Absent);
        }
        return Ok(ReleaseState::Unmanaged(
            "found existing release in storage".into(),
        ));
    };
    if current.name != last.name
        || current.version != last.version
        || current.digest != status::release_digest(&last, current.oci_digest.as_deref())
    {
        return Ok(ReleaseState::Unmanaged(
            "release not observed to be made for object".into(),
        ));
    }
    match last.status() {
        Status::Failed => Ok(ReleaseState::Failed),
        Status::Uninstalled => Ok(ReleaseState::Absent),
        Status::Deployed => deployed_state(cx, target, chart, values, &last).await,
        other => Err(ReconcileError::transient(
            meta_reason::RECONCILIATION_FAILED,
            format!("unable to determine state for release with status '{other}'"),
        )),
    }
}

async fn deployed_state(
    cx: &Cx,
    target: &Target,
    chart: &Chart,
    values: &Values,
    last: &Release,
) -> Result<ReleaseState, ReconcileError> {
    if last.chart_name() != chart.metadata.name || last.chart_version() != chart.metadata.version {
        return Ok(ReleaseState::OutOfSync("release chart changed".into()));
    }
    let current = cx.status.history.first();
    if current.is_none_or(|c| c.config_digest != values::digest(values)) {
        return Ok(ReleaseState::OutOfSync(
            "release config values changed".into(),
        ));
    }
    if cx.status.observed_generation != cx.object.metadata.generation {
        if post_renderers_digest(&cx.object) != cx.status.observed_post_renderers_digest {
            return Ok(ReleaseState::OutOfSync(
                "postrenderers digest has changed".into(),
            ));
        }
        if common_metadata_digest(&cx.object) != cx.status.observed_common_metadata_digest {
            return Ok(ReleaseState::OutOfSync(
                "common metadata digest has changed".into(),
            ));
        }
    }
    let test = cx.object.spec.test.clone().unwrap_or_default();
    if test.enable == Some(true) {
        let tested = current.is_some_and(|c| c.test_hooks.is_some())
            || !last
                .hooks
                .iter()
                .any(|h| h.events.contains(&HookEvent::Test));
        if !tested {
            return Ok(ReleaseState::Untested);
        }
        let failed = current.is_some_and(|c| {
            c.test_hooks
                .iter()
                .flat_map(std::collections::BTreeMap::values)
                .any(|h| h.phase.as_deref() == Some("Failed"))
        });
        if failed && !test.ignore_failures.unwrap_or(false) {
            return Ok(ReleaseState::Failed);
        }
    }
    let mode = drift_mode(&cx.object);
    if mode != DriftDetectionMode::Disabled {
        let drifted = drift(cx, target, last).await?;
        if !drifted.is_empty() {
            return Ok(ReleaseState::Drifted(drifted));
        }
    }
    Ok(ReleaseState::InSync)
}

fn apply_options(target: &Target, force: bool) -> ApplyOptions {
    ApplyOptions {
        force,
        default_namespace: Some(target.namespace.clone()),
        ..ApplyOptions::default()
    }
}

/// Helm's resource policy annotation: `keep` marks an object Helm never deletes.
const RESOURCE_POLICY: &str = "helm.sh/resource-policy";

/// Whether the rendered `object` carries `helm.sh/resource-policy: keep` (trimmed, any case,
/// as Helm reads it).
fn kept(object: &serde_json::Value) -> bool {
    object["metadata"]["annotations"][RESOURCE_POLICY]
        .as_str()
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("keep"))
}

/// The objects of `manifest` that Helm may delete (uninstall, an upgrade's pruning,
/// `cleanupOnFail`): all but those whose rendered manifest marks them `keep`.
fn deletable_objects(manifest: &str) -> Result<Vec<DynamicObject>, String> {
    let objects: Vec<serde_json::Value> = render::manifest_objects(manifest)?
        .into_iter()
        .filter(|o| !kept(o))
        .collect();
    to_dynamic(&objects)
}

fn to_dynamic(objects: &[serde_json::Value]) -> Result<Vec<DynamicObject>, String> {
    objects
        .iter()
        .map(|o| serde_json::from_value(o.clone()).map_err(|e| e.to_string()))
        .collect()
}

async fn act(
    cx: &mut Cx,
    target: &Target,
    chart: &Arc<Chart>,
    values: &Values,
    state: ReleaseState,
) -> Result<Progress, ReconcileError> {
    let forced = force_requested(cx);
    // As Flux (`ShouldHandleForceRequest`): a new token is handled once looked at, whatever the
    // state and whatever the action then does (a `RetryOnFailure` retry too).
    if let Some(token) = &forced {
        cx.status.last_handled_force_at = Some(token.clone());
    }
    match state {
        ReleaseState::InSync => {
            if let Some(token) = forced {
                cx.status.last_handled_force_at = Some(token);
                return Box::pin(upgrade(cx, target, chart, values)).await;
            }
            in_sync(cx);
            Ok(Progress::Done)
        }
        ReleaseState::Locked(release) => {
            Box::pin(unlock(cx, target, *release)).await?;
            Ok(Progress::Continue)
        }
        ReleaseState::Absent => {
            allow_retry(cx, ReleaseAction::Install, forced)?;
            Box::pin(install(cx, target, chart, values)).await
        }
        ReleaseState::Unmanaged(why) => {
            tracing::info!(reason = %why, "release not managed by this object: upgrading");
            cx.status.history.clear();
            // An upgrade that failed leaving no record finds the release unmanaged again:
            // its retries are bounded too.
            allow_retry(cx, ReleaseAction::Upgrade, forced)?;
            Box::pin(upgrade(cx, target, chart, values)).await
        }
        ReleaseState::OutOfSync(why) => {
            tracing::info!(reason = %why, "release out of sync");
            allow_retry(cx, ReleaseAction::Upgrade, forced)?;
            Box::pin(upgrade(cx, target, chart, values)).await
        }
        ReleaseState::Untested => Box::pin(test(cx, target)).await,
        ReleaseState::Drifted(drifts) => Box::pin(drifted(cx, target, drifts)).await,
        ReleaseState::Failed => Box::pin(remediate(cx, target, chart, values, forced)).await,
    }
}

fn set(cx: &mut Cx, type_: &str, value: bool, reason: &str, message: &str) {
    let status = if value {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    cx.set_condition(type_, status, reason, message);
}

async fn event(cx: &Cx, type_: EventType, reason: &str, message: &str) {
    cx.publish_event(type_, reason, message, "Release").await;
}

/// In sync: `Ready=True` with the `Released` condition's words; a drift reported earlier is
/// cleared.
fn in_sync(cx: &mut Cx) {
    let released = cx
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == condition::RELEASED)
        .cloned();
    if let Some(released) = released {
        if released.status == "True" {
            cx.set_ready_reason(released.reason.clone());
            cx.set_ready_message(released.message.clone());
        } else if let Some(current) = cx.status.history.first().cloned() {
            // A failed release fixed since (e.g. by a rollback, or by hand): Flux reports the
            // success of the action that made the current revision.
            let (reason, verb) = if current.action.as_deref() == Some("install") {
                (reason::INSTALL_SUCCEEDED, "install")
            } else {
                (reason::UPGRADE_SUCCEEDED, "upgrade")
            };
            let message = format!(
                "Helm {verb} succeeded for release {}/{}.v{} with chart {}@{}",
                current.namespace,
                current.name,
                current.version,
                current.chart_name,
                current.chart_version
            );
            set(cx, condition::RELEASED, true, reason, &message);
            cx.remove_condition(condition::REMEDIATED);
            cx.set_ready_reason(reason);
            cx.set_ready_message(message);
        }
    }
    let mode = drift_mode(&cx.object);
    if mode == DriftDetectionMode::Disabled {
        cx.remove_condition(condition::DRIFTED);
    } else {
        set(
            cx,
            condition::DRIFTED,
            false,
            reason::NO_DRIFT_DETECTED,
            "No drift detected against the cluster state",
        );
    }
}

/// The timeout of an action: its own, else `spec.timeout` (5m).
fn action_timeout(object: &HelmRelease, own: Option<&String>) -> Duration {
    own.and_then(|t| capstan_api::parse_go_duration(t).ok())
        .or_else(|| object.timeout().ok())
        .unwrap_or(capstan_api::helm::v2::DEFAULT_TIMEOUT)
}

/// What an install, upgrade or rollback does, for [`deploy`].
struct Deploy {
    kind: Kind,
    timeout: Duration,
    disable_hooks: bool,
    disable_wait: bool,
    disable_wait_for_jobs: bool,
    force: bool,
    crds: CrdsPolicy,
    create_namespace: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Install,
    Upgrade,
    Rollback,
}

impl Kind {
    fn parse_description(description: &str) -> Self {
        if description.starts_with("Rollback") {
            Kind::Rollback
        } else if description.starts_with("Initial install") || description.starts_with("Install") {
            Kind::Install
        } else {
            Kind::Upgrade
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Kind::Install => "install",
            Kind::Upgrade => "upgrade",
            Kind::Rollback => "rollback",
        }
    }

    fn pre(self) -> HookEvent {
        match self {
            Kind::Install => HookEvent::PreInstall,
            Kind::Upgrade => HookEvent::PreUpgrade,
            Kind::Rollback => HookEvent::PreRollback,
        }
    }

    fn post(self) -> HookEvent {
        match self {
            Kind::Install => HookEvent::PostInstall,
            Kind::Upgrade => HookEvent::PostUpgrade,
            Kind::Rollback => HookEvent::PostRollback,
        }
    }
}

fn install_settings(object: &HelmRelease) -> Deploy {
    let install = object.spec.install.clone().unwrap_or_default();
    let crds = install.crds.unwrap_or(if install.skip_crds == Some(true) {
        CrdsPolicy::Skip
    } else {
        CrdsPolicy::Create
    });
    Deploy {
        kind: Kind::Install,
        timeout: action_timeout(object, install.timeout.as_ref()),
        disable_hooks: install.disable_hooks.unwrap_or(false),
        disable_wait: install.disable_wait.unwrap_or(false),
        disable_wait_for_jobs: install.disable_wait_for_jobs.unwrap_or(false),
        force: false,
        crds,
        create_namespace: install.create_namespace.unwrap_or(false),
    }
}

fn upgrade_settings(object: &HelmRelease) -> Deploy {
    let upgrade = object.spec.upgrade.clone().unwrap_or_default();
    Deploy {
        kind: Kind::Upgrade,
        timeout: action_timeout(object, upgrade.timeout.as_ref()),
        disable_hooks: upgrade.disable_hooks.unwrap_or(false),
        disable_wait: upgrade.disable_wait.unwrap_or(false),
        disable_wait_for_jobs: upgrade.disable_wait_for_jobs.unwrap_or(false),
        force: upgrade.force.unwrap_or(false),
        crds: upgrade.crds.unwrap_or(CrdsPolicy::Skip),
        create_namespace: false,
    }
}

fn rollback_settings(object: &HelmRelease) -> Deploy {
    let rollback = object.spec.rollback.clone().unwrap_or_default();
    Deploy {
        kind: Kind::Rollback,
        timeout: action_timeout(object, rollback.timeout.as_ref()),
        disable_hooks: rollback.disable_hooks.unwrap_or(false),
        disable_wait: rollback.disable_wait.unwrap_or(false),
        disable_wait_for_jobs: rollback.disable_wait_for_jobs.unwrap_or(false),
        force: rollback.force.unwrap_or(false),
        crds: CrdsPolicy::Skip,
        create_namespace: false,
    }
}

fn settings_for(object: &HelmRelease, kind: Kind) -> Deploy {
    match kind {
        Kind::Install => install_settings(object),
        Kind::Upgrade => upgrade_settings(object),
        Kind::Rollback => rollback_settings(object),
    }
}

/// The key of the wait of the release revision `release`.
fn wait_key(release: &Release) -> String {
    format!("{}.v{}", release.name, release.version)
}

/// `chart` and its subcharts without their `values.schema.json`.
fn without_schemas(chart: &Chart) -> Chart {
    let mut chart = chart.clone();
    let mut pending = vec![&mut chart];
    while let Some(next) = pending.pop() {
        next.schema = None;
        pending.extend(next.dependencies.iter_mut());
    }
    chart
}

/// Renders the chart for revision `revision` (on a blocking thread; `lookup` answered by the
/// target cluster).
async fn render_release(
    cx: &Cx,
    target: &Target,
    chart: &Arc<Chart>,
    values: &Values,
    revision: i64,
    is_upgrade: bool,
) -> Result<Rendered, String> {
    let cluster: ClusterInfo = cx
        .reconciler
        .cluster_info(target.client(), target.remote)
        .await;
    let object = cx.object.clone();
    // `disableSchemaValidation`: Helm's `SkipSchemaValidation`, no chart's schema checked.
    let spec = &object.spec;
    let skip_schema = if is_upgrade {
        spec.upgrade
            .as_ref()
            .and_then(|u| u.disable_schema_validation)
    } else {
        spec.install
            .as_ref()
            .and_then(|i| i.disable_schema_validation)
    } == Some(true);
    let chart = if skip_schema {
        Arc::new(without_schemas(chart))
    } else {
        chart.clone()
    };
    let values = values.clone();
    let lookup = render::ClusterLookup {
        client: target.client().clone(),
        handle: tokio::runtime::Handle::current(),
    };
    let revision = u32::try_from(revision).unwrap_or(1);
    tokio::task::spawn_blocking(move || {
        let mut env = capstan_helm::template::Env::new();
        env.lookup = Box::new(lookup);
        let request = RenderRequest {
            object: &object,
            chart: &chart,
            values: &values,
            revision,
            is_upgrade,
            cluster: &cluster,
        };
        render::render(&request, &mut env).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| format!("render task failed: {e}"))?
}

/// Renders revision `version` for an install or upgrade (`settings`) and checks Helm's
/// adoption rule against the cluster (`current`: the manifest the release has now, whose
/// objects it owns already). A failure fails the action before any record is written, as
/// Helm; `None` then.
async fn render_for(
    cx: &mut Cx,
    target: &Target,
    chart: &Arc<Chart>,
    values: &Values,
    version: i64,
    settings: &Deploy,
    current: Option<&str>,
) -> Result<Option<Rendered>, ReconcileError> {
    let checked = async {
        let is_upgrade = settings.kind == Kind::Upgrade;
        let rendered = render_release(cx, target, chart, values, version, is_upgrade).await?;
        render::check_adoption(
            target.client(),
            &cx.object,
            &rendered.manifest,
            current,
            &target.name,
            &target.namespace,
        )
        .await?;
        Ok::<_, String>(rendered)
    }
    .await;
    match checked {
        Ok(rendered) => Ok(Some(rendered)),
        Err(error) => {
            let chart = chart_label(Some(chart));
            Box::pin(fail(cx, target, None, settings, &error, &chart)).await?;
            Ok(None)
        }
    }
}

async fn install(
    cx: &mut Cx,
    target: &Target,
    chart: &Arc<Chart>,
    values: &Values,
) -> Result<Progress, ReconcileError> {
    let settings = install_settings(&cx.object);
    cx.status.last_attempted_release_action = Some(ReleaseAction::Install);
    mark_running(cx, &settings).await?;
    let history = target.history().await?;
    // Helm's `availableName`: a name with history (an uninstall that kept it) is reused only
    // with `install.replace`, and only after an uninstalled or failed release.
    let replace = cx.object.spec.install.as_ref().and_then(|i| i.replace) == Some(true);
    let mut replaced = history.last().cloned();
    if let Some(last) = replaced.as_ref()
        && !(replace && matches!(last.status(), Status::Uninstalled | Status::Failed))
    {
        let error = "cannot reuse a name that is still in use";
        return Box::pin(fail_action(cx, target, None, &settings, error)).await;
    }
    let version = replaced.as_ref().map_or(1, |r| r.version + 1);
    let Some(rendered) = Box::pin(render_for(
        cx, target, chart, values, version, &settings, None,
    ))
    .await?
    else {
        return Ok(Progress::Continue);
    };
    // As Flux: the CRDs first; then, as Helm, every kind is mapped before the record is
    // stored or any object written.
    if let Err(error) = prepare(target, &rendered, &settings).await {
        let error = error.unwrap_or_else(|e| {
            format!("unable to build kubernetes objects from release manifest: {e}")
        });
        return Err(Box::pin(fail_unstored(cx, target, &settings, &error)).await);
    }
    // Replaced: the last release is superseded (a failed one keeps its status).
    if let Some(last) = replaced.as_mut()
        && last.status() != Status::Failed
    {
        last.set_status(Status::Superseded, "superseded by new release");
        target.update(last).await?;
    }
    let mut record = new_record(target, chart, values, &rendered, version);
    record.set_status(Status::PendingInstall, "Initial install underway");
    target
        .storage
        .create(&record)
        .await
        .map_err(storage_error)?;
    Box::pin(deploy(cx, target, record, &settings)).await
}

async fn upgrade(
    cx: &mut Cx,
    target: &Target,
    chart: &Arc<Chart>,
    values: &Values,
) -> Result<Progress, ReconcileError> {
    let settings = upgrade_settings(&cx.object);
    cx.status.last_attempted_release_action = Some(ReleaseAction::Upgrade);
    mark_running(cx, &settings).await?;
    let Some(last) = target.last().await? else {
        return Box::pin(install(cx, target, chart, values)).await;
    };
    let previous = target
        .storage
        .deployed(&target.name)
        .await
        .map_err(storage_error)?;
    let mut values = values.clone();
    if cx
        .object
        .spec
        .upgrade
        .as_ref()
        .and_then(|u| u.preserve_values)
        == Some(true)
        && let Some(previous) = previous.as_ref()
    {
        let mut merged = previous.config.clone();
        capstan_helm::output::merge_maps(&mut merged, values);
        values = merged;
    }
    let version = last.version + 1;
    // The objects new to the release are checked against Helm's adoption rule.
    let current = previous.as_ref().unwrap_or(&last);
    let current_manifest = current.manifest.clone();
    let Some(rendered) = Box::pin(render_for(
        cx,
        target,
        chart,
        &values,
        version,
        &settings,
        Some(&current.manifest),
    ))
    .await?
    else {
        return Ok(Progress::Continue);
    };
    // As Flux: the CRDs first; then, as Helm (`validateManifest`), every kind is mapped before
    // the record is stored.
    if let Err(error) = prepare(target, &rendered, &settings).await {
        let error = error.unwrap_or_else(|e| e);
        return Err(Box::pin(fail_unstored(cx, target, &settings, &error)).await);
    }
    // Helm's `performUpgrade` maps the current release's manifest too (a kind it has that is
    // no longer served, e.g. its CRD deleted, fails the upgrade before its record).
    if let Err(error) = check_mapping(target, &current_manifest, &[], CrdsPolicy::Skip).await {
        let error =
            format!("unable to build kubernetes objects from current release manifest: {error}");
        return Err(Box::pin(fail_unstored(cx, target, &settings, &error)).await);
    }
    let mut record = new_record(target, chart, &values, &rendered, version);
    if let Some(first) = previous
        .as_ref()
        .or(Some(&last))
        .and_then(|p| p.info.first_deployed)
    {
        record.info.first_deployed = Some(first);
    }
    record.set_status(Status::PendingUpgrade, "Preparing upgrade");
    target
        .storage
        .create(&record)
        .await
        .map_err(storage_error)?;
    Box::pin(deploy(cx, target, record, &settings)).await
}

async fn rollback(
    cx: &mut Cx,
    target: &Target,
    current: &Release,
    to: Release,
) -> Result<Progress, ReconcileError> {
    let settings = rollback_settings(&cx.object);
    if cx.object.spec.rollback.as_ref().and_then(|r| r.recreate) == Some(true) {
        // As helm-controller on Helm 4, which removed it: accepted, and a warning.
        tracing::warn!("spec.rollback.recreate has no effect: Helm 4 removed pod recreation");
    }
    mark_running(cx, &settings).await?;
    let mut record = to.clone();
    record.version = current.version + 1;
    // Applied server-side whatever the target revision was (Helm records how it applied).
    Release::APPLY_METHOD_SERVER_SIDE.clone_into(&mut record.apply_method);
    record.info.last_deployed = Some(jiff::Timestamp::now());
    record.info.deleted = None;
    for hook in &mut record.hooks {
        hook.last_run = capstan_helm::release::HookExecution::default();
    }
    record.set_status(
        Status::PendingRollback,
        format!("Rollback to {}", to.version),
    );
    target
        .storage
        .create(&record)
        .await
        .map_err(storage_error)?;
    Box::pin(deploy(cx, target, record, &settings)).await
}

fn new_record(
    target: &Target,
    chart: &Chart,
    values: &Values,
    rendered: &Rendered,
    version: i64,
) -> Release {
    let mut record = Release::new(
        &target.name,
        &target.namespace,
        version,
        release::Chart::from_loaded(chart),
    );
    let now = jiff::Timestamp::now();
    record.info.first_deployed = Some(now);
    record.info.last_deployed = Some(now);
    record.info.notes.clone_from(&rendered.notes);
    record.config.clone_from(values);
    record.manifest.clone_from(&rendered.manifest);
    record.hooks = rendered
        .hooks
        .iter()
        .map(release::Hook::from_output)
        .collect();
    record
}

async fn mark_running(cx: &mut Cx, settings: &Deploy) -> Result<(), ReconcileError> {
    let message = format!(
        "Running '{}' action with timeout of {}",
        settings.kind.verb(),
        capstan_api::format_go_duration(settings.timeout)
    );
    cx.mark_progressing(&message).await.map_err(|e| {
        ReconcileError::transient(
            meta_reason::RECONCILIATION_FAILED,
            format!("cannot record the release in progress: {e}"),
        )
        .with_source(e)
    })
}

/// `install.createNamespace`: the release namespace, created when it does not exist.
async fn create_namespace(target: &Target) -> Result<(), String> {
    let namespace: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": target.namespace},
    }))
    .map_err(|e| e.to_string())?;
    let reference = ObjectRef::new("v1", "Namespace", "", &target.namespace);
    let health = target
        .manager
        .check_health(std::slice::from_ref(&reference))
        .await;
    if health
        .iter()
        .all(|h| h.status != capstan_apply::Status::NotFound)
    {
        return Ok(());
    }
    target
        .manager
        .apply_all_staged(&[namespace], &ApplyOptions::default())
        .await
        .map(|_| ())
        .map_err(|e| {
            format!(
                "failed to create namespace {}: {}",
                target.namespace,
                capstan_source::redact::error_chain(&e)
            )
        })
}

/// Installs the CRDs of `crds/` by `policy`: `Create` applies those that do not exist,
/// `CreateReplace` applies all, `Skip` none.
async fn install_crds(
    target: &Target,
    crds: &[capstan_helm::output::Crd],
    policy: CrdsPolicy,
) -> Result<(), String> {
    if crds.is_empty() || policy == CrdsPolicy::Skip {
        return Ok(());
    }
    let mut objects = Vec::new();
    for crd in crds {
        let documents = capstan_kustomize::parse_documents(&crd.data)
            .map_err(|e| format!("failed to read CRD {}: {e}", crd.filename))?;
        objects.extend(documents.into_iter().filter(|d| d.get("kind").is_some()));
    }
    let mut objects = to_dynamic(&objects)?;
    if policy == CrdsPolicy::Create {
        let references: Vec<ObjectRef> = objects
            .iter()
            .filter_map(|o| ObjectRef::from_object(o).ok())
            .collect();
        let health = target.manager.check_health(&references).await;
        let existing: BTreeSet<String> = health
            .into_iter()
            .filter(|h| h.status != capstan_apply::Status::NotFound)
            .map(|h| h.object.name)
            .collect();
        objects.retain(|o| !existing.contains(&o.name_any()));
    }
    if objects.is_empty() {
        return Ok(());
    }
    target
        .manager
        .apply_all_staged(&objects, &apply_options(target, false))
        .await
        .map(|_| ())
        .map_err(|e| capstan_source::redact::error_chain(&e))
}

/// What an install or upgrade does before its record is stored, as helm-controller: the CRDs
/// of `crds/` by policy (an error: `Ok(why)`, Flux's words), then [`check_mapping`] (an
/// error: `Err(why)`, Helm's words without the action's prefix).
async fn prepare(
    target: &Target,
    rendered: &Rendered,
    settings: &Deploy,
) -> Result<(), Result<String, String>> {
    install_crds(target, &rendered.crds, settings.crds)
        .await
        .map_err(|e| Ok(format!("failed to apply CustomResourceDefinitions: {e}")))?;
    check_mapping(target, &rendered.manifest, &rendered.crds, settings.crds)
        .await
        .map_err(Err)
}

/// Helm's mapping of a release manifest (`KubeClient.Build`) before any object is written:
/// each object's kind must be served by the cluster, or be declared by a CRD of the chart's
/// `crds/` that the action installs first (`crds` policy `Create`/`CreateReplace`). Else the
/// error is Helm's ("resource mapping not found ... ensure CRDs are installed first", several
/// as `[a, b]`), and nothing is created.
async fn check_mapping(
    target: &Target,
    manifest: &str,
    crds: &[capstan_helm::output::Crd],
    policy: CrdsPolicy,
) -> Result<(), String> {
    let text = |v: &serde_json::Value, pointer: &str| {
        v.pointer(pointer)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut declared = BTreeSet::new();
    if policy != CrdsPolicy::Skip {
        for crd in crds {
            let documents = capstan_kustomize::parse_documents(&crd.data)
                .map_err(|e| format!("failed to read CRD {}: {e}", crd.filename))?;
            for document in documents {
                let (group, kind) = (
                    text(&document, "/spec/group"),
                    text(&document, "/spec/names/kind"),
                );
                let versions = document
                    .pointer("/spec/versions")
                    .and_then(serde_json::Value::as_array);
                for version in versions.into_iter().flatten() {
                    declared.insert((format!("{group}/{}", text(version, "/name")), kind.clone()));
                }
            }
        }
    }
    let documents = capstan_kustomize::parse_documents(manifest)
        .map_err(|e| format!("unable to read the release manifest: {e}"))?;
    let mut served = std::collections::BTreeMap::new();
    let mut errors = Vec::new();
    for document in documents {
        let (api_version, kind) = (text(&document, "/apiVersion"), text(&document, "/kind"));
        if kind.is_empty() {
            continue;
        }
        let key = (api_version, kind);
        if declared.contains(&key) {
            continue;
        }
        let ok = if let Some(ok) = served.get(&key) {
            *ok
        } else {
            let (group, version) = key.0.split_once('/').unwrap_or(("", key.0.as_str()));
            let gvk = kube::core::GroupVersionKind::gvk(group, version, &key.1);
            let ok = match kube::discovery::pinned_kind(target.client(), &gvk).await {
                Ok(_) => true,
                Err(kube::Error::Api(status)) if status.code == 404 => false,
                Err(kube::Error::Discovery(_)) => false,
                Err(e) => {
                    return Err(format!(
                        "unable to build kubernetes objects: discovery of {} failed: {}",
                        key.0,
                        capstan_source::redact::error_chain(&e)
                    ));
                }
            };
            served.insert(key.clone(), ok);
            ok
        };
        if !ok {
            let namespace = document
                .pointer("/metadata/namespace")
                .and_then(serde_json::Value::as_str)
                .unwrap_or(&target.namespace);
            errors.push(format!(
                "resource mapping not found for name: {:?} namespace: {namespace:?} from \"\": no matches for kind {:?} in version {:?}\nensure CRDs are installed first",
                text(&document, "/metadata/name"),
                key.1,
                key.0,
            ));
        }
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// A failed action that wrote no record (Helm failed before storing one, e.g. an unmapped
/// kind): as helm-controller, `Released=False` and a Warning event in the action's words, the
/// failure counted in `failures` only (there is nothing to remediate), and the reconcile
/// retried; under `RetryOnFailure` after its interval.
async fn fail_unstored(
    cx: &mut Cx,
    target: &Target,
    settings: &Deploy,
    error: &str,
) -> ReconcileError {
    let failed = if settings.kind == Kind::Upgrade {
        reason::UPGRADE_FAILED
    } else {
        reason::INSTALL_FAILED
    };
    let message = format!(
        "Helm {} failed for release {}/{} with chart {}: {}",
        settings.kind.verb(),
        target.namespace,
        target.name,
        chart_label(cx.state.chart.as_deref()),
        error.trim()
    );
    cx.status.failures = Some(cx.status.failures.unwrap_or(0) + 1);
    set(cx, condition::RELEASED, false, failed, &message);
    event(cx, EventType::Warning, failed, &message).await;
    ReconcileError::transient(failed, message)
}

/// Runs a pending record from the start: the namespace (and, for a rollback, Helm's mapping
/// of its manifest; an install or upgrade did both before its record, see [`prepare`]), then
/// the `pre-*` hooks ([`action_hooks`]); the action's timeout counts from now.
async fn deploy(
    cx: &mut Cx,
    target: &Target,
    record: Release,
    settings: &Deploy,
) -> Result<Progress, ReconcileError> {
    let deadline = Instant::now() + settings.timeout;
    let prepared: Result<(), String> = async {
        if settings.create_namespace {
            create_namespace(target).await?;
        }
        if settings.kind == Kind::Rollback {
            // As Helm's rollback: the target manifest is mapped before any object is written.
            check_mapping(target, &record.manifest, &[], CrdsPolicy::Skip)
                .await
                .map_err(|e| {
                    format!("unable to build kubernetes objects from new release manifest: {e}")
                })?;
        }
        Ok(())
    }
    .await;
    if let Err(error) = prepared {
        return Box::pin(fail_action(cx, target, Some(record), settings, &error)).await;
    }
    let event = settings.kind.pre();
    Box::pin(action_hooks(
        cx, target, record, settings, event, 0, false, deadline,
    ))
    .await
}

/// Where the hooks of one event stand after [`hook_phase`].
enum HookPhaseEnd {
    /// All ran and succeeded.
    Done,
    /// One is running: the pass ends pending.
    Pending(StepOutcome),
    /// One failed.
    Failed(String),
}

/// Runs the hooks `order` of `event` of `record` from `from` (see [`hooks::step`]): while one
/// runs, the record is stored with its `last_run` (phase `Running`, as Helm records it) and
/// the pass ends pending within the wait keyed by the hook ([`hook_key`]), whose deadline stays
/// the action's.
#[allow(clippy::too_many_arguments)]
async fn hook_phase(
    cx: &Cx,
    target: &Target,
    record: &mut Release,
    event: HookEvent,
    order: &[usize],
    from: usize,
    resuming: bool,
    deadline: Instant,
) -> Result<HookPhaseEnd, ReconcileError> {
    let run = hooks::Run {
        manager: &target.manager,
        event,
        order,
        namespace: &target.namespace,
        deadline,
    };
    match hooks::step(&run, &mut record.hooks, from, resuming).await {
        Ok(hooks::HookProgress::Done) => Ok(HookPhaseEnd::Done),
        Ok(hooks::HookProgress::Running(position)) => {
            target.update(record).await?;
            let now = Instant::now();
            let wait = cx.look(
                &hook_key(record, event, position),
                deadline.saturating_duration_since(now),
                Vec::new,
            );
            Ok(HookPhaseEnd::Pending(StepOutcome::pending(
                wait.next_poll(now),
            )))
        }
        Err(error) => Ok(HookPhaseEnd::Failed(error.to_string())),
    }
}

/// The key of the wait for the hook at `position` of `event` of the release revision
/// `release`.
fn hook_key(release: &Release, event: HookEvent, position: usize) -> String {
    format!("{}|{event}|{position}", wait_key(release))
}

/// The hook wait in flight for `release`, if any: its event, position and wait.
fn hook_wait(cx: &Cx, release: &Release) -> Option<(HookEvent, usize, crate::runtime::Wait)> {
    const EVENTS: [HookEvent; 7] = [
        HookEvent::PreInstall,
        HookEvent::PostInstall,
        HookEvent::PreUpgrade,
        HookEvent::PostUpgrade,
        HookEvent::PreRollback,
        HookEvent::PostRollback,
        HookEvent::Test,
    ];
    EVENTS.into_iter().find_map(|event| {
        let count = hooks::ordered(&release.hooks, event).len();
        (0..count).find_map(|position| {
            cx.wait_in_flight(&hook_key(release, event, position))
                .map(|wait| (event, position, wait))
        })
    })
}

/// Resumes what the previous pass left waiting for `last`: the manifest's health or a hook of
/// a pending record, or a test hook of a deployed one. Nothing in flight: go on.
async fn resume_in_flight(
    cx: &mut Cx,
    target: &Target,
    last: Release,
) -> Result<Progress, ReconcileError> {
    if last.status().is_pending()
        && let Some(wait) = cx.wait_in_flight(&wait_key(&last))
    {
        return Box::pin(resume(cx, target, last, wait)).await;
    }
    if last.status() == Status::Uninstalling
        && cx
            .wait_in_flight(&remediation::uninstall_key(&last))
            .is_some()
    {
        return Box::pin(remediation::uninstall_remediation(cx, target, last)).await;
    }
    let Some((event, position, wait)) = hook_wait(cx, &last) else {
        return Ok(Progress::Continue);
    };
    if event == HookEvent::Test {
        if last.status() != Status::Deployed {
            return Ok(Progress::Continue);
        }
        return Box::pin(test_from(cx, target, last, position, wait.deadline)).await;
    }
    if !last.status().is_pending() {
        return Ok(Progress::Continue);
    }
    let settings = settings_for(&cx.object, Kind::parse_description(&last.info.description));
    if event != settings.kind.pre() && event != settings.kind.post() {
        return Ok(Progress::Continue);
    }
    Box::pin(action_hooks(
        cx,
        target,
        last,
        &settings,
        event,
        position,
        true,
        wait.deadline,
    ))
    .await
}

/// The hooks of `event` (the action's `pre-*` or `post-*` event) of a pending record from
/// `from`, then what follows them: the manifest ([`apply_manifest`]) after the `pre-*` hooks,
/// [`finish`] after the `post-*` ones.
#[allow(clippy::too_many_arguments)]
async fn action_hooks(
    cx: &mut Cx,
    target: &Target,
    mut record: Release,
    settings: &Deploy,
    event: HookEvent,
    from: usize,
    resuming: bool,
    deadline: Instant,
) -> Result<Progress, ReconcileError> {
    if !settings.disable_hooks {
        let order = hooks::ordered(&record.hooks, event);
        match Box::pin(hook_phase(
            cx,
            target,
            &mut record,
            event,
            &order,
            from,
            resuming,
            deadline,
        ))
        .await?
        {
            HookPhaseEnd::Done => {}
            HookPhaseEnd::Pending(outcome) => return Ok(Progress::Pending(outcome)),
            HookPhaseEnd::Failed(error) => {
                return Box::pin(fail_action(cx, target, Some(record), settings, &error)).await;
            }
        }
    }
    if event == settings.kind.pre() {
        return Box::pin(apply_manifest(cx, target, record, settings, deadline)).await;
    }
    Box::pin(finish(cx, target, record, settings)).await?;
    Ok(Progress::Continue)
}

/// The manifest an upgrade or rollback replaces (its objects that left are pruned): an
/// upgrade's is the deployed release's, else the last one's; a rollback's the release it
/// rolls back from. An install replaces none.
async fn replaced_manifest(
    target: &Target,
    record: &Release,
    kind: Kind,
) -> Result<Option<String>, ReconcileError> {
    if kind == Kind::Install {
        return Ok(None);
    }
    let history = target.history().await?;
    let before = || history.iter().filter(|r| r.version < record.version);
    let deployed = before()
        .filter(|r| kind == Kind::Upgrade && r.status() == Status::Deployed)
        .max_by_key(|r| r.version);
    Ok(deployed
        .or_else(|| before().max_by_key(|r| r.version))
        .map(|r| r.manifest.clone()))
}

/// Applies the manifest of a pending record and prunes what left it, then waits for health
/// (or, with `disableWait`, goes on with the `post-*` hooks).
async fn apply_manifest(
    cx: &mut Cx,
    target: &Target,
    record: Release,
    settings: &Deploy,
    deadline: Instant,
) -> Result<Progress, ReconcileError> {
    let previous_manifest = replaced_manifest(target, &record, settings.kind).await?;
    let result: Result<Vec<ObjectRef>, String> = async {
        let objects = render::owned_objects(&record).and_then(|o| to_dynamic(&o))?;
        let options = apply_options(target, settings.force);
        let changeset = target
            .manager
            .apply_all_staged(&objects, &options)
            .await
            .map_err(|e| capstan_source::redact::error_chain(&e))?;
        let inventory = Inventory::from_changeset(&changeset);
        if let Some(previous) = previous_manifest.as_deref() {
            let old = deletable_objects(previous)?;
            let old = Inventory::new(target.manager.references(&old, &options).await);
            let stale = old.diff(&inventory);
            if !stale.is_empty() {
                target
                    .manager
                    .delete_all(&stale, &DeleteOptions::default())
                    .await
                    .map_err(|e| capstan_source::redact::error_chain(&e))?;
            }
        }
        Ok(inventory.objects().to_vec())
    }
    .await;
    let applied = match result {
        Ok(applied) => applied,
        Err(error) => {
            return Box::pin(fail_action(cx, target, Some(record), settings, &error)).await;
        }
    };
    cx.status.inventory = Some(Inventory::new(applied.clone()).to_status());
    if settings.disable_wait {
        let event = settings.kind.post();
        return Box::pin(action_hooks(
            cx, target, record, settings, event, 0, false, deadline,
        ))
        .await;
    }
    let awaited: Vec<ObjectRef> = applied
        .into_iter()
        .filter(|o| !(settings.disable_wait_for_jobs && o.kind == "Job"))
        .collect();
    let now = Instant::now();
    let wait = cx.look(
        &wait_key(&record),
        deadline.saturating_duration_since(now),
        || awaited,
    );
    Box::pin(resume(cx, target, record, wait)).await
}

/// [`fail`] with the chart being released, then the release loop goes on.
async fn fail_action(
    cx: &mut Cx,
    target: &Target,
    record: Option<Release>,
    settings: &Deploy,
    error: &str,
) -> Result<Progress, ReconcileError> {
    let chart = chart_label(cx.state.chart.as_deref());
    Box::pin(fail(cx, target, record, settings, error, &chart)).await?;
    Ok(Progress::Continue)
}

/// One look at the objects a pending record waits for: still progressing → pending; healthy
/// → finish; failed or timed out → fail; then the release loop goes on.
async fn resume(
    cx: &mut Cx,
    target: &Target,
    record: Release,
    wait: crate::runtime::Wait,
) -> Result<Progress, ReconcileError> {
    let kind = Kind::parse_description(&record.info.description);
    let settings = settings_for(&cx.object, kind);
    let results = target.manager.check_health(&wait.objects).await;
    let now = std::time::Instant::now();
    let failed: Vec<String> = results
        .iter()
        .filter(|r| r.status == capstan_apply::Status::Failed)
        .map(|r| format!("{}: {}", r.object, r.message))
        .collect();
    let error = if !failed.is_empty() {
        Some(format!("resource not ready: {}", failed.join("; ")))
    } else if results
        .iter()
        .all(|r| r.status == capstan_apply::Status::Current)
    {
        None
    } else if wait.expired(now) {
        let pending: Vec<String> = results
            .iter()
            .filter(|r| r.status != capstan_apply::Status::Current)
            .map(|r| format!("{}: {}", r.object, r.message))
            .collect();
        Some(format!(
            "context deadline exceeded: timed out after {} waiting for: {}",
            capstan_api::format_go_duration(settings.timeout),
            pending.join("; ")
        ))
    } else {
        return Ok(Progress::Pending(StepOutcome::pending(wait.next_poll(now))));
    };
    match error {
        None => {
            let event = settings.kind.post();
            Box::pin(action_hooks(
                cx,
                target,
                record,
                &settings,
                event,
                0,
                false,
                wait.deadline,
            ))
            .await
        }
        Some(error) => Box::pin(fail_action(cx, target, Some(record), &settings, &error)).await,
    }
}

/// A healthy release whose hooks ran: `deployed`, the previous revisions `superseded`,
/// history pruned, snapshot and conditions recorded.
async fn finish(
    cx: &mut Cx,
    target: &Target,
    mut record: Release,
    settings: &Deploy,
) -> Result<(), ReconcileError> {
    let description = match settings.kind {
        Kind::Install => "Install complete".to_owned(),
        Kind::Upgrade => "Upgrade complete".to_owned(),
        Kind::Rollback => record.info.description.clone(),
    };
    record.set_status(Status::Deployed, description);
    record.info.last_deployed = Some(jiff::Timestamp::now());
    target.update(&record).await?;
    let history = target.history().await?;
    for mut other in history {
        if other.version != record.version && matches!(other.status(), Status::Deployed) {
            other.set_status(Status::Superseded, "Superseded");
            target.update(&other).await?;
        }
    }
    let max = cx.object.max_history();
    if max > 0 {
        target
            .storage
            .prune(&target.name, max)
            .await
            .map_err(storage_error)?;
    }
    let records = target.history().await?;
    let action = settings.kind.verb();
    let snapshot = status::snapshot(
        stored(&records, &record),
        Some(action),
        cx.status.last_attempted_revision_digest.as_deref(),
    );
    status::record(
        &mut cx.status.history,
        snapshot,
        &records,
        capstan_api::meta::HISTORY_MAX_SIZE,
    );
    if settings.kind != Kind::Rollback {
        // A rollback applies an earlier release, not this spec's post-renderers.
        cx.status.observed_post_renderers_digest = post_renderers_digest(&cx.object);
        cx.status.observed_common_metadata_digest = common_metadata_digest(&cx.object);
    }
    record_success(cx, &record, settings.kind).await;
    Ok(())
}

/// The `Released` (install, upgrade) or `Remediated` (rollback) condition and Event of a
/// successful action.
async fn record_success(cx: &mut Cx, record: &Release, kind: Kind) {
    let (full, chart) = (status::full_name(record), status::versioned_chart(record));
    match kind {
        Kind::Install | Kind::Upgrade => {
            let (reason, verb) = if kind == Kind::Install {
                (reason::INSTALL_SUCCEEDED, "install")
            } else {
                (reason::UPGRADE_SUCCEEDED, "upgrade")
            };
            let message = format!("Helm {verb} succeeded for release {full} with chart {chart}");
            set(cx, condition::RELEASED, true, reason, &message);
            cx.remove_condition(condition::REMEDIATED);
            cx.remove_condition(condition::TEST_SUCCESS);
            event(cx, EventType::Normal, reason, &message).await;
        }
        Kind::Rollback => {
            let message =
                format!("Helm rollback to previous release {full} with chart {chart} succeeded");
            set(
                cx,
                condition::REMEDIATED,
                true,
                reason::ROLLBACK_SUCCEEDED,
                &message,
            );
            event(cx, EventType::Normal, reason::ROLLBACK_SUCCEEDED, &message).await;
        }
    }
}

/// A failed action: the record (if one was written) `failed`, the failure counted, the
/// conditions and an Event say so.
async fn fail(
    cx: &mut Cx,
    target: &Target,
    record: Option<Release>,
    settings: &Deploy,
    error: &str,
    chart_name: &str,
) -> Result<(), ReconcileError> {
    if let Some(record) = record {
        Box::pin(record_failed(cx, target, record, settings, error)).await?;
    }
    cx.status.failures = Some(cx.status.failures.unwrap_or(0) + 1);
    let (namespace, name) = (&target.namespace, &target.name);
    match settings.kind {
        Kind::Install | Kind::Upgrade => {
            let (failures, failed) = if settings.kind == Kind::Install {
                (&mut cx.status.install_failures, reason::INSTALL_FAILED)
            } else {
                (&mut cx.status.upgrade_failures, reason::UPGRADE_FAILED)
            };
            *failures = Some(failures.unwrap_or(0) + 1);
            let message = format!(
                "Helm {} failed for release {namespace}/{name} with chart {chart_name}: {}",
                settings.kind.verb(),
                error.trim()
            );
            set(cx, condition::RELEASED, false, failed, &message);
            event(cx, EventType::Warning, failed, &message).await;
        }
        Kind::Rollback => {
            let message = format!(
                "Helm rollback to previous release {namespace}/{name} with chart {chart_name} failed: {}",
                error.trim()
            );
            set(
                cx,
                condition::REMEDIATED,
                false,
                reason::ROLLBACK_FAILED,
                &message,
            );
            event(cx, EventType::Warning, reason::ROLLBACK_FAILED, &message).await;
            return Err(ReconcileError::transient(reason::ROLLBACK_FAILED, message));
        }
    }
    if let Ok(Some(_)) = cx.object.retry_interval(settings.kind == Kind::Upgrade) {
        // `RetryOnFailure`: retried after the interval (the reconciler's `retry_interval`),
        // `Reconciling` saying so (`retrying`), `Ready` the failure.
        let released = cx
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == condition::RELEASED)
            .map(|c| (c.reason.clone(), c.message.clone()))
            .unwrap_or_default();
        return Err(ReconcileError::transient(released.0, released.1));
    }
    Ok(())
}

/// The failed record: `failed` in the storage, its snapshot recorded, the history pruned, and
/// with `cleanupOnFail` what the action created deleted.
async fn record_failed(
    cx: &mut Cx,
    target: &Target,
    mut record: Release,
    settings: &Deploy,
    error: &str,
) -> Result<(), ReconcileError> {
    record.set_status(
        Status::Failed,
        format!("Release \"{}\" failed: {error}", record.name),
    );
    target.update(&record).await?;
    let records = target.history().await?;
    if settings.kind != Kind::Rollback {
        let snapshot = status::snapshot(
            stored(&records, &record),
            Some(settings.kind.verb()),
            cx.status.last_attempted_revision_digest.as_deref(),
        );
        status::record(
            &mut cx.status.history,
            snapshot,
            &records,
            capstan_api::meta::HISTORY_MAX_SIZE,
        );
    }
    let max = cx.object.max_history();
    if max > 0 {
        let _ = target.storage.prune(&target.name, max).await;
    }
    let cleanup = match settings.kind {
        Kind::Upgrade => cx
            .object
            .spec
            .upgrade
            .as_ref()
            .and_then(|u| u.cleanup_on_fail),
        Kind::Rollback => cx
            .object
            .spec
            .rollback
            .as_ref()
            .and_then(|r| r.cleanup_on_fail),
        Kind::Install => None,
    };
    if cleanup == Some(true) {
        cleanup_created(target, &record, &records).await;
    }
    Ok(())
}

/// `cleanupOnFail`: deletes the objects of the failed `record` that the last deployed revision
/// did not have (those this action created), as Helm does. Failures are logged only: the
/// action failed already.
async fn cleanup_created(target: &Target, record: &Release, records: &[Release]) {
    let Some(deployed) = records
        .iter()
        .rev()
        .find(|r| r.version != record.version && r.status() == Status::Deployed)
    else {
        return;
    };
    let options = apply_options(target, false);
    let objects = |manifest: &str| render::manifest_objects(manifest).and_then(|o| to_dynamic(&o));
    let (Ok(new), Ok(old)) = (
        deletable_objects(&record.manifest),
        objects(&deployed.manifest),
    ) else {
        return;
    };
    let new = Inventory::new(target.manager.references(&new, &options).await);
    let old = Inventory::new(target.manager.references(&old, &options).await);
    let created = new.diff(&old);
    if created.is_empty() {
        return;
    }
    if let Err(error) = target
        .manager
        .delete_all(&created, &DeleteOptions::default())
        .await
    {
        tracing::warn!(error = %capstan_source::redact::error_chain(&error), "cleanupOnFail");
    }
}

/// The record of `record`'s revision as the storage holds it (what later reads compare with),
/// else `record`.
fn stored<'a>(records: &'a [Release], record: &'a Release) -> &'a Release {
    records
        .iter()
        .find(|r| r.name == record.name && r.version == record.version)
        .unwrap_or(record)
}

/// `<chart>@<version>` of the chart being released.
fn chart_label(chart: Option<&Chart>) -> String {
    chart.map_or_else(String::new, |c| {
        format!("{}@{}", c.metadata.name, c.metadata.version)
    })
}

/// Marks a stale pending record `failed` (Flux's unlock); the next action is an upgrade.
async fn unlock(cx: &mut Cx, target: &Target, mut release: Release) -> Result<(), ReconcileError> {
    let previous = release.status();
    release.set_status(
        Status::Failed,
        format!("Release unlocked from stale '{previous}' state"),
    );
    target.update(&release).await?;
    let message = format!(
        "Unlocked Helm release {} with chart {} in {previous} state",
        status::full_name(&release),
        status::versioned_chart(&release)
    );
    set(cx, condition::RELEASED, false, PENDING_RELEASE, &message);
    // As Flux: no failure is counted (the action did not fail, its controller stopped) and
    // only a snapshot already recorded for this revision is updated.
    if cx
        .status
        .history
        .first()
        .is_some_and(|s| s.name == release.name && s.version == release.version)
    {
        let stored_release = target
            .storage
            .get(&target.name, release.version)
            .await
            .map_err(storage_error)?
            .unwrap_or(release);
        if let Some(first) = cx.status.history.first_mut() {
            "failed".clone_into(&mut first.status);
            first.digest = status::release_digest(&stored_release, first.oci_digest.as_deref());
        }
    }
    Ok(())
}
