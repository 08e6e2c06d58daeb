//! Leader election against the embedded control plane: one candidate leads, the other waits,
//! and takes over when the leader releases the Lease or stops renewing it.

use std::time::Duration;

use capstan_apiserver::{ApiServer, Config};
use capstan_controllers::leader::{LeaderElectionConfig, LeaderElector, Leadership};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tokio_util::sync::CancellationToken;

async fn client(server: &ApiServer) -> kube::Client {
    let client = crate::support::client_from_kubeconfig(&server.kubeconfig()).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-system"}});
    namespaces
        .patch(
            "flux-system",
            &PatchParams::apply("test"),
            &Patch::Apply(ns),
        )
        .await
        .unwrap();
    client
}

/// A control plane (kept alive by the returned server), a client, a shutdown token and the
/// leadership of candidate "a", the first to ask.
async fn first_leader() -> (ApiServer, kube::Client, CancellationToken, Leadership) {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = client(&server).await;
    let shutdown = CancellationToken::new();
    let first = LeaderElector::new(client.clone(), config("a"))
        .acquire(&shutdown)
        .await
        .expect("the first candidate leads");
    (server, client, shutdown, first)
}

fn config(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig {
        identity: identity.to_owned(),
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        ..LeaderElectionConfig::new("flux-system", "capstan-leader-election")
    }
}

/// When the Lease was last renewed.
async fn renew_time(client: &kube::Client) -> std::time::Duration {
    let lease = Api::<Lease>::namespaced(client.clone(), "flux-system")
        .get("capstan-leader-election")
        .await
        .unwrap();
    let renewed = lease.spec.unwrap().renew_time.expect("a renewed Lease").0;
    Duration::from_micros(u64::try_from(renewed.as_microsecond()).expect("a renewal after 1970"))
}

async fn holder(client: &kube::Client) -> (Option<String>, Option<i32>) {
    let lease = Api::<Lease>::namespaced(client.clone(), "flux-system")
        .get("capstan-leader-election")
        .await
        .unwrap();
    let spec = lease.spec.unwrap();
    (spec.holder_identity, spec.lease_transitions)
}

#[tokio::test]
async fn one_candidate_leads_and_the_other_takes_over_on_release() {
    let (_server, client, shutdown, first) = first_leader().await;
    assert_eq!(holder(&client).await, (Some("a".to_owned()), Some(0)));

    let second = tokio::spawn({
        let (client, shutdown) = (client.clone(), shutdown.clone());
        async move {
            LeaderElector::new(client, config("b"))
                .acquire(&shutdown)
                .await
        }
    });
    // Several lease durations pass, observed as renewals: the leader keeps renewing (its
    // renewTime moves two lease durations past the first one seen), the other keeps waiting.
    let first_renewal = renew_time(&client).await;
    crate::support::eventually(
        Duration::from_secs(20),
        "two lease durations of renewals",
        || {
            let client = client.clone();
            async move {
                (renew_time(&client).await.saturating_sub(first_renewal) >= Duration::from_secs(4))
                    .then_some(())
            }
        },
    )
    .await;
    assert!(
        !second.is_finished(),
        "the second candidate must wait while the first renews"
    );
    assert!(!first.lost().is_cancelled());
    assert_eq!(holder(&client).await.0.as_deref(), Some("a"));

    first.release().await;
    let second = tokio::time::timeout(Duration::from_secs(3), second)
        .await
        .expect("the second candidate takes over soon after the release")
        .unwrap()
        .expect("leadership");
    assert_eq!(holder(&client).await, (Some("b".to_owned()), Some(1)));
    second.release().await;
}

#[tokio::test]
async fn a_leader_that_stops_renewing_is_replaced_and_learns_it_lost() {
    let (_server, client, _shutdown, first) = first_leader().await;
    // Another writer takes the Lease over (as a replica would after a network partition).
    let lease = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 30},
    });
    Api::<Lease>::namespaced(client.clone(), "flux-system")
        .patch(
            "capstan-leader-election",
            &PatchParams::apply("intruder").force(),
            &Patch::Apply(lease),
        )
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), first.lost().cancelled())
        .await
        .expect("the old leader notices it lost the lease");
    first.release().await;
    assert_eq!(
        holder(&client).await.0.as_deref(),
        Some("intruder"),
        "a lost leader does not release"
    );

    // A waiting candidate is refused while the intruder's lease is fresh, then cancelled cleanly.
    let stop = CancellationToken::new();
    let waiting = tokio::spawn({
        let (client, stop) = (client.clone(), stop.clone());
        async move {
            LeaderElector::new(client, config("b"))
                .acquire(&stop)
                .await
                .is_some()
        }
    });
    // While it waits (a bounded number of observations), the intruder keeps the Lease.
    for _ in 0..5 {
        assert_eq!(holder(&client).await.0.as_deref(), Some("intruder"));
        assert!(!waiting.is_finished(), "the candidate took a fresh lease");
    }
    stop.cancel();
    assert!(
        !waiting.await.unwrap(),
        "cancelled before the lease expired"
    );
}

/// A TCP proxy to `upstream` that can be frozen: once frozen, it forwards nothing more on any
/// connection, old or new, and never closes them — an API server that stopped answering.
async fn freezable_proxy(
    upstream: std::net::SocketAddr,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let frozen = std::sync::Arc::new(AtomicBool::new(false));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let flag = frozen.clone();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let Ok(outbound) = tokio::net::TcpStream::connect(upstream).await else {
                continue;
            };
            let (in_read, in_write) = inbound.into_split();
            let (out_read, out_write) = outbound.into_split();
            let (up, down) = (flag.clone(), flag.clone());
            let pump = |frozen: std::sync::Arc<AtomicBool>,
                        mut from: tokio::net::tcp::OwnedReadHalf,
                        mut to: tokio::net::tcp::OwnedWriteHalf| async move {
                let mut buffer = vec![0u8; 16 * 1024];
                loop {
                    let Ok(n) = from.read(&mut buffer).await else {
                        return;
                    };
                    if frozen.load(Ordering::SeqCst) {
                        std::future::pending::<()>().await;
                    }
                    if n == 0 || to.write_all(&buffer[..n]).await.is_err() {
                        return;
                    }
                }
            };
            tokio::spawn(pump(up, in_read, out_write));
            tokio::spawn(pump(down, out_read, in_write));
        }
    });
    (url, frozen)
}

#[tokio::test]
async fn a_leader_whose_api_server_stops_answering_learns_it_lost_within_the_renew_deadline() {
    use std::sync::atomic::Ordering;
    let server = ApiServer::start(Config::default()).await.unwrap();
    let direct = client(&server).await;
    let upstream: std::net::SocketAddr =
        server.url().trim_start_matches("http://").parse().unwrap();
    let (url, frozen) = freezable_proxy(upstream).await;
    let proxied = crate::support::client_for(&url).await;
    let leader = LeaderElector::new(proxied, config("a"))
        .acquire(&CancellationToken::new())
        .await
        .expect("leads through the proxy");
    assert_eq!(holder(&direct).await.0.as_deref(), Some("a"));
    frozen.store(true, Ordering::SeqCst);
    let started = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(5), leader.lost().cancelled())
        .await
        .expect("a hung renewal ends in lost leadership, not a wait forever");
    assert!(
        started.elapsed() <= Duration::from_millis(1500 + 700),
        "lost after {:?}, renew deadline 1.5 s",
        started.elapsed()
    );
}
