//! The Provider kind.

use std::time::Duration;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::duration::{INTERVAL_PATTERN, TIMEOUT_PATTERN};
use crate::meta::LocalObjectReference;

/// Timeout of notification requests when `spec.timeout` is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);

/// Desired state of a Provider: where and how notifications are sent.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "notification.toolkit.fluxcd.io",
    version = "v1beta3",
    kind = "Provider",
    plural = "providers",
    namespaced,
    derive = "PartialEq",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-notifications",
    doc = "Provider is the Schema for the providers API.",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "message": "spec.commitStatusExpr is only supported for the 'github', 'gitlab', 'gitea', 'bitbucketserver', 'bitbucket', 'azuredevops' provider types",
    "rule": "self.type == 'github' || self.type == 'gitlab' || self.type == 'gitea' || self.type == 'bitbucketserver' || self.type == 'bitbucket' || self.type == 'azuredevops' || !has(self.commitStatusExpr)",
}]))]
pub struct ProviderSpec {
    /// The notification service.
    #[serde(rename = "type")]
    pub type_: ProviderType,
    /// Deprecated and unused.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = INTERVAL_PATTERN))]
    pub interval: Option<String>,
    /// Channel (Slack channel, Matrix room, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 2048))]
    pub channel: Option<String>,
    /// Bot user name.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 2048))]
    pub username: Option<String>,
    /// Endpoint address (webhook URL, API URL or repository URL).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 2048))]
    pub address: Option<String>,
    /// Timeout of notification requests; 15s when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = TIMEOUT_PATTERN))]
    pub timeout: Option<String>,
    /// Deprecated: HTTP(S) proxy address; use `proxySecretRef`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 2048, "pattern" = "^(http|https)://.*$"))]
    pub proxy: Option<String>,
    /// Secret with proxy settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_secret_ref: Option<LocalObjectReference>,
    /// Secret with the address, token or credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,
    /// Secret with TLS CA and client certificate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_secret_ref: Option<LocalObjectReference>,
    /// Stop sending notifications.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// CEL expression computing the commit status ID (Git providers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_status_expr: Option<String>,
    /// Service account for workload identity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// The notification services a Provider can target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum ProviderType {
    Slack,
    Discord,
    Msteams,
    Rocket,
    Generic,
    #[serde(rename = "generic-hmac")]
    GenericHmac,
    Github,
    Gitlab,
    Gitea,
    Giteapullrequestcomment,
    Bitbucketserver,
    Bitbucket,
    Azuredevops,
    Googlechat,
    Googlepubsub,
    Webex,
    Sentry,
    Azureeventhub,
    Telegram,
    Lark,
    Matrix,
    Opsgenie,
    Alertmanager,
    Grafana,
    Githubdispatch,
    Githubpullrequestcomment,
    Gitlabmergerequestcomment,
    Pagerduty,
    Datadog,
    Nats,
    Zulip,
    Otel,
    Zoom,
    #[serde(rename = "incident.io")]
    IncidentIo,
}

impl ProviderType {
    /// Whether this provider posts Git commit statuses (and so accepts `commitStatusExpr`).
    pub fn is_commit_status(self) -> bool {
        matches!(
            self,
            Self::Github
                | Self::Gitlab
                | Self::Gitea
                | Self::Bitbucketserver
                | Self::Bitbucket
                | Self::Azuredevops
        )
    }
}

impl Provider {
    /// `spec.timeout` as a duration; [`DEFAULT_TIMEOUT`] (15s) when absent.
    pub fn timeout(&self) -> Result<Duration, crate::Error> {
        crate::duration::field_or(
            "spec.timeout",
            self.spec.timeout.as_deref(),
            DEFAULT_TIMEOUT,
        )
    }

    /// Whether notifications are suspended.
    pub fn suspended(&self) -> bool {
        self.spec.suspend.unwrap_or(false)
    }
}

crate::flux_kind! {
    Provider: NoStatus,
    singular = "provider",
    plural = "providers",
    short_names = [],
    display = "Provider",
    role = Notification,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_and_types() {
        let provider: Provider = serde_saphyr::from_str(
            "apiVersion: notification.toolkit.fluxcd.io/v1beta3\nkind: Provider\nmetadata:\n  name: p\nspec:\n  type: incident.io\n  address: https://api.incident.io\n",
        )
        .unwrap();
        assert_eq!(provider.spec.type_, ProviderType::IncidentIo);
        assert_eq!(provider.timeout().unwrap(), DEFAULT_TIMEOUT);
        assert!(!provider.spec.type_.is_commit_status());
        assert!(ProviderType::Gitea.is_commit_status());
        let generic_hmac: ProviderType = serde_json::from_str("\"generic-hmac\"").unwrap();
        assert_eq!(generic_hmac, ProviderType::GenericHmac);
        assert!(serde_json::from_str::<ProviderType>("\"carrier-pigeon\"").is_err());
    }
}
