//! The GitRepository kind.

use std::time::Duration;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{DEFAULT_TIMEOUT, impl_source};
use crate::duration::{INTERVAL_PATTERN, TIMEOUT_PATTERN};
use crate::meta::{Artifact, Condition, LocalObjectReference, ReconcileRequestStatus};

/// The branch checked out when `spec.ref` is absent.
pub const DEFAULT_BRANCH: &str = "master";

/// Desired state of a GitRepository: a Git repository to fetch and package as an artifact.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "source.toolkit.fluxcd.io",
    version = "v1",
    kind = "GitRepository",
    plural = "gitrepositories",
    namespaced,
    status = "GitRepositoryStatus",
    derive = "PartialEq",
    shortname = "gitrepo",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-sources",
    doc = "GitRepository is the Schema for the gitrepositories API.",
    printcolumn = r#"{"name":"URL","type":"string","jsonPath":".spec.url"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "message": "serviceAccountName can only be set when provider is 'azure' or 'aws'",
    "rule": "!has(self.serviceAccountName) || (has(self.provider) && (self.provider == 'azure' || self.provider == 'aws'))",
}]))]
pub struct GitRepositorySpec {
    /// Repository URL (`http`, `https` or `ssh`).
    #[schemars(extend("pattern" = "^(http|https|ssh)://.*$"))]
    pub url: String,
    /// Secret with authentication credentials (`username`/`password`, `bearerToken`,
    /// `identity`/`known_hosts`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// Provider for secret-less authentication; `generic` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<GitProvider>,
    /// Service account used for provider authentication (`azure`, `aws` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// How often the repository is fetched.
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub interval: String,
    /// Timeout for Git operations; 60s when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "60s", "pattern" = TIMEOUT_PATTERN))]
    pub timeout: Option<String>,
    /// The Git reference to check out; the `master` branch when absent.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<GitRepositoryRef>,
    /// Signature verification of the checked-out commit or tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<GitRepositoryVerification>,
    /// Secret with proxy settings (`address`, `username`, `password`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_secret_ref: Option<LocalObjectReference>,
    /// `.gitignore`-style patterns excluded from the artifact, replacing the defaults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore: Option<String>,
    /// Stop reconciling this source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Clone submodules too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recurse_submodules: Option<bool>,
    /// Other GitRepositories whose artifacts are copied into this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<GitRepositoryInclude>,
    /// Directories to check out (sparse checkout); everything when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sparse_checkout: Vec<String>,
}

/// Provider for secret-less Git authentication.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GitProvider {
    /// Credentials from `secretRef` (the default).
    #[default]
    Generic,
    /// AWS CodeCommit with IAM.
    Aws,
    /// Azure DevOps with workload identity.
    Azure,
    /// GitHub App.
    Github,
}

/// A Git reference. Precedence: `commit`, `name`, `semver`, `tag`, `branch`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitRepositoryRef {
    /// Branch to check out; `master` when no other field is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Tag to check out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// SemVer range; the highest matching tag is checked out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semver: Option<String>,
    /// Full reference name, e.g. `refs/pull/42/head`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Commit SHA to check out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// Which Git object's signature is verified.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum GitVerificationMode {
    /// The legacy lower-case spelling of [`GitVerificationMode::Head`].
    #[serde(rename = "head")]
    LegacyHead,
    /// The commit at HEAD (the default).
    #[default]
    #[serde(rename = "HEAD")]
    Head,
    /// The tag object.
    Tag,
    /// Both the tag and the commit it points to.
    #[serde(rename = "TagAndHEAD")]
    TagAndHead,
}

impl GitVerificationMode {
    /// Whether the HEAD commit is verified.
    pub fn verifies_head(self) -> bool {
        matches!(self, Self::LegacyHead | Self::Head | Self::TagAndHead)
    }

    /// Whether the tag object is verified.
    pub fn verifies_tag(self) -> bool {
        matches!(self, Self::Tag | Self::TagAndHead)
    }
}

/// OpenPGP signature verification of a GitRepository.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitRepositoryVerification {
    /// What to verify; `HEAD` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "HEAD"))]
    pub mode: Option<GitVerificationMode>,
    /// Secret with trusted public keys.
    pub secret_ref: LocalObjectReference,
}

/// Another GitRepository's artifact to copy into this one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitRepositoryInclude {
    /// The GitRepository to include.
    pub repository: LocalObjectReference,
    /// Path in the included artifact to copy from; its root when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_path: Option<String>,
    /// Path to copy to; the included repository's name when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_path: Option<String>,
}

impl GitRepositoryInclude {
    /// The destination path, defaulting to the included repository's name.
    pub fn to_path(&self) -> &str {
        self.to_path.as_deref().unwrap_or(&self.repository.name)
    }
}

/// Observed state of a GitRepository.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = {"observedGeneration": -1}))]
pub struct GitRepositoryStatus {
    /// The last reconciled generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The last successfully produced artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
    /// Artifacts of the included repositories, in `spec.include` order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub included_artifacts: Vec<Artifact>,
    /// `spec.ignore` as used for the current artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_ignore: Option<String>,
    /// `spec.recurseSubmodules` as used for the current artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_recurse_submodules: Option<bool>,
    /// `spec.include` as used for the current artifact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed_include: Vec<GitRepositoryInclude>,
    /// `spec.sparseCheckout` as used for the current artifact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed_sparse_checkout: Vec<String>,
    /// The verification mode used for the current artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_verification_mode: Option<String>,
    /// Reconcile-request bookkeeping.
    #[serde(flatten)]
    pub reconcile_request: ReconcileRequestStatus,
}

impl GitRepository {
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

    /// When to reconcile again after success: the interval.
    pub fn requeue_after(&self) -> Result<Duration, crate::Error> {
        self.interval()
    }

    /// The effective reference: `spec.ref`, or branch [`DEFAULT_BRANCH`] when absent or empty.
    pub fn reference(&self) -> GitRepositoryRef {
        match &self.spec.reference {
            Some(r) if *r != GitRepositoryRef::default() => r.clone(),
            _ => GitRepositoryRef {
                branch: Some(DEFAULT_BRANCH.to_owned()),
                ..GitRepositoryRef::default()
            },
        }
    }

    /// The effective provider; [`GitProvider::Generic`] when absent.
    pub fn provider(&self) -> GitProvider {
        self.spec.provider.unwrap_or_default()
    }
}

impl GitRepositoryVerification {
    /// The effective mode; [`GitVerificationMode::Head`] when absent.
    pub fn mode(&self) -> GitVerificationMode {
        self.mode.unwrap_or_default()
    }
}

impl_source!(GitRepository);

crate::flux_kind! {
    GitRepository: GitRepositoryStatus,
    singular = "gitrepository",
    plural = "gitrepositories",
    short_names = ["gitrepo"],
    display = "GitRepository source",
    role = Source,
}
crate::flux_status!(GitRepositoryStatus, artifact);
