//! The output order (`sortOptions`).

use crate::error::TransformError;
use std::collections::BTreeMap;

use crate::resource::{ResId, Resource};
use crate::types::SortOptions;

const ORDER_FIRST: &[&str] = &[
    "Namespace",
    "ResourceQuota",
    "StorageClass",
    "CustomResourceDefinition",
    "ServiceAccount",
    "PodSecurityPolicy",
    "Role",
    "ClusterRole",
    "RoleBinding",
    "ClusterRoleBinding",
    "ConfigMap",
    "Secret",
    "Endpoints",
    "Service",
    "LimitRange",
    "PriorityClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
];
const ORDER_LAST: &[&str] = &[
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

fn legacy_gvk(id: &ResId) -> String {
    let or = |s: &str, d: &str| {
        if s.is_empty() {
            d.to_owned()
        } else {
            s.to_owned()
        }
    };
    format!(
        "{}_{}_{}",
        or(&id.group, "~G"),
        or(&id.version, "~V"),
        or(&id.kind, "~K")
    )
}

fn gvk_string(id: &ResId) -> String {
    let group = if id.group.is_empty() {
        "[noGrp]"
    } else {
        &id.group
    };
    format!("{}.{}.{}", id.kind, id.version, group)
}

/// Orders the output (`legacy` by default, or `fifo`).
pub(crate) fn sort(
    resources: &mut Vec<Resource>,
    options: Option<&SortOptions>,
) -> Result<(), TransformError> {
    let (first, last): (Vec<String>, Vec<String>) = match options {
        Some(options) if options.order == "fifo" => {
            if options.legacy_sort_options.is_some() {
                return Err("the field 'sortOptions.legacySortOptions' is set but the selected sort order is 'fifo', not 'legacy'".into());
            }
            return Ok(());
        }
        Some(options) if options.order == "legacy" => match &options.legacy_sort_options {
            Some(legacy) => (legacy.order_first.clone(), legacy.order_last.clone()),
            None => (to_strings(ORDER_FIRST), to_strings(ORDER_LAST)),
        },
        Some(options) => {
            return Err(format!(
                "the field 'sortOptions.order' must be one of [fifo, legacy], not {:?}",
                options.order
            )
            .into());
        }
        None => (to_strings(ORDER_FIRST), to_strings(ORDER_LAST)),
    };
    // (-1, i) for the i-th kind of `first`, (1, i) for `last`, (0, 0) for every other kind.
    let mut orders: BTreeMap<&str, (i8, usize)> = BTreeMap::new();
    for (i, kind) in first.iter().enumerate() {
        orders.insert(kind, (-1, i));
    }
    for (i, kind) in last.iter().enumerate() {
        orders.insert(kind, (1, i));
    }
    let mut keyed: Vec<(ResId, String, String, Resource)> = std::mem::take(resources)
        .into_iter()
        .map(|resource| {
            let id = resource.current_id();
            let ns = if id.namespace.is_empty() {
                "~X"
            } else {
                &id.namespace
            };
            let name = if id.name.is_empty() { "~N" } else { &id.name };
            let key = format!("{}|{ns}|{name}", gvk_string(&id));
            let legacy = legacy_gvk(&id);
            (id, key, legacy, resource)
        })
        .collect();
    keyed.sort_by(|(x, x_key, x_legacy, _), (y, y_key, y_legacy, _)| {
        let same_gvk = x.group == y.group && x.version == y.version && x.kind == y.kind;
        if !same_gvk {
            let (ox, oy) = (
                orders.get(x.kind.as_str()).copied().unwrap_or_default(),
                orders.get(y.kind.as_str()).copied().unwrap_or_default(),
            );
            if ox != oy {
                return ox.cmp(&oy);
            }
            if x.kind == "Namespace"
                && y.kind == "Namespace"
                && (x.group.is_empty() || y.group.is_empty())
            {
                return y_legacy.cmp(x_legacy);
            }
            return x_legacy.cmp(y_legacy);
        }
        x_key.cmp(y_key)
    });
    resources.extend(keyed.into_iter().map(|(_, _, _, resource)| resource));
    Ok(())
}

fn to_strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}
