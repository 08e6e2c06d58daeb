//! What a consumer kind refers to ([`References`]: its source, its `spec.dependsOn`, the
//! ConfigMaps and Secrets it reads) and `spec.dependsOn` as a service every consumer kind
//! shares ([`check`]): a dependent goes on only when each object it depends on is Ready for its
//! current generation and, when both are built from the same source, stands at the revision the
//! dependent is about to use — so a new commit reaches a dependent only after what it depends on
//! (as Flux does).
//!
//! Readiness is the one reading of the API types ([`FluxKind::is_ready`]); the revision a
//! dependency stands at is [`FluxKind::revision`] (`status.lastAppliedRevision` for a
//! Kustomization, `status.lastAttemptedRevision` for a HelmRelease).

use std::fmt::{self, Debug};
use std::time::Duration;

use capstan_api::FluxKind;
use capstan_api::meta::reason;
use kube::core::NamespaceResourceScope;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::error::ReconcileError;

/// One object another refers to: kind, namespace (defaulted to the referrer's) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// `GitRepository`, `ConfigMap`, ...
    pub kind: String,
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl ObjectKey {
    /// `kind` `namespace/name`.
    pub fn new(kind: &str, namespace: &str, name: &str) -> Self {
        Self {
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

/// What an object of a consumer kind refers to; the runtime's dependency check and
/// [`triggers`](super::triggers) read it. Every method defaults to nothing.
pub trait References: Resource + ResourceExt {
    /// The source it consumes (`spec.sourceRef`, `spec.chartRef`, ...), namespace defaulted.
    fn source(&self) -> Option<ObjectKey> {
        None
    }
    /// The objects of its own kind it depends on (`spec.dependsOn`), namespace defaulted; the
    /// kind of each key is the dependency kind.
    fn depends_on(&self) -> Vec<ObjectKey> {
        Vec::new()
    }
    /// The ConfigMaps and Secrets it reads (`postBuild.substituteFrom`, `valuesFrom`), kind
    /// `ConfigMap` or `Secret`, namespace defaulted.
    fn config_refs(&self) -> Vec<ObjectKey> {
        Vec::new()
    }
}

/// Why a dependency holds its dependent back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// Absent, or not Ready for its current generation.
    NotReady,
    /// Built from the same source as the dependent, but not at the revision the dependent is
    /// about to use.
    RevisionBehind,
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotReady => "is not ready",
            Self::RevisionBehind => "revision is not up to date",
        })
    }
}

/// Whether `dependency` (as read now; `None` when absent) lets `dependent` go on with the
/// source `revision` it is about to use.
///
/// # Errors
/// Why it does not: [`Blocked`].
pub fn verdict<D, K>(
    dependent: &D,
    dependency: Option<&K>,
    revision: Option<&str>,
) -> Result<(), Blocked>
where
    D: References,
    K: FluxKind + References,
{
    let dependency = dependency
        .filter(|d| d.is_ready())
        .ok_or(Blocked::NotReady)?;
    let same_source = dependency.source().is_some() && dependency.source() == dependent.source();
    if same_source && revision.is_some() && dependency.revision() != revision {
        return Err(Blocked::RevisionBehind);
    }
    Ok(())
}

/// Checks every dependency of `dependent` (of kind `K`), read from the API server: a
/// dependency not there yet, or not ready, is [`ErrorClass::Waiting`](crate::ErrorClass)
/// (`DependencyNotReady`, looked at again after `retry`); an API error is transient.
///
/// # Errors
/// The first dependency holding `dependent` back, as a [`ReconcileError`] naming it.
pub async fn check<K, D>(
    client: &Client,
    dependent: &D,
    revision: Option<&str>,
    retry: Duration,
) -> Result<(), ReconcileError>
where
    D: References,
    K: FluxKind
        + References
        + Resource<Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned,
{
    check_watched::<K, D>(
        client,
        dependent,
        revision,
        retry,
        &crate::tenancy::Tenancy::default(),
    )
    .await
}

/// [`check`] under `tenancy`: with one watched namespace, a dependency in another namespace is
/// never reconciled here, and its message says so.
///
/// # Errors
/// The first dependency holding `dependent` back, as a [`ReconcileError`] naming it.
pub async fn check_watched<K, D>(
    client: &Client,
    dependent: &D,
    revision: Option<&str>,
    retry: Duration,
    tenancy: &crate::tenancy::Tenancy,
) -> Result<(), ReconcileError>
where
    D: References,
    K: FluxKind
        + References
        + Resource<Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned,
{
    for dependency in dependent.depends_on() {
        let ObjectKey {
            namespace, name, ..
        } = &dependency;
        let api: Api<K> = Api::namespaced(client.clone(), namespace);
        let found = api.get_opt(name).await.map_err(|e| {
            ReconcileError::transient(
                reason::DEPENDENCY_NOT_READY,
                format!("unable to get '{namespace}/{name}' dependency: {e}"),
            )
        })?;
        verdict(dependent, found.as_ref(), revision).map_err(|blocked| {
            let unwatched = tenancy
                .unwatched(namespace)
                .map(|why| format!(" ({why})"))
                .unwrap_or_default();
            ReconcileError::waiting(
                retry,
                reason::DEPENDENCY_NOT_READY,
                format!("dependency '{namespace}/{name}' {blocked}{unwatched}"),
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use capstan_api::Kustomization;
    use capstan_api::kustomize::v1::KustomizationStatus;
    use capstan_api::meta::condition;

    use super::*;
    use crate::runtime::ConditionStatus;
    use crate::runtime::conditions::set_condition;

    fn kustomization(name: &str, source: &str) -> Kustomization {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": name, "namespace": "apps", "generation": 2},
            "spec": {
                "interval": "1m",
                "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": source},
                "dependsOn": [{"name": "base"}],
            },
        }))
        .unwrap()
    }

    fn ready(mut object: Kustomization, generation: i64, revision: &str) -> Kustomization {
        let mut status = KustomizationStatus {
            observed_generation: Some(generation),
            last_applied_revision: Some(revision.to_owned()),
            ..KustomizationStatus::default()
        };
        set_condition(
            &mut status.conditions,
            condition::READY,
            ConditionStatus::True,
            reason::RECONCILIATION_SUCCEEDED,
            "",
            Some(generation),
        );
        object.status = Some(status);
        object
    }

    #[test]
    fn references_default_their_namespace() {
        let app = kustomization("app", "repo");
        assert_eq!(
            app.source(),
            Some(ObjectKey::new("GitRepository", "apps", "repo"))
        );
        assert_eq!(
            app.depends_on(),
            vec![ObjectKey::new("Kustomization", "apps", "base")]
        );
    }

    #[test]
    fn a_dependency_must_be_there_and_ready_for_its_generation() {
        let app = kustomization("app", "repo");
        let none: Option<&Kustomization> = None;
        assert_eq!(
            verdict(&app, none, Some("main@sha1:a")),
            Err(Blocked::NotReady)
        );
        let base = kustomization("base", "other");
        assert_eq!(verdict(&app, Some(&base), None), Err(Blocked::NotReady));
        let stale = ready(base.clone(), 1, "main@sha1:a");
        assert_eq!(
            verdict(&app, Some(&stale), None),
            Err(Blocked::NotReady),
            "Ready for an old generation is not ready"
        );
        let fresh = ready(base, 2, "main@sha1:a");
        assert_eq!(verdict(&app, Some(&fresh), Some("main@sha1:b")), Ok(()));
    }

    #[test]
    fn a_same_source_dependency_must_stand_at_the_same_revision() {
        let app = kustomization("app", "repo");
        let base = ready(kustomization("base", "repo"), 2, "main@sha1:a");
        assert_eq!(verdict(&app, Some(&base), Some("main@sha1:a")), Ok(()));
        assert_eq!(
            verdict(&app, Some(&base), Some("main@sha1:b")),
            Err(Blocked::RevisionBehind)
        );
        assert_eq!(
            Blocked::RevisionBehind.to_string(),
            "revision is not up to date"
        );
        let elsewhere = ready(kustomization("base", "other"), 2, "main@sha1:a");
        assert_eq!(
            verdict(&app, Some(&elsewhere), Some("main@sha1:b")),
            Ok(()),
            "another source's revision is not compared"
        );
    }
}
