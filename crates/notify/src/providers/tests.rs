//! Each provider's request compared field by field with what Flux's notification-controller
//! sends for the same event; the Flux source of each expectation is named beside it
//! (internal/notifier/<file>.go at fluxcd/notification-controller main, 2026-08).

use std::collections::BTreeMap;

use capstan_api::notification::v1beta3::Provider;
use serde_json::{Value, json};

use crate::{
    Event, IDEMPOTENCY_KEY_HEADER, Method, ObjectReference, ProviderSecrets, ProviderSettings,
    Request, Severity, build,
};

const SHA: &str = "4e1b2c3d4e5f60718293a4b5c6d7e8f901234567";
const PROVIDER_UID: &str = "9a8b7c6d-1234-4abc-8def-0123456789ab";

/// A Kustomization's successful apply, as kustomize-controller reports it.
fn info_event() -> Event {
    Event {
        involved_object: ObjectReference {
            kind: "Kustomization".into(),
            namespace: "shop".into(),
            name: "checkout".into(),
            uid: "0c5e1f2a-5555-4c3b-9d8e-7f6a5b4c3d2e".into(),
            api_version: "kustomize.toolkit.fluxcd.io/v1".into(),
            ..ObjectReference::default()
        },
        severity: Severity::Info,
        timestamp: "2026-11-25T10:20:30Z".parse().unwrap(),
        message: "Deployment/shop/checkout configured\nService/shop/checkout unchanged".into(),
        reason: "ReconciliationSucceeded".into(),
        metadata: BTreeMap::from([
            ("revision".into(), format!("trunk@sha1:{SHA}")),
            ("summary".into(), "checkout in eu-west".into()),
        ]),
        reporting_controller: "kustomize-controller".into(),
        reporting_instance: "kustomize-controller-6d9f".into(),
    }
}

/// A failed health check with characters Telegram and HTML-safe JSON escape.
fn error_event() -> Event {
    Event {
        severity: Severity::Error,
        message: "health check failed after 2m0s: timeout waiting for [Deployment/shop/checkout] <status>".into(),
        reason: "HealthCheckFailed".into(),
        metadata: BTreeMap::from([("revision".into(), format!("trunk@sha1:{SHA}"))]),
        ..info_event()
    }
}

#[allow(clippy::needless_pass_by_value)]
fn provider(type_: &str, spec: Value) -> Provider {
    let mut full = json!({"type": type_});
    for (k, v) in spec.as_object().unwrap() {
        full[k] = v.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "notification.toolkit.fluxcd.io/v1beta3",
        "kind": "Provider",
        "metadata": {"name": "notify", "namespace": "shop", "uid": PROVIDER_UID},
        "spec": full,
    }))
    .unwrap()
}

fn secret(pairs: &[(&str, &str)]) -> ProviderSecrets {
    ProviderSecrets {
        secret: Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
                .collect(),
        ),
        ..ProviderSecrets::default()
    }
}

fn settings(type_: &str, spec: Value, secrets: &ProviderSecrets) -> ProviderSettings {
    let with_ref = if secrets.secret.is_some() {
        let mut s = spec;
        s["secretRef"] = json!({"name": "notify-credentials"});
        s
    } else {
        spec
    };
    ProviderSettings::resolve(&provider(type_, with_ref), secrets).unwrap()
}

fn one(settings: &ProviderSettings, event: &Event) -> Request {
    let mut requests = build(settings, event, None).unwrap();
    assert_eq!(requests.len(), 1, "{requests:?}");
    requests.remove(0)
}

fn body(request: &Request) -> Value {
    request.json_body().expect("a JSON body")
}

fn header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request.header_value(name)
}

#[test]
fn slack_payload() {
    // slack.go: channel and username from the spec, colour good/danger, author
    // `kind/name.namespace`, fallback with the first message line, fields per metadata entry,
    // token as bearer; the address from the Secret.
    let s = settings(
        "slack",
        json!({"channel": "deploys", "username": "flux-bot"}),
        &secret(&[
            ("address", "https://hooks.slack.test/services/T1/B2/abc"),
            ("token", "xoxb-123"),
        ]),
    );
    let request = one(&s, &info_event());
    assert_eq!(request.method, Method::Post);
    assert_eq!(request.url, "https://hooks.slack.test/services/T1/B2/abc");
    assert_eq!(header(&request, "Content-Type"), Some("application/json"));
    assert_eq!(header(&request, "Authorization"), Some("Bearer xoxb-123"));
    let b = body(&request);
    assert_eq!(b["channel"], "deploys");
    assert_eq!(b["username"], "flux-bot");
    assert_eq!(b["icon_url"], "");
    assert_eq!(b["icon_emoji"], "");
    assert!(b.get("text").is_none(), "text is omitempty in SlackPayload");
    let a = &b["attachments"][0];
    assert_eq!(a["color"], "good");
    assert_eq!(a["author_name"], "kustomization/checkout.shop");
    assert_eq!(
        a["fallback"],
        "kustomization/checkout.shop: Deployment/shop/checkout configured"
    );
    assert_eq!(a["text"], info_event().message);
    assert_eq!(a["mrkdwn_in"], json!(["text"]));
    assert_eq!(
        a["fields"],
        json!([
            {"title": "revision", "value": format!("trunk@sha1:{SHA}"), "short": false},
            {"title": "summary", "value": "checkout in eu-west", "short": false},
        ])
    );
    // The username defaults to the reporting controller; errors are "danger".
    let s = settings(
        "slack",
        json!({"address": "https://hooks.slack.test/x"}),
        &ProviderSecrets::default(),
    );
    let b = body(&one(&s, &error_event()));
    assert_eq!(b["username"], "kustomize-controller");
    assert_eq!(b["channel"], "");
    assert_eq!(b["attachments"][0]["color"], "danger");
    assert!(
        one(&s, &error_event())
            .header_value("Authorization")
            .is_none()
    );
}

#[test]
fn discord_and_rocket_use_slack_format() {
    // discord.go: `/slack` appended to the webhook path; no channel, no fallback.
    let s = settings(
        "discord",
        json!({"address": "https://discord.test/api/webhooks/1/tok/", "channel": "ignored"}),
        &ProviderSecrets::default(),
    );
    let request = one(&s, &info_event());
    assert_eq!(request.url, "https://discord.test/api/webhooks/1/tok/slack");
    let b = body(&request);
    assert_eq!(b["channel"], "");
    assert_eq!(b["username"], "kustomize-controller");
    assert_eq!(b["attachments"][0]["fallback"], "");
    let s = settings(
        "discord",
        json!({"address": "https://discord.test/api/webhooks/1/tok/slack"}),
        &ProviderSecrets::default(),
    );
    assert_eq!(
        one(&s, &info_event()).url,
        "https://discord.test/api/webhooks/1/tok/slack"
    );

    // rocket.go: hex colours, no username default.
    let s = settings(
        "rocket",
        json!({"address": "https://rocket.test/hooks/x", "channel": "ops"}),
        &ProviderSecrets::default(),
    );
    let b = body(&one(&s, &error_event()));
    assert_eq!(b["channel"], "ops");
    assert_eq!(b["username"], "");
    assert_eq!(b["attachments"][0]["color"], "#FF0000");
    assert_eq!(
        body(&one(&s, &info_event()))["attachments"][0]["color"],
        "#0076D7"
    );
}

#[test]
fn msteams_adaptive_card_and_legacy_connector() {
    // teams.go: Adaptive Card 1.4 unless the host ends with .webhook.office.com.
    let s = settings(
        "msteams",
        json!({"address": "https://prod.westeurope.logic.azure.test/workflows/1"}),
        &ProviderSecrets::default(),
    );
    let b = body(&one(&s, &error_event()));
    assert_eq!(b["type"], "message");
    let attachment = &b["attachments"][0];
    assert_eq!(
        attachment["contentType"],
        "application/vnd.microsoft.card.adaptive"
    );
    let content = &attachment["content"];
    assert_eq!(
        content["$schema"],
        "http://adaptivecards.io/schemas/adaptive-card.json"
    );
    assert_eq!(content["type"], "AdaptiveCard");
    assert_eq!(content["version"], "1.4");
    assert_eq!(content["msteams"], json!({"width": "Full"}));
    let items = &content["body"][0]["items"];
    assert_eq!(content["body"][0]["type"], "Container");
    assert_eq!(
        items[0],
        json!({"type": "TextBlock", "text": "kustomization/checkout.shop", "size": "large", "weight": "bolder", "wrap": true})
    );
    assert_eq!(
        items[1],
        json!({"type": "TextBlock", "text": error_event().message, "color": "attention", "wrap": true})
    );
    assert_eq!(
        items[2],
        json!({"type": "FactSet", "facts": [{"title": "revision", "value": format!("trunk@sha1:{SHA}")}]})
    );
    // summary first, then the rest by key.
    let b = body(&one(&s, &info_event()));
    let facts = &b["attachments"][0]["content"]["body"][0]["items"][2]["facts"];
    assert_eq!(facts[0]["title"], "summary");
    assert_eq!(facts[1]["title"], "revision");
    assert!(
        b["attachments"][0]["content"]["body"][0]["items"][1]
            .get("color")
            .is_none()
    );

    let s = settings(
        "msteams",
        json!({"address": "https://contoso.webhook.office.com/webhookb2/x"}),
        &ProviderSecrets::default(),
    );
    let b = body(&one(&s, &error_event()));
    assert_eq!(b["@type"], "MessageCard");
    assert_eq!(b["@context"], "http://schema.org/extensions");
    assert_eq!(b["themeColor"], "FF0000");
    assert_eq!(b["summary"], "kustomization/checkout.shop");
    assert_eq!(b["sections"][0]["activityTitle"], error_event().message);
    assert_eq!(
        b["sections"][0]["activitySubtitle"],
        "kustomization/checkout.shop"
    );
    assert_eq!(
        b["sections"][0]["facts"][0],
        json!({"name": "revision", "value": format!("trunk@sha1:{SHA}")})
    );
}

#[test]
fn googlechat_card() {
    // google_chat.go: header title/subtitle with null image fields, the message (red <font>
    // on errors), then a key/value widget per metadata entry.
    let s = settings(
        "googlechat",
        json!({"address": "https://chat.googleapis.test/v1/spaces/x/messages?key=k"}),
        &ProviderSecrets::default(),
    );
    let request = one(&s, &error_event());
    let raw = String::from_utf8(request.body.clone()).unwrap();
    assert!(
        raw.contains(r##"\u003cfont color=\"#ff0000\"\u003e"##),
        "{raw}"
    );
    let b = body(&request);
    let card = &b["cards"][0];
    assert_eq!(
        card["header"],
        json!({"title": "kustomization/checkout.shop", "subtitle": "kustomize-controller", "imageUrl": null, "imageStyle": null})
    );
    assert_eq!(
        card["sections"][0],
        json!({"header": "", "widgets": [{"textParagraph": {"text": format!("<font color=\"#ff0000\">{}</font>", error_event().message)}, "keyValue": null}]})
    );
    assert_eq!(
        card["sections"][1]["widgets"][0],
        json!({"textParagraph": null, "keyValue": {"topLabel": "revision", "content": format!("trunk@sha1:{SHA}"), "contentMultiline": false, "bottomLabel": null, "icon": null}})
    );
}

#[test]
fn webex_markdown() {
    // webex.go: `✅ **obj**\nmessage\n` then `>**key**: value` lines; room from spec.channel.
    let s = settings(
        "webex",
        json!({"address": "https://webexapis.test/v1/messages", "channel": "room-1"}),
        &secret(&[("token", "bot-token")]),
    );
    let request = one(&s, &info_event());
    assert_eq!(header(&request, "Authorization"), Some("Bearer bot-token"));
    let b = body(&request);
    assert_eq!(b["roomId"], "room-1");
    assert_eq!(
        b["markdown"],
        format!(
            "✅ **kustomization/checkout.shop**\n{}\n>**revision**: trunk@sha1:{SHA}\n>**summary**: checkout in eu-west\n",
            info_event().message
        )
    );
    assert!(
        body(&one(&s, &error_event()))["markdown"]
            .as_str()
            .unwrap()
            .starts_with("💣 ")
    );
}

#[test]
fn telegram_markdown_v2() {
    // telegram.go: sendMessage on api.telegram.org/bot<token>, MarkdownV2 with every special
    // character escaped, heading with slashes, `chat:thread` channels.
    let s = settings(
        "telegram",
        json!({"channel": "-100123:42"}),
        &secret(&[("token", "123:ABC")]),
    );
    let request = one(&s, &error_event());
    assert_eq!(
        request.url,
        "https://api.telegram.org/bot123:ABC/sendMessage"
    );
    assert!(request.url_is_secret);
    let b = body(&request);
    assert_eq!(b["chat_id"], "-100123");
    assert_eq!(b["message_thread_id"], "42");
    assert_eq!(b["parse_mode"], "MarkdownV2");
    assert_eq!(
        b["text"],
        format!(
            "*🚨 kustomization/checkout/shop*\nhealth check failed after 2m0s: timeout waiting for \\[Deployment/shop/checkout\\] <status\\>\n\\- *revision*: trunk@sha1:{SHA}\n"
        )
    );
    let s = settings(
        "telegram",
        json!({"channel": "@flux"}),
        &secret(&[("token", "123:ABC")]),
    );
    let b = body(&one(&s, &info_event()));
    assert!(b.get("message_thread_id").is_none());
    assert!(
        b["text"]
            .as_str()
            .unwrap()
            .contains("\\- *summary*: checkout in eu\\-west\n")
    );
}

#[test]
fn lark_card() {
    // lark.go: interactive card, turquoise/red template, bold message then `key: value`.
    let s = settings(
        "lark",
        json!({"address": "https://open.feishu.test/open-apis/bot/v2/hook/x"}),
        &ProviderSecrets::default(),
    );
    let b = body(&one(&s, &error_event()));
    assert_eq!(b["msg_type"], "interactive");
    assert_eq!(b["card"]["config"], json!({"wide_screen_mode": true}));
    assert_eq!(
        b["card"]["header"],
        json!({"title": {"tag": "plain_text", "content": "🚨 kustomization/checkout.shop"}, "template": "red"})
    );
    assert_eq!(
        b["card"]["elements"][0],
        json!({"tag": "div", "text": {"tag": "lark_md", "content": format!("**{}**\n\nrevision: trunk@sha1:{SHA}\n", error_event().message)}})
    );
    assert_eq!(
        body(&one(&s, &info_event()))["card"]["header"]["template"],
        "turquoise"
    );
}

#[test]
fn matrix_put_with_transaction_id() {
    // matrix.go: PUT …/rooms/<room>/send/m.room.message/<sha1 of the event JSON>.
    use sha1::Digest;
    let s = settings(
        "matrix",
        json!({"address": "https://matrix.test", "channel": "!room:matrix.test"}),
        &secret(&[("token", "syt_abc")]),
    );
    let event = info_event();
    let request = one(&s, &event);
    let txn = super::hex(&sha1::Sha1::digest(event.to_go_json()));
    assert_eq!(request.method, Method::Put);
    assert_eq!(
        request.url,
        format!(
            "https://matrix.test/_matrix/client/r0/rooms/!room:matrix.test/send/m.room.message/{txn}"
        )
    );
    assert_eq!(header(&request, "Authorization"), Some("Bearer syt_abc"));
    assert_eq!(
        body(&request),
        json!({"body": format!("💫 kustomization/checkout.shop\n{}\n- revision: trunk@sha1:{SHA}\n- summary: checkout in eu-west\n", event.message), "msgtype": "m.text"})
    );
}

#[test]
fn opsgenie_alert() {
    // opsgenie.go: message Kind/name, alias sha256(uid/kind/ns/name/reason), details =
    // metadata + severity, `GenieKey` auth.
    use sha2::Digest;
    let s = settings(
        "opsgenie",
        json!({"address": "https://api.opsgenie.test/v2/alerts"}),
        &secret(&[("token", "genie-key")]),
    );
    let request = one(&s, &error_event());
    assert_eq!(
        header(&request, "Authorization"),
        Some("GenieKey genie-key")
    );
    let alias = super::hex(&sha2::Sha256::digest(format!(
        "{PROVIDER_UID}/Kustomization/shop/checkout/HealthCheckFailed"
    )));
    assert_eq!(
        body(&request),
        json!({
            "message": "Kustomization/checkout",
            "alias": alias,
            "description": error_event().message,
            "details": {"revision": format!("trunk@sha1:{SHA}"), "severity": "error"},
        })
    );
}

#[test]
fn pagerduty_events() {
    // pagerduty.go: endpoint scheme://host; errors trigger with a payload, other events resolve
    // and info also sends a change event; Progressing is skipped.
    let s = settings(
        "pagerduty",
        json!({"address": "https://events.pagerduty.test/ignored/path", "channel": "routing-key"}),
        &ProviderSecrets::default(),
    );
    let requests = build(&s, &info_event(), None).unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].url, "https://events.pagerduty.test/v2/enqueue");
    assert_eq!(
        body(&requests[0]),
        json!({"routing_key": "routing-key", "event_action": "resolve", "dedup_key": info_event().involved_object.uid})
    );
    assert_eq!(
        requests[1].url,
        "https://events.pagerduty.test/v2/change/enqueue"
    );
    assert_eq!(
        body(&requests[1]),
        json!({"routing_key": "routing-key", "payload": {
            "source": "Flux kustomize-controller",
            "summary": "reconciliation succeeded: kustomization/checkout",
            "timestamp": "2026-11-25T10:20:30Z",
            "custom_details": {"message": info_event().message, "metadata": info_event().metadata},
        }})
    );
    assert_ne!(
        requests[0].header_value(IDEMPOTENCY_KEY_HEADER),
        requests[1].header_value(IDEMPOTENCY_KEY_HEADER)
    );
    let trigger = one(&s, &error_event());
    assert_eq!(
        body(&trigger),
        json!({"routing_key": "routing-key", "event_action": "trigger", "dedup_key": info_event().involved_object.uid, "payload": {
            "summary": "health check failed: kustomization/checkout",
            "source": "Flux kustomize-controller",
            "severity": "error",
            "timestamp": "2026-11-25T10:20:30Z",
            "component": "checkout",
            "group": "Kustomization",
            "custom_details": {"message": error_event().message, "metadata": error_event().metadata},
        }})
    );
    let progressing = Event {
        reason: "Progressing".into(),
        ..info_event()
    };
    assert!(build(&s, &progressing, None).unwrap().is_empty());
}

#[test]
fn alertmanager_alert() {
    // alertmanager.go: labels = metadata (summary moved to annotations) + alertname
    // Flux<Kind><Title(reason)> and the object fields; endsAt is Go's zero time; basic auth.
    let s = settings(
        "alertmanager",
        json!({"address": "https://am.test/api/v2/alerts"}),
        &secret(&[("username", "am"), ("password", "pw")]),
    );
    let request = one(&s, &info_event());
    assert_eq!(header(&request, "Authorization"), Some("Basic YW06cHc="));
    assert_eq!(
        body(&request),
        json!([{
            "status": "firing",
            "labels": {
                "alertname": "FluxKustomizationReconciliationsucceeded",
                "kind": "Kustomization",
                "name": "checkout",
                "namespace": "shop",
                "reason": "ReconciliationSucceeded",
                "reportingcontroller": "kustomize-controller",
                "revision": format!("trunk@sha1:{SHA}"),
                "severity": "info",
            },
            "annotations": {"message": info_event().message, "summary": "checkout in eu-west"},
            "startsAt": "2026-11-25T10:20:30Z",
            "endsAt": "0001-01-01T00:00:00Z",
        }])
    );
    let s = settings(
        "alertmanager",
        json!({"address": "https://am.test/api/v2/alerts"}),
        &secret(&[("token", "am-token")]),
    );
    assert_eq!(
        header(&one(&s, &info_event()), "Authorization"),
        Some("Bearer am-token")
    );
}

#[test]
fn grafana_annotation() {
    // grafana.go: when = Unix seconds, text = object line, tags with ':' replaced by '|'.
    let s = settings(
        "grafana",
        json!({"address": "https://grafana.test/api/annotations/graphite"}),
        &secret(&[("token", "glsa"), ("username", "u"), ("password", "p")]),
    );
    let request = one(&s, &info_event());
    assert_eq!(header(&request, "Authorization"), Some("Bearer glsa"));
    assert_eq!(
        body(&request),
        json!({
            "when": 1_795_602_030,
            "text": "kustomization/checkout.shop",
            "tags": ["flux", "kustomize-controller", format!("revision: trunk@sha1|{SHA}"), "summary: checkout in eu-west", "kind: Kustomization", "name: checkout", "namespace: shop"],
        })
    );
}

#[test]
fn datadog_event() {
    // datadog.go: /api/v1/events on the address host, DD-API-KEY, lower-cased tags.
    let s = settings(
        "datadog",
        json!({"address": "https://api.datadoghq.test/ignored"}),
        &secret(&[("token", "dd-key")]),
    );
    let request = one(&s, &error_event());
    assert_eq!(request.url, "https://api.datadoghq.test/api/v1/events");
    assert_eq!(header(&request, "DD-API-KEY"), Some("dd-key"));
    assert_eq!(
        body(&request),
        json!({
            "alert_type": "error",
            "date_happened": 1_795_602_030,
            "source_type_name": "fluxcd",
            "tags": ["flux_reporting_controller:kustomize-controller", "flux_reason:healthcheckfailed", "kube_kind:kustomization", "kube_name:checkout", "kube_namespace:shop", format!("revision:trunk@sha1:{SHA}")],
            "text": error_event().message,
            "title": "Events from the Kustomization checkout/shop",
        })
    );
}

#[test]
fn sentry_envelope() {
    // sentry.go: errors as events (level error, server_name, transaction `Kind: ns/name`,
    // metadata context), info as transactions; DSN → envelope endpoint.
    let s = settings(
        "sentry",
        json!({"channel": "production"}),
        &secret(&[("address", "https://pubkey@o1.ingest.sentry.test/42")]),
    );
    let request = one(&s, &error_event());
    assert_eq!(
        request.url,
        "https://o1.ingest.sentry.test/api/42/envelope/"
    );
    assert!(
        header(&request, "X-Sentry-Auth")
            .unwrap()
            .contains("sentry_key=pubkey")
    );
    let text = String::from_utf8(request.body.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    let item: Value = serde_json::from_str(lines[2]).unwrap();
    let item_header: Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(
        item_header,
        json!({"type": "event", "length": lines[2].len()})
    );
    assert_eq!(item["level"], "error");
    assert_eq!(item["environment"], "production");
    assert_eq!(item["server_name"], "kustomize-controller");
    assert_eq!(item["transaction"], "Kustomization: shop/checkout");
    assert_eq!(item["message"], error_event().message);
    assert_eq!(
        item["contexts"]["metadata"]["revision"],
        format!("trunk@sha1:{SHA}")
    );
    let request = one(&s, &info_event());
    let text = String::from_utf8(request.body.clone()).unwrap();
    let item: Value = serde_json::from_str(text.lines().nth(2).unwrap()).unwrap();
    assert_eq!(item["type"], "transaction");
    assert_eq!(item["tags"]["flux_reason"], "ReconciliationSucceeded");
    assert_eq!(item["tags"]["summary"], "checkout in eu-west");
}

#[test]
fn generic_and_generic_hmac_forward_the_event() {
    // forwarder.go: the event as json.Marshal writes it, gotk-component, the Secret's headers,
    // and X-Signature: sha256=<hex HMAC-SHA256(body, token)>.
    let s = settings(
        "generic-hmac",
        json!({"address": "https://hooks.test/flux"}),
        &secret(&[
            ("token", "hmac-key"),
            ("headers", "X-Team: payments\nAuthorization: Bearer extra\n"),
        ]),
    );
    let event = error_event();
    let request = one(&s, &event);
    assert_eq!(request.body, event.to_go_json());
    assert!(
        String::from_utf8(request.body.clone())
            .unwrap()
            .contains(r"\u003cstatus\u003e")
    );
    assert_eq!(
        header(&request, "gotk-component"),
        Some("kustomize-controller")
    );
    assert_eq!(header(&request, "X-Team"), Some("payments"));
    assert_eq!(header(&request, "Authorization"), Some("Bearer extra"));
    let expected = super::ops::sign(b"hmac-key", &request.body);
    assert_eq!(
        header(&request, "X-Signature"),
        Some(&*format!("sha256={expected}"))
    );
    assert_eq!(Event::from_json(&request.body).unwrap(), event);

    let s = settings(
        "generic",
        json!({"address": "https://hooks.test/flux"}),
        &ProviderSecrets::default(),
    );
    let request = one(&s, &event);
    assert!(request.header_value("X-Signature").is_none());
    // The idempotency key is stable for the same event and provider.
    assert_eq!(
        request.header_value(IDEMPOTENCY_KEY_HEADER),
        one(&s, &event).header_value(IDEMPOTENCY_KEY_HEADER)
    );
    assert_eq!(
        request.header_value(IDEMPOTENCY_KEY_HEADER).unwrap().len(),
        32
    );
    assert_ne!(
        request.header_value(IDEMPOTENCY_KEY_HEADER),
        one(&s, &info_event()).header_value(IDEMPOTENCY_KEY_HEADER)
    );
}

#[test]
fn github_dispatch() {
    // github_dispatch.go: POST /repos/<owner>/<repo>/dispatches with event_type
    // `Kind/name.namespace` and the event as client_payload.
    let s = settings(
        "githubdispatch",
        json!({"address": "https://github.com/acme/fleet"}),
        &secret(&[("token", "ghp_x")]),
    );
    let event = info_event();
    let request = one(&s, &event);
    assert_eq!(
        request.url,
        "https://api.github.com/repos/acme/fleet/dispatches"
    );
    assert_eq!(header(&request, "Authorization"), Some("Bearer ghp_x"));
    let b = body(&request);
    assert_eq!(b["event_type"], "Kustomization/checkout.shop");
    assert_eq!(
        Event::from_json(b["client_payload"].to_string().as_bytes()).unwrap(),
        event
    );
    assert!(request.body.ends_with(b"}\n"));
}

#[test]
fn github_commit_status() {
    // github.go: POST /repos/<owner>/<repo>/statuses/<sha>, state success|failure, context
    // = `kind/name/<provider uid prefix>`, description = the reason in words.
    let s = settings(
        "github",
        json!({"address": "git@github.com:acme/fleet.git"}),
        &secret(&[("token", "ghp_x")]),
    );
    let request = one(&s, &info_event());
    assert_eq!(
        request.url,
        format!("https://api.github.com/repos/acme/fleet/statuses/{SHA}")
    );
    assert_eq!(
        body(&request),
        json!({"state": "success", "description": "reconciliation succeeded", "context": "kustomization/checkout/9a8b7c6d"})
    );
    assert_eq!(body(&one(&s, &error_event()))["state"], "failure");
    assert_eq!(
        body(&one(&s, &error_event()))["description"],
        "health check failed"
    );
    // GitHub Enterprise: <host>/api/v3.
    let s = settings(
        "github",
        json!({"address": "https://ghe.acme.test/platform/fleet"}),
        &secret(&[("token", "ghp_x")]),
    );
    assert_eq!(
        one(&s, &info_event()).url,
        format!("https://ghe.acme.test/api/v3/repos/platform/fleet/statuses/{SHA}")
    );
    // Progressing is skipped; no revision is an error naming the provider.
    let progressing = Event {
        reason: "Progressing".into(),
        ..info_event()
    };
    assert!(build(&s, &progressing, None).unwrap().is_empty());
    let no_revision = Event {
        metadata: BTreeMap::new(),
        ..info_event()
    };
    assert_eq!(
        build(&s, &no_revision, None).unwrap_err().to_string(),
        "provider shop/notify: missing revision metadata"
    );
    // originRevision (an OCI artifact built from Git) wins over revision.
    let mut oci = info_event();
    oci.metadata
        .insert("revision".into(), "latest@sha256:0123".into());
    oci.metadata.insert(
        "originRevision".into(),
        format!("main@sha1:{}", "f".repeat(40)),
    );
    assert!(one(&s, &oci).url.ends_with(&"f".repeat(40)));
}

#[test]
fn gitlab_gitea_commit_status() {
    // gitlab.go: POST /api/v4/projects/<url-escaped path>/statuses/<sha>, PRIVATE-TOKEN, state
    // success|failed, name = key. The password is used when there is no token.
    let s = settings(
        "gitlab",
        json!({"address": "https://gitlab.test/group/sub/app.git"}),
        &secret(&[("username", "git"), ("password", "glpat")]),
    );
    let request = one(&s, &error_event());
    assert_eq!(
        request.url,
        format!("https://gitlab.test/api/v4/projects/group%2Fsub%2Fapp/statuses/{SHA}")
    );
    assert_eq!(header(&request, "PRIVATE-TOKEN"), Some("glpat"));
    assert_eq!(
        body(&request),
        json!({"state": "failed", "name": "kustomization/checkout/9a8b7c6d", "description": "health check failed"})
    );
    // gitea.go: token auth, Progressing is pending, target_url empty.
    let s = settings(
        "gitea",
        json!({"address": "https://gitea.test/acme/fleet"}),
        &secret(&[("token", "gt")]),
    );
    let progressing = Event {
        reason: "Progressing".into(),
        ..info_event()
    };
    let request = one(&s, &progressing);
    assert_eq!(
        request.url,
        format!("https://gitea.test/api/v1/repos/acme/fleet/statuses/{SHA}")
    );
    assert_eq!(header(&request, "Authorization"), Some("token gt"));
    assert_eq!(
        body(&request),
        json!({"state": "pending", "target_url": "", "description": "progressing", "context": "kustomization/checkout/9a8b7c6d"})
    );
}

#[test]
fn bitbucket_commit_status() {
    // bitbucket.go: key = sha1(status key), url https://bitbucket.org, basic auth user:pass.
    use sha1::Digest;
    let s = settings(
        "bitbucket",
        json!({"address": "https://bitbucket.org/acme/fleet.git"}),
        &secret(&[("token", "bot:app-pass")]),
    );
    let request = one(&s, &info_event());
    assert_eq!(
        request.url,
        format!(
            "https://api.bitbucket.org/2.0/repositories/acme/fleet/commit/{SHA}/statuses/build"
        )
    );
    assert_eq!(
        header(&request, "Authorization"),
        Some("Basic Ym90OmFwcC1wYXNz")
    );
    let key = super::hex(&sha1::Sha1::digest("kustomization/checkout/9a8b7c6d"));
    assert_eq!(
        body(&request),
        json!({"key": key, "url": "https://bitbucket.org", "state": "SUCCESSFUL", "name": "kustomization/checkout", "description": "reconciliation succeeded"})
    );
    // bitbucketserver.go: /rest/api/latest/projects/<key>/repos/<slug>/commits/<sha>/builds,
    // name `kind/name [description]`, url = the address, bearer token, Atlassian headers.
    let address = "https://bb.acme.test/context/scm/PROJ/fleet.git";
    let s = settings(
        "bitbucketserver",
        json!({"address": address}),
        &secret(&[("token", "bbs")]),
    );
    let request = one(&s, &error_event());
    assert_eq!(
        request.url,
        format!(
            "https://bb.acme.test/context/rest/api/latest/projects/PROJ/repos/fleet/commits/{SHA}/builds"
        )
    );
    assert_eq!(header(&request, "Authorization"), Some("Bearer bbs"));
    assert_eq!(header(&request, "x-atlassian-token"), Some("no-check"));
    assert_eq!(header(&request, "x-requested-with"), Some("XMLHttpRequest"));
    assert_eq!(
        body(&request),
        json!({"description": "health check failed", "key": key, "name": "kustomization/checkout [health check failed]", "state": "FAILED", "url": address})
    );
    assert!(request.body.ends_with(b"}\n"));
}

#[test]
fn azuredevops_commit_status() {
    // azure_devops.go: genre fluxcd[:summary], state succeeded|error, PAT basic auth.
    let s = settings(
        "azuredevops",
        json!({"address": "https://dev.azure.test/acme/platform/_git/fleet"}),
        &secret(&[("token", "pat")]),
    );
    let request = one(&s, &info_event());
    assert_eq!(
        request.url,
        format!(
            "https://dev.azure.test/acme/platform/_apis/git/repositories/fleet/commits/{SHA}/statuses"
        )
    );
    assert_eq!(header(&request, "Authorization"), Some("Basic OnBhdA=="));
    assert_eq!(
        header(&request, "Accept"),
        Some("application/json;api-version=6.0")
    );
    assert_eq!(
        body(&request),
        json!({"context": {"genre": "fluxcd:checkout in eu-west", "name": "kustomization/checkout/9a8b7c6d"}, "description": "reconciliation succeeded", "state": "succeeded"})
    );
    assert_eq!(body(&one(&s, &error_event()))["state"], "error");
    assert_eq!(body(&one(&s, &error_event()))["context"]["genre"], "fluxcd");
}

#[test]
fn commit_status_expr() {
    // provider_commit_status.go: a CEL string over event, alert and provider.
    let s = settings(
        "github",
        json!({"address": "https://github.com/acme/fleet", "commitStatusExpr": "event.involvedObject.kind + '/' + event.involvedObject.name + '/' + alert.metadata.name + '/' + provider.metadata.namespace"}),
        &secret(&[("token", "t")]),
    );
    let alert = json!({"metadata": {"name": "on-call"}});
    let request = build(&s, &info_event(), Some(&alert)).unwrap().remove(0);
    assert_eq!(
        body(&request)["context"],
        "Kustomization/checkout/on-call/shop"
    );
    // A non-string result is an error for the event, not a crash.
    let s = settings(
        "github",
        json!({"address": "https://github.com/acme/fleet", "commitStatusExpr": "1 + 1"}),
        &secret(&[("token", "t")]),
    );
    assert!(
        build(&s, &info_event(), None)
            .unwrap_err()
            .reason
            .contains("not a string")
    );
    // A syntax error is rejected when the Provider is resolved.
    let err = ProviderSettings::resolve(
        &provider("github", json!({"address": "https://github.com/acme/fleet", "commitStatusExpr": "event.(", "secretRef": {"name": "s"}})),
        &secret(&[("token", "t")]),
    )
    .unwrap_err();
    assert_eq!(err.field, "spec.commitStatusExpr");
}

#[test]
#[allow(clippy::too_many_lines)]
fn invalid_providers_are_rejected_naming_provider_and_field() {
    let resolve = |type_: &str, spec: Value, secrets: ProviderSecrets| {
        ProviderSettings::resolve(&provider(type_, spec), &secrets)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        resolve(
            "github",
            json!({"address": "https://github.com/acme/fleet"}),
            ProviderSecrets::default()
        ),
        "provider shop/notify: secretRef: a 'token' (or 'password') key is required; GitHub App and workload identity auth are not supported yet"
    );
    assert!(
        resolve(
            "slack",
            json!({"address": "not a url"}),
            ProviderSecrets::default()
        )
        .starts_with("provider shop/notify: address: is not a URL")
    );
    assert_eq!(
        resolve("slack", json!({}), ProviderSecrets::default()),
        "provider shop/notify: spec.address: is required (or an 'address' key in the secretRef)"
    );
    assert_eq!(
        resolve(
            "slack",
            json!({"address": "https://x.test", "secretRef": {"name": "gone"}}),
            ProviderSecrets::default()
        ),
        "provider shop/notify: spec.secretRef: secret 'shop/gone' not found"
    );
    assert_eq!(
        resolve(
            "alertmanager",
            json!({"address": "https://x.test", "secretRef": {"name": "s"}}),
            secret(&[("username", "u")])
        ),
        "provider shop/notify: secretRef: has key 'username' without 'password'"
    );
    assert_eq!(
        resolve(
            "generic-hmac",
            json!({"address": "https://x.test"}),
            ProviderSecrets::default()
        ),
        "provider shop/notify: secretRef: a 'token' key is required (the HMAC key)"
    );
    assert_eq!(
        resolve(
            "telegram",
            json!({"secretRef": {"name": "s"}}),
            secret(&[("token", "t")])
        ),
        "provider shop/notify: spec.channel: is required (the chat ID)"
    );
    assert_eq!(
        resolve(
            "zulip",
            json!({"address": "https://x.test"}),
            ProviderSecrets::default()
        ),
        "provider shop/notify: spec.type: 'zulip' is not supported by Capstan yet"
    );
    assert!(
        resolve(
            "github",
            json!({"address": "https://github.com/acme", "secretRef": {"name": "s"}}),
            secret(&[("token", "t")])
        )
        .contains("invalid repository id 'acme'")
    );
    // A repository address from the Secret is never quoted.
    let hidden = resolve(
        "github",
        json!({"secretRef": {"name": "s"}}),
        secret(&[
            ("address", "ftp://user:hunter2@git.test/acme/fleet"),
            ("token", "t"),
        ]),
    );
    assert_eq!(
        hidden,
        "provider shop/notify: address: is not an http(s) or ssh repository URL"
    );
    assert!(
        resolve(
            "bitbucket",
            json!({"address": "https://bitbucket.org/a/b", "secretRef": {"name": "s"}}),
            secret(&[("token", "no-colon")])
        )
        .contains("<user>:<app password>")
    );
    assert!(
        resolve(
            "bitbucketserver",
            json!({"address": "https://bb.test/PROJ/fleet.git", "secretRef": {"name": "s"}}),
            secret(&[("token", "t")])
        )
        .contains("/scm/")
    );
    assert!(
        resolve(
            "generic",
            json!({"address": "https://x.test", "secretRef": {"name": "s"}}),
            secret(&[("headers", "- not\n- a map\n")])
        )
        .contains("secretRef key 'headers'")
    );
    assert!(
        resolve(
            "slack",
            json!({"address": "https://x.test", "timeout": "soon"}),
            ProviderSecrets::default()
        )
        .contains("spec.timeout")
    );
    let proxy = ProviderSecrets {
        proxy_secret: Some(BTreeMap::from([(
            "address".to_owned(),
            b"ftp://proxy.test".to_vec(),
        )])),
        ..ProviderSecrets::default()
    };
    assert!(
        resolve(
            "slack",
            json!({"address": "https://x.test", "proxySecretRef": {"name": "p"}}),
            proxy
        )
        .contains("supported schemes")
    );
}

#[test]
fn secrets_never_show_in_debug_or_display() {
    let tokens = [
        "hooks.slack.test/services/T1/B2/very-secret",
        "xoxb-secret-token",
        "proxy-pass",
    ];
    let mut secrets = secret(&[
        (
            "address",
            "https://hooks.slack.test/services/T1/B2/very-secret",
        ),
        ("token", "xoxb-secret-token"),
    ]);
    secrets.proxy_secret = Some(BTreeMap::from([
        ("address".to_owned(), b"http://proxy.test:3128".to_vec()),
        ("username".to_owned(), b"proxy-user".to_vec()),
        ("password".to_owned(), b"proxy-pass".to_vec()),
    ]));
    let s = settings(
        "slack",
        json!({"proxySecretRef": {"name": "proxy"}}),
        &secrets,
    );
    assert_eq!(
        s.proxy.as_ref().unwrap().expose(),
        "http://proxy-user:proxy-pass@proxy.test:3128/"
    );
    let request = one(&s, &info_event());
    let shown = [
        format!("{s:?}"),
        format!("{request:?}"),
        format!("{request}"),
        format!("{secrets:?}"),
    ];
    for text in &shown {
        for token in tokens {
            assert!(!text.contains(token), "{token} leaked in {text}");
        }
    }
    assert_eq!(
        request.to_string(),
        "POST https://hooks.slack.test/<redacted>"
    );
    assert!(shown[1].contains("Authorization: \"<redacted>\""));
    // Telegram's token is in the URL.
    let s = settings(
        "telegram",
        json!({"channel": "1"}),
        &secret(&[("token", "999:SECRET")]),
    );
    let request = one(&s, &info_event());
    assert!(!format!("{request:?} {request} {s:?}").contains("SECRET"));
}

#[test]
fn camel_case_words() {
    // util.go splitCamelcase.
    let words = |s: &str| super::split_camel_case(s).join(" ");
    assert_eq!(words("ReconciliationSucceeded"), "Reconciliation Succeeded");
    assert_eq!(words("HTTPServerError"), "HTTP Server Error");
    assert_eq!(words("ArtifactFailed2Times"), "Artifact Failed 2 Times");
    assert_eq!(words("lower"), "lower");
}

#[test]
fn dispatch_rules_for_commit_status_updates() {
    // event_handlers.go getNotificationParams.
    use capstan_api::notification::v1beta3::ProviderType;
    let mut update = info_event();
    update.metadata = BTreeMap::from([
        (
            "kustomize.toolkit.fluxcd.io/commit_status".into(),
            "update".into(),
        ),
        (
            "kustomize.toolkit.fluxcd.io/revision".into(),
            format!("trunk@sha1:{SHA}"),
        ),
    ]);
    assert!(!super::dispatches_to(ProviderType::Slack, &update));
    assert!(super::dispatches_to(ProviderType::Generic, &update));
    assert!(super::dispatches_to(ProviderType::Github, &update));
    let mut plain = update.clone();
    plain
        .metadata
        .remove("kustomize.toolkit.fluxcd.io/commit_status");
    assert!(super::dispatches_to(ProviderType::Slack, &plain));
    assert!(!super::dispatches_to(ProviderType::Gitlab, &plain));
    plain.severity = Severity::Error;
    assert!(super::dispatches_to(ProviderType::Gitlab, &plain));
    plain.severity = Severity::Info;
    plain
        .metadata
        .insert("event.toolkit.fluxcd.io/commit".into(), SHA.into());
    assert!(super::dispatches_to(ProviderType::Gitlab, &plain));
}

/// One Provider of each type, as a user would write it for the golden files.
#[allow(clippy::too_many_lines)]
fn golden_providers() -> Vec<(&'static str, ProviderSettings)> {
    let token = |t: &'static str| secret(&[("token", t)]);
    let none = ProviderSecrets::default;
    vec![
        (
            "slack",
            settings(
                "slack",
                json!({"channel": "deploys"}),
                &secret(&[("address", "https://hooks.slack.test/services/T1/B2/xyz")]),
            ),
        ),
        (
            "discord",
            settings(
                "discord",
                json!({"address": "https://discord.test/api/webhooks/1/abc"}),
                &none(),
            ),
        ),
        (
            "msteams",
            settings(
                "msteams",
                json!({"address": "https://prod.logic.azure.test/workflows/1/triggers/manual"}),
                &none(),
            ),
        ),
        (
            "rocket",
            settings(
                "rocket",
                json!({"address": "https://rocket.test/hooks/1", "channel": "ops", "username": "flux"}),
                &none(),
            ),
        ),
        (
            "googlechat",
            settings(
                "googlechat",
                json!({"address": "https://chat.googleapis.test/v1/spaces/A/messages"}),
                &none(),
            ),
        ),
        (
            "webex",
            settings(
                "webex",
                json!({"address": "https://webexapis.test/v1/messages", "channel": "room-1"}),
                &token("webex-bot"),
            ),
        ),
        (
            "telegram",
            settings("telegram", json!({"channel": "-1001"}), &token("12:tg")),
        ),
        (
            "lark",
            settings(
                "lark",
                json!({"address": "https://open.feishu.test/open-apis/bot/v2/hook/1"}),
                &none(),
            ),
        ),
        (
            "matrix",
            settings(
                "matrix",
                json!({"address": "https://matrix.test", "channel": "!ops:matrix.test"}),
                &token("syt_1"),
            ),
        ),
        (
            "opsgenie",
            settings(
                "opsgenie",
                json!({"address": "https://api.opsgenie.test/v2/alerts"}),
                &token("genie"),
            ),
        ),
        (
            "pagerduty",
            settings(
                "pagerduty",
                json!({"address": "https://events.pagerduty.test", "channel": "rk-1"}),
                &none(),
            ),
        ),
        (
            "alertmanager",
            settings(
                "alertmanager",
                json!({"address": "https://am.test/api/v2/alerts"}),
                &none(),
            ),
        ),
        (
            "grafana",
            settings(
                "grafana",
                json!({"address": "https://grafana.test/api/annotations"}),
                &token("glsa_1"),
            ),
        ),
        (
            "datadog",
            settings(
                "datadog",
                json!({"address": "https://api.datadoghq.test"}),
                &token("dd-1"),
            ),
        ),
        (
            "sentry",
            settings(
                "sentry",
                json!({"address": "https://key1@sentry.test/7"}),
                &none(),
            ),
        ),
        (
            "generic",
            settings(
                "generic",
                json!({"address": "https://hooks.test/flux"}),
                &none(),
            ),
        ),
        (
            "generic-hmac",
            settings(
                "generic-hmac",
                json!({"address": "https://hooks.test/flux"}),
                &token("hmac-1"),
            ),
        ),
        (
            "githubdispatch",
            settings(
                "githubdispatch",
                json!({"address": "https://github.com/acme/fleet"}),
                &token("ghp_1"),
            ),
        ),
        (
            "github",
            settings(
                "github",
                json!({"address": "https://github.com/acme/fleet"}),
                &token("ghp_1"),
            ),
        ),
        (
            "gitlab",
            settings(
                "gitlab",
                json!({"address": "https://gitlab.test/acme/fleet"}),
                &token("glpat-1"),
            ),
        ),
        (
            "gitea",
            settings(
                "gitea",
                json!({"address": "https://gitea.test/acme/fleet"}),
                &token("gitea-1"),
            ),
        ),
        (
            "bitbucket",
            settings(
                "bitbucket",
                json!({"address": "https://bitbucket.org/acme/fleet"}),
                &token("bot:pass"),
            ),
        ),
        (
            "bitbucketserver",
            settings(
                "bitbucketserver",
                json!({"address": "https://bb.test/scm/ACME/fleet.git"}),
                &token("bbs-1"),
            ),
        ),
        (
            "azuredevops",
            settings(
                "azuredevops",
                json!({"address": "https://dev.azure.test/acme/platform/_git/fleet"}),
                &token("pat-1"),
            ),
        ),
    ]
}

fn render(requests: &[Request]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for request in requests {
        let _ = writeln!(out, "{} {}", request.method.as_str(), request.url);
        for h in &request.headers {
            let _ = writeln!(out, "{}: {}", h.name, h.value);
        }
        let _ = writeln!(
            out,
            "\n{}\n",
            String::from_utf8_lossy(&request.body).trim_end()
        );
    }
    out
}

#[test]
fn golden_requests_per_provider() {
    // testdata/requests/<type>.txt: the exact requests (method, URL, headers, body bytes) for
    // an info event with revision metadata and an error event. The field-by-field tests above
    // tie each format to Flux's source; these files pin the bytes. Regenerate with
    // CAPSTAN_UPDATE_GOLDEN=1 after a deliberate change, and review the diff.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/requests");
    let update = std::env::var_os("CAPSTAN_UPDATE_GOLDEN").is_some();
    let providers = golden_providers();
    assert_eq!(providers.len(), crate::SUPPORTED.len());
    for (name, settings) in providers {
        let mut text = String::new();
        for (label, event) in [("info", info_event()), ("error", error_event())] {
            text.push_str("### ");
            text.push_str(label);
            text.push_str(" event\n");
            text.push_str(&render(&build(&settings, &event, None).unwrap()));
        }
        let path = dir.join(format!("{name}.txt"));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else {
            let expected = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(
                text,
                expected,
                "{name}: requests differ from {}",
                path.display()
            );
        }
    }
}
