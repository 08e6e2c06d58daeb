//! The chart of a release: the HelmChart a HelmRelease's `spec.chart` templates (created,
//! updated and garbage-collected as Flux's helm-controller does), the source a release reads
//! (that HelmChart, or `spec.chartRef`: an OCIRepository or HelmChart), and the chart loaded
//! from the source's artifact (downloaded, digest checked, extracted within limits).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use capstan_api::helm::v2::ChartRefKind;
use capstan_api::meta::Artifact;
use capstan_api::{HelmChart, HelmRelease};
use capstan_helm::chart::Chart;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};

use super::render::{NAME_LABEL, NAMESPACE_LABEL};
use crate::error::ReconcileError;

/// The field manager of the HelmCharts a HelmRelease creates (Flux's).
pub const FIELD_MANAGER: &str = "helm-controller";

const SOURCE_GROUP: &str = "source.toolkit.fluxcd.io";

/// Where a release's chart comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChartSource {
    /// `HelmChart` or `OCIRepository`.
    pub kind: &'static str,
    /// API version (`source.toolkit.fluxcd.io/v1` unless the reference says otherwise).
    pub api_version: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl std::fmt::Display for ChartSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

/// The source of `object`'s chart: the HelmChart `<namespace>-<name>` in the namespace of
/// `spec.chart.spec.sourceRef`, or `spec.chartRef`.
pub fn source_of(object: &HelmRelease) -> Option<ChartSource> {
    let own = object.namespace().unwrap_or_default();
    if let Some(template) = object.spec.chart.as_ref() {
        return Some(ChartSource {
            kind: "HelmChart",
            api_version: format!("{SOURCE_GROUP}/v1"),
            namespace: template
                .spec
                .source_ref
                .namespace
                .clone()
                .unwrap_or_else(|| own.clone()),
            name: object.helm_chart_name(),
        });
    }
    let reference = object.spec.chart_ref.as_ref()?;
    let kind = match reference.kind {
        ChartRefKind::OciRepository => "OCIRepository",
        ChartRefKind::HelmChart => "HelmChart",
        ChartRefKind::ExternalArtifact => "ExternalArtifact",
    };
    Some(ChartSource {
        kind,
        api_version: reference
            .api_version
            .clone()
            .unwrap_or_else(|| format!("{SOURCE_GROUP}/v1")),
        namespace: reference.namespace.clone().unwrap_or(own),
        name: reference.name.clone(),
    })
}

/// `<namespace>/<name>` of the HelmChart `spec.chart` asks for (`status.helmChart`).
pub fn template_chart_key(object: &HelmRelease) -> Option<String> {
    let source = source_of(object).filter(|_| object.spec.chart.is_some())?;
    Some(format!("{}/{}", source.namespace, source.name))
}

/// The HelmChart `spec.chart` templates, as Flux builds it: chart, version, sourceRef (kind and
/// name), the chart template's interval (else the release's), reconcileStrategy, valuesFiles,
/// ignoreMissingValuesFiles, verify, the template's labels and annotations, and the owner
/// labels `helm.toolkit.fluxcd.io/name|namespace`.
pub fn chart_from_template(object: &HelmRelease) -> Option<serde_json::Value> {
    let template = object.spec.chart.as_ref()?;
    let source = source_of(object)?;
    let spec = &template.spec;
    let mut labels = template
        .metadata
        .as_ref()
        .map(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(NAME_LABEL.to_owned(), object.name_any());
    labels.insert(
        NAMESPACE_LABEL.to_owned(),
        object.namespace().unwrap_or_default(),
    );
    let mut chart_spec = serde_json::json!({
        "chart": spec.chart,
        "sourceRef": {"kind": spec.source_ref.kind, "name": spec.source_ref.name},
        "interval": spec.interval.clone().unwrap_or_else(|| object.spec.interval.clone()),
    });
    let fields = [
        ("version", serde_json::to_value(&spec.version)),
        (
            "reconcileStrategy",
            serde_json::to_value(spec.reconcile_strategy),
        ),
        (
            "ignoreMissingValuesFiles",
            serde_json::to_value(spec.ignore_missing_values_files),
        ),
        ("verify", serde_json::to_value(&spec.verify)),
    ];
    for (key, value) in fields {
        if let Ok(value) = value
            && !value.is_null()
        {
            chart_spec[key] = value;
        }
    }
    if !spec.values_files.is_empty() {
        chart_spec["valuesFiles"] = serde_json::json!(spec.values_files);
    }
    let mut metadata = serde_json::json!({
        "name": source.name,
        "namespace": source.namespace,
        "labels": labels,
    });
    if let Some(annotations) = template
        .metadata
        .as_ref()
        .map(|m| &m.annotations)
        .filter(|a| !a.is_empty())
    {
        metadata["annotations"] = serde_json::json!(annotations);
    }
    Some(serde_json::json!({
        "apiVersion": format!("{SOURCE_GROUP}/v1"),
        "kind": "HelmChart",
        "metadata": metadata,
        "spec": chart_spec,
    }))
}

/// Server-side applies the HelmChart of `spec.chart` (field manager [`FIELD_MANAGER`]).
///
/// # Errors
/// The API server's refusal.
pub async fn apply_template(client: &Client, object: &HelmRelease) -> Result<(), kube::Error> {
    let Some(chart) = chart_from_template(object) else {
        return Ok(());
    };
    let namespace = chart["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = chart["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<HelmChart> = Api::namespaced(client.clone(), namespace);
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&chart),
    )
    .await?;
    Ok(())
}

/// Deletes the HelmChart recorded in `status.helmChart` (`<namespace>/<name>`), if it exists.
///
/// # Errors
/// The API server's refusal (a missing HelmChart is not an error).
pub async fn delete_chart(client: &Client, key: &str) -> Result<(), kube::Error> {
    let Some((namespace, name)) = key.split_once('/') else {
        return Ok(());
    };
    let api: Api<HelmChart> = Api::namespaced(client.clone(), namespace);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// What reading a source found.
#[derive(Debug)]
pub enum SourceState {
    /// The source does not exist.
    Missing,
    /// The source exists without an artifact (or is not Ready for its generation).
    NotReady(String),
    /// The source's artifact.
    Ready(Artifact),
}

/// Reads `source` and its `status.artifact`.
///
/// # Errors
/// The API server's refusal.
pub async fn read_source(
    client: &Client,
    source: &ChartSource,
) -> Result<SourceState, kube::Error> {
    let (group, version) = source
        .api_version
        .split_once('/')
        .unwrap_or(("", &source.api_version));
    let gvk = GroupVersionKind::gvk(group, version, source.kind);
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &source.namespace,
        &ApiResource::from_gvk(&gvk),
    );
    let Some(found) = api.get_opt(&source.name).await? else {
        return Ok(SourceState::Missing);
    };
    Ok(source_state(source, &found))
}

/// Whether `found` (the object of `source`) can be read from, as helm-controller's
/// `isSourceReady`: a source whose generation is not observed yet, a Stalled source or one
/// without an artifact is not ready, with the source's own Ready (or Stalled) message. An
/// ExternalArtifact has no conditions: its artifact alone counts.
fn source_state(source: &ChartSource, found: &DynamicObject) -> SourceState {
    let artifact = found
        .data
        .pointer("/status/artifact")
        .and_then(|a| serde_json::from_value::<Artifact>(a.clone()).ok());
    let not_ready = |message: &str| {
        SourceState::NotReady(format!(
            "{} '{}/{}' is not ready: {message}",
            source.kind, source.namespace, source.name
        ))
    };
    let condition = |kind: &str| {
        found
            .data
            .pointer("/status/conditions")
            .and_then(serde_json::Value::as_array)
            .and_then(|conditions| conditions.iter().find(|c| c["type"].as_str() == Some(kind)))
            .map(|c| {
                (
                    c["status"].as_str().unwrap_or_default().to_owned(),
                    c["message"].as_str().unwrap_or_default().to_owned(),
                )
            })
    };
    if source.kind != "ExternalArtifact" {
        let observed = found
            .data
            .pointer("/status/observedGeneration")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0);
        if found.metadata.generation.unwrap_or(0) != observed {
            return match condition("Ready") {
                Some((status, message)) if status == "False" => not_ready(&message),
                _ => not_ready("latest generation of object has not been reconciled"),
            };
        }
        if let Some((status, message)) = condition("Stalled")
            && status == "True"
        {
            return not_ready(&message);
        }
    }
    match artifact {
        Some(artifact) => SourceState::Ready(artifact),
        None => not_ready("does not have an artifact"),
    }
}

/// The reason of a chart whose version cannot take its source's revision (Flux's).
pub const CHART_MUTATE_ERROR: &str = "ChartMutateError";

/// A chart version that carries the digest of the OCI artifact it came from, and that digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RevisionVersion {
    /// `<chart version>+<first 12 hex of the digest>`: the build metadata is replaced, so a tag
    /// pushed again with other content gives another version (and an upgrade).
    pub version: String,
    /// `status.lastAttemptedRevisionDigest`: the digest part of a `<version>@sha256:<hex>`
    /// revision, else the whole revision (`sha256:<hex>`, `latest@sha256:<hex>`).
    pub digest: String,
}

/// Flux's chart digest tracking for an OCIRepository chart (`mutateChartWithSourceRevision`):
/// the chart version with the first 12 hex digits of the artifact's revision digest as build
/// metadata. When the revision's tag is a version (`_` read as `+`, as Helm tags OCI charts)
/// it must equal the chart's version (build metadata aside).
///
/// # Errors
/// The chart version is not a version (`invalid chart version …`), the tag names another
/// version (`artifact revision … does not match chart version …`), or the revision carries no
/// `<algorithm>:<hex>` digest of at least 12 digits (`invalid artifact revision …`).
pub fn revision_version(chart_version: &str, revision: &str) -> Result<RevisionVersion, String> {
    let version = capstan_semver::parse_version(chart_version)
        .ok_or_else(|| format!("invalid chart version {chart_version}"))?;
    let tag = revision
        .split_once('@')
        .map_or(revision.to_owned(), |(tag, _)| tag.replace('_', "+"));
    let (short, digest) = match capstan_semver::parse_version(&tag) {
        Some(tag_version) => {
            let parts: Vec<&str> = revision.split('@').collect();
            let same = (tag_version.major, tag_version.minor, tag_version.patch)
                == (version.major, version.minor, version.patch)
                && tag_version.pre == version.pre;
            if parts.len() != 2 || !same {
                return Err(format!(
                    "artifact revision {} does not match chart version {chart_version}",
                    parts[0]
                ));
            }
            (short_digest(parts[1])?, parts[1].to_owned())
        }
        None => (short_digest(revision)?, revision.to_owned()),
    };
    if !short
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err(format!("invalid artifact revision {revision}"));
    }
    let pre = if version.pre.is_empty() {
        String::new()
    } else {
        format!("-{}", version.pre)
    };
    Ok(RevisionVersion {
        version: format!(
            "{}.{}.{}{pre}+{short}",
            version.major, version.minor, version.patch
        ),
        digest,
    })
}

/// The chart to release from `source`: for an OCIRepository, and for an ExternalArtifact whose
/// revision holds a digest (a `:`; else it is a version, taken as it is, as Flux's
/// `isSourceWithRevisionDigest`), `chart` with its version carrying the artifact revision's
/// digest ([`revision_version`]; a clone only when the version changes) and that digest
/// (`status.lastAttemptedRevisionDigest`); any other source's chart as it is, without a digest.
///
/// # Errors
/// [`CHART_MUTATE_ERROR`] (retried) when the version cannot take the revision.
pub fn track_revision(
    chart: &Arc<Chart>,
    source: &ChartSource,
    artifact: &Artifact,
) -> Result<(Arc<Chart>, Option<String>), ReconcileError> {
    let digested = match source.kind {
        "OCIRepository" => true,
        "ExternalArtifact" => artifact.revision.contains(':'),
        _ => false,
    };
    if !digested {
        return Ok((chart.clone(), None));
    }
    let tracked = revision_version(&chart.metadata.version, &artifact.revision)
        .map_err(|e| ReconcileError::transient(CHART_MUTATE_ERROR, e))?;
    if tracked.version == chart.metadata.version {
        return Ok((chart.clone(), Some(tracked.digest)));
    }
    let mut mutated = Chart::clone(chart);
    mutated.metadata.version = tracked.version;
    Ok((Arc::new(mutated), Some(tracked.digest)))
}

/// The first 12 characters of the hex of `<algorithm>:<hex>` (the text after the one `:`).
fn short_digest(revision: &str) -> Result<&str, String> {
    let invalid = || format!("invalid artifact revision {revision}");
    let parts: Vec<&str> = revision.split(':').collect();
    let [_, hex] = parts[..] else {
        return Err(invalid());
    };
    hex.get(..12).ok_or_else(invalid)
}

/// The chart directory inside an extracted chart archive: the one top-level directory
/// holding a `Chart.yaml` (Helm's archives hold `<name>/…`), or the root itself.
///
/// # Errors
/// No `Chart.yaml` at either place.
pub fn chart_dir(root: &Path) -> Result<PathBuf, String> {
    if root.join("Chart.yaml").is_file() {
        return Ok(root.to_owned());
    }
    let entries = std::fs::read_dir(root).map_err(|e| format!("cannot read the artifact: {e}"))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && path.join("Chart.yaml").is_file() {
            return Ok(path);
        }
    }
    Err("no Chart.yaml found in the artifact".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    // helm-controller's `isSourceReady`: the source's own message, not a generic one.
    #[test]
    fn a_source_not_ready_says_its_own_ready_message() {
        let source = ChartSource {
            kind: "OCIRepository",
            api_version: "source.toolkit.fluxcd.io/v1".into(),
            namespace: "apps".into(),
            name: "podinfo".into(),
        };
        let object = |status: serde_json::Value| -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
                "metadata": {"name": "podinfo", "namespace": "apps", "generation": 2},
                "status": status,
            }))
            .unwrap()
        };
        let message = |status| match source_state(&source, &object(status)) {
            SourceState::NotReady(message) => message,
            other => panic!("{other:?}"),
        };
        let failed = serde_json::json!({"observedGeneration": 1, "conditions": [
            {"type": "Ready", "status": "False", "reason": "OCIArtifactPullFailed",
             "message": "failed to pull artifact: 401 Unauthorized"}]});
        assert_eq!(
            message(failed),
            "OCIRepository 'apps/podinfo' is not ready: failed to pull artifact: 401 Unauthorized"
        );
        assert_eq!(
            message(serde_json::json!({})),
            "OCIRepository 'apps/podinfo' is not ready: latest generation of object has not been reconciled"
        );
        let stalled = serde_json::json!({"observedGeneration": 2, "conditions": [
            {"type": "Stalled", "status": "True", "message": "invalid URL"}]});
        assert_eq!(
            message(stalled),
            "OCIRepository 'apps/podinfo' is not ready: invalid URL"
        );
        assert_eq!(
            message(serde_json::json!({"observedGeneration": 2})),
            "OCIRepository 'apps/podinfo' is not ready: does not have an artifact"
        );
        let artifact = serde_json::json!({"observedGeneration": 2, "artifact": {
            "path": "p", "url": "http://x/p.tgz", "revision": "v1", "digest": "sha256:0",
            "lastUpdateTime": "2026-01-01T00:00:00Z"}});
        assert!(matches!(
            source_state(&source, &object(artifact)),
            SourceState::Ready(_)
        ));
    }

    // The cases of helm-controller's `Test_TryMutateChartWithSourceRevision` and of its
    // controller tests (facts about Flux's behaviour; the code is ours).
    #[test]
    fn oci_chart_versions_carry_the_revision_digest_as_flux() {
        let hex = "9933f58f8bf459eb199d59ebc8a05683f3944e1242d9f5467d99aa2cf08a5370";
        let ok = |version: &str, revision: &str| revision_version(version, revision).unwrap();
        let tagged = ok("1.2.3", &format!("1.2.3@sha256:{hex}"));
        assert_eq!(tagged.version, "1.2.3+9933f58f8bf4");
        assert_eq!(tagged.digest, format!("sha256:{hex}"));
        let by_digest = ok("1.2.3", &format!("sha256:{hex}"));
        assert_eq!(by_digest.version, "1.2.3+9933f58f8bf4");
        assert_eq!(by_digest.digest, format!("sha256:{hex}"));
        // Helm's OCI tags write `+` as `_`; the chart's own build metadata is replaced.
        let underscored = ok(
            "0.1.0+20241102104025",
            &format!("0.1.0_20241102104025@sha256:{hex}"),
        );
        assert_eq!(underscored.version, "0.1.0+9933f58f8bf4");
        // A tag that is not a version: the whole revision is the digest.
        let latest = ok("1.2.3", &format!("latest@sha256:{hex}"));
        assert_eq!(latest.version, "1.2.3+9933f58f8bf4");
        assert_eq!(latest.digest, format!("latest@sha256:{hex}"));
        assert_eq!(
            ok("v1.2", &format!("sha256:{hex}")).version,
            "1.2.0+9933f58f8bf4"
        );
        assert_eq!(
            revision_version("1.2.3", &format!("1.2.4@sha256:{hex}")).unwrap_err(),
            "artifact revision 1.2.4 does not match chart version 1.2.3"
        );
        assert_eq!(
            revision_version("sha:123456", "1.2.3@sha:123456").unwrap_err(),
            "invalid chart version sha:123456"
        );
        assert_eq!(
            revision_version("1.2.3", "1.2.3@sha256:abc").unwrap_err(),
            "invalid artifact revision sha256:abc"
        );
    }

    #[test]
    fn templated_charts_follow_flux() {
        let object: HelmRelease = serde_json::from_value(serde_json::json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "podinfo", "namespace": "apps"},
            "spec": {
                "interval": "5m",
                "chart": {
                    "metadata": {"labels": {"team": "a"}},
                    "spec": {
                        "chart": "podinfo", "version": "6.x",
                        "sourceRef": {"kind": "HelmRepository", "name": "repo", "namespace": "flux-system"},
                        "valuesFiles": ["values-prod.yaml"],
                    },
                },
            },
        }))
        .unwrap();
        let source = source_of(&object).unwrap();
        assert_eq!(source.to_string(), "HelmChart/flux-system/apps-podinfo");
        assert_eq!(
            template_chart_key(&object).as_deref(),
            Some("flux-system/apps-podinfo")
        );
        let chart = chart_from_template(&object).unwrap();
        assert_eq!(chart["spec"]["interval"], "5m");
        assert_eq!(chart["spec"]["version"], "6.x");
        assert_eq!(chart["spec"]["sourceRef"]["kind"], "HelmRepository");
        assert!(chart["spec"]["sourceRef"].get("namespace").is_none());
        assert_eq!(chart["metadata"]["labels"]["team"], "a");
        assert_eq!(chart["metadata"]["labels"][NAME_LABEL], "podinfo");
        assert_eq!(chart["spec"]["valuesFiles"][0], "values-prod.yaml");
    }
}
