//! The deprecated `vars`: `$(VAR)` substitution.

use crate::error::TransformError;
use std::collections::BTreeMap;

use serde_json::Value;

use super::field_path::{lookup_path, scalar_text, split_field_path};
use super::replacements::all_ids;
use crate::config::TransformerConfig;
use crate::fieldspec::{self, applies};
use crate::resource::{Resource, split_api_version};
use crate::types::Var;

/// Substitutes `$(VAR)` references.
pub(crate) fn resolve_vars(
    resources: &mut [Resource],
    vars: &[Var],
    config: &TransformerConfig,
) -> Result<(), TransformError> {
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
                )
                .into());
            }
            _ => {
                return Err(format!(
                    "found {} resId matches for var '{}' (unable to disambiguate)",
                    matches.len(),
                    var.name
                )
                .into());
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
