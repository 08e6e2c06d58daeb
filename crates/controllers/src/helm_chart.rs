//! The HelmChart reconciler (`source.toolkit.fluxcd.io/v1`), with Flux source-controller's
//! behaviour.
//!
//! # Expected flow
//! Steps `[build, store]`:
//! - `build`: reads `spec.sourceRef` (same namespace). Without an artifact the chart waits
//!   (`FetchFailed=True`, `NoSourceArtifact`). `status.observedSourceArtifactRevision` records
//!   the source's revision.
//!   - HelmRepository (`type: default`): the stored index is read, `spec.version` (Masterminds,
//!     default `*`: the latest stable) selects a version of `spec.chart`, which is downloaded
//!     with the repository's credentials (sent to other hosts only with `passCredentials`) and
//!     checked against the index digest. With `valuesFiles` (paths inside the chart) the
//!     chart is repackaged with the merged values as `values.yaml` and version
//!     `<version>+<generation>`; otherwise it is kept byte for byte.
//!   - GitRepository, Bucket: the artifact is extracted; `spec.chart` is a chart directory or
//!     `.tgz` inside it (never outside); dependencies are built as `helm dependency build`
//!     does (`file://` from the artifact, repository dependencies downloaded with the
//!     credentials of a HelmRepository of the same URL in the namespace); `valuesFiles`
//!     (paths from the artifact root) replace `values.yaml` with their merge; with
//!     `reconcileStrategy: Revision` the version is `<version>+<first 12 hex of the source
//!     revision's digest>` (and `.<generation>` with values files; `+<generation>` alone with
//!     values files and the ChartVersion strategy).
//!
//!   A stored artifact of the same chart name and version, for the same generation, is kept
//!   without downloading or packaging again.
//! - `store`: stores the package as `helmchart/<namespace>/<name>/<chart>-<version>.tgz`,
//!   revision = the version; records `status.artifact`, `status.url` (the stable
//!   `latest.tar.gz` of that directory, pointing at the artifact as Flux's symlink),
//!   `status.observedChartName` and (with `ignoreMissingValuesFiles`)
//!   `status.observedValuesFiles`; `ArtifactInStorage=True` and `Ready=True` with Flux's reason
//!   (`ChartPullSucceeded` or `ChartPackageSucceeded`) and summary (`pulled 'podinfo' chart
//!   with version '6.0.3'`).
//!
//! Events, as Flux's: every new artifact is announced with the build's reason and summary (the
//! `Ready` Event, or its own when `Ready` stays the same), and a build that added dependencies
//! publishes `ResolvedDependencies` (`resolved 2 chart dependencies`).
//!
//! A new artifact revision of the source reconciles the chart at once.
//!
//! # Errors
//! Flux's build error reasons: a chart or version that does not exist (`InvalidChartReference`,
//! `no 'podinfo' chart with version matching '9.x' found`), values files (`ValuesFilesError`)
//! and version patches (`MetadataPatchError`) are stalled until the spec changes; pulls
//! (`ChartPullError`, or `AuthenticationFailed` when the repository refuses the credentials),
//! dependency builds (`DependencyBuildError`) and packaging (`ChartPackageError`) are retried.
//! Pull failures set `FetchFailed=True`, build failures `BuildFailed=True`.
//!
//! Charts from an OCI HelmRepository are pulled with Helm's media types; `spec.verify`
//! (cosign public keys) is checked before the pull, and an unverified chart is never stored.
//! Keyless cosign and notation are refused with `Stalled=True` (`FeatureGateDisabled`), and
//! `verify` on a chart from an HTTP repository fails as Flux's does (only OCI charts carry
//! signatures).

use std::path::Path;
use std::sync::Arc;

use capstan_api::meta::Artifact;
use capstan_api::source::v1::HelmRepositoryType;
use capstan_api::source::v1::{HelmChartSourceKind, HelmChartStatus, ReconcileStrategy};
use capstan_api::source::v1::{OciVerificationProvider, Source, condition, reason};
use capstan_api::{Bucket, FluxKind, GitRepository, HelmChart, HelmRepository};
use capstan_source::helm::build::{self, BuildError, BuildErrorReason, BuildOptions, Built};
use capstan_source::helm::dependencies::DependencyOptions;
use capstan_source::helm::index::{Index, normalize_url};
use capstan_source::helm::repository::Repository;
use capstan_source::oci::{Credentials as RegistryCredentials, PublicKey, RegistryOptions};
use capstan_source::redact::error_chain;
use capstan_source::storage::Storage;
use futures::stream::BoxStream;
use kube::ResourceExt;
use kube::api::ListParams;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::error::{ErrorClass, ReconcileError, SecretError};
use crate::runtime::depends::{ObjectKey, References};
use crate::runtime::triggers::{self, WatchedKind};
use crate::runtime::{ConditionStatus, Step, StepContext, StepFuture, StepOutcome};
use crate::sources::fetch_failed;

/// The kind name used in storage paths and metrics.
pub const KIND: &str = "HelmChart";

/// How long a chart waits for its source's first artifact before looking again.
const NO_ARTIFACT_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

crate::sources::source_resource!(HelmChart, HelmChartStatus);

/// The source kinds whose artifacts are watched.
pub const WATCHED_SOURCE_KINDS: [WatchedKind; 3] = [
    WatchedKind::of(&HelmRepository::INFO),
    WatchedKind::of(&GitRepository::INFO),
    WatchedKind::of(&Bucket::INFO),
];

impl References for HelmChart {
    fn source(&self) -> Option<ObjectKey> {
        let kind = match self.spec.source_ref.kind {
            HelmChartSourceKind::HelmRepository => "HelmRepository",
            HelmChartSourceKind::GitRepository => "GitRepository",
            HelmChartSourceKind::Bucket => "Bucket",
        };
        Some(ObjectKey::new(
            kind,
            &self.namespace().unwrap_or_default(),
            &self.spec.source_ref.name,
        ))
    }
}

/// The HelmChart reconciler: where chart packages are stored.
#[derive(Debug)]
pub struct HelmChartReconciler {
    storage: Storage,
    steps: [Step<Self>; 2],
    indexes: IndexCache,
}

/// The parsed indexes of HelmRepository artifacts, by artifact path and digest, so charts of
/// one repository parse its index once (Flux keeps an index cache too). Bounded: past
/// [`INDEX_CACHE_ENTRIES`] the cache is emptied.
#[derive(Debug, Default)]
struct IndexCache(std::sync::Mutex<std::collections::HashMap<String, (String, Arc<Index>)>>);

/// How many indexes [`IndexCache`] keeps.
const INDEX_CACHE_ENTRIES: usize = 64;

impl IndexCache {
    fn get(&self, artifact: &Artifact) -> Option<Arc<Index>> {
        let cache = self.0.lock().ok()?;
        let (digest, index) = cache.get(&artifact.path)?;
        (digest == &artifact.digest).then(|| Arc::clone(index))
    }

    fn put(&self, artifact: &Artifact, index: Arc<Index>) {
        if let Ok(mut cache) = self.0.lock() {
            if cache.len() >= INDEX_CACHE_ENTRIES && !cache.contains_key(&artifact.path) {
                cache.clear();
            }
            cache.insert(artifact.path.clone(), (artifact.digest.clone(), index));
        }
    }
}

impl HelmChartReconciler {
    /// A reconciler storing chart packages in `storage` (which also holds the sources'
    /// artifacts it reads).
    pub fn new(storage: Storage) -> Self {
        Self {
            storage,
            steps: crate::sources::source_steps!["build" => build_step, "store" => store_step],
            indexes: IndexCache::default(),
        }
    }
}

/// Data handed between the steps of one reconcile.
#[derive(Debug, Default)]
pub struct HelmChartState {
    built: Option<Built>,
    /// A stored artifact that is up to date, with its summary and reason.
    kept: Option<(String, &'static str)>,
}

crate::sources::source_reconciler!(
    HelmChartReconciler,
    HelmChart,
    HelmChartState,
    KIND,
    fn triggers(
        &self,
        client: &kube::Client,
        store: Store<HelmChart>,
    ) -> Vec<BoxStream<'static, ObjectRef<HelmChart>>> {
        triggers::sources(client, &store, &WATCHED_SOURCE_KINDS)
    }
);

/// The source of a chart: the object's artifact and, for a HelmRepository, the object.
enum ChartSource {
    Repository(Box<HelmRepository>),
    Oci(Box<HelmRepository>),
    Tarball(Artifact),
}

fn build_step(cx: &mut StepContext<HelmChartReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        if cx.object.spec.verify.is_none() {
            cx.remove_condition(condition::SOURCE_VERIFIED);
        } else if let Some(refusal) = unsupported_verification(&cx.object) {
            return Err(ReconcileError::stalled(
                capstan_api::meta::reason::FEATURE_GATE_DISABLED,
                refusal,
            ));
        }
        // A failed verification is checked again at every reconcile.
        if cx
            .status
            .conditions
            .iter()
            .any(|c| c.type_ == condition::SOURCE_VERIFIED && c.status == "False")
        {
            cx.remove_condition(condition::SOURCE_VERIFIED);
        }
        let Some(source) = get_source(cx).await? else {
            let kind = cx.object.source().map(|s| s.kind).unwrap_or_default();
            let message = format!(
                "no artifact available for {kind} source '{}'",
                cx.object.spec.source_ref.name
            );
            cx.set_condition(
                condition::FETCH_FAILED,
                ConditionStatus::True,
                "NoSourceArtifact",
                &message,
            );
            return Err(ReconcileError::waiting(
                NO_ARTIFACT_RETRY,
                "NoSourceArtifact",
                message,
            ));
        };
        let result = match source {
            ChartSource::Repository(repository) => from_repository(cx, &repository).await,
            ChartSource::Oci(repository) => from_oci(cx, &repository).await,
            ChartSource::Tarball(artifact) => from_tarball(cx, &artifact).await,
        };
        match result {
            Ok(()) => {
                cx.remove_condition(condition::FETCH_FAILED);
                cx.remove_condition(condition::BUILD_FAILED);
                Ok(StepOutcome::next())
            }
            Err(Failure::Build(error)) => Err(build_failed(cx, &error)),
            Err(Failure::Reconcile(error)) => Err(error),
        }
    })
}

/// A build step failure: a chart build error (Flux's reasons) or one already classified.
enum Failure {
    Build(BuildError),
    Reconcile(ReconcileError),
}

impl From<ReconcileError> for Failure {
    fn from(error: ReconcileError) -> Self {
        Failure::Reconcile(error)
    }
}

impl From<BuildError> for Failure {
    fn from(error: BuildError) -> Self {
        Failure::Build(error)
    }
}

/// Flux's `observeChartBuild`: `BuildFailed` or `FetchFailed` with the build error's reason;
/// persistent reasons stall.
fn build_failed(cx: &mut StepContext<HelmChartReconciler>, error: &BuildError) -> ReconcileError {
    let message = error.to_string();
    let mut reason = error.reason.reason();
    if error.reason == BuildErrorReason::ChartPull && error.source.is_authentication() {
        reason = reason::AUTHENTICATION_FAILED;
    }
    let message = if reason == reason::AUTHENTICATION_FAILED {
        format!("failed to authenticate with the Helm repository: {message}")
    } else {
        message
    };
    if error.reason.is_build_failure() {
        cx.remove_condition(condition::FETCH_FAILED);
        cx.set_condition(
            condition::BUILD_FAILED,
            ConditionStatus::True,
            reason,
            &message,
        );
    } else {
        cx.remove_condition(condition::BUILD_FAILED);
        cx.set_condition(
            condition::FETCH_FAILED,
            ConditionStatus::True,
            reason,
            &message,
        );
    }
    let class = if error.reason.is_persistent() {
        ErrorClass::Stalled
    } else {
        ErrorClass::Transient
    };
    ReconcileError::new(class, reason, message)
}

/// The chart's source, or `None` while it has no artifact (an OCI HelmRepository never has
/// one).
async fn get_source(
    cx: &mut StepContext<HelmChartReconciler>,
) -> Result<Option<ChartSource>, ReconcileError> {
    let name = cx.object.spec.source_ref.name.clone();
    let unavailable = |cx: &mut StepContext<HelmChartReconciler>, error: kube::Error| {
        let message = format!("failed to get source: {}", error_chain(&error));
        fetch_failed(cx, ErrorClass::Transient, "SourceUnavailable", message).with_source(error)
    };
    let storage = cx.reconciler.storage().clone();
    let artifact = match cx.object.spec.source_ref.kind {
        HelmChartSourceKind::HelmRepository => {
            let repository = match cx.api::<HelmRepository>().get(&name).await {
                Ok(repository) => repository,
                Err(error) => return Err(unavailable(cx, error)),
            };
            if repository.repository_type() == HelmRepositoryType::Oci {
                return Ok(Some(ChartSource::Oci(Box::new(repository))));
            }
            let Some(artifact) = Source::artifact(&repository).cloned() else {
                return Ok(None);
            };
            if !storage.exists(&artifact) {
                return Ok(None);
            }
            cx.status.observed_source_artifact_revision = Some(artifact.revision.clone());
            return Ok(Some(ChartSource::Repository(Box::new(repository))));
        }
        HelmChartSourceKind::GitRepository => match cx.api::<GitRepository>().get(&name).await {
            Ok(source) => Source::artifact(&source).cloned(),
            Err(error) => return Err(unavailable(cx, error)),
        },
        HelmChartSourceKind::Bucket => match cx.api::<Bucket>().get(&name).await {
            Ok(source) => Source::artifact(&source).cloned(),
            Err(error) => return Err(unavailable(cx, error)),
        },
    };
    let Some(artifact) = artifact.filter(|a| storage.exists(a)) else {
        return Ok(None);
    };
    cx.status.observed_source_artifact_revision = Some(artifact.revision.clone());
    Ok(Some(ChartSource::Tarball(artifact)))
}

/// Whether the stored artifact is the chart `name` at `version`, built for this generation.
fn cached(cx: &StepContext<HelmChartReconciler>, name: &str, version: &str) -> bool {
    let same_generation = cx.object.metadata.generation == cx.status.observed_generation;
    same_generation
        && cx.status.observed_chart_name.as_deref() == Some(name)
        && cx.status.artifact.as_ref().is_some_and(|artifact| {
            artifact.revision == version && cx.reconciler.storage().exists(artifact)
        })
}

fn build_options(cx: &StepContext<HelmChartReconciler>, metadata: Option<String>) -> BuildOptions {
    let spec = &cx.object.spec;
    let mut version_metadata = metadata;
    if !spec.values_files.is_empty() {
        let generation = cx.object.metadata.generation.unwrap_or(0).to_string();
        version_metadata = Some(match version_metadata {
            Some(metadata) => format!("{metadata}.{generation}"),
            None => generation,
        });
    }
    BuildOptions {
        values_files: spec.values_files.clone(),
        ignore_missing_values_files: spec.ignore_missing_values_files.unwrap_or(false),
        version_metadata,
    }
}

fn keep(cx: &mut StepContext<HelmChartReconciler>, name: &str, version: &str, packaged: bool) {
    let action = if packaged { "packaged" } else { "pulled" };
    let mut summary = format!("{action} '{name}' chart with version '{version}'");
    let values_files = if cx.object.spec.ignore_missing_values_files.unwrap_or(false) {
        cx.status.observed_values_files.clone()
    } else {
        cx.object.spec.values_files.clone()
    };
    if !values_files.is_empty() {
        summary.push_str(" and merged values files [");
        summary.push_str(&values_files.join(" "));
        summary.push(']');
    }
    let reason = if packaged {
        reason::CHART_PACKAGE_SUCCEEDED
    } else {
        reason::CHART_PULL_SUCCEEDED
    };
    cx.state.kept = Some((summary, reason));
}

async fn from_repository(
    cx: &mut StepContext<HelmChartReconciler>,
    repository: &HelmRepository,
) -> Result<(), Failure> {
    let storage = cx.reconciler.storage().clone();
    let Some(artifact) = Source::artifact(repository).cloned() else {
        return Ok(());
    };
    if cx.object.spec.verify.is_some() {
        return Err(BuildError::new(
            BuildErrorReason::ChartVerification,
            capstan_source::helm::Error::chart(
                "verification not supported",
                "only charts from an OCI HelmRepository can be verified",
            ),
        )
        .into());
    }
    let reference = |e| BuildError::new(BuildErrorReason::ChartReference, e);
    let index = if let Some(index) = cx.reconciler.indexes.get(&artifact) {
        index
    } else {
        let path = storage.local_path(&artifact.path).map_err(|e| {
            ReconcileError::transient(reason::ARCHIVE_OPERATION_FAILED, error_chain(&e))
        })?;
        let bytes = std::fs::read(&path).map_err(|e| {
            BuildError::new(
                BuildErrorReason::ChartPull,
                capstan_source::helm::Error::Io {
                    action: "read",
                    path: path.clone(),
                    source: e,
                },
            )
        })?;
        let index = tokio::task::spawn_blocking(move || Index::parse(&bytes))
            .await
            .map_err(|e| {
                ReconcileError::transient(
                    capstan_api::meta::reason::FAILED,
                    "index parsing task failed",
                )
                .with_source(e)
            })?
            .map_err(|e| BuildError::new(BuildErrorReason::ChartPull, e))?;
        let index = Arc::new(index);
        cx.reconciler.indexes.put(&artifact, Arc::clone(&index));
        index
    };
    let spec = &cx.object.spec;
    let wanted = spec.version.clone().unwrap_or_default();
    let version = index
        .select(&spec.chart, &wanted)
        .map_err(|e| {
            reference(capstan_source::helm::Error::chart(
                "failed to get chart version for remote reference",
                e,
            ))
        })?
        .clone();
    let options = build_options(cx, None);
    let mut expected = version.version.clone();
    if let Some(metadata) = &options.version_metadata {
        expected = build::with_metadata(&expected, metadata)
            .map_err(|e| BuildError::new(BuildErrorReason::ChartMetadataPatch, e))?;
    }
    let requires_packaging = options.version_metadata.is_some();
    if cached(cx, &version.name, &expected) {
        keep(cx, &version.name, &expected, requires_packaging);
        return Ok(());
    }
    let limits = *storage.limits();
    let client_options = crate::helm_repository::client_options(&cx.client, repository, limits)
        .await
        .map_err(|error| crate::sources::authentication_failed(cx, error))?;
    let client = Repository::new(&repository.spec.url, client_options)
        .map_err(|e| BuildError::new(BuildErrorReason::ChartPull, e))?;
    let downloaded = client
        .download_chart(&version)
        .await
        .map_err(|e| BuildError::new(BuildErrorReason::ChartPull, e))?;
    let mut built = build::build_remote(downloaded.bytes, &options).await?;
    // The index's version is the chart's version (Flux sets it on the chart).
    built.version = expected;
    cx.state.built = Some(built);
    Ok(())
}

async fn from_tarball(
    cx: &mut StepContext<HelmChartReconciler>,
    artifact: &Artifact,
) -> Result<(), Failure> {
    let storage = cx.reconciler.storage().clone();
    let path = storage.local_path(&artifact.path).map_err(|e| {
        ReconcileError::transient(reason::ARCHIVE_OPERATION_FAILED, error_chain(&e))
    })?;
    let temp = capstan_source::temp::dir("helm-chart-source").map_err(|e| {
        ReconcileError::transient(
            reason::DIR_CREATION_FAILED,
            format!("failed to create temporary working directory: {e}"),
        )
    })?;
    let root = temp.path().join("source");
    {
        let (path, root, limits) = (
            path.clone(),
            root.clone(),
            storage.limits().for_stored_artifacts(),
        );
        tokio::task::spawn_blocking(move || {
            capstan_source::artifact::extract_file(&path, &root, &limits)
        })
        .await
        .map_err(|e| {
            ReconcileError::transient(capstan_api::meta::reason::FAILED, "extraction task failed")
                .with_source(e)
        })?
        .map_err(|e| {
            ReconcileError::transient(
                capstan_api::meta::reason::FAILED,
                format!("artifact untar error: {}", error_chain(&e)),
            )
            .with_source(e)
        })?;
    }
    let spec = cx.object.spec.clone();
    let metadata = match cx.object.reconcile_strategy() {
        ReconcileStrategy::Revision => Some(revision_metadata(&artifact.revision)),
        ReconcileStrategy::ChartVersion => None,
    };
    let options = build_options(cx, metadata);
    // The name and version the build will have, to keep an up-to-date artifact.
    if let Some((name, version)) = chart_identity(&root, &spec.chart) {
        let expected = match &options.version_metadata {
            Some(metadata) => build::with_metadata(&version, metadata).ok(),
            None => Some(version),
        };
        if let Some(expected) = expected
            && cached(cx, &name, &expected)
        {
            keep(cx, &name, &expected, true);
            return Ok(());
        }
    }
    let dependencies = dependency_options(cx, remote_dependencies(&root, &spec.chart)).await;
    let built = build::build_local(&root, &spec.chart, &options, &dependencies).await?;
    if !built.dependencies.is_empty() {
        tracing::info!(
            count = built.dependencies.len(),
            "resolved chart dependencies"
        );
    }
    cx.state.built = Some(built);
    Ok(())
}

/// Verification this controller cannot do: keyless cosign and notation; `None` when
/// `spec.verify` can be honoured.
fn unsupported_verification(object: &HelmChart) -> Option<String> {
    let verify = object.spec.verify.as_ref()?;
    if verify.provider == Some(OciVerificationProvider::Notation) {
        return Some("spec.verify.provider 'notation' not supported by this controller yet".into());
    }
    if verify.secret_ref.is_none() {
        return Some(
            "failed to verify the signature using provider 'cosign keyless': keyless verification \
             is not supported yet; set spec.verify.secretRef to a Secret with cosign public keys"
                .into(),
        );
    }
    None
}

/// The registry options of an OCI HelmRepository: `spec.insecure`, `username`/`password` (or
/// `.dockerconfigjson`) of `spec.secretRef` and `ca.crt` of `spec.certSecretRef`.
async fn registry_options(
    client: &kube::Client,
    repository: &HelmRepository,
) -> Result<RegistryOptions, SecretError> {
    let namespace = repository.namespace().unwrap_or_default();
    let spec = &repository.spec;
    let mut options = RegistryOptions {
        insecure: spec.insecure.unwrap_or(false),
        ..RegistryOptions::default()
    };
    if let Some(secret_ref) = &spec.secret_ref {
        let data =
            crate::helm_repository::secret_data(client, &namespace, &secret_ref.name).await?;
        let secret = format!("{namespace}/{}", secret_ref.name);
        let text = |key: &str| {
            data.get(key)
                .map(|v| String::from_utf8_lossy(v).into_owned())
        };
        if let (Some(username), Some(password)) = (text("username"), text("password")) {
            options.credentials = Some(RegistryCredentials { username, password });
        } else if let Some(config) = data.get(".dockerconfigjson") {
            let host = spec
                .url
                .trim_start_matches("oci://")
                .split('/')
                .next()
                .unwrap_or_default()
                .to_owned();
            options.credentials =
                RegistryCredentials::from_docker_config(config, &host).map_err(|source| {
                    SecretError::Invalid {
                        secret: secret.clone(),
                        source: Box::new(source),
                    }
                })?;
        } else {
            return Err(SecretError::Unusable {
                secret,
                problem: "holds neither 'username' and 'password' nor '.dockerconfigjson'".into(),
            });
        }
    }
    if let Some(cert_ref) = &spec.cert_secret_ref {
        let data = crate::helm_repository::secret_data(client, &namespace, &cert_ref.name).await?;
        if let Some(ca) = data.get("ca.crt") {
            options.ca_certificates.push(ca.clone());
        }
    }
    Ok(options)
}

/// A chart pull error from the OCI client, as a build error (auth failures recognised).
fn oci_failure(
    reason: BuildErrorReason,
    context: &str,
    error: &capstan_source::helm::oci::Error,
) -> BuildError {
    BuildError::new(
        reason,
        capstan_source::helm::Error::chart(context, error_chain(error)),
    )
}

/// Whether an OCI failure reads as refused credentials or TLS trouble (Flux matches the text).
fn is_auth_failure(message: &str) -> bool {
    let lower = message.to_lowercase();
    [
        "401",
        "unauthorized",
        "authentication required",
        "tls",
        "unknown certificate authority",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// The chart version of `reference` that `wanted` selects among the registry's tags.
async fn resolve_oci_version(
    cx: &mut StepContext<HelmChartReconciler>,
    reference: &str,
    wanted: &str,
    registry: &RegistryOptions,
) -> Result<String, Failure> {
    let spec = cx.object.spec.clone();
    let versions = capstan_source::helm::oci::list_versions(reference, registry)
        .await
        .map_err(|e| {
            auth_or(
                cx,
                oci_failure(
                    BuildErrorReason::ChartPull,
                    "failed to get chart version for remote reference",
                    &e,
                ),
            )
        })?;
    let chosen = capstan_source::helm::oci::select_version(&versions, wanted)
        .map_err(|e| {
            oci_failure(
                BuildErrorReason::ChartReference,
                "failed to get chart version for remote reference",
                &e,
            )
        })?
        .ok_or_else(|| {
            BuildError::new(
                BuildErrorReason::ChartReference,
                capstan_source::helm::Error::chart(
                    "failed to get chart version for remote reference",
                    capstan_source::helm::Error::NoChartVersion {
                        name: spec.chart.clone(),
                        version: if wanted.is_empty() {
                            "*".to_owned()
                        } else {
                            wanted.to_owned()
                        },
                    },
                ),
            )
        })?;
    Ok(chosen)
}

async fn from_oci(
    cx: &mut StepContext<HelmChartReconciler>,
    repository: &HelmRepository,
) -> Result<(), Failure> {
    let registry = registry_options(&cx.client, repository)
        .await
        .map_err(|error| crate::sources::authentication_failed(cx, error))?;
    let spec = cx.object.spec.clone();
    let reference = format!(
        "{}/{}",
        repository.spec.url.trim_end_matches('/'),
        spec.chart
    );
    let wanted = spec.version.clone().unwrap_or_default();
    let chosen = resolve_oci_version(cx, &reference, &wanted, &registry).await?;
    let options = build_options(cx, None);
    let mut expected = chosen.clone();
    if let Some(metadata) = &options.version_metadata {
        expected = build::with_metadata(&expected, metadata)
            .map_err(|e| BuildError::new(BuildErrorReason::ChartMetadataPatch, e))?;
    }
    let tagged = format!("{reference}:{}", capstan_source::helm::oci::tag_of(&chosen));
    let verified_for_generation = cx.status.conditions.iter().any(|c| {
        c.type_ == condition::SOURCE_VERIFIED
            && c.status == "True"
            && c.observed_generation == cx.object.metadata.generation
    });
    if cached(cx, &spec.chart, &expected) && (spec.verify.is_none() || verified_for_generation) {
        keep(
            cx,
            &spec.chart,
            &expected,
            options.version_metadata.is_some(),
        );
        return Ok(());
    }
    // Verify before anything is downloaded, and pull the digest that verified.
    let pull_reference = if spec.verify.is_some() {
        let digest = verify_chart(cx, &tagged, &chosen, &registry).await?;
        format!("{reference}@{digest}")
    } else {
        tagged
    };
    let limit = capstan_source::helm::MAX_CHART_SIZE
        .min(cx.reconciler.storage().limits().max_archive_bytes);
    let pulled = capstan_source::helm::oci::pull(&pull_reference, "", &registry, limit)
        .await
        .map_err(|e| {
            auth_or(
                cx,
                oci_failure(
                    BuildErrorReason::ChartPull,
                    "failed to download chart for remote reference",
                    &e,
                ),
            )
        })?;
    let mut built = build::build_remote(pulled.bytes, &options).await?;
    built.version = expected;
    cx.state.built = Some(built);
    Ok(())
}

/// A pull failure that reads as an authentication failure is reported as Flux does
/// (`AuthenticationFailed`); others keep their build reason.
fn auth_or(cx: &mut StepContext<HelmChartReconciler>, error: BuildError) -> Failure {
    let message = error.to_string();
    if is_auth_failure(&message) {
        let message = format!("failed to authenticate with the Helm repository: {message}");
        return Failure::Reconcile(fetch_failed(
            cx,
            ErrorClass::Transient,
            reason::AUTHENTICATION_FAILED,
            message,
        ));
    }
    Failure::Build(error)
}

/// Verifies the cosign signature of `reference` (a tag) with the keys of
/// `spec.verify.secretRef`; sets `SourceVerified` and returns the verified digest.
async fn verify_chart(
    cx: &mut StepContext<HelmChartReconciler>,
    reference: &str,
    version: &str,
    registry: &RegistryOptions,
) -> Result<String, Failure> {
    let secret_name = cx
        .object
        .spec
        .verify
        .as_ref()
        .and_then(|v| v.secret_ref.as_ref())
        .map(|s| s.name.clone())
        .unwrap_or_default();
    let namespace = cx.namespace();
    let keys = match crate::helm_repository::secret_data(&cx.client, &namespace, &secret_name).await
    {
        Ok(data) => {
            let secret = format!("{namespace}/{secret_name}");
            let keys: Result<Vec<PublicKey>, String> = data
                .iter()
                .filter(|(name, _)| name.ends_with(crate::oci_repository::PUBLIC_KEY_SUFFIX))
                .map(|(name, pem)| {
                    PublicKey::from_pem(name, pem)
                        .map_err(|e| format!("secret '{secret}': {}", error_chain(&e)))
                })
                .collect();
            match keys {
                Ok(keys) if keys.is_empty() => Err(format!(
                    "secret '{secret}' has no cosign public keys (keys named *.pub)"
                )),
                other => other,
            }
        }
        Err(error) => Err(error_chain(&error)),
    };
    let outcome = match keys {
        Ok(keys) => capstan_source::oci::verify(reference, &keys, registry)
            .await
            .map_err(|e| error_chain(&e)),
        Err(message) => Err(message),
    };
    match outcome {
        Ok(verified) => {
            cx.set_condition(
                condition::SOURCE_VERIFIED,
                ConditionStatus::True,
                capstan_api::meta::reason::SUCCEEDED,
                &format!("verified signature of version {version}"),
            );
            Ok(verified.digest.to_string())
        }
        Err(message) => {
            let message = format!(
                "chart verification error: failed to verify the signature using provider 'cosign': {message}"
            );
            cx.set_condition(
                condition::SOURCE_VERIFIED,
                ConditionStatus::False,
                reason::VERIFICATION_ERROR,
                &message,
            );
            cx.remove_condition(condition::FETCH_FAILED);
            cx.set_condition(
                condition::BUILD_FAILED,
                ConditionStatus::True,
                BuildErrorReason::ChartVerification.reason(),
                &message,
            );
            Err(Failure::Reconcile(ReconcileError::transient(
                BuildErrorReason::ChartVerification.reason(),
                message,
            )))
        }
    }
}

/// Flux's revision metadata: the first 12 hex characters of the source revision's digest
/// (`main@sha1:<hex>` → `<hex>`, `sha256:<hex>` → `<hex>`).
fn revision_metadata(revision: &str) -> String {
    let hex = revision.rsplit(':').next().unwrap_or(revision);
    hex.chars().take(12).collect()
}

/// The chart name and version at `path` in the extracted source (a directory's Chart.yaml),
/// when readable.
fn chart_identity(root: &Path, path: &str) -> Option<(String, String)> {
    if Path::new(path).is_absolute() || path.split('/').any(|c| c == "..") {
        return None;
    }
    let dir = root.join(path);
    if !dir.is_dir() {
        return None;
    }
    let text = std::fs::read_to_string(dir.join("Chart.yaml")).ok()?;
    let value = capstan_helm::yaml::parse(&text).ok()?;
    let name = value.get("name")?.as_str()?.to_owned();
    let version = value.get("version")?.as_str()?.to_owned();
    Some((name, version))
}

/// Whether the chart directory at `path` lists a dependency from an HTTP/S or OCI repository (so the
/// namespace's HelmRepositories are looked up only then). Unreadable: `true`.
fn remote_dependencies(root: &Path, path: &str) -> bool {
    if Path::new(path).is_absolute() || path.split('/').any(|c| c == "..") {
        return false; // refused by the build, which never reads outside the source
    }
    let Ok(text) = std::fs::read_to_string(root.join(path).join("Chart.yaml")) else {
        return true;
    };
    let Ok(value) = capstan_helm::yaml::parse(&text) else {
        return true;
    };
    value
        .get("dependencies")
        .and_then(serde_json::Value::as_array)
        .is_some_and(|deps| {
            deps.iter().any(|d| {
                d.get("repository")
                    .and_then(serde_json::Value::as_str)
                    .is_some_and(|r| {
                        r.starts_with("http://")
                            || r.starts_with("https://")
                            || r.starts_with("oci://")
                    })
            })
        })
}

/// The credentials of the namespace's HelmRepositories by URL, for repository dependencies
/// (Flux looks a dependency's repository up by URL); unreadable ones are skipped.
async fn dependency_options(
    cx: &StepContext<HelmChartReconciler>,
    remote: bool,
) -> DependencyOptions {
    let limits = *cx.reconciler.storage().limits();
    let mut options = DependencyOptions::default();
    options.defaults.limits = limits;
    options.defaults.timeout = Some(capstan_api::source::v1::DEFAULT_TIMEOUT);
    if !remote {
        return options;
    }
    let Ok(repositories) = cx
        .api::<HelmRepository>()
        .list(&ListParams::default())
        .await
    else {
        return options;
    };
    for repository in repositories {
        if repository.repository_type() == HelmRepositoryType::Oci {
            match registry_options(&cx.client, &repository).await {
                Ok(registry) => {
                    let url = repository.spec.url.trim_end_matches('/').to_owned();
                    options.registries.insert(url, registry);
                }
                Err(error) => tracing::debug!(%error, "skipping a HelmRepository for dependencies"),
            }
            continue;
        }
        let Ok(url) = normalize_url(&repository.spec.url) else {
            continue;
        };
        match crate::helm_repository::client_options(&cx.client, &repository, limits).await {
            Ok(client) => {
                options.repositories.insert(url.to_string(), client);
            }
            Err(error) => tracing::debug!(%error, "skipping a HelmRepository for dependencies"),
        }
    }
    options
}

fn store_step(cx: &mut StepContext<HelmChartReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        let storage = cx.reconciler.storage().clone();
        if let Some((summary, reason)) = cx.state.kept.take() {
            cx.remove_condition(condition::ARTIFACT_OUTDATED);
            if let Some(artifact) = cx.status.artifact.clone() {
                finish(cx, &storage, artifact, &summary, reason).await;
            }
            return Ok(StepOutcome::next());
        }
        let Some(built) = cx.state.built.take() else {
            return Ok(StepOutcome::next());
        };
        if cx.status.artifact.is_some() {
            cx.set_condition(
                condition::ARTIFACT_OUTDATED,
                ConditionStatus::True,
                "NewChart",
                &built.summary(),
            );
        }
        cx.mark_progressing(&format!("building artifact: {}", built.summary()))
            .await
            .map_err(|e| {
                ReconcileError::transient(reason::PATCH_OPERATION_FAILED, error_chain(&e))
                    .with_source(e)
            })?;
        let mut artifact = storage.new_artifact(
            KIND,
            &cx.namespace(),
            &cx.name(),
            &built.version,
            &built.file_name(),
        );
        let bytes = built.bytes.clone();
        let stored = {
            let storage = storage.clone();
            tokio::task::spawn_blocking(move || {
                storage.store(&mut artifact, &bytes[..]).map(|()| artifact)
            })
            .await
        };
        let artifact = match stored {
            Ok(Ok(artifact)) => artifact,
            Ok(Err(error)) => {
                let message = format!(
                    "unable to copy Helm chart to storage: {}",
                    error_chain(&error)
                );
                cx.set_condition(
                    condition::STORAGE_OPERATION_FAILED,
                    ConditionStatus::True,
                    reason::ARCHIVE_OPERATION_FAILED,
                    &message,
                );
                return Err(
                    ReconcileError::transient(reason::ARCHIVE_OPERATION_FAILED, message)
                        .with_source(error),
                );
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
        cx.remove_condition(condition::ARTIFACT_OUTDATED);
        cx.status.artifact = Some(artifact.clone());
        cx.status.observed_chart_name = Some(built.name.clone());
        cx.status.observed_values_files =
            if cx.object.spec.ignore_missing_values_files.unwrap_or(false) {
                built.values_files.clone()
            } else {
                Vec::new()
            };
        let reason = if built.packaged {
            reason::CHART_PACKAGE_SUCCEEDED
        } else {
            reason::CHART_PULL_SUCCEEDED
        };
        let summary = built.summary();
        announce(cx, &built, &artifact, reason, &summary).await;
        finish(cx, &storage, artifact, &summary, reason).await;
        Ok(StepOutcome::next())
    })
}

/// Flux's Events of a new build: `ResolvedDependencies` when it added dependencies, and every
/// new artifact (a new digest) announced with the build's reason and summary, also when `Ready`
/// stays the same (the same version built again for a new generation). When `Ready` moves to
/// that reason and summary, the runtime does not announce it a second time.
async fn announce(
    cx: &StepContext<HelmChartReconciler>,
    built: &Built,
    artifact: &Artifact,
    reason: &str,
    summary: &str,
) {
    if !built.dependencies.is_empty() {
        // Flux's trace event (a Kubernetes Event of type Normal).
        let message = format!("resolved {} chart dependencies", built.dependencies.len());
        cx.publish_event(
            EventType::Normal,
            "ResolvedDependencies",
            &message,
            "Reconcile",
        )
        .await;
    }
    let old_digest = cx
        .object
        .status
        .as_ref()
        .and_then(|s| s.artifact.as_ref())
        .map(|a| a.digest.as_str());
    if old_digest != Some(artifact.digest.as_str()) {
        cx.publish_event(EventType::Normal, reason, summary, "Reconcile")
            .await;
    }
}

/// The stable name of the current chart in the artifact directory (`status.url`), as Flux's.
pub const LATEST_LINK: &str = "latest.tar.gz";

async fn finish(
    cx: &mut StepContext<HelmChartReconciler>,
    storage: &Storage,
    artifact: Artifact,
    summary: &str,
    reason: &'static str,
) {
    if let Some(url) = crate::helm_repository::stable_url(storage, &artifact, LATEST_LINK).await {
        cx.status.url = Some(url);
    }
    crate::sources::artifact_stored(cx, storage, artifact, summary.to_owned()).await;
    // Flux's ArtifactInStorage (and so Ready) carries the build's reason.
    cx.set_condition(
        condition::ARTIFACT_IN_STORAGE,
        ConditionStatus::True,
        reason,
        summary,
    );
    cx.set_ready_reason(reason);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revision_metadata_is_the_first_12_hex() {
        assert_eq!(
            revision_metadata("main@sha1:0123456789abcdef0123456789abcdef01234567"),
            "0123456789ab"
        );
        assert_eq!(
            revision_metadata("sha256:fedcba9876543210aa"),
            "fedcba987654"
        );
    }
}
