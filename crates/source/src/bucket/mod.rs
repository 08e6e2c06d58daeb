//! Fetch a Flux `Bucket` (source.toolkit.fluxcd.io/v1) into a directory: S3-compatible
//! (`generic`, `aws`) and Azure Blob (`azure`) providers, through `object_store`.
//!
//! # Expected flow
//! The reconciler reads `spec.secretRef` into [`Credentials::from_secret`], calls
//! [`remote_revision`] and compares it with `status.artifact.revision`; when they differ (or
//! there is no artifact yet) it calls [`fetch`] into a fresh directory and archives that
//! directory with [`crate::storage::Storage::archive`] under [`FetchResult::revision`].
//!
//! # Guarantees
//! - The revision is Flux's: `sha256:` over the sorted `<key> <etag>\n` lines of the objects
//!   kept (see [`index_digest`]), so an unchanged bucket keeps its revision, and a bucket
//!   Flux indexed has the same revision here.
//! - Objects are filtered as Flux does: `.sourceignore` at the bucket root, then
//!   `spec.ignore` (which wins); the `.sourceignore` object itself and directory markers are
//!   left out of the index. The root `.sourceignore` is written into the target directory, as
//!   Flux does.
//!   One deviation: for Azure, Flux's post-download index takes the download's raw (quoted,
//!   not hex-encoded) ETag, so its artifact revision never equals its own listing digest and it
//!   re-downloads every interval; here download and listing ETags are spelt alike, so the
//!   revision is Flux's listing digest and [`remote_revision`] equals [`fetch`]'s revision.
//! - `spec.prefix` filters keys server-side for S3 providers (listing below its last `/`, then
//!   matching the raw prefix as S3 does). As in Flux, Azure ignores it.
//! - Every object lands at its key below the target directory; a key that is absolute or has
//!   `.`/`..`/empty segments is refused before anything is written for it.
//! - Downloads run concurrently, at most [`FetchOptions::concurrency`] at once.
//!
//! ```no_run
//! # async fn example(spec: capstan_api::source::v1::BucketSpec,
//! #     secret: std::collections::BTreeMap<String, Vec<u8>>) -> capstan_source::Result<()> {
//! use capstan_source::bucket::{self, Credentials, FetchOptions};
//!
//! let credentials = Credentials::from_secret(spec.provider.unwrap_or_default(), &secret)?;
//! let options = FetchOptions::default();
//! let revision = bucket::remote_revision(&spec, &credentials, &options).await?;
//! let stored: Option<&str> = None; // status.artifact.revision
//! if stored != Some(revision.as_str()) {
//!     let fetched = bucket::fetch(&spec, &credentials, "/tmp/bucket".as_ref(), &options).await?;
//!     assert_eq!(fetched.revision, revision);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Errors
//! [`crate::Error::InvalidBucket`] and [`crate::Error::BucketCredentials`] for specs and
//! secrets that cannot work (no retry helps), [`crate::Error::Bucket`] for provider failures
//! (authentication, missing bucket, network), [`crate::Error::UnsafeObjectKey`] for keys that
//! would escape the target, [`crate::Error::BucketTimeout`] when [`FetchOptions::timeout`]
//! passes.

mod bounded;
mod index;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use capstan_api::source::v1::{BucketSpec, CloudProvider};
use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, RetryConfig};
use tokio::io::AsyncWriteExt;

use crate::artifact::{IGNORE_FILE, IgnoreFilter, Limits};
use crate::error::{Error, Result};
pub use bounded::{MAX_ERROR_BODY_BYTES, MAX_LISTING_PAGE_BYTES};

pub use index::{ObjectIndex, index_digest};

/// The region used for S3 requests when `spec.region` is empty (as minio-go does).
pub const DEFAULT_REGION: &str = "us-east-1";

/// Default for [`FetchOptions::concurrency`].
pub const DEFAULT_CONCURRENCY: usize = 20;

/// Bucket credentials, read from the `spec.secretRef` Secret.
#[derive(Clone, Default)]
pub enum Credentials {
    /// Anonymous access (no `secretRef`).
    #[default]
    Anonymous,
    /// S3 access key pair (`accesskey` / `secretkey`).
    S3 {
        /// The access key id.
        access_key: String,
        /// The secret access key.
        secret_key: String,
    },
    /// Azure storage account shared key (`accountKey`).
    AzureAccountKey(String),
    /// Azure shared access signature (`sasKey`), the query string with or without `?`.
    AzureSas(String),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print secrets.
        let kind = match self {
            Self::Anonymous => "Anonymous",
            Self::S3 { .. } => "S3",
            Self::AzureAccountKey(_) => "AzureAccountKey",
            Self::AzureSas(_) => "AzureSas",
        };
        f.debug_tuple("Credentials").field(&kind).finish()
    }
}

impl Credentials {
    /// Reads the fields Flux reads for `provider` from a Secret's `data`.
    ///
    /// `generic`/`aws`: `accesskey` and `secretkey` (both required). `azure`: `accountKey`,
    /// else `sasKey`. Azure identity fields (`clientId`, `tenantId`, ...) are not supported yet
    /// and are refused with a message saying so.
    pub fn from_secret(provider: CloudProvider, data: &BTreeMap<String, Vec<u8>>) -> Result<Self> {
        let field = |name: &str| -> Result<Option<String>> {
            data.get(name)
                .map(|value| {
                    String::from_utf8(value.clone())
                        .map(|text| text.trim().to_owned())
                        .map_err(|_| Error::BucketCredentials {
                            reason: format!("secret field {name:?} is not UTF-8"),
                        })
                })
                .transpose()
        };
        match provider {
            CloudProvider::Generic | CloudProvider::Aws => {
                match (field("accesskey")?, field("secretkey")?) {
                    (Some(access_key), Some(secret_key)) => Ok(Self::S3 {
                        access_key,
                        secret_key,
                    }),
                    _ => Err(Error::BucketCredentials {
                        reason: "secret needs both 'accesskey' and 'secretkey'".to_owned(),
                    }),
                }
            }
            CloudProvider::Azure => {
                if let Some(key) = field("accountKey")? {
                    Ok(Self::AzureAccountKey(key))
                } else if let Some(sas) = field("sasKey")? {
                    Ok(Self::AzureSas(sas))
                } else if data.contains_key("clientId") || data.contains_key("tenantId") {
                    Err(Error::BucketCredentials {
                        reason: "azure identity credentials (clientId/tenantId) are not supported \
                                 yet; use 'accountKey' or 'sasKey'"
                            .to_owned(),
                    })
                } else {
                    Err(Error::BucketCredentials {
                        reason: "secret needs 'accountKey' or 'sasKey'".to_owned(),
                    })
                }
            }
            CloudProvider::Gcp => Err(Error::BucketCredentials {
                reason: "the gcp provider is not supported yet".to_owned(),
            }),
        }
    }
}

/// Options of [`fetch`] and [`remote_revision`].
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// Most downloads in flight at once (at least 1).
    pub concurrency: usize,
    /// Deadline for the whole operation (`spec.timeout`); none when `None`.
    pub timeout: Option<Duration>,
    /// What the bucket may make a fetch write: the listing is checked against the entry, file
    /// and total limits before any download, every download stops at the size its listing
    /// announced, and the root `.sourceignore` is read up to [`MAX_IGNORE_FILE_BYTES`]. Pass the
    /// limits the artifact will be packed with.
    pub limits: Limits,
}

/// The largest root `.sourceignore` read from a bucket.
pub const MAX_IGNORE_FILE_BYTES: u64 = 1 << 20;

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            concurrency: DEFAULT_CONCURRENCY,
            timeout: Some(Duration::from_secs(60)),
            limits: Limits::default(),
        }
    }
}

/// What [`fetch`] downloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResult {
    /// The Flux revision, `sha256:<hex>` of [`FetchResult::index`].
    pub revision: String,
    /// Every object written, key → entity tag.
    pub index: ObjectIndex,
}

/// Lists the bucket and returns its Flux revision without downloading objects (except the
/// small root `.sourceignore`, whose rules decide which objects count).
pub async fn remote_revision(
    spec: &BucketSpec,
    credentials: &Credentials,
    options: &FetchOptions,
) -> Result<String> {
    with_timeout(spec, options, async {
        let bucket = Bucket::connect(spec, credentials)?;
        let (index, _, _) = bucket.index(spec, &options.limits).await?;
        Ok(index_digest(&index))
    })
    .await
}

/// Downloads the objects of the bucket `spec` names into `dest_dir` (which must not exist or
/// be empty) and returns the revision and index of what was written.
pub async fn fetch(
    spec: &BucketSpec,
    credentials: &Credentials,
    dest_dir: &Path,
    options: &FetchOptions,
) -> Result<FetchResult> {
    with_timeout(spec, options, async {
        prepare_target(dest_dir)?;
        let bucket = Bucket::connect(spec, credentials)?;
        let (mut index, ignore_file, sizes) = bucket.index(spec, &options.limits).await?;
        if let Some(text) = ignore_file {
            let path = dest_dir.join(IGNORE_FILE);
            tokio::fs::write(&path, text)
                .await
                .map_err(|e| Error::io("write", path, e))?;
        }
        let downloads = index.keys().cloned().map(|key| {
            let bucket = &bucket;
            let size = sizes.get(&key).copied().unwrap_or(0);
            async move {
                let etag = bucket.download(&key, size, dest_dir).await?;
                Ok::<_, Error>((key, etag))
            }
        });
        let fetched: Vec<(String, Option<String>)> = futures::stream::iter(downloads)
            .buffer_unordered(options.concurrency.max(1))
            .try_collect()
            .await?;
        // As Flux: the entity tag seen on download wins over the listed one.
        for (key, etag) in fetched {
            if let Some(etag) = etag {
                index.insert(key, etag);
            }
        }
        Ok(FetchResult {
            revision: index_digest(&index),
            index,
        })
    })
    .await
}

async fn with_timeout<T>(
    spec: &BucketSpec,
    options: &FetchOptions,
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    crate::tls::install_default_provider();
    match options.timeout {
        None => work.await,
        Some(limit) => {
            tokio::time::timeout(limit, work)
                .await
                .map_err(|_| Error::BucketTimeout {
                    bucket: spec.bucket_name.clone(),
                    timeout: limit,
                })?
        }
    }
}

fn prepare_target(dest_dir: &Path) -> Result<()> {
    match std::fs::read_dir(dest_dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::TargetNotEmpty {
                    path: dest_dir.to_owned(),
                });
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dest_dir)
            .map_err(|e| Error::io("create directory", dest_dir, e)),
        Err(e) => Err(Error::io("read directory", dest_dir, e)),
    }
}

/// How a provider spells entity tags in Flux's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavour {
    S3,
    Azure,
}

impl Flavour {
    fn etag(self, raw: Option<&str>) -> String {
        let raw = raw.unwrap_or_default();
        match self {
            // minio-go strips the quotes.
            Self::S3 => raw.trim_matches('"').to_owned(),
            // Flux formats the listed azcore.ETag string with `%x`: hex of its bytes. Listings
            // carry it bare, download headers quoted; the quotes are dropped so both agree.
            Self::Azure => raw
                .trim_matches('"')
                .bytes()
                .fold(String::new(), |mut out, byte| {
                    use std::fmt::Write as _;
                    let _ = write!(out, "{byte:02x}");
                    out
                }),
        }
    }
}

struct Bucket {
    store: Arc<dyn ObjectStore>,
    flavour: Flavour,
    name: String,
}

impl Bucket {
    fn connect(spec: &BucketSpec, credentials: &Credentials) -> Result<Self> {
        if spec.bucket_name.is_empty() {
            return Err(invalid("spec.bucketName is empty"));
        }
        let retry = RetryConfig {
            max_retries: 2,
            retry_timeout: Duration::from_secs(10),
            ..RetryConfig::default()
        };
        let provider = spec.provider.unwrap_or_default();
        let (store, flavour): (Arc<dyn ObjectStore>, Flavour) = match provider {
            CloudProvider::Generic | CloudProvider::Aws => {
                (Arc::new(s3_store(spec, credentials, retry)?), Flavour::S3)
            }
            CloudProvider::Azure => (
                Arc::new(azure_store(spec, credentials, retry)?),
                Flavour::Azure,
            ),
            CloudProvider::Gcp => {
                return Err(invalid("the gcp provider is not supported yet"));
            }
        };
        Ok(Self {
            store,
            flavour,
            name: spec.bucket_name.clone(),
        })
    }

    fn error(&self, operation: &'static str, source: object_store::Error) -> Error {
        if let Some(key) = invalid_key_in(&source) {
            return Error::UnsafeObjectKey {
                key,
                reason: "not a safe relative path".to_owned(),
            };
        }
        Error::Bucket {
            operation,
            bucket: self.name.clone(),
            source: Box::new(source),
        }
    }

    /// Reads the root `.sourceignore` (if any), lists the objects and keeps those Flux keeps;
    /// returns them with the listed size of each, after checking the listing against `limits`.
    async fn index(
        &self,
        spec: &BucketSpec,
        limits: &Limits,
    ) -> Result<(ObjectIndex, Option<Vec<u8>>, BTreeMap<String, u64>)> {
        let ignore_file = match self.store.get(&ObjectPath::from(IGNORE_FILE)).await {
            Ok(result) => Some(
                self.read_capped(result, IGNORE_FILE, MAX_IGNORE_FILE_BYTES)
                    .await?,
            ),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => return Err(self.error("read .sourceignore from", e)),
        };
        let filter = IgnoreFilter::for_bucket(
            ignore_file
                .as_deref()
                .map(String::from_utf8_lossy)
                .as_deref(),
            spec.ignore.as_deref(),
        )?;

        let prefix = match self.flavour {
            Flavour::S3 => spec.prefix.clone().unwrap_or_default(),
            Flavour::Azure => String::new(),
        };
        // List below the last `/` of the prefix server-side, then match the raw prefix as S3 does.
        let list_root = prefix
            .rfind('/')
            .map(|end| ObjectPath::from(&prefix[..end]));
        let mut listing = self.store.list(list_root.as_ref());
        let mut objects = Vec::new();
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(|e| self.error("list objects of", e))?;
            let key = meta.location.as_ref().to_owned();
            if !key.starts_with(&prefix) || key == IGNORE_FILE {
                continue;
            }
            objects.push((key, meta.size, self.flavour.etag(meta.e_tag.as_deref())));
            // Stop listing a bucket that can never be stored (kept objects are counted below).
            if objects.len() as u64 > limits.max_entries.saturating_mul(2) {
                return Err(self.limit(
                    None,
                    format!("object count {}", objects.len()),
                    limits.max_entries,
                ));
            }
        }

        let mut index = ObjectIndex::new();
        let mut sizes = BTreeMap::new();
        for (key, size, etag) in &objects {
            // object_store drops the trailing `/` of directory markers: an empty object whose
            // key is the parent of another is one.
            let marker = *size == 0
                && objects.iter().any(|(other, _, _)| {
                    other.len() > key.len() && other.starts_with(&format!("{key}/"))
                });
            if marker || filter.is_ignored(Path::new(key), false) {
                continue;
            }
            safe_relative_path(key)?;
            index.insert(key.clone(), etag.clone());
            sizes.insert(key.clone(), *size);
        }
        check_listing(&sizes, limits).map_err(|(key, what, limit)| self.limit(key, what, limit))?;
        Ok((index, ignore_file, sizes))
    }

    fn limit(&self, key: Option<String>, what: String, limit: u64) -> Error {
        Error::BucketLimitExceeded {
            bucket: self.name.clone(),
            key,
            what,
            limit,
        }
    }

    /// Reads a whole object, refusing it once it passes `max` bytes.
    async fn read_capped(
        &self,
        result: object_store::GetResult,
        key: &str,
        max: u64,
    ) -> Result<Vec<u8>> {
        let mut body = result.into_stream();
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| self.error("download an object from", e))?;
            bytes.extend_from_slice(&chunk);
            if bytes.len() as u64 > max {
                return Err(self.limit(
                    Some(key.to_owned()),
                    format!("file size of more than {}", bytes.len()),
                    max,
                ));
            }
        }
        Ok(bytes)
    }

    /// Downloads `key` to its path below `dest_dir`; returns the entity tag of what was read.
    /// The object may not send more than the `size` its listing announced (which was checked
    /// against the limits).
    async fn download(&self, key: &str, size: u64, dest_dir: &Path) -> Result<Option<String>> {
        let target = dest_dir.join(safe_relative_path(key)?);
        if let Some(parent) = target.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| Error::io("create directory", parent, e))?;
        }
        // The key came from a listing, where it parsed; parse it the same way (no re-encoding).
        let location = ObjectPath::parse(key).map_err(|_| Error::UnsafeObjectKey {
            key: key.to_owned(),
            reason: "not a valid object path".to_owned(),
        })?;
        let result = self
            .store
            .get(&location)
            .await
            .map_err(|e| self.error("download an object from", e))?;
        let etag = result
            .meta
            .e_tag
            .as_deref()
            .map(|raw| self.flavour.etag(Some(raw)));
        let mut file = tokio::fs::File::create(&target)
            .await
            .map_err(|e| Error::io("create", &target, e))?;
        let mut body = result.into_stream();
        let mut written = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| self.error("download an object from", e))?;
            written = written.saturating_add(chunk.len() as u64);
            if written > size {
                return Err(self.limit(
                    Some(key.to_owned()),
                    format!("download of more than {written} bytes"),
                    size,
                ));
            }
            file.write_all(&chunk)
                .await
                .map_err(|e| Error::io("write", &target, e))?;
        }
        file.flush()
            .await
            .map_err(|e| Error::io("write", &target, e))?;
        Ok(etag)
    }
}

/// Checks listed objects against `limits` before anything is downloaded: the entry count (each
/// object, as the artifact will count it), each object's size and the total. Returns the key at
/// fault (if one), what passed and the limit.
fn check_listing(
    sizes: &BTreeMap<String, u64>,
    limits: &Limits,
) -> std::result::Result<(), (Option<String>, String, u64)> {
    let count = sizes.len() as u64;
    if count > limits.max_entries {
        return Err((None, format!("object count {count}"), limits.max_entries));
    }
    let mut total = 0u64;
    for (key, size) in sizes {
        if *size > limits.max_file_bytes {
            return Err((
                Some(key.clone()),
                format!("file size {size}"),
                limits.max_file_bytes,
            ));
        }
        total = total.saturating_add(*size);
        if total > limits.max_total_bytes {
            return Err((None, format!("total size {total}"), limits.max_total_bytes));
        }
    }
    Ok(())
}

fn invalid(reason: &str) -> Error {
    Error::InvalidBucket {
        reason: reason.to_owned(),
    }
}

/// The key of an object `object_store` refused to represent (it rejects `.`/`..` and empty
/// segments while listing).
fn invalid_key_in(error: &object_store::Error) -> Option<String> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = current {
        if let Some(path_error) = error.downcast_ref::<object_store::path::Error>() {
            return match path_error {
                object_store::path::Error::EmptySegment { path }
                | object_store::path::Error::BadSegment { path, .. } => Some(path.clone()),
                _ => None,
            };
        }
        current = error.source();
    }
    None
}

/// `key` as a relative path with only normal segments, or [`Error::UnsafeObjectKey`].
fn safe_relative_path(key: &str) -> Result<PathBuf> {
    let refuse = |reason: &str| Error::UnsafeObjectKey {
        key: key.to_owned(),
        reason: reason.to_owned(),
    };
    if key.starts_with('/') {
        return Err(refuse("absolute keys are refused"));
    }
    if key.contains('\\') || key.contains('\0') {
        return Err(refuse("backslashes and NUL are refused"));
    }
    let mut path = PathBuf::new();
    for segment in key.split('/') {
        match segment {
            "" => return Err(refuse("empty path segments are refused")),
            "." | ".." => return Err(refuse("'.' and '..' segments are refused")),
            _ => path.push(segment),
        }
    }
    Ok(path)
}

/// The S3 endpoint URL: `spec.endpoint` with `http://` when `insecure`, else `https://`
/// (an endpoint that already has a scheme is used as written).
fn s3_endpoint(spec: &BucketSpec) -> Result<String> {
    let endpoint = spec.endpoint.trim().trim_end_matches('/');
    if endpoint.is_empty() {
        return Err(invalid("spec.endpoint is empty"));
    }
    if endpoint.contains("://") {
        return Ok(endpoint.to_owned());
    }
    let scheme = if spec.insecure.unwrap_or(false) {
        "http"
    } else {
        "https"
    };
    Ok(format!("{scheme}://{endpoint}"))
}

fn s3_store(
    spec: &BucketSpec,
    credentials: &Credentials,
    retry: RetryConfig,
) -> Result<object_store::aws::AmazonS3> {
    let endpoint = s3_endpoint(spec)?;
    let region = spec
        .region
        .as_deref()
        .filter(|region| !region.is_empty())
        .unwrap_or(DEFAULT_REGION);
    let mut builder = AmazonS3Builder::new()
        .with_endpoint(&endpoint)
        .with_allow_http(endpoint.starts_with("http://"))
        .with_virtual_hosted_style_request(false)
        .with_region(region)
        .with_bucket_name(&spec.bucket_name)
        .with_retry(retry)
        .with_http_connector(bounded::BoundedConnector)
        .with_client_options(ClientOptions::new().with_allow_http(endpoint.starts_with("http://")));
    builder = match credentials {
        Credentials::Anonymous => builder.with_skip_signature(true),
        Credentials::S3 {
            access_key,
            secret_key,
        } => builder
            .with_access_key_id(access_key)
            .with_secret_access_key(secret_key),
        Credentials::AzureAccountKey(_) | Credentials::AzureSas(_) => {
            return Err(Error::BucketCredentials {
                reason: "azure credentials given for an S3 bucket".to_owned(),
            });
        }
    };
    builder.build().map_err(|source| Error::Bucket {
        operation: "configure",
        bucket: spec.bucket_name.clone(),
        source: Box::new(source),
    })
}

/// The storage account of an Azure endpoint: the first label of the host name
/// (`https://<account>.blob.core.windows.net`), or for an IP address or `localhost` (Azurite
/// and other emulators) the first path segment (`http://127.0.0.1:10000/<account>`).
fn azure_account(endpoint: &str) -> Result<String> {
    let url = url_parts(endpoint)
        .ok_or_else(|| invalid("spec.endpoint must be an http:// or https:// URL for azure"))?;
    let host = url.host;
    let is_local = host == "localhost"
        || host.parse::<std::net::IpAddr>().is_ok()
        || (host.starts_with('[') && host.ends_with(']'));
    if is_local {
        return url
            .path
            .split('/')
            .find(|segment| !segment.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| {
                invalid("spec.endpoint on a local address must name the account in its path")
            });
    }
    let labels: Vec<&str> = host.split('.').collect();
    if labels.len() <= 2 {
        return Err(invalid(
            "spec.endpoint host must start with the storage account (<account>.blob.core.windows.net)",
        ));
    }
    Ok(labels[0].to_owned())
}

struct UrlParts<'a> {
    host: &'a str,
    path: &'a str,
}

fn url_parts(endpoint: &str) -> Option<UrlParts<'_>> {
    let rest = endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))?;
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => authority,
    };
    (!host.is_empty()).then_some(UrlParts { host, path })
}

fn azure_store(
    spec: &BucketSpec,
    credentials: &Credentials,
    retry: RetryConfig,
) -> Result<object_store::azure::MicrosoftAzure> {
    let endpoint = spec.endpoint.trim().trim_end_matches('/');
    let account = azure_account(endpoint)?;
    let service = endpoint.split(['?', '#']).next().unwrap_or_default();
    let http = service.starts_with("http://");
    let mut builder = MicrosoftAzureBuilder::new()
        .with_account(&account)
        .with_container_name(&spec.bucket_name)
        .with_endpoint(service.to_owned())
        .with_allow_http(http)
        .with_http_connector(bounded::BoundedConnector)
        .with_retry(retry);
    builder = match credentials {
        Credentials::Anonymous => builder.with_skip_signature(true),
        Credentials::AzureAccountKey(key) => builder.with_access_key(key),
        Credentials::AzureSas(sas) => {
            let pairs: Vec<(String, String)> =
                form_urlencoded::parse(sas.trim_start_matches('?').as_bytes())
                    .into_owned()
                    .collect();
            if pairs.is_empty() {
                return Err(Error::BucketCredentials {
                    reason: "secret field 'sasKey' is empty".to_owned(),
                });
            }
            builder.with_sas_authorization(pairs)
        }
        Credentials::S3 { .. } => {
            return Err(Error::BucketCredentials {
                reason: "S3 credentials given for an azure bucket".to_owned(),
            });
        }
    };
    builder.build().map_err(|source| Error::Bucket {
        operation: "configure",
        bucket: spec.bucket_name.clone(),
        source: Box::new(source),
    })
}

#[cfg(test)]
mod tests;
