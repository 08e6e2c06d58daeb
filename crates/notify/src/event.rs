//! Flux's notification event (`event.toolkit.fluxcd.io/v1beta1` `Event` of fluxcd/pkg
//! `apis/event`), serialised byte for byte as Go's `encoding/json` marshals it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The API group events are keyed under (`event.toolkit.fluxcd.io`): an involved object's
/// annotation `event.toolkit.fluxcd.io/<key>` becomes metadata `<key>`.
pub const EVENT_GROUP: &str = "event.toolkit.fluxcd.io";

/// Metadata key of the revision the object reconciled (`main@sha1:…`).
pub const META_REVISION: &str = "revision";
/// Metadata key of the source revision an artifact was built from (OCI artifacts of Git trees).
pub const META_ORIGIN_REVISION: &str = "originRevision";
/// Metadata key of an explicit commit (takes precedence over the revisions).
pub const META_COMMIT: &str = "commit";
/// Metadata key of the Alert's summary.
pub const META_SUMMARY: &str = "summary";
/// Metadata key `commit_status` (value `update`): an event that only updates a commit status.
pub const META_COMMIT_STATUS: &str = "commit_status";
/// Metadata key of the token a controller attaches; never forwarded.
pub const META_TOKEN: &str = "token";

/// The reason Flux's controllers give to "reconciliation in progress" events, which the
/// commit-status providers (but Gitea) and PagerDuty skip.
pub const PROGRESSING_REASON: &str = "Progressing";

/// Event severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Actions taken during reconciliation; Flux never forwards these to providers.
    Trace,
    /// Informational: changes applied, reconciliation succeeded.
    Info,
    /// Something went wrong.
    Error,
}

impl Severity {
    /// `trace`, `info` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trace => "trace",
            Self::Info => "info",
            Self::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Kubernetes `ObjectReference` with Go's field order; every field is omitted when empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// Kind of the referent (`Kustomization`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Namespace of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// UID of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// API version of the referent (`kustomize.toolkit.fluxcd.io/v1`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Resource version of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// Field path within the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field_path: String,
}

impl ObjectReference {
    /// The API group of `apiVersion` (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }
}

/// A notification event as Flux's controllers POST it to notification-controller.
///
/// Field order, names and omissions follow Go's `encoding/json` of the Flux struct:
/// `metadata` and `reportingInstance` are omitted when empty, `timestamp` is RFC 3339 in UTC
/// with seconds precision (Kubernetes `metav1.Time`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// The object the event is about.
    pub involved_object: ObjectReference,
    /// `trace`, `info` or `error`.
    pub severity: Severity,
    /// When the event was recorded.
    #[serde(
        serialize_with = "serialize_timestamp",
        deserialize_with = "deserialize_timestamp"
    )]
    pub timestamp: jiff::Timestamp,
    /// Human-readable description (Flux caps it at 39,000 characters).
    pub message: String,
    /// Machine-readable reason (`ReconciliationSucceeded`, `Progressing`, …).
    pub reason: String,
    /// Extra data: `revision`, `originRevision`, `summary`, … (sorted by key, as Go's maps).
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub metadata: BTreeMap<String, String>,
    /// The controller that emitted the event (`kustomize-controller`).
    pub reporting_controller: String,
    /// The controller instance (pod name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reporting_instance: String,
}

/// `"metadata": null` (a nil Go map marshalled without omitempty) reads as no metadata.
fn null_as_empty<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    Ok(Option::<BTreeMap<String, String>>::deserialize(deserializer)?.unwrap_or_default())
}

fn serialize_timestamp<S: Serializer>(
    timestamp: &jiff::Timestamp,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&rfc3339(*timestamp))
}

fn deserialize_timestamp<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<jiff::Timestamp, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse::<jiff::Timestamp>()
        .map_err(|e| serde::de::Error::custom(format!("timestamp {text:?}: {e}")))
}

/// `2026-11-25T01:02:03Z`: RFC 3339 in UTC, whole seconds (Go's `time.RFC3339` of a UTC time).
pub fn rfc3339(timestamp: jiff::Timestamp) -> String {
    timestamp.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl Event {
    /// The revision commit-status providers report on: metadata `commit`, else
    /// `originRevision`, else `revision` (fluxcd/pkg `Event.GetRevision`).
    pub fn revision(&self) -> Option<&str> {
        [META_COMMIT, META_ORIGIN_REVISION, META_REVISION]
            .iter()
            .find_map(|key| self.metadata.get(*key).map(String::as_str))
    }

    /// The JSON Flux would send for this event: Go's `json.Marshal` (HTML-escaped).
    pub fn to_go_json(&self) -> Vec<u8> {
        crate::gojson::to_vec(self)
    }

    /// `kind/name.namespace` with the kind lower-cased, the object line of most chat providers.
    pub(crate) fn object_line(&self) -> String {
        let o = &self.involved_object;
        format!("{}/{}.{}", o.kind.to_lowercase(), o.name, o.namespace)
    }

    /// Parses an event as Flux's controllers POST it.
    pub fn from_json(body: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

/// A metadata key set by more than one source when an event is combined for an Alert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataConflict {
    /// The key (without prefix).
    pub key: String,
    /// The sources in the order they were applied (the last one wins).
    pub sources: Vec<&'static str>,
}

impl Event {
    /// The event as an Alert dispatches it (notification-controller's
    /// `excludeInternalMetadata` + `combineEventMetadata`, internal/server/event_handlers.go):
    /// the `<object group>/token` key dropped, then the metadata rebuilt from, in this order,
    /// `event.toolkit.fluxcd.io/<key>` entries (involved object annotations), the Alert's
    /// `eventMetadata`, its `summary` (as `summary`), and `<object group>/<key>` entries
    /// (controller metadata such as `kustomize.toolkit.fluxcd.io/revision`), each without its
    /// prefix; a later source wins. Keys without one of these prefixes are dropped, unless
    /// nothing at all is left (then the metadata stays as it was). Returns the keys set by
    /// more than one source, sorted, for the warning event Flux emits.
    pub fn combined_for_alert(
        &self,
        event_metadata: &BTreeMap<String, String>,
        summary: Option<&str>,
    ) -> (Event, Vec<MetadataConflict>) {
        const EVENT_ANNOTATIONS: &str = "involved object annotations";
        const ALERT_METADATA: &str = "Alert object .spec.eventMetadata";
        const ALERT_SUMMARY: &str = "Alert object .spec.summary";
        const CONTROLLER: &str = "involved object controller metadata";
        let mut event = self.clone();
        let group = self.involved_object.group().to_owned();
        event.metadata.remove(&format!("{group}/{META_TOKEN}"));
        let mut metadata = BTreeMap::new();
        let mut sources: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
        let mut set = |key: &str, value: &str, source: &'static str| {
            metadata.insert(key.to_owned(), value.to_owned());
            sources.entry(key.to_owned()).or_default().push(source);
        };
        let event_prefix = format!("{EVENT_GROUP}/");
        for (k, v) in &event.metadata {
            if let Some(key) = k.strip_prefix(&event_prefix) {
                set(key, v, EVENT_ANNOTATIONS);
            }
        }
        for (k, v) in event_metadata {
            set(k, v, ALERT_METADATA);
        }
        if let Some(summary) = summary.filter(|s| !s.is_empty()) {
            set(META_SUMMARY, summary, ALERT_SUMMARY);
        }
        let object_prefix = format!("{group}/");
        for (k, v) in &event.metadata {
            if let Some(key) = k.strip_prefix(&object_prefix) {
                set(key, v, CONTROLLER);
            }
        }
        let conflicts = sources
            .into_iter()
            .filter(|(_, s)| s.len() > 1)
            .map(|(key, sources)| MetadataConflict { key, sources })
            .collect();
        if !metadata.is_empty() {
            event.metadata = metadata;
        }
        (event, conflicts)
    }
}

/// The commit SHA of a revision (`main@sha1:<sha>`, `sha1:<sha>`, legacy `main/<sha>` or a
/// bare SHA): the part after the last `:`, else after the last `/`; it must be 40 characters
/// (fluxcd/pkg `git.ExtractHashFromRevision`, as notification-controller's `parseRevision`).
pub fn commit_of(revision: &str) -> Option<&str> {
    let hash = match revision.rfind(':') {
        Some(i) => &revision[i + 1..],
        None => revision.rsplit('/').next().unwrap_or(revision),
    };
    (hash.len() == 40).then_some(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event as kustomize-controller sends one (fields from fluxcd/pkg
    /// apis/event/v1beta1/event.go; names from runtime/events/recorder.go).
    fn event() -> Event {
        Event {
            involved_object: ObjectReference {
                kind: "Kustomization".into(),
                namespace: "apps".into(),
                name: "web".into(),
                uid: "7d3c0a52-1111-4a6e-9a43-0b1b2c3d4e5f".into(),
                api_version: "kustomize.toolkit.fluxcd.io/v1".into(),
                ..ObjectReference::default()
            },
            severity: Severity::Info,
            timestamp: "2026-11-25T01:02:03.456Z".parse().unwrap(),
            message: "Deployment/apps/web configured <ok> & done".into(),
            reason: "ReconciliationSucceeded".into(),
            metadata: BTreeMap::from([(
                "revision".into(),
                "main@sha1:0123456789abcdef0123456789abcdef01234567".into(),
            )]),
            reporting_controller: "kustomize-controller".into(),
            reporting_instance: String::new(),
        }
    }

    #[test]
    fn marshals_as_go_does() {
        // Go's encoding/json: struct field order, omitempty, HTML escaping, metav1.Time in UTC
        // seconds (apis/event/v1beta1/event.go, k8s.io/apimachinery meta/v1/time.go).
        let json = String::from_utf8(event().to_go_json()).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"{"involvedObject":{"kind":"Kustomization","namespace":"apps","name":"web","#,
                r#""uid":"7d3c0a52-1111-4a6e-9a43-0b1b2c3d4e5f","apiVersion":"kustomize.toolkit.fluxcd.io/v1"},"#,
                r#""severity":"info","timestamp":"2026-11-25T01:02:03Z","#,
                r#""message":"Deployment/apps/web configured \u003cok\u003e \u0026 done","#,
                r#""reason":"ReconciliationSucceeded","#,
                r#""metadata":{"revision":"main@sha1:0123456789abcdef0123456789abcdef01234567"},"#,
                r#""reportingController":"kustomize-controller"}"#
            )
        );
        let back = Event::from_json(json.as_bytes()).unwrap();
        let mut expected = event();
        expected.timestamp = "2026-11-25T01:02:03Z".parse().unwrap();
        assert_eq!(back, expected);
    }

    #[test]
    fn parses_a_flux_post_with_offset_time_and_no_metadata() {
        let body = br#"{"involvedObject":{"kind":"GitRepository","namespace":"flux-system","name":"repo","apiVersion":"source.toolkit.fluxcd.io/v1"},"severity":"error","timestamp":"2026-11-25T03:02:03+02:00","message":"auth failed","reason":"GitOperationFailed","reportingController":"source-controller","reportingInstance":"source-controller-7f9c"}"#;
        let event = Event::from_json(body).unwrap();
        let with_null = String::from_utf8_lossy(body).replace(
            r#""reportingController""#,
            r#""metadata":null,"reportingController""#,
        );
        assert_eq!(Event::from_json(with_null.as_bytes()).unwrap(), event);
        assert_eq!(event.severity, Severity::Error);
        assert_eq!(rfc3339(event.timestamp), "2026-11-25T01:02:03Z");
        assert!(event.metadata.is_empty());
        assert_eq!(event.involved_object.group(), "source.toolkit.fluxcd.io");
        assert_eq!(event.reporting_instance, "source-controller-7f9c");
        assert!(
            !String::from_utf8(event.to_go_json())
                .unwrap()
                .contains("metadata")
        );
    }

    #[test]
    fn combined_for_alert_as_notification_controller() {
        // event_handlers.go combineEventMetadata / excludeInternalMetadata.
        let mut raw = event();
        raw.metadata = BTreeMap::from([
            (
                "kustomize.toolkit.fluxcd.io/revision".into(),
                "main@sha1:abc".into(),
            ),
            ("kustomize.toolkit.fluxcd.io/token".into(), "t0ken".into()),
            ("event.toolkit.fluxcd.io/team".into(), "web".into()),
            ("event.toolkit.fluxcd.io/env".into(), "annotation".into()),
            ("unprefixed".into(), "dropped".into()),
        ]);
        let alert_metadata = BTreeMap::from([("env".to_owned(), "prod".to_owned())]);
        let (combined, conflicts) = raw.combined_for_alert(&alert_metadata, Some("web shop"));
        assert_eq!(
            combined.metadata,
            BTreeMap::from([
                ("env".to_owned(), "prod".to_owned()),
                ("revision".to_owned(), "main@sha1:abc".to_owned()),
                ("summary".to_owned(), "web shop".to_owned()),
                ("team".to_owned(), "web".to_owned()),
            ])
        );
        assert_eq!(
            conflicts,
            vec![MetadataConflict {
                key: "env".into(),
                sources: vec![
                    "involved object annotations",
                    "Alert object .spec.eventMetadata"
                ],
            }]
        );
        // Nothing prefixed and no Alert metadata: the metadata stays.
        let mut plain = event();
        plain.metadata = BTreeMap::from([("revision".into(), "v1".into())]);
        let (same, conflicts) = plain.combined_for_alert(&BTreeMap::new(), None);
        assert_eq!(same, plain);
        assert!(conflicts.is_empty());
    }

    #[test]
    fn revision_precedence_and_commit_extraction() {
        let mut e = event();
        e.metadata.insert(
            "originRevision".into(),
            "v1@sha1:".to_owned() + &"b".repeat(40),
        );
        assert_eq!(commit_of(e.revision().unwrap()), Some(&*"b".repeat(40)));
        e.metadata.insert("commit".into(), "c".repeat(40));
        assert_eq!(commit_of(e.revision().unwrap()), Some(&*"c".repeat(40)));
        assert_eq!(
            commit_of(&format!("main/{}", "d".repeat(40))),
            Some(&*"d".repeat(40))
        );
        assert_eq!(commit_of("latest@sha256:abc"), None);
    }
}
