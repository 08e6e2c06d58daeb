//! HelmRelease fields a user notices, as Flux and Helm honour them: the uninstall's identity
//! gone (the deletion gives up the uninstall instead of retrying forever), the uninstall's
//! options, schema validation switched off, and drift correction touching only what drifted.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};

use crate::helm_support::{NAMESPACE, ReleaseEnv};

/// A chart `plain` with one ConfigMap named after the release (and `extra` templates).
fn plain_chart(dir: &Path, extra: &[(&str, &str)]) -> PathBuf {
    let chart = dir.join("plain");
    let mut files = vec![
        (
            "Chart.yaml",
            "apiVersion: v2\nname: plain\nversion: 0.1.0\n",
        ),
        (
            "templates/config.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  a: b\n",
        ),
    ];
    files.extend_from_slice(extra);
    capstan_testkit::write_files(&chart, &files);
    chart
}

/// Creates an object of any kind in [`NAMESPACE`] from its JSON.
async fn create_object(env: &ReleaseEnv, body: serde_json::Value) {
    let api_version = body["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        group,
        version,
        body["kind"].as_str().unwrap(),
    ));
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(env.client.clone(), NAMESPACE, &resource);
    let object: kube::api::DynamicObject = serde_json::from_value(body).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

#[tokio::test]
async fn a_deletion_whose_identity_is_gone_leaves_the_release_and_removes_the_finalizer() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    env.serve_chart("plain", &plain_chart(dir.path(), &[]))
        .await;

    // Released as a ServiceAccount bound to a Role.
    create_object(
        &env,
        serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "deployer", "namespace": NAMESPACE}}),
    )
    .await;
    create_object(
        &env,
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "deployer", "namespace": NAMESPACE},
            "rules": [{"apiGroups": [""], "resources": ["configmaps", "secrets"],
                       "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}],
        }),
    )
    .await;
    create_object(&env, serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "deployer", "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "deployer"},
        "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": NAMESPACE}],
    }))
    .await;
    env.release(
        "by-account",
        "plain",
        serde_json::json!({"serviceAccountName": "deployer"}),
    )
    .await;
    // Into a cluster reached through a kubeConfig Secret.
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "target", "namespace": NAMESPACE},
        "stringData": {"value": capstan_apiserver::kubeconfig(&env.api_url(), "test")},
    }))
    .unwrap();
    let secrets: Api<Secret> = env.api();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    env.release(
        "by-kubeconfig",
        "plain",
        serde_json::json!({"kubeConfig": {"secretRef": {"name": "target"}}}),
    )
    .await;
    env.wait_ready("by-account", "installed").await;
    env.wait_ready("by-kubeconfig", "installed").await;

    // The identities go (as when their namespace is being deleted): each deletion gives up the
    // uninstall, as Flux does, rather than retrying it forever.
    let accounts: Api<ServiceAccount> = env.api();
    accounts
        .delete("deployer", &DeleteParams::default())
        .await
        .unwrap();
    secrets
        .delete("target", &DeleteParams::default())
        .await
        .unwrap();
    env.delete_release("by-account").await;
    env.delete_release("by-kubeconfig").await;
    let config_maps: Api<ConfigMap> = env.api();
    for name in ["by-account", "by-kubeconfig"] {
        assert!(
            config_maps.get_opt(name).await.unwrap().is_some(),
            "{name} left in place"
        );
        assert_eq!(
            env.records(name).await,
            [(1, capstan_helm::release::Status::Deployed)],
            "{name}"
        );
    }
}
