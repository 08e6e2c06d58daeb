//! The one way the CLI tests start `capstan dev` and run the binary against it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use capstan_testkit::{Run, kubectl_binary};

/// What `capstan dev` prints once it serves.
const STARTED: &str = "press Ctrl-C to stop";

/// A `capstan <args>` command for the binary under test.
pub(crate) fn capstan_command() -> Command {
    Command::new(env!("CARGO_BIN_EXE_capstan"))
}

/// Spawns `command` (a `capstan dev …`) with stdout discarded and stderr piped, killed on drop,
/// and waits up to 60 s for it to say it serves. Returns the child and the stderr lines said
/// before that; later lines are appended to `log` when given, otherwise drained so that the child
/// never blocks on a full pipe.
pub(crate) async fn spawn_dev(
    command: &mut Command,
    log: Option<Arc<Mutex<String>>>,
) -> (Child, Vec<String>) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let said = tokio::time::timeout(Duration::from_secs(60), async {
        let mut said = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains(STARTED) {
                return said;
            }
            said.push(line);
        }
        panic!("capstan dev exited early: {said:?}");
    })
    .await
    .expect("capstan dev did not start within 60 s");
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(log) = &log {
                let mut log = log.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        }
    });
    (child, said)
}

/// `capstan dev --no-example` in a temp dir, started.
pub(crate) struct Dev {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) child: Child,
    /// Its stderr lines before it said it serves.
    pub(crate) said: Vec<String>,
}

impl Dev {
    /// `capstan dev --no-example --listen 127.0.0.1:0 --storage-addr 127.0.0.1:0 --kubeconfig
    /// <dir>/kubeconfig --storage-path <dir>/artifacts <extra>`, started.
    pub(crate) async fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let (child, said) = spawn_dev(
            capstan_command()
                .args([
                    "dev",
                    "--no-example",
                    "--listen",
                    "127.0.0.1:0",
                    "--storage-addr",
                    "127.0.0.1:0",
                    "--kubeconfig",
                ])
                .arg(&kubeconfig)
                .args(extra)
                .arg("--storage-path")
                .arg(dir.path().join("artifacts")),
            None,
        )
        .await;
        Self {
            dir,
            kubeconfig,
            child,
            said,
        }
    }
}

/// `capstan <args> --kubeconfig <kubeconfig>`, to run.
pub(crate) fn capstan(kubeconfig: &Path, args: &[&str]) -> Command {
    let mut command = capstan_command();
    command.args(args).arg("--kubeconfig").arg(kubeconfig);
    command
}

/// `kubectl <args>` with `KUBECONFIG=<kubeconfig>` and `HOME=<home>`.
pub(crate) async fn kubectl(kubeconfig: &Path, home: &Path, args: &[&str]) -> Run {
    Command::new(kubectl_binary())
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", home)
        .args(args)
        .output()
        .await
        .unwrap()
        .into()
}

/// `capstan dev --no-controllers` (the control plane alone) in a temp dir, stopped on drop.
pub(crate) struct ControlPlane {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) kubeconfig: PathBuf,
    _dev: Child,
}

impl ControlPlane {
    pub(crate) async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let (dev, _) = spawn_dev(
            capstan_command()
                .args(["dev", "--no-controllers", "--listen", "127.0.0.1:0"])
                .args(["--log-level", "warn", "--kubeconfig"])
                .arg(&kubeconfig)
                .current_dir(dir.path()),
            None,
        )
        .await;
        Self {
            dir,
            kubeconfig,
            _dev: dev,
        }
    }

    /// `kubectl <args>` with another kubeconfig (an impersonating copy), from the temp dir.
    pub(crate) async fn kubectl_with(&self, kubeconfig: &Path, args: &[&str]) -> Run {
        kubectl(kubeconfig, self.dir.path(), args).await
    }

    /// `kubectl <args>` against the control plane.
    pub(crate) async fn kubectl(&self, args: &[&str]) -> Run {
        self.kubectl_with(&self.kubeconfig, args).await
    }

    /// `capstan <args>` against the control plane, from the temp dir.
    pub(crate) async fn capstan(&self, args: &[&str]) -> Run {
        capstan(&self.kubeconfig, args)
            .current_dir(self.dir.path())
            .output()
            .await
            .unwrap()
            .into()
    }
}
