//! Flux-compatible reconcilers for Capstan.
//!
//! - [`runtime`]: the reconcile runtime every kind shares — the fixed outer shape (tracing span,
//!   finalizer, suspend check, steps as data, status written with server-side apply), error
//!   classes ([`ErrorClass`]) driving conditions, Events, metrics and requeues, Prometheus
//!   metrics with Flux's names and the `/metrics`, `/healthz`, `/readyz` router; the
//!   [`runtime::Controllers`] builder registers the kinds a process runs ([`controllers`]).
//! - [`bucket`]: the Bucket reconciler (`source.toolkit.fluxcd.io/v1`).
//! - [`git_repository`]: the GitRepository reconciler (`source.toolkit.fluxcd.io/v1`).
//! - [`oci_repository`]: the OCIRepository reconciler (`source.toolkit.fluxcd.io/v1`).
//! - [`helm_repository`], [`helm_chart`]: the HelmRepository and HelmChart reconcilers
//!   (`source.toolkit.fluxcd.io/v1`).
//! - [`helm_storage`]: Helm's Secret storage driver (`sh.helm.release.v1.<name>.v<N>`).
//! - [`helm_release`]: the HelmRelease reconciler (`helm.toolkit.fluxcd.io/v2`).
//! - [`kustomization`]: the Kustomization reconciler (`kustomize.toolkit.fluxcd.io/v1`).
//! - [`receiver`]: the Receiver reconciler and its webhook server
//!   (`notification.toolkit.fluxcd.io/v1`).
//! - [`leader`]: leader election with a Lease, so one replica of the operator reconciles.
//!
//! # Example
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use capstan_controllers::runtime::RuntimeConfig;
//! use capstan_source::storage::Storage;
//! use tokio_util::sync::CancellationToken;
//!
//! let client = kube::Client::try_default().await?;
//! let storage = Storage::new("/data", "127.0.0.1:9090")?;
//! let controllers = capstan_controllers::controllers(client, &storage, RuntimeConfig::default());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9090").await?;
//! tokio::spawn(axum::serve(listener, controllers.router()).into_future());
//! controllers.run(CancellationToken::new()).await;
//! # Ok(())
//! # }
//! ```

pub mod bucket;
pub mod error;
pub mod git_repository;
mod health_exprs;
pub mod helm_chart;
pub mod helm_release;
pub mod helm_repository;
pub mod helm_storage;
pub mod kustomization;
pub mod leader;
pub mod oci_repository;
pub mod receiver;
pub mod runtime;
mod sources;
pub mod tenancy;

pub use bucket::BucketReconciler;
pub use error::{Error, ErrorClass, ReconcileError};
pub use git_repository::GitRepositoryReconciler;
pub use oci_repository::OCIRepositoryReconciler;

/// Capstan's controllers: GitRepository, OCIRepository, Bucket (with the artifact server's
/// routes, `storage`) and Kustomization, each reconciling through `client` with `config`.
pub fn controllers(
    client: kube::Client,
    storage: &capstan_source::storage::Storage,
    config: runtime::RuntimeConfig,
) -> runtime::Controllers {
    let remote_bases = !config.no_remote_bases;
    let tenancy = config.tenancy();
    runtime::Controllers::new(client.clone(), config)
        .register(GitRepositoryReconciler::new(storage.clone()))
        .register(OCIRepositoryReconciler::new(storage.clone()))
        .register(BucketReconciler::new(storage.clone()))
        .register(helm_repository::HelmRepositoryReconciler::new(
            storage.clone(),
        ))
        .register(helm_chart::HelmChartReconciler::new(storage.clone()))
        .register(
            helm_release::HelmReleaseReconciler::new(client.clone()).with_tenancy(tenancy.clone()),
        )
        .register(
            kustomization::KustomizationReconciler::new(client)
                .with_remote_bases(remote_bases)
                .with_tenancy(tenancy),
        )
        .register(receiver::ReceiverReconciler::new())
        .route(storage.router())
}
