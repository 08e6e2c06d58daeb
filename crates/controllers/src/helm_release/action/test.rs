//! Flux's test action: the release's test hooks (`spec.test.filters`) run without holding a
//! worker, recorded in the release record and the snapshot's `testHooks`, `TestSuccess` set.

use std::time::Instant;

use capstan_api::helm::v2::{ReleaseAction, condition, reason};
use capstan_helm::output::HookEvent;
use capstan_helm::release::Release;
use kube::runtime::events::EventType;

use super::{
    Cx, HookPhaseEnd, Progress, Target, action_timeout, event, hook_key, hook_phase, hooks, set,
    status,
};
use crate::error::ReconcileError;

/// Flux's test filters: excluded names never run; with includes, only those run.
pub(super) fn test_selected(filters: &[capstan_api::helm::v2::TestFilter], name: &str) -> bool {
    let excluded = filters
        .iter()
        .any(|f| f.exclude == Some(true) && f.name == name);
    let mut includes = filters
        .iter()
        .filter(|f| f.exclude != Some(true))
        .peekable();
    !excluded && (includes.peek().is_none() || includes.any(|f| f.name == name))
}

/// Runs the test hooks of the last release (Flux's test action) and records them.
pub(super) async fn test(cx: &mut Cx, target: &Target) -> Result<Progress, ReconcileError> {
    let Some(release) = target.last().await? else {
        return Ok(Progress::Continue);
    };
    let spec = cx.object.spec.test.clone().unwrap_or_default();
    let deadline = Instant::now() + action_timeout(&cx.object, spec.timeout.as_ref());
    Box::pin(test_from(cx, target, release, 0, deadline)).await
}

/// The test hooks of `release` from `from` (resuming the one there when `from > 0` or a wait
/// was in flight), then the result recorded.
pub(super) async fn test_from(
    cx: &mut Cx,
    target: &Target,
    mut release: Release,
    from: usize,
    deadline: Instant,
) -> Result<Progress, ReconcileError> {
    let spec = cx.object.spec.test.clone().unwrap_or_default();
    let order: Vec<usize> = hooks::ordered(&release.hooks, HookEvent::Test)
        .into_iter()
        .filter(|&i| test_selected(&spec.filters, &release.hooks[i].name))
        .collect();
    let resuming = cx
        .wait_in_flight(&hook_key(&release, HookEvent::Test, from))
        .is_some();
    let result = match Box::pin(hook_phase(
        cx,
        target,
        &mut release,
        HookEvent::Test,
        &order,
        from,
        resuming,
        deadline,
    ))
    .await?
    {
        HookPhaseEnd::Pending(outcome) => return Ok(Progress::Pending(outcome)),
        HookPhaseEnd::Done => Ok(()),
        HookPhaseEnd::Failed(error) => Err(error),
    };
    target.update(&release).await?;
    if let Some(first) = cx.status.history.first_mut()
        && first.version == release.version
    {
        // Tested, even when no test hook was selected (an empty map, as Flux records it).
        first.test_hooks = Some(status::test_hooks(&release));
    }
    let (full, chart) = (
        status::full_name(&release),
        status::versioned_chart(&release),
    );
    match result {
        Ok(()) => {
            let count = order.len();
            let hooks = if count == 0 {
                "no test hooks".to_owned()
            } else {
                format!(
                    "{count} test hook{} completed successfully",
                    if count == 1 { "" } else { "s" }
                )
            };
            let message =
                format!("Helm test succeeded for release {full} with chart {chart}: {hooks}");
            set(
                cx,
                condition::TEST_SUCCESS,
                true,
                reason::TEST_SUCCEEDED,
                &message,
            );
            event(cx, EventType::Normal, reason::TEST_SUCCEEDED, &message).await;
            Ok(Progress::Continue)
        }
        Err(error) => {
            let message =
                format!("Helm test failed for release {full} with chart {chart}: {error}");
            set(
                cx,
                condition::TEST_SUCCESS,
                false,
                reason::TEST_FAILED,
                &message,
            );
            event(cx, EventType::Warning, reason::TEST_FAILED, &message).await;
            if spec.ignore_failures == Some(true) {
                return Ok(Progress::Continue);
            }
            match cx.status.last_attempted_release_action {
                Some(ReleaseAction::Install) => {
                    cx.status.install_failures = Some(cx.status.install_failures.unwrap_or(0) + 1);
                }
                _ => {
                    cx.status.upgrade_failures = Some(cx.status.upgrade_failures.unwrap_or(0) + 1);
                }
            }
            Err(ReconcileError::transient(reason::TEST_FAILED, message))
        }
    }
}
