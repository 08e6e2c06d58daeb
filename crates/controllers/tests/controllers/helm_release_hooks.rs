//! HelmRelease hooks that hold no worker: a hook Job still running ends the pass (its record
//! stored with the hook `Running`, as Helm records it) and a later pass continues with it and
//! the rest in weight order, so other releases go on meanwhile; a controller restart
//! mid-hook unlocks the pending release as Flux does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use capstan_helm::release::{HookPhase, Release, Status};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams};

use crate::helm_support::{
    NAMESPACE, ReleaseEnv, condition, ready_for_generation, ready_reason, reason_is,
};
use crate::support::eventually;

/// The template of a ConfigMap `<release>-config`.
const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\ndata:\n  a: b\n";

/// A hook Job; `rollout` is the simulator's `sim.capstan.dev/rollout` (`hang` holds it
/// running until the test lets it go).
fn hook_job(name: &str, hook: &str, weight: i64, rollout: &str) -> String {
    format!(
        "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  annotations:\n    helm.sh/hook: {hook}\n    helm.sh/hook-weight: \"{weight}\"\n    sim.capstan.dev/rollout: {rollout}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n"
    )
}

/// The template text `text` rendered only if `condition` holds.
fn only_if(condition: &str, text: &str) -> String {
    format!("{{{{- if {condition} }}}}\n{text}{{{{- end }}}}\n")
}

/// The chart `name` (version 0.1.0) with `files` besides its `Chart.yaml`, written in `dir`.
fn write_chart(dir: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
    let chart = dir.join(name);
    let chart_yaml = format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n");
    let mut all = vec![("Chart.yaml", chart_yaml.as_str())];
    all.extend_from_slice(files);
    capstan_testkit::write_files(&chart, &all);
    chart
}

/// A [`ReleaseEnv`] whose controller has `workers` workers, serving the chart `name` of
/// `files` ([`write_chart`]) as the OCIRepository `name`.
async fn serving(workers: u16, name: &str, files: &[(&str, &str)]) -> ReleaseEnv {
    let env = ReleaseEnv::with_workers(workers).await;
    let dir = tempfile::tempdir().unwrap();
    env.serve_chart(name, &write_chart(dir.path(), name, files))
        .await;
    env
}

/// [`serving`] the chart `slow`, whose install runs a `pre-install` Job held running (`hang`,
/// per release name) then a quick one, and a `post-install` Job; with `hooks: false` it has
/// none.
async fn serving_slow(workers: u16) -> ReleaseEnv {
    let hooks = [
        hook_job("{{ .Release.Name }}-held", "pre-install", -5, "hang"),
        hook_job("{{ .Release.Name }}-next", "pre-install", 3, "complete"),
        hook_job("{{ .Release.Name }}-after", "post-install", 0, "complete"),
    ]
    .concat();
    serving(
        workers,
        "slow",
        &[
            ("values.yaml", "hooks: true\n"),
            ("templates/config.yaml", CONFIG_MAP),
            ("templates/hooks.yaml", &only_if(".Values.hooks", &hooks)),
        ],
    )
    .await
}

/// The reason and message of the Ready condition (empty if none).
fn ready_message(object: &capstan_api::HelmRelease) -> (String, String) {
    condition(object, "Ready")
        .map(|(_, reason, message)| (reason, message))
        .unwrap_or_default()
}

fn phase(record: &Release, hook: &str) -> HookPhase {
    record
        .hooks
        .iter()
        .find(|h| h.name == hook)
        .map(|h| h.last_run.phase)
        .unwrap()
}

/// Waits until the only record of `name` has `status` with its held hook (`<name>-held`)
/// recorded `Running`.
async fn held(env: &ReleaseEnv, name: &str, status: Status, what: &str) {
    eventually(Duration::from_secs(60), what, || async move {
        let records = env.stored(name).await;
        (records.len() == 1
            && records[0].status() == status
            && phase(&records[0], &format!("{name}-held")) == HookPhase::Running)
            .then_some(())
    })
    .await;
}

/// Lets the held hook Job of `name` complete.
async fn release_hook(env: &ReleaseEnv, name: &str) {
    env.api::<Job>()
        .patch(
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
    // Two workers, four releases whose hooks run until let go: a hook wait holding a worker
    // would leave none for the fifth release.
    let env = serving_slow(2).await;
    let slow = ["one", "two", "three", "four"];
    for name in slow {
        env.release(name, "slow", serde_json::json!({})).await;
    }
    for name in slow {
        held(&env, name, Status::PendingInstall, "the held hook running").await;
    }
    env.release(
        "quick",
        "slow",
        serde_json::json!({"values": {"hooks": false}}),
    )
    .await;
    env.wait_ready("quick", "the quick release Ready").await;
    for name in slow {
        let records = env.stored(name).await;
        assert_eq!(records.len(), 1, "{name}");
        assert_eq!(records[0].status(), Status::PendingInstall, "{name}");
        let waiting = env.releases().get(name).await.unwrap();
        assert_eq!(ready_reason(&waiting), "Progressing", "{name}");
    }

    for name in slow {
        release_hook(&env, name).await;
    }
    for name in slow {
        let installed = env.wait_ready(name, "installed").await;
        assert_eq!(ready_reason(&installed), "InstallSucceeded", "{name}");
        let records = env.stored(name).await;
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
    let env = serving_slow(2).await;
    env.release("late", "slow", serde_json::json!({"timeout": "3s"}))
        .await;
    let failed = env
        .wait("late", "the install failed", |o| {
            reason_is(o, "Ready", "InstallFailed")
        })
        .await;
    let message = ready_message(&failed).1;
    assert!(
        message.contains(&format!(
            "pre-install hook Job/{NAMESPACE}/late-held failed: timed out waiting for the condition"
        )),
        "{message}"
    );
    let records = env.stored("late").await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].status(), Status::Failed);
    assert_eq!(phase(&records[0], "late-held"), HookPhase::Failed);
    // The next hook never ran.
    assert_eq!(phase(&records[0], "late-next"), HookPhase::NotRun);
}

#[tokio::test]
async fn a_restart_mid_hook_unlocks_the_pending_install_and_upgrades() {
    let mut env = serving_slow(2).await;
    env.release("web", "slow", serde_json::json!({})).await;
    held(&env, "web", Status::PendingInstall, "the held hook running").await;
    // The controller stops while the hook runs: the record stays as Helm leaves it
    // (pending-install, the hook Running); the successor unlocks it as failed (Flux's unlock,
    // no failure counted) and upgrades, whose hooks are none of the pre-install ones.
    env.restart_controller();
    let upgraded = env.wait_ready("web", "upgraded").await;
    assert_eq!(ready_reason(&upgraded), "UpgradeSucceeded");
    let status = upgraded.status.as_ref().unwrap();
    assert_eq!(status.install_failures, None);
    assert_eq!(
        env.records("web").await,
        [(1, Status::Failed), (2, Status::Deployed)]
    );
    let records = env.stored("web").await;
    assert_eq!(phase(&records[0], "web-held"), HookPhase::Running);
}

#[tokio::test]
async fn a_running_test_hook_holds_no_worker() {
    // One worker: a test hook waited for in place would leave none for the other release.
    let env = serving(
        1,
        "tested",
        &[
            ("templates/config.yaml", CONFIG_MAP),
            (
                "templates/test.yaml",
                &hook_job("{{ .Release.Name }}-held", "test", 0, "hang"),
            ),
        ],
    )
    .await;
    env.release(
        "checked",
        "tested",
        serde_json::json!({"test": {"enable": true}}),
    )
    .await;
    held(&env, "checked", Status::Deployed, "the test hook running").await;
    env.release("other", "tested", serde_json::json!({})).await;
    env.wait_ready("other", "the other release Ready").await;
    let checked = env.releases().get("checked").await.unwrap();
    assert!(!ready_for_generation(&checked), "still testing");

    release_hook(&env, "checked").await;
    let tested = env
        .wait("checked", "tested", |o| {
            ready_for_generation(o) && condition(o, "TestSuccess").is_some()
        })
        .await;
    let (status, reason, _) = condition(&tested, "TestSuccess").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "TestSucceeded")
    );
    let records = env.stored("checked").await;
    assert_eq!(phase(&records[0], "checked-held"), HookPhase::Succeeded);
}

#[tokio::test]
async fn a_deletion_waiting_for_its_hooks_and_objects_holds_no_worker() {
    // The `held` release has a pre-delete hook held running, and its ConfigMap keeps a
    // finalizer, until the test lets them go.
    let hook = hook_job("{{ .Release.Name }}-held", "pre-delete", 0, "hang");
    let env = serving(
        1,
        "finalized",
        &[
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n  {{- if eq .Release.Name \"held\" }}\n  finalizers: [example.com/hold]\n  {{- end }}\ndata:\n  a: b\n",
            ),
            (
                "templates/hooks.yaml",
                &only_if("eq .Release.Name \"held\"", &hook),
            ),
        ],
    )
    .await;
    let no_extra = || serde_json::json!({});
    env.release("held", "finalized", no_extra()).await;
    env.wait_ready("held", "installed").await;
    env.releases()
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    held(
        &env,
        "held",
        Status::Uninstalling,
        "the pre-delete hook running",
    )
    .await;
    // One worker, and the deletion's hook runs: another release still installs meanwhile.
    env.release("first", "finalized", no_extra()).await;
    env.wait_ready("first", "another release Ready").await;
    release_hook(&env, "held").await;
    let config_maps = env.api::<ConfigMap>();
    eventually(Duration::from_secs(60), "the uninstall waiting", || {
        let (env, config_maps) = (&env, &config_maps);
        async move {
            let finalizing = config_maps
                .get_opt("held")
                .await
                .unwrap()
                .is_some_and(|c| c.metadata.deletion_timestamp.is_some());
            let records = env.stored("held").await;
            (finalizing && records.len() == 1 && records[0].status() == Status::Uninstalling)
                .then_some(())
        }
    })
    .await;
    // One worker, and the deletion waits: another release still installs meanwhile.
    env.release("second", "finalized", no_extra()).await;
    env.wait_ready("second", "another release Ready").await;
    assert!(env.releases().get_opt("held").await.unwrap().is_some());
    config_maps
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    env.wait_gone("held").await;
    assert!(env.stored("held").await.is_empty());
}

#[tokio::test]
async fn an_uninstall_remediation_waiting_for_its_hook_holds_no_worker() {
    // With `hooks: true` the install fails (its pre-install hook fails) and its uninstall runs a
    // pre-delete hook held running until the test lets it go.
    let hooks = [
        hook_job("{{ .Release.Name }}-broken", "pre-install", 0, "fail"),
        hook_job("{{ .Release.Name }}-held", "pre-delete", 0, "hang"),
    ]
    .concat();
    let env = serving(
        1,
        "remedied",
        &[
            ("values.yaml", "hooks: false\n"),
            ("templates/config.yaml", CONFIG_MAP),
            ("templates/hooks.yaml", &only_if(".Values.hooks", &hooks)),
        ],
    )
    .await;
    env.release(
        "failing",
        "remedied",
        serde_json::json!({
            "values": {"hooks": true},
            "install": {"remediation": {"retries": 1}},
        }),
    )
    .await;
    held(
        &env,
        "failing",
        Status::Uninstalling,
        "the remediation's pre-delete hook running",
    )
    .await;
    // One worker, and the remediation's hook runs: another release installs meanwhile.
    env.release("other", "remedied", serde_json::json!({}))
        .await;
    env.wait_ready("other", "the other release Ready").await;
    release_hook(&env, "failing").await;
    let remedied = env
        .wait("failing", "remediated", |o| {
            reason_is(o, "Remediated", "UninstallSucceeded")
        })
        .await;
    assert!(!ready_for_generation(&remedied));
}
