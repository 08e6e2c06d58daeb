//! `pods/log` for a Pod whose log the embedding process keeps (as `capstan dev` does for its
//! controllers), read by `kubectl logs` and kube-rs with kubelet's options.

use std::sync::Arc;
use std::time::Duration;

use capstan_apiserver::logs::PodLog;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::harness::TestCluster;

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: app}\nspec:\n  containers:\n  - {name: manager, image: capstan:dev}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: silent}\nspec:\n  containers:\n  - {name: manager, image: capstan:dev}\n";

async fn started() -> (TestCluster, Arc<PodLog>) {
    let c = TestCluster::start().await;
    c.kubectl_stdin(&["apply", "-f", "-"], POD).await.ok();
    let log = Arc::new(PodLog::new(1 << 20));
    for line in ["first", "second", "third"] {
        log.push(line);
    }
    c.server.register_pod_log("default", "app", log.clone());
    (c, log)
}

/// `kubectl logs` with `--tail`, `--limit-bytes`, `--timestamps`, `--since`/`--since-time` and
/// `-c` reads what kubelet would serve; Pods without a kept log and unknown containers are refused.
#[tokio::test(flavor = "multi_thread")]
async fn kubectl_logs_reads_a_kept_log_with_kubelets_options() {
    let (c, _log) = started().await;
    let logs = |args: &'static [&'static str]| {
        let mut all = vec!["logs", "app"];
        all.extend_from_slice(args);
        let c = &c;
        async move { c.kubectl(&all).await.ok().stdout }
    };
    assert_eq!(logs(&[]).await, "first\nsecond\nthird\n");
    assert_eq!(logs(&["--tail=2"]).await, "second\nthird\n");
    assert_eq!(logs(&["--tail=0"]).await, "");
    assert_eq!(logs(&["--limit-bytes=8"]).await, "first\nse");
    assert_eq!(logs(&["--since=1h"]).await, "first\nsecond\nthird\n");
    assert_eq!(logs(&["--since-time=2999-01-01T00:00:00Z"]).await, "");
    assert_eq!(logs(&["-c", "manager", "--tail=1"]).await, "third\n");
    let stamped = logs(&["--timestamps", "--tail=1"]).await;
    let (time, text) = stamped.trim_end().split_once(' ').expect("a timestamp");
    assert_eq!(text, "third");
    assert!(time.parse::<jiff::Timestamp>().is_ok(), "{stamped}");

    let wrong = c.kubectl(&["logs", "app", "-c", "sidecar"]).await;
    assert_ne!(wrong.status, 0);
    assert!(
        wrong
            .stderr
            .contains("container sidecar is not valid for pod app"),
        "{}",
        wrong.stderr
    );
    let silent = c.kubectl(&["logs", "silent"]).await;
    assert_ne!(silent.status, 0);
    assert!(
        silent.stderr.contains("pod silent has no log here"),
        "{}",
        silent.stderr
    );
    let missing = c.kubectl(&["logs", "absent"]).await;
    assert_ne!(missing.status, 0);
    assert!(missing.stderr.contains("not found"), "{}", missing.stderr);
}

/// `kubectl logs -f` prints the kept lines, then a line written after it started; kube-rs reads
/// the same log with `tailLines`.
#[tokio::test(flavor = "multi_thread")]
async fn followed_logs_see_new_lines_and_kube_rs_reads_them() {
    let (c, log) = started().await;
    let mut child = c.kubectl_spawn(&["logs", "-f", "app", "--tail=1"]);
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("a line in time")
        .expect("read");
    assert_eq!(first.as_deref(), Some("third"));
    log.push("fourth");
    let next = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the new line in time")
        .expect("read");
    assert_eq!(next.as_deref(), Some("fourth"));
    child.kill().await.ok();

    let pods: Api<Pod> = Api::namespaced(c.client().await, "default");
    let text = pods
        .logs(
            "app",
            &LogParams {
                tail_lines: Some(2),
                ..LogParams::default()
            },
        )
        .await
        .expect("logs");
    assert_eq!(text, "third\nfourth\n");
}
