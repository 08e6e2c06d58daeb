//! Command-line interface.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Pull-based continuous delivery for Kubernetes, drop-in for Flux v2.
#[derive(Debug, Parser)]
#[command(name = "capstan", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Log level filter (`info`, `debug`, `capstan_apiserver=debug`, ...); also RUST_LOG.
    #[arg(long, global = true, env = "CAPSTAN_LOG", default_value = "info")]
    pub log_level: String,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the embedded Kubernetes-API-compatible control plane and the controllers on this machine.
    Dev(crate::dev::DevArgs),
    /// Run the controllers against a cluster (the operator).
    Controller(crate::controller::ControllerArgs),
    /// Install Capstan into a cluster, or print what would be installed.
    Install(crate::install::InstallArgs),
    /// Build kustomizations with Capstan's native kustomize engine.
    Kustomize(crate::kustomize::KustomizeArgs),
    /// Push an artifact (a directory as a Flux OCI artifact) to a registry.
    #[command(subcommand)]
    Push(crate::artifact::PushCommand),
    /// Pull an artifact from a registry.
    #[command(subcommand)]
    Pull(crate::artifact::PullCommand),
}

/// Sets up `tracing` to stderr.
pub fn init_logging(args: &GlobalArgs) {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| args.log_level.clone());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Runs the chosen command.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Dev(args) => crate::dev::run(args).await,
        Command::Controller(args) => crate::controller::run(args).await,
        Command::Install(args) => crate::install::run(&args),
        Command::Kustomize(args) => crate::kustomize::run(&args),
        Command::Push(command) => crate::artifact::run_push(command).await,
        Command::Pull(command) => crate::artifact::run_pull(command).await,
    }
}

/// The default location of the dev kubeconfig.
pub fn default_kubeconfig() -> PathBuf {
    PathBuf::from(".capstan").join("kubeconfig")
}
