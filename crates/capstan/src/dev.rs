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
    /// Run only the control plane, without Capstan's controllers (and without the example).
    #[arg(long)]
    pub no_controllers: bool,
    /// Do not serve and reconcile the example fleet.
    #[arg(long)]
    pub no_example: bool,
    /// Address of the Git server holding the example fleet (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:6444")]
    pub git_listen: SocketAddr,
    /// Directory of the Git server's repositories (the example fleet is `fleet.git` in it).
    #[arg(long, default_value = ".capstan/git")]
    pub git_root: PathBuf,
    /// Reconciles of one kind running at once (Flux's `--concurrent`; 0: no limit).
    #[arg(long, default_value_t = 4)]
    pub concurrent: u16,
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
    let example = !args.no_controllers && !args.no_example;
    let git = if !example {
        None
    } else if crate::fleet::git_available() {
        Some(crate::fleet::serve(&args.git_root, args.git_listen).await?)
    } else {
        eprintln!(
            "capstan dev: `git` is not installed, so the example fleet is not served \
             (install Git to get it; everything else runs)"
        );
        None
    };
    let controllers = if args.no_controllers {
        None
    } else {
        let client = crate::controller::client(Some(&kubeconfig), None).await?;
        let serve = crate::controller::ServeArgs {
            storage_path: args.storage_path.clone(),
            storage_addr: args.storage_addr,
            storage_adv_addr: None,
            concurrent: args.concurrent,
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
    if let Some((c, _)) = &controllers {
        eprintln!(
            "capstan dev: artifacts, /metrics and /healthz at {}",
            c.artifacts_url
        );
    }
    let mut progress = None;
    if let (Some(git), Some((_, client))) = (&git, &controllers) {
        crate::fleet::apply(client, &git.url)
            .await
            .context("creating the example fleet's GitRepository and Kustomization")?;
        eprintln!(
            "capstan dev: example fleet at {} (on disk: {})",
            git.url,
            git.path.display()
        );
        progress = Some(tokio::spawn(crate::fleet::report_progress(client.clone())));
    }
    eprintln!("  export KUBECONFIG={}", kubeconfig.display());
    eprintln!("  kubectl get kustomizations,gitrepositories -A");
    if let Some(git) = &git {
        eprintln!("  git clone {} && cd fleet", git.url);
        eprintln!(
            "  # edit apps/dev/kustomization.yaml, then: git commit -am 'change' && git push"
        );
    }
    eprintln!("capstan dev: press Ctrl-C to stop");
    crate::controller::shutdown_signal().await?;
    eprintln!("capstan dev: stopping");
    if let Some(progress) = progress {
        progress.abort();
    }
    if let Some((c, _)) = controllers {
        c.shutdown().await;
    }
    if let Some(git) = git {
        git.shutdown().await;
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
