//! Artifact storage on the local filesystem, in Flux's layout, served over HTTP.
//!
//! # Expected flow
//! A reconciler asks [`Storage::new_artifact`] for the artifact of a revision, writes it with
//! [`Storage::archive`] (a directory) or [`Storage::store`] (a ready-made file), records the
//! returned [`Artifact`] in `status.artifact`, then calls [`Storage::garbage_collect`].
//! [`Storage::router`] serves the files; consumers use [`crate::fetch::fetch_artifact`].
//!
//! # Guarantees
//! - Paths are `<kind>/<namespace>/<name>/<file>` below the root, `kind` lower-cased, and URLs
//!   `http://<advertised address>/<path>`, exactly as source-controller's.
//! - Writes are atomic (temporary file, fsync, rename): a reader sees the old file or the whole
//!   new one, never a partial file.
//! - The HTTP server only serves regular files below the root: no directory listings, no
//!   temporary files, no `..`; the only links it follows are those [`Storage::symlink`] makes
//!   (a plain file name in the same directory, e.g. `index.yaml` → `index-<hex>.yaml`).
//!
//! # Errors
//! [`crate::Error::InvalidArtifactPath`] for paths outside the layout, [`crate::Error::Io`]
//! with the path for filesystem failures, [`crate::Error::DigestMismatch`] from
//! [`Storage::verify`].

mod server;

use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

pub use capstan_api::meta::Artifact;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::artifact::{
    IgnoreFilter, Limits, ModePolicy, PackOptions, STORAGE_FILE_MODE, pack, write_atomically,
};
use crate::digest::{Digest, HashingWriter, digest_reader};
use crate::error::{Error, Result};

/// How many artifacts per object [`Storage::garbage_collect`] keeps by default (Flux's
/// `--artifact-retention-records`).
pub const DEFAULT_RETENTION: usize = 2;

/// A directory holding artifacts, and the address they are advertised at.
#[derive(Clone, Debug)]
pub struct Storage {
    root: PathBuf,
    base_url: String,
    limits: Limits,
}

/// The name prefix of a file being written into the storage (by [`crate::artifact::pack`]).
pub(crate) const PARTIAL_WRITE_PREFIX: &str = ".tmp-";

/// The age past which a partial write can only be a crash's leftover.
const STALE_PARTIAL_WRITE: std::time::Duration = std::time::Duration::from_secs(3600);

impl Storage {
    /// Storage under `root` (created when missing), advertised at `advertised_address`:
    /// `host:port` (served over plain HTTP, as Flux's `--storage-adv-addr`) or a full
    /// `http://` / `https://` base URL.
    pub fn new(root: impl Into<PathBuf>, advertised_address: &str) -> Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| Error::io("create directory", &root, e))?;
        let address = advertised_address.trim_end_matches('/');
        let base_url = if address.starts_with("http://") || address.starts_with("https://") {
            address.to_owned()
        } else {
            format!("http://{address}")
        };
        Ok(Self {
            root,
            base_url,
            limits: Limits::default(),
        })
    }

    /// Sets the limits [`Storage::archive`] packs within ([`Limits::default`] unless set):
    /// consumers extracting with the same limits can read every artifact stored.
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits artifacts are packed within.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The storage root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The base URL artifacts are advertised under, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `<kind>/<namespace>/<name>` with `kind` lower-cased.
    pub fn artifact_dir(kind: &str, namespace: &str, name: &str) -> String {
        format!("{}/{namespace}/{name}", kind.to_lowercase())
    }

    /// `<kind>/<namespace>/<name>/<file>` with `kind` lower-cased.
    pub fn artifact_path(kind: &str, namespace: &str, name: &str, file: &str) -> String {
        format!("{}/{file}", Self::artifact_dir(kind, namespace, name))
    }

    /// The advertised URL of an artifact path.
    pub fn url_for(&self, path: &str) -> String {
        format!("{}/{}", self.base_url, path.trim_start_matches('/'))
    }

    /// A not-yet-written artifact for `revision`, stored as `file`; its digest, size and time
    /// are filled in by [`Storage::archive`] or [`Storage::store`].
    pub fn new_artifact(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        revision: &str,
        file: &str,
    ) -> Artifact {
        let path = Self::artifact_path(kind, namespace, name, file);
        Artifact {
            url: self.url_for(&path),
            path,
            revision: revision.to_owned(),
            digest: String::new(),
            last_update_time: now(),
            size: None,
            metadata: std::collections::BTreeMap::new(),
        }
    }

    /// The file of an artifact path, refusing anything that is not a plain relative path
    /// below the root.
    pub fn local_path(&self, path: &str) -> Result<PathBuf> {
        let invalid = |reason| Error::InvalidArtifactPath {
            path: path.to_owned(),
            reason,
        };
        if path.is_empty() {
            return Err(invalid("empty path"));
        }
        let mut local = self.root.clone();
        for segment in path.trim_start_matches('/').split('/') {
            if !valid_segment(segment) {
                return Err(invalid(
                    "segments must be non-empty names that do not start with a dot",
                ));
            }
            local.push(segment);
        }
        Ok(local)
    }

    /// Packs `dir` into the artifact's file (Flux's storage layout: normalised modes, ignore
    /// rules from `filter`) and fills in its digest, size and last update time. A tree beyond
    /// [`Storage::limits`] is refused with [`crate::Error::LimitExceeded`] naming the file, and
    /// nothing is stored.
    pub fn archive(
        &self,
        artifact: &mut Artifact,
        dir: &Path,
        filter: Option<&IgnoreFilter>,
    ) -> Result<()> {
        let path = self.local_path(&artifact.path)?;
        let options = PackOptions {
            filter,
            modes: ModePolicy::Normalize,
            limits: Some(&self.limits),
        };
        let packed = write_atomically(&path, STORAGE_FILE_MODE, |file| {
            pack(dir, std::io::BufWriter::new(file), &options)
        })?;
        artifact.digest = packed.digest.to_string();
        artifact.size = Some(i64::try_from(packed.size).unwrap_or(i64::MAX));
        artifact.last_update_time = now();
        Ok(())
    }

    /// Stores the bytes of `reader` as the artifact's file (e.g. an OCI layer copied as it is)
    /// and fills in its digest, size and last update time.
    pub fn store(&self, artifact: &mut Artifact, mut reader: impl Read) -> Result<()> {
        let path = self.local_path(&artifact.path)?;
        let (digest, size) = write_atomically(&path, STORAGE_FILE_MODE, |file| {
            let mut writer = HashingWriter::new(std::io::BufWriter::new(file));
            std::io::copy(&mut reader, &mut writer).map_err(|e| Error::io("write", &path, e))?;
            let (mut inner, digest, size) = writer.finish();
            inner.flush().map_err(|e| Error::io("write", &path, e))?;
            Ok((digest, size))
        })?;
        artifact.digest = digest.to_string();
        artifact.size = Some(i64::try_from(size).unwrap_or(i64::MAX));
        artifact.last_update_time = now();
        Ok(())
    }

    /// Whether the artifact's file exists as a regular file.
    pub fn exists(&self, artifact: &Artifact) -> bool {
        self.local_path(&artifact.path)
            .ok()
            .and_then(|path| std::fs::symlink_metadata(path).ok())
            .is_some_and(|metadata| metadata.is_file())
    }

    /// Recomputes the digest of the artifact's file and compares it with `artifact.digest`.
    pub fn verify(&self, artifact: &Artifact) -> Result<()> {
        let expected: Digest = artifact.digest.parse()?;
        let path = self.local_path(&artifact.path)?;
        let file = std::fs::File::open(&path).map_err(|e| Error::io("read", &path, e))?;
        let (actual, _) =
            digest_reader(BufReader::new(file)).map_err(|e| Error::io("read", &path, e))?;
        if actual != expected {
            return Err(Error::DigestMismatch {
                subject: path.display().to_string(),
                expected: expected.to_string(),
                actual: actual.to_string(),
            });
        }
        Ok(())
    }

    /// Deletes older files of the artifact's object so that at most `keep` remain, the
    /// current artifact always among them; returns the deleted paths. Newer files (by
    /// modification time) are kept first, as Flux's garbage collector does. Partial writes
    /// (`.tmp-*`) older than an hour, left by a crash, are deleted too.
    pub fn garbage_collect(&self, artifact: &Artifact, keep: usize) -> Result<Vec<PathBuf>> {
        let current = self.local_path(&artifact.path)?;
        let Some(dir) = current.parent() else {
            return Ok(Vec::new());
        };
        let mut others = Vec::new();
        let mut deleted = Vec::new();
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("read directory", dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let metadata = entry
                .metadata()
                .map_err(|e| Error::io("inspect", &path, e))?;
            let modified = metadata
                .modified()
                .map_err(|e| Error::io("inspect", &path, e))?;
            if name.starts_with(PARTIAL_WRITE_PREFIX)
                && metadata.is_file()
                && modified
                    .elapsed()
                    .is_ok_and(|age| age > STALE_PARTIAL_WRITE)
            {
                // A write interrupted by a crash: no live write is this old.
                std::fs::remove_file(&path).map_err(|e| Error::io("delete", &path, e))?;
                deleted.push(path);
                continue;
            }
            if path == current
                || !metadata.is_file()
                || name.starts_with('.')
                || name.ends_with(".lock")
            {
                continue;
            }
            others.push((modified, path));
        }
        // Newest first; names break ties so the order is stable.
        others.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
        for (_, path) in others.into_iter().skip(keep.saturating_sub(1)) {
            std::fs::remove_file(&path).map_err(|e| Error::io("delete", &path, e))?;
            deleted.push(path);
        }
        Ok(deleted)
    }

    /// Points the stable name `alias` (e.g. `index.yaml`, `latest.tar.gz`) of the artifact's
    /// directory at the artifact's file, as source-controller's `Storage.Symlink` does, and
    /// returns its URL (a HelmRepository's or HelmChart's `status.url`). The link is relative
    /// and replaced atomically; [`Storage::router`] serves it as the file it names, and
    /// [`Storage::garbage_collect`] never counts or deletes it.
    pub fn symlink(&self, artifact: &Artifact, alias: &str) -> Result<String> {
        let current = self.local_path(&artifact.path)?;
        let (Some(dir), Some(target)) = (current.parent(), current.file_name()) else {
            return Err(Error::InvalidArtifactPath {
                path: artifact.path.clone(),
                reason: "no file name",
            });
        };
        let alias_path = Path::new(&artifact.path)
            .parent()
            .map(|parent| format!("{}/{alias}", parent.display()))
            .unwrap_or_default();
        let link = self.local_path(&alias_path)?;
        let staged = dir.join(format!("{PARTIAL_WRITE_PREFIX}link-{alias}"));
        let _ = std::fs::remove_file(&staged);
        std::os::unix::fs::symlink(target, &staged)
            .map_err(|e| Error::io("create link", &staged, e))?;
        std::fs::rename(&staged, &link).map_err(|e| Error::io("rename", &link, e))?;
        Ok(self.url_for(&alias_path))
    }

    /// Deletes every artifact of an object (when the object is deleted).
    pub fn remove_all(&self, kind: &str, namespace: &str, name: &str) -> Result<()> {
        let dir = self.local_path(&Self::artifact_dir(kind, namespace, name))?;
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io("delete", dir, e)),
            _ => Ok(()),
        }
    }

    /// An HTTP router serving the artifacts at `GET /<kind>/<namespace>/<name>/<file>`.
    pub fn router(&self) -> axum::Router {
        server::router(self.root.clone())
    }
}

/// The artifact file name for a revision, as source-controller names them: the hash after the
/// last `:` (`main@sha1:<hash>` → `<hash>.<extension>`), or the whole revision when it has none,
/// with anything but `[A-Za-z0-9._-]` replaced by `-`.
pub fn revision_file_name(revision: &str, extension: &str) -> String {
    let hash = revision.rsplit(':').next().unwrap_or(revision);
    let mut name: String = hash
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with('.') {
        name.insert(0, 'r');
    }
    format!("{name}.{extension}")
}

fn valid_segment(segment: &str) -> bool {
    !segment.is_empty() && !segment.starts_with('.') && !segment.contains(['\\', '\0'])
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests;
