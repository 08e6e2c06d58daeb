//! The values of a release, composed as Flux's helm-controller composes them
//! (`chartutil.ChartValuesFromReferences`): each `spec.valuesFrom` reference in order — the
//! ConfigMap or Secret read in the HelmRelease's namespace, its `valuesKey` (default
//! `values.yaml`) read as a values file and merged, or, with `targetPath`, set at that path with
//! Helm's `--set` parser (`--set-string` for a quoted value, `--set-literal` with `literal`) —
//! then `spec.values` merged on top. Maps merge recursively; anything else replaces.
//!
//! # Errors
//! [`ValuesError`], worded as Flux's: `could not resolve [optional] <Kind> chart values
//! reference '<namespace>/<name>' with key '<key>': <reason>`. A missing optional referent or
//! key is skipped. Values never appear in errors (a Secret's may be secret).

use std::collections::BTreeMap;

use capstan_api::HelmRelease;
use capstan_api::meta::{ValuesKind, ValuesReference};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client, ResourceExt};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

/// Helm values: a JSON object.
pub type Values = Map<String, Value>;

/// The reason of a failed values composition (Flux's `ValuesError`).
pub const VALUES_ERROR: &str = "ValuesError";

/// A `valuesFrom` reference that could not be resolved.
#[derive(Debug, thiserror::Error)]
#[error("could not resolve{} {kind} chart values reference '{namespace}/{name}' with key '{key}': {reason}", if *.optional { " optional" } else { "" })]
pub struct ValuesError {
    /// `ConfigMap` or `Secret`.
    pub kind: &'static str,
    /// The referent's namespace.
    pub namespace: String,
    /// The referent's name.
    pub name: String,
    /// The data key.
    pub key: String,
    /// Whether the reference is optional.
    pub optional: bool,
    /// Why (never the values).
    pub reason: String,
    /// Whether the referent could not be read at all (an API error: worth a retry).
    pub transient: bool,
}

/// The data of one referent, read once per composition (Flux reads each object once).
pub type Data = Option<BTreeMap<String, Vec<u8>>>;

/// Composes the values of `object` with `client` (see the module docs).
///
/// # Errors
/// [`ValuesError`] for a missing referent or key that is not optional, data that is not a
/// values file, or a `targetPath` Helm's parser refuses.
pub async fn compose(client: &Client, object: &HelmRelease) -> Result<Values, ValuesError> {
    let namespace = object.namespace().unwrap_or_default();
    let mut read: BTreeMap<(String, String), Data> = BTreeMap::new();
    for reference in &object.spec.values_from {
        let key = (kind_name(reference.kind).to_owned(), reference.name.clone());
        if !read.contains_key(&key) {
            let data = fetch(client, &namespace, reference).await?;
            read.insert(key.clone(), data);
        }
    }
    merge_references(object, &namespace, &read)
}

/// [`compose`] over data already read: `data` holds every referent by kind (`ConfigMap`,
/// `Secret`) and name (`None`
/// when it does not exist). Used by `capstan build helmrelease` with files given locally.
///
/// # Errors
/// As [`compose`].
pub fn merge_references(
    object: &HelmRelease,
    namespace: &str,
    data: &BTreeMap<(String, String), Data>,
) -> Result<Values, ValuesError> {
    let mut result = Values::new();
    for reference in &object.spec.values_from {
        let error = |reason: &str| ValuesError {
            kind: kind_name(reference.kind),
            namespace: namespace.to_owned(),
            name: reference.name.clone(),
            key: reference.values_key().to_owned(),
            optional: reference.optional.unwrap_or(false),
            reason: reason.to_owned(),
            transient: false,
        };
        let optional = reference.optional.unwrap_or(false);
        let Some(Some(found)) =
            data.get(&(kind_name(reference.kind).to_owned(), reference.name.clone()))
        else {
            if optional {
                tracing::info!("{}", error("resource not found"));
                continue;
            }
            return Err(error("resource not found"));
        };
        let Some(bytes) = found.get(reference.values_key()) else {
            if optional {
                tracing::info!("{}", error("key not found"));
                continue;
            }
            return Err(error("key not found"));
        };
        let text = String::from_utf8_lossy(bytes);
        if let Some(path) = reference.target_path.as_deref().filter(|p| !p.is_empty()) {
            set_path(&mut result, path, &text, reference.literal.unwrap_or(false))
                .map_err(|reason| error(&format!("failed to merge value: {reason}")))?;
            continue;
        }
        let values = read_values(&text)
            .map_err(|reason| error(&format!("failed to read values data: {reason}")))?;
        capstan_helm::output::merge_maps(&mut result, values);
    }
    capstan_helm::output::merge_maps(&mut result, spec_values(object));
    Ok(result)
}

/// `spec.values` as Flux reads them (`json.Unmarshal` into `map[string]interface{}`: every
/// number a `float64`).
pub fn spec_values(object: &HelmRelease) -> Values {
    match floats(Value::Object(object.values())) {
        Value::Object(map) => map,
        _ => Values::new(),
    }
}

/// A values file (Helm's `chartutil.ReadValues`): YAML, an empty text is no values.
///
/// # Errors
/// The YAML reader's message; a document that is not a map.
pub fn read_values(text: &str) -> Result<Values, String> {
    match capstan_helm::yaml::parse(text).map_err(|e| e.message)? {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Values::new()),
        _ => Err("error unmarshaling JSON: json: cannot unmarshal into Go value of type map[string]interface {}".to_owned()),
    }
}

/// Flux's `ReplacePathValue`: `path=value` through Helm's `--set` parser, or `--set-string`
/// for a value in single or double quotes (the quotes trimmed), or `--set-literal`.
fn set_path(values: &mut Values, path: &str, value: &str, literal: bool) -> Result<(), String> {
    let quoted = |q: char| value.len() >= 2 && value.starts_with(q) && value.ends_with(q);
    let result = if literal {
        capstan_helm::strvals::parse_literal_into(&format!("{path}={value}"), values)
    } else if quoted('\'') || quoted('"') {
        let trimmed = value.trim_matches(|c| c == '\'' || c == '"');
        capstan_helm::strvals::parse_string_into(&format!("{path}={trimmed}"), values)
    } else {
        capstan_helm::strvals::parse_into(&format!("{path}={value}"), values)
    };
    // Helm's parser errors may quote the expression, hence the value: keep only its words.
    result.map_err(|e| e.message.replace(value, "<value>"))
}

async fn fetch(
    client: &Client,
    namespace: &str,
    reference: &ValuesReference,
) -> Result<Data, ValuesError> {
    let failed = |e: &kube::Error| ValuesError {
        kind: kind_name(reference.kind),
        namespace: namespace.to_owned(),
        name: reference.name.clone(),
        key: reference.values_key().to_owned(),
        optional: reference.optional.unwrap_or(false),
        reason: e.to_string(),
        transient: true,
    };
    match reference.kind {
        ValuesKind::ConfigMap => {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
            let found = api.get_opt(&reference.name).await.map_err(|e| failed(&e))?;
            Ok(found.map(|c| {
                let mut data: BTreeMap<String, Vec<u8>> = c
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.into_bytes()))
                    .collect();
                for (k, v) in c.binary_data.unwrap_or_default() {
                    data.entry(k).or_insert(v.0);
                }
                data
            }))
        }
        ValuesKind::Secret => {
            let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
            let found = api.get_opt(&reference.name).await.map_err(|e| failed(&e))?;
            Ok(found.map(|s| {
                s.data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect()
            }))
        }
    }
}

/// `ConfigMap` or `Secret`.
pub fn kind_name(kind: ValuesKind) -> &'static str {
    match kind {
        ValuesKind::ConfigMap => "ConfigMap",
        ValuesKind::Secret => "Secret",
    }
}

/// Every JSON number as a float64, as Go's `json.Unmarshal` into `interface{}` reads it.
fn floats(value: Value) -> Value {
    match value {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Number(n), Value::Number),
        Value::Array(items) => Value::Array(items.into_iter().map(floats).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, floats(v))).collect()),
        other => other,
    }
}

/// Flux's `chartutil.DigestValues`: `sha256:` of the values as YAML with sorted keys (the
/// empty values digest the empty text).
pub fn digest(values: &Values) -> String {
    let text = if values.is_empty() {
        String::new()
    } else {
        capstan_helm::yaml::to_yaml(&capstan_helm::Value::from_json(&Value::Object(
            values.clone(),
        )))
        .unwrap_or_else(|_| serde_json::to_string(values).unwrap_or_default())
    };
    sha256(text.as_bytes())
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    let sum = Sha256::digest(bytes);
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    for byte in sum {
        use std::fmt::Write as _;
        let _ = write!(out, "{byte:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(spec: &Value) -> HelmRelease {
        let mut full = serde_json::json!({
            "interval": "5m",
            "chartRef": {"kind": "OCIRepository", "name": "podinfo"},
        });
        full.as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        let mut object = HelmRelease::new("web", serde_json::from_value(full).unwrap());
        object.metadata.namespace = Some("apps".into());
        object
    }

    fn data(entries: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn references_merge_in_order_then_spec_values() {
        let object = release(&serde_json::json!({
            "valuesFrom": [
                {"kind": "ConfigMap", "name": "base"},
                {"kind": "Secret", "name": "creds", "valuesKey": "token", "targetPath": "auth.token"},
                {"kind": "ConfigMap", "name": "base", "valuesKey": "tag", "targetPath": "image.tag"},
                {"kind": "ConfigMap", "name": "absent", "optional": true},
            ],
            "values": {"replicaCount": 3, "image": {"repository": "nginx"}},
        }));
        let mut read = BTreeMap::new();
        read.insert(
            ("ConfigMap".to_owned(), "base".to_owned()),
            Some(data(&[
                (
                    "values.yaml",
                    "replicaCount: 1\nimage:\n  tag: x\n  pullPolicy: Always\n",
                ),
                ("tag", "\"1.0\""),
            ])),
        );
        read.insert(
            ("Secret".to_owned(), "creds".to_owned()),
            Some(data(&[("token", "s3cr3t")])),
        );
        read.insert(("ConfigMap".to_owned(), "absent".to_owned()), None);
        let values = merge_references(&object, "apps", &read).unwrap();
        assert_eq!(values["replicaCount"], 3.0);
        assert_eq!(values["image"]["tag"], "1.0", "quoted: a string");
        assert_eq!(values["image"]["pullPolicy"], "Always");
        assert_eq!(values["image"]["repository"], "nginx");
        assert_eq!(values["auth"]["token"], "s3cr3t");
    }

    #[test]
    fn missing_references_fail_unless_optional_without_the_values() {
        let object = release(&serde_json::json!({
            "valuesFrom": [{"kind": "Secret", "name": "creds", "valuesKey": "v"}],
        }));
        let mut read = BTreeMap::new();
        read.insert(("Secret".to_owned(), "creds".to_owned()), None);
        let error = merge_references(&object, "apps", &read).unwrap_err();
        assert_eq!(
            error.to_string(),
            "could not resolve Secret chart values reference 'apps/creds' with key 'v': resource not found"
        );
        read.insert(
            ("Secret".to_owned(), "creds".to_owned()),
            Some(data(&[("v", "a: [unclosed: s3cr3t")])),
        );
        let error = merge_references(&object, "apps", &read)
            .unwrap_err()
            .to_string();
        assert!(error.contains("failed to read values data"), "{error}");
        assert!(!error.contains("s3cr3t"), "{error}");
    }

    #[test]
    fn digests_are_stable_and_follow_the_values() {
        let empty = digest(&Values::new());
        assert_eq!(
            empty,
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let a: Values =
            serde_json::from_value(serde_json::json!({"b": 1, "a": {"c": "x"}})).unwrap();
        let b: Values =
            serde_json::from_value(serde_json::json!({"a": {"c": "x"}, "b": 1})).unwrap();
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(digest(&a), empty);
    }
}
