//! Sending a [`Request`]: one attempt, its outcome classified for the caller's retry policy.

use std::fmt;
use std::time::Duration;

use crate::request::{Method, Request};
use crate::settings::{ProviderSettings, SettingsError};

/// Slack's Web API endpoint: answers 200 with `{"ok": false}` on errors (slack.go).
pub const SLACK_API_URL: &str = "https://slack.com/api/chat.postMessage";

/// The longest part of a response body quoted in an error.
const QUOTED_BODY: usize = 512;

/// The HTTP client for one Provider: its timeout, CA bundle, client certificate and proxy.
#[derive(Clone)]
pub struct Transport {
    client: reqwest::Client,
    timeout: Duration,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// A client for `settings`: `spec.timeout` for the whole request, `certSecretRef` TLS,
    /// and the proxy. Errors name the Provider and the field (never a secret value).
    pub fn new(settings: &ProviderSettings) -> Result<Self, SettingsError> {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Losing a race with another thread installing the provider is fine.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let error = |field: &str, reason: String| SettingsError {
            provider: settings.provider.clone(),
            field: field.to_owned(),
            reason,
        };
        let mut builder = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            // reqwest drops Authorization and cookies when a redirect changes host.
            .redirect(reqwest::redirect::Policy::limited(5));
        if let Some(pem) = &settings.tls.ca_pem {
            let certificates = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| error("certSecretRef key 'ca.crt'", format!("is not a PEM certificate bundle: {}", e.without_url())))?;
            if certificates.is_empty() {
                return Err(error("certSecretRef key 'ca.crt'", "holds no PEM certificate".into()));
            }
            builder = builder.tls_certs_merge(certificates);
        }
        if let (Some(cert), Some(key)) = (&settings.tls.client_cert_pem, &settings.tls.client_key_pem) {
            let mut pem = key.clone();
            pem.push(b'\n');
            pem.extend_from_slice(cert);
            let identity = reqwest::Identity::from_pem(&pem).map_err(|_| {
                error(
                    "certSecretRef",
                    "'tls.crt' and 'tls.key' are not a PEM certificate and key".into(),
                )
            })?;
            builder = builder.identity(identity);
        }
        if let Some(proxy) = &settings.proxy {
            let proxy = reqwest::Proxy::all(proxy.expose())
                .map_err(|_| error("proxy", "is not a usable proxy URL".into()))?;
            builder = builder.proxy(proxy);
        }
        let client = builder
            .build()
            .map_err(|e| error("spec", format!("cannot build the HTTP client: {}", e.without_url())))?;
        Ok(Self {
            client,
            timeout: settings.timeout,
        })
    }
}

/// A request the provider accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivered {
    /// The HTTP status (2xx).
    pub status: u16,
}

/// A failed attempt: retry later, or give up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// A connection error, a timeout, 408, 429 or 5xx: worth retrying; `retry_after` is the
    /// delay the provider asked for (`Retry-After` in seconds or as an HTTP date).
    #[error("{reason} (will retry)")]
    Retryable {
        /// What happened (no secrets).
        reason: String,
        /// The provider's `Retry-After`, when given.
        retry_after: Option<Duration>,
    },
    /// Any other 3xx/4xx or an invalid request: retrying would not help.
    #[error("{reason}")]
    Permanent {
        /// What happened (no secrets).
        reason: String,
    },
}

impl SendError {
    /// Whether the attempt may succeed if repeated.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Retryable { .. })
    }

    /// The delay the provider asked for.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Retryable { retry_after, .. } => *retry_after,
            Self::Permanent { .. } => None,
        }
    }
}

/// Sends one request once. A 2xx is [`Delivered`] (for Slack's Web API only with `"ok": true`);
/// everything else is a [`SendError`] classified for retries. Error texts hold the shown
/// (redacted) URL, never a secret header or secret URL.
pub async fn send(request: &Request, transport: &Transport) -> Result<Delivered, SendError> {
    let method = match request.method {
        Method::Post => reqwest::Method::POST,
        Method::Put => reqwest::Method::PUT,
    };
    let shown = request.to_string();
    let mut builder = transport
        .client
        .request(method, &request.url)
        .body(request.body.clone());
    for header in &request.headers {
        builder = builder.header(&header.name, &header.value);
    }
    let response = match builder.send().await {
        Ok(response) => response,
        Err(e) => {
            let kind = if e.is_timeout() {
                "timed out"
            } else if e.is_connect() {
                "could not connect"
            } else if e.is_builder() {
                return Err(SendError::Permanent {
                    reason: format!("{shown}: invalid request: {}", redact(request, &e.without_url().to_string())),
                });
            } else {
                "failed"
            };
            return Err(SendError::Retryable {
                reason: format!("{shown}: {kind}: {}", redact(request, &e.without_url().to_string())),
                retry_after: None,
            });
        }
    };
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, jiff::Timestamp::now()));
    let body: Vec<u8> = match response.bytes().await {
        Ok(body) => body.to_vec(),
        // The provider accepted the request; only reading its answer failed.
        Err(_) if (200..300).contains(&status) => Vec::new(),
        Err(e) => {
            return Err(SendError::Retryable {
                reason: format!(
                    "{shown}: reading the response failed: {}",
                    redact(request, &e.without_url().to_string())
                ),
                retry_after,
            });
        }
    };
    let quoted = || {
        let text = String::from_utf8_lossy(&body);
        let mut cut = text.trim().to_owned();
        if cut.len() > QUOTED_BODY {
            let mut end = QUOTED_BODY;
            while !cut.is_char_boundary(end) {
                end -= 1;
            }
            cut.truncate(end);
            cut.push('…');
        }
        redact(request, &cut)
    };
    if (200..300).contains(&status) {
        if request.url == SLACK_API_URL {
            return check_slack(&body, &shown, status);
        }
        return Ok(Delivered { status });
    }
    let reason = format!("{shown}: request failed with status code {status}: {}", quoted());
    if status == 408 || status == 429 || status >= 500 {
        Err(SendError::Retryable {
            reason,
            retry_after,
        })
    } else {
        Err(SendError::Permanent { reason })
    }
}

/// slack.go `validateSlackResponse`: the Web API answers 200 with `ok` and `error`.
fn check_slack(body: &[u8], shown: &str, status: u16) -> Result<Delivered, SendError> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        ok: bool,
        #[serde(default)]
        error: String,
    }
    match serde_json::from_slice::<Answer>(body) {
        Ok(answer) if answer.ok => Ok(Delivered { status }),
        Ok(answer) if answer.error == "ratelimited" => Err(SendError::Retryable {
            reason: format!("{shown}: Slack responded with error: ratelimited"),
            retry_after: None,
        }),
        Ok(answer) => Err(SendError::Permanent {
            reason: format!("{shown}: Slack responded with error: {}", answer.error),
        }),
        Err(e) => Err(SendError::Permanent {
            reason: format!("{shown}: unable to unmarshal response body: {e}"),
        }),
    }
}

/// Removes the request's secrets (secret header values and a secret URL with its path) from a
/// text that may echo them.
fn redact(request: &Request, text: &str) -> String {
    let mut out = text.to_owned();
    let mut secrets: Vec<&str> = request
        .headers
        .iter()
        .filter(|h| h.secret)
        .map(|h| h.value.as_str())
        .collect();
    if request.url_is_secret {
        secrets.push(&request.url);
    }
    for secret in secrets {
        // Credentials are often sent as `Bearer <token>`: hide the token alone too.
        for part in std::iter::once(secret).chain(secret.split_whitespace().nth(1)) {
            if part.len() >= 4 {
                out = out.replace(part, crate::secret::REDACTED);
            }
        }
    }
    out
}

/// `Retry-After`: delay seconds, or an HTTP date (IMF-fixdate, RFC 850 and asctime forms are
/// not accepted) relative to `now`; a date in the past is no delay.
pub fn parse_retry_after(value: &str, now: jiff::Timestamp) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let delay = date.as_second() - now.as_second();
    Some(Duration::from_secs(u64::try_from(delay).unwrap_or(0)))
}
