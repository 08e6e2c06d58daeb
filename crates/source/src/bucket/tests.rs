use super::*;

fn secret(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), value.as_bytes().to_vec()))
        .collect()
}

fn spec(endpoint: &str) -> BucketSpec {
    serde_json::from_value(serde_json::json!({
        "bucketName": "flux",
        "endpoint": endpoint,
        "interval": "1m",
    }))
    .unwrap()
}

#[test]
fn safe_relative_path_accepts_normal_keys() {
    assert_eq!(
        safe_relative_path("apps/base/app.yaml").unwrap(),
        Path::new("apps").join("base").join("app.yaml")
    );
    assert_eq!(
        safe_relative_path("..hidden").unwrap(),
        Path::new("..hidden")
    );
}

#[test]
fn safe_relative_path_refuses_escapes() {
    for key in [
        "../x",
        "a/../../x",
        "/etc/passwd",
        "a//b",
        "a/./b",
        "",
        "a\\..\\b",
        "..",
    ] {
        let error = safe_relative_path(key).unwrap_err();
        assert!(
            matches!(&error, Error::UnsafeObjectKey { key: k, .. } if k == key),
            "{key:?}: {error}"
        );
    }
}

#[test]
fn s3_etags_lose_their_quotes_and_azure_etags_are_hex_encoded() {
    assert_eq!(Flavour::S3.etag(Some("\"abc123\"")), "abc123");
    assert_eq!(Flavour::S3.etag(None), "");
    // Flux: fmt.Sprintf("%x", etag) over the string's bytes.
    assert_eq!(Flavour::Azure.etag(Some("0x8D")), "30783844");
    assert_eq!(Flavour::Azure.etag(Some("\"0x8D\"")), "30783844");
}

#[test]
fn azure_account_comes_from_host_or_emulator_path() {
    assert_eq!(
        azure_account("https://myaccount.blob.core.windows.net").unwrap(),
        "myaccount"
    );
    assert_eq!(
        azure_account("http://127.0.0.1:10000/devstoreaccount1").unwrap(),
        "devstoreaccount1"
    );
    assert_eq!(
        azure_account("http://localhost:10000/devstoreaccount1/").unwrap(),
        "devstoreaccount1"
    );
    assert!(matches!(
        azure_account("https://example.com"),
        Err(Error::InvalidBucket { .. })
    ));
    assert!(matches!(
        azure_account("myaccount.blob.core.windows.net"),
        Err(Error::InvalidBucket { .. })
    ));
    assert!(matches!(
        azure_account("http://127.0.0.1:10000"),
        Err(Error::InvalidBucket { .. })
    ));
}

#[test]
fn s3_endpoint_scheme_follows_insecure() {
    let mut spec = spec("minio.example:9000");
    assert_eq!(s3_endpoint(&spec).unwrap(), "https://minio.example:9000");
    spec.insecure = Some(true);
    assert_eq!(s3_endpoint(&spec).unwrap(), "http://minio.example:9000");
    spec.endpoint = "http://already:1/".to_owned();
    assert_eq!(s3_endpoint(&spec).unwrap(), "http://already:1");
    spec.endpoint = " ".to_owned();
    assert!(matches!(
        s3_endpoint(&spec),
        Err(Error::InvalidBucket { .. })
    ));
}

#[test]
fn credentials_follow_flux_secret_fields() {
    let s3 = Credentials::from_secret(
        CloudProvider::Generic,
        &secret(&[("accesskey", "AK"), ("secretkey", "SK\n")]),
    )
    .unwrap();
    assert!(
        matches!(&s3, Credentials::S3 { access_key, secret_key } if access_key == "AK" && secret_key == "SK")
    );
    let missing = Credentials::from_secret(CloudProvider::Generic, &secret(&[("accesskey", "AK")]))
        .unwrap_err();
    assert!(missing.to_string().contains("secretkey"), "{missing}");

    let key =
        Credentials::from_secret(CloudProvider::Azure, &secret(&[("accountKey", "k")])).unwrap();
    assert!(matches!(key, Credentials::AzureAccountKey(k) if k == "k"));
    let sas = Credentials::from_secret(CloudProvider::Azure, &secret(&[("sasKey", "?sv=1&sig=x")]))
        .unwrap();
    assert!(matches!(sas, Credentials::AzureSas(s) if s == "?sv=1&sig=x"));
    let identity =
        Credentials::from_secret(CloudProvider::Azure, &secret(&[("clientId", "id")])).unwrap_err();
    assert!(identity.to_string().contains("not supported"), "{identity}");
}

#[test]
fn credentials_debug_never_shows_secrets() {
    let credentials = Credentials::S3 {
        access_key: "AKIDVISIBLE".to_owned(),
        secret_key: "topsecret".to_owned(),
    };
    let printed = format!("{credentials:?}");
    assert!(!printed.contains("topsecret") && !printed.contains("AKIDVISIBLE"));
}

#[test]
fn mismatched_credentials_are_refused() {
    let mut azure = spec("http://127.0.0.1:1/devstoreaccount1");
    azure.provider = Some(CloudProvider::Azure);
    let error = Bucket::connect(
        &azure,
        &Credentials::S3 {
            access_key: "a".to_owned(),
            secret_key: "b".to_owned(),
        },
    )
    .err()
    .unwrap();
    assert!(matches!(error, Error::BucketCredentials { .. }), "{error}");
    let s3 = spec("127.0.0.1:1");
    let error = Bucket::connect(&s3, &Credentials::AzureAccountKey("k".to_owned()))
        .err()
        .unwrap();
    assert!(matches!(error, Error::BucketCredentials { .. }), "{error}");
}

#[test]
fn prepare_target_refuses_non_empty_directories() {
    let dir = tempfile::tempdir().unwrap();
    prepare_target(&dir.path().join("new/nested")).unwrap();
    assert!(dir.path().join("new/nested").is_dir());
    std::fs::write(dir.path().join("new/nested/file"), "x").unwrap();
    assert!(matches!(
        prepare_target(&dir.path().join("new/nested")),
        Err(Error::TargetNotEmpty { .. })
    ));
}

#[test]
fn bucket_ignore_filter_has_no_defaults_and_spec_wins() {
    let filter = IgnoreFilter::for_bucket(Some("*.txt\n"), Some("!keep.txt\n")).unwrap();
    assert!(filter.is_ignored(Path::new("notes.txt"), false));
    assert!(!filter.is_ignored(Path::new("keep.txt"), false));
    assert!(
        !filter.is_ignored(Path::new("logo.png"), false),
        "no default exclusions for buckets"
    );
    assert!(!filter.is_ignored(Path::new(".git/config"), false));
    let none = IgnoreFilter::for_bucket(None, None).unwrap();
    assert!(none.is_empty());
}
