//! `capstan install`: generates Capstan's install manifests ([`manifests`]) and applies them
//! with server-side apply (field manager `capstan`), then waits for the controller Deployment.

pub mod flux;
pub mod manifests;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope};
use serde_json::Value;

pub use manifests::{Options, manifests, manifests_yaml, tenancy_objects};

/// The field manager of the install.
pub const FIELD_MANAGER: &str = "capstan";

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Print the manifests to stdout instead of installing them.
    #[arg(long)]
    pub export: bool,
    /// Path to the kubeconfig file (default: `$KUBECONFIG`, then `~/.kube/config`).
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// The namespace Capstan is installed in.
    #[arg(short = 'n', long, default_value = "flux-system")]
    pub namespace: String,
    /// Flux's optional controllers (image-reflector-controller, image-automation-controller,
    /// source-watcher); accepted for compatibility, Capstan adds nothing for them.
    #[arg(long, value_delimiter = ',')]
    pub components_extra: Vec<String>,
    /// Registry (and path) of the image: `<registry>/capstan:<version>`.
    #[arg(long, default_value = manifests::DEFAULT_REGISTRY)]
    pub registry: String,
    /// A Secret in the install namespace the kubelet pulls the image with.
    #[arg(long)]
    pub image_pull_secret: Option<String>,
    /// Taint keys the controller tolerates.
    #[arg(long, value_delimiter = ',')]
    pub toleration_keys: Vec<String>,
    /// Watch every namespace; `=false` makes the controller watch only the namespace it is
    /// installed in (Flux's flag).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_missing_value = "true")]
    pub watch_all_namespaces: bool,
    /// Ship Flux's NetworkPolicies.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub network_policy: bool,
    /// Reconciles of one kind at once in the controller.
    #[arg(long, default_value_t = 4)]
    pub concurrent: u16,
    /// The cluster's DNS domain.
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,
    /// Wait for the controller Deployment to be Ready.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub wait: bool,
    /// How long to wait for the Deployment.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub timeout: Duration,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    capstan_api::duration::parse_go_duration(text).map_err(|e| e.to_string())
}

impl InstallArgs {
    /// The generator's options.
    #[must_use]
    pub fn options(&self) -> Options {
        Options {
            namespace: self.namespace.clone(),
            components_extra: self.components_extra.clone(),
            registry: self.registry.clone(),
            image_pull_secret: self.image_pull_secret.clone(),
            toleration_keys: self.toleration_keys.clone(),
            watch_all_namespaces: self.watch_all_namespaces,
            concurrent: self.concurrent,
            network_policy: self.network_policy,
            cluster_domain: self.cluster_domain.clone(),
            ..Options::default()
        }
    }
}

pub async fn run(args: &InstallArgs) -> anyhow::Result<ExitCode> {
    install(args)
        .await
        .map_err(|e| crate::controller::unreachable(&e).map_or(e, anyhow::Error::msg))
}

async fn install(args: &InstallArgs) -> anyhow::Result<ExitCode> {
    let options = args.options();
    manifests::validate(&options)?;
    if let Some(note) = manifests::extra_components_note(&options) {
        eprintln!("capstan install: {note}");
    }
    if args.export {
        let yaml = manifests_yaml(&options).context("rendering the install manifests")?;
        out!("{yaml}");
        return Ok(ExitCode::SUCCESS);
    }
    capstan_source::tls::install_default_provider();
    let client =
        crate::controller::client(args.kubeconfig.as_ref(), args.context.as_deref()).await?;
    if let Some(flux) = flux::detect(&client).await? {
        anyhow::bail!(
            "refusing to install next to Flux's controllers: both would reconcile the same \
             objects\n{}",
            flux.explain().trim_end()
        );
    }
    refuse_another_installation(&client, &options.namespace, "install").await?;
    let objects = manifests(&options)?;
    apply(&client, &objects).await?;
    eprintln!(
        "capstan install: applied {} objects in namespace {}",
        objects.len(),
        options.namespace
    );
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }
    if !has_nodes(&client).await? {
        eprintln!(
            "capstan install: the cluster has no nodes (capstan dev's control plane has no \
             kubelet), so the {} Deployment cannot start; not waiting for it\nhint: capstan dev \
             runs the controllers in its own process",
            manifests::CONTROLLER
        );
        return Ok(ExitCode::SUCCESS);
    }
    wait_ready(&client, &options.namespace, args.timeout)
        .await
        .map_err(|e| anyhow::anyhow!("{e:#}; use --wait=false not to wait"))?;
    eprintln!("capstan install: {} is ready", manifests::CONTROLLER);
    Ok(ExitCode::SUCCESS)
}

/// The namespaces, other than `namespace`, where Capstan is installed: those of the Deployments
/// labelled `app.kubernetes.io/part-of: capstan` (by `capstan install` or the Helm chart), sorted.
pub async fn other_installations(
    client: &kube::Client,
    namespace: &str,
) -> anyhow::Result<Vec<String>> {
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::all(client.clone());
    let selector = format!("{}=capstan", manifests::PART_OF);
    let list = api
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .context("listing Capstan's Deployments in all namespaces")?;
    let mut found: Vec<String> = list
        .items
        .iter()
        .filter_map(|d| d.metadata.namespace.clone())
        .filter(|ns| ns != namespace)
        .collect();
    found.sort();
    found.dedup();
    Ok(found)
}

/// Refuses to `verb` (install, bootstrap) Capstan in `namespace` while it is installed in
/// another namespace: every installation's controller watches all namespaces by default, so two
/// would reconcile (and prune) the same objects, and a single-namespace one is still watched by
/// the other.
pub async fn refuse_another_installation(
    client: &kube::Client,
    namespace: &str,
    verb: &str,
) -> anyhow::Result<()> {
    let others = other_installations(client, namespace).await?;
    let Some(first) = others.first() else {
        return Ok(());
    };
    anyhow::bail!(
        "refusing to {verb} Capstan in namespace {namespace}: it is already installed in \
         namespace {} (Deployments labelled {}=capstan), and two installations would reconcile \
         the same objects\nhint: to move it, remove that installation first with `capstan \
         uninstall -n {first}` (its CRDs and Flux objects go with it unless another installation \
         remains); to upgrade it, run `capstan {verb} -n {first}`",
        others.join(", "),
        manifests::PART_OF
    );
}

/// The API resource of a generated object, from its apiVersion and kind (discovery, so that a
/// CRD applied a moment ago is found).
async fn resource(client: &kube::Client, object: &Value) -> anyhow::Result<(ApiResource, Scope)> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("finding {kind} ({api_version}) in the cluster"))?;
    Ok((resource, capabilities.scope))
}

/// Applies `objects` in order with server-side apply (field manager `capstan`, forcing
/// conflicts as `kubectl apply --server-side --force-conflicts`).
pub async fn apply(client: &kube::Client, objects: &[Value]) -> anyhow::Result<()> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let (resource, scope) = resource(client, object).await?;
        let api: Api<DynamicObject> = match (scope, object["metadata"]["namespace"].as_str()) {
            (Scope::Namespaced, Some(namespace)) => {
                Api::namespaced_with(client.clone(), namespace, &resource)
            }
            _ => Api::all_with(client.clone(), &resource),
        };
        api.patch(name, &params, &Patch::Apply(object))
            .await
            .with_context(|| format!("applying {kind} {name}"))?;
    }
    Ok(())
}

/// Whether the cluster has a node (`capstan dev` has none: nothing would ever run a Pod).
pub(crate) async fn has_nodes(client: &kube::Client) -> anyhow::Result<bool> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let list = nodes
        .list(&kube::api::ListParams::default().limit(1))
        .await
        .context("listing the cluster's nodes")?;
    Ok(!list.items.is_empty())
}

/// Waits until the controller Deployment is Current by kstatus' rules (the health checks'
/// [`capstan_apply::compute_health`]: generation observed, every replica updated, available and
/// ready).
pub(crate) async fn wait_ready(
    client: &kube::Client,
    namespace: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let api: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::from("not observed yet");
    loop {
        if let Some(deployment) = api.get_opt(manifests::CONTROLLER).await? {
            let (status, message) =
                capstan_apply::compute_health(&serde_json::to_value(&deployment)?);
            if status == capstan_apply::Status::Current {
                return Ok(());
            }
            last = message;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for Deployment {namespace}/{} to be ready \
             ({last})\nhint: kubectl -n {namespace} describe deployment {}",
            manifests::CONTROLLER,
            manifests::CONTROLLER
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Creates the tenancy objects ([`tenancy_objects`]: the namespace, the ServiceAccounts Flux's
/// multi-tenant repositories reference and the `cluster-reconciler` binding) in `capstan dev`'s
/// embedded control plane, in process, as its CRDs are created.
pub fn create_tenancy(server: &capstan_apiserver::ApiServer) -> anyhow::Result<()> {
    let cluster = server.cluster();
    let opts = capstan_apiserver::cluster::WriteOptions {
        field_manager: FIELD_MANAGER.into(),
        ..capstan_apiserver::cluster::WriteOptions::default()
    };
    for object in tenancy_objects(&Options::default()) {
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let (group, plural) = match kind.as_str() {
            "Namespace" => ("", "namespaces"),
            "ServiceAccount" => ("", "serviceaccounts"),
            "ClusterRoleBinding" => ("rbac.authorization.k8s.io", "clusterrolebindings"),
            other => anyhow::bail!("no resource known for the tenancy object kind {other}"),
        };
        let rt = cluster
            .resource(group, "v1", plural)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let namespace = object["metadata"]["namespace"].as_str().map(str::to_owned);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        cluster
            .create(&rt, namespace.as_deref(), object, &opts)
            .map_err(|e| anyhow::anyhow!("creating {kind} {name}: {e}"))?;
    }
    Ok(())
}
