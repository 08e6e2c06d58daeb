//! Kubernetes structural schemas: navigation, patch metadata, validation, defaulting and pruning.
//!
//! A [`Schema`] is a node of an OpenAPI v3 (or v2) schema with every `$ref` resolved. Nodes are
//! compiled once into a shared registry, so a `Schema` is an `Arc` plus an index: cheap to
//! clone, and navigation ([`Schema::property`], [`Schema::items`], [`Schema::child`]) returns
//! owned handles. Recursive schemas (JSONSchemaProps) are just cycles in that registry.
//!
//! [`builtin`] holds the table of built-in kinds the embedded control plane serves and their
//! schemas, generated from k8s-openapi with the strategic-merge-patch and list-type extensions
//! of the Kubernetes OpenAPI document injected.
//!
//! # Expected flow
//!
//! For a write, the API server runs, in this order (as Kubernetes does for custom resources):
//! [`Schema::prune`] (report the pruned paths as unknown fields under
//! `fieldValidation=Strict`), [`Schema::apply_defaults`], then [`Schema::validate`].
//!
//! ```no_run
//! use serde_json::json;
//!
//! let schema = capstan_schema::builtin::schema("apps", "v1", "Deployment").expect("built in");
//! let mut deployment = json!({
//!     "apiVersion": "apps/v1", "kind": "Deployment",
//!     "metadata": {"name": "web"},
//!     "spec": {"replicas": "two", "bogus": 1},
//! });
//! let unknown = schema.prune(&mut deployment);
//! assert_eq!(unknown, ["spec.bogus"]);
//! schema.apply_defaults(&mut deployment);
//! for error in schema.validate(&deployment) {
//!     eprintln!("{error}"); // spec.replicas: Invalid value: "string": ...
//! }
//! let containers = schema.property("spec").and_then(|s| s.property("template"));
//! # let _ = containers;
//! ```
//!
//! # Guarantees
//!
//! * Validation and pruning borrow the value and never clone it; paths are rendered only for
//!   errors and pruned fields.
//! * No function panics on malformed values; malformed schemas are rejected by
//!   [`Schema::from_openapi`] with a [`SchemaError`].
//!
//! # Errors
//!
//! [`Schema::from_openapi`] fails on unresolvable `$ref`s and keywords of the wrong shape
//! (including a `pattern` that is not a valid regular expression).

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

pub mod builtin;
mod compile;
mod error;
mod path;
mod prune;
mod validate;

use compile::{Additional, Compiler, NodeId, Registry};
pub use error::{FieldError, FieldErrorKind, SchemaError};

/// A node of a structural (OpenAPI v3) schema, with `$ref`s resolved.
/// Cheap to clone (an `Arc` to the shared registry plus a node id).
#[derive(Clone)]
pub struct Schema {
    registry: Arc<Registry>,
    id: NodeId,
}

/// How a list merges under strategic merge patch and server-side apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListType {
    /// Replaced whole (the default).
    Atomic,
    /// A set of scalars (`x-kubernetes-list-type: set`, or patch strategy `merge` on scalars).
    Set,
    /// An associative list keyed by these fields (`x-kubernetes-list-map-keys`, or the patch merge key).
    Map(Vec<String>),
}

/// How a map (object) merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapType {
    /// Each field is owned and merged separately (the default).
    Granular,
    /// The object is replaced whole (`x-kubernetes-map-type: atomic`).
    Atomic,
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let node = self.node();
        f.debug_struct("Schema")
            .field("id", &self.id)
            .field("name", &node.name)
            .field("types", &node.types.describe())
            .field("properties", &node.properties.len())
            .finish_non_exhaustive()
    }
}

impl Schema {
    /// Builds a schema from an OpenAPI v3 (or v2) JSON schema whose `$ref`s
    /// (`#/components/schemas/X` or `#/definitions/X`) resolve in `definitions`.
    ///
    /// Everything reachable from `schema` is compiled now; `allOf: [{$ref}]` wrappers and
    /// `$ref`s with annotation siblings resolve transparently, and `$ref`s with meaningful
    /// siblings (`default`, `nullable`, `x-kubernetes-*`) become the target with those laid over.
    /// A reference into [`builtin::definitions`] reuses the shared built-in registry.
    pub fn from_openapi(
        schema: &Value,
        definitions: &Map<String, Value>,
    ) -> Result<Schema, SchemaError> {
        if builtin::is_builtin(definitions)
            && let Some(found) = builtin::lookup_reference(schema)
        {
            return Ok(found);
        }
        let mut compiler = Compiler::new(definitions);
        let id = compiler.add_root(schema)?;
        Ok(Schema {
            registry: Arc::new(compiler.finish()?),
            id,
        })
    }

    /// A schema that accepts anything and preserves unknown fields.
    pub fn any() -> Schema {
        static ANY: OnceLock<Arc<Registry>> = OnceLock::new();
        Schema {
            registry: Arc::clone(ANY.get_or_init(|| Arc::new(Registry::any_only()))),
            id: compile::ANY,
        }
    }

    pub(crate) fn from_registry(registry: Arc<Registry>, id: NodeId) -> Schema {
        Schema { registry, id }
    }

    fn node(&self) -> &compile::Node {
        self.registry.node(self.id)
    }

    fn at(&self, id: NodeId) -> Schema {
        Schema {
            registry: Arc::clone(&self.registry),
            id,
        }
    }

    /// The OpenAPI definition this node came from, e.g. `io.k8s.api.core.v1.Container`.
    pub fn definition_name(&self) -> Option<&str> {
        self.node().name.as_deref()
    }

    /// The `default` of this node.
    pub fn default_value(&self) -> Option<&Value> {
        self.node().default.as_ref()
    }

    /// Names of the declared properties, sorted.
    pub fn property_names(&self) -> impl Iterator<Item = &str> {
        self.node().properties.iter().map(|(name, _)| name.as_ref())
    }

    /// Whether the node is `x-kubernetes-int-or-string` (IntOrString, Quantity).
    pub fn is_int_or_string(&self) -> bool {
        self.node().int_or_string
    }

    /// Whether the node is `x-kubernetes-embedded-resource`.
    pub fn is_embedded_resource(&self) -> bool {
        self.node().embedded_resource
    }

    /// The declared property `name`.
    pub fn property(&self, name: &str) -> Option<Schema> {
        self.node().property(name).map(|id| self.at(id))
    }

    /// The schema of list items; for a preserving node without `items`, [`Schema::any`].
    pub fn items(&self) -> Option<Schema> {
        let node = self.node();
        match node.items {
            Some(id) => Some(self.at(id)),
            None if node.preserve_unknown => Some(self.at(compile::ANY)),
            None => None,
        }
    }

    /// The schema of map values (`additionalProperties`; `true` gives [`Schema::any`]).
    pub fn additional_properties(&self) -> Option<Schema> {
        match self.node().additional {
            Additional::Schema(id) => Some(self.at(id)),
            Additional::Unspecified | Additional::Forbidden => None,
        }
    }

    /// `property(name)` or else `additional_properties()`, or `any()` when unknown fields are preserved.
    pub fn child(&self, name: &str) -> Option<Schema> {
        self.property(name)
            .or_else(|| self.additional_properties())
            .or_else(|| self.node().preserve_unknown.then(|| self.at(compile::ANY)))
    }

    /// How this list merges: `x-kubernetes-list-type` (`map` keyed by
    /// `x-kubernetes-list-map-keys`), else patch strategy `merge` (keyed by
    /// `x-kubernetes-patch-merge-key`, or a set when items are scalars), else atomic.
    pub fn list_type(&self) -> ListType {
        let node = self.node();
        node.list_type(node.items.map(|id| self.registry.node(id)))
    }

    /// How this map merges: `x-kubernetes-map-type: atomic`, else granular.
    pub fn map_type(&self) -> MapType {
        self.node().map_type()
    }

    /// `x-kubernetes-patch-strategy` (e.g. `merge`, `retainKeys`, `merge,retainKeys`, `replace`).
    pub fn patch_strategy(&self) -> Option<String> {
        self.node().patch_strategy.as_deref().map(str::to_owned)
    }

    /// `x-kubernetes-patch-merge-key`.
    pub fn patch_merge_key(&self) -> Option<String> {
        self.node().patch_merge_key.as_deref().map(str::to_owned)
    }

    /// `x-kubernetes-preserve-unknown-fields`.
    pub fn preserves_unknown_fields(&self) -> bool {
        self.node().preserve_unknown
    }

    /// Validates a whole value; errors carry field paths relative to this node.
    ///
    /// `null` in a property that is not `nullable` counts as absent (the API server prunes such
    /// nulls before validating); list-map entries with equal keys and repeated set members
    /// are reported as `Duplicate value`.
    pub fn validate(&self, value: &Value) -> Vec<FieldError> {
        validate::validate(&self.registry, self.id, value)
    }

    /// Applies `default`s of the schema to missing fields (and non-nullable `null`s),
    /// recursively through properties, list items and `additionalProperties`.
    pub fn apply_defaults(&self, value: &mut Value) {
        prune::apply_defaults(&self.registry, self.id, value);
    }

    /// Removes fields the schema does not know (unless preserved); returns their paths
    /// (`spec.foo`, `spec.containers[0].bogus`), in document order.
    ///
    /// Rules: a field is kept when declared, when the node has an `additionalProperties`
    /// schema (which then prunes it), or when the node preserves unknown fields; declared
    /// properties below a preserving node are still pruned. This node is treated as a
    /// resource root: here and at every `x-kubernetes-embedded-resource` object, `apiVersion`
    /// and `kind` are kept and `metadata` is pruned against `ObjectMeta`, whatever the schema
    /// declares for it. A `null` in a declared property that is neither `nullable` nor
    /// defaulted is dropped silently (it is not reported as unknown).
    pub fn prune(&self, value: &mut Value) -> Vec<String> {
        prune::prune(&self.registry, self.id, value)
    }
}

#[cfg(test)]
mod tests;
