//! A Provider's settings resolved from its spec and Secrets, as notification-controller's
//! `createNotifier` / `extractAuthFromSecret` read them (internal/server/event_handlers.go).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use capstan_api::notification::v1beta3::{Provider, ProviderType};

use crate::commit_status::StatusExpr;
use crate::secret::Secret;

/// The decoded `data` of a Kubernetes Secret.
pub type SecretData = BTreeMap<String, Vec<u8>>;

/// The Secrets a Provider references, fetched by the caller from the Provider's namespace.
/// A reference whose Secret is absent here is an error naming the field.
#[derive(Clone, Default)]
pub struct ProviderSecrets {
    /// `spec.secretRef`: `address`, `token`, `username`/`password`, `headers`, `proxy`
    /// (deprecated), and for commit-status providers also TLS keys.
    pub secret: Option<SecretData>,
    /// `spec.certSecretRef`: `ca.crt`, `tls.crt`, `tls.key` (or legacy `caFile`, `certFile`,
    /// `keyFile`).
    pub cert_secret: Option<SecretData>,
    /// `spec.proxySecretRef`: `address`, optional `username`/`password`.
    pub proxy_secret: Option<SecretData>,
}

impl fmt::Debug for ProviderSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = |data: &Option<SecretData>| {
            data.as_ref().map(|d| d.keys().cloned().collect::<Vec<_>>())
        };
        f.debug_struct("ProviderSecrets")
            .field("secret_keys", &keys(&self.secret))
            .field("cert_secret_keys", &keys(&self.cert_secret))
            .field("proxy_secret_keys", &keys(&self.proxy_secret))
            .finish()
    }
}

/// A Provider that cannot be used: names the Provider and the field at fault. Never holds a
/// secret value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("provider {provider}: {field}: {reason}")]
pub struct SettingsError {
    /// `namespace/name` of the Provider.
    pub provider: String,
    /// The field or Secret key at fault (`spec.address`, `secretRef token`, …).
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

/// TLS material for the connection to the provider.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM CA bundle trusted instead of the system roots' absence (added to them).
    pub ca_pem: Option<Vec<u8>>,
    /// PEM client certificate and key (both or neither).
    pub client_cert_pem: Option<Vec<u8>>,
    /// PEM client key.
    pub client_key_pem: Option<Vec<u8>>,
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSettings")
            .field("ca", &self.ca_pem.is_some())
            .field("client_cert", &self.client_cert_pem.is_some())
            .field(
                "client_key",
                &self
                    .client_key_pem
                    .as_ref()
                    .map(|_| crate::secret::REDACTED),
            )
            .finish()
    }
}

/// Everything a provider's request builder and the sender need, resolved and validated.
#[derive(Clone)]
pub struct ProviderSettings {
    /// `namespace/name`.
    pub provider: String,
    /// `metadata.uid` (part of the default commit status key and of Opsgenie's alias).
    pub uid: String,
    /// `spec.type`.
    pub type_: ProviderType,
    /// The address: `spec.address`, or the Secret's `address` (then secret).
    pub address: Option<Secret>,
    /// Whether [`Self::address`] came from the Secret (and so is redacted in requests).
    pub address_is_secret: bool,
    /// `spec.channel`.
    pub channel: Option<String>,
    /// `spec.username`, replaced by the Secret's `username` when it has `username` and `password`.
    pub username: Option<String>,
    /// The Secret's `password`.
    pub password: Option<Secret>,
    /// The Secret's `token` (surrounding whitespace trimmed).
    pub token: Option<Secret>,
    /// The Secret's `headers` (a YAML map), sent by generic and generic-hmac.
    pub headers: BTreeMap<String, Secret>,
    /// `spec.timeout` (15 s by default).
    pub timeout: Duration,
    /// The proxy URL (with credentials): `spec.proxy`, the Secret's `proxy`, or `proxySecretRef`.
    pub proxy: Option<Secret>,
    /// TLS from `certSecretRef` (or, for commit-status providers, from `secretRef`).
    pub tls: TlsSettings,
    /// The compiled `spec.commitStatusExpr`.
    pub commit_status_expr: Option<StatusExpr>,
    /// The Provider object as JSON (the `provider` variable of `commitStatusExpr`).
    pub provider_object: serde_json::Value,
}

impl fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown_address = self.address.as_ref().map(|a| {
            if self.address_is_secret {
                crate::secret::redact_url(a.expose())
            } else {
                a.expose().to_owned()
            }
        });
        f.debug_struct("ProviderSettings")
            .field("provider", &self.provider)
            .field("type", &self.type_)
            .field("address", &shown_address)
            .field("channel", &self.channel)
            .field("username", &self.username)
            .field("password", &self.password)
            .field("token", &self.token)
            .field("headers", &self.headers)
            .field("timeout", &self.timeout)
            .field("proxy", &self.proxy)
            .field("tls", &self.tls)
            .field("commit_status_expr", &self.commit_status_expr)
            .finish_non_exhaustive()
    }
}

/// The provider types this crate builds requests for.
pub const SUPPORTED: &[ProviderType] = &[
    ProviderType::Slack,
    ProviderType::Discord,
    ProviderType::Msteams,
    ProviderType::Rocket,
    ProviderType::Googlechat,
    ProviderType::Webex,
    ProviderType::Telegram,
    ProviderType::Lark,
    ProviderType::Matrix,
    ProviderType::Opsgenie,
    ProviderType::Pagerduty,
    ProviderType::Alertmanager,
    ProviderType::Grafana,
    ProviderType::Datadog,
    ProviderType::Sentry,
    ProviderType::Generic,
    ProviderType::GenericHmac,
    ProviderType::Githubdispatch,
    ProviderType::Github,
    ProviderType::Gitlab,
    ProviderType::Gitea,
    ProviderType::Bitbucket,
    ProviderType::Bitbucketserver,
    ProviderType::Azuredevops,
];

/// The name Flux gives a provider type in `spec.type`.
pub fn type_name(type_: ProviderType) -> String {
    serde_json::to_value(type_)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

struct Resolver<'a> {
    provider: String,
    secret: Option<&'a SecretData>,
}

impl Resolver<'_> {
    fn error(&self, field: &str, reason: impl Into<String>) -> SettingsError {
        SettingsError {
            provider: self.provider.clone(),
            field: field.to_owned(),
            reason: reason.into(),
        }
    }

    fn secret_text(&self, key: &str) -> Result<Option<String>, SettingsError> {
        let Some(value) = self.secret.and_then(|s| s.get(key)) else {
            return Ok(None);
        };
        String::from_utf8(value.clone())
            .map(Some)
            .map_err(|_| self.error(&format!("secretRef key '{key}'"), "is not UTF-8"))
    }
}

fn text(data: &SecretData, key: &str) -> Option<String> {
    data.get(key)
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

impl ProviderSettings {
    /// Resolves and validates a Provider with its Secrets.
    ///
    /// Checks what Flux's notifier constructors check (an address that is a URL, a token where
    /// one is required, a repository address a commit-status provider understands, …) and, beyond
    /// Flux, rejects half-given basic auth and unsupported types instead of ignoring them.
    // The fields in the order Flux reads them; splitting would scatter that order.
    #[allow(clippy::too_many_lines)]
    pub fn resolve(provider: &Provider, secrets: &ProviderSecrets) -> Result<Self, SettingsError> {
        let namespace = provider.metadata.namespace.clone().unwrap_or_default();
        let name = provider.metadata.name.clone().unwrap_or_default();
        let resolver = Resolver {
            provider: format!("{namespace}/{name}"),
            secret: secrets.secret.as_ref(),
        };
        let spec = &provider.spec;
        let type_ = spec.type_;
        if !SUPPORTED.contains(&type_) {
            return Err(resolver.error(
                "spec.type",
                format!("'{}' is not supported by Capstan yet", type_name(type_)),
            ));
        }
        let missing_secret = |field: &str, reference: &str| {
            resolver.error(field, format!("secret '{namespace}/{reference}' not found"))
        };
        if let Some(reference) = &spec.secret_ref
            && secrets.secret.is_none()
        {
            return Err(missing_secret("spec.secretRef", &reference.name));
        }
        if let Some(reference) = &spec.cert_secret_ref
            && secrets.cert_secret.is_none()
        {
            return Err(missing_secret("spec.certSecretRef", &reference.name));
        }
        if let Some(reference) = &spec.proxy_secret_ref
            && secrets.proxy_secret.is_none()
        {
            return Err(missing_secret("spec.proxySecretRef", &reference.name));
        }
        let timeout = provider
            .timeout()
            .map_err(|e| resolver.error("spec.timeout", e.to_string()))?;

        // Address: spec, replaced by the Secret's (trimmed) `address`.
        let mut address = spec
            .address
            .clone()
            .filter(|a| !a.is_empty())
            .map(Secret::new);
        let mut address_is_secret = false;
        if let Some(value) = resolver.secret_text("address")? {
            if value.len() > 2048 {
                return Err(resolver.error(
                    "secretRef key 'address'",
                    "exceeds the maximum length of 2048 bytes",
                ));
            }
            address = Some(Secret::new(value.trim()));
            address_is_secret = true;
        }

        // Username/password: both or neither (Flux silently drops all Secret auth otherwise).
        let mut username = spec.username.clone().filter(|u| !u.is_empty());
        let mut password = None;
        match (
            resolver.secret_text("username")?,
            resolver.secret_text("password")?,
        ) {
            (Some(user), Some(pass)) => {
                username = Some(user);
                password = Some(Secret::new(pass));
            }
            (Some(_), None) => {
                return Err(resolver.error("secretRef", "has key 'username' without 'password'"));
            }
            (None, Some(_)) => {
                return Err(resolver.error("secretRef", "has key 'password' without 'username'"));
            }
            (None, None) => {}
        }
        let token = resolver
            .secret_text("token")?
            .map(|t| t.trim().to_owned())
            .map(Secret::new);

        let mut headers = BTreeMap::new();
        if let Some(yaml) = resolver.secret_text("headers")? {
            let parsed: BTreeMap<String, String> = serde_saphyr::from_str(&yaml).map_err(|_| {
                resolver.error(
                    "secretRef key 'headers'",
                    "is not a YAML map of header names to string values",
                )
            })?;
            for (key, value) in parsed {
                if reqwest::header::HeaderName::from_bytes(key.as_bytes()).is_err()
                    || reqwest::header::HeaderValue::from_str(&value).is_err()
                {
                    return Err(resolver.error(
                        "secretRef key 'headers'",
                        format!("header '{key}' is not a valid HTTP header"),
                    ));
                }
                headers.insert(key, Secret::new(value));
            }
        }

        // Proxy: deprecated spec.proxy, the Secret's deprecated `proxy`, then proxySecretRef.
        let mut proxy = spec
            .proxy
            .clone()
            .filter(|p| !p.is_empty())
            .map(Secret::new);
        if let Some(value) = resolver.secret_text("proxy")? {
            proxy = Some(Secret::new(value.trim()));
        }
        if let Some(data) = &secrets.proxy_secret {
            proxy = Some(proxy_from_secret(&resolver, data)?);
        }
        if let Some(p) = &proxy {
            match reqwest::Url::parse(p.expose()) {
                Ok(url) if ["http", "https", "socks5"].contains(&url.scheme()) => {}
                _ => {
                    return Err(resolver.error("proxy", "is not an http, https or socks5 URL"));
                }
            }
        }

        let tls_source = secrets.cert_secret.as_ref().or_else(|| {
            secrets
                .secret
                .as_ref()
                .filter(|s| type_.is_commit_status() && has_tls(s))
        });
        let tls = match tls_source {
            Some(data) => tls_from_secret(&resolver, data)?,
            None => TlsSettings::default(),
        };

        let commit_status_expr = match spec.commit_status_expr.as_deref() {
            Some(source) if !source.trim().is_empty() => {
                if !type_.is_commit_status() {
                    return Err(resolver.error(
                        "spec.commitStatusExpr",
                        "is only supported by the github, gitlab, gitea, bitbucketserver, bitbucket and azuredevops types",
                    ));
                }
                Some(
                    StatusExpr::compile(source)
                        .map_err(|e| resolver.error("spec.commitStatusExpr", e))?,
                )
            }
            _ => None,
        };

        let settings = ProviderSettings {
            provider: resolver.provider.clone(),
            uid: provider.metadata.uid.clone().unwrap_or_default(),
            type_,
            address,
            address_is_secret,
            channel: spec.channel.clone().filter(|c| !c.is_empty()),
            username,
            password,
            token,
            headers,
            timeout,
            proxy,
            tls,
            commit_status_expr,
            provider_object: serde_json::to_value(provider).unwrap_or_default(),
        };
        crate::providers::validate(&settings)
            .map_err(|(field, reason)| resolver.error(field, reason))?;
        Ok(settings)
    }

    /// The token, or the password when there is no token (Flux's fallback for the Git
    /// providers).
    pub(crate) fn token_or_password(&self) -> Option<&Secret> {
        self.token.as_ref().or(self.password.as_ref())
    }
}

fn has_tls(data: &SecretData) -> bool {
    [
        "ca.crt", "tls.crt", "tls.key", "caFile", "certFile", "keyFile",
    ]
    .iter()
    .any(|k| data.contains_key(*k))
}

fn tls_from_secret(
    resolver: &Resolver<'_>,
    data: &SecretData,
) -> Result<TlsSettings, SettingsError> {
    let pick = |key: &str, legacy: &str| data.get(key).or_else(|| data.get(legacy)).cloned();
    let tls = TlsSettings {
        ca_pem: pick("ca.crt", "caFile"),
        client_cert_pem: pick("tls.crt", "certFile"),
        client_key_pem: pick("tls.key", "keyFile"),
    };
    match (&tls.client_cert_pem, &tls.client_key_pem) {
        (Some(_), None) => Err(resolver.error("certSecretRef", "has 'tls.crt' without 'tls.key'")),
        (None, Some(_)) => Err(resolver.error("certSecretRef", "has 'tls.key' without 'tls.crt'")),
        _ => Ok(tls),
    }
}

fn proxy_from_secret(resolver: &Resolver<'_>, data: &SecretData) -> Result<Secret, SettingsError> {
    let field = "proxySecretRef";
    let address =
        text(data, "address").ok_or_else(|| resolver.error(field, "key 'address' not found"))?;
    if address.is_empty() {
        return Err(resolver.error(field, "proxy address is empty"));
    }
    let mut url = reqwest::Url::parse(&address)
        .map_err(|e| resolver.error(field, format!("address is not a URL: {e}")))?;
    if !["http", "https", "socks5"].contains(&url.scheme()) {
        return Err(resolver.error(
            field,
            format!(
                "proxy URL must use one of the supported schemes (http, https, socks5), got '{}'",
                url.scheme()
            ),
        ));
    }
    if let Some(user) = text(data, "username") {
        let _ = url.set_username(&user);
        if let Some(pass) = text(data, "password") {
            let _ = url.set_password(Some(&pass));
        }
    }
    Ok(Secret::new(url.to_string()))
}
