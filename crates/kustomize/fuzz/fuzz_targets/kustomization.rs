//! Feeds arbitrary bytes as a kustomization, a resource and a patch through an in-memory
//! build. Bytes are split on the first two NUL bytes: kustomization, resource, patch.
#![no_main]

use std::path::Path;

use capstan_kustomize::{BuildOptions, MemoryFs, build_with};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |b| *b == 0);
    let kustomization = parts.next().unwrap_or_default();
    let resource = parts.next().unwrap_or_default();
    let patch = parts.next().unwrap_or_default();
    let mut fs = MemoryFs::new();
    fs.insert("app/kustomization.yaml", kustomization);
    fs.insert("app/resource.yaml", resource);
    fs.insert("app/patch.yaml", patch);
    if let Ok(text) = std::str::from_utf8(kustomization) {
        let _ = capstan_kustomize::parse_kustomization(text, Path::new("/app/kustomization.yaml"));
        // Remote target parsing (every line, as a `resources:` entry).
        for line in text.lines() {
            let _ = capstan_kustomize::parse_remote_target(line.trim_start_matches("- "));
        }
    }
    // Must never panic, whatever the input.
    let _ = build_with(&fs, Path::new("/app"), &BuildOptions::default());
    // Confined to the source, as the controller builds: every path the input names goes
    // through the boundary; a file outside it must never be read.
    fs.insert(
        "outside.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: escaped\n",
    );
    let confined = BuildOptions {
        boundary: Some("/app".into()),
        ..BuildOptions::default()
    };
    if let Ok(objects) = build_with(&fs, Path::new("/app"), &confined) {
        assert!(
            !objects.iter().any(|o| o["metadata"]["name"] == "escaped"),
            "a file outside the boundary was read"
        );
    }
});
