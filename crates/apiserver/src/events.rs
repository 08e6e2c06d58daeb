//! Events: `core/v1` Event and `events.k8s.io/v1` Event are one store seen two ways, as in
//! kube-apiserver. Objects are stored in the `core/v1` form; an `events.k8s.io/v1` request reads
//! and writes through the field mapping of Kubernetes' `pkg/apis/events/v1` conversion:
//!
//! | `core/v1`            | `events.k8s.io/v1`         |
//! |----------------------|----------------------------|
//! | `message`            | `note`                     |
//! | `involvedObject`     | `regarding`                |
//! | `source`             | `deprecatedSource`         |
//! | `firstTimestamp`     | `deprecatedFirstTimestamp` |
//! | `lastTimestamp`      | `deprecatedLastTimestamp`  |
//! | `count`              | `deprecatedCount`          |
//! | `reportingComponent` | `reportingController`      |
//!
//! `eventTime`, `series`, `related`, `reason`, `type`, `action` and `reportingInstance` carry over
//! unchanged. Both views print the same table (`kubectl get events`): LAST SEEN, TYPE, REASON,
//! OBJECT, MESSAGE, and with `-o wide` SUBOBJECT, SOURCE, FIRST SEEN, COUNT, NAME.

use serde_json::{Map, Value, json};

use crate::registry::{ResourceType, StorageKey};
use crate::table;

/// The `events.k8s.io` group.
pub const GROUP: &str = "events.k8s.io";

/// `(core/v1 name, events.k8s.io/v1 name)` of the fields that differ.
const RENAMED: &[(&str, &str)] = &[
    ("message", "note"),
    ("involvedObject", "regarding"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

/// Whether `rt` is one of the two Event resources.
pub fn is_event(rt: &ResourceType) -> bool {
    rt.builtin && rt.plural == "events" && (rt.group.is_empty() || rt.group == GROUP)
}

/// Whether `rt` is `events.k8s.io` Events, served from the `core/v1` store.
pub fn is_events_group(rt: &ResourceType) -> bool {
    rt.builtin && rt.plural == "events" && rt.group == GROUP
}

/// Where Events of either group are stored.
pub fn storage_key() -> StorageKey {
    StorageKey {
        group: String::new(),
        resource: "events".into(),
    }
}

fn rename(object: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = object.remove(from) {
        object.insert(to.to_owned(), v);
    }
}

/// An `events.k8s.io/v1` Event in its `core/v1` form (the stored form).
pub fn to_core(mut event: Value) -> Value {
    if let Some(o) = event.as_object_mut() {
        for (core, events) in RENAMED {
            rename(o, events, core);
        }
        o.insert("apiVersion".into(), json!("v1"));
        o.entry("involvedObject").or_insert_with(|| json!({}));
        o.entry("source").or_insert_with(|| json!({}));
    }
    event
}

/// A `core/v1` Event in its `events.k8s.io/v1` form.
pub fn to_events_group(mut event: Value) -> Value {
    if let Some(o) = event.as_object_mut() {
        for (core, events) in RENAMED {
            rename(o, core, events);
        }
        o.insert("apiVersion".into(), json!(format!("{GROUP}/v1")));
        // An empty source is Go's zero value, which the events.k8s.io form omits.
        if o.get("deprecatedSource")
            .is_some_and(|s| s.as_object().is_some_and(Map::is_empty))
        {
            o.remove("deprecatedSource");
        }
    }
    event
}

/// Converts `stored` (either form) to the form `rt` serves.
pub fn present(rt: &ResourceType, stored: &Value) -> Value {
    let is_core = stored.get("apiVersion").and_then(Value::as_str) == Some("v1");
    match (is_events_group(rt), is_core) {
        (true, true) => to_events_group(stored.clone()),
        (false, false) => to_core(stored.clone()),
        _ => stored.clone(),
    }
}

fn text<'a>(event: &'a Value, pointer: &str) -> &'a str {
    event.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn first_non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() { b } else { a }
}

/// The cells of one row of kube-apiserver's Event printer, from the `core/v1` form: last seen,
/// type, reason, object, subobject, source, message, first seen, count, name.
fn row(event: &Value) -> Vec<Value> {
    let timestamp = |field: &str| event.get(field).and_then(Value::as_str);
    let first_seen = timestamp("firstTimestamp").or_else(|| timestamp("eventTime"));
    let mut last_seen = timestamp("lastTimestamp").or(first_seen);
    let mut count = event.get("count").and_then(Value::as_i64).unwrap_or(0);
    if let Some(series) = event.get("series").filter(|s| s.is_object()) {
        last_seen = series.get("lastObservedTime").and_then(Value::as_str);
        count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
    } else if count == 0 {
        // Singleton events of the events.k8s.io API have no count.
        count = 1;
    }
    let kind = text(event, "/involvedObject/kind").to_lowercase();
    let name = text(event, "/involvedObject/name");
    let object = if name.is_empty() {
        kind
    } else {
        format!("{kind}/{name}")
    };
    let component = first_non_empty(
        text(event, "/source/component"),
        text(event, "/reportingComponent"),
    );
    let instance = first_non_empty(
        text(event, "/source/host"),
        text(event, "/reportingInstance"),
    );
    let source = if instance.is_empty() {
        component.to_owned()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(table::age(last_seen)),
        json!(text(event, "/type")),
        json!(text(event, "/reason")),
        json!(object),
        json!(text(event, "/involvedObject/fieldPath")),
        json!(source),
        json!(text(event, "/message")),
        json!(table::age(first_seen)),
        json!(count),
        json!(text(event, "/metadata/name")),
    ]
}

/// The `Table` of Events (either form), as kube-apiserver prints them.
pub fn table(events: &[Value], resource_version: &str, include_object: &str) -> Value {
    let column = |name: &str, type_: &str, format: &str, priority: i64| json!({"name": name, "type": type_, "format": format, "description": "", "priority": priority});
    let columns = vec![
        column("Last Seen", "string", "", 0),
        column("Type", "string", "", 0),
        column("Reason", "string", "", 0),
        column("Object", "string", "", 0),
        column("Subobject", "string", "", 1),
        column("Source", "string", "", 1),
        column("Message", "string", "", 0),
        column("First Seen", "string", "", 1),
        column("Count", "integer", "", 1),
        column("Name", "string", "name", 1),
    ];
    let rows: Vec<Value> = events
        .iter()
        .map(|event| {
            let core = if event.get("apiVersion").and_then(Value::as_str) == Some("v1") {
                row(event)
            } else {
                row(&to_core(event.clone()))
            };
            let mut row = json!({"cells": core});
            match include_object {
                "None" => {}
                "Object" => row["object"] = event.clone(),
                _ => row["object"] = table::partial_metadata(event),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_forms_map_field_for_field() {
        let events = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "x.1", "namespace": "team"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "regarding": {"kind": "Kustomization", "name": "apps", "namespace": "team"},
            "note": "applied", "reason": "ReconciliationSucceeded", "type": "Normal",
            "action": "Reconcile", "reportingController": "kustomize-controller",
            "reportingInstance": "kustomize-controller",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"},
            "deprecatedCount": 3,
        });
        let core = to_core(events.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "applied");
        assert_eq!(core["involvedObject"]["name"], "apps");
        assert_eq!(core["reportingComponent"], "kustomize-controller");
        assert_eq!(core["count"], 3);
        assert_eq!(core["series"]["count"], 2);
        assert_eq!(core["source"], json!({}));
        assert!(core.get("note").is_none() && core.get("regarding").is_none());
        assert_eq!(to_events_group(core), events, "the round trip is exact");
    }
}
