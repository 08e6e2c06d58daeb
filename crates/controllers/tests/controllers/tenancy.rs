//! Multi-tenancy lockdown (`capstan controller --no-cross-namespace-refs`,
//! `--default-service-account`), as Flux's flags: a Kustomization's or HelmRelease's source
//! in another namespace is refused (`Ready=False`, reason `AccessDenied`, stalled), and an
//! object without `spec.serviceAccountName` applies as the default ServiceAccount of its
//! namespace, so the control plane's RBAC decides what it may do.

use std::time::Duration;

use capstan_api::HelmRelease;
use capstan_controllers::helm_release::HelmReleaseReconciler;
use capstan_controllers::kustomization::KustomizationReconciler;
use capstan_controllers::runtime::{Controllers, RuntimeConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use tokio_util::sync::CancellationToken;

use crate::helm_support::{ReleaseEnv, chart_ref_spec, condition_is, ready_for_generation};
use crate::kustomize_support::{
    NAMESPACE, condition, config_map, create_kustomization, kustomizations, ready,
    request_reconcile, serve_source, wait_ready,
};
use crate::support::Env;

const ACCOUNT: &str = "deployer";

/// The Kustomization and HelmRelease controllers under the lockdown flags; stopped on drop.
struct Locked(CancellationToken);

impl Locked {
    fn start(client: &kube::Client, no_cross_namespace_refs: bool, account: Option<&str>) -> Self {
        let shutdown = CancellationToken::new();
        let config = RuntimeConfig {
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(2),
            no_cross_namespace_refs,
            default_service_account: account.map(str::to_owned),
            ..RuntimeConfig::default()
        };
        let tenancy = config.tenancy();
        let controllers = Controllers::new(client.clone(), config)
            .register(KustomizationReconciler::new(client.clone()).with_tenancy(tenancy.clone()))
            .register(HelmReleaseReconciler::new(client.clone()).with_tenancy(tenancy));
        tokio::spawn(controllers.run(shutdown.clone()));
        Self(shutdown)
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Creates an object of any kind in [`NAMESPACE`] from its JSON, as the admin.
async fn create_object(client: &kube::Client, body: serde_json::Value) {
    let api_version = body["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        group,
        version,
        body["kind"].as_str().unwrap(),
    ));
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &resource);
    let object: kube::api::DynamicObject = serde_json::from_value(body).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// Lets [`ACCOUNT`] manage ConfigMaps and Secrets (Helm's storage) in [`NAMESPACE`].
async fn bind_account(client: &kube::Client) {
    create_object(
        client,
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": ACCOUNT, "namespace": NAMESPACE},
            "rules": [{"apiGroups": [""], "resources": ["configmaps", "secrets"],
                       "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}],
        }),
    )
    .await;
    create_object(
        client,
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": ACCOUNT, "namespace": NAMESPACE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
        }),
    )
    .await;
}

#[tokio::test]
async fn tenancy_kustomization_cross_namespace_source_is_refused() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let (_upstream, _) = serve_source(&env, &[("app/config.yaml", &config_map())]).await;
    let _controller = Locked::start(&env.client, true, None);
    create_kustomization(
        &env,
        "other",
        serde_json::json!({
            "path": "app",
            "sourceRef": {"kind": "GitRepository", "name": "repo", "namespace": "flux-system"},
        }),
    )
    .await;
    let object = wait_ready(&env, "other", "Ready=False", |status, _, _| {
        status == "False"
    })
    .await;
    let (_, reason, message) = ready(&object).unwrap();
    assert_eq!(reason, "AccessDenied");
    assert_eq!(
        message,
        "can't access 'GitRepository/flux-system/repo', cross-namespace references have been blocked"
    );
    assert_eq!(
        condition(&object, "Stalled").map(|c| c.0),
        Some("True".to_owned())
    );
    // The same source named in the object's own namespace is used.
    create_kustomization(&env, "own", serde_json::json!({"path": "app"})).await;
    wait_ready(&env, "own", "Ready=True", |status, _, _| status == "True").await;
}

#[tokio::test]
async fn tenancy_kustomization_applies_as_the_default_service_account() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let (_upstream, _) = serve_source(&env, &[("app/config.yaml", &config_map())]).await;
    let _controller = Locked::start(&env.client, false, Some(ACCOUNT));
    create_kustomization(&env, "app", serde_json::json!({"path": "app"})).await;
    // The ServiceAccount may do nothing yet: the control plane refuses the apply.
    let object = wait_ready(&env, "app", "Ready=False", |status, _, _| status == "False").await;
    let (_, _, message) = ready(&object).unwrap();
    assert!(message.contains("ConfigMap/apps/settings"), "{message}");
    assert!(message.contains("forbidden"), "{message}");
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert!(config_maps.get_opt("settings").await.unwrap().is_none());
    // Once it is bound, the same Kustomization applies.
    bind_account(&env.client).await;
    request_reconcile(&kustomizations(&env), "app", "bound").await;
    wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;
    assert!(config_maps.get_opt("settings").await.unwrap().is_some());
}

/// A chart whose template is one ConfigMap named after the release.
fn plain_chart(dir: &std::path::Path) -> std::path::PathBuf {
    let chart = dir.join("plain");
    capstan_testkit::write_files(
        &chart,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: plain\nversion: 0.1.0\n",
            ),
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  a: b\n",
            ),
        ],
    );
    chart
}

fn ready_message(object: &HelmRelease) -> String {
    crate::helm_support::condition(object, "Ready").unwrap().2
}

#[tokio::test]
async fn tenancy_helm_release_cross_namespace_chart_source_is_refused() {
    let mut env = ReleaseEnv::start().await;
    env.stop_controller();
    let _controller = Locked::start(&env.client, true, None);
    env.create(
        "by-ref",
        serde_json::json!({
            "interval": "10m",
            "chartRef": {"kind": "OCIRepository", "name": "charts", "namespace": "flux-system"},
        }),
    )
    .await;
    env.create(
        "by-template",
        serde_json::json!({
            "interval": "10m",
            "chart": {"spec": {"chart": "plain",
                "sourceRef": {"kind": "HelmRepository", "name": "charts", "namespace": "flux-system"}}},
        }),
    )
    .await;
    for (name, expected) in [
        (
            "by-ref",
            "cross-namespace references are not allowed: cannot access OCIRepository flux-system/charts",
        ),
        (
            "by-template",
            "cross-namespace references are not allowed: cannot access HelmChart flux-system/apps-by-template",
        ),
    ] {
        let object = env.wait_stalled(name).await;
        assert!(condition_is(&object, "Ready", "False"), "{name}");
        assert_eq!(
            crate::helm_support::ready_reason(&object),
            "AccessDenied",
            "{name}"
        );
        assert_eq!(ready_message(&object), expected, "{name}");
    }
    // No HelmChart was templated into the other namespace.
    let charts: Api<capstan_api::HelmChart> = Api::namespaced(env.client.clone(), "flux-system");
    assert!(charts.get_opt("apps-by-template").await.unwrap().is_none());
}

#[tokio::test]
async fn tenancy_helm_release_installs_as_the_default_service_account() {
    let mut env = ReleaseEnv::start().await;
    env.stop_controller();
    let _controller = Locked::start(&env.client, false, Some(ACCOUNT));
    let dir = tempfile::tempdir().unwrap();
    env.serve_chart("plain", &plain_chart(dir.path())).await;
    // The ServiceAccount may do nothing yet: the control plane refuses the install.
    env.create("refused", chart_ref_spec("plain", serde_json::json!({})))
        .await;
    let object = env
        .wait("refused", "Ready=False, forbidden", |o| {
            condition_is(o, "Ready", "False") && ready_message(o).contains("forbidden")
        })
        .await;
    let message = ready_message(&object);
    assert!(
        message.contains("system:serviceaccount:apps:deployer"),
        "{message}"
    );
    let config_maps: Api<ConfigMap> = env.api();
    assert!(config_maps.get_opt("refused").await.unwrap().is_none());
    // Once it is bound, a release installs as that ServiceAccount.
    bind_account(&env.client).await;
    env.create("allowed", chart_ref_spec("plain", serde_json::json!({})))
        .await;
    env.wait("allowed", "installed", ready_for_generation).await;
    assert!(config_maps.get_opt("allowed").await.unwrap().is_some());
}
