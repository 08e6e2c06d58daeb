//! The resource types served: built-ins plus those defined by CustomResourceDefinitions.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use capstan_schema::Schema;
use serde_json::Value;

/// One additional printer column (CRD `additionalPrinterColumns` or a built-in's table column).
#[derive(Clone, Debug)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub json_path: String,
    pub priority: i64,
    pub description: String,
}

/// A served resource in one version.
#[derive(Clone, Debug)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
    pub categories: Vec<String>,
    /// The `status` subresource is served.
    pub status: bool,
    /// The `scale` subresource is served (`spec.replicas` / `status.replicas`).
    pub scale: bool,
    /// The schema of the whole object, if known.
    pub schema: Option<Schema>,
    /// The OpenAPI schema JSON of the whole object (for `/openapi/v3`).
    pub openapi: Option<Value>,
    /// A built-in kind (strategic merge patch allowed) rather than a custom resource.
    pub builtin: bool,
    pub printer_columns: Vec<PrinterColumn>,
    /// The version objects are stored in (same for every version of one resource).
    pub storage_version: String,
}

impl ResourceType {
    /// `apps/v1` or `v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The key objects of this resource are stored under, the same for all versions
    /// (`events.k8s.io` Events live in the `core/v1` Event store: see [`crate::events`]).
    pub fn storage_key(&self) -> StorageKey {
        if crate::events::is_events_group(self) {
            return crate::events::storage_key();
        }
        StorageKey {
            group: self.group.clone(),
            resource: self.plural.clone(),
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }
}

/// Storage identity: group and plural resource name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StorageKey {
    pub group: String,
    pub resource: String,
}

/// A group with its versions (preferred first), each with its resource types.
pub type GroupTypes = (String, Vec<(String, Vec<Arc<ResourceType>>)>);

/// Plurals per version, per group, in discovery order.
type GroupPlurals = Vec<(String, Vec<(String, Vec<String>)>)>;

/// All resource types, by group/version/plural, in discovery order.
#[derive(Default, Debug)]
pub struct Registry {
    by_gvr: HashMap<(String, String, String), Arc<ResourceType>>,
    by_gvk: HashMap<(String, String, String), Arc<ResourceType>>,
    /// group → versions (discovery order; preferred first) → plurals in insertion order.
    groups: GroupPlurals,
    /// CRD name → the (group, plural) and versions it registered.
    crds: BTreeMap<String, (String, String, Vec<String>)>,
    /// Bumped on every change (cache invalidation).
    generation: u64,
}

impl Registry {
    /// Adds (or replaces) a resource type.
    pub fn insert(&mut self, rt: ResourceType) {
        self.generation += 1;
        let rt = Arc::new(rt);
        let key = (rt.group.clone(), rt.version.clone(), rt.plural.clone());
        self.by_gvk.insert(
            (rt.group.clone(), rt.version.clone(), rt.kind.clone()),
            Arc::clone(&rt),
        );
        let is_new = self.by_gvr.insert(key, Arc::clone(&rt)).is_none();
        if is_new {
            let group = if let Some(g) = self.groups.iter_mut().find(|(g, _)| *g == rt.group) {
                g
            } else {
                self.groups.push((rt.group.clone(), Vec::new()));
                self.groups.last_mut().expect("just pushed")
            };
            if let Some(v) = group.1.iter_mut().find(|(v, _)| *v == rt.version) {
                v.1.push(rt.plural.clone());
            } else {
                group.1.push((rt.version.clone(), vec![rt.plural.clone()]));
                group.1.sort_by(|a, b| compare_versions(&b.0, &a.0));
            }
        }
    }

    /// Removes a resource type.
    pub fn remove(&mut self, group: &str, version: &str, plural: &str) {
        self.generation += 1;
        if let Some(rt) =
            self.by_gvr
                .remove(&(group.to_owned(), version.to_owned(), plural.to_owned()))
        {
            self.by_gvk
                .remove(&(rt.group.clone(), rt.version.clone(), rt.kind.clone()));
        }
        if let Some(gi) = self.groups.iter().position(|(g, _)| g == group) {
            let versions = &mut self.groups[gi].1;
            if let Some(vi) = versions.iter().position(|(v, _)| v == version) {
                versions[vi].1.retain(|p| p != plural);
                if versions[vi].1.is_empty() {
                    versions.remove(vi);
                }
            }
            if versions.is_empty() {
                self.groups.remove(gi);
            }
        }
    }

    /// Changes whenever a resource type is added or removed.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.by_gvr
            .get(&(group.to_owned(), version.to_owned(), plural.to_owned()))
            .cloned()
    }

    /// Finds a resource by `apiVersion` and `kind`.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        let (group, version) = split_api_version(api_version);
        self.by_gvk
            .get(&(group.to_owned(), version.to_owned(), kind.to_owned()))
            .cloned()
    }

    /// Groups with their versions (preferred first) and resource types.
    pub fn groups(&self) -> Vec<GroupTypes> {
        self.groups
            .iter()
            .map(|(g, versions)| {
                let versions = versions
                    .iter()
                    .map(|(v, plurals)| {
                        let rts = plurals.iter().filter_map(|p| self.get(g, v, p)).collect();
                        (v.clone(), rts)
                    })
                    .collect();
                (g.clone(), versions)
            })
            .collect()
    }

    /// Every version of a group's resource (for storage-wide operations).
    pub fn versions_of(&self, group: &str, plural: &str) -> Vec<Arc<ResourceType>> {
        self.by_gvr
            .values()
            .filter(|rt| rt.group == group && rt.plural == plural)
            .cloned()
            .collect()
    }

    /// One resource type per storage key (its storage version when served; of two groups
    /// sharing a store, the first registered: `core/v1` Events before `events.k8s.io`).
    pub fn storage_types(&self) -> Vec<Arc<ResourceType>> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for (g, versions) in &self.groups {
            for (_, plurals) in versions {
                for p in plurals {
                    let all = self.versions_of(g, p);
                    if let Some(rt) = all
                        .iter()
                        .find(|rt| rt.version == rt.storage_version)
                        .or_else(|| all.first())
                        && seen.insert(rt.storage_key())
                    {
                        out.push(Arc::clone(rt));
                    }
                }
            }
        }
        out
    }

    /// Names of the CRDs currently served.
    pub fn crd_names(&self) -> Vec<String> {
        self.crds.keys().cloned().collect()
    }

    pub fn crd_registration(&self, crd_name: &str) -> Option<&(String, String, Vec<String>)> {
        self.crds.get(crd_name)
    }

    pub fn set_crd_registration(
        &mut self,
        crd_name: &str,
        group: &str,
        plural: &str,
        versions: Vec<String>,
    ) {
        self.crds.insert(
            crd_name.to_owned(),
            (group.to_owned(), plural.to_owned(), versions),
        );
    }

    pub fn remove_crd_registration(
        &mut self,
        crd_name: &str,
    ) -> Option<(String, String, Vec<String>)> {
        self.crds.remove(crd_name)
    }
}

/// Splits `apps/v1` into (`apps`, `v1`) and `v1` into (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// Kubernetes version priority: GA > beta > alpha, higher numbers first; others lexically last.
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    fn parse(v: &str) -> Option<(u32, u32, u32)> {
        let rest = v.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major: u32 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((3, major, 0));
        }
        let (level, num) = if let Some(n) = tail.strip_prefix("beta") {
            (2, n)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (1, n)
        } else {
            return None;
        };
        Some((level, major, num.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (Some((la, ma, na)), Some((lb, mb, nb))) => (la, ma, na).cmp(&(lb, mb, nb)),
        (Some(_), None) => std::cmp::Ordering::Greater,
        (None, Some(_)) => std::cmp::Ordering::Less,
        (None, None) => b.cmp(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_priority() {
        let mut v = vec!["v1alpha1", "v1beta1", "v2", "v1", "v1beta2", "foo"];
        v.sort_by(|a, b| compare_versions(b, a));
        assert_eq!(v, ["v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]);
    }
}
