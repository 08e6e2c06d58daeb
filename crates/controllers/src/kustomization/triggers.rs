//! What a Kustomization refers to ([`References`]) and its reconcile triggers beside its own
//! changes, from the runtime's [`triggers`]: a source's new artifact (GitRepository,
//! OCIRepository, Bucket, ExternalArtifact), a dependency becoming Ready and a changed
//! ConfigMap or Secret of `postBuild.substituteFrom`.

use capstan_api::{Bucket, FluxKind, GitRepository, Kustomization, OCIRepository};
use futures::stream::BoxStream;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use crate::runtime::depends::{ObjectKey, References};
use crate::runtime::triggers::{self, EXTERNAL_ARTIFACT, WatchedKind};

/// The source kinds whose artifacts are watched.
pub const WATCHED_SOURCE_KINDS: [WatchedKind; 4] = [
    WatchedKind::of(&GitRepository::INFO),
    WatchedKind::of(&OCIRepository::INFO),
    WatchedKind::of(&Bucket::INFO),
    EXTERNAL_ARTIFACT,
];

impl References for Kustomization {
    fn source(&self) -> Option<ObjectKey> {
        let source = &self.spec.source_ref;
        Some(ObjectKey::new(
            source.kind.as_str(),
            self.source_namespace().unwrap_or_default(),
            &source.name,
        ))
    }

    fn depends_on(&self) -> Vec<ObjectKey> {
        let own = self.namespace().unwrap_or_default();
        self.spec
            .depends_on
            .iter()
            .map(|d| {
                let namespace = d.namespace.as_deref().unwrap_or(&own);
                ObjectKey::new(Self::INFO.kind, namespace, &d.name)
            })
            .collect()
    }

    fn config_refs(&self) -> Vec<ObjectKey> {
        let own = self.namespace().unwrap_or_default();
        let Some(post_build) = self.spec.post_build.as_ref() else {
            return Vec::new();
        };
        post_build
            .substitute_from
            .iter()
            .map(|s| ObjectKey::new(super::variables::kind_name(s.kind), &own, &s.name))
            .collect()
    }
}

/// Every trigger of a Kustomization.
pub fn all(
    client: &Client,
    store: &Store<Kustomization>,
) -> Vec<BoxStream<'static, ObjectRef<Kustomization>>> {
    let mut all = triggers::sources(client, store, &WATCHED_SOURCE_KINDS);
    all.push(triggers::dependencies::<Kustomization, _>(client, store));
    all.extend(triggers::configs(client, store));
    all
}
