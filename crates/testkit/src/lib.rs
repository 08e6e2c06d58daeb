//! Real servers for Capstan's tests and benchmarks, started on 127.0.0.1 random ports and
//! stopped on drop: a `docker-registry` ([`Registry`]) and a Git server over smart HTTP
//! ([`GitServer`], `git http-backend` behind [`capstan_source::git::server`]). Tools are never
//! optional: a missing one fails with a hint to run `./scripts/setup`.

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use capstan_source::git::server::{self, ServerOptions};
use tokio_util::sync::CancellationToken;

/// Panics with a hint when a tool is missing; tests are never skipped.
pub fn require(tool: &str) {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
    assert!(found, "`{tool}` is not installed; hint: run ./scripts/setup");
}

/// A free TCP port on 127.0.0.1.
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

/// An HTTP client without proxies, on the process's rustls provider.
pub fn http_client() -> reqwest::Client {
    capstan_source::tls::install_default_provider();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("an HTTP client")
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

/// A `docker-registry` serving plain HTTP on 127.0.0.1, killed on drop.
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

impl Registry {
    /// A registry without authentication.
    pub async fn start() -> Self {
        Self::spawn(false).await
    }

    /// A registry requiring basic authentication as [`REGISTRY_USER`] / [`REGISTRY_PASSWORD`].
    pub async fn start_with_auth() -> Self {
        Self::spawn(true).await
    }

    async fn spawn(with_auth: bool) -> Self {
        require("docker-registry");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let storage = dir.path().join("storage");
        std::fs::create_dir(&storage).expect("the registry storage");
        let address = format!("127.0.0.1:{}", free_port());
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: {address}\n  secret: capstan-test-secret\n",
            storage.display()
        );
        if with_auth {
            require("htpasswd");
            let output = Command::new("htpasswd")
                .args(["-nbB", REGISTRY_USER, REGISTRY_PASSWORD])
                .output()
                .expect("run htpasswd");
            assert!(output.status.success(), "htpasswd failed");
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, &output.stdout).expect("write htpasswd");
            let _ = writeln!(
                config,
                "auth:\n  htpasswd:\n    realm: capstan-test\n    path: {}",
                htpasswd.display()
            );
        }
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).expect("write the registry config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("registry log");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config_path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let registry = Self {
            child,
            address,
            storage,
            _dir: dir,
        };
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
        registry
    }

    /// `oci://127.0.0.1:<port>/<repository>`.
    pub fn url(&self, repository: &str) -> String {
        format!("oci://{}/{repository}", self.address)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Git server on 127.0.0.1 holding one bare repository `repo.git` (branch `main`), with a
/// work tree to commit and push from. Pushes over HTTP are accepted too.
pub struct GitServer {
    dir: tempfile::TempDir,
    address: std::net::SocketAddr,
    stop: CancellationToken,
}

impl GitServer {
    /// Creates the repository and serves it.
    pub async fn start() -> Self {
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
        let app = server::router(root, ServerOptions { receive_pack: true });
        let stop = CancellationToken::new();
        let cancelled = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { cancelled.cancelled().await })
                .await;
        });
        Self { dir, address, stop }
    }

    /// `http://127.0.0.1:<port>/repo.git`.
    pub fn url(&self) -> String {
        format!("http://{}/repo.git", self.address)
    }

    /// The work tree commits are made in.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// Writes `files`, commits, pushes `main` and returns the commit id.
    pub fn commit(&self, files: &[(&str, &str)], message: &str) -> String {
        for (path, content) in files {
            let path = self.work().join(path);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("create dirs");
            std::fs::write(path, content).expect("write a file");
        }
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
