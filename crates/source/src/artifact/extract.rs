//! Safe extraction of untrusted gzip-compressed tarballs.

use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use flate2::read::GzDecoder;

use crate::error::{Error, Result};

/// Limits enforced while extracting a tarball; exceeding any of them aborts the extraction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest compressed archive accepted, in bytes (also caps downloads).
    pub max_archive_bytes: u64,
    /// Largest sum of all file sizes, in bytes.
    pub max_total_bytes: u64,
    /// Largest single file, in bytes.
    pub max_file_bytes: u64,
    /// Most entries (files, directories and links).
    pub max_entries: u64,
    /// Largest ratio of decompressed to compressed bytes, checked once more than
    /// [`Limits::RATIO_CHECK_FLOOR`] bytes were decompressed; a guard against decompression bombs.
    pub max_compression_ratio: u64,
}

impl Limits {
    /// Decompressed bytes below which the compression ratio is not checked: tiny archives
    /// legitimately compress very well.
    pub const RATIO_CHECK_FLOOR: u64 = 1 << 20;

    /// Largest tar extension record (GNU long name `L`, long link name `K`, PAX `x` and global
    /// PAX `g`) accepted, in bytes. The `tar` crate holds such a record in memory whole, so it
    /// is refused from its header, before any of its bytes are read.
    pub const MAX_EXTENSION_BYTES: u64 = 1 << 20;

    /// The limits for reading an artifact back from storage: the same sizes and entry count,
    /// without the compression ratio. The source checked the content when it stored it, and
    /// the total and per-file sizes bound what is written while the tarball streams, so a file
    /// of zeros the source accepted is one every consumer can read.
    #[must_use]
    pub fn for_stored_artifacts(self) -> Self {
        Self {
            max_compression_ratio: u64::MAX,
            ..self
        }
    }

    /// No limits at all; only for trusted input.
    pub const UNLIMITED: Self = Self {
        max_archive_bytes: u64::MAX,
        max_total_bytes: u64::MAX,
        max_file_bytes: u64::MAX,
        max_entries: u64::MAX,
        max_compression_ratio: u64::MAX,
    };
}

impl Default for Limits {
    /// 512 MiB compressed, 1 GiB in total, 256 MiB per file, 100,000 entries, ratio 200.
    fn default() -> Self {
        Self {
            max_archive_bytes: 512 << 20,
            max_total_bytes: 1 << 30,
            max_file_bytes: 256 << 20,
            max_entries: 100_000,
            max_compression_ratio: 200,
        }
    }
}

/// What [`extract`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extracted {
    /// Regular files written (hard links included).
    pub files: u64,
    /// Directories created.
    pub directories: u64,
    /// Symbolic links created.
    pub symlinks: u64,
    /// Sum of the file sizes written.
    pub bytes: u64,
}

/// Extracts the gzip-compressed tarball read from `reader` into the directory `target`.
///
/// `target` must not exist or be an empty directory. The tarball is unpacked into a fresh
/// temporary directory beside `target`, which is renamed to `target` only when every entry
/// passed the checks, so a refused tarball leaves nothing behind.
///
/// Refused: absolute names and names with `..`; entries reached through a symlink; symlinks
/// whose target (followed through the extracted tree) leaves `target`; hard links to anything
/// but a regular file extracted earlier; devices, FIFOs and other special files; anything
/// beyond `limits`. Permission bits are kept without setuid/setgid/sticky, and the owner can
/// always read and write; ownership and modification times are not restored.
pub fn extract(reader: impl Read, target: &Path, limits: &Limits) -> Result<Extracted> {
    let parent = prepare_target(target)?;
    let temp = tempfile::Builder::new()
        .prefix(".extract-")
        .tempdir_in(&parent)
        .map_err(|e| Error::io("create a temporary directory in", &parent, e))?;
    let root = temp.path();
    let summary = Unpacker::new(root, limits).run(reader)?;
    if target.exists() {
        std::fs::remove_dir(target).map_err(|e| Error::io("replace", target, e))?;
    }
    std::fs::rename(root, target).map_err(|e| Error::io("rename extracted files to", target, e))?;
    // The directory now lives at `target`; nothing is left for the guard to clean up.
    let _ = temp.keep();
    Ok(summary)
}

/// [`extract`] from a file.
pub fn extract_file(archive: &Path, target: &Path, limits: &Limits) -> Result<Extracted> {
    let file = File::open(archive).map_err(|e| Error::io("read", archive, e))?;
    extract(BufReader::new(file), target, limits)
}

/// Checks that `target` is absent or an empty directory, creates its parent, returns the parent.
fn prepare_target(target: &Path) -> Result<PathBuf> {
    match std::fs::symlink_metadata(target) {
        Ok(metadata) if metadata.is_dir() => {
            let mut entries =
                std::fs::read_dir(target).map_err(|e| Error::io("read directory", target, e))?;
            if entries.next().is_some() {
                return Err(Error::TargetNotEmpty {
                    path: target.to_owned(),
                });
            }
        }
        Ok(_) => {
            return Err(Error::TargetNotEmpty {
                path: target.to_owned(),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("inspect", target, e)),
    }
    let parent = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| Error::io("create directory", &parent, e))?;
    Ok(parent)
}

/// Byte counters shared between the compressed and decompressed sides of the stream.
#[derive(Debug, Default)]
struct Counters {
    compressed: Cell<u64>,
    decompressed: Cell<u64>,
    /// Set when a reader refused to continue because of a limit.
    tripped: Cell<Option<Trip>>,
}

#[derive(Clone, Copy, Debug)]
enum Trip {
    ArchiveSize,
    Ratio(u64),
    /// An extension record of this type and size.
    Extension(u8, u64),
    /// A header whose size field cannot be read.
    BadHeader,
    /// A GNU sparse entry.
    Sparse,
}

/// Parses the decompressed tar stream block by block, as it passes to the `tar` crate, and
/// refuses an extension record (`L`, `K`, `x`, `g`) larger than
/// [`Limits::MAX_EXTENSION_BYTES`] from its header, before the `tar` crate would buffer it.
/// It follows the stream as the `tar` crate does (a PAX `size` overrides the header's), and
/// refuses GNU sparse entries, whose extra header blocks it does not follow.
struct HeaderGuard<R> {
    inner: R,
    counters: Rc<Counters>,
    /// The header being assembled.
    header: [u8; 512],
    filled: usize,
    /// Bytes of data and padding left before the next header.
    skip: u64,
    /// Data bytes of the PAX record being read, and how many of them are still to come.
    pax: Option<(Vec<u8>, u64)>,
    /// The `size` of the last complete PAX record, for the next entry.
    pax_size: Option<u64>,
}

impl<R: Read> HeaderGuard<R> {
    fn new(inner: R, counters: Rc<Counters>) -> Self {
        Self {
            inner,
            counters,
            header: [0; 512],
            filled: 0,
            skip: 0,
            pax: None,
            pax_size: None,
        }
    }

    fn trip(&self, trip: Trip) -> io::Error {
        self.counters.tripped.set(Some(trip));
        io::Error::other("tar header refused")
    }

    /// Follows the block structure through `bytes`; an error when a header is refused.
    fn scan(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = usize::try_from(self.skip)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                if let Some((data, left)) = self.pax.as_mut() {
                    let take = usize::try_from(*left).unwrap_or(usize::MAX).min(n);
                    data.extend_from_slice(&bytes[..take]);
                    *left -= take as u64;
                    if *left == 0 {
                        self.pax_size = pax_size(data);
                        self.pax = None;
                    }
                }
                self.skip -= n as u64;
                bytes = &bytes[n..];
                continue;
            }
            let n = (512 - self.filled).min(bytes.len());
            self.header[self.filled..self.filled + n].copy_from_slice(&bytes[..n]);
            self.filled += n;
            bytes = &bytes[n..];
            if self.filled < 512 {
                continue;
            }
            self.filled = 0;
            if self.header.iter().all(|&b| b == 0) {
                continue;
            }
            let kind = self.header[156];
            let Some(mut size) = header_size(&self.header[124..136]) else {
                return Err(self.trip(Trip::BadHeader));
            };
            let extension = matches!(kind, b'L' | b'K' | b'x' | b'g');
            if extension && size > Limits::MAX_EXTENSION_BYTES {
                return Err(self.trip(Trip::Extension(kind, size)));
            }
            if kind == b'S' {
                return Err(self.trip(Trip::Sparse));
            }
            // As the `tar` crate: a PAX record describes the next entry that is not an
            // extension record, and a global header (returned as an entry) consumes it.
            if (!extension || kind == b'g')
                && let Some(pax_size) = self.pax_size.take()
                && kind != b'g'
            {
                size = pax_size;
            }
            if kind == b'x' {
                self.pax = (size > 0).then(|| (Vec::new(), size));
                self.pax_size = None;
            }
            self.skip = size.div_ceil(512).saturating_mul(512);
        }
        Ok(())
    }
}

impl<R: Read> Read for HeaderGuard<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.scan(&buf[..n])?;
        Ok(n)
    }
}

/// The first `size` record of PAX extended header data, read exactly as the `tar` crate
/// reads it (newline-separated `<length> <key>=<value>` records): `None` when a record before
/// it is malformed.
fn pax_size(data: &[u8]) -> Option<u64> {
    for line in data.split(|&b| b == b'\n') {
        if line.is_empty() {
            return None;
        }
        let space = line.iter().position(|&b| b == b' ')?;
        let length: usize = std::str::from_utf8(&line[..space]).ok()?.parse().ok()?;
        if line.len() + 1 != length {
            return None;
        }
        let record = &line[space + 1..];
        let equals = record.iter().position(|&b| b == b'=')?;
        if &record[..equals] == b"size" {
            return std::str::from_utf8(&record[equals + 1..])
                .ok()?
                .parse()
                .ok();
        }
    }
    None
}

/// The value of a tar header's size field: octal digits (space or NUL padded), or GNU's
/// base-256 form (high bit set). `None` when it is neither.
fn header_size(field: &[u8]) -> Option<u64> {
    if field[0] & 0x80 != 0 {
        let mut value: u64 = u64::from(field[0] & 0x7f);
        for &byte in &field[1..] {
            value = value.checked_mul(256)?.checked_add(u64::from(byte))?;
        }
        return Some(value);
    }
    let text = std::str::from_utf8(field).ok()?;
    let digits = text.trim_matches(|c: char| c == ' ' || c == '\0');
    if digits.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(digits, 8).ok()
}

struct CountingReader<R> {
    inner: R,
    counters: Rc<Counters>,
    limits: Limits,
    compressed_side: bool,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let counters = &self.counters;
        if self.compressed_side {
            let total = counters.compressed.get() + n as u64;
            counters.compressed.set(total);
            if total > self.limits.max_archive_bytes {
                counters.tripped.set(Some(Trip::ArchiveSize));
                return Err(io::Error::other("archive size limit exceeded"));
            }
        } else {
            let total = counters.decompressed.get() + n as u64;
            counters.decompressed.set(total);
            let compressed = counters.compressed.get().max(1);
            if total > Limits::RATIO_CHECK_FLOOR
                && total / compressed > self.limits.max_compression_ratio
            {
                counters.tripped.set(Some(Trip::Ratio(total / compressed)));
                return Err(io::Error::other("compression ratio limit exceeded"));
            }
        }
        Ok(n)
    }
}

struct Unpacker<'a> {
    root: &'a Path,
    limits: &'a Limits,
    counters: Rc<Counters>,
    summary: Extracted,
    entries: u64,
    symlinks: Vec<(String, Vec<String>)>,
}

impl<'a> Unpacker<'a> {
    fn new(root: &'a Path, limits: &'a Limits) -> Self {
        Self {
            root,
            limits,
            counters: Rc::default(),
            summary: Extracted::default(),
            entries: 0,
            symlinks: Vec::new(),
        }
    }

    fn run(mut self, reader: impl Read) -> Result<Extracted> {
        let compressed = CountingReader {
            inner: reader,
            counters: Rc::clone(&self.counters),
            limits: *self.limits,
            compressed_side: true,
        };
        let decompressed = CountingReader {
            inner: GzDecoder::new(compressed),
            counters: Rc::clone(&self.counters),
            limits: *self.limits,
            compressed_side: false,
        };
        let mut archive =
            tar::Archive::new(HeaderGuard::new(decompressed, Rc::clone(&self.counters)));
        let entries = archive.entries().map_err(|e| self.stream_error("", e))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| self.stream_error("", e))?;
            let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            self.unpack_entry(&mut entry, &name)?;
        }
        self.check_symlinks()?;
        Ok(self.summary)
    }

    /// Turns a read error into the limit error that caused it, or an invalid-archive error.
    fn stream_error(&self, entry: &str, source: io::Error) -> Error {
        match self.counters.tripped.get() {
            Some(Trip::ArchiveSize) => Error::LimitExceeded {
                entry: entry.to_owned(),
                what: format!("compressed archive size {}", self.counters.compressed.get()),
                limit: self.limits.max_archive_bytes,
            },
            Some(Trip::Ratio(ratio)) => Error::LimitExceeded {
                entry: entry.to_owned(),
                what: format!("compression ratio {ratio} (decompression bomb?)"),
                limit: self.limits.max_compression_ratio,
            },
            Some(Trip::Extension(kind, size)) => Error::LimitExceeded {
                entry: entry.to_owned(),
                what: format!(
                    "{} record of {size} bytes",
                    match kind {
                        b'L' => "GNU long name",
                        b'K' => "GNU long link name",
                        b'x' => "PAX extended header",
                        _ => "PAX global header",
                    }
                ),
                limit: Limits::MAX_EXTENSION_BYTES,
            },
            Some(Trip::BadHeader) => Error::InvalidArchive {
                detail: "unreadable size in a tar header".to_owned(),
                source: Some(source),
            },
            Some(Trip::Sparse) => Error::InvalidArchive {
                detail: "GNU sparse entries are not supported".to_owned(),
                source: Some(source),
            },
            None => Error::InvalidArchive {
                detail: if entry.is_empty() {
                    "cannot read gzip/tar stream".to_owned()
                } else {
                    format!("cannot read entry {entry:?}")
                },
                source: Some(source),
            },
        }
    }

    fn unsafe_entry(name: &str, reason: impl Into<String>) -> Error {
        Error::UnsafeEntry {
            entry: name.to_owned(),
            reason: reason.into(),
        }
    }

    fn unpack_entry<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>, name: &str) -> Result<()> {
        let kind = entry.header().entry_type();
        if matches!(kind, tar::EntryType::XGlobalHeader) {
            return Ok(());
        }
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(Error::LimitExceeded {
                entry: name.to_owned(),
                what: format!("entry count {}", self.entries),
                limit: self.limits.max_entries,
            });
        }
        if std::str::from_utf8(&entry.path_bytes()).is_err() {
            return Err(Self::unsafe_entry(name, "name is not valid UTF-8"));
        }
        let components = split_name(name).map_err(|reason| Self::unsafe_entry(name, reason))?;
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                self.unpack_file(entry, name, &components, mode)
            }
            tar::EntryType::Directory => self.unpack_directory(name, &components, mode),
            tar::EntryType::Symlink => self.unpack_symlink(entry, name, &components),
            tar::EntryType::Link => self.unpack_hard_link(entry, name, &components),
            other => Err(Self::unsafe_entry(
                name,
                format!("unsupported entry type {other:?}"),
            )),
        }
    }

    fn unpack_file<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        name: &str,
        components: &[String],
        mode: u32,
    ) -> Result<()> {
        if components.is_empty() {
            return Err(Self::unsafe_entry(
                name,
                "a file cannot replace the target directory",
            ));
        }
        let size = entry
            .header()
            .size()
            .map_err(|e| self.stream_error(name, e))?;
        if size > self.limits.max_file_bytes {
            return Err(Error::LimitExceeded {
                entry: name.to_owned(),
                what: format!("file size {size}"),
                limit: self.limits.max_file_bytes,
            });
        }
        let total = self.summary.bytes.saturating_add(size);
        if total > self.limits.max_total_bytes {
            return Err(Error::LimitExceeded {
                entry: name.to_owned(),
                what: format!("total size {total}"),
                limit: self.limits.max_total_bytes,
            });
        }
        let path = self.prepare_leaf(name, components)?;
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| Error::io("create", &path, e))?;
        let mut written = 0u64;
        let mut buffer = vec![0u8; 64 * 1024];
        while written < size {
            let want = usize::try_from(size - written)
                .unwrap_or(usize::MAX)
                .min(buffer.len());
            let n = match entry.read(&mut buffer[..want]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.stream_error(name, e)),
            };
            file.write_all(&buffer[..n])
                .map_err(|e| Error::io("write", &path, e))?;
            written += n as u64;
        }
        if written != size {
            return Err(Error::InvalidArchive {
                detail: format!("entry {name:?} is truncated"),
                source: None,
            });
        }
        file.set_permissions(std::fs::Permissions::from_mode(mode | 0o600))
            .map_err(|e| Error::io("set permissions of", &path, e))?;
        self.summary.files += 1;
        self.summary.bytes = total;
        Ok(())
    }

    fn unpack_directory(&mut self, name: &str, components: &[String], mode: u32) -> Result<()> {
        let path = self.ensure_directories(name, components)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode | 0o700))
            .map_err(|e| Error::io("set permissions of", &path, e))?;
        Ok(())
    }

    fn unpack_symlink<R: Read>(
        &mut self,
        entry: &tar::Entry<'_, R>,
        name: &str,
        components: &[String],
    ) -> Result<()> {
        if components.is_empty() {
            return Err(Self::unsafe_entry(
                name,
                "a symlink cannot replace the target directory",
            ));
        }
        let target = entry
            .link_name_bytes()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        if target.is_empty() {
            return Err(Self::unsafe_entry(name, "symlink has no target"));
        }
        if target.starts_with('/') {
            return Err(Self::unsafe_entry(
                name,
                format!("symlink target {target:?} is absolute"),
            ));
        }
        // Lexical check from the link's directory; the physical check runs once all is written.
        let mut resolved: Vec<&str> = components[..components.len() - 1]
            .iter()
            .map(String::as_str)
            .collect();
        for part in target.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if resolved.pop().is_none() {
                        return Err(Self::unsafe_entry(
                            name,
                            format!(
                                "symlink target {target:?} points outside the target directory"
                            ),
                        ));
                    }
                }
                other => resolved.push(other),
            }
        }
        let path = self.prepare_leaf(name, components)?;
        std::os::unix::fs::symlink(&target, &path)
            .map_err(|e| Error::io("create symlink", &path, e))?;
        self.symlinks.push((name.to_owned(), components.to_vec()));
        self.summary.symlinks += 1;
        Ok(())
    }

    fn unpack_hard_link<R: Read>(
        &mut self,
        entry: &tar::Entry<'_, R>,
        name: &str,
        components: &[String],
    ) -> Result<()> {
        if components.is_empty() {
            return Err(Self::unsafe_entry(
                name,
                "a hard link cannot replace the target directory",
            ));
        }
        let target = entry
            .link_name_bytes()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        let target_components = split_name(&target).map_err(|reason| {
            Self::unsafe_entry(
                name,
                format!("hard link target {target:?} is outside the target directory: {reason}"),
            )
        })?;
        let target_path = self.existing_path(&target_components);
        let is_file = target_path
            .as_deref()
            .and_then(|p| std::fs::symlink_metadata(p).ok())
            .is_some_and(|m| m.is_file());
        let Some(target_path) = target_path.filter(|_| is_file) else {
            return Err(Self::unsafe_entry(
                name,
                format!("hard link target {target:?} is not a file extracted earlier"),
            ));
        };
        let path = self.prepare_leaf(name, components)?;
        std::fs::hard_link(&target_path, &path)
            .map_err(|e| Error::io("create hard link", &path, e))?;
        self.summary.files += 1;
        Ok(())
    }

    /// The on-disk path of `components` when every parent is a real directory, not a symlink.
    fn existing_path(&self, components: &[String]) -> Option<PathBuf> {
        let mut path = self.root.to_owned();
        for (index, component) in components.iter().enumerate() {
            path.push(component);
            let metadata = std::fs::symlink_metadata(&path).ok()?;
            if index + 1 < components.len() && !metadata.is_dir() {
                return None;
            }
        }
        Some(path)
    }

    /// Creates the directories `components` (no symlinks on the way) and returns the path.
    fn ensure_directories(&mut self, name: &str, components: &[String]) -> Result<PathBuf> {
        let mut path = self.root.to_owned();
        for component in components {
            path.push(component);
            match std::fs::symlink_metadata(&path) {
                Ok(metadata) if metadata.is_dir() => {}
                Ok(metadata) if metadata.file_type().is_symlink() => {
                    return Err(Self::unsafe_entry(
                        name,
                        format!("path goes through the symlink {component:?}"),
                    ));
                }
                Ok(_) => {
                    return Err(Self::unsafe_entry(
                        name,
                        format!("{component:?} is not a directory"),
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    std::fs::create_dir(&path)
                        .map_err(|e| Error::io("create directory", &path, e))?;
                    self.summary.directories += 1;
                }
                Err(e) => return Err(Error::io("inspect", &path, e)),
            }
        }
        Ok(path)
    }

    /// Creates the parents of a file or link and clears the way for it: a file written earlier
    /// under the same name is replaced; a directory or symlink is not.
    fn prepare_leaf(&mut self, name: &str, components: &[String]) -> Result<PathBuf> {
        let (leaf, parents) = components.split_last().expect("non-empty components");
        let mut path = self.ensure_directories(name, parents)?;
        path.push(leaf);
        match std::fs::symlink_metadata(&path) {
            Ok(metadata) if metadata.is_file() => {
                std::fs::remove_file(&path).map_err(|e| Error::io("replace", &path, e))?;
                self.summary.files = self.summary.files.saturating_sub(1);
            }
            Ok(_) => {
                return Err(Self::unsafe_entry(
                    name,
                    "an entry with this name already exists",
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("inspect", &path, e)),
        }
        Ok(path)
    }

    /// Follows every extracted symlink through the extracted tree and refuses any that
    /// resolves outside it (e.g. through a chain of links that each looked harmless).
    fn check_symlinks(&self) -> Result<()> {
        for (name, components) in &self.symlinks {
            if !resolves_inside(self.root, components) {
                return Err(Self::unsafe_entry(
                    name,
                    "symlink resolves outside the target directory",
                ));
            }
        }
        Ok(())
    }
}

/// Splits a tar entry name into normal components, refusing absolute names and `..`.
/// The root itself (`.` or `./`) gives no components.
fn split_name(name: &str) -> std::result::Result<Vec<String>, &'static str> {
    if name.is_empty() {
        return Err("empty name");
    }
    if name.starts_with('/') {
        return Err("absolute path");
    }
    if name.contains('\0') {
        return Err("name contains a NUL byte");
    }
    let mut components = Vec::new();
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err("path escapes the target directory (`..`)"),
            other => components.push(other.to_owned()),
        }
    }
    Ok(components)
}

/// Whether the symlink at `components` (relative to `root`) resolves to a path inside `root`,
/// following nested symlinks (at most 40, like Linux) without leaving `root`.
fn resolves_inside(root: &Path, components: &[String]) -> bool {
    const MAX_HOPS: usize = 40;
    let mut current: Vec<String> = Vec::new();
    let mut pending: std::collections::VecDeque<String> = components.iter().cloned().collect();
    let mut hops = 0;
    while let Some(part) = pending.pop_front() {
        match part.as_str() {
            "" | "." => continue,
            ".." => {
                if current.pop().is_none() {
                    return false;
                }
                continue;
            }
            _ => {}
        }
        let path: PathBuf = std::iter::once(root.to_owned())
            .chain(current.iter().map(PathBuf::from))
            .collect::<PathBuf>()
            .join(&part);
        match std::fs::symlink_metadata(&path) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                hops += 1;
                let Ok(target) = std::fs::read_link(&path) else {
                    return false;
                };
                let Some(target) = target.to_str() else {
                    return false;
                };
                if hops > MAX_HOPS || target.starts_with('/') {
                    return false;
                }
                for piece in target.split('/').rev() {
                    pending.push_front(piece.to_owned());
                }
            }
            _ => current.push(part),
        }
    }
    true
}
