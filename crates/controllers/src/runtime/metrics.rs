//! Prometheus metrics with Flux's names, so Flux dashboards work unchanged.
//!
//! - `gotk_reconcile_duration_seconds` (histogram; labels `kind`, `name`, `namespace`), recorded
//!   by the [`ReconcileTimer`] drop guard on every exit path of a reconcile.
//! - `gotk_resource_info` (gauge, always 1; labels `customresource_kind`, `name`,
//!   `exported_namespace`, `ready`, `reason`, `suspended`, `revision`), the label set of Flux's
//!   kube-state-metrics configuration; one series per object, replaced when its labels change.
//! - `gotk_reconcile_errors` (counter; labels `kind`, `class`): failed reconciles by error class.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of `gotk_reconcile_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectLabels {
    /// The kind, e.g. `GitRepository`.
    pub kind: String,
    /// The object name.
    pub name: String,
    /// The object namespace.
    pub namespace: String,
}

/// Labels of `gotk_resource_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceInfoLabels {
    /// The kind, e.g. `GitRepository`.
    pub customresource_kind: String,
    /// The object name.
    pub name: String,
    /// The object namespace.
    pub exported_namespace: String,
    /// The `Ready` condition status (`True`, `False`, `Unknown`).
    pub ready: String,
    /// The `Ready` condition reason.
    pub reason: String,
    /// `true` when `spec.suspend` is set.
    pub suspended: String,
    /// The last reconciled revision, empty when none.
    pub revision: String,
}

/// Labels of `gotk_reconcile_errors`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// The kind.
    pub kind: String,
    /// `stalled`, `waiting` or `transient`.
    pub class: String,
}

type HistogramFamily = Family<ObjectLabels, Histogram, fn() -> Histogram>;

/// The metrics of all controllers of a process; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    duration: HistogramFamily,
    info: Family<ResourceInfoLabels, Gauge>,
    errors: Family<ErrorLabels, Counter>,
    current_info: Arc<Mutex<HashMap<ObjectLabels, ResourceInfoLabels>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn duration_histogram() -> Histogram {
    // 10 ms .. ~5 min.
    Histogram::new(exponential_buckets(0.01, 2.0, 15))
}

impl Metrics {
    /// A fresh registry with the metrics registered.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let duration: HistogramFamily = Family::new_with_constructor(duration_histogram);
        let info = Family::<ResourceInfoLabels, Gauge>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "gotk_reconcile_duration_seconds",
            "The duration in seconds of a GitOps Toolkit resource reconciliation",
            duration.clone(),
        );
        registry.register(
            "gotk_resource_info",
            "The current state of a Flux resource reconciliation",
            info.clone(),
        );
        registry.register(
            "gotk_reconcile_errors",
            "Failed reconciliations by error class",
            errors.clone(),
        );
        Self {
            registry: Arc::new(registry),
            duration,
            info,
            errors,
            current_info: Arc::default(),
        }
    }

    /// Starts timing a reconcile; the duration is recorded when the guard drops.
    pub fn start_reconcile(&self, kind: &str, namespace: &str, name: &str) -> ReconcileTimer {
        ReconcileTimer {
            histogram: self.duration.clone(),
            labels: ObjectLabels {
                kind: kind.to_owned(),
                name: name.to_owned(),
                namespace: namespace.to_owned(),
            },
            started: Instant::now(),
        }
    }

    /// Records the state of an object, replacing its previous `gotk_resource_info` series.
    pub fn set_resource_info(&self, labels: &ResourceInfoLabels) {
        let key = ObjectLabels {
            kind: labels.customresource_kind.clone(),
            name: labels.name.clone(),
            namespace: labels.exported_namespace.clone(),
        };
        let mut current = self
            .current_info
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(previous) = current.insert(key, labels.clone())
            && previous != *labels
        {
            self.info.remove(&previous);
        }
        self.info.get_or_create(labels).set(1);
    }

    /// Forgets an object (deleted): removes its `gotk_resource_info` series.
    pub fn forget(&self, kind: &str, namespace: &str, name: &str) {
        let key = ObjectLabels {
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        };
        let mut current = self
            .current_info
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(previous) = current.remove(&key) {
            self.info.remove(&previous);
        }
    }

    /// Counts a failed reconcile.
    pub fn count_error(&self, kind: &str, class: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                kind: kind.to_owned(),
                class: class.to_owned(),
            })
            .inc();
    }

    /// The metrics in the Prometheus/OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Records the duration of one reconcile into `gotk_reconcile_duration_seconds` when dropped.
pub struct ReconcileTimer {
    histogram: HistogramFamily,
    labels: ObjectLabels,
    started: Instant,
}

impl std::fmt::Debug for ReconcileTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReconcileTimer")
            .field("labels", &self.labels)
            .finish_non_exhaustive()
    }
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram
            .get_or_create(&self.labels)
            .observe(self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(revision: &str) -> ResourceInfoLabels {
        ResourceInfoLabels {
            customresource_kind: "GitRepository".into(),
            name: "app".into(),
            exported_namespace: "flux-system".into(),
            ready: "True".into(),
            reason: "Succeeded".into(),
            suspended: "false".into(),
            revision: revision.into(),
        }
    }

    #[test]
    fn timer_records_on_drop() {
        let metrics = Metrics::new();
        drop(metrics.start_reconcile("GitRepository", "flux-system", "app"));
        let text = metrics.encode();
        assert!(
            text.contains(
                r#"gotk_reconcile_duration_seconds_count{kind="GitRepository",name="app",namespace="flux-system"} 1"#
            ),
            "{text}"
        );
    }

    #[test]
    fn resource_info_keeps_one_series_per_object() {
        let metrics = Metrics::new();
        metrics.set_resource_info(&info("main@sha1:aaa"));
        metrics.set_resource_info(&info("main@sha1:bbb"));
        let text = metrics.encode();
        assert!(!text.contains("sha1:aaa"), "{text}");
        assert!(text.contains(r#"revision="main@sha1:bbb"} 1"#), "{text}");
        metrics.forget("GitRepository", "flux-system", "app");
        assert!(!metrics.encode().contains("sha1:bbb"));
    }

    #[test]
    fn counts_errors_by_class() {
        let metrics = Metrics::new();
        metrics.count_error("GitRepository", "transient");
        metrics.count_error("GitRepository", "transient");
        assert!(
            metrics.encode().contains(
                r#"gotk_reconcile_errors_total{kind="GitRepository",class="transient"} 2"#
            )
        );
    }
}
