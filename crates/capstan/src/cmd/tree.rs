//! `capstan tree kustomization` (the inventory as a tree), `capstan tree helmrelease` (the
//! objects of the latest Helm release) and `capstan trace` (from an object to the Kustomization
//! that applied it and that Kustomization's source).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{Context, bail};
use capstan_api::meta::{condition, label};
use capstan_apply::{Inventory, ObjectRef};
use clap::{Args, Subcommand, ValueEnum};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersion;
use kube::discovery::{ApiCapabilities, Scope};
use serde_json::Value;

use super::{ClusterArgs, HELM_RELEASE, KUSTOMIZATION};

/// `capstan tree`.
#[derive(Debug, Args)]
pub struct TreeArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(subcommand)]
    pub target: TreeTarget,
}

/// What to show as a tree.
#[derive(Debug, Subcommand)]
pub enum TreeTarget {
    /// A Kustomization's inventory, nested Kustomizations and HelmReleases expanded.
    #[command(alias = "ks")]
    Kustomization(TreeName),
    /// The objects of a HelmRelease's latest release (its manifest in Helm's storage).
    #[command(alias = "hr")]
    Helmrelease(TreeName),
}

/// The object's name and how to print its tree.
#[derive(Debug, Args)]
pub struct TreeName {
    /// Name of the Kustomization or HelmRelease.
    pub name: String,
    /// Print the tree as JSON or YAML (Flux's shape: `resource` and nested `resources`)
    /// instead of text.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<TreeOutput>,
    /// Only Flux's objects (API groups of `toolkit.fluxcd.io`).
    #[arg(long)]
    pub compact: bool,
}

/// `tree -o`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TreeOutput {
    /// JSON, indented by two spaces.
    Json,
    /// YAML.
    Yaml,
}

/// One object of a tree and the objects below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The object.
    pub object: ObjectRef,
    /// What it holds: a Kustomization's inventory, a HelmRelease's release objects.
    pub children: Vec<Node>,
}

impl Node {
    fn leaf(object: ObjectRef) -> Self {
        Self {
            object,
            children: Vec::new(),
        }
    }

    /// The tree as Flux prints it: the root, then one line per object with `├── `/`└── `
    /// branches.
    pub fn text(&self) -> String {
        let mut out = format!("{}\n", self.object);
        Self::text_below(&self.children, "", &mut out);
        out
    }

    fn text_below(children: &[Node], prefix: &str, out: &mut String) {
        for (index, child) in children.iter().enumerate() {
            let last = index + 1 == children.len();
            let branch = if last { "└── " } else { "├── " };
            let _ = writeln!(out, "{prefix}{branch}{}", child.object);
            let nested = format!("{prefix}{}", if last { "    " } else { "│   " });
            Self::text_below(&child.children, &nested, out);
        }
    }

    /// The tree as `flux tree -o json|yaml` prints it: `{"resource": {"Namespace", "Name",
    /// "GroupKind": {"Group", "Kind"}}, "resources": [...]}` (Go field names: the object
    /// metadata type has no JSON tags; `resources` left out when empty).
    pub fn to_json(&self) -> Value {
        let mut node = serde_json::Map::new();
        node.insert(
            "resource".into(),
            serde_json::json!({
                "Namespace": self.object.namespace,
                "Name": self.object.name,
                "GroupKind": {"Group": self.object.group, "Kind": self.object.kind},
            }),
        );
        if !self.children.is_empty() {
            node.insert(
                "resources".into(),
                Value::Array(self.children.iter().map(Node::to_json).collect()),
            );
        }
        Value::Object(node)
    }

    /// Prints the tree as text, JSON or YAML. JSON keeps Go's field order (`resource`,
    /// `resources`; `Namespace`, `Name`, `GroupKind`: [`Node::to_json`]'s, the workspace's
    /// `serde_json` preserving insertion order), YAML sorts keys as `sigs.k8s.io/yaml` does; both
    /// end with an empty line, as `flux` prints them.
    pub fn render(&self, output: Option<TreeOutput>) -> anyhow::Result<String> {
        Ok(match output {
            None => self.text(),
            Some(TreeOutput::Json) => {
                format!("{}\n", serde_json::to_string_pretty(&self.to_json())?)
            }
            Some(TreeOutput::Yaml) => {
                format!("{}\n", capstan_kustomize::to_yaml_document(&self.to_json()))
            }
        })
    }
}

/// Whether `--compact` keeps the object: Flux's API groups only.
fn is_flux_object(object: &ObjectRef) -> bool {
    object.group.contains("toolkit.fluxcd.io")
}

/// The inventory of a Kustomization as references (empty when it has none yet).
fn inventory(object: &Value) -> anyhow::Result<Vec<ObjectRef>> {
    let Some(status) = object["status"].get("inventory").filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let status = serde_json::from_value(status.clone())?;
    let inventory = Inventory::from_status(&status).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(inventory.objects().to_vec())
}

fn is_kustomization(reference: &ObjectRef) -> bool {
    reference.kind == KUSTOMIZATION.type_name && reference.group == KUSTOMIZATION.group
}

fn is_helm_release(reference: &ObjectRef) -> bool {
    reference.kind == HELM_RELEASE.type_name && reference.group == HELM_RELEASE.group
}

/// The nodes below one Kustomization, as Flux builds them: the Kustomization's own entry (a
/// bootstrap Kustomization applies itself) is left out; a HelmRelease holds the objects of its
/// latest release (none when it releases to a remote cluster or has not released yet); a
/// nested Kustomization holds its own inventory, except below a Kustomization that targets a
/// remote cluster (`spec.kubeConfig`), and a Kustomization already shown is not expanded again
/// (`visited`), which stops cycles. With `compact`, only Flux's objects.
fn tree_below<'a>(
    client: &'a Client,
    object: Value,
    compact: bool,
    visited: &'a mut HashSet<(String, String)>,
) -> futures::future::BoxFuture<'a, anyhow::Result<Vec<Node>>> {
    Box::pin(async move {
        let own = (
            super::namespace_of(&object).to_owned(),
            super::name_of(&object).to_owned(),
        );
        let remote = !object["spec"]["kubeConfig"].is_null();
        let mut nodes = Vec::new();
        for entry in inventory(&object)? {
            if (compact && !is_flux_object(&entry))
                || (is_kustomization(&entry)
                    && (entry.namespace.clone(), entry.name.clone()) == own)
            {
                continue;
            }
            let mut node = Node::leaf(entry);
            let entry = &node.object;
            if is_helm_release(entry) {
                let release = HELM_RELEASE
                    .get(client, &entry.namespace, &entry.name)
                    .await;
                if let Ok(release) = release
                    && release["spec"]["kubeConfig"].is_null()
                {
                    node.children = release_objects(client, &release)
                        .await?
                        .into_iter()
                        .filter(|o| !compact || is_flux_object(o))
                        .map(Node::leaf)
                        .collect();
                }
            } else if is_kustomization(entry)
                && !remote
                && visited.insert((entry.namespace.clone(), entry.name.clone()))
            {
                let child = KUSTOMIZATION
                    .get(client, &entry.namespace, &entry.name)
                    .await;
                if let Ok(child) = child {
                    node.children = tree_below(client, child, compact, visited).await?;
                }
            }
            nodes.push(node);
        }
        Ok(nodes)
    })
}

/// Prints the inventory tree of a Kustomization, or the objects of a HelmRelease's release, as
/// text, JSON or YAML.
pub async fn tree(args: TreeArgs) -> anyhow::Result<ExitCode> {
    let client = args.cluster.client().await?;
    let namespace = &args.cluster.namespace;
    let tree = match &args.target {
        TreeTarget::Kustomization(target) => {
            let object = KUSTOMIZATION.get(&client, namespace, &target.name).await?;
            let mut visited = HashSet::from([(namespace.clone(), target.name.clone())]);
            Node {
                object: ObjectRef::new(
                    &KUSTOMIZATION.api_version(),
                    KUSTOMIZATION.type_name,
                    namespace,
                    &target.name,
                ),
                children: tree_below(&client, object, target.compact, &mut visited).await?,
            }
        }
        TreeTarget::Helmrelease(target) => {
            helm_release_tree(&client, namespace, &target.name, target.compact).await?
        }
    };
    let output = match &args.target {
        TreeTarget::Kustomization(t) | TreeTarget::Helmrelease(t) => t.output,
    };
    out!("{}", tree.render(output)?);
    Ok(ExitCode::SUCCESS)
}

/// The Helm release of a HelmRelease: its storage namespace and release name, as the
/// controller recorded them (`status.storageNamespace`, the newest `status.history` entry), else
/// as the spec gives them (`storageNamespace`; `releaseName`, else `[<targetNamespace>-]<name>`
/// shortened as the controller does).
fn release_of(object: &Value) -> (String, String) {
    let own = super::namespace_of(object);
    let spec = &object["spec"];
    let status = &object["status"];
    let storage = status["storageNamespace"]
        .as_str()
        .or_else(|| spec["storageNamespace"].as_str())
        .unwrap_or(own);
    let name = match status["history"][0]["name"].as_str() {
        Some(name) => name.to_owned(),
        None => serde_json::from_value::<capstan_api::HelmRelease>(object.clone()).map_or_else(
            |_| super::name_of(object).to_owned(),
            |typed| capstan_controllers::helm_release::release_name(&typed),
        ),
    };
    (storage.to_owned(), name)
}

/// The objects of a release manifest, in manifest order; a namespaced object without a
/// namespace is in the release's (the API's discovery tells which kinds are namespaced).
pub(crate) async fn manifest_objects(
    client: &Client,
    manifest: &str,
    release_namespace: &str,
) -> anyhow::Result<Vec<ObjectRef>> {
    let documents = capstan_kustomize::parse_documents(manifest)
        .map_err(|e| anyhow::anyhow!("reading the release manifest: {e}"))?;
    let mut scopes: std::collections::HashMap<(String, String), bool> =
        std::collections::HashMap::default();
    let mut objects = Vec::new();
    for document in documents.iter().filter(|d| d.is_object()) {
        let api_version = document["apiVersion"].as_str().unwrap_or_default();
        let kind = document["kind"].as_str().unwrap_or_default();
        let name = document["metadata"]["name"].as_str().unwrap_or_default();
        let key = (api_version.to_owned(), kind.to_owned());
        let namespaced = if let Some(namespaced) = scopes.get(&key) {
            *namespaced
        } else {
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
            // A kind the API does not serve (yet) is taken as namespaced, as Helm does.
            let namespaced = kube::discovery::pinned_kind(client, &gvk)
                .await
                .map_or(true, |(_, caps)| caps.scope == Scope::Namespaced);
            scopes.insert(key, namespaced);
            namespaced
        };
        let namespace = match document["metadata"]["namespace"].as_str() {
            _ if !namespaced => "",
            Some(namespace) if !namespace.is_empty() => namespace,
            _ => release_namespace,
        };
        objects.push(ObjectRef::new(api_version, kind, namespace, name));
    }
    Ok(objects)
}

/// The objects of a HelmRelease's latest release, read from Helm's storage (the
/// `sh.helm.release.v1.<name>.v<N>` Secrets), in manifest order; none before the first release.
async fn release_objects(client: &Client, object: &Value) -> anyhow::Result<Vec<ObjectRef>> {
    let (storage_namespace, release_name) = release_of(object);
    let storage =
        capstan_controllers::helm_storage::HelmStorage::new(client.clone(), &storage_namespace);
    let release = storage
        .last(&release_name)
        .await
        .with_context(|| format!("reading the release {storage_namespace}/{release_name}"))?;
    match release {
        Some(release) => manifest_objects(client, &release.manifest, &release.namespace).await,
        None => Ok(Vec::new()),
    }
}

/// The tree of a HelmRelease: the objects of its latest release. One releasing to a remote
/// cluster is refused: its storage is there.
async fn helm_release_tree(
    client: &Client,
    namespace: &str,
    name: &str,
    compact: bool,
) -> anyhow::Result<Node> {
    let object = HELM_RELEASE.get(client, namespace, name).await?;
    if !object["spec"]["kubeConfig"].is_null() {
        bail!(
            "HelmRelease {namespace}/{name} releases to a remote cluster (spec.kubeConfig): its \
             release storage is there\nhint: run `capstan tree helmrelease` against that cluster"
        );
    }
    let children = release_objects(client, &object)
        .await?
        .into_iter()
        .filter(|o| !compact || is_flux_object(o))
        .map(Node::leaf)
        .collect();
    Ok(Node {
        object: ObjectRef::new(
            &HELM_RELEASE.api_version(),
            HELM_RELEASE.type_name,
            namespace,
            name,
        ),
        children,
    })
}

/// `capstan trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// `<kind>/<name>` (repeatable), or `<kind> <name> [<name>...]`, or names with `--kind`.
    #[arg(required = true)]
    pub objects: Vec<String>,
    /// The object's kind, e.g. `Deployment`.
    #[arg(long)]
    pub kind: Option<String>,
    /// The object's API version, e.g. `apps/v1`.
    #[arg(long)]
    pub api_version: Option<String>,
}

const ALIASES: [(&str, &str); 12] = [
    ("deploy", "deployments"),
    ("svc", "services"),
    ("cm", "configmaps"),
    ("ns", "namespaces"),
    ("sa", "serviceaccounts"),
    ("ds", "daemonsets"),
    ("sts", "statefulsets"),
    ("ks", "kustomizations"),
    ("gitrepo", "gitrepositories"),
    ("ocirepo", "ocirepositories"),
    ("hr", "helmreleases"),
    ("po", "pods"),
];

/// Whether an API resource is the one a user typed: its kind, plural or singular, in any case.
fn matches_resource(resource: &ApiResource, wanted: &str) -> bool {
    resource.kind.eq_ignore_ascii_case(wanted) || resource.plural.eq_ignore_ascii_case(wanted)
}

/// Finds the API resource of a kind typed as kubectl accepts it (kind, singular, plural,
/// short name, in any case), among every served group or, with `apiVersion`, in that
/// group/version only.
async fn resolve_kind(
    client: &Client,
    kind: &str,
    api_version: Option<&str>,
) -> anyhow::Result<(ApiResource, ApiCapabilities)> {
    let wanted = kind.to_ascii_lowercase();
    let wanted = ALIASES
        .iter()
        .find(|(short, _)| *short == wanted)
        .map_or(wanted.clone(), |(_, plural)| (*plural).to_owned());
    if let Some(api_version) = api_version {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let group_version = GroupVersion::gv(group, version);
        let served = kube::discovery::pinned_group(client, &group_version)
            .await
            .with_context(|| format!("the server doesn't serve {api_version}"))?;
        return served
            .versioned_resources(version)
            .into_iter()
            .find(|(resource, _)| matches_resource(resource, &wanted))
            .ok_or_else(|| anyhow::anyhow!("unknown kind {kind} in {api_version}"));
    }
    let discovery = kube::Discovery::new(client.clone())
        .run()
        .await
        .context("discovering the API resources")?;
    for group in discovery.groups() {
        for (resource, capabilities) in group.recommended_resources() {
            if matches_resource(&resource, &wanted) {
                return Ok((resource, capabilities));
            }
        }
    }
    bail!("the server doesn't have a resource type '{kind}'")
}

/// `Kind`/`name` pairs from the arguments.
fn trace_targets(args: &TraceArgs) -> anyhow::Result<Vec<(String, String)>> {
    if let Some(kind) = &args.kind {
        return Ok(args
            .objects
            .iter()
            .map(|name| (kind.clone(), name.clone()))
            .collect());
    }
    if args.objects[0].contains('/') {
        return args
            .objects
            .iter()
            .map(|o| match o.split_once('/') {
                Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {
                    Ok((kind.to_owned(), name.to_owned()))
                }
                _ => bail!("invalid object '{o}': expected <kind>/<name>"),
            })
            .collect();
    }
    match args.objects.split_first() {
        Some((kind, names)) if !names.is_empty() => Ok(names
            .iter()
            .map(|name| (kind.clone(), name.clone()))
            .collect()),
        _ => bail!("a kind and a name are required: <kind>/<name> or <kind> <name>"),
    }
}

fn field(out: &mut String, label: &str, value: &str) {
    let _ = writeln!(out, "{:<17}{value}", format!("{label}:"));
}

fn status_lines(out: &mut String, object: &Value) {
    match super::condition_of(object, condition::READY) {
        Some(ready) => {
            field(
                out,
                "Status",
                &format!(
                    "Last reconciled at {}",
                    ready["lastTransitionTime"].as_str().unwrap_or_default()
                ),
            );
            field(
                out,
                "Message",
                ready["message"].as_str().unwrap_or_default(),
            );
        }
        None => field(out, "Status", "Unknown"),
    }
}

/// Traces one object: it, its Kustomization and the Kustomization's source.
async fn trace_one(
    client: &Client,
    namespace: &str,
    kind: &str,
    name: &str,
    api_version: Option<&str>,
) -> anyhow::Result<String> {
    let (resource, capabilities) = resolve_kind(client, kind, api_version).await?;
    let api: Api<DynamicObject> = if capabilities.scope == Scope::Namespaced {
        Api::namespaced_with(client.clone(), namespace, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    let object = api
        .get_opt(name)
        .await?
        .ok_or_else(|| anyhow::anyhow!("{} '{name}' not found", resource.kind))?;
    let labels = object.metadata.labels.clone().unwrap_or_default();
    let owner = |name_key: &str, namespace_key: &str| {
        labels
            .get(name_key)
            .zip(labels.get(namespace_key))
            .map(|(n, ns)| (n.clone(), ns.clone()))
    };
    let kustomization = owner(label::KUSTOMIZE_NAME, label::KUSTOMIZE_NAMESPACE);
    let helm_release = owner(label::HELM_NAME, label::HELM_NAMESPACE);
    if kustomization.is_none() && helm_release.is_none() {
        bail!(
            "object {}/{name} is not managed by Flux (no {} or {} label)",
            resource.kind,
            label::KUSTOMIZE_NAME,
            label::HELM_NAME
        );
    }
    let mut out = String::from("\n");
    field(&mut out, "Object", &format!("{}/{name}", resource.kind));
    if capabilities.scope == Scope::Namespaced {
        field(&mut out, "Namespace", namespace);
    }
    field(&mut out, "Status", "Managed by Flux");
    out.push_str("---\n");
    if let Some((ks_name, ks_namespace)) = kustomization {
        let ks = KUSTOMIZATION.get(client, &ks_namespace, &ks_name).await?;
        field(&mut out, "Kustomization", &ks_name);
        field(&mut out, "Namespace", &ks_namespace);
        if let Some(target) = ks["spec"]["targetNamespace"].as_str() {
            field(&mut out, "Target", target);
        }
        field(
            &mut out,
            "Path",
            ks["spec"]["path"].as_str().unwrap_or_default(),
        );
        field(&mut out, "Revision", KUSTOMIZATION.revision(&ks));
        status_lines(&mut out, &ks);
        out.push_str("---\n");
        let (source_kind, source_ns, source_name) = super::lifecycle::source_of(&ks)?;
        source_lines(client, &mut out, source_kind, &source_ns, &source_name).await?;
    } else if let Some((hr_name, hr_namespace)) = helm_release {
        helm_release_lines(client, &mut out, &hr_namespace, &hr_name).await?;
    }
    Ok(out)
}

/// The source section of a trace: kind and name, namespace, address, reference, revision,
/// origin, status.
async fn source_lines(
    client: &Client,
    out: &mut String,
    source_kind: &super::Kind,
    source_ns: &str,
    source_name: &str,
) -> anyhow::Result<()> {
    let source = source_kind.get(client, source_ns, source_name).await?;
    field(out, source_kind.type_name, source_name);
    field(out, "Namespace", source_ns);
    let spec = &source["spec"];
    let url = spec["url"].as_str().or_else(|| spec["endpoint"].as_str());
    field(out, "URL", url.unwrap_or_default());
    if let Some(bucket) = spec["bucketName"].as_str() {
        field(out, "Bucket", bucket);
    }
    for (key, title) in [
        ("branch", "Branch"),
        ("tag", "Tag"),
        ("semver", "Semver"),
        ("digest", "Digest"),
        ("commit", "Commit"),
    ] {
        if let Some(value) = spec["ref"][key].as_str() {
            field(out, title, value);
        }
    }
    field(out, "Revision", source_kind.revision(&source));
    let metadata = &source["status"]["artifact"]["metadata"];
    if let Some(origin) = metadata[capstan_controllers::kustomization::ORIGIN_REVISION_KEY].as_str()
    {
        field(out, "Origin Revision", origin);
    }
    if let Some(origin) = metadata["org.opencontainers.image.source"].as_str() {
        field(out, "Origin Source", origin);
    }
    status_lines(out, &source);
    Ok(())
}

/// The HelmRelease sections of a trace, as Flux prints them: the HelmRelease (revision: its
/// `lastAttemptedRevision`), the HelmChart of `status.helmChart` when there is one, then the
/// chart's source (the `chartRef`, or the template's `sourceRef`).
async fn helm_release_lines(
    client: &Client,
    out: &mut String,
    namespace: &str,
    name: &str,
) -> anyhow::Result<()> {
    let hr = HELM_RELEASE.get(client, namespace, name).await?;
    field(out, "HelmRelease", name);
    field(out, "Namespace", namespace);
    if let Some(target) = hr["spec"]["targetNamespace"].as_str() {
        field(out, "Target", target);
    }
    field(
        out,
        "Revision",
        hr["status"]["lastAttemptedRevision"]
            .as_str()
            .unwrap_or_default(),
    );
    status_lines(out, &hr);
    if let Some((chart_ns, chart_name)) = hr["status"]["helmChart"]
        .as_str()
        .and_then(|c| c.split_once('/'))
    {
        let chart = super::HELM_CHART.get(client, chart_ns, chart_name).await?;
        out.push_str("---\n");
        field(out, "HelmChart", chart_name);
        field(out, "Namespace", chart_ns);
        field(
            out,
            "Chart",
            chart["spec"]["chart"].as_str().unwrap_or_default(),
        );
        field(
            out,
            "Version",
            chart["spec"]["version"].as_str().unwrap_or_default(),
        );
        field(out, "Revision", super::HELM_CHART.revision(&chart));
        status_lines(out, &chart);
    }
    let spec = &hr["spec"];
    let reference = if spec["chartRef"].is_object() {
        &spec["chartRef"]
    } else {
        &spec["chart"]["spec"]["sourceRef"]
    };
    let kind_name = reference["kind"].as_str().unwrap_or_default();
    if let Some(source) =
        super::Kind::by_name(kind_name).filter(|k| k.is_source && *k != &super::HELM_CHART)
    {
        let source_ns = reference["namespace"].as_str().unwrap_or(namespace);
        let source_name = reference["name"].as_str().unwrap_or_default();
        out.push_str("---\n");
        source_lines(client, out, source, source_ns, source_name).await?;
    }
    Ok(())
}

/// Prints the trace of each object named.
pub async fn trace(args: TraceArgs) -> anyhow::Result<ExitCode> {
    let targets = trace_targets(&args)?;
    let client = args.cluster.client().await?;
    for (kind, name) in targets {
        let text = trace_one(
            &client,
            &args.cluster.namespace,
            &kind,
            &name,
            args.api_version.as_deref(),
        )
        .await?;
        out!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> Node {
        let leaf = |api_version, kind, namespace, name| {
            Node::leaf(ObjectRef::new(api_version, kind, namespace, name))
        };
        Node {
            object: ObjectRef::new(
                "kustomize.toolkit.fluxcd.io/v1",
                "Kustomization",
                "ns",
                "root",
            ),
            children: vec![
                leaf("v1", "Namespace", "", "apps"),
                Node {
                    object: ObjectRef::new(
                        "kustomize.toolkit.fluxcd.io/v1",
                        "Kustomization",
                        "ns",
                        "apps",
                    ),
                    children: vec![leaf("apps/v1", "Deployment", "apps", "web")],
                },
                leaf("v1", "ConfigMap", "apps", "last"),
            ],
        }
    }

    #[test]
    fn trees_print_as_flux_prints_them() {
        assert_eq!(
            tree().render(None).unwrap(),
            "Kustomization/ns/root
├── Namespace/apps
├── Kustomization/ns/apps
│   └── Deployment/apps/web
└── ConfigMap/apps/last
"
        );
        let json = tree().render(Some(TreeOutput::Json)).unwrap();
        assert!(
            json.starts_with(
                "{\n  \"resource\": {\n    \"Namespace\": \"ns\",\n    \"Name\": \"root\",\n    \
                 \"GroupKind\": {\n      \"Group\": \"kustomize.toolkit.fluxcd.io\",\n      \
                 \"Kind\": \"Kustomization\"\n    }\n  },\n  \"resources\": ["
            ),
            "{json}"
        );
        assert!(json.ends_with("}\n"), "{json}");
        let parsed: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed, tree().to_json());
        // A cluster-scoped object keeps an empty Namespace; a leaf has no `resources`.
        assert_eq!(
            parsed["resources"][0],
            serde_json::json!({"resource": {
                "Namespace": "", "Name": "apps", "GroupKind": {"Group": "", "Kind": "Namespace"}
            }})
        );
        let yaml = tree().render(Some(TreeOutput::Yaml)).unwrap();
        assert!(
            yaml.starts_with(
                "resource:\n  GroupKind:\n    Group: kustomize.toolkit.fluxcd.io\n    \
                 Kind: Kustomization\n  Name: root\n  Namespace: ns\nresources:\n- resource:\n    \
                 GroupKind:\n      Group: \"\"\n      Kind: Namespace\n    Name: apps\n    \
                 Namespace: \"\"\n"
            ),
            "{yaml}"
        );
        assert!(yaml.ends_with("Namespace: apps\n\n"), "{yaml}");
    }
}
