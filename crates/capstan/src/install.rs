//! `capstan install`.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Print the manifests (Capstan's CustomResourceDefinitions) to stdout instead of installing.
    #[arg(long)]
    pub export: bool,
}

pub fn run(args: &InstallArgs) -> anyhow::Result<ExitCode> {
    if !args.export {
        anyhow::bail!(
            "installing into a cluster is not implemented yet\nhint: `capstan install --export | kubectl apply --server-side -f -`"
        );
    }
    let yaml = capstan_api::crds_yaml().context("rendering the CustomResourceDefinitions")?;
    out!("{yaml}");
    Ok(ExitCode::SUCCESS)
}
