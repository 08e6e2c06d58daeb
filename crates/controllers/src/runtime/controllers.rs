//! The [`Controllers`] builder: the set of kinds one process reconciles, with the HTTP routes
//! they serve and their readiness. Registering a kind ([`Controllers::register`]) adds its
//! reconciler and its line in `/readyz`; [`Controllers::route`] adds routes a kind needs (the
//! artifact server of the source kinds, a Receiver's webhook); [`Controllers::router`] serves
//! them beside `/metrics`, `/healthz` and `/readyz`; [`Controllers::run`] runs every kind until
//! shutdown, [`Controllers::lead`] once this replica holds the Lease, until shutdown or its loss.
//!
//! # Guarantees
//! - `/readyz` names each registered kind: once [`Controllers::run`] starts, every kind is
//!   listed not ready until its controller has started, and again when it stops.
//! - Every kind shares the client, the [`Metrics`], the [`Health`] and the [`RuntimeConfig`]
//!   (concurrency, backoff, event sink) of the builder.
//! - [`Controllers::run`] returns when every controller has stopped: at shutdown, steps in
//!   flight are cancelled (dropped at their next await), so it does not wait for them to
//!   finish.

use std::fmt::{self, Debug};

use futures::future::{BoxFuture, FutureExt, join_all};
use kube::{Client, Resource};
use tokio_util::sync::CancellationToken;

use super::{Health, Metrics, Reconciler, RuntimeConfig, server};
use crate::leader::{LeaderElectionConfig, LeaderElector, Leadership};

/// Runs one registered kind until the token is cancelled.
type RunKind = Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send>;

/// The kinds a process reconciles, their routes and their readiness. See the [module
/// documentation](self).
pub struct Controllers {
    client: Client,
    metrics: Metrics,
    health: Health,
    config: RuntimeConfig,
    routes: axum::Router,
    kinds: Vec<(String, RunKind)>,
}

impl Debug for Controllers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controllers")
            .field("kinds", &self.kinds())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Controllers {
    /// No kinds yet; each added kind reconciles through `client` with `config`.
    pub fn new(client: Client, config: RuntimeConfig) -> Self {
        Self {
            client,
            metrics: Metrics::new(),
            health: Health::default(),
            config,
            routes: axum::Router::new(),
            kinds: Vec::new(),
        }
    }

    /// Registers the kind of `reconciler`: its controller runs with the others, and `/readyz`
    /// lists it.
    #[must_use]
    pub fn register<R: Reconciler>(mut self, reconciler: R) -> Self {
        let (client, metrics, health, config) = (
            self.client.clone(),
            self.metrics.clone(),
            self.health.clone(),
            self.config.clone(),
        );
        let run: RunKind = Box::new(move |stop| {
            super::run(client, reconciler, metrics, config, health, stop).boxed()
        });
        self.kinds.push((R::Object::kind(&()).into_owned(), run));
        self
    }

    /// Adds HTTP routes a kind serves (e.g. the artifact server, a webhook receiver).
    ///
    /// # Panics
    /// When a route is already there (axum's rule).
    #[must_use]
    pub fn route(mut self, routes: axum::Router) -> Self {
        self.routes = std::mem::take(&mut self.routes).merge(routes);
        self
    }

    /// The kinds registered, in order.
    pub fn kinds(&self) -> Vec<&str> {
        self.kinds.iter().map(|(kind, _)| kind.as_str()).collect()
    }

    /// The metrics every kind records to.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The readiness `/readyz` serves (e.g. [`Health::set_ready`] for a standby replica).
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// The registered routes with `/metrics`, `/healthz` and `/readyz`.
    pub fn router(&self) -> axum::Router {
        self.routes
            .clone()
            .merge(server::router(self.metrics.clone(), self.health.clone()))
    }

    /// Runs every registered kind until `stop` is cancelled, and returns when all have stopped.
    pub async fn run(self, stop: CancellationToken) {
        for (kind, _) in &self.kinds {
            self.health.set_controller_ready(kind, false);
        }
        join_all(self.kinds.into_iter().map(|(_, run)| run(stop.clone()))).await;
    }

    /// Waits for the Lease of `election` (at once without one), then runs every kind until
    /// `stop` is cancelled or the Lease is lost, and returns when all have stopped. The Lease is
    /// given up as soon as `stop` is cancelled, not after the reconciles in flight end, so the
    /// replacement replica takes over at once; a lost Lease cancels the steps in flight, as a
    /// shutdown does (they could apply and prune for minutes beside the new leader).
    pub async fn lead(
        self,
        election: Option<LeaderElectionConfig>,
        stop: CancellationToken,
    ) -> Led {
        let leadership = match election {
            Some(election) => {
                let elector = LeaderElector::new(self.client.clone(), election);
                let Some(leadership) = elector.acquire(&stop).await else {
                    return Led::Never;
                };
                Some(leadership)
            }
            None => None,
        };
        // Cancelled at shutdown and when the Lease is lost.
        let running = stop.child_token();
        let lost = leadership
            .as_ref()
            .map_or_else(CancellationToken::new, Leadership::lost);
        let stop_on_loss = async {
            tokio::select! {
                () = lost.cancelled() => running.cancel(),
                () = running.cancelled() => {}
            }
        };
        let release = async {
            tokio::select! {
                () = stop.cancelled() => {
                    if let Some(leadership) = leadership {
                        leadership.release().await;
                    }
                }
                () = lost.cancelled() => {}
            }
        };
        tokio::join!(self.run(running.clone()), stop_on_loss, release);
        if lost.is_cancelled() {
            Led::LeaseLost
        } else {
            Led::Stopped
        }
    }
}

/// How [`Controllers::lead`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Led {
    /// Stopped before the Lease was acquired.
    Never,
    /// Led until shutdown.
    Stopped,
    /// Led until another replica took the Lease: the controllers stopped at once.
    LeaseLost,
}
