//! Helm hooks run as Helm runs them: for one event, in ascending `helm.sh/hook-weight` (then
//! name) order, each created after deleting the previous copy (the default
//! `before-hook-creation` policy), awaited when it is a Job (complete or failed) or a Pod
//! (`Succeeded` or `Failed`); once all succeeded, those with `hook-succeeded` are deleted
//! (last first); when one fails, it is deleted with `hook-failed` and the earlier ones with
//! `hook-succeeded`. Each run is recorded in the release record's hook (`last_run`: started,
//! completed, phase — `Running` while it runs, as Helm records it).
//!
//! # Expected flow
//! [`step`] never waits: it starts hooks and takes one look at the running one, and returns
//! [`HookProgress::Running`] with the position of the hook still running (or whose previous
//! copy is still being deleted). The caller records the release (the hook's `last_run` phase
//! `Running`), frees the worker and calls [`step`] again later from that position with
//! `resuming`, so a hook Job that runs for minutes holds no worker. [`run`] is the same loop
//! polling in place, for the hooks of the uninstall of a release target change.
//!
//! # Guarantees
//! - Positions index [`ordered`] (the hooks of the event, or the caller's selection of them),
//!   so a resumed pass continues with the same hook and then the rest in weight order.
//! - The deadline is the caller's (the action's start plus its timeout): a hook still running
//!   when it passes fails with Helm's `timed out waiting for the condition`.

use std::time::{Duration, Instant};

use capstan_apply::{ApplyOptions, ObjectRef, ResourceManager, Status};
use capstan_helm::output::HookEvent;
use capstan_helm::release::{Hook, HookExecution, HookPhase};
use kube::api::DynamicObject;

/// Helm's delete policy applied when a hook has none.
pub const BEFORE_HOOK_CREATION: &str = "before-hook-creation";
/// Delete the hook once it succeeded.
pub const HOOK_SUCCEEDED: &str = "hook-succeeded";
/// Delete the hook once it failed.
pub const HOOK_FAILED: &str = "hook-failed";

/// A failed hook.
#[derive(Debug, thiserror::Error)]
#[error("{event} hook {name} failed: {reason}")]
pub struct HookError {
    /// The event (`pre-install`, ...).
    pub event: String,
    /// `Kind/namespace/name` of the hook.
    pub name: String,
    /// Why.
    pub reason: String,
}

/// Where the hooks of an event stand after a [`step`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookProgress {
    /// Every hook ran and succeeded.
    Done,
    /// The hook at this position is running (or its previous copy is being deleted): look
    /// again later from there, resuming.
    Running(usize),
}

/// The indexes of `hooks` running on `event`, in Helm's order (weight, then name).
pub fn ordered(hooks: &[Hook], event: HookEvent) -> Vec<usize> {
    let mut selected: Vec<usize> = (0..hooks.len())
        .filter(|&i| hooks[i].events.contains(&event))
        .collect();
    selected.sort_by(|&a, &b| {
        hooks[a]
            .weight
            .cmp(&hooks[b].weight)
            .then_with(|| hooks[a].name.cmp(&hooks[b].name))
    });
    selected
}

/// The hooks of one event as one action runs them.
#[derive(Clone, Copy, Debug)]
pub struct Run<'a> {
    /// The apply engine of the target cluster.
    pub manager: &'a ResourceManager,
    /// The event (`pre-install`, ...).
    pub event: HookEvent,
    /// The indexes of the hooks that run, in order ([`ordered`], or a selection of it).
    pub order: &'a [usize],
    /// The release namespace (of hooks that name none).
    pub namespace: &'a str,
    /// When a hook still running fails.
    pub deadline: Instant,
}

/// Runs the hooks of `run` from position `from`, without waiting (see the module docs). With
/// `resuming`, the hook at `from` was started by an earlier call when its `last_run` says
/// `Running`: it is looked at rather than created again.
///
/// # Errors
/// The first hook that cannot be created, fails, or is still running at the deadline.
pub async fn step(
    run: &Run<'_>,
    hooks: &mut [Hook],
    from: usize,
    resuming: bool,
) -> Result<HookProgress, HookError> {
    let Run {
        manager,
        event,
        order,
        namespace,
        deadline,
    } = *run;
    let options = ApplyOptions {
        default_namespace: Some(namespace.to_owned()),
        ..ApplyOptions::default()
    };
    let mut resuming = resuming;
    for (position, &index) in order.iter().enumerate().skip(from) {
        let fail = |name: &str, reason: String| HookError {
            event: event.to_string(),
            name: name.to_owned(),
            reason,
        };
        let hook = &mut hooks[index];
        let object = parse(&hook.manifest).map_err(|reason| fail(&hook.name, reason))?;
        let reference = manager
            .references(std::slice::from_ref(&object), &options)
            .await
            .into_iter()
            .next()
            .ok_or_else(|| fail(&hook.name, "not a Kubernetes object".to_owned()))?;
        let display = reference.to_string();
        let started = std::mem::take(&mut resuming) && hook.last_run.phase == HookPhase::Running;
        if !started {
            hook.last_run = HookExecution::default();
            if hook.delete_policies.is_empty()
                || hook
                    .delete_policies
                    .iter()
                    .any(|p| p == BEFORE_HOOK_CREATION)
            {
                delete(manager, &reference)
                    .await
                    .map_err(|reason| fail(&display, reason))?;
                if !gone(manager, &reference).await {
                    if Instant::now() >= deadline {
                        return Err(fail(
                            &display,
                            "timed out waiting for the previous hook object to be deleted"
                                .to_owned(),
                        ));
                    }
                    return Ok(HookProgress::Running(position));
                }
            }
            hook.last_run = HookExecution {
                started_at: Some(jiff::Timestamp::now()),
                completed_at: None,
                phase: HookPhase::Running,
            };
            if let Err(error) = manager
                .apply_all_staged(std::slice::from_ref(&object), &options)
                .await
            {
                let reason = capstan_source::redact::error_chain(&error);
                finished(hook, false);
                cleanup_failed(manager, hooks, order, position, namespace).await;
                return Err(fail(&display, reason));
            }
            if hook.kind != "Job" && hook.kind != "Pod" {
                finished(hook, true);
                continue;
            }
            // Looked at on the next pass: it has only just been created.
            return Ok(HookProgress::Running(position));
        }
        let result = manager
            .check_health(std::slice::from_ref(&reference))
            .await
            .into_iter()
            .next();
        let outcome = match result {
            None => Ok(()),
            Some(result) => match result.status {
                Status::Current => Ok(()),
                Status::Failed => Err(result.message),
                _ if Instant::now() >= deadline => Err(format!(
                    "timed out waiting for the condition: {}",
                    result.message
                )),
                _ => return Ok(HookProgress::Running(position)),
            },
        };
        if let Err(reason) = outcome {
            finished(hook, false);
            cleanup_failed(manager, hooks, order, position, namespace).await;
            return Err(fail(&display, reason));
        }
        finished(hook, true);
    }
    // All succeeded: `hook-succeeded` deletes them, the last first.
    for &index in order.iter().rev() {
        delete_by_policy(manager, &hooks[index], HOOK_SUCCEEDED, namespace).await;
    }
    Ok(HookProgress::Done)
}

/// Runs the hooks of `event` to the end, polling in place (bounded by `timeout`): for the
/// uninstall of a release target change.
///
/// # Errors
/// As [`step`].
pub async fn run(
    manager: &ResourceManager,
    hooks: &mut [Hook],
    event: HookEvent,
    namespace: &str,
    timeout: Duration,
) -> Result<(), HookError> {
    let order = ordered(hooks, event);
    let run = Run {
        manager,
        event,
        order: &order,
        namespace,
        deadline: Instant::now() + timeout,
    };
    let (mut from, mut resuming) = (0, false);
    let mut poll = Duration::from_millis(100);
    loop {
        match step(&run, hooks, from, resuming).await? {
            HookProgress::Done => return Ok(()),
            HookProgress::Running(position) => {
                (from, resuming) = (position, true);
                tokio::time::sleep(poll).await;
                poll = (poll * 2).min(Duration::from_secs(2));
            }
        }
    }
}

fn finished(hook: &mut Hook, succeeded: bool) {
    hook.last_run.completed_at = Some(jiff::Timestamp::now());
    hook.last_run.phase = if succeeded {
        HookPhase::Succeeded
    } else {
        HookPhase::Failed
    };
}

/// After the hook at `position` failed: it is deleted with `hook-failed`, the earlier ones
/// with `hook-succeeded` (as Helm).
async fn cleanup_failed(
    manager: &ResourceManager,
    hooks: &[Hook],
    order: &[usize],
    position: usize,
    namespace: &str,
) {
    delete_by_policy(manager, &hooks[order[position]], HOOK_FAILED, namespace).await;
    for &index in &order[..position] {
        delete_by_policy(manager, &hooks[index], HOOK_SUCCEEDED, namespace).await;
    }
}

/// Deletes `hook` when it has `policy` (never a CRD, as Helm); a failure is logged only.
async fn delete_by_policy(manager: &ResourceManager, hook: &Hook, policy: &str, namespace: &str) {
    if hook.kind == "CustomResourceDefinition" || !hook.delete_policies.iter().any(|p| p == policy)
    {
        return;
    }
    let Ok(object) = parse(&hook.manifest) else {
        return;
    };
    let options = ApplyOptions {
        default_namespace: Some(namespace.to_owned()),
        ..ApplyOptions::default()
    };
    let references = manager
        .references(std::slice::from_ref(&object), &options)
        .await;
    for reference in references {
        if let Err(error) = delete(manager, &reference).await {
            tracing::warn!(hook = %reference, %error, policy, "cannot delete the hook");
        }
    }
}

fn parse(manifest: &str) -> Result<DynamicObject, String> {
    let documents = capstan_kustomize::parse_documents(manifest).map_err(|e| e.to_string())?;
    let first = documents
        .into_iter()
        .find(|d| !d.is_null())
        .ok_or_else(|| "empty hook manifest".to_owned())?;
    serde_json::from_value(first).map_err(|e| e.to_string())
}

async fn delete(manager: &ResourceManager, reference: &ObjectRef) -> Result<(), String> {
    manager
        .delete_all(
            std::slice::from_ref(reference),
            &capstan_apply::DeleteOptions::default(),
        )
        .await
        .map(|_| ())
        .map_err(|e| capstan_source::redact::error_chain(&e))
}

async fn gone(manager: &ResourceManager, reference: &ObjectRef) -> bool {
    manager
        .check_health(std::slice::from_ref(reference))
        .await
        .iter()
        .all(|h| h.status == Status::NotFound)
}
#[cfg(test)]
mod tests {
    use super::*;

    fn hook(name: &str, weight: i64, events: &[HookEvent]) -> Hook {
        Hook {
            name: name.into(),
            kind: "Job".into(),
            path: String::new(),
            manifest: String::new(),
            events: events.to_vec(),
            last_run: HookExecution::default(),
            weight,
            delete_policies: Vec::new(),
            output_log_policies: Vec::new(),
        }
    }

    #[test]
    fn hooks_run_by_weight_then_name_for_their_event() {
        let hooks = [
            hook("c", 5, &[HookEvent::PreInstall]),
            hook("b", -1, &[HookEvent::PreInstall, HookEvent::PreUpgrade]),
            hook("a", 5, &[HookEvent::PreInstall]),
            hook("d", 0, &[HookEvent::PostInstall]),
        ];
        assert_eq!(ordered(&hooks, HookEvent::PreInstall), [1, 2, 0]);
        assert_eq!(ordered(&hooks, HookEvent::PreUpgrade), [1]);
        assert_eq!(ordered(&hooks, HookEvent::PostInstall), [3]);
    }
}
