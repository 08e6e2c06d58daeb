//! Rendering a Kustomization's `spec.path` the way kustomize-controller does: a generated
//! kustomization when the path has none, Flux's overrides (`targetNamespace`, `namePrefix`,
//! `nameSuffix`, `patches`, `images`, `components`) in an overlay on top, then
//! `postBuild` substitutions and `commonMetadata`.
//!
//! Used by the reconciler (on an extracted artifact) and by `capstan build kustomization`
//! (on a local directory, in place, through [`render_local`]).
//!
//! # Expected flow
//!
//! The source is only read. The engine builds through an [`OverlayFs`]: the source directory
//! mounted at `/build/source`, below, and in memory above it the generated kustomization
//! (when `spec.path` has none) and the overlay kustomization at `/build/overlay`.
//!
//! # Guarantees
//!
//! * Nothing is written into the source, and nothing outside it is read: `spec.path`,
//!   `spec.components` and every path the kustomizations name (links resolved) must stay
//!   inside it; the kustomize engine is confined to `/build` (the source and the overlay),
//!   and a refusal reads the same whether or not the path exists outside. The engine never
//!   sees where the source lies on the machine, so its messages cannot show it.
//! * A file that cannot be read never becomes "no objects": a `.yaml`/`.yml` file of a path
//!   without a kustomization that does not decode as Kubernetes objects fails the build,
//!   naming the file, as Flux's generator does.
//! * Errors about a document after substitution give its object, line and column and the
//!   variables substituted there, never its text, which may hold secret values.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};

use capstan_api::Kustomization;
use capstan_api::kustomize::v1::SubstituteStrategy;
use capstan_kustomize::{Boundary, DiskFs, FileSystem, OverlayFs};
use kube::api::DynamicObject;
use serde_json::Value;

use super::envsubst::{Placed, substitute_tracked};
pub use super::envsubst::{SubstituteError, substitute, substitute_strict};
use super::{OVERLAY_DIR, SUBSTITUTE_ANNOTATION};

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Why [`render`] or [`render_local`] failed. Messages name the file or object at fault,
/// with paths relative to the source; rendered with their causes
/// ([`capstan_source::redact::error_chain`]) they are the Kustomization's condition message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RenderError {
    /// The local source directory has no absolute path.
    #[error("cannot resolve '{}': {source}", path.display())]
    Resolve {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `spec.path` leaves the source (lexically or through a link).
    #[error("spec.path '{0}' must stay inside the source")]
    PathOutside(String),
    /// `spec.path` is not a directory of the source.
    #[error("kustomization path not found: '{0}' does not exist in the source")]
    PathNotFound(String),
    /// A `spec.components` entry leaves the source.
    #[error("spec.components: '{0}' is outside the root of the source: refused")]
    ComponentOutside(String),
    /// A link of the source (relative path given) leads outside it.
    #[error("'{0}' is a link leading outside the source: refused")]
    LinkOutside(String),
    /// A directory of a path without a kustomization cannot be listed.
    #[error("cannot list the directory '{dir}': {source}")]
    List {
        /// The directory, relative to `spec.path`.
        dir: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A manifest of a path without a kustomization is not Kubernetes YAML.
    #[error(
        "failed to decode Kubernetes YAML from '{file}': {reason}; hint: list the resources in a kustomization.yaml, or exclude the file with .sourceignore"
    )]
    Manifest {
        /// The file, relative to `spec.path`.
        file: String,
        /// Why.
        #[source]
        reason: ManifestError,
    },
    /// The generated kustomization's place is taken by something that is not a file.
    #[error("cannot write the generated kustomization: '{0}' exists and is not a regular file")]
    GeneratedKustomization(String),
    /// The kustomize engine failed. `message` is its error with every cause, paths shown
    /// relative to the source (the overlay relative to the build); the engine's error is kept
    /// in `error` but not offered as a source, as its paths are the engine's view.
    #[error("kustomize build failed: {message}")]
    Build {
        /// The engine's message with its causes, paths relative to the source.
        message: String,
        /// The engine's error.
        error: Box<capstan_kustomize::Error>,
    },
    /// Substituting the `postBuild` variables into an object failed.
    #[error("post build failed for {object}: {source}")]
    PostBuild {
        /// `<kind>/[<namespace>/]<name>`.
        object: String,
        /// Why.
        #[source]
        source: PostBuildError,
    },
    /// A built object does not decode as a Kubernetes object. `reason` is the decoder's
    /// message, its quoted text redacted when variables were substituted into the object.
    #[error("{object}: not a Kubernetes object: {reason}")]
    NotAnObject {
        /// `<kind>/[<namespace>/]<name>`.
        object: String,
        /// The decoder's message.
        reason: String,
    },
}

/// Why a manifest file of a path without a kustomization cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file cannot be read.
    #[error("cannot read the file: {0}")]
    Read(#[source] std::io::Error),
    /// The file is not UTF-8.
    #[error("the file is not UTF-8")]
    NotUtf8,
    /// The file is not YAML.
    #[error(transparent)]
    Yaml(capstan_kustomize::YamlError),
    /// A document lacks `apiVersion` or `kind` (1-based index).
    #[error("document {0} is not a Kubernetes object (it needs apiVersion and kind)")]
    NotAnObject(usize),
}

/// Why substituting variables into an object failed. Never shows the object's text, which
/// may hold secret values.
#[derive(Debug, thiserror::Error)]
pub enum PostBuildError {
    /// A variable expression is malformed.
    #[error(transparent)]
    Substitute(#[from] SubstituteError),
    /// The object is no longer YAML: where, and which variables were substituted near there
    /// (the parser's message, which quotes the text, is withheld).
    #[error("{0}")]
    InvalidYaml(String),
    /// The object became several documents (or none).
    #[error("substitution changed the number of documents")]
    DocumentCount,
    /// A variable (a key of `substitute` or of a `substituteFrom` object) whose name Flux
    /// refuses: ASCII letters, digits and `_`, not starting with a digit (Flux's words).
    #[error("'{0}' var name is invalid, must match '^[_[:alpha:]][_[:alpha:][:digit:]]*$'")]
    InvalidVariableName(String),
}

/// Where the engine sees the build: the source mounted at `/build/source`, the overlay (in
/// memory) at `/build/overlay`. Only these paths reach the engine, so its messages never show
/// where the source lies on the machine.
const BUILD_ROOT: &str = "/build";
const SOURCE_DIR: &str = "source";

/// Renders `object` from a source tree at `root` (an extracted artifact), which is only read:
/// a generated kustomization and the overlay carrying the overrides are kept in memory.
/// Errors name the file or object at fault.
pub fn render(
    root: &Path,
    object: &Kustomization,
    variables: Option<&BTreeMap<String, String>>,
) -> Result<Vec<DynamicObject>, RenderError> {
    render_with(root, object, variables, None)
}

/// [`render`], with remote bases (`resources:` entries naming a Git repository) fetched by
/// `remote`; `None` refuses them, naming the kustomization file and the entry.
pub fn render_with(
    root: &Path,
    object: &Kustomization,
    variables: Option<&BTreeMap<String, String>>,
    remote: Option<std::sync::Arc<dyn capstan_kustomize::RemoteLoader>>,
) -> Result<Vec<DynamicObject>, RenderError> {
    let objects = build_with_remote(&DiskFs, root, object, remote)?;
    finish_objects(objects, object, variables)
}

/// [`build_in`] as the controller runs it: a remote base refused for want of `remote` says
/// the controller's flag refused it.
pub(super) fn build_with_remote(
    disk: &dyn FileSystem,
    root: &Path,
    object: &Kustomization,
    remote: Option<std::sync::Arc<dyn capstan_kustomize::RemoteLoader>>,
) -> Result<Vec<Value>, RenderError> {
    let refused = remote.is_none();
    build_in(disk, root, object, remote).map_err(|error| match error {
        RenderError::Build { message, error }
            if refused && matches!(*error, capstan_kustomize::Error::Remote { .. }) =>
        {
            RenderError::Build {
                message: format!("{message} (the controller runs with --no-remote-bases)"),
                error,
            }
        }
        other => other,
    })
}

/// Renders `object` from a local source directory, read in place and never written to;
/// `.git` directories are left out, as from an artifact.
pub fn render_local(
    source: &Path,
    object: &Kustomization,
    variables: Option<&BTreeMap<String, String>>,
) -> Result<Vec<DynamicObject>, RenderError> {
    let root = std::path::absolute(source).map_err(|source_error| RenderError::Resolve {
        path: source.to_path_buf(),
        source: source_error,
    })?;
    let objects = build_in(&WithoutGit { root: &root }, &root, object, None)?;
    finish_objects(objects, object, variables)
}

/// The disk without anything under a `.git` of `root` (at any depth), and without what is
/// neither a file nor a directory (a FIFO would block a read): what an artifact packed from
/// `root` would hold.
struct WithoutGit<'a> {
    root: &'a Path,
}

impl WithoutGit<'_> {
    fn visible(&self, path: &Path) -> bool {
        path.strip_prefix(self.root).map_or(true, |rest| {
            !rest.components().any(|c| c.as_os_str() == ".git")
        })
    }
}

impl FileSystem for WithoutGit<'_> {
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        let regular =
            self.visible(path) && std::fs::metadata(path).is_ok_and(|m| m.is_file() || m.is_dir());
        if !regular {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such file or directory",
            ));
        }
        DiskFs.read(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.visible(path) && DiskFs.is_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.visible(path) && DiskFs.exists(path)
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        DiskFs.canonicalize(path)
    }
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        if self.visible(path) {
            DiskFs.read_link(path)
        } else {
            None
        }
    }
}

/// `path` joined to `root`, refusing absolute paths and `..` components.
pub(super) fn resolve_path(root: &Path, path: &str) -> Result<PathBuf, RenderError> {
    let mut resolved = root.to_path_buf();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => resolved.push(part),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                return Err(RenderError::PathOutside(path.to_owned()));
            }
        }
    }
    Ok(resolved)
}

/// Whether `dir` (inside `source`) holds a kustomization file. A kustomization file that is
/// a link out of the source is refused rather than looked through.
fn find_kustomization(
    disk: &dyn FileSystem,
    dir: &Path,
    source: &Boundary,
    relative: &str,
) -> Result<bool, RenderError> {
    for name in KUSTOMIZATION_FILES {
        let path = dir.join(name);
        if std::fs::symlink_metadata(&path).is_err() {
            continue;
        }
        let Some(real) = source.resolve(disk, &path) else {
            return Err(RenderError::LinkOutside(join_relative(relative, name)));
        };
        if disk.exists(&real) && !disk.is_dir(&real) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn join_relative(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// Checks that every document of a manifest file is a Kubernetes object, as Flux's generator
/// decodes each file it lists; `relative` names it in errors.
fn check_manifest(disk: &dyn FileSystem, real: &Path, relative: &str) -> Result<(), RenderError> {
    let failed = |reason: ManifestError| RenderError::Manifest {
        file: relative.to_owned(),
        reason,
    };
    let bytes = disk
        .read(real)
        .map_err(|e| failed(ManifestError::Read(e)))?;
    let text = String::from_utf8(bytes).map_err(|_| failed(ManifestError::NotUtf8))?;
    let documents = capstan_kustomize::parse_documents_located(&text)
        .map_err(|e| failed(ManifestError::Yaml(e)))?;
    for (index, document) in documents.iter().enumerate() {
        let is_object = document
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty())
            && document
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| !k.is_empty());
        if !is_object {
            return Err(failed(ManifestError::NotAnObject(index + 1)));
        }
    }
    Ok(())
}

/// The resources of a generated kustomization for `dir`, as Flux's generator lists them:
/// subdirectories holding a kustomization (not descended into), and `.yaml`/`.yml` files,
/// recursively, relative to `base`, sorted. Every listed file must decode as Kubernetes
/// objects, or the listing fails naming it; a directory that cannot be read fails it too.
/// Entries whose name starts with `.` are skipped; links are resolved inside `source`
/// (refused when they lead out) and, as in Flux's walk, links to directories are not
/// descended into.
pub(super) fn manifest_resources(
    disk: &dyn FileSystem,
    dir: &Path,
    base: &Path,
    source: &Boundary,
    out: &mut Vec<String>,
) -> Result<(), RenderError> {
    let relative_of = |path: &Path| {
        path.strip_prefix(base)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned()
    };
    let listing_failed = |source: std::io::Error| RenderError::List {
        dir: relative_of(dir),
        source,
    };
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(listing_failed)? {
        let entry = entry.map_err(listing_failed)?;
        let kind = entry.file_type().map_err(listing_failed)?;
        entries.push((entry.path(), kind));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, kind) in entries {
        let relative = relative_of(&path);
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden {
            continue;
        }
        if kind.is_dir() {
            if find_kustomization(disk, &path, source, &relative)? {
                out.push(relative);
            } else {
                manifest_resources(disk, &path, base, source, out)?;
            }
            continue;
        }
        let manifest = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
        if !manifest || !(kind.is_file() || kind.is_symlink()) {
            continue;
        }
        let real = if kind.is_symlink() {
            let real = source
                .resolve(disk, &path)
                .ok_or_else(|| RenderError::LinkOutside(relative.clone()))?;
            if disk.is_dir(&real) {
                continue;
            }
            real
        } else {
            path.clone()
        };
        check_manifest(disk, &real, &relative)?;
        out.push(relative);
    }
    Ok(())
}

/// The overlay kustomization carrying Flux's overrides on top of `resource`, or `None` when
/// the Kustomization has none.
pub(super) fn overlay_kustomization(object: &Kustomization, resource: &str) -> Option<Value> {
    let spec = &object.spec;
    let mut overlay = serde_json::Map::new();
    if let Some(namespace) = spec.target_namespace.as_ref().filter(|n| !n.is_empty()) {
        overlay.insert("namespace".into(), namespace.clone().into());
    }
    if let Some(prefix) = spec.name_prefix.as_ref().filter(|n| !n.is_empty()) {
        overlay.insert("namePrefix".into(), prefix.clone().into());
    }
    if let Some(suffix) = spec.name_suffix.as_ref().filter(|n| !n.is_empty()) {
        overlay.insert("nameSuffix".into(), suffix.clone().into());
    }
    if !spec.patches.is_empty() {
        overlay.insert(
            "patches".into(),
            serde_json::to_value(&spec.patches).unwrap_or_default(),
        );
    }
    if !spec.images.is_empty() {
        overlay.insert(
            "images".into(),
            serde_json::to_value(&spec.images).unwrap_or_default(),
        );
    }
    if !spec.components.is_empty() {
        let components = spec
            .components
            .iter()
            .map(|c| Value::String(format!("{resource}/{}", c.trim_start_matches("./"))))
            .collect();
        overlay.insert("components".into(), Value::Array(components));
    }
    if overlay.is_empty() {
        return None;
    }
    overlay.insert(
        "apiVersion".into(),
        "kustomize.config.k8s.io/v1beta1".into(),
    );
    overlay.insert("kind".into(), "Kustomization".into());
    overlay.insert("resources".into(), serde_json::json!([resource]));
    Some(Value::Object(overlay))
}

/// Builds `spec.path` of the extracted artifact at `root`, which is only read: the generated
/// kustomization (when the path has none) and the overlay carrying the overrides are files in
/// memory over it. Nothing outside `root` is read.
#[cfg(test)]
pub(super) fn build_objects(
    root: &Path,
    object: &Kustomization,
) -> Result<Vec<Value>, RenderError> {
    build_in(&DiskFs, root, object, None)
}

/// [`build_objects`] on `disk`. The engine sees `root` mounted at `/build/source` and the
/// overlay at `/build/overlay` (beside the source: inside it, building the root would be a
/// cycle), confined to `/build`.
fn build_in(
    disk: &dyn FileSystem,
    root: &Path,
    object: &Kustomization,
    remote: Option<std::sync::Arc<dyn capstan_kustomize::RemoteLoader>>,
) -> Result<Vec<Value>, RenderError> {
    let source = Boundary::new(disk, root);
    let root = source.root();
    let path = resolve_path(root, object.path())?;
    let path = source
        .resolve(disk, &path)
        .ok_or_else(|| RenderError::PathOutside(object.path().to_owned()))?;
    if !disk.is_dir(&path) {
        return Err(RenderError::PathNotFound(object.path().to_owned()));
    }
    check_components(root, &path, object)?;
    let build_root = Path::new(BUILD_ROOT);
    let mounted = build_root.join(SOURCE_DIR);
    let relative = path.strip_prefix(root).unwrap_or(Path::new(""));
    let build_path = mounted.join(relative);
    let mut fs = OverlayFs::mounted(disk, root, &mounted);
    if !find_kustomization(disk, &path, &source, object.path())? {
        let mut resources = Vec::new();
        manifest_resources(disk, &path, &path, &source, &mut resources)?;
        let generated = serde_json::json!({
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": resources,
        });
        if std::fs::symlink_metadata(path.join("kustomization.yaml")).is_ok() {
            return Err(RenderError::GeneratedKustomization(join_relative(
                object.path().trim_end_matches('/'),
                "kustomization.yaml",
            )));
        }
        fs.insert(build_path.join("kustomization.yaml"), generated.to_string());
    }
    let resource = Path::new("..").join(SOURCE_DIR).join(relative);
    let resource = resource.to_string_lossy().trim_end_matches('/').to_owned();
    let build_dir = match overlay_kustomization(object, &resource) {
        Some(overlay) => {
            let dir = build_root.join(OVERLAY_DIR);
            fs.insert(dir.join("kustomization.yaml"), overlay.to_string());
            dir
        }
        None => build_path,
    };
    let options = capstan_kustomize::BuildOptions {
        boundary: Some(build_root.to_path_buf()),
        remote,
        ..capstan_kustomize::BuildOptions::default()
    };
    capstan_kustomize::build_with(&fs, &build_dir, &options).map_err(|error| {
        // Paths are shown relative to the source (the overlay relative to the build).
        let message = capstan_source::redact::error_chain(&error)
            .replace(&format!("{}/", mounted.display()), "")
            .replace(&format!("{}/", build_root.display()), "");
        RenderError::Build {
            message,
            error: Box::new(error),
        }
    })
}

/// Refuses `spec.components` entries leaving the source (they are relative to `spec.path`).
fn check_components(root: &Path, path: &Path, object: &Kustomization) -> Result<(), RenderError> {
    for component in &object.spec.components {
        let mut resolved = path.to_path_buf();
        let mut inside = !Path::new(component).is_absolute();
        for part in Path::new(component).components() {
            match part {
                Component::Normal(name) => resolved.push(name),
                Component::ParentDir => {
                    inside &= resolved.pop() && resolved.starts_with(root);
                }
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
        if !inside || !resolved.starts_with(root) {
            return Err(RenderError::ComponentOutside(component.clone()));
        }
    }
    Ok(())
}

pub(super) fn substitution_disabled(object: &Value) -> bool {
    let metadata = object.get("metadata");
    ["annotations", "labels"].iter().any(|field| {
        metadata
            .and_then(|m| m.get(field))
            .and_then(|m| m.get(SUBSTITUTE_ANNOTATION))
            .and_then(Value::as_str)
            == Some("disabled")
    })
}

/// Why a document no longer parses after substitution, without its text: the line and
/// column, and the variables that may have broken it.
fn redacted_parse_error(
    text: &str,
    placed: &[Placed],
    error: &capstan_kustomize::YamlError,
) -> String {
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    // Suspects: values on the error's line or the one before, and values before it holding
    // characters that change the YAML's structure (a flow collection or quote they open may
    // only fail lines later).
    let structural = |range: &Range<usize>| {
        text.get(range.clone()).is_some_and(|value| {
            value.contains(": ")
                || value.contains(" #")
                || value.contains([
                    '\n', '{', '}', '[', ']', '"', '\'', '`', '&', '*', '!', '|', '>', '%', '@',
                ])
        })
    };
    let near = |range: &Range<usize>| match error.line.and_then(|l| usize::try_from(l).ok()) {
        Some(line) => {
            let (first, last) = (line_of(range.start), line_of(range.end));
            first <= line && (last + 1 >= line || structural(range))
        }
        None => true,
    };
    let mut names: Vec<&str> = Vec::new();
    for (range, name) in placed {
        if near(range) && !names.contains(&name.as_str()) {
            names.push(name);
        }
    }
    let at = match (error.line, error.column) {
        (Some(line), Some(column)) => format!(" at line {line}, column {column}"),
        (Some(line), None) => format!(" at line {line}"),
        _ => String::new(),
    };
    let variables = if names.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = names.iter().map(|n| format!("${{{n}}}")).collect();
        format!(" (substituted there: {})", names.join(", "))
    };
    format!(
        "the yaml after substitution is invalid{at}{variables}; the excerpt is withheld as it may hold secret values"
    )
}

/// `message` with quoted text (`"…"`, `` `…` ``, `'…'`) replaced, for errors about an
/// object holding substituted values.
fn redact_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut open: Option<char> = None;
    for c in message.chars() {
        match open {
            Some(quote) if c == quote => {
                out.push_str("<redacted>");
                out.push(c);
                open = None;
            }
            Some(_) => {}
            None => {
                out.push(c);
                if matches!(c, '"' | '`') {
                    open = Some(c);
                }
            }
        }
    }
    if open.is_some() {
        out.push_str("<redacted>");
    }
    out
}

pub(super) fn describe_value(object: &Value) -> String {
    let field = |path: &[&str]| {
        let mut value = object;
        for key in path {
            value = value.get(key).unwrap_or(&Value::Null);
        }
        value.as_str().unwrap_or_default().to_owned()
    };
    let namespace = field(&["metadata", "namespace"]);
    let name = field(&["metadata", "name"]);
    if namespace.is_empty() {
        format!("{}/{name}", field(&["kind"]))
    } else {
        format!("{}/{namespace}/{name}", field(&["kind"]))
    }
}

/// Substitutes variables, adds `commonMetadata` and converts to API objects.
/// Adds `labels` and `annotations` to `metadata` (overriding existing keys).
fn add_common_metadata(
    value: &mut Value,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) {
    let Some(object) = value.as_object_mut() else {
        return;
    };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    for (field, entries) in [("labels", labels), ("annotations", annotations)] {
        if entries.is_empty() {
            continue;
        }
        let map = metadata
            .entry(field)
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(map) = map.as_object_mut() {
            for (key, entry) in entries {
                map.insert(key.clone(), Value::String(entry.clone()));
            }
        }
    }
}

pub(super) fn finish_objects(
    objects: Vec<Value>,
    object: &Kustomization,
    variables: Option<&BTreeMap<String, String>>,
) -> Result<Vec<DynamicObject>, RenderError> {
    let common = object.spec.common_metadata.as_ref();
    // Flux substitutes only when some variable is defined, unless `substituteStrategy: Always`
    // (so `${A:=b}` without variables, or a stray `$$`, stays as written by default).
    let variables = variables.filter(|variables| {
        !variables.is_empty() || object.substitute_strategy() == SubstituteStrategy::Always
    });
    // A variable name Flux refuses fails the first object substituted (objects whose
    // substitution is disabled are not looked at, as in Flux); looked for once, not per object.
    let invalid_name = variables.and_then(|variables| {
        variables.keys().find(|name| {
            !(name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        })
    });
    let mut finished = Vec::with_capacity(objects.len());
    for mut value in objects {
        // `commonMetadata` is part of the build (Flux adds it in the generated kustomization),
        // so substitution sees it: `${var}` in its values is replaced, and its annotations can
        // turn substitution off.
        if let Some(common) = common {
            add_common_metadata(&mut value, &common.labels, &common.annotations);
        }
        let mut substituted = false;
        if let Some(variables) = variables
            && !substitution_disabled(&value)
        {
            let failed = |source: PostBuildError| RenderError::PostBuild {
                object: describe_value(&value),
                source,
            };
            if let Some(name) = invalid_name {
                return Err(failed(PostBuildError::InvalidVariableName(name.clone())));
            }
            let text = capstan_kustomize::to_yaml_document(&value);
            let (replaced, placed) =
                substitute_tracked(&text, variables, false).map_err(|e| failed(e.into()))?;
            substituted = !placed.is_empty();
            // Most objects hold no expression: their text comes back unchanged and their value
            // stands, without a second YAML parse.
            if replaced != text {
                let mut documents =
                    capstan_kustomize::parse_documents_located(&replaced).map_err(|e| {
                        failed(PostBuildError::InvalidYaml(redacted_parse_error(
                            &replaced, &placed, &e,
                        )))
                    })?;
                if documents.len() != 1 {
                    return Err(failed(PostBuildError::DocumentCount));
                }
                value = documents.remove(0);
            }
        }
        let description = describe_value(&value);
        let dynamic: DynamicObject = serde_json::from_value(value).map_err(|e| {
            let why = e.to_string();
            let why = if substituted {
                redact_quoted(&why)
            } else {
                why
            };
            RenderError::NotAnObject {
                object: description,
                reason: why,
            }
        })?;
        finished.push(dynamic);
    }
    Ok(finished)
}

#[cfg(test)]
mod tests {
    use capstan_source::redact::error_chain;

    use super::*;

    const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: apps\ndata:\n  a: b\n";

    fn kustomization(spec: &Value) -> Kustomization {
        let mut full = serde_json::json!({
            "interval": "1m",
            "prune": true,
            "sourceRef": {"kind": "GitRepository", "name": "source"},
        });
        if let (Some(full), Some(spec)) = (full.as_object_mut(), spec.as_object()) {
            full.extend(spec.clone());
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "k", "namespace": "apps"},
            "spec": full,
        }))
        .unwrap()
    }

    /// A build directory `build/` (as the controller makes one) holding the source in
    /// `build/source`, and `host/` beside it standing for the rest of the machine. Paths
    /// starting with `source/` are written in the build directory.
    struct Work(tempfile::TempDir);

    impl Work {
        fn new(files: &[(&str, &str)]) -> Self {
            let work = Work(tempfile::tempdir().unwrap());
            std::fs::create_dir_all(work.root()).unwrap();
            for (path, text) in files {
                work.write(path, text);
            }
            work
        }
        fn root(&self) -> PathBuf {
            self.0.path().join("build/source")
        }
        fn path(&self, path: &str) -> PathBuf {
            if path.starts_with("source/") {
                self.0.path().join("build").join(path)
            } else {
                self.0.path().join(path)
            }
        }
        fn write(&self, path: &str, text: &str) {
            let path = self.path(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        fn link(&self, target: &Path, link: &str) {
            std::os::unix::fs::symlink(target, self.path(link)).unwrap();
        }
        fn build(&self, spec: &Value) -> Result<Vec<Value>, String> {
            build_objects(&self.root(), &kustomization(spec)).map_err(|e| error_chain(&e))
        }
    }

    fn assert_no_host(message: &str, work: &Work) {
        let host = work.0.path().display().to_string();
        assert!(!message.contains(&host), "{message} shows a host path");
        assert!(!message.contains("stolen"), "{message} shows host content");
    }

    #[test]
    fn a_file_that_does_not_parse_fails_the_build_naming_it() {
        for (name, text) in [
            (
                "duplicate",
                "apiVersion: v1\nkind: ConfigMap\nkind: Secret\nmetadata: {name: x}\n",
            ),
            (
                "flow",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: ${VAR}}\n",
            ),
            (
                "typo",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n data: 1\n",
            ),
            (
                "deep",
                &format!("{}1{}\n", "[".repeat(400), "]".repeat(400)),
            ),
            ("values", "replicas: 3\n"),
            ("nokind", "apiVersion: v1\nmetadata: {name: x}\n"),
        ] {
            let file = format!("source/apps/sub/{name}.yml");
            let work = Work::new(&[("source/apps/cm.yaml", CM), (&file, text)]);
            let error = work
                .build(&serde_json::json!({"path": "./apps"}))
                .unwrap_err();
            assert!(
                error.contains(&format!(
                    "failed to decode Kubernetes YAML from 'sub/{name}.yml'"
                )),
                "{name}: {error}"
            );
            assert_no_host(&error, &work);
            assert!(
                !work.root().join("apps/kustomization.yaml").exists(),
                "{name}: nothing generated"
            );
        }
    }

    #[test]
    fn json_and_other_files_are_not_listed_as_flux_does() {
        let work = Work::new(&[
            ("source/apps/cm.yaml", CM),
            ("source/apps/package.json", "{\"name\": \"x\"}"),
            ("source/apps/README.md", "docs: [x"),
            ("source/apps/empty.yaml", "---\n"),
            ("source/apps/.hidden.yaml", "not: [valid"),
        ]);
        let objects = work.build(&serde_json::json!({"path": "./apps"})).unwrap();
        assert_eq!(objects.len(), 1);
    }

    #[test]
    fn links_out_of_the_source_are_refused_alike() {
        let mut messages = Vec::new();
        for target in ["host/secret.yaml", "host/missing.yaml"] {
            let work = Work::new(&[
                ("source/apps/cm.yaml", CM),
                (
                    "host/secret.yaml",
                    "apiVersion: v1\nkind: Secret\nmetadata: {name: stolen}\n",
                ),
            ]);
            work.link(&work.0.path().join(target), "source/apps/link.yaml");
            let error = work
                .build(&serde_json::json!({"path": "./apps"}))
                .unwrap_err();
            assert!(error.contains("'link.yaml'"), "{error}");
            assert_no_host(&error, &work);
            messages.push(error);
        }
        assert_eq!(messages[0], messages[1]);
    }

    #[test]
    fn spec_path_through_a_link_out_is_refused() {
        let work = Work::new(&[("host/apps/cm.yaml", CM)]);
        work.link(&work.0.path().join("host/apps"), "source/apps");
        let error = work
            .build(&serde_json::json!({"path": "./apps"}))
            .unwrap_err();
        assert!(error.contains("must stay inside the source"), "{error}");
        assert!(!work.0.path().join("host/apps/kustomization.yaml").exists());
    }

    #[test]
    fn a_dangling_kustomization_link_is_not_written_through() {
        let work = Work::new(&[("source/apps/cm.yaml", CM)]);
        let outside = work.0.path().join("host/kustomization.yaml");
        std::fs::create_dir_all(outside.parent().unwrap()).unwrap();
        work.link(&outside, "source/apps/kustomization.yaml");
        let error = work
            .build(&serde_json::json!({"path": "./apps"}))
            .unwrap_err();
        assert!(error.contains("kustomization.yaml"), "{error}");
        assert!(!outside.exists(), "the build wrote outside the source");
        assert_no_host(&error, &work);
    }

    #[test]
    fn directories_and_components_outside_the_source_are_refused() {
        let host = [
            ("host/dir/kustomization.yaml", "resources: [cm.yaml]\n"),
            (
                "host/dir/cm.yaml",
                "apiVersion: v1\nkind: Secret\nmetadata: {name: stolen}\n",
            ),
            (
                "host/c/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonLabels: {stolen: x}\n",
            ),
        ];
        for (kustomization, spec) in [
            (
                "resources: [../../../host/dir]\n",
                serde_json::json!({"path": "./apps"}),
            ),
            (
                "resources: [cm.yaml]\ncomponents: [../../../host/c]\n",
                serde_json::json!({"path": "./apps"}),
            ),
            (
                "resources: [cm.yaml]\n",
                serde_json::json!({"path": "./apps", "components": ["../../../host/c"]}),
            ),
        ] {
            let mut messages = Vec::new();
            for with_host in [true, false] {
                let mut files = vec![
                    ("source/apps/kustomization.yaml", kustomization),
                    ("source/apps/cm.yaml", CM),
                ];
                if with_host {
                    files.extend(host);
                }
                let work = Work::new(&files);
                let error = work.build(&spec).unwrap_err();
                assert!(error.contains("outside the root of the source"), "{error}");
                assert_no_host(&error, &work);
                messages.push(error);
            }
            assert_eq!(messages[0], messages[1], "existence must not show");
        }
    }

    /// Every path under `dir` (links not followed), with the file contents.
    fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut pending = vec![dir.to_path_buf()];
        while let Some(current) = pending.pop() {
            for entry in std::fs::read_dir(&current).unwrap() {
                let entry = entry.unwrap();
                let path = entry.path();
                let kind = entry.file_type().unwrap();
                let contents = if kind.is_file() {
                    std::fs::read(&path).unwrap()
                } else {
                    Vec::new()
                };
                if kind.is_dir() {
                    pending.push(path.clone());
                }
                out.push((path.strip_prefix(dir).unwrap().to_path_buf(), contents));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn the_build_writes_nothing_into_its_directory() {
        let work = Work::new(&[
            ("source/apps/cm.yaml", CM),
            (
                "source/apps/sub/other.yaml",
                &CM.replace("name: cm", "name: other"),
            ),
            ("source/base/kustomization.yaml", "resources: [cm.yaml]\n"),
            ("source/base/cm.yaml", &CM.replace("name: cm", "name: base")),
        ]);
        let build = work.0.path().join("build");
        let before = tree(&build);
        let objects = work
            .build(&serde_json::json!({"path": "./apps", "targetNamespace": "prod", "namePrefix": "p-"}))
            .unwrap();
        assert_eq!(describe_value(&objects[0]), "ConfigMap/prod/p-cm");
        assert_eq!(describe_value(&objects[1]), "ConfigMap/prod/p-other");
        let objects = work.build(&serde_json::json!({"path": "./"})).unwrap();
        let names: Vec<_> = objects.iter().map(describe_value).collect();
        assert_eq!(
            names,
            [
                "ConfigMap/apps/base",
                "ConfigMap/apps/cm",
                "ConfigMap/apps/other"
            ]
        );
        assert_eq!(tree(&build), before, "the build wrote into its directory");
    }

    #[test]
    fn a_local_render_reads_in_place_without_git() {
        let work = Work::new(&[
            ("source/apps/cm.yaml", CM),
            ("source/.git/config", "[core]\n"),
            (
                "source/apps/.git/cm.yaml",
                &CM.replace("name: cm", "name: git"),
            ),
        ]);
        let root = work.root();
        let before = tree(work.0.path());
        let object = kustomization(&serde_json::json!({"path": "./apps", "nameSuffix": "-s"}));
        let objects = render_local(&root, &object, None).unwrap();
        let names: Vec<_> = objects.iter().map(|o| o.metadata.name.clone()).collect();
        assert_eq!(names, [Some("cm-s".to_owned())]);
        work.write(
            "source/apps/kustomization.yaml",
            "resources: [cm.yaml, .git/cm.yaml]\n",
        );
        let error = error_chain(&render_local(&root, &object, None).unwrap_err());
        assert!(error.contains(".git/cm.yaml"), "{error}");
        assert_no_host(&error, &work);
        std::fs::remove_file(work.path("source/apps/kustomization.yaml")).unwrap();
        let object = kustomization(&serde_json::json!({"path": "./.git"}));
        let error = error_chain(&render_local(&root, &object, None).unwrap_err());
        assert!(error.contains("not found"), "{error}");
        assert_eq!(
            tree(work.0.path()),
            before,
            "the render wrote into the source"
        );
    }

    #[test]
    fn a_local_render_follows_absolute_links_inside_the_source() {
        let work = Work::new(&[("source/apps/files/cm.txt", CM)]);
        let root = work.root();
        work.link(&root.join("apps/files/cm.txt"), "source/apps/cm.yaml");
        let object = kustomization(&serde_json::json!({"path": "./apps"}));
        let objects = render_local(&root, &object, None).unwrap();
        assert_eq!(objects.len(), 1);
        work.write("source/apps/kustomization.yaml", "resources: [cm.yaml]\n");
        let objects = render_local(&root, &object, None).unwrap();
        assert_eq!(objects[0].metadata.name.as_deref(), Some("cm"));
    }

    fn finish(value: &Value, variables: &[(&str, &str)]) -> Result<Vec<DynamicObject>, String> {
        let object = kustomization(&serde_json::json!({}));
        let variables: BTreeMap<String, String> = variables
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        finish_objects(vec![value.clone()], &object, Some(&variables)).map_err(|e| error_chain(&e))
    }

    #[test]
    fn without_variables_substitution_runs_only_with_the_always_strategy() {
        let value = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "apps"},
            "data": {"level": "${LEVEL:=info}", "cost": "$$5"},
        });
        let data = |objects: Vec<DynamicObject>| objects[0].data["data"].clone();
        let none = BTreeMap::new();
        let default = kustomization(&serde_json::json!({"postBuild": {}}));
        let kept = finish_objects(vec![value.clone()], &default, Some(&none)).unwrap();
        assert_eq!(
            data(kept),
            serde_json::json!({"level": "${LEVEL:=info}", "cost": "$$5"})
        );
        let always = kustomization(&serde_json::json!({
            "postBuild": {"substituteStrategy": "Always"},
        }));
        let substituted = finish_objects(vec![value], &always, Some(&none)).unwrap();
        assert_eq!(
            data(substituted),
            serde_json::json!({"level": "info", "cost": "$5"})
        );
    }

    #[test]
    fn substituted_values_never_appear_in_parse_errors() {
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "apps"},
            "data": {"plain": "${plain}", "password": "${password}"},
        });
        for value in [
            "MARKER-s3cr3t: with a colon",
            "MARKER-s3cr3t\n  broken: [indent",
            "\"MARKER-s3cr3t",
            "{MARKER-s3cr3t",
        ] {
            let error = finish(&object, &[("plain", "x"), ("password", value)]).unwrap_err();
            assert!(!error.contains("MARKER"), "{error}");
            assert!(error.contains("ConfigMap/apps/cm"), "{error}");
            assert!(error.contains("line "), "{error}");
            assert!(error.contains("${password}"), "{value:?}: {error}");
        }
    }

    #[test]
    fn variable_names_flux_refuses_fail_the_build() {
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "apps"},
            "data": {"a": "${ok_1}"},
        });
        for name in ["my-key", "1st", "é", ""] {
            let error = finish(&object, &[("ok_1", "x"), (name, "MARKER")]).unwrap_err();
            assert!(
                error.contains(&format!("'{name}' var name is invalid")),
                "{error}"
            );
            assert!(!error.contains("MARKER"), "{error}");
        }
        assert!(finish(&object, &[("ok_1", "x"), ("_B2", "y")]).is_ok());
        // Objects whose substitution is disabled are not looked at, as in Flux.
        let mut disabled = object.clone();
        disabled["metadata"]["annotations"] =
            serde_json::json!({SUBSTITUTE_ANNOTATION: "disabled"});
        assert!(finish(&disabled, &[("my-key", "x")]).is_ok());
    }

    #[test]
    fn substituted_values_never_appear_in_object_errors() {
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": "${meta}",
        });
        let error = finish(&object, &[("meta", "MARKER-s3cr3t")]).unwrap_err();
        assert!(!error.contains("MARKER"), "{error}");
        assert!(error.contains("not a Kubernetes object"), "{error}");
    }
}
