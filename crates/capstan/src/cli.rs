//! Command-line interface.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Pull-based continuous delivery for Kubernetes, drop-in for Flux v2.
#[derive(Debug, Parser)]
#[command(
    name = "capstan",
    version = crate::version::VERSION_TEXT.as_str(),
    about,
    propagate_version = true
)]
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
    /// Deploy Capstan on a cluster, committed to and managed from a Git repository.
    #[command(subcommand)]
    Bootstrap(crate::bootstrap::BootstrapCommand),
    /// Remove Capstan, its custom resources and CRDs from a cluster, leaving the workloads.
    Uninstall(crate::uninstall::UninstallArgs),
    /// Check the cluster's prerequisites (`--pre`) and Capstan's installation.
    Check(crate::check::CheckArgs),
    /// Build kustomizations with Capstan's native kustomize engine.
    Kustomize(crate::kustomize::KustomizeArgs),
    /// Render Helm charts with Capstan's native Helm engine.
    Helm(crate::helm::HelmArgs),
    /// Push an artifact (a directory as a Flux OCI artifact) to a registry.
    #[command(subcommand)]
    Push(crate::artifact::PushCommand),
    /// Pull an artifact from a registry.
    #[command(subcommand)]
    Pull(crate::artifact::PullCommand),
    /// Create or update sources and Kustomizations (or print them with `--export`).
    Create(crate::cmd::create::CreateArgs),
    /// Show the status of sources and Kustomizations.
    Get(crate::cmd::get::GetArgs),
    /// Ask for an immediate reconcile and wait for it.
    Reconcile(crate::cmd::lifecycle::ReconcileArgs),
    /// Stop reconciling an object (or, with `--all`, every object of a kind).
    Suspend(crate::cmd::lifecycle::SuspendArgs),
    /// Reconcile a suspended object again and wait until it is Ready.
    Resume(crate::cmd::lifecycle::ResumeArgs),
    /// Delete a source or a Kustomization.
    Delete(crate::cmd::lifecycle::DeleteArgs),
    /// Print sources and Kustomizations as YAML, without status.
    Export(crate::cmd::get::ExportArgs),
    /// Render a Kustomization from a local directory, as the controller would.
    Build(crate::cmd::build::BuildArgs),
    /// Compare a local render of a Kustomization with the cluster (exit 1 when they differ).
    Diff(crate::cmd::build::DiffArgs),
    /// Show a Kustomization's inventory as a tree.
    Tree(crate::cmd::tree::TreeArgs),
    /// Show which Kustomization and source manage an object.
    Trace(crate::cmd::tree::TraceArgs),
    /// Show the Events of Flux objects.
    Events(crate::cmd::events::EventsArgs),
    /// Show the controllers' logs, filtered by object (`--kind`, `--name`, `--level`).
    Logs(crate::cmd::logs::LogsArgs),
    /// Substitute environment variables in stdin as a Kustomization's post-build substitution.
    Envsubst(crate::cmd::envsubst::EnvsubstArgs),
    /// Count the Flux objects of each kind: running, failing, suspended, artifact storage.
    Stats(crate::cmd::stats::StatsArgs),
    /// Move Flux objects (in files with `--path`, else in the cluster) to the served API version.
    Migrate(crate::cmd::migrate::MigrateArgs),
    /// Print the client version and, without `--client`, the controllers' version.
    Version(crate::version::VersionArgs),
    /// Print a shell completion script (`source <(capstan completion bash)`).
    Completion(crate::completion::CompletionArgs),
}

/// Moves the cluster flags given before the verb (`capstan --kubeconfig KC -n NS get ks`, as
/// `flux` accepts) to just after it, where each verb declares them. They cannot be declared on
/// [`Cli`] itself: `dev` and `controller` have their own `--kubeconfig`.
pub fn globals_after_verb(args: Vec<OsString>) -> Vec<OsString> {
    const MOVED: [&str; 4] = ["--kubeconfig", "--context", "--namespace", "-n"];
    const KEPT: [&str; 2] = ["--log-level", "--log-format"];
    let mut kept = Vec::new();
    let mut moved = Vec::new();
    let mut rest = args.into_iter();
    kept.extend(rest.next());
    while let Some(arg) = rest.next() {
        let text = arg.to_string_lossy().into_owned();
        let name = text.split_once('=').map_or(text.as_str(), |(name, _)| name);
        let attached = text.contains('=') || (text.starts_with("-n") && text.len() > 2);
        let target = if MOVED.contains(&name) || (text.starts_with("-n") && !text.starts_with("--"))
        {
            &mut moved
        } else if KEPT.contains(&name) {
            &mut kept
        } else {
            // The verb (or `--help`, `--version`): the moved flags go right after it.
            kept.push(arg);
            kept.append(&mut moved);
            kept.extend(rest);
            return kept;
        };
        target.push(arg);
        if !attached {
            target.extend(rest.next());
        }
    }
    // No verb: let clap report it, with the flags where they were given.
    kept.append(&mut moved);
    kept
}

/// Sets up `tracing` to stderr (`--log-format json`: Flux's JSON lines); under `dev`, also into
/// the log of the controllers' Pod ([`crate::logging`]).
pub fn init_logging(cli: &Cli) {
    let args = &cli.global;
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| {
        if matches!(cli.command, Command::Dev(_) | Command::Controller(_)) {
            args.log_level.clone()
        } else {
            // A one-shot command reports a failed request in its own error; kube's log line of
            // the same failure would only come first and say it twice.
            format!("{},kube_client::client::builder=off", args.log_level)
        }
    });
    crate::logging::init(
        &filter,
        matches!(args.log_format, LogFormat::Json),
        matches!(cli.command, Command::Dev(_)),
    );
}

/// Runs the chosen command.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Dev(args) => crate::dev::run(args).await,
        Command::Controller(args) => crate::controller::run(args).await,
        Command::Install(args) => crate::install::run(&args).await,
        Command::Completion(args) => Ok(crate::completion::run(&args)),
        Command::Kustomize(args) => crate::kustomize::run(&args),
        Command::Helm(args) => crate::helm::run(&args).await,
        Command::Push(command) => crate::artifact::run_push(command).await,
        Command::Pull(command) => crate::artifact::run_pull(command).await,
        Command::Diff(args) => Ok(flux_style(crate::cmd::build::diff(args).await, 2)),
        command => Ok(flux_style(run_flux_verb(command).await, 1)),
    }
}

/// The Flux-like verbs of [`crate::cmd`].
async fn run_flux_verb(command: Command) -> anyhow::Result<ExitCode> {
    use crate::cmd::lifecycle;
    match command {
        Command::Create(args) => crate::cmd::create::run(args).await,
        Command::Get(args) => crate::cmd::get::run(args).await,
        Command::Reconcile(args) => lifecycle::reconcile(args).await,
        Command::Suspend(args) => lifecycle::suspend(args).await,
        Command::Resume(args) => lifecycle::resume(args).await,
        Command::Delete(args) => lifecycle::delete(args).await,
        Command::Export(args) => crate::cmd::get::export(args).await,
        Command::Build(args) => crate::cmd::build::build(args).await,
        Command::Tree(args) => crate::cmd::tree::tree(args).await,
        Command::Trace(args) => crate::cmd::tree::trace(args).await,
        Command::Events(args) => crate::cmd::events::run(args).await,
        Command::Logs(args) => crate::cmd::logs::run(args).await,
        Command::Envsubst(args) => crate::cmd::envsubst::run(&args),
        Command::Stats(args) => crate::cmd::stats::run(args).await,
        Command::Migrate(args) => crate::cmd::migrate::run(args).await,
        Command::Version(args) => crate::version::run(args).await,
        Command::Bootstrap(command) => crate::bootstrap::run_command(command).await,
        Command::Uninstall(args) => crate::uninstall::run(args).await,
        Command::Check(args) => crate::check::run(args).await,
        other => anyhow::bail!("not a Flux verb: {other:?}"),
    }
}

/// Prints an error as Flux does (`✗ message`) and exits with `error_code` (2 for `diff`, whose
/// 1 means "differs").
fn flux_style(result: anyhow::Result<ExitCode>, error_code: u8) -> ExitCode {
    result.unwrap_or_else(|e| {
        let message = crate::controller::unreachable(&e)
            .unwrap_or_else(|| capstan_source::redact::error_chain(e.as_ref()));
        crate::cmd::say::failure(&message);
        ExitCode::from(error_code)
    })
}

/// The default location of the dev kubeconfig.
pub fn default_kubeconfig() -> PathBuf {
    PathBuf::from(".capstan").join("kubeconfig")
}

#[cfg(test)]
mod tests {
    use super::globals_after_verb;

    fn moved(args: &str) -> String {
        let args = args.split(' ').map(std::ffi::OsString::from).collect();
        let moved: Vec<String> = globals_after_verb(args)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        moved.join(" ")
    }

    #[test]
    fn cluster_flags_before_the_verb_go_right_after_it() {
        assert_eq!(
            moved("capstan --kubeconfig kc -n apps get ks"),
            "capstan get --kubeconfig kc -n apps ks"
        );
        assert_eq!(
            moved("capstan --kubeconfig=kc -napps --context=c --namespace x get ks"),
            "capstan get --kubeconfig=kc -napps --context=c --namespace x ks"
        );
        // The log flags stay before the verb (they are global), values included.
        assert_eq!(
            moved("capstan --log-level debug -n apps --log-format=json get ks -n other"),
            "capstan --log-level debug --log-format=json get -n apps ks -n other"
        );
        // Nothing to move, or no verb at all: as given.
        assert_eq!(moved("capstan get ks -n apps"), "capstan get ks -n apps");
        assert_eq!(moved("capstan -n apps"), "capstan -n apps");
        assert_eq!(moved("capstan --help"), "capstan --help");
    }
}
