//! Patches and field ownership for Kubernetes objects.
//!
//! This crate holds the object-level algorithms an API server (and an apply engine) needs:
//!
//! - [`merge_patch`]: RFC 7386 JSON merge patch (`application/merge-patch+json`);
//! - [`json_patch()`]: RFC 6902 JSON patch (`application/json-patch+json`), atomic;
//! - [`strategic_merge`]: Kubernetes strategic merge patch
//!   (`application/strategic-merge-patch+json`), driven by the patch metadata of a
//!   [`capstan_schema::Schema`], with the `$patch`, `$retainKeys`, `$setElementOrder/…` and
//!   `$deleteFromPrimitiveList/…` directives;
//! - [`fieldpath::FieldSet`]: structured-merge-diff field sets and their `FieldsV1` encoding;
//! - [`managed`]: server-side apply ([`managed::apply`]) and the `managedFields` bookkeeping
//!   of ordinary writes ([`managed::record_update`]).
//!
//! Everything works on untyped [`serde_json::Value`]s and never panics on bad input.
//!
//! ```
//! use serde_json::json;
//!
//! let live = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
//! let patched = capstan_patch::strategic_merge(&live, &json!({"metadata": {"labels": {"b": null}}}), None)?;
//! assert_eq!(patched, json!({"metadata": {"labels": {"a": "1"}}}));
//! # Ok::<(), capstan_patch::PatchError>(())
//! ```

pub mod fieldpath;
pub mod managed;
mod strategic;
mod value;

use capstan_schema::Schema;
use serde_json::Value;

/// Why a patch could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch (or the document it applies to) is malformed.
    #[error("invalid patch: {0}")]
    Invalid(String),
    /// An RFC 6902 operation failed (missing path, failed `test`, …).
    #[error("json patch failed: {0}")]
    JsonPatch(String),
}

/// RFC 7386 JSON merge patch, in place.
///
/// Objects merge recursively, `null` removes a member, anything else (arrays included)
/// replaces the target value.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let Value::Object(target_map) = target else {
        return;
    };
    for (key, patch_value) in patch_map {
        if patch_value.is_null() {
            target_map.remove(key);
        } else {
            let slot = target_map.entry(key.clone()).or_insert(Value::Null);
            merge_patch(slot, patch_value);
        }
    }
}

/// RFC 6902 JSON patch, in place (atomic: on error `target` is unchanged).
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let operations: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|error| PatchError::Invalid(format!("json patch: {error}")))?;
    // Work on a copy so that a failing operation leaves `target` untouched without relying on
    // the crate's undo stack.
    let mut work = target.clone();
    json_patch::patch_unsafe(&mut work, &operations)
        .map_err(|error| PatchError::JsonPatch(error.to_string()))?;
    *target = work;
    Ok(())
}

/// Kubernetes strategic merge patch (with `$patch`, `$retainKeys`, `$setElementOrder/…`,
/// `$deleteFromPrimitiveList/…` directives). Without a schema, lists are replaced and maps merged.
///
/// How a list merges comes from the schema node of the field: an explicit
/// `x-kubernetes-patch-strategy` wins (`replace` replaces; `merge` merges by
/// `x-kubernetes-patch-merge-key`, or uniquely for scalars); without one the
/// [`ListType`](capstan_schema::ListType) decides (`Map(keys)` merges by the first key, `Set`
/// merges scalars uniquely, `Atomic` replaces). Merged lists are ordered as the API server
/// orders them: `$setElementOrder/<field>` first, then the order of the patch list, then the
/// order of the original list.
///
/// Both documents must be JSON objects (an original `null` counts as `{}`).
pub fn strategic_merge(
    original: &Value,
    patch: &Value,
    schema: Option<&Schema>,
) -> Result<Value, PatchError> {
    strategic::strategic_merge(original, patch, schema)
}

#[cfg(test)]
mod tests;
