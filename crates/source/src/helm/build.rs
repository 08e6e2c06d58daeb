//! What a HelmChart produces: a chart package, built as Flux's chart builders build it.
//!
//! - [`build_remote`]: a chart downloaded from a repository. Without values files or version
//!   metadata the archive is kept byte for byte (after checking it loads as a chart);
//!   otherwise it is unpacked, its values replaced and its version set, and packaged again.
//! - [`build_local`]: a chart directory (or a packaged `.tgz`) inside a Git or Bucket
//!   artifact: dependencies built ([`super::dependencies`]), values files (relative to the
//!   source root) merged, version metadata set, packaged.
//!
//! Values files replace `values.yaml` with their merge, in order (Flux's "alternative list
//! of values files"; list `values.yaml` first to keep the defaults). Version metadata replaces
//! the build metadata of the chart's version (`6.0.3` → `6.0.3+<metadata>`).
//!
//! Errors are [`BuildError`]s carrying Flux's build error reason (`InvalidChartReference`,
//! `ValuesFilesError`, `DependencyBuildError`, …), which decides the HelmChart's condition.

use std::path::{Path, PathBuf};

use super::dependencies::{self, DependencyOptions, confined};
use super::{Error, Result};
use crate::artifact::Limits;

/// Flux's chart build error reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildErrorReason {
    /// The chart reference (name, path, version) does not resolve.
    ChartReference,
    /// The chart could not be pulled or copied.
    ChartPull,
    /// The version metadata could not be set.
    ChartMetadataPatch,
    /// A values file is missing or does not parse.
    ValuesFilesMerge,
    /// A dependency could not be built.
    DependencyBuild,
    /// The chart could not be packaged.
    ChartPackage,
    /// The chart's signature did not verify.
    ChartVerification,
}

impl BuildErrorReason {
    /// The condition reason (`InvalidChartReference`, `ChartPullError`, …).
    pub fn reason(self) -> &'static str {
        match self {
            Self::ChartReference => "InvalidChartReference",
            Self::ChartPull => "ChartPullError",
            Self::ChartMetadataPatch => "MetadataPatchError",
            Self::ValuesFilesMerge => "ValuesFilesError",
            Self::DependencyBuild => "DependencyBuildError",
            Self::ChartPackage => "ChartPackageError",
            Self::ChartVerification => "ChartVerificationError",
        }
    }

    /// The human summary prefixing the message (`invalid chart reference`, …).
    pub fn summary(self) -> &'static str {
        match self {
            Self::ChartReference => "invalid chart reference",
            Self::ChartPull => "chart pull error",
            Self::ChartMetadataPatch => "chart metadata patch error",
            Self::ValuesFilesMerge => "values files merge error",
            Self::DependencyBuild => "dependency build error",
            Self::ChartPackage => "chart package error",
            Self::ChartVerification => "chart verification error",
        }
    }

    /// Whether only a spec change can fix it (Flux's persistent build errors).
    pub fn is_persistent(self) -> bool {
        matches!(
            self,
            Self::ChartReference | Self::ChartMetadataPatch | Self::ValuesFilesMerge
        )
    }

    /// Whether Flux reports it as `BuildFailed` (else `FetchFailed`).
    pub fn is_build_failure(self) -> bool {
        matches!(
            self,
            Self::ChartMetadataPatch
                | Self::ValuesFilesMerge
                | Self::DependencyBuild
                | Self::ChartPackage
                | Self::ChartVerification
        )
    }
}

/// A chart build failure: Flux's reason and the cause.
#[derive(Debug, thiserror::Error)]
#[error("{}: {}", reason.summary(), crate::redact::error_chain(source))]
pub struct BuildError {
    /// Flux's reason.
    pub reason: BuildErrorReason,
    /// The cause.
    #[source]
    pub source: Error,
}

impl BuildError {
    /// A build error of `reason`.
    pub fn new(reason: BuildErrorReason, source: Error) -> Self {
        BuildError { reason, source }
    }
}

/// What to change in a chart while building it.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// Values files merged, in order, into `values.yaml`.
    pub values_files: Vec<String>,
    /// Skip values files that do not exist instead of failing.
    pub ignore_missing_values_files: bool,
    /// Build metadata set on the chart version (`+<metadata>`).
    pub version_metadata: Option<String>,
}

/// A built chart package.
#[derive(Clone, Debug)]
pub struct Built {
    /// The chart name.
    pub name: String,
    /// The chart version, with the build metadata set.
    pub version: String,
    /// The archive.
    pub bytes: Vec<u8>,
    /// Whether it was packaged here (rather than kept as pulled).
    pub packaged: bool,
    /// The values files that were merged (those found).
    pub values_files: Vec<String>,
    /// The dependencies added to `charts/`.
    pub dependencies: Vec<dependencies::Resolved>,
}

impl Built {
    /// Flux's summary: `packaged 'podinfo' chart with version '6.0.3'` (`pulled` when kept as
    /// downloaded), `and merged values files [a b]` when values files were merged.
    pub fn summary(&self) -> String {
        let action = if self.packaged { "packaged" } else { "pulled" };
        let mut summary = format!(
            "{action} '{}' chart with version '{}'",
            self.name, self.version
        );
        if !self.values_files.is_empty() {
            summary.push_str(" and merged values files [");
            summary.push_str(&self.values_files.join(" "));
            summary.push(']');
        }
        summary
    }

    /// The artifact file name: `<name>-<version>.tgz`.
    pub fn file_name(&self) -> String {
        format!("{}-{}.tgz", self.name, self.version)
    }
}

/// A packaged chart directory.
#[derive(Clone, Debug)]
pub struct Package {
    /// `<name>-<version>.tgz`.
    pub file_name: String,
    /// The archive.
    pub bytes: Vec<u8>,
    /// The chart name.
    pub name: String,
    /// The chart version.
    pub version: String,
}

/// The chart version with `metadata` as its build metadata (replacing any).
///
/// # Errors
/// [`Error::Chart`] when the version is not SemVer or the metadata has other characters than
/// `[0-9A-Za-z-.]`.
pub fn with_metadata(version: &str, metadata: &str) -> Result<String> {
    let parsed = capstan_semver::parse_version(version).ok_or_else(|| {
        Error::chart(
            "failed to parse version from chart metadata as SemVer",
            format!("invalid version '{version}'"),
        )
    })?;
    let build = semver::BuildMetadata::new(metadata)
        .map_err(|e| Error::chart("failed to set SemVer metadata on chart version", e))?;
    let mut out = format!("{}.{}.{}", parsed.major, parsed.minor, parsed.patch);
    if !parsed.pre.is_empty() {
        out.push('-');
        out.push_str(parsed.pre.as_str());
    }
    if !build.is_empty() {
        out.push('+');
        out.push_str(build.as_str());
    }
    Ok(out)
}

/// Builds the chart downloaded as `archive` (HelmRepository charts). Values files are read
/// from inside the chart.
///
/// # Errors
/// [`BuildError`] with Flux's reason.
pub async fn build_remote(archive: Vec<u8>, options: &BuildOptions) -> Result<Built, BuildError> {
    let options = options.clone();
    tokio::task::spawn_blocking(move || build_remote_blocking(archive, &options))
        .await
        .map_err(|e| BuildError::new(BuildErrorReason::ChartPackage, Error::Task(e)))?
}

fn build_remote_blocking(archive: Vec<u8>, options: &BuildOptions) -> Result<Built, BuildError> {
    let chart = capstan_helm::chart::load_archive(&archive).map_err(|e| {
        BuildError::new(
            BuildErrorReason::ChartPull,
            Error::chart("failed to load downloaded chart", e),
        )
    })?;
    let name = chart.metadata.name.clone();
    let mut version = chart.metadata.version.clone();
    if let Some(metadata) = &options.version_metadata {
        version = with_metadata(&version, metadata)
            .map_err(|e| BuildError::new(BuildErrorReason::ChartMetadataPatch, e))?;
    }
    if options.values_files.is_empty() && options.version_metadata.is_none() {
        return Ok(Built {
            name,
            version,
            bytes: archive,
            packaged: false,
            values_files: Vec::new(),
            dependencies: Vec::new(),
        });
    }
    let temp = temp_dir().map_err(|e| BuildError::new(BuildErrorReason::ChartPackage, e))?;
    let unpacked = temp.path().join("chart");
    crate::artifact::extract(&archive[..], &unpacked, &Limits::default()).map_err(|e| {
        BuildError::new(
            BuildErrorReason::ChartPackage,
            Error::chart(
                "failed to unpack downloaded chart",
                crate::redact::error_chain(&e),
            ),
        )
    })?;
    let chart_dir = single_directory(&unpacked)
        .map_err(|e| BuildError::new(BuildErrorReason::ChartPackage, e))?;
    let values_files = merge_values(&chart_dir, &chart_dir, options)
        .map_err(|e| BuildError::new(BuildErrorReason::ValuesFilesMerge, e))?;
    set_version(&chart_dir, &version)
        .map_err(|e| BuildError::new(BuildErrorReason::ChartMetadataPatch, e))?;
    let package = package_dir_blocking(&chart_dir)
        .map_err(|e| BuildError::new(BuildErrorReason::ChartPackage, e))?;
    Ok(Built {
        name,
        version: package.version,
        bytes: package.bytes,
        packaged: true,
        values_files,
        dependencies: Vec::new(),
    })
}

/// Builds the chart at `chart_path` inside `source_root` (GitRepository and Bucket charts):
/// a directory is copied (never reading outside the source), its dependencies built, values
/// files (relative to the source root) merged and its version set, then packaged; a `.tgz`
/// is kept as it is unless values files or version metadata ask for a new package.
///
/// # Errors
/// [`BuildError`] with Flux's reason.
pub async fn build_local(
    source_root: &Path,
    chart_path: &str,
    options: &BuildOptions,
    dependencies: &DependencyOptions,
) -> Result<Built, BuildError> {
    let reference = |e| BuildError::new(BuildErrorReason::ChartReference, e);
    let chart = confined(source_root, source_root, chart_path, "chart path").map_err(reference)?;
    if !chart.exists() {
        return Err(reference(Error::chart(
            format!("no chart found at '{chart_path}'"),
            "the path does not exist in the source",
        )));
    }
    if chart.is_file() {
        let archive = std::fs::read(&chart).map_err(|e| {
            BuildError::new(BuildErrorReason::ChartPull, Error::io("read", &chart, e))
        })?;
        if options.values_files.is_empty() && options.version_metadata.is_none() {
            return build_remote(archive, options).await;
        }
        // Values files of a packaged chart in a source are relative to the source root too.
        return rebuild_archive(source_root, archive, options).await;
    }
    let limits = dependencies.defaults.limits;
    let temp = temp_dir().map_err(|e| BuildError::new(BuildErrorReason::ChartPackage, e))?;
    let work = temp.path().join("chart");
    {
        let (root, from, to) = (source_root.to_owned(), chart.clone(), work.clone());
        tokio::task::spawn_blocking(move || copy_confined(&root, &from, &to, &limits))
            .await
            .map_err(|e| BuildError::new(BuildErrorReason::ChartPackage, Error::Task(e)))?
            .map_err(|e| BuildError::new(BuildErrorReason::ChartReference, e))?;
    }
    let metadata = load_metadata(&work).map_err(reference)?;
    let (version, values_files) =
        version_and_values(source_root, &work, metadata.version, options)?;
    let resolved = dependencies::build(source_root, &chart, &work, dependencies)
        .await
        .map_err(|e| BuildError::new(BuildErrorReason::DependencyBuild, e))?;
    package_built(work, &version, values_files, resolved).await
}

/// The version `version` with the build metadata of `options` set, and the values files of
/// `options` (relative to `source_root`) merged into the chart at `chart_dir`.
fn version_and_values(
    source_root: &Path,
    chart_dir: &Path,
    version: String,
    options: &BuildOptions,
) -> Result<(String, Vec<String>), BuildError> {
    let version = match &options.version_metadata {
        Some(meta) => with_metadata(&version, meta)
            .map_err(|e| BuildError::new(BuildErrorReason::ChartMetadataPatch, e))?,
        None => version,
    };
    let values_files = merge_values(source_root, chart_dir, options)
        .map_err(|e| BuildError::new(BuildErrorReason::ValuesFilesMerge, e))?;
    Ok((version, values_files))
}

/// Sets `version` in the chart at `chart_dir` and packages it.
async fn package_built(
    chart_dir: PathBuf,
    version: &str,
    values_files: Vec<String>,
    dependencies: Vec<dependencies::Resolved>,
) -> Result<Built, BuildError> {
    set_version(&chart_dir, version)
        .map_err(|e| BuildError::new(BuildErrorReason::ChartMetadataPatch, e))?;
    let package = package_dir(chart_dir)
        .await
        .map_err(|e| BuildError::new(BuildErrorReason::ChartPackage, e))?;
    Ok(Built {
        name: package.name,
        version: package.version,
        bytes: package.bytes,
        packaged: true,
        values_files,
        dependencies,
    })
}

async fn rebuild_archive(
    source_root: &Path,
    archive: Vec<u8>,
    options: &BuildOptions,
) -> Result<Built, BuildError> {
    let temp = temp_dir().map_err(|e| BuildError::new(BuildErrorReason::ChartPackage, e))?;
    let unpacked = temp.path().join("chart");
    crate::artifact::extract(&archive[..], &unpacked, &Limits::default()).map_err(|e| {
        BuildError::new(
            BuildErrorReason::ChartPull,
            Error::chart("failed to unpack the chart", crate::redact::error_chain(&e)),
        )
    })?;
    let chart_dir =
        single_directory(&unpacked).map_err(|e| BuildError::new(BuildErrorReason::ChartPull, e))?;
    let metadata = load_metadata(&chart_dir)
        .map_err(|e| BuildError::new(BuildErrorReason::ChartReference, e))?;
    let (version, values_files) =
        version_and_values(source_root, &chart_dir, metadata.version, options)?;
    package_built(chart_dir, &version, values_files, Vec::new()).await
}

fn temp_dir() -> Result<tempfile::TempDir> {
    crate::temp::dir("helm-chart").map_err(|e| Error::io("create", std::env::temp_dir(), e))
}

fn single_directory(dir: &Path) -> Result<PathBuf> {
    let mut entries = std::fs::read_dir(dir)
        .map_err(|e| Error::io("read directory", dir, e))?
        .filter_map(std::result::Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()));
    match (entries.next(), entries.next()) {
        (Some(only), None) => Ok(only.path()),
        _ => Err(Error::chart(
            "invalid chart archive",
            "the archive must hold one top directory",
        )),
    }
}

fn load_metadata(dir: &Path) -> Result<capstan_helm::chart::Metadata> {
    let path = dir.join("Chart.yaml");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::chart("no chart found", format!("cannot read Chart.yaml: {e}")))?;
    let value =
        capstan_helm::yaml::parse(&text).map_err(|e| Error::chart("cannot load Chart.yaml", e))?;
    let field = |key: &str| {
        value
            .get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let metadata = capstan_helm::chart::Metadata {
        api_version: field("apiVersion"),
        name: field("name"),
        version: field("version"),
        ..capstan_helm::chart::Metadata::default()
    };
    if metadata.name.is_empty() {
        return Err(Error::chart(
            "invalid Chart.yaml",
            "validation: chart.metadata.name is required",
        ));
    }
    if capstan_semver::parse_version(&metadata.version).is_none() {
        return Err(Error::chart(
            "invalid Chart.yaml",
            format!(
                "validation: chart.metadata.version {:?} is invalid",
                metadata.version
            ),
        ));
    }
    Ok(metadata)
}

/// Sets `version` in the chart's `Chart.yaml` (re-written as Helm's `chartutil.Save` writes
/// it: `yaml.Marshal` of the metadata) when it differs.
fn set_version(dir: &Path, version: &str) -> Result<()> {
    let path = dir.join("Chart.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io("read", &path, e))?;
    let mut value =
        capstan_helm::yaml::parse(&text).map_err(|e| Error::chart("cannot load Chart.yaml", e))?;
    if value.get("version").and_then(serde_json::Value::as_str) == Some(version) {
        return Ok(());
    }
    let Some(map) = value.as_object_mut() else {
        return Err(Error::chart("invalid Chart.yaml", "not a map"));
    };
    map.insert(
        "version".to_owned(),
        serde_json::Value::String(version.to_owned()),
    );
    let yaml = capstan_helm::yaml::to_yaml(&capstan_helm::Value::from_json(&value))
        .map_err(|e| Error::chart("cannot write Chart.yaml", e))?;
    std::fs::write(&path, yaml).map_err(|e| Error::io("write", &path, e))
}

/// Merges the values files (relative to `base`, confined to it) into the chart's
/// `values.yaml` (Flux's `mergeFileValues` + `OverwriteChartDefaultValues`); returns those
/// merged.
fn merge_values(base: &Path, chart_dir: &Path, options: &BuildOptions) -> Result<Vec<String>> {
    if options.values_files.is_empty() {
        return Ok(Vec::new());
    }
    let mut merged = capstan_helm::chart::Values::new();
    let mut found = Vec::new();
    for file in &options.values_files {
        let path = confined(base, base, file, "values file")?;
        let data = match std::fs::read(&path) {
            Ok(data) if path.is_file() => data,
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && options.ignore_missing_values_files =>
            {
                continue;
            }
            _ => {
                return Err(Error::chart(
                    "missing values file",
                    format!("no values file found at path '{file}'"),
                ));
            }
        };
        let values = capstan_helm::chart::read_values(&data)
            .map_err(|e| Error::chart(format!("unmarshaling values from '{file}' failed"), e))?;
        merged = capstan_helm::chart::merge_maps(&merged, &values);
        found.push(file.clone());
    }
    let yaml = if merged.is_empty() {
        String::new()
    } else {
        capstan_helm::yaml::to_yaml(&capstan_helm::Value::from_json(&serde_json::Value::Object(
            merged,
        )))
        .map_err(|e| Error::chart("cannot write values.yaml", e))?
    };
    let target = chart_dir.join("values.yaml");
    std::fs::write(&target, yaml).map_err(|e| Error::io("write", &target, e))?;
    Ok(found)
}

/// Copies the directory `from` (inside `root`) to `to`: regular files and directories; links
/// are followed only when they resolve inside `root`. Bounded by `limits` (entries, file and
/// total sizes).
///
/// # Errors
/// [`Error::OutsideSource`] for a link leaving the root, [`Error::Chart`] past a limit.
pub fn copy_confined(root: &Path, from: &Path, to: &Path, limits: &Limits) -> Result<()> {
    let root = root
        .canonicalize()
        .map_err(|e| Error::io("resolve", root, e))?;
    let mut entries = 0_u64;
    let mut total = 0_u64;
    copy_dir(&root, from, to, limits, &mut entries, &mut total, 0)
}

fn copy_dir(
    root: &Path,
    from: &Path,
    to: &Path,
    limits: &Limits,
    entries: &mut u64,
    total: &mut u64,
    depth: usize,
) -> Result<()> {
    if depth > 64 {
        return Err(Error::chart(
            "cannot copy the chart",
            "directories nest too deep",
        ));
    }
    std::fs::create_dir_all(to).map_err(|e| Error::io("create directory", to, e))?;
    let mut children: Vec<_> = std::fs::read_dir(from)
        .map_err(|e| Error::io("read directory", from, e))?
        .filter_map(std::result::Result::ok)
        .collect();
    children.sort_by_key(std::fs::DirEntry::file_name);
    for child in children {
        *entries += 1;
        if *entries > limits.max_entries {
            return Err(Error::chart(
                "cannot copy the chart",
                format!("more than {} entries", limits.max_entries),
            ));
        }
        let source = child.path();
        let target = to.join(child.file_name());
        let mut resolved = source.clone();
        let file_type = child
            .file_type()
            .map_err(|e| Error::io("inspect", &source, e))?;
        if file_type.is_symlink() {
            resolved = source
                .canonicalize()
                .map_err(|e| Error::io("resolve", &source, e))?;
            if !resolved.starts_with(root) {
                return Err(Error::OutsideSource {
                    what: "link",
                    path: source
                        .strip_prefix(root)
                        .unwrap_or(&source)
                        .display()
                        .to_string(),
                });
            }
        }
        let metadata =
            std::fs::metadata(&resolved).map_err(|e| Error::io("inspect", &resolved, e))?;
        if metadata.is_dir() {
            copy_dir(root, &resolved, &target, limits, entries, total, depth + 1)?;
        } else if metadata.is_file() {
            if metadata.len() > limits.max_file_bytes {
                return Err(Error::chart(
                    "cannot copy the chart",
                    format!(
                        "{} exceeds {} bytes",
                        source.display(),
                        limits.max_file_bytes
                    ),
                ));
            }
            *total += metadata.len();
            if *total > limits.max_total_bytes {
                return Err(Error::chart(
                    "cannot copy the chart",
                    format!("more than {} bytes", limits.max_total_bytes),
                ));
            }
            std::fs::copy(&resolved, &target).map_err(|e| Error::io("copy", &resolved, e))?;
        }
    }
    Ok(())
}

/// Packages the chart directory `dir` as `helm package` does (`capstan-helm`'s writer), every
/// entry stamped with one time so the same chart gives the same bytes.
pub async fn package_dir(dir: PathBuf) -> Result<Package> {
    tokio::task::spawn_blocking(move || package_dir_blocking(&dir))
        .await
        .map_err(Error::Task)?
}

fn package_dir_blocking(dir: &Path) -> Result<Package> {
    // One time stamp on every entry: the same chart gives the same bytes (and digest).
    let options = capstan_helm::chart::package::Options {
        source_date_epoch: Some(0),
        ..capstan_helm::chart::package::Options::default()
    };
    let package = capstan_helm::chart::package::package_with(dir, &options).map_err(|e| {
        Error::chart(
            format!(
                "cannot package chart '{}'",
                dir.file_name().unwrap_or_default().to_string_lossy()
            ),
            e,
        )
    })?;
    Ok(Package {
        file_name: package.file_name,
        bytes: package.bytes,
        name: package.name,
        version: package.version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_metadata_replaces_build_metadata() {
        assert_eq!(with_metadata("6.0.3", "1").unwrap(), "6.0.3+1");
        assert_eq!(
            with_metadata("6.0.3+old", "abc123def456.2").unwrap(),
            "6.0.3+abc123def456.2"
        );
        assert_eq!(with_metadata("1.0.0-rc.1", "3").unwrap(), "1.0.0-rc.1+3");
        assert!(with_metadata("not-a-version", "1").is_err());
        assert!(with_metadata("1.0.0", "bad_meta").is_err());
    }

    #[test]
    fn build_reasons_are_fluxs() {
        assert_eq!(
            BuildErrorReason::ChartReference.reason(),
            "InvalidChartReference"
        );
        assert!(BuildErrorReason::ValuesFilesMerge.is_persistent());
        assert!(!BuildErrorReason::ChartPull.is_build_failure());
    }
}
