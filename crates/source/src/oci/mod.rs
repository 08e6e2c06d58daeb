//! Flux OCI artifacts: push a directory to a registry, pull one back, with Flux's media types
//! and annotations so artifacts move both ways between Capstan and `flux push/pull artifact`.
//!
//! # Expected flow
//! Build [`RegistryOptions`] (credentials from `--creds` or a docker config secret with
//! [`Credentials::from_docker_config`], `insecure` for plain HTTP, CA certificates), then
//! [`push`] a directory under a tag, or [`pull`] a tag or digest into a directory (or, with
//! [`LayerOperation::Copy`], the raw layer into a file). [`resolve_digest`] asks for the
//! current manifest digest of a tag without downloading anything, and [`list_tags`] every tag
//! of a repository (for semver references); all of them build their registry client from the
//! same [`RegistryOptions`]. [`sign`] adds a cosign
//! signature made with a [`SigningKey`] to a pushed artifact, and [`verify`] checks one against
//! trusted [`PublicKey`]s before anything is pulled (see [`cosign`]).
//!
//! # Guarantees
//! - Pushed artifacts have an OCI image manifest (`application/vnd.oci.image.manifest.v1+json`)
//!   with config media type [`CONFIG_MEDIA_TYPE`], one layer of [`CONTENT_MEDIA_TYPE`] (the
//!   gzip-compressed tarball of [`crate::artifact::pack`]), and the annotations
//!   [`SOURCE_ANNOTATION`], [`REVISION_ANNOTATION`] and [`CREATED_ANNOTATION`]; the config
//!   blob is the one `flux push artifact` writes.
//! - With [`Created::Reproducible`] the same directory gives the same manifest digest.
//! - On pull, the manifest digest is checked against a digest reference, the layer against
//!   its descriptor digest and size, before anything is extracted; extraction is
//!   [`crate::artifact::extract`] with its limits.
//!
//! # Errors
//! [`crate::Error::Registry`] wraps transport and registry errors, naming the operation and
//! reference; [`crate::Error::DigestMismatch`] a tampered blob or manifest;
//! [`crate::Error::LayerNotFound`] / [`crate::Error::UnsupportedManifest`] artifacts that do
//! not fit the layer selector. Signing and verification return [`CosignError`], which tells
//! a missing signature, a signature of another digest and an unknown key apart.

mod auth;
pub mod cosign;
mod pull;
mod push;
pub mod registry;
mod tags;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::error::{Error, Result};

pub use auth::{Credentials, RegistryOptions};
pub use cosign::{
    CosignError, PayloadError, PublicKey, Signed, SigningKey, Verified, sign, verify,
};
pub use pull::{
    LayerOperation, LayerSelector, MAX_MANIFEST_BYTES, PullOptions, Pulled, pull, resolve_digest,
};
pub use push::{Created, PushOptions, Pushed, config_blob, push};
pub use tags::{MAX_TAGS, list_tags};

/// Media type of the OCI image manifest Flux artifacts use.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Media type of Docker schema 2 manifests, accepted on pull.
pub const DOCKER_MANIFEST_MEDIA_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Media type of the config blob of Flux artifacts.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.flux.config.v1+json";
/// Media type prefix of Flux content layers.
pub const CONTENT_MEDIA_TYPE_PREFIX: &str = "application/vnd.cncf.flux.content.v1";
/// Media type of the gzip-compressed tarball layer of Flux artifacts.
pub const CONTENT_MEDIA_TYPE: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";
/// Annotation with the URL of the artifact's upstream source.
pub const SOURCE_ANNOTATION: &str = "org.opencontainers.image.source";
/// Annotation with the upstream source revision.
pub const REVISION_ANNOTATION: &str = "org.opencontainers.image.revision";
/// Annotation with the RFC 3339 time the artifact was built.
pub const CREATED_ANNOTATION: &str = "org.opencontainers.image.created";
/// The `oci://` scheme of OCIRepository URLs and CLI arguments.
pub const URL_SCHEME: &str = "oci://";

/// A content descriptor, as found in manifests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Media type of the referenced content.
    pub media_type: String,
    /// Size in bytes.
    pub size: i64,
    /// Digest, `sha256:<hex>`.
    pub digest: String,
    /// Optional annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An OCI image manifest, with the fields Flux artifacts use (others are ignored on read).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// The manifest media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    #[serde(default)]
    pub layers: Vec<Descriptor>,
    /// Manifest annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Manifest {
    /// Parses and checks an image manifest: JSON with schema version 2 and, when given, the
    /// OCI or Docker schema 2 manifest media type. The error says what is wrong.
    pub fn parse(bytes: &[u8]) -> std::result::Result<Self, UnusableManifest> {
        let manifest: Self = serde_json::from_slice(bytes).map_err(UnusableManifest::NotJson)?;
        if manifest.schema_version != 2 {
            return Err(UnusableManifest::SchemaVersion(manifest.schema_version));
        }
        if let Some(media_type) = manifest.media_type.as_deref()
            && media_type != MANIFEST_MEDIA_TYPE
            && media_type != DOCKER_MANIFEST_MEDIA_TYPE
        {
            return Err(UnusableManifest::MediaType(media_type.to_owned()));
        }
        Ok(manifest)
    }
}

/// Why a manifest cannot be used (the reason of [`Error::UnsupportedManifest`] and
/// [`CosignError::InvalidSignatureManifest`]).
#[derive(Debug, thiserror::Error)]
pub enum UnusableManifest {
    /// The bytes are not a manifest's JSON.
    #[error("not an image manifest: {0}")]
    NotJson(#[source] serde_json::Error),
    /// A schema version other than 2.
    #[error("schema version {0}")]
    SchemaVersion(u32),
    /// A media type other than the OCI or Docker schema 2 manifest's.
    #[error("media type {0}")]
    MediaType(String),
    /// The manifest lists no layers.
    #[error("the artifact has no layers")]
    NoLayers,
    /// A layer's size is negative.
    #[error("layer size {0}")]
    LayerSize(i64),
    /// The selected layer is to be extracted but is not a gzip-compressed tarball.
    #[error(
        "layer {digest} ({media_type}) is not a gzip-compressed tarball; use the copy operation"
    )]
    NotGzip {
        /// The layer's digest.
        digest: String,
        /// The layer's media type.
        media_type: String,
    },
    /// More layers than a signature manifest may have.
    #[error("{count} layers (limit {limit})")]
    TooManyLayers {
        /// The layers listed.
        count: usize,
        /// The limit.
        limit: usize,
    },
}

/// Parses `oci://host[:port]/repository[:tag][@sha256:…]` (the scheme is optional).
pub fn parse_reference(url: &str) -> Result<oci_client::Reference> {
    let bare = url.strip_prefix(URL_SCHEME).unwrap_or(url);
    if bare.is_empty() || bare.contains("://") {
        return Err(Error::InvalidReference {
            reference: url.to_owned(),
            reason: "expected oci://<registry>/<repository>[:<tag>][@<digest>]".to_owned(),
        });
    }
    bare.parse::<oci_client::Reference>()
        .map_err(|e| Error::InvalidReference {
            reference: url.to_owned(),
            reason: e.to_string(),
        })
}

/// The artifact revision Flux records for a pulled reference: `<tag>@sha256:<manifest digest>`,
/// or `sha256:<manifest digest>` when no tag is given.
pub fn revision(tag: Option<&str>, manifest_digest: &Digest) -> String {
    match tag {
        Some(tag) if !tag.is_empty() => format!("{tag}@{manifest_digest}"),
        _ => manifest_digest.to_string(),
    }
}

pub(crate) fn registry_error(
    operation: &'static str,
    reference: &oci_client::Reference,
    source: oci_client::errors::OciDistributionError,
) -> Error {
    Error::Registry {
        operation,
        reference: reference.whole(),
        source: Box::new(source),
    }
}

#[cfg(test)]
mod tests;
