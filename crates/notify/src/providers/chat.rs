//! Chat providers: Slack, Discord, Rocket.Chat, Microsoft Teams, Google Chat, Webex, Telegram,
//! Lark, Matrix.

// Every builder has the signature `build` dispatches on, whether or not it can fail.
#![allow(clippy::unnecessary_wraps)]

use serde::Serialize;
use serde_json::json;
use sha1::Digest;

use super::{Ctx, hex, http_url};
use crate::gojson;
use crate::request::{Method, Request};

/// Slack's message (internal/notifier/slack.go `SlackPayload`), also used by Discord and
/// Rocket.Chat. `channel`, `username`, `icon_url` and `icon_emoji` are always present.
#[derive(Serialize)]
struct SlackPayload<'a> {
    channel: &'a str,
    username: &'a str,
    icon_url: &'a str,
    icon_emoji: &'a str,
    attachments: Vec<SlackAttachment<'a>>,
}

#[derive(Serialize)]
struct SlackAttachment<'a> {
    fallback: String,
    color: &'a str,
    author_name: String,
    text: &'a str,
    mrkdwn_in: [&'a str; 1],
    fields: Vec<SlackField<'a>>,
}

#[derive(Serialize)]
struct SlackField<'a> {
    title: &'a str,
    value: &'a str,
    short: bool,
}

fn slack_fields<'a>(ctx: &Ctx<'a>) -> Vec<SlackField<'a>> {
    ctx.event
        .metadata
        .iter()
        .map(|(title, value)| SlackField {
            title,
            value,
            short: false,
        })
        .collect()
}

fn webhook(ctx: &Ctx<'_>, url: String, body: Vec<u8>) -> Request {
    Request::json(Method::Post, url, ctx.settings.address_is_secret, body)
}

/// slack.go: the username defaults to the reporting controller; `fallback` is the object line
/// and the message's first line; a token (chat.postMessage API) is sent as a bearer token.
pub(crate) fn slack(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    let event = ctx.event;
    let author = event.object_line();
    let payload = SlackPayload {
        channel: ctx.settings.channel.as_deref().unwrap_or_default(),
        username: ctx
            .settings
            .username
            .as_deref()
            .unwrap_or(&event.reporting_controller),
        icon_url: "",
        icon_emoji: "",
        attachments: vec![SlackAttachment {
            fallback: format!(
                "{author}: {}",
                event.message.split('\n').next().unwrap_or_default()
            ),
            color: if ctx.is_error() { "danger" } else { "good" },
            author_name: author,
            text: &event.message,
            mrkdwn_in: ["text"],
            fields: slack_fields(ctx),
        }],
    };
    let mut request = webhook(ctx, ctx.address().to_owned(), gojson::to_vec(&payload));
    if let Some(token) = &ctx.settings.token {
        request = request.secret_header("Authorization", format!("Bearer {}", token.expose()));
    }
    Ok(vec![request])
}

/// discord.go: Slack's format posted to the webhook's `/slack` endpoint (appended unless the
/// address already ends with it); no channel, no fallback.
pub(crate) fn discord(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    let event = ctx.event;
    let address = ctx.address();
    let url = if address.ends_with("/slack") {
        address.to_owned()
    } else {
        let mut url = http_url(address)?;
        let path = format!("{}/slack", url.path().trim_end_matches('/'));
        url.set_path(&path);
        url.to_string()
    };
    let payload = SlackPayload {
        channel: "",
        username: ctx
            .settings
            .username
            .as_deref()
            .unwrap_or(&event.reporting_controller),
        icon_url: "",
        icon_emoji: "",
        attachments: vec![SlackAttachment {
            fallback: String::new(),
            color: if ctx.is_error() { "danger" } else { "good" },
            author_name: event.object_line(),
            text: &event.message,
            mrkdwn_in: ["text"],
            fields: slack_fields(ctx),
        }],
    };
    Ok(vec![webhook(ctx, url, gojson::to_vec(&payload))])
}

/// rocket.go: Slack's format with hex colours; the username has no default.
pub(crate) fn rocket(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    let event = ctx.event;
    let payload = SlackPayload {
        channel: ctx.settings.channel.as_deref().unwrap_or_default(),
        username: ctx.settings.username.as_deref().unwrap_or_default(),
        icon_url: "",
        icon_emoji: "",
        attachments: vec![SlackAttachment {
            fallback: String::new(),
            color: if ctx.is_error() { "#FF0000" } else { "#0076D7" },
            author_name: event.object_line(),
            text: &event.message,
            mrkdwn_in: ["text"],
            fields: slack_fields(ctx),
        }],
    };
    Ok(vec![webhook(
        ctx,
        ctx.address().to_owned(),
        gojson::to_vec(&payload),
    )])
}

/// teams.go: a legacy MessageCard when the webhook host ends with `.webhook.office.com` (the
/// deprecated Office 365 connector), else an Adaptive Card 1.4 (Power Automate workflows):
/// title, message (red when an error) and a FactSet with `summary` first, then the metadata
/// sorted by key.
pub(crate) fn msteams(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    let event = ctx.event;
    let object = event.object_line();
    let url = http_url(ctx.address())?;
    let legacy = url
        .host_str()
        .is_some_and(|h| h.ends_with(".webhook.office.com"));
    let payload = if legacy {
        let facts: Vec<_> = event
            .metadata
            .iter()
            .map(|(k, v)| json!({"name": k, "value": v}))
            .collect();
        json!({
            "@type": "MessageCard",
            "@context": "http://schema.org/extensions",
            "themeColor": if ctx.is_error() { "FF0000" } else { "0076D7" },
            "summary": object,
            "sections": [{
                "activityTitle": event.message,
                "activitySubtitle": object,
                "facts": facts,
            }],
        })
    } else {
        let summary = event.metadata.get(crate::event::META_SUMMARY);
        let facts: Vec<_> = summary
            .map(|s| json!({"title": crate::event::META_SUMMARY, "value": s}))
            .into_iter()
            .chain(
                event
                    .metadata
                    .iter()
                    .filter(|(k, _)| *k != crate::event::META_SUMMARY)
                    .map(|(k, v)| json!({"title": k, "value": v})),
            )
            .collect();
        // Go omits empty fields of the inlined text block and fact set.
        let mut message = json!({"type": "TextBlock"});
        if !event.message.is_empty() {
            message["text"] = json!(event.message);
        }
        if ctx.is_error() {
            message["color"] = json!("attention");
        }
        message["wrap"] = json!(true);
        let mut fact_set = json!({"type": "FactSet"});
        if !facts.is_empty() {
            fact_set["facts"] = json!(facts);
        }
        json!({
            "type": "message",
            "attachments": [{
                "contentType": "application/vnd.microsoft.card.adaptive",
                "content": {
                    "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                    "type": "AdaptiveCard",
                    "version": "1.4",
                    "body": [{
                        "type": "Container",
                        "items": [
                            {"type": "TextBlock", "text": object, "size": "large", "weight": "bolder", "wrap": true},
                            message,
                            fact_set,
                        ],
                    }],
                    "msteams": {"width": "Full"},
                },
            }],
        })
    };
    Ok(vec![webhook(
        ctx,
        ctx.address().to_owned(),
        gojson::to_vec(&payload),
    )])
}

/// google_chat.go: a card with the object as title, the controller as subtitle, the message
/// (in a red `<font>` when an error) and one key/value widget per metadata entry. Unset
/// pointers are `null`, as Go marshals them.
pub(crate) fn googlechat(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    let event = ctx.event;
    let text = if ctx.is_error() {
        format!("<font color=\"#ff0000\">{}</font>", event.message)
    } else {
        event.message.clone()
    };
    let mut sections = vec![json!({
        "header": "",
        "widgets": [{"textParagraph": {"text": text}, "keyValue": null}],
    })];
    if !event.metadata.is_empty() {
        let widgets: Vec<_> = event
            .metadata
            .iter()
            .map(|(k, v)| {
                json!({"textParagraph": null, "keyValue": {
                    "topLabel": k, "content": v, "contentMultiline": false,
                    "bottomLabel": null, "icon": null,
                }})
            })
            .collect();
        sections.push(json!({"header": "", "widgets": widgets}));
    }
    let payload = json!({"cards": [{
        "header": {
            "title": event.object_line(),
            "subtitle": event.reporting_controller,
            "imageUrl": null,
            "imageStyle": null,
        },
        "sections": sections,
    }]});
    Ok(vec![webhook(
        ctx,
        ctx.address().to_owned(),
        gojson::to_vec(&payload),
    )])
}

/// webex.go: Markdown (`✅`/`💣`, bold object line, message, `>**key**: value` lines) to the
/// room `spec.channel`, with the bot token as a bearer token.
pub(crate) fn webex(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    use std::fmt::Write;
    let event = ctx.event;
    let mut markdown = format!(
        "{} **{}**\n{}\n",
        if ctx.is_error() { "💣" } else { "✅" },
        event.object_line(),
        event.message
    );
    for (k, v) in &event.metadata {
        let _ = writeln!(markdown, ">**{k}**: {v}");
    }
    let payload = json!({
        "roomId": ctx.settings.channel.as_deref().unwrap_or_default(),
        "markdown": markdown,
    });
    let token = ctx.settings.token.as_ref().map_or("", |t| t.expose());
    Ok(vec![
        webhook(ctx, ctx.address().to_owned(), gojson::to_vec(&payload))
            .secret_header("Authorization", format!("Bearer {token}")),
    ])
}

/// The Telegram Bot API's default base URL.
pub const TELEGRAM_API: &str = "https://api.telegram.org";

/// Characters MarkdownV2 requires escaped (telegram.go `escapeString`).
const TELEGRAM_SPECIAL: &str = "\\.-_[]()~>`#+=|{}!*";

fn telegram_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if TELEGRAM_SPECIAL.contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// telegram.go: `sendMessage` with MarkdownV2 (every special character escaped); the heading is
/// `<emoji> kind/name/namespace` (slashes, unlike the other providers); `spec.channel`
/// `chat:thread` posts to a forum topic. The bot token is part of the URL.
pub(crate) fn telegram(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    use std::fmt::Write;
    let event = ctx.event;
    let o = &event.involved_object;
    let heading = format!(
        "{} {}/{}/{}",
        if ctx.is_error() { "🚨" } else { "💫" },
        o.kind.to_lowercase(),
        o.name,
        o.namespace
    );
    let mut metadata = String::new();
    for (k, v) in &event.metadata {
        let _ = writeln!(
            metadata,
            "\\- *{}*: {}",
            telegram_escape(k),
            telegram_escape(v)
        );
    }
    let text = format!(
        "*{}*\n{}\n{metadata}",
        telegram_escape(&heading),
        telegram_escape(&event.message)
    );
    let channel = ctx.settings.channel.as_deref().unwrap_or_default();
    let (chat, thread) = match channel.split_once(':') {
        Some((chat, thread)) => (chat, Some(thread)),
        None => (channel, None),
    };
    let mut payload = json!({"chat_id": chat});
    if let Some(thread) = thread
        && !thread.is_empty()
    {
        payload["message_thread_id"] = json!(thread);
    }
    payload["text"] = json!(text);
    payload["parse_mode"] = json!("MarkdownV2");
    let base = ctx
        .settings
        .address
        .as_ref()
        .map_or(TELEGRAM_API, |a| a.expose())
        .trim_end_matches('/');
    let token = ctx.settings.token.as_ref().map_or("", |t| t.expose());
    let url = format!("{base}/bot{token}/sendMessage");
    Ok(vec![Request::json(
        Method::Post,
        url,
        true,
        gojson::to_vec(&payload),
    )])
}

/// lark.go: an interactive card, turquoise (`💫`) or red (`🚨`), with the message in bold and
/// `key: value` lines.
pub(crate) fn lark(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    use std::fmt::Write;
    let event = ctx.event;
    let (emoji, color) = if ctx.is_error() {
        ("🚨", "red")
    } else {
        ("💫", "turquoise")
    };
    let mut message = format!("**{}**\n\n", event.message);
    for (k, v) in &event.metadata {
        let _ = writeln!(message, "{k}: {v}");
    }
    let payload = json!({
        "msg_type": "interactive",
        "card": {
            "config": {"wide_screen_mode": true},
            "header": {
                "title": {"tag": "plain_text", "content": format!("{emoji} {}", event.object_line())},
                "template": color,
            },
            "elements": [{"tag": "div", "text": {"tag": "lark_md", "content": message}}],
        },
    });
    Ok(vec![webhook(
        ctx,
        ctx.address().to_owned(),
        gojson::to_vec(&payload),
    )])
}

/// matrix.go: `PUT <homeserver>/_matrix/client/r0/rooms/<room>/send/m.room.message/<txn>`, the
/// transaction ID being the SHA-1 of the event's JSON (so a resent event is deduplicated by the
/// homeserver), with the access token as a bearer token.
pub(crate) fn matrix(ctx: &Ctx<'_>) -> Result<Vec<Request>, String> {
    use std::fmt::Write;
    let event = ctx.event;
    let transaction = hex(&sha1::Sha1::digest(event.to_go_json()));
    let room = ctx.settings.channel.as_deref().unwrap_or_default();
    let url = format!(
        "{}/_matrix/client/r0/rooms/{room}/send/m.room.message/{transaction}",
        ctx.address()
    );
    let mut metadata = String::new();
    for (k, v) in &event.metadata {
        let _ = writeln!(metadata, "- {k}: {v}");
    }
    let body = format!(
        "{} {}\n{}\n{metadata}",
        if ctx.is_error() { "🚨" } else { "💫" },
        event.object_line(),
        event.message
    );
    let payload = json!({"body": body, "msgtype": "m.text"});
    let token = ctx.settings.token.as_ref().map_or("", |t| t.expose());
    Ok(vec![
        Request::json(
            Method::Put,
            url,
            ctx.settings.address_is_secret,
            gojson::to_vec(&payload),
        )
        .secret_header("Authorization", format!("Bearer {token}")),
    ])
}
