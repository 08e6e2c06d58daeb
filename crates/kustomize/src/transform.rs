//! The builtin transformers: patches, namespace, prefix/suffix, labels, annotations, images,
//! replicas, replacements, and the top-level hash, name-reference, vars and sort steps.

use std::collections::{BTreeMap, HashMap};

use regex::Regex;
use serde_json::{Map, Value};

use crate::build::{Accumulator, Builder, Target, id_of};
use crate::config::TransformerConfig;
use crate::error::Error;
use crate::fieldspec::{self, applies};
use crate::resource::{ResId, Resource, is_cluster_scoped, split_api_version};
use crate::smp::Schemas;
use crate::types::{FieldSpec, Image, Patch, Selector, SortOptions, Var};
use crate::yaml;

/// Runs the kustomization's builtin transformers in kustomize's order.
pub(crate) fn run_builtin_transformers(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    let k = &target.kustomization;
    let file = &target.file;
    let record = |kind: &str, acc: &mut Accumulator| {
        builder.record_transformer(target, kind, &mut acc.resources);
    };
    for entry in &k.patches_strategic_merge {
        let text = load_patch_text(builder, target, entry, "patchesStrategicMerge")?;
        apply_patch(
            &mut acc.resources,
            &builder.schemas,
            &text,
            None,
            &BTreeMap::new(),
        )
        .map_err(|m| Error::invalid(file, "patchesStrategicMerge", m))?;
    }
    if !k.patches_strategic_merge.is_empty() {
        record("PatchStrategicMergeTransformer", acc);
    }
    for patch in &k.patches {
        let text = patch_body(builder, target, patch, "patches")?;
        apply_patch(
            &mut acc.resources,
            &builder.schemas,
            &text,
            patch.target.as_ref(),
            &patch.options,
        )
        .map_err(|m| Error::invalid(file, "patches", m))?;
        record("PatchTransformer", acc);
    }
    if !k.namespace.is_empty() {
        set_namespace(
            &mut acc.resources,
            &k.namespace,
            &acc.config.namespace,
            false,
            "",
        );
        record("NamespaceTransformer", acc);
    }
    if !k.name_prefix.is_empty() {
        add_prefix_suffix(
            &mut acc.resources,
            &k.name_prefix,
            "",
            &acc.config.name_prefix,
        );
        record("PrefixTransformer", acc);
    }
    if !k.name_suffix.is_empty() {
        add_prefix_suffix(
            &mut acc.resources,
            "",
            &k.name_suffix,
            &acc.config.name_suffix,
        );
        record("SuffixTransformer", acc);
    }
    for label in &k.labels {
        let mut specs = label.fields.clone();
        if label.include_selectors {
            merge_specs(&mut specs, &acc.config.common_labels);
        } else {
            if label.include_templates {
                merge_specs(&mut specs, &acc.config.template_labels);
            }
            merge_specs(
                &mut specs,
                &[FieldSpec {
                    path: "metadata/labels".into(),
                    create: true,
                    ..FieldSpec::default()
                }],
            );
        }
        set_map_entries(&mut acc.resources, &label.pairs, &specs);
        record("LabelTransformer", acc);
    }
    if !k.common_labels.is_empty() {
        set_map_entries(
            &mut acc.resources,
            &k.common_labels,
            &acc.config.common_labels,
        );
        record("LabelTransformer", acc);
    }
    if !k.common_annotations.is_empty() {
        set_map_entries(
            &mut acc.resources,
            &k.common_annotations,
            &acc.config.common_annotations,
        );
        record("AnnotationsTransformer", acc);
    }
    for patch in &k.patches_json6902 {
        let text = patch_body(builder, target, patch, "patchesJson6902")?;
        if patch.target.is_none() {
            return Err(Error::invalid(
                file,
                "patchesJson6902",
                "must specify a target for patch",
            ));
        }
        apply_patch(
            &mut acc.resources,
            &builder.schemas,
            &text,
            patch.target.as_ref(),
            &patch.options,
        )
        .map_err(|m| Error::invalid(file, "patchesJson6902", m))?;
        record("PatchJson6902Transformer", acc);
    }
    for replica in &k.replicas {
        set_replicas(
            &mut acc.resources,
            &replica.name,
            replica.count,
            &acc.config.replicas,
        );
        record("ReplicaCountTransformer", acc);
    }
    for image in &k.images {
        set_images(&mut acc.resources, image, &acc.config.images);
        record("ImageTagTransformer", acc);
    }
    for entry in &k.replacements {
        let replacements = match entry {
            crate::types::ReplacementField::Path { path } => builder
                .read_field_documents(target, path, "replacements")?
                .into_iter()
                .flat_map(|d| match d {
                    Value::Array(items) => items,
                    other => vec![other],
                })
                .collect(),
            crate::types::ReplacementField::Inline(value) => vec![value.clone()],
        };
        for replacement in &replacements {
            apply_replacement(&mut acc.resources, replacement)
                .map_err(|m| Error::invalid(file, "replacements", m))?;
        }
    }
    if !k.replacements.is_empty() {
        record("ReplacementTransformer", acc);
    }
    Ok(())
}

fn merge_specs(into: &mut Vec<FieldSpec>, from: &[FieldSpec]) {
    for spec in from {
        if !into.iter().any(|s| {
            s.path == spec.path
                && s.kind == spec.kind
                && s.group == spec.group
                && s.version == spec.version
        }) {
            into.push(spec.clone());
        }
    }
}

fn load_patch_text(
    builder: &Builder<'_>,
    target: &Target,
    entry: &str,
    field: &str,
) -> Result<String, Error> {
    // An entry is an inline patch when it spans lines, or when no such file exists and it
    // reads as YAML.
    let inline = entry.contains('\n')
        || (entry.contains(':')
            && !builder
                .fs
                .exists(&crate::fs::normalize(&target.dir.join(entry))));
    if inline {
        return Ok(entry.to_owned());
    }
    builder.read_field_text(target, entry, field)
}

fn patch_body(
    builder: &Builder<'_>,
    target: &Target,
    patch: &Patch,
    field: &str,
) -> Result<String, Error> {
    match (patch.path.is_empty(), patch.patch.is_empty()) {
        (false, true) => builder.read_field_text(target, &patch.path, field),
        (true, false) => Ok(patch.patch.clone()),
        (false, false) => Err(Error::invalid(
            &target.file,
            field,
            "patch and path can't be set at the same time",
        )),
        (true, true) => Err(Error::invalid(
            &target.file,
            field,
            "must specify one of patch and path",
        )),
    }
}

/// Applies a strategic-merge or JSON 6902 patch (detected from its shape).
pub(crate) fn apply_patch(
    resources: &mut Vec<Resource>,
    schemas: &Schemas,
    text: &str,
    selector: Option<&Selector>,
    options: &BTreeMap<String, bool>,
) -> Result<(), String> {
    let documents = yaml::parse_documents(text).map_err(|m| format!("malformed patch: {m}"))?;
    let allow_name = options.get("allowNameChange").copied().unwrap_or(false);
    let allow_kind = options.get("allowKindChange").copied().unwrap_or(false);
    if documents.len() == 1 && documents[0].is_array() {
        let Some(selector) = selector else {
            return Err("json patch requires a target".into());
        };
        let indexes = select(resources, selector)?;
        for index in indexes {
            let resource = &mut resources[index];
            capstan_patch::json_patch(&mut resource.object, &documents[0])
                .map_err(|e| format!("applying json patch to {}: {e}", resource.current_id()))?;
        }
        return Ok(());
    }
    for patch in &documents {
        if !patch.is_object() {
            return Err("patch document is neither a mapping nor a list of operations".into());
        }
        let indexes = if let Some(selector) = selector {
            select(resources, selector)?
        } else {
            let id = id_of(patch);
            let matches: Vec<usize> = resources
                .iter()
                .enumerate()
                .filter(|(_, r)| r.any_id_matches(&id))
                .map(|(i, _)| i)
                .collect();
            if matches.len() != 1 {
                return Err(format!(
                    "no resource matches strategic merge patch \"{id}\": no matches for Id {id}; failed to find unique target for patch {id}"
                ));
            }
            matches
        };
        let mut deleted = Vec::new();
        for index in indexes {
            let resource = &mut resources[index];
            let (name, namespace, kind) = (
                resource.name().to_owned(),
                resource.namespace().to_owned(),
                resource.kind().to_owned(),
            );
            if allow_name || allow_kind {
                resource.store_previous_id();
            }
            let mut patch = patch.clone();
            if selector.is_some() || !allow_name {
                // the patch's identity only selects; it does not rename
                if let Some(metadata) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
                    if !allow_name {
                        metadata.remove("name");
                    }
                    metadata.remove("namespace");
                }
            }
            if !allow_kind && let Some(map) = patch.as_object_mut() {
                map.remove("kind");
                map.remove("apiVersion");
            }
            let id = resource.current_id();
            let schema = if crate::smp::needs_schema(&patch) {
                schemas.lookup(&id.group, &id.version, &id.kind)
            } else {
                None
            };
            let merged = crate::smp::merge(&resource.object, &patch, schema.as_ref())
                .map_err(|e| format!("applying patch to {id}: {e}"))?;
            if merged.as_object().is_none_or(Map::is_empty) {
                deleted.push(index);
                continue;
            }
            resource.object = merged;
            if !allow_kind && let Some(map) = resource.object.as_object_mut() {
                map.insert("kind".into(), Value::String(kind.clone()));
            }
            if !allow_name {
                resource.set_name(&name);
            }
            resource.set_namespace(&namespace);
        }
        deleted.sort_unstable();
        for index in deleted.into_iter().rev() {
            resources.remove(index);
        }
    }
    Ok(())
}

/// Anchored regular expression for selector fields.
fn anchored(pattern: &str) -> Result<Regex, String> {
    Regex::new(&format!("^(?:{pattern})$"))
        .map_err(|e| format!("bad selector regex {pattern:?}: {e}"))
}

struct SelectorRegex {
    group: Option<Regex>,
    version: Option<Regex>,
    kind: Option<Regex>,
    name: Option<Regex>,
    namespace: Option<Regex>,
}

impl SelectorRegex {
    fn new(selector: &Selector) -> Result<Self, String> {
        let make = |s: &str| {
            if s.is_empty() {
                Ok(None)
            } else {
                anchored(s).map(Some)
            }
        };
        Ok(SelectorRegex {
            group: make(&selector.group)?,
            version: make(&selector.version)?,
            kind: make(&selector.kind)?,
            name: make(&selector.name)?,
            namespace: make(&selector.namespace)?,
        })
    }

    fn matches_gvk(&self, id: &ResId) -> bool {
        self.group.as_ref().is_none_or(|r| r.is_match(&id.group))
            && self
                .version
                .as_ref()
                .is_none_or(|r| r.is_match(&id.version))
            && self.kind.as_ref().is_none_or(|r| r.is_match(&id.kind))
    }

    fn selects(&self, id: &ResId) -> bool {
        self.matches_gvk(id)
            && self.name.as_ref().is_none_or(|r| r.is_match(&id.name))
            && self
                .namespace
                .as_ref()
                .is_none_or(|r| r.is_match(id.effective_namespace()))
    }
}

/// Indexes of the resources a patch selector picks (original or current name/namespace).
pub(crate) fn select(resources: &[Resource], selector: &Selector) -> Result<Vec<usize>, String> {
    let regex = SelectorRegex::new(selector)?;
    let mut out = Vec::new();
    for (index, resource) in resources.iter().enumerate() {
        let current = resource.current_id();
        let original = resource.original_id();
        if let Some(ns) = &regex.namespace
            && !ns.is_match(original.effective_namespace())
            && !ns.is_match(current.effective_namespace())
        {
            continue;
        }
        if let Some(name) = &regex.name
            && !name.is_match(&original.name)
            && !name.is_match(&current.name)
        {
            continue;
        }
        if !regex.matches_gvk(&current) {
            continue;
        }
        if (!selector.label_selector.is_empty()
            && !matches_label_selector(&resource.labels(), &selector.label_selector)?)
            || (!selector.annotation_selector.is_empty()
                && !matches_label_selector(&resource.annotations(), &selector.annotation_selector)?)
        {
            continue;
        }
        out.push(index);
    }
    Ok(out)
}

/// Kubernetes label selector syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`.
pub(crate) fn matches_label_selector(
    labels: &Map<String, Value>,
    selector: &str,
) -> Result<bool, String> {
    let selector = selector.trim();
    if selector.is_empty() {
        return Ok(true);
    }
    let mut terms = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in selector.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    terms.push(current);
    let get = |key: &str| labels.get(key).and_then(Value::as_str);
    for term in terms {
        let term = term.trim();
        let ok = if let Some((key, value)) = term.split_once("!=") {
            get(key.trim()) != Some(value.trim())
        } else if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
            get(key.trim()) == Some(value.trim())
        } else if let Some((key, set)) = term.split_once(" notin ") {
            let values = parse_set(set)?;
            get(key.trim()).is_none_or(|v| !values.iter().any(|x| x == v))
        } else if let Some((key, set)) = term.split_once(" in ") {
            let values = parse_set(set)?;
            get(key.trim()).is_some_and(|v| values.iter().any(|x| x == v))
        } else if let Some(key) = term.strip_prefix('!') {
            get(key.trim()).is_none() && !labels.contains_key(key.trim())
        } else if !term.is_empty() && !term.contains(' ') {
            labels.contains_key(term)
        } else {
            return Err(format!(
                "unable to parse requirement {term:?} of selector {selector:?}"
            ));
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

fn parse_set(set: &str) -> Result<Vec<String>, String> {
    let inner = set
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("set {set:?} must be parenthesised"))?;
    Ok(inner.split(',').map(|s| s.trim().to_owned()).collect())
}

/// The namespace transformer.
pub(crate) fn set_namespace(
    resources: &mut [Resource],
    namespace: &str,
    specs: &[FieldSpec],
    unset_only: bool,
    subjects: &str,
) {
    for resource in resources.iter_mut() {
        if resource.object.as_object().is_none_or(Map::is_empty) {
            continue;
        }
        resource.store_previous_id();
        let id = resource.current_id();
        let set = |v: &mut Value| {
            if !unset_only || v.as_str().is_none_or(str::is_empty) {
                *v = Value::String(namespace.to_owned());
            }
        };
        if !is_cluster_scoped(&id.kind) {
            let _ = fieldspec::visit(&mut resource.object, "metadata/namespace", true, &mut |v| {
                set(v);
                Ok(())
            });
        }
        let is_binding = id.kind == "RoleBinding" || id.kind == "ClusterRoleBinding";
        if is_binding
            && subjects != "none"
            && let Some(list) = resource
                .object
                .get_mut("subjects")
                .and_then(Value::as_array_mut)
        {
            for subject in list {
                let Some(map) = subject.as_object_mut() else {
                    continue;
                };
                let pick = if subjects == "allServiceAccounts" {
                    map.get("kind").and_then(Value::as_str) == Some("ServiceAccount")
                } else {
                    map.get("name").and_then(Value::as_str) == Some("default")
                };
                if pick {
                    let slot = map.entry("namespace").or_insert(Value::Null);
                    set(slot);
                }
            }
        }
        for spec in specs {
            if spec.path == "metadata/namespace" || !applies(spec, &id) {
                continue;
            }
            if spec.path == "metadata/name" && resource.api_version() != "v1" {
                continue;
            }
            if is_binding && spec.path == "subjects/namespace" {
                continue;
            }
            let _ = fieldspec::visit(&mut resource.object, &spec.path, spec.create, &mut |v| {
                set(v);
                Ok(())
            });
        }
    }
}

/// The prefix and suffix transformers.
pub(crate) fn add_prefix_suffix(
    resources: &mut [Resource],
    prefix: &str,
    suffix: &str,
    specs: &[FieldSpec],
) {
    for resource in resources.iter_mut() {
        let original = resource.original_id();
        let skip = original.kind == "CustomResourceDefinition"
            || (original.kind == "APIService" && original.group == "apiregistration.k8s.io")
            || original.kind == "Namespace";
        if skip {
            continue;
        }
        let id = resource.current_id();
        let matching: Vec<&FieldSpec> = specs.iter().filter(|s| applies(s, &id)).collect();
        if matching.is_empty() {
            continue;
        }
        resource.store_previous_id();
        if !prefix.is_empty() {
            resource.prefixes.push(prefix.to_owned());
        }
        if !suffix.is_empty() {
            resource.suffixes.push(suffix.to_owned());
        }
        for spec in matching {
            let _ = fieldspec::visit(&mut resource.object, &spec.path, spec.create, &mut |v| {
                if let Some(s) = v.as_str() {
                    *v = Value::String(format!("{prefix}{s}{suffix}"));
                }
                Ok(())
            });
        }
    }
}

/// Sets string entries in the maps at `specs` (labels, annotations, selectors).
pub(crate) fn set_map_entries(
    resources: &mut [Resource],
    entries: &BTreeMap<String, String>,
    specs: &[FieldSpec],
) {
    if entries.is_empty() {
        return;
    }
    for resource in resources.iter_mut() {
        let id = resource.current_id();
        for spec in specs.iter().filter(|s| applies(s, &id)) {
            let _ = fieldspec::visit(&mut resource.object, &spec.path, spec.create, &mut |v| {
                if v.is_null() {
                    *v = Value::Object(Map::new());
                }
                if let Some(map) = v.as_object_mut() {
                    for (key, value) in entries {
                        map.insert(key.clone(), Value::String(value.clone()));
                    }
                }
                Ok(())
            });
        }
    }
}

/// The replica count transformer.
pub(crate) fn set_replicas(
    resources: &mut [Resource],
    name: &str,
    count: i64,
    specs: &[FieldSpec],
) {
    for resource in resources.iter_mut() {
        let matches =
            resource.current_id().name == name || resource.previous.iter().any(|p| p.name == name);
        if !matches {
            continue;
        }
        let id = resource.current_id();
        for spec in specs.iter().filter(|s| applies(s, &id)) {
            let _ = fieldspec::visit(&mut resource.object, &spec.path, spec.create, &mut |v| {
                *v = Value::from(count);
                Ok(())
            });
        }
    }
}

/// Splits an image reference into name, tag and digest as kustomize does.
pub(crate) fn split_image(image: &str) -> (String, String, String) {
    let slash = image.find('/').filter(|&i| i > 0).unwrap_or(0);
    let search = &image[slash..];
    let at = search.find('@');
    let colon = search.find(':');
    match (at, colon) {
        (Some(at), colon) if colon.is_none_or(|c| at < c) => {
            let at = at + slash;
            (
                image[..at].to_owned(),
                String::new(),
                image[at + 1..].to_owned(),
            )
        }
        (Some(at), Some(colon)) => {
            let (at, colon) = (at + slash, colon + slash);
            (
                image[..colon].to_owned(),
                image[colon + 1..at].to_owned(),
                image[at + 1..].to_owned(),
            )
        }
        (_, Some(colon)) => {
            let colon = colon + slash;
            (
                image[..colon].to_owned(),
                image[colon + 1..].to_owned(),
                String::new(),
            )
        }
        (_, None) => (image.to_owned(), String::new(), String::new()),
    }
}

/// Matches image references naming `name` (kustomize builds the same pattern, unescaped).
fn image_pattern(name: &str) -> Option<Regex> {
    Regex::new(&format!(
        "^{name}(:[a-zA-Z0-9_.{{}}-]*)?(@sha256:[a-zA-Z0-9_.{{}}-]*)?$"
    ))
    .ok()
}

fn rewrite_image(value: &mut Value, image: &Image, pattern: &Regex) {
    let Some(current) = value.as_str() else {
        return;
    };
    if !pattern.is_match(current) {
        return;
    }
    let (mut name, mut tag, mut digest) = split_image(current);
    if !image.new_name.is_empty() {
        name.clone_from(&image.new_name);
    }
    if !image.new_tag.is_empty() && !image.digest.is_empty() {
        tag.clone_from(&image.new_tag);
        digest.clone_from(&image.digest);
    } else if !image.new_tag.is_empty() {
        tag.clone_from(&image.new_tag);
        digest.clear();
    } else if !image.digest.is_empty() {
        tag.clear();
        digest.clone_from(&image.digest);
    }
    if !tag.is_empty() {
        name = format!("{name}:{tag}");
    }
    if !digest.is_empty() {
        name = format!("{name}@{digest}");
    }
    *value = Value::String(name);
}

fn walk_containers(node: &mut Value, image: &Image, pattern: &Regex) {
    match node {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                walk_containers(child, image, pattern);
                if (key == "containers" || key == "initContainers")
                    && let Some(list) = child.as_array_mut()
                {
                    for container in list {
                        if let Some(slot) = container.get_mut("image") {
                            rewrite_image(slot, image, pattern);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                walk_containers(item, image, pattern);
            }
        }
        _ => {}
    }
}

/// The image tag transformer.
pub(crate) fn set_images(resources: &mut [Resource], image: &Image, specs: &[FieldSpec]) {
    // A name that is no valid pattern matches nothing, as in kustomize.
    let Some(pattern) = image_pattern(&image.name) else {
        return;
    };
    for resource in resources.iter_mut() {
        if resource.kind() != "CustomResourceDefinition" {
            walk_containers(&mut resource.object, image, &pattern);
        }
        let id = resource.current_id();
        for spec in specs.iter().filter(|s| applies(s, &id)) {
            let _ = fieldspec::visit(&mut resource.object, &spec.path, false, &mut |v| {
                rewrite_image(v, image, &pattern);
                Ok(())
            });
        }
    }
}

/// Splits a replacement field path on dots, keeping `[a.b=c]` selectors whole.
fn split_field_path(path: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut depth = 0;
    for c in path.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            '.' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    let mut out = Vec::new();
    for part in parts {
        match part.find('[') {
            Some(at) if at > 0 && part.ends_with(']') => {
                out.push(part[..at].to_owned());
                let inner = &part[at + 1..part.len() - 1];
                if inner.contains('=') {
                    out.push(format!("[{inner}]"));
                } else {
                    out.push(inner.to_owned());
                }
            }
            _ => out.push(part),
        }
    }
    out
}

/// Looks up a dotted field path (`spec.containers.[name=x].image`, `a.0.b`).
pub(crate) fn lookup_path<'v>(node: &'v Value, parts: &[String]) -> Option<&'v Value> {
    let Some((first, rest)) = parts.split_first() else {
        return Some(node);
    };
    match node {
        Value::Object(map) => lookup_path(map.get(map_key(first))?, rest),
        Value::Array(items) => {
            if let Some((key, value)) = first
                .strip_prefix('[')
                .and_then(|s| s.strip_suffix(']'))
                .and_then(|s| s.split_once('='))
            {
                let item = items.iter().find(|i| {
                    i.get(key)
                        .is_some_and(|v| scalar_text(v).as_deref() == Some(value))
                })?;
                lookup_path(item, rest)
            } else {
                lookup_path(items.get(first.parse::<usize>().ok()?)?, rest)
            }
        }
        _ => None,
    }
}

/// `[key.with.dots]` names a map key.
fn map_key(segment: &str) -> &str {
    segment
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .filter(|s| !s.contains('='))
        .unwrap_or(segment)
}

fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Visits every node at a dotted path, creating maps when `create` (`*` matches all items).
fn visit_path(
    node: &mut Value,
    parts: &[String],
    create: bool,
    found: &mut usize,
    set: &mut dyn FnMut(&mut Value) -> Result<(), String>,
) -> Result<(), String> {
    let Some((first, rest)) = parts.split_first() else {
        *found += 1;
        return set(node);
    };
    match node {
        Value::Object(map) => {
            let first = &map_key(first).to_owned();
            if !map.contains_key(first.as_str()) {
                if !create {
                    return Ok(());
                }
                let fresh = if rest.is_empty() {
                    Value::Null
                } else if (rest[0].starts_with('[') && rest[0].contains('='))
                    || rest[0].parse::<usize>().is_ok()
                {
                    Value::Array(Vec::new())
                } else {
                    Value::Object(Map::new())
                };
                map.insert(first.clone(), fresh);
            }
            let child = map.get_mut(first.as_str()).expect("present");
            visit_path(child, rest, create, found, set)
        }
        Value::Array(items) => {
            if first == "*" {
                for item in items.iter_mut() {
                    visit_path(item, rest, create, found, set)?;
                }
                return Ok(());
            }
            if let Some((key, value)) = first
                .strip_prefix('[')
                .and_then(|s| s.strip_suffix(']'))
                .and_then(|s| s.split_once('='))
            {
                let mut any = false;
                for item in items.iter_mut() {
                    if item
                        .get(key)
                        .is_some_and(|v| scalar_text(v).as_deref() == Some(value))
                    {
                        any = true;
                        visit_path(item, rest, create, found, set)?;
                    }
                }
                if !any && create {
                    let mut fresh = Map::new();
                    fresh.insert(key.to_owned(), Value::String(value.to_owned()));
                    items.push(Value::Object(fresh));
                    let last = items.last_mut().expect("just pushed");
                    visit_path(last, rest, create, found, set)?;
                }
                return Ok(());
            }
            if let Ok(index) = first.parse::<usize>()
                && let Some(item) = items.get_mut(index)
            {
                return visit_path(item, rest, create, found, set);
            }
            Ok(())
        }
        Value::Null if create => {
            *node = Value::Object(Map::new());
            visit_path(node, parts, create, found, set)
        }
        _ => Ok(()),
    }
}

fn selector_from(value: Option<&Value>) -> Result<Selector, String> {
    let Some(value) = value else {
        return Ok(Selector::default());
    };
    let mut value = value.clone();
    if let Some(map) = value.as_object_mut() {
        map.remove("fieldPath");
        map.remove("options");
    }
    if let Some(map) = value.as_object_mut()
        && let Some(api_version) = map
            .remove("apiVersion")
            .and_then(|v| v.as_str().map(str::to_owned))
    {
        let (group, version) = split_api_version(&api_version);
        map.insert("group".into(), Value::String(group));
        map.insert("version".into(), Value::String(version));
    }
    serde_json::from_value(value).map_err(|e| format!("bad selector: {e}"))
}

fn all_ids(resource: &Resource) -> Vec<ResId> {
    let mut ids = vec![resource.current_id()];
    ids.extend(resource.previous.iter().cloned());
    ids
}

/// One entry of `replacements`.
pub(crate) fn apply_replacement(
    resources: &mut [Resource],
    replacement: &Value,
) -> Result<(), String> {
    let source = replacement
        .get("source")
        .ok_or("replacement has no source")?;
    let selector = selector_from(Some(source))?;
    let mut matches = Vec::new();
    for (index, resource) in resources.iter().enumerate() {
        let hit = all_ids(resource).iter().any(|id| {
            (selector.name.is_empty() || selector.name == id.name)
                && (selector.namespace.is_empty()
                    || selector.namespace == id.effective_namespace()
                    || selector.namespace == id.namespace)
                && id.gvk_selected_by(&selector.group, &selector.version, &selector.kind)
        });
        if hit {
            matches.push(index);
        }
    }
    let index = match matches.as_slice() {
        [one] => *one,
        [] => return Err(format!("nothing selected by source {source}")),
        _ => return Err(format!("multiple matches for source selector {source}")),
    };
    let field_path = source
        .get("fieldPath")
        .and_then(Value::as_str)
        .unwrap_or("metadata.name");
    let mut value = lookup_path(&resources[index].object, &split_field_path(field_path))
        .cloned()
        .ok_or_else(|| {
            format!("fieldPath `{field_path}` is missing for replacement source {source}")
        })?;
    if let Some(options) = source.get("options")
        && let Some(delimiter) = options.get("delimiter").and_then(Value::as_str)
        && !delimiter.is_empty()
    {
        let text =
            scalar_text(&value).ok_or("delimiter option can only be used with scalar nodes")?;
        let index = options.get("index").and_then(Value::as_i64).unwrap_or(0);
        let parts: Vec<&str> = text.split(delimiter).collect();
        let part = usize::try_from(index)
            .ok()
            .and_then(|i| parts.get(i))
            .ok_or_else(|| format!("options.index {index} is out of bounds for value {text}"))?;
        value = Value::String((*part).to_owned());
    }
    for target in replacement
        .get("targets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let select = selector_from(target.get("select"))?;
        if target.get("select").is_none() {
            return Err("target must specify resources to select".into());
        }
        let regex = SelectorRegex::new(&select)?;
        let rejects: Vec<(Selector, SelectorRegex)> = target
            .get("reject")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|r| {
                let s = selector_from(Some(r))?;
                let re = SelectorRegex::new(&s)?;
                Ok((s, re))
            })
            .collect::<Result<_, String>>()?;
        let paths: Vec<String> = target
            .get("fieldPaths")
            .and_then(Value::as_array)
            .map_or_else(
                || vec!["metadata.name".to_owned()],
                |a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                },
            );
        let options = target.get("options");
        let create = options
            .and_then(|o| o.get("create"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        for resource in resources.iter_mut() {
            let (labels, annotations) = (resource.labels(), resource.annotations());
            if !matches_label_selector(&labels, &select.label_selector)?
                || !matches_label_selector(&annotations, &select.annotation_selector)?
            {
                continue;
            }
            let ids = all_ids(resource);
            let mut rejected = false;
            for (reject, re) in &rejects {
                let by_meta = !(reject.label_selector.is_empty()
                    && reject.annotation_selector.is_empty())
                    && matches_label_selector(&labels, &reject.label_selector)?
                    && matches_label_selector(&annotations, &reject.annotation_selector)?;
                let id_fields_set = !(reject.kind.is_empty()
                    && reject.name.is_empty()
                    && reject.namespace.is_empty()
                    && reject.group.is_empty()
                    && reject.version.is_empty());
                if by_meta || (id_fields_set && ids.iter().any(|id| re.selects(id))) {
                    rejected = true;
                }
            }
            if rejected || !ids.iter().any(|id| regex.selects(id)) {
                continue;
            }
            for path in &paths {
                let parts = split_field_path(path);
                let mut found = 0;
                visit_path(
                    &mut resource.object,
                    &parts,
                    create,
                    &mut found,
                    &mut |slot| {
                        set_replacement_value(slot, &value, options);
                        Ok(())
                    },
                )?;
                if found == 0 {
                    return Err(format!(
                        "unable to find field \"{path}\" in replacement target {}",
                        resource.current_id()
                    ));
                }
            }
        }
    }
    Ok(())
}

fn set_replacement_value(slot: &mut Value, value: &Value, options: Option<&Value>) {
    if let Some(options) = options
        && let Some(delimiter) = options.get("delimiter").and_then(Value::as_str)
        && !delimiter.is_empty()
    {
        let current = scalar_text(slot).unwrap_or_default();
        let mut parts: Vec<String> = current.split(delimiter).map(str::to_owned).collect();
        let insert = scalar_text(value).unwrap_or_default();
        let index = options.get("index").and_then(Value::as_i64).unwrap_or(0);
        match usize::try_from(index) {
            Err(_) => parts.insert(0, insert),
            Ok(index) if index >= parts.len() => parts.push(insert),
            Ok(index) => parts[index] = insert,
        }
        *slot = Value::String(parts.join(delimiter));
        return;
    }
    *slot = value.clone();
}

/// Appends hash suffixes to generated objects that want them.
pub(crate) fn add_hash_suffixes(resources: &mut [Resource]) {
    for resource in resources.iter_mut() {
        if !resource.needs_hash {
            continue;
        }
        let hash = crate::generate::hash(&resource.object);
        resource.store_previous_id();
        let name = format!("{}-{hash}", resource.name());
        resource.set_name(&name);
    }
}

struct Candidate {
    previous: Vec<ResId>,
    current: ResId,
    prefixes: Vec<String>,
    suffixes: Vec<String>,
}

fn same_ending(a: &[String], b: &[String]) -> bool {
    let (short, long) = if a.len() > b.len() { (b, a) } else { (a, b) };
    let diff = long.len() - short.len();
    if short.is_empty() {
        return diff == 0;
    }
    short.iter().enumerate().all(|(i, s)| &long[i + diff] == s)
}

fn prefix_suffix_equal(
    a: &Candidate,
    prefixes: &[String],
    suffixes: &[String],
    allow_empty: bool,
) -> bool {
    if allow_empty {
        (a.prefixes.is_empty() || prefixes.is_empty() || same_ending(&a.prefixes, prefixes))
            && (a.suffixes.is_empty() || suffixes.is_empty() || same_ending(&a.suffixes, suffixes))
    } else {
        same_ending(&a.prefixes, prefixes) && same_ending(&a.suffixes, suffixes)
    }
}

struct Referrer<'a> {
    current: ResId,
    prefixes: &'a [String],
    suffixes: &'a [String],
    role_ref: Option<(String, String)>,
}

#[allow(clippy::too_many_arguments)]
fn select_referral<'c>(
    old_name: &str,
    candidates: &[&'c Candidate],
    target: &crate::config::NameBackRef,
    spec: &FieldSpec,
    referrer: &Referrer<'_>,
    check_namespace_too: bool,
) -> Result<Option<&'c Candidate>, String> {
    let mut list: Vec<&Candidate> = candidates
        .iter()
        .copied()
        .filter(|c| c.previous.iter().any(|p| p.name == old_name))
        .filter(|c| {
            c.previous
                .iter()
                .any(|p| p.gvk_selected_by(&target.group, &target.version, &target.kind))
        })
        .collect();
    if spec.path.ends_with("roleRef/name")
        && let Some((group, kind)) = &referrer.role_ref
    {
        list.retain(|c| {
            c.previous
                .iter()
                .any(|p| p.gvk_selected_by(group, "", kind))
        });
    }
    if !is_cluster_scoped(&referrer.current.kind) {
        list.retain(|c| {
            is_cluster_scoped(&c.current.kind)
                || c.current.kind == "ServiceAccount"
                || c.current.effective_namespace() == referrer.current.effective_namespace()
        });
    }
    if list.len() == 1 {
        return Ok(Some(list[0]));
    }
    list.retain(|c| prefix_suffix_equal(c, referrer.prefixes, referrer.suffixes, true));
    if list.len() > 1 {
        list.retain(|c| prefix_suffix_equal(c, referrer.prefixes, referrer.suffixes, false));
    }
    match list.len() {
        0 => Ok(None),
        1 => Ok(Some(list[0])),
        _ => {
            let first = &list[0].current;
            let identical = list.iter().all(|c| {
                c.current.name == first.name
                    && (!check_namespace_too || c.current.namespace == first.namespace)
            });
            if identical {
                Ok(Some(list[0]))
            } else {
                let ids: Vec<String> = list.iter().map(|c| c.current.to_string()).collect();
                Err(format!(
                    "found multiple possible referrals: {}",
                    ids.join(", ")
                ))
            }
        }
    }
}

/// Rewrites references to objects whose names changed (prefix, suffix, hash).
pub(crate) fn fix_name_references(
    resources: &mut [Resource],
    config: &TransformerConfig,
) -> Result<(), String> {
    let candidates: Vec<Candidate> = resources
        .iter()
        .map(|r| Candidate {
            previous: r.previous.clone(),
            current: r.current_id(),
            prefixes: r.prefixes.clone(),
            suffixes: r.suffixes.clone(),
        })
        .collect();
    // Only renamed objects can be referred to by an old name: index them by every name
    // they had, in resource order.
    let mut by_old_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (index, candidate) in candidates.iter().enumerate() {
        let mut names: Vec<&str> = candidate.previous.iter().map(|p| p.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            by_old_name.entry(name).or_default().push(index);
        }
    }
    for (index, resource) in resources.iter_mut().enumerate() {
        let original = resource.original_id();
        let current = &candidates[index].current;
        let role_ref = resource.object.get("roleRef").map(|r| {
            (
                r.get("apiGroup")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                r.get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            )
        });
        let binding_namespaces: Vec<String> =
            if current.kind == "RoleBinding" || current.kind == "ClusterRoleBinding" {
                resource
                    .object
                    .get("subjects")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|s| s.get("kind").and_then(Value::as_str) == Some("ServiceAccount"))
                    .filter_map(|s| {
                        s.get("namespace")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    })
                    .collect()
            } else {
                Vec::new()
            };
        let referrer_cluster_scoped = is_cluster_scoped(&current.kind);
        let possible = |name: &str| -> Vec<&Candidate> {
            by_old_name
                .get(name)
                .into_iter()
                .flatten()
                .map(|&i| &candidates[i])
                .filter(|c| {
                    referrer_cluster_scoped
                        || is_cluster_scoped(&c.current.kind)
                        || c.current.effective_namespace() == current.effective_namespace()
                        || binding_namespaces
                            .iter()
                            .any(|ns| ns == &c.current.namespace)
                })
                .collect()
        };
        let referrer = Referrer {
            current: current.clone(),
            prefixes: &resource.prefixes,
            suffixes: &resource.suffixes,
            role_ref,
        };
        let object = &mut resource.object;
        for target in &config.name_reference {
            for spec in &target.referrers {
                if !original.gvk_selected_by(&spec.group, &spec.version, &spec.kind) {
                    continue;
                }
                fieldspec::visit(object, &spec.path, false, &mut |node| {
                    update_reference(node, &possible, target, spec, &referrer)
                })
                .map_err(|m| {
                    format!(
                        "updating name reference in '{}' field of '{}': {m}",
                        spec.path, current
                    )
                })?;
            }
        }
    }
    Ok(())
}

fn update_reference<'c>(
    node: &mut Value,
    possible: &dyn Fn(&str) -> Vec<&'c Candidate>,
    target: &crate::config::NameBackRef,
    spec: &FieldSpec,
    referrer: &Referrer<'_>,
) -> Result<(), String> {
    match node {
        Value::String(name) => {
            let candidates = possible(name);
            if let Some(found) = select_referral(name, &candidates, target, spec, referrer, false)?
            {
                name.clone_from(&found.current.name);
            }
        }
        Value::Array(items) => {
            for item in items {
                update_reference(item, possible, target, spec, referrer)?;
            }
        }
        Value::Object(map) => {
            let Some(old) = map.get("name").and_then(Value::as_str).map(str::to_owned) else {
                return Ok(());
            };
            let candidates = possible(&old);
            let filtered: Vec<&Candidate> =
                if let Some(ns) = map.get("namespace").and_then(Value::as_str) {
                    let by_original: Vec<&Candidate> = candidates
                        .iter()
                        .copied()
                        .filter(|c| {
                            c.previous
                                .first()
                                .map_or(c.current.effective_namespace(), ResId::effective_namespace)
                                == ns
                        })
                        .collect();
                    if by_original.is_empty() {
                        candidates
                            .iter()
                            .copied()
                            .filter(|c| c.current.effective_namespace() == ns)
                            .collect()
                    } else {
                        by_original
                    }
                } else {
                    candidates
                };
            if let Some(found) = select_referral(&old, &filtered, target, spec, referrer, true)? {
                if found.current.name == old && found.current.namespace.is_empty() {
                    return Ok(());
                }
                map.insert("name".into(), Value::String(found.current.name.clone()));
                if !found.current.namespace.is_empty() {
                    map.insert(
                        "namespace".into(),
                        Value::String(found.current.namespace.clone()),
                    );
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Substitutes `$(VAR)` references.
pub(crate) fn resolve_vars(
    resources: &mut [Resource],
    vars: &[Var],
    config: &TransformerConfig,
) -> Result<(), String> {
    if vars.is_empty() {
        return Ok(());
    }
    let mut values: BTreeMap<String, Value> = BTreeMap::new();
    for var in vars {
        let (group, version) = if var.objref.api_version.is_empty() {
            (var.objref.group.clone(), var.objref.version.clone())
        } else {
            split_api_version(&var.objref.api_version)
        };
        let matches: Vec<&Resource> = resources
            .iter()
            .filter(|r| {
                all_ids(r).iter().any(|id| {
                    id.name == var.objref.name
                        && id.gvk_selected_by(&group, &version, &var.objref.kind)
                        && (var.objref.namespace.is_empty()
                            || var.objref.namespace == id.effective_namespace())
                })
            })
            .collect();
        let resource = match matches.as_slice() {
            [one] => *one,
            [] => {
                return Err(format!(
                    "var '{}' cannot be mapped to a field in the set of known resources",
                    var.name
                ));
            }
            _ => {
                return Err(format!(
                    "found {} resId matches for var '{}' (unable to disambiguate)",
                    matches.len(),
                    var.name
                ));
            }
        };
        let path = var.fieldref.as_ref().map_or("metadata.name", |f| {
            if f.field_path.is_empty() {
                "metadata.name"
            } else {
                &f.field_path
            }
        });
        let value = lookup_path(&resource.object, &split_field_path(path))
            .cloned()
            .ok_or_else(|| {
                format!(
                    "field specified in var '{}' not found in corresponding resource",
                    var.name
                )
            })?;
        values.insert(var.name.clone(), value);
    }
    for resource in resources.iter_mut() {
        let id = resource.current_id();
        for spec in config.var_reference.iter().filter(|s| applies(s, &id)) {
            let _ = fieldspec::visit(&mut resource.object, &spec.path, false, &mut |v| {
                expand_vars(v, &values);
                Ok(())
            });
        }
    }
    Ok(())
}

fn expand_vars(node: &mut Value, values: &BTreeMap<String, Value>) {
    match node {
        Value::String(text) => {
            if let Some(name) = text.strip_prefix("$(").and_then(|t| t.strip_suffix(')'))
                && let Some(value) = values.get(name)
                && !value.is_string()
            {
                *node = value.clone();
                return;
            }
            *text = expand_text(text, values);
        }
        Value::Array(items) => items.iter_mut().for_each(|i| expand_vars(i, values)),
        Value::Object(map) => map.values_mut().for_each(|v| expand_vars(v, values)),
        _ => {}
    }
}

fn expand_text(text: &str, values: &BTreeMap<String, Value>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("$(") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find(')') {
            Some(end) if values.contains_key(&after[..end]) => {
                let value = &values[&after[..end]];
                out.push_str(&scalar_text(value).unwrap_or_else(|| value.to_string()));
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("$(");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

const ORDER_FIRST: &[&str] = &[
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "CustomResourceDefinition",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
];
const ORDER_LAST: &[&str] = &[
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

fn legacy_gvk(id: &ResId) -> String {
    let or = |s: &str, d: &str| {
        if s.is_empty() {
            d.to_owned()
        } else {
            s.to_owned()
        }
    };
    format!(
        "{}_{}_{}",
        or(&id.group, "~G"),
        or(&id.version, "~V"),
        or(&id.kind, "~K")
    )
}

fn gvk_string(id: &ResId) -> String {
    let group = if id.group.is_empty() {
        "[noGrp]"
    } else {
        &id.group
    };
    format!("{}.{}.{}", id.kind, id.version, group)
}

/// Orders the output (`legacy` by default, or `fifo`).
pub(crate) fn sort(
    resources: &mut Vec<Resource>,
    options: Option<&SortOptions>,
) -> Result<(), String> {
    let (first, last): (Vec<String>, Vec<String>) = match options {
        Some(options) if options.order == "fifo" => {
            if options.legacy_sort_options.is_some() {
                return Err("the field 'sortOptions.legacySortOptions' is set but the selected sort order is 'fifo', not 'legacy'".into());
            }
            return Ok(());
        }
        Some(options) if options.order == "legacy" => match &options.legacy_sort_options {
            Some(legacy) => (legacy.order_first.clone(), legacy.order_last.clone()),
            None => (to_strings(ORDER_FIRST), to_strings(ORDER_LAST)),
        },
        Some(options) => {
            return Err(format!(
                "the field 'sortOptions.order' must be one of [fifo, legacy], not {:?}",
                options.order
            ));
        }
        None => (to_strings(ORDER_FIRST), to_strings(ORDER_LAST)),
    };
    // (-1, i) for the i-th kind of `first`, (1, i) for `last`, (0, 0) for every other kind.
    let mut orders: BTreeMap<&str, (i8, usize)> = BTreeMap::new();
    for (i, kind) in first.iter().enumerate() {
        orders.insert(kind, (-1, i));
    }
    for (i, kind) in last.iter().enumerate() {
        orders.insert(kind, (1, i));
    }
    let mut keyed: Vec<(ResId, String, String, Resource)> = std::mem::take(resources)
        .into_iter()
        .map(|resource| {
            let id = resource.current_id();
            let ns = if id.namespace.is_empty() {
                "~X"
            } else {
                &id.namespace
            };
            let name = if id.name.is_empty() { "~N" } else { &id.name };
            let key = format!("{}|{ns}|{name}", gvk_string(&id));
            let legacy = legacy_gvk(&id);
            (id, key, legacy, resource)
        })
        .collect();
    keyed.sort_by(|(x, x_key, x_legacy, _), (y, y_key, y_legacy, _)| {
        let same_gvk = x.group == y.group && x.version == y.version && x.kind == y.kind;
        if !same_gvk {
            let (ox, oy) = (
                orders.get(x.kind.as_str()).copied().unwrap_or_default(),
                orders.get(y.kind.as_str()).copied().unwrap_or_default(),
            );
            if ox != oy {
                return ox.cmp(&oy);
            }
            if x.kind == "Namespace"
                && y.kind == "Namespace"
                && (x.group.is_empty() || y.group.is_empty())
            {
                return y_legacy.cmp(x_legacy);
            }
            return x_legacy.cmp(y_legacy);
        }
        x_key.cmp(y_key)
    });
    resources.extend(keyed.into_iter().map(|(_, _, _, resource)| resource));
    Ok(())
}

fn to_strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Name-reference configuration from a CRD's `x-kubernetes-object-ref-*` schema extensions.
pub(crate) fn config_from_crd(document: &Value) -> TransformerConfig {
    let mut config = TransformerConfig::default();
    let kind = document
        .pointer("/spec/names/kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let versions: Vec<&Value> = document
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    let mut schemas = Vec::new();
    for version in versions {
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema") {
            schemas.push(schema);
        }
    }
    if let Some(schema) = document.pointer("/spec/validation/openAPIV3Schema") {
        schemas.push(schema);
    }
    // kustomize's legacy OpenAPI definitions format: {"definitions": {...}}
    for schema in schemas {
        collect_refs(schema, &kind, &mut Vec::new(), &mut config);
    }
    // kustomize's legacy CRD format: {"<pkg>.Kind": {"Schema": {...}}, ...} with `$ref`s between entries.
    if let Some(all) = document.as_object()
        && document.get("kind").is_none()
    {
        for (name, definition) in all {
            let Some(schema) = definition.get("Schema") else {
                continue;
            };
            let is_root = schema.pointer("/properties/kind").is_some()
                && schema.pointer("/properties/apiVersion").is_some();
            if !is_root {
                continue;
            }
            let kind = name.rsplit('.').next().unwrap_or("").to_owned();
            collect_legacy_refs(all, schema, &kind, &mut Vec::new(), &mut config, 0);
        }
    }
    if let Some(definitions) = document.get("definitions").and_then(Value::as_object) {
        for definition in definitions.values() {
            let kind = definition
                .pointer("/x-kubernetes-group-version-kind/0/kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            collect_refs(definition, &kind, &mut Vec::new(), &mut config);
        }
    }
    config
}

fn collect_legacy_refs(
    all: &Map<String, Value>,
    schema: &Value,
    kind: &str,
    path: &mut Vec<String>,
    config: &mut TransformerConfig,
    depth: usize,
) {
    if depth > 16 {
        return;
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        if name == "metadata" || name == "apiVersion" || name == "kind" {
            continue;
        }
        path.push(name.clone());
        let ref_kind = property
            .get("x-kubernetes-object-ref-kind")
            .and_then(Value::as_str);
        let ref_version = property
            .get("x-kubernetes-object-ref-api-version")
            .and_then(Value::as_str);
        if let (Some(ref_kind), Some(ref_version)) = (ref_kind, ref_version) {
            let (group, version) = split_api_version(ref_version);
            config.merge(TransformerConfig {
                name_reference: vec![crate::config::NameBackRef {
                    kind: ref_kind.to_owned(),
                    group,
                    version,
                    referrers: vec![FieldSpec {
                        kind: kind.to_owned(),
                        path: path.join("/"),
                        ..FieldSpec::default()
                    }],
                }],
                ..TransformerConfig::default()
            });
        } else if let Some(target) = property
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| all.get(r))
            .and_then(|d| d.get("Schema"))
        {
            collect_legacy_refs(all, target, kind, path, config, depth + 1);
        } else {
            collect_legacy_refs(all, property, kind, path, config, depth + 1);
        }
        path.pop();
    }
}

fn collect_refs(
    schema: &Value,
    kind: &str,
    path: &mut Vec<String>,
    config: &mut TransformerConfig,
) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        path.push(name.clone());
        let ref_kind = property
            .get("x-kubernetes-object-ref-kind")
            .and_then(Value::as_str);
        let ref_version = property
            .get("x-kubernetes-object-ref-api-version")
            .and_then(Value::as_str);
        if let (Some(ref_kind), Some(ref_version)) = (ref_kind, ref_version) {
            let (group, version) = split_api_version(ref_version);
            config.merge(TransformerConfig {
                name_reference: vec![crate::config::NameBackRef {
                    kind: ref_kind.to_owned(),
                    group,
                    version,
                    referrers: vec![FieldSpec {
                        kind: kind.to_owned(),
                        path: path.join("/"),
                        ..FieldSpec::default()
                    }],
                }],
                ..TransformerConfig::default()
            });
        }
        collect_refs(property, kind, path, config);
        path.pop();
    }
}

/// Runs builtin transformer configurations listed under `transformers:`.
pub(crate) fn run_transformer_configs(
    builder: &mut Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    let file = &target.file;
    for entry in &target.kustomization.transformers {
        let documents = if entry.contains('\n') || entry.contains(": ") {
            yaml::parse_documents(entry).map_err(|message| Error::Yaml {
                path: file.clone(),
                message,
            })?
        } else {
            let path = crate::fs::normalize(&target.dir.join(entry));
            if builder.fs.is_dir(&path) {
                builder.build_subtree(&path, "transformers")?
            } else {
                builder.read_field_documents(target, entry, "transformers")?
            }
        };
        for document in documents {
            apply_transformer_config(builder, target, acc, &document)
                .map_err(|m| Error::invalid(file, "transformers", m))?;
        }
    }
    Ok(())
}

fn specs_of(config: &Value, key: &str) -> Result<Vec<FieldSpec>, String> {
    match config.get(key) {
        Some(value) => serde_json::from_value(value.clone()).map_err(|e| format!("{key}: {e}")),
        None => Ok(Vec::new()),
    }
}

fn string_map(config: &Value, key: &str) -> BTreeMap<String, String> {
    config
        .get(key)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), scalar_text(v).unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

fn apply_transformer_config(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
    config: &Value,
) -> Result<(), String> {
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if api_version != "builtin" {
        return Err(format!(
            "transformer {kind} ({api_version}): only builtin transformers are supported (no exec or Go plugins)"
        ));
    }
    match kind {
        "PrefixSuffixTransformer" | "PrefixTransformer" | "SuffixTransformer" => {
            let prefix = config.get("prefix").and_then(Value::as_str).unwrap_or("");
            let suffix = config.get("suffix").and_then(Value::as_str).unwrap_or("");
            let specs = specs_of(config, "fieldSpecs")?;
            add_prefix_suffix(&mut acc.resources, prefix, suffix, &specs);
        }
        "LabelTransformer" => {
            set_map_entries(
                &mut acc.resources,
                &string_map(config, "labels"),
                &specs_of(config, "fieldSpecs")?,
            );
        }
        "AnnotationsTransformer" => {
            set_map_entries(
                &mut acc.resources,
                &string_map(config, "annotations"),
                &specs_of(config, "fieldSpecs")?,
            );
        }
        "NamespaceTransformer" => {
            let namespace = config
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            let unset_only = config
                .get("unsetOnly")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let subjects = config
                .get("setRoleBindingSubjects")
                .and_then(Value::as_str)
                .unwrap_or("");
            let subjects = match subjects {
                "allServiceAccounts" => "allServiceAccounts",
                "none" => "none",
                _ => "",
            };
            set_namespace(
                &mut acc.resources,
                namespace,
                &specs_of(config, "fieldSpecs")?,
                unset_only,
                subjects,
            );
        }
        "ImageTagTransformer" => {
            let image: Image =
                serde_json::from_value(config.get("imageTag").cloned().unwrap_or_default())
                    .map_err(|e| format!("imageTag: {e}"))?;
            let mut specs = specs_of(config, "fieldSpecs")?;
            if specs.is_empty() {
                specs.clone_from(&acc.config.images);
            }
            set_images(&mut acc.resources, &image, &specs);
        }
        "ReplicaCountTransformer" => {
            let name = config
                .pointer("/replica/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let count = config
                .pointer("/replica/count")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            set_replicas(
                &mut acc.resources,
                name,
                count,
                &specs_of(config, "fieldSpecs")?,
            );
        }
        "PatchTransformer" | "PatchJson6902Transformer" => {
            let selector: Option<Selector> = match config.get("target") {
                Some(t) => {
                    Some(serde_json::from_value(t.clone()).map_err(|e| format!("target: {e}"))?)
                }
                None => None,
            };
            let options: BTreeMap<String, bool> = config
                .get("options")
                .and_then(|o| serde_json::from_value(o.clone()).ok())
                .unwrap_or_default();
            let text = if let Some(path) = config.get("path").and_then(Value::as_str) {
                builder
                    .read_field_text(target, path, "transformers")
                    .map_err(|e| e.to_string())?
            } else {
                config
                    .get("patch")
                    .or_else(|| config.get("jsonOp"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            apply_patch(
                &mut acc.resources,
                &builder.schemas,
                &text,
                selector.as_ref(),
                &options,
            )?;
        }
        "PatchStrategicMergeTransformer" => {
            for entry in config
                .get("paths")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let path = entry.as_str().unwrap_or("");
                let text = builder
                    .read_field_text(target, path, "transformers")
                    .map_err(|e| e.to_string())?;
                apply_patch(
                    &mut acc.resources,
                    &builder.schemas,
                    &text,
                    None,
                    &BTreeMap::new(),
                )?;
            }
            if let Some(patches) = config.get("patches").and_then(Value::as_str) {
                apply_patch(
                    &mut acc.resources,
                    &builder.schemas,
                    patches,
                    None,
                    &BTreeMap::new(),
                )?;
            }
        }
        "ReplacementTransformer" => {
            for replacement in config
                .get("replacements")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                apply_replacement(&mut acc.resources, replacement)?;
            }
        }
        "ValueAddTransformer" => value_add(target, &mut acc.resources, config)?,
        "SortOrderTransformer" => {}
        "HelmChartInflationGenerator" => return Err("helmCharts: not supported yet".into()),
        other => return Err(format!("builtin transformer {other:?} is not supported")),
    }
    Ok(())
}

/// The alpha `ValueAddTransformer`: writes `value` (by default the name of the directory of
/// the kustomization listing the transformer) at each target's `fieldPath`, or inserts it as
/// segment `filePathPosition` (1-based) of a slash-separated value there.
fn value_add(target: &Target, resources: &mut [Resource], config: &Value) -> Result<(), String> {
    let value = match config.get("value").and_then(Value::as_str) {
        Some(value) if !value.is_empty() => value.to_owned(),
        _ => target
            .dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    for entry in config
        .get("targets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field_path = entry
            .get("fieldPath")
            .and_then(Value::as_str)
            .unwrap_or("metadata/namespace");
        let position = entry
            .get("filePathPosition")
            .and_then(Value::as_u64)
            .and_then(|p| usize::try_from(p).ok())
            .unwrap_or(0);
        let selected: Vec<usize> = match entry.get("selector") {
            Some(selector) => {
                let selector: Selector = serde_json::from_value(selector.clone())
                    .map_err(|e| format!("ValueAddTransformer selector: {e}"))?;
                select(resources, &selector)?
            }
            None => (0..resources.len()).collect(),
        };
        for index in selected {
            fieldspec::visit(
                &mut resources[index].object,
                field_path,
                true,
                &mut |slot| {
                    *slot = Value::String(insert_segment(slot.as_str(), &value, position));
                    Ok(())
                },
            )?;
        }
    }
    Ok(())
}

/// `value` as segment `position` (1-based; 0 replaces everything) of the path `current`.
fn insert_segment(current: Option<&str>, value: &str, position: usize) -> String {
    let current = current.unwrap_or_default();
    if position == 0 || current.is_empty() {
        return value.to_owned();
    }
    let mut parts: Vec<&str> = current.split('/').collect();
    let at = (position - 1).min(parts.len());
    parts.insert(at, value);
    parts.join("/")
}

#[cfg(test)]
mod tests;
