//! The HelmRelease kind.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::duration::INTERVAL_PATTERN;
use crate::meta::{
    CommonMetadata, Condition, CustomHealthCheck, DependencyReference, IgnoreRule, Image,
    KubeConfigReference, LocalObjectReference, Patch, ReconcileRequestStatus, ResourceInventory,
    ValuesReference,
};
use crate::source::v1::{OciVerificationProvider, ReconcileStrategy};

/// Timeout of Helm actions when `spec.timeout` is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// Release history kept when `spec.maxHistory` is unset.
pub const DEFAULT_MAX_HISTORY: i64 = 5;
/// Retry interval of the `RetryOnFailure` strategy when unset.
pub const DEFAULT_RETRY_INTERVAL: Duration = Duration::from_secs(300);

/// Condition types specific to HelmRelease.
pub mod condition {
    /// The release was installed or upgraded.
    pub const RELEASED: &str = "Released";
    /// The release tests passed.
    pub const TEST_SUCCESS: &str = "TestSuccess";
    /// The release was remediated (rolled back or uninstalled).
    pub const REMEDIATED: &str = "Remediated";
    /// The cluster state drifted from the release manifest.
    pub const DRIFTED: &str = "Drifted";
}

/// Condition reasons specific to HelmRelease.
pub mod reason {
    /// Install succeeded.
    pub const INSTALL_SUCCEEDED: &str = "InstallSucceeded";
    /// Install failed.
    pub const INSTALL_FAILED: &str = "InstallFailed";
    /// Upgrade succeeded.
    pub const UPGRADE_SUCCEEDED: &str = "UpgradeSucceeded";
    /// Upgrade failed.
    pub const UPGRADE_FAILED: &str = "UpgradeFailed";
    /// Tests succeeded.
    pub const TEST_SUCCEEDED: &str = "TestSucceeded";
    /// Tests failed.
    pub const TEST_FAILED: &str = "TestFailed";
    /// Rollback succeeded.
    pub const ROLLBACK_SUCCEEDED: &str = "RollbackSucceeded";
    /// Rollback failed.
    pub const ROLLBACK_FAILED: &str = "RollbackFailed";
    /// Uninstall succeeded.
    pub const UNINSTALL_SUCCEEDED: &str = "UninstallSucceeded";
    /// Uninstall failed.
    pub const UNINSTALL_FAILED: &str = "UninstallFailed";
    /// Drift was detected.
    pub const DRIFT_DETECTED: &str = "DriftDetected";
    /// No drift was detected.
    pub const NO_DRIFT_DETECTED: &str = "NoDriftDetected";
    pub use crate::meta::reason::{ARTIFACT_FAILED, DEPENDENCY_NOT_READY};
}

fn values_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Helm values merged over the chart defaults and valuesFrom.",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Desired state of a HelmRelease: a Helm chart released into the cluster.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "helm.toolkit.fluxcd.io",
    version = "v2",
    kind = "HelmRelease",
    plural = "helmreleases",
    namespaced,
    status = "HelmReleaseStatus",
    derive = "PartialEq",
    shortname = "hr",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-appliers",
    doc = "HelmRelease is the Schema for the helmreleases API.",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "message": "either chart or chartRef must be set",
    "rule": "(has(self.chart) && !has(self.chartRef)) || (!has(self.chart) && has(self.chartRef))",
}]))]
pub struct HelmReleaseSpec {
    /// Template of the HelmChart to create for this release (exclusive with `chartRef`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chart: Option<HelmChartTemplate>,
    /// An existing chart source (exclusive with `chart`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chart_ref: Option<ChartReference>,
    /// How often the release is reconciled.
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub interval: String,
    /// Kubeconfig of a remote target cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<KubeConfigReference>,
    /// Stop reconciling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Helm release name; `[<targetNamespace>-]<name>` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minLength" = 1, "maxLength" = 53))]
    pub release_name: Option<String>,
    /// Namespace the release is installed into; the HelmRelease's own when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minLength" = 1, "maxLength" = 63))]
    pub target_namespace: Option<String>,
    /// Namespace of the Helm storage (release Secrets); the HelmRelease's own when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minLength" = 1, "maxLength" = 63))]
    pub storage_namespace: Option<String>,
    /// HelmReleases that must be ready first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<DependencyReference>,
    /// Timeout of each Helm action; 5m when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub timeout: Option<String>,
    /// Number of release revisions kept; 5 when absent, 0 for unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_history: Option<i64>,
    /// Service account impersonated for Helm actions.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minLength" = 1, "maxLength" = 253))]
    pub service_account_name: Option<String>,
    /// Keep one Kubernetes client for all Helm actions of a reconcile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_client: Option<bool>,
    /// Drift detection between the release manifest and the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift_detection: Option<DriftDetection>,
    /// Install action settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub install: Option<Install>,
    /// Upgrade action settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<Upgrade>,
    /// Test action settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<Test>,
    /// Rollback action settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback: Option<Rollback>,
    /// Uninstall action settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uninstall: Option<Uninstall>,
    /// Values taken from ConfigMaps and Secrets, merged in order before `values`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_from: Vec<ValuesReference>,
    /// Inline Helm values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "values_schema")]
    pub values: Option<serde_json::Map<String, serde_json::Value>>,
    /// Kustomize post-renderers applied to the rendered manifests, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub post_renderers: Vec<PostRenderer>,
    /// Which manifests the post-renderers see.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_render_strategy: Option<PostRenderStrategy>,
    /// Labels and annotations added to every released object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub common_metadata: Option<CommonMetadata>,
    /// CEL health checks for custom resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_check_exprs: Vec<CustomHealthCheck>,
    /// How readiness of released objects is awaited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_strategy: Option<WaitStrategy>,
}

/// Template of the HelmChart object a HelmRelease creates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HelmChartTemplate {
    /// Labels and annotations of the HelmChart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<CommonMetadata>,
    /// Spec of the HelmChart.
    pub spec: HelmChartTemplateSpec,
}

/// Spec of a templated HelmChart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HelmChartTemplateSpec {
    /// Chart name or path inside the source.
    #[schemars(extend("minLength" = 1, "maxLength" = 2048))]
    pub chart: String,
    /// SemVer range of the chart version; `*` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "*"))]
    pub version: Option<String>,
    /// The source holding the chart.
    pub source_ref: CrossNamespaceObjectReference,
    /// How often the chart source is checked; the HelmRelease interval when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub interval: Option<String>,
    /// What triggers a new chart artifact; `ChartVersion` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "ChartVersion"))]
    pub reconcile_strategy: Option<ReconcileStrategy>,
    /// Values files merged into the chart's `values.yaml`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_files: Vec<String>,
    /// Tolerate missing values files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_missing_values_files: Option<bool>,
    /// Signature verification of OCI charts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<HelmChartTemplateVerification>,
}

/// Signature verification of a templated chart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
// Flux requires `provider` and defaults it; the API server fills the default before
// validation, while raw manifests may omit it, so the Rust field stays optional.
#[schemars(extend("required" = ["provider"]))]
pub struct HelmChartTemplateVerification {
    /// The verification scheme; `cosign` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "cosign"))]
    pub provider: Option<OciVerificationProvider>,
    /// Secret with trusted public keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
}

/// The source kinds a chart template can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ChartSourceKind {
    /// A HelmRepository.
    HelmRepository,
    /// A GitRepository.
    GitRepository,
    /// A Bucket.
    Bucket,
}

/// A reference to a chart source in any namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrossNamespaceObjectReference {
    /// API version of the referent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the referent.
    pub kind: ChartSourceKind,
    /// Name of the referent.
    #[schemars(extend("minLength" = 1, "maxLength" = 253))]
    pub name: String,
    /// Namespace of the referent; the HelmRelease's own when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minLength" = 1, "maxLength" = 63))]
    pub namespace: Option<String>,
}

/// The kinds `chartRef` can point to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ChartRefKind {
    /// An OCIRepository holding a chart.
    #[serde(rename = "OCIRepository")]
    OciRepository,
    /// A HelmChart.
    HelmChart,
    /// An ExternalArtifact holding a chart.
    ExternalArtifact,
}

/// A reference to an existing chart source in any namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChartReference {
    /// API version of the referent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the referent.
    pub kind: ChartRefKind,
    /// Name of the referent.
    #[schemars(extend("minLength" = 1, "maxLength" = 253))]
    pub name: String,
    /// Namespace of the referent; the HelmRelease's own when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minLength" = 1, "maxLength" = 63))]
    pub namespace: Option<String>,
}

/// Drift detection mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DriftDetectionMode {
    /// Detect and correct drift.
    Enabled,
    /// Detect and report drift only.
    Warn,
    /// No drift detection (the default).
    #[default]
    Disabled,
}

/// Drift detection settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftDetection {
    /// The mode; `disabled` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<DriftDetectionMode>,
    /// Paths ignored while diffing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<IgnoreRule>,
}

impl DriftDetection {
    /// The effective mode.
    pub fn mode(&self) -> DriftDetectionMode {
        self.mode.unwrap_or_default()
    }
}

/// How Helm treats CRDs in the chart's `crds/` directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum CrdsPolicy {
    /// Do not install or update CRDs.
    Skip,
    /// Create new CRDs, leave existing ones.
    Create,
    /// Create new CRDs and replace existing ones.
    CreateReplace,
}

/// What happens after a failed install or upgrade.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ActionStrategyName {
    /// Remediate (rollback/uninstall) per the remediation settings.
    RemediateOnFailure,
    /// Retry the action after `retryInterval`.
    RetryOnFailure,
}

/// The strategy of an install or upgrade.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionStrategy {
    /// The strategy.
    pub name: ActionStrategyName,
    /// Wait between retries (`RetryOnFailure` only); 5m when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub retry_interval: Option<String>,
}

impl ActionStrategy {
    /// `retryInterval` as a duration; [`DEFAULT_RETRY_INTERVAL`] when absent.
    pub fn retry_interval(&self) -> Result<Duration, crate::Error> {
        crate::duration::field_or(
            "strategy.retryInterval",
            self.retry_interval.as_deref(),
            DEFAULT_RETRY_INTERVAL,
        )
    }
}

/// Remediation of a failed install.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallRemediation {
    /// Number of retries; negative for unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<i64>,
    /// Do not treat test failures as install failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_test_failures: Option<bool>,
    /// Remediate the last failure when retries are exhausted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remediate_last_failure: Option<bool>,
}

/// Install action settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Install {
    /// Timeout of the install; `spec.timeout` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub timeout: Option<String>,
    /// Remediation of a failed install.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remediation: Option<InstallRemediation>,
    /// Strategy after a failed install.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "message": ".retryInterval cannot be set when .name is 'RemediateOnFailure'",
        "rule": "!has(self.retryInterval) || self.name != 'RemediateOnFailure'",
    }]))]
    pub strategy: Option<ActionStrategy>,
    /// Do not wait for resources to become ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_wait: Option<bool>,
    /// Do not wait for Jobs to complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_wait_for_jobs: Option<bool>,
    /// Do not run hooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_hooks: Option<bool>,
    /// Skip OpenAPI validation of rendered manifests.
    #[serde(
        rename = "disableOpenAPIValidation",
        skip_serializing_if = "Option::is_none"
    )]
    pub disable_openapi_validation: Option<bool>,
    /// Skip JSON schema validation of values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_schema_validation: Option<bool>,
    /// Do not take ownership of existing resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_take_ownership: Option<bool>,
    /// Apply with server-side apply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_side_apply: Option<bool>,
    /// Reuse the name of a deleted release.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replace: Option<bool>,
    /// Deprecated: use `crds: Skip`.
    #[serde(rename = "skipCRDs", skip_serializing_if = "Option::is_none")]
    pub skip_crds: Option<bool>,
    /// CRD policy; `Create` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crds: Option<CrdsPolicy>,
    /// Create the target namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub create_namespace: Option<bool>,
}

/// How a failed upgrade is remediated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RemediationStrategy {
    /// Roll back to the previous release (the default).
    #[default]
    Rollback,
    /// Uninstall the release.
    Uninstall,
}

/// Remediation of a failed upgrade.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeRemediation {
    /// Number of retries; negative for unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<i64>,
    /// Do not treat test failures as upgrade failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_test_failures: Option<bool>,
    /// Remediate the last failure when retries are exhausted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remediate_last_failure: Option<bool>,
    /// Remediation strategy; `rollback` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<RemediationStrategy>,
}

impl UpgradeRemediation {
    /// The effective strategy.
    pub fn strategy(&self) -> RemediationStrategy {
        self.strategy.unwrap_or_default()
    }
}

/// Server-side apply mode of upgrades and rollbacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ServerSideApplyMode {
    /// Always server-side apply.
    Enabled,
    /// Never.
    Disabled,
    /// As the previous release did.
    Auto,
}

/// What to do when the chart name changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ChartNameChangeStrategy {
    /// Upgrade in place.
    InPlaceUpdate,
    /// Uninstall and install again.
    Reinstall,
}

/// Upgrade action settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Upgrade {
    /// Timeout of the upgrade; `spec.timeout` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub timeout: Option<String>,
    /// Remediation of a failed upgrade.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remediation: Option<UpgradeRemediation>,
    /// Strategy after a failed upgrade.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "message": ".retryInterval can only be set when .name is 'RetryOnFailure'",
        "rule": "!has(self.retryInterval) || self.name == 'RetryOnFailure'",
    }]))]
    pub strategy: Option<ActionStrategy>,
    /// Do not wait for resources to become ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_wait: Option<bool>,
    /// Do not wait for Jobs to complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_wait_for_jobs: Option<bool>,
    /// Do not run hooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_hooks: Option<bool>,
    /// Skip OpenAPI validation of rendered manifests.
    #[serde(
        rename = "disableOpenAPIValidation",
        skip_serializing_if = "Option::is_none"
    )]
    pub disable_openapi_validation: Option<bool>,
    /// Skip JSON schema validation of values.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_schema_validation: Option<bool>,
    /// Do not take ownership of existing resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_take_ownership: Option<bool>,
    /// Server-side apply mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_side_apply: Option<ServerSideApplyMode>,
    /// Force resource updates by replacement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
    /// Reuse the values of the previous release.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preserve_values: Option<bool>,
    /// Delete resources created by a failed upgrade.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleanup_on_fail: Option<bool>,
    /// CRD policy; `Skip` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crds: Option<CrdsPolicy>,
    /// What to do when the chart name changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chart_name_change_strategy: Option<ChartNameChangeStrategy>,
}

/// A filter selecting release tests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TestFilter {
    /// Test name.
    #[schemars(extend("minLength" = 1, "maxLength" = 253))]
    pub name: String,
    /// Exclude instead of include.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exclude: Option<bool>,
}

/// Test action settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Test {
    /// Run tests after install and upgrade.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable: Option<bool>,
    /// Timeout of the tests; `spec.timeout` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub timeout: Option<String>,
    /// Do not fail the release when tests fail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_failures: Option<bool>,
    /// Which tests run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<TestFilter>,
}

/// Rollback action settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rollback {
    /// Timeout of the rollback; `spec.timeout` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub timeout: Option<String>,
    /// Do not wait for resources to become ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_wait: Option<bool>,
    /// Do not wait for Jobs to complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_wait_for_jobs: Option<bool>,
    /// Do not run hooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_hooks: Option<bool>,
    /// Restart pods of the rolled-back resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recreate: Option<bool>,
    /// Force resource updates by replacement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
    /// Delete resources created during a failed rollback.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleanup_on_fail: Option<bool>,
    /// Server-side apply mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_side_apply: Option<ServerSideApplyMode>,
}

/// Deletion propagation of uninstalled resources.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeletionPropagation {
    /// Background deletion (the default).
    #[default]
    Background,
    /// Foreground deletion.
    Foreground,
    /// Orphan dependents.
    Orphan,
}

/// Uninstall action settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Uninstall {
    /// Timeout of the uninstall; `spec.timeout` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub timeout: Option<String>,
    /// Do not run hooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_hooks: Option<bool>,
    /// Keep the release history.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_history: Option<bool>,
    /// Do not wait for resources to be deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disable_wait: Option<bool>,
    /// Deletion propagation; `background` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "background"))]
    pub deletion_propagation: Option<DeletionPropagation>,
}

impl Uninstall {
    /// The effective deletion propagation.
    pub fn deletion_propagation(&self) -> DeletionPropagation {
        self.deletion_propagation.unwrap_or_default()
    }
}

/// A post-renderer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostRenderer {
    /// Kustomize patches and image overrides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kustomize: Option<KustomizePostRenderer>,
}

/// Kustomize post-rendering.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KustomizePostRenderer {
    /// Inline patches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<Patch>,
    /// Image overrides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
}

/// Which manifests post-renderers see.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PostRenderStrategy {
    /// Only non-hook manifests.
    NoHooks,
    /// Manifests and hooks together.
    Combined,
    /// Manifests and hooks separately.
    Separate,
}

/// How readiness is awaited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WaitStrategyName {
    /// kstatus polling.
    Poller,
    /// Helm's legacy wait.
    Legacy,
}

/// Wait strategy settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitStrategy {
    /// The strategy.
    pub name: WaitStrategyName,
}

/// The last release action attempted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReleaseAction {
    /// An install.
    Install,
    /// An upgrade.
    Upgrade,
}

/// State of one test hook.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TestHookStatus {
    /// When the hook last started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_started: Option<Time>,
    /// When the hook last completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_completed: Option<Time>,
    /// The hook phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

/// One Helm release revision recorded in the status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseSnapshot {
    /// API version of this snapshot format.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Checksum of the release object.
    pub digest: String,
    /// Release name.
    pub name: String,
    /// Release namespace.
    pub namespace: String,
    /// Release revision.
    pub version: i64,
    /// Helm release status (`deployed`, `failed`, ...).
    pub status: String,
    /// Chart name.
    pub chart_name: String,
    /// Chart version.
    pub chart_version: String,
    /// Chart app version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_version: Option<String>,
    /// Checksum of the release configuration (values).
    pub config_digest: String,
    /// When the release was first deployed.
    pub first_deployed: Time,
    /// When this revision was deployed.
    pub last_deployed: Time,
    /// When this revision was deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<Time>,
    /// Test hooks by name; absent when the revision has not been tested, empty when its tests
    /// ran with no test hook selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "BTreeMap<String, TestHookStatus>")]
    pub test_hooks: Option<BTreeMap<String, TestHookStatus>>,
    /// Digest of the OCI chart artifact.
    #[serde(rename = "ociDigest", skip_serializing_if = "Option::is_none")]
    pub oci_digest: Option<String>,
    /// The action that produced this revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

/// Observed state of a HelmRelease.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = {"observedGeneration": -1}))]
pub struct HelmReleaseStatus {
    /// The last reconciled generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Digest of the post-renderers last applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_post_renderers_digest: Option<String>,
    /// Digest of the common metadata last applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_common_metadata_digest: Option<String>,
    /// The generation of the last release attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempted_generation: Option<i64>,
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// `<namespace>/<name>` of the HelmChart created for this release.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub helm_chart: Option<String>,
    /// Namespace of the Helm storage of the current release.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minLength" = 1, "maxLength" = 63))]
    pub storage_namespace: Option<String>,
    /// Release revisions, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<ReleaseSnapshot>,
    /// The last release action attempted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempted_release_action: Option<ReleaseAction>,
    /// How long the last release action took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempted_release_action_duration: Option<String>,
    /// Consecutive reconciliation failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failures: Option<i64>,
    /// Consecutive install failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub install_failures: Option<i64>,
    /// Consecutive upgrade failures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade_failures: Option<i64>,
    /// Chart version of the last release attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    /// Digest of the chart artifact of the last release attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision_digest: Option<String>,
    /// Deprecated: checksum of the values of the last attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempted_values_checksum: Option<String>,
    /// Deprecated: revision of the last successful release.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_release_revision: Option<i64>,
    /// Digest of the configuration of the last attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempted_config_digest: Option<String>,
    /// The last handled `reconcile.fluxcd.io/forceAt` token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_handled_force_at: Option<String>,
    /// The last handled `reconcile.fluxcd.io/resetAt` token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_handled_reset_at: Option<String>,
    /// The objects of the current release.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inventory: Option<ResourceInventory>,
    /// Reconcile-request bookkeeping.
    #[serde(flatten)]
    pub reconcile_request: ReconcileRequestStatus,
}

impl HelmRelease {
    /// `spec.interval` as a duration.
    pub fn interval(&self) -> Result<Duration, crate::Error> {
        crate::duration::field("spec.interval", &self.spec.interval)
    }

    /// `spec.timeout` as a duration; [`DEFAULT_TIMEOUT`] (5m) when absent.
    pub fn timeout(&self) -> Result<Duration, crate::Error> {
        crate::duration::field_or(
            "spec.timeout",
            self.spec.timeout.as_deref(),
            DEFAULT_TIMEOUT,
        )
    }

    /// Retry interval of the install strategy (or upgrade when `upgrade` is true) if it is
    /// `RetryOnFailure`; `None` for `RemediateOnFailure` or no strategy.
    pub fn retry_interval(&self, upgrade: bool) -> Result<Option<Duration>, crate::Error> {
        let strategy = if upgrade {
            self.spec.upgrade.as_ref().and_then(|u| u.strategy.as_ref())
        } else {
            self.spec.install.as_ref().and_then(|i| i.strategy.as_ref())
        };
        match strategy {
            Some(s) if s.name == ActionStrategyName::RetryOnFailure => s.retry_interval().map(Some),
            _ => Ok(None),
        }
    }

    /// Interval of the templated chart: `spec.chart.spec.interval` or `spec.interval`.
    pub fn chart_interval(&self) -> Result<Duration, crate::Error> {
        match self
            .spec
            .chart
            .as_ref()
            .and_then(|c| c.spec.interval.as_deref())
        {
            Some(i) => crate::duration::field("spec.chart.spec.interval", i),
            None => self.interval(),
        }
    }

    /// The Helm release name: `spec.releaseName`, else `<targetNamespace>-<name>` when a
    /// target namespace is set, else the object name.
    pub fn release_name(&self) -> String {
        let name = self.metadata.name.as_deref().unwrap_or_default();
        match (&self.spec.release_name, &self.spec.target_namespace) {
            (Some(r), _) if !r.is_empty() => r.clone(),
            (_, Some(ns)) if !ns.is_empty() => format!("{ns}-{name}"),
            _ => name.to_owned(),
        }
    }

    /// Namespace the release is installed into.
    pub fn target_namespace(&self) -> Option<&str> {
        self.spec
            .target_namespace
            .as_deref()
            .or(self.metadata.namespace.as_deref())
    }

    /// Namespace of the Helm storage.
    pub fn storage_namespace(&self) -> Option<&str> {
        self.spec
            .storage_namespace
            .as_deref()
            .or(self.metadata.namespace.as_deref())
    }

    /// Revisions kept; [`DEFAULT_MAX_HISTORY`] when absent.
    pub fn max_history(&self) -> i64 {
        self.spec.max_history.unwrap_or(DEFAULT_MAX_HISTORY)
    }

    /// Name of the HelmChart created for `spec.chart`: `<namespace>-<name>`.
    pub fn helm_chart_name(&self) -> String {
        format!(
            "{}-{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default()
        )
    }

    /// Inline values, empty when absent.
    pub fn values(&self) -> serde_json::Map<String, serde_json::Value> {
        self.spec.values.clone().unwrap_or_default()
    }

    /// Whether reconciliation is suspended.
    pub fn suspended(&self) -> bool {
        self.spec.suspend.unwrap_or(false)
    }
}

crate::flux_kind! {
    HelmRelease: HelmReleaseStatus,
    singular = "helmrelease",
    plural = "helmreleases",
    short_names = ["hr"],
    display = "HelmRelease",
    role = Applier,
}
crate::flux_status!(HelmReleaseStatus, revision = last_attempted_revision);

#[cfg(test)]
mod tests {
    use super::*;

    fn hr(extra: &str) -> HelmRelease {
        serde_saphyr::from_str(&format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: apps\nspec:\n  interval: 50m\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn defaults() {
        let release = hr("  chartRef:\n    kind: OCIRepository\n    name: podinfo\n");
        assert_eq!(release.interval().unwrap(), Duration::from_secs(3000));
        assert_eq!(release.timeout().unwrap(), DEFAULT_TIMEOUT);
        assert_eq!(release.release_name(), "podinfo");
        assert_eq!(release.target_namespace(), Some("apps"));
        assert_eq!(release.storage_namespace(), Some("apps"));
        assert_eq!(release.max_history(), DEFAULT_MAX_HISTORY);
        assert_eq!(release.chart_interval().unwrap(), Duration::from_secs(3000));
        assert_eq!(release.retry_interval(false).unwrap(), None);
        assert!(release.values().is_empty());
        assert_eq!(release.helm_chart_name(), "apps-podinfo");
        assert_eq!(
            release.spec.chart_ref.as_ref().unwrap().kind,
            ChartRefKind::OciRepository
        );
    }

    #[test]
    fn release_name_uses_target_namespace() {
        let mut release = hr("  targetNamespace: prod\n");
        assert_eq!(release.release_name(), "prod-podinfo");
        assert_eq!(release.target_namespace(), Some("prod"));
        release.spec.release_name = Some("web".into());
        assert_eq!(release.release_name(), "web");
    }

    #[test]
    fn strategies_and_remediation() {
        let release = hr(concat!(
            "  timeout: 10m\n",
            "  install:\n    strategy:\n      name: RetryOnFailure\n    remediation:\n      retries: -1\n",
            "  upgrade:\n    strategy:\n      name: RetryOnFailure\n      retryInterval: 2m\n    remediation:\n      retries: 3\n    serverSideApply: auto\n",
            "  uninstall:\n    keepHistory: true\n",
            "  driftDetection:\n    mode: warn\n",
        ));
        assert_eq!(release.timeout().unwrap(), Duration::from_secs(600));
        assert_eq!(
            release.retry_interval(false).unwrap(),
            Some(DEFAULT_RETRY_INTERVAL)
        );
        assert_eq!(
            release.retry_interval(true).unwrap(),
            Some(Duration::from_secs(120))
        );
        let upgrade = release.spec.upgrade.as_ref().unwrap();
        assert_eq!(
            upgrade.remediation.as_ref().unwrap().strategy(),
            RemediationStrategy::Rollback
        );
        assert_eq!(upgrade.server_side_apply, Some(ServerSideApplyMode::Auto));
        assert_eq!(
            release
                .spec
                .install
                .as_ref()
                .unwrap()
                .remediation
                .as_ref()
                .unwrap()
                .retries,
            Some(-1)
        );
        assert_eq!(
            release
                .spec
                .uninstall
                .as_ref()
                .unwrap()
                .deletion_propagation(),
            DeletionPropagation::Background
        );
        assert_eq!(
            release.spec.drift_detection.as_ref().unwrap().mode(),
            DriftDetectionMode::Warn
        );
        assert_eq!(
            DriftDetection::default().mode(),
            DriftDetectionMode::Disabled
        );
    }

    #[test]
    fn values_keep_arbitrary_json() {
        let release = hr(concat!(
            "  chart:\n    spec:\n      chart: podinfo\n      interval: 5m\n      sourceRef:\n        kind: HelmRepository\n        name: podinfo\n",
            "  values:\n    replicaCount: 2\n    ingress:\n      hosts: [a, b]\n    empty: null\n",
            "  valuesFrom:\n  - kind: Secret\n    name: extra\n    targetPath: image.tag\n",
        ));
        let values = release.values();
        assert_eq!(values["replicaCount"], 2);
        assert_eq!(values["ingress"]["hosts"][1], "b");
        assert!(values["empty"].is_null());
        assert_eq!(release.chart_interval().unwrap(), Duration::from_secs(300));
        assert_eq!(release.spec.values_from[0].values_key(), "values.yaml");
        let chart = &release.spec.chart.as_ref().unwrap().spec;
        assert_eq!(chart.source_ref.kind, ChartSourceKind::HelmRepository);
    }

    #[test]
    fn status_round_trips() {
        let status = serde_json::json!({
            "observedGeneration": 3,
            "history": [{
                "chartName": "podinfo", "chartVersion": "6.5.4", "configDigest": "sha256:abc",
                "digest": "sha256:def", "firstDeployed": "2024-05-01T10:00:00Z",
                "lastDeployed": "2024-05-02T10:00:00Z", "name": "podinfo", "namespace": "apps",
                "status": "deployed", "version": 2,
                "testHooks": {"podinfo-test": {"phase": "Succeeded"}},
            }],
            "lastAttemptedReleaseAction": "upgrade",
            "lastHandledForceAt": "t1",
            "lastHandledReconcileAt": "t2",
            "inventory": {"entries": [{"id": "apps_podinfo_apps_Deployment", "v": "v1"}]},
        });
        let parsed: HelmReleaseStatus = serde_json::from_value(status.clone()).unwrap();
        assert_eq!(parsed.history[0].version, 2);
        assert_eq!(
            parsed.last_attempted_release_action,
            Some(ReleaseAction::Upgrade)
        );
        assert_eq!(
            parsed
                .reconcile_request
                .last_handled_reconcile_at
                .as_deref(),
            Some("t2")
        );
        assert_eq!(serde_json::to_value(&parsed).unwrap(), status);
    }
}
