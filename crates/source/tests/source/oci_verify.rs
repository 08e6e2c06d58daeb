//! Cosign signatures with keys against a real `docker-registry`: sign, verify, and the ways a
//! signature must be refused.

use capstan_source::Digest;
use capstan_source::oci::cosign::{
    self, CosignError, Payload, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE,
};
use capstan_source::oci::{self, PublicKey, PullOptions, PushOptions, RegistryOptions, SigningKey};

use crate::support::{Registry, download, require, sample_source, skopeo};

fn insecure() -> RegistryOptions {
    RegistryOptions {
        insecure: true,
        ..RegistryOptions::default()
    }
}

async fn push(registry: &Registry, repository: &str, tag: &str, revision: &str) -> Digest {
    let source = sample_source();
    std::fs::write(source.path().join("revision.txt"), revision).unwrap();
    let url = format!("{}:{tag}", registry.url(repository));
    let options = PushOptions {
        source: "https://github.com/example/fleet".to_owned(),
        revision: revision.to_owned(),
        ..PushOptions::default()
    };
    oci::push(source.path(), &url, &options, &insecure())
        .await
        .unwrap()
        .digest
}

/// The manifest of `reference` (`<repository>:<tag>`) as `skopeo inspect --raw` reads it.
fn raw_manifest(registry: &Registry, reference: &str) -> String {
    skopeo(&[
        "inspect",
        "--raw",
        "--tls-verify=false",
        "--no-creds",
        &format!("docker://{}/{reference}", registry.address),
    ])
}

fn key_pair(name: &str) -> (SigningKey, PublicKey) {
    let key = SigningKey::generate();
    let public = PublicKey::from_pem(name, key.public_key(name).to_pem().as_bytes()).unwrap();
    (key, public)
}

#[tokio::test]
async fn oci_signed_artifacts_verify_with_any_trusted_key() {
    let registry = Registry::start().await;
    let digest = push(&registry, "fleet/signed", "v1", "v1").await;
    let (key, public) = key_pair("team.pub");
    let (_, other) = key_pair("other.pub");

    let signed = oci::sign(
        &format!("{}:v1", registry.url("fleet/signed")),
        &key,
        &insecure(),
    )
    .await
    .unwrap();
    assert_eq!(signed.digest, digest);
    let sig_tag = format!("sha256-{}.sig", digest.hex());
    assert_eq!(
        signed.signature,
        format!("{}:{sig_tag}", registry.url("fleet/signed"))
    );

    // An independent client sees cosign's layout at the signature tag.
    let raw = raw_manifest(&registry, &format!("fleet/signed:{sig_tag}"));
    assert_eq!(Digest::of(raw.as_bytes()), signed.signature_digest);
    let manifest: serde_json::Value = serde_json::from_str(&raw).unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    assert_eq!(layers[0]["mediaType"], SIMPLE_SIGNING_MEDIA_TYPE);
    assert!(layers[0]["annotations"][SIGNATURE_ANNOTATION].is_string());
    let blob = download(&format!(
        "http://{}/v2/fleet/signed/blobs/{}",
        registry.address,
        layers[0]["digest"].as_str().unwrap()
    ))
    .await;
    let payload = Payload::parse(&blob).unwrap();
    assert_eq!(
        payload.critical.image.docker_manifest_digest,
        digest.to_string()
    );
    assert_eq!(
        payload.critical.identity.docker_reference,
        format!("{}/fleet/signed", registry.address)
    );

    // Any key verifying is enough; the result names it.
    let by_digest = format!("{}@{digest}", registry.url("fleet/signed"));
    let verified = oci::verify(&by_digest, &[other.clone(), public.clone()], &insecure())
        .await
        .unwrap();
    assert_eq!(verified.digest, digest);
    assert_eq!(verified.key, "team.pub");
    // A tag is resolved first.
    let verified = oci::verify(
        &format!("{}:v1", registry.url("fleet/signed")),
        std::slice::from_ref(&public),
        &insecure(),
    )
    .await
    .unwrap();
    assert_eq!(verified.digest, digest);

    // Signing again with another key keeps the first signature; both keys verify.
    let (second, second_public) = key_pair("second.pub");
    oci::sign(&by_digest, &second, &insecure()).await.unwrap();
    oci::sign(&by_digest, &key, &insecure()).await.unwrap();
    for trusted in [&public, &second_public] {
        oci::verify(&by_digest, std::slice::from_ref(trusted), &insecure())
            .await
            .unwrap();
    }
    let raw = raw_manifest(&registry, &format!("fleet/signed:{sig_tag}"));
    let manifest: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        manifest["layers"].as_array().unwrap().len(),
        2,
        "one layer per key"
    );

    // Verification downloads no artifact content: the pull still works afterwards.
    let target = tempfile::tempdir().unwrap();
    oci::pull(
        &by_digest,
        &target.path().join("out"),
        &PullOptions::default(),
        &insecure(),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn oci_unsigned_artifacts_and_foreign_keys_are_refused() {
    let registry = Registry::start().await;
    let digest = push(&registry, "fleet/refused", "v1", "v1").await;
    let url = format!("{}@{digest}", registry.url("fleet/refused"));
    let (key, _) = key_pair("team.pub");
    let (_, stranger) = key_pair("stranger.pub");

    let error = oci::verify(&url, std::slice::from_ref(&stranger), &insecure())
        .await
        .unwrap_err();
    assert!(
        matches!(error, CosignError::NoSignatures { ref tag, .. }
                 if *tag == format!("sha256-{}.sig", digest.hex())),
        "{error:?}"
    );
    assert!(
        error.to_string().starts_with("no signatures found for '"),
        "{error}"
    );

    oci::sign(&url, &key, &insecure()).await.unwrap();
    let error = oci::verify(&url, std::slice::from_ref(&stranger), &insecure())
        .await
        .unwrap_err();
    assert!(
        matches!(error, CosignError::NoMatchingSignatures { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.starts_with("no matching signatures were found for '")
            && message.contains("stranger.pub"),
        "{message}"
    );

    let error = oci::verify(&url, &[], &insecure()).await.unwrap_err();
    assert!(matches!(error, CosignError::NoKeys { .. }), "{error:?}");
}

#[tokio::test]
async fn oci_signatures_naming_another_digest_are_refused() {
    let registry = Registry::start().await;
    let repository = "fleet/replayed";
    let good = push(&registry, repository, "v1", "v1").await;
    let evil = push(&registry, repository, "v2", "v2-evil").await;
    let (key, public) = key_pair("team.pub");
    oci::sign(
        &format!("{}@{good}", registry.url(repository)),
        &key,
        &insecure(),
    )
    .await
    .unwrap();

    // The valid signature of v1 replayed onto v2: the signature verifies, the payload does not
    // name v2.
    registry
        .copy_manifest(
            repository,
            &cosign::signature_tag(&good),
            &cosign::signature_tag(&evil),
        )
        .await;
    let error = oci::verify(
        &format!("{}@{evil}", registry.url(repository)),
        std::slice::from_ref(&public),
        &insecure(),
    )
    .await
    .unwrap_err();
    match &error {
        CosignError::PayloadDigestMismatch {
            signed, expected, ..
        } => {
            assert_eq!(signed, &good.to_string());
            assert_eq!(expected, &evil.to_string());
        }
        other => panic!("expected a digest mismatch, got {other:?}"),
    }
    assert!(error.to_string().contains("names digest"), "{error}");
}

#[test]
fn oci_keys_in_cosign_and_openssl_formats_are_read() {
    let key = SigningKey::generate();
    let pem = key.to_pkcs8_pem();
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
    let again = SigningKey::from_pem("cosign.key", pem.as_bytes()).unwrap();
    let payload = b"{\"critical\":{}}";
    let signature = again.sign_base64(payload);
    let public = key.public_key("cosign.pub");
    assert!(public.verifies(payload, &signature));
    assert!(!public.verifies(b"other", &signature));
    let reparsed = PublicKey::from_pem("cosign.pub", public.to_pem().as_bytes()).unwrap();
    assert!(reparsed.verifies(payload, &signature));

    // SEC1 keys as `openssl ecparam -genkey` writes them.
    require("openssl");
    let sec1 = std::process::Command::new("openssl")
        .args(["ecparam", "-name", "prime256v1", "-genkey", "-noout"])
        .output()
        .expect("openssl is installed");
    assert!(sec1.status.success());
    let key = SigningKey::from_pem("ec.key", &sec1.stdout).unwrap();
    assert!(
        key.public_key("ec.pub")
            .verifies(payload, &key.sign_base64(payload))
    );

    let encrypted =
        b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n";
    let error = SigningKey::from_pem("cosign.key", encrypted).unwrap_err();
    assert!(error.to_string().contains("encrypted"), "{error}");
    let error = PublicKey::from_pem("bad.pub", b"not a key").unwrap_err();
    assert!(
        error.to_string().starts_with("invalid key bad.pub"),
        "{error}"
    );
    assert!(
        !error.to_string().contains("not a key"),
        "key material stays out of messages"
    );
}
