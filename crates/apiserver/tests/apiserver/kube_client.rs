//! kube-rs against the embedded control plane: watchers, 410 Gone, SSA dry-run, discovery, paging.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::harness::{TestCluster, eventually};

/// A TCP proxy in front of the API server that can cut every open connection and refuse new ones,
/// as a flaky network or a restarting load balancer would.
struct Proxy {
    address: std::net::SocketAddr,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    refuse: Arc<std::sync::atomic::AtomicBool>,
    acceptor: JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let refuse = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (conns, refusing) = (Arc::clone(&connections), Arc::clone(&refuse));
        let acceptor = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if refusing.load(std::sync::atomic::Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let task = tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
                conns.lock().unwrap().push(task);
            }
        });
        Self {
            address,
            connections,
            refuse,
            acceptor,
        }
    }

    /// Closes every open connection.
    fn cut(&self) {
        for task in self.connections.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    fn refuse(&self, refuse: bool) {
        self.refuse
            .store(refuse, std::sync::atomic::Ordering::SeqCst);
    }

    fn client(&self) -> kube::Client {
        let mut config = kube::Config::new(format!("http://{}", self.address).parse().unwrap());
        config.default_namespace = "default".into();
        kube::Client::try_from(config).unwrap()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.acceptor.abort();
    }
}

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": name}})).unwrap()
}

/// What a watcher has reported, in order.
#[derive(Default)]
struct Seen {
    log: Vec<String>,
}

fn spawn_watcher(api: Api<ConfigMap>, seen: Arc<Mutex<Seen>>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            let entry = match event {
                Ok(Event::Init) => "init".to_owned(),
                Ok(Event::InitApply(cm)) => {
                    format!("init-apply {}", cm.metadata.name.unwrap_or_default())
                }
                Ok(Event::InitDone) => "init-done".to_owned(),
                Ok(Event::Apply(cm)) => format!("apply {}", cm.metadata.name.unwrap_or_default()),
                Ok(Event::Delete(cm)) => format!("delete {}", cm.metadata.name.unwrap_or_default()),
                Err(_) => continue,
            };
            // The root CA ConfigMap every namespace holds is not the test's.
            if entry.ends_with(" kube-root-ca.crt") {
                continue;
            }
            seen.lock().unwrap().log.push(entry);
        }
    })
}

async fn wait_for_entry(seen: &Arc<Mutex<Seen>>, entry: &str) {
    eventually(Duration::from_secs(20), entry, || {
        let found = seen.lock().unwrap().log.iter().any(|e| e == entry);
        async move { found.then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn watcher_resumes_after_dropped_connection_without_gaps_or_repeats() {
    let cluster = TestCluster::start().await;
    let proxy = Proxy::start(cluster.server.address()).await;
    let api: Api<ConfigMap> = Api::default_namespaced(proxy.client());
    let direct: Api<ConfigMap> = Api::default_namespaced(cluster.client().await);
    for name in ["a", "b"] {
        direct
            .create(&PostParams::default(), &configmap(name))
            .await
            .unwrap();
    }
    let seen = Arc::new(Mutex::new(Seen::default()));
    let task = spawn_watcher(api, Arc::clone(&seen));
    wait_for_entry(&seen, "init-done").await;
    for name in ["c", "d"] {
        direct
            .create(&PostParams::default(), &configmap(name))
            .await
            .unwrap();
    }
    wait_for_entry(&seen, "apply d").await;

    // Cut the watch connection; changes made while it is down must arrive once it is back.
    proxy.refuse(true);
    proxy.cut();
    for name in ["e", "f"] {
        direct
            .create(&PostParams::default(), &configmap(name))
            .await
            .unwrap();
    }
    direct
        .delete("a", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    proxy.refuse(false);
    wait_for_entry(&seen, "delete a").await;
    direct
        .create(&PostParams::default(), &configmap("g"))
        .await
        .unwrap();
    wait_for_entry(&seen, "apply g").await;
    task.abort();

    let log = seen.lock().unwrap().log.clone();
    assert_eq!(
        log,
        [
            "init",
            "init-apply a",
            "init-apply b",
            "init-done",
            "apply c",
            "apply d",
            "apply e",
            "apply f",
            "delete a",
            "apply g"
        ],
        "the watcher must resume from its resourceVersion: no relist, nothing missed, nothing repeated"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_resource_version_is_gone_and_the_watcher_relists() {
    let config = capstan_apiserver::Config {
        watch_history: 5,
        ..capstan_apiserver::Config::default()
    };
    let cluster = TestCluster::start_with(config).await;
    let direct: Api<ConfigMap> = Api::default_namespaced(cluster.client().await);

    // A raw watch from a compacted resourceVersion answers 410 Gone.
    let list = direct.list(&ListParams::default()).await.unwrap();
    let old_rv = list.metadata.resource_version.unwrap();
    for i in 0..10 {
        direct
            .create(&PostParams::default(), &configmap(&format!("early-{i}")))
            .await
            .unwrap();
    }
    let mut stream = direct
        .watch(&WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Error(status)) => {
            assert_eq!(status.code, 410, "{status:?}");
            assert!(
                status.message.contains("too old resource version"),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 410 error event, got {other:?}"),
    }

    // A watcher that fell that far behind relists and sees everything.
    let proxy = Proxy::start(cluster.server.address()).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let task = spawn_watcher(Api::default_namespaced(proxy.client()), Arc::clone(&seen));
    wait_for_entry(&seen, "init-done").await;
    proxy.refuse(true);
    proxy.cut();
    for i in 0..10 {
        direct
            .create(&PostParams::default(), &configmap(&format!("late-{i}")))
            .await
            .unwrap();
    }
    proxy.refuse(false);
    eventually(
        Duration::from_secs(30),
        "a relist with the late objects",
        || {
            let log = seen.lock().unwrap().log.clone();
            async move {
                let inits = log.iter().filter(|e| *e == "init").count();
                (inits >= 2 && log.iter().any(|e| e == "init-apply late-9")).then_some(())
            }
        },
    )
    .await;
    task.abort();
}

#[tokio::test(flavor = "multi_thread")]
async fn server_side_apply_dry_run_returns_the_merged_object_without_persisting() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(cluster.client().await);
    let applied = api
        .patch("settings", &PatchParams::apply("test"), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "1"}})))
        .await
        .unwrap();
    let rv = applied.metadata.resource_version.clone().unwrap();

    let preview = api
        .patch(
            "settings",
            &PatchParams::apply("test").dry_run(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "1", "b": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        preview.data.as_ref().unwrap().get("b").map(String::as_str),
        Some("2")
    );

    let live = api.get("settings").await.unwrap();
    assert_eq!(
        live.metadata.resource_version.as_deref(),
        Some(rv.as_str()),
        "a dry run must not write"
    );
    assert!(!live.data.unwrap().contains_key("b"));

    // A dry-run create persists nothing either.
    api.patch(
        "ghost",
        &PatchParams::apply("test").dry_run(),
        &Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ghost"}}),
        ),
    )
    .await
    .unwrap();
    assert!(api.get_opt("ghost").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn server_side_apply_conflicts_and_force() {
    let cluster = TestCluster::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(cluster.client().await);
    let cm = |v: &str| {
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned"}, "data": {"key": v}}),
        )
    };
    api.patch("owned", &PatchParams::apply("alice"), &cm("a"))
        .await
        .unwrap();
    let err = api
        .patch("owned", &PatchParams::apply("bob"), &cm("b"))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 409);
            assert!(
                status.message.contains(".data.key") && status.message.contains("alice"),
                "{}",
                status.message
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let forced = api
        .patch("owned", &PatchParams::apply("bob").force(), &cm("b"))
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["key"], "b");
    let managers: Vec<String> = forced
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(
        managers,
        ["bob"],
        "forcing moves ownership; alice owned nothing else"
    );

    // Dropping a field from the applied configuration removes it.
    api.patch("owned", &PatchParams::apply("bob"), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned"}, "data": {"other": "x"}})))
        .await
        .unwrap();
    let live = api.get("owned").await.unwrap();
    assert_eq!(live.data.unwrap().keys().collect::<Vec<_>>(), ["other"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn discovery_and_paged_lists() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .unwrap();
    let apps = discovery.get("apps").expect("apps group");
    assert!(
        apps.recommended_resources()
            .iter()
            .any(|(r, _)| r.kind == "Deployment")
    );
    assert!(discovery.get("apiextensions.k8s.io").is_some());

    let api: Api<ConfigMap> = Api::default_namespaced(client);
    for i in 0..7 {
        api.create(&PostParams::default(), &configmap(&format!("page-{i}")))
            .await
            .unwrap();
    }
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(3);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = api.list(&params).await.unwrap();
        assert!(page.items.len() <= 3);
        names.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
        token = page.metadata.continue_.filter(|c| !c.is_empty());
        if token.is_none() {
            break;
        }
    }
    names.retain(|n| n.starts_with("page-"));
    assert_eq!(
        names,
        (0..7).map(|i| format!("page-{i}")).collect::<Vec<_>>()
    );
}

fn crd(group: &str, plural: &str, kind: &str, versions: &serde_json::Value) -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": versions,
        }
    })
}

fn version(name: &str, storage: bool) -> serde_json::Value {
    json!({"name": name, "served": true, "storage": storage,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crd_cannot_take_over_a_built_in_resource() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (group, plural) in [("apps", "deployments"), ("batch.k8s.io", "widgets")] {
        let body: CustomResourceDefinition = serde_json::from_value(crd(
            group,
            plural,
            "Deployment",
            &json!([version("v1", true)]),
        ))
        .unwrap();
        match crds.create(&PostParams::default(), &body).await {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{group}: {}", status.message);
            }
            other => panic!("a CRD for {plural}.{group} must be refused, got {other:?}"),
        }
    }
    let deployments: Api<Deployment> = Api::default_namespaced(client);
    assert!(
        deployments.list(&ListParams::default()).await.is_ok(),
        "deployments are still served"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn objects_are_served_in_the_requested_version_after_a_storage_version_change() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject};
    use kube::core::GroupVersionKind;
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let v1_storage: CustomResourceDefinition = serde_json::from_value(crd(
        "example.com",
        "widgets",
        "Widget",
        &json!([version("v1", true), version("v2", false)]),
    ))
    .unwrap();
    crds.create(&PostParams::default(), &v1_storage)
        .await
        .unwrap();
    let resource = |v: &str| {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.com", v, "Widget"),
            "widgets",
        )
    };
    let v1: Api<DynamicObject> = Api::default_namespaced_with(client.clone(), &resource("v1"));
    eventually(Duration::from_secs(10), "widgets served", || {
        let v1 = v1.clone();
        async move { v1.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
    let widget: DynamicObject = serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}})).unwrap();
    v1.create(&PostParams::default(), &widget).await.unwrap();

    let mut v2_storage = crds.get("widgets.example.com").await.unwrap();
    v2_storage.spec.versions[0].storage = false;
    v2_storage.spec.versions[1].storage = true;
    crds.replace("widgets.example.com", &PostParams::default(), &v2_storage)
        .await
        .unwrap();

    let v2: Api<DynamicObject> = Api::default_namespaced_with(client, &resource("v2"));
    let got = v2.get("w").await.unwrap();
    assert_eq!(got.types.unwrap().api_version, "example.com/v2");
    let listed = v2.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        listed.items[0].types.as_ref().unwrap().api_version,
        "example.com/v2"
    );
    let via_v1 = v1.get("w").await.unwrap();
    assert_eq!(via_v1.types.unwrap().api_version, "example.com/v1");
}
