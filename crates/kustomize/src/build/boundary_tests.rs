//! The outer boundary ([`BuildOptions::boundary`]): every field that names a path is held
//! inside it, links included, and the refusal never tells whether the path exists outside.

use std::path::Path;

use serde_json::Value;

use super::*;
use crate::fs::{DiskFs, MemoryFs};

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: b\n";
const COMPONENT: &str =
    "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonLabels:\n  leaked: yes\n";

/// Files of the source under `/src` (the boundary) and of the host outside it.
fn build(files: &[(&str, &str)], host: &[(&str, &str)]) -> Result<Vec<Value>, Error> {
    let mut fs = MemoryFs::new();
    for (path, text) in files.iter().chain(host) {
        fs.insert(path, *text);
    }
    let options = BuildOptions {
        boundary: Some("/src".into()),
        ..BuildOptions::default()
    };
    build_with(&fs, Path::new("/src/app"), &options)
}

/// The kustomization `text` in `/src/app`, naming `host` paths: refused, with the same
/// message whether the host holds them or not, naming the field and nothing of the host.
fn refused(text: &str, field: &str, host: &[(&str, &str)]) -> String {
    let files = [
        ("src/app/kustomization.yaml", text),
        ("src/app/cm.yaml", CM),
    ];
    let present = build(&files, host).expect_err("a path outside the source must be refused");
    let absent = build(&files, &[]).expect_err("a missing path outside must be refused");
    assert!(
        matches!(present, Error::OutsideBoundary { .. }),
        "{field}: {present}"
    );
    let message = present.to_string();
    assert_eq!(
        message,
        absent.to_string(),
        "{field}: existence must not show"
    );
    assert!(message.contains(&format!("field {field}")), "{message}");
    assert!(
        message.contains("outside the root of the source"),
        "{message}"
    );
    for (_, content) in host {
        assert!(!message.contains(content.trim()), "{message}");
    }
    message
}

#[test]
fn every_field_naming_a_file_stays_in_the_source() {
    let host_file = [("host/x.yaml", CM)];
    let cases = [
        ("resources: [../../host/x.yaml]\n", "resources"),
        ("bases: [../../host/x.yaml]\n", "resources"),
        (
            "patchesStrategicMerge: [../../host/x.yaml]\n",
            "patchesStrategicMerge",
        ),
        (
            "resources: [cm.yaml]\npatches:\n- path: ../../host/x.yaml\n",
            "patches",
        ),
        (
            "resources: [cm.yaml]\npatchesJson6902:\n- path: ../../host/x.yaml\n  target: {kind: ConfigMap, name: cm, version: v1}\n",
            "patchesJson6902",
        ),
        (
            "resources: [cm.yaml]\nreplacements:\n- path: ../../host/x.yaml\n",
            "replacements",
        ),
        ("openapi:\n  path: ../../host/x.yaml\n", "openapi"),
        ("configurations: [../../host/x.yaml]\n", "configurations"),
        ("crds: [../../host/x.yaml]\n", "crds"),
        ("transformers: [../../host/x.yaml]\n", "transformers"),
        ("generators: [../../host/x.yaml]\n", "generators"),
        (
            "configMapGenerator:\n- name: g\n  files: [../../host/x.yaml]\n",
            "configMapGenerator",
        ),
        (
            "configMapGenerator:\n- name: g\n  envs: [../../host/x.yaml]\n",
            "configMapGenerator",
        ),
        (
            "secretGenerator:\n- name: g\n  files: [key=../../host/x.yaml]\n",
            "secretGenerator",
        ),
        ("resources: [/host/x.yaml]\n", "resources"),
    ];
    for (text, field) in cases {
        refused(text, field, &host_file);
    }
}

#[test]
fn every_field_naming_a_directory_stays_in_the_source() {
    let host_dir = [
        ("host/dir/kustomization.yaml", "resources: [cm.yaml]\n"),
        (
            "host/dir/cm.yaml",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: stolen\n",
        ),
    ];
    for (text, field) in [
        ("resources: [../../host/dir]\n", "resources"),
        ("bases: [../../host/dir]\n", "resources"),
        ("transformers: [../../host/dir]\n", "transformers"),
        ("generators: [../../host/dir]\n", "generators"),
    ] {
        refused(text, field, &host_dir);
    }
    let host_component = [("host/c/kustomization.yaml", COMPONENT)];
    refused(
        "resources: [cm.yaml]\ncomponents: [../../host/c]\n",
        "components",
        &host_component,
    );
}

#[test]
fn nested_kustomizations_are_held_too() {
    let error = build(
        &[
            ("src/app/kustomization.yaml", "resources: [base]\n"),
            (
                "src/app/base/kustomization.yaml",
                "resources: [../../../host/dir]\n",
            ),
        ],
        &[("host/dir/kustomization.yaml", "resources: []\n")],
    )
    .unwrap_err();
    assert!(matches!(error, Error::OutsideBoundary { .. }), "{error}");
    assert!(error.to_string().contains("'../../../host/dir'"), "{error}");
}

#[test]
fn directories_outside_the_kustomization_but_inside_the_source_are_allowed() {
    // kubectl's semantics inside the boundary: a base one level up is fine.
    let objects = build(
        &[
            (
                "src/app/kustomization.yaml",
                "resources: [../base]\ncomponents: [../c]\n",
            ),
            ("src/base/kustomization.yaml", "resources: [cm.yaml]\n"),
            ("src/base/cm.yaml", CM),
            ("src/c/kustomization.yaml", COMPONENT),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0]["metadata"]["labels"]["leaked"], "yes");
}

#[test]
fn without_a_boundary_kubectl_behaviour_is_kept() {
    let mut fs = MemoryFs::new();
    fs.insert(
        "src/app/kustomization.yaml",
        "resources: [../../host/dir]\n",
    );
    fs.insert("host/dir/kustomization.yaml", "resources: [cm.yaml]\n");
    fs.insert("host/dir/cm.yaml", CM);
    let objects = build_with(&fs, Path::new("/src/app"), &BuildOptions::default()).unwrap();
    assert_eq!(objects.len(), 1);
}

#[test]
fn the_build_directory_itself_must_be_inside() {
    let mut fs = MemoryFs::new();
    fs.insert("host/kustomization.yaml", "resources: []\n");
    let options = BuildOptions {
        boundary: Some("/src".into()),
        ..BuildOptions::default()
    };
    let error = build_with(&fs, Path::new("/host"), &options).unwrap_err();
    assert!(matches!(error, Error::OutsideBoundary { .. }), "{error}");
}

/// A scratch directory on disk: `src/` is the source, `host/` is the rest of the machine.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "capstan-kustomize-boundary-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src/app")).unwrap();
        std::fs::create_dir_all(dir.join("host/dir")).unwrap();
        Scratch(dir)
    }
    fn write(&self, path: &str, text: &str) {
        let path = self.0.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    fn link(&self, target: &str, link: &str) {
        std::os::unix::fs::symlink(target, self.0.join(link)).unwrap();
    }
    fn build(&self) -> Result<Vec<Value>, Error> {
        let options = BuildOptions {
            boundary: Some(self.0.join("src")),
            ..BuildOptions::default()
        };
        build_with(&DiskFs, &self.0.join("src/app"), &options)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn links_out_of_the_source_are_refused_alike_whether_their_target_exists() {
    let scratch = Scratch::new("links");
    scratch.write("host/dir/kustomization.yaml", "resources: [cm.yaml]\n");
    scratch.write("host/dir/cm.yaml", CM);
    scratch.write("host/x.yaml", CM);
    let host = scratch.0.join("host");
    // A relative link out, an absolute link out, a link to a missing host file, a link to
    // a directory out, and a chain of links inside that ends outside.
    scratch.link("../../host/x.yaml", "src/app/rel.yaml");
    scratch.link(host.join("x.yaml").to_str().unwrap(), "src/app/abs.yaml");
    scratch.link("../../host/missing.yaml", "src/app/gone.yaml");
    scratch.link(host.join("dir").to_str().unwrap(), "src/app/dir");
    scratch.link("rel.yaml", "src/app/chain.yaml");
    scratch.link("../..", "src/app/up");
    let mut messages = Vec::new();
    for entry in [
        "rel.yaml",
        "abs.yaml",
        "gone.yaml",
        "dir",
        "chain.yaml",
        "up/host/x.yaml",
    ] {
        scratch.write(
            "src/app/kustomization.yaml",
            &format!("resources: [{entry}]\n"),
        );
        let error = scratch.build().expect_err(entry);
        assert!(
            matches!(error, Error::OutsideBoundary { .. }),
            "{entry}: {error}"
        );
        let message = error.to_string();
        assert!(!message.contains(host.to_str().unwrap()), "{message}");
        messages.push(message.replace(entry, "ENTRY"));
    }
    messages.dedup();
    assert_eq!(messages.len(), 1, "{messages:?}");
}

#[test]
fn links_inside_the_source_still_work() {
    let scratch = Scratch::new("inside");
    scratch.write(
        "src/shared/base/kustomization.yaml",
        "resources: [cm.yaml]\n",
    );
    scratch.write(
        "src/shared/base/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: base\n",
    );
    scratch.link("../shared/base", "src/app/base");
    scratch.write("src/app/kustomization.yaml", "resources: [base]\n");
    let objects = scratch.build().unwrap();
    assert_eq!(objects.len(), 1);
}
