//! The OCIRepository kind.

use std::time::Duration;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    CloudProvider, DEFAULT_TIMEOUT, OciVerificationProvider, OidcIdentityMatch, impl_source,
};
use crate::duration::{INTERVAL_PATTERN, TIMEOUT_PATTERN};
use crate::meta::{Artifact, Condition, LocalObjectReference, ReconcileRequestStatus};

/// The tag pulled when `spec.ref` is absent.
pub const DEFAULT_TAG: &str = "latest";

/// Desired state of an OCIRepository: an OCI artifact to pull and store.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "source.toolkit.fluxcd.io",
    version = "v1",
    kind = "OCIRepository",
    plural = "ocirepositories",
    namespaced,
    status = "OCIRepositoryStatus",
    derive = "PartialEq",
    shortname = "ocirepo",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-sources",
    doc = "OCIRepository is the Schema for the ocirepositories API.",
    printcolumn = r#"{"name":"URL","type":"string","jsonPath":".spec.url"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct OCIRepositorySpec {
    /// Artifact address, `oci://<host>/<org>/<repo>` without tag or digest.
    #[schemars(extend("pattern" = "^oci://.*$"))]
    pub url: String,
    /// The artifact version to pull; tag `latest` when absent.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<OCIRepositoryRef>,
    /// Which layer to take and how; the first layer, extracted, when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer_selector: Option<OCILayerSelector>,
    /// Provider for secret-less authentication; `generic` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "generic"))]
    pub provider: Option<CloudProvider>,
    /// Image pull secret (`kubernetes.io/dockerconfigjson`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// Signature verification of the artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<OCIRepositoryVerification>,
    /// Service account whose image pull secrets are used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Secret with TLS client certificate and CA (`tls.crt`, `tls.key`, `ca.crt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_secret_ref: Option<LocalObjectReference>,
    /// Secret with proxy settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_secret_ref: Option<LocalObjectReference>,
    /// How often the registry is checked.
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub interval: String,
    /// Timeout for remote operations; 60s when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "60s", "pattern" = TIMEOUT_PATTERN))]
    pub timeout: Option<String>,
    /// `.gitignore`-style patterns excluded from the artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore: Option<String>,
    /// Allow plain HTTP registries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// Stop reconciling this source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

/// An OCI artifact version. Precedence: `digest`, `semver`, `tag`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OCIRepositoryRef {
    /// Image digest, `sha256:<hex>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// SemVer range; the highest matching tag is pulled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semver: Option<String>,
    /// Regular expression filtering tags before the SemVer range is applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semver_filter: Option<String>,
    /// Tag to pull.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// What to do with the selected layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OCILayerOperation {
    /// Extract the layer's tarball (the default).
    #[default]
    Extract,
    /// Store the layer as is.
    Copy,
}

/// Selects one layer of an OCI artifact.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OCILayerSelector {
    /// Media type of the layer; the first layer when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// What to do with the layer; `extract` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<OCILayerOperation>,
}

impl OCILayerSelector {
    /// The effective operation; [`OCILayerOperation::Extract`] when absent.
    pub fn operation(&self) -> OCILayerOperation {
        self.operation.unwrap_or_default()
    }
}

/// Signature verification of an OCI artifact.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
// Flux requires `provider` and defaults it; the API server fills the default before
// validation, while raw manifests may omit it, so the Rust field stays optional.
#[schemars(extend("required" = ["provider"]))]
pub struct OCIRepositoryVerification {
    /// The verification scheme; `cosign` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "cosign"))]
    pub provider: Option<OciVerificationProvider>,
    /// Secret with trusted public keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// Identities accepted for keyless verification.
    #[serde(
        default,
        rename = "matchOIDCIdentity",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub match_oidc_identity: Vec<OidcIdentityMatch>,
    /// Secret with a Sigstore trusted root, for private Sigstore deployments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trusted_root_secret_ref: Option<LocalObjectReference>,
}

/// Observed state of an OCIRepository.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = {"observedGeneration": -1}))]
pub struct OCIRepositoryStatus {
    /// The last reconciled generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Address of the artifact in storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The last successfully produced artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
    /// `spec.ignore` as used for the current artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_ignore: Option<String>,
    /// `spec.layerSelector` as used for the current artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_layer_selector: Option<OCILayerSelector>,
    /// Reconcile-request bookkeeping.
    #[serde(flatten)]
    pub reconcile_request: ReconcileRequestStatus,
}

impl OCIRepository {
    /// `spec.interval` as a duration.
    pub fn interval(&self) -> Result<Duration, crate::Error> {
        crate::duration::field("spec.interval", &self.spec.interval)
    }

    /// `spec.timeout` as a duration; [`DEFAULT_TIMEOUT`] (60s) when absent.
    pub fn timeout(&self) -> Result<Duration, crate::Error> {
        crate::duration::field_or(
            "spec.timeout",
            self.spec.timeout.as_deref(),
            DEFAULT_TIMEOUT,
        )
    }

    /// The effective reference: `spec.ref`, or tag [`DEFAULT_TAG`] when absent or empty.
    pub fn reference(&self) -> OCIRepositoryRef {
        match &self.spec.reference {
            Some(r) if *r != OCIRepositoryRef::default() => r.clone(),
            _ => OCIRepositoryRef {
                tag: Some(DEFAULT_TAG.to_owned()),
                ..OCIRepositoryRef::default()
            },
        }
    }

    /// The effective provider; [`CloudProvider::Generic`] when absent.
    pub fn provider(&self) -> CloudProvider {
        self.spec.provider.unwrap_or_default()
    }
}

impl_source!(OCIRepository);

crate::flux_kind! {
    OCIRepository: OCIRepositoryStatus,
    singular = "ocirepository",
    plural = "ocirepositories",
    short_names = ["ocirepo"],
    display = "OCIRepository source",
    role = Source,
}
crate::flux_status!(OCIRepositoryStatus, artifact);
