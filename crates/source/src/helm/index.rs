//! A chart repository's `index.yaml`, read as Helm and Flux read it.
//!
//! [`Index::parse`] accepts JSON or YAML (YAML through Helm's own reader, so scalars resolve as
//! Helm resolves them), requires `apiVersion`, drops versions without a name or a SemVer
//! version (as Helm's validation does) and sorts each chart's versions newest first.
//! [`Index::select`] is Flux's `GetChartVersion`: an exact version string first, then the
//! highest version the Masterminds constraint accepts (`*` or empty: the latest stable
//! release; pre-releases only when the constraint names one), the newest `created` among
//! equal versions. [`resolve_url`] is Helm's `ResolveReferenceURL`.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Error, MAX_INDEX_SIZE, Result};

/// A repository index: `apiVersion`, `generated`, `entries` (chart name → versions, newest
/// first) and whatever else the index holds (`serverInfo`, `publicKeys`, `annotations`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    /// `apiVersion` (required).
    pub api_version: String,
    /// `generated`, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated: Option<String>,
    /// Chart name → its versions, newest first.
    #[serde(default)]
    pub entries: BTreeMap<String, Vec<ChartVersion>>,
    /// Other top-level fields, kept as they are.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// One version of a chart in an index: its `Chart.yaml` fields plus `urls`, `digest` and
/// `created`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChartVersion {
    /// `name`.
    pub name: String,
    /// `version`, as written.
    pub version: String,
    /// Where the chart archive is, absolute or relative to the repository URL.
    #[serde(default)]
    pub urls: Vec<String>,
    /// `digest`: the SHA-256 (hex) of the archive, when the index gives one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
    /// `created`, as written (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// The other fields (`apiVersion`, `appVersion`, `description`, `dependencies`, …).
    #[serde(flatten)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

impl Index {
    /// Reads an index from JSON or YAML bytes (at most [`MAX_INDEX_SIZE`]).
    ///
    /// # Errors
    /// [`Error::InvalidIndex`] when the bytes are empty, too large, not JSON or YAML, not a map,
    /// hold entries of the wrong shape, or have no `apiVersion` — never an empty index for
    /// input that is not one.
    pub fn parse(bytes: &[u8]) -> Result<Index> {
        let invalid = |reason: String| Error::InvalidIndex {
            origin: None,
            reason,
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(invalid("the index is empty".to_owned()));
        }
        if bytes.len() as u64 > MAX_INDEX_SIZE {
            return Err(invalid(format!(
                "the index exceeds the maximum index file size of {MAX_INDEX_SIZE} bytes"
            )));
        }
        let value: serde_json::Value = if let Ok(value) = serde_json::from_slice(bytes) {
            value
        } else {
            let text = std::str::from_utf8(bytes)
                .map_err(|e| invalid(format!("the index is not UTF-8: {e}")))?;
            capstan_helm::yaml::parse(text).map_err(|e| invalid(e.message))?
        };
        let serde_json::Value::Object(mut map) = value else {
            return Err(invalid(format!(
                "the index is a {}, not a map",
                json_kind(&value)
            )));
        };
        let entries = match map.remove("entries") {
            None | Some(serde_json::Value::Null) => serde_json::Map::new(),
            Some(serde_json::Value::Object(entries)) => entries,
            Some(other) => {
                return Err(invalid(format!(
                    "entries is a {}, not a map",
                    json_kind(&other)
                )));
            }
        };
        let mut index: Index = serde_json::from_value(serde_json::Value::Object(map))
            .map_err(|e| invalid(e.to_string()))?;
        if index.api_version.is_empty() {
            return Err(invalid("no API version specified".to_owned()));
        }
        for (name, versions) in entries {
            let versions = match versions {
                serde_json::Value::Null => Vec::new(),
                serde_json::Value::Array(versions) => versions,
                other => {
                    return Err(invalid(format!(
                        "entries.{name} is a {}, not a list",
                        json_kind(&other)
                    )));
                }
            };
            let mut kept = Vec::with_capacity(versions.len());
            for version in versions {
                if version.is_null() {
                    continue;
                }
                let mut version: ChartVersion = serde_json::from_value(version)
                    .map_err(|e| invalid(format!("entries.{name}: {e}")))?;
                // Helm drops versions that fail chart validation instead of failing the index.
                if version.name.is_empty()
                    || capstan_semver::parse_version(&version.version).is_none()
                {
                    continue;
                }
                version
                    .metadata
                    .entry("apiVersion")
                    .or_insert_with(|| serde_json::Value::String("v1".to_owned()));
                kept.push(version);
            }
            sort_newest_first(&mut kept);
            index.entries.insert(name, kept);
        }
        Ok(index)
    }

    /// The index as a HelmRepository stores it, byte for byte as Flux does: Helm's `IndexFile`
    /// written by Go's `json.MarshalIndent(index, "", "  ")` ([`Index::to_go_json`] with an
    /// indent of 2), so `status.artifact.digest` is Flux's.
    pub fn to_json(&self) -> Vec<u8> {
        self.to_go_json(2).into_bytes()
    }

    /// The index as Go's `encoding/json` writes Helm's `IndexFile` (`repo/v1`): its fields in
    /// Helm's order and with its `omitempty` rules (`serverInfo`, `apiVersion`, `generated`,
    /// `entries`, `publicKeys`, `annotations`; each version's `Chart.yaml` fields, then
    /// `urls`, `created`, `removed`, `digest`), map keys sorted, times as Go's RFC 3339 (the zero
    /// time when absent), strings sanitised as Helm's chart validation does and escaped as Go
    /// escapes them (`<`, `>`, `&`). Fields Helm does not know are left out, as Go's decoder
    /// leaves them. `indent` spaces per level (`json.MarshalIndent`), 0: `json.Marshal`.
    pub fn to_go_json(&self, indent: usize) -> String {
        let mut out = String::new();
        go_json::write(&mut out, &go_json::index(self), indent, 0);
        out
    }

    /// The version of chart `name` that `version` selects (Flux's `GetChartVersion`): an exact
    /// match of the version string first; otherwise the highest version the Masterminds
    /// constraint accepts (`*` or empty: the latest stable), the newest `created` among equal
    /// versions.
    ///
    /// # Errors
    /// [`Error::NoChartName`], [`Error::NoChartVersion`] or [`Error::Constraint`].
    pub fn select(&self, name: &str, version: &str) -> Result<&ChartVersion> {
        let versions = self.entries.get(name).ok_or_else(|| Error::NoChartName {
            name: name.to_owned(),
        })?;
        let no_version = || Error::NoChartVersion {
            name: name.to_owned(),
            version: version.to_owned(),
        };
        if !version.is_empty()
            && let Some(exact) = versions.iter().find(|v| v.version == version)
        {
            return Ok(exact);
        }
        let constraint = if version.is_empty() { "*" } else { version };
        let constraint = capstan_semver::Constraint::parse(constraint)?;
        let mut best: Option<(semver::Version, &ChartVersion)> = None;
        for candidate in versions {
            let Some(parsed) = capstan_semver::parse_version(&candidate.version) else {
                continue;
            };
            if !constraint.matches(&parsed) {
                continue;
            }
            let better = match &best {
                None => true,
                Some((current, current_version)) => match compare(&parsed, current) {
                    Ordering::Greater => true,
                    Ordering::Less => false,
                    Ordering::Equal => created(candidate) > created(current_version),
                },
            };
            if better {
                best = Some((parsed, candidate));
            }
        }
        best.map(|(_, chosen)| chosen).ok_or_else(no_version)
    }
}

/// SemVer precedence (build metadata ignored), as Masterminds compares.
fn compare(a: &semver::Version, b: &semver::Version) -> Ordering {
    (a.major, a.minor, a.patch)
        .cmp(&(b.major, b.minor, b.patch))
        .then_with(|| match (a.pre.is_empty(), b.pre.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            (false, false) => a.pre.cmp(&b.pre),
        })
}

fn created(version: &ChartVersion) -> Option<jiff::Timestamp> {
    version.created.as_deref().and_then(|c| c.parse().ok())
}

/// Helm's `SortEntries`: newest version first (stable for equal versions).
fn sort_newest_first(versions: &mut [ChartVersion]) {
    versions.sort_by(|a, b| {
        match (
            capstan_semver::parse_version(&a.version),
            capstan_semver::parse_version(&b.version),
        ) {
            (Some(a), Some(b)) => compare(&b, &a),
            _ => b.version.cmp(&a.version),
        }
    });
}

/// Helm's `IndexFile` shaped as Go marshals it, and Go's JSON layout.
mod go_json {
    use serde_json::{Map, Value};

    use super::{ChartVersion, Index};

    /// Helm's `IndexFile`, fields in Go's order (a `serde_json` map keeps insertion order).
    pub(super) fn index(index: &Index) -> Value {
        let mut root = Map::new();
        if let Some(info) = index.extra.get("serverInfo").filter(|v| non_empty(v)) {
            root.insert("serverInfo".into(), sorted(info));
        }
        root.insert("apiVersion".into(), index.api_version.clone().into());
        root.insert("generated".into(), time(index.generated.as_deref()).into());
        let entries = index
            .entries
            .iter()
            .map(|(name, versions)| {
                let versions = versions.iter().map(chart_version).collect();
                (name.clone(), Value::Array(versions))
            })
            .collect();
        root.insert("entries".into(), Value::Object(entries));
        if let Some(keys) = index.extra.get("publicKeys").filter(|v| non_empty(v)) {
            root.insert("publicKeys".into(), strings(keys));
        }
        if let Some(annotations) = index.extra.get("annotations").filter(|v| non_empty(v)) {
            root.insert("annotations".into(), string_map(annotations));
        }
        Value::Object(root)
    }

    /// One `ChartVersion`: the embedded `chart.Metadata`, then its own fields.
    fn chart_version(version: &ChartVersion) -> Value {
        let md = &version.metadata;
        let mut out = Map::new();
        let text = |out: &mut Map<String, Value>, key: &str, value: Option<String>| {
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                out.insert(key.into(), value.into());
            }
        };
        let field = |key: &str| md.get(key).and_then(scalar);
        text(&mut out, "name", Some(sanitize(&version.name)));
        text(&mut out, "home", field("home").map(|s| sanitize(&s)));
        list(&mut out, "sources", md.get("sources"), true);
        text(&mut out, "version", Some(version.version.clone()));
        text(
            &mut out,
            "description",
            field("description").map(|s| sanitize(&s)),
        );
        list(&mut out, "keywords", md.get("keywords"), true);
        if let Some(Value::Array(maintainers)) = md.get("maintainers")
            && !maintainers.is_empty()
        {
            let maintainers = maintainers
                .iter()
                .map(|m| match m {
                    Value::Object(m) => {
                        let mut entry = Map::new();
                        for key in ["name", "email", "url"] {
                            text(&mut entry, key, m.get(key).and_then(scalar));
                        }
                        Value::Object(entry)
                    }
                    _ => Value::Null,
                })
                .collect();
            out.insert("maintainers".into(), Value::Array(maintainers));
        }
        text(&mut out, "icon", field("icon").map(|s| sanitize(&s)));
        text(&mut out, "apiVersion", field("apiVersion"));
        text(
            &mut out,
            "condition",
            field("condition").map(|s| sanitize(&s)),
        );
        text(&mut out, "tags", field("tags").map(|s| sanitize(&s)));
        text(
            &mut out,
            "appVersion",
            field("appVersion").map(|s| sanitize(&s)),
        );
        if md.get("deprecated") == Some(&Value::Bool(true)) {
            out.insert("deprecated".into(), Value::Bool(true));
        }
        if let Some(annotations) = md.get("annotations").filter(|v| non_empty(v)) {
            out.insert("annotations".into(), string_map(annotations));
        }
        text(
            &mut out,
            "kubeVersion",
            field("kubeVersion").map(|s| sanitize(&s)),
        );
        if let Some(Value::Array(dependencies)) = md.get("dependencies")
            && !dependencies.is_empty()
        {
            let dependencies = dependencies.iter().map(dependency).collect();
            out.insert("dependencies".into(), Value::Array(dependencies));
        }
        text(&mut out, "type", field("type"));
        out.insert(
            "urls".into(),
            if version.urls.is_empty() {
                Value::Null
            } else {
                version.urls.iter().cloned().map(Value::from).collect()
            },
        );
        out.insert("created".into(), time(version.created.as_deref()).into());
        if md.get("removed") == Some(&Value::Bool(true)) {
            out.insert("removed".into(), Value::Bool(true));
        }
        text(&mut out, "digest", Some(version.digest.clone()));
        for key in ["checksum", "engine", "tillerVersion", "url"] {
            text(&mut out, key, field(key));
        }
        Value::Object(out)
    }

    /// A `chart.Dependency` (`name` and `repository` always written).
    fn dependency(value: &Value) -> Value {
        let Value::Object(d) = value else {
            return Value::Null;
        };
        let field = |key: &str| d.get(key).and_then(scalar).unwrap_or_default();
        let mut out = Map::new();
        out.insert("name".into(), field("name").into());
        let text = |out: &mut Map<String, Value>, key: &str| {
            let value = field(key);
            if !value.is_empty() {
                out.insert(key.into(), value.into());
            }
        };
        text(&mut out, "version");
        out.insert("repository".into(), field("repository").into());
        text(&mut out, "condition");
        list(&mut out, "tags", d.get("tags"), false);
        if d.get("enabled") == Some(&Value::Bool(true)) {
            out.insert("enabled".into(), Value::Bool(true));
        }
        if let Some(Value::Array(values)) = d.get("import-values")
            && !values.is_empty()
        {
            out.insert(
                "import-values".into(),
                Value::Array(values.iter().map(sorted).collect()),
            );
        }
        text(&mut out, "alias");
        Value::Object(out)
    }

    /// A `[]string` field, left out when empty; items sanitised when `sanitise`.
    fn list(out: &mut Map<String, Value>, key: &str, value: Option<&Value>, sanitise: bool) {
        if let Some(Value::Array(items)) = value
            && !items.is_empty()
        {
            let items = items
                .iter()
                .map(|item| {
                    let item = scalar(item).unwrap_or_default();
                    Value::from(if sanitise { sanitize(&item) } else { item })
                })
                .collect();
            out.insert(key.into(), Value::Array(items));
        }
    }

    /// A scalar as the string Go's decoder would hold (`None` for null, lists and maps).
    fn scalar(value: &Value) -> Option<String> {
        match value {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    fn non_empty(value: &Value) -> bool {
        match value {
            Value::Object(map) => !map.is_empty(),
            Value::Array(items) => !items.is_empty(),
            Value::Null => false,
            _ => true,
        }
    }

    fn strings(value: &Value) -> Value {
        match value {
            Value::Array(items) => items
                .iter()
                .map(|i| Value::from(scalar(i).unwrap_or_default()))
                .collect(),
            _ => Value::Null,
        }
    }

    /// A `map[string]string`: keys sorted, values as strings.
    fn string_map(value: &Value) -> Value {
        let Value::Object(map) = value else {
            return Value::Null;
        };
        let mut keys: Vec<_> = map.keys().collect();
        keys.sort();
        Value::Object(
            keys.into_iter()
                .map(|k| (k.clone(), scalar(&map[k]).unwrap_or_default().into()))
                .collect(),
        )
    }

    /// An `any` value: every map's keys sorted, as Go writes maps.
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<_> = map.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&map[k])))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }

    /// Helm's `sanitizeString`: white space becomes a space, what is not printable goes.
    fn sanitize(text: &str) -> String {
        text.chars()
            .filter_map(|c| {
                if c.is_whitespace() {
                    Some(' ')
                } else if c.is_control()
                    || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
                        | '\u{2060}'..='\u{2064}' | '\u{feff}' | '\u{e000}'..='\u{f8ff}')
                {
                    None
                } else {
                    Some(c)
                }
            })
            .collect()
    }

    /// A `time.Time` as Go writes it (RFC 3339 with the fraction's trailing zeros cut, `Z` for
    /// a zero offset); absent: Go's zero time. Text that is not RFC 3339 is kept as it is.
    pub(super) fn time(text: Option<&str>) -> String {
        const ZERO: &str = "0001-01-01T00:00:00Z";
        let Some(text) = text else {
            return ZERO.to_owned();
        };
        let bytes = text.as_bytes();
        let digits = |range: std::ops::Range<usize>| {
            bytes
                .get(range)
                .is_some_and(|b| b.iter().all(u8::is_ascii_digit))
        };
        let shape = bytes.len() >= 20
            && digits(0..4)
            && bytes[4] == b'-'
            && digits(5..7)
            && bytes[7] == b'-'
            && digits(8..10)
            && bytes[10] == b'T'
            && digits(11..13)
            && bytes[13] == b':'
            && digits(14..16)
            && bytes[16] == b':'
            && digits(17..19);
        if !shape {
            return text.to_owned();
        }
        let (seconds, rest) = text.split_at(19);
        let (fraction, zone) = match rest.strip_prefix('.') {
            Some(rest) => {
                let end = rest
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
            None => ("", rest),
        };
        let zone = match zone {
            "Z" | "+00:00" | "-00:00" => "Z",
            zone if zone.len() == 6
                && matches!(zone.as_bytes()[0], b'+' | b'-')
                && zone.as_bytes()[3] == b':'
                && zone[1..3].bytes().all(|b| b.is_ascii_digit())
                && zone[4..].bytes().all(|b| b.is_ascii_digit()) =>
            {
                zone
            }
            _ => return text.to_owned(),
        };
        let fraction = fraction.get(..9).unwrap_or(fraction).trim_end_matches('0');
        if fraction.is_empty() {
            format!("{seconds}{zone}")
        } else {
            format!("{seconds}.{fraction}{zone}")
        }
    }

    /// Writes `value` as Go's `json.MarshalIndent(value, "", <indent spaces>)` lays it out
    /// (maps in the order given), strings and numbers as `encoding/json` writes them.
    pub(super) fn write(out: &mut String, value: &Value, indent: usize, level: usize) {
        let newline = |out: &mut String, level: usize| {
            if indent > 0 {
                out.push('\n');
                out.extend(std::iter::repeat_n(' ', indent * level));
            }
        };
        let separator = if indent > 0 { ": " } else { ":" };
        match value {
            Value::Object(map) if !map.is_empty() => {
                out.push('{');
                for (i, (key, item)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline(out, level + 1);
                    capstan_helm::yaml::json::string(out, key, true);
                    out.push_str(separator);
                    write(out, item, indent, level + 1);
                }
                newline(out, level);
                out.push('}');
            }
            Value::Array(items) if !items.is_empty() => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline(out, level + 1);
                    write(out, item, indent, level + 1);
                }
                newline(out, level);
                out.push(']');
            }
            Value::Object(_) => out.push_str("{}"),
            Value::Array(_) => out.push_str("[]"),
            Value::String(s) => capstan_helm::yaml::json::string(out, s, true),
            Value::Number(_) => {
                let go = capstan_helm::yaml::json::marshal(
                    &capstan_helm::value::Value::from_json_floats(value),
                );
                out.push_str(&go.unwrap_or_else(|_| value.to_string()));
            }
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Null => out.push_str("null"),
        }
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "list",
        serde_json::Value::Object(_) => "map",
    }
}

/// Helm's `ResolveReferenceURL`: an absolute `reference` as it is; a relative one resolved
/// against the repository URL taken as a directory, keeping the repository URL's query.
///
/// # Errors
/// [`Error::InvalidUrl`] when either URL does not parse.
pub fn resolve_url(repository_url: &str, reference: &str) -> Result<reqwest::Url> {
    if let Ok(absolute) = reqwest::Url::parse(reference) {
        return Ok(absolute);
    }
    let mut base = reqwest::Url::parse(repository_url).map_err(|e| Error::InvalidUrl {
        url: crate::redact::url(repository_url),
        reason: e.to_string(),
    })?;
    let query = base.query().map(str::to_owned);
    let path = format!("{}/", base.path().trim_end_matches('/'));
    base.set_path(&path);
    let mut resolved = base.join(reference).map_err(|e| Error::InvalidUrl {
        url: crate::redact::url(reference),
        reason: e.to_string(),
    })?;
    resolved.set_query(query.as_deref());
    Ok(resolved)
}

/// Flux's `NormalizeURL` for HTTP/S repositories: the URL with one trailing `/`.
///
/// # Errors
/// [`Error::InvalidUrl`] for a URL that does not parse or whose scheme is not `http`/`https`.
pub fn normalize_url(url: &str) -> Result<reqwest::Url> {
    let invalid = |reason: String| Error::InvalidUrl {
        url: crate::redact::url(url),
        reason,
    };
    let mut parsed = reqwest::Url::parse(url).map_err(|e| invalid(e.to_string()))?;
    match parsed.scheme() {
        "http" | "https" => {}
        "oci" => {
            return Err(invalid(
                "'oci' URL scheme cannot be used with 'default' HelmRepository type".to_owned(),
            ));
        }
        other => return Err(invalid(format!("scheme {other:?} not supported"))),
    }
    let path = format!("{}/", parsed.path().trim_end_matches('/'));
    parsed.set_path(&path);
    Ok(parsed)
}

/// `ChartVersion` lookups keyed by name for tests and callers that need the raw fields.
impl ChartVersion {
    /// A metadata field as a string (`appVersion`, `description`), empty when absent.
    pub fn field(&self, key: &str) -> &str {
        self.metadata
            .get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = r#"
apiVersion: v1
entries:
  podinfo:
  - name: podinfo
    version: 6.1.0
    urls: [podinfo-6.1.0.tgz]
    created: "2024-01-01T00:00:00Z"
  - name: podinfo
    version: 6.2.0-rc.1
    urls: [podinfo-6.2.0-rc.1.tgz]
  - name: podinfo
    version: 6.0.3
    urls: [https://charts.example.com/podinfo-6.0.3.tgz]
  - name: podinfo
    version: not-semver
    urls: [x.tgz]
  empty:
generated: "2024-01-02T00:00:00Z"
"#;

    #[test]
    fn selects_as_flux_does() {
        let index = Index::parse(INDEX.as_bytes()).unwrap();
        assert_eq!(index.select("podinfo", "*").unwrap().version, "6.1.0");
        assert_eq!(index.select("podinfo", "").unwrap().version, "6.1.0");
        assert_eq!(index.select("podinfo", "6.0.x").unwrap().version, "6.0.3");
        assert_eq!(
            index.select("podinfo", ">=6.2.0-0").unwrap().version,
            "6.2.0-rc.1"
        );
        assert_eq!(
            index.select("podinfo", "6.2.0-rc.1").unwrap().version,
            "6.2.0-rc.1"
        );
        let missing = index.select("podinfo", "7.x").unwrap_err();
        assert_eq!(
            missing.to_string(),
            "no 'podinfo' chart with version matching '7.x' found"
        );
        assert!(matches!(
            index.select("nginx", "*"),
            Err(Error::NoChartName { .. })
        ));
        assert!(matches!(
            index.select("empty", "*"),
            Err(Error::NoChartVersion { .. })
        ));
        // Invalid versions are dropped; the rest are newest first.
        let versions: Vec<_> = index.entries["podinfo"]
            .iter()
            .map(|v| v.version.as_str())
            .collect();
        assert_eq!(versions, ["6.2.0-rc.1", "6.1.0", "6.0.3"]);
    }

    #[test]
    fn equal_versions_pick_the_newest_created() {
        let index = Index::parse(
            br#"{"apiVersion":"v1","entries":{"a":[
                {"name":"a","version":"1.0.0+old","created":"2024-01-01T00:00:00Z","urls":["old.tgz"]},
                {"name":"a","version":"1.0.0+new","created":"2024-02-01T00:00:00Z","urls":["new.tgz"]}]}}"#,
        )
        .unwrap();
        assert_eq!(index.select("a", "1.x").unwrap().urls, ["new.tgz"]);
    }

    #[test]
    fn text_that_is_not_an_index_is_an_error() {
        for bad in [
            &b""[..],
            b"  \n",
            b"<html>not found</html>",
            b"entries: {}",
            b"- a\n- b\n",
            b"apiVersion: v1\nentries: [1, 2]\n",
            b"apiVersion: v1\nentries:\n  a: {name: a}\n",
            b"apiVersion: v1\nentries: {a: [ {name: a, version: 1.0.0 ]}\n",
        ] {
            let error = Index::parse(bad).unwrap_err();
            assert!(
                matches!(error, Error::InvalidIndex { .. }),
                "{}: {error}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn resolves_urls_as_helm_does() {
        let base = "https://charts.example.com/stable?token=1";
        assert_eq!(
            resolve_url(base, "podinfo-1.0.0.tgz").unwrap().as_str(),
            "https://charts.example.com/stable/podinfo-1.0.0.tgz?token=1"
        );
        assert_eq!(
            resolve_url("https://charts.example.com/stable/", "/abs/p.tgz")
                .unwrap()
                .as_str(),
            "https://charts.example.com/abs/p.tgz"
        );
        assert_eq!(
            resolve_url(base, "https://other.example.com/p.tgz")
                .unwrap()
                .as_str(),
            "https://other.example.com/p.tgz"
        );
        assert_eq!(
            normalize_url("https://example.com/charts")
                .unwrap()
                .as_str(),
            "https://example.com/charts/"
        );
        assert!(normalize_url("oci://example.com/charts").is_err());
    }
}

#[cfg(test)]
mod hostile {
    use super::*;

    #[test]
    fn an_alias_bomb_does_not_expand_without_bound() {
        use std::fmt::Write as _;
        let mut text = String::from("apiVersion: v1\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..10 {
            let prev = level - 1;
            let refs = vec![format!("*a{prev}"); 10].join(", ");
            let _ = writeln!(text, "a{level}: &a{level} [{refs}]");
        }
        text.push_str("entries: {}\n");
        let started = std::time::Instant::now();
        let result = Index::parse(text.as_bytes());
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(
            result.is_err(),
            "an index of 10^10 aliased nodes is refused"
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        for depth in [200, 100_000] {
            let yaml = format!(
                "apiVersion: v1\nentries:\n  a:\n  - name: a\n    version: 1.0.0\n    deep: {}{}\n",
                "[".repeat(depth),
                "]".repeat(depth)
            );
            let _ = Index::parse(yaml.as_bytes());
            let json = format!(
                "{{\"apiVersion\":\"v1\",\"entries\":{{\"a\":[{{\"name\":\"a\",\"version\":\"1.0.0\",\"deep\":{}{}}}]}}}}",
                "[".repeat(depth),
                "]".repeat(depth)
            );
            let _ = Index::parse(json.as_bytes());
        }
    }
}
