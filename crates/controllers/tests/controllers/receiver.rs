//! Receivers end to end: the Receiver reconciler and its webhook server wired as `capstan
//! controller` wires them, on the embedded control plane, reached with real HTTP requests. The
//! expected webhook paths and signatures are computed here independently (SHA-256 and HMAC
//! built from `sha2` by hand, not with the `hmac` crate the server uses).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use capstan_api::{GitRepository, Receiver};
use capstan_controllers::receiver::ReceiverReconciler;
use capstan_controllers::receiver::server::{ClientRateLimit, ReceiverOptions, ReceiverServer};
use capstan_controllers::runtime::{Controllers, RuntimeConfig};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use reqwest::StatusCode;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::support::{Env, GitServer, condition, eventually, http_client, wait_failed, wait_ready};

const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

/// The Receiver reconciler and one webhook server, stopped on drop.
struct Receivers {
    url: String,
    stop: CancellationToken,
}

impl Drop for Receivers {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Receivers {
    /// The reconciler (once per environment) and a server with `options`.
    async fn start(env: &Env, options: ReceiverOptions, reconciler: bool) -> Self {
        let stop = CancellationToken::new();
        if reconciler {
            let config = RuntimeConfig {
                backoff_base: Duration::from_millis(200),
                backoff_max: Duration::from_secs(1),
                ..RuntimeConfig::default()
            };
            let controllers =
                Controllers::new(env.client.clone(), config).register(ReceiverReconciler::new());
            tokio::spawn(controllers.run(stop.clone()));
        }
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = ReceiverServer::new(env.client.clone(), options);
        tokio::spawn(server.serve(listener, stop.clone()));
        Self { url, stop }
    }

    async fn post(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> StatusCode {
        let mut request = http_client()
            .post(format!("{}{path}", self.url))
            .header("Content-Type", "application/json")
            .body(body.to_vec());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.unwrap().status()
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// HMAC-SHA256 (RFC 2104) from SHA-256 alone.
fn hmac_sha256(key: &[u8], message: &[u8]) -> String {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|k| k ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    hex(&Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize())
}

/// Flux's webhook path for a token, name and namespace.
fn flux_path(token: &str, name: &str, namespace: &str) -> String {
    format!(
        "/hook/{}",
        hex(&Sha256::digest(
            format!("{token}{name}{namespace}").as_bytes()
        ))
    )
}

fn webhook_path(receiver: &Receiver) -> String {
    receiver
        .status
        .as_ref()
        .and_then(|s| s.webhook_path.clone())
        .unwrap_or_default()
}

fn requested_at(object: &GitRepository) -> Option<String> {
    object.annotations().get(REQUESTED_AT).cloned()
}

fn revision(object: &GitRepository) -> Option<&str> {
    Some(object.status.as_ref()?.artifact.as_ref()?.revision.as_str())
}

async fn receiver_event(env: &Env, namespace: &str, name: &str, reason: &str) -> String {
    let api: Api<Event> = Api::namespaced(env.client.clone(), namespace);
    eventually(Duration::from_secs(10), "the Receiver's Event", || {
        let api = api.clone();
        async move {
            api.list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
                .find(|e| e.reason.as_deref() == Some(reason))
                .and_then(|e| e.note)
        }
    })
    .await
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn a_signed_github_push_reconciles_the_git_repository_at_once() {
    let env = Env::start().await;
    let ns = env.namespace("receiver-github").await;
    let receivers = Receivers::start(&env, ReceiverOptions::default(), true).await;
    let upstream = GitServer::start().await;
    let first = upstream.commit(&[("a.yaml", "a: 1\n")], "first");
    env.create_git_repository(
        &ns,
        "app",
        serde_json::json!({"url": upstream.url(), "interval": "1h", "ref": {"branch": "main"}}),
    )
    .await;
    let first_revision = format!("main@sha1:{first}");
    env.wait_for(&ns, "app", "the first revision", |o| {
        revision(o) == Some(first_revision.as_str())
    })
    .await;

    let token = "a-webhook-token-of-ours";
    env.create_secret(&ns, "webhook-token", &BTreeMap::from([("token", token)]))
        .await;
    env.create::<Receiver>(
        &ns,
        "github",
        serde_json::json!({
            "type": "github",
            "events": ["push"],
            "secretRef": {"name": "webhook-token"},
            "resources": [{"kind": "GitRepository", "name": "app"}],
        }),
    )
    .await;
    let receivers_api: Api<Receiver> = Api::namespaced(env.client.clone(), &ns);
    let receiver = wait_ready(&receivers_api, "github").await;
    let path = flux_path(token, "github", &ns);
    assert_eq!(webhook_path(&receiver), path);
    let (_, reason, message) = condition(&receiver, "Ready").unwrap();
    assert_eq!(reason, "Succeeded");
    assert_eq!(message, format!("Receiver initialized for path: {path}"));
    let status = receiver.status.as_ref().unwrap();
    assert_eq!(status.observed_generation, receiver.metadata.generation);

    let second = upstream.commit(&[("a.yaml", "a: 2\n")], "second");
    let body = br#"{"ref":"refs/heads/main","after":"x"}"#;
    let signature = format!("sha256={}", hmac_sha256(token.as_bytes(), body));
    let push = [
        ("X-GitHub-Event", "push"),
        ("X-Hub-Signature-256", signature.as_str()),
    ];

    // Refused requests change nothing.
    let forged = format!("sha256={}", hmac_sha256(b"not-the-token", body));
    let bad = [
        ("X-GitHub-Event", "push"),
        ("X-Hub-Signature-256", forged.as_str()),
    ];
    assert_eq!(
        receivers.post(&path, &bad, body).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        receivers
            .post(&path, &[("X-GitHub-Event", "push")], body)
            .await,
        StatusCode::UNAUTHORIZED,
        "unsigned"
    );
    let issues = [
        ("X-GitHub-Event", "issues"),
        ("X-Hub-Signature-256", signature.as_str()),
    ];
    assert_eq!(
        receivers.post(&path, &issues, body).await,
        StatusCode::BAD_REQUEST,
        "an event outside spec.events"
    );
    let ping = [
        ("X-GitHub-Event", "ping"),
        ("X-Hub-Signature-256", signature.as_str()),
    ];
    assert_eq!(receivers.post(&path, &ping, body).await, StatusCode::OK);
    let unknown = flux_path("another-token", "github", &ns);
    assert_eq!(
        receivers.post(&unknown, &push, body).await,
        StatusCode::NOT_FOUND
    );
    let repository = env.git_repositories(&ns).get("app").await.unwrap();
    assert_eq!(requested_at(&repository), None, "nothing annotated");
    assert_eq!(revision(&repository), Some(first_revision.as_str()));

    // The signed push reconciles the GitRepository at once (its interval is an hour).
    let sent = std::time::Instant::now();
    assert_eq!(receivers.post(&path, &push, body).await, StatusCode::OK);
    let second_revision = format!("main@sha1:{second}");
    let repository = env
        .wait_for(&ns, "app", "the pushed revision", |o| {
            revision(o) == Some(second_revision.as_str())
        })
        .await;
    assert!(
        sent.elapsed() < Duration::from_secs(10),
        "{:?}",
        sent.elapsed()
    );
    let requested = requested_at(&repository).expect("annotated");
    let handled = repository
        .status
        .as_ref()
        .and_then(|s| s.reconcile_request.last_handled_reconcile_at.clone());
    assert_eq!(handled.as_deref(), Some(requested.as_str()));
    let note = receiver_event(&env, &ns, "github", "ReconcileRequested").await;
    assert!(note.contains(&format!("GitRepository/{ns}/app")), "{note}");
    assert!(!note.contains(token), "{note}");

    // Suspended: refused with 503, as Flux.
    receivers_api
        .patch(
            "github",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"suspend": true}})),
        )
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "503 once suspended", || async {
        (receivers.post(&path, &push, body).await == StatusCode::SERVICE_UNAVAILABLE).then_some(())
    })
    .await;
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn generic_hmac_gitlab_labels_namespaces_and_limits() {
    let env = Env::start().await;
    let ns = env.namespace("receiver-types").await;
    let other = env.namespace("receiver-other").await;
    let options = ReceiverOptions {
        no_cross_namespace_refs: true,
        ..ReceiverOptions::default()
    };
    let receivers = Receivers::start(&env, options, true).await;
    for (namespace, name, labels) in [
        (&ns, "team-a", serde_json::json!({"team": "x"})),
        (&ns, "team-b", serde_json::json!({"team": "x"})),
        (&ns, "loner", serde_json::json!({})),
        (&other, "elsewhere", serde_json::json!({})),
    ] {
        // Suspended sources that never fetch: only their annotations are looked at.
        let spec = serde_json::json!({"url": "http://127.0.0.1:1/none.git", "interval": "1h", "suspend": true});
        env.create_git_repository(namespace, name, spec).await;
        env.git_repositories(namespace)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"metadata": {"labels": labels}})),
            )
            .await
            .unwrap();
    }
    let token = "hmac-and-gitlab-token";
    env.create_secret(&ns, "token", &BTreeMap::from([("token", token)]))
        .await;
    let receivers_api: Api<Receiver> = Api::namespaced(env.client.clone(), &ns);
    let create = |name: &'static str, spec: serde_json::Value| {
        let env = &env;
        let ns = &ns;
        async move { env.create::<Receiver>(ns, name, spec).await }
    };
    create(
        "hmac",
        serde_json::json!({
            "type": "generic-hmac",
            "secretRef": {"name": "token"},
            "resources": [{"kind": "GitRepository", "name": "*", "matchLabels": {"team": "x"}}],
        }),
    )
    .await;
    create(
        "gitlab",
        serde_json::json!({
            "type": "gitlab",
            "events": ["Push Hook"],
            "secretRef": {"name": "token"},
            "resources": [{"kind": "GitRepository", "name": "loner"}],
        }),
    )
    .await;
    create(
        "across",
        serde_json::json!({
            "type": "generic",
            "secretRef": {"name": "token"},
            "resources": [{"kind": "GitRepository", "name": "elsewhere", "namespace": other}],
        }),
    )
    .await;
    create(
        "tokenless",
        serde_json::json!({
            "type": "generic",
            "secretRef": {"name": "missing"},
            "resources": [{"kind": "GitRepository", "name": "loner"}],
        }),
    )
    .await;

    // A missing Secret: Ready=False naming it, no path.
    let tokenless = wait_failed(&receivers_api, "tokenless").await;
    let (_, reason, message) = condition(&tokenless, "Ready").unwrap();
    assert_eq!(reason, "TokenNotFound");
    assert!(message.contains(&format!("{ns}/missing")), "{message}");
    assert_eq!(webhook_path(&tokenless), "");

    let repositories = env.git_repositories(&ns);
    let annotated = |names: &'static [&'static str]| {
        let repositories = repositories.clone();
        async move {
            let mut found = Vec::new();
            for name in names {
                let object = repositories.get(name).await.unwrap();
                if requested_at(&object).is_some() {
                    found.push(*name);
                }
            }
            found
        }
    };

    // generic-hmac over `*` + matchLabels.
    let hmac = wait_ready(&receivers_api, "hmac").await;
    let hmac_path = webhook_path(&hmac);
    assert_eq!(hmac_path, flux_path(token, "hmac", &ns));
    let body = br#"{"image":"registry.example/app:1.2.3"}"#;
    let wrong = format!("sha256={}", hmac_sha256(b"wrong", body));
    assert_eq!(
        receivers
            .post(&hmac_path, &[("X-Signature", &wrong)], body)
            .await,
        StatusCode::UNAUTHORIZED
    );
    assert!(annotated(&["team-a", "team-b", "loner"]).await.is_empty());
    let right = format!("sha256={}", hmac_sha256(token.as_bytes(), body));
    assert_eq!(
        receivers
            .post(&hmac_path, &[("X-Signature", &right)], body)
            .await,
        StatusCode::OK
    );
    assert_eq!(
        annotated(&["team-a", "team-b", "loner"]).await,
        ["team-a", "team-b"]
    );

    // gitlab: the token header and the event.
    let gitlab = wait_ready(&receivers_api, "gitlab").await;
    let gitlab_path = webhook_path(&gitlab);
    let wrong_token = [("X-Gitlab-Token", "nope"), ("X-Gitlab-Event", "Push Hook")];
    assert_eq!(
        receivers.post(&gitlab_path, &wrong_token, b"{}").await,
        StatusCode::UNAUTHORIZED
    );
    let tag = [
        ("X-Gitlab-Token", token),
        ("X-Gitlab-Event", "Tag Push Hook"),
    ];
    assert_eq!(
        receivers.post(&gitlab_path, &tag, b"{}").await,
        StatusCode::BAD_REQUEST
    );
    assert!(!annotated(&["loner"]).await.contains(&"loner"));
    let push = [("X-Gitlab-Token", token), ("X-Gitlab-Event", "Push Hook")];
    assert_eq!(
        receivers.post(&gitlab_path, &push, b"{}").await,
        StatusCode::OK
    );
    assert_eq!(annotated(&["loner"]).await, ["loner"]);

    // --no-cross-namespace-refs: refused, nothing annotated there.
    let across = wait_ready(&receivers_api, "across").await;
    assert_eq!(
        receivers.post(&webhook_path(&across), &[], b"{}").await,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    let elsewhere = env.git_repositories(&other).get("elsewhere").await.unwrap();
    assert_eq!(requested_at(&elsewhere), None);
    let note = receiver_event(&env, &ns, "across", "ReconcileRequestFailed").await;
    assert!(note.contains("cross-namespace"), "{note}");

    // resourceFilter (CEL over `res` and `req`): only the object the JSON body names.
    create(
        "filtered",
        serde_json::json!({
            "type": "generic",
            "secretRef": {"name": "token"},
            "resourceFilter": "res.metadata.name == req.name",
            "resources": [{"kind": "GitRepository", "name": "*", "matchLabels": {"team": "x"}}],
        }),
    )
    .await;
    create(
        "bad-filter",
        serde_json::json!({
            "type": "generic",
            "secretRef": {"name": "token"},
            "resources": [{"kind": "GitRepository", "name": "loner", "filter": "res.metadata.name =="}],
        }),
    )
    .await;
    let stamps = || async {
        let mut stamps = Vec::new();
        for name in ["team-a", "team-b"] {
            stamps.push(requested_at(&repositories.get(name).await.unwrap()));
        }
        stamps
    };
    let filtered = wait_ready(&receivers_api, "filtered").await;
    let before = stamps().await;
    assert_eq!(
        receivers
            .post(&webhook_path(&filtered), &[], br#"{"name":"team-b"}"#)
            .await,
        StatusCode::OK
    );
    let after = stamps().await;
    assert_eq!(after[0], before[0], "team-a filtered out");
    assert_ne!(after[1], before[1], "team-b annotated again");
    let bad_filter = wait_failed(&receivers_api, "bad-filter").await;
    let (status, reason, message) = condition(&bad_filter, "Stalled").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "InvalidCELExpression")
    );
    assert!(message.contains("resources[0]"), "{message}");

    // Limits, checked before the path is looked up: a body over the limit is 413; a client
    // past its burst gets 429.
    let small_bodies = Receivers::start(
        &env,
        ReceiverOptions {
            max_body_bytes: 1024,
            ..ReceiverOptions::default()
        },
        false,
    )
    .await;
    assert_eq!(
        small_bodies.post(&hmac_path, &[], &[b'x'; 1025]).await,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    let few_requests = Receivers::start(
        &env,
        ReceiverOptions {
            rate_limit: ClientRateLimit {
                burst: 3,
                per_second: 0.01,
            },
            ..ReceiverOptions::default()
        },
        false,
    )
    .await;
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(few_requests.post(&unknown_path(), &[], b"{}").await);
    }
    assert_eq!(
        statuses,
        [
            StatusCode::NOT_FOUND,
            StatusCode::NOT_FOUND,
            StatusCode::NOT_FOUND,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
}

fn unknown_path() -> String {
    flux_path("no-such-token", "none", "none")
}
