//! Helm's dependency processing (`ProcessDependenciesWithMerge`): aliases, tags and
//! conditions decide which subcharts stay, then `import-values` lift subchart values into
//! their parents.

use serde_json::Value as Json;

use super::values::{self, Values, path_to_map, path_value, table};
use super::{Chart, Dependency};

/// How deep dependency processing follows nested subcharts.
const MAX_NESTING: usize = 64;

/// Processes `chart`'s dependencies against the user's values: enabled subcharts kept (under
/// their aliases), disabled ones removed, import-values applied.
pub fn process(chart: &mut Chart, user: &Values) -> Result<(), String> {
    process_enabled(chart, user, "", 0)?;
    process_imports(chart, 0)
}

fn compatible(constraint: &str, version: &str) -> bool {
    super::version_matches(constraint, version).unwrap_or(false)
}

fn process_enabled(
    chart: &mut Chart,
    user: &Values,
    path: &str,
    depth: usize,
) -> Result<(), String> {
    if chart.metadata.dependencies.is_empty() || depth > MAX_NESTING {
        return Ok(());
    }
    // Subcharts no dependency entry claims are kept as they are. The others are taken by
    // their entries (under the alias): moved to the last entry taking them, cloned for any
    // earlier one (the same chart may be taken twice under two aliases).
    let claims = |existing: &Chart, req: &Dependency| {
        existing.metadata.name == req.name && compatible(&req.version, &existing.metadata.version)
    };
    let mut existing: Vec<Option<Chart>> = std::mem::take(&mut chart.dependencies)
        .into_iter()
        .map(Some)
        .collect();
    let taken: Vec<Option<usize>> = chart
        .metadata
        .dependencies
        .iter()
        .map(|req| {
            existing
                .iter()
                .position(|c| c.as_ref().is_some_and(|c| claims(c, req)))
        })
        .collect();
    let mut kept: Vec<Chart> = Vec::with_capacity(existing.len());
    for slot in &mut existing {
        let claimed = slot
            .as_ref()
            .is_some_and(|c| chart.metadata.dependencies.iter().any(|req| claims(c, req)));
        if !claimed && let Some(c) = slot.take() {
            kept.push(c);
        }
    }
    for (index, req) in chart.metadata.dependencies.iter_mut().enumerate() {
        if let Some(at) = taken[index] {
            let last = !taken[index + 1..].contains(&Some(at));
            let sub = if last {
                existing[at].take()
            } else {
                existing[at].clone()
            };
            if let Some(mut sub) = sub {
                if !req.alias.is_empty() {
                    sub.metadata.name.clone_from(&req.alias);
                }
                kept.push(sub);
            }
        }
        if !req.alias.is_empty() {
            req.name.clone_from(&req.alias);
        }
    }
    chart.dependencies = kept;
    for req in &mut chart.metadata.dependencies {
        req.enabled = true;
    }
    let coalesced = values::coalesce_values(chart, user)?;
    apply_tags(&mut chart.metadata.dependencies, &coalesced);
    apply_conditions(&mut chart.metadata.dependencies, &coalesced, path);
    let removed: Vec<String> = chart
        .metadata
        .dependencies
        .iter()
        .filter(|d| !d.enabled)
        .map(|d| d.name.clone())
        .collect();
    chart
        .dependencies
        .retain(|c| !removed.contains(&c.metadata.name));
    chart
        .metadata
        .dependencies
        .retain(|d| !removed.contains(&d.name));
    for sub in &mut chart.dependencies {
        let sub_path = format!("{path}{}.", sub.metadata.name);
        process_enabled(sub, &coalesced, &sub_path, depth + 1)?;
    }
    Ok(())
}

/// `tags`: a dependency with only false tags is disabled; any true tag (or none set) enables.
fn apply_tags(deps: &mut [Dependency], values: &Values) {
    let Some(tags) = table(values, "tags") else {
        return;
    };
    for dep in deps {
        let (mut has_true, mut has_false) = (false, false);
        for tag in &dep.tags {
            match tags.get(tag) {
                Some(Json::Bool(true)) => has_true = true,
                Some(Json::Bool(false)) => has_false = true,
                _ => {}
            }
        }
        dep.enabled = has_true || !has_false;
    }
}

/// `condition`: the first path (of a comma list) holding a bool decides.
fn apply_conditions(deps: &mut [Dependency], values: &Values, path: &str) {
    for dep in deps {
        for condition in dep.condition.trim().split(',') {
            if condition.is_empty() {
                continue;
            }
            if let Some(Json::Bool(enabled)) = path_value(values, &format!("{path}{condition}")) {
                dep.enabled = *enabled;
                break;
            }
        }
    }
}

fn process_imports(chart: &mut Chart, depth: usize) -> Result<(), String> {
    if depth > MAX_NESTING {
        return Ok(());
    }
    for sub in &mut chart.dependencies {
        process_imports(sub, depth + 1)?;
    }
    if chart.metadata.dependencies.is_empty() {
        return Ok(());
    }
    let mut merged = values::merge_values(chart, &Values::new())?;
    let mut imports = Imports::default();
    for dep in &mut chart.metadata.dependencies {
        let mut normalized = Vec::new();
        for entry in &dep.import_values {
            let (child, parent) = match entry {
                Json::Object(map) => (go_text(map.get("child")), go_text(map.get("parent"))),
                Json::String(name) => (format!("exports.{name}"), ".".to_string()),
                // Helm skips entries of any other shape.
                _ => continue,
            };
            let mut pair = serde_json::Map::new();
            pair.insert("child".into(), Json::String(child.clone()));
            pair.insert("parent".into(), Json::String(parent.clone()));
            normalized.push(Json::Object(pair));
            let source = format!("{}.{child}", dep.name);
            if let Some(found) = table(&merged, &source) {
                let lifted = path_to_map(&parent, found.clone());
                let prefix: Vec<String> = if parent == "." {
                    Vec::new()
                } else {
                    parent
                        .split('.')
                        .filter(|p| !p.is_empty())
                        .map(str::to_string)
                        .collect()
                };
                let origin = Origin {
                    prefix,
                    path: source.split('.').map(str::to_string).collect(),
                };
                imports.merge(&lifted, &origin);
                imports.write_back(&mut merged);
            }
        }
        dep.import_values = normalized;
    }
    // The parent's own values win over what it imports.
    let mut out = merged;
    values::coalesce_tables(&mut out, &imports.values, true);
    chart.values = out;
    Ok(())
}

/// Where an imported table came from: the part of the lifted tree below `prefix` is the
/// child's table at `path` in the parent's merged values.
struct Origin {
    prefix: Vec<String>,
    path: Vec<String>,
}

/// The values imported so far. Helm merges the child's tables into them by reference, so a
/// later import that adds keys beneath an earlier imported table also changes that table in
/// the subchart's values; `aliases` records those shared tables so the change is copied back.
#[derive(Default)]
struct Imports {
    values: Values,
    /// (path in `values`, path in the merged values) of each table taken by reference.
    aliases: Vec<(Vec<String>, Vec<String>)>,
}

impl Imports {
    fn merge(&mut self, src: &Values, origin: &Origin) {
        let mut path = Vec::new();
        merge_into(
            &mut self.values,
            src,
            &mut path,
            origin,
            &mut self.aliases,
            0,
        );
    }

    fn write_back(&self, merged: &mut Values) {
        for (from, to) in &self.aliases {
            if let Some(Json::Object(table)) = get_path(&self.values, from) {
                set_path(merged, to, Json::Object(table.clone()));
            }
        }
    }
}

/// Helm's `MergeTables(dst, src)` (dst wins, nulls kept) that notes which inserted tables
/// are the child's own.
fn merge_into(
    dst: &mut Values,
    src: &Values,
    path: &mut Vec<String>,
    origin: &Origin,
    aliases: &mut Vec<(Vec<String>, Vec<String>)>,
    depth: usize,
) {
    for (key, value) in src {
        path.push(key.clone());
        match dst.get_mut(key) {
            None => {
                if value.is_object()
                    && path.len() > origin.prefix.len()
                    && path.starts_with(&origin.prefix)
                {
                    let mut source = origin.path.clone();
                    source.extend_from_slice(&path[origin.prefix.len()..]);
                    aliases.push((path.clone(), source));
                }
                dst.insert(key.clone(), value.clone());
            }
            Some(Json::Object(existing)) => {
                if let Json::Object(table) = value
                    && depth < 256
                {
                    merge_into(existing, table, path, origin, aliases, depth + 1);
                }
            }
            Some(_) => {}
        }
        path.pop();
    }
}

fn get_path<'a>(values: &'a Values, path: &[String]) -> Option<&'a Json> {
    let (last, parents) = path.split_last()?;
    let mut current = values;
    for part in parents {
        current = current.get(part)?.as_object()?;
    }
    current.get(last)
}

fn set_path(values: &mut Values, path: &[String], value: Json) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = values;
    for part in parents {
        match current.get_mut(part) {
            Some(Json::Object(map)) => current = map,
            _ => return,
        }
    }
    if current.contains_key(last) {
        current.insert(last.clone(), value);
    }
}

/// Go's `%v` of a map entry that should be a string (`<nil>` when missing).
fn go_text(value: Option<&Json>) -> String {
    match value {
        None | Some(Json::Null) => "<nil>".into(),
        Some(Json::String(s)) => s.clone(),
        Some(other) => crate::value::Value::from_json_floats(other).to_string(),
    }
}
