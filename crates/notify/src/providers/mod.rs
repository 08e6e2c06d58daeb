//! Each provider's request for an event: `(settings, event) -> Vec<Request>`, the bytes Flux's
//! notification-controller (internal/notifier/*.go) sends.
//!
//! Shared conventions, as in Flux:
//! - the object line of chat providers is `<kind lower-cased>/<name>.<namespace>`;
//! - `info` is green/success, `error` red/failure;
//! - metadata is listed in key order (Flux iterates a Go map, so its order is random);
//! - JSON is written as Go's `json.Marshal` (HTML characters escaped).

mod chat;
mod git;
mod ops;

use serde_json::Value;

use capstan_api::notification::v1beta3::ProviderType;

use crate::event::Event;
use crate::request::Request;
use crate::settings::ProviderSettings;

/// An event a provider cannot turn into a request (the Provider itself is valid).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("provider {provider}: {reason}")]
pub struct BuildError {
    /// `namespace/name` of the Provider.
    pub provider: String,
    /// What is wrong with the event for this provider.
    pub reason: String,
}

/// The requests `settings`' provider sends for `event`: usually one; none when Flux skips the
/// event for this type (a `Progressing` event for most commit-status providers and PagerDuty);
/// two for PagerDuty `info` events (the resolve and a change event).
///
/// `alert` is the Alert object as JSON, the `alert` variable of `spec.commitStatusExpr`
/// (`None` reads as an empty object).
///
/// The event must be the one the Alert dispatches: its metadata already combined (keys without
/// their API-group prefix, the Alert's `eventMetadata`/`summary` merged, the token removed), as
/// notification-controller's `combineEventMetadata` does before calling a notifier.
pub fn build(
    settings: &ProviderSettings,
    event: &Event,
    alert: Option<&Value>,
) -> Result<Vec<Request>, BuildError> {
    let fail = |reason: String| BuildError {
        provider: settings.provider.clone(),
        reason,
    };
    let ctx = Ctx { settings, event };
    match settings.type_ {
        ProviderType::Slack => chat::slack(&ctx),
        ProviderType::Discord => chat::discord(&ctx),
        ProviderType::Rocket => chat::rocket(&ctx),
        ProviderType::Msteams => chat::msteams(&ctx),
        ProviderType::Googlechat => chat::googlechat(&ctx),
        ProviderType::Webex => chat::webex(&ctx),
        ProviderType::Telegram => chat::telegram(&ctx),
        ProviderType::Lark => chat::lark(&ctx),
        ProviderType::Matrix => chat::matrix(&ctx),
        ProviderType::Generic => ops::generic(&ctx, false),
        ProviderType::GenericHmac => ops::generic(&ctx, true),
        ProviderType::Opsgenie => ops::opsgenie(&ctx),
        ProviderType::Pagerduty => ops::pagerduty(&ctx),
        ProviderType::Alertmanager => ops::alertmanager(&ctx),
        ProviderType::Grafana => ops::grafana(&ctx),
        ProviderType::Datadog => ops::datadog(&ctx),
        ProviderType::Sentry => ops::sentry(&ctx),
        ProviderType::Githubdispatch => git::github_dispatch(&ctx),
        ProviderType::Github
        | ProviderType::Gitlab
        | ProviderType::Gitea
        | ProviderType::Bitbucket
        | ProviderType::Bitbucketserver
        | ProviderType::Azuredevops => {
            let empty = Value::Object(serde_json::Map::new());
            let key = match &settings.commit_status_expr {
                Some(expr) => expr
                    .evaluate(event, alert.unwrap_or(&empty), &settings.provider_object)
                    .map_err(fail)?,
                None => crate::commit_status::default_key(&settings.uid, event),
            };
            git::commit_status(&ctx, &key)
        }
        other => Err(format!(
            "type '{}' is not supported by Capstan yet",
            crate::settings::type_name(other)
        )),
    }
    .map_err(fail)
    .map(|requests| with_idempotency_keys(settings, event, requests))
}

/// Adds [`crate::IDEMPOTENCY_KEY_HEADER`] to each request.
fn with_idempotency_keys(
    settings: &ProviderSettings,
    event: &Event,
    mut requests: Vec<Request>,
) -> Vec<Request> {
    use sha2::Digest;
    let event_json = event.to_go_json();
    for (index, request) in requests.iter_mut().enumerate() {
        let mut hasher = sha2::Sha256::new();
        hasher.update(b"capstan-notify/v1\n");
        hasher.update(settings.provider.as_bytes());
        hasher.update(b"\n");
        hasher.update(settings.uid.as_bytes());
        hasher.update(b"\n");
        hasher.update(&event_json);
        hasher.update(format!("\n{index}").as_bytes());
        let key = hex(&hasher.finalize());
        request.set(crate::IDEMPOTENCY_KEY_HEADER, key[..32].to_owned(), false);
    }
    requests
}

/// Whether notification-controller hands `event` — as received, before its metadata is
/// combined — to a provider of `type_` (internal/server/event_handlers.go
/// `getNotificationParams`):
/// - an event marked `<group>/commit_status: update` goes only to the commit-status and
///   generic providers;
/// - a commit-status provider gets only events with an `event.toolkit.fluxcd.io/commit`
///   key, commit-status updates, and errors.
pub fn dispatches_to(type_: ProviderType, event: &Event) -> bool {
    let group = event.involved_object.group();
    let update = event
        .metadata
        .get(&format!("{group}/{}", crate::event::META_COMMIT_STATUS))
        .is_some_and(|v| v == "update");
    let generic = matches!(type_, ProviderType::Generic | ProviderType::GenericHmac);
    if update && !type_.is_commit_status() && !generic {
        return false;
    }
    if type_.is_commit_status() {
        let has_commit = event
            .metadata
            .get(&format!(
                "{}/{}",
                crate::event::EVENT_GROUP,
                crate::event::META_COMMIT
            ))
            .is_some_and(|v| !v.is_empty());
        return has_commit || update || event.severity == crate::event::Severity::Error;
    }
    true
}

/// What a builder reads.
pub(crate) struct Ctx<'a> {
    pub settings: &'a ProviderSettings,
    pub event: &'a Event,
}

impl Ctx<'_> {
    /// The address (validated when the settings were resolved).
    fn address(&self) -> &str {
        self.settings.address.as_ref().map_or("", |a| a.expose())
    }

    fn is_error(&self) -> bool {
        self.event.severity == crate::event::Severity::Error
    }
}

/// Checks a provider's settings when they are resolved: `(field, reason)` of the first problem.
pub(crate) fn validate(settings: &ProviderSettings) -> Result<(), (&'static str, String)> {
    let address = settings.address.as_ref().map(crate::secret::Secret::expose);
    let need_token = |what: &str| -> Result<(), (&'static str, String)> {
        if settings.token.is_none() {
            return Err(("secretRef", format!("a 'token' key is required ({what})")));
        }
        Ok(())
    };
    let need_channel = |what: &str| -> Result<(), (&'static str, String)> {
        if settings.channel.is_none() {
            return Err(("spec.channel", format!("is required ({what})")));
        }
        Ok(())
    };
    match settings.type_ {
        ProviderType::Telegram => {
            need_channel("the chat ID")?;
            need_token("the bot token")?;
            if let Some(a) = address {
                http_url(a).map_err(|e| ("spec.address", e))?;
            }
            return Ok(());
        }
        ProviderType::Sentry => {
            let dsn = address.ok_or(("spec.address", "the Sentry DSN is required".to_owned()))?;
            ops::sentry_endpoint(dsn).map_err(|e| ("address", e))?;
            return Ok(());
        }
        ProviderType::Github
        | ProviderType::Githubdispatch
        | ProviderType::Gitlab
        | ProviderType::Gitea
        | ProviderType::Bitbucket
        | ProviderType::Bitbucketserver
        | ProviderType::Azuredevops => {
            return git::validate(settings);
        }
        _ => {}
    }
    let address = address.ok_or((
        "spec.address",
        "is required (or an 'address' key in the secretRef)".to_owned(),
    ))?;
    http_url(address).map_err(|e| ("address", e))?;
    match settings.type_ {
        ProviderType::GenericHmac => need_token("the HMAC key")?,
        ProviderType::Opsgenie => need_token("the Opsgenie API key")?,
        ProviderType::Datadog => need_token("the Datadog API key")?,
        ProviderType::Webex => {
            need_channel("the Webex room ID")?;
            need_token("the bot access token")?;
        }
        ProviderType::Matrix => {
            need_channel("the Matrix room ID")?;
            need_token("the access token")?;
        }
        ProviderType::Pagerduty => need_channel("the PagerDuty routing key")?,
        _ => {}
    }
    Ok(())
}

/// An absolute `http`/`https` URL with a host.
pub(crate) fn http_url(address: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(address).map_err(|e| format!("is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err("is not an http(s) URL with a host".to_owned());
    }
    Ok(url)
}

/// Lower-case `kind/name` and the reason split at its camel-case words, lower-cased
/// (`ReconciliationSucceeded` → `reconciliation succeeded`): Flux's `formatNameAndDescription`
/// (internal/notifier/util.go).
pub(crate) fn name_and_description(event: &Event) -> (String, String) {
    let o = &event.involved_object;
    let name = format!("{}/{}", o.kind, o.name).to_lowercase();
    let description = split_camel_case(&event.reason).join(" ").to_lowercase();
    (name, description)
}

/// Splits `ReconciliationSucceeded` into words: runs of lower-case, upper-case, digits and
/// other characters, with the last capital of an upper-case run starting the following
/// lower-case run (`HTTPServer` → `HTTP`, `Server`).
pub(crate) fn split_camel_case(text: &str) -> Vec<String> {
    fn class(c: char) -> u8 {
        if c.is_lowercase() {
            1
        } else if c.is_uppercase() {
            2
        } else if c.is_numeric() {
            3
        } else {
            4
        }
    }
    let mut runs: Vec<Vec<char>> = Vec::new();
    let mut last = 0;
    for c in text.chars() {
        let current = class(c);
        match runs.last_mut() {
            Some(run) if current == last => run.push(c),
            _ => runs.push(vec![c]),
        }
        last = current;
    }
    for i in 0..runs.len().saturating_sub(1) {
        if runs[i].first().is_some_and(|c| c.is_uppercase())
            && runs[i + 1].first().is_some_and(|c| c.is_lowercase())
            && let Some(moved) = runs[i].pop()
        {
            runs[i + 1].insert(0, moved);
        }
    }
    runs.into_iter()
        .filter(|r| !r.is_empty())
        .map(|r| r.into_iter().collect())
        .collect()
}

/// Lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

#[cfg(test)]
mod tests;

/// generic-hmac's signature, for tests that verify it on the receiving side.
#[cfg(test)]
pub(crate) fn sign_for_tests(key: &[u8], payload: &[u8]) -> String {
    ops::sign(key, payload)
}
