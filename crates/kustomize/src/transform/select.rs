//! Selecting resources: patch targets (regular expressions on the id) and label selectors.

use crate::error::TransformError;
use regex::Regex;
use serde_json::{Map, Value};

use crate::resource::{ResId, Resource};
use crate::types::Selector;

/// Anchored regular expression for selector fields.
fn anchored(pattern: &str) -> Result<Regex, TransformError> {
    Regex::new(&format!("^(?:{pattern})$")).map_err(|source| TransformError::Regex {
        context: format!("bad selector regex {pattern:?}"),
        source,
    })
}

pub(super) struct SelectorRegex {
    group: Option<Regex>,
    version: Option<Regex>,
    kind: Option<Regex>,
    name: Option<Regex>,
    namespace: Option<Regex>,
}

impl SelectorRegex {
    pub(super) fn new(selector: &Selector) -> Result<Self, TransformError> {
        let make = |s: &str| {
            if s.is_empty() {
                Ok(None)
            } else {
                anchored(s).map(Some)
            }
        };
        Ok(SelectorRegex {
            group: make(&selector.group)?,
            version: make(&selector.version)?,
            kind: make(&selector.kind)?,
            name: make(&selector.name)?,
            namespace: make(&selector.namespace)?,
        })
    }

    fn matches_gvk(&self, id: &ResId) -> bool {
        self.group.as_ref().is_none_or(|r| r.is_match(&id.group))
            && self
                .version
                .as_ref()
                .is_none_or(|r| r.is_match(&id.version))
            && self.kind.as_ref().is_none_or(|r| r.is_match(&id.kind))
    }

    pub(super) fn selects(&self, id: &ResId) -> bool {
        self.matches_gvk(id)
            && self.name.as_ref().is_none_or(|r| r.is_match(&id.name))
            && self
                .namespace
                .as_ref()
                .is_none_or(|r| r.is_match(id.effective_namespace()))
    }
}

/// Indexes of the resources a patch selector picks (original or current name/namespace).
pub(crate) fn select(
    resources: &[Resource],
    selector: &Selector,
) -> Result<Vec<usize>, TransformError> {
    let regex = SelectorRegex::new(selector)?;
    let mut out = Vec::new();
    for (index, resource) in resources.iter().enumerate() {
        let current = resource.current_id();
        let original = resource.original_id();
        if let Some(ns) = &regex.namespace
            && !ns.is_match(original.effective_namespace())
            && !ns.is_match(current.effective_namespace())
        {
            continue;
        }
        if let Some(name) = &regex.name
            && !name.is_match(&original.name)
            && !name.is_match(&current.name)
        {
            continue;
        }
        if !regex.matches_gvk(&current) {
            continue;
        }
        if (!selector.label_selector.is_empty()
            && !matches_label_selector(&resource.labels(), &selector.label_selector)?)
            || (!selector.annotation_selector.is_empty()
                && !matches_label_selector(&resource.annotations(), &selector.annotation_selector)?)
        {
            continue;
        }
        out.push(index);
    }
    Ok(out)
}

/// Kubernetes label selector syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`.
pub(crate) fn matches_label_selector(
    labels: &Map<String, Value>,
    selector: &str,
) -> Result<bool, TransformError> {
    let selector = selector.trim();
    if selector.is_empty() {
        return Ok(true);
    }
    let mut terms = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in selector.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    terms.push(current);
    let get = |key: &str| labels.get(key).and_then(Value::as_str);
    for term in terms {
        let term = term.trim();
        let ok = if let Some((key, value)) = term.split_once("!=") {
            get(key.trim()) != Some(value.trim())
        } else if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
            get(key.trim()) == Some(value.trim())
        } else if let Some((key, set)) = term.split_once(" notin ") {
            let values = parse_set(set)?;
            get(key.trim()).is_none_or(|v| !values.iter().any(|x| x == v))
        } else if let Some((key, set)) = term.split_once(" in ") {
            let values = parse_set(set)?;
            get(key.trim()).is_some_and(|v| values.iter().any(|x| x == v))
        } else if let Some(key) = term.strip_prefix('!') {
            get(key.trim()).is_none() && !labels.contains_key(key.trim())
        } else if !term.is_empty() && !term.contains(' ') {
            labels.contains_key(term)
        } else {
            return Err(
                format!("unable to parse requirement {term:?} of selector {selector:?}").into(),
            );
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

fn parse_set(set: &str) -> Result<Vec<String>, TransformError> {
    let inner = set
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("set {set:?} must be parenthesised"))?;
    Ok(inner.split(',').map(|s| s.trim().to_owned()).collect())
}
