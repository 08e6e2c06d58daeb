//! A native Helm chart renderer: a chart and values in, the manifests `helm template` prints
//! out — no cluster, no Helm binary, no async runtime.
//!
//! Layers, bottom up:
//! - [`value`]: Go's `interface{}` values as charts see them; [`cast`]: Sprig's loose conversions;
//!   [`fmt`]: Go's `fmt` verbs.
//! - [`template`]: Go's `text/template` (parse, execute, builtins).
//! - [`funcs`]: Sprig v3's function set and Helm's own functions.
//! - [`yaml`]: YAML and JSON exactly as Helm reads and writes them (`toYaml`, values files).
//! - [`chart`]: charts from directories and archives, dependencies, values coalescing, schemas;
//!   [`strvals`]: the `--set` family of flags.
//! - [`engine`]: a render of a chart (Helm's `engine.Render`), and [`output`]: `helm template`'s
//!   output (manifest splitting, install order, hooks, CRDs).
//! - [`release`]: Helm's release records: the `release.v1` JSON, byte for byte as Helm v4.2.3
//!   writes it, and the storage drivers' gzip and base64 codec.

pub mod cast;
pub mod chart;
pub mod engine;
pub mod fmt;
pub mod funcs;
pub mod output;
pub mod release;
pub mod strvals;
pub mod template;
pub mod value;
pub mod yaml;

/// Leaks the calling thread's caches (parsed templates, values files, `Chart.yaml` files,
/// subchart archives, compiled schemas) instead of freeing them when the thread ends: for a
/// process about to exit, such as `capstan helm template`, where freeing a large chart's
/// thousands of parse-tree nodes one by one is wasted time. Later renders on the thread
/// start with empty caches.
pub fn leak_thread_caches() {
    template::leak_cache();
    chart::leak_caches();
}

/// Leaks what the thread-local `cache` holds (see [`leak_thread_caches`]); nothing when the
/// thread is already tearing its locals down or the cache is in use.
pub(crate) fn leak<T: Default>(cache: &'static std::thread::LocalKey<std::cell::RefCell<T>>) {
    let _ = cache.try_with(|cache| {
        if let Ok(mut cache) = cache.try_borrow_mut() {
            std::mem::forget(std::mem::take(&mut *cache));
        }
    });
}

pub use value::Value;

/// Answers Helm's `lookup apiVersion kind namespace name`: the object (or, with an empty name,
/// a `List` of them) as a map; an empty map when there is nothing.
pub trait Lookup {
    /// Looks the object up.
    fn lookup(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value, String>;
}

/// The lookup of `helm template`: every answer is an empty map.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLookup;

impl Lookup for NoLookup {
    fn lookup(&self, _: &str, _: &str, _: &str, _: &str) -> Result<Value, String> {
        Ok(Value::empty_map())
    }
}
