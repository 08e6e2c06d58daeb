//! Garbage collection by `ownerReferences`: background deletion of dependents whose owners are
//! gone, foreground deletion (`foregroundDeletion` finalizer) and orphaning (`orphan` finalizer).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use crate::cluster::{
    Cluster, DeleteOptions, FOREGROUND_FINALIZER, ORPHAN_FINALIZER, Propagation, finalizers,
};
use crate::registry::ResourceType;
use crate::store::{EventType, Stored};

const MANAGER: &str = "capstan-garbage-collector";

struct Entry {
    rt: Arc<ResourceType>,
    object: Arc<Stored>,
}

fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn owner_refs(obj: &Value) -> Vec<Value> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Whether the owner an ownerReference names is really gone: looked up by kind and name in the
/// dependent's namespace (or cluster-wide) and compared by UID. An owner of a kind the server does
/// not know counts as present, so nothing is deleted on a guess.
fn owner_absent(cluster: &Cluster, owner: &Value, namespace: &str) -> bool {
    let field = |k: &str| owner.get(k).and_then(Value::as_str).unwrap_or("");
    let Some(rt) = cluster
        .registry()
        .by_kind(field("apiVersion"), field("kind"))
    else {
        return false;
    };
    match cluster.get_stored(&rt, Some(namespace), field("name")) {
        Ok(found) => found.uid() != field("uid"),
        Err(e) => e.code == 404,
    }
}

fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp").is_some()
}

/// One pass over every object. Returns whether it changed anything.
pub fn sweep(cluster: &Cluster) -> bool {
    let entries = snapshot(cluster);
    let by_uid: HashMap<&str, &Entry> = entries.iter().map(|e| (e.object.uid(), e)).collect();
    let mut dependents: HashMap<&str, Vec<&Entry>> = HashMap::new();
    for e in &entries {
        for uid in owner_uids(&e.object.value) {
            if let Some((k, _)) = by_uid.get_key_value(uid.as_str()) {
                dependents.entry(k).or_default().push(e);
            }
        }
    }
    let deleted = delete_orphaned(cluster, &entries, &by_uid);
    let mut changed = !deleted.is_empty();
    // Owners being deleted in the foreground or orphaning.
    for e in &entries {
        if !deleting(&e.object.value) {
            continue;
        }
        let deps: Vec<&Entry> = dependents.get(e.object.uid()).cloned().unwrap_or_default();
        let fins = finalizers(&e.object.value);
        if fins.iter().any(|f| f == ORPHAN_FINALIZER) {
            orphan_dependents(cluster, e, &deps);
            changed = true;
        } else if fins.iter().any(|f| f == FOREGROUND_FINALIZER) {
            changed |= delete_in_foreground(cluster, e, &deps, &deleted);
        }
    }
    changed
}

/// Every stored object with its type.
fn snapshot(cluster: &Cluster) -> Vec<Entry> {
    let mut entries = Vec::new();
    for rt in cluster.registry().storage_types() {
        let (objects, _) = cluster.list(&rt, None);
        for object in objects {
            entries.push(Entry {
                rt: Arc::clone(&rt),
                object,
            });
        }
    }
    entries
}

/// Deletes (in the background) the dependents whose owners are all gone. Returns the UIDs it
/// deleted.
fn delete_orphaned(
    cluster: &Cluster,
    entries: &[Entry],
    by_uid: &HashMap<&str, &Entry>,
) -> HashSet<String> {
    let mut deleted: HashSet<String> = HashSet::new();
    for e in entries {
        let owners = owner_uids(&e.object.value);
        if owners.is_empty() || deleting(&e.object.value) {
            continue;
        }
        // The snapshot is not atomic: confirm with fresh reads that every owner is gone
        // before deleting, and only delete the very object that was seen (its UID).
        if owners.iter().all(|u| !by_uid.contains_key(u.as_str()))
            && owner_refs(&e.object.value)
                .iter()
                .all(|r| owner_absent(cluster, r, e.object.namespace()))
        {
            let ns = e.object.namespace().to_owned();
            let opts = DeleteOptions {
                propagation: Some(Propagation::Background),
                precondition_uid: Some(e.object.uid().to_owned()),
                ..DeleteOptions::default()
            };
            if cluster
                .delete(&e.rt, Some(&ns), e.object.name(), &opts)
                .is_ok()
            {
                deleted.insert(e.object.uid().to_owned());
            }
        }
    }
    deleted
}

/// An owner orphaning: drops its ownerReference from every dependent, then its finalizer.
fn orphan_dependents(cluster: &Cluster, owner: &Entry, deps: &[&Entry]) {
    let uid = owner.object.uid();
    for d in deps {
        let dns = d.object.namespace().to_owned();
        let _ = cluster.mutate(&d.rt, Some(&dns), d.object.name(), None, MANAGER, |obj| {
            let Some(refs) = obj
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            else {
                return false;
            };
            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
            if refs.is_empty()
                && let Some(m) = obj["metadata"].as_object_mut()
            {
                m.remove("ownerReferences");
            }
            true
        });
    }
    let ns = owner.object.namespace().to_owned();
    let _ = cluster.mutate(
        &owner.rt,
        Some(&ns),
        owner.object.name(),
        None,
        MANAGER,
        |obj| remove_finalizer(obj, ORPHAN_FINALIZER),
    );
}

/// An owner deleted in the foreground: deletes its remaining dependents (in the foreground too),
/// or drops its finalizer once none remain (`deleted`: those this pass already deleted). Returns
/// whether it changed anything.
fn delete_in_foreground(
    cluster: &Cluster,
    owner: &Entry,
    deps: &[&Entry],
    deleted: &HashSet<String>,
) -> bool {
    let remaining: Vec<&&Entry> = deps
        .iter()
        .filter(|d| !deleted.contains(d.object.uid()))
        .collect();
    if remaining.is_empty() {
        let ns = owner.object.namespace().to_owned();
        let _ = cluster.mutate(
            &owner.rt,
            Some(&ns),
            owner.object.name(),
            None,
            MANAGER,
            |obj| remove_finalizer(obj, FOREGROUND_FINALIZER),
        );
        return true;
    }
    let mut changed = false;
    for d in remaining {
        if deleting(&d.object.value) {
            continue;
        }
        let dns = d.object.namespace().to_owned();
        let opts = DeleteOptions {
            propagation: Some(Propagation::Foreground),
            precondition_uid: Some(d.object.uid().to_owned()),
            ..DeleteOptions::default()
        };
        if cluster
            .delete(&d.rt, Some(&dns), d.object.name(), &opts)
            .is_ok()
        {
            changed = true;
        }
    }
    changed
}

fn remove_finalizer(obj: &mut Value, finalizer: &str) -> bool {
    let Some(list) = obj
        .pointer_mut("/metadata/finalizers")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let before = list.len();
    list.retain(|f| f.as_str() != Some(finalizer));
    before != list.len()
}

fn relevant(type_: EventType, object: &Value) -> bool {
    type_ == EventType::Deleted
        || (deleting(object)
            && finalizers(object)
                .iter()
                .any(|f| f == FOREGROUND_FINALIZER || f == ORPHAN_FINALIZER))
        || (type_ == EventType::Added && object.pointer("/metadata/ownerReferences").is_some())
}

/// Runs the collector until the cluster is dropped.
pub async fn run(cluster: Cluster) {
    let mut events = cluster.store().subscribe_all();
    loop {
        let wake = match events.recv().await {
            Ok(e) => relevant(e.type_, &e.object.value),
            Err(RecvError::Lagged(_)) => true,
            Err(RecvError::Closed) => return,
        };
        if !wake {
            continue;
        }
        // Let a burst of deletes settle, then sweep until nothing changes.
        tokio::time::sleep(Duration::from_millis(20)).await;
        while let Ok(e) = events.try_recv() {
            let _ = e;
        }
        for _ in 0..32 {
            if !sweep(&cluster) {
                break;
            }
        }
    }
}
