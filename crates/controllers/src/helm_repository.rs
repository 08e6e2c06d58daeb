//! The HelmRepository reconciler (`source.toolkit.fluxcd.io/v1`), with Flux source-controller's
//! behaviour.
//!
//! # Expected flow
//! `type: default` (HTTP/S), steps `[fetch, store]`:
//! - `fetch`: reads `spec.secretRef` (`username`/`password`) and `spec.certSecretRef`
//!   (`ca.crt`, `tls.crt`/`tls.key`; without it, TLS data in `spec.secretRef` as Flux still
//!   reads it, `caFile`/`certFile`/`keyFile` included), downloads `<url>/index.yaml` within `spec.timeout` and the
//!   storage limits ([`capstan_source::helm::repository`]) and parses it. The revision is
//!   Flux's: `sha256:<hex>` of the index as served. When it equals `status.artifact.revision`
//!   and the file exists, nothing is stored.
//! - `store`: writes the index as Flux stores it (Go's JSON of Helm's `IndexFile`, byte for
//!   byte: [`capstan_source::helm::index::Index::to_json`]) to
//!   `helmrepository/<namespace>/<name>/index-<hex>.yaml`, records `status.artifact`, points
//!   the stable `index.yaml` of that directory at it (`status.url`, as Flux's symlink), sets
//!   `ArtifactInStorage=True` (`stored artifact: revision '<revision>'`) and garbage-collects
//!   older artifacts.
//!
//! `type: oci` is a static object, as in Flux: no artifact (any stored one is removed), no
//! periodic reconcile, `Ready=True` with `Helm repository is ready`; HelmCharts read its URL
//! and credentials when they pull.
//!
//! # Errors
//! An `oci://` URL with `type: default` or an unparsable URL: `Stalled` (`URLInvalid`). An
//! unusable Secret: `FetchFailed=True` (`AuthenticationFailed`). A failed download (refused
//! credentials included): `FetchFailed=True` (`Failed`), message `failed to fetch Helm
//! repository index: <cause naming the URL>`; an index that does not parse: `IndexationFailed`
//! (never an empty repository). Secrets never appear in messages.

use std::collections::BTreeMap;
use std::time::Duration;

use capstan_api::HelmRepository;
use capstan_api::meta::Artifact;
use capstan_api::source::v1::{HelmRepositoryStatus, HelmRepositoryType};
use capstan_api::source::v1::{condition, reason};
use capstan_source::helm::repository::{ClientOptions, FetchedIndex, Repository};
use capstan_source::redact::error_chain;
use capstan_source::storage::Storage;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

use crate::error::{ErrorClass, ReconcileError, SecretError};
use crate::runtime::{ConditionStatus, Step, StepContext, StepFuture, StepOutcome};
use crate::sources::fetch_failed;

/// The kind name used in storage paths and metrics.
pub const KIND: &str = "HelmRepository";

/// The `Ready` message of an OCI HelmRepository (Flux's).
pub const OCI_READY_MESSAGE: &str = "Helm repository is ready";

/// The stable name of the current index in the artifact directory (`status.url`), as Flux's.
pub const INDEX_LINK: &str = "index.yaml";

/// Points the stable name `alias` at `artifact` ([`Storage::symlink`]) and returns its URL, for
/// `status.url`; best effort as in Flux: a failure is logged and `None` keeps the URL as it was.
pub(crate) async fn stable_url(
    storage: &Storage,
    artifact: &Artifact,
    alias: &str,
) -> Option<String> {
    let (storage, artifact, alias) = (storage.clone(), artifact.clone(), alias.to_owned());
    match tokio::task::spawn_blocking(move || storage.symlink(&artifact, &alias)).await {
        Ok(Ok(url)) => Some(url),
        Ok(Err(error)) => {
            tracing::warn!(error = %error_chain(&error), "failed to update status URL symlink");
            None
        }
        Err(error) => {
            tracing::warn!(%error, "failed to update status URL symlink");
            None
        }
    }
}

/// Flux's generic failure reason.
const FAILED: &str = "Failed";

impl crate::runtime::Kind for HelmRepository {
    fn interval(&self) -> Result<Option<Duration>, capstan_api::Error> {
        const _: fn(&HelmRepository) -> Option<&HelmRepositoryStatus> =
            <HelmRepository as capstan_api::FluxKind>::status;
        if self.repository_type() == HelmRepositoryType::Oci {
            return Ok(None);
        }
        HelmRepository::interval(self).map(Some)
    }
}

/// The HelmRepository reconciler: where index artifacts are stored.
#[derive(Debug)]
pub struct HelmRepositoryReconciler {
    storage: Storage,
    steps: [Step<Self>; 2],
}

impl HelmRepositoryReconciler {
    /// A reconciler storing index artifacts in `storage`.
    pub fn new(storage: Storage) -> Self {
        Self {
            storage,
            steps: crate::sources::source_steps!["fetch" => fetch_step, "store" => store_step],
        }
    }
}

/// Data handed between the steps of one reconcile.
#[derive(Debug, Default)]
pub struct HelmRepositoryState {
    fetched: Option<FetchedIndex>,
}

crate::sources::source_reconciler!(
    HelmRepositoryReconciler,
    HelmRepository,
    HelmRepositoryState,
    KIND
);

/// The data of Secret `name` in `namespace`.
pub(crate) async fn secret_data(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<BTreeMap<String, Vec<u8>>, SecretError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api.get(name).await.map_err(|source| SecretError::Get {
        secret: format!("{namespace}/{name}"),
        source,
    })?;
    Ok(secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| (key, value.0))
        .collect())
}

/// The client options of `repository`: its Secrets, `passCredentials`, `spec.timeout` and
/// `limits`.
pub(crate) async fn client_options(
    client: &Client,
    repository: &HelmRepository,
    limits: capstan_source::artifact::Limits,
) -> Result<ClientOptions, SecretError> {
    let namespace = kube::ResourceExt::namespace(repository).unwrap_or_default();
    let spec = &repository.spec;
    let auth = match &spec.secret_ref {
        Some(secret) => Some((
            secret.name.clone(),
            secret_data(client, &namespace, &secret.name).await?,
        )),
        None => None,
    };
    let tls = match &spec.cert_secret_ref {
        Some(secret) => Some((
            secret.name.clone(),
            secret_data(client, &namespace, &secret.name).await?,
        )),
        // Flux's deprecated form: TLS data in the `secretRef` Secret (still honoured).
        None => auth.as_ref().and_then(|(name, data)| {
            let tls = legacy_tls(data)?;
            tracing::warn!(
                secret = %name,
                "TLS data in spec.secretRef is deprecated, use spec.certSecretRef"
            );
            Some((name.clone(), tls))
        }),
    };
    let mut options = ClientOptions::from_secrets(
        auth.as_ref().map(|(_, data)| data),
        tls.as_ref().map(|(_, data)| data),
    )
    .map_err(|source| {
        // Name the Secret whose content is unusable (never its values).
        let name = match &source {
            capstan_source::helm::Error::InvalidCredentials { what, .. }
                if what.starts_with("basic") =>
            {
                auth.as_ref().map(|(n, _)| n.clone())
            }
            _ => tls.as_ref().map(|(n, _)| n.clone()),
        }
        .unwrap_or_default();
        SecretError::Invalid {
            secret: format!("{namespace}/{name}"),
            source: Box::new(source),
        }
    })?;
    options.pass_credentials = spec.pass_credentials.unwrap_or(false);
    options.timeout = repository.timeout().ok();
    options.limits = limits;
    Ok(options)
}

/// The TLS data of a `secretRef` Secret in Flux's deprecated form: `ca.crt`, `tls.crt`,
/// `tls.key` or the older `caFile`, `certFile`, `keyFile`; `None` when it holds none.
fn legacy_tls(data: &BTreeMap<String, Vec<u8>>) -> Option<BTreeMap<String, Vec<u8>>> {
    let mut tls = BTreeMap::new();
    for (key, legacy) in [
        ("ca.crt", "caFile"),
        ("tls.crt", "certFile"),
        ("tls.key", "keyFile"),
    ] {
        if let Some(value) = data.get(key).or_else(|| data.get(legacy)) {
            tls.insert(key.to_owned(), value.clone());
        }
    }
    (!tls.is_empty()).then_some(tls)
}

fn fetch_step(cx: &mut StepContext<HelmRepositoryReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        if cx.object.repository_type() == HelmRepositoryType::Oci {
            return oci_static(cx).await;
        }
        let url = cx.object.spec.url.clone();
        if let Err(error) = capstan_source::helm::index::normalize_url(&url) {
            let message = error_chain(&error);
            return Err(fetch_failed(
                cx,
                ErrorClass::Stalled,
                reason::URL_INVALID,
                message,
            ));
        }
        if let Err(error) = cx.object.timeout() {
            return Err(ReconcileError::from_error(
                ErrorClass::Stalled,
                "InvalidTimeout",
                error,
            ));
        }
        let limits = *cx.reconciler.storage().limits();
        let options = match client_options(&cx.client, &cx.object, limits).await {
            Ok(options) => options,
            Err(error) => return Err(crate::sources::authentication_failed(cx, error)),
        };
        let repository = match Repository::new(&url, options) {
            Ok(repository) => repository,
            Err(error) => {
                let message = format!("failed to construct Helm client: {}", error_chain(&error));
                let class = if error.is_authentication() {
                    ErrorClass::Transient
                } else {
                    ErrorClass::Stalled
                };
                let reason = if error.is_authentication() {
                    reason::AUTHENTICATION_FAILED
                } else {
                    FAILED
                };
                return Err(fetch_failed(cx, class, reason, message).with_source(error));
            }
        };
        let fetched = match repository.fetch_index().await {
            Ok(fetched) => fetched,
            Err(error) => {
                let (reason, context) =
                    if matches!(error, capstan_source::helm::Error::InvalidIndex { .. }) {
                        (
                            reason::INDEX_FETCH_FAILED,
                            "failed to load Helm repository from index YAML",
                        )
                    } else {
                        (FAILED, "failed to fetch Helm repository index")
                    };
                let message = format!("{context}: {}", error_chain(&error));
                return Err(
                    fetch_failed(cx, ErrorClass::Transient, reason, message).with_source(error)
                );
            }
        };
        cx.remove_condition(condition::FETCH_FAILED);
        cx.state.fetched = Some(fetched);
        Ok(StepOutcome::next())
    })
}

/// `type: oci`: a static object without artifact, as Flux makes it.
async fn oci_static(
    cx: &mut StepContext<HelmRepositoryReconciler>,
) -> Result<StepOutcome, ReconcileError> {
    if !cx.object.spec.url.starts_with("oci://") {
        return Err(ReconcileError::stalled(
            reason::URL_INVALID,
            format!(
                "invalid Helm repository URL: '{}' must use the 'oci' scheme with type 'oci'",
                capstan_source::redact::url(&cx.object.spec.url)
            ),
        ));
    }
    if cx.status.artifact.is_some() {
        crate::sources::remove_artifacts(cx.reconciler.storage(), KIND, cx.object.as_ref()).await?;
    }
    cx.status.artifact = None;
    cx.status.url = None;
    for type_ in [
        condition::ARTIFACT_IN_STORAGE,
        condition::FETCH_FAILED,
        condition::STORAGE_OPERATION_FAILED,
        condition::ARTIFACT_OUTDATED,
    ] {
        cx.remove_condition(type_);
    }
    cx.set_ready_message(OCI_READY_MESSAGE);
    Ok(StepOutcome::next())
}

fn store_step(cx: &mut StepContext<HelmRepositoryReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        let Some(fetched) = cx.state.fetched.take() else {
            return Ok(StepOutcome::next());
        };
        let storage = cx.reconciler.storage().clone();
        let up_to_date = cx.status.artifact.as_ref().is_some_and(|artifact| {
            artifact.revision == fetched.revision && storage.exists(artifact)
        });
        if !up_to_date {
            let message = format!("new index revision '{}'", fetched.revision);
            if cx.status.artifact.is_some() {
                cx.set_condition(
                    condition::ARTIFACT_OUTDATED,
                    ConditionStatus::True,
                    "NewRevision",
                    &message,
                );
            }
            cx.mark_progressing(&format!("building artifact: {message}"))
                .await
                .map_err(|e| {
                    ReconcileError::transient(reason::PATCH_OPERATION_FAILED, error_chain(&e))
                        .with_source(e)
                })?;
            let hex = fetched.revision.trim_start_matches("sha256:");
            let mut artifact = storage.new_artifact(
                KIND,
                &cx.namespace(),
                &cx.name(),
                &fetched.revision,
                &format!("index-{hex}.yaml"),
            );
            let json = fetched.index.to_json();
            let stored = {
                let storage = storage.clone();
                tokio::task::spawn_blocking(move || {
                    storage.store(&mut artifact, &json[..]).map(|()| artifact)
                })
                .await
            };
            let artifact: Artifact = match stored {
                Ok(Ok(artifact)) => artifact,
                Ok(Err(error)) => {
                    let message = format!(
                        "unable to save artifact to storage: {}",
                        error_chain(&error)
                    );
                    cx.set_condition(
                        condition::STORAGE_OPERATION_FAILED,
                        ConditionStatus::True,
                        reason::ARCHIVE_OPERATION_FAILED,
                        &message,
                    );
                    return Err(ReconcileError::transient(
                        reason::ARCHIVE_OPERATION_FAILED,
                        message,
                    )
                    .with_source(error));
                }
                Err(error) => {
                    return Err(ReconcileError::transient(
                        reason::ARCHIVE_OPERATION_FAILED,
                        "storage task failed",
                    )
                    .with_source(error));
                }
            };
            cx.remove_condition(condition::STORAGE_OPERATION_FAILED);
            cx.status.artifact = Some(artifact);
        }
        cx.remove_condition(condition::ARTIFACT_OUTDATED);
        let Some(artifact) = cx.status.artifact.clone() else {
            return Ok(StepOutcome::next());
        };
        if let Some(url) = stable_url(&storage, &artifact, INDEX_LINK).await {
            cx.status.url = Some(url);
        }
        let message = format!("stored artifact: revision '{}'", artifact.revision);
        crate::sources::announce_new_artifact(cx, &artifact, &message).await;
        crate::sources::artifact_stored(cx, &storage, artifact, message).await;
        Ok(StepOutcome::next())
    })
}
