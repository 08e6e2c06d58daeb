//! Server-side printing: `meta.k8s.io/v1` `Table` responses for `kubectl get`.

use serde_json::{Value, json};

use crate::registry::{PrinterColumn, ResourceType};

/// Evaluates the subset of JSONPath that printer columns use: `.a.b`, `.a[0]`, `.a[*].b`,
/// `.a[?(@.type=="Ready")].status`. Returns every match.
pub fn json_path<'a>(value: &'a Value, path: &str) -> Vec<&'a Value> {
    let path = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut current = vec![value];
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            rest = &r[end..];
            if key.is_empty() {
                continue;
            }
            current = current.into_iter().filter_map(|v| v.get(key)).collect();
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = find_bracket_end(r) else {
                return Vec::new();
            };
            let inner = &r[..end];
            rest = &r[end + 1..];
            current = current
                .into_iter()
                .flat_map(|v| -> Vec<&Value> {
                    let items = v.as_array().map(Vec::as_slice).unwrap_or_default();
                    if inner == "*" {
                        items.iter().collect()
                    } else if let Ok(i) = inner.parse::<usize>() {
                        items.get(i).into_iter().collect()
                    } else if let Some(filter) =
                        inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')'))
                    {
                        items
                            .iter()
                            .filter(|item| filter_matches(item, filter))
                            .collect()
                    } else {
                        let key = inner.trim_matches(|c| c == '\'' || c == '"');
                        v.get(key).into_iter().collect()
                    }
                })
                .collect();
        } else {
            return Vec::new();
        }
    }
    current
}

fn find_bracket_end(s: &str) -> Option<usize> {
    let mut depth = 0;
    let mut quote = None;
    for (i, c) in s.char_indices() {
        match (c, quote) {
            ('"' | '\'', None) => quote = Some(c),
            (q, Some(open)) if q == open => quote = None,
            ('[', None) => depth += 1,
            (']', None) if depth == 0 => return Some(i),
            (']', None) => depth -= 1,
            _ => {}
        }
    }
    None
}

fn filter_matches(item: &Value, filter: &str) -> bool {
    let (lhs, op, rhs) = if let Some((l, r)) = filter.split_once("==") {
        (l, true, r)
    } else if let Some((l, r)) = filter.split_once("!=") {
        (l, false, r)
    } else {
        let path = filter.trim().trim_start_matches('@');
        return !json_path(item, path).is_empty();
    };
    let path = lhs.trim().trim_start_matches('@');
    let expected = rhs.trim().trim_matches(|c| c == '"' || c == '\'');
    let found = json_path(item, path).into_iter().any(|v| match v {
        Value::String(s) => s == expected,
        other => *other == expected,
    });
    found == op
}

fn render(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn count(v: Option<&Value>) -> usize {
    v.and_then(Value::as_object).map_or(0, serde_json::Map::len)
}

/// The cell of `column` for `obj`. `human_dates`: `date` columns print as an age (`26s`, `3d`),
/// as kube-apiserver prints the columns of custom resources; built-in printers print the timestamp.
fn cell(obj: &Value, column: &PrinterColumn, human_dates: bool) -> Value {
    let path = column.json_path.as_str();
    if let Some(computed) = computed_cell(obj, path) {
        return computed;
    }
    let found = json_path(obj, path);
    match found.as_slice() {
        [] => Value::Null,
        [one] => match column.type_.as_str() {
            "integer" | "number" | "boolean" => (*one).clone(),
            "date" if human_dates => json!(age(one.as_str())),
            _ => json!(render(one)),
        },
        many => json!(many.iter().map(|v| render(v)).collect::<Vec<_>>().join(",")),
    }
}

/// The cell of a computed column (a path starting `@`, as built-in printers use), or `None`
/// for a plain JSON path.
fn computed_cell(obj: &Value, path: &str) -> Option<Value> {
    if let Some(paths) = path.strip_prefix("@count:") {
        return Some(json!(
            paths
                .split(',')
                .map(|p| count(json_path(obj, p).first().copied()))
                .sum::<usize>()
        ));
    }
    if let Some(paths) = path.strip_prefix("@ready:") {
        let mut it = paths.split(',');
        let ready = it
            .next()
            .and_then(|p| json_path(obj, p).first().and_then(|v| v.as_i64()))
            .unwrap_or(0);
        let want = it
            .next()
            .and_then(|p| json_path(obj, p).first().and_then(|v| v.as_i64()))
            .unwrap_or(1);
        return Some(json!(format!("{ready}/{want}")));
    }
    let text = match path {
        "@externalip" => external_ip_cell(obj),
        "@ports" => ports_cell(obj),
        "@jobstatus" => job_status_cell(obj),
        "@completions" => {
            let done = obj
                .pointer("/status/succeeded")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let want = obj
                .pointer("/spec/completions")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            format!("{done}/{want}")
        }
        "@podready" => {
            let statuses = obj
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array);
            let total = obj
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let ready = statuses.map_or(0, |s| s.iter().filter(|c| c["ready"] == true).count());
            format!("{ready}/{total}")
        }
        _ => return None,
    };
    Some(json!(text))
}

/// A Service's `EXTERNAL-IP`: pending for a load balancer, none otherwise.
fn external_ip_cell(obj: &Value) -> String {
    let t = obj
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("");
    if t == "LoadBalancer" {
        "<pending>"
    } else {
        "<none>"
    }
    .to_owned()
}

/// A Service's `PORT(S)`: `port[:nodePort]/protocol`, comma-separated.
fn ports_cell(obj: &Value) -> String {
    let ports = obj
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .map(|p| {
                    let port = render(p.get("port").unwrap_or(&Value::Null));
                    let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                    match p.get("nodePort") {
                        Some(n) => format!("{port}:{}/{proto}", render(n)),
                        None => format!("{port}/{proto}"),
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        });
    ports
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "<none>".into())
}

/// A Job's `STATUS`: its first true terminal condition, else running.
fn job_status_cell(obj: &Value) -> String {
    let conds = obj.pointer("/status/conditions").and_then(Value::as_array);
    let has =
        |t: &str| conds.is_some_and(|c| c.iter().any(|c| c["type"] == t && c["status"] == "True"));
    if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else {
        "Running"
    }
    .to_owned()
}

fn definition(name: &str, type_: &str, format: &str, description: &str, priority: i64) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

/// The `PartialObjectMetadata` of an object.
pub fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

/// A `Table` of objects. `include_object`: `None`, `Metadata` (default) or `Object`.
pub fn table(
    rt: &ResourceType,
    objects: &[Value],
    resource_version: &str,
    include_object: &str,
) -> Value {
    if crate::events::is_event(rt) {
        return crate::events::table(objects, resource_version, include_object);
    }
    let mut columns = vec![definition(
        "Name",
        "string",
        "name",
        "Name must be unique within a namespace.",
        0,
    )];
    let mut has_age = false;
    for c in &rt.printer_columns {
        if c.json_path == ".metadata.creationTimestamp" {
            has_age = true;
        }
        columns.push(definition(
            &c.name,
            &c.type_,
            &c.format,
            &c.description,
            c.priority,
        ));
    }
    if !has_age {
        columns.push(definition("Age", "string", "", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0));
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let mut cells = vec![json!(
                obj.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            )];
            for c in &rt.printer_columns {
                cells.push(cell(obj, c, !rt.builtin));
            }
            if !has_age {
                cells.push(json!(age(obj
                    .pointer("/metadata/creationTimestamp")
                    .and_then(Value::as_str))));
            }
            let mut row = json!({"cells": cells});
            match include_object {
                "None" => {}
                "Object" => row["object"] = obj.clone(),
                _ => row["object"] = partial_metadata(obj),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// Kubernetes' short human duration since a timestamp (`5s`, `3m2s`, `4h`, `2d`, `3y40d`), with
/// the cut-offs of apimachinery's `duration.HumanDuration`.
pub fn age(timestamp: Option<&str>) -> String {
    let Some(t) = timestamp.and_then(|t| t.parse::<jiff::Timestamp>().ok()) else {
        return "<unknown>".into();
    };
    human_duration(jiff::Timestamp::now().as_second() - t.as_second())
}

fn human_duration(seconds: i64) -> String {
    const MINUTE: i64 = 60;
    const HOUR: i64 = 60 * MINUTE;
    const DAY: i64 = 24 * HOUR;
    const YEAR: i64 = 365 * DAY;
    let s = seconds;
    if s < -1 {
        return "<invalid>".into();
    }
    let s = s.max(0);
    let pair = |major: i64, unit: &str, minor: i64, minor_unit: &str| {
        if minor == 0 {
            format!("{major}{unit}")
        } else {
            format!("{major}{unit}{minor}{minor_unit}")
        }
    };
    match s {
        s if s < 2 * MINUTE => format!("{s}s"),
        s if s < 10 * MINUTE => pair(s / MINUTE, "m", s % MINUTE, "s"),
        s if s < 3 * HOUR => format!("{}m", s / MINUTE),
        s if s < 8 * HOUR => pair(s / HOUR, "h", (s % HOUR) / MINUTE, "m"),
        s if s < 2 * DAY => format!("{}h", s / HOUR),
        s if s < 8 * DAY => pair(s / DAY, "d", (s % DAY) / HOUR, "h"),
        s if s < 2 * YEAR => format!("{}d", s / DAY),
        s if s < 8 * YEAR => pair(s / YEAR, "y", (s % YEAR) / DAY, "d"),
        s => format!("{}y", s / YEAR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_kubectl_prints_them() {
        let cases = [
            (0, "0s"),
            (119, "119s"),
            (125, "2m5s"),
            (540, "9m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600 + 120, "3h2m"),
            (30 * 3600, "30h"),
            (3 * 86400 + 7200, "3d2h"),
            (400 * 86400, "400d"),
            (3 * 365 * 86400 + 5 * 86400, "3y5d"),
            (10 * 365 * 86400, "10y"),
            (-5, "<invalid>"),
        ];
        for (seconds, printed) in cases {
            assert_eq!(human_duration(seconds), printed, "{seconds} s");
        }
    }

    #[test]
    fn json_path_subset() {
        let v = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Stalled", "status": "False"}]}, "spec": {"url": "x"}});
        assert_eq!(json_path(&v, ".spec.url"), vec![&json!("x")]);
        assert_eq!(
            json_path(&v, ".status.conditions[?(@.type==\"Ready\")].status"),
            vec![&json!("True")]
        );
        assert_eq!(json_path(&v, ".status.conditions[*].type").len(), 2);
        assert_eq!(
            json_path(&v, ".status.conditions[1].type"),
            vec![&json!("Stalled")]
        );
        assert!(json_path(&v, ".nope").is_empty());
    }
}
