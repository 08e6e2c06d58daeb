//! Ordering HelmReleases against Kustomizations the way Flux users do it. Flux's `dependsOn`
//! names objects of the same kind only (a HelmRelease waits for HelmReleases, a Kustomization
//! for Kustomizations; the maintainers decline cross-kind references), so a HelmRelease is put
//! after a Kustomization by the Kustomization that applies it, and things are put after a
//! HelmRelease by a Kustomization that waits for it (`wait: true` or `healthChecks`).

use std::time::Duration;

use capstan_api::HelmRelease;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};

use crate::helm_support::HelmController;
use crate::kustomize_support::{
    NAMESPACE, create_kustomization, kustomizations, ready, setup, wait_ready,
};
use crate::support::eventually;

/// `infra` holds the values the release needs; `apps` the chart's source and the release
/// (reading those values, not optional); `after` what must only land once the release runs.
fn files(repository: &str) -> Vec<(String, String)> {
    let infra = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-values\n  namespace: {NAMESPACE}\n\
         data:\n  values.yaml: |\n    replicaCount: 2\n"
    );
    let apps = format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  \
         namespace: {NAMESPACE}\nspec:\n  url: {repository}\n  interval: 10m\n---\n\
         apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: app\n  \
         namespace: {NAMESPACE}\nspec:\n  interval: 10m\n  chart:\n    spec:\n      chart: podinfo\n      \
         sourceRef:\n        kind: HelmRepository\n        name: charts\n  valuesFrom:\n  - kind: ConfigMap\n    \
         name: app-values\n"
    );
    let after = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: after-app\n  namespace: {NAMESPACE}\n\
         data:\n  ready: \"yes\"\n"
    );
    vec![
        ("infra/values.yaml".to_owned(), infra),
        ("apps/release.yaml".to_owned(), apps),
        ("after/marker.yaml".to_owned(), after),
    ]
}

fn release_ready(object: &HelmRelease) -> bool {
    object.status.as_ref().is_some_and(|s| {
        s.observed_generation == object.metadata.generation
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

#[tokio::test]
async fn a_kustomization_orders_a_release_after_its_dependency_and_waits_for_it() {
    let repository = tempfile::tempdir().unwrap();
    let podinfo = capstan_testkit::corpus("podinfo/src/charts/podinfo");
    capstan_testkit::helm_repo::sdk_repository(&[&podinfo], repository.path(), None);
    let server = capstan_testkit::helm_repo::HelmRepoServer::start(repository.path(), None).await;
    let files = files(&server.url());
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let (env, _git, _kustomize, _) = setup(&borrowed).await;
    let _helm = HelmController::start(&env);

    // `infra` starts suspended: it never became Ready, so nothing after it may run.
    create_kustomization(
        &env,
        "infra",
        serde_json::json!({"path": "infra", "suspend": true}),
    )
    .await;
    create_kustomization(
        &env,
        "apps",
        serde_json::json!({
            "path": "apps", "dependsOn": [{"name": "infra"}], "wait": true, "timeout": "2m",
            "retryInterval": "1s",
        }),
    )
    .await;
    create_kustomization(
        &env,
        "after",
        serde_json::json!({"path": "after", "dependsOn": [{"name": "apps"}], "retryInterval": "1s"}),
    )
    .await;
    let held = wait_ready(
        &env,
        "apps",
        "apps held by its dependency",
        |status, reason, _| status == "False" && reason == "DependencyNotReady",
    )
    .await;
    assert!(
        ready(&held).unwrap().2.contains("infra"),
        "the message names the dependency: {:?}",
        ready(&held)
    );
    let releases: Api<HelmRelease> = Api::namespaced(env.client.clone(), NAMESPACE);
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert!(releases.get_opt("app").await.unwrap().is_none());
    assert!(config_maps.get_opt("after-app").await.unwrap().is_none());

    // Resumed, `infra` applies the values; then `apps` applies the release, which installs
    // with them; `apps` is Ready only once the release is, and `after` only after that.
    kustomizations(&env)
        .patch(
            "infra",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"suspend": false}})),
        )
        .await
        .unwrap();
    let marker = eventually(Duration::from_secs(120), "`after` applied", || {
        let api = config_maps.clone();
        async move { api.get_opt("after-app").await.ok()? }
    })
    .await;
    let release = releases.get("app").await.unwrap();
    assert!(release_ready(&release), "{:?}", release.status);
    let installed = release
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Released"))
        .map(|c| c.last_transition_time.0)
        .expect("the Released condition");
    let applied = marker.metadata.creation_timestamp.unwrap().0;
    assert!(
        installed <= applied,
        "released at {installed}, `after` applied at {applied}"
    );
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), NAMESPACE);
    let deployment = deployments.get("app-podinfo").await.unwrap();
    assert_eq!(
        deployment.spec.replicas,
        Some(2),
        "the release read the values `infra` applied"
    );
    let apps = kustomizations(&env).get("apps").await.unwrap();
    assert_eq!(ready(&apps).unwrap().0, "True");
}
