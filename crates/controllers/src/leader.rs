//! Leader election with a `coordination.k8s.io/v1` Lease, so that of several replicas of
//! `capstan controller` exactly one reconciles.
//!
//! # Expected flow
//! [`LeaderElector::acquire`] waits until this process holds the Lease (or shutdown is asked);
//! the returned [`Leadership`] renews it every `retry_period` in the background. When renewing
//! has failed for `renew_deadline`, leadership is lost: [`Leadership::lost`] is cancelled and the
//! caller must stop reconciling at once (the operator exits, as Kubernetes controllers do, and
//! its replacement competes again). [`Leadership::release`] hands the Lease over on a clean
//! shutdown, so the next replica takes over without waiting for the lease to expire.
//!
//! # Guarantees
//! - Every write carries the Lease's `resourceVersion`: two candidates never both win a round.
//! - Expiry is judged by this process's clock from when it last saw the Lease change (as
//!   client-go does), never by comparing clocks across machines.
//! - `leaseTransitions` counts changes of holder; `acquireTime` is set when the holder changes.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Settings of the election, with Flux's defaults.
#[derive(Clone, Debug)]
pub struct LeaderElectionConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This candidate (unique per process: host name and a random suffix).
    pub identity: String,
    /// How long a Lease is valid after its last renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up.
    pub renew_deadline: Duration,
    /// Time between attempts to acquire or renew.
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// Flux's timings (35 s lease, 30 s renew deadline, 5 s retry) for a Lease `name` in
    /// `namespace`, with an identity made of the host name and a random suffix.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        let host = std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "capstan".to_owned());
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        Self {
            namespace: namespace.into(),
            name: name.into(),
            identity: format!("{host}_{}", &suffix[..8]),
            lease_duration: Duration::from_secs(35),
            renew_deadline: Duration::from_secs(30),
            retry_period: Duration::from_secs(5),
        }
    }
}

/// A candidate for leadership.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
}

/// Held leadership, renewed in the background.
pub struct Leadership {
    lost: CancellationToken,
    stop: CancellationToken,
    renewer: JoinHandle<()>,
    api: Api<Lease>,
    config: LeaderElectionConfig,
}

/// The last version of the Lease this candidate saw, and when it saw it change.
struct Observed {
    lease: Option<Lease>,
    record: Option<(Option<String>, Option<MicroTime>)>,
    at: Instant,
}

impl LeaderElector {
    /// A candidate using `client`.
    pub fn new(client: Client, config: LeaderElectionConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
        }
    }

    /// Waits until this candidate holds the Lease; `None` when `shutdown` is cancelled first.
    pub async fn acquire(self, shutdown: &CancellationToken) -> Option<Leadership> {
        let mut observed = Observed {
            lease: None,
            record: None,
            at: Instant::now(),
        };
        let mut announced = false;
        loop {
            let round = bounded(
                self.config.retry_period.max(Duration::from_secs(1)),
                try_acquire_or_renew(&self.api, &self.config, &mut observed),
            );
            match round.await {
                Ok(Round::Held) => {
                    tracing::info!(
                        lease = %format!("{}/{}", self.config.namespace, self.config.name),
                        identity = %self.config.identity,
                        "acquired leadership"
                    );
                    return Some(self.lead(observed));
                }
                Ok(Round::Lost) => {}
                Ok(Round::Other) => {
                    if !announced {
                        tracing::info!(
                            holder = %holder(observed.lease.as_ref()).unwrap_or_default(),
                            "another replica leads; waiting for the lease"
                        );
                        announced = true;
                    }
                }
                Err(error) => tracing::warn!(%error, "cannot acquire the leader lease"),
            }
            tokio::select! {
                () = shutdown.cancelled() => return None,
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
    }

    fn lead(self, mut observed: Observed) -> Leadership {
        let lost = CancellationToken::new();
        let stop = CancellationToken::new();
        let (api, config) = (self.api.clone(), self.config.clone());
        let (lost_tx, stop_rx) = (lost.clone(), stop.clone());
        let renewer = tokio::spawn(async move {
            let mut last_renew = Instant::now();
            loop {
                tokio::select! {
                    () = stop_rx.cancelled() => return,
                    () = tokio::time::sleep(config.retry_period) => {}
                }
                // A request that hangs must not outlive the renew deadline: the standby takes
                // the Lease once it expires, and this replica has to know by then.
                let left = config.renew_deadline.saturating_sub(last_renew.elapsed());
                match bounded(left, try_acquire_or_renew(&api, &config, &mut observed)).await {
                    Ok(Round::Held) => last_renew = Instant::now(),
                    Ok(Round::Lost) if last_renew.elapsed() < config.renew_deadline => {}
                    Ok(Round::Other | Round::Lost) => {
                        tracing::error!(
                            holder = %holder(observed.lease.as_ref()).unwrap_or_default(),
                            "leadership lost: another replica holds the lease"
                        );
                        lost_tx.cancel();
                        return;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "cannot renew the leader lease");
                        if last_renew.elapsed() >= config.renew_deadline {
                            tracing::error!("leadership lost: the renew deadline passed");
                            lost_tx.cancel();
                            return;
                        }
                    }
                }
            }
        });
        Leadership {
            lost,
            stop,
            renewer,
            api: self.api,
            config: self.config,
        }
    }
}

impl Leadership {
    /// Cancelled when leadership is lost.
    pub fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Stops renewing and gives the Lease up (empty holder, 1 s duration), unless it was lost.
    pub async fn release(self) {
        self.stop.cancel();
        let _ = self.renewer.await;
        if self.lost.is_cancelled() {
            return;
        }
        let Ok(mut lease) = self.api.get(&self.config.name).await else {
            return;
        };
        if holder(Some(&lease)).as_deref() != Some(self.config.identity.as_str()) {
            return;
        }
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!("released leadership"),
            Err(error) => tracing::warn!(%error, "cannot release the leader lease"),
        }
    }
}

/// `round` bounded by `limit`; running out of time is an error like any failed request.
async fn bounded(
    limit: Duration,
    round: impl std::future::Future<Output = kube::Result<Round>>,
) -> Result<Round, String> {
    match tokio::time::timeout(limit, round).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer from the API server within {limit:?}")),
    }
}

fn holder(lease: Option<&Lease>) -> Option<String> {
    lease?.spec.as_ref()?.holder_identity.clone()
}

/// The outcome of one round of [`try_acquire_or_renew`].
enum Round {
    /// This candidate holds the Lease.
    Held,
    /// Another candidate holds a valid Lease.
    Other,
    /// Another write won the race (a conflict); try again.
    Lost,
}

/// One round of acquiring (or renewing) the Lease.
async fn try_acquire_or_renew(
    api: &Api<Lease>,
    config: &LeaderElectionConfig,
    observed: &mut Observed,
) -> kube::Result<Round> {
    let now = MicroTime(Timestamp::now());
    let duration = i32::try_from(config.lease_duration.as_secs()).unwrap_or(i32::MAX);
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                namespace: Some(config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(duration),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                observe(observed, created);
                Ok(Round::Held)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Round::Lost),
            Err(e) => Err(e),
        };
    };
    observe(observed, lease.clone());
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    let current = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let ours = current.as_deref() == Some(config.identity.as_str());
    let held_for = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(config.lease_duration, Duration::from_secs);
    if current.is_some() && !ours && observed.at.elapsed() < held_for {
        return Ok(Round::Other);
    }
    if !ours {
        spec.acquire_time = Some(now.clone());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.holder_identity = Some(config.identity.clone());
    spec.lease_duration_seconds = Some(duration);
    spec.renew_time = Some(now);
    match api
        .replace(&config.name, &PostParams::default(), &lease)
        .await
    {
        Ok(updated) => {
            observe(observed, updated);
            Ok(Round::Held)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Round::Lost),
        Err(e) => Err(e),
    }
}

/// Records `lease`; the observation time moves only when holder or renew time changed.
fn observe(observed: &mut Observed, lease: Lease) {
    let record = lease
        .spec
        .as_ref()
        .map(|s| (s.holder_identity.clone(), s.renew_time.clone()));
    if observed.record != record {
        observed.record = record;
        observed.at = Instant::now();
    }
    observed.lease = Some(lease);
}
