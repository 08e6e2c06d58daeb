//! `capstan create receiver`: a Receiver as `flux create receiver --export` builds it (the
//! same flags and checks, in Flux's order).

use anyhow::bail;
use capstan_api::Receiver;
use capstan_api::meta::LocalObjectReference;
use capstan_api::notification::CrossNamespaceObjectReference;
use capstan_api::notification::v1::{ReceiverResource, ReceiverSpec, ReceiverType};
use clap::Args;
use kube::api::ObjectMeta;
use serde_json::Value;

/// `create receiver`.
#[derive(Debug, Args)]
pub struct CreateReceiver {
    /// Name of the Receiver.
    pub name: String,
    /// The webhook flavour: generic, generic-hmac, github, gitlab, bitbucket, harbor,
    /// dockerhub, quay, gcr, nexus, acr, cdevents.
    #[arg(long = "type")]
    pub type_: Option<String>,
    /// Name of the Secret holding the `token`.
    #[arg(long)]
    pub secret_ref: Option<String>,
    /// Event types accepted (repeatable, or comma separated); all when absent.
    #[arg(long = "event", value_delimiter = ',')]
    pub events: Vec<String>,
    /// Objects reconciled by the webhook, `<kind>/<name>` (repeatable, or comma separated).
    #[arg(long = "resource", value_delimiter = ',')]
    pub resources: Vec<String>,
}

/// The Receiver `args` describe.
pub fn receiver(args: &CreateReceiver, meta: ObjectMeta) -> anyhow::Result<Value> {
    let Some(type_) = args.type_.as_deref().filter(|t| !t.is_empty()) else {
        bail!("Receiver type is required");
    };
    let Ok(type_) = serde_json::from_value::<ReceiverType>(Value::from(type_)) else {
        bail!(
            "unsupported Receiver type '{type_}', must be one of: generic, generic-hmac, github, \
             gitlab, bitbucket, harbor, dockerhub, quay, gcr, nexus, acr, cdevents"
        );
    };
    let Some(secret) = args.secret_ref.as_deref().filter(|s| !s.is_empty()) else {
        bail!("secret ref is required");
    };
    let mut resources = Vec::new();
    for resource in &args.resources {
        let Some((kind, name)) = resource
            .split_once('/')
            .filter(|(k, n)| !k.is_empty() && !n.is_empty())
        else {
            bail!("invalid event source '{resource}', must be in format <kind>/<name>");
        };
        let Ok(kind) = serde_json::from_value(Value::from(kind)) else {
            bail!("invalid event source '{resource}': unknown kind '{kind}'");
        };
        resources.push(ReceiverResource {
            reference: CrossNamespaceObjectReference {
                api_version: None,
                kind,
                name: name.to_owned(),
                namespace: None,
                match_labels: std::collections::BTreeMap::new(),
            },
            filter: None,
        });
    }
    if resources.is_empty() {
        bail!("at least one resource is required");
    }
    let object = Receiver {
        metadata: meta,
        spec: ReceiverSpec {
            type_,
            interval: None,
            events: args.events.clone(),
            resources,
            resource_filter: None,
            secret_ref: Some(LocalObjectReference {
                name: secret.to_owned(),
            }),
            oidc_providers: Vec::new(),
            suspend: None,
        },
        status: None,
    };
    Ok(serde_json::to_value(object)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(type_: Option<&str>, secret: Option<&str>, resources: &[&str]) -> CreateReceiver {
        CreateReceiver {
            name: "hook".into(),
            type_: type_.map(str::to_owned),
            secret_ref: secret.map(str::to_owned),
            events: vec!["push".into()],
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
        }
    }

    #[test]
    fn builds_flux_receiver_and_refuses_what_flux_refuses() {
        let object = receiver(
            &args(Some("github"), Some("token"), &["GitRepository/app"]),
            ObjectMeta::default(),
        )
        .unwrap();
        assert_eq!(object["spec"]["type"], "github");
        assert_eq!(object["spec"]["events"], serde_json::json!(["push"]));
        assert_eq!(
            object["spec"]["resources"],
            serde_json::json!([{"kind": "GitRepository", "name": "app"}])
        );
        assert_eq!(object["spec"]["secretRef"]["name"], "token");
        for (bad, message) in [
            (
                args(None, Some("t"), &["GitRepository/app"]),
                "type is required",
            ),
            (
                args(Some("svn"), Some("t"), &["GitRepository/app"]),
                "unsupported",
            ),
            (
                args(Some("github"), None, &["GitRepository/app"]),
                "secret ref",
            ),
            (args(Some("github"), Some("t"), &["app"]), "<kind>/<name>"),
            (
                args(Some("github"), Some("t"), &["Pod/app"]),
                "unknown kind",
            ),
            (
                args(Some("github"), Some("t"), &[]),
                "at least one resource",
            ),
        ] {
            let error = receiver(&bad, ObjectMeta::default())
                .unwrap_err()
                .to_string();
            assert!(error.contains(message), "{error}");
        }
    }
}
