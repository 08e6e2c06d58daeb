//! Object identity: [`ObjectRef`], Flux's inventory id format and the annotations and labels the
//! engine reads.

use std::collections::BTreeMap;
use std::fmt;

use kube::api::{DynamicObject, GroupVersionKind};

use crate::error::ObjectError;

/// Annotation choosing how an object is applied; see [`SsaMode`].
pub const SSA_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/ssa";
/// Annotation that, set to `enabled`, lets the engine recreate the object on immutable-field errors.
pub const FORCE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/force";
/// Annotation that, set to `disabled`, keeps the object out of pruning.
pub const PRUNE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/prune";
/// Annotation that, set to `disabled`, stops the engine from applying or pruning the object.
pub const RECONCILE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/reconcile";
/// Label naming the Kustomization that owns an object.
pub const OWNER_NAME_LABEL: &str = "kustomize.toolkit.fluxcd.io/name";
/// Label naming the namespace of the Kustomization that owns an object.
pub const OWNER_NAMESPACE_LABEL: &str = "kustomize.toolkit.fluxcd.io/namespace";
/// The value that turns the force annotation on.
pub const ENABLED: &str = "enabled";
/// The value that turns the prune and reconcile annotations off.
pub const DISABLED: &str = "disabled";

/// A reference to one Kubernetes object: its group, version, kind, namespace and name.
///
/// Displays as Flux does: `Kind/namespace/name`, or `Kind/name` when cluster-scoped.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// API group; empty for the core group.
    pub group: String,
    /// API version within the group.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Namespace; empty when cluster-scoped.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectRef {
    /// A reference from its parts.
    pub fn new(api_version: &str, kind: &str, namespace: &str, name: &str) -> Self {
        let (group, version) = split_api_version(api_version);
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The reference of a manifest; errors when `apiVersion`, `kind` or `metadata.name` is missing.
    pub fn from_object(object: &DynamicObject) -> Result<Self, ObjectError> {
        let name = object.metadata.name.clone().unwrap_or_default();
        let namespace = object.metadata.namespace.clone().unwrap_or_default();
        let Some(types) = object.types.as_ref().filter(|t| !t.kind.is_empty()) else {
            return Err(ObjectError::new(
                format!("<unknown kind>/{name}"),
                "object has no apiVersion or kind",
            ));
        };
        let reference = Self::new(&types.api_version, &types.kind, &namespace, &name);
        if name.is_empty() {
            return Err(ObjectError::new(
                reference.to_string(),
                "metadata.name is empty",
            ));
        }
        if types.api_version.is_empty() {
            return Err(ObjectError::new(
                reference.to_string(),
                "apiVersion is empty",
            ));
        }
        Ok(reference)
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The group, version and kind.
    pub fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(&self.group, &self.version, &self.kind)
    }

    /// Flux's inventory id: `<namespace>_<name>_<group>_<kind>`, with `:` in names written `__`.
    pub fn inventory_id(&self) -> String {
        format!(
            "{}_{}_{}_{}",
            self.namespace,
            self.name.replace(':', "__"),
            self.group,
            self.kind
        )
    }

    /// Parses an inventory id and its version (`v`, e.g. `v1` or `apps/v1`; only the version part is
    /// kept, the group comes from the id).
    pub fn from_inventory_id(id: &str, version: &str) -> Result<Self, crate::Error> {
        let bad = || crate::Error::InventoryId { id: id.to_owned() };
        let (namespace, rest) = id.split_once('_').ok_or_else(bad)?;
        let (rest, kind) = rest.rsplit_once('_').ok_or_else(bad)?;
        let (name, group) = rest.rsplit_once('_').ok_or_else(bad)?;
        if name.is_empty() || kind.is_empty() {
            return Err(bad());
        }
        let version = version.rsplit_once('/').map_or(version, |(_, v)| v);
        Ok(Self {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.replace("__", ":"),
        })
    }

    /// Whether this is a CustomResourceDefinition.
    pub fn is_crd(&self) -> bool {
        self.kind == "CustomResourceDefinition" && self.group == "apiextensions.k8s.io"
    }

    /// Whether this is a Namespace.
    pub fn is_namespace(&self) -> bool {
        self.kind == "Namespace" && self.group.is_empty()
    }

    /// Whether this object defines cluster-wide types or scopes others depend on (CRDs and
    /// Namespaces), which Flux applies first.
    pub fn is_cluster_definition(&self) -> bool {
        self.is_crd() || self.is_namespace()
    }

    /// Whether this is a `*Class` kind (StorageClass, IngressClass, PriorityClass, ...) that other
    /// objects name, applied in the second stage.
    pub fn is_class(&self) -> bool {
        self.kind.ends_with("Class")
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// Splits `group/version` (or the core `version`) into its parts.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// How an object is applied, from its `kustomize.toolkit.fluxcd.io/ssa` annotation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SsaMode {
    /// Apply and take ownership of every field in the manifest (the default).
    #[default]
    Override,
    /// Apply the manifest's fields and leave fields other managers added (kubectl edits, ...) in
    /// place. Today `Override` does the same: the engine does not yet remove other managers'
    /// `managedFields` entries (Flux's cleanup of `kubectl`/`before-first-apply` ownership), which
    /// is what tells the two apart in Flux.
    Merge,
    /// Create the object when it does not exist; never update it.
    IfNotPresent,
    /// Neither apply nor prune the object.
    Ignore,
}

impl SsaMode {
    /// The mode an object asks for; unknown values fall back to `Override` (Flux matches the values
    /// case-insensitively).
    pub fn of(annotations: Option<&BTreeMap<String, String>>) -> Self {
        match annotations
            .and_then(|a| a.get(SSA_ANNOTATION))
            .map(|v| v.to_ascii_lowercase())
            .as_deref()
        {
            Some("merge") => Self::Merge,
            Some("ifnotpresent") => Self::IfNotPresent,
            Some("ignore") => Self::Ignore,
            _ => Self::Override,
        }
    }
}

/// Whether `annotations` hold `key: value` (value compared case-insensitively).
pub(crate) fn annotation_is(
    annotations: Option<&BTreeMap<String, String>>,
    key: &str,
    value: &str,
) -> bool {
    annotations
        .and_then(|a| a.get(key))
        .is_some_and(|v| v.eq_ignore_ascii_case(value))
}

/// Sets the owner labels `kustomize.toolkit.fluxcd.io/name` and `.../namespace` on every object,
/// keeping their other labels.
pub fn set_owner_labels(objects: &mut [DynamicObject], owner_name: &str, owner_namespace: &str) {
    for object in objects {
        let labels = object.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(OWNER_NAME_LABEL.to_owned(), owner_name.to_owned());
        labels.insert(OWNER_NAMESPACE_LABEL.to_owned(), owner_namespace.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: serde_json::Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn inventory_ids_follow_flux() {
        let deployment = ObjectRef::new("apps/v1", "Deployment", "default", "web");
        assert_eq!(deployment.inventory_id(), "default_web_apps_Deployment");
        let service = ObjectRef::new("v1", "Service", "default", "web");
        assert_eq!(service.inventory_id(), "default_web__Service");
        let role = ObjectRef::new(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "",
            "system:x",
        );
        assert_eq!(
            role.inventory_id(),
            "_system__x_rbac.authorization.k8s.io_ClusterRole"
        );
        for r in [deployment, service, role] {
            let parsed = ObjectRef::from_inventory_id(&r.inventory_id(), &r.version).unwrap();
            assert_eq!(parsed, r);
        }
    }

    #[test]
    fn inventory_ids_that_are_not_ids_are_errors() {
        for bad in ["", "default", "default_web", "ns__apps_"] {
            assert!(ObjectRef::from_inventory_id(bad, "v1").is_err(), "{bad}");
        }
        let core = ObjectRef::from_inventory_id("ns_cm__ConfigMap", "v1").unwrap();
        assert_eq!(core.api_version(), "v1");
        let apps = ObjectRef::from_inventory_id("ns_web_apps_Deployment", "apps/v1").unwrap();
        assert_eq!(apps.api_version(), "apps/v1");
    }

    #[test]
    fn display_names_kind_namespace_and_name() {
        assert_eq!(
            ObjectRef::new("apps/v1", "Deployment", "default", "web").to_string(),
            "Deployment/default/web"
        );
        assert_eq!(
            ObjectRef::new("v1", "Namespace", "", "apps").to_string(),
            "Namespace/apps"
        );
    }

    #[test]
    fn manifests_without_identity_are_rejected() {
        let no_kind = object(serde_json::json!({"metadata": {"name": "x"}}));
        assert!(
            ObjectRef::from_object(&no_kind)
                .unwrap_err()
                .to_string()
                .contains("kind")
        );
        let no_name =
            object(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}));
        let e = ObjectRef::from_object(&no_name).unwrap_err();
        assert!(e.to_string().contains("metadata.name"), "{e}");
    }

    #[test]
    fn ssa_modes_parse_case_insensitively() {
        let with = |v: &str| BTreeMap::from([(SSA_ANNOTATION.to_owned(), v.to_owned())]);
        assert_eq!(SsaMode::of(None), SsaMode::Override);
        assert_eq!(SsaMode::of(Some(&with("Merge"))), SsaMode::Merge);
        assert_eq!(
            SsaMode::of(Some(&with("IfNotPresent"))),
            SsaMode::IfNotPresent
        );
        assert_eq!(SsaMode::of(Some(&with("ignore"))), SsaMode::Ignore);
        assert_eq!(SsaMode::of(Some(&with("bogus"))), SsaMode::Override);
    }

    #[test]
    fn owner_labels_are_added_beside_existing_ones() {
        let mut objects = vec![object(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {"app": "web"}}
        }))];
        set_owner_labels(&mut objects, "apps", "flux-system");
        let labels = objects[0].metadata.labels.as_ref().unwrap();
        assert_eq!(labels["app"], "web");
        assert_eq!(labels[OWNER_NAME_LABEL], "apps");
        assert_eq!(labels[OWNER_NAMESPACE_LABEL], "flux-system");
    }
}
