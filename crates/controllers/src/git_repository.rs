//! The GitRepository reconciler (`source.toolkit.fluxcd.io/v1`), with Flux source-controller's
//! behaviour.
//!
//! # Expected flow
//! Steps `[fetch, package, store]`:
//! - [`fetch`](fetch_step): reads `spec.secretRef`, resolves `spec.ref` on the remote; when the
//!   revision equals `status.artifact.revision`, the artifact file exists and `spec.ignore` is
//!   unchanged, nothing is downloaded. Otherwise the commit is checked out into a temporary
//!   directory. `spec.timeout` bounds both Git operations.
//! - [`package`](package_step): packs the checkout into
//!   `gitrepository/<namespace>/<name>/<commit>.tar.gz`, excluding what `.sourceignore` files
//!   and `spec.ignore` (or Flux's default set) exclude.
//! - [`store`](store_step): records `status.artifact`, sets `ArtifactInStorage=True` and
//!   garbage-collects older artifacts (2 are kept).
//!
//! On deletion every stored artifact of the object is removed.
//!
//! Not supported yet, and refused with `Stalled=True` (reason `FeatureGateDisabled`) rather
//! than ignored: `spec.provider` other than `generic`, `spec.verify`, `spec.proxySecretRef`,
//! `spec.recurseSubmodules`, `spec.include`, `spec.sparseCheckout`.
//!
//! # Errors
//! Git failures set `FetchFailed=True` (`GitOperationFailed`, or `AuthenticationFailed` for an
//! unusable secret) and `Ready=False` with the same message, and are retried with backoff; an
//! invalid reference or ignore pattern needs a spec change (stalled).

use std::path::Path;
use std::time::Duration;

use capstan_api::GitRepository;

use capstan_api::source::v1::{
    GitProvider, GitRepositorySpec, GitRepositoryStatus, condition, reason,
};
use capstan_source::artifact::IgnoreFilter;
use capstan_source::git::{self, FetchOptions, FetchResult, GitAuth, GitReference};
use capstan_source::storage::{Storage, revision_file_name};
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use tokio_util::sync::CancellationToken;

use crate::error::{ErrorClass, ReconcileError};
use crate::runtime::{
    self, ConditionStatus, Health, Metrics, Reconciler, RuntimeConfig, Step, StepContext,
    StepFuture, StepOutcome,
};

/// The kind name used in storage paths and metrics.
pub const KIND: &str = "GitRepository";

crate::sources::source_resource!(GitRepository, GitRepositoryStatus);

/// The GitRepository reconciler: where artifacts are stored.
#[derive(Debug)]
pub struct GitRepositoryReconciler {
    storage: Storage,
    steps: [Step<Self>; 3],
}

impl GitRepositoryReconciler {
    /// A reconciler storing artifacts in `storage`.
    pub fn new(storage: Storage) -> Self {
        Self {
            storage,
            steps: [
                Step {
                    name: "fetch",
                    run: fetch_step,
                },
                Step {
                    name: "package",
                    run: package_step,
                },
                Step {
                    name: "store",
                    run: store_step,
                },
            ],
        }
    }

    /// The artifact storage.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }
}

/// Data handed between the steps of one reconcile.
#[derive(Debug, Default)]
pub struct GitState {
    /// The revision on the remote.
    revision: Option<String>,
    /// The checkout, when the stored artifact is outdated.
    checkout: Option<(tempfile::TempDir, FetchResult)>,
    /// The freshly packed artifact.
    artifact: Option<capstan_api::meta::Artifact>,
}

impl Reconciler for GitRepositoryReconciler {
    type Object = GitRepository;
    type State = GitState;
    const CONTROLLER_NAME: &'static str = "source-controller";

    fn steps(&self) -> &[Step<Self>] {
        &self.steps
    }

    async fn cleanup(&self, object: &GitRepository) -> Result<(), ReconcileError> {
        crate::sources::remove_artifacts(&self.storage, KIND, object).await
    }
}

/// Runs the GitRepository controller until `shutdown` is cancelled.
pub async fn run(
    client: Client,
    storage: Storage,
    metrics: Metrics,
    config: RuntimeConfig,
    health: Health,
    shutdown: CancellationToken,
) {
    runtime::run(
        client,
        GitRepositoryReconciler::new(storage),
        metrics,
        config,
        health,
        shutdown,
    )
    .await;
}

/// Spec fields this reconciler does not implement yet: refused (stalled) rather than ignored.
fn unsupported_fields(spec: &GitRepositorySpec) -> Vec<&'static str> {
    let mut fields = Vec::new();
    if spec.provider.is_some_and(|p| p != GitProvider::Generic) {
        fields.push("spec.provider");
    }
    if spec.verify.is_some() {
        fields.push("spec.verify");
    }
    if spec.proxy_secret_ref.is_some() {
        fields.push("spec.proxySecretRef");
    }
    if spec.recurse_submodules == Some(true) {
        fields.push("spec.recurseSubmodules");
    }
    if !spec.include.is_empty() {
        fields.push("spec.include");
    }
    if !spec.sparse_checkout.is_empty() {
        fields.push("spec.sparseCheckout");
    }
    fields
}

fn reference_of(object: &GitRepository) -> GitReference {
    let reference = object.reference();
    GitReference {
        branch: reference.branch,
        tag: reference.tag,
        semver: reference.semver,
        name: reference.name,
        commit: reference.commit,
    }
}

/// A Git failure: `FetchFailed=True` with `reason`, and an error of `class` for `Ready`.
fn fetch_failed(
    cx: &mut StepContext<GitRepositoryReconciler>,
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

fn classify(error: &capstan_source::Error) -> ErrorClass {
    match error {
        capstan_source::Error::InvalidGitReference { .. }
        | capstan_source::Error::Constraint(_) => ErrorClass::Stalled,
        _ => ErrorClass::Transient,
    }
}

async fn read_auth(cx: &StepContext<GitRepositoryReconciler>) -> Result<GitAuth, ReconcileError> {
    let Some(secret_ref) = cx.object.spec.secret_ref.as_ref() else {
        return Ok(GitAuth::None);
    };
    let secrets = cx.api::<Secret>();
    let secret = secrets.get(&secret_ref.name).await.map_err(|e| {
        ReconcileError::transient(
            reason::AUTHENTICATION_FAILED,
            format!(
                "failed to get secret '{}/{}': {e}",
                cx.namespace(),
                secret_ref.name
            ),
        )
        .with_source(e)
    })?;
    let data = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| (key, value.0))
        .collect();
    GitAuth::from_secret(&data).map_err(|e| {
        ReconcileError::transient(
            reason::AUTHENTICATION_FAILED,
            format!(
                "invalid secret '{}/{}': {e}",
                cx.namespace(),
                secret_ref.name
            ),
        )
        .with_source(e)
    })
}

async fn with_timeout<T>(
    timeout: Duration,
    future: impl Future<Output = capstan_source::Result<T>>,
) -> Result<capstan_source::Result<T>, Duration> {
    tokio::time::timeout(timeout, future)
        .await
        .map_err(|_| timeout)
}

/// Resolves the remote revision and checks it out when the stored artifact is outdated.
///
/// Sets `FetchFailed=True` on failure and removes it on success.
fn fetch_step(cx: &mut StepContext<GitRepositoryReconciler>) -> StepFuture<'_> {
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
        let auth = match read_auth(cx).await {
            Ok(auth) => auth,
            Err(error) => {
                let message = error.message.clone();
                cx.set_condition(
                    condition::FETCH_FAILED,
                    ConditionStatus::True,
                    &error.reason,
                    &message,
                );
                return Err(error);
            }
        };
        let url = cx.object.spec.url.clone();
        let reference = reference_of(&cx.object);
        let timeout = cx
            .object
            .timeout()
            .map_err(|e| ReconcileError::stalled("InvalidTimeout", e.to_string()).with_source(e))?;
        let revision = match with_timeout(timeout, git::remote_revision(&url, &reference, &auth))
            .await
        {
            Ok(Ok(revision)) => revision,
            Ok(Err(error)) => {
                let class = classify(&error);
                return Err(fetch_failed(
                    cx,
                    class,
                    reason::GIT_OPERATION_FAILED,
                    format!("failed to checkout and determine revision: {error}"),
                )
                .with_source(error));
            }
            Err(timeout) => {
                return Err(fetch_failed(
                    cx,
                    ErrorClass::Transient,
                    reason::GIT_OPERATION_FAILED,
                    format!("failed to determine revision of {url}: timed out after {timeout:?}"),
                ));
            }
        };
        let storage = cx.reconciler.storage().clone();
        let up_to_date = cx
            .status
            .artifact
            .as_ref()
            .is_some_and(|artifact| artifact.revision == revision && storage.exists(artifact))
            && cx.status.observed_ignore == cx.object.spec.ignore;
        if up_to_date {
            tracing::debug!(%revision, "artifact up to date, skipping fetch");
            cx.remove_condition(condition::FETCH_FAILED);
            cx.state.revision = Some(revision);
            return Ok(StepOutcome::next());
        }
        let dir = tempfile::Builder::new()
            .prefix("capstan-gitrepository-")
            .tempdir()
            .map_err(|e| {
                ReconcileError::transient(
                    reason::DIR_CREATION_FAILED,
                    format!("cannot create a temporary directory: {e}"),
                )
                .with_source(e)
            })?;
        let checkout = dir.path().join("checkout");
        let fetched = match with_timeout(
            timeout,
            git::fetch(&url, &reference, &auth, &checkout, &FetchOptions::default()),
        )
        .await
        {
            Ok(Ok(fetched)) => fetched,
            Ok(Err(error)) => {
                let class = classify(&error);
                return Err(fetch_failed(
                    cx,
                    class,
                    reason::GIT_OPERATION_FAILED,
                    format!("failed to checkout and determine revision: {error}"),
                )
                .with_source(error));
            }
            Err(timeout) => {
                return Err(fetch_failed(
                    cx,
                    ErrorClass::Transient,
                    reason::GIT_OPERATION_FAILED,
                    format!("failed to fetch {url}: timed out after {timeout:?}"),
                ));
            }
        };
        cx.remove_condition(condition::FETCH_FAILED);
        cx.state.revision = Some(fetched.revision.clone());
        cx.state.checkout = Some((dir, fetched));
        Ok(StepOutcome::next())
    })
}

/// Packs the checkout into the storage, honouring `.sourceignore` and `spec.ignore`.
///
/// Sets `StorageOperationFailed=True` on failure and removes it on success; does nothing when
/// the stored artifact is up to date.
fn package_step(cx: &mut StepContext<GitRepositoryReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        let Some((dir, fetched)) = cx.state.checkout.as_ref() else {
            return Ok(StepOutcome::next());
        };
        let checkout = dir.path().join("checkout");
        let storage = cx.reconciler.storage().clone();
        let mut artifact = storage.new_artifact(
            KIND,
            &cx.namespace(),
            &cx.name(),
            &fetched.revision,
            &revision_file_name(&fetched.commit, "tar.gz"),
        );
        let ignore = cx.object.spec.ignore.clone();
        let result = tokio::task::spawn_blocking(move || {
            let filter = IgnoreFilter::for_source(&checkout, ignore.as_deref())
                .map_err(|e| (ErrorClass::Stalled, e))?;
            storage
                .archive(&mut artifact, Path::new(&checkout), Some(&filter))
                .map_err(|e| (ErrorClass::Transient, e))?;
            Ok::<_, (ErrorClass, capstan_source::Error)>(artifact)
        })
        .await;
        match result {
            Ok(Ok(artifact)) => {
                cx.remove_condition(condition::STORAGE_OPERATION_FAILED);
                cx.state.artifact = Some(artifact);
                Ok(StepOutcome::next())
            }
            Ok(Err((class, error))) => {
                let message = format!("failed to package artifact: {error}");
                cx.set_condition(
                    condition::STORAGE_OPERATION_FAILED,
                    ConditionStatus::True,
                    reason::ARCHIVE_OPERATION_FAILED,
                    &message,
                );
                Err(
                    ReconcileError::new(class, reason::ARCHIVE_OPERATION_FAILED, message)
                        .with_source(error),
                )
            }
            Err(error) => Err(ReconcileError::transient(
                reason::ARCHIVE_OPERATION_FAILED,
                "packaging task failed",
            )
            .with_source(error)),
        }
    })
}

/// Records the artifact in `status.artifact`, sets `ArtifactInStorage=True` and the `Ready`
/// message, and garbage-collects older artifacts (failures are logged, not fatal).
fn store_step(cx: &mut StepContext<GitRepositoryReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        if let Some(artifact) = cx.state.artifact.take() {
            cx.status.artifact = Some(artifact);
            cx.status.observed_ignore.clone_from(&cx.object.spec.ignore);
        }
        let Some(artifact) = cx.status.artifact.clone() else {
            return Ok(StepOutcome::next());
        };
        let message = format!("stored artifact for revision '{}'", artifact.revision);
        let storage = cx.reconciler.storage().clone();
        crate::sources::artifact_stored(cx, &storage, artifact, message).await;
        Ok(StepOutcome::next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: serde_json::Value) -> GitRepositorySpec {
        let mut value =
            serde_json::json!({"url": "https://example.invalid/r.git", "interval": "1m"});
        let serde_json::Value::Object(extra) = extra else {
            panic!("extra fields must be an object");
        };
        value.as_object_mut().unwrap().extend(extra);
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn refuses_fields_not_implemented_yet() {
        assert!(unsupported_fields(&spec(serde_json::json!({}))).is_empty());
        assert!(
            unsupported_fields(&spec(
                serde_json::json!({"provider": "generic", "recurseSubmodules": false})
            ))
            .is_empty()
        );
        assert_eq!(
            unsupported_fields(&spec(serde_json::json!({
                "provider": "github",
                "verify": {"secretRef": {"name": "keys"}},
                "include": [{"repository": {"name": "other"}}],
                "sparseCheckout": ["apps"],
            }))),
            [
                "spec.provider",
                "spec.verify",
                "spec.include",
                "spec.sparseCheckout"
            ]
        );
    }

    #[test]
    fn maps_the_effective_reference() {
        let mut object = GitRepository::new("app", spec(serde_json::json!({})));
        assert_eq!(reference_of(&object), GitReference::branch("master"));
        object.spec = spec(serde_json::json!({"ref": {"tag": "v1.0.0", "semver": ">=1"}}));
        let reference = reference_of(&object);
        assert_eq!(reference.tag.as_deref(), Some("v1.0.0"));
        assert_eq!(reference.semver.as_deref(), Some(">=1"));
    }

    #[test]
    fn invalid_references_need_a_spec_change() {
        let invalid = capstan_source::Error::InvalidGitReference {
            reason: "bad".into(),
        };
        assert_eq!(classify(&invalid), ErrorClass::Stalled);
        let missing = capstan_source::Error::GitReferenceNotFound {
            url: "u".into(),
            reference: "branch x".into(),
        };
        assert_eq!(classify(&missing), ErrorClass::Transient);
    }
}
