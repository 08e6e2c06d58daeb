//! Namespace lifecycle: deleting a namespace deletes everything in it, then the namespace.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use crate::cluster::{Cluster, DeleteOptions, NAMESPACE_FINALIZER};

const MANAGER: &str = "capstan-namespace-controller";

/// Deletes the contents of terminating namespaces; finalizes those that are empty.
/// Returns whether a namespace is still terminating.
pub fn sweep(cluster: &Cluster) -> bool {
    let Ok(ns_type) = cluster.resource("", "v1", "namespaces") else {
        return false;
    };
    let (namespaces, _) = cluster.list(&ns_type, None);
    let mut pending = false;
    for ns in namespaces {
        if ns.value.pointer("/metadata/deletionTimestamp").is_none() {
            continue;
        }
        let name = ns.name().to_owned();
        let mut remaining = 0;
        let types = cluster.registry().storage_types();
        for rt in types {
            if !rt.namespaced {
                continue;
            }
            let (objects, _) = cluster.list(&rt, Some(&name));
            for o in objects {
                remaining += 1;
                if o.value.pointer("/metadata/deletionTimestamp").is_none() {
                    let _ = cluster.delete(&rt, Some(&name), o.name(), &DeleteOptions::default());
                }
            }
        }
        if remaining == 0 {
            let _ = cluster.mutate(&ns_type, None, &name, None, MANAGER, |obj| {
                let Some(list) = obj
                    .pointer_mut("/spec/finalizers")
                    .and_then(Value::as_array_mut)
                else {
                    return false;
                };
                let before = list.len();
                list.retain(|f| f.as_str() != Some(NAMESPACE_FINALIZER));
                before != list.len()
            });
        } else {
            pending = true;
        }
    }
    pending
}

/// Runs the namespace controller.
pub async fn run(cluster: Cluster) {
    let mut events = cluster.store().subscribe_all();
    let mut pending = false;
    loop {
        let wake = if pending {
            tokio::select! {
                e = events.recv() => !matches!(e, Err(RecvError::Closed)),
                () = tokio::time::sleep(Duration::from_millis(200)) => true,
            }
        } else {
            match events.recv().await {
                Ok(e) => {
                    e.key.group.is_empty()
                        && e.key.resource == "namespaces"
                        && e.object
                            .value
                            .pointer("/metadata/deletionTimestamp")
                            .is_some()
                }
                Err(RecvError::Lagged(_)) => true,
                Err(RecvError::Closed) => return,
            }
        };
        if wake {
            while events.try_recv().is_ok() {}
            pending = sweep(&cluster);
        }
    }
}
