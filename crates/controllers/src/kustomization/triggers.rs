//! Reconcile triggers of Kustomizations beside their own changes: a source's new artifact
//! (GitRepository, OCIRepository, Bucket) and a dependency becoming Ready.

use std::collections::HashMap;

use capstan_api::Kustomization;
use futures::stream::{self, BoxStream, StreamExt};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

/// The source kinds whose artifacts are watched, in `source.toolkit.fluxcd.io/v1`.
pub const WATCHED_SOURCE_KINDS: [&str; 3] = ["GitRepository", "OCIRepository", "Bucket"];

const SOURCE_GROUP: &str = "source.toolkit.fluxcd.io";
const SOURCE_VERSION: &str = "v1";

/// Every trigger: one per watched source kind, and one for dependencies.
pub fn all(
    client: &Client,
    store: &Store<Kustomization>,
) -> Vec<BoxStream<'static, ObjectRef<Kustomization>>> {
    let mut triggers: Vec<_> = WATCHED_SOURCE_KINDS
        .iter()
        .map(|kind| source_trigger(client, store.clone(), kind))
        .collect();
    triggers.push(dependency_trigger(client, store.clone()));
    triggers
}

/// `revision|digest` of a source's `status.artifact`.
fn artifact_key(source: &DynamicObject) -> Option<String> {
    let artifact = source.data.get("status")?.get("artifact")?;
    let field = |name: &str| {
        artifact
            .get(name)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
    };
    Some(format!("{}|{}", field("revision"), field("digest")))
}

/// Remembers the last value seen per object; true when `value` is new for `key`.
fn changed(
    seen: &mut HashMap<(String, String), String>,
    key: (String, String),
    value: Option<String>,
) -> bool {
    if let Some(value) = value {
        seen.insert(key, value.clone()).as_ref() != Some(&value)
    } else {
        seen.remove(&key);
        false
    }
}

/// The Kustomizations in `store` whose `spec.sourceRef` is `kind` `namespace/name`.
pub fn referencing_source(
    store: &Store<Kustomization>,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<Kustomization>> {
    store
        .state()
        .iter()
        .filter(|k| {
            let source = &k.spec.source_ref;
            source.kind.as_str() == kind
                && source.name == name
                && k.source_namespace() == Some(namespace)
        })
        .map(|k| ObjectRef::from_obj(k.as_ref()))
        .collect()
}

/// The Kustomizations in `store` listing `namespace/name` in `spec.dependsOn`.
pub fn depending_on(
    store: &Store<Kustomization>,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<Kustomization>> {
    store
        .state()
        .iter()
        .filter(|k| {
            let own = k.namespace().unwrap_or_default();
            k.spec
                .depends_on
                .iter()
                .any(|d| d.name == name && d.namespace.as_deref().unwrap_or(&own) == namespace)
        })
        .map(|k| ObjectRef::from_obj(k.as_ref()))
        .collect()
}

/// Kustomizations to reconcile when a source of `kind` gets a new artifact revision or digest.
fn source_trigger(
    client: &Client,
    store: Store<Kustomization>,
    kind: &'static str,
) -> BoxStream<'static, ObjectRef<Kustomization>> {
    let gvk = GroupVersionKind::gvk(SOURCE_GROUP, SOURCE_VERSION, kind);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk));
    on_change(api, kind, artifact_key, move |namespace, name| {
        tracing::debug!(kind, %namespace, %name, "source artifact changed");
        referencing_source(&store, kind, namespace, name)
    })
}

/// `generation|lastAppliedRevision` of a Kustomization Ready for its generation.
fn ready_key(object: &Kustomization) -> Option<String> {
    super::is_ready(object).then(|| {
        format!(
            "{}|{}",
            object.metadata.generation.unwrap_or_default(),
            object
                .status
                .as_ref()
                .and_then(|s| s.last_applied_revision.as_deref())
                .unwrap_or_default()
        )
    })
}

/// Kustomizations to reconcile when one they depend on becomes Ready (or Ready for a new
/// generation or revision).
fn dependency_trigger(
    client: &Client,
    store: Store<Kustomization>,
) -> BoxStream<'static, ObjectRef<Kustomization>> {
    let api: Api<Kustomization> = Api::all(client.clone());
    on_change(api, "Kustomization", ready_key, move |namespace, name| {
        depending_on(&store, namespace, name)
    })
}

/// Watches `api` and, whenever the `key` of an object takes a new value, yields the
/// Kustomizations `targets` names for it. Deleted objects are forgotten, so the memory held is
/// one key per existing object, and a re-created object triggers again.
fn on_change<K, F>(
    api: Api<K>,
    kind: &'static str,
    key: fn(&K) -> Option<String>,
    targets: F,
) -> BoxStream<'static, ObjectRef<Kustomization>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    F: Fn(&str, &str) -> Vec<ObjectRef<Kustomization>> + Send + 'static,
{
    let mut seen = HashMap::new();
    watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(move |event| {
            let found = match event {
                Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                    let namespace = object.namespace().unwrap_or_default();
                    let name = object.name_any();
                    let id = (namespace.clone(), name.clone());
                    if changed(&mut seen, id, key(&object)) {
                        targets(&namespace, &name)
                    } else {
                        Vec::new()
                    }
                }
                Ok(watcher::Event::Delete(object)) => {
                    seen.remove(&(object.namespace().unwrap_or_default(), object.name_any()));
                    Vec::new()
                }
                Ok(watcher::Event::Init | watcher::Event::InitDone) => Vec::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_new_values_count_as_changes() {
        let mut seen = HashMap::new();
        let key = || ("apps".to_owned(), "repo".to_owned());
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
}
