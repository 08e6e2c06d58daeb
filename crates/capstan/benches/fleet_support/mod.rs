//! What the two fleet benchmarks (`fleet`: Kustomizations, `helm_fleet`: HelmReleases) share:
//! applying objects as JSON, the `capstan controller` process under test, creating the fleet a
//! few objects at a time, waiting until all of it is Ready, and the figures they print.

use std::future::Future;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use crate::common;

/// Server-side applies `value` (any kind, namespaced or not) as the field manager `bench`.
pub async fn apply_json(client: &kube::Client, value: serde_json::Value) -> anyhow::Result<()> {
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

/// Creates the namespace `name`.
pub async fn namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    apply_json(
        client,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .await
}

/// Runs `task(i)` for each `i` below `count`, eight at a time; the first error wins.
pub async fn concurrently<F, Fut>(count: usize, task: F) -> anyhow::Result<()>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let results = futures::stream::iter(0..count)
        .map(task)
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    results.into_iter().collect()
}

/// `capstan controller` (10 workers, no leader election) against the control plane of
/// `kubeconfig`, storing artifacts under `artifacts`; killed on drop.
pub struct Operator {
    process: tokio::process::Child,
    /// Its RSS in KiB once started and idle (3 s after the start).
    pub idle_kib: u64,
}

impl Operator {
    pub async fn start(kubeconfig: &Path, artifacts: &Path) -> anyhow::Result<Self> {
        let process = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args([
                "controller",
                "--enable-leader-election=false",
                "--log-level",
                "warn",
                "--storage-addr",
                "127.0.0.1:0",
                "--receiver-addr",
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
            .spawn()?;
        let pid = process.id().expect("operator pid");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let idle_kib = common::rss_kib(pid, "VmRSS:");
        Ok(Self { process, idle_kib })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.id().expect("the operator runs")
    }
}

/// Polls `api` until `count` of its objects are Ready, reporting progress every 10 s since
/// `started`; fails after 15 minutes. `what` names the kind in the messages.
pub async fn wait_all_ready<K>(
    api: &Api<K>,
    count: usize,
    what: &str,
    started: Instant,
) -> anyhow::Result<()>
where
    K: capstan_api::FluxKind + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut last_report = Instant::now();
    loop {
        let list = api.list(&ListParams::default()).await?;
        let ready = list
            .items
            .iter()
            .filter(|o| capstan_api::FluxKind::is_ready(*o))
            .count();
        if ready == count {
            return Ok(());
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "{ready}/{count} Ready after {:.0} s",
                started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(900),
            "only {ready}/{count} {what} Ready after 15 minutes"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The figures both fleets report, measured once all is Ready.
pub struct Figures {
    wall: Duration,
    created: Duration,
    idle_kib: u64,
    peak_kib: u64,
    settled_kib: u64,
    plane_peak_kib: u64,
}

impl Figures {
    /// The times since `started` (now) and to `created`, the operator's RSS and the control
    /// plane's peak, now.
    pub fn measure(
        started: Instant,
        created: Duration,
        operator: &Operator,
        plane: &common::ControlPlane,
    ) -> Self {
        Self {
            wall: started.elapsed(),
            created,
            idle_kib: operator.idle_kib,
            peak_kib: common::rss_kib(operator.pid(), "VmHWM:"),
            settled_kib: common::rss_kib(operator.pid(), "VmRSS:"),
            plane_peak_kib: common::rss_kib(plane.pid(), "VmHWM:"),
        }
    }

    /// Prints the wall time to all Ready (and the time the objects took to create), the
    /// operator's RSS and the control plane's peak, with `wall_target` and `rss_targets`.
    pub fn print(&self, wall_target: &str, rss_targets: &str) {
        println!(
            "  all Ready in            {:.1} s (objects created in {:.1} s)   {wall_target}",
            self.wall.as_secs_f64(),
            self.created.as_secs_f64()
        );
        println!(
            "  operator RSS            idle {:.1} MiB, peak {:.1} MiB, settled {:.1} MiB   {rss_targets}",
            common::mib(self.idle_kib),
            common::mib(self.peak_kib),
            common::mib(self.settled_kib)
        );
        println!(
            "  control plane peak RSS  {:.1} MiB (a separate process, not the operator)",
            common::mib(self.plane_peak_kib)
        );
    }
}
