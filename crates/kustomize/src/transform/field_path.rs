//! Dotted field paths of replacements and vars (`spec.containers.[name=x].image`).

use crate::error::TransformError;
use serde_json::{Map, Value};

/// Splits a replacement field path on dots, keeping `[a.b=c]` selectors whole.
pub(super) fn split_field_path(path: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut depth = 0;
    for c in path.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            '.' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    let mut out = Vec::new();
    for part in parts {
        match part.find('[') {
            Some(at) if at > 0 && part.ends_with(']') => {
                out.push(part[..at].to_owned());
                let inner = &part[at + 1..part.len() - 1];
                if inner.contains('=') {
                    out.push(format!("[{inner}]"));
                } else {
                    out.push(inner.to_owned());
                }
            }
            _ => out.push(part),
        }
    }
    out
}

/// Looks up a dotted field path (`spec.containers.[name=x].image`, `a.0.b`).
pub(crate) fn lookup_path<'v>(node: &'v Value, parts: &[String]) -> Option<&'v Value> {
    let Some((first, rest)) = parts.split_first() else {
        return Some(node);
    };
    match node {
        Value::Object(map) => lookup_path(map.get(map_key(first))?, rest),
        Value::Array(items) => {
            if let Some((key, value)) = first
                .strip_prefix('[')
                .and_then(|s| s.strip_suffix(']'))
                .and_then(|s| s.split_once('='))
            {
                let item = items.iter().find(|i| {
                    i.get(key)
                        .is_some_and(|v| scalar_text(v).as_deref() == Some(value))
                })?;
                lookup_path(item, rest)
            } else {
                lookup_path(items.get(first.parse::<usize>().ok()?)?, rest)
            }
        }
        _ => None,
    }
}

/// `[key.with.dots]` names a map key.
fn map_key(segment: &str) -> &str {
    segment
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .filter(|s| !s.contains('='))
        .unwrap_or(segment)
}

pub(super) fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Visits every node at a dotted path, creating maps when `create` (`*` matches all items).
pub(super) fn visit_path(
    node: &mut Value,
    parts: &[String],
    create: bool,
    found: &mut usize,
    set: &mut dyn FnMut(&mut Value) -> Result<(), TransformError>,
) -> Result<(), TransformError> {
    let Some((first, rest)) = parts.split_first() else {
        *found += 1;
        return set(node);
    };
    match node {
        Value::Object(map) => {
            let first = &map_key(first).to_owned();
            if !map.contains_key(first.as_str()) {
                if !create {
                    return Ok(());
                }
                let fresh = if rest.is_empty() {
                    Value::Null
                } else if (rest[0].starts_with('[') && rest[0].contains('='))
                    || rest[0].parse::<usize>().is_ok()
                {
                    Value::Array(Vec::new())
                } else {
                    Value::Object(Map::new())
                };
                map.insert(first.clone(), fresh);
            }
            let child = map.get_mut(first.as_str()).expect("present");
            visit_path(child, rest, create, found, set)
        }
        Value::Array(items) => {
            if first == "*" {
                for item in items.iter_mut() {
                    visit_path(item, rest, create, found, set)?;
                }
                return Ok(());
            }
            if let Some((key, value)) = first
                .strip_prefix('[')
                .and_then(|s| s.strip_suffix(']'))
                .and_then(|s| s.split_once('='))
            {
                let mut any = false;
                for item in items.iter_mut() {
                    if item
                        .get(key)
                        .is_some_and(|v| scalar_text(v).as_deref() == Some(value))
                    {
                        any = true;
                        visit_path(item, rest, create, found, set)?;
                    }
                }
                if !any && create {
                    let mut fresh = Map::new();
                    fresh.insert(key.to_owned(), Value::String(value.to_owned()));
                    items.push(Value::Object(fresh));
                    let last = items.last_mut().expect("just pushed");
                    visit_path(last, rest, create, found, set)?;
                }
                return Ok(());
            }
            if let Ok(index) = first.parse::<usize>()
                && let Some(item) = items.get_mut(index)
            {
                return visit_path(item, rest, create, found, set);
            }
            Ok(())
        }
        Value::Null if create => {
            *node = Value::Object(Map::new());
            visit_path(node, parts, create, found, set)
        }
        _ => Ok(()),
    }
}
