//! Helm repository indexes from untrusted servers: whatever the bytes, `Index::parse` must not
//! panic or run away, and a parsed index must answer `select` (any constraint text) and
//! `to_json` without panicking.
//!
//! The first byte splits the rest: the constraint is up to that many bytes, the index the rest.

#![no_main]

use capstan_source::helm::index::{Index, resolve_url};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let (constraint, index) = rest.split_at(usize::from(split).min(rest.len()));
    let constraint = String::from_utf8_lossy(constraint);
    let Ok(index) = Index::parse(index) else {
        return;
    };
    let _ = index.to_json();
    for (name, versions) in &index.entries {
        if let Ok(version) = index.select(name, &constraint) {
            for url in &version.urls {
                let _ = resolve_url("https://charts.example.com/stable", url);
            }
        }
        assert!(versions.iter().all(|v| !v.name.is_empty()));
    }
});
