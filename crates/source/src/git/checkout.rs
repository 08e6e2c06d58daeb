//! Writing a commit's tree into a plain directory.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use gix::object::tree::EntryKind;

use super::budget::{CheckoutBudget, Exceeded};
use crate::Error;

pub(super) enum CheckoutError {
    Io(Error),
    Git(Box<dyn std::error::Error + Send + Sync>),
    /// The interrupt flag was set.
    Interrupted,
    /// `entry` (a path relative to the checkout) would pass a limit.
    Limit {
        entry: String,
        exceeded: Exceeded,
    },
}

impl From<Error> for CheckoutError {
    fn from(error: Error) -> Self {
        Self::Io(error)
    }
}

fn git(error: impl std::error::Error + Send + Sync + 'static) -> CheckoutError {
    CheckoutError::Git(Box::new(error))
}

/// Creates `dir` if needed and checks it is empty.
pub(super) fn prepare_target(dir: &Path) -> crate::Result<()> {
    fs_err::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
    let mut entries = fs_err::read_dir(dir).map_err(|e| Error::io("read", dir, e))?;
    if entries.next().is_some() {
        return Err(Error::TargetNotEmpty {
            path: dir.to_owned(),
        });
    }
    Ok(())
}

/// Writes the tree `id` below `dir`; submodules (gitlinks) are skipped. Stops between entries
/// once `interrupt` is set. Every entry is counted against `budget` before it is written, with
/// the size from the object's header, so an oversize blob is never loaded.
pub(super) fn write_tree(
    repo: &gix::Repository,
    id: gix::ObjectId,
    dir: &Path,
    interrupt: &AtomicBool,
    budget: &mut CheckoutBudget,
) -> Result<(), CheckoutError> {
    write_subtree(repo, id, dir, "", interrupt, budget)
}

fn write_subtree(
    repo: &gix::Repository,
    id: gix::ObjectId,
    dir: &Path,
    prefix: &str,
    interrupt: &AtomicBool,
    budget: &mut CheckoutBudget,
) -> Result<(), CheckoutError> {
    let tree = repo.find_tree(id).map_err(git)?;
    for entry in tree.iter() {
        if interrupt.load(Ordering::Relaxed) {
            return Err(CheckoutError::Interrupted);
        }
        let entry = entry.map_err(git)?;
        let name = entry.filename().to_string();
        // Git itself refuses these; a hostile server could still send them.
        if name.is_empty()
            || name == "."
            || name == ".."
            || name.eq_ignore_ascii_case(".git")
            || name.contains(['/', '\\', '\0'])
        {
            return Err(CheckoutError::Io(Error::UnsafeEntry {
                entry: name,
                reason: "refused tree entry name".to_owned(),
            }));
        }
        let path = dir.join(&name);
        let object = entry.oid().to_owned();
        let relative = format!("{prefix}{name}");
        let kind = entry.mode().kind();
        let size = match kind {
            EntryKind::Blob | EntryKind::BlobExecutable | EntryKind::Link => {
                repo.find_header(object).map_err(git)?.size()
            }
            EntryKind::Tree => 0,
            EntryKind::Commit => continue,
        };
        budget.add(size).map_err(|exceeded| CheckoutError::Limit {
            entry: relative.clone(),
            exceeded,
        })?;
        match kind {
            EntryKind::Tree => {
                fs_err::create_dir(&path).map_err(|e| Error::io("create", &path, e))?;
                write_subtree(
                    repo,
                    object,
                    &path,
                    &format!("{relative}/"),
                    interrupt,
                    budget,
                )?;
            }
            EntryKind::Blob | EntryKind::BlobExecutable => {
                let blob = repo.find_blob(object).map_err(git)?;
                fs_err::write(&path, &blob.data).map_err(|e| Error::io("write", &path, e))?;
                if entry.mode().kind() == EntryKind::BlobExecutable {
                    use std::os::unix::fs::PermissionsExt;
                    fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                        .map_err(|e| Error::io("chmod", &path, e))?;
                }
            }
            EntryKind::Link => {
                let blob = repo.find_blob(object).map_err(git)?;
                let target = String::from_utf8_lossy(&blob.data).into_owned();
                std::os::unix::fs::symlink(&target, &path)
                    .map_err(|e| Error::io("create symlink", &path, e))?;
            }
            EntryKind::Commit => {}
        }
    }
    Ok(())
}
