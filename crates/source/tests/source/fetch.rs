//! Storage served over HTTP and fetched back by a consumer.

use std::time::Duration;

use capstan_source::Error;
use capstan_source::artifact::{IgnoreFilter, Limits};
use capstan_source::fetch::fetch_artifact;
use capstan_source::storage::{Storage, revision_file_name};

use crate::support::{eventually, http_client, sample_source, tree};

/// Serves `storage` on 127.0.0.1 at a random port; returns the advertised address.
async fn serve(storage_root: &std::path::Path) -> (Storage, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let storage = Storage::new(storage_root, &address).unwrap();
    let router = storage.router();
    let server = tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    let client = http_client();
    let probe = format!("http://{address}/none");
    eventually(Duration::from_secs(10), "the storage server", || {
        let request = client.get(&probe).send();
        async move { request.await.ok().map(|_| ()) }
    })
    .await;
    (storage, server)
}

#[tokio::test]
async fn consumers_fetch_verify_and_extract() {
    let storage_dir = tempfile::tempdir().unwrap();
    let (storage, server) = serve(&storage_dir.path().join("data")).await;
    let source = sample_source();
    std::fs::write(source.path().join(".sourceignore"), "infra/\n").unwrap();
    let revision = "main@sha1:89abcdef0123456789abcdef0123456789abcdef";
    let mut artifact = storage.new_artifact(
        "GitRepository",
        "flux-system",
        "fleet",
        revision,
        &revision_file_name(revision, "tar.gz"),
    );
    let filter = IgnoreFilter::for_source(source.path(), None).unwrap();
    storage
        .archive(&mut artifact, source.path(), Some(&filter))
        .unwrap();
    assert_eq!(
        artifact.path,
        "gitrepository/flux-system/fleet/89abcdef0123456789abcdef0123456789abcdef.tar.gz"
    );
    assert!(artifact.url.starts_with("http://127.0.0.1:"));

    let out = tempfile::tempdir().unwrap();
    let digest = artifact.digest.parse().unwrap();
    let target = out.path().join("fleet");
    let extracted = fetch_artifact(&artifact.url, &digest, &target, &Limits::default())
        .await
        .unwrap();
    assert_eq!(
        extracted.files, 4,
        "three manifests, the hook and .sourceignore minus infra/notes.txt"
    );
    let mut expected = tree(source.path());
    expected.retain(|path, _| !path.starts_with("infra"));
    assert_eq!(tree(&target), expected);

    // A wrong digest: nothing extracted, no temporary file left.
    let wrong = capstan_source::Digest::of(b"something else");
    let error = fetch_artifact(
        &artifact.url,
        &wrong,
        &out.path().join("wrong"),
        &Limits::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, Error::DigestMismatch { .. }), "{error}");
    assert_eq!(
        error.to_string().split(':').next().unwrap(),
        format!(
            "digest mismatch for {}",
            artifact.url.split(':').next().unwrap()
        )
    );

    // Missing files and escapes are 404s.
    let missing = artifact.url.replace(".tar.gz", ".missing.tar.gz");
    let error = fetch_artifact(
        &missing,
        &digest,
        &out.path().join("missing"),
        &Limits::default(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, Error::HttpStatus { status: 404, .. }),
        "{error}"
    );
    let escape = format!("{}/gitrepository/../../etc/passwd", storage.base_url());
    let error = fetch_artifact(
        &escape,
        &digest,
        &out.path().join("escape"),
        &Limits::default(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, Error::HttpStatus { status: 404, .. }),
        "{error}"
    );

    // Too large for the configured limits.
    let tiny = Limits {
        max_archive_bytes: 8,
        ..Limits::default()
    };
    let error = fetch_artifact(&artifact.url, &digest, &out.path().join("tiny"), &tiny)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::LimitExceeded { .. }), "{error}");

    let names: Vec<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["fleet"]);
    server.abort();
}
