//! `source.toolkit.fluxcd.io/v1`: GitRepository, OCIRepository, Bucket, HelmRepository,
//! HelmChart and ExternalArtifact.

mod bucket;
mod external_artifact;
mod git_repository;
mod helm_chart;
mod helm_repository;
mod oci_repository;

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use bucket::*;
pub use external_artifact::*;
pub use git_repository::*;
pub use helm_chart::*;
pub use helm_repository::*;
pub use oci_repository::*;

use crate::meta::{Artifact, Condition, LocalObjectReference};

crate::kind::group_version!("source.toolkit.fluxcd.io", "v1");

/// Default timeout of source operations (clone, pull, download) when `spec.timeout` is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Condition types specific to sources.
pub mod condition {
    /// An included GitRepository artifact is not available.
    pub const INCLUDE_UNAVAILABLE: &str = "IncludeUnavailable";
    pub use crate::meta::condition::{
        ARTIFACT_IN_STORAGE, ARTIFACT_OUTDATED, BUILD_FAILED, FETCH_FAILED, SOURCE_VERIFIED,
        STORAGE_OPERATION_FAILED,
    };
}

/// Condition reasons specific to sources.
pub mod reason {
    /// A Git operation succeeded.
    pub const GIT_OPERATION_SUCCEEDED: &str = "GitOperationSucceeded";
    /// A Git operation failed.
    pub const GIT_OPERATION_FAILED: &str = "GitOperationFailed";
    /// A Helm chart was pulled.
    pub const CHART_PULL_SUCCEEDED: &str = "ChartPullSucceeded";
    /// Pulling a Helm chart failed.
    pub const CHART_PULL_FAILED: &str = "ChartPullFailed";
    /// A Helm chart was packaged.
    pub const CHART_PACKAGE_SUCCEEDED: &str = "ChartPackageSucceeded";
    /// Packaging a Helm chart failed.
    pub const CHART_PACKAGE_FAILED: &str = "ChartPackageFailed";
    /// An OCI pull failed.
    pub const OCI_PULL_FAILED: &str = "OCIArtifactPullFailed";
    /// An OCI layer could not be processed.
    pub const OCI_LAYER_OPERATION_FAILED: &str = "OCIArtifactLayerOperationFailed";
    /// A bucket operation failed.
    pub const BUCKET_OPERATION_FAILED: &str = "BucketOperationFailed";
    /// A Helm repository index operation failed.
    pub const INDEX_FETCH_FAILED: &str = "IndexationFailed";
    /// The artifact directory could not be created.
    pub const DIR_CREATION_FAILED: &str = "DirectoryCreationFailed";
    /// Archiving the artifact failed.
    pub const ARCHIVE_OPERATION_FAILED: &str = "ArchiveOperationFailed";
    /// Patching the object failed.
    pub const PATCH_OPERATION_FAILED: &str = "PatchOperationFailed";
    /// The STS configuration is invalid.
    pub const INVALID_STS_CONFIGURATION: &str = "InvalidSTSConfiguration";
    /// The provider configuration is invalid.
    pub const INVALID_PROVIDER_CONFIGURATION: &str = "InvalidProviderConfiguration";
    pub use crate::meta::reason::{
        ARTIFACT_UP_TO_DATE, AUTHENTICATION_FAILED, URL_INVALID, VERIFICATION_ERROR,
    };
}

/// What every source kind offers to its consumers.
pub trait Source {
    /// The artifact currently in storage, if any.
    fn artifact(&self) -> Option<&Artifact>;
    /// The status conditions (empty without status).
    fn conditions(&self) -> &[Condition];
    /// How often the source is fetched.
    fn interval(&self) -> Result<Duration, crate::Error>;
    /// Whether reconciliation is suspended.
    fn suspended(&self) -> bool;
}

macro_rules! impl_source {
    ($kind:ty) => {
        impl $crate::source::v1::Source for $kind {
            fn artifact(&self) -> Option<&$crate::meta::Artifact> {
                self.status.as_ref().and_then(|s| s.artifact.as_ref())
            }
            fn conditions(&self) -> &[$crate::meta::Condition] {
                self.status
                    .as_ref()
                    .map_or(&[], |s| s.conditions.as_slice())
            }
            fn interval(&self) -> Result<::std::time::Duration, $crate::Error> {
                <$kind>::interval(self)
            }
            fn suspended(&self) -> bool {
                self.spec.suspend.unwrap_or(false)
            }
        }
    };
}
pub(crate) use impl_source;

/// Which signature scheme verifies an OCI artifact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OciVerificationProvider {
    /// Sigstore cosign signatures (the default).
    #[default]
    Cosign,
    /// Notary Project notation signatures.
    Notation,
}

/// A keyless-signature identity to accept: regular expressions for OIDC issuer and subject.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OidcIdentityMatch {
    /// Regular expression matching the OIDC issuer.
    pub issuer: String,
    /// Regular expression matching the certificate subject.
    pub subject: String,
}

/// How to verify the signature of an OCI artifact or Helm chart.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
// Flux requires `provider` and defaults it; the API server fills the default before
// validation, while raw manifests may omit it, so the Rust field stays optional.
#[schemars(extend("required" = ["provider"]))]
pub struct OciVerification {
    /// The verification scheme; `cosign` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "cosign"))]
    pub provider: Option<OciVerificationProvider>,
    /// A Secret with trusted public keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// Identities accepted for keyless verification.
    #[serde(
        default,
        rename = "matchOIDCIdentity",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub match_oidc_identity: Vec<OidcIdentityMatch>,
}

/// The cloud provider used for secret-less authentication.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CloudProvider {
    /// No cloud provider: credentials come from `secretRef` (the default).
    #[default]
    Generic,
    /// Amazon Web Services.
    Aws,
    /// Microsoft Azure.
    Azure,
    /// Google Cloud Platform.
    Gcp,
}

#[cfg(test)]
mod tests;
