//! Pruning of unknown fields and defaulting, as the API server does for custom resources.
//!
//! # Pruning rules
//!
//! * An object field is kept when the node declares it as a property, or when the node has an
//!   `additionalProperties` schema (the field is then pruned by that schema), or when the node
//!   sets `x-kubernetes-preserve-unknown-fields` (kept untouched). Anything else is removed and
//!   its path (`spec.foo`, `spec.containers[0].bogus`) reported.
//! * Declared properties are always walked, also below a preserving node, so nested schemas
//!   switch back to normal pruning.
//! * At the node pruning starts from (a resource root) and at every
//!   `x-kubernetes-embedded-resource` object, `apiVersion` and `kind` are kept even when not
//!   declared, and `metadata` is pruned against `ObjectMeta` whatever the schema declares for it
//!   (CRD schemas usually say just `type: object`).
//! * A `null` in a declared property that is neither `nullable` nor has a `default` is removed
//!   silently (it is not an unknown field); one with a default is left for
//!   [`crate::Schema::apply_defaults`] to replace.

use serde_json::{Map, Value};

use crate::compile::{Additional, NodeId, Registry};
use crate::path::Path;

pub(crate) fn prune(registry: &Registry, id: NodeId, value: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    walk(registry, id, value, &Path::Root, true, &mut pruned);
    pruned
}

fn walk(
    registry: &Registry,
    id: NodeId,
    value: &mut Value,
    path: &Path<'_>,
    boundary: bool,
    out: &mut Vec<String>,
) {
    let node = registry.node(id);
    match value {
        Value::Object(map) => {
            let boundary = boundary || node.embedded_resource;
            object(registry, id, map, path, boundary, out);
        }
        Value::Array(items) => {
            if let Some(item) = node.items {
                for (index, value) in items.iter_mut().enumerate() {
                    walk(registry, item, value, &Path::Index(path, index), false, out);
                }
            }
        }
        _ => {}
    }
}

fn object(
    registry: &Registry,
    id: NodeId,
    map: &mut Map<String, Value>,
    path: &Path<'_>,
    boundary: bool,
    out: &mut Vec<String>,
) {
    let node = registry.node(id);
    map.retain(|key, value| {
        if boundary {
            match key.as_str() {
                "apiVersion" | "kind" => return true,
                "metadata" => {
                    let meta = crate::builtin::object_meta();
                    walk(
                        &meta.registry,
                        meta.id,
                        value,
                        &Path::Field(path, key),
                        false,
                        out,
                    );
                    return true;
                }
                _ => {}
            }
        }
        if let Some(child) = node.property(key) {
            let child_node = registry.node(child);
            if value.is_null() {
                return child_node.nullable || child_node.default.is_some();
            }
            walk(registry, child, value, &Path::Field(path, key), false, out);
            return true;
        }
        match node.additional {
            Additional::Schema(child) => {
                walk(registry, child, value, &Path::Key(path, key), false, out);
                true
            }
            _ if node.preserve_unknown => true,
            _ => {
                out.push(Path::Field(path, key).to_string());
                false
            }
        }
    });
}

pub(crate) fn apply_defaults(registry: &Registry, id: NodeId, value: &mut Value) {
    let node = registry.node(id);
    match value {
        Value::Object(map) => {
            for (name, child) in &node.properties {
                let child_node = registry.node(*child);
                let Some(default) = &child_node.default else {
                    continue;
                };
                match map.get_mut(name.as_ref()) {
                    None => {
                        map.insert(name.to_string(), default.clone());
                    }
                    Some(slot) if slot.is_null() && !child_node.nullable => *slot = default.clone(),
                    Some(_) => {}
                }
            }
            for (key, value) in map.iter_mut() {
                if let Some(child) = node.property(key) {
                    apply_defaults(registry, child, value);
                } else if let Additional::Schema(child) = node.additional {
                    apply_defaults(registry, child, value);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = node.items {
                for value in items {
                    apply_defaults(registry, item, value);
                }
            }
        }
        _ => {}
    }
}
