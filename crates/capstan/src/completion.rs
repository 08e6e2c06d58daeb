//! `capstan completion bash|zsh|fish`: a shell completion script on stdout, as `flux completion`.

use std::process::ExitCode;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Prints the completion script for every verb and flag of `capstan`.
pub fn run(args: &CompletionArgs) -> ExitCode {
    let mut command = crate::cli::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "capstan", &mut script);
    out!("{}", String::from_utf8_lossy(&script));
    ExitCode::SUCCESS
}
