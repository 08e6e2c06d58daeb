//! The Kustomization kind.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::INTERVAL_PATTERN;
use crate::meta::{
    CommonMetadata, Condition, CustomHealthCheck, DependencyReference, IgnoreRule, Image,
    KubeConfigReference, LocalObjectReference, NamespacedObjectKindReference, Patch,
    ReconcileRequestStatus, ResourceInventory, Snapshot,
};

/// Shortest timeout Flux uses for a Kustomization, whatever the interval.
pub const MIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Desired state of a Kustomization: a kustomize overlay from a source, built and applied.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kustomize.toolkit.fluxcd.io",
    version = "v1",
    kind = "Kustomization",
    plural = "kustomizations",
    namespaced,
    status = "KustomizationStatus",
    derive = "PartialEq",
    shortname = "ks",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-appliers",
    doc = "Kustomization is the Schema for the kustomizations API.",
    annotation("kustomize.toolkit.fluxcd.io/substitute", "disabled"),
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct KustomizationSpec {
    /// Labels and annotations added to every applied object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub common_metadata: Option<CommonMetadata>,
    /// Other Kustomizations that must be ready before this one is applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<DependencyReference>,
    /// SOPS decryption of Secrets before they are applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decryption: Option<Decryption>,
    /// How often the Kustomization is reconciled.
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub interval: String,
    /// Retry interval after a failure; `interval` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub retry_interval: Option<String>,
    /// Kubeconfig of a remote target cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<KubeConfigReference>,
    /// Path to the overlay inside the source; the source root when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Post-build actions (variable substitution).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_build: Option<PostBuild>,
    /// Garbage-collect objects removed from the source.
    pub prune: bool,
    /// What happens to applied objects when the Kustomization is deleted; `MirrorPrune` when
    /// absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,
    /// Objects whose health is checked after apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_checks: Vec<NamespacedObjectKindReference>,
    /// Prefix added to the names of all applied objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minLength" = 1, "maxLength" = 200))]
    pub name_prefix: Option<String>,
    /// Suffix added to the names of all applied objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minLength" = 1, "maxLength" = 200))]
    pub name_suffix: Option<String>,
    /// Inline patches applied to the built objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<Patch>,
    /// Image overrides applied to the built objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
    /// Service account impersonated when applying.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// The source holding the overlay.
    pub source_ref: CrossNamespaceSourceReference,
    /// Stop reconciling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Namespace set on all namespaced objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minLength" = 1, "maxLength" = 63))]
    pub target_namespace: Option<String>,
    /// Timeout of build, apply and health checks; `interval` minus 30s (at least 30s) when
    /// absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub timeout: Option<String>,
    /// Recreate objects whose immutable fields changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub force: Option<bool>,
    /// Wait for all applied objects to become ready (replaces `healthChecks`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
    /// Kustomize components, relative to `path`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<String>,
    /// Drop component paths missing from the source instead of failing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_missing_components: Option<bool>,
    /// CEL health checks for custom resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_check_exprs: Vec<CustomHealthCheck>,
    /// JSON pointer paths excluded from drift detection and apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<IgnoreRule>,
    /// Kustomize build metadata to add to the built objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub build_metadata: Vec<BuildMetadataOption>,
}

/// The kinds a Kustomization can take its manifests from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SourceKind {
    /// An OCIRepository.
    #[serde(rename = "OCIRepository")]
    OciRepository,
    /// A GitRepository.
    GitRepository,
    /// A Bucket.
    Bucket,
    /// An ExternalArtifact.
    ExternalArtifact,
}

impl SourceKind {
    /// The kind name as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OciRepository => "OCIRepository",
            Self::GitRepository => "GitRepository",
            Self::Bucket => "Bucket",
            Self::ExternalArtifact => "ExternalArtifact",
        }
    }
}

/// A reference to a source in any namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrossNamespaceSourceReference {
    /// API version of the referent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the referent.
    pub kind: SourceKind,
    /// Name of the referent.
    pub name: String,
    /// Namespace of the referent; the Kustomization's namespace when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl std::fmt::Display for CrossNamespaceSourceReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.kind.as_str(), ns, self.name),
            None => write!(f, "{}/{}", self.kind.as_str(), self.name),
        }
    }
}

/// The decryption engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DecryptionProvider {
    /// Mozilla SOPS.
    Sops,
}

/// How Secrets are decrypted before apply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Decryption {
    /// The decryption engine.
    pub provider: DecryptionProvider,
    /// Secret with private keys (age, OpenPGP) or cloud KMS credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// Service account for KMS workload identity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// Post-build actions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostBuild {
    /// Variables substituted into `${var}` references.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub substitute: BTreeMap<String, String>,
    /// ConfigMaps and Secrets providing more variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub substitute_from: Vec<SubstituteReference>,
    /// When substitution runs; `WithVariables` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub substitute_strategy: Option<SubstituteStrategy>,
}

/// The kind of object holding substitution variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SubstituteKind {
    /// A Secret.
    Secret,
    /// A ConfigMap.
    ConfigMap,
}

/// A ConfigMap or Secret providing substitution variables.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubstituteReference {
    /// Kind of the referent.
    pub kind: SubstituteKind,
    /// Name of the referent, in the Kustomization's namespace.
    #[schemars(extend("minLength" = 1, "maxLength" = 253))]
    pub name: String,
    /// Tolerate the referent being absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub optional: Option<bool>,
}

/// When post-build substitution runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SubstituteStrategy {
    /// Only when at least one variable is defined (the default).
    #[default]
    WithVariables,
    /// Always, even without variables.
    Always,
}

/// What happens to applied objects when the Kustomization is deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum DeletionPolicy {
    /// Delete when `prune` is true, orphan otherwise (the default).
    #[default]
    MirrorPrune,
    /// Delete.
    Delete,
    /// Delete and wait until the objects are gone.
    WaitForTermination,
    /// Leave them in the cluster.
    Orphan,
}

/// Kustomize build metadata options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BuildMetadataOption {
    /// Annotate objects with their origin.
    OriginAnnotations,
    /// Annotate objects with the transformers that changed them.
    TransformerAnnotations,
}

/// Observed state of a Kustomization.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = {"observedGeneration": -1}))]
pub struct KustomizationStatus {
    /// The last reconciled generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The last successfully applied source revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_applied_revision: Option<String>,
    /// Origin revision (e.g. `org.opencontainers.image.revision`) of the last applied artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_applied_origin_revision: Option<String>,
    /// The revision of the last reconciliation attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    /// The objects applied by the last successful reconciliation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inventory: Option<ResourceInventory>,
    /// The latest reconciliation attempts, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Snapshot>,
    /// Reconcile-request bookkeeping.
    #[serde(flatten)]
    pub reconcile_request: ReconcileRequestStatus,
}

impl Kustomization {
    /// `spec.interval` as a duration.
    pub fn interval(&self) -> Result<Duration, crate::Error> {
        crate::duration::field("spec.interval", &self.spec.interval)
    }

    /// `spec.timeout`, or `interval` minus 30s when absent; never below [`MIN_TIMEOUT`].
    pub fn timeout(&self) -> Result<Duration, crate::Error> {
        let timeout = match &self.spec.timeout {
            Some(t) => crate::duration::field("spec.timeout", t)?,
            None => self.interval()?.saturating_sub(MIN_TIMEOUT),
        };
        Ok(timeout.max(MIN_TIMEOUT))
    }

    /// `spec.retryInterval`, or `interval` when absent.
    pub fn retry_interval(&self) -> Result<Duration, crate::Error> {
        match &self.spec.retry_interval {
            Some(r) => crate::duration::field("spec.retryInterval", r),
            None => self.interval(),
        }
    }

    /// When to reconcile again after success: the interval.
    pub fn requeue_after(&self) -> Result<Duration, crate::Error> {
        self.interval()
    }

    /// The effective deletion policy.
    pub fn deletion_policy(&self) -> DeletionPolicy {
        self.spec.deletion_policy.unwrap_or_default()
    }

    /// Whether applied objects are deleted with the Kustomization.
    pub fn deletes_on_removal(&self) -> bool {
        match self.deletion_policy() {
            DeletionPolicy::MirrorPrune => self.spec.prune,
            DeletionPolicy::Delete | DeletionPolicy::WaitForTermination => true,
            DeletionPolicy::Orphan => false,
        }
    }

    /// The effective substitution strategy.
    pub fn substitute_strategy(&self) -> SubstituteStrategy {
        self.spec
            .post_build
            .as_ref()
            .and_then(|p| p.substitute_strategy)
            .unwrap_or_default()
    }

    /// The path inside the source; `./` (the root) when absent or empty.
    pub fn path(&self) -> &str {
        self.spec
            .path
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or("./")
    }

    /// Namespace of the source: `spec.sourceRef.namespace` or the Kustomization's own.
    pub fn source_namespace(&self) -> Option<&str> {
        self.spec
            .source_ref
            .namespace
            .as_deref()
            .or(self.metadata.namespace.as_deref())
    }

    /// Whether reconciliation is suspended.
    pub fn suspended(&self) -> bool {
        self.spec.suspend.unwrap_or(false)
    }
}

crate::flux_kind! {
    Kustomization: KustomizationStatus,
    singular = "kustomization",
    plural = "kustomizations",
    short_names = ["ks"],
    display = "Kustomization",
    role = Applier,
}
crate::flux_status!(KustomizationStatus, revision = last_applied_revision);

#[cfg(test)]
mod tests {
    use super::*;

    fn ks(extra: &str) -> Kustomization {
        serde_saphyr::from_str(&format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  interval: 10m\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn timeout_defaults_to_interval_minus_thirty_seconds() {
        let k = ks("");
        assert_eq!(k.interval().unwrap(), Duration::from_secs(600));
        assert_eq!(k.timeout().unwrap(), Duration::from_secs(570));
        assert_eq!(k.retry_interval().unwrap(), Duration::from_secs(600));
        assert_eq!(k.requeue_after().unwrap(), Duration::from_secs(600));
    }

    #[test]
    fn timeout_never_drops_below_minimum() {
        let mut k = ks("");
        k.spec.interval = "45s".into();
        assert_eq!(k.timeout().unwrap(), MIN_TIMEOUT);
        k.spec.timeout = Some("5s".into());
        assert_eq!(k.timeout().unwrap(), MIN_TIMEOUT);
        k.spec.timeout = Some("3m".into());
        assert_eq!(k.timeout().unwrap(), Duration::from_secs(180));
    }

    #[test]
    fn explicit_retry_interval_and_errors() {
        let k = ks("  retryInterval: 2m\n  timeout: 1x\n");
        assert_eq!(k.retry_interval().unwrap(), Duration::from_secs(120));
        assert_eq!(
            k.timeout().unwrap_err().to_string(),
            "invalid duration in spec.timeout"
        );
    }

    #[test]
    fn policy_and_path_defaults() {
        let mut k = ks("");
        assert_eq!(k.deletion_policy(), DeletionPolicy::MirrorPrune);
        assert!(k.deletes_on_removal());
        k.spec.prune = false;
        assert!(!k.deletes_on_removal());
        k.spec.deletion_policy = Some(DeletionPolicy::Delete);
        assert!(k.deletes_on_removal());
        assert_eq!(k.path(), "./");
        assert_eq!(k.substitute_strategy(), SubstituteStrategy::WithVariables);
        assert_eq!(k.source_namespace(), Some("flux-system"));
        assert_eq!(k.spec.source_ref.to_string(), "GitRepository/flux-system");
        assert!(!k.suspended());
    }

    #[test]
    fn parses_full_spec() {
        let k = ks(concat!(
            "  path: ./apps/production\n",
            "  targetNamespace: apps\n",
            "  dependsOn:\n  - name: infra\n    readyExpr: status.ready\n",
            "  postBuild:\n    substitute:\n      cluster: prod\n    substituteFrom:\n    - kind: ConfigMap\n      name: vars\n      optional: true\n",
            "  patches:\n  - patch: |\n      - op: add\n        path: /x\n        value: y\n    target:\n      kind: Deployment\n",
            "  healthChecks:\n  - apiVersion: apps/v1\n    kind: Deployment\n    name: web\n    namespace: apps\n",
            "  decryption:\n    provider: sops\n    secretRef:\n      name: sops-age\n",
            "  buildMetadata: [originAnnotations]\n",
        ));
        assert_eq!(k.path(), "./apps/production");
        assert_eq!(
            k.spec.depends_on[0].ready_expr.as_deref(),
            Some("status.ready")
        );
        let post_build = k.spec.post_build.as_ref().unwrap();
        assert_eq!(post_build.substitute["cluster"], "prod");
        assert_eq!(
            post_build.substitute_from[0].kind,
            SubstituteKind::ConfigMap
        );
        assert_eq!(
            k.spec.patches[0].target.as_ref().unwrap().kind.as_deref(),
            Some("Deployment")
        );
        assert_eq!(
            k.spec.decryption.as_ref().unwrap().provider,
            DecryptionProvider::Sops
        );
        assert_eq!(
            k.spec.build_metadata,
            [BuildMetadataOption::OriginAnnotations]
        );
    }

    #[test]
    fn rejects_unknown_source_kinds() {
        let err = serde_saphyr::from_str::<Kustomization>(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: a\nspec:\n  interval: 1m\n  prune: false\n  sourceRef:\n    kind: HelmRepository\n    name: x\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("HelmRepository"), "{err}");
    }
}
