//! The error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong while packing, storing, serving, fetching, pushing or pulling
/// an artifact.
///
/// Messages are short, lower-case and name the path, entry, URL or reference involved, so they
/// can be copied into a condition message as they are.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A filesystem operation failed.
    #[error("cannot {action} {path}")]
    Io {
        /// What was being done (`read`, `create`, `rename`, ...).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The directory to archive does not exist or is not a directory.
    #[error("source path {path} is not a directory")]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },

    /// An ignore pattern could not be parsed.
    #[error("invalid ignore pattern {pattern:?} in {origin}")]
    IgnorePattern {
        /// The offending line.
        pattern: String,
        /// Where it came from (`spec.ignore`, a `.sourceignore` path, ...).
        origin: String,
        /// The underlying error.
        #[source]
        source: ignore::Error,
    },

    /// The archive is not a readable gzip-compressed tarball.
    #[error("invalid tarball: {detail}")]
    InvalidArchive {
        /// What was wrong.
        detail: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<std::io::Error>,
    },

    /// A tarball entry would be written outside the target directory, or is of a refused type.
    #[error("tar entry {entry:?}: {reason}")]
    UnsafeEntry {
        /// The entry name as stored in the tarball.
        entry: String,
        /// Why it was refused.
        reason: String,
    },

    /// A tarball exceeds one of the configured [`crate::artifact::Limits`].
    #[error("tar entry {entry:?}: {what} exceeds the limit of {limit}")]
    LimitExceeded {
        /// The entry being read when the limit was hit.
        entry: String,
        /// Which limit, with the value reached.
        what: String,
        /// The configured limit.
        limit: u64,
    },

    /// The extraction target exists and is not an empty directory.
    #[error("target directory {path} exists and is not empty")]
    TargetNotEmpty {
        /// The target directory.
        path: PathBuf,
    },

    /// A digest string is malformed or uses an unsupported algorithm.
    #[error("invalid digest {value:?}: {reason}")]
    InvalidDigest {
        /// The string given.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// Content does not match the digest it was announced with.
    #[error("digest mismatch for {subject}: expected {expected}, got {actual}")]
    DigestMismatch {
        /// What was verified (an URL, a layer, a manifest, a stored file).
        subject: String,
        /// The expected digest.
        expected: String,
        /// The digest of the content received.
        actual: String,
    },

    /// An artifact path is not of the form `<kind>/<namespace>/<name>/<file>`.
    #[error("invalid artifact path {path:?}: {reason}")]
    InvalidArtifactPath {
        /// The path given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// An HTTP request failed.
    #[error("cannot download {url}")]
    Http {
        /// The URL requested.
        url: String,
        /// The underlying error.
        #[source]
        source: reqwest::Error,
    },

    /// An HTTP server answered with an unexpected status.
    #[error("cannot download {url}: server answered {status}")]
    HttpStatus {
        /// The URL requested.
        url: String,
        /// The status received.
        status: u16,
    },

    /// An OCI reference could not be parsed.
    #[error("invalid OCI reference {reference:?}: {reason}")]
    InvalidReference {
        /// The reference given.
        reference: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A registry operation failed.
    #[error("cannot {operation} {reference}")]
    Registry {
        /// What was being done (`push layer to`, `pull manifest of`, ...).
        operation: &'static str,
        /// The reference involved.
        reference: String,
        /// The underlying error.
        #[source]
        source: Box<oci_client::errors::OciDistributionError>,
    },

    /// The registry client could not be built from the options (e.g. an unusable CA).
    #[error("cannot create the registry client")]
    RegistryClient(#[source] Box<oci_client::errors::OciDistributionError>),

    /// A manifest could not be used as a Flux artifact.
    #[error("unsupported manifest for {reference}: {reason}")]
    UnsupportedManifest {
        /// The reference pulled.
        reference: String,
        /// Why it cannot be used.
        #[source]
        reason: crate::oci::UnusableManifest,
    },

    /// No layer of the artifact matches the layer selector.
    #[error("no layer with media type {media_type:?} in {reference}")]
    LayerNotFound {
        /// The reference pulled.
        reference: String,
        /// The media type asked for.
        media_type: String,
    },

    /// Registry credentials are malformed.
    #[error("invalid registry credentials: {reason}")]
    InvalidCredentials {
        /// What is wrong with them.
        reason: String,
    },

    /// A CA certificate bundle could not be used.
    #[error("invalid CA certificate: {reason}")]
    InvalidCertificate {
        /// What is wrong with it.
        reason: String,
    },

    /// A Git operation failed (connection, ref listing, fetch, object access).
    #[error("cannot {operation} {url}: {cause}")]
    Git {
        /// What was being done (`list references of`, `fetch`, `check out`, ...).
        operation: &'static str,
        /// The repository URL (without credentials).
        url: String,
        /// The source and its causes down to the root one (connection refused, TLS, HTTP
        /// status, DNS, ssh host key), URLs without credentials: [`crate::redact::error_chain`].
        cause: String,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A registry answered more than Capstan reads (e.g. more tags than
    /// [`crate::oci::MAX_TAGS`]); it stopped as the answers arrived.
    #[error("cannot {operation} {reference}: {what} exceeds the limit of {limit}")]
    RegistryLimitExceeded {
        /// What was being done (`list the tags of`).
        operation: &'static str,
        /// The repository.
        reference: String,
        /// Which limit, with the value reached.
        what: String,
        /// The limit.
        limit: u64,
    },

    /// A Git fetch or checkout passed one of the [`crate::artifact::Limits`] (pack size, bytes
    /// inflated from it, file size, total size, entry count); it stopped as the bytes arrived.
    #[error("cannot {operation} {url}: {what} exceeds the limit of {limit}{}", entry_suffix(entry.as_deref()))]
    GitLimitExceeded {
        /// What was being done (`fetch`, `check out`).
        operation: &'static str,
        /// The repository URL (without credentials).
        url: String,
        /// The file being checked out, if any.
        entry: Option<String>,
        /// Which limit, with the value reached.
        what: String,
        /// The configured limit.
        limit: u64,
    },

    /// The requested Git reference does not exist on the remote.
    #[error("{reference} not found in {url}")]
    GitReferenceNotFound {
        /// The repository URL.
        url: String,
        /// The reference, as written in `spec.ref` (`branch main`, `tag v1.0.0`, ...).
        reference: String,
    },

    /// A `spec.ref` or Git URL cannot be used as written.
    #[error("invalid git reference: {reason}")]
    InvalidGitReference {
        /// What is wrong with it.
        reason: String,
    },

    /// The Git credentials cannot be used, or need a feature not supported yet.
    #[error("unsupported git authentication: {reason}")]
    UnsupportedGitAuth {
        /// What is wrong or missing.
        reason: String,
    },

    /// A GitRepository include path leaves the artifact (`..`, absolute).
    #[error("{field} {path:?} must be a relative path without '..'")]
    IllegalIncludePath {
        /// `fromPath` or `toPath`.
        field: &'static str,
        /// The path as written.
        path: String,
    },

    /// Copying an included artifact into a checkout failed.
    #[error("failed to copy '{name}' include from {from} to {to}")]
    IncludeCopy {
        /// The included GitRepository.
        name: String,
        /// `fromPath` (`.` for the artifact's root).
        from: String,
        /// `toPath`.
        to: String,
        /// What failed.
        #[source]
        source: Box<Error>,
    },

    /// The `fromPath` of an include is not in the included artifact.
    #[error("{} does not exist in the artifact", path.display())]
    IncludeNotInArtifact {
        /// The path inside the artifact.
        path: PathBuf,
    },

    /// An include would be written through a symbolic link of the checkout.
    #[error("{} is a symbolic link in the checkout", path.display())]
    IncludeThroughLink {
        /// The link, relative to the checkout (or the path reached).
        path: PathBuf,
    },

    /// A semver constraint could not be parsed.
    #[error(transparent)]
    Constraint(#[from] crate::semver_constraint::ConstraintError),

    /// A Bucket spec cannot be used as written (no retry helps).
    #[error("invalid bucket: {reason}")]
    InvalidBucket {
        /// What is wrong with it.
        reason: String,
    },

    /// Bucket credentials are missing fields or do not fit the provider.
    #[error("invalid bucket credentials: {reason}")]
    BucketCredentials {
        /// What is wrong with them.
        reason: String,
    },

    /// An object storage operation failed (authentication, missing bucket, network).
    #[error(
        "cannot {operation} bucket {bucket}: {}",
        crate::redact::urls(&source.to_string())
    )]
    Bucket {
        /// What was being done (`list objects of`, `download an object from`, ...).
        operation: &'static str,
        /// The bucket (or container) name.
        bucket: String,
        /// The underlying error.
        #[source]
        source: Box<object_store::Error>,
    },

    /// An object key would not stay inside the target directory.
    #[error("object key {key:?}: {reason}")]
    UnsafeObjectKey {
        /// The key as listed.
        key: String,
        /// Why it was refused.
        reason: String,
    },

    /// A bucket holds more than the [`crate::artifact::Limits`] allow (entry count, an object's
    /// size, the total size), or an object sent more bytes than its listing announced. Checked on
    /// the listing before any download, and again as the bytes arrive.
    #[error("bucket {bucket}: {what} exceeds the limit of {limit}{}", entry_suffix(key.as_deref()))]
    BucketLimitExceeded {
        /// The bucket name.
        bucket: String,
        /// The object, if one is at fault.
        key: Option<String>,
        /// Which limit, with the value reached.
        what: String,
        /// The limit.
        limit: u64,
    },

    /// A bucket operation did not finish in time.
    #[error("bucket {bucket}: timed out after {timeout:?}")]
    BucketTimeout {
        /// The bucket name.
        bucket: String,
        /// The limit.
        timeout: std::time::Duration,
    },

    /// A blocking task was cancelled or panicked.
    #[error("background task failed")]
    Task(#[source] tokio::task::JoinError),
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn entry_suffix(entry: Option<&str>) -> String {
    entry.map(|e| format!(" (at {e:?})")).unwrap_or_default()
}
