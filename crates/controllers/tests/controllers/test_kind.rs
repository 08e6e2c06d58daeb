//! A kind of the test suite's own, `Probe`, proving that a new kind is a few dozen lines on the
//! runtime: an API type with its facts ([`FluxKind`]), what it refers to ([`References`]) and a
//! [`Reconciler`] of one step. It consumes a GitRepository (triggered by its new artifacts), has
//! `dependsOn` ([`depends::check`]), no interval, its own Ready reason, and its Events reach a
//! capturing sink.

use std::sync::Arc;
use std::time::Duration;

use capstan_api::meta::{Condition, ReconcileRequestStatus};
use capstan_api::{FluxKind, GitRepository};
use capstan_controllers::ReconcileError;
use capstan_controllers::leader::LeaderElectionConfig;
use capstan_controllers::runtime::controllers::Led;
use capstan_controllers::runtime::depends::{self, ObjectKey, References};
use capstan_controllers::runtime::triggers::{self, WatchedKind};
use capstan_controllers::runtime::{
    Controllers, Kind, Reconciler, RuntimeConfig, Step, StepContext, StepFuture, StepOutcome,
    events::REVISION_KEY,
};
use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::events::CapturingSink;
use crate::support::{Env, GitServer, eventually, http_client, wait_for};

// ---- The kind: a few dozen lines. ----

/// Observes the revision of a GitRepository once its dependencies are Ready.
#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[kube(group = "test.capstan.dev", version = "v1", kind = "Probe", namespaced)]
#[kube(status = "ProbeStatus")]
#[serde(rename_all = "camelCase")]
pub struct ProbeSpec {
    source: String,
    #[serde(default)]
    depends_on: Vec<String>,
    suspend: Option<bool>,
    /// For the cancellation test: the step never ends.
    #[serde(default)]
    hang: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeStatus {
    #[serde(default)]
    conditions: Vec<Condition>,
    observed_generation: Option<i64>,
    #[serde(flatten)]
    reconcile_request: ReconcileRequestStatus,
    revision: Option<String>,
}

capstan_api::flux_kind! {
    Probe: ProbeStatus,
    group = "test.capstan.dev",
    version = "v1",
    singular = "probe",
    plural = "probes",
    short_names = [],
    display = "Probe",
    role = Applier,
}
capstan_api::flux_status!(ProbeStatus, revision = revision);

/// No interval: reconciled when something changes only.
impl Kind for Probe {}

impl References for Probe {
    fn source(&self) -> Option<ObjectKey> {
        Some(ObjectKey::new(
            "GitRepository",
            &self.namespace()?,
            &self.spec.source,
        ))
    }
    fn depends_on(&self) -> Vec<ObjectKey> {
        let namespace = self.namespace().unwrap_or_default();
        let key = |name: &String| ObjectKey::new("Probe", &namespace, name);
        self.spec.depends_on.iter().map(key).collect()
    }
}

struct ProbeReconciler;

const STEPS: &[Step<ProbeReconciler>] = &[Step {
    name: "observe",
    run: observe,
}];

/// Retries come from triggers only (a source's new artifact, a dependency becoming Ready).
const RETRY: Duration = Duration::from_secs(3600);

fn observe(cx: &mut StepContext<ProbeReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        if cx.object.spec.hang {
            std::future::pending::<()>().await;
        }
        let source: Option<GitRepository> = (cx.api().get_opt(&cx.object.spec.source).await)
            .map_err(|e| ReconcileError::transient("SourceUnavailable", e.to_string()))?;
        let Some(revision) = source
            .as_ref()
            .and_then(|s| s.revision())
            .map(str::to_owned)
        else {
            return Err(ReconcileError::waiting(
                RETRY,
                "ArtifactNotReady",
                "no artifact",
            ));
        };
        depends::check::<Probe, _>(&cx.client, cx.object.as_ref(), Some(&revision), RETRY).await?;
        cx.set_ready_message(format!("Observed revision: {revision}"));
        cx.set_ready_reason("Observed");
        cx.status.revision = Some(revision);
        Ok(StepOutcome::next())
    })
}

impl Reconciler for ProbeReconciler {
    type Object = Probe;
    type State = ();
    const CONTROLLER_NAME: &'static str = "probe-controller";

    fn steps(&self) -> &[Step<Self>] {
        STEPS
    }
    fn triggers(
        &self,
        client: &Client,
        store: Store<Probe>,
    ) -> Vec<BoxStream<'static, ObjectRef<Probe>>> {
        let git = WatchedKind::of(&GitRepository::INFO);
        let mut triggers = triggers::sources(client, &store, &[git]);
        triggers.push(triggers::dependencies::<Probe, Probe>(client, &store));
        triggers
    }
}

// ---- The test. ----

const NAMESPACE: &str = "probes";

#[tokio::test]
async fn a_test_kind_is_triggered_by_its_source_held_by_its_dependencies_and_publishes_events() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let probes = install(&env).await;
    let upstream = GitServer::start().await;
    let first = upstream.commit(&[("a.txt", "one")], "first");
    env.create_git_repository(
        NAMESPACE,
        "repo",
        serde_json::json!({"url": upstream.url(), "interval": "1h", "ref": {"branch": "main"}}),
    )
    .await;
    let sink = Arc::new(CapturingSink::default());
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let config = RuntimeConfig {
        event_sink: Some(sink.clone()),
        ..RuntimeConfig::default()
    };
    let controllers = Controllers::new(env.client.clone(), config).register(ProbeReconciler);
    assert_eq!(controllers.kinds(), ["Probe"]);
    let readyz = serve(controllers.router()).await + "/readyz";
    tokio::spawn(controllers.run(shutdown));
    eventually(Duration::from_secs(10), "/readyz 200", || async {
        let response = http_client().get(&readyz).send().await.ok()?;
        response.status().is_success().then_some(())
    })
    .await;

    // A dependency that is not there holds the probe back, for an hour unless triggered.
    create(&probes, "app", &["base"]).await;
    let held = wait_ready(&probes, "app", "held by its dependency", |ready| {
        ready.status == "False" && ready.reason == "DependencyNotReady"
    })
    .await;
    assert!(
        held.message.contains("'probes/base' is not ready"),
        "{}",
        held.message
    );

    // The dependency becoming Ready reconciles it at once.
    create(&probes, "base", &[]).await;
    let observed = |commit: &str| {
        let message = format!("Observed revision: main@sha1:{commit}");
        move |ready: &Condition| ready.status == "True" && ready.message == message
    };
    let ready = wait_ready(
        &probes,
        "app",
        "Ready at the first commit",
        observed(&first),
    )
    .await;
    assert_eq!(ready.reason, "Observed", "the reason the step set");

    // The source's new commit reconciles both at once (they have no interval), the dependent
    // after its dependency.
    let second = upstream.commit(&[("a.txt", "two")], "second");
    env.patch(NAMESPACE, "repo", request("second")).await;
    wait_ready(
        &probes,
        "app",
        "Ready at the second commit",
        observed(&second),
    )
    .await;

    let revision = format!("main@sha1:{second}");
    let events = sink.events();
    let published = events.iter().find(|e| {
        e.object.name.as_deref() == Some("app")
            && e.reason == "Observed"
            && e.metadata.get(REVISION_KEY) == Some(&revision)
    });
    assert!(
        published.is_some(),
        "no Observed event at {revision} in {events:#?}"
    );
    assert_eq!(published.unwrap().controller, "probe-controller");
    assert!(
        events.iter().any(|e| e.reason == "DependencyNotReady"),
        "{events:#?}"
    );
}

#[tokio::test]
async fn shutdown_cancels_a_step_in_flight() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let probes = install(&env).await;
    let shutdown = CancellationToken::new();
    let controllers = Controllers::new(env.client.clone(), RuntimeConfig::default());
    let running = tokio::spawn(controllers.register(ProbeReconciler).run(shutdown.clone()));
    create_hanging(&probes).await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the controllers stop without waiting for the step")
        .unwrap();
}

#[tokio::test]
async fn a_lost_lease_cancels_a_step_in_flight_and_stops_the_controllers() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    env.namespace("flux-system").await;
    let probes = install(&env).await;
    let election = LeaderElectionConfig {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        ..LeaderElectionConfig::new("flux-system", "probes")
    };
    let controllers = Controllers::new(env.client.clone(), RuntimeConfig::default());
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let leading = controllers
        .register(ProbeReconciler)
        .lead(Some(election), shutdown);
    let leading = tokio::spawn(leading);
    create_hanging(&probes).await;
    // Another replica takes the Lease over (as after a network partition).
    let lease = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 30},
    });
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), "flux-system");
    let intruder = PatchParams::apply("intruder").force();
    leases
        .patch("probes", &intruder, &Patch::Apply(lease))
        .await
        .unwrap();
    let led = tokio::time::timeout(Duration::from_secs(10), leading)
        .await
        .expect("the controllers stop without waiting for the step")
        .unwrap();
    assert_eq!(led, Led::LeaseLost);
}

/// Creates the Probe `stuck`, whose step never ends, and waits until that step runs.
async fn create_hanging(probes: &Api<Probe>) {
    let mut probe = Probe::new(
        "stuck",
        ProbeSpec {
            source: "repo".into(),
            hang: true,
            ..ProbeSpec::default()
        },
    );
    probe.metadata.namespace = Some(NAMESPACE.into());
    probes.create(&PostParams::default(), &probe).await.unwrap();
    // `Reconciling=True` is written just before the steps run.
    wait_for(probes, "stuck", "the step running", |p: &Probe| {
        p.conditions()
            .iter()
            .any(|c| c.type_ == "Reconciling" && c.status == "True")
    })
    .await;
}

/// Serves `router` on a free port; returns its base URL.
async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(axum::serve(listener, router).into_future());
    format!("http://{address}")
}

/// Installs the Probe CRD and returns its API in [`NAMESPACE`].
async fn install(env: &Env) -> Api<Probe> {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let apply = PatchParams::apply("test").force();
    crds.patch(
        "probes.test.capstan.dev",
        &apply,
        &Patch::Apply(Probe::crd()),
    )
    .await
    .unwrap();
    let probes: Api<Probe> = Api::namespaced(env.client.clone(), NAMESPACE);
    eventually(Duration::from_secs(10), "the Probe API", || {
        let probes = probes.clone();
        async move { probes.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
    probes
}

async fn create(probes: &Api<Probe>, name: &str, depends_on: &[&str]) {
    let spec = ProbeSpec {
        source: "repo".into(),
        depends_on: depends_on.iter().map(ToString::to_string).collect(),
        ..ProbeSpec::default()
    };
    let mut probe = Probe::new(name, spec);
    probe.metadata.namespace = Some(NAMESPACE.into());
    probes.create(&PostParams::default(), &probe).await.unwrap();
}

async fn wait_ready(
    probes: &Api<Probe>,
    name: &str,
    what: &str,
    check: impl Fn(&Condition) -> bool,
) -> Condition {
    let probe = wait_for(probes, name, what, |p: &Probe| {
        p.ready_condition().is_some_and(&check)
    })
    .await;
    probe.ready_condition().cloned().unwrap()
}

/// A reconcile request (`reconcile.fluxcd.io/requestedAt`).
fn request(token: &str) -> serde_json::Value {
    serde_json::json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}})
}
