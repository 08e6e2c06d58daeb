//! Rendering a Kustomization's `spec.path` the way kustomize-controller does: a generated
//! kustomization when the path has none, Flux's overrides (`targetNamespace`, `namePrefix`,
//! `nameSuffix`, `patches`, `images`, `components`) in an overlay on top, then
//! `postBuild` substitutions and `commonMetadata`.
//!
//! Used by the reconciler (on an extracted artifact) and by `capstan build kustomization`
//! (on a local directory, through [`render_local`]).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use capstan_api::Kustomization;
use kube::api::DynamicObject;
use serde_json::Value;

use super::{OVERLAY_DIR, SUBSTITUTE_ANNOTATION};

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Renders `object` from a source tree at `root`, which it may write into (a generated
/// kustomization); the overlay carrying the overrides is written beside `root`. Errors name
/// the file or object at fault.
pub fn render(
    root: &Path,
    object: &Kustomization,
    variables: Option<&BTreeMap<String, String>>,
) -> Result<Vec<DynamicObject>, String> {
    let objects = build_objects(root, object)?;
    finish_objects(objects, object, variables)
}

/// Renders `object` from a local source directory without writing into it: the directory
/// (without `.git`) is copied into a temporary one first.
pub fn render_local(
    source: &Path,
    object: &Kustomization,
    variables: Option<&BTreeMap<String, String>>,
) -> Result<Vec<DynamicObject>, String> {
    let work =
        tempfile::tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let root = work.path().join("source");
    copy_tree(source, &root).map_err(|e| format!("cannot copy '{}': {e}", source.display()))?;
    render(&root, object, variables)
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        let kind = entry.file_type()?;
        let target = to.join(&name);
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        } else if kind.is_symlink() {
            // Kept as links: the kustomize engine refuses links leaving the root.
            #[cfg(unix)]
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        }
    }
    Ok(())
}

/// `path` joined to `root`, refusing absolute paths and `..` components.
pub(super) fn resolve_path(root: &Path, path: &str) -> Result<PathBuf, String> {
    let mut resolved = root.to_path_buf();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => resolved.push(part),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                return Err(format!("spec.path '{path}' must stay inside the source"));
            }
        }
    }
    Ok(resolved)
}

pub(super) fn has_kustomization(dir: &Path) -> bool {
    KUSTOMIZATION_FILES.iter().any(|f| dir.join(f).is_file())
}

/// Whether a YAML file holds Kubernetes objects (every document has `apiVersion` and `kind`).
pub(super) fn is_manifest(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    capstan_kustomize::parse_documents(&text).is_ok_and(|docs| {
        !docs.is_empty()
            && docs
                .iter()
                .all(|d| d.get("apiVersion").is_some() && d.get("kind").is_some())
    })
}

/// The resources of a generated kustomization for `dir`: subdirectories holding a
/// kustomization, and manifest files, recursively, relative to `dir`, sorted.
pub(super) fn manifest_resources(
    dir: &Path,
    base: &Path,
    out: &mut Vec<String>,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let relative = path
            .strip_prefix(base)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden {
            continue;
        }
        if path.is_dir() {
            if has_kustomization(&path) {
                out.push(relative);
            } else {
                manifest_resources(&path, base, out)?;
            }
        } else if path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
            && is_manifest(&path)
        {
            out.push(relative);
        }
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

/// Builds `spec.path` inside the extracted artifact at `root` (which it may write into); the
/// overlay carrying the overrides is written beside `root`, in `overlay/`.
pub(super) fn build_objects(root: &Path, object: &Kustomization) -> Result<Vec<Value>, String> {
    let path = resolve_path(root, object.path())?;
    if !path.is_dir() {
        return Err(format!(
            "kustomization path not found: '{}' does not exist in the source",
            object.path()
        ));
    }
    if !has_kustomization(&path) {
        let mut resources = Vec::new();
        manifest_resources(&path, &path, &mut resources)
            .map_err(|e| format!("cannot list the manifests in '{}': {e}", object.path()))?;
        let generated = serde_json::json!({
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": resources,
        });
        std::fs::write(path.join("kustomization.yaml"), generated.to_string())
            .map_err(|e| format!("cannot write the generated kustomization: {e}"))?;
    }
    // The overlay sits beside the source (inside it, building the root would be a cycle).
    let (Some(parent), Some(root_name)) = (root.parent(), root.file_name()) else {
        return Err("the source directory has no parent".to_owned());
    };
    let relative = path.strip_prefix(root).unwrap_or(&path);
    let resource = Path::new("..").join(root_name).join(relative);
    let resource = resource.to_string_lossy().trim_end_matches('/').to_owned();
    let build_dir = match overlay_kustomization(object, &resource) {
        Some(overlay) => {
            let dir = parent.join(OVERLAY_DIR);
            std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(dir.join("kustomization.yaml"), overlay.to_string()))
                .map_err(|e| format!("cannot write the overlay kustomization: {e}"))?;
            dir
        }
        None => path,
    };
    capstan_kustomize::build(&build_dir, &capstan_kustomize::BuildOptions::default()).map_err(|e| {
        let message = e.to_string();
        let root_text = format!("{}/", root.display());
        format!(
            "kustomize build failed: {}",
            message.replace(&root_text, "")
        )
    })
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

/// Replaces `${name}` and `${name:=default}` (and `${name:-default}`) with values from
/// `variables`; `$${...}` yields a literal `${...}`; undefined variables without a default
/// become empty, as Flux's non-strict substitution does. Errors name an unterminated or
/// malformed expression.
pub fn substitute(text: &str, variables: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        if let Some(escaped) = after.strip_prefix("${") {
            out.push_str("${");
            rest = escaped;
            continue;
        }
        let Some(body_start) = after.strip_prefix('{') else {
            out.push('$');
            rest = after;
            continue;
        };
        let Some(end) = body_start.find('}') else {
            return Err(format!(
                "unterminated variable expression '${{{}'",
                body_start.chars().take(20).collect::<String>()
            ));
        };
        let body = &body_start[..end];
        let (name, default) = match body.find(":=").or_else(|| body.find(":-")) {
            Some(at) => (&body[..at], Some(&body[at + 2..])),
            None => (body, None),
        };
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return Err(format!("invalid variable name '{name}' in '${{{body}}}'"));
        }
        match (variables.get(name), default) {
            (Some(value), _) => out.push_str(value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {}
        }
        rest = &body_start[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
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
) -> Result<Vec<DynamicObject>, String> {
    let common = object.spec.common_metadata.as_ref();
    let mut finished = Vec::with_capacity(objects.len());
    for mut value in objects {
        // `commonMetadata` is part of the build (Flux adds it in the generated kustomization),
        // so substitution sees it: `${var}` in its values is replaced, and its annotations can
        // turn substitution off.
        if let Some(common) = common {
            add_common_metadata(&mut value, &common.labels, &common.annotations);
        }
        if let Some(variables) = variables
            && !substitution_disabled(&value)
        {
            let text = capstan_kustomize::to_yaml_document(&value);
            let replaced = substitute(&text, variables)
                .map_err(|e| format!("post build failed for {}: {e}", describe_value(&value)))?;
            let mut documents = capstan_kustomize::parse_documents(&replaced).map_err(|e| {
                format!(
                    "post build failed for {}: substituted yaml is invalid: {e}",
                    describe_value(&value)
                )
            })?;
            if documents.len() != 1 {
                return Err(format!(
                    "post build failed for {}: substitution changed the number of documents",
                    describe_value(&value)
                ));
            }
            value = documents.remove(0);
        }
        let description = describe_value(&value);
        let dynamic: DynamicObject = serde_json::from_value(value)
            .map_err(|e| format!("{description}: not a Kubernetes object: {e}"))?;
        finished.push(dynamic);
    }
    Ok(finished)
}
