//! An embedded, in-memory control plane that speaks the Kubernetes REST API over HTTP.
//!
//! It is Capstan's test cluster and local default (`capstan dev`): controllers and `kubectl`
//! reach it over HTTP exactly as they reach a real cluster, so it must behave like one where they
//! depend on it — discovery, OpenAPI v3, CRDs with schema validation and defaulting,
//! get/list/watch/create/update/patch/delete, server-side apply with `managedFields`, finalizers,
//! garbage collection, namespace lifecycle and workload status.
//!
//! It is honest about being a double: Pods are stored but nothing runs them (a Pod has a log only
//! when the embedding process keeps one for it, [`ApiServer::register_pod_log`]), there is no
//! scheduler and no authentication, and storage is memory only. Requests act as the cluster administrator unless they impersonate a
//! user (`Impersonate-User`), who is then authorized with RBAC (`authz`).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let server = capstan_apiserver::ApiServer::start(capstan_apiserver::Config::default()).await?;
//! println!("serving on http://{}", server.address());
//! std::fs::write("kubeconfig", server.kubeconfig())?;
//! server.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # Expected flow
//! `ApiServer::start` binds the listener, registers the built-in kinds and the default namespaces
//! (`default`, `kube-system`, `kube-public`, `kube-node-lease`, each with its `kube-root-ca.crt`)
//! and the default RBAC ClusterRoles and ClusterRoleBindings, starts the background controllers
//! and serves until `shutdown`.
//!
//! # Guarantees
//! - Every write gets the next global `resourceVersion`; a write that changes nothing keeps it.
//! - Watches see every change after their `resourceVersion`, in order, or get `410 Gone`.
//! - Errors are Kubernetes `Status` objects with the matching HTTP code.
//! - `core/v1` and `events.k8s.io/v1` Events are one store seen two ways (`events`).

// `ApiError` is a whole Kubernetes `Status` (message, details, causes): errors end a request and
// travel up a few frames only, so boxing them everywhere would buy nothing.
#![allow(clippy::result_large_err)]

pub mod authz;
pub mod builtins;
pub mod cluster;
pub mod controllers;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod events;
pub mod http;
pub mod logs;
pub mod openapi;
pub mod protobuf;
pub mod registry;
pub mod secrets;
pub mod selectors;
pub mod store;
mod strategy;
pub mod table;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use cluster::{Cluster, ClusterConfig};
pub use error::ApiError;

/// Server settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Largest request body accepted (Kubernetes: 3 MiB).
    pub max_body_bytes: usize,
    /// Watch events kept per resource; older resourceVersions get `410 Gone`.
    pub watch_history: usize,
    /// How often watches that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// Longest a watch stays open.
    pub max_watch: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_body_bytes: 3 * 1024 * 1024,
            watch_history: 10_000,
            bookmark_interval: Duration::from_secs(5),
            max_watch: Duration::from_secs(1800),
        }
    }
}

/// A running control plane.
#[derive(Debug)]
pub struct ApiServer {
    address: SocketAddr,
    cluster: Cluster,
    pod_logs: logs::PodLogs,
    shutdown: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl ApiServer {
    /// Binds and starts serving.
    pub async fn start(config: Config) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(config.listen).await?;
        let address = listener.local_addr()?;
        let cluster = Cluster::new(&ClusterConfig {
            watch_history: config.watch_history,
        });
        let state = http::AppState {
            cluster: cluster.clone(),
            max_body_bytes: config.max_body_bytes,
            bookmark_interval: config.bookmark_interval,
            max_watch: config.max_watch,
            openapi: Arc::new(Mutex::new(openapi::Cache::default())),
            pod_logs: logs::PodLogs::default(),
        };
        let pod_logs = state.pod_logs.clone();
        let app = axum::Router::new().fallback(http::handle).with_state(state);
        let (shutdown, mut rx) = tokio::sync::watch::channel(false);
        let mut tasks = controllers::spawn_all(&cluster);
        tasks.push(tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = rx.wait_for(|stop| *stop).await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "api server stopped");
            }
        }));
        tracing::info!(%address, "embedded control plane serving");
        Ok(Self {
            address,
            cluster,
            pod_logs,
            shutdown,
            tasks,
        })
    }

    /// The address it serves on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Direct access to the in-memory cluster (for embedding; clients should use HTTP).
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Serves `log` as the log of Pod `namespace/name` (`GET .../pods/NAME/log`); the Pod object
    /// itself is written as any other.
    pub fn register_pod_log(&self, namespace: &str, name: &str, log: Arc<logs::PodLog>) {
        self.pod_logs.register(namespace, name, log);
    }

    /// A kubeconfig (YAML) pointing at this server, context `capstan-dev`.
    pub fn kubeconfig(&self) -> String {
        kubeconfig(&self.url(), "capstan-dev")
    }

    /// Stops serving and the controllers.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            t.abort();
            let _ = t.await;
        }
    }
}

/// A kubeconfig for an unauthenticated server at `url`.
pub fn kubeconfig(url: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {url}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n    namespace: default\ncurrent-context: {name}\nusers:\n- name: {name}\n  user: {{}}\npreferences: {{}}\n"
    )
}
