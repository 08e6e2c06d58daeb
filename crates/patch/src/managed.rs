//! Server-side apply and `managedFields` bookkeeping.
//!
//! Both entry points keep `metadata.managedFields` the way the Kubernetes API server does:
//!
//! - an entry is identified by manager, operation and subresource (and, for `Update`
//!   entries, the apiVersion — an update through another version is a separate entry);
//! - each entry's `fieldsV1` is a [`FieldSet`]; entries whose set becomes empty are dropped;
//! - entries are sorted as the API server sorts them: by operation (`Apply` before `Update`),
//!   then time, manager, apiVersion and subresource;
//! - an entry that did not change keeps its exact JSON, and its `time` only moves when the
//!   write changed something, so a no-op write returns an identical object.
//!
//! Expected flow for an apply: decode the managers of `live`, compute the applied set of
//! `config`, merge `config` into `live`, remove fields the applier stopped applying (unless
//! another manager owns them), detect conflicts with other managers, then record the new sets.
//!
//! Errors: [`ApplyError::Conflicts`] (unless forced) and [`ApplyError::Invalid`] for a
//! configuration that is not an object or that carries `metadata.managedFields`.

use capstan_schema::Schema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::fieldpath::{self, FieldSet, PathElement, Shape};
use crate::value::field;

/// The `operation` of entries written by server-side apply.
pub const OPERATION_APPLY: &str = "Apply";
/// The `operation` of entries written by create, update and patch.
pub const OPERATION_UPDATE: &str = "Update";

/// One `metadata.managedFields` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(clippy::struct_field_names)]
pub struct ManagedFieldsEntry {
    /// Name of the field manager.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// apiVersion of the object the fields were recorded against.
    pub api_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    #[serde(default = "fields_v1")]
    pub fields_type: String,
    #[serde(default, rename = "fieldsV1", skip_serializing_if = "Option::is_none")]
    pub fields_v1: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
}

impl ManagedFieldsEntry {
    /// The decoded `fieldsV1` (empty when absent).
    pub fn field_set(&self) -> Result<FieldSet, crate::PatchError> {
        match &self.fields_v1 {
            Some(value) => FieldSet::from_fields_v1(value),
            None => Ok(FieldSet::default()),
        }
    }
}

fn fields_v1() -> String {
    "FieldsV1".to_owned()
}

/// One field another manager owns with a different value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// Name of the manager owning the field.
    pub manager: String,
    /// e.g. `.spec.replicas`
    pub field: String,
}

/// Why an apply was refused.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Fields owned by other managers would change; retry with `force` to take them.
    #[error("apply conflicts with {} field(s)", .0.len())]
    Conflicts(Vec<Conflict>),
    /// The configuration cannot be applied.
    #[error("invalid apply configuration: {0}")]
    Invalid(String),
}

/// Context of one write.
#[derive(Clone, Debug)]
pub struct WriteContext<'a> {
    /// The field manager (`fieldManager` query parameter, or the user agent's default).
    pub manager: &'a str,
    /// apiVersion of the request, recorded in the entry.
    pub api_version: &'a str,
    /// `Some("status")` for writes to a subresource.
    pub subresource: Option<&'a str>,
    /// RFC 3339 time recorded on entries that change.
    pub now: &'a str,
}

/// Server-side apply of `config` by `ctx.manager` onto `live` (whose `metadata.managedFields`
/// says who owns what). Returns the merged object with updated `metadata.managedFields`.
/// Conflicts (fields owned by another manager whose value would change) fail unless `force`,
/// which moves ownership. Fields the manager applied before but no longer applies, and nobody
/// else owns, are removed.
///
/// `live == None` creates the object from `config`. A repeated identical apply returns an
/// object equal to `live` (same `managedFields` bytes and times), so the caller can skip the
/// write by comparing. `metadata.managedFields` in `config` is rejected unless empty, as the
/// API server does.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    ctx: &WriteContext<'_>,
    force: bool,
    schema: Option<&Schema>,
) -> Result<Value, ApplyError> {
    let base = apply_base(live, config)?;
    let mut managers = decode_managers(&base);
    let mut config = config.clone();
    fill_missing_keys(&mut config, Some(&base), schema);
    let config = &config;
    let applied = FieldSet::from_object(config, schema);
    let applier = managers.iter().position(|manager| {
        manager.is(
            ctx.manager,
            OPERATION_APPLY,
            ctx.subresource,
            ctx.api_version,
        )
    });

    let mut merged = base.clone();
    merge_applied(&mut merged, config, schema, &mut Vec::new());
    remove_stale(&mut merged, config, &managers, applier, &applied, schema);

    let comparison = fieldpath::compare(Some(&base), Some(&merged), schema);
    take_changed_fields(&mut managers, applier, &comparison, force)?;

    let object_changed = merged != base;
    let new_set = applied.difference(&comparison.removed);
    match applier {
        Some(index) => {
            let manager = &mut managers[index];
            if manager.set != new_set || object_changed {
                manager.entry.time = Some(ctx.now.to_owned());
            }
            manager.set = new_set;
            ctx.api_version.clone_into(&mut manager.entry.api_version);
        }
        None => managers.push(Manager::new(ctx, OPERATION_APPLY, new_set)),
    }
    write_managers(&mut merged, managers);
    Ok(merged)
}

/// Checks an apply's inputs and returns the object it starts from: a copy of `live`, or an
/// empty object when there is none.
fn apply_base(live: Option<&Value>, config: &Value) -> Result<Value, ApplyError> {
    if !config.is_object() {
        return Err(ApplyError::Invalid(
            "the configuration must be a JSON object".to_owned(),
        ));
    }
    if let Some(managed) = field(field(Some(config), "metadata"), "managedFields") {
        let empty = managed.is_null() || managed.as_array().is_some_and(Vec::is_empty);
        if !empty {
            return Err(ApplyError::Invalid(
                "metadata.managedFields must be nil".to_owned(),
            ));
        }
    }
    match live {
        Some(Value::Object(map)) => Ok(Value::Object(map.clone())),
        Some(Value::Null) | None => Ok(Value::Object(Map::new())),
        Some(_) => Err(ApplyError::Invalid(
            "the live object must be a JSON object".to_owned(),
        )),
    }
}

/// Removes from `merged` what the applier (`managers[applier]`) applied before but no longer
/// applies, unless someone (the applier included) still owns it.
fn remove_stale(
    merged: &mut Value,
    config: &Value,
    managers: &[Manager],
    applier: Option<usize>,
    applied: &FieldSet,
    schema: Option<&Schema>,
) {
    let previous = applier
        .map(|index| managers[index].set.clone())
        .unwrap_or_default();
    let mut owned = applied.clone();
    for (index, manager) in managers.iter().enumerate() {
        if Some(index) != applier {
            owned = owned.union(&manager.set);
        }
    }
    let stale = previous.difference(applied);
    let mut stale_paths = stale.members();
    stale_paths.reverse();
    for path in &stale_paths {
        if owned.contains_prefix(path) || is_key_field(path) {
            continue;
        }
        // The item may now be known under a fuller key (a defaulted key field): check that too.
        let Some(actual) = canonical_path(merged, path, schema) else {
            continue;
        };
        if !owned.contains_prefix(&actual) {
            remove_path(merged, path);
        }
    }
    for path in &stale_paths {
        remove_empty_ancestors(merged, path, config, &owned);
    }
}

/// Takes the fields the apply added or modified away from the other managers, failing with
/// the conflicts unless `force`; drops removed fields from every manager.
fn take_changed_fields(
    managers: &mut [Manager],
    applier: Option<usize>,
    comparison: &fieldpath::Comparison,
    force: bool,
) -> Result<(), ApplyError> {
    let changed = comparison.added.union(&comparison.modified);
    let mut conflicts = Vec::new();
    let mut taken: Vec<(usize, FieldSet)> = Vec::new();
    for (index, manager) in managers.iter().enumerate() {
        if Some(index) == applier {
            continue;
        }
        let overlap = manager.set.intersection(&changed);
        if !overlap.is_empty() {
            conflicts.extend(overlap.paths().into_iter().map(|field| Conflict {
                manager: manager.entry.manager.clone(),
                field,
            }));
            taken.push((index, overlap));
        }
    }
    if !conflicts.is_empty() && !force {
        conflicts.sort_by(|a, b| a.manager.cmp(&b.manager));
        return Err(ApplyError::Conflicts(conflicts));
    }
    for (index, overlap) in taken {
        let manager = &mut managers[index];
        manager.set = manager.set.difference(&overlap);
    }
    for manager in managers {
        manager.set = manager.set.difference(&comparison.removed);
    }
    Ok(())
}

/// Records an `Update` operation (create, update, patch) turning `old` into `new`:
/// fields whose values changed or appeared become owned by `ctx.manager` and are taken
/// from other managers. Returns `new` with `metadata.managedFields` set.
///
/// The managers come from `new`'s `metadata.managedFields` when it holds any (a client may
/// rewrite them; `[{}]` resets them), otherwise from `old`'s. Fields removed from the object
/// leave every set. The manager's entry keeps what it owned before plus what it changed; its
/// `time` moves only when this write changed something.
pub fn record_update(
    old: Option<&Value>,
    new: &Value,
    ctx: &WriteContext<'_>,
    schema: Option<&Schema>,
) -> Value {
    let mut result = new.clone();
    if !result.is_object() {
        return result;
    }
    let requested = field(field(Some(new), "metadata"), "managedFields");
    let reset = requested.and_then(Value::as_array).is_some_and(|entries| {
        entries.len() == 1 && entries[0].as_object().is_some_and(Map::is_empty)
    });
    let mut managers = if reset {
        Vec::new()
    } else {
        let from_new = decode_managers(new);
        if from_new.is_empty() {
            old.map(decode_managers).unwrap_or_default()
        } else {
            from_new
        }
    };

    let comparison = fieldpath::compare(old, Some(new), schema);
    let changed = comparison.added.union(&comparison.modified);
    let own = managers.iter().position(|manager| {
        manager.is(
            ctx.manager,
            OPERATION_UPDATE,
            ctx.subresource,
            ctx.api_version,
        )
    });
    for (index, manager) in managers.iter_mut().enumerate() {
        if Some(index) != own {
            manager.set = manager.set.difference(&changed);
        }
        manager.set = manager.set.difference(&comparison.removed);
    }
    if !changed.is_empty() {
        match own {
            Some(index) => {
                let manager = &mut managers[index];
                manager.set = manager.set.union(&changed);
                manager.entry.time = Some(ctx.now.to_owned());
            }
            None => managers.push(Manager::new(ctx, OPERATION_UPDATE, changed)),
        }
    }
    write_managers(&mut result, managers);
    result
}

/// The Kubernetes message for a failed apply, e.g.
/// `Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas`.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [conflict] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {:?}: {}",
            conflict.manager, conflict.field
        );
    }
    let mut managers: Vec<&str> = conflicts
        .iter()
        .map(|conflict| conflict.manager.as_str())
        .collect();
    managers.sort_unstable();
    managers.dedup();
    let mut lines = Vec::new();
    for manager in managers {
        lines.push(format!("conflicts with {manager:?}:"));
        for conflict in conflicts
            .iter()
            .filter(|conflict| conflict.manager == manager)
        {
            lines.push(format!("- {}", conflict.field));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Decodes the `metadata.managedFields` of `object`. Entries that cannot be decoded
/// (unknown `fieldsType`, malformed `fieldsV1`, other operations) are dropped, as the API
/// server resets what it cannot read.
pub fn managed_fields(object: &Value) -> Vec<(ManagedFieldsEntry, FieldSet)> {
    decode_managers(object)
        .into_iter()
        .map(|manager| (manager.entry, manager.set))
        .collect()
}

/// One decoded entry.
struct Manager {
    entry: ManagedFieldsEntry,
    set: FieldSet,
    /// The entry's JSON as read, reused when nothing changed.
    raw: Option<(Value, FieldSet, ManagedFieldsEntry)>,
}

impl Manager {
    fn new(ctx: &WriteContext<'_>, operation: &str, set: FieldSet) -> Manager {
        Manager {
            entry: ManagedFieldsEntry {
                manager: ctx.manager.to_owned(),
                operation: operation.to_owned(),
                api_version: ctx.api_version.to_owned(),
                time: Some(ctx.now.to_owned()),
                fields_type: fields_v1(),
                fields_v1: None,
                subresource: ctx.subresource.map(str::to_owned),
            },
            set,
            raw: None,
        }
    }

    fn is(
        &self,
        manager: &str,
        operation: &str,
        subresource: Option<&str>,
        api_version: &str,
    ) -> bool {
        self.entry.manager == manager
            && self.entry.operation == operation
            && self
                .entry
                .subresource
                .as_deref()
                .filter(|name| !name.is_empty())
                == subresource
            && (operation == OPERATION_APPLY || self.entry.api_version == api_version)
    }

    fn encode(self) -> Value {
        if let Some((raw, set, entry)) = self.raw
            && set == self.set
            && entry == self.entry
        {
            return raw;
        }
        let mut entry = self.entry;
        entry.fields_type = fields_v1();
        entry.fields_v1 = Some(self.set.to_fields_v1());
        serde_json::to_value(entry).unwrap_or(Value::Null)
    }
}

fn decode_managers(object: &Value) -> Vec<Manager> {
    let Some(Value::Array(entries)) = field(field(Some(object), "metadata"), "managedFields")
    else {
        return Vec::new();
    };
    let mut managers = Vec::with_capacity(entries.len());
    for raw in entries {
        let Ok(entry) = serde_json::from_value::<ManagedFieldsEntry>(raw.clone()) else {
            continue;
        };
        if entry.fields_type != "FieldsV1"
            || (entry.operation != OPERATION_APPLY && entry.operation != OPERATION_UPDATE)
        {
            continue;
        }
        let Ok(set) = entry.field_set() else {
            continue;
        };
        managers.push(Manager {
            raw: Some((raw.clone(), set.clone(), entry.clone())),
            entry,
            set,
        });
    }
    managers
}

/// Drops empty entries, sorts as the API server does and stores the result in
/// `object.metadata.managedFields` (in place, so the key keeps its position).
fn write_managers(object: &mut Value, mut managers: Vec<Manager>) {
    managers.retain(|manager| !manager.set.is_empty());
    managers.sort_by(|a, b| {
        let (a, b) = (&a.entry, &b.entry);
        a.operation
            .cmp(&b.operation)
            .then_with(|| {
                a.time
                    .as_deref()
                    .unwrap_or_default()
                    .cmp(b.time.as_deref().unwrap_or_default())
            })
            .then_with(|| a.manager.cmp(&b.manager))
            .then_with(|| a.api_version.cmp(&b.api_version))
            .then_with(|| {
                a.subresource
                    .as_deref()
                    .unwrap_or_default()
                    .cmp(b.subresource.as_deref().unwrap_or_default())
            })
    });
    let Value::Object(root) = object else {
        return;
    };
    if managers.is_empty() {
        if let Some(Value::Object(metadata)) = root.get_mut("metadata") {
            metadata.shift_remove("managedFields");
        }
        return;
    }
    let entries = Value::Array(managers.into_iter().map(Manager::encode).collect());
    let metadata = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    if let Value::Object(metadata) = metadata {
        metadata.insert("managedFields".to_owned(), entries);
    }
}

/// A copy of `value` without `null` map members.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, value)| (key.clone(), without_nulls(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// Merges an apply configuration into the live object: maps merge, associative lists merge
/// by key (live order kept, new items appended), sets union, everything else is replaced.
/// `null` removes a field. `metadata.managedFields` of the configuration is ignored.
fn merge_applied(
    live: &mut Value,
    config: &Value,
    schema: Option<&Schema>,
    path: &mut Vec<PathElement>,
) {
    match (fieldpath::shape(config, schema), live) {
        (Shape::Map(config_map), Value::Object(live_map)) => {
            for (name, config_value) in config_map {
                path.push(PathElement::Field(name.clone()));
                let is_managed_fields = matches!(
                    path.as_slice(),
                    [PathElement::Field(metadata), PathElement::Field(field)]
                        if metadata == "metadata" && field == "managedFields"
                );
                if !is_managed_fields {
                    if config_value.is_null() {
                        live_map.shift_remove(name);
                    } else {
                        match live_map.get_mut(name) {
                            Some(live_value) if !live_value.is_null() => {
                                let child = fieldpath::child_schema(schema, name);
                                merge_applied(live_value, config_value, child.as_ref(), path);
                            }
                            _ => {
                                live_map.insert(name.clone(), without_nulls(config_value));
                            }
                        }
                    }
                }
                path.pop();
            }
        }
        (Shape::Associative(config_items, keys), Value::Array(live_items)) => {
            let item_schema = fieldpath::items_schema(schema);
            for (index, config_item) in config_items.iter().enumerate() {
                let element = fieldpath::item_element(config_item, keys.as_deref(), index);
                let found = live_items.iter().enumerate().position(|(position, item)| {
                    fieldpath::item_element(item, keys.as_deref(), position) == element
                });
                match (found, keys.is_some()) {
                    (Some(position), true) => {
                        path.push(element);
                        merge_applied(
                            &mut live_items[position],
                            config_item,
                            item_schema.as_ref(),
                            path,
                        );
                        path.pop();
                    }
                    (Some(_), false) => {}
                    (None, _) => live_items.push(without_nulls(config_item)),
                }
            }
        }
        (_, live) => *live = without_nulls(config),
    }
}

/// Completes associative-list items of the configuration that lack some key fields: first
/// from the key field's schema `default`, then from the live item whose present key fields
/// match (e.g. a container port without `protocol` matches the live `TCP` port the server
/// defaulted), so that configuration and live items get the same path element.
fn fill_missing_keys(config: &mut Value, live: Option<&Value>, schema: Option<&Schema>) {
    match config {
        Value::Object(map) => {
            if schema.is_some_and(|schema| schema.map_type() == capstan_schema::MapType::Atomic) {
                return;
            }
            for (name, value) in map.iter_mut() {
                let child = fieldpath::child_schema(schema, name);
                fill_missing_keys(value, field(live, name), child.as_ref());
            }
        }
        Value::Array(items) => {
            let Some(capstan_schema::ListType::Map(keys)) = schema.map(Schema::list_type) else {
                return;
            };
            let item_schema = fieldpath::items_schema(schema);
            let live_items: &[Value] = live.and_then(Value::as_array).map_or(&[], Vec::as_slice);
            for item in items.iter_mut() {
                let Value::Object(map) = item else {
                    continue;
                };
                for key in &keys {
                    if !map.contains_key(key)
                        && let Some(default) = item_schema
                            .as_ref()
                            .and_then(|schema| schema.property(key))
                            .and_then(|schema| schema.default_value().cloned())
                    {
                        map.insert(key.clone(), default);
                    }
                }
                let present: Vec<&String> =
                    keys.iter().filter(|key| map.contains_key(*key)).collect();
                let live_item = if present.is_empty() {
                    None
                } else {
                    live_items.iter().find(|candidate| {
                        present
                            .iter()
                            .all(|key| candidate.get(key.as_str()) == map.get(key.as_str()))
                    })
                };
                if let Some(Value::Object(live_map)) = live_item
                    && present.len() < keys.len()
                {
                    for key in &keys {
                        if !map.contains_key(key)
                            && let Some(value) = live_map.get(key)
                        {
                            map.insert(key.clone(), value.clone());
                        }
                    }
                }
                fill_missing_keys(item, live_item, item_schema.as_ref());
            }
        }
        _ => {}
    }
}

/// Whether `path` ends at a key field of an associative-list item (kept while the item stays).
fn is_key_field(path: &[PathElement]) -> bool {
    match path {
        [.., PathElement::Key(fields), PathElement::Field(name)] => {
            fields.iter().any(|(key, _)| key == name)
        }
        _ => false,
    }
}

fn matches_element(item: &Value, element: &PathElement, position: usize) -> bool {
    match element {
        PathElement::Field(_) => false,
        PathElement::Key(fields) => fields.iter().all(|(key, value)| {
            item.get(key).is_some_and(|found| {
                crate::value::compare(found, value) == std::cmp::Ordering::Equal
            })
        }),
        PathElement::Value(value) => {
            crate::value::compare(item, value) == std::cmp::Ordering::Equal
        }
        PathElement::Index(index) => *index == position,
    }
}

fn child_mut<'a>(value: &'a mut Value, element: &PathElement) -> Option<&'a mut Value> {
    match (value, element) {
        (Value::Object(map), PathElement::Field(name)) => map.get_mut(name),
        (Value::Array(items), element) => items
            .iter_mut()
            .enumerate()
            .find(|(position, item)| matches_element(item, element, *position))
            .map(|(_, item)| item),
        _ => None,
    }
}

fn value_at<'a>(value: &'a Value, path: &[PathElement]) -> Option<&'a Value> {
    let mut current = value;
    for element in path {
        current = match (current, element) {
            (Value::Object(map), PathElement::Field(name)) => map.get(name)?,
            (Value::Array(items), element) => items
                .iter()
                .enumerate()
                .find(|(position, item)| matches_element(item, element, *position))
                .map(|(_, item)| item)?,
            _ => return None,
        };
    }
    Some(current)
}

/// The path of the value `path` designates in `object`, with list items named by their own
/// (schema-derived) element; `None` when nothing is there.
fn canonical_path(
    object: &Value,
    path: &[PathElement],
    schema: Option<&Schema>,
) -> Option<Vec<PathElement>> {
    let mut current = object;
    let mut schema = schema.cloned();
    let mut canonical = Vec::with_capacity(path.len());
    for element in path {
        match (current, element) {
            (Value::Object(map), PathElement::Field(name)) => {
                current = map.get(name)?;
                schema = fieldpath::child_schema(schema.as_ref(), name);
                canonical.push(element.clone());
            }
            (Value::Array(items), element) => {
                let (position, item) = items
                    .iter()
                    .enumerate()
                    .find(|(position, item)| matches_element(item, element, *position))?;
                let keys = match schema.as_ref().map(Schema::list_type) {
                    Some(capstan_schema::ListType::Map(keys)) => Some(keys),
                    _ => None,
                };
                canonical.push(match element {
                    PathElement::Key(_) => fieldpath::item_element(item, keys.as_deref(), position),
                    other => other.clone(),
                });
                current = item;
                schema = fieldpath::items_schema(schema.as_ref());
            }
            _ => return None,
        }
    }
    Some(canonical)
}

/// Removes the value at `path`; returns whether something was removed.
fn remove_path(object: &mut Value, path: &[PathElement]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut current = object;
    for element in parents {
        let Some(next) = child_mut(current, element) else {
            return false;
        };
        current = next;
    }
    match (current, last) {
        (Value::Object(map), PathElement::Field(name)) => map.shift_remove(name).is_some(),
        (Value::Array(items), element) => {
            let found = items
                .iter()
                .enumerate()
                .position(|(position, item)| matches_element(item, element, position));
            found.map(|position| items.remove(position)).is_some()
        }
        _ => false,
    }
}

/// After pruning, removes maps and lists left empty above `path`, unless the configuration
/// sets them or another manager owns something there.
fn remove_empty_ancestors(
    object: &mut Value,
    path: &[PathElement],
    config: &Value,
    owned: &FieldSet,
) {
    for length in (1..path.len()).rev() {
        let ancestor = &path[..length];
        let empty = match value_at(object, ancestor) {
            Some(Value::Object(map)) => map.is_empty(),
            Some(Value::Array(items)) => items.is_empty(),
            _ => false,
        };
        if !empty || owned.contains_prefix(ancestor) || value_at(config, ancestor).is_some() {
            return;
        }
        remove_path(object, ancestor);
    }
}

#[cfg(test)]
mod tests;
