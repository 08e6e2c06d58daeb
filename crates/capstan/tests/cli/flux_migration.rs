//! Migrating from Flux (docs/migrating-from-flux.md). Each test makes a Flux installation in the
//! embedded control plane (`capstan dev --no-controllers` with one Node, so Deployments roll out):
//! Flux's components labelled as `flux install` labels them and applied with its field manager
//! (`flux`), Capstan's CRDs relabelled as Flux's, an image-automation CRD Capstan does not ship,
//! and an app Flux deployed (objects labelled by their Kustomization, the Kustomization's status
//! and inventory written as Flux's kustomize-controller writes them). Then `capstan check` and
//! `capstan install` name the installation and refuse, the documented steps are followed, and
//! `capstan controller` (out of cluster) reconciles what Flux left: the app's objects keep their
//! UIDs, the inventory is adopted (an object only Flux's inventory names is pruned), and
//! `capstan check` passes.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use capstan_testkit::{GitServer, Run, eventually};

use crate::support;

const FLUX_VERSION: &str = "v2.7.3";
const CONTROLLERS: [&str; 4] = [
    "source-controller",
    "kustomize-controller",
    "helm-controller",
    "notification-controller",
];
const IMAGE_CRD: &str = "imagerepositories.image.toolkit.fluxcd.io";
/// The migration's first step, as the refusal prints it.
const DELETE_NAMESPACED: &str = "kubectl -n flux-system delete deployment,service,serviceaccount,\
                                 networkpolicy,resourcequota -l app.kubernetes.io/part-of=flux";
const DELETE_CLUSTER: &str =
    "kubectl delete clusterrole,clusterrolebinding -l app.kubernetes.io/part-of=flux";

/// The control plane alone, with a Node.
struct Plane(support::ControlPlane);

impl std::ops::Deref for Plane {
    type Target = support::ControlPlane;
    fn deref(&self) -> &support::ControlPlane {
        &self.0
    }
}

impl Plane {
    async fn start() -> Self {
        let plane = Self(support::ControlPlane::start().await);
        plane
            .apply_as(
                "node",
                &[json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "worker-1"}})],
            )
            .await;
        plane
    }

    /// `kubectl apply --server-side --force-conflicts --field-manager <manager>` of `objects`.
    async fn apply_as(&self, manager: &str, objects: &[Value]) {
        let file = self.dir.path().join(format!("{manager}-apply.json"));
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        std::fs::write(&file, list.to_string()).unwrap();
        self.kubectl(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--validate=false",
            "--field-manager",
            manager,
            "-f",
            file.to_str().unwrap(),
        ])
        .await
        .ok();
    }

    async fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.extend(["-o", "json"]);
        self.kubectl(&args).await.ok().json()
    }

    async fn uid(&self, args: &[&str]) -> String {
        self.json(args).await["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    async fn exists(&self, args: &[&str]) -> bool {
        let mut args = args.to_vec();
        args.extend(["--ignore-not-found", "-o", "name"]);
        !self.kubectl(&args).await.ok().stdout.trim().is_empty()
    }

    /// `capstan controller` run out of cluster with the admin kubeconfig, killed on drop.
    fn controller(&self) -> tokio::process::Child {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args(["controller", "--storage-addr", "127.0.0.1:0"])
            .args(["--receiver-addr", "127.0.0.1:0"])
            .arg("--storage-path")
            .arg(self.dir.path().join("artifacts"))
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env_remove("RUNTIME_NAMESPACE")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join("controller.log")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    }

    /// Waits until the Kustomization `flux-system/<name>` is Ready and `done` says Capstan
    /// reconciled it; returns it (with its managed fields).
    async fn reconciled(&self, name: &str, done: impl Fn(&Value) -> bool) -> Value {
        eventually(
            Duration::from_secs(120),
            &format!("Capstan to reconcile the Kustomization {name}"),
            || async {
                let object = self
                    .kubectl(&[
                        "-n",
                        "flux-system",
                        "get",
                        "kustomization",
                        name,
                        "-o",
                        "json",
                        "--show-managed-fields",
                    ])
                    .await
                    .ok()
                    .json();
                let ready = object["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                (ready && done(&object["status"])).then_some(object)
            },
        )
        .await
    }
}

/// Prints the controller's log when the test fails.
struct LogOnPanic(PathBuf);

impl Drop for LogOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.0).unwrap_or_default();
            eprintln!("capstan controller's log:\n{log}");
        }
    }
}

/// The labels `flux install` gives a component (its `LabelTransformer`s), plus `extra`.
fn flux_labels(component: &str, extra: &Value) -> Value {
    let mut labels = json!({
        "app.kubernetes.io/part-of": "flux",
        "app.kubernetes.io/instance": "flux-system",
        "app.kubernetes.io/version": FLUX_VERSION,
        "app.kubernetes.io/component": component,
    });
    if let Some(extra) = extra.as_object() {
        labels.as_object_mut().unwrap().extend(extra.clone());
    }
    labels
}

/// Flux's components as `flux install` makes them (the parts detection and the migration
/// touch): per controller a ServiceAccount and a Deployment; the Services; the
/// `crd-controller` ClusterRole and its binding; the `cluster-reconciler` binding; a
/// NetworkPolicy. `extra` labels are added (a bootstrap Kustomization's).
fn flux_components(extra: &Value) -> Vec<Value> {
    let mut objects = Vec::new();
    for controller in CONTROLLERS {
        let labels = flux_labels(controller, extra);
        objects.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": controller, "namespace": "flux-system", "labels": labels}}));
        let mut pod_labels = labels.clone();
        pod_labels["app"] = json!(controller);
        objects.push(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": controller, "namespace": "flux-system", "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": controller}},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {"serviceAccountName": controller, "containers": [{
                    "name": "manager",
                    "image": format!("ghcr.io/fluxcd/{controller}:v1.7.0"),
                }]},
            },
        }}));
    }
    for (service, app) in [
        ("source-controller", "source-controller"),
        ("notification-controller", "notification-controller"),
        ("webhook-receiver", "notification-controller"),
    ] {
        objects.push(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service, "namespace": "flux-system",
                "labels": flux_labels(app, extra)},
            "spec": {"type": "ClusterIP", "selector": {"app": app},
                "ports": [{"name": "http", "port": 80, "protocol": "TCP",
                    "targetPort": "http"}]}}));
    }
    let rbac = flux_labels("", extra);
    objects.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "crd-controller-flux-system", "labels": rbac},
        "rules": [{"apiGroups": ["source.toolkit.fluxcd.io"], "resources": ["*"],
            "verbs": ["*"]}]}),
    );
    let accounts = |names: &[&str]| -> Value {
        names
            .iter()
            .map(|n| json!({"kind": "ServiceAccount", "name": n, "namespace": "flux-system"}))
            .collect()
    };
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "crd-controller-flux-system", "labels": rbac},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "crd-controller-flux-system"},
        "subjects": accounts(&CONTROLLERS)}));
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "cluster-reconciler-flux-system", "labels": rbac},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "cluster-admin"},
        "subjects": accounts(&["kustomize-controller", "helm-controller"])}));
    objects.push(
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "allow-egress", "namespace": "flux-system", "labels": rbac},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {}}]}], "egress": [{}]}}),
    );
    objects
}

/// Flux's inventory id of an object (`<namespace>_<name>_<group>_<Kind>`) with its version.
fn entry(object: &Value) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    json!({
        "id": format!(
            "{}_{}_{}_{}",
            object["metadata"]["namespace"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap(),
            group,
            object["kind"].as_str().unwrap()
        ),
        "v": version,
    })
}

/// Makes the Flux installation: its components (applied by `flux`, then by `kustomize-controller`
/// when `bootstrap`, as `flux bootstrap` does), the CRDs relabelled as Flux's (by `flux`), and
/// the image-automation CRD Capstan does not ship with one ImageRepository. Returns the inventory
/// entries of what was made.
async fn make_flux(plane: &Plane, bootstrap: bool) -> Vec<Value> {
    let extra = if bootstrap {
        json!({"kustomize.toolkit.fluxcd.io/name": "flux-system",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system"})
    } else {
        json!({})
    };
    let components = flux_components(&extra);
    plane.apply_as("flux", &components).await;
    if bootstrap {
        plane.apply_as("kustomize-controller", &components).await;
    }
    let crds = plane
        .kubectl(&["get", "crd", "-o", "name"])
        .await
        .ok()
        .stdout;
    let mut relabelled: Vec<Value> = crds
        .lines()
        .filter(|line| line.contains("toolkit.fluxcd.io"))
        .map(|line| {
            let name = line.trim_start_matches("customresourcedefinition.apiextensions.k8s.io/");
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": name, "labels": flux_labels("", &extra)}})
        })
        .collect();
    assert!(relabelled.len() >= 10, "{crds}");
    plane.apply_as("flux", &relabelled).await;
    let image_crd = json!({"apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": IMAGE_CRD,
            "labels": flux_labels("image-reflector-controller", &extra)},
        "spec": {"group": "image.toolkit.fluxcd.io", "scope": "Namespaced",
            "names": {"kind": "ImageRepository", "listKind": "ImageRepositoryList",
                "plural": "imagerepositories", "singular": "imagerepository"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}});
    plane
        .apply_as("flux", std::slice::from_ref(&image_crd))
        .await;
    eventually(Duration::from_secs(30), "the image CRD served", || async {
        plane
            .kubectl(&["get", "imagerepositories", "-A"])
            .await
            .status
            .eq(&0)
            .then_some(())
    })
    .await;
    plane
        .apply_as(
            "flux",
            &[json!({"apiVersion": "image.toolkit.fluxcd.io/v1",
            "kind": "ImageRepository",
            "metadata": {"name": "shop", "namespace": "flux-system"},
            "spec": {"image": "registry.example/shop", "interval": "5m"}})],
        )
        .await;
    relabelled.push(image_crd);
    components.iter().chain(&relabelled).map(entry).collect()
}

/// The app Flux deployed: a Namespace and two ConfigMaps, as the Kustomization `owner` applied
/// them (its labels, field manager `kustomize-controller`). `retired` is no longer in Git.
fn app_objects(owner: &str) -> Vec<Value> {
    let labels = json!({"kustomize.toolkit.fluxcd.io/name": owner,
        "kustomize.toolkit.fluxcd.io/namespace": "flux-system"});
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "shop", "labels": labels}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "shop", "labels": labels},
            "data": {"color": "blue"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "retired", "namespace": "shop", "labels": labels},
            "data": {"color": "grey"}}),
    ]
}

/// The app in Git: the Namespace and `settings`.
const APP_YAML: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\n\
                        apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  \
                        namespace: shop\ndata:\n  color: blue\n";

/// Writes the status Flux's kustomize-controller left on a Kustomization: Ready at `revision`,
/// with `inventory`.
async fn flux_status(plane: &Plane, name: &str, revision: &str, inventory: Vec<Value>) {
    let status = json!({"status": {
        "observedGeneration": 1,
        "lastAppliedRevision": revision,
        "lastAttemptedRevision": revision,
        "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
            "message": format!("Applied revision: {revision}"),
            "lastTransitionTime": "2026-11-01T00:00:00Z", "observedGeneration": 1}],
        "inventory": {"entries": inventory},
    }});
    plane
        .kubectl(&[
            "-n",
            "flux-system",
            "patch",
            "kustomization",
            name,
            "--subresource=status",
            "--type=merge",
            "--field-manager=kustomize-controller",
            "-p",
            &status.to_string(),
        ])
        .await
        .ok();
}

/// The field managers of an object's `metadata.labels[key]`.
fn label_owners(object: &Value, key: &str) -> Vec<String> {
    let field = format!("f:{key}");
    object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m["fieldsV1"]["f:metadata"]["f:labels"]
                .get(&field)
                .is_some()
        })
        .map(|m| m["manager"].as_str().unwrap().to_owned())
        .collect()
}

/// What both migrations end with: the app's objects kept (same UIDs) and `retired` pruned from
/// the adopted inventory; the CRDs taken over by `capstan` with forced apply; the image CRD and
/// its object kept; the shared-name Service Capstan's alone (no field of Flux's manager left); `capstan check`
/// passing.
async fn assert_migrated(plane: &Plane, uids: &[(&str, String)], kustomization: &Value) {
    for (what, uid) in uids {
        let args: Vec<&str> = what.split(' ').collect();
        assert_eq!(&plane.uid(&args).await, uid, "{what} was recreated");
    }
    eventually(Duration::from_secs(30), "retired pruned", || async {
        (!plane
            .exists(&["-n", "shop", "get", "configmap", "retired"])
            .await)
            .then_some(())
    })
    .await;
    let entries = kustomization["status"]["inventory"]["entries"].to_string();
    assert!(entries.contains("shop_settings__ConfigMap"), "{entries}");
    assert!(!entries.contains("retired"), "{entries}");
    let status_managers: Vec<&str> = kustomization["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["subresource"] == "status")
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(status_managers.contains(&"capstan"), "{status_managers:?}");

    let crd = plane
        .json(&[
            "get",
            "crd",
            "kustomizations.kustomize.toolkit.fluxcd.io",
            "--show-managed-fields",
        ])
        .await;
    assert_eq!(
        crd["metadata"]["labels"]["app.kubernetes.io/part-of"],
        "capstan"
    );
    assert!(
        !label_owners(&crd, "app.kubernetes.io/part-of").contains(&"flux".to_owned()),
        "{}",
        crd["metadata"]["managedFields"]
    );
    let image_crd = plane.json(&["get", "crd", IMAGE_CRD]).await;
    assert_eq!(
        image_crd["metadata"]["labels"]["app.kubernetes.io/part-of"],
        "flux"
    );
    assert!(
        plane
            .exists(&["-n", "flux-system", "get", "imagerepository", "shop"])
            .await
    );
    let service = plane
        .json(&[
            "-n",
            "flux-system",
            "get",
            "service",
            "source-controller",
            "--show-managed-fields",
        ])
        .await;
    assert_eq!(
        service["spec"]["selector"],
        json!({"app": "capstan-controller"})
    );
    let managers = service["metadata"]["managedFields"].to_string();
    assert!(!managers.contains(r#""manager":"flux""#), "{managers}");
    for gone in [
        [
            "-n",
            "flux-system",
            "get",
            "serviceaccount",
            "source-controller",
        ],
        [
            "-n",
            "flux-system",
            "get",
            "deployment",
            "kustomize-controller",
        ],
        ["", "", "get", "clusterrole", "crd-controller-flux-system"],
    ] {
        let args: Vec<&str> = gone.into_iter().filter(|a| !a.is_empty()).collect();
        assert!(!plane.exists(&args).await, "{args:?} is left");
    }
    let check = plane.capstan(&["check", "--timeout", "60s"]).await.ok();
    assert!(
        check.stderr.contains("✔ no Flux controllers found")
            && check.stderr.contains("all checks passed"),
        "{}",
        check.stderr
    );
}

/// `flux install`'s installation (not bootstrapped): `capstan check` fails naming it, `capstan
/// install` refuses and changes nothing, and the steps it prints migrate: after them Capstan
/// reconciles the Kustomization Flux left, keeps the app's objects and adopts the inventory.
#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn an_installed_flux_is_refused_then_migrated_in_the_cluster() {
    let plane = Plane::start().await;
    let git = GitServer::start().await;
    let commit = git.commit(&[("apps/shop/app.yaml", APP_YAML)], "shop");
    let revision = format!("main@sha1:{commit}");
    make_flux(&plane, false).await;
    plane
        .apply_as(
            "flux",
            &[
                json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                "metadata": {"name": "shop", "namespace": "flux-system"},
                "spec": {"interval": "1m", "url": git.url(), "ref": {"branch": "main"}}}),
                json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": "shop", "namespace": "flux-system"},
                "spec": {"interval": "1m", "path": "./apps/shop", "prune": true,
                    "sourceRef": {"kind": "GitRepository", "name": "shop"}}}),
            ],
        )
        .await;
    let app = app_objects("shop");
    plane.apply_as("kustomize-controller", &app).await;
    flux_status(&plane, "shop", &revision, app.iter().map(entry).collect()).await;
    let uids = vec![
        (
            "get namespace shop",
            plane.uid(&["get", "namespace", "shop"]).await,
        ),
        (
            "-n shop get configmap settings",
            plane
                .uid(&["-n", "shop", "get", "configmap", "settings"])
                .await,
        ),
        (
            "-n flux-system get kustomization shop",
            plane
                .uid(&["-n", "flux-system", "get", "kustomization", "shop"])
                .await,
        ),
    ];

    let check = plane.capstan(&["check", "--timeout", "1s"]).await.fails();
    assert!(
        check.stderr.contains(&format!(
            "✗ Flux {FLUX_VERSION} is installed in namespace flux-system: helm-controller, \
             kustomize-controller, notification-controller, source-controller"
        )),
        "{}",
        check.stderr
    );
    let refused = plane.capstan(&["install", "--wait=false"]).await.fails();
    for said in [
        "refusing to install next to Flux's controllers",
        &format!("Flux {FLUX_VERSION} is installed in namespace flux-system"),
        DELETE_NAMESPACED,
        DELETE_CLUSTER,
        "capstan install -n flux-system",
        "docs/migrating-from-flux.md",
    ] {
        assert!(refused.stderr.contains(said), "{said}:\n{}", refused.stderr);
    }
    assert!(!refused.stderr.contains("bootstrap"), "{}", refused.stderr);
    assert!(
        !plane
            .exists(&[
                "-n",
                "flux-system",
                "get",
                "deployment",
                "capstan-controller"
            ])
            .await,
        "install changed the cluster before refusing"
    );

    // Server-side apply without force conflicts with Flux's field manager on the CRDs: that is
    // why `capstan install` forces.
    let label = plane.dir.path().join("label.json");
    std::fs::write(
        &label,
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "kustomizations.kustomize.toolkit.fluxcd.io",
                "labels": {"app.kubernetes.io/part-of": "capstan"}}})
        .to_string(),
    )
    .unwrap();
    let conflict = plane
        .kubectl(&[
            "apply",
            "--server-side",
            "--validate=false",
            "--field-manager=capstan",
            "-f",
            label.to_str().unwrap(),
        ])
        .await
        .fails();
    assert!(
        conflict.stderr.contains("conflict") && conflict.stderr.contains("flux"),
        "{}",
        conflict.stderr
    );

    // The documented steps.
    let words = |line: &str| {
        line.split(' ')
            .skip(1)
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    for step in [DELETE_NAMESPACED, DELETE_CLUSTER] {
        let args = words(step);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        plane.kubectl(&args).await.ok();
    }
    let install = plane
        .capstan(&["install", "-n", "flux-system", "--timeout", "60s"])
        .await
        .ok();
    assert!(install.stderr.contains("is ready"), "{}", install.stderr);
    let token = "migrated-from-flux";
    plane
        .kubectl(&[
            "-n",
            "flux-system",
            "annotate",
            "kustomization",
            "shop",
            &format!("reconcile.fluxcd.io/requestedAt={token}"),
        ])
        .await
        .ok();
    let _controller = plane.controller();
    let _log = LogOnPanic(plane.dir.path().join("controller.log"));
    let kustomization = plane
        .reconciled("shop", |status| status["lastHandledReconcileAt"] == token)
        .await;
    assert_eq!(kustomization["status"]["lastAppliedRevision"], revision);
    assert_migrated(&plane, &uids, &kustomization).await;
}

/// The sync objects `flux bootstrap` commits to `gotk-sync.yaml`, for `url` and `./clusters/dev`.
fn flux_sync(url: &str) -> Vec<Value> {
    vec![
        json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "flux-system", "namespace": "flux-system"},
            "spec": {"interval": "1m0s", "url": url, "ref": {"branch": "main"}}}),
        json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "flux-system", "namespace": "flux-system"},
            "spec": {"interval": "10m0s", "path": "./clusters/dev", "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}),
    ]
}

/// YAML documents of `objects` (each a JSON document, which YAML reads).
fn documents(objects: &[Value]) -> String {
    objects
        .iter()
        .map(|object| format!("---\n{object}\n"))
        .collect::<Vec<_>>()
        .concat()
}

/// A `flux bootstrap`ped installation: Flux's layout in Git, its components applied by the
/// `flux-system` Kustomization (labelled by it, in its inventory with the CRDs and the app). The
/// refusal names the repository and path; after the documented steps (the image CRD kept from
/// pruning, Flux's components deleted, `capstan bootstrap git` on the same path), Capstan
/// reconciles `flux-system` at the pushed commit and the app is kept as in the other test.
#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn a_bootstrapped_flux_is_migrated_through_git() {
    let plane = Plane::start().await;
    let git = GitServer::start().await;
    let url = git.url();
    let sync = flux_sync(&url);
    // Flux's gotk-components.yaml also holds the CRDs; this revision is never applied in the
    // test (Flux applied it before), so the components alone stand for it.
    let first = git.commit(
        &[
            (
                "clusters/dev/flux-system/gotk-components.yaml",
                &documents(&flux_components(&json!({}))),
            ),
            ("clusters/dev/flux-system/gotk-sync.yaml", &documents(&sync)),
            (
                "clusters/dev/flux-system/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
                 resources:\n- gotk-components.yaml\n- gotk-sync.yaml\n",
            ),
            ("clusters/dev/shop.yaml", APP_YAML),
        ],
        "flux bootstrap",
    );
    let mut inventory = make_flux(&plane, true).await;
    let owned = json!({"kustomize.toolkit.fluxcd.io/name": "flux-system",
        "kustomize.toolkit.fluxcd.io/namespace": "flux-system"});
    let sync: Vec<Value> = sync
        .into_iter()
        .map(|mut object| {
            object["metadata"]["labels"] = owned.clone();
            object
        })
        .collect();
    plane.apply_as("flux", &sync).await;
    let app = app_objects("flux-system");
    plane.apply_as("kustomize-controller", &app).await;
    inventory.extend(sync.iter().chain(&app).map(entry));
    inventory.push(json!({"id": "_flux-system__Namespace", "v": "v1"}));
    flux_status(
        &plane,
        "flux-system",
        &format!("main@sha1:{first}"),
        inventory,
    )
    .await;
    let crd = ["get", "crd", "kustomizations.kustomize.toolkit.fluxcd.io"];
    let uids = vec![
        (
            "get namespace shop",
            plane.uid(&["get", "namespace", "shop"]).await,
        ),
        (
            "-n shop get configmap settings",
            plane
                .uid(&["-n", "shop", "get", "configmap", "settings"])
                .await,
        ),
        (
            "-n flux-system get kustomization flux-system",
            plane
                .uid(&["-n", "flux-system", "get", "kustomization", "flux-system"])
                .await,
        ),
        (
            "get crd kustomizations.kustomize.toolkit.fluxcd.io",
            plane.uid(&crd).await,
        ),
    ];

    let bootstrap_line =
        format!("capstan bootstrap git --url {url} --branch main --path clusters/dev");
    let annotate =
        format!("kubectl annotate crd {IMAGE_CRD} kustomize.toolkit.fluxcd.io/prune=disabled");
    let check = plane.capstan(&["check", "--timeout", "1s"]).await.fails();
    assert!(
        check
            .stderr
            .contains("It was bootstrapped: the Kustomization flux-system/flux-system")
            && check.stderr.contains(&bootstrap_line),
        "{}",
        check.stderr
    );
    let refused = plane.capstan(&["install", "--wait=false"]).await.fails();
    for said in [
        &annotate,
        DELETE_NAMESPACED,
        DELETE_CLUSTER,
        &bootstrap_line,
    ] {
        assert!(refused.stderr.contains(said), "{said}:\n{}", refused.stderr);
    }
    let mut bootstrap = support::capstan(
        &plane.kubeconfig,
        &[
            "bootstrap",
            "git",
            "--url",
            &url,
            "--branch",
            "main",
            "--path",
            "clusters/dev",
            "--allow-insecure-http",
            "--timeout",
            "2m",
        ],
    );
    bootstrap.current_dir(plane.dir.path());
    let refused = Run::from(bootstrap.output().await.unwrap()).fails();
    assert!(
        refused
            .stderr
            .contains("refusing to bootstrap next to Flux's controllers"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        capstan_testkit::git(&git.bare(), &["rev-parse", "main"]),
        first
    );

    // The documented steps.
    let words = |line: &str| {
        line.split(' ')
            .skip(1)
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    for step in [annotate.as_str(), DELETE_NAMESPACED, DELETE_CLUSTER] {
        let args = words(step);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        plane.kubectl(&args).await.ok();
    }
    let running = tokio::spawn(async move { Run::from(bootstrap.output().await.unwrap()) });
    // The controller Deployment `capstan bootstrap` installs cannot run here: `capstan
    // controller` stands in for it, started once the push is done, as the Deployment would.
    let pushed = eventually(Duration::from_secs(60), "the bootstrap push", || async {
        let head = capstan_testkit::git(&git.bare(), &["rev-parse", "main"]);
        (head != first).then_some(head)
    })
    .await;
    let _controller = plane.controller();
    let _log = LogOnPanic(plane.dir.path().join("controller.log"));
    let bootstrapped = running.await.unwrap().ok();
    assert!(
        bootstrapped.stderr.contains("pushed component manifests"),
        "{}",
        bootstrapped.stderr
    );
    let components = capstan_testkit::git(
        &git.bare(),
        &["show", "main:clusters/dev/flux-system/gotk-components.yaml"],
    );
    assert!(
        components.contains("capstan-controller") && !components.contains("ghcr.io/fluxcd"),
        "{components}"
    );
    // Two commits: the components, then the sync objects.
    let head = capstan_testkit::git(&git.bare(), &["rev-parse", "main"]);
    assert_ne!(head, pushed);
    let revision = format!("main@sha1:{head}");
    let kustomization = plane
        .reconciled("flux-system", |status| {
            status["lastAppliedRevision"] == revision.as_str()
        })
        .await;
    assert_migrated(&plane, &uids, &kustomization).await;
}
