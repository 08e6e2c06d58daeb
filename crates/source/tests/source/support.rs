//! Helpers of the source tests: the shared test servers and helpers of `capstan-testkit`
//! (re-exported), `skopeo`, tree compares and a sample source tree.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

pub use capstan_testkit::{
    REGISTRY_PASSWORD as PASSWORD, REGISTRY_USER as USER, Registry, TestCa, download, eventually,
    http_client, require,
};

/// Runs `skopeo` with `args` against the plain-HTTP test registry and returns stdout.
pub fn skopeo(args: &[&str]) -> String {
    require("skopeo");
    let output = Command::new("skopeo").args(args).output().unwrap();
    assert!(
        output.status.success(),
        "skopeo {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Every file below `dir` (relative path → content), directories as `<path>/` → empty.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            if entry.file_type().unwrap().is_dir() {
                out.insert(format!("{relative}/"), Vec::new());
                walk(root, &path, out);
            } else {
                out.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// A small source tree with nested directories, an executable and a file to ignore.
pub fn sample_source() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("apps/podinfo")).unwrap();
    std::fs::create_dir_all(root.join("infra")).unwrap();
    std::fs::write(
        root.join("apps/podinfo/deployment.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\n",
    )
    .unwrap();
    std::fs::write(
        root.join("apps/kustomization.yaml"),
        "resources:\n- podinfo/deployment.yaml\n",
    )
    .unwrap();
    std::fs::write(root.join("infra/notes.txt"), "ignore me\n").unwrap();
    std::fs::write(root.join("hook.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(root.join("hook.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}
