//! `capstan envsubst`: the Kustomization post-build substitution applied to standard input with
//! the process's environment as the variables, as `flux envsubst` does (`kustomize build . |
//! capstan envsubst`). The engine is the controller's
//! ([`capstan_controllers::kustomization::render::substitute`]), so what this prints is what a
//! Kustomization's `postBuild.substitute` would make of the same text.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::ExitCode;

use anyhow::Context;
use capstan_controllers::kustomization::render::{substitute, substitute_strict};
use clap::Args;

/// `capstan envsubst [--strict]`.
#[derive(Clone, Debug, Args)]
pub struct EnvsubstArgs {
    /// Fail if a variable without a default value is declared in the input but is missing from
    /// the environment.
    #[arg(long)]
    pub strict: bool,
}

/// Reads stdin line by line and writes each line substituted to stdout (as Flux does, line by
/// line: an expression never spans lines).
pub fn run(args: &EnvsubstArgs) -> anyhow::Result<ExitCode> {
    let variables: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .collect();
    let stdin = std::io::stdin().lock();
    for (number, line) in stdin.lines().enumerate() {
        let line = line.context("reading standard input")?;
        let substituted = if args.strict {
            substitute_strict(&line, &variables)
        } else {
            substitute(&line, &variables)
        }
        .with_context(|| format!("line {}", number + 1))?;
        outln!("{substituted}");
    }
    Ok(ExitCode::SUCCESS)
}
