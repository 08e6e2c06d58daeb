//! The kustomization file, as kustomize's `types.Kustomization` reads it.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// A kustomization (or component) file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Kustomization {
    /// `kustomize.config.k8s.io/v1beta1` (or `v1alpha1` for components).
    #[serde(default)]
    pub api_version: String,
    /// `Kustomization` or `Component`.
    #[serde(default)]
    pub kind: String,
    /// Ignored metadata.
    #[serde(default)]
    pub metadata: Option<Value>,
    /// OpenAPI schema source (`path`).
    #[serde(default)]
    pub openapi: BTreeMap<String, String>,
    /// Prefix added to names.
    #[serde(default)]
    pub name_prefix: String,
    /// Suffix added to names.
    #[serde(default)]
    pub name_suffix: String,
    /// Namespace set on every namespaced object.
    #[serde(default)]
    pub namespace: String,
    /// Labels added to metadata and selectors.
    #[serde(default)]
    pub common_labels: BTreeMap<String, String>,
    /// Labels with their own selector/template switches.
    #[serde(default)]
    pub labels: Vec<Label>,
    /// Annotations added to metadata (and pod templates).
    #[serde(default)]
    pub common_annotations: BTreeMap<String, String>,
    /// Legacy strategic-merge patch files or inline patches.
    #[serde(default)]
    pub patches_strategic_merge: Vec<String>,
    /// Legacy JSON 6902 patches.
    #[serde(default)]
    pub patches_json6902: Vec<Patch>,
    /// Patches (strategic merge or JSON 6902), optionally with a target selector.
    #[serde(default)]
    pub patches: Vec<Patch>,
    /// Image rewrites.
    #[serde(default)]
    pub images: Vec<Image>,
    /// Deprecated spelling of `images`.
    #[serde(default)]
    pub image_tags: Vec<Image>,
    /// Replacements, inline or from files.
    #[serde(default)]
    pub replacements: Vec<ReplacementField>,
    /// Replica counts.
    #[serde(default)]
    pub replicas: Vec<Replica>,
    /// Legacy variables.
    #[serde(default)]
    pub vars: Vec<Var>,
    /// Output order.
    #[serde(default)]
    pub sort_options: Option<SortOptions>,
    /// Resource files, directories and kustomizations.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Components (kind `Component`).
    #[serde(default)]
    pub components: Vec<String>,
    /// CRD files whose schemas add name-reference and patch metadata.
    #[serde(default)]
    pub crds: Vec<String>,
    /// Deprecated spelling of `resources` for directories.
    #[serde(default)]
    pub bases: Vec<String>,
    /// ConfigMap generators.
    #[serde(default)]
    pub config_map_generator: Vec<GeneratorArgs>,
    /// Secret generators.
    #[serde(default)]
    pub secret_generator: Vec<GeneratorArgs>,
    /// Settings shared by every chart of `helmCharts` (rendered only with
    /// [`crate::BuildOptions::enable_helm`]).
    #[serde(default)]
    pub helm_globals: Option<HelmGlobals>,
    /// Helm charts inflated into resources (only with [`crate::BuildOptions::enable_helm`]).
    #[serde(default)]
    pub helm_charts: Vec<HelmChart>,
    /// Legacy spelling of `helmCharts`; parsing moves its entries into `helm_charts` and
    /// `helm_globals`, as kustomize does.
    #[serde(default)]
    pub helm_chart_inflation_generator: Vec<HelmChartArgs>,
    /// Options applied to every generator.
    #[serde(default)]
    pub generator_options: Option<GeneratorOptions>,
    /// Transformer configuration files.
    #[serde(default)]
    pub configurations: Vec<String>,
    /// Generator plugin configurations (builtin only).
    #[serde(default)]
    pub generators: Vec<String>,
    /// Transformer plugin configurations (builtin only).
    #[serde(default)]
    pub transformers: Vec<String>,
    /// Validator plugins (not supported).
    #[serde(default)]
    pub validators: Vec<String>,
    /// Build metadata switches.
    #[serde(default)]
    pub build_metadata: Vec<String>,
}

/// An entry of `labels`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Label {
    /// The labels.
    #[serde(default)]
    pub pairs: BTreeMap<String, String>,
    /// Also set selectors.
    #[serde(default)]
    pub include_selectors: bool,
    /// Also set pod template labels.
    #[serde(default)]
    pub include_templates: bool,
    /// Extra field specs.
    #[serde(default)]
    pub fields: Vec<FieldSpec>,
}

/// A field path in objects of some kind.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct FieldSpec {
    /// Group (empty: any).
    #[serde(default)]
    pub group: String,
    /// Version (empty: any).
    #[serde(default)]
    pub version: String,
    /// Kind (empty: any).
    #[serde(default)]
    pub kind: String,
    /// Slash-separated path.
    #[serde(default)]
    pub path: String,
    /// Create missing fields.
    #[serde(default)]
    pub create: bool,
}

/// A patch entry.
#[allow(clippy::struct_field_names)] // field names mirror kustomize's `patches` keys
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Patch {
    /// File holding the patch.
    #[serde(default)]
    pub path: String,
    /// Inline patch.
    #[serde(default)]
    pub patch: String,
    /// Which objects to patch.
    #[serde(default)]
    pub target: Option<Selector>,
    /// Options (`allowNameChange`, `allowKindChange`).
    #[serde(default)]
    pub options: BTreeMap<String, bool>,
}

/// Selects objects by id fields (regular expressions) and label/annotation selectors.
#[allow(clippy::struct_field_names)] // field names mirror kustomize's `target` keys
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Selector {
    /// Group regex.
    #[serde(default)]
    pub group: String,
    /// Version regex.
    #[serde(default)]
    pub version: String,
    /// Kind regex.
    #[serde(default)]
    pub kind: String,
    /// Name regex.
    #[serde(default)]
    pub name: String,
    /// Namespace regex.
    #[serde(default)]
    pub namespace: String,
    /// Label selector.
    #[serde(default)]
    pub label_selector: String,
    /// Annotation selector.
    #[serde(default)]
    pub annotation_selector: String,
}

/// An image rewrite.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Image {
    /// Image name to match.
    #[serde(default)]
    pub name: String,
    /// Replacement name.
    #[serde(default)]
    pub new_name: String,
    /// Replacement tag.
    #[serde(default)]
    pub new_tag: String,
    /// Replacement digest.
    #[serde(default)]
    pub digest: String,
    /// Suffix appended to the tag.
    #[serde(default)]
    pub tag_suffix: String,
}

/// A replica count.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Replica {
    /// Object name.
    #[serde(default)]
    pub name: String,
    /// Count.
    #[serde(default)]
    pub count: i64,
}

/// A legacy variable.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Var {
    /// Variable name, used as `$(NAME)`.
    pub name: String,
    /// The object holding the value.
    pub objref: ObjectRef,
    /// The field holding the value (default `metadata.name`).
    #[serde(default)]
    pub fieldref: Option<FieldRef>,
}

/// A reference to an object.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `group/version`.
    #[serde(default)]
    pub api_version: String,
    /// Group.
    #[serde(default)]
    pub group: String,
    /// Version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
}

/// A field of the referenced object.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldRef {
    /// Dotted field path.
    #[serde(default, alias = "fieldpath")]
    pub field_path: String,
}

/// `sortOptions`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SortOptions {
    /// `legacy` or `fifo`.
    #[serde(default)]
    pub order: String,
    /// Kind orders for `legacy`.
    #[serde(default)]
    pub legacy_sort_options: Option<LegacySortOptions>,
}

/// Kind orders of the legacy sort.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LegacySortOptions {
    /// Kinds first.
    #[serde(default)]
    pub order_first: Vec<String>,
    /// Kinds last.
    #[serde(default)]
    pub order_last: Vec<String>,
}

/// A ConfigMap or Secret generator.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GeneratorArgs {
    /// Name of the generated object.
    #[serde(default)]
    pub name: String,
    /// Namespace of the generated object.
    #[serde(default)]
    pub namespace: String,
    /// `create` (default), `merge` or `replace`.
    #[serde(default)]
    pub behavior: String,
    /// `KEY=VALUE` literals.
    #[serde(default)]
    pub literals: Vec<String>,
    /// Files (`[key=]path`).
    #[serde(default)]
    pub files: Vec<String>,
    /// Env files.
    #[serde(default)]
    pub envs: Vec<String>,
    /// Deprecated single env file.
    #[serde(default)]
    pub env: String,
    /// Per-generator options.
    #[serde(default)]
    pub options: Option<GeneratorOptions>,
    /// Secret type (secrets only).
    #[serde(default, rename = "type")]
    pub kind: String,
}

/// `generatorOptions`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GeneratorOptions {
    /// Labels on generated objects.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations on generated objects.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// No hash suffix.
    #[serde(default)]
    pub disable_name_suffix_hash: bool,
    /// Mark immutable.
    #[serde(default)]
    pub immutable: bool,
}

/// An entry of `replacements`: a file path or an inline replacement.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum ReplacementField {
    /// A file with one or more replacements.
    Path {
        /// The file.
        path: String,
    },
    /// An inline replacement.
    Inline(Value),
}

/// `helmGlobals`: settings shared by the charts of a kustomization.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HelmGlobals {
    /// The directory holding one subdirectory per chart, relative to the kustomization
    /// (default `charts`).
    #[serde(default)]
    pub chart_home: String,
    /// Helm's configuration directory; unused, as no Helm binary runs.
    #[serde(default)]
    pub config_home: String,
}

/// An entry of `helmCharts` (kustomize's `HelmChart`): one chart inflated with `helm
/// template`'s options.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HelmChart {
    /// The chart's name: its directory under the chart home.
    #[serde(default)]
    pub name: String,
    /// The chart's version; with `repo`, the chart is looked for under `NAME-VERSION/`.
    #[serde(default)]
    pub version: String,
    /// The repository kustomize would pull from; Capstan never pulls.
    #[serde(default)]
    pub repo: String,
    /// The release name (`helm template NAME`); Helm's `release-name` when empty.
    #[serde(default)]
    pub release_name: String,
    /// `.Release.Namespace` (`--namespace`).
    #[serde(default)]
    pub namespace: String,
    /// Values files applied after `valuesFile`, relative to the kustomization.
    #[serde(default)]
    pub additional_values_files: Vec<String>,
    /// A values file used instead of the chart's `values.yaml`, relative to the kustomization.
    #[serde(default)]
    pub values_file: String,
    /// Values given inline.
    #[serde(default)]
    pub values_inline: Option<serde_json::Map<String, Value>>,
    /// How `valuesInline` combines with the values file: `override` (default), `merge` or
    /// `replace`.
    #[serde(default)]
    pub values_merge: String,
    /// `--include-crds`.
    #[serde(default, rename = "includeCRDs")]
    pub include_crds: bool,
    /// `--no-hooks`.
    #[serde(default)]
    pub skip_hooks: bool,
    /// `--api-versions`.
    #[serde(default)]
    pub api_versions: Vec<String>,
    /// `--kube-version`.
    #[serde(default)]
    pub kube_version: String,
    /// `--name-template`.
    #[serde(default)]
    pub name_template: String,
    /// `--skip-tests`.
    #[serde(default)]
    pub skip_tests: bool,
    /// `--debug`: a failed render's message keeps no hint.
    #[serde(default)]
    pub debug: bool,
    /// Allow development versions when pulling; unused, as Capstan never pulls.
    #[serde(default)]
    pub devel: bool,
}

/// An entry of the legacy `helmChartInflationGenerator` field (kustomize's `HelmChartArgs`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HelmChartArgs {
    /// The chart's name.
    #[serde(default)]
    pub chart_name: String,
    /// The chart's version.
    #[serde(default)]
    pub chart_version: String,
    /// The chart's repository.
    #[serde(default)]
    pub chart_repo_url: String,
    /// The chart home (the last non-empty one becomes `helmGlobals.chartHome`).
    #[serde(default)]
    pub chart_home: String,
    /// Unused (as in kustomize).
    #[serde(default)]
    pub chart_repo_name: String,
    /// Unused: no Helm binary runs.
    #[serde(default)]
    pub helm_bin: String,
    /// Becomes `helmGlobals.configHome`.
    #[serde(default)]
    pub helm_home: String,
    /// The values file.
    #[serde(default)]
    pub values: String,
    /// Inline values.
    #[serde(default)]
    pub values_local: Option<serde_json::Map<String, Value>>,
    /// How inline values combine with the values file.
    #[serde(default)]
    pub values_merge: String,
    /// The release name.
    #[serde(default)]
    pub release_name: String,
    /// Unused (as in kustomize).
    #[serde(default)]
    pub release_namespace: String,
    /// Unused (as in kustomize).
    #[serde(default)]
    pub extra_args: Vec<String>,
}
