//! `capstan helm template [RELEASE] CHART`: the native Helm engine on the command line, with
//! `helm template`'s flags, output and error form.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use capstan_helm::chart::package;
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
    /// Package a chart directory into a versioned chart archive, as `helm package`.
    Package(PackageArgs),
    /// Push a chart archive to an OCI registry, as `helm push`.
    Push(PushArgs),
}

#[derive(Args)]
struct PushArgs {
    /// The chart archive (`.tgz`).
    #[arg(value_name = "CHART")]
    chart: PathBuf,
    /// The repository root, `oci://HOST/PATH`; the chart goes to `<remote>/<name>:<version>`.
    #[arg(value_name = "REMOTE")]
    remote: String,
    /// Use insecure HTTP connections for the chart upload.
    #[arg(long = "plain-http")]
    plain_http: bool,
    /// Chart repository username.
    #[arg(long, requires = "password")]
    username: Option<String>,
    /// Chart repository password.
    #[arg(long, requires = "username")]
    password: Option<String>,
    /// Verify certificates of HTTPS-enabled servers using this CA bundle.
    #[arg(long = "ca-file")]
    ca_file: Option<PathBuf>,
    /// Skip TLS certificate checks for the chart upload.
    #[arg(long = "insecure-skip-tls-verify")]
    insecure_skip_tls_verify: bool,
    /// Path to the registry config file (`helm registry login`'s; default
    /// `$HELM_REGISTRY_CONFIG` or `~/.config/helm/registry/config.json`), read for the remote's
    /// host when no `--username` is given.
    #[arg(long = "registry-config", value_name = "PATH")]
    registry_config: Option<PathBuf>,
}

/// Written by hand so that a `--password` never reaches a log or a panic message.
impl std::fmt::Debug for PushArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushArgs")
            .field("chart", &self.chart)
            .field("remote", &capstan_source::redact::url(&self.remote))
            .field("plain_http", &self.plain_http)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("ca_file", &self.ca_file)
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .field("registry_config", &self.registry_config)
            .finish()
    }
}

impl PushArgs {
    /// `helm push`: `Pushed: <reference>` and `Digest: <manifest digest>` on stdout.
    async fn run(&self) -> anyhow::Result<ExitCode> {
        match self.push().await {
            Ok(pushed) => {
                outln!("Pushed: {}", pushed.reference);
                outln!("Digest: {}", pushed.digest);
                Ok(ExitCode::SUCCESS)
            }
            Err(message) => {
                eprintln!("Error: {message}");
                Ok(ExitCode::FAILURE)
            }
        }
    }

    async fn push(&self) -> Result<capstan_source::helm::oci::PushedChart, String> {
        if !self.remote.starts_with(capstan_source::oci::URL_SCHEME) {
            return Err(format!(
                "scheme prefix missing from remote (e.g. \"{}\")",
                capstan_source::oci::URL_SCHEME
            ));
        }
        let chart = &self.chart;
        let meta = std::fs::metadata(chart).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("{}: no such file", chart.display()),
            _ => format!("{}: {e}", chart.display()),
        })?;
        if meta.is_dir() {
            return Err("cannot push directory, must provide chart archive (.tgz)".to_owned());
        }
        let bytes = std::fs::read(chart).map_err(|e| format!("{}: {e}", chart.display()))?;
        // Helm's `created` annotation: the time the archive was last written.
        let created = meta
            .modified()
            .ok()
            .and_then(|time| jiff::Timestamp::try_from(time).ok())
            .map(|time| time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
        let mut ca_certificates = Vec::new();
        if let Some(ca) = &self.ca_file {
            ca_certificates.push(std::fs::read(ca).map_err(|e| format!("{}: {e}", ca.display()))?);
        }
        let registry = capstan_source::oci::RegistryOptions {
            credentials: self.credentials()?,
            insecure: self.plain_http,
            ca_certificates,
            insecure_skip_tls_verify: self.insecure_skip_tls_verify,
        };
        capstan_source::helm::oci::push(&bytes, &self.remote, created.as_deref(), &registry)
            .await
            .map_err(|e| capstan_source::redact::error_chain(&e))
    }

    /// `--username`/`--password`, else the remote host's entry of the registry config file
    /// (docker config format, as `helm registry login` writes it), else anonymous.
    fn credentials(&self) -> Result<Option<capstan_source::oci::Credentials>, String> {
        if let Some(username) = &self.username {
            return Ok(Some(capstan_source::oci::Credentials {
                username: username.clone(),
                password: self.password.clone().unwrap_or_default(),
            }));
        }
        let path = self.registry_config.clone().or_else(|| {
            std::env::var_os("HELM_REGISTRY_CONFIG")
                .map(PathBuf::from)
                .or_else(|| {
                    let config = std::env::var_os("XDG_CONFIG_HOME")
                        .map(PathBuf::from)
                        .or_else(|| {
                            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config"))
                        })?;
                    Some(config.join("helm/registry/config.json"))
                })
        });
        let Some(path) = path else {
            return Ok(None);
        };
        let config = match std::fs::read(&path) {
            Ok(config) => config,
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound && self.registry_config.is_none() =>
            {
                return Ok(None);
            }
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let bare = self
            .remote
            .trim_start_matches(capstan_source::oci::URL_SCHEME);
        let host = bare.split('/').next().unwrap_or(bare);
        capstan_source::oci::Credentials::from_docker_config(&config, host)
            .map_err(|e| format!("{}: {e}", path.display()))
    }
}

#[derive(Debug, Args)]
#[command(disable_version_flag = true)]
struct PackageArgs {
    /// The chart directories to package.
    #[arg(required = true, value_name = "CHART_PATH")]
    charts: Vec<PathBuf>,
    /// Location to write the chart.
    #[arg(short = 'd', long, default_value = ".")]
    destination: PathBuf,
    /// Set the version on the chart to this semver version.
    #[arg(long)]
    version: Option<String>,
    /// Set the appVersion on the chart to this version.
    #[arg(long = "app-version")]
    app_version: Option<String>,
}

impl PackageArgs {
    /// `helm package`: one line per chart written; the first failure ends it (`Error: …`).
    fn run(&self) -> anyhow::Result<ExitCode> {
        let options = package::Options {
            version: self.version.clone(),
            app_version: self.app_version.clone(),
            source_date_epoch: None,
        };
        let cwd = std::env::current_dir()?;
        for chart in &self.charts {
            let written = package::package_with(chart, &options)
                .map_err(|e| e.message)
                .and_then(|packaged| {
                    packaged
                        .write_to(&clean(&cwd.join(&self.destination)))
                        .map_err(|e| format!("failed to save: {e}"))
                });
            match written {
                Ok(path) => outln!(
                    "Successfully packaged chart and saved it to: {}",
                    saved_path(&cwd, &self.destination, &path).display()
                ),
                Err(message) => {
                    eprintln!("Error: {message}");
                    return Ok(ExitCode::FAILURE);
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// The path `helm package` prints for the archive `written` in `destination`: the working
/// directory joined when the destination is `.`, else the destination as given; cleaned
/// lexically (`./`, `a/..` and doubled separators gone), as Go's `filepath.Join`.
fn saved_path(cwd: &Path, destination: &Path, written: &Path) -> PathBuf {
    let directory = if destination == Path::new(".") {
        cwd
    } else {
        destination
    };
    let joined = written
        .file_name()
        .map_or_else(|| written.to_path_buf(), |name| directory.join(name));
    clean(&joined)
}

/// `path` cleaned lexically as Go's `filepath.Clean`: no `.` components, a `..` after a name
/// removes both, `..` above the root is the root.
fn clean(path: &Path) -> PathBuf {
    let mut cleaned = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir
                if matches!(
                    cleaned.components().next_back(),
                    Some(std::path::Component::Normal(_))
                ) =>
            {
                cleaned.pop();
            }
            std::path::Component::ParentDir
                if matches!(
                    cleaned.components().next_back(),
                    Some(std::path::Component::RootDir)
                ) => {}
            other => cleaned.push(other),
        }
    }
    if cleaned.as_os_str().is_empty() {
        cleaned.push(".");
    }
    cleaned
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
pub async fn run(args: &HelmArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        HelmCommand::Package(package) => package.run(),
        HelmCommand::Push(push) => push.run().await,
        HelmCommand::Template(template) => template.run(),
    }
}

/// The `capstan helm` commands that need no async runtime (`template`), run at once: `main`
/// then starts none (its worker threads cost a render of a small chart its time again).
/// `None` for the others.
pub fn run_without_runtime(args: &HelmArgs) -> Option<anyhow::Result<ExitCode>> {
    match &args.command {
        HelmCommand::Template(template) => Some(template.run()),
        HelmCommand::Package(_) | HelmCommand::Push(_) => None,
    }
}

impl TemplateArgs {
    /// `capstan helm template`: manifests to stdout; errors to stderr as Helm prints them.
    fn run(&self) -> anyhow::Result<ExitCode> {
        let cwd = std::env::current_dir()?;
        let result = self.template().execute(&cwd, &mut Env::new());
        // The process ends after this render: its caches need not be freed.
        capstan_helm::leak_thread_caches();
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
