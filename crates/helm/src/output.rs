//! `helm template`'s output: manifests split, sorted in install order, hooks after them.
//!
//! The engine ([`crate::engine::render`]) answers with one text per template path, as Helm's
//! `engine.Render` does. `helm template` then
//! - drops `NOTES.txt` (never printed by `helm template`) and partials (`_*`),
//! - splits every template into YAML documents with Helm's `SplitManifests` regex,
//! - reads each document's head (`apiVersion`, `kind`, `metadata.name`, annotations) and puts
//!   documents carrying a known `helm.sh/hook` annotation aside as [`Hook`]s,
//! - sorts the rest by kind in [`INSTALL_ORDER`] (stable, unknown kinds last in name order),
//! - prints `---\n# Source: PATH\n` before each document, CRDs from `crds/` first with
//!   `--include-crds`, the hooks after the manifests, and finally filters by `--show-only`.
//!
//! [`sort_manifests`] and [`Hook`] are what a release controller needs to run hooks; [`print`]
//! is the stdout of `helm template`; [`Template`] is the whole command as a library call.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::LazyLock;

use regex::Regex;

use crate::chart::Chart;
use crate::engine;
use crate::template::Env;

/// A failed `helm template`, as Helm reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// The message Helm prints after `Error: `.
    pub message: String,
    /// What Helm prints on stdout before failing (the raw templates, with `--debug`).
    pub output: String,
}

impl Error {
    fn new(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
            output: String::new(),
        }
    }
}

/// Kinds in the order Helm installs them (Helm v4's `releaseutil.InstallOrder`); other kinds
/// come after these, in byte order of the kind name.
pub const INSTALL_ORDER: &[&str] = &[
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// The annotation naming a document's hook events.
pub const HOOK_ANNOTATION: &str = "helm.sh/hook";
/// The annotation giving a hook's weight (an integer; anything else counts as 0).
pub const HOOK_WEIGHT_ANNOTATION: &str = "helm.sh/hook-weight";
/// The annotation listing a hook's delete policies.
pub const HOOK_DELETE_ANNOTATION: &str = "helm.sh/hook-delete-policy";
/// The annotation listing when a hook's (Pod or Job) logs are printed.
pub const HOOK_OUTPUT_LOG_ANNOTATION: &str = "helm.sh/hook-output-log-policy";

/// When a hook runs (Helm's `release.HookEvent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookEvent {
    /// `pre-install`.
    PreInstall,
    /// `post-install`.
    PostInstall,
    /// `pre-delete`.
    PreDelete,
    /// `post-delete`.
    PostDelete,
    /// `pre-upgrade`.
    PreUpgrade,
    /// `post-upgrade`.
    PostUpgrade,
    /// `pre-rollback`.
    PreRollback,
    /// `post-rollback`.
    PostRollback,
    /// `test` (also written `test-success`, Helm 2's name).
    Test,
}

impl HookEvent {
    /// Reads an event as Helm does: trimmed, case-insensitive; `None` for an unknown one.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text.trim().to_lowercase().as_str() {
            "pre-install" => HookEvent::PreInstall,
            "post-install" => HookEvent::PostInstall,
            "pre-delete" => HookEvent::PreDelete,
            "post-delete" => HookEvent::PostDelete,
            "pre-upgrade" => HookEvent::PreUpgrade,
            "post-upgrade" => HookEvent::PostUpgrade,
            "pre-rollback" => HookEvent::PreRollback,
            "post-rollback" => HookEvent::PostRollback,
            "test" | "test-success" => HookEvent::Test,
            _ => return None,
        })
    }

    /// The name as Helm writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreInstall => "pre-install",
            HookEvent::PostInstall => "post-install",
            HookEvent::PreDelete => "pre-delete",
            HookEvent::PostDelete => "post-delete",
            HookEvent::PreUpgrade => "pre-upgrade",
            HookEvent::PostUpgrade => "post-upgrade",
            HookEvent::PreRollback => "pre-rollback",
            HookEvent::PostRollback => "post-rollback",
            HookEvent::Test => "test",
        }
    }
}

impl std::fmt::Display for HookEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The part of a document Helm reads to sort it (Helm's `releaseutil.SimpleHead`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Head {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// Whether the document has a `metadata` map at all.
    pub has_metadata: bool,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
}

/// One non-hook document of a template (Helm's `releaseutil.Manifest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The template path it came from (`chart/templates/x.yaml`).
    pub name: String,
    /// The document text (leading whitespace removed, trailing kept, as Helm keeps it).
    pub content: String,
    /// Its head.
    pub head: Head,
}

/// A hook document (Helm's `release.Hook`): what a release controller runs around an install,
/// upgrade, rollback, delete or test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// `metadata.name`.
    pub name: String,
    /// `kind`.
    pub kind: String,
    /// The template path it came from.
    pub path: String,
    /// The document text.
    pub manifest: String,
    /// The events it runs on, in annotation order.
    pub events: Vec<HookEvent>,
    /// `helm.sh/hook-weight` (0 when absent or not an integer).
    pub weight: i64,
    /// `helm.sh/hook-delete-policy` entries, trimmed and lower-cased
    /// (`before-hook-creation`, `hook-succeeded`, `hook-failed`).
    pub delete_policies: Vec<String>,
    /// `helm.sh/hook-output-log-policy` entries, trimmed and lower-cased.
    pub output_log_policies: Vec<String>,
}

impl Hook {
    /// Whether this is a test hook (`helm template --skip-tests` leaves these out).
    pub fn is_test(&self) -> bool {
        self.events.contains(&HookEvent::Test)
    }
}

// Helm's `(?:^|\s*\n)---\s*`, with Go's ASCII-only `\s` (Rust's `\s` is Unicode).
static SEPARATOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[\t\n\x0C\r ]*\n)---[\t\n\x0C\r ]*").expect("the separator regex is valid")
});

/// Splits a template's text into documents as Helm's `releaseutil.SplitManifests` does:
/// on `---` at the start or after a newline (eating the whitespace around it, so `---# x` and
/// `---apiVersion: v1` split too), dropping whitespace-only documents, trimming each
/// document's leading whitespace and keeping its trailing whitespace.
pub fn split_manifests(text: &str) -> Vec<&str> {
    let text = text.trim_start();
    SEPARATOR
        .split(text)
        .filter(|doc| !doc.trim().is_empty())
        .map(str::trim_start)
        .collect()
}

/// Splits, classifies and sorts the engine's output as Helm's `releaseutil.SortManifests` with
/// `InstallOrder`: templates in byte order of their path (partials and whitespace-only texts
/// skipped; pass the map without `NOTES.txt`), documents in file order, hooks (documents with a
/// known `helm.sh/hook` annotation; those with an unknown event are dropped) apart from the
/// rest, both stably sorted by kind.
pub fn sort_manifests(
    files: &BTreeMap<String, String>,
) -> Result<(Vec<Hook>, Vec<Manifest>), Error> {
    let (hooks, manifests, error) = sort_partial(files);
    match error {
        Some(e) => Err(e),
        None => Ok((hooks, manifests)),
    }
}

/// [`sort_manifests`] that keeps what it had when a document fails to parse: Helm returns the
/// hooks found before the bad document (unsorted), and `helm template --debug` prints them.
fn sort_partial(files: &BTreeMap<String, String>) -> (Vec<Hook>, Vec<Manifest>, Option<Error>) {
    let mut hooks = Vec::new();
    let mut generic = Vec::new();
    let docs: Vec<(&String, &str)> = files
        .iter()
        .filter(|(path, content)| {
            let base = path.rsplit('/').next().unwrap_or(path);
            !base.starts_with('_') && !content.trim().is_empty()
        })
        .flat_map(|(path, content)| split_manifests(content).into_iter().map(move |d| (path, d)))
        .collect();
    let heads = read_heads(&docs);
    for ((path, doc), head) in docs.into_iter().zip(heads) {
        let head = match head {
            Ok(head) => head,
            Err(e) => {
                let error = Error::new(format!("YAML parse error on {path}: {e}"));
                return (hooks, generic, Some(error));
            }
        };
        let Some(hook_types) = head.annotations.get(HOOK_ANNOTATION) else {
            generic.push(Manifest {
                name: path.clone(),
                content: doc.to_owned(),
                head,
            });
            continue;
        };
        let Some(events) = hook_types
            .split(',')
            .map(HookEvent::parse)
            .collect::<Option<Vec<_>>>()
        else {
            // Helm logs "skipping unknown hooks" and leaves the document out entirely.
            continue;
        };
        let policies = |annotation: &str| -> Vec<String> {
            head.annotations
                .get(annotation)
                .map(|v| v.split(',').map(|p| p.trim().to_lowercase()).collect())
                .unwrap_or_default()
        };
        hooks.push(Hook {
            name: head.name.clone(),
            kind: head.kind.clone(),
            path: path.clone(),
            manifest: doc.to_owned(),
            events,
            weight: head
                .annotations
                .get(HOOK_WEIGHT_ANNOTATION)
                .and_then(|w| go_atoi(w))
                .unwrap_or(0),
            delete_policies: policies(HOOK_DELETE_ANNOTATION),
            output_log_policies: policies(HOOK_OUTPUT_LOG_ANNOTATION),
        });
    }
    hooks.sort_by(|a, b| kind_order(&a.kind, &b.kind));
    generic.sort_by(|a, b| kind_order(&a.head.kind, &b.head.kind));
    (hooks, generic, None)
}

/// Rendered text (bytes) above which the documents' heads are read on two threads: below it a
/// thread's start costs more than it saves.
const PARALLEL_HEADS_BYTES: usize = 128 * 1024;

/// The reading thread's stack: the main thread's usual 8 MiB, so a deeply nested document
/// fails (or not) alike on either thread.
const HEAD_THREAD_STACK: usize = 8 * 1024 * 1024;

/// [`read_head`] of every document, in order. Large outputs are cut into two runs of documents
/// of sizes as near as documents allow, the second read on a scoped thread; every result is kept, so the caller
/// still meets the first error in document order.
fn read_heads(docs: &[(&String, &str)]) -> Vec<Result<Head, String>> {
    let total: usize = docs.iter().map(|(_, d)| d.len()).sum();
    if total < PARALLEL_HEADS_BYTES || docs.len() < 2 {
        return docs.iter().map(|(_, d)| read_head(d)).collect();
    }
    // The cut that leaves the larger run smallest: one huge document (a CRD) can outweigh all
    // the others, and then it is best read alone.
    let mut seen = 0;
    let mut cut = 1;
    let mut best = usize::MAX;
    for (i, (_, d)) in docs.iter().enumerate().take(docs.len() - 1) {
        seen += d.len();
        let larger = seen.max(total - seen);
        if larger < best {
            best = larger;
            cut = i + 1;
        }
    }
    let (first, second) = docs.split_at(cut);
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .stack_size(HEAD_THREAD_STACK)
            .spawn_scoped(scope, || {
                second.iter().map(|(_, d)| read_head(d)).collect::<Vec<_>>()
            });
        let mut heads: Vec<Result<Head, String>> =
            first.iter().map(|(_, d)| read_head(d)).collect();
        // No thread to be had: the second run is read here too.
        let rest = worker
            .ok()
            .and_then(|handle| handle.join().ok())
            .unwrap_or_else(|| second.iter().map(|(_, d)| read_head(d)).collect());
        heads.extend(rest);
        heads
    })
}

/// Helm's `lessByKind` as an ordering (the sorts are stable, so equal kinds keep file order).
fn kind_order(a: &str, b: &str) -> std::cmp::Ordering {
    let rank = |k: &str| INSTALL_ORDER.iter().position(|x| *x == k);
    match (rank(a), rank(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// Go's `strconv.Atoi` (optional sign, decimal digits, within `int64`).
fn go_atoi(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Reads a document's head the way `sigs.k8s.io/yaml.Unmarshal` into `SimpleHead` does: the
/// YAML becomes JSON, then Go's `encoding/json` fills the struct (field names matched without
/// regard to case; a wrong type is an error, `null` leaves the zero value).
fn read_head(doc: &str) -> Result<Head, String> {
    let value = crate::yaml::parse_head(doc).map_err(|e| e.message)?;
    let mut head = Head::default();
    let top = match &value {
        serde_json::Value::Null => return Ok(head),
        serde_json::Value::Object(map) => map,
        other => {
            return Err(format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type util.SimpleHead",
                json_kind(other)
            ));
        }
    };
    let field = |map: &'_ serde_json::Map<String, serde_json::Value>, name: &str| {
        map.get(name).cloned().or_else(|| {
            map.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        })
    };
    let string = |value: Option<serde_json::Value>, path: &str| match value {
        None | Some(serde_json::Value::Null) => Ok(String::new()),
        Some(serde_json::Value::String(s)) => Ok(s),
        Some(other) => Err(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go struct field SimpleHead.{path} of type string",
            json_kind(&other)
        )),
    };
    head.api_version = string(field(top, "apiVersion"), "apiVersion")?;
    head.kind = string(field(top, "kind"), "kind")?;
    match field(top, "metadata") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(meta)) => {
            head.has_metadata = true;
            head.name = string(field(&meta, "name"), "metadata.name")?;
            match field(&meta, "annotations") {
                None | Some(serde_json::Value::Null) => {}
                Some(serde_json::Value::Object(annotations)) => {
                    for (k, v) in annotations {
                        let v = string(Some(v), "metadata.annotations")?;
                        head.annotations.insert(k, v);
                    }
                }
                Some(other) => {
                    return Err(format!(
                        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go struct field .metadata.annotations of type map[string]string",
                        json_kind(&other)
                    ));
                }
            }
        }
        Some(other) => {
            return Err(format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go struct field SimpleHead.metadata of type struct {{ Name string \"json:\\\"name\\\"\"; Annotations map[string]string \"json:\\\"annotations\\\"\" }}",
                json_kind(&other)
            ));
        }
    }
    Ok(head)
}

/// The JSON kind as Go's `UnmarshalTypeError` names it.
fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// A file of a chart's `crds/` directory, as `--include-crds` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crd {
    /// The path printed in `# Source:` (`chart/crds/x.yaml`, `chart/charts/sub/crds/y.yaml`).
    pub filename: String,
    /// The file's text, unrendered.
    pub data: String,
}

/// The CRDs of `chart` and its subcharts (Helm's `Chart.CRDObjects`): files under `crds/` with
/// a `.yaml`, `.yml` or `.json` extension (any case), the chart's own first, then each
/// subchart's, depth first. Pass the chart after dependency processing, so disabled subcharts
/// are not there and aliased ones carry their alias.
pub fn crd_objects(chart: &Chart) -> Vec<Crd> {
    let mut out = Vec::new();
    collect_crds(chart, &chart.metadata.name, &mut out);
    out
}

fn collect_crds(chart: &Chart, full_path: &str, out: &mut Vec<Crd>) {
    for file in &chart.files {
        let ext = file
            .name
            .rsplit('/')
            .next()
            .and_then(|base| base.rfind('.').map(|i| &base[i..]))
            .unwrap_or("");
        let manifest = [".yaml", ".yml", ".json"]
            .iter()
            .any(|e| e.eq_ignore_ascii_case(ext));
        if file.name.starts_with("crds/") && manifest {
            out.push(Crd {
                filename: format!("{full_path}/{}", file.name),
                data: String::from_utf8_lossy(&file.data).into_owned(),
            });
        }
    }
    for dep in &chart.dependencies {
        collect_crds(
            dep,
            &format!("{full_path}/charts/{}", dep.metadata.name),
            out,
        );
    }
}

/// The printing flags of `helm template`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrintOptions {
    /// `--include-crds`: print the `crds/` files first.
    pub include_crds: bool,
    /// `--skip-tests`: leave test hooks out.
    pub skip_tests: bool,
    /// `--no-hooks`: leave every hook out.
    pub no_hooks: bool,
    /// `--show-only`: only documents whose template path (without the top chart's name)
    /// matches one of these globs (Go's `filepath.Match`), pattern by pattern.
    pub show_only: Vec<String>,
}

/// `helm template`'s stdout for the engine's output `files` (without `NOTES.txt`; see
/// [`without_notes`]) and the chart's `crds` (printed only with `include_crds`).
pub fn print(
    files: &BTreeMap<String, String>,
    crds: &[Crd],
    options: &PrintOptions,
) -> Result<String, Error> {
    let (hooks, manifests, error) = sort_partial(files);
    let mut release = String::new();
    if error.is_some() {
        // Helm hands back every template unsorted so `--debug` can show the bad YAML.
        for (name, content) in files {
            if !content.trim().is_empty() {
                let _ = write!(release, "---\n# Source: {name}\n{content}\n");
            }
        }
    } else {
        if options.include_crds {
            for crd in crds {
                let _ = write!(release, "---\n# Source: {}\n{}\n", crd.filename, crd.data);
            }
        }
        for m in &manifests {
            let _ = write!(release, "---\n# Source: {}\n{}\n", m.name, m.content);
        }
    }
    let mut out = format!("{}\n", release.trim());
    if !options.no_hooks {
        for h in hooks
            .iter()
            .filter(|h| !(options.skip_tests && h.is_test()))
        {
            let _ = write!(out, "---\n# Source: {}\n{}\n", h.path, h.manifest);
        }
    }
    match error {
        None if options.show_only.is_empty() => Ok(out),
        None => show_only(&out, &options.show_only),
        Some(mut e) => {
            // What `helm template --debug` prints before the error (unfiltered here; see
            // `Template::run` for `--show-only` on this path).
            e.output = out;
            Err(e)
        }
    }
}

static SOURCE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"# Source: [^/]+/(.+)").expect("the source regex is valid"));

/// `--show-only`: the documents of `out` whose source path (after the chart name) matches a
/// pattern, pattern by pattern; Helm's error for a pattern that matches nothing.
fn show_only(out: &str, patterns: &[String]) -> Result<String, Error> {
    let docs = split_manifests(out);
    let mut shown = String::new();
    for pattern in patterns {
        let pattern = pattern.replace('\\', "/");
        let mut missing = true;
        for doc in &docs {
            let Some(path) = SOURCE.captures(doc).and_then(|c| c.get(1)) else {
                continue;
            };
            if glob_match(&pattern, path.as_str()) {
                let _ = write!(shown, "---\n{doc}\n");
                missing = false;
            }
        }
        if missing {
            return Err(Error::new(format!(
                "could not find template {pattern} in chart"
            )));
        }
    }
    Ok(shown)
}

/// Go's `path/filepath.Match` on `/`-separated names: `*` (no `/`), `?`, `[a-z]`, `[^x]`,
/// `\` escapes; a malformed pattern matches nothing (Helm ignores the error).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    crate::chart::glob_match(pattern, name).unwrap_or(false)
}

/// The engine's output without `NOTES.txt` files, and the top chart's notes (what `helm
/// install` would print; `helm template` never prints them).
pub fn without_notes(
    chart_name: &str,
    mut files: BTreeMap<String, String>,
) -> (BTreeMap<String, String>, String) {
    let top = format!("{chart_name}/templates/NOTES.txt");
    let notes = files.get(&top).cloned().unwrap_or_default();
    files.retain(|path, _| !path.ends_with("NOTES.txt"));
    (files, notes)
}

/// Where a `-f`/`--set*` value comes from, in command-line order within its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueSource {
    /// `-f/--values FILE`.
    File(PathBuf),
    /// `--set K=V`.
    Set(String),
    /// `--set-string K=V`.
    SetString(String),
    /// `--set-json K=JSON`.
    SetJson(String),
    /// `--set-file K=PATH`.
    SetFile(String),
    /// `--set-literal K=V`.
    SetLiteral(String),
}

impl ValueSource {
    /// The flag that gives this source.
    pub fn flag(&self) -> &'static str {
        match self {
            ValueSource::File(_) => "--values",
            ValueSource::Set(_) => "--set",
            ValueSource::SetString(_) => "--set-string",
            ValueSource::SetJson(_) => "--set-json",
            ValueSource::SetFile(_) => "--set-file",
            ValueSource::SetLiteral(_) => "--set-literal",
        }
    }
}

/// Applies one `--set*` source to the values (Helm's `strvals` parsers); the error is the
/// parser's message.
pub type SetValue<'a> = dyn Fn(&ValueSource, &mut serde_json::Map<String, serde_json::Value>) -> Result<(), String>
    + 'a;

/// `helm template [NAME] CHART [flags]` as a library call: the arguments and flags Helm's
/// command takes that matter offline.
#[derive(Debug, Clone, Default)]
pub struct Template {
    /// The positional arguments: `[NAME] CHART`.
    pub args: Vec<String>,
    /// `--namespace` (Helm's default: `default`).
    pub namespace: Option<String>,
    /// Values sources; Helm applies every `-f` first, then `--set-json`, `--set`,
    /// `--set-string`, `--set-file`, `--set-literal` (each kind in its order).
    pub values: Vec<ValueSource>,
    /// `--name-template`: a Go template (with Sprig) giving the release name.
    pub name_template: Option<String>,
    /// `--is-upgrade`.
    pub is_upgrade: bool,
    /// `--kube-version`.
    pub kube_version: Option<String>,
    /// `--api-versions` (each may be a comma-separated list).
    pub api_versions: Vec<String>,
    /// `--include-crds`, `--skip-tests`, `--no-hooks`, `--show-only`.
    pub print: PrintOptions,
    /// `--skip-crds`: only stops CRD installation in Helm, which `helm template` never does.
    pub skip_crds: bool,
    /// `--debug`: on a failed render, print the raw templates before the error.
    pub debug: bool,
}

/// What a successful `helm template` produced.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    /// The release name used.
    pub release_name: String,
    /// stdout.
    pub stdout: String,
    /// The top chart's rendered `NOTES.txt`.
    pub notes: String,
}

/// Helm's release name pattern, as its error message quotes it.
const VALID_NAME: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Whether `name` matches [`VALID_NAME`]: dot-separated labels of lowercase letters, digits
/// and `-`, none empty nor starting or ending with `-`. Checked by hand: compiling the regex
/// cost a whole-process render more than the rest of the check.
fn valid_release_name(name: &str) -> bool {
    name.split('.').all(|label| {
        let bytes = label.as_bytes();
        bytes
            .iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            && bytes.first().is_some_and(|&c| c != b'-')
            && bytes.last().is_some_and(|&c| c != b'-')
    })
}

impl Template {
    /// The release name and the chart reference from the arguments, as Helm's
    /// `Install.NameAndChart` picks them under `helm template` (default name `release-name`).
    pub fn name_and_chart(&self) -> Result<(String, String), Error> {
        match self.args.as_slice() {
            [] => Err(Error::new("\"helm template\" requires at least 1 argument")),
            [chart] => {
                if let Some(t) = &self.name_template {
                    return Ok((template_name(t)?, chart.clone()));
                }
                Ok(("release-name".into(), chart.clone()))
            }
            [name, chart] => {
                if self.name_template.as_deref().is_some_and(|t| !t.is_empty()) {
                    return Err(Error::new(
                        "cannot set --name-template and also specify a name",
                    ));
                }
                Ok((name.clone(), chart.clone()))
            }
            [_, _, rest @ ..] => Err(Error::new(format!(
                "expected at most two arguments, unexpected arguments: {}",
                rest.join(", ")
            ))),
        }
    }

    /// The user values: `-f` files merged in order (maps merge recursively, anything else
    /// replaces, as Helm's `mergeMaps`), then the `--set*` flags applied by `set`, which gets
    /// the flag kind and expression and applies it to the map (Helm's `strvals`). Relative
    /// file paths are resolved against `base`.
    pub fn values(
        &self,
        base: &Path,
        set: &SetValue<'_>,
    ) -> Result<serde_json::Map<String, serde_json::Value>, Error> {
        let mut values = serde_json::Map::new();
        for source in &self.values {
            if let ValueSource::File(path) = source {
                let full = base.join(path);
                let text = std::fs::read(&full).map_err(|e| {
                    Error::new(format!("open {}: {}", path.display(), io_reason(&e)))
                })?;
                let text = String::from_utf8_lossy(&text);
                let parsed = crate::yaml::parse(&text).map_err(|e| {
                    Error::new(format!("failed to parse {}: {}", path.display(), e.message))
                })?;
                match parsed {
                    serde_json::Value::Object(map) => merge_maps(&mut values, map),
                    serde_json::Value::Null => {}
                    _ => {
                        return Err(Error::new(format!(
                            "failed to parse {}: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {{}}",
                            path.display()
                        )));
                    }
                }
            }
        }
        // Helm's order of the flag kinds after the files, and the words it wraps errors in.
        for source in self
            .values
            .iter()
            .filter(|s| matches!(s, ValueSource::SetJson(_)))
        {
            let ValueSource::SetJson(expr) = source else {
                continue;
            };
            let trimmed = expr.trim();
            if trimmed.starts_with('{') {
                // A whole JSON object merges like a values file (numbers become float64).
                let parsed: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(trimmed).map_err(|_| {
                        Error::new(format!("failed parsing --set-json data JSON: {expr}"))
                    })?;
                let serde_json::Value::Object(parsed) = floats(serde_json::Value::Object(parsed))
                else {
                    continue;
                };
                merge_maps(&mut values, parsed);
            } else {
                set(source, &mut values)
                    .map_err(|_| Error::new(format!("failed parsing --set-json data {expr}")))?;
            }
        }
        for flag in ["--set", "--set-string", "--set-file", "--set-literal"] {
            for source in self.values.iter().filter(|s| s.flag() == flag) {
                set(source, &mut values)
                    .map_err(|e| Error::new(format!("failed parsing {flag} data: {e}")))?;
            }
        }
        Ok(values)
    }

    /// Renders a loaded chart with merged `values` and prints it as `helm template` does.
    /// `release_name` comes from [`Template::name_and_chart`].
    pub fn run(
        &self,
        release_name: &str,
        chart: &Chart,
        values: &serde_json::Map<String, serde_json::Value>,
        env: &mut Env,
    ) -> Result<Rendered, Error> {
        self.run_chart(release_name, std::borrow::Cow::Borrowed(chart), values, env)
    }

    /// [`Template::run`] of a borrowed chart (copied for rendering) or an owned one.
    fn run_chart(
        &self,
        release_name: &str,
        chart: std::borrow::Cow<'_, Chart>,
        values: &serde_json::Map<String, serde_json::Value>,
        env: &mut Env,
    ) -> Result<Rendered, Error> {
        if !matches!(chart.metadata.chart_type.as_str(), "" | "application") {
            return Err(Error::new(format!(
                "{} charts are not installable",
                chart.metadata.chart_type
            )));
        }
        check_dependencies(&chart)?;
        if release_name.is_empty() {
            return Err(Error::new(
                "release name check failed: release name \"\": no name provided",
            ));
        }
        if release_name.len() > 53 || !valid_release_name(release_name) {
            return Err(Error::new(format!(
                "release name check failed: release name {release_name:?}: invalid release name, must match regex {VALID_NAME} and the length must not be longer than 53"
            )));
        }
        let mut api_versions = Vec::new();
        for entry in &self.api_versions {
            api_versions.extend(entry.split(',').map(str::to_owned));
        }
        let options = engine::Options {
            release_name: release_name.to_owned(),
            namespace: self
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "default".into()),
            revision: 1,
            is_install: !self.is_upgrade,
            is_upgrade: self.is_upgrade,
            kube_version: self.kube_version.clone(),
            api_versions,
        };
        check_kube_version(&chart, options.kube_version.as_deref())
            .map_err(|e| self.with_hint(e))?;
        let (files, processed) = engine::render_owned(chart.into_owned(), values, &options, env)
            .map_err(|e| {
                let message = e.message;
                // Errors before the render (dependencies, schema) have no release to show;
                // everything after gets Helm's hint.
                if message.starts_with("chart dependencies processing failed")
                    || message.starts_with("values don't meet the specifications")
                {
                    Error::new(message)
                } else {
                    self.with_hint(message)
                }
            })?;
        let (files, notes) = without_notes(&processed.metadata.name, files);
        let crds = if self.print.include_crds {
            // Helm lists the CRDs of the processed chart: disabled subcharts out, aliases in.
            crd_objects(&processed)
        } else {
            Vec::new()
        };
        let stdout = match print(&files, &crds, &self.print) {
            Ok(stdout) => stdout,
            Err(e) if e.output.is_empty() => return Err(e),
            Err(e) if !self.debug => return Err(self.with_hint(e.message)),
            Err(mut e) => {
                // With --debug Helm v4.2.3 still applies --show-only to what it prints; a
                // pattern matching nothing then replaces the error.
                if !self.print.show_only.is_empty() {
                    e.output = show_only(&e.output, &self.print.show_only)?;
                }
                return Err(e);
            }
        };
        Ok(Rendered {
            release_name: release_name.to_owned(),
            stdout,
            notes,
        })
    }

    /// The whole command: release name and chart from the arguments, the chart loaded
    /// (relative paths, values files included, from `cwd`), values merged, the chart rendered
    /// and printed. The returned [`Error`] carries what Helm prints on stdout before failing.
    pub fn execute(&self, cwd: &Path, env: &mut Env) -> Result<Rendered, Error> {
        let (name, chart_ref) = self.name_and_chart()?;
        let chart_ref = chart_ref.trim();
        let chart_path = cwd.join(chart_ref);
        if !chart_path.exists() {
            if Path::new(chart_ref).is_absolute() || chart_ref.starts_with('.') {
                return Err(Error::new(format!("path {chart_ref:?} not found")));
            }
            // Helm would look the name up in its chart repositories or an OCI registry.
            return Err(Error::new(format!(
                "path {chart_ref:?} not found (charts from repositories and registries are not supported here; give a directory or a .tgz)"
            )));
        }
        let values = self.values(cwd, &|source, values| apply_set(cwd, source, values))?;
        let chart = load_chart(&chart_path)?;
        self.run_chart(&name, std::borrow::Cow::Owned(chart), &values, env)
    }

    /// Reads `helm template`'s command line (without the `template` word): Helm's flag
    /// names, `--flag value` and `--flag=value`, the short `-f`, `-s`, `-a`, `-n`. Flags that
    /// only matter with a cluster are refused.
    pub fn from_args<S: AsRef<str>>(args: &[S]) -> Result<Self, Error> {
        let mut t = Template::default();
        let mut i = 0;
        while i < args.len() {
            let arg = args[i].as_ref();
            i += 1;
            if arg == "--" {
                t.args
                    .extend(args[i..].iter().map(|a| a.as_ref().to_owned()));
                break;
            }
            if !arg.starts_with('-') || arg == "-" {
                t.args.push(arg.to_owned());
                continue;
            }
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
                _ => (arg, None),
            };
            let boolean = |inline: &Option<String>| -> Result<bool, Error> {
                match inline.as_deref() {
                    None | Some("true") => Ok(true),
                    Some("false") => Ok(false),
                    Some(other) => Err(Error::new(format!(
                        "invalid argument {other:?} for {flag:?} flag: strconv.ParseBool: parsing {other:?}: invalid syntax"
                    ))),
                }
            };
            match flag {
                "--include-crds" => t.print.include_crds = boolean(&inline)?,
                "--skip-tests" => t.print.skip_tests = boolean(&inline)?,
                "--no-hooks" => t.print.no_hooks = boolean(&inline)?,
                "--skip-crds" => t.skip_crds = boolean(&inline)?,
                "--is-upgrade" => t.is_upgrade = boolean(&inline)?,
                "--debug" => t.debug = boolean(&inline)?,
                // Only used with --output-dir, which this command does not write.
                "--release-name" => {
                    boolean(&inline)?;
                }
                _ => {
                    let value = if let Some(v) = inline {
                        v
                    } else {
                        let Some(v) = args.get(i) else {
                            return Err(Error::new(format!("flag needs an argument: {flag}")));
                        };
                        i += 1;
                        v.as_ref().to_owned()
                    };
                    match flag {
                        "-f" | "--values" => t.values.extend(
                            value
                                .split(',')
                                .map(|p| ValueSource::File(PathBuf::from(p))),
                        ),
                        "--set" => t.values.push(ValueSource::Set(value)),
                        "--set-string" => t.values.push(ValueSource::SetString(value)),
                        "--set-json" => t.values.push(ValueSource::SetJson(value)),
                        "--set-file" => t.values.push(ValueSource::SetFile(value)),
                        "--set-literal" => t.values.push(ValueSource::SetLiteral(value)),
                        "-n" | "--namespace" => t.namespace = Some(value),
                        "--name-template" => t.name_template = Some(value),
                        "--kube-version" => t.kube_version = Some(value),
                        "-a" | "--api-versions" => t.api_versions.push(value),
                        "-s" | "--show-only" => t.print.show_only.push(value),
                        _ => return Err(Error::new(format!("unknown flag: {flag}"))),
                    }
                }
            }
        }
        Ok(t)
    }

    fn with_hint(&self, message: String) -> Error {
        if self.debug {
            Error::new(message)
        } else {
            Error::new(format!(
                "{message}\n\nUse --debug flag to render out invalid YAML"
            ))
        }
    }
}

/// Loads a chart directory or `.tgz` archive (Helm's `loader.Load`), its error in Helm's words.
pub fn load_chart(path: &Path) -> Result<Chart, Error> {
    crate::chart::load(path).map_err(|e| Error::new(e.message))
}

/// Applies a `--set*` flag for [`Template::execute`] with Helm's `strvals` parsers; `--set-file`
/// paths are read relative to `cwd`.
fn apply_set(
    cwd: &Path,
    source: &ValueSource,
    values: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    let result = match source {
        ValueSource::Set(e) => crate::strvals::parse_into(e, values),
        ValueSource::SetString(e) => crate::strvals::parse_string_into(e, values),
        ValueSource::SetJson(e) => crate::strvals::parse_json_into(e, values),
        ValueSource::SetLiteral(e) => crate::strvals::parse_literal_into(e, values),
        ValueSource::SetFile(e) => {
            let mut read = |path: &str| -> Result<String, String> {
                std::fs::read(cwd.join(path))
                    .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                    .map_err(|err| format!("open {path}: {}", io_reason(&err)))
            };
            crate::strvals::parse_file_into(e, values, &mut read)
        }
        ValueSource::File(_) => Ok(()),
    };
    result.map_err(|e| e.message)
}

/// Helm's check of Chart.yaml's `kubeVersion` against `.Capabilities.KubeVersion`
/// (`--kube-version` with a `v` added when missing, else Helm's default v1.36.0); an unreadable
/// constraint or version counts as incompatible, as in Helm.
fn check_kube_version(chart: &Chart, kube_version: Option<&str>) -> Result<(), String> {
    let constraint = &chart.metadata.kube_version;
    if constraint.is_empty() {
        return Ok(());
    }
    let version = match kube_version {
        Some(v) if v.starts_with('v') => v.to_owned(),
        Some(v) => format!("v{v}"),
        None => "v1.36.0".to_owned(),
    };
    let compatible = capstan_semver::Constraint::parse(constraint)
        .ok()
        .zip(capstan_semver::parse_version(&version))
        .is_some_and(|(c, v)| c.matches(&v));
    if compatible {
        return Ok(());
    }
    Err(format!(
        "chart requires kubeVersion: {constraint} which is incompatible with Kubernetes {version}"
    ))
}

/// Helm's `CheckDependencies`: every dependency in Chart.yaml must be under `charts/`.
fn check_dependencies(chart: &Chart) -> Result<(), Error> {
    let missing: Vec<&str> = chart
        .metadata
        .dependencies
        .iter()
        .filter(|d| !chart.dependencies.iter().any(|c| c.metadata.name == d.name))
        .map(|d| d.name.as_str())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::new(format!(
        "an error occurred while checking for chart dependencies. You may need to run 'helm dependency build' to fetch missing dependencies: found in Chart.yaml, but missing in charts/ directory: {}",
        missing.join(", ")
    )))
}

/// Helm's `TemplateName`: `--name-template` executed with Sprig's functions and no data.
fn template_name(text: &str) -> Result<String, Error> {
    if text.is_empty() {
        return Ok(String::new());
    }
    let mut funcs = crate::template::FuncMap::new();
    crate::funcs::register_sprig(&mut funcs);
    let mut set = crate::template::Set::new(Rc::new(funcs));
    set.parse("name-template", text)
        .map_err(|e| Error::new(e.message))?;
    let mut env = Env::new();
    set.execute("name-template", crate::Value::Nil, &mut env)
        .map_err(|e| Error::new(e.message))
}

/// Every JSON number as a float64, as Go's `json.Unmarshal` into `interface{}` reads it.
fn floats(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(serde_json::Value::Number(n), serde_json::Value::Number),
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.into_iter().map(floats).collect())
        }
        serde_json::Value::Object(map) => {
            serde_json::Value::Object(map.into_iter().map(|(k, v)| (k, floats(v))).collect())
        }
        other => other,
    }
}

/// Helm's `mergeMaps` for repeated `-f`: maps merge recursively, anything else replaces.
pub fn merge_maps(
    into: &mut serde_json::Map<String, serde_json::Value>,
    from: serde_json::Map<String, serde_json::Value>,
) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(serde_json::Value::Object(old)), serde_json::Value::Object(new)) => {
                merge_maps(old, new);
            }
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

/// An I/O error's reason as Go words it (`no such file or directory`).
fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::IsADirectory => "is a directory".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_like_helm() {
        assert_eq!(split_manifests("a: 1\n---\nb: 2\n"), vec!["a: 1", "b: 2\n"]);
        assert_eq!(split_manifests("---\na: 1\n\n---\n\n"), vec!["a: 1"]);
        // `---` glued to a comment or a key by whitespace trimming still splits.
        assert_eq!(
            split_manifests("a: 1\n---# c\nb: 2"),
            vec!["a: 1", "# c\nb: 2"]
        );
        assert_eq!(split_manifests("---apiVersion: v1"), vec!["apiVersion: v1"]);
        // A `---` inside a line is not a separator; a comment-only document stays.
        assert_eq!(split_manifests("a: x---y\n"), vec!["a: x---y\n"]);
        assert_eq!(split_manifests("# only\n---\n"), vec!["# only"]);
        assert!(split_manifests(" \n\t").is_empty());
    }

    #[test]
    fn release_names_as_helm_pattern() {
        let pattern = Regex::new(VALID_NAME).expect("valid");
        for name in [
            "a",
            "a-b",
            "a.b",
            "a1.b-2.c",
            "0",
            "-a",
            "a-",
            "a..b",
            ".a",
            "a.",
            "A",
            "a_b",
            "a.-b",
            "é",
            "a\n",
            "abc-def.ghi",
        ] {
            assert_eq!(valid_release_name(name), pattern.is_match(name), "{name:?}");
        }
    }

    #[test]
    fn kind_order_matches_helm() {
        let mut kinds = vec!["Zeta", "Deployment", "", "Alpha", "Namespace", "Service"];
        kinds.sort_by(|a, b| kind_order(a, b));
        assert_eq!(
            kinds,
            vec!["Namespace", "Service", "Deployment", "", "Alpha", "Zeta"]
        );
    }

    #[test]
    fn go_atoi_rules() {
        assert_eq!(go_atoi("5"), Some(5));
        assert_eq!(go_atoi("-5"), Some(-5));
        assert_eq!(go_atoi("+5"), Some(5));
        assert_eq!(go_atoi(" 5"), None);
        assert_eq!(go_atoi("5.0"), None);
        assert_eq!(go_atoi(""), None);
        assert_eq!(go_atoi("99999999999999999999"), None);
    }

    #[test]
    fn globs_like_go() {
        assert!(glob_match(
            "templates/subdir/role*",
            "templates/subdir/role.yaml"
        ));
        assert!(glob_match(
            "templates/subdir/role*",
            "templates/subdir/rolebinding.yaml"
        ));
        assert!(!glob_match("templates/*", "templates/subdir/role.yaml"));
        assert!(glob_match(
            "templates/?ervice.yaml",
            "templates/service.yaml"
        ));
        assert!(glob_match(
            "templates/[a-t]ervice.yaml",
            "templates/service.yaml"
        ));
        assert!(!glob_match(
            "templates/[^s]ervice.yaml",
            "templates/service.yaml"
        ));
        assert!(glob_match("templates/\\*x", "templates/*x"));
        assert!(!glob_match("templates/[", "templates/["));
        assert!(glob_match("*/*", "a/b"));
        assert!(!glob_match("*", "a/b"));
    }

    #[test]
    fn crds_in_chart_order() {
        let sub = Chart {
            metadata: crate::chart::Metadata {
                name: "sub".into(),
                ..Default::default()
            },
            files: vec![crate::chart::File {
                name: "crds/b.YML".into(),
                data: b"b".to_vec(),
            }],
            ..Default::default()
        };
        let chart = Chart {
            metadata: crate::chart::Metadata {
                name: "top".into(),
                ..Default::default()
            },
            files: vec![
                crate::chart::File {
                    name: "crds/a.yaml".into(),
                    data: b"a\n".to_vec(),
                },
                crate::chart::File {
                    name: "crds/readme.txt".into(),
                    data: b"x".to_vec(),
                },
                crate::chart::File {
                    name: "files/crds/c.yaml".into(),
                    data: b"x".to_vec(),
                },
            ],
            dependencies: vec![sub],
            ..Default::default()
        };
        let crds = crd_objects(&chart);
        assert_eq!(
            crds.iter().map(|c| c.filename.as_str()).collect::<Vec<_>>(),
            vec!["top/crds/a.yaml", "top/charts/sub/crds/b.YML"]
        );
    }

    #[test]
    fn names_and_charts() {
        let t = |args: &[&str], name_template: Option<&str>| Template {
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            name_template: name_template.map(str::to_owned),
            ..Default::default()
        };
        assert_eq!(
            t(&["./c"], None).name_and_chart().unwrap(),
            ("release-name".into(), "./c".into())
        );
        assert_eq!(
            t(&["r", "./c"], None).name_and_chart().unwrap(),
            ("r".into(), "./c".into())
        );
        assert_eq!(
            t(&["r", "./c"], Some("x"))
                .name_and_chart()
                .unwrap_err()
                .message,
            "cannot set --name-template and also specify a name"
        );
        assert_eq!(
            t(&["a", "b", "c", "d"], None)
                .name_and_chart()
                .unwrap_err()
                .message,
            "expected at most two arguments, unexpected arguments: c, d"
        );
    }

    #[test]
    fn merge_maps_like_helm() {
        let mut a = serde_json::json!({"a": {"b": 1, "c": 2}, "l": [1]})
            .as_object()
            .cloned()
            .unwrap();
        let b = serde_json::json!({"a": {"c": 3, "d": null}, "l": [2], "x": "y"})
            .as_object()
            .cloned()
            .unwrap();
        merge_maps(&mut a, b);
        assert_eq!(
            serde_json::Value::Object(a),
            serde_json::json!({"a": {"b": 1, "c": 3, "d": null}, "l": [2], "x": "y"})
        );
    }

    fn files(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn hooks_parsed_and_printed_last() {
        let f = files(&[
            (
                "c/templates/a.yaml",
                "kind: Job\nmetadata:\n  name: j\n  annotations:\n    helm.sh/hook: pre-install, Post-Upgrade\n    helm.sh/hook-weight: \"-5\"\n    helm.sh/hook-delete-policy: before-hook-creation,Hook-Succeeded\n---\nkind: Service\nmetadata:\n  name: s\n",
            ),
            (
                "c/templates/b.yaml",
                "kind: Pod\nmetadata:\n  name: t\n  annotations:\n    helm.sh/hook: test\n---\nkind: Secret\nmetadata:\n  name: x\n  annotations:\n    helm.sh/hook: bogus\n",
            ),
            ("c/templates/_p.tpl", "kind: Secret"),
            (
                "c/templates/c.yaml",
                "kind: Namespace\nmetadata:\n  name: ns\n",
            ),
        ]);
        let (hooks, manifests) = sort_manifests(&f).unwrap();
        assert_eq!(
            manifests
                .iter()
                .map(|m| m.head.kind.as_str())
                .collect::<Vec<_>>(),
            vec!["Namespace", "Service"]
        );
        assert_eq!(hooks.len(), 2, "the unknown hook event drops its document");
        let job = &hooks[1];
        assert_eq!(job.kind, "Job");
        assert_eq!(
            job.events,
            vec![HookEvent::PreInstall, HookEvent::PostUpgrade]
        );
        assert_eq!(job.weight, -5);
        assert_eq!(
            job.delete_policies,
            vec!["before-hook-creation", "hook-succeeded"]
        );
        assert!(hooks[0].is_test());

        let all = print(&f, &[], &PrintOptions::default()).unwrap();
        assert_eq!(
            all,
            "---\n# Source: c/templates/c.yaml\nkind: Namespace\nmetadata:\n  name: ns\n\n\
             ---\n# Source: c/templates/a.yaml\nkind: Service\nmetadata:\n  name: s\n\
             ---\n# Source: c/templates/b.yaml\nkind: Pod\nmetadata:\n  name: t\n  annotations:\n    helm.sh/hook: test\n\
             ---\n# Source: c/templates/a.yaml\nkind: Job\nmetadata:\n  name: j\n  annotations:\n    helm.sh/hook: pre-install, Post-Upgrade\n    helm.sh/hook-weight: \"-5\"\n    helm.sh/hook-delete-policy: before-hook-creation,Hook-Succeeded\n"
        );
        let options = PrintOptions {
            skip_tests: true,
            ..PrintOptions::default()
        };
        assert!(!print(&f, &[], &options).unwrap().contains("kind: Pod"));
        let options = PrintOptions {
            no_hooks: true,
            ..PrintOptions::default()
        };
        assert!(!print(&f, &[], &options).unwrap().contains("kind: Job"));
        let options = PrintOptions {
            show_only: vec!["templates/a.yaml".into()],
            ..PrintOptions::default()
        };
        let shown = print(&f, &[], &options).unwrap();
        assert!(shown.contains("kind: Service") && shown.contains("kind: Job"));
        assert!(!shown.contains("kind: Namespace"));
        let options = PrintOptions {
            show_only: vec!["templates/nope.yaml".into()],
            ..PrintOptions::default()
        };
        assert_eq!(
            print(&f, &[], &options).unwrap_err().message,
            "could not find template templates/nope.yaml in chart"
        );
    }

    #[test]
    fn bad_yaml_keeps_the_raw_output() {
        let f = files(&[
            (
                "c/templates/a.yaml",
                "kind: Job\nmetadata:\n  name: j\n  annotations:\n    helm.sh/hook: post-install\n",
            ),
            ("c/templates/b.yaml", "kind: [\n"),
        ]);
        let e = print(&f, &[], &PrintOptions::default()).unwrap_err();
        assert!(
            e.message
                .starts_with("YAML parse error on c/templates/b.yaml: ")
        );
        // The raw templates, then the hooks found before the bad document.
        assert!(
            e.output
                .starts_with("---\n# Source: c/templates/a.yaml\nkind: Job")
        );
        assert!(e.output.contains("# Source: c/templates/b.yaml\nkind: ["));
        assert_eq!(e.output.matches("kind: Job").count(), 2);
    }

    #[test]
    fn annotations_must_be_strings() {
        let f = files(&[(
            "c/templates/a.yaml",
            "kind: Job\nmetadata:\n  annotations:\n    helm.sh/hook-weight: 5\n",
        )]);
        let e = sort_manifests(&f).unwrap_err();
        assert!(
            e.message.contains("cannot unmarshal number"),
            "{}",
            e.message
        );
    }

    #[test]
    fn kube_version_constraint() {
        let chart = |c: &str| Chart {
            metadata: crate::chart::Metadata {
                name: "c".into(),
                kube_version: c.into(),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(check_kube_version(&chart(""), Some("1.10")).is_ok());
        assert!(check_kube_version(&chart(">=1.25.0-0"), None).is_ok());
        assert_eq!(
            check_kube_version(&chart(">=1.25.0-0"), Some("1.24.0")).unwrap_err(),
            "chart requires kubeVersion: >=1.25.0-0 which is incompatible with Kubernetes v1.24.0"
        );
    }
}
