//! Checks a webhook request against its Receiver, per type, as Flux's notification-controller
//! does: signatures, tokens, event types and payload shapes. Pure: headers, body and token in,
//! a [`Verdict`] or a [`Rejection`] out (the fuzz target's entry point).
//!
//! # Guarantees
//! - Signatures are HMACs verified with `hmac`'s constant-time `verify_slice`; tokens compared
//!   with `subtle`'s constant-time equality. Nothing of the token or the expected signature
//!   is ever part of a [`Rejection`] message.
//! - A failed signature or token check is [`Rejection::Unauthorized`] (401: Capstan's answer;
//!   Flux answers 400); an event type not in `spec.events` or a payload that is not the type's
//!   shape is [`Rejection::BadRequest`] (400, as Flux).
//! - GitHub's `ping` (after its signature is checked) is [`Verdict::Ping`]: answered 200
//!   without reconciling anything.
//! - Event types compare case-insensitively (Go's `strings.EqualFold`), all accepted when
//!   `spec.events` is empty.

use axum::http::{HeaderMap, StatusCode};
use capstan_api::notification::v1::ReceiverType;
use hmac::{KeyInit, Mac};
use subtle::ConstantTimeEq;

/// What a valid request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Reconcile the Receiver's resources; the event type when the payload names one.
    Reconcile {
        /// `X-GitHub-Event`, `X-Gitlab-Event`, `Ce-Type`, …
        event: Option<String>,
    },
    /// A GitHub `ping`: answered without reconciling.
    Ping,
}

/// Why a request is refused. Messages say what failed, never a token or a signature.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The signature or token does not match (401).
    #[error("{0}")]
    Unauthorized(String),
    /// The event is not accepted or the payload is not the type's (400).
    #[error("{0}")]
    BadRequest(String),
}

impl Rejection {
    /// The HTTP status answered.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
        }
    }
}

/// Checks a request of a Receiver of type `type_` with `token` and `events` (`spec.events`).
///
/// # Errors
/// See [`Rejection`]; a type Capstan does not serve (`generic-oidc`, `gcr`) is refused here
/// too, though the reconciler never makes such a Receiver Ready.
pub fn validate(
    type_: ReceiverType,
    token: &str,
    events: &[String],
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Verdict, Rejection> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match type_ {
        ReceiverType::Generic => Ok(Verdict::Reconcile { event: None }),
        ReceiverType::GenericHmac => {
            check_signature(header("X-Signature"), body, token, "X-Signature")?;
            Ok(Verdict::Reconcile { event: None })
        }
        ReceiverType::Github => {
            hub_signature(headers, body, token, "GitHub")?;
            let event = header("X-GitHub-Event").unwrap_or_default();
            if event.eq_ignore_ascii_case("ping") {
                return Ok(Verdict::Ping);
            }
            allowed(events, event, "GitHub event")
        }
        ReceiverType::Gitlab => {
            let given = header("X-Gitlab-Token").unwrap_or_default();
            if !bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
                return Err(Rejection::Unauthorized(
                    "the X-Gitlab-Token header value does not match the receiver token".into(),
                ));
            }
            allowed(
                events,
                header("X-Gitlab-Event").unwrap_or_default(),
                "GitLab event",
            )
        }
        ReceiverType::Bitbucket => {
            hub_signature(headers, body, token, "Bitbucket server")?;
            allowed(
                events,
                header("X-Event-Key").unwrap_or_default(),
                "Bitbucket server event",
            )
        }
        ReceiverType::Harbor => {
            let given = header("Authorization").unwrap_or_default();
            if !bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
                return Err(Rejection::Unauthorized(
                    "the Harbor Authorization header value does not match the receiver token"
                        .into(),
                ));
            }
            Ok(Verdict::Reconcile { event: None })
        }
        ReceiverType::Dockerhub => {
            json_payload::<DockerHub>(body, "DockerHub")?;
            Ok(Verdict::Reconcile { event: None })
        }
        ReceiverType::Quay => {
            json_payload::<Quay>(body, "Quay")?;
            Ok(Verdict::Reconcile { event: None })
        }
        ReceiverType::Acr => {
            json_payload::<Acr>(body, "ACR")?;
            Ok(Verdict::Reconcile { event: None })
        }
        ReceiverType::Nexus => {
            let Some(signature) = header("X-Nexus-Webhook-Signature").filter(|s| !s.is_empty())
            else {
                return Err(Rejection::Unauthorized(
                    "the Nexus signature is missing from header".into(),
                ));
            };
            if !verify::<hmac::Hmac<sha1::Sha1>>(token, body, signature) {
                return Err(Rejection::Unauthorized("invalid Nexus signature".into()));
            }
            json_payload::<Nexus>(body, "Nexus")?;
            Ok(Verdict::Reconcile { event: None })
        }
        ReceiverType::Cdevents => {
            cdevent(body)?;
            allowed(events, header("Ce-Type").unwrap_or_default(), "CDEvent")
        }
        ReceiverType::Gcr | ReceiverType::GenericOidc => Err(Rejection::Unauthorized(
            "this receiver type is not supported by Capstan".into(),
        )),
    }
}

/// The event `event` when `events` accepts it.
fn allowed(events: &[String], event: &str, what: &str) -> Result<Verdict, Rejection> {
    if !events.is_empty() && !events.iter().any(|e| e.eq_ignore_ascii_case(event)) {
        return Err(Rejection::BadRequest(format!(
            "the {what} {event:?} is not authorised"
        )));
    }
    Ok(Verdict::Reconcile {
        event: (!event.is_empty()).then(|| event.to_owned()),
    })
}

/// GitHub's (and Bitbucket Server's) signature: `X-Hub-Signature-256`, else `X-Hub-Signature`.
fn hub_signature(
    headers: &HeaderMap,
    body: &[u8],
    token: &str,
    what: &str,
) -> Result<(), Rejection> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (name, value) = match header("X-Hub-Signature-256") {
        Some(value) => ("X-Hub-Signature-256", Some(value)),
        None => ("X-Hub-Signature", header("X-Hub-Signature")),
    };
    check_signature(value, body, token, name).map_err(|e| {
        Rejection::Unauthorized(format!("the {what} signature header is invalid: {e}"))
    })
}

/// A `<algorithm>=<hex HMAC>` signature (`sha1`, `sha256`, `sha512`) of `body` keyed with
/// `token` (go-github's `ValidateSignature`).
fn check_signature(
    signature: Option<&str>,
    body: &[u8],
    token: &str,
    header: &str,
) -> Result<(), Rejection> {
    let unauthorized = |message: String| Err(Rejection::Unauthorized(message));
    let Some(signature) = signature.filter(|s| !s.is_empty()) else {
        return unauthorized(format!("missing signature header {header}"));
    };
    let Some((algorithm, hex)) = signature.split_once('=') else {
        return unauthorized(format!("{header} is not <algorithm>=<hex>"));
    };
    let valid = match algorithm {
        "sha1" => verify::<hmac::Hmac<sha1::Sha1>>(token, body, hex),
        "sha256" => verify::<hmac::Hmac<sha2::Sha256>>(token, body, hex),
        "sha512" => verify::<hmac::Hmac<sha2::Sha512>>(token, body, hex),
        _ => return unauthorized(format!("{header}: unknown hash algorithm {algorithm:?}")),
    };
    if valid {
        Ok(())
    } else {
        unauthorized("payload signature check failed".into())
    }
}

/// Whether `hex` is the HMAC of `body` keyed with `token`, compared in constant time.
fn verify<M: Mac + KeyInit>(token: &str, body: &[u8], hex: &str) -> bool {
    let Some(expected) = decode_hex(hex) else {
        return false;
    };
    let Ok(mut mac) = <M as KeyInit>::new_from_slice(token.as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    };
    text.as_bytes()
        .chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

/// The body decoded as `T` (the fields Flux reads; others ignored).
fn json_payload<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, Rejection> {
    serde_json::from_slice(body).map_err(|e| {
        Rejection::BadRequest(format!(
            "cannot decode {what} webhook payload: {}",
            json_error(&e)
        ))
    })
}

/// What is wrong with a JSON body: the error class and position, never the input.
pub(crate) fn json_error(error: &serde_json::Error) -> String {
    format!(
        "invalid JSON ({:?}) at line {} column {}",
        error.classify(),
        error.line(),
        error.column()
    )
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct DockerHub {
    #[serde(default)]
    push_data: DockerHubPush,
    #[serde(default)]
    repository: DockerHubRepository,
}

#[derive(Default, serde::Deserialize)]
#[allow(dead_code)]
struct DockerHubPush {
    #[serde(default)]
    tag: Option<String>,
}

#[derive(Default, serde::Deserialize)]
#[allow(dead_code)]
struct DockerHubRepository {
    #[serde(default)]
    repo_url: Option<String>,
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct Quay {
    #[serde(default)]
    docker_url: Option<String>,
    #[serde(default)]
    updated_tags: Option<Vec<String>>,
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct Acr {
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    target: Option<AcrTarget>,
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct AcrTarget {
    #[serde(default)]
    repository: Option<String>,
    #[serde(default)]
    tag: Option<String>,
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase")]
struct Nexus {
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    repository_name: Option<String>,
}

/// A CDEvent: a JSON object whose `context` has the required fields (`specversion`, `id`,
/// `source`, `type` of the `dev.cdevents.` family, `timestamp`) and a `subject` object.
/// Flux validates against the CDEvents SDK's schemas; this is the structural subset.
fn cdevent(body: &[u8]) -> Result<(), Rejection> {
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Event {
        context: Context,
        subject: serde_json::Map<String, serde_json::Value>,
    }
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Context {
        specversion: String,
        id: String,
        source: String,
        #[serde(rename = "type")]
        type_: String,
        timestamp: String,
    }
    let event: Event = serde_json::from_slice(body).map_err(|e| {
        Rejection::BadRequest(format!(
            "unable to validate CDEvent event: {}",
            json_error(&e)
        ))
    })?;
    if !event.context.type_.starts_with("dev.cdevents.") {
        return Err(Rejection::BadRequest(
            "unable to validate CDEvent event: context.type is not a dev.cdevents type".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    fn sign<M: Mac + KeyInit>(token: &str, body: &[u8]) -> String {
        let mut mac = <M as KeyInit>::new_from_slice(token.as_bytes()).unwrap();
        mac.update(body);
        super::super::hex(&mac.finalize().into_bytes())
    }

    #[test]
    fn generic_hmac_accepts_each_algorithm_and_refuses_a_wrong_one() {
        let body = b"{\"a\":1}";
        for signature in [
            format!("sha1={}", sign::<hmac::Hmac<sha1::Sha1>>("t", body)),
            format!("sha256={}", sign::<hmac::Hmac<sha2::Sha256>>("t", body)),
            format!("sha512={}", sign::<hmac::Hmac<sha2::Sha512>>("t", body)),
        ] {
            let h = headers(&[("X-Signature", &signature)]);
            assert_eq!(
                validate(ReceiverType::GenericHmac, "t", &[], &h, body),
                Ok(Verdict::Reconcile { event: None })
            );
            let wrong = validate(ReceiverType::GenericHmac, "other", &[], &h, body).unwrap_err();
            assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
            assert!(!wrong.to_string().contains(&signature), "{wrong}");
        }
        let none = validate(ReceiverType::GenericHmac, "t", &[], &HeaderMap::new(), body);
        assert!(matches!(none, Err(Rejection::Unauthorized(_))));
        let md5 = headers(&[("X-Signature", "md5=00")]);
        assert!(validate(ReceiverType::GenericHmac, "t", &[], &md5, body).is_err());
    }

    #[test]
    fn github_checks_signature_then_event_and_answers_ping() {
        let body = b"{}";
        let sig = format!("sha256={}", sign::<hmac::Hmac<sha2::Sha256>>("t", body));
        let events = vec!["push".to_owned()];
        let push = headers(&[("X-Hub-Signature-256", &sig), ("X-GitHub-Event", "Push")]);
        assert_eq!(
            validate(ReceiverType::Github, "t", &events, &push, body),
            Ok(Verdict::Reconcile {
                event: Some("Push".into())
            })
        );
        let issue = headers(&[("X-Hub-Signature-256", &sig), ("X-GitHub-Event", "issues")]);
        assert!(matches!(
            validate(ReceiverType::Github, "t", &events, &issue, body),
            Err(Rejection::BadRequest(_))
        ));
        let ping = headers(&[("X-Hub-Signature-256", &sig), ("X-GitHub-Event", "ping")]);
        assert_eq!(
            validate(ReceiverType::Github, "t", &events, &ping, body),
            Ok(Verdict::Ping)
        );
        let legacy = format!("sha1={}", sign::<hmac::Hmac<sha1::Sha1>>("t", body));
        let old = headers(&[("X-Hub-Signature", &legacy), ("X-GitHub-Event", "push")]);
        assert!(validate(ReceiverType::Github, "t", &events, &old, body).is_ok());
        assert!(matches!(
            validate(ReceiverType::Github, "u", &events, &push, body),
            Err(Rejection::Unauthorized(_))
        ));
    }

    #[test]
    fn token_types_compare_the_header() {
        let gitlab = headers(&[("X-Gitlab-Token", "t"), ("X-Gitlab-Event", "Push Hook")]);
        assert!(validate(ReceiverType::Gitlab, "t", &[], &gitlab, b"").is_ok());
        assert!(validate(ReceiverType::Gitlab, "tt", &[], &gitlab, b"").is_err());
        let harbor = headers(&[("Authorization", "t")]);
        assert!(validate(ReceiverType::Harbor, "t", &[], &harbor, b"").is_ok());
        assert!(validate(ReceiverType::Harbor, "x", &[], &harbor, b"").is_err());
    }

    #[test]
    fn nexus_signs_with_hmac_sha1_hex() {
        let body = br#"{"action":"CREATED","repositoryName":"r"}"#;
        let sig = sign::<hmac::Hmac<sha1::Sha1>>("t", body);
        let h = headers(&[("X-Nexus-Webhook-Signature", &sig)]);
        assert!(validate(ReceiverType::Nexus, "t", &[], &h, body).is_ok());
        assert!(validate(ReceiverType::Nexus, "t", &[], &h, b"{}").is_err());
    }

    #[test]
    fn payload_types_need_their_json() {
        for type_ in [
            ReceiverType::Dockerhub,
            ReceiverType::Quay,
            ReceiverType::Acr,
        ] {
            assert!(validate(type_, "t", &[], &HeaderMap::new(), b"{}").is_ok());
            let bad = validate(type_, "t", &[], &HeaderMap::new(), b"not json").unwrap_err();
            assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
        }
        let event = br#"{"context":{"specversion":"0.4.1","id":"1","source":"s","type":"dev.cdevents.change.merged.0.2.0","timestamp":"2026-01-01T00:00:00Z"},"subject":{"id":"x"}}"#;
        let h = headers(&[("Ce-Type", "dev.cdevents.change.merged.0.2.0")]);
        assert!(validate(ReceiverType::Cdevents, "t", &[], &h, event).is_ok());
        let others = vec!["dev.cdevents.pipelinerun.queued.0.2.0".to_owned()];
        assert!(validate(ReceiverType::Cdevents, "t", &others, &h, event).is_err());
        assert!(validate(ReceiverType::Cdevents, "t", &[], &h, b"{}").is_err());
    }
}
