//! The webhook server of Receivers: `POST /hook/<digest>` on its own listener.
//!
//! A request goes through, in order:
//! 1. the per-client rate limit (peer IP; [`ClientRateLimit`]): 429 when spent;
//! 2. the body limit ([`ReceiverOptions::max_body_bytes`], Flux's 3 MiB): 413 when over, 408
//!    when it takes longer than [`BODY_TIMEOUT`] (Flux's 30 s read timeout);
//! 3. the Receiver whose `status.webhookPath` is the request path, from an in-memory index kept
//!    by a watch of Receivers (no list per request): 404 when none;
//! 4. suspended or not Ready: 503 (Flux's answer);
//! 5. the type's check ([`super::validate`]) with the token read from the Secret now: 401 for a
//!    failed signature or token, 400 for an event not in `spec.events` or a payload not of
//!    the type's shape; a GitHub `ping` is answered 200 without reconciling;
//! 6. every object of `spec.resources` (by name, or `*` with `matchLabels`; the namespace
//!    defaults to the Receiver's; another namespace refused with
//!    [`ReceiverOptions::no_cross_namespace_refs`]) that `spec.resourceFilter` and its own
//!    `filter` accept (CEL over `res` and `req`; an evaluation error is a failure) is
//!    merge-patched with
//!    `reconcile.fluxcd.io/requestedAt: <now>`, and an Event is published on the Receiver: 200,
//!    or 500 when one could not be annotated.
//!
//! # Guarantees
//! - Responses carry a status code and no body: nothing of a token, a signature or the
//!   payload is echoed. Logs name the Receiver and what failed, never a secret value.
//! - The index follows the watch: a Receiver's new path is served as soon as the watch
//!   delivers its status, an old path stops being served at the same time.
//! - Served on every replica (only annotations are written, which any replica may do), as
//!   Flux's receiver server is.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use capstan_api::meta::{annotation, condition};
use capstan_api::notification::v1::ReceiverResource;
use capstan_api::{FluxKind, Receiver};
use capstan_apply::BoolExpr;
use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::runtime::events::EventType;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::validate::{self, Verdict};
use super::{CONTROLLER_NAME, TOKEN_KEY};
use crate::runtime::{EventSink, Events};

/// Flux's body limit of the receiver and event servers: 3 MiB.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// How long a client may take to send the body (Flux's read timeout): `408` after it.
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The reason of the Event published when a webhook asked for reconciles.
pub const RECONCILE_REQUESTED: &str = "ReconcileRequested";

/// The reason of the Event published when some resources could not be annotated.
pub const RECONCILE_REQUEST_FAILED: &str = "ReconcileRequestFailed";

/// A token bucket per client IP: `burst` requests at once, then `per_second`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientRateLimit {
    /// Requests a client may send at once.
    pub burst: u32,
    /// Requests per second a client gets back.
    pub per_second: f64,
}

impl Default for ClientRateLimit {
    /// 30 at once, then 10 per second per client IP.
    fn default() -> Self {
        Self {
            burst: 30,
            per_second: 10.0,
        }
    }
}

/// Settings of the [`ReceiverServer`].
#[derive(Clone, Debug)]
pub struct ReceiverOptions {
    /// Refuse resources in another namespace than the Receiver's (`--no-cross-namespace-refs`).
    pub no_cross_namespace_refs: bool,
    /// Watch Receivers of this namespace only (`--watch-all-namespaces=false`).
    pub watch_namespace: Option<String>,
    /// Where the Receiver's Events go besides the API server.
    pub event_sink: Option<Arc<dyn EventSink>>,
    /// The largest body accepted ([`MAX_BODY_BYTES`] by default).
    pub max_body_bytes: usize,
    /// The per-client rate limit.
    pub rate_limit: ClientRateLimit,
}

impl Default for ReceiverOptions {
    fn default() -> Self {
        Self {
            no_cross_namespace_refs: false,
            watch_namespace: None,
            event_sink: None,
            max_body_bytes: MAX_BODY_BYTES,
            rate_limit: ClientRateLimit::default(),
        }
    }
}

impl ReceiverOptions {
    /// The options matching the controllers' `config` (lockdown, watched namespace, sink).
    pub fn from_runtime(config: &crate::runtime::RuntimeConfig) -> Self {
        Self {
            no_cross_namespace_refs: config.no_cross_namespace_refs,
            watch_namespace: config.watch_namespace.clone(),
            event_sink: config.event_sink.clone(),
            ..Self::default()
        }
    }
}

/// The Receivers by webhook path.
#[derive(Debug, Default)]
struct Index {
    by_path: HashMap<String, Arc<Receiver>>,
    path_of: HashMap<(String, String), String>,
}

impl Index {
    fn key(receiver: &Receiver) -> (String, String) {
        (
            receiver.namespace().unwrap_or_default(),
            receiver.name_any(),
        )
    }

    fn remove(&mut self, key: &(String, String)) {
        if let Some(path) = self.path_of.remove(key) {
            self.by_path.remove(&path);
        }
    }

    fn upsert(&mut self, receiver: Receiver) {
        let key = Self::key(&receiver);
        self.remove(&key);
        let path = receiver
            .status
            .as_ref()
            .and_then(|s| s.webhook_path.clone());
        if let Some(path) = path.filter(|p| !p.is_empty()) {
            self.path_of.insert(key, path.clone());
            self.by_path.insert(path, Arc::new(receiver));
        }
    }
}

/// Token buckets per client IP.
#[derive(Debug)]
struct Limiter {
    limit: ClientRateLimit,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

/// Buckets kept before full ones are forgotten.
const MAX_BUCKETS: usize = 10_000;

impl Limiter {
    fn allow(&self, client: IpAddr, now: Instant) -> bool {
        let burst = f64::from(self.limit.burst);
        let refill = |(tokens, at): (f64, Instant)| {
            (tokens + now.duration_since(at).as_secs_f64() * self.limit.per_second).min(burst)
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() >= MAX_BUCKETS {
            buckets.retain(|_, bucket| refill(*bucket) < burst);
        }
        let bucket = buckets.entry(client).or_insert((burst, now));
        let tokens = refill(*bucket);
        if tokens >= 1.0 {
            *bucket = (tokens - 1.0, now);
            true
        } else {
            *bucket = (tokens, now);
            false
        }
    }
}

struct Shared {
    client: Client,
    options: ReceiverOptions,
    index: RwLock<Index>,
    limiter: Limiter,
    events: Events,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The webhook server of Receivers. See the [module documentation](self).
#[derive(Clone, Debug)]
pub struct ReceiverServer {
    shared: Arc<Shared>,
}

impl ReceiverServer {
    /// A server reading Receivers and writing annotations through `client`.
    pub fn new(client: Client, options: ReceiverOptions) -> Self {
        let events = Events::new(client.clone(), CONTROLLER_NAME, options.event_sink.clone());
        let limiter = Limiter {
            limit: options.rate_limit,
            buckets: Mutex::default(),
        };
        Self {
            shared: Arc::new(Shared {
                client,
                options,
                index: RwLock::default(),
                limiter,
                events,
            }),
        }
    }

    /// `POST /hook/{digest}`. Serve it with
    /// `into_make_service_with_connect_info::<SocketAddr>()` for the per-client limit (without
    /// it, every request counts against one bucket).
    pub fn router(&self) -> axum::Router {
        axum::Router::new()
            .route("/hook/{digest}", axum::routing::post(handle))
            .with_state(self.shared.clone())
    }

    /// Keeps the index of webhook paths from a watch of Receivers until `stop`.
    pub async fn index(&self, stop: CancellationToken) {
        let api: Api<Receiver> = match &self.shared.options.watch_namespace {
            Some(namespace) => Api::namespaced(self.shared.client.clone(), namespace),
            None => Api::all(self.shared.client.clone()),
        };
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut pending: Option<Index> = None;
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                event = events.next() => event,
            };
            let Some(event) = event else { return };
            let event = match event {
                Ok(event) => event,
                Err(error) => {
                    tracing::warn!(%error, "watching Receivers");
                    continue;
                }
            };
            let mut index = self
                .shared
                .index
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            match event {
                watcher::Event::Init => pending = Some(Index::default()),
                watcher::Event::InitApply(receiver) => {
                    pending.get_or_insert_with(Index::default).upsert(receiver);
                }
                watcher::Event::InitDone => *index = pending.take().unwrap_or_default(),
                watcher::Event::Apply(receiver) => index.upsert(receiver),
                watcher::Event::Delete(receiver) => index.remove(&Index::key(&receiver)),
            }
        }
    }

    /// Serves the webhooks on `listener` and keeps the index, until `stop`.
    ///
    /// # Errors
    /// The server's I/O error.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        stop: CancellationToken,
    ) -> std::io::Result<()> {
        let app = self
            .router()
            .into_make_service_with_connect_info::<SocketAddr>();
        let shutdown = stop.clone();
        let serve = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await });
        let (served, ()) = tokio::join!(serve.into_future(), self.index(stop));
        served
    }

    fn lookup(&self, path: &str) -> Option<Arc<Receiver>> {
        let index = self
            .shared
            .index
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        index.by_path.get(path).cloned()
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> StatusCode {
    let server = ReceiverServer { shared };
    let client_ip = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
    if !server.shared.limiter.allow(client_ip, Instant::now()) {
        tracing::warn!(client = %client_ip, "receiver: rate limit reached");
        return StatusCode::TOO_MANY_REQUESTS;
    }
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, server.shared.options.max_body_bytes);
    let Ok(collected) = tokio::time::timeout(BODY_TIMEOUT, limited.collect()).await else {
        tracing::warn!(client = %client_ip, "receiver: the request body took too long");
        return StatusCode::REQUEST_TIMEOUT;
    };
    let body = match collected {
        Ok(collected) => collected.to_bytes(),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => {
            tracing::warn!(
                limit = server.shared.options.max_body_bytes,
                "receiver: request body over the limit"
            );
            return StatusCode::PAYLOAD_TOO_LARGE;
        }
        Err(error) => {
            tracing::warn!(%error, "receiver: reading the request body");
            return StatusCode::BAD_REQUEST;
        }
    };
    let Some(receiver) = server.lookup(parts.uri.path()) else {
        return StatusCode::NOT_FOUND;
    };
    server.receive(&receiver, &parts.headers, &body).await
}

impl ReceiverServer {
    async fn receive(
        &self,
        receiver: &Receiver,
        headers: &axum::http::HeaderMap,
        body: &[u8],
    ) -> StatusCode {
        let namespace = receiver.namespace().unwrap_or_default();
        let name = receiver.name_any();
        let span = tracing::info_span!("receiver", %namespace, %name);
        let _ = span.enter();
        let ready = receiver
            .conditions()
            .iter()
            .any(|c| c.type_ == condition::READY && c.status == "True");
        if receiver.suspended() || !ready {
            tracing::warn!(
                %namespace, %name,
                "receiver: unable to process request: the receiver is {}",
                if receiver.suspended() { "suspended" } else { "not ready" }
            );
            return StatusCode::SERVICE_UNAVAILABLE;
        }
        let token = match self.token(receiver, &namespace).await {
            Ok(token) => token,
            Err(message) => {
                tracing::warn!(%namespace, %name, "receiver: {message}");
                return StatusCode::BAD_REQUEST;
            }
        };
        let verdict = validate::validate(
            receiver.spec.type_,
            &token,
            &receiver.spec.events,
            headers,
            body,
        );
        let event = match verdict {
            Ok(Verdict::Ping) => {
                tracing::info!(%namespace, %name, "receiver: ping answered");
                return StatusCode::OK;
            }
            Ok(Verdict::Reconcile { event }) => event,
            Err(rejection) => {
                tracing::warn!(%namespace, %name, "receiver: unable to validate payload: {rejection}");
                return rejection.status();
            }
        };
        let filters = match Filters::new(receiver, headers, body) {
            Ok(filters) => filters,
            Err(message) => {
                tracing::warn!(%namespace, %name, "receiver: unable to create resource filters: {message}");
                return StatusCode::INTERNAL_SERVER_ERROR;
            }
        };
        let now = jiff::Timestamp::now().to_string();
        let mut annotated = Vec::new();
        let mut failures = Vec::new();
        for (index, resource) in receiver.spec.resources.iter().enumerate() {
            let filter = filters.as_ref().map(|filters| (filters, index));
            match self
                .request_reconcile(&namespace, resource, &now, filter)
                .await
            {
                Ok(names) => annotated.extend(names),
                Err(message) => failures.push(message),
            }
        }
        self.announce(receiver, event.as_deref(), &annotated, &failures);
        if failures.is_empty() {
            StatusCode::OK
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }

    /// Publishes what the request did as an Event on the Receiver (in the background).
    fn announce(
        &self,
        receiver: &Receiver,
        event: Option<&str>,
        annotated: &[String],
        failures: &[String],
    ) {
        let type_name = serde_json::to_value(receiver.spec.type_)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let what = match event {
            Some(event) => format!("{type_name} webhook ({event})"),
            None => format!("{type_name} webhook"),
        };
        let summary = |items: &[String]| capstan_api::message::summarize(items);
        let (type_, reason, message) = if failures.is_empty() {
            let message = if annotated.is_empty() {
                format!("{what}: no resources matched")
            } else {
                format!("{what}: reconcile requested for {}", summary(annotated))
            };
            (EventType::Normal, RECONCILE_REQUESTED, message)
        } else {
            (
                EventType::Warning,
                RECONCILE_REQUEST_FAILED,
                format!("{what}: {}", summary(failures)),
            )
        };
        tracing::info!(receiver = %receiver.name_any(), "{message}");
        let events = self.shared.events.clone();
        let object = receiver.object_ref(&());
        tokio::spawn(async move {
            events
                .publish(
                    &object,
                    type_,
                    reason,
                    &message,
                    "Receive",
                    &BTreeMap::new(),
                )
                .await;
        });
    }

    /// The Receiver's token, or what went wrong (naming the Secret, never its data).
    async fn token(&self, receiver: &Receiver, namespace: &str) -> Result<String, String> {
        let Some(secret_ref) = receiver.spec.secret_ref.as_ref() else {
            return Err("the receiver has no secretRef".into());
        };
        let name = format!("{namespace}/{}", secret_ref.name);
        let secrets: Api<Secret> = Api::namespaced(self.shared.client.clone(), namespace);
        let secret = secrets
            .get(&secret_ref.name)
            .await
            .map_err(|e| format!("unable to read secret '{name}': {e}"))?;
        let token = secret
            .data
            .and_then(|mut data| data.remove(TOKEN_KEY))
            .ok_or_else(|| format!("invalid '{name}' secret data: required field 'token'"))?;
        String::from_utf8(token.0).map_err(|_| format!("secret '{name}': the token is not UTF-8"))
    }

    /// Annotates the objects `resource` names; their `Kind/namespace/name`s.
    async fn request_reconcile(
        &self,
        default_namespace: &str,
        resource: &ReceiverResource,
        now: &str,
        filter: Option<(&Filters, usize)>,
    ) -> Result<Vec<String>, String> {
        let reference = &resource.reference;
        let kind = kind_name(reference.kind);
        let namespace = match reference.namespace.as_deref() {
            Some(namespace) if namespace != default_namespace => {
                if self.shared.options.no_cross_namespace_refs {
                    return Err(format!(
                        "{kind}/{namespace}/{}: cross-namespace references are not allowed",
                        reference.name
                    ));
                }
                namespace
            }
            _ => default_namespace,
        };
        let api_resource = api_resource(&kind, reference.api_version.as_deref())?;
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.shared.client.clone(), namespace, &api_resource);
        let patch = serde_json::json!({
            "metadata": {"annotations": {annotation::RECONCILE_REQUESTED_AT: now}},
        });
        let annotate = |name: String| {
            let (api, patch, kind) = (api.clone(), &patch, &kind);
            async move {
                api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(|_| format!("{kind}/{namespace}/{name}"))
                    .map_err(|e| format!("unable to annotate {kind}/{namespace}/{name}: {e}"))
            }
        };
        // Whether the filters accept the object (its apiVersion, kind and metadata, as Flux's
        // PartialObjectMetadata).
        let accept = |metadata: &kube::api::ObjectMeta| -> Result<bool, String> {
            let Some((filters, index)) = filter else {
                return Ok(true);
            };
            let res = serde_json::json!({
                "apiVersion": api_resource.api_version,
                "kind": kind,
                "metadata": metadata,
            });
            let accepted = filters.accept(index, &res).map_err(|e| {
                format!(
                    "{kind}/{namespace}/{}: {e}",
                    metadata.name.as_deref().unwrap_or_default()
                )
            })?;
            if !accepted {
                tracing::debug!(
                    "receiver: {kind}/{namespace}/{} not annotated: a filter is false",
                    metadata.name.as_deref().unwrap_or_default()
                );
            }
            Ok(accepted)
        };
        if reference.name != "*" {
            if filter.is_some() {
                let object = api.get_metadata(&reference.name).await.map_err(|e| {
                    format!("unable to read {kind}/{namespace}/{}: {e}", reference.name)
                })?;
                if !accept(&object.metadata)? {
                    return Ok(Vec::new());
                }
            }
            return Ok(vec![annotate(reference.name.clone()).await?]);
        }
        if reference.match_labels.is_empty() {
            return Err(format!(
                "{kind}/{namespace}/*: matchLabels field not set when using wildcard '*' as name"
            ));
        }
        let selector = reference
            .match_labels
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
            .join(",");
        let listed = api
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| format!("listing {kind} in {namespace} matching {selector}: {e}"))?;
        if listed.items.is_empty() {
            tracing::warn!("receiver: no {kind} found with labels {selector} in {namespace}");
        }
        let mut annotated = Vec::new();
        for object in listed.items {
            if accept(&object.metadata)? {
                annotated.push(annotate(object.name_any()).await?);
            }
        }
        Ok(annotated)
    }
}

/// The name of a kind of `spec.resources` (`GitRepository`, `OCIRepository`).
pub(crate) fn kind_name(kind: capstan_api::notification::EventSourceKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The filters of a request: `spec.resourceFilter` and each resource's `filter`, with the
/// request body they read.
struct Filters {
    top: Option<BoolExpr>,
    per_resource: Vec<Option<BoolExpr>>,
    request: serde_json::Value,
}

impl Filters {
    /// `None` when the Receiver has no filter (the body is not parsed then).
    fn new(
        receiver: &Receiver,
        headers: &axum::http::HeaderMap,
        body: &[u8],
    ) -> Result<Option<Self>, String> {
        let parse = |source: Option<&str>| source.map(BoolExpr::parse).transpose();
        let top = parse(receiver.spec.resource_filter.as_deref())?;
        let per_resource = (receiver.spec.resources.iter())
            .map(|r| parse(r.filter.as_deref()))
            .collect::<Result<Vec<_>, _>>()?;
        if top.is_none() && per_resource.iter().all(Option::is_none) {
            return Ok(None);
        }
        let json = headers
            .get_all(axum::http::header::CONTENT_TYPE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|v| {
                let media = v.split(';').next().unwrap_or_default().trim();
                media.eq_ignore_ascii_case("application/json")
            });
        let request = if json {
            serde_json::from_slice(body).map_err(|e| {
                format!(
                    "failed to parse request body as JSON: {}",
                    super::validate::json_error(&e)
                )
            })?
        } else {
            serde_json::json!({})
        };
        Ok(Some(Self {
            top,
            per_resource,
            request,
        }))
    }

    /// Whether the filters for resource `index` accept `res`.
    fn accept(&self, index: usize, res: &serde_json::Value) -> Result<bool, String> {
        let filters = [self.top.as_ref(), self.per_resource[index].as_ref()];
        for filter in filters.into_iter().flatten() {
            if !filter.evaluate(&[("res", res), ("req", &self.request)])? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Where the objects of `kind` are served: `api_version` when given, else the kind's served
/// version (or Flux's default for the image and source-extension kinds).
fn api_resource(kind: &str, api_version: Option<&str>) -> Result<ApiResource, String> {
    let served = capstan_api::kind::by_kind(kind);
    let api_version = match (api_version, served) {
        (Some(api_version), _) => api_version,
        (None, Some(info)) => info.api_version,
        (None, None) => match kind {
            "ImageRepository" => "image.toolkit.fluxcd.io/v1",
            "ArtifactGenerator" => "source.extensions.fluxcd.io/v1beta1",
            _ => return Err(format!("apiVersion must be specified for kind {kind:?}")),
        },
    };
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let mut resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    if let Some(info) = served.filter(|info| info.group == group) {
        info.plural.clone_into(&mut resource.plural);
    }
    Ok(resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limiter_allows_a_burst_then_refills() {
        let limiter = Limiter {
            limit: ClientRateLimit {
                burst: 2,
                per_second: 1.0,
            },
            buckets: Mutex::default(),
        };
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let start = Instant::now();
        assert!(limiter.allow(a, start));
        assert!(limiter.allow(a, start));
        assert!(!limiter.allow(a, start), "burst spent");
        assert!(limiter.allow(b, start), "per client");
        assert!(limiter.allow(a, start + std::time::Duration::from_millis(1100)));
    }

    #[test]
    fn api_resources_default_to_the_served_version() {
        let git = api_resource("GitRepository", None).unwrap();
        assert_eq!(git.api_version, "source.toolkit.fluxcd.io/v1");
        assert_eq!(git.plural, "gitrepositories");
        let policy = api_resource("ImagePolicy", Some("image.toolkit.fluxcd.io/v1")).unwrap();
        assert_eq!(policy.plural, "imagepolicies");
        assert!(api_resource("ImagePolicy", None).is_err());
    }
}
