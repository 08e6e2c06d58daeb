//! Remote bases through the engine's `RemoteLoader`: the loader gives a local checkout (here a
//! directory written by the test, as the controller's Git loader gives a fetched one), the
//! engine builds the named directory confined to it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use capstan_kustomize::{BuildOptions, Error, RemoteLoader, RemoteTarget, build};

/// Serves one checkout for every repository, recording what was asked.
struct Checkout {
    root: PathBuf,
    asked: Mutex<Vec<RemoteTarget>>,
}

impl RemoteLoader for Checkout {
    fn load(&self, target: &RemoteTarget) -> Result<PathBuf, String> {
        self.asked.lock().unwrap().push(target.clone());
        if target.reference.as_deref() == Some("missing") {
            return Err("no branch, tag or commit \"missing\"".into());
        }
        Ok(self.root.clone())
    }
}

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

fn setup(entry: &str) -> (tempfile::TempDir, Arc<Checkout>) {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("repo"),
        &[
            ("base/kustomization.yaml", "resources:\n- cm.yaml\n"),
            (
                "base/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: remote\n",
            ),
            (
                "escape/kustomization.yaml",
                "resources:\n- ../../secret.yaml\n",
            ),
            (
                "component/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonLabels:\n  from: component\n",
            ),
        ],
    );
    write(
        dir.path(),
        &[
            (
                "secret.yaml",
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: outside\n",
            ),
            (
                "app/kustomization.yaml",
                &format!("namePrefix: app-\nresources:\n- {entry}\n"),
            ),
        ],
    );
    let loader = Arc::new(Checkout {
        root: dir.path().join("repo"),
        asked: Mutex::new(Vec::new()),
    });
    (dir, loader)
}

fn options(loader: &Arc<Checkout>) -> BuildOptions {
    BuildOptions {
        remote: Some(loader.clone() as Arc<dyn RemoteLoader>),
        ..BuildOptions::default()
    }
}

#[test]
fn a_remote_base_is_built_from_the_loaders_checkout() {
    let (dir, loader) = setup("https://example.com/org/repo//base?ref=v1");
    let objects = build(&dir.path().join("app"), &options(&loader)).unwrap();
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0]["metadata"]["name"], "app-remote");
    let asked = loader.asked.lock().unwrap();
    assert_eq!(asked[0].repo_url, "https://example.com/org/repo");
    assert_eq!(asked[0].path, "base");
    assert_eq!(asked[0].reference.as_deref(), Some("v1"));
}

#[test]
fn without_a_loader_remote_bases_are_refused_naming_the_file_and_the_entry() {
    let entry = "https://example.com/org/repo//base?ref=v1";
    let (dir, _) = setup(entry);
    let error = build(&dir.path().join("app"), &BuildOptions::default()).unwrap_err();
    assert!(matches!(error, Error::Remote { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("app/kustomization.yaml"), "{message}");
    assert!(message.contains(entry), "{message}");
    assert!(message.contains("remote bases are disabled"), "{message}");
}

#[test]
fn a_remote_base_never_reads_outside_its_checkout() {
    let (dir, loader) = setup("https://example.com/org/repo//escape");
    let error = build(&dir.path().join("app"), &options(&loader)).unwrap_err();
    assert!(matches!(error, Error::OutsideBoundary { .. }), "{error}");
}

#[test]
fn fetch_failures_missing_directories_and_components_name_the_entry() {
    for (entry, expected) in [
        (
            "https://example.com/org/repo//base?ref=missing",
            "no branch, tag or commit",
        ),
        (
            "https://example.com/org/repo//nothing-here",
            "no directory \"nothing-here\"",
        ),
        ("https://example.com/org/repo//component", "Component"),
        ("ftp://example.com/org/repo//base", "not a remote target"),
    ] {
        let (dir, loader) = setup(entry);
        let message = build(&dir.path().join("app"), &options(&loader))
            .unwrap_err()
            .to_string();
        assert!(message.contains(entry), "{message}");
        assert!(message.contains(expected), "{message}");
    }
}

#[test]
fn a_remote_component_applies_to_the_objects_of_the_kustomization() {
    let (dir, loader) = setup("https://example.com/org/repo//base?ref=v1");
    write(
        &dir.path().join("app"),
        &[(
            "kustomization.yaml",
            "resources:\n- https://example.com/org/repo//base?ref=v1\ncomponents:\n- https://example.com/org/repo//component?ref=v1\n",
        )],
    );
    let objects = build(&dir.path().join("app"), &options(&loader)).unwrap();
    assert_eq!(objects[0]["metadata"]["labels"]["from"], "component");
    // A base that is not a Component is refused under `components:`.
    write(
        &dir.path().join("app"),
        &[(
            "kustomization.yaml",
            "components:\n- https://example.com/org/repo//base?ref=v1\n",
        )],
    );
    let message = build(&dir.path().join("app"), &options(&loader))
        .unwrap_err()
        .to_string();
    assert!(message.contains("expected kind 'Component'"), "{message}");
}
