//! The cluster: every API operation (create, update, patch, apply, delete, get, list) with the
//! admission rules a real API server applies — metadata bookkeeping, validation, defaulting, pruning,
//! `generation`, `managedFields`, finalizers and namespaces. The HTTP layer and the control plane's
//! own controllers both go through it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use capstan_patch::managed::{self, ApplyError, WriteContext};
use serde_json::{Map, Value, json};

use crate::defaults;
use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::{Registry, ResourceType, StorageKey};
use crate::secrets;
use crate::store::{ObjectKey, Store, Stored, WriteError};
use crate::strategy;

/// Finalizer the garbage collector adds for `propagationPolicy: Foreground`.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// Finalizer the garbage collector adds for `propagationPolicy: Orphan`.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// The namespace lifecycle finalizer in `spec.finalizers`.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

/// Deepest nesting an object may have. Request bodies are limited by their decoders, but patches
/// can deepen a stored object step by step; every recursive walk (validation, pruning, managed
/// fields, encoding) relies on this bound.
pub const MAX_OBJECT_DEPTH: usize = 100;

/// Whether `value` nests deeper than `max` (iterative: safe on any input).
pub fn exceeds_depth(value: &Value, max: usize) -> bool {
    let mut stack = vec![(value, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Object(m) => Box::new(m.values()),
            Value::Array(a) => Box::new(a.iter()),
            _ => continue,
        };
        if depth > max {
            return true;
        }
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    false
}

/// How to treat fields the schema does not know (`?fieldValidation=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

impl FieldValidation {
    pub fn parse(s: &str) -> ApiResult<Self> {
        match s {
            "Ignore" | "ignore" => Ok(Self::Ignore),
            "Warn" | "warn" | "" => Ok(Self::Warn),
            "Strict" | "strict" => Ok(Self::Strict),
            other => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// Options of one write.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    /// The field manager (defaults to the user agent's product name, as Kubernetes does).
    pub field_manager: String,
    pub field_validation: FieldValidation,
    /// Server-side apply: take ownership of conflicting fields.
    pub force: bool,
}

/// The result of a write.
#[derive(Debug)]
pub struct WriteOutcome {
    pub object: Value,
    pub created: bool,
    pub warnings: Vec<String>,
}

/// How a delete propagates to dependents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

/// Options of a delete.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    pub dry_run: bool,
    pub propagation: Option<Propagation>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
}

/// What a delete did.
#[derive(Debug)]
pub enum DeleteOutcome {
    /// Removed from storage; the last state.
    Deleted(Value),
    /// Marked for deletion, waiting for finalizers.
    Pending(Value),
}

/// Patch formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    /// From a request's `Content-Type`.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let ct = ct.split(';').next().unwrap_or("").trim();
        match ct {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml"
            | "application/apply-patch+json"
            | "application/apply-patch+cbor" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Tuning of the cluster.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Watch events kept per resource before a watch from an older resourceVersion gets 410 Gone.
    pub watch_history: usize,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            watch_history: 10_000,
        }
    }
}

struct Inner {
    registry: RwLock<Registry>,
    store: Store,
    next_service_ip: AtomicU32,
    /// The CA bundle published as `kube-root-ca.crt` (PEM).
    root_ca: String,
}

/// The in-memory cluster. Cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").finish_non_exhaustive()
    }
}

/// Now, as Kubernetes prints timestamps (RFC 3339, seconds).
pub fn now() -> String {
    let ts = jiff::Timestamp::now();
    jiff::Timestamp::from_second(ts.as_second())
        .unwrap_or(ts)
        .to_string()
}

fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"].as_object_mut().expect("just ensured")
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj).and_then(|m| m.get(field)).and_then(Value::as_str)
}

/// `metadata.finalizers` as strings.
pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// Why `name` is not a valid `metadata.name` for `rt`, in kube-apiserver's words, or `None`.
///
/// As kube-apiserver: Namespaces and Services need a DNS-1123 label; RBAC objects only a valid
/// path segment (`system:discovery`); everything else, custom resources included
/// (apiextensions-apiserver validates them with `NameIsDNSSubdomain`), a DNS-1123 subdomain.
fn invalid_name_message(rt: &ResourceType, name: &str) -> Option<String> {
    const LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
    let label = rt.group.is_empty() && matches!(rt.plural.as_str(), "namespaces" | "services");
    if label {
        if is_dns1123_label(name) {
            return None;
        }
        return Some(format!(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{LABEL_FMT}')"
        ));
    }
    if rt.builtin && rt.group == crate::authz::RBAC_GROUP {
        return match name {
            "" => Some("name or generateName is required".to_owned()),
            "." | ".." => Some(format!("may not be '{name}'")),
            _ if name.contains('/') => Some("may not contain '/'".to_owned()),
            _ if name.contains('%') => Some("may not contain '%'".to_owned()),
            _ => None,
        };
    }
    if is_dns1123_subdomain(name) {
        return None;
    }
    Some(format!(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{LABEL_FMT}(\\.{LABEL_FMT})*')"
    ))
}

/// Label/annotation key syntax (`prefix/name`).
fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    name_ok && prefix.is_none_or(is_dns1123_subdomain)
}

fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric())
}

/// Puts a new object in the request's namespace (which a namespaced kind needs, and the body may
/// only repeat), or in none for a cluster-scoped kind.
fn place_in_namespace(
    rt: &ResourceType,
    namespace: Option<&str>,
    meta_map: &mut Map<String, Value>,
) -> ApiResult<()> {
    if !rt.namespaced {
        meta_map.remove("namespace");
        return Ok(());
    }
    let ns = namespace.unwrap_or("");
    if ns.is_empty() {
        return Err(ApiError::bad_request(
            "the server could not find the requested resource: a namespace is required",
        ));
    }
    if let Some(b) = meta_map.get("namespace").and_then(Value::as_str)
        && !b.is_empty()
        && b != ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    meta_map.insert("namespace".into(), Value::String(ns.to_owned()));
    Ok(())
}

/// A new object's name: its own, or one generated from `generateName` (and written back).
fn new_object_name(rt: &ResourceType, meta_map: &mut Map<String, Value>) -> ApiResult<String> {
    let name = meta_map.get("name").and_then(Value::as_str).unwrap_or("");
    if !name.is_empty() {
        return Ok(name.to_owned());
    }
    let prefix = meta_map
        .get("generateName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if prefix.is_empty() {
        return Err(ApiError::invalid(
            &rt.group,
            &rt.kind,
            "",
            vec![Cause {
                reason: "FieldValueRequired".into(),
                message: "Required value: name or generateName is required".into(),
                field: "metadata.name".into(),
            }],
        ));
    }
    let suffix: String = uuid::Uuid::new_v4()
        .simple()
        .to_string()
        .chars()
        .take(5)
        .collect();
    let name = format!("{prefix}{suffix}");
    meta_map.insert("name".into(), Value::String(name.clone()));
    Ok(name)
}

/// Checks a server-side apply request: a field manager, and a configuration object of the kind,
/// name and namespace of the URL.
fn check_apply_request(
    rt: &ResourceType,
    namespace: Option<&str>,
    name: &str,
    config: &Value,
    opts: &WriteOptions,
) -> ApiResult<()> {
    if opts.field_manager.is_empty() {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            vec![Cause {
                reason: "FieldValueRequired".into(),
                message: "Required value: is required for apply patch".into(),
                field: "fieldManager".into(),
            }],
        ));
    }
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "the apply configuration must be an object",
        ));
    }
    Cluster::check_type(rt, config)?;
    if let Some(n) = meta_str(config, "name")
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    if let Some(ns) = meta_str(config, "namespace")
        && rt.namespaced
        && !ns.is_empty()
        && Some(ns) != namespace
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

/// The configuration server-side apply merges: named as on the URL, without `managedFields` or
/// `resourceVersion`, pruned to the schema (with warnings or an error per field validation) and
/// cut to what `subresource` may write. Returns it with its warnings.
fn apply_configuration(
    rt: &ResourceType,
    namespace: Option<&str>,
    name: &str,
    subresource: Option<&str>,
    config: &Value,
    opts: &WriteOptions,
) -> ApiResult<(Value, Vec<String>)> {
    let mut config = config.clone();
    let m = meta_mut(&mut config);
    m.insert("name".into(), Value::String(name.to_owned()));
    if rt.namespaced {
        m.insert(
            "namespace".into(),
            Value::String(namespace.unwrap_or("").to_owned()),
        );
    }
    if m.get("managedFields")
        .is_some_and(|f| f.as_array().is_none_or(|a| !a.is_empty()))
    {
        return Err(ApiError::bad_request(
            "metadata.managedFields must be nil in an apply configuration",
        ));
    }
    m.remove("managedFields");
    m.remove("resourceVersion");
    let mut warnings = Vec::new();
    if let Some(schema) = &rt.schema {
        let unknown = schema.prune(&mut config);
        match opts.field_validation {
            FieldValidation::Strict if !unknown.is_empty() => {
                return Err(strict_decoding_error(rt, &unknown));
            }
            FieldValidation::Warn => {
                warnings.extend(unknown.iter().map(|u| format!("unknown field {u:?}")));
            }
            _ => {}
        }
    }
    match subresource {
        None if strategy::of(rt).status_is_subresource(rt) => {
            if let Some(o) = config.as_object_mut() {
                o.remove("status");
            }
        }
        Some("status") => {
            let status = config.get("status").cloned().unwrap_or(json!({}));
            let m = config["metadata"].clone();
            config = json!({"apiVersion": config["apiVersion"], "kind": config["kind"], "metadata": {"name": m["name"], "namespace": m.get("namespace").cloned().unwrap_or(Value::Null)}, "status": status});
            if !rt.namespaced {
                meta_mut(&mut config).remove("namespace");
            }
        }
        _ => {}
    }
    Ok((config, warnings))
}

/// Checks a delete's UID and resourceVersion preconditions against the stored object.
fn check_delete_preconditions(
    rt: &ResourceType,
    name: &str,
    old_stored: &Stored,
    opts: &DeleteOptions,
) -> ApiResult<()> {
    if let Some(uid) = &opts.precondition_uid
        && uid != old_stored.uid()
    {
        return Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                old_stored.uid()
            ),
        ));
    }
    if let Some(rv) = &opts.precondition_rv
        && *rv != old_stored.rv.to_string()
    {
        return Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                old_stored.rv
            ),
        ));
    }
    Ok(())
}

/// The finalizers an object keeps while it is deleted: its own, with the one of a foreground or
/// orphaning `propagation` (replacing the other).
fn deletion_finalizers(old: &Value, propagation: Option<Propagation>) -> Vec<String> {
    let mut fins = finalizers(old);
    match propagation {
        Some(Propagation::Foreground) if !fins.iter().any(|f| f == FOREGROUND_FINALIZER) => {
            fins.retain(|f| f != ORPHAN_FINALIZER);
            fins.push(FOREGROUND_FINALIZER.into());
        }
        Some(Propagation::Orphan) if !fins.iter().any(|f| f == ORPHAN_FINALIZER) => {
            fins.retain(|f| f != FOREGROUND_FINALIZER);
            fins.push(ORPHAN_FINALIZER.into());
        }
        _ => {}
    }
    fins
}

/// What a dry-run delete of a terminating object shows: deletion stamps (kept if present) and
/// `fins` as its finalizers.
fn mark_for_deletion_preview(preview: &mut Value, fins: &[String]) {
    let m = meta_mut(preview);
    m.entry("deletionTimestamp")
        .or_insert_with(|| Value::String(now()));
    m.entry("deletionGracePeriodSeconds")
        .or_insert_with(|| json!(0));
    if !fins.is_empty() {
        m.insert("finalizers".into(), json!(fins));
    }
}

impl Cluster {
    /// A cluster serving the built-in kinds, with the default namespaces and the default RBAC
    /// ClusterRoles and ClusterRoleBindings (`authz::bootstrap_policy`).
    pub fn new(config: &ClusterConfig) -> Self {
        let mut registry = Registry::default();
        for rt in crate::builtins::resource_types() {
            registry.insert(rt);
        }
        let cluster = Self {
            inner: Arc::new(Inner {
                registry: RwLock::new(registry),
                store: Store::new(config.watch_history),
                next_service_ip: AtomicU32::new(1),
                root_ca: crate::controllers::root_ca::self_signed_ca(),
            }),
        };
        let ns_type = cluster
            .resource("", "v1", "namespaces")
            .expect("namespaces are built in");
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            let opts = WriteOptions {
                field_manager: "capstan-apiserver".into(),
                ..WriteOptions::default()
            };
            cluster
                .create(&ns_type, None, body, &opts)
                .expect("default namespaces are valid");
        }
        for object in crate::authz::bootstrap_policy() {
            let plural = match object["kind"].as_str() {
                Some("ClusterRole") => "clusterroles",
                _ => "clusterrolebindings",
            };
            let rt = cluster
                .resource(crate::authz::RBAC_GROUP, "v1", plural)
                .expect("RBAC kinds are built in");
            let opts = WriteOptions {
                field_manager: "capstan-apiserver".into(),
                ..WriteOptions::default()
            };
            cluster
                .create(&rt, None, object, &opts)
                .expect("the default RBAC policy is valid");
        }
        cluster
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The CA bundle (PEM) published in every namespace as the `kube-root-ca.crt` ConfigMap:
    /// a self-signed CA made when the cluster starts, since the control plane serves plain HTTP.
    pub fn root_ca(&self) -> &str {
        &self.inner.root_ca
    }

    pub fn registry(&self) -> RwLockReadGuard<'_, Registry> {
        self.inner
            .registry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn registry_mut(&self) -> RwLockWriteGuard<'_, Registry> {
        self.inner
            .registry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The resource type at group/version/plural, or 404.
    pub fn resource(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> ApiResult<Arc<ResourceType>> {
        self.registry().get(group, version, plural).ok_or_else(|| {
            ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
            .with_details(group, plural, "")
        })
    }

    /// Converts a stored object to the version `rt` serves (only `apiVersion` differs: CRD conversion
    /// strategy `None`).
    pub fn present(rt: &ResourceType, stored: &Stored) -> Value {
        if crate::events::is_event(rt) {
            return crate::events::present(rt, &stored.value);
        }
        let mut v = stored.value.clone();
        if !Self::served_as_stored(rt, stored) {
            v["apiVersion"] = Value::String(rt.api_version());
        }
        v
    }

    /// Whether the stored form is already in the version `rt` serves (objects keep the version
    /// they were written in, which may predate a change of the CRD's storage version).
    pub fn served_as_stored(rt: &ResourceType, stored: &Stored) -> bool {
        let api_version = stored
            .value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        match api_version.split_once('/') {
            Some((g, v)) => g == rt.group && v == rt.version,
            None => rt.group.is_empty() && api_version == rt.version,
        }
    }

    fn object_key(rt: &ResourceType, namespace: Option<&str>, name: &str) -> ObjectKey {
        (
            if rt.namespaced {
                namespace.unwrap_or("").to_owned()
            } else {
                String::new()
            },
            name.to_owned(),
        )
    }

    /// Gets one object.
    pub fn get(&self, rt: &ResourceType, namespace: Option<&str>, name: &str) -> ApiResult<Value> {
        self.get_stored(rt, namespace, name)
            .map(|s| Self::present(rt, &s))
    }

    pub fn get_stored(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> ApiResult<Arc<Stored>> {
        self.inner
            .store
            .get(&rt.storage_key(), &Self::object_key(rt, namespace, name))
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))
    }

    /// Lists objects (all namespaces when `namespace` is `None`) with the list's resourceVersion.
    pub fn list(&self, rt: &ResourceType, namespace: Option<&str>) -> (Vec<Arc<Stored>>, u64) {
        self.inner.store.list(
            &rt.storage_key(),
            if rt.namespaced { namespace } else { None },
        )
    }

    fn namespace_state(&self, namespace: &str) -> ApiResult<()> {
        let key = StorageKey {
            group: String::new(),
            resource: "namespaces".into(),
        };
        match self.inner.store.get(&key, &(String::new(), namespace.to_owned())) {
            None => Err(ApiError::not_found("", "namespaces", namespace)),
            Some(ns) if meta(&ns.value).is_some_and(|m| m.contains_key("deletionTimestamp")) => {
                Err(ApiError::forbidden(format!(
                    "unable to create new content in namespace {namespace} because it is being terminated"
                ))
                .with_details("", "namespaces", namespace))
            }
            Some(_) => Ok(()),
        }
    }

    fn check_type(rt: &ResourceType, body: &Value) -> ApiResult<()> {
        let api_version = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind.is_empty() {
            return Err(ApiError::bad_request(
                "Object 'Kind' is missing in the request body",
            ));
        }
        if api_version.is_empty() {
            return Err(ApiError::bad_request(
                "Object 'apiVersion' is missing in the request body",
            ));
        }
        if kind != rt.kind {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                rt.kind
            )));
        }
        if api_version != rt.api_version() {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                rt.api_version()
            )));
        }
        if !body.get("metadata").is_none_or(Value::is_object) {
            return Err(ApiError::bad_request("metadata: must be an object"));
        }
        Ok(())
    }

    /// Validates metadata and schema, prunes unknown fields and applies schema defaults.
    /// Returns warnings (unknown fields under `Warn`).
    fn admit(
        rt: &ResourceType,
        obj: &mut Value,
        validation: FieldValidation,
    ) -> ApiResult<Vec<String>> {
        if exceeds_depth(obj, MAX_OBJECT_DEPTH) {
            return Err(ApiError::new(
                422,
                "Invalid",
                format!(
                    "{} is nested deeper than {MAX_OBJECT_DEPTH} levels",
                    rt.kind
                ),
            ));
        }
        let name = meta_str(obj, "name").unwrap_or("").to_owned();
        let mut causes = Vec::new();
        if let Some(message) = invalid_name_message(rt, &name) {
            causes.push(Cause {
                reason: "FieldValueInvalid".into(),
                message: format!("Invalid value: {name:?}: {message}"),
                field: "metadata.name".into(),
            });
        }
        for (field, check_values) in [("labels", true), ("annotations", false)] {
            if let Some(map) = meta(obj).and_then(|m| m.get(field)) {
                let Some(map) = map.as_object() else {
                    causes.push(Cause {
                        reason: "FieldValueInvalid".into(),
                        message: "Invalid value: must be a map of strings".into(),
                        field: format!("metadata.{field}"),
                    });
                    continue;
                };
                for (k, v) in map {
                    if !is_qualified_name(k) {
                        causes.push(Cause {
                            reason: "FieldValueInvalid".into(),
                            message: format!("Invalid value: {k:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                            field: format!("metadata.{field}"),
                        });
                    }
                    match v.as_str() {
                        Some(s) if !check_values || is_label_value(s) => {}
                        _ => causes.push(Cause {
                            reason: "FieldValueInvalid".into(),
                            message: format!("Invalid value: {v}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                            field: format!("metadata.{field}"),
                        }),
                    }
                }
            }
        }
        let mut warnings = Vec::new();
        if let Some(schema) = &rt.schema {
            let unknown = schema.prune(obj);
            if !unknown.is_empty() {
                match validation {
                    FieldValidation::Strict => {
                        return Err(strict_decoding_error(rt, &unknown));
                    }
                    FieldValidation::Warn => {
                        warnings.extend(unknown.iter().map(|u| format!("unknown field {u:?}")));
                    }
                    FieldValidation::Ignore => {}
                }
            }
            if !rt.builtin {
                schema.apply_defaults(obj);
            }
            for e in schema.validate(obj) {
                causes.push(Cause {
                    reason: match e.kind {
                        capstan_schema::FieldErrorKind::Required => "FieldValueRequired",
                        capstan_schema::FieldErrorKind::NotSupported => "FieldValueNotSupported",
                        capstan_schema::FieldErrorKind::TooLong => "FieldValueTooLong",
                        capstan_schema::FieldErrorKind::TooMany => "FieldValueTooMany",
                        capstan_schema::FieldErrorKind::Forbidden => "FieldValueForbidden",
                        capstan_schema::FieldErrorKind::Invalid => "FieldValueInvalid",
                    }
                    .into(),
                    message: e.message,
                    field: e.field,
                });
            }
        }
        if rt.builtin {
            causes.extend(defaults::validate_builtin(rt, obj));
        }
        if !causes.is_empty() {
            secrets::redact_causes(rt, &mut causes);
            return Err(ApiError::invalid(&rt.group, &rt.kind, &name, causes));
        }
        Ok(warnings)
    }

    fn allocate_service_ip(&self) -> String {
        let n = self.inner.next_service_ip.fetch_add(1, Ordering::Relaxed);
        format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff)
    }

    fn has_generation(rt: &ResourceType) -> bool {
        strategy::of(rt).has_generation(rt)
    }

    /// Whether anything but metadata (and status, with a status subresource) changed.
    fn spec_changed(rt: &ResourceType, old: &Value, new: &Value) -> bool {
        let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
            return old != new;
        };
        let skip = |k: &str| {
            k == "metadata" || k == "apiVersion" || k == "kind" || (rt.status && k == "status")
        };
        let count = |m: &Map<String, Value>| m.keys().filter(|k| !skip(k)).count();
        count(o) != count(n)
            || o.iter()
                .filter(|(k, _)| !skip(k))
                .any(|(k, v)| n.get(k) != Some(v))
    }

    /// Sets the metadata the server owns on a new object: a fresh UID, the creation timestamp and
    /// the first generation; drops `managedFields` unless server-side apply computed them.
    fn stamp_new_metadata(rt: &ResourceType, meta_map: &mut Map<String, Value>, applied: bool) {
        for f in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta_map.remove(f);
        }
        meta_map.insert(
            "uid".into(),
            Value::String(uuid::Uuid::new_v4().to_string()),
        );
        meta_map.insert("creationTimestamp".into(), Value::String(now()));
        if Self::has_generation(rt) {
            meta_map.insert("generation".into(), json!(1));
        } else {
            meta_map.remove("generation");
        }
        if !applied {
            meta_map.remove("managedFields");
        }
    }

    /// Creates an object.
    pub fn create(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        mut body: Value,
        opts: &WriteOptions,
    ) -> ApiResult<WriteOutcome> {
        secrets::decode_data(rt, &mut body).map_err(|at| secrets::create_error(rt, at))?;
        self.create_inner(rt, namespace, body, opts, None)
    }

    fn create_inner(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        mut obj: Value,
        opts: &WriteOptions,
        applied: Option<Value>,
    ) -> ApiResult<WriteOutcome> {
        Self::check_type(rt, &obj)?;
        let meta_map = meta_mut(&mut obj);
        place_in_namespace(rt, namespace, meta_map)?;
        let name = new_object_name(rt, meta_map)?;
        if rt.namespaced {
            self.namespace_state(namespace.unwrap_or(""))?;
        }
        Self::stamp_new_metadata(rt, meta_map, applied.is_some());
        if strategy::of(rt).status_is_subresource(rt)
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        let mut warnings = Self::admit(rt, &mut obj, opts.field_validation)?;
        let ip = || self.allocate_service_ip();
        defaults::apply_builtin(rt, &mut obj, None, &ip);
        let mut obj = with_managed_fields(rt, None, obj, applied, opts, None);
        crate::controllers::crd::on_write(self, rt, &mut obj, opts.dry_run)?;
        if opts.dry_run {
            return Ok(WriteOutcome {
                object: obj,
                created: true,
                warnings,
            });
        }
        let stored_obj = to_storage(rt, obj);
        match self.inner.store.write(
            &rt.storage_key(),
            Self::object_key(rt, namespace, &name),
            Some(stored_obj),
            None,
            true,
        ) {
            Ok(stored) => {
                crate::controllers::crd::after_write(self, rt, &stored.value);
                if rt.group.is_empty() && rt.plural == "namespaces" {
                    // Published with the namespace, so whoever sees one sees the other.
                    crate::controllers::root_ca::publish(self, &name);
                }
                warnings.shrink_to_fit();
                Ok(WriteOutcome {
                    object: Self::present(rt, &stored),
                    created: true,
                    warnings,
                })
            }
            Err(WriteError::Exists) => Err(ApiError::already_exists(&rt.group, &rt.plural, &name)),
            Err(e) => Err(ApiError::internal(format!("storage: {e:?}"))),
        }
    }

    /// Commits `new` as the next state of `old`, applying update rules. `applied_managed` carries the
    /// managedFields computed by server-side apply; otherwise an `Update` operation is recorded.
    fn commit_update(
        &self,
        rt: &ResourceType,
        old_stored: &Arc<Stored>,
        mut new: Value,
        subresource: Option<&str>,
        opts: &WriteOptions,
        applied_managed: Option<Value>,
    ) -> Result<WriteOutcome, CommitError> {
        let old = Self::present(rt, old_stored);
        if !new.is_object() {
            return Err(ApiError::bad_request("the request body must be an object").into());
        }
        new["apiVersion"] = Value::String(rt.api_version());
        new["kind"] = Value::String(rt.kind.clone());
        let old_meta = meta(&old).cloned().unwrap_or_default();
        keep_system_metadata(&mut new, &old_meta);
        let mut new = prepare_for_update(rt, &old, new, subresource)?;
        check_finalizers_of_terminating(rt, &old, &new)?;
        let warnings = Self::admit(rt, &mut new, opts.field_validation)?;
        let strategy = strategy::of(rt);
        let ip = || self.allocate_service_ip();
        strategy.default(&mut new, Some(&old), &ip);
        let mut immutable = Vec::new();
        strategy.validate_update(&old, &new, &mut immutable);
        if !immutable.is_empty() {
            secrets::redact_causes(rt, &mut immutable);
            let name = meta_str(&old, "name").unwrap_or("").to_owned();
            return Err(ApiError::invalid(&rt.group, &rt.kind, &name, immutable).into());
        }
        if Self::has_generation(rt) && Self::spec_changed(rt, &old, &new) {
            let g = old_meta
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            new["metadata"]["generation"] = json!(g + 1);
        }
        let mut new = with_managed_fields(rt, Some(&old), new, applied_managed, opts, subresource);
        crate::controllers::crd::on_write(self, rt, &mut new, opts.dry_run)?;
        // A no-op: nothing changes, the resourceVersion stays.
        let mut old_cmp = old.clone();
        meta_mut(&mut old_cmp).remove("resourceVersion");
        if old_cmp == new {
            return Ok(WriteOutcome {
                object: old,
                created: false,
                warnings,
            });
        }
        if opts.dry_run {
            let mut shown = new;
            shown["metadata"]["resourceVersion"] = Value::String(old_stored.rv.to_string());
            return Ok(WriteOutcome {
                object: shown,
                created: false,
                warnings,
            });
        }
        self.store_update(rt, old_stored, &old, new, warnings)
    }

    /// Writes the next state of an object (or deletes it, when it was terminating and nothing
    /// holds it any more), guarded by the old resourceVersion.
    fn store_update(
        &self,
        rt: &ResourceType,
        old_stored: &Arc<Stored>,
        old: &Value,
        new: Value,
        warnings: Vec<String>,
    ) -> Result<WriteOutcome, CommitError> {
        let name = meta_str(old, "name").unwrap_or("").to_owned();
        let namespace = meta_str(old, "namespace").map(str::to_owned);
        let finished = meta(&new).is_some_and(|m| m.contains_key("deletionTimestamp"))
            && finalizers(&new).is_empty()
            && !strategy::of(rt).deletion_held(&new);
        let key = Self::object_key(rt, namespace.as_deref(), &name);
        let store = &self.inner.store;
        let written = if finished {
            store.delete_as(
                &rt.storage_key(),
                key,
                to_storage(rt, new),
                Some(old_stored.rv),
            )
        } else {
            store.write(
                &rt.storage_key(),
                key,
                Some(to_storage(rt, new)),
                Some(old_stored.rv),
                false,
            )
        };
        match written {
            Ok(stored) => {
                if finished {
                    crate::controllers::crd::after_delete(self, rt, &stored.value);
                } else {
                    crate::controllers::crd::after_write(self, rt, &stored.value);
                }
                Ok(WriteOutcome {
                    object: Self::present(rt, &stored),
                    created: false,
                    warnings,
                })
            }
            Err(WriteError::Stale) => Err(CommitError::Stale),
            Err(WriteError::Missing) => {
                Err(ApiError::not_found(&rt.group, &rt.plural, &name).into())
            }
            Err(WriteError::Exists) => Err(ApiError::internal("storage: unexpected exists").into()),
        }
    }

    /// Replaces an object (`PUT`). `metadata.resourceVersion` in the body, if set, must match.
    pub fn update(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        body: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<WriteOutcome> {
        let decoded;
        let body = if secrets::is_secret(rt) {
            let mut copy = body.clone();
            secrets::decode_data(rt, &mut copy).map_err(|at| secrets::create_error(rt, at))?;
            decoded = copy;
            &decoded
        } else {
            body
        };
        Self::check_type(rt, body)?;
        if let Some(n) = meta_str(body, "name")
            && n != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        let expected = meta_str(body, "resourceVersion")
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let modified = || {
            ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        };
        // An update without a resourceVersion is unconditional: a lost race is retried.
        for _ in 0..16 {
            let old = self.get_stored(rt, namespace, name)?;
            if let Some(rv) = &expected
                && *rv != old.rv.to_string()
            {
                return Err(modified());
            }
            match self.commit_update(rt, &old, body.clone(), subresource, opts, None) {
                Ok(o) => return Ok(o),
                Err(CommitError::Api(e)) => return Err(e),
                Err(CommitError::Stale) if expected.is_none() => {}
                Err(CommitError::Stale) => return Err(modified()),
            }
        }
        Err(modified())
    }

    /// Patches an object (`PATCH`), including server-side apply.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        patch_type: PatchType,
        patch: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<WriteOutcome> {
        if patch_type == PatchType::Strategic && !rt.builtin {
            return Err(ApiError::unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        if opts.force && patch_type != PatchType::Apply {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                vec![Cause {
                    reason: "FieldValueInvalid".into(),
                    message: "Invalid value: true: may not be specified for non-apply patch".into(),
                    field: "force".into(),
                }],
            ));
        }
        if patch_type == PatchType::Apply {
            return self.apply(rt, namespace, name, subresource, patch, opts);
        }
        for _ in 0..16 {
            let old_stored = self.get_stored(rt, namespace, name)?;
            let old = Self::present(rt, &old_stored);
            let mut new = old.clone();
            match patch_type {
                PatchType::Json => capstan_patch::json_patch(&mut new, patch).map_err(|e| {
                    ApiError::new(
                        422,
                        "Invalid",
                        format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                    )
                })?,
                PatchType::Merge => {
                    if !patch.is_object() {
                        return Err(ApiError::bad_request(
                            "the merge patch must be a JSON object",
                        ));
                    }
                    capstan_patch::merge_patch(&mut new, patch);
                }
                PatchType::Strategic => {
                    if !patch.is_object() {
                        return Err(ApiError::bad_request(
                            "the strategic merge patch must be a JSON object",
                        ));
                    }
                    new = capstan_patch::strategic_merge(&old, patch, rt.schema.as_ref())
                        .map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?;
                }
                PatchType::Apply => unreachable!("handled above"),
            }
            secrets::decode_data(rt, &mut new).map_err(secrets::patch_error)?;
            if let Some(rv) = meta_str(&new, "resourceVersion")
                && *rv != old_stored.rv.to_string()
            {
                return Err(ApiError::conflict(
                    &rt.group,
                    &rt.plural,
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            if meta_str(&new, "name").is_some_and(|n| n != name) {
                return Err(ApiError::bad_request(
                    "metadata.name: the name cannot be changed by a patch",
                ));
            }
            match self.commit_update(rt, &old_stored, new, subresource, opts, None) {
                Ok(o) => return Ok(o),
                Err(CommitError::Api(e)) => return Err(e),
                Err(CommitError::Stale) => {}
            }
        }
        Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            "too many concurrent writes; try again",
        ))
    }

    fn apply(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        config: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<WriteOutcome> {
        check_apply_request(rt, namespace, name, config, opts)?;
        let (config, warnings) =
            apply_configuration(rt, namespace, name, subresource, config, opts)?;
        let api_version = rt.api_version();
        for _ in 0..16 {
            let timestamp = now();
            let ctx = WriteContext {
                manager: &opts.field_manager,
                api_version: &api_version,
                subresource,
                now: &timestamp,
            };
            let old_stored = match self.get_stored(rt, namespace, name) {
                Ok(s) => Some(s),
                Err(e) if e.code == 404 && subresource.is_none() => None,
                Err(e) => return Err(e),
            };
            let live = old_stored.as_ref().map(|s| Self::present(rt, s));
            let mut merged =
                managed::apply(live.as_ref(), &config, &ctx, opts.force, rt.schema.as_ref())
                    .map_err(|e| apply_error(rt, e))?;
            secrets::decode_data(rt, &mut merged)
                .map_err(|at| secrets::apply_error(rt, namespace, name, at))?;
            let managed_fields = merged
                .pointer("/metadata/managedFields")
                .cloned()
                .unwrap_or(json!([]));
            let result = match &old_stored {
                None => {
                    match self.create_inner(rt, namespace, merged, opts, Some(managed_fields)) {
                        Err(e) if e.reason == "AlreadyExists" => continue,
                        other => other,
                    }
                }
                Some(old) => match self.commit_update(
                    rt,
                    old,
                    merged,
                    subresource,
                    opts,
                    Some(managed_fields),
                ) {
                    Ok(o) => Ok(o),
                    Err(CommitError::Api(e)) => Err(e),
                    Err(CommitError::Stale) => continue,
                },
            };
            return result.map(|mut o| {
                o.warnings.extend(warnings);
                o
            });
        }
        Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            "too many concurrent writes; try again",
        ))
    }

    /// Marks an object terminating with `fins` as its finalizers; `first`: the first delete, which
    /// stamps the deletion timestamp and bumps the generation.
    fn mark_terminating(rt: &ResourceType, obj: &mut Value, first: bool, fins: &[String]) {
        let m = meta_mut(obj);
        if first {
            m.insert("deletionTimestamp".into(), Value::String(now()));
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
            if Self::has_generation(rt) {
                let g = m.get("generation").and_then(Value::as_i64).unwrap_or(0);
                m.insert("generation".into(), json!(g + 1));
            }
        }
        m.insert("finalizers".into(), json!(fins));
        if fins.is_empty() {
            m.remove("finalizers");
        }
    }

    /// Deletes an object, honouring finalizers and the propagation policy.
    pub fn delete(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> ApiResult<DeleteOutcome> {
        for _ in 0..16 {
            let old_stored = self.get_stored(rt, namespace, name)?;
            let old = Self::present(rt, &old_stored);
            check_delete_preconditions(rt, name, &old_stored, opts)?;
            let fins = deletion_finalizers(&old, opts.propagation);
            let pending = !fins.is_empty() || strategy::of(rt).terminates_gracefully();
            if opts.dry_run {
                if !pending {
                    return Ok(DeleteOutcome::Deleted(old));
                }
                // Show what the delete would do, without writing it.
                let mut preview = old;
                mark_for_deletion_preview(&mut preview, &fins);
                return Ok(DeleteOutcome::Pending(preview));
            }
            let key = Self::object_key(rt, namespace, name);
            if pending {
                let already = meta(&old).is_some_and(|m| m.contains_key("deletionTimestamp"));
                if already && fins == finalizers(&old) {
                    return Ok(DeleteOutcome::Pending(old));
                }
                let mut new = old.clone();
                Self::mark_terminating(rt, &mut new, !already, &fins);
                strategy::of(rt).prepare_for_termination(&mut new);
                match self.inner.store.write(
                    &rt.storage_key(),
                    key,
                    Some(to_storage(rt, new)),
                    Some(old_stored.rv),
                    false,
                ) {
                    Ok(stored) => return Ok(DeleteOutcome::Pending(Self::present(rt, &stored))),
                    Err(WriteError::Stale) => {}
                    Err(WriteError::Missing) => {
                        return Err(ApiError::not_found(&rt.group, &rt.plural, name));
                    }
                    Err(e) => return Err(ApiError::internal(format!("storage: {e:?}"))),
                }
            } else {
                match self.inner.store.write(
                    &rt.storage_key(),
                    key,
                    None,
                    Some(old_stored.rv),
                    false,
                ) {
                    Ok(stored) => {
                        crate::controllers::crd::after_delete(self, rt, &stored.value);
                        return Ok(DeleteOutcome::Deleted(Self::present(rt, &stored)));
                    }
                    Err(WriteError::Stale) => {}
                    Err(WriteError::Missing) => {
                        return Err(ApiError::not_found(&rt.group, &rt.plural, name));
                    }
                    Err(e) => return Err(ApiError::internal(format!("storage: {e:?}"))),
                }
            }
        }
        Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            "too many concurrent writes; try again",
        ))
    }

    /// For the control plane's own controllers: read-modify-write with retries. `f` returns `false`
    /// to skip the write. Writes `status` through the status subresource when `subresource` is set.
    pub fn mutate(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        manager: &str,
        mut f: impl FnMut(&mut Value) -> bool,
    ) -> ApiResult<Option<Value>> {
        let opts = WriteOptions {
            field_manager: manager.to_owned(),
            field_validation: FieldValidation::Ignore,
            ..WriteOptions::default()
        };
        for _ in 0..16 {
            let old_stored = self.get_stored(rt, namespace, name)?;
            let mut new = Self::present(rt, &old_stored);
            if !f(&mut new) {
                return Ok(None);
            }
            match self.commit_update(rt, &old_stored, new, subresource, &opts, None) {
                Ok(o) => return Ok(Some(o.object)),
                Err(CommitError::Api(e)) => return Err(e),
                Err(CommitError::Stale) => {}
            }
        }
        Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            "too many concurrent writes",
        ))
    }
}

/// Keeps what clients cannot change through an update: identity, timestamps, generation and
/// managedFields come from the stored object; resourceVersion and selfLink are dropped.
fn keep_system_metadata(new: &mut Value, old_meta: &Map<String, Value>) {
    let m = meta_mut(new);
    for f in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "managedFields",
    ] {
        match old_meta.get(f) {
            Some(v) => {
                m.insert(f.into(), v.clone());
            }
            None => {
                m.remove(f);
            }
        }
    }
    m.remove("resourceVersion");
    m.remove("selfLink");
}

/// What an update may change: through the status subresource only `status`; through the main
/// resource everything but a status the kind keeps in its subresource.
fn prepare_for_update(
    rt: &ResourceType,
    old: &Value,
    mut new: Value,
    subresource: Option<&str>,
) -> Result<Value, CommitError> {
    match subresource {
        Some("status") => {
            // Only status changes through the status subresource.
            let status = new.get("status").cloned();
            let mut merged = old.clone();
            match status {
                Some(s) => merged["status"] = s,
                None => {
                    if let Some(o) = merged.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
            merged["metadata"]["managedFields"] = meta(old)
                .and_then(|m| m.get("managedFields"))
                .cloned()
                .unwrap_or(Value::Null);
            if merged["metadata"]["managedFields"].is_null() {
                meta_mut(&mut merged).remove("managedFields");
            }
            Ok(merged)
        }
        Some(other) => {
            Err(ApiError::not_found(&rt.group, &format!("{}/{other}", rt.plural), "").into())
        }
        None => {
            if strategy::of(rt).status_is_subresource(rt) {
                match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Some(o) = new.as_object_mut() {
                            o.remove("status");
                        }
                    }
                }
            }
            Ok(new)
        }
    }
}

/// A terminating object takes no new finalizers.
fn check_finalizers_of_terminating(
    rt: &ResourceType,
    old: &Value,
    new: &Value,
) -> Result<(), CommitError> {
    if !meta(old).is_some_and(|m| m.contains_key("deletionTimestamp")) {
        return Ok(());
    }
    let old_f = finalizers(old);
    if let Some(added) = finalizers(new).into_iter().find(|f| !old_f.contains(f)) {
        return Err(ApiError::invalid(
            &rt.group,
            &rt.kind,
            meta_str(old, "name").unwrap_or(""),
            vec![Cause {
                reason: "FieldValueForbidden".into(),
                message: format!("Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [{added}]"),
                field: "metadata.finalizers".into(),
            }],
        )
        .into());
    }
    Ok(())
}

/// Sets `metadata.managedFields` of the next state: those server-side apply computed (`applied`), or
/// an `Update` operation recorded for this write. An empty list is left out, as Kubernetes does.
fn with_managed_fields(
    rt: &ResourceType,
    old: Option<&Value>,
    mut new: Value,
    applied: Option<Value>,
    opts: &WriteOptions,
    subresource: Option<&str>,
) -> Value {
    let mut new = if let Some(managed) = applied {
        new["metadata"]["managedFields"] = managed;
        new
    } else {
        let timestamp = now();
        let api_version = rt.api_version();
        let ctx = WriteContext {
            manager: &opts.field_manager,
            api_version: &api_version,
            subresource,
            now: &timestamp,
        };
        managed::record_update(old, &new, &ctx, rt.schema.as_ref())
    };
    if new["metadata"]
        .get("managedFields")
        .is_some_and(|m| m.as_array().is_some_and(Vec::is_empty))
    {
        meta_mut(&mut new).remove("managedFields");
    }
    new
}

fn to_storage(rt: &ResourceType, mut obj: Value) -> Value {
    if crate::events::is_events_group(rt) {
        return crate::events::to_core(obj);
    }
    if rt.version != rt.storage_version {
        obj["apiVersion"] = Value::String(if rt.group.is_empty() {
            rt.storage_version.clone()
        } else {
            format!("{}/{}", rt.group, rt.storage_version)
        });
    }
    obj
}

/// The `400 Bad Request` of `fieldValidation=Strict`, worded as Kubernetes words it.
fn strict_decoding_error(rt: &ResourceType, unknown: &[String]) -> ApiError {
    let list = unknown
        .iter()
        .map(|u| format!("unknown field {u:?}"))
        .collect::<Vec<_>>();
    ApiError::bad_request(format!(
        "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
        list.join(", "),
        kind = rt.kind,
        version = rt.version,
    ))
}

fn apply_error(rt: &ResourceType, e: ApplyError) -> ApiError {
    match e {
        ApplyError::Conflicts(conflicts) => {
            let api_version = rt.api_version();
            let mut lines = Vec::new();
            let mut causes = Vec::new();
            for c in &conflicts {
                lines.push(format!(
                    "conflict with {:?} using {api_version}: {}",
                    c.manager, c.field
                ));
                causes.push(Cause {
                    reason: "FieldManagerConflict".into(),
                    message: format!("conflict with {:?} using {api_version}", c.manager),
                    field: c.field.clone(),
                });
            }
            let message = if lines.len() == 1 {
                format!("Apply failed with 1 conflict: {}", lines[0])
            } else {
                format!(
                    "Apply failed with {} conflicts: {}",
                    lines.len(),
                    lines.join("\n")
                )
            };
            let mut err = ApiError::new(409, "Conflict", message);
            err.causes = causes;
            err
        }
        ApplyError::Invalid(m) => ApiError::new(422, "Invalid", m),
    }
}

/// Errors of one commit attempt.
enum CommitError {
    Api(ApiError),
    /// Another write won the race; retry from a fresh read.
    Stale,
}

impl From<ApiError> for CommitError {
    fn from(e: ApiError) -> Self {
        Self::Api(e)
    }
}

#[cfg(test)]
mod depth_tests {
    use super::*;

    #[test]
    fn depth_limit() {
        let mut v = json!(1);
        for _ in 0..10 {
            v = json!({"a": [v]});
        }
        // Twenty nested containers.
        assert!(!exceeds_depth(&v, 20));
        assert!(exceeds_depth(&v, 19));
        assert!(!exceeds_depth(&json!("scalar"), 1));
    }
}
