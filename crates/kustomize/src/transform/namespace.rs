//! The namespace transformer.

use serde_json::{Map, Value};

use crate::fieldspec::{self, applies};
use crate::resource::{Resource, is_cluster_scoped};
use crate::types::FieldSpec;

/// The namespace transformer.
pub(crate) fn set_namespace(
    resources: &mut [Resource],
    namespace: &str,
    specs: &[FieldSpec],
    unset_only: bool,
    subjects: &str,
) {
    for resource in resources.iter_mut() {
        if resource.object.as_object().is_none_or(Map::is_empty) {
            continue;
        }
        resource.store_previous_id();
        let id = resource.current_id();
        let set = |v: &mut Value| {
            if !unset_only || v.as_str().is_none_or(str::is_empty) {
                *v = Value::String(namespace.to_owned());
            }
        };
        if !is_cluster_scoped(&id.kind) {
            let _ = fieldspec::visit(&mut resource.object, "metadata/namespace", true, &mut |v| {
                set(v);
                Ok(())
            });
        }
        let is_binding = id.kind == "RoleBinding" || id.kind == "ClusterRoleBinding";
        if is_binding
            && subjects != "none"
            && let Some(list) = resource
                .object
                .get_mut("subjects")
                .and_then(Value::as_array_mut)
        {
            for subject in list {
                let Some(map) = subject.as_object_mut() else {
                    continue;
                };
                let pick = if subjects == "allServiceAccounts" {
                    map.get("kind").and_then(Value::as_str) == Some("ServiceAccount")
                } else {
                    map.get("name").and_then(Value::as_str) == Some("default")
                };
                if pick {
                    let slot = map.entry("namespace").or_insert(Value::Null);
                    set(slot);
                }
            }
        }
        for spec in specs {
            if spec.path == "metadata/namespace" || !applies(spec, &id) {
                continue;
            }
            if spec.path == "metadata/name" && resource.api_version() != "v1" {
                continue;
            }
            if is_binding && spec.path == "subjects/namespace" {
                continue;
            }
            let _ = fieldspec::visit(&mut resource.object, &spec.path, spec.create, &mut |v| {
                set(v);
                Ok(())
            });
        }
    }
}
