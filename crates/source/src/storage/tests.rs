use std::time::{Duration, SystemTime};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::*;

fn source_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(dir.path().join("app.yaml"), "kind: ConfigMap\n").unwrap();
    std::fs::write(dir.path().join("logo.png"), "png").unwrap();
    dir
}

#[test]
fn paths_and_urls_follow_flux() {
    let storage_dir = tempfile::tempdir().unwrap();
    let storage = Storage::new(
        storage_dir.path(),
        "source-controller.flux-system.svc.cluster.local.",
    )
    .unwrap();
    let artifact = storage.new_artifact(
        "GitRepository",
        "flux-system",
        "podinfo",
        "main@sha1:abc",
        "abc.tar.gz",
    );
    assert_eq!(
        artifact.path,
        "gitrepository/flux-system/podinfo/abc.tar.gz"
    );
    assert_eq!(
        artifact.url,
        "http://source-controller.flux-system.svc.cluster.local./gitrepository/flux-system/podinfo/abc.tar.gz"
    );
    let storage = Storage::new(storage_dir.path(), "https://artifacts.example/").unwrap();
    assert_eq!(
        storage.url_for("/a/b/c/d"),
        "https://artifacts.example/a/b/c/d"
    );
}

#[test]
fn revision_file_names() {
    assert_eq!(
        revision_file_name("main@sha1:0123abcd", "tar.gz"),
        "0123abcd.tar.gz"
    );
    assert_eq!(revision_file_name("sha256:feed", "tar.gz"), "feed.tar.gz");
    assert_eq!(revision_file_name("v1.2.3", "tgz"), "v1.2.3.tgz");
    assert_eq!(revision_file_name("a/../b", "tgz"), "a-..-b.tgz");
    assert_eq!(revision_file_name("..", "tgz"), "r...tgz");
}

#[test]
fn local_path_refuses_escapes() {
    let storage_dir = tempfile::tempdir().unwrap();
    let storage = Storage::new(storage_dir.path(), "localhost:9090").unwrap();
    for bad in [
        "",
        "a/../b",
        "../etc/passwd",
        "a//b",
        "a/./b",
        "a/.tmp-123",
        "a\\b",
    ] {
        let error = storage.local_path(bad).unwrap_err();
        assert!(
            matches!(error, Error::InvalidArtifactPath { .. }),
            "{bad}: {error}"
        );
    }
    assert_eq!(
        storage.local_path("k/n/m/f.tar.gz").unwrap(),
        storage_dir.path().join("k/n/m/f.tar.gz")
    );
}

#[test]
fn archive_applies_ignore_rules_and_verifies() {
    let source = source_dir();
    let storage_dir = tempfile::tempdir().unwrap();
    let storage = Storage::new(storage_dir.path(), "localhost:9090").unwrap();
    let mut artifact = storage.new_artifact(
        "GitRepository",
        "default",
        "app",
        "main@sha1:aa",
        "aa.tar.gz",
    );
    assert!(!storage.exists(&artifact));
    let filter = IgnoreFilter::for_source(source.path(), None).unwrap();
    storage
        .archive(&mut artifact, source.path(), Some(&filter))
        .unwrap();
    assert!(storage.exists(&artifact));
    storage.verify(&artifact).unwrap();
    let local = storage.local_path(&artifact.path).unwrap();
    assert_eq!(
        artifact.size,
        Some(i64::try_from(std::fs::metadata(&local).unwrap().len()).unwrap())
    );
    assert_eq!(
        artifact.digest,
        Digest::of(&std::fs::read(&local).unwrap()).to_string()
    );

    let out = storage_dir.path().join("out");
    crate::artifact::extract_file(&local, &out, &crate::artifact::Limits::default()).unwrap();
    assert!(out.join("app.yaml").exists());
    assert!(!out.join(".git").exists() && !out.join("logo.png").exists());

    // Same tree, same digest.
    let mut again = artifact.clone();
    storage
        .archive(&mut again, source.path(), Some(&filter))
        .unwrap();
    assert_eq!(again.digest, artifact.digest);

    std::fs::write(&local, "tampered").unwrap();
    let error = storage.verify(&artifact).unwrap_err();
    assert!(
        error.to_string().starts_with("digest mismatch for "),
        "{error}"
    );
}

#[test]
fn store_copies_bytes_as_they_are() {
    let storage_dir = tempfile::tempdir().unwrap();
    let storage = Storage::new(storage_dir.path(), "localhost:9090").unwrap();
    let mut artifact =
        storage.new_artifact("OCIRepository", "default", "app", "sha256:ab", "ab.tar.gz");
    storage.store(&mut artifact, &b"layer bytes"[..]).unwrap();
    assert_eq!(artifact.digest, Digest::of(b"layer bytes").to_string());
    assert_eq!(artifact.size, Some(11));
    storage.verify(&artifact).unwrap();
}

#[test]
fn garbage_collection_keeps_the_current_and_newest() {
    let storage_dir = tempfile::tempdir().unwrap();
    let storage = Storage::new(storage_dir.path(), "localhost:9090").unwrap();
    let base = SystemTime::now() - Duration::from_secs(3600);
    let mut artifacts = Vec::new();
    for (index, name) in ["a", "b", "c", "d"].iter().enumerate() {
        let mut artifact =
            storage.new_artifact("Bucket", "ns", "obj", name, &format!("{name}.tar.gz"));
        storage.store(&mut artifact, name.as_bytes()).unwrap();
        let file = std::fs::File::options()
            .write(true)
            .open(storage.local_path(&artifact.path).unwrap())
            .unwrap();
        file.set_modified(base + Duration::from_secs(60 * index as u64))
            .unwrap();
        artifacts.push(artifact);
    }
    let dir = storage_dir.path().join("bucket/ns/obj");
    std::fs::write(dir.join("b.tar.gz.lock"), "").unwrap();
    // The current artifact is the oldest one (e.g. a rollback): it stays, with the newest other.
    let deleted = storage
        .garbage_collect(&artifacts[0], DEFAULT_RETENTION)
        .unwrap();
    let mut names: Vec<String> = deleted
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["b.tar.gz", "c.tar.gz"]);
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["a.tar.gz", "b.tar.gz.lock", "d.tar.gz"]);

    storage.remove_all("Bucket", "ns", "obj").unwrap();
    assert!(!dir.exists());
    storage.remove_all("Bucket", "ns", "obj").unwrap();
}

#[test]
fn garbage_collection_removes_partial_writes_a_crash_left() {
    let storage_dir = tempfile::tempdir().unwrap();
    let storage = Storage::new(storage_dir.path(), "localhost:9090").unwrap();
    let mut artifact = storage.new_artifact("Bucket", "ns", "obj", "a", "a.tar.gz");
    storage.store(&mut artifact, &b"a"[..]).unwrap();
    let dir = storage_dir.path().join("bucket/ns/obj");
    // One write interrupted two hours ago, one in progress now.
    let stale = std::fs::File::create(dir.join(".tmp-crashed")).unwrap();
    stale
        .set_modified(SystemTime::now() - Duration::from_secs(7200))
        .unwrap();
    std::fs::write(dir.join(".tmp-writing"), "partial").unwrap();
    let deleted = storage
        .garbage_collect(&artifact, DEFAULT_RETENTION)
        .unwrap();
    assert_eq!(deleted, [dir.join(".tmp-crashed")]);
    assert!(
        dir.join(".tmp-writing").exists(),
        "a live write was removed"
    );
    assert!(dir.join("a.tar.gz").exists());
}

async fn get(router: &axum::Router, uri: &str) -> (StatusCode, Vec<u8>) {
    let response = router
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, body)
}

#[tokio::test]
async fn router_serves_files_and_nothing_else() {
    let storage_dir = tempfile::tempdir().unwrap();
    let root = storage_dir.path().join("root");
    let storage = Storage::new(&root, "localhost:9090").unwrap();
    let mut artifact = storage.new_artifact("GitRepository", "default", "app", "r", "r.tar.gz");
    storage.store(&mut artifact, &b"content"[..]).unwrap();
    std::fs::write(storage_dir.path().join("secret"), "outside").unwrap();
    std::fs::write(
        root.join("gitrepository/default/app/.tmp-partial"),
        "partial",
    )
    .unwrap();
    std::os::unix::fs::symlink(
        storage_dir.path().join("secret"),
        root.join("gitrepository/default/app/link"),
    )
    .unwrap();
    let router = storage.router();

    let (status, body) = get(&router, "/gitrepository/default/app/r.tar.gz").await;
    assert_eq!((status, body.as_slice()), (StatusCode::OK, &b"content"[..]));
    for uri in [
        "/",
        "/gitrepository",
        "/gitrepository/default/app",
        "/gitrepository/default/app/",
        "/gitrepository/default/app/missing.tar.gz",
        "/gitrepository/default/app/.tmp-partial",
        "/gitrepository/default/app/link",
        "/gitrepository/../secret",
        "/gitrepository/%2e%2e/%2e%2e/secret",
        "/..%2fsecret",
    ] {
        let (status, body) = get(&router, uri).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "{uri}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let response = router
        .clone()
        .oneshot(
            Request::post("/gitrepository/default/app/r.tar.gz")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn a_stable_link_serves_the_current_artifact_and_garbage_collection_skips_it() {
    let storage_dir = tempfile::tempdir().unwrap();
    let root = storage_dir.path().join("root");
    let storage = Storage::new(&root, "localhost:9090").unwrap();
    let router = storage.router();
    let mut urls = Vec::new();
    let mut artifacts = Vec::new();
    for version in ["1", "2", "3"] {
        let file = format!("chart-{version}.tgz");
        let mut artifact = storage.new_artifact("HelmChart", "default", "app", version, &file);
        storage
            .store(&mut artifact, format!("v{version}").as_bytes())
            .unwrap();
        urls.push(storage.symlink(&artifact, "latest.tar.gz").unwrap());
        storage
            .garbage_collect(&artifact, DEFAULT_RETENTION)
            .unwrap();
        let (status, body) = get(&router, "/helmchart/default/app/latest.tar.gz").await;
        assert_eq!(
            (status, body),
            (StatusCode::OK, format!("v{version}").into_bytes())
        );
        artifacts.push(artifact);
    }
    assert!(
        urls.iter()
            .all(|u| u == "http://localhost:9090/helmchart/default/app/latest.tar.gz"),
        "{urls:?}"
    );
    // Two artifacts are kept as before; the link is neither counted nor deleted.
    assert!(!storage.exists(&artifacts[0]));
    assert!(storage.exists(&artifacts[1]) && storage.exists(&artifacts[2]));
    // A link naming anything but a file of its own directory is not served.
    let dir = root.join("helmchart/default/app");
    std::os::unix::fs::symlink("../../default/app/chart-3.tgz", dir.join("up")).unwrap();
    std::os::unix::fs::symlink("chart-1.tgz", dir.join("gone")).unwrap();
    for uri in ["/helmchart/default/app/up", "/helmchart/default/app/gone"] {
        assert_eq!(get(&router, uri).await.0, StatusCode::NOT_FOUND, "{uri}");
    }
}
