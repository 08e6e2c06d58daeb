//! `capstan bootstrap git`: commits Capstan's install manifests and the sync objects to a Git
//! repository in Flux's layout (`<path>/flux-system/{gotk-components.yaml,gotk-sync.yaml,
//! kustomization.yaml}`), pushes, installs Capstan, creates the source Secret, applies the sync
//! objects and waits until the cluster reconciles itself from Git, as `flux bootstrap git`.
//!
//! The forge providers (`bootstrap github|gitlab`) create the repository and the deploy key,
//! then call [`run`] with a [`GitBootstrap`].

pub mod forge;
pub mod git;
pub mod keys;
pub mod layout;
mod wait;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use std::sync::Arc;

use crate::install;

/// `capstan bootstrap <provider>`.
#[derive(Debug, Subcommand)]
pub enum BootstrapCommand {
    /// Deploy Capstan on a cluster, managed from any Git repository (ssh or http(s)).
    Git(Box<GitArgs>),
    /// Deploy Capstan on a cluster, managed from a GitHub repository the bootstrap creates if
    /// missing (token in GITHUB_TOKEN).
    Github(Box<forge::GitHubArgs>),
    /// Deploy Capstan on a cluster, managed from a GitLab project the bootstrap creates if
    /// missing (token in GITLAB_TOKEN).
    Gitlab(Box<forge::GitLabArgs>),
}

/// The flags every `bootstrap` provider shares (Flux's `bootstrap` flags).
#[derive(Debug, Clone, Args)]
pub struct BootstrapFlags {
    /// The Git branch.
    #[arg(long, default_value = "main")]
    pub branch: String,
    /// The path in the repository of the cluster's directory (`clusters/NAME`).
    #[arg(long, required = true)]
    pub path: String,
    /// The Secret (in the install namespace) holding the Git credentials.
    #[arg(long, default_value = "flux-system")]
    pub secret_name: String,
    /// The SSH private key (PEM or OpenSSH) to clone and push with, and stored in the Secret.
    /// Its public key is read from `<file>.pub` when that exists. Without it, an ssh URL uses
    /// the key of the existing source Secret, else a generated one.
    #[arg(long)]
    pub private_key_file: Option<PathBuf>,
    #[command(flatten)]
    pub keys: keys::KeyFlags,
    /// The SSH host name recorded in the Secret's known_hosts (when the host's name differs
    /// from the URL's).
    #[arg(long)]
    pub ssh_hostname: Option<String>,
    /// A CA certificate (PEM) for https Git servers, stored in the Secret as `ca.crt`.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// The commit author's name.
    #[arg(long, default_value = "Capstan")]
    pub author_name: String,
    /// The commit author's email.
    #[arg(long, default_value = "capstan@localhost")]
    pub author_email: String,
    /// Text appended to the commit messages.
    #[arg(long)]
    pub commit_message_appendix: Option<String>,
    /// OpenPGP commit signing (Flux's flag): not supported, refused.
    #[arg(long, hide = true)]
    pub gpg_key_ring: Option<PathBuf>,
    /// OpenPGP commit signing (Flux's flag): not supported, refused.
    #[arg(long, hide = true)]
    pub gpg_passphrase: Option<String>,
    /// OpenPGP commit signing (Flux's flag): not supported, refused.
    #[arg(long, hide = true)]
    pub gpg_key_id: Option<String>,
    /// The version (image tag) written to the components manifests (default: this binary's;
    /// Flux's `--version`, which `capstan --version` takes here).
    #[arg(long, hide = true)]
    pub components_version: Option<String>,
    /// The namespace Capstan is installed in.
    #[arg(short = 'n', long, default_value = "flux-system")]
    pub namespace: String,
    /// Flux's optional controllers; accepted for compatibility, Capstan adds nothing for them.
    #[arg(long, value_delimiter = ',')]
    pub components_extra: Vec<String>,
    /// Registry (and path) of the image: `<registry>/capstan:<version>`.
    #[arg(long, default_value = install::manifests::DEFAULT_REGISTRY)]
    pub registry: String,
    /// A Secret in the install namespace the kubelet pulls the image with.
    #[arg(long)]
    pub image_pull_secret: Option<String>,
    /// Taint keys the controller tolerates.
    #[arg(long, value_delimiter = ',')]
    pub toleration_keys: Vec<String>,
    /// Watch every namespace; `=false` watches only the install namespace.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_missing_value = "true")]
    pub watch_all_namespaces: bool,
    /// Ship Flux's NetworkPolicies.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_missing_value = "true")]
    pub network_policy: bool,
    /// The cluster's DNS domain.
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,
    /// How long to wait for each step.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Path to the kubeconfig file (default: `$KUBECONFIG`, then `~/.kube/config`).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
}

/// `capstan bootstrap git`'s own flags.
#[derive(Debug, Args)]
pub struct GitArgs {
    #[command(flatten)]
    pub common: BootstrapFlags,
    /// The repository URL (`ssh://git@host/repo.git`, `https://host/repo.git`).
    #[arg(long, required = true)]
    pub url: String,
    /// The basic-auth user name (http(s)).
    #[arg(short = 'u', long, default_value = "git")]
    pub username: String,
    /// The basic-auth password or token (http(s)), or the SSH key's passphrase; never written
    /// to the repository or logs. Also read from `GIT_PASSWORD`, as Flux.
    #[arg(short = 'p', long, env = "GIT_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// Use the password as a bearer token (http(s)).
    #[arg(long)]
    pub with_bearer_token: bool,
    /// Assume the deploy key is already set up; skip confirmations.
    #[arg(short = 's', long)]
    pub silent: bool,
    /// Allow plain-text http URLs.
    #[arg(long)]
    pub allow_insecure_http: bool,
    /// The GitRepository's sync interval.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub interval: Duration,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    capstan_api::duration::parse_go_duration(text).map_err(|e| e.to_string())
}

/// How to authenticate to the Git server (and what the source Secret holds).
#[derive(Clone, Default)]
pub enum GitAuth {
    /// No credentials (no Secret, no `secretRef`).
    #[default]
    None,
    /// SSH with a private key.
    Ssh(SshKey),
    /// HTTP basic auth (`username`/`password`; a forge token is a password).
    Basic { username: String, password: String },
    /// HTTP bearer token (`bearerToken`).
    Bearer { token: String },
}

impl std::fmt::Debug for GitAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Ssh(key) => write!(f, "Ssh(user {:?}, <private key>)", key.username),
            Self::Basic { username, .. } => write!(f, "Basic({username:?}, <password>)"),
            Self::Bearer { .. } => f.write_str("Bearer(<token>)"),
        }
    }
}

/// An SSH key pair.
#[derive(Clone)]
pub struct SshKey {
    /// The private key (PEM or OpenSSH format).
    pub private_key: String,
    /// The public key (`ssh-ed25519 AAAA…`), stored as `identity.pub` when known.
    pub public_key: Option<String>,
    /// The private key's passphrase.
    pub passphrase: Option<String>,
    /// The user name when the URL has none (`git`).
    pub username: Option<String>,
}

/// The commit author.
#[derive(Debug, Clone)]
pub struct Author {
    pub name: String,
    pub email: String,
}

/// Everything [`run`] needs.
#[derive(Debug, Clone)]
pub struct GitBootstrap {
    /// The URL cloned and pushed to (without credentials).
    pub url: String,
    /// The URL the GitRepository is given, when it differs from [`GitBootstrap::url`].
    pub sync_url: Option<String>,
    pub branch: String,
    /// The cluster's directory in the repository (`clusters/NAME`).
    pub path: String,
    /// The source Secret's name (in the install namespace).
    pub secret_name: String,
    pub auth: GitAuth,
    pub author: Author,
    pub commit_message_appendix: Option<String>,
    /// The GitRepository's interval.
    pub interval: Duration,
    /// A CA certificate (PEM) for https servers, stored as `ca.crt`.
    pub ca: Option<Vec<u8>>,
    /// The host name recorded in known_hosts (ssh), when it differs from the URL's.
    pub ssh_hostname: Option<String>,
    /// Allow `http://` URLs.
    pub allow_insecure_http: bool,
    /// The install manifests' options (namespace, registry, version, …).
    pub install: install::Options,
    /// How long to wait for each step.
    pub timeout: Duration,
    /// Skip confirmations.
    pub silent: bool,
}

/// What a bootstrap did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The branch's head commit after the bootstrap.
    pub commit: String,
    /// The commits made (messages), empty when the repository was up to date.
    pub commits: Vec<String>,
}

/// Flux's progress lines (`►`, `✔`, `◎`, `✗`) to a writer (stderr for the CLI).
pub struct Progress {
    out: Box<dyn Write + Send>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}

impl Progress {
    /// Progress on stderr.
    #[must_use]
    pub fn stderr() -> Self {
        Self::new(Box::new(std::io::stderr()))
    }

    #[must_use]
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        Self { out }
    }

    fn line(&mut self, symbol: &str, message: &str) {
        let _ = writeln!(self.out, "{symbol} {message}");
    }

    /// `► …`: an action starts.
    pub fn action(&mut self, message: &str) {
        self.line("►", message);
    }
    /// `✚ …`: something is generated.
    pub fn generate(&mut self, message: &str) {
        self.line("✚", message);
    }
    /// `◎ …`: waiting.
    pub fn waiting(&mut self, message: &str) {
        self.line("◎", message);
    }
    /// `✔ …`: success.
    pub fn success(&mut self, message: &str) {
        self.line("✔", message);
    }
    /// `⚠️ …`: something the user should know, not an error.
    pub fn warning(&mut self, message: &str) {
        self.line("⚠️", message);
    }
}

/// Runs `capstan bootstrap …`.
pub async fn run_command(command: BootstrapCommand) -> anyhow::Result<ExitCode> {
    match command {
        BootstrapCommand::Github(args) => forge::run_github(*args).await,
        BootstrapCommand::Gitlab(args) => forge::run_gitlab(*args).await,
        BootstrapCommand::Git(args) => {
            let mut opts = args.bootstrap()?;
            let needs_key = is_ssh(&opts.url) && matches!(opts.auth, GitAuth::None);
            layout::normalize_path(&opts.path)?;
            check_url_shape(&opts)?;
            capstan_source::tls::install_default_provider();
            let client = crate::controller::client(
                args.common.kubeconfig.as_ref(),
                args.common.context.as_deref(),
            )
            .await?;
            let mut progress = Progress::stderr();
            if needs_key {
                let key = deploy_key(&client, &opts, &args.common.keys, &mut progress).await?;
                opts.auth = GitAuth::Ssh(SshKey {
                    username: Some(args.username.clone()),
                    ..key
                });
            }
            validate(&opts)?;
            let outcome = run(&client, &opts, &mut progress).await?;
            progress.success(&format!(
                "bootstrap finished at commit {} ({})",
                outcome.commit,
                if outcome.commits.is_empty() {
                    "the repository was up to date".to_owned()
                } else {
                    format!("{} commit(s) pushed", outcome.commits.len())
                }
            ));
            Ok(ExitCode::SUCCESS)
        }
    }
}

impl BootstrapFlags {
    /// Refuses what Capstan does not do (OpenPGP signing).
    pub fn check_supported(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.gpg_key_ring.is_none()
                && self.gpg_key_id.is_none()
                && self.gpg_passphrase.is_none(),
            "signing commits with OpenPGP (--gpg-key-ring, --gpg-key-id, --gpg-passphrase) is not \
             supported by capstan bootstrap; sign later commits yourself"
        );
        Ok(())
    }

    /// The install manifests' options.
    #[must_use]
    pub fn install_options(&self) -> install::Options {
        let mut options = install::Options {
            namespace: self.namespace.clone(),
            components_extra: self.components_extra.clone(),
            registry: self.registry.clone(),
            image_pull_secret: self.image_pull_secret.clone(),
            toleration_keys: self.toleration_keys.clone(),
            watch_all_namespaces: self.watch_all_namespaces,
            network_policy: self.network_policy,
            cluster_domain: self.cluster_domain.clone(),
            ..install::Options::default()
        };
        if let Some(version) = &self.components_version {
            options.version.clone_from(version);
        }
        options
    }

    /// The SSH key of `--private-key-file` (and `<file>.pub` when present).
    pub fn ssh_key(&self, passphrase: Option<String>) -> anyhow::Result<Option<SshKey>> {
        let Some(file) = &self.private_key_file else {
            return Ok(None);
        };
        let private_key = fs_err::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("reading --private-key-file: {e}"))?;
        let mut public = file.clone().into_os_string();
        public.push(".pub");
        let public_key = std::fs::read_to_string(PathBuf::from(public))
            .ok()
            .map(|key| key.trim().to_owned());
        Ok(Some(SshKey {
            private_key,
            public_key,
            passphrase,
            username: None,
        }))
    }

    /// `--ca-file`'s content.
    pub fn ca(&self) -> anyhow::Result<Option<Vec<u8>>> {
        self.ca_file
            .as_ref()
            .map(|file| fs_err::read(file).map_err(|e| anyhow::anyhow!("reading --ca-file: {e}")))
            .transpose()
    }
}

impl GitArgs {
    /// The bootstrap these flags ask for.
    pub fn bootstrap(&self) -> anyhow::Result<GitBootstrap> {
        let common = &self.common;
        common.check_supported()?;
        let ssh = is_ssh(&self.url);
        // A GitRepository takes `ssh://` URLs only: an scp-like one is converted first.
        let url = if ssh && !self.url.starts_with("ssh://") {
            forge::ssh_url(&self.url, None)?
        } else {
            self.url.clone()
        };
        let auth = if ssh {
            match common.ssh_key(self.password.clone())? {
                Some(mut key) => {
                    key.username = Some(self.username.clone());
                    GitAuth::Ssh(key)
                }
                // The source Secret's key, else a generated one ([`deploy_key`]).
                None => GitAuth::None,
            }
        } else {
            anyhow::ensure!(
                common.private_key_file.is_none() || !self.url.starts_with("http"),
                "--private-key-file is for ssh:// URLs; {} is not one",
                redact_url(&self.url)
            );
            match &self.password {
                Some(token) if self.with_bearer_token => GitAuth::Bearer {
                    token: token.clone(),
                },
                Some(password) => GitAuth::Basic {
                    username: self.username.clone(),
                    password: password.clone(),
                },
                None => GitAuth::None,
            }
        };
        Ok(GitBootstrap {
            url,
            sync_url: None,
            branch: common.branch.clone(),
            path: common.path.clone(),
            secret_name: common.secret_name.clone(),
            auth,
            author: Author {
                name: common.author_name.clone(),
                email: common.author_email.clone(),
            },
            commit_message_appendix: common.commit_message_appendix.clone(),
            interval: self.interval,
            ca: common.ca()?,
            ssh_hostname: common.ssh_hostname.clone(),
            allow_insecure_http: self.allow_insecure_http,
            install: common.install_options(),
            timeout: common.timeout,
            silent: self.silent,
        })
    }
}

/// Whether `url` is an SSH URL (`ssh://…` or scp-like `user@host:path`).
#[must_use]
pub fn is_ssh(url: &str) -> bool {
    url.starts_with("ssh://") || (!url.contains("://") && url.contains('@') && url.contains(':'))
}

/// Checks a bootstrap before anything is touched: the path, the URL and its credentials.
///
/// # Errors
/// A path leaving the repository, a URL Capstan cannot or must not use.
pub fn validate(opts: &GitBootstrap) -> anyhow::Result<()> {
    layout::normalize_path(&opts.path)?;
    check_url(opts)
}

/// Refuses URLs Capstan cannot or must not use, and an ssh URL without a key.
fn check_url(opts: &GitBootstrap) -> anyhow::Result<()> {
    check_url_shape(opts)?;
    if is_ssh(&opts.url) {
        anyhow::ensure!(
            matches!(opts.auth, GitAuth::Ssh(_)),
            "an ssh URL needs an SSH key (--private-key-file)"
        );
    }
    Ok(())
}

/// The SSH key of `bootstrap git` with an ssh URL and no `--private-key-file`, as Flux: the
/// key of the existing source Secret, else a new one (stored in the Secret at once, so that a
/// run failing because the key has no access yet reuses it next time). Prints the public key
/// and, unless `--silent`, asks on the terminal whether it has access to the repository.
async fn deploy_key(
    client: &kube::Client,
    opts: &GitBootstrap,
    flags: &keys::KeyFlags,
    out: &mut Progress,
) -> anyhow::Result<SshKey> {
    let namespace = &opts.install.namespace;
    let name = &opts.secret_name;
    let key = if let Some(key) = keys::existing(client, namespace, name).await? {
        out.success(&format!(
            "using the SSH key of the source secret \"{namespace}/{name}\""
        ));
        key
    } else {
        out.generate("generating the SSH deploy key");
        let key = keys::generate(flags)?;
        // Next to Flux's controllers [`run`] refuses: nothing is stored then.
        if install::flux::detect(client).await?.is_none() {
            keys::store(client, namespace, name, &key).await?;
            out.success(&format!(
                "stored the SSH key in the source secret \"{namespace}/{name}\""
            ));
        }
        key
    };
    let public_key = key.public_key.clone().unwrap_or_default();
    out.success(&format!(
        "deploy key (give it read and write access to the repository): {public_key}"
    ));
    if !opts.silent {
        keys::confirm_access(&public_key)?;
    }
    Ok(key)
}

/// Refuses URLs Capstan cannot or must not use (any key is checked by [`check_url`]).
fn check_url_shape(opts: &GitBootstrap) -> anyhow::Result<()> {
    let url = &opts.url;
    if url.starts_with("http://") {
        anyhow::ensure!(
            opts.allow_insecure_http,
            "refusing the plain-text URL {}: credentials and content would travel \
             unencrypted\nhint: use https:// or ssh://, or pass --allow-insecure-http",
            redact_url(url)
        );
    } else if !url.starts_with("https://") && !url.starts_with("ssh://") {
        anyhow::bail!(
            "unsupported URL {}: use ssh://, https:// or (with --allow-insecure-http) http://",
            redact_url(url)
        );
    }
    // What the GitRepository CRD accepts (`^(http|https|ssh)://`), checked before any push.
    if let Some(sync_url) = &opts.sync_url {
        anyhow::ensure!(
            ["http://", "https://", "ssh://"]
                .iter()
                .any(|scheme| sync_url.starts_with(scheme)),
            "unsupported sync URL {}: a GitRepository takes ssh://, https:// or http:// URLs",
            redact_url(sync_url)
        );
    }
    anyhow::ensure!(
        !url_has_password(url),
        "the URL carries a password: give it with --password instead, it must not be committed"
    );
    Ok(())
}

fn url_has_password(url: &str) -> bool {
    url.split_once("://").is_some_and(|(_, rest)| {
        let authority = rest.split('/').next().unwrap_or_default();
        authority
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| userinfo.contains(':'))
    })
}

/// `url` without a password, for messages.
fn redact_url(url: &str) -> String {
    if !url_has_password(url) {
        return url.to_owned();
    }
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (userinfo, host) = authority.rsplit_once('@').unwrap_or(("", authority));
    let user = userinfo.split(':').next().unwrap_or_default();
    format!("{scheme}://{user}:***@{host}{path}")
}

/// Runs blocking Git work on a blocking thread.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| anyhow::anyhow!("the Git work stopped: {e}"))?
}

fn with_appendix(message: String, appendix: Option<&String>) -> String {
    match appendix {
        Some(appendix) if !appendix.is_empty() => format!("{message}\n\n{appendix}"),
        _ => message,
    }
}

/// Bootstraps: clone, commit and push the components, install them, create the source
/// Secret, commit and push the sync objects, apply them and wait for the cluster to reconcile
/// itself at the pushed commit. Running it again changes nothing when nothing changed; a
/// different components file (a newer binary, other install options) is one "Update" commit.
///
/// # Errors
/// Any failing step, with what was being done; never a credential.
pub async fn run(
    client: &kube::Client,
    opts: &GitBootstrap,
    out: &mut Progress,
) -> anyhow::Result<Outcome> {
    validate(opts)?;
    let path = layout::normalize_path(&opts.path)?;
    if let Some(flux) = install::flux::detect(client).await? {
        anyhow::bail!(
            "refusing to bootstrap next to Flux's controllers: both would reconcile the same \
             objects\n{}",
            flux.explain().trim_end()
        );
    }
    install::refuse_another_installation(client, &opts.install.namespace, "bootstrap").await?;
    let namespace = opts.install.namespace.clone();
    let url = redact_url(&opts.url);
    let remote = git::Remote {
        url: opts.url.clone(),
        auth: opts.auth.clone(),
        ssh_hostname: opts.ssh_hostname.clone(),
        ca: opts.ca.clone(),
    };
    let branch = opts.branch.clone();
    out.action(&format!(
        "cloning branch \"{branch}\" from Git repository \"{url}\""
    ));
    let known_hosts = known_hosts(client, opts).await?;
    let checkout = {
        let (remote, branch) = (remote.clone(), branch.clone());
        let cloned = blocking(move || git::clone_trusting(&remote, &branch, &known_hosts)).await;
        Arc::new(cloned.map_err(|e| match &opts.auth {
            GitAuth::Ssh(SshKey {
                public_key: Some(public_key),
                ..
            }) => e.context(format!(
                "cannot clone \"{url}\" with the SSH key {public_key}: does it have access to \
                 the repository?"
            )),
            _ => e,
        })?)
    };
    out.success("cloned repository");
    let mut commits = Vec::new();

    // The components.
    out.action("generating component manifests");
    let components = layout::components(&opts.install)?;
    let components_path = layout::file(&path, layout::COMPONENTS);
    let existing = git::read(&checkout, &components_path)?;
    if let Some(flux) = existing.as_deref().and_then(layout::flux_components) {
        out.warning(&format!(
            "{components_path} holds Flux's components (Flux {flux}): they are replaced by \
             Capstan's. A Flux still syncing this path would apply Capstan's components and \
             prune its own controllers; see docs/migrating-from-flux.md"
        ));
    }
    if let Some(old) = existing.as_deref().and_then(layout::components_version)
        && old != opts.install.version
    {
        out.action(&format!(
            "updating the components from {old} to {}",
            opts.install.version
        ));
    }
    out.success("generated component manifests");
    let message = with_appendix(
        format!(
            "{} Capstan {} components manifests",
            if existing.is_some() { "Update" } else { "Add" },
            opts.install.version
        ),
        opts.commit_message_appendix.as_ref(),
    );
    let committed = commit_and_push(
        &checkout,
        &remote,
        vec![(components_path, components)],
        &opts.author,
        &message,
    )
    .await?;
    if let Some(id) = committed {
        out.success(&format!(
            "committed component manifests to \"{branch}\" (\"{id}\")"
        ));
        out.success(&format!("pushed component manifests to \"{url}\""));
        commits.push(message);
    } else {
        out.success("component manifests are up to date");
    }

    install_components(client, opts, out).await?;

    say_public_key(opts, out);

    // The source Secret.
    let secret_name = apply_source_secret(client, opts, &checkout.known_hosts, out).await?;

    // The sync objects.
    if let Some(message) = commit_sync(&checkout, &remote, opts, &path, secret_name, out).await? {
        commits.push(message);
    }

    apply_sync(client, &checkout, &path, &namespace, out).await?;

    // Wait for the cluster to reconcile itself from Git.
    let head = git::head(&checkout)?.context("the branch has no commit")?;
    let revision = format!("{branch}@sha1:{head}");
    wait::synced(client, &namespace, &revision, opts.timeout, out).await?;
    Ok(Outcome {
        commit: head,
        commits,
    })
}

/// Writes `gotk-sync.yaml` and `kustomization.yaml` (an existing one listing both files is
/// kept), commits and pushes when they changed; returns the commit's message.
async fn commit_sync(
    checkout: &Arc<git::Checkout>,
    remote: &git::Remote,
    opts: &GitBootstrap,
    path: &str,
    secret_name: Option<String>,
    out: &mut Progress,
) -> anyhow::Result<Option<String>> {
    let (namespace, branch) = (&opts.install.namespace, &opts.branch);
    let url = redact_url(&opts.url);
    out.action("generating sync manifests");
    let sync = layout::sync(&layout::Sync {
        namespace: namespace.clone(),
        url: opts.sync_url.clone().unwrap_or_else(|| opts.url.clone()),
        branch: branch.clone(),
        interval: opts.interval,
        path: path.to_owned(),
        secret_name,
    });
    let mut files = vec![(layout::file(path, layout::SYNC), sync)];
    let kustomization_path = layout::file(path, layout::KUSTOMIZATION);
    // As Flux: an existing one is never rewritten (it may carry the user's patches).
    if let Some(text) = git::read(checkout, &kustomization_path)? {
        if let Some(warning) = layout::kustomization_warning(&kustomization_path, &text) {
            out.warning(&warning);
        }
    } else {
        let dir = checkout.path().join(path).join(layout::DIR);
        files.push((kustomization_path, layout::kustomization(&dir)?));
    }
    out.success("generated sync manifests");
    let message = with_appendix(
        "Add Capstan sync manifests".to_owned(),
        opts.commit_message_appendix.as_ref(),
    );
    if let Some(id) = commit_and_push(checkout, remote, files, &opts.author, &message).await? {
        out.success(&format!(
            "committed sync manifests to \"{branch}\" (\"{id}\")"
        ));
        out.success(&format!("pushed sync manifests to \"{url}\""));
        return Ok(Some(message));
    }
    out.success("sync manifests are up to date");
    Ok(None)
}

/// The `known_hosts` of the source Secret an earlier bootstrap made (empty when there is none):
/// the SSH server must present the same host key again.
async fn known_hosts(client: &kube::Client, opts: &GitBootstrap) -> anyhow::Result<String> {
    if !matches!(opts.auth, GitAuth::Ssh(_)) {
        return Ok(String::new());
    }
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), &opts.install.namespace);
    let secret = secrets.get_opt(&opts.secret_name).await.with_context(|| {
        format!(
            "reading the source Secret {}/{}",
            opts.install.namespace, opts.secret_name
        )
    })?;
    Ok(secret
        .and_then(|s| s.data)
        .and_then(|data| data.get("known_hosts").cloned())
        .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
        .unwrap_or_default())
}

/// Prints the public key the repository must accept (unless `--silent`).
fn say_public_key(opts: &GitBootstrap, out: &mut Progress) {
    if let (
        GitAuth::Ssh(SshKey {
            public_key: Some(key),
            ..
        }),
        false,
    ) = (&opts.auth, opts.silent)
    {
        out.success(&format!(
            "public key (it needs write access to the repository, as a deploy key): {key}"
        ));
    }
}

/// Applies the install manifests (as `capstan install`) and waits for the controller, on a
/// cluster with nodes.
async fn install_components(
    client: &kube::Client,
    opts: &GitBootstrap,
    out: &mut Progress,
) -> anyhow::Result<()> {
    let namespace = &opts.install.namespace;
    // Install them.
    out.action(&format!(
        "installing components in \"{namespace}\" namespace"
    ));
    install::apply(client, &install::manifests(&opts.install)?).await?;
    out.success("installed components");
    if install::has_nodes(client).await? {
        out.waiting(&format!(
            "waiting for Deployment \"{namespace}/{}\" to be ready",
            install::manifests::CONTROLLER
        ));
        install::wait_ready(client, namespace, opts.timeout).await?;
        out.success("reconciled components");
    } else {
        out.success(
            "the cluster has no nodes (capstan dev runs the controllers in its own process): \
             not waiting for the controller Deployment",
        );
    }
    Ok(())
}

/// Applies the GitRepository and Kustomization `flux-system`, rendered from the checkout's
/// `<path>/flux-system` by the kustomize engine, as the controller will render them.
async fn apply_sync(
    client: &kube::Client,
    checkout: &git::Checkout,
    path: &str,
    namespace: &str,
    out: &mut Progress,
) -> anyhow::Result<()> {
    // Apply them, rendered from the checkout as the controller will.
    out.action("applying sync manifests");
    let dir = checkout.path().join(path).join(layout::DIR);
    let objects = capstan_kustomize::build(&dir, &capstan_kustomize::BuildOptions::default())
        .map_err(|e| anyhow::anyhow!("building {path}/{}: {e}", layout::DIR))?;
    let sync_objects: Vec<serde_json::Value> = objects
        .into_iter()
        .filter(|o| {
            o["metadata"]["name"] == layout::SYNC_NAME
                && o["metadata"]["namespace"] == namespace
                && matches!(o["kind"].as_str(), Some("GitRepository" | "Kustomization"))
        })
        .collect();
    anyhow::ensure!(
        sync_objects.len() == 2,
        "{path}/{} does not render the GitRepository and Kustomization {namespace}/{}",
        layout::DIR,
        layout::SYNC_NAME
    );
    install::apply(client, &sync_objects).await?;
    out.success("reconciled sync configuration");
    Ok(())
}

async fn commit_and_push(
    checkout: &Arc<git::Checkout>,
    remote: &git::Remote,
    files: Vec<(String, String)>,
    author: &Author,
    message: &str,
) -> anyhow::Result<Option<String>> {
    let (checkout, remote, author, message) = (
        checkout.clone(),
        remote.clone(),
        author.clone(),
        message.to_owned(),
    );
    blocking(move || {
        let Some(id) = git::commit(&checkout, &files, &author, &message)? else {
            return Ok(None);
        };
        git::push(&checkout, &remote)?;
        Ok(Some(id))
    })
    .await
}

/// Applies the source Secret when there are credentials (or a CA); without them, an existing
/// Secret (from an earlier bootstrap with credentials) is kept and still referenced, so that a
/// run without `--password` changes nothing. Returns the name for `secretRef`.
async fn apply_source_secret(
    client: &kube::Client,
    opts: &GitBootstrap,
    known_hosts: &str,
    out: &mut Progress,
) -> anyhow::Result<Option<String>> {
    let namespace = &opts.install.namespace;
    let name = &opts.secret_name;
    if matches!(opts.auth, GitAuth::None) && opts.ca.is_none() {
        let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
            kube::Api::namespaced(client.clone(), namespace);
        let existing = secrets
            .get_opt(name)
            .await
            .with_context(|| format!("reading the source Secret {namespace}/{name}"))?;
        if existing.is_none() {
            return Ok(None);
        }
        out.success(&format!(
            "source secret \"{namespace}/{name}\" exists: kept (no credentials given)"
        ));
        return Ok(Some(name.clone()));
    }
    out.action(&format!("applying source secret \"{namespace}/{name}\""));
    let secret = source_secret(opts, known_hosts)?;
    install::apply(client, &[secret]).await?;
    out.success("reconciled source secret");
    Ok(Some(name.clone()))
}

/// The source Secret: `identity`, `identity.pub`, `known_hosts` (ssh), `username`/`password`
/// or `bearerToken` (http(s)), `ca.crt`.
fn source_secret(opts: &GitBootstrap, known_hosts: &str) -> anyhow::Result<serde_json::Value> {
    use base64::Engine;
    let mut data = serde_json::Map::new();
    let mut put = |key: &str, value: &[u8]| {
        data.insert(
            key.to_owned(),
            base64::engine::general_purpose::STANDARD
                .encode(value)
                .into(),
        );
    };
    match &opts.auth {
        GitAuth::None => {}
        GitAuth::Ssh(key) => {
            put("identity", key.private_key.as_bytes());
            if let Some(public) = &key.public_key {
                put("identity.pub", public.as_bytes());
            }
            if let Some(passphrase) = &key.passphrase {
                put("password", passphrase.as_bytes());
            }
            anyhow::ensure!(
                !known_hosts.is_empty(),
                "the SSH server presented no host key to record in known_hosts"
            );
            put("known_hosts", known_hosts.as_bytes());
        }
        GitAuth::Basic { username, password } => {
            put("username", username.as_bytes());
            put("password", password.as_bytes());
        }
        GitAuth::Bearer { token } => put("bearerToken", token.as_bytes()),
    }
    if let Some(ca) = &opts.ca {
        put("ca.crt", ca);
    }
    Ok(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": opts.secret_name, "namespace": opts.install.namespace},
        "type": "Opaque",
        "data": data,
    }))
}
