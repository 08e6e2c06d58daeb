//! `helmCharts` (kustomize's HelmChartInflationGenerator), rendered natively with
//! `capstan-helm` instead of a `helm` binary.
//!
//! As kustomize v5.5 does with `--enable-helm`, for each entry of `helmCharts`:
//! - the chart is the directory `CHART_HOME/NAME` (`CHART_HOME/NAME-VERSION/NAME` when both
//!   `version` and `repo` are set), `CHART_HOME` being `helmGlobals.chartHome` (default
//!   `charts`) relative to the kustomization. It is read through the build's file system, so it
//!   must lie inside [`crate::BuildOptions::boundary`]; links in it must stay in the chart.
//!   Charts are never pulled: a missing chart is an error, naming the repository when one is
//!   set.
//! - the values are those `helm template -f VALUES_FILE -f ADDITIONAL...` sees: `valuesFile`
//!   (default: the chart's own `values.yaml`, read under the load restrictor) combined with
//!   `valuesInline` per `valuesMerge` (`override`: inline wins, `merge`: the file wins, both
//!   through kyaml's merge, which drops nulls; `replace`: the inline values alone), then every
//!   `additionalValuesFiles` entry merged over them; the chart's defaults still apply below.
//! - `helm template`'s output is parsed into resources and added as generated objects, after
//!   `configMapGenerator` and `secretGenerator`, before components and transformers.
//!
//! Without [`crate::BuildOptions::enable_helm`] a kustomization with charts fails with
//! kustomize's own `must specify --enable-helm`.

use std::path::{Path, PathBuf};

use capstan_helm::chart::{File, IgnoreRules, MAX_CHART_SIZE, MAX_FILE_SIZE};
use capstan_helm::output::{PrintOptions, Template};
use serde_json::{Map, Value};

use crate::build::{Accumulator, Builder, Target, expand_lists};
use crate::error::Error;
use crate::fs::{FileSystem, normalize};
use crate::resource::Resource;
use crate::types::{HelmChart, HelmGlobals, Kustomization};
use crate::yaml;

/// The field errors name.
const FIELD: &str = "helmCharts";
/// The generator's kind in origins and messages.
const KIND: &str = "HelmChartInflationGenerator";
/// The chart home when `helmGlobals.chartHome` is empty (kustomize's `HelmDefaultHome`).
const DEFAULT_CHART_HOME: &str = "charts";
/// How many entries a chart directory walk may visit.
const MAX_ENTRIES: usize = 100_000;
/// How deep a chart's directories may nest.
const MAX_DEPTH: usize = 128;

/// Moves the legacy `helmChartInflationGenerator` entries into `helmCharts` and
/// `helmGlobals`, as kustomize's `FixKustomization` does: the last non-empty chart home and
/// Helm home win, and become the globals only when the file sets none.
pub(crate) fn fix_legacy(k: &mut Kustomization) {
    let legacy = std::mem::take(&mut k.helm_chart_inflation_generator);
    if legacy.is_empty() {
        return;
    }
    let mut globals = HelmGlobals::default();
    for old in legacy {
        if !old.helm_home.is_empty() {
            globals.config_home.clone_from(&old.helm_home);
        }
        if !old.chart_home.is_empty() {
            globals.chart_home.clone_from(&old.chart_home);
        }
        k.helm_charts.push(HelmChart {
            name: old.chart_name,
            version: old.chart_version,
            repo: old.chart_repo_url,
            values_file: old.values,
            values_inline: old.values_local,
            values_merge: old.values_merge,
            release_name: old.release_name,
            ..HelmChart::default()
        });
    }
    if k.helm_globals.is_none()
        && (!globals.chart_home.is_empty() || !globals.config_home.is_empty())
    {
        k.helm_globals = Some(globals);
    }
}

/// Inflates every chart of `target`'s `helmCharts` into `acc`.
pub(crate) fn run(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    let k = &target.kustomization;
    let globals = k.helm_globals.clone().unwrap_or_default();
    for chart in &k.helm_charts {
        run_one(builder, target, &globals, chart, FIELD, acc)?;
    }
    Ok(())
}

/// Inflates one chart into `acc`; `field` (`helmCharts` or `generators`) is named in errors.
pub(crate) fn run_one(
    builder: &Builder<'_>,
    target: &Target,
    globals: &HelmGlobals,
    chart: &HelmChart,
    field: &str,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    if !builder.options.enable_helm {
        // kustomize refuses while configuring the generator, before reading anything.
        return Err(Error::invalid(
            &target.file,
            field,
            format!("trouble configuring builtin {KIND}: must specify --enable-helm"),
        ));
    }
    let label = if chart.name.is_empty() {
        String::from("chart")
    } else {
        format!("chart {:?}", chart.name)
    };
    let fail = |message: String| Error::invalid(&target.file, field, format!("{label}: {message}"));
    let objects = inflate(builder, target, globals, chart, &fail)?;
    for object in objects {
        let mut resource = Resource::new(object);
        if builder.track_origins() {
            resource.origin = Some(builder.configured_origin(target, KIND));
        }
        crate::generate::absorb(acc, resource)
            .map_err(|message| Error::transform(&target.file, field, message))?;
    }
    Ok(())
}

/// A builtin `HelmChartInflationGenerator` configuration listed under `generators:` (the
/// chart's fields and `chartHome`/`configHome` side by side, `metadata` ignored) read into
/// the globals and chart of `helmCharts`.
pub(crate) fn plugin_config(
    mut document: Value,
) -> Result<(HelmGlobals, HelmChart), serde_json::Error> {
    let mut globals = HelmGlobals::default();
    if let Some(map) = document.as_object_mut() {
        for key in ["apiVersion", "kind", "metadata"] {
            map.remove(key);
        }
        let mut text = |key: &str| match map.remove(key) {
            Some(Value::String(s)) => Ok(s),
            Some(Value::Null) | None => Ok(String::new()),
            Some(other) => Err(<serde_json::Error as serde::de::Error>::custom(format!(
                "{key}: expected a string, found {other}"
            ))),
        };
        globals.chart_home = text("chartHome")?;
        globals.config_home = text("configHome")?;
    }
    let chart = serde_json::from_value(document)?;
    Ok((globals, chart))
}

/// Renders one chart into its objects.
fn inflate(
    builder: &Builder<'_>,
    target: &Target,
    globals: &HelmGlobals,
    chart: &HelmChart,
    fail: &dyn Fn(String) -> Error,
) -> Result<Vec<Value>, Error> {
    if chart.name.is_empty() {
        return Err(fail("chart name cannot be empty".into()));
    }
    let combine = match chart.values_merge.as_str() {
        "" | "override" => Combine::Override,
        "merge" => Combine::Merge,
        "replace" => Combine::Replace,
        _ => {
            return Err(fail(
                "valuesMerge must be one of [merge override replace]".into(),
            ));
        }
    };
    let home = if globals.chart_home.is_empty() {
        DEFAULT_CHART_HOME
    } else {
        globals.chart_home.as_str()
    };
    let mut chart_entry = PathBuf::from(home);
    if !chart.version.is_empty() && !chart.repo.is_empty() {
        chart_entry.push(format!("{}-{}", chart.name, chart.version));
    }
    chart_entry.push(&chart.name);
    let chart_entry = chart_entry.display().to_string();
    // The chart is read whatever the load restrictor (as the helm binary would), but never
    // from outside the build's boundary.
    let chart_dir = builder.confine(target, &chart_entry, FIELD)?;
    if !builder.fs.is_dir(&chart_dir) {
        let shown = normalize(&chart_dir).display().to_string();
        if chart.repo.is_empty() {
            return Err(fail(format!(
                "no repo specified for pull, no chart found at '{shown}'"
            )));
        }
        return Err(fail(format!(
            "no chart found at '{shown}': Capstan renders only charts present under chartHome and never pulls them (repo {})",
            chart.repo
        )));
    }
    let values = chart_values(builder, target, chart, &chart_dir, combine, fail)?;

    let loaded = load_chart(builder.fs, &chart_dir).map_err(fail)?;
    let chart_arg = chart_dir.display().to_string();
    let template = Template {
        args: if chart.release_name.is_empty() {
            vec![chart_arg]
        } else {
            vec![chart.release_name.clone(), chart_arg]
        },
        namespace: Some(chart.namespace.clone()).filter(|n| !n.is_empty()),
        name_template: Some(chart.name_template.clone()).filter(|t| !t.is_empty()),
        kube_version: Some(chart.kube_version.clone()).filter(|v| !v.is_empty()),
        api_versions: chart.api_versions.clone(),
        print: PrintOptions {
            include_crds: chart.include_crds,
            skip_tests: chart.skip_tests,
            no_hooks: chart.skip_hooks,
            show_only: Vec::new(),
        },
        debug: chart.debug,
        ..Template::default()
    };
    let (release, _) = template.name_and_chart().map_err(|e| fail(e.message))?;
    let mut env = capstan_helm::template::Env::new();
    let rendered = template
        .run(&release, &loaded, &values, &mut env)
        .map_err(|e| fail(format!("helm template: {}", e.message)))?;
    let documents = yaml::parse_documents(&rendered.stdout)
        .map_err(|e| fail(format!("error reading helm output: {}", e.message)))?;
    let mut objects = Vec::with_capacity(documents.len());
    for document in documents {
        for object in expand_lists(document) {
            if !object.is_object() {
                return Err(fail(
                    "helm output holds a document that is not a mapping".into(),
                ));
            }
            objects.push(object);
        }
    }
    Ok(objects)
}

/// The values `helm template -f VALUES_FILE -f ADDITIONAL...` gets from kustomize.
fn chart_values(
    builder: &Builder<'_>,
    target: &Target,
    chart: &HelmChart,
    chart_dir: &Path,
    combine: Combine,
    fail: &dyn Fn(String) -> Error,
) -> Result<Map<String, Value>, Error> {
    let values_entry = if chart.values_file.is_empty() {
        chart_dir.join("values.yaml").display().to_string()
    } else {
        chart.values_file.clone()
    };
    let inline = chart.values_inline.clone().unwrap_or_default();
    let first = if inline.is_empty() {
        let bytes = builder.read_field_file(target, &values_entry, FIELD)?;
        read_values(&bytes, &values_entry, fail)?
    } else {
        let combined = match combine {
            Combine::Replace => Value::Object(inline),
            Combine::Override | Combine::Merge => {
                let text = builder.read_field_text(target, &values_entry, FIELD)?;
                let file = yaml::parse_documents(&text)
                    .map_err(|e| {
                        fail(format!(
                            "could not parse values file into rnode: {}",
                            e.message
                        ))
                    })?
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| Value::Object(Map::new()));
                let inline = Value::Object(inline);
                let merged = if combine == Combine::Override {
                    merge2(inline, file)
                } else {
                    merge2(file, inline)
                };
                merged.map_err(|e| fail(format!("could not merge values: {e}")))?
            }
        };
        let text = yaml::to_yaml_document(&combined);
        read_values(text.as_bytes(), "valuesInline", fail)?
    };
    let mut values = first;
    for entry in &chart.additional_values_files {
        let bytes = builder.read_field_file(target, entry, FIELD)?;
        let more = read_values(&bytes, entry, fail)?;
        capstan_helm::output::merge_maps(&mut values, more);
    }

    Ok(values)
}

/// How `valuesInline` combines with the values file (`valuesMerge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Combine {
    Override,
    Merge,
    Replace,
}

/// A values file as Helm reads one given with `-f`.
fn read_values(
    bytes: &[u8],
    name: &str,
    fail: &dyn Fn(String) -> Error,
) -> Result<Map<String, Value>, Error> {
    capstan_helm::chart::read_values(bytes)
        .map_err(|e| fail(format!("failed to parse {name}: {e}")))
}

/// kyaml's `merge2.Merge(src, dest)` without a schema: maps merge key by key, anything else in
/// `src` replaces what `dest` has (lists included), a null in `src` removes the key, and no
/// null survives in the result. Values of different kinds (a map against a list or a scalar)
/// do not merge.
fn merge2(src: Value, dest: Value) -> Result<Value, String> {
    Ok(strip_nulls(merge_into(src, dest, 0)?))
}

/// The nesting past which values are refused rather than merged (the YAML parser already
/// bounds depth; this keeps the recursion bounded on its own).
const MAX_MERGE_DEPTH: usize = 512;

fn merge_into(src: Value, dest: Value, depth: usize) -> Result<Value, String> {
    if depth > MAX_MERGE_DEPTH {
        return Err("values nest too deep".into());
    }
    match (src, dest) {
        (Value::Null, dest) => Ok(dest),
        (src, Value::Null) => Ok(src),
        (Value::Object(src), Value::Object(mut dest)) => {
            for (key, value) in src {
                if value.is_null() {
                    dest.remove(&key);
                    continue;
                }
                let merged = match dest.remove(&key) {
                    Some(old) => merge_into(value, old, depth + 1)?,
                    None => value,
                };
                dest.insert(key, merged);
            }
            Ok(Value::Object(dest))
        }
        (src, dest) if node_kind(&src) != node_kind(&dest) => Err(format!(
            "wrong node kind: expected {} but got {}",
            node_kind(&dest),
            node_kind(&src)
        )),
        (src, _) => Ok(src),
    }
}

/// The YAML node kind kyaml names in its errors.
fn node_kind(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "MappingNode",
        Value::Array(_) => "SequenceNode",
        _ => "ScalarNode",
    }
}

/// Removes null-valued keys at every level of maps (kyaml clears them when it sets fields).
fn strip_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Loads the chart directory `dir` through `fs`: a walk in Helm's order (each directory's
/// entries sorted), `.helmignore` honoured, links followed only inside the chart, sizes capped
/// as Helm caps them.
fn load_chart(fs: &dyn FileSystem, dir: &Path) -> Result<capstan_helm::chart::Chart, String> {
    let root = fs
        .canonicalize(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let ignore = dir.join(".helmignore");
    let rules = if fs.exists(&ignore) && !fs.is_dir(&ignore) {
        let bytes = fs.read(&ignore).map_err(|e| format!(".helmignore: {e}"))?;
        IgnoreRules::parse(&String::from_utf8_lossy(&bytes))?
    } else {
        IgnoreRules::parse("")?
    };
    let mut walk = Walk {
        fs,
        root,
        rules,
        files: Vec::new(),
        entries: 0,
        total: 0,
    };
    walk.dir(dir, "", 0)?;
    capstan_helm::chart::load_dir_files(walk.files).map_err(|e| e.message)
}

struct Walk<'a> {
    fs: &'a dyn FileSystem,
    root: PathBuf,
    rules: IgnoreRules,
    files: Vec<File>,
    entries: usize,
    total: u64,
}

impl Walk<'_> {
    fn dir(&mut self, dir: &Path, prefix: &str, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("{prefix}: the chart's directories nest too deep"));
        }
        let mut names = self
            .fs
            .read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        // Go's filepath.Walk visits entries in lexical order.
        names.sort();
        for name in names {
            self.entries += 1;
            if self.entries > MAX_ENTRIES {
                return Err(format!("more than {MAX_ENTRIES} files in the chart"));
            }
            let rel = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let path = dir.join(&name);
            let real = self
                .fs
                .canonicalize(&path)
                .map_err(|e| format!("{rel}: {e}"))?;
            if !real.starts_with(&self.root) {
                return Err(format!(
                    "{rel}: the link points outside the chart directory"
                ));
            }
            if self.fs.is_dir(&path) {
                if !self.rules.ignored(&rel, true) {
                    self.dir(&path, &rel, depth + 1)?;
                }
                continue;
            }
            if self.rules.ignored(&rel, false) {
                continue;
            }
            let data = self.fs.read(&path).map_err(|e| format!("{rel}: {e}"))?;
            let size = data.len() as u64;
            if size > MAX_FILE_SIZE {
                return Err(format!(
                    "chart file {rel:?} is larger than the maximum file size {MAX_FILE_SIZE}"
                ));
            }
            self.total = self.total.saturating_add(size);
            if self.total > MAX_CHART_SIZE {
                return Err(format!(
                    "the chart is larger than the maximum size {MAX_CHART_SIZE}"
                ));
            }
            self.files.push(File { name: rel, data });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
