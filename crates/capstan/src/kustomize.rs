//! `capstan kustomize build DIR`: the native kustomize engine on the command line.

use std::path::PathBuf;
use std::process::ExitCode;

use capstan_kustomize::{BuildOptions, LoadRestrictor};
use clap::{Args, Subcommand, ValueEnum};

/// Arguments of `capstan kustomize`.
#[derive(Debug, Args)]
pub struct KustomizeArgs {
    #[command(subcommand)]
    command: KustomizeCommand,
}

#[derive(Debug, Subcommand)]
enum KustomizeCommand {
    /// Build a kustomization directory and print the objects, as `kubectl kustomize DIR`.
    Build(BuildArgs),
}

#[derive(Debug, Args)]
struct BuildArgs {
    /// The directory holding kustomization.yaml.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Yaml)]
    output: Output,
    /// Which files kustomizations may read.
    #[arg(long = "load-restrictor", value_enum, default_value_t = Restrictor::LoadRestrictionsRootOnly)]
    load_restrictor: Restrictor,
    /// Render `helmCharts` natively (charts present under `chartHome`; never pulled).
    #[arg(long = "enable-helm")]
    enable_helm: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Output {
    Yaml,
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
#[value(rename_all = "verbatim")]
enum Restrictor {
    LoadRestrictionsRootOnly,
    LoadRestrictionsNone,
}

/// Runs `capstan kustomize …`: objects to stdout, errors to stderr with a non-zero exit.
pub fn run(args: &KustomizeArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        KustomizeCommand::Build(build) => {
            let options = BuildOptions {
                load_restrictor: match build.load_restrictor {
                    Restrictor::LoadRestrictionsRootOnly => LoadRestrictor::RootOnly,
                    Restrictor::LoadRestrictionsNone => LoadRestrictor::None,
                },
                enable_helm: build.enable_helm,
                ..BuildOptions::default()
            };
            match capstan_kustomize::build(&build.dir, &options) {
                Ok(objects) => {
                    let text = match build.output {
                        Output::Yaml => capstan_kustomize::to_yaml(&objects),
                        Output::Json => {
                            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
                            let mut text = serde_json::to_string_pretty(&list)?;
                            text.push('\n');
                            text
                        }
                    };
                    out!("{text}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => {
                    eprintln!("error: {error}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}
