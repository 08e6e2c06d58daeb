//! The Bucket reconciler (`source.toolkit.fluxcd.io/v1`), with Flux source-controller's
//! behaviour.
//!
//! # Expected flow
//! Steps `[fetch, store]`:
//! - `fetch`: reads `spec.secretRef` ([`Credentials::from_secret`] for the
//!   provider), lists the bucket with [`bucket::remote_revision`] (honouring `spec.prefix`, the
//!   root `.sourceignore` and `spec.ignore`). When the revision (`sha256:<index digest>`) equals
//!   `status.artifact.revision`, the artifact file exists and `spec.ignore` is unchanged,
//!   nothing is downloaded. Otherwise the objects are downloaded into a temporary directory
//!   and packed into `bucket/<namespace>/<name>/<revision hex>.tar.gz`. `spec.timeout` bounds
//!   each remote operation.
//! - `store`: records `status.artifact` and `status.url`, sets
//!   `ArtifactInStorage=True` and garbage-collects older artifacts (2 are kept).
//!
//! On deletion every stored artifact of the object is removed.
//!
//! Not supported yet, and refused with `Stalled=True` (reason `FeatureGateDisabled`) rather
//! than ignored: `spec.provider: gcp`, `spec.sts`, `spec.certSecretRef`,
//! `spec.proxySecretRef`, `spec.serviceAccountName`.
//!
//! # Errors
//! Provider failures set `FetchFailed=True` (`BucketOperationFailed`, or
//! `AuthenticationFailed` for an unusable secret) and `Ready=False` with the same message, and
//! are retried with backoff; an invalid spec or ignore pattern needs a spec change (stalled).

use std::collections::BTreeMap;

use capstan_api::Bucket;
use capstan_api::meta::Artifact;
use capstan_api::source::v1::{BucketSpec, BucketStatus, CloudProvider, condition, reason};
use capstan_source::bucket::{self, Credentials, FetchOptions};
use capstan_source::redact::error_chain;
use capstan_source::storage::{Storage, revision_file_name};
use k8s_openapi::api::core::v1::Secret;

use crate::error::{ErrorClass, ReconcileError, SecretError};
use crate::runtime::{ConditionStatus, Step, StepContext, StepFuture, StepOutcome};
use crate::sources::fetch_failed;

/// The kind name used in storage paths and metrics.
pub const KIND: &str = "Bucket";

crate::sources::source_resource!(Bucket, BucketStatus);

/// The Bucket reconciler: where artifacts are stored.
#[derive(Debug)]
pub struct BucketReconciler {
    storage: Storage,
    steps: [Step<Self>; 2],
}

impl BucketReconciler {
    /// A reconciler storing artifacts in `storage`.
    pub fn new(storage: Storage) -> Self {
        Self {
            storage,
            steps: crate::sources::source_steps!["fetch" => fetch_step, "store" => store_step],
        }
    }
}

/// Data handed between the steps of one reconcile.
#[derive(Debug, Default)]
pub struct BucketState {
    /// The freshly stored artifact.
    artifact: Option<Artifact>,
}

crate::sources::source_reconciler!(
    BucketReconciler,
    Bucket,
    BucketState,
    KIND,
    // A failure is reported for the generation it happened at (see `Reconciler::OBSERVE_FAILURES`).
    const OBSERVE_FAILURES: bool = true;
);

/// Spec fields this reconciler does not implement yet: refused (stalled) rather than ignored.
fn unsupported_fields(spec: &BucketSpec) -> Vec<&'static str> {
    let mut fields = Vec::new();
    if spec.provider == Some(CloudProvider::Gcp) {
        fields.push("spec.provider");
    }
    if spec.sts.is_some() {
        fields.push("spec.sts");
    }
    if spec.cert_secret_ref.is_some() {
        fields.push("spec.certSecretRef");
    }
    if spec.proxy_secret_ref.is_some() {
        fields.push("spec.proxySecretRef");
    }
    if spec.service_account_name.is_some() {
        fields.push("spec.serviceAccountName");
    }
    fields
}

/// How a bucket failure is handled: a spec or secret that cannot work needs a change.
fn classify(error: &capstan_source::Error) -> ErrorClass {
    match error {
        capstan_source::Error::InvalidBucket { .. }
        | capstan_source::Error::BucketCredentials { .. }
        | capstan_source::Error::IgnorePattern { .. } => ErrorClass::Stalled,
        _ => ErrorClass::Transient,
    }
}

async fn read_credentials(cx: &StepContext<BucketReconciler>) -> Result<Credentials, SecretError> {
    let Some(secret_ref) = cx.object.spec.secret_ref.as_ref() else {
        return Ok(Credentials::Anonymous);
    };
    let name = format!("{}/{}", cx.namespace(), secret_ref.name);
    let secret = cx
        .api::<Secret>()
        .get(&secret_ref.name)
        .await
        .map_err(|source| SecretError::Get {
            secret: name.clone(),
            source,
        })?;
    let data: BTreeMap<String, Vec<u8>> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| (key, value.0))
        .collect();
    Credentials::from_secret(cx.object.provider(), &data).map_err(|source| SecretError::Invalid {
        secret: name,
        source: Box::new(source),
    })
}

/// Lists the bucket and, when the stored artifact is outdated, downloads and packs it.
///
/// Sets `FetchFailed=True` for provider failures and `StorageOperationFailed=True` for
/// storage failures, and removes them on success.
fn fetch_step(cx: &mut StepContext<BucketReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        let unsupported = unsupported_fields(&cx.object.spec);
        if !unsupported.is_empty() {
            return Err(ReconcileError::stalled(
                capstan_api::meta::reason::FEATURE_GATE_DISABLED,
                format!(
                    "{} not supported by this controller yet",
                    unsupported.join(", ")
                ),
            ));
        }
        let (credentials, options) = fetch_setup(cx).await?;
        let spec = cx.object.spec.clone();
        let revision = match bucket::remote_revision(&spec, &credentials, &options).await {
            Ok(revision) => revision,
            Err(error) => {
                let class = classify(&error);
                return Err(fetch_failed(
                    cx,
                    class,
                    reason::BUCKET_OPERATION_FAILED,
                    format!(
                        "failed to list objects of bucket '{}': {}",
                        spec.bucket_name,
                        error_chain(&error)
                    ),
                )
                .with_source(error));
            }
        };
        let storage = cx.reconciler.storage().clone();
        let up_to_date = cx
            .status
            .artifact
            .as_ref()
            .is_some_and(|artifact| artifact.revision == revision && storage.exists(artifact))
            && cx.status.observed_ignore == spec.ignore;
        if up_to_date {
            tracing::debug!(%revision, "artifact up to date, skipping download");
            cx.remove_condition(condition::FETCH_FAILED);
            return Ok(StepOutcome::next());
        }
        let dir = capstan_source::temp::dir("bucket").map_err(|e| {
            ReconcileError::transient(
                reason::DIR_CREATION_FAILED,
                format!("cannot create a temporary directory: {}", error_chain(&e)),
            )
            .with_source(e)
        })?;
        let target = dir.path().join("objects");
        let fetched = match bucket::fetch(&spec, &credentials, &target, &options).await {
            Ok(fetched) => fetched,
            Err(error) => {
                let class = classify(&error);
                return Err(fetch_failed(
                    cx,
                    class,
                    reason::BUCKET_OPERATION_FAILED,
                    format!(
                        "failed to download objects of bucket '{}': {}",
                        spec.bucket_name,
                        error_chain(&error)
                    ),
                )
                .with_source(error));
            }
        };
        cx.remove_condition(condition::FETCH_FAILED);

        pack(cx, storage, dir, &target, &fetched.revision).await
    })
}

/// Reads the credentials (`spec.secretRef`) and the options every remote operation uses:
/// `spec.timeout` and the limits the artifact will be packed with.
async fn fetch_setup(
    cx: &mut StepContext<BucketReconciler>,
) -> Result<(Credentials, FetchOptions), ReconcileError> {
    let credentials = match read_credentials(cx).await {
        Ok(credentials) => credentials,
        Err(error) => return Err(crate::sources::authentication_failed(cx, error)),
    };
    let timeout = cx
        .object
        .timeout()
        .map_err(|e| ReconcileError::from_error(ErrorClass::Stalled, "InvalidTimeout", e))?;
    // Bounded by the limits the artifact will be packed with.
    let options = FetchOptions {
        timeout: Some(timeout),
        limits: *cx.reconciler.storage().limits(),
        ..FetchOptions::default()
    };
    Ok((credentials, options))
}

/// Packs the objects downloaded to `target` (in `dir`, removed afterwards) into a new
/// artifact for `revision`, kept in `cx.state` for the store step. Sets
/// `StorageOperationFailed=True` on failure and removes it on success.
async fn pack(
    cx: &mut StepContext<BucketReconciler>,
    storage: Storage,
    dir: tempfile::TempDir,
    target: &std::path::Path,
    revision: &str,
) -> Result<StepOutcome, ReconcileError> {
    let target = target.to_owned();
    let mut artifact = storage.new_artifact(
        KIND,
        &cx.namespace(),
        &cx.name(),
        revision,
        &revision_file_name(revision, "tar.gz"),
    );
    // Objects were filtered while listing (prefix, `.sourceignore`, `spec.ignore`).
    let result = tokio::task::spawn_blocking(move || {
        let archived = storage.archive(&mut artifact, &target, None);
        drop(dir);
        archived.map(|()| artifact)
    })
    .await;
    match result {
        Ok(Ok(artifact)) => {
            cx.remove_condition(condition::STORAGE_OPERATION_FAILED);
            cx.state.artifact = Some(artifact);
            Ok(StepOutcome::next())
        }
        Ok(Err(error)) => {
            let message = format!("failed to package artifact: {}", error_chain(&error));
            cx.set_condition(
                condition::STORAGE_OPERATION_FAILED,
                ConditionStatus::True,
                reason::ARCHIVE_OPERATION_FAILED,
                &message,
            );
            Err(
                ReconcileError::transient(reason::ARCHIVE_OPERATION_FAILED, message)
                    .with_source(error),
            )
        }
        Err(error) => Err(ReconcileError::transient(
            reason::ARCHIVE_OPERATION_FAILED,
            "packaging task failed",
        )
        .with_source(error)),
    }
}

/// Records the artifact in `status.artifact` and `status.url`, sets `ArtifactInStorage=True`
/// and the `Ready` message, and garbage-collects older artifacts (failures are logged, not
/// fatal).
fn store_step(cx: &mut StepContext<BucketReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        if let Some(artifact) = cx.state.artifact.take() {
            cx.status.url = Some(artifact.url.clone());
            cx.status.artifact = Some(artifact);
            cx.status.observed_ignore.clone_from(&cx.object.spec.ignore);
        }
        let Some(artifact) = cx.status.artifact.clone() else {
            return Ok(StepOutcome::next());
        };
        let message = format!("stored artifact with revision '{}'", artifact.revision);
        let storage = cx.reconciler.storage().clone();
        crate::sources::announce_new_artifact(cx, &artifact, &message).await;
        crate::sources::artifact_stored(cx, &storage, artifact, message).await;
        Ok(StepOutcome::next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: serde_json::Value) -> BucketSpec {
        let mut value = serde_json::json!({
            "bucketName": "flux", "endpoint": "127.0.0.1:9000", "interval": "1m"
        });
        let serde_json::Value::Object(extra) = extra else {
            panic!("extra fields must be an object");
        };
        value.as_object_mut().unwrap().extend(extra);
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn refuses_fields_not_implemented_yet() {
        assert!(unsupported_fields(&spec(serde_json::json!({"provider": "azure"}))).is_empty());
        assert!(unsupported_fields(&spec(serde_json::json!({"provider": "aws"}))).is_empty());
        assert_eq!(
            unsupported_fields(&spec(serde_json::json!({
                "provider": "gcp",
                "certSecretRef": {"name": "ca"},
                "serviceAccountName": "sa",
            }))),
            [
                "spec.provider",
                "spec.certSecretRef",
                "spec.serviceAccountName"
            ]
        );
    }

    #[test]
    fn unusable_specs_and_secrets_need_a_change() {
        let credentials = capstan_source::Error::BucketCredentials {
            reason: "missing".into(),
        };
        assert_eq!(classify(&credentials), ErrorClass::Stalled);
        let invalid = capstan_source::Error::InvalidBucket {
            reason: "bad endpoint".into(),
        };
        assert_eq!(classify(&invalid), ErrorClass::Stalled);
        let io = capstan_source::Error::Io {
            action: "read",
            path: "/x".into(),
            source: std::io::Error::other("boom"),
        };
        assert_eq!(classify(&io), ErrorClass::Transient);
    }
}
