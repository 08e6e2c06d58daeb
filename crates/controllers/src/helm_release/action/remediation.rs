//! Remediation of a failed release, as Flux: the retries of the action that failed (install or
//! upgrade), `remediateLastFailure`, and the rollback or uninstall that remediates it; exhausted
//! retries stall the HelmRelease with the last failure's words.

use std::sync::Arc;

use capstan_api::HelmRelease;
use capstan_api::helm::v2::{ReleaseAction, RemediationStrategy, condition, reason};
use capstan_helm::chart::Chart;
use capstan_helm::release::{Release, Status};
use kube::runtime::events::EventType;

use super::uninstall::{DeletionWait, UninstallProgress, uninstall_with};
use super::{
    Cx, Progress, RETRIES_EXCEEDED, Target, action_timeout, event, meta_reason, rollback, set,
    status, upgrade,
};
use crate::error::ReconcileError;
use crate::helm_release::values::Values;
use crate::runtime::StepOutcome;

/// Whether `action` may run again: its retries are not exhausted, or `forceAt` asks for it
/// (the token is then handled); else the HelmRelease stalls ([`exceeded`]).
pub(super) fn allow_retry(
    cx: &mut Cx,
    action: ReleaseAction,
    forced: Option<String>,
) -> Result<(), ReconcileError> {
    if !retries_exhausted(cx, action) {
        return Ok(());
    }
    let Some(token) = forced else {
        return Err(exceeded(cx, action));
    };
    cx.status.last_handled_force_at = Some(token);
    Ok(())
}

/// The failures counted for `action`.
pub(super) fn failure_count(cx: &Cx, action: ReleaseAction) -> i64 {
    match action {
        ReleaseAction::Install => cx.status.install_failures.unwrap_or(0),
        ReleaseAction::Upgrade => cx.status.upgrade_failures.unwrap_or(0),
    }
}

/// `(retries, remediateLastFailure)` of `action`'s remediation (Flux's defaults: 0 retries;
/// an install's last failure is not remediated, an upgrade's is when retries are set).
pub(super) fn remediation_of(object: &HelmRelease, action: ReleaseAction) -> (i64, bool) {
    let spec = &object.spec;
    let remediation = match action {
        ReleaseAction::Install => spec
            .install
            .as_ref()
            .and_then(|i| i.remediation.as_ref())
            .map(|r| (r.retries, r.remediate_last_failure)),
        ReleaseAction::Upgrade => spec
            .upgrade
            .as_ref()
            .and_then(|u| u.remediation.as_ref())
            .map(|r| (r.retries, r.remediate_last_failure)),
    };
    let (retries, last) = remediation.map_or((0, None), |(r, last)| (r.unwrap_or(0), last));
    let default = action == ReleaseAction::Upgrade && retries > 0;
    (retries, last.unwrap_or(default))
}

/// Whether `action` fails under the `RetryOnFailure` strategy (retried after its interval).
fn retry_on_failure(object: &HelmRelease, action: ReleaseAction) -> bool {
    object
        .retry_interval(action == ReleaseAction::Upgrade)
        .ok()
        .flatten()
        .is_some()
}

pub(super) fn retries_exhausted(cx: &Cx, action: ReleaseAction) -> bool {
    // `RetryOnFailure`: the action is retried after its interval, never exhausted.
    if retry_on_failure(&cx.object, action) {
        return false;
    }
    let (retries, _) = remediation_of(&cx.object, action);
    retries >= 0 && failure_count(cx, action) > retries
}

/// The error of exhausted retries: the HelmRelease stalls with the last failure's words.
pub(super) fn exceeded(cx: &Cx, action: ReleaseAction) -> ReconcileError {
    let action = match action {
        ReleaseAction::Install => "install",
        ReleaseAction::Upgrade => "upgrade",
    };
    let conditions = &cx.status.conditions;
    let find = |type_: &str| conditions.iter().find(|c| c.type_ == type_);
    let failed = find(condition::REMEDIATED)
        .filter(|c| c.status == "False")
        .or_else(|| find(condition::RELEASED).filter(|c| c.status == "False"))
        .or_else(|| find(condition::REMEDIATED));
    let attempts =
        failure_count(cx, ReleaseAction::Install) + failure_count(cx, ReleaseAction::Upgrade);
    match failed {
        Some(c) => ReconcileError::stalled(
            c.reason.clone(),
            format!(
                "{} (failed to {action} after {attempts} attempt(s): exceeded maximum retries)",
                c.message
            ),
        ),
        None => ReconcileError::stalled(
            RETRIES_EXCEEDED,
            format!("Failed to {action} after {attempts} attempt(s)"),
        ),
    }
}

pub(super) async fn remediate(
    cx: &mut Cx,
    target: &Target,
    chart: &Arc<Chart>,
    values: &Values,
    forced: Option<String>,
) -> Result<Progress, ReconcileError> {
    let Some(action) = cx.status.last_attempted_release_action else {
        return Box::pin(upgrade(cx, target, chart, values)).await;
    };
    if retry_on_failure(&cx.object, action) {
        return Box::pin(upgrade(cx, target, chart, values)).await;
    }
    if failure_count(cx, action) <= 0 {
        return Box::pin(upgrade(cx, target, chart, values)).await;
    }
    if let Some(token) = forced {
        cx.status.last_handled_force_at = Some(token);
        return Box::pin(upgrade(cx, target, chart, values)).await;
    }
    let (_, remediate_last) = remediation_of(&cx.object, action);
    if retries_exhausted(cx, action) && !remediate_last {
        return Err(exceeded(cx, action));
    }
    let strategy = match action {
        ReleaseAction::Install => RemediationStrategy::Uninstall,
        ReleaseAction::Upgrade => cx
            .object
            .spec
            .upgrade
            .as_ref()
            .and_then(|u| u.remediation.as_ref())
            .map_or(
                RemediationStrategy::Rollback,
                capstan_api::helm::v2::UpgradeRemediation::strategy,
            ),
    };
    let last = target.last().await?.ok_or_else(|| {
        ReconcileError::transient(
            meta_reason::RECONCILIATION_FAILED,
            "release disappeared from storage",
        )
    })?;
    if remediated(cx, &last) {
        // This failure was remediated already; the next action is decided by the retries.
        return Err(exceeded(cx, action));
    }
    match strategy {
        RemediationStrategy::Rollback => {
            let history = target.history().await?;
            let previous = history
                .iter()
                .rev()
                .find(|r| {
                    r.version < last.version
                        && matches!(r.status(), Status::Superseded | Status::Deployed)
                })
                .cloned();
            let Some(previous) = previous else {
                return Err(ReconcileError::stalled(
                    reason::ROLLBACK_FAILED,
                    "cannot remediate failed release: missing target release for rollback",
                ));
            };
            Box::pin(rollback(cx, target, &last, previous)).await
        }
        RemediationStrategy::Uninstall => Box::pin(uninstall_remediation(cx, target, last)).await,
    }
}

/// Flux's uninstall remediation of a failed release; the loop then installs again.
pub(super) async fn uninstall_remediation(
    cx: &mut Cx,
    target: &Target,
    last: Release,
) -> Result<Progress, ReconcileError> {
    let uninstalled = uninstall_with(&cx.object, target, last.clone(), DeletionWait::Requeue);
    let message = match Box::pin(uninstalled).await {
        Ok(UninstallProgress::Waiting(delay)) => {
            // A hook runs or an object is still there: the next pass resumes this uninstall
            // (see `uninstall_key`), the worker freed meanwhile.
            let timeout = uninstall_timeout(&cx.object);
            cx.look(&uninstall_key(&last), timeout, Vec::new);
            return Ok(Progress::Pending(StepOutcome::pending(delay)));
        }
        Ok(UninstallProgress::Done) => uninstall_remediated(cx, &last, None).await,
        Err(error) => {
            let message = uninstall_remediated(cx, &last, Some(error)).await;
            return Err(ReconcileError::transient(reason::UNINSTALL_FAILED, message));
        }
    };
    tracing::info!(%message, "remediated");
    Ok(Progress::Continue)
}

/// Records how the uninstall remediation of `last` ended, succeeded or with `failure`: the
/// `Remediated` condition and an event, in Flux's words; returns the message.
async fn uninstall_remediated(cx: &mut Cx, last: &Release, failure: Option<String>) -> String {
    let (outcome, reason, type_) = match &failure {
        None => (
            "succeeded".to_owned(),
            reason::UNINSTALL_SUCCEEDED,
            EventType::Normal,
        ),
        Some(error) => (
            format!("failed: {error}"),
            reason::UNINSTALL_FAILED,
            EventType::Warning,
        ),
    };
    let message = format!(
        "Helm uninstall remediation for release {} with chart {} {outcome}",
        status::full_name(last),
        status::versioned_chart(last)
    );
    set(
        cx,
        condition::REMEDIATED,
        failure.is_none(),
        reason,
        &message,
    );
    event(cx, type_, reason, &message).await;
    message
}

/// The key of the wait of an uninstall remediation of `release` in flight.
pub(super) fn uninstall_key(release: &Release) -> String {
    format!("{}.v{}|uninstall", release.name, release.version)
}

/// The uninstall's timeout (its own, else `spec.timeout`).
fn uninstall_timeout(object: &HelmRelease) -> std::time::Duration {
    let spec = object.spec.uninstall.clone().unwrap_or_default();
    action_timeout(object, spec.timeout.as_ref())
}

/// Whether `Remediated` already speaks of a remediation after `last` failed.
pub(super) fn remediated(cx: &Cx, last: &Release) -> bool {
    last.info.description.starts_with("Rollback to")
        || cx.status.conditions.iter().any(|c| {
            c.type_ == condition::REMEDIATED
                && c.status == "True"
                && cx
                    .status
                    .history
                    .first()
                    .is_some_and(|s| s.version > last.version)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remediation_defaults_follow_flux() {
        let object: HelmRelease = serde_json::from_value(serde_json::json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "web", "namespace": "apps"},
            "spec": {"interval": "5m", "chartRef": {"kind": "OCIRepository", "name": "c"},
                     "upgrade": {"remediation": {"retries": 2}}},
        }))
        .unwrap();
        assert_eq!(remediation_of(&object, ReleaseAction::Install), (0, false));
        assert_eq!(remediation_of(&object, ReleaseAction::Upgrade), (2, true));
        // An install's last failure stays (for inspection) unless asked otherwise.
        let install = |remediation: serde_json::Value| -> HelmRelease {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                "metadata": {"name": "web", "namespace": "apps"},
                "spec": {"interval": "5m", "chartRef": {"kind": "OCIRepository", "name": "c"},
                         "install": {"remediation": remediation}},
            }))
            .unwrap()
        };
        let retried = install(serde_json::json!({"retries": 3}));
        assert_eq!(remediation_of(&retried, ReleaseAction::Install), (3, false));
        let remediated = install(serde_json::json!({"retries": 3, "remediateLastFailure": true}));
        assert_eq!(
            remediation_of(&remediated, ReleaseAction::Install),
            (3, true)
        );
    }
}
