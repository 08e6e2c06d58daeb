//! `helm dependency build` for a chart directory inside a source tree, as Flux's dependency
//! manager does it.
//!
//! Every dependency in `Chart.yaml` whose chart is not under `charts/` yet is added there as
//! `<name>-<version>.tgz`:
//! - `file://<path>` (or an empty repository: `charts/<name>`): the chart at that path,
//!   relative to the chart directory *in the source tree*, packaged; the path must stay inside
//!   the source root (links included) and its version must satisfy the constraint;
//! - `https://` / `http://`: the repository's index is fetched and the highest version the
//!   constraint accepts is downloaded, with the credentials [`DependencyOptions::repositories`]
//!   holds for that URL (anonymous otherwise).
//!
//! - `oci://host/path`: the chart `oci://host/path/<name>` at the newest tag the constraint
//!   accepts, pulled as Helm pulls OCI charts ([`super::oci`]), with the registry options
//!   [`DependencyOptions::registries`] holds for that URL.
//!
//! Repository aliases (`@name`, `alias:name`) are refused with an error naming the dependency.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::build::{copy_confined, package_dir};
use super::index::normalize_url;
use super::repository::{ClientOptions, Repository};
use super::{Error, Result};
use crate::artifact::Limits;

/// How repository dependencies are reached.
#[derive(Clone, Debug, Default)]
pub struct DependencyOptions {
    /// Client options per repository URL (normalised with [`normalize_url`], so with a trailing
    /// `/`); a URL not listed is fetched anonymously with [`Self::defaults`].
    pub repositories: BTreeMap<String, ClientOptions>,
    /// Options for repositories not listed (timeout and limits).
    pub defaults: ClientOptions,
    /// Registry options per OCI repository URL (`oci://host/path`, without a trailing `/`);
    /// an `oci://` dependency of a URL not listed is pulled anonymously over HTTPS.
    pub registries: BTreeMap<String, crate::oci::RegistryOptions>,
}

/// A dependency added to `charts/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The dependency's name (not its alias).
    pub name: String,
    /// The version added.
    pub version: String,
    /// Where it came from (`file://…` or the repository URL).
    pub repository: String,
}

/// Adds the missing dependencies of the chart copied to `work_dir` (whose original is
/// `chart_dir`, inside `source_root`) into `work_dir/charts/`. Returns what was added.
///
/// # Errors
/// [`Error::OutsideSource`] for a `file://` path leaving the source, [`Error::Chart`] naming
/// the dependency for anything else (missing chart, version outside the constraint, download
/// failure).
pub async fn build(
    source_root: &Path,
    chart_dir: &Path,
    work_dir: &Path,
    options: &DependencyOptions,
) -> Result<Vec<Resolved>> {
    let loaded = load_blocking(work_dir.to_owned()).await?;
    let present: Vec<String> = loaded
        .dependencies
        .iter()
        .map(|c| c.metadata.name.clone())
        .collect();
    let mut missing = Vec::new();
    for dep in &loaded.metadata.dependencies {
        if present.contains(&dep.name)
            || missing
                .iter()
                .any(|d: &capstan_helm::chart::Dependency| d.name == dep.name)
        {
            continue;
        }
        missing.push(dep.clone());
    }
    let charts = work_dir.join("charts");
    if !missing.is_empty() {
        std::fs::create_dir_all(&charts).map_err(|e| Error::io("create directory", &charts, e))?;
    }
    let mut resolved = Vec::with_capacity(missing.len());
    for dep in missing {
        // The name becomes a file name under `charts/` (and a path in a registry): a name from
        // an untrusted Chart.yaml must not reach outside it.
        if !is_plain_name(&dep.name) {
            return Err(Error::chart(
                "invalid dependency",
                format!(
                    "dependency name {:?} is not a plain chart name (no '/', '\\', '..' or empty)",
                    dep.name
                ),
            ));
        }
        let added = if is_local(&dep.repository) {
            add_local(
                source_root,
                chart_dir,
                &charts,
                &dep,
                &options.defaults.limits,
            )
            .await
            .map_err(|e| wrap("local", &dep.name, &e))?
        } else {
            add_remote(&charts, &dep, options)
                .await
                .map_err(|e| wrap("remote", &dep.name, &e))?
        };
        resolved.push(added);
    }
    Ok(resolved)
}

fn wrap(kind: &str, name: &str, error: &Error) -> Error {
    match error {
        Error::OutsideSource { what, path } => Error::OutsideSource {
            what,
            path: path.clone(),
        },
        other => Error::chart(
            format!("failed to add {kind} dependency '{name}'"),
            crate::redact::error_chain(other),
        ),
    }
}

/// A single, normal file-name component: what a chart or dependency name must be before it
/// names a file.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// Writes a dependency archive as `charts/<file_name>`, refusing a name that would leave `charts/`
/// (the name comes from a chart's metadata or a repository index).
fn write_archive(charts: &Path, file_name: &str, bytes: &[u8]) -> Result<()> {
    if !is_plain_name(file_name) {
        return Err(Error::chart(
            "invalid dependency",
            format!("archive name {file_name:?} would leave the charts directory"),
        ));
    }
    let target = charts.join(file_name);
    std::fs::write(&target, bytes).map_err(|e| Error::io("write", &target, e))
}

fn is_local(repository: &str) -> bool {
    repository.is_empty() || repository.starts_with("file://")
}

async fn load_blocking(dir: PathBuf) -> Result<capstan_helm::chart::Chart> {
    tokio::task::spawn_blocking(move || {
        capstan_helm::chart::load(&dir)
            .map_err(|e| Error::chart(format!("cannot load chart at '{}'", dir.display()), e))
    })
    .await
    .map_err(Error::Task)?
}

/// Resolves `path` (relative to `base`) inside `root`, refusing anything outside it.
pub(crate) fn confined(
    root: &Path,
    base: &Path,
    path: &str,
    what: &'static str,
) -> Result<PathBuf> {
    let outside = || Error::OutsideSource {
        what,
        path: path.to_owned(),
    };
    if Path::new(path).is_absolute() {
        return Err(outside());
    }
    let joined = base.join(path);
    let root = root
        .canonicalize()
        .map_err(|e| Error::io("resolve", root, e))?;
    // Lexically first (so a `..` past the root is refused even when the target is missing).
    let mut lexical = PathBuf::new();
    for component in joined.components() {
        match component {
            std::path::Component::ParentDir => {
                if !lexical.pop() {
                    return Err(outside());
                }
            }
            std::path::Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    let resolved = match lexical.canonicalize() {
        Ok(resolved) => resolved,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if lexical.starts_with(&root) {
                return Ok(lexical);
            }
            return Err(outside());
        }
        Err(e) => return Err(Error::io("resolve", &lexical, e)),
    };
    if !resolved.starts_with(&root) {
        return Err(outside());
    }
    Ok(resolved)
}

async fn add_local(
    source_root: &Path,
    chart_dir: &Path,
    charts: &Path,
    dep: &capstan_helm::chart::Dependency,
    limits: &Limits,
) -> Result<Resolved> {
    let relative = if dep.repository.is_empty() {
        format!("charts/{}", dep.name)
    } else {
        let rest = dep.repository.trim_start_matches("file://");
        rest.to_owned()
    };
    let path = confined(source_root, chart_dir, &relative, "file:// dependency")?;
    if !path.is_dir() {
        return Err(Error::chart(
            "missing chart",
            format!(
                "no chart found at '{relative}' (reference '{}')",
                dep.repository
            ),
        ));
    }
    let temp = crate::temp::dir("helm-dependency")
        .map_err(|e| Error::io("create", std::env::temp_dir(), e))?;
    let copy = temp.path().join(&dep.name);
    copy_confined(source_root, &path, &copy, limits)?;
    let package = package_dir(copy).await?;
    if !dep.version.is_empty() {
        let constraint = capstan_semver::Constraint::parse(&dep.version).map_err(|e| {
            Error::chart(
                format!("invalid version/constraint format '{}'", dep.version),
                e,
            )
        })?;
        let matches =
            capstan_semver::parse_version(&package.version).is_some_and(|v| constraint.matches(&v));
        if !matches {
            return Err(Error::chart(
                "version mismatch",
                format!(
                    "can't get a valid version for constraint '{}' (the chart at '{relative}' is {})",
                    dep.version, package.version
                ),
            ));
        }
    }
    write_archive(charts, &package.file_name, &package.bytes)?;
    Ok(Resolved {
        name: dep.name.clone(),
        version: package.version,
        repository: dep.repository.clone(),
    })
}

async fn add_remote(
    charts: &Path,
    dep: &capstan_helm::chart::Dependency,
    options: &DependencyOptions,
) -> Result<Resolved> {
    if dep.repository.starts_with('@') || dep.repository.starts_with("alias:") {
        return Err(Error::chart(
            "unsupported repository",
            format!(
                "repository alias '{}' is not supported: use the repository URL",
                dep.repository
            ),
        ));
    }
    if dep.repository.starts_with("oci://") {
        return add_oci(charts, dep, options).await;
    }
    let url = normalize_url(&dep.repository)?;
    let client_options = options
        .repositories
        .get(url.as_str())
        .cloned()
        .unwrap_or_else(|| options.defaults.clone());
    let repository = Repository::new(url.as_str(), client_options)?;
    let fetched = repository.fetch_index().await?;
    let version = fetched.index.select(&dep.name, &dep.version)?;
    let chart = repository.download_chart(version).await?;
    write_archive(
        charts,
        &format!("{}-{}.tgz", dep.name, version.version),
        &chart.bytes,
    )?;
    Ok(Resolved {
        name: dep.name.clone(),
        version: version.version.clone(),
        repository: crate::redact::url(&dep.repository),
    })
}

async fn add_oci(
    charts: &Path,
    dep: &capstan_helm::chart::Dependency,
    options: &DependencyOptions,
) -> Result<Resolved> {
    let base = dep.repository.trim_end_matches('/');
    let registry = options.registries.get(base).cloned().unwrap_or_default();
    let reference = format!("{base}/{}", dep.name);
    let limit = super::MAX_CHART_SIZE.min(options.defaults.limits.max_archive_bytes);
    let pulled = super::oci::pull(&reference, &dep.version, &registry, limit)
        .await
        .map_err(|e| {
            Error::chart(
                format!(
                    "failed to pull chart '{}' version '{}' from '{}'",
                    dep.name,
                    dep.version,
                    crate::redact::url(&dep.repository)
                ),
                crate::redact::error_chain(&e),
            )
        })?;
    write_archive(
        charts,
        &format!("{}-{}.tgz", dep.name, pulled.version),
        &pulled.bytes,
    )?;
    Ok(Resolved {
        name: dep.name.clone(),
        version: pulled.version,
        repository: crate::redact::url(&dep.repository),
    })
}
