//! Test servers and helpers: the embedded control plane with the Flux CRDs, the GitRepository,
//! OCIRepository and Bucket controllers with their storage server; the Git server,
//! `docker-registry` and helpers shared with other crates come from `capstan-testkit`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use capstan_api::{FluxKind, GitRepository};
use capstan_apiserver::{ApiServer, Config};
use capstan_controllers::runtime::{Controllers, RuntimeConfig};
use capstan_controllers::{BucketReconciler, GitRepositoryReconciler, OCIRepositoryReconciler};
use capstan_source::storage::Storage;
pub use capstan_testkit::{
    GitServer, REGISTRY_PASSWORD, REGISTRY_USER, Registry, TestCa, download, eventually,
    http_client, wait_for,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

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
        let client = client_from_kubeconfig(&server.kubeconfig()).await;
        install_crds(&client).await;

        let storage_dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let address = listener.local_addr().unwrap();
        let storage = Storage::new(storage_dir.path(), &address.to_string()).unwrap();
        let config = RuntimeConfig {
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(2),
            ..RuntimeConfig::default()
        };
        let controllers = Controllers::new(client.clone(), config)
            .register(GitRepositoryReconciler::new(storage.clone()))
            .register(BucketReconciler::new(storage.clone()))
            .register(OCIRepositoryReconciler::new(storage.clone()))
            .register(
                capstan_controllers::helm_repository::HelmRepositoryReconciler::new(
                    storage.clone(),
                ),
            )
            .register(capstan_controllers::helm_chart::HelmChartReconciler::new(
                storage.clone(),
            ))
            .route(storage.router());
        let app = controllers.router();
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
                .unwrap();
        });
        let controllers = vec![tokio::spawn(controllers.run(shutdown.clone()))];
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

    /// Creates the Flux object `name` of kind `K` in `namespace` from JSON `spec`.
    pub async fn create<K>(&self, namespace: &str, name: &str, spec: serde_json::Value)
    where
        K: FluxKind
            + kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Serialize
            + std::fmt::Debug,
    {
        let object: K = serde_json::from_value(serde_json::json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }))
        .unwrap();
        Api::<K>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }

    /// Creates the Secret `name` in `namespace` with `data` (as `stringData`).
    pub async fn create_secret(
        &self,
        namespace: &str,
        name: &str,
        data: &std::collections::BTreeMap<&str, &str>,
    ) {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": namespace},
            "stringData": data,
        }))
        .unwrap();
        Api::<Secret>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
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
        self.create::<GitRepository>(namespace, name, spec).await;
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
        wait_for(&self.git_repositories(namespace), name, what, check).await
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

pub(crate) async fn install_crds(client: &kube::Client) {
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

/// The status of condition `type_` of any Flux object, `(status, reason, message)`.
pub fn condition<K: FluxKind>(object: &K, type_: &str) -> Option<(String, String, String)> {
    object
        .conditions()
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Whether the Ready condition of `object` has status `status`.
pub fn ready_is<K: FluxKind>(object: &K, status: &str) -> bool {
    condition(object, "Ready").is_some_and(|(s, ..)| s == status)
}

/// Waits until the object `name` is Ready (`Ready=True`), and returns it.
pub async fn wait_ready<K>(api: &Api<K>, name: &str) -> K
where
    K: FluxKind + Clone + DeserializeOwned + std::fmt::Debug,
{
    wait_for(api, name, "Ready=True", |o| ready_is(o, "True")).await
}

/// Waits until the object `name` failed (`Ready=False`), and returns it.
pub async fn wait_failed<K>(api: &Api<K>, name: &str) -> K
where
    K: FluxKind + Clone + DeserializeOwned + std::fmt::Debug,
{
    wait_for(api, name, "Ready=False", |o| ready_is(o, "False")).await
}

/// Asks for a reconcile of the object `name` (`reconcile.fluxcd.io/requestedAt: token`).
pub async fn request_reconcile<K>(api: &Api<K>, name: &str, token: &str)
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({
        "metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}},
    });
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
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
    client_from_kubeconfig(&capstan_apiserver::kubeconfig(url, "test")).await
}

/// A kube client from a kubeconfig (YAML) for the embedded control plane.
pub async fn client_from_kubeconfig(kubeconfig: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
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
