//! A Helm chart repository served on 127.0.0.1 ([`HelmRepoServer`]): the files of a directory
//! (`index.yaml`, chart archives) over plain HTTP, optionally behind basic auth, or over HTTPS,
//! optionally requiring a client certificate; and
//! [`sdk_repository`], which has Helm's own SDK package charts and write their `index.yaml`,
//! so the index Capstan reads is one Helm wrote.

use std::path::{Path, PathBuf};
use std::process::Command;

use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

/// A static file server for a chart repository directory; stopped on drop.
#[derive(Debug)]
pub struct HelmRepoServer {
    root: PathBuf,
    address: std::net::SocketAddr,
    stop: CancellationToken,
}

impl HelmRepoServer {
    /// Serves the files of `root` (re-read at every request, so tests may change them);
    /// with `basic_auth`, every request must carry those credentials (401 otherwise).
    pub async fn start(root: &Path, basic_auth: Option<(&str, &str)>) -> Self {
        use base64::Engine as _;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listen on 127.0.0.1");
        let address = listener.local_addr().expect("the server address");
        let expected = basic_auth.map(|(user, password)| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )
        });
        Self::spawn(listener, address, root, expected)
    }

    /// Serves `root` over HTTPS with `server` (see [`crate::TestCa::server`]); with
    /// `client_ca` (PEM), only clients presenting a certificate it issued are served (mutual
    /// TLS). The URL is [`HelmRepoServer::https_url`].
    pub async fn start_tls(
        root: &Path,
        server: &crate::CertifiedKey,
        client_ca: Option<&str>,
    ) -> Self {
        use rustls::pki_types::pem::PemObject as _;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        capstan_source::tls::install_default_provider();
        let certs = CertificateDer::pem_slice_iter(server.cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("the server certificate");
        let key = PrivateKeyDer::from_pem_slice(server.key.as_bytes()).expect("the server key");
        let builder = rustls::ServerConfig::builder();
        let builder = match client_ca {
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    roots
                        .add(cert.expect("the client CA"))
                        .expect("a CA certificate");
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder(roots.into())
                    .build()
                    .expect("a client verifier");
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(certs, key)
            .expect("a TLS configuration");
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listen on 127.0.0.1");
        let address = tcp.local_addr().expect("the server address");
        let listener = TlsListener {
            tcp,
            acceptor: tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)),
        };
        Self::spawn(listener, address, root, None)
    }

    /// Serves the files of `root` on `listener` (at `address`) until dropped; with
    /// `expected` (an `Authorization` value), only requests carrying it.
    fn spawn<L>(
        listener: L,
        address: std::net::SocketAddr,
        root: &Path,
        expected: Option<String>,
    ) -> Self
    where
        L: axum::serve::Listener,
        L::Addr: std::fmt::Debug,
    {
        let served = root.to_owned();
        let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap| {
            let served = served.clone();
            let expected = expected.clone();
            async move { serve(&served, expected.as_deref(), &uri, &headers) }
        });
        let stop = CancellationToken::new();
        let cancelled = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { cancelled.cancelled().await })
                .await;
        });
        Self {
            root: root.to_owned(),
            address,
            stop,
        }
    }

    /// `http://127.0.0.1:<port>` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// `https://127.0.0.1:<port>` (no trailing slash), for [`HelmRepoServer::start_tls`].
    pub fn https_url(&self) -> String {
        format!("https://{}", self.address)
    }

    /// The directory served.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for HelmRepoServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// TLS over a TCP listener for `axum::serve`; failed handshakes are skipped.
pub(crate) struct TlsListener {
    pub(crate) tcp: tokio::net::TcpListener,
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, address)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(stream).await {
                return (tls, address);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

fn serve(root: &Path, expected: Option<&str>, uri: &Uri, headers: &HeaderMap) -> Response {
    if let Some(expected) = expected {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if given != Some(expected) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Basic realm=\"charts\"")],
                "unauthorized",
            )
                .into_response();
        }
    }
    let mut path = root.to_owned();
    for segment in uri.path().split('/').filter(|s| !s.is_empty()) {
        if segment == ".." || segment.starts_with('.') {
            return StatusCode::NOT_FOUND.into_response();
        }
        path.push(segment);
    }
    match std::fs::read(&path) {
        Ok(bytes) if path.is_file() => bytes.into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The Python of the Helm SDK (`.tools/helm-venv`, installed by `scripts/setup`).
pub fn helm_python() -> PathBuf {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/helm-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing; hint: run ./scripts/setup (it installs helm-python-sdk)",
        python.display()
    );
    python
}

/// Runs one request of `crates/testkit/helm_sdk.py`, Helm's own SDK (its docstring lists the
/// requests: releases in a cluster, packaging, rendering, OCI push/pull/tags, `helm repo
/// index`), and returns its answer; `Err` carries Helm's error. Blocks (tests on tokio call it
/// through `spawn_blocking`).
pub fn helm_sdk(request: &serde_json::Value) -> Result<serde_json::Value, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("helm_sdk.py");
    let output = Command::new(helm_python())
        .arg(script)
        .arg(request.to_string())
        .output()
        .expect("run helm_sdk.py");
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "helm_sdk.py {request} answered no JSON ({e}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    match answer.get("error") {
        Some(error) => Err(error.as_str().unwrap_or_default().to_owned()),
        None => Ok(answer["ok"].clone()),
    }
}

/// [`helm_sdk`] for a request that must succeed: panics with Helm's error.
pub fn helm_sdk_ok(request: &serde_json::Value) -> serde_json::Value {
    helm_sdk(request).unwrap_or_else(|error| panic!("helm_sdk.py {request}: {error}"))
}

/// Packages each chart directory of `charts` with Helm's SDK (`helm package`) into `out`,
/// then writes `out/index.yaml` with the SDK (`helm repo index`, entries relative to the
/// repository unless `base_url` is given). Returns the archive file names.
pub fn sdk_repository(charts: &[&Path], out: &Path, base_url: Option<&str>) -> Vec<String> {
    std::fs::create_dir_all(out).expect("the repository directory");
    let names = charts
        .iter()
        .map(|chart| {
            let archive = helm_sdk_ok(&serde_json::json!({
                "op": "package", "chart": chart, "destination": out,
            }));
            let archive = PathBuf::from(archive.as_str().expect("the archive's path"));
            let name = archive.file_name().expect("the archive's name");
            name.to_string_lossy().into_owned()
        })
        .collect();
    helm_sdk_ok(&serde_json::json!({
        "op": "repo_index", "directory": out, "base_url": base_url,
    }));
    names
}

/// Packages `chart` with Helm's SDK and pushes it to `remote` (`oci://HOST/PATH`, plain
/// HTTP), as `<remote>/<chart name>:<version>`; returns the SDK's answer to the push.
pub fn sdk_push_chart(chart: &Path, remote: &str) -> serde_json::Value {
    let out = tempfile::tempdir().expect("a temporary directory");
    let archive = helm_sdk_ok(&serde_json::json!({
        "op": "package", "chart": chart, "destination": out.path(),
    }));
    helm_sdk_ok(&serde_json::json!({"op": "push", "archive": archive, "remote": remote}))
}
