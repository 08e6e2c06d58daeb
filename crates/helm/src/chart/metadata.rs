//! `Chart.yaml` and `requirements.yaml`: reading, Helm's validation, and `.Chart` as templates
//! see it.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::{Dependency, Error, Metadata};
use crate::value::Value;

/// The fields of `Chart.yaml` that [`Metadata`] keeps typed; everything else goes to `extra`.
const TYPED: &[&str] = &[
    "apiVersion",
    "name",
    "version",
    "appVersion",
    "kubeVersion",
    "type",
    "dependencies",
];

/// Go field names and JSON keys of the plain string fields of `chart.Metadata` kept in `extra`.
const EXTRA_STRINGS: &[(&str, &str)] = &[
    ("Condition", "condition"),
    ("Description", "description"),
    ("Home", "home"),
    ("Icon", "icon"),
    ("Tags", "tags"),
];

const NULL_DEPENDENCY: &str = "validation: dependencies must not contain empty or null nodes";

fn load_error(message: impl std::fmt::Display) -> Error {
    Error::new(format!("cannot load Chart.yaml: {message}"))
}

fn unmarshal_error(found: &Json, structure: &str, field: &str, want: &str) -> String {
    format!(
        "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go struct field {structure}.{field} of type {want}",
        json_kind(found)
    )
}

fn json_kind(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "bool",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

/// A string field: strings as written, numbers as Go prints them (Helm accepts
/// `appVersion: 1.10` and reads `1.1`), null as empty.
fn string_field(value: &Json, structure: &str, field: &str) -> Result<String, String> {
    match value {
        Json::Null => Ok(String::new()),
        Json::String(s) => Ok(s.clone()),
        Json::Number(n) => Ok(number_text(n)),
        Json::Bool(b) => Ok(b.to_string()),
        other => Err(unmarshal_error(other, structure, field, "string")),
    }
}

fn number_text(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    n.as_f64()
        .map_or_else(|| n.to_string(), |f| Value::Float(f).to_string())
}

fn string_list(value: &Json, structure: &str, field: &str) -> Result<Vec<String>, String> {
    match value {
        Json::Null => Ok(Vec::new()),
        Json::Array(items) => items
            .iter()
            .map(|item| string_field(item, structure, field))
            .collect(),
        other => Err(unmarshal_error(other, structure, field, "[]string")),
    }
}

/// Reads `Chart.yaml` (a missing `apiVersion` means v1, as Helm assumes).
pub(crate) fn parse_chart_yaml(data: &[u8]) -> Result<Metadata, Error> {
    let text = String::from_utf8_lossy(data);
    let doc = super::values::parse_yaml(&text).map_err(load_error)?;
    let map = match doc {
        Json::Object(map) => map,
        Json::Null => serde_json::Map::new(),
        other => {
            return Err(load_error(format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type chart.Metadata",
                json_kind(&other)
            )));
        }
    };
    let mut metadata = Metadata::default();
    let get = |key: &str| -> Result<String, Error> {
        map.get(key)
            .map_or(Ok(String::new()), |v| string_field(v, "Metadata", key))
            .map_err(load_error)
    };
    metadata.api_version = get("apiVersion")?;
    metadata.name = get("name")?;
    metadata.version = get("version")?;
    metadata.app_version = get("appVersion")?;
    metadata.kube_version = get("kubeVersion")?;
    metadata.chart_type = get("type")?;
    if let Some(deps) = map.get("dependencies") {
        if deps
            .as_array()
            .is_some_and(|items| items.iter().any(Json::is_null))
        {
            return Err(Error::new(NULL_DEPENDENCY));
        }
        metadata.dependencies = parse_dependencies(deps).map_err(load_error)?;
    }
    check_fields(&map)?;
    for (key, value) in map {
        if !TYPED.contains(&key.as_str()) {
            metadata.extra.insert(key, value);
        }
    }
    if metadata.api_version.is_empty() {
        metadata.api_version = "v1".into();
    }
    Ok(metadata)
}

/// Checks the fields kept untyped in `extra` have the types Go's struct wants, so a bad
/// Chart.yaml fails at load as in Helm.
fn check_fields(map: &serde_json::Map<String, Json>) -> Result<(), Error> {
    for (_, key) in EXTRA_STRINGS {
        if let Some(v) = map.get(*key) {
            string_field(v, "Metadata", key).map_err(load_error)?;
        }
    }
    for key in ["keywords", "sources"] {
        if let Some(v) = map.get(key) {
            string_list(v, "Metadata", key).map_err(load_error)?;
        }
    }
    if let Some(v) = map.get("deprecated")
        && !matches!(v, Json::Bool(_) | Json::Null)
    {
        return Err(load_error(unmarshal_error(
            v,
            "Metadata",
            "deprecated",
            "bool",
        )));
    }
    if let Some(v) = map.get("annotations") {
        match v {
            Json::Null => {}
            Json::Object(entries) => {
                for value in entries.values() {
                    string_field(value, "Metadata", "annotations").map_err(load_error)?;
                }
            }
            other => {
                return Err(load_error(unmarshal_error(
                    other,
                    "Metadata",
                    "annotations",
                    "map[string]string",
                )));
            }
        }
    }
    if let Some(v) = map.get("maintainers") {
        match v {
            Json::Null => {}
            Json::Array(items) => {
                for item in items {
                    if let Json::Object(m) = item {
                        for (k, value) in m {
                            string_field(value, "Maintainer", k).map_err(load_error)?;
                        }
                    } else if !item.is_null() {
                        return Err(load_error(unmarshal_error(
                            item,
                            "Metadata",
                            "maintainers",
                            "chart.Maintainer",
                        )));
                    }
                }
            }
            other => {
                return Err(load_error(unmarshal_error(
                    other,
                    "Metadata",
                    "maintainers",
                    "[]*chart.Maintainer",
                )));
            }
        }
    }
    Ok(())
}

/// Reads `requirements.yaml` (apiVersion v1 charts): its `dependencies`.
pub(crate) fn parse_requirements(data: &[u8]) -> Result<Vec<Dependency>, Error> {
    let text = String::from_utf8_lossy(data);
    let fail = |e: String| Error::new(format!("cannot load requirements.yaml: {e}"));
    let doc = super::values::parse_yaml(&text).map_err(fail)?;
    match doc.get("dependencies") {
        Some(deps) => parse_dependencies(deps).map_err(fail),
        None => Ok(Vec::new()),
    }
}

fn parse_dependencies(value: &Json) -> Result<Vec<Dependency>, String> {
    let items = match value {
        Json::Null => return Ok(Vec::new()),
        Json::Array(items) => items,
        other => {
            return Err(unmarshal_error(
                other,
                "Metadata",
                "dependencies",
                "[]*chart.Dependency",
            ));
        }
    };
    let mut deps = Vec::new();
    for item in items {
        let Json::Object(map) = item else {
            if item.is_null() {
                return Err(NULL_DEPENDENCY.into());
            }
            return Err(unmarshal_error(
                item,
                "Metadata",
                "dependencies",
                "chart.Dependency",
            ));
        };
        let get = |key: &str| {
            map.get(key)
                .map_or(Ok(String::new()), |v| string_field(v, "Dependency", key))
        };
        let import_values = match map.get("import-values") {
            None | Some(Json::Null) => Vec::new(),
            Some(Json::Array(items)) => items.clone(),
            Some(other) => {
                return Err(unmarshal_error(
                    other,
                    "Dependency",
                    "import-values",
                    "[]interface {}",
                ));
            }
        };
        deps.push(Dependency {
            name: get("name")?,
            version: get("version")?,
            repository: get("repository")?,
            condition: get("condition")?,
            tags: map
                .get("tags")
                .map_or(Ok(Vec::new()), |v| string_list(v, "Dependency", "tags"))?,
            enabled: matches!(map.get("enabled"), Some(Json::Bool(true))),
            import_values,
            alias: get("alias")?,
        });
    }
    Ok(deps)
}

/// Helm's `Metadata.Validate`, with its `validation: ` prefix.
pub(crate) fn validate(metadata: &Metadata) -> Result<(), Error> {
    let fail = |m: String| Err(Error::new(format!("validation: {m}")));
    if metadata.api_version.is_empty() {
        return fail("chart.metadata.apiVersion is required".into());
    }
    if metadata.name.is_empty() {
        return fail("chart.metadata.name is required".into());
    }
    if metadata.name.contains('/') || metadata.name == "." || metadata.name == ".." {
        return fail(format!(
            "chart.metadata.name {:?} is invalid",
            metadata.name
        ));
    }
    if metadata.version.is_empty() {
        return fail("chart.metadata.version is required".into());
    }
    if !is_loose_semver(&metadata.version) {
        return fail(format!(
            "chart.metadata.version {:?} is invalid",
            metadata.version
        ));
    }
    if !matches!(metadata.chart_type.as_str(), "" | "application" | "library") {
        return fail("chart.metadata.type must be application or library".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for dep in &metadata.dependencies {
        if !dep.alias.is_empty()
            && !dep
                .alias
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return fail(format!(
                "dependency {:?} has disallowed characters in the alias",
                dep.name
            ));
        }
        let key = if dep.alias.is_empty() {
            &dep.name
        } else {
            &dep.alias
        };
        if !seen.insert(key.clone()) {
            return fail(format!(
                "more than one dependency with name or alias {key:?}"
            ));
        }
    }
    Ok(())
}

/// Masterminds' loose version syntax: `v1`, `1.2`, `1.2.3-rc.1+build`.
fn is_loose_semver(version: &str) -> bool {
    let v = version.strip_prefix('v').unwrap_or(version);
    let (core, rest) = match v.find(['-', '+']) {
        Some(i) => (&v[..i], &v[i..]),
        None => (v, ""),
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty()
        || parts.len() > 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return false;
    }
    let (pre, build) = match rest.split_once('+') {
        Some((pre, build)) => (pre, Some(build)),
        None => (rest, None),
    };
    let ident_ok = |s: &str| {
        s.split('.')
            .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    };
    if let Some(pre) = pre.strip_prefix('-')
        && !ident_ok(pre)
    {
        return false;
    }
    build.is_none_or(ident_ok)
}

fn strings_value(items: &[String]) -> Value {
    Value::list(items.iter().map(Value::str).collect())
}

impl Dependency {
    /// This dependency as `.Chart.Dependencies` shows it: a map with Go's field names.
    pub fn to_value(&self) -> Value {
        let mut map = BTreeMap::new();
        map.insert("Alias".into(), Value::str(&self.alias));
        map.insert("Condition".into(), Value::str(&self.condition));
        map.insert("Enabled".into(), Value::Bool(self.enabled));
        map.insert(
            "ImportValues".into(),
            Value::list(
                self.import_values
                    .iter()
                    .map(Value::from_json_floats)
                    .collect(),
            ),
        );
        map.insert("Name".into(), Value::str(&self.name));
        map.insert("Repository".into(), Value::str(&self.repository));
        map.insert("Tags".into(), strings_value(&self.tags));
        map.insert("Version".into(), Value::str(&self.version));
        Value::map(map)
    }
}

impl Metadata {
    /// A string field kept in `extra` (`description`, `home`, …), empty when absent.
    pub fn extra_string(&self, key: &str) -> String {
        self.extra
            .get(key)
            .and_then(|v| string_field(v, "Metadata", key).ok())
            .unwrap_or_default()
    }

    fn extra_strings(&self, key: &str) -> Vec<String> {
        self.extra
            .get(key)
            .and_then(|v| string_list(v, "Metadata", key).ok())
            .unwrap_or_default()
    }

    /// `.Chart` as Helm v4 hands it to templates: a `map[string]interface{}` keyed by Go's
    /// field names (`Name`, `AppVersion`, …) plus `IsRoot`.
    pub fn to_value(&self, is_root: bool) -> Value {
        let mut map = BTreeMap::new();
        map.insert("APIVersion".into(), Value::str(&self.api_version));
        let annotations: BTreeMap<String, Value> = match self.extra.get("annotations") {
            Some(Json::Object(entries)) => entries
                .iter()
                .map(|(k, v)| {
                    let text = string_field(v, "Metadata", "annotations").unwrap_or_default();
                    (k.clone(), Value::str(text))
                })
                .collect(),
            _ => BTreeMap::new(),
        };
        map.insert("Annotations".into(), Value::map(annotations));
        map.insert("AppVersion".into(), Value::str(&self.app_version));
        for (field, key) in EXTRA_STRINGS {
            map.insert((*field).into(), Value::str(self.extra_string(key)));
        }
        map.insert(
            "Dependencies".into(),
            Value::list(self.dependencies.iter().map(Dependency::to_value).collect()),
        );
        map.insert(
            "Deprecated".into(),
            Value::Bool(matches!(
                self.extra.get("deprecated"),
                Some(Json::Bool(true))
            )),
        );
        map.insert("IsRoot".into(), Value::Bool(is_root));
        map.insert(
            "Keywords".into(),
            strings_value(&self.extra_strings("keywords")),
        );
        map.insert("KubeVersion".into(), Value::str(&self.kube_version));
        let maintainers = match self.extra.get("maintainers") {
            Some(Json::Array(items)) => items
                .iter()
                .filter_map(|item| item.as_object())
                .map(|m| {
                    let field = |k: &str| {
                        Value::str(
                            m.get(k)
                                .and_then(|v| string_field(v, "Maintainer", k).ok())
                                .unwrap_or_default(),
                        )
                    };
                    let mut entry = BTreeMap::new();
                    entry.insert("Email".into(), field("email"));
                    entry.insert("Name".into(), field("name"));
                    entry.insert("URL".into(), field("url"));
                    Value::map(entry)
                })
                .collect(),
            _ => Vec::new(),
        };
        map.insert("Maintainers".into(), Value::list(maintainers));
        map.insert("Name".into(), Value::str(&self.name));
        map.insert(
            "Sources".into(),
            strings_value(&self.extra_strings("sources")),
        );
        map.insert("Type".into(), Value::str(&self.chart_type));
        map.insert("Version".into(), Value::str(&self.version));
        Value::map(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loose_semver() {
        for ok in ["1", "v1.2", "1.2.3", "1.2.3-rc.1+b.5", "0.1.0+abc"] {
            assert!(is_loose_semver(ok), "{ok}");
        }
        for bad in ["", "1.0.x", "a", "1.2.3.4", "1..2", "1.2.3-"] {
            assert!(!is_loose_semver(bad), "{bad}");
        }
    }

    #[test]
    fn chart_value_as_helm() {
        let metadata = parse_chart_yaml(
            b"apiVersion: v2\nname: c\nversion: 1.2.3\nappVersion: \"1.0\"\ndescription: d\nhome: h\nkeywords: [k1, k2]\nsources: [s1]\nmaintainers:\n  - name: m\n    email: e\nannotations:\n  b: x\n  a: \"y\"\nkubeVersion: \">=1.20\"\n",
        )
        .expect("chart");
        // `{{ .Chart }}` from Helm v4.2.3 for this Chart.yaml (no dependencies).
        assert_eq!(
            metadata.to_value(true).to_string(),
            "map[APIVersion:v2 Annotations:map[a:y b:x] AppVersion:1.0 Condition: Dependencies:[] Deprecated:false Description:d Home:h Icon: IsRoot:true Keywords:[k1 k2] KubeVersion:>=1.20 Maintainers:[map[Email:e Name:m URL:]] Name:c Sources:[s1] Tags: Type: Version:1.2.3]"
        );
    }

    #[test]
    fn chart_yaml_errors() {
        let err = parse_chart_yaml(b"apiVersion: v1\nname: e\nversion: 1.0.0\nkeywords: x\n")
            .expect_err("keywords");
        assert_eq!(
            err.to_string(),
            "cannot load Chart.yaml: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field Metadata.keywords of type []string"
        );
        let metadata =
            parse_chart_yaml(b"name: e\nversion: 1.0.x\nappVersion: 1.10\n").expect("md");
        assert_eq!(metadata.api_version, "v1");
        assert_eq!(metadata.app_version, "1.1");
        assert_eq!(
            validate(&metadata).expect_err("version").to_string(),
            "validation: chart.metadata.version \"1.0.x\" is invalid"
        );
    }
}
