//! `capstan`: pull-based continuous delivery for Kubernetes, drop-in for Flux v2.

/// `print!` to stdout through [`write_stdout`]: a closed pipe ends the process quietly.
macro_rules! out {
    ($($arg:tt)*) => { $crate::write_stdout(format_args!($($arg)*)) };
}

/// `println!` to stdout through [`write_stdout`]: a closed pipe ends the process quietly.
macro_rules! outln {
    () => { $crate::write_stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::write_stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

mod artifact;
mod bootstrap;
mod check;
mod cli;
mod cmd;
mod completion;
mod controller;
mod dev;
mod fleet;
mod helm;
mod install;
mod kustomize;
mod logging;
mod uninstall;
mod version;

use std::process::ExitCode;

use clap::Parser;

/// Writes to stdout. When the reader has gone (`capstan get ks -o yaml | head -1`), the process
/// ends quietly with status 0, as a filter in a pipeline should; `print!` would panic (101).
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("error: writing to stdout: {e}");
            std::process::exit(1);
        }
    }
}

fn main() -> ExitCode {
    // Started as a GitRepository fetch's `ssh` link: run the OpenSSH client, no shell needed.
    if let Some(code) = capstan_source::git::ssh_wrapper_main() {
        return code;
    }
    capstan_source::git::use_current_exe_as_ssh();
    let cli = cli::Cli::parse_from(cli::globals_after_verb(std::env::args_os().collect()));
    cli::init_logging(&cli);
    let without_runtime = match &cli.command {
        cli::Command::Helm(args) => helm::run_without_runtime(args),
        _ => None,
    };
    if let Some(result) = without_runtime {
        return exit_code(result);
    }
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
    exit_code(runtime.block_on(cli::run(cli)))
}

/// A command's exit status; its error, if any, on stderr.
fn exit_code(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            // The whole cause chain, each cause once, URLs without credentials.
            eprintln!("error: {}", capstan_source::redact::error_chain(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}
