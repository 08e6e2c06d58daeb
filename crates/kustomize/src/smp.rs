//! Strategic merge as kustomize (kyaml) applies it: [`capstan_patch::strategic_merge`]
//! (new list elements from the patch come first, as in kyaml), except that list elements
//! carrying `$patch: replace` are ignored, as kyaml ignores them.

use capstan_schema::Schema;
use serde_json::Value;

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
