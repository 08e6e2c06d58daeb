//! The workload simulator: gives Deployments, StatefulSets, DaemonSets, ReplicaSets and Jobs the
//! status their controllers would report once pods came up, so health checks mean something.
//!
//! Per-object annotations steer it (on the workload's `metadata.annotations`):
//! - `sim.capstan.dev/rollout: hang` — the rollout never completes (Progressing, not Available);
//! - `sim.capstan.dev/rollout: fail` — the rollout fails (`ProgressDeadlineExceeded`; Jobs: `Failed`);
//! - `sim.capstan.dev/rollout-delay: <seconds>` — the rollout completes after that many seconds.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::cluster::{Cluster, now};
use crate::store::EventType;

/// Annotation choosing the simulated outcome: `hang` or `fail`.
pub const ROLLOUT_ANNOTATION: &str = "sim.capstan.dev/rollout";
/// Annotation delaying completion by a number of seconds.
pub const DELAY_ANNOTATION: &str = "sim.capstan.dev/rollout-delay";

const MANAGER: &str = "kube-controller-manager";
const KINDS: [(&str, &str); 5] = [
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("apps", "replicasets"),
    ("batch", "jobs"),
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Outcome {
    Complete,
    Progressing,
    Failed,
}

fn outcome(obj: &Value) -> (Outcome, Option<u64>) {
    let ann = |k: &str| {
        obj.pointer("/metadata/annotations")
            .and_then(|a| a.get(k))
            .and_then(Value::as_str)
    };
    let delay = ann(DELAY_ANNOTATION).and_then(|d| d.trim_end_matches('s').parse::<u64>().ok());
    match ann(ROLLOUT_ANNOTATION) {
        Some("hang") => (Outcome::Progressing, None),
        Some("fail") => (Outcome::Failed, None),
        _ => {
            if let Some(secs) = delay {
                let progressing = obj
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .and_then(|c| c.iter().find(|c| c["type"] == "Progressing"));
                let observed = obj.pointer("/status/observedGeneration")
                    == obj.pointer("/metadata/generation");
                // Once complete for this generation, stay complete: completing refreshes the
                // condition's lastUpdateTime, which must not restart the delay.
                if observed && progressing.is_some_and(|c| c["reason"] == "NewReplicaSetAvailable")
                {
                    return (Outcome::Complete, None);
                }
                let created = obj
                    .pointer("/metadata/creationTimestamp")
                    .and_then(Value::as_str);
                // Progressing until the delay has passed since the last spec change was observed.
                let since = progressing
                    .and_then(|c| c.get("lastUpdateTime").and_then(Value::as_str))
                    .or(created);
                let elapsed = since
                    .and_then(|s| s.parse::<jiff::Timestamp>().ok())
                    .map_or(0, |t| {
                        (jiff::Timestamp::now().as_second() - t.as_second()).max(0) as u64
                    });
                if !observed || elapsed < secs {
                    return (
                        Outcome::Progressing,
                        Some(if observed { secs - elapsed } else { secs }),
                    );
                }
            }
            (Outcome::Complete, None)
        }
    }
}

fn condition(
    previous: Option<&Value>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    with_update: bool,
) -> Value {
    let prev = previous
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|c| c["type"] == type_));
    let same = prev.is_some_and(|p| p["status"] == status);
    let same_reason = same && prev.is_some_and(|p| p["reason"] == reason);
    let t = now();
    let transition = if same {
        prev.and_then(|p| p.get("lastTransitionTime").cloned())
            .unwrap_or(json!(t))
    } else {
        json!(t)
    };
    let mut c = json!({"type": type_, "status": status, "lastTransitionTime": transition, "reason": reason, "message": message});
    if with_update {
        let update = if same_reason {
            prev.and_then(|p| p.get("lastUpdateTime").cloned())
                .unwrap_or(json!(t))
        } else {
            json!(t)
        };
        c["lastUpdateTime"] = update;
    }
    c
}

fn hash(v: &Value) -> String {
    // FNV-1a over the template: a stable pod-template-hash-like suffix.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in v.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:x}", h & 0xff_ffff_ffff)
}

/// What every workload's status is computed from.
struct Facts<'a> {
    generation: Value,
    name: &'a str,
    replicas: i64,
    /// The conditions reported so far (their transition times carry over).
    prev: Option<&'a Value>,
    outcome: Outcome,
    template_hash: String,
}

/// The status the workload's controller would report.
fn desired_status(plural: &str, obj: &Value) -> (Value, Option<u64>) {
    let (outcome, requeue) = outcome(obj);
    let facts = Facts {
        generation: obj
            .pointer("/metadata/generation")
            .cloned()
            .unwrap_or(json!(1)),
        name: obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(""),
        replicas: obj
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1),
        prev: obj.pointer("/status/conditions"),
        outcome,
        template_hash: hash(obj.pointer("/spec/template").unwrap_or(&Value::Null)),
    };
    let mut status = match plural {
        "deployments" => deployment_status(&facts),
        "statefulsets" => stateful_set_status(&facts),
        "daemonsets" => daemon_set_status(&facts),
        "replicasets" => replica_set_status(&facts),
        "jobs" => job_status(&facts, obj),
        _ => Value::Null,
    };
    if status
        .get("conditions")
        .is_some_and(|c| c.as_array().is_some_and(Vec::is_empty))
    {
        status.as_object_mut().map(|o| o.remove("conditions"));
    }
    (status, requeue)
}

/// A Deployment's status: availability and progress of its current ReplicaSet.
fn deployment_status(facts: &Facts<'_>) -> Value {
    let Facts {
        generation,
        name,
        replicas,
        prev,
        outcome,
        template_hash,
    } = facts;
    let (replicas, prev, outcome) = (*replicas, *prev, *outcome);
    let rs = format!("{name}-{template_hash}");
    let (ready, conditions) = match outcome {
        Outcome::Complete => (
            replicas,
            vec![
                condition(
                    prev,
                    "Available",
                    "True",
                    "MinimumReplicasAvailable",
                    "Deployment has minimum availability.",
                    true,
                ),
                condition(
                    prev,
                    "Progressing",
                    "True",
                    "NewReplicaSetAvailable",
                    &format!("ReplicaSet \"{rs}\" has successfully progressed."),
                    true,
                ),
            ],
        ),
        Outcome::Progressing => (
            0,
            vec![
                condition(
                    prev,
                    "Available",
                    "False",
                    "MinimumReplicasUnavailable",
                    "Deployment does not have minimum availability.",
                    true,
                ),
                condition(
                    prev,
                    "Progressing",
                    "True",
                    "ReplicaSetUpdated",
                    &format!("ReplicaSet \"{rs}\" is progressing."),
                    true,
                ),
            ],
        ),
        Outcome::Failed => (
            0,
            vec![
                condition(
                    prev,
                    "Available",
                    "False",
                    "MinimumReplicasUnavailable",
                    "Deployment does not have minimum availability.",
                    true,
                ),
                condition(
                    prev,
                    "Progressing",
                    "False",
                    "ProgressDeadlineExceeded",
                    &format!("ReplicaSet \"{rs}\" has timed out progressing."),
                    true,
                ),
            ],
        ),
    };
    let mut s = json!({"observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas, "conditions": conditions});
    if ready > 0 {
        s["readyReplicas"] = json!(ready);
        s["availableReplicas"] = json!(ready);
    }
    if replicas - ready > 0 {
        s["unavailableReplicas"] = json!(replicas - ready);
    }
    s
}

/// A StatefulSet's status: one revision, every replica ready once complete.
fn stateful_set_status(facts: &Facts<'_>) -> Value {
    let Facts {
        generation,
        name,
        replicas,
        outcome,
        template_hash,
        ..
    } = facts;
    let (replicas, outcome) = (*replicas, *outcome);
    let revision = format!("{name}-{template_hash}");
    let ready = if outcome == Outcome::Complete {
        replicas
    } else {
        0
    };
    let mut s = json!({"observedGeneration": generation, "replicas": replicas, "currentReplicas": replicas, "updatedReplicas": replicas, "currentRevision": revision, "updateRevision": revision, "collisionCount": 0, "availableReplicas": ready});
    if ready > 0 {
        s["readyReplicas"] = json!(ready);
    }
    s
}

/// A DaemonSet's status, as if on a one-node cluster.
fn daemon_set_status(facts: &Facts<'_>) -> Value {
    let Facts {
        generation,
        outcome,
        ..
    } = facts;
    let ready = i64::from(*outcome == Outcome::Complete);
    json!({"observedGeneration": generation, "desiredNumberScheduled": 1, "currentNumberScheduled": 1, "updatedNumberScheduled": 1, "numberMisscheduled": 0, "numberReady": ready, "numberAvailable": ready, "numberUnavailable": 1 - ready})
}

/// A ReplicaSet's status.
fn replica_set_status(facts: &Facts<'_>) -> Value {
    let Facts {
        generation,
        replicas,
        outcome,
        ..
    } = facts;
    let (replicas, outcome) = (*replicas, *outcome);
    let ready = if outcome == Outcome::Complete {
        replicas
    } else {
        0
    };
    let mut s = json!({"observedGeneration": generation, "replicas": replicas, "fullyLabeledReplicas": replicas});
    if ready > 0 {
        s["readyReplicas"] = json!(ready);
        s["availableReplicas"] = json!(ready);
    }
    s
}

/// A Job's status: active, complete (every completion succeeded) or failed (past its backoff
/// limit); the start and completion times once set are kept.
fn job_status(facts: &Facts<'_>, obj: &Value) -> Value {
    let Facts { prev, outcome, .. } = facts;
    let (prev, outcome) = (*prev, *outcome);
    let completions = obj
        .pointer("/spec/completions")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let start = obj
        .pointer("/status/startTime")
        .cloned()
        .unwrap_or_else(|| json!(now()));
    match outcome {
        Outcome::Complete => {
            let done = obj
                .pointer("/status/completionTime")
                .cloned()
                .unwrap_or_else(|| json!(now()));
            json!({"startTime": start, "completionTime": done, "succeeded": completions, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}, "conditions": [
                condition(prev, "SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods", false),
                condition(prev, "Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods", false),
            ]})
        }
        Outcome::Progressing => {
            json!({"startTime": start, "active": 1, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}})
        }
        Outcome::Failed => {
            let backoff = obj
                .pointer("/spec/backoffLimit")
                .and_then(Value::as_i64)
                .unwrap_or(6);
            json!({"startTime": start, "failed": backoff + 1, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}, "conditions": [
                condition(prev, "FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit", false),
                condition(prev, "Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit", false),
            ]})
        }
    }
}

/// Brings one workload's status up to date. Returns seconds after which to look again.
fn reconcile(
    cluster: &Cluster,
    group: &str,
    plural: &str,
    namespace: &str,
    name: &str,
) -> Option<u64> {
    let rt = cluster.resource(group, "v1", plural).ok()?;
    let mut requeue = None;
    let _ = cluster.mutate(&rt, Some(namespace), name, Some("status"), MANAGER, |obj| {
        if obj.pointer("/metadata/deletionTimestamp").is_some() {
            return false;
        }
        let (status, again) = desired_status(plural, obj);
        requeue = again;
        if obj.get("status") == Some(&status) {
            return false;
        }
        obj["status"] = status;
        true
    });
    requeue
}

/// Runs the simulator.
pub async fn run(cluster: Cluster) {
    let mut events = cluster.store().subscribe_all();
    loop {
        let event = match events.recv().await {
            Ok(e) => e,
            Err(RecvError::Lagged(_)) => {
                for (group, plural) in KINDS {
                    let Ok(rt) = cluster.resource(group, "v1", plural) else {
                        continue;
                    };
                    let (objects, _) = cluster.list(&rt, None);
                    for o in objects {
                        reconcile(&cluster, group, plural, o.namespace(), o.name());
                    }
                }
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        if event.type_ == EventType::Deleted {
            continue;
        }
        let Some((group, plural)) = KINDS
            .iter()
            .find(|(g, p)| event.key.group == *g && event.key.resource == *p)
        else {
            continue;
        };
        let (ns, name) = (
            event.object.namespace().to_owned(),
            event.object.name().to_owned(),
        );
        if let Some(secs) = reconcile(&cluster, group, plural, &ns, &name) {
            let cluster = cluster.clone();
            let (group, plural) = (*group, *plural);
            // Look again until the rollout is done: a delayed rollout may need several looks
            // (the delay counts from when the new generation was observed).
            tokio::spawn(async move {
                let mut wait = secs;
                loop {
                    tokio::time::sleep(Duration::from_secs(wait.max(1))).await;
                    match reconcile(&cluster, group, plural, &ns, &name) {
                        Some(again) => wait = again,
                        None => break,
                    }
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_completes_unless_told_otherwise() {
        let d = json!({"metadata": {"name": "web", "generation": 2}, "spec": {"replicas": 3, "template": {}}});
        let (s, _) = desired_status("deployments", &d);
        assert_eq!(s["observedGeneration"], 2);
        assert_eq!(s["availableReplicas"], 3);
        assert_eq!(s["conditions"][0]["type"], "Available");
        assert_eq!(s["conditions"][0]["status"], "True");

        let hang = json!({"metadata": {"name": "web", "generation": 1, "annotations": {ROLLOUT_ANNOTATION: "hang"}}, "spec": {"replicas": 1}});
        let (s, _) = desired_status("deployments", &hang);
        assert_eq!(s["conditions"][0]["status"], "False");
        assert!(s.get("availableReplicas").is_none());

        let fail = json!({"metadata": {"name": "web", "generation": 1, "annotations": {ROLLOUT_ANNOTATION: "fail"}}, "spec": {}});
        let (s, _) = desired_status("deployments", &fail);
        assert_eq!(s["conditions"][1]["reason"], "ProgressDeadlineExceeded");
    }

    #[test]
    fn a_delayed_rollout_completes_once_the_delay_has_passed() {
        let seconds_ago = |s: i64| {
            let t = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() - s).unwrap();
            t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
        };
        let rollout = |since: i64| {
            json!({
                "metadata": {"name": "web", "generation": 2,
                             "annotations": {DELAY_ANNOTATION: "4"}},
                "spec": {"replicas": 1, "template": {}},
                "status": {"observedGeneration": 2, "conditions": [
                    {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
                     "lastUpdateTime": seconds_ago(since), "lastTransitionTime": seconds_ago(60)}]},
            })
        };
        let (status, again) = desired_status("deployments", &rollout(1));
        assert_eq!(status["conditions"][1]["reason"], "ReplicaSetUpdated");
        assert_eq!(
            status["conditions"][1]["lastUpdateTime"],
            rollout(1)["status"]["conditions"][0]["lastUpdateTime"],
            "looking again does not restart the delay"
        );
        assert_eq!(again, Some(3));
        let (status, again) = desired_status("deployments", &rollout(5));
        assert_eq!(status["conditions"][1]["reason"], "NewReplicaSetAvailable");
        assert_eq!(again, None);
        // Completing refreshed lastUpdateTime; looking again keeps it complete.
        let mut done = rollout(0);
        done["status"] = status;
        let (status, again) = desired_status("deployments", &done);
        assert_eq!(status["conditions"][1]["reason"], "NewReplicaSetAvailable");
        assert_eq!(again, None);
    }

    #[test]
    fn jobs_complete_or_fail() {
        let j = json!({"metadata": {"name": "j"}, "spec": {"completions": 2}});
        let (s, _) = desired_status("jobs", &j);
        assert_eq!(s["succeeded"], 2);
        assert_eq!(s["conditions"][1]["type"], "Complete");
        let f = json!({"metadata": {"name": "j", "annotations": {ROLLOUT_ANNOTATION: "fail"}}, "spec": {"backoffLimit": 1}});
        let (s, _) = desired_status("jobs", &f);
        assert_eq!(s["conditions"][1]["type"], "Failed");
    }
}
