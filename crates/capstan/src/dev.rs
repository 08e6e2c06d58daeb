//! `capstan dev`: the embedded control plane on this machine.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use capstan_apiserver::cluster::WriteOptions;
use clap::Args;

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
    #[arg(long, default_value = ".capstan/artifacts")]
    pub storage_path: PathBuf,
    /// Address of the artifact, metrics and health server (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub storage_addr: SocketAddr,
    /// Run only the control plane, without Capstan's controllers.
    #[arg(long)]
    pub no_controllers: bool,
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
    let controllers = if args.no_controllers {
        None
    } else {
        let client = crate::controller::client(Some(&kubeconfig), None).await?;
        let serve = crate::controller::ServeArgs {
            storage_path: args.storage_path.clone(),
            storage_addr: args.storage_addr,
            storage_adv_addr: None,
            concurrent: 4,
        };
        Some(crate::controller::start(client, &serve).await?)
    };
    eprintln!("capstan dev: Kubernetes API at {}", server.url());
    eprintln!(
        "capstan dev: kubeconfig written to {}",
        kubeconfig.display()
    );
    if let Some(c) = &controllers {
        eprintln!(
            "capstan dev: artifacts, /metrics and /healthz at {}",
            c.artifacts_url
        );
    }
    eprintln!("  export KUBECONFIG={}", kubeconfig.display());
    eprintln!("  kubectl api-resources");
    eprintln!("capstan dev: press Ctrl-C to stop");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    eprintln!("capstan dev: stopping");
    if let Some(c) = controllers {
        c.shutdown().await;
    }
    server.shutdown().await;
    Ok(ExitCode::SUCCESS)
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
