//! Hostile-input cases: the reconcile runtime. Specs that ask for hot loops (`interval: 0s`,
//! `retryInterval: 0s`, a storm of reconcile requests), deletions racing an apply, and a
//! controller killed in the middle of an apply. Each case asserts the refusal or the bound,
//! and that nothing was orphaned and the status never claimed what the cluster does not hold.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capstan_api::{GitRepository, Kustomization};
use capstan_controllers::kustomization::KustomizationReconciler;
use capstan_controllers::runtime::{Controllers, Metrics, RateLimit, RuntimeConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::kustomize_support::{
    NAMESPACE, condition, create_kustomization, kustomizations, ready, request_reconcile, setup,
    wait_ready, wait_source_revision,
};
use crate::support::{self, Env, GitServer, RecordingProxy, eventually};

/// The owner label the Kustomization controller puts on what it applies.
const OWNER_LABEL: &str = "kustomize.toolkit.fluxcd.io/name";

/// How many objects the large applies write: enough that an apply through [`SlowProxy`]
/// takes seconds.
const OBJECTS: usize = 300;

/// `gotk_reconcile_duration_seconds_count` of one object: how many reconciles ran.
fn reconcile_count(metrics: &str, kind: &str, name: &str) -> u64 {
    metrics
        .lines()
        .filter(|line| line.starts_with("gotk_reconcile_duration_seconds_count{"))
        .filter(|line| {
            line.contains(&format!("kind=\"{kind}\"")) && line.contains(&format!("name=\"{name}\""))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

async fn env_reconcile_count(env: &Env, kind: &str, name: &str) -> u64 {
    let text = support::http_client()
        .get(format!("{}/metrics", env.http))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    reconcile_count(&text, kind, name)
}

/// The Kustomization controller as a task that can be killed (aborted mid-reconcile, as
/// `kill -9` would leave the cluster) or stopped, with its own metrics.
struct Controller {
    metrics: Metrics,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Controller {
    fn start(client: kube::Client) -> Self {
        let shutdown = CancellationToken::new();
        let config = RuntimeConfig {
            backoff_base: Duration::from_millis(200),
            backoff_max: Duration::from_secs(2),
            ..RuntimeConfig::default()
        };
        let controllers =
            Controllers::new(client.clone(), config).register(KustomizationReconciler::new(client));
        let metrics = controllers.metrics().clone();
        let task = tokio::spawn(controllers.run(shutdown.clone()));
        Self {
            metrics,
            shutdown,
            task,
        }
    }

    fn reconciles(&self, name: &str) -> u64 {
        reconcile_count(&self.metrics.encode(), "Kustomization", name)
    }

    /// Drops the controller where it stands: reconciles in flight end mid-way.
    async fn kill(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A TCP proxy to the control plane that holds every chunk, both ways, for `delay`, so that
/// applies through it take seconds; and every chunk of a watch stream for `watch_lag`, so that
/// the controller's cache lags behind the API server (as an informer's may). Dropping it cuts
/// every connection at once.
struct SlowProxy {
    url: String,
    tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl SlowProxy {
    async fn start(upstream: &str, delay: Duration, watch_lag: Duration) -> Self {
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let registry = tasks.clone();
        let accept = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = tokio::net::TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (in_read, in_write) = inbound.into_split();
                let (out_read, out_write) = outbound.into_split();
                // Set once the connection carries a watch (HTTP/1.1: it keeps it).
                let watching = Arc::new(AtomicBool::new(false));
                let up = tokio::spawn(forward(
                    in_read,
                    out_write,
                    delay,
                    Direction::Up(watching.clone()),
                ));
                let down = tokio::spawn(forward(
                    out_read,
                    in_write,
                    delay,
                    Direction::Down(watching, watch_lag),
                ));
                let mut registry = registry.lock().unwrap();
                registry.push(up.abort_handle());
                registry.push(down.abort_handle());
            }
        });
        tasks.lock().unwrap().push(accept.abort_handle());
        Self { url, tasks }
    }

    async fn client(&self) -> kube::Client {
        support::client_for(&self.url).await
    }
}

impl Drop for SlowProxy {
    fn drop(&mut self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

enum Direction {
    /// Client to server: marks the connection when it asks for a watch.
    Up(Arc<AtomicBool>),
    /// Server to client: lags once the connection carries a watch.
    Down(Arc<AtomicBool>, Duration),
}

async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
    direction: Direction,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buffer).await {
        if n == 0 {
            break;
        }
        let hold = match &direction {
            Direction::Up(watching) => {
                if buffer[..n].windows(10).any(|w| w == b"watch=true") {
                    watching.store(true, Ordering::SeqCst);
                }
                delay
            }
            Direction::Down(watching, lag) if watching.load(Ordering::SeqCst) => *lag,
            Direction::Down(..) => delay,
        };
        tokio::time::sleep(hold).await;
        if to.write_all(&buffer[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// The proxy of the large-apply cases: 10 ms a chunk, watches half a second behind.
async fn slow_proxy(env: &Env) -> SlowProxy {
    SlowProxy::start(
        &env.api_url(),
        Duration::from_millis(10),
        Duration::from_millis(500),
    )
    .await
}

/// `OBJECTS` ConfigMaps `cm-<i>` in one file, each with `data.revision: <revision>`.
fn config_maps(revision: &str) -> String {
    (0..OBJECTS)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: {NAMESPACE}\ndata:\n  revision: \"{revision}\"\n"
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

/// The ConfigMaps labelled as applied by Kustomization `owner`: name to `data.revision`.
async fn owned_config_maps(client: &kube::Client, owner: &str) -> BTreeMap<String, String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    api.list(&ListParams::default().labels(&format!("{OWNER_LABEL}={owner}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|cm| {
            let revision = cm
                .data
                .as_ref()
                .and_then(|d| d.get("revision"))
                .cloned()
                .unwrap_or_default();
            (cm.metadata.name.unwrap_or_default(), revision)
        })
        .collect()
}

/// Waits until some, but not all, of the owner's ConfigMaps hold `revision`: an apply of it is
/// in flight. Returns how many do.
async fn wait_apply_in_flight(client: &kube::Client, owner: &str, revision: &str) -> usize {
    let applied = eventually(Duration::from_secs(40), "an apply in flight", || async {
        let applied = owned_config_maps(client, owner)
            .await
            .values()
            .filter(|r| *r == revision)
            .count();
        (applied > 0).then_some(applied)
    })
    .await;
    assert!(
        applied < OBJECTS,
        "the apply ended before the test could catch it in flight; slow the proxy down"
    );
    applied
}

/// Waits until the Kustomization is gone (its finalizer ran).
async fn wait_deleted(env: &Env, name: &str) {
    let api = kustomizations(env);
    eventually(Duration::from_secs(60), "the Kustomization gone", || {
        let api = api.clone();
        async move { api.get_opt(name).await.unwrap().is_none().then_some(()) }
    })
    .await;
}

fn stalled(object: &Kustomization) -> Option<(String, String, String)> {
    condition(object, "Stalled")
}

/// A GitRepository with `interval: 0s` made 43 reconciles and 56 Git requests a second.
/// It is refused with a Stalled condition naming the field, and stays quiet: a reconcile
/// request afterwards is handled once, with no Git request at all.
#[tokio::test]
async fn zero_interval_on_a_git_repository_is_refused_without_a_loop() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let upstream = GitServer::start().await;
    upstream.commit(&[("app/config.yaml", "a: 1\n")], "first");
    let url = upstream.url();
    let address = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let proxy = RecordingProxy::start(address.clone()).await;
    let proxied = url.replace(&format!("http://{address}"), &proxy.url);
    env.create_git_repository(
        NAMESPACE,
        "zero",
        serde_json::json!({"url": proxied, "interval": "0s", "ref": {"branch": "main"}}),
    )
    .await;

    let object = env
        .wait_for(NAMESPACE, "zero", "Stalled=True", |o| {
            support::condition(o, "Stalled").is_some_and(|c| c.0 == "True")
        })
        .await;
    let (_, reason, message) = support::condition(&object, "Stalled").unwrap();
    assert_eq!(reason, "InvalidInterval");
    assert_eq!(message, "spec.interval: 0s is below the minimum of 1s");
    assert_eq!(
        support::condition(&object, "Ready").map(|c| (c.0, c.1)),
        Some(("False".to_owned(), "InvalidInterval".to_owned()))
    );
    assert!(
        object.status.as_ref().unwrap().artifact.is_none(),
        "nothing fetched"
    );

    let api = env.git_repositories(NAMESPACE);
    request_reconcile(&api, "zero", "after-stall").await;
    env.wait_for(
        NAMESPACE,
        "zero",
        "the request handled",
        |o: &GitRepository| {
            o.status
                .as_ref()
                .and_then(|s| s.reconcile_request.last_handled_reconcile_at.as_deref())
                == Some("after-stall")
        },
    )
    .await;
    let reconciles = env_reconcile_count(&env, "GitRepository", "zero").await;
    assert!(
        reconciles <= 4,
        "{reconciles} reconciles of a stalled object"
    );
    let requests = proxy.sent_lowercase().matches(" http/1.1\r\n").count();
    assert_eq!(
        requests, 0,
        "a refused interval never reaches the Git server"
    );

    // Fixing the spec is enough: the object recovers.
    env.patch(
        NAMESPACE,
        "zero",
        serde_json::json!({"spec": {"interval": "10m"}}),
    )
    .await;
    env.wait_for(NAMESPACE, "zero", "Ready=True", |o| {
        support::condition(o, "Ready").is_some_and(|c| c.0 == "True")
            && support::condition(o, "Stalled").is_none()
    })
    .await;
}

/// Whoever may write the object can request reconciles as fast as the API server takes
/// writes; each one used to run at once (a Git fetch each). Reconciles of one object are held
/// to the runtime's rate limit whatever asks for them, and the last request is still handled.
#[tokio::test]
async fn a_storm_of_reconcile_requests_is_rate_limited() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let upstream = GitServer::start().await;
    upstream.commit(&[("app/config.yaml", "a: 1\n")], "first");
    let url = upstream.url();
    let address = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let proxy = RecordingProxy::start(address.clone()).await;
    let proxied = url.replace(&format!("http://{address}"), &proxy.url);
    env.create_git_repository(
        NAMESPACE,
        "storm",
        serde_json::json!({"url": proxied, "interval": "1h", "ref": {"branch": "main"}}),
    )
    .await;
    env.wait_for(NAMESPACE, "storm", "Ready=True", |o| {
        support::condition(o, "Ready").is_some_and(|c| c.0 == "True")
    })
    .await;
    let before = env_reconcile_count(&env, "GitRepository", "storm").await;
    let requests_before = proxy.sent_lowercase().matches(" http/1.1\r\n").count();

    let api = env.git_repositories(NAMESPACE);
    let started = Instant::now();
    let storm = 100;
    for token in 0..storm {
        request_reconcile(&api, "storm", &format!("storm-{token}")).await;
        // Paced so that the storm lasts a few seconds whatever the machine: a reconcile
        // runs faster than this, so without a limit each request would get its own.
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let last = format!("storm-{}", storm - 1);
    env.wait_for(NAMESPACE, "storm", "the last request handled", |o| {
        o.status
            .as_ref()
            .and_then(|s| s.reconcile_request.last_handled_reconcile_at.as_deref())
            == Some(last.as_str())
    })
    .await;
    let elapsed = started.elapsed();
    let reconciles = env_reconcile_count(&env, "GitRepository", "storm").await - before;
    let limit = RateLimit::default();
    let allowed = u64::from(limit.burst)
        + u64::try_from(elapsed.as_millis() / limit.period.as_millis()).unwrap()
        + 2;
    assert!(
        reconciles <= allowed,
        "{reconciles} reconciles for {storm} requests in {elapsed:?} (at most {allowed})"
    );
    let requests = proxy.sent_lowercase().matches(" http/1.1\r\n").count() - requests_before;
    assert!(
        requests <= usize::try_from(allowed).unwrap() * 3,
        "{requests} Git requests for {reconciles} reconciles"
    );
}

/// `interval: 0s` and `retryInterval: 0s` on a Kustomization: refused, naming the field, with a
/// bounded number of reconciles and nothing applied.
#[tokio::test]
async fn zero_intervals_on_a_kustomization_are_refused_without_a_loop() {
    let (env, _upstream, default_controller, _commit) =
        setup(&[("app/config.yaml", &crate::kustomize_support::config_map())]).await;
    // A controller of our own, to read its metrics (the default one is stopped first).
    drop(default_controller);
    let controller = Controller::start(env.client.clone());
    for (name, spec, field) in [
        (
            "zero",
            serde_json::json!({"path": "app", "interval": "0s"}),
            "spec.interval",
        ),
        (
            "zero-retry",
            serde_json::json!({"path": "app", "interval": "10m", "retryInterval": "0s"}),
            "spec.retryInterval",
        ),
        (
            "tiny",
            serde_json::json!({"path": "app", "interval": "10ms"}),
            "spec.interval",
        ),
    ] {
        create_kustomization(&env, name, spec).await;
        let object = eventually(Duration::from_secs(30), "Stalled=True", || {
            let api = kustomizations(&env);
            async move {
                api.get_opt(name)
                    .await
                    .unwrap()
                    .filter(|o| stalled(o).is_some_and(|c| c.0 == "True"))
            }
        })
        .await;
        let (_, reason, message) = stalled(&object).unwrap();
        assert_eq!(reason, "InvalidInterval", "{name}");
        assert!(
            message.starts_with(&format!("{field}: ")) && message.ends_with("minimum of 1s"),
            "{name}: {message}"
        );
        assert_eq!(ready(&object).unwrap().0, "False", "{name}");
        assert!(
            object
                .status
                .as_ref()
                .unwrap()
                .inventory
                .as_ref()
                .is_none_or(|i| i.entries.is_empty()),
            "{name}: nothing applied"
        );

        request_reconcile(&kustomizations(&env), name, "after-stall").await;
        eventually(Duration::from_secs(30), "the request handled", || {
            let api = kustomizations(&env);
            async move {
                api.get_opt(name).await.unwrap().filter(|o| {
                    o.status
                        .as_ref()
                        .and_then(|s| s.reconcile_request.last_handled_reconcile_at.as_deref())
                        == Some("after-stall")
                })
            }
        })
        .await;
        let reconciles = controller.reconciles(name);
        assert!(reconciles <= 4, "{name}: {reconciles} reconciles");
    }
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert!(
        config_maps.get_opt("settings").await.unwrap().is_none(),
        "a refused spec applies nothing"
    );
}

/// Huge durations (Go's maximum, 292 years) are accepted and do not overflow a timer: the
/// object becomes Ready and the controller keeps serving other objects.
#[tokio::test]
async fn huge_durations_are_accepted_without_overflow() {
    let (env, _upstream, _controller, commit) =
        setup(&[("app/config.yaml", &crate::kustomize_support::config_map())]).await;
    let huge = "2562047h47m16.854775807s";
    create_kustomization(
        &env,
        "huge",
        serde_json::json!({"path": "app", "interval": huge, "retryInterval": huge, "timeout": huge}),
    )
    .await;
    let expected = format!("Applied revision: main@sha1:{commit}");
    wait_ready(&env, "huge", "Ready=True", |status, _, message| {
        status == "True" && message == expected
    })
    .await;
    create_kustomization(&env, "after", serde_json::json!({"path": "app"})).await;
    wait_ready(&env, "after", "the next object Ready", |status, _, _| {
        status == "True"
    })
    .await;
}

/// Deleting a Kustomization while it applies hundreds of objects used to orphan them all in
/// about one run out of twenty: the finalizer ran on a cached copy without the new inventory.
/// Here the controller's view of the cluster lags (a slow proxy), which made that certain;
/// every object the apply wrote is deleted with the Kustomization.
#[tokio::test]
async fn deleting_during_an_apply_orphans_nothing() {
    let (env, _upstream, default_controller, _commit) =
        setup(&[("app/config-maps.yaml", &config_maps("1"))]).await;
    drop(default_controller);
    let proxy = slow_proxy(&env).await;
    let _controller = Controller::start(proxy.client().await);
    create_kustomization(
        &env,
        "big",
        serde_json::json!({"path": "app", "prune": true}),
    )
    .await;

    let in_flight = wait_apply_in_flight(&env.client, "big", "1").await;
    kustomizations(&env)
        .delete("big", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&env, "big").await;
    let left = owned_config_maps(&env.client, "big").await;
    assert!(
        left.is_empty(),
        "{} objects orphaned (deleted with {in_flight} applied)",
        left.len()
    );
}

/// A controller killed in the middle of its first apply, then the Kustomization deleted: the
/// next controller deletes everything the interrupted apply wrote, because the apply
/// recorded what it was about to write before writing it.
#[tokio::test]
async fn deleting_after_a_crash_mid_apply_orphans_nothing() {
    let (env, _upstream, default_controller, _commit) =
        setup(&[("app/config-maps.yaml", &config_maps("1"))]).await;
    drop(default_controller);
    let proxy = slow_proxy(&env).await;
    let controller = Controller::start(proxy.client().await);
    create_kustomization(
        &env,
        "big",
        serde_json::json!({"path": "app", "prune": true}),
    )
    .await;

    wait_apply_in_flight(&env.client, "big", "1").await;
    controller.kill().await;
    drop(proxy);
    let written = owned_config_maps(&env.client, "big").await.len();
    let object = kustomizations(&env).get("big").await.unwrap();
    let recorded = object
        .status
        .as_ref()
        .and_then(|s| s.inventory.as_ref())
        .map_or(0, |i| i.entries.len());
    assert!(
        recorded >= written,
        "the inventory names {recorded} objects, the interrupted apply wrote {written}"
    );

    kustomizations(&env)
        .delete("big", &DeleteParams::default())
        .await
        .unwrap();
    let _restarted = Controller::start(env.client.clone());
    wait_deleted(&env, "big").await;
    let left = owned_config_maps(&env.client, "big").await;
    assert!(
        left.is_empty(),
        "{} of {written} objects orphaned after the crash",
        left.len()
    );
}

/// A controller killed while it applies a new revision used to leave `Ready=True` for the old
/// revision over a cluster holding half of the new one. The status says the new revision is
/// being applied (`Reconciling=True`, `Ready=Unknown`) from before the first write, and the next
/// controller converges.
#[tokio::test]
async fn a_crash_mid_apply_leaves_the_status_in_progress() {
    let (env, upstream, default_controller, first) =
        setup(&[("app/config-maps.yaml", &config_maps("1"))]).await;
    drop(default_controller);
    let proxy = slow_proxy(&env).await;
    let controller = Controller::start(proxy.client().await);
    create_kustomization(
        &env,
        "big",
        serde_json::json!({"path": "app", "prune": true}),
    )
    .await;
    let old = format!("Applied revision: main@sha1:{first}");
    wait_ready(&env, "big", "revision 1 applied", |status, _, message| {
        status == "True" && message == old
    })
    .await;
    // An unchanged revision does not flip Ready on a periodic reconcile.
    let before = kustomizations(&env).get("big").await.unwrap();
    let reconciles = controller.reconciles("big");
    request_reconcile(&kustomizations(&env), "big", "again").await;
    let after = eventually(Duration::from_secs(40), "the request handled", || {
        let api = kustomizations(&env);
        async move {
            api.get_opt("big").await.unwrap().filter(|o| {
                o.status
                    .as_ref()
                    .and_then(|s| s.reconcile_request.last_handled_reconcile_at.as_deref())
                    == Some("again")
            })
        }
    })
    .await;
    // The duration metric is recorded when the reconcile returns, just after its status write.
    eventually(Duration::from_secs(10), "the reconcile counted", || {
        let counted = controller.reconciles("big") > reconciles;
        async move { counted.then_some(()) }
    })
    .await;
    let transition = |o: &Kustomization| {
        o.status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.last_transition_time.clone())
    };
    assert_eq!(
        transition(&before),
        transition(&after),
        "Ready did not flip"
    );
    assert_eq!(ready(&after).unwrap().2, old);

    let second = upstream.commit(&[("app/config-maps.yaml", &config_maps("2"))], "second");
    request_reconcile(&env.git_repositories(NAMESPACE), "repo", "second").await;
    wait_source_revision(&env, &format!("main@sha1:{second}")).await;
    let applied = wait_apply_in_flight(&env.client, "big", "2").await;
    controller.kill().await;
    drop(proxy);

    let object = kustomizations(&env).get("big").await.unwrap();
    let new_revision = format!("main@sha1:{second}");
    let (status, reason, _) = ready(&object).unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("Unknown", "Progressing"),
        "Ready after a crash with {applied} of {OBJECTS} objects of the new revision applied"
    );
    let (status, reason, message) = condition(&object, "Reconciling").unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Progressing"));
    assert!(message.contains(&new_revision), "{message}");
    let status = object.status.as_ref().unwrap();
    assert_eq!(
        status.last_applied_revision.as_deref(),
        Some(format!("main@sha1:{first}").as_str()),
        "the new revision is not recorded as applied"
    );
    assert_eq!(
        status.last_attempted_revision.as_deref(),
        Some(new_revision.as_str())
    );

    let _restarted = Controller::start(env.client.clone());
    let expected = format!("Applied revision: {new_revision}");
    let object = wait_ready(
        &env,
        "big",
        "the new revision applied",
        |status, _, message| status == "True" && message == expected,
    )
    .await;
    assert!(condition(&object, "Reconciling").is_none());
    let live = owned_config_maps(&env.client, "big").await;
    assert_eq!(live.len(), OBJECTS);
    assert!(
        live.values().all(|r| r == "2"),
        "every object at the new revision"
    );
}

/// `timeout: 0s` on a GitRepository: every Git operation times out at once. That is a
/// failure retried with backoff (Ready=False naming the timeout, not Stalled), not a loop: the
/// reconciles stay within the rate limit while a reconcile request waits its turn.
#[tokio::test]
async fn zero_timeout_fails_with_backoff_not_a_loop() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let upstream = GitServer::start().await;
    upstream.commit(&[("app/config.yaml", "a: 1\n")], "first");
    let started = Instant::now();
    env.create_git_repository(
        NAMESPACE,
        "no-time",
        serde_json::json!({"url": upstream.url(), "interval": "1m", "timeout": "0s",
                           "ref": {"branch": "main"}}),
    )
    .await;
    let object = env
        .wait_for(NAMESPACE, "no-time", "Ready=False", |o| {
            support::condition(o, "Ready").is_some_and(|c| c.0 == "False")
        })
        .await;
    let (_, _, message) = support::condition(&object, "Ready").unwrap();
    assert!(message.contains("timed out after 0ns"), "{message}");
    assert!(support::condition(&object, "Stalled").is_none());
    assert!(object.status.as_ref().unwrap().artifact.is_none());

    request_reconcile(&env.git_repositories(NAMESPACE), "no-time", "retry").await;
    env.wait_for(
        NAMESPACE,
        "no-time",
        "the request handled",
        |o: &GitRepository| {
            o.status
                .as_ref()
                .and_then(|s| s.reconcile_request.last_handled_reconcile_at.as_deref())
                == Some("retry")
        },
    )
    .await;
    let elapsed = started.elapsed();
    let reconciles = env_reconcile_count(&env, "GitRepository", "no-time").await;
    let limit = RateLimit::default();
    let allowed = u64::from(limit.burst)
        + u64::try_from(elapsed.as_millis() / limit.period.as_millis()).unwrap()
        + 2;
    assert!(
        reconciles <= allowed,
        "{reconciles} reconciles in {elapsed:?} (at most {allowed})"
    );
}
