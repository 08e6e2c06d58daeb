//! `capstan bootstrap github|gitlab`: Flux's `flux bootstrap github|gitlab`. With a token
//! (`GITHUB_TOKEN` / `GITLAB_TOKEN`, else read from stdin as Flux does), the forge's REST API
//! finds or creates the repository, gives teams access, and registers an SSH deploy key (or,
//! with `--token-auth`, the token itself becomes the sync credential); then the
//! `bootstrap git` core ([`super::run`]) commits Flux's layout, pushes and waits for the
//! cluster.
//!
//! The API address: `https://api.github.com` for github.com, `https://HOST/api/v3` for GitHub
//! Enterprise, `https://HOST/api/v4` for GitLab. A `--hostname` on the loopback interface
//! (`localhost`, `127.x.x.x`, `[::1]`, with a port) is spoken to over plain HTTP, as Capstan
//! speaks to loopback registries: that is how the tests reach their local API fakes.
//!
//! Every API error names the call and the status (`GitHub API GET /repos/o/r answered 401
//! Unauthorized: the token is not valid for …`); the token never appears in an error, a log
//! line or the repository.

pub mod api;
pub mod github;
pub mod gitlab;

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;

use self::api::{Api, Forge};
use super::{Author, BootstrapFlags, GitAuth, GitBootstrap, Progress, SshKey, git, keys, layout};

/// The flags `bootstrap github` and `bootstrap gitlab` share (besides [`BootstrapFlags`]).
#[derive(Debug, Clone, Args)]
pub struct ForgeFlags {
    /// The user (with `--personal`) or organization/group owning the repository.
    #[arg(long, required = true)]
    pub owner: String,
    /// The repository's name.
    #[arg(long, required = true)]
    pub repository: String,
    /// The owner is the token's user, not an organization (GitHub) or group (GitLab).
    #[arg(long)]
    pub personal: bool,
    /// Register the deploy key with write access (read-only by default).
    #[arg(long)]
    pub read_write_key: bool,
    /// Reconcile an existing repository's settings (description, default branch, visibility,
    /// team permissions) and replace a drifted deploy key of the same name.
    #[arg(long)]
    pub reconcile: bool,
    /// The sync Secret holds the token (user name `git`) and the sync URL is https, instead of
    /// an SSH deploy key.
    #[arg(long)]
    pub token_auth: bool,
    /// The description of a repository created by the bootstrap.
    #[arg(long)]
    pub description: Option<String>,
    /// The default branch of a repository created by the bootstrap.
    #[arg(long)]
    pub default_branch: Option<String>,
    /// The GitRepository's sync interval.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub interval: Duration,
}

/// `capstan bootstrap github`.
#[derive(Debug, Args)]
pub struct GitHubArgs {
    #[command(flatten)]
    pub common: BootstrapFlags,
    #[command(flatten)]
    pub forge: ForgeFlags,
    /// The GitHub host (GitHub Enterprise: its host name; the API is `https://HOST/api/v3`).
    #[arg(long, default_value = "github.com")]
    pub hostname: String,
    /// An organization team given access, `SLUG[:PERMISSION]` (pull, triage, push, maintain,
    /// admin; default maintain); repeat or separate with commas.
    #[arg(long, value_delimiter = ',')]
    pub team: Vec<String>,
    /// Create the repository private (`--private=false`: public).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_missing_value = "true")]
    pub private: bool,
}

/// `capstan bootstrap gitlab`.
#[derive(Debug, Args)]
pub struct GitLabArgs {
    #[command(flatten)]
    pub common: BootstrapFlags,
    #[command(flatten)]
    pub forge: ForgeFlags,
    /// The GitLab host (self-hosted: its host name; the API is `https://HOST/api/v4`).
    #[arg(long, default_value = "gitlab.com")]
    pub hostname: String,
    /// A group the project is shared with at Maintainer level; repeat or separate with commas.
    #[arg(long, value_delimiter = ',')]
    pub team: Vec<String>,
    /// The visibility of a created project: private, internal or public.
    #[arg(long, default_value = "private", value_parser = clap::builder::PossibleValuesParser::new(gitlab::VISIBILITIES))]
    pub visibility: String,
    /// Deprecated (Flux's): `--private=false` means `--visibility=public`.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_missing_value = "true", hide = true)]
    pub private: bool,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    capstan_api::duration::parse_go_duration(text).map_err(|e| e.to_string())
}

/// The repository a bootstrap wants.
#[derive(Debug, Clone)]
pub struct RepositorySpec {
    pub owner: String,
    pub name: String,
    pub personal: bool,
    /// GitHub: private or public.
    pub private: bool,
    /// GitLab: private, internal or public.
    pub visibility: String,
    pub description: Option<String>,
    pub default_branch: Option<String>,
    pub reconcile: bool,
}

/// A repository on the forge, as the API answered.
#[derive(Debug, Clone, Default)]
pub struct Repository {
    /// What the API's paths name it by: GitHub's `owner/name`, GitLab's project id.
    pub id: String,
    /// The https clone URL.
    pub https_url: String,
    /// The ssh clone URL, as the forge gives it (`git@host:owner/name.git`).
    pub ssh_url: String,
    pub default_branch: String,
    /// The bootstrap created it.
    pub created: bool,
    /// `--reconcile` changed its settings.
    pub reconciled: bool,
    /// GitLab: the groups the project is shared with (full paths).
    pub shared_with: Vec<String>,
}

/// A registered deploy key.
#[derive(Debug, Clone)]
pub struct DeployKey {
    pub id: String,
    pub title: String,
    pub key: String,
    pub read_only: bool,
}

/// What registering the deploy key did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOutcome {
    Added,
    Unchanged,
    Replaced,
}

async fn find_or_create(api: &Api, spec: &RepositorySpec) -> anyhow::Result<Repository> {
    match api.forge {
        Forge::GitHub => github::repository(api, spec).await,
        Forge::GitLab => gitlab::repository(api, spec).await,
    }
}

async fn deploy_keys(api: &Api, repository: &Repository) -> anyhow::Result<Vec<DeployKey>> {
    match api.forge {
        Forge::GitHub => github::deploy_keys(api, repository).await,
        Forge::GitLab => gitlab::deploy_keys(api, repository).await,
    }
}

async fn add_deploy_key(
    api: &Api,
    repository: &Repository,
    title: &str,
    key: &str,
    read_only: bool,
) -> anyhow::Result<()> {
    match api.forge {
        Forge::GitHub => github::add_deploy_key(api, repository, title, key, read_only).await,
        Forge::GitLab => gitlab::add_deploy_key(api, repository, title, key, read_only).await,
    }
}

async fn delete_deploy_key(api: &Api, repository: &Repository, id: &str) -> anyhow::Result<()> {
    match api.forge {
        Forge::GitHub => github::delete_deploy_key(api, repository, id).await,
        Forge::GitLab => gitlab::delete_deploy_key(api, repository, id).await,
    }
}

/// Flux's name of the deploy key: namespace, branch, Secret name and `./path`, joined with `-`
/// (`flux-system-main-flux-system-./clusters/prod`).
pub fn deploy_key_name(namespace: &str, branch: &str, secret_name: &str, path: &str) -> String {
    let path = relative_path(path);
    [namespace, branch, secret_name, path.as_str()]
        .iter()
        .filter(|part| !part.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("-")
}

/// `path` as Flux writes it: `./` and the cleaned relative path (`./` alone for the root).
fn relative_path(path: &str) -> String {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    format!("./{}", parts.join("/"))
}

/// The two fields of an OpenSSH public key that identify it (`type base64`), without the
/// comment.
fn key_identity(key: &str) -> String {
    key.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

/// Registers `public_key` as the deploy key `title`: nothing when the same key is registered
/// with the same permission (under any title); a key of that title with another content or
/// permission is replaced only with `reconcile`.
pub async fn reconcile_deploy_key(
    api: &Api,
    repository: &Repository,
    title: &str,
    public_key: &str,
    read_only: bool,
    reconcile: bool,
) -> anyhow::Result<KeyOutcome> {
    let wanted = key_identity(public_key);
    let keys = deploy_keys(api, repository).await?;
    if keys
        .iter()
        .any(|key| key_identity(&key.key) == wanted && key.read_only == read_only)
    {
        return Ok(KeyOutcome::Unchanged);
    }
    let mut outcome = KeyOutcome::Added;
    for key in keys.iter().filter(|key| key.title == title) {
        if !reconcile {
            bail!(
                "the deploy key {title:?} of {} has another public key or permission than this bootstrap's; rerun with --reconcile to replace it",
                repository.id_for_humans(api.forge)
            );
        }
        delete_deploy_key(api, repository, &key.id).await?;
        outcome = KeyOutcome::Replaced;
    }
    // The same key registered under another title with another permission: GitHub refuses a
    // key twice, so that one goes too (only with `reconcile`).
    for key in keys
        .iter()
        .filter(|key| key.title != title && key_identity(&key.key) == wanted)
    {
        if !reconcile {
            bail!(
                "the public key is registered on {} as {:?} with another permission; rerun with --reconcile to replace it",
                repository.id_for_humans(api.forge),
                key.title
            );
        }
        delete_deploy_key(api, repository, &key.id).await?;
        outcome = KeyOutcome::Replaced;
    }
    add_deploy_key(api, repository, title, public_key.trim(), read_only).await?;
    Ok(outcome)
}

impl Repository {
    fn id_for_humans(&self, forge: Forge) -> String {
        match forge {
            Forge::GitHub => self.id.clone(),
            Forge::GitLab => format!("project {}", self.id),
        }
    }
}

/// `git@host:owner/name.git` (scp-like) as `ssh://git@host/owner/name.git`, the form a
/// GitRepository takes; with `ssh_hostname`, that host (and port) instead of the forge's.
pub fn ssh_url(url: &str, ssh_hostname: Option<&str>) -> anyhow::Result<String> {
    let (user, host, path) = if let Some(rest) = url.strip_prefix("ssh://") {
        let (authority, path) = rest
            .split_once('/')
            .with_context(|| format!("the ssh URL {url:?} has no path"))?;
        let (user, host) = authority.rsplit_once('@').unwrap_or(("git", authority));
        (user, host, path)
    } else {
        let (authority, path) = url
            .split_once(':')
            .with_context(|| format!("{url:?} is not an ssh URL"))?;
        let (user, host) = authority.rsplit_once('@').unwrap_or(("git", authority));
        (user, host, path.trim_start_matches('/'))
    };
    let host = ssh_hostname.unwrap_or(host);
    Ok(format!("ssh://{user}@{host}/{path}"))
}

/// The token: `GITHUB_TOKEN`/`GITLAB_TOKEN`, else read from stdin (without echo on a
/// terminal), as Flux does.
fn token(forge: Forge) -> anyhow::Result<String> {
    let variable = match forge {
        Forge::GitHub => "GITHUB_TOKEN",
        Forge::GitLab => "GITLAB_TOKEN",
    };
    if let Ok(token) = std::env::var(variable)
        && !token.trim().is_empty()
    {
        return Ok(token.trim().to_owned());
    }
    let stdin = std::io::stdin();
    let terminal = stdin.is_terminal();
    if terminal {
        eprint!("Please enter your {forge} personal access token (PAT): ");
        let _ = std::io::stderr().flush();
        let _ = Command::new("stty")
            .arg("-echo")
            .stdin(Stdio::inherit())
            .status();
    }
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if terminal {
        let _ = Command::new("stty")
            .arg("echo")
            .stdin(Stdio::inherit())
            .status();
        eprintln!();
    }
    read.context("could not read the token")?;
    let token = line.trim().to_owned();
    if token.is_empty() {
        bail!("no token: set {variable} (or give it on stdin)");
    }
    Ok(token)
}

/// The key pair of `--private-key-file` (its public key from `<file>.pub`, else derived).
fn key_from_file(common: &BootstrapFlags) -> anyhow::Result<Option<SshKey>> {
    let Some(mut key) = common.ssh_key(None)? else {
        return Ok(None);
    };
    if key.public_key.is_none() {
        key.public_key = Some(keys::public_key_of(&key.private_key)?);
    }
    Ok(Some(key))
}

/// What a forge bootstrap needs besides the core's flags.
struct Plan<'a> {
    common: &'a BootstrapFlags,
    forge: &'a ForgeFlags,
    hostname: &'a str,
    spec: RepositorySpec,
    /// `(team, permission)`.
    teams: Vec<(String, String)>,
}

/// Runs `capstan bootstrap github`.
pub async fn run_github(args: GitHubArgs) -> anyhow::Result<ExitCode> {
    let mut teams = Vec::new();
    for team in &args.team {
        let (slug, permission) = team.split_once(':').unwrap_or((team.as_str(), "maintain"));
        if !github::PERMISSIONS.contains(&permission) {
            bail!(
                "invalid permission {permission:?} for team {slug:?}: one of {}",
                github::PERMISSIONS.join(", ")
            );
        }
        teams.push((slug.to_owned(), permission.to_owned()));
    }
    let plan = Plan {
        common: &args.common,
        forge: &args.forge,
        hostname: &args.hostname,
        spec: spec(&args.forge, args.private, String::new()),
        teams,
    };
    run_forge(Forge::GitHub, &plan).await
}

/// Runs `capstan bootstrap gitlab`.
pub async fn run_gitlab(args: GitLabArgs) -> anyhow::Result<ExitCode> {
    let visibility = if args.private {
        args.visibility.clone()
    } else {
        eprintln!("Using visibility public as --private=false");
        "public".to_owned()
    };
    let plan = Plan {
        common: &args.common,
        forge: &args.forge,
        hostname: &args.hostname,
        spec: spec(&args.forge, visibility == "private", visibility),
        teams: args
            .team
            .iter()
            .map(|team| (team.clone(), "maintainer".to_owned()))
            .collect(),
    };
    run_forge(Forge::GitLab, &plan).await
}

fn spec(flags: &ForgeFlags, private: bool, visibility: String) -> RepositorySpec {
    RepositorySpec {
        owner: flags.owner.clone(),
        name: flags.repository.clone(),
        personal: flags.personal,
        private,
        visibility,
        description: flags.description.clone(),
        default_branch: flags.default_branch.clone(),
        reconcile: flags.reconcile,
    }
}

async fn run_forge(forge: Forge, plan: &Plan<'_>) -> anyhow::Result<ExitCode> {
    plan.common.check_supported()?;
    // Refuse what would fail later before anything is created on the forge.
    layout::normalize_path(&plan.common.path)?;
    if forge == Forge::GitHub && plan.spec.personal && !plan.teams.is_empty() {
        bail!("--team needs an organization: a personal repository has no teams");
    }
    let token = token(forge)?;
    let ca = plan.common.ca()?;
    let api = Api::new(
        forge,
        api::api_base(forge, plan.hostname),
        token.clone(),
        ca.as_deref(),
    )?;
    let mut out = Progress::stderr();
    let client = crate::controller::client(
        plan.common.kubeconfig.as_ref(),
        plan.common.context.as_deref(),
    )
    .await?;
    if let Some(flux) = crate::install::flux::detect(&client).await? {
        bail!(
            "refusing to bootstrap next to Flux's controllers: both would reconcile the same \
             objects\n{}",
            flux.explain().trim_end()
        );
    }
    let opts = provision(&api, &client, plan, &token, &mut out).await?;
    super::run(&client, &opts, &mut out).await?;
    Ok(ExitCode::SUCCESS)
}

/// The forge part: the repository, its teams and the deploy key; answers the core's options.
async fn provision(
    api: &Api,
    client: &kube::Client,
    plan: &Plan<'_>,
    token: &str,
    out: &mut Progress,
) -> anyhow::Result<GitBootstrap> {
    let forge = api.forge;
    let common = plan.common;
    let full_name = format!("{}/{}", plan.spec.owner, plan.spec.name);
    out.action(&format!("connecting to {}", api.base()));
    let repository = find_or_create(api, &plan.spec)
        .await
        .map_err(|e| e.context(format!("cannot find or create the repository {full_name}")))?;
    if repository.created {
        out.success(&format!("repository {full_name:?} created"));
    } else if repository.reconciled {
        out.success(&format!("repository {full_name:?} reconciled"));
    } else {
        out.success(&format!("repository {full_name:?} found"));
    }
    if !plan.teams.is_empty() {
        out.action("reconciling repository permissions");
        let granted = match forge {
            Forge::GitHub => {
                github::grant_teams(
                    api,
                    &plan.spec.owner,
                    &repository,
                    &plan.teams,
                    plan.spec.reconcile,
                )
                .await?
            }
            Forge::GitLab => gitlab::grant_teams(api, &repository, &plan.teams).await?,
        };
        for team in granted {
            out.success(&format!("granted access to {team:?}"));
        }
        out.success("reconciled repository permissions");
    }
    let (url, auth) = if plan.forge.token_auth {
        (
            repository.https_url.clone(),
            GitAuth::Basic {
                username: "git".to_owned(),
                password: token.to_owned(),
            },
        )
    } else {
        let key = match keys::existing(client, &common.namespace, &common.secret_name).await? {
            Some(key) => key,
            None => {
                if let Some(key) = key_from_file(common)? {
                    key
                } else {
                    out.generate("generating the deploy key");
                    keys::generate(&common.keys)?
                }
            }
        };
        let public_key = key.public_key.clone().unwrap_or_default();
        out.success(&format!("public key: {public_key}"));
        let title = deploy_key_name(
            &common.namespace,
            &common.branch,
            &common.secret_name,
            &common.path,
        );
        let read_only = !plan.forge.read_write_key;
        let outcome = reconcile_deploy_key(
            api,
            &repository,
            &title,
            &public_key,
            read_only,
            plan.forge.reconcile,
        )
        .await?;
        match outcome {
            KeyOutcome::Added => out.success(&format!(
                "configured deploy key {title:?} for {full_name:?}"
            )),
            KeyOutcome::Replaced => {
                out.success(&format!("replaced deploy key {title:?} for {full_name:?}"));
            }
            KeyOutcome::Unchanged => out.success(&format!("deploy key {title:?} up to date")),
        }
        let url = ssh_url(&repository.ssh_url, common.ssh_hostname.as_deref())?;
        let opts = options(plan, url, GitAuth::Ssh(key))?;
        push_with_token(
            forge,
            plan.hostname,
            &repository.https_url,
            token,
            &opts,
            out,
        )
        .await?;
        return Ok(opts);
    };
    options(plan, url, auth)
}

/// The core's options for `url` and `auth` (the sync Secret's credentials).
fn options(plan: &Plan<'_>, url: String, auth: GitAuth) -> anyhow::Result<GitBootstrap> {
    let common = plan.common;
    Ok(GitBootstrap {
        allow_insecure_http: plain_http_allowed(plan.hostname, &url),
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
        interval: plan.forge.interval,
        ca: common.ca()?,
        ssh_hostname: common.ssh_hostname.clone(),
        install: common.install_options(),
        timeout: common.timeout,
        silent: true,
    })
}

/// Whether the clone URL `url` may be plain `http://`: only when the forge and the URL are both
/// on the loopback interface (a forge on loopback is spoken to over plain HTTP, see the
/// module's documentation).
fn plain_http_allowed(hostname: &str, url: &str) -> bool {
    let host = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .map(|authority| {
            authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host)
        });
    api::is_loopback_host(hostname) && host.is_some_and(api::is_loopback_host)
}

/// Commits and pushes Flux's layout for an SSH sync over the repository's https URL with the
/// token, as Flux pushes: a read-only deploy key can fetch but not push, so the core, which
/// then clones over ssh with the deploy key, finds the branch up to date and only applies and
/// waits. The files are the core's ([`layout`]) for the same options, so they agree.
async fn push_with_token(
    forge: Forge,
    hostname: &str,
    https_url: &str,
    token: &str,
    opts: &GitBootstrap,
    out: &mut Progress,
) -> anyhow::Result<()> {
    let path = layout::normalize_path(&opts.path)?;
    let remote = git::Remote {
        url: https_url.to_owned(),
        auth: GitAuth::Basic {
            username: "git".to_owned(),
            password: token.to_owned(),
        },
        ssh_hostname: None,
        ca: opts.ca.clone(),
    };
    if https_url.starts_with("http://") && !plain_http_allowed(hostname, https_url) {
        bail!("the {forge} repository's clone URL {https_url} is plain http");
    }
    let branch = opts.branch.clone();
    out.action(&format!(
        "cloning branch \"{branch}\" from Git repository \"{https_url}\" with the token"
    ));
    let checkout = {
        let (remote, branch) = (remote.clone(), branch.clone());
        tokio::task::spawn_blocking(move || git::clone(&remote, &branch))
            .await
            .map_err(|e| anyhow::anyhow!("the Git work stopped: {e}"))??
    };
    let components_path = layout::file(&path, layout::COMPONENTS);
    let existing = git::read(&checkout, &components_path)?;
    let components = (
        components_path,
        layout::components(&opts.install)?,
        format!(
            "{} Capstan {} components manifests",
            if existing.is_some() { "Update" } else { "Add" },
            opts.install.version
        ),
    );
    let mut sync_files = vec![(
        layout::file(&path, layout::SYNC),
        layout::sync(&layout::Sync {
            namespace: opts.install.namespace.clone(),
            url: opts.sync_url.clone().unwrap_or_else(|| opts.url.clone()),
            branch: branch.clone(),
            interval: opts.interval,
            path: path.clone(),
            secret_name: Some(opts.secret_name.clone()),
        }),
    )];
    let kustomization_path = layout::file(&path, layout::KUSTOMIZATION);
    if git::read(&checkout, &kustomization_path)?.is_none() {
        let dir = checkout.path().join(&path).join(layout::DIR);
        sync_files.push((kustomization_path, layout::kustomization(&dir)?));
    }
    let steps = vec![
        (vec![(components.0, components.1)], components.2),
        (sync_files, "Add Capstan sync manifests".to_owned()),
    ];
    let author = opts.author.clone();
    let appendix = opts.commit_message_appendix.clone();
    let pushed = tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<String>> {
        let mut pushed = Vec::new();
        for (files, message) in steps {
            let message = match &appendix {
                Some(appendix) if !appendix.is_empty() => format!("{message}\n\n{appendix}"),
                _ => message,
            };
            if let Some(id) = git::commit(&checkout, &files, &author, &message)? {
                git::push(&checkout, &remote)?;
                pushed.push(format!(
                    "{} (\"{id}\")",
                    message.lines().next().unwrap_or_default()
                ));
            }
        }
        Ok(pushed)
    })
    .await
    .map_err(|e| anyhow::anyhow!("the Git work stopped: {e}"))??;
    if pushed.is_empty() {
        out.success("the repository is up to date");
    }
    for commit in pushed {
        out.success(&format!("pushed {commit} to \"{branch}\""));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{deploy_key_name, key_identity, ssh_url};

    #[test]
    fn deploy_keys_are_named_as_flux_names_them() {
        assert_eq!(
            deploy_key_name("flux-system", "main", "flux-system", "clusters/prod"),
            "flux-system-main-flux-system-./clusters/prod"
        );
        assert_eq!(
            deploy_key_name("flux-system", "main", "flux-system", "./clusters//prod/"),
            "flux-system-main-flux-system-./clusters/prod"
        );
        assert_eq!(
            deploy_key_name("apps", "prod", "git-auth", ""),
            "apps-prod-git-auth-./"
        );
    }

    #[test]
    fn ssh_clone_urls_become_ssh_urls() {
        assert_eq!(
            ssh_url("git@github.com:acme/fleet.git", None).unwrap(),
            "ssh://git@github.com/acme/fleet.git"
        );
        assert_eq!(
            ssh_url(
                "git@gitlab.com:platform/infra/fleet.git",
                Some("ssh.gitlab.example:2222")
            )
            .unwrap(),
            "ssh://git@ssh.gitlab.example:2222/platform/infra/fleet.git"
        );
        assert_eq!(
            ssh_url("ssh://me@127.0.0.1:2200/srv/git/fleet.git", None).unwrap(),
            "ssh://me@127.0.0.1:2200/srv/git/fleet.git"
        );
        assert!(ssh_url("fleet", None).is_err());
        assert!(super::plain_http_allowed(
            "127.0.0.1:8080",
            "http://127.0.0.1:9000/repo.git"
        ));
        assert!(!super::plain_http_allowed(
            "127.0.0.1:8080",
            "http://git.example.org/repo.git"
        ));
        assert!(!super::plain_http_allowed(
            "ghe.example.org",
            "http://127.0.0.1:9000/repo.git"
        ));
        assert_eq!(
            key_identity("ssh-ed25519 AAAAC3 someone@laptop\n"),
            "ssh-ed25519 AAAAC3"
        );
    }
}
