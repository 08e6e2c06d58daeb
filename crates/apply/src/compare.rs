//! Comparing a dry-run result with the live object, ignoring what the server owns.

use serde_json::{Map, Value};

use crate::manager::Drift;
use crate::mask::mask_secret;

/// One object compared with the cluster: its [`Drift`] and the objects it was computed from,
/// normalised (`status` and server-owned metadata removed), so that a diff can be shown without
/// asking the server again.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The drift.
    pub drift: Drift,
    /// The live object; `None` when it does not exist or was not read (skipped objects).
    pub live: Option<Value>,
    /// The server-side dry-run apply result; `None` when the object was not dry-run (it does not
    /// exist, or it is skipped).
    pub dry_run: Option<Value>,
}

impl Comparison {
    /// The live object and the dry-run result as they may be shown: a Secret's values masked
    /// (see [`mask_secret`]). `None` unless both exist.
    pub fn shown(&self) -> Option<(Value, Value)> {
        let mut before = self.live.clone()?;
        let mut after = self.dry_run.clone()?;
        let object = &self.drift.object;
        if object.kind == "Secret" && object.group.is_empty() {
            mask_secret(&mut before, &mut after);
        }
        Some((before, after))
    }
}

/// Metadata fields the server sets or bumps and that say nothing about drift.
const IGNORED_METADATA: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "uid",
    "selfLink",
];

/// The object with server-owned fields removed: `status` and the metadata in `IGNORED_METADATA`.
pub fn normalize(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
            for key in IGNORED_METADATA {
                metadata.remove(*key);
            }
        }
    }
    object
}

/// The dotted paths (`spec.replicas`, `data.key`, `spec.ports[0].port`) at which `desired` and
/// `live` differ, after normalising both; empty when they match.
pub fn changed_paths(desired: &Value, live: &Value) -> Vec<String> {
    let mut paths = Vec::new();
    walk("", &normalize(desired), &normalize(live), &mut paths);
    paths
}

fn walk(path: &str, desired: &Value, live: &Value, out: &mut Vec<String>) {
    match (desired, live) {
        (Value::Object(a), Value::Object(b)) => walk_maps(path, a, b, out),
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                walk(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (a, b) if a == b => {}
        _ => out.push(if path.is_empty() {
            ".".to_owned()
        } else {
            path.to_owned()
        }),
    }
}

fn walk_maps(path: &str, a: &Map<String, Value>, b: &Map<String, Value>, out: &mut Vec<String>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    for (key, x) in a {
        match b.get(key) {
            Some(y) => walk(&join(key), x, y, out),
            None => out.push(join(key)),
        }
    }
    for key in b.keys() {
        if !a.contains_key(key) {
            out.push(join(key));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_owned_fields_are_not_drift() {
        let desired = json!({"metadata": {"name": "x", "resourceVersion": "9", "generation": 3,
            "managedFields": [{"manager": "a"}]}, "spec": {"replicas": 1}, "status": {"ready": 1}});
        let live = json!({"metadata": {"name": "x", "resourceVersion": "7", "generation": 2,
            "managedFields": [{"manager": "b"}]}, "spec": {"replicas": 1}, "status": {"ready": 0}});
        assert!(changed_paths(&desired, &live).is_empty());
    }

    #[test]
    fn changes_are_reported_by_path() {
        let desired = json!({"metadata": {"name": "x", "labels": {"a": "1"}},
            "spec": {"replicas": 2, "ports": [{"port": 80}], "new": true}});
        let live = json!({"metadata": {"name": "x", "labels": {"a": "2"}},
            "spec": {"replicas": 1, "ports": [{"port": 81}], "old": true}});
        assert_eq!(
            changed_paths(&desired, &live),
            [
                "metadata.labels.a",
                "spec.replicas",
                "spec.ports[0].port",
                "spec.new",
                "spec.old"
            ]
        );
        let grown = json!({"data": [1, 2]});
        assert_eq!(changed_paths(&grown, &json!({"data": [1]})), ["data"]);
    }
}
