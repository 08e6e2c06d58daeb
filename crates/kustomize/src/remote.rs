//! Remote bases: `resources:` entries naming a Git repository (kustomize's remote target
//! syntax), and the [`RemoteLoader`] a caller provides to fetch them.
//!
//! The engine never touches the network itself: it parses the entry into a
//! [`RemoteTarget`], asks the loader for a local checkout of the repository at the ref,
//! and builds the kustomization directory inside it, confined to the checkout. Without a
//! loader ([`crate::BuildOptions::remote`] unset) remote entries are refused, naming the
//! kustomization file and the entry.

use std::path::PathBuf;
use std::time::Duration;

/// kustomize's default timeout for fetching one remote base.
pub const DEFAULT_REMOTE_TIMEOUT: Duration = Duration::from_secs(27);

/// A `resources:` entry naming a directory of a Git repository, as kustomize parses it
/// (`https://host/org/repo//path?ref=v1`, `git::https://…`, `ssh://git@host/org/repo.git/path`,
/// `git@host:org/repo//path`, `github.com/org/repo/path?ref=main`, `…/_git/repo/path`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteTarget {
    /// The entry as written.
    pub raw: String,
    /// What to clone: scheme, user, host and repository path (`https://github.com/org/repo`,
    /// `git@github.com:org/repo`).
    pub repo_url: String,
    /// The kustomization directory inside the repository (`""` for its root), relative.
    pub path: String,
    /// The branch, tag or commit to check out (`?ref=`, or the older `?version=`); `None`
    /// means the remote's default branch.
    pub reference: Option<String>,
    /// How long the fetch may take (`?timeout=`, seconds or a Go duration; 27 s by default).
    pub timeout: Duration,
    /// Whether submodules are wanted (`?submodules=`, true by default).
    pub submodules: bool,
}

/// Fetches remote bases for a build. Implemented by the caller (the Kustomization
/// controller fetches with the project's Git client, bounded in time and size, and caches
/// per build); the engine stays free of network code.
pub trait RemoteLoader: Send + Sync {
    /// Returns the root of a local checkout of `target.repo_url` at `target.reference`. The
    /// engine reads `target.path` below it and never leaves it. The error is shown to the
    /// user after the kustomization file and the entry, so it must hold no secret.
    fn load(&self, target: &RemoteTarget) -> Result<PathBuf, String>;
}

impl std::fmt::Debug for dyn RemoteLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RemoteLoader")
    }
}

/// Whether a `resources:` entry looks like a remote target rather than a local path (a
/// scheme, a `git::` prefix, `git@`, an SCP-style `user@host:`, a `github.com/` path or a
/// `?ref=`). A file name holding `@` (`app@v2.yaml`) stays local.
pub fn is_remote(entry: &str) -> bool {
    let lower = entry.to_ascii_lowercase();
    lower.contains("://")
        || lower.starts_with("git::")
        || lower.starts_with("git@")
        || lower.starts_with("github.com/")
        || lower.starts_with("github.com:")
        || lower.starts_with("gitlab.com/")
        || lower.starts_with("bitbucket.org/")
        || scp_user(entry).is_some_and(|end| {
            entry[end..]
                .split('/')
                .next()
                .is_some_and(|h| h.contains(':'))
        })
        || entry.contains("?ref=")
        || entry.contains("?version=")
}

/// `user@` at the start of an SCP-style address (kustomize: a letter, then letters, digits
/// or dashes).
fn scp_user(s: &str) -> Option<usize> {
    let at = s.find('@')?;
    let user = &s[..at];
    let mut chars = user.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() && chars.all(|c| c.is_ascii_alphanumeric() || c == '-'))
        .then_some(at + 1)
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    // Compared as bytes: `prefix.len()` may fall inside a multi-byte character of `s`, and
    // then the prefix (ASCII) does not match.
    let head = s.as_bytes().get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix.as_bytes())
        .then(|| s.get(prefix.len()..))
        .flatten()
}

/// Parses a remote target as kustomize does (its `repospec` rules: the repository ends at
/// `_git/<name>`, at `//`, after `.git`, or else after two path segments; `file://` keeps
/// the whole path).
pub fn parse_remote_target(entry: &str) -> Result<RemoteTarget, String> {
    if entry.starts_with('/') {
        return Err(format!("uri looks like an absolute path: {entry}"));
    }
    let (location, query) = entry.split_once('?').unwrap_or((entry, ""));
    let (reference, timeout, submodules) = parse_query(query);

    let rest = strip_prefix_ignore_case(location, "git::").unwrap_or(location);
    let (scheme, rest) = ["ssh://", "https://", "http://", "file://"]
        .iter()
        .find_map(|scheme| strip_prefix_ignore_case(rest, scheme).map(|r| (*scheme, r)))
        .unwrap_or(("", rest));
    let (user, rest) = match scp_user(rest) {
        Some(end) => rest.split_at(end),
        None => ("", rest),
    };
    let lower = rest.to_ascii_lowercase();
    let github = lower.starts_with("github.com/") || lower.starts_with("github.com:");
    let scp = scheme.is_empty() && (!user.is_empty() || github);
    if scheme.is_empty() && !scp {
        return Err("failed to parse scheme".into());
    }
    let (host, repo_rest) = if scheme == "file://" {
        (format!("{scheme}{user}"), rest.to_owned())
    } else {
        let slash = rest.find('/');
        let separator = if scp {
            match (slash, rest.find(':')) {
                (None, colon) => colon,
                (Some(s), Some(c)) if c > 0 && c < s => Some(c),
                (slash, _) => slash,
            }
        } else {
            slash
        };
        let (host, path) = match separator {
            Some(i) => (&rest[..=i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let host = if github {
            if scheme == "ssh://" || !user.is_empty() {
                format!("{user}github.com:")
            } else {
                "https://github.com/".to_owned()
            }
        } else {
            format!("{scheme}{user}{host}")
        };
        (host, path.to_owned())
    };
    if host.is_empty() {
        return Err("failed to parse host segment".into());
    }
    let (repo, path) = split_repo_path(&repo_rest, scheme == "file://")
        .ok_or_else(|| "failed to parse repo path segment".to_owned())?;
    if path.split('/').find(|s| !s.is_empty() && *s != ".") == Some("..") {
        return Err(format!("url path exits repo: {repo_rest}"));
    }
    Ok(RemoteTarget {
        raw: entry.to_owned(),
        repo_url: format!("{host}{repo}"),
        path: path.trim_start_matches('/').to_owned(),
        reference,
        timeout,
        submodules,
    })
}

fn split_repo_path(n: &str, all_segments: bool) -> Option<(String, String)> {
    let (repo, path) = if let Some(i) = n.find("_git/") {
        let after = &n[i + "_git/".len()..];
        let (name, sub) = after.split_once('/').unwrap_or((after, ""));
        (format!("{}{name}", &n[..i + "_git/".len()]), sub.to_owned())
    } else if let Some(i) = n.find("//") {
        (n[..i].to_owned(), n[i + 2..].to_owned())
    } else if let Some(i) = n.find(".git") {
        (n[..i + 4].to_owned(), n[i + 4..].to_owned())
    } else if all_segments {
        (n.to_owned(), String::new())
    } else {
        let segments: Vec<&str> = n.split('/').collect();
        if segments.len() < 2 {
            return None;
        }
        (segments[..2].join("/"), segments[2..].join("/"))
    };
    (!repo.is_empty()).then_some((repo, path))
}

fn parse_query(query: &str) -> (Option<String>, Duration, bool) {
    let mut reference = None;
    let mut version = None;
    let mut timeout = DEFAULT_REMOTE_TIMEOUT;
    let mut submodules = true;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(value);
        // Go's `url.Values.Get` returns the first value of a key.
        match key {
            "ref" if reference.is_none() => reference = Some(value),
            "version" if version.is_none() => version = Some(value),
            "timeout" => {
                if let Some(parsed) = parse_timeout(&value) {
                    timeout = parsed;
                }
            }
            "submodules" => match value.as_str() {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => submodules = true,
                "0" | "f" | "F" | "false" | "FALSE" | "False" => submodules = false,
                _ => {}
            },
            _ => {}
        }
    }
    let reference = reference
        .filter(|r| !r.is_empty())
        .or(version)
        .filter(|r| !r.is_empty());
    (reference, timeout, submodules)
}

fn parse_timeout(value: &str) -> Option<Duration> {
    if let Ok(seconds) = value.parse::<u64>() {
        return (seconds > 0).then(|| Duration::from_secs(seconds));
    }
    // Else a Go duration (`90s`, `2m`, `1m30s`), as kustomize reads it.
    let nanos = capstan_helm::funcs::date::parse_duration(value).ok()?;
    u64::try_from(nanos)
        .ok()
        .filter(|&n| n > 0)
        .map(Duration::from_nanos)
}

fn percent_decode(s: &str) -> String {
    let hex = |b: u8| char::from(b).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%' && i + 2 < bytes.len())
            .then(|| Some(hex(bytes[i + 1])? * 16 + hex(bytes[i + 2])?))
            .flatten();
        match (escaped, bytes[i]) {
            (Some(value), _) => {
                out.push(u8::try_from(value).unwrap_or_default());
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, b) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(entry: &str) -> (String, String, Option<String>) {
        let t = parse_remote_target(entry).unwrap();
        (t.repo_url, t.path, t.reference)
    }

    #[test]
    fn a_multi_byte_character_where_a_scheme_would_end_is_no_panic() {
        // Found by the `kustomization` fuzz target: byte 8 falls inside `ƍ`.
        assert_eq!(
            parse_remote_target("patchesƍetch.yaml"),
            Err("failed to parse scheme".to_owned())
        );
        assert_eq!(strip_prefix_ignore_case("patchesƍ", "https://"), None);
        assert_eq!(strip_prefix_ignore_case("GIT::x", "git::"), Some("x"));
        assert_eq!(strip_prefix_ignore_case("ƍ", "git::"), None);
    }

    #[test]
    fn kustomize_remote_target_forms() {
        let s = |v: &str| v.to_owned();
        assert_eq!(
            parsed("https://github.com/org/repo//deploy/base?ref=v1.2.0"),
            (
                s("https://github.com/org/repo"),
                s("deploy/base"),
                Some(s("v1.2.0"))
            )
        );
        assert_eq!(
            parsed("github.com/org/repo/deploy/base?ref=main"),
            (
                s("https://github.com/org/repo"),
                s("deploy/base"),
                Some(s("main"))
            )
        );
        assert_eq!(
            parsed("git::https://gitlab.com/org/repo.git/base?version=v2"),
            (
                s("https://gitlab.com/org/repo.git"),
                s("base"),
                Some(s("v2"))
            )
        );
        assert_eq!(
            parsed("ssh://git@example.com/org/repo.git//base?ref=abc"),
            (
                s("ssh://git@example.com/org/repo.git"),
                s("base"),
                Some(s("abc"))
            )
        );
        assert_eq!(
            parsed("git@github.com:org/repo/base"),
            (s("git@github.com:org/repo"), s("base"), None)
        );
        assert_eq!(
            parsed("https://dev.azure.com/org/project/_git/repo/base?ref=x"),
            (
                s("https://dev.azure.com/org/project/_git/repo"),
                s("base"),
                Some(s("x"))
            )
        );
        assert_eq!(
            parsed("http://127.0.0.1:8080/repo.git//apps?ref=v1&timeout=90s"),
            (
                s("http://127.0.0.1:8080/repo.git"),
                s("apps"),
                Some(s("v1"))
            )
        );
        let t = parse_remote_target("https://h/o/r//b?timeout=1m30s&submodules=false").unwrap();
        assert_eq!(t.timeout, Duration::from_secs(90));
        assert!(!t.submodules);
    }

    #[test]
    fn local_paths_are_not_remote_and_bad_targets_are_refused() {
        for remote in [
            "git@example.com:org/repo",
            "deploy@example.com:org/repo//base",
        ] {
            assert!(is_remote(remote), "{remote}");
        }
        for local in [
            "base",
            "../base",
            "./x/y.yaml",
            "deploy.yaml",
            "app@v2.yaml",
            "a@b/c",
        ] {
            assert!(!is_remote(local), "{local}");
            assert!(parse_remote_target(local).is_err(), "{local}");
        }
        assert!(parse_remote_target("https://h/o/r//../escape").is_err());
        assert!(parse_remote_target("ftp://h/o/r").is_err());
    }
}
