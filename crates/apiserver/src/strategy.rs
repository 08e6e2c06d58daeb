//! What each built-in kind does beyond the generic write rules, as kube-apiserver's registry
//! strategies do: defaults (PrepareForCreate/PrepareForUpdate and defaulting), validation,
//! update validation (immutable fields), the status subresource, `metadata.generation` and
//! graceful deletion. [`of`] picks a resource's strategy; custom resources get the generic one.

use serde_json::{Value, json};

use crate::defaults::{
    base64_encode, check_containers, default_pod_spec, forbidden, immutable, obj_mut, required,
    set_default, template_spec,
};
use crate::error::Cause;
use crate::registry::ResourceType;

/// The per-kind hooks of a write; every hook has the generic behaviour as its default.
pub(crate) trait Strategy: Sync {
    /// Fills in the API server's defaults; `old` is the previous state on updates, and
    /// `allocate_ip` hands out Service cluster IPs.
    fn default(&self, _obj: &mut Value, _old: Option<&Value>, _allocate_ip: &dyn Fn() -> String) {}

    /// Semantic checks beyond the schema.
    fn validate(&self, _obj: &Value, _causes: &mut Vec<Cause>) {}

    /// Update rules: the fields a real API server refuses to change.
    fn validate_update(&self, _old: &Value, _new: &Value, _causes: &mut Vec<Cause>) {}

    /// Whether `status` is written through the status subresource only, so writes to the main
    /// resource keep the stored status.
    fn status_is_subresource(&self, rt: &ResourceType) -> bool {
        rt.status
    }

    /// Whether the kind keeps `metadata.generation`.
    fn has_generation(&self, rt: &ResourceType) -> bool {
        !rt.builtin || rt.status
    }

    /// Whether a deletion always terminates first (a `deletionTimestamp`), even without
    /// finalizers.
    fn terminates_gracefully(&self) -> bool {
        false
    }

    /// Marks an object whose deletion has just begun (its `deletionTimestamp` is set).
    fn prepare_for_termination(&self, _obj: &mut Value) {}

    /// Whether something besides `metadata.finalizers` still holds a terminating object.
    fn deletion_held(&self, _obj: &Value) -> bool {
        false
    }
}

/// The strategy of `rt`'s kind.
pub(crate) fn of(rt: &ResourceType) -> &'static dyn Strategy {
    if !rt.builtin {
        return &Generic;
    }
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "namespaces") => &Namespaces,
        ("", "services") => &Services,
        ("", "secrets") => &Secrets,
        ("", "configmaps") => &ConfigMaps,
        ("", "pods") => &Pods,
        ("", "persistentvolumeclaims") => &PersistentVolumeClaims,
        ("apps", "deployments") => &Deployments,
        ("apps", "replicasets") => &ReplicaSets,
        ("apps", "statefulsets") => &StatefulSets,
        ("apps", "daemonsets") => &DaemonSets,
        ("batch", "jobs") => &Jobs,
        ("batch", "cronjobs") => &CronJobs,
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => &RoleBindings,
        ("apiextensions.k8s.io", "customresourcedefinitions") => &CustomResourceDefinitions,
        _ => &Generic,
    }
}

/// Whether the value at `pointer` differs between `old` and `new`.
fn changed(old: &Value, new: &Value, pointer: &str) -> bool {
    old.pointer(pointer) != new.pointer(pointer)
}

/// Refuses a change of the value at `pointer` (shown as `field`).
fn check(causes: &mut Vec<Cause>, old: &Value, new: &Value, pointer: &str, field: &str) {
    if changed(old, new, pointer) {
        causes.push(immutable(field, new.pointer(pointer)));
    }
}

/// Custom resources and the built-in kinds without rules of their own.
struct Generic;
impl Strategy for Generic {}

struct Namespaces;
impl Strategy for Namespaces {
    fn default(&self, obj: &mut Value, old: Option<&Value>, _allocate_ip: &dyn Fn() -> String) {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if let Some(m) = obj_mut(obj, "metadata") {
            let labels = m.entry("labels").or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
        }
        let terminating = obj.pointer("/metadata/deletionTimestamp").is_some();
        if old.is_none() {
            let spec = obj
                .as_object_mut()
                .map(|o| o.entry("spec").or_insert_with(|| json!({})));
            if let Some(s) = spec.and_then(Value::as_object_mut) {
                set_default(s, "finalizers", json!(["kubernetes"]));
            }
        }
        if let Some(o) = obj.as_object_mut() {
            o.insert(
                "status".into(),
                json!({"phase": if terminating { "Terminating" } else { "Active" }}),
            );
        }
    }

    fn terminates_gracefully(&self) -> bool {
        true
    }

    fn prepare_for_termination(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Terminating"});
    }

    fn deletion_held(&self, obj: &Value) -> bool {
        obj.pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    }
}

struct Services;
impl Strategy for Services {
    fn default(&self, obj: &mut Value, old: Option<&Value>, allocate_ip: &dyn Fn() -> String) {
        let old_ip = old.and_then(|o| o.pointer("/spec/clusterIP")).cloned();
        let old_ips = old.and_then(|o| o.pointer("/spec/clusterIPs")).cloned();
        let Some(spec) = obj_mut(obj, "spec") else {
            return;
        };
        set_default(spec, "type", json!("ClusterIP"));
        set_default(spec, "sessionAffinity", json!("None"));
        let type_ = spec
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_owned();
        if type_ != "ExternalName" {
            if let Some(ip) = old_ip.filter(|v| !v.is_null()) {
                set_default(spec, "clusterIP", ip);
                if let Some(ips) = old_ips {
                    set_default(spec, "clusterIPs", ips);
                }
            } else if spec
                .get("clusterIP")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                let ip = allocate_ip();
                spec.insert("clusterIP".into(), json!(ip));
                spec.insert("clusterIPs".into(), json!([ip]));
            }
            let ip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
            set_default(spec, "clusterIPs", json!([ip]));
            set_default(spec, "ipFamilies", json!(["IPv4"]));
            set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
            set_default(spec, "internalTrafficPolicy", json!("Cluster"));
        }
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                set_default(p, "protocol", json!("TCP"));
                if let Some(port) = p.get("port").cloned() {
                    set_default(p, "targetPort", port);
                }
            }
        }
        if let Some(o) = obj.as_object_mut() {
            o.entry("status")
                .or_insert_with(|| json!({"loadBalancer": {}}));
        }
    }

    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        let type_ = obj
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP");
        if let Some(ports) = obj.pointer("/spec/ports").and_then(Value::as_array) {
            for (i, p) in ports.iter().enumerate() {
                if p.get("port").is_none_or(Value::is_null) {
                    causes.push(required(&format!("spec.ports[{i}].port")));
                }
            }
        } else if type_ != "ExternalName"
            && obj.pointer("/spec/clusterIP").and_then(Value::as_str) != Some("None")
        {
            causes.push(required("spec.ports"));
        }
    }

    fn validate_update(&self, old: &Value, new: &Value, causes: &mut Vec<Cause>) {
        let external =
            |v: &Value| v.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName");
        if !external(old) && !external(new) {
            check(causes, old, new, "/spec/clusterIP", "spec.clusterIP");
        }
    }
}

/// The rule ConfigMaps and Secrets share: nothing changes once `immutable` is set.
fn validate_immutable_data(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    if old.get("immutable") == Some(&Value::Bool(true)) {
        for field in ["data", "binaryData", "stringData", "immutable"] {
            if changed(old, new, &format!("/{field}")) {
                causes.push(forbidden(
                    field,
                    "field is immutable when `immutable` is set",
                ));
            }
        }
    }
}

struct Secrets;
impl Strategy for Secrets {
    fn default(&self, obj: &mut Value, _old: Option<&Value>, _allocate_ip: &dyn Fn() -> String) {
        if let Some(o) = obj.as_object_mut() {
            if let Some(Value::Object(string_data)) = o.remove("stringData") {
                let data = o.entry("data").or_insert_with(|| json!({}));
                if let Some(d) = data.as_object_mut() {
                    for (k, v) in string_data {
                        let s = v.as_str().unwrap_or("").as_bytes().to_vec();
                        d.insert(k, json!(base64_encode(&s)));
                    }
                }
            }
            set_default(o, "type", json!("Opaque"));
        }
    }

    fn validate_update(&self, old: &Value, new: &Value, causes: &mut Vec<Cause>) {
        validate_immutable_data(old, new, causes);
        check(causes, old, new, "/type", "type");
    }
}

struct ConfigMaps;
impl Strategy for ConfigMaps {
    fn validate_update(&self, old: &Value, new: &Value, causes: &mut Vec<Cause>) {
        validate_immutable_data(old, new, causes);
    }
}

struct Pods;
impl Strategy for Pods {
    fn default(&self, obj: &mut Value, old: Option<&Value>, _allocate_ip: &dyn Fn() -> String) {
        default_pod_spec(obj.get_mut("spec"), "Always");
        // A new pod is Pending until a kubelet reports on it (there is none here).
        if old.is_none() && obj.get("status").is_none_or(|s| s.get("phase").is_none()) {
            obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
        }
    }

    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        check_containers(obj.get("spec"), "spec", causes);
    }
}

struct PersistentVolumeClaims;
impl Strategy for PersistentVolumeClaims {
    fn validate_update(&self, old: &Value, new: &Value, causes: &mut Vec<Cause>) {
        let strip = |v: &Value| {
            let mut spec = v.get("spec").cloned().unwrap_or(Value::Null);
            if let Some(o) = spec.as_object_mut() {
                o.remove("volumeAttributesClassName");
                if let Some(r) = o.get_mut("resources").and_then(Value::as_object_mut) {
                    r.remove("requests");
                }
                // The binder fills these in; they may be set once.
                if old.pointer("/spec/volumeName").is_none() {
                    o.remove("volumeName");
                }
            }
            spec
        };
        if strip(old) != strip(new) {
            causes.push(forbidden(
                "spec",
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
            ));
        }
    }
}

/// The checks every workload of `apps` shares: a selector matching the template's labels,
/// and containers with names and images.
fn validate_workload(obj: &Value, causes: &mut Vec<Cause>) {
    let selector = obj.pointer("/spec/selector");
    if selector.is_none_or(Value::is_null) {
        causes.push(required("spec.selector"));
    }
    let labels = obj.pointer("/spec/template/metadata/labels");
    if let Some(match_labels) = selector
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object)
    {
        let ok = match_labels
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
        if !ok {
            causes.push(Cause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: {}: `selector` does not match template `labels`",
                    labels.cloned().unwrap_or(json!({}))
                ),
                field: "spec.template.metadata.labels".into(),
            });
        }
    }
    check_containers(
        obj.pointer("/spec/template/spec"),
        "spec.template.spec",
        causes,
    );
}

struct Deployments;
impl Strategy for Deployments {
    fn default(&self, obj: &mut Value, _old: Option<&Value>, _allocate_ip: &dyn Fn() -> String) {
        if let Some(spec) = obj_mut(obj, "spec") {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(spec, "progressDeadlineSeconds", json!(600));
            set_default(
                spec,
                "strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
            );
        }
        default_pod_spec(template_spec(obj), "Always");
    }

    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        validate_workload(obj, causes);
    }

    fn validate_update(&self, old: &Value, new: &Value, causes: &mut Vec<Cause>) {
        check(causes, old, new, "/spec/selector", "spec.selector");
    }
}

struct ReplicaSets;
impl Strategy for ReplicaSets {
    fn default(&self, obj: &mut Value, _old: Option<&Value>, _allocate_ip: &dyn Fn() -> String) {
        if let Some(spec) = obj_mut(obj, "spec") {
            set_default(spec, "replicas", json!(1));
        }
        default_pod_spec(template_spec(obj), "Always");
    }

    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        validate_workload(obj, causes);
    }

    fn validate_update(&self, old: &Value, new: &Value, causes: &mut Vec<Cause>) {
        check(causes, old, new, "/spec/selector", "spec.selector");
    }
}

struct StatefulSets;
impl Strategy for StatefulSets {
    fn default(&self, obj: &mut Value, _old: Option<&Value>, _allocate_ip: &dyn Fn() -> String) {
        if let Some(spec) = obj_mut(obj, "spec") {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "podManagementPolicy", json!("OrderedReady"));
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            set_default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
        }
        default_pod_spec(template_spec(obj), "Always");
    }

    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        validate_workload(obj, causes);
    }

    fn validate_update(&self, old: &Value, new: &Value, causes: &mut Vec<Cause>) {
        const MUTABLE: [&str; 6] = [
            "replicas",
            "ordinals",
            "template",
            "updateStrategy",
            "persistentVolumeClaimRetentionPolicy",
            "minReadySeconds",
        ];
        let strip = |v: &Value| {
            let mut spec = v.get("spec").cloned().unwrap_or(Value::Null);
            if let Some(o) = spec.as_object_mut() {
                for k in MUTABLE {
                    o.remove(k);
                }
            }
            spec
        };
        if strip(old) != strip(new) {
            causes.push(forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ));
        }
    }
}

struct DaemonSets;
impl Strategy for DaemonSets {
    fn default(&self, obj: &mut Value, _old: Option<&Value>, _allocate_ip: &dyn Fn() -> String) {
        if let Some(spec) = obj_mut(obj, "spec") {
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
        }
        default_pod_spec(template_spec(obj), "Always");
    }

    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        validate_workload(obj, causes);
    }

    fn validate_update(&self, old: &Value, new: &Value, causes: &mut Vec<Cause>) {
        check(causes, old, new, "/spec/selector", "spec.selector");
    }
}

struct Jobs;
impl Strategy for Jobs {
    fn default(&self, obj: &mut Value, _old: Option<&Value>, _allocate_ip: &dyn Fn() -> String) {
        if let Some(spec) = obj_mut(obj, "spec") {
            set_default(spec, "backoffLimit", json!(6));
            set_default(spec, "completions", json!(1));
            set_default(spec, "parallelism", json!(1));
            set_default(spec, "completionMode", json!("NonIndexed"));
            set_default(spec, "suspend", json!(false));
        }
        default_pod_spec(template_spec(obj), "Never");
    }

    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        check_containers(
            obj.pointer("/spec/template/spec"),
            "spec.template.spec",
            causes,
        );
    }

    fn validate_update(&self, old: &Value, new: &Value, causes: &mut Vec<Cause>) {
        check(causes, old, new, "/spec/selector", "spec.selector");
        check(causes, old, new, "/spec/template", "spec.template");
        check(
            causes,
            old,
            new,
            "/spec/completionMode",
            "spec.completionMode",
        );
    }
}

struct CronJobs;
impl Strategy for CronJobs {
    fn default(&self, obj: &mut Value, _old: Option<&Value>, _allocate_ip: &dyn Fn() -> String) {
        if let Some(spec) = obj_mut(obj, "spec") {
            set_default(spec, "concurrencyPolicy", json!("Allow"));
            set_default(spec, "suspend", json!(false));
            set_default(spec, "successfulJobsHistoryLimit", json!(3));
            set_default(spec, "failedJobsHistoryLimit", json!(1));
        }
        let pod = obj.pointer_mut("/spec/jobTemplate/spec/template/spec");
        default_pod_spec(pod, "Never");
    }
}

struct RoleBindings;
impl Strategy for RoleBindings {
    fn validate_update(&self, old: &Value, new: &Value, causes: &mut Vec<Cause>) {
        if changed(old, new, "/roleRef") {
            causes.push(Cause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: {}: cannot change roleRef",
                    new.pointer("/roleRef").unwrap_or(&Value::Null)
                ),
                field: "roleRef".into(),
            });
        }
    }
}

/// CustomResourceDefinitions: their status is written with the object (the CRD controller
/// runs inline), and they keep a generation.
struct CustomResourceDefinitions;
impl Strategy for CustomResourceDefinitions {
    fn validate_update(&self, old: &Value, new: &Value, causes: &mut Vec<Cause>) {
        check(causes, old, new, "/spec/scope", "spec.scope");
    }

    fn status_is_subresource(&self, _rt: &ResourceType) -> bool {
        false
    }

    fn has_generation(&self, _rt: &ResourceType) -> bool {
        true
    }
}
