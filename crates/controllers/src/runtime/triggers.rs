//! Reconcile triggers from other kinds, generic over the watched kind and the triggered kind `K`
//! (which says what it refers to through [`References`]):
//!
//! - [`sources`]: a source's new artifact (revision or digest) reconciles its consumers;
//! - [`dependencies`]: a dependency becoming Ready (or Ready for a new generation or revision)
//!   reconciles its dependents;
//! - [`configs`]: a changed ConfigMap or Secret (its data) reconciles the objects that read it.
//!
//! Each watch keeps one key per existing watched object (a revision, a hash of the data: never
//! the data itself), forgets deleted ones (a re-created object triggers again), and yields the
//! objects of `K` in the controller's store that refer to what changed. A kind that is not
//! installed (e.g. ExternalArtifact on a cluster without its CRD) is retried with backoff,
//! logged at debug level only.
//!
//! With a watched namespace ([`super::RuntimeConfig::watch_namespace`]) every watch here is
//! limited to it: [`super::run`] builds a kind's triggers inside [`watching`], which the
//! builders below read, so that [`super::Reconciler::triggers`] keeps its signature.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use capstan_api::{FluxKind, KindInfo};
use futures::stream::{self, BoxStream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};

use super::depends::{ObjectKey, References};

thread_local! {
    /// The namespace the trigger builders of this thread watch (`None`: every namespace).
    static WATCH_NAMESPACE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `build` (a kind's [`super::Reconciler::triggers`]) with its watches limited to
/// `namespace` (`None`: every namespace). The builders read the namespace when called, and the
/// streams keep it, so `build` must create its streams before it returns (they all do).
pub fn watching<T>(namespace: Option<&str>, build: impl FnOnce() -> T) -> T {
    /// Puts the previous namespace back, even if `build` panics.
    struct Restore(Option<String>);
    impl Drop for Restore {
        fn drop(&mut self) {
            WATCH_NAMESPACE.with(|cell| cell.replace(self.0.take()));
        }
    }
    let _restore = Restore(WATCH_NAMESPACE.with(|cell| cell.replace(namespace.map(str::to_owned))));
    build()
}

/// The namespace the builders called now watch (see [`watching`]).
fn watch_namespace() -> Option<String> {
    WATCH_NAMESPACE.with(|cell| cell.borrow().clone())
}

/// An API over the watched namespace, or every namespace.
fn watched_api<W>(client: &Client) -> Api<W>
where
    W: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
{
    match watch_namespace() {
        Some(namespace) => Api::namespaced(client.clone(), &namespace),
        None => Api::all(client.clone()),
    }
}

/// A kind watched through the dynamic API (its CRD may be absent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchedKind {
    /// `source.toolkit.fluxcd.io`.
    pub group: &'static str,
    /// `v1`.
    pub version: &'static str,
    /// `GitRepository`.
    pub kind: &'static str,
}

impl WatchedKind {
    /// The kind of a served Flux type.
    pub const fn of(info: &KindInfo) -> Self {
        Self {
            group: info.group,
            version: info.version,
            kind: info.kind,
        }
    }
}

/// Flux's ExternalArtifact (`source.toolkit.fluxcd.io/v1`): an artifact produced outside the
/// source controller (served by Capstan, reconciled by none of its controllers).
pub const EXTERNAL_ARTIFACT: WatchedKind = WatchedKind::of(&capstan_api::ExternalArtifact::INFO);

/// The object types a trigger can reconcile: those of a controller's store.
pub trait Triggered:
    References + Resource<DynamicType = ()> + Clone + Send + Sync + 'static
{
}

impl<K: References + Resource<DynamicType = ()> + Clone + Send + Sync + 'static> Triggered for K {}

/// One trigger per source kind in `kinds`: an object of `K` whose [`References::source`] is a
/// source that gets a new artifact revision or digest is reconciled.
pub fn sources<K: Triggered>(
    client: &Client,
    store: &Store<K>,
    kinds: &[WatchedKind],
) -> Vec<BoxStream<'static, ObjectRef<K>>> {
    kinds
        .iter()
        .map(|watched| {
            let gvk = GroupVersionKind::gvk(watched.group, watched.version, watched.kind);
            let resource = ApiResource::from_gvk(&gvk);
            let api: Api<DynamicObject> = match watch_namespace() {
                Some(namespace) => Api::namespaced_with(client.clone(), &namespace, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let store = store.clone();
            let kind = watched.kind;
            on_change(api, watcher::Config::default(), kind, artifact_key, move |changed| {
                tracing::debug!(kind, namespace = %changed.namespace, name = %changed.name, "source artifact changed");
                referring(&store, |object| object.source().as_ref() == Some(changed))
            })
        })
        .collect()
}

/// Objects of `K` listing an object of `D` in [`References::depends_on`] are reconciled when it
/// becomes Ready for its current generation, or Ready again at a new generation or revision.
pub fn dependencies<D, K>(client: &Client, store: &Store<K>) -> BoxStream<'static, ObjectRef<K>>
where
    D: FluxKind
        + Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
    K: Triggered,
{
    let api: Api<D> = watched_api(client);
    let store = store.clone();
    on_change(
        api,
        watcher::Config::default(),
        D::INFO.kind,
        ready_key::<D>,
        move |changed| referring(&store, |object| object.depends_on().contains(changed)),
    )
}

/// The label that opts a ConfigMap or Secret in to triggering the objects that reference it,
/// as in Flux (`reconcile.fluxcd.io/watch: Enabled`); only those are watched.
pub const WATCH_LABEL: &str = "reconcile.fluxcd.io/watch";

/// One trigger for ConfigMaps and one for Secrets labelled [`WATCH_LABEL`]`: Enabled`: an object
/// of `K` listing a changed one (its `data`, `binaryData`) in [`References::config_refs`] is
/// reconciled. Unlabelled ones are read at the next reconcile, as in Flux.
pub fn configs<K: Triggered>(
    client: &Client,
    store: &Store<K>,
) -> Vec<BoxStream<'static, ObjectRef<K>>> {
    let config_maps: Api<ConfigMap> = watched_api(client);
    let secrets: Api<Secret> = watched_api(client);
    let watched = watcher::Config::default().labels(&format!("{WATCH_LABEL}=Enabled"));
    let referring_to = |store: Store<K>| {
        move |changed: &ObjectKey| {
            referring(&store, |object| object.config_refs().contains(changed))
        }
    };
    vec![
        on_change(
            config_maps,
            watched.clone(),
            "ConfigMap",
            |c: &ConfigMap| Some(config_map_key(c)),
            referring_to(store.clone()),
        ),
        on_change(
            secrets,
            watched,
            "Secret",
            |s: &Secret| Some(secret_key(s)),
            referring_to(store.clone()),
        ),
    ]
}

/// The objects in `store` for which `refers` holds.
fn referring<K: Triggered>(store: &Store<K>, refers: impl Fn(&K) -> bool) -> Vec<ObjectRef<K>> {
    store
        .state()
        .iter()
        .filter(|object| refers(object))
        .map(|object| ObjectRef::from_obj(object.as_ref()))
        .collect()
}

/// `revision|digest` of a source's `status.artifact`; without an artifact, `failed|<generation>`
/// once the source failed for its generation, so that its consumers report the failure at once
/// instead of finding it on their next retry.
fn artifact_key(source: &DynamicObject) -> Option<String> {
    let Some(artifact) = source.data.get("status").and_then(|s| s.get("artifact")) else {
        let json = serde_json::to_value(source).ok()?;
        crate::sources::failure(&json)?;
        return Some(format!(
            "failed|{}",
            source.metadata.generation.unwrap_or_default()
        ));
    };
    let field = |name: &str| {
        artifact
            .get(name)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
    };
    Some(format!("{}|{}", field("revision"), field("digest")))
}

/// `generation|revision` of an object Ready for its generation.
fn ready_key<D: FluxKind>(object: &D) -> Option<String> {
    object.is_ready().then(|| {
        format!(
            "{}|{}",
            object.meta().generation.unwrap_or_default(),
            object.revision().unwrap_or_default()
        )
    })
}

/// A hash of a ConfigMap's `data` and `binaryData`.
fn config_map_key(config: &ConfigMap) -> String {
    let text = config.data.iter().flatten().map(|(k, v)| (k, v.as_bytes()));
    let binary = config
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k, v.0.as_slice()));
    data_hash(&[text.collect::<Vec<_>>(), binary.collect()])
}

/// A hash of a Secret's `data` and `stringData`, so that no secret value is kept.
fn secret_key(secret: &Secret) -> String {
    let binary = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k, v.0.as_slice()));
    let text = secret
        .string_data
        .iter()
        .flatten()
        .map(|(k, v)| (k, v.as_bytes()));
    data_hash(&[binary.collect::<Vec<_>>(), text.collect()])
}

/// A hash of key-value maps.
fn data_hash<const N: usize>(maps: &[Vec<(&String, &[u8])>; N]) -> String {
    let mut hasher = std::hash::DefaultHasher::new();
    maps.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// Remembers the last value seen per object; true when `value` is new for `key`.
fn changed(seen: &mut HashMap<ObjectKey, String>, key: ObjectKey, value: Option<String>) -> bool {
    if let Some(value) = value {
        seen.insert(key, value.clone()).as_ref() != Some(&value)
    } else {
        seen.remove(&key);
        false
    }
}

/// Watches `api` and, whenever the `key` of an object takes a new value, yields the objects
/// `targets` names for it. Deleted objects are forgotten, so the memory held is one key per
/// existing object, and a re-created object triggers again.
fn on_change<W, K, F>(
    api: Api<W>,
    config: watcher::Config,
    kind: &'static str,
    key: fn(&W) -> Option<String>,
    targets: F,
) -> BoxStream<'static, ObjectRef<K>>
where
    W: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    K: Triggered,
    F: Fn(&ObjectKey) -> Vec<ObjectRef<K>> + Send + 'static,
{
    let mut seen = HashMap::new();
    let id = move |object: &W| {
        ObjectKey::new(
            kind,
            &object.namespace().unwrap_or_default(),
            &object.name_any(),
        )
    };
    watcher(api, config)
        .default_backoff()
        .filter_map(move |event| {
            let found = match event {
                Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                    let id = id(&object);
                    if changed(&mut seen, id.clone(), key(&object)) {
                        targets(&id)
                    } else {
                        Vec::new()
                    }
                }
                Ok(watcher::Event::Delete(object)) => {
                    seen.remove(&id(&object));
                    Vec::new()
                }
                Ok(watcher::Event::Init | watcher::Event::InitDone) => Vec::new(),
                Err(error) if not_installed(&error) => {
                    tracing::debug!(kind, %error, "kind not installed; watching again later");
                    Vec::new()
                }
                Err(error) => {
                    tracing::warn!(kind, %error, "trigger watch failed; retrying with backoff");
                    Vec::new()
                }
            };
            std::future::ready(Some(stream::iter(found)))
        })
        .flatten()
        .boxed()
}

/// Whether a watch failed because the kind is not served (404).
fn not_installed(error: &watcher::Error) -> bool {
    matches!(
        error,
        watcher::Error::InitialListFailed(kube::Error::Api(response))
            | watcher::Error::WatchStartFailed(kube::Error::Api(response))
            if response.code == 404
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watching_scopes_the_namespace_and_puts_the_previous_one_back() {
        assert_eq!(watch_namespace(), None);
        watching(Some("flux-system"), || {
            assert_eq!(watch_namespace().as_deref(), Some("flux-system"));
            watching(None, || assert_eq!(watch_namespace(), None));
            assert_eq!(watch_namespace().as_deref(), Some("flux-system"));
        });
        assert_eq!(watch_namespace(), None);
        let panicked = std::panic::catch_unwind(|| watching(Some("a"), || panic!("a builder")));
        assert!(panicked.is_err());
        assert_eq!(watch_namespace(), None, "restored after a panic");
    }

    #[test]
    fn only_new_values_count_as_changes() {
        let mut seen = HashMap::new();
        let key = || ObjectKey::new("GitRepository", "apps", "repo");
        assert!(!changed(&mut seen, key(), None));
        assert!(changed(&mut seen, key(), Some("a".into())));
        assert!(!changed(&mut seen, key(), Some("a".into())));
        assert!(changed(&mut seen, key(), Some("b".into())));
        assert!(!changed(&mut seen, key(), None));
        assert!(
            changed(&mut seen, key(), Some("b".into())),
            "back after a gap"
        );
    }

    #[test]
    fn config_keys_follow_the_data_only() {
        let mut config = ConfigMap {
            data: Some([("a".to_owned(), "1".to_owned())].into()),
            ..ConfigMap::default()
        };
        let before = config_map_key(&config);
        config.metadata.labels = Some([("x".to_owned(), "y".to_owned())].into());
        assert_eq!(before, config_map_key(&config));
        config.data = Some([("a".to_owned(), "2".to_owned())].into());
        assert_ne!(before, config_map_key(&config));
        let mut secret = Secret {
            string_data: Some([("a".to_owned(), "2".to_owned())].into()),
            ..Secret::default()
        };
        let text = secret_key(&secret);
        secret.string_data = None;
        secret.data = Some([("a".to_owned(), k8s_openapi::ByteString(b"2".to_vec()))].into());
        assert_ne!(text, secret_key(&secret), "data and stringData apart");
    }

    #[test]
    fn artifact_keys_read_revision_and_digest() {
        let source: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "ExternalArtifact",
            "metadata": {"name": "a", "namespace": "apps"},
            "status": {"artifact": {"revision": "v1", "digest": "sha256:x"}},
        }))
        .unwrap();
        assert_eq!(artifact_key(&source).as_deref(), Some("v1|sha256:x"));
        let empty: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "X", "metadata": {"name": "b"},
        }))
        .unwrap();
        assert_eq!(artifact_key(&empty), None);
        let failed: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "c", "namespace": "apps", "generation": 3},
            "status": {"observedGeneration": 3, "conditions": [
                {"type": "Ready", "status": "False", "reason": "GitOperationFailed",
                 "message": "cannot fetch", "observedGeneration": 3,
                 "lastTransitionTime": "2026-01-01T00:00:00Z"},
            ]},
        }))
        .unwrap();
        assert_eq!(artifact_key(&failed).as_deref(), Some("failed|3"));
    }
}
