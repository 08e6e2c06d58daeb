//! Pulling a Flux OCI artifact.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use oci_client::RegistryOperation;
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciDescriptor;

use super::{
    DOCKER_MANIFEST_MEDIA_TYPE, Descriptor, MANIFEST_MEDIA_TYPE, Manifest, RegistryOptions,
    UnusableManifest, parse_reference, registry_error, revision,
};
use crate::artifact::{Extracted, Limits};
use crate::digest::Digest;
use crate::error::{Error, Result};

/// Largest manifest read, in bytes (the size the OCI distribution spec asks registries to
/// accept at least); a larger one is refused while it streams.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;

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
    let token = client
        .auth(&image, &auth, RegistryOperation::Pull)
        .await
        .map_err(|e| registry_error("log in to", &image, e))?;

    let (manifest_bytes, digest) =
        pull_verified_manifest(&image, registry, token.as_deref()).await?;
    let unsupported = |reason: UnusableManifest| Error::UnsupportedManifest {
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
            None => unsupported(UnusableManifest::NoLayers),
        })?
        .clone();
    let layer_digest: Digest = layer.digest.parse()?;
    let layer_size = u64::try_from(layer.size)
        .map_err(|_| unsupported(UnusableManifest::LayerSize(layer.size)))?;
    if layer_size > options.limits.max_archive_bytes {
        return Err(Error::LimitExceeded {
            entry: String::new(),
            what: format!("layer size {layer_size} of {}", image.whole()),
            limit: options.limits.max_archive_bytes,
        });
    }

    let temp = download_layer(&client, &image, &layer, &layer_digest, layer_size, target).await?;

    let extracted = place_layer(temp, target, options, &layer, &image).await?;
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

/// Pulls the manifest of `image` (bounded by [`MAX_MANIFEST_BYTES`]) and returns it with its
/// digest, which must match the digest `image` names, if any.
async fn pull_verified_manifest(
    image: &oci_client::Reference,
    registry: &RegistryOptions,
    token: Option<&str>,
) -> Result<(Vec<u8>, Digest)> {
    let manifest_bytes = pull_manifest_bounded(image, registry, token)
        .await
        .map_err(|e| match e {
            ManifestError::Registry(e) => registry_error("pull the manifest of", image, e),
            ManifestError::TooLarge(size) => Error::LimitExceeded {
                entry: String::new(),
                what: format!("manifest size {size} of {}", image.whole()),
                limit: MAX_MANIFEST_BYTES,
            },
        })?;
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
    Ok((manifest_bytes, digest))
}

/// Downloads `layer` of `image` into a temporary file beside `target`, never more than the
/// descriptor's size; the client checks the digest at the end of the stream.
async fn download_layer(
    client: &oci_client::Client,
    image: &oci_client::Reference,
    layer: &Descriptor,
    layer_digest: &Digest,
    layer_size: u64,
    target: &Path,
) -> Result<tempfile::NamedTempFile> {
    let parent = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| Error::io("create directory", &parent, e))?;
    let temp = tempfile::Builder::new()
        .prefix(".layer-")
        .tempfile_in(&parent)
        .map_err(|e| Error::io("create a temporary file in", &parent, e))?;
    let descriptor = OciDescriptor {
        media_type: layer.media_type.clone(),
        digest: layer.digest.clone(),
        size: layer.size,
        ..OciDescriptor::default()
    };
    let layer_subject = format!("layer {} of {}", layer.digest, image.whole());
    let larger = |actual: String| Error::DigestMismatch {
        subject: layer_subject.clone(),
        expected: format!("{layer_digest} ({layer_size} bytes)"),
        actual,
    };
    let mut stream = client
        .pull_blob_stream(image, &descriptor)
        .await
        .map_err(|e| registry_error("pull a layer of", image, e))?;
    if let Some(length) = stream.content_length.filter(|&length| length != layer_size) {
        return Err(larger(format!("Content-Length {length}")));
    }
    let mut file = std::io::BufWriter::new(
        temp.reopen()
            .map_err(|e| Error::io("open", temp.path(), e))?,
    );
    let mut size = 0u64;
    while let Some(chunk) = stream.stream.next().await {
        let chunk = chunk.map_err(|e| {
            match e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<oci_client::errors::DigestError>())
            {
                Some(oci_client::errors::DigestError::VerificationError { expected, actual }) => {
                    Error::DigestMismatch {
                        subject: layer_subject.clone(),
                        expected: expected.clone(),
                        actual: actual.clone(),
                    }
                }
                _ => registry_error("pull a layer of", image, e.into()),
            }
        })?;
        size += chunk.len() as u64;
        if size > layer_size {
            return Err(larger(format!("more than {layer_size} bytes")));
        }
        std::io::Write::write_all(&mut file, &chunk)
            .map_err(|e| Error::io("write", temp.path(), e))?;
    }
    std::io::Write::flush(&mut file).map_err(|e| Error::io("write", temp.path(), e))?;
    drop(file);
    if size != layer_size {
        return Err(larger(format!("{size} bytes")));
    }
    Ok(temp)
}

/// Puts the downloaded layer `temp` where [`pull`] was asked to: extracted into the
/// directory `target`, or (with [`LayerOperation::Copy`]) as the file `target`.
async fn place_layer(
    temp: tempfile::NamedTempFile,
    target: &Path,
    options: &PullOptions,
    layer: &Descriptor,
    image: &oci_client::Reference,
) -> Result<Option<Extracted>> {
    Ok(match options.layer_selector.operation {
        LayerOperation::Copy => {
            temp.persist(target)
                .map_err(|e| Error::io("write", target, e.error))?;
            None
        }
        LayerOperation::Extract => {
            let mut magic = [0u8; 2];
            let is_gzip = temp.as_file().read_exact(&mut magic).is_ok() && magic == [0x1f, 0x8b];
            if !is_gzip {
                return Err(Error::UnsupportedManifest {
                    reference: image.whole(),
                    reason: UnusableManifest::NotGzip {
                        digest: layer.digest.clone(),
                        media_type: layer.media_type.clone(),
                    },
                });
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
    })
}

/// Why [`pull_manifest_bounded`] failed.
enum ManifestError {
    Registry(OciDistributionError),
    /// More than [`MAX_MANIFEST_BYTES`] arrived (or were announced).
    TooLarge(u64),
}

impl From<reqwest::Error> for ManifestError {
    fn from(e: reqwest::Error) -> Self {
        Self::Registry(e.into())
    }
}

/// GETs the manifest of `image`, reading at most [`MAX_MANIFEST_BYTES`] of it as it streams
/// (oci-client reads a manifest whole before anything could check its size). `token` is the
/// bearer token oci-client obtained; without one, the basic credentials are sent.
async fn pull_manifest_bounded(
    image: &oci_client::Reference,
    registry: &RegistryOptions,
    token: Option<&str>,
) -> std::result::Result<Vec<u8>, ManifestError> {
    let http = registry.http_client().map_err(|e| {
        ManifestError::Registry(OciDistributionError::GenericError(Some(e.to_string())))
    })?;
    let url = format!(
        "{}://{}/v2/{}/manifests/{}",
        registry.scheme(),
        image.resolve_registry(),
        image.repository(),
        image.digest().or(image.tag()).unwrap_or("latest"),
    );
    let mut request = http.get(&url).header(
        reqwest::header::ACCEPT,
        format!("{MANIFEST_MEDIA_TYPE}, {DOCKER_MANIFEST_MEDIA_TYPE}"),
    );
    request = match (token, &registry.credentials) {
        (Some(token), _) => request.bearer_auth(token),
        (None, Some(credentials)) => {
            request.basic_auth(&credentials.username, Some(&credentials.password))
        }
        (None, None) => request,
    };
    let response = request.send().await?;
    let status = response.status();
    if status == reqwest::StatusCode::UNAUTHORIZED {
        return Err(ManifestError::Registry(
            OciDistributionError::UnauthorizedError { url },
        ));
    }
    if !status.is_success() {
        return Err(ManifestError::Registry(OciDistributionError::ServerError {
            code: status.as_u16(),
            url,
            message: status.canonical_reason().unwrap_or_default().to_owned(),
        }));
    }
    if let Some(length) = response
        .content_length()
        .filter(|&length| length > MAX_MANIFEST_BYTES)
    {
        return Err(ManifestError::TooLarge(length));
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        let size = body.len() as u64 + chunk.len() as u64;
        if size > MAX_MANIFEST_BYTES {
            return Err(ManifestError::TooLarge(size));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
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
