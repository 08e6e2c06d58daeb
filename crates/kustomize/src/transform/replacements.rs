//! The replacement transformer.

use crate::error::TransformError;
use serde_json::Value;

use super::field_path::{lookup_path, scalar_text, split_field_path, visit_path};
use super::select::{SelectorRegex, matches_label_selector};
use crate::resource::{ResId, Resource, split_api_version};
use crate::types::Selector;

fn selector_from(value: Option<&Value>) -> Result<Selector, TransformError> {
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
    serde_json::from_value(value).map_err(|e| TransformError::decode("bad selector", e))
}

pub(super) fn all_ids(resource: &Resource) -> Vec<ResId> {
    let mut ids = vec![resource.current_id()];
    ids.extend(resource.previous.iter().cloned());
    ids
}

/// One entry of `replacements`.
pub(crate) fn apply_replacement(
    resources: &mut [Resource],
    replacement: &Value,
) -> Result<(), TransformError> {
    let source = replacement
        .get("source")
        .ok_or("replacement has no source")?;
    let value = source_value(resources, source)?;
    for target in replacement
        .get("targets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        replace_in_target(resources, target, &value)?;
    }
    Ok(())
}

/// The value a replacement's `source` selects: one resource, its `fieldPath` (by default
/// `metadata.name`), optionally one part of it split on `options.delimiter`.
fn source_value(resources: &[Resource], source: &Value) -> Result<Value, TransformError> {
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
        [] => return Err(format!("nothing selected by source {source}").into()),
        _ => return Err(format!("multiple matches for source selector {source}").into()),
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
    Ok(value)
}

/// Writes `value` at the `fieldPaths` of every resource a replacement target selects and
/// does not reject.
fn replace_in_target(
    resources: &mut [Resource],
    target: &Value,
    value: &Value,
) -> Result<(), TransformError> {
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
        .collect::<Result<_, TransformError>>()?;
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
                    set_replacement_value(slot, value, options);
                    Ok(())
                },
            )?;
            if found == 0 {
                return Err(format!(
                    "unable to find field \"{path}\" in replacement target {}",
                    resource.current_id()
                )
                .into());
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
