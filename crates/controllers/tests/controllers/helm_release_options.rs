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

/// The ConfigMap `name` in [`NAMESPACE`], if it exists.
async fn config_map(env: &ReleaseEnv, name: &str) -> Option<ConfigMap> {
    env.api::<ConfigMap>().get_opt(name).await.unwrap()
}

#[tokio::test]
async fn the_uninstall_waits_for_deletion_unless_disabled_and_keeps_history_when_asked() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    // Each release's ConfigMap carries a finalizer nobody removes but the test.
    let chart = dir.path().join("held");
    capstan_testkit::write_files(
        &chart,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: held\nversion: 0.1.0\n"),
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n  finalizers: [example.com/hold]\ndata:\n  a: b\n",
            ),
        ],
    );
    env.serve_chart("held", &chart).await;
    env.release(
        "waiting",
        "held",
        serde_json::json!({"uninstall": {"timeout": "5m"}}),
    )
    .await;
    env.release(
        "quick",
        "held",
        serde_json::json!({"uninstall": {"disableWait": true, "keepHistory": true}}),
    )
    .await;
    env.wait_ready("waiting", "installed").await;
    env.wait_ready("quick", "installed").await;

    // disableWait: the deletion is done while the ConfigMap still waits for its finalizer;
    // keepHistory: the record stays, uninstalled.
    env.delete_release("quick").await;
    let left = config_map(&env, "quick").await.expect("still finalizing");
    assert!(left.metadata.deletion_timestamp.is_some());
    assert_eq!(
        env.records("quick").await,
        [(1, capstan_helm::release::Status::Uninstalled)]
    );

    // By default the uninstall waits for its objects to be gone: the HelmRelease stays while
    // the ConfigMap is finalizing, its record `uninstalling`.
    env.releases()
        .delete("waiting", &DeleteParams::default())
        .await
        .unwrap();
    crate::support::eventually(
        std::time::Duration::from_secs(60),
        "the uninstall waiting for the ConfigMap",
        || {
            let env = &env;
            async move {
                let finalizing = config_map(env, "waiting")
                    .await
                    .is_some_and(|c| c.metadata.deletion_timestamp.is_some());
                (finalizing
                    && env.records("waiting").await
                        == [(1, capstan_helm::release::Status::Uninstalling)])
                .then_some(())
            }
        },
    )
    .await;
    assert!(env.releases().get_opt("waiting").await.unwrap().is_some());
    env.api::<ConfigMap>()
        .patch(
            "waiting",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    env.wait_gone("waiting").await;
    assert!(env.records("waiting").await.is_empty());
}

#[tokio::test]
async fn the_deletion_propagation_orphans_or_collects_the_dependents() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    env.serve_chart("plain", &plain_chart(dir.path(), &[]))
        .await;
    let policies = ["orphan", "foreground", "background"];
    for policy in policies {
        env.release(
            policy,
            "plain",
            serde_json::json!({"uninstall": {"deletionPropagation": policy}}),
        )
        .await;
    }
    for policy in policies {
        env.wait_ready(policy, "installed").await;
        // A dependent of the release's ConfigMap (as a ReplicaSet is of its Deployment).
        let owner = config_map(&env, policy).await.unwrap();
        create_object(
            &env,
            serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("{policy}-dependent"), "namespace": NAMESPACE,
                    "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                        "name": policy, "uid": owner.metadata.uid.unwrap()}]},
            }),
        )
        .await;
    }
    for policy in policies {
        env.delete_release(policy).await;
        assert!(config_map(&env, policy).await.is_none(), "{policy}");
    }
    // Orphaned: the dependent stays, without its owner reference.
    let orphan = config_map(&env, "orphan-dependent")
        .await
        .expect("orphaned");
    assert!(
        orphan
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty(),
        "the owner reference is dropped"
    );
    // Foreground: the owner was gone only once its dependent was, and the uninstall waited
    // for the owner.
    assert!(config_map(&env, "foreground-dependent").await.is_none());
    // Background: the garbage collector deletes the dependent after its owner.
    crate::support::eventually(
        std::time::Duration::from_secs(60),
        "the dependent collected",
        || {
            let env = &env;
            async move {
                config_map(env, "background-dependent")
                    .await
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
}

#[tokio::test]
async fn a_name_with_history_is_reused_only_with_install_replace() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    let chart = plain_chart(dir.path(), &[]);
    env.serve_chart("plain", &chart).await;
    // A release of that name uninstalled with its history kept (e.g. by `helm uninstall
    // --keep-history`).
    let loaded = capstan_helm::chart::load(&chart).unwrap();
    let mut old = capstan_helm::release::Release::new(
        "web",
        NAMESPACE,
        1,
        capstan_helm::release::Chart::from_loaded(&loaded),
    );
    old.set_status(
        capstan_helm::release::Status::Uninstalled,
        "Uninstallation complete",
    );
    capstan_controllers::helm_storage::HelmStorage::new(env.client.clone(), NAMESPACE)
        .create(&old)
        .await
        .unwrap();
    env.release("web", "plain", serde_json::json!({})).await;
    let refused = env.wait_stalled("web").await;
    let (_, reason, message) = crate::helm_support::condition(&refused, "Ready").unwrap();
    assert_eq!(reason, "InstallFailed");
    assert!(
        message.contains("cannot reuse a name that is still in use"),
        "{message}"
    );
    assert!(config_map(&env, "web").await.is_none());

    env.patch(
        "web",
        serde_json::json!({"spec": {"install": {"replace": true}}}),
    )
    .await;
    env.wait_ready("web", "installed in place of the old release")
        .await;
    assert_eq!(
        env.records("web").await,
        [
            (1, capstan_helm::release::Status::Superseded),
            (2, capstan_helm::release::Status::Deployed)
        ]
    );
}

#[tokio::test]
async fn schema_validation_can_be_disabled_and_the_legacy_wait_is_refused() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    let chart = plain_chart(
        dir.path(),
        &[
            ("values.yaml", "replicas: 1\n"),
            (
                "values.schema.json",
                r#"{"type": "object", "properties": {"replicas": {"type": "integer"}}}"#,
            ),
            (
                "templates/replicas.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-replicas\ndata:\n  replicas: {{ .Values.replicas | quote }}\n",
            ),
        ],
    );
    env.serve_chart("plain", &chart).await;
    // Values the schema refuses install with `disableSchemaValidation` (Helm's
    // SkipSchemaValidation); `waitStrategy: poller` is the wait every action does.
    env.release(
        "unchecked",
        "plain",
        serde_json::json!({
            "values": {"replicas": "two"},
            "install": {"disableSchemaValidation": true},
            "waitStrategy": {"name": "poller"},
        }),
    )
    .await;
    env.wait_ready("unchecked", "installed").await;
    let replicas = config_map(&env, "unchecked-replicas").await.unwrap();
    assert_eq!(replicas.data.unwrap()["replicas"], "two");
    // And upgrade with the upgrade's switch; without it the schema refuses them.
    env.patch(
        "unchecked",
        serde_json::json!({"spec": {"values": {"replicas": "three"}}}),
    )
    .await;
    let refused = env
        .wait("unchecked", "the upgrade refused", |o| {
            crate::helm_support::reason_is(o, "Ready", "UpgradeFailed")
        })
        .await;
    let message = crate::helm_support::condition(&refused, "Ready").unwrap().2;
    assert!(
        message.contains("values don't meet the specifications of the schema"),
        "{message}"
    );
    env.patch(
        "unchecked",
        serde_json::json!({"spec": {"upgrade": {"disableSchemaValidation": true}}}),
    )
    .await;
    env.wait_ready("unchecked", "upgraded").await;
    let replicas = config_map(&env, "unchecked-replicas").await.unwrap();
    assert_eq!(replicas.data.unwrap()["replicas"], "three");

    // Helm's legacy readiness checks are not what this controller waits with: refused.
    env.release(
        "legacy",
        "plain",
        serde_json::json!({"waitStrategy": {"name": "legacy"}}),
    )
    .await;
    let refused = env.wait_stalled("legacy").await;
    let (_, reason, message) = crate::helm_support::condition(&refused, "Ready").unwrap();
    assert_eq!(reason, "FeatureGateDisabled");
    assert!(
        message.contains("spec.waitStrategy.name: legacy"),
        "{message}"
    );
}

#[tokio::test]
async fn drift_correction_applies_only_what_drifted() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    let chart = plain_chart(
        dir.path(),
        &[(
            "templates/role.yaml",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {{ .Release.Name }}\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get]\n",
        )],
    );
    env.serve_chart("plain", &chart).await;
    env.release(
        "web",
        "plain",
        serde_json::json!({"driftDetection": {"mode": "enabled", "ignore": [
            {"paths": ["/rules/0"], "target": {"kind": "Role"}},
        ]}}),
    )
    .await;
    env.wait_ready("web", "installed").await;
    // Another manager changes the Role's first rule (which the release ignores) and the
    // ConfigMap's data (which it does not).
    let apply = |kind: &str, body: serde_json::Value| {
        let api_version = body["apiVersion"].as_str().unwrap().to_owned();
        let (group, version) = api_version
            .rsplit_once('/')
            .map_or((String::new(), api_version.clone()), |(g, v)| {
                (g.to_owned(), v.to_owned())
            });
        let resource = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            &group, &version, kind,
        ));
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(env.client.clone(), NAMESPACE, &resource);
        async move {
            api.patch(
                "web",
                &kube::api::PatchParams::apply("someone").force(),
                &kube::api::Patch::Apply(body),
            )
            .await
            .unwrap();
        }
    };
    apply(
        "Role",
        serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "web"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
    )
    .await;
    apply(
        "ConfigMap",
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "web"}, "data": {"a": "changed"}}),
    )
    .await;
    env.request_reconcile("web", "drifted").await;
    let corrected = env.request_handled("web", "web", "drifted").await;
    let message = crate::helm_support::condition(&corrected, "Drifted")
        .unwrap()
        .2;
    assert!(message.contains("ConfigMap/apps/web changed"), "{message}");
    assert!(!message.contains("Role"), "{message}");
    let config = config_map(&env, "web").await.unwrap();
    assert_eq!(config.data.unwrap()["a"], "b", "the drift is corrected");
    // The Role did not drift (its changes are ignored): it is left as the other manager made
    // it, not applied again with the manifest's rules.
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = env.api();
    let role = roles.get("web").await.unwrap();
    assert_eq!(
        role.rules.unwrap()[0].verbs,
        ["get".to_owned(), "list".to_owned()]
    );
}
