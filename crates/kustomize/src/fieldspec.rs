//! Walking the fields a [`FieldSpec`] names.

use crate::error::TransformError;
use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::resource::ResId;
use crate::types::FieldSpec;

/// Whether a field spec applies to an object of this id.
pub(crate) fn applies(spec: &FieldSpec, id: &ResId) -> bool {
    id.gvk_selected_by(&spec.group, &spec.version, &spec.kind)
}

/// Splits a field spec path on `/`, honouring `\/` escapes (borrowing when there are none).
pub(crate) fn split_path(path: &str) -> Vec<Cow<'_, str>> {
    if !path.contains('\\') {
        return path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(Cow::Borrowed)
            .collect();
    }
    let mut segments: Vec<Cow<'_, str>> = Vec::new();
    let mut current = String::new();
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek() == Some(&'/') {
            current.push('/');
            chars.next();
        } else if c == '/' {
            segments.push(Cow::Owned(std::mem::take(&mut current)));
        } else {
            current.push(c);
        }
    }
    segments.push(Cow::Owned(current));
    segments.retain(|s| !s.is_empty());
    segments
}

/// Calls `set` on every value at `path` in `node`, creating missing maps when `create`.
/// Sequences met on the way are walked element by element. The value handed to `set` is
/// `Null` when it was just created.
pub(crate) fn visit(
    node: &mut Value,
    path: &str,
    create: bool,
    set: &mut dyn FnMut(&mut Value) -> Result<(), TransformError>,
) -> Result<(), TransformError> {
    let segments = split_path(path);
    walk(node, &segments, create, set)
}

fn walk(
    node: &mut Value,
    segments: &[Cow<'_, str>],
    create: bool,
    set: &mut dyn FnMut(&mut Value) -> Result<(), TransformError>,
) -> Result<(), TransformError> {
    let Some((first, rest)) = segments.split_first() else {
        return set(node);
    };
    match node {
        Value::Array(items) => {
            for item in items {
                walk(item, segments, create, set)?;
            }
            Ok(())
        }
        Value::Object(map) => {
            let (key, is_list) = match first.strip_suffix("[]") {
                Some(key) => (key, true),
                None => (first.as_ref(), false),
            };
            if let Some((field, value)) = selector(key) {
                // `[field=value]`: this node is expected to be an element of a list;
                // handled by the parent list walk.
                if map.get(field).and_then(Value::as_str) == Some(value) {
                    return walk(node, rest, create, set);
                }
                return Ok(());
            }
            let missing = map.get(key).is_none_or(Value::is_null);
            if missing {
                if !create {
                    return Ok(());
                }
                if rest.is_empty() {
                    map.insert(key.to_owned(), Value::Null);
                } else if is_list {
                    map.insert(key.to_owned(), Value::Array(Vec::new()));
                } else {
                    map.insert(key.to_owned(), Value::Object(Map::new()));
                }
            }
            let child = map.get_mut(key).expect("present or just inserted");
            walk(child, rest, create, set)
        }
        _ => Ok(()),
    }
}

fn selector(segment: &str) -> Option<(&str, &str)> {
    let inner = segment.strip_prefix('[')?.strip_suffix(']')?;
    inner.split_once('=')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn walks_lists_and_creates_maps() {
        let mut object = json!({"spec": {"template": {"spec": {"containers": [{"image": "a"}, {"image": "b"}]}}}});
        let mut seen = Vec::new();
        visit(
            &mut object,
            "spec/template/spec/containers[]/image",
            false,
            &mut |v| {
                seen.push(v.as_str().unwrap().to_owned());
                *v = json!("x");
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen, ["a", "b"]);
        assert_eq!(
            object["spec"]["template"]["spec"]["containers"][1]["image"],
            "x"
        );
        visit(&mut object, "metadata/labels", true, &mut |v| {
            assert!(v.is_null());
            *v = json!({"a": "b"});
            Ok(())
        })
        .unwrap();
        assert_eq!(object["metadata"]["labels"]["a"], "b");
        let mut called = false;
        visit(&mut object, "spec/selector", false, &mut |_| {
            called = true;
            Ok(())
        })
        .unwrap();
        assert!(!called);
    }

    #[test]
    fn escaped_slashes() {
        assert_eq!(
            split_path("metadata/annotations/nginx.ingress.kubernetes.io\\/auth-secret"),
            [
                "metadata",
                "annotations",
                "nginx.ingress.kubernetes.io/auth-secret"
            ]
        );
    }
}
