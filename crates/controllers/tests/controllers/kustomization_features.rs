//! Kustomization features beyond apply/prune: source watching, `status.history`,
//! `retryInterval`, report-only drift mode, `kubeConfig`, `serviceAccountName` and `dependsOn`
//! triggers, end to end against the embedded control plane and a Git server.

use std::time::{Duration, Instant};

use capstan_api::Kustomization;
use capstan_apiserver::{ApiServer, Config};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

use crate::kustomization::{
    KustomizeController, NAMESPACE, condition, config_map, create_kustomization, deployment,
    kustomizations, ready, request_reconcile, setup, wait_ready,
};
use crate::support::{RecordingProxy, client_for, eventually};

/// Asserts that the `settings` ConfigMap says `env: prod`, applied less than 20 s after
/// `started`.
async fn assert_prod_applied_within_20s(env: &crate::support::Env, started: Instant) {
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "applied after {:?}",
        started.elapsed()
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert_eq!(
        config_maps.get("settings").await.unwrap().data.unwrap()["env"],
        "prod"
    );
}

fn config_map_with(name: &str, env: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\ndata:\n  env: {env}\n"
    )
}

const WIDGET: &str = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: gadget\n  namespace: apps\nspec:\n  size: 3\n";

fn widget_crd() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                }}},
            }],
        },
    })
}

fn history(object: &Kustomization) -> Vec<capstan_api::meta::Snapshot> {
    object
        .status
        .as_ref()
        .map(|s| s.history.clone())
        .unwrap_or_default()
}

async fn get(env: &crate::support::Env, name: &str) -> Kustomization {
    kustomizations(env).get(name).await.unwrap()
}

/// A new source revision is applied within seconds although the Kustomization's interval is
/// an hour; every applied digest gets its own history entry.
#[tokio::test]
async fn source_revisions_trigger_reconciles_and_are_recorded_in_history() {
    let (env, upstream, _controller, first) =
        setup(&[("app/config.yaml", &config_map_with("settings", "dev"))]).await;
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "app", "interval": "1h"}),
    )
    .await;
    let object = wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;
    let entries = history(&object);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries[0].digest.starts_with("sha256:"), "{entries:?}");
    assert_eq!(entries[0].last_reconciled_status, "ReconciliationSucceeded");
    assert_eq!(entries[0].total_reconciliations, 1);
    assert_eq!(
        entries[0].metadata.get("revision"),
        Some(&format!("main@sha1:{first}"))
    );
    assert!(
        capstan_api::parse_go_duration(&entries[0].last_reconciled_duration).is_ok(),
        "{entries:?}"
    );

    // A new commit, and only the source is asked to reconcile.
    let second = upstream.commit(
        &[("app/config.yaml", &config_map_with("settings", "prod"))],
        "second",
    );
    let started = Instant::now();
    request_reconcile(&env.git_repositories(NAMESPACE), "repo", "t1").await;
    let expected = format!("Applied revision: main@sha1:{second}");
    let object = wait_ready(&env, "app", "the new revision applied", |_, _, message| {
        message == expected
    })
    .await;
    assert_prod_applied_within_20s(&env, started).await;
    let entries = history(&object);
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(
        entries[0].metadata.get("revision"),
        Some(&format!("main@sha1:{second}"))
    );
    assert_eq!(
        entries[1].metadata.get("revision"),
        Some(&format!("main@sha1:{first}"))
    );
    assert_ne!(entries[0].digest, entries[1].digest);

    // Reconciling the same objects again counts in the same entry.
    request_reconcile(&kustomizations(&env), "app", "again").await;
    let object = eventually(Duration::from_secs(20), "a second reconciliation", || {
        let api = kustomizations(&env);
        async move {
            let object = api.get("app").await.ok()?;
            (history(&object).first()?.total_reconciliations == 2).then_some(object)
        }
    })
    .await;
    assert_eq!(history(&object).len(), 2);
}

/// Failures are retried after `spec.retryInterval`, not with the (faster) backoff, and the
/// history counts each failed attempt.
#[tokio::test]
async fn failures_are_retried_after_the_retry_interval() {
    let (env, _upstream, _controller, _) = setup(&[
        ("app/config.yaml", &config_map()),
        ("app/widget.yaml", WIDGET),
    ])
    .await;
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "app", "interval": "1h", "retryInterval": "2s"}),
    )
    .await;
    let object = wait_ready(&env, "app", "ReconciliationFailed", |status, reason, _| {
        status == "False" && reason == "ReconciliationFailed"
    })
    .await;
    let (_, _, message) = ready(&object).unwrap();
    assert!(message.contains("Widget/apps/gadget"), "{message}");
    assert_eq!(
        history(&object)[0].last_reconciled_status,
        "ReconciliationFailed"
    );
    // Three retries in a row, timed by the controller's own history (not by when the test sees
    // them): two retryIntervals (2 s) apart at the least, where the runtime backoff of these tests
    // (200 ms doubling) would take 1.4 s.
    let mut retries = Vec::new();
    let mut seen = history(&get(&env, "app").await)[0].total_reconciliations;
    while retries.len() < 3 {
        let snapshot = eventually(Duration::from_secs(30), "a retry", || {
            let env = &env;
            async move {
                let snapshot = history(&get(env, "app").await)[0].clone();
                (snapshot.total_reconciliations > seen).then_some(snapshot)
            }
        })
        .await;
        seen = snapshot.total_reconciliations;
        retries.push(snapshot.last_reconciled.0);
    }
    let apart = retries[2].as_second() - retries[0].as_second();
    assert!(
        apart >= 3,
        "three retries within {apart} s with retryInterval 2s"
    );

    // Once the CRD exists, the next retry succeeds without any other trigger.
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    crds.patch(
        "widgets.example.com",
        &PatchParams::apply("test").force(),
        &Patch::Apply(&widget_crd()),
    )
    .await
    .unwrap();
    let started = Instant::now();
    let object = wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let statuses: Vec<String> = history(&object)
        .iter()
        .map(|s| s.last_reconciled_status.clone())
        .collect();
    assert_eq!(
        statuses,
        ["ReconciliationSucceeded", "ReconciliationFailed"]
    );
}

const SECRET: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: apps\nstringData:\n  password: from-git\n";

async fn drift_events(env: &crate::support::Env) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(env.client.clone(), NAMESPACE);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("DriftDetected"))
        .collect()
}

/// `capstan.dev/drift: report` reports drift (ids and paths, no values) and missing objects
/// without changing anything; removing it corrects the cluster on the next reconcile.
#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn report_only_drift_mode_reports_without_changing() {
    let (env, _upstream, _controller, _) = setup(&[
        ("app/config.yaml", &config_map()),
        ("app/secret.yaml", SECRET),
        ("app/deployment.yaml", &deployment("nginx:1.25", "")),
    ])
    .await;
    create_kustomization(&env, "app", serde_json::json!({"path": "app"})).await;
    wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;

    // Switch to report-only, then change things by hand.
    kustomizations(&env)
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({
                "metadata": {"annotations": {"capstan.dev/drift": "report"}}
            })),
        )
        .await
        .unwrap();
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NAMESPACE);
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), NAMESPACE);
    config_maps
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"data": {"env": "changed-by-hand"}})),
        )
        .await
        .unwrap();
    secrets
        .patch(
            "creds",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"stringData": {"password": "hand-secret"}})),
        )
        .await
        .unwrap();
    deployments
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    request_reconcile(&kustomizations(&env), "app", "report").await;

    // The annotation change alone may trigger a reconcile between the edits above: wait for
    // the report of the last edit (the deleted Deployment).
    let object = eventually(Duration::from_secs(30), "the drift report", || {
        let api = kustomizations(&env);
        async move {
            let object = api.get("app").await.ok()?;
            condition(&object, "Drifted")
                .is_some_and(|c| c.0 == "True" && c.2.contains("Deployment/apps/web missing"))
                .then_some(object)
        }
    })
    .await;
    let (_, reason, message) = condition(&object, "Drifted").unwrap();
    assert_eq!(reason, "DriftDetected");
    assert!(
        message.contains("ConfigMap/apps/settings drifted at data.env"),
        "{message}"
    );
    assert!(
        message.contains("Secret/apps/creds drifted at data.password"),
        "{message}"
    );
    assert!(message.contains("Deployment/apps/web missing"), "{message}");
    for value in [
        "changed-by-hand",
        "hand-secret",
        "from-git",
        "ZnJvbS1naXQ",
        "aGFuZC1zZWNyZXQ",
    ] {
        assert!(!message.contains(value), "a value leaked: {message}");
    }
    let (status, _, ready_message) = ready(&object).unwrap();
    assert_eq!(status, "True");
    assert!(ready_message.contains("report only"), "{ready_message}");

    let events = eventually(Duration::from_secs(10), "a DriftDetected event", || {
        let env = &env;
        async move {
            let events = drift_events(env).await;
            (!events.is_empty()).then_some(events)
        }
    })
    .await;
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    let note = events[0].note.clone().unwrap_or_default();
    assert!(note.contains("ConfigMap/apps/settings"), "{note}");
    assert!(!note.contains("hand-secret") && !note.contains("changed-by-hand"));

    // Nothing was changed or created.
    assert_eq!(
        config_maps.get("settings").await.unwrap().data.unwrap()["env"],
        "changed-by-hand"
    );
    assert!(deployments.get_opt("web").await.unwrap().is_none());

    // Report mode off: the next reconcile corrects everything.
    kustomizations(&env)
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({
                "metadata": {"annotations": {"capstan.dev/drift": null}}
            })),
        )
        .await
        .unwrap();
    request_reconcile(&kustomizations(&env), "app", "correct").await;
    eventually(Duration::from_secs(30), "the drift corrected", || {
        let config_maps = config_maps.clone();
        let deployments = deployments.clone();
        async move {
            let data = config_maps.get("settings").await.ok()?.data?;
            let web = deployments.get_opt("web").await.ok()??;
            (data["env"] == "dev").then_some(web)
        }
    })
    .await;
    let secret = secrets.get("creds").await.unwrap().data.unwrap();
    assert_eq!(secret["password"].0, b"from-git");
    let object = wait_ready(&env, "app", "Applied revision", |_, _, message| {
        message.starts_with("Applied revision")
    })
    .await;
    assert!(condition(&object, "Drifted").is_none());
}

/// `spec.kubeConfig.secretRef` applies to the remote cluster of the kubeconfig; the status
/// stays local. Exec credential plugins are refused, naming the field.
#[tokio::test]
async fn kube_config_applies_to_a_remote_cluster() {
    let (env, _upstream, _controller, _) = setup(&[("app/config.yaml", &config_map())]).await;
    let remote = ApiServer::start(Config::default()).await.unwrap();
    let remote_client = client_for(&remote.url()).await;
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}})).unwrap();
    Api::<Namespace>::all(remote_client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NAMESPACE);
    let secret = |name: &str, key: &str, value: String| -> Secret {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": NAMESPACE},
            "stringData": {key: value},
        }))
        .unwrap()
    };
    secrets
        .create(
            &PostParams::default(),
            &secret("remote", "value", remote.kubeconfig()),
        )
        .await
        .unwrap();
    create_kustomization(
        &env,
        "remote",
        serde_json::json!({"path": "app", "prune": true, "kubeConfig": {"secretRef": {"name": "remote"}}}),
    )
    .await;
    let object = wait_ready(&env, "remote", "Ready=True", |status, _, _| {
        status == "True"
    })
    .await;
    assert!(object.status.unwrap().inventory.is_some());
    let remote_maps: Api<ConfigMap> = Api::namespaced(remote_client, NAMESPACE);
    assert!(remote_maps.get_opt("settings").await.unwrap().is_some());
    let local_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert!(
        local_maps.get_opt("settings").await.unwrap().is_none(),
        "nothing lands on the local cluster"
    );

    // Deleting the Kustomization prunes on the remote cluster.
    kustomizations(&env)
        .delete("remote", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(20),
        "the remote ConfigMap pruned",
        || {
            let remote_maps = remote_maps.clone();
            async move {
                remote_maps
                    .get_opt("settings")
                    .await
                    .ok()?
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;

    // An exec plugin is refused.
    let exec = remote.kubeconfig().replace(
        "users:\n",
        "users:\n- name: plugin\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/true\n",
    );
    assert!(exec.contains("command: /bin/true"), "{exec}");
    secrets
        .create(&PostParams::default(), &secret("exec", "value.yaml", exec))
        .await
        .unwrap();
    create_kustomization(
        &env,
        "exec",
        serde_json::json!({"path": "app", "kubeConfig": {"secretRef": {"name": "exec"}}}),
    )
    .await;
    let object = wait_ready(&env, "exec", "Ready=False", |status, _, _| {
        status == "False"
    })
    .await;
    let (_, reason, message) = ready(&object).unwrap();
    assert_eq!(reason, "InvalidKubeConfig");
    assert!(message.contains("spec.kubeConfig.secretRef"), "{message}");
    assert!(message.contains("users[plugin].user.exec"), "{message}");
    assert_eq!(
        condition(&object, "Stalled").map(|c| c.0),
        Some("True".to_owned())
    );
}

/// `spec.serviceAccountName` sends every apply, prune and health request with the
/// ServiceAccount's impersonation headers (seen through a recording proxy), so the control
/// plane's RBAC decides: without a RoleBinding the apply is forbidden and `Ready=False` names
/// the object; once the ServiceAccount is bound, the same Kustomization applies.
#[tokio::test]
async fn service_account_requests_are_impersonated_and_authorized() {
    let (env, _upstream, controller, _) = setup(&[("app/config.yaml", &config_map())]).await;
    drop(controller);
    let upstream = env.api_url().trim_start_matches("http://").to_owned();
    let proxy = RecordingProxy::start(upstream).await;
    let _controller = KustomizeController::start_with(client_for(&proxy.url).await);
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "app", "serviceAccountName": "deployer", "wait": true}),
    )
    .await;
    let object = wait_ready(&env, "app", "Ready=False", |status, _, _| status == "False").await;
    let (_, reason, message) = ready(&object).unwrap();
    assert_eq!(reason, "ReconciliationFailed");
    assert!(message.contains("ConfigMap/apps/settings"), "{message}");
    assert!(message.contains("forbidden"), "{message}");
    let sent = proxy.sent_lowercase();
    assert!(
        sent.contains("impersonate-user: system:serviceaccount:apps:deployer\r\n"),
        "no impersonation header sent"
    );
    assert!(
        !sent.contains("impersonate-group:"),
        "only the user is impersonated; the API server adds the ServiceAccount's groups"
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert!(config_maps.get_opt("settings").await.unwrap().is_none());

    // Bind the ServiceAccount to a Role allowing ConfigMaps in its namespace.
    let rbac = |body: serde_json::Value| async {
        let kind = body["kind"].as_str().unwrap().to_owned();
        let resource = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            &kind,
        ));
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(env.client.clone(), NAMESPACE, &resource);
        let object: kube::api::DynamicObject = serde_json::from_value(body).unwrap();
        api.create(&PostParams::default(), &object).await.unwrap();
    };
    rbac(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "deployer", "namespace": NAMESPACE},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}],
    }))
    .await;
    rbac(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "deployer", "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "deployer"},
        "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": NAMESPACE}],
    }))
    .await;
    request_reconcile(&kustomizations(&env), "app", "bound").await;
    wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;
    assert!(config_maps.get_opt("settings").await.unwrap().is_some());
    let sent = proxy.sent_lowercase();
    assert!(sent.contains("patch /api/v1/namespaces/apps/configmaps/settings"));
}

/// A dependent waits for its dependency, applies nothing meanwhile, and is reconciled as soon
/// as the dependency becomes Ready (its own retry interval is an hour).
#[tokio::test]
async fn depends_on_orders_and_triggers_dependents() {
    let (env, _upstream, _controller, _) = setup(&[
        ("base/config.yaml", &config_map_with("base", "dev")),
        ("app/config.yaml", &config_map_with("app", "dev")),
    ])
    .await;
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "app", "interval": "1h", "dependsOn": [{"name": "base"}]}),
    )
    .await;
    wait_ready(&env, "app", "DependencyNotReady", |status, reason, _| {
        status == "False" && reason == "DependencyNotReady"
    })
    .await;
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert!(config_maps.get_opt("app").await.unwrap().is_none());

    create_kustomization(
        &env,
        "base",
        serde_json::json!({"path": "base", "interval": "1h"}),
    )
    .await;
    let base = wait_ready(&env, "base", "base Ready", |status, _, _| status == "True").await;
    let started = Instant::now();
    let app = wait_ready(&env, "app", "app Ready", |status, _, _| status == "True").await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let became_ready = |object: &Kustomization| {
        object
            .status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .unwrap()
            .last_transition_time
            .0
    };
    assert!(became_ready(&base) <= became_ready(&app));
    assert!(config_maps.get_opt("app").await.unwrap().is_some());
}

/// Pushes `files` to `url:tag` as a Flux OCI artifact with origin revision `origin`.
async fn push_oci(url: &str, tag: &str, files: &[(&str, &str)], origin: &str) {
    use capstan_source::oci::{self, Created, PushOptions, RegistryOptions};
    let dir = tempfile::tempdir().unwrap();
    capstan_testkit::write_files(dir.path(), files);
    let options = PushOptions {
        source: "https://github.com/example/fleet".to_owned(),
        revision: origin.to_owned(),
        created: Created::Reproducible,
        ..PushOptions::default()
    };
    let registry = RegistryOptions {
        insecure: true,
        ..RegistryOptions::default()
    };
    oci::push(dir.path(), &format!("{url}:{tag}"), &options, &registry)
        .await
        .unwrap();
}

/// An OCIRepository's new artifact (same tag, new content) is applied within seconds with an
/// hour-long interval; the origin revision is recorded in the status and the history.
#[tokio::test]
async fn oci_source_revisions_trigger_reconciles() {
    let env = crate::support::Env::start().await;
    env.namespace(NAMESPACE).await;
    let registry = crate::support::Registry::start().await;
    let url = registry.url("fleet");
    push_oci(
        &url,
        "latest",
        &[("app/config.yaml", &config_map_with("settings", "dev"))],
        "main@sha1:1111111111111111111111111111111111111111",
    )
    .await;
    let sources: Api<capstan_api::OCIRepository> = Api::namespaced(env.client.clone(), NAMESPACE);
    let source: capstan_api::OCIRepository = serde_json::from_value(serde_json::json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "OCIRepository",
        "metadata": {"name": "fleet", "namespace": NAMESPACE},
        "spec": {"url": url, "interval": "1h", "insecure": true, "ref": {"tag": "latest"}},
    }))
    .unwrap();
    sources
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    let _controller = KustomizeController::start(&env);
    create_kustomization(
        &env,
        "app",
        serde_json::json!({
            "path": "app", "interval": "1h",
            "sourceRef": {"kind": "OCIRepository", "name": "fleet"},
        }),
    )
    .await;
    wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;

    let origin = "main@sha1:2222222222222222222222222222222222222222";
    push_oci(
        &url,
        "latest",
        &[("app/config.yaml", &config_map_with("settings", "prod"))],
        origin,
    )
    .await;
    let started = Instant::now();
    request_reconcile(&sources, "fleet", "t1").await;
    let object = eventually(Duration::from_secs(30), "the new artifact applied", || {
        let api = kustomizations(&env);
        async move {
            let object = api.get("app").await.ok()?;
            (object
                .status
                .as_ref()?
                .last_applied_origin_revision
                .as_deref()
                == Some(origin))
            .then_some(object)
        }
    })
    .await;
    assert_prod_applied_within_20s(&env, started).await;
    let entries = history(&object);
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(
        entries[0]
            .metadata
            .get("originRevision")
            .map(String::as_str),
        Some(origin)
    );
    assert!(entries[0].metadata["revision"].starts_with("latest@sha256:"));
}

/// The `lastAppliedRevision` of a Kustomization.
fn applied_revision(object: &Kustomization) -> Option<String> {
    object.status.as_ref()?.last_applied_revision.clone()
}

/// A new commit reaches both Kustomizations of one source at once, but the dependent waits
/// until the one it depends on has applied that very revision (Flux's "revision is not up to
/// date"), even while the dependency is still Ready for the previous revision.
#[tokio::test]
async fn dependents_wait_for_their_dependency_to_apply_the_same_revision() {
    let slow = deployment(
        "nginx:1.25",
        "  annotations:\n    sim.capstan.dev/rollout-delay: \"4\"\n",
    );
    let (env, upstream, _controller, first) = setup(&[
        ("base/deployment.yaml", &deployment("nginx:1.24", "")),
        ("app/config.yaml", &config_map_with("app", "v1")),
    ])
    .await;
    create_kustomization(
        &env,
        "base",
        serde_json::json!({"path": "base", "interval": "1h", "wait": true, "timeout": "1m"}),
    )
    .await;
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "app", "interval": "1h", "dependsOn": [{"name": "base"}]}),
    )
    .await;
    let first = format!("main@sha1:{first}");
    for name in ["base", "app"] {
        wait_ready(
            &env,
            name,
            "Ready at the first commit",
            |status, _, message| status == "True" && message.ends_with(&first),
        )
        .await;
    }

    // The second commit makes the dependency's rollout take 4 s.
    let second = upstream.commit(
        &[
            ("base/deployment.yaml", &slow),
            ("app/config.yaml", &config_map_with("app", "v2")),
        ],
        "second",
    );
    let second = format!("main@sha1:{second}");
    request_reconcile(&env.git_repositories(NAMESPACE), "repo", "second").await;
    let api = kustomizations(&env);
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let app = api.get("app").await.unwrap();
        if applied_revision(&app).as_deref() == Some(second.as_str()) {
            let base = api.get("base").await.unwrap();
            assert_eq!(
                applied_revision(&base).as_deref(),
                Some(second.as_str()),
                "the dependent applied the new revision before its dependency did"
            );
            break;
        }
        if let Some((_, reason, message)) = ready(&app)
            && reason == "DependencyNotReady"
        {
            assert!(
                message.contains("revision is not up to date") || message.contains("is not ready"),
                "{message}"
            );
        }
        assert!(
            Instant::now() < deadline,
            "the dependent never applied the new revision: app {:?}, base {:?} at {:?}",
            ready(&app),
            ready(&api.get("base").await.unwrap()),
            applied_revision(&api.get("base").await.unwrap())
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
