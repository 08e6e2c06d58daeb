//! `capstan helm template [RELEASE] CHART`: the native Helm engine on the command line, with
//! `helm template`'s flags, output and error form.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use capstan_helm::output::{PrintOptions, Template, ValueSource};
use capstan_helm::template::Env;
use clap::{Args, Subcommand};

/// Arguments of `capstan helm`.
#[derive(Debug, Args)]
pub struct HelmArgs {
    #[command(subcommand)]
    command: HelmCommand,
}

#[derive(Debug, Subcommand)]
enum HelmCommand {
    /// Render a chart locally and print the manifests, as `helm template`.
    Template(TemplateArgs),
}

#[derive(Debug, Args)]
#[allow(clippy::struct_field_names)]
struct TemplateArgs {
    /// `[RELEASE] CHART`: the release name (default `release-name`) and the chart, a
    /// directory or a `.tgz` archive.
    #[arg(required = true, num_args = 1..=2, value_name = "[RELEASE] CHART")]
    args: Vec<String>,
    /// Namespace of the release (`.Release.Namespace`).
    #[arg(short = 'n', long, default_value = "default")]
    namespace: String,
    /// Values files, merged in order (may be given several times or comma-separated).
    #[arg(short = 'f', long = "values", value_delimiter = ',')]
    values: Vec<PathBuf>,
    /// Values on the command line (`a.b=1,c[0]=x`).
    #[arg(long = "set")]
    set: Vec<String>,
    /// String values on the command line.
    #[arg(long = "set-string")]
    set_string: Vec<String>,
    /// Values read from files (`key=path`).
    #[arg(long = "set-file")]
    set_file: Vec<String>,
    /// JSON values (`key=json`, or a whole JSON object).
    #[arg(long = "set-json")]
    set_json: Vec<String>,
    /// A literal string value (`key=value`, nothing parsed in the value).
    #[arg(long = "set-literal")]
    set_literal: Vec<String>,
    /// Print the chart's `crds/` files before the manifests.
    #[arg(long)]
    include_crds: bool,
    /// Accepted for Helm compatibility: `helm template` never installs CRDs.
    #[arg(long)]
    skip_crds: bool,
    /// Leave test hooks out.
    #[arg(long)]
    skip_tests: bool,
    /// Leave every hook out.
    #[arg(long)]
    no_hooks: bool,
    /// Set `.Release.IsUpgrade` instead of `.Release.IsInstall`.
    #[arg(long)]
    is_upgrade: bool,
    /// Kubernetes version for `.Capabilities.KubeVersion` (default v1.36.0).
    #[arg(long)]
    kube_version: Option<String>,
    /// Extra `.Capabilities.APIVersions` (`group/version` or `group/version/Kind`).
    #[arg(short = 'a', long = "api-versions", value_delimiter = ',')]
    api_versions: Vec<String>,
    /// Only print the manifests of these templates (globs on the path in the chart).
    #[arg(short = 's', long = "show-only")]
    show_only: Vec<String>,
    /// A Go template (with Sprig) naming the release.
    #[arg(long)]
    name_template: Option<String>,
    /// Accepted for Helm compatibility: only changes `--output-dir` paths in Helm.
    #[arg(long)]
    release_name: bool,
    /// On a failed render, print the rendered templates before the error.
    #[arg(long)]
    debug: bool,
}

impl TemplateArgs {
    fn template(&self) -> Template {
        let mut values: Vec<ValueSource> =
            self.values.iter().cloned().map(ValueSource::File).collect();
        values.extend(self.set.iter().cloned().map(ValueSource::Set));
        values.extend(self.set_string.iter().cloned().map(ValueSource::SetString));
        values.extend(self.set_json.iter().cloned().map(ValueSource::SetJson));
        values.extend(self.set_file.iter().cloned().map(ValueSource::SetFile));
        values.extend(
            self.set_literal
                .iter()
                .cloned()
                .map(ValueSource::SetLiteral),
        );
        Template {
            args: self.args.clone(),
            namespace: Some(self.namespace.clone()),
            values,
            name_template: self.name_template.clone(),
            is_upgrade: self.is_upgrade,
            kube_version: self.kube_version.clone(),
            api_versions: self.api_versions.clone(),
            print: PrintOptions {
                include_crds: self.include_crds,
                skip_tests: self.skip_tests,
                no_hooks: self.no_hooks,
                show_only: self.show_only.clone(),
            },
            skip_crds: self.skip_crds,
            debug: self.debug,
        }
    }
}

/// Runs `capstan helm …`: manifests to stdout; errors to stderr as Helm prints them
/// (`Error: …`), exit 1.
pub fn run(args: &HelmArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        HelmCommand::Template(template) => {
            let cwd = std::env::current_dir()?;
            let result = template.template().execute(&cwd, &mut Env::new());
            let mut stdout = std::io::stdout().lock();
            match result {
                Ok(rendered) => {
                    stdout.write_all(rendered.stdout.as_bytes())?;
                    stdout.flush()?;
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => {
                    stdout.write_all(error.output.as_bytes())?;
                    stdout.flush()?;
                    eprintln!("Error: {}", error.message);
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}
