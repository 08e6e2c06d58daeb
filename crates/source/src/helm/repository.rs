//! An HTTP/S chart repository: its `index.yaml` and its charts, fetched as Helm's HTTP getter
//! and Flux's `ChartRepository` fetch them.
//!
//! # Expected flow
//! Build [`ClientOptions`] from the HelmRepository's Secrets ([`ClientOptions::from_secrets`]:
//! `username`/`password` of `spec.secretRef`; `ca.crt`, `tls.crt`/`tls.key` of
//! `spec.certSecretRef`), then a [`Repository`] for `spec.url`; [`Repository::fetch_index`]
//! returns the index bytes, their `sha256:` revision and the parsed index;
//! [`Repository::download_chart`] downloads a version the index lists.
//!
//! # Guarantees
//! - Credentials go to the repository's own scheme and host only, unless `pass_credentials`
//!   is set (Helm's `passCredentialsAll`); they never appear in errors.
//! - Every download is bounded by [`ClientOptions::timeout`] and by a size limit
//!   ([`super::MAX_INDEX_SIZE`], [`super::MAX_CHART_SIZE`], and the storage [`Limits`]),
//!   checked as the body streams.
//! - A chart whose index entry gives a `digest` is checked against it.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use sha2::{Digest as _, Sha256};

use super::index::{ChartVersion, Index, normalize_url, resolve_url};
use super::{Error, MAX_CHART_SIZE, MAX_INDEX_SIZE, Result};
use crate::artifact::Limits;

/// The keys of a `spec.secretRef` Secret holding basic auth credentials.
pub const USERNAME_KEY: &str = "username";
/// See [`USERNAME_KEY`].
pub const PASSWORD_KEY: &str = "password";
/// The key of a `spec.certSecretRef` Secret holding the CA certificate (PEM).
pub const CA_KEY: &str = "ca.crt";
/// The key of a `spec.certSecretRef` Secret holding the client certificate (PEM).
pub const CERT_KEY: &str = "tls.crt";
/// The key of a `spec.certSecretRef` Secret holding the client key (PEM).
pub const KEY_KEY: &str = "tls.key";

/// How to reach a chart repository.
#[derive(Clone, Default)]
pub struct ClientOptions {
    /// Basic auth `(username, password)`.
    pub basic_auth: Option<(String, String)>,
    /// Extra CA certificates (PEM bundle).
    pub ca_pem: Option<Vec<u8>>,
    /// A client certificate and key (PEM) for mutual TLS.
    pub client_identity: Option<(Vec<u8>, Vec<u8>)>,
    /// Send the credentials to chart URLs on other hosts too (`spec.passCredentials`).
    pub pass_credentials: bool,
    /// Bound on each request (connect and whole body); none when `None`.
    pub timeout: Option<Duration>,
    /// Size limits of the storage the index or chart will be stored in.
    pub limits: Limits,
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field(
                "basic_auth",
                &self.basic_auth.as_ref().map(|_| "<redacted>"),
            )
            .field("ca_pem", &self.ca_pem.is_some())
            .field("client_identity", &self.client_identity.is_some())
            .field("pass_credentials", &self.pass_credentials)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ClientOptions {
    /// Options from the data of the `spec.secretRef` Secret (`username` and `password`, both or
    /// neither) and of the `spec.certSecretRef` Secret (`ca.crt`; `tls.crt` and `tls.key`, both
    /// or neither), with the default limits and no timeout.
    ///
    /// # Errors
    /// [`Error::InvalidCredentials`] naming the missing or unusable key, never its value.
    pub fn from_secrets(
        auth: Option<&BTreeMap<String, Vec<u8>>>,
        tls: Option<&BTreeMap<String, Vec<u8>>>,
    ) -> Result<Self> {
        let mut options = ClientOptions::default();
        if let Some(data) = auth {
            let text = |key: &str| {
                data.get(key)
                    .map(|value| {
                        String::from_utf8(value.clone()).map_err(|_| Error::InvalidCredentials {
                            what: "basic auth credentials",
                            reason: format!("'{key}' is not UTF-8"),
                        })
                    })
                    .transpose()
            };
            match (text(USERNAME_KEY)?, text(PASSWORD_KEY)?) {
                (Some(username), Some(password)) => {
                    options.basic_auth = Some((username, password));
                }
                (None, None) => {}
                (Some(_), None) | (None, Some(_)) => {
                    return Err(Error::InvalidCredentials {
                        what: "basic auth credentials",
                        reason: "the secret must hold both 'username' and 'password'".to_owned(),
                    });
                }
            }
        }
        if let Some(data) = tls {
            options.ca_pem = data.get(CA_KEY).cloned();
            match (data.get(CERT_KEY), data.get(KEY_KEY)) {
                (Some(cert), Some(key)) => {
                    options.client_identity = Some((cert.clone(), key.clone()));
                }
                (None, None) => {}
                _ => {
                    return Err(Error::InvalidCredentials {
                        what: "TLS client certificate",
                        reason: "the secret must hold both 'tls.crt' and 'tls.key'".to_owned(),
                    });
                }
            }
        }
        Ok(options)
    }
}

/// The index of a repository as fetched.
#[derive(Clone, Debug)]
pub struct FetchedIndex {
    /// The bytes as served.
    pub bytes: Vec<u8>,
    /// `sha256:<hex>` of the bytes (Flux's HelmRepository revision).
    pub revision: String,
    /// The parsed index.
    pub index: Index,
}

/// A chart downloaded from a repository.
#[derive(Clone, Debug)]
pub struct DownloadedChart {
    /// The archive bytes.
    pub bytes: Vec<u8>,
    /// The URL it came from (without credentials).
    pub url: String,
}

/// An HTTP/S chart repository.
#[derive(Clone)]
pub struct Repository {
    url: reqwest::Url,
    client: reqwest::Client,
    options: ClientOptions,
}

/// Written by hand: the URL is shown without userinfo.
impl std::fmt::Debug for Repository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repository")
            .field("url", &crate::redact::url(self.url.as_str()))
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Repository {
    /// A repository at `url` (`http` or `https`; a trailing `/` is added).
    ///
    /// # Errors
    /// [`Error::InvalidUrl`], [`Error::InvalidCredentials`] for unusable TLS material, or
    /// [`Error::Client`].
    pub fn new(url: &str, options: ClientOptions) -> Result<Self> {
        crate::tls::install_default_provider();
        let url = normalize_url(url)?;
        let mut builder = reqwest::Client::builder()
            // Credentials must not follow a redirect to another host.
            .redirect(reqwest::redirect::Policy::limited(10));
        if let Some(pem) = &options.ca_pem {
            let invalid = |reason: String| Error::InvalidCredentials {
                what: "CA certificate",
                reason: format!("{CA_KEY}: {reason}"),
            };
            let certificates =
                reqwest::Certificate::from_pem_bundle(pem).map_err(|e| invalid(e.to_string()))?;
            if certificates.is_empty() {
                return Err(invalid("no PEM certificate found".to_owned()));
            }
            builder = builder.tls_certs_merge(certificates);
        }
        if let Some((cert, key)) = &options.client_identity {
            let mut pem = key.clone();
            pem.push(b'\n');
            pem.extend_from_slice(cert);
            let identity =
                reqwest::Identity::from_pem(&pem).map_err(|e| Error::InvalidCredentials {
                    what: "TLS client certificate",
                    reason: format!(
                        "{CERT_KEY} and {KEY_KEY} are not a PEM certificate and key: {e}"
                    ),
                })?;
            builder = builder.identity(identity);
        }
        if let Some(timeout) = options.timeout {
            builder = builder.connect_timeout(timeout).timeout(timeout);
        }
        let client = builder.build().map_err(Error::Client)?;
        Ok(Repository {
            url,
            client,
            options,
        })
    }

    /// The normalised repository URL (with its trailing `/`).
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// Downloads and parses `index.yaml`.
    ///
    /// # Errors
    /// Transport and status errors, [`Error::TooLarge`] past [`MAX_INDEX_SIZE`] (or the storage
    /// limit), [`Error::InvalidIndex`] naming the URL when the body is not an index.
    pub async fn fetch_index(&self) -> Result<FetchedIndex> {
        let url = self.url.join("index.yaml").map_err(|e| Error::InvalidUrl {
            url: crate::redact::url(self.url.as_str()),
            reason: e.to_string(),
        })?;
        let limit = MAX_INDEX_SIZE.min(self.options.limits.max_archive_bytes);
        let bytes = self.get(&url, "index", limit).await?;
        let revision = format!("sha256:{}", hex(&Sha256::digest(&bytes)));
        let parsed = Index::parse(&bytes).map_err(|error| match error {
            Error::InvalidIndex { reason, .. } => Error::InvalidIndex {
                origin: Some(format!("from {}", crate::redact::url(url.as_str()))),
                reason,
            },
            other => other,
        })?;
        Ok(FetchedIndex {
            bytes,
            revision,
            index: parsed,
        })
    }

    /// Downloads the archive of `version` (its first URL, resolved against the repository
    /// URL) and checks it against the index's `digest` when there is one.
    ///
    /// # Errors
    /// [`Error::InvalidIndex`] for a version without URLs, transport and status errors,
    /// [`Error::TooLarge`] past [`MAX_CHART_SIZE`] (or the storage limit),
    /// [`Error::DigestMismatch`].
    pub async fn download_chart(&self, version: &ChartVersion) -> Result<DownloadedChart> {
        let Some(reference) = version.urls.first() else {
            return Err(Error::InvalidIndex {
                origin: None,
                reason: format!("chart '{}' has no downloadable URLs", version.name),
            });
        };
        let url = resolve_url(self.url.as_str(), reference)?;
        let limit = MAX_CHART_SIZE.min(self.options.limits.max_archive_bytes);
        let bytes = self.get(&url, "chart", limit).await?;
        let shown = crate::redact::url(url.as_str());
        if !version.digest.is_empty() {
            let expected = version
                .digest
                .strip_prefix("sha256:")
                .unwrap_or(&version.digest)
                .to_ascii_lowercase();
            let actual = hex(&Sha256::digest(&bytes));
            if expected != actual {
                return Err(Error::DigestMismatch {
                    url: shown,
                    expected,
                    actual,
                });
            }
        }
        Ok(DownloadedChart { bytes, url: shown })
    }

    /// Whether requests to `url` carry the credentials: same scheme and host (and port) as the
    /// repository, or `pass_credentials`.
    fn sends_credentials(&self, url: &reqwest::Url) -> bool {
        self.options.pass_credentials
            || (url.scheme() == self.url.scheme()
                && url.host_str() == self.url.host_str()
                && url.port_or_known_default() == self.url.port_or_known_default())
    }

    async fn get(&self, url: &reqwest::Url, what: &'static str, limit: u64) -> Result<Vec<u8>> {
        let shown = crate::redact::url(url.as_str());
        let mut request = self.client.get(url.clone());
        if let Some((username, password)) = &self.options.basic_auth
            && self.sends_credentials(url)
        {
            request = request.basic_auth(username, Some(password));
        }
        let http_error = |source| Error::Http {
            url: shown.clone(),
            source: reqwest::Error::without_url(source),
        };
        let response = request.send().await.map_err(http_error)?;
        if !response.status().is_success() {
            return Err(Error::HttpStatus {
                url: shown,
                status: response.status().as_u16(),
            });
        }
        let too_large = || Error::TooLarge {
            what,
            url: shown.clone(),
            limit,
        };
        if response
            .content_length()
            .is_some_and(|length| length > limit)
        {
            return Err(too_large());
        }
        let mut bytes = Vec::new();
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(http_error)?;
            if (bytes.len() + chunk.len()) as u64 > limit {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn secrets_need_both_halves_and_errors_never_show_them() {
        let auth = data(&[("username", "u"), ("password", "pa55word")]);
        let options = ClientOptions::from_secrets(Some(&auth), None).unwrap();
        assert_eq!(options.basic_auth, Some(("u".into(), "pa55word".into())));
        assert!(!format!("{options:?}").contains("pa55word"));

        let half = data(&[("password", "pa55word")]);
        let error = ClientOptions::from_secrets(Some(&half), None).unwrap_err();
        assert!(
            error.to_string().contains("'username' and 'password'"),
            "{error}"
        );
        assert!(!error.to_string().contains("pa55word"));

        let cert_only = data(&[("tls.crt", "-----BEGIN CERTIFICATE-----")]);
        let error = ClientOptions::from_secrets(None, Some(&cert_only)).unwrap_err();
        assert!(
            error.to_string().contains("'tls.crt' and 'tls.key'"),
            "{error}"
        );

        let bad_ca =
            ClientOptions::from_secrets(None, Some(&data(&[("ca.crt", "not pem")]))).unwrap();
        let error = Repository::new("https://charts.example.com", bad_ca).unwrap_err();
        assert!(error.is_authentication(), "{error}");
    }
}
