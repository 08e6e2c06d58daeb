//! HelmRelease fidelity to Flux and Helm: OCI chart versions carrying the artifact's digest,
//! Helm's ownership metadata and adoption rule, and Helm's own client upgrading a release the
//! controller manages.

use std::path::{Path, PathBuf};

use capstan_api::OCIRepository;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};

use crate::helm_support::{NAMESPACE, ReleaseEnv, history};
use crate::support::wait_for;

/// A chart `demo` 0.1.0 with one ConfigMap `demo` holding `.Values.message` and the chart
/// version it was rendered with.
fn demo_chart(dir: &Path, message: &str) -> PathBuf {
    let chart = dir.join("demo");
    capstan_testkit::write_files(
        &chart,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: demo\nversion: 0.1.0\n"),
            ("values.yaml", &format!("message: {message}\n")),
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  annotations:\n    chart-version: {{ .Chart.Version | quote }}\ndata:\n  message: {{ .Values.message | quote }}\n",
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
