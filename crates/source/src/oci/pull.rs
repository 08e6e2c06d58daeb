//! Pulling a Flux OCI artifact.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use oci_client::RegistryOperation;
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciDescriptor;

use super::{
    DOCKER_MANIFEST_MEDIA_TYPE, Descriptor, MANIFEST_MEDIA_TYPE, Manifest, RegistryOptions,
    parse_reference, registry_error, revision,
};
use crate::artifact::{Extracted, Limits};
use crate::digest::Digest;
use crate::error::{Error, Result};

/// What to do with the selected layer (OCIRepository `spec.layerSelector.operation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LayerOperation {
    /// Extract the layer, which must be a gzip-compressed tarball, into a directory.
    #[default]
    Extract,
    /// Keep the layer as it is, written to a file.
    Copy,
}

/// Which layer to use (OCIRepository `spec.layerSelector`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LayerSelector {
    /// The first layer with this media type; the first layer when `None`.
    pub media_type: Option<String>,
    /// What to do with it.
    pub operation: LayerOperation,
}

/// Options for [`pull`].
#[derive(Clone, Debug, Default)]
pub struct PullOptions {
    /// Which layer, and what to do with it.
    pub layer_selector: LayerSelector,
    /// Size limits for the download and the extraction.
    pub limits: Limits,
}

/// What [`pull`] fetched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pulled {
    /// Digest of the manifest.
    pub digest: Digest,
    /// Flux's artifact revision: `<tag>@sha256:<digest>`, or `sha256:<digest>` for a digest
    /// reference.
    pub revision: String,
    /// The manifest annotations (source, revision, created, ...).
    pub annotations: BTreeMap<String, String>,
    /// The layer used.
    pub layer: Descriptor,
    /// What was extracted; `None` for [`LayerOperation::Copy`].
    pub extracted: Option<Extracted>,
}

/// The current manifest digest of `reference`, without downloading the artifact (to tell
/// whether a tag moved).
pub async fn resolve_digest(reference: &str, registry: &RegistryOptions) -> Result<Digest> {
    let image = parse_reference(reference)?;
    let client = registry.client()?;
    let auth = registry.auth();
    client
        .auth(&image, &auth, RegistryOperation::Pull)
        .await
        .map_err(|e| registry_error("log in to", &image, e))?;
    let digest = client
        .fetch_manifest_digest(&image, &auth)
        .await
        .map_err(|e| registry_error("resolve the digest of", &image, e))?;
    digest.parse()
}

/// Pulls `reference` (`oci://host/repository:tag` or `…@sha256:<digest>`) and extracts the
/// selected layer into the directory `target` (must not exist or be empty), or with
/// [`LayerOperation::Copy`] writes the layer to the file `target`.
pub async fn pull(
    reference: &str,
    target: &Path,
    options: &PullOptions,
    registry: &RegistryOptions,
) -> Result<Pulled> {
    let image = parse_reference(reference)?;
    let client = registry.client()?;
    let auth = registry.auth();
    client
        .auth(&image, &auth, RegistryOperation::Pull)
        .await
        .map_err(|e| registry_error("log in to", &image, e))?;

    let (manifest_bytes, _) = client
        .pull_manifest_raw(
            &image,
            &auth,
            &[MANIFEST_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE],
        )
        .await
        .map_err(|e| registry_error("pull the manifest of", &image, e))?;
    let digest = Digest::of(&manifest_bytes);
    if let Some(expected) = image.digest()
        && expected != digest.to_string()
    {
        return Err(Error::DigestMismatch {
            subject: format!("the manifest of {}", image.whole()),
            expected: expected.to_owned(),
            actual: digest.to_string(),
        });
    }
    let unsupported = |reason: String| Error::UnsupportedManifest {
        reference: image.whole(),
        reason,
    };
    let manifest = Manifest::parse(&manifest_bytes).map_err(unsupported)?;
    let layer = select_layer(&manifest, &options.layer_selector)
        .ok_or_else(|| match &options.layer_selector.media_type {
            Some(media_type) => Error::LayerNotFound {
                reference: image.whole(),
                media_type: media_type.clone(),
            },
            None => unsupported("the artifact has no layers".to_owned()),
        })?
        .clone();
    let layer_digest: Digest = layer.digest.parse()?;
    let layer_size =
        u64::try_from(layer.size).map_err(|_| unsupported(format!("layer size {}", layer.size)))?;
    if layer_size > options.limits.max_archive_bytes {
        return Err(Error::LimitExceeded {
            entry: String::new(),
            what: format!("layer size {layer_size} of {}", image.whole()),
            limit: options.limits.max_archive_bytes,
        });
    }

    // Download into a temporary file beside the target; the client checks the digest.
    let parent = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| Error::io("create directory", &parent, e))?;
    let temp = tempfile::Builder::new()
        .prefix(".layer-")
        .tempfile_in(&parent)
        .map_err(|e| Error::io("create a temporary file in", &parent, e))?;
    let writer = tokio::fs::File::from_std(
        temp.reopen()
            .map_err(|e| Error::io("open", temp.path(), e))?,
    );
    let descriptor = OciDescriptor {
        media_type: layer.media_type.clone(),
        digest: layer.digest.clone(),
        size: layer.size,
        ..OciDescriptor::default()
    };
    let layer_subject = format!("layer {} of {}", layer.digest, image.whole());
    client
        .pull_blob(&image, &descriptor, writer)
        .await
        .map_err(|e| match e {
            OciDistributionError::DigestError(
                oci_client::errors::DigestError::VerificationError { expected, actual },
            ) => Error::DigestMismatch {
                subject: layer_subject.clone(),
                expected,
                actual,
            },
            other => registry_error("pull a layer of", &image, other),
        })?;
    let size = temp
        .as_file()
        .metadata()
        .map_err(|e| Error::io("inspect", temp.path(), e))?
        .len();
    if size != layer_size {
        return Err(Error::DigestMismatch {
            subject: layer_subject,
            expected: format!("{layer_digest} ({layer_size} bytes)"),
            actual: format!("{size} bytes"),
        });
    }

    let extracted = match options.layer_selector.operation {
        LayerOperation::Copy => {
            temp.persist(target)
                .map_err(|e| Error::io("write", target, e.error))?;
            None
        }
        LayerOperation::Extract => {
            let mut magic = [0u8; 2];
            let is_gzip = temp.as_file().read_exact(&mut magic).is_ok() && magic == [0x1f, 0x8b];
            if !is_gzip {
                return Err(unsupported(format!(
                    "layer {} ({}) is not a gzip-compressed tarball; use the copy operation",
                    layer.digest, layer.media_type
                )));
            }
            let target = target.to_owned();
            let limits = options.limits;
            let extracted = tokio::task::spawn_blocking(move || {
                crate::artifact::extract_file(temp.path(), &target, &limits)
            })
            .await
            .map_err(Error::Task)??;
            Some(extracted)
        }
    };
    Ok(Pulled {
        revision: revision(
            if image.digest().is_some() {
                None
            } else {
                image.tag()
            },
            &digest,
        ),
        digest,
        annotations: manifest.annotations,
        layer,
        extracted,
    })
}

/// The layer chosen by `selector`: the first with its media type, or the first layer.
/// Without a media type, Flux expects the first layer to be the Flux tarball; any media type
/// is accepted here and the gzip check happens on extraction.
fn select_layer<'a>(manifest: &'a Manifest, selector: &LayerSelector) -> Option<&'a Descriptor> {
    match &selector.media_type {
        Some(media_type) => manifest
            .layers
            .iter()
            .find(|layer| &layer.media_type == media_type),
        None => manifest.layers.first(),
    }
}
