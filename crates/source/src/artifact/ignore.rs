//! `.sourceignore` and `spec.ignore` filtering with gitignore syntax, as Flux's `sourceignore`
//! package does it.

use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::error::{Error, Result};

/// Name of the ignore file Flux reads in every directory of a source.
pub const IGNORE_FILE: &str = ".sourceignore";

/// Version-control files, always excluded from Git and Bucket artifacts.
pub const EXCLUDE_VCS: &[&str] = &[".git/", ".gitignore", ".gitmodules", ".gitattributes"];

/// File types excluded by default (when no `.sourceignore` or `spec.ignore` is given).
pub const EXCLUDE_EXT: &[&str] = &[
    "*.jpg", "*.jpeg", "*.gif", "*.png", "*.wmv", "*.flv", "*.tar.gz", "*.zip",
];

/// CI configuration excluded by default.
pub const EXCLUDE_CI: &[&str] = &[
    ".github/",
    ".circleci/",
    ".travis.yml",
    ".gitlab-ci.yml",
    "appveyor.yml",
    ".drone.yml",
    "cloudbuild.yaml",
    "codeship-services.yml",
    "codeship-steps.yml",
];

/// Other tool configuration excluded by default.
pub const EXCLUDE_EXTRA: &[&str] = &["**/.goreleaser.yml", "**/.sops.yaml", "**/.flux.yaml"];

/// One gitignore pattern set, scoped to a directory relative to the source root.
#[derive(Clone, Debug)]
struct Scoped {
    scope: PathBuf,
    rules: Gitignore,
}

/// Decides which paths of a source directory are left out of an artifact.
///
/// Pattern sets are evaluated as one ordered list, like git and Flux do: the last pattern that
/// matches a path (or one of its parent directories) decides, and `!pattern` re-includes.
/// Patterns from a `.sourceignore` in a subdirectory only apply below that subdirectory.
#[derive(Clone, Debug, Default)]
pub struct IgnoreFilter {
    sets: Vec<Scoped>,
}

impl IgnoreFilter {
    /// A filter that keeps everything.
    pub fn none() -> Self {
        Self::default()
    }

    /// A filter from gitignore lines that apply to the whole source (`spec.ignore`,
    /// `--ignore-paths`); `origin` names them in errors.
    pub fn from_patterns(patterns: &str, origin: &str) -> Result<Self> {
        let mut filter = Self::none();
        filter.push(Path::new(""), patterns.lines(), origin)?;
        Ok(filter)
    }

    /// Flux's filter for a Git or Bucket source checked out in `dir`.
    ///
    /// Reads every `.sourceignore` below `dir` (not descending into `.git`) and appends
    /// `spec_ignore`. Version-control files are always excluded; the default exclusions (images,
    /// archives, CI configuration) apply only when neither gave any pattern, as in Flux.
    pub fn for_source(dir: &Path, spec_ignore: Option<&str>) -> Result<Self> {
        let mut user = Self::none();
        user.load_ignore_files(dir, Path::new(""))?;
        if let Some(patterns) = spec_ignore {
            user.push(Path::new(""), patterns.lines(), "spec.ignore")?;
        }
        let mut filter = Self::none();
        filter.push(
            Path::new(""),
            EXCLUDE_VCS.iter().copied(),
            "the default exclusions",
        )?;
        if user.sets.is_empty() {
            let defaults = EXCLUDE_EXT
                .iter()
                .chain(EXCLUDE_CI)
                .chain(EXCLUDE_EXTRA)
                .copied();
            filter.push(Path::new(""), defaults, "the default exclusions")?;
        }
        filter.sets.extend(user.sets);
        Ok(filter)
    }

    /// Flux's filter for a Bucket: the bucket root's `.sourceignore` (its text, when the
    /// object exists), then `spec_ignore`, which wins. Unlike [`Self::for_source`], no default
    /// exclusions apply, as in Flux's bucket reconciler.
    pub fn for_bucket(sourceignore: Option<&str>, spec_ignore: Option<&str>) -> Result<Self> {
        let mut filter = Self::none();
        if let Some(text) = sourceignore {
            filter.push(Path::new(""), text.lines(), IGNORE_FILE)?;
        }
        if let Some(patterns) = spec_ignore {
            filter.push(Path::new(""), patterns.lines(), "spec.ignore")?;
        }
        Ok(filter)
    }

    /// Whether `path` (relative to the source root, `/`-separated) is excluded.
    pub fn is_ignored(&self, path: &Path, is_dir: bool) -> bool {
        for set in self.sets.iter().rev() {
            let Ok(relative) = path.strip_prefix(&set.scope) else {
                continue;
            };
            if relative.as_os_str().is_empty() {
                continue;
            }
            match set.rules.matched_path_or_any_parents(relative, is_dir) {
                Match::None => {}
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
            }
        }
        false
    }

    /// Whether some pattern re-includes paths (`!pattern`); when none does, a whole ignored
    /// directory can be skipped without looking inside.
    pub(crate) fn has_negations(&self) -> bool {
        self.sets.iter().any(|set| set.rules.num_whitelists() > 0)
    }

    /// Whether the filter has no patterns at all.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    fn push<'a>(
        &mut self,
        scope: &Path,
        lines: impl IntoIterator<Item = &'a str>,
        origin: &str,
    ) -> Result<()> {
        let mut builder = GitignoreBuilder::new("");
        let mut any = false;
        for line in lines {
            // Flux skips comments and blank lines itself before parsing.
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            builder
                .add_line(None, line)
                .map_err(|source| Error::IgnorePattern {
                    pattern: line.to_owned(),
                    origin: origin.to_owned(),
                    source,
                })?;
            any = true;
        }
        if !any {
            return Ok(());
        }
        let rules = builder.build().map_err(|source| Error::IgnorePattern {
            pattern: String::new(),
            origin: origin.to_owned(),
            source,
        })?;
        self.sets.push(Scoped {
            scope: scope.to_owned(),
            rules,
        });
        Ok(())
    }

    fn load_ignore_files(&mut self, root: &Path, relative: &Path) -> Result<()> {
        let dir = root.join(relative);
        let file = dir.join(IGNORE_FILE);
        match std::fs::read_to_string(&file) {
            Ok(text) => self.push(relative, text.lines(), &file.display().to_string())?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("read", file, e)),
        }
        let mut children = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| Error::io("read directory", &dir, e))? {
            let entry = entry.map_err(|e| Error::io("read directory", &dir, e))?;
            let is_dir = entry
                .file_type()
                .map_err(|e| Error::io("inspect", entry.path(), e))?
                .is_dir();
            if is_dir && entry.file_name() != ".git" {
                children.push(entry.file_name());
            }
        }
        children.sort();
        for child in children {
            self.load_ignore_files(root, &relative.join(child))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ignored(filter: &IgnoreFilter, path: &str) -> bool {
        filter.is_ignored(Path::new(path), path.ends_with('/'))
    }

    fn dir_ignored(filter: &IgnoreFilter, path: &str) -> bool {
        filter.is_ignored(Path::new(path), true)
    }

    #[test]
    fn defaults_apply_without_user_patterns() {
        let dir = tempfile::tempdir().unwrap();
        let filter = IgnoreFilter::for_source(dir.path(), None).unwrap();
        assert!(dir_ignored(&filter, ".git"));
        assert!(ignored(&filter, ".git/config"));
        assert!(ignored(&filter, ".gitignore"));
        assert!(ignored(&filter, "docs/logo.png"));
        assert!(ignored(&filter, "release.tar.gz"));
        assert!(dir_ignored(&filter, ".github"));
        assert!(ignored(&filter, ".github/workflows/ci.yaml"));
        assert!(ignored(&filter, "deep/down/.sops.yaml"));
        assert!(!ignored(&filter, "deploy/app.yaml"));
        assert!(!ignored(&filter, ".sourceignore"));
    }

    #[test]
    fn user_patterns_replace_defaults_but_not_vcs() {
        let dir = tempfile::tempdir().unwrap();
        let filter = IgnoreFilter::for_source(dir.path(), Some("# comment\n\n*.txt\n")).unwrap();
        assert!(ignored(&filter, "notes.txt"));
        assert!(ignored(&filter, ".git/HEAD"));
        assert!(
            !ignored(&filter, "logo.png"),
            "defaults are dropped once the user gives patterns"
        );
    }

    #[test]
    fn nested_sourceignore_is_scoped_to_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("apps/skip")).unwrap();
        std::fs::write(dir.path().join(".sourceignore"), "/top-only.yaml\n").unwrap();
        std::fs::write(dir.path().join("apps/.sourceignore"), "*.secret\nskip/\n").unwrap();
        let filter = IgnoreFilter::for_source(dir.path(), None).unwrap();
        assert!(ignored(&filter, "top-only.yaml"));
        assert!(
            !ignored(&filter, "apps/top-only.yaml"),
            "anchored to the root"
        );
        assert!(ignored(&filter, "apps/db.secret"));
        assert!(
            !ignored(&filter, "db.secret"),
            "nested patterns do not apply above their directory"
        );
        assert!(dir_ignored(&filter, "apps/skip"));
        assert!(ignored(&filter, "apps/skip/file.yaml"));
    }

    #[test]
    fn negation_re_includes() {
        let filter = IgnoreFilter::from_patterns("*.yaml\n!keep.yaml\n", "test").unwrap();
        assert!(ignored(&filter, "a.yaml"));
        assert!(!ignored(&filter, "keep.yaml"));
        assert!(filter.has_negations());
    }

    #[test]
    fn spec_ignore_overrides_sourceignore() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".sourceignore"), "*.yaml\n").unwrap();
        let filter = IgnoreFilter::for_source(dir.path(), Some("!app.yaml")).unwrap();
        assert!(ignored(&filter, "other.yaml"));
        assert!(!ignored(&filter, "app.yaml"));
    }
}
