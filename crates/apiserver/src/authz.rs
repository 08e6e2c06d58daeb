//! Impersonation and RBAC authorization.
//!
//! The control plane has no authentication: a request without impersonation headers comes from the
//! cluster administrator and is never authorized (it costs one scan of the header names). A request
//! with `Impersonate-User` (and optionally `Impersonate-Group`, `Impersonate-Uid`,
//! `Impersonate-Extra-<key>`) acts as that user, who is authorized with Kubernetes RBAC: the rules
//! of the Roles and ClusterRoles bound to the user, its groups or its service account, read from the
//! store on every request (bindings and roles are shared `Arc`s, nothing is cloned).
//!
//! # Expected flow
//! `impersonated_user` turns the headers into a [`UserInfo`]; `RequestAttributes::from_request`
//! derives verb, API group, resource, subresource, namespace and name from the request as
//! kube-apiserver's request-info parser does; `authorize` walks the ClusterRoleBindings, then the
//! RoleBindings of the request's namespace, and stops at the first rule that allows the request;
//! `forbidden` builds the `403 Forbidden` Status kubectl shows.
//!
//! # Guarantees
//! - The same answers as Kubernetes' RBAC authorizer for the rule fields it supports (`verbs`,
//!   `apiGroups`, `resources` with subresources and `*/sub`, `resourceNames`, `nonResourceURLs`
//!   with a trailing `*`); aggregated ClusterRoles are not aggregated (their `rules` are used as
//!   stored).
//! - `bootstrap_policy` seeds the default ClusterRoles and ClusterRoleBindings Kubernetes creates
//!   (`cluster-admin`, `system:discovery`, `system:basic-user`, `system:public-info-viewer`).

use std::collections::BTreeMap;

use http::{HeaderMap, Method};
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::error::{ApiError, ApiResult};
use crate::registry::StorageKey;

/// The RBAC API group.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
/// Every impersonated user except `system:anonymous` and members of `system:unauthenticated`
/// is in this group.
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// `system:anonymous` is always in this group.
const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
const ANONYMOUS: &str = "system:anonymous";
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// The user a request acts as.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// `(namespace, name)` when the user is a service account (`system:serviceaccount:ns:name`).
    pub fn service_account(&self) -> Option<(&str, &str)> {
        let rest = self.name.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
        let (ns, name) = rest.split_once(':')?;
        (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
    }

    fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// `SelfSubjectReview.status.userInfo`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        if !self.extra.is_empty() {
            v["extra"] = json!(self.extra);
        }
        v
    }
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> impl Iterator<Item = String> + 'a {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The impersonated user, or `None` for a request without impersonation headers (the cluster
/// administrator). Service accounts get `system:serviceaccounts` and `system:serviceaccounts:<ns>`
/// when no group is impersonated; everyone but `system:anonymous` gets `system:authenticated`.
pub fn impersonated_user(headers: &HeaderMap) -> ApiResult<Option<UserInfo>> {
    if !headers
        .keys()
        .any(|k| k.as_str().starts_with("impersonate-"))
    {
        return Ok(None);
    }
    let name = headers
        .get("impersonate-user")
        .map(|v| {
            v.to_str()
                .map(str::to_owned)
                .map_err(|_| ApiError::bad_request("Impersonate-User is not valid text"))
        })
        .transpose()?;
    let groups: Vec<String> = header_values(headers, "impersonate-group").collect();
    let uid = header_values(headers, "impersonate-uid")
        .next()
        .unwrap_or_default();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (key, value) in headers {
        if let Some(k) = key.as_str().strip_prefix("impersonate-extra-")
            && let Ok(v) = value.to_str()
        {
            let k = percent_encoding::percent_decode_str(k)
                .decode_utf8_lossy()
                .to_lowercase();
            extra.entry(k).or_default().push(v.to_owned());
        }
    }
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        return Err(ApiError::internal(
            "requested impersonation of groups, a uid or extra fields without impersonating a user",
        ));
    };
    let mut user = UserInfo {
        name,
        uid,
        groups,
        extra,
    };
    if user.groups.is_empty()
        && let Some((ns, _)) = user.service_account()
    {
        user.groups = vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{ns}"),
        ];
    }
    // As kube-apiserver: a user impersonated into `system:unauthenticated` is not authenticated,
    // and `system:anonymous` always is unauthenticated.
    if user.name == ANONYMOUS {
        if !user.in_group(ALL_UNAUTHENTICATED) {
            user.groups.push(ALL_UNAUTHENTICATED.to_owned());
        }
    } else if !user.in_group(ALL_AUTHENTICATED) && !user.in_group(ALL_UNAUTHENTICATED) {
        user.groups.push(ALL_AUTHENTICATED.to_owned());
    }
    Ok(Some(user))
}

/// What a request does, in the terms authorization rules use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestAttributes {
    pub verb: String,
    /// `false` for non-resource URLs (`/api`, `/version`, `/openapi/v3`, ...).
    pub resource_request: bool,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The URL path (non-resource requests).
    pub path: String,
}

/// Whether a list request asks for a watch: as kube-apiserver, any `watch` value except `false`
/// and `0` (case-insensitive) does.
pub(crate) fn watch_requested(query: &std::collections::HashMap<String, String>) -> bool {
    query
        .get("watch")
        .is_some_and(|v| !v.eq_ignore_ascii_case("false") && v != "0")
}

fn field_selector_name(selector: &str) -> Option<&str> {
    selector.split(',').find_map(|req| {
        let rest = req.trim().strip_prefix("metadata.name")?;
        let value = rest.strip_prefix("==").or_else(|| rest.strip_prefix('='))?;
        (!value.is_empty() && !value.contains(['/', '%'])).then_some(value)
    })
}

impl RequestAttributes {
    /// Derives the attributes of an HTTP request as kube-apiserver does: `/api` and `/apis`
    /// paths with a resource are resource requests (`GET` without a name is `list` or `watch`,
    /// `DELETE` without a name is `deletecollection`); anything else is a non-resource request whose
    /// verb is the lowercase HTTP method.
    pub fn from_request(
        method: &Method,
        path: &str,
        query: &std::collections::HashMap<String, String>,
    ) -> Self {
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let non_resource = || Self {
            verb: method.as_str().to_lowercase(),
            path: path.to_owned(),
            ..Self::default()
        };
        let (group, rest) = match parts.as_slice() {
            ["api", rest @ ..] if rest.len() >= 2 => ("", rest),
            ["apis", g, rest @ ..] if rest.len() >= 2 => (*g, rest),
            _ => return non_resource(),
        };
        let version = rest[0];
        let mut rest = &rest[1..];
        let mut verb = if matches!(rest.first(), Some(&("watch" | "proxy"))) && rest.len() >= 2 {
            let special = rest[0];
            rest = &rest[1..];
            special
        } else {
            match *method {
                Method::POST => "create",
                Method::GET | Method::HEAD => "get",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "",
            }
        };
        let mut namespace = "";
        if rest.first() == Some(&"namespaces") && rest.len() > 1 {
            namespace = rest[1];
            if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
                rest = &rest[2..];
            }
        }
        let resource = rest.first().copied().unwrap_or("");
        let mut name = rest.get(1).copied().unwrap_or("");
        let subresource = if verb == "proxy" {
            ""
        } else {
            rest.get(2).copied().unwrap_or("")
        };
        // Only a collection GET becomes `list` or `watch`: kube-apiserver authorizes a GET of a
        // named object as `get` whatever its query, and serves it as a plain get (the HTTP layer
        // does the same), so `?watch=true` on an item path cannot open a watch.
        if name.is_empty() && verb == "get" {
            verb = if watch_requested(query) {
                "watch"
            } else {
                "list"
            };
            if let Some(selected) = query
                .get("fieldSelector")
                .and_then(|s| field_selector_name(s))
            {
                name = selected;
            }
        }
        if name.is_empty() && verb == "delete" {
            verb = "deletecollection";
        }
        Self {
            verb: verb.to_owned(),
            resource_request: true,
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            path: path.to_owned(),
        }
    }

    /// `resource/subresource` or `resource`.
    fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// The outcome of an authorization.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// Kubernetes' reason: `RBAC: allowed by ...` when allowed; when denied, the evaluation errors
    /// (`RBAC: role.rbac.authorization.k8s.io "x" not found`) or empty.
    pub reason: String,
}

fn strings<'a>(v: &'a Value, field: &str) -> impl Iterator<Item = &'a str> {
    v.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn has_or_star(v: &Value, field: &str, wanted: &str) -> bool {
    strings(v, field).any(|s| s == "*" || s == wanted)
}

/// Whether one PolicyRule allows the request.
pub fn rule_allows(rule: &Value, attrs: &RequestAttributes) -> bool {
    if !has_or_star(rule, "verbs", &attrs.verb) {
        return false;
    }
    if !attrs.resource_request {
        return strings(rule, "nonResourceURLs").any(|u| {
            u == "*"
                || u == attrs.path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| attrs.path.starts_with(prefix))
        });
    }
    if !has_or_star(rule, "apiGroups", &attrs.group) {
        return false;
    }
    let combined = attrs.combined_resource();
    let resource_ok = strings(rule, "resources").any(|r| {
        r == "*"
            || r == combined
            || (!attrs.subresource.is_empty()
                && r.strip_prefix("*/") == Some(attrs.subresource.as_str()))
    });
    if !resource_ok {
        return false;
    }
    let mut names = strings(rule, "resourceNames").peekable();
    names.peek().is_none() || names.any(|n| n == attrs.name)
}

/// Whether a binding's subject is the user. `namespace` is the RoleBinding's namespace (empty for
/// ClusterRoleBindings): a ServiceAccount subject without a namespace defaults to it.
fn subject_applies(user: &UserInfo, subject: &Value, namespace: &str) -> bool {
    let s = |f: &str| subject.get(f).and_then(Value::as_str).unwrap_or("");
    match s("kind") {
        "User" => user.name == s("name"),
        "Group" => user.in_group(s("name")),
        "ServiceAccount" => {
            let ns = if s("namespace").is_empty() {
                namespace
            } else {
                s("namespace")
            };
            !ns.is_empty() && user.service_account() == Some((ns, s("name")))
        }
        _ => false,
    }
}

fn describe_subject(subject: &Value, namespace: &str) -> String {
    let s = |f: &str| subject.get(f).and_then(Value::as_str).unwrap_or("");
    if s("kind") == "ServiceAccount" {
        let ns = if s("namespace").is_empty() {
            namespace
        } else {
            s("namespace")
        };
        format!("ServiceAccount \"{ns}/{}\"", s("name"))
    } else {
        format!("{} \"{}\"", s("kind"), s("name"))
    }
}

fn key(resource: &str) -> StorageKey {
    StorageKey {
        group: RBAC_GROUP.to_owned(),
        resource: resource.to_owned(),
    }
}

/// Walks the rules that apply to `user` in `namespace` (cluster-wide ones first), calling `visit`
/// with a description of where each rule comes from, until `visit` returns `false`. Missing roles
/// are reported as errors in Kubernetes' words.
fn visit_rules(
    cluster: &Cluster,
    user: &UserInfo,
    namespace: &str,
    mut visit: impl FnMut(&dyn Fn() -> String, &Value) -> bool,
    errors: &mut Vec<String>,
) {
    let store = cluster.store();
    let (cluster_bindings, _) = store.list(&key("clusterrolebindings"), None);
    for binding in &cluster_bindings {
        let b = &binding.value;
        let Some(subject) = b
            .get("subjects")
            .and_then(Value::as_array)
            .and_then(|subjects| subjects.iter().find(|s| subject_applies(user, s, "")))
        else {
            continue;
        };
        let role_name = b
            .pointer("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let Some(role) = store.get(&key("clusterroles"), &(String::new(), role_name.to_owned()))
        else {
            errors.push(format!(
                "clusterrole.{RBAC_GROUP} \"{role_name}\" not found"
            ));
            continue;
        };
        let describe = || {
            format!(
                "ClusterRoleBinding \"{}\" of ClusterRole \"{role_name}\" to {}",
                binding.name(),
                describe_subject(subject, "")
            )
        };
        for rule in role
            .value
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !visit(&describe, rule) {
                return;
            }
        }
    }
    if namespace.is_empty() {
        return;
    }
    let (bindings, _) = store.list(&key("rolebindings"), Some(namespace));
    for binding in &bindings {
        let b = &binding.value;
        let Some(subject) = b
            .get("subjects")
            .and_then(Value::as_array)
            .and_then(|subjects| {
                subjects
                    .iter()
                    .find(|s| subject_applies(user, s, namespace))
            })
        else {
            continue;
        };
        let role_kind = b
            .pointer("/roleRef/kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        let role_name = b
            .pointer("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let role = match role_kind {
            "Role" => store.get(&key("roles"), &(namespace.to_owned(), role_name.to_owned())),
            "ClusterRole" => {
                store.get(&key("clusterroles"), &(String::new(), role_name.to_owned()))
            }
            _ => None,
        };
        let Some(role) = role else {
            errors.push(format!(
                "{}.{RBAC_GROUP} \"{role_name}\" not found",
                role_kind.to_lowercase()
            ));
            continue;
        };
        let describe = || {
            format!(
                "RoleBinding \"{}/{namespace}\" of {role_kind} \"{role_name}\" to {}",
                binding.name(),
                describe_subject(subject, namespace)
            )
        };
        for rule in role
            .value
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !visit(&describe, rule) {
                return;
            }
        }
    }
}

/// Authorizes `attrs` for `user` with RBAC.
pub fn authorize(cluster: &Cluster, user: &UserInfo, attrs: &RequestAttributes) -> Decision {
    let mut decision = Decision::default();
    let mut errors = Vec::new();
    visit_rules(
        cluster,
        user,
        &attrs.namespace,
        |describe, rule| {
            if rule_allows(rule, attrs) {
                decision.allowed = true;
                decision.reason = format!("RBAC: allowed by {}", describe());
                false
            } else {
                true
            }
        },
        &mut errors,
    );
    if !decision.allowed && !errors.is_empty() {
        decision.reason = if errors.len() == 1 {
            format!("RBAC: {}", errors[0])
        } else {
            format!("RBAC: [{}]", errors.join(", "))
        };
    }
    decision
}

/// kube-apiserver's text for a denied request: `User "u" cannot get resource "pods" in API group ""
/// in the namespace "ns"`.
pub fn forbidden_message(user: &UserInfo, attrs: &RequestAttributes) -> String {
    if !attrs.resource_request {
        return format!(
            "User {:?} cannot {} path {:?}",
            user.name, attrs.verb, attrs.path
        );
    }
    let resource = attrs.combined_resource();
    if attrs.namespace.is_empty() {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
            user.name, attrs.verb, resource, attrs.group
        )
    } else {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
            user.name, attrs.verb, resource, attrs.group, attrs.namespace
        )
    }
}

/// The `403 Forbidden` Status for `attrs` with `detail` after `is forbidden: `, with details
/// `{name, group, kind}` as Kubernetes' `NewForbidden` builds them.
pub fn forbidden_error(attrs: &RequestAttributes, detail: &str) -> ApiError {
    let qualified = crate::error::qualified(&attrs.group, &attrs.resource);
    let message = if attrs.resource.is_empty() && attrs.group.is_empty() {
        format!("forbidden: {detail}")
    } else if attrs.name.is_empty() {
        format!("{qualified} is forbidden: {detail}")
    } else {
        format!("{qualified} {:?} is forbidden: {detail}", attrs.name)
    };
    let mut e = ApiError::forbidden(message);
    if !attrs.group.is_empty() {
        e.group = Some(attrs.group.clone());
    }
    if !attrs.resource.is_empty() {
        e.kind = Some(attrs.resource.clone());
    }
    if !attrs.name.is_empty() {
        e.name = Some(attrs.name.clone());
    }
    e
}

/// Authorizes a request, or returns the `403 Forbidden` error kube-apiserver sends.
pub fn check(cluster: &Cluster, user: &UserInfo, attrs: &RequestAttributes) -> ApiResult<()> {
    let decision = authorize(cluster, user, attrs);
    if decision.allowed {
        return Ok(());
    }
    let mut detail = forbidden_message(user, attrs);
    if !decision.reason.is_empty() {
        detail = format!("{detail}: {}", decision.reason);
    }
    tracing::debug!(user = %user.name, verb = %attrs.verb, resource = %attrs.resource, namespace = %attrs.namespace, "request forbidden");
    Err(forbidden_error(attrs, &detail))
}

/// The extra check server-side apply makes when the object does not exist yet: the user must also
/// be allowed to `create` it. As in kube-apiserver, the message is the RBAC reason alone.
pub fn check_create_on_apply(
    cluster: &Cluster,
    user: &UserInfo,
    attrs: &RequestAttributes,
) -> ApiResult<()> {
    let create = RequestAttributes {
        verb: "create".to_owned(),
        ..attrs.clone()
    };
    let decision = authorize(cluster, user, &create);
    if decision.allowed {
        Ok(())
    } else {
        Err(forbidden_error(&create, &decision.reason))
    }
}

fn string_field(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// Answers a `SelfSubjectAccessReview`, `SelfSubjectRulesReview` or `SelfSubjectReview` for an
/// impersonated user.
pub fn review(cluster: &Cluster, user: &UserInfo, request: &Value) -> ApiResult<Value> {
    if !request.is_object() {
        return Err(ApiError::bad_request("the review must be an object"));
    }
    let mut out = request.clone();
    let kind = request.get("kind").and_then(Value::as_str).unwrap_or("");
    out["status"] = match kind {
        "SelfSubjectAccessReview" => {
            let attrs = if request.pointer("/spec/resourceAttributes").is_some() {
                let f =
                    |name: &str| string_field(request, &format!("/spec/resourceAttributes/{name}"));
                RequestAttributes {
                    verb: f("verb"),
                    resource_request: true,
                    group: f("group"),
                    version: f("version"),
                    resource: f("resource"),
                    subresource: f("subresource"),
                    namespace: f("namespace"),
                    name: f("name"),
                    path: String::new(),
                }
            } else if request.pointer("/spec/nonResourceAttributes").is_some() {
                RequestAttributes {
                    verb: string_field(request, "/spec/nonResourceAttributes/verb"),
                    path: string_field(request, "/spec/nonResourceAttributes/path"),
                    ..RequestAttributes::default()
                }
            } else {
                return Err(ApiError::invalid(
                    "authorization.k8s.io",
                    "SelfSubjectAccessReview",
                    "",
                    vec![crate::error::Cause {
                        reason: "FieldValueRequired".into(),
                        message: "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified".into(),
                        field: "spec.resourceAttributes".into(),
                    }],
                ));
            };
            let decision = authorize(cluster, user, &attrs);
            let mut status = json!({"allowed": decision.allowed});
            if !decision.reason.is_empty() {
                status["reason"] = json!(decision.reason);
            }
            status
        }
        "SelfSubjectRulesReview" => {
            let namespace = string_field(request, "/spec/namespace");
            let mut resource_rules = Vec::new();
            let mut non_resource_rules = Vec::new();
            let mut errors = Vec::new();
            visit_rules(
                cluster,
                user,
                &namespace,
                |_, rule| {
                    let pick = |fields: &[&str]| {
                        let mut m = serde_json::Map::new();
                        for f in fields {
                            if let Some(v) = rule.get(*f) {
                                m.insert((*f).to_owned(), v.clone());
                            }
                        }
                        Value::Object(m)
                    };
                    if rule.get("nonResourceURLs").is_some() {
                        non_resource_rules.push(pick(&["verbs", "nonResourceURLs"]));
                    } else {
                        resource_rules.push(pick(&[
                            "verbs",
                            "apiGroups",
                            "resources",
                            "resourceNames",
                        ]));
                    }
                    true
                },
                &mut errors,
            );
            let mut status = json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": !errors.is_empty()});
            if !errors.is_empty() {
                status["evaluationError"] = json!(errors.join(", "));
            }
            status
        }
        "SelfSubjectReview" => json!({"userInfo": user.to_json()}),
        other => {
            return Err(ApiError::bad_request(format!(
                "unexpected kind {other:?} for a review"
            )));
        }
    };
    Ok(out)
}

/// The default RBAC objects kube-apiserver creates at start (`kubernetes.io/bootstrapping:
/// rbac-defaults`): `cluster-admin` bound to `system:masters`, and the discovery, basic-user and
/// public-info roles bound to every authenticated user. Aggregated roles (`admin`, `edit`, `view`)
/// are not created.
pub fn bootstrap_policy() -> Vec<Value> {
    let meta = |name: &str| {
        json!({
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        })
    };
    let role = |name: &str, rules: Value| json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(name), "rules": rules});
    let binding = |name: &str, groups: &[&str]| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": RBAC_GROUP, "kind": "Group", "name": g}))
            .collect();
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(name),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name}, "subjects": subjects})
    };
    let public_urls = json!(["/healthz", "/livez", "/readyz", "/version", "/version/"]);
    vec![
        role(
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        role(
            "system:discovery",
            json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
        ),
        role(
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ]),
        ),
        role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": public_urls, "verbs": ["get"]}]),
        ),
        binding("cluster-admin", &["system:masters"]),
        binding("system:discovery", &[ALL_AUTHENTICATED]),
        binding("system:basic-user", &[ALL_AUTHENTICATED]),
        binding(
            "system:public-info-viewer",
            &[ALL_AUTHENTICATED, "system:unauthenticated"],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn attrs(method: &Method, path: &str, query: &[(&str, &str)]) -> RequestAttributes {
        let q: HashMap<String, String> = query
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        RequestAttributes::from_request(method, path, &q)
    }

    #[test]
    fn request_attributes_follow_kube_apiserver() {
        let a = attrs(
            &Method::PATCH,
            "/apis/apps/v1/namespaces/team-b/deployments/web",
            &[],
        );
        assert_eq!(
            (
                a.verb.as_str(),
                a.group.as_str(),
                a.resource.as_str(),
                a.namespace.as_str(),
                a.name.as_str()
            ),
            ("patch", "apps", "deployments", "team-b", "web")
        );
        let a = attrs(
            &Method::GET,
            "/api/v1/namespaces/a/configmaps",
            &[("watch", "true")],
        );
        assert_eq!(
            (a.verb.as_str(), a.resource.as_str()),
            ("watch", "configmaps")
        );
        let a = attrs(
            &Method::GET,
            "/api/v1/namespaces/a/configmaps",
            &[("fieldSelector", "metadata.name=one")],
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("list", "one"));
        let a = attrs(&Method::GET, "/api/v1/watch/namespaces/a/pods/p", &[]);
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "p"));
        let a = attrs(
            &Method::GET,
            "/api/v1/namespaces/a/configmaps",
            &[("watch", "yes"), ("fieldSelector", "metadata.name=one")],
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "one"));
        let a = attrs(
            &Method::GET,
            "/api/v1/namespaces/a/configmaps",
            &[("watch", "False")],
        );
        assert_eq!(a.verb, "list");
        let a = attrs(&Method::DELETE, "/api/v1/namespaces/a/secrets", &[]);
        assert_eq!(a.verb, "deletecollection");
        let a = attrs(
            &Method::PUT,
            "/apis/apps/v1/namespaces/a/deployments/w/status",
            &[],
        );
        assert_eq!(
            (a.verb.as_str(), a.subresource.as_str()),
            ("update", "status")
        );
        // A namespace is authorized in itself.
        let a = attrs(&Method::GET, "/api/v1/namespaces/a", &[]);
        assert_eq!(
            (a.resource.as_str(), a.name.as_str(), a.namespace.as_str()),
            ("namespaces", "a", "a")
        );
        let a = attrs(&Method::PUT, "/api/v1/namespaces/a/finalize", &[]);
        assert_eq!(
            (a.resource.as_str(), a.subresource.as_str()),
            ("namespaces", "finalize")
        );
        for path in [
            "/api",
            "/api/v1",
            "/apis/apps/v1",
            "/version",
            "/openapi/v3",
        ] {
            let a = attrs(&Method::GET, path, &[]);
            assert!(!a.resource_request, "{path}");
            assert_eq!(a.verb, "get");
        }
    }

    #[test]
    fn rules_match_like_rbac() {
        let a = attrs(
            &Method::PATCH,
            "/apis/apps/v1/namespaces/a/deployments/web/status",
            &[],
        );
        let rule = |v: Value| rule_allows(&v, &a);
        assert!(rule(
            json!({"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["patch"]})
        ));
        assert!(rule(
            json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]})
        ));
        assert!(!rule(
            json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["patch"]})
        ));
        assert!(!rule(
            json!({"apiGroups": [""], "resources": ["*"], "verbs": ["patch"]})
        ));
        assert!(rule(
            json!({"apiGroups": ["apps"], "resources": ["*"], "verbs": ["patch"], "resourceNames": ["web"]})
        ));
        assert!(!rule(
            json!({"apiGroups": ["apps"], "resources": ["*"], "verbs": ["patch"], "resourceNames": ["api"]})
        ));
        let list = attrs(&Method::GET, "/apis/apps/v1/namespaces/a/deployments", &[]);
        assert!(!rule_allows(
            &json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"], "resourceNames": ["web"]}),
            &list
        ));
        let discovery = attrs(&Method::GET, "/apis/apps/v1", &[]);
        assert!(rule_allows(
            &json!({"nonResourceURLs": ["/apis/*"], "verbs": ["get"]}),
            &discovery
        ));
        assert!(!rule_allows(
            &json!({"nonResourceURLs": ["/api/*"], "verbs": ["get"]}),
            &discovery
        ));
    }

    #[test]
    fn impersonation_headers() {
        let mut h = HeaderMap::new();
        assert_eq!(impersonated_user(&h).unwrap(), None);
        h.insert(
            "impersonate-user",
            "system:serviceaccount:team-a:deployer".parse().unwrap(),
        );
        let u = impersonated_user(&h).unwrap().unwrap();
        assert_eq!(
            u.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:team-a",
                "system:authenticated"
            ]
        );
        assert_eq!(u.service_account(), Some(("team-a", "deployer")));
        h.append("impersonate-group", "devs".parse().unwrap());
        h.append("impersonate-group", "ops".parse().unwrap());
        h.insert("impersonate-extra-scopes%2Fx", "a".parse().unwrap());
        let u = impersonated_user(&h).unwrap().unwrap();
        assert_eq!(u.groups, ["devs", "ops", "system:authenticated"]);
        assert_eq!(u.extra.get("scopes/x").unwrap(), &["a".to_owned()]);
        let mut only_group = HeaderMap::new();
        only_group.insert("impersonate-group", "system:masters".parse().unwrap());
        assert!(impersonated_user(&only_group).is_err());
    }

    #[test]
    fn impersonating_unauthenticated_does_not_add_authenticated() {
        let mut h = HeaderMap::new();
        h.insert("impersonate-user", "jane".parse().unwrap());
        h.insert(
            "impersonate-group",
            "system:unauthenticated".parse().unwrap(),
        );
        let u = impersonated_user(&h).unwrap().unwrap();
        assert_eq!(u.groups, ["system:unauthenticated"]);
        assert!(!u.in_group(ALL_AUTHENTICATED));

        let mut h = HeaderMap::new();
        h.insert("impersonate-user", "system:anonymous".parse().unwrap());
        let u = impersonated_user(&h).unwrap().unwrap();
        assert_eq!(u.groups, ["system:unauthenticated"]);
        h.append("impersonate-group", "devs".parse().unwrap());
        let u = impersonated_user(&h).unwrap().unwrap();
        assert_eq!(u.groups, ["devs", "system:unauthenticated"]);
    }

    #[test]
    fn forbidden_messages() {
        let user = UserInfo {
            name: "system:serviceaccount:team-a:deployer".into(),
            ..UserInfo::default()
        };
        let a = attrs(
            &Method::PATCH,
            "/apis/apps/v1/namespaces/team-b/deployments/web",
            &[],
        );
        let e = forbidden_error(&a, &forbidden_message(&user, &a));
        assert_eq!(
            e.message,
            "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:team-a:deployer\" cannot patch resource \"deployments\" in API group \"apps\" in the namespace \"team-b\""
        );
        assert_eq!(e.code, 403);
        let a = attrs(&Method::GET, "/api/v1/namespaces", &[]);
        assert_eq!(
            forbidden_error(&a, &forbidden_message(&user, &a)).message,
            "namespaces is forbidden: User \"system:serviceaccount:team-a:deployer\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
        );
        let a = attrs(&Method::GET, "/metrics", &[]);
        assert_eq!(
            forbidden_error(&a, &forbidden_message(&user, &a)).message,
            "forbidden: User \"system:serviceaccount:team-a:deployer\" cannot get path \"/metrics\""
        );
    }
}
