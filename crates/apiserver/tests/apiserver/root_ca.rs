//! `kube-root-ca.crt`: every namespace holds the control plane's CA bundle, as the
//! root-ca-cert-publisher of kube-controller-manager keeps it.

use std::time::Duration;

use serde_json::Value;

use crate::harness::{TestCluster, eventually};

async fn root_ca(c: &TestCluster, namespace: &str) -> Option<Value> {
    let run = c
        .kubectl(&[
            "get",
            "configmap",
            "kube-root-ca.crt",
            "-n",
            namespace,
            "-o",
            "json",
        ])
        .await;
    (run.status == 0).then(|| run.json())
}

#[tokio::test]
async fn every_namespace_has_kube_root_ca_crt_kept_as_published() {
    let c = TestCluster::start().await;
    let bundle = c.server.cluster().root_ca().to_owned();
    assert!(
        bundle.starts_with("-----BEGIN CERTIFICATE-----"),
        "{bundle}"
    );
    for namespace in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let cm = root_ca(&c, namespace).await.expect(namespace);
        assert_eq!(cm["data"]["ca.crt"], bundle.as_str(), "{namespace}");
    }

    // Created with the namespace.
    c.kubectl(&["create", "namespace", "team"]).await.ok();
    let cm = root_ca(&c, "team")
        .await
        .expect("published with the namespace");
    assert_eq!(cm["data"]["ca.crt"], bundle.as_str());
    assert!(
        cm["metadata"]["annotations"]["kubernetes.io/description"]
            .as_str()
            .is_some_and(|d| d.contains("kube-apiserver")),
        "{cm}"
    );

    // Recreated when deleted.
    let uid = cm["metadata"]["uid"].clone();
    c.kubectl(&["delete", "configmap", "kube-root-ca.crt", "-n", "team"])
        .await
        .ok();
    eventually(
        Duration::from_secs(10),
        "kube-root-ca.crt recreated",
        || {
            let c = &c;
            let uid = &uid;
            async move {
                root_ca(c, "team")
                    .await
                    .filter(|cm| cm["metadata"]["uid"] != *uid)
            }
        },
    )
    .await;

    // Reset when changed.
    c.kubectl(&[
        "patch",
        "configmap",
        "kube-root-ca.crt",
        "-n",
        "team",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"ca.crt":"not a certificate"}}"#,
    ])
    .await
    .ok();
    eventually(Duration::from_secs(10), "kube-root-ca.crt reset", || {
        let c = &c;
        let bundle = &bundle;
        async move {
            root_ca(c, "team")
                .await
                .filter(|cm| cm["data"]["ca.crt"] == bundle.as_str())
        }
    })
    .await;

    // A terminating namespace is not refilled: deleting it finishes.
    c.kubectl(&["delete", "namespace", "team", "--timeout=30s"])
        .await
        .ok();
    let gone = c.kubectl(&["get", "namespace", "team"]).await;
    assert_ne!(gone.status, 0, "{}", gone.stdout);
}
