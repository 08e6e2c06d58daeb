//! HelmRelease fidelity to Flux and Helm: OCI chart versions carrying the artifact's digest,
//! Helm's ownership metadata and adoption rule, and Helm's own client upgrading a release the
//! controller manages.

use std::path::{Path, PathBuf};

use capstan_api::OCIRepository;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};

use crate::helm_support::{
    NAMESPACE, ReleaseEnv, condition, hang_rollout, history, podinfo, reason_is,
};
use crate::support::wait_for;

/// A chart `demo` 0.1.0 with one ConfigMap named as the release, holding `.Values.message` and
/// the chart version it was rendered with.
fn demo_chart(dir: &Path, message: &str) -> PathBuf {
    let chart = dir.join("demo");
    capstan_testkit::write_files(
        &chart,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: demo\nversion: 0.1.0\n"),
            ("values.yaml", &format!("message: {message}\n")),
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n  annotations:\n    chart-version: {{ .Chart.Version | quote }}\ndata:\n  message: {{ .Values.message | quote }}\n",
            ),
        ],
    );
    chart
}

/// The OCIRepository `name`'s artifact revision, once it has one.
async fn source_revision(env: &ReleaseEnv, name: &str, not: Option<&str>) -> String {
    let source = wait_for(
        &env.api::<OCIRepository>(),
        name,
        "an artifact",
        |o: &OCIRepository| {
            o.status
                .as_ref()
                .and_then(|s| s.artifact.as_ref())
                .is_some_and(|a| Some(a.revision.as_str()) != not)
        },
    )
    .await;
    source.status.unwrap().artifact.unwrap().revision
}

/// `<version>+<first 12 hex of the digest>` and the digest, from `<tag>@sha256:<hex>`.
fn flux_version(revision: &str) -> (String, String) {
    let (tag, digest) = revision.split_once('@').unwrap();
    let hex = digest.strip_prefix("sha256:").unwrap();
    (format!("{tag}+{}", &hex[..12]), digest.to_owned())
}

#[tokio::test]
async fn a_tag_pushed_again_with_new_content_upgrades_with_the_digest_in_the_version() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    env.serve_chart("demo", &demo_chart(dir.path(), "one"))
        .await;
    env.release("demo", "demo", serde_json::json!({})).await;
    let first = source_revision(&env, "demo", None).await;
    let (version, digest) = flux_version(&first);
    let installed = env.wait_ready("demo", "installed").await;
    let status = installed.status.unwrap();
    assert_eq!(
        status.last_attempted_revision.as_deref(),
        Some(version.as_str())
    );
    assert_eq!(
        status.last_attempted_revision_digest.as_deref(),
        Some(digest.as_str())
    );
    let snapshot = &status.history[0];
    assert_eq!(snapshot.chart_version, version);
    assert_eq!(snapshot.oci_digest.as_deref(), Some(digest.as_str()));
    assert_eq!(env.record("demo", 1).await.chart_version(), version);
    let configs = env.api::<ConfigMap>();
    let config = configs.get("demo").await.unwrap();
    // The chart is rendered with the version Flux gives it.
    assert_eq!(
        config.metadata.annotations.unwrap()["chart-version"],
        version
    );

    // The same tag, pushed again with other content: a new digest, so a new chart version.
    demo_chart(dir.path(), "two");
    env.push_chart(&dir.path().join("demo"));
    env.api::<OCIRepository>()
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "repush"}},
            })),
        )
        .await
        .unwrap();
    let second = source_revision(&env, "demo", Some(&first)).await;
    assert!(second.starts_with("0.1.0@sha256:"), "{second}");
    let (version, digest) = flux_version(&second);
    let upgraded = env
        .wait("demo", "upgraded", |o| {
            history(o).first().map(|h| h.0) == Some(2)
        })
        .await;
    let status = upgraded.status.unwrap();
    assert_eq!(
        history(&env.wait_ready("demo", "upgraded").await),
        [(2, "deployed".to_owned()), (1, "superseded".to_owned())]
    );
    assert_eq!(status.history[0].chart_version, version);
    assert_eq!(
        status.history[0].oci_digest.as_deref(),
        Some(digest.as_str())
    );
    assert_eq!(
        status.last_attempted_revision.as_deref(),
        Some(version.as_str())
    );
    let config = configs.get("demo").await.unwrap();
    assert_eq!(config.data.unwrap()["message"], "two");
    assert_eq!(
        config.metadata.annotations.unwrap()["chart-version"],
        version
    );
    assert_eq!(NAMESPACE, config.metadata.namespace.unwrap());
}

/// Creates the ConfigMap `name` as someone else would: no Helm metadata.
async fn foreign_config_map(env: &ReleaseEnv, name: &str) {
    let object: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": NAMESPACE},
        "data": {"message": "mine"},
    }))
    .unwrap();
    env.api::<ConfigMap>()
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

#[tokio::test]
async fn objects_carry_helms_ownership_and_foreign_ones_are_adopted_unless_disabled() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    env.serve_chart("demo", &demo_chart(dir.path(), "one"))
        .await;
    let configs = env.api::<ConfigMap>();

    // Flux takes ownership by default: the object is adopted and carries Helm's metadata.
    foreign_config_map(&env, "adopted").await;
    env.release("adopted", "demo", serde_json::json!({})).await;
    env.wait_ready("adopted", "installed").await;
    let adopted = configs.get("adopted").await.unwrap();
    assert_eq!(adopted.data.unwrap()["message"], "one");
    let labels = adopted.metadata.labels.unwrap();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm");
    assert_eq!(labels["helm.toolkit.fluxcd.io/name"], "adopted");
    let annotations = adopted.metadata.annotations.unwrap();
    assert_eq!(annotations["meta.helm.sh/release-name"], "adopted");
    assert_eq!(annotations["meta.helm.sh/release-namespace"], NAMESPACE);
    // As Helm stores it, the manifest holds no ownership metadata.
    assert!(
        !env.record("adopted", 1)
            .await
            .manifest
            .contains("meta.helm.sh")
    );

    // With install.disableTakeOwnership, Helm's adoption rule refuses the foreign object,
    // before any release record is written.
    foreign_config_map(&env, "strict").await;
    env.release(
        "strict",
        "demo",
        serde_json::json!({"install": {"disableTakeOwnership": true}}),
    )
    .await;
    let failed = env
        .wait("strict", "the install refused", |o| {
            reason_is(o, "Ready", "InstallFailed")
        })
        .await;
    let (_, _, message) = condition(&failed, "Released").unwrap();
    assert!(
        message.starts_with("Helm install failed for release apps/strict with chart demo@0.1.0+"),
        "{message}"
    );
    assert!(
        message.ends_with(
            ": unable to continue with install: ConfigMap \"strict\" in namespace \"apps\" exists and cannot be imported into the current release: invalid ownership metadata; label validation error: missing key \"app.kubernetes.io/managed-by\": must be set to \"Helm\"; annotation validation error: missing key \"meta.helm.sh/release-name\": must be set to \"strict\"; annotation validation error: missing key \"meta.helm.sh/release-namespace\": must be set to \"apps\""
        ),
        "{message}"
    );
    assert!(env.records("strict").await.is_empty(), "no release record");
    let untouched = configs.get("strict").await.unwrap();
    assert_eq!(untouched.data.unwrap()["message"], "mine");

    // Once the object carries the release's metadata, it is adopted.
    configs
        .patch(
            "strict",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {
                "labels": {"app.kubernetes.io/managed-by": "Helm"},
                "annotations": {
                    "meta.helm.sh/release-name": "strict",
                    "meta.helm.sh/release-namespace": NAMESPACE,
                },
            }})),
        )
        .await
        .unwrap();
    // Out of install retries: `flux reconcile hr --reset` (requestedAt and resetAt).
    env.patch(
        "strict",
        serde_json::json!({"metadata": {"annotations": {
            "reconcile.fluxcd.io/requestedAt": "owned",
            "reconcile.fluxcd.io/resetAt": "owned",
        }}}),
    )
    .await;
    env.wait_ready("strict", "installed once owned").await;
    let owned = configs.get("strict").await.unwrap();
    assert_eq!(owned.data.unwrap()["message"], "one");
}

/// `(revision, status)` of each revision Helm's SDK lists in `history`, oldest first.
fn sdk_history(history: &serde_json::Value) -> Vec<(i64, String)> {
    history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["revision"].as_i64().unwrap(),
                h["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn helms_own_upgrade_meets_the_controllers_fields_unless_it_forces_conflicts() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    let chart = demo_chart(dir.path(), "one");
    env.serve_chart("demo", &chart).await;
    env.release("demo", "demo", serde_json::json!({})).await;
    env.wait_ready("demo", "installed").await;
    // The record says server-side apply, so Helm v4 upgrades it server-side.
    assert_eq!(env.record("demo", 1).await.apply_method, "ssa");

    // `helm upgrade` changing a field the controller applied: server-side apply without
    // forcing conflicts with the field manager `helm-controller`, as against Flux 2.8+.
    let upgrade = |force: bool| {
        serde_json::json!({
            "op": "upgrade", "chart": chart, "name": "demo",
            "values": {"message": "by hand"}, "force_conflicts": force,
        })
    };
    let refused = env.sdk(upgrade(false)).await.unwrap_err();
    assert!(
        refused.contains("conflict") && refused.contains("helm-controller"),
        "{refused}"
    );
    let configs = env.api::<ConfigMap>();
    assert_eq!(
        configs.get("demo").await.unwrap().data.unwrap()["message"],
        "one"
    );

    // `helm upgrade --force-conflicts` takes the fields; Helm's list and history stay right.
    env.sdk(upgrade(true)).await.unwrap();
    assert_eq!(
        configs.get("demo").await.unwrap().data.unwrap()["message"],
        "by hand"
    );
    let helm_history = env
        .sdk(serde_json::json!({"op": "history", "name": "demo"}))
        .await
        .unwrap();
    assert_eq!(
        sdk_history(&helm_history),
        [
            (1, "superseded".to_owned()),
            (2, "failed".to_owned()),
            (3, "deployed".to_owned())
        ],
        "{helm_history}"
    );
    let list = env.sdk(serde_json::json!({"op": "list"})).await.unwrap();
    let listed: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].clone(),
                r["revision"].clone(),
                r["status"].clone(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [(
            serde_json::json!("demo"),
            serde_json::json!(3),
            serde_json::json!("deployed")
        )],
        "{list}"
    );

    // The controller finds a release it did not make and upgrades it back, as Flux does.
    env.request_reconcile("demo", "back").await;
    let back = env
        .wait("demo", "upgraded back", |o| {
            history(o).first().map(|h| h.0) == Some(4)
        })
        .await;
    assert_eq!(history(&back).first(), Some(&(4, "deployed".to_owned())));
    assert_eq!(
        configs.get("demo").await.unwrap().data.unwrap()["message"],
        "one"
    );
    let helm_history = env
        .sdk(serde_json::json!({"op": "history", "name": "demo"}))
        .await
        .unwrap();
    assert_eq!(
        sdk_history(&helm_history).last(),
        Some(&(4, "deployed".to_owned())),
        "{helm_history}"
    );
}

#[tokio::test]
async fn a_rollback_to_a_client_side_applied_revision_is_recorded_as_server_side_applied() {
    let env = ReleaseEnv::start().await;
    // Revision 1 by `helm install --server-side=false`: Helm records client-side apply.
    env.sdk(serde_json::json!({
        "op": "install", "chart": podinfo(), "name": "web",
        "values": {"replicaCount": 1}, "server_side_apply": false,
    }))
    .await
    .unwrap();
    assert_eq!(env.record("web", 1).await.apply_method, "csa");
    // The HelmRelease's upgrade of it hangs, and is rolled back to revision 1.
    env.serve_podinfo().await;
    env.release(
        "web",
        "podinfo",
        serde_json::json!({
            "timeout": "3s",
            "postRenderers": hang_rollout(),
            "upgrade": {"remediation": {"retries": 1}},
        }),
    )
    .await;
    env.wait("web", "rolled back", |o| {
        reason_is(o, "Remediated", "RollbackSucceeded")
    })
    .await;
    // The controller applied revision 3 server-side, and its record says so, so that Helm's
    // own client goes on server-side too.
    let rolled_back = env.record("web", 3).await;
    assert_eq!(rolled_back.info.description, "Rollback to 1");
    assert_eq!(rolled_back.apply_method, "ssa");
}
