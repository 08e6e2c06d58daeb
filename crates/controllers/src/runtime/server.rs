//! The controller process's HTTP endpoints: `/metrics`, `/healthz`, `/readyz`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use super::metrics::Metrics;

/// Readiness served by `/readyz`, per controller: each controller registers itself by name
/// when it has started ([`Health::set_controller_ready`]) and marks itself not ready when it
/// stops. The process is ready when every registered controller is, or, before any has
/// started, when it was marked ready as a whole ([`Health::set_ready`]: a standby replica
/// serving while it waits for the Lease).
#[derive(Clone, Debug, Default)]
pub struct Health {
    standby: Arc<AtomicBool>,
    controllers: Arc<Mutex<BTreeMap<String, bool>>>,
}

impl Health {
    /// Marks the process ready (or not) while no controller has started.
    pub fn set_ready(&self, ready: bool) {
        self.standby.store(ready, Ordering::Release);
    }

    /// Marks the controller `name` ready (started) or not (stopped).
    pub fn set_controller_ready(&self, name: &str, ready: bool) {
        self.controllers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_owned(), ready);
    }

    /// The registered controllers that are not ready, by name.
    pub fn not_ready(&self) -> Vec<String> {
        self.controllers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, ready)| !**ready)
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Whether the process is ready.
    pub fn is_ready(&self) -> bool {
        let controllers = self
            .controllers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if controllers.is_empty() {
            self.standby.load(Ordering::Acquire)
        } else {
            controllers.values().all(|ready| *ready)
        }
    }
}

/// A router serving `GET /metrics` (OpenMetrics text), `GET /healthz` (always 200 while the
/// process serves) and `GET /readyz` (200 once `health` is ready, else 503 naming the
/// controllers not ready).
pub fn router(metrics: Metrics, health: Health) -> axum::Router {
    axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        metrics.encode(),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let health = health.clone();
                async move {
                    if health.is_ready() {
                        (StatusCode::OK, "ok").into_response()
                    } else {
                        let waiting = health.not_ready();
                        let body = if waiting.is_empty() {
                            "not ready".to_owned()
                        } else {
                            format!("not ready: {}", waiting.join(", "))
                        };
                        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
                    }
                }
            }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_is_per_controller() {
        let health = Health::default();
        assert!(!health.is_ready(), "nothing started");
        health.set_ready(true);
        assert!(health.is_ready(), "a standby serves");
        health.set_controller_ready("Kustomization", true);
        health.set_controller_ready("GitRepository", false);
        assert!(!health.is_ready());
        assert_eq!(health.not_ready(), ["GitRepository"]);
        health.set_controller_ready("GitRepository", true);
        assert!(health.is_ready());
        health.set_controller_ready("Kustomization", false);
        assert!(
            !health.is_ready(),
            "the first to stop does not speak for the others"
        );
        assert_eq!(health.not_ready(), ["Kustomization"]);
    }
}
