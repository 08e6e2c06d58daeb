//! Helm chart sources: chart repository indexes, chart downloads and `helm dependency build`.
//!
//! - [`index`]: a repository's `index.yaml` read as Helm reads it (JSON or YAML, entries
//!   without a name or a SemVer version dropped, versions sorted newest first), the version a
//!   Masterminds constraint selects as Flux selects it, and chart URLs resolved against the
//!   repository URL.
//! - [`repository`]: an HTTP/S chart repository — `index.yaml` and chart downloads with basic
//!   auth, a CA and a client certificate, credentials sent to other hosts only with
//!   `passCredentials`, a timeout, size limits and the index's digest checked.
//! - [`dependencies`]: `helm dependency build` for a chart directory inside a source tree —
//!   `file://` dependencies packaged from the tree (never from outside it), repository
//!   dependencies downloaded by version constraint, written into `charts/`.
//! - [`build`]: what a HelmChart produces: the chart packaged with its dependencies, values
//!   files merged into `values.yaml` and Flux's version metadata.
//!
//! # Expected flow
//! A HelmRepository reconciler calls [`repository::Repository::fetch_index`] and stores the
//! index. A HelmChart reconciler parses the stored index ([`index::Index::parse`]), selects a
//! version ([`index::Index::select`]) and downloads it
//! ([`repository::Repository::download_chart`]); for a chart in a Git or Bucket artifact it
//! calls [`build::build_local`].
//!
//! # Guarantees
//! Secrets never appear in errors (URLs are redacted); every download is bounded; an index that
//! does not parse is an error, never an empty repository.
//!
//! # Errors
//! One [`Error`] type whose messages name the URL, chart or file involved.

pub mod build;
pub mod dependencies;
pub mod index;
pub mod oci;
pub mod repository;

/// Helm's limit on an `index.yaml` (Flux's `MaxIndexSize`): 50 MiB.
pub const MAX_INDEX_SIZE: u64 = 50 << 20;
/// Helm's limit on a chart archive (Flux's `MaxChartSize`): 10 MiB.
pub const MAX_CHART_SIZE: u64 = 10 << 20;

/// A Helm source failure; messages are lower-case and name the URL, chart or file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The repository URL or a chart URL is not usable.
    #[error("invalid Helm repository URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL (without credentials).
        url: String,
        /// Why.
        reason: String,
    },
    /// The credentials or TLS material of a Secret are not usable.
    #[error("invalid {what}: {reason}")]
    InvalidCredentials {
        /// Which material (`basic auth credentials`, `TLS client certificate`, …).
        what: &'static str,
        /// Why (never the secret itself).
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot create the HTTP client")]
    Client(#[source] reqwest::Error),
    /// A transport failure.
    #[error("cannot download {url}")]
    Http {
        /// The URL (without credentials).
        url: String,
        /// The cause.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with an error status.
    #[error("cannot download {url}: server answered {status}")]
    HttpStatus {
        /// The URL (without credentials).
        url: String,
        /// The status code.
        status: u16,
    },
    /// A download exceeds its size limit.
    #[error("{what} {url} exceeds the maximum size of {limit} bytes")]
    TooLarge {
        /// `index` or `chart`.
        what: &'static str,
        /// The URL (without credentials).
        url: String,
        /// The limit.
        limit: u64,
    },
    /// The index does not parse, or is not an index.
    #[error("invalid Helm repository index{}: {reason}", origin.as_deref().map(|o| format!(" {o}")).unwrap_or_default())]
    InvalidIndex {
        /// Where the index came from, when known.
        origin: Option<String>,
        /// Why.
        reason: String,
    },
    /// The index has no entry of that name.
    #[error("no chart name found: '{name}' is not in the repository index")]
    NoChartName {
        /// The chart name.
        name: String,
    },
    /// No version of the chart satisfies the constraint.
    #[error("no '{name}' chart with version matching '{version}' found")]
    NoChartVersion {
        /// The chart name.
        name: String,
        /// The constraint.
        version: String,
    },
    /// The version constraint does not parse.
    #[error(transparent)]
    Constraint(#[from] capstan_semver::ConstraintError),
    /// A downloaded chart does not match the digest the index gives.
    #[error(
        "digest mismatch for chart {url}: the index gives {expected}, the download is {actual}"
    )]
    DigestMismatch {
        /// The chart URL (without credentials).
        url: String,
        /// From the index.
        expected: String,
        /// Of the download.
        actual: String,
    },
    /// A chart (or a dependency) could not be loaded, merged or packaged.
    #[error("{context}: {reason}")]
    Chart {
        /// What was being done (`cannot load chart at 'charts/app'`).
        context: String,
        /// Helm's words.
        reason: String,
    },
    /// A path leaves the source tree.
    #[error("{what} {path:?} is outside the source")]
    OutsideSource {
        /// What the path names (`chart path`, `file:// dependency`, `values file`).
        what: &'static str,
        /// The path as written.
        path: String,
    },
    /// A file operation failed.
    #[error("cannot {action} {path}")]
    Io {
        /// The action.
        action: &'static str,
        /// The path.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A blocking task failed.
    #[error("background task failed")]
    Task(#[source] tokio::task::JoinError),
}

impl Error {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<std::path::PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// A chart failure: `context: reason`.
    pub fn chart(context: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        Error::Chart {
            context: context.into(),
            reason: reason.to_string(),
        }
    }

    /// Whether the failure is an authentication refusal (401/403) or a TLS failure, which Flux
    /// reports with the reason `AuthenticationFailed`.
    pub fn is_authentication(&self) -> bool {
        match self {
            Error::HttpStatus { status, .. } => *status == 401 || *status == 403,
            Error::InvalidCredentials { .. } => true,
            Error::Http { source, .. } => {
                let chain = crate::redact::error_chain(source).to_lowercase();
                chain.contains("certificate") || chain.contains("tls")
            }
            _ => false,
        }
    }
}

/// Results of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;
