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

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

async fn apply_json(client: &kube::Client, value: serde_json::Value) -> anyhow::Result<()> {
    let object: DynamicObject = serde_json::from_value(value)?;
    let gvk = GroupVersionKind::try_from(object.types.as_ref().expect("types"))?;
    let resource = ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = match object.metadata.namespace.as_deref() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let name = object.metadata.name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply("bench").force(),
        &Patch::Apply(&object),
    )
    .await?;
    Ok(())
}

#[tokio::main]
#[allow(clippy::too_many_lines)] // one benchmark run, read top to bottom
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
    apply_json(
        &client,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-system"}}),
    )
    .await?;
    let operator = operator(&kubeconfig, &dir.path().join("artifacts"))?;
    let pid = operator.id().expect("operator pid");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_kib = common::rss_kib(pid, "VmRSS:");

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
    let creations = futures::stream::iter(0..releases)
        .map(|i| {
            let client = client.clone();
            async move {
                let namespace = format!("app-{i}");
                apply_json(
                    &client,
                    json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": namespace}}),
                )
                .await?;
                apply_json(
                    &client,
                    json!({
                        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                        "metadata": {"name": "podinfo", "namespace": namespace},
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
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    for creation in creations {
        creation?;
    }
    let created = started.elapsed();
    let all: Api<capstan_api::HelmRelease> = Api::all(client.clone());
    let mut last_report = Instant::now();
    loop {
        let list = all.list(&ListParams::default()).await?;
        let ready = list
            .items
            .iter()
            .filter(|r| capstan_api::FluxKind::is_ready(*r))
            .count();
        if ready == releases {
            break;
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "{ready}/{releases} Ready after {:.0} s",
                started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(900),
            "only {ready}/{releases} HelmReleases Ready after 15 minutes"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let wall = started.elapsed();
    let peak_kib = common::rss_kib(pid, "VmHWM:");
    let settled_kib = common::rss_kib(pid, "VmRSS:");
    let plane_peak_kib = common::rss_kib(plane.pid(), "VmHWM:");

    println!(
        "helm fleet benchmark: {releases} HelmReleases (podinfo from one HelmRepository), each in its own namespace"
    );
    println!(
        "  all Ready in            {:.1} s (objects created in {:.1} s)   target <= 90 s",
        wall.as_secs_f64(),
        created.as_secs_f64()
    );
    println!(
        "  operator RSS            idle {:.1} MiB, peak {:.1} MiB, settled {:.1} MiB   target peak <= 200 MiB",
        common::mib(idle_kib),
        common::mib(peak_kib),
        common::mib(settled_kib)
    );
    println!(
        "  control plane peak RSS  {:.1} MiB (a separate process, not the operator)",
        common::mib(plane_peak_kib)
    );
    drop(operator);
    drop(plane);
    Ok(())
}

/// `capstan controller` against the control plane of `kubeconfig`.
fn operator(kubeconfig: &Path, artifacts: &Path) -> anyhow::Result<tokio::process::Child> {
    Ok(tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args([
            "controller",
            "--enable-leader-election=false",
            "--log-level",
            "warn",
            "--storage-addr",
            "127.0.0.1:0",
            "--concurrent",
            "10",
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .arg("--storage-path")
        .arg(artifacts)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?)
}
