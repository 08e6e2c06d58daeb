//! What the source reconcilers (GitRepository, OCIRepository, Bucket, HelmRepository, HelmChart)
//! share: their runtime [`Kind`](crate::runtime::Kind), their steps and `Reconciler` impl, the
//! `FetchFailed` condition (and `AuthenticationFailed`) and the removal of stored artifacts on
//! deletion.

use capstan_api::meta::Artifact;
use capstan_api::source::v1::condition;
use capstan_source::storage::{DEFAULT_RETENTION, Storage};
use kube::ResourceExt;
use kube::runtime::events::EventType;

use crate::error::{ErrorClass, ReconcileError};
use crate::runtime::{ConditionStatus, FluxResource, Reconciler, StepContext};
use capstan_api::source::v1::reason;

/// Makes a source kind a runtime [`Kind`](crate::runtime::Kind) (and so a
/// [`FluxResource`](crate::runtime::FluxResource)) through its `interval()` accessor; the status
/// type is named for readers and checked to be the kind's.
macro_rules! source_resource {
    ($kind:ty, $status:ty) => {
        impl $crate::runtime::Kind for $kind {
            fn interval(&self) -> Result<Option<std::time::Duration>, capstan_api::Error> {
                const _: fn(&$kind) -> Option<&$status> = <$kind as capstan_api::FluxKind>::status;
                <$kind>::interval(self).map(Some)
            }
        }
    };
}
pub(crate) use source_resource;

/// The steps of a source reconciler, `[Step { name, run }, …]` from `"name" => run` pairs.
macro_rules! source_steps {
    ($($name:literal => $run:path),* $(,)?) => {
        [$($crate::runtime::Step { name: $name, run: $run }),*]
    };
}
pub(crate) use source_steps;

/// What every source reconciler (a struct with `storage` and `steps` fields) shares: its
/// `storage()` accessor and its [`Reconciler`] impl — controller `source-controller`, its steps,
/// the removal of its stored artifacts (of `kind`) on deletion — plus any further `Reconciler`
/// items given after the kind (e.g. `triggers`).
macro_rules! source_reconciler {
    ($reconciler:ty, $object:ty, $state:ty, $kind:expr $(, $($extra:tt)*)?) => {
        impl $reconciler {
            /// The artifact storage.
            pub fn storage(&self) -> &capstan_source::storage::Storage {
                &self.storage
            }
        }

        impl $crate::runtime::Reconciler for $reconciler {
            type Object = $object;
            type State = $state;
            const CONTROLLER_NAME: &'static str = "source-controller";

            fn steps(&self) -> &[$crate::runtime::Step<Self>] {
                &self.steps
            }

            async fn cleanup(&self, object: &$object) -> Result<(), $crate::error::ReconcileError> {
                $crate::sources::remove_artifacts(&self.storage, $kind, object).await
            }

            $($($extra)*)?
        }
    };
}
pub(crate) use source_reconciler;

/// Removes every stored artifact of `object` (its finalizer's cleanup).
pub(crate) async fn remove_artifacts(
    storage: &Storage,
    kind: &'static str,
    object: &impl ResourceExt,
) -> Result<(), ReconcileError> {
    let storage = storage.clone();
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    tokio::task::spawn_blocking(move || storage.remove_all(kind, &namespace, &name))
        .await
        .map_err(|e| {
            ReconcileError::transient(reason::ARCHIVE_OPERATION_FAILED, "cleanup task failed")
                .with_source(e)
        })?
        .map_err(|e| {
            ReconcileError::transient(
                reason::ARCHIVE_OPERATION_FAILED,
                format!("cannot remove stored artifacts: {e}"),
            )
            .with_source(e)
        })
}

/// Why a source read as untyped JSON (`status` of a GitRepository, OCIRepository, Bucket, …)
/// failed for its current generation, by [`capstan_api::readiness`]; `None` while it is ready,
/// not reconciled yet, or still in progress. What a consumer with no artifact to use reports.
pub fn failure(object: &serde_json::Value) -> Option<String> {
    let conditions: Vec<capstan_api::meta::Condition> = object
        .pointer("/status/conditions")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    match capstan_api::readiness(
        object
            .pointer("/metadata/generation")
            .and_then(serde_json::Value::as_i64),
        object
            .pointer("/status/observedGeneration")
            .and_then(serde_json::Value::as_i64),
        conditions
            .iter()
            .map(capstan_api::kind::ConditionView::from),
    ) {
        capstan_api::Readiness::Failed(message) => Some(message),
        _ => None,
    }
}

/// A fetch failure: `FetchFailed=True` with `reason` and `message`, and an error of `class`
/// for `Ready`.
pub(crate) fn fetch_failed<R: Reconciler>(
    cx: &mut StepContext<R>,
    class: ErrorClass,
    reason: &str,
    message: String,
) -> ReconcileError {
    cx.set_condition(
        condition::FETCH_FAILED,
        ConditionStatus::True,
        reason,
        &message,
    );
    ReconcileError::new(class, reason, message)
}

/// A failure to read a source's credentials: `FetchFailed=True` with `AuthenticationFailed` and
/// the (redacted) error chain, transient, with `error` as its source.
pub(crate) fn authentication_failed<R: Reconciler>(
    cx: &mut StepContext<R>,
    error: impl std::error::Error + Send + Sync + 'static,
) -> ReconcileError {
    let message = capstan_source::redact::error_chain(&error);
    fetch_failed(
        cx,
        ErrorClass::Transient,
        reason::AUTHENTICATION_FAILED,
        message,
    )
    .with_source(error)
}

/// Flux's source-controller Event of a new artifact (a digest the status did not hold):
/// reason `NewArtifact`, the `Ready` message `message`; the `Ready` transition it comes with is
/// not announced a second time. The same artifact again (a recovery) is left to the `Ready`
/// transition (`Succeeded`), as Flux's.
pub(crate) async fn announce_new_artifact<R: Reconciler>(
    cx: &StepContext<R>,
    artifact: &Artifact,
    message: &str,
) where
    R::Object: capstan_api::FluxKind,
{
    let old = capstan_api::FluxKind::artifact(cx.object.as_ref());
    if old.is_some_and(|old| old.digest == artifact.digest) {
        return;
    }
    cx.publish_event(EventType::Normal, NEW_ARTIFACT, message, "Reconcile")
        .await;
    cx.mark_announced(R::Object::READY_REASON, message);
}

/// The reason of a source's new-artifact Event (Flux's).
pub const NEW_ARTIFACT: &str = "NewArtifact";

/// Reports `artifact` as stored — `ArtifactInStorage=True` and the `Ready` message `message` — then
/// garbage-collects the object's older artifacts (failures are logged, never fatal).
pub(crate) async fn artifact_stored<R: Reconciler>(
    cx: &mut StepContext<R>,
    storage: &Storage,
    artifact: Artifact,
    message: String,
) {
    cx.set_condition(
        condition::ARTIFACT_IN_STORAGE,
        ConditionStatus::True,
        capstan_api::meta::reason::SUCCEEDED,
        &message,
    );
    cx.set_ready_message(message);
    let storage = storage.clone();
    let collected =
        tokio::task::spawn_blocking(move || storage.garbage_collect(&artifact, DEFAULT_RETENTION))
            .await;
    match collected {
        Ok(Ok(deleted)) if !deleted.is_empty() => {
            tracing::info!(count = deleted.len(), "garbage collected old artifacts");
        }
        Ok(Ok(_)) => {}
        Ok(Err(error)) => tracing::warn!(%error, "garbage collection failed"),
        Err(error) => tracing::warn!(%error, "garbage collection task failed"),
    }
}
