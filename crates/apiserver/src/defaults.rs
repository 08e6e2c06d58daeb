//! Defaulting and validation rules of built-in kinds that a schema cannot express.

use serde_json::{Map, Value, json};

use crate::error::Cause;
use crate::registry::ResourceType;

fn obj_mut<'a>(parent: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    parent.get_mut(key).and_then(Value::as_object_mut)
}

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_owned(), value);
    }
}

fn default_containers(list: Option<&mut Value>) {
    let Some(list) = list.and_then(Value::as_array_mut) else {
        return;
    };
    for c in list.iter_mut().filter_map(Value::as_object_mut) {
        set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
        set_default(c, "terminationMessagePolicy", json!("File"));
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let last = image.rsplit('/').next().unwrap_or("");
        let tagged = last.contains(':') && !last.ends_with(":latest");
        let policy = if tagged || image.contains('@') {
            "IfNotPresent"
        } else {
            "Always"
        };
        set_default(c, "imagePullPolicy", json!(policy));
        if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                set_default(p, "protocol", json!("TCP"));
            }
        }
    }
}

fn default_pod_spec(spec: Option<&mut Value>, restart_policy: &str) {
    let Some(spec) = spec else { return };
    if let Some(s) = spec.as_object_mut() {
        set_default(s, "restartPolicy", json!(restart_policy));
        set_default(s, "terminationGracePeriodSeconds", json!(30));
        set_default(s, "dnsPolicy", json!("ClusterFirst"));
        set_default(s, "schedulerName", json!("default-scheduler"));
        set_default(s, "securityContext", json!({}));
    }
    default_containers(spec.get_mut("containers"));
    default_containers(spec.get_mut("initContainers"));
}

fn template_spec(obj: &mut Value) -> Option<&mut Value> {
    obj.get_mut("spec")?.get_mut("template")?.get_mut("spec")
}

/// Applies the API server's defaults for built-in kinds. `old` is the previous state on updates;
/// `allocate_ip` hands out Service cluster IPs.
pub fn apply_builtin(
    rt: &ResourceType,
    obj: &mut Value,
    old: Option<&Value>,
    allocate_ip: &dyn Fn() -> String,
) {
    if !rt.builtin {
        return;
    }
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "namespaces") => {
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
        ("", "services") => {
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
        ("", "secrets") => {
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
        ("", "pods") => {
            default_pod_spec(obj.get_mut("spec"), "Always");
            // A new pod is Pending until a kubelet reports on it (there is none here).
            if old.is_none() && obj.get("status").is_none_or(|s| s.get("phase").is_none()) {
                obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
            }
        }
        ("apps", "deployments") => {
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
        ("apps", "replicasets") => {
            if let Some(spec) = obj_mut(obj, "spec") {
                set_default(spec, "replicas", json!(1));
            }
            default_pod_spec(template_spec(obj), "Always");
        }
        ("apps", "statefulsets") => {
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
        ("apps", "daemonsets") => {
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
        ("batch", "jobs") => {
            if let Some(spec) = obj_mut(obj, "spec") {
                set_default(spec, "backoffLimit", json!(6));
                set_default(spec, "completions", json!(1));
                set_default(spec, "parallelism", json!(1));
                set_default(spec, "completionMode", json!("NonIndexed"));
                set_default(spec, "suspend", json!(false));
            }
            default_pod_spec(template_spec(obj), "Never");
        }
        ("batch", "cronjobs") => {
            if let Some(spec) = obj_mut(obj, "spec") {
                set_default(spec, "concurrencyPolicy", json!("Allow"));
                set_default(spec, "suspend", json!(false));
                set_default(spec, "successfulJobsHistoryLimit", json!(3));
                set_default(spec, "failedJobsHistoryLimit", json!(1));
            }
            let pod = obj.pointer_mut("/spec/jobTemplate/spec/template/spec");
            default_pod_spec(pod, "Never");
        }
        _ => {}
    }
}

pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn required(field: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: field.to_owned(),
    }
}

fn check_containers(spec: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    let Some(spec) = spec else { return };
    match spec.get("containers").and_then(Value::as_array) {
        Some(list) if !list.is_empty() => {
            for (i, c) in list.iter().enumerate() {
                if c.get("name")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    causes.push(required(&format!("{path}.containers[{i}].name")));
                }
                if c.get("image")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    causes.push(required(&format!("{path}.containers[{i}].image")));
                }
            }
        }
        _ => causes.push(required(&format!("{path}.containers"))),
    }
}

/// Semantic checks of built-in kinds beyond their schema.
pub fn validate_builtin(rt: &ResourceType, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments" | "statefulsets" | "daemonsets" | "replicasets") => {
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
                &mut causes,
            );
        }
        ("batch", "jobs") => check_containers(
            obj.pointer("/spec/template/spec"),
            "spec.template.spec",
            &mut causes,
        ),
        ("", "pods") => check_containers(obj.get("spec"), "spec", &mut causes),
        ("", "services") => {
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
        _ => {}
    }
    causes
}

#[cfg(test)]
mod update_tests {
    use super::*;

    fn rt(group: &str, plural: &str) -> ResourceType {
        crate::builtins::resource_types()
            .into_iter()
            .find(|r| r.group == group && r.plural == plural)
            .unwrap()
    }

    #[test]
    fn immutable_fields_of_built_in_kinds() {
        let job =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}});
        let mut changed = job.clone();
        changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("y");
        let causes = validate_builtin_update(&rt("batch", "jobs"), &job, &changed);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.template");
        assert!(causes[0].message.ends_with("field is immutable"));
        assert!(validate_builtin_update(&rt("batch", "jobs"), &job, &job).is_empty());

        let d = json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "replicas": 1}});
        let mut scaled = d.clone();
        scaled["spec"]["replicas"] = json!(3);
        assert!(validate_builtin_update(&rt("apps", "deployments"), &d, &scaled).is_empty());
        let mut reselected = d.clone();
        reselected["spec"]["selector"]["matchLabels"]["app"] = json!("b");
        assert_eq!(
            validate_builtin_update(&rt("apps", "deployments"), &d, &reselected)[0].field,
            "spec.selector"
        );

        let cm = json!({"immutable": true, "data": {"a": "1"}});
        let edited = json!({"immutable": true, "data": {"a": "2"}});
        assert_eq!(
            validate_builtin_update(&rt("", "configmaps"), &cm, &edited)[0].field,
            "data"
        );

        let rb = json!({"roleRef": {"kind": "Role", "name": "a"}});
        let rb2 = json!({"roleRef": {"kind": "Role", "name": "b"}});
        assert!(
            validate_builtin_update(&rt("rbac.authorization.k8s.io", "rolebindings"), &rb, &rb2)[0]
                .message
                .contains("cannot change roleRef")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foo"), "Zm9v");
        assert_eq!(base64_encode(b"hello world"), "aGVsbG8gd29ybGQ=");
    }
}

fn immutable(field: &str, value: Option<&Value>) -> Cause {
    let shown = value.map_or_else(|| "null".to_owned(), Value::to_string);
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {shown}: field is immutable"),
        field: field.to_owned(),
    }
}

fn forbidden(field: &str, message: &str) -> Cause {
    Cause {
        reason: "FieldValueForbidden".into(),
        message: format!("Forbidden: {message}"),
        field: field.to_owned(),
    }
}

/// Update rules of built-in kinds: the fields a real API server refuses to change.
pub fn validate_builtin_update(rt: &ResourceType, old: &Value, new: &Value) -> Vec<Cause> {
    if !rt.builtin {
        return Vec::new();
    }
    let mut causes = Vec::new();
    let changed = |pointer: &str| old.pointer(pointer) != new.pointer(pointer);
    let check = |causes: &mut Vec<Cause>, pointer: &str, field: &str| {
        if changed(pointer) {
            causes.push(immutable(field, new.pointer(pointer)));
        }
    };
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("apps", "deployments" | "replicasets" | "daemonsets") => {
            check(&mut causes, "/spec/selector", "spec.selector");
        }
        ("apps", "statefulsets") => {
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
        ("batch", "jobs") => {
            check(&mut causes, "/spec/selector", "spec.selector");
            check(&mut causes, "/spec/template", "spec.template");
            check(&mut causes, "/spec/completionMode", "spec.completionMode");
        }
        ("", "services") => {
            let external =
                |v: &Value| v.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName");
            if !external(old) && !external(new) {
                check(&mut causes, "/spec/clusterIP", "spec.clusterIP");
            }
        }
        ("", "configmaps" | "secrets") => {
            if old.get("immutable") == Some(&Value::Bool(true)) {
                for field in ["data", "binaryData", "stringData", "immutable"] {
                    if changed(&format!("/{field}")) {
                        causes.push(forbidden(
                            field,
                            "field is immutable when `immutable` is set",
                        ));
                    }
                }
            }
            if rt.plural == "secrets" {
                check(&mut causes, "/type", "type");
            }
        }
        ("", "persistentvolumeclaims") => {
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
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings")
            if changed("/roleRef") =>
        {
            causes.push(Cause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: {}: cannot change roleRef",
                    new.pointer("/roleRef").unwrap_or(&Value::Null)
                ),
                field: "roleRef".into(),
            });
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            check(&mut causes, "/spec/scope", "spec.scope");
        }
        _ => {}
    }
    causes
}
