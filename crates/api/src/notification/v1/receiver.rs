//! The Receiver kind.

use std::time::Duration;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::INTERVAL_PATTERN;
use crate::meta::{Condition, LocalObjectReference, ReconcileRequestStatus};
use crate::notification::CrossNamespaceObjectReference;

/// Reconcile interval when `spec.interval` is unset.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(600);
/// Prefix of every receiver webhook path.
pub const WEBHOOK_PATH_PREFIX: &str = "/hook/";
/// OIDC audience used when an OIDC provider sets none.
pub const DEFAULT_OIDC_AUDIENCE: &str = "notification-controller";

/// Desired state of a Receiver: a webhook that triggers reconciles of Flux objects.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "notification.toolkit.fluxcd.io",
    version = "v1",
    kind = "Receiver",
    plural = "receivers",
    namespaced,
    status = "ReceiverStatus",
    derive = "PartialEq",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-notifications",
    doc = "Receiver is the Schema for the receivers API.",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"message": "generic-oidc receivers must define at least one oidcProvider",
     "rule": "self.type != 'generic-oidc' || (has(self.oidcProviders) && size(self.oidcProviders) > 0)"},
    {"message": "oidcProviders can only be set when type is generic-oidc",
     "rule": "self.type == 'generic-oidc' || !has(self.oidcProviders) || size(self.oidcProviders) == 0"},
    {"message": "secretRef cannot be set when type is generic-oidc",
     "rule": "self.type != 'generic-oidc' || !has(self.secretRef)"},
    {"message": "secretRef is required when type is not generic-oidc",
     "rule": "self.type == 'generic-oidc' || has(self.secretRef)"},
]))]
pub struct ReceiverSpec {
    /// The webhook flavour.
    #[serde(rename = "type")]
    pub type_: ReceiverType,
    /// How often the Receiver is reconciled; 10m when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "10m", "pattern" = INTERVAL_PATTERN))]
    pub interval: Option<String>,
    /// Event types accepted (e.g. GitHub `push`); all when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    /// The objects reconciled when the webhook fires.
    pub resources: Vec<ReceiverResource>,
    /// CEL expression selecting which `resources` to reconcile for a request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_filter: Option<String>,
    /// Secret with the `token` used to build the path and verify payloads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// OIDC issuers accepted by `generic-oidc` receivers.
    #[serde(
        default,
        rename = "oidcProviders",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["issuerURL"]))]
    pub oidc_providers: Vec<OidcProvider>,
    /// Stop handling webhooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

/// An object (or label-selected objects) reconciled by a Receiver, with an optional filter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReceiverResource {
    /// The referenced objects.
    #[serde(flatten)]
    pub reference: CrossNamespaceObjectReference,
    /// CEL expression evaluated per matched object, in addition to `resourceFilter`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
}

/// The webhook flavours a Receiver understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum ReceiverType {
    Generic,
    #[serde(rename = "generic-hmac")]
    GenericHmac,
    #[serde(rename = "generic-oidc")]
    GenericOidc,
    Github,
    Gitlab,
    Bitbucket,
    Harbor,
    Dockerhub,
    Quay,
    Gcr,
    Nexus,
    Acr,
    Cdevents,
}

/// An OIDC issuer trusted by a `generic-oidc` receiver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OidcProvider {
    /// Issuer URL.
    #[serde(rename = "issuerURL")]
    #[schemars(extend("pattern" = "^https?://"))]
    pub issuer_url: String,
    /// Expected audience; `notification-controller` when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// CEL variables computed from the token claims.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<OidcVariable>,
    /// CEL validations the token must pass.
    pub validations: Vec<OidcValidation>,
}

impl OidcProvider {
    /// The effective audience.
    pub fn audience(&self) -> &str {
        self.audience.as_deref().unwrap_or(DEFAULT_OIDC_AUDIENCE)
    }
}

/// A named CEL expression over token claims.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OidcVariable {
    /// Variable name.
    pub name: String,
    /// CEL expression.
    pub expression: String,
}

/// A CEL check over token claims.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OidcValidation {
    /// CEL expression that must be true.
    pub expression: String,
    /// Message reported when it is false.
    pub message: String,
}

/// Observed state of a Receiver.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("default" = {"observedGeneration": -1}))]
pub struct ReceiverStatus {
    /// The last reconciled generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generated webhook path, `/hook/<sha256>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_path: Option<String>,
    /// Reconcile-request bookkeeping.
    #[serde(flatten)]
    pub reconcile_request: ReconcileRequestStatus,
}

impl Receiver {
    /// `spec.interval` as a duration; [`DEFAULT_INTERVAL`] (10m) when absent.
    pub fn interval(&self) -> Result<Duration, crate::Error> {
        crate::duration::field_or(
            "spec.interval",
            self.spec.interval.as_deref(),
            DEFAULT_INTERVAL,
        )
    }

    /// Whether webhook handling is suspended.
    pub fn suspended(&self) -> bool {
        self.spec.suspend.unwrap_or(false)
    }
}

crate::flux_kind! {
    Receiver: ReceiverStatus,
    singular = "receiver",
    plural = "receivers",
    short_names = [],
    display = "Receiver",
    role = Notification,
}
crate::flux_status!(ReceiverStatus);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_defaults_to_ten_minutes() {
        let receiver: Receiver = serde_saphyr::from_str(
            "apiVersion: notification.toolkit.fluxcd.io/v1\nkind: Receiver\nmetadata:\n  name: r\nspec:\n  type: generic-oidc\n  resources:\n  - kind: GitRepository\n    name: podinfo\n  oidcProviders:\n  - issuerURL: https://token.actions.githubusercontent.com\n    validations:\n    - expression: claims.sub != ''\n      message: no subject\n",
        )
        .unwrap();
        assert_eq!(receiver.interval().unwrap(), DEFAULT_INTERVAL);
        assert_eq!(receiver.spec.type_, ReceiverType::GenericOidc);
        assert_eq!(
            receiver.spec.oidc_providers[0].audience(),
            DEFAULT_OIDC_AUDIENCE
        );
        assert!(!receiver.suspended());
    }
}
