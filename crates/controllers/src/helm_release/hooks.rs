//! Helm hooks run as Helm runs them: for one event, in ascending `helm.sh/hook-weight` (then
//! name) order, each created (after deleting the previous copy with the default
//! `before-hook-creation` policy), awaited when it is a Job (complete or failed) or a Pod
//! (`Succeeded` or `Failed`), then deleted per `hook-succeeded`/`hook-failed`. Each run is
//! recorded in the release record's hook (`last_run`: started, completed, phase).
//!
//! A hook wait polls while it runs (bounded by the action's timeout): hooks are short jobs,
//! unlike the release's own objects, whose wait never holds a worker.

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

/// Runs the hooks of `event` (see the module docs), recording each run in `hooks`.
///
/// # Errors
/// The first hook that cannot be created, fails, or does not finish within `timeout`.
pub async fn run(
    manager: &ResourceManager,
    hooks: &mut [Hook],
    event: HookEvent,
    namespace: &str,
    timeout: Duration,
) -> Result<(), HookError> {
    let deadline = Instant::now() + timeout;
    for index in ordered(hooks, event) {
        let hook = &mut hooks[index];
        let fail = |name: &str, reason: String| HookError {
            event: event.to_string(),
            name: name.to_owned(),
            reason,
        };
        let object = parse(&hook.manifest).map_err(|reason| fail(&hook.name, reason))?;
        let options = ApplyOptions {
            default_namespace: Some(namespace.to_owned()),
            ..ApplyOptions::default()
        };
        let reference = manager
            .references(std::slice::from_ref(&object), &options)
            .await
            .into_iter()
            .next()
            .ok_or_else(|| fail(&hook.name, "not a Kubernetes object".to_owned()))?;
        let display = reference.to_string();
        if hook.delete_policies.is_empty()
            || hook
                .delete_policies
                .iter()
                .any(|p| p == BEFORE_HOOK_CREATION)
        {
            delete_and_wait(manager, &reference, deadline)
                .await
                .map_err(|reason| fail(&display, reason))?;
        }
        hook.last_run = HookExecution {
            started_at: Some(jiff::Timestamp::now()),
            completed_at: None,
            phase: HookPhase::Running,
        };
        manager
            .apply_all_staged(std::slice::from_ref(&object), &options)
            .await
            .map_err(|e| fail(&display, capstan_source::redact::error_chain(&e)))?;
        let outcome = await_hook(manager, &reference, &hook.kind, deadline).await;
        hook.last_run.completed_at = Some(jiff::Timestamp::now());
        hook.last_run.phase = if outcome.is_ok() {
            HookPhase::Succeeded
        } else {
            HookPhase::Failed
        };
        let policy = if outcome.is_ok() {
            HOOK_SUCCEEDED
        } else {
            HOOK_FAILED
        };
        if hook.delete_policies.iter().any(|p| p == policy) {
            let _ = delete_and_wait(manager, &reference, deadline).await;
        }
        outcome.map_err(|reason| fail(&display, reason))?;
    }
    Ok(())
}

fn parse(manifest: &str) -> Result<DynamicObject, String> {
    let documents = capstan_kustomize::parse_documents(manifest).map_err(|e| e.to_string())?;
    let first = documents
        .into_iter()
        .find(|d| !d.is_null())
        .ok_or_else(|| "empty hook manifest".to_owned())?;
    serde_json::from_value(first).map_err(|e| e.to_string())
}

async fn delete_and_wait(
    manager: &ResourceManager,
    reference: &ObjectRef,
    deadline: Instant,
) -> Result<(), String> {
    manager
        .delete_all(
            std::slice::from_ref(reference),
            &capstan_apply::DeleteOptions::default(),
        )
        .await
        .map_err(|e| capstan_source::redact::error_chain(&e))?;
    loop {
        let health = manager.check_health(std::slice::from_ref(reference)).await;
        if health.iter().all(|h| h.status == Status::NotFound) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err("timed out waiting for the previous hook object to be deleted".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits for a Job or Pod hook to finish; other kinds are done once created.
async fn await_hook(
    manager: &ResourceManager,
    reference: &ObjectRef,
    kind: &str,
    deadline: Instant,
) -> Result<(), String> {
    if kind != "Job" && kind != "Pod" {
        return Ok(());
    }
    let mut poll = Duration::from_millis(100);
    loop {
        let health = manager.check_health(std::slice::from_ref(reference)).await;
        let Some(result) = health.into_iter().next() else {
            return Ok(());
        };
        match result.status {
            Status::Current => return Ok(()),
            Status::Failed => return Err(result.message),
            _ => {}
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "timed out waiting for the condition: {}",
                result.message
            ));
        }
        tokio::time::sleep(poll).await;
        poll = (poll * 2).min(Duration::from_secs(2));
    }
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
