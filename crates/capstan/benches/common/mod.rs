//! What the binary's benchmarks share: the embedded control plane as a separate process and
//! the memory figures of a process.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A `capstan dev --no-controllers` process (killed on drop) and its kubeconfig.
pub struct ControlPlane {
    /// The server process.
    pub process: tokio::process::Child,
    /// The client configuration for it.
    pub config: kube::Config,
}

impl ControlPlane {
    /// Starts the control plane on a free port, writing its kubeconfig to `kubeconfig`.
    pub async fn start(kubeconfig: &Path) -> anyhow::Result<Self> {
        let process = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args([
                "dev",
                "--no-controllers",
                "--listen",
                "127.0.0.1:0",
                "--log-level",
                "warn",
                "--kubeconfig",
            ])
            .arg(kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let start = Instant::now();
        while !kubeconfig.exists() {
            anyhow::ensure!(
                start.elapsed() < Duration::from_secs(60),
                "capstan dev did not write {}",
                kubeconfig.display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(kubeconfig)?,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        Ok(Self { process, config })
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.process.id().expect("the control plane runs")
    }
}

/// A field of `/proc/<pid>/status` in KiB: `VmRSS:` (now) or `VmHWM:` (peak).
pub fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// KiB as MiB.
pub fn mib(kib: u64) -> f64 {
    // Precision is irrelevant for a printed figure.
    #[allow(clippy::cast_precision_loss)]
    let kib = kib as f64;
    kib / 1024.0
}
