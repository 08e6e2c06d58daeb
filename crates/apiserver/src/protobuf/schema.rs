//! The shape of the generated message table (`table.rs`) and lookups into it.

use super::table::MESSAGES;

/// One protobuf message: its full name (`k8s.io.api.apps.v1.Deployment`), how its JSON form is
/// built and its fields in declaration order.
#[derive(Debug)]
pub(super) struct Message(pub &'static str, pub Shape, pub &'static [Field]);

/// One field: protobuf number, JSON name (empty when inlined), type and cardinality.
#[derive(Debug)]
pub(super) struct Field(pub u32, pub &'static str, pub Ty, pub Card);

/// How a message becomes JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    /// An object of its fields.
    Object,
    /// `metav1.Time` `{seconds, nanos}`: an RFC 3339 string in seconds.
    Time,
    /// `metav1.MicroTime`: an RFC 3339 string in microseconds.
    MicroTime,
    /// `metav1.Duration` `{duration}` in nanoseconds: a Go duration string (`1h2m3s`).
    Duration,
    /// Bytes holding JSON (`FieldsV1`, `runtime.RawExtension`, `apiextensions.JSON`).
    RawJson,
    /// `resource.Quantity` `{string}`: the string.
    Quantity,
    /// `intstr.IntOrString` `{type, intVal, strVal}`: a number or a string.
    IntOrString,
    /// A Go slice type wrapped in a message (`{items}`): the array.
    List,
    /// `JSONSchemaPropsOrArray` / `OrStringArray`: field 1 (a schema) if set, else field 2 (an array).
    SchemaOrArray,
    /// `JSONSchemaPropsOrBool` `{allows, schema}`: the schema if set, else the boolean.
    SchemaOrBool,
}

/// A field's value type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ty {
    Str,
    /// Base64 in JSON.
    Bytes,
    Bool,
    I32,
    I64,
    F64,
    /// Index into [`MESSAGES`].
    Message(u16),
}

/// A field's cardinality, and whether its zero value is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Card {
    /// A Go non-pointer `omitempty` scalar: Go's protobuf encoder always writes it, its JSON encoder
    /// drops the zero value, and so does the decoder.
    Opt,
    /// Kept as decoded: pointers (written only when set), non-`omitempty` scalars and messages.
    One,
    /// A repeated field: a JSON array.
    Rep,
    /// A `map<K, V>` with this key type: a JSON object.
    Map(Ty),
    /// A Go struct embedded with `json:",inline"`: its fields merge into the parent object.
    Inline,
}

/// The message with this full name.
pub(super) fn find(name: &str) -> Option<&'static Message> {
    MESSAGES
        .binary_search_by(|m| m.0.cmp(name))
        .ok()
        .map(|i| &MESSAGES[i])
}

/// The message at `index` (from [`Ty::Message`]); `None` only if the table is inconsistent.
pub(super) fn message(index: u16) -> Option<&'static Message> {
    MESSAGES.get(usize::from(index))
}
