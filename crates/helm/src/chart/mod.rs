//! Charts: loading directories and archives, `Chart.yaml`, dependencies, values and schemas.
//!
//! Expected flow: [`load`] (or [`load_archive`]) a chart, then [`prepare`] it with the user's
//! values (`-f` files merged with [`merge_maps`], `--set` flags read by [`crate::strvals`]): the
//! result is the chart with its dependencies resolved and the values templates see.
//!
//! Guarantees: archives never write or read outside the chart (no `..`, absolute paths or
//! links), content is capped ([`MAX_CHART_SIZE`], [`MAX_FILE_SIZE`]), and nothing panics on any
//! input.
//!
//! Errors name the file (`cannot load Chart.yaml: …`) or the chart whose schema failed, in
//! Helm's words.
//!
//! ```no_run
//! use capstan_helm::{chart, strvals};
//!
//! let loaded = chart::load("charts/podinfo")?;
//! let mut values = chart::read_values(&std::fs::read("values-prod.yaml")?)?;
//! strvals::parse_into("replicaCount=2,image.tag=6.5.0", &mut values)?;
//! let (processed, values) = chart::prepare(&loaded, &values)?;
//! println!("{} renders with {} top-level values", processed.name(), values.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod dependencies;
mod ignore;
mod load;
mod metadata;
pub mod package;
mod schema;
mod values;

pub use ignore::Rules as IgnoreRules;
pub(crate) use ignore::glob_match;
pub use load::{MAX_CHART_SIZE, MAX_FILE_SIZE, load, load_archive, load_dir_files};
pub use values::{
    GLOBAL_KEY, Values, coalesce_tables, coalesce_values, merge_maps, merge_values, read_values,
};

/// Leaks the thread's chart caches (see [`crate::leak_thread_caches`]).
pub(crate) fn leak_caches() {
    load::leak_caches();
    schema::leak_cache();
}

/// A chart that failed to load or whose values failed their schema, in Helm's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// The message as Helm prints it.
    pub message: String,
}

impl Error {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
        }
    }
}

/// Gets a chart ready to render with the user's values (Helm's install action up to the
/// render): dependencies processed (aliases, tags, conditions, import-values; disabled
/// subcharts removed), the user's values coalesced over every chart's defaults, and the result
/// checked against each chart's `values.schema.json`. Returns the processed chart and the
/// values `.Values` holds at the top.
pub fn prepare(chart: &Chart, user_values: &Values) -> Result<(Chart, Values), Error> {
    prepare_owned(chart.clone(), user_values)
}

/// [`prepare`] of a chart the caller gives up (no copy of its files is made).
pub fn prepare_owned(mut chart: Chart, user_values: &Values) -> Result<(Chart, Values), Error> {
    dependencies::process(&mut chart, user_values).map_err(Error::new)?;
    let values = coalesce_values(&chart, user_values).map_err(Error::new)?;
    if let Some(message) = schema::validate_chart(&chart, &values, 0) {
        return Err(Error::new(format!(
            "values don't meet the specifications of the schema(s) in the following chart(s):\n{message}"
        )));
    }
    Ok((chart, values))
}

/// Helm's `CheckDependencies`, which `helm template` runs before rendering: every dependency
/// in Chart.yaml must have its chart under `charts/` (matched by chart name, before aliases).
pub fn check_dependencies(chart: &Chart) -> Result<(), Error> {
    let missing: Vec<&str> = chart
        .metadata
        .dependencies
        .iter()
        .filter(|dep| {
            !chart
                .dependencies
                .iter()
                .any(|c| c.metadata.name == dep.name)
        })
        .map(|dep| dep.name.as_str())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::new(format!(
        "found in Chart.yaml, but missing in charts/ directory: {}",
        missing.join(", ")
    )))
}

/// Whether `version` satisfies the Masterminds constraint `constraint` (`>=1.20.0-0`,
/// `^1.2 || ~2.0`); `None` when either does not parse. Helm checks `kubeVersion` and
/// dependency versions this way.
pub fn version_matches(constraint: &str, version: &str) -> Option<bool> {
    let version = capstan_semver::parse_version(version)?;
    let constraint = capstan_semver::Constraint::parse(constraint).ok()?;
    Some(constraint.matches(&version))
}

impl Chart {
    /// The chart's name (after dependency processing, its alias in the parent).
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// Whether this is a library chart (`type: library`), whose templates are never rendered.
    pub fn is_library(&self) -> bool {
        self.metadata.chart_type == "library"
    }
}

/// A file of a chart: its path relative to the chart root (`templates/x.yaml`) and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Path relative to the chart root, `/`-separated.
    pub name: String,
    /// Contents.
    pub data: Vec<u8>,
}

/// A loaded chart (Helm's `chart.Chart`): metadata, templates, other files, default values and
/// the subcharts found under `charts/`.
#[derive(Debug, Clone, Default)]
pub struct Chart {
    /// `Chart.yaml` (with `requirements.yaml`'s dependencies for apiVersion v1 charts).
    pub metadata: Metadata,
    /// `templates/**`, paths relative to the chart root (`templates/_helpers.tpl`).
    pub templates: Vec<File>,
    /// What `.Files` sees: every other file that is not Chart.yaml, values, schema,
    /// requirements/lock files, `templates/**` or `charts/**` (so `crds/**` is here).
    pub files: Vec<File>,
    /// `values.yaml`, as Helm reads it (numbers are `float64`).
    pub values: serde_json::Map<String, serde_json::Value>,
    /// `values.schema.json`, unparsed.
    pub schema: Option<Vec<u8>>,
    /// Subcharts from `charts/` (directories and `.tgz` archives), in Helm's load order.
    pub dependencies: Vec<Chart>,
}

/// `Chart.yaml` (Helm's `chart.Metadata`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    /// `apiVersion`: `v1` or `v2`.
    pub api_version: String,
    /// `name`.
    pub name: String,
    /// `version` (SemVer 2).
    pub version: String,
    /// `appVersion`.
    pub app_version: String,
    /// `kubeVersion`: a constraint on the cluster version.
    pub kube_version: String,
    /// `type`: `application` (empty means application) or `library`.
    pub chart_type: String,
    /// `dependencies` (or `requirements.yaml`'s for v1 charts).
    pub dependencies: Vec<Dependency>,
    /// Every other field of Chart.yaml as written (description, home, keywords, maintainers,
    /// annotations, …), for `.Chart` in templates.
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// One entry of `dependencies` (Helm's `chart.Dependency`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dependency {
    /// `name`: the subchart's chart name.
    pub name: String,
    /// `version` constraint.
    pub version: String,
    /// `repository`.
    pub repository: String,
    /// `condition`: comma-separated values paths; the first that resolves to a bool decides.
    pub condition: String,
    /// `tags`.
    pub tags: Vec<String>,
    /// `enabled`, set while processing dependencies.
    pub enabled: bool,
    /// `import-values`: strings (`child.path`) or `{child, parent}` maps.
    pub import_values: Vec<serde_json::Value>,
    /// `alias`: the name the subchart takes in this parent.
    pub alias: String,
}

#[cfg(test)]
mod tests;
