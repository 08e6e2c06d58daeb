//! Helm's uninstall: `pre-delete` hooks, the objects deleted with `uninstall.deletionPropagation`
//! and (unless `uninstall.disableWait`) waited for until gone, `post-delete` hooks, the records
//! `uninstalled` or purged (`uninstall.keepHistory`). A HelmRelease deletion and an uninstall
//! remediation run it one pass at a time ([`DeletionWait::Requeue`]): a running hook or an
//! object still there ends the pass and the next continues from the record (`uninstalling`, its
//! `deleted` time and hook runs).

use std::time::{Duration, Instant};

use capstan_api::HelmRelease;
use capstan_apply::{DeleteOptions, ObjectRef, ResourceManager};
use capstan_helm::output::HookEvent;
use capstan_helm::release::{HookPhase, Release, Status};

use super::{Target, action_timeout, apply_options, deletable_objects, hooks};

/// How an uninstall waits for its objects to be gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::helm_release) enum DeletionWait {
    /// Polls in place, within the uninstall's timeout (an uninstall inside a release action).
    InPlace,
    /// Looks once and says how long to wait before the next pass (the deletion cleanup, which
    /// then requeues rather than hold a worker); the pass after continues the same uninstall.
    Requeue,
}

/// What an uninstall pass left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::helm_release) enum UninstallProgress {
    /// Uninstalled.
    Done,
    /// Deleted objects are still there: look again after this long.
    Waiting(Duration),
}

/// Uninstalls `release` as Helm does: `pre-delete` hooks, the manifest's objects deleted
/// (`uninstall.deletionPropagation`) and, unless `uninstall.disableWait`, waited for until
/// gone, `post-delete` hooks, then the record `uninstalled` (kept with `keepHistory`, else
/// every record deleted). As Helm, a deletion wait or `post-delete` hook that fails still
/// uninstalls, and the errors are returned.
///
/// Waits for hooks and the deletion as `wait` says. A record already `uninstalling` continues
/// that uninstall (its timeout counted from its `deleted` time): hooks from the first not
/// succeeded since, objects deleted again (those gone are skipped) and awaited.
pub(in crate::helm_release) async fn uninstall_with(
    object: &HelmRelease,
    target: &Target,
    mut release: Release,
    wait: DeletionWait,
) -> Result<UninstallProgress, String> {
    let spec = object.spec.uninstall.clone().unwrap_or_default();
    let timeout = action_timeout(object, spec.timeout.as_ref());
    let hooks_enabled = spec.disable_hooks != Some(true);
    let now = jiff::Timestamp::now();
    let began = release
        .info
        .deleted
        .filter(|_| release.status() == Status::Uninstalling);
    let pre_delete_done = began.is_some_and(|began| {
        hooks::ordered(&release.hooks, HookEvent::PreDelete)
            .into_iter()
            .all(|i| {
                let run = &release.hooks[i].last_run;
                run.phase == HookPhase::Succeeded && run.started_at.is_some_and(|t| t >= began)
            })
    });
    let began = began.unwrap_or(now);
    let elapsed = Duration::try_from(now.duration_since(began)).unwrap_or(Duration::ZERO);
    let deadline = Instant::now() + timeout.saturating_sub(elapsed);
    release.set_status(
        Status::Uninstalling,
        "Deletion in progress (or silently failed)",
    );
    release.info.deleted = Some(began);
    if hooks_enabled && !pre_delete_done {
        let ran = run_hooks(
            target,
            &mut release,
            HookEvent::PreDelete,
            wait,
            began,
            deadline,
        );
        match ran.await {
            Ok(None) => {}
            Ok(Some(delay)) => {
                store(target, &release).await?;
                return Ok(UninstallProgress::Waiting(delay));
            }
            Err(error) => {
                // Failed: the next attempt runs the uninstall from the start, with a new
                // timeout, as a retried Helm uninstall does.
                if wait == DeletionWait::Requeue {
                    release.info.deleted = None;
                    store(target, &release).await?;
                }
                return Err(error);
            }
        }
    }
    store(target, &release).await?;
    let mut errors = Vec::new();
    if let Some(delay) =
        delete_objects(target, &release, &spec, wait, deadline, &mut errors).await?
    {
        return Ok(UninstallProgress::Waiting(delay));
    }
    if hooks_enabled {
        match run_hooks(
            target,
            &mut release,
            HookEvent::PostDelete,
            wait,
            began,
            deadline,
        )
        .await
        {
            Ok(None) => {}
            Ok(Some(delay)) => {
                store(target, &release).await?;
                return Ok(UninstallProgress::Waiting(delay));
            }
            Err(error) => errors.push(error),
        }
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
        Ok(UninstallProgress::Done)
    } else {
        Err(format!(
            "uninstallation completed with {} error(s): {}",
            errors.len(),
            errors.join("; ")
        ))
    }
}

async fn store(target: &Target, release: &Release) -> Result<(), String> {
    target
        .storage
        .update(release)
        .await
        .map_err(|e| capstan_source::redact::error_chain(&e))
}

/// Runs the `event` hooks of an uninstall as `wait` says: in place, or (for a deletion) one
/// pass of [`hooks::step`] from where the uninstall that `began` left them (the first hook not
/// succeeded since; looked at again when it is `Running`), `Some(delay)` while one runs.
async fn run_hooks(
    target: &Target,
    release: &mut Release,
    event: HookEvent,
    wait: DeletionWait,
    began: jiff::Timestamp,
    deadline: Instant,
) -> Result<Option<Duration>, String> {
    if wait == DeletionWait::InPlace {
        let timeout = deadline.saturating_duration_since(Instant::now());
        return hooks::run(
            &target.manager,
            &mut release.hooks,
            event,
            &target.namespace,
            timeout,
        )
        .await
        .map(|()| None)
        .map_err(|e| e.to_string());
    }
    let order = hooks::ordered(&release.hooks, event);
    let mut from = order.len();
    let mut resuming = false;
    for (position, &index) in order.iter().enumerate() {
        let run = &release.hooks[index].last_run;
        let ours = run.started_at.is_some_and(|t| t >= began);
        if !(ours && run.phase == HookPhase::Succeeded) {
            (from, resuming) = (position, ours && run.phase == HookPhase::Running);
            break;
        }
    }
    let run = hooks::Run {
        manager: &target.manager,
        event,
        order: &order,
        namespace: &target.namespace,
        deadline,
    };
    match hooks::step(&run, &mut release.hooks, from, resuming).await {
        Ok(hooks::HookProgress::Done) => Ok(None),
        Ok(hooks::HookProgress::Running(_)) => {
            let left = deadline.saturating_duration_since(Instant::now());
            Ok(Some(REQUEUE.min(left)))
        }
        Err(error) => Err(error.to_string()),
    }
}

/// Deletes the objects of `release` and, unless `uninstall.disableWait`, waits for them as
/// `wait` says: `Some(delay)` to look again after that long; a wait that timed out is added to
/// `errors` (the uninstall goes on, as Helm's).
async fn delete_objects(
    target: &Target,
    release: &Release,
    spec: &capstan_api::helm::v2::Uninstall,
    wait: DeletionWait,
    deadline: Instant,
    errors: &mut Vec<String>,
) -> Result<Option<Duration>, String> {
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
    if spec.disable_wait != Some(true) {
        let deleted: Vec<ObjectRef> = deleted
            .entries
            .into_iter()
            .filter(|e| e.action == capstan_apply::Action::Deleted)
            .map(|e| e.object)
            .collect();
        let waited = match wait {
            DeletionWait::InPlace => wait_deleted(&target.manager, &deleted, deadline).await,
            DeletionWait::Requeue => match remaining(&target.manager, &deleted).await {
                gone if gone.is_empty() => Ok(()),
                _ if Instant::now() < deadline => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    return Ok(Some(REQUEUE.min(left)));
                }
                left => Err(timed_out(&left)),
            },
        };
        if let Err(error) = waited {
            errors.push(error);
        }
    }
    Ok(None)
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

/// The delay between two looks of a deletion cleanup waiting for objects to be gone.
const REQUEUE: Duration = Duration::from_secs(2);

/// The objects of `deleted` still there.
async fn remaining(manager: &ResourceManager, deleted: &[ObjectRef]) -> Vec<String> {
    manager
        .check_health(deleted)
        .await
        .into_iter()
        .filter(|h| h.status != capstan_apply::Status::NotFound)
        .map(|h| h.object.to_string())
        .collect()
}

fn timed_out(remaining: &[String]) -> String {
    format!(
        "timed out waiting for the deletion of: {}",
        remaining.join(", ")
    )
}

/// Waits until every object of `deleted` is gone (finalizers done, dependents deleted in the
/// foreground), until `deadline`.
async fn wait_deleted(
    manager: &ResourceManager,
    deleted: &[ObjectRef],
    deadline: Instant,
) -> Result<(), String> {
    let mut poll = Duration::from_millis(100);
    loop {
        let remaining = remaining(manager, deleted).await;
        if remaining.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(timed_out(&remaining));
        }
        tokio::time::sleep(poll.min(deadline.saturating_duration_since(Instant::now()))).await;
        poll = (poll * 2).min(Duration::from_secs(2));
    }
}
