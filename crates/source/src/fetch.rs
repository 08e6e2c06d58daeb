//! The consumer side: download an artifact by URL, verify its digest, extract it safely.
//!
//! # Expected flow
//! A consumer (kustomize or helm reconciler) reads `status.artifact.url` and `.digest` from its
//! source and calls [`fetch_artifact`] with a fresh target directory.
//!
//! # Guarantees
//! Nothing is extracted before the whole download matched the digest; the download is capped
//! at [`Limits::max_archive_bytes`] and lands in a temporary file beside the target, removed
//! on every exit path.
//!
//! # Errors
//! [`crate::Error::Http`] / [`crate::Error::HttpStatus`] for transport failures,
//! [`crate::Error::DigestMismatch`] for content that does not match, and the extraction
//! errors of [`crate::artifact::extract`].

use std::io::{Seek, Write};
use std::path::Path;

use futures::StreamExt;

use crate::artifact::{Extracted, Limits, extract};
use crate::digest::{Digest, HashingWriter};
use crate::error::{Error, Result};

/// Downloads the tarball at `url`, checks it against `expected`, and extracts it into
/// `target` (which must not exist or be empty) within `limits`.
///
/// The limits are applied as [`Limits::for_stored_artifacts`]: the sizes and the entry count
/// bound what is downloaded and written while it streams, and the compression ratio is not
/// checked, so every artifact a source packed within the same limits can be read.
pub async fn fetch_artifact(
    url: &str,
    expected: &Digest,
    target: &Path,
    limits: &Limits,
) -> Result<Extracted> {
    crate::tls::install_default_provider();
    let client = reqwest::Client::builder()
        .build()
        .map_err(|source| Error::Http {
            url: url.to_owned(),
            source,
        })?;
    fetch_artifact_with(&client, url, expected, target, limits).await
}

/// [`fetch_artifact`] with a caller-provided HTTP client (for connection reuse, custom CAs or
/// timeouts).
pub async fn fetch_artifact_with(
    client: &reqwest::Client,
    url: &str,
    expected: &Digest,
    target: &Path,
    limits: &Limits,
) -> Result<Extracted> {
    let http_error = |source| Error::Http {
        url: url.to_owned(),
        source,
    };
    let response = client.get(url).send().await.map_err(http_error)?;
    if !response.status().is_success() {
        return Err(Error::HttpStatus {
            url: url.to_owned(),
            status: response.status().as_u16(),
        });
    }
    let too_large = |size: u64| Error::LimitExceeded {
        entry: String::new(),
        what: format!("download size {size} of {url}"),
        limit: limits.max_archive_bytes,
    };
    if let Some(length) = response
        .content_length()
        .filter(|&length| length > limits.max_archive_bytes)
    {
        return Err(too_large(length));
    }

    let parent = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| Error::io("create directory", &parent, e))?;
    let temp = tempfile::Builder::new()
        .prefix(".download-")
        .tempfile_in(&parent)
        .map_err(|e| Error::io("create a temporary file in", &parent, e))?;
    let mut writer = HashingWriter::new(std::io::BufWriter::new(temp.as_file()));
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(http_error)?;
        if writer.written() + chunk.len() as u64 > limits.max_archive_bytes {
            return Err(too_large(writer.written() + chunk.len() as u64));
        }
        writer
            .write_all(&chunk)
            .map_err(|e| Error::io("write", temp.path(), e))?;
    }
    let (mut inner, actual, _) = writer.finish();
    inner
        .flush()
        .map_err(|e| Error::io("write", temp.path(), e))?;
    drop(inner);
    if &actual != expected {
        return Err(Error::DigestMismatch {
            subject: url.to_owned(),
            expected: expected.to_string(),
            actual: actual.to_string(),
        });
    }

    let target = target.to_owned();
    let limits = limits.for_stored_artifacts();
    tokio::task::spawn_blocking(move || {
        let mut file = temp.as_file();
        file.rewind()
            .map_err(|e| Error::io("read", temp.path(), e))?;
        extract(std::io::BufReader::new(file), &target, &limits)
    })
    .await
    .map_err(Error::Task)?
}
