//! What an apply or prune did to each object.

use std::fmt;

use crate::object::ObjectRef;

/// What the engine did to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The object did not exist and was created (or was recreated after an immutable-field error).
    Created,
    /// The object existed and differed from the manifest; it was updated.
    Configured,
    /// The object already matched the manifest; nothing was written.
    Unchanged,
    /// The object was skipped: `ssa: Ignore`, `ssa: IfNotPresent` on an existing object,
    /// `reconcile: disabled`, or (when pruning) `prune: disabled` or another owner.
    Skipped,
    /// The object was deleted.
    Deleted,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Created => "created",
            Self::Configured => "configured",
            Self::Unchanged => "unchanged",
            Self::Skipped => "skipped",
            Self::Deleted => "deleted",
        })
    }
}

/// One object and what was done to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeSetEntry {
    /// The object.
    pub object: ObjectRef,
    /// What was done.
    pub action: Action,
}

impl fmt::Display for ChangeSetEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.object, self.action)
    }
}

/// The result of applying or deleting a set of objects, in the order they were handled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeSet {
    /// One entry per handled object.
    pub entries: Vec<ChangeSetEntry>,
}

impl ChangeSet {
    /// Appends an entry.
    pub fn push(&mut self, object: ObjectRef, action: Action) {
        self.entries.push(ChangeSetEntry { object, action });
    }

    /// Appends every entry of `other`.
    pub fn extend(&mut self, other: ChangeSet) {
        self.entries.extend(other.entries);
    }

    /// The action recorded for `object`, if it was handled.
    pub fn action(&self, object: &ObjectRef) -> Option<Action> {
        self.entries
            .iter()
            .find(|e| e.object == *object)
            .map(|e| e.action)
    }

    /// Whether any object was created, configured or deleted.
    pub fn has_changes(&self) -> bool {
        self.entries.iter().any(|e| {
            matches!(
                e.action,
                Action::Created | Action::Configured | Action::Deleted
            )
        })
    }

    /// The entries with the given action.
    pub fn with_action(&self, action: Action) -> impl Iterator<Item = &ObjectRef> {
        self.entries
            .iter()
            .filter(move |e| e.action == action)
            .map(|e| &e.object)
    }
}

impl fmt::Display for ChangeSet {
    /// One `Kind/namespace/name action` line per changed object (unchanged and skipped omitted),
    /// as Flux's events read.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for entry in &self.entries {
            if matches!(entry.action, Action::Unchanged | Action::Skipped) {
                continue;
            }
            writeln!(f, "{entry}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_lists_only_changes() {
        let mut set = ChangeSet::default();
        set.push(ObjectRef::new("v1", "ConfigMap", "a", "x"), Action::Created);
        set.push(
            ObjectRef::new("v1", "ConfigMap", "a", "y"),
            Action::Unchanged,
        );
        set.push(
            ObjectRef::new("v1", "Namespace", "", "a"),
            Action::Configured,
        );
        assert_eq!(
            set.to_string(),
            "ConfigMap/a/x created\nNamespace/a configured\n"
        );
        assert!(set.has_changes());
        let mut quiet = ChangeSet::default();
        quiet.push(
            ObjectRef::new("v1", "ConfigMap", "a", "y"),
            Action::Unchanged,
        );
        assert!(!quiet.has_changes());
    }
}
