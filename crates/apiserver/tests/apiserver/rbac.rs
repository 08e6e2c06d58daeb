//! Impersonation and RBAC: `kubectl --as`/`--as-group` and kube-rs clients with impersonation are
//! authorized with Roles, ClusterRoles and their bindings, as on a real cluster.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, WatchParams};
use serde_json::json;

use crate::harness::{Run, TestCluster};

const SA: &str = "system:serviceaccount:team-a:deployer";
const AS_SA: &str = "--as=system:serviceaccount:team-a:deployer";

/// The lines of `-o name` output, without the `kube-root-ca.crt` ConfigMap every namespace holds.
fn own_names(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| *l != "configmap/kube-root-ca.crt")
        .collect()
}

/// Two namespaces and a ConfigMap in each, created by the (unimpersonated) administrator.
async fn two_teams() -> TestCluster {
    let c = TestCluster::start().await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r"apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team-a}
data: {k: v}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team-b}
data: {k: v}
",
    )
    .await
    .ok();
    c
}

/// kubectl's line for a Forbidden Status.
#[track_caller]
fn assert_forbidden(run: &Run, message: &str) {
    let expected = format!("Error from server (Forbidden): {message}");
    assert!(
        run.stderr.contains(&expected),
        "expected {expected:?} in stderr, got: {}",
        run.stderr
    );
}

/// A kube-rs client acting as `user` in `groups`.
fn impersonating(c: &TestCluster, user: &str, groups: &[&str]) -> kube::Client {
    let mut config = kube::Config::new(c.server.url().parse().unwrap());
    config.default_namespace = "default".into();
    config.auth_info.impersonate = Some(user.to_owned());
    if !groups.is_empty() {
        config.auth_info.impersonate_groups =
            Some(groups.iter().map(|g| (*g).to_owned()).collect());
    }
    kube::Client::try_from(config).unwrap()
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unbound_service_account_is_forbidden_with_kubernetes_message() {
    let c = two_teams().await;
    let run = c
        .kubectl(&["get", "configmaps", "-n", "team-b", AS_SA])
        .await
        .fails();
    assert_forbidden(
        &run,
        "configmaps is forbidden: User \"system:serviceaccount:team-a:deployer\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-b\"",
    );
    let run = c
        .kubectl(&["get", "configmap", "settings", "-n", "team-b", AS_SA])
        .await
        .fails();
    assert_forbidden(
        &run,
        "configmaps \"settings\" is forbidden: User \"system:serviceaccount:team-a:deployer\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"team-b\"",
    );
    let run = c.kubectl(&["get", "namespaces", AS_SA]).await.fails();
    assert_forbidden(
        &run,
        "namespaces is forbidden: User \"system:serviceaccount:team-a:deployer\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope",
    );

    // kube-rs sees the whole Status: 403, reason Forbidden, details naming the object.
    let client = impersonating(&c, SA, &[]);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "team-b");
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}}}});
    let status = api_error(
        deployments
            .patch(
                "web",
                &PatchParams::apply("capstan"),
                &Patch::Apply(&deployment),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 403);
    assert_eq!(status.reason, "Forbidden");
    assert_eq!(
        status.message,
        "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:team-a:deployer\" cannot patch resource \"deployments\" in API group \"apps\" in the namespace \"team-b\""
    );
    let details = status.details.expect("details");
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        ("web", "apps", "deployments")
    );
    // Watches are authorized too.
    let configmaps: Api<ConfigMap> = Api::namespaced(client, "team-b");
    let status = api_error(
        configmaps
            .watch(&WatchParams::default(), "0")
            .await
            .err()
            .expect("watch is refused"),
    );
    assert!(
        status
            .message
            .contains("cannot watch resource \"configmaps\""),
        "{}",
        status.message
    );

    // Nothing changed in team-b, and the administrator (no impersonation) is unaffected.
    let out = c
        .kubectl(&["get", "deployments", "-n", "team-b", "-o", "name"])
        .await
        .ok();
    assert_eq!(out.stdout.trim(), "");
    c.kubectl(&["delete", "configmap", "settings", "-n", "team-b"])
        .await
        .ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn role_binding_grants_exactly_its_namespace() {
    let c = two_teams().await;
    // The ServiceAccount subject has no namespace: it defaults to the RoleBinding's.
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r#"apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: deployer, namespace: team-a}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: deployer, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: deployer}
subjects:
- {kind: ServiceAccount, name: deployer}
"#,
    )
    .await
    .ok();
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: made-by-sa}\ndata: {a: b}\n";
    c.kubectl_stdin(
        &["apply", "--server-side", "-n", "team-a", "-f", "-", AS_SA],
        manifest,
    )
    .await
    .ok();
    let out = c
        .kubectl(&["get", "configmaps", "-n", "team-a", "-o", "name", AS_SA])
        .await
        .ok();
    assert_eq!(
        own_names(&out.stdout),
        ["configmap/made-by-sa", "configmap/settings"]
    );
    c.kubectl(&["delete", "configmap", "settings", "-n", "team-a", AS_SA])
        .await
        .ok();

    let run = c
        .kubectl_stdin(
            &["apply", "--server-side", "-n", "team-b", "-f", "-", AS_SA],
            manifest,
        )
        .await
        .fails();
    assert_forbidden(
        &run,
        "configmaps \"made-by-sa\" is forbidden: User \"system:serviceaccount:team-a:deployer\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"team-b\"",
    );
    let run = c.kubectl(&["get", "configmaps", "-A", AS_SA]).await.fails();
    assert_forbidden(
        &run,
        "configmaps is forbidden: User \"system:serviceaccount:team-a:deployer\" cannot list resource \"configmaps\" in API group \"\" at the cluster scope",
    );
    // The Role has no rule for the status subresource.
    let run = c
        .kubectl(&[
            "patch",
            "configmap",
            "made-by-sa",
            "-n",
            "team-a",
            "--subresource=status",
            "--type=merge",
            "-p",
            "{}",
            AS_SA,
        ])
        .await
        .fails();
    assert!(
        run.stderr.contains(
            "resource \"configmaps/status\" in API group \"\" in the namespace \"team-a\""
        ),
        "{}",
        run.stderr
    );
    // Another service account of the same namespace is not a subject.
    c.kubectl(&[
        "get",
        "configmaps",
        "-n",
        "team-a",
        "--as=system:serviceaccount:team-a:other",
    ])
    .await
    .fails();
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_role_through_role_binding_is_namespace_scoped() {
    let c = two_teams().await;
    c.kubectl(&[
        "create",
        "clusterrole",
        "configmap-reader",
        "--verb=get,list",
        "--resource=configmaps",
    ])
    .await
    .ok();
    c.kubectl(&[
        "create",
        "rolebinding",
        "read",
        "-n",
        "team-a",
        "--clusterrole=configmap-reader",
        "--serviceaccount=team-a:deployer",
    ])
    .await
    .ok();
    let out = c
        .kubectl(&["get", "configmaps", "-n", "team-a", "-o", "name", AS_SA])
        .await
        .ok();
    assert_eq!(own_names(&out.stdout), ["configmap/settings"]);
    let run = c
        .kubectl(&["get", "configmaps", "-n", "team-b", AS_SA])
        .await
        .fails();
    assert!(
        run.stderr.contains(
            "cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-b\""
        ),
        "{}",
        run.stderr
    );
    // Reading is all the role allows.
    let run = c
        .kubectl(&["delete", "configmap", "settings", "-n", "team-a", AS_SA])
        .await
        .fails();
    assert_forbidden(
        &run,
        "configmaps \"settings\" is forbidden: User \"system:serviceaccount:team-a:deployer\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"team-a\"",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_role_binding_to_a_group_is_global() {
    let c = two_teams().await;
    c.kubectl(&[
        "create",
        "clusterrole",
        "configmap-reader",
        "--verb=get,list,watch",
        "--resource=configmaps",
    ])
    .await
    .ok();
    c.kubectl(&[
        "create",
        "clusterrolebinding",
        "readers",
        "--clusterrole=configmap-reader",
        "--group=readers",
    ])
    .await
    .ok();
    let out = c
        .kubectl(&[
            "get",
            "configmaps",
            "-A",
            "-o",
            "name",
            "--as=jane",
            "--as-group=readers",
        ])
        .await
        .ok();
    assert_eq!(
        own_names(&out.stdout),
        ["configmap/settings", "configmap/settings"]
    );
    // The same user without the group has nothing.
    c.kubectl(&["get", "configmaps", "-n", "team-b", "--as=jane"])
        .await
        .fails();

    // kube-rs with impersonated groups, as Capstan's Kustomization `serviceAccountName` sends them:
    // the service-account groups are bound cluster-wide here.
    c.kubectl(&[
        "create",
        "clusterrolebinding",
        "team-a-sas",
        "--clusterrole=configmap-reader",
        "--group=system:serviceaccounts:team-a",
    ])
    .await
    .ok();
    let client = impersonating(
        &c,
        SA,
        &["system:serviceaccounts", "system:serviceaccounts:team-a"],
    );
    let all: Api<ConfigMap> = Api::all(client.clone());
    let listed = all.list(&ListParams::default()).await.unwrap().items;
    let settings = listed
        .iter()
        .filter(|cm| cm.metadata.name.as_deref() == Some("settings"));
    assert_eq!(settings.count(), 2, "{listed:?}");
    let b: Api<ConfigMap> = Api::namespaced(client, "team-b");
    let status = api_error(
        b.patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(status.code, 403);

    // `system:masters` is bound to the seeded `cluster-admin` ClusterRole, as on a real cluster.
    c.kubectl(&[
        "delete",
        "configmap",
        "settings",
        "-n",
        "team-b",
        "--as=root",
        "--as-group=system:masters",
    ])
    .await
    .ok();
    let out = c
        .kubectl(&["get", "clusterrolebinding", "cluster-admin", "-o", "json"])
        .await
        .ok()
        .json();
    assert_eq!(out["subjects"][0]["name"], "system:masters");
}

#[tokio::test(flavor = "multi_thread")]
async fn resource_names_restrict_to_the_named_objects() {
    let c = two_teams().await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r"apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: team-a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: settings-only, namespace: team-a}
rules:
- apiGroups: ['']
  resources: [configmaps]
  resourceNames: [settings]
  verbs: [get, list, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: settings-only, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: settings-only}
subjects:
- {kind: ServiceAccount, name: deployer, namespace: team-a}
",
    )
    .await
    .ok();
    c.kubectl(&["get", "configmap", "settings", "-n", "team-a", AS_SA])
        .await
        .ok();
    c.kubectl(&[
        "patch",
        "configmap",
        "settings",
        "-n",
        "team-a",
        "--type=merge",
        "-p",
        r#"{"data":{"k":"changed"}}"#,
        AS_SA,
    ])
    .await
    .ok();
    let run = c
        .kubectl(&["get", "configmap", "other", "-n", "team-a", AS_SA])
        .await
        .fails();
    assert_forbidden(
        &run,
        "configmaps \"other\" is forbidden: User \"system:serviceaccount:team-a:deployer\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"team-a\"",
    );
    // A list names no object, so resourceNames do not allow it.
    c.kubectl(&["get", "configmaps", "-n", "team-a", AS_SA])
        .await
        .fails();
    // ... unless it selects the one name (`kubectl get -w` and informers on one object do so).
    let client = impersonating(&c, SA, &[]);
    let api: Api<ConfigMap> = Api::namespaced(client, "team-a");
    let listed = api
        .list(&ListParams::default().fields("metadata.name=settings"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].data.as_ref().unwrap()["k"], "changed");
}

#[tokio::test(flavor = "multi_thread")]
async fn server_side_apply_of_a_new_object_also_needs_create() {
    let c = two_teams().await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r"apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: patcher, namespace: team-a}
rules:
- apiGroups: ['']
  resources: [configmaps]
  verbs: [get, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: patcher, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: patcher}
subjects:
- {kind: ServiceAccount, name: deployer, namespace: team-a}
",
    )
    .await
    .ok();
    let client = impersonating(&c, SA, &[]);
    let api: Api<ConfigMap> = Api::namespaced(client, "team-a");
    let apply = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"owner": "sa"}});
    // The existing object is patched...
    let patched = api
        .patch(
            "settings",
            &PatchParams::apply("capstan").force(),
            &Patch::Apply(&apply("settings")),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["owner"], "sa");
    // ...a new one would be created, which the role does not allow (Kubernetes words this check
    // with the RBAC reason alone, empty here).
    let status = api_error(
        api.patch(
            "fresh",
            &PatchParams::apply("capstan"),
            &Patch::Apply(&apply("fresh")),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert_eq!(status.message, "configmaps \"fresh\" is forbidden: ");
    c.kubectl(&["get", "configmap", "fresh", "-n", "team-a"])
        .await
        .fails();
}

#[tokio::test(flavor = "multi_thread")]
async fn binding_to_a_missing_role_reports_it() {
    let c = two_teams().await;
    c.kubectl(&[
        "create",
        "rolebinding",
        "dangling",
        "-n",
        "team-a",
        "--role=missing",
        "--serviceaccount=team-a:deployer",
    ])
    .await
    .ok();
    let run = c
        .kubectl(&["get", "configmaps", "-n", "team-a", AS_SA])
        .await
        .fails();
    assert_forbidden(
        &run,
        "configmaps is forbidden: User \"system:serviceaccount:team-a:deployer\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team-a\": RBAC: role.rbac.authorization.k8s.io \"missing\" not found",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_auth_can_i_and_whoami_answer_for_the_impersonated_user() {
    let c = two_teams().await;
    c.kubectl(&[
        "create",
        "role",
        "deployer",
        "-n",
        "team-a",
        "--verb=create,patch",
        "--resource=deployments.apps",
    ])
    .await
    .ok();
    c.kubectl(&[
        "create",
        "rolebinding",
        "deployer",
        "-n",
        "team-a",
        "--role=deployer",
        "--serviceaccount=team-a:deployer",
    ])
    .await
    .ok();
    // `kubectl auth can-i VERB deployments -n NS --as SA`: its answer, and whether it said yes.
    let can_i = |verb: &'static str, namespace: &'static str| {
        let c = &c;
        async move {
            let args = ["auth", "can-i", verb, "deployments", "-n", namespace, AS_SA];
            let run = c.kubectl(&args).await;
            let answer = run.stdout.trim().to_owned();
            (answer, run.status == 0)
        }
    };
    assert_eq!(can_i("create", "team-a").await, ("yes".to_owned(), true));
    assert_eq!(can_i("create", "team-b").await, ("no".to_owned(), false));
    assert_eq!(can_i("delete", "team-a").await, ("no".to_owned(), false));
    // Unimpersonated, the caller is the cluster administrator.
    let admin = c
        .kubectl(&["auth", "can-i", "delete", "deployments", "-n", "team-b"])
        .await
        .ok();
    assert_eq!(admin.stdout.trim(), "yes");

    let list = c
        .kubectl(&["auth", "can-i", "--list", "-n", "team-a", AS_SA])
        .await
        .ok();
    assert!(
        list.stdout
            .lines()
            .any(|l| l.starts_with("deployments.apps") && l.contains("[create patch]")),
        "{}",
        list.stdout
    );

    let whoami = c
        .kubectl(&["auth", "whoami", "-o", "json", AS_SA])
        .await
        .ok()
        .json();
    assert_eq!(whoami["status"]["userInfo"]["username"], SA);
    assert_eq!(
        whoami["status"]["userInfo"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:team-a",
            "system:authenticated"
        ])
    );
}

/// GETs `path` as the client's user: the first JSON document of the answer, or the error Status.
async fn get_raw(
    client: &kube::Client,
    path: &str,
) -> Result<serde_json::Value, kube::core::Status> {
    let request = http::Request::get(path).body(Vec::new()).unwrap();
    let text = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client.request_text(request),
    )
    .await
    .expect("the response ended")
    .map_err(api_error)?;
    let first = text.lines().next().unwrap_or("");
    Ok(serde_json::from_str(first).unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {text}")))
}

#[tokio::test(flavor = "multi_thread")]
async fn watching_one_object_needs_the_watch_verb() {
    let c = two_teams().await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        r"apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: settings-reader, namespace: team-a}
rules:
- apiGroups: ['']
  resources: [configmaps]
  resourceNames: [settings]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: settings-reader, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: settings-reader}
subjects:
- {kind: ServiceAccount, name: deployer, namespace: team-a}
",
    )
    .await
    .ok();
    let client = impersonating(&c, SA, &[]);
    // As kube-apiserver, `?watch=true` on a named object is a get (authorized as `get`), answered
    // with the object, never a watch stream.
    let body = get_raw(
        &client,
        "/api/v1/namespaces/team-a/configmaps/settings?watch=true&timeoutSeconds=3",
    )
    .await
    .unwrap();
    assert_eq!(body["kind"], "ConfigMap", "{body}");
    assert_eq!(body["metadata"]["name"], "settings");
    // Real watches of the one object are `watch`es, which get and list do not grant.
    let denied = get_raw(
        &client,
        "/api/v1/watch/namespaces/team-a/configmaps/settings",
    )
    .await
    .unwrap_err();
    assert_eq!(denied.code, 403, "{denied:?}");
    assert_eq!(
        denied.message,
        "configmaps \"settings\" is forbidden: User \"system:serviceaccount:team-a:deployer\" cannot watch resource \"configmaps\" in API group \"\" in the namespace \"team-a\""
    );
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    let params = WatchParams::default()
        .fields("metadata.name=settings")
        .timeout(2);
    let denied = api_error(api.watch(&params, "0").await.err().expect("watch refused"));
    assert_eq!(denied.code, 403, "{denied:?}");

    // With `watch` on the name, both forms stream the object's events.
    c.kubectl(&[
        "patch",
        "role",
        "settings-reader",
        "-n",
        "team-a",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/rules/0/verbs/-","value":"watch"}]"#,
    ])
    .await
    .ok();
    let events: Vec<_> = futures::StreamExt::collect::<Vec<_>>(
        api.watch(&params, "0").await.expect("watch allowed"),
    )
    .await;
    let names: Vec<String> = events
        .into_iter()
        .filter_map(|e| match e.unwrap() {
            kube::api::WatchEvent::Added(cm) => cm.metadata.name,
            _ => None,
        })
        .collect();
    assert_eq!(names, ["settings"]);
    let event = get_raw(
        &client,
        "/api/v1/watch/namespaces/team-a/configmaps/settings?timeoutSeconds=1",
    )
    .await
    .unwrap();
    assert_eq!(event["type"], "ADDED", "{event}");
    assert_eq!(event["object"]["metadata"]["name"], "settings");
    // Other names stay out of reach.
    let other = WatchParams::default()
        .fields("metadata.name=other")
        .timeout(1);
    assert_eq!(
        api_error(api.watch(&other, "0").await.err().expect("watch refused")).code,
        403
    );
}
