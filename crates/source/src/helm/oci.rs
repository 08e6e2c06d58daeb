//! Helm charts as OCI artifacts, pushed and pulled as Helm's registry client does, so `helm
//! push`/`helm pull` and Capstan read each other's charts.
//!
//! A chart is an OCI image manifest (no `mediaType` field, as Helm writes it) whose config blob
//! is the chart's `Chart.yaml` as JSON ([`CONFIG_MEDIA_TYPE`], Helm's `json.Marshal` of its
//! metadata) and whose one layer is the chart archive ([`CHART_LAYER_MEDIA_TYPE`]), with Helm's
//! annotations (`org.opencontainers.image.title`/`version`/`description`/`url`/`source`/
//! `authors`/`created`, then the chart's own annotations except title and version). The
//! repository is `<remote>/<chart name>` and the tag the chart version with `+` written `_`
//! (OCI tags cannot hold `+`; Helm reads `_` back as `+`).
//!
//! # Expected flow
//! [`push`] a chart archive (from [`capstan_helm::chart::package`]) to `oci://host/path`;
//! [`list_versions`] of `oci://host/path/name`, [`select_version`] for a constraint, or
//! [`pull`] with a constraint in one call. Connection options (credentials, plain HTTP, CA
//! certificates) are [`crate::oci::RegistryOptions`], shared with Flux OCI artifacts.
//!
//! # Guarantees
//! The pulled archive is checked against the layer's digest and size (bounded by the caller's
//! limit) and must load as a chart; the manifest digest is returned for Flux's revisions.
//!
//! # Errors
//! [`Error`]: registry and transport failures ([`crate::Error`], naming the reference), a
//! chart archive that does not load, no tag matching a constraint.

use std::collections::BTreeMap;

use http::HeaderValue;
use oci_client::RegistryOperation;
use serde::Serialize;

use crate::digest::Digest;
use crate::oci::{
    LayerOperation, LayerSelector, MANIFEST_MEDIA_TYPE, PullOptions, RegistryOptions,
    parse_reference,
};

/// Media type of the config blob of a Helm chart (the chart's metadata as JSON).
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.helm.config.v1+json";
/// Media type of the chart archive layer.
pub const CHART_LAYER_MEDIA_TYPE: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
/// Media type of a provenance file layer.
pub const PROVENANCE_LAYER_MEDIA_TYPE: &str = "application/vnd.cncf.helm.chart.provenance.v1.prov";
/// The chart layer media type of charts pushed by Helm 3 before 3.7, still read.
pub const LEGACY_CHART_LAYER_MEDIA_TYPE: &str = "application/tar+gzip";

/// A Helm OCI chart operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The registry, the transport or the reference failed.
    #[error(transparent)]
    Registry(#[from] crate::Error),
    /// The archive is not a chart Helm would load.
    #[error("{what} is not a valid chart: {reason}")]
    InvalidChart {
        /// The file or reference.
        what: String,
        /// Helm's words.
        reason: String,
    },
    /// No tag of the repository satisfies the version (Helm's wording).
    #[error("{reference}: could not locate a version matching provided version string {version}")]
    NoVersion {
        /// The repository (`oci://host/path/name`).
        reference: String,
        /// The version or constraint asked for.
        version: String,
    },
    /// The version constraint does not parse.
    #[error("invalid version constraint {constraint:?}: {source}")]
    Constraint {
        /// The constraint.
        constraint: String,
        /// Why.
        #[source]
        source: capstan_semver::ConstraintError,
    },
    /// A blocking task failed.
    #[error("background task failed")]
    Task(#[source] tokio::task::JoinError),
}

/// Results of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What [`push`] uploaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushedChart {
    /// `host/path/name:tag`, as `helm push` prints it after `Pushed: `.
    pub reference: String,
    /// The manifest digest, as `helm push` prints it after `Digest: `.
    pub digest: Digest,
    /// The chart name.
    pub name: String,
    /// The chart version (with `+`).
    pub version: String,
    /// The tag (the version with `_` for `+`).
    pub tag: String,
    /// Digest of the chart archive layer.
    pub chart_digest: Digest,
}

/// What [`pull`] downloaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PulledChart {
    /// The chart archive, byte for byte as pushed.
    pub bytes: Vec<u8>,
    /// The chart name (from the archive).
    pub name: String,
    /// The chart version (from the archive).
    pub version: String,
    /// The tag pulled.
    pub tag: String,
    /// The manifest digest.
    pub digest: Digest,
    /// Flux's revision of a pulled OCI artifact: `<tag>@sha256:<manifest digest>`.
    pub revision: String,
    /// The manifest annotations.
    pub annotations: BTreeMap<String, String>,
}

/// The tag Helm writes for a chart version: `+` becomes `_`.
pub fn tag_of(version: &str) -> String {
    version.replace('+', "_")
}

/// An OCI descriptor as Go's `ocispec.Descriptor` serialises (field order matters for the
/// manifest digest to equal Helm's).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GoDescriptor<'a> {
    media_type: &'a str,
    digest: String,
    size: usize,
}

/// Helm's manifest: `ocispec.Manifest` without a media type field.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GoManifest<'a> {
    schema_version: u32,
    config: GoDescriptor<'a>,
    layers: Vec<GoDescriptor<'a>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: &'a BTreeMap<String, String>,
}

/// Helm's manifest annotations for a chart: the OCI ones from its metadata, then its own
/// annotations except `org.opencontainers.image.title`/`version`.
fn annotations(
    metadata: &capstan_helm::chart::Metadata,
    created: &str,
) -> BTreeMap<String, String> {
    const TITLE: &str = "org.opencontainers.image.title";
    const VERSION: &str = "org.opencontainers.image.version";
    let mut out = BTreeMap::new();
    let mut add = |key: &str, value: String| {
        if !value.trim().is_empty() {
            out.insert(key.to_owned(), value);
        }
    };
    add(
        "org.opencontainers.image.description",
        metadata.extra_string("description"),
    );
    add(TITLE, metadata.name.clone());
    add(VERSION, metadata.version.clone());
    add(
        "org.opencontainers.image.url",
        metadata.extra_string("home"),
    );
    add("org.opencontainers.image.created", created.to_owned());
    if let Some(serde_json::Value::Array(sources)) = metadata.extra.get("sources")
        && let Some(serde_json::Value::String(first)) = sources.first()
    {
        add("org.opencontainers.image.source", first.clone());
    }
    if let Some(serde_json::Value::Array(maintainers)) = metadata.extra.get("maintainers")
        && !maintainers.is_empty()
    {
        let field = |m: &serde_json::Value, key: &str| {
            m.get(key)
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let authors: Vec<String> = maintainers
            .iter()
            .map(|m| {
                let (name, email) = (field(m, "name"), field(m, "email"));
                if email.is_empty() {
                    name
                } else {
                    format!("{name} ({email})")
                }
            })
            .collect();
        add("org.opencontainers.image.authors", authors.join(", "));
    }
    if let Some(serde_json::Value::Object(own)) = metadata.extra.get("annotations") {
        for (key, value) in own {
            if key == TITLE || key == VERSION {
                continue;
            }
            if let Some(value) = value.as_str() {
                out.insert(key.clone(), value.to_owned());
            }
        }
    }
    out
}

fn load_chart(bytes: &[u8], what: &str) -> Result<capstan_helm::chart::Chart> {
    capstan_helm::chart::load_archive(bytes).map_err(|e| Error::InvalidChart {
        what: what.to_owned(),
        reason: e.message,
    })
}

/// `helm push CHART.tgz oci://host/path`: uploads the chart archive `chart` to
/// `<remote>/<name>:<version with _ for +>`. `created` is the `org.opencontainers.image.created`
/// annotation (Helm: the archive's modification time, RFC 3339); the current time when `None`.
///
/// # Errors
///
/// A remote that is not `oci://host/path`, an archive that does not load as a chart, registry
/// failures.
pub async fn push(
    chart: &[u8],
    remote: &str,
    created: Option<&str>,
    registry: &RegistryOptions,
) -> Result<PushedChart> {
    let loaded = load_chart(chart, "the chart archive")?;
    let metadata = &loaded.metadata;
    let root = remote
        .strip_prefix(crate::oci::URL_SCHEME)
        .unwrap_or(remote)
        .trim_end_matches('/');
    let tag = tag_of(&metadata.version);
    let whole = format!("{root}/{}:{tag}", metadata.name);
    let image = parse_reference(&whole)?;

    let created = created.map_or_else(
        || {
            jiff::Timestamp::now()
                .strftime("%Y-%m-%dT%H:%M:%SZ")
                .to_string()
        },
        str::to_owned,
    );
    let config = capstan_helm::chart::package::metadata_json(metadata);
    let config_digest = Digest::of(&config);
    let chart_digest = Digest::of(chart);
    let annotations = annotations(metadata, &created);
    let manifest = GoManifest {
        schema_version: 2,
        config: GoDescriptor {
            media_type: CONFIG_MEDIA_TYPE,
            digest: config_digest.to_string(),
            size: config.len(),
        },
        layers: vec![GoDescriptor {
            media_type: CHART_LAYER_MEDIA_TYPE,
            digest: chart_digest.to_string(),
            size: chart.len(),
        }],
        annotations: &annotations,
    };
    let manifest_bytes = go_json(&manifest);
    let digest = Digest::of(&manifest_bytes);

    let client = registry.client()?;
    let auth = registry.auth();
    let failed = |operation, e| crate::oci::registry_error(operation, &image, e);
    client
        .auth(&image, &auth, RegistryOperation::Push)
        .await
        .map_err(|e| failed("log in to", e))?;
    client
        .push_blob(&image, chart.to_vec(), &chart_digest.to_string())
        .await
        .map_err(|e| failed("push the chart to", e))?;
    client
        .push_blob(&image, config, &config_digest.to_string())
        .await
        .map_err(|e| failed("push the config to", e))?;
    client
        .push_manifest_raw(
            &image,
            manifest_bytes,
            HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(|e| failed("push the manifest to", e))?;
    Ok(PushedChart {
        reference: format!("{}/{}:{tag}", image.registry(), image.repository()),
        digest,
        name: metadata.name.clone(),
        version: metadata.version.clone(),
        tag,
        chart_digest,
    })
}

/// JSON as Go's `encoding/json` writes it (`<`, `>`, `&` escaped).
fn go_json(value: &impl Serialize) -> Vec<u8> {
    let json = serde_json::to_string(value).expect("serializes");
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            c => out.push(c),
        }
    }
    out.into_bytes()
}

/// The chart versions of `oci://host/path/name` as Helm's registry client lists them: the tags
/// that are strict SemVer once `_` is read as `+`, newest first.
///
/// # Errors
///
/// Registry failures.
pub async fn list_versions(reference: &str, registry: &RegistryOptions) -> Result<Vec<String>> {
    let tags = crate::oci::list_tags(reference, registry).await?;
    let mut versions: Vec<(semver::Version, String)> = tags
        .iter()
        .filter_map(|tag| {
            let version = tag.replace('_', "+");
            semver::Version::parse(&version)
                .ok()
                .map(|parsed| (parsed, version))
        })
        .collect();
    // Newest first by SemVer precedence (build metadata does not count; the sort is stable).
    versions.sort_by(|a, b| {
        (b.0.major, b.0.minor, b.0.patch, &b.0.pre)
            .cmp(&(a.0.major, a.0.minor, a.0.patch, &a.0.pre))
    });
    Ok(versions.into_iter().map(|(_, version)| version).collect())
}

/// Helm's `GetTagMatchingVersionOrConstraint`: `version` itself when it is one of `versions`,
/// else the first (newest) version the constraint accepts; an empty `version` means `*`.
/// `None` when nothing matches.
///
/// # Errors
///
/// A constraint that does not parse.
pub fn select_version(versions: &[String], version: &str) -> Result<Option<String>> {
    if !version.is_empty() && versions.iter().any(|v| v == version) {
        return Ok(Some(version.to_owned()));
    }
    let text = if version.is_empty() { "*" } else { version };
    let constraint =
        capstan_semver::Constraint::parse(text).map_err(|source| Error::Constraint {
            constraint: text.to_owned(),
            source,
        })?;
    Ok(versions
        .iter()
        .find(|v| {
            capstan_semver::parse_version(v).is_some_and(|parsed| constraint.matches(&parsed))
        })
        .cloned())
}

/// Pulls the chart `oci://host/path/name` at the newest version matching `version` (an exact
/// version, a Masterminds constraint, or empty for the newest stable one; a reference with a
/// tag or digest is pulled as it is), its archive at most `max_size` bytes.
///
/// # Errors
///
/// Registry failures, no matching version, a digest mismatch, an oversized layer, an archive
/// that is not a chart.
pub async fn pull(
    reference: &str,
    version: &str,
    registry: &RegistryOptions,
    max_size: u64,
) -> Result<PulledChart> {
    let parsed = parse_reference(reference)?;
    let bare = reference
        .strip_prefix(crate::oci::URL_SCHEME)
        .unwrap_or(reference);
    let explicit = parsed.digest().is_some()
        || bare
            .rsplit('/')
            .next()
            .is_some_and(|last| last.contains(':'));
    let (whole, tag) = if explicit {
        (bare.to_owned(), parsed.tag().unwrap_or_default().to_owned())
    } else {
        let versions = list_versions(reference, registry).await?;
        let chosen = select_version(&versions, version)?.ok_or_else(|| Error::NoVersion {
            reference: reference.to_owned(),
            version: version.to_owned(),
        })?;
        let tag = tag_of(&chosen);
        (format!("{bare}:{tag}"), tag)
    };
    let temp = tempfile::tempdir().map_err(|e| {
        crate::Error::io("create a temporary directory in", std::env::temp_dir(), e)
    })?;
    let target = temp.path().join("chart.tgz");
    let limits = crate::artifact::Limits {
        max_archive_bytes: max_size,
        ..crate::artifact::Limits::default()
    };
    let mut pulled = None;
    for media_type in [CHART_LAYER_MEDIA_TYPE, LEGACY_CHART_LAYER_MEDIA_TYPE] {
        let options = PullOptions {
            layer_selector: LayerSelector {
                media_type: Some(media_type.to_owned()),
                operation: LayerOperation::Copy,
            },
            limits,
        };
        match crate::oci::pull(&whole, &target, &options, registry).await {
            Ok(result) => {
                pulled = Some(result);
                break;
            }
            Err(crate::Error::LayerNotFound { .. }) if media_type == CHART_LAYER_MEDIA_TYPE => {}
            Err(e) => return Err(e.into()),
        }
    }
    let pulled = pulled.ok_or_else(|| crate::Error::LayerNotFound {
        reference: whole.clone(),
        media_type: CHART_LAYER_MEDIA_TYPE.to_owned(),
    })?;
    let bytes = std::fs::read(&target).map_err(|e| crate::Error::io("read", &target, e))?;
    let chart = load_chart(&bytes, &whole)?;
    Ok(PulledChart {
        bytes,
        name: chart.metadata.name,
        version: chart.metadata.version,
        tag,
        digest: pulled.digest,
        revision: pulled.revision,
        annotations: pulled.annotations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_write_plus_as_underscore() {
        assert_eq!(tag_of("1.2.3+build.7"), "1.2.3_build.7");
        assert_eq!(tag_of("1.2.3"), "1.2.3");
    }

    #[test]
    fn selects_exact_then_constraint_newest_first() {
        let versions: Vec<String> = ["2.0.0-rc.1", "1.5.0", "1.2.3+b", "1.0.0"]
            .iter()
            .map(|v| (*v).to_owned())
            .collect();
        let pick = |v: &str| select_version(&versions, v).expect("constraint parses");
        assert_eq!(pick(""), Some("1.5.0".to_owned()));
        assert_eq!(pick("1.2.3+b"), Some("1.2.3+b".to_owned()));
        assert_eq!(pick("~1.2"), Some("1.2.3+b".to_owned()));
        assert_eq!(pick(">=2.0.0-0"), Some("2.0.0-rc.1".to_owned()));
        assert_eq!(pick("3.x"), None);
        assert!(select_version(&versions, ">>").is_err());
    }
}
