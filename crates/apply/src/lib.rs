//! The apply engine: server-side apply of rendered manifests in stages, drift diff, inventory
//! prune and kstatus health checks, over kube-rs only.
//!
//! It is the library the Kustomization (and HelmRelease) reconcilers call, behaving as Flux's
//! `fluxcd/pkg/ssa` does.
//!
//! ```no_run
//! # async fn demo(client: kube::Client, objects: Vec<kube::api::DynamicObject>,
//! #     old: capstan_api::meta::ResourceInventory) -> Result<(), capstan_apply::Error> {
//! use std::time::Duration;
//! use capstan_apply::{ApplyOptions, DeleteOptions, Inventory, ResourceManager};
//!
//! let manager = ResourceManager::new(client, "kustomize-controller");
//! let changeset = manager.apply_all_staged(&objects, &ApplyOptions::default()).await?;
//! print!("{changeset}");
//! let new = Inventory::from_changeset(&changeset);
//! let stale = Inventory::from_status(&old)?.diff(&new);
//! manager.delete_all(&stale, &DeleteOptions::default()).await?;
//! manager.wait_for(new.objects(), Duration::from_secs(300), Duration::from_secs(2)).await?;
//! # Ok(()) }
//! ```
//!
//! # Expected flow
//! 1. Label the objects with their owner ([`set_owner_labels`]).
//! 2. [`ResourceManager::apply_all_staged`]: CustomResourceDefinitions and Namespaces first, wait
//!    until the CRDs are Established, refresh discovery, then `*Class` kinds, then the rest. Each
//!    object is dry-run applied and compared with the live object; only objects that differ are
//!    applied, so a reconcile that changes nothing writes nothing.
//! 3. Build the new [`Inventory`] from the change set, [`Inventory::diff`] it against the old
//!    one and prune the stale objects with [`ResourceManager::delete_all`].
//! 4. [`ResourceManager::wait_for`] the applied objects to be healthy (kstatus rules).
//!
//! [`ResourceManager::diff`] does step 2's comparison without writing, for report-only drift
//! detection; [`ResourceManager::compare`] also returns the normalised live and dry-run objects
//! of each comparison, for `capstan diff` ([`Comparison::shown`] masks Secret values).
//!
//! # Guarantees
//! - Every write is a server-side apply under the manager's field manager, with `force`, so the
//!   manager takes ownership of every field in the manifest; fields other managers set outside the
//!   manifest are kept.
//! - An object whose dry-run result equals the live object (ignoring `status`, `managedFields`,
//!   `resourceVersion`, `generation`, `uid`, `creationTimestamp`) is not written: its
//!   `resourceVersion` does not move.
//! - Annotation `kustomize.toolkit.fluxcd.io/ssa`: `Override` (default) and `Merge` apply,
//!   `IfNotPresent` only creates, `Ignore` skips. `kustomize.toolkit.fluxcd.io/reconcile:
//!   disabled` skips both apply and prune.
//! - Immutable-field rejections recreate the object (delete, wait until gone, apply) only with
//!   [`ApplyOptions::force`] or the annotation `kustomize.toolkit.fluxcd.io/force: enabled`.
//! - Prune skips `kustomize.toolkit.fluxcd.io/prune: disabled` objects and, when an owner is
//!   given, objects labelled with another owner; it deletes with background propagation and
//!   deletes Namespaces and CRDs last.
//! - Inventory ids are Flux's: `<namespace>_<name>_<group>_<kind>` with `v` the version.
//!
//! # Errors
//! - Every object of a stage is dry-run before any is written (as Flux's `ApplyAllStaged`): a
//!   failed dry-run leaves the whole stage unwritten. Failures come back together as
//!   [`Error::Partial`], which also carries the change set of what earlier stages applied, so a
//!   partial apply is never silent. Each [`ObjectError`] names the object as
//!   `Kind/namespace/name` and carries the API server's message (`dry-run failed: ...` for a
//!   failed dry-run). A stage with failures stops later stages.
//! - [`Error::CrdTimeout`] when CRDs are not Established in time.
//! - [`Error::HealthFailed`] as soon as an object is Failed; [`Error::HealthTimeout`] listing
//!   each object not Current with its reason (`Deployment/default/web: Available: 0/1`).

mod cel;
mod changeset;
mod compare;
mod error;
mod health;
mod impersonate;
mod inventory;
mod manager;
mod mask;
mod object;
mod unserved;

pub use cel::{BoolExpr, HealthExprs, InvalidHealthExpr};
pub use changeset::{Action, ChangeSet, ChangeSetEntry};
pub use compare::{Comparison, changed_paths, normalize};
pub use error::{Error, ObjectError};
pub use health::{HealthResult, Status, compute as compute_health};
pub use impersonate::{
    IMPERSONATE_GROUP, IMPERSONATE_USER, impersonating_client, service_account_user,
};
pub use inventory::Inventory;
pub use manager::{ApplyOptions, DeleteOptions, Drift, DriftKind, Owner, ResourceManager};
pub use mask::{LAST_APPLIED, mask_secret};
pub use object::{
    DISABLED, ENABLED, FORCE_ANNOTATION, OWNER_NAME_LABEL, OWNER_NAMESPACE_LABEL, ObjectRef,
    PRUNE_ANNOTATION, RECONCILE_ANNOTATION, SSA_ANNOTATION, SsaMode, set_owner_labels,
};
