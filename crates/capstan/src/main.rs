//! `capstan`: pull-based continuous delivery for Kubernetes, drop-in for Flux v2.

mod artifact;
mod cli;
mod cmd;
mod controller;
mod dev;
mod fleet;
mod helm;
mod install;
mod kustomize;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    cli::init_logging(&cli.global);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            // The whole cause chain, each cause once, URLs without credentials.
            eprintln!("error: {}", capstan_source::redact::error_chain(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}
