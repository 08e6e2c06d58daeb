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
use std::time::{Duration, Instant};

mod common;

use capstan_apply::{ApplyOptions, ResourceManager};
use capstan_source::oci::{self, PushOptions, RegistryOptions};
use capstan_testkit::Registry;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
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

async fn namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    apply_json(
        client,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .await
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
    let pushes = futures::stream::iter(0..apps)
        .map(|i| {
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
                anyhow::Ok(())
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    for push in pushes {
        push?;
    }
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
    let operator = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
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
        .arg(&kubeconfig)
        .arg("--storage-path")
        .arg(dir.path().join("artifacts"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pid = operator.id().expect("operator pid");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_kib = common::rss_kib(pid, "VmRSS:");

    // The fleet.
    let started = Instant::now();
    let creations = futures::stream::iter(0..apps)
        .map(|i| {
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
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    for creation in creations {
        creation?;
    }
    let created = started.elapsed();
    let kustomizations: Api<capstan_api::Kustomization> =
        Api::namespaced(client.clone(), "flux-system");
    let mut last_report = Instant::now();
    loop {
        let list = kustomizations.list(&ListParams::default()).await?;
        let ready = list
            .items
            .iter()
            .filter(|k| capstan_api::FluxKind::is_ready(*k))
            .count();
        if ready == apps {
            break;
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "{ready}/{apps} Ready after {:.0} s",
                started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(900),
            "only {ready}/{apps} Kustomizations Ready after 15 minutes"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let wall = started.elapsed();
    let peak_kib = common::rss_kib(pid, "VmHWM:");
    let settled_kib = common::rss_kib(pid, "VmRSS:");
    let server_peak_kib = common::rss_kib(server.pid(), "VmHWM:");

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
    println!(
        "  all Ready in            {:.1} s (objects created in {:.1} s)   target <= 60 s",
        wall.as_secs_f64(),
        created.as_secs_f64()
    );
    println!(
        "  operator RSS            idle {:.1} MiB, peak {:.1} MiB, settled {:.1} MiB   targets idle <= 25 MiB, peak <= 150 MiB",
        common::mib(idle_kib),
        common::mib(peak_kib),
        common::mib(settled_kib)
    );
    println!(
        "  control plane peak RSS  {:.1} MiB (a separate process, not the operator)",
        common::mib(server_peak_kib)
    );
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
