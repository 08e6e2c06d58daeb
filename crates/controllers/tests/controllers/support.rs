//! Test servers and helpers: the embedded control plane with the Flux CRDs, the GitRepository,
//! OCIRepository and Bucket controllers with their storage server, a Git repository served over smart
//! HTTP and a `docker-registry` on 127.0.0.1.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use capstan_api::GitRepository;
use capstan_apiserver::{ApiServer, Config};
use capstan_controllers::runtime::{self, Health, Metrics, RuntimeConfig};
use capstan_source::storage::Storage;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

/// Polls `check` until it returns `Some` or `timeout` passes.
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

/// Panics with a hint when a tool the tests need is missing; tests are never skipped.
pub fn require(tool: &str) {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
    assert!(
        found,
        "`{tool}` is not installed; hint: run ./scripts/setup"
    );
}

/// The control plane with the Flux CRDs, the GitRepository controller and its HTTP server.
pub struct Env {
    pub client: kube::Client,
    pub storage_dir: tempfile::TempDir,
    /// Base URL of the storage / metrics server, `http://127.0.0.1:<port>`.
    pub http: String,
    shutdown: CancellationToken,
    controllers: Vec<tokio::task::JoinHandle<()>>,
    _server: ApiServer,
}

impl Env {
    pub async fn start() -> Self {
        capstan_source::tls::install_default_provider();
        let server = ApiServer::start(Config::default())
            .await
            .expect("start the control plane");
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        install_crds(&client).await;

        let storage_dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let address = listener.local_addr().unwrap();
        let storage = Storage::new(storage_dir.path(), &address.to_string()).unwrap();
        let metrics = Metrics::new();
        let health = Health::default();
        let app = storage
            .router()
            .merge(runtime::router(metrics.clone(), health.clone()));
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
                .unwrap();
        });
        let config = RuntimeConfig {
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(2),
            ..RuntimeConfig::default()
        };
        let controllers = vec![
            tokio::spawn(capstan_controllers::git_repository::run(
                client.clone(),
                storage.clone(),
                metrics.clone(),
                config.clone(),
                health.clone(),
                shutdown.clone(),
            )),
            tokio::spawn(capstan_controllers::bucket::run(
                client.clone(),
                storage.clone(),
                metrics.clone(),
                config.clone(),
                health.clone(),
                shutdown.clone(),
            )),
            tokio::spawn(capstan_controllers::oci_repository::run(
                client.clone(),
                storage,
                metrics,
                config,
                health,
                shutdown.clone(),
            )),
        ];
        Self {
            client,
            storage_dir,
            http: format!("http://{address}"),
            shutdown,
            controllers,
            _server: server,
        }
    }

    /// Creates a namespace and returns its name.
    pub async fn namespace(&self, name: &str) -> String {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let namespace: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
        name.to_owned()
    }

    pub fn git_repositories(&self, namespace: &str) -> Api<GitRepository> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Creates a GitRepository from JSON `spec`.
    pub async fn create_git_repository(
        &self,
        namespace: &str,
        name: &str,
        spec: serde_json::Value,
    ) {
        let object: GitRepository = serde_json::from_value(serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }))
        .unwrap();
        self.git_repositories(namespace)
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }

    /// Merge-patches a GitRepository.
    pub async fn patch(&self, namespace: &str, name: &str, patch: serde_json::Value) {
        self.git_repositories(namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    /// Waits until `check` holds for the GitRepository, and returns it.
    pub async fn wait_for(
        &self,
        namespace: &str,
        name: &str,
        what: &str,
        check: impl Fn(&GitRepository) -> bool,
    ) -> GitRepository {
        let api = self.git_repositories(namespace);
        let check = &check;
        eventually(Duration::from_secs(30), what, || {
            let api = api.clone();
            async move {
                api.get_opt(name)
                    .await
                    .ok()
                    .flatten()
                    .filter(|object| check(object))
            }
        })
        .await
    }

    /// Stops the controller (graceful shutdown) and waits for it.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        for controller in std::mem::take(&mut self.controllers) {
            tokio::time::timeout(Duration::from_secs(10), controller)
                .await
                .expect("the controller stops on shutdown")
                .unwrap();
        }
    }

    pub fn storage_path(&self, relative: &str) -> PathBuf {
        self.storage_dir.path().join(relative)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn install_crds(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in capstan_api::crds() {
        let name = crd.metadata.name.clone().unwrap();
        crds.patch(
            &name,
            &PatchParams::apply("capstan").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("apply CRD {name}: {e}"));
    }
    let api: Api<GitRepository> = Api::all(client.clone());
    eventually(Duration::from_secs(10), "the GitRepository API", || {
        let api = api.clone();
        async move { api.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
}

/// The status of condition `type_`, `(status, reason, message)`.
pub fn condition(object: &GitRepository, type_: &str) -> Option<(String, String, String)> {
    object
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Runs `git` with a fixed identity and returns trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    require("git");
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Capstan Test")
        .env("GIT_AUTHOR_EMAIL", "test@capstan.invalid")
        .env("GIT_COMMITTER_NAME", "Capstan Test")
        .env("GIT_COMMITTER_EMAIL", "test@capstan.invalid")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// A bare repository `repo.git`, a work tree pushing to it, and `git http-backend` serving it.
pub struct Upstream {
    dir: tempfile::TempDir,
    server: Child,
    port: u16,
}

impl Upstream {
    pub async fn start() -> Self {
        require("python3");
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().join("repo.git");
        let work = dir.path().join("work");
        std::fs::create_dir(&bare).unwrap();
        git(&bare, &["init", "--bare", "-q", "-b", "main"]);
        git(&bare, &["config", "http.receivepack", "false"]);
        std::fs::create_dir(&work).unwrap();
        git(&work, &["init", "-q", "-b", "main"]);
        git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = Command::new("python3")
            .arg("-c")
            .arg(BRIDGE)
            .arg(dir.path())
            .arg(port.to_string())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        eventually(
            Duration::from_secs(20),
            "the git http bridge to listen",
            || async move {
                tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .ok()
                    .map(|_| ())
            },
        )
        .await;
        Self { dir, server, port }
    }

    /// `http://127.0.0.1:<port>/repo.git`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/repo.git", self.port)
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// Writes `files`, commits, pushes `main` and returns the commit id.
    pub fn commit(&self, files: &[(&str, &str)], message: &str) -> String {
        for (path, content) in files {
            let path = self.work().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        git(&self.work(), &["add", "-A"]);
        git(&self.work(), &["commit", "-q", "-m", message]);
        git(&self.work(), &["push", "-q", "origin", "main"]);
        git(&self.work(), &["rev-parse", "HEAD"])
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// A CGI bridge from HTTP/1.1 to `git http-backend`.
const BRIDGE: &str = r#"
import http.server, os, subprocess, sys
root, port = sys.argv[1], int(sys.argv[2])
class Bridge(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args): pass
    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))
    def handle_git(self):
        path, _, query = self.path.partition("?")
        env = dict(os.environ, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1",
                   PATH_INFO=path, QUERY_STRING=query, REQUEST_METHOD=self.command,
                   CONTENT_TYPE=self.headers.get("Content-Type", ""), REMOTE_ADDR="127.0.0.1",
                   GIT_PROTOCOL=self.headers.get("Git-Protocol") or "version=2")
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        data = self.body()
        env["CONTENT_LENGTH"] = str(len(data))
        out = subprocess.run(["git", "http-backend"], input=data, env=env, capture_output=True).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode().split("\r\n"):
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.strip().split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
    do_GET = handle_git
    do_POST = handle_git
http.server.ThreadingHTTPServer(("127.0.0.1", port), Bridge).serve_forever()
"#;

/// An HTTP client for the storage and metrics server.
pub fn http_client() -> reqwest::Client {
    capstan_source::tls::install_default_provider();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// The file names in a gzip tarball.
pub fn tar_entries(bytes: &[u8]) -> Vec<String> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let mut names: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|entry| entry.unwrap().path().unwrap().display().to_string())
        .collect();
    names.sort();
    names
}

/// A `docker-registry` process serving plain HTTP on 127.0.0.1, killed on drop.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub address: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// A registry without authentication.
    pub async fn start() -> Self {
        Self::spawn(None).await
    }

    /// A registry requiring basic authentication as `user` / `password`.
    pub async fn start_with_auth(user: &str, password: &str) -> Self {
        Self::spawn(Some((user, password))).await
    }

    async fn spawn(auth: Option<(&str, &str)>) -> Self {
        require("docker-registry");
        let dir = tempfile::tempdir().unwrap();
        let storage = dir.path().join("storage");
        std::fs::create_dir(&storage).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("127.0.0.1:{port}");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: {address}\n  secret: capstan-test-secret\n",
            storage.display()
        );
        if let Some((user, password)) = auth {
            require("htpasswd");
            let output = Command::new("htpasswd")
                .args(["-nbB", user, password])
                .output()
                .unwrap();
            assert!(output.status.success(), "htpasswd failed");
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, &output.stdout).unwrap();
            writeln!(
                config,
                "auth:\n  htpasswd:\n    realm: capstan-test\n    path: {}",
                htpasswd.display()
            )
            .unwrap();
        }
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config_path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let registry = Self {
            child,
            address,
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

impl Env {
    /// `http://127.0.0.1:<port>` of this environment's control plane.
    pub fn api_url(&self) -> String {
        let Self {
            _server: server, ..
        } = self;
        server.url()
    }
}

/// A kube client for the control plane at `url` (plain HTTP, no credentials).
pub async fn client_for(url: &str) -> kube::Client {
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(&capstan_apiserver::kubeconfig(url, "test")).unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// A TCP proxy on 127.0.0.1 forwarding to `upstream` (`127.0.0.1:<port>`) and recording what
/// clients send (request lines, headers and bodies), for tests asserting on request headers.
pub struct RecordingProxy {
    /// `http://127.0.0.1:<port>` of the proxy.
    pub url: String,
    sent: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    task: tokio::task::JoinHandle<()>,
}

impl RecordingProxy {
    pub async fn start(upstream: String) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = sent.clone();
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let record = record.clone();
                tokio::spawn(async move {
                    let Ok(outbound) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let (mut in_read, mut in_write) = inbound.into_split();
                    let (mut out_read, mut out_write) = outbound.into_split();
                    let upload = async move {
                        let mut buffer = vec![0u8; 16 * 1024];
                        while let Ok(n) = in_read.read(&mut buffer).await {
                            if n == 0 {
                                break;
                            }
                            record.lock().unwrap().extend_from_slice(&buffer[..n]);
                            if out_write.write_all(&buffer[..n]).await.is_err() {
                                break;
                            }
                        }
                        let _ = out_write.shutdown().await;
                    };
                    let download = async move {
                        let _ = tokio::io::copy(&mut out_read, &mut in_write).await;
                        let _ = in_write.shutdown().await;
                    };
                    tokio::join!(upload, download);
                });
            }
        });
        Self { url, sent, task }
    }

    /// Everything clients sent so far, lower-cased (HTTP/1 header names are case-insensitive).
    pub fn sent_lowercase(&self) -> String {
        String::from_utf8_lossy(&self.sent.lock().unwrap()).to_lowercase()
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
