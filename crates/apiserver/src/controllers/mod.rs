//! The control plane's own controllers — what kube-controller-manager and the apiextensions server
//! do on a real cluster: CRD registration, garbage collection, namespace lifecycle, the
//! `kube-root-ca.crt` publisher and a workload
//! simulator that gives Deployments, StatefulSets, DaemonSets, ReplicaSets and Jobs a status.

pub mod crd;
pub mod gc;
pub mod namespace;
pub mod root_ca;
pub mod workload;

use tokio::task::JoinHandle;

use crate::cluster::Cluster;

/// Starts every background controller.
pub fn spawn_all(cluster: &Cluster) -> Vec<JoinHandle<()>> {
    vec![
        tokio::spawn(gc::run(cluster.clone())),
        tokio::spawn(namespace::run(cluster.clone())),
        tokio::spawn(root_ca::run(cluster.clone())),
        tokio::spawn(workload::run(cluster.clone())),
    ]
}
