//! Fetching Git repositories the way Flux's `GitRepository` does, with gitoxide.
//!
//! # Expected flow
//! A reconciler calls [`remote_revision`] to resolve `spec.ref` to a Flux revision (one
//! reference listing, no objects downloaded); when it differs from the stored artifact's
//! revision, it calls [`fetch`], which checks the commit's tree out into a directory (no `.git`),
//! copies the artifacts of `spec.include` into it ([`copy_includes`]), then packs that directory
//! with [`crate::storage::Storage::archive`].
//!
//! ```no_run
//! # async fn example() -> capstan_source::Result<()> {
//! use capstan_source::git::{self, FetchOptions, GitAuth, GitReference};
//! let url = "https://example.com/org/repo.git";
//! let reference = GitReference::branch("main");
//! let options = FetchOptions {
//!     timeout: Some(std::time::Duration::from_secs(60)),
//!     ..FetchOptions::default()
//! };
//! let revision = git::remote_revision(url, &reference, &GitAuth::None, &options).await?;
//! let result = git::fetch(url, &reference, &GitAuth::None, "/tmp/checkout".as_ref(),
//!     &options).await?;
//! assert_eq!(result.revision, revision);
//! # Ok(())
//! # }
//! ```
//!
//! # Guarantees
//! - Revisions are Flux's: `main@sha1:<hex>`, `v1.0.0@sha1:<hex>`, `refs/heads/main@sha1:<hex>`,
//!   `sha1:<hex>`. Tags are peeled to their commit.
//! - Branch, tag, name and semver references are fetched shallowly (depth 1); a commit is fetched
//!   with the history of its branch (or of all branches and tags when no branch is given).
//! - Checkout writes regular files, executables and symbolic links below the target directory
//!   only; submodules are left out (not supported yet).
//! - The Git work runs on a blocking thread. Dropping the future returned by [`fetch`] or
//!   [`remote_revision`] (for example when `tokio::time::timeout` fires) sets
//!   [`FetchOptions::interrupt`], which gitoxide checks while receiving the pack and the
//!   checkout checks between files; [`FetchOptions::timeout`] bounds every HTTP request (and the
//!   ssh connection set-up), so a server that stops answering cannot hold the thread longer.
//!
//! # Errors
//! An unknown reference is [`Error::GitReferenceNotFound`]; transport failures are
//! [`Error::Git`]. A secret that cannot be used (incomplete, or credentials that do not fit the
//! URL's scheme) is refused with [`Error::UnsupportedGitAuth`], never ignored.

mod budget;
mod checkout;
pub mod include;
mod reference;
pub mod server;
mod ssh;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use gix::protocol::transport::client::blocking_io::http;
use gix::remote::Direction;

pub use include::{Include, copy_includes, include_path};
pub use reference::{DEFAULT_BRANCH, GitReference};
use reference::{RemoteRef, Resolved, Selector};
pub use ssh::{ssh_wrapper_main, use_current_exe_as_ssh};

use crate::artifact::Limits;
use crate::{Error, Result};

/// Credentials for a Git remote, usually read from a Flux secret with [`GitAuth::from_secret`].
#[derive(Clone, Default)]
pub enum GitAuth {
    /// No credentials (public repositories, `file://`).
    #[default]
    None,
    /// HTTP(S) credentials and trust.
    Http(HttpAuth),
    /// An ssh private key and the hosts to trust, used through the `ssh` program with strict
    /// host key checking: hosts missing from `known_hosts` are refused.
    Ssh {
        /// The private key (PEM or OpenSSH format).
        identity: Vec<u8>,
        /// `known_hosts` lines; unknown hosts are refused.
        known_hosts: Vec<u8>,
        /// `password`: the passphrase of an encrypted OpenSSH key, which Capstan decrypts
        /// itself before handing it to `ssh` (in a 0600 file removed after the fetch).
        passphrase: Option<Vec<u8>>,
    },
}

impl std::fmt::Debug for GitAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print secrets.
        match self {
            Self::None => f.write_str("None"),
            Self::Http(auth) => f
                .debug_struct("Http")
                .field("basic", &auth.basic.as_ref().map(|(user, _)| user))
                .field("bearer", &auth.bearer_token.is_some())
                .field("ca", &auth.ca_pem.is_some())
                .field("client_certificate", &auth.client_identity.is_some())
                .finish(),
            Self::Ssh { .. } => f.write_str("Ssh"),
        }
    }
}

/// HTTP(S) authentication: basic or bearer, an optional CA bundle and client certificate.
#[derive(Clone, Default)]
pub struct HttpAuth {
    /// `username` and `password`.
    pub basic: Option<(String, String)>,
    /// `bearerToken`.
    pub bearer_token: Option<String>,
    /// `ca.crt`: PEM certificates trusted in addition to the system roots.
    pub ca_pem: Option<Vec<u8>>,
    /// `tls.crt` and `tls.key`: a PEM client certificate (chain) and its private key,
    /// presented to servers asking for one (mutual TLS).
    pub client_identity: Option<ClientIdentity>,
}

/// A client certificate and its private key, both PEM.
#[derive(Clone)]
pub struct ClientIdentity {
    /// `tls.crt`: the certificate, optionally followed by intermediates.
    pub certificate_pem: Vec<u8>,
    /// `tls.key`: the private key (PKCS#8, PKCS#1 or SEC1).
    pub key_pem: Vec<u8>,
}

impl GitAuth {
    /// Reads Flux's secret keys: `username`/`password`, `bearerToken`, `ca.crt`, and the
    /// client certificate `tls.crt` with its key `tls.key` (HTTPS); `identity`/`known_hosts`
    /// (ssh). One of `tls.crt`/`tls.key` without the other is refused.
    pub fn from_secret(data: &BTreeMap<String, Vec<u8>>) -> Result<Self> {
        let text = |key: &str| -> Result<Option<String>> {
            data.get(key)
                .map(|value| {
                    String::from_utf8(value.clone()).map_err(|_| Error::UnsupportedGitAuth {
                        reason: format!("secret key {key} is not UTF-8"),
                    })
                })
                .transpose()
        };
        if data.contains_key("identity") {
            let known_hosts = data
                .get("known_hosts")
                .ok_or_else(|| Error::UnsupportedGitAuth {
                    reason: "secret has identity but no known_hosts".to_owned(),
                })?;
            return Ok(Self::Ssh {
                identity: data["identity"].clone(),
                known_hosts: known_hosts.clone(),
                passphrase: data.get("password").cloned(),
            });
        }
        let client_identity = match (data.get("tls.crt"), data.get("tls.key")) {
            (Some(certificate), Some(key)) => Some(ClientIdentity {
                certificate_pem: certificate.clone(),
                key_pem: key.clone(),
            }),
            (None, None) => None,
            (Some(_), None) => {
                return Err(Error::UnsupportedGitAuth {
                    reason: "secret has tls.crt but no tls.key".to_owned(),
                });
            }
            (None, Some(_)) => {
                return Err(Error::UnsupportedGitAuth {
                    reason: "secret has tls.key but no tls.crt".to_owned(),
                });
            }
        };
        let basic = match (text("username")?, text("password")?) {
            (Some(user), Some(password)) => Some((user, password)),
            (None, None) => None,
            _ => {
                return Err(Error::UnsupportedGitAuth {
                    reason: "secret must have both username and password".to_owned(),
                });
            }
        };
        let auth = HttpAuth {
            basic,
            bearer_token: text("bearerToken")?,
            ca_pem: data.get("ca.crt").cloned(),
            client_identity,
        };
        if auth.basic.is_some() && auth.bearer_token.is_some() {
            return Err(Error::UnsupportedGitAuth {
                reason: "secret has both username/password and bearerToken".to_owned(),
            });
        }
        if auth.basic.is_none()
            && auth.bearer_token.is_none()
            && auth.ca_pem.is_none()
            && auth.client_identity.is_none()
        {
            return Ok(Self::None);
        }
        Ok(Self::Http(auth))
    }
}

/// Options of [`fetch`] and [`remote_revision`].
#[derive(Debug, Clone, Default)]
pub struct FetchOptions {
    /// Fetch the whole history instead of the tip only (ignored for commit references, which
    /// always fetch history).
    pub full_history: bool,
    /// Bounds every HTTP request (connection, headers and body) and the ssh connection
    /// set-up; `None` keeps the transports' defaults. Callers bounding the whole operation
    /// (e.g. with `tokio::time::timeout`) should pass the same duration, so that the blocking
    /// thread stops waiting on a silent server when the operation is abandoned.
    pub timeout: Option<Duration>,
    /// Setting this flag stops the blocking Git work at its next check (while receiving the
    /// pack, between checked-out files). It is set automatically when the future of
    /// [`fetch`] or [`remote_revision`] is dropped before it completes. The blocking thread
    /// holds a clone of it until it finishes. Use a fresh flag per operation.
    pub interrupt: Arc<AtomicBool>,
    /// What the server may make a fetch read and write: the pack received is bounded by
    /// `max_archive_bytes`, the bytes inflated from it by `max_total_bytes`, any single object
    /// by `max_file_bytes`, and the checkout by the file, total and entry limits, all enforced
    /// as the bytes arrive ([`Error::GitLimitExceeded`]). Pass the limits the artifact will be
    /// packed with, so what is fetched can be stored.
    pub limits: Limits,
}

/// Sets the interrupt flag when dropped, unless disarmed: the future owning it was dropped
/// before the blocking work finished.
struct InterruptOnDrop(Option<Arc<AtomicBool>>);

impl InterruptOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for InterruptOnDrop {
    fn drop(&mut self) {
        if let Some(flag) = self.0.take() {
            flag.store(true, Ordering::SeqCst);
        }
    }
}

/// Runs `work` (which holds a clone of `options`) on a blocking thread; the interrupt flag of
/// `options` is set when the returned future is dropped early.
async fn run_blocking<T: Send + 'static>(
    options: &FetchOptions,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let guard = InterruptOnDrop(Some(Arc::clone(&options.interrupt)));
    let result = tokio::task::spawn_blocking(work).await.map_err(Error::Task);
    guard.disarm();
    result?
}

fn check_interrupt(interrupt: &AtomicBool, operation: &'static str, url: &str) -> Result<()> {
    if interrupt.load(Ordering::SeqCst) {
        return Err(interrupted(operation, url));
    }
    Ok(())
}

fn interrupted(operation: &'static str, url: &str) -> Error {
    git_error(
        operation,
        url,
        std::io::Error::new(std::io::ErrorKind::Interrupted, "interrupted"),
    )
}

/// What [`fetch`] checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResult {
    /// The Flux revision, e.g. `main@sha1:<hex>`.
    pub revision: String,
    /// The commit id (40 hex characters).
    pub commit: String,
    /// The remote reference fetched (`refs/heads/main`), `None` for a bare commit.
    pub reference: Option<String>,
}

/// Resolves `reference` on the remote to a Flux revision without downloading objects.
///
/// A commit reference resolves without contacting the remote. Only
/// [`FetchOptions::timeout`] and [`FetchOptions::interrupt`] of `options` are used.
pub async fn remote_revision(
    url: &str,
    reference: &GitReference,
    auth: &GitAuth,
    options: &FetchOptions,
) -> Result<String> {
    let selector = reference.selector()?;
    if matches!(selector, Selector::Commit { .. }) {
        return Ok(selector.resolve(url, &[])?.revision);
    }
    let url = url.to_owned();
    let auth = auth.clone();
    let work_options = options.clone();
    run_blocking(options, move || {
        let options = work_options;
        let scratch = scratch_dir()?;
        let repo = init_scratch(&url, scratch.path(), &auth, &options)?;
        check_interrupt(&options.interrupt, "list references of", &url)?;
        Ok(list_and_resolve(&repo, &url, &selector, &auth, &options)?.revision)
    })
    .await
}

/// Fetches `reference` from `url` and checks its tree out into `dest_dir`.
///
/// `dest_dir` must not exist or be empty; no `.git` directory is written.
pub async fn fetch(
    url: &str,
    reference: &GitReference,
    auth: &GitAuth,
    dest_dir: &Path,
    options: &FetchOptions,
) -> Result<FetchResult> {
    let selector = reference.selector()?;
    let url = url.to_owned();
    let auth = auth.clone();
    let dest_dir = dest_dir.to_owned();
    let work_options = options.clone();
    run_blocking(options, move || {
        fetch_blocking(&url, &selector, &auth, &dest_dir, &work_options)
    })
    .await
}

fn fetch_blocking(
    url: &str,
    selector: &Selector,
    auth: &GitAuth,
    dest_dir: &Path,
    options: &FetchOptions,
) -> Result<FetchResult> {
    let interrupt = &*options.interrupt;
    checkout::prepare_target(dest_dir)?;
    let scratch = scratch_dir()?;
    let repo = init_scratch(url, scratch.path(), auth, options)?;
    check_interrupt(interrupt, "list references of", url)?;
    let resolved = if let Selector::Commit { .. } = selector {
        selector.resolve(url, &[])?
    } else {
        list_and_resolve(&repo, url, selector, auth, options)?
    };
    check_interrupt(interrupt, "fetch", url)?;
    let (specs, shallow) = match (&resolved.remote_ref, selector) {
        (None, _) => (
            vec![
                "+refs/heads/*:refs/heads/*".to_owned(),
                "+refs/tags/*:refs/tags/*".to_owned(),
            ],
            false,
        ),
        (Some(name), Selector::Commit { .. }) => (vec![format!("+{name}:{name}")], false),
        (Some(name), _) => (vec![format!("+{name}:{name}")], !options.full_history),
    };
    let remote = repo
        .remote_at(url)
        .and_then(|remote| remote.with_refspecs(specs.iter().map(String::as_str), Direction::Fetch))
        .map(|remote| remote.with_fetch_tags(gix::remote::fetch::Tags::None))
        .map_err(|e| git_error("open", url, e))?;
    let connection = connect(&remote, url, auth, options.timeout)?;
    let mut prepare = connection
        .prepare_fetch(
            gix::progress::Discard,
            gix::remote::ref_map::Options::default(),
        )
        .map_err(|e| git_error("list references of", url, e))?;
    if shallow {
        prepare = prepare.with_shallow(gix::remote::fetch::Shallow::DepthAtRemote(
            std::num::NonZeroU32::MIN,
        ));
    }
    check_interrupt(interrupt, "fetch", url)?;
    let budget = budget::Budget::new(options.limits, Arc::clone(&options.interrupt));
    let received = prepare.receive(budget.clone(), interrupt);
    if let Some(exceeded) = budget.exceeded() {
        return Err(limit_exceeded("fetch", url, None, exceeded));
    }
    received.map_err(|e| git_error("fetch", url, e))?;
    check_interrupt(interrupt, "fetch", url)?;
    let commit_id = gix::ObjectId::from_hex(resolved.commit.as_bytes())
        .map_err(|e| git_error("parse commit id from", url, e))?;
    let tree = match repo.find_commit(commit_id) {
        Ok(commit) => commit
            .tree_id()
            .map_err(|e| git_error("read commit of", url, e))?,
        Err(_) => {
            return Err(Error::GitReferenceNotFound {
                url: crate::redact::url(url),
                reference: selector.to_string(),
            });
        }
    };
    let mut limits = budget::CheckoutBudget::new(options.limits);
    checkout::write_tree(&repo, tree.detach(), dest_dir, interrupt, &mut limits).map_err(
        |error| match error {
            checkout::CheckoutError::Limit { entry, exceeded } => {
                limit_exceeded("check out", url, Some(entry), exceeded)
            }
            checkout::CheckoutError::Io(error) => error,
            checkout::CheckoutError::Git(source) => Error::Git {
                operation: "check out",
                url: crate::redact::url(url),
                cause: crate::redact::error_chain(source.as_ref()),
                source,
            },
            checkout::CheckoutError::Interrupted => interrupted("check out", url),
        },
    )?;
    Ok(FetchResult {
        revision: resolved.revision,
        commit: resolved.commit,
        reference: resolved.remote_ref,
    })
}

fn scratch_dir() -> Result<tempfile::TempDir> {
    // Named as every Capstan temporary directory, so a crash's leftovers are swept at start.
    crate::temp::dir("git").map_err(|e| Error::io("create", std::env::temp_dir(), e))
}

/// The scheme of `url`; scp-like `user@host:path` counts as `ssh`.
fn url_scheme(url: &str) -> &str {
    match url.split_once("://") {
        Some((scheme, _)) => scheme,
        None if url.contains(':') => "ssh",
        None => "file",
    }
}

/// A throw-away bare repository to fetch into. For ssh credentials, the identity and
/// known hosts are written next to it and `core.sshCommand` makes `ssh` use only those, with
/// strict host key checking.
fn init_scratch(
    url: &str,
    dir: &Path,
    auth: &GitAuth,
    options: &FetchOptions,
) -> Result<gix::Repository> {
    let git_dir = dir.join("repo.git");
    let repo = gix::init_bare(&git_dir)
        .map_err(|e| git_error("create a scratch repository for", url, e))?;
    drop(repo);
    // No single object (nor delta result) may need more memory than the largest file an
    // artifact may hold: gitoxide refuses the allocation instead of making it.
    let mut extra = format!(
        "[gitoxide \"objects\"]\n\tallocLimit = {}\n",
        options.limits.max_file_bytes
    );
    if let GitAuth::Ssh {
        identity,
        known_hosts,
        passphrase,
    } = auth
    {
        let command = ssh::prepare(
            dir,
            identity,
            passphrase.as_deref(),
            known_hosts,
            options.timeout,
        )?;
        writeln!(
            extra,
            "[core]\n\tsshCommand = \"{}\"",
            command.replace('\\', "\\\\").replace('"', "\\\"")
        )
        .expect("writing to a String cannot fail");
    }
    let config_path = git_dir.join("config");
    let mut config =
        fs_err::read_to_string(&config_path).map_err(|e| Error::io("read", &config_path, e))?;
    config.push_str(&extra);
    fs_err::write(&config_path, config).map_err(|e| Error::io("write", &config_path, e))?;
    gix::open(&git_dir).map_err(|e| git_error("open the scratch repository for", url, e))
}

fn write_private(path: &Path, content: &[u8]) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io("create", path, e))?;
    file.write_all(content)
        .map_err(|e| Error::io("write", path, e))
}

fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

fn list_and_resolve(
    repo: &gix::Repository,
    url: &str,
    selector: &Selector,
    auth: &GitAuth,
    options: &FetchOptions,
) -> Result<Resolved> {
    let specs: Vec<String> = selector
        .refspec_sources()
        .into_iter()
        .map(|source| format!("+{source}:{source}"))
        .collect();
    let remote = repo
        .remote_at(url)
        .and_then(|remote| remote.with_refspecs(specs.iter().map(String::as_str), Direction::Fetch))
        .map(|remote| remote.with_fetch_tags(gix::remote::fetch::Tags::None))
        .map_err(|e| git_error("open", url, e))?;
    let connection = connect(&remote, url, auth, options.timeout)?;
    let (ref_map, _handshake) = connection
        .ref_map(
            gix::progress::Discard,
            gix::remote::ref_map::Options::default(),
        )
        .map_err(|e| git_error("list references of", url, e))?;
    let refs: Vec<RemoteRef> = ref_map
        .remote_refs
        .iter()
        .filter_map(|advertised| {
            use gix::protocol::handshake::Ref;
            let (name, commit) = match advertised {
                Ref::Peeled {
                    full_ref_name,
                    object,
                    ..
                }
                | Ref::Direct {
                    full_ref_name,
                    object,
                }
                | Ref::Symbolic {
                    full_ref_name,
                    object,
                    ..
                } => (full_ref_name, object),
                Ref::Unborn { .. } => return None,
            };
            Some(RemoteRef {
                name: name.to_string(),
                commit: commit.to_hex().to_string(),
            })
        })
        .collect();
    selector.resolve(url, &refs)
}

type Connection<'remote, 'repo> = gix::remote::Connection<
    'remote,
    'static,
    'repo,
    Box<dyn gix::protocol::transport::client::blocking_io::Transport + Send>,
>;

fn connect<'remote, 'repo>(
    remote: &'remote gix::Remote<'repo>,
    url: &str,
    auth: &GitAuth,
    timeout: Option<Duration>,
) -> Result<Connection<'remote, 'repo>> {
    match (url_scheme(url), auth) {
        ("ssh", GitAuth::Ssh { .. }) => ssh::require_ssh(url)?,
        ("file", GitAuth::None) => {}
        ("ssh", _) => {
            return Err(Error::UnsupportedGitAuth {
                reason: format!(
                    "ssh url {} needs identity and known_hosts in the secret",
                    crate::redact::url(url)
                ),
            });
        }
        // gitoxide's reqwest client uses the process-wide rustls provider.
        ("http" | "https", GitAuth::None | GitAuth::Http(_)) => {
            crate::tls::install_default_provider();
        }
        (other, GitAuth::None) => {
            return Err(Error::InvalidGitReference {
                reason: format!(
                    "unsupported url scheme {other:?} in {}",
                    crate::redact::url(url)
                ),
            });
        }
        (other, _) => {
            return Err(Error::UnsupportedGitAuth {
                reason: format!("the secret's credentials cannot be used with a {other} url"),
            });
        }
    }
    // Never ask a terminal or a credential helper: credentials come from the secret only, and
    // a server asking for them is reported as what it is.
    let connection = remote
        .connect(Direction::Fetch)
        .map_err(|e| git_error("connect to", url, e))?
        .with_credentials(if url_scheme(url) == "ssh" {
            refuse_ssh_credential_prompt
        } else {
            refuse_credential_prompt
        });
    match auth {
        GitAuth::Http(http_auth) => Ok(
            connection.with_transport_options(Box::new(http_options(Some(http_auth), timeout)?))
        ),
        GitAuth::None if timeout.is_some() && url_scheme(url).starts_with("http") => {
            Ok(connection.with_transport_options(Box::new(http_options(None, timeout)?)))
        }
        _ => Ok(connection),
    }
}

/// The credential helper of every connection: a server asking for credentials (HTTP 401)
/// gets none beyond those of the secret, and the error says so. (gix hands the action over
/// by value.)
#[allow(clippy::needless_pass_by_value)]
fn refuse_credential_prompt(
    action: gix::credentials::helper::Action,
) -> gix::Result<Option<gix::credentials::protocol::Outcome>> {
    match action {
        gix::credentials::helper::Action::Get(_) => {
            Err(gix::Error::from_error(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "the server answered HTTP 401 Unauthorized: the credentials of spec.secretRef \
                 are missing or not accepted",
            )))
        }
        _ => Ok(None),
    }
}

/// [`refuse_credential_prompt`] for ssh remotes: gitoxide asks for credentials when `ssh` says
/// "Permission denied", which is the server refusing the key.
#[allow(clippy::needless_pass_by_value)]
fn refuse_ssh_credential_prompt(
    action: gix::credentials::helper::Action,
) -> gix::Result<Option<gix::credentials::protocol::Outcome>> {
    match action {
        gix::credentials::helper::Action::Get(_) => {
            Err(gix::Error::from_error(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "the ssh server refused the key: the identity of spec.secretRef is not \
                 authorized there",
            )))
        }
        _ => Ok(None),
    }
}

/// HTTP transport options carrying the credentials, CA bundle, client certificate and request
/// timeout into gitoxide's reqwest client.
fn http_options(auth: Option<&HttpAuth>, timeout: Option<Duration>) -> Result<http::Options> {
    crate::tls::install_default_provider();
    let default_auth = HttpAuth::default();
    let auth = auth.unwrap_or(&default_auth);
    let authorization = match (&auth.basic, &auth.bearer_token) {
        (Some((user, password)), _) => Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )),
        (None, Some(token)) => Some(format!("Bearer {token}")),
        (None, None) => None,
    };
    let authorization = authorization
        .map(|value| {
            reqwest::header::HeaderValue::from_str(&value).map_err(|_| Error::UnsupportedGitAuth {
                reason: "credentials contain characters not allowed in an HTTP header".to_owned(),
            })
        })
        .transpose()?
        .map(|mut value| {
            value.set_sensitive(true);
            value
        });
    let certificates = auth
        .ca_pem
        .as_deref()
        .map(|pem| {
            reqwest::Certificate::from_pem_bundle(pem).map_err(|e| Error::InvalidCertificate {
                reason: format!("ca.crt: {e}"),
            })
        })
        .transpose()?;
    let identity = auth
        .client_identity
        .as_ref()
        .map(|identity| {
            let mut pem = identity.key_pem.clone();
            pem.push(b'\n');
            pem.extend_from_slice(&identity.certificate_pem);
            reqwest::Identity::from_pem(&pem).map_err(|e| Error::UnsupportedGitAuth {
                reason: format!("tls.crt and tls.key are not a PEM certificate and key: {e}"),
            })
        })
        .transpose()?;
    let mut backend = http::reqwest::Options::default();
    if certificates.is_some() || identity.is_some() || timeout.is_some() {
        backend.configure_client = Some(Box::new(move |mut builder| {
            if let Some(certificates) = &certificates {
                builder = builder.tls_certs_merge(certificates.clone());
            }
            if let Some(identity) = &identity {
                builder = builder.identity(identity.clone());
            }
            if let Some(timeout) = timeout {
                builder = builder.connect_timeout(timeout).timeout(timeout);
            }
            Ok(builder)
        }));
    }
    if let Some(authorization) = authorization {
        backend.configure_request = Some(Box::new(move |request| {
            request
                .headers_mut()
                .insert(reqwest::header::AUTHORIZATION, authorization.clone());
            Ok(())
        }));
    }
    Ok(http::Options {
        backend: Some(Arc::new(Mutex::new(backend))),
        ..http::Options::default()
    })
}

fn limit_exceeded(
    operation: &'static str,
    url: &str,
    entry: Option<String>,
    exceeded: budget::Exceeded,
) -> Error {
    Error::GitLimitExceeded {
        operation,
        url: crate::redact::url(url),
        entry,
        what: exceeded.what,
        limit: exceeded.limit,
    }
}

fn git_error(
    operation: &'static str,
    url: &str,
    source: impl std::error::Error + Send + Sync + 'static,
) -> Error {
    Error::Git {
        operation,
        url: crate::redact::url(url),
        cause: crate::redact::error_chain(&source),
        source: Box::new(source),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), value.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn reads_flux_secret_keys() {
        let GitAuth::Http(auth) =
            GitAuth::from_secret(&secret(&[("username", "u"), ("password", "p")])).unwrap()
        else {
            panic!("expected http auth");
        };
        assert_eq!(auth.basic, Some(("u".to_owned(), "p".to_owned())));
        let GitAuth::Http(auth) =
            GitAuth::from_secret(&secret(&[("bearerToken", "t"), ("ca.crt", "pem")])).unwrap()
        else {
            panic!("expected http auth");
        };
        assert_eq!(auth.bearer_token.as_deref(), Some("t"));
        assert_eq!(auth.ca_pem.as_deref(), Some(&b"pem"[..]));
        assert!(matches!(
            GitAuth::from_secret(&secret(&[("identity", "k"), ("known_hosts", "h")])).unwrap(),
            GitAuth::Ssh { .. }
        ));
        assert!(matches!(
            GitAuth::from_secret(&BTreeMap::new()).unwrap(),
            GitAuth::None
        ));
    }

    #[test]
    fn refuses_incomplete_or_unsupported_secrets() {
        for (pairs, message) in [
            (
                &[("username", "u")][..],
                "secret must have both username and password",
            ),
            (
                &[("identity", "k")][..],
                "secret has identity but no known_hosts",
            ),
            (&[("tls.crt", "c")][..], "secret has tls.crt but no tls.key"),
            (&[("tls.key", "k")][..], "secret has tls.key but no tls.crt"),
            (
                &[("username", "u"), ("password", "p"), ("bearerToken", "t")][..],
                "secret has both username/password and bearerToken",
            ),
        ] {
            let error = GitAuth::from_secret(&secret(pairs)).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("unsupported git authentication: {message}")
            );
        }
    }

    #[test]
    fn debug_never_prints_secrets() {
        let auth =
            GitAuth::from_secret(&secret(&[("username", "u"), ("password", "hunter2")])).unwrap();
        assert!(!format!("{auth:?}").contains("hunter2"));
        let auth = GitAuth::from_secret(&secret(&[("identity", "PRIVATE"), ("known_hosts", "h")]))
            .unwrap();
        assert!(!format!("{auth:?}").contains("PRIVATE"));
    }

    #[test]
    fn classifies_url_schemes() {
        assert_eq!(url_scheme("https://h/r.git"), "https");
        assert_eq!(url_scheme("git@github.com:org/repo.git"), "ssh");
        assert_eq!(url_scheme("/srv/repo.git"), "file");
    }

    #[test]
    fn refuses_an_invalid_ca_bundle() {
        let auth = HttpAuth {
            ca_pem: Some(
                b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".to_vec(),
            ),
            ..HttpAuth::default()
        };
        let Err(error) = http_options(Some(&auth), None) else {
            panic!("an invalid CA bundle was accepted");
        };
        assert!(
            error
                .to_string()
                .starts_with("invalid CA certificate: ca.crt"),
            "{error}"
        );
    }

    #[test]
    fn reads_a_client_certificate_and_refuses_an_invalid_one() {
        let secret_auth =
            GitAuth::from_secret(&secret(&[("tls.crt", "CERT"), ("tls.key", "KEY")])).unwrap();
        assert!(!format!("{secret_auth:?}").contains("KEY"));
        let GitAuth::Http(auth) = secret_auth else {
            panic!("expected http auth");
        };
        let identity = auth.client_identity.as_ref().unwrap();
        assert_eq!(identity.certificate_pem, b"CERT");
        assert_eq!(identity.key_pem, b"KEY");
        let Err(error) = http_options(Some(&auth), None) else {
            panic!("an invalid client certificate was accepted");
        };
        assert!(
            error
                .to_string()
                .starts_with("unsupported git authentication: tls.crt and tls.key are not"),
            "{error}"
        );
    }
}
