//! Events: one Kubernetes Event [`Recorder`] per controller, and a pluggable [`EventSink`]
//! that receives every published Event with Flux's metadata (the notification kinds hang
//! their Alerts on it).
//!
//! # Guarantees
//! - Every Event a controller publishes (the runtime's `Ready` transitions, a step's own
//!   through [`StepContext::publish_event`](super::StepContext::publish_event), a failed
//!   cleanup) goes through the same [`Events`]: to the API server as a Kubernetes Event, and to
//!   the sink of [`RuntimeConfig::event_sink`](super::RuntimeConfig::event_sink) if any.
//! - Messages are cut at 1,024 bytes and credentials in URLs are redacted; the metadata
//!   holds only Flux's keys ([`FLUX_KEYS`]), bare or prefixed with an API group as
//!   helm-controller writes them (`helm.toolkit.fluxcd.io/revision`), never a secret.
//! - A failure to record an Event is logged, never fails the reconcile; a sink must not block.
//! - Events are written as `events.k8s.io/v1` Events. A repeat (same type, reason, action and
//!   object within [`SERIES_WINDOW`]) updates the first one's `series` (count, last observed
//!   time) and its `note`, so `kubectl describe` shows the latest message with the count, where
//!   kube-rs' `Recorder` would keep the first message.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as KubeEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use kube::{Client, ResourceExt};

/// The metadata key of the revision the Event is about (e.g. `main@sha1:…`).
pub const REVISION_KEY: &str = "revision";

/// The metadata key of the origin revision (`org.opencontainers.image.revision`).
pub const ORIGIN_REVISION_KEY: &str = "originRevision";

/// The metadata key of the token identifying what the Event is about, so that a sink can tell
/// repeats (e.g. the digest of the applied objects).
pub const TOKEN_KEY: &str = "token";

/// The metadata keys an Event may carry (Flux's `eventv1` keys and helm-controller's
/// `app-version` and `oci-digest`); anything else is dropped before publishing.
pub const FLUX_KEYS: [&str; 5] = [
    REVISION_KEY,
    ORIGIN_REVISION_KEY,
    TOKEN_KEY,
    "app-version",
    "oci-digest",
];

/// Whether `key` is one of [`FLUX_KEYS`], bare or as `<api group>/<key>`.
fn flux_key(key: &str) -> bool {
    let bare = match key.rsplit_once('/') {
        Some((group, bare)) if group.contains('.') => bare,
        Some(_) => return false,
        None => key,
    };
    FLUX_KEYS.contains(&bare)
}

/// The longest message published, in bytes: the API server refuses an `events.k8s.io/v1`
/// Event whose `note` is longer (a bounded condition message, 1,024 characters with `…` in it,
/// is longer).
pub const MAX_MESSAGE: usize = 1024;

/// How long after its last occurrence an Event is continued as a series (kube-rs' and
/// client-go's six minutes).
pub const SERIES_WINDOW: jiff::SignedDuration = jiff::SignedDuration::from_mins(6);

/// An Event as published to the sink.
#[derive(Clone, Debug, PartialEq)]
pub struct PublishedEvent {
    /// The controller that published it (`kustomize-controller`).
    pub controller: String,
    /// The object it is about.
    pub object: ObjectReference,
    /// `Normal` or `Warning`.
    pub type_: EventType,
    /// The reason (`ReconciliationSucceeded`, `HealthCheckFailed`, …).
    pub reason: String,
    /// The message, cut and redacted.
    pub message: String,
    /// What was done (`Reconcile`, `DriftDetection`, …).
    pub action: String,
    /// Flux's metadata: [`REVISION_KEY`], [`ORIGIN_REVISION_KEY`], [`TOKEN_KEY`] when known.
    pub metadata: BTreeMap<String, String>,
}

/// Where published Events go besides the API server. Called on the reconcile's task: an
/// implementation queues and returns at once.
pub trait EventSink: Send + Sync + Debug {
    /// Receives one published Event.
    fn publish(&self, event: &PublishedEvent);
}

/// What makes two Events one series: type, reason, action and the object.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SeriesKey {
    type_: &'static str,
    reason: String,
    action: String,
    object: (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ),
}

/// The Event a series continues.
#[derive(Clone, Debug)]
struct Recorded {
    name: String,
    count: i32,
    last: jiff::Timestamp,
}

/// Writes `events.k8s.io/v1` Events, continuing series with the latest note.
#[derive(Clone)]
struct Recorder {
    client: Client,
    controller: String,
    recorded: Arc<Mutex<HashMap<SeriesKey, Recorded>>>,
}

impl Recorder {
    fn new(client: Client, controller: &str) -> Self {
        Self {
            client,
            controller: controller.to_owned(),
            recorded: Arc::default(),
        }
    }

    async fn publish(&self, event: &PublishedEvent) -> Result<(), kube::Error> {
        let now = jiff::Timestamp::now();
        let type_ = match event.type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        let object = &event.object;
        let key = SeriesKey {
            type_,
            reason: event.reason.clone(),
            action: event.action.clone(),
            object: (
                object.kind.clone(),
                object.namespace.clone(),
                object.name.clone(),
                object.uid.clone(),
            ),
        };
        let previous = {
            let mut recorded = self
                .recorded
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            recorded.retain(|_, r| r.last + SERIES_WINDOW > now);
            recorded.get(&key).cloned()
        };
        let namespace = object.namespace.as_deref().unwrap_or("default");
        let api: Api<KubeEvent> = Api::namespaced(self.client.clone(), namespace);
        if let Some(previous) = previous {
            let count = previous.count + 1;
            let patch = serde_json::json!({
                "note": event.message,
                "series": EventSeries { count, last_observed_time: MicroTime(now) },
            });
            match api
                .patch(
                    &previous.name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => {
                    self.remember(key, previous.name, count, now);
                    return Ok(());
                }
                // Deleted meanwhile: start again.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        let name = format!(
            "{}.{:x}",
            object.name.as_deref().unwrap_or(&self.controller),
            now.as_nanosecond()
        );
        let created = api
            .create(
                &PostParams::default(),
                &KubeEvent {
                    metadata: ObjectMeta {
                        name: Some(name),
                        namespace: Some(namespace.to_owned()),
                        ..ObjectMeta::default()
                    },
                    action: Some(event.action.clone()),
                    reason: Some(event.reason.clone()),
                    note: Some(event.message.clone()),
                    type_: Some(type_.to_owned()),
                    event_time: Some(MicroTime(now)),
                    regarding: Some(object.clone()),
                    reporting_controller: Some(self.controller.clone()),
                    reporting_instance: Some(self.controller.clone()),
                    ..KubeEvent::default()
                },
            )
            .await?;
        self.remember(key, created.name_any(), 1, now);
        Ok(())
    }

    fn remember(&self, key: SeriesKey, name: String, count: i32, last: jiff::Timestamp) {
        self.recorded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, Recorded { name, count, last });
    }
}

/// A controller's Event publisher: one recorder and the optional sink.
#[derive(Clone)]
pub struct Events {
    controller: String,
    recorder: Recorder,
    sink: Option<Arc<dyn EventSink>>,
}

impl Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("controller", &self.controller)
            .field("sink", &self.sink)
            .finish_non_exhaustive()
    }
}

impl Events {
    /// The publisher of `controller` (the Event reporter), sending to `sink` too.
    pub fn new(client: Client, controller: &str, sink: Option<Arc<dyn EventSink>>) -> Self {
        let recorder = Recorder::new(client, controller);
        Self {
            controller: controller.to_owned(),
            recorder,
            sink,
        }
    }

    /// Publishes an Event about `object`; `metadata` entries other than Flux's keys are dropped.
    pub async fn publish(
        &self,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
        action: &str,
        metadata: &BTreeMap<String, String>,
    ) {
        let event = published(
            &self.controller,
            object,
            type_,
            reason,
            message,
            action,
            metadata,
        );
        if let Some(sink) = &self.sink {
            sink.publish(&event);
        }
        if let Err(error) = self.recorder.publish(&event).await {
            tracing::warn!(%error, "cannot publish event");
        }
    }
}

/// The Event as the sink gets it: message cut and redacted, only Flux's metadata keys.
fn published(
    controller: &str,
    object: &ObjectReference,
    type_: EventType,
    reason: &str,
    message: &str,
    action: &str,
    metadata: &BTreeMap<String, String>,
) -> PublishedEvent {
    let mut message = capstan_source::redact::urls(message);
    if message.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
    }
    let metadata = metadata
        .iter()
        .filter(|(key, value)| flux_key(key) && !value.is_empty())
        .map(|(key, value)| (key.clone(), capstan_source::redact::urls(value)))
        .collect();
    PublishedEvent {
        controller: controller.to_owned(),
        object: object.clone(),
        type_,
        reason: reason.to_owned(),
        message,
        action: action.to_owned(),
        metadata,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_keep_flux_metadata_only_and_cut_and_redact_messages() {
        let object = ObjectReference {
            kind: Some("Kustomization".into()),
            name: Some("apps".into()),
            ..ObjectReference::default()
        };
        let metadata: BTreeMap<String, String> = [
            (REVISION_KEY, "main@sha1:abc"),
            (ORIGIN_REVISION_KEY, ""),
            (TOKEN_KEY, "sha256:objects"),
            ("password", "hunter2"),
            ("helm.toolkit.fluxcd.io/app-version", "1.2.3"),
            ("helm.toolkit.fluxcd.io/password", "hunter2"),
            ("x/revision", "not a group"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let message = format!(
            "cannot fetch https://user:hunter2@example.com/repo.git {}",
            "x".repeat(2000)
        );
        let event = published(
            "kustomize-controller",
            &object,
            EventType::Warning,
            "ArtifactFailed",
            &message,
            "Reconcile",
            &metadata,
        );
        assert_eq!(
            event.metadata.keys().collect::<Vec<_>>(),
            [
                "helm.toolkit.fluxcd.io/app-version",
                REVISION_KEY,
                TOKEN_KEY
            ],
            "empty values and foreign keys are dropped; group-prefixed Flux keys stay"
        );
        assert!(!event.message.contains("hunter2"), "{}", event.message);
        assert_eq!(event.message.len(), MAX_MESSAGE);
        assert_eq!(event.object, object);
        let wide = published(
            "kustomize-controller",
            &object,
            EventType::Warning,
            "ArtifactFailed",
            &"é".repeat(1000),
            "Reconcile",
            &metadata,
        );
        assert_eq!(wide.message.len(), MAX_MESSAGE, "bytes, not characters");
    }
}
