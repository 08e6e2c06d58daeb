//! The HelmRelease controller end to end: charts packaged and pushed by Helm's own SDK to a
//! `docker-registry`, read through an OCIRepository (`chartRef`), released into the embedded
//! control plane; release records read back from Helm's storage.

use std::path::{Path, PathBuf};
use std::time::Duration;

use capstan_api::HelmRelease;
use capstan_helm::release::Status;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};

use crate::helm_support::{
    HelmController, NAMESPACE, ReleaseEnv, condition, condition_is, hang_patch, hang_rollout,
    history, podinfo, ready_for_generation, ready_reason, reason_is,
};
use crate::support::eventually;

fn env_has(container: &serde_json::Value, value: &str) -> bool {
    container["env"]
        .as_array()
        .is_some_and(|env| env.iter().any(|e| e["value"] == value))
}

#[tokio::test]
// One scenario read top to bottom: install, upgrades from values and valuesFrom, uninstall.
#[allow(clippy::too_many_lines)]
async fn installs_upgrades_on_values_and_values_from_and_uninstalls() {
    let env = ReleaseEnv::start().await;
    env.serve_podinfo().await;
    let config_maps: Api<ConfigMap> = env.api();
    let settings: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "podinfo-values", "namespace": NAMESPACE,
                     "labels": {"reconcile.fluxcd.io/watch": "Enabled"}},
        "data": {"values.yaml": "ui:\n  message: from-configmap\n"},
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &settings)
        .await
        .unwrap();
    let keep = |kind: &str| {
        serde_json::json!({
            "target": {"kind": kind},
            "patch": format!("apiVersion: v1\nkind: {kind}\nmetadata:\n  name: podinfo\n  annotations:\n    helm.sh/resource-policy: keep\n"),
        })
    };
    env.release(
        "podinfo",
        "podinfo",
        serde_json::json!({
            "timeout": "2m",
            "maxHistory": 2,
            "valuesFrom": [{"kind": "ConfigMap", "name": "podinfo-values"}],
            // `helm.sh/resource-policy: keep` on the Service and the ServiceAccount.
            "postRenderers": [{"kustomize": {"patches": [keep("Service"), keep("ServiceAccount")]}}],
            "values": {
                "replicaCount": 1,
                "serviceAccount": {"enabled": true},
                "hooks": {
                    "preInstall": {"job": {"enabled": true}},
                    "postInstall": {"job": {"enabled": true}},
                },
            },
        }),
    )
    .await;
    let installed = env.wait_ready("podinfo", "installed").await;
    let (_, reason, message) = condition(&installed, "Ready").unwrap();
    assert_eq!(reason, "InstallSucceeded");
    // One Event says so, as helm-controller's (the Ready transition is not announced twice).
    let events: Api<k8s_openapi::api::events::v1::Event> = env.api();
    let said: Vec<_> = events
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("InstallSucceeded"))
        .collect();
    assert_eq!(said.len(), 1, "{said:#?}");
    // An OCI chart's version carries its digest, as Flux's (`6.14.1+<12 hex>`).
    assert!(
        message.starts_with(
            "Helm install succeeded for release apps/podinfo.v1 with chart podinfo@6.14.1+"
        ),
        "{message}"
    );
    let (status, reason, _) = condition(&installed, "Released").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "InstallSucceeded")
    );
    let status = installed.status.as_ref().unwrap();
    let digest = status.last_attempted_revision_digest.clone().unwrap();
    let hex = digest.strip_prefix("sha256:").unwrap();
    assert_eq!(
        status.last_attempted_revision.clone().unwrap(),
        format!("6.14.1+{}", &hex[..12])
    );
    assert_eq!(status.storage_namespace.as_deref(), Some(NAMESPACE));
    assert_eq!(history(&installed), [(1, "deployed".to_owned())]);
    assert_eq!(env.records("podinfo").await, [(1, Status::Deployed)]);

    // The objects carry Flux's origin labels and the values from both places.
    let deployments: Api<Deployment> = env.api();
    let deployment = deployments.get("podinfo").await.unwrap();
    let labels = deployment.metadata.labels.clone().unwrap();
    assert_eq!(labels["helm.toolkit.fluxcd.io/name"], "podinfo");
    assert_eq!(labels["helm.toolkit.fluxcd.io/namespace"], NAMESPACE);
    let container =
        serde_json::to_value(&deployment).unwrap()["spec"]["template"]["spec"]["containers"][0]
            .clone();
    assert!(
        env_has(&container, "from-configmap"),
        "the ConfigMap's values reach the chart"
    );

    // Hooks ran in order, pre-install before the objects and post-install after; their
    // delete policy (hook-succeeded) removed them.
    let record = env.record("podinfo", 1).await;
    let run = |name: &str| {
        record
            .hooks
            .iter()
            .find(|h| h.name == name)
            .unwrap_or_else(|| panic!("hook {name}"))
            .last_run
            .clone()
    };
    let (pre, post) = (run("podinfo-pre-install"), run("podinfo-post-install"));
    assert_eq!(format!("{:?}", pre.phase), "Succeeded");
    assert_eq!(format!("{:?}", post.phase), "Succeeded");
    assert!(pre.completed_at.unwrap() <= post.started_at.unwrap());
    let jobs: Api<Job> = env.api();
    assert!(jobs.get_opt("podinfo-pre-install").await.unwrap().is_none());

    // A values change upgrades: v2 deployed, v1 superseded; the ServiceAccount v2 no longer
    // renders is kept (`keep`), as Helm keeps it.
    env.patch(
        "podinfo",
        serde_json::json!({"spec": {"values": {"replicaCount": 2, "serviceAccount": {"enabled": false}}}}),
    )
    .await;
    let upgraded = env
        .wait("podinfo", "upgraded", |o| {
            ready_for_generation(o) && history(o).first().is_some_and(|h| h.0 == 2)
        })
        .await;
    assert_eq!(ready_reason(&upgraded), "UpgradeSucceeded");
    assert_eq!(
        history(&upgraded),
        [(2, "deployed".to_owned()), (1, "superseded".to_owned())]
    );
    assert_eq!(
        env.records("podinfo").await,
        [(1, Status::Superseded), (2, Status::Deployed)]
    );
    let deployment = deployments.get("podinfo").await.unwrap();
    assert_eq!(
        serde_json::to_value(&deployment).unwrap()["spec"]["replicas"],
        2
    );
    let accounts: Api<ServiceAccount> = env.api();
    assert!(
        accounts.get_opt("podinfo").await.unwrap().is_some(),
        "the upgrade does not prune a `keep` object"
    );

    // A change of the watched ConfigMap upgrades again.
    config_maps
        .patch(
            "podinfo-values",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"data": {"values.yaml": "ui:\n  message: changed\n"}}),
            ),
        )
        .await
        .unwrap();
    env.wait("podinfo", "upgraded from the ConfigMap", |o| {
        history(o)
            .first()
            .is_some_and(|h| h.0 == 3 && h.1 == "deployed")
    })
    .await;
    assert_eq!(
        env.records("podinfo").await,
        [(2, Status::Superseded), (3, Status::Deployed)],
        "maxHistory: 2"
    );
    let deployment = deployments.get("podinfo").await.unwrap();
    let container =
        serde_json::to_value(&deployment).unwrap()["spec"]["template"]["spec"]["containers"][0]
            .clone();
    assert!(env_has(&container, "changed"));

    // Nothing changed: no new release.
    let before = env.records("podinfo").await;
    env.request_reconcile("podinfo", "1").await;
    env.request_handled("podinfo", "the request handled", "1")
        .await;
    assert_eq!(env.records("podinfo").await, before);

    // Deleting the HelmRelease uninstalls: the objects and the records go, but for the
    // Service marked `keep`.
    env.delete_release("podinfo").await;
    assert!(deployments.get_opt("podinfo").await.unwrap().is_none());
    assert!(env.records("podinfo").await.is_empty());
    let services: Api<Service> = env.api();
    assert!(
        services.get_opt("podinfo").await.unwrap().is_some(),
        "the uninstall keeps the `keep` Service"
    );
}

/// A chart of one template that fails at line 4.
fn broken_chart(dir: &Path) -> PathBuf {
    let chart = dir.join("broken");
    capstan_testkit::write_files(
        &chart,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: broken\nversion: 0.1.0\n",
            ),
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.missing.name }}\n",
            ),
        ],
    );
    chart
}

#[tokio::test]
async fn a_failing_template_is_reported_naming_template_and_line_with_no_release_left() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    env.serve_chart("broken", &broken_chart(dir.path())).await;
    env.release("broken", "broken", serde_json::json!({})).await;
    let failed = env
        .wait("broken", "the install failed", |o| {
            condition(o, "Ready").is_some_and(|c| c.0 == "False" && c.1 == "InstallFailed")
        })
        .await;
    let (_, _, message) = condition(&failed, "Ready").unwrap();
    assert!(
        message.contains("broken/templates/config.yaml:4"),
        "names the template and line: {message}"
    );
    assert!(
        message.starts_with("Helm install failed for release apps/broken with chart broken@0.1.0+"),
        "{message}"
    );
    let status = failed.status.as_ref().unwrap();
    assert_eq!(status.install_failures, Some(1));
    assert!(env.records("broken").await.is_empty(), "no release record");
}

/// A failure message longer than a condition holds is announced once too: the `Ready`
/// transition (its message bounded) is not published again after the `InstallFailed` Event
/// (`RetryOnFailure`: `Ready` says what `Released` says).
#[tokio::test]
async fn a_long_failure_is_announced_once() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("long");
    capstan_testkit::write_files(
        &chart,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: long\nversion: 0.1.0\n"),
            ("templates/config.yaml", "{{ fail (repeat 1500 \"x\") }}\n"),
        ],
    );
    env.serve_chart("long", &chart).await;
    env.release(
        "long",
        "long",
        serde_json::json!({"install": {"strategy": {"name": "RetryOnFailure", "retryInterval": "1h"}}}),
    )
    .await;
    let failed = env
        .wait("long", "the install failed", |o| {
            condition(o, "Ready").is_some_and(|c| c.0 == "False" && c.1 == "InstallFailed")
        })
        .await;
    let (_, _, message) = condition(&failed, "Ready").unwrap();
    assert!(message.contains("characters left out"), "{message}");
    // The Ready transition is published after the status write the wait saw.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let events: Api<k8s_openapi::api::events::v1::Event> = env.api();
    let said: Vec<_> = events
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("InstallFailed"))
        .collect();
    assert_eq!(said.len(), 1, "{said:#?}");
}

#[tokio::test]
async fn a_hanging_upgrade_is_rolled_back_within_the_timeout() {
    let env = ReleaseEnv::start().await;
    env.serve_podinfo().await;
    env.install(
        "web",
        "podinfo",
        serde_json::json!({
            "timeout": "4s",
            "upgrade": {"remediation": {"retries": 0, "remediateLastFailure": true}},
        }),
    )
    .await;
    // The post-renderer makes the simulated rollout hang.
    env.hang("web").await;
    let remediated = env
        .wait("web", "rolled back", |o| {
            condition_is(o, "Remediated", "True")
        })
        .await;
    let (_, reason, message) = condition(&remediated, "Remediated").unwrap();
    assert_eq!(reason, "RollbackSucceeded");
    assert!(
        message.contains("apps/web-podinfo.v3") || message.contains("apps/web.v3"),
        "{message}"
    );
    let (status, reason, message) = condition(&remediated, "Released").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "UpgradeFailed")
    );
    assert!(message.contains("Deployment/apps/web-podinfo"), "{message}");
    assert_eq!(
        env.records("web").await,
        [
            (1, Status::Superseded),
            (2, Status::Failed),
            (3, Status::Deployed)
        ]
    );
    let ready = env.wait_stalled("web").await;
    assert_eq!(condition(&ready, "Ready").unwrap().0, "False");
}

#[tokio::test]
// One scenario read top to bottom: templated chart, drift, switch to chartRef.
#[allow(clippy::too_many_lines)]
async fn a_templated_helm_chart_from_a_helm_repository_is_created_and_collected() {
    let env = ReleaseEnv::start().await;
    let repository = tempfile::tempdir().unwrap();
    capstan_testkit::helm_repo::sdk_repository(&[&podinfo()], repository.path(), None);
    let server = capstan_testkit::helm_repo::HelmRepoServer::start(repository.path(), None).await;
    let object: capstan_api::HelmRepository = serde_json::from_value(serde_json::json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
        "metadata": {"name": "charts", "namespace": NAMESPACE},
        "spec": {"url": server.url(), "interval": "10m"},
    }))
    .unwrap();
    env.api::<capstan_api::HelmRepository>()
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    env.create(
        "podinfo",
        serde_json::json!({
            "interval": "10m",
            "chart": {
                "metadata": {"labels": {"team": "web"}},
                "spec": {
                    "chart": "podinfo", "version": "6.x",
                    "sourceRef": {"kind": "HelmRepository", "name": "charts"},
                },
            },
            "driftDetection": {"mode": "enabled"},
        }),
    )
    .await;
    let installed = env.wait_ready("podinfo", "installed").await;
    let status = installed.status.as_ref().unwrap();
    assert_eq!(status.helm_chart.as_deref(), Some("apps/apps-podinfo"));
    assert_eq!(status.last_attempted_revision.as_deref(), Some("6.14.1"));
    let charts: Api<capstan_api::HelmChart> = env.api();
    let chart = charts.get("apps-podinfo").await.unwrap();
    let labels = chart.metadata.labels.clone().unwrap();
    assert_eq!(labels["team"], "web");
    assert_eq!(labels["helm.toolkit.fluxcd.io/name"], "podinfo");
    assert_eq!(chart.spec.version.as_deref(), Some("6.x"));
    assert_eq!(chart.spec.interval, "10m");

    // Drift (mode enabled) is corrected at the next reconcile.
    let deployments: Api<Deployment> = env.api();
    deployments
        .patch(
            "podinfo",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(serde_json::json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "podinfo", "namespace": NAMESPACE},
                "spec": {"replicas": 5},
            })),
        )
        .await
        .unwrap();
    env.request_reconcile("podinfo", "drift").await;
    let corrected = env
        .wait("podinfo", "drift corrected", |o| {
            reason_is(o, "Drifted", "DriftDetected")
        })
        .await;
    let (_, _, message) = condition(&corrected, "Drifted").unwrap();
    assert!(message.contains("Deployment/apps/podinfo"), "{message}");
    eventually(Duration::from_secs(30), "the replicas restored", || {
        let deployments = deployments.clone();
        async move {
            let value = serde_json::to_value(deployments.get("podinfo").await.unwrap()).unwrap();
            (value["spec"]["replicas"] == 1).then_some(())
        }
    })
    .await;
    assert_eq!(
        env.records("podinfo").await,
        [(1, Status::Deployed)],
        "no new release"
    );

    // Switching to chartRef collects the templated HelmChart.
    env.serve_chart("podinfo-oci", &podinfo()).await;
    let patch = serde_json::json!({"spec": {
        "chart": null,
        "chartRef": {"kind": "OCIRepository", "name": "podinfo-oci"},
    }});
    env.patch("podinfo", patch).await;
    let switched = env
        .wait("podinfo", "on the OCI chart", |o| {
            ready_for_generation(o) && o.status.as_ref().is_some_and(|s| s.helm_chart.is_none())
        })
        .await;
    assert!(charts.get_opt("apps-podinfo").await.unwrap().is_none());
    assert!(
        switched
            .status
            .as_ref()
            .unwrap()
            .last_attempted_revision_digest
            .is_some()
    );
}

#[tokio::test]
async fn a_release_installed_by_helm_is_adopted_with_its_history_and_helm_reads_ours() {
    let env = ReleaseEnv::start().await;
    let chart = podinfo();
    env.sdk(
        serde_json::json!({"op": "install", "chart": chart, "name": "podinfo",
                           "values": {"replicaCount": 1}}),
    )
    .await
    .unwrap();
    env.serve_podinfo().await;
    env.release(
        "podinfo",
        "podinfo",
        serde_json::json!({"values": {"replicaCount": 2}}),
    )
    .await;
    let adopted = env.wait_ready("podinfo", "adopted").await;
    assert_eq!(ready_reason(&adopted), "UpgradeSucceeded");
    assert_eq!(history(&adopted), [(2, "deployed".to_owned())]);
    // Helm sees the history kept, our revision deployed, and our values.
    let history = env
        .sdk(serde_json::json!({"op": "history", "name": "podinfo"}))
        .await
        .unwrap();
    let statuses: Vec<(i64, String)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["revision"].as_i64().unwrap(),
                h["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [(1, "superseded".to_owned()), (2, "deployed".to_owned())],
        "{history}"
    );
    let values = env
        .sdk(serde_json::json!({"op": "get_values", "name": "podinfo"}))
        .await
        .unwrap();
    assert_eq!(values["replicaCount"], 2, "{values}");
    // Helm reads our revision's status (a Helm rollback of fields the controller owns would
    // meet server-side apply's conflict with `helm-controller`, as it does against Flux).
    let status = env
        .sdk(serde_json::json!({"op": "status", "name": "podinfo"}))
        .await
        .unwrap();
    assert_eq!(status["revision"], 2, "{status}");
    assert_eq!(status["status"], "deployed", "{status}");
}

fn job(name: &str, hook: &str, weight: i64) -> String {
    format!(
        "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  annotations:\n    helm.sh/hook: {hook}\n    helm.sh/hook-weight: \"{weight}\"\n    helm.sh/hook-delete-policy: hook-succeeded\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n"
    )
}

/// A chart with a values schema, weighted pre-install hooks and a test hook.
fn app_chart(dir: &Path) -> PathBuf {
    let chart = dir.join("app");
    let hooks = [
        job("app-late", "pre-install", 5),
        job("app-early", "pre-install", -1),
        job("app-test", "test", 0),
    ]
    .concat();
    capstan_testkit::write_files(
        &chart,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: app\nversion: 0.1.0\n"),
            ("values.yaml", "replicas: 1\n"),
            (
                "values.schema.json",
                r#"{"type": "object", "properties": {"replicas": {"type": "integer"}}}"#,
            ),
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\ndata:\n  replicas: \"{{ .Values.replicas }}\"\n",
            ),
            ("templates/hooks.yaml", &hooks),
        ],
    );
    chart
}

/// [`ReleaseEnv::start`] with [`app_chart`] served as the OCIRepository `app`.
async fn with_app_chart() -> ReleaseEnv {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    env.serve_chart("app", &app_chart(dir.path())).await;
    env
}

#[tokio::test]
async fn bad_values_are_reported_then_hooks_run_by_weight_and_tests_pass() {
    let env = with_app_chart().await;
    env.release(
        "app",
        "app",
        serde_json::json!({
            "valuesFrom": [{"kind": "ConfigMap", "name": "absent"}],
            "test": {"enable": true},
        }),
    )
    .await;
    let missing = env
        .wait("app", "a values error", |o| {
            reason_is(o, "Ready", "ValuesError")
        })
        .await;
    assert_eq!(
        condition(&missing, "Ready").unwrap().2,
        "could not resolve ConfigMap chart values reference 'apps/absent' with key 'values.yaml': resource not found"
    );

    // Optional now, and values the schema refuses.
    env.patch(
        "app",
        serde_json::json!({"spec": {
            "valuesFrom": [{"kind": "ConfigMap", "name": "absent", "optional": true}],
            "values": {"replicas": "two"},
        }}),
    )
    .await;
    let refused = env
        .wait("app", "a schema failure", |o| {
            reason_is(o, "Ready", "InstallFailed")
        })
        .await;
    let message = condition(&refused, "Ready").unwrap().2;
    assert!(
        message.contains("values don't meet the specifications of the schema"),
        "{message}"
    );
    assert!(message.contains("replicas"), "{message}");
    assert!(env.records("app").await.is_empty());

    env.patch(
        "app",
        serde_json::json!({"spec": {"values": {"replicas": 2}}}),
    )
    .await;
    let installed = env
        .wait("app", "installed and tested", |o| {
            ready_for_generation(o) && condition_is(o, "TestSuccess", "True")
        })
        .await;
    let (_, reason, message) = condition(&installed, "TestSuccess").unwrap();
    assert_eq!(reason, "TestSucceeded");
    assert!(
        message.contains("1 test hook completed successfully"),
        "{message}"
    );
    let snapshot = &installed.status.as_ref().unwrap().history[0];
    assert_eq!(
        snapshot.test_hooks.as_ref().unwrap()["app-test"]
            .phase
            .as_deref(),
        Some("Succeeded")
    );
    let record = env.record("app", 1).await;
    let run = |name: &str| {
        record
            .hooks
            .iter()
            .find(|h| h.name == name)
            .unwrap()
            .last_run
            .clone()
    };
    assert!(
        run("app-early").completed_at.unwrap() <= run("app-late").started_at.unwrap(),
        "weight -1 runs before weight 5"
    );
    let config: ConfigMap = env.api().get("app-config").await.unwrap();
    assert_eq!(config.data.unwrap()["replicas"], "2");
}

#[tokio::test]
async fn tests_whose_filters_select_no_hook_count_as_run() {
    // Flux records an empty set of test hooks as tested: the release is Ready, not retested
    // at every reconcile.
    let env = with_app_chart().await;
    env.release(
        "app",
        "app",
        serde_json::json!({
            "values": {"replicas": 2},
            "test": {"enable": true, "filters": [{"name": "app-test", "exclude": true}]},
        }),
    )
    .await;
    let tested = env
        .wait("app", "installed and tested with no hook", |o| {
            ready_for_generation(o) && condition_is(o, "TestSuccess", "True")
        })
        .await;
    let (_, reason, message) = condition(&tested, "TestSuccess").unwrap();
    assert_eq!(reason, "TestSucceeded");
    assert!(message.contains("no test hooks"), "{message}");
    let snapshot = &tested.status.as_ref().unwrap().history[0];
    assert_eq!(
        snapshot
            .test_hooks
            .as_ref()
            .map(std::collections::BTreeMap::len),
        Some(0)
    );
    assert_eq!(env.records("app").await.len(), 1);
}

#[tokio::test]
async fn a_new_target_namespace_uninstalls_the_old_release_and_creates_the_namespace() {
    let env = with_app_chart().await;
    env.install("app", "app", serde_json::json!({})).await;
    let config_map = |namespace: &str| {
        let api: Api<ConfigMap> = Api::namespaced(env.client.clone(), namespace);
        async move { api.get_opt("app-config").await.unwrap() }
    };
    assert!(config_map(NAMESPACE).await.is_some());
    env.patch(
        "app",
        serde_json::json!({"spec": {"targetNamespace": "other", "install": {"createNamespace": true}}}),
    )
    .await;
    let moved = env
        .wait_ready("app", "installed in the new namespace")
        .await;
    let message = condition(&moved, "Ready").unwrap().2;
    assert!(
        message.starts_with(
            "Helm install succeeded for release other/other-app.v1 with chart app@0.1.0+"
        ),
        "{message}"
    );
    assert!(config_map("other").await.is_some());
    assert!(config_map(NAMESPACE).await.is_none());
    assert!(
        env.records("app").await.is_empty(),
        "the old release is uninstalled"
    );
    assert_eq!(env.records("other-app").await, [(1, Status::Deployed)]);
}

#[tokio::test]
async fn a_hanging_upgrade_is_uninstalled_with_the_uninstall_strategy() {
    let env = ReleaseEnv::start().await;
    env.serve_podinfo().await;
    env.install(
        "web",
        "podinfo",
        serde_json::json!({
            "timeout": "3s",
            "upgrade": {"remediation": {"retries": 1, "strategy": "uninstall"}},
        }),
    )
    .await;
    env.hang("web").await;
    let remediated = env
        .wait("web", "uninstalled", |o| {
            reason_is(o, "Remediated", "UninstallSucceeded")
        })
        .await;
    let (status, _, message) = condition(&remediated, "Remediated").unwrap();
    assert_eq!(status, "True");
    assert!(
        message.starts_with(
            "Helm uninstall remediation for release apps/web.v2 with chart podinfo@6.14.1+"
        ) && message.ends_with(" succeeded"),
        "{message}"
    );
    // The install that follows hangs as well, and fails within its timeout: no release is
    // left deployed with the hanging rollout, and the HelmRelease stalls.
    let stalled = env.wait_stalled("web").await;
    assert_eq!(condition(&stalled, "Ready").unwrap().0, "False");
    assert!(
        env.records("web")
            .await
            .iter()
            .all(|(_, status)| *status != Status::Deployed)
    );
}

/// Installs the corpus chart `case` (its default values) into the namespace `namespace`
/// and waits until the HelmRelease is Ready.
async fn install_corpus_chart(case: &str, namespace: &str) -> (ReleaseEnv, HelmRelease) {
    let mut env = ReleaseEnv::start().await;
    let chart = capstan_testkit::corpus(&format!("helm-charts/{case}/chart"));
    env.serve_chart(case, &chart).await;
    env.release(
        case,
        case,
        serde_json::json!({
            "timeout": "5m",
            "targetNamespace": namespace,
            "install": {"createNamespace": true},
        }),
    )
    .await;
    let ready = eventually(Duration::from_secs(300), "the chart installed", || {
        let api = env.releases();
        async move {
            let object = api.get(case).await.ok()?;
            ready_for_generation(&object).then_some(object)
        }
    })
    .await;
    env.stop_controller();
    (env, ready)
}

/// Whether the CustomResourceDefinition `name` exists.
async fn has_crd(env: &ReleaseEnv, name: &str) -> bool {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    crds.get_opt(name).await.unwrap().is_some()
}

#[tokio::test]
async fn argo_cd_installs_to_ready_with_its_crds_and_hooks() {
    let (env, ready) = install_corpus_chart("argo-cd", "argocd").await;
    assert_eq!(ready_reason(&ready), "InstallSucceeded");
    assert!(has_crd(&env, "applications.argoproj.io").await);
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), "argocd");
    assert!(
        deployments
            .get_opt("argocd-argo-cd-server")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn kube_prometheus_stack_installs_to_ready_with_its_crds_first() {
    let (env, ready) = install_corpus_chart("kube-prometheus-stack", "monitoring").await;
    assert_eq!(ready_reason(&ready), "InstallSucceeded");
    assert!(has_crd(&env, "prometheuses.monitoring.coreos.com").await);
    let prometheuses = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "monitoring.coreos.com",
        "v1",
        "Prometheus",
    ));
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(env.client.clone(), "monitoring", &prometheuses);
    assert!(
        !api.list(&kube::api::ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn lookup_and_capabilities_come_from_the_cluster_and_force_upgrades() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("probe");
    capstan_testkit::write_files(
        &chart,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: probe\nversion: 0.1.0\n",
            ),
            (
                "templates/probe.yaml",
                concat!(
                    "{{- $seed := lookup \"v1\" \"ConfigMap\" .Release.Namespace \"seed\" }}\n",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\ndata:\n",
                    "  seed: {{ $seed.data.value | default \"none\" | quote }}\n",
                    "  helmReleases: {{ .Capabilities.APIVersions.Has \"helm.toolkit.fluxcd.io/v2/HelmRelease\" | quote }}\n",
                    "  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}\n",
                    "  revision: {{ .Release.Revision | quote }}\n",
                ),
            ),
        ],
    );
    env.serve_chart("probe", &chart).await;
    let config_maps: Api<ConfigMap> = env.api();
    let seed: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "seed", "namespace": NAMESPACE},
        "data": {"value": "from-the-cluster"},
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &seed)
        .await
        .unwrap();
    env.install("probe", "probe", serde_json::json!({})).await;
    let data = config_maps.get("probe").await.unwrap().data.unwrap();
    assert_eq!(data["seed"], "from-the-cluster");
    assert_eq!(data["helmReleases"], "true");
    let version = env.client.apiserver_version().await.unwrap().git_version;
    assert_eq!(data["kubeVersion"], version);
    assert_eq!(data["revision"], "1");

    // A forceAt that does not match requestedAt is not a force request (Flux's rule): the
    // reconcile it rides on handles requestedAt and releases nothing.
    env.patch(
        "probe",
        serde_json::json!({"metadata": {"annotations": {
            "reconcile.fluxcd.io/requestedAt": "plain",
            "reconcile.fluxcd.io/forceAt": "stale",
        }}}),
    )
    .await;
    let plain = env
        .request_handled("probe", "plain reconcile", "plain")
        .await;
    let status = plain.status.as_ref().unwrap();
    assert_ne!(status.last_handled_force_at.as_deref(), Some("stale"));
    assert_eq!(history(&plain).first().map(|h| h.0), Some(1));

    // forceAt (with requestedAt, as `flux reconcile hr --force`) upgrades an in-sync release.
    env.patch(
        "probe",
        serde_json::json!({"metadata": {"annotations": {
            "reconcile.fluxcd.io/requestedAt": "now",
            "reconcile.fluxcd.io/forceAt": "now",
        }}}),
    )
    .await;
    let forced = env
        .wait("probe", "forced", |o| {
            o.status
                .as_ref()
                .is_some_and(|s| s.last_handled_force_at.as_deref() == Some("now"))
                && history(o).first().is_some_and(|h| h.0 == 2)
        })
        .await;
    assert_eq!(ready_reason(&forced), "UpgradeSucceeded");
    let data = config_maps.get("probe").await.unwrap().data.unwrap();
    assert_eq!(data["revision"], "2");
}

#[tokio::test]
async fn depends_on_holds_a_release_until_its_dependency_is_ready() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    let url = env.push_chart(&app_chart(dir.path()));
    env.release(
        "frontend",
        "app",
        serde_json::json!({
            "targetNamespace": "front",
            "install": {"createNamespace": true},
            "dependsOn": [{"name": "backend"}],
        }),
    )
    .await;
    env.release("backend", "app", serde_json::json!({})).await;
    let waiting = env
        .wait("frontend", "waiting for its dependency", |o| {
            reason_is(o, "Ready", "DependencyNotReady")
        })
        .await;
    assert_eq!(
        condition(&waiting, "Ready").unwrap().2,
        "dependency 'apps/backend' is not ready"
    );
    // The source appears: the backend becomes Ready, and that triggers the frontend.
    env.chart_source("app", &url, "0.1.0").await;
    env.wait_ready("backend", "installed").await;
    env.wait_ready("frontend", "installed after").await;
}

#[tokio::test]
async fn the_retry_strategy_retries_a_failed_install_instead_of_stalling() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    env.serve_chart("broken", &broken_chart(dir.path())).await;
    env.release(
        "broken",
        "broken",
        serde_json::json!({
            "install": {"strategy": {"name": "RetryOnFailure", "retryInterval": "1s"}},
        }),
    )
    .await;
    let retried = env
        .wait("broken", "retried", |o| {
            o.status
                .as_ref()
                .is_some_and(|s| s.install_failures.unwrap_or(0) >= 2)
        })
        .await;
    assert_eq!(ready_reason(&retried), "InstallFailed");
    assert!(condition(&retried, "Stalled").is_none());
}

/// The files under `dir`, by path relative to `base`, with `replace` applied to each text.
fn tree_files(base: &Path, dir: &Path, replace: (&str, &str), out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            tree_files(base, &path, replace, out);
        } else {
            let text = std::fs::read_to_string(&path).unwrap();
            let relative = path.strip_prefix(base).unwrap().display().to_string();
            out.push((relative, text.replace(replace.0, replace.1)));
        }
    }
}

#[tokio::test]
async fn the_flux_example_apps_reconcile_to_ready() {
    // The podinfo chart served as the flux-example's HelmRepository, on 127.0.0.1.
    let repository = tempfile::tempdir().unwrap();
    capstan_testkit::helm_repo::sdk_repository(&[&podinfo()], repository.path(), None);
    let server = capstan_testkit::helm_repo::HelmRepoServer::start(repository.path(), None).await;
    let source = capstan_testkit::corpus("flux-example/src");
    let mut files = Vec::new();
    tree_files(
        &source,
        &source.join("apps"),
        ("https://stefanprodan.github.io/podinfo", &server.url()),
        &mut files,
    );
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let (env, _git, _kustomize, _) = crate::kustomize_support::setup(&files).await;
    let _helm = HelmController::start(&env);
    // The Gateway API's HTTPRoute, which the example's infrastructure would install.
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    crds.patch(
        "httproutes.gateway.networking.k8s.io",
        &PatchParams::apply("test").force(),
        &Patch::Apply(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "httproutes.gateway.networking.k8s.io", "annotations": {
                "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/2466",
            }},
            "spec": {
                "group": "gateway.networking.k8s.io", "scope": "Namespaced",
                "names": {"kind": "HTTPRoute", "plural": "httproutes", "singular": "httproute",
                          "listKind": "HTTPRouteList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": {"type": "object",
                                  "x-kubernetes-preserve-unknown-fields": true}}}],
            },
        })),
    )
    .await
    .unwrap();
    crate::kustomize_support::create_kustomization(
        &env,
        "apps",
        serde_json::json!({"path": "./apps/staging", "prune": true}),
    )
    .await;
    let releases: Api<HelmRelease> = Api::namespaced(env.client.clone(), "podinfo");
    let ready = eventually(
        Duration::from_secs(120),
        "the podinfo HelmRelease Ready",
        || {
            let api = releases.clone();
            async move {
                let object = api.get_opt("podinfo").await.ok()??;
                ready_for_generation(&object).then_some(object)
            }
        },
    )
    .await;
    assert_eq!(ready_reason(&ready), "InstallSucceeded");
    assert_eq!(
        ready.status.as_ref().unwrap().helm_chart.as_deref(),
        Some("podinfo/podinfo-podinfo")
    );
    let routes = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "gateway.networking.k8s.io",
        "v1",
        "HTTPRoute",
    ));
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(env.client.clone(), "podinfo", &routes);
    let route = api.get("podinfo").await.unwrap();
    assert_eq!(route.data["spec"]["hostnames"][0], "podinfo.staging");
}

#[tokio::test]
// One scenario read top to bottom: ignored paths, warn mode, then the correction.
#[allow(clippy::too_many_lines)]
async fn drift_is_only_reported_in_warn_mode_and_ignore_rules_hold() {
    let env = with_app_chart().await;
    env.install(
        "app",
        "app",
        serde_json::json!({
            "install": {"disableWait": true},
            "driftDetection": {
                "mode": "warn",
                "ignore": [{"paths": ["/metadata/labels/ignored"], "target": {"kind": "ConfigMap"}}],
            },
        }),
    )
    .await;
    let config_maps: Api<ConfigMap> = env.api();
    let change = |labels: serde_json::Value, replicas: &str| {
        let config_maps = config_maps.clone();
        let object = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "app-config", "namespace": NAMESPACE, "labels": labels},
            "data": {"replicas": replicas},
        });
        async move {
            config_maps
                .patch(
                    "app-config",
                    &PatchParams::apply("someone-else").force(),
                    &Patch::Apply(object),
                )
                .await
                .unwrap();
        }
    };
    // An ignored path only: no drift.
    change(serde_json::json!({"ignored": "x"}), "1").await;
    env.request_reconcile("app", "1").await;
    let clean = env.request_handled("app", "checked", "1").await;
    assert_eq!(condition(&clean, "Drifted").unwrap().1, "NoDriftDetected");
    // A real change: reported, not corrected.
    change(serde_json::json!({"ignored": "x"}), "9").await;
    env.request_reconcile("app", "2").await;
    let drifted = env
        .wait("app", "drift reported", |o| {
            reason_is(o, "Drifted", "DriftDetected")
        })
        .await;
    let message = condition(&drifted, "Drifted").unwrap().2;
    assert!(
        message.contains("ConfigMap/apps/app-config changed (data.replicas)"),
        "{message}"
    );
    assert!(!message.contains("labels"), "{message}");
    assert_eq!(condition(&drifted, "Ready").unwrap().0, "True");
    let data = config_maps.get("app-config").await.unwrap().data.unwrap();
    assert_eq!(data["replicas"], "9", "warn mode changes nothing");
    // Enabled: the correction restores what is not ignored and leaves an ignored label (a key
    // with dots) as the cluster has it.
    env.patch(
        "app",
        serde_json::json!({"spec": {"driftDetection": {
            "mode": "enabled",
            "ignore": [{"paths": ["/metadata/labels/helm.toolkit.fluxcd.io~1name"],
                        "target": {"kind": "ConfigMap"}}],
        }}}),
    )
    .await;
    change(
        serde_json::json!({"helm.toolkit.fluxcd.io/name": "other"}),
        "8",
    )
    .await;
    env.request_reconcile("app", "3").await;
    let corrected = env
        .wait("app", "drift corrected", |o| {
            condition(o, "Drifted").is_some_and(|c| c.2.contains("has been corrected"))
        })
        .await;
    let message = condition(&corrected, "Drifted").unwrap().2;
    assert!(!message.contains("helm.toolkit.fluxcd.io"), "{message}");
    let config = config_maps.get("app-config").await.unwrap();
    assert_eq!(config.data.unwrap()["replicas"], "1");
    assert_eq!(
        config.metadata.labels.unwrap()["helm.toolkit.fluxcd.io/name"],
        "other"
    );
    assert_eq!(env.records("app").await, [(1, Status::Deployed)]);
}

#[tokio::test]
async fn a_service_account_release_is_authorized_by_rbac() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("plain");
    capstan_testkit::write_files(
        &chart,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: plain\nversion: 0.1.0\n",
            ),
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  a: b\n",
            ),
        ],
    );
    env.serve_chart("plain", &chart).await;
    env.release(
        "plain",
        "plain",
        serde_json::json!({"serviceAccountName": "deployer"}),
    )
    .await;
    let refused = env
        .wait("plain", "refused", |o| {
            condition(o, "Ready").is_some_and(|c| c.0 == "False" && c.2.contains("forbidden"))
        })
        .await;
    let message = condition(&refused, "Ready").unwrap().2;
    assert!(message.contains("forbidden"), "{message}");
    let config_maps: Api<ConfigMap> = env.api();
    assert!(config_maps.get_opt("plain").await.unwrap().is_none());

    // Bound to a Role over Secrets (Helm's storage) and ConfigMaps, the release installs.
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
        "rules": [{"apiGroups": [""], "resources": ["configmaps", "secrets"],
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
    env.request_reconcile("plain", "bound").await;
    env.wait_ready("plain", "installed").await;
    let config = config_maps.get("plain").await.unwrap();
    let managers: Vec<String> = config
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.contains(&"helm-controller".to_owned()),
        "{managers:?}"
    );
}

#[tokio::test]
async fn a_release_left_pending_by_a_stopped_controller_is_unlocked() {
    let mut env = ReleaseEnv::start().await;
    env.serve_podinfo().await;
    // The rollout hangs (for 10 minutes), so the install waits.
    env.release(
        "web",
        "podinfo",
        serde_json::json!({"timeout": "10m", "postRenderers": hang_rollout()}),
    )
    .await;
    eventually(Duration::from_secs(60), "a pending install", || {
        let env = &env;
        async move { (env.records("web").await == [(1, Status::PendingInstall)]).then_some(()) }
    })
    .await;
    let waiting = env.releases().get("web").await.unwrap();
    assert_eq!(condition(&waiting, "Ready").unwrap().0, "Unknown");
    // The controller stops mid-wait; its successor finds the stale pending record, marks it
    // failed without counting a failure (Flux's unlock) and upgrades: no stall with 0 retries.
    env.restart_controller();
    eventually(Duration::from_secs(60), "unlocked, then an upgrade", || {
        let env = &env;
        async move {
            (env.records("web").await == [(1, Status::Failed), (2, Status::PendingUpgrade)])
                .then_some(())
        }
    })
    .await;
    let upgrading = env.releases().get("web").await.unwrap();
    let status = upgrading.status.as_ref().unwrap();
    assert_eq!(status.install_failures, None);
    assert_eq!(status.upgrade_failures, None);
    assert_eq!(condition(&upgrading, "Stalled"), None);
}

#[tokio::test]
async fn deleting_a_release_that_never_released_leaves_helms_release_of_that_name() {
    let env = ReleaseEnv::start().await;
    env.sdk(
        serde_json::json!({"op": "install", "chart": podinfo(), "name": "broken",
                           "values": {"replicaCount": 1}}),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    env.serve_chart("broken", &broken_chart(dir.path())).await;
    env.release("broken", "broken", serde_json::json!({})).await;
    let failed = env
        .wait("broken", "the release failed", |o| {
            condition(o, "Released")
                .is_some_and(|c| c.0 == "False" && c.2.contains("config.yaml:4"))
        })
        .await;
    let status = failed.status.as_ref().unwrap();
    assert_eq!(status.storage_namespace.as_deref(), Some(NAMESPACE));
    assert!(status.history.is_empty(), "{:?}", status.history);
    // With 0 retries the failed upgrade stalls after one attempt.
    let stalled = env.wait_stalled("broken").await;
    assert_eq!(stalled.status.as_ref().unwrap().upgrade_failures, Some(1));
    // The HelmRelease never released: its deletion leaves Helm's release alone (as Flux does).
    env.delete_release("broken").await;
    assert_eq!(env.records("broken").await, [(1, Status::Deployed)]);
    let deployments: Api<Deployment> = env.api();
    assert!(
        deployments
            .get_opt("broken-podinfo")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn cleanup_on_fail_deletes_what_a_failed_upgrade_created() {
    let env = ReleaseEnv::start().await;
    env.serve_podinfo().await;
    env.install(
        "web",
        "podinfo",
        serde_json::json!({"timeout": "3s", "upgrade": {"cleanupOnFail": true}}),
    )
    .await;
    // The upgrade adds a ServiceAccount and Redis (its ConfigMap marked `keep`), and its
    // rollout hangs.
    env.patch(
        "web",
        serde_json::json!({"spec": {
            "values": {"serviceAccount": {"enabled": true}, "redis": {"enabled": true}},
            "postRenderers": [{"kustomize": {"patches": [hang_patch(), {
                "target": {"kind": "ConfigMap"},
                "patch": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-podinfo-redis\n  annotations:\n    helm.sh/resource-policy: keep\n",
            }]}}],
        }}),
    )
    .await;
    let failed = env
        .wait("web", "the upgrade failed", |o| {
            reason_is(o, "Released", "UpgradeFailed")
        })
        .await;
    assert_eq!(condition(&failed, "Ready").unwrap().0, "False");
    assert_eq!(
        env.records("web").await,
        [(1, Status::Deployed), (2, Status::Failed)]
    );
    let failed_record = env.record("web", 2).await;
    assert!(
        failed_record
            .manifest
            .contains("kind: ServiceAccount\nmetadata:\n  labels:")
    );
    let accounts: Api<ServiceAccount> = env.api();
    assert!(
        accounts.get_opt("web-podinfo").await.unwrap().is_none(),
        "the ServiceAccount the failed upgrade created is deleted"
    );
    let services: Api<Service> = env.api();
    assert!(
        services
            .get_opt("web-podinfo-redis")
            .await
            .unwrap()
            .is_none()
    );
    let config_maps: Api<ConfigMap> = env.api();
    assert!(
        config_maps
            .get_opt("web-podinfo-redis")
            .await
            .unwrap()
            .is_some(),
        "the `keep` ConfigMap stays"
    );
    let deployments: Api<Deployment> = env.api();
    assert!(deployments.get_opt("web-podinfo").await.unwrap().is_some());
}

#[tokio::test]
async fn a_deletion_that_cannot_build_the_target_keeps_the_finalizer_and_retries() {
    let env = ReleaseEnv::start().await;
    env.serve_podinfo().await;
    let secrets: Api<Secret> = env.api();
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "target", "namespace": NAMESPACE},
        "stringData": {"value": capstan_apiserver::kubeconfig(&env.api_url(), "test")},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    env.install(
        "web",
        "podinfo",
        serde_json::json!({"kubeConfig": {"secretRef": {"name": "target"}}}),
    )
    .await;
    // The Secret loses its kubeconfig (it is not gone): the deletion fails and is retried.
    secrets
        .patch(
            "target",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"value": null, "other": "eA=="}})),
        )
        .await
        .unwrap();
    env.releases()
        .delete("web", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(60),
        "the failed cleanup reported",
        || {
            let api: Api<k8s_openapi::api::events::v1::Event> = env.api();
            async move {
                let events = api
                    .list(&kube::api::ListParams::default())
                    .await
                    .unwrap()
                    .items;
                events
                    .iter()
                    .any(|e| {
                        e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web")
                            && e.note.as_deref().is_some_and(|n| n.contains("has no key"))
                    })
                    .then_some(())
            }
        },
    )
    .await;
    assert!(env.releases().get_opt("web").await.unwrap().is_some());
    // Repaired, the retried deletion uninstalls.
    secrets
        .patch(
            "target",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"stringData": {
                "value": capstan_apiserver::kubeconfig(&env.api_url(), "test")}})),
        )
        .await
        .unwrap();
    env.wait_gone("web").await;
    assert!(env.records("web").await.is_empty());
    let deployments: Api<Deployment> = env.api();
    assert!(deployments.get_opt("web-podinfo").await.unwrap().is_none());
}

#[tokio::test]
async fn a_stalled_release_is_retried_when_its_spec_changes() {
    let env = ReleaseEnv::start().await;
    env.serve_podinfo().await;
    // The rollout hangs past the timeout: the install fails and, with 0 retries, stalls.
    env.release(
        "web",
        "podinfo",
        serde_json::json!({"timeout": "3s", "postRenderers": hang_rollout()}),
    )
    .await;
    let stalled = env.wait_stalled("web").await;
    assert_eq!(stalled.status.as_ref().unwrap().install_failures, Some(1));
    assert_eq!(env.records("web").await, [(1, Status::Failed)]);
    // A new generation (neither chart nor values changed) resets the failure counters: the
    // failed release is upgraded and becomes ready.
    env.patch("web", serde_json::json!({"spec": {"postRenderers": null}}))
        .await;
    let ready = env.wait_ready("web", "upgraded").await;
    assert_eq!(ready_reason(&ready), "UpgradeSucceeded");
    assert_eq!(
        env.records("web").await,
        [(1, Status::Failed), (2, Status::Deployed)]
    );
}

/// A chart with a CRD of its own (`crds/`) and a Widget of it, a ConfigMap, and (with
/// `route`) an HTTPRoute of the Gateway API and a second ConfigMap.
fn routed_chart(dir: &Path, route: bool) -> PathBuf {
    let chart = dir.join("routed");
    capstan_testkit::write_files(
        &chart,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: routed\nversion: 0.1.0\n",
            ),
            ("values.yaml", &format!("route: {route}\n")),
            (
                "crds/widgets.yaml",
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
                 metadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  \
                 scope: Namespaced\n  names: {kind: Widget, plural: widgets, singular: widget, \
                 listKind: WidgetList}\n  versions:\n  - name: v1\n    served: true\n    \
                 storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        \
                 x-kubernetes-preserve-unknown-fields: true\n",
            ),
            (
                "templates/objects.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\n\
                 ---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {{ .Release.Name }}\n\
                 {{- if .Values.route }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  \
                 name: {{ .Release.Name }}-extra\n---\napiVersion: gateway.networking.k8s.io/v1\n\
                 kind: HTTPRoute\nmetadata:\n  name: {{ .Release.Name }}\nspec: {}\n{{- end }}\n",
            ),
        ],
    );
    chart
}

/// Helm's words for an HTTPRoute the cluster does not serve, as `Build` says them.
const UNMAPPED_ROUTE: &str = "resource mapping not found for name: \"web\" namespace: \"apps\" \
    from \"\": no matches for kind \"HTTPRoute\" in version \"gateway.networking.k8s.io/v1\"\n\
    ensure CRDs are installed first";

/// As Helm, every object of the release is mapped before any is written: an install with a
/// kind the cluster does not serve creates nothing and stores no record (the chart's own CRDs
/// count as served), and is retried; once the kind is served, it installs.
#[tokio::test]
async fn an_install_with_an_unserved_kind_writes_nothing_until_it_is_served() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    let chart = routed_chart(dir.path(), true);
    // Helm itself, the judge: it refuses at the same step and installs nothing.
    let helm = env
        .sdk(serde_json::json!({"op": "install", "chart": chart, "name": "web"}))
        .await
        .unwrap_err();
    env.serve_chart("routed", &chart).await;
    env.release("web", "routed", serde_json::json!({})).await;
    let failed = env
        .wait("web", "the install failed", |o| {
            reason_is(o, "Ready", "InstallFailed")
        })
        .await;
    let (_, _, message) = condition(&failed, "Ready").unwrap();
    // The chart's version carries the OCI digest, as Flux's does.
    assert!(
        message.starts_with("Helm install failed for release apps/web with chart routed@0.1.0+"),
        "{message}"
    );
    assert!(
        message.ends_with(&format!(
            ": unable to build kubernetes objects from release manifest: {UNMAPPED_ROUTE}"
        )),
        "{message}"
    );
    // (Helm's SDK validates against the OpenAPI document first, which the embedded control
    // plane does not serve: its cause differs, not its step.)
    assert!(
        helm.contains("unable to build kubernetes objects from release manifest: "),
        "{helm}"
    );
    let config_maps: Api<ConfigMap> = env.api();
    assert!(config_maps.get_opt("web-config").await.unwrap().is_none());
    assert!(env.records("web").await.is_empty(), "no release record");
    // Nothing stored to remediate: not counted as an install failure, not stalled.
    assert_eq!(failed.status.as_ref().unwrap().install_failures, None);
    assert!(condition(&failed, "Stalled").is_none());
    serve_http_routes(&env).await;
    let ready = env.wait_ready("web", "installed once served").await;
    assert_eq!(ready_reason(&ready), "InstallSucceeded");
    assert_eq!(env.records("web").await, vec![(1, Status::Deployed)]);
    assert!(config_maps.get_opt("web-extra").await.unwrap().is_some());
}

/// An upgrade that brings an unserved kind fails before any record or object is written: the
/// deployed release stays as it was.
#[tokio::test]
async fn an_upgrade_with_an_unserved_kind_leaves_the_release_as_it_was() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    env.serve_chart("routed", &routed_chart(dir.path(), false))
        .await;
    env.install("web", "routed", serde_json::json!({})).await;
    env.patch(
        "web",
        serde_json::json!({"spec": {"values": {"route": true}}}),
    )
    .await;
    let failed = env
        .wait("web", "the upgrade failed", |o| {
            reason_is(o, "Ready", "UpgradeFailed")
        })
        .await;
    let (_, _, message) = condition(&failed, "Ready").unwrap();
    assert!(
        message.starts_with("Helm upgrade failed for release apps/web with chart routed@0.1.0+"),
        "{message}"
    );
    assert!(
        message.ends_with(&format!(": {UNMAPPED_ROUTE}")),
        "{message}"
    );
    assert_eq!(env.records("web").await, vec![(1, Status::Deployed)]);
    let config_maps: Api<ConfigMap> = env.api();
    assert!(config_maps.get_opt("web-extra").await.unwrap().is_none());
}

/// `RetryOnFailure`: a failed install is reported for the generation (so that a `wait: true`
/// Kustomization reads the failure, not "latest observed generation is -1"), `Reconciling`
/// says when it is retried, and `--force` is recorded as handled on this path too.
#[tokio::test]
async fn the_retry_strategy_reports_the_failure_for_the_generation() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    env.serve_chart("broken", &broken_chart(dir.path())).await;
    env.release(
        "broken",
        "broken",
        serde_json::json!({
            "install": {"strategy": {"name": "RetryOnFailure", "retryInterval": "1h"}},
        }),
    )
    .await;
    let failed = env
        .wait("broken", "the install failed", |o| {
            reason_is(o, "Ready", "InstallFailed")
        })
        .await;
    let status = failed.status.as_ref().unwrap();
    assert_eq!(status.observed_generation, failed.metadata.generation);
    assert_eq!(
        condition(&failed, "Reconciling").unwrap(),
        (
            "True".to_owned(),
            "ProgressingWithRetry".to_owned(),
            "retrying after 1h0m0s".to_owned()
        )
    );
    // What a `wait: true` Kustomization's health check reads: not "latest observed generation
    // is -1" but the retry.
    let live = env.releases().get("broken").await.unwrap();
    let (_, health) = capstan_apply::compute_health(&serde_json::to_value(&live).unwrap());
    assert_eq!(health, "retrying after 1h0m0s");
    let token = "force-1";
    env.patch(
        "broken",
        serde_json::json!({"metadata": {"annotations": {
            "reconcile.fluxcd.io/requestedAt": token, "reconcile.fluxcd.io/forceAt": token,
        }}}),
    )
    .await;
    let forced = env
        .request_handled("broken", "the force handled", token)
        .await;
    let status = forced.status.as_ref().unwrap();
    assert_eq!(status.last_handled_force_at.as_deref(), Some(token));
    assert_eq!(status.install_failures, Some(2));
}

/// Serves the Gateway API's HTTPRoute (its CRD, as the flux-example's infrastructure installs it).
async fn serve_http_routes(env: &ReleaseEnv) {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    crds.patch(
        "httproutes.gateway.networking.k8s.io",
        &PatchParams::apply("test").force(),
        &Patch::Apply(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "httproutes.gateway.networking.k8s.io", "annotations": {
                "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/2466",
            }},
            "spec": {
                "group": "gateway.networking.k8s.io", "scope": "Namespaced",
                "names": {"kind": "HTTPRoute", "plural": "httproutes", "singular": "httproute",
                          "listKind": "HTTPRouteList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": {"type": "object",
                                  "x-kubernetes-preserve-unknown-fields": true}}}],
            },
        })),
    )
    .await
    .unwrap();
}

/// As Helm's `performUpgrade`, the current release's manifest is mapped too: a kind it holds
/// that the cluster no longer serves (its CRD deleted) fails the upgrade before its record.
#[tokio::test]
async fn an_upgrade_over_a_release_with_a_kind_no_longer_served_fails_as_helm() {
    let env = ReleaseEnv::start().await;
    serve_http_routes(&env).await;
    let dir = tempfile::tempdir().unwrap();
    env.serve_chart("routed", &routed_chart(dir.path(), true))
        .await;
    env.install("web", "routed", serde_json::json!({})).await;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    crds.delete(
        "httproutes.gateway.networking.k8s.io",
        &kube::api::DeleteParams::default(),
    )
    .await
    .unwrap();
    eventually(
        Duration::from_secs(30),
        "HTTPRoute no longer served",
        || {
            let crds = crds.clone();
            async move {
                crds.get_opt("httproutes.gateway.networking.k8s.io")
                    .await
                    .unwrap()
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
    env.patch(
        "web",
        serde_json::json!({"spec": {"values": {"route": false}}}),
    )
    .await;
    let failed = env
        .wait("web", "the upgrade failed", |o| {
            reason_is(o, "Ready", "UpgradeFailed")
        })
        .await;
    let (_, _, message) = condition(&failed, "Ready").unwrap();
    assert!(
        message.ends_with(&format!(
            ": unable to build kubernetes objects from current release manifest: {UNMAPPED_ROUTE}"
        )),
        "{message}"
    );
    assert_eq!(env.records("web").await, vec![(1, Status::Deployed)]);
}

/// A chart `ext` at `version` whose ConfigMap `ext-config` holds the version.
fn versioned_chart(dir: &Path, version: &str) -> PathBuf {
    let chart = dir.join(version).join("ext");
    capstan_testkit::write_files(
        &chart,
        &[
            (
                "Chart.yaml",
                &format!("apiVersion: v2\nname: ext\nversion: {version}\n"),
            ),
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ext-config\ndata:\n  version: \"{{ .Chart.Version }}\"\n",
            ),
        ],
    );
    chart
}

/// The artifact of the OCIRepository `name` once its revision starts with `tag`.
async fn oci_artifact(env: &ReleaseEnv, name: &str, tag: &str) -> serde_json::Value {
    let api = env.api::<capstan_api::OCIRepository>();
    let prefix = format!("{tag}@");
    eventually(
        Duration::from_secs(60),
        "the OCIRepository artifact",
        || {
            let api = api.clone();
            let prefix = prefix.clone();
            async move {
                let found = api.get(name).await.ok()?;
                let artifact = found.status?.artifact?;
                artifact
                    .revision
                    .starts_with(&prefix)
                    .then(|| serde_json::to_value(artifact).unwrap())
            }
        },
    )
    .await
}

#[tokio::test]
async fn a_chart_ref_to_an_external_artifact_installs_and_upgrades_on_a_new_artifact() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    let url = env.push_chart(&versioned_chart(dir.path(), "0.1.0"));
    env.push_chart(&versioned_chart(dir.path(), "0.2.0"));
    env.chart_source("oci", &url, "0.1.0").await;
    let first = oci_artifact(&env, "oci", "0.1.0").await;

    // Another controller produces the ExternalArtifact; its revision here is a version.
    let external = env.api::<capstan_api::ExternalArtifact>();
    let object: capstan_api::ExternalArtifact = serde_json::from_value(serde_json::json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "ExternalArtifact",
        "metadata": {"name": "external", "namespace": NAMESPACE},
        "spec": {},
    }))
    .unwrap();
    external
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let set_artifact = |artifact: serde_json::Value| {
        let external = external.clone();
        async move {
            external
                .patch_status(
                    "external",
                    &PatchParams::default(),
                    &Patch::Merge(&serde_json::json!({"status": {"artifact": artifact}})),
                )
                .await
                .unwrap();
        }
    };
    let mut versioned = first.clone();
    versioned["revision"] = serde_json::json!("0.1.0");
    set_artifact(versioned).await;
    env.create(
        "ext",
        serde_json::json!({
            "interval": "10m",
            "chartRef": {"kind": "ExternalArtifact", "name": "external"},
        }),
    )
    .await;
    let installed = env.wait_ready("ext", "installed").await;
    let status = installed.status.unwrap();
    // A version revision: the chart's version as it is, no digest tracked.
    assert_eq!(status.last_attempted_revision.as_deref(), Some("0.1.0"));
    assert_eq!(status.last_attempted_revision_digest, None);
    let config: ConfigMap = env.api().get("ext-config").await.unwrap();
    assert_eq!(config.data.unwrap()["version"], "0.1.0");

    // A new artifact whose revision carries a digest: an upgrade, the digest tracked.
    env.api::<capstan_api::OCIRepository>()
        .patch(
            "oci",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"spec": {"ref": {"tag": "0.2.0"}}})),
        )
        .await
        .unwrap();
    let second = oci_artifact(&env, "oci", "0.2.0").await;
    let revision = second["revision"].as_str().unwrap().to_owned();
    let digest = revision.split_once('@').unwrap().1.to_owned();
    let hex = digest.split_once(':').unwrap().1;
    let expected = format!("0.2.0+{}", &hex[..12]);
    set_artifact(second).await;
    let upgraded = env
        .wait("ext", "upgraded to the new artifact", |o| {
            ready_for_generation(o)
                && o.status
                    .as_ref()
                    .unwrap()
                    .last_attempted_revision
                    .as_deref()
                    == Some(expected.as_str())
        })
        .await;
    assert_eq!(history(&upgraded).len(), 2);
    assert_eq!(
        upgraded.status.unwrap().last_attempted_revision_digest,
        Some(digest)
    );
    let config: ConfigMap = env.api().get("ext-config").await.unwrap();
    assert_eq!(config.data.unwrap()["version"], expected);
}
