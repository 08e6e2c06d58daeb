//! The root CA publisher (kube-controller-manager's `root-ca-cert-publisher`): every namespace
//! that is not terminating holds the ConfigMap `kube-root-ca.crt` with `ca.crt`, the control
//! plane's CA bundle. It is written when the namespace is created, recreated when deleted and
//! reset when its data is changed.
//!
//! The control plane serves plain HTTP, so there is no serving CA to publish: the bundle is a
//! self-signed CA (P-256) made when the cluster starts ([`Cluster::root_ca`]). Workloads that
//! mount it find the file they expect; nothing is verified with it.

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::cluster::{Cluster, WriteOptions};
use crate::store::EventType;

/// The ConfigMap's name.
pub const NAME: &str = "kube-root-ca.crt";

/// The data key holding the bundle.
pub const KEY: &str = "ca.crt";

/// The annotation Kubernetes sets on it.
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";

const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

const MANAGER: &str = "kube-controller-manager";

/// A new self-signed CA certificate, PEM.
pub fn self_signed_ca() -> String {
    let key = rcgen::KeyPair::generate().expect("P-256 key generation does not fail");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())
        .expect("no subject alternative names to parse");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "capstan-apiserver-ca");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .self_signed(&key)
        .expect("a self-signed certificate of a fresh key")
        .pem()
}

/// Writes (or resets) `kube-root-ca.crt` in `namespace`, unless the namespace is gone or
/// terminating.
pub fn publish(cluster: &Cluster, namespace: &str) {
    let (Ok(ns_type), Ok(cm_type)) = (
        cluster.resource("", "v1", "namespaces"),
        cluster.resource("", "v1", "configmaps"),
    ) else {
        return;
    };
    match cluster.get(&ns_type, None, namespace) {
        Ok(ns) if ns.pointer("/metadata/deletionTimestamp").is_none() => {}
        _ => return,
    }
    let ca = cluster.root_ca().to_owned();
    let current = cluster.get(&cm_type, Some(namespace), NAME).ok();
    let Some(current) = current else {
        let body = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": NAME,
                "namespace": namespace,
                "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION},
            },
            "data": {KEY: ca},
        });
        let opts = WriteOptions {
            field_manager: MANAGER.into(),
            ..WriteOptions::default()
        };
        if let Err(e) = cluster.create(&cm_type, Some(namespace), body, &opts)
            && e.code != 409
            && e.code != 403
        {
            tracing::warn!(namespace, error = %e.message, "cannot publish {NAME}");
        }
        return;
    };
    let intact = current.get("data") == Some(&json!({KEY: ca}))
        && current.pointer("/metadata/annotations/kubernetes.io~1description")
            == Some(&json!(DESCRIPTION));
    if intact || current.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let reset = cluster.mutate(&cm_type, Some(namespace), NAME, None, MANAGER, |cm| {
        cm["data"] = json!({KEY: ca});
        cm.as_object_mut().map(|o| o.remove("binaryData"));
        let meta = &mut cm["metadata"];
        if !meta.get("annotations").is_some_and(Value::is_object) {
            meta["annotations"] = json!({});
        }
        meta["annotations"][DESCRIPTION_ANNOTATION] = json!(DESCRIPTION);
        true
    });
    if let Err(e) = reset
        && e.code != 404
    {
        tracing::warn!(namespace, error = %e.message, "cannot reset {NAME}");
    }
}

/// Publishes in every namespace.
pub fn sweep(cluster: &Cluster) {
    let Ok(ns_type) = cluster.resource("", "v1", "namespaces") else {
        return;
    };
    let (namespaces, _) = cluster.list(&ns_type, None);
    for ns in namespaces {
        publish(cluster, ns.name());
    }
}

/// Runs the publisher: every namespace at start, then on namespace writes and on any change to
/// a `kube-root-ca.crt`.
pub async fn run(cluster: Cluster) {
    let mut events = cluster.store().subscribe_all();
    sweep(&cluster);
    loop {
        match events.recv().await {
            Ok(event) => {
                if !event.key.group.is_empty() {
                    continue;
                }
                match event.key.resource.as_str() {
                    "namespaces" if event.type_ != EventType::Deleted => {
                        publish(&cluster, event.object.name());
                    }
                    "configmaps" if event.object.name() == NAME => {
                        publish(&cluster, event.object.namespace());
                    }
                    _ => {}
                }
            }
            Err(RecvError::Lagged(_)) => sweep(&cluster),
            Err(RecvError::Closed) => return,
        }
    }
}
