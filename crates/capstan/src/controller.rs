//! `capstan controller`: the operator — source reconcilers, the artifact server, metrics and health.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use capstan_controllers::leader::LeaderElectionConfig;
use capstan_controllers::receiver::server::{ReceiverOptions, ReceiverServer};
use capstan_controllers::runtime::controllers::Led;
use capstan_controllers::runtime::{Controllers, RuntimeConfig};
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
    fn config(&self) -> anyhow::Result<Option<LeaderElectionConfig>> {
        if !self.enable_leader_election {
            return Ok(None);
        }
        let (lease, renew, retry) = (
            self.leader_election_lease_duration,
            self.leader_election_renew_deadline,
            self.leader_election_retry_period,
        );
        anyhow::ensure!(
            lease > renew && renew > retry,
            "leader election needs --leader-election-lease-duration ({lease:?}) > \
             --leader-election-renew-deadline ({renew:?}) > --leader-election-retry-period ({retry:?})"
        );
        Ok(Some(LeaderElectionConfig {
            lease_duration: self.leader_election_lease_duration,
            renew_deadline: self.leader_election_renew_deadline,
            retry_period: self.leader_election_retry_period,
            ..LeaderElectionConfig::new(
                self.leader_election_namespace.clone(),
                self.leader_election_name.clone(),
            )
        }))
    }
}

/// Waits for Ctrl-C (SIGINT) or SIGTERM (what Kubernetes sends to stop a pod).
pub async fn shutdown_signal() -> anyhow::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listening for SIGTERM")?;
    tokio::select! {
        signal = tokio::signal::ctrl_c() => signal.context("waiting for Ctrl-C")?,
        _ = terminate.recv() => {}
    }
    Ok(())
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    capstan_api::duration::parse_go_duration(text).map_err(|e| e.to_string())
}

/// Flux's multi-tenancy lockdown flags, shared by `capstan controller` and `capstan dev`.
#[derive(Clone, Debug, Default, Args)]
pub struct LockdownArgs {
    /// Refuse remote bases (Git URLs under `resources:` of a kustomization) in Kustomization
    /// builds; the build fails naming the kustomization file and the entry (Flux's flag).
    #[arg(long)]
    pub no_remote_bases: bool,
    /// Refuse a Kustomization's or HelmRelease's source reference into another namespace
    /// (`Ready=False`, reason `AccessDenied`; Flux's flag).
    #[arg(long)]
    pub no_cross_namespace_refs: bool,
    /// The ServiceAccount (of the object's namespace) Kustomizations and HelmReleases
    /// impersonate when their `spec.serviceAccountName` is empty (Flux's flag).
    #[arg(long, value_name = "NAME")]
    pub default_service_account: Option<String>,
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
    /// Address the Receivers' webhook server listens on (`POST /hook/<digest>`; Flux's port).
    #[arg(long, default_value = "0.0.0.0:9292")]
    pub receiver_addr: SocketAddr,
    /// Reconciles of one kind running at once (Flux's `--concurrent`; 0: no limit).
    #[arg(long, default_value_t = 4)]
    pub concurrent: u16,
    /// Flux's multi-tenancy lockdown flags.
    #[command(flatten)]
    pub lockdown: LockdownArgs,
    /// Watch the objects of every namespace; `=false` watches only the namespace the
    /// controller runs in (`--watch-namespace`, default `$RUNTIME_NAMESPACE`), as Flux's flag.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_missing_value = "true")]
    pub watch_all_namespaces: bool,
    /// The namespace watched with `--watch-all-namespaces=false` (Flux reads
    /// `$RUNTIME_NAMESPACE` only; this flag is Capstan's, for runs outside a Pod).
    #[arg(long, env = "RUNTIME_NAMESPACE", value_name = "NAMESPACE")]
    pub watch_namespace: Option<String>,
}

impl ServeArgs {
    /// The one namespace watched, if not all.
    ///
    /// # Errors
    /// `--watch-all-namespaces=false` without a namespace to watch.
    pub fn watched_namespace(&self) -> anyhow::Result<Option<String>> {
        if self.watch_all_namespaces {
            return Ok(None);
        }
        match self.watch_namespace.as_deref() {
            Some(namespace) if !namespace.is_empty() => Ok(Some(namespace.to_owned())),
            _ => anyhow::bail!(
                "--watch-all-namespaces=false needs the namespace to watch: set RUNTIME_NAMESPACE \
                 (the Pod's namespace, as capstan install does) or pass --watch-namespace"
            ),
        }
    }
}

/// The running controllers.
pub struct Running {
    /// Where artifacts are served (`http://…`).
    pub artifacts_url: String,
    /// Where the Receivers' webhooks are served (`http://<receiver-addr>`).
    pub receiver_url: String,
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
    // Checkouts, pulls and extractions a killed process left behind.
    for stale in capstan_source::temp::sweep_stale() {
        tracing::info!(path = %stale.display(), "removed a stale temporary directory");
    }
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
    let config = RuntimeConfig {
        concurrency: args.concurrent,
        no_remote_bases: args.lockdown.no_remote_bases,
        no_cross_namespace_refs: args.lockdown.no_cross_namespace_refs,
        default_service_account: args.lockdown.default_service_account.clone(),
        watch_namespace: args.watched_namespace()?,
        ..RuntimeConfig::default()
    };
    if let Some(namespace) = &config.watch_namespace {
        tracing::info!(%namespace, "watching one namespace (--watch-all-namespaces=false)");
    }
    let receivers = tokio::net::TcpListener::bind(args.receiver_addr)
        .await
        .with_context(|| format!("cannot listen on {} (--receiver-addr)", args.receiver_addr))?;
    let receiver_address = receivers.local_addr()?;
    let receiver_server =
        ReceiverServer::new(client.clone(), ReceiverOptions::from_runtime(&config));
    let controllers = capstan_controllers::controllers(client, &storage, config);
    let app = controllers.router();
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    let server = tokio::spawn(async move {
        let serve = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await });
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "artifact server stopped");
        }
    });
    // Every replica serves webhooks (they only annotate objects), as Flux's receiver server.
    let stop = shutdown.clone();
    let receiver_server = tokio::spawn(async move {
        if let Err(e) = receiver_server.serve(receivers, stop).await {
            tracing::error!(error = %e, "receiver server stopped");
        }
    });
    if election.is_some() {
        // A standby replica is healthy and ready: it serves and waits for the Lease. Without
        // this, a rolling update could never make its new pod Ready while the old one leads.
        controllers.health().set_ready(true);
    }
    let controllers = tokio::spawn(lead_and_run(controllers, shutdown.clone(), election));
    tracing::info!(%address, advertised, "artifact server and controllers started");
    tracing::info!(address = %receiver_address, "receiver server started");
    Ok(Running {
        artifacts_url: format!("http://{advertised}"),
        receiver_url: format!("http://{receiver_address}"),
        shutdown,
        tasks: vec![server, receiver_server, controllers],
    })
}

/// Runs the controllers while this replica leads (at once without `election`) until `stop`; a
/// lost Lease stops them at once and ends the process: its replacement competes again.
async fn lead_and_run(
    controllers: Controllers,
    stop: CancellationToken,
    election: Option<LeaderElectionConfig>,
) {
    if controllers.lead(election, stop).await == Led::LeaseLost {
        eprintln!("capstan controller: leadership lost, exiting");
        std::process::exit(1);
    }
}

/// A kube client from a kubeconfig path and context, or the default configuration.
pub async fn client(
    kubeconfig: Option<&PathBuf>,
    context: Option<&str>,
) -> anyhow::Result<kube::Client> {
    // The error and its causes on one line, each cause once (kube's errors often repeat
    // their source in their own message).
    use capstan_source::redact::error_chain as causes;
    const HINT: &str =
        "hint: pass --kubeconfig, or export KUBECONFIG=.capstan/kubeconfig for capstan dev";
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| {
                anyhow::anyhow!("reading kubeconfig {}: {}", path.display(), causes(&e))
            })?;
            kube::Config::from_custom_kubeconfig(file, &options).await?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| anyhow::anyhow!("reading the kubeconfig: {}\n{HINT}", causes(&e)))?,
        None => kube::Config::infer().await.map_err(|e| {
            anyhow::anyhow!("no kubeconfig and not in a cluster: {}\n{HINT}", causes(&e))
        })?,
    };
    let url = capstan_source::redact::url(&config.cluster_url.to_string());
    let _ = CLUSTER_URL.set(url.trim_end_matches('/').to_owned());
    Ok(kube::Client::try_from(config)?)
}

/// The API server URL of the first client [`client`] built (without credentials).
static CLUSTER_URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// An error caused by the API server being out of reach (a Kubernetes request whose connection
/// was refused, timed out, found no route or no address), in one line: `cannot reach the
/// cluster at <url>: connection refused`. `None` for any other error.
#[must_use]
pub fn unreachable(error: &anyhow::Error) -> Option<String> {
    use std::io::ErrorKind;
    let mut kube = false;
    let mut reason = None;
    let mut dns = false;
    for cause in error.chain() {
        kube |= cause.downcast_ref::<kube::Error>().is_some();
        dns |= cause.to_string().starts_with("dns error");
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            reason = reason.or(match io.kind() {
                ErrorKind::ConnectionRefused => Some("connection refused"),
                ErrorKind::TimedOut => Some("connection timed out"),
                ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable => {
                    Some("no route to host")
                }
                _ if dns => Some("its host name does not resolve"),
                _ => None,
            });
        }
    }
    let reason = reason.filter(|_| kube)?;
    Some(match CLUSTER_URL.get() {
        Some(url) => format!("cannot reach the cluster at {url}: {reason}"),
        None => format!("cannot reach the cluster: {reason}"),
    })
}

pub async fn run(args: ControllerArgs) -> anyhow::Result<ExitCode> {
    capstan_source::tls::install_default_provider();
    let client = client(args.kubeconfig.as_ref(), args.context.as_deref()).await?;
    let election = args.election.config()?;
    let running = start(client, &args.serve, election).await?;
    eprintln!(
        "capstan controller: artifacts served at {}",
        running.artifacts_url
    );
    eprintln!(
        "capstan controller: receiver webhooks served at {}",
        running.receiver_url
    );
    shutdown_signal().await?;
    eprintln!("capstan controller: stopping");
    running.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        election: super::ElectionArgs,
        #[command(flatten)]
        serve: super::ServeArgs,
    }

    #[test]
    fn one_namespace_is_watched_only_with_watch_all_namespaces_false() {
        let parse = |args: &[&str]| {
            let mut all = vec!["capstan"];
            all.extend_from_slice(args);
            Flags::parse_from(all).serve
        };
        let all = parse(&["--watch-namespace", "flux-system"]);
        assert_eq!(all.watched_namespace().unwrap(), None, "all by default");
        assert_eq!(
            parse(&["--watch-all-namespaces", "--watch-namespace", "a"])
                .watched_namespace()
                .unwrap(),
            None,
            "a bare flag is true, as in Flux's manifests"
        );
        let mut one = parse(&["--watch-all-namespaces=false", "--watch-namespace", "a"]);
        assert_eq!(one.watched_namespace().unwrap().as_deref(), Some("a"));
        one.watch_namespace = None;
        let error = one.watched_namespace().unwrap_err().to_string();
        assert!(error.contains("RUNTIME_NAMESPACE"), "{error}");
    }

    #[test]
    fn leader_election_timings_must_nest() {
        let parse = |args: &[&str]| {
            let mut all = vec!["capstan"];
            all.extend_from_slice(args);
            Flags::parse_from(all).election.config()
        };
        let config = parse(&[]).unwrap().expect("on by default");
        assert_eq!(config.name, "capstan-leader-election");
        assert_eq!(config.lease_duration, std::time::Duration::from_secs(35));
        assert!(
            parse(&["--enable-leader-election=false"])
                .unwrap()
                .is_none()
        );
        let error = parse(&["--leader-election-renew-deadline", "40s"]).unwrap_err();
        assert!(error.to_string().contains("lease-duration"), "{error}");
        assert!(parse(&["--leader-election-retry-period", "30s"]).is_err());
    }
}
