//! kstatus: whether an object has reached its desired state, computed from its live JSON.
//!
//! The rules follow the Kubernetes `kstatus` library that Flux uses for health checks:
//! type-specific rules for built-in workloads, then the generic conditions (`Reconciling`,
//! `Stalled`) and, for Flux-style kinds, `Ready`.

use std::fmt;

use serde_json::Value;

use crate::cel::HealthExprs;
use crate::object::ObjectRef;

/// The kstatus status of an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// The object reached its desired state.
    Current,
    /// The object is progressing towards its desired state.
    InProgress,
    /// The object failed and will not get there without a change.
    Failed,
    /// The object does not exist.
    NotFound,
    /// The status could not be read.
    Unknown,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Current => "Current",
            Self::InProgress => "InProgress",
            Self::Failed => "Failed",
            Self::NotFound => "NotFound",
            Self::Unknown => "Unknown",
        })
    }
}

/// The health of one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthResult {
    /// The object.
    pub object: ObjectRef,
    /// Its status.
    pub status: Status,
    /// Why, in kstatus's words (`Deployment does not have minimum availability`).
    pub message: String,
}

impl fmt::Display for HealthResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.object, self.message)
    }
}

/// Computes the status of a live object by `exprs` (`spec.healthCheckExprs`) when one of them
/// matches its group and kind, else by the built-in rules ([`compute`]).
pub fn compute_with(object: &Value, exprs: &HealthExprs) -> (Status, String) {
    if exprs.is_empty() {
        return compute(object);
    }
    exprs.evaluate(object).unwrap_or_else(|| compute(object))
}

/// Computes the status of a live object (its full JSON, as the API server returns it).
pub fn compute(object: &Value) -> (Status, String) {
    let kind = object["kind"].as_str().unwrap_or_default();
    if object["metadata"]["deletionTimestamp"].is_string() {
        return (Status::InProgress, format!("{kind} is being deleted"));
    }
    if let Some(observed) = object["status"]["observedGeneration"].as_i64() {
        let generation = object["metadata"]["generation"].as_i64().unwrap_or(0);
        if observed != generation {
            return (
                Status::InProgress,
                format!(
                    "{kind} generation is {generation}, but latest observed generation is {observed}"
                ),
            );
        }
    }
    if let Some(result) = generic_conditions(object) {
        return result;
    }
    let group = object["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .map_or("", |(g, _)| g);
    match (group, kind) {
        ("apps", "Deployment") => deployment(object),
        ("apps", "StatefulSet") => stateful_set(object),
        ("apps", "DaemonSet") => daemon_set(object),
        ("apps", "ReplicaSet") => replica_set(object),
        ("batch", "Job") => job(object),
        ("", "Pod") => pod(object),
        ("", "PersistentVolumeClaim") => pvc(object),
        ("", "Service") => service(object),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd(object),
        _ => ready_condition(object)
            .unwrap_or_else(|| (Status::Current, format!("{kind} is current"))),
    }
}

fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn condition_message(c: &Value) -> String {
    let message = c["message"].as_str().unwrap_or_default();
    let reason = c["reason"].as_str().unwrap_or_default();
    match (reason.is_empty(), message.is_empty()) {
        (_, false) => message.to_owned(),
        (false, true) => reason.to_owned(),
        (true, true) => format!("condition {} is {}", c["type"], c["status"]),
    }
}

/// kstatus's generic rules: `Reconciling=True` is InProgress, `Stalled=True` is Failed.
fn generic_conditions(object: &Value) -> Option<(Status, String)> {
    if let Some(c) = condition(object, "Stalled").filter(|c| c["status"] == "True") {
        return Some((Status::Failed, condition_message(c)));
    }
    if let Some(c) = condition(object, "Reconciling").filter(|c| c["status"] == "True") {
        return Some((Status::InProgress, condition_message(c)));
    }
    None
}

/// Flux-style kinds: `Ready=True` is Current; `Ready=False` with the generation observed is Failed
/// (the controller finished and reported failure); `Ready=Unknown` is InProgress.
fn ready_condition(object: &Value) -> Option<(Status, String)> {
    let c = condition(object, "Ready")?;
    Some(match c["status"].as_str() {
        Some("True") => (Status::Current, condition_message(c)),
        Some("False") => (Status::Failed, condition_message(c)),
        _ => (Status::InProgress, condition_message(c)),
    })
}

fn int(value: &Value) -> i64 {
    value.as_i64().unwrap_or(0)
}

fn deployment(object: &Value) -> (Status, String) {
    let spec = &object["spec"];
    let status = &object["status"];
    let replicas = spec["replicas"].as_i64().unwrap_or(1);
    if let Some(c) = condition(object, "Progressing")
        && c["reason"] == "ProgressDeadlineExceeded"
    {
        return (Status::Failed, "Progress deadline exceeded".to_owned());
    }
    if spec["paused"] == true {
        return (Status::InProgress, "Deployment is paused".to_owned());
    }
    let total = int(&status["replicas"]);
    let updated = int(&status["updatedReplicas"]);
    let available = int(&status["availableReplicas"]);
    let ready = int(&status["readyReplicas"]);
    let unavailable = "Deployment does not have minimum availability";
    if condition(object, "Available").is_some_and(|c| c["status"] == "False") {
        return (
            Status::InProgress,
            format!("{unavailable}. Available: {available}/{replicas}"),
        );
    }
    if updated < replicas {
        return (Status::InProgress, format!("Updated: {updated}/{replicas}"));
    }
    if total > updated {
        return (
            Status::InProgress,
            format!("Pending termination: {}", total - updated),
        );
    }
    if available < replicas {
        return (
            Status::InProgress,
            format!("Available: {available}/{replicas}"),
        );
    }
    if ready < replicas {
        return (Status::InProgress, format!("Ready: {ready}/{replicas}"));
    }
    if condition(object, "Available").is_none_or(|c| c["status"] != "True") {
        return (Status::InProgress, unavailable.to_owned());
    }
    (
        Status::Current,
        format!("Deployment is available. Replicas: {total}"),
    )
}

fn stateful_set(object: &Value) -> (Status, String) {
    let spec = &object["spec"];
    let status = &object["status"];
    let replicas = spec["replicas"].as_i64().unwrap_or(1);
    let ready = int(&status["readyReplicas"]);
    let current = int(&status["currentReplicas"]);
    if int(&status["replicas"]) < replicas {
        return (
            Status::InProgress,
            format!("Replicas: {}/{replicas}", int(&status["replicas"])),
        );
    }
    if ready < replicas {
        return (Status::InProgress, format!("Ready: {ready}/{replicas}"));
    }
    if spec["updateStrategy"]["type"] != "OnDelete" {
        if current < replicas && int(&status["updatedReplicas"]) < replicas {
            return (
                Status::InProgress,
                format!("Updated: {}/{replicas}", int(&status["updatedReplicas"])),
            );
        }
        if status["updateRevision"] != status["currentRevision"] {
            return (
                Status::InProgress,
                format!(
                    "Waiting for updated revision {} to match current {}",
                    status["updateRevision"].as_str().unwrap_or_default(),
                    status["currentRevision"].as_str().unwrap_or_default()
                ),
            );
        }
    }
    (
        Status::Current,
        format!("All replicas scheduled as expected. Replicas: {replicas}"),
    )
}

fn daemon_set(object: &Value) -> (Status, String) {
    let status = &object["status"];
    let desired = int(&status["desiredNumberScheduled"]);
    for (field, label) in [
        ("currentNumberScheduled", "Current"),
        ("updatedNumberScheduled", "Updated"),
        ("numberAvailable", "Available"),
        ("numberReady", "Ready"),
    ] {
        let have = int(&status[field]);
        if have < desired {
            return (Status::InProgress, format!("{label}: {have}/{desired}"));
        }
    }
    (
        Status::Current,
        format!("All replicas scheduled as expected. Replicas: {desired}"),
    )
}

fn replica_set(object: &Value) -> (Status, String) {
    let status = &object["status"];
    let replicas = object["spec"]["replicas"].as_i64().unwrap_or(1);
    if let Some(c) = condition(object, "ReplicaFailure").filter(|c| c["status"] == "True") {
        return (Status::InProgress, condition_message(c));
    }
    for (field, label) in [
        ("fullyLabeledReplicas", "Labelled"),
        ("availableReplicas", "Available"),
        ("readyReplicas", "Ready"),
    ] {
        let have = int(&status[field]);
        if have < replicas {
            return (Status::InProgress, format!("{label}: {have}/{replicas}"));
        }
    }
    if int(&status["replicas"]) > replicas {
        return (
            Status::InProgress,
            format!(
                "Pending termination: {}",
                int(&status["replicas"]) - replicas
            ),
        );
    }
    (
        Status::Current,
        format!("ReplicaSet is available. Replicas: {replicas}"),
    )
}

fn job(object: &Value) -> (Status, String) {
    let status = &object["status"];
    let completions = object["spec"]["completions"].as_i64().unwrap_or(1);
    let succeeded = int(&status["succeeded"]);
    let failed = int(&status["failed"]);
    if condition(object, "Complete").is_some_and(|c| c["status"] == "True") {
        return (
            Status::Current,
            format!("Job Completed. succeeded: {succeeded}/{completions}"),
        );
    }
    if let Some(c) = condition(object, "Failed").filter(|c| c["status"] == "True") {
        return (
            Status::Failed,
            format!(
                "Job Failed. failed: {failed}/{completions}: {}",
                condition_message(c)
            ),
        );
    }
    if status["startTime"].is_null() {
        return (Status::InProgress, "Job not started".to_owned());
    }
    (
        Status::InProgress,
        format!(
            "Job in progress. success:{succeeded}, active: {}, failed: {failed}",
            int(&status["active"])
        ),
    )
}

fn pod(object: &Value) -> (Status, String) {
    match object["status"]["phase"].as_str().unwrap_or("Pending") {
        "Succeeded" => (Status::Current, "Pod has completed successfully".to_owned()),
        "Failed" => (
            Status::Failed,
            "Pod has completed, but not successfully".to_owned(),
        ),
        "Running" if condition(object, "Ready").is_some_and(|c| c["status"] == "True") => {
            (Status::Current, "Pod is Ready".to_owned())
        }
        "Running" => (
            Status::InProgress,
            "Pod is running but is not Ready".to_owned(),
        ),
        phase => (Status::InProgress, format!("Pod is in the {phase} phase")),
    }
}

fn pvc(object: &Value) -> (Status, String) {
    match object["status"]["phase"].as_str() {
        Some("Bound") => (Status::Current, "PVC is Bound".to_owned()),
        Some("Lost") => (Status::Failed, "PVC is Lost".to_owned()),
        phase => (
            Status::InProgress,
            format!("PVC is not Bound. phase: {}", phase.unwrap_or("Pending")),
        ),
    }
}

fn service(object: &Value) -> (Status, String) {
    let spec = &object["spec"];
    if spec["type"] == "LoadBalancer"
        && object["status"]["loadBalancer"]["ingress"]
            .as_array()
            .is_none_or(Vec::is_empty)
    {
        return (
            Status::InProgress,
            "Service is waiting for a load balancer address".to_owned(),
        );
    }
    if spec["type"] != "ExternalName" && spec["clusterIP"].as_str().is_none_or(str::is_empty) {
        return (Status::InProgress, "ClusterIP not set".to_owned());
    }
    (Status::Current, "Service is ready".to_owned())
}

fn crd(object: &Value) -> (Status, String) {
    if let Some(c) = condition(object, "NamesAccepted").filter(|c| c["status"] == "False") {
        return (Status::Failed, condition_message(c));
    }
    if condition(object, "Established").is_some_and(|c| c["status"] == "True") {
        return (Status::Current, "CRD is established".to_owned());
    }
    (Status::InProgress, "CRD is not established".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status_of(v: &Value) -> Status {
        compute(v).0
    }

    fn deployment_with(status: &Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "generation": 2}, "spec": {"replicas": 2}, "status": status})
    }

    #[test]
    fn deployments() {
        let available = deployment_with(&json!({"observedGeneration": 2, "replicas": 2,
            "updatedReplicas": 2, "availableReplicas": 2, "readyReplicas": 2,
            "conditions": [{"type": "Available", "status": "True"}]}));
        assert_eq!(
            compute(&available),
            (
                Status::Current,
                "Deployment is available. Replicas: 2".into()
            )
        );
        let stale = deployment_with(&json!({"observedGeneration": 1}));
        assert_eq!(status_of(&stale), Status::InProgress);
        assert!(compute(&stale).1.contains("observed generation is 1"));
        let hanging = deployment_with(&json!({"observedGeneration": 2, "replicas": 2,
            "updatedReplicas": 2, "availableReplicas": 0, "readyReplicas": 0,
            "conditions": [{"type": "Available", "status": "False"}]}));
        assert_eq!(
            compute(&hanging),
            (
                Status::InProgress,
                "Deployment does not have minimum availability. Available: 0/2".into()
            )
        );
        let scaling = deployment_with(&json!({"observedGeneration": 2, "replicas": 2,
            "updatedReplicas": 2, "availableReplicas": 1, "readyReplicas": 1}));
        assert_eq!(
            compute(&scaling),
            (Status::InProgress, "Available: 1/2".into())
        );
        let unavailable = deployment_with(&json!({"observedGeneration": 2, "replicas": 2,
            "updatedReplicas": 2, "availableReplicas": 2, "readyReplicas": 2, "conditions": []}));
        assert_eq!(
            compute(&unavailable).1,
            "Deployment does not have minimum availability"
        );
        let failed = deployment_with(&json!({"observedGeneration": 2,
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}));
        assert_eq!(status_of(&failed), Status::Failed);
    }

    #[test]
    fn jobs_pods_and_claims() {
        let job = |status: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {}, "status": status});
        assert_eq!(
            status_of(&job(
                json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})
            )),
            Status::Current
        );
        assert_eq!(
            status_of(&job(
                json!({"failed": 2, "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]})
            )),
            Status::Failed
        );
        assert_eq!(
            status_of(&job(
                json!({"startTime": "2024-01-01T00:00:00Z", "active": 1})
            )),
            Status::InProgress
        );
        let pod = |status: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": status});
        assert_eq!(
            status_of(&pod(
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
            )),
            Status::Current
        );
        assert_eq!(
            status_of(&pod(json!({"phase": "Running"}))),
            Status::InProgress
        );
        assert_eq!(status_of(&pod(json!({"phase": "Failed"}))), Status::Failed);
        let pvc = |phase: &str| json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "status": {"phase": phase}});
        assert_eq!(status_of(&pvc("Bound")), Status::Current);
        assert_eq!(status_of(&pvc("Pending")), Status::InProgress);
    }

    #[test]
    fn sets_services_and_crds() {
        let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"replicas": 3},
            "status": {"replicas": 3, "readyReplicas": 1}});
        assert_eq!(compute(&sts), (Status::InProgress, "Ready: 1/3".into()));
        let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"},
            "status": {"desiredNumberScheduled": 2, "currentNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2, "numberReady": 2}});
        assert_eq!(status_of(&ds), Status::Current);
        let lb = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.1"}});
        assert_eq!(status_of(&lb), Status::InProgress);
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"clusterIP": "10.0.0.1"}});
        assert_eq!(status_of(&svc), Status::Current);
        let crd = |conditions: Value| json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x"}, "status": {"conditions": conditions}});
        assert_eq!(
            status_of(&crd(json!([{"type": "Established", "status": "True"}]))),
            Status::Current
        );
        assert_eq!(status_of(&crd(json!([]))), Status::InProgress);
        assert_eq!(
            status_of(&crd(
                json!([{"type": "NamesAccepted", "status": "False", "message": "taken"}])
            )),
            Status::Failed
        );
    }

    #[test]
    fn generic_and_flux_conditions() {
        let flux = |conditions: Value| {
            json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "k", "generation": 1}, "status": {"observedGeneration": 1, "conditions": conditions}})
        };
        assert_eq!(
            status_of(&flux(
                json!([{"type": "Ready", "status": "True", "message": "Applied"}])
            )),
            Status::Current
        );
        assert_eq!(
            compute(&flux(
                json!([{"type": "Ready", "status": "False", "message": "build failed"}])
            )),
            (Status::Failed, "build failed".into())
        );
        assert_eq!(
            status_of(&flux(json!([{"type": "Ready", "status": "Unknown"}]))),
            Status::InProgress
        );
        assert_eq!(
            status_of(&flux(
                json!([{"type": "Reconciling", "status": "True"}, {"type": "Ready", "status": "False"}])
            )),
            Status::InProgress
        );
        assert_eq!(
            status_of(&flux(
                json!([{"type": "Stalled", "status": "True", "reason": "InvalidPath"}])
            )),
            Status::Failed
        );
        let plain = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert_eq!(status_of(&plain), Status::Current);
        let deleting = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "deletionTimestamp": "2024-01-01T00:00:00Z"}});
        assert_eq!(status_of(&deleting), Status::InProgress);
    }
}
