//! A fleet of Kustomizations on few workers: health waits must not hold a worker, so objects
//! that never become healthy do not stop the others.

use std::time::{Duration, Instant};

use capstan_api::Kustomization;
use kube::api::{ListParams, Patch, PatchParams};

use crate::kustomize_support::{
    config_map, create_kustomization, deployment, kustomizations, ready, setup,
};
use crate::support::eventually;

const HANGING: usize = 4;
const CHAINS: usize = 19;
const CHAIN_LENGTH: usize = 4;

fn chain_member(chain: usize, link: usize) -> String {
    format!("chain-{chain:02}-{link}")
}

/// 80 Kustomizations with `wait: true` on the default 4 workers: 4 whose Deployment never rolls
/// out (timeout 10 minutes) are created first, then 19 `dependsOn` chains of 4 healthy ones.
/// Every healthy one is Ready within a minute while the hanging ones are still waiting.
#[tokio::test]
async fn hanging_health_checks_do_not_hold_back_a_fleet() {
    let hang = "  annotations:\n    sim.capstan.dev/rollout: hang\n";
    let (env, _upstream, _controller, _) = setup(&[
        ("healthy/config.yaml", &config_map()),
        ("healthy/deployment.yaml", &deployment("nginx:1.25", "")),
        ("hanging/deployment.yaml", &deployment("nginx:1.25", hang)),
    ])
    .await;
    let started = Instant::now();
    for index in 0..HANGING {
        create_kustomization(
            &env,
            &format!("hang-{index}"),
            serde_json::json!({"path": "hanging", "namePrefix": format!("hang-{index}-"),
                               "wait": true, "timeout": "10m"}),
        )
        .await;
    }
    for chain in 0..CHAINS {
        // Dependents first, so that they find their dependency not Ready and must be
        // triggered when it becomes Ready.
        for link in (0..CHAIN_LENGTH).rev() {
            let name = chain_member(chain, link);
            let mut spec = serde_json::json!({"path": "healthy", "namePrefix": format!("{name}-"),
                                              "wait": true, "timeout": "10m"});
            if link > 0 {
                spec["dependsOn"] = serde_json::json!([{"name": chain_member(chain, link - 1)}]);
            }
            create_kustomization(&env, &name, spec).await;
        }
    }

    let api = kustomizations(&env);
    let healthy = CHAINS * CHAIN_LENGTH;
    eventually(
        Duration::from_secs(60),
        "every healthy Kustomization Ready",
        || {
            let api = api.clone();
            async move {
                let list = api.list(&ListParams::default()).await.ok()?;
                let count = list
                    .items
                    .iter()
                    .filter(|k| {
                        k.metadata
                            .name
                            .as_deref()
                            .is_some_and(|n| n.starts_with("chain-"))
                    })
                    .filter(|k| ready(k).is_some_and(|(status, _, _)| status == "True"))
                    .count();
                (count == healthy).then_some(())
            }
        },
    )
    .await;
    let elapsed = started.elapsed();
    for index in 0..HANGING {
        let object = api.get(&format!("hang-{index}")).await.unwrap();
        assert_eq!(
            ready(&object).map(|(status, _, message)| (status, message)),
            Some((
                "Unknown".to_owned(),
                "Reconciliation in progress".to_owned()
            )),
            "hang-{index} still waits for its rollout after {elapsed:?}"
        );
    }

    // A waiting Kustomization follows its spec at once: suspended, then resumed with a short
    // timeout, it waits anew and fails with the health check's message.
    let patch = |value: serde_json::Value| {
        let api = api.clone();
        async move {
            api.patch("hang-0", &PatchParams::default(), &Patch::Merge(&value))
                .await
                .unwrap();
        }
    };
    patch(serde_json::json!({"spec": {"suspend": true}})).await;
    patch(serde_json::json!({"spec": {"suspend": false, "timeout": "2s"}})).await;
    let failed = eventually(Duration::from_secs(30), "hang-0 to time out", || {
        let api = api.clone();
        async move {
            api.get("hang-0").await.ok().filter(|k: &Kustomization| {
                ready(k).is_some_and(|(status, reason, _)| {
                    status == "False" && reason == "HealthCheckFailed"
                })
            })
        }
    })
    .await;
    let (_, _, message) = ready(&failed).unwrap();
    assert!(
        message.starts_with("timed out after 2s waiting for: Deployment/apps/hang-0-web"),
        "{message}"
    );
}
