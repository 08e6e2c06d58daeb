//! Hostile-input cases: what a Git server or a bucket can make a fetch read, inflate and write.
//! A Git pack is bounded while it arrives, an object while it inflates (a "Git bomb": a few KiB
//! of pack for many MiB of zeros), a checkout before each file is written; a bucket's listing is
//! checked before any download (each listing page is capped while it streams), and each
//! download stops at its listed size. Each case uses
//! small [`Limits`] so that real servers (`git http-backend`, `moto_server`) can pass them in a
//! test; the controllers pass the limits their storage packs artifacts with.

use axum::response::IntoResponse as _;
use capstan_source::artifact::Limits;
use capstan_source::bucket;
use capstan_source::git::{self, FetchOptions, GitAuth, GitReference};
use capstan_testkit::buckets::{BUCKET, Moto};
use futures::StreamExt as _;

use crate::support::GitServer;

/// Limits small enough for a test repository to pass them.
fn small_limits() -> Limits {
    Limits {
        max_archive_bytes: 1 << 20,
        max_total_bytes: 8 << 20,
        max_file_bytes: 2 << 20,
        max_entries: 50,
        ..Limits::default()
    }
}

/// Fetches `main` of `upstream` with [`small_limits`] and returns the error message.
async fn fetch_error(upstream: &GitServer) -> String {
    let options = FetchOptions {
        limits: small_limits(),
        ..FetchOptions::default()
    };
    let out = tempfile::tempdir().unwrap();
    let main = GitReference::branch("main");
    git::fetch(&upstream.url(), &main, &GitAuth::None, out.path(), &options)
        .await
        .expect_err("the limits hold")
        .to_string()
}

#[tokio::test]
async fn a_pack_larger_than_the_archive_limit_stops_while_it_arrives() {
    let upstream = GitServer::start().await;
    // 3 MiB that do not compress: the pack alone passes the 1 MiB limit.
    let mut noise = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::open("/dev/urandom").unwrap(), 3 << 20),
        &mut noise,
    )
    .unwrap();
    std::fs::write(upstream.work().join("noise.bin"), &noise).unwrap();
    upstream.commit_all("noise");
    let message = fetch_error(&upstream).await;
    assert!(
        message.starts_with(&format!("cannot fetch {}: pack size ", upstream.url()))
            && message.ends_with("exceeds the limit of 1048576"),
        "{message}"
    );
    let pack_bytes: u64 = message
        .split("pack size ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(
        pack_bytes < 2 << 20,
        "read {pack_bytes} bytes before stopping"
    );
}

#[tokio::test]
async fn a_git_bomb_is_refused_before_an_object_is_inflated_in_memory() {
    let upstream = GitServer::start().await;
    // 64 MiB of zeros: a pack of a few hundred KiB, far below the archive limit.
    std::fs::write(upstream.work().join("zeros.bin"), vec![0u8; 64 << 20]).unwrap();
    upstream.commit_all("bomb");
    let message = fetch_error(&upstream).await;
    assert_eq!(
        message,
        format!(
            "cannot fetch {}: object size {} exceeds the limit of {}",
            upstream.url(),
            64 << 20,
            2 << 20
        )
    );
}

#[tokio::test]
async fn a_checkout_stops_at_the_entry_limit_and_names_the_entry() {
    let upstream = GitServer::start().await;
    let files: Vec<(String, String)> = (0..60)
        .map(|i| (format!("many/file-{i:02}.yaml"), format!("n: {i}\n")))
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(name, text)| (name.as_str(), text.as_str()))
        .collect();
    upstream.commit(&files, "many files");
    let message = fetch_error(&upstream).await;
    assert_eq!(
        message,
        format!(
            "cannot check out {}: entry count 51 exceeds the limit of 50 (at \"many/file-49.yaml\")",
            upstream.url()
        )
    );

    // Within the limits the same options fetch.
    let upstream = GitServer::start().await;
    upstream.commit(&files[..10], "a few files");
    let options = FetchOptions {
        limits: small_limits(),
        ..FetchOptions::default()
    };
    let out = tempfile::tempdir().unwrap();
    git::fetch(
        &upstream.url(),
        &GitReference::branch("main"),
        &GitAuth::None,
        out.path(),
        &options,
    )
    .await
    .unwrap();
    assert!(out.path().join("many/file-09.yaml").is_file());
}

#[tokio::test]
async fn bucket_limits_are_checked_on_the_listing_before_any_download() {
    let moto = Moto::start().await;
    let limits = Limits {
        max_entries: 3,
        max_file_bytes: 1_000,
        max_total_bytes: 1_500,
        ..Limits::default()
    };
    let options = bucket::FetchOptions {
        limits,
        ..bucket::FetchOptions::default()
    };
    let fetch_error = |dest: std::path::PathBuf| {
        let (spec, credentials, options) = (moto.spec(), moto.credentials(), &options);
        async move {
            let error = bucket::fetch(&spec, &credentials, &dest, options)
                .await
                .expect_err("the limits hold");
            // Refused on the listing: nothing was downloaded.
            assert!(
                std::fs::read_dir(&dest).map_or(true, |mut d| d.next().is_none()),
                "files were written"
            );
            error.to_string()
        }
    };
    let target = tempfile::tempdir().unwrap();

    let big = "x".repeat(1_001);
    moto.put(&[("big.yaml", big.as_str())]);
    assert_eq!(
        fetch_error(target.path().join("one")).await,
        format!("bucket {BUCKET}: file size 1001 exceeds the limit of 1000 (at \"big.yaml\")")
    );

    let half = "x".repeat(800);
    moto.delete(&["big.yaml"]);
    moto.put(&[("a.yaml", half.as_str()), ("b.yaml", half.as_str())]);
    assert_eq!(
        fetch_error(target.path().join("two")).await,
        format!("bucket {BUCKET}: total size 1600 exceeds the limit of 1500")
    );

    moto.delete(&["a.yaml", "b.yaml"]);
    moto.put(&[("1", ""), ("2", ""), ("3", ""), ("4", "")]);
    assert_eq!(
        fetch_error(target.path().join("three")).await,
        format!("bucket {BUCKET}: object count 4 exceeds the limit of 3")
    );
    // The revision check lists the same way.
    let error = bucket::remote_revision(&moto.spec(), &moto.credentials(), &options)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("object count 4"), "{error}");

    // A root .sourceignore is read up to 1 MiB.
    moto.delete(&["1", "2", "3", "4"]);
    let huge = "#".repeat((1 << 20) + 1);
    moto.put(&[(".sourceignore", huge.as_str())]);
    let message = fetch_error(target.path().join("four")).await;
    assert!(
        message.starts_with(&format!("bucket {BUCKET}: file size of more than "))
            && message.ends_with("exceeds the limit of 1048576 (at \".sourceignore\")"),
        "{message}"
    );
}

/// An S3 endpoint whose listing never ends: every page request gets an endless XML body; the
/// root `.sourceignore` does not exist. Counts the bytes it sent.
async fn endless_listing_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    let sent = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&sent);
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let counter = Arc::clone(&counter);
        async move {
            if uri.path().ends_with("/.sourceignore") {
                return axum::http::StatusCode::NOT_FOUND.into_response();
            }
            let entry = "<Contents><Key>a.yaml</Key><Size>1</Size></Contents>".repeat(1_000);
            let head = futures::stream::once(async {
                Ok::<_, std::io::Error>(axum::body::Bytes::from_static(
                    b"<?xml version=\"1.0\"?><ListBucketResult>",
                ))
            });
            let body = head.chain(futures::stream::repeat_with(move || {
                counter.fetch_add(entry.len() as u64, Ordering::Relaxed);
                Ok(axum::body::Bytes::from(entry.clone()))
            }));
            axum::response::Response::new(axum::body::Body::from_stream(body))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (address.to_string(), sent)
}

#[tokio::test]
async fn an_endless_bucket_listing_is_cut_at_the_page_limit() {
    let (endpoint, sent) = endless_listing_server().await;
    let spec: capstan_api::source::v1::BucketSpec = serde_json::from_value(serde_json::json!({
        "provider": "generic",
        "bucketName": "hostile",
        "endpoint": endpoint,
        "insecure": true,
        "interval": "1m",
    }))
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let error = bucket::fetch(
        &spec,
        &bucket::Credentials::Anonymous,
        &out.path().join("objects"),
        &bucket::FetchOptions::default(),
    )
    .await
    .expect_err("an endless listing is refused")
    .to_string();
    assert!(
        error.contains(&format!(
            "listing or error response larger than the limit of {} bytes",
            bucket::MAX_LISTING_PAGE_BYTES
        )),
        "{error}"
    );
    let sent = sent.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        sent < 64 << 20,
        "the server sent {sent} bytes before the client stopped"
    );
}

/// An S3 endpoint that answers every request with an error status and an endless body (which
/// object_store reads whole into its error message): the read stops at the error-body limit.
#[tokio::test]
async fn an_endless_error_answer_is_cut_at_its_limit() {
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = std::sync::Arc::clone(&sent);
    let app = axum::Router::new().fallback(move || {
        let counter = std::sync::Arc::clone(&counter);
        async move {
            let chunk = "x".repeat(64 << 10);
            let body = futures::stream::repeat_with(move || {
                counter.fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed);
                Ok::<_, std::io::Error>(axum::body::Bytes::from(chunk.clone()))
            });
            let mut response = axum::response::Response::new(axum::body::Body::from_stream(body));
            *response.status_mut() = axum::http::StatusCode::FORBIDDEN;
            response
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let spec: capstan_api::source::v1::BucketSpec = serde_json::from_value(serde_json::json!({
        "provider": "generic", "bucketName": "hostile", "endpoint": endpoint,
        "insecure": true, "interval": "1m",
    }))
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let error = bucket::fetch(
        &spec,
        &bucket::Credentials::Anonymous,
        &out.path().join("objects"),
        &bucket::FetchOptions::default(),
    )
    .await
    .expect_err("an endless error answer is refused")
    .to_string();
    assert!(
        error.contains(&format!(
            "larger than the limit of {} bytes",
            bucket::MAX_ERROR_BODY_BYTES
        )),
        "{error}"
    );
    let sent = sent.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        sent < 64 << 20,
        "the server sent {sent} bytes before the client stopped"
    );
}
