//! The fleet benchmark, in the spirit of Flux's flux-benchmark: 1,000 Kustomizations, each
//! from its own OCIRepository holding a 4-object app (Deployment, ServiceAccount, Service,
//! Ingress) pushed to a local `docker-registry`, all reconciled to Ready by one
//! `capstan controller` process against the embedded control plane (`capstan dev
//! --no-controllers`, a separate process).
//!
//! Prints: the wall time from creating the objects to all 1,000 Kustomizations Ready, the
//! operator's idle and peak RSS, and the time Capstan's apply engine takes to server-side apply
//! the same 4,000 objects against `kubectl apply --server-side` of them, to the same server.
//!
//! Run: `./scripts/bench-fleet` (release build). `FLEET_APPS=200` runs a smaller fleet.
//! Targets on the 2-core reference machine: <= 60 s, <= 150 MiB peak, apply <= 0.5x kubectl's
//! time, idle RSS <= 25 MiB.

use std::process::Stdio;
use std::time::Instant;

mod common;
mod fleet_support;

use capstan_apply::{ApplyOptions, ResourceManager};
use capstan_source::oci::{self, PushOptions, RegistryOptions};
use capstan_testkit::Registry;
use fleet_support::{Figures, Operator, apply_json, concurrently, namespace, wait_all_ready};
use kube::api::{Api, DynamicObject};
use serde_json::json;

/// The four objects of app `name` in `namespace`, as YAML documents.
fn app(name: &str, namespace: &str) -> String {
    format!(
        r"apiVersion: v1
kind: ServiceAccount
metadata:
  name: {name}
  namespace: {namespace}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {namespace}
spec:
  replicas: 1
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      serviceAccountName: {name}
      containers:
        - name: app
          image: ghcr.io/stefanprodan/podinfo:6.7.1
          ports:
            - containerPort: 9898
              name: http
---
apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: {namespace}
spec:
  selector:
    app: {name}
  ports:
    - name: http
      port: 80
      targetPort: http
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {name}
  namespace: {namespace}
spec:
  rules:
    - host: {name}.example.invalid
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: {name}
                port:
                  name: http
"
    )
}

#[tokio::main]
#[allow(clippy::too_many_lines)] // one benchmark run, read top to bottom
async fn main() -> anyhow::Result<()> {
    let apps: usize = std::env::var("FLEET_APPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let registry = Registry::start().await;
    let dir = tempfile::tempdir()?;

    // The artifacts: one per app, pushed as CI would.
    let pushed = Instant::now();
    let sources = dir.path().join("sources");
    concurrently(apps, |i| {
        let source = sources.join(format!("app-{i}"));
        let url = format!("{}:latest", registry.url(&format!("apps/app-{i}")));
        async move {
            std::fs::create_dir_all(&source)?;
            std::fs::write(source.join("app.yaml"), app(&format!("app-{i}"), "apps"))?;
            let options = PushOptions {
                source: "https://example.invalid/fleet.git".to_owned(),
                revision: format!("main@sha1:{i:040x}"),
                ..PushOptions::default()
            };
            let registry = RegistryOptions {
                insecure: true,
                ..RegistryOptions::default()
            };
            oci::push(&source, &url, &options, &registry).await?;
            Ok(())
        }
    })
    .await?;
    eprintln!(
        "pushed {apps} artifacts in {:.1} s",
        pushed.elapsed().as_secs_f64()
    );

    // The control plane, then the operator, as separate processes.
    let kubeconfig = dir.path().join("kubeconfig");
    let server = common::ControlPlane::start(&kubeconfig).await?;
    let config = server.config.clone();
    let client = kube::Client::try_from(config)?;
    for ns in ["flux-system", "apps", "capstan-apply", "kubectl-apply"] {
        namespace(&client, ns).await?;
    }
    let operator = Operator::start(&kubeconfig, &dir.path().join("artifacts")).await?;

    // The fleet.
    let started = Instant::now();
    concurrently(apps, |i| {
        let client = client.clone();
        let url = registry.url(&format!("apps/app-{i}"));
        async move {
            apply_json(
                &client,
                json!({
                    "apiVersion": "source.toolkit.fluxcd.io/v1",
                    "kind": "OCIRepository",
                    "metadata": {"name": format!("app-{i}"), "namespace": "flux-system"},
                    "spec": {"url": url, "interval": "1h", "insecure": true,
                             "ref": {"tag": "latest"}},
                }),
            )
            .await?;
            apply_json(
                &client,
                json!({
                    "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                    "kind": "Kustomization",
                    "metadata": {"name": format!("app-{i}"), "namespace": "flux-system"},
                    "spec": {"interval": "1h", "path": "./", "prune": true, "wait": true,
                             "timeout": "5m",
                             "sourceRef": {"kind": "OCIRepository", "name": format!("app-{i}")}},
                }),
            )
            .await
        }
    })
    .await?;
    let created = started.elapsed();
    let kustomizations: Api<capstan_api::Kustomization> =
        Api::namespaced(client.clone(), "flux-system");
    wait_all_ready(&kustomizations, apps, "Kustomizations", started).await?;
    let figures = Figures::measure(started, created, &operator, &server);

    // Apply throughput: the same objects, Capstan's apply engine vs kubectl, same server.
    let all: String = (0..apps)
        .map(|i| app(&format!("app-{i}"), "kubectl-apply"))
        .collect::<Vec<_>>()
        .join("---\n");
    let file = dir.path().join("all.yaml");
    std::fs::write(&file, &all)?;
    let kubectl_started = Instant::now();
    let out = tokio::process::Command::new("kubectl")
        .env("KUBECONFIG", &kubeconfig)
        .env("HOME", dir.path())
        .args(["apply", "--server-side", "--field-manager", "bench", "-f"])
        .arg(&file)
        .stdout(Stdio::null())
        .output()
        .await?;
    let kubectl_time = kubectl_started.elapsed();
    anyhow::ensure!(
        out.status.success(),
        "kubectl apply failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let objects: Vec<DynamicObject> = capstan_kustomize::parse_documents(
        &all.replace("namespace: kubectl-apply", "namespace: capstan-apply"),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?
    .into_iter()
    .map(serde_json::from_value)
    .collect::<Result<_, _>>()?;
    let manager = ResourceManager::new(client.clone(), "kustomize-controller");
    let capstan_started = Instant::now();
    let changes = manager
        .apply_all_staged(&objects, &ApplyOptions::default())
        .await?;
    let capstan_time = capstan_started.elapsed();
    anyhow::ensure!(
        changes.entries.len() == objects.len(),
        "the apply engine applied {} of {} objects",
        changes.entries.len(),
        objects.len()
    );

    println!("fleet benchmark: {apps} Kustomizations x 4 objects, each from its own OCIRepository");
    figures.print("target <= 60 s", "targets idle <= 25 MiB, peak <= 150 MiB");
    println!(
        "  apply of {} objects     capstan {:.2} s, kubectl apply --server-side {:.2} s, ratio {:.2}   target <= 0.5",
        objects.len(),
        capstan_time.as_secs_f64(),
        kubectl_time.as_secs_f64(),
        capstan_time.as_secs_f64() / kubectl_time.as_secs_f64()
    );
    drop(operator);
    drop(server);
    Ok(())
}
