//! File systems a build reads from: the disk, or memory.

use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path, PathBuf};

/// What the engine needs from a file system. Paths are absolute and normalised
/// (no `.`/`..` components) when they reach an implementation.
pub trait FileSystem {
    /// Reads a whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Whether `path` is a directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// Whether `path` exists (file or directory).
    fn exists(&self, path: &Path) -> bool;
    /// Resolves symlinks. Implementations without links return the path unchanged.
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        Ok(path.to_path_buf())
    }
}

/// The local disk.
#[derive(Clone, Copy, Debug, Default)]
pub struct DiskFs;

impl FileSystem for DiskFs {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }
}

/// An in-memory tree of files, for builds from an unpacked artifact or from tests.
#[derive(Clone, Debug, Default)]
pub struct MemoryFs {
    files: BTreeMap<PathBuf, Vec<u8>>,
}

impl MemoryFs {
    /// An empty file system.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a file; relative paths are taken from `/`.
    pub fn insert(&mut self, path: impl AsRef<Path>, contents: impl Into<Vec<u8>>) {
        let path = normalize(&Path::new("/").join(path.as_ref()));
        self.files.insert(path, contents.into());
    }
}

impl FileSystem for MemoryFs {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file or directory"))
    }
    fn is_dir(&self, path: &Path) -> bool {
        path == Path::new("/")
            || self
                .files
                .keys()
                .any(|file| file != path && file.starts_with(path))
    }
    fn exists(&self, path: &Path) -> bool {
        self.files.contains_key(path) || self.is_dir(path)
    }
}

/// Removes `.` and resolves `..` lexically.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_fs_knows_directories() {
        let mut fs = MemoryFs::new();
        fs.insert("app/base/kustomization.yaml", "resources: []");
        assert!(fs.is_dir(Path::new("/app")));
        assert!(fs.is_dir(Path::new("/app/base")));
        assert!(!fs.is_dir(Path::new("/app/base/kustomization.yaml")));
        assert!(fs.exists(Path::new("/app/base/kustomization.yaml")));
        assert!(fs.read(Path::new("/nope")).is_err());
    }

    #[test]
    fn normalize_resolves_parents() {
        assert_eq!(
            normalize(Path::new("/a/b/../c/./d")),
            PathBuf::from("/a/c/d")
        );
    }
}
