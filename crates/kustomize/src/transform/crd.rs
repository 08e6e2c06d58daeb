//! Name-reference configuration read from CRDs listed under `crds:`.

use serde_json::{Map, Value};

use crate::config::TransformerConfig;
use crate::resource::split_api_version;
use crate::types::FieldSpec;

/// Name-reference configuration from a CRD's `x-kubernetes-object-ref-*` schema extensions.
pub(crate) fn config_from_crd(document: &Value) -> TransformerConfig {
    let mut config = TransformerConfig::default();
    let kind = document
        .pointer("/spec/names/kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let versions: Vec<&Value> = document
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    let mut schemas = Vec::new();
    for version in versions {
        if let Some(schema) = version.pointer("/schema/openAPIV3Schema") {
            schemas.push(schema);
        }
    }
    if let Some(schema) = document.pointer("/spec/validation/openAPIV3Schema") {
        schemas.push(schema);
    }
    // kustomize's legacy OpenAPI definitions format: {"definitions": {...}}
    for schema in schemas {
        collect_refs(schema, &kind, &mut Vec::new(), &mut config);
    }
    // kustomize's legacy CRD format: {"<pkg>.Kind": {"Schema": {...}}, ...} with `$ref`s between entries.
    if let Some(all) = document.as_object()
        && document.get("kind").is_none()
    {
        for (name, definition) in all {
            let Some(schema) = definition.get("Schema") else {
                continue;
            };
            let is_root = schema.pointer("/properties/kind").is_some()
                && schema.pointer("/properties/apiVersion").is_some();
            if !is_root {
                continue;
            }
            let kind = name.rsplit('.').next().unwrap_or("").to_owned();
            collect_legacy_refs(all, schema, &kind, &mut Vec::new(), &mut config, 0);
        }
    }
    if let Some(definitions) = document.get("definitions").and_then(Value::as_object) {
        for definition in definitions.values() {
            let kind = definition
                .pointer("/x-kubernetes-group-version-kind/0/kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            collect_refs(definition, &kind, &mut Vec::new(), &mut config);
        }
    }
    config
}

fn collect_legacy_refs(
    all: &Map<String, Value>,
    schema: &Value,
    kind: &str,
    path: &mut Vec<String>,
    config: &mut TransformerConfig,
    depth: usize,
) {
    if depth > 16 {
        return;
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        if name == "metadata" || name == "apiVersion" || name == "kind" {
            continue;
        }
        path.push(name.clone());
        let ref_kind = property
            .get("x-kubernetes-object-ref-kind")
            .and_then(Value::as_str);
        let ref_version = property
            .get("x-kubernetes-object-ref-api-version")
            .and_then(Value::as_str);
        if let (Some(ref_kind), Some(ref_version)) = (ref_kind, ref_version) {
            let (group, version) = split_api_version(ref_version);
            config.merge(TransformerConfig {
                name_reference: vec![crate::config::NameBackRef {
                    kind: ref_kind.to_owned(),
                    group,
                    version,
                    referrers: vec![FieldSpec {
                        kind: kind.to_owned(),
                        path: path.join("/"),
                        ..FieldSpec::default()
                    }],
                }],
                ..TransformerConfig::default()
            });
        } else if let Some(target) = property
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| all.get(r))
            .and_then(|d| d.get("Schema"))
        {
            collect_legacy_refs(all, target, kind, path, config, depth + 1);
        } else {
            collect_legacy_refs(all, property, kind, path, config, depth + 1);
        }
        path.pop();
    }
}

fn collect_refs(
    schema: &Value,
    kind: &str,
    path: &mut Vec<String>,
    config: &mut TransformerConfig,
) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        path.push(name.clone());
        let ref_kind = property
            .get("x-kubernetes-object-ref-kind")
            .and_then(Value::as_str);
        let ref_version = property
            .get("x-kubernetes-object-ref-api-version")
            .and_then(Value::as_str);
        if let (Some(ref_kind), Some(ref_version)) = (ref_kind, ref_version) {
            let (group, version) = split_api_version(ref_version);
            config.merge(TransformerConfig {
                name_reference: vec![crate::config::NameBackRef {
                    kind: ref_kind.to_owned(),
                    group,
                    version,
                    referrers: vec![FieldSpec {
                        kind: kind.to_owned(),
                        path: path.join("/"),
                        ..FieldSpec::default()
                    }],
                }],
                ..TransformerConfig::default()
            });
        }
        collect_refs(property, kind, path, config);
        path.pop();
    }
}
