//! Field sets in the `FieldsV1` format.
//!
//! A [`FieldSet`] is the structured-merge-diff set of field paths that
//! `metadata.managedFields[].fieldsV1` records. A path is a list of [`PathElement`]s:
//!
//! | element | `FieldsV1` key | printed as |
//! |---|---|---|
//! | field of a map | `f:replicas` | `.replicas` |
//! | item of an associative list | `k:{"name":"app"}` (key fields sorted) | `[name="app"]` |
//! | item of a set | `v:"example.com/finalizer"` | `[="example.com/finalizer"]` |
//! | item of a list by position | `i:0` | `[0]` |
//!
//! In `FieldsV1` a leaf is `{}` and `".": {}` marks a node that is itself a member and also has
//! members below it (an associative-list item, a map created by an update). Keys are written in
//! structured-merge-diff order: `.` first, then fields, keys, values and indices, each sorted.
//!
//! How a value maps to paths comes from the schema: granular maps recurse, lists of type
//! `map` become keyed items (members themselves), lists of type `set` become value items,
//! atomic lists and atomic maps are leaves. Without a schema (or below an `any()` node) maps
//! recurse and lists are atomic, as structured-merge-diff's "deduced" type does.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use capstan_schema::{ListType, MapType, Schema};
use serde_json::{Map, Value};

use crate::PatchError;

/// One step of a field path.
#[derive(Clone, Debug)]
pub enum PathElement {
    /// A field of a map: `f:<name>`.
    Field(String),
    /// An item of an associative list, by its key fields (sorted by name): `k:{…}`.
    Key(Vec<(String, Value)>),
    /// An item of a set: `v:<json>`.
    Value(Value),
    /// An item of a list by position: `i:<index>`.
    Index(usize),
}

impl PathElement {
    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// A keyed element; the fields are sorted by name.
    pub fn key(mut fields: Vec<(String, Value)>) -> PathElement {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields)
    }

    /// Parses a `FieldsV1` key such as `f:spec` or `k:{"name":"app"}`.
    pub fn parse(encoded: &str) -> Result<PathElement, PatchError> {
        let bad = |detail: &str| {
            PatchError::Invalid(format!("fieldsV1: path element {encoded:?}: {detail}"))
        };
        let Some((prefix, rest)) = encoded.split_once(':') else {
            return Err(bad("missing type prefix"));
        };
        match prefix {
            "f" => Ok(PathElement::Field(rest.to_owned())),
            "k" => {
                let Ok(Value::Object(map)) = serde_json::from_str::<Value>(rest) else {
                    return Err(bad("key is not a JSON object"));
                };
                if map.is_empty() {
                    return Err(bad("key has no fields"));
                }
                Ok(PathElement::key(map.into_iter().collect()))
            }
            "v" => serde_json::from_str(rest)
                .map(PathElement::Value)
                .map_err(|_| bad("value is not JSON")),
            "i" => rest
                .parse()
                .map(PathElement::Index)
                .map_err(|_| bad("index is not a number")),
            _ => Err(bad("unknown type prefix")),
        }
    }

    /// The `FieldsV1` key of this element.
    pub fn encode(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let map: Map<String, Value> = fields.iter().cloned().collect();
                format!("k:{}", Value::Object(map))
            }
            PathElement::Value(value) => format!("v:{value}"),
            PathElement::Index(index) => format!("i:{index}"),
        }
    }
}

impl fmt::Display for PathElement {
    /// Kubernetes' path notation: `.name`, `[name="app"]`, `[="x"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                f.write_str("[")?;
                for (index, (name, value)) in fields.iter().enumerate() {
                    if index > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{name}={value}")?;
                }
                f.write_str("]")
            }
            PathElement::Value(value) => write!(f, "[={value}]"),
            PathElement::Index(index) => write!(f, "[{index}]"),
        }
    }
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(left), PathElement::Field(right)) => left.cmp(right),
            (PathElement::Key(left), PathElement::Key(right)) => {
                for ((left_name, left_value), (right_name, right_value)) in left.iter().zip(right) {
                    let ordering = left_name
                        .cmp(right_name)
                        .then_with(|| crate::value::compare(left_value, right_value));
                    if ordering != Ordering::Equal {
                        return ordering;
                    }
                }
                left.len().cmp(&right.len())
            }
            (PathElement::Value(left), PathElement::Value(right)) => {
                crate::value::compare(left, right)
            }
            (PathElement::Index(left), PathElement::Index(right)) => left.cmp(right),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

/// Prints a path as Kubernetes does in conflict messages: `.spec.containers[name="app"].image`.
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Node {
    /// This node itself is in the set.
    member: bool,
    children: BTreeMap<PathElement, Node>,
}

impl Node {
    fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    fn union(&self, other: &Node) -> Node {
        let mut result = self.clone();
        result.member |= other.member;
        for (element, child) in &other.children {
            let merged = match result.children.get(element) {
                Some(existing) => existing.union(child),
                None => child.clone(),
            };
            result.children.insert(element.clone(), merged);
        }
        result
    }

    fn intersection(&self, other: &Node) -> Node {
        let mut result = Node {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (element, child) in &self.children {
            if let Some(other_child) = other.children.get(element) {
                let common = child.intersection(other_child);
                if !common.is_empty() {
                    result.children.insert(element.clone(), common);
                }
            }
        }
        result
    }

    fn difference(&self, other: &Node) -> Node {
        let mut result = Node {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (element, child) in &self.children {
            let rest = match other.children.get(element) {
                Some(other_child) => child.difference(other_child),
                None => child.clone(),
            };
            if !rest.is_empty() {
                result.children.insert(element.clone(), rest);
            }
        }
        result
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        if self.member && !prefix.is_empty() {
            out.push(prefix.clone());
        }
        for (element, child) in &self.children {
            prefix.push(element.clone());
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    fn parse(value: &Value) -> Result<Node, PatchError> {
        let Value::Object(map) = value else {
            return Err(PatchError::Invalid(
                "fieldsV1: every node must be a JSON object".to_owned(),
            ));
        };
        let mut node = Node::default();
        for (key, child) in map {
            if key == "." {
                node.member = true;
                continue;
            }
            let element = PathElement::parse(key)?;
            let mut child = Node::parse(child)?;
            if child.children.is_empty() {
                child.member = true;
            }
            let merged = match node.children.remove(&element) {
                Some(existing) => existing.union(&child),
                None => child,
            };
            node.children.insert(element, merged);
        }
        Ok(node)
    }

    fn encode(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".to_owned(), Value::Object(Map::new()));
        }
        for (element, child) in &self.children {
            map.insert(element.encode(), child.encode());
        }
        Value::Object(map)
    }
}

/// A set of field paths (as in `metadata.managedFields[].fieldsV1`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[must_use]
pub struct FieldSet {
    root: Node,
}

impl FieldSet {
    /// Decodes a `fieldsV1` object.
    pub fn from_fields_v1(value: &Value) -> Result<FieldSet, crate::PatchError> {
        let mut root = Node::parse(value)?;
        root.member = false;
        Ok(FieldSet { root })
    }

    /// Encodes as a `fieldsV1` object (structured-merge-diff key order).
    pub fn to_fields_v1(&self) -> Value {
        self.root.encode()
    }

    /// Every leaf field set in `object` (excluding `apiVersion`, `kind`, `metadata.name`,
    /// `metadata.namespace`, `metadata.managedFields`, … as Kubernetes does), plus every item of
    /// an associative list or set. This is the set a server-side apply of `object` owns.
    pub fn from_object(object: &Value, schema: Option<&Schema>) -> FieldSet {
        let mut set = FieldSet::default();
        let mut path = Vec::new();
        owned_paths(object, schema, &mut path, &mut set);
        set
    }

    /// Fields in `self` or `other`.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet {
            root: self.root.union(&other.root),
        }
    }

    /// Fields in `self` but not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet {
            root: self.root.difference(&other.root),
        }
    }

    /// Fields in both.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        FieldSet {
            root: self.root.intersection(&other.root),
        }
    }

    /// Whether the set has no member.
    pub fn is_empty(&self) -> bool {
        self.root.children.is_empty()
    }

    /// Number of member paths.
    pub fn len(&self) -> usize {
        self.members().len()
    }

    /// Adds a path (an empty path is ignored).
    pub fn insert(&mut self, path: &[PathElement]) {
        if path.is_empty() {
            return;
        }
        let mut node = &mut self.root;
        for element in path {
            node = node.children.entry(element.clone()).or_default();
        }
        node.member = true;
    }

    /// Whether `path` itself is a member.
    pub fn contains(&self, path: &[PathElement]) -> bool {
        !path.is_empty() && self.node(path).is_some_and(|node| node.member)
    }

    /// Whether `path` or any path below it is a member.
    pub fn contains_prefix(&self, path: &[PathElement]) -> bool {
        self.node(path).is_some_and(|node| !node.is_empty())
    }

    fn node(&self, path: &[PathElement]) -> Option<&Node> {
        let mut node = &self.root;
        for element in path {
            node = node.children.get(element)?;
        }
        Some(node)
    }

    /// Every member path, parents before children, in `FieldsV1` order.
    pub fn members(&self) -> Vec<Vec<PathElement>> {
        let mut out = Vec::new();
        self.root.collect(&mut Vec::new(), &mut out);
        out
    }

    /// Paths as Kubernetes prints them in conflicts: `.spec.replicas`, `.spec.containers[name="app"].image`.
    pub fn paths(&self) -> Vec<String> {
        self.members()
            .iter()
            .map(|path| path_string(path))
            .collect()
    }
}

/// Fields the API server never tracks in `managedFields`.
pub(crate) fn is_ignored(path: &[PathElement]) -> bool {
    const METADATA: [&str; 9] = [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "selfLink",
        "clusterName",
    ];
    match path {
        [PathElement::Field(name)] => name == "apiVersion" || name == "kind",
        [PathElement::Field(metadata), PathElement::Field(name)] => {
            metadata == "metadata" && METADATA.contains(&name.as_str())
        }
        _ => false,
    }
}

/// How a value is walked.
pub(crate) enum Shape<'a> {
    Map(&'a Map<String, Value>),
    /// An associative list (keyed items) or a set (`keys == None`).
    Associative(&'a [Value], Option<Vec<String>>),
    Leaf,
}

pub(crate) fn shape<'a>(value: &'a Value, schema: Option<&Schema>) -> Shape<'a> {
    match value {
        Value::Object(map) => {
            if schema.is_some_and(|schema| schema.map_type() == MapType::Atomic) {
                Shape::Leaf
            } else {
                Shape::Map(map)
            }
        }
        Value::Array(items) => match schema.map(Schema::list_type) {
            Some(ListType::Map(keys)) if !keys.is_empty() => Shape::Associative(items, Some(keys)),
            Some(ListType::Set) => Shape::Associative(items, None),
            _ => Shape::Leaf,
        },
        _ => Shape::Leaf,
    }
}

pub(crate) fn child_schema(schema: Option<&Schema>, field: &str) -> Option<Schema> {
    schema.and_then(|schema| schema.child(field))
}

pub(crate) fn items_schema(schema: Option<&Schema>) -> Option<Schema> {
    schema.and_then(Schema::items)
}

/// The path element of item `index` of an associative list or set.
pub(crate) fn item_element(item: &Value, keys: Option<&[String]>, index: usize) -> PathElement {
    match keys {
        None => PathElement::Value(item.clone()),
        Some(keys) => {
            let fields: Vec<(String, Value)> = keys
                .iter()
                .filter_map(|key| item.get(key).map(|value| (key.clone(), value.clone())))
                .collect();
            if fields.is_empty() || !item.is_object() {
                PathElement::Index(index)
            } else {
                PathElement::key(fields)
            }
        }
    }
}

fn owned_paths(
    value: &Value,
    schema: Option<&Schema>,
    path: &mut Vec<PathElement>,
    set: &mut FieldSet,
) {
    match shape(value, schema) {
        Shape::Map(map) => {
            for (name, child) in map {
                path.push(PathElement::Field(name.clone()));
                if !is_ignored(path) {
                    owned_paths(child, child_schema(schema, name).as_ref(), path, set);
                }
                path.pop();
            }
        }
        Shape::Associative(items, keys) => {
            let item_schema = items_schema(schema);
            for (index, item) in items.iter().enumerate() {
                path.push(item_element(item, keys.as_deref(), index));
                set.insert(path);
                if keys.is_some() {
                    owned_paths(item, item_schema.as_ref(), path, set);
                }
                path.pop();
            }
        }
        Shape::Leaf => set.insert(path),
    }
}

/// What changed between two versions of an object.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    /// Nodes (leaves, maps, lists, list items) present only in the new object.
    pub added: FieldSet,
    /// Leaves whose value changed.
    pub modified: FieldSet,
    /// Nodes present only in the old object.
    pub removed: FieldSet,
}

/// Compares two objects node by node (`null` counts as absent).
pub(crate) fn compare(
    old: Option<&Value>,
    new: Option<&Value>,
    schema: Option<&Schema>,
) -> Comparison {
    let mut comparison = Comparison::default();
    compare_at(old, new, schema, &mut Vec::new(), &mut comparison);
    comparison
}

fn compare_at(
    old: Option<&Value>,
    new: Option<&Value>,
    schema: Option<&Schema>,
    path: &mut Vec<PathElement>,
    out: &mut Comparison,
) {
    let old = old.filter(|value| !value.is_null());
    let new = new.filter(|value| !value.is_null());
    match (old, new) {
        (None, None) => {}
        (Some(old), None) => mark_all(old, schema, path, true, &mut out.removed),
        (None, Some(new)) => mark_all(new, schema, path, true, &mut out.added),
        (Some(old), Some(new)) => match (shape(old, schema), shape(new, schema)) {
            (Shape::Map(old_map), Shape::Map(new_map)) => {
                let names = old_map
                    .keys()
                    .chain(new_map.keys().filter(|name| !old_map.contains_key(*name)));
                for name in names {
                    path.push(PathElement::Field(name.clone()));
                    if !is_ignored(path) {
                        let child = child_schema(schema, name);
                        compare_at(
                            old_map.get(name),
                            new_map.get(name),
                            child.as_ref(),
                            path,
                            out,
                        );
                    }
                    path.pop();
                }
            }
            (Shape::Associative(old_items, old_keys), Shape::Associative(new_items, new_keys))
                if old_keys == new_keys =>
            {
                let item_schema = items_schema(schema);
                let index = |items: &'_ [Value]| -> Vec<(PathElement, usize)> {
                    items
                        .iter()
                        .enumerate()
                        .map(|(position, item)| {
                            (item_element(item, old_keys.as_deref(), position), position)
                        })
                        .collect()
                };
                let old_index = index(old_items);
                let new_index = index(new_items);
                let find = |entries: &[(PathElement, usize)], element: &PathElement| {
                    entries
                        .iter()
                        .find(|(candidate, _)| candidate == element)
                        .map(|(_, position)| *position)
                };
                let mut seen: Vec<&PathElement> = Vec::new();
                for (element, _) in old_index.iter().chain(&new_index) {
                    if seen.contains(&element) {
                        continue;
                    }
                    seen.push(element);
                    let old_item = find(&old_index, element).map(|position| &old_items[position]);
                    let new_item = find(&new_index, element).map(|position| &new_items[position]);
                    path.push(element.clone());
                    if old_keys.is_some() {
                        compare_at(old_item, new_item, item_schema.as_ref(), path, out);
                    } else {
                        match (old_item, new_item) {
                            (Some(_), None) => out.removed.insert(path),
                            (None, Some(_)) => out.added.insert(path),
                            _ => {}
                        }
                    }
                    path.pop();
                }
            }
            (Shape::Leaf, Shape::Leaf) => {
                if old != new {
                    out.modified.insert(path);
                }
            }
            _ => {
                // The kind of value changed: the node is modified, whatever hung below it changed too.
                out.modified.insert(path);
                mark_all(old, schema, path, false, &mut out.removed);
                mark_all(new, schema, path, false, &mut out.added);
            }
        },
    }
}

/// Marks every node below `path` (and `path` itself when `include_self`).
fn mark_all(
    value: &Value,
    schema: Option<&Schema>,
    path: &mut Vec<PathElement>,
    include_self: bool,
    set: &mut FieldSet,
) {
    if value.is_null() {
        return;
    }
    // `metadata` always exists; Kubernetes never records the node itself.
    if include_self && !matches!(path.as_slice(), [PathElement::Field(name)] if name == "metadata")
    {
        set.insert(path);
    }
    match shape(value, schema) {
        Shape::Map(map) => {
            for (name, child) in map {
                path.push(PathElement::Field(name.clone()));
                if !is_ignored(path) {
                    mark_all(child, child_schema(schema, name).as_ref(), path, true, set);
                }
                path.pop();
            }
        }
        Shape::Associative(items, keys) => {
            let item_schema = items_schema(schema);
            for (index, item) in items.iter().enumerate() {
                path.push(item_element(item, keys.as_deref(), index));
                if keys.is_some() {
                    mark_all(item, item_schema.as_ref(), path, true, set);
                } else {
                    set.insert(path);
                }
                path.pop();
            }
        }
        Shape::Leaf => {}
    }
}

#[cfg(test)]
mod tests;
