//! Objects being built, with the bookkeeping kustomize keeps in build annotations.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

/// Group, version, kind and name (and namespace) of an object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct ResId {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

impl ResId {
    pub fn effective_namespace(&self) -> &str {
        if self.namespace.is_empty() {
            "default"
        } else {
            &self.namespace
        }
    }

    /// Same kind, name and (effective) namespace.
    pub fn equals(&self, other: &ResId) -> bool {
        self.group == other.group
            && self.version == other.version
            && self.kind == other.kind
            && self.name == other.name
            && (self.effective_namespace() == other.effective_namespace()
                || is_cluster_scoped(&self.kind))
    }

    /// A key equal for two ids exactly when [`ResId::equals`] holds: the namespace is made
    /// effective, and dropped for cluster-scoped kinds.
    pub fn key(&self) -> ResId {
        let namespace = if is_cluster_scoped(&self.kind) {
            String::new()
        } else {
            self.effective_namespace().to_owned()
        };
        ResId {
            namespace,
            ..self.clone()
        }
    }

    /// Whether this id's group/version/kind is selected by a (possibly partial) gvk.
    pub fn gvk_selected_by(&self, group: &str, version: &str, kind: &str) -> bool {
        (group.is_empty() || group == self.group)
            && (version.is_empty() || version == self.version)
            && (kind.is_empty() || kind == self.kind)
    }
}

impl std::fmt::Display for ResId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "[noGrp]"
        } else {
            &self.group
        };
        let namespace = if self.namespace.is_empty() {
            "[noNs]"
        } else {
            &self.namespace
        };
        write!(
            f,
            "{}.{}.{}/{}.{}",
            self.kind, self.version, group, self.name, namespace
        )
    }
}

/// Splits `group/version` (or just `version`).
pub(crate) fn split_api_version(api_version: &str) -> (String, String) {
    match api_version.split_once('/') {
        Some((group, version)) => (group.to_owned(), version.to_owned()),
        None => (String::new(), api_version.to_owned()),
    }
}

/// Built-in kinds served by the control plane that kustomize's schema (Kubernetes 1.21.2) lacks.
const NEWER_THAN_KUSTOMIZE_SCHEMA: &[&str] = &[
    "IPAddress",
    "ServiceCIDR",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "DeviceClass",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
    "VolumeAttributesClass",
];

/// Whether objects of this kind live outside namespaces (built-in kinds only; everything
/// else counts as namespaced, as in kustomize). A kind is cluster-scoped when some built-in
/// version of it is and none is namespaced.
pub(crate) fn is_cluster_scoped(kind: &str) -> bool {
    static SCOPES: OnceLock<HashMap<&'static str, bool>> = OnceLock::new();
    let scopes = SCOPES.get_or_init(|| {
        let mut scopes: HashMap<&'static str, bool> = HashMap::new();
        for builtin in capstan_schema::builtin::kinds() {
            let cluster = scopes.entry(builtin.kind).or_insert(true);
            *cluster &= !builtin.namespaced;
        }
        scopes.insert("PodSecurityPolicy", true);
        scopes.insert("ComponentStatus", true);
        // Kinds newer than kustomize's built-in schema (Kubernetes 1.21.2): kustomize does not
        // know them, so it treats them as namespaced (`kubectl kustomize` sets a namespace on a
        // ValidatingAdmissionPolicy); the API server ignores it for cluster-scoped kinds.
        for newer in NEWER_THAN_KUSTOMIZE_SCHEMA {
            scopes.remove(newer);
        }
        scopes
    });
    scopes.get(kind).copied().unwrap_or(false)
}

/// How a generated object combines with an existing one of the same id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Behavior {
    #[default]
    Create,
    Merge,
    Replace,
}

/// An object and its build history.
#[derive(Clone, Debug)]
pub(crate) struct Resource {
    pub object: Value,
    /// Ids this object had before, oldest first (namespace stored effective).
    pub previous: Vec<ResId>,
    pub prefixes: Vec<String>,
    pub suffixes: Vec<String>,
    pub needs_hash: bool,
    pub behavior: Behavior,
    /// Where it came from (`config.kubernetes.io/origin` content), when tracked.
    pub origin: Option<Value>,
    /// Which transformers touched it, when tracked.
    pub transformations: Vec<Value>,
}

impl Resource {
    pub fn new(object: Value) -> Self {
        Resource {
            object,
            previous: Vec::new(),
            prefixes: Vec::new(),
            suffixes: Vec::new(),
            needs_hash: false,
            behavior: Behavior::Create,
            origin: None,
            transformations: Vec::new(),
        }
    }

    pub fn str_field(&self, path: &[&str]) -> &str {
        let mut current = &self.object;
        for key in path {
            match current.get(key) {
                Some(next) => current = next,
                None => return "",
            }
        }
        current.as_str().unwrap_or("")
    }

    pub fn kind(&self) -> &str {
        self.str_field(&["kind"])
    }
    pub fn name(&self) -> &str {
        self.str_field(&["metadata", "name"])
    }
    pub fn namespace(&self) -> &str {
        self.str_field(&["metadata", "namespace"])
    }
    pub fn api_version(&self) -> &str {
        self.str_field(&["apiVersion"])
    }

    pub fn current_id(&self) -> ResId {
        let (group, version) = split_api_version(self.api_version());
        ResId {
            group,
            version,
            kind: self.kind().to_owned(),
            name: self.name().to_owned(),
            namespace: self.namespace().to_owned(),
        }
    }

    /// The first id this object had.
    pub fn original_id(&self) -> ResId {
        self.previous
            .first()
            .cloned()
            .unwrap_or_else(|| self.current_id())
    }

    /// Records the current id as a previous one.
    pub fn store_previous_id(&mut self) {
        let mut id = self.current_id();
        if id.namespace.is_empty() {
            id.namespace.push_str("default");
        }
        self.previous.push(id);
    }

    /// Current and previous ids.
    pub fn any_id_matches(&self, id: &ResId) -> bool {
        self.current_id().equals(id) || self.previous.iter().any(|p| p.equals(id))
    }

    pub fn metadata_mut(&mut self) -> &mut Map<String, Value> {
        let object = ensure_object(&mut self.object);
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        ensure_object(metadata)
    }

    pub fn set_name(&mut self, name: &str) {
        self.metadata_mut()
            .insert("name".into(), Value::String(name.to_owned()));
    }

    pub fn set_namespace(&mut self, namespace: &str) {
        if namespace.is_empty() {
            self.metadata_mut().remove("namespace");
        } else {
            self.metadata_mut()
                .insert("namespace".into(), Value::String(namespace.to_owned()));
        }
    }

    pub fn string_map(&self, field: &str) -> Map<String, Value> {
        self.object
            .get("metadata")
            .and_then(|m| m.get(field))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    }

    pub fn labels(&self) -> Map<String, Value> {
        self.string_map("labels")
    }
    pub fn annotations(&self) -> Map<String, Value> {
        self.string_map("annotations")
    }

    /// Removes a top-level `metadata.annotations` that is null or empty.
    ///
    /// kustomize stores its bookkeeping in annotations and clears them
    /// before output; clearing leaves no annotations field behind when
    /// nothing else is in it, so `annotations: null` and `annotations: {}`
    /// never reach `kubectl kustomize` output. Labels and nested template
    /// metadata are not touched by that step and are kept as written.
    pub fn drop_empty_annotations(&mut self) {
        if let Some(metadata) = self
            .object
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            && metadata
                .get("annotations")
                .is_some_and(|a| a.is_null() || a.as_object().is_some_and(Map::is_empty))
        {
            metadata.shift_remove("annotations");
        }
    }

    pub fn set_string_map(&mut self, field: &str, map: Map<String, Value>) {
        if map.is_empty() {
            self.metadata_mut().remove(field);
        } else {
            self.metadata_mut()
                .insert(field.to_owned(), Value::Object(map));
        }
    }
}

/// Turns a non-object into an empty object and returns its map.
pub(crate) fn ensure_object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("just made an object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_compare_effective_namespace() {
        let a = Resource::new(
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}),
        );
        let mut b = a.clone();
        b.set_namespace("default");
        assert!(a.current_id().equals(&b.current_id()));
        b.set_namespace("other");
        assert!(!a.current_id().equals(&b.current_id()));
        assert_eq!(a.current_id().to_string(), "Deployment.v1.apps/x.[noNs]");
    }

    #[test]
    fn cluster_scope_comes_from_builtin_kinds() {
        assert!(is_cluster_scoped("ClusterRole"));
        assert!(is_cluster_scoped("Namespace"));
        assert!(!is_cluster_scoped("Deployment"));
        assert!(!is_cluster_scoped("MyCustomThing"));
        // As `kubectl kustomize`: RuntimeClass is in kustomize's schema, the newer kinds are not.
        assert!(is_cluster_scoped("RuntimeClass"));
        assert!(!is_cluster_scoped("ValidatingAdmissionPolicy"));
        assert!(!is_cluster_scoped("DeviceClass"));
    }

    #[test]
    fn previous_ids_are_kept() {
        let mut r = Resource::new(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
        );
        r.store_previous_id();
        r.set_name("p-x");
        assert_eq!(r.original_id().name, "x");
        assert_eq!(r.original_id().namespace, "default");
        let mut id = r.current_id();
        id.name = "x".into();
        assert!(r.any_id_matches(&id));
    }
}
