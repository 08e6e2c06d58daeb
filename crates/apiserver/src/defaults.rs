//! Defaulting and validation rules of built-in kinds that a schema cannot express.

use serde_json::{Map, Value, json};

use crate::error::Cause;
use crate::registry::ResourceType;
use crate::strategy;

pub(crate) fn obj_mut<'a>(parent: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    parent.get_mut(key).and_then(Value::as_object_mut)
}

pub(crate) fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
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

pub(crate) fn default_pod_spec(spec: Option<&mut Value>, restart_policy: &str) {
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

pub(crate) fn template_spec(obj: &mut Value) -> Option<&mut Value> {
    obj.get_mut("spec")?.get_mut("template")?.get_mut("spec")
}

/// Applies the API server's defaults for built-in kinds (the kind's [`strategy`]). `old` is the previous state on updates;
/// `allocate_ip` hands out Service cluster IPs.
pub fn apply_builtin(
    rt: &ResourceType,
    obj: &mut Value,
    old: Option<&Value>,
    allocate_ip: &dyn Fn() -> String,
) {
    strategy::of(rt).default(obj, old, allocate_ip);
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

pub(crate) fn required(field: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: field.to_owned(),
    }
}

pub(crate) fn check_containers(spec: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
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

/// Semantic checks of built-in kinds beyond their schema (the kind's [`strategy`]).
pub fn validate_builtin(rt: &ResourceType, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    strategy::of(rt).validate(obj, &mut causes);
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

pub(crate) fn immutable(field: &str, value: Option<&Value>) -> Cause {
    let shown = value.map_or_else(|| "null".to_owned(), Value::to_string);
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {shown}: field is immutable"),
        field: field.to_owned(),
    }
}

pub(crate) fn forbidden(field: &str, message: &str) -> Cause {
    Cause {
        reason: "FieldValueForbidden".into(),
        message: format!("Forbidden: {message}"),
        field: field.to_owned(),
    }
}

/// Update rules of built-in kinds: the fields a real API server refuses to change (the kind's
/// [`strategy`]).
pub fn validate_builtin_update(rt: &ResourceType, old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    strategy::of(rt).validate_update(old, new, &mut causes);
    causes
}
