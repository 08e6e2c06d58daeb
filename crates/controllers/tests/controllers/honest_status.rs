//! Honest status: a failed source says so for its generation, and what consumes it reports
//! the failure at once rather than waiting for an artifact that will not come.

use std::time::Duration;

use capstan_api::GitRepository;

use crate::kustomize_support::{
    KustomizeController, NAMESPACE, condition, create_kustomization, kustomizations, ready,
};
use crate::support::{Env, eventually};

#[tokio::test]
async fn a_kustomization_reports_its_failing_git_repository_promptly() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let _controller = KustomizeController::start(&env);
    // The Kustomization first finds no source (looked at again after 30 s) ...
    create_kustomization(
        &env,
        "stuck",
        serde_json::json!({"path": "app", "sourceRef": {"kind": "GitRepository", "name": "broken"}}),
    )
    .await;
    let api = kustomizations(&env);
    eventually(Duration::from_secs(20), "Source not found", || {
        let api = api.clone();
        async move {
            api.get_opt("stuck")
                .await
                .ok()
                .flatten()
                .filter(|k| ready(k).is_some_and(|(_, _, m)| m.contains("not found")))
        }
    })
    .await;
    // ... then the source appears and fails.
    env.create_git_repository(
        NAMESPACE,
        "broken",
        serde_json::json!({"url": "http://127.0.0.1:1/missing.git", "interval": "10m"}),
    )
    .await;
    let source = env
        .wait_for(NAMESPACE, "broken", "Ready=False", |o: &GitRepository| {
            o.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "False")
            })
        })
        .await;
    assert_eq!(
        source.status.as_ref().and_then(|s| s.observed_generation),
        source.metadata.generation,
        "a failed source is observed for its generation: {:#?}",
        source.status
    );

    // The source's failure reaches the Kustomization well before its 30 s retry.
    let object = eventually(
        Duration::from_secs(15),
        "the Kustomization reporting the source failure",
        || {
            let api = api.clone();
            async move {
                api.get_opt("stuck")
                    .await
                    .ok()
                    .flatten()
                    .filter(|k| ready(k).is_some_and(|(_, _, m)| m.contains("127.0.0.1:1")))
            }
        },
    )
    .await;
    let (status, reason, message) = ready(&object).unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ArtifactFailed")
    );
    assert!(
        message.starts_with(&format!(
            "Source 'GitRepository/{NAMESPACE}/broken' is not ready: failed to checkout"
        )),
        "{message}"
    );
    // Failed, not in progress: readers stop waiting.
    assert_eq!(
        condition(&object, "Reconciling").map(|c| c.1),
        Some("ProgressingWithRetry".to_owned())
    );
    assert!(matches!(
        capstan_api::FluxKind::readiness(&object),
        capstan_api::Readiness::Failed(_)
    ));
    env.stop().await;
}

#[tokio::test]
async fn many_failed_objects_are_summarised_in_a_readable_message() {
    let manifests = (1..=40)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad-{i}\n  namespace: {NAMESPACE}\n  labels: {{tier: -not-a-label-value-}}\ndata: {{a: b}}\n"
            )
        })
        .collect::<Vec<_>>()
        .join("---\n");
    let (env, _upstream, _controller, _) =
        crate::kustomize_support::setup(&[("many/config.yaml", &manifests)]).await;
    create_kustomization(&env, "many", serde_json::json!({"path": "many"})).await;
    let object = crate::kustomize_support::wait_ready(
        &env,
        "many",
        "Ready=False ReconciliationFailed",
        |status, reason, _| status == "False" && reason == "ReconciliationFailed",
    )
    .await;
    let (_, _, message) = ready(&object).unwrap();
    assert!(
        message.starts_with("apply failed for 40 of 40 objects (0 applied): "),
        "{message}"
    );
    assert!(message.contains("bad-1"), "{message}");
    assert!(message.ends_with("(and 37 more)"), "{message}");
    assert!(message.chars().count() <= 1024, "{}", message.len());
    env.stop().await;
}

#[tokio::test]
async fn many_unhealthy_objects_are_summarised_in_a_readable_message() {
    let manifests: String = (1..=30)
        .map(|i| {
            crate::kustomize_support::deployment(
                "nginx:1.25",
                "  annotations:\n    sim.capstan.dev/rollout: hang\n",
            )
            .replace("name: web\n", &format!("name: web-{i}\n"))
                + "---\n"
        })
        .collect();
    let (env, _upstream, _controller, _) =
        crate::kustomize_support::setup(&[("app/deployments.yaml", &manifests)]).await;
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "app", "wait": true, "timeout": "2s"}),
    )
    .await;
    let object = crate::kustomize_support::wait_ready(
        &env,
        "app",
        "Ready=False HealthCheckFailed",
        |status, reason, _| status == "False" && reason == "HealthCheckFailed",
    )
    .await;
    let (_, _, message) = ready(&object).unwrap();
    assert!(message.contains("Deployment/apps/web-"), "{message}");
    assert!(message.contains("(and 27 more)"), "{message}");
    assert!(message.chars().count() <= 1024, "{}", message.len());
    env.stop().await;
}
