//! The patch transformers: strategic merge and JSON 6902.

use crate::error::TransformError;
use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::select::select;
use crate::build::id_of;
use crate::resource::Resource;
use crate::smp::Schemas;
use crate::types::Selector;

/// Applies a strategic-merge or JSON 6902 patch (detected from its shape).
pub(crate) fn apply_patch(
    resources: &mut Vec<Resource>,
    schemas: &Schemas,
    text: &str,
    selector: Option<&Selector>,
    options: &BTreeMap<String, bool>,
) -> Result<(), TransformError> {
    let documents =
        crate::folded::parse_resource_documents(text).map_err(|source| TransformError::Yaml {
            context: "malformed patch".into(),
            source,
        })?;
    let allow_name = options.get("allowNameChange").copied().unwrap_or(false);
    let allow_kind = options.get("allowKindChange").copied().unwrap_or(false);
    if documents.len() == 1 && documents[0].is_array() {
        let Some(selector) = selector else {
            return Err("json patch requires a target".into());
        };
        let indexes = select(resources, selector)?;
        for index in indexes {
            let resource = &mut resources[index];
            capstan_patch::json_patch(&mut resource.object, &documents[0]).map_err(|source| {
                TransformError::Patch {
                    context: format!("applying json patch to {}", resource.current_id()),
                    source,
                }
            })?;
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
                ).into());
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
            let merged =
                crate::smp::merge(&resource.object, &patch, schema.as_ref()).map_err(|source| {
                    TransformError::Patch {
                        context: format!("applying patch to {id}"),
                        source,
                    }
                })?;
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
