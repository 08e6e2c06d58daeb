//! The reconcile runtime shared by every kind.
//!
//! A kind plugs in with a [`Reconciler`]: its object type (a [`FluxResource`], which an API type
//! with [`FluxKind`] facts becomes by implementing [`Kind`]: its interval), its steps and its
//! cleanup; what it refers to ([`depends::References`]) gives it `dependsOn` and triggers from
//! other kinds; [`Controllers`] registers it in a process. [`run`] drives it with kube-rs's [`Controller`] (watch, queue, requeue) and gives
//! every reconcile the same outer shape:
//!
//! 1. a tracing span with the kind, namespace and name, and a [`metrics::ReconcileTimer`];
//! 2. the finalizer ([`capstan_api::FINALIZER`]): added first; on deletion the cleanup runs and
//!    the finalizer is removed;
//! 3. the suspend check (`spec.suspend`): nothing is done while suspended;
//! 4. the steps, in order, stopping at the first error and keeping the shortest requeue;
//! 5. the status, finalized on every exit path and written with server-side apply of the
//!    status subresource under one field manager.
//!
//! # Guarantees
//! - Flux condition semantics: success sets `Ready=True`, removes `Reconciling` and `Stalled`
//!   and sets `observedGeneration`; a [`ErrorClass::Stalled`] failure sets `Stalled=True` and
//!   waits for a spec change; [`ErrorClass::Waiting`] and [`ErrorClass::Transient`] failures
//!   keep `Reconciling=True` (`Progressing`, `ProgressingWithRetry`) and requeue.
//! - `status.lastHandledReconcileAt` echoes `reconcile.fluxcd.io/requestedAt`; a new value of
//!   that annotation triggers a reconcile at once, as do spec changes and deletion. Status-only
//!   changes do not.
//! - Events are emitted only when the `Ready` condition changes (status, reason or message):
//!   `Warning` for stalled and transient failures, `Normal` otherwise.
//! - After success the object is requeued after its interval, with ±[`RuntimeConfig::jitter`].
//!   An interval below [`MIN_INTERVAL`] (`0s` included) is refused: `Stalled=True`, reason
//!   `InvalidInterval`, naming `spec.interval`.
//! - No object is reconciled more often than [`RuntimeConfig::rate_limit`] allows, whatever
//!   asks for it (interval, retry, backoff, triggers, reconcile requests): a reconcile that
//!   comes too early is deferred, doing nothing, until the object has a token again.
//! - A step can write the status at a phase boundary ([`StepContext::write_status`]), e.g.
//!   `Reconciling=True` and `Ready=Unknown` ([`StepContext::mark_progressing`]) before its first
//!   write to the cluster, so that a crash leaves "in progress", never "done".
//! - On deletion the cleanup sees the object as the API server holds it now (a fresh read, not
//!   the watch cache), and the finalizer is removed only if the object did not change since.
//! - A transient failure is retried after [`Reconciler::retry_interval`] when the kind has
//!   one, else with exponential backoff.
//! - [`Reconciler::triggers`] adds reconcile triggers of the kind's own (e.g. a source's new
//!   artifact), fed to kube-runtime's `Controller::reconcile_on`.
//! - No wait holds a worker: a step waiting for something outside (health after an apply)
//!   looks once and returns [`StepOutcome::pending`]; the runtime writes the status so far,
//!   leaves `Ready` as it is and looks again after [`Wait::next_poll`], keeping the deadline
//!   ([`wait`]). Finishing, suspending or deleting the object ends its wait. A cleanup
//!   returning an [`ErrorClass::Waiting`] error is looked at again after its delay.
//! - Every Event (the `Ready` transitions, a step's [`StepContext::publish_event`]) goes
//!   through one [`Events`] per controller: one Kubernetes Event recorder, and the
//!   [`RuntimeConfig::event_sink`] with Flux's metadata ([`events`]).
//! - Shutdown (the `shutdown` token of [`run`], which a lost Lease cancels too) cancels the
//!   steps in flight: a step is dropped at its next await, nothing more is written, and the
//!   controller stops without waiting for it.
//! - A kind without an interval ([`FluxResource::interval`] `None`) is reconciled on changes
//!   and triggers only; a step may set the `Ready=True` reason of its result
//!   ([`StepContext::set_ready_reason`], else [`FluxResource::READY_REASON`]).
//! - [`Controllers`] registers the kinds of a process, their routes and their readiness.
//! - `spec.dependsOn` is one service ([`depends::check`]): each dependency Ready for its
//!   generation and, built from the same source, at the same revision; what a kind refers to
//!   ([`depends::References`]) also feeds the [`triggers`] from other kinds (sources,
//!   dependencies, ConfigMaps and Secrets).

pub mod conditions;
pub mod controllers;
pub mod depends;
pub mod events;
pub mod metrics;
pub mod server;
pub mod triggers;
pub mod wait;

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::hash::{BuildHasher, Hash, Hasher};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use capstan_api::meta::{Condition, ReconcileRequestStatus, annotation, condition, reason};
use capstan_api::{FluxKind, FluxStatus};
use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::{Patch, PatchParams};
use kube::core::NamespaceResourceScope;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{PredicateConfig, WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use conditions::ConditionStatus;
pub use controllers::Controllers;
pub use events::{EventSink, Events, PublishedEvent};
pub use metrics::{Metrics, ReconcileTimer};
pub use server::{Health, router};
pub use wait::Wait;

use crate::error::{Error, ErrorClass, ReconcileError};

/// Annotations under this prefix steer Capstan's reconciles; changing one triggers a reconcile.
pub const CAPSTAN_ANNOTATION_PREFIX: &str = "capstan.dev/";

/// The field manager of every status write, and of finalizer patches.
pub const FIELD_MANAGER: &str = "capstan";

/// The shortest `spec.interval` accepted: shorter ones (`0s` included) are refused with
/// `Stalled=True`, reason [`INVALID_INTERVAL`].
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The reason of a refused interval (unparsable, or below [`MIN_INTERVAL`]).
pub const INVALID_INTERVAL: &str = "InvalidInterval";

/// The `Ready=Unknown` message while a reconcile is in progress (Flux's).
pub const IN_PROGRESS_MESSAGE: &str = "Reconciliation in progress";

/// A Flux object the runtime can reconcile: namespaced, with a status holding conditions,
/// `observedGeneration` and `lastHandledReconcileAt`.
pub trait FluxResource:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
    /// The status type.
    type Status: Clone + Debug + Default + PartialEq + Serialize + Send + Sync + 'static;

    /// The reason of `Ready=True` after a successful reconcile: Flux's source kinds say
    /// `Succeeded`, its Kustomization and HelmRelease `ReconciliationSucceeded`.
    const READY_REASON: &'static str = reason::SUCCEEDED;

    /// The current status, if any.
    fn status(&self) -> Option<&Self::Status>;
    /// Whether `spec.suspend` is set.
    fn suspended(&self) -> bool;
    /// `spec.interval`; `None` for a kind reconciled only when something changes (a
    /// Provider, an Alert: static configuration), so no periodic requeue.
    fn interval(&self) -> Result<Option<Duration>, capstan_api::Error>;
    /// The status conditions.
    fn conditions(status: &Self::Status) -> &[Condition];
    /// The status conditions, mutable.
    fn conditions_mut(status: &mut Self::Status) -> &mut Vec<Condition>;
    /// `status.observedGeneration`.
    fn observed_generation(status: &Self::Status) -> Option<i64>;
    /// Sets `status.observedGeneration`.
    fn set_observed_generation(status: &mut Self::Status, generation: Option<i64>);
    /// `status.lastHandledReconcileAt`, mutable.
    fn reconcile_request_mut(status: &mut Self::Status) -> &mut ReconcileRequestStatus;
    /// The revision reported in metrics (e.g. `status.artifact.revision`).
    fn revision(status: &Self::Status) -> Option<&str>;
}

/// A kind the runtime reconciles, described by its API type: its [`FluxKind`] facts and status
/// accessors make the whole [`FluxResource`] shape, so a kind adds only `spec.interval` (and,
/// when Flux's success reason is not `Succeeded`, its [`Kind::READY_REASON`]).
pub trait Kind:
    FluxKind<Status: Clone + Debug + Default + PartialEq + Serialize + Send + Sync + 'static>
    + Resource<Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Serialize
    + Send
    + Sync
    + 'static
{
    /// See [`FluxResource::READY_REASON`].
    const READY_REASON: &'static str = reason::SUCCEEDED;

    /// See [`FluxResource::interval`]. Defaults to none: a kind without `spec.interval`
    /// (Alert, Provider) is reconciled when it or what triggers it changes.
    ///
    /// # Errors
    /// An unparsable `spec.interval`.
    fn interval(&self) -> Result<Option<Duration>, capstan_api::Error> {
        Ok(None)
    }
}

impl<T: Kind> FluxResource for T {
    type Status = <T as FluxKind>::Status;
    const READY_REASON: &'static str = <T as Kind>::READY_REASON;

    fn status(&self) -> Option<&Self::Status> {
        FluxKind::status(self)
    }
    fn suspended(&self) -> bool {
        FluxKind::suspended(self)
    }
    fn interval(&self) -> Result<Option<Duration>, capstan_api::Error> {
        Kind::interval(self)
    }
    fn conditions(status: &Self::Status) -> &[Condition] {
        status.conditions()
    }
    fn conditions_mut(status: &mut Self::Status) -> &mut Vec<Condition> {
        status.conditions_mut()
    }
    fn observed_generation(status: &Self::Status) -> Option<i64> {
        status.observed_generation()
    }
    fn set_observed_generation(status: &mut Self::Status, generation: Option<i64>) {
        status.set_observed_generation(generation);
    }
    fn reconcile_request_mut(status: &mut Self::Status) -> &mut ReconcileRequestStatus {
        status.reconcile_request_mut()
    }
    fn revision(status: &Self::Status) -> Option<&str> {
        FluxStatus::revision(status)
    }
}

/// The future a [`Step`] returns.
pub type StepFuture<'a> =
    Pin<Box<dyn Future<Output = Result<StepOutcome, ReconcileError>> + Send + 'a>>;

/// One step of a reconcile pipeline: a name (for logs) and an async function over the
/// [`StepContext`]. Write the function as `fn step(cx: &mut StepContext<R>) -> StepFuture<'_>
/// { Box::pin(async move { ... }) }`.
pub struct Step<R: Reconciler> {
    /// The step name, e.g. `fetch`.
    pub name: &'static str,
    /// The step itself.
    pub run: for<'a> fn(&'a mut StepContext<R>) -> StepFuture<'a>,
}

impl<R: Reconciler> Debug for Step<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Step")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What a successful step asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepOutcome {
    /// Reconcile again after this delay at the latest (the shortest of all steps and the
    /// interval wins).
    pub requeue_after: Option<Duration>,
    /// The reconcile is not finished: a [`Wait`] is in flight. The steps after this one do
    /// not run, the `Ready` condition is left as it is (no Event), the status built so far is
    /// written and the object is reconciled again after `requeue_after`, freeing the worker.
    pub pending: bool,
}

impl StepOutcome {
    /// Go on with the next step.
    pub fn next() -> Self {
        Self::default()
    }

    /// Go on, and reconcile again after `delay` at the latest.
    pub fn requeue_after(delay: Duration) -> Self {
        Self {
            requeue_after: Some(delay),
            pending: false,
        }
    }

    /// Stop here without finishing the reconcile, and look again after `delay` (see
    /// [`StepContext::look`]).
    pub fn pending(delay: Duration) -> Self {
        Self {
            requeue_after: Some(delay),
            pending: true,
        }
    }
}

/// A kind's reconcile logic, driven by [`run`].
pub trait Reconciler: Send + Sync + Sized + 'static {
    /// The kind reconciled.
    type Object: FluxResource;
    /// Data handed from one step to the next within one reconcile.
    type State: Default + Send;

    /// The controller name used as the Event reporter, e.g. `source-controller`.
    const CONTROLLER_NAME: &'static str;

    /// The steps, run in order.
    fn steps(&self) -> &[Step<Self>];

    /// Removes what the object owns outside the cluster (stored artifacts, ...) on deletion.
    /// Nothing by default (a kind that owns nothing outside its object).
    fn cleanup(
        &self,
        object: &Self::Object,
    ) -> impl Future<Output = Result<(), ReconcileError>> + Send {
        let _ = object;
        std::future::ready(Ok(()))
    }

    /// Extra reconcile triggers beside the object's own changes (e.g. a source's new
    /// revision): each stream yields the objects to reconcile now. `store` holds every object
    /// of the kind, as the controller sees it. None by default.
    fn triggers(
        &self,
        client: &Client,
        store: reflector::Store<Self::Object>,
    ) -> Vec<BoxStream<'static, ObjectRef<Self::Object>>> {
        let _ = (client, store);
        Vec::new()
    }

    /// Whether a failed reconcile (transient or waiting) still records the generation as
    /// observed (`status.observedGeneration`), so that readers (kstatus, `kubectl wait`,
    /// dependents) see "failed for this generation" rather than "not reconciled yet". Flux
    /// records it on success and on stalled failures only, which is the default; GitRepository,
    /// OCIRepository and Bucket (whose steps never read `observedGeneration` back) say yes.
    const OBSERVE_FAILURES: bool = false;

    /// For a failure retried after a fixed interval (helm-controller's `RetryOnFailure`
    /// strategy), the `Reconciling=True` (`ProgressingWithRetry`) message, e.g. "retrying after
    /// 5m0s"; the generation is then recorded as observed, as Flux does. `None`, the default,
    /// keeps the error's message and the generation unobserved.
    fn retrying(&self, object: &Self::Object, error: &ReconcileError) -> Option<String> {
        let _ = (object, error);
        None
    }

    /// The delay before retrying `object` after a [`ErrorClass::Transient`] failure (e.g.
    /// Flux's `spec.retryInterval`); `None`, the default, uses the exponential backoff.
    fn retry_interval(&self, object: &Self::Object) -> Option<Duration> {
        let _ = object;
        None
    }
}

/// Everything a step sees: the object, the status being built, the step-to-step state.
pub struct StepContext<R: Reconciler> {
    /// The reconciler (shared configuration such as storage).
    pub reconciler: Arc<R>,
    /// The API client.
    pub client: Client,
    /// The object as read at the start of the reconcile.
    pub object: Arc<R::Object>,
    /// The status being built; written when the reconcile ends (and mid-reconcile by
    /// [`StepContext::write_status`] and [`StepContext::mark_progressing`]).
    pub status: <R::Object as FluxResource>::Status,
    /// Data handed between steps.
    pub state: R::State,
    /// Flux's metadata of every Event this reconcile publishes ([`events::REVISION_KEY`],
    /// [`events::ORIGIN_REVISION_KEY`], [`events::TOKEN_KEY`]); the revision defaults to
    /// [`FluxResource::revision`] of the status.
    pub event_metadata: std::collections::BTreeMap<String, String>,
    events: Events,
    /// `(reason, message)` of every Event this reconcile published, the message bounded as the
    /// `Ready` condition's is: the `Ready` transition is not announced again when a step already
    /// said the same (e.g. `InstallSucceeded`, or a long `InstallFailed`).
    published: std::sync::Mutex<std::collections::BTreeSet<(String, String)>>,
    ready_message: Option<String>,
    ready_reason: Option<String>,
    /// The status as the API server holds it (after our last write).
    written: <R::Object as FluxResource>::Status,
    field_manager: String,
    waits: Arc<wait::Waits<ObjectRef<R::Object>>>,
}

impl<R: Reconciler> Debug for StepContext<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepContext")
            .field("object", &ObjectRef::from_obj(self.object.as_ref()))
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl<R: Reconciler> StepContext<R> {
    /// A context for `object` with its current status.
    pub fn new(reconciler: Arc<R>, client: Client, object: Arc<R::Object>) -> Self {
        let status = object.status().cloned().unwrap_or_default();
        let events = Events::new(client.clone(), R::CONTROLLER_NAME, None);
        Self {
            reconciler,
            client,
            events,
            event_metadata: std::collections::BTreeMap::new(),
            object,
            written: status.clone(),
            status,
            state: R::State::default(),
            ready_message: None,
            ready_reason: None,
            published: std::sync::Mutex::default(),
            field_manager: FIELD_MANAGER.to_owned(),
            waits: Arc::default(),
        }
    }

    /// Takes one look within the wait for `key` (e.g. the generation, revision and digest of
    /// what was applied): resumes the wait in flight for that key, or begins one with
    /// `timeout` from now, awaiting `objects` (only asked for when a wait begins). When the
    /// awaited objects are not there yet and the wait has not [expired](Wait::expired), return
    /// [`StepOutcome::pending`] with [`Wait::next_poll`]: the worker is freed and the next pass
    /// resumes the wait with the same deadline. See [`wait`].
    pub fn look(
        &self,
        key: &str,
        timeout: Duration,
        objects: impl FnOnce() -> Vec<capstan_apply::ObjectRef>,
    ) -> Wait {
        self.waits.look(
            &ObjectRef::from_obj(self.object.as_ref()),
            key,
            timeout,
            objects,
            Instant::now(),
        )
    }

    /// The wait in flight for `key`, if any: a step may skip what the pass that began it
    /// already did (e.g. the apply).
    pub fn wait_in_flight(&self, key: &str) -> Option<Wait> {
        self.waits
            .get(&ObjectRef::from_obj(self.object.as_ref()), key)
    }

    /// Publishes an Event about the object (to the API server and the controller's
    /// [`EventSink`]) with [`StepContext::event_metadata`]; `action` says what was done
    /// (e.g. `DriftDetection`). A failure is logged only.
    pub fn publish_event(
        &self,
        type_: EventType,
        reason: &str,
        message: &str,
        action: &str,
    ) -> impl Future<Output = ()> + Send + 'static {
        self.published
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((reason.to_owned(), capstan_api::message::bound(message)));
        let events = self.events.clone();
        let object = self.object.object_ref(&());
        let metadata = self.metadata();
        let (reason, message, action) = (reason.to_owned(), message.to_owned(), action.to_owned());
        async move {
            events
                .publish(&object, type_, &reason, &message, &action, &metadata)
                .await;
        }
    }

    /// Says that the `Ready` transition to `(reason, message)` is announced already (by an
    /// Event of another reason, e.g. a source's `NewArtifact`): the runtime publishes none.
    pub fn mark_announced(&self, reason: &str, message: &str) {
        self.published
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((reason.to_owned(), capstan_api::message::bound(message)));
    }

    /// [`StepContext::event_metadata`], the revision defaulted from the status.
    fn metadata(&self) -> std::collections::BTreeMap<String, String> {
        let mut metadata = self.event_metadata.clone();
        if let Some(revision) = R::Object::revision(&self.status) {
            metadata
                .entry(events::REVISION_KEY.to_owned())
                .or_insert_with(|| revision.to_owned());
        }
        metadata
    }

    /// Writes the status being built now, if it differs from what the API server holds: a
    /// phase boundary. The runtime writes it again when the reconcile ends.
    ///
    /// # Errors
    /// The API server's refusal; the caller should not go on with what the write announced.
    pub async fn write_status(&mut self) -> Result<(), kube::Error> {
        if self.status == self.written {
            return Ok(());
        }
        let api: Api<R::Object> = self.api();
        patch_status(&api, &self.field_manager, &self.object, &self.status).await?;
        self.written = self.status.clone();
        Ok(())
    }

    /// Marks the reconcile in progress, as Flux does before changing anything:
    /// `Reconciling=True` (reason `Progressing`, `message`) and `Ready=Unknown` (reason
    /// `Progressing`, [`IN_PROGRESS_MESSAGE`]), written at once. Call it before the first
    /// write to the cluster, so that a crash in the middle leaves "in progress", not the
    /// `Ready=True` of what was there before.
    ///
    /// # Errors
    /// The API server's refusal of the status write.
    pub async fn mark_progressing(&mut self, message: &str) -> Result<(), kube::Error> {
        self.set_condition(
            condition::RECONCILING,
            ConditionStatus::True,
            reason::PROGRESSING,
            message,
        );
        self.set_condition(
            condition::READY,
            ConditionStatus::Unknown,
            reason::PROGRESSING,
            IN_PROGRESS_MESSAGE,
        );
        self.write_status().await
    }

    /// The object's namespace.
    pub fn namespace(&self) -> String {
        self.object.namespace().unwrap_or_default()
    }

    /// The object's name.
    pub fn name(&self) -> String {
        self.object.name_any()
    }

    /// Sets a condition (with `observedGeneration` = the object's generation).
    pub fn set_condition(
        &mut self,
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: &str,
    ) {
        let generation = self.object.meta().generation;
        conditions::set_condition(
            R::Object::conditions_mut(&mut self.status),
            type_,
            status,
            reason,
            message,
            generation,
        );
    }

    /// Removes a condition.
    pub fn remove_condition(&mut self, type_: &str) {
        conditions::remove_condition(R::Object::conditions_mut(&mut self.status), type_);
    }

    /// The message of `Ready=True` when every step succeeds.
    pub fn set_ready_message(&mut self, message: impl Into<String>) {
        self.ready_message = Some(message.into());
    }

    /// The reason of `Ready=True` when every step succeeds, for this reconcile (e.g. a
    /// HelmRelease's `InstallSucceeded` or `UpgradeSucceeded`); [`FluxResource::READY_REASON`]
    /// when no step sets one.
    pub fn set_ready_reason(&mut self, reason: impl Into<String>) {
        self.ready_reason = Some(reason.into());
    }

    /// An API handle for `T` in the object's namespace.
    pub fn api<T>(&self) -> Api<T>
    where
        T: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    {
        Api::namespaced(self.client.clone(), &self.namespace())
    }
}

/// Settings of [`run`].
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Field manager of status and finalizer writes.
    pub field_manager: String,
    /// Reconciles running at once (`--concurrent`); 0 means unbounded.
    pub concurrency: u16,
    /// First delay of the transient-failure backoff.
    pub backoff_base: Duration,
    /// Longest delay of the transient-failure backoff.
    pub backoff_max: Duration,
    /// Interval jitter as a fraction (0.05 = ±5 %).
    pub jitter: f64,
    /// The most reconciles one object may get, whatever triggers them.
    pub rate_limit: RateLimit,
    /// Where every published Event goes besides the API server (none by default).
    pub event_sink: Option<Arc<dyn EventSink>>,
    /// Refuse remote bases in Kustomization builds (`--no-remote-bases`; off by default).
    pub no_remote_bases: bool,
    /// Refuse source references into another namespace in Kustomizations and HelmReleases
    /// (`--no-cross-namespace-refs`; off by default).
    pub no_cross_namespace_refs: bool,
    /// The ServiceAccount Kustomizations and HelmReleases impersonate when their
    /// `spec.serviceAccountName` is empty (`--default-service-account`; none by default).
    pub default_service_account: Option<String>,
    /// The one namespace watched (Flux's `--watch-all-namespaces=false` with
    /// `RUNTIME_NAMESPACE`): every list and watch of the runtime and of the [`triggers`] is
    /// limited to it, so objects elsewhere are never reconciled. `None` (the default) watches
    /// every namespace.
    pub watch_namespace: Option<String>,
}

impl RuntimeConfig {
    /// The lockdown settings of the Kustomization and HelmRelease reconcilers.
    #[must_use]
    pub fn tenancy(&self) -> crate::tenancy::Tenancy {
        crate::tenancy::Tenancy {
            no_cross_namespace_refs: self.no_cross_namespace_refs,
            default_service_account: self.default_service_account.clone(),
            watch_namespace: self.watch_namespace.clone(),
        }
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            field_manager: FIELD_MANAGER.to_owned(),
            concurrency: 4,
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
            jitter: 0.05,
            rate_limit: RateLimit::default(),
            event_sink: None,
            no_remote_bases: false,
            no_cross_namespace_refs: false,
            default_service_account: None,
            watch_namespace: None,
        }
    }
}

/// A token bucket per object: up to `burst` reconciles at once, then one per `period`.
///
/// The default (burst 5, one per second) lets a create, a spec change and a reconcile request
/// run at once, and holds any object, whatever its spec or its neighbours do, to about one
/// reconcile per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Reconciles allowed back to back (at least 1).
    pub burst: u32,
    /// The time one token takes to come back.
    pub period: Duration,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self {
            burst: 5,
            period: Duration::from_secs(1),
        }
    }
}

/// A token bucket: tokens left and when they were counted.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The per-object token buckets of a [`RateLimit`].
#[derive(Debug)]
struct RateLimiter<K> {
    limit: RateLimit,
    buckets: Mutex<HashMap<K, Bucket>>,
}

impl<K: Eq + Hash + Clone> RateLimiter<K> {
    /// Buckets kept before full (idle) ones are dropped.
    const PRUNE_ABOVE: usize = 4096;

    fn new(limit: RateLimit) -> Self {
        Self {
            limit,
            buckets: Mutex::default(),
        }
    }

    /// Takes a token for `key` at `now`; `Err(wait)` when there is none yet.
    fn admit(&self, key: &K, now: Instant) -> Result<(), Duration> {
        let burst = f64::from(self.limit.burst.max(1));
        let period = self.limit.period.as_secs_f64();
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() > Self::PRUNE_ABOVE {
            buckets.retain(|_, bucket| refill(bucket, now, burst, period) < burst);
        }
        let bucket = buckets.entry(key.clone()).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let tokens = refill(bucket, now, burst, period);
        if tokens >= 1.0 {
            bucket.tokens = tokens - 1.0;
            bucket.at = now;
            Ok(())
        } else {
            Err(self.limit.period.mul_f64(1.0 - tokens))
        }
    }

    fn forget(&self, key: &K) {
        self.buckets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }
}

/// The tokens of `bucket` at `now`.
fn refill(bucket: &Bucket, now: Instant, burst: f64, period: f64) -> f64 {
    if period <= 0.0 {
        return burst;
    }
    let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
    (bucket.tokens + elapsed / period).min(burst)
}

/// The delay before retry number `failures` (1-based): `base * 2^(failures-1)`, capped at `max`.
pub fn backoff(base: Duration, max: Duration, failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(30);
    base.saturating_mul(1u32 << exponent).min(max)
}

/// `interval` moved by a random amount within ±`fraction` of it.
pub fn jittered(interval: Duration, fraction: f64) -> Duration {
    let fraction = fraction.clamp(0.0, 1.0);
    let random = std::hash::RandomState::new().hash_one(std::time::SystemTime::now());
    let unit = (random >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
    let factor = 1.0 + fraction * (2.0 * unit - 1.0);
    interval.mul_f64(factor.max(0.0))
}

struct Shared<R: Reconciler> {
    reconciler: Arc<R>,
    client: Client,
    events: Events,
    metrics: Metrics,
    config: RuntimeConfig,
    failures: Mutex<HashMap<ObjectRef<R::Object>, u32>>,
    limiter: RateLimiter<ObjectRef<R::Object>>,
    waits: Arc<wait::Waits<ObjectRef<R::Object>>>,
    shutdown: CancellationToken,
}

impl<R: Reconciler> Shared<R> {
    fn record_failure(&self, object: &R::Object) -> u32 {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let count = failures.entry(ObjectRef::from_obj(object)).or_insert(0);
        *count = count.saturating_add(1);
        *count
    }

    fn reset_failures(&self, object: &R::Object) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&ObjectRef::from_obj(object));
    }

    fn retry_after(&self, object: &R::Object) -> Duration {
        let failures = self.record_failure(object);
        backoff(self.config.backoff_base, self.config.backoff_max, failures)
    }
}

/// Runs the controller of `reconciler` until `shutdown` is cancelled: no reconcile starts after
/// that, and the steps in flight are cancelled (see the module guarantees). `health` marks the controller (by kind) ready once it is set up, and not
/// ready when it stops.
pub async fn run<R: Reconciler>(
    client: Client,
    reconciler: R,
    metrics: Metrics,
    config: RuntimeConfig,
    health: Health,
    shutdown: CancellationToken,
) {
    let api: Api<R::Object> = match &config.watch_namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let (reader, writer) = reflector::store();
    // Reconcile on spec changes (generation), reconcile requests and deletion; not on our own
    // status and finalizer writes.
    let trigger = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(trigger_hash::<R::Object>, PredicateConfig::default());
    let events = Events::new(
        client.clone(),
        R::CONTROLLER_NAME,
        config.event_sink.clone(),
    );
    let shared = Arc::new(Shared {
        reconciler: Arc::new(reconciler),
        client,
        events,
        metrics,
        config: config.clone(),
        failures: Mutex::default(),
        limiter: RateLimiter::new(config.rate_limit),
        waits: Arc::default(),
        shutdown: shutdown.clone(),
    });
    let controller_config =
        kube::runtime::controller::Config::default().concurrency(config.concurrency);
    let triggers = triggers::watching(config.watch_namespace.as_deref(), || {
        shared.reconciler.triggers(&shared.client, reader.clone())
    });
    let mut controller = Controller::for_stream(trigger, reader).with_config(controller_config);
    for extra in triggers {
        controller = controller.reconcile_on(extra);
    }
    let name = R::Object::kind(&()).into_owned();
    health.set_controller_ready(&name, true);
    let stop = shutdown.clone();
    controller
        .graceful_shutdown_on(async move { stop.cancelled().await })
        .run(reconcile::<R>, error_policy::<R>, shared)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "controller event");
            }
        })
        .await;
    health.set_controller_ready(&name, false);
}

// A kube-rs predicate returns `Option`; ours always has a value.
#[allow(clippy::unnecessary_wraps)]
fn trigger_hash<K: FluxResource>(object: &K) -> Option<u64> {
    let meta = object.meta();
    let mut hasher = std::hash::DefaultHasher::new();
    meta.generation.hash(&mut hasher);
    meta.deletion_timestamp.is_some().hash(&mut hasher);
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(annotation::RECONCILE_REQUESTED_AT))
        .hash(&mut hasher);
    if let Some(annotations) = meta.annotations.as_ref() {
        // Capstan's own annotations (such as `capstan.dev/drift`) change what a reconcile
        // does, so changing them reconciles at once, like a spec change.
        annotations
            .iter()
            .filter(|(key, _)| key.starts_with(CAPSTAN_ANNOTATION_PREFIX))
            .for_each(|entry| entry.hash(&mut hasher));
    }
    Some(hasher.finish())
}

fn describe<K: FluxResource>(object: &K) -> String {
    format!(
        "{} {}/{}",
        K::kind(&()),
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

// The signature is kube-rs's `error_policy`.
#[allow(clippy::needless_pass_by_value)]
fn error_policy<R: Reconciler>(
    object: Arc<R::Object>,
    error: &Error,
    shared: Arc<Shared<R>>,
) -> Action {
    let delay = shared.retry_after(&object);
    // In the object's span shape (without a reconcile ID: the reconcile has ended), so log readers
    // (`capstan logs --kind K --name N`) find the failure with the object's other lines.
    let _span = tracing::info_span!(
        "reconcile",
        kind = %R::Object::kind(&()),
        namespace = %object.namespace().unwrap_or_default(),
        name = %object.name_any()
    )
    .entered();
    tracing::warn!(%error, retry_in = ?delay, object = %describe(object.as_ref()), "reconcile failed");
    Action::requeue(delay)
}

async fn reconcile<R: Reconciler>(
    object: Arc<R::Object>,
    shared: Arc<Shared<R>>,
) -> Result<Action, Error> {
    let kind = R::Object::kind(&()).into_owned();
    let namespace = object.namespace().ok_or_else(|| Error::MissingMetadata {
        kind: kind.clone(),
        field: "metadata.namespace",
    })?;
    let name = object.name_any();
    // Flux's (controller-runtime's) reconcile fields; `reconcile_id` tells one reconcile's lines
    // from the next's.
    let id = uuid::Uuid::new_v4();
    let span = tracing::info_span!("reconcile", kind = %kind, namespace = %namespace, name = %name, reconcile_id = %id);
    async move {
        // Every way to ask for a reconcile ends here, so this bounds them all.
        if let Err(wait) = shared
            .limiter
            .admit(&ObjectRef::from_obj(object.as_ref()), Instant::now())
        {
            tracing::debug!(?wait, "rate limited, deferred");
            return Ok(Action::requeue(wait));
        }
        let _timer = shared.metrics.start_reconcile(&kind, &namespace, &name);
        let api: Api<R::Object> = Api::namespaced(shared.client.clone(), &namespace);
        if object.meta().deletion_timestamp.is_some() {
            // A deletion cancels a wait in flight.
            shared.waits.end(&ObjectRef::from_obj(object.as_ref()));
            return finalize_deletion(&shared, &api, &object).await;
        }
        if !object
            .finalizers()
            .iter()
            .any(|f| f == capstan_api::FINALIZER)
        {
            add_finalizer(&shared, &api, &object).await?;
        }
        if object.suspended() {
            // So does a suspension: resuming begins anew.
            if shared.waits.end(&ObjectRef::from_obj(object.as_ref())) {
                tracing::info!("suspended while waiting: the wait ends");
            }
            tracing::info!("reconciliation is suspended");
            update_resource_info::<R>(&shared, &object, object.status());
            return Ok(Action::await_change());
        }
        reconcile_steps(&shared, object).await
    }
    .instrument(span)
    .await
}

async fn finalize_deletion<R: Reconciler>(
    shared: &Shared<R>,
    api: &Api<R::Object>,
    cached: &R::Object,
) -> Result<Action, Error> {
    // The watch cache may lag behind our own last status write (e.g. the inventory of an
    // apply that just ended): clean up after the object as the API server holds it now.
    let Some(object) = api
        .get_opt(&cached.name_any())
        .await
        .map_err(|source| Error::Kube {
            action: "read",
            object: describe(cached),
            source,
        })?
    else {
        return Ok(Action::await_change());
    };
    let object = &object;
    if !object
        .finalizers()
        .iter()
        .any(|f| f == capstan_api::FINALIZER)
    {
        return Ok(Action::await_change());
    }
    let cleanup = tokio::select! {
        biased;
        () = shared.shutdown.cancelled() => {
            tracing::info!("cleanup cancelled");
            return Ok(Action::await_change());
        }
        cleanup = shared.reconciler.cleanup(object) => cleanup,
    };
    if let Err(error) = cleanup {
        if let ErrorClass::Waiting(delay) = error.class {
            // The cleanup waits for something (e.g. the deleted objects to terminate): look
            // again later rather than hold a worker.
            tracing::debug!(?delay, %error, "cleanup waiting");
            return Ok(Action::requeue(delay));
        }
        publish(
            shared,
            object,
            EventType::Warning,
            &error.reason,
            &error.message,
        )
        .await;
        return Err(Error::Cleanup {
            object: describe(object),
            source: error,
        });
    }
    let remaining: Vec<String> = object
        .finalizers()
        .iter()
        .filter(|f| *f != capstan_api::FINALIZER)
        .cloned()
        .collect();
    // Only if nothing changed since the read the cleanup worked from: a status written in
    // between (by another replica) may name more objects, and the cleanup runs again.
    let patch = serde_json::json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": object.resource_version()},
        {"op": "test", "path": "/metadata/finalizers", "value": object.finalizers()},
        {"op": "replace", "path": "/metadata/finalizers", "value": remaining},
    ]);
    patch_metadata(shared, api, object, patch, "remove the finalizer from").await?;
    shared.reset_failures(object);
    shared.limiter.forget(&ObjectRef::from_obj(object));
    shared.metrics.forget(
        &R::Object::kind(&()),
        &object.namespace().unwrap_or_default(),
        &object.name_any(),
    );
    tracing::info!("cleaned up and removed the finalizer");
    Ok(Action::await_change())
}

async fn add_finalizer<R: Reconciler>(
    shared: &Shared<R>,
    api: &Api<R::Object>,
    object: &R::Object,
) -> Result<(), Error> {
    let patch = match object.meta().finalizers.as_deref() {
        None | Some([]) => serde_json::json!([
            {"op": "add", "path": "/metadata/finalizers", "value": [capstan_api::FINALIZER]},
        ]),
        Some(existing) => serde_json::json!([
            {"op": "test", "path": "/metadata/finalizers", "value": existing},
            {"op": "add", "path": "/metadata/finalizers/-", "value": capstan_api::FINALIZER},
        ]),
    };
    patch_metadata(shared, api, object, patch, "add the finalizer to").await
}

async fn patch_metadata<R: Reconciler>(
    shared: &Shared<R>,
    api: &Api<R::Object>,
    object: &R::Object,
    patch: serde_json::Value,
    action: &'static str,
) -> Result<(), Error> {
    let patch: json_patch::Patch =
        serde_json::from_value(patch).map_err(|source| Error::Serialize {
            object: describe(object),
            source,
        })?;
    let params = PatchParams {
        field_manager: Some(shared.config.field_manager.clone()),
        ..PatchParams::default()
    };
    api.patch(&object.name_any(), &params, &Patch::Json::<()>(patch))
        .await
        .map_err(|source| Error::Kube {
            action,
            object: describe(object),
            source,
        })?;
    Ok(())
}

async fn reconcile_steps<R: Reconciler>(
    shared: &Shared<R>,
    object: Arc<R::Object>,
) -> Result<Action, Error> {
    let generation = object.meta().generation;
    let original = object.status().cloned().unwrap_or_default();
    let mut cx = StepContext::new(
        shared.reconciler.clone(),
        shared.client.clone(),
        object.clone(),
    );
    shared
        .config
        .field_manager
        .clone_into(&mut cx.field_manager);
    cx.waits = shared.waits.clone();
    cx.events = shared.events.clone();

    announce_generation(&mut cx, generation).await?;

    let mut result: Result<Option<Duration>, ReconcileError> = checked_interval(object.as_ref())
        .map(|interval| interval.map(|interval| jittered(interval, shared.config.jitter)));
    if let Ok(mut requeue) = result {
        let steps = shared.reconciler.clone();
        let cancel = shared.shutdown.child_token();
        for step in steps.steps() {
            tracing::debug!(step = step.name, "running step");
            let outcome = tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    // Shutdown or a lost Lease: stop here, writing nothing more; whoever
                    // reconciles next starts over.
                    tracing::info!(step = step.name, "step cancelled");
                    return Ok(Action::await_change());
                }
                outcome = (step.run)(&mut cx) => outcome,
            };
            match outcome {
                Ok(outcome) if outcome.pending => {
                    let delay = outcome.requeue_after.unwrap_or(wait::FIRST_POLL);
                    tracing::debug!(step = step.name, ?delay, "step pending");
                    return finish_pending(shared, cx, &object, delay).await;
                }
                Ok(outcome) => {
                    requeue = match (requeue, outcome.requeue_after) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                Err(error) => {
                    // A wait (a dependency or source not ready yet) is news, not a failure; the
                    // rest are what Flux logs as "Reconciler error" (`capstan logs --level error`).
                    if matches!(error.class, ErrorClass::Waiting(_)) {
                        tracing::info!(step = step.name, class = error.class.label(), %error, "step failed");
                    } else {
                        tracing::error!(step = step.name, class = error.class.label(), %error, "step failed");
                    }
                    result = Err(error);
                    break;
                }
            }
        }
        if result.is_ok() {
            result = Ok(requeue);
        }
    }

    // The reconcile is finished: whatever it waited for is over.
    shared.waits.end(&ObjectRef::from_obj(object.as_ref()));
    let ready_message = cx
        .ready_message
        .take()
        .unwrap_or_else(|| "reconciliation succeeded".to_owned());
    let ready_reason = cx
        .ready_reason
        .take()
        .unwrap_or_else(|| R::Object::READY_REASON.to_owned());
    let ready = (ready_reason.as_str(), ready_message.as_str());
    let (action, event_type) = finalize_status(&mut cx, &result, ready, shared, &object);
    let old_ready = conditions::find(R::Object::conditions(&original), condition::READY).cloned();
    write_status(&mut cx).await?;
    let new_ready = conditions::find(R::Object::conditions(&cx.status), condition::READY);
    let announced = |ready: &Condition| {
        cx.published
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(&(ready.reason.clone(), ready.message.clone()))
    };
    if let Some(new_ready) = new_ready
        && ready_changed(old_ready.as_ref(), new_ready)
        && !announced(new_ready)
    {
        cx.publish_event(
            event_type,
            &new_ready.reason,
            &new_ready.message,
            "Reconcile",
        )
        .await;
    }
    update_resource_info::<R>(shared, &object, Some(&cx.status));
    Ok(action)
}

/// Phase boundary: announces a new generation before doing the work (a retry keeps its
/// `ProgressingWithRetry`).
async fn announce_generation<R: Reconciler>(
    cx: &mut StepContext<R>,
    generation: Option<i64>,
) -> Result<(), Error> {
    let reconciling = conditions::find(R::Object::conditions(&cx.status), condition::RECONCILING)
        .is_some_and(|c| c.status == ConditionStatus::True.as_str());
    if R::Object::observed_generation(&cx.status) != generation && !reconciling {
        let message = format!(
            "reconciling new object generation ({})",
            generation.unwrap_or_default()
        );
        cx.set_condition(
            condition::RECONCILING,
            ConditionStatus::True,
            reason::PROGRESSING,
            &message,
        );
        if conditions::find(R::Object::conditions(&cx.status), condition::READY).is_none() {
            cx.set_condition(
                condition::READY,
                ConditionStatus::Unknown,
                reason::PROGRESSING,
                IN_PROGRESS_MESSAGE,
            );
        }
        write_status(cx).await?;
    }
    Ok(())
}

/// Ends a pass whose step is pending: writes the status built so far (the `Ready` condition
/// as the steps left it, no Event) and looks again after `delay`.
async fn finish_pending<R: Reconciler>(
    shared: &Shared<R>,
    mut cx: StepContext<R>,
    object: &R::Object,
    delay: Duration,
) -> Result<Action, Error> {
    write_status(&mut cx).await?;
    update_resource_info::<R>(shared, object, Some(&cx.status));
    Ok(Action::requeue(delay))
}

/// When to reconcile again, as decided by [`apply_result`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Requeue {
    /// Only on the next change.
    AwaitChange,
    /// After this delay.
    After(Duration),
    /// After the next exponential-backoff delay.
    Backoff,
}

/// Applies the outcome to the status; returns the requeue and the event type of a transition.
fn finalize_status<R: Reconciler>(
    cx: &mut StepContext<R>,
    result: &Result<Option<Duration>, ReconcileError>,
    ready: (&str, &str),
    shared: &Shared<R>,
    object: &R::Object,
) -> (Action, EventType) {
    let (requeue, event_type) = apply_result(&mut cx.status, object, result, ready);
    if R::OBSERVE_FAILURES && result.is_err() {
        R::Object::set_observed_generation(&mut cx.status, object.meta().generation);
    }
    if let Err(error) = result
        && let Some(message) = shared.reconciler.retrying(object, error)
    {
        conditions::set_condition(
            R::Object::conditions_mut(&mut cx.status),
            condition::RECONCILING,
            ConditionStatus::True,
            reason::PROGRESSING_WITH_RETRY,
            &message,
            object.meta().generation,
        );
        R::Object::set_observed_generation(&mut cx.status, object.meta().generation);
    }
    match result {
        Ok(_) => shared.reset_failures(object),
        Err(error) => shared
            .metrics
            .count_error(&R::Object::kind(&()), error.class.label()),
    }
    let action = match requeue {
        Requeue::AwaitChange => Action::await_change(),
        Requeue::After(delay) => Action::requeue(delay),
        Requeue::Backoff => match shared.reconciler.retry_interval(object) {
            Some(delay) => Action::requeue(delay),
            None => Action::requeue(shared.retry_after(object)),
        },
    };
    (action, event_type)
}

/// The status side of finishing a reconcile, with Flux's condition semantics; `ready` is the
/// reason and message of `Ready=True` on success.
fn apply_result<K: FluxResource>(
    status: &mut K::Status,
    object: &K,
    result: &Result<Option<Duration>, ReconcileError>,
    (ready_reason, ready_message): (&str, &str),
) -> (Requeue, EventType) {
    let generation = object.meta().generation;
    if let Some(requested) = object.annotations().get(annotation::RECONCILE_REQUESTED_AT) {
        K::reconcile_request_mut(status).last_handled_reconcile_at = Some(requested.clone());
    }
    let set = |status: &mut K::Status, type_, value, reason: &str, message: &str| {
        conditions::set_condition(
            K::conditions_mut(status),
            type_,
            value,
            reason,
            &capstan_api::message::bound(message),
            generation,
        );
    };
    let error = match result {
        Ok(requeue) => {
            set(
                status,
                condition::READY,
                ConditionStatus::True,
                ready_reason,
                ready_message,
            );
            conditions::remove_condition(K::conditions_mut(status), condition::RECONCILING);
            conditions::remove_condition(K::conditions_mut(status), condition::STALLED);
            K::set_observed_generation(status, generation);
            let requeue = requeue.map_or(Requeue::AwaitChange, Requeue::After);
            return (requeue, EventType::Normal);
        }
        Err(error) => error,
    };
    set(
        status,
        condition::READY,
        ConditionStatus::False,
        &error.reason,
        &error.message,
    );
    match error.class {
        ErrorClass::Stalled => {
            set(
                status,
                condition::STALLED,
                ConditionStatus::True,
                &error.reason,
                &error.message,
            );
            conditions::remove_condition(K::conditions_mut(status), condition::RECONCILING);
            K::set_observed_generation(status, generation);
            (Requeue::AwaitChange, EventType::Warning)
        }
        ErrorClass::Waiting(delay) => {
            set(
                status,
                condition::RECONCILING,
                ConditionStatus::True,
                reason::PROGRESSING,
                &error.message,
            );
            conditions::remove_condition(K::conditions_mut(status), condition::STALLED);
            (Requeue::After(delay), EventType::Normal)
        }
        ErrorClass::Transient => {
            set(
                status,
                condition::RECONCILING,
                ConditionStatus::True,
                reason::PROGRESSING_WITH_RETRY,
                &error.message,
            );
            conditions::remove_condition(K::conditions_mut(status), condition::STALLED);
            (Requeue::Backoff, EventType::Warning)
        }
    }
}

/// Whether `Ready` moved: a new status, reason or message.
fn ready_changed(old: Option<&Condition>, new: &Condition) -> bool {
    new.status != ConditionStatus::Unknown.as_str()
        && old.is_none_or(|old| {
            old.status != new.status || old.reason != new.reason || old.message != new.message
        })
}

/// `spec.interval` (`None` for a kind without one), refused (stalled) when unparsable or below
/// [`MIN_INTERVAL`].
fn checked_interval<K: FluxResource>(object: &K) -> Result<Option<Duration>, ReconcileError> {
    let interval = object.interval().map_err(|error| {
        ReconcileError::stalled(INVALID_INTERVAL, error.to_string()).with_source(error)
    })?;
    let Some(interval) = interval else {
        return Ok(None);
    };
    if interval < MIN_INTERVAL {
        return Err(ReconcileError::stalled(
            INVALID_INTERVAL,
            format!(
                "spec.interval: {} is below the minimum of {}",
                capstan_api::format_go_duration(interval),
                capstan_api::format_go_duration(MIN_INTERVAL)
            ),
        ));
    }
    Ok(Some(interval))
}

/// [`StepContext::write_status`] for the runtime's own phase boundaries.
async fn write_status<R: Reconciler>(cx: &mut StepContext<R>) -> Result<(), Error> {
    cx.write_status().await.map_err(|source| Error::Kube {
        action: "patch the status of",
        object: describe(cx.object.as_ref()),
        source,
    })
}

/// Server-side applies `status` to the status subresource of `object`.
async fn patch_status<K: FluxResource>(
    api: &Api<K>,
    field_manager: &str,
    object: &K,
    status: &K::Status,
) -> Result<(), kube::Error> {
    let body = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": {"name": object.name_any(), "namespace": object.namespace()},
        "status": status,
    });
    let params = PatchParams::apply(field_manager).force();
    api.patch_status(&object.name_any(), &params, &Patch::Apply(&body))
        .await?;
    Ok(())
}

async fn publish<R: Reconciler>(
    shared: &Shared<R>,
    object: &R::Object,
    type_: EventType,
    reason: &str,
    message: &str,
) {
    let mut metadata = std::collections::BTreeMap::new();
    if let Some(revision) = object.status().and_then(R::Object::revision) {
        metadata.insert(events::REVISION_KEY.to_owned(), revision.to_owned());
    }
    shared
        .events
        .publish(
            &object.object_ref(&()),
            type_,
            reason,
            message,
            "Reconcile",
            &metadata,
        )
        .await;
}

fn update_resource_info<R: Reconciler>(
    shared: &Shared<R>,
    object: &R::Object,
    status: Option<&<R::Object as FluxResource>::Status>,
) {
    let ready = status.and_then(|s| conditions::find(R::Object::conditions(s), condition::READY));
    shared
        .metrics
        .set_resource_info(&metrics::ResourceInfoLabels {
            customresource_kind: R::Object::kind(&()).into_owned(),
            name: object.name_any(),
            exported_namespace: object.namespace().unwrap_or_default(),
            ready: ready.map_or_else(|| "Unknown".to_owned(), |c| c.status.clone()),
            reason: ready.map(|c| c.reason.clone()).unwrap_or_default(),
            suspended: object.suspended().to_string(),
            revision: status
                .and_then(R::Object::revision)
                .unwrap_or_default()
                .to_owned(),
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capstan_annotations_and_reconcile_requests_trigger_but_other_annotations_do_not() {
        let mut object: capstan_api::Kustomization = serde_json::from_value(serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "apps", "namespace": "flux-system", "generation": 1},
            "spec": {"interval": "10m", "path": "./",
                     "sourceRef": {"kind": "GitRepository", "name": "fleet"}, "prune": true},
        }))
        .unwrap();
        let hash = |object: &capstan_api::Kustomization| trigger_hash(object).unwrap();
        let first = hash(&object);
        let annotations = object
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        annotations.insert("example.com/note".into(), "x".into());
        assert_eq!(
            hash(&object),
            first,
            "a foreign annotation does not trigger"
        );
        let annotations = object
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        annotations.insert("capstan.dev/drift".into(), "report".into());
        let report = hash(&object);
        assert_ne!(report, first, "switching to report-only mode triggers");
        let annotations = object
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        annotations.insert(annotation::RECONCILE_REQUESTED_AT.into(), "now".into());
        assert_ne!(hash(&object), report, "a reconcile request triggers");
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let base = Duration::from_secs(1);
        let max = Duration::from_secs(10);
        assert_eq!(backoff(base, max, 1), Duration::from_secs(1));
        assert_eq!(backoff(base, max, 2), Duration::from_secs(2));
        assert_eq!(backoff(base, max, 4), Duration::from_secs(8));
        assert_eq!(backoff(base, max, 5), max);
        assert_eq!(backoff(base, max, u32::MAX), max);
    }

    #[test]
    fn the_rate_limiter_allows_a_burst_then_one_per_period() {
        let limiter = RateLimiter::new(RateLimit {
            burst: 3,
            period: Duration::from_secs(1),
        });
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.admit(&"a", start), Ok(()));
        }
        let wait = limiter.admit(&"a", start).unwrap_err();
        assert!(
            wait > Duration::from_millis(990) && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert_eq!(limiter.admit(&"b", start), Ok(()), "buckets are per object");
        let later = start + Duration::from_millis(500);
        let wait = limiter.admit(&"a", later).unwrap_err();
        assert!(wait <= Duration::from_millis(500), "{wait:?}");
        // A thousand attempts over ten seconds get the burst plus one per second.
        let mut admitted = 0;
        for step in 0..1000u32 {
            let now = later + Duration::from_millis(u64::from(step) * 10);
            if limiter.admit(&"a", now).is_ok() {
                admitted += 1;
            }
        }
        assert!((9..=11).contains(&admitted), "{admitted}");
        limiter.forget(&"a");
        assert_eq!(
            limiter.admit(&"a", later),
            Ok(()),
            "a forgotten object starts full"
        );
    }

    #[test]
    fn intervals_below_the_minimum_are_refused_naming_the_field() {
        let mut object = git_repository(1, None);
        for (interval, refused) in [("0s", true), ("999ms", true), ("1s", false), ("10m", false)] {
            interval.clone_into(&mut object.spec.interval);
            let result = checked_interval(&object);
            assert_eq!(result.is_err(), refused, "{interval}");
            if let Err(error) = result {
                assert_eq!(error.class, ErrorClass::Stalled);
                assert_eq!(error.reason, INVALID_INTERVAL);
                assert!(
                    error.message.starts_with("spec.interval: "),
                    "{}",
                    error.message
                );
                assert!(error.message.contains("minimum of 1s"), "{}", error.message);
            }
        }
        "292y".clone_into(&mut object.spec.interval);
        assert!(
            checked_interval(&object)
                .unwrap_err()
                .message
                .contains("spec.interval")
        );
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let interval = Duration::from_secs(100);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let value = jittered(interval, 0.05);
            assert!(
                value >= Duration::from_secs(95) && value <= Duration::from_secs(105),
                "{value:?}"
            );
            seen.insert(value);
        }
        assert!(seen.len() > 1, "jitter never varied");
        assert_eq!(jittered(interval, 0.0), interval);
    }

    fn git_repository(generation: i64, requested: Option<&str>) -> capstan_api::GitRepository {
        let mut annotations = serde_json::Map::new();
        if let Some(token) = requested {
            annotations.insert(annotation::RECONCILE_REQUESTED_AT.into(), token.into());
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": "app", "namespace": "default", "generation": generation,
                         "annotations": annotations},
            "spec": {"url": "https://example.invalid/repo.git", "interval": "1m"},
        }))
        .unwrap()
    }

    fn types(status: &capstan_api::source::v1::GitRepositoryStatus) -> Vec<(&str, &str, &str)> {
        let mut types: Vec<_> = status
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
            .collect();
        types.sort_unstable();
        types
    }

    #[test]
    fn success_sets_ready_and_clears_progress_conditions() {
        let object = git_repository(3, Some("t1"));
        let mut status = capstan_api::source::v1::GitRepositoryStatus::default();
        let failure = Err(ReconcileError::transient("GitOperationFailed", "boom"));
        apply_result(&mut status, &object, &failure, ("", ""));
        let interval = Duration::from_secs(60);
        let (requeue, event) = apply_result(
            &mut status,
            &object,
            &Ok(Some(interval)),
            ("Succeeded", "stored"),
        );
        assert_eq!(requeue, Requeue::After(interval));
        assert_eq!(event, EventType::Normal);
        assert_eq!(types(&status), [("Ready", "True", "Succeeded")]);
        assert_eq!(status.conditions[0].message, "stored");
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(
            status
                .reconcile_request
                .last_handled_reconcile_at
                .as_deref(),
            Some("t1")
        );
    }

    #[test]
    fn the_ready_reason_is_the_steps_and_no_interval_means_no_requeue() {
        let object = git_repository(1, None);
        let mut status = capstan_api::source::v1::GitRepositoryStatus::default();
        let ready = ("UpgradeSucceeded", "upgraded");
        let (requeue, _) = apply_result(&mut status, &object, &Ok(None), ready);
        assert_eq!(requeue, Requeue::AwaitChange, "a kind without an interval");
        assert_eq!(types(&status), [("Ready", "True", "UpgradeSucceeded")]);
    }

    #[test]
    fn error_classes_pick_conditions_requeue_and_event_type() {
        let object = git_repository(2, None);
        let mut status = capstan_api::source::v1::GitRepositoryStatus::default();
        let (requeue, event) = apply_result(
            &mut status,
            &object,
            &Err(ReconcileError::transient("GitOperationFailed", "boom")),
            ("", ""),
        );
        assert_eq!((requeue, event), (Requeue::Backoff, EventType::Warning));
        assert_eq!(
            types(&status),
            [
                ("Ready", "False", "GitOperationFailed"),
                ("Reconciling", "True", "ProgressingWithRetry")
            ]
        );
        assert_eq!(status.observed_generation, None, "a retry is not observed");

        let delay = Duration::from_secs(30);
        let (requeue, event) = apply_result(
            &mut status,
            &object,
            &Err(ReconcileError::waiting(
                delay,
                "DependencyNotReady",
                "waiting",
            )),
            ("", ""),
        );
        assert_eq!((requeue, event), (Requeue::After(delay), EventType::Normal));
        assert_eq!(
            types(&status),
            [
                ("Ready", "False", "DependencyNotReady"),
                ("Reconciling", "True", "Progressing")
            ]
        );

        let (requeue, event) = apply_result(
            &mut status,
            &object,
            &Err(ReconcileError::stalled("InvalidURL", "bad url")),
            ("", ""),
        );
        assert_eq!((requeue, event), (Requeue::AwaitChange, EventType::Warning));
        assert_eq!(
            types(&status),
            [
                ("Ready", "False", "InvalidURL"),
                ("Stalled", "True", "InvalidURL")
            ]
        );
        assert_eq!(status.observed_generation, Some(2));
        assert!(status.reconcile_request.last_handled_reconcile_at.is_none());
    }

    #[test]
    fn ready_transitions() {
        let ready = |status: &str, message: &str| Condition {
            type_: "Ready".into(),
            status: status.into(),
            reason: "Succeeded".into(),
            message: message.into(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::UNIX_EPOCH,
            ),
            observed_generation: None,
        };
        assert!(ready_changed(None, &ready("True", "a")));
        assert!(!ready_changed(
            Some(&ready("True", "a")),
            &ready("True", "a")
        ));
        assert!(ready_changed(
            Some(&ready("True", "a")),
            &ready("True", "b")
        ));
        assert!(ready_changed(
            Some(&ready("True", "a")),
            &ready("False", "a")
        ));
        assert!(!ready_changed(None, &ready("Unknown", "a")));
    }
}
