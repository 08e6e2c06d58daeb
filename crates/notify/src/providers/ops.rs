//! Webhook and operations providers: generic, generic-hmac, Opsgenie, PagerDuty,
//! Alertmanager, Grafana, Datadog, Sentry.

// Every builder has the signature `build` dispatches on, whether or not it can fail.
#![allow(clippy::unnecessary_wraps)]

use std::collections::BTreeMap;

use base64::Engine;
use hmac::{KeyInit, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Ctx, hex, http_url, name_and_description};
use crate::event::{PROGRESSING_REASON, Severity, rfc3339};
use crate::gojson;
use crate::request::{Method, Request};

/// The header naming the controller that emitted a forwarded event (forwarder.go).
pub const COMPONENT_HEADER: &str = "gotk-component";

/// The header carrying generic-hmac's signature, `sha256=<hex HMAC-SHA256 of the body>`.
pub const SIGNATURE_HEADER: &str = "X-Signature";

/// forwarder.go: the event itself as Go marshals it, `gotk-component: <controller>`, the
/// Secret's `headers`, and for generic-hmac `X-Signature: sha256=<hex>` keyed with the token.
pub(crate) fn generic(ctx: &Ctx<'_>, hmac: bool) -> Result<Vec<Request>, String> {
    let body = ctx.event.to_go_json();
    let mut request = Request::json(
        Method::Post,
        ctx.address().to_owned(),
        ctx.settings.address_is_secret,
        body,
    )
    .header(COMPONENT_HEADER, ctx.event.reporting_controller.clone());
    for (name, value) in &ctx.settings.headers {
        request.set(name, value.expose().to_owned(), true);
    }
    if hmac {
        let key = ctx.settings.token.as_ref().map_or("", |t| t.expose());
        let signature = sign(key.as_bytes(), &request.body);
        request = request.header(SIGNATURE_HEADER, format!("sha256={signature}"));
    }
    Ok(vec![request])
}

/// Hex HMAC-SHA256 of `payload` under `key`.
pub fn sign(key: &[u8], payload: &[u8]) -> String {
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(payload);
    hex(&mac.finalize().into_bytes())
}

/// opsgenie.go: `message` `Kind/name`, a stable `alias` (SHA-256 of provider UID, object and
/// reason) so repeats are one alert, the metadata plus `severity` as `details`, and
/// `Authorization: GenieKey <token>`.
pub(crate) fn opsgenie(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    let event = ctx.event;
    let o = &event.involved_object;
    let mut details = event.metadata.clone();
    details.insert("severity".into(), event.severity.as_str().into());
    let alias = hex(&Sha256::digest(format!(
        "{}/{}/{}/{}/{}",
        ctx.settings.uid, o.kind, o.namespace, o.name, event.reason
    )));
    let payload = json!({
        "message": format!("{}/{}", o.kind, o.name),
        "alias": alias,
        "description": event.message,
        "details": details,
    });
    let token = ctx.settings.token.as_ref().map_or("", |t| t.expose());
    Ok(vec![
        Request::json(
            Method::Post,
            ctx.address().to_owned(),
            ctx.settings.address_is_secret,
            gojson::to_vec(&payload),
        )
        .secret_header("Authorization", format!("GenieKey {token}")),
    ])
}

/// pagerduty.go: `Progressing` events are skipped. Every event sends an Events API v2 event to
/// `<scheme>://<host>/v2/enqueue` with the routing key `spec.channel` and the involved
/// object's UID as dedup key: `trigger` with a payload for errors, `resolve` otherwise; `info`
/// events also send a change event to `/v2/change/enqueue`.
pub(crate) fn pagerduty(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    let event = ctx.event;
    if event.reason == PROGRESSING_REASON {
        return Ok(Vec::new());
    }
    let url = http_url(ctx.address())?;
    let endpoint = match url.port() {
        Some(port) => format!(
            "{}://{}:{port}",
            url.scheme(),
            url.host_str().unwrap_or_default()
        ),
        None => format!("{}://{}", url.scheme(), url.host_str().unwrap_or_default()),
    };
    let routing_key = ctx.settings.channel.as_deref().unwrap_or_default();
    let (name, description) = name_and_description(event);
    let summary = format!("{description}: {name}");
    let source = format!("Flux {}", event.reporting_controller);
    let metadata = if event.metadata.is_empty() {
        Value::Null
    } else {
        json!(event.metadata)
    };
    let details = json!({"message": event.message, "metadata": metadata});
    // go-pagerduty V2Event field order; dedup_key and payload are omitted when empty.
    let mut v2 = json!({"routing_key": routing_key});
    v2["event_action"] = json!(if event.severity == Severity::Error {
        "trigger"
    } else {
        "resolve"
    });
    if !event.involved_object.uid.is_empty() {
        v2["dedup_key"] = json!(event.involved_object.uid);
    }
    if event.severity == Severity::Error {
        v2["payload"] = json!({
            "summary": summary,
            "source": source,
            "severity": "error",
            "timestamp": rfc3339(event.timestamp),
            "component": event.involved_object.name,
            "group": event.involved_object.kind,
            "custom_details": details,
        });
    }
    let mut requests = vec![Request::json(
        Method::Post,
        format!("{endpoint}/v2/enqueue"),
        ctx.settings.address_is_secret,
        gojson::to_vec(&v2),
    )];
    if event.severity == Severity::Info {
        let change = json!({
            "routing_key": routing_key,
            // go-pagerduty v1.8.0 ChangeEventPayload field order.
            "payload": {
                "summary": summary,
                "source": source,
                "timestamp": rfc3339(event.timestamp),
                "custom_details": details,
            },
        });
        requests.push(Request::json(
            Method::Post,
            format!("{endpoint}/v2/change/enqueue"),
            ctx.settings.address_is_secret,
            gojson::to_vec(&change),
        ));
    }
    Ok(requests)
}

/// Go's `cases.Title(language.Und)`: the first letter of each word upper-cased, the rest
/// lower-cased (`ReconciliationSucceeded` → `Reconciliationsucceeded`).
fn title_case(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_word = false;
    for c in text.chars() {
        let word_char = c.is_alphanumeric() || c == '_' || c == '\'';
        if word_char && !in_word {
            out.extend(c.to_uppercase());
        } else if word_char {
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
        in_word = word_char;
    }
    out
}

/// alertmanager.go: one firing alert; labels are the metadata (but `summary`, which becomes an
/// annotation) plus `alertname` (`Flux<Kind><Reason title-cased>`), `severity`, `reason`,
/// `kind`, `name`, `namespace`, `reportingcontroller`; annotation `message`; `startsAt` the
/// event time and `endsAt` Go's zero time (Alertmanager then applies its resolve timeout).
/// Basic auth when the Secret has username and password, else the token as bearer.
pub(crate) fn alertmanager(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    let event = ctx.event;
    let o = &event.involved_object;
    let mut labels = event.metadata.clone();
    let mut annotations = BTreeMap::from([("message".to_owned(), event.message.clone())]);
    if let Some(summary) = labels.remove(crate::event::META_SUMMARY) {
        annotations.insert("summary".into(), summary);
    }
    labels.insert(
        "alertname".into(),
        format!("Flux{}{}", o.kind, title_case(&event.reason)),
    );
    labels.insert("severity".into(), event.severity.as_str().into());
    labels.insert("reason".into(), event.reason.clone());
    labels.insert("kind".into(), o.kind.clone());
    labels.insert("name".into(), o.name.clone());
    labels.insert("namespace".into(), o.namespace.clone());
    labels.insert(
        "reportingcontroller".into(),
        event.reporting_controller.clone(),
    );
    let payload = json!([{
        "status": "firing",
        "labels": labels,
        "annotations": annotations,
        "startsAt": rfc3339(event.timestamp),
        "endsAt": "0001-01-01T00:00:00Z",
    }]);
    let mut request = Request::json(
        Method::Post,
        ctx.address().to_owned(),
        ctx.settings.address_is_secret,
        gojson::to_vec(&payload),
    );
    if let Some(auth) = basic_or_bearer(ctx, true) {
        request = request.secret_header("Authorization", auth);
    }
    Ok(vec![request])
}

/// `Basic <base64 user:password>` or `Bearer <token>`; `basic_first` picks which wins when
/// both are set (Alertmanager: basic; Grafana: the token).
fn basic_or_bearer(ctx: &Ctx<'_>, basic_first: bool) -> Option<String> {
    let s = ctx.settings;
    let basic = match (&s.username, &s.password) {
        (Some(user), Some(password)) if !user.is_empty() && !password.expose().is_empty() => {
            Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD
                    .encode(format!("{user}:{}", password.expose()))
            ))
        }
        _ => None,
    };
    let bearer = s
        .token
        .as_ref()
        .filter(|t| !t.expose().is_empty())
        .map(|t| format!("Bearer {}", t.expose()));
    if basic_first {
        basic.or(bearer)
    } else {
        bearer.or(basic)
    }
}

/// grafana.go: an annotation (Graphite format): `when` the event time in Unix seconds, `text`
/// the object line, tags `flux`, the controller, `key: value` per metadata entry (`:` replaced
/// by `|` in both) and the object's kind, name and namespace.
pub(crate) fn grafana(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    let event = ctx.event;
    let o = &event.involved_object;
    let mut tags = vec!["flux".to_owned(), event.reporting_controller.clone()];
    for (k, v) in &event.metadata {
        tags.push(format!("{}: {}", k.replace(':', "|"), v.replace(':', "|")));
    }
    tags.push(format!("kind: {}", o.kind));
    tags.push(format!("name: {}", o.name));
    tags.push(format!("namespace: {}", o.namespace));
    let payload = json!({
        "when": event.timestamp.as_second(),
        "text": event.object_line(),
        "tags": tags,
    });
    let mut request = Request::json(
        Method::Post,
        ctx.address().to_owned(),
        ctx.settings.address_is_secret,
        gojson::to_vec(&payload),
    );
    if let Some(auth) = basic_or_bearer(ctx, false) {
        request = request.secret_header("Authorization", auth);
    }
    Ok(vec![request])
}

/// datadog.go (through datadog-api-client-go, which writes the fields in key order): an event
/// to `<scheme>://<host>/api/v1/events` with the API key in `DD-API-KEY`; tags (all lower-cased)
/// `flux_reporting_controller`, `flux_reason`, `kube_kind`, `kube_name`, `kube_namespace` and
/// one per metadata entry.
pub(crate) fn datadog(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    let event = ctx.event;
    let o = &event.involved_object;
    let url = http_url(ctx.address())?;
    let endpoint = match url.port() {
        Some(port) => format!(
            "{}://{}:{port}",
            url.scheme(),
            url.host_str().unwrap_or_default()
        ),
        None => format!("{}://{}", url.scheme(), url.host_str().unwrap_or_default()),
    };
    let mut tags = vec![
        format!("flux_reporting_controller:{}", event.reporting_controller),
        format!("flux_reason:{}", event.reason),
        format!("kube_kind:{}", o.kind),
        format!("kube_name:{}", o.name),
        format!("kube_namespace:{}", o.namespace),
    ];
    for (k, v) in &event.metadata {
        tags.push(format!("{k}:{v}"));
    }
    let tags: Vec<String> = tags.into_iter().map(|t| t.to_lowercase()).collect();
    let payload = json!({
        "alert_type": if event.severity == Severity::Error { "error" } else { "info" },
        "date_happened": event.timestamp.as_second(),
        "source_type_name": "fluxcd",
        "tags": tags,
        "text": event.message,
        "title": format!("Events from the {} {}/{}", o.kind, o.name, o.namespace),
    });
    let token = ctx.settings.token.as_ref().map_or("", |t| t.expose());
    Ok(vec![
        Request::json(
            Method::Post,
            format!("{endpoint}/api/v1/events"),
            ctx.settings.address_is_secret,
            gojson::to_vec(&payload),
        )
        .header("Accept", "application/json")
        .secret_header("DD-API-KEY", token),
    ])
}

/// A Sentry DSN's envelope endpoint and public key.
pub(crate) struct SentryEndpoint {
    url: String,
    public_key: String,
}

/// Parses `https://<public key>@<host>[/<path>]/<project id>` into its envelope endpoint
/// `https://<host>[/<path>]/api/<project id>/envelope/`.
pub(crate) fn sentry_endpoint(dsn: &str) -> Result<SentryEndpoint, String> {
    let url = reqwest::Url::parse(dsn).map_err(|e| format!("the Sentry DSN is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("the Sentry DSN is not an http(s) URL".to_owned());
    }
    if url.username().is_empty() {
        return Err("the Sentry DSN has no public key (https://<key>@<host>/<project>)".to_owned());
    }
    let path = url.path().trim_end_matches('/');
    let (prefix, project) = path.rsplit_once('/').unwrap_or(("", path));
    if project.is_empty() {
        return Err("the Sentry DSN has no project ID".to_owned());
    }
    let host = url.host_str().unwrap_or_default();
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    };
    Ok(SentryEndpoint {
        url: format!(
            "{}://{authority}{prefix}/api/{project}/envelope/",
            url.scheme()
        ),
        public_key: url.username().to_owned(),
    })
}

/// sentry.go (through sentry-go): errors become Sentry events (level `error`, server name the
/// controller, transaction `Kind: namespace/name`, the metadata as context `metadata`); info
/// events become transactions tagged with the object, controller and reason. Sent as one
/// envelope; `spec.channel` is the environment. The event ID is derived from the event, so a
/// resent event is deduplicated by Sentry.
pub(crate) fn sentry(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    let event = ctx.event;
    let o = &event.involved_object;
    let endpoint = sentry_endpoint(ctx.address())?;
    let digest = hex(&Sha256::digest(event.to_go_json()));
    let event_id = &digest[..32];
    let timestamp = rfc3339(event.timestamp);
    let transaction = format!("{}: {}/{}", o.kind, o.namespace, o.name);
    let mut item = json!({"event_id": event_id});
    if let Some(environment) = &ctx.settings.channel {
        item["environment"] = json!(environment);
    }
    item["platform"] = json!("other");
    item["timestamp"] = json!(timestamp);
    item["transaction"] = json!(transaction);
    item["message"] = json!(event.message);
    let item_type = if event.severity == Severity::Error {
        item["level"] = json!("error");
        item["server_name"] = json!(event.reporting_controller);
        item["contexts"] = json!({"metadata": event.metadata});
        "event"
    } else {
        let mut tags = BTreeMap::from([
            ("flux_involved_object_kind".to_owned(), o.kind.clone()),
            (
                "flux_involved_object_namespace".to_owned(),
                o.namespace.clone(),
            ),
            ("flux_involved_object_name".to_owned(), o.name.clone()),
            (
                "flux_reporting_controller".to_owned(),
                event.reporting_controller.clone(),
            ),
            (
                "flux_reporting_instance".to_owned(),
                event.reporting_instance.clone(),
            ),
            ("flux_reason".to_owned(), event.reason.clone()),
        ]);
        tags.extend(event.metadata.clone());
        item["type"] = json!("transaction");
        item["start_timestamp"] = json!(timestamp);
        item["tags"] = json!(tags);
        item["contexts"] = json!({"trace": {
            "trace_id": event_id,
            "span_id": &digest[32..48],
            "op": "event",
        }});
        "transaction"
    };
    let item = gojson::to_vec(&item);
    let mut body = gojson::to_vec(&json!({"event_id": event_id, "sent_at": timestamp}));
    body.push(b'\n');
    body.extend(gojson::to_vec(
        &json!({"type": item_type, "length": item.len()}),
    ));
    body.push(b'\n');
    body.extend(item);
    body.push(b'\n');
    let mut request = Request::json(Method::Post, endpoint.url, false, body);
    request.set(
        "Content-Type",
        "application/x-sentry-envelope".to_owned(),
        false,
    );
    request.set(
        "X-Sentry-Auth",
        format!(
            "Sentry sentry_version=7, sentry_client=capstan-notify/{}, sentry_key={}",
            env!("CARGO_PKG_VERSION"),
            endpoint.public_key
        ),
        true,
    );
    Ok(vec![request])
}
