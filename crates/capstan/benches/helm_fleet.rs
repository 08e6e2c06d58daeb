//! The HelmRelease benchmark, in the spirit of Flux's flux-benchmark: 1,000 HelmReleases, one
//! chart (podinfo, packaged by Helm's SDK) from one HelmRepository served over HTTP on
//! 127.0.0.1, each release in its own namespace, all reconciled to Ready by one `capstan
//! controller` process against the embedded control plane (`capstan dev --no-controllers`, a
//! separate process). Each HelmRelease templates its HelmChart, so the controller also
//! reconciles 1,000 HelmCharts and writes 1,000 Helm release records.
//!
//! Prints the wall time from creating the objects to all HelmReleases Ready, and the
//! operator's idle and peak RSS.
//!
//! Run: `./scripts/bench-helm-fleet` (release build). `HELM_FLEET_RELEASES=200` runs a smaller
//! fleet. Targets on the 2-core reference machine: <= 90 s, <= 200 MiB peak (Flux 2.9:
//! 4m39s and 361 MiB for helm-controller alone, on 16 cores).

use std::time::Instant;

mod common;
mod fleet_support;

use fleet_support::{Figures, Operator, apply_json, concurrently, namespace, wait_all_ready};
use kube::api::Api;
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let releases: usize = std::env::var("HELM_FLEET_RELEASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let dir = tempfile::tempdir()?;

    // One chart in one repository, packaged and indexed by Helm's SDK.
    let repository = dir.path().join("repository");
    let chart = capstan_testkit::corpus("podinfo/src/charts/podinfo");
    capstan_testkit::helm_repo::sdk_repository(&[chart.as_path()], &repository, None);
    let server = capstan_testkit::helm_repo::HelmRepoServer::start(&repository, None).await;

    // The control plane, then the operator, as separate processes.
    let kubeconfig = dir.path().join("kubeconfig");
    let plane = common::ControlPlane::start(&kubeconfig).await?;
    let client = kube::Client::try_from(plane.config.clone())?;
    namespace(&client, "flux-system").await?;
    let operator = Operator::start(&kubeconfig, &dir.path().join("artifacts")).await?;

    // The fleet.
    let started = Instant::now();
    apply_json(
        &client,
        json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
            "metadata": {"name": "podinfo", "namespace": "flux-system"},
            "spec": {"url": server.url(), "interval": "1h"},
        }),
    )
    .await?;
    concurrently(releases, |i| {
        let client = client.clone();
        async move {
            let namespace_name = format!("app-{i}");
            namespace(&client, &namespace_name).await?;
            apply_json(
                &client,
                json!({
                    "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                    "metadata": {"name": "podinfo", "namespace": namespace_name},
                    "spec": {
                        "interval": "1h",
                        "chart": {"spec": {
                            "chart": "podinfo", "version": "6.x",
                            "sourceRef": {"kind": "HelmRepository", "name": "podinfo",
                                          "namespace": "flux-system"},
                        }},
                        "values": {"replicaCount": 1},
                    },
                }),
            )
            .await
        }
    })
    .await?;
    let created = started.elapsed();
    let all: Api<capstan_api::HelmRelease> = Api::all(client.clone());
    wait_all_ready(&all, releases, "HelmReleases", started).await?;
    let figures = Figures::measure(started, created, &operator, &plane);

    println!(
        "helm fleet benchmark: {releases} HelmReleases (podinfo from one HelmRepository), each in its own namespace"
    );
    figures.print("target <= 90 s", "target peak <= 200 MiB");
    drop(operator);
    drop(plane);
    Ok(())
}
