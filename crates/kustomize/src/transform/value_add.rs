//! The alpha `ValueAddTransformer`.

use crate::error::TransformError;
use serde_json::Value;

use super::select::select;
use crate::build::Target;
use crate::fieldspec;
use crate::resource::Resource;
use crate::types::Selector;

/// The alpha `ValueAddTransformer`: writes `value` (by default the name of the directory of
/// the kustomization listing the transformer) at each target's `fieldPath`, or inserts it as
/// segment `filePathPosition` (1-based) of a slash-separated value there.
pub(super) fn value_add(
    target: &Target,
    resources: &mut [Resource],
    config: &Value,
) -> Result<(), TransformError> {
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
                    .map_err(|e| TransformError::decode("ValueAddTransformer selector", e))?;
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
pub(super) fn insert_segment(current: Option<&str>, value: &str, position: usize) -> String {
    let current = current.unwrap_or_default();
    if position == 0 || current.is_empty() {
        return value.to_owned();
    }
    let mut parts: Vec<&str> = current.split('/').collect();
    let at = (position - 1).min(parts.len());
    parts.insert(at, value);
    parts.join("/")
}
