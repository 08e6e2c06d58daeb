//! `status.history` as Flux records it: one [`ReleaseSnapshot`] per release revision the
//! HelmRelease made (newest first), with Flux's fields — the digest of the observed release
//! (name, version, info, chart metadata, config, manifest, hooks without test hooks,
//! namespace), the config digest (`values::digest` of the release's values), times, status,
//! chart name/version/app version, test hooks and the action.

use std::collections::BTreeMap;

use capstan_api::helm::v2::{ReleaseSnapshot, TestHookStatus};
use capstan_helm::output::HookEvent;
use capstan_helm::release::{HookPhase, Release};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::values;

/// The snapshot format Flux writes (`v2.CurrentSnapshotAPIVersion`).
pub const SNAPSHOT_API_VERSION: &str = "v2";

/// The digest Flux records for a release: `sha256:` of the observed release as JSON.
pub fn release_digest(release: &Release, oci_digest: Option<&str>) -> String {
    let hooks: Vec<_> = release
        .hooks
        .iter()
        .filter(|h| !h.events.contains(&HookEvent::Test))
        .collect();
    let mut observation = serde_json::json!({
        "name": release.name,
        "version": release.version,
        "info": release.info,
        "chartMetadata": release.metadata(),
        "config": release.config,
        "manifest": release.manifest,
        "hooks": hooks,
        "namespace": release.namespace,
    });
    if let Some(digest) = oci_digest.filter(|d| !d.is_empty()) {
        observation["ociDigest"] = digest.into();
    }
    values::sha256(&serde_json::to_vec(&observation).unwrap_or_default())
}

fn time(timestamp: Option<jiff::Timestamp>) -> Time {
    Time(timestamp.unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

/// The snapshot of `release`, made by `action` (`install`, `upgrade`, `rollback`).
pub fn snapshot(
    release: &Release,
    action: Option<&str>,
    oci_digest: Option<&str>,
) -> ReleaseSnapshot {
    let app_version = release.app_version();
    ReleaseSnapshot {
        api_version: Some(SNAPSHOT_API_VERSION.to_owned()),
        digest: release_digest(release, oci_digest),
        name: release.name.clone(),
        namespace: release.namespace.clone(),
        version: release.version,
        status: release.status().as_str().to_owned(),
        chart_name: release.chart_name().to_owned(),
        chart_version: release.chart_version().to_owned(),
        app_version: (!app_version.is_empty()).then(|| app_version.to_owned()),
        config_digest: values::digest(&release.config),
        first_deployed: time(release.info.first_deployed),
        last_deployed: time(release.info.last_deployed),
        deleted: release.info.deleted.map(Time),
        test_hooks: Some(test_hooks(release)).filter(|hooks| !hooks.is_empty()),
        oci_digest: oci_digest.filter(|d| !d.is_empty()).map(str::to_owned),
        action: action.map(str::to_owned),
    }
}

/// The test hooks of `release` that have run, by name.
pub fn test_hooks(release: &Release) -> BTreeMap<String, TestHookStatus> {
    release
        .hooks
        .iter()
        .filter(|h| h.events.contains(&HookEvent::Test) && h.last_run.phase != HookPhase::NotRun)
        .map(|h| {
            (
                h.name.clone(),
                TestHookStatus {
                    last_started: h.last_run.started_at.map(Time),
                    last_completed: h.last_run.completed_at.map(Time),
                    phase: Some(phase(h.last_run.phase).to_owned()),
                },
            )
        })
        .collect()
}

fn phase(phase: HookPhase) -> &'static str {
    match phase {
        HookPhase::NotRun => "",
        HookPhase::Unknown => "Unknown",
        HookPhase::Running => "Running",
        HookPhase::Succeeded => "Succeeded",
        HookPhase::Failed => "Failed",
    }
}

/// Records `release` at the head of `history` (replacing the snapshot of the same revision),
/// refreshes the statuses of the other snapshots from `records` (e.g. `superseded`), and keeps
/// at most `max` snapshots (Flux keeps [`capstan_api::meta::HISTORY_MAX_SIZE`]).
pub fn record(
    history: &mut Vec<ReleaseSnapshot>,
    snapshot: ReleaseSnapshot,
    records: &[Release],
    max: usize,
) {
    history.retain(|s| !(s.name == snapshot.name && s.version == snapshot.version));
    history.insert(0, snapshot);
    for entry in history.iter_mut().skip(1) {
        if let Some(record) = records
            .iter()
            .find(|r| r.name == entry.name && r.version == entry.version)
        {
            record.status().as_str().clone_into(&mut entry.status);
        }
    }
    history.truncate(max.max(1));
}

/// `<namespace>/<name>.v<version>` (Flux's `FullReleaseName`).
pub fn full_name(release: &Release) -> String {
    format!(
        "{}/{}.v{}",
        release.namespace, release.name, release.version
    )
}

/// `<chart>@<version>` (Flux's `VersionedChartName`).
pub fn versioned_chart(release: &Release) -> String {
    format!("{}@{}", release.chart_name(), release.chart_version())
}
