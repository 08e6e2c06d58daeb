//! The Alert kind.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::meta::LocalObjectReference;
use crate::notification::CrossNamespaceObjectReference;

/// Desired state of an Alert: which events are forwarded to which Provider.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "notification.toolkit.fluxcd.io",
    version = "v1beta3",
    kind = "Alert",
    plural = "alerts",
    namespaced,
    derive = "PartialEq",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-notifications",
    doc = "Alert is the Schema for the alerts API.",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AlertSpec {
    /// The Provider receiving the events.
    pub provider_ref: LocalObjectReference,
    /// Minimum severity forwarded; `info` (everything) when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "info"))]
    pub event_severity: Option<EventSeverity>,
    /// The objects whose events are forwarded.
    pub event_sources: Vec<CrossNamespaceObjectReference>,
    /// Regular expressions; only matching event messages are forwarded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inclusion_list: Vec<String>,
    /// Regular expressions; matching event messages are dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclusion_list: Vec<String>,
    /// Metadata added to every forwarded event.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub event_metadata: BTreeMap<String, String>,
    /// Short description added to every forwarded event.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 255))]
    pub summary: Option<String>,
    /// Stop forwarding events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

/// Event severity.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum EventSeverity {
    /// Informational events and errors (the default).
    #[default]
    Info,
    /// Errors only.
    Error,
}

impl Alert {
    /// The effective minimum severity.
    pub fn event_severity(&self) -> EventSeverity {
        self.spec.event_severity.unwrap_or_default()
    }

    /// Whether an event of `severity` passes the severity filter.
    pub fn accepts_severity(&self, severity: EventSeverity) -> bool {
        severity >= self.event_severity()
    }

    /// Whether forwarding is suspended.
    pub fn suspended(&self) -> bool {
        self.spec.suspend.unwrap_or(false)
    }
}

crate::flux_kind! {
    Alert: NoStatus,
    singular = "alert",
    plural = "alerts",
    short_names = [],
    display = "Alert",
    role = Notification,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notification::EventSourceKind;

    #[test]
    fn severity_defaults_to_info() {
        let alert: Alert = serde_saphyr::from_str(
            "apiVersion: notification.toolkit.fluxcd.io/v1beta3\nkind: Alert\nmetadata:\n  name: a\nspec:\n  providerRef:\n    name: slack\n  eventSources:\n  - kind: Kustomization\n    name: '*'\n    matchLabels:\n      team: web\n",
        )
        .unwrap();
        assert_eq!(alert.event_severity(), EventSeverity::Info);
        assert!(alert.accepts_severity(EventSeverity::Info));
        assert!(alert.accepts_severity(EventSeverity::Error));
        assert_eq!(
            alert.spec.event_sources[0].kind,
            EventSourceKind::Kustomization
        );
        assert_eq!(alert.spec.event_sources[0].match_labels["team"], "web");

        let mut errors_only = alert.clone();
        errors_only.spec.event_severity = Some(EventSeverity::Error);
        assert!(!errors_only.accepts_severity(EventSeverity::Info));
    }
}
