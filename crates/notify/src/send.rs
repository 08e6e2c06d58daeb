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
            // Secrets travel in headers reqwest does not know as sensitive (PRIVATE-TOKEN,
            // DD-API-KEY, custom headers): follow same-origin redirects only.
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                let origin = |u: &reqwest::Url| {
                    (
                        u.scheme().to_owned(),
                        u.host_str().map(str::to_owned),
                        u.port_or_known_default(),
                    )
                };
                let same = attempt
                    .previous()
                    .first()
                    .is_some_and(|first| origin(first) == origin(attempt.url()));
                if !same || attempt.previous().len() > 5 {
                    attempt.stop()
                } else {
                    attempt.follow()
                }
            }));
        if let Some(pem) = &settings.tls.ca_pem {
            let certificates = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| {
                error(
                    "certSecretRef key 'ca.crt'",
                    format!("is not a PEM certificate bundle: {}", e.without_url()),
                )
            })?;
            if certificates.is_empty() {
                return Err(error(
                    "certSecretRef key 'ca.crt'",
                    "holds no PEM certificate".into(),
                ));
            }
            builder = builder.tls_certs_merge(certificates);
        }
        if let (Some(cert), Some(key)) =
            (&settings.tls.client_cert_pem, &settings.tls.client_key_pem)
        {
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
        let client = builder.build().map_err(|e| {
            error(
                "spec",
                format!("cannot build the HTTP client: {}", e.without_url()),
            )
        })?;
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
                    reason: format!(
                        "{shown}: invalid request: {}",
                        redact(request, &e.without_url().to_string())
                    ),
                });
            } else {
                "failed"
            };
            return Err(SendError::Retryable {
                reason: format!(
                    "{shown}: {kind}: {}",
                    redact(request, &e.without_url().to_string())
                ),
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
    let reason = format!(
        "{shown}: request failed with status code {status}: {}",
        quoted()
    );
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use axum::body::Bytes;
    use axum::http::{HeaderMap, Method, StatusCode, Uri};
    use axum::response::IntoResponse;
    use serde_json::json;

    use super::*;
    use crate::{Event, ObjectReference, ProviderSecrets, ProviderSettings, Severity, build};

    /// What the test server received.
    #[derive(Clone, Debug)]
    struct Received {
        method: String,
        path: String,
        headers: HeaderMap,
        body: Vec<u8>,
    }

    /// A real HTTP server on 127.0.0.1 that records every request and answers by path:
    /// `/busy` 503 with `Retry-After: 7`, `/limited` 429 with an HTTP-date `Retry-After`,
    /// `/rejected` 400 echoing the Authorization header, `/slow` after 30 s, anything else 200.
    async fn server() -> (String, Arc<Mutex<Vec<Received>>>) {
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&received);
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let log = Arc::clone(&log);
                async move {
                    let auth = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    let port = headers
                        .get("host")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|h| h.rsplit(':').next())
                        .unwrap_or_default()
                        .to_owned();
                    log.lock().unwrap().push(Received {
                        method: method.to_string(),
                        path: uri.path().to_owned(),
                        headers,
                        body: body.to_vec(),
                    });
                    match uri.path() {
                        "/busy" => (
                            StatusCode::SERVICE_UNAVAILABLE,
                            [("retry-after", "7")],
                            "busy".to_owned(),
                        )
                            .into_response(),
                        "/limited" => (
                            StatusCode::TOO_MANY_REQUESTS,
                            [("retry-after", "Wed, 21 Oct 2099 07:28:00 GMT")],
                            String::new(),
                        )
                            .into_response(),
                        "/rejected" => (StatusCode::BAD_REQUEST, format!("bad credentials {auth}"))
                            .into_response(),
                        // Same port, another host name: a different origin.
                        "/moved" => {
                            let target = format!("http://localhost:{port}/elsewhere");
                            (
                                StatusCode::TEMPORARY_REDIRECT,
                                [("location", target)],
                                String::new(),
                            )
                                .into_response()
                        }
                        "/slow" => {
                            tokio::time::sleep(Duration::from_secs(30)).await;
                            StatusCode::OK.into_response()
                        }
                        _ => (StatusCode::OK, "ok").into_response(),
                    }
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (address, received)
    }

    fn event() -> Event {
        Event {
            involved_object: ObjectReference {
                kind: "HelmRelease".into(),
                namespace: "payments".into(),
                name: "ledger".into(),
                uid: "11111111-2222-4333-8444-555555555555".into(),
                api_version: "helm.toolkit.fluxcd.io/v2".into(),
                ..ObjectReference::default()
            },
            severity: Severity::Info,
            timestamp: "2026-11-25T08:00:00Z".parse().unwrap(),
            message:
                "Helm upgrade succeeded for release payments/ledger.v7 with chart ledger@2.1.0"
                    .into(),
            reason: "UpgradeSucceeded".into(),
            metadata: BTreeMap::from([
                ("revision".into(), "2.1.0".into()),
                (
                    "originRevision".into(),
                    format!("main@sha1:{}", "a1".repeat(20)),
                ),
            ]),
            reporting_controller: "helm-controller".into(),
            reporting_instance: String::new(),
        }
    }

    #[allow(clippy::needless_pass_by_value)]
    fn resolve(type_: &str, spec: serde_json::Value, secret: &[(&str, &str)]) -> ProviderSettings {
        let mut full = json!({"type": type_, "secretRef": {"name": "creds"}});
        for (k, v) in spec.as_object().unwrap() {
            full[k] = v.clone();
        }
        let provider = serde_json::from_value(json!({
            "apiVersion": "notification.toolkit.fluxcd.io/v1beta3",
            "kind": "Provider",
            "metadata": {"name": "sink", "namespace": "payments", "uid": "abcdef12-0000-4000-8000-000000000000"},
            "spec": full,
        }))
        .unwrap();
        let secrets = ProviderSecrets {
            secret: Some(
                secret
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
                    .collect(),
            ),
            ..ProviderSecrets::default()
        };
        ProviderSettings::resolve(&provider, &secrets).unwrap()
    }

    async fn deliver(settings: &ProviderSettings) -> Vec<Result<Delivered, SendError>> {
        let transport = Transport::new(settings).unwrap();
        let mut outcomes = Vec::new();
        for request in build(settings, &event(), None).unwrap() {
            outcomes.push(send(&request, &transport).await);
        }
        outcomes
    }

    #[tokio::test]
    async fn providers_deliver_to_a_real_server() {
        let (base, received) = server().await;

        // Slack with the webhook address in the Secret.
        let slack = resolve(
            "slack",
            json!({"channel": "payments"}),
            &[("address", &format!("{base}/services/T0/B0/secret"))],
        );
        assert_eq!(deliver(&slack).await, vec![Ok(Delivered { status: 200 })]);
        // generic-hmac: the server can verify the signature over the exact body.
        let hmac = resolve(
            "generic-hmac",
            json!({"address": format!("{base}/hook")}),
            &[("token", "shared-key")],
        );
        assert_eq!(deliver(&hmac).await, vec![Ok(Delivered { status: 200 })]);
        // GitHub Enterprise commit status for the origin revision's commit.
        let github = resolve(
            "github",
            json!({"address": format!("{base}/acme/fleet")}),
            &[("token", "ghp_local")],
        );
        assert_eq!(deliver(&github).await, vec![Ok(Delivered { status: 200 })]);
        // Matrix PUT; Telegram with a local Bot API base.
        let matrix = resolve(
            "matrix",
            json!({"address": base.clone(), "channel": "!ops:local"}),
            &[("token", "syt")],
        );
        assert_eq!(deliver(&matrix).await, vec![Ok(Delivered { status: 200 })]);
        let telegram = resolve(
            "telegram",
            json!({"address": base.clone(), "channel": "42"}),
            &[("token", "7:tg")],
        );
        assert_eq!(
            deliver(&telegram).await,
            vec![Ok(Delivered { status: 200 })]
        );

        let received = received.lock().unwrap().clone();
        assert_eq!(received.len(), 5);
        let slack = &received[0];
        assert_eq!(
            (slack.method.as_str(), slack.path.as_str()),
            ("POST", "/services/T0/B0/secret")
        );
        let body: serde_json::Value = serde_json::from_slice(&slack.body).unwrap();
        assert_eq!(body["channel"], "payments");
        assert_eq!(
            body["attachments"][0]["author_name"],
            "helmrelease/ledger.payments"
        );
        assert_eq!(slack.headers["content-type"], "application/json");
        assert_eq!(slack.headers[crate::IDEMPOTENCY_KEY_HEADER].len(), 32);

        let hook = &received[1];
        let signature = crate::providers::sign_for_tests(b"shared-key", &hook.body);
        assert_eq!(
            hook.headers["x-signature"],
            format!("sha256={signature}").as_str()
        );
        assert_eq!(hook.headers["gotk-component"], "helm-controller");
        assert_eq!(Event::from_json(&hook.body).unwrap(), event());

        let status = &received[2];
        assert_eq!(
            status.path,
            format!("/api/v3/repos/acme/fleet/statuses/{}", "a1".repeat(20))
        );
        assert_eq!(status.headers["authorization"], "Bearer ghp_local");
        let body: serde_json::Value = serde_json::from_slice(&status.body).unwrap();
        assert_eq!(
            body,
            json!({"state": "success", "description": "upgrade succeeded", "context": "helmrelease/ledger/abcdef12"})
        );

        assert_eq!(received[3].method, "PUT");
        assert!(
            received[3]
                .path
                .starts_with("/_matrix/client/r0/rooms/!ops:local/send/m.room.message/")
        );
        assert_eq!(received[4].path, "/bot7:tg/sendMessage");
    }

    #[tokio::test]
    async fn failures_are_classified_and_redacted() {
        let (base, received) = server().await;
        let outcome = |path: &str, timeout: &str| {
            let settings = resolve(
                "generic",
                json!({"address": format!("{base}{path}"), "timeout": timeout}),
                &[("headers", "Authorization: Bearer top-secret-value\n")],
            );
            async move { deliver(&settings).await.remove(0) }
        };

        let busy = outcome("/busy", "5s").await.unwrap_err();
        assert!(busy.is_retryable(), "{busy}");
        assert_eq!(busy.retry_after(), Some(Duration::from_secs(7)));
        assert!(busy.to_string().contains("status code 503"), "{busy}");

        let limited = outcome("/limited", "5s").await.unwrap_err();
        assert!(limited.is_retryable());
        assert!(limited.retry_after().unwrap() > Duration::from_secs(365 * 24 * 3600));

        let rejected = outcome("/rejected", "5s").await.unwrap_err();
        assert!(!rejected.is_retryable(), "{rejected}");
        assert!(
            rejected.to_string().contains("status code 400"),
            "{rejected}"
        );
        assert!(
            !rejected.to_string().contains("top-secret-value"),
            "{rejected}"
        );

        let moved = outcome("/moved", "5s").await.unwrap_err();
        assert!(!moved.is_retryable(), "{moved}");
        assert!(moved.to_string().contains("status code 307"), "{moved}");
        assert!(
            !received
                .lock()
                .unwrap()
                .iter()
                .any(|r| r.path == "/elsewhere"),
            "a redirect to another host must not be followed"
        );

        let slow = outcome("/slow", "1s").await.unwrap_err();
        assert!(slow.is_retryable(), "{slow}");
        assert!(slow.to_string().contains("timed out"), "{slow}");

        // Nothing listens on a port just released: a connection error, retryable.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let settings = resolve(
            "generic",
            json!({"address": format!("http://127.0.0.1:{port}/x")}),
            &[],
        );
        let refused = deliver(&settings).await.remove(0).unwrap_err();
        assert!(refused.is_retryable(), "{refused}");
        assert!(
            refused.to_string().contains("could not connect"),
            "{refused}"
        );
    }

    /// TLS over a TCP listener for `axum::serve`; failed handshakes are skipped.
    struct TlsListener {
        tcp: tokio::net::TcpListener,
        acceptor: tokio_rustls::TlsAcceptor,
    }

    impl axum::serve::Listener for TlsListener {
        type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
        type Addr = std::net::SocketAddr;

        async fn accept(&mut self) -> (Self::Io, Self::Addr) {
            loop {
                let Ok((stream, address)) = self.tcp.accept().await else {
                    continue;
                };
                if let Ok(tls) = self.acceptor.accept(stream).await {
                    return (tls, address);
                }
            }
        }

        fn local_addr(&self) -> std::io::Result<Self::Addr> {
            self.tcp.local_addr()
        }
    }

    /// An HTTPS server answering 200 that requires a client certificate issued by `ca`.
    async fn mtls_server(ca: &capstan_testkit::TestCa) -> String {
        use rustls::pki_types::pem::PemObject as _;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let server = ca.server();
        let certs = CertificateDer::pem_slice_iter(server.cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(server.key.as_bytes()).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca.pem().as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder(roots.into())
            .build()
            .unwrap();
        let config = rustls::ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .unwrap();
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("https://{}", tcp.local_addr().unwrap());
        let listener = TlsListener {
            tcp,
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        };
        let app = axum::Router::new().fallback(|| async { "ok" });
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        address
    }

    fn with_cert_secret(
        address: &str,
        cert_secret: Option<BTreeMap<String, Vec<u8>>>,
    ) -> ProviderSettings {
        let mut spec = json!({"type": "generic", "address": format!("{address}/hook")});
        if cert_secret.is_some() {
            spec["certSecretRef"] = json!({"name": "tls"});
        }
        let provider = serde_json::from_value(json!({
            "apiVersion": "notification.toolkit.fluxcd.io/v1beta3",
            "kind": "Provider",
            "metadata": {"name": "tls", "namespace": "payments", "uid": "1"},
            "spec": spec,
        }))
        .unwrap();
        let secrets = ProviderSecrets {
            cert_secret,
            ..ProviderSecrets::default()
        };
        ProviderSettings::resolve(&provider, &secrets).unwrap()
    }

    #[tokio::test]
    async fn cert_secret_ref_ca_and_client_certificate() {
        let ca = capstan_testkit::TestCa::new();
        let address = mtls_server(&ca).await;
        let client = ca.client();
        let full = BTreeMap::from([
            ("ca.crt".to_owned(), ca.pem().as_bytes().to_vec()),
            ("tls.crt".to_owned(), client.cert.as_bytes().to_vec()),
            ("tls.key".to_owned(), client.key.as_bytes().to_vec()),
        ]);
        let settings = with_cert_secret(&address, Some(full));
        assert_eq!(
            deliver(&settings).await,
            vec![Ok(Delivered { status: 200 })]
        );

        // Without the client certificate the server refuses the handshake; without the CA the
        // client refuses the server: both are connection errors, retryable.
        let ca_only = BTreeMap::from([("ca.crt".to_owned(), ca.pem().as_bytes().to_vec())]);
        let err = deliver(&with_cert_secret(&address, Some(ca_only)))
            .await
            .remove(0)
            .unwrap_err();
        assert!(err.is_retryable(), "{err}");
        let err = deliver(&with_cert_secret(&address, None))
            .await
            .remove(0)
            .unwrap_err();
        assert!(err.is_retryable(), "{err}");

        // A CA that is not PEM is refused when the transport is built, naming the field.
        let bad = with_cert_secret(
            &address,
            Some(BTreeMap::from([(
                "ca.crt".to_owned(),
                b"not a certificate".to_vec(),
            )])),
        );
        let err = Transport::new(&bad).unwrap_err();
        assert_eq!(err.field, "certSecretRef key 'ca.crt'");
    }

    #[tokio::test]
    async fn proxy_secret_ref_routes_through_the_proxy() {
        // The recording server plays the proxy: a request for an http:// URL through a proxy is
        // sent to the proxy in absolute form, with Proxy-Authorization from the proxy Secret.
        let (proxy, received) = server().await;
        let provider = serde_json::from_value(json!({
            "apiVersion": "notification.toolkit.fluxcd.io/v1beta3",
            "kind": "Provider",
            "metadata": {"name": "proxied", "namespace": "payments", "uid": "2"},
            "spec": {"type": "generic", "address": "http://events.internal.test/flux", "proxySecretRef": {"name": "proxy"}},
        }))
        .unwrap();
        let secrets = ProviderSecrets {
            proxy_secret: Some(BTreeMap::from([
                ("address".to_owned(), proxy.as_bytes().to_vec()),
                ("username".to_owned(), b"relay".to_vec()),
                ("password".to_owned(), b"relay-pass".to_vec()),
            ])),
            ..ProviderSecrets::default()
        };
        let settings = ProviderSettings::resolve(&provider, &secrets).unwrap();
        assert_eq!(
            deliver(&settings).await,
            vec![Ok(Delivered { status: 200 })]
        );
        let received = received.lock().unwrap().clone();
        assert_eq!(received.len(), 1);
        assert_eq!(received[0].path, "/flux");
        assert_eq!(
            received[0].headers["proxy-authorization"],
            "Basic cmVsYXk6cmVsYXktcGFzcw=="
        );
    }

    #[test]
    fn retry_after_forms() {
        let now: jiff::Timestamp = "2026-11-25T08:00:00Z".parse().unwrap();
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("Wed, 25 Nov 2026 08:01:30 GMT", now),
            Some(Duration::from_secs(90))
        );
        assert_eq!(
            parse_retry_after("Wed, 25 Nov 2026 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn slack_web_api_answers() {
        assert_eq!(
            check_slack(br#"{"ok":true}"#, "POST x", 200),
            Ok(Delivered { status: 200 })
        );
        let err = check_slack(
            br#"{"ok":false,"error":"channel_not_found"}"#,
            "POST x",
            200,
        )
        .unwrap_err();
        assert!(!err.is_retryable());
        assert!(err.to_string().contains("channel_not_found"));
        assert!(
            check_slack(br#"{"ok":false,"error":"ratelimited"}"#, "POST x", 200)
                .unwrap_err()
                .is_retryable()
        );
    }
}
