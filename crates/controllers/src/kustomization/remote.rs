//! Remote bases for the build step: the engine's [`RemoteLoader`], fetching with the
//! project's Git client (a shallow fetch of the ref, no credentials), each fetch bounded by
//! the entry's timeout (kustomize's `?timeout=`, 27 s by default) and the artifact limits,
//! checkouts cached for the build and deleted with it.
//!
//! kustomize's `?ref=` names a branch, a tag or a commit: a full commit id is fetched as a
//! commit, another name as a tag, then as a branch. Without a ref, the branch `main`, then
//! `master` (the remote's default branch is not looked up). `file://` bases are refused:
//! they would read the controller's own disk. One build makes at most 32 fetches (bases may
//! name bases).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use capstan_kustomize::{RemoteLoader, RemoteTarget};
use capstan_source::artifact::Limits;
use capstan_source::git::{self, FetchOptions, GitAuth, GitReference};

/// The most fetches one build may make (remote bases may name remote bases).
const MAX_FETCHES: usize = 32;

/// Fetches the remote bases of one build; dropped (with its checkouts) after the build.
pub(super) struct GitRemoteLoader {
    runtime: tokio::runtime::Handle,
    limits: Limits,
    /// Where the checkouts go, made at the first fetch (most builds have no remote base).
    scratch: OnceLock<tempfile::TempDir>,
    /// Checkouts by repository and ref.
    cache: Mutex<HashMap<(String, Option<String>), PathBuf>>,
    fetches: AtomicUsize,
}

impl GitRemoteLoader {
    /// A loader running its fetches on `runtime`, within `limits`.
    pub(super) fn new(runtime: tokio::runtime::Handle, limits: Limits) -> Self {
        Self {
            runtime,
            limits,
            scratch: OnceLock::new(),
            cache: Mutex::new(HashMap::new()),
            fetches: AtomicUsize::new(0),
        }
    }

    /// Whether any remote base was fetched (such a build depends on more than the source
    /// revision, so it is not cached).
    pub(super) fn used(&self) -> bool {
        self.fetches.load(Ordering::Relaxed) > 0
    }

    fn candidates(reference: Option<&str>) -> Vec<GitReference> {
        match reference {
            Some(commit) if commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()) => {
                vec![GitReference::commit(commit)]
            }
            Some(name) => vec![GitReference::tag(name), GitReference::branch(name)],
            None => vec![GitReference::branch("main"), GitReference::branch("master")],
        }
    }

    fn fetch(&self, target: &RemoteTarget) -> Result<PathBuf, String> {
        let scratch = if let Some(dir) = self.scratch.get() {
            dir
        } else {
            let dir = capstan_source::temp::dir("remote-bases")
                .map_err(|e| format!("cannot create a directory for the checkout: {e}"))?;
            self.scratch.get_or_init(|| dir)
        };
        let mut last = String::new();
        for reference in Self::candidates(target.reference.as_deref()) {
            let n = self.fetches.fetch_add(1, Ordering::Relaxed);
            if n >= MAX_FETCHES {
                return Err(format!(
                    "more than {MAX_FETCHES} remote fetches in one build; refusing more"
                ));
            }
            let dest = scratch.path().join(n.to_string());
            let options = FetchOptions {
                timeout: Some(target.timeout),
                limits: self.limits,
                ..FetchOptions::default()
            };
            let fetched = self.runtime.block_on(async {
                tokio::time::timeout(
                    target.timeout,
                    git::fetch(
                        &target.repo_url,
                        &reference,
                        &GitAuth::None,
                        &dest,
                        &options,
                    ),
                )
                .await
            });
            match fetched {
                Ok(Ok(_)) => return Ok(dest),
                Ok(Err(capstan_source::Error::GitReferenceNotFound { .. })) => {
                    last = match target.reference.as_deref() {
                        Some(name) => format!("no branch, tag or commit {name:?}"),
                        None => "no branch main or master (give ?ref=)".to_owned(),
                    };
                }
                Ok(Err(error)) => {
                    return Err(capstan_source::redact::urls(
                        &capstan_source::redact::error_chain(&error),
                    ));
                }
                Err(_) => {
                    return Err(format!(
                        "fetching took longer than {}s (the entry's ?timeout=)",
                        target.timeout.as_secs()
                    ));
                }
            }
        }
        Err(last)
    }
}

impl RemoteLoader for GitRemoteLoader {
    fn load(&self, target: &RemoteTarget) -> Result<PathBuf, String> {
        if target.repo_url.starts_with("file://") {
            return Err(
                "file:// remote bases are refused: they would read the controller's disk"
                    .to_owned(),
            );
        }
        let key = (target.repo_url.clone(), target.reference.clone());
        if let Some(path) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(path);
        }
        let path = self.fetch(target)?;
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(key, path.clone());
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use capstan_kustomize::{RemoteLoader as _, parse_remote_target};
    use capstan_source::git::GitReference;
    use capstan_testkit::{GitServer, git};

    use super::{GitRemoteLoader, Limits, MAX_FETCHES};

    /// A loader for the current runtime, shared with the blocking thread that builds (the
    /// engine calls `load` off the runtime, and `load` blocks on it to fetch).
    fn loader() -> Arc<GitRemoteLoader> {
        Arc::new(GitRemoteLoader::new(
            tokio::runtime::Handle::current(),
            Limits::default(),
        ))
    }

    /// A repository holding `base/`, served over smart HTTP.
    async fn repository() -> GitServer {
        let server = GitServer::start().await;
        server.commit(&[("base/kustomization.yaml", "resources: []\n")], "base");
        server
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_repository_and_ref_are_fetched_once_per_build() {
        let server = repository().await;
        let url = server.url();
        let build = loader();
        let (first, again, other_path, fetches) = tokio::task::spawn_blocking({
            let build = build.clone();
            move || {
                let base = parse_remote_target(&format!("{url}//base")).unwrap();
                let first = build.load(&base).unwrap();
                let again = build.load(&base).unwrap();
                // Another directory of the same repository and ref: the same checkout.
                let other = parse_remote_target(&format!("{url}//other")).unwrap();
                let other_path = build.load(&other).unwrap();
                (
                    first,
                    again,
                    other_path,
                    build.fetches.load(Ordering::Relaxed),
                )
            }
        })
        .await
        .unwrap();
        assert_eq!(fetches, 1, "one fetch for the build");
        assert_eq!(first, again);
        assert_eq!(first, other_path);
        assert!(first.join("base/kustomization.yaml").is_file());
        assert!(build.used());

        // The next build has its own loader, so it fetches again (and sees new commits).
        let url = server.url();
        let fetches = tokio::task::spawn_blocking(move || {
            let next = GitRemoteLoader::new(tokio::runtime::Handle::current(), Limits::default());
            next.load(&parse_remote_target(&format!("{url}//base")).unwrap())
                .unwrap();
            next.fetches.load(Ordering::Relaxed)
        });
        assert_eq!(fetches.await.unwrap(), 1);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_build_makes_at_most_32_fetches() {
        let server = repository().await;
        for i in 0..=MAX_FETCHES {
            git(&server.work(), &["tag", &format!("t{i}")]);
        }
        git(&server.work(), &["push", "-q", "origin", "--tags"]);
        let url = server.url();
        let build = loader();
        let refused = tokio::task::spawn_blocking({
            let build = build.clone();
            move || {
                for i in 0..MAX_FETCHES {
                    let target = parse_remote_target(&format!("{url}//base?ref=t{i}")).unwrap();
                    build
                        .load(&target)
                        .unwrap_or_else(|e| panic!("fetch {i}: {e}"));
                }
                let one_more =
                    parse_remote_target(&format!("{url}//base?ref=t{MAX_FETCHES}")).unwrap();
                build.load(&one_more).unwrap_err()
            }
        })
        .await
        .unwrap();
        assert_eq!(
            refused,
            "more than 32 remote fetches in one build; refusing more"
        );
        let checkouts = std::fs::read_dir(build.scratch.get().unwrap().path())
            .unwrap()
            .count();
        assert_eq!(checkouts, MAX_FETCHES, "nothing fetched past the limit");
    }

    #[tokio::test]
    async fn file_bases_are_refused_before_any_fetch() {
        let loader = GitRemoteLoader::new(tokio::runtime::Handle::current(), Limits::default());
        let target = parse_remote_target("file:///etc/repo//base").unwrap();
        let error = loader.load(&target).unwrap_err();
        assert!(
            error.contains("file:// remote bases are refused"),
            "{error}"
        );
        assert!(!loader.used());
        assert!(loader.scratch.get().is_none(), "no directory made");
    }

    #[test]
    fn a_ref_is_a_commit_a_tag_or_a_branch_and_none_is_main_then_master() {
        let commit = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            GitRemoteLoader::candidates(Some(commit)),
            [GitReference::commit(commit)]
        );
        assert_eq!(
            GitRemoteLoader::candidates(Some("v1")),
            [GitReference::tag("v1"), GitReference::branch("v1")]
        );
        assert_eq!(
            GitRemoteLoader::candidates(None),
            [GitReference::branch("main"), GitReference::branch("master")]
        );
    }
}
