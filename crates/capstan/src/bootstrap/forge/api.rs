//! The REST client both forges share: one request helper whose errors name the call and the
//! status (never the token), and the address of a forge's API.

use std::fmt::{self, Write as _};
use std::net::IpAddr;

use reqwest::{Method, StatusCode};
use serde_json::Value;

/// Which forge an [`Api`] speaks to; it decides the token header and the error wording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forge {
    GitHub,
    GitLab,
}

impl fmt::Display for Forge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Forge::GitHub => "GitHub",
            Forge::GitLab => "GitLab",
        })
    }
}

/// Whether `host` (`name`, `name:port`, `[::1]:port`) is on the loopback interface:
/// `localhost`, `127.x.x.x` or `::1`. Such a forge is spoken to over plain HTTP, as Capstan
/// speaks to loopback registries.
pub fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        host.rsplit_once(':')
            .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
            .map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The API base URL for a forge at `hostname`, as Flux computes it: `https://api.github.com`
/// for github.com, `https://HOST/api/v3` for GitHub Enterprise, `https://HOST/api/v4` for
/// GitLab (gitlab.com included). A loopback hostname gets `http://`.
pub fn api_base(forge: Forge, hostname: &str) -> String {
    let hostname = hostname.trim_end_matches('/');
    if forge == Forge::GitHub && hostname.eq_ignore_ascii_case("github.com") {
        return "https://api.github.com".to_owned();
    }
    let scheme = if is_loopback_host(hostname) {
        "http"
    } else {
        "https"
    };
    let version = match forge {
        Forge::GitHub => "v3",
        Forge::GitLab => "v4",
    };
    format!("{scheme}://{hostname}/api/{version}")
}

/// A failed API call: the method, the path, the status and what the forge said (or what the
/// status means); never the token.
#[derive(Debug)]
pub struct ApiError {
    pub forge: Forge,
    pub method: Method,
    pub path: String,
    pub status: StatusCode,
    pub explanation: String,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} API {} {} answered {}: {}",
            self.forge, self.method, self.path, self.status, self.explanation
        )
    }
}

impl std::error::Error for ApiError {}

/// One forge's REST API, authenticated with a token.
pub struct Api {
    pub forge: Forge,
    base: String,
    token: String,
    client: reqwest::Client,
}

impl fmt::Debug for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Api")
            .field("forge", &self.forge)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Api {
    /// A client for the API at `base` (see [`api_base`]); `ca_pem` adds trusted certificates.
    pub fn new(
        forge: Forge,
        base: String,
        token: String,
        ca_pem: Option<&[u8]>,
    ) -> anyhow::Result<Self> {
        capstan_source::tls::install_default_provider();
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("capstan/", env!("CARGO_PKG_VERSION")))
            .timeout(std::time::Duration::from_secs(60));
        if let Some(pem) = ca_pem {
            let certificates = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| anyhow::anyhow!("the CA file holds no usable certificate: {e}"))?;
            builder = builder.tls_certs_merge(certificates);
        }
        let client = builder
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the {forge} API client: {e}"))?;
        Ok(Self {
            forge,
            base,
            token,
            client,
        })
    }

    /// The API base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends one request; answers with the status and the JSON body (`null` when empty).
    /// Only transport failures are errors here.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let url = format!("{}{path}", self.base);
        let mut request = self.client.request(method.clone(), &url);
        request = match self.forge {
            Forge::GitHub => request
                .bearer_auth(&self.token)
                .header("Accept", "application/vnd.github+json"),
            Forge::GitLab => request.header("PRIVATE-TOKEN", &self.token),
        };
        if let Some(body) = body {
            request = request
                .header("Content-Type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.map_err(|e| {
            anyhow::anyhow!(
                "{} API {method} {path}: cannot reach {}: {}",
                self.forge,
                self.base,
                self.redact(&capstan_source::redact::error_chain(&e))
            )
        })?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| {
            anyhow::anyhow!(
                "{} API {method} {path}: reading the answer: {}",
                self.forge,
                self.redact(&e.to_string())
            )
        })?;
        let value = if bytes.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        Ok((status, value))
    }

    /// Sends one request and expects a success status; any other status is an [`ApiError`].
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let (status, value) = self.send(method.clone(), path, body).await?;
        if status.is_success() {
            return Ok(value);
        }
        Err(self.error(method, path, status, &value).into())
    }

    /// The error for an unexpected `status`.
    pub fn error(&self, method: Method, path: &str, status: StatusCode, body: &Value) -> ApiError {
        let said = self.redact(&said(body));
        let explanation = match status {
            StatusCode::UNAUTHORIZED => format!("the token is not valid for {}", self.base),
            StatusCode::FORBIDDEN => {
                format!("the token is not allowed to do this{}", suffix(&said))
            }
            StatusCode::NOT_FOUND => format!("not found{}", suffix(&said)),
            _ if said.is_empty() => "no details given".to_owned(),
            _ => said,
        };
        ApiError {
            forge: self.forge,
            method,
            path: path.to_owned(),
            status,
            explanation,
        }
    }

    /// `text` with the token, should a server echo it, replaced.
    fn redact(&self, text: &str) -> String {
        if self.token.is_empty() {
            text.to_owned()
        } else {
            text.replace(&self.token, "***")
        }
    }
}

fn suffix(said: &str) -> String {
    if said.is_empty() {
        String::new()
    } else {
        format!(" ({said})")
    }
}

/// What a forge's error body says: GitHub's `message` and `errors[].message`/`code`, GitLab's
/// `message` (a string, a list or a map of field errors) or `error`.
fn said(body: &Value) -> String {
    let mut parts = Vec::new();
    match body.get("message") {
        Some(Value::String(text)) => parts.push(text.clone()),
        Some(Value::Array(items)) => parts.extend(items.iter().map(plain)),
        Some(Value::Object(fields)) => parts.extend(
            fields
                .iter()
                .map(|(field, errors)| format!("{field} {}", plain(errors))),
        ),
        _ => {}
    }
    if let Some(Value::String(text)) = body.get("error") {
        parts.push(text.clone());
    }
    if let Some(Value::Array(errors)) = body.get("errors") {
        for error in errors {
            match error.get("message").or_else(|| error.get("code")) {
                Some(Value::String(text)) => parts.push(text.clone()),
                _ => parts.push(plain(error)),
            }
        }
    }
    parts.join("; ")
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// `segment` percent-encoded for a URL path (GitLab's `group%2Fproject` ids).
pub fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use reqwest::{Method, StatusCode};
    use serde_json::json;

    use super::{Api, Forge, api_base, encode_segment, is_loopback_host};

    #[test]
    fn api_bases_follow_flux_and_loopback_is_plain_http() {
        assert_eq!(
            api_base(Forge::GitHub, "github.com"),
            "https://api.github.com"
        );
        assert_eq!(
            api_base(Forge::GitHub, "ghe.example.org"),
            "https://ghe.example.org/api/v3"
        );
        assert_eq!(
            api_base(Forge::GitLab, "gitlab.com"),
            "https://gitlab.com/api/v4"
        );
        assert_eq!(
            api_base(Forge::GitLab, "127.0.0.1:8080"),
            "http://127.0.0.1:8080/api/v4"
        );
        assert_eq!(
            api_base(Forge::GitHub, "localhost:3000"),
            "http://localhost:3000/api/v3"
        );
        assert!(is_loopback_host("[::1]:80"));
        assert!(!is_loopback_host("128.0.0.1:80"));
        assert!(!is_loopback_host("localhost.example.org"));
        assert_eq!(encode_segment("group/sub/app"), "group%2Fsub%2Fapp");
    }

    #[test]
    fn errors_name_the_call_and_status_never_the_token() {
        let api = Api::new(
            Forge::GitHub,
            "https://api.github.com".to_owned(),
            "tok-123".to_owned(),
            None,
        )
        .unwrap();
        let error = api.error(
            Method::GET,
            "/repos/o/r",
            StatusCode::UNAUTHORIZED,
            &json!({"message": "Bad credentials"}),
        );
        assert_eq!(
            error.to_string(),
            "GitHub API GET /repos/o/r answered 401 Unauthorized: the token is not valid for https://api.github.com"
        );
        let error = api.error(
            Method::POST,
            "/repos/o/r/keys",
            StatusCode::UNPROCESSABLE_ENTITY,
            &json!({"message": "Validation Failed", "errors": [{"message": "key is already in use"}]}),
        );
        assert_eq!(
            error.to_string(),
            "GitHub API POST /repos/o/r/keys answered 422 Unprocessable Entity: Validation Failed; key is already in use"
        );
        // A forge echoing the token does not get it shown.
        let error = api.error(
            Method::GET,
            "/user",
            StatusCode::BAD_REQUEST,
            &json!({"message": {"token": ["tok-123 is malformed"]}}),
        );
        assert_eq!(
            error.to_string(),
            "GitHub API GET /user answered 400 Bad Request: token *** is malformed"
        );
    }
}
