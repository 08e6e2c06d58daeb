//! `status.history` as Flux records it: one [`ReleaseSnapshot`] per release revision the
//! HelmRelease made (newest first), with Flux's fields — the digest of the observed release
//! (name, version, info, chart metadata, config, manifest, hooks without test hooks,
//! namespace, OCI digest: [`release_digest`], byte for byte helm-controller's, so releases
//! Flux recorded stay in sync), the config digest (`values::digest` of the release's values), times, status,
//! chart name/version/app version, test hooks and the action.

use std::collections::BTreeMap;

use capstan_api::helm::v2::{ReleaseSnapshot, TestHookStatus};
use capstan_helm::output::HookEvent;
use capstan_helm::release::{HookPhase, Release};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::values;

/// The snapshot format Flux writes (`v2.CurrentSnapshotAPIVersion`).
pub const SNAPSHOT_API_VERSION: &str = "v2";

/// The digest Flux records for a release (`Snapshot.Digest`): `sha256:` of helm-controller's
/// release `Observation` as Go's `json.Encoder` writes it, so that a release Flux recorded
/// is recognised as the one in storage (and Flux recognises ours).
///
/// The observation's fields in Go's order: `name`, `version`, `info`, `chartMetadata`,
/// `config` (`null` when empty), `manifest`, `hooks` (test hooks left out; `null` when none
/// is left), `namespace`, `ociDigest` (when set). Maps are written with sorted keys, values'
/// numbers as Go's `float64`, fields a newer Helm wrote that Helm v4's types lack are left
/// out, and the text ends with the encoder's newline.
pub fn release_digest(release: &Release, oci_digest: Option<&str>) -> String {
    values::sha256(&go_json(&observation(release, oci_digest)))
}

/// helm-controller's `release.Observation` of `release` as JSON (see [`release_digest`]).
fn observation(release: &Release, oci_digest: Option<&str>) -> serde_json::Value {
    use serde_json::Value;
    let mut info = release.info.clone();
    info.extra.clear();
    let mut info = serde_json::to_value(&info).unwrap_or_default();
    if let Some(resources) = info.get_mut("resources") {
        sort_keys(resources);
    }
    let metadata = release.metadata().cloned().map_or_else(
        || Value::Object(serde_json::Map::new()),
        |mut metadata| {
            metadata.extra.clear();
            serde_json::to_value(&metadata).unwrap_or_default()
        },
    );
    let config = if release.config.is_empty() {
        Value::Null
    } else {
        let mut config = Value::Object(release.config.clone());
        sort_keys(&mut config);
        float_numbers(&mut config);
        config
    };
    let hooks: Vec<_> = release
        .hooks
        .iter()
        .filter(|h| !h.events.contains(&HookEvent::Test))
        .collect();
    let hooks = if hooks.is_empty() {
        Value::Null
    } else {
        serde_json::to_value(&hooks).unwrap_or_default()
    };
    let mut observation = serde_json::Map::new();
    observation.insert("name".into(), release.name.clone().into());
    observation.insert("version".into(), release.version.into());
    observation.insert("info".into(), info);
    observation.insert("chartMetadata".into(), metadata);
    observation.insert("config".into(), config);
    observation.insert("manifest".into(), release.manifest.clone().into());
    observation.insert("hooks".into(), hooks);
    observation.insert("namespace".into(), release.namespace.clone().into());
    if let Some(digest) = oci_digest.filter(|d| !d.is_empty()) {
        observation.insert("ociDigest".into(), digest.into());
    }
    Value::Object(observation)
}

/// Go writes a map's keys sorted.
fn sort_keys(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Array(items) => items.iter_mut().for_each(sort_keys),
        serde_json::Value::Object(map) => {
            map.sort_keys();
            map.values_mut().for_each(sort_keys);
        }
        _ => {}
    }
}

/// Every number of Helm values is a Go `float64` (JSON and YAML decode so).
fn float_numbers(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Number(number) => {
            if let Some(float) = number.as_f64().and_then(serde_json::Number::from_f64) {
                *number = float;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(float_numbers),
        serde_json::Value::Object(map) => map.values_mut().for_each(float_numbers),
        _ => {}
    }
}

/// `value` as Go's `json.Encoder` writes it: compact, `<`, `>`, `&`, U+2028 and U+2029
/// escaped, numbers as Go writes a `float64`, and a trailing newline.
fn go_json(value: &serde_json::Value) -> Vec<u8> {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, GoFormatter);
    // Writing a JSON value to memory cannot fail.
    let _ = serde::Serialize::serialize(value, &mut serializer);
    out.push(b'\n');
    out
}

/// Go's `encoding/json` float64 form: the shortest digits that read back, in fixed notation
/// unless the magnitude is below 1e-6 or from 1e21 on, then `1e+21`, `1e-7`.
fn go_float(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-6..1e21).contains(&magnitude) {
        let text = format!("{value:e}");
        return match text.split_once('e') {
            Some((mantissa, exponent)) if exponent.starts_with('-') => {
                format!("{mantissa}e{exponent}")
            }
            Some((mantissa, exponent)) => format!("{mantissa}e+{exponent}"),
            None => text,
        };
    }
    format!("{value}")
}

/// serde_json's compact output with Go's string escaping and float form.
struct GoFormatter;

impl serde_json::ser::Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut rest = fragment;
        while let Some(at) = rest.find(['<', '>', '&', '\u{2028}', '\u{2029}']) {
            writer.write_all(&rest.as_bytes()[..at])?;
            let c = rest[at..].chars().next().unwrap_or_default();
            write!(writer, "\\u{:04x}", u32::from(c))?;
            rest = &rest[at + c.len_utf8()..];
        }
        writer.write_all(rest.as_bytes())
    }

    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        writer.write_all(go_float(value).as_bytes())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A release as Helm stores it: times with nanoseconds, `<>&` in strings, a chart with
    /// annotations out of order, values with floats Go writes in exponent form, a test hook
    /// (left out of the observation) and a hook that ran.
    fn stored_release(config: &serde_json::Value, hooks: &serde_json::Value) -> Release {
        let json = serde_json::json!({
            "name": "web",
            "info": {
                "first_deployed": "2026-01-02T03:04:05.123456789Z",
                "last_deployed": "2026-01-02T03:04:06Z",
                "description": "Upgrade complete", "status": "deployed",
                "notes": "Visit <http://x> & enjoy",
            },
            "chart": {
                "metadata": {
                    "name": "podinfo", "version": "6.14.1+9933f58f8bf4",
                    "description": "Podinfo <Helm> chart", "apiVersion": "v2",
                    "appVersion": "6.14.1", "annotations": {"z": "1", "a": "2"},
                    "kubeVersion": ">=1.23.0-0", "type": "application",
                },
                "lock": null, "templates": [], "values": {}, "schema": null,
                "schemamodtime": "0001-01-01T00:00:00Z", "files": [],
            },
            "config": config,
            "manifest": "---\n# Source: podinfo/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  a: \"x && y\"\n",
            "hooks": hooks,
            "version": 3, "namespace": "apps", "apply_method": "ssa",
        });
        capstan_helm::release::decode_json(json.to_string().as_bytes()).unwrap()
    }

    fn hooks() -> serde_json::Value {
        serde_json::json!([
            {"name": "web-test", "kind": "Pod", "path": "podinfo/templates/tests/t.yaml",
             "manifest": "x", "events": ["test"], "last_run": {"phase": ""}},
            {"name": "web-pre", "kind": "Job", "path": "podinfo/templates/pre.yaml",
             "manifest": "kind: Job", "events": ["pre-install", "pre-upgrade"],
             "last_run": {"started_at": "2026-01-02T03:04:05Z",
                          "completed_at": "2026-01-02T03:04:06.5Z", "phase": "Succeeded"},
             "weight": -5, "delete_policies": ["hook-succeeded"]},
        ])
    }

    // The expected digests were computed outside this code: the observation written out by
    // hand in Go's field order, encoded with Python's json.dumps, then Go's HTML escaping,
    // Go's float forms and json.Encoder's trailing newline applied.
    #[test]
    fn the_release_digest_is_fluxs_observation_digest() {
        let config = serde_json::json!({
            "replicaCount": 2, "ratio": 0.5, "big": 1e21, "tiny": 1e-7,
            "ingress": {"hosts": ["a<b>"], "enabled": true}, "empty": null,
        });
        let release = stored_release(&config, &hooks());
        assert_eq!(
            release_digest(&release, None),
            "sha256:eed6dba3de3972679f43d92a061ff20792fce92fbc948891f9d46c80ad8f0603"
        );
        assert_eq!(
            release_digest(
                &release,
                Some("sha256:9933f58f8bf459eb199d59ebc8a05683f3944e1242d9f5467d99aa2cf08a5370")
            ),
            "sha256:274914e035383bb84228e427e713144b3c3925eb0d7312eb8e2a0cc1da9e538b"
        );
        assert_eq!(
            release_digest(&release, Some("")),
            release_digest(&release, None)
        );
    }

    #[test]
    fn empty_values_and_only_test_hooks_are_go_nulls() {
        let only_test = serde_json::json!([hooks()[0].clone()]);
        let release = stored_release(&serde_json::json!({}), &only_test);
        assert_eq!(
            release_digest(&release, None),
            "sha256:c48c0b1df2572316657750c20c797c582bcfca64a7283a4bae926ee6c28d0606"
        );
    }

    /// helm-controller's own test values for `lastAttemptedConfigDigest` (`foo: bar`, and
    /// no values at all): the config digest Flux records matches ours.
    #[test]
    fn the_config_digest_is_fluxs() {
        let mut values = serde_json::Map::new();
        assert_eq!(
            values::digest(&values),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        values.insert("foo".into(), "bar".into());
        assert_eq!(
            values::digest(&values),
            "sha256:1dabc4e3cbbd6a0818bd460f3a6c9855bfe95d506c74726bc0f2edb0aecb1f4e"
        );
    }

    /// helm-controller's own test value: `Observation{Name: "foo"}`.
    #[test]
    fn the_encoding_matches_helm_controllers_known_digest() {
        let mut observation = serde_json::Map::new();
        observation.insert("name".into(), "foo".into());
        observation.insert("version".into(), 0.into());
        observation.insert("info".into(), serde_json::json!({}));
        observation.insert("chartMetadata".into(), serde_json::json!({}));
        observation.insert("config".into(), serde_json::Value::Null);
        observation.insert("manifest".into(), "".into());
        observation.insert("hooks".into(), serde_json::Value::Null);
        observation.insert("namespace".into(), "".into());
        assert_eq!(
            values::sha256(&go_json(&serde_json::Value::Object(observation))),
            "sha256:f1498f27a16a09cd7e1ee610d924df065c03d30035638babc95dd9a8d412ce4d"
        );
    }

    #[test]
    fn floats_are_written_as_go_writes_them() {
        let cases = [
            (1.0, "1"),
            (0.5, "0.5"),
            (-0.0, "-0"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (0.000_001, "0.000001"),
            (1e-7, "1e-7"),
            (2.5e-10, "2.5e-10"),
            (123_456.789, "123456.789"),
        ];
        for (value, expected) in cases {
            assert_eq!(go_float(value), expected, "{value:e}");
        }
    }
}
