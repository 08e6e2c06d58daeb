//! `GitRepository.spec.ref` and its resolution against the references a remote advertises.

use std::fmt;

use crate::semver_constraint::{Constraint, parse_version};
use crate::{Error, Result};

/// The branch used when `spec.ref` is empty, as in Flux.
pub const DEFAULT_BRANCH: &str = "master";

/// Flux's `GitRepository.spec.ref`: which commit to check out.
///
/// When several fields are set, the first of `commit`, `name`, `semver`, `tag`, `branch` wins
/// (`commit` may be combined with `branch`, which then only names the revision). An empty
/// reference means the branch [`DEFAULT_BRANCH`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitReference {
    /// A branch name, e.g. `main`.
    pub branch: Option<String>,
    /// A tag name, e.g. `v1.2.0`.
    pub tag: Option<String>,
    /// A semver constraint over the tags, e.g. `>=1.0.0 <2.0.0`.
    pub semver: Option<String>,
    /// A full reference name, e.g. `refs/heads/main` or `refs/pull/42/head`.
    pub name: Option<String>,
    /// A full 40-character SHA-1 commit id.
    pub commit: Option<String>,
}

fn set(field: Option<&String>) -> Option<&str> {
    field.map(String::as_str).filter(|v| !v.is_empty())
}

impl GitReference {
    /// A reference to `branch`.
    pub fn branch(branch: impl Into<String>) -> Self {
        Self {
            branch: Some(branch.into()),
            ..Self::default()
        }
    }

    /// A reference to `tag`.
    pub fn tag(tag: impl Into<String>) -> Self {
        Self {
            tag: Some(tag.into()),
            ..Self::default()
        }
    }

    /// The highest tag matching the semver `constraint`.
    pub fn semver(constraint: impl Into<String>) -> Self {
        Self {
            semver: Some(constraint.into()),
            ..Self::default()
        }
    }

    /// A full reference name such as `refs/heads/main`.
    pub fn name(name: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// A commit id.
    pub fn commit(commit: impl Into<String>) -> Self {
        Self {
            commit: Some(commit.into()),
            ..Self::default()
        }
    }

    /// The effective selector after applying Flux's precedence; validates the fields used.
    pub(crate) fn selector(&self) -> Result<Selector> {
        if let Some(commit) = set(self.commit.as_ref()) {
            if commit.len() != 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(invalid(format!(
                    "commit {commit:?} is not a full 40-character SHA-1 id"
                )));
            }
            return Ok(Selector::Commit {
                commit: commit.to_ascii_lowercase(),
                branch: set(self.branch.as_ref()).map(str::to_owned),
            });
        }
        if let Some(name) = set(self.name.as_ref()) {
            if !name.starts_with("refs/") {
                return Err(invalid(format!("name {name:?} does not start with refs/")));
            }
            return Ok(Selector::Name(name.to_owned()));
        }
        if let Some(semver) = set(self.semver.as_ref()) {
            return Ok(Selector::Semver(Constraint::parse(semver)?));
        }
        if let Some(tag) = set(self.tag.as_ref()) {
            return Ok(Selector::Tag(tag.to_owned()));
        }
        Ok(Selector::Branch(
            set(self.branch.as_ref())
                .unwrap_or(DEFAULT_BRANCH)
                .to_owned(),
        ))
    }
}

fn invalid(reason: String) -> Error {
    Error::InvalidGitReference { reason }
}

/// The one field of a [`GitReference`] that decides the commit.
#[derive(Debug, Clone)]
pub(crate) enum Selector {
    Commit {
        commit: String,
        branch: Option<String>,
    },
    Name(String),
    Semver(Constraint),
    Tag(String),
    Branch(String),
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Commit { commit, .. } => write!(f, "commit {commit}"),
            Self::Name(name) => write!(f, "reference {name}"),
            Self::Semver(constraint) => {
                write!(f, "tag matching semver {:?}", constraint.to_string())
            }
            Self::Tag(tag) => write!(f, "tag {tag}"),
            Self::Branch(branch) => write!(f, "branch {branch}"),
        }
    }
}

/// One reference advertised by a remote, with the commit it points to (tags peeled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteRef {
    pub name: String,
    pub commit: String,
}

/// A reference resolved to a commit, with its Flux revision string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// `main@sha1:<hex>`, `v1.0.0@sha1:<hex>`, `refs/heads/main@sha1:<hex>`, `sha1:<hex>`.
    pub revision: String,
    /// The commit id in hex.
    pub commit: String,
    /// The remote reference to fetch; `None` for a commit without a branch.
    pub remote_ref: Option<String>,
}

impl Selector {
    /// The reference prefixes to list on the remote for this selector.
    pub(crate) fn refspec_sources(&self) -> Vec<String> {
        match self {
            Self::Commit {
                branch: Some(branch),
                ..
            }
            | Self::Branch(branch) => vec![format!("refs/heads/{branch}")],
            Self::Commit { branch: None, .. } => {
                vec!["refs/heads/*".to_owned(), "refs/tags/*".to_owned()]
            }
            Self::Name(name) => vec![name.clone()],
            Self::Semver(_) => vec!["refs/tags/*".to_owned()],
            Self::Tag(tag) => vec![format!("refs/tags/{tag}")],
        }
    }

    /// Picks the commit among the advertised `refs`.
    pub(crate) fn resolve(&self, url: &str, refs: &[RemoteRef]) -> Result<Resolved> {
        let find = |name: &str| refs.iter().find(|r| r.name == name);
        let not_found = || Error::GitReferenceNotFound {
            url: crate::redact::url(url),
            reference: self.to_string(),
        };
        let found = |label: &str, remote: &RemoteRef| Resolved {
            revision: format!("{label}@sha1:{}", remote.commit),
            commit: remote.commit.clone(),
            remote_ref: Some(remote.name.clone()),
        };
        match self {
            Self::Commit { commit, branch } => Ok(Resolved {
                revision: match branch {
                    Some(branch) => format!("{branch}@sha1:{commit}"),
                    None => format!("sha1:{commit}"),
                },
                commit: commit.clone(),
                remote_ref: branch.as_ref().map(|b| format!("refs/heads/{b}")),
            }),
            Self::Name(name) => find(name).map(|r| found(name, r)).ok_or_else(not_found),
            Self::Tag(tag) => find(&format!("refs/tags/{tag}"))
                .map(|r| found(tag, r))
                .ok_or_else(not_found),
            Self::Branch(branch) => find(&format!("refs/heads/{branch}"))
                .map(|r| found(branch, r))
                .ok_or_else(not_found),
            Self::Semver(constraint) => refs
                .iter()
                .filter_map(|r| {
                    let tag = r.name.strip_prefix("refs/tags/")?;
                    let version = parse_version(tag)?;
                    constraint.matches(&version).then_some((version, tag, r))
                })
                // Highest precedence wins; among equal versions the greatest tag name, so the
                // choice does not depend on the order the server lists tags in.
                .max_by(|(a, a_tag, _), (b, b_tag, _)| {
                    (a.major, a.minor, a.patch, &a.pre, a_tag)
                        .cmp(&(b.major, b.minor, b.patch, &b.pre, b_tag))
                })
                .map(|(_, tag, r)| found(tag, r))
                .ok_or_else(not_found),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &str = "cccccccccccccccccccccccccccccccccccccccc";

    fn refs() -> Vec<RemoteRef> {
        [
            ("refs/heads/master", A),
            ("refs/heads/main", B),
            ("refs/tags/v1.0.0", A),
            ("refs/tags/v1.2.0", B),
            ("refs/tags/v2.0.0-rc.1", C),
            ("refs/tags/latest", C),
            ("refs/pull/7/head", C),
        ]
        .into_iter()
        .map(|(name, commit)| RemoteRef {
            name: name.to_owned(),
            commit: commit.to_owned(),
        })
        .collect()
    }

    fn revision(reference: &GitReference) -> Result<String> {
        Ok(reference
            .selector()?
            .resolve("http://git.test/repo", &refs())?
            .revision)
    }

    #[test]
    fn revisions_follow_flux() {
        assert_eq!(
            revision(&GitReference::default()).unwrap(),
            format!("master@sha1:{A}")
        );
        assert_eq!(
            revision(&GitReference::branch("main")).unwrap(),
            format!("main@sha1:{B}")
        );
        assert_eq!(
            revision(&GitReference::tag("v1.0.0")).unwrap(),
            format!("v1.0.0@sha1:{A}")
        );
        assert_eq!(
            revision(&GitReference::name("refs/pull/7/head")).unwrap(),
            format!("refs/pull/7/head@sha1:{C}")
        );
        assert_eq!(
            revision(&GitReference::commit(C)).unwrap(),
            format!("sha1:{C}")
        );
        let commit_on_branch = GitReference {
            branch: Some("main".into()),
            commit: Some(C.to_uppercase()),
            ..GitReference::default()
        };
        assert_eq!(
            revision(&commit_on_branch).unwrap(),
            format!("main@sha1:{C}")
        );
    }

    #[test]
    fn semver_picks_the_highest_matching_tag() {
        assert_eq!(
            revision(&GitReference::semver(">=1.0.0")).unwrap(),
            format!("v1.2.0@sha1:{B}")
        );
        assert_eq!(
            revision(&GitReference::semver("~1.0")).unwrap(),
            format!("v1.0.0@sha1:{A}")
        );
        assert_eq!(
            revision(&GitReference::semver(">=2.0.0-0")).unwrap(),
            format!("v2.0.0-rc.1@sha1:{C}")
        );
        let error = revision(&GitReference::semver("^3")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "tag matching semver \"^3\" not found in http://git.test/repo"
        );
    }

    #[test]
    fn precedence_is_commit_name_semver_tag_branch() {
        let mut reference = GitReference {
            branch: Some("main".into()),
            tag: Some("v1.0.0".into()),
            semver: Some("^1".into()),
            name: Some("refs/pull/7/head".into()),
            commit: Some(A.into()),
        };
        assert_eq!(revision(&reference).unwrap(), format!("main@sha1:{A}"));
        reference.commit = None;
        assert_eq!(
            revision(&reference).unwrap(),
            format!("refs/pull/7/head@sha1:{C}")
        );
        reference.name = None;
        assert_eq!(revision(&reference).unwrap(), format!("v1.2.0@sha1:{B}"));
        reference.semver = Some(String::new());
        assert_eq!(revision(&reference).unwrap(), format!("v1.0.0@sha1:{A}"));
        reference.tag = None;
        assert_eq!(revision(&reference).unwrap(), format!("main@sha1:{B}"));
    }

    #[test]
    fn bad_references_are_clear_errors() {
        let error = revision(&GitReference::branch("nope")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "branch nope not found in http://git.test/repo"
        );
        let error = revision(&GitReference::commit("abc123")).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid git reference: commit \"abc123\" is not a full 40-character SHA-1 id"
        );
        let error = revision(&GitReference::name("heads/main")).unwrap_err();
        assert!(
            error.to_string().contains("does not start with refs/"),
            "{error}"
        );
        let error = revision(&GitReference::semver(">>1")).unwrap_err();
        assert!(
            error.to_string().starts_with("invalid semver constraint"),
            "{error}"
        );
    }
}
