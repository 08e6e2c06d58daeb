//! Cloning, committing and pushing with libgit2 (`git2`): one branch of one repository, checked
//! out in a temporary directory. Blocking; [`super::run`] calls it on blocking threads.
//!
//! Credentials come from [`GitAuth`] through libgit2's callbacks, never through the URL, so
//! libgit2's errors cannot carry them. Over SSH, the server's host key is recorded as it is
//! presented (trust on first use, as `flux bootstrap` scans it) and becomes the source Secret's
//! `known_hosts`. Over https with a CA (`--ca-file`), the server's certificate must chain to
//! that CA and name the URL's host (checked with rustls' WebPKI verifier); without one,
//! libgit2's own check against the system roots applies.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use base64::Engine;
use git2::{
    CertificateCheckStatus, Cred, CredentialType, Direction, FetchOptions, PushOptions,
    RemoteCallbacks, Repository, Signature,
};

use super::{Author, GitAuth};

/// How to reach the repository.
#[derive(Debug, Clone)]
pub struct Remote {
    pub url: String,
    pub auth: GitAuth,
    /// The host name recorded in known_hosts instead of the URL's.
    pub ssh_hostname: Option<String>,
    /// The CA certificates (PEM) an https server's certificate must chain to (`--ca-file`);
    /// `None`: libgit2's check against the system roots.
    pub ca: Option<Vec<u8>>,
}

/// The check of an https server's certificate against the CA of `--ca-file`, and the
/// reason of the last refusal (libgit2 may not carry a callback's message through).
struct CaCheck {
    verifier: Arc<rustls::client::WebPkiServerVerifier>,
    refused: Mutex<Option<String>>,
}

impl std::fmt::Debug for CaCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaCheck").finish_non_exhaustive()
    }
}

impl CaCheck {
    /// The check for `remote`'s CA, `None` without one.
    fn of(remote: &Remote) -> anyhow::Result<Option<Self>> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject as _;
        let Some(pem) = &remote.ca else {
            return Ok(None);
        };
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert =
                cert.map_err(|e| anyhow::anyhow!("--ca-file: not a PEM certificate: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| anyhow::anyhow!("--ca-file: not a usable CA certificate: {e}"))?;
        }
        anyhow::ensure!(
            !roots.is_empty(),
            "--ca-file holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        );
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .map_err(|e| anyhow::anyhow!("--ca-file: {e}"))?;
        Ok(Some(Self {
            verifier,
            refused: Mutex::new(None),
        }))
    }

    /// Checks the DER certificate `der` a server presented for `host`; the error says why it
    /// is refused.
    fn check(&self, der: &[u8], host: &str) -> Result<(), String> {
        use rustls::client::danger::ServerCertVerifier as _;
        use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| format!("'{host}' is not a host name a certificate can be checked for"))?;
        self.verifier
            .verify_server_cert(&CertificateDer::from(der), &[], &name, &[], UnixTime::now())
            .map(drop)
            .map_err(|e| match e {
                rustls::Error::InvalidCertificate(
                    rustls::CertificateError::UnknownIssuer
                    | rustls::CertificateError::BadSignature,
                ) => "the server's certificate is not signed by the CA given with --ca-file"
                    .to_owned(),
                rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. },
                ) => format!("the server's certificate is not valid for the host '{host}'"),
                other => format!("the server's certificate is refused: {other}"),
            })
    }

    fn take_refusal(&self) -> Option<String> {
        self.refused.lock().ok()?.take()
    }
}

/// The error for a failed connection: the CA check's or the host key check's refusal when
/// there is one, else libgit2's (with a hint on certificate errors without a CA).
fn connection_error(
    error: git2::Error,
    trusted: Option<&Trusted>,
    host_key: &HostKey,
    ca: Option<&CaCheck>,
) -> anyhow::Error {
    if let Some(reason) = ca.and_then(CaCheck::take_refusal) {
        return anyhow::anyhow!("{reason}");
    }
    if let Some(refused) = refused_host(trusted, host_key) {
        return refused;
    }
    if ca.is_none()
        && (error.class() == git2::ErrorClass::Ssl || error.code() == git2::ErrorCode::Certificate)
    {
        return anyhow::anyhow!(
            "{}\nhint: if the server's certificate is issued by a private CA, give that CA \
             with --ca-file",
            error.message()
        );
    }
    error.into()
}

/// A checkout of one branch.
#[derive(Debug)]
pub struct Checkout {
    dir: tempfile::TempDir,
    pub branch: String,
    /// `known_hosts` lines for the SSH server (empty over http(s)).
    pub known_hosts: String,
    /// The host keys the pushes must meet (see [`clone_trusting`]).
    trusted: Option<Arc<Trusted>>,
}

/// The host keys known for the SSH server of a URL: a server presenting another key is
/// refused.
#[derive(Debug)]
struct Trusted {
    /// The known_hosts host field of the server (`host` or `[host]:port`).
    host: String,
    /// `(type, base64 key)` of the lines for that host.
    keys: Vec<(String, String)>,
}

impl Trusted {
    /// The lines of `known_hosts` for the SSH server of `remote`; `None` when there are none
    /// (the first bootstrap: the presented key is recorded).
    fn of(remote: &Remote, known_hosts: &str) -> Option<Self> {
        let (host, port) = ssh_host(&remote.url)?;
        let host = remote.ssh_hostname.clone().unwrap_or(host);
        let field = if port == 22 {
            host
        } else {
            format!("[{host}]:{port}")
        };
        let keys: Vec<(String, String)> = known_hosts
            .lines()
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                let hosts = words.next()?;
                let kind = words.next()?;
                let key = words.next()?;
                hosts
                    .split(',')
                    .any(|h| h == field)
                    .then(|| (kind.to_owned(), key.to_owned()))
            })
            .collect();
        (!keys.is_empty()).then_some(Self { host: field, keys })
    }

    fn accepts(&self, kind: &str, raw: &[u8]) -> bool {
        let key = base64::engine::general_purpose::STANDARD.encode(raw);
        self.keys.iter().any(|(k, v)| k == kind && *v == key)
    }
}

impl Checkout {
    /// The work tree.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The host key an SSH server presented.
type HostKey = Arc<Mutex<Option<(String, Vec<u8>)>>>;

/// Callbacks answering credentials from `auth` (a few attempts, then a plain error) and
/// recording an SSH host key into `host_key`.
fn callbacks<'a>(
    auth: &'a GitAuth,
    host_key: &HostKey,
    trusted: Option<&'a Trusted>,
    ca: Option<&'a CaCheck>,
) -> RemoteCallbacks<'a> {
    let mut callbacks = RemoteCallbacks::new();
    let attempts = Cell::new(0u8);
    callbacks.credentials(move |_url, username_from_url, allowed| {
        attempts.set(attempts.get() + 1);
        if attempts.get() > 3 {
            return Err(git2::Error::from_str(
                "authentication failed: the server refused the credentials",
            ));
        }
        credentials(auth, username_from_url, allowed)
    });
    let host_key = host_key.clone();
    callbacks.certificate_check(move |cert, host| {
        if let (Some(ca), Some(x509)) = (ca, cert.as_x509()) {
            return match ca.check(x509.data(), host) {
                Ok(()) => Ok(CertificateCheckStatus::CertificateOk),
                Err(reason) => {
                    if let Ok(mut slot) = ca.refused.lock() {
                        *slot = Some(reason.clone());
                    }
                    Err(git2::Error::from_str(&reason))
                }
            };
        }
        if let Some(key) = cert.as_hostkey()
            && let (Some(raw), Some(kind)) = (key.hostkey(), key.hostkey_type())
        {
            if let Ok(mut slot) = host_key.lock() {
                *slot = Some((kind.name().to_owned(), raw.to_vec()));
            }
            if let Some(trusted) = trusted
                && !trusted.accepts(kind.name(), raw)
            {
                return Err(git2::Error::from_str(&format!(
                    "the SSH server presented a {} host key that is not the one known for {} \
                     (known_hosts of the source Secret): refusing to connect",
                    kind.name(),
                    trusted.host
                )));
            }
            return Ok(CertificateCheckStatus::CertificateOk);
        }
        Ok(CertificateCheckStatus::CertificatePassthrough)
    });
    callbacks
}

fn credentials(
    auth: &GitAuth,
    username_from_url: Option<&str>,
    allowed: CredentialType,
) -> Result<Cred, git2::Error> {
    match auth {
        GitAuth::Ssh(key) if allowed.contains(CredentialType::SSH_KEY) => {
            let user = username_from_url
                .or(key.username.as_deref())
                .unwrap_or("git");
            Cred::ssh_key_from_memory(
                user,
                key.public_key.as_deref(),
                &key.private_key,
                key.passphrase.as_deref(),
            )
            .map_err(|_| {
                git2::Error::from_str(
                    "cannot use the SSH private key (is it a valid PEM or OpenSSH key, and \
                     its passphrase right?)",
                )
            })
        }
        GitAuth::Ssh(_) if allowed.contains(CredentialType::USERNAME) => {
            Cred::username(username_from_url.unwrap_or("git"))
        }
        GitAuth::Basic { username, password }
            if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) =>
        {
            Cred::userpass_plaintext(username, password)
        }
        _ => Err(git2::Error::from_str(
            "the server asks for credentials that were not given (--private-key-file for \
             ssh, --username/--password for http(s))",
        )),
    }
}

fn headers(auth: &GitAuth) -> Vec<String> {
    match auth {
        GitAuth::Bearer { token } => vec![format!("Authorization: Bearer {token}")],
        _ => Vec::new(),
    }
}

/// The host and port of an SSH URL (`ssh://user@host:port/path`, `user@host:path`).
fn ssh_host(url: &str) -> Option<(String, u16)> {
    if let Some(rest) = url.strip_prefix("ssh://") {
        let authority = rest.split('/').next()?;
        let host_port = authority.rsplit('@').next()?;
        return Some(match host_port.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => {
                (host.to_owned(), port.parse().ok()?)
            }
            _ => (host_port.to_owned(), 22),
        });
    }
    if url.contains("://") {
        return None;
    }
    let (authority, _) = url.split_once(':')?;
    Some((authority.rsplit('@').next()?.to_owned(), 22))
}

/// A known_hosts line for `host`:`port` with `key`.
fn known_hosts_line(host: &str, port: u16, kind: &str, key: &[u8]) -> String {
    let key = base64::engine::general_purpose::STANDARD.encode(key);
    if port == 22 {
        format!("{host} {kind} {key}\n")
    } else {
        format!("[{host}]:{port} {kind} {key}\n")
    }
}

/// The error for a host key `trusted` does not accept, if that is what was presented.
fn refused_host(trusted: Option<&Trusted>, host_key: &HostKey) -> Option<anyhow::Error> {
    let trusted = trusted?;
    let (kind, raw) = host_key.lock().ok()?.clone()?;
    (!trusted.accepts(&kind, &raw)).then(|| {
        anyhow::anyhow!(
            "the SSH server presented a {kind} host key that is not the one known for {} \
             (known_hosts of the source Secret, recorded by an earlier bootstrap): refusing to \
             connect\nhint: if the server's key really changed, update known_hosts in the \
             Secret",
            trusted.host
        )
    })
}

/// Clones `branch` of `remote` (an empty repository or a missing branch gives an unborn
/// branch, created by the first commit).
pub fn clone(remote: &Remote, branch: &str) -> anyhow::Result<Checkout> {
    clone_trusting(remote, branch, "")
}

/// As [`clone`], refusing an SSH server (here and when pushing) whose host key differs from
/// the one `known_hosts` lists for it (the source Secret's, from an earlier bootstrap).
pub fn clone_trusting(
    remote: &Remote,
    branch: &str,
    known_hosts: &str,
) -> anyhow::Result<Checkout> {
    let trusted = Trusted::of(remote, known_hosts).map(Arc::new);
    let ca = CaCheck::of(remote)?;
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let repo = Repository::init(dir.path()).context("creating the local repository")?;
    let mut origin = repo
        .remote("origin", &remote.url)
        .context("adding the remote")?;
    let host_key = HostKey::default();
    let reference = format!("refs/heads/{branch}");
    let tracking = format!("refs/remotes/origin/{branch}");
    let fetch = |origin: &mut git2::Remote<'_>| -> anyhow::Result<()> {
        let custom = headers(&remote.auth);
        let custom: Vec<&str> = custom.iter().map(String::as_str).collect();
        let mut options = FetchOptions::new();
        options
            .remote_callbacks(callbacks(
                &remote.auth,
                &host_key,
                trusted.as_deref(),
                ca.as_ref(),
            ))
            .custom_headers(&custom);
        origin
            .fetch(
                &[format!("+{reference}:{tracking}")],
                Some(&mut options),
                None,
            )
            .map_err(|e| connection_error(e, trusted.as_deref(), &host_key, ca.as_ref()))
            .with_context(|| format!("cannot fetch branch '{branch}' from {}", remote.url))
    };
    // libgit2's connect sends no custom header, so a server wanting the bearer token would
    // refuse the listing: with a token, the fetch (which carries it) tells whether the branch
    // exists (a missing one fetches nothing).
    let bearer = matches!(remote.auth, GitAuth::Bearer { .. });
    let exists = if bearer {
        fetch(&mut origin)?;
        repo.find_reference(&tracking).is_ok()
    } else {
        let connection = origin
            .connect_auth(
                Direction::Fetch,
                Some(callbacks(
                    &remote.auth,
                    &host_key,
                    trusted.as_deref(),
                    ca.as_ref(),
                )),
                None,
            )
            .map_err(|e| connection_error(e, trusted.as_deref(), &host_key, ca.as_ref()))
            .with_context(|| format!("cannot connect to {}", remote.url))?;
        connection
            .list()
            .context("listing the remote's references")?
            .iter()
            .any(|head| head.name() == reference)
    };
    if exists {
        if !bearer {
            fetch(&mut origin)?;
        }
        let fetched = repo.find_reference(&tracking)?.peel_to_commit()?;
        repo.branch(branch, &fetched, true)?;
        repo.set_head(&reference)?;
        repo.checkout_head(Some(git2::build::CheckoutBuilder::new().force()))?;
    } else {
        repo.set_head(&reference)?;
    }
    let known_hosts = match (
        host_key.lock().ok().and_then(|k| k.clone()),
        ssh_host(&remote.url),
    ) {
        (Some((kind, key)), Some((host, port))) => {
            let host = remote.ssh_hostname.clone().unwrap_or(host);
            known_hosts_line(&host, port, &kind, &key)
        }
        _ => String::new(),
    };
    Ok(Checkout {
        dir,
        branch: branch.to_owned(),
        known_hosts,
        trusted,
    })
}

/// Reads a file of the work tree (`None` when absent).
pub fn read(checkout: &Checkout, path: &str) -> anyhow::Result<Option<String>> {
    let file = checkout.path().join(path);
    match std::fs::read_to_string(&file) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {path} of the checkout")),
    }
}

/// Writes `files` (repository-relative paths) and commits them on the branch when that
/// changes the tree; returns the new commit's id, `None` when nothing changed.
pub fn commit(
    checkout: &Checkout,
    files: &[(String, String)],
    author: &Author,
    message: &str,
) -> anyhow::Result<Option<String>> {
    let repo = Repository::open(checkout.path()).context("opening the checkout")?;
    let mut index = repo.index()?;
    for (path, content) in files {
        let file: PathBuf = checkout.path().join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating the directory of {path}"))?;
        }
        std::fs::write(&file, content).with_context(|| format!("writing {path}"))?;
        index.add_path(Path::new(path))?;
    }
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let parent = match repo.head() {
        Ok(head) => Some(head.peel_to_commit()?),
        Err(e) if e.code() == git2::ErrorCode::UnbornBranch => None,
        Err(e) if e.code() == git2::ErrorCode::NotFound => None,
        Err(e) => return Err(e).context("reading the branch's head"),
    };
    if parent.as_ref().is_some_and(|p| p.tree_id() == tree.id()) {
        return Ok(None);
    }
    let email = if author.email.is_empty() {
        "capstan@localhost"
    } else {
        author.email.as_str()
    };
    let signature = Signature::now(&author.name, email).context("the commit author")?;
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    let id = repo
        .commit(
            Some("HEAD"),
            &signature,
            &signature,
            message,
            &tree,
            &parents,
        )
        .context("committing")?;
    Ok(Some(id.to_string()))
}

/// The branch's head commit in the checkout.
pub fn head(checkout: &Checkout) -> anyhow::Result<Option<String>> {
    let repo = Repository::open(checkout.path()).context("opening the checkout")?;
    match repo.head() {
        Ok(head) => Ok(Some(head.peel_to_commit()?.id().to_string())),
        Err(e)
            if matches!(
                e.code(),
                git2::ErrorCode::UnbornBranch | git2::ErrorCode::NotFound
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e).context("reading the branch's head"),
    }
}

/// Pushes the branch to `remote` (fast-forward only: a branch moved meanwhile is refused).
pub fn push(checkout: &Checkout, remote: &Remote) -> anyhow::Result<()> {
    let repo = Repository::open(checkout.path()).context("opening the checkout")?;
    let mut origin = repo.find_remote("origin")?;
    let host_key = HostKey::default();
    let rejected: Arc<Mutex<Option<String>>> = Arc::default();
    let ca = CaCheck::of(remote)?;
    let mut callbacks = callbacks(
        &remote.auth,
        &host_key,
        checkout.trusted.as_deref(),
        ca.as_ref(),
    );
    let seen = rejected.clone();
    callbacks.push_update_reference(move |_reference, status| {
        if let (Some(status), Ok(mut slot)) = (status, seen.lock()) {
            *slot = Some(status.to_owned());
        }
        Ok(())
    });
    let custom = headers(&remote.auth);
    let custom: Vec<&str> = custom.iter().map(String::as_str).collect();
    let mut options = PushOptions::new();
    options.remote_callbacks(callbacks).custom_headers(&custom);
    let reference = format!("refs/heads/{0}:refs/heads/{0}", checkout.branch);
    origin
        .push(&[reference], Some(&mut options))
        .map_err(|e| connection_error(e, checkout.trusted.as_deref(), &host_key, ca.as_ref()))
        .with_context(|| format!("cannot push to {}", remote.url))?;
    if let Some(status) = rejected.lock().ok().and_then(|s| s.clone()) {
        anyhow::bail!(
            "{} refused the push of branch '{}': {status}",
            remote.url,
            checkout.branch
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote_with_ca(ca: &str) -> Remote {
        Remote {
            url: "https://127.0.0.1/repo.git".to_owned(),
            auth: GitAuth::None,
            ssh_hostname: None,
            ca: Some(ca.as_bytes().to_vec()),
        }
    }

    #[test]
    fn the_ca_check_wants_the_given_ca_and_the_urls_host() {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject as _;
        let ca = capstan_testkit::TestCa::new();
        let server = ca.server();
        let der = CertificateDer::from_pem_slice(server.cert.as_bytes()).unwrap();
        let check = CaCheck::of(&remote_with_ca(ca.pem())).unwrap().unwrap();
        assert_eq!(check.check(&der, "127.0.0.1"), Ok(()));
        assert_eq!(check.check(&der, "localhost"), Ok(()));
        assert_eq!(
            check.check(&der, "git.example.test"),
            Err("the server's certificate is not valid for the host 'git.example.test'".to_owned())
        );
        let other = capstan_testkit::TestCa::new();
        let check = CaCheck::of(&remote_with_ca(other.pem())).unwrap().unwrap();
        assert_eq!(
            check.check(&der, "127.0.0.1"),
            Err("the server's certificate is not signed by the CA given with --ca-file".to_owned())
        );
        let error = CaCheck::of(&remote_with_ca("not a certificate")).unwrap_err();
        assert!(error.to_string().contains("no PEM certificate"), "{error}");
    }

    #[test]
    fn ssh_hosts_of_urls() {
        assert_eq!(
            ssh_host("ssh://git@example.test:2222/fleet.git"),
            Some(("example.test".into(), 2222))
        );
        assert_eq!(
            ssh_host("ssh://git@example.test/fleet.git"),
            Some(("example.test".into(), 22))
        );
        assert_eq!(
            ssh_host("git@example.test:org/fleet.git"),
            Some(("example.test".into(), 22))
        );
        assert_eq!(ssh_host("https://example.test/fleet.git"), None);
        assert_eq!(
            known_hosts_line("127.0.0.1", 2222, "ssh-ed25519", b"k"),
            "[127.0.0.1]:2222 ssh-ed25519 aw==\n"
        );
    }
}
