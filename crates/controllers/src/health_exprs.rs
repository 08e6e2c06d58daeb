//! `spec.healthCheckExprs` (of a Kustomization or a HelmRelease), parsed once per reconcile.

use capstan_api::meta::reason;

use crate::error::ReconcileError;

/// Parses a `spec.healthCheckExprs` list: stalled with `InvalidCELExpression` and Flux's
/// terminal-error message when it cannot be used. Called once, at reconcile start (before the
/// source, as Flux); the reconcile keeps the result for every health wait.
pub(crate) fn parse(
    checks: &[capstan_api::meta::CustomHealthCheck],
) -> Result<capstan_apply::HealthExprs, ReconcileError> {
    capstan_apply::HealthExprs::new(checks).map_err(|e| {
        ReconcileError::stalled(
            reason::INVALID_CEL_EXPRESSION,
            format!("Reconciliation failed terminally due to configuration error: {e}"),
        )
        .with_source(e)
    })
}
