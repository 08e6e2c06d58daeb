//! The GitRepository reconciler (`source.toolkit.fluxcd.io/v1`), with Flux source-controller's
//! behaviour.
//!
//! # Expected flow
//! Steps `[fetch, package, store]`:
//! - [`fetch`](fetch_step): reads `spec.secretRef`, resolves `spec.ref` on the remote and looks
//!   up the artifacts of the GitRepositories named in `spec.include` (same namespace); when the
//!   revision equals `status.artifact.revision`, the artifact file exists, and `spec.ignore`,
//!   `spec.include` and the included artifacts (revision and digest) are unchanged, nothing is
//!   downloaded. Otherwise the commit is checked out into a temporary directory.
//!   `spec.timeout` bounds both Git operations; when it fires, the blocking Git work is
//!   interrupted too (see [`capstan_source::git::FetchOptions`]).
//! - [`package`](package_step): copies each include's `fromPath` (its artifact's root by
//!   default) to `toPath` (the included repository's name by default) in the checkout
//!   ([`capstan_source::git::copy_includes`]), then
//!   packs it into `gitrepository/<namespace>/<name>/<commit>.tar.gz`, excluding what
//!   `.sourceignore` files and `spec.ignore` (or Flux's default set) exclude.
//! - [`store`](store_step): records `status.artifact`, `status.includedArtifacts` and
//!   `status.observedInclude`, sets `ArtifactInStorage=True` and garbage-collects older
//!   artifacts (2 are kept).
//!
//! Included repositories are not watched: a new artifact of an included repository is picked
//! up by the including repository's next reconcile (its `spec.interval`, or a
//! `reconcile.fluxcd.io/requestedAt` request), which compares the included digests with
//! `status.includedArtifacts` and packs a new artifact (same revision, new digest).
//!
//! On deletion every stored artifact of the object is removed.
//!
//! Not supported yet, and refused with `Stalled=True` (reason `FeatureGateDisabled`) rather
//! than ignored: `spec.provider` other than `generic`, `spec.verify` (commit signature
//! verification), `spec.proxySecretRef`, `spec.recurseSubmodules`, `spec.sparseCheckout`.
//!
//! # Errors
//! Git failures set `FetchFailed=True` (`GitOperationFailed`, or `AuthenticationFailed` for an
//! unusable secret) and `Ready=False` with the same message, and are retried with backoff; an
//! invalid reference or ignore pattern needs a spec change (stalled). An include that does not
//! exist or has no artifact yet sets `IncludeUnavailable=True` (Flux's reasons `NotFound`,
//! `NoArtifact`) and `Ready=False` with the same reason and message, and is retried after 30s
//! (Flux's dependency requeue; the interval when shorter), with `Reconciling=True`. A failed copy
//! sets `StorageOperationFailed=True` (`CopyFailure`) and is retried with backoff; an include path
//! leaving the artifact (`..`, absolute) or a self-include stalls with `StorageOperationFailed`
//! reason `IllegalPath`. Messages carry the whole cause chain (URLs without credentials).

use std::path::Path;
use std::time::Duration;

use capstan_api::GitRepository;

use capstan_api::meta::Artifact;
use capstan_api::source::v1::{
    GitProvider, GitRepositoryInclude, GitRepositorySpec, GitRepositoryStatus, condition, reason,
};
use capstan_source::artifact::IgnoreFilter;
use capstan_source::git::{self, FetchOptions, FetchResult, GitAuth, GitReference};
use capstan_source::redact::error_chain;
use capstan_source::storage::{Storage, revision_file_name};
use k8s_openapi::api::core::v1::Secret;

use crate::error::{ErrorClass, ReconcileError, SecretError};
use crate::runtime::{ConditionStatus, Step, StepContext, StepFuture, StepOutcome};
use crate::sources::fetch_failed;

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
            steps: crate::sources::source_steps!["fetch" => fetch_step, "package" => package_step, "store" => store_step],
        }
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
    /// The includes with the artifacts they resolved to, in `spec.include` order.
    includes: Vec<(GitRepositoryInclude, Artifact)>,
}

crate::sources::source_reconciler!(
    GitRepositoryReconciler,
    GitRepository,
    GitState,
    KIND,
    // A failure is reported for the generation it happened at (see `Reconciler::OBSERVE_FAILURES`).
    const OBSERVE_FAILURES: bool = true;
);

/// Spec fields this reconciler does not implement yet: refused (stalled) rather than ignored.
fn unsupported_fields(spec: &GitRepositorySpec) -> Vec<&'static str> {
    let mut fields = Vec::new();
    if spec.provider.is_some_and(|p| p != GitProvider::Generic) {
        fields.push("spec.provider");
    }
    if spec.verify.is_some() {
        fields.push("spec.verify (commit signature verification)");
    }
    if spec.proxy_secret_ref.is_some() {
        fields.push("spec.proxySecretRef");
    }
    if spec.recurse_submodules == Some(true) {
        fields.push("spec.recurseSubmodules");
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
    let name = format!("{}/{}", cx.namespace(), secret_ref.name);
    let failed = |error| {
        ReconcileError::from_error(ErrorClass::Transient, reason::AUTHENTICATION_FAILED, error)
    };
    let secret = cx
        .api::<Secret>()
        .get(&secret_ref.name)
        .await
        .map_err(|source| {
            failed(SecretError::Get {
                secret: name.clone(),
                source,
            })
        })?;
    let data = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| (key, value.0))
        .collect();
    GitAuth::from_secret(&data).map_err(|source| {
        failed(SecretError::Invalid {
            secret: name,
            source: Box::new(source),
        })
    })
}

/// Flux's `--requeue-dependency` default: how long to wait for an include to become available.
const REQUEUE_DEPENDENCY: Duration = Duration::from_secs(30);

/// An include failure: condition `type_` (`IncludeUnavailable` or `StorageOperationFailed`)
/// `=True` with `reason`, and an error of `class` with the same reason for `Ready`.
fn include_failed(
    cx: &mut StepContext<GitRepositoryReconciler>,
    type_: &str,
    class: ErrorClass,
    reason: &str,
    message: String,
) -> ReconcileError {
    cx.set_condition(type_, ConditionStatus::True, reason, &message);
    ReconcileError::new(class, reason, message)
}

/// An include that does not exist or has no artifact yet: `IncludeUnavailable=True`, retried
/// after 30s (Flux's dependency requeue), or after the interval when it is shorter.
fn include_unavailable(
    cx: &mut StepContext<GitRepositoryReconciler>,
    reason: &str,
    message: String,
) -> ReconcileError {
    let delay = cx.object.interval().map_or(REQUEUE_DEPENDENCY, |interval| {
        interval.min(REQUEUE_DEPENDENCY)
    });
    include_failed(
        cx,
        condition::INCLUDE_UNAVAILABLE,
        ErrorClass::Waiting(delay),
        reason,
        message,
    )
}

/// Refuses include paths leaving the artifact and self-includes: they need a spec change.
fn validate_includes(cx: &mut StepContext<GitRepositoryReconciler>) -> Result<(), ReconcileError> {
    let own_name = cx.name();
    for include in cx.object.spec.include.clone() {
        let name = &include.repository.name;
        let paths = git::include_path("fromPath", include.from_path.as_deref().unwrap_or(""))
            .and_then(|_| git::include_path("toPath", include.to_path()));
        if let Err(error) = paths {
            let message = format!(
                "path calculation for include '{name}' failed: {}",
                error_chain(&error)
            );
            return Err(include_failed(
                cx,
                condition::STORAGE_OPERATION_FAILED,
                ErrorClass::Stalled,
                "IllegalPath",
                message,
            )
            .with_source(error));
        }
        if *name == own_name {
            return Err(include_failed(
                cx,
                condition::STORAGE_OPERATION_FAILED,
                ErrorClass::Stalled,
                "IllegalPath",
                format!("include '{name}' refers to this GitRepository itself"),
            ));
        }
    }
    Ok(())
}

/// Looks up the artifact of every `spec.include`, in order.
async fn resolve_includes(
    cx: &mut StepContext<GitRepositoryReconciler>,
) -> Result<Vec<(GitRepositoryInclude, Artifact)>, ReconcileError> {
    let includes = cx.object.spec.include.clone();
    let api = cx.api::<GitRepository>();
    let storage = cx.reconciler.storage().clone();
    let mut resolved = Vec::with_capacity(includes.len());
    for include in includes {
        let name = include.repository.name.clone();
        let object = match api.get_opt(&name).await {
            Ok(Some(object)) => object,
            Ok(None) => {
                return Err(include_unavailable(
                    cx,
                    "NotFound",
                    format!(
                        "could not get resource for include '{name}': \
                         gitrepositories.source.toolkit.fluxcd.io \"{name}\" not found"
                    ),
                ));
            }
            Err(error) => {
                let message = format!(
                    "could not get resource for include '{name}': {}",
                    error_chain(&error)
                );
                return Err(include_unavailable(cx, "NotFound", message).with_source(error));
            }
        };
        match object.status.and_then(|status| status.artifact) {
            Some(artifact) if storage.exists(&artifact) => resolved.push((include, artifact)),
            _ => {
                return Err(include_unavailable(
                    cx,
                    "NoArtifact",
                    format!("no artifact available for include '{name}'"),
                ));
            }
        }
    }
    cx.remove_condition(condition::INCLUDE_UNAVAILABLE);
    Ok(resolved)
}

/// Whether the artifact was built from the same includes (spec and artifact digests).
fn includes_unchanged(
    spec: &[GitRepositoryInclude],
    status: &GitRepositoryStatus,
    resolved: &[(GitRepositoryInclude, Artifact)],
) -> bool {
    status.observed_include == spec
        && status.included_artifacts.len() == resolved.len()
        && status
            .included_artifacts
            .iter()
            .zip(resolved)
            .all(|(seen, (_, now))| seen.digest == now.digest && seen.revision == now.revision)
}

async fn with_timeout<T>(
    timeout: Duration,
    future: impl Future<Output = capstan_source::Result<T>>,
) -> Result<capstan_source::Result<T>, Duration> {
    tokio::time::timeout(timeout, future)
        .await
        .map_err(|_| timeout)
}

/// Runs the Git operation `future` within `timeout`. A failure or a timeout sets
/// `FetchFailed=True`; `operation` names what timed out (followed by the redacted `url`).
async fn run_git<T>(
    cx: &mut StepContext<GitRepositoryReconciler>,
    timeout: Duration,
    future: impl Future<Output = capstan_source::Result<T>>,
    operation: &str,
    url: &str,
) -> Result<T, ReconcileError> {
    match with_timeout(timeout, future).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => {
            let class = classify(&error);
            Err(fetch_failed(
                cx,
                class,
                reason::GIT_OPERATION_FAILED,
                format!(
                    "failed to checkout and determine revision: {}",
                    error_chain(&error)
                ),
            )
            .with_source(error))
        }
        Err(timeout) => Err(fetch_failed(
            cx,
            ErrorClass::Transient,
            reason::GIT_OPERATION_FAILED,
            format!(
                "failed to {operation} {}: timed out after {timeout:?}",
                capstan_source::redact::url(url)
            ),
        )),
    }
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
        validate_includes(cx)?;
        let auth = read_auth(cx).await.inspect_err(|error| {
            cx.set_condition(
                condition::FETCH_FAILED,
                ConditionStatus::True,
                &error.reason,
                &error.message,
            );
        })?;
        let url = cx.object.spec.url.clone();
        let reference = reference_of(&cx.object);
        let timeout = cx
            .object
            .timeout()
            .map_err(|e| ReconcileError::from_error(ErrorClass::Stalled, "InvalidTimeout", e))?;
        // A fresh interrupt flag per operation: dropping the future on timeout sets it. The
        // fetch is bounded by the limits the artifact will be packed with.
        let limits = *cx.reconciler.storage().limits();
        let options = || FetchOptions {
            timeout: Some(timeout),
            limits,
            ..FetchOptions::default()
        };
        let revision = run_git(
            cx,
            timeout,
            git::remote_revision(&url, &reference, &auth, &options()),
            "determine revision of",
            &url,
        )
        .await?;
        let includes = resolve_includes(cx).await?;
        let storage = cx.reconciler.storage().clone();
        let up_to_date = cx
            .status
            .artifact
            .as_ref()
            .is_some_and(|artifact| artifact.revision == revision && storage.exists(artifact))
            && cx.status.observed_ignore == cx.object.spec.ignore
            && includes_unchanged(&cx.object.spec.include, &cx.status, &includes);
        cx.state.includes = includes;
        if up_to_date {
            tracing::debug!(%revision, "artifact up to date, skipping fetch");
            cx.remove_condition(condition::FETCH_FAILED);
            cx.state.revision = Some(revision);
            return Ok(StepOutcome::next());
        }
        let dir = capstan_source::temp::dir("gitrepository").map_err(|e| {
            ReconcileError::transient(
                reason::DIR_CREATION_FAILED,
                format!("cannot create a temporary directory: {}", error_chain(&e)),
            )
            .with_source(e)
        })?;
        let checkout = dir.path().join("checkout");
        let fetched = run_git(
            cx,
            timeout,
            git::fetch(&url, &reference, &auth, &checkout, &options()),
            "fetch",
            &url,
        )
        .await?;
        cx.remove_condition(condition::FETCH_FAILED);
        cx.state.revision = Some(fetched.revision.clone());
        cx.state.checkout = Some((dir, fetched));
        Ok(StepOutcome::next())
    })
}

/// Why packaging failed.
enum PackageError {
    /// Copying an include failed (the error names the include and paths).
    Include(capstan_source::Error),
    /// Ignore rules or the archive failed.
    Archive(ErrorClass, capstan_source::Error),
}

/// Copies the includes into the checkout and packs it into the storage, honouring
/// `.sourceignore` and `spec.ignore`.
///
/// Sets `StorageOperationFailed=True` on failure and removes it on success; does nothing when
/// the stored artifact is up to date.
fn package_step(cx: &mut StepContext<GitRepositoryReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        let Some((dir, fetched)) = cx.state.checkout.as_ref() else {
            return Ok(StepOutcome::next());
        };
        let scratch = dir.path().to_owned();
        let checkout = dir.path().join("checkout");
        let storage = cx.reconciler.storage().clone();
        let includes = cx.state.includes.clone();
        let mut artifact = storage.new_artifact(
            KIND,
            &cx.namespace(),
            &cx.name(),
            &fetched.revision,
            &revision_file_name(&fetched.commit, "tar.gz"),
        );
        let ignore = cx.object.spec.ignore.clone();
        let result = tokio::task::spawn_blocking(move || {
            let includes: Vec<git::Include<'_>> = includes
                .iter()
                .map(|(include, artifact)| git::Include {
                    name: &include.repository.name,
                    artifact_path: &artifact.path,
                    from_path: include.from_path.as_deref(),
                    to_path: include.to_path(),
                })
                .collect();
            git::copy_includes(&storage, &includes, &scratch, &checkout)
                .map_err(PackageError::Include)?;
            let filter = IgnoreFilter::for_source(&checkout, ignore.as_deref())
                .map_err(|e| PackageError::Archive(ErrorClass::Stalled, e))?;
            storage
                .archive(&mut artifact, Path::new(&checkout), Some(&filter))
                .map_err(|e| PackageError::Archive(ErrorClass::Transient, e))?;
            Ok::<_, PackageError>(artifact)
        })
        .await;
        match result {
            Ok(Ok(artifact)) => {
                cx.remove_condition(condition::STORAGE_OPERATION_FAILED);
                cx.state.artifact = Some(artifact);
                Ok(StepOutcome::next())
            }
            Ok(Err(PackageError::Include(error))) => Err(include_failed(
                cx,
                condition::STORAGE_OPERATION_FAILED,
                ErrorClass::Transient,
                "CopyFailure",
                error_chain(&error),
            )
            .with_source(error)),
            Ok(Err(PackageError::Archive(class, error))) => {
                let message = format!("failed to package artifact: {}", error_chain(&error));
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
            cx.status
                .observed_include
                .clone_from(&cx.object.spec.include);
            cx.status.included_artifacts = cx
                .state
                .includes
                .iter()
                .map(|(_, artifact)| artifact.clone())
                .collect();
        }
        let Some(artifact) = cx.status.artifact.clone() else {
            return Ok(StepOutcome::next());
        };
        let message = format!("stored artifact for revision '{}'", artifact.revision);
        let storage = cx.reconciler.storage().clone();
        crate::sources::announce_new_artifact(cx, &artifact, &message).await;
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
                "spec.verify (commit signature verification)",
                "spec.sparseCheckout"
            ]
        );
    }

    #[test]
    fn include_changes_are_detected_by_digest_and_spec() {
        let include: GitRepositoryInclude =
            serde_json::from_value(serde_json::json!({"repository": {"name": "lib"}})).unwrap();
        let artifact = |digest: &str| -> Artifact {
            serde_json::from_value(serde_json::json!({
                "path": "gitrepository/default/lib/1.tar.gz",
                "url": "http://storage/gitrepository/default/lib/1.tar.gz",
                "revision": "main@sha1:1",
                "digest": digest,
                "lastUpdateTime": "2026-11-22T00:00:00Z",
            }))
            .unwrap()
        };
        let status = GitRepositoryStatus {
            included_artifacts: vec![artifact("sha256:a")],
            observed_include: vec![include.clone()],
            ..GitRepositoryStatus::default()
        };
        let spec = [include.clone()];
        assert!(includes_unchanged(
            &spec,
            &status,
            &[(include.clone(), artifact("sha256:a"))]
        ));
        assert!(!includes_unchanged(
            &spec,
            &status,
            &[(include.clone(), artifact("sha256:b"))]
        ));
        assert!(!includes_unchanged(&[], &status, &[]));
        let moved = GitRepositoryInclude {
            to_path: Some("vendor".to_owned()),
            ..include.clone()
        };
        assert!(!includes_unchanged(
            std::slice::from_ref(&moved),
            &status,
            &[(moved.clone(), artifact("sha256:a"))]
        ));
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
