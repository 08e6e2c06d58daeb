//! GitRepository `spec.include`: copying the artifacts of other repositories into a checkout
//! before it is packed.
//!
//! # Expected flow
//! The reconciler checks every include's paths with [`include_path`] (a failure needs a spec
//! change), looks up the included repositories' stored artifacts, and calls [`copy_includes`]
//! on the checkout.
//!
//! # Guarantees
//! - Each artifact is extracted below `scratch` with the storage's limits for stored
//!   artifacts, then its `fromPath` (its root by default) is merged into `toPath`: files of the
//!   include replace files and links at the same path; other files of the checkout stay.
//! - Nothing is written outside the checkout: paths with `..` or a root are refused, symbolic
//!   links are copied as links (never followed), and a symbolic link of the checkout on the
//!   way to a destination is refused.
//!
//! # Errors
//! [`Error::IncludeCopy`] names the include and its paths, with the cause below it: an
//! unreadable or oversized artifact, [`Error::IncludeNotInArtifact`],
//! [`Error::IncludeThroughLink`], or the [`Error::Io`] of the file that could not be written.

use std::path::{Component, Path, PathBuf};

use crate::storage::Storage;
use crate::{Error, Result};

/// One GitRepository `spec.include` with the artifact it resolved to.
#[derive(Clone, Copy, Debug)]
pub struct Include<'a> {
    /// The included GitRepository's name.
    pub name: &'a str,
    /// The storage path of its artifact (`status.artifact.path`).
    pub artifact_path: &'a str,
    /// `fromPath`: what to copy from the artifact; its root when `None`.
    pub from_path: Option<&'a str>,
    /// `toPath`: where to copy it in the checkout.
    pub to_path: &'a str,
}

/// `path` (the include field `field`, `fromPath` or `toPath`) as a relative path inside an
/// artifact: no `..`, not absolute. `""` and `"."` are the root.
pub fn include_path(field: &'static str, path: &str) -> Result<PathBuf> {
    let mut out = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(Error::IllegalIncludePath {
                    field,
                    path: path.to_owned(),
                });
            }
        }
    }
    Ok(out)
}

/// Copies the artifacts of `includes` from `storage` into `checkout`, in order: each is
/// extracted below `scratch` (a directory the caller removes), then its `fromPath` is merged
/// into `toPath`. Blocking.
pub fn copy_includes(
    storage: &Storage,
    includes: &[Include<'_>],
    scratch: &Path,
    checkout: &Path,
) -> Result<()> {
    for (index, include) in includes.iter().enumerate() {
        copy_include(
            storage,
            include,
            &scratch.join(format!("include-{index}")),
            checkout,
        )
        .map_err(|source| Error::IncludeCopy {
            name: include.name.to_owned(),
            from: include.from_path.unwrap_or(".").to_owned(),
            to: include.to_path.to_owned(),
            source: Box::new(source),
        })?;
    }
    Ok(())
}

fn copy_include(
    storage: &Storage,
    include: &Include<'_>,
    extracted: &Path,
    checkout: &Path,
) -> Result<()> {
    let archive = storage.local_path(include.artifact_path)?;
    crate::artifact::extract_file(
        &archive,
        extracted,
        &storage.limits().for_stored_artifacts(),
    )?;
    let from = include_path("fromPath", include.from_path.unwrap_or(""))?;
    let to = include_path("toPath", include.to_path)?;
    let source = extracted.join(&from);
    let metadata = std::fs::symlink_metadata(&source)
        .map_err(|_| Error::IncludeNotInArtifact { path: from.clone() })?;
    let mut target = checkout.to_owned();
    for part in to.components() {
        target.push(part);
        if std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(Error::IncludeThroughLink { path: to });
        }
    }
    if metadata.is_dir() {
        copy_tree(&source, &target)
    } else {
        copy_entry(&source, &target, &metadata)
    }
}

/// Merges the directory `source` into `target`, never following symbolic links.
fn copy_tree(source: &Path, target: &Path) -> Result<()> {
    if std::fs::symlink_metadata(target).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(Error::IncludeThroughLink {
            path: target.to_owned(),
        });
    }
    std::fs::create_dir_all(target).map_err(|e| Error::io("create", target, e))?;
    let entries = std::fs::read_dir(source).map_err(|e| Error::io("read", source, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read", source, e))?;
        let path = entry.path();
        let destination = target.join(entry.file_name());
        let metadata = std::fs::symlink_metadata(&path).map_err(|e| Error::io("read", &path, e))?;
        if metadata.is_dir() {
            copy_tree(&path, &destination)?;
        } else {
            copy_entry(&path, &destination, &metadata)?;
        }
    }
    Ok(())
}

/// Copies a file or symbolic link, replacing whatever file or link is at `target`.
fn copy_entry(source: &Path, target: &Path, metadata: &std::fs::Metadata) -> Result<()> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io("create", parent, e))?;
    }
    if std::fs::symlink_metadata(target).is_ok_and(|m| !m.is_dir()) {
        std::fs::remove_file(target).map_err(|e| Error::io("replace", target, e))?;
    }
    if metadata.file_type().is_symlink() {
        let link = std::fs::read_link(source).map_err(|e| Error::io("read", source, e))?;
        std::os::unix::fs::symlink(link, target).map_err(|e| Error::io("create", target, e))?;
    } else {
        std::fs::copy(source, target).map_err(|e| Error::io("write", target, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A storage holding one artifact packed from `files` (`(path, content)`); its storage path.
    fn stored(storage: &Storage, name: &str, files: &[(&str, &str)]) -> String {
        let source = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let path = source.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, content).unwrap();
        }
        let mut artifact =
            storage.new_artifact("GitRepository", "default", name, "main@sha1:1", "1.tar.gz");
        storage.archive(&mut artifact, source.path(), None).unwrap();
        artifact.path
    }

    fn storage() -> (tempfile::TempDir, Storage) {
        let root = tempfile::tempdir().unwrap();
        let storage = Storage::new(root.path(), "http://storage.invalid").unwrap();
        (root, storage)
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn include_paths_stay_inside_the_artifact() {
        assert_eq!(include_path("toPath", "").unwrap(), PathBuf::new());
        assert_eq!(include_path("toPath", "./").unwrap(), PathBuf::new());
        assert_eq!(
            include_path("fromPath", "./deploy/app/").unwrap(),
            PathBuf::from("deploy/app")
        );
        for path in ["../x", "a/../../x", "/etc"] {
            assert_eq!(
                include_path("toPath", path).unwrap_err().to_string(),
                format!("toPath {path:?} must be a relative path without '..'")
            );
        }
    }

    #[test]
    fn merges_the_from_path_into_the_to_path() {
        let (_root, storage) = storage();
        let lib = stored(
            &storage,
            "lib",
            &[
                ("deploy/a.yaml", "a: lib"),
                ("deploy/sub/b.yaml", "b: lib"),
                ("README", "lib"),
            ],
        );
        let work = tempfile::tempdir().unwrap();
        let checkout = work.path().join("checkout");
        std::fs::create_dir_all(checkout.join("vendor")).unwrap();
        std::fs::write(checkout.join("vendor/a.yaml"), "a: app").unwrap();
        std::fs::write(checkout.join("vendor/keep.yaml"), "keep: app").unwrap();
        let includes = [
            Include {
                name: "lib",
                artifact_path: &lib,
                from_path: Some("deploy"),
                to_path: "vendor",
            },
            Include {
                name: "lib",
                artifact_path: &lib,
                from_path: None,
                to_path: "lib",
            },
        ];
        copy_includes(&storage, &includes, work.path(), &checkout).unwrap();
        assert_eq!(read(&checkout.join("vendor/a.yaml")), "a: lib");
        assert_eq!(read(&checkout.join("vendor/sub/b.yaml")), "b: lib");
        assert_eq!(read(&checkout.join("vendor/keep.yaml")), "keep: app");
        assert_eq!(read(&checkout.join("lib/README")), "lib");
        assert_eq!(read(&checkout.join("lib/deploy/a.yaml")), "a: lib");
    }

    #[test]
    fn refuses_links_of_the_checkout_and_missing_paths_naming_the_include() {
        let (_root, storage) = storage();
        let lib = stored(&storage, "lib", &[("deploy/a.yaml", "a: lib")]);
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let checkout = work.path().join("checkout");
        std::fs::create_dir_all(&checkout).unwrap();
        std::os::unix::fs::symlink(outside.path(), checkout.join("vendor")).unwrap();
        let include = |from_path, to_path| Include {
            name: "lib",
            artifact_path: &lib,
            from_path,
            to_path,
        };

        let error = copy_includes(
            &storage,
            &[include(Some("deploy"), "vendor/deploy")],
            work.path(),
            &checkout,
        )
        .unwrap_err();
        assert_eq!(
            crate::redact::error_chain(&error),
            "failed to copy 'lib' include from deploy to vendor/deploy: vendor/deploy is a \
             symbolic link in the checkout"
        );
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

        let scratch = tempfile::tempdir().unwrap();
        let error = copy_includes(
            &storage,
            &[include(Some("missing"), "lib")],
            scratch.path(),
            &checkout,
        )
        .unwrap_err();
        assert_eq!(
            crate::redact::error_chain(&error),
            "failed to copy 'lib' include from missing to lib: missing does not exist in the \
             artifact"
        );
    }

    #[test]
    fn an_unreadable_artifact_keeps_its_cause() {
        let (root, storage) = storage();
        let lib = stored(&storage, "lib", &[("a.yaml", "a: lib")]);
        std::fs::remove_file(root.path().join(&lib)).unwrap();
        let work = tempfile::tempdir().unwrap();
        let include = Include {
            name: "lib",
            artifact_path: &lib,
            from_path: None,
            to_path: "lib",
        };
        let error = copy_includes(
            &storage,
            &[include],
            work.path(),
            &work.path().join("checkout"),
        )
        .unwrap_err();
        let message = crate::redact::error_chain(&error);
        assert!(
            message.starts_with("failed to copy 'lib' include from . to lib: cannot read "),
            "{message}"
        );
        assert!(
            message.ends_with("No such file or directory (os error 2)"),
            "{message}"
        );
    }
}
