//! What the source reconcilers (GitRepository, OCIRepository, Bucket) share: their `FluxResource`
//! shape and the removal of stored artifacts on deletion.

use std::fmt::Debug;
use std::time::Duration;

use capstan_api::meta::{Artifact, Condition, ReconcileRequestStatus};
use capstan_api::source::v1::condition;
use capstan_api::{FluxKind, FluxStatus};
use capstan_source::storage::{DEFAULT_RETENTION, Storage};
use k8s_openapi::NamespaceResourceScope;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ReconcileError;
use crate::runtime::{ConditionStatus, FluxResource, Reconciler, StepContext};
use capstan_api::source::v1::reason;

/// A source kind the runtime reconciles. Its [`FluxKind`] facts and status accessors (from the API
/// type) are the whole [`FluxResource`] shape; only `spec.interval` is asked here, since not
/// every kind has one.
pub(crate) trait SourceKind:
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
    /// `spec.interval`.
    fn interval(&self) -> Result<Duration, capstan_api::Error>;
}

impl<T: SourceKind> FluxResource for T {
    type Status = <T as FluxKind>::Status;

    fn status(&self) -> Option<&Self::Status> {
        FluxKind::status(self)
    }
    fn suspended(&self) -> bool {
        FluxKind::suspended(self)
    }
    fn interval(&self) -> Result<Duration, capstan_api::Error> {
        SourceKind::interval(self)
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

/// Makes a source kind a [`SourceKind`] (and so a [`FluxResource`]) through its `interval()`
/// accessor; the status type is named for readers and checked to be the kind's.
macro_rules! source_resource {
    ($kind:ty, $status:ty) => {
        impl $crate::sources::SourceKind for $kind {
            fn interval(&self) -> Result<std::time::Duration, capstan_api::Error> {
                const _: fn(&$kind) -> Option<&$status> = <$kind as capstan_api::FluxKind>::status;
                <$kind>::interval(self)
            }
        }
    };
}
pub(crate) use source_resource;

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
