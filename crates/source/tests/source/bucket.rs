//! Bucket fetch against real object stores on 127.0.0.1: S3 served by `moto_server` (with IAM
//! authentication on) and Azure Blob served by `azurite-blob`. Objects are written by an
//! independent client (capstan-testkit's `bucket_client.py`: boto3 and hand-signed Azure REST
//! calls).

use std::collections::BTreeMap;
use std::path::Path;

use capstan_api::source::v1::{BucketSpec, CloudProvider};
use capstan_source::Error;
use capstan_source::bucket::{self, Credentials, FetchOptions, index_digest};
use sha2::{Digest as _, Sha256};

use capstan_testkit::buckets::{AZURE_ACCOUNT, AZURE_KEY, Azurite, BUCKET, Moto};

use crate::support::tree;

/// The Azure spec of an [`Azurite`] server.
fn azurite_spec(azurite: &Azurite) -> BucketSpec {
    serde_json::from_value(serde_json::json!({
        "provider": "azure",
        "bucketName": BUCKET,
        "endpoint": format!("{}/{AZURE_ACCOUNT}", azurite.endpoint),
        "interval": "1m",
    }))
    .unwrap()
}

fn azure_credentials(key: &str) -> Credentials {
    let secret = BTreeMap::from([("accountKey".to_owned(), key.as_bytes().to_vec())]);
    Credentials::from_secret(CloudProvider::Azure, &secret).unwrap()
}

/// Flux's index digest, computed here from the ETags the independent client saw.
fn expected_revision(etags: &BTreeMap<String, String>) -> String {
    let mut hasher = Sha256::new();
    for (key, etag) in etags {
        hasher.update(format!("{key} {etag}\n").as_bytes());
    }
    let hex = hasher
        .finalize()
        .iter()
        .fold(String::new(), |mut out, byte| {
            use std::fmt::Write as _;
            let _ = write!(out, "{byte:02x}");
            out
        });
    format!("sha256:{hex}")
}

fn files(dir: &Path) -> BTreeMap<String, String> {
    tree(dir)
        .into_iter()
        .filter(|(path, _)| !path.ends_with('/'))
        .map(|(path, content)| (path, String::from_utf8(content).unwrap()))
        .collect()
}

fn expected_files(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, content)| ((*key).to_owned(), (*content).to_owned()))
        .collect()
}

#[tokio::test]
async fn s3_fetch_writes_objects_with_flux_revision() {
    let moto = Moto::start().await;
    let objects = [
        ("apps/app.yaml", "kind: ConfigMap\n"),
        ("apps/base/kustomization.yaml", "resources: []\n"),
        ("readme.md", "hello\n"),
    ];
    let etags = moto.put(&objects);
    let target = tempfile::tempdir().unwrap();
    let dest = target.path().join("out");

    let result = bucket::fetch(
        &moto.spec(),
        &moto.credentials(),
        &dest,
        &FetchOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(files(&dest), expected_files(&objects));
    assert_eq!(result.index, etags);
    assert_eq!(result.revision, expected_revision(&etags));
    assert_eq!(result.revision, index_digest(&result.index));

    let remote =
        bucket::remote_revision(&moto.spec(), &moto.credentials(), &FetchOptions::default())
            .await
            .unwrap();
    assert_eq!(remote, result.revision);
}

#[tokio::test]
async fn s3_revision_is_stable_and_follows_changes() {
    let moto = Moto::start().await;
    moto.put(&[("a.yaml", "one\n"), ("b/c.yaml", "two\n")]);
    let options = FetchOptions::default();
    let first = bucket::remote_revision(&moto.spec(), &moto.credentials(), &options)
        .await
        .unwrap();
    let again = bucket::remote_revision(&moto.spec(), &moto.credentials(), &options)
        .await
        .unwrap();
    assert_eq!(first, again, "unchanged bucket keeps its revision");

    // Rewriting the same content keeps the ETag (an MD5), hence the revision.
    moto.put(&[("a.yaml", "one\n")]);
    let rewritten = bucket::remote_revision(&moto.spec(), &moto.credentials(), &options)
        .await
        .unwrap();
    assert_eq!(first, rewritten);

    moto.put(&[("a.yaml", "changed\n")]);
    let changed = bucket::remote_revision(&moto.spec(), &moto.credentials(), &options)
        .await
        .unwrap();
    assert_ne!(first, changed);
    let dest = tempfile::tempdir().unwrap();
    let fetched = bucket::fetch(&moto.spec(), &moto.credentials(), dest.path(), &options)
        .await
        .unwrap();
    assert_eq!(fetched.revision, changed);
    assert_eq!(
        std::fs::read_to_string(dest.path().join("a.yaml")).unwrap(),
        "changed\n"
    );

    moto.delete(&["b/c.yaml"]);
    let deleted = bucket::remote_revision(&moto.spec(), &moto.credentials(), &options)
        .await
        .unwrap();
    assert_ne!(deleted, changed);
}

#[tokio::test]
async fn s3_prefix_limits_the_objects() {
    let moto = Moto::start_without_auth().await;
    moto.put(&[
        ("apps/app.yaml", "app\n"),
        ("apps/nested/more.yaml", "more\n"),
        ("appsx/other.yaml", "other\n"),
        ("infra/db.yaml", "db\n"),
    ]);
    let mut spec = moto.spec();
    spec.prefix = Some("apps/".to_owned());
    let dest = tempfile::tempdir().unwrap();
    let result = bucket::fetch(
        &spec,
        &moto.credentials(),
        dest.path(),
        &FetchOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        files(dest.path()),
        expected_files(&[
            ("apps/app.yaml", "app\n"),
            ("apps/nested/more.yaml", "more\n")
        ])
    );
    assert_eq!(
        result.index.keys().collect::<Vec<_>>(),
        ["apps/app.yaml", "apps/nested/more.yaml"]
    );

    // A raw prefix, as S3 matches it: not cut at a `/`.
    spec.prefix = Some("app".to_owned());
    let dest = tempfile::tempdir().unwrap();
    let result = bucket::fetch(
        &spec,
        &moto.credentials(),
        dest.path(),
        &FetchOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        result.index.keys().collect::<Vec<_>>(),
        ["apps/app.yaml", "apps/nested/more.yaml", "appsx/other.yaml"]
    );
}

#[tokio::test]
async fn s3_sourceignore_and_spec_ignore_exclude_objects() {
    let moto = Moto::start().await;
    let etags = moto.put(&[
        (".sourceignore", "*.md\nsecrets/\n"),
        ("readme.md", "docs\n"),
        ("secrets/token.yaml", "token\n"),
        ("apps/app.yaml", "app\n"),
        ("apps/debug.yaml", "debug\n"),
        ("keep.md", "kept by spec.ignore\n"),
    ]);
    let mut spec = moto.spec();
    spec.ignore = Some("apps/debug.yaml\n!keep.md\n".to_owned());
    let dest = tempfile::tempdir().unwrap();
    let result = bucket::fetch(
        &spec,
        &moto.credentials(),
        dest.path(),
        &FetchOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        files(dest.path()),
        expected_files(&[
            (".sourceignore", "*.md\nsecrets/\n"),
            ("apps/app.yaml", "app\n"),
            ("keep.md", "kept by spec.ignore\n"),
        ])
    );
    // The index (and so the revision) leaves out `.sourceignore` itself, as Flux does.
    let kept: BTreeMap<String, String> = etags
        .into_iter()
        .filter(|(key, _)| key == "apps/app.yaml" || key == "keep.md")
        .collect();
    assert_eq!(result.index, kept);
    assert_eq!(result.revision, expected_revision(&kept));

    // Changing an ignored object does not change the revision.
    moto.put(&[("readme.md", "new docs\n")]);
    let remote = bucket::remote_revision(&spec, &moto.credentials(), &FetchOptions::default())
        .await
        .unwrap();
    assert_eq!(remote, result.revision);
}

#[tokio::test]
async fn s3_wrong_secret_is_a_clear_error() {
    let moto = Moto::start().await;
    moto.put(&[("a.yaml", "a\n")]);
    let wrong = Credentials::S3 {
        access_key: moto.access_key.clone(),
        secret_key: "not-the-secret".to_owned(),
    };
    let dest = tempfile::tempdir().unwrap();
    let error = bucket::fetch(&moto.spec(), &wrong, dest.path(), &FetchOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Bucket { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("bucket flux"), "{message}");
    assert!(message.contains("403"), "{message}");
    assert!(!message.contains("not-the-secret"), "{message}");
    assert!(files(dest.path()).is_empty());
}

#[tokio::test]
async fn s3_key_escaping_the_target_is_refused() {
    let moto = Moto::start().await;
    moto.put(&[("ok.yaml", "ok\n"), ("apps/../../escape.yaml", "evil\n")]);
    let target = tempfile::tempdir().unwrap();
    let dest = target.path().join("out");
    let error = bucket::fetch(
        &moto.spec(),
        &moto.credentials(),
        &dest,
        &FetchOptions::default(),
    )
    .await
    .unwrap_err();
    match &error {
        Error::UnsafeObjectKey { key, .. } => assert!(key.contains(".."), "{error}"),
        other => panic!("expected an unsafe key error, got {other:?}"),
    }
    assert!(
        error.to_string().contains("apps/../../escape.yaml"),
        "{error}"
    );
    assert!(!target.path().join("escape.yaml").exists());
    assert!(!target.path().parent().unwrap().join("escape.yaml").exists());
}

#[tokio::test]
async fn azure_fetch_with_account_key() {
    let azurite = Azurite::start().await;
    let objects = [
        ("apps/app.yaml", "kind: ConfigMap\n"),
        ("apps/skip.yaml", "skip\n"),
        ("infra/db.yaml", "db\n"),
    ];
    azurite.put(&objects);
    let mut spec = azurite_spec(&azurite);
    spec.ignore = Some("apps/skip.yaml\n".to_owned());
    let credentials = azure_credentials(AZURE_KEY);
    let options = FetchOptions::default();
    let dest = tempfile::tempdir().unwrap();
    let result = bucket::fetch(&spec, &credentials, dest.path(), &options)
        .await
        .unwrap();
    assert_eq!(
        files(dest.path()),
        expected_files(&[
            ("apps/app.yaml", "kind: ConfigMap\n"),
            ("infra/db.yaml", "db\n")
        ])
    );
    assert_eq!(result.revision, index_digest(&result.index));
    for etag in result.index.values() {
        assert!(
            !etag.is_empty() && etag.chars().all(|c| c.is_ascii_hexdigit()),
            "azure etags are hex-encoded as Flux does: {etag}"
        );
    }
    let remote = bucket::remote_revision(&spec, &credentials, &options)
        .await
        .unwrap();
    assert_eq!(remote, result.revision);
    assert_eq!(
        bucket::remote_revision(&spec, &credentials, &options)
            .await
            .unwrap(),
        remote,
        "unchanged container keeps its revision"
    );

    azurite.put(&[("infra/db.yaml", "db v2\n")]);
    let changed = bucket::remote_revision(&spec, &credentials, &options)
        .await
        .unwrap();
    assert_ne!(changed, remote);
    let dest = tempfile::tempdir().unwrap();
    let fetched = bucket::fetch(&spec, &credentials, dest.path(), &options)
        .await
        .unwrap();
    assert_eq!(fetched.revision, changed);
    assert_eq!(
        std::fs::read_to_string(dest.path().join("infra/db.yaml")).unwrap(),
        "db v2\n"
    );
}

#[tokio::test]
async fn azure_fetch_with_sas_token() {
    let azurite = Azurite::start().await;
    azurite.put(&[("apps/app.yaml", "app\n")]);
    let secret = BTreeMap::from([(
        "sasKey".to_owned(),
        format!("?{}", azurite.sas_token()).into_bytes(),
    )]);
    let credentials = Credentials::from_secret(CloudProvider::Azure, &secret).unwrap();
    let dest = tempfile::tempdir().unwrap();
    let result = bucket::fetch(
        &azurite_spec(&azurite),
        &azure_credentials(AZURE_KEY),
        dest.path(),
        &FetchOptions::default(),
    )
    .await
    .unwrap();
    let with_sas = tempfile::tempdir().unwrap();
    let sas_result = bucket::fetch(
        &azurite_spec(&azurite),
        &credentials,
        with_sas.path(),
        &FetchOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        files(with_sas.path()),
        expected_files(&[("apps/app.yaml", "app\n")])
    );
    assert_eq!(sas_result.revision, result.revision);
}

#[tokio::test]
async fn azure_wrong_account_key_is_a_clear_error() {
    let azurite = Azurite::start().await;
    azurite.put(&[("a.yaml", "a\n")]);
    // A valid base64 key that is not the account's.
    let wrong = azure_credentials("d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmc=");
    let error = bucket::remote_revision(&azurite_spec(&azurite), &wrong, &FetchOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Bucket { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("bucket flux"), "{message}");
    assert!(message.contains("403"), "{message}");
}
