//! The HelmChart kind.

use std::time::Duration;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{OciVerification, impl_source};
use crate::duration::INTERVAL_PATTERN;
use crate::meta::{Artifact, Condition, ReconcileRequestStatus};

/// The chart version range used when `spec.version` is absent: the latest.
pub const DEFAULT_CHART_VERSION: &str = "*";

/// Desired state of a HelmChart: a chart to fetch or package from a source.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "source.toolkit.fluxcd.io",
    version = "v1",
    kind = "HelmChart",
    plural = "helmcharts",
    namespaced,
    status = "HelmChartStatus",
    derive = "PartialEq",
    shortname = "hc",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-sources",
    doc = "HelmChart is the Schema for the helmcharts API.",
    printcolumn = r#"{"name":"Chart","type":"string","jsonPath":".spec.chart"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.version"}"#,
    printcolumn = r#"{"name":"Source Kind","type":"string","jsonPath":".spec.sourceRef.kind"}"#,
    printcolumn = r#"{"name":"Source Name","type":"string","jsonPath":".spec.sourceRef.name"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "message": "spec.verify is only supported when spec.sourceRef.kind is 'HelmRepository'",
    "rule": "!has(self.verify) || self.sourceRef.kind == 'HelmRepository'",
}]))]
pub struct HelmChartSpec {
    /// Chart name (HelmRepository) or path inside the source (GitRepository, Bucket).
    pub chart: String,
    /// SemVer range of the chart version (HelmRepository only); `*` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "*"))]
    pub version: Option<String>,
    /// The source holding the chart.
    pub source_ref: LocalHelmChartSourceReference,
    /// How often the source is checked for a new chart.
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub interval: String,
    /// What triggers a new artifact; `ChartVersion` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "ChartVersion"))]
    pub reconcile_strategy: Option<ReconcileStrategy>,
    /// Values files, relative to the chart root, merged in order into `values.yaml`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_files: Vec<String>,
    /// Tolerate missing values files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_missing_values_files: Option<bool>,
    /// Stop reconciling this source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Signature verification of OCI charts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<OciVerification>,
}

/// The kinds a HelmChart can take its chart from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum HelmChartSourceKind {
    /// A Helm repository.
    HelmRepository,
    /// A Git repository.
    GitRepository,
    /// A bucket.
    Bucket,
}

/// Reference to the source of a HelmChart, in the same namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalHelmChartSourceReference {
    /// API version of the referent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the referent.
    pub kind: HelmChartSourceKind,
    /// Name of the referent.
    pub name: String,
}

/// What makes a HelmChart produce a new artifact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ReconcileStrategy {
    /// A new chart version (the default).
    #[default]
    ChartVersion,
    /// A new source revision.
    Revision,
}

/// Observed state of a HelmChart.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = {"observedGeneration": -1}))]
pub struct HelmChartStatus {
    /// The last reconciled generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Source revision the current artifact was built from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_source_artifact_revision: Option<String>,
    /// Chart name of the current artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_chart_name: Option<String>,
    /// Values files merged into the current artifact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed_values_files: Vec<String>,
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Address of the chart artifact in storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The last successfully produced chart package.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
    /// Reconcile-request bookkeeping.
    #[serde(flatten)]
    pub reconcile_request: ReconcileRequestStatus,
}

impl HelmChart {
    /// `spec.interval` as a duration.
    pub fn interval(&self) -> Result<Duration, crate::Error> {
        crate::duration::field("spec.interval", &self.spec.interval)
    }

    /// The version range; [`DEFAULT_CHART_VERSION`] when absent or empty.
    pub fn version(&self) -> &str {
        self.spec
            .version
            .as_deref()
            .filter(|v| !v.is_empty())
            .unwrap_or(DEFAULT_CHART_VERSION)
    }

    /// The effective reconcile strategy.
    pub fn reconcile_strategy(&self) -> ReconcileStrategy {
        self.spec.reconcile_strategy.unwrap_or_default()
    }
}

impl_source!(HelmChart);

crate::flux_kind! {
    HelmChart: HelmChartStatus,
    singular = "helmchart",
    plural = "helmcharts",
    short_names = ["hc"],
    display = "HelmChart source",
    role = Source,
}
crate::flux_status!(HelmChartStatus, artifact);
