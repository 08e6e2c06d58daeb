//! Helm's dependency processing (`ProcessDependenciesWithMerge`): aliases, tags and
//! conditions decide which subcharts stay, then `import-values` lift subchart values into
//! their parents.

use serde_json::Value as Json;

use super::constraint::satisfies;
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
    satisfies(constraint, version).unwrap_or(false)
}

/// The subchart a dependency entry refers to, renamed to its alias.
fn alias_dependency(charts: &[Chart], dep: &Dependency) -> Option<Chart> {
    let found = charts
        .iter()
        .find(|c| c.metadata.name == dep.name && compatible(&dep.version, &c.metadata.version))?;
    let mut out = found.clone();
    if !dep.alias.is_empty() {
        out.metadata.name.clone_from(&dep.alias);
    }
    Some(out)
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
    // Subcharts no dependency entry claims are kept as they are.
    let mut kept: Vec<Chart> = chart
        .dependencies
        .iter()
        .filter(|existing| {
            !chart.metadata.dependencies.iter().any(|req| {
                existing.metadata.name == req.name
                    && compatible(&req.version, &existing.metadata.version)
            })
        })
        .cloned()
        .collect();
    for req in &mut chart.metadata.dependencies {
        if let Some(sub) = alias_dependency(&chart.dependencies, req) {
            kept.push(sub);
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
    let merged = values::merge_values(chart, &Values::new())?;
    let mut imported = Values::new();
    for dep in &mut chart.metadata.dependencies {
        let mut normalized = Vec::new();
        for entry in &dep.import_values {
            match entry {
                Json::Object(map) => {
                    let child = go_text(map.get("child"));
                    let parent = go_text(map.get("parent"));
                    let mut pair = serde_json::Map::new();
                    pair.insert("child".into(), Json::String(child.clone()));
                    pair.insert("parent".into(), Json::String(parent.clone()));
                    normalized.push(Json::Object(pair));
                    if let Some(found) = table(&merged, &format!("{}.{child}", dep.name)) {
                        let lifted = path_to_map(&parent, found.clone());
                        values::coalesce_tables(&mut imported, &lifted, true);
                    }
                }
                Json::String(name) => {
                    let child = format!("exports.{name}");
                    let mut pair = serde_json::Map::new();
                    pair.insert("child".into(), Json::String(child.clone()));
                    pair.insert("parent".into(), Json::String(".".into()));
                    normalized.push(Json::Object(pair));
                    if let Some(found) = table(&merged, &format!("{}.{child}", dep.name)) {
                        values::coalesce_tables(&mut imported, found, true);
                    }
                }
                // Helm skips entries of any other shape.
                _ => {}
            }
        }
        dep.import_values = normalized;
    }
    // The parent's own values win over what it imports.
    let mut out = merged;
    values::coalesce_tables(&mut out, &imported, true);
    chart.values = out;
    Ok(())
}

/// Go's `%v` of a map entry that should be a string (`<nil>` when missing).
fn go_text(value: Option<&Json>) -> String {
    match value {
        None | Some(Json::Null) => "<nil>".into(),
        Some(Json::String(s)) => s.clone(),
        Some(other) => crate::value::Value::from_json_floats(other).to_string(),
    }
}
