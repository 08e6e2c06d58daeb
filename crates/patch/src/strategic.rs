//! Strategic merge patch, following the API server's `strategicpatch` package.
//!
//! Directives handled:
//! - `$patch: replace | delete | merge` in a map (`replace` takes the patch map as is,
//!   `delete` leaves `{}`, `merge` is the default and only tolerated for symmetry);
//! - `$patch: replace | delete` as an item of a merging list of maps (`replace` makes the other
//!   patch items the whole list, `delete` removes the items with that merge key);
//! - `$retainKeys: [..]`: fields of the original map missing from the list are cleared (every
//!   non-null field of the patch map must be listed);
//! - `$setElementOrder/<field>: [..]`: the final order of the merged list;
//! - `$deleteFromPrimitiveList/<field>: [..]`: scalars removed from a merging list.

use capstan_schema::{ListType, Schema};
use serde_json::{Map, Value};

use crate::PatchError;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

pub(crate) fn strategic_merge(
    original: &Value,
    patch: &Value,
    schema: Option<&Schema>,
) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(invalid("a strategic merge patch must be a JSON object"));
    };
    let original = match original {
        Value::Object(map) => map.clone(),
        Value::Null => Map::new(),
        _ => return Err(invalid("the patched document must be a JSON object")),
    };
    merge_map(original, patch, schema, "").map(Value::Object)
}

fn invalid(message: impl Into<String>) -> PatchError {
    PatchError::Invalid(message.into())
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}

fn is_directive_key(key: &str) -> bool {
    key == DIRECTIVE
        || key == RETAIN_KEYS
        || key.starts_with(SET_ELEMENT_ORDER)
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

fn child_schema(schema: Option<&Schema>, field: &str) -> Option<Schema> {
    schema.and_then(|schema| schema.child(field))
}

fn patch_strategies(schema: Option<&Schema>) -> Vec<String> {
    schema
        .and_then(Schema::patch_strategy)
        .map(|strategy| {
            strategy
                .split(',')
                .map(|part| part.trim().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// How a list field merges.
enum ListMerge {
    Replace,
    /// Merge; maps are matched by this key (when present).
    Merge(Option<String>),
}

fn list_merge(schema: Option<&Schema>) -> ListMerge {
    let Some(schema) = schema else {
        return ListMerge::Replace;
    };
    let strategies = patch_strategies(Some(schema));
    if strategies.iter().any(|strategy| strategy == "replace") {
        return ListMerge::Replace;
    }
    let list_key = || match schema.list_type() {
        ListType::Map(keys) => keys.into_iter().next(),
        _ => None,
    };
    if strategies.iter().any(|strategy| strategy == "merge") {
        return ListMerge::Merge(schema.patch_merge_key().or_else(list_key));
    }
    if !strategies.is_empty() {
        // e.g. `retainKeys` alone: lists are not merged.
        return ListMerge::Replace;
    }
    match schema.list_type() {
        ListType::Atomic => ListMerge::Replace,
        ListType::Set => ListMerge::Merge(None),
        ListType::Map(keys) => {
            ListMerge::Merge(schema.patch_merge_key().or_else(|| keys.into_iter().next()))
        }
    }
}

/// Merges a patch value into an optional original value.
fn merge_value(
    original: Option<Value>,
    patch: &Value,
    schema: Option<&Schema>,
    path: &str,
) -> Result<Value, PatchError> {
    match (original, patch) {
        (Some(Value::Object(original)), Value::Object(patch)) => {
            if patch_strategies(schema)
                .iter()
                .any(|strategy| strategy == "replace")
            {
                merge_map(Map::new(), patch, schema, path).map(Value::Object)
            } else {
                merge_map(original, patch, schema, path).map(Value::Object)
            }
        }
        (Some(Value::Array(original)), Value::Array(patch)) => {
            merge_list(original, patch, schema, path).map(Value::Array)
        }
        (_, Value::Object(patch)) => merge_map(Map::new(), patch, schema, path).map(Value::Object),
        (_, Value::Array(patch)) => merge_list(Vec::new(), patch, schema, path).map(Value::Array),
        (_, scalar) => Ok(scalar.clone()),
    }
}

fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    schema: Option<&Schema>,
    path: &str,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        match directive.as_str() {
            Some("replace") => {
                let mut rest = patch.clone();
                rest.remove(DIRECTIVE);
                return merge_map(Map::new(), &rest, schema, path);
            }
            Some("delete") => return Ok(Map::new()),
            Some("merge") => {}
            _ => {
                return Err(invalid(format!(
                    "{}: unknown $patch directive {directive}",
                    display(path)
                )));
            }
        }
    }

    if let Some(retain) = patch.get(RETAIN_KEYS) {
        apply_retain_keys(&mut original, patch, retain, path)?;
    }

    let mut handled: Vec<&str> = Vec::new();
    for (key, order) in patch {
        let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) else {
            continue;
        };
        if field.is_empty() {
            return Err(invalid(format!("{}: {key} names no field", display(path))));
        }
        if apply_element_order(&mut original, patch, key, field, order, schema, path)? {
            handled.push(field);
        }
    }
    delete_from_primitive_lists(&mut original, patch, path)?;

    for (key, patch_value) in patch {
        if is_directive_key(key) || handled.contains(&key.as_str()) {
            continue;
        }
        if patch_value.is_null() {
            original.remove(key);
            continue;
        }
        let field_schema = child_schema(schema, key);
        let field_path = join(path, key);
        let current = original.get_mut(key).map(Value::take);
        let merged = merge_value(current, patch_value, field_schema.as_ref(), &field_path)?;
        original.insert(key.clone(), merged);
    }
    Ok(original)
}

/// Applies `$setElementOrder/<field>` (`key`, with the wanted `order`) to `original`:
/// merges the patch's list for `field` (if any) and orders the result. Returns whether
/// `field` is now handled (the plain merge must skip it).
fn apply_element_order(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    key: &str,
    field: &str,
    order: &Value,
    schema: Option<&Schema>,
    path: &str,
) -> Result<bool, PatchError> {
    let field_path = join(path, field);
    let Value::Array(order) = order else {
        return Err(invalid(format!("{field_path}: {key} must be a list")));
    };
    let patch_list = match patch.get(field) {
        None => None,
        Some(Value::Array(list)) => Some(list),
        // `null` deletes the field below; nothing to order.
        Some(Value::Null) => return Ok(false),
        Some(_) => {
            return Err(invalid(format!(
                "{field_path}: {key} applies to a field that is not a list"
            )));
        }
    };
    let original_list = match original.get(field) {
        None | Some(Value::Null) => None,
        Some(Value::Array(list)) => Some(list.clone()),
        Some(_) => {
            return Err(invalid(format!(
                "{field_path}: {key} applies to a field that is not a list"
            )));
        }
    };
    let field_schema = child_schema(schema, field);
    let merge_key = match list_merge(field_schema.as_ref()) {
        ListMerge::Merge(key) => key,
        ListMerge::Replace => None,
    };
    let maps = order.iter().all(Value::is_object) && !order.is_empty();
    let key_of = if maps { merge_key.as_deref() } else { None };
    if maps && key_of.is_none() {
        return Err(invalid(format!(
            "{field_path}: {key} needs a merge key for lists of maps"
        )));
    }
    if let Some(patch_list) = patch_list {
        validate_order(patch_list, order, key_of, &field_path)?;
    }
    let merged = match (original_list, patch_list) {
        (Some(original_list), None) => original_list,
        (original_list, Some(patch_list)) => merge_list(
            original_list.clone().unwrap_or_default(),
            patch_list,
            field_schema.as_ref(),
            &field_path,
        )?,
        (None, None) => return Ok(false),
    };
    let original_list = match original.get(field) {
        Some(Value::Array(list)) => list.clone(),
        _ => Vec::new(),
    };
    let (in_order, server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| position(order, item, key_of).is_some());
    let ordered = normalize_order(in_order, server_only, order, &original_list, key_of);
    original.insert(field.to_owned(), Value::Array(ordered));
    Ok(true)
}

/// Applies every `$deleteFromPrimitiveList/<field>` of `patch` to `original`.
fn delete_from_primitive_lists(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &str,
) -> Result<(), PatchError> {
    for (key, values) in patch {
        let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) else {
            continue;
        };
        let field_path = join(path, field);
        let Value::Array(values) = values else {
            return Err(invalid(format!("{field_path}: {key} must be a list")));
        };
        if let Some(Value::Array(list)) = original.get_mut(field) {
            list.retain(|item| !values.contains(item));
        }
    }
    Ok(())
}

fn display(path: &str) -> &str {
    if path.is_empty() { "<root>" } else { path }
}

fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    retain: &Value,
    path: &str,
) -> Result<(), PatchError> {
    let Value::Array(retain) = retain else {
        return Err(invalid(format!(
            "{}: $retainKeys must be a list of field names",
            display(path)
        )));
    };
    let mut keys = Vec::with_capacity(retain.len());
    for key in retain {
        let Value::String(key) = key else {
            return Err(invalid(format!(
                "{}: $retainKeys must be a list of field names",
                display(path)
            )));
        };
        keys.push(key.as_str());
    }
    for (key, value) in patch {
        if value.is_null() || is_directive_key(key) {
            continue;
        }
        if !keys.contains(&key.as_str()) {
            return Err(invalid(format!(
                "{}: field {key} is in the patch but not in $retainKeys",
                join(path, key)
            )));
        }
    }
    original.retain(|key, _| keys.contains(&key.as_str()));
    Ok(())
}

/// The merge-key value (maps) or the item itself (scalars).
fn identity<'a>(item: &'a Value, key: Option<&str>) -> Option<&'a Value> {
    match key {
        Some(key) => item.as_object().and_then(|map| map.get(key)),
        None => Some(item),
    }
}

fn position(list: &[Value], item: &Value, key: Option<&str>) -> Option<usize> {
    let wanted = identity(item, key)?;
    list.iter()
        .position(|candidate| identity(candidate, key) == Some(wanted))
}

fn has_directive(item: &Value) -> bool {
    item.as_object()
        .is_some_and(|map| map.contains_key(DIRECTIVE))
}

fn is_delete_item(item: &Value) -> bool {
    item.as_object()
        .and_then(|map| map.get(DIRECTIVE))
        .is_some_and(|directive| directive == "delete")
}

/// Every (non-deleting) item of the patch list must appear in `order`, in the same relative order.
fn validate_order(
    patch_list: &[Value],
    order: &[Value],
    key: Option<&str>,
    path: &str,
) -> Result<(), PatchError> {
    if patch_list.is_empty() || order.is_empty() {
        return Ok(());
    }
    let items: Vec<&Value> = patch_list
        .iter()
        .filter(|item| !is_delete_item(item))
        .collect();
    let (mut item_index, mut order_index) = (0, 0);
    while item_index < items.len() && order_index < order.len() {
        let item = items[item_index];
        if has_directive(item) {
            item_index += 1;
            continue;
        }
        let item_id = identity(item, key).ok_or_else(|| missing_key(path, key))?;
        let order_id = identity(&order[order_index], key).ok_or_else(|| missing_key(path, key))?;
        if item_id == order_id {
            item_index += 1;
        }
        order_index += 1;
    }
    if item_index < items.len() {
        return Err(invalid(format!(
            "{path}: the order of the patch list does not match $setElementOrder"
        )));
    }
    Ok(())
}

fn missing_key(path: &str, key: Option<&str>) -> PatchError {
    invalid(format!(
        "{path}: list item has no merge key {}",
        key.unwrap_or_default()
    ))
}

/// Stable sort of `items` by their position in `order` (items not found go last).
fn sort_by_order(items: &mut [Value], order: &[Value], key: Option<&str>) {
    items.sort_by_key(|item| position(order, item, key).unwrap_or(usize::MAX));
}

/// Orders `patch_items` by `patch_order` and `server_only` by `server_order`, then interleaves
/// them: a server-only item goes before a patch item only when both are in `server_order`
/// and it comes first there.
fn normalize_order(
    mut patch_items: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    sort_by_order(&mut patch_items, patch_order, key);
    sort_by_order(&mut server_only, server_order, key);
    let mut result = Vec::with_capacity(patch_items.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(server), Some(patched)) => {
                matches!(
                    (position(server_order, server, key), position(server_order, patched, key)),
                    (Some(server_index), Some(patched_index)) if server_index < patched_index
                )
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        result.extend(next);
    }
    result
}

fn merge_list(
    original: Vec<Value>,
    patch: &[Value],
    schema: Option<&Schema>,
    path: &str,
) -> Result<Vec<Value>, PatchError> {
    let items_schema = schema.and_then(Schema::items);
    let merge_key = match list_merge(schema) {
        ListMerge::Replace => {
            return patch
                .iter()
                .filter(|item| !item.is_null())
                .map(|item| merge_value(None, item, items_schema.as_ref(), path))
                .collect();
        }
        ListMerge::Merge(key) => key,
    };
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let all = original.iter().chain(patch);
    let maps = all.clone().filter(|item| item.is_object()).count();
    let total = original.len() + patch.len();
    if maps != 0 && maps != total {
        return Err(invalid(format!(
            "{path}: list element types are not identical"
        )));
    }
    if all.clone().any(Value::is_array) {
        return Err(invalid(format!("{path}: lists of lists cannot be merged")));
    }

    if maps == 0 {
        return Ok(merge_scalar_list(&original, patch, total));
    }
    let Some(key) = merge_key else {
        return Err(invalid(format!(
            "{path}: cannot merge a list of maps without a merge key"
        )));
    };
    merge_keyed_list(original, patch, key.as_str(), items_schema.as_ref(), path)
}

/// Merges two lists of scalars: their union without duplicates, in the patch's order.
fn merge_scalar_list(original: &[Value], patch: &[Value], total: usize) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::with_capacity(total);
    for item in original.iter().chain(patch) {
        if !merged.contains(item) {
            merged.push(item.clone());
        }
    }
    let (in_patch, server_only): (Vec<Value>, Vec<Value>) =
        merged.into_iter().partition(|item| patch.contains(item));
    normalize_order(in_patch, server_only, patch, original, None)
}

/// Merges a patch list of maps into `original` by the merge `key`, honouring `$patch`
/// directives (`delete`, `replace`, `merge`) on its items.
fn merge_keyed_list(
    mut original: Vec<Value>,
    patch: &[Value],
    key: &str,
    items_schema: Option<&Schema>,
    path: &str,
) -> Result<Vec<Value>, PatchError> {
    // Special elements first.
    let mut plain: Vec<&Value> = Vec::with_capacity(patch.len());
    let mut replace = false;
    for item in patch {
        let Some(directive) = item.get(DIRECTIVE) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let value = item.get(key).ok_or_else(|| missing_key(path, Some(key)))?;
                original.retain(|candidate| candidate.get(key) != Some(value));
            }
            Some("replace") => replace = true,
            Some("merge") => plain.push(item),
            _ => {
                return Err(invalid(format!(
                    "{path}: unknown $patch directive {directive}"
                )));
            }
        }
    }
    if replace {
        let replaced = plain
            .iter()
            .map(|item| merge_value(None, item, items_schema, path))
            .collect::<Result<Vec<_>, _>>()?;
        let server_order = replaced.clone();
        return Ok(normalize_order(
            Vec::new(),
            replaced,
            &[],
            &server_order,
            Some(key),
        ));
    }

    let mut merged = original.clone();
    for item in &plain {
        let value = item.get(key).ok_or_else(|| missing_key(path, Some(key)))?;
        let item_path = format!("{path}[{key}={value}]");
        match merged
            .iter_mut()
            .find(|candidate| candidate.get(key) == Some(value))
        {
            Some(existing) => {
                let current = existing.take();
                *existing = merge_value(Some(current), item, items_schema, &item_path)?;
            }
            None => merged.push(merge_value(None, item, items_schema, &item_path)?),
        }
    }
    let patch_order: Vec<Value> = plain.into_iter().cloned().collect();
    let (in_patch, server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| position(&patch_order, item, Some(key)).is_some());
    Ok(normalize_order(
        in_patch,
        server_only,
        &patch_order,
        &original,
        Some(key),
    ))
}

#[cfg(test)]
mod tests;
