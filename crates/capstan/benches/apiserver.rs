//! Benchmark of the embedded control plane: 10,000 ConfigMaps applied by server-side apply from 8
//! concurrent kube-rs clients, then listed. Prints applies/s, list latency and the server's peak RSS.
//!
//! Run: `./scripts/bench-apiserver` (a release build of `capstan`, started as `capstan dev`).
//! Targets on the 2-core reference machine: >= 3,000 applies/s, list of 10,000 under 150 ms,
//! peak RSS under 200 MiB.

use std::time::Instant;

mod common;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

const OBJECTS: usize = 10_000;
const CLIENTS: usize = 8;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let kubeconfig = dir.path().join("kubeconfig");
    let mut server = common::ControlPlane::start(&kubeconfig).await?;
    let pid = server.pid();
    let config = server.config.clone();
    let idle_kib = common::rss_kib(pid, "VmHWM:");
    let clients: Vec<kube::Client> = (0..CLIENTS)
        .map(|_| kube::Client::try_from(config.clone()))
        .collect::<Result<_, _>>()?;
    let namespaces: Api<Namespace> = Api::all(clients[0].clone());
    namespaces
        .patch(
            "bench",
            &PatchParams::apply("bench"),
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}),
            ),
        )
        .await?;

    let started = Instant::now();
    let mut workers = Vec::new();
    for (w, client) in clients.iter().enumerate() {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "bench");
        workers.push(tokio::spawn(async move {
            let names: Vec<usize> = (w..OBJECTS).step_by(CLIENTS).collect();
            let params = PatchParams::apply("bench");
            futures::stream::iter(names)
                .map(|i| {
                    let api = api.clone();
                    let params = params.clone();
                    async move {
                        let name = format!("cm-{i:05}");
                        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"bench": "true"}}, "data": {"index": i.to_string(), "payload": "x".repeat(64)}});
                        api.patch(&name, &params, &Patch::Apply(body)).await.map(|_| ())
                    }
                })
                .buffer_unordered(4)
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<Result<Vec<_>, _>>()
        }));
    }
    for w in workers {
        w.await??;
    }
    let apply_secs = started.elapsed().as_secs_f64();

    let mut latencies = Vec::new();
    let mut count = 0;
    for _ in 0..5 {
        let request = http::Request::get("/api/v1/namespaces/bench/configmaps").body(Vec::new())?;
        let t = Instant::now();
        let text = clients[0].request_text(request).await?;
        latencies.push(t.elapsed());
        count = serde_json::from_str::<serde_json::Value>(&text)?["items"]
            .as_array()
            .map_or(0, Vec::len);
    }
    latencies.sort();
    let peak_kib = common::rss_kib(pid, "VmHWM:");
    server.process.kill().await?;

    anyhow::ensure!(
        count == OBJECTS,
        "listed {count} objects, expected {OBJECTS}"
    );
    println!(
        "capstan apiserver benchmark ({OBJECTS} ConfigMaps, {CLIENTS} kube-rs clients, server-side apply)"
    );
    println!(
        "  applies/s:          {:.0}   (target >= 3000)",
        OBJECTS as f64 / apply_secs
    );
    println!(
        "  list latency:       {:.1} ms median of 5, {:.1} ms min   (target < 150 ms)",
        latencies[2].as_secs_f64() * 1e3,
        latencies[0].as_secs_f64() * 1e3
    );
    println!(
        "  server peak RSS:    {:.1} MiB   (target < 200 MiB; idle {:.1} MiB)",
        common::mib(peak_kib),
        common::mib(idle_kib)
    );
    Ok(())
}
