//! Values that never appear in `Debug`/`Display` output, logs or errors.

use std::fmt;

/// The text shown in place of a secret.
pub const REDACTED: &str = "<redacted>";

/// A secret string: a token, password, HMAC key, webhook address or proxy URL with credentials.
/// Its `Debug` and `Display` print [`REDACTED`]; [`Secret::expose`] is the only way to read it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret value, for putting into a request's auth or URL.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// `scheme://host[:port]/<redacted>`: a URL whose path or query holds a secret, shown without it.
pub fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => {
            let host = parsed.host_str().unwrap_or_default();
            match parsed.port() {
                Some(port) => format!("{}://{host}:{port}/{REDACTED}", parsed.scheme()),
                None => format!("{}://{host}/{REDACTED}", parsed.scheme()),
            }
        }
        Err(_) => REDACTED.to_owned(),
    }
}
