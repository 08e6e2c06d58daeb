//! Temporary directories Capstan can recognise, and the sweep that removes those a crashed
//! process left behind.
//!
//! # Expected flow
//! Every checkout, pull, download and extraction happens below a directory from [`dir`]
//! (`$TMPDIR/capstan-<pid>-<purpose>-<random>`), removed when its guard drops. A process
//! killed before that leaves it behind; `capstan controller` and `capstan dev` call
//! [`sweep_stale`] at start.
//!
//! # Guarantees
//! [`sweep_stale`] removes only `capstan-<pid>-…` directories of processes that no longer
//! run, and those carrying the calling process's own id (left by an earlier process that had
//! the same id, as a container's init process has after a restart); it never touches a
//! directory of another live process.

use std::io;
use std::path::{Path, PathBuf};

/// The name prefix of every temporary directory Capstan creates.
pub const PREFIX: &str = "capstan-";

/// A fresh temporary directory `$TMPDIR/capstan-<pid>-<purpose>-<random>`, removed when the
/// guard drops.
pub fn dir(purpose: &str) -> io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{}-{purpose}-", std::process::id()))
        .tempdir()
}

/// Removes the stale Capstan temporary directories in `$TMPDIR` (see the module docs) and
/// returns those removed.
pub fn sweep_stale() -> Vec<PathBuf> {
    sweep_stale_in(&std::env::temp_dir(), std::process::id())
}

/// [`sweep_stale`] in `root`, as the process `own_pid`.
pub fn sweep_stale_in(root: &Path, own_pid: u32) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix(PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let is_dir = entry
            .file_type()
            .is_ok_and(|file_type| file_type.is_dir() && !file_type.is_symlink());
        if !is_dir || (pid != own_pid && process_runs(pid)) {
            continue;
        }
        let path = entry.path();
        if std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// Whether a process with this id runs (Linux: `/proc/<pid>` exists). Where `/proc` is
/// missing, every process is assumed to run, so nothing of another process is removed.
fn process_runs(pid: u32) -> bool {
    if !Path::new("/proc/self").exists() {
        return true;
    }
    Path::new("/proc").join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_dead_and_own_directories_only() {
        let root = tempfile::tempdir().unwrap();
        // The test process runs; pid 0 never names a process in /proc; u32::MAX neither.
        let live = std::process::id();
        let parent = std::os::unix::process::parent_id();
        for name in [
            format!("capstan-{parent}-gitrepository-abc"),
            format!("capstan-{live}-kustomization-abc"),
            format!("capstan-{}-bucket-abc", u32::MAX),
            "capstan-kustomization-old".to_owned(),
            "other-1-x".to_owned(),
        ] {
            std::fs::create_dir(root.path().join(&name)).unwrap();
            std::fs::write(root.path().join(&name).join("file"), "x").unwrap();
        }
        let mut removed: Vec<String> = sweep_stale_in(root.path(), live)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        removed.sort();
        let mut expected = vec![
            format!("capstan-{live}-kustomization-abc"),
            format!("capstan-{}-bucket-abc", u32::MAX),
        ];
        expected.sort();
        assert_eq!(removed, expected);
        assert!(
            root.path()
                .join(format!("capstan-{parent}-gitrepository-abc"))
                .exists(),
            "a live process's directory stays"
        );
        assert!(root.path().join("capstan-kustomization-old").exists());
        assert!(root.path().join("other-1-x").exists());
    }
}
