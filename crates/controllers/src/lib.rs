//! Flux-compatible reconcilers for Capstan.
//!
//! - [`runtime`]: the reconcile runtime every kind shares — the fixed outer shape (tracing span,
//!   finalizer, suspend check, steps as data, status written with server-side apply), error
//!   classes ([`ErrorClass`]) driving conditions, Events, metrics and requeues, Prometheus
//!   metrics with Flux's names and the `/metrics`, `/healthz`, `/readyz` router.
//! - [`bucket`]: the Bucket reconciler (`source.toolkit.fluxcd.io/v1`).
//! - [`git_repository`]: the GitRepository reconciler (`source.toolkit.fluxcd.io/v1`).
//! - [`oci_repository`]: the OCIRepository reconciler (`source.toolkit.fluxcd.io/v1`).
//! - [`kustomization`]: the Kustomization reconciler (`kustomize.toolkit.fluxcd.io/v1`).
//! - [`leader`]: leader election with a Lease, so one replica of the operator reconciles.
//!
//! # Example
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use capstan_controllers::runtime::{self, Health, Metrics, RuntimeConfig};
//! use capstan_source::storage::Storage;
//! use tokio_util::sync::CancellationToken;
//!
//! let client = kube::Client::try_default().await?;
//! let storage = Storage::new("/data", "127.0.0.1:9090")?;
//! let metrics = Metrics::new();
//! let health = Health::default();
//! let shutdown = CancellationToken::new();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! tokio::spawn(axum::serve(listener, runtime::router(metrics.clone(), health.clone())).into_future());
//! capstan_controllers::git_repository::run(
//!     client, storage, metrics, RuntimeConfig::default(), health, shutdown,
//! ).await;
//! # Ok(())
//! # }
//! ```

pub mod bucket;
pub mod error;
pub mod git_repository;
pub mod kustomization;
pub mod leader;
pub mod oci_repository;
pub mod runtime;
mod sources;

pub use bucket::BucketReconciler;
pub use error::{Error, ErrorClass, ReconcileError};
pub use git_repository::GitRepositoryReconciler;
pub use oci_repository::OCIRepositoryReconciler;
