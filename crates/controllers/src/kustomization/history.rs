//! `status.history`: the last reconciliations, one entry per digest of the applied objects and
//! outcome, newest first, as Flux kustomize-controller keeps it.

use std::collections::BTreeMap;
use std::time::Duration;

use capstan_api::meta::{HISTORY_MAX_SIZE, Snapshot};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DynamicObject;

/// The metadata key holding the applied source revision.
pub const REVISION_KEY: &str = "revision";
/// The metadata key holding the origin revision, when the artifact has one.
pub const ORIGIN_REVISION_KEY: &str = "originRevision";

/// `sha256:<hex>` over the objects as they are applied (JSON, in apply order).
pub fn digest(objects: &[DynamicObject]) -> String {
    let bytes = serde_json::to_vec(objects).unwrap_or_default();
    capstan_source::Digest::of(&bytes).to_string()
}

/// Records one reconciliation of `digest` ending with `status` (the `Ready` reason).
///
/// An entry with the same digest and status is updated (last time, duration, count,
/// metadata) and moved to the front; otherwise a new entry is put in front. At most
/// [`HISTORY_MAX_SIZE`] entries are kept.
pub fn upsert(
    history: &mut Vec<Snapshot>,
    digest: &str,
    now: jiff::Timestamp,
    duration: Duration,
    status: &str,
    metadata: BTreeMap<String, String>,
) {
    let duration = capstan_api::format_go_duration(duration);
    let snapshot = match history
        .iter()
        .position(|s| s.digest == digest && s.last_reconciled_status == status)
    {
        Some(index) => {
            let mut snapshot = history.remove(index);
            snapshot.last_reconciled = Time(now);
            snapshot.last_reconciled_duration = duration;
            snapshot.total_reconciliations = snapshot.total_reconciliations.saturating_add(1);
            snapshot.metadata = metadata;
            snapshot
        }
        None => Snapshot {
            digest: digest.to_owned(),
            first_reconciled: Time(now),
            last_reconciled: Time(now),
            last_reconciled_duration: duration,
            last_reconciled_status: status.to_owned(),
            total_reconciliations: 1,
            metadata,
        },
    };
    history.insert(0, snapshot);
    history.truncate(HISTORY_MAX_SIZE);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(seconds).unwrap()
    }

    fn meta(revision: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(REVISION_KEY.to_owned(), revision.to_owned())])
    }

    #[test]
    fn same_digest_and_status_update_one_entry() {
        let mut history = Vec::new();
        let second = Duration::from_millis(1500);
        upsert(
            &mut history,
            "sha256:a",
            at(10),
            second,
            "ReconciliationSucceeded",
            meta("r1"),
        );
        upsert(
            &mut history,
            "sha256:a",
            at(20),
            second,
            "ReconciliationSucceeded",
            meta("r1"),
        );
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].total_reconciliations, 2);
        assert_eq!(history[0].first_reconciled, Time(at(10)));
        assert_eq!(history[0].last_reconciled, Time(at(20)));
        assert_eq!(history[0].last_reconciled_duration, "1.5s");

        upsert(
            &mut history,
            "sha256:a",
            at(30),
            second,
            "HealthCheckFailed",
            meta("r1"),
        );
        upsert(
            &mut history,
            "sha256:b",
            at(40),
            second,
            "ReconciliationSucceeded",
            meta("r2"),
        );
        let order: Vec<(&str, &str)> = history
            .iter()
            .map(|s| (s.digest.as_str(), s.last_reconciled_status.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                ("sha256:b", "ReconciliationSucceeded"),
                ("sha256:a", "HealthCheckFailed"),
                ("sha256:a", "ReconciliationSucceeded"),
            ]
        );
        // Reconciling an older digest again moves it to the front.
        upsert(
            &mut history,
            "sha256:a",
            at(50),
            second,
            "ReconciliationSucceeded",
            meta("r1"),
        );
        assert_eq!(history[0].digest, "sha256:a");
        assert_eq!(history[0].total_reconciliations, 3);
        assert_eq!(history.len(), 3);
    }

    #[test]
    fn keeps_the_newest_five() {
        let mut history = Vec::new();
        for i in 0..7 {
            upsert(
                &mut history,
                &format!("sha256:{i}"),
                at(i),
                Duration::ZERO,
                "ReconciliationSucceeded",
                BTreeMap::new(),
            );
        }
        let digests: Vec<&str> = history.iter().map(|s| s.digest.as_str()).collect();
        assert_eq!(
            digests,
            ["sha256:6", "sha256:5", "sha256:4", "sha256:3", "sha256:2"]
        );
    }
}
