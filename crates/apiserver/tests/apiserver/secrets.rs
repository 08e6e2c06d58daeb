//! A Secret whose `data` is not base64 is refused through every way kubectl writes it, and no
//! error kubectl prints carries the value.

use crate::harness::TestCluster;

const MARKER: &str = "kubectl-s3kr1t-value";

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_writes_of_bad_secret_data_never_echo_it() {
    let c = TestCluster::start().await;
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
        let run = c.kubectl_stdin(args, &manifest).await.fails();
        let text = format!("{}{}", run.stdout, run.stderr);
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
    let run = c
        .kubectl(&["get", "secret", "bad", "-n", "default"])
        .await
        .fails();
    assert!(run.stderr.contains("NotFound"), "nothing stored: {run:?}");
    c.server.shutdown().await;
}
