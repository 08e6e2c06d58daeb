//! `spec.healthCheckExprs`: CEL expressions judging the health of the kinds they match, in
//! place of the built-in kstatus rules, for Kustomizations and HelmReleases, end to end against
//! the embedded control plane.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};

use crate::helm_support::{ReleaseEnv, condition_is};
use crate::kustomization::{
    NAMESPACE, condition, create_kustomization, kustomizations, ready, request_reconcile, setup,
    wait_ready,
};

/// The CRD of `Widget` (example.com/v1) with a status subresource whose fields are free.
const WIDGET_CRD: &str = "\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

const WIDGET: &str = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: gadget\n  namespace: apps\nspec:\n  size: 3\n";

const CURRENT: &str = "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')";
const FAILED: &str = "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')";
const IN_PROGRESS: &str = "status.phase == 'Provisioning'";

fn widgets(env: &crate::support::Env) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    Api::namespaced_with(env.client.clone(), NAMESPACE, &resource)
}

/// Sets the status of the Widget `gadget`, as its (absent) controller would.
async fn set_widget_status(env: &crate::support::Env, status: serde_json::Value) {
    widgets(env)
        .patch_status(
            "gadget",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"status": status})),
        )
        .await
        .unwrap();
}

/// A custom resource is judged by the expressions: without a status (the expressions refer to
/// a missing field) and while `inProgress` holds, the Kustomization waits until its timeout
/// although the built-in rules would call a `Ready=False` object Failed at once; `current`
/// makes it Ready; `failed` fails the health check at once, naming the object.
#[tokio::test]
async fn kustomization_health_is_judged_by_the_expressions() {
    let (env, _upstream, _controller, _) =
        setup(&[("app/crd.yaml", WIDGET_CRD), ("app/widget.yaml", WIDGET)]).await;
    create_kustomization(
        &env,
        "app",
        serde_json::json!({
            "path": "app", "wait": true, "timeout": "2s",
            "healthCheckExprs": [{
                "apiVersion": "example.com/v1", "kind": "Widget",
                "inProgress": IN_PROGRESS, "failed": FAILED, "current": CURRENT,
            }],
        }),
    )
    .await;

    // No status yet: `status` is missing, so the object is Unknown and the wait times out.
    let object = wait_ready(
        &env,
        "app",
        "a health check timeout",
        |status, reason, _| status == "False" && reason == "HealthCheckFailed",
    )
    .await;
    let (_, _, message) = ready(&object).unwrap();
    assert!(message.starts_with("timed out after 2s"), "{message}");
    assert!(
        message.contains("Widget/apps/gadget: failed to evaluate the inProgress expression"),
        "{message}"
    );

    // In progress (Ready=False too, which kstatus alone would call Failed): still a timeout.
    set_widget_status(
        &env,
        serde_json::json!({"phase": "Provisioning",
            "conditions": [{"type": "Ready", "status": "False", "reason": "Provisioning"}]}),
    )
    .await;
    request_reconcile(&kustomizations(&env), "app", "in-progress").await;
    let object = wait_ready(
        &env,
        "app",
        "timed out in progress",
        |status, _, message| status == "False" && message.contains("inProgress expression is true"),
    )
    .await;
    let (_, _, message) = ready(&object).unwrap();
    assert!(
        message.starts_with("timed out after 2s waiting for: Widget/apps/gadget: "),
        "{message}"
    );

    // Current: Ready, with the health check passed.
    set_widget_status(
        &env,
        serde_json::json!({"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "reason": "Running"}]}),
    )
    .await;
    request_reconcile(&kustomizations(&env), "app", "current").await;
    let object = wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;
    let (status, _, message) = condition(&object, "Healthy").unwrap();
    assert_eq!(status, "True");
    assert!(message.starts_with("Health check passed"), "{message}");

    // Failed: the health check fails at once (well within the timeout), naming the object.
    set_widget_status(
        &env,
        serde_json::json!({"phase": "Broken",
            "conditions": [{"type": "Ready", "status": "False", "reason": "QuotaExceeded"}]}),
    )
    .await;
    request_reconcile(&kustomizations(&env), "app", "failed").await;
    let object = wait_ready(
        &env,
        "app",
        "HealthCheckFailed",
        |status, reason, message| {
            status == "False"
                && reason == "HealthCheckFailed"
                && message.starts_with("health check")
        },
    )
    .await;
    let (_, _, message) = ready(&object).unwrap();
    assert_eq!(
        message,
        format!("health check failed: Widget/apps/gadget: failed expression is true: {FAILED}")
    );
}

/// An expression that does not parse stalls the Kustomization before anything is applied,
/// naming the entry, its apiVersion and kind and the expression.
#[tokio::test]
async fn an_invalid_expression_stalls_the_kustomization() {
    let (env, _upstream, _controller, _) =
        setup(&[("app/crd.yaml", WIDGET_CRD), ("app/widget.yaml", WIDGET)]).await;
    create_kustomization(
        &env,
        "app",
        serde_json::json!({
            "path": "app", "wait": true,
            "healthCheckExprs": [
                {"apiVersion": "example.com/v1", "kind": "Widget", "current": CURRENT},
                {"apiVersion": "example.com/v1", "kind": "Gadget",
                 "current": "status.conditions.exists(e, e.type == 'Ready'"},
            ],
        }),
    )
    .await;
    let object = wait_ready(&env, "app", "InvalidCELExpression", |status, reason, _| {
        status == "False" && reason == "InvalidCELExpression"
    })
    .await;
    let (_, _, message) = ready(&object).unwrap();
    assert!(
        message.starts_with(
            "Reconciliation failed terminally due to configuration error: healthCheckExprs[1] \
             (apiVersion example.com/v1, kind Gadget): failed to parse the current expression \
             'status.conditions.exists(e, e.type == 'Ready'': "
        ),
        "{message}"
    );
    let (stalled, reason, _) = condition(&object, "Stalled").unwrap();
    assert_eq!(
        (stalled.as_str(), reason.as_str()),
        ("True", "InvalidCELExpression")
    );
    // Nothing was applied.
    assert!(object.status.unwrap().inventory.is_none());
}

/// Hostile expressions (deeply nested, very long) stall the Kustomization rather than
/// overflow the controller's stack: the controller goes on reconciling others.
#[tokio::test]
async fn hostile_expressions_stall_without_harming_the_controller() {
    let (env, _upstream, _controller, _) =
        setup(&[("app/crd.yaml", WIDGET_CRD), ("app/widget.yaml", WIDGET)]).await;
    let nested = format!("{}true{}", "(".repeat(2000), ")".repeat(2000));
    let chained = format!("{}1 == 1", "1 + ".repeat(2000));
    let long = format!("{}1 == 1", "1 + ".repeat(3000));
    for (name, expression, says) in [
        (
            "nested",
            nested.as_str(),
            "failed to parse the current expression",
        ),
        ("chained", &chained, "is nested deeper than 100 levels"),
        ("long", &long, "is longer than 10000 bytes"),
    ] {
        create_kustomization(
            &env,
            name,
            serde_json::json!({
                "path": "app", "wait": true,
                "healthCheckExprs": [{"apiVersion": "example.com/v1", "current": expression}],
            }),
        )
        .await;
        let object = wait_ready(&env, name, "InvalidCELExpression", |_, reason, _| {
            reason == "InvalidCELExpression"
        })
        .await;
        let (_, _, message) = ready(&object).unwrap();
        assert!(message.contains(says), "{name}: {message}");
    }
    create_kustomization(
        &env,
        "fine",
        serde_json::json!({
            "path": "app", "wait": true,
            "healthCheckExprs": [{"apiVersion": "example.com/v1", "current": "true"}],
        }),
    )
    .await;
    wait_ready(&env, "fine", "Ready=True", |status, _, _| status == "True").await;
}

/// A HelmRelease's waits judge a kind by its expressions: a ConfigMap (always Current for
/// kstatus) whose `failed` expression holds fails the install, naming it; once the values
/// make `current` hold, the upgrade is Ready.
#[tokio::test]
async fn helm_release_waits_are_judged_by_the_expressions() {
    let env = ReleaseEnv::start().await;
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("state");
    capstan_testkit::write_files(
        &chart,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: state\nversion: 0.1.0\n",
            ),
            ("values.yaml", "state: broken\n"),
            (
                "templates/config.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  state: {{ .Values.state }}\n",
            ),
        ],
    );
    env.serve_chart("state", &chart).await;
    env.release(
        "app",
        "state",
        serde_json::json!({
            "timeout": "30s",
            "healthCheckExprs": [{
                "apiVersion": "v1", "kind": "ConfigMap",
                "failed": "data.state == 'broken'", "current": "data.state == 'ok'",
            }],
        }),
    )
    .await;
    let object = env
        .wait("app", "the install failed", |o| {
            condition_is(o, "Ready", "False")
                && crate::support::condition(o, "Ready")
                    .is_some_and(|c| c.2.contains("failed expression is true"))
        })
        .await;
    let message = crate::support::condition(&object, "Ready").unwrap().2;
    assert!(
        message.contains("ConfigMap/apps/app: failed expression is true: data.state == 'broken'"),
        "{message}"
    );

    env.patch(
        "app",
        serde_json::json!({"spec": {"values": {"state": "ok"}}}),
    )
    .await;
    env.wait_ready("app", "upgraded").await;

    // An invalid list stalls the HelmRelease, but does not hold up its deletion.
    env.patch(
        "app",
        serde_json::json!({"spec": {"healthCheckExprs": [
            {"apiVersion": "v1", "kind": "ConfigMap", "current": "data.state =="},
        ]}}),
    )
    .await;
    let object = env.wait_stalled("app").await;
    let (_, reason, message) = crate::support::condition(&object, "Ready").unwrap();
    assert_eq!(reason, "InvalidCELExpression");
    assert!(
        message.contains("(apiVersion v1, kind ConfigMap): failed to parse the current expression 'data.state =='"),
        "{message}"
    );
    env.delete_release("app").await;
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(env.client.clone(), NAMESPACE);
    assert!(config_maps.get_opt("app").await.unwrap().is_none());
}
