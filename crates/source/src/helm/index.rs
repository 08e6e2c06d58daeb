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

    /// The index as indented JSON (what a HelmRepository stores as its artifact, as Flux does).
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).unwrap_or_default()
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
