//! Test harness: one control plane per test and a `kubectl` runner against it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

/// A control plane serving on a random loopback port, with its kubeconfig in a temp dir.
pub struct TestCluster {
    pub server: capstan_apiserver::ApiServer,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

impl TestCluster {
    pub async fn start() -> Self {
        Self::start_with(capstan_apiserver::Config::default()).await
    }

    pub async fn start_with(config: capstan_apiserver::Config) -> Self {
        let server = capstan_apiserver::ApiServer::start(config)
            .await
            .expect("start the control plane");
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, server.kubeconfig()).expect("write kubeconfig");
        Self {
            server,
            dir,
            kubeconfig,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file in the test's temp dir and returns its path.
    pub fn file(&self, name: &str, content: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).expect("write file");
        p
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(kubectl_binary());
        c.env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path())
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }

    /// Runs kubectl with a 60 s limit.
    pub async fn kubectl(&self, args: &[&str]) -> Run {
        let out = tokio::time::timeout(Duration::from_secs(60), self.command(args).output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
            .expect("run kubectl");
        out.into()
    }

    /// Runs kubectl with extra environment variables (e.g. `KUBE_EDITOR` for `kubectl edit`).
    pub async fn kubectl_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = self.command(args);
        cmd.envs(env.iter().copied());
        let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
            .expect("run kubectl");
        out.into()
    }

    /// Runs kubectl with `input` on stdin.
    pub async fn kubectl_stdin(&self, args: &[&str], input: &str) -> Run {
        let mut cmd = self.command(args);
        cmd.stdin(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn kubectl");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(input.as_bytes())
            .await
            .expect("write stdin");
        drop(stdin);
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
            .expect("run kubectl");
        out.into()
    }

    /// Starts kubectl in the background (e.g. `get -w`); the caller reads its stdout.
    pub fn kubectl_spawn(&self, args: &[&str]) -> tokio::process::Child {
        self.command(args).spawn().expect("spawn kubectl")
    }

    /// A kube-rs client for this cluster.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("read kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("kube config");
        kube::Client::try_from(config).expect("kube client")
    }
}

pub use capstan_testkit::{Run, corpus, eventually, kubectl_binary};
