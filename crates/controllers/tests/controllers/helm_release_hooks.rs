//! HelmRelease hooks that hold no worker: a hook Job still running ends the pass (its record
//! stored with the hook `Running`, as Helm records it) and a later pass continues with it and
//! the rest in weight order, so other releases go on meanwhile; a controller restart
//! mid-hook unlocks the pending release as Flux does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use capstan_api::HelmRelease;
use capstan_controllers::helm_release::HelmReleaseReconciler;
use capstan_controllers::helm_storage::HelmStorage;
use capstan_controllers::runtime::{Controllers, RuntimeConfig};
use capstan_helm::release::{HookPhase, Release, Status};
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio_util::sync::CancellationToken;

use crate::support::{Env, Registry, eventually, wait_for};

const NAMESPACE: &str = "hooks";
const HELM_CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";

/// The HelmRelease controller with `concurrency` workers, stopped on drop.
struct Controller {
    shutdown: CancellationToken,
}

impl Controller {
    fn start(env: &Env, concurrency: u16) -> Self {
        let shutdown = CancellationToken::new();
        let config = RuntimeConfig {
            concurrency,
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(2),
            ..RuntimeConfig::default()
        };
        let controllers = Controllers::new(env.client.clone(), config)
            .register(HelmReleaseReconciler::new(env.client.clone()));
        tokio::spawn(controllers.run(shutdown.clone()));
        Self { shutdown }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Packages `chart` with Helm's SDK, pushes it to the registry and creates the
/// OCIRepository `source` of it.
async fn serve_chart(env: &Env, registry: &Registry, source: &str, chart: &Path) {
    let remote = registry.url("charts");
    capstan_testkit::helm_repo::sdk_push_chart(chart, &remote);
    let name = chart.file_name().unwrap().to_string_lossy();
    let object: capstan_api::OCIRepository = serde_json::from_value(serde_json::json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
        "metadata": {"name": source, "namespace": NAMESPACE},
        "spec": {
            "url": format!("{remote}/{name}"), "interval": "10m", "insecure": true,
            "ref": {"tag": "0.1.0"},
            "layerSelector": {"mediaType": HELM_CHART_LAYER, "operation": "copy"},
        },
    }))
    .unwrap();
    Api::<capstan_api::OCIRepository>::namespaced(env.client.clone(), NAMESPACE)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

/// A hook Job; `rollout` is the simulator's `sim.capstan.dev/rollout` (`hang` holds it
/// running until the test lets it go).
fn hook_job(name: &str, hook: &str, weight: i64, rollout: &str) -> String {
    format!(
        "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  annotations:\n    helm.sh/hook: {hook}\n    helm.sh/hook-weight: \"{weight}\"\n    sim.capstan.dev/rollout: {rollout}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n"
    )
}

/// A chart `slow` whose install runs a `pre-install` Job held running (`hang`, per release
/// name) then a quick one, and a `post-install` Job; with `hooks: false` it has none.
fn slow_chart(dir: &Path) -> PathBuf {
    let chart = dir.join("slow");
    let hooks = [
        hook_job("{{ .Release.Name }}-held", "pre-install", -5, "hang"),
        hook_job("{{ .Release.Name }}-next", "pre-install", 3, "complete"),
        hook_job("{{ .Release.Name }}-after", "post-install", 0, "complete"),
    ]
    .concat();
    capstan_testkit::write_files(
        &chart,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: slow\nversion: 0.1.0\n"),
            ("values.yaml", "hooks: true\n"),
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\ndata:\n  a: b\n",
            ),
            (
                "templates/hooks.yaml",
                &format!("{{{{- if .Values.hooks }}}}\n{hooks}{{{{- end }}}}\n"),
            ),
        ],
    );
    chart
}

fn releases(env: &Env) -> Api<HelmRelease> {
    Api::namespaced(env.client.clone(), NAMESPACE)
}

async fn create_release(env: &Env, name: &str, spec: serde_json::Value) {
    let object: HelmRelease = serde_json::from_value(serde_json::json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }))
    .unwrap();
    releases(env)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

fn slow_spec(extra: serde_json::Value) -> serde_json::Value {
    let mut spec = serde_json::json!({
        "interval": "10m",
        "chartRef": {"kind": "OCIRepository", "name": "slow"},
    });
    if let serde_json::Value::Object(extra) = extra {
        spec.as_object_mut().unwrap().extend(extra);
    }
    spec
}

fn ready(object: &HelmRelease) -> bool {
    object.status.as_ref().is_some_and(|s| {
        s.observed_generation == object.metadata.generation
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

fn ready_message(object: &HelmRelease) -> (String, String) {
    object
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| (c.reason.clone(), c.message.clone()))
        .unwrap_or_default()
}

async fn records(env: &Env, name: &str) -> Vec<Release> {
    HelmStorage::new(env.client.clone(), NAMESPACE)
        .history(name)
        .await
        .unwrap()
}

fn phase(record: &Release, hook: &str) -> HookPhase {
    record
        .hooks
        .iter()
        .find(|h| h.name == hook)
        .map(|h| h.last_run.phase)
        .unwrap()
}

/// Waits until the only record of `name` is `pending-install` with its held hook recorded
/// `Running`.
async fn held(env: &Env, name: &str) {
    eventually(
        Duration::from_secs(60),
        "the held hook running",
        || async move {
            let records = records(env, name).await;
            (records.len() == 1
                && records[0].status() == Status::PendingInstall
                && phase(&records[0], &format!("{name}-held")) == HookPhase::Running)
                .then_some(())
        },
    )
    .await;
}

/// Lets the held hook Job of `name` complete.
async fn release_hook(env: &Env, name: &str) {
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), NAMESPACE);
    jobs.patch(
        &format!("{name}-held"),
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
            "sim.capstan.dev/rollout": "complete"}}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn running_hooks_hold_no_worker_and_continue_in_weight_order() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let registry = Registry::start().await;
    let dir = tempfile::tempdir().unwrap();
    serve_chart(&env, &registry, "slow", &slow_chart(dir.path())).await;
    // Two workers, four releases whose hooks run until let go: a hook wait holding a worker
    // would leave none for the fifth release.
    let _controller = Controller::start(&env, 2);
    let slow = ["one", "two", "three", "four"];
    for name in slow {
        create_release(&env, name, slow_spec(serde_json::json!({}))).await;
    }
    for name in slow {
        held(&env, name).await;
    }
    create_release(
        &env,
        "quick",
        slow_spec(serde_json::json!({"values": {"hooks": false}})),
    )
    .await;
    wait_for(&releases(&env), "quick", "the quick release Ready", ready).await;
    for name in slow {
        let records = records(&env, name).await;
        assert_eq!(records.len(), 1, "{name}");
        assert_eq!(records[0].status(), Status::PendingInstall, "{name}");
        let waiting = releases(&env).get(name).await.unwrap();
        assert_eq!(ready_message(&waiting).0, "Progressing", "{name}");
    }

    for name in slow {
        release_hook(&env, name).await;
    }
    for name in slow {
        let installed = wait_for(&releases(&env), name, "installed", ready).await;
        assert_eq!(ready_message(&installed).0, "InstallSucceeded", "{name}");
        let records = records(&env, name).await;
        assert_eq!(records.len(), 1, "{name}");
        let record = &records[0];
        assert_eq!(record.status(), Status::Deployed, "{name}");
        let run = |hook: &str| {
            record
                .hooks
                .iter()
                .find(|h| h.name == format!("{name}-{hook}"))
                .unwrap()
                .last_run
                .clone()
        };
        for hook in ["held", "next", "after"] {
            assert_eq!(run(hook).phase, HookPhase::Succeeded, "{name}-{hook}");
        }
        // Weight order within the event, and post-install after the pre-install hooks.
        assert!(run("held").completed_at.unwrap() <= run("next").started_at.unwrap());
        assert!(run("next").completed_at.unwrap() <= run("after").started_at.unwrap());
    }
}

#[tokio::test]
async fn a_hook_running_past_the_action_timeout_fails_the_install() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let registry = Registry::start().await;
    let dir = tempfile::tempdir().unwrap();
    serve_chart(&env, &registry, "slow", &slow_chart(dir.path())).await;
    let _controller = Controller::start(&env, 2);
    create_release(
        &env,
        "late",
        slow_spec(serde_json::json!({"timeout": "3s"})),
    )
    .await;
    let failed = wait_for(&releases(&env), "late", "the install failed", |o| {
        ready_message(o).0 == "InstallFailed"
    })
    .await;
    let message = ready_message(&failed).1;
    assert!(
        message.contains(
            "pre-install hook Job/hooks/late-held failed: timed out waiting for the condition"
        ),
        "{message}"
    );
    let records = records(&env, "late").await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].status(), Status::Failed);
    assert_eq!(phase(&records[0], "late-held"), HookPhase::Failed);
    // The next hook never ran.
    assert_eq!(phase(&records[0], "late-next"), HookPhase::NotRun);
}

#[tokio::test]
async fn a_restart_mid_hook_unlocks_the_pending_install_and_upgrades() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let registry = Registry::start().await;
    let dir = tempfile::tempdir().unwrap();
    serve_chart(&env, &registry, "slow", &slow_chart(dir.path())).await;
    let controller = Controller::start(&env, 2);
    create_release(&env, "web", slow_spec(serde_json::json!({}))).await;
    held(&env, "web").await;
    // The controller stops while the hook runs: the record stays as Helm leaves it
    // (pending-install, the hook Running); the successor unlocks it as failed (Flux's unlock,
    // no failure counted) and upgrades, whose hooks are none of the pre-install ones.
    drop(controller);
    let _successor = Controller::start(&env, 2);
    let upgraded = wait_for(&releases(&env), "web", "upgraded", ready).await;
    assert_eq!(ready_message(&upgraded).0, "UpgradeSucceeded");
    let status = upgraded.status.as_ref().unwrap();
    assert_eq!(status.install_failures, None);
    let records = records(&env, "web").await;
    let statuses: Vec<(i64, Status)> = records.iter().map(|r| (r.version, r.status())).collect();
    assert_eq!(statuses, [(1, Status::Failed), (2, Status::Deployed)]);
    assert_eq!(phase(&records[0], "web-held"), HookPhase::Running);
}

#[tokio::test]
async fn a_running_test_hook_holds_no_worker() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let registry = Registry::start().await;
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("tested");
    capstan_testkit::write_files(
        &chart,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: tested\nversion: 0.1.0\n",
            ),
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\ndata:\n  a: b\n",
            ),
            (
                "templates/test.yaml",
                &hook_job("{{ .Release.Name }}-held", "test", 0, "hang"),
            ),
        ],
    );
    serve_chart(&env, &registry, "tested", &chart).await;
    // One worker: a test hook waited for in place would leave none for the other release.
    let _controller = Controller::start(&env, 1);
    create_release(
        &env,
        "checked",
        serde_json::json!({
            "interval": "10m",
            "chartRef": {"kind": "OCIRepository", "name": "tested"},
            "test": {"enable": true},
        }),
    )
    .await;
    eventually(Duration::from_secs(60), "the test hook running", || {
        let env = &env;
        async move {
            let records = records(env, "checked").await;
            (records.len() == 1
                && records[0].status() == Status::Deployed
                && phase(&records[0], "checked-held") == HookPhase::Running)
                .then_some(())
        }
    })
    .await;
    create_release(
        &env,
        "other",
        serde_json::json!({
            "interval": "10m",
            "chartRef": {"kind": "OCIRepository", "name": "tested"},
        }),
    )
    .await;
    wait_for(&releases(&env), "other", "the other release Ready", ready).await;
    let checked = releases(&env).get("checked").await.unwrap();
    assert!(!ready(&checked), "still testing");

    release_hook(&env, "checked").await;
    let tested = wait_for(&releases(&env), "checked", "tested", |o| {
        ready(o)
            && o.status
                .as_ref()
                .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "TestSuccess"))
    })
    .await;
    let success = tested
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "TestSuccess")
        .unwrap();
    assert_eq!(
        (success.status.as_str(), success.reason.as_str()),
        ("True", "TestSucceeded")
    );
    let records = records(&env, "checked").await;
    assert_eq!(phase(&records[0], "checked-held"), HookPhase::Succeeded);
}

#[tokio::test]
async fn a_deletion_waiting_for_its_hooks_and_objects_holds_no_worker() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let registry = Registry::start().await;
    let dir = tempfile::tempdir().unwrap();
    // The `held` release has a pre-delete hook held running, and its ConfigMap keeps a
    // finalizer, until the test lets them go.
    let chart = dir.path().join("finalized");
    capstan_testkit::write_files(
        &chart,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: finalized\nversion: 0.1.0\n",
            ),
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n  {{- if eq .Release.Name \"held\" }}\n  finalizers: [example.com/hold]\n  {{- end }}\ndata:\n  a: b\n",
            ),
            (
                "templates/hooks.yaml",
                &format!(
                    "{{{{- if eq .Release.Name \"held\" }}}}\n{}{{{{- end }}}}\n",
                    hook_job("{{ .Release.Name }}-held", "pre-delete", 0, "hang")
                ),
            ),
        ],
    );
    serve_chart(&env, &registry, "finalized", &chart).await;
    let _controller = Controller::start(&env, 1);
    let spec = || {
        serde_json::json!({
            "interval": "10m",
            "chartRef": {"kind": "OCIRepository", "name": "finalized"},
        })
    };
    create_release(&env, "held", spec()).await;
    wait_for(&releases(&env), "held", "installed", ready).await;
    releases(&env)
        .delete("held", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(60),
        "the pre-delete hook running",
        || {
            let env = &env;
            async move {
                let records = records(env, "held").await;
                (records.len() == 1
                    && records[0].status() == Status::Uninstalling
                    && phase(&records[0], "held-held") == HookPhase::Running)
                    .then_some(())
            }
        },
    )
    .await;
    // One worker, and the deletion's hook runs: another release still installs meanwhile.
    create_release(&env, "first", spec()).await;
    wait_for(&releases(&env), "first", "another release Ready", ready).await;
    release_hook(&env, "held").await;
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(env.client.clone(), NAMESPACE);
    eventually(Duration::from_secs(60), "the uninstall waiting", || {
        let (env, config_maps) = (&env, &config_maps);
        async move {
            let finalizing = config_maps
                .get_opt("held")
                .await
                .unwrap()
                .is_some_and(|c| c.metadata.deletion_timestamp.is_some());
            let records = records(env, "held").await;
            (finalizing && records.len() == 1 && records[0].status() == Status::Uninstalling)
                .then_some(())
        }
    })
    .await;
    // One worker, and the deletion waits: another release still installs meanwhile.
    create_release(&env, "second", spec()).await;
    wait_for(&releases(&env), "second", "another release Ready", ready).await;
    assert!(releases(&env).get_opt("held").await.unwrap().is_some());
    config_maps
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually(Duration::from_secs(60), "the HelmRelease gone", || {
        let api = releases(&env);
        async move { api.get_opt("held").await.unwrap().is_none().then_some(()) }
    })
    .await;
    assert!(records(&env, "held").await.is_empty());
}

#[tokio::test]
async fn an_uninstall_remediation_waiting_for_its_hook_holds_no_worker() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let registry = Registry::start().await;
    let dir = tempfile::tempdir().unwrap();
    // With `hooks: true` the install fails (its pre-install hook fails) and its uninstall runs a
    // pre-delete hook held running until the test lets it go.
    let chart = dir.path().join("remedied");
    let hooks = [
        hook_job("{{ .Release.Name }}-broken", "pre-install", 0, "fail"),
        hook_job("{{ .Release.Name }}-held", "pre-delete", 0, "hang"),
    ]
    .concat();
    capstan_testkit::write_files(
        &chart,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: remedied\nversion: 0.1.0\n",
            ),
            ("values.yaml", "hooks: false\n"),
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  a: b\n",
            ),
            (
                "templates/hooks.yaml",
                &format!("{{{{- if .Values.hooks }}}}\n{hooks}{{{{- end }}}}\n"),
            ),
        ],
    );
    serve_chart(&env, &registry, "remedied", &chart).await;
    let _controller = Controller::start(&env, 1);
    let spec = |extra: serde_json::Value| {
        let mut spec = serde_json::json!({
            "interval": "10m",
            "chartRef": {"kind": "OCIRepository", "name": "remedied"},
        });
        if let serde_json::Value::Object(extra) = extra {
            spec.as_object_mut().unwrap().extend(extra);
        }
        spec
    };
    create_release(
        &env,
        "failing",
        spec(serde_json::json!({
            "values": {"hooks": true},
            "install": {"remediation": {"retries": 1}},
        })),
    )
    .await;
    eventually(
        Duration::from_secs(60),
        "the remediation's pre-delete hook running",
        || {
            let env = &env;
            async move {
                let records = records(env, "failing").await;
                (records.len() == 1
                    && records[0].status() == Status::Uninstalling
                    && phase(&records[0], "failing-held") == HookPhase::Running)
                    .then_some(())
            }
        },
    )
    .await;
    // One worker, and the remediation's hook runs: another release installs meanwhile.
    create_release(&env, "other", spec(serde_json::json!({}))).await;
    wait_for(&releases(&env), "other", "the other release Ready", ready).await;
    release_hook(&env, "failing").await;
    let remedied = wait_for(&releases(&env), "failing", "remediated", |o| {
        o.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Remediated" && c.reason == "UninstallSucceeded")
        })
    })
    .await;
    assert!(!ready(&remedied));
}
