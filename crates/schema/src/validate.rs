//! Structural validation in the style of the Kubernetes API server (kube-openapi's validator
//! plus apiextensions' conversion to `field.Error`s).
//!
//! The walk borrows the value, keeps the field path as stack frames and renders strings only
//! for errors, so validating a valid object allocates nothing beyond list-key bookkeeping.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::compile::{Additional, Node, NodeId, Registry, Types};
use crate::path::Path;
use crate::{FieldError, FieldErrorKind};

/// The resource.Quantity syntax, as Kubernetes words it in its error message.
const QUANTITY_PATTERN: &str = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// Longest rendering of a value inside an error message.
const MAX_VALUE_CHARS: usize = 256;

pub(crate) fn validate(registry: &Registry, id: NodeId, value: &Value) -> Vec<FieldError> {
    let mut validator = Validator {
        registry,
        errors: Vec::new(),
    };
    validator.value(id, value, &Path::Root);
    validator.errors
}

struct Validator<'r> {
    registry: &'r Registry,
    errors: Vec<FieldError>,
}

impl Validator<'_> {
    fn push(&mut self, path: &Path<'_>, kind: FieldErrorKind, message: String) {
        self.errors.push(FieldError {
            field: path.to_string(),
            kind,
            message,
        });
    }

    /// `Invalid value: <value>: <path> in body <detail>`.
    fn invalid(&mut self, path: &Path<'_>, shown: &str, detail: &str) {
        let message = format!("Invalid value: {shown}: {} {detail}", subject(path));
        self.push(path, FieldErrorKind::Invalid, message);
    }

    fn value(&mut self, id: NodeId, value: &Value, path: &Path<'_>) {
        let registry = self.registry;
        let node = registry.node(id);
        if value.is_null() {
            if !node.nullable && (!node.types.is_empty() || node.int_or_string) {
                let expected = expected_types(node);
                self.invalid(
                    path,
                    "\"null\"",
                    &format!("must be of type {expected}: \"null\""),
                );
            }
            return;
        }
        if !type_matches(node, value) {
            let actual = type_name(value);
            let expected = expected_types(node);
            self.invalid(
                path,
                &format!("\"{actual}\""),
                &format!("must be of type {expected}: \"{actual}\""),
            );
            return;
        }
        if !node.enumeration.is_empty() && !node.enumeration.contains(value) {
            let mut message = format!("Unsupported value: {}: supported values: ", render(value));
            for (i, allowed) in node.enumeration.iter().enumerate() {
                if i > 0 {
                    message.push_str(", ");
                }
                message.push_str(&render(allowed));
            }
            self.push(path, FieldErrorKind::NotSupported, message);
        }
        match value {
            Value::String(text) => self.string(node, text, path),
            Value::Number(_) => self.number(node, value, path),
            Value::Array(items) => self.array(node, items, path),
            Value::Object(map) => self.object(node, map, path),
            Value::Bool(_) | Value::Null => {}
        }
        self.junctors(node, value, path);
    }

    fn string(&mut self, node: &Node, text: &str, path: &Path<'_>) {
        if let Some(pattern) = &node.pattern
            && !pattern.is_match(text)
        {
            self.invalid(
                path,
                &render_str(text),
                &format!("should match '{}'", pattern.as_str()),
            );
        }
        if node.min_length.is_some() || node.max_length.is_some() {
            let length = text.chars().count() as u64;
            if let Some(min) = node.min_length
                && length < min
            {
                self.invalid(
                    path,
                    &render_str(text),
                    &format!("should be at least {min} chars long"),
                );
            }
            if let Some(max) = node.max_length
                && length > max
            {
                self.push(
                    path,
                    FieldErrorKind::TooLong,
                    format!("Too long: may not be longer than {max}"),
                );
            }
        }
        if let Some(format) = node.format.as_deref()
            && !string_format_ok(format, text)
        {
            if format == "quantity" {
                let detail =
                    format!("quantities must match the regular expression '{QUANTITY_PATTERN}'");
                let message = format!("Invalid value: {}: {detail}", render_str(text));
                self.push(path, FieldErrorKind::Invalid, message);
                return;
            }
            self.invalid(
                path,
                &render_str(text),
                &format!("must be of type {format}: {}", render_str(text)),
            );
        }
    }

    fn number(&mut self, node: &Node, value: &Value, path: &Path<'_>) {
        let Some(number) = value.as_f64() else { return };
        if let Some(min) = node.minimum {
            if node.exclusive_minimum && number <= min {
                self.invalid(
                    path,
                    &render(value),
                    &format!("should be greater than {}", render_f64(min)),
                );
            } else if number < min {
                self.invalid(
                    path,
                    &render(value),
                    &format!("should be greater than or equal to {}", render_f64(min)),
                );
            }
        }
        if let Some(max) = node.maximum {
            if node.exclusive_maximum && number >= max {
                self.invalid(
                    path,
                    &render(value),
                    &format!("should be less than {}", render_f64(max)),
                );
            } else if number > max {
                self.invalid(
                    path,
                    &render(value),
                    &format!("should be less than or equal to {}", render_f64(max)),
                );
            }
        }
        if let Some(factor) = node.multiple_of
            && factor > 0.0
        {
            let quotient = number / factor;
            if (quotient - quotient.round()).abs() > 1e-9 {
                self.invalid(
                    path,
                    &render(value),
                    &format!("should be a multiple of {}", render_f64(factor)),
                );
            }
        }
        let in_range = match node.format.as_deref() {
            Some("int32") => value.as_i64().is_none_or(|n| i32::try_from(n).is_ok()),
            Some("int64") => value.is_i64() || value.is_f64(),
            _ => true,
        };
        if !in_range {
            let format = node.format.as_deref().unwrap_or_default();
            self.invalid(
                path,
                &render(value),
                &format!("must be of type {format}: \"{}\"", render(value)),
            );
        }
    }

    fn array(&mut self, node: &Node, items: &[Value], path: &Path<'_>) {
        let count = items.len() as u64;
        if let Some(min) = node.min_items
            && count < min
        {
            self.invalid(
                path,
                &count.to_string(),
                &format!("should have at least {min} items"),
            );
        }
        if let Some(max) = node.max_items
            && count > max
        {
            self.push(
                path,
                FieldErrorKind::TooMany,
                format!("Too many: {count}: must have at most {max} items"),
            );
        }
        // Only explicit list types are enforced: patch-strategy merge keys are merge hints
        // (Kubernetes tolerates duplicate env names, for one).
        match node.list_type.as_deref() {
            Some("set") => self.unique_values(items, path),
            Some("map") if !node.list_map_keys.is_empty() => {
                self.unique_keys(items, &node.list_map_keys, path);
            }
            _ if node.unique_items => self.unique_values(items, path),
            _ => {}
        }
        if let Some(item) = node.items {
            for (index, value) in items.iter().enumerate() {
                self.value(item, value, &Path::Index(path, index));
            }
        }
    }

    /// Set semantics: no value may repeat. Quadratic on purpose: sets are small and this
    /// needs no hashing of JSON values.
    fn unique_values(&mut self, items: &[Value], path: &Path<'_>) {
        for (index, value) in items.iter().enumerate() {
            if items[..index].contains(value) {
                let message = format!("Duplicate value: {}", render(value));
                self.push(&Path::Index(path, index), FieldErrorKind::Invalid, message);
            }
        }
    }

    /// Map-list semantics: the key fields identify an entry; no two entries may share them.
    fn unique_keys(&mut self, items: &[Value], keys: &[String], path: &Path<'_>) {
        let mut seen: HashSet<Vec<&Value>> = HashSet::with_capacity(items.len());
        let null = Value::Null;
        for (index, value) in items.iter().enumerate() {
            let Value::Object(map) = value else { continue };
            let key: Vec<&Value> = keys.iter().map(|k| map.get(k).unwrap_or(&null)).collect();
            if seen.contains(&key) {
                let mut shown = Map::new();
                for (name, part) in keys.iter().zip(&key) {
                    if !part.is_null() {
                        shown.insert(name.clone(), (*part).clone());
                    }
                }
                let message = format!("Duplicate value: {}", render(&Value::Object(shown)));
                self.push(&Path::Index(path, index), FieldErrorKind::Invalid, message);
            } else {
                seen.insert(key);
            }
        }
    }

    fn object(&mut self, node: &Node, map: &Map<String, Value>, path: &Path<'_>) {
        for name in &node.required {
            if map
                .get(name.as_ref())
                .is_none_or(|v| v.is_null() && !self.nullable_property(node, name))
            {
                self.push(
                    &Path::Field(path, name),
                    FieldErrorKind::Required,
                    "Required value".to_owned(),
                );
            }
        }
        let count = map.len() as u64;
        if let Some(min) = node.min_properties
            && count < min
        {
            self.invalid(
                path,
                &count.to_string(),
                &format!("should have at least {min} properties"),
            );
        }
        if let Some(max) = node.max_properties
            && count > max
        {
            self.push(
                path,
                FieldErrorKind::TooMany,
                format!("Too many: {count}: must have at most {max} items"),
            );
        }
        if node.embedded_resource {
            for name in ["apiVersion", "kind"] {
                if map
                    .get(name)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    self.push(
                        &Path::Field(path, name),
                        FieldErrorKind::Required,
                        "Required value: must not be empty".to_owned(),
                    );
                }
            }
        }
        for (key, value) in map {
            if let Some(child) = node.property(key) {
                if value.is_null() && !self.registry.node(child).nullable {
                    // Pruned before validation by the API server; `required` reported it above.
                    continue;
                }
                self.value(child, value, &Path::Field(path, key));
            } else {
                match node.additional {
                    Additional::Schema(child) => self.value(child, value, &Path::Key(path, key)),
                    Additional::Forbidden => {
                        let field = Path::Field(path, key);
                        let message =
                            format!("Forbidden: {} is a forbidden property", subject(&field));
                        self.push(&field, FieldErrorKind::Forbidden, message);
                    }
                    Additional::Unspecified => {}
                }
            }
        }
    }

    fn nullable_property(&self, node: &Node, name: &str) -> bool {
        node.property(name)
            .is_some_and(|id| self.registry.node(id).nullable)
    }

    /// `allOf`, `anyOf`, `oneOf`, `not` as value validations.
    fn junctors(&mut self, node: &Node, value: &Value, path: &Path<'_>) {
        for id in &node.all_of {
            self.value(*id, value, path);
        }
        if !node.any_of.is_empty() && !node.any_of.iter().any(|id| self.passes(*id, value)) {
            self.invalid(
                path,
                &render(value),
                "must validate at least one schema (anyOf)",
            );
        }
        if !node.one_of.is_empty() {
            let passing = node
                .one_of
                .iter()
                .filter(|id| self.passes(**id, value))
                .count();
            if passing != 1 {
                self.invalid(
                    path,
                    &render(value),
                    "must validate one and only one schema (oneOf)",
                );
            }
        }
        if let Some(id) = node.not
            && self.passes(id, value)
        {
            self.invalid(path, &render(value), "should not validate the given schema");
        }
    }

    fn passes(&self, id: NodeId, value: &Value) -> bool {
        let mut inner = Validator {
            registry: self.registry,
            errors: Vec::new(),
        };
        inner.value(id, value, &Path::Root);
        inner.errors.is_empty()
    }
}

/// `spec.replicas in body`, or `body` at the root.
fn subject(path: &Path<'_>) -> String {
    if path.is_root() {
        "body".to_owned()
    } else {
        format!("{path} in body")
    }
}

fn type_matches(node: &Node, value: &Value) -> bool {
    if node.int_or_string {
        let any_number = node.format.as_deref() == Some("quantity");
        return value.is_string() || is_integer(value) || (any_number && value.is_number());
    }
    let types = node.types;
    if types.is_empty() {
        return true;
    }
    match value {
        Value::Null => node.nullable,
        Value::Bool(_) => types.contains(Types::BOOLEAN),
        Value::Number(_) => {
            types.contains(Types::NUMBER) || (types.contains(Types::INTEGER) && is_integer(value))
        }
        Value::String(_) => types.contains(Types::STRING),
        Value::Array(_) => types.contains(Types::ARRAY),
        Value::Object(_) => types.contains(Types::OBJECT),
    }
}

fn is_integer(value: &Value) -> bool {
    match value {
        Value::Number(number) => {
            number.is_i64()
                || number.is_u64()
                || number
                    .as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.is_finite())
        }
        _ => false,
    }
}

fn expected_types(node: &Node) -> String {
    if node.int_or_string {
        "integer,string".to_owned()
    } else {
        node.types.describe()
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) if is_integer(value) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// JSON rendering of a value for messages, truncated.
fn render(value: &Value) -> String {
    let mut text = value.to_string();
    if text.len() > MAX_VALUE_CHARS {
        let mut cut = MAX_VALUE_CHARS;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

fn render_str(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_VALUE_CHARS) + 2);
    let _ = write!(
        out,
        "{}",
        Value::String(text.chars().take(MAX_VALUE_CHARS).collect())
    );
    out
}

fn render_f64(number: f64) -> String {
    if number.fract() == 0.0 && number.abs() < 1e15 {
        format!("{}", number as i64)
    } else {
        number.to_string()
    }
}

/// Checks the string formats Kubernetes validates; unknown formats are accepted.
fn string_format_ok(format: &str, text: &str) -> bool {
    static DATE_TIME: OnceLock<Regex> = OnceLock::new();
    static DATE: OnceLock<Regex> = OnceLock::new();
    static UUID: OnceLock<Regex> = OnceLock::new();
    static QUANTITY: OnceLock<Regex> = OnceLock::new();
    match format {
        "date-time" => DATE_TIME
            .get_or_init(|| {
                Regex::new(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
                    .expect("static regex")
            })
            .is_match(text),
        "date" => DATE
            .get_or_init(|| Regex::new(r"^\d{4}-\d{2}-\d{2}$").expect("static regex"))
            .is_match(text),
        "uuid" => UUID
            .get_or_init(|| {
                Regex::new(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
                    .expect("static regex")
            })
            .is_match(text),
        "byte" => is_base64(text),
        "quantity" => QUANTITY
            .get_or_init(|| Regex::new(QUANTITY_PATTERN).expect("static regex"))
            .is_match(text),
        "ipv4" => text.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => text.split_once('/').is_some_and(|(address, bits)| {
            let Ok(bits) = bits.parse::<u8>() else { return false };
            match address.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(_)) => bits <= 32,
                Ok(std::net::IpAddr::V6(_)) => bits <= 128,
                Err(_) => false,
            }
        }),
        _ => true,
    }
}

/// Standard base64 with padding, as Go's `[]byte` JSON decoding requires.
fn is_base64(text: &str) -> bool {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return false;
    }
    let body = text.trim_end_matches('=');
    bytes.len() - body.len() <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}
