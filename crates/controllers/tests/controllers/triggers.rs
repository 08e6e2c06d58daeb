//! Triggers from other kinds reconcile a Kustomization at once (its interval is an hour): an
//! ExternalArtifact's new artifact and a changed ConfigMap of `postBuild.substituteFrom`.

use std::time::Duration;

use capstan_api::{ExternalArtifact, GitRepository};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};

use crate::kustomize_support::{
    KustomizeController, NAMESPACE, create_kustomization, request_reconcile, setup, wait_ready,
    wait_source_revision,
};
use crate::support::{Env, GitServer, eventually};

/// The GitRepository `repo`'s artifact, as an ExternalArtifact would carry it.
async fn repo_artifact(env: &Env) -> serde_json::Value {
    let repo: GitRepository = env.git_repositories(NAMESPACE).get("repo").await.unwrap();
    serde_json::to_value(repo.status.unwrap().artifact.unwrap()).unwrap()
}

async fn set_artifact(api: &Api<ExternalArtifact>, artifact: serde_json::Value) {
    api.patch_status(
        "external",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"status": {"artifact": artifact}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn an_external_artifact_change_reconciles_its_consumers_at_once() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    // Served by Capstan (its CRD is installed with the others); another controller produces it.
    let external: Api<ExternalArtifact> = Api::namespaced(env.client.clone(), NAMESPACE);
    let upstream = GitServer::start().await;
    let first = upstream.commit(&[("app/config.yaml", &settings("one"))], "first");
    env.create_git_repository(
        NAMESPACE,
        "repo",
        serde_json::json!({"url": upstream.url(), "interval": "10m", "ref": {"branch": "main"}}),
    )
    .await;
    wait_source_revision(&env, &format!("main@sha1:{first}")).await;
    let object: ExternalArtifact = serde_json::from_value(serde_json::json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "ExternalArtifact",
        "metadata": {"name": "external", "namespace": NAMESPACE},
        "spec": {},
    }))
    .unwrap();
    external
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    set_artifact(&external, repo_artifact(&env).await).await;
    let _controller = KustomizeController::start(&env);
    create_kustomization(
        &env,
        "app",
        serde_json::json!({
            "path": "app", "interval": "1h",
            "sourceRef": {"kind": "ExternalArtifact", "name": "external"},
        }),
    )
    .await;
    wait_ready(
        &env,
        "app",
        "the first artifact applied",
        |status, _, message| status == "True" && message.contains(&first),
    )
    .await;

    let second = upstream.commit(&[("app/config.yaml", &settings("two"))], "second");
    request_reconcile(&env.git_repositories(NAMESPACE), "repo", "now").await;
    wait_source_revision(&env, &format!("main@sha1:{second}")).await;
    set_artifact(&external, repo_artifact(&env).await).await;
    wait_ready(
        &env,
        "app",
        "the new artifact applied",
        |status, _, message| status == "True" && message.contains(&second),
    )
    .await;
    assert_eq!(env_value(&env).await, "two");
}

#[tokio::test]
async fn a_changed_substitute_from_config_map_reconciles_at_once() {
    let (env, _upstream, _controller, _) = setup(&[("app/config.yaml", &settings("${env}"))]).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    let vars = |value: &str| -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "vars", "namespace": NAMESPACE,
                // Flux's opt-in: only labelled ConfigMaps and Secrets trigger at once.
                "labels": {"reconcile.fluxcd.io/watch": "Enabled"},
            },
            "data": {"env": value},
        }))
        .unwrap()
    };
    config_maps
        .create(&PostParams::default(), &vars("dev"))
        .await
        .unwrap();
    create_kustomization(
        &env,
        "app",
        serde_json::json!({
            "path": "app", "interval": "1h",
            "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "vars"}]},
        }),
    )
    .await;
    wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;
    assert_eq!(env_value(&env).await, "dev");

    config_maps
        .replace("vars", &PostParams::default(), &{
            let mut changed = config_maps.get("vars").await.unwrap();
            changed.data = vars("prod").data;
            changed
        })
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "the new value applied", || {
        let env = &env;
        async move { (env_value(env).await == "prod").then_some(()) }
    })
    .await;
}

/// A ConfigMap `settings` whose `env` is `value`.
fn settings(value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {NAMESPACE}\ndata:\n  env: \"{value}\"\n"
    )
}

/// The applied `settings` ConfigMap's `env`.
async fn env_value(env: &Env) -> String {
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    config_maps
        .get_opt("settings")
        .await
        .ok()
        .flatten()
        .and_then(|c| c.data?.get("env").cloned())
        .unwrap_or_default()
}
