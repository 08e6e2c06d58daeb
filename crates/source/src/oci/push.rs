//! Pushing a directory as a Flux OCI artifact.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use http::HeaderValue;
use k8s_openapi::jiff::Timestamp;
use oci_client::RegistryOperation;
use serde::Serialize;

use super::{
    CONFIG_MEDIA_TYPE, CONTENT_MEDIA_TYPE, CREATED_ANNOTATION, Descriptor, MANIFEST_MEDIA_TYPE,
    Manifest, REVISION_ANNOTATION, RegistryOptions, SOURCE_ANNOTATION, parse_reference,
    registry_error,
};
use crate::artifact::{IgnoreFilter, ModePolicy, PackOptions, pack};
use crate::digest::Digest;
use crate::error::{Error, Result};

/// The `org.opencontainers.image.created` time of a pushed artifact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Created {
    /// The current time, truncated to seconds (Flux's default).
    #[default]
    Now,
    /// `1970-01-01T00:00:00Z`, so that pushing the same content gives the same digest
    /// (`--reproducible`).
    Reproducible,
    /// A given time, truncated to seconds.
    At(Timestamp),
}

impl Created {
    /// The RFC 3339 string written to the annotation and the config blob.
    pub fn to_rfc3339(self) -> String {
        let timestamp = match self {
            Self::Now => Timestamp::now(),
            Self::Reproducible => Timestamp::UNIX_EPOCH,
            Self::At(timestamp) => timestamp,
        };
        timestamp.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    }
}

/// Options for [`push`].
#[derive(Clone, Debug, Default)]
pub struct PushOptions {
    /// `org.opencontainers.image.source`: where the content comes from (a Git URL).
    pub source: String,
    /// `org.opencontainers.image.revision`: the source revision (e.g. `main@sha1:<sha>`).
    pub revision: String,
    /// `org.opencontainers.image.created`.
    pub created: Created,
    /// More manifest annotations; they may override the three above, as in Flux.
    pub annotations: BTreeMap<String, String>,
    /// Paths left out of the tarball (`--ignore-paths`).
    pub ignore: Option<IgnoreFilter>,
}

/// What [`push`] uploaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// Digest of the manifest: the artifact digest.
    pub digest: Digest,
    /// `<registry>/<repository>@<digest>`.
    pub reference: String,
    /// The manifest as uploaded.
    pub manifest: Manifest,
}

/// The config blob `flux push artifact` uploads (go-containerregistry's config file of an
/// empty image with `created` set and the layer appended), in the same field order.
pub fn config_blob(created: &str, diff_id: &Digest) -> Vec<u8> {
    #[derive(Serialize)]
    struct History<'a> {
        created: &'a str,
    }
    #[derive(Serialize)]
    struct RootFs {
        r#type: &'static str,
        diff_ids: Vec<String>,
    }
    #[derive(Serialize)]
    struct Empty {}
    #[derive(Serialize)]
    #[allow(clippy::struct_field_names)] // the field names are the JSON keys
    struct Config<'a> {
        architecture: &'static str,
        created: &'a str,
        history: [History<'static>; 1],
        os: &'static str,
        rootfs: RootFs,
        config: Empty,
    }
    let config = Config {
        architecture: "",
        created,
        history: [History {
            created: "0001-01-01T00:00:00Z",
        }],
        os: "",
        rootfs: RootFs {
            r#type: "layers",
            diff_ids: vec![diff_id.to_string()],
        },
        config: Empty {},
    };
    serde_json::to_vec(&config).expect("config serializes")
}

/// Packs `dir` and pushes it to `reference` (`oci://host/repository:tag`) as a Flux artifact.
pub async fn push(
    dir: &Path,
    reference: &str,
    options: &PushOptions,
    registry: &RegistryOptions,
) -> Result<Pushed> {
    let image = parse_reference(reference)?;
    if image.tag().is_none() || image.digest().is_some() {
        return Err(Error::InvalidReference {
            reference: reference.to_owned(),
            reason: "push needs a tag and no digest, e.g. oci://registry/repository:v1".to_owned(),
        });
    }
    let client = registry.client()?;
    let auth = registry.auth();

    let dir: PathBuf = dir.to_owned();
    let filter = options.ignore.clone();
    let (layer, packed) = tokio::task::spawn_blocking(move || {
        let mut layer = Vec::new();
        let packed = pack(
            &dir,
            &mut layer,
            &PackOptions {
                filter: filter.as_ref(),
                modes: ModePolicy::Preserve,
                limits: None,
            },
        )?;
        Ok::<_, Error>((layer, packed))
    })
    .await
    .map_err(Error::Task)??;

    let created = options.created.to_rfc3339();
    let config = config_blob(&created, &packed.diff_id);
    let config_digest = Digest::of(&config);
    let mut annotations = BTreeMap::from([
        (CREATED_ANNOTATION.to_owned(), created),
        (SOURCE_ANNOTATION.to_owned(), options.source.clone()),
        (REVISION_ANNOTATION.to_owned(), options.revision.clone()),
    ]);
    annotations.extend(
        options
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.to_owned()),
        config: Descriptor {
            media_type: CONFIG_MEDIA_TYPE.to_owned(),
            size: i64::try_from(config.len()).unwrap_or(i64::MAX),
            digest: config_digest.to_string(),
            annotations: BTreeMap::new(),
        },
        layers: vec![Descriptor {
            media_type: CONTENT_MEDIA_TYPE.to_owned(),
            size: i64::try_from(packed.size).unwrap_or(i64::MAX),
            digest: packed.digest.to_string(),
            annotations: BTreeMap::new(),
        }],
        annotations,
    };
    let manifest_bytes = serde_json::to_vec(&manifest).expect("manifest serializes");
    let digest = Digest::of(&manifest_bytes);

    client
        .auth(&image, &auth, RegistryOperation::Push)
        .await
        .map_err(|e| registry_error("log in to", &image, e))?;
    client
        .push_blob(&image, layer, &packed.digest.to_string())
        .await
        .map_err(|e| registry_error("push the layer to", &image, e))?;
    client
        .push_blob(&image, config, &config_digest.to_string())
        .await
        .map_err(|e| registry_error("push the config to", &image, e))?;
    client
        .push_manifest_raw(
            &image,
            manifest_bytes,
            HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(|e| registry_error("push the manifest to", &image, e))?;

    Ok(Pushed {
        digest,
        reference: format!("{}/{}@{digest}", image.registry(), image.repository()),
        manifest,
    })
}
