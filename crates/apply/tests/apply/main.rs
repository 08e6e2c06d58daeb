//! The apply engine against the embedded control plane, reached only through a kube client.

use std::time::{Duration, Instant};

use capstan_apply::{
    Action, ApplyOptions, DeleteOptions, DriftKind, Error, Inventory, ObjectRef, Owner,
    ResourceManager, Status, set_owner_labels,
};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

const MANAGER: &str = "capstan-test";

struct Cluster {
    /// Kept alive for the test's duration.
    _server: capstan_apiserver::ApiServer,
    client: kube::Client,
    manager: ResourceManager,
}

impl Cluster {
    async fn start() -> Self {
        let server = capstan_apiserver::ApiServer::start(capstan_apiserver::Config::default())
            .await
            .expect("start the control plane");
        let kubeconfig: kube::config::Kubeconfig =
            kube::config::Kubeconfig::from_yaml(&server.kubeconfig()).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("client config");
        let client = kube::Client::try_from(config).expect("client");
        let manager = ResourceManager::new(client.clone(), MANAGER);
        Self {
            _server: server,
            client,
            manager,
        }
    }

    /// The live object, as JSON.
    async fn get(&self, api_version: &str, kind: &str, ns: &str, name: &str) -> Option<Value> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, caps) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .ok()?;
        let api: Api<DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(self.client.clone(), ns, &resource)
            }
            kube::discovery::Scope::Cluster => Api::all_with(self.client.clone(), &resource),
        };
        api.get_opt(name)
            .await
            .expect("get")
            .map(|o| serde_json::to_value(o).unwrap())
    }

    /// A merge patch by another field manager, as `kubectl patch` or `kubectl edit` would send.
    async fn kubectl_patch(&self, kind: &str, ns: &str, name: &str, patch: Value) {
        let resource = match kind {
            "ConfigMap" => ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("", "v1", "ConfigMap"),
                "configmaps",
            ),
            other => panic!("no plural for {other}"),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &resource);
        let params = PatchParams {
            field_manager: Some("kubectl-patch".into()),
            ..PatchParams::default()
        };
        api.patch(name, &params, &Patch::Merge(&patch))
            .await
            .expect("kubectl-like patch");
    }
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).expect("manifest")
}

fn configmap(ns: &str, name: &str, data: &Value) -> DynamicObject {
    object(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns}, "data": data}))
}

fn namespace(name: &str) -> DynamicObject {
    object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
}

fn deployment(ns: &str, name: &str, rollout: Option<&str>) -> DynamicObject {
    let mut annotations = serde_json::Map::new();
    if let Some(r) = rollout {
        annotations.insert("sim.capstan.dev/rollout".into(), r.into());
    }
    object(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}))
}

fn crd() -> DynamicObject {
    object(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}
    }))
}

fn resource_version(v: &Value) -> String {
    v["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .to_owned()
}

fn refs(objects: &[DynamicObject]) -> Vec<ObjectRef> {
    objects
        .iter()
        .map(|o| ObjectRef::from_object(o).unwrap())
        .collect()
}

#[tokio::test]
async fn crd_and_custom_resource_apply_in_stages() {
    let c = Cluster::start().await;
    // The custom resource comes first in the set: staging must still apply the CRD before it.
    let objects = vec![
        object(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "shop"}, "spec": {"size": 3}})),
        configmap("shop", "settings", &json!({"a": "1"})),
        crd(),
        namespace("shop"),
    ];
    let changeset = c
        .manager
        .apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .expect("apply");
    let order: Vec<String> = changeset
        .entries
        .iter()
        .map(|e| format!("{} {}", e.object, e.action))
        .collect();
    assert_eq!(
        order,
        [
            "CustomResourceDefinition/widgets.example.com created",
            "Namespace/shop created",
            "Widget/shop/w created",
            "ConfigMap/shop/settings created",
        ]
    );
    let widget = c
        .get("example.com/v1", "Widget", "shop", "w")
        .await
        .unwrap();
    assert_eq!(widget["spec"]["size"], 3);
    assert_eq!(
        widget["metadata"]["managedFields"][0]["manager"], MANAGER,
        "applied under the manager's field manager"
    );
}

#[tokio::test]
async fn second_apply_is_unchanged_and_a_changed_field_is_configured() {
    let c = Cluster::start().await;
    let mut objects = vec![
        configmap("default", "a", &json!({"k": "1"})),
        deployment("default", "web", None),
        object(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})),
    ];
    let options = ApplyOptions::default();
    let first = c
        .manager
        .apply_all_staged(&objects, &options)
        .await
        .unwrap();
    assert_eq!(first.with_action(Action::Created).count(), 3);
    let before = [
        resource_version(&c.get("v1", "ConfigMap", "default", "a").await.unwrap()),
        resource_version(
            &c.get("apps/v1", "Deployment", "default", "web")
                .await
                .unwrap(),
        ),
        resource_version(&c.get("v1", "Service", "default", "web").await.unwrap()),
    ];

    let second = c
        .manager
        .apply_all_staged(&objects, &options)
        .await
        .unwrap();
    assert!(
        second.entries.iter().all(|e| e.action == Action::Unchanged),
        "{second:?}"
    );
    assert!(!second.has_changes());
    let cm = c.get("v1", "ConfigMap", "default", "a").await.unwrap();
    assert_eq!(resource_version(&cm), before[0]);
    let svc = c.get("v1", "Service", "default", "web").await.unwrap();
    assert_eq!(resource_version(&svc), before[2]);

    objects[0] = configmap("default", "a", &json!({"k": "2"}));
    let third = c
        .manager
        .apply_all_staged(&objects, &options)
        .await
        .unwrap();
    assert_eq!(
        third.action(&ObjectRef::new("v1", "ConfigMap", "default", "a")),
        Some(Action::Configured)
    );
    assert_eq!(
        third.action(&ObjectRef::new("apps/v1", "Deployment", "default", "web")),
        Some(Action::Unchanged)
    );
    let cm = c.get("v1", "ConfigMap", "default", "a").await.unwrap();
    assert_eq!(cm["data"]["k"], "2");
    assert_ne!(resource_version(&cm), before[0]);
}

#[tokio::test]
async fn drift_by_another_manager_is_diffed_then_corrected() {
    let c = Cluster::start().await;
    let objects = vec![
        configmap("default", "cfg", &json!({"key": "git"})),
        configmap("default", "new", &json!({"x": "y"})),
    ];
    let options = ApplyOptions::default();
    c.manager
        .apply_all_staged(&objects[..1], &options)
        .await
        .unwrap();
    c.kubectl_patch(
        "ConfigMap",
        "default",
        "cfg",
        json!({"data": {"key": "hand-edited"}}),
    )
    .await;
    let rv = resource_version(&c.get("v1", "ConfigMap", "default", "cfg").await.unwrap());

    let drifts = c.manager.diff(&objects, &options).await.unwrap();
    assert_eq!(
        drifts[0].kind,
        DriftKind::Changed(vec!["data.key".to_owned()])
    );
    assert_eq!(drifts[1].kind, DriftKind::Created);
    // The comparison keeps what the drift was computed from: the live object and the dry-run
    // result, without the fields the server owns.
    let comparisons = c.manager.compare(&objects, &options).await.unwrap();
    let (live, dry_run) = comparisons[0].shown().unwrap();
    assert_eq!(live["data"]["key"], "hand-edited");
    assert_eq!(dry_run["data"]["key"], "git");
    assert!(live["metadata"].get("managedFields").is_none());
    assert!(dry_run["metadata"].get("resourceVersion").is_none());
    assert_eq!(comparisons[1].drift.kind, DriftKind::Created);
    assert!(comparisons[1].live.is_none() && comparisons[1].shown().is_none());
    // A diff writes nothing.
    let after_diff = c.get("v1", "ConfigMap", "default", "cfg").await.unwrap();
    assert_eq!(resource_version(&after_diff), rv);
    assert!(c.get("v1", "ConfigMap", "default", "new").await.is_none());

    let changeset = c
        .manager
        .apply_all_staged(&objects, &options)
        .await
        .unwrap();
    assert_eq!(changeset.entries[0].action, Action::Configured);
    let fixed = c.get("v1", "ConfigMap", "default", "cfg").await.unwrap();
    assert_eq!(fixed["data"]["key"], "git");
    let drifts = c.manager.diff(&objects, &options).await.unwrap();
    assert!(
        drifts.iter().all(|d| d.kind == DriftKind::Unchanged),
        "{drifts:?}"
    );
}

#[tokio::test]
async fn stale_inventory_entries_are_pruned_except_prune_disabled_and_foreign() {
    let c = Cluster::start().await;
    let mut keep_me = configmap("default", "keep-me", &json!({}));
    keep_me.metadata.annotations = Some(
        [(
            "kustomize.toolkit.fluxcd.io/prune".to_owned(),
            "disabled".to_owned(),
        )]
        .into(),
    );
    let mut objects = vec![
        namespace("old-ns"),
        configmap("default", "stays", &json!({})),
        configmap("default", "goes", &json!({})),
        configmap("old-ns", "goes-too", &json!({})),
        keep_me,
    ];
    set_owner_labels(&mut objects, "apps", "flux-system");
    let mut foreign = vec![configmap("default", "foreign", &json!({}))];
    set_owner_labels(&mut foreign, "other", "flux-system");
    let options = ApplyOptions::default();
    let first = c
        .manager
        .apply_all_staged(&objects, &options)
        .await
        .unwrap();
    c.manager
        .apply_all_staged(&foreign, &options)
        .await
        .unwrap();

    let mut old = Inventory::from_changeset(&first);
    old.add(ObjectRef::from_object(&foreign[0]).unwrap());
    // Round-trip through status as a reconciler would.
    let old = Inventory::from_status(&old.to_status()).unwrap();
    let new = Inventory::new([ObjectRef::new("v1", "ConfigMap", "default", "stays")]);
    let stale = old.diff(&new);
    assert_eq!(stale.len(), 5);

    let delete = DeleteOptions {
        owner: Some(Owner {
            name: "apps".into(),
            namespace: "flux-system".into(),
        }),
        ..DeleteOptions::default()
    };
    let pruned = c.manager.delete_all(&stale, &delete).await.unwrap();
    let lines: Vec<String> = pruned
        .entries
        .iter()
        .map(|e| format!("{} {}", e.object, e.action))
        .collect();
    // Inventory (id) order, Namespaces last.
    assert_eq!(
        lines,
        [
            "ConfigMap/default/foreign skipped",
            "ConfigMap/default/goes deleted",
            "ConfigMap/default/keep-me skipped",
            "ConfigMap/old-ns/goes-too deleted",
            "Namespace/old-ns deleted",
        ]
    );
    assert!(c.get("v1", "ConfigMap", "default", "goes").await.is_none());
    assert!(
        c.get("v1", "ConfigMap", "default", "keep-me")
            .await
            .is_some()
    );
    assert!(
        c.get("v1", "ConfigMap", "default", "foreign")
            .await
            .is_some()
    );
    assert!(c.get("v1", "ConfigMap", "default", "stays").await.is_some());
    // Pruning again finds nothing left to delete.
    let again = c.manager.delete_all(&stale, &delete).await.unwrap();
    assert!(!again.has_changes(), "{again:?}");
}

#[tokio::test]
async fn ssa_if_not_present_and_ignore() {
    let c = Cluster::start().await;
    let annotated = |name: &str, mode: &str, value: &str| {
        let mut cm = configmap("default", name, &json!({"k": value}));
        cm.metadata.annotations = Some(
            [(
                "kustomize.toolkit.fluxcd.io/ssa".to_owned(),
                mode.to_owned(),
            )]
            .into(),
        );
        cm
    };
    let options = ApplyOptions::default();
    let first = c
        .manager
        .apply_all_staged(
            &[
                annotated("once", "IfNotPresent", "1"),
                annotated("ignored", "Ignore", "1"),
            ],
            &options,
        )
        .await
        .unwrap();
    let actions: Vec<Action> = first.entries.iter().map(|e| e.action).collect();
    assert_eq!(actions, [Action::Created, Action::Skipped]);
    assert!(
        c.get("v1", "ConfigMap", "default", "ignored")
            .await
            .is_none()
    );

    let second = c
        .manager
        .apply_all_staged(&[annotated("once", "IfNotPresent", "2")], &options)
        .await
        .unwrap();
    assert_eq!(second.entries[0].action, Action::Skipped);
    let live = c.get("v1", "ConfigMap", "default", "once").await.unwrap();
    assert_eq!(live["data"]["k"], "1", "IfNotPresent never updates");
}

fn job(image: &str, force_annotation: bool) -> DynamicObject {
    let mut j = object(json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "migrate", "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "m", "image": image}]}}}}));
    if force_annotation {
        j.metadata.annotations = Some(
            [(
                "kustomize.toolkit.fluxcd.io/force".to_owned(),
                "enabled".to_owned(),
            )]
            .into(),
        );
    }
    j
}

#[tokio::test]
async fn immutable_fields_need_force_to_recreate() {
    let c = Cluster::start().await;
    let manager = &c.manager;
    let options = ApplyOptions::default();
    manager
        .apply_all_staged(&[job("migrate:1", false)], &options)
        .await
        .unwrap();
    let uid = c
        .get("batch/v1", "Job", "default", "migrate")
        .await
        .unwrap()["metadata"]["uid"]
        .clone();

    let error = manager
        .apply_all_staged(&[job("migrate:2", false)], &options)
        .await
        .unwrap_err();
    let Error::Partial { errors, .. } = &error else {
        panic!("expected a partial error, got {error}");
    };
    assert!(errors[0].immutable, "{error}");
    assert!(
        error
            .to_string()
            .contains("Job/default/migrate: immutable field changed"),
        "{error}"
    );
    assert!(error.to_string().contains("spec.template"), "{error}");
    let live = c
        .get("batch/v1", "Job", "default", "migrate")
        .await
        .unwrap();
    assert_eq!(
        live["metadata"]["uid"], uid,
        "nothing was recreated without force"
    );

    let forced = ApplyOptions {
        force: true,
        ..ApplyOptions::default()
    };
    let changeset = manager
        .apply_all_staged(&[job("migrate:2", false)], &forced)
        .await
        .unwrap();
    assert_eq!(changeset.entries[0].action, Action::Created);
    let live = c
        .get("batch/v1", "Job", "default", "migrate")
        .await
        .unwrap();
    assert_ne!(live["metadata"]["uid"], uid, "the job was recreated");
    assert_eq!(
        live["spec"]["template"]["spec"]["containers"][0]["image"],
        "migrate:2"
    );

    // The annotation forces without the option.
    let changeset = manager
        .apply_all_staged(&[job("migrate:3", true)], &options)
        .await
        .unwrap();
    assert_eq!(changeset.entries[0].action, Action::Created);
}

#[tokio::test]
async fn health_waits_for_rollouts() {
    let c = Cluster::start().await;
    let objects = vec![
        deployment("default", "ok", None),
        deployment("default", "hangs", Some("hang")),
        deployment("default", "fails", Some("fail")),
    ];
    c.manager
        .apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .unwrap();
    let all = refs(&objects);
    let poll = Duration::from_millis(100);

    let ok = c
        .manager
        .wait_for(&all[..1], Duration::from_secs(20), poll)
        .await
        .expect("healthy deployment");
    assert_eq!(ok[0].status, Status::Current);

    let start = Instant::now();
    let error = c
        .manager
        .wait_for(&all[1..2], Duration::from_secs(2), poll)
        .await
        .unwrap_err();
    assert!(start.elapsed() >= Duration::from_secs(2));
    let Error::HealthTimeout { pending, .. } = &error else {
        panic!("expected a timeout, got {error}");
    };
    assert_eq!(pending[0].object.to_string(), "Deployment/default/hangs");
    assert!(
        error
            .to_string()
            .contains("Deployment/default/hangs: Deployment does not have minimum availability"),
        "{error}"
    );

    let start = Instant::now();
    let error = c
        .manager
        .wait_for(&all, Duration::from_secs(30), poll)
        .await
        .unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(10), "fails fast");
    let Error::HealthFailed { failed } = &error else {
        panic!("expected a failure, got {error}");
    };
    assert_eq!(failed[0].object.to_string(), "Deployment/default/fails");

    let missing = ObjectRef::new("v1", "ConfigMap", "default", "missing");
    let results = c.manager.check_health(&[missing]).await;
    assert_eq!(results[0].status, Status::NotFound);
}

/// As Flux's `ApplyAllStaged`: every object of a stage is dry-run before any is written, so one
/// invalid object (a kind nobody serves, a bad field) stops its whole stage; earlier stages stay
/// applied and every failed object is named.
#[tokio::test]
async fn one_invalid_object_stops_its_whole_stage() {
    let c = Cluster::start().await;
    let objects = vec![
        namespace("staged"),
        configmap("staged", "good-1", &json!({"k": "v"})),
        object(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "bad", "namespace": "staged"},
            "spec": {"ports": [{"port": "not-a-number"}]}})),
        object(json!({"apiVersion": "nope.example.com/v1", "kind": "Ghost",
            "metadata": {"name": "g", "namespace": "staged"}})),
        configmap("staged", "good-2", &json!({"k": "v"})),
    ];
    let error = c
        .manager
        .apply_all_staged(&objects, &ApplyOptions::default())
        .await
        .unwrap_err();
    let Error::Partial { changeset, errors } = &error else {
        panic!("expected a partial error, got {error}");
    };
    let applied: Vec<String> = changeset.entries.iter().map(ToString::to_string).collect();
    assert_eq!(applied, ["Namespace/staged created"], "{error}");
    let failed: Vec<&str> = errors.iter().map(|e| e.object.as_str()).collect();
    assert_eq!(failed, ["Service/staged/bad", "Ghost/staged/g"]);
    assert!(
        error.to_string().contains(
            "Ghost/staged/g: dry-run failed: no matches for kind \"Ghost\" in version \"nope.example.com/v1\""
        ),
        "{error}"
    );
    assert!(errors[0].message.starts_with("dry-run failed: "), "{error}");
    assert!(c.get("v1", "Namespace", "", "staged").await.is_some());
    for name in ["good-1", "good-2"] {
        assert!(
            c.get("v1", "ConfigMap", "staged", name).await.is_none(),
            "{name} was written although its stage failed its dry-run"
        );
    }

    // Once the invalid objects are gone, the stage applies.
    let valid: Vec<DynamicObject> = objects
        .iter()
        .filter(|o| {
            o.types
                .as_ref()
                .is_some_and(|t| t.kind != "Service" && t.kind != "Ghost")
        })
        .cloned()
        .collect();
    let changeset = c
        .manager
        .apply_all_staged(&valid, &ApplyOptions::default())
        .await
        .unwrap();
    assert_eq!(changeset.with_action(Action::Created).count(), 2);
}

/// What an owner records before applying names exactly what the apply writes (namespaces fixed
/// up per scope), and deleting such a record is safe for entries no apply could have written.
#[tokio::test]
async fn references_before_an_apply_match_its_change_set() {
    let c = Cluster::start().await;
    let mut cluster_scoped = namespace("refs");
    cluster_scoped.metadata.namespace = Some("ignored".into());
    let objects = vec![
        cluster_scoped,
        object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "defaulted"}, "data": {"k": "v"}})),
        configmap("default", "named", &json!({"k": "v"})),
        crd(),
        object(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 1}})),
        object(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})),
    ];
    let options = ApplyOptions {
        default_namespace: Some("default".into()),
        ..ApplyOptions::default()
    };
    let planned = c.manager.references(&objects, &options).await;
    let planned: Vec<String> = planned.iter().map(ToString::to_string).collect();
    assert_eq!(
        planned,
        [
            "Namespace/refs",
            "ConfigMap/default/defaulted",
            "ConfigMap/default/named",
            "CustomResourceDefinition/widgets.example.com",
            "Widget/default/w",
        ],
        "the nameless object is left out"
    );
    let changeset = c
        .manager
        .apply_all_staged(&objects[..5], &options)
        .await
        .unwrap();
    let mut applied: Vec<String> = changeset
        .entries
        .iter()
        .map(|e| e.object.to_string())
        .collect();
    let mut expected = planned.clone();
    applied.sort();
    expected.sort();
    assert_eq!(applied, expected);

    // A namespaced entry without a namespace cannot name an object: nothing to delete.
    let orphan = ObjectRef::new("v1", "ConfigMap", "", "defaulted");
    let deleted = c
        .manager
        .delete_all(&[orphan], &DeleteOptions::default())
        .await
        .unwrap();
    assert!(deleted.entries.is_empty());
    assert!(
        c.get("v1", "ConfigMap", "default", "defaulted")
            .await
            .is_some()
    );
}
