//! Charts: loading directories and archives, `Chart.yaml`, dependencies, values and schemas.

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
