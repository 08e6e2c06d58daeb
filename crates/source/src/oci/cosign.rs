//! Cosign signatures with keys, in cosign's classic registry layout.
//!
//! The signature of the artifact with manifest digest `sha256:<hex>` lives in the same
//! repository under the tag `sha256-<hex>.sig`: an OCI image manifest whose layers are
//! [`SIMPLE_SIGNING_MEDIA_TYPE`] payloads (a small JSON document naming the signed manifest
//! digest in `critical.image.docker-manifest-digest`), each with the annotation
//! [`SIGNATURE_ANNOTATION`] holding the base64 ECDSA signature of the payload bytes.
//!
//! [`verify`] accepts an artifact when at least one layer's signature verifies with at least
//! one of the given keys **and** its payload names the artifact's digest. [`sign`] appends such
//! a layer (creating the manifest when needed), as `cosign sign --key` does.
//!
//! Keys are ECDSA P-256, what `cosign generate-key-pair` makes: public keys as SPKI PEM
//! (`-----BEGIN PUBLIC KEY-----`, the `cosign.pub` file), private keys as unencrypted PKCS#8
//! (`-----BEGIN PRIVATE KEY-----`) or SEC1 (`-----BEGIN EC PRIVATE KEY-----`) PEM. Cosign's
//! own encrypted private key files are refused with a hint. No transparency log or
//! certificate is involved: keyless (Fulcio/Rekor) verification is not implemented.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use http::HeaderValue;
use oci_client::RegistryOperation;
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _, EncodePublicKey as _, LineEnding};
use serde::{Deserialize, Serialize};

use super::{
    DOCKER_MANIFEST_MEDIA_TYPE, Descriptor, MANIFEST_MEDIA_TYPE, Manifest, RegistryOptions,
    UnusableManifest, config_blob, parse_reference, registry_error,
};
use crate::digest::Digest;
use crate::error::Error;
use crate::redact::error_chain;

/// Media type of cosign's signature payload layers.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// Layer annotation holding the base64 signature of the payload.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// `critical.type` of cosign signature payloads.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";
/// Config media type of the signature manifest.
const SIGNATURE_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// The `created` time cosign writes into the signature config blob.
const SIGNATURE_CREATED: &str = "0001-01-01T00:00:00Z";

/// Signature layers looked at, at most; a signature manifest with more is refused.
pub const MAX_SIGNATURE_LAYERS: usize = 100;
/// Largest payload downloaded, in bytes (cosign's payloads are a few hundred bytes).
pub const MAX_PAYLOAD_BYTES: i64 = 64 << 10;

/// What can go wrong while signing or verifying.
///
/// The messages are lower-case and name the reference, tag or key involved, never key
/// material, ready to follow "failed to verify the signature using provider 'cosign': ".
#[derive(Debug, thiserror::Error)]
pub enum CosignError {
    /// A key could not be read.
    #[error("invalid key {name}: {reason}")]
    InvalidKey {
        /// Where the key came from (a file or Secret key name).
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No public key was given.
    #[error("no public keys to verify {reference} with")]
    NoKeys {
        /// The artifact.
        reference: String,
    },
    /// The signature tag does not exist.
    #[error("no signatures found for '{reference}': tag {tag} does not exist")]
    NoSignatures {
        /// The artifact, `<registry>/<repository>@<digest>`.
        reference: String,
        /// The signature tag looked up.
        tag: String,
    },
    /// The signature manifest cannot be used.
    #[error("invalid signature manifest {tag} for '{reference}': {reason}")]
    InvalidSignatureManifest {
        /// The artifact.
        reference: String,
        /// The signature tag.
        tag: String,
        /// What is wrong with it.
        #[source]
        reason: UnusableManifest,
    },
    /// A signature verified, but its payload names another manifest digest: the signature
    /// of another artifact was copied onto this one.
    #[error(
        "signature payload for '{reference}' is signed by {key} but names digest {signed}, not {expected}"
    )]
    PayloadDigestMismatch {
        /// The artifact.
        reference: String,
        /// The key whose signature verified.
        key: String,
        /// The digest the payload names.
        signed: String,
        /// The artifact's digest.
        expected: String,
    },
    /// No signature verified with any key.
    #[error("no matching signatures were found for '{reference}': {details}")]
    NoMatchingSignatures {
        /// The artifact.
        reference: String,
        /// How many signatures were tried with which keys.
        details: String,
    },
    /// A registry request failed.
    #[error(transparent)]
    Registry(#[from] Error),
}

/// A trusted public key: ECDSA P-256, as in a `cosign.pub` file.
#[derive(Clone)]
pub struct PublicKey {
    name: String,
    key: p256::ecdsa::VerifyingKey,
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublicKey")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl PublicKey {
    /// Parses an SPKI PEM public key (`-----BEGIN PUBLIC KEY-----`); `name` (a file or Secret
    /// key name such as `cosign.pub`) is used in messages.
    pub fn from_pem(name: &str, pem: &[u8]) -> Result<Self, CosignError> {
        let invalid = |reason: String| CosignError::InvalidKey {
            name: name.to_owned(),
            reason,
        };
        let text = std::str::from_utf8(pem).map_err(|_| invalid("not UTF-8 PEM".to_owned()))?;
        if !text.contains("-----BEGIN PUBLIC KEY-----") {
            return Err(invalid(
                "expected a PEM public key (-----BEGIN PUBLIC KEY-----)".to_owned(),
            ));
        }
        let key = p256::ecdsa::VerifyingKey::from_public_key_pem(text.trim()).map_err(|e| {
            invalid(format!(
                "not an ECDSA P-256 public key (the only kind supported): {e}"
            ))
        })?;
        Ok(Self {
            name: name.to_owned(),
            key,
        })
    }

    /// The name given to [`PublicKey::from_pem`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key as SPKI PEM.
    pub fn to_pem(&self) -> String {
        self.key
            .to_public_key_pem(LineEnding::LF)
            .expect("a P-256 public key encodes")
    }

    /// Whether `signature` (base64 of an ASN.1 DER or fixed-size ECDSA signature) signs
    /// `payload` with this key.
    pub fn verifies(&self, payload: &[u8], signature: &str) -> bool {
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(signature.trim()) else {
            return false;
        };
        let signature = p256::ecdsa::Signature::from_der(&bytes)
            .or_else(|_| p256::ecdsa::Signature::from_slice(&bytes));
        let Ok(signature) = signature else {
            return false;
        };
        // Go's ECDSA accepts both S forms; so does cosign.
        let signature = signature.normalize_s();
        self.key.verify(payload, &signature).is_ok()
    }
}

/// A private signing key: ECDSA P-256, unencrypted PKCS#8 or SEC1 PEM.
pub struct SigningKey {
    key: p256::ecdsa::SigningKey,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

impl SigningKey {
    /// A new random key.
    pub fn generate() -> Self {
        use p256::elliptic_curve::Generate as _;
        Self {
            key: p256::ecdsa::SigningKey::generate(),
        }
    }

    /// Parses an unencrypted PKCS#8 (`-----BEGIN PRIVATE KEY-----`) or SEC1
    /// (`-----BEGIN EC PRIVATE KEY-----`) PEM private key; `name` is used in messages.
    /// Cosign's encrypted key files (`cosign.key`) are refused: decrypt them first.
    pub fn from_pem(name: &str, pem: &[u8]) -> Result<Self, CosignError> {
        let invalid = |reason: String| CosignError::InvalidKey {
            name: name.to_owned(),
            reason,
        };
        let text = std::str::from_utf8(pem).map_err(|_| invalid("not UTF-8 PEM".to_owned()))?;
        let text = text.trim();
        if text.contains("ENCRYPTED") {
            return Err(invalid(
                "encrypted private keys are not supported; use an unencrypted PKCS#8 PEM key \
                 (e.g. `openssl pkcs8 -topk8 -nocrypt`)"
                    .to_owned(),
            ));
        }
        let key = if text.contains("-----BEGIN PRIVATE KEY-----") {
            p256::ecdsa::SigningKey::from_pkcs8_pem(text).map_err(|e| {
                invalid(format!(
                    "not an ECDSA P-256 private key (the only kind supported): {e}"
                ))
            })?
        } else if text.contains("-----BEGIN EC PRIVATE KEY-----") {
            let secret = p256::SecretKey::from_sec1_pem(text)
                .map_err(|e| invalid(format!("not an ECDSA P-256 private key: {e}")))?;
            p256::ecdsa::SigningKey::from(secret)
        } else {
            return Err(invalid(
                "expected a PEM private key (-----BEGIN PRIVATE KEY-----)".to_owned(),
            ));
        };
        Ok(Self { key })
    }

    /// The key as unencrypted PKCS#8 PEM (the secret: keep it out of logs).
    pub fn to_pkcs8_pem(&self) -> String {
        use p256::pkcs8::EncodePrivateKey as _;
        self.key
            .to_pkcs8_pem(LineEnding::LF)
            .expect("a P-256 private key encodes")
            .to_string()
    }

    /// The matching public key, named `name`.
    pub fn public_key(&self, name: &str) -> PublicKey {
        PublicKey {
            name: name.to_owned(),
            key: *self.key.verifying_key(),
        }
    }

    /// The base64 ASN.1 DER ECDSA-SHA256 signature of `payload`, as cosign writes it.
    pub fn sign_base64(&self, payload: &[u8]) -> String {
        let signature: p256::ecdsa::Signature = self.key.sign(payload);
        base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes())
    }
}

/// A cosign "simple signing" payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// The signed claims.
    pub critical: Critical,
    /// Free-form annotations (`null` when none).
    #[serde(default)]
    pub optional: Option<BTreeMap<String, serde_json::Value>>,
}

/// The `critical` section of a [`Payload`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Critical {
    /// The repository the signature was made for.
    pub identity: Identity,
    /// The signed manifest.
    pub image: Image,
    /// [`PAYLOAD_TYPE`].
    #[serde(rename = "type")]
    pub type_: String,
}

/// `critical.identity` of a [`Payload`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// `<registry>/<repository>`.
    #[serde(rename = "docker-reference")]
    pub docker_reference: String,
}

/// `critical.image` of a [`Payload`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// `sha256:<hex>` of the signed manifest.
    #[serde(rename = "docker-manifest-digest")]
    pub docker_manifest_digest: String,
}

impl Payload {
    /// The payload signing `digest` in the repository `docker_reference`.
    pub fn new(docker_reference: &str, digest: &Digest) -> Self {
        Self {
            critical: Critical {
                identity: Identity {
                    docker_reference: docker_reference.to_owned(),
                },
                image: Image {
                    docker_manifest_digest: digest.to_string(),
                },
                type_: PAYLOAD_TYPE.to_owned(),
            },
            optional: None,
        }
    }

    /// Parses payload bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self, PayloadError> {
        serde_json::from_slice(bytes).map_err(PayloadError::Invalid)
    }

    /// The payload bytes that get signed.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("payload serializes")
    }
}

/// The tag of the signature of the manifest `digest`: `sha256-<hex>.sig`.
pub fn signature_tag(digest: &Digest) -> String {
    format!("sha256-{}.sig", digest.hex())
}

/// What [`verify`] established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The verified manifest digest.
    pub digest: Digest,
    /// The name of the key that verified it.
    pub key: String,
}

/// What [`sign`] pushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    /// The signed manifest digest.
    pub digest: Digest,
    /// `oci://<registry>/<repository>:sha256-<hex>.sig`.
    pub signature: String,
    /// Digest of the signature manifest.
    pub signature_digest: Digest,
}

fn is_not_found(error: &OciDistributionError) -> bool {
    match error {
        OciDistributionError::ImageManifestNotFoundError(_)
        | OciDistributionError::ServerError { code: 404, .. } => true,
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown
            )
        }),
        _ => false,
    }
}

/// The artifact (`…:tag` or `…@sha256:…`) as a digest reference, resolving a tag.
async fn digest_reference(
    client: &oci_client::Client,
    image: &oci_client::Reference,
    auth: &oci_client::secrets::RegistryAuth,
) -> Result<Digest, CosignError> {
    if let Some(digest) = image.digest() {
        return Ok(digest.parse()?);
    }
    let digest = client
        .fetch_manifest_digest(image, auth)
        .await
        .map_err(|e| registry_error("resolve the digest of", image, e))?;
    Ok(digest.parse()?)
}

/// The signature manifest of `digest` in `image`'s repository, `None` when the tag is absent.
async fn signature_manifest(
    client: &oci_client::Client,
    image: &oci_client::Reference,
    auth: &oci_client::secrets::RegistryAuth,
    digest: &Digest,
) -> Result<(oci_client::Reference, Option<Manifest>), CosignError> {
    let tag = signature_tag(digest);
    let reference = oci_client::Reference::with_tag(
        image.registry().to_owned(),
        image.repository().to_owned(),
        tag.clone(),
    );
    let bytes = match client
        .pull_manifest_raw(
            &reference,
            auth,
            &[MANIFEST_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE],
        )
        .await
    {
        Ok((bytes, _)) => bytes,
        Err(e) if is_not_found(&e) => return Ok((reference, None)),
        Err(e) => {
            return Err(registry_error("pull the signature manifest of", image, e).into());
        }
    };
    let manifest =
        Manifest::parse(&bytes).map_err(|reason| CosignError::InvalidSignatureManifest {
            reference: artifact_name(image, digest),
            tag,
            reason,
        })?;
    Ok((reference, Some(manifest)))
}

/// Why a signature payload was not used (listed in [`CosignError::NoMatchingSignatures`]).
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// The payload is not a simple-signing payload.
    #[error("invalid signature payload: {0}")]
    Invalid(#[source] serde_json::Error),
    /// The descriptor's size is negative or over [`MAX_PAYLOAD_BYTES`].
    #[error("payload {digest} has size {size} (limit {MAX_PAYLOAD_BYTES})")]
    Size {
        /// The payload's digest.
        digest: String,
        /// The size its descriptor gives.
        size: i64,
    },
    /// The registry did not give the payload.
    #[error("cannot pull payload {digest}: {source}")]
    Pull {
        /// The payload's digest.
        digest: String,
        /// The registry's error.
        #[source]
        source: Box<OciDistributionError>,
    },
    /// The payload's length is not its descriptor's size.
    #[error("payload {digest} has {length} bytes, descriptor says {size}")]
    Length {
        /// The payload's digest.
        digest: String,
        /// The bytes received.
        length: usize,
        /// The size its descriptor gives.
        size: i64,
    },
}

/// `<registry>/<repository>@<digest>`, as messages name the artifact.
fn artifact_name(image: &oci_client::Reference, digest: &Digest) -> String {
    format!("{}/{}@{digest}", image.registry(), image.repository())
}

/// Downloads a small blob of `reference`'s repository, checking its digest and size.
async fn pull_small_blob(
    client: &oci_client::Client,
    reference: &oci_client::Reference,
    layer: &Descriptor,
) -> Result<Vec<u8>, PayloadError> {
    if !(0..=MAX_PAYLOAD_BYTES).contains(&layer.size) {
        return Err(PayloadError::Size {
            digest: layer.digest.clone(),
            size: layer.size,
        });
    }
    let descriptor = OciDescriptor {
        media_type: layer.media_type.clone(),
        digest: layer.digest.clone(),
        size: layer.size,
        ..OciDescriptor::default()
    };
    let mut bytes = Vec::new();
    client
        .pull_blob(reference, &descriptor, &mut bytes)
        .await
        .map_err(|source| PayloadError::Pull {
            digest: layer.digest.clone(),
            source: Box::new(source),
        })?;
    if i64::try_from(bytes.len()).ok() != Some(layer.size) {
        return Err(PayloadError::Length {
            digest: layer.digest.clone(),
            length: bytes.len(),
            size: layer.size,
        });
    }
    Ok(bytes)
}

/// Verifies the cosign signature of `reference` (`oci://host/repository@sha256:…`, or a tag,
/// resolved first) with `keys`: some signature layer must verify with some key and name the
/// artifact's manifest digest. Only the signature manifest and its payloads are downloaded.
pub async fn verify(
    reference: &str,
    keys: &[PublicKey],
    registry: &RegistryOptions,
) -> Result<Verified, CosignError> {
    let image = parse_reference(reference)?;
    if keys.is_empty() {
        return Err(CosignError::NoKeys {
            reference: image.whole(),
        });
    }
    let client = registry.client()?;
    let auth = registry.auth();
    client
        .auth(&image, &auth, RegistryOperation::Pull)
        .await
        .map_err(|e| registry_error("log in to", &image, e))?;
    let digest = digest_reference(&client, &image, &auth).await?;
    let name = artifact_name(&image, &digest);
    let tag = signature_tag(&digest);
    let (signature_ref, manifest) = signature_manifest(&client, &image, &auth, &digest).await?;
    let Some(manifest) = manifest else {
        return Err(CosignError::NoSignatures {
            reference: name,
            tag,
        });
    };
    if manifest.layers.len() > MAX_SIGNATURE_LAYERS {
        return Err(CosignError::InvalidSignatureManifest {
            reference: name,
            tag,
            reason: UnusableManifest::TooManyLayers {
                count: manifest.layers.len(),
                limit: MAX_SIGNATURE_LAYERS,
            },
        });
    }
    let mut tried = 0usize;
    let mut mismatch = None;
    let mut problems = Vec::new();
    for layer in &manifest.layers {
        if layer.media_type != SIMPLE_SIGNING_MEDIA_TYPE {
            continue;
        }
        let Some(signature) = layer.annotations.get(SIGNATURE_ANNOTATION) else {
            continue;
        };
        tried += 1;
        let payload = match pull_small_blob(&client, &signature_ref, layer).await {
            Ok(payload) => payload,
            Err(problem) => {
                problems.push(error_chain(&problem));
                continue;
            }
        };
        let Some(key) = keys.iter().find(|key| key.verifies(&payload, signature)) else {
            continue;
        };
        match Payload::parse(&payload) {
            Ok(parsed) if parsed.critical.image.docker_manifest_digest == digest.to_string() => {
                return Ok(Verified {
                    digest,
                    key: key.name.clone(),
                });
            }
            Ok(parsed) => {
                mismatch.get_or_insert(CosignError::PayloadDigestMismatch {
                    reference: name.clone(),
                    key: key.name.clone(),
                    signed: parsed.critical.image.docker_manifest_digest,
                    expected: digest.to_string(),
                });
            }
            Err(problem) => problems.push(format!(
                "payload {}: {}",
                layer.digest,
                error_chain(&problem)
            )),
        }
    }
    if let Some(mismatch) = mismatch {
        return Err(mismatch);
    }
    let key_names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
    let mut details = format!(
        "{tried} signature(s) in {tag}, none verifies with {}",
        key_names.join(", ")
    );
    for problem in problems {
        details.push_str("; ");
        details.push_str(&problem);
    }
    Err(CosignError::NoMatchingSignatures {
        reference: name,
        details,
    })
}

/// Signs the artifact `reference` (`oci://host/repository:tag` or `…@sha256:…`) with `key`:
/// pushes a payload naming its manifest digest and adds it, with the signature annotation, to
/// the manifest at tag `sha256-<hex>.sig` in the same repository (created when absent; the
/// layers of other signers are kept, a second signature with the same key is a no-op).
/// The result verifies with `cosign verify --key` and with [`verify`].
pub async fn sign(
    reference: &str,
    key: &SigningKey,
    registry: &RegistryOptions,
) -> Result<Signed, CosignError> {
    let image = parse_reference(reference)?;
    let client = registry.client()?;
    let auth = registry.auth();
    client
        .auth(&image, &auth, RegistryOperation::Push)
        .await
        .map_err(|e| registry_error("log in to", &image, e))?;
    let digest = digest_reference(&client, &image, &auth).await?;
    let (signature_ref, existing) = signature_manifest(&client, &image, &auth, &digest).await?;

    let payload = Payload::new(
        &format!("{}/{}", image.registry(), image.repository()),
        &digest,
    )
    .to_bytes();
    let payload_digest = Digest::of(&payload);
    let signature = key.sign_base64(&payload);
    let layer = Descriptor {
        media_type: SIMPLE_SIGNING_MEDIA_TYPE.to_owned(),
        size: i64::try_from(payload.len()).unwrap_or(i64::MAX),
        digest: payload_digest.to_string(),
        annotations: BTreeMap::from([(SIGNATURE_ANNOTATION.to_owned(), signature)]),
    };
    let mut layers = existing.map(|m| m.layers).unwrap_or_default();
    // ECDSA signatures of the same payload differ; one per key is enough.
    let public = key.public_key("signing key");
    let already = layers.iter().any(|l| {
        l.digest == layer.digest
            && l.annotations
                .get(SIGNATURE_ANNOTATION)
                .is_some_and(|s| public.verifies(&payload, s))
    });
    if !already {
        client
            .push_blob(&signature_ref, payload, &layer.digest)
            .await
            .map_err(|e| registry_error("push the signature payload to", &image, e))?;
        layers.push(layer);
    }
    // The config lists the layers' digests as diff IDs (they are not compressed).
    let mut config: serde_json::Value =
        serde_json::from_slice(&config_blob(SIGNATURE_CREATED, &Digest::of(b"")))
            .expect("config blob is JSON");
    config["rootfs"]["diff_ids"] = layers.iter().map(|l| l.digest.clone()).collect();
    let config = serde_json::to_vec(&config).expect("config serializes");
    let config_digest = Digest::of(&config);
    client
        .push_blob(&signature_ref, config.clone(), &config_digest.to_string())
        .await
        .map_err(|e| registry_error("push the signature config to", &image, e))?;
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.to_owned()),
        config: Descriptor {
            media_type: SIGNATURE_CONFIG_MEDIA_TYPE.to_owned(),
            size: i64::try_from(config.len()).unwrap_or(i64::MAX),
            digest: config_digest.to_string(),
            annotations: BTreeMap::new(),
        },
        layers,
        annotations: BTreeMap::new(),
    };
    let manifest_bytes = serde_json::to_vec(&manifest).expect("manifest serializes");
    let signature_digest = Digest::of(&manifest_bytes);
    client
        .push_manifest_raw(
            &signature_ref,
            manifest_bytes,
            HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(|e| registry_error("push the signature manifest to", &image, e))?;
    Ok(Signed {
        digest,
        signature: format!(
            "{}{}/{}:{}",
            super::URL_SCHEME,
            image.registry(),
            image.repository(),
            signature_tag(&digest)
        ),
        signature_digest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_have_cosign_layout() {
        let digest: Digest = format!("sha256:{}", "ab".repeat(32)).parse().unwrap();
        let payload = Payload::new("ghcr.io/example/fleet", &digest);
        assert_eq!(
            String::from_utf8(payload.to_bytes()).unwrap(),
            format!(
                "{{\"critical\":{{\"identity\":{{\"docker-reference\":\"ghcr.io/example/fleet\"}},\
                 \"image\":{{\"docker-manifest-digest\":\"{digest}\"}},\
                 \"type\":\"cosign container image signature\"}},\"optional\":null}}"
            )
        );
        assert_eq!(Payload::parse(&payload.to_bytes()).unwrap(), payload);
        assert_eq!(
            signature_tag(&digest),
            format!("sha256-{}.sig", "ab".repeat(32))
        );
        let error = Payload::parse(b"{\"critical\":{}}").unwrap_err();
        assert!(
            error.to_string().starts_with("invalid signature payload"),
            "{error}"
        );
    }

    #[test]
    fn signatures_verify_in_der_and_fixed_form_only_for_their_payload() {
        let key = SigningKey::generate();
        let public = key.public_key("k.pub");
        let der = key.sign_base64(b"payload");
        assert!(public.verifies(b"payload", &der));
        assert!(!public.verifies(b"payload!", &der));
        assert!(
            !SigningKey::generate()
                .public_key("other.pub")
                .verifies(b"payload", &der)
        );
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&der)
            .unwrap();
        let fixed = p256::ecdsa::Signature::from_der(&bytes).unwrap().to_bytes();
        let fixed = base64::engine::general_purpose::STANDARD.encode(fixed);
        assert!(public.verifies(b"payload", &fixed));
        for junk in ["", "not base64!", "AAAA"] {
            assert!(!public.verifies(b"payload", junk), "{junk:?}");
        }
    }

    #[test]
    fn debug_output_hides_private_keys() {
        let key = SigningKey::generate();
        let pem = key.to_pkcs8_pem();
        let debug = format!("{key:?}");
        assert_eq!(debug, "SigningKey(<redacted>)");
        let parsed = SigningKey::from_pem("k", pem.as_bytes()).unwrap();
        assert_eq!(
            parsed.public_key("a").to_pem(),
            key.public_key("b").to_pem()
        );
    }
}
