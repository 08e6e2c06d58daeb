//! [`ResourceManager`]: staged server-side apply, drift diff, prune and health waits over kube-rs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
};
use kube::discovery::{ApiCapabilities, Scope};
use serde_json::Value;

use crate::cel::HealthExprs;
use crate::changeset::{Action, ChangeSet, ChangeSetEntry};
use crate::compare::{Comparison, changed_paths, normalize};
use crate::error::{Error, ObjectError, api_message, is_immutable, is_not_found};
use crate::health::{self, HealthResult, Status};
use crate::object::{
    DISABLED, ENABLED, FORCE_ANNOTATION, OWNER_NAME_LABEL, OWNER_NAMESPACE_LABEL, ObjectRef,
    PRUNE_ANNOTATION, RECONCILE_ANNOTATION, SsaMode, annotation_is,
};

/// The error of a namespaced object without a namespace (and no default).
const NO_NAMESPACE: &str = "namespace not specified for a namespaced kind";

/// How [`ResourceManager::apply_all_staged`] applies.
#[derive(Clone, Debug)]
pub struct ApplyOptions {
    /// Recreate objects whose immutable fields changed (Flux's `spec.force`). Without it only
    /// objects annotated `kustomize.toolkit.fluxcd.io/force: enabled` are recreated.
    pub force: bool,
    /// How many objects are applied at once (at least 1).
    pub concurrency: usize,
    /// How long to wait for CRDs to be Established and for a recreated object's old copy to go.
    pub wait_timeout: Duration,
    /// Namespace given to namespaced objects that have none; `None` makes such objects errors.
    pub default_namespace: Option<String>,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        Self {
            force: false,
            concurrency: 4,
            wait_timeout: Duration::from_secs(60),
            default_namespace: None,
        }
    }
}

/// Who owns the objects being pruned: the Kustomization's name and namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The owner's name (label `kustomize.toolkit.fluxcd.io/name`).
    pub name: String,
    /// The owner's namespace (label `kustomize.toolkit.fluxcd.io/namespace`).
    pub namespace: String,
}

/// How [`ResourceManager::delete_all`] prunes.
#[derive(Clone, Debug)]
pub struct DeleteOptions {
    /// When set, only objects labelled with this owner are deleted; others are skipped.
    pub owner: Option<Owner>,
    /// How many objects are deleted at once (at least 1).
    pub concurrency: usize,
    /// What becomes of the objects' dependents (background deletion by default).
    pub propagation: kube::api::PropagationPolicy,
}

impl Default for DeleteOptions {
    fn default() -> Self {
        Self {
            owner: None,
            concurrency: 4,
            propagation: kube::api::PropagationPolicy::Background,
        }
    }
}

/// How a manifest differs from the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriftKind {
    /// The object does not exist; applying would create it.
    Created,
    /// The object exists and differs at these paths (`spec.replicas`, `data.key`, ...).
    Changed(Vec<String>),
    /// The object matches the manifest.
    Unchanged,
    /// The object is not applied (`ssa: Ignore`, `reconcile: disabled`, or `ssa: IfNotPresent` and it exists).
    Skipped,
}

/// The drift of one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drift {
    /// The object.
    pub object: ObjectRef,
    /// How it differs.
    pub kind: DriftKind,
}

type Resolved = (ApiResource, ApiCapabilities);

/// Applies, diffs, prunes and health-checks sets of objects through one kube [`kube::Client`] under
/// one field manager. Cheap to clone; clones share the discovery cache.
#[derive(Clone)]
pub struct ResourceManager {
    client: kube::Client,
    field_manager: String,
    discovery: Arc<Mutex<HashMap<GroupVersionKind, Resolved>>>,
    health_exprs: HealthExprs,
}

impl std::fmt::Debug for ResourceManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceManager")
            .field("field_manager", &self.field_manager)
            .finish_non_exhaustive()
    }
}

/// One prepared object: its reference, its API and the manifest ready to send.
struct Prepared {
    reference: ObjectRef,
    api: Api<DynamicObject>,
    manifest: DynamicObject,
}

/// What the dry-run of one object decided to write.
enum Plan {
    /// Nothing to write: skipped or unchanged.
    Done(ChangeSetEntry),
    /// Apply the manifest; the action it will be recorded under.
    Write(Prepared, Action),
    /// Delete the object and apply it again (an immutable field changed, with force).
    Recreate(Prepared),
}

/// A dry-run error as Flux words it: `Kind/ns/name: dry-run failed: <why>`.
fn dry_run_failed(mut error: ObjectError) -> ObjectError {
    error.message = format!("dry-run failed: {}", error.message);
    error
}

impl ResourceManager {
    /// A manager applying as `field_manager` (Flux: `kustomize-controller`).
    pub fn new(client: kube::Client, field_manager: impl Into<String>) -> Self {
        Self {
            client,
            field_manager: field_manager.into(),
            discovery: Arc::default(),
            health_exprs: HealthExprs::default(),
        }
    }

    /// This manager judging health by `exprs` (`spec.healthCheckExprs`) for the kinds they
    /// match, before the built-in rules; clones share the discovery cache.
    #[must_use]
    pub fn with_health_exprs(&self, exprs: HealthExprs) -> Self {
        Self {
            health_exprs: exprs,
            ..self.clone()
        }
    }

    /// The field manager name.
    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    /// The client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Forgets every discovered kind, so that the next use of each asks the server again.
    pub fn refresh_discovery(&self) {
        self.discovery
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }

    /// Resolves a kind through the cache, asking the server on a miss.
    async fn resolve(&self, reference: &ObjectRef) -> Result<Resolved, ObjectError> {
        let gvk = reference.gvk();
        if let Some(found) = self
            .discovery
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&gvk)
        {
            return Ok(found.clone());
        }
        let resolved = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|e| {
                let message = if is_not_found(&e) {
                    format!(
                        "no matches for kind {:?} in version {:?}{}",
                        reference.kind,
                        reference.api_version(),
                        crate::unserved::migrate_hint(&gvk.group, &gvk.version, &gvk.kind)
                            .unwrap_or_default()
                    )
                } else {
                    format!(
                        "discovery of {} failed: {}",
                        reference.api_version(),
                        api_message(&e)
                    )
                };
                ObjectError::new(reference.to_string(), message)
            })?;
        self.discovery
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(gvk, resolved.clone());
        Ok(resolved)
    }

    /// The API of a reference, with the namespace fixed up for the kind's scope.
    async fn api_for(
        &self,
        reference: &mut ObjectRef,
        default_namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>, ObjectError> {
        let (resource, capabilities) = self.resolve(reference).await?;
        Ok(match capabilities.scope {
            Scope::Cluster => {
                reference.namespace.clear();
                Api::all_with(self.client.clone(), &resource)
            }
            Scope::Namespaced => {
                if reference.namespace.is_empty() {
                    match default_namespace {
                        Some(ns) => ns.clone_into(&mut reference.namespace),
                        None => {
                            return Err(ObjectError::new(reference.to_string(), NO_NAMESPACE));
                        }
                    }
                }
                Api::namespaced_with(self.client.clone(), &reference.namespace, &resource)
            }
        })
    }

    async fn prepare(
        &self,
        object: &DynamicObject,
        options: &ApplyOptions,
    ) -> Result<Prepared, ObjectError> {
        let mut reference = ObjectRef::from_object(object)?;
        let api = self
            .api_for(&mut reference, options.default_namespace.as_deref())
            .await?;
        let mut manifest = object.clone();
        manifest.metadata.namespace =
            (!reference.namespace.is_empty()).then(|| reference.namespace.clone());
        // Fields the server owns must not be sent with an apply.
        manifest.metadata.resource_version = None;
        manifest.metadata.managed_fields = None;
        manifest.metadata.uid = None;
        manifest.metadata.creation_timestamp = None;
        Ok(Prepared {
            reference,
            api,
            manifest,
        })
    }

    fn apply_params(&self) -> PatchParams {
        PatchParams::apply(&self.field_manager).force()
    }

    /// Applies `objects` in stages and returns what changed.
    ///
    /// Stage 1 holds CustomResourceDefinitions and Namespaces; the engine then waits until those
    /// CRDs are Established (bounded by `options.wait_timeout`) and refreshes discovery. Stage 2
    /// holds `*Class` kinds, stage 3 everything else. As Flux's `ApplyAllStaged`, a stage is
    /// all or nothing at the dry-run: every object of the stage is dry-run first (up to
    /// `options.concurrency` at once) and, when any dry-run fails, none of the stage is written
    /// and the apply ends with [`Error::Partial`] naming each failed object (`Kind/ns/name:
    /// dry-run failed: ...`) and carrying what earlier stages applied. Otherwise the objects that
    /// differ are written; a write that still fails also ends in [`Error::Partial`].
    pub async fn apply_all_staged(
        &self,
        objects: &[DynamicObject],
        options: &ApplyOptions,
    ) -> Result<ChangeSet, Error> {
        let mut stages: [Vec<&DynamicObject>; 3] = Default::default();
        for object in objects {
            let stage = match ObjectRef::from_object(object) {
                Ok(r) if r.is_cluster_definition() => 0,
                Ok(r) if r.is_class() => 1,
                _ => 2,
            };
            stages[stage].push(object);
        }
        let mut changeset = ChangeSet::default();
        for (index, stage) in stages.iter().enumerate() {
            if stage.is_empty() {
                continue;
            }
            let (applied, errors) = self.apply_set(stage, options).await;
            changeset.extend(applied);
            if !errors.is_empty() {
                return Err(Error::Partial {
                    changeset: Box::new(changeset),
                    errors,
                });
            }
            if index == 0 {
                let crds: Vec<ObjectRef> = changeset
                    .entries
                    .iter()
                    .filter(|e| e.object.is_crd())
                    .map(|e| e.object.clone())
                    .collect();
                if !crds.is_empty() {
                    self.wait_established(&crds, options.wait_timeout).await?;
                    self.refresh_discovery();
                }
            }
        }
        Ok(changeset)
    }

    /// The references `objects` will be applied under: namespaces fixed up for each kind's
    /// scope (cluster-scoped kinds lose theirs, namespaced ones without one get
    /// `options.default_namespace`), as [`apply_all_staged`](Self::apply_all_staged) records
    /// them in its change set. A kind not known yet (its CRD is in the same apply) keeps the
    /// namespace written; objects that cannot be applied at all (no kind or name) are left out.
    ///
    /// Recording these before applying lets an owner name every object an interrupted apply
    /// may have written.
    pub async fn references(
        &self,
        objects: &[DynamicObject],
        options: &ApplyOptions,
    ) -> Vec<ObjectRef> {
        let mut references = Vec::with_capacity(objects.len());
        for object in objects {
            let Ok(mut reference) = ObjectRef::from_object(object) else {
                continue;
            };
            let mut resolved = reference.clone();
            if self
                .api_for(&mut resolved, options.default_namespace.as_deref())
                .await
                .is_ok()
            {
                reference = resolved;
            } else if reference.namespace.is_empty()
                && let Some(namespace) = &options.default_namespace
            {
                namespace.clone_into(&mut reference.namespace);
            }
            references.push(reference);
        }
        references
    }

    /// Applies one stage: dry-runs every object, and writes only when every dry-run passed.
    /// Returns what was written (nothing when a dry-run failed) and the per-object errors.
    async fn apply_set(
        &self,
        objects: &[&DynamicObject],
        options: &ApplyOptions,
    ) -> (ChangeSet, Vec<ObjectError>) {
        // Futures are built before streaming so no closure over borrowed items is held across an
        // await: that keeps the returned future provably `Send` for callers that box it.
        let pending: Vec<_> = objects
            .iter()
            .map(|object| self.plan_one(object, options))
            .collect();
        let results: Vec<Result<Plan, ObjectError>> = stream::iter(pending)
            .buffered(options.concurrency.max(1))
            .collect()
            .await;
        let mut plans = Vec::with_capacity(results.len());
        let mut errors = Vec::new();
        for result in results {
            match result {
                Ok(plan) => plans.push(plan),
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return (ChangeSet::default(), errors);
        }
        let pending: Vec<_> = plans
            .into_iter()
            .map(|plan| self.write_one(plan, options))
            .collect();
        let results: Vec<Result<ChangeSetEntry, ObjectError>> = stream::iter(pending)
            .buffered(options.concurrency.max(1))
            .collect()
            .await;
        let mut changeset = ChangeSet::default();
        for result in results {
            match result {
                Ok(entry) => changeset.entries.push(entry),
                Err(e) => errors.push(e),
            }
        }
        (changeset, errors)
    }

    /// Applies one object: dry-run first, then a real apply only when the result differs from the
    /// live object.
    pub async fn apply_one(
        &self,
        object: &DynamicObject,
        options: &ApplyOptions,
    ) -> Result<ChangeSetEntry, ObjectError> {
        let plan = self.plan_one(object, options).await?;
        self.write_one(plan, options).await
    }

    /// Dry-runs one object and decides what to write, writing nothing. Errors read
    /// `dry-run failed: <why>` (an immutable-field change without force keeps its own message).
    async fn plan_one(
        &self,
        object: &DynamicObject,
        options: &ApplyOptions,
    ) -> Result<Plan, ObjectError> {
        let annotations = object.metadata.annotations.as_ref();
        let mode = SsaMode::of(annotations);
        if mode == SsaMode::Ignore || annotation_is(annotations, RECONCILE_ANNOTATION, DISABLED) {
            let mut reference = ObjectRef::from_object(object)?;
            if reference.namespace.is_empty()
                && let Some(ns) = &options.default_namespace
            {
                ns.clone_into(&mut reference.namespace);
            }
            return Ok(Plan::Done(ChangeSetEntry {
                object: reference,
                action: Action::Skipped,
            }));
        }
        let prepared = self
            .prepare(object, options)
            .await
            .map_err(dry_run_failed)?;
        let fail = |message: String| {
            dry_run_failed(ObjectError::new(prepared.reference.to_string(), message))
        };
        let name = &prepared.reference.name;
        let live = prepared
            .api
            .get_opt(name)
            .await
            .map_err(|e| fail(api_message(&e)))?;
        if mode == SsaMode::IfNotPresent && live.is_some() {
            return Ok(Plan::Done(ChangeSetEntry {
                object: prepared.reference,
                action: Action::Skipped,
            }));
        }
        let dry_run = match prepared
            .api
            .patch(
                name,
                &self.apply_params().dry_run(),
                &Patch::Apply(&prepared.manifest),
            )
            .await
        {
            Ok(result) => result,
            Err(e) if is_immutable(&e) => {
                let force = options.force || annotation_is(annotations, FORCE_ANNOTATION, ENABLED);
                if !force {
                    return Err(ObjectError {
                        object: prepared.reference.to_string(),
                        message: format!(
                            "immutable field changed (set force or annotate {FORCE_ANNOTATION}: {ENABLED} to recreate): {}",
                            api_message(&e)
                        ),
                        immutable: true,
                    });
                }
                return Ok(Plan::Recreate(prepared));
            }
            Err(e) => return Err(fail(api_message(&e))),
        };
        let action = match &live {
            None => Action::Created,
            Some(live) => {
                let desired = to_value(&dry_run);
                if changed_paths(&desired, &to_value(live)).is_empty() {
                    return Ok(Plan::Done(ChangeSetEntry {
                        object: prepared.reference,
                        action: Action::Unchanged,
                    }));
                }
                Action::Configured
            }
        };
        Ok(Plan::Write(prepared, action))
    }

    /// Writes what [`plan_one`](Self::plan_one) decided.
    async fn write_one(
        &self,
        plan: Plan,
        options: &ApplyOptions,
    ) -> Result<ChangeSetEntry, ObjectError> {
        match plan {
            Plan::Done(entry) => Ok(entry),
            Plan::Recreate(Prepared {
                reference,
                api,
                manifest,
            }) => {
                self.recreate(&api, &reference, &manifest, options.wait_timeout)
                    .await?;
                Ok(ChangeSetEntry {
                    object: reference,
                    action: Action::Created,
                })
            }
            Plan::Write(
                Prepared {
                    reference,
                    api,
                    manifest,
                },
                action,
            ) => {
                api.patch(
                    &reference.name,
                    &self.apply_params(),
                    &Patch::Apply(&manifest),
                )
                .await
                .map_err(|e| ObjectError::new(reference.to_string(), api_message(&e)))?;
                tracing::debug!(object = %reference, %action, "applied");
                Ok(ChangeSetEntry {
                    object: reference,
                    action,
                })
            }
        }
    }

    /// Deletes an object, waits until it is gone and applies the manifest again.
    async fn recreate(
        &self,
        api: &Api<DynamicObject>,
        reference: &ObjectRef,
        manifest: &DynamicObject,
        timeout: Duration,
    ) -> Result<(), ObjectError> {
        let fail = |message: String| ObjectError::new(reference.to_string(), message);
        match api
            .delete(&reference.name, &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(fail(format!("delete for recreate: {}", api_message(&e)))),
        }
        let start = Instant::now();
        while api
            .get_opt(&reference.name)
            .await
            .map_err(|e| fail(api_message(&e)))?
            .is_some()
        {
            if start.elapsed() > timeout {
                return Err(fail(format!(
                    "timed out after {timeout:?} waiting for the old object to be deleted"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        api.patch(
            &reference.name,
            &self.apply_params(),
            &Patch::Apply(manifest),
        )
        .await
        .map_err(|e| fail(format!("recreate: {}", api_message(&e))))?;
        tracing::info!(object = %reference, "recreated after an immutable-field change");
        Ok(())
    }

    /// Waits until every CRD in `crds` reports `Established=True`.
    async fn wait_established(&self, crds: &[ObjectRef], timeout: Duration) -> Result<(), Error> {
        let start = Instant::now();
        loop {
            let pending: Vec<String> = self
                .check_health(crds)
                .await
                .into_iter()
                .filter(|r| r.status != Status::Current)
                .map(|r| r.object.to_string())
                .collect();
            if pending.is_empty() {
                return Ok(());
            }
            if start.elapsed() > timeout {
                return Err(Error::CrdTimeout { timeout, pending });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Compares `objects` with the cluster by server-side dry-run apply, writing nothing.
    ///
    /// Returns one [`Drift`] per object in input order; per-object failures end in
    /// [`Error::Diff`] carrying the drifts that were computed.
    pub async fn diff(
        &self,
        objects: &[DynamicObject],
        options: &ApplyOptions,
    ) -> Result<Vec<Drift>, Error> {
        let comparisons = self.compare(objects, options).await?;
        Ok(comparisons.into_iter().map(|c| c.drift).collect())
    }

    /// [`diff`](Self::diff), keeping with each drift the normalised live object and dry-run
    /// result it was computed from. Each object costs at most one GET and one dry-run request
    /// (its kind is resolved through the manager's discovery cache).
    pub async fn compare(
        &self,
        objects: &[DynamicObject],
        options: &ApplyOptions,
    ) -> Result<Vec<Comparison>, Error> {
        let pending: Vec<_> = objects
            .iter()
            .map(|object| self.compare_one(object, options))
            .collect();
        let results: Vec<Result<Comparison, ObjectError>> = stream::iter(pending)
            .buffered(options.concurrency.max(1))
            .collect()
            .await;
        let mut comparisons = Vec::new();
        let mut errors = Vec::new();
        for result in results {
            match result {
                Ok(c) => comparisons.push(c),
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(comparisons)
        } else {
            let drifts = comparisons.into_iter().map(|c| c.drift).collect();
            Err(Error::Diff { drifts, errors })
        }
    }

    async fn compare_one(
        &self,
        object: &DynamicObject,
        options: &ApplyOptions,
    ) -> Result<Comparison, ObjectError> {
        let only = |object: ObjectRef, kind: DriftKind, live: Option<Value>| Comparison {
            drift: Drift { object, kind },
            live,
            dry_run: None,
        };
        let annotations = object.metadata.annotations.as_ref();
        let mode = SsaMode::of(annotations);
        if mode == SsaMode::Ignore || annotation_is(annotations, RECONCILE_ANNOTATION, DISABLED) {
            return Ok(only(
                ObjectRef::from_object(object)?,
                DriftKind::Skipped,
                None,
            ));
        }
        let Prepared {
            reference,
            api,
            manifest,
        } = self.prepare(object, options).await?;
        let fail = |message: String| ObjectError::new(reference.to_string(), message);
        let live = api
            .get_opt(&reference.name)
            .await
            .map_err(|e| fail(api_message(&e)))?;
        let Some(live) = live else {
            return Ok(only(reference, DriftKind::Created, None));
        };
        let live = normalize(&to_value(&live));
        if mode == SsaMode::IfNotPresent {
            return Ok(only(reference, DriftKind::Skipped, Some(live)));
        }
        let dry_run = api
            .patch(
                &reference.name,
                &self.apply_params().dry_run(),
                &Patch::Apply(&manifest),
            )
            .await
            .map_err(|e| fail(api_message(&e)))?;
        let dry_run = normalize(&to_value(&dry_run));
        let paths = changed_paths(&dry_run, &live);
        Ok(Comparison {
            drift: Drift {
                object: reference,
                kind: if paths.is_empty() {
                    DriftKind::Unchanged
                } else {
                    DriftKind::Changed(paths)
                },
            },
            live: Some(live),
            dry_run: Some(dry_run),
        })
    }

    /// Deletes `objects` (stale inventory entries) with `options.propagation` (background by
    /// default).
    ///
    /// Objects annotated `kustomize.toolkit.fluxcd.io/prune: disabled` or `reconcile: disabled`,
    /// and, when `options.owner` is set, objects not labelled with that owner, are skipped.
    /// Objects already gone (or whose kind no longer exists) are left out of the change set.
    /// Namespaces and then CRDs are deleted last. Per-object failures end in [`Error::Partial`].
    pub async fn delete_all(
        &self,
        objects: &[ObjectRef],
        options: &DeleteOptions,
    ) -> Result<ChangeSet, Error> {
        let rank = |o: &ObjectRef| {
            if o.is_crd() {
                2
            } else {
                u8::from(o.is_namespace())
            }
        };
        let mut changeset = ChangeSet::default();
        let mut errors = Vec::new();
        for group in [0, 1, 2] {
            let pending: Vec<_> = objects
                .iter()
                .filter(|o| rank(o) == group)
                .map(|object| self.delete_one(object, options))
                .collect();
            let results: Vec<Result<Option<ChangeSetEntry>, ObjectError>> = stream::iter(pending)
                .buffered(options.concurrency.max(1))
                .collect()
                .await;
            for result in results {
                match result {
                    Ok(Some(entry)) => changeset.entries.push(entry),
                    Ok(None) => {}
                    Err(e) => errors.push(e),
                }
            }
        }
        if errors.is_empty() {
            Ok(changeset)
        } else {
            Err(Error::Partial {
                changeset: Box::new(changeset),
                errors,
            })
        }
    }

    async fn delete_one(
        &self,
        object: &ObjectRef,
        options: &DeleteOptions,
    ) -> Result<Option<ChangeSetEntry>, ObjectError> {
        let mut reference = object.clone();
        let api = match self.api_for(&mut reference, None).await {
            Ok(api) => api,
            // The kind is gone (its CRD was deleted), so are its objects.
            Err(e) if e.message.starts_with("no matches for kind") => return Ok(None),
            // A namespaced object without a namespace cannot have been created: an entry
            // recorded before an apply that refused it names nothing.
            Err(e) if e.message == NO_NAMESPACE => return Ok(None),
            Err(e) => return Err(e),
        };
        let fail = |message: String| ObjectError::new(reference.to_string(), message);
        let Some(live) = api
            .get_opt(&reference.name)
            .await
            .map_err(|e| fail(api_message(&e)))?
        else {
            return Ok(None);
        };
        let annotations = live.metadata.annotations.as_ref();
        let owned = options.owner.as_ref().is_none_or(|owner| {
            let labels = live.metadata.labels.as_ref();
            labels.and_then(|l| l.get(OWNER_NAME_LABEL)) == Some(&owner.name)
                && labels.and_then(|l| l.get(OWNER_NAMESPACE_LABEL)) == Some(&owner.namespace)
        });
        if !owned
            || annotation_is(annotations, PRUNE_ANNOTATION, DISABLED)
            || annotation_is(annotations, RECONCILE_ANNOTATION, DISABLED)
        {
            return Ok(Some(ChangeSetEntry {
                object: reference,
                action: Action::Skipped,
            }));
        }
        let params = DeleteParams {
            propagation_policy: Some(options.propagation.clone()),
            ..DeleteParams::default()
        };
        match api.delete(&reference.name, &params).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(fail(api_message(&e))),
        }
        tracing::debug!(object = %reference, "deleted");
        Ok(Some(ChangeSetEntry {
            object: reference,
            action: Action::Deleted,
        }))
    }

    /// The kstatus health of each object, read from the cluster now.
    pub async fn check_health(&self, objects: &[ObjectRef]) -> Vec<HealthResult> {
        let pending: Vec<_> = objects
            .iter()
            .map(|object| self.health_one(object))
            .collect();
        stream::iter(pending).buffered(4).collect().await
    }

    async fn health_one(&self, object: &ObjectRef) -> HealthResult {
        let mut reference = object.clone();
        let result = |reference: ObjectRef, status, message: String| HealthResult {
            object: reference,
            status,
            message,
        };
        let api = match self.api_for(&mut reference, None).await {
            Ok(api) => api,
            Err(e) => return result(object.clone(), Status::Unknown, e.message),
        };
        match api.get_opt(&reference.name).await {
            Ok(Some(live)) => {
                let (status, message) = health::compute_with(&to_value(&live), &self.health_exprs);
                result(reference, status, message)
            }
            Ok(None) => result(reference, Status::NotFound, "object not found".to_owned()),
            Err(e) => result(reference, Status::Unknown, api_message(&e)),
        }
    }

    /// Polls the health of `objects` every `poll` until all are Current (returning their
    /// results), any is Failed ([`Error::HealthFailed`], at once), or `timeout` passes
    /// ([`Error::HealthTimeout`], listing the objects not Current with their reasons).
    pub async fn wait_for(
        &self,
        objects: &[ObjectRef],
        timeout: Duration,
        poll: Duration,
    ) -> Result<Vec<HealthResult>, Error> {
        let start = Instant::now();
        loop {
            let results = self.check_health(objects).await;
            let failed: Vec<HealthResult> = results
                .iter()
                .filter(|r| r.status == Status::Failed)
                .cloned()
                .collect();
            if !failed.is_empty() {
                return Err(Error::HealthFailed { failed });
            }
            if results.iter().all(|r| r.status == Status::Current) {
                return Ok(results);
            }
            if start.elapsed() >= timeout {
                let pending = results
                    .into_iter()
                    .filter(|r| r.status != Status::Current)
                    .collect();
                return Err(Error::HealthTimeout { timeout, pending });
            }
            tokio::time::sleep(poll.min(timeout.saturating_sub(start.elapsed()))).await;
        }
    }
}

fn to_value(object: &DynamicObject) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}
