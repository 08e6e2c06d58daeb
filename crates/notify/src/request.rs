//! One HTTP request to a provider, built by a pure function and sent by [`crate::send`].

use std::fmt;

use crate::secret::{REDACTED, redact_url};

/// HTTP method of a provider request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// `POST` (all providers but Matrix).
    Post,
    /// `PUT` (Matrix: the transaction ID is in the path).
    Put,
}

impl Method {
    /// `POST` or `PUT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Post => "POST",
            Self::Put => "PUT",
        }
    }
}

/// A request header; a `secret` one (auth, a header from the Provider's Secret) is redacted
/// when the request is shown.
#[derive(Clone, PartialEq, Eq)]
pub struct Header {
    /// Header name as sent.
    pub name: String,
    /// Header value as sent.
    pub value: String,
    /// Whether the value is redacted in `Debug`/`Display`.
    pub secret: bool,
}

impl fmt::Debug for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value: &dyn fmt::Debug = if self.secret { &REDACTED } else { &self.value };
        write!(f, "{}: {value:?}", self.name)
    }
}

/// One HTTP request to a provider: what Flux's notifier would send for an event.
///
/// Secrets live only in [`Request::url`] (a webhook address from the Secret, Telegram's bot
/// token) and in secret [`Header`]s; `Debug` and `Display` redact both. Bodies hold no secrets
/// (PagerDuty's routing key is `spec.channel`, not a Secret, in Flux too).
#[derive(Clone, PartialEq, Eq)]
pub struct Request {
    /// `POST` or `PUT`.
    pub method: Method,
    /// The full URL.
    pub url: String,
    /// Whether the URL holds a secret (then only its scheme and host are shown).
    pub url_is_secret: bool,
    /// Headers in the order they are sent (`Content-Type` first).
    pub headers: Vec<Header>,
    /// The body bytes.
    pub body: Vec<u8>,
}

impl Request {
    /// A JSON request (`Content-Type: application/json`).
    pub(crate) fn json(method: Method, url: String, url_is_secret: bool, body: Vec<u8>) -> Self {
        Self {
            method,
            url,
            url_is_secret,
            headers: vec![Header {
                name: "Content-Type".into(),
                value: "application/json".into(),
                secret: false,
            }],
            body,
        }
    }

    /// Adds a header that is shown.
    pub(crate) fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.set(name, value.into(), false);
        self
    }

    /// Adds a header that is redacted when shown.
    pub(crate) fn secret_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.set(name, value.into(), true);
        self
    }

    /// Sets a header, replacing one of the same name (case-insensitive), as Go's `Header.Set`.
    pub(crate) fn set(&mut self, name: &str, value: String, secret: bool) {
        self.headers.retain(|h| !h.name.eq_ignore_ascii_case(name));
        self.headers.push(Header {
            name: name.to_owned(),
            value,
            secret,
        });
    }

    /// The value of a header (case-insensitive name).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str())
    }

    /// The URL as it may be shown: scheme and host only when it holds a secret.
    pub fn shown_url(&self) -> String {
        if self.url_is_secret {
            redact_url(&self.url)
        } else {
            self.url.clone()
        }
    }

    /// The body parsed as JSON (for tests and `capstan events`); `None` when it is not JSON.
    pub fn json_body(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method.as_str())
            .field("url", &self.shown_url())
            .field("url_is_secret", &self.url_is_secret)
            .field("headers", &self.headers)
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish()
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method.as_str(), self.shown_url())
    }
}
