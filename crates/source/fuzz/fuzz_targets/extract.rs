//! Extraction of untrusted artifact tarballs: whatever the input, `extract` must not panic,
//! must not write outside its target, and must leave no symlink pointing out of it.
//!
//! The first byte picks how the rest is used: odd → a gzip stream as given (exercises the
//! decompressor and the limits), even → a raw tar stream, gzip-compressed here (lets the
//! fuzzer reach the tar entry checks).

#![no_main]

use std::io::Write as _;
use std::path::Path;

use capstan_source::artifact::{Limits, extract};
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits {
    max_archive_bytes: 1 << 20,
    max_total_bytes: 4 << 20,
    max_file_bytes: 1 << 20,
    max_entries: 1_000,
    max_compression_ratio: 200,
};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let archive = if mode % 2 == 1 {
        rest.to_vec()
    } else {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(rest).unwrap();
        encoder.finish().unwrap()
    };
    let sandbox = tempfile::tempdir().unwrap();
    let outside = sandbox.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let target = sandbox.path().join("root").join("target");

    let result = extract(archive.as_slice(), &target, &LIMITS);

    // Nothing beside the target: the sibling directory is untouched, and the target's parent
    // holds the target alone (no leftover temporary directory either).
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "wrote outside"
    );
    let siblings: Vec<_> = std::fs::read_dir(sandbox.path().join("root"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    match result {
        Ok(_) => {
            assert_eq!(siblings, ["target"], "left files beside the target");
            let root = std::fs::canonicalize(&target).unwrap();
            check_tree(&root, &root);
        }
        Err(_) => assert!(siblings.is_empty(), "a refused archive left {siblings:?}"),
    }
});

/// Every symlink under `dir` resolves (if at all) inside `root`.
fn check_tree(root: &Path, dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let metadata = std::fs::symlink_metadata(&path).unwrap();
        if metadata.file_type().is_symlink() {
            if let Ok(resolved) = std::fs::canonicalize(&path) {
                assert!(
                    resolved.starts_with(root),
                    "{} points outside to {}",
                    path.display(),
                    resolved.display()
                );
            }
        } else if metadata.is_dir() {
            check_tree(root, &path);
        }
    }
}
