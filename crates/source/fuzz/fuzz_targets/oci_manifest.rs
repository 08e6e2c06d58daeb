//! Parsing what a registry hands us before anything is trusted: OCI manifests (with the Flux
//! artifact annotations), cosign signature payloads, signatures and references. Nothing may
//! panic; what parses must survive a serialise/parse round trip.

#![no_main]

use std::sync::OnceLock;

use capstan_source::oci::cosign::Payload;
use capstan_source::oci::{self, Manifest, PublicKey, SigningKey};
use libfuzzer_sys::fuzz_target;

fn key() -> &'static PublicKey {
    static KEY: OnceLock<PublicKey> = OnceLock::new();
    KEY.get_or_init(|| SigningKey::generate().public_key("fuzz.pub"))
}

fuzz_target!(|data: &[u8]| {
    if let Ok(manifest) = Manifest::parse(data) {
        let again = Manifest::parse(&serde_json::to_vec(&manifest).unwrap()).unwrap();
        assert_eq!(again, manifest);
        // The Flux artifact metadata read from the annotations.
        for annotation in [
            oci::SOURCE_ANNOTATION,
            oci::REVISION_ANNOTATION,
            oci::CREATED_ANNOTATION,
        ] {
            let _ = manifest.annotations.get(annotation);
        }
        for layer in &manifest.layers {
            if let Ok(digest) = layer.digest.parse::<capstan_source::Digest>() {
                let _ = oci::revision(Some("latest"), &digest);
                let _ = oci::cosign::signature_tag(&digest);
            }
            if let Some(signature) = layer.annotations.get(oci::cosign::SIGNATURE_ANNOTATION) {
                assert!(!key().verifies(data, signature));
            }
        }
    }
    if let Ok(payload) = Payload::parse(data) {
        assert_eq!(Payload::parse(&payload.to_bytes()).unwrap(), payload);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        // A random signature never verifies, and odd base64/DER never panics.
        assert!(!key().verifies(b"payload", text));
        let _ = oci::parse_reference(text);
        let _ = PublicKey::from_pem("fuzz.pub", data);
        let _ = SigningKey::from_pem("fuzz.key", data);
    }
});
