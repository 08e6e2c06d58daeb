//! The HelmRepository kind.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CloudProvider, impl_source};
use crate::duration::{INTERVAL_PATTERN, TIMEOUT_PATTERN};
use crate::meta::{Artifact, Condition, LocalObjectReference, ReconcileRequestStatus};

/// Interval used when `spec.interval` is absent (OCI repositories need none).
pub const DEFAULT_HELM_REPOSITORY_INTERVAL: Duration = Duration::from_secs(60);

/// Timeout used when `spec.timeout` is absent.
pub const DEFAULT_HELM_REPOSITORY_TIMEOUT: Duration = Duration::from_secs(60);

/// Desired state of a HelmRepository: a Helm chart repository index (or an OCI registry).
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "source.toolkit.fluxcd.io",
    version = "v1",
    kind = "HelmRepository",
    plural = "helmrepositories",
    namespaced,
    status = "HelmRepositoryStatus",
    derive = "PartialEq",
    shortname = "helmrepo",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-sources",
    doc = "HelmRepository is the Schema for the helmrepositories API.",
    printcolumn = r#"{"name":"URL","type":"string","jsonPath":".spec.url"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct HelmRepositorySpec {
    /// Repository address (`http`, `https`, or `oci` with `type: oci`).
    #[schemars(extend("pattern" = "^(http|https|oci)://.*$"))]
    pub url: String,
    /// Secret with credentials (`username`/`password`, or TLS keys for legacy setups).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// Secret with TLS client certificate and CA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_secret_ref: Option<LocalObjectReference>,
    /// Send credentials to chart hosts other than the repository host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass_credentials: Option<bool>,
    /// How often the index is fetched; optional for OCI repositories.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub interval: Option<String>,
    /// Allow plain HTTP (OCI only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// Timeout for index downloads; 60s when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = TIMEOUT_PATTERN))]
    pub timeout: Option<String>,
    /// Stop reconciling this source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Namespaces allowed to use this repository (multi-tenancy lockdown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_from: Option<AccessFrom>,
    /// Repository type; `default` (HTTP index) when absent.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<HelmRepositoryType>,
    /// Provider for secret-less authentication (OCI only); `generic` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "generic"))]
    pub provider: Option<CloudProvider>,
}

/// The kind of Helm repository.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HelmRepositoryType {
    /// An HTTP(S) repository with an `index.yaml` (the default).
    #[default]
    Default,
    /// An OCI registry.
    Oci,
}

/// Namespaces allowed to refer to an object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AccessFrom {
    /// Namespace label selectors; a namespace matching any of them is allowed.
    pub namespace_selectors: Vec<NamespaceSelector>,
}

/// A namespace label selector.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceSelector {
    /// Labels the namespace must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
}

/// Observed state of a HelmRepository.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = {"observedGeneration": -1}))]
pub struct HelmRepositoryStatus {
    /// The last reconciled generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Address of the index artifact in storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The last successfully stored index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
    /// Reconcile-request bookkeeping.
    #[serde(flatten)]
    pub reconcile_request: ReconcileRequestStatus,
}

impl HelmRepository {
    /// `spec.interval` as a duration; [`DEFAULT_HELM_REPOSITORY_INTERVAL`] when absent.
    pub fn interval(&self) -> Result<Duration, crate::Error> {
        crate::duration::field_or(
            "spec.interval",
            self.spec.interval.as_deref(),
            DEFAULT_HELM_REPOSITORY_INTERVAL,
        )
    }

    /// `spec.timeout` as a duration; [`DEFAULT_HELM_REPOSITORY_TIMEOUT`] when absent.
    pub fn timeout(&self) -> Result<Duration, crate::Error> {
        crate::duration::field_or(
            "spec.timeout",
            self.spec.timeout.as_deref(),
            DEFAULT_HELM_REPOSITORY_TIMEOUT,
        )
    }

    /// The effective repository type.
    pub fn repository_type(&self) -> HelmRepositoryType {
        self.spec.type_.unwrap_or_default()
    }

    /// The effective provider.
    pub fn provider(&self) -> CloudProvider {
        self.spec.provider.unwrap_or_default()
    }
}

impl_source!(HelmRepository);

crate::flux_kind! {
    HelmRepository: HelmRepositoryStatus,
    singular = "helmrepository",
    plural = "helmrepositories",
    short_names = ["helmrepo"],
    display = "HelmRepository source",
    role = Source,
}
crate::flux_status!(HelmRepositoryStatus, artifact);
