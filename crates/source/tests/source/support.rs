//! Test servers and helpers: a real `docker-registry` on 127.0.0.1, tool checks, tree compares.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Panics with a hint when a tool the tests need is missing; tests are never skipped.
pub fn require(tool: &str) {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
    assert!(
        found,
        "`{tool}` is not installed; hint: run ./scripts/setup"
    );
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

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

/// A `docker-registry` process serving plain HTTP on 127.0.0.1, killed on drop.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub address: String,
    /// The registry's storage root.
    pub storage: PathBuf,
    _dir: tempfile::TempDir,
}

/// Basic-auth user and password of [`Registry::start_with_auth`].
pub const USER: &str = "capstan";
pub const PASSWORD: &str = "s3cret-pass";

impl Registry {
    /// A registry without authentication.
    pub async fn start() -> Self {
        Self::spawn(false).await
    }

    /// A registry requiring basic authentication as [`USER`] / [`PASSWORD`].
    pub async fn start_with_auth() -> Self {
        Self::spawn(true).await
    }

    async fn spawn(with_auth: bool) -> Self {
        require("docker-registry");
        let dir = tempfile::tempdir().unwrap();
        let storage = dir.path().join("storage");
        std::fs::create_dir(&storage).unwrap();
        let port = free_port();
        let address = format!("127.0.0.1:{port}");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: {address}\n  secret: capstan-test-secret\n",
            storage.display()
        );
        if with_auth {
            require("htpasswd");
            let htpasswd = dir.path().join("htpasswd");
            let output = Command::new("htpasswd")
                .args(["-nbB", USER, PASSWORD])
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "htpasswd failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
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
            storage,
            _dir: dir,
        };
        let url = format!("http://{}/v2/", registry.address);
        let client = reqwest_client();
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

    /// The path of a blob in the registry's storage.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
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

pub fn reqwest_client() -> reqwest::Client {
    capstan_source::tls::install_default_provider();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// Runs `skopeo` with `args` against the plain-HTTP test registry and returns stdout.
pub fn skopeo(args: &[&str]) -> String {
    require("skopeo");
    let output = Command::new("skopeo").args(args).output().unwrap();
    assert!(
        output.status.success(),
        "skopeo {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Every file below `dir` (relative path → content), directories as `<path>/` → empty.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            if entry.file_type().unwrap().is_dir() {
                out.insert(format!("{relative}/"), Vec::new());
                walk(root, &path, out);
            } else {
                out.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// A small source tree with nested directories, an executable and a file to ignore.
pub fn sample_source() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("apps/podinfo")).unwrap();
    std::fs::create_dir_all(root.join("infra")).unwrap();
    std::fs::write(
        root.join("apps/podinfo/deployment.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\n",
    )
    .unwrap();
    std::fs::write(
        root.join("apps/kustomization.yaml"),
        "resources:\n- podinfo/deployment.yaml\n",
    )
    .unwrap();
    std::fs::write(root.join("infra/notes.txt"), "ignore me\n").unwrap();
    std::fs::write(root.join("hook.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(root.join("hook.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}
