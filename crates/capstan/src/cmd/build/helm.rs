//! `capstan build helmrelease` (render a local chart as helm-controller would release it) and
//! `capstan diff helmrelease` (compare that render with the cluster by server-side dry-run):
//! beyond Flux's CLI. Both render with the controller's own
//! [`render_local`](capstan_controllers::helm_release::render_local) and compose values with its
//! [`values`](capstan_controllers::helm_release::values) functions, so what they show is what the
//! controller releases.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use capstan_api::HelmRelease;
use capstan_apply::{ApplyOptions, ObjectRef, ResourceManager};
use capstan_controllers::helm_release::{self, ClusterInfo, Rendered, values};
use clap::Args;
use kube::Client;
use kube::api::DynamicObject;
use serde_json::Value;

use crate::cmd::HELM_RELEASE;

/// The HelmRelease and the local chart standing in for its chart source.
#[derive(Debug, Args)]
pub struct HelmRenderArgs {
    /// Name of the HelmRelease.
    pub name: String,
    /// Local chart to render instead of the HelmRelease's chart source: a chart directory or a
    /// packaged chart (`.tgz`).
    #[arg(long, alias = "chart")]
    pub path: PathBuf,
    /// Read the HelmRelease from this YAML file instead of the cluster.
    #[arg(long)]
    pub helmrelease_file: Option<PathBuf>,
}

/// `build helmrelease`.
#[derive(Debug, Args)]
pub struct BuildHelmRelease {
    #[command(flatten)]
    pub render: HelmRenderArgs,
    /// Do not contact the cluster: needs `--helmrelease-file`; `valuesFrom` is skipped and
    /// Helm's default capabilities are used.
    #[arg(long)]
    pub dry_run: bool,
}

/// Reads the HelmRelease `name` from a YAML file.
fn helm_release_from_file(path: &Path, name: &str) -> anyhow::Result<HelmRelease> {
    let text = fs_err::read_to_string(path)?;
    let documents = capstan_kustomize::parse_documents(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let document = documents
        .into_iter()
        .find(|d| d["kind"] == HELM_RELEASE.type_name && d["metadata"]["name"] == name)
        .ok_or_else(|| anyhow::anyhow!("{}: no HelmRelease named '{name}'", path.display()))?;
    serde_json::from_value(document)
        .with_context(|| format!("{}: invalid HelmRelease '{name}'", path.display()))
}

/// The HelmRelease (from the file or the cluster) and its release of the local chart: values
/// composed as the controller composes them (`valuesFrom` read from the cluster, skipped
/// without one), `.Capabilities` from the cluster (Helm's defaults without one).
async fn render(
    args: &HelmRenderArgs,
    namespace: &str,
    client: Option<&Client>,
) -> anyhow::Result<(HelmRelease, Rendered)> {
    let mut object = match (&args.helmrelease_file, client) {
        (Some(file), _) => helm_release_from_file(file, &args.name)?,
        (None, Some(client)) => {
            let value = HELM_RELEASE.get(client, namespace, &args.name).await?;
            serde_json::from_value(value)
                .with_context(|| format!("invalid HelmRelease {namespace}/{}", args.name))?
        }
        (None, None) => bail!("--dry-run needs --helmrelease-file"),
    };
    if object.metadata.namespace.is_none() {
        object.metadata.namespace = Some(namespace.to_owned());
    }
    if !args.path.exists() {
        bail!(
            "invalid --path '{}': no chart directory or archive there",
            args.path.display()
        );
    }
    let (values, cluster): (values::Values, Option<ClusterInfo>) = if let Some(client) = client {
        let values = values::compose(client, &object)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let cluster = helm_release::render::capabilities(client)
            .await
            .context("reading the cluster's capabilities")?;
        (values, Some(cluster))
    } else {
        if !object.spec.values_from.is_empty() {
            crate::cmd::say::waiting("--dry-run: valuesFrom skipped");
        }
        (values::spec_values(&object), None)
    };
    let rendered = helm_release::render_local(&object, &args.path, &values, cluster.as_ref())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((object, rendered))
}

/// The released objects, then the hooks' documents (tests included), as YAML documents.
pub async fn build(
    args: &BuildHelmRelease,
    cluster: &crate::cmd::ClusterArgs,
) -> anyhow::Result<()> {
    let client = if args.dry_run {
        None
    } else {
        Some(cluster.client().await?)
    };
    let (_, rendered) = render(&args.render, &cluster.namespace, client.as_ref()).await?;
    let mut documents = rendered.objects;
    for hook in &rendered.hooks {
        let parsed = capstan_kustomize::parse_documents(&hook.manifest)
            .map_err(|e| anyhow::anyhow!("hook {}: {e}", hook.path))?;
        documents.extend(parsed.into_iter().filter(Value::is_object));
    }
    out!("{}", crate::cmd::yaml_documents(&documents));
    Ok(())
}

/// References of objects, a namespaced one without a namespace put in `namespace` (the API's
/// discovery tells which kinds are namespaced).
async fn references(
    client: &Client,
    objects: &[Value],
    namespace: &str,
) -> anyhow::Result<Vec<ObjectRef>> {
    let text = helm_release::render::manifest_text(objects);
    super::super::tree::manifest_objects(client, &text, namespace).await
}

/// Prints what releasing the local chart would change; `true` when anything would: objects
/// created or drifted (with a line diff, Secret values masked), and the objects of the last
/// release that the new manifest leaves out (Helm deletes them on upgrade).
pub async fn diff(
    args: &HelmRenderArgs,
    cluster: &crate::cmd::ClusterArgs,
) -> anyhow::Result<bool> {
    let client = cluster.client().await?;
    let (object, rendered) = render(args, &cluster.namespace, Some(&client)).await?;
    if object.spec.kube_config.is_some() && args.helmrelease_file.is_none() {
        bail!(
            "HelmRelease {} releases to a remote cluster (spec.kubeConfig)\nhint: pass that \
             cluster's --kubeconfig and the HelmRelease with --helmrelease-file",
            args.name
        );
    }
    let target = object
        .target_namespace()
        .unwrap_or(cluster.namespace.as_str())
        .to_owned();
    // As the controller applies them: with Helm's ownership metadata.
    let release = helm_release::release_name(&object);
    let objects: Vec<DynamicObject> = rendered
        .objects
        .iter()
        .map(|o| {
            let mut o = o.clone();
            helm_release::render::set_ownership(&mut o, &release, &target);
            serde_json::from_value(o)
        })
        .collect::<Result<_, _>>()
        .context("reading the rendered objects")?;
    let manager = ResourceManager::new(client.clone(), helm_release::FIELD_MANAGER);
    let force = object
        .spec
        .upgrade
        .as_ref()
        .and_then(|u| u.force)
        .unwrap_or(false);
    let options = ApplyOptions {
        force,
        default_namespace: Some(target.clone()),
        ..ApplyOptions::default()
    };
    let (comparisons, failures) = super::compare_each(&manager, &objects, &options).await;
    let mut changed = super::print_comparisons(&comparisons);
    let storage_namespace = object
        .storage_namespace()
        .unwrap_or(cluster.namespace.as_str())
        .to_owned();
    let storage =
        capstan_controllers::helm_storage::HelmStorage::new(client.clone(), &storage_namespace);
    let name = helm_release::release_name(&object);
    let last = storage
        .last(&name)
        .await
        .with_context(|| format!("reading the release {storage_namespace}/{name}"))?;
    if let Some(last) = last {
        let new: HashSet<ObjectRef> = references(&client, &rendered.objects, &target)
            .await?
            .into_iter()
            .collect();
        let namespace = if last.namespace.is_empty() {
            target.as_str()
        } else {
            last.namespace.as_str()
        };
        let old = super::super::tree::manifest_objects(&client, &last.manifest, namespace).await?;
        for stale in old.iter().filter(|o| !new.contains(o)) {
            changed = true;
            outln!("► {stale} deleted");
        }
    }
    super::not_diffed(&failures, objects.len())?;
    Ok(changed)
}
