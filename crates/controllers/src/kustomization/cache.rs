//! The last build of each Kustomization, so that a reconcile whose artifact digest, generation
//! and variables are unchanged skips the build (never the apply).
//!
//! # Guarantees
//!
//! * The cache is bounded ([`CacheLimits`]): by the number of Kustomizations whose build it
//!   keeps and by the approximate size of the objects kept (their length as JSON). Past either
//!   bound the least recently used builds are evicted; a build larger than the whole byte bound
//!   is not kept. Eviction only costs time: the next reconcile of that Kustomization builds
//!   again, as after a restart.
//! * A build is returned only for the exact key it was stored under (the inputs of the build,
//!   see `build_key`); a Kustomization keeps at most one build.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use kube::api::DynamicObject;

/// How much a [`BuildCache`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLimits {
    /// How many Kustomizations' builds are kept (default [`CacheLimits::DEFAULT_ENTRIES`]).
    pub entries: usize,
    /// The approximate bytes of the objects kept, counted as their length in JSON (default
    /// [`CacheLimits::DEFAULT_BYTES`]). Objects take a few times that in memory.
    pub bytes: usize,
}

impl CacheLimits {
    /// Builds kept by default: enough for a fleet of a thousand Kustomizations.
    pub const DEFAULT_ENTRIES: usize = 1024;
    /// Bytes kept by default (JSON length): 128 MiB.
    pub const DEFAULT_BYTES: usize = 128 << 20;
}

impl Default for CacheLimits {
    fn default() -> Self {
        CacheLimits {
            entries: Self::DEFAULT_ENTRIES,
            bytes: Self::DEFAULT_BYTES,
        }
    }
}

/// The builds of Kustomizations by `namespace/name`, each under the key of its inputs,
/// least recently used evicted first. Shared by the reconciles of one controller.
pub struct BuildCache {
    limits: CacheLimits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    entries: HashMap<String, Entry>,
    /// The objects of `entries` by their last use, oldest first.
    order: BTreeMap<u64, String>,
    /// Counts uses; each use of an entry takes the next value.
    clock: u64,
    /// The sum of the entries' sizes.
    bytes: usize,
}

struct Entry {
    key: String,
    objects: Vec<DynamicObject>,
    bytes: usize,
    used: u64,
}

impl State {
    /// Marks `object`'s entry as used now.
    fn touch(&mut self, object: &str) {
        self.clock += 1;
        let now = self.clock;
        if let Some(entry) = self.entries.get_mut(object) {
            self.order.remove(&entry.used);
            entry.used = now;
            self.order.insert(now, object.to_owned());
        }
    }

    fn remove(&mut self, object: &str) {
        if let Some(entry) = self.entries.remove(object) {
            self.order.remove(&entry.used);
            self.bytes -= entry.bytes;
        }
    }

    /// Evicts the least recently used entries until both bounds hold.
    fn evict(&mut self, limits: CacheLimits) {
        while self.entries.len() > limits.entries || self.bytes > limits.bytes {
            let Some((_, object)) = self.order.pop_first() else {
                return;
            };
            if let Some(entry) = self.entries.remove(&object) {
                self.bytes -= entry.bytes;
            }
        }
    }
}

impl BuildCache {
    /// An empty cache within `limits`.
    pub fn new(limits: CacheLimits) -> Self {
        BuildCache {
            limits,
            state: Mutex::default(),
        }
    }

    /// The limits.
    pub fn limits(&self) -> CacheLimits {
        self.limits
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The build of `object` stored under `key`, if it is still kept (a copy).
    pub fn get(&self, object: &str, key: &str) -> Option<Vec<DynamicObject>> {
        let mut state = self.state();
        let objects = state
            .entries
            .get(object)
            .filter(|entry| entry.key == key)
            .map(|entry| entry.objects.clone())?;
        state.touch(object);
        Some(objects)
    }

    /// Keeps `objects` as the build of `object` under `key`, replacing its previous build,
    /// then evicts the least recently used builds past the limits.
    pub fn insert(&self, object: String, key: String, objects: Vec<DynamicObject>) {
        let bytes = json_len(&objects);
        let mut state = self.state();
        state.remove(&object);
        if bytes > self.limits.bytes || self.limits.entries == 0 {
            return;
        }
        state.bytes += bytes;
        state.clock += 1;
        let now = state.clock;
        state.order.insert(now, object.clone());
        state.entries.insert(
            object,
            Entry {
                key,
                objects,
                bytes,
                used: now,
            },
        );
        state.evict(self.limits);
    }

    /// Forgets the build of `object`.
    pub fn remove(&self, object: &str) {
        self.state().remove(object);
    }

    /// How many builds are kept.
    pub fn len(&self) -> usize {
        self.state().entries.len()
    }

    /// Whether no build is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The approximate size of the builds kept (their length in JSON).
    pub fn bytes(&self) -> usize {
        self.state().bytes
    }
}

impl Default for BuildCache {
    fn default() -> Self {
        Self::new(CacheLimits::default())
    }
}

impl std::fmt::Debug for BuildCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("BuildCache")
            .field("limits", &self.limits)
            .field("entries", &state.entries.len())
            .field("bytes", &state.bytes)
            .finish_non_exhaustive()
    }
}

/// The length of `objects` as JSON, counted without keeping the text.
fn json_len(objects: &[DynamicObject]) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Serialising objects to a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut counter, objects);
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One ConfigMap named `name` with `size` bytes of data.
    fn build(name: &str, size: usize) -> Vec<DynamicObject> {
        vec![
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "apps"},
                "data": {"x": "y".repeat(size)},
            }))
            .unwrap(),
        ]
    }

    fn names(objects: &[DynamicObject]) -> Vec<String> {
        objects
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect()
    }

    #[test]
    fn a_build_is_returned_only_under_its_key() {
        let cache = BuildCache::default();
        cache.insert("apps/a".into(), "k1".into(), build("a", 10));
        assert_eq!(names(&cache.get("apps/a", "k1").unwrap()), ["a"]);
        assert!(cache.get("apps/a", "k2").is_none());
        assert!(cache.get("apps/b", "k1").is_none());
        cache.insert("apps/a".into(), "k2".into(), build("a2", 10));
        assert!(cache.get("apps/a", "k1").is_none());
        assert_eq!(names(&cache.get("apps/a", "k2").unwrap()), ["a2"]);
        assert_eq!(cache.len(), 1);
        cache.remove("apps/a");
        assert!(cache.get("apps/a", "k2").is_none());
        assert!(cache.is_empty());
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn the_least_recently_used_build_goes_first_past_the_entry_bound() {
        let cache = BuildCache::new(CacheLimits {
            entries: 2,
            bytes: usize::MAX,
        });
        cache.insert("apps/a".into(), "k".into(), build("a", 10));
        cache.insert("apps/b".into(), "k".into(), build("b", 10));
        // Reading `a` makes `b` the least recently used.
        assert!(cache.get("apps/a", "k").is_some());
        cache.insert("apps/c".into(), "k".into(), build("c", 10));
        assert_eq!(cache.len(), 2);
        assert!(cache.get("apps/b", "k").is_none(), "b was evicted");
        assert!(cache.get("apps/a", "k").is_some());
        assert!(cache.get("apps/c", "k").is_some());
        // Replacing a build counts as a use and keeps one entry per Kustomization.
        cache.insert("apps/c".into(), "k2".into(), build("c", 10));
        cache.insert("apps/d".into(), "k".into(), build("d", 10));
        assert!(cache.get("apps/a", "k").is_none(), "a was evicted");
        assert!(cache.get("apps/c", "k2").is_some());
        assert!(cache.get("apps/d", "k").is_some());
    }

    #[test]
    fn builds_are_evicted_past_the_byte_bound_and_oversized_ones_not_kept() {
        let one = json_len(&build("a", 1000));
        let cache = BuildCache::new(CacheLimits {
            entries: 100,
            bytes: one * 2 + one / 2,
        });
        for name in ["a", "b", "c"] {
            cache.insert(format!("apps/{name}"), "k".into(), build(name, 1000));
            assert!(cache.bytes() <= cache.limits().bytes);
        }
        assert_eq!(cache.len(), 2);
        assert!(cache.get("apps/a", "k").is_none());
        assert_eq!(cache.bytes(), one * 2);
        // A build larger than the whole bound is not kept, and does not evict the others;
        // its previous build is dropped, as it no longer matches.
        cache.insert("apps/b".into(), "k2".into(), build("b", 10_000));
        assert!(cache.get("apps/b", "k").is_none());
        assert!(cache.get("apps/b", "k2").is_none());
        assert!(cache.get("apps/c", "k").is_some());
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.bytes(), one);
    }

    #[test]
    fn the_size_is_the_length_in_json() {
        let objects = build("a", 100);
        assert_eq!(
            json_len(&objects),
            serde_json::to_vec(&objects).unwrap().len()
        );
    }

    #[test]
    fn a_cache_of_no_entries_keeps_nothing() {
        let cache = BuildCache::new(CacheLimits {
            entries: 0,
            bytes: usize::MAX,
        });
        cache.insert("apps/a".into(), "k".into(), build("a", 10));
        assert!(cache.get("apps/a", "k").is_none());
        assert!(cache.is_empty());
    }
}
