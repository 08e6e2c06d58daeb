//! A small OCI distribution registry: the subset of the distribution API that Helm (oras-go),
//! skopeo and oci-client use, storing into a directory. `capstan dev` serves charts from it.
//!
//! Served under `/v2/`: the API check; blob uploads (`POST` monolithic with `?digest=` or
//! starting a session, `PATCH` chunks, `PUT` closing with `?digest=`, `GET` progress, `DELETE`),
//! cross-repository `mount` of a blob already stored; `HEAD`/`GET` of blobs; `PUT`/`HEAD`/`GET`/
//! `DELETE` of manifests by tag or digest; `tags/list` and `_catalog` with `n`/`last` paging; a
//! single `Range` (`bytes=<first>-[<last>]`) on blob `GET`s (`206 Partial Content`). Errors are
//! the spec's JSON (`{"errors":[{"code":"BLOB_UNKNOWN",…}]}`).
//!
//! # Guarantees
//! - Repository names, tags and digests are checked against the spec's grammars before they
//!   name anything on disk, so no request reaches outside the directory.
//! - Every blob's `sha256` digest is verified before it is stored; a manifest is stored only
//!   when its digest matches a digest reference and every blob (or, for an index, manifest) it
//!   references is present.
//! - Blobs are bounded by [`Limits::max_blob_bytes`] as they stream, manifests by
//!   [`Limits::max_manifest_bytes`]; writes are atomic (temporary file, rename).
//!
//! - With [`Registry::with_basic_auth`] every request (the API check included) must carry that
//!   user's `Authorization: Basic`, compared in constant time; others get `401 UNAUTHORIZED`
//!   with a `Basic` challenge, as `docker-registry` with an htpasswd file answers. The password
//!   is never logged, printed (`Debug` redacts it) nor echoed in an error.
//!
//! Without it there is no authentication: it is meant for a loopback address (`capstan dev`).
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use capstan_source::oci::registry::{Limits, Registry};
//! let registry = Registry::new("/var/lib/capstan/registry", Limits::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:5000").await?;
//! axum::serve(listener, registry.router()).await
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::digest::Digest;

/// Size limits of a [`Registry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest blob accepted, in bytes (default 512 MiB).
    pub max_blob_bytes: u64,
    /// The largest manifest accepted, in bytes (default 4 MiB, as the spec suggests).
    pub max_manifest_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_blob_bytes: 512 << 20,
            max_manifest_bytes: super::MAX_MANIFEST_BYTES,
        }
    }
}

/// Entries returned per `tags/list` or `_catalog` page when the client gives no `n`.
const DEFAULT_PAGE: usize = 1000;
/// Upload sessions open at once; more are refused (`429 TOOMANYREQUESTS`) until some finish.
const MAX_OPEN_UPLOADS: usize = 256;

/// A registry storing into one directory.
#[derive(Clone, Debug)]
pub struct Registry {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    limits: Limits,
    auth: Option<BasicAuth>,
}

/// The one user a [`Registry`] accepts (as an htpasswd file with one entry). `Debug` shows the
/// username only.
#[derive(Clone, PartialEq, Eq)]
pub struct BasicAuth {
    username: String,
    password: String,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// A `<username>:<password>` text that is not one; it never holds the text.
#[derive(Debug, thiserror::Error)]
#[error("invalid registry credentials: expected <username>:<password> with a non-empty username")]
pub struct InvalidBasicAuth;

impl BasicAuth {
    /// The user `username` with `password`.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            username: username.into(),
            password: password.into(),
        }
    }

    /// Parses `<username>:<password>` (the form of `skopeo --creds` and of an environment
    /// variable); the password may hold `:`.
    ///
    /// # Errors
    /// [`InvalidBasicAuth`] without a `:` or with an empty username.
    pub fn parse(text: &str) -> Result<Self, InvalidBasicAuth> {
        match text.split_once(':') {
            Some((username, password)) if !username.is_empty() => Ok(Self::new(username, password)),
            _ => Err(InvalidBasicAuth),
        }
    }

    /// The username.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// Whether `headers` carry this user's `Authorization: Basic`, compared in constant time
    /// (over digests, so neither length nor content leaks through timing).
    fn accepts(&self, headers: &HeaderMap) -> bool {
        use base64::Engine as _;
        let Some(encoded) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, rest) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("basic").then_some(rest.trim())
            })
        else {
            return false;
        };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
            return false;
        };
        let mut expected = Vec::with_capacity(self.username.len() + 1 + self.password.len());
        expected.extend_from_slice(self.username.as_bytes());
        expected.push(b':');
        expected.extend_from_slice(self.password.as_bytes());
        let (given, expected) = (Sha256::digest(&decoded), Sha256::digest(&expected));
        given
            .iter()
            .zip(expected.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl Registry {
    /// A registry storing under `root` (created if missing): `blobs/sha256/<hex>`,
    /// `manifests/sha256/<hex>` (+ `.type`), `uploads/<id>` (emptied here: sessions of an
    /// earlier process are gone), and per repository `repositories/<name>/_manifests/<hex>` and
    /// `_tags/<tag>`. At most 256 upload sessions are open at once.
    ///
    /// # Errors
    ///
    /// When the directories cannot be created.
    pub fn new(root: impl Into<PathBuf>, limits: Limits) -> std::io::Result<Self> {
        let root = root.into();
        // Upload sessions do not outlive the process that served them.
        match std::fs::remove_dir_all(root.join("uploads")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        for dir in [
            "blobs/sha256",
            "manifests/sha256",
            "uploads",
            "repositories",
        ] {
            std::fs::create_dir_all(root.join(dir))?;
        }
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                limits,
                auth: None,
            }),
        })
    }

    /// The same registry requiring `auth` on every request.
    #[must_use]
    pub fn with_basic_auth(self, auth: BasicAuth) -> Self {
        Self {
            inner: Arc::new(Inner {
                root: self.inner.root.clone(),
                limits: self.inner.limits,
                auth: Some(auth),
            }),
        }
    }

    /// The directory the registry stores into.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The axum router serving `/v2/`.
    pub fn router(&self) -> axum::Router {
        axum::Router::new()
            .route("/v2", axum::routing::any(api_check))
            .route("/v2/", axum::routing::any(api_check))
            .route("/v2/{*rest}", axum::routing::any(dispatch))
            .with_state(self.inner.clone())
    }
}

/// A distribution API error: status, code and message.
struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    fn io(e: &std::io::Error) -> Self {
        tracing::warn!(error = %e, "registry storage error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "UNKNOWN",
            "storage error",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "errors": [{"code": self.code, "message": self.message, "detail": null}]
        });
        let mut response = (self.status, axum::Json(body)).into_response();
        api_version(response.headers_mut());
        response
    }
}

type ApiResult = Result<Response, ApiError>;

fn api_version(headers: &mut HeaderMap) {
    headers.insert(
        "docker-distribution-api-version",
        HeaderValue::from_static("registry/2.0"),
    );
}

async fn api_check(State(inner): State<Arc<Inner>>, headers: HeaderMap) -> Response {
    if !inner.authorized(&headers) {
        return unauthorized();
    }
    let mut response = (StatusCode::OK, axum::Json(serde_json::json!({}))).into_response();
    api_version(response.headers_mut());
    response
}

/// The answer to a request without the registry's credentials.
fn unauthorized() -> Response {
    let mut response = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "UNAUTHORIZED",
        "authentication required",
    )
    .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"capstan-registry\""),
    );
    response
}

/// What a `/v2/<rest>` path names.
#[derive(Debug, PartialEq, Eq)]
enum Target<'a> {
    Tags(&'a str),
    Upload(&'a str, &'a str),
    Blob(&'a str, &'a str),
    Manifest(&'a str, &'a str),
}

fn parse_target(rest: &str) -> Option<Target<'_>> {
    if let Some(name) = rest.strip_suffix("/tags/list") {
        return Some(Target::Tags(name));
    }
    if let Some(at) = rest.rfind("/blobs/uploads") {
        let id = rest[at + "/blobs/uploads".len()..].trim_start_matches('/');
        return Some(Target::Upload(&rest[..at], id));
    }
    if let Some(at) = rest.rfind("/manifests/") {
        return Some(Target::Manifest(
            &rest[..at],
            &rest[at + "/manifests/".len()..],
        ));
    }
    if let Some(at) = rest.rfind("/blobs/") {
        return Some(Target::Blob(&rest[..at], &rest[at + "/blobs/".len()..]));
    }
    None
}

/// The spec's repository name grammar: lower-case components of `[a-z0-9]` separated by `.`,
/// `_`, `__` or `-`s, joined by `/`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name.split('/').all(|component| {
            let bytes = component.as_bytes();
            let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
            if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
                return false;
            }
            let mut i = 0;
            while i < bytes.len() {
                if alnum(bytes[i]) {
                    i += 1;
                    continue;
                }
                let start = i;
                while i < bytes.len() && !alnum(bytes[i]) {
                    i += 1;
                }
                let separator = &component[start..i];
                let dashes = separator.bytes().all(|b| b == b'-');
                if !(separator == "." || separator == "_" || separator == "__" || dashes) {
                    return false;
                }
            }
            true
        })
}

/// The spec's tag grammar: `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
fn valid_tag(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn parse_digest(text: &str) -> Result<Digest, ApiError> {
    let valid = text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    });
    if !valid {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "DIGEST_INVALID",
            "only sha256 digests of 64 lower-case hex digits are supported",
        ));
    }
    text.parse()
        .map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, "DIGEST_INVALID", "invalid digest"))
}

fn name_checked(name: &str) -> Result<&str, ApiError> {
    if valid_name(name) {
        Ok(name)
    } else {
        Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "NAME_INVALID",
            "invalid repository name",
        ))
    }
}

fn query_value(uri: &axum::http::Uri, key: &str) -> Option<String> {
    form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

async fn dispatch(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if !inner.authorized(&parts.headers) {
        return unauthorized();
    }
    let path = parts.uri.path().to_owned();
    let rest = path.strip_prefix("/v2/").unwrap_or_default();
    let result = match parse_target(rest) {
        _ if rest == "_catalog" => match parts.method {
            Method::GET => inner.catalog(&parts.uri).await,
            _ => Err(ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "UNSUPPORTED",
                "the operation is unsupported",
            )),
        },
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            "no such endpoint",
        )),
        Some(target) => {
            route(
                &inner,
                &parts.method,
                &parts.uri,
                &parts.headers,
                target,
                body,
            )
            .await
        }
    };
    let mut response = result.unwrap_or_else(IntoResponse::into_response);
    api_version(response.headers_mut());
    response
}

async fn route(
    inner: &Inner,
    method: &Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    target: Target<'_>,
    body: Body,
) -> ApiResult {
    let unsupported = || {
        Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "UNSUPPORTED",
            "the operation is unsupported",
        ))
    };
    match target {
        Target::Tags(name) => match *method {
            Method::GET => inner.tags(name_checked(name)?, uri).await,
            _ => unsupported(),
        },
        Target::Blob(name, digest) => {
            let name = name_checked(name)?;
            let digest = parse_digest(digest)?;
            match *method {
                Method::GET => inner.get_blob(name, &digest, headers, true).await,
                Method::HEAD => inner.get_blob(name, &digest, headers, false).await,
                _ => unsupported(),
            }
        }
        Target::Upload(name, id) => {
            let name = name_checked(name)?;
            match (method.clone(), id.is_empty()) {
                (Method::POST, true) => inner.start_upload(name, uri, body).await,
                (Method::PATCH, false) => inner.patch_upload(name, id, headers, body).await,
                (Method::PUT, false) => inner.finish_upload(name, id, uri, body).await,
                (Method::GET, false) => inner.upload_status(name, id).await,
                (Method::DELETE, false) => inner.cancel_upload(id).await,
                _ => unsupported(),
            }
        }
        Target::Manifest(name, reference) => {
            let name = name_checked(name)?;
            match *method {
                Method::GET => inner.get_manifest(name, reference, true).await,
                Method::HEAD => inner.get_manifest(name, reference, false).await,
                Method::PUT => inner.put_manifest(name, reference, headers, body).await,
                Method::DELETE => inner.delete_manifest(name, reference).await,
                _ => unsupported(),
            }
        }
    }
}

fn response(status: StatusCode, headers: &[(header::HeaderName, String)]) -> Response {
    let mut response = status.into_response();
    for (name, value) in headers {
        if let Ok(value) = HeaderValue::from_str(value) {
            response.headers_mut().insert(name.clone(), value);
        }
    }
    response
}

fn docker_content_digest() -> header::HeaderName {
    header::HeaderName::from_static("docker-content-digest")
}

fn upload_uuid() -> header::HeaderName {
    header::HeaderName::from_static("docker-upload-uuid")
}

fn blob_unknown() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "BLOB_UNKNOWN",
        "blob unknown to registry",
    )
}

fn upload_unknown() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "BLOB_UPLOAD_UNKNOWN",
        "blob upload unknown to registry",
    )
}

fn manifest_unknown() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "MANIFEST_UNKNOWN",
        "manifest unknown",
    )
}

/// The byte range an upload holds, as the `Range` header says it (`0-<last>`).
fn range(size: u64) -> String {
    format!("0-{}", size.saturating_sub(1))
}

impl Inner {
    /// Whether the registry needs no credentials or `headers` carry them.
    fn authorized(&self, headers: &HeaderMap) -> bool {
        self.auth.as_ref().is_none_or(|auth| auth.accepts(headers))
    }

    /// `GET /v2/_catalog`: the repositories holding a tag or a manifest, sorted, paged with
    /// `n` and `last` as `tags/list`.
    async fn catalog(&self, uri: &axum::http::Uri) -> ApiResult {
        let root = self.root.join("repositories");
        let mut names = tokio::task::spawn_blocking(move || repositories(&root))
            .await
            .map_err(|_| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "UNKNOWN",
                    "catalog task failed",
                )
            })?
            .map_err(|e| ApiError::io(&e))?;
        let next = page(&mut names, uri, "/v2/_catalog");
        let mut response = axum::Json(serde_json::json!({"repositories": names})).into_response();
        next_link(&mut response, next);
        Ok(response)
    }

    fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.root.join("blobs/sha256").join(digest.hex())
    }

    fn manifest_path(&self, digest: &Digest) -> PathBuf {
        self.root.join("manifests/sha256").join(digest.hex())
    }

    fn repository(&self, name: &str) -> PathBuf {
        self.root.join("repositories").join(name)
    }

    fn upload_path(&self, id: &str) -> Result<PathBuf, ApiError> {
        if uuid::Uuid::parse_str(id).is_err() {
            return Err(upload_unknown());
        }
        Ok(self.root.join("uploads").join(id))
    }

    async fn tags(&self, name: &str, uri: &axum::http::Uri) -> ApiResult {
        let dir = self.repository(name).join("_tags");
        let mut tags = Vec::new();
        match tokio::fs::read_dir(&dir).await {
            Ok(mut entries) => {
                while let Some(entry) = entries.next_entry().await.map_err(|e| ApiError::io(&e))? {
                    let tag = entry.file_name().to_string_lossy().into_owned();
                    if valid_tag(&tag) {
                        tags.push(tag);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ApiError::new(
                    StatusCode::NOT_FOUND,
                    "NAME_UNKNOWN",
                    "repository name not known to registry",
                ));
            }
            Err(e) => return Err(ApiError::io(&e)),
        }
        let next = page(&mut tags, uri, &format!("/v2/{name}/tags/list"));
        let mut response =
            axum::Json(serde_json::json!({"name": name, "tags": tags})).into_response();
        next_link(&mut response, next);
        Ok(response)
    }

    async fn get_blob(
        &self,
        _name: &str,
        digest: &Digest,
        request: &HeaderMap,
        with_body: bool,
    ) -> ApiResult {
        use tokio::io::AsyncSeekExt as _;
        let path = self.blob_path(digest);
        let mut file = match tokio::fs::File::open(&path).await {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(blob_unknown()),
            Err(e) => return Err(ApiError::io(&e)),
        };
        let size = file.metadata().await.map_err(|e| ApiError::io(&e))?.len();
        let wanted = request
            .get(header::RANGE)
            .and_then(|v| v.to_str().ok())
            .map(|v| byte_range(v, size));
        let (status, first, length) = match wanted {
            None | Some(RangeAnswer::Ignored) => (StatusCode::OK, 0, size),
            Some(RangeAnswer::Part(first, last)) => {
                (StatusCode::PARTIAL_CONTENT, first, last - first + 1)
            }
            Some(RangeAnswer::Unsatisfiable) => {
                let mut refused = ApiError::new(
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    "BLOB_UNKNOWN",
                    "the requested range is not within the blob",
                )
                .into_response();
                if let Ok(value) = HeaderValue::from_str(&format!("bytes */{size}")) {
                    refused.headers_mut().insert(header::CONTENT_RANGE, value);
                }
                return Ok(refused);
            }
        };
        let mut headers = vec![
            (header::CONTENT_LENGTH, length.to_string()),
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (docker_content_digest(), digest.to_string()),
            (header::ETAG, format!("\"{digest}\"")),
            (header::ACCEPT_RANGES, "bytes".to_owned()),
        ];
        if status == StatusCode::PARTIAL_CONTENT {
            headers.push((
                header::CONTENT_RANGE,
                format!("bytes {first}-{}/{size}", first + length - 1),
            ));
        }
        let mut response = response(status, &headers);
        if with_body {
            if first > 0 {
                file.seek(std::io::SeekFrom::Start(first))
                    .await
                    .map_err(|e| ApiError::io(&e))?;
            }
            let stream = tokio_util::io::ReaderStream::new(file.take(length));
            *response.body_mut() = Body::from_stream(stream);
        }
        Ok(response)
    }

    /// `POST /blobs/uploads/`: a monolithic upload with `?digest=`, a cross-repository
    /// `?mount=` of a stored blob, or a new session.
    async fn start_upload(&self, name: &str, uri: &axum::http::Uri, body: Body) -> ApiResult {
        if let Some(mount) = query_value(uri, "mount") {
            let digest = parse_digest(&mount)?;
            if tokio::fs::try_exists(self.blob_path(&digest))
                .await
                .unwrap_or(false)
            {
                return Ok(blob_created(name, &digest));
            }
        }
        self.check_open_uploads().await?;
        let id = uuid::Uuid::new_v4().to_string();
        let path = self.upload_path(&id)?;
        tokio::fs::File::create(&path)
            .await
            .map_err(|e| ApiError::io(&e))?;
        if let Some(digest) = query_value(uri, "digest") {
            let digest = parse_digest(&digest)?;
            self.append(&path, body).await?;
            return self.commit_upload(name, &path, &digest).await;
        }
        Ok(response(
            StatusCode::ACCEPTED,
            &[
                (header::LOCATION, format!("/v2/{name}/blobs/uploads/{id}")),
                (header::RANGE, "0-0".to_owned()),
                (header::CONTENT_LENGTH, "0".to_owned()),
                (upload_uuid(), id),
            ],
        ))
    }

    async fn patch_upload(
        &self,
        name: &str,
        id: &str,
        headers: &HeaderMap,
        body: Body,
    ) -> ApiResult {
        let path = self.existing_upload(id).await?;
        let size = tokio::fs::metadata(&path)
            .await
            .map_err(|e| ApiError::io(&e))?
            .len();
        if let Some(range) = headers
            .get(header::CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
        {
            let start = range
                .trim_start_matches("bytes ")
                .split('-')
                .next()
                .and_then(|s| s.trim().parse::<u64>().ok());
            if start != Some(size) {
                return Err(ApiError::new(
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    "BLOB_UPLOAD_INVALID",
                    "the chunk does not continue the upload",
                ));
            }
        }
        let size = self.append(&path, body).await?;
        Ok(response(
            StatusCode::ACCEPTED,
            &[
                (header::LOCATION, format!("/v2/{name}/blobs/uploads/{id}")),
                (header::RANGE, range(size)),
                (header::CONTENT_LENGTH, "0".to_owned()),
                (upload_uuid(), id.to_owned()),
            ],
        ))
    }

    async fn finish_upload(
        &self,
        name: &str,
        id: &str,
        uri: &axum::http::Uri,
        body: Body,
    ) -> ApiResult {
        let path = self.existing_upload(id).await?;
        let Some(digest) = query_value(uri, "digest") else {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "DIGEST_INVALID",
                "the digest query parameter is required",
            ));
        };
        let digest = parse_digest(&digest)?;
        self.append(&path, body).await?;
        self.commit_upload(name, &path, &digest).await
    }

    async fn upload_status(&self, name: &str, id: &str) -> ApiResult {
        let path = self.existing_upload(id).await?;
        let size = tokio::fs::metadata(&path)
            .await
            .map_err(|e| ApiError::io(&e))?
            .len();
        Ok(response(
            StatusCode::NO_CONTENT,
            &[
                (header::LOCATION, format!("/v2/{name}/blobs/uploads/{id}")),
                (header::RANGE, range(size)),
                (upload_uuid(), id.to_owned()),
            ],
        ))
    }

    async fn cancel_upload(&self, id: &str) -> ApiResult {
        let path = self.existing_upload(id).await?;
        tokio::fs::remove_file(&path)
            .await
            .map_err(|e| ApiError::io(&e))?;
        Ok(StatusCode::NO_CONTENT.into_response())
    }

    async fn check_open_uploads(&self) -> Result<(), ApiError> {
        let mut entries = tokio::fs::read_dir(self.root.join("uploads"))
            .await
            .map_err(|e| ApiError::io(&e))?;
        let mut open = 0;
        while entries
            .next_entry()
            .await
            .map_err(|e| ApiError::io(&e))?
            .is_some()
        {
            open += 1;
            if open >= MAX_OPEN_UPLOADS {
                return Err(ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "TOOMANYREQUESTS",
                    "too many uploads in progress",
                ));
            }
        }
        Ok(())
    }

    async fn existing_upload(&self, id: &str) -> Result<PathBuf, ApiError> {
        let path = self.upload_path(id)?;
        if tokio::fs::try_exists(&path).await.unwrap_or(false) {
            Ok(path)
        } else {
            Err(upload_unknown())
        }
    }

    /// Appends the request body to the upload file, within the blob limit; the new size.
    async fn append(&self, path: &Path, body: Body) -> Result<u64, ApiError> {
        let mut file = tokio::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .await
            .map_err(|e| ApiError::io(&e))?;
        let mut size = file.metadata().await.map_err(|e| ApiError::io(&e))?.len();
        let mut stream = body.into_data_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|_| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "BLOB_UPLOAD_INVALID",
                    "the request body could not be read",
                )
            })?;
            size += chunk.len() as u64;
            if size > self.limits.max_blob_bytes {
                drop(file);
                let _ = tokio::fs::remove_file(path).await;
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "SIZE_INVALID",
                    format!("blobs are limited to {} bytes", self.limits.max_blob_bytes),
                ));
            }
            file.write_all(&chunk).await.map_err(|e| ApiError::io(&e))?;
        }
        file.flush().await.map_err(|e| ApiError::io(&e))?;
        Ok(size)
    }

    /// Verifies the uploaded file against `digest` and moves it into the blob store.
    async fn commit_upload(&self, name: &str, path: &Path, digest: &Digest) -> ApiResult {
        let mut file = tokio::fs::File::open(path)
            .await
            .map_err(|e| ApiError::io(&e))?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let read = file.read(&mut buffer).await.map_err(|e| ApiError::io(&e))?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
        }
        drop(file);
        let actual: [u8; 32] = hasher.finalize().into();
        if actual != *digest.as_bytes() {
            let _ = tokio::fs::remove_file(path).await;
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "DIGEST_INVALID",
                "provided digest did not match uploaded content",
            ));
        }
        tokio::fs::rename(path, self.blob_path(digest))
            .await
            .map_err(|e| ApiError::io(&e))?;
        Ok(blob_created(name, digest))
    }

    /// Resolves a tag or digest reference of `name` to a manifest digest linked to it.
    async fn resolve(&self, name: &str, reference: &str) -> Result<Digest, ApiError> {
        let repository = self.repository(name);
        let digest = if reference.starts_with("sha256:") {
            parse_digest(reference)?
        } else if valid_tag(reference) {
            match tokio::fs::read_to_string(repository.join("_tags").join(reference)).await {
                Ok(text) => parse_digest(text.trim())?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(manifest_unknown());
                }
                Err(e) => return Err(ApiError::io(&e)),
            }
        } else {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "TAG_INVALID",
                "invalid tag",
            ));
        };
        if tokio::fs::try_exists(repository.join("_manifests").join(digest.hex()))
            .await
            .unwrap_or(false)
        {
            Ok(digest)
        } else {
            Err(manifest_unknown())
        }
    }

    async fn get_manifest(&self, name: &str, reference: &str, with_body: bool) -> ApiResult {
        let digest = self.resolve(name, reference).await?;
        let path = self.manifest_path(&digest);
        let bytes = tokio::fs::read(&path).await.map_err(|e| ApiError::io(&e))?;
        let media_type = tokio::fs::read_to_string(path.with_extension("type"))
            .await
            .unwrap_or_else(|_| super::MANIFEST_MEDIA_TYPE.to_owned());
        let headers = [
            (header::CONTENT_TYPE, media_type),
            (header::CONTENT_LENGTH, bytes.len().to_string()),
            (docker_content_digest(), digest.to_string()),
            (header::ETAG, format!("\"{digest}\"")),
        ];
        let mut response = response(StatusCode::OK, &headers);
        if with_body {
            *response.body_mut() = Body::from(bytes);
        }
        Ok(response)
    }

    async fn put_manifest(
        &self,
        name: &str,
        reference: &str,
        headers: &HeaderMap,
        body: Body,
    ) -> ApiResult {
        let tag = if reference.starts_with("sha256:") {
            None
        } else if valid_tag(reference) {
            Some(reference)
        } else {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "TAG_INVALID",
                "invalid tag",
            ));
        };
        let limit = usize::try_from(self.limits.max_manifest_bytes).unwrap_or(usize::MAX);
        let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "SIZE_INVALID",
                format!("manifests are limited to {limit} bytes"),
            )
        })?;
        let digest = Digest::of(&bytes);
        if tag.is_none() && parse_digest(reference)? != digest {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "DIGEST_INVALID",
                "the manifest does not match the digest in the reference",
            ));
        }
        let manifest: serde_json::Value = serde_json::from_slice(&bytes).map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "MANIFEST_INVALID",
                "the manifest is not JSON",
            )
        })?;
        let media_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or(v).trim().to_owned())
            .filter(|v| !v.is_empty())
            .or_else(|| manifest["mediaType"].as_str().map(str::to_owned))
            .unwrap_or_else(|| super::MANIFEST_MEDIA_TYPE.to_owned());
        self.check_references(name, &manifest).await?;

        let path = self.manifest_path(&digest);
        write_atomically(&path, &bytes).await?;
        write_atomically(&path.with_extension("type"), media_type.as_bytes()).await?;
        let repository = self.repository(name);
        write_atomically(&repository.join("_manifests").join(digest.hex()), b"").await?;
        if let Some(tag) = tag {
            write_atomically(
                &repository.join("_tags").join(tag),
                digest.to_string().as_bytes(),
            )
            .await?;
        }
        Ok(response(
            StatusCode::CREATED,
            &[
                (header::LOCATION, format!("/v2/{name}/manifests/{digest}")),
                (header::CONTENT_LENGTH, "0".to_owned()),
                (docker_content_digest(), digest.to_string()),
            ],
        ))
    }

    /// Every blob an image manifest references (config, layers without foreign `urls`), or
    /// every manifest an index references, must be stored.
    async fn check_references(
        &self,
        name: &str,
        manifest: &serde_json::Value,
    ) -> Result<(), ApiError> {
        let invalid = |message: &str| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "MANIFEST_INVALID",
                message.to_owned(),
            )
        };
        if manifest["schemaVersion"].as_u64() != Some(2) {
            return Err(invalid("only schema version 2 manifests are supported"));
        }
        if let Some(children) = manifest["manifests"].as_array() {
            for child in children {
                let digest = parse_digest(child["digest"].as_str().unwrap_or_default())?;
                if !tokio::fs::try_exists(
                    self.repository(name).join("_manifests").join(digest.hex()),
                )
                .await
                .unwrap_or(false)
                {
                    return Err(ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "MANIFEST_BLOB_UNKNOWN",
                        format!("manifest {digest} is unknown to the repository"),
                    ));
                }
            }
            return Ok(());
        }
        let config = std::iter::once(&manifest["config"]);
        let layers = manifest["layers"].as_array().into_iter().flatten();
        for descriptor in config.chain(layers) {
            if descriptor
                .get("urls")
                .is_some_and(|u| u.as_array().is_some_and(|u| !u.is_empty()))
            {
                continue;
            }
            let digest = parse_digest(descriptor["digest"].as_str().unwrap_or_default())
                .map_err(|_| invalid("a descriptor has no valid sha256 digest"))?;
            if !tokio::fs::try_exists(self.blob_path(&digest))
                .await
                .unwrap_or(false)
            {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "MANIFEST_BLOB_UNKNOWN",
                    format!("blob {digest} is unknown to the registry"),
                ));
            }
        }
        Ok(())
    }

    /// `DELETE /manifests/<reference>`: a tag is untagged; a digest is unlinked with its tags.
    async fn delete_manifest(&self, name: &str, reference: &str) -> ApiResult {
        let digest = self.resolve(name, reference).await?;
        let repository = self.repository(name);
        if reference.starts_with("sha256:") {
            let _ = tokio::fs::remove_file(repository.join("_manifests").join(digest.hex())).await;
            if let Ok(mut entries) = tokio::fs::read_dir(repository.join("_tags")).await {
                while let Ok(Some(entry)) = entries.next_entry().await {
                    let points = tokio::fs::read_to_string(entry.path())
                        .await
                        .unwrap_or_default();
                    if points.trim() == digest.to_string() {
                        let _ = tokio::fs::remove_file(entry.path()).await;
                    }
                }
            }
        } else {
            tokio::fs::remove_file(repository.join("_tags").join(reference))
                .await
                .map_err(|e| ApiError::io(&e))?;
        }
        Ok(StatusCode::ACCEPTED.into_response())
    }
}

/// Sorts `items` and keeps the page the `n` and `last` query parameters of `uri` ask for
/// (`tags/list` and `_catalog` paging); returns the `Link` of the next page at `path`, if any.
fn page(items: &mut Vec<String>, uri: &axum::http::Uri, path: &str) -> Option<String> {
    items.sort();
    if let Some(last) = query_value(uri, "last") {
        items.retain(|item| *item > last);
    }
    let n = query_value(uri, "n")
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(DEFAULT_PAGE);
    let more = items.len() > n;
    items.truncate(n);
    let last = items.last().filter(|_| more)?;
    Some(format!("<{path}?n={n}&last={last}>; rel=\"next\""))
}

/// Sets the `Link` header of the next page ([`page`]).
fn next_link(response: &mut Response, link: Option<String>) {
    if let Some(value) = link.and_then(|link| HeaderValue::from_str(&link).ok()) {
        response.headers_mut().insert(header::LINK, value);
    }
}

/// How a blob `GET` answers its `Range` header.
#[derive(Debug, PartialEq, Eq)]
enum RangeAnswer {
    /// The whole blob (a header this registry does not serve ranges for: several ranges,
    /// another unit, a malformed value — RFC 9110 lets a server ignore it).
    Ignored,
    /// Bytes `first..=last`.
    Part(u64, u64),
    /// A range starting past the end (`416`).
    Unsatisfiable,
}

/// Reads a single `bytes=<first>-[<last>]` or `bytes=-<suffix>` range of a blob of `size` bytes.
fn byte_range(value: &str, size: u64) -> RangeAnswer {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return RangeAnswer::Ignored;
    };
    let Some((first, last)) = spec.trim().split_once('-') else {
        return RangeAnswer::Ignored;
    };
    if spec.contains(',') {
        return RangeAnswer::Ignored;
    }
    let parse = |text: &str| text.trim().parse::<u64>().ok();
    match (first.trim().is_empty(), parse(first), parse(last)) {
        // A suffix: the last `n` bytes.
        (true, _, Some(suffix)) if suffix > 0 && size > 0 => {
            RangeAnswer::Part(size.saturating_sub(suffix), size - 1)
        }
        (true, _, Some(_)) => RangeAnswer::Unsatisfiable,
        (false, Some(first), _) if first >= size => RangeAnswer::Unsatisfiable,
        (false, Some(first), None) if last.trim().is_empty() => RangeAnswer::Part(first, size - 1),
        (false, Some(first), Some(last)) if last >= first => {
            RangeAnswer::Part(first, last.min(size - 1))
        }
        _ => RangeAnswer::Ignored,
    }
}

/// The repository names under `root` (`repositories/`): each directory holding `_tags` or
/// `_manifests`, named by its path below `root`, only names the spec's grammar allows.
fn repositories(root: &Path) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let file_name = entry.file_name();
            if file_name == "_tags" || file_name == "_manifests" {
                let name = dir
                    .strip_prefix(root)
                    .ok()
                    .and_then(Path::to_str)
                    .unwrap_or_default()
                    .to_owned();
                if valid_name(&name) && !names.contains(&name) {
                    names.push(name);
                }
            } else {
                pending.push(entry.path());
            }
        }
    }
    Ok(names)
}

fn blob_created(name: &str, digest: &Digest) -> Response {
    response(
        StatusCode::CREATED,
        &[
            (header::LOCATION, format!("/v2/{name}/blobs/{digest}")),
            (header::CONTENT_LENGTH, "0".to_owned()),
            (docker_content_digest(), digest.to_string()),
        ],
    )
}

/// Writes `bytes` to `path` through a temporary sibling renamed into place.
async fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ApiError> {
    let parent = path.parent().unwrap_or(Path::new("."));
    tokio::fs::create_dir_all(parent)
        .await
        .map_err(|e| ApiError::io(&e))?;
    let temp = parent.join(format!(".tmp-{}", uuid::Uuid::new_v4()));
    tokio::fs::write(&temp, bytes)
        .await
        .map_err(|e| ApiError::io(&e))?;
    tokio::fs::rename(&temp, path).await.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        ApiError::io(&e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_tags_and_targets_follow_the_spec() {
        for name in ["charts", "a/b-c/d.e", "x__y", "a--b/c_d", "0"] {
            assert!(valid_name(name), "{name}");
        }
        for name in [
            "", "A", "../x", "a/../b", "a//b", "-a", "a-", "a/.x", "a..b", "a/_tags",
        ] {
            assert!(!valid_name(name), "{name}");
        }
        assert!(valid_tag("1.2.3_build.4"));
        assert!(valid_tag("_x"));
        assert!(!valid_tag(".hidden"));
        assert!(!valid_tag("1.2.3+b"));
        assert!(!valid_tag(&"a".repeat(129)));
        assert_eq!(parse_target("a/b/tags/list"), Some(Target::Tags("a/b")));
        assert_eq!(
            parse_target("blobs/blobs/uploads/"),
            Some(Target::Upload("blobs", ""))
        );
        assert_eq!(
            parse_target("a/blobs/uploads/123"),
            Some(Target::Upload("a", "123"))
        );
        assert_eq!(
            parse_target("a/manifests/v1"),
            Some(Target::Manifest("a", "v1"))
        );
        assert_eq!(
            parse_target("a/blobs/sha256:00"),
            Some(Target::Blob("a", "sha256:00"))
        );
        assert!(parse_digest("sha256:../../etc").is_err());
        assert!(parse_digest("sha512:00").is_err());
    }

    #[test]
    fn pages_are_sorted_and_link_the_next_one() {
        let paged = |query: &str| {
            let mut items: Vec<String> = ["c", "a", "d", "b"].map(String::from).to_vec();
            let uri: axum::http::Uri = format!("/v2/x/tags/list{query}").parse().unwrap();
            let next = page(&mut items, &uri, "/v2/x/tags/list");
            (items.join(","), next)
        };
        assert_eq!(paged(""), ("a,b,c,d".to_owned(), None));
        assert_eq!(
            paged("?n=2"),
            (
                "a,b".to_owned(),
                Some("</v2/x/tags/list?n=2&last=b>; rel=\"next\"".to_owned())
            )
        );
        assert_eq!(paged("?n=2&last=b"), ("c,d".to_owned(), None));
        assert_eq!(paged("?last=d"), (String::new(), None));
    }

    #[test]
    fn single_byte_ranges_are_served_and_others_ignored() {
        use RangeAnswer::{Ignored, Part, Unsatisfiable};
        assert_eq!(byte_range("bytes=0-9", 100), Part(0, 9));
        assert_eq!(byte_range("bytes=90-", 100), Part(90, 99));
        assert_eq!(byte_range("bytes=90-200", 100), Part(90, 99));
        assert_eq!(byte_range("bytes=-10", 100), Part(90, 99));
        assert_eq!(byte_range("bytes=-200", 100), Part(0, 99));
        assert_eq!(byte_range("bytes=100-", 100), Unsatisfiable);
        assert_eq!(byte_range("bytes=-0", 100), Unsatisfiable);
        for ignored in [
            "bytes=0-1,5-6",
            "items=0-1",
            "bytes=9-2",
            "bytes=x-",
            "bytes",
        ] {
            assert_eq!(byte_range(ignored, 100), Ignored, "{ignored}");
        }
    }

    #[test]
    fn basic_auth_is_parsed_checked_and_never_printed() {
        use base64::Engine as _;
        let auth = BasicAuth::parse("reader:pa:ss").unwrap();
        assert_eq!(auth, BasicAuth::new("reader", "pa:ss"));
        assert!(BasicAuth::parse(":secret").is_err());
        assert!(BasicAuth::parse("no-colon").is_err());
        assert!(!InvalidBasicAuth.to_string().contains("secret"));
        assert!(!format!("{auth:?}").contains("pa:ss"));
        let header = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            headers
        };
        let basic = |text: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(text)
            )
        };
        assert!(auth.accepts(&header(&basic("reader:pa:ss"))));
        assert!(auth.accepts(&header(&basic("reader:pa:ss").replace("Basic", "basic"))));
        for refused in [
            basic("reader:pa:sS"),
            basic("reader:pa"),
            basic("other:pa:ss"),
            "Bearer abc".to_owned(),
            "Basic !!!".to_owned(),
        ] {
            assert!(!auth.accepts(&header(&refused)), "{refused}");
        }
        assert!(!auth.accepts(&HeaderMap::new()));
    }
}
