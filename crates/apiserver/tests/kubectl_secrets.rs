//! kubectl against the embedded control plane: a Secret whose `data` is not base64 is refused
//! through every way kubectl writes it, and no error kubectl prints carries the value.

use std::io::Write as _;
use std::process::{Command, Stdio};

use capstan_apiserver::{ApiServer, Config};

const MARKER: &str = "kubectl-s3kr1t-value";

fn kubectl(kubeconfig: &std::path::Path, args: &[&str], stdin: &str) -> (bool, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl on PATH");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_writes_of_bad_secret_data_never_echo_it() {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let dir = std::env::temp_dir().join(format!("capstan-kubectl-secrets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig()).unwrap();
    let manifest = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bad\n  namespace: default\ndata:\n  token: {MARKER}\n"
    );
    let writes: [&[&str]; 4] = [
        &["create", "-f", "-"],
        &["apply", "-f", "-"],
        &["apply", "--server-side", "-f", "-"],
        &["apply", "--server-side", "--dry-run=server", "-f", "-"],
    ];
    for args in writes {
        let path = kubeconfig.clone();
        let manifest = manifest.clone();
        let (ok, text) = tokio::task::spawn_blocking(move || kubectl(&path, args, &manifest))
            .await
            .unwrap();
        assert!(!ok, "kubectl {args:?} succeeded: {text}");
        // "kubectl-" is valid base64; Go stops at the '-' at byte 7.
        assert!(
            text.contains("illegal base64 data at input byte 7"),
            "kubectl {args:?}: {text}"
        );
        assert!(
            !text.contains("s3kr1t"),
            "kubectl {args:?} shows the value: {text}"
        );
    }
    let path = kubeconfig.clone();
    let (ok, text) = tokio::task::spawn_blocking(move || {
        kubectl(&path, &["get", "secret", "bad", "-n", "default"], "")
    })
    .await
    .unwrap();
    assert!(!ok && text.contains("NotFound"), "nothing stored: {text}");
    let _ = std::fs::remove_dir_all(&dir);
    server.shutdown().await;
}
