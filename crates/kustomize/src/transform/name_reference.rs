//! The name reference transformer: references follow the objects they name when those are renamed.

use crate::error::TransformError;
use std::collections::HashMap;

use serde_json::Value;

use crate::config::TransformerConfig;
use crate::fieldspec;
use crate::resource::{ResId, Resource, is_cluster_scoped};
use crate::types::FieldSpec;

struct Candidate {
    previous: Vec<ResId>,
    current: ResId,
    prefixes: Vec<String>,
    suffixes: Vec<String>,
}

fn same_ending(a: &[String], b: &[String]) -> bool {
    let (short, long) = if a.len() > b.len() { (b, a) } else { (a, b) };
    let diff = long.len() - short.len();
    if short.is_empty() {
        return diff == 0;
    }
    short.iter().enumerate().all(|(i, s)| &long[i + diff] == s)
}

fn prefix_suffix_equal(
    a: &Candidate,
    prefixes: &[String],
    suffixes: &[String],
    allow_empty: bool,
) -> bool {
    if allow_empty {
        (a.prefixes.is_empty() || prefixes.is_empty() || same_ending(&a.prefixes, prefixes))
            && (a.suffixes.is_empty() || suffixes.is_empty() || same_ending(&a.suffixes, suffixes))
    } else {
        same_ending(&a.prefixes, prefixes) && same_ending(&a.suffixes, suffixes)
    }
}

struct Referrer<'a> {
    current: ResId,
    prefixes: &'a [String],
    suffixes: &'a [String],
    role_ref: Option<(String, String)>,
}

#[allow(clippy::too_many_arguments)]
fn select_referral<'c>(
    old_name: &str,
    candidates: &[&'c Candidate],
    target: &crate::config::NameBackRef,
    spec: &FieldSpec,
    referrer: &Referrer<'_>,
    check_namespace_too: bool,
) -> Result<Option<&'c Candidate>, TransformError> {
    let mut list: Vec<&Candidate> = candidates
        .iter()
        .copied()
        .filter(|c| c.previous.iter().any(|p| p.name == old_name))
        .filter(|c| {
            c.previous
                .iter()
                .any(|p| p.gvk_selected_by(&target.group, &target.version, &target.kind))
        })
        .collect();
    if spec.path.ends_with("roleRef/name")
        && let Some((group, kind)) = &referrer.role_ref
    {
        list.retain(|c| {
            c.previous
                .iter()
                .any(|p| p.gvk_selected_by(group, "", kind))
        });
    }
    if !is_cluster_scoped(&referrer.current.kind) {
        list.retain(|c| {
            is_cluster_scoped(&c.current.kind)
                || c.current.kind == "ServiceAccount"
                || c.current.effective_namespace() == referrer.current.effective_namespace()
        });
    }
    if list.len() == 1 {
        return Ok(Some(list[0]));
    }
    list.retain(|c| prefix_suffix_equal(c, referrer.prefixes, referrer.suffixes, true));
    if list.len() > 1 {
        list.retain(|c| prefix_suffix_equal(c, referrer.prefixes, referrer.suffixes, false));
    }
    match list.len() {
        0 => Ok(None),
        1 => Ok(Some(list[0])),
        _ => {
            let first = &list[0].current;
            let identical = list.iter().all(|c| {
                c.current.name == first.name
                    && (!check_namespace_too || c.current.namespace == first.namespace)
            });
            if identical {
                Ok(Some(list[0]))
            } else {
                let ids: Vec<String> = list.iter().map(|c| c.current.to_string()).collect();
                Err(format!("found multiple possible referrals: {}", ids.join(", ")).into())
            }
        }
    }
}

/// Rewrites references to objects whose names changed (prefix, suffix, hash).
pub(crate) fn fix_name_references(
    resources: &mut [Resource],
    config: &TransformerConfig,
) -> Result<(), TransformError> {
    let candidates: Vec<Candidate> = resources
        .iter()
        .map(|r| Candidate {
            previous: r.previous.clone(),
            current: r.current_id(),
            prefixes: r.prefixes.clone(),
            suffixes: r.suffixes.clone(),
        })
        .collect();
    // Only renamed objects can be referred to by an old name: index them by every name
    // they had, in resource order.
    let mut by_old_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (index, candidate) in candidates.iter().enumerate() {
        let mut names: Vec<&str> = candidate.previous.iter().map(|p| p.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            by_old_name.entry(name).or_default().push(index);
        }
    }
    for (index, resource) in resources.iter_mut().enumerate() {
        let original = resource.original_id();
        let current = &candidates[index].current;
        let role_ref = resource.object.get("roleRef").map(|r| {
            (
                r.get("apiGroup")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                r.get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            )
        });
        let binding_namespaces: Vec<String> =
            if current.kind == "RoleBinding" || current.kind == "ClusterRoleBinding" {
                resource
                    .object
                    .get("subjects")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|s| s.get("kind").and_then(Value::as_str) == Some("ServiceAccount"))
                    .filter_map(|s| {
                        s.get("namespace")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    })
                    .collect()
            } else {
                Vec::new()
            };
        let referrer_cluster_scoped = is_cluster_scoped(&current.kind);
        let possible = |name: &str| -> Vec<&Candidate> {
            by_old_name
                .get(name)
                .into_iter()
                .flatten()
                .map(|&i| &candidates[i])
                .filter(|c| {
                    referrer_cluster_scoped
                        || is_cluster_scoped(&c.current.kind)
                        || c.current.effective_namespace() == current.effective_namespace()
                        || binding_namespaces
                            .iter()
                            .any(|ns| ns == &c.current.namespace)
                })
                .collect()
        };
        let referrer = Referrer {
            current: current.clone(),
            prefixes: &resource.prefixes,
            suffixes: &resource.suffixes,
            role_ref,
        };
        let object = &mut resource.object;
        for target in &config.name_reference {
            for spec in &target.referrers {
                if !original.gvk_selected_by(&spec.group, &spec.version, &spec.kind) {
                    continue;
                }
                fieldspec::visit(object, &spec.path, false, &mut |node| {
                    update_reference(node, &possible, target, spec, &referrer)
                })
                .map_err(|m| {
                    m.within(format!(
                        "updating name reference in '{}' field of '{}'",
                        spec.path, current
                    ))
                })?;
            }
        }
    }
    Ok(())
}

fn update_reference<'c>(
    node: &mut Value,
    possible: &dyn Fn(&str) -> Vec<&'c Candidate>,
    target: &crate::config::NameBackRef,
    spec: &FieldSpec,
    referrer: &Referrer<'_>,
) -> Result<(), TransformError> {
    match node {
        Value::String(name) => {
            let candidates = possible(name);
            if let Some(found) = select_referral(name, &candidates, target, spec, referrer, false)?
            {
                name.clone_from(&found.current.name);
            }
        }
        Value::Array(items) => {
            for item in items {
                update_reference(item, possible, target, spec, referrer)?;
            }
        }
        Value::Object(map) => {
            let Some(old) = map.get("name").and_then(Value::as_str).map(str::to_owned) else {
                return Ok(());
            };
            let candidates = possible(&old);
            let filtered: Vec<&Candidate> =
                if let Some(ns) = map.get("namespace").and_then(Value::as_str) {
                    let by_original: Vec<&Candidate> = candidates
                        .iter()
                        .copied()
                        .filter(|c| {
                            c.previous
                                .first()
                                .map_or(c.current.effective_namespace(), ResId::effective_namespace)
                                == ns
                        })
                        .collect();
                    if by_original.is_empty() {
                        candidates
                            .iter()
                            .copied()
                            .filter(|c| c.current.effective_namespace() == ns)
                            .collect()
                    } else {
                        by_original
                    }
                } else {
                    candidates
                };
            if let Some(found) = select_referral(&old, &filtered, target, spec, referrer, true)? {
                if found.current.name == old && found.current.namespace.is_empty() {
                    return Ok(());
                }
                map.insert("name".into(), Value::String(found.current.name.clone()));
                if !found.current.namespace.is_empty() {
                    map.insert(
                        "namespace".into(),
                        Value::String(found.current.namespace.clone()),
                    );
                }
            }
        }
        _ => {}
    }
    Ok(())
}
