//! Push, pull, sign and verify against a `docker-registry` serving HTTPS with a certificate from
//! a test CA made here; `skopeo` with `--cert-dir` is the independent client.

use capstan_source::oci::{self, PullOptions, PushOptions, RegistryOptions, SigningKey};

use crate::support::{Registry, TestCa, sample_source, skopeo, tree};

/// A directory holding `ca.crt`: skopeo reads CA certificates as `*.crt` from a directory.
fn cert_dir(ca: &TestCa) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.crt"), ca.pem()).unwrap();
    dir
}

/// The error and its causes, joined.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[tokio::test]
async fn oci_tls_registry_with_a_private_ca() {
    let ca = TestCa::new();
    let registry = Registry::start_tls(&ca.server()).await;
    let with_ca = RegistryOptions {
        ca_certificates: vec![ca.pem().as_bytes().to_vec()],
        ..RegistryOptions::default()
    };
    let source = sample_source();
    let url = format!("{}:v1", registry.url("fleet/tls"));
    let pushed = oci::push(source.path(), &url, &PushOptions::default(), &with_ca)
        .await
        .unwrap();

    // skopeo trusts the same CA and sees what we pushed, over HTTPS.
    let certs = cert_dir(&ca);
    let raw = skopeo(&[
        "inspect",
        "--raw",
        "--no-creds",
        "--cert-dir",
        &certs.path().display().to_string(),
        &format!("docker://{}/fleet/tls:v1", registry.address),
    ]);
    assert_eq!(capstan_source::Digest::of(raw.as_bytes()), pushed.digest);

    let target = tempfile::tempdir().unwrap();
    let out = target.path().join("out");
    let pulled = oci::pull(&url, &out, &PullOptions::default(), &with_ca)
        .await
        .unwrap();
    assert_eq!(pulled.digest, pushed.digest);
    assert_eq!(tree(&out), tree(source.path()));

    // Signatures travel over the same TLS settings.
    let key = SigningKey::generate();
    oci::sign(&url, &key, &with_ca).await.unwrap();
    let verified = oci::verify(&url, &[key.public_key("tls.pub")], &with_ca)
        .await
        .unwrap();
    assert_eq!(verified.digest, pushed.digest);

    // Without the CA the certificate is refused, and the error says so.
    let error = oci::pull(
        &url,
        &target.path().join("refused"),
        &PullOptions::default(),
        &RegistryOptions::default(),
    )
    .await
    .unwrap_err();
    let message = chain(&error);
    assert!(
        message.contains("certificate") && message.contains("UnknownIssuer"),
        "{message}"
    );
    assert!(!target.path().join("refused").exists());
    let error = oci::resolve_digest(&url, &RegistryOptions::default())
        .await
        .unwrap_err();
    assert!(chain(&error).contains("certificate"), "{error}");

    // Another CA is no better than none.
    let other = TestCa::new();
    let wrong_ca = RegistryOptions {
        ca_certificates: vec![other.pem().as_bytes().to_vec()],
        ..RegistryOptions::default()
    };
    let error = oci::resolve_digest(&url, &wrong_ca).await.unwrap_err();
    assert!(chain(&error).contains("certificate"), "{error}");
}
