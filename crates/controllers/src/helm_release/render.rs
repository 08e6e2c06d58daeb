//! A release's manifests: the chart rendered with the native Helm engine as Helm's install and
//! upgrade actions render it, then post-rendered as Flux's helm-controller does.
//!
//! # Expected flow
//! 1. [`release_name`]: `spec.releaseName`, else `[<targetNamespace>-]<name>`, shortened to
//!    Flux's `<first 40 characters>-<12 hex of its sha256>` when over 53 characters.
//! 2. [`render`]: the chart checked as Helm's install checks it (installable type,
//!    dependencies present, `kubeVersion` against the cluster's version), rendered with
//!    `.Release` (name, namespace, revision, install/upgrade), `.Capabilities` (the target
//!    cluster's version and API versions, [`capabilities`]) and `lookup` answered by the target
//!    cluster ([`ClusterLookup`]), split and sorted as Helm does (hooks apart, install order),
//!    with the CRDs of `crds/`.
//! 3. [`post_render`]: `spec.postRenderers` (kustomize `patches` and `images`, in order,
//!    through the native kustomize engine over an in-memory tree, as Flux's kustomize
//!    post-renderer builds `resources: [helm-output.yaml]`), then `spec.commonMetadata`, then
//!    the origin labels `helm.toolkit.fluxcd.io/name` and `…/namespace` on every object.
//!    Hooks are not post-rendered (Flux's default `postRenderStrategy`).
//!
//! [`render_local`] is the whole pipeline without a cluster, for `capstan build helmrelease`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use capstan_api::HelmRelease;
use capstan_helm::chart::Chart;
use capstan_helm::output::{Crd, Hook};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client, ResourceExt};
use regex::Regex;
use serde_json::Value;

use super::values::Values;

/// The label group of Flux's origin labels.
pub const ORIGIN_GROUP: &str = "helm.toolkit.fluxcd.io";
/// Origin label: the HelmRelease's name.
pub const NAME_LABEL: &str = "helm.toolkit.fluxcd.io/name";
/// Origin label: the HelmRelease's namespace.
pub const NAMESPACE_LABEL: &str = "helm.toolkit.fluxcd.io/namespace";

/// The longest release name Helm accepts.
pub const MAX_RELEASE_NAME: usize = 53;

static VALID_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
        .expect("the release name regex is valid")
});

/// A failed render or post-render, in Helm's (or kustomize's) words.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The chart cannot be installed as it is (type, dependencies, kubeVersion, name).
    #[error("{0}")]
    Chart(String),
    /// The templates failed (the message names the template and line, as Helm's does).
    #[error("{0}")]
    Template(String),
    /// A rendered document is not a Kubernetes object.
    #[error("{0}")]
    Manifest(String),
    /// A post-renderer failed.
    #[error("post-renderer failed: {0}")]
    PostRender(String),
    /// A local file (`render_local`) could not be read.
    #[error("{0}")]
    Local(String),
}

/// The release name of `object` as Flux computes it (see the module docs).
pub fn release_name(object: &HelmRelease) -> String {
    shorten_name(&object.release_name())
}

/// Flux's `release.ShortenName`.
pub fn shorten_name(name: &str) -> String {
    if name.len() <= MAX_RELEASE_NAME {
        return name.to_owned();
    }
    let sum = super::values::sha256(name.as_bytes());
    let hex = sum.trim_start_matches("sha256:");
    let cut = MAX_RELEASE_NAME - 13;
    let mut end = cut;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{}", &name[..end], &hex[..12])
}

/// What the cluster tells a render (Helm's `.Capabilities`).
#[derive(Clone, Debug, Default)]
pub struct ClusterInfo {
    /// The API server's `gitVersion` (`v1.33.0`); `None` is Helm's default.
    pub kube_version: Option<String>,
    /// `group/version` and `group/version/Kind` entries served.
    pub api_versions: Vec<String>,
}

/// The inputs of one render.
#[derive(Debug)]
pub struct RenderRequest<'a> {
    /// The HelmRelease (post-renderers, common metadata, names).
    pub object: &'a HelmRelease,
    /// The chart.
    pub chart: &'a Chart,
    /// The composed values.
    pub values: &'a Values,
    /// `.Release.Revision`.
    pub revision: u32,
    /// An upgrade (else an install).
    pub is_upgrade: bool,
    /// `.Capabilities`.
    pub cluster: &'a ClusterInfo,
}

/// A rendered release.
#[derive(Clone, Debug, Default)]
pub struct Rendered {
    /// The release manifest as stored (post-rendered objects as YAML documents).
    pub manifest: String,
    /// The objects of the manifest, in order.
    pub objects: Vec<Value>,
    /// The hooks, in Helm's order (unsorted by weight: callers sort per event).
    pub hooks: Vec<Hook>,
    /// The CRDs of `crds/` (processed chart: disabled subcharts out).
    pub crds: Vec<Crd>,
    /// The top chart's rendered `NOTES.txt`.
    pub notes: String,
}

/// Renders a release (see the module docs); `env` carries `lookup`, the clock and randomness.
///
/// # Errors
/// [`RenderError`]: the chart is not installable, a template failed (naming the template and
/// line), a document is not an object, or a post-renderer failed.
pub fn render(
    request: &RenderRequest<'_>,
    env: &mut capstan_helm::template::Env,
) -> Result<Rendered, RenderError> {
    let RenderRequest {
        object,
        chart,
        values,
        revision,
        is_upgrade,
        cluster,
    } = request;
    let name = release_name(object);
    check_installable(chart, &name, cluster.kube_version.as_deref())?;
    let namespace = object.target_namespace().unwrap_or("default").to_owned();
    let options = capstan_helm::engine::Options {
        release_name: name,
        namespace,
        revision: *revision,
        is_install: !*is_upgrade,
        is_upgrade: *is_upgrade,
        kube_version: cluster.kube_version.clone(),
        api_versions: cluster.api_versions.clone(),
    };
    let files = capstan_helm::engine::render(chart, values, &options, env)
        .map_err(|e| RenderError::Template(e.message))?;
    let (files, notes) = capstan_helm::output::without_notes(&chart.metadata.name, files);
    let (hooks, manifests) = capstan_helm::output::sort_manifests(&files)
        .map_err(|e| RenderError::Manifest(e.message))?;
    let (processed, _) =
        capstan_helm::chart::prepare(chart, values).map_err(|e| RenderError::Chart(e.message))?;
    let crds = capstan_helm::output::crd_objects(&processed);
    let mut objects = Vec::new();
    for manifest in &manifests {
        for document in capstan_kustomize::parse_documents(&manifest.content)
            .map_err(|e| RenderError::Manifest(format!("{}: {e}", manifest.name)))?
        {
            if !document.is_null() {
                objects.push(document);
            }
        }
    }
    let objects = post_render(object, objects)?;
    let manifest = manifest_text(&objects);
    Ok(Rendered {
        manifest,
        objects,
        hooks,
        crds,
        notes,
    })
}

/// Helm's install checks: an application chart, its dependencies under `charts/`, a valid
/// release name, and Chart.yaml's `kubeVersion` met by the cluster.
fn check_installable(
    chart: &Chart,
    name: &str,
    kube_version: Option<&str>,
) -> Result<(), RenderError> {
    if !matches!(chart.metadata.chart_type.as_str(), "" | "application") {
        return Err(RenderError::Chart(format!(
            "{} charts are not installable",
            chart.metadata.chart_type
        )));
    }
    capstan_helm::chart::check_dependencies(chart).map_err(|e| {
        RenderError::Chart(format!(
            "an error occurred while checking for chart dependencies: {}",
            e.message
        ))
    })?;
    if name.is_empty() || name.len() > MAX_RELEASE_NAME || !VALID_NAME.is_match(name) {
        return Err(RenderError::Chart(format!(
            "release name {name:?}: invalid release name, must match regex {} and the length must not be longer than 53",
            VALID_NAME.as_str()
        )));
    }
    let constraint = &chart.metadata.kube_version;
    if !constraint.is_empty() {
        let version = match kube_version {
            Some(v) if v.starts_with('v') => v.to_owned(),
            Some(v) => format!("v{v}"),
            None => capstan_helm::engine::KubeVersion::default_version().version,
        };
        // Helm compares the version without pre-release/build suffixes of providers
        // (`v1.29.3-gke.1`): the constraint decides on the version as reported.
        if capstan_helm::chart::version_matches(constraint, &version) != Some(true) {
            return Err(RenderError::Chart(format!(
                "chart requires kubeVersion: {constraint} which is incompatible with Kubernetes {version}"
            )));
        }
    }
    Ok(())
}

/// Flux's post-rendering of `objects`: `spec.postRenderers` (kustomize), `commonMetadata`,
/// then the origin labels.
///
/// # Errors
/// [`RenderError::PostRender`] when kustomize refuses a patch or image.
pub fn post_render(object: &HelmRelease, objects: Vec<Value>) -> Result<Vec<Value>, RenderError> {
    let mut objects = objects;
    for renderer in &object.spec.post_renderers {
        let Some(kustomize) = renderer.kustomize.as_ref() else {
            continue;
        };
        if kustomize.patches.is_empty() && kustomize.images.is_empty() {
            continue;
        }
        objects = kustomize_post_render(&objects, kustomize)?;
    }
    if let Some(common) = object.spec.common_metadata.as_ref() {
        for item in &mut objects {
            add_metadata(item, "labels", &common.labels);
            add_metadata(item, "annotations", &common.annotations);
        }
    }
    let origin = BTreeMap::from([
        (NAME_LABEL.to_owned(), object.name_any()),
        (
            NAMESPACE_LABEL.to_owned(),
            object.namespace().unwrap_or_default(),
        ),
    ]);
    for item in &mut objects {
        add_metadata(item, "labels", &origin);
    }
    Ok(objects)
}

fn add_metadata(object: &mut Value, field: &str, entries: &BTreeMap<String, String>) {
    if entries.is_empty() {
        return;
    }
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(serde_json::Map::new());
    }
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    let target = metadata
        .entry(field)
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Some(target) = target.as_object_mut() {
        for (key, value) in entries {
            target.insert(key.clone(), Value::String(value.clone()));
        }
    }
}

/// One kustomize post-renderer over an in-memory tree: `helm-output.yaml` holding the objects
/// and a kustomization with the patches and images.
fn kustomize_post_render(
    objects: &[Value],
    renderer: &capstan_api::helm::v2::KustomizePostRenderer,
) -> Result<Vec<Value>, RenderError> {
    let root = Path::new("/postrender");
    let mut fs = capstan_kustomize::MemoryFs::new();
    fs.insert(
        root.join("helm-output.yaml"),
        capstan_kustomize::to_yaml(objects),
    );
    let mut kustomization = serde_json::json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["helm-output.yaml"],
    });
    if !renderer.patches.is_empty() {
        kustomization["patches"] = serde_json::to_value(&renderer.patches).unwrap_or_default();
    }
    if !renderer.images.is_empty() {
        kustomization["images"] = serde_json::to_value(&renderer.images).unwrap_or_default();
    }
    fs.insert(
        root.join("kustomization.yaml"),
        serde_json::to_vec(&kustomization).unwrap_or_default(),
    );
    let options = capstan_kustomize::BuildOptions {
        boundary: Some(root.to_owned()),
        ..capstan_kustomize::BuildOptions::default()
    };
    capstan_kustomize::build_with(&fs, root, &options)
        .map_err(|e| RenderError::PostRender(capstan_source::redact::error_chain(&e)))
}

/// The objects as the release manifest Helm stores after a post-renderer: YAML documents, each
/// starting with `---`.
pub fn manifest_text(objects: &[Value]) -> String {
    let mut out = String::new();
    for object in objects {
        out.push_str("---\n");
        out.push_str(&capstan_kustomize::to_yaml_document(object));
    }
    out
}

/// The objects of a stored release manifest (Helm's or ours).
///
/// # Errors
/// A document that does not parse.
pub fn manifest_objects(manifest: &str) -> Result<Vec<Value>, String> {
    let mut objects = Vec::new();
    for document in capstan_helm::output::split_manifests(manifest) {
        for value in capstan_kustomize::parse_documents(document).map_err(|e| e.to_string())? {
            if value.get("kind").is_some() {
                objects.push(value);
            }
        }
    }
    Ok(objects)
}

/// Helm's ownership label, on every object of a release.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The value of [`MANAGED_BY_LABEL`] Helm sets.
pub const MANAGED_BY_HELM: &str = "Helm";
/// Helm's ownership annotation naming the release.
pub const RELEASE_NAME_ANNOTATION: &str = "meta.helm.sh/release-name";
/// Helm's ownership annotation naming the release's namespace.
pub const RELEASE_NAMESPACE_ANNOTATION: &str = "meta.helm.sh/release-namespace";

/// Sets Helm's ownership metadata on `object`, over any value it had (Helm's
/// `setMetadataVisitor` with forced ownership): [`MANAGED_BY_LABEL`]` = Helm`,
/// [`RELEASE_NAME_ANNOTATION`] and [`RELEASE_NAMESPACE_ANNOTATION`].
pub fn set_ownership(object: &mut Value, release_name: &str, release_namespace: &str) {
    add_metadata(
        object,
        "labels",
        &BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY_HELM.to_owned())]),
    );
    add_metadata(
        object,
        "annotations",
        &BTreeMap::from([
            (RELEASE_NAME_ANNOTATION.to_owned(), release_name.to_owned()),
            (
                RELEASE_NAMESPACE_ANNOTATION.to_owned(),
                release_namespace.to_owned(),
            ),
        ]),
    );
}

/// The objects of `release`'s manifest as Helm applies them (install, upgrade, rollback) and
/// as Flux compares them for drift: each with Helm's ownership metadata ([`set_ownership`]).
/// The stored manifest itself holds no ownership metadata (Helm adds it only when applying);
/// hooks and the CRDs of `crds/` get none either.
///
/// # Errors
/// A document of the manifest that does not parse.
pub fn owned_objects(release: &capstan_helm::release::Release) -> Result<Vec<Value>, String> {
    let mut objects = manifest_objects(&release.manifest)?;
    for object in &mut objects {
        set_ownership(object, &release.name, &release.namespace);
    }
    Ok(objects)
}

/// Helm's `checkOwnership`: whether the live `object` belongs to the release `release_name` in
/// `release_namespace`, in Helm's words when it does not (`invalid ownership metadata; label
/// validation error: missing key "app.kubernetes.io/managed-by": must be set to "Helm"; …`).
///
/// # Errors
/// The label or an annotation missing or naming something else.
pub fn check_ownership(
    object: &Value,
    release_name: &str,
    release_namespace: &str,
) -> Result<(), String> {
    let require = |field: &str, what: &str, key: &str, wanted: &str| match object["metadata"][field]
        [key]
        .as_str()
    {
        None => Some(format!(
            "{what} validation error: missing key {key:?}: must be set to {wanted:?}"
        )),
        Some(actual) if actual != wanted => Some(format!(
            "{what} validation error: key {key:?} must equal {wanted:?}: current value is {actual:?}"
        )),
        Some(_) => None,
    };
    let errors: Vec<String> = [
        require("labels", "label", MANAGED_BY_LABEL, MANAGED_BY_HELM),
        require(
            "annotations",
            "annotation",
            RELEASE_NAME_ANNOTATION,
            release_name,
        ),
        require(
            "annotations",
            "annotation",
            RELEASE_NAMESPACE_ANNOTATION,
            release_namespace,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("invalid ownership metadata; {}", errors.join("; ")))
    }
}

/// Whether Flux lets Helm take ownership of existing objects for this action: unless
/// `install.disableTakeOwnership` (an install) or `upgrade.disableTakeOwnership` (an upgrade)
/// is set, Flux's `TakeOwnership` is on and objects in the cluster are adopted whatever their
/// metadata says.
pub fn takes_ownership(object: &HelmRelease, is_upgrade: bool) -> bool {
    let disabled = if is_upgrade {
        object
            .spec
            .upgrade
            .as_ref()
            .and_then(|u| u.disable_take_ownership)
    } else {
        object
            .spec
            .install
            .as_ref()
            .and_then(|i| i.disable_take_ownership)
    };
    disabled != Some(true)
}

/// Helm's adoption rule before an install or upgrade writes its record: when `object` does not
/// let Helm take ownership ([`takes_ownership`]), every object of `manifest` that is new to the
/// release (an install: all; an upgrade: those not in `current_manifest`, by group, version,
/// kind, namespace and name) and already exists in the cluster must carry the release's
/// ownership metadata ([`check_ownership`]). Objects with `generateName` and kinds the cluster
/// does not serve yet are not looked up. Namespaced objects without a namespace are looked up
/// in `release_namespace`.
///
/// # Errors
/// Helm's message: `unable to continue with install: ConfigMap "x" in namespace "apps" exists
/// and cannot be imported into the current release: invalid ownership metadata; …` (`with
/// update` for an upgrade), or the refusal of a lookup.
pub async fn check_adoption(
    client: &Client,
    object: &HelmRelease,
    manifest: &str,
    current_manifest: Option<&str>,
    release_name: &str,
    release_namespace: &str,
) -> Result<(), String> {
    let is_upgrade = current_manifest.is_some();
    if takes_ownership(object, is_upgrade) {
        return Ok(());
    }
    let action = if is_upgrade { "update" } else { "install" };
    let key = |o: &Value| {
        (
            o["apiVersion"].as_str().unwrap_or_default().to_owned(),
            o["kind"].as_str().unwrap_or_default().to_owned(),
            o["metadata"]["namespace"]
                .as_str()
                .unwrap_or(release_namespace)
                .to_owned(),
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };
    let current: Vec<_> = match current_manifest {
        Some(manifest) => manifest_objects(manifest)?.iter().map(key).collect(),
        None => Vec::new(),
    };
    for desired in manifest_objects(manifest)? {
        let (api_version, kind, namespace, name) = key(&desired);
        if name.is_empty() || current.contains(&key(&desired)) {
            continue;
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
        let gvk = GroupVersionKind::gvk(group, version, &kind);
        let Ok((resource, capabilities)) = kube::discovery::pinned_kind(client, &gvk).await else {
            continue;
        };
        let namespace = if capabilities.scope == kube::discovery::Scope::Namespaced {
            namespace
        } else {
            String::new()
        };
        let api: Api<DynamicObject> = if namespace.is_empty() {
            Api::all_with(client.clone(), &resource)
        } else {
            Api::namespaced_with(client.clone(), &namespace, &resource)
        };
        let described = format!("{kind} {name:?} in namespace {namespace:?}");
        let existing = api.get_opt(&name).await.map_err(|e| {
            format!(
                "unable to continue with {action}: could not get information about the resource {described}: {e}"
            )
        })?;
        let Some(existing) = existing else {
            continue;
        };
        let existing = serde_json::to_value(&existing).unwrap_or_default();
        check_ownership(&existing, release_name, release_namespace).map_err(|e| {
            format!(
                "unable to continue with {action}: {described} exists and cannot be imported into the current release: {e}"
            )
        })?;
    }
    Ok(())
}

/// The cluster's `.Capabilities`: its version and every served `group/version` and
/// `group/version/Kind`.
///
/// # Errors
/// The API server's refusal of the version or discovery requests.
pub async fn capabilities(client: &Client) -> Result<ClusterInfo, kube::Error> {
    let version = client.apiserver_version().await?;
    let discovery = kube::Discovery::new(client.clone()).run().await?;
    let mut api_versions = Vec::new();
    for group in discovery.groups() {
        for version in group.versions() {
            let group_version = if group.name().is_empty() {
                version.to_owned()
            } else {
                format!("{}/{version}", group.name())
            };
            api_versions.push(group_version.clone());
            for (resource, _) in group.versioned_resources(version) {
                api_versions.push(format!("{group_version}/{}", resource.kind));
            }
        }
    }
    api_versions.sort();
    api_versions.dedup();
    Ok(ClusterInfo {
        kube_version: Some(version.git_version),
        api_versions,
    })
}

/// Helm's `lookup` answered by a cluster: the template engine is synchronous and runs on a
/// blocking thread, so each lookup is run on the runtime through `handle`.
#[derive(Clone)]
pub struct ClusterLookup {
    /// The target cluster's client.
    pub client: Client,
    /// The async runtime the client runs on.
    pub handle: tokio::runtime::Handle,
}

impl std::fmt::Debug for ClusterLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterLookup").finish_non_exhaustive()
    }
}

impl capstan_helm::Lookup for ClusterLookup {
    fn lookup(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<capstan_helm::Value, String> {
        let client = self.client.clone();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        let found = self.handle.block_on(async move {
            let (resource, capabilities): (ApiResource, _) =
                kube::discovery::pinned_kind(&client, &gvk)
                    .await
                    .map_err(|e| format!("unable to get apiresource from unstructured: {e}"))?;
            let namespaced = capabilities.scope == kube::discovery::Scope::Namespaced;
            let api: Api<DynamicObject> = if namespaced && !namespace.is_empty() {
                Api::namespaced_with(client, &namespace, &resource)
            } else {
                Api::all_with(client, &resource)
            };
            if name.is_empty() {
                let list = api
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                let items: Vec<Value> = list
                    .items
                    .iter()
                    .filter_map(|item| serde_json::to_value(item).ok())
                    .collect();
                return Ok::<Value, String>(serde_json::json!({
                    "apiVersion": "v1", "kind": "List", "items": items,
                }));
            }
            match api.get_opt(&name).await {
                Ok(Some(object)) => Ok(serde_json::to_value(&object).unwrap_or(Value::Null)),
                Ok(None) => Ok(Value::Object(serde_json::Map::new())),
                Err(e) => Err(e.to_string()),
            }
        })?;
        Ok(capstan_helm::Value::from_json(&found))
    }
}

/// The version the controller gives a chart of `object` whose own version is `version`: for an
/// OCIRepository chart, the last attempted one (`<version>+<digest>`, Flux's digest tracking)
/// when its version is the same (build metadata aside); else none.
fn released_version(object: &HelmRelease, version: &str) -> Option<String> {
    let oci = object
        .spec
        .chart_ref
        .as_ref()
        .is_some_and(|r| r.kind == capstan_api::helm::v2::ChartRefKind::OciRepository);
    let released = object.status.as_ref()?.last_attempted_revision.as_deref()?;
    let core = |v: &str| v.split_once('+').map_or(v, |(core, _)| core).to_owned();
    (oci && core(released) == core(version)).then(|| released.to_owned())
}

/// Renders `object`'s release locally, as the controller would install it, without a cluster
/// (for `capstan build helmrelease`): the chart at `chart_path` (a directory or a `.tgz`),
/// `values` composed by the caller (e.g. [`super::values::merge_references`] with the
/// `valuesFrom` data at hand), Helm's default capabilities (or `cluster`), empty lookups.
/// Returns the release manifest as the controller stores it (post-rendered, origin labels
/// added), followed by the hooks' documents. An OCIRepository chart of the version last
/// attempted gets that version's digest metadata, as the controller gives it.
///
/// # Errors
/// The chart does not load, or [`render`]'s errors.
pub fn render_local(
    object: &HelmRelease,
    chart_path: &Path,
    values: &Values,
    cluster: Option<&ClusterInfo>,
) -> Result<Rendered, RenderError> {
    let mut chart = capstan_helm::chart::load(chart_path)
        .map_err(|e| RenderError::Local(format!("cannot load chart: {}", e.message)))?;
    if let Some(version) = released_version(object, &chart.metadata.version) {
        chart.metadata.version = version;
    }
    let default = ClusterInfo::default();
    let request = RenderRequest {
        object,
        chart: &chart,
        values,
        revision: 1,
        is_upgrade: false,
        cluster: cluster.unwrap_or(&default),
    };
    let mut env = capstan_helm::template::Env::new();
    render(&request, &mut env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applied_objects_carry_helms_ownership_metadata_and_the_manifest_none() {
        let mut release = capstan_helm::release::Release::new(
            "web",
            "apps",
            1,
            capstan_helm::release::Chart::default(),
        );
        release.manifest = "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  labels:\n    app.kubernetes.io/managed-by: someone\n    team: a\n".into();
        let objects = owned_objects(&release).unwrap();
        let metadata = &objects[0]["metadata"];
        assert_eq!(metadata["labels"][MANAGED_BY_LABEL], "Helm");
        assert_eq!(metadata["labels"]["team"], "a");
        assert_eq!(metadata["annotations"][RELEASE_NAME_ANNOTATION], "web");
        assert_eq!(
            metadata["annotations"][RELEASE_NAMESPACE_ANNOTATION],
            "apps"
        );
        assert_eq!(check_ownership(&objects[0], "web", "apps"), Ok(()));
        assert!(!release.manifest.contains("meta.helm.sh"));
    }

    #[test]
    fn ownership_is_checked_in_helms_words() {
        let bare = serde_json::json!({"metadata": {"name": "web"}});
        assert_eq!(
            check_ownership(&bare, "web", "apps").unwrap_err(),
            "invalid ownership metadata; label validation error: missing key \"app.kubernetes.io/managed-by\": must be set to \"Helm\"; annotation validation error: missing key \"meta.helm.sh/release-name\": must be set to \"web\"; annotation validation error: missing key \"meta.helm.sh/release-namespace\": must be set to \"apps\""
        );
        let other = serde_json::json!({"metadata": {
            "labels": {MANAGED_BY_LABEL: "Helm"},
            "annotations": {RELEASE_NAME_ANNOTATION: "other", RELEASE_NAMESPACE_ANNOTATION: "apps"},
        }});
        assert_eq!(
            check_ownership(&other, "web", "apps").unwrap_err(),
            "invalid ownership metadata; annotation validation error: key \"meta.helm.sh/release-name\" must equal \"web\": current value is \"other\""
        );
    }

    #[test]
    fn flux_takes_ownership_unless_disabled_per_action() {
        let object = |spec: serde_json::Value| -> HelmRelease {
            let mut full = serde_json::json!({
                "interval": "5m", "chartRef": {"kind": "OCIRepository", "name": "x"},
            });
            full.as_object_mut()
                .unwrap()
                .extend(spec.as_object().unwrap().clone());
            HelmRelease::new("web", serde_json::from_value(full).unwrap())
        };
        let default = object(serde_json::json!({}));
        assert!(takes_ownership(&default, false) && takes_ownership(&default, true));
        let install = object(serde_json::json!({"install": {"disableTakeOwnership": true}}));
        assert!(!takes_ownership(&install, false) && takes_ownership(&install, true));
        let upgrade = object(serde_json::json!({"upgrade": {"disableTakeOwnership": true}}));
        assert!(takes_ownership(&upgrade, false) && !takes_ownership(&upgrade, true));
    }

    #[test]
    fn long_names_are_shortened_as_flux_does() {
        assert_eq!(shorten_name("podinfo"), "podinfo");
        let long = "some-front-appended-namespace-release-with-a-very-long-name";
        let short = shorten_name(long);
        assert_eq!(short.len(), 53);
        assert!(short.starts_with("some-front-appended-namespace-release-wi-"));
        let hex = super::super::values::sha256(long.as_bytes());
        assert_eq!(&short[41..], &hex["sha256:".len().."sha256:".len() + 12]);
    }

    #[test]
    fn origin_labels_and_common_metadata_are_added() {
        let mut object: HelmRelease = serde_json::from_value(serde_json::json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "web", "namespace": "apps"},
            "spec": {
                "interval": "5m", "chartRef": {"kind": "OCIRepository", "name": "c"},
                "commonMetadata": {"labels": {"team": "a"}},
                "postRenderers": [{"kustomize": {
                    "patches": [{"patch": "- op: replace\n  path: /spec/replicas\n  value: 3\n",
                                 "target": {"kind": "Deployment"}}],
                    "images": [{"name": "nginx", "newTag": "1.27"}],
                }}],
            },
        }))
        .unwrap();
        object.metadata.namespace = Some("apps".into());
        let deployment = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}},
        });
        let out = post_render(&object, vec![deployment]).unwrap();
        assert_eq!(out[0]["spec"]["replicas"], 3);
        assert_eq!(
            out[0]["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:1.27"
        );
        assert_eq!(out[0]["metadata"]["labels"][NAME_LABEL], "web");
        assert_eq!(out[0]["metadata"]["labels"][NAMESPACE_LABEL], "apps");
        assert_eq!(out[0]["metadata"]["labels"]["team"], "a");
        let text = manifest_text(&out);
        assert!(text.starts_with("---\napiVersion: apps/v1\n"), "{text}");
        assert_eq!(manifest_objects(&text).unwrap(), out);
    }
}
