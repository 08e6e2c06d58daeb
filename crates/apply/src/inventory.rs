//! The set of objects a Kustomization applied, in the format of Flux's `status.inventory`.

use capstan_api::meta::{ResourceInventory, ResourceRef};

use crate::changeset::{Action, ChangeSet};
use crate::object::ObjectRef;

/// An inventory: the objects an apply owns, with their API versions.
///
/// Converts to and from [`ResourceInventory`] (`status.inventory`), whose entries are
/// `{id: "<namespace>_<name>_<group>_<kind>", v: "<version>"}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    objects: Vec<ObjectRef>,
}

impl Inventory {
    /// An inventory of `objects`, in order, without duplicates.
    pub fn new(objects: impl IntoIterator<Item = ObjectRef>) -> Self {
        let mut inventory = Self::default();
        for object in objects {
            inventory.add(object);
        }
        inventory
    }

    /// The inventory of an apply: every object it created, configured, left unchanged or skipped.
    /// Skipped objects stay owned (Flux keeps `IfNotPresent` and ignored objects in the inventory).
    pub fn from_changeset(changeset: &ChangeSet) -> Self {
        Self::new(
            changeset
                .entries
                .iter()
                .filter(|e| e.action != Action::Deleted)
                .map(|e| e.object.clone()),
        )
    }

    /// Reads `status.inventory`; errors name the first malformed id.
    pub fn from_status(status: &ResourceInventory) -> Result<Self, crate::Error> {
        let objects = status
            .entries
            .iter()
            .map(|e| ObjectRef::from_inventory_id(&e.id, &e.v))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::new(objects))
    }

    /// Writes `status.inventory`, sorted by id as Flux does.
    pub fn to_status(&self) -> ResourceInventory {
        let mut entries: Vec<ResourceRef> = self
            .objects
            .iter()
            .map(|o| ResourceRef {
                id: o.inventory_id(),
                v: o.version.clone(),
            })
            .collect();
        entries.sort_by(|a, b| a.id.cmp(&b.id));
        ResourceInventory { entries }
    }

    /// Adds an object unless an object with the same id is there; a newer version replaces the old.
    pub fn add(&mut self, object: ObjectRef) {
        let id = object.inventory_id();
        if let Some(existing) = self.objects.iter_mut().find(|o| o.inventory_id() == id) {
            *existing = object;
        } else {
            self.objects.push(object);
        }
    }

    /// The objects.
    pub fn objects(&self) -> &[ObjectRef] {
        &self.objects
    }

    /// Whether the inventory is empty.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The objects of `self` (the old inventory) that `new` no longer holds: the stale objects to
    /// prune. Objects are matched by id, so a version change is not staleness.
    pub fn diff(&self, new: &Inventory) -> Vec<ObjectRef> {
        let keep: std::collections::HashSet<String> =
            new.objects.iter().map(ObjectRef::inventory_id).collect();
        self.objects
            .iter()
            .filter(|o| !keep.contains(&o.inventory_id()))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str) -> ObjectRef {
        ObjectRef::new("v1", "ConfigMap", "default", name)
    }

    #[test]
    fn diff_returns_objects_only_in_the_old_inventory() {
        let old = Inventory::new([
            cm("a"),
            cm("b"),
            ObjectRef::new("apps/v1", "Deployment", "default", "web"),
        ]);
        let new = Inventory::new([
            cm("a"),
            ObjectRef::new("apps/v2", "Deployment", "default", "web"),
        ]);
        assert_eq!(old.diff(&new), vec![cm("b")]);
        assert!(new.diff(&new).is_empty());
    }

    #[test]
    fn status_round_trips_and_is_sorted() {
        let inventory = Inventory::new([
            cm("b"),
            ObjectRef::new("apps/v1", "Deployment", "default", "web"),
            cm("a"),
        ]);
        let status = inventory.to_status();
        let ids: Vec<&str> = status.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "default_a__ConfigMap",
                "default_b__ConfigMap",
                "default_web_apps_Deployment"
            ]
        );
        assert_eq!(status.entries[2].v, "v1");
        let back = Inventory::from_status(&status).unwrap();
        assert_eq!(back.diff(&inventory), vec![]);
        assert_eq!(inventory.diff(&back), vec![]);
        assert_eq!(back.objects().len(), 3);
    }

    #[test]
    fn malformed_status_ids_are_errors() {
        let status = ResourceInventory {
            entries: vec![ResourceRef {
                id: "nonsense".into(),
                v: "v1".into(),
            }],
        };
        let e = Inventory::from_status(&status).unwrap_err();
        assert!(e.to_string().contains("\"nonsense\""), "{e}");
    }

    #[test]
    fn duplicates_collapse_to_the_latest_version() {
        let mut inventory =
            Inventory::new([ObjectRef::new("apps/v1beta1", "Deployment", "d", "w")]);
        inventory.add(ObjectRef::new("apps/v1", "Deployment", "d", "w"));
        assert_eq!(inventory.objects().len(), 1);
        assert_eq!(inventory.objects()[0].version, "v1");
    }
}
