//! The `capstan` binary as a user runs it: `dev`, `install --export`, `kustomize build`.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::harness::{Run, corpus, kubectl_binary};

/// GET over plain HTTP/1.0, returning (status line, body).
async fn http_get(url: &str) -> (String, String) {
    let rest = url.strip_prefix("http://").expect("http URL");
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let mut stream = tokio::net::TcpStream::connect(host).await.expect("connect");
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn capstan_dev_serves_the_api_with_crds_and_the_artifact_server() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args([
            "dev",
            "--listen",
            "127.0.0.1:0",
            "--storage-addr",
            "127.0.0.1:0",
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .arg("--storage-path")
        .arg(dir.path().join("artifacts"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut artifacts = None;
    let started = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) =
                line.strip_prefix("capstan dev: artifacts, /metrics and /healthz at ")
            {
                artifacts = Some(url.trim().to_owned());
            }
            if line.contains("press Ctrl-C to stop") {
                return;
            }
        }
        panic!("capstan dev exited early");
    })
    .await;
    assert!(started.is_ok(), "capstan dev did not start within 60 s");
    let artifacts = artifacts.expect("capstan dev prints the artifact server address");

    let (status, body) = http_get(&format!("{artifacts}/healthz")).await;
    assert!(status.contains("200"), "{status}");
    assert_eq!(body.trim(), "ok");
    let (status, _) = http_get(&format!("{artifacts}/metrics")).await;
    assert!(status.contains("200"), "{status}");

    let out: Run = tokio::process::Command::new(kubectl_binary())
        .env("KUBECONFIG", &kubeconfig)
        .env("HOME", dir.path())
        .args(["get", "crd", "-o", "name"])
        .output()
        .await
        .unwrap()
        .into();
    let out = out.ok();
    for crd in [
        "gitrepositories.source.toolkit.fluxcd.io",
        "kustomizations.kustomize.toolkit.fluxcd.io",
        "helmreleases.helm.toolkit.fluxcd.io",
    ] {
        assert!(
            out.stdout.contains(crd),
            "{crd} missing from:\n{}",
            out.stdout
        );
    }
    child.kill().await.unwrap();
}

#[tokio::test]
async fn install_export_prints_the_committed_crds() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["install", "--export"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../api/crds/capstan-crds.yaml"
    ))
    .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), committed);
}

#[tokio::test]
async fn kustomize_build_prints_what_kubectl_kustomize_prints() {
    let root = corpus("kustomize");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args([
            "kustomize",
            "build",
            "ex-helloworld-03-overlays-staging/overlays/staging",
        ])
        .current_dir(&root)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected =
        std::fs::read_to_string(root.join("ex-helloworld-03-overlays-staging.expected.yaml"))
            .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);

    let missing = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["kustomize", "build", "own-err-missing-resource"])
        .current_dir(&root)
        .output()
        .await
        .unwrap();
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("nope.yaml") && stderr.contains("resources"),
        "{stderr}"
    );
}
