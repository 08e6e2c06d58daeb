//! Strategic merge as kustomize (kyaml) applies it: [`capstan_patch::strategic_merge`]
//! (new list elements from the patch come first, as in kyaml), except that list elements
//! carrying `$patch: replace` are ignored, as kyaml ignores them.

use crate::error::TransformError;
use std::collections::HashMap;

use capstan_schema::Schema;
use serde_json::Value;

/// Group, version and kind.
type Gvk = (String, String, String);

/// The schemas strategic merge patches consult: those of `openapi:` documents (the kinds
/// they declare through `x-kubernetes-group-version-kind`), then the built-in Kubernetes
/// ones.
#[derive(Default)]
pub(crate) struct Schemas {
    custom: HashMap<Gvk, Schema>,
}

impl Schemas {
    /// Reads an OpenAPI document (`definitions` of v2, or `components.schemas` of v3) and
    /// compiles the schema of every kind it declares.
    pub fn from_document(document: &Value) -> Result<Self, TransformError> {
        let (definitions, prefix) = if let Some(found) = document.get("definitions") {
            (found, "#/definitions/")
        } else if let Some(found) = document.pointer("/components/schemas") {
            (found, "#/components/schemas/")
        } else {
            return Err("the document has no definitions (or components.schemas) mapping".into());
        };
        let definitions = definitions
            .as_object()
            .ok_or("definitions must be a mapping")?;
        let mut custom = HashMap::new();
        for (name, definition) in definitions {
            let kinds = definition
                .get("x-kubernetes-group-version-kind")
                .and_then(Value::as_array);
            for gvk in kinds.into_iter().flatten() {
                let field = |key: &str| {
                    gvk.get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                let root = serde_json::json!({ "$ref": format!("{prefix}{name}") });
                let schema = Schema::from_openapi(&root, definitions).map_err(|source| {
                    TransformError::Schema {
                        context: format!("definition {name}"),
                        source,
                    }
                })?;
                custom.insert((field("group"), field("version"), field("kind")), schema);
            }
        }
        Ok(Schemas { custom })
    }

    /// Adds the kinds of `other`, which win over kinds already known.
    pub fn extend(&mut self, other: Schemas) {
        self.custom.extend(other.custom);
    }

    /// The schema of a kind: the custom one, else the built-in one.
    pub fn lookup(&self, group: &str, version: &str, kind: &str) -> Option<Schema> {
        let key = (group.to_owned(), version.to_owned(), kind.to_owned());
        match self.custom.get(&key) {
            Some(schema) => Some(schema.clone()),
            None => capstan_schema::builtin::schema(group, version, kind),
        }
    }
}

/// Map fields of built-in kinds whose patch strategy is `replace` (a test checks this list
/// against the built-in definitions).
const MAP_REPLACE_FIELDS: &[&str] = &["selector"];

/// Whether the merge of `patch` can depend on a schema: it holds a list, a `$` directive
/// or a map field whose built-in strategy is `replace`. Everything else merges maps key by
/// key, schema or not — so builds whose patches are all plain maps never pay for loading
/// the built-in schemas.
pub(crate) fn needs_schema(patch: &Value) -> bool {
    match patch {
        Value::Array(_) => true,
        Value::Object(map) => map.iter().any(|(key, value)| {
            key.starts_with('$')
                || MAP_REPLACE_FIELDS.contains(&key.as_str())
                || needs_schema(value)
        }),
        _ => false,
    }
}

/// Merges `patch` into `original`.
pub(crate) fn merge(
    original: &Value,
    patch: &Value,
    schema: Option<&Schema>,
) -> Result<Value, capstan_patch::PatchError> {
    let mut patch = patch.clone();
    drop_element_replace(&mut patch);
    capstan_patch::strategic_merge(original, &patch, schema)
}

fn drop_element_replace(node: &mut Value) {
    match node {
        Value::Object(map) => map.values_mut().for_each(drop_element_replace),
        Value::Array(items) => {
            items.retain(|item| item.get("$patch").and_then(Value::as_str) != Some("replace"));
            items.iter_mut().for_each(drop_element_replace);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn map_replace_fields_match_builtin_definitions() {
        let mut found = Vec::new();
        for definition in capstan_schema::builtin::definitions().values() {
            let Some(properties) = definition.get("properties").and_then(Value::as_object) else {
                continue;
            };
            for (name, property) in properties {
                let replace = property
                    .get("x-kubernetes-patch-strategy")
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.split(',').any(|p| p.trim() == "replace"));
                let is_list = property.get("type").and_then(Value::as_str) == Some("array");
                if replace && !is_list {
                    found.push(name.clone());
                }
            }
        }
        assert!(!found.is_empty(), "the PodDisruptionBudget selector is one");
        for name in found {
            assert!(MAP_REPLACE_FIELDS.contains(&name.as_str()), "{name}");
        }
    }

    #[test]
    fn plain_map_patches_need_no_schema() {
        assert!(!needs_schema(
            &json!({"spec": {"replicas": 3, "template": {"metadata": {"labels": {"a": "b"}}}}})
        ));
        assert!(needs_schema(
            &json!({"spec": {"template": {"spec": {"containers": []}}}})
        ));
        assert!(needs_schema(
            &json!({"spec": {"selector": {"matchLabels": {"a": "b"}}}})
        ));
        assert!(needs_schema(&json!({"metadata": {"$patch": "delete"}})));
    }

    #[test]
    fn new_elements_first_and_element_replace_ignored() {
        let schema = capstan_schema::builtin::schema("apps", "v1", "Deployment");
        let original =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "a"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b"}, {"name": "a", "$patch": "replace", "image": "x"}]}}}});
        let merged = merge(&original, &patch, schema.as_ref()).unwrap();
        let names: Vec<&str> = merged["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(
            merged["spec"]["template"]["spec"]["containers"][1]["image"],
            "a"
        );
    }
}
