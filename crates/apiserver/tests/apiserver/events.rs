//! Events: `core/v1` and `events.k8s.io/v1` are one store seen two ways. What kube-rs'
//! `events::Recorder` writes (events.k8s.io) is what `kubectl get events` and `kubectl describe`
//! read (core/v1), and the reverse.

use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::api::events::v1::Event as EventsV1;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::json;

use crate::harness::TestCluster;

async fn configmap_reference(c: &TestCluster, namespace: &str, name: &str) -> ObjectReference {
    c.kubectl(&["create", "namespace", namespace]).await.ok();
    c.kubectl(&["-n", namespace, "create", "configmap", name])
        .await
        .ok();
    let api: Api<ConfigMap> = Api::namespaced(c.client().await, namespace);
    let cm = api.get(name).await.expect("the ConfigMap");
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        uid: cm.metadata.uid,
        ..ObjectReference::default()
    }
}

fn failure(note: &str) -> Event {
    Event {
        type_: EventType::Warning,
        reason: "ReconciliationFailed".into(),
        note: Some(note.into()),
        action: "Reconcile".into(),
        secondary: None,
    }
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn recorder_events_show_in_kubectl_get_events_and_describe() {
    let c = TestCluster::start().await;
    let reference = configmap_reference(&c, "team", "app").await;
    let recorder = Recorder::new(
        c.client().await,
        Reporter {
            controller: "kustomize-controller".into(),
            instance: None,
        },
    );
    recorder
        .publish(&failure("apply failed: 2 errors"), &reference)
        .await
        .expect("publish");

    let get = c.kubectl(&["get", "events", "-n", "team"]).await.ok();
    let header = get.stdout.lines().next().unwrap_or_default();
    for column in ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"] {
        assert!(header.contains(column), "{}", get.stdout);
    }
    for cell in [
        "Warning",
        "ReconciliationFailed",
        "configmap/app",
        "apply failed: 2 errors",
    ] {
        assert!(get.stdout.contains(cell), "{cell}: {}", get.stdout);
    }
    let listed = c.kubectl(&["events", "-n", "team"]).await.ok();
    assert!(
        listed.stdout.contains("ReconciliationFailed")
            && listed.stdout.contains("apply failed: 2 errors"),
        "{}",
        listed.stdout
    );
    let describe = c
        .kubectl(&["describe", "configmap", "app", "-n", "team"])
        .await
        .ok();
    let events = describe
        .stdout
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Events section: {}", describe.stdout));
    for cell in [
        "Warning",
        "ReconciliationFailed",
        "kustomize-controller",
        "apply failed: 2 errors",
    ] {
        assert!(events.contains(cell), "{cell}: {}", describe.stdout);
    }

    // The same event again: the recorder patches its series; both views count 2.
    recorder
        .publish(&failure("apply failed: 2 errors"), &reference)
        .await
        .expect("publish again");
    let list = c
        .kubectl(&["get", "events", "-n", "team", "-o", "json"])
        .await
        .ok()
        .json();
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "one event with a series: {list}");
    let core = &items[0];
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["message"], "apply failed: 2 errors");
    assert_eq!(core["involvedObject"]["name"], "app");
    assert_eq!(core["reportingComponent"], "kustomize-controller");
    assert_eq!(core["series"]["count"], 2, "{core}");
    let wide = c
        .kubectl(&["get", "events", "-n", "team", "-o", "wide"])
        .await
        .ok();
    let header = wide.stdout.lines().next().unwrap_or_default();
    assert!(
        header.contains("COUNT") && header.contains("SOURCE"),
        "{}",
        wide.stdout
    );
    let row = wide.stdout.lines().nth(1).unwrap_or_default();
    assert!(
        row.split_whitespace().any(|cell| cell == "2"),
        "the count: {}",
        wide.stdout
    );

    // A series whose note changes shows the new note (message) on the core side.
    let name = core["metadata"]["name"].as_str().expect("a name");
    let events: Api<EventsV1> = Api::namespaced(c.client().await, "team");
    events
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"note": "apply failed: 3 errors", "series": {"count": 3, "lastObservedTime": "2026-01-01T00:00:00.000000Z"}})),
        )
        .await
        .expect("patch the series");
    let describe = c
        .kubectl(&["describe", "configmap", "app", "-n", "team"])
        .await
        .ok();
    assert!(
        describe.stdout.contains("apply failed: 3 errors"),
        "{}",
        describe.stdout
    );
    assert!(
        !describe.stdout.contains("apply failed: 2 errors"),
        "{}",
        describe.stdout
    );
}

#[tokio::test]
async fn core_events_read_as_events_k8s_io() {
    let c = TestCluster::start().await;
    c.kubectl(&["create", "namespace", "team"]).await.ok();
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r"apiVersion: v1
kind: Event
metadata: {name: web.1, namespace: team}
involvedObject: {apiVersion: apps/v1, kind: Deployment, name: web, namespace: team}
reason: ScalingReplicaSet
message: Scaled up replica set web-1 to 2
type: Normal
source: {component: deployment-controller}
count: 3
firstTimestamp: '2026-01-01T00:00:00Z'
lastTimestamp: '2026-01-01T00:05:00Z'
",
    )
    .await
    .ok();
    let events: Api<EventsV1> = Api::namespaced(c.client().await, "team");
    let event = events
        .get("web.1")
        .await
        .expect("the event, events.k8s.io/v1");
    assert_eq!(
        event.note.as_deref(),
        Some("Scaled up replica set web-1 to 2")
    );
    let regarding = event.regarding.expect("regarding");
    assert_eq!(regarding.kind.as_deref(), Some("Deployment"));
    assert_eq!(regarding.name.as_deref(), Some("web"));
    assert_eq!(event.deprecated_count, Some(3));
    assert_eq!(
        event.deprecated_source.and_then(|s| s.component).as_deref(),
        Some("deployment-controller")
    );
    let listed = c
        .kubectl(&["get", "events.v1.events.k8s.io", "-n", "team", "-o", "json"])
        .await
        .ok()
        .json();
    assert_eq!(listed["items"][0]["apiVersion"], "events.k8s.io/v1");
    assert_eq!(
        listed["items"][0]["note"],
        "Scaled up replica set web-1 to 2"
    );
    assert!(listed["items"][0].get("message").is_none(), "{listed}");
    let printed = c
        .kubectl(&["get", "events.v1.events.k8s.io", "-n", "team"])
        .await
        .ok();
    assert!(
        printed.stdout.contains("deployment/web") && printed.stdout.contains("Scaled up"),
        "{}",
        printed.stdout
    );
    // One store: deleting through either group deletes the one object.
    events
        .delete("web.1", &kube::api::DeleteParams::default())
        .await
        .expect("delete through events.k8s.io");
    let left = c
        .kubectl(&["get", "events", "-n", "team", "-o", "name"])
        .await
        .ok();
    assert!(left.stdout.trim().is_empty(), "{}", left.stdout);
}
