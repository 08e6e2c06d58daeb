//! Discovery documents: `/api`, `/apis`, `/api/v1`, `/apis/<group>[/<version>]`, `/version`.

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::registry::{Registry, ResourceType};

/// The Kubernetes version the server reports.
pub const KUBERNETES_VERSION: (&str, &str) = ("1", "33");

fn verbs(rt: &ResourceType) -> Vec<&'static str> {
    vec![
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ]
    .into_iter()
    .filter(|v| !(rt.plural == "namespaces" && *v == "deletecollection"))
    .collect()
}

fn resource_entries(rt: &ResourceType) -> Vec<Value> {
    let mut main = json!({
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": verbs(rt),
    });
    if !rt.short_names.is_empty() {
        main["shortNames"] = json!(rt.short_names);
    }
    if !rt.categories.is_empty() {
        main["categories"] = json!(rt.categories);
    }
    let mut out = vec![main];
    if rt.status {
        out.push(json!({"name": format!("{}/status", rt.plural), "singularName": "", "namespaced": rt.namespaced, "kind": rt.kind, "verbs": ["get", "patch", "update"]}));
    }
    if rt.scale {
        out.push(json!({"name": format!("{}/scale", rt.plural), "singularName": "", "namespaced": rt.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
    }
    if rt.group.is_empty() && rt.plural == "namespaces" {
        out.push(json!({"name": "namespaces/finalize", "singularName": "", "namespaced": false, "kind": "Namespace", "verbs": ["update"]}));
    }
    out
}

/// `/api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_entry(group: &str, versions: &[(String, Vec<std::sync::Arc<ResourceType>>)]) -> Value {
    let list: Vec<Value> = versions
        .iter()
        .map(|(v, _)| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": list, "preferredVersion": list.first().cloned().unwrap_or(Value::Null)})
}

/// The create-only review resources (`kubectl auth can-i`, `kubectl auth whoami`): group, resource, kind.
const REVIEWS: [(&str, &str, &str); 3] = [
    (
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
    ),
    (
        "authorization.k8s.io",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
    ),
    (
        "authentication.k8s.io",
        "selfsubjectreviews",
        "SelfSubjectReview",
    ),
];

/// Whether `group`/v1/`resource` is one of the review resources.
pub fn is_review(group: &str, resource: &str) -> bool {
    REVIEWS
        .iter()
        .any(|(g, r, _)| *g == group && *r == resource)
}

fn review_groups() -> Vec<&'static str> {
    let mut groups: Vec<&str> = REVIEWS.iter().map(|(g, _, _)| *g).collect();
    groups.dedup();
    groups
}

fn review_group_entry(group: &str) -> Value {
    let v = json!({"groupVersion": format!("{group}/v1"), "version": "v1"});
    json!({"name": group, "versions": [v.clone()], "preferredVersion": v})
}

/// The answer to a review: there is no authentication or authorization here, so every request is
/// allowed, and the caller is the cluster administrator.
pub fn review(request: &Value) -> ApiResult<Value> {
    let kind = request.get("kind").and_then(Value::as_str).unwrap_or("");
    let mut out = request.clone();
    if !out.is_object() {
        return Err(ApiError::bad_request("the review must be an object"));
    }
    out["status"] = match kind {
        "SelfSubjectAccessReview" => {
            json!({"allowed": true, "reason": "the embedded control plane authorizes every request"})
        }
        "SelfSubjectRulesReview" => json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        }),
        "SelfSubjectReview" => {
            json!({"userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]}})
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "unexpected kind {other:?} for a review"
            )));
        }
    };
    Ok(out)
}

/// `/apis`.
pub fn group_list(registry: &Registry) -> Value {
    let mut groups: Vec<Value> = registry
        .groups()
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, versions)| group_entry(g, versions))
        .collect();
    groups.extend(review_groups().into_iter().map(review_group_entry));
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let found = registry
        .groups()
        .iter()
        .find(|(g, _)| g == name && !g.is_empty())
        .map(|(g, versions)| group_entry(g, versions))
        .or_else(|| {
            review_groups()
                .contains(&name)
                .then(|| review_group_entry(name))
        });
    found.map(|mut v| {
        v["kind"] = json!("APIGroup");
        v["apiVersion"] = json!("v1");
        v
    })
}

/// `/api/v1` or `/apis/<group>/<version>`.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    if version == "v1" && review_groups().contains(&group) {
        let resources: Vec<Value> = REVIEWS
            .iter()
            .filter(|(g, _, _)| *g == group)
            .map(|(_, r, k)| json!({"name": r, "singularName": r.trim_end_matches('s'), "namespaced": false, "kind": k, "verbs": ["create"]}))
            .collect();
        return Some(
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{group}/v1"), "resources": resources}),
        );
    }
    let groups = registry.groups();
    let (_, versions) = groups.iter().find(|(g, _)| g == group)?;
    let (_, types) = versions.iter().find(|(v, _)| v == version)?;
    let resources: Vec<Value> = types.iter().flat_map(|rt| resource_entries(rt)).collect();
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": KUBERNETES_VERSION.0,
        "minor": KUBERNETES_VERSION.1,
        "gitVersion": format!("v{}.{}.0-capstan.{}", KUBERNETES_VERSION.0, KUBERNETES_VERSION.1, env!("CARGO_PKG_VERSION")),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}
