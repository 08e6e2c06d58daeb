//! CustomResourceDefinitions: validation, `status` (NamesAccepted, Established) and serving the
//! resources they define. Runs inline with CRD writes, so a CRD is served as soon as it is created.

use capstan_schema::Schema;
use serde_json::{Value, json};

use crate::cluster::{Cluster, now};
use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::{PrinterColumn, ResourceType};

const OBJECT_META: &str = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

fn is_crd(rt: &ResourceType) -> bool {
    rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions"
}

fn invalid(name: &str, field: &str, message: &str) -> ApiError {
    ApiError::invalid(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        name,
        vec![Cause {
            reason: "FieldValueInvalid".into(),
            message: message.to_owned(),
            field: field.to_owned(),
        }],
    )
}

/// The object schema JSON served for one CRD version (its openAPIV3Schema plus standard fields).
fn object_schema(version: &Value) -> Value {
    let mut schema = version
        .pointer("/schema/openAPIV3Schema")
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if let Some(o) = schema.as_object_mut() {
        let props = o.entry("properties").or_insert_with(|| json!({}));
        if let Some(p) = props.as_object_mut() {
            p.insert("apiVersion".into(), json!({"type": "string"}));
            p.insert("kind".into(), json!({"type": "string"}));
            p.insert("metadata".into(), json!({"$ref": OBJECT_META}));
        }
        o.entry("type").or_insert_with(|| json!("object"));
    }
    schema
}

/// Resource types a CRD defines (one per served version).
pub fn resource_types(crd: &Value) -> ApiResult<Vec<ResourceType>> {
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let spec = crd
        .get("spec")
        .ok_or_else(|| invalid(name, "spec", "Required value"))?;
    let s = |p: &str| {
        spec.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let group = s("/group");
    let plural = s("/names/plural");
    let kind = s("/names/kind");
    let scope = s("/scope");
    check_names(name, &group, &plural, &kind, &scope)?;
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage_version = storage_version(name, &versions)?;
    let singular = spec
        .pointer("/names/singular")
        .and_then(Value::as_str)
        .map_or_else(|| kind.to_lowercase(), str::to_owned);
    let strings = |p: &str| -> Vec<String> {
        spec.pointer(p)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let vname = v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if vname.is_empty() {
            return Err(invalid(
                name,
                &format!("spec.versions[{i}].name"),
                "Required value",
            ));
        }
        let openapi = object_schema(v);
        let schema = Schema::from_openapi(&openapi, capstan_schema::builtin::definitions())
            .map_err(|e| {
                invalid(
                    name,
                    &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    &format!("Invalid value: {e}"),
                )
            })?;
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        out.push(ResourceType {
            group: group.clone(),
            version: vname,
            kind: kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            short_names: strings("/names/shortNames"),
            namespaced: scope == "Namespaced",
            categories: strings("/names/categories"),
            status: v.pointer("/subresources/status").is_some(),
            scale: v.pointer("/subresources/scale").is_some(),
            schema: Some(schema),
            openapi: Some(openapi),
            builtin: false,
            printer_columns: printer_columns(v),
            storage_version: storage_version.clone(),
        });
    }
    Ok(out)
}

/// Checks a CRD's group, names and scope are present and agree with its name.
fn check_names(name: &str, group: &str, plural: &str, kind: &str, scope: &str) -> ApiResult<()> {
    if group.is_empty() {
        return Err(invalid(name, "spec.group", "Required value"));
    }
    if plural.is_empty() {
        return Err(invalid(name, "spec.names.plural", "Required value"));
    }
    if kind.is_empty() {
        return Err(invalid(name, "spec.names.kind", "Required value"));
    }
    if name != format!("{plural}.{group}") {
        return Err(invalid(
            name,
            "metadata.name",
            &format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if scope != "Namespaced" && scope != "Cluster" {
        return Err(invalid(
            name,
            "spec.scope",
            &format!("Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    Ok(())
}

/// The name of a CRD's one storage version.
fn storage_version(name: &str, versions: &[Value]) -> ApiResult<String> {
    if versions.is_empty() {
        return Err(invalid(
            name,
            "spec.versions",
            "Required value: must have exactly one version marked as storage version",
        ));
    }
    let storage: Vec<&Value> = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .collect();
    if storage.len() != 1 {
        return Err(invalid(
            name,
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    Ok(storage[0]
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned())
}

/// The `additionalPrinterColumns` of one CRD version.
fn printer_columns(version: &Value) -> Vec<PrinterColumn> {
    version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .map(|c| {
                    let g = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                    PrinterColumn {
                        name: g("name"),
                        type_: g("type"),
                        format: g("format"),
                        json_path: g("jsonPath"),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        description: g("description"),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

fn condition(type_: &str, reason: &str, message: &str, previous: Option<&Value>) -> Value {
    let time = previous
        .and_then(|c| c.as_array())
        .and_then(|a| {
            a.iter()
                .find(|c| c["type"] == type_ && c["status"] == "True")
        })
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(now()));
    json!({"type": type_, "status": "True", "lastTransitionTime": time, "reason": reason, "message": message})
}

/// Refuses groups Kubernetes reserves and resources another definition already serves, so a CRD can
/// never take over (or, when deleted, wipe) a built-in resource.
fn check_group(cluster: &Cluster, crd: &Value, types: &[ResourceType]) -> ApiResult<()> {
    let Some(first) = types.first() else {
        return Ok(());
    };
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let group = first.group.as_str();
    if !group.contains('.') {
        return Err(invalid(
            name,
            "spec.group",
            &format!("Invalid value: {group:?}: should be a domain with at least one dot"),
        ));
    }
    let approved = crd
        .pointer("/metadata/annotations")
        .and_then(|a| a.get("api-approved.kubernetes.io"))
        .is_some();
    let protected = group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io");
    if protected && !approved {
        return Err(invalid(
            name,
            "metadata.annotations[api-approved.kubernetes.io]",
            &format!(
                "Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111 (group {group:?})"
            ),
        ));
    }
    let registry = cluster.registry();
    let taken = registry
        .versions_of(group, &first.plural)
        .iter()
        .any(|rt| rt.builtin)
        || registry.crd_names().into_iter().any(|other| {
            other != name
                && registry
                    .crd_registration(&other)
                    .is_some_and(|(g, p, _)| g == group && *p == first.plural)
        });
    if taken {
        return Err(invalid(
            name,
            "spec.names.plural",
            &format!(
                "Invalid value: {:?}: {}.{group} is already served",
                first.plural, first.plural
            ),
        ));
    }
    Ok(())
}

/// Runs before a write: validates a CRD and sets its status.
pub fn on_write(
    cluster: &Cluster,
    rt: &ResourceType,
    obj: &mut Value,
    _dry_run: bool,
) -> ApiResult<()> {
    if !is_crd(rt) {
        return Ok(());
    }
    let types = resource_types(obj)?;
    check_group(cluster, obj, &types)?;
    let spec = &obj["spec"];
    let mut accepted = spec.get("names").cloned().unwrap_or(json!({}));
    if let Some(a) = accepted.as_object_mut()
        && let Some(first) = types.first()
    {
        a.insert("singular".into(), json!(first.singular));
        a.entry("listKind")
            .or_insert_with(|| json!(format!("{}List", first.kind)));
    }
    let storage = spec
        .get("versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name").cloned())
        .unwrap_or(Value::Null);
    let previous = obj.pointer("/status/conditions").cloned();
    let mut stored_versions: Vec<Value> = obj
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !stored_versions.contains(&storage) {
        stored_versions.push(storage);
    }
    obj["status"] = json!({
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found", previous.as_ref()),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted", previous.as_ref()),
        ],
        "acceptedNames": accepted,
        "storedVersions": stored_versions,
    });
    Ok(())
}

/// Runs after a CRD is stored: serves its versions.
pub fn after_write(cluster: &Cluster, rt: &ResourceType, obj: &Value) {
    if !is_crd(rt) {
        return;
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let mut registry = cluster.registry_mut();
    // Concurrent CRD writes may finish out of order: serve what is stored now, read under the
    // registry lock, not the state this write saw.
    let key = rt.storage_key();
    let Some(current) = cluster.store().get(&key, &(String::new(), name.clone())) else {
        return;
    };
    if current
        .value
        .pointer("/metadata/deletionTimestamp")
        .is_some()
    {
        return;
    }
    let Ok(types) = resource_types(&current.value) else {
        return;
    };
    if let Some((group, plural, versions)) = registry.crd_registration(&name).cloned() {
        for v in versions {
            registry.remove(&group, &v, &plural);
        }
    }
    let Some(first) = types.first() else { return };
    let (group, plural) = (first.group.clone(), first.plural.clone());
    let versions = types.iter().map(|t| t.version.clone()).collect();
    for t in types {
        registry.insert(t);
    }
    registry.set_crd_registration(&name, &group, &plural, versions);
}

/// Runs after a CRD is removed: stops serving it, then deletes its objects (with DELETED events, so
/// watchers see them go; the table keeps its watch history).
pub fn after_delete(cluster: &Cluster, rt: &ResourceType, obj: &Value) {
    if !is_crd(rt) {
        return;
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let registration = {
        let mut registry = cluster.registry_mut();
        let registration = registry.remove_crd_registration(name);
        if let Some((group, plural, versions)) = &registration {
            for v in versions {
                registry.remove(group, v, plural);
            }
        }
        registration
    };
    let Some((group, plural, _)) = registration else {
        return;
    };
    let key = crate::registry::StorageKey {
        group,
        resource: plural,
    };
    let (objects, _) = cluster.store().list(&key, None);
    for o in objects {
        let _ = cluster.store().write(
            &key,
            (o.namespace().to_owned(), o.name().to_owned()),
            None,
            None,
            false,
        );
    }
}
