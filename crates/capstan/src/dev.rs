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
    eprintln!("capstan dev: Kubernetes API at {}", server.url());
    eprintln!(
        "capstan dev: kubeconfig written to {}",
        kubeconfig.display()
    );
    eprintln!("  export KUBECONFIG={}", kubeconfig.display());
    eprintln!("  kubectl api-resources");
    eprintln!("capstan dev: press Ctrl-C to stop");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    eprintln!("capstan dev: stopping");
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
