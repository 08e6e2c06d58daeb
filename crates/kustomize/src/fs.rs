//! File systems a build reads from: the disk, or memory; and [`Confined`], which keeps any
//! of them inside one directory.

use std::collections::BTreeMap;
use std::ffi::OsString;
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
    /// The target of `path` when `path` itself is a symbolic link (not followed further).
    /// Implementations without links return `None`.
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        let _ = path;
        None
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
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        let metadata = std::fs::symlink_metadata(path).ok()?;
        if metadata.file_type().is_symlink() {
            std::fs::read_link(path).ok()
        } else {
            None
        }
    }
}

/// How many symbolic links one path may pass through (Linux's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// A directory no path may leave: paths are resolved lexically, then symbolic links are
/// followed one component at a time, each step checked, so a path is in the boundary only if
/// every file it touches is. Resolution never reads a link's target file, so a path that
/// leaves is refused the same way whether or not what it names exists.
#[derive(Clone, Debug)]
pub struct Boundary {
    /// The root as given (absolute, normalised).
    root: PathBuf,
    /// The root with its own links resolved, for absolute link targets written that way.
    canonical: Option<PathBuf>,
}

impl Boundary {
    /// A boundary at `root` (made absolute and normalised) on `fs`.
    pub fn new(fs: &dyn FileSystem, root: &Path) -> Self {
        let root = absolute(root);
        let canonical = fs.canonicalize(&root).ok().filter(|c| *c != root);
        Boundary { root, canonical }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether `path` (absolute) stays in the boundary lexically, before links.
    pub fn contains_lexically(&self, path: &Path) -> bool {
        normalize(path).starts_with(&self.root)
    }

    /// `path` with every symbolic link resolved, or `None` when the path, or a link on the
    /// way, leads out of the boundary (or links loop). Components that do not exist are kept
    /// as written.
    pub fn resolve(&self, fs: &dyn FileSystem, path: &Path) -> Option<PathBuf> {
        let path = normalize(&absolute(path));
        let relative = path.strip_prefix(&self.root).ok()?;
        let mut pending: Vec<OsString> = components_of(relative);
        pending.reverse();
        let mut current = self.root.clone();
        let mut links = 0;
        while let Some(name) = pending.pop() {
            if name == ".." {
                if current == self.root {
                    return None;
                }
                current.pop();
                continue;
            }
            if name == "." || name.is_empty() {
                continue;
            }
            let next = current.join(&name);
            let Some(target) = fs.read_link(&next) else {
                current = next;
                continue;
            };
            links += 1;
            if links > MAX_LINKS {
                return None;
            }
            let rest = if target.is_absolute() {
                let target = normalize(&target);
                let inside = target
                    .strip_prefix(&self.root)
                    .ok()
                    .or_else(|| {
                        self.canonical
                            .as_ref()
                            .and_then(|canonical| target.strip_prefix(canonical).ok())
                    })?
                    .to_path_buf();
                current.clone_from(&self.root);
                inside
            } else {
                target
            };
            let mut more = components_of(&rest);
            more.reverse();
            pending.extend(more);
        }
        Some(current)
    }
}

fn components_of(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|component| match component {
            Component::Normal(part) => Some(part.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// A [`FileSystem`] that answers only inside a [`Boundary`]: paths leaving it (lexically or
/// through links) do not exist, are not directories, and cannot be read — the same answer
/// whether or not they exist outside. Every other call goes to the inner file system with
/// links already resolved.
pub struct Confined<'a> {
    inner: &'a dyn FileSystem,
    boundary: Boundary,
}

impl<'a> Confined<'a> {
    /// Confines `inner` to `root`.
    pub fn new(inner: &'a dyn FileSystem, root: &Path) -> Self {
        let boundary = Boundary::new(inner, root);
        Confined { inner, boundary }
    }

    /// The boundary.
    pub fn boundary(&self) -> &Boundary {
        &self.boundary
    }

    /// `path` resolved inside the boundary, or `None`.
    pub fn resolve(&self, path: &Path) -> Option<PathBuf> {
        self.boundary.resolve(self.inner, path)
    }
}

/// The error of any read leaving the boundary; it never depends on what is outside.
pub(crate) fn outside_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "refused: outside the root of the source",
    )
}

impl FileSystem for Confined<'_> {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let real = self.resolve(path).ok_or_else(outside_error)?;
        self.inner.read(&real)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.resolve(path)
            .is_some_and(|real| self.inner.is_dir(&real))
    }
    fn exists(&self, path: &Path) -> bool {
        self.resolve(path)
            .is_some_and(|real| self.inner.exists(&real))
    }
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        let real = self.resolve(path).ok_or_else(outside_error)?;
        if self.inner.exists(&real) {
            Ok(real)
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no such file or directory",
            ))
        }
    }
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        let real = self.resolve(path.parent()?)?;
        self.inner.read_link(&real.join(path.file_name()?))
    }
}

/// `path` made absolute against the working directory, normalised.
pub(crate) fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        normalize(path)
    } else {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        normalize(&cwd.join(path))
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
