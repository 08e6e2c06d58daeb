//! Kustomization acceptance cases end to end: CRDs with their custom resources in one build,
//! suspend/resume, a schema-invalid object among valid ones, and the kustomize parts of the
//! flux2-kustomize-helm-example repository (`../shared/corpus/flux-example`).

use std::path::Path;
use std::time::Duration;

use capstan_api::Kustomization;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};

use crate::kustomization::{
    KustomizeController, NAMESPACE, config_map, create_kustomization, deployment, inventory_ids,
    kustomizations, ready, request_reconcile, setup, wait_ready, wait_source_revision,
};
use crate::support::{Env, GitServer, eventually};

const WIDGET_CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              size: {type: integer}\n";

const WIDGET: &str = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: gadget\n  namespace: apps\nspec:\n  size: 3\n";

fn widgets(env: &Env) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    Api::namespaced_with(env.client.clone(), NAMESPACE, &ApiResource::from_gvk(&gvk))
}

fn config_maps(env: &Env, namespace: &str) -> Api<ConfigMap> {
    Api::namespaced(env.client.clone(), namespace)
}

/// A CRD and its custom resources in one build: the CRD is applied (and Established) first,
/// then the resources; the Kustomization ends Ready with both in the inventory.
#[tokio::test]
async fn a_crd_and_its_resources_apply_in_stages() {
    let (env, _upstream, _controller, _) = setup(&[
        (
            "app/kustomization.yaml",
            "resources: [widget.yaml, crd.yaml]\n",
        ),
        ("app/crd.yaml", WIDGET_CRD),
        ("app/widget.yaml", WIDGET),
    ])
    .await;
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "app", "wait": true, "timeout": "30s"}),
    )
    .await;
    let object = wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;
    let mut ids = inventory_ids(&object);
    ids.sort();
    assert_eq!(
        ids,
        [
            "_widgets.example.com_apiextensions.k8s.io_CustomResourceDefinition",
            "apps_gadget_example.com_Widget"
        ]
    );
    let gadget = widgets(&env).get("gadget").await.unwrap();
    assert_eq!(gadget.data["spec"]["size"], 3);
}

/// `spec.suspend` stops every change (a new revision is not applied); resuming applies it.
#[tokio::test]
async fn suspend_stops_changes_and_resume_applies_them() {
    let (env, upstream, controller, _) = setup(&[("app/config.yaml", &config_map())]).await;
    create_kustomization(&env, "app", serde_json::json!({"path": "app"})).await;
    wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;
    let suspend = |value: bool| {
        let api = kustomizations(&env);
        async move {
            api.patch(
                "app",
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({"spec": {"suspend": value}})),
            )
            .await
            .unwrap();
        }
    };
    suspend(true).await;
    let second = upstream.commit(
        &[(
            "app/config.yaml",
            &config_map().replace("env: dev", "env: prod"),
        )],
        "second",
    );
    request_reconcile(&env.git_repositories(NAMESPACE), "repo", "t1").await;
    wait_source_revision(&env, &format!("main@sha1:{second}")).await;
    // A reconcile runs while suspended (counted by the controller), and changes nothing.
    let before = controller.reconciles("app");
    request_reconcile(&kustomizations(&env), "app", "while-suspended").await;
    eventually(
        Duration::from_secs(20),
        "a reconcile while suspended",
        || {
            let done = controller.reconciles("app") > before;
            async move { done.then_some(()) }
        },
    )
    .await;
    let settings = config_maps(&env, NAMESPACE).get("settings").await.unwrap();
    assert_eq!(
        settings.data.unwrap()["env"],
        "dev",
        "suspended, nothing changes"
    );

    suspend(false).await;
    let expected = format!("Applied revision: main@sha1:{second}");
    wait_ready(&env, "app", "the new revision", |_, _, message| {
        message == expected
    })
    .await;
    let settings = config_maps(&env, NAMESPACE).get("settings").await.unwrap();
    assert_eq!(settings.data.unwrap()["env"], "prod");
}

/// A schema-invalid object fails the Kustomization naming the object and the field; as in Flux,
/// its dry-run failing keeps the whole stage unapplied, and the controller keeps serving others.
#[tokio::test]
async fn a_schema_invalid_object_is_reported_and_its_stage_not_applied() {
    let invalid = deployment("nginx:1.25", "").replace("replicas: 1", "replicas: three");
    let (env, _upstream, _controller, _) = setup(&[
        ("bad/config.yaml", &config_map()),
        ("bad/deployment.yaml", &invalid),
        (
            "good/config.yaml",
            &config_map().replace("name: settings", "name: other"),
        ),
    ])
    .await;
    create_kustomization(&env, "bad", serde_json::json!({"path": "bad"})).await;
    create_kustomization(&env, "good", serde_json::json!({"path": "good"})).await;
    let object = wait_ready(&env, "bad", "Ready=False", |status, _, _| status == "False").await;
    let (_, reason, message) = ready(&object).unwrap();
    assert_eq!(reason, "ReconciliationFailed");
    assert!(message.contains("Deployment/apps/web"), "{message}");
    assert!(message.contains("spec.replicas"), "{message}");
    assert!(message.contains("dry-run failed"), "{message}");
    assert!(inventory_ids(&object).is_empty());
    assert!(
        config_maps(&env, NAMESPACE)
            .get_opt("settings")
            .await
            .unwrap()
            .is_none()
    );
    wait_ready(
        &env,
        "good",
        "the other Kustomization Ready",
        |status, _, _| status == "True",
    )
    .await;
    assert!(
        config_maps(&env, NAMESPACE)
            .get_opt("other")
            .await
            .unwrap()
            .is_some()
    );
}

/// Every file below `dir`, relative to it.
fn files_below(dir: &Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir).unwrap().display().to_string();
                found.push((relative, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    found.sort();
    found
}

const FLUX_SYSTEM: &str = "flux-system";

/// The kustomize parts of the flux2-kustomize-helm-example repository reconcile to Ready.
///
/// A Git server holds the repository's files (`../shared/corpus/flux-example/src`) and a
/// GitRepository `flux-system` serves them. The Kustomizations are those of
/// `clusters/staging/infrastructure.yaml` and `clusters/staging/apps.yaml`, with these changes:
/// - `sourceRef` is the GitRepository, and paths are prefixed with `infrastructure/` or
///   `apps/`: the repository's ArtifactGenerator/ExternalArtifact (`artifacts.yaml`) is not
///   served here.
/// - `infra-configs` is skipped: its ClusterIssuer, GatewayClass and Gateway need the CRDs
///   that the cert-manager and envoy-gateway HelmReleases install, and there is no
///   helm-controller; `apps` therefore depends on `infra-controllers` instead.
/// - `infra-controllers` gets one more patch suspending its OCIRepositories (Helm charts on
///   quay.io and docker.io), so that no test reaches the network; its HelmReleases are
///   applied as objects but never installed.
/// - `wait` is turned off: with it, health would wait for the HelmReleases (and the
///   HelmRepository and OCIRepositories) to be reconciled by helm- and source-controller,
///   whose status stays `observedGeneration: -1` here, as on a cluster without them.
/// - `clusters/staging/flux-system` (the Flux installation itself) is not reconciled.
#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn flux_example_kustomizations_reconcile_to_ready() {
    let corpus = capstan_testkit::corpus("flux-example/src");
    let corpus = corpus.as_path();
    let env = Env::start().await;
    env.namespace(FLUX_SYSTEM).await;
    let upstream = GitServer::start().await;
    let files = files_below(corpus);
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_str()))
        .collect();
    let commit = upstream.commit(&borrowed, "flux example");
    env.create_git_repository(
        FLUX_SYSTEM,
        FLUX_SYSTEM,
        serde_json::json!({"url": upstream.url(), "interval": "1h", "ref": {"branch": "main"}}),
    )
    .await;
    let revision = format!("main@sha1:{commit}");
    env.wait_for(FLUX_SYSTEM, FLUX_SYSTEM, "the source revision", |o| {
        o.status
            .as_ref()
            .and_then(|s| s.artifact.as_ref())
            .is_some_and(|a| a.revision == revision)
    })
    .await;
    let _controller = KustomizeController::start(&env);

    let api: Api<Kustomization> = Api::namespaced(env.client.clone(), FLUX_SYSTEM);
    let mut created = Vec::new();
    for file in ["infrastructure.yaml", "apps.yaml"] {
        let text = std::fs::read_to_string(corpus.join("clusters/staging").join(file)).unwrap();
        let documents = capstan_kustomize::parse_documents(&text).unwrap();
        for mut value in documents
            .into_iter()
            .filter(|d| d["kind"] == "Kustomization")
        {
            let name = value["metadata"]["name"].as_str().unwrap().to_owned();
            if name == "infra-configs" {
                continue;
            }
            let spec = &mut value["spec"];
            spec["sourceRef"] = serde_json::json!({"kind": "GitRepository", "name": FLUX_SYSTEM});
            let prefix = if file == "apps.yaml" {
                "apps"
            } else {
                "infrastructure"
            };
            let path = spec["path"].as_str().unwrap().trim_start_matches("./");
            spec["path"] = format!("./{prefix}/{path}").into();
            spec["wait"] = false.into();
            if name == "apps" {
                spec["dependsOn"] = serde_json::json!([{"name": "infra-controllers"}]);
            }
            if name == "infra-controllers" {
                spec["patches"] = serde_json::json!([{
                    "patch": "- op: add\n  path: /spec/suspend\n  value: true\n",
                    "target": {"kind": "OCIRepository"},
                }]);
            }
            let object: Kustomization = serde_json::from_value(value).unwrap();
            api.create(&PostParams::default(), &object).await.unwrap();
            created.push(name);
        }
    }
    assert_eq!(created, ["infra-controllers", "apps"]);

    for name in &created {
        let object = eventually(Duration::from_secs(60), "the Kustomizations Ready", || {
            let api = api.clone();
            async move {
                let object = api.get(name).await.ok()?;
                let ready = object
                    .status
                    .as_ref()?
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                ready.then_some(object)
            }
        })
        .await;
        assert_eq!(
            object.status.unwrap().last_applied_revision.as_deref(),
            Some(revision.as_str()),
            "{name}"
        );
    }

    // What the builds hold landed: namespaces, sources and releases (staging values patched in).
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    for namespace in ["cert-manager", "envoy-gateway-system", "podinfo"] {
        assert!(
            namespaces.get_opt(namespace).await.unwrap().is_some(),
            "{namespace}"
        );
    }
    let release = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "helm.toolkit.fluxcd.io",
        "v2",
        "HelmRelease",
    ));
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), "podinfo", &release);
    let podinfo = releases.get("podinfo").await.unwrap();
    assert_eq!(
        podinfo.data["spec"]["chart"]["spec"]["version"],
        ">=1.0.0-alpha"
    );
    assert_eq!(
        podinfo.data["spec"]["values"]["httpRoute"]["hostnames"][0],
        "podinfo.staging"
    );
    assert_eq!(
        podinfo
            .labels()
            .get("kustomize.toolkit.fluxcd.io/name")
            .map(String::as_str),
        Some("apps")
    );
}
