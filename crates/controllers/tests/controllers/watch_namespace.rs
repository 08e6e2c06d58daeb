//! One watched namespace (`capstan controller --watch-all-namespaces=false`, Flux's flag with
//! `RUNTIME_NAMESPACE`): the objects of that namespace are reconciled, triggers included; those
//! of any other namespace are never touched (no status, no finalizer), and a reference into an
//! unwatched namespace says so.

use std::net::SocketAddr;
use std::time::Duration;

use capstan_api::{GitRepository, Kustomization};
use capstan_apiserver::{ApiServer, Config};
use capstan_controllers::runtime::RuntimeConfig;
use capstan_source::storage::Storage;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;

use crate::support::{
    GitServer, client_from_kubeconfig, eventually, install_crds, request_reconcile,
};

const WATCHED: &str = "flux-system";
const OTHER: &str = "other";

/// Creates a namespaced object from JSON.
async fn create<K>(client: &kube::Client, namespace: &str, body: serde_json::Value)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(body).unwrap();
    Api::<K>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

/// A GitRepository `repo` of `url` and a Kustomization `app` of `./<namespace>` from it,
/// pointing at the source in `source_namespace`.
async fn source_and_kustomization(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    source_namespace: &str,
    url: &str,
) {
    if source_namespace == namespace {
        create::<GitRepository>(
            client,
            namespace,
            serde_json::json!({
                "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                "metadata": {"name": "repo", "namespace": namespace},
                "spec": {"url": url, "interval": "10m", "ref": {"branch": "main"}},
            }),
        )
        .await;
    }
    create::<Kustomization>(
        client,
        namespace,
        serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"interval": "10m", "prune": false, "path": format!("./{namespace}"),
                     "sourceRef": {"kind": "GitRepository", "name": "repo",
                                   "namespace": source_namespace}},
        }),
    )
    .await;
}

/// Commits a ConfigMap `settings` with `value` under `./<namespace>` for both namespaces.
fn commit(upstream: &GitServer, value: &str) {
    let owned = files(value);
    let borrowed: Vec<(&str, &str)> = owned
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    upstream.commit(&borrowed, value);
}

fn files(value: &str) -> Vec<(String, String)> {
    [WATCHED, OTHER]
        .iter()
        .map(|namespace| {
            (
                format!("{namespace}/settings.yaml"),
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {namespace}\ndata:\n  value: {value}\n"
                ),
            )
        })
        .collect()
}

fn ready(conditions: Option<&Vec<capstan_api::meta::Condition>>) -> Option<(String, String)> {
    conditions?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.message.clone()))
}

/// All of Capstan's controllers watching [`WATCHED`] only, with their artifact server; they
/// stop when the guard is dropped.
async fn start_watching(client: &kube::Client) -> (tempfile::TempDir, tokio_util::sync::DropGuard) {
    let storage_dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let storage = Storage::new(
        storage_dir.path(),
        &listener.local_addr().unwrap().to_string(),
    )
    .unwrap();
    let config = RuntimeConfig {
        backoff_base: Duration::from_millis(200),
        backoff_max: Duration::from_secs(2),
        watch_namespace: Some(WATCHED.to_owned()),
        ..RuntimeConfig::default()
    };
    let controllers = capstan_controllers::controllers(client.clone(), &storage, config);
    let app = controllers.router();
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
            .unwrap();
    });
    tokio::spawn(controllers.run(shutdown.clone()));
    (storage_dir, shutdown.drop_guard())
}

#[tokio::test(flavor = "multi_thread")]
async fn one_watched_namespace_reconciles_there_and_leaves_other_namespaces_untouched() {
    capstan_source::tls::install_default_provider();
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = client_from_kubeconfig(&server.kubeconfig()).await;
    install_crds(&client).await;
    for name in [WATCHED, OTHER] {
        let namespace: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
    }
    let upstream = GitServer::start().await;
    commit(&upstream, "one");

    // The other namespace's objects exist first, so that a controller watching them would
    // have reconciled them by the time the watched ones are done.
    source_and_kustomization(&client, OTHER, "app", OTHER, &upstream.url()).await;

    let (_storage, _stop) = start_watching(&client).await;

    source_and_kustomization(&client, WATCHED, "app", WATCHED, &upstream.url()).await;
    // A reference into the unwatched namespace: that source is never reconciled here.
    source_and_kustomization(&client, WATCHED, "across", OTHER, &upstream.url()).await;

    let settings = |namespace: &str| Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let value = |wanted: &'static str| {
        let api = settings(WATCHED);
        move || {
            let api = api.clone();
            async move {
                api.get_opt("settings")
                    .await
                    .ok()
                    .flatten()
                    .filter(|c| c.data.as_ref().is_some_and(|d| d["value"] == wanted))
            }
        }
    };
    eventually(
        Duration::from_secs(40),
        "the watched namespace applied",
        value("one"),
    )
    .await;
    // The objects are applied before the health wait ends: Ready follows.
    let kustomizations = Api::<Kustomization>::namespaced(client.clone(), WATCHED);
    eventually(Duration::from_secs(40), "the Kustomization Ready", || {
        let kustomizations = kustomizations.clone();
        async move {
            let app = kustomizations.get("app").await.ok()?;
            let (status, _) = ready(app.status.as_ref().map(|s| &s.conditions))?;
            (status == "True").then_some(())
        }
    })
    .await;

    // Triggers are watched in that namespace too: a new commit, fetched on request, is applied
    // at once (the Kustomization's interval is ten minutes).
    commit(&upstream, "two");
    let sources = Api::<GitRepository>::namespaced(client.clone(), WATCHED);
    request_reconcile(&sources, "repo", "again").await;
    eventually(
        Duration::from_secs(40),
        "the new commit applied",
        value("two"),
    )
    .await;

    // The reference into the unwatched namespace waits, saying why.
    eventually(
        Duration::from_secs(40),
        "the cross-namespace message",
        || {
            let kustomizations = kustomizations.clone();
            async move {
                let across = kustomizations.get("across").await.ok()?;
                let (status, message) = ready(across.status.as_ref().map(|s| &s.conditions))?;
                (status == "False" && message.contains("not watched")).then_some(message)
            }
        },
    )
    .await;

    // Nothing in the other namespace was touched.
    let other_source = Api::<GitRepository>::namespaced(client.clone(), OTHER)
        .get("repo")
        .await
        .unwrap();
    let other_app = Api::<Kustomization>::namespaced(client.clone(), OTHER)
        .get("app")
        .await
        .unwrap();
    assert!(
        // (The CRD's default status, `observedGeneration: -1`, is the API server's.)
        other_source
            .status
            .as_ref()
            .is_none_or(|s| s.conditions.is_empty() && s.artifact.is_none())
            && other_source.metadata.finalizers.is_none(),
        "{other_source:?}"
    );
    assert!(
        other_app
            .status
            .as_ref()
            .is_none_or(|s| s.conditions.is_empty() && s.last_attempted_revision.is_none())
            && other_app.metadata.finalizers.is_none(),
        "{other_app:?}"
    );
    assert!(
        settings(OTHER).get_opt("settings").await.unwrap().is_none(),
        "nothing applied from the unwatched namespace"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn helm_release_references_into_an_unwatched_namespace_say_so() {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = client_from_kubeconfig(&server.kubeconfig()).await;
    install_crds(&client).await;
    for name in [WATCHED, OTHER] {
        let namespace: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
    }
    // The chart's source lives in the unwatched namespace: nothing here ever reconciles it.
    create::<capstan_api::OCIRepository>(
        &client,
        OTHER,
        serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
            "metadata": {"name": "podinfo", "namespace": OTHER},
            "spec": {"url": "oci://127.0.0.1:1/podinfo", "interval": "10m"},
        }),
    )
    .await;
    let (_storage, _stop) = start_watching(&client).await;
    let release = |name: &str, spec: serde_json::Value| {
        serde_json::json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": WATCHED},
            "spec": spec,
        })
    };
    let chart_ref =
        serde_json::json!({"kind": "OCIRepository", "name": "podinfo", "namespace": OTHER});
    create::<capstan_api::HelmRelease>(
        &client,
        WATCHED,
        release(
            "across",
            serde_json::json!({"interval": "10m", "chartRef": chart_ref}),
        ),
    )
    .await;
    create::<capstan_api::HelmRelease>(
        &client,
        WATCHED,
        release(
            "dependent",
            serde_json::json!({
                "interval": "10m", "chartRef": chart_ref,
                "dependsOn": [{"name": "app", "namespace": OTHER}],
            }),
        ),
    )
    .await;

    let releases = Api::<capstan_api::HelmRelease>::namespaced(client.clone(), WATCHED);
    for (name, what) in [
        ("across", "OCIRepository 'other/podinfo'"),
        ("dependent", "dependency 'other/app'"),
    ] {
        let releases = releases.clone();
        let message = eventually(Duration::from_secs(30), "the Ready message", move || {
            let releases = releases.clone();
            async move {
                let release = releases.get(name).await.ok()?;
                let (status, message) = ready(release.status.as_ref().map(|s| &s.conditions))?;
                (status == "False" && message.contains("is not watched")).then_some(message)
            }
        })
        .await;
        assert!(message.contains(what), "{message}");
        assert!(
            message.contains(
                "namespace 'other' is not watched: this controller watches only 'flux-system'"
            ),
            "{message}"
        );
    }
}
