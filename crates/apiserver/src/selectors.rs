//! Label and field selectors, with Kubernetes' syntax.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::error::ApiError;

#[derive(Clone, Debug, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A parsed label selector (`app=web,tier in (a,b),!legacy`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

impl LabelSelector {
    /// Parses the string form used in `?labelSelector=`.
    pub fn parse(input: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top_level(input) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(part).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label selector: {part:?}"
                ))
            })?);
        }
        Ok(Self(reqs))
    }

    /// Whether `labels` (an object of strings, or null) satisfies every requirement.
    pub fn matches(&self, labels: Option<&Value>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, set) => get(k).is_some_and(|v| set.contains(v)),
            Requirement::NotIn(k, set) => get(k).is_none_or(|v| !set.contains(v)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
            Requirement::GreaterThan(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Requirement::LessThan(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(input: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&input[start..]);
    parts
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_set(s: &str) -> Option<BTreeSet<String>> {
    let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    let set: BTreeSet<String> = inner
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect();
    set.iter().all(|v| valid_value(v)).then_some(set)
}

fn parse_requirement(part: &str) -> Option<Requirement> {
    if let Some(k) = part.strip_prefix('!') {
        let k = k.trim();
        return valid_key(k).then(|| Requirement::DoesNotExist(k.to_owned()));
    }
    for (op, ctor) in [("!=", 0), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some((k, v)) = part.split_once(op) {
            let (k, v) = (k.trim(), v.trim());
            if !valid_key(k) {
                return None;
            }
            return match ctor {
                0 if valid_value(v) => Some(Requirement::NotEquals(k.to_owned(), v.to_owned())),
                1 if valid_value(v) => Some(Requirement::Equals(k.to_owned(), v.to_owned())),
                2 => v
                    .parse()
                    .ok()
                    .map(|n| Requirement::GreaterThan(k.to_owned(), n)),
                3 => v
                    .parse()
                    .ok()
                    .map(|n| Requirement::LessThan(k.to_owned(), n)),
                _ => None,
            };
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let key = words[0].trim();
        let rest = words[1].trim();
        if let Some(set) = rest.strip_prefix("notin") {
            return valid_key(key)
                .then_some(())
                .and(parse_set(set))
                .map(|s| Requirement::NotIn(key.to_owned(), s));
        }
        if let Some(set) = rest.strip_prefix("in") {
            return valid_key(key)
                .then_some(())
                .and(parse_set(set))
                .map(|s| Requirement::In(key.to_owned(), s));
        }
        return None;
    }
    valid_key(part).then(|| Requirement::Exists(part.to_owned()))
}

/// A parsed field selector (`metadata.name=foo,status.phase!=Running`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(input: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in input.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {part:?}: expected an operator"
                )));
            };
            reqs.push((field.trim().to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self(reqs))
    }

    /// The value of `metadata.name=` if the selector pins one.
    pub fn pinned_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, eq, _)| f == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let mut cur = Some(object);
            for seg in field.split('.') {
                cur = cur.and_then(|c| c.get(seg));
            }
            let actual = match cur {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == *value) == *equal
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_forms() {
        let labels = json!({"app": "web", "tier": "front", "n": "5"});
        let ok = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&labels));
        assert!(ok("app=web"));
        assert!(ok("app==web,tier"));
        assert!(!ok("app!=web"));
        assert!(ok("tier in (front, back)"));
        assert!(!ok("tier notin (front)"));
        assert!(ok("!legacy"));
        assert!(!ok("!app"));
        assert!(ok("n>4,n<6"));
        assert!(ok(""));
        assert!(LabelSelector::parse("app=(").is_err());
        assert!(LabelSelector::parse("a b c").is_err());
    }

    #[test]
    fn field_selector_forms() {
        let obj =
            json!({"metadata": {"name": "x", "namespace": "d"}, "status": {"phase": "Running"}});
        let ok = |s: &str| FieldSelector::parse(s).unwrap().matches(&obj);
        assert!(ok("metadata.name=x"));
        assert!(ok("metadata.name==x,status.phase!=Pending"));
        assert!(!ok("metadata.namespace=other"));
        assert!(FieldSelector::parse("nonsense").is_err());
        assert_eq!(
            FieldSelector::parse("metadata.name=x")
                .unwrap()
                .pinned_name(),
            Some("x")
        );
    }
}
