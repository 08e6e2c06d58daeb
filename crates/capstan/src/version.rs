//! `capstan version [--client]`.

use std::process::ExitCode;

use clap::Args;

use crate::cmd::ClusterArgs;

/// The version of this binary, as `flux version` prints its own.
pub const CLIENT_VERSION: &str = concat!("v", env!("CARGO_PKG_VERSION"));

#[derive(Debug, Args)]
pub struct VersionArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Print only the client version; do not contact the cluster.
    #[arg(long)]
    pub client: bool,
}

/// Prints `capstan: vX.Y.Z` and, without `--client`, the controllers' version.
///
/// Capstan records its version in the one place it always controls: the `/version` of its
/// embedded control plane (`capstan dev`), whose `gitVersion` ends in `-capstan.X.Y.Z`. Against
/// any other cluster there is no record yet (no installed Deployments), so the controllers'
/// version is printed as `unknown` with the reason, never guessed.
pub async fn run(args: VersionArgs) -> anyhow::Result<ExitCode> {
    outln!("capstan: {CLIENT_VERSION}");
    if args.client {
        return Ok(ExitCode::SUCCESS);
    }
    let client = args.cluster.client().await?;
    let server = client
        .apiserver_version()
        .await
        .map_err(|e| anyhow::anyhow!("reading the cluster's /version: {e}"))?;
    match server.git_version.split_once("-capstan.") {
        Some((_, version)) => outln!("controllers: v{version} (embedded, capstan dev)"),
        None => outln!(
            "controllers: unknown (the cluster, Kubernetes {}, records no Capstan controller version)",
            server.git_version
        ),
    }
    Ok(ExitCode::SUCCESS)
}
