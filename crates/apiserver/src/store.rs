//! In-memory object storage with a global resourceVersion, watch history and compaction.
//!
//! Every write takes one short lock: it assigns the next resourceVersion, stores the object with its
//! serialised JSON (so lists concatenate bytes instead of re-encoding), appends a watch event to the
//! resource's bounded history and broadcasts it. A watch from a resourceVersion older than the history
//! holds gets `410 Gone`, as etcd compaction does on a real cluster.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::registry::StorageKey;

/// A stored object: the value (with `metadata.resourceVersion` set) and its JSON encoding.
#[derive(Debug)]
pub struct Stored {
    pub value: Value,
    pub json: Bytes,
    pub rv: u64,
}

impl Stored {
    fn new(mut value: Value, rv: u64) -> Self {
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let json = Bytes::from(serde_json::to_vec(&value).expect("a JSON value always serialises"));
        Self { value, json, rv }
    }

    pub fn namespace(&self) -> &str {
        self.value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub fn name(&self) -> &str {
        self.value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub fn uid(&self) -> &str {
        self.value
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as watchers see it.
#[derive(Debug)]
pub struct WatchEvent {
    pub type_: EventType,
    pub key: StorageKey,
    /// The object after the change (for `Deleted`: the last state, with the deletion's resourceVersion).
    pub object: Arc<Stored>,
    /// The object before the change, if any (lets selector-filtered watches see objects leave).
    pub previous: Option<Arc<Stored>>,
}

/// `(namespace, name)`; cluster-scoped objects use an empty namespace.
pub type ObjectKey = (String, String);

/// Most watch history kept per resource, in encoded bytes, whatever the event count: large objects
/// written often must not pin unbounded memory.
const HISTORY_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug)]
struct Table {
    objects: BTreeMap<ObjectKey, Arc<Stored>>,
    history: VecDeque<Arc<WatchEvent>>,
    /// Encoded size of the objects in `history`.
    history_bytes: usize,
    /// Watches from a resourceVersion below this are too old.
    compacted: u64,
    sender: broadcast::Sender<Arc<WatchEvent>>,
}

impl Table {
    fn new() -> Self {
        let (sender, _) = broadcast::channel(4096);
        Self {
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            history_bytes: 0,
            compacted: 0,
            sender,
        }
    }
}

#[derive(Debug)]
struct State {
    rv: u64,
    tables: HashMap<StorageKey, Table>,
}

/// Why a write did not happen.
#[derive(Debug, PartialEq, Eq)]
pub enum WriteError {
    /// Create of an existing key.
    Exists,
    /// Update or delete of a missing key.
    Missing,
    /// The stored resourceVersion differs from the expected one.
    Stale,
}

/// The object store.
#[derive(Debug)]
pub struct Store {
    state: Mutex<State>,
    history_limit: usize,
    /// Every event of every table, for the control plane's own controllers.
    all: broadcast::Sender<Arc<WatchEvent>>,
}

/// A subscription to one table's changes after a resourceVersion.
pub struct Subscription {
    /// Events already in history after the requested resourceVersion.
    pub backlog: Vec<Arc<WatchEvent>>,
    pub receiver: broadcast::Receiver<Arc<WatchEvent>>,
    /// The resourceVersion the subscription is current at.
    pub rv: u64,
}

impl Store {
    /// A store keeping `history_limit` watch events per resource.
    pub fn new(history_limit: usize) -> Self {
        let (all, _) = broadcast::channel(8192);
        Self {
            state: Mutex::new(State {
                rv: 1,
                tables: HashMap::new(),
            }),
            history_limit: history_limit.max(1),
            all,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The current (latest) resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Subscribes to every change of every resource.
    pub fn subscribe_all(&self) -> broadcast::Receiver<Arc<WatchEvent>> {
        self.all.subscribe()
    }

    pub fn get(&self, key: &StorageKey, object: &ObjectKey) -> Option<Arc<Stored>> {
        self.lock()
            .tables
            .get(key)
            .and_then(|t| t.objects.get(object).cloned())
    }

    /// All objects of a resource (optionally in one namespace), in key order, with the list's resourceVersion.
    pub fn list(&self, key: &StorageKey, namespace: Option<&str>) -> (Vec<Arc<Stored>>, u64) {
        let state = self.lock();
        let rv = state.rv;
        let Some(table) = state.tables.get(key) else {
            return (Vec::new(), rv);
        };
        let items = match namespace {
            Some(ns) => table
                .objects
                .range((ns.to_owned(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| Arc::clone(v))
                .collect(),
            None => table.objects.values().cloned().collect(),
        };
        (items, rv)
    }

    /// Creates, updates (when `expected_rv` matches) or deletes an object; `value == None` deletes.
    /// Returns the stored result.
    pub fn write(
        &self,
        key: &StorageKey,
        object: ObjectKey,
        value: Option<Value>,
        expected_rv: Option<u64>,
        create: bool,
    ) -> Result<Arc<Stored>, WriteError> {
        self.write_inner(key, object, value, None, expected_rv, create)
    }

    /// Deletes an object whose final state (e.g. with its last finalizer removed) is `last`: the
    /// DELETED event carries that state, as on a real cluster.
    pub fn delete_as(
        &self,
        key: &StorageKey,
        object: ObjectKey,
        last: Value,
        expected_rv: Option<u64>,
    ) -> Result<Arc<Stored>, WriteError> {
        self.write_inner(key, object, None, Some(last), expected_rv, false)
    }

    fn write_inner(
        &self,
        key: &StorageKey,
        object: ObjectKey,
        value: Option<Value>,
        last: Option<Value>,
        expected_rv: Option<u64>,
        create: bool,
    ) -> Result<Arc<Stored>, WriteError> {
        let mut state = self.lock();
        let next_rv = state.rv + 1;
        let table = state.tables.entry(key.clone()).or_insert_with(Table::new);
        let previous = table.objects.get(&object).cloned();
        match (&previous, create) {
            (Some(_), true) => return Err(WriteError::Exists),
            (None, false) => return Err(WriteError::Missing),
            _ => {}
        }
        if let (Some(prev), Some(expected)) = (&previous, expected_rv)
            && prev.rv != expected
        {
            return Err(WriteError::Stale);
        }
        let (type_, stored) = if let Some(v) = value {
            let stored = Arc::new(Stored::new(v, next_rv));
            table.objects.insert(object, Arc::clone(&stored));
            (
                if previous.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                },
                stored,
            )
        } else {
            table.objects.remove(&object);
            let prev = previous.as_ref().expect("checked above");
            let last = last.unwrap_or_else(|| prev.value.clone());
            (EventType::Deleted, Arc::new(Stored::new(last, next_rv)))
        };
        let event = Arc::new(WatchEvent {
            type_,
            key: key.clone(),
            object: Arc::clone(&stored),
            previous,
        });
        table.history_bytes += event.object.json.len();
        table.history.push_back(Arc::clone(&event));
        while table.history.len() > self.history_limit || table.history_bytes > HISTORY_BYTES {
            let Some(old) = table.history.pop_front() else {
                break;
            };
            table.history_bytes -= old.object.json.len();
            table.compacted = old.object.rv;
        }
        let _ = table.sender.send(Arc::clone(&event));
        let _ = self.all.send(event);
        state.rv = next_rv;
        Ok(stored)
    }

    /// Subscribes to a table from `since` (exclusive). `None` if history no longer reaches back to it.
    pub fn subscribe(&self, key: &StorageKey, since: u64) -> Option<Subscription> {
        let mut state = self.lock();
        let rv = state.rv;
        let table = state.tables.entry(key.clone()).or_insert_with(Table::new);
        if since < table.compacted {
            return None;
        }
        let backlog = table
            .history
            .iter()
            .filter(|e| e.object.rv > since)
            .cloned()
            .collect();
        Some(Subscription {
            backlog,
            receiver: table.sender.subscribe(),
            rv,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key() -> StorageKey {
        StorageKey {
            group: String::new(),
            resource: "configmaps".into(),
        }
    }

    fn obj(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns"}})
    }

    #[test]
    fn resource_versions_increase_and_stale_writes_fail() {
        let store = Store::new(10);
        let a = store
            .write(
                &key(),
                ("ns".into(), "a".into()),
                Some(obj("a")),
                None,
                true,
            )
            .unwrap();
        assert_eq!(a.value["metadata"]["resourceVersion"], "2");
        assert_eq!(
            store
                .write(
                    &key(),
                    ("ns".into(), "a".into()),
                    Some(obj("a")),
                    None,
                    true
                )
                .unwrap_err(),
            WriteError::Exists
        );
        assert_eq!(
            store
                .write(
                    &key(),
                    ("ns".into(), "a".into()),
                    Some(obj("a")),
                    Some(1),
                    false
                )
                .unwrap_err(),
            WriteError::Stale
        );
        let b = store
            .write(
                &key(),
                ("ns".into(), "a".into()),
                Some(obj("a")),
                Some(2),
                false,
            )
            .unwrap();
        assert_eq!(b.rv, 3);
    }

    #[test]
    fn history_compacts_and_old_watches_are_refused() {
        let store = Store::new(2);
        for i in 0..5 {
            store
                .write(
                    &key(),
                    ("ns".into(), format!("o{i}")),
                    Some(obj(&format!("o{i}"))),
                    None,
                    true,
                )
                .unwrap();
        }
        assert!(store.subscribe(&key(), 1).is_none());
        let sub = store.subscribe(&key(), 4).unwrap();
        assert_eq!(sub.backlog.len(), 2);
        assert_eq!(sub.backlog[0].object.rv, 5);
    }

    #[test]
    fn list_by_namespace() {
        let store = Store::new(10);
        store
            .write(&key(), ("a".into(), "x".into()), Some(obj("x")), None, true)
            .unwrap();
        store
            .write(&key(), ("b".into(), "y".into()), Some(obj("y")), None, true)
            .unwrap();
        assert_eq!(store.list(&key(), Some("a")).0.len(), 1);
        assert_eq!(store.list(&key(), None).0.len(), 2);
    }
}
