//! File systems a build reads from: the disk, or memory, or memory over another one
//! ([`OverlayFs`]); and [`Confined`], which keeps any of them inside one directory.

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
    /// The names of the entries of the directory `path`, in no particular order. Only
    /// `helmCharts` lists directories (to load a chart); file systems that cannot list answer
    /// with an [`io::ErrorKind::Unsupported`] error, which is the default.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let _ = path;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this file system cannot list directories",
        ))
    }
}

impl<F: FileSystem + ?Sized> FileSystem for &F {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        (**self).read(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        (**self).is_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        (**self).exists(path)
    }
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        (**self).canonicalize(path)
    }
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        (**self).read_link(path)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        (**self).read_dir(path)
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
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let name = entry?.file_name();
            // A name that is not UTF-8 could not be named by any kustomization or chart file.
            let name = name.into_string().map_err(|name| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("file name {} is not UTF-8", Path::new(&name).display()),
                )
            })?;
            names.push(name);
        }
        Ok(names)
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
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let real = self.resolve(path).ok_or_else(outside_error)?;
        self.inner.read_dir(&real)
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
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        if self.files.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            ));
        }
        let mut names: Vec<String> = Vec::new();
        for file in self.files.keys() {
            let Ok(rest) = file.strip_prefix(path) else {
                continue;
            };
            if let Some(Component::Normal(first)) = rest.components().next() {
                let first = first.to_string_lossy();
                if names.last().is_none_or(|last| *last != first) {
                    names.push(first.into_owned());
                }
            }
        }
        names.sort();
        names.dedup();
        if names.is_empty() && path != Path::new("/") {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no such file or directory",
            ));
        }
        Ok(names)
    }
}

/// Files in memory over another file system, which is only read: a build can add files (a
/// generated kustomization, an overlay) to a tree without writing into it.
///
/// The lower layer is seen whole at its own paths ([`OverlayFs::new`]), or only one of its
/// directories, at another path ([`OverlayFs::mounted`]: the rest of it is absent, so a build
/// neither reads nor names it). A file of the memory layer hides whatever the lower layer has
/// at its path; the memory layer has no links. Links of the lower layer keep their targets,
/// read in the overlay's paths, except that an absolute target inside a mounted directory
/// (written with its path in the lower layer, as given or with links resolved) is moved to
/// where that directory is seen, so it names the same file.
///
/// ```
/// use std::path::Path;
/// use capstan_kustomize::{FileSystem, MemoryFs, OverlayFs};
///
/// let mut disk = MemoryFs::new();
/// disk.insert("/checkout/repo/app/cm.yaml", "kind: ConfigMap");
/// disk.insert("/checkout/secret.yaml", "kind: Secret");
/// let mut fs = OverlayFs::mounted(disk, Path::new("/checkout/repo"), Path::new("/build/source"));
/// fs.insert("/build/source/app/kustomization.yaml", "resources: [cm.yaml]");
/// assert!(fs.exists(Path::new("/build/source/app/cm.yaml")));
/// assert!(fs.exists(Path::new("/build/source/app/kustomization.yaml")));
/// assert!(!fs.exists(Path::new("/checkout/secret.yaml")));
/// ```
#[derive(Clone, Debug)]
pub struct OverlayFs<F> {
    lower: F,
    /// Which directory of the lower layer is seen, and where; `None` when seen whole.
    mount: Option<Mount>,
    upper: MemoryFs,
}

#[derive(Clone, Debug)]
struct Mount {
    /// Where the directory is seen.
    at: PathBuf,
    /// The directory in the lower layer.
    dir: PathBuf,
    /// `dir` with its links resolved, when that differs.
    canonical: Option<PathBuf>,
}

impl<F: FileSystem> OverlayFs<F> {
    /// `lower`, seen whole at its own paths, with an empty memory layer above.
    pub fn new(lower: F) -> Self {
        OverlayFs {
            lower,
            mount: None,
            upper: MemoryFs::new(),
        }
    }

    /// Only the directory `dir` of `lower`, seen at `at` (both made absolute and normalised),
    /// with an empty memory layer above. Nothing else of `lower` exists in the overlay.
    pub fn mounted(lower: F, dir: &Path, at: &Path) -> Self {
        let dir = absolute(dir);
        let canonical = lower.canonicalize(&dir).ok().filter(|c| *c != dir);
        OverlayFs {
            lower,
            mount: Some(Mount {
                at: absolute(at),
                dir,
                canonical,
            }),
            upper: MemoryFs::new(),
        }
    }

    /// Adds (or replaces) a file of the memory layer; relative paths are taken from `/`.
    /// Nothing is written to the lower layer.
    pub fn insert(&mut self, path: impl AsRef<Path>, contents: impl Into<Vec<u8>>) {
        self.upper.insert(path, contents);
    }

    /// The lower layer.
    pub fn lower(&self) -> &F {
        &self.lower
    }

    /// The memory layer.
    pub fn upper(&self) -> &MemoryFs {
        &self.upper
    }

    /// Where `path` of the overlay lies in the lower layer, if it is seen there.
    fn below(&self, path: &Path) -> Option<PathBuf> {
        match &self.mount {
            None => Some(path.to_path_buf()),
            Some(mount) => {
                let rest = path.strip_prefix(&mount.at).ok()?;
                Some(if rest.as_os_str().is_empty() {
                    mount.dir.clone()
                } else {
                    mount.dir.join(rest)
                })
            }
        }
    }

    /// Whether `path` is the memory layer's, file or directory (hiding the lower layer's).
    fn in_upper(&self, path: &Path) -> bool {
        self.upper.files.contains_key(path) || (self.upper.is_dir(path) && path != Path::new("/"))
    }

    /// Whether `path` is a directory leading to the mount point (not the mount point).
    fn above_mount(&self, path: &Path) -> bool {
        self.mount
            .as_ref()
            .is_some_and(|mount| mount.at != path && mount.at.starts_with(path))
    }

    /// Whether `path` is the mount point, which is the mounted directory itself (never a link).
    fn is_mount_point(&self, path: &Path) -> bool {
        self.mount.as_ref().is_some_and(|mount| mount.at == path)
    }
}

impl<F: FileSystem> FileSystem for OverlayFs<F> {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        if let Some(contents) = self.upper.files.get(path) {
            return Ok(contents.clone());
        }
        if self.in_upper(path) || self.above_mount(path) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory",
            ));
        }
        match self.below(path) {
            Some(lower) => self.lower.read(&lower),
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no such file or directory",
            )),
        }
    }
    fn is_dir(&self, path: &Path) -> bool {
        if self.upper.files.contains_key(path) {
            return false;
        }
        self.upper.is_dir(path)
            || self.above_mount(path)
            || self
                .below(path)
                .is_some_and(|lower| self.lower.is_dir(&lower))
    }
    fn exists(&self, path: &Path) -> bool {
        self.in_upper(path)
            || self.above_mount(path)
            || self
                .below(path)
                .is_some_and(|lower| self.lower.exists(&lower))
    }
    /// Resolves links in the overlay's own paths (targets read as the overlay's paths); fails
    /// when the path does not exist.
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        let everything = Boundary {
            root: PathBuf::from("/"),
            canonical: None,
        };
        everything
            .resolve(self, path)
            .filter(|real| self.exists(real))
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file or directory"))
    }
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        if self.in_upper(path) || self.above_mount(path) || self.is_mount_point(path) {
            return None;
        }
        let target = self.lower.read_link(&self.below(path)?)?;
        let Some(mount) = self.mount.as_ref().filter(|_| target.is_absolute()) else {
            return Some(target);
        };
        let normal = normalize(&target);
        let inside = normal.strip_prefix(&mount.dir).ok().or_else(|| {
            mount
                .canonical
                .as_ref()
                .and_then(|canonical| normal.strip_prefix(canonical).ok())
        });
        Some(inside.map_or(target, |rest| mount.at.join(rest)))
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        if self.upper.files.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            ));
        }
        let mut names = self.upper.read_dir(path).unwrap_or_default();
        if let Some(mount) = self.mount.as_ref().filter(|_| self.above_mount(path))
            && let Ok(rest) = mount.at.strip_prefix(path)
            && let Some(Component::Normal(first)) = rest.components().next()
        {
            names.push(first.to_string_lossy().into_owned());
        }
        if let Some(lower) = self.below(path)
            && self.lower.is_dir(&lower)
        {
            names.extend(self.lower.read_dir(&lower)?);
        }
        if names.is_empty() && !self.is_dir(path) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no such file or directory",
            ));
        }
        names.sort();
        names.dedup();
        Ok(names)
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

    /// Files in memory, and links (`link path → target as written`).
    #[derive(Default)]
    struct LinkedFs {
        files: MemoryFs,
        links: BTreeMap<PathBuf, PathBuf>,
    }

    impl FileSystem for LinkedFs {
        fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
            self.files.read(path)
        }
        fn is_dir(&self, path: &Path) -> bool {
            self.files.is_dir(path)
        }
        fn exists(&self, path: &Path) -> bool {
            self.files.exists(path) || self.links.contains_key(path)
        }
        fn read_link(&self, path: &Path) -> Option<PathBuf> {
            self.links.get(path).cloned()
        }
    }

    fn text(fs: &dyn FileSystem, path: &str) -> String {
        String::from_utf8(fs.read(Path::new(path)).unwrap()).unwrap()
    }

    #[test]
    fn overlay_adds_and_hides_files_without_writing_below() {
        let mut lower = MemoryFs::new();
        lower.insert("src/app/cm.yaml", "lower cm");
        lower.insert("src/app/kustomization.yaml", "lower");
        let mut fs = OverlayFs::new(&lower);
        fs.insert("src/app/kustomization.yaml", "upper");
        fs.insert("src/overlay/kustomization.yaml", "overlay");
        assert_eq!(text(&fs, "/src/app/kustomization.yaml"), "upper");
        assert_eq!(text(&fs, "/src/app/cm.yaml"), "lower cm");
        assert_eq!(text(&fs, "/src/overlay/kustomization.yaml"), "overlay");
        assert!(fs.is_dir(Path::new("/src/overlay")));
        assert!(fs.is_dir(Path::new("/src/app")));
        assert!(!fs.is_dir(Path::new("/src/app/kustomization.yaml")));
        assert!(fs.read(Path::new("/src/overlay")).is_err());
        assert!(!fs.exists(Path::new("/src/missing.yaml")));
        assert_eq!(text(&lower, "/src/app/kustomization.yaml"), "lower");
        assert!(!lower.exists(Path::new("/src/overlay")));
    }

    #[test]
    fn a_mounted_directory_is_all_that_shows_of_the_lower_layer() {
        let mut lower = MemoryFs::new();
        lower.insert("checkout/repo/app/cm.yaml", "cm");
        lower.insert("checkout/secret.yaml", "secret");
        let mut fs = OverlayFs::mounted(
            &lower,
            Path::new("/checkout/repo"),
            Path::new("/build/source"),
        );
        fs.insert("build/overlay/kustomization.yaml", "overlay");
        assert_eq!(text(&fs, "/build/source/app/cm.yaml"), "cm");
        for dir in [
            "/",
            "/build",
            "/build/source",
            "/build/source/app",
            "/build/overlay",
        ] {
            assert!(fs.is_dir(Path::new(dir)), "{dir}");
            assert!(fs.exists(Path::new(dir)), "{dir}");
        }
        for absent in [
            "/checkout/secret.yaml",
            "/checkout/repo/app/cm.yaml",
            "/build/secret.yaml",
            "/build/me/secret.yaml",
        ] {
            assert!(!fs.exists(Path::new(absent)), "{absent}");
            assert!(fs.read(Path::new(absent)).is_err(), "{absent}");
        }
        assert!(fs.read(Path::new("/build")).is_err());
    }

    #[test]
    fn links_below_are_read_in_the_overlay_paths() {
        let mut lower = LinkedFs::default();
        lower.files.insert("repo/app/cm.yaml", "cm");
        lower.files.insert("host/x.yaml", "host");
        for (link, target) in [
            ("/repo/app/rel.yaml", "cm.yaml"),
            ("/repo/app/abs.yaml", "/repo/app/cm.yaml"),
            ("/repo/app/host.yaml", "/host/x.yaml"),
            ("/repo/app/out.yaml", "../../host/x.yaml"),
            ("/repo/app/up", "../.."),
        ] {
            lower.links.insert(link.into(), target.into());
        }
        let mut fs = OverlayFs::mounted(&lower, Path::new("/repo"), Path::new("/build/source"));
        fs.insert("build/source/app/rel.yaml", "generated");
        // A file of the memory layer hides a link below.
        assert_eq!(fs.read_link(Path::new("/build/source/app/rel.yaml")), None);
        assert_eq!(text(&fs, "/build/source/app/rel.yaml"), "generated");
        // An absolute target inside the mounted directory names the same file in the overlay;
        // one outside keeps its path, which the overlay does not have.
        assert_eq!(
            fs.read_link(Path::new("/build/source/app/abs.yaml")),
            Some(PathBuf::from("/build/source/app/cm.yaml"))
        );
        assert_eq!(
            fs.read_link(Path::new("/build/source/app/host.yaml")),
            Some(PathBuf::from("/host/x.yaml"))
        );
        assert_eq!(fs.read_link(Path::new("/build/source")), None);
        assert_eq!(
            fs.canonicalize(Path::new("/build/source/app/abs.yaml"))
                .unwrap(),
            PathBuf::from("/build/source/app/cm.yaml")
        );
        assert!(
            fs.canonicalize(Path::new("/build/source/app/host.yaml"))
                .is_err()
        );
        assert_eq!(
            fs.canonicalize(Path::new("/build/source/app/up/source/app/cm.yaml"))
                .unwrap(),
            PathBuf::from("/build/source/app/cm.yaml")
        );
        let confined = Confined::new(&fs, Path::new("/build"));
        assert_eq!(text(&confined, "/build/source/app/abs.yaml"), "cm");
        assert!(
            confined
                .read(Path::new("/build/source/app/host.yaml"))
                .is_err()
        );
        assert!(
            confined
                .read(Path::new("/build/source/app/out.yaml"))
                .is_err()
        );
        assert!(!confined.exists(Path::new("/build/source/app/up/host/x.yaml")));
        assert_eq!(
            text(&confined, "/build/source/app/up/source/app/cm.yaml"),
            "cm"
        );
    }

    #[test]
    fn a_build_reads_an_overlay_in_memory_over_its_source() {
        let mut lower = MemoryFs::new();
        lower.insert(
            "repo/app/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
        );
        lower.insert(
            "secret.yaml",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n",
        );
        let mut fs = OverlayFs::mounted(&lower, Path::new("/repo"), Path::new("/build/source"));
        fs.insert(
            "build/source/app/kustomization.yaml",
            "resources: [cm.yaml]\n",
        );
        fs.insert(
            "build/overlay/kustomization.yaml",
            "resources: [../source/app]\nnamePrefix: p-\n",
        );
        let options = crate::BuildOptions {
            boundary: Some("/build".into()),
            ..crate::BuildOptions::default()
        };
        let objects = crate::build_with(&fs, Path::new("/build/overlay"), &options).unwrap();
        assert_eq!(objects.len(), 1);
        assert_eq!(objects[0]["metadata"]["name"], "p-cm");
        fs.insert(
            "build/overlay/kustomization.yaml",
            "resources: [../source/app, ../../secret.yaml]\n",
        );
        let error = crate::build_with(&fs, Path::new("/build/overlay"), &options).unwrap_err();
        assert!(
            error.to_string().contains("outside the root of the source"),
            "{error}"
        );
    }

    #[test]
    fn normalize_resolves_parents() {
        assert_eq!(
            normalize(Path::new("/a/b/../c/./d")),
            PathBuf::from("/a/c/d")
        );
    }
}
