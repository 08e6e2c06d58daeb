//! Drift detection and correction (`spec.driftDetection`), as Flux: the last release's objects
//! compared with the cluster (server-side dry run), the `ignore` rules applied, and with
//! `mode: enabled` only the objects that drifted or are missing applied again (with force,
//! without their ignored fields).

use std::collections::BTreeSet;

use capstan_api::HelmRelease;
use capstan_api::helm::v2::{DriftDetectionMode, condition, reason};
use capstan_apply::{DriftKind, ObjectRef};
use capstan_helm::release::Release;
use kube::runtime::events::EventType;

use super::{
    Cx, Progress, Target, apply_options, event, in_sync, meta_reason, render, set, to_dynamic,
};
use crate::error::ReconcileError;

/// The objects of `last`'s manifest that differ from the cluster (`Kind/namespace/name` with
/// the changed paths), after the `driftDetection.ignore` rules.
pub(super) async fn drift(
    cx: &Cx,
    target: &Target,
    last: &Release,
) -> Result<Vec<(ObjectRef, String)>, ReconcileError> {
    let failed =
        |message: String| ReconcileError::transient(meta_reason::RECONCILIATION_FAILED, message);
    let objects = render::owned_objects(last)
        .and_then(|o| to_dynamic(&o))
        .map_err(|e| failed(format!("cannot read the release manifest: {e}")))?;
    let drifts = target
        .manager
        .diff(&objects, &apply_options(target, false))
        .await
        .map_err(|e| {
            failed(format!(
                "unable to determine cluster state: {}",
                capstan_source::redact::error_chain(&e)
            ))
        })?;
    let rules = ignore_rules(&cx.object);
    let mut found = Vec::new();
    for drift in drifts {
        match drift.kind {
            DriftKind::Created => {
                let message = format!("{} removed", drift.object);
                found.push((drift.object, message));
            }
            DriftKind::Changed(paths) => {
                let kept: Vec<String> = paths
                    .into_iter()
                    .filter(|p| !ignored(&rules, &drift.object, p))
                    .collect();
                if !kept.is_empty() {
                    let message = format!("{} changed ({})", drift.object, kept.join(", "));
                    found.push((drift.object, message));
                }
            }
            DriftKind::Unchanged | DriftKind::Skipped => {}
        }
    }
    Ok(found)
}

/// `spec.driftDetection.mode` (disabled when absent).
pub(super) fn drift_mode(object: &HelmRelease) -> DriftDetectionMode {
    object.spec.drift_detection.as_ref().map_or(
        DriftDetectionMode::Disabled,
        capstan_api::helm::v2::DriftDetection::mode,
    )
}

/// `spec.driftDetection.ignore`.
pub(super) fn ignore_rules(object: &HelmRelease) -> Vec<capstan_api::meta::IgnoreRule> {
    object
        .spec
        .drift_detection
        .as_ref()
        .map(|d| d.ignore.clone())
        .unwrap_or_default()
}

/// Whether an ignore rule covers the dotted `path` of `object` (keys joined with `.`, list
/// indexes in brackets, as the drift engine names them; keys may hold dots themselves, as in
/// `metadata.labels.app.kubernetes.io/version`, so the pointer is joined the same way and
/// compared as a prefix ending at a key boundary).
pub(super) fn ignored(
    rules: &[capstan_api::meta::IgnoreRule],
    object: &ObjectRef,
    path: &str,
) -> bool {
    let path = path.replace('[', ".").replace(']', "");
    rules.iter().any(|rule| {
        selects(rule, object)
            && rule.paths.iter().any(|pointer| {
                let wanted = pointer_tokens(pointer).join(".");
                !wanted.is_empty()
                    && path
                        .strip_prefix(&wanted)
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
            })
    })
}

/// Whether `rule`'s target selects `object` (no target: every object).
pub(super) fn selects(rule: &capstan_api::meta::IgnoreRule, object: &ObjectRef) -> bool {
    rule.target.as_ref().is_none_or(|t| {
        t.kind.as_deref().is_none_or(|k| k == object.kind)
            && t.name.as_deref().is_none_or(|n| n == object.name)
            && t.namespace.as_deref().is_none_or(|n| n == object.namespace)
            && t.group.as_deref().is_none_or(|g| g == object.group)
            && t.version.as_deref().is_none_or(|v| v == object.version)
    })
}

/// The unescaped tokens of a JSON pointer (`~1` is `/`, `~0` is `~`).
pub(super) fn pointer_tokens(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// `object` without the fields the ignore rules selecting it name: the drift correction
/// re-applies only what is not ignored (as Flux, which patches the non-ignored differences).
pub(super) fn without_ignored(
    rules: &[capstan_api::meta::IgnoreRule],
    mut object: serde_json::Value,
    namespace: &str,
) -> serde_json::Value {
    let field = |name: &str| object["metadata"][name].as_str().map(str::to_owned);
    let reference = ObjectRef::new(
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
        &field("namespace").unwrap_or_else(|| namespace.to_owned()),
        &field("name").unwrap_or_default(),
    );
    for rule in rules.iter().filter(|r| selects(r, &reference)) {
        for pointer in &rule.paths {
            let Some((parent, _)) = pointer.rsplit_once('/') else {
                continue;
            };
            let Some(last) = pointer_tokens(pointer).pop() else {
                continue;
            };
            // A list element is left in place (removing it would shift the others).
            if let Some(serde_json::Value::Object(map)) = object.pointer_mut(parent) {
                map.remove(&last);
            }
        }
    }
    object
}

/// A drift: reported, and with `driftDetection.mode: enabled` corrected by applying (with
/// force, without the ignored fields) only the objects that drifted or are missing, as Flux.
pub(super) async fn drifted(
    cx: &mut Cx,
    target: &Target,
    drifted: Vec<(ObjectRef, String)>,
) -> Result<Progress, ReconcileError> {
    let (objects, drifts): (BTreeSet<ObjectRef>, Vec<String>) = drifted.into_iter().unzip();
    let current = cx.status.history.first().cloned();
    let name = current
        .as_ref()
        .map(|c| format!("{}/{}.v{}", c.namespace, c.name, c.version))
        .unwrap_or_default();
    let message = format!(
        "Cluster state of release {name} has drifted from the desired state:\n{}",
        drifts.join("\n")
    );
    let previous = cx
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == condition::DRIFTED)
        .map(|c| c.message.clone());
    set(
        cx,
        condition::DRIFTED,
        true,
        reason::DRIFT_DETECTED,
        &message,
    );
    if previous.as_deref() != Some(message.as_str()) {
        event(cx, EventType::Warning, reason::DRIFT_DETECTED, &message).await;
    }
    let mode = drift_mode(&cx.object);
    if mode != DriftDetectionMode::Enabled {
        // Warn: reported only; the release stays as it is.
        let released = cx
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == condition::RELEASED)
            .cloned();
        if let Some(released) = released.filter(|c| c.status == "True") {
            cx.set_ready_reason(released.reason);
            cx.set_ready_message(released.message);
        }
        return Ok(Progress::Done);
    }
    let Some(last) = target.last().await? else {
        return Ok(Progress::Continue);
    };
    let rules = ignore_rules(&cx.object);
    let manifest = render::owned_objects(&last)
        .and_then(|objects| {
            let kept: Vec<serde_json::Value> = objects
                .into_iter()
                .map(|o| without_ignored(&rules, o, &target.namespace))
                .collect();
            to_dynamic(&kept)
        })
        .map_err(|e| {
            ReconcileError::transient(
                meta_reason::RECONCILIATION_FAILED,
                format!("cannot read the release manifest: {e}"),
            )
        })?;
    let options = apply_options(target, true);
    let mut corrected = Vec::new();
    for object in manifest {
        let reference = target
            .manager
            .references(std::slice::from_ref(&object), &options)
            .await;
        if reference.first().is_some_and(|r| objects.contains(r)) {
            corrected.push(object);
        }
    }
    target
        .manager
        .apply_all_staged(&corrected, &options)
        .await
        .map_err(|e| {
            ReconcileError::transient(
                meta_reason::RECONCILIATION_FAILED,
                format!(
                    "Failed to correct cluster state of release {name}: {}",
                    capstan_source::redact::error_chain(&e)
                ),
            )
        })?;
    let message = format!(
        "Cluster state of release {name} has been corrected:\n{}",
        drifts.join("\n")
    );
    event(cx, EventType::Normal, reason::DRIFT_DETECTED, &message).await;
    in_sync(cx);
    set(
        cx,
        condition::DRIFTED,
        true,
        reason::DRIFT_DETECTED,
        &message,
    );
    Ok(Progress::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignore_rules_match_json_pointers_and_targets() {
        let rules: Vec<capstan_api::meta::IgnoreRule> = serde_json::from_value(serde_json::json!([
            {"paths": ["/spec/replicas"], "target": {"kind": "Deployment"}},
            {"paths": ["/metadata/annotations/a~1b"]},
        ]))
        .unwrap();
        let deployment = ObjectRef::new("apps/v1", "Deployment", "apps", "web");
        let service = ObjectRef::new("v1", "Service", "apps", "web");
        assert!(ignored(&rules, &deployment, "spec.replicas"));
        assert!(!ignored(&rules, &service, "spec.replicas"));
        assert!(!ignored(&rules, &deployment, "spec.template"));
        assert!(ignored(&rules, &service, "metadata.annotations.a/b"));
        assert!(!ignored(&rules, &service, "metadata.annotations.a/bc"));
        // Keys holding dots.
        let rules: Vec<capstan_api::meta::IgnoreRule> = serde_json::from_value(serde_json::json!([
            {"paths": ["/metadata/labels/app.kubernetes.io~1version", "/spec/ports/0/port"]},
        ]))
        .unwrap();
        assert!(ignored(
            &rules,
            &service,
            "metadata.labels.app.kubernetes.io/version"
        ));
        assert!(!ignored(
            &rules,
            &service,
            "metadata.labels.app.kubernetes.io/name"
        ));
        assert!(ignored(&rules, &service, "spec.ports[0].port"));
        assert!(!ignored(&rules, &service, "spec.ports[0].name"));
    }

    #[test]
    fn the_drift_correction_leaves_ignored_fields_out() {
        let rules: Vec<capstan_api::meta::IgnoreRule> = serde_json::from_value(serde_json::json!([
            {"paths": ["/spec/replicas", "/metadata/labels/app.kubernetes.io~1version"],
             "target": {"kind": "Deployment"}},
            {"paths": ["/spec/template/spec/containers/0/image"]},
        ]))
        .unwrap();
        let object = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app.kubernetes.io/version": "1", "a": "b"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
        });
        let kept = without_ignored(&rules, object, "apps");
        assert_eq!(
            kept,
            serde_json::json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"a": "b"}},
                "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
            })
        );
    }
}
