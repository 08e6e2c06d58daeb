//! Hiding Secret values before two versions of a Secret are shown side by side.

use serde_json::{Map, Value};

/// The annotation `kubectl apply` stores the whole applied manifest in (Secret values included).
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Replaces Secret values with `***`, marking changed ones `*** (before)` / `*** (after)`:
/// `data`, `stringData` and the `kubectl apply` annotation, which holds a copy of them.
/// `managedFields`, which can name the keys, must already be gone (objects normalised as a
/// [`Comparison`](crate::Comparison) holds them are).
pub fn mask_secret(before: &mut Value, after: &mut Value) {
    for field in ["data", "stringData"] {
        let (mut old, mut new) = (before[field].take(), after[field].take());
        mask_pair(&mut old, &mut new);
        for (object, value) in [(&mut *before, old), (&mut *after, new)] {
            if !value.is_null()
                && let Some(map) = object.as_object_mut()
            {
                map.insert(field.to_owned(), value);
            }
        }
    }
    let annotation = |object: &mut Value| {
        let mut only = Map::new();
        if let Some(value) = object["metadata"]["annotations"]
            .as_object_mut()
            .and_then(|a| a.remove(LAST_APPLIED))
        {
            only.insert(LAST_APPLIED.to_owned(), value);
        }
        Value::Object(only)
    };
    let (mut old, mut new) = (annotation(before), annotation(after));
    mask_pair(&mut old, &mut new);
    for (object, value) in [(before, old), (after, new)] {
        if let Some(masked) = value.get(LAST_APPLIED)
            && let Some(map) = object["metadata"]["annotations"].as_object_mut()
        {
            map.insert(LAST_APPLIED.to_owned(), masked.clone());
        }
    }
}

/// Masks every value of two maps, marking those that differ from the other side.
fn mask_pair(before: &mut Value, after: &mut Value) {
    let old = before.as_object().cloned().unwrap_or_default();
    let new = after.as_object().cloned().unwrap_or_default();
    mask_values(before, &new, "before");
    mask_values(after, &old, "after");
}

fn mask_values(map: &mut Value, other: &Map<String, Value>, suffix: &str) {
    if let Some(values) = map.as_object_mut() {
        for (key, value) in values.iter_mut() {
            let same = other.get(key) == Some(value);
            *value = Value::from(if same {
                "***".to_owned()
            } else {
                format!("*** ({suffix})")
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked() {
        let mut before = serde_json::json!({"data": {"a": "eA==", "b": "eQ=="}});
        let mut after = serde_json::json!({"data": {"a": "eA==", "b": "eg=="}});
        mask_secret(&mut before, &mut after);
        assert_eq!(before["data"]["a"], "***");
        assert_eq!(before["data"]["b"], "*** (before)");
        assert_eq!(after["data"]["b"], "*** (after)");
    }

    #[test]
    fn secret_values_in_the_kubectl_annotation_are_masked() {
        let applied = |value: &str| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "s", "annotations": {
                    LAST_APPLIED: format!("{{\"stringData\":{{\"password\":\"{value}\"}}}}"),
                    "team": "a"
                }},
                "data": {"password": "c2VjcmV0"},
                "stringData": {"token": value}
            })
        };
        let mut before = applied("old-value");
        let mut after = applied("new-value");
        mask_secret(&mut before, &mut after);
        let text = format!("{before}\n{after}");
        assert!(
            !text.contains("old-value") && !text.contains("new-value"),
            "{text}"
        );
        assert_eq!(
            before["metadata"]["annotations"][LAST_APPLIED],
            "*** (before)"
        );
        assert_eq!(
            after["metadata"]["annotations"][LAST_APPLIED],
            "*** (after)"
        );
        assert_eq!(after["metadata"]["annotations"]["team"], "a");
        assert_eq!(after["stringData"]["token"], "*** (after)");
        assert_eq!(after["data"]["password"], "***");
    }
}
