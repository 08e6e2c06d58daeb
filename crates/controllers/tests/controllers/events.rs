//! Events: every Event a controller publishes also reaches the runtime's event sink, with
//! Flux's metadata.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capstan_controllers::kustomization::KustomizationReconciler;
use capstan_controllers::runtime::events::{ORIGIN_REVISION_KEY, REVISION_KEY, TOKEN_KEY};
use capstan_controllers::runtime::{Controllers, EventSink, Events, PublishedEvent, RuntimeConfig};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use kube::runtime::events::EventType;
use tokio_util::sync::CancellationToken;

use crate::kustomize_support::{NAMESPACE, config_map, create_kustomization, wait_ready};
use crate::support::{Env, GitServer, eventually};

/// A sink keeping what it gets.
#[derive(Debug, Default)]
pub(crate) struct CapturingSink(Mutex<Vec<PublishedEvent>>);

impl EventSink for CapturingSink {
    fn publish(&self, event: &PublishedEvent) {
        self.0.lock().unwrap().push(event.clone());
    }
}

impl CapturingSink {
    pub(crate) fn events(&self) -> Vec<PublishedEvent> {
        self.0.lock().unwrap().clone()
    }
}

#[tokio::test]
async fn published_events_reach_the_sink_with_flux_metadata() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let upstream = GitServer::start().await;
    let commit = upstream.commit(&[("app/config.yaml", &config_map())], "first");
    env.create_git_repository(
        NAMESPACE,
        "repo",
        serde_json::json!({"url": upstream.url(), "interval": "10m", "ref": {"branch": "main"}}),
    )
    .await;
    let sink = Arc::new(CapturingSink::default());
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let config = RuntimeConfig {
        event_sink: Some(sink.clone()),
        ..RuntimeConfig::default()
    };
    let controllers = Controllers::new(env.client.clone(), config)
        .register(KustomizationReconciler::new(env.client.clone()));
    tokio::spawn(controllers.run(shutdown));
    create_kustomization(&env, "app", serde_json::json!({"path": "app"})).await;
    wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;

    let revision = format!("main@sha1:{commit}");
    let events = sink.events();
    let ready = events
        .iter()
        .find(|e| e.reason == "ReconciliationSucceeded")
        .unwrap_or_else(|| panic!("no ReconciliationSucceeded event in {events:#?}"));
    assert_eq!(ready.controller, "kustomize-controller");
    assert_eq!(ready.object.name.as_deref(), Some("app"));
    assert_eq!(ready.message, format!("Applied revision: {revision}"));
    assert_eq!(ready.metadata.get(REVISION_KEY), Some(&revision));
    assert!(
        ready
            .metadata
            .get(TOKEN_KEY)
            .is_some_and(|token| token.starts_with("sha256:")),
        "{:?}",
        ready.metadata
    );
    assert!(
        !ready.metadata.contains_key(ORIGIN_REVISION_KEY),
        "a Git source has none"
    );

    // The same Event is recorded in the cluster.
    let api: Api<Event> = Api::namespaced(env.client.clone(), NAMESPACE);
    eventually(Duration::from_secs(10), "the Kubernetes Event", || {
        let api = api.clone();
        async move {
            api.list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("ReconciliationSucceeded"))
        }
    })
    .await;
}

#[tokio::test]
async fn a_repeated_event_continues_its_series_with_the_latest_message() {
    let env = Env::start().await;
    env.namespace("events-series").await;
    let events = Events::new(env.client.clone(), "kustomize-controller", None);
    let object = ObjectReference {
        api_version: Some("kustomize.toolkit.fluxcd.io/v1".into()),
        kind: Some("Kustomization".into()),
        name: Some("apps".into()),
        namespace: Some("events-series".into()),
        uid: Some("7d6c1c1e-0000-4000-8000-000000000001".into()),
        ..ObjectReference::default()
    };
    for message in ["apply failed: 2 errors", "apply failed: 3 errors"] {
        events
            .publish(
                &object,
                EventType::Warning,
                "ReconciliationFailed",
                message,
                "Reconcile",
                &std::collections::BTreeMap::new(),
            )
            .await;
    }
    let api: Api<Event> = Api::namespaced(env.client.clone(), "events-series");
    let items = api.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(items.len(), 1, "one Event with a series: {items:#?}");
    let event = &items[0];
    assert_eq!(event.note.as_deref(), Some("apply failed: 3 errors"));
    assert_eq!(event.series.as_ref().map(|s| s.count), Some(2));
    assert_eq!(
        event.reporting_controller.as_deref(),
        Some("kustomize-controller")
    );
}

/// A source's new artifact is announced as Flux's source-controller announces it: one Event of
/// reason `NewArtifact` with the `Ready` message, and no second Event for the `Ready`
/// transition (`Succeeded`).
#[tokio::test]
async fn a_new_source_artifact_is_announced_as_new_artifact() {
    let env = Env::start().await;
    env.namespace("events-artifact").await;
    let upstream = GitServer::start().await;
    let commit = upstream.commit(&[("app/config.yaml", &config_map())], "first");
    env.create_git_repository(
        "events-artifact",
        "repo",
        serde_json::json!({"url": upstream.url(), "interval": "10m", "ref": {"branch": "main"}}),
    )
    .await;
    let api: Api<Event> = Api::namespaced(env.client.clone(), "events-artifact");
    let reasons = || {
        let api = api.clone();
        async move {
            api.list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("repo"))
                .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
                .collect::<Vec<_>>()
        }
    };
    let announced = eventually(Duration::from_secs(30), "the NewArtifact Event", || async {
        reasons()
            .await
            .into_iter()
            .find(|(reason, _)| reason == "NewArtifact")
    })
    .await;
    assert_eq!(
        announced.1,
        format!("stored artifact for revision 'main@sha1:{commit}'")
    );
    let sources: Api<capstan_api::GitRepository> =
        Api::namespaced(env.client.clone(), "events-artifact");
    crate::support::wait_ready(&sources, "repo").await;
    let all = reasons().await;
    assert!(
        !all.iter().any(|(reason, _)| reason == "Succeeded"),
        "{all:?}"
    );
}

/// A source recovering from a failure with the artifact it had (same digest) announces no new
/// artifact: as source-controller, `NewArtifact` is published only for a changed digest.
#[tokio::test]
async fn the_same_artifact_again_is_not_announced_as_new() {
    let env = Env::start().await;
    env.namespace("events-same").await;
    let upstream = GitServer::start().await;
    upstream.commit(&[("app/config.yaml", &config_map())], "first");
    env.create_git_repository(
        "events-same",
        "repo",
        serde_json::json!({"url": upstream.url(), "interval": "10m", "ref": {"branch": "main"}}),
    )
    .await;
    let sources: Api<capstan_api::GitRepository> =
        Api::namespaced(env.client.clone(), "events-same");
    let first = crate::support::wait_ready(&sources, "repo").await;
    let digest = |o: &capstan_api::GitRepository| {
        o.status
            .as_ref()
            .and_then(|s| s.artifact.as_ref())
            .map(|a| a.digest.clone())
    };
    let set_branch = |branch: &'static str| {
        let sources = sources.clone();
        async move {
            sources
                .patch(
                    "repo",
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(
                        serde_json::json!({"spec": {"ref": {"branch": branch}}}),
                    ),
                )
                .await
                .unwrap();
        }
    };
    // A missing branch fails the source; back on `main` it recovers with the same commit.
    set_branch("missing").await;
    crate::support::wait_failed(&sources, "repo").await;
    set_branch("main").await;
    let recovered = crate::support::wait_for(&sources, "repo", "recovered", |o| {
        let status = o.status.as_ref();
        status.and_then(|s| s.observed_generation) == o.metadata.generation
            && status.is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
    })
    .await;
    assert_eq!(digest(&recovered), digest(&first));
    let api: Api<Event> = Api::namespaced(env.client.clone(), "events-same");
    // The recovery is the `Ready` transition's Event (`Succeeded`), as Flux's.
    eventually(Duration::from_secs(30), "the recovery Event", || async {
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("Succeeded"))
    })
    .await;
    let announced: Vec<Event> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("NewArtifact"))
        .collect();
    assert_eq!(announced.len(), 1, "{announced:#?}");
    assert!(announced[0].series.is_none(), "{announced:#?}");
}
