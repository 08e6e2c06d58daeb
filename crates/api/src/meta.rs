//! Types and constants shared by all Flux kinds: the equivalents of Flux's `meta` API package
//! (`github.com/fluxcd/pkg/apis/meta`) and of its kustomize selector types.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// The finalizer every Flux controller puts on the objects it manages.
pub const FINALIZER: &str = "finalizers.fluxcd.io";

/// Condition types shared by all kinds.
pub mod condition {
    /// The object reached its desired state.
    pub const READY: &str = "Ready";
    /// The controller is working on the object.
    pub const RECONCILING: &str = "Reconciling";
    /// Reconciliation cannot make progress until the spec changes.
    pub const STALLED: &str = "Stalled";
    /// The applied resources passed their health checks.
    pub const HEALTHY: &str = "Healthy";
    /// A source artifact is available in storage.
    pub const ARTIFACT_IN_STORAGE: &str = "ArtifactInStorage";
    /// The stored artifact no longer matches the spec.
    pub const ARTIFACT_OUTDATED: &str = "ArtifactOutdated";
    /// The source passed signature verification.
    pub const SOURCE_VERIFIED: &str = "SourceVerified";
    /// Fetching the source failed.
    pub const FETCH_FAILED: &str = "FetchFailed";
    /// Building the artifact failed.
    pub const BUILD_FAILED: &str = "BuildFailed";
    /// A storage operation failed.
    pub const STORAGE_OPERATION_FAILED: &str = "StorageOperationFailed";
}

/// Condition reasons shared by all kinds.
pub mod reason {
    /// The operation succeeded.
    pub const SUCCEEDED: &str = "Succeeded";
    /// The operation failed.
    pub const FAILED: &str = "Failed";
    /// The controller is progressing towards the desired state.
    pub const PROGRESSING: &str = "Progressing";
    /// A failed attempt is being retried.
    pub const PROGRESSING_WITH_RETRY: &str = "ProgressingWithRetry";
    /// The object is suspended.
    pub const SUSPENDED: &str = "Suspended";
    /// A dependency is not ready yet.
    pub const DEPENDENCY_NOT_READY: &str = "DependencyNotReady";
    /// A path in the spec is invalid.
    pub const INVALID_PATH: &str = "InvalidPath";
    /// A URL in the spec is invalid.
    pub const INVALID_URL: &str = "InvalidURL";
    /// Insecure connections are disabled on this controller.
    pub const INSECURE_CONNECTIONS_DISALLOWED: &str = "InsecureConnectionsDisallowed";
    /// The connection type is not supported.
    pub const UNSUPPORTED_CONNECTION_TYPE: &str = "UnsupportedConnectionType";
    /// Garbage collection failed.
    pub const PRUNE_FAILED: &str = "PruneFailed";
    /// The source artifact could not be obtained.
    pub const ARTIFACT_FAILED: &str = "ArtifactFailed";
    /// Building the manifests failed.
    pub const BUILD_FAILED: &str = "BuildFailed";
    /// Health checks failed.
    pub const HEALTH_CHECK_FAILED: &str = "HealthCheckFailed";
    /// Health checks were cancelled by a newer revision.
    pub const HEALTH_CHECK_CANCELED: &str = "HealthCheckCanceled";
    /// Reconciliation succeeded.
    pub const RECONCILIATION_SUCCEEDED: &str = "ReconciliationSucceeded";
    /// Reconciliation failed.
    pub const RECONCILIATION_FAILED: &str = "ReconciliationFailed";
    /// A CEL expression in the spec is invalid.
    pub const INVALID_CEL_EXPRESSION: &str = "InvalidCELExpression";
    /// The spec uses a feature gated off on this controller.
    pub const FEATURE_GATE_DISABLED: &str = "FeatureGateDisabled";
    /// Authentication against the source failed.
    pub const AUTHENTICATION_FAILED: &str = "AuthenticationFailed";
    /// Source verification failed.
    pub const VERIFICATION_ERROR: &str = "VerificationError";
    /// The stored artifact is up to date.
    pub const ARTIFACT_UP_TO_DATE: &str = "ArtifactUpToDate";
    /// The source URL is invalid.
    pub const URL_INVALID: &str = "URLInvalid";
}

/// Annotation keys understood by Flux controllers.
pub mod annotation {
    /// Requests an immediate reconcile; the value is an opaque token (usually a timestamp).
    pub const RECONCILE_REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";
    /// Requests a forced reconcile (HelmRelease: force a Helm upgrade).
    pub const FORCE_REQUESTED_AT: &str = "reconcile.fluxcd.io/forceAt";
    /// Requests a reset of the failure counters (HelmRelease).
    pub const RESET_REQUESTED_AT: &str = "reconcile.fluxcd.io/resetAt";
    /// On an applied resource: `disabled` keeps it out of garbage collection.
    pub const KUSTOMIZE_PRUNE: &str = "kustomize.toolkit.fluxcd.io/prune";
    /// On an applied resource: `Merge`, `IfNotPresent` or `Ignore` changes how it is applied.
    pub const KUSTOMIZE_SSA: &str = "kustomize.toolkit.fluxcd.io/ssa";
    /// On an applied resource: `enabled` recreates it when an immutable field changes.
    pub const KUSTOMIZE_FORCE: &str = "kustomize.toolkit.fluxcd.io/force";
    /// On an applied resource: `disabled` stops Flux from updating it.
    pub const KUSTOMIZE_RECONCILE: &str = "kustomize.toolkit.fluxcd.io/reconcile";
    /// On an applied resource: `disabled` skips post-build variable substitution.
    pub const KUSTOMIZE_SUBSTITUTE: &str = "kustomize.toolkit.fluxcd.io/substitute";
    /// On an applied resource: `disabled` skips SOPS decryption.
    pub const KUSTOMIZE_DECRYPT: &str = "kustomize.toolkit.fluxcd.io/decrypt";
    /// Value turning an annotation-controlled behaviour on.
    pub const ENABLED_VALUE: &str = "enabled";
    /// Value turning an annotation-controlled behaviour off.
    pub const DISABLED_VALUE: &str = "disabled";
    /// `kustomize.toolkit.fluxcd.io/ssa` value: merge into the existing object.
    pub const SSA_MERGE: &str = "Merge";
    /// `kustomize.toolkit.fluxcd.io/ssa` value: create only when absent.
    pub const SSA_IF_NOT_PRESENT: &str = "IfNotPresent";
    /// `kustomize.toolkit.fluxcd.io/ssa` value: never apply.
    pub const SSA_IGNORE: &str = "Ignore";
}

/// Label keys set or read by Flux controllers.
pub mod label {
    /// On Secrets/ConfigMaps: `Enabled` makes changes trigger a reconcile of referrers.
    pub const WATCH: &str = "reconcile.fluxcd.io/watch";
    /// Value of [`WATCH`] that enables watching.
    pub const WATCH_ENABLED: &str = "Enabled";
    /// On applied resources: name of the owning Kustomization.
    pub const KUSTOMIZE_NAME: &str = "kustomize.toolkit.fluxcd.io/name";
    /// On applied resources: namespace of the owning Kustomization.
    pub const KUSTOMIZE_NAMESPACE: &str = "kustomize.toolkit.fluxcd.io/namespace";
    /// On released resources: name of the owning HelmRelease.
    pub const HELM_NAME: &str = "helm.toolkit.fluxcd.io/name";
    /// On released resources: namespace of the owning HelmRelease.
    pub const HELM_NAMESPACE: &str = "helm.toolkit.fluxcd.io/namespace";
    /// On namespaces: the tenant that owns them (multi-tenancy convention).
    pub const TENANT: &str = "toolkit.fluxcd.io/tenant";
}

/// A reference to an object in the same namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalObjectReference {
    /// Name of the referent.
    pub name: String,
}

/// A reference to an object in any namespace (defaults to the referrer's).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedObjectReference {
    /// Name of the referent.
    pub name: String,
    /// Namespace of the referent, defaults to the namespace of the referrer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A typed reference to an object in any namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespacedObjectKindReference {
    /// API version of the referent; the preferred version when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the referent.
    pub kind: String,
    /// Name of the referent.
    pub name: String,
    /// Namespace of the referent, defaults to the namespace of the referrer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A reference to a Secret, optionally naming one key in it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyReference {
    /// Name of the Secret.
    pub name: String,
    /// Key in the Secret; an implementation-specific default when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// Where to find the kubeconfig of a remote cluster: exactly one of the two references.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"message": "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified",
     "rule": "has(self.configMapRef) || has(self.secretRef)"},
    {"message": "exactly one of spec.kubeConfig.configMapRef or spec.kubeConfig.secretRef must be specified",
     "rule": "!has(self.configMapRef) || !has(self.secretRef)"},
]))]
pub struct KubeConfigReference {
    /// A ConfigMap with `provider`, `cluster`, `address`, ... keys for secret-less access.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<LocalObjectReference>,
    /// A Secret holding a kubeconfig (key `value` unless set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeyReference>,
}

/// A dependency on another object of the same kind, optionally with a CEL readiness expression.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependencyReference {
    /// Name of the referent.
    pub name: String,
    /// Namespace of the referent, defaults to the namespace of the referrer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// CEL expression replacing the built-in readiness check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_expr: Option<String>,
}

/// The kind of object holding values or variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ValuesKind {
    /// A Secret.
    Secret,
    /// A ConfigMap.
    ConfigMap,
}

/// A reference to values held in a Secret or ConfigMap (HelmRelease `valuesFrom`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValuesReference {
    /// Kind of the values referent.
    pub kind: ValuesKind,
    /// Name of the values referent, in the referrer's namespace.
    #[schemars(extend("minLength" = 1, "maxLength" = 253))]
    pub name: String,
    /// Data key holding the values; `values.yaml` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 253, "pattern" = r"^[\-._a-zA-Z0-9]+$"))]
    pub values_key: Option<String>,
    /// YAML dot-path at which to merge the value (`--set` syntax); the root when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 250, "pattern" = r"^([a-zA-Z0-9_\-.\\\/]|\[[0-9]{1,5}\])+$"))]
    pub target_path: Option<String>,
    /// Tolerate the referent or key being absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
    /// Merge the value as a literal string, not YAML (only with `targetPath`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub literal: Option<bool>,
}

impl ValuesReference {
    /// The default data key, `values.yaml`.
    pub const DEFAULT_VALUES_KEY: &str = "values.yaml";

    /// The data key, falling back to [`Self::DEFAULT_VALUES_KEY`].
    pub fn values_key(&self) -> &str {
        self.values_key
            .as_deref()
            .unwrap_or(Self::DEFAULT_VALUES_KEY)
    }
}

/// A source artifact produced by source-controller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Relative path of the artifact in storage.
    pub path: String,
    /// HTTP address of the artifact as served by the storage server.
    pub url: String,
    /// Human-readable source revision, e.g. `main@sha1:…`; see [`crate::Revision`].
    pub revision: String,
    /// Digest of the artifact file, `<algorithm>:<hex>`.
    #[schemars(extend("pattern" = r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$"))]
    pub digest: String,
    /// When the artifact was last updated.
    pub last_update_time: Time,
    /// Size of the artifact in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
    /// Extra information, e.g. OCI annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

impl Artifact {
    /// The parsed revision.
    pub fn parsed_revision(&self) -> Result<crate::Revision, crate::RevisionError> {
        crate::Revision::parse(&self.revision)
    }
}

/// The status field recording the last handled `reconcile.fluxcd.io/requestedAt` value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileRequestStatus {
    /// The most recent reconcile request token handled, so a new token can be detected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
}

impl ReconcileRequestStatus {
    /// Whether `annotations` carry a reconcile request not yet handled.
    pub fn is_pending(&self, annotations: Option<&BTreeMap<String, String>>) -> bool {
        annotations
            .and_then(|a| a.get(annotation::RECONCILE_REQUESTED_AT))
            .is_some_and(|token| self.last_handled_reconcile_at.as_deref() != Some(token.as_str()))
    }
}

/// Labels and annotations added to every applied object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommonMetadata {
    /// Annotations to add.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Labels to add.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// A kustomize image override.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    /// Tag-less image name to match.
    pub name: String,
    /// Replacement name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_name: Option<String>,
    /// Replacement tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_tag: Option<String>,
    /// Replacement digest; wins over `newTag`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// A kustomize resource selector.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Selector {
    /// API group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// API version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name (a regular expression in kustomize).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Annotation selector expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotation_selector: Option<String>,
    /// Label selector expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

/// An inline strategic-merge or JSON 6902 patch with an optional target.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Patch {
    /// The patch document (YAML or JSON).
    pub patch: String,
    /// The resources the patch applies to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Selector>,
}

/// Paths to ignore during drift detection, optionally for a subset of objects.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IgnoreRule {
    /// JSON Pointer (RFC 6901) paths to ignore.
    pub paths: Vec<String>,
    /// The objects the rule applies to; all when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Selector>,
}

/// CEL health check expressions for a custom resource kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomHealthCheck {
    /// API version of the checked resources.
    pub api_version: String,
    /// Kind of the checked resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Expression true when the resource reached its desired state.
    pub current: String,
    /// Expression true while the resource is still progressing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_progress: Option<String>,
    /// Expression true when the resource failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// One applied object in an inventory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceRef {
    /// `<namespace>_<name>_<group>_<kind>`.
    pub id: String,
    /// The object's API version.
    pub v: String,
}

/// The set of objects a Kustomization or HelmRelease applied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceInventory {
    /// The applied objects.
    pub entries: Vec<ResourceRef>,
}

/// One entry in a reconciliation history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Checksum (`<algo>:<hex>`) of the reconciled resources.
    pub digest: String,
    /// When this digest was first reconciled.
    pub first_reconciled: Time,
    /// When this digest was last reconciled.
    pub last_reconciled: Time,
    /// How long the last reconciliation took (Go duration).
    pub last_reconciled_duration: String,
    /// Outcome of the last reconciliation.
    pub last_reconciled_status: String,
    /// Number of reconciliations of this digest.
    pub total_reconciliations: i64,
    /// Extra information (e.g. the revision).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// Flux keeps at most this many [`Snapshot`]s in a history.
pub const HISTORY_MAX_SIZE: usize = 5;

/// Returns the condition of type `type_` from a condition list.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_key_defaults() {
        let mut r = ValuesReference {
            kind: ValuesKind::ConfigMap,
            name: "v".into(),
            values_key: None,
            target_path: None,
            optional: None,
            literal: None,
        };
        assert_eq!(r.values_key(), "values.yaml");
        r.values_key = Some("custom.yaml".into());
        assert_eq!(r.values_key(), "custom.yaml");
    }

    #[test]
    fn reconcile_request_pending() {
        let mut annotations = BTreeMap::new();
        let mut status = ReconcileRequestStatus::default();
        assert!(!status.is_pending(None));
        assert!(!status.is_pending(Some(&annotations)));
        annotations.insert(
            annotation::RECONCILE_REQUESTED_AT.to_owned(),
            "t1".to_owned(),
        );
        assert!(status.is_pending(Some(&annotations)));
        status.last_handled_reconcile_at = Some("t1".into());
        assert!(!status.is_pending(Some(&annotations)));
    }

    #[test]
    fn finds_ready_condition() {
        let ready = |status: &str| Condition {
            type_: condition::READY.into(),
            status: status.into(),
            reason: reason::SUCCEEDED.into(),
            message: String::new(),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            observed_generation: None,
        };
        assert!(find_condition(&[], condition::READY).is_none());
        let conditions = [ready("False")];
        let found = find_condition(&conditions, condition::READY);
        assert_eq!(found.map(|c| c.status.as_str()), Some("False"));
        assert!(find_condition(&conditions, condition::STALLED).is_none());
    }
}
