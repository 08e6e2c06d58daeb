//! `capstan dev`: the embedded control plane on this machine.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use capstan_apiserver::cluster::WriteOptions;
use clap::Args;

/// The flags that turn the example fleet off: its servers' flags given with them would be
/// ignored, so clap refuses the combination (exit code 2), as it refuses the controllers' flags
/// with `--no-controllers`.
const WITHOUT_EXAMPLE: [&str; 2] = ["no_example", "no_controllers"];

/// The controllers' lockdown flags, meaningless with `--no-controllers`.
const LOCKDOWN: [&str; 3] = [
    "no_remote_bases",
    "no_cross_namespace_refs",
    "default_service_account",
];

#[derive(Debug, Args)]
pub struct DevArgs {
    /// Address to serve the Kubernetes API on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Where to write the kubeconfig for this control plane.
    #[arg(long, default_value_os_t = crate::cli::default_kubeconfig())]
    pub kubeconfig: PathBuf,
    /// Watch events kept per resource before old watches get `410 Gone`.
    #[arg(long, default_value_t = 10_000)]
    pub watch_history: usize,
    /// Directory of the artifact storage.
    #[arg(
        long,
        default_value = ".capstan/artifacts",
        conflicts_with = "no_controllers"
    )]
    pub storage_path: PathBuf,
    /// Address of the artifact, metrics and health server (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0", conflicts_with = "no_controllers")]
    pub storage_addr: SocketAddr,
    /// Address of the Receivers' webhook server (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0", conflicts_with = "no_controllers")]
    pub receiver_addr: SocketAddr,
    /// Run only the control plane, without Capstan's controllers (and without the example).
    #[arg(long, conflicts_with_all = LOCKDOWN)]
    pub no_controllers: bool,
    /// Do not serve and reconcile the example fleet.
    #[arg(long)]
    pub no_example: bool,
    /// Address of the Git server holding the example fleet (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:6444", conflicts_with_all = WITHOUT_EXAMPLE)]
    pub git_listen: SocketAddr,
    /// Directory of the Git server's repositories (the example fleet is `fleet.git` in it).
    #[arg(long, default_value = ".capstan/git", conflicts_with_all = WITHOUT_EXAMPLE)]
    pub git_root: PathBuf,
    /// Address of the OCI registry holding the example chart (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:6445", conflicts_with_all = WITHOUT_EXAMPLE)]
    pub registry_listen: SocketAddr,
    /// Directory of the OCI registry's storage.
    #[arg(long, default_value = ".capstan/registry", conflicts_with_all = WITHOUT_EXAMPLE)]
    pub registry_root: PathBuf,
    /// Reconciles of one kind running at once (Flux's `--concurrent`; 0: no limit).
    #[arg(long, default_value_t = 4, conflicts_with = "no_controllers")]
    pub concurrent: u16,
    /// The controllers' lockdown flags, as `capstan controller` takes them.
    #[command(flatten)]
    pub lockdown: crate::controller::LockdownArgs,
}

pub async fn run(args: DevArgs) -> anyhow::Result<ExitCode> {
    let config = capstan_apiserver::Config {
        listen: args.listen,
        watch_history: args.watch_history,
        ..capstan_apiserver::Config::default()
    };
    let server = capstan_apiserver::ApiServer::start(config)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {}\nhint: pick another address with --listen 127.0.0.1:0",
                args.listen
            )
        })?;
    install_crds(&server).context("installing Capstan's CustomResourceDefinitions")?;
    crate::install::create_tenancy(&server).context("creating the tenancy objects")?;
    create_flux_namespace(&server).context("creating the flux-system namespace")?;
    if let Some(dir) = args
        .kubeconfig
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        fs_err::create_dir_all(dir)?;
    }
    fs_err::write(&args.kubeconfig, server.kubeconfig())?;
    let kubeconfig = fs_err::canonicalize(&args.kubeconfig)?;
    // The controllers reach the control plane over HTTP with kube-rs, as they reach any cluster.
    let example = serve_example(&args).await?;
    let controllers = if args.no_controllers {
        None
    } else {
        crate::logging::register_dev_pod(&server).context("creating the controllers' Pod")?;
        let client = crate::controller::client(Some(&kubeconfig), None).await?;
        let serve = crate::controller::ServeArgs {
            storage_path: args.storage_path.clone(),
            storage_addr: args.storage_addr,
            receiver_addr: args.receiver_addr,
            storage_adv_addr: None,
            concurrent: args.concurrent,
            lockdown: args.lockdown.clone(),
            watch_all_namespaces: true,
            watch_namespace: None,
        };
        Some((
            crate::controller::start(client.clone(), &serve, None).await?,
            client,
        ))
    };
    eprintln!("capstan dev: Kubernetes API at {}", server.url());
    eprintln!(
        "capstan dev: kubeconfig written to {}",
        kubeconfig.display()
    );
    eprintln!(
        "capstan dev: namespace {} created (Flux's, as `flux install` leaves it)",
        crate::fleet::NAMESPACE
    );
    if let Some((c, _)) = &controllers {
        eprintln!(
            "capstan dev: artifacts, /metrics and /healthz at {}",
            c.artifacts_url
        );
        eprintln!(
            "capstan dev: Receiver webhooks at {}/hook/<digest> (a Receiver's status.webhookPath)",
            c.receiver_url
        );
    }
    let mut progress = None;
    if let (Some(example), Some((running, client))) = (&example, &controllers) {
        example.publish(client).await?;
        let path = example_receiver(client)
            .await
            .context("creating the example fleet's Receiver")?;
        eprintln!(
            "capstan dev: example Receiver {}/{}: after a push, reconcile the fleet at once with \
             curl -X POST {}{path}",
            crate::fleet::NAMESPACE,
            crate::fleet::NAME,
            running.receiver_url
        );
        progress = Some(tokio::spawn(crate::fleet::report_progress(client.clone())));
    }
    print_hints(&kubeconfig, example.as_ref());
    eprintln!("capstan dev: press Ctrl-C to stop");
    crate::controller::shutdown_signal().await?;
    eprintln!("capstan dev: stopping");
    if let Some(progress) = progress {
        progress.abort();
    }
    if let Some((c, _)) = controllers {
        c.shutdown().await;
    }
    if let Some(example) = example {
        example.git.shutdown().await;
        example.registry.shutdown().await;
    }
    server.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

/// The example's servers: the fleet's Git server and the registry holding its chart.
struct Example {
    git: crate::fleet::LocalServer,
    registry: crate::fleet::LocalServer,
}

/// Starts the example's servers, unless `--no-example`/`--no-controllers` (or without Git,
/// which the fleet's server runs).
async fn serve_example(args: &DevArgs) -> anyhow::Result<Option<Example>> {
    if args.no_controllers || args.no_example {
        return Ok(None);
    }
    if !crate::fleet::git_available() {
        eprintln!(
            "capstan dev: `git` is not installed, so the example fleet is not served \
             (install Git to get it; everything else runs)"
        );
        return Ok(None);
    }
    Ok(Some(Example {
        git: crate::fleet::serve(&args.git_root, args.git_listen).await?,
        registry: crate::fleet::serve_registry(&args.registry_root, args.registry_listen).await?,
    }))
}

impl Example {
    /// Publishes the chart to the registry, as CI would, then applies the fleet's GitRepository
    /// and root Kustomization (which passes the registry's address on).
    async fn publish(&self, client: &kube::Client) -> anyhow::Result<()> {
        let chart = crate::fleet::publish_chart(&self.registry.url)
            .await
            .context("publishing the example chart")?;
        eprintln!(
            "capstan dev: OCI registry at http://{} (on disk: {}), example chart {chart}",
            self.registry.url,
            self.registry.path.display()
        );
        crate::fleet::apply(client, &self.git.url, Some(&self.registry.url))
            .await
            .context("creating the example fleet's GitRepository and Kustomization")?;
        eprintln!(
            "capstan dev: example fleet at {} (on disk: {})",
            self.git.url,
            self.git.path.display()
        );
        Ok(())
    }
}

/// The Secret holding the example Receiver's token.
const EXAMPLE_WEBHOOK_SECRET: &str = "fleet-webhook";

/// The example fleet's Receiver: a `generic` webhook that reconciles the fleet's
/// GitRepository, named as it, with a random token in the Secret [`EXAMPLE_WEBHOOK_SECRET`]
/// (made once, kept across restarts). Returns its webhook path.
async fn example_receiver(client: &kube::Client) -> anyhow::Result<String> {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Api, Patch, PatchParams, PostParams};
    let (namespace, name) = (crate::fleet::NAMESPACE, crate::fleet::NAME);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let existing = secrets
        .get_opt(EXAMPLE_WEBHOOK_SECRET)
        .await?
        .and_then(|secret| secret.data?.remove("token"))
        .and_then(|token| String::from_utf8(token.0).ok());
    let token = if let Some(token) = existing {
        token
    } else {
        let token = capstan_controllers::receiver::random_token();
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": EXAMPLE_WEBHOOK_SECRET, "namespace": namespace},
            "stringData": {"token": token},
        }))?;
        secrets.create(&PostParams::default(), &secret).await?;
        token
    };
    let receiver = serde_json::json!({
        "apiVersion": "notification.toolkit.fluxcd.io/v1",
        "kind": "Receiver",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "type": "generic",
            "secretRef": {"name": EXAMPLE_WEBHOOK_SECRET},
            "resources": [{"kind": "GitRepository", "name": name}],
        },
    });
    Api::<capstan_api::Receiver>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply("capstan").force(),
            &Patch::Apply(&receiver),
        )
        .await?;
    Ok(capstan_controllers::receiver::webhook_path(
        &token, name, namespace,
    ))
}

/// What to run next, for the terminal.
fn print_hints(kubeconfig: &std::path::Path, example: Option<&Example>) {
    eprintln!("  export KUBECONFIG={}", kubeconfig.display());
    eprintln!("  kubectl get kustomizations,gitrepositories,helmreleases -A");
    let Some(example) = example else {
        return;
    };
    eprintln!("  git clone {} && cd fleet", example.git.url);
    eprintln!("  # edit apps/dev/kustomization.yaml, then: git commit -am 'change' && git push");
    eprintln!(
        "  # a new chart version: capstan helm package charts/hello --version 0.2.0 && \
         capstan helm push hello-0.2.0.tgz oci://{}/{} --plain-http",
        example.registry.url,
        crate::fleet::CHART_REPOSITORY
    );
    eprintln!("  # then set it in apps/helm/app-config.yaml (ref.tag), commit and push");
}

/// Creates Flux's namespace unless it is there already, example fleet or not: Flux repositories
/// and `capstan` commands (`-n flux-system` is their default) expect it.
fn create_flux_namespace(server: &capstan_apiserver::ApiServer) -> anyhow::Result<()> {
    let cluster = server.cluster();
    let rt = cluster
        .resource("", "v1", "namespaces")
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if cluster.get(&rt, None, crate::fleet::NAMESPACE).is_ok() {
        return Ok(());
    }
    let opts = WriteOptions {
        field_manager: "capstan".into(),
        ..WriteOptions::default()
    };
    let namespace = serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": crate::fleet::NAMESPACE},
    });
    cluster
        .create(&rt, None, namespace, &opts)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// Creates Capstan's CRDs in the embedded cluster.
fn install_crds(server: &capstan_apiserver::ApiServer) -> anyhow::Result<()> {
    let cluster = server.cluster();
    let rt = cluster
        .resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let opts = WriteOptions {
        field_manager: "capstan".into(),
        ..WriteOptions::default()
    };
    for crd in capstan_api::crds() {
        let body = serde_json::to_value(&crd)?;
        cluster
            .create(&rt, None, body, &opts)
            .map_err(|e| anyhow::anyhow!("{}: {e}", crd.metadata.name.unwrap_or_default()))?;
    }
    Ok(())
}
