//! The Kustomization controller end to end: a GitRepository serves a kustomize tree from a Git
//! server, the Kustomization controller (started here beside the GitRepository one) applies it
//! to the embedded control plane.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};

use crate::support::eventually;

pub(crate) use crate::kustomize_support::*;

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn applies_prunes_follows_new_commits_and_deletes() {
    let kustomization = "resources: [config.yaml, deployment.yaml]\n";
    let (env, upstream, _controller, first) = setup(&[
        ("app/kustomization.yaml", kustomization),
        ("app/config.yaml", &config_map()),
        ("app/deployment.yaml", &deployment("nginx:1.25", "")),
    ])
    .await;
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "./app", "prune": true, "wait": true, "timeout": "30s"}),
    )
    .await;

    let expected = format!("Applied revision: main@sha1:{first}");
    let object = wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;
    assert_eq!(
        ready(&object).unwrap(),
        (
            "True".to_owned(),
            "ReconciliationSucceeded".to_owned(),
            expected
        )
    );
    assert_eq!(
        condition(&object, "Healthy").map(|c| c.0),
        Some("True".to_owned())
    );
    let status = object.status.clone().unwrap();
    assert_eq!(
        status.last_applied_revision,
        Some(format!("main@sha1:{first}"))
    );
    assert_eq!(status.last_attempted_revision, status.last_applied_revision);
    let mut ids = inventory_ids(&object);
    ids.sort();
    assert_eq!(
        ids,
        ["apps_settings__ConfigMap", "apps_web_apps_Deployment"]
    );

    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), NAMESPACE);
    let settings = config_maps.get("settings").await.unwrap();
    let labels = settings.metadata.labels.unwrap();
    assert_eq!(labels["kustomize.toolkit.fluxcd.io/name"], "app");
    assert_eq!(labels["kustomize.toolkit.fluxcd.io/namespace"], NAMESPACE);
    let web = deployments.get("web").await.unwrap();
    assert!(
        web.metadata
            .managed_fields
            .unwrap()
            .iter()
            .any(|m| m.manager.as_deref() == Some("kustomize-controller"))
    );

    // A new commit drops the ConfigMap and changes the image.
    let second = upstream.commit(
        &[
            ("app/kustomization.yaml", "resources: [deployment.yaml]\n"),
            ("app/deployment.yaml", &deployment("nginx:1.27", "")),
        ],
        "second",
    );
    request_reconcile(&env.git_repositories(NAMESPACE), "repo", "t1").await;
    wait_source_revision(&env, &format!("main@sha1:{second}")).await;
    request_reconcile(&kustomizations(&env), "app", "t1").await;
    let second_message = format!("Applied revision: main@sha1:{second}");
    let object = wait_ready(
        &env,
        "app",
        "the second revision applied",
        |_, _, message| message == second_message,
    )
    .await;
    assert_eq!(
        object.status.unwrap().inventory.unwrap().entries.len(),
        1,
        "the inventory follows the build"
    );
    assert!(
        config_maps.get_opt("settings").await.unwrap().is_none(),
        "the ConfigMap removed from Git is pruned"
    );
    let web = deployments.get("web").await.unwrap();
    let web = serde_json::to_value(&web).unwrap();
    assert_eq!(
        web.pointer("/spec/template/spec/containers/0/image"),
        Some(&serde_json::json!("nginx:1.27"))
    );

    // Deleting the Kustomization prunes what it applied (MirrorPrune with prune: true).
    kustomizations(&env)
        .delete("app", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(20),
        "the Deployment to be pruned",
        || {
            let deployments = deployments.clone();
            async move {
                deployments
                    .get_opt("web")
                    .await
                    .unwrap()
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
    eventually(Duration::from_secs(20), "the Kustomization to go", || {
        let api = kustomizations(&env);
        async move { api.get_opt("app").await.unwrap().is_none().then_some(()) }
    })
    .await;
}

#[tokio::test]
async fn orphan_keeps_objects_and_overrides_apply() {
    let (env, _upstream, _controller, _) = setup(&[
        ("app/config.yaml", &config_map()),
        ("app/notes.txt", "not a manifest\n"),
    ])
    .await;
    // No kustomization.yaml: one is generated. Overrides go through an overlay.
    create_kustomization(
        &env,
        "app",
        serde_json::json!({
            "path": "app",
            "prune": true,
            "deletionPolicy": "Orphan",
            "namePrefix": "p-",
            "commonMetadata": {"labels": {"team": "web"}},
            "postBuild": {"substitute": {"unused": "x"}},
        }),
    )
    .await;
    wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    let settings = config_maps.get("p-settings").await.unwrap();
    assert_eq!(settings.metadata.labels.unwrap()["team"], "web");

    // Drift made by someone else is corrected on the next reconcile.
    config_maps
        .patch(
            "p-settings",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"data": {"env": "changed-by-hand"}})),
        )
        .await
        .unwrap();
    request_reconcile(&kustomizations(&env), "app", "drift").await;
    eventually(Duration::from_secs(20), "the drift to be corrected", || {
        let config_maps = config_maps.clone();
        async move {
            let data = config_maps.get("p-settings").await.ok()?.data?;
            (data.get("env").map(String::as_str) == Some("dev")).then_some(())
        }
    })
    .await;

    kustomizations(&env)
        .delete("app", &DeleteParams::default())
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "the Kustomization to go", || {
        let api = kustomizations(&env);
        async move { api.get_opt("app").await.unwrap().is_none().then_some(()) }
    })
    .await;
    assert!(
        config_maps.get_opt("p-settings").await.unwrap().is_some(),
        "Orphan keeps the applied objects"
    );

    // WaitForTermination deletes even without prune, and the objects are gone before the
    // Kustomization is.
    create_kustomization(
        &env,
        "waiter",
        serde_json::json!({"path": "app", "namePrefix": "w-", "deletionPolicy": "WaitForTermination"}),
    )
    .await;
    wait_ready(&env, "waiter", "Ready=True", |status, _, _| {
        status == "True"
    })
    .await;
    assert!(config_maps.get_opt("w-settings").await.unwrap().is_some());
    kustomizations(&env)
        .delete("waiter", &DeleteParams::default())
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "the Kustomization to go", || {
        let api = kustomizations(&env);
        async move { api.get_opt("waiter").await.unwrap().is_none().then_some(()) }
    })
    .await;
    assert!(config_maps.get_opt("w-settings").await.unwrap().is_none());
}

#[tokio::test]
async fn a_hanging_rollout_fails_the_health_check_within_the_timeout() {
    let (env, _upstream, _controller, _) = setup(&[(
        "app/deployment.yaml",
        &deployment(
            "nginx:1.25",
            "  annotations:\n    sim.capstan.dev/rollout: hang\n",
        ),
    )])
    .await;
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "app", "wait": true, "timeout": "3s"}),
    )
    .await;
    let object = wait_ready(
        &env,
        "app",
        "Ready=False HealthCheckFailed",
        |status, reason, _| status == "False" && reason == "HealthCheckFailed",
    )
    .await;
    let (_, _, message) = ready(&object).unwrap();
    assert!(message.contains("Deployment/apps/web"), "{message}");
    assert_eq!(
        condition(&object, "Healthy").map(|c| (c.0, c.1)),
        Some(("False".to_owned(), "HealthCheckFailed".to_owned()))
    );
    // The objects were applied even though they are not healthy.
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert!(deployments.get_opt("web").await.unwrap().is_some());
    assert!(object.status.unwrap().last_applied_revision.is_none());
}

#[tokio::test]
async fn build_errors_and_missing_sources_are_reported() {
    let widget =
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: gadget\n  namespace: apps\n";
    let (env, _upstream, _controller, _) = setup(&[
        ("app/kustomization.yaml", "resources: [\n  not yaml: {\n"),
        ("mixed/config.yaml", &config_map()),
        ("mixed/widget.yaml", widget),
    ])
    .await;
    create_kustomization(&env, "broken", serde_json::json!({"path": "app"})).await;
    let object = wait_ready(
        &env,
        "broken",
        "Ready=False BuildFailed",
        |status, reason, _| status == "False" && reason == "BuildFailed",
    )
    .await;
    let (_, _, message) = ready(&object).unwrap();
    assert!(message.contains("app/kustomization.yaml"), "{message}");

    create_kustomization(
        &env,
        "orphaned",
        serde_json::json!({"path": "app", "sourceRef": {"kind": "GitRepository", "name": "absent"}}),
    )
    .await;
    let object = wait_ready(
        &env,
        "orphaned",
        "Ready=False ArtifactFailed",
        |status, reason, _| status == "False" && reason == "ArtifactFailed",
    )
    .await;
    let (_, _, message) = ready(&object).unwrap();
    assert_eq!(message, "Source 'GitRepository/apps/absent' not found");

    create_kustomization(
        &env,
        "dependent",
        serde_json::json!({"path": "app", "dependsOn": [{"name": "broken"}]}),
    )
    .await;
    let object = wait_ready(
        &env,
        "dependent",
        "Ready=False DependencyNotReady",
        |status, reason, _| status == "False" && reason == "DependencyNotReady",
    )
    .await;
    let (_, _, message) = ready(&object).unwrap();
    assert_eq!(message, "dependency 'apps/broken' is not ready");

    // An object whose dry-run fails is reported by name, and (as in Flux) none of its stage
    // is applied: the inventory stays empty.
    create_kustomization(
        &env,
        "mixed",
        serde_json::json!({"path": "mixed", "prune": true}),
    )
    .await;
    let object = wait_ready(
        &env,
        "mixed",
        "Ready=False ReconciliationFailed",
        |status, reason, _| status == "False" && reason == "ReconciliationFailed",
    )
    .await;
    let (_, _, message) = ready(&object).unwrap();
    assert!(
        message.contains("Widget/apps/gadget: dry-run failed: no matches for kind"),
        "{message}"
    );
    assert!(message.contains("(0 applied)"), "{message}");
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert!(config_maps.get_opt("settings").await.unwrap().is_none());
    assert!(inventory_ids(&object).is_empty());
}

#[tokio::test]
async fn post_build_substitution_applies_flux_string_functions() {
    let settings = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${{CLUSTER_NAME,,}}-settings\n  namespace: {NAMESPACE}\ndata:\n  cluster: ${{CLUSTER_NAME,,}}\n  shout: ${{CLUSTER_NAME^^}}\n  version: ${{VERSION#v}}\n  image: ghcr.io/lab/app:${{VERSION#v}}\n  minor: ${{VERSION%.*}}\n  region: ${{REGION:=eu-${{ZONE:=west}}}}\n  dashed: ${{CLUSTER_NAME//-/_}}\n  literal: $${{CLUSTER_NAME}}\n"
    );
    let broken = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\n  namespace: {NAMESPACE}\ndata:\n  token: ${{TOKEN}}\n  bad: ${{CLUSTER_NAME,,x}}\n"
    );
    let (env, _upstream, _controller, _) = setup(&[
        ("fleet/settings.yaml", &settings),
        ("broken/settings.yaml", &broken),
    ])
    .await;
    let substitute = serde_json::json!({
        "CLUSTER_NAME": "Home-Lab", "VERSION": "v1.4.2", "TOKEN": "MARKER-s3cr3t",
    });
    create_kustomization(
        &env,
        "fleet",
        serde_json::json!({"path": "fleet", "prune": true, "postBuild": {"substitute": substitute}}),
    )
    .await;
    create_kustomization(
        &env,
        "broken",
        serde_json::json!({"path": "broken", "prune": true, "postBuild": {"substitute": substitute}}),
    )
    .await;

    wait_ready(&env, "fleet", "Ready=True", |status, _, _| status == "True").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    let data = config_maps
        .get("home-lab-settings")
        .await
        .unwrap()
        .data
        .unwrap();
    for (key, expected) in [
        ("cluster", "home-lab"),
        ("shout", "HOME-LAB"),
        ("version", "1.4.2"),
        ("image", "ghcr.io/lab/app:1.4.2"),
        ("minor", "v1.4"),
        ("region", "eu-west"),
        ("dashed", "Home_Lab"),
        ("literal", "${CLUSTER_NAME}"),
    ] {
        assert_eq!(data[key], expected, "{key}");
    }

    // A malformed expression fails the build, naming it, never a value.
    let object = wait_ready(&env, "broken", "Ready=False", |status, _, message| {
        status == "False" && message.contains("bad substitution")
    })
    .await;
    let (_, _, message) = ready(&object).unwrap();
    assert!(message.contains("${CLUSTER_NAME,,x}"), "{message}");
    assert!(!message.contains("MARKER"), "{message}");
    assert!(config_maps.get_opt("broken").await.unwrap().is_none());
}

/// As Flux (fluxcd/pkg ssa `ApplyAllStaged`): one object whose dry-run fails (here a kind
/// nobody serves, as an `OCIRepository` of an API version the cluster lacks) stops its whole
/// stage: nothing of that stage is written, the failure names the object, and nothing is pruned.
#[tokio::test]
async fn one_invalid_object_applies_none_of_its_stage_and_prunes_nothing() {
    let (env, upstream, _controller, _) = setup(&[("app/config.yaml", &config_map())]).await;
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "./app", "prune": true}),
    )
    .await;
    wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;

    // The next revision drops the ConfigMap and adds a valid one beside an invalid object.
    let ghost = format!(
        "apiVersion: nope.example.com/v1beta2\nkind: Ghost\nmetadata:\n  name: g\n  namespace: {NAMESPACE}\n"
    );
    let other = config_map().replace("name: settings", "name: other");
    let second = upstream.commit(
        &[("app/config.yaml", &ghost), ("app/other.yaml", &other)],
        "second",
    );
    request_reconcile(&env.git_repositories(NAMESPACE), "repo", "t1").await;
    wait_source_revision(&env, &format!("main@sha1:{second}")).await;
    request_reconcile(&kustomizations(&env), "app", "t1").await;
    let object = wait_ready(&env, "app", "Ready=False", |status, _, message| {
        status == "False" && message.contains("Ghost")
    })
    .await;
    let (_, reason, message) = ready(&object).unwrap();
    assert_eq!(reason, "ReconciliationFailed");
    assert!(
        message.starts_with("apply failed for 1 of 2 objects (0 applied): "),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "Ghost/{NAMESPACE}/g: dry-run failed: no matches for kind \"Ghost\""
        )),
        "{message}"
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert!(
        config_maps.get_opt("other").await.unwrap().is_none(),
        "nothing of the failed stage is written"
    );
    assert!(
        config_maps.get_opt("settings").await.unwrap().is_some(),
        "nothing is pruned when the apply failed"
    );
}

/// As kustomize-controller: what an apply or a prune changed is announced in a `Normal` Event
/// (reason `Progressing`, Flux's Ready reason while it applies), one `Kind/namespace/name
/// <action>` line per object, with the revision in the metadata; a reconcile that changes
/// nothing publishes none.
#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn what_changed_is_announced_in_an_event() {
    use capstan_controllers::runtime::events::REVISION_KEY;
    use capstan_controllers::runtime::{Controllers, RuntimeConfig};
    use k8s_openapi::api::events::v1::Event;
    use kube::api::ListParams;

    let env = crate::support::Env::start().await;
    env.namespace(NAMESPACE).await;
    let extra = config_map().replace("name: settings", "name: extra");
    let (upstream, first) = serve_source(
        &env,
        &[
            ("app/config.yaml", &config_map()),
            ("app/extra.yaml", &extra),
        ],
    )
    .await;
    let sink = std::sync::Arc::new(crate::events::CapturingSink::default());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let config = RuntimeConfig {
        event_sink: Some(sink.clone()),
        ..RuntimeConfig::default()
    };
    let controllers = Controllers::new(env.client.clone(), config).register(
        capstan_controllers::kustomization::KustomizationReconciler::new(env.client.clone()),
    );
    tokio::spawn(controllers.run(shutdown));
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "app", "prune": true}),
    )
    .await;
    wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;
    let changes = || {
        sink.events()
            .into_iter()
            .filter(|e| e.reason == "Progressing")
            .collect::<Vec<_>>()
    };
    let published = changes();
    assert_eq!(published.len(), 1, "{published:#?}");
    let created = &published[0];
    assert_eq!(created.type_, kube::runtime::events::EventType::Normal);
    let mut lines: Vec<&str> = created.message.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            format!("ConfigMap/{NAMESPACE}/extra created"),
            format!("ConfigMap/{NAMESPACE}/settings created"),
        ]
    );
    assert_eq!(
        created.metadata.get(REVISION_KEY),
        Some(&format!("main@sha1:{first}"))
    );
    // The same note is recorded in the cluster.
    let events: Api<Event> = Api::namespaced(env.client.clone(), NAMESPACE);
    let find = |note: String| {
        let events = events.clone();
        async move {
            events
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("Progressing") && e.note.as_deref() == Some(&note)
                })
        }
    };
    eventually(Duration::from_secs(10), "the change-set Event", || {
        find(created.message.clone())
    })
    .await;

    // A reconcile that changes nothing announces nothing.
    request_reconcile(&kustomizations(&env), "app", "t1").await;
    eventually(Duration::from_secs(20), "the reconcile requested", || {
        let api = kustomizations(&env);
        async move {
            let object = api.get("app").await.ok()?;
            (object
                .status?
                .reconcile_request
                .last_handled_reconcile_at
                .as_deref()
                == Some("t1"))
            .then_some(())
        }
    })
    .await;
    assert_eq!(changes().len(), 1, "{:#?}", changes());

    // A new revision configures one object and prunes the other: two Events, as Flux.
    let second = upstream.commit(
        &[
            (
                "app/config.yaml",
                &config_map().replace("env: dev", "env: prod"),
            ),
            ("app/extra.yaml", ""),
        ],
        "second",
    );
    request_reconcile(&env.git_repositories(NAMESPACE), "repo", "t2").await;
    wait_source_revision(&env, &format!("main@sha1:{second}")).await;
    request_reconcile(&kustomizations(&env), "app", "t2").await;
    let applied = format!("Applied revision: main@sha1:{second}");
    wait_ready(&env, "app", "the second revision", |_, _, message| {
        message == applied
    })
    .await;
    let published = changes();
    let notes: Vec<&str> = published.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        notes[1..],
        [
            format!("ConfigMap/{NAMESPACE}/settings configured"),
            format!("ConfigMap/{NAMESPACE}/extra deleted"),
        ],
        "{published:#?}"
    );
    assert!(
        published[1..]
            .iter()
            .all(|e| e.metadata.get(REVISION_KEY) == Some(&format!("main@sha1:{second}")))
    );
    eventually(Duration::from_secs(10), "the prune Event", || {
        find(format!("ConfigMap/{NAMESPACE}/extra deleted"))
    })
    .await;
}
