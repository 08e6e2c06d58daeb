//! Report-only drift mode: the annotation [`DRIFT_ANNOTATION`]`: report` on a Kustomization
//! makes each reconcile compare the build with the cluster (server-side dry-run apply)
//! instead of applying. Nothing is created, changed or pruned; the result is the `Drifted`
//! condition (object ids and changed field paths, never values) and a Warning Event
//! `DriftDetected` when the drift found changes.

use capstan_apply::{Drift, DriftKind};

/// The annotation selecting the drift mode of a Kustomization.
pub const DRIFT_ANNOTATION: &str = "capstan.dev/drift";
/// The value of [`DRIFT_ANNOTATION`] turning on report-only mode.
pub const DRIFT_REPORT: &str = "report";
/// The condition holding the drift report.
pub const DRIFTED_CONDITION: &str = "Drifted";
/// Reason (and Event reason) when drift or missing objects were found.
pub const DRIFT_DETECTED: &str = "DriftDetected";
/// Reason when the cluster matches the build.
pub const NO_DRIFT: &str = "NoDriftDetected";

/// The most field paths listed per object; more are counted.
const MAX_PATHS: usize = 10;

/// Whether `annotations` ask for report-only mode.
pub fn report_only(annotations: &std::collections::BTreeMap<String, String>) -> bool {
    annotations.get(DRIFT_ANNOTATION).map(String::as_str) == Some(DRIFT_REPORT)
}

/// The summary of one diff.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Objects that exist and differ: `Kind/namespace/name` and the changed paths.
    pub drifted: Vec<(String, Vec<String>)>,
    /// Objects that do not exist (`Kind/namespace/name`).
    pub missing: Vec<String>,
}

impl Report {
    /// Summarises the drifts.
    pub fn new(drifts: &[Drift]) -> Self {
        let mut report = Self::default();
        for drift in drifts {
            match &drift.kind {
                DriftKind::Created => report.missing.push(drift.object.to_string()),
                DriftKind::Changed(paths) => report
                    .drifted
                    .push((drift.object.to_string(), paths.clone())),
                DriftKind::Unchanged | DriftKind::Skipped => {}
            }
        }
        report
    }

    /// Whether anything differs.
    pub fn has_drift(&self) -> bool {
        !self.drifted.is_empty() || !self.missing.is_empty()
    }

    /// The condition message: ids and paths only.
    pub fn message(&self, revision: &str) -> String {
        if !self.has_drift() {
            return format!("no drift from revision {revision}");
        }
        let mut parts = Vec::new();
        for (object, paths) in &self.drifted {
            let mut listed: Vec<&str> = paths.iter().take(MAX_PATHS).map(String::as_str).collect();
            let more = paths.len().saturating_sub(MAX_PATHS);
            let extra = format!("and {more} more");
            if more > 0 {
                listed.push(&extra);
            }
            parts.push(format!("{object} drifted at {}", listed.join(", ")));
        }
        for object in &self.missing {
            parts.push(format!("{object} missing"));
        }
        format!(
            "drift from revision {revision} (report only, nothing changed): {}",
            parts.join("; ")
        )
    }
}

#[cfg(test)]
mod tests {
    use capstan_apply::ObjectRef;

    use super::*;

    #[test]
    fn reports_ids_and_paths_only() {
        let drifts = [
            Drift {
                object: ObjectRef::new("v1", "Secret", "apps", "token"),
                kind: DriftKind::Changed(vec!["data.password".into()]),
            },
            Drift {
                object: ObjectRef::new("v1", "ConfigMap", "apps", "same"),
                kind: DriftKind::Unchanged,
            },
            Drift {
                object: ObjectRef::new("apps/v1", "Deployment", "apps", "web"),
                kind: DriftKind::Created,
            },
        ];
        let report = Report::new(&drifts);
        assert!(report.has_drift());
        assert_eq!(
            report.message("main@sha1:1"),
            "drift from revision main@sha1:1 (report only, nothing changed): Secret/apps/token drifted at data.password; Deployment/apps/web missing"
        );
        assert_eq!(
            Report::new(&drifts[1..2]).message("r"),
            "no drift from revision r"
        );
        let many = Drift {
            object: ObjectRef::new("v1", "ConfigMap", "apps", "big"),
            kind: DriftKind::Changed((0..12).map(|i| format!("data.k{i}")).collect()),
        };
        assert!(
            Report::new(&[many])
                .message("r")
                .ends_with("data.k9, and 2 more")
        );
    }
}
