//! Registry connection options: credentials, plain HTTP, CA certificates.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;

use crate::error::{Error, Result};

/// A registry user name and password (or token used as password).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password; never printed by `Debug`.
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl FromStr for Credentials {
    type Err = Error;

    /// Parses `user:password`, as `flux push artifact --creds`.
    fn from_str(value: &str) -> Result<Self> {
        let (username, password) =
            value
                .split_once(':')
                .ok_or_else(|| Error::InvalidCredentials {
                    reason: "expected <username>:<password>".to_owned(),
                })?;
        if username.is_empty() {
            return Err(Error::InvalidCredentials {
                reason: "the user name is empty".to_owned(),
            });
        }
        Ok(Self {
            username: username.to_owned(),
            password: password.to_owned(),
        })
    }
}

impl Credentials {
    /// The credentials for `registry` (`host[:port]`) in a docker config JSON document (the
    /// `.dockerconfigjson` key of a `kubernetes.io/dockerconfigjson` Secret), or `None` when it
    /// has no entry for that registry. Entries may be keyed by `host`, `https://host` or
    /// `https://host/v1/`, and carry `auth` (base64 of `user:password`) or `username` and
    /// `password`.
    pub fn from_docker_config(config_json: &[u8], registry: &str) -> Result<Option<Self>> {
        #[derive(serde::Deserialize)]
        struct DockerConfig {
            #[serde(default)]
            auths: std::collections::BTreeMap<String, Entry>,
        }
        #[derive(serde::Deserialize)]
        struct Entry {
            #[serde(default)]
            auth: Option<String>,
            #[serde(default)]
            username: Option<String>,
            #[serde(default)]
            password: Option<String>,
        }
        let invalid = |reason: String| Error::InvalidCredentials { reason };
        let config: DockerConfig = serde_json::from_slice(config_json)
            .map_err(|e| invalid(format!("docker config is not valid JSON: {e}")))?;
        let wanted = normalise_registry(registry);
        let Some((key, entry)) = config
            .auths
            .iter()
            .find(|(key, _)| normalise_registry(key) == wanted)
        else {
            return Ok(None);
        };
        if let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .map_err(|_| invalid(format!("auth of {key:?} is not base64")))?;
            let decoded = String::from_utf8(decoded)
                .map_err(|_| invalid(format!("auth of {key:?} is not UTF-8")))?;
            return decoded
                .parse()
                .map(Some)
                .map_err(|_| invalid(format!("auth of {key:?} is not user:password")));
        }
        match (&entry.username, &entry.password) {
            (Some(username), Some(password)) if !username.is_empty() => Ok(Some(Self {
                username: username.clone(),
                password: password.clone(),
            })),
            _ => Err(invalid(format!(
                "entry {key:?} has neither auth nor username and password"
            ))),
        }
    }
}

/// `https://host/v1/` → `host`; Docker Hub aliases → `docker.io`.
fn normalise_registry(key: &str) -> String {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = key.split('/').next().unwrap_or(key).to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_owned(),
        _ => host,
    }
}

/// How to connect to a registry.
#[derive(Clone, Debug, Default)]
pub struct RegistryOptions {
    /// Basic credentials; anonymous when `None`.
    pub credentials: Option<Credentials>,
    /// Use plain HTTP instead of HTTPS (OCIRepository `spec.insecure`, `--insecure`).
    pub insecure: bool,
    /// Extra trusted CA certificates, PEM (OCIRepository `spec.certSecretRef` `ca.crt`).
    pub ca_certificates: Vec<Vec<u8>>,
    /// Accept any server certificate (`helm push --insecure-skip-tls-verify`); HTTPS still.
    pub insecure_skip_tls_verify: bool,
}

impl RegistryOptions {
    pub(crate) fn client(&self) -> Result<oci_client::Client> {
        crate::tls::install_default_provider();
        for pem in &self.ca_certificates {
            if !String::from_utf8_lossy(pem).contains("-----BEGIN CERTIFICATE-----") {
                return Err(Error::InvalidCertificate {
                    reason: "expected a PEM certificate".to_owned(),
                });
            }
        }
        let config = ClientConfig {
            protocol: if self.insecure {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            extra_root_certificates: self
                .ca_certificates
                .iter()
                .map(|pem| Certificate {
                    encoding: CertificateEncoding::Pem,
                    data: pem.clone(),
                })
                .collect(),
            accept_invalid_certificates: self.insecure_skip_tls_verify,
            user_agent: concat!("capstan/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        };
        // `Client::new` would silently fall back to a default (HTTPS, no extra CA) client.
        oci_client::Client::try_from(config).map_err(|e| Error::RegistryClient(Box::new(e)))
    }

    /// A plain HTTP client for the requests made beside oci-client (bounded manifest reads):
    /// the same extra CA certificates and user agent.
    pub(crate) fn http_client(&self) -> Result<reqwest::Client> {
        crate::tls::install_default_provider();
        let mut certificates = Vec::new();
        for pem in &self.ca_certificates {
            certificates.extend(reqwest::Certificate::from_pem_bundle(pem).map_err(|e| {
                Error::InvalidCertificate {
                    reason: e.to_string(),
                }
            })?);
        }
        let mut builder =
            reqwest::Client::builder().user_agent(concat!("capstan/", env!("CARGO_PKG_VERSION")));
        if !certificates.is_empty() {
            builder = builder.tls_certs_merge(certificates);
        }
        if self.insecure_skip_tls_verify {
            builder = builder.tls_danger_accept_invalid_certs(true);
        }
        builder
            .build()
            .map_err(|e| Error::RegistryClient(Box::new(e.into())))
    }

    /// `http` for plain-HTTP registries, `https` otherwise.
    pub(crate) fn scheme(&self) -> &'static str {
        if self.insecure { "http" } else { "https" }
    }

    pub(crate) fn auth(&self) -> RegistryAuth {
        match &self.credentials {
            Some(credentials) => {
                RegistryAuth::Basic(credentials.username.clone(), credentials.password.clone())
            }
            None => RegistryAuth::Anonymous,
        }
    }
}
