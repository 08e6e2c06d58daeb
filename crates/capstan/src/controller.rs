//! `capstan controller`: the operator — source reconcilers, the artifact server, metrics and health.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use capstan_controllers::leader::{LeaderElectionConfig, LeaderElector};
use capstan_controllers::runtime::{self, Health, Metrics, RuntimeConfig};
use capstan_source::storage::Storage;
use clap::Args;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Kubeconfig to use; in-cluster configuration or `$KUBECONFIG` when absent.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    #[command(flatten)]
    pub serve: ServeArgs,
    #[command(flatten)]
    pub election: ElectionArgs,
}

/// Leader election, so that of several replicas one reconciles (Flux's flags).
#[derive(Clone, Debug, Args)]
pub struct ElectionArgs {
    /// Elect a leader with a Lease before reconciling.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub enable_leader_election: bool,
    /// Namespace of the Lease (default: `$RUNTIME_NAMESPACE`, else `flux-system`).
    #[arg(long, env = "RUNTIME_NAMESPACE", default_value = "flux-system")]
    pub leader_election_namespace: String,
    /// Name of the Lease.
    #[arg(long, default_value = "capstan-leader-election")]
    pub leader_election_name: String,
    /// How long a Lease is valid after its last renewal.
    #[arg(long, default_value = "35s", value_parser = parse_duration)]
    pub leader_election_lease_duration: std::time::Duration,
    /// How long the leader keeps trying to renew before it gives up.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub leader_election_renew_deadline: std::time::Duration,
    /// Time between attempts to acquire or renew the Lease.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub leader_election_retry_period: std::time::Duration,
}

impl ElectionArgs {
    fn config(&self) -> Option<LeaderElectionConfig> {
        self.enable_leader_election.then(|| LeaderElectionConfig {
            lease_duration: self.leader_election_lease_duration,
            renew_deadline: self.leader_election_renew_deadline,
            retry_period: self.leader_election_retry_period,
            ..LeaderElectionConfig::new(
                self.leader_election_namespace.clone(),
                self.leader_election_name.clone(),
            )
        })
    }
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    capstan_api::duration::parse_go_duration(text).map_err(|e| e.to_string())
}

/// Where artifacts live and how they are served.
#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Directory of the artifact storage.
    #[arg(long, default_value = "/data")]
    pub storage_path: PathBuf,
    /// Address the artifact, metrics and health server listens on.
    #[arg(long, default_value = "0.0.0.0:9090")]
    pub storage_addr: SocketAddr,
    /// Host:port written into artifact URLs (defaults to the listen address).
    #[arg(long)]
    pub storage_adv_addr: Option<String>,
    /// Reconciles of one kind running at once.
    #[arg(long, default_value_t = 4)]
    pub concurrent: u16,
}

/// The running controllers.
pub struct Running {
    /// Where artifacts are served (`http://…`).
    pub artifacts_url: String,
    /// Cancelled when leadership is lost (the reconcilers have stopped).
    pub leadership_lost: CancellationToken,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops the controllers and the server, waiting for reconciles in flight.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Starts the artifact/metrics server at once and the controllers once this process leads
/// (at once without `election`).
pub async fn start(
    client: kube::Client,
    args: &ServeArgs,
    election: Option<LeaderElectionConfig>,
) -> anyhow::Result<Running> {
    capstan_source::tls::install_default_provider();
    fs_err::create_dir_all(&args.storage_path)?;
    let listener = tokio::net::TcpListener::bind(args.storage_addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.storage_addr))?;
    let address = listener.local_addr()?;
    let advertised = args
        .storage_adv_addr
        .clone()
        .unwrap_or_else(|| address.to_string());
    let storage = Storage::new(&args.storage_path, &advertised).with_context(|| {
        format!(
            "opening the artifact storage {}",
            args.storage_path.display()
        )
    })?;
    let metrics = Metrics::new();
    let health = Health::default();
    let app = storage
        .router()
        .merge(runtime::router(metrics.clone(), health.clone()));
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let server = tokio::spawn(async move {
        let serve = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await });
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "artifact server stopped");
        }
    });
    let config = RuntimeConfig {
        concurrency: args.concurrent,
        ..RuntimeConfig::default()
    };
    let leadership_lost = CancellationToken::new();
    let lost = leadership_lost.clone();
    let stop = shutdown.clone();
    let controllers = tokio::spawn(async move {
        let leadership = match election {
            Some(election) => {
                let elector = LeaderElector::new(client.clone(), election);
                match elector.acquire(&stop).await {
                    Some(leadership) => Some(leadership),
                    None => return,
                }
            }
            None => None,
        };
        if let Some(leadership) = &leadership {
            let (on_loss, stop, lost) = (leadership.lost(), stop.clone(), lost.clone());
            tokio::spawn(async move {
                on_loss.cancelled().await;
                lost.cancel();
                stop.cancel();
            });
        }
        tokio::join!(
            capstan_controllers::git_repository::run(
                client.clone(),
                storage.clone(),
                metrics.clone(),
                config.clone(),
                health.clone(),
                stop.clone(),
            ),
            capstan_controllers::oci_repository::run(
                client.clone(),
                storage.clone(),
                metrics.clone(),
                config.clone(),
                health.clone(),
                stop.clone(),
            ),
            capstan_controllers::bucket::run(
                client.clone(),
                storage,
                metrics.clone(),
                config.clone(),
                health.clone(),
                stop.clone(),
            ),
            capstan_controllers::kustomization::run(client, metrics, config, health, stop.clone()),
        );
        if let Some(leadership) = leadership {
            leadership.release().await;
        }
    });
    tracing::info!(%address, advertised, "artifact server and controllers started");
    Ok(Running {
        artifacts_url: format!("http://{advertised}"),
        leadership_lost,
        shutdown,
        tasks: vec![server, controllers],
    })
}

/// A kube client from a kubeconfig path and context, or the default configuration.
pub async fn client(
    kubeconfig: Option<&PathBuf>,
    context: Option<&str>,
) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &options).await?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer()
            .await
            .context("no kubeconfig and not in a cluster\nhint: pass --kubeconfig")?,
    };
    Ok(kube::Client::try_from(config)?)
}

pub async fn run(args: ControllerArgs) -> anyhow::Result<ExitCode> {
    capstan_source::tls::install_default_provider();
    let client = client(args.kubeconfig.as_ref(), args.context.as_deref()).await?;
    let running = start(client, &args.serve, args.election.config()).await?;
    eprintln!(
        "capstan controller: artifacts served at {}",
        running.artifacts_url
    );
    let lost = running.leadership_lost.clone();
    tokio::select! {
        signal = tokio::signal::ctrl_c() => signal.context("waiting for Ctrl-C")?,
        () = lost.cancelled() => {}
    }
    let code = if lost.is_cancelled() {
        eprintln!("capstan controller: leadership lost, stopping");
        ExitCode::FAILURE
    } else {
        eprintln!("capstan controller: stopping");
        ExitCode::SUCCESS
    };
    running.shutdown().await;
    Ok(code)
}
