//! Remote bases: a kustomization naming a directory of another Git repository (kustomize's
//! `<url>//<path>?ref=<ref>`) is fetched by the Kustomization controller and applied, as Flux
//! does by default; with remote bases turned off (`capstan controller --no-remote-bases`) the
//! build fails, naming the kustomization file and the entry.

use std::time::Duration;

use capstan_controllers::kustomization::KustomizationReconciler;
use capstan_controllers::runtime::{Controllers, RuntimeConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::kustomize_support::{
    KustomizeController, NAMESPACE, create_kustomization, kustomizations, request_reconcile,
    serve_source, wait_ready,
};
use capstan_testkit::git;

use crate::support::{Env, GitServer, eventually};

/// A Kustomization controller with remote bases refused; stopped on drop.
struct NoRemoteBases(CancellationToken);

impl NoRemoteBases {
    fn start(env: &Env) -> Self {
        let shutdown = CancellationToken::new();
        let config = RuntimeConfig {
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(2),
            ..RuntimeConfig::default()
        };
        let client = env.client.clone();
        let controllers = Controllers::new(client.clone(), config)
            .register(KustomizationReconciler::new(client).with_remote_bases(false));
        tokio::spawn(controllers.run(shutdown.clone()));
        Self(shutdown)
    }
}

impl Drop for NoRemoteBases {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

fn config_map(name: &str, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: {value}\n")
}

#[tokio::test]
async fn remote_bases_are_fetched_at_their_ref_and_refused_under_no_remote_bases() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;

    // The remote base: `base/` at tag v1; `main` moves on afterwards.
    let remote = GitServer::start().await;
    remote.commit(
        &[
            ("base/kustomization.yaml", "resources:\n- settings.yaml\n"),
            ("base/settings.yaml", &config_map("remote-settings", "v1")),
        ],
        "v1",
    );
    git(&remote.work(), &["tag", "v1"]);
    git(&remote.work(), &["push", "-q", "origin", "v1"]);
    remote.commit(
        &[("base/settings.yaml", &config_map("remote-settings", "v2"))],
        "v2",
    );

    // The source: a kustomization with the remote base and a local file.
    let entry = format!("{}//base?ref=v1", remote.url());
    let _upstream = serve_source(
        &env,
        &[
            (
                "app/kustomization.yaml",
                &format!("namespace: {NAMESPACE}\nresources:\n- {entry}\n- local.yaml\n"),
            ),
            ("app/local.yaml", &config_map("local-settings", "here")),
        ],
    )
    .await;

    // Refused: the message names the kustomization file and the entry.
    let refusing = NoRemoteBases::start(&env);
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "app", "interval": "1h", "prune": true}),
    )
    .await;
    let object = wait_ready(&env, "app", "the remote base refused", |status, _, _| {
        status == "False"
    })
    .await;
    let (_, reason, message) = crate::kustomize_support::ready(&object).unwrap();
    assert_eq!(reason, "BuildFailed", "{message}");
    assert!(message.contains("app/kustomization.yaml"), "{message}");
    assert!(message.contains(&entry), "{message}");
    assert!(message.contains("remote bases are disabled"), "{message}");
    assert!(message.contains("--no-remote-bases"), "{message}");
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert!(
        config_maps
            .get_opt("local-settings")
            .await
            .unwrap()
            .is_none()
    );
    drop(refusing);

    // Allowed (the default): the base is fetched at v1, not at main.
    let _controller = KustomizeController::start(&env);
    request_reconcile(&kustomizations(&env), "app", "allowed").await;
    wait_ready(&env, "app", "the remote base applied", |status, _, _| {
        status == "True"
    })
    .await;
    let settings = eventually(Duration::from_secs(20), "the remote ConfigMap", || {
        let api = config_maps.clone();
        async move { api.get_opt("remote-settings").await.ok().flatten() }
    })
    .await;
    assert_eq!(
        settings.data.unwrap().get("value").map(String::as_str),
        Some("v1")
    );
    assert!(
        config_maps
            .get_opt("local-settings")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn a_remote_base_at_a_missing_ref_fails_naming_the_entry() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let remote = GitServer::start().await;
    remote.commit(&[("base/kustomization.yaml", "resources: []\n")], "first");
    let entry = format!("{}//base?ref=no-such-tag", remote.url());
    let _upstream = serve_source(
        &env,
        &[(
            "app/kustomization.yaml",
            &format!("resources:\n- {entry}\n"),
        )],
    )
    .await;
    let _controller = KustomizeController::start(&env);
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "app", "interval": "1h"}),
    )
    .await;
    let object = wait_ready(&env, "app", "the fetch failure", |status, _, _| {
        status == "False"
    })
    .await;
    let (_, _, message) = crate::kustomize_support::ready(&object).unwrap();
    assert!(message.contains("app/kustomization.yaml"), "{message}");
    assert!(message.contains(&entry), "{message}");
    assert!(
        message.contains("no branch, tag or commit \"no-such-tag\""),
        "{message}"
    );
}
