//! The OCIRepository reconciler (`source.toolkit.fluxcd.io/v1`), with Flux source-controller's
//! behaviour.
//!
//! # Expected flow
//! Steps `[resolve, fetch, store]`:
//! - `resolve`: builds the registry options (`spec.insecure`, the docker config
//!   Secret of `spec.secretRef`, the CA of `spec.certSecretRef`) and resolves `spec.ref` to a
//!   manifest digest: `digest` as given, else the highest tag matching `semver` (tags first
//!   filtered by the `semverFilter` regex), else `tag` (default `latest`). The revision is
//!   `<tag>@sha256:<digest>`, or `sha256:<digest>` for a digest reference. When it equals
//!   `status.artifact.revision`, the artifact file exists and neither `spec.ignore` nor
//!   `spec.layerSelector` changed, nothing is pulled.
//!   With `spec.verify` (provider `cosign`), the cosign signature of the resolved digest is
//!   checked here, before any layer is downloaded: the Secret of `spec.verify.secretRef` holds
//!   ECDSA P-256 public keys under keys ending in `.pub`, and one signature at the tag
//!   `sha256-<hex>.sig` verifying with any of them, with a payload naming the digest, is
//!   enough (see [`capstan_source::oci::cosign`]). Success sets `SourceVerified=True`
//!   (`Succeeded`, "verified signature of revision …"); failure sets `SourceVerified=False` and
//!   `Ready=False` with reason `VerificationError` and the message "failed to verify the
//!   signature using provider 'cosign': …" (no signatures found, no matching signatures, a
//!   payload naming another digest, an unusable key), is retried with backoff, and nothing is
//!   pulled or stored. As in Flux, a revision already stored with `SourceVerified=True`
//!   observed for the current generation is not verified again; without `spec.verify` the
//!   condition is removed.
//! - `fetch`: pulls the manifest by digest and the selected layer, then stores
//!   it as `ocirepository/<namespace>/<name>/<digest>.tar.gz`: re-packed (honouring the root
//!   `.sourceignore` and `spec.ignore`) for the `extract` operation, as it is for `copy`.
//!   The manifest annotations become `artifact.metadata`.
//! - `store`: records `status.artifact` and `status.url`, sets
//!   `ArtifactInStorage=True` and garbage-collects older artifacts (2 are kept).
//!
//! On deletion every stored artifact of the object is removed.
//!
//! Not supported yet, and refused with `Stalled=True` (reason `FeatureGateDisabled`) rather
//! than ignored: `spec.verify.provider: notation`, cosign keyless verification (`spec.verify`
//! without `secretRef`, with or without `matchOIDCIdentity`; `SourceVerified=False` says
//! "keyless verification is not supported yet"), `spec.provider` other than `generic`,
//! `spec.serviceAccountName`, `spec.proxySecretRef`. Of `spec.certSecretRef` only `ca.crt` is
//! used: a secret also holding `tls.crt`/`tls.key` is refused (no mutual TLS yet).
//!
//! # Errors
//! Registry failures set `FetchFailed=True` (`OCIArtifactPullFailed`, `AuthenticationFailed`
//! for an unusable secret, `OCIArtifactLayerOperationFailed` for a layer that does not fit the
//! selector) and `Ready=False` with the same message, and are retried with backoff. An invalid
//! URL (`URLInvalid`), digest, semver constraint or `semverFilter` needs a spec change
//! (stalled). A semver reference no tag satisfies fails with Flux's "failed to determine the
//! artifact tag for '<url>'" and "no tag matches semver '<expression>'", naming what the tags
//! offered (none, none past the filter, the newest versions).
//!
//! Messages carry the whole cause chain (URLs without credentials). Tags for `semver` are
//! listed by [`capstan_source::oci::list_tags`], with the same registry client configuration
//! as the pull.

use std::collections::BTreeMap;
use std::path::Path;

use capstan_api::OCIRepository;
use capstan_api::meta::Artifact;
use capstan_api::source::v1::{
    CloudProvider, OCILayerOperation, OCIRepositoryRef, OCIRepositorySpec, OCIRepositoryStatus,
    OCIRepositoryVerification, OciVerificationProvider, condition, reason,
};
use capstan_source::Digest;
use capstan_source::artifact::IgnoreFilter;
use capstan_source::oci::{
    self, Credentials, LayerOperation, LayerSelector, PublicKey, PullOptions, RegistryOptions,
};
use capstan_source::redact::error_chain;
use capstan_source::semver_constraint::{Constraint, parse_version};
use capstan_source::storage::{Storage, revision_file_name};
use k8s_openapi::api::core::v1::Secret;
use oci_client::Reference;

use crate::error::{ErrorClass, ReconcileError, SecretError};
use crate::runtime::{ConditionStatus, Step, StepContext, StepFuture, StepOutcome};
use crate::sources::fetch_failed;

/// The kind name used in storage paths and metrics.
pub const KIND: &str = "OCIRepository";

/// The key of a `kubernetes.io/dockerconfigjson` Secret holding the docker config.
pub const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

/// The key of `spec.certSecretRef` holding the CA certificate (PEM).
pub const CA_KEY: &str = "ca.crt";

/// The suffix of the keys of `spec.verify.secretRef` holding cosign public keys.
pub const PUBLIC_KEY_SUFFIX: &str = ".pub";

crate::sources::source_resource!(OCIRepository, OCIRepositoryStatus);

/// The OCIRepository reconciler: where artifacts are stored.
#[derive(Debug)]
pub struct OCIRepositoryReconciler {
    storage: Storage,
    steps: [Step<Self>; 3],
}

impl OCIRepositoryReconciler {
    /// A reconciler storing artifacts in `storage`.
    pub fn new(storage: Storage) -> Self {
        Self {
            storage,
            steps: crate::sources::source_steps!["resolve" => resolve_step, "fetch" => fetch_step, "store" => store_step],
        }
    }
}

/// Data handed between the steps of one reconcile.
#[derive(Debug, Default)]
pub struct OciState {
    /// How to reach the registry.
    registry: RegistryOptions,
    /// `oci://host/repository@sha256:…` to pull, when the stored artifact is outdated.
    pull: Option<String>,
    /// The resolved revision.
    revision: Option<String>,
    /// The freshly stored artifact.
    artifact: Option<Artifact>,
}

crate::sources::source_reconciler!(
    OCIRepositoryReconciler,
    OCIRepository,
    OciState,
    KIND,
    // A failure is reported for the generation it happened at (see `Reconciler::OBSERVE_FAILURES`).
    const OBSERVE_FAILURES: bool = true;
);

/// Spec fields this reconciler does not implement yet: refused (stalled) rather than ignored.
fn unsupported_fields(spec: &OCIRepositorySpec) -> Vec<&'static str> {
    let mut fields = Vec::new();
    if spec
        .verify
        .as_ref()
        .is_some_and(|v| v.provider == Some(OciVerificationProvider::Notation))
    {
        fields.push("spec.verify.provider 'notation'");
    }
    if spec.provider.is_some_and(|p| p != CloudProvider::Generic) {
        fields.push("spec.provider");
    }
    if spec.service_account_name.is_some() {
        fields.push("spec.serviceAccountName");
    }
    if spec.proxy_secret_ref.is_some() {
        fields.push("spec.proxySecretRef");
    }
    fields
}

/// Why the spec or the registry did not give a revision to pull.
#[derive(Debug, thiserror::Error)]
enum ResolveError {
    /// `spec.url` is not an OCI repository URL.
    #[error("URL {url:?} must {requirement}")]
    Url {
        url: String,
        requirement: &'static str,
    },
    /// `spec.url` does not parse as a reference.
    #[error(transparent)]
    Reference(capstan_source::Error),
    /// A `spec.ref` field does not parse.
    #[error("invalid spec.ref.{field}")]
    Ref {
        field: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Listing the tags failed.
    #[error("failed to determine the artifact tag for '{url}'")]
    ListTags {
        url: String,
        #[source]
        source: Box<capstan_source::Error>,
    },
    /// No tag satisfies `spec.ref.semver` (Flux: "no match found for semver").
    #[error(
        "failed to determine the artifact tag for '{url}': no tag matches semver '{expression}' \
         ({seen})"
    )]
    NoMatchingTag {
        url: String,
        expression: String,
        /// What was there instead ([`tags_seen`]).
        seen: String,
    },
    /// The manifest digest of the tag could not be read.
    #[error("failed to determine artifact digest")]
    Digest(#[source] capstan_source::Error),
    /// The registry did not answer within `spec.timeout`.
    #[error("failed to determine artifact digest: timed out after {0:?}")]
    Timeout(std::time::Duration),
}

/// `spec.url` as a repository reference: `oci://` and no tag or digest.
fn repository_of(url: &str) -> Result<Reference, ResolveError> {
    let invalid = |requirement| ResolveError::Url {
        url: url.to_owned(),
        requirement,
    };
    let Some(bare) = url.strip_prefix(oci::URL_SCHEME) else {
        return Err(invalid("start with oci://"));
    };
    let last_segment = bare.rsplit('/').next().unwrap_or(bare);
    if !bare.contains('/') || last_segment.contains(':') || last_segment.contains('@') {
        return Err(invalid(
            "name a repository without tag or digest; use spec.ref",
        ));
    }
    oci::parse_reference(url).map_err(ResolveError::Reference)
}

/// `oci://<registry>/<repository>` followed by `suffix` (`:tag` or `@digest`).
fn reference_url(repository: &Reference, suffix: &str) -> String {
    format!(
        "{}{}/{}{suffix}",
        oci::URL_SCHEME,
        repository.registry(),
        repository.repository()
    )
}

/// How tags read as versions: as written, or, for Helm charts (the layer selector's media
/// type is Helm's chart layer), with `_` read as `+` (Helm pushes `1.0.0+build` as the tag
/// `1.0.0_build`, tags cannot hold `+`), as source-controller reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TagSyntax {
    Plain,
    HelmChart,
}

impl TagSyntax {
    fn of(layer_media_type: Option<&str>) -> Self {
        if layer_media_type == Some(capstan_source::helm::oci::CHART_LAYER_MEDIA_TYPE) {
            Self::HelmChart
        } else {
            Self::Plain
        }
    }

    /// `tag` as the version text it stands for.
    fn version_text(self, tag: &str) -> std::borrow::Cow<'_, str> {
        match self {
            Self::Plain => tag.into(),
            Self::HelmChart => tag.replace('_', "+").into(),
        }
    }
}

/// The highest tag whose version satisfies `constraint`, among the tags matching `filter`.
/// Tags that are not versions are skipped; equal versions are broken by the tag text.
fn select_semver_tag<'a>(
    tags: &'a [String],
    constraint: &Constraint,
    filter: Option<&regex::Regex>,
    syntax: TagSyntax,
) -> Option<&'a str> {
    tags.iter()
        .filter(|tag| filter.is_none_or(|f| f.is_match(tag)))
        .filter_map(|tag| parse_version(&syntax.version_text(tag)).map(|version| (version, tag)))
        .filter(|(version, _)| constraint.matches(version))
        .max()
        .map(|(_, tag)| tag.as_str())
}

async fn secret_data(
    cx: &StepContext<OCIRepositoryReconciler>,
    name: &str,
) -> Result<BTreeMap<String, Vec<u8>>, SecretError> {
    let secret = cx
        .api::<Secret>()
        .get(name)
        .await
        .map_err(|source| SecretError::Get {
            secret: format!("{}/{name}", cx.namespace()),
            source,
        })?;
    Ok(secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| (key, value.0))
        .collect())
}

/// `spec.insecure`, the credentials of `spec.secretRef` and the CA of `spec.certSecretRef`.
async fn registry_options(
    cx: &StepContext<OCIRepositoryReconciler>,
    repository: &Reference,
) -> Result<RegistryOptions, SecretError> {
    let spec = &cx.object.spec;
    let mut options = RegistryOptions {
        insecure: spec.insecure.unwrap_or(false),
        ..RegistryOptions::default()
    };
    if let Some(secret_ref) = &spec.secret_ref {
        let data = secret_data(cx, &secret_ref.name).await?;
        let secret = format!("{}/{}", cx.namespace(), secret_ref.name);
        let config = data
            .get(DOCKER_CONFIG_KEY)
            .ok_or_else(|| SecretError::MissingKey {
                secret: secret.clone(),
                key: DOCKER_CONFIG_KEY,
            })?;
        options.credentials = Credentials::from_docker_config(config, repository.registry())
            .map_err(|source| SecretError::Invalid {
                secret,
                source: Box::new(source),
            })?;
    }
    if let Some(cert_ref) = &spec.cert_secret_ref {
        let data = secret_data(cx, &cert_ref.name).await?;
        let secret = format!("{}/{}", cx.namespace(), cert_ref.name);
        // oci-client cannot present a client certificate: refuse rather than connect without it.
        if data.contains_key("tls.crt") || data.contains_key("tls.key") {
            return Err(SecretError::Unusable {
                secret,
                problem: format!(
                    "holds a client certificate (tls.crt/tls.key): mutual TLS to OCI registries \
                     is not supported yet; remove those keys to use only {CA_KEY}"
                ),
            });
        }
        let ca = data.get(CA_KEY).ok_or_else(|| SecretError::MissingKey {
            secret,
            key: CA_KEY,
        })?;
        options.ca_certificates.push(ca.clone());
    }
    Ok(options)
}

/// How `spec.ref` is resolved, validated before any network call.
#[derive(Debug)]
enum Resolution {
    Digest(Digest),
    Semver {
        constraint: Constraint,
        filter: Option<regex::Regex>,
        /// `spec.ref.semver` as written, for messages.
        expression: String,
        syntax: TagSyntax,
    },
    Tag(String),
}

/// How many versions a "no tag matches" message names.
const VERSIONS_NAMED: usize = 5;

/// What the tags offered when none matched: none at all, none past `filter`, none a version,
/// or the newest versions (at most [`VERSIONS_NAMED`]), so the message shows what to ask for.
fn tags_seen(tags: &[String], filter: Option<&regex::Regex>, syntax: TagSyntax) -> String {
    if tags.is_empty() {
        return "the repository has no tags".to_owned();
    }
    let (candidates, among): (Vec<&String>, String) = match filter {
        Some(filter) => {
            let kept: Vec<&String> = tags.iter().filter(|t| filter.is_match(t)).collect();
            if kept.is_empty() {
                return format!(
                    "none of its {} tags matches semverFilter '{filter}'",
                    tags.len()
                );
            }
            (kept, format!(" matching semverFilter '{filter}'"))
        }
        None => (tags.iter().collect(), String::new()),
    };
    let mut versions: Vec<_> = candidates
        .iter()
        .filter_map(|tag| {
            parse_version(&syntax.version_text(tag)).map(|version| (version, tag.as_str()))
        })
        .collect();
    if versions.is_empty() {
        return format!("none of the {} tags{among} is a version", candidates.len());
    }
    versions.sort();
    let newest: Vec<&str> = versions
        .iter()
        .rev()
        .take(VERSIONS_NAMED)
        .map(|(_, tag)| *tag)
        .collect();
    format!(
        "newest of {} versions{among}: {}",
        versions.len(),
        newest.join(", ")
    )
}

/// Validates `spec.ref` (digest > semver > tag); errors need a spec change. Tags are read as
/// versions by `syntax`.
fn resolution_of(
    reference: OCIRepositoryRef,
    syntax: TagSyntax,
) -> Result<Resolution, ResolveError> {
    let invalid = |field, source: Box<dyn std::error::Error + Send + Sync>| ResolveError::Ref {
        field,
        source,
    };
    if let Some(digest) = reference.digest.filter(|d| !d.is_empty()) {
        return digest
            .parse::<Digest>()
            .map(Resolution::Digest)
            .map_err(|e| invalid("digest", e.into()));
    }
    if let Some(semver) = reference.semver.filter(|s| !s.is_empty()) {
        let constraint = Constraint::parse(&semver).map_err(|e| invalid("semver", e.into()))?;
        let filter = reference
            .semver_filter
            .filter(|f| !f.is_empty())
            .map(|f| regex::Regex::new(&f))
            .transpose()
            .map_err(|e| invalid("semverFilter", e.into()))?;
        return Ok(Resolution::Semver {
            constraint,
            filter,
            expression: semver,
            syntax,
        });
    }
    Ok(Resolution::Tag(
        reference
            .tag
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| capstan_api::source::v1::DEFAULT_TAG.to_owned()),
    ))
}

/// The revision of `resolution` on the registry and its manifest digest.
async fn resolve_revision(
    repository: &Reference,
    resolution: &Resolution,
    registry: &RegistryOptions,
) -> Result<(String, Digest), ResolveError> {
    let tag = match resolution {
        Resolution::Digest(digest) => return Ok((digest.to_string(), *digest)),
        Resolution::Tag(tag) => tag.clone(),
        Resolution::Semver {
            constraint,
            filter,
            expression,
            syntax,
        } => {
            let url = reference_url(repository, "");
            let tags = match oci::list_tags(&url, registry).await {
                Ok(tags) => tags,
                Err(source) => {
                    return Err(ResolveError::ListTags {
                        url,
                        source: Box::new(source),
                    });
                }
            };
            select_semver_tag(&tags, constraint, filter.as_ref(), *syntax)
                .ok_or_else(|| ResolveError::NoMatchingTag {
                    seen: tags_seen(&tags, filter.as_ref(), *syntax),
                    url,
                    expression: expression.clone(),
                })?
                .to_owned()
        }
    };
    let url = reference_url(repository, &format!(":{tag}"));
    let digest = oci::resolve_digest(&url, registry)
        .await
        .map_err(ResolveError::Digest)?;
    Ok((oci::revision(Some(&tag), &digest), digest))
}

/// Whether the signature of `revision` must be checked (again): Flux re-verifies unless the
/// stored artifact has this revision and `SourceVerified=True` was observed for this generation.
fn needs_verification(
    object: &OCIRepository,
    status: &OCIRepositoryStatus,
    revision: &str,
) -> bool {
    let artifact_matches = status
        .artifact
        .as_ref()
        .is_some_and(|artifact| artifact.revision == revision);
    let verified = status.conditions.iter().any(|c| {
        c.type_ == condition::SOURCE_VERIFIED
            && c.status == "True"
            && c.observed_generation == object.metadata.generation
    });
    !(artifact_matches && verified)
}

/// The cosign public keys of `spec.verify.secretRef`: every `*.pub` key of the Secret.
async fn public_keys(
    cx: &StepContext<OCIRepositoryReconciler>,
    secret_name: &str,
) -> Result<Vec<PublicKey>, SecretError> {
    let data = secret_data(cx, secret_name).await?;
    let secret = format!("{}/{secret_name}", cx.namespace());
    let keys = data
        .iter()
        .filter(|(name, _)| name.ends_with(PUBLIC_KEY_SUFFIX))
        .map(|(name, pem)| {
            PublicKey::from_pem(name, pem).map_err(|source| SecretError::Key {
                secret: secret.clone(),
                source: Box::new(source),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if keys.is_empty() {
        return Err(SecretError::Unusable {
            secret,
            problem: format!("has no cosign public keys (keys named *{PUBLIC_KEY_SUFFIX})"),
        });
    }
    Ok(keys)
}

/// Keyless verification (no `spec.verify.secretRef`) is not implemented: `SourceVerified=False`
/// and a stalled error saying so.
fn refuse_keyless(cx: &mut StepContext<OCIRepositoryReconciler>) -> ReconcileError {
    let message = "failed to verify the signature using provider 'cosign keyless': keyless \
                   verification is not supported yet; set spec.verify.secretRef to a Secret \
                   with cosign public keys";
    cx.set_condition(
        condition::SOURCE_VERIFIED,
        ConditionStatus::False,
        reason::VERIFICATION_ERROR,
        message,
    );
    ReconcileError::stalled(capstan_api::meta::reason::FEATURE_GATE_DISABLED, message)
}

/// Verifies the cosign signature of the artifact `digest` with the keys of `verify.secretRef`,
/// within `timeout`. Sets `SourceVerified` either way; a failure is a `VerificationError`.
async fn verify_signature(
    cx: &mut StepContext<OCIRepositoryReconciler>,
    verify: &OCIRepositoryVerification,
    url: &str,
    revision: &str,
    registry: &RegistryOptions,
    timeout: std::time::Duration,
) -> Result<(), ReconcileError> {
    let provider = "cosign";
    let Some(secret_ref) = &verify.secret_ref else {
        return Err(refuse_keyless(cx));
    };
    let outcome = match public_keys(cx, &secret_ref.name).await {
        Ok(keys) => match tokio::time::timeout(timeout, oci::verify(url, &keys, registry)).await {
            Ok(result) => result.map_err(|e| error_chain(&e)),
            Err(_) => Err(format!("timed out after {timeout:?}")),
        },
        Err(error) => Err(error_chain(&error)),
    };
    match outcome {
        Ok(verified) => {
            tracing::debug!(%revision, key = %verified.key, "signature verified");
            cx.set_condition(
                condition::SOURCE_VERIFIED,
                ConditionStatus::True,
                capstan_api::meta::reason::SUCCEEDED,
                &format!("verified signature of revision {revision}"),
            );
            Ok(())
        }
        Err(error) => {
            let message =
                format!("failed to verify the signature using provider '{provider}': {error}");
            cx.set_condition(
                condition::SOURCE_VERIFIED,
                ConditionStatus::False,
                reason::VERIFICATION_ERROR,
                &message,
            );
            Err(ReconcileError::transient(
                reason::VERIFICATION_ERROR,
                message,
            ))
        }
    }
}

/// Resolves `spec.ref` to a revision and decides whether the artifact must be pulled.
///
/// Sets `FetchFailed=True` on failure and removes it when the stored artifact is up to date.
fn resolve_step(cx: &mut StepContext<OCIRepositoryReconciler>) -> StepFuture<'_> {
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
        if cx
            .object
            .spec
            .verify
            .as_ref()
            .is_some_and(|verify| verify.secret_ref.is_none())
        {
            return Err(refuse_keyless(cx));
        }
        let repository = repository_of(&cx.object.spec.url)
            .map_err(|e| ReconcileError::from_error(ErrorClass::Stalled, reason::URL_INVALID, e))?;
        let syntax = TagSyntax::of(
            cx.object
                .spec
                .layer_selector
                .as_ref()
                .and_then(|selector| selector.media_type.as_deref()),
        );
        let resolution = match resolution_of(cx.object.reference(), syntax) {
            Ok(resolution) => resolution,
            Err(error) => {
                let message = error_chain(&error);
                return Err(fetch_failed(
                    cx,
                    ErrorClass::Stalled,
                    reason::OCI_PULL_FAILED,
                    message,
                )
                .with_source(error));
            }
        };
        let timeout = cx
            .object
            .timeout()
            .map_err(|e| ReconcileError::from_error(ErrorClass::Stalled, "InvalidTimeout", e))?;
        let registry = match registry_options(cx, &repository).await {
            Ok(registry) => registry,
            Err(error) => return Err(crate::sources::authentication_failed(cx, error)),
        };
        let resolved = tokio::time::timeout(
            timeout,
            resolve_revision(&repository, &resolution, &registry),
        )
        .await
        .unwrap_or(Err(ResolveError::Timeout(timeout)));
        let (revision, digest) = match resolved {
            Ok(resolved) => resolved,
            Err(error) => {
                let message = error_chain(&error);
                return Err(fetch_failed(
                    cx,
                    ErrorClass::Transient,
                    reason::OCI_PULL_FAILED,
                    message,
                )
                .with_source(error));
            }
        };
        match cx.object.spec.verify.clone() {
            None => cx.remove_condition(condition::SOURCE_VERIFIED),
            Some(verify) => {
                if needs_verification(&cx.object, &cx.status, &revision) {
                    let url = reference_url(&repository, &format!("@{digest}"));
                    verify_signature(cx, &verify, &url, &revision, &registry, timeout).await?;
                }
            }
        }
        let storage = cx.reconciler.storage().clone();
        let up_to_date = cx
            .status
            .artifact
            .as_ref()
            .is_some_and(|artifact| artifact.revision == revision && storage.exists(artifact))
            && cx.status.observed_ignore == cx.object.spec.ignore
            && cx.status.observed_layer_selector == cx.object.spec.layer_selector;
        if up_to_date {
            tracing::debug!(%revision, "artifact up to date, skipping pull");
            cx.remove_condition(condition::FETCH_FAILED);
        } else {
            cx.state.pull = Some(reference_url(&repository, &format!("@{digest}")));
        }
        cx.state.registry = registry;
        cx.state.revision = Some(revision);
        Ok(StepOutcome::next())
    })
}

fn layer_selector_of(object: &OCIRepository) -> LayerSelector {
    let selector = object.spec.layer_selector.as_ref();
    LayerSelector {
        media_type: selector.and_then(|s| s.media_type.clone()),
        operation: match selector.map(capstan_api::source::v1::OCILayerSelector::operation) {
            Some(OCILayerOperation::Copy) => LayerOperation::Copy,
            _ => LayerOperation::Extract,
        },
    }
}

fn read_error(path: &Path, source: std::io::Error) -> capstan_source::Error {
    capstan_source::Error::Io {
        action: "read",
        path: path.to_owned(),
        source,
    }
}

/// Packs (extract) or copies (copy) the pulled layer into the artifact's file.
fn store_layer(
    storage: &Storage,
    artifact: &mut Artifact,
    pulled: &Path,
    operation: LayerOperation,
    ignore: Option<&str>,
) -> Result<(), (ErrorClass, capstan_source::Error)> {
    match operation {
        LayerOperation::Copy => {
            let file = std::fs::File::open(pulled)
                .map_err(|e| (ErrorClass::Transient, read_error(pulled, e)))?;
            storage
                .store(artifact, std::io::BufReader::new(file))
                .map_err(|e| (ErrorClass::Transient, e))
        }
        LayerOperation::Extract => {
            let sourceignore = pulled.join(".sourceignore");
            let text = match std::fs::read_to_string(&sourceignore) {
                Ok(text) => Some(text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => {
                    return Err((ErrorClass::Transient, read_error(&sourceignore, e)));
                }
            };
            let filter = IgnoreFilter::for_bucket(text.as_deref(), ignore)
                .map_err(|e| (ErrorClass::Stalled, e))?;
            storage
                .archive(artifact, pulled, Some(&filter))
                .map_err(|e| (ErrorClass::Transient, e))
        }
    }
}

/// Pulls the resolved manifest and layer and stores the artifact; does nothing when the stored
/// artifact is up to date.
///
/// Sets `FetchFailed=True` for pull failures and `StorageOperationFailed=True` for storage
/// failures, and removes them on success.
fn fetch_step(cx: &mut StepContext<OCIRepositoryReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        let (Some(pull), Some(revision)) = (cx.state.pull.clone(), cx.state.revision.clone())
        else {
            return Ok(StepOutcome::next());
        };
        let dir = capstan_source::temp::dir("ocirepository").map_err(|e| {
            ReconcileError::transient(
                reason::DIR_CREATION_FAILED,
                format!("cannot create a temporary directory: {}", error_chain(&e)),
            )
            .with_source(e)
        })?;
        let selector = layer_selector_of(&cx.object);
        let operation = selector.operation;
        let target = dir.path().join("pulled");
        let options = PullOptions {
            layer_selector: selector,
            ..PullOptions::default()
        };
        let timeout = cx
            .object
            .timeout()
            .map_err(|e| ReconcileError::from_error(ErrorClass::Stalled, "InvalidTimeout", e))?;
        let pulled = tokio::time::timeout(
            timeout,
            oci::pull(&pull, &target, &options, &cx.state.registry),
        )
        .await;
        let pulled = match pulled {
            Ok(Ok(pulled)) => pulled,
            Ok(Err(error)) => {
                let reason = match error {
                    capstan_source::Error::LayerNotFound { .. }
                    | capstan_source::Error::UnsupportedManifest { .. } => {
                        reason::OCI_LAYER_OPERATION_FAILED
                    }
                    _ => reason::OCI_PULL_FAILED,
                };
                let message = format!(
                    "failed to pull artifact from '{pull}': {}",
                    error_chain(&error)
                );
                return Err(
                    fetch_failed(cx, ErrorClass::Transient, reason, message).with_source(error)
                );
            }
            Err(_) => {
                return Err(fetch_failed(
                    cx,
                    ErrorClass::Transient,
                    reason::OCI_PULL_FAILED,
                    format!("failed to pull artifact from '{pull}': timed out after {timeout:?}"),
                ));
            }
        };
        cx.remove_condition(condition::FETCH_FAILED);

        store_pulled(cx, dir, &target, operation, &revision, pulled).await
    })
}

/// Stores the layer `pulled` to `target` (in `dir`, removed afterwards) as a new artifact for
/// `revision`, kept in `cx.state` for the store step. Sets `StorageOperationFailed=True` on
/// failure and removes it on success.
async fn store_pulled(
    cx: &mut StepContext<OCIRepositoryReconciler>,
    dir: tempfile::TempDir,
    target: &Path,
    operation: LayerOperation,
    revision: &str,
    pulled: oci::Pulled,
) -> Result<StepOutcome, ReconcileError> {
    let target = target.to_owned();
    let storage = cx.reconciler.storage().clone();
    let mut artifact = storage.new_artifact(
        KIND,
        &cx.namespace(),
        &cx.name(),
        revision,
        &revision_file_name(revision, "tar.gz"),
    );
    artifact.metadata = pulled.annotations;
    let ignore = cx.object.spec.ignore.clone();
    let result = tokio::task::spawn_blocking(move || {
        let stored = store_layer(
            &storage,
            &mut artifact,
            &target,
            operation,
            ignore.as_deref(),
        );
        drop(dir);
        stored.map(|()| artifact)
    })
    .await;
    match result {
        Ok(Ok(artifact)) => {
            cx.remove_condition(condition::STORAGE_OPERATION_FAILED);
            cx.state.artifact = Some(artifact);
            Ok(StepOutcome::next())
        }
        Ok(Err((class, error))) => {
            let message = format!("failed to store artifact: {}", error_chain(&error));
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
            "storage task failed",
        )
        .with_source(error)),
    }
}

/// Records the artifact in `status.artifact` and `status.url`, sets `ArtifactInStorage=True`
/// and the `Ready` message, and garbage-collects older artifacts (failures are logged, not
/// fatal).
fn store_step(cx: &mut StepContext<OCIRepositoryReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        if let Some(artifact) = cx.state.artifact.take() {
            cx.status.url = Some(artifact.url.clone());
            cx.status.artifact = Some(artifact);
            cx.status.observed_ignore.clone_from(&cx.object.spec.ignore);
            cx.status
                .observed_layer_selector
                .clone_from(&cx.object.spec.layer_selector);
        }
        let Some(artifact) = cx.status.artifact.clone() else {
            return Ok(StepOutcome::next());
        };
        let message = format!("stored artifact for digest '{}'", artifact.revision);
        let storage = cx.reconciler.storage().clone();
        crate::sources::announce_new_artifact(cx, &artifact, &message).await;
        crate::sources::artifact_stored(cx, &storage, artifact, message).await;
        Ok(StepOutcome::next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: serde_json::Value) -> OCIRepositorySpec {
        let mut value = serde_json::json!({"url": "oci://example.invalid/app", "interval": "1m"});
        let serde_json::Value::Object(extra) = extra else {
            panic!("extra fields must be an object");
        };
        value.as_object_mut().unwrap().extend(extra);
        serde_json::from_value(value).unwrap()
    }

    fn tags(names: &[&str]) -> Vec<String> {
        names.iter().map(|&n| n.to_owned()).collect()
    }

    #[test]
    fn refuses_fields_not_implemented_yet() {
        assert!(unsupported_fields(&spec(serde_json::json!({"provider": "generic"}))).is_empty());
        assert!(
            unsupported_fields(&spec(serde_json::json!({
                "verify": {"provider": "cosign", "secretRef": {"name": "keys"}},
            })))
            .is_empty()
        );
        assert_eq!(
            unsupported_fields(&spec(serde_json::json!({
                "provider": "aws",
                "verify": {"provider": "notation"},
                "serviceAccountName": "sa",
            }))),
            [
                "spec.verify.provider 'notation'",
                "spec.provider",
                "spec.serviceAccountName"
            ]
        );
    }

    #[test]
    fn verification_is_skipped_only_for_a_verified_stored_revision() {
        let mut object = OCIRepository::new("app", spec(serde_json::json!({})));
        object.metadata.generation = Some(2);
        let mut status = OCIRepositoryStatus {
            artifact: Some(
                serde_json::from_value::<Artifact>(serde_json::json!({
                    "path": "ocirepository/default/app/aa.tar.gz",
                    "url": "http://storage/ocirepository/default/app/aa.tar.gz",
                    "revision": "v1@sha256:aa",
                    "digest": "sha256:00",
                    "lastUpdateTime": "2026-01-01T00:00:00Z",
                }))
                .unwrap(),
            ),
            ..OCIRepositoryStatus::default()
        };
        assert!(needs_verification(&object, &status, "v1@sha256:aa"));
        let verified = |status: &str, generation: i64| {
            serde_json::from_value::<capstan_api::meta::Condition>(serde_json::json!({
                "type": condition::SOURCE_VERIFIED,
                "status": status,
                "reason": "Succeeded",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": generation,
            }))
            .unwrap()
        };
        status.conditions = vec![verified("True", 2)];
        assert!(!needs_verification(&object, &status, "v1@sha256:aa"));
        assert!(needs_verification(&object, &status, "v1@sha256:bb"));
        status.conditions = vec![verified("True", 1)];
        assert!(needs_verification(&object, &status, "v1@sha256:aa"));
        status.conditions = vec![verified("False", 2)];
        assert!(needs_verification(&object, &status, "v1@sha256:aa"));
    }

    #[test]
    fn repository_urls_need_the_scheme_and_no_tag() {
        let repository = repository_of("oci://127.0.0.1:5000/fleet/apps").unwrap();
        assert_eq!(repository.registry(), "127.0.0.1:5000");
        assert_eq!(repository.repository(), "fleet/apps");
        assert_eq!(
            reference_url(&repository, ":v1"),
            "oci://127.0.0.1:5000/fleet/apps:v1"
        );
        assert!(repository_of("https://ghcr.io/org/app").is_err());
        assert!(repository_of("oci://ghcr.io/org/app:v1").is_err());
        assert!(repository_of("oci://ghcr.io/org/app@sha256:00").is_err());
        assert!(repository_of("oci://ghcr.io").is_err());
    }

    #[test]
    fn semver_picks_the_highest_matching_tag() {
        let constraint = Constraint::parse(">=1.0.0 <2.0.0").unwrap();
        let all = tags(&[
            "latest",
            "v1.0.0",
            "v1.1.0",
            "v2.0.0",
            "1.0.5",
            "v1.2.0-rc.1",
        ]);
        assert_eq!(
            select_semver_tag(&all, &constraint, None, TagSyntax::Plain),
            Some("v1.1.0")
        );
        let filter = regex::Regex::new(r"^\d").unwrap();
        assert_eq!(
            select_semver_tag(&all, &constraint, Some(&filter), TagSyntax::Plain),
            Some("1.0.5")
        );
        let none = Constraint::parse(">=3").unwrap();
        assert_eq!(select_semver_tag(&all, &none, None, TagSyntax::Plain), None);
    }

    #[test]
    fn helm_chart_tags_read_underscore_as_plus() {
        let all = tags(&["1.0.0", "1.0.1_build.2", "0.9.0_x"]);
        let constraint = Constraint::parse(">=1.0.0").unwrap();
        assert_eq!(
            select_semver_tag(&all, &constraint, None, TagSyntax::HelmChart),
            Some("1.0.1_build.2")
        );
        assert_eq!(
            select_semver_tag(&all, &constraint, None, TagSyntax::Plain),
            Some("1.0.0"),
            "outside Helm charts a tag with `_` is no version"
        );
        let chart = Some(capstan_source::helm::oci::CHART_LAYER_MEDIA_TYPE);
        assert_eq!(TagSyntax::of(chart), TagSyntax::HelmChart);
        assert_eq!(TagSyntax::of(None), TagSyntax::Plain);
        assert_eq!(
            TagSyntax::of(Some("application/vnd.cncf.flux.content.v1.tar+gzip")),
            TagSyntax::Plain
        );
    }

    #[test]
    fn no_match_says_what_the_tags_offered() {
        assert_eq!(
            tags_seen(&[], None, TagSyntax::Plain),
            "the repository has no tags"
        );
        let all = tags(&["latest", "v1.0.0", "v10.2.0", "v2.0.0", "1.0.5", "main"]);
        assert_eq!(
            tags_seen(&all, None, TagSyntax::Plain),
            "newest of 4 versions: v10.2.0, v2.0.0, 1.0.5, v1.0.0"
        );
        let filter = regex::Regex::new("^v1").unwrap();
        assert_eq!(
            tags_seen(&all, Some(&filter), TagSyntax::Plain),
            "newest of 2 versions matching semverFilter '^v1': v10.2.0, v1.0.0"
        );
        let filter = regex::Regex::new("-rc").unwrap();
        assert_eq!(
            tags_seen(&all, Some(&filter), TagSyntax::Plain),
            "none of its 6 tags matches semverFilter '-rc'"
        );
        let many: Vec<String> = (0..9).map(|i| format!("1.{i}.0")).collect();
        assert_eq!(
            tags_seen(&many, None, TagSyntax::Plain),
            "newest of 9 versions: 1.8.0, 1.7.0, 1.6.0, 1.5.0, 1.4.0"
        );
        assert_eq!(
            tags_seen(&tags(&["latest", "main"]), None, TagSyntax::Plain),
            "none of the 2 tags is a version"
        );
    }

    #[test]
    fn references_resolve_by_digest_then_semver_then_tag() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let both = OCIRepositoryRef {
            digest: Some(digest.clone()),
            semver: Some(">=1".into()),
            tag: Some("v1".into()),
            ..OCIRepositoryRef::default()
        };
        assert!(
            matches!(resolution_of(both, TagSyntax::Plain), Ok(Resolution::Digest(d)) if d.to_string() == digest)
        );
        let semver = OCIRepositoryRef {
            semver: Some(">=1".into()),
            semver_filter: Some(".*-rc".into()),
            tag: Some("v1".into()),
            ..OCIRepositoryRef::default()
        };
        assert!(matches!(
            resolution_of(semver, TagSyntax::Plain),
            Ok(Resolution::Semver {
                filter: Some(_),
                ..
            })
        ));
        assert!(matches!(
            resolution_of(OCIRepositoryRef::default(), TagSyntax::Plain),
            Ok(Resolution::Tag(tag)) if tag == "latest"
        ));
        let bad_filter = OCIRepositoryRef {
            semver: Some(">=1".into()),
            semver_filter: Some("(".into()),
            ..OCIRepositoryRef::default()
        };
        let error = resolution_of(bad_filter, TagSyntax::Plain).unwrap_err();
        assert!(
            error_chain(&error).starts_with("invalid spec.ref.semverFilter: regex parse error"),
            "{error}"
        );
        let bad_digest = OCIRepositoryRef {
            digest: Some("sha256:nothex".into()),
            ..OCIRepositoryRef::default()
        };
        let error = resolution_of(bad_digest, TagSyntax::Plain).unwrap_err();
        assert!(
            error_chain(&error).starts_with("invalid spec.ref.digest: invalid digest"),
            "{error}"
        );
    }

    #[test]
    fn layer_selector_defaults_to_extract() {
        let mut object = OCIRepository::new("app", spec(serde_json::json!({})));
        assert_eq!(layer_selector_of(&object), LayerSelector::default());
        object.spec = spec(serde_json::json!({
            "layerSelector": {"mediaType": "application/x-tar", "operation": "copy"}
        }));
        assert_eq!(
            layer_selector_of(&object),
            LayerSelector {
                media_type: Some("application/x-tar".into()),
                operation: LayerOperation::Copy,
            }
        );
    }

    #[test]
    fn chains_error_causes_once() {
        let inner = std::io::Error::other("manifest unknown");
        let outer = read_error(Path::new("/x"), inner);
        let message = error_chain(&outer);
        assert!(message.starts_with("cannot read /x"), "{message}");
        assert_eq!(message.matches("manifest unknown").count(), 1, "{message}");
    }
}
