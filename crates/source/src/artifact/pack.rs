//! Packing a directory into a deterministic gzip-compressed tarball, in the layout Flux writes.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;

use super::{IgnoreFilter, Limits};
use crate::digest::{Digest, HashingWriter};
use crate::error::{Error, Result};

/// Permission mode of regular files in a storage artifact (Flux's `DefaultFileMode`).
pub const STORAGE_FILE_MODE: u32 = 0o600;
/// Permission mode of executable files in a storage artifact (Flux's `DefaultExeFileMode`).
pub const STORAGE_EXE_MODE: u32 = 0o700;
/// Permission mode of directories in a storage artifact (Flux's `DefaultDirMode`).
pub const STORAGE_DIR_MODE: u32 = 0o750;

/// How entry permission bits are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ModePolicy {
    /// Keep the permission, setuid, setgid and sticky bits from disk, as `flux push artifact` does.
    #[default]
    Preserve,
    /// Write `0750` for directories, `0700` for executable files and `0600` for other files,
    /// as source-controller does for artifacts in its storage.
    Normalize,
}

/// Options for [`pack`].
#[derive(Clone, Copy, Debug, Default)]
pub struct PackOptions<'a> {
    /// Paths to leave out; `None` keeps everything.
    pub filter: Option<&'a IgnoreFilter>,
    /// How permission bits are written.
    pub modes: ModePolicy,
    /// Limits the tarball must stay within, so that every consumer extracting it with the
    /// same [`Limits`] can read it (file size, total size, entry count, compressed size);
    /// `None` packs anything.
    pub limits: Option<&'a Limits>,
}

/// What [`pack`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packed {
    /// Digest of the gzip-compressed tarball (the artifact or layer digest).
    pub digest: Digest,
    /// Size of the gzip-compressed tarball in bytes.
    pub size: u64,
    /// Digest of the uncompressed tar stream (the OCI `diff_id`).
    pub diff_id: Digest,
    /// Number of entries written, the root `.` entry included.
    pub entries: u64,
}

/// Writes `dir` as a gzip-compressed tarball to `out`.
///
/// The layout matches Flux's (`fluxcd/pkg/tar`, source-controller's `Storage.Archive`):
/// entries in lexical order, depth first, starting with the root as `.`; names relative to
/// `dir` with `/` separators and no trailing slash on directories; USTAR headers (PAX records
/// only for names too long for USTAR); uid/gid 0, empty user and group names, modification
/// time 0 (1970-01-01); symlinks and special files skipped. Output is byte-for-byte
/// deterministic for the same tree, names, contents and modes.
pub fn pack<W: Write>(dir: &Path, out: W, options: &PackOptions<'_>) -> Result<Packed> {
    let metadata = std::fs::metadata(dir).map_err(|e| Error::io("read", dir, e))?;
    if !metadata.is_dir() {
        return Err(Error::NotADirectory {
            path: dir.to_owned(),
        });
    }
    let gzip_out = HashingWriter::new(out);
    let encoder = GzEncoder::new(gzip_out, Compression::default());
    let tar_out = HashingWriter::new(encoder);
    let mut builder = tar::Builder::new(tar_out);
    let mut walker = Walker {
        root: dir,
        options,
        entries: 0,
        bytes: 0,
    };
    walker.append(&mut builder, Path::new(""), &metadata)?;
    let entries = walker.entries;
    let write_error = |e| Error::io("write tarball for", dir, e);
    let tar_out = builder.into_inner().map_err(write_error)?;
    let (encoder, diff_id, _) = tar_out.finish();
    let gzip_out = encoder.finish().map_err(write_error)?;
    let (mut out, digest, size) = gzip_out.finish();
    out.flush().map_err(write_error)?;
    if let Some(limits) = options.limits
        && size > limits.max_archive_bytes
    {
        return Err(Error::LimitExceeded {
            entry: String::new(),
            what: format!("compressed artifact size {size}"),
            limit: limits.max_archive_bytes,
        });
    }
    Ok(Packed {
        digest,
        size,
        diff_id,
        entries,
    })
}

/// Writes `dir` as a gzip-compressed tarball to the file `path`, atomically: the tarball is
/// written to a temporary file beside `path`, flushed to disk and renamed over `path`.
pub fn pack_to_file(dir: &Path, path: &Path, options: &PackOptions<'_>) -> Result<Packed> {
    write_atomically(path, STORAGE_FILE_MODE, |file| {
        pack(dir, BufWriter::new(file), options)
    })
}

/// Runs `write` on a temporary file beside `path`, then fsyncs, sets `mode` and renames it to
/// `path`, and fsyncs the directory. The temporary file is removed when anything fails.
pub(crate) fn write_atomically<T>(
    path: &Path,
    mode: u32,
    write: impl FnOnce(&mut File) -> Result<T>,
) -> Result<T> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| Error::io("create directory", &parent, e))?;
    let mut temp = tempfile::Builder::new()
        .prefix(crate::storage::PARTIAL_WRITE_PREFIX)
        .tempfile_in(&parent)
        .map_err(|e| Error::io("create a temporary file in", &parent, e))?;
    let value = write(temp.as_file_mut())?;
    let file = temp.as_file();
    file.sync_all()
        .map_err(|e| Error::io("flush", temp.path(), e))?;
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| Error::io("set permissions of", temp.path(), e))?;
    temp.persist(path)
        .map_err(|e| Error::io("rename a temporary file to", path, e.error))?;
    // Make the rename itself durable.
    if let Ok(dir) = File::open(&parent) {
        let _ = dir.sync_all();
    }
    Ok(value)
}

struct Walker<'a> {
    root: &'a Path,
    options: &'a PackOptions<'a>,
    entries: u64,
    /// Sum of the file sizes written.
    bytes: u64,
}

impl Walker<'_> {
    fn append<W: Write>(
        &mut self,
        builder: &mut tar::Builder<W>,
        relative: &Path,
        metadata: &std::fs::Metadata,
    ) -> Result<()> {
        let path = self.root.join(relative);
        let is_dir = metadata.is_dir();
        let filter = self.options.filter;
        let ignored = !relative.as_os_str().is_empty()
            && filter.is_some_and(|f| f.is_ignored(relative, is_dir));
        if !ignored {
            self.write_entry(builder, relative, &path, metadata)?;
        }
        if !is_dir || (ignored && !filter.is_some_and(IgnoreFilter::has_negations)) {
            return Ok(());
        }
        let mut children = Vec::new();
        for entry in std::fs::read_dir(&path).map_err(|e| Error::io("read directory", &path, e))? {
            let entry = entry.map_err(|e| Error::io("read directory", &path, e))?;
            children.push(entry.file_name());
        }
        // Lexical byte order of names, as Go's filepath.WalkDir.
        children.sort_by(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
        for name in children {
            let child = relative.join(&name);
            let child_path = self.root.join(&child);
            let metadata = std::fs::symlink_metadata(&child_path)
                .map_err(|e| Error::io("read", &child_path, e))?;
            // Symlinks and special files are skipped, as Flux does.
            if metadata.is_dir() || metadata.is_file() {
                self.append(builder, &child, &metadata)?;
            }
        }
        Ok(())
    }

    fn write_entry<W: Write>(
        &mut self,
        builder: &mut tar::Builder<W>,
        relative: &Path,
        path: &Path,
        metadata: &std::fs::Metadata,
    ) -> Result<()> {
        let name = if relative.as_os_str().is_empty() {
            ".".to_owned()
        } else {
            relative
                .to_str()
                .ok_or_else(|| Error::UnsafeEntry {
                    entry: relative.display().to_string(),
                    reason: "file name is not valid UTF-8".to_owned(),
                })?
                .to_owned()
        };
        self.check_limits(&name, metadata)?;
        let mode = entry_mode(metadata, self.options.modes);
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(if metadata.is_dir() {
            tar::EntryType::Directory
        } else {
            tar::EntryType::Regular
        });
        header.set_mode(mode);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        header.set_size(if metadata.is_dir() { 0 } else { metadata.len() });
        header.set_device_major(0).expect("ustar header");
        header.set_device_minor(0).expect("ustar header");
        let write_error = |e| Error::io("write tarball entry for", path, e);
        if !set_ustar_name(&mut header, &name) {
            builder
                .append_pax_extensions([("path", name.as_bytes())])
                .map_err(write_error)?;
            set_ustar_name(&mut header, truncate_name(&name));
        }
        header.set_cksum();
        if metadata.is_dir() {
            builder.append(&header, io::empty()).map_err(write_error)?;
        } else {
            let file = File::open(path).map_err(|e| Error::io("read", path, e))?;
            let mut reader = io::Read::take(file, metadata.len());
            builder.append(&header, &mut reader).map_err(write_error)?;
            if reader.limit() != 0 {
                return Err(Error::io(
                    "read",
                    path,
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while being archived",
                    ),
                ));
            }
        }
        self.entries += 1;
        Ok(())
    }
}

impl Walker<'_> {
    /// Refuses the entry `name` when the tarball would exceed the limits with it, the same
    /// checks, counted the same way, as extraction makes.
    fn check_limits(&mut self, name: &str, metadata: &std::fs::Metadata) -> Result<()> {
        let Some(limits) = self.options.limits else {
            return Ok(());
        };
        let exceeded = |what: String, limit: u64| Error::LimitExceeded {
            entry: name.to_owned(),
            what,
            limit,
        };
        let entries = self.entries + 1;
        if entries > limits.max_entries {
            return Err(exceeded(
                format!("entry count {entries}"),
                limits.max_entries,
            ));
        }
        if metadata.is_file() {
            let size = metadata.len();
            if size > limits.max_file_bytes {
                return Err(exceeded(format!("file size {size}"), limits.max_file_bytes));
            }
            let total = self.bytes.saturating_add(size);
            if total > limits.max_total_bytes {
                return Err(exceeded(
                    format!("total size {total}"),
                    limits.max_total_bytes,
                ));
            }
            self.bytes = total;
        }
        Ok(())
    }
}

fn entry_mode(metadata: &std::fs::Metadata, policy: ModePolicy) -> u32 {
    let mode = metadata.permissions().mode();
    match policy {
        ModePolicy::Preserve => mode & 0o7777,
        ModePolicy::Normalize if metadata.is_dir() => STORAGE_DIR_MODE,
        ModePolicy::Normalize if mode & 0o111 != 0 => STORAGE_EXE_MODE,
        ModePolicy::Normalize => STORAGE_FILE_MODE,
    }
}

/// Writes `name` into the USTAR name (and prefix) fields, splitting at a `/` when longer than
/// 100 bytes, as Go's archive/tar does. Returns false when it does not fit.
fn set_ustar_name(header: &mut tar::Header, name: &str) -> bool {
    let bytes = name.as_bytes();
    let ustar = header.as_ustar_mut().expect("ustar header");
    ustar.name = [0; 100];
    ustar.prefix = [0; 155];
    if bytes.len() <= 100 {
        ustar.name[..bytes.len()].copy_from_slice(bytes);
        return true;
    }
    if !name.is_ascii() {
        return false;
    }
    // The prefix takes at most 155 bytes, the name after the separating slash at most 100.
    let search_end = bytes.len().min(156);
    let Some(split) = bytes[..search_end].iter().rposition(|&b| b == b'/') else {
        return false;
    };
    let (prefix, rest) = (&bytes[..split], &bytes[split + 1..]);
    if split == 0 || rest.is_empty() || rest.len() > 100 || prefix.len() > 155 {
        return false;
    }
    ustar.prefix[..prefix.len()].copy_from_slice(prefix);
    ustar.name[..rest.len()].copy_from_slice(rest);
    true
}

/// A best-effort short name for the USTAR fields when the real name travels in a PAX record.
fn truncate_name(name: &str) -> &str {
    let mut end = name.len().min(100);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}
