//! The Bucket kind.

use std::time::Duration;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CloudProvider, DEFAULT_TIMEOUT, impl_source};
use crate::duration::{INTERVAL_PATTERN, TIMEOUT_PATTERN};
use crate::meta::{Artifact, Condition, LocalObjectReference, ReconcileRequestStatus};

/// Desired state of a Bucket: an S3-compatible, GCS or Azure Blob bucket to download.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "source.toolkit.fluxcd.io",
    version = "v1",
    kind = "Bucket",
    plural = "buckets",
    namespaced,
    status = "BucketStatus",
    derive = "PartialEq",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-sources",
    doc = "Bucket is the Schema for the buckets API.",
    printcolumn = r#"{"name":"Endpoint","type":"string","jsonPath":".spec.endpoint"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"message": "STS configuration is only supported for the 'aws' and 'generic' Bucket providers",
     "rule": "self.provider == 'aws' || self.provider == 'generic' || !has(self.sts)"},
    {"message": "'aws' is the only supported STS provider for the 'aws' Bucket provider",
     "rule": "self.provider != 'aws' || !has(self.sts) || self.sts.provider == 'aws'"},
    {"message": "'ldap' is the only supported STS provider for the 'generic' Bucket provider",
     "rule": "self.provider != 'generic' || !has(self.sts) || self.sts.provider == 'ldap'"},
    {"message": "spec.sts.secretRef is not required for the 'aws' STS provider",
     "rule": "!has(self.sts) || self.sts.provider != 'aws' || !has(self.sts.secretRef)"},
    {"message": "spec.sts.certSecretRef is not required for the 'aws' STS provider",
     "rule": "!has(self.sts) || self.sts.provider != 'aws' || !has(self.sts.certSecretRef)"},
    {"message": "ServiceAccountName is not supported for the 'generic' Bucket provider",
     "rule": "self.provider != 'generic' || !has(self.serviceAccountName)"},
    {"message": "cannot set both .spec.secretRef and .spec.serviceAccountName",
     "rule": "!has(self.secretRef) || !has(self.serviceAccountName)"},
]))]
pub struct BucketSpec {
    /// The object storage provider; `generic` (S3 API) when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "generic"))]
    pub provider: Option<CloudProvider>,
    /// Name of the bucket.
    pub bucket_name: String,
    /// Storage endpoint address (no scheme for S3-compatible endpoints).
    pub endpoint: String,
    /// Security Token Service used to fetch temporary credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sts: Option<BucketStsSpec>,
    /// Use plain HTTP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure: Option<bool>,
    /// Bucket region.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Only objects under this key prefix are downloaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Secret with credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// Secret with TLS client certificate and CA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_secret_ref: Option<LocalObjectReference>,
    /// Secret with proxy settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_secret_ref: Option<LocalObjectReference>,
    /// Service account for workload identity (not with `generic`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// How often the bucket is checked.
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub interval: String,
    /// Timeout for download operations; 60s when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "60s", "pattern" = TIMEOUT_PATTERN))]
    pub timeout: Option<String>,
    /// `.gitignore`-style patterns excluded from the artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore: Option<String>,
    /// Stop reconciling this source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

/// The STS flavour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BucketStsProvider {
    /// AWS STS.
    Aws,
    /// MinIO LDAP STS.
    Ldap,
}

/// A Security Token Service for temporary bucket credentials.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BucketStsSpec {
    /// The STS flavour.
    pub provider: BucketStsProvider,
    /// STS endpoint (`http` or `https`).
    #[schemars(extend("pattern" = "^(http|https)://.*$"))]
    pub endpoint: String,
    /// Secret with STS credentials (`ldap` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// Secret with TLS material for the STS endpoint (`ldap` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_secret_ref: Option<LocalObjectReference>,
}

/// Observed state of a Bucket.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = {"observedGeneration": -1}))]
pub struct BucketStatus {
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
    /// Reconcile-request bookkeeping.
    #[serde(flatten)]
    pub reconcile_request: ReconcileRequestStatus,
}

impl Bucket {
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

    /// The effective provider; [`CloudProvider::Generic`] when absent.
    pub fn provider(&self) -> CloudProvider {
        self.spec.provider.unwrap_or_default()
    }
}

impl_source!(Bucket);

crate::flux_kind! {
    Bucket: BucketStatus,
    singular = "bucket",
    plural = "buckets",
    short_names = [],
    display = "Bucket source",
    role = Source,
}
crate::flux_status!(BucketStatus, artifact);
