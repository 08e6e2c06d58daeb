//! Helm's uninstall: `pre-delete` hooks, the objects deleted with `uninstall.deletionPropagation`
//! and (unless `uninstall.disableWait`) waited for until gone, `post-delete` hooks, the records
//! `uninstalled` or purged (`uninstall.keepHistory`).

use std::time::{Duration, Instant};

use capstan_api::HelmRelease;
use capstan_apply::{DeleteOptions, ObjectRef, ResourceManager};
use capstan_helm::output::HookEvent;
use capstan_helm::release::{Release, Status};

use super::{Cx, Target, action_timeout, apply_options, deletable_objects, hooks};

/// Uninstalls `release` as Helm does: `pre-delete` hooks, the manifest's objects deleted
/// (`uninstall.deletionPropagation`) and, unless `uninstall.disableWait`, waited for until
/// gone, `post-delete` hooks, then the record `uninstalled` (kept with `keepHistory`, else
/// every record deleted). As Helm, a deletion wait or `post-delete` hook that fails still
/// uninstalls, and the errors are returned.
pub(super) async fn uninstall(
    cx: &Cx,
    target: &Target,
    release: Release,
    remediation: bool,
) -> Result<(), String> {
    uninstall_with(&cx.object, target, release, remediation).await
}

/// [`uninstall`] without a step context (the deletion cleanup).
pub(in crate::helm_release) async fn uninstall_with(
    object: &HelmRelease,
    target: &Target,
    mut release: Release,
    _remediation: bool,
) -> Result<(), String> {
    let spec = object.spec.uninstall.clone().unwrap_or_default();
    let timeout = action_timeout(object, spec.timeout.as_ref());
    let deadline = Instant::now() + timeout;
    let hooks_enabled = spec.disable_hooks != Some(true);
    release.set_status(
        Status::Uninstalling,
        "Deletion in progress (or silently failed)",
    );
    release.info.deleted = Some(jiff::Timestamp::now());
    if hooks_enabled {
        hooks::run(
            &target.manager,
            &mut release.hooks,
            HookEvent::PreDelete,
            &target.namespace,
            timeout,
        )
        .await
        .map_err(|e| e.to_string())?;
    }
    target
        .storage
        .update(&release)
        .await
        .map_err(|e| capstan_source::redact::error_chain(&e))?;
    let objects = deletable_objects(&release.manifest)?;
    let references = target
        .manager
        .references(&objects, &apply_options(target, false))
        .await;
    let options = DeleteOptions {
        propagation: propagation(spec.deletion_propagation()),
        ..DeleteOptions::default()
    };
    let deleted = target
        .manager
        .delete_all(&references, &options)
        .await
        .map_err(|e| {
            format!(
                "failed to delete release: {}: {}",
                release.name,
                capstan_source::redact::error_chain(&e)
            )
        })?;
    let mut errors = Vec::new();
    if spec.disable_wait != Some(true) {
        let deleted: Vec<ObjectRef> = deleted
            .entries
            .into_iter()
            .filter(|e| e.action == capstan_apply::Action::Deleted)
            .map(|e| e.object)
            .collect();
        if let Err(error) = wait_deleted(&target.manager, &deleted, deadline).await {
            errors.push(error);
        }
    }
    if hooks_enabled
        && let Err(error) = hooks::run(
            &target.manager,
            &mut release.hooks,
            HookEvent::PostDelete,
            &target.namespace,
            deadline.saturating_duration_since(Instant::now()),
        )
        .await
    {
        errors.push(error.to_string());
    }
    release.set_status(Status::Uninstalled, "Uninstallation complete");
    if spec.keep_history == Some(true) {
        target
            .storage
            .update(&release)
            .await
            .map_err(|e| capstan_source::redact::error_chain(&e))?;
    } else {
        target
            .storage
            .uninstall_all(&target.name)
            .await
            .map_err(|e| capstan_source::redact::error_chain(&e))?;
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "uninstallation completed with {} error(s): {}",
            errors.len(),
            errors.join("; ")
        ))
    }
}

/// The deletion propagation of `uninstall.deletionPropagation`.
pub(super) fn propagation(
    policy: capstan_api::helm::v2::DeletionPropagation,
) -> kube::api::PropagationPolicy {
    match policy {
        capstan_api::helm::v2::DeletionPropagation::Background => {
            kube::api::PropagationPolicy::Background
        }
        capstan_api::helm::v2::DeletionPropagation::Foreground => {
            kube::api::PropagationPolicy::Foreground
        }
        capstan_api::helm::v2::DeletionPropagation::Orphan => kube::api::PropagationPolicy::Orphan,
    }
}

/// Waits until every object of `deleted` is gone (finalizers done, dependents deleted in the
/// foreground), until `deadline`.
pub(super) async fn wait_deleted(
    manager: &ResourceManager,
    deleted: &[ObjectRef],
    deadline: Instant,
) -> Result<(), String> {
    let mut poll = Duration::from_millis(100);
    loop {
        let remaining: Vec<String> = manager
            .check_health(deleted)
            .await
            .into_iter()
            .filter(|h| h.status != capstan_apply::Status::NotFound)
            .map(|h| h.object.to_string())
            .collect();
        if remaining.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "timed out waiting for the deletion of: {}",
                remaining.join(", ")
            ));
        }
        tokio::time::sleep(poll.min(deadline.saturating_duration_since(Instant::now()))).await;
        poll = (poll * 2).min(Duration::from_secs(2));
    }
}
