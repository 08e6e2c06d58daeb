//! Real servers for Capstan's tests and benchmarks, started on 127.0.0.1 random ports and
//! stopped on drop: a `docker-registry` ([`Registry`]: plain HTTP, basic auth or HTTPS) and a Git
//! server over smart HTTP ([`GitServer`], `git http-backend` behind
//! [`capstan_source::git::server`]; optionally HTTPS and basic auth), plus a test certificate authority ([`TestCa`]) for TLS
//! servers and clients, and object stores ([`buckets`]: moto for S3, azurite for Azure Blob).
//! Tests wait with [`eventually`] (any condition) or [`wait_for`] (an object of a kind), never
//! with a fixed sleep.
//! Tools are never optional: a missing one fails with a hint to run
//! `./scripts/setup`.

pub mod buckets;
pub mod helm_repo;
pub mod sops;
pub mod sshd;

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use capstan_source::git::server::{self, ServerOptions};
use tokio_util::sync::CancellationToken;

/// The shared public fixtures (`../shared/corpus` beside the repository), or the directory
/// `$CAPSTAN_CORPUS` names. Panics with what to do when it is missing: tests never skip.
pub fn corpus(relative: &str) -> PathBuf {
    let root = std::env::var_os("CAPSTAN_CORPUS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
        PathBuf::from,
    );
    let path = root.join(relative);
    assert!(
        path.exists(),
        "{} is missing: the corpus lives in ../shared/corpus beside the repository (or set CAPSTAN_CORPUS)",
        path.display()
    );
    path
}

/// Panics with a hint when a tool is missing; tests are never skipped.
pub fn require(tool: &str) {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
    assert!(
        found,
        "`{tool}` is not installed; hint: run ./scripts/setup"
    );
}

/// Starts a server process told its port by `command(port)` on a free port of 127.0.0.1, and
/// waits until that very process (or one of its descendants) listens there; returns it with the
/// port. A port picked free is not necessarily free when the child binds it (another test may
/// take it meanwhile): a child that exits (its bind failed) is retried on another port, and a
/// port someone else listens on is never mistaken for the child's.
///
/// # Panics
/// When the child cannot be started, or does not listen within 30 s, or five ports in a row fail.
pub async fn spawn_listening(what: &str, mut command: impl FnMut(u16) -> Command) -> (Child, u16) {
    for _ in 0..5 {
        let port = free_port();
        let mut child = command(port)
            .spawn()
            .unwrap_or_else(|e| panic!("start {what}: {e}"));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if matches!(child.try_wait(), Ok(Some(_))) {
                break; // it could not bind: another port
            }
            if listens_on(child.id(), port) {
                return (child, port);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{what} did not listen on 127.0.0.1:{port} within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    panic!("{what} exited at start on five ports in a row");
}

/// Whether process `pid` or one of its descendants holds a socket listening on TCP `port`
/// (Linux: the socket inodes of `/proc/net/tcp{,6}` matched against `/proc/<pid>/fd`).
fn listens_on(pid: u32, port: u16) -> bool {
    let wanted = format!(":{port:04X}");
    let mut inodes = std::collections::HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() > 9 && fields[1].ends_with(&wanted) && fields[3] == "0A" {
                inodes.insert(format!("socket:[{}]", fields[9]));
            }
        }
    }
    !inodes.is_empty()
        && process_tree(pid)
            .into_iter()
            .any(|pid| holds_any(pid, &inodes))
}

fn holds_any(pid: u32, inodes: &std::collections::HashSet<String>) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|target| inodes.contains(target.to_string_lossy().as_ref()))
    })
}

/// `pid` and its descendants, as `/proc/<pid>/task/*/children` lists them.
fn process_tree(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut next = 0;
    while next < all.len() {
        let current = all[next];
        next += 1;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{current}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                all.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    all
}

/// A free TCP port on 127.0.0.1 at the time of the call. To hand a port to another process,
/// use [`spawn_listening`], which survives the port being taken meanwhile.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// Polls `check` until it returns `Some`, panicking after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls the object `name` through `api` until `check` holds for it, and returns it; panics
/// naming `what` after 30 s. Errors and a missing object count as "not yet".
pub async fn wait_for<K>(
    api: &kube::Api<K>,
    name: &str,
    what: &str,
    check: impl Fn(&K) -> bool,
) -> K
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let check = &check;
    eventually(Duration::from_secs(30), what, || async move {
        api.get_opt(name)
            .await
            .ok()
            .flatten()
            .filter(|object| check(object))
    })
    .await
}

/// The outcome of one run of a command-line tool (`kubectl`, the `capstan` binary).
#[derive(Debug)]
pub struct Run {
    /// The exit code, or -1 when a signal ended the process.
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

// `run.ok();` alone is an assertion, so the returned `Self` may be dropped.
#[allow(clippy::return_self_not_must_use)]
impl Run {
    /// Panics with the output unless the command succeeded.
    #[track_caller]
    pub fn ok(self) -> Self {
        assert_eq!(
            self.status, 0,
            "the command failed:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }

    /// Panics unless the command failed; returns it for inspecting stderr.
    #[track_caller]
    pub fn fails(self) -> Self {
        assert_ne!(
            self.status, 0,
            "the command unexpectedly succeeded:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }

    /// Stdout parsed as JSON; panics with the output when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("the output is not JSON ({e}): {}", self.stdout))
    }
}

impl From<std::process::Output> for Run {
    fn from(output: std::process::Output) -> Self {
        Self {
            status: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

/// The kubectl binary: `$KUBECTL` or `kubectl` on PATH. A missing kubectl fails the test
/// (`./scripts/setup` installs it); it is never skipped.
pub fn kubectl_binary() -> PathBuf {
    if let Some(kubectl) = std::env::var_os("KUBECTL") {
        return PathBuf::from(kubectl);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("kubectl not found on PATH; hint: run ./scripts/setup"))
}

/// An HTTP client without proxies, on the process's rustls provider.
pub fn http_client() -> reqwest::Client {
    capstan_source::tls::install_default_provider();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("an HTTP client")
}

/// Writes `files` (relative path, content) below `dir`, creating directories.
pub fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (path, content) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent directory"))
            .unwrap_or_else(|e| panic!("create the parent of {}: {e}", path.display()));
        std::fs::write(&path, content).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}

/// The body of `GET url`, asserting status 200.
pub async fn download(url: &str) -> Vec<u8> {
    let response = http_client()
        .get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    assert_eq!(response.status(), 200, "GET {url}");
    response.bytes().await.expect("the response body").to_vec()
}

/// Runs `git` in `dir` with a fixed identity and no system or user configuration.
pub fn git(dir: &Path, args: &[&str]) -> String {
    require("git");
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Capstan Test")
        .env("GIT_AUTHOR_EMAIL", "test@capstan.invalid")
        .env("GIT_COMMITTER_NAME", "Capstan Test")
        .env("GIT_COMMITTER_EMAIL", "test@capstan.invalid")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("run git");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A test certificate authority (P-256, made with rcgen), issuing server and client
/// certificates. Every CA is new: another `TestCa` is an untrusted issuer.
pub struct TestCa {
    certificate: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

/// A certificate and its private key, PEM (the key in PKCS#8).
pub struct CertifiedKey {
    /// The certificate, PEM.
    pub cert: String,
    /// The private key, PEM.
    pub key: String,
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

impl TestCa {
    /// A new self-signed CA, "capstan test CA".
    pub fn new() -> Self {
        let key = rcgen::KeyPair::generate().expect("a CA key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "capstan test CA");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let certificate = params.self_signed(&key).expect("a CA certificate").pem();
        Self {
            certificate,
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// The CA certificate, PEM (what clients trust, Flux's `ca.crt`).
    pub fn pem(&self) -> &str {
        &self.certificate
    }

    /// A server certificate for `127.0.0.1` and `localhost`.
    pub fn server(&self) -> CertifiedKey {
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("server params");
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress([127, 0, 0, 1].into()));
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "127.0.0.1");
        self.issue(&params)
    }

    /// A client certificate (extended key usage `clientAuth`), "capstan client".
    pub fn client(&self) -> CertifiedKey {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "capstan client");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(&params)
    }

    fn issue(&self, params: &rcgen::CertificateParams) -> CertifiedKey {
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("a certificate signed by the test CA");
        CertifiedKey {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

/// A TLS server configuration presenting `server` (no client certificates).
fn tls_config(server: &CertifiedKey) -> rustls::ServerConfig {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    capstan_source::tls::install_default_provider();
    let certs = CertificateDer::pem_slice_iter(server.cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("the server certificate");
    let key = PrivateKeyDer::from_pem_slice(server.key.as_bytes()).expect("the server key");
    rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("a TLS configuration")
}

/// A `docker-registry` on 127.0.0.1 (deletes enabled), killed on drop: plain HTTP
/// ([`Registry::start`]), with basic authentication ([`Registry::start_with_auth`]) or over
/// HTTPS ([`Registry::start_tls`]).
pub struct Registry {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub address: String,
    /// The registry's storage root.
    pub storage: PathBuf,
    _dir: tempfile::TempDir,
}

/// Basic-auth user and password of [`Registry::start_with_auth`].
pub const REGISTRY_USER: &str = "capstan";
/// See [`REGISTRY_USER`].
pub const REGISTRY_PASSWORD: &str = "s3cret-pass";

enum Mode<'a> {
    Plain,
    BasicAuth,
    Tls(&'a CertifiedKey),
}

impl Registry {
    /// A registry without authentication, over plain HTTP.
    pub async fn start() -> Self {
        Self::spawn(Mode::Plain).await
    }

    /// A registry over plain HTTP requiring basic authentication as [`REGISTRY_USER`] /
    /// [`REGISTRY_PASSWORD`].
    pub async fn start_with_auth() -> Self {
        Self::spawn(Mode::BasicAuth).await
    }

    /// A registry without authentication serving HTTPS with `server` (see [`TestCa::server`]).
    pub async fn start_tls(server: &CertifiedKey) -> Self {
        Self::spawn(Mode::Tls(server)).await
    }

    async fn spawn(mode: Mode<'_>) -> Self {
        require("docker-registry");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let storage = dir.path().join("storage");
        std::fs::create_dir(&storage).expect("the registry storage");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: 127.0.0.1:{{port}}\n  secret: capstan-test-secret\n",
            storage.display()
        );
        match mode {
            Mode::Plain => {}
            Mode::BasicAuth => {
                require("htpasswd");
                let output = Command::new("htpasswd")
                    .args(["-nbB", REGISTRY_USER, REGISTRY_PASSWORD])
                    .output()
                    .expect("run htpasswd");
                assert!(
                    output.status.success(),
                    "htpasswd failed: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
                let htpasswd = dir.path().join("htpasswd");
                std::fs::write(&htpasswd, &output.stdout).expect("write htpasswd");
                let _ = writeln!(
                    config,
                    "auth:\n  htpasswd:\n    realm: capstan-test\n    path: {}",
                    htpasswd.display()
                );
            }
            Mode::Tls(server) => {
                let cert = dir.path().join("server.crt");
                let key = dir.path().join("server.key");
                std::fs::write(&cert, &server.cert).expect("write the server certificate");
                std::fs::write(&key, &server.key).expect("write the server key");
                let _ = writeln!(
                    config,
                    "  tls:\n    certificate: {}\n    key: {}",
                    cert.display(),
                    key.display()
                );
            }
        }
        let tls = matches!(mode, Mode::Tls(_));
        let config_path = dir.path().join("config.yml");
        let log_path = dir.path().join("registry.log");
        let (child, port) = spawn_listening("docker-registry", |port| {
            let config = config.replace("{port}", &port.to_string());
            std::fs::write(&config_path, config).expect("write the registry config");
            let log = std::fs::File::create(&log_path).expect("registry log");
            let mut command = Command::new("docker-registry");
            command
                .arg("serve")
                .arg(&config_path)
                .stdout(Stdio::null())
                .stderr(log);
            command
        })
        .await;
        let address = format!("127.0.0.1:{port}");
        let registry = Self {
            child,
            address,
            storage,
            _dir: dir,
        };
        if tls {
            // The client does not know the CA here: a listening socket is enough.
            let address = registry.address.as_str();
            eventually(
                Duration::from_secs(30),
                "docker-registry to listen",
                || async move { tokio::net::TcpStream::connect(address).await.ok().map(drop) },
            )
            .await;
        } else {
            let url = format!("http://{}/v2/", registry.address);
            let client = http_client();
            eventually(Duration::from_secs(30), "docker-registry to listen", || {
                let request = client.get(&url).send();
                async move {
                    request
                        .await
                        .ok()
                        .filter(|r| r.status() == 200 || r.status() == 401)
                        .map(|_| ())
                }
            })
            .await;
        }
        registry
    }

    /// `oci://127.0.0.1:<port>/<repository>`.
    pub fn url(&self, repository: &str) -> String {
        format!("oci://{}/{repository}", self.address)
    }

    /// Copies the OCI image manifest at tag (or digest) `from` of `repository` to the tag `to`
    /// over the registry's HTTP API (plain HTTP, no authentication).
    pub async fn copy_manifest(&self, repository: &str, from: &str, to: &str) {
        const MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
        let base = format!("http://{}/v2/{repository}/manifests", self.address);
        let client = http_client();
        let response = client
            .get(format!("{base}/{from}"))
            .header("Accept", MEDIA_TYPE)
            .send()
            .await
            .expect("GET a manifest");
        assert_eq!(response.status(), 200, "GET manifest {from}");
        let body = response.bytes().await.expect("the manifest");
        let response = client
            .put(format!("{base}/{to}"))
            .header("Content-Type", MEDIA_TYPE)
            .body(body)
            .send()
            .await
            .expect("PUT a manifest");
        assert_eq!(response.status(), 201, "PUT manifest {to}");
    }

    /// Where the registry stores the blob `digest` (`sha256:<hex>`), for tests that tamper
    /// with stored content.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest
            .strip_prefix("sha256:")
            .unwrap_or_else(|| panic!("{digest} is not a sha256 digest"));
        self.storage.join(format!(
            "docker/registry/v2/blobs/sha256/{}/{hex}/data",
            &hex[..2]
        ))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Git server on 127.0.0.1 holding one bare repository `repo.git` (branch `main`), with a
/// work tree to commit and push from ([`GitServer::work`]; run [`git`] there for tags or
/// branches). Pushes over HTTP are accepted too. Start one server per repository a test needs;
/// [`GitServer::start_with`] requires basic authentication and/or serves HTTPS.
pub struct GitServer {
    dir: tempfile::TempDir,
    address: std::net::SocketAddr,
    tls: bool,
    stop: CancellationToken,
}

/// How a [`GitServer`] is reached; the default is plain HTTP without authentication.
#[derive(Default, Clone, Copy)]
pub struct GitServerOptions<'a> {
    /// Answer 401 (`WWW-Authenticate: Basic`) unless a request carries this user name and
    /// password.
    pub basic_auth: Option<(&'a str, &'a str)>,
    /// Serve HTTPS with this certificate (see [`TestCa::server`]).
    pub tls: Option<&'a CertifiedKey>,
}

impl GitServer {
    /// Creates the repository and serves it over plain HTTP, without authentication.
    pub async fn start() -> Self {
        Self::start_with(GitServerOptions::default()).await
    }

    /// Creates the repository and serves it as `options` say.
    pub async fn start_with(options: GitServerOptions<'_>) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = dir.path().join("root");
        let bare = root.join("repo.git");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&bare).expect("the bare repository");
        git(&bare, &["init", "--bare", "-q", "-b", "main"]);
        std::fs::create_dir(&work).expect("the work tree");
        git(&work, &["init", "-q", "-b", "main"]);
        git(&work, &["remote", "add", "origin", &bare.to_string_lossy()]);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listen on 127.0.0.1");
        let address = listener.local_addr().expect("the Git server address");
        let mut app = server::router(root, ServerOptions { receive_pack: true });
        if let Some((user, password)) = options.basic_auth {
            use base64::Engine as _;
            let expected = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            );
            app = app.layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let authorized = request
                        .headers()
                        .get(axum::http::header::AUTHORIZATION)
                        .is_some_and(|given| given.as_bytes() == expected.as_bytes());
                    async move {
                        if authorized {
                            next.run(request).await
                        } else {
                            axum::response::IntoResponse::into_response((
                                axum::http::StatusCode::UNAUTHORIZED,
                                [(axum::http::header::WWW_AUTHENTICATE, "Basic realm=\"git\"")],
                            ))
                        }
                    }
                },
            ));
        }
        let stop = CancellationToken::new();
        let cancelled = stop.clone();
        let shutdown = async move { cancelled.cancelled().await };
        if let Some(server) = options.tls {
            let listener = helm_repo::TlsListener {
                tcp: listener,
                acceptor: tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(tls_config(server))),
            };
            tokio::spawn(async move {
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(shutdown)
                    .await;
            });
        } else {
            tokio::spawn(async move {
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(shutdown)
                    .await;
            });
        }
        Self {
            dir,
            address,
            tls: options.tls.is_some(),
            stop,
        }
    }

    /// `http://127.0.0.1:<port>/repo.git` (`https://` when served with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/repo.git", self.address)
    }

    /// The bare repository on disk, for `file://` and `ssh://` URLs or another server.
    pub fn bare(&self) -> PathBuf {
        self.dir.path().join("root/repo.git")
    }

    /// `file://<bare>`.
    pub fn file_url(&self) -> String {
        format!("file://{}", self.bare().display())
    }

    /// The work tree commits are made in.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// Writes `files`, commits, pushes `main` and returns the commit id.
    pub fn commit(&self, files: &[(&str, &str)], message: &str) -> String {
        write_files(&self.work(), files);
        self.commit_all(message)
    }

    /// Commits everything in the work tree (additions and removals), pushes, returns the id.
    pub fn commit_all(&self, message: &str) -> String {
        let work = self.work();
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "--allow-empty", "-m", message]);
        git(&work, &["push", "-q", "origin", "main"]);
        git(&work, &["rev-parse", "HEAD"])
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
