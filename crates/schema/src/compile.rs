//! Compiling OpenAPI JSON into a [`Registry`] of resolved nodes.
//!
//! Every schema object reachable from the entry points becomes a [`Node`]; `$ref`s become
//! node ids, so recursive schemas (JSONSchemaProps) are plain cycles in the id graph. A `$ref`
//! (or an `allOf: [{$ref}]` wrapper) whose only siblings are annotations compiles to the target's
//! id; one with meaningful siblings (`default`, `nullable`, `x-kubernetes-*`) becomes a copy of
//! the target with the siblings laid over it, resolved after the whole closure is compiled.

use std::collections::HashMap;

use regex::Regex;
use serde_json::{Map, Value};

use crate::{ListType, MapType, SchemaError};

/// Index of a node in [`Registry::nodes`].
pub(crate) type NodeId = u32;

/// The node every registry reserves at index 0: accepts anything, preserves unknown fields.
pub(crate) const ANY: NodeId = 0;

/// JSON types, as a bit set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Types(u8);

impl Types {
    pub(crate) const OBJECT: Types = Types(1);
    pub(crate) const ARRAY: Types = Types(2);
    pub(crate) const STRING: Types = Types(4);
    pub(crate) const INTEGER: Types = Types(8);
    pub(crate) const NUMBER: Types = Types(16);
    pub(crate) const BOOLEAN: Types = Types(32);
    pub(crate) const NULL: Types = Types(64);

    const NAMES: [(Types, &'static str); 7] = [
        (Types::OBJECT, "object"),
        (Types::ARRAY, "array"),
        (Types::STRING, "string"),
        (Types::INTEGER, "integer"),
        (Types::NUMBER, "number"),
        (Types::BOOLEAN, "boolean"),
        (Types::NULL, "null"),
    ];

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub(crate) fn contains(self, other: Types) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }

    fn insert(&mut self, other: Types) {
        self.0 |= other.0;
    }

    fn remove(&mut self, other: Types) {
        self.0 &= !other.0;
    }

    fn from_name(name: &str) -> Option<Types> {
        Types::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(t, _)| *t)
    }

    /// Comma-separated names, e.g. `integer,string`.
    pub(crate) fn describe(self) -> String {
        let mut out = String::new();
        for (t, name) in Types::NAMES {
            if self.contains(t) {
                if !out.is_empty() {
                    out.push(',');
                }
                out.push_str(name);
            }
        }
        out
    }
}

/// What `additionalProperties` allows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Additional {
    /// Not specified: unknown properties are pruned (unless preserved) but not rejected.
    #[default]
    Unspecified,
    /// `additionalProperties: false`.
    Forbidden,
    /// `additionalProperties: <schema>` (`true` maps to [`ANY`]).
    Schema(NodeId),
}

/// One compiled schema object.
#[derive(Clone, Debug, Default)]
pub(crate) struct Node {
    /// Definition name, for definitions (debugging aid).
    pub name: Option<Box<str>>,
    pub types: Types,
    pub nullable: bool,
    pub int_or_string: bool,
    pub preserve_unknown: bool,
    pub embedded_resource: bool,
    /// Sorted by name.
    pub properties: Vec<(Box<str>, NodeId)>,
    pub additional: Additional,
    pub items: Option<NodeId>,
    pub required: Vec<Box<str>>,
    pub enumeration: Vec<Value>,
    pub pattern: Option<Regex>,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub multiple_of: Option<f64>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    pub min_properties: Option<u64>,
    pub max_properties: Option<u64>,
    pub unique_items: bool,
    pub format: Option<Box<str>>,
    pub default: Option<Value>,
    pub list_type: Option<Box<str>>,
    pub list_map_keys: Vec<String>,
    pub map_type: Option<Box<str>>,
    pub patch_strategy: Option<Box<str>>,
    pub patch_merge_key: Option<Box<str>>,
    pub all_of: Vec<NodeId>,
    pub any_of: Vec<NodeId>,
    pub one_of: Vec<NodeId>,
    pub not: Option<NodeId>,
}

impl Node {
    pub(crate) fn any() -> Node {
        Node {
            preserve_unknown: true,
            ..Node::default()
        }
    }

    pub(crate) fn property(&self, name: &str) -> Option<NodeId> {
        self.properties
            .binary_search_by(|(n, _)| n.as_ref().cmp(name))
            .ok()
            .map(|i| self.properties[i].1)
    }

    /// The effective list type (see [`crate::Schema::list_type`]); `items` is the compiled
    /// items node, used to tell scalar sets from object lists.
    pub(crate) fn list_type(&self, items: Option<&Node>) -> ListType {
        match self.list_type.as_deref() {
            Some("set") => return ListType::Set,
            Some("map") => {
                if !self.list_map_keys.is_empty() {
                    return ListType::Map(self.list_map_keys.clone());
                }
                if let Some(key) = &self.patch_merge_key {
                    return ListType::Map(vec![key.to_string()]);
                }
                return ListType::Atomic;
            }
            Some(_) => return ListType::Atomic,
            None => {}
        }
        let merges = self
            .patch_strategy
            .as_deref()
            .is_some_and(|s| s.split(',').any(|part| part.trim() == "merge"));
        if !merges {
            return ListType::Atomic;
        }
        if let Some(key) = &self.patch_merge_key {
            return ListType::Map(vec![key.to_string()]);
        }
        let scalar_items = items.is_none_or(|items| {
            !items.types.contains(Types::OBJECT)
                && !items.types.contains(Types::ARRAY)
                && (!items.types.is_empty() || items.int_or_string)
        });
        if scalar_items {
            ListType::Set
        } else {
            ListType::Atomic
        }
    }

    pub(crate) fn map_type(&self) -> MapType {
        match self.map_type.as_deref() {
            Some("atomic") => MapType::Atomic,
            _ => MapType::Granular,
        }
    }

    /// Lays the fields `over` sets on top of `self`.
    fn overlay(&mut self, over: Node) {
        fn take<T>(slot: &mut Option<T>, value: Option<T>) {
            if value.is_some() {
                *slot = value;
            }
        }
        if !over.types.is_empty() {
            self.types = over.types;
        }
        self.nullable |= over.nullable;
        self.int_or_string |= over.int_or_string;
        self.preserve_unknown |= over.preserve_unknown;
        self.embedded_resource |= over.embedded_resource;
        for (name, id) in over.properties {
            match self.properties.binary_search_by(|(n, _)| n.cmp(&name)) {
                Ok(i) => self.properties[i].1 = id,
                Err(i) => self.properties.insert(i, (name, id)),
            }
        }
        if over.additional != Additional::Unspecified {
            self.additional = over.additional;
        }
        take(&mut self.items, over.items);
        for name in over.required {
            if !self.required.contains(&name) {
                self.required.push(name);
            }
        }
        if !over.enumeration.is_empty() {
            self.enumeration = over.enumeration;
        }
        take(&mut self.pattern, over.pattern);
        if over.minimum.is_some() {
            self.minimum = over.minimum;
            self.exclusive_minimum = over.exclusive_minimum;
        }
        if over.maximum.is_some() {
            self.maximum = over.maximum;
            self.exclusive_maximum = over.exclusive_maximum;
        }
        take(&mut self.multiple_of, over.multiple_of);
        take(&mut self.min_length, over.min_length);
        take(&mut self.max_length, over.max_length);
        take(&mut self.min_items, over.min_items);
        take(&mut self.max_items, over.max_items);
        take(&mut self.min_properties, over.min_properties);
        take(&mut self.max_properties, over.max_properties);
        self.unique_items |= over.unique_items;
        take(&mut self.format, over.format);
        take(&mut self.default, over.default);
        take(&mut self.list_type, over.list_type);
        if !over.list_map_keys.is_empty() {
            self.list_map_keys = over.list_map_keys;
        }
        take(&mut self.map_type, over.map_type);
        take(&mut self.patch_strategy, over.patch_strategy);
        take(&mut self.patch_merge_key, over.patch_merge_key);
        self.all_of.extend(over.all_of);
        self.any_of.extend(over.any_of);
        self.one_of.extend(over.one_of);
        take(&mut self.not, over.not);
    }
}

/// A set of compiled nodes; node 0 is [`ANY`].
#[derive(Debug)]
pub(crate) struct Registry {
    pub nodes: Vec<Node>,
    /// Definition name → node, for every definition compiled.
    pub names: HashMap<Box<str>, NodeId>,
}

impl Registry {
    pub(crate) fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// A registry holding only [`ANY`].
    pub(crate) fn any_only() -> Registry {
        Registry {
            nodes: vec![Node::any()],
            names: HashMap::new(),
        }
    }
}

/// Keywords that never change what a schema accepts or how it merges.
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "example",
    "examples",
    "externalDocs",
    "$comment",
    "$schema",
    "readOnly",
    "writeOnly",
    "deprecated",
    "x-kubernetes-group-version-kind",
    "x-kubernetes-unions",
];

/// Maximum chain length of `$ref`-with-siblings overlays (guards against reference cycles).
const MAX_OVERLAY_DEPTH: usize = 64;

/// Builds a [`Registry`] from JSON schemas whose `$ref`s resolve in `definitions`.
pub(crate) struct Compiler<'a> {
    definitions: &'a Map<String, Value>,
    nodes: Vec<Node>,
    names: HashMap<Box<str>, NodeId>,
    /// Definitions allocated but not compiled yet.
    queue: Vec<(NodeId, &'a str, &'a Value)>,
    /// `$ref`-with-siblings nodes: node, target, siblings.
    overlays: HashMap<NodeId, (NodeId, Node)>,
    /// Node standing for `#` (the root of the current entry point).
    root: Option<NodeId>,
}

impl<'a> Compiler<'a> {
    pub(crate) fn new(definitions: &'a Map<String, Value>) -> Self {
        Compiler {
            definitions,
            nodes: vec![Node::any()],
            names: HashMap::new(),
            queue: Vec::new(),
            overlays: HashMap::new(),
            root: None,
        }
    }

    /// Compiles an inline entry-point schema.
    pub(crate) fn add_root(&mut self, schema: &'a Value) -> Result<NodeId, SchemaError> {
        if let Value::Object(object) = schema
            && let Some(reference) = reference_of(object)
            && !has_siblings(object)
        {
            let id = self.resolve_ref(reference, "#")?;
            self.drain()?;
            return Ok(id);
        }
        let id = self.alloc();
        self.root = Some(id);
        self.fill(id, schema, "#")?;
        self.drain()?;
        Ok(id)
    }

    /// Compiles the named definition (and what it references).
    pub(crate) fn add_definition(&mut self, name: &str) -> Result<NodeId, SchemaError> {
        let id = self.definition(name, name)?;
        self.drain()?;
        Ok(id)
    }

    /// Resolves overlays and returns the registry.
    pub(crate) fn finish(mut self) -> Result<Registry, SchemaError> {
        let pending: Vec<NodeId> = self.overlays.keys().copied().collect();
        for id in pending {
            self.resolve_overlay(id, 0)?;
        }
        Ok(Registry {
            nodes: self.nodes,
            names: self.names,
        })
    }

    fn resolve_overlay(&mut self, id: NodeId, depth: usize) -> Result<(), SchemaError> {
        let Some((target, over)) = self.overlays.remove(&id) else {
            return Ok(());
        };
        if depth > MAX_OVERLAY_DEPTH {
            return Err(invalid("#", "reference chain too deep or cyclic"));
        }
        self.resolve_overlay(target, depth + 1)?;
        let mut node = self.nodes[target as usize].clone();
        let name = node.name.take();
        node.overlay(over);
        let slot = &mut self.nodes[id as usize];
        node.name = slot.name.take().or(name);
        *slot = node;
        Ok(())
    }

    fn alloc(&mut self) -> NodeId {
        let id = NodeId::try_from(self.nodes.len()).unwrap_or(NodeId::MAX);
        self.nodes.push(Node::default());
        id
    }

    fn drain(&mut self) -> Result<(), SchemaError> {
        while let Some((id, name, schema)) = self.queue.pop() {
            self.nodes[id as usize].name = Some(name.into());
            self.fill(id, schema, name)?;
            if self.nodes[id as usize].name.is_none() {
                self.nodes[id as usize].name = Some(name.into());
            }
        }
        Ok(())
    }

    /// The node of a definition, allocating (and queueing) it on first use.
    fn definition(&mut self, name: &str, reference: &str) -> Result<NodeId, SchemaError> {
        if let Some(id) = self.names.get(name) {
            return Ok(*id);
        }
        let Some((key, schema)) = self.definitions.get_key_value(name) else {
            return Err(SchemaError::UnresolvedRef(reference.to_owned()));
        };
        let id = self.alloc();
        self.names.insert(name.into(), id);
        self.queue.push((id, key.as_str(), schema));
        Ok(id)
    }

    fn resolve_ref(&mut self, reference: &str, path: &str) -> Result<NodeId, SchemaError> {
        if reference == "#" {
            return self
                .root
                .ok_or_else(|| SchemaError::UnresolvedRef(reference.to_owned()));
        }
        let name = ["#/components/schemas/", "#/definitions/", "#/$defs/"]
            .iter()
            .find_map(|prefix| reference.strip_prefix(prefix))
            .ok_or_else(|| invalid(path, &format!("unsupported reference {reference}")))?;
        if name.contains('~') {
            let decoded = name.replace("~1", "/").replace("~0", "~");
            self.definition(&decoded, reference)
        } else {
            self.definition(name, reference)
        }
    }

    /// Compiles an inline schema, returning a fresh node or the target of a bare `$ref`.
    fn compile(&mut self, schema: &'a Value, path: &str) -> Result<NodeId, SchemaError> {
        match schema {
            Value::Bool(true) => Ok(ANY),
            Value::Bool(false) => {
                let id = self.alloc();
                self.nodes[id as usize].not = Some(ANY);
                Ok(id)
            }
            Value::Object(object) => {
                if let Some(reference) = reference_of(object)
                    && !has_siblings(object)
                {
                    return self.resolve_ref(reference, path);
                }
                let id = self.alloc();
                self.fill(id, schema, path)?;
                Ok(id)
            }
            _ => Err(invalid(path, "schema must be an object or a boolean")),
        }
    }

    /// Compiles `schema` into the already allocated node `id`.
    fn fill(&mut self, id: NodeId, schema: &'a Value, path: &str) -> Result<(), SchemaError> {
        let object = match schema {
            Value::Object(object) => object,
            Value::Bool(true) => {
                self.nodes[id as usize] = Node::any();
                return Ok(());
            }
            Value::Bool(false) => {
                self.nodes[id as usize].not = Some(ANY);
                return Ok(());
            }
            _ => return Err(invalid(path, "schema must be an object or a boolean")),
        };
        let node = self.node_from(object, path)?;
        if let Some(reference) = reference_of(object) {
            let target = self.resolve_ref(reference, path)?;
            self.overlays.insert(id, (target, node));
        } else {
            let slot = &mut self.nodes[id as usize];
            let name = slot.name.take();
            *slot = node;
            slot.name = name;
        }
        Ok(())
    }

    /// Reads the keywords of one schema object (ignoring its `$ref`, if any).
    #[allow(clippy::too_many_lines)] // one match arm per schema keyword: a flat table reads best
    fn node_from(
        &mut self,
        object: &'a Map<String, Value>,
        path: &str,
    ) -> Result<Node, SchemaError> {
        let mut node = Node::default();
        let wrapped_ref = wrapped_ref(object).is_some();
        for (key, value) in object {
            let at = || format!("{path}/{key}");
            match key.as_str() {
                "type" => match value {
                    Value::String(name) => node.types.insert(type_named(name, &at())?),
                    Value::Array(names) => {
                        for name in names {
                            let name = name
                                .as_str()
                                .ok_or_else(|| invalid(&at(), "type names must be strings"))?;
                            node.types.insert(type_named(name, &at())?);
                        }
                    }
                    _ => return Err(invalid(&at(), "must be a string or an array")),
                },
                "nullable" => node.nullable = bool_of(value, &at())?,
                "x-kubernetes-int-or-string" => node.int_or_string = bool_of(value, &at())?,
                "x-kubernetes-preserve-unknown-fields" => {
                    node.preserve_unknown = bool_of(value, &at())?;
                }
                "x-kubernetes-embedded-resource" => node.embedded_resource = bool_of(value, &at())?,
                "properties" => {
                    let properties = value
                        .as_object()
                        .ok_or_else(|| invalid(&at(), "must be an object"))?;
                    node.properties.reserve(properties.len());
                    for (name, schema) in properties {
                        let child = self.compile(schema, &format!("{}/{name}", at()))?;
                        node.properties.push((name.as_str().into(), child));
                    }
                    node.properties.sort_by(|a, b| a.0.cmp(&b.0));
                }
                "additionalProperties" => {
                    node.additional = match value {
                        Value::Bool(false) => Additional::Forbidden,
                        other => Additional::Schema(self.compile(other, &at())?),
                    };
                }
                "items" => {
                    let schema = match value {
                        // OpenAPI v2 tuple form: validate with the first schema.
                        Value::Array(list) => list.first().unwrap_or(&Value::Bool(true)),
                        other => other,
                    };
                    node.items = Some(self.compile(schema, &at())?);
                }
                "required" => {
                    node.required = strings_of(value, &at())?
                        .into_iter()
                        .map(Into::into)
                        .collect();
                }
                "enum" => {
                    node.enumeration.clone_from(
                        value
                            .as_array()
                            .ok_or_else(|| invalid(&at(), "must be an array"))?,
                    );
                }
                "const" => node.enumeration = vec![value.clone()],
                "pattern" => {
                    let source = value
                        .as_str()
                        .ok_or_else(|| invalid(&at(), "must be a string"))?;
                    let regex = Regex::new(source)
                        .map_err(|e| invalid(&at(), &format!("invalid pattern: {e}")))?;
                    node.pattern = Some(regex);
                }
                "minimum" => node.minimum = Some(number_of(value, &at())?),
                "maximum" => node.maximum = Some(number_of(value, &at())?),
                "exclusiveMinimum" => match value {
                    Value::Bool(flag) => node.exclusive_minimum = *flag,
                    other => {
                        node.minimum = Some(number_of(other, &at())?);
                        node.exclusive_minimum = true;
                    }
                },
                "exclusiveMaximum" => match value {
                    Value::Bool(flag) => node.exclusive_maximum = *flag,
                    other => {
                        node.maximum = Some(number_of(other, &at())?);
                        node.exclusive_maximum = true;
                    }
                },
                "multipleOf" => node.multiple_of = Some(number_of(value, &at())?),
                "minLength" => node.min_length = Some(count_of(value, &at())?),
                "maxLength" => node.max_length = Some(count_of(value, &at())?),
                "minItems" => node.min_items = Some(count_of(value, &at())?),
                "maxItems" => node.max_items = Some(count_of(value, &at())?),
                "minProperties" => node.min_properties = Some(count_of(value, &at())?),
                "maxProperties" => node.max_properties = Some(count_of(value, &at())?),
                "uniqueItems" => node.unique_items = bool_of(value, &at())?,
                "format" => {
                    let format = value
                        .as_str()
                        .ok_or_else(|| invalid(&at(), "must be a string"))?;
                    if format == "int-or-string" {
                        node.int_or_string = true;
                    } else {
                        node.format = Some(format.into());
                    }
                }
                "default" => node.default = Some(value.clone()),
                "x-kubernetes-list-type" => node.list_type = Some(string_of(value, &at())?.into()),
                "x-kubernetes-list-map-keys" => node.list_map_keys = strings_of(value, &at())?,
                "x-kubernetes-map-type" => node.map_type = Some(string_of(value, &at())?.into()),
                "x-kubernetes-patch-strategy" => {
                    node.patch_strategy = Some(string_of(value, &at())?.into());
                }
                "x-kubernetes-patch-merge-key" => {
                    node.patch_merge_key = Some(string_of(value, &at())?.into());
                }
                "allOf" if !wrapped_ref => node.all_of = self.compile_list(value, &at())?,
                "anyOf" => node.any_of = self.compile_list(value, &at())?,
                "oneOf" => node.one_of = self.compile_list(value, &at())?,
                "not" => node.not = Some(self.compile(value, &at())?),
                _ => {}
            }
        }
        if node.int_or_string {
            // The declared type of an int-or-string (often `string`) is not a constraint.
            node.types = Types::default();
        }
        if node.types.contains(Types::NULL) {
            node.nullable = true;
            node.types.remove(Types::NULL);
        }
        Ok(node)
    }

    fn compile_list(&mut self, value: &'a Value, path: &str) -> Result<Vec<NodeId>, SchemaError> {
        let list = value
            .as_array()
            .ok_or_else(|| invalid(path, "must be an array"))?;
        list.iter()
            .enumerate()
            .map(|(i, schema)| self.compile(schema, &format!("{path}/{i}")))
            .collect()
    }
}

/// The `$ref` of a schema object, direct or through a one-element `allOf` wrapper.
fn reference_of(object: &Map<String, Value>) -> Option<&str> {
    object
        .get("$ref")
        .and_then(Value::as_str)
        .or_else(|| wrapped_ref(object))
}

/// `allOf: [{$ref: X, ...annotations}]` → X.
fn wrapped_ref(object: &Map<String, Value>) -> Option<&str> {
    if object.contains_key("$ref") {
        return None;
    }
    let [Value::Object(inner)] = object.get("allOf")?.as_array()?.as_slice() else {
        return None;
    };
    let reference = inner.get("$ref")?.as_str()?;
    inner
        .keys()
        .all(|k| k == "$ref" || ANNOTATIONS.contains(&k.as_str()))
        .then_some(reference)
}

/// Whether a `$ref` object has keywords beyond the reference and annotations.
fn has_siblings(object: &Map<String, Value>) -> bool {
    let direct = object.contains_key("$ref");
    object.keys().any(|k| match k.as_str() {
        "$ref" => false,
        // The wrapper itself, unless the object also has a direct `$ref`.
        "allOf" => direct,
        other => !ANNOTATIONS.contains(&other),
    })
}

fn invalid(path: &str, message: &str) -> SchemaError {
    SchemaError::Invalid {
        path: path.to_owned(),
        message: message.to_owned(),
    }
}

fn type_named(name: &str, path: &str) -> Result<Types, SchemaError> {
    Types::from_name(name).ok_or_else(|| invalid(path, &format!("unknown type {name:?}")))
}

fn bool_of(value: &Value, path: &str) -> Result<bool, SchemaError> {
    value
        .as_bool()
        .ok_or_else(|| invalid(path, "must be a boolean"))
}

fn number_of(value: &Value, path: &str) -> Result<f64, SchemaError> {
    value
        .as_f64()
        .ok_or_else(|| invalid(path, "must be a number"))
}

fn count_of(value: &Value, path: &str) -> Result<u64, SchemaError> {
    value
        .as_u64()
        .ok_or_else(|| invalid(path, "must be a non-negative integer"))
}

fn string_of<'v>(value: &'v Value, path: &str) -> Result<&'v str, SchemaError> {
    value
        .as_str()
        .ok_or_else(|| invalid(path, "must be a string"))
}

fn strings_of(value: &Value, path: &str) -> Result<Vec<String>, SchemaError> {
    value
        .as_array()
        .ok_or_else(|| invalid(path, "must be an array of strings"))?
        .iter()
        .map(|v| string_of(v, path).map(str::to_owned))
        .collect()
}

/// The reference of a schema that is only a `$ref` (plus annotations).
pub(crate) fn bare_reference(schema: &Value) -> Option<&str> {
    let Value::Object(object) = schema else {
        return None;
    };
    let reference = reference_of(object)?;
    (!has_siblings(object)).then_some(reference)
}
