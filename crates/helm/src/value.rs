//! The values templates work on: Go's `interface{}` as Helm charts see it.
//!
//! Helm hands templates `map[string]interface{}` trees read from YAML (numbers are `float64`,
//! because Helm's YAML reader goes through JSON), plus a few structs with fields and methods
//! (`.Chart`, `.Release`, `.Capabilities`, `.Files`, Sprig's semver and certificate results).
//! [`Value`] models exactly that: the Go kinds charts can observe (`kindIs`, `typeOf`, `printf
//! "%T"`), maps with Go's reference semantics (`set` on a dict is seen by every holder of it) and
//! [`Object`] for the structs.
//!
//! [`Value`]'s `Display` is Go's `%v` (`fmt.Sprint` of one operand): `<nil>`, `map[a:1 b:2]`,
//! `[a b]`, floats in Go's shortest `%g` form (`1e+06`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::rc::Rc;

/// A Go map as templates see it: string keys, iterated in key order, shared and mutable.
pub type Map = Rc<RefCell<BTreeMap<String, Value>>>;

/// A template value.
#[derive(Clone, Default)]
pub enum Value {
    /// Go's untyped `nil` (a missing map key, a `null` in YAML).
    #[default]
    Nil,
    /// `bool`.
    Bool(bool),
    /// `int`: template number literals, `len`, most counters.
    Int(i64),
    /// `int64`: Sprig's math results (`add`, `mul`, …), `--set` integers.
    Int64(i64),
    /// `float64`: every number read from YAML or JSON values.
    Float(f64),
    /// `string`.
    String(Rc<str>),
    /// `[]byte` (`.Files.GetBytes`).
    Bytes(Rc<[u8]>),
    /// `[]interface{}` (or `[]string`; see [`Value::List`]'s element type in [`ListKind`]).
    List(Rc<Vec<Value>>, ListKind),
    /// `map[string]interface{}`.
    Map(Map),
    /// A struct or pointer with fields and methods.
    Object(Rc<dyn Object>),
}

/// The Go element type of a list, which `typeOf`/`%T` reveal and nothing else depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ListKind {
    /// `[]interface {}`.
    #[default]
    Any,
    /// `[]string` (`splitList`, `keys`, `regexFindAll`, …).
    String,
    /// `[]int` (`until`, `seq` results).
    Int,
}

/// A Go struct (or pointer to one) exposed to templates: `.Chart`, `.Release`, `.Files`,
/// `.Capabilities`, a semver version, a generated certificate.
pub trait Object: fmt::Debug {
    /// The Go type as `%T` and `typeOf` print it, e.g. `*chart.Metadata`.
    fn type_name(&self) -> String;
    /// `reflect.Kind` as `kindOf` prints it: `struct` or `ptr`.
    fn kind_name(&self) -> &'static str {
        "struct"
    }
    /// An exported field (`.Name`); `None` when the struct has no such field.
    fn field(&self, name: &str) -> Option<Value>;
    /// A method call (`.Files.Get "x"`, `.Capabilities.APIVersions.Has "v1"`, or a niladic
    /// `.Version.String`); `None` when there is no such method, `Some(Err(message))` when it
    /// fails (the message is what Go's `error calling NAME: …` would quote).
    fn method(&self, _name: &str, _args: &[Value]) -> Option<Result<Value, String>> {
        None
    }
    /// Go's `%v` of the value (a `String()` method when the type has one).
    fn format(&self) -> String;
    /// What `toYaml`/`toJson`/`toString` see: the struct marshalled through its JSON tags.
    fn to_data(&self) -> Value;
    /// The concrete value, for functions that take their own objects back (`dateModify` of a
    /// `toDate` result, `genSignedCert` of a `genCA` result); `None` when not offered.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

thread_local! {
    /// The one list that stands for a nil `[]interface {}`; see [`Value::nil_list`].
    static NIL_LIST: Rc<Vec<Value>> = Rc::new(Vec::new());
}

impl Value {
    /// A nil `[]interface {}`, as Sprig's `concat` of empty lists and `rest`/`initial` of an
    /// empty list return: empty, printed `[]` and false like any empty list, but marshalled as
    /// `null` by `toJson` and `toYaml` (JSON/YAML writers check [`Value::is_nil_list`]).
    pub fn nil_list() -> Self {
        NIL_LIST.with(|items| Value::List(Rc::clone(items), ListKind::Any))
    }

    /// Whether this is the nil list of [`Value::nil_list`] (not merely an empty one).
    pub fn is_nil_list(&self) -> bool {
        match self {
            Value::List(items, _) => {
                items.is_empty() && NIL_LIST.with(|nil| Rc::ptr_eq(nil, items))
            }
            _ => false,
        }
    }

    /// A string value.
    pub fn str(s: impl AsRef<str>) -> Self {
        Value::String(Rc::from(s.as_ref()))
    }

    /// An `[]interface{}` list.
    pub fn list(items: Vec<Value>) -> Self {
        Value::List(Rc::new(items), ListKind::Any)
    }

    /// A `[]string` list.
    pub fn string_list<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> Self {
        Value::List(
            Rc::new(items.into_iter().map(Value::str).collect()),
            ListKind::String,
        )
    }

    /// A new map holding `entries`.
    pub fn map(entries: BTreeMap<String, Value>) -> Self {
        Value::Map(Rc::new(RefCell::new(entries)))
    }

    /// A new empty map.
    pub fn empty_map() -> Self {
        Value::map(BTreeMap::new())
    }

    /// Whether this is Go's nil.
    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil)
    }

    /// The string, when this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The map, when this is one.
    pub fn as_map(&self) -> Option<&Map> {
        match self {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The list items, when this is a list.
    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(items, _) => Some(items),
            _ => None,
        }
    }

    /// Go template truth (`if`, `with`, `and`, `or`, `not`): false for `false`, zero numbers, nil
    /// and empty strings, lists and maps; structs are always true.
    pub fn truth(&self) -> bool {
        match self {
            Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i) | Value::Int64(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::String(s) => !s.is_empty(),
            Value::Bytes(b) => !b.is_empty(),
            Value::List(items, _) => !items.is_empty(),
            Value::Map(m) => !m.borrow().is_empty(),
            Value::Object(_) => true,
        }
    }

    /// Go's `reflect.Kind` name as Sprig's `kindOf`/`kindIs` use it (`invalid` for nil).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Nil => "invalid",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Int64(_) => "int64",
            Value::Float(_) => "float64",
            Value::String(_) => "string",
            Value::Bytes(_) | Value::List(..) => "slice",
            Value::Map(_) => "map",
            Value::Object(o) => o.kind_name(),
        }
    }

    /// The Go type as `%T` and Sprig's `typeOf`/`typeIs` print it (`<nil>` for nil).
    pub fn type_name(&self) -> String {
        match self {
            Value::Nil => "<nil>".into(),
            Value::Bool(_) => "bool".into(),
            Value::Int(_) => "int".into(),
            Value::Int64(_) => "int64".into(),
            Value::Float(_) => "float64".into(),
            Value::String(_) => "string".into(),
            Value::Bytes(_) => "[]uint8".into(),
            Value::List(_, ListKind::Any) => "[]interface {}".into(),
            Value::List(_, ListKind::String) => "[]string".into(),
            Value::List(_, ListKind::Int) => "[]int".into(),
            Value::Map(_) => "map[string]interface {}".into(),
            Value::Object(o) => o.type_name(),
        }
    }

    /// A deep copy: new maps all the way down (Sprig's `deepCopy`, Helm's per-render values).
    #[must_use]
    pub fn deep_copy(&self) -> Value {
        match self {
            Value::Map(m) => Value::map(
                m.borrow()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.deep_copy()))
                    .collect(),
            ),
            Value::List(items, kind) => {
                Value::List(Rc::new(items.iter().map(Value::deep_copy).collect()), *kind)
            }
            other => other.clone(),
        }
    }

    /// Converts JSON data: integers become `int64`, other numbers `float64`.
    ///
    /// Helm's values are JSON-shaped; use [`Value::from_json_floats`] for values read from YAML
    /// files, where Helm sees every number as `float64`.
    pub fn from_json(json: &serde_json::Value) -> Value {
        Self::convert_json(json, false)
    }

    /// Converts JSON data with every number as `float64` (what Helm's YAML reader produces).
    pub fn from_json_floats(json: &serde_json::Value) -> Value {
        Self::convert_json(json, true)
    }

    fn convert_json(json: &serde_json::Value, floats: bool) -> Value {
        match json {
            serde_json::Value::Null => Value::Nil,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => match (n.as_i64(), floats) {
                (Some(i), false) if !n.is_f64() => Value::Int64(i),
                _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(s) => Value::str(s),
            serde_json::Value::Array(items) => Value::list(
                items
                    .iter()
                    .map(|v| Self::convert_json(v, floats))
                    .collect(),
            ),
            serde_json::Value::Object(map) => Value::map(
                map.iter()
                    .map(|(k, v)| (k.clone(), Self::convert_json(v, floats)))
                    .collect(),
            ),
        }
    }

    /// Converts to JSON data (objects through [`Object::to_data`]); `[]byte` becomes base64 as
    /// Go's `encoding/json` writes it, non-finite floats become `null`.
    pub fn to_json(&self) -> serde_json::Value {
        use base64::Engine as _;
        match self {
            Value::Nil => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(i) | Value::Int64(i) => serde_json::Value::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map_or(serde_json::Value::Null, serde_json::Value::Number),
            Value::String(s) => serde_json::Value::String(s.to_string()),
            Value::Bytes(b) => {
                serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(b))
            }
            Value::List(..) if self.is_nil_list() => serde_json::Value::Null,
            Value::List(items, _) => {
                serde_json::Value::Array(items.iter().map(Value::to_json).collect())
            }
            Value::Map(m) => serde_json::Value::Object(
                m.borrow()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
            Value::Object(o) => o.to_data().to_json(),
        }
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::str(s)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(Rc::from(s))
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::String(s) => write!(f, "{s:?}"),
            Value::Object(o) => write!(f, "{o:?}"),
            other => write!(f, "{other} ({})", other.type_name()),
        }
    }
}

/// Go's `%v`.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Nil => f.write_str("<nil>"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) | Value::Int64(i) => write!(f, "{i}"),
            Value::Float(x) => f.write_str(&format_float_g(*x)),
            Value::String(s) => f.write_str(s),
            Value::Bytes(b) => {
                f.write_char('[')?;
                for (i, byte) in b.iter().enumerate() {
                    if i > 0 {
                        f.write_char(' ')?;
                    }
                    write!(f, "{byte}")?;
                }
                f.write_char(']')
            }
            Value::List(items, _) => {
                f.write_char('[')?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_char(' ')?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_char(']')
            }
            Value::Map(m) => {
                f.write_str("map[")?;
                for (i, (k, v)) in m.borrow().iter().enumerate() {
                    if i > 0 {
                        f.write_char(' ')?;
                    }
                    write!(f, "{k}:{v}")?;
                }
                f.write_char(']')
            }
            Value::Object(o) => f.write_str(&o.format()),
        }
    }
}

/// A float as Go's `%v` (`strconv.FormatFloat(x, 'g', -1, 64)`) writes it: the shortest digits
/// that read back exactly, in exponent form (`1e+06`, `1.5e-05`) when the decimal exponent is
/// below -4 or at least 6.
pub fn format_float_g(x: f64) -> String {
    format_float_shortest(x, -4, 6)
}

/// The shortest round-trip digits of `x`, in exponent form when the decimal exponent is below
/// `low` or at least `high`, else in plain decimal form.
pub fn format_float_shortest(x: f64, low: i32, high: i32) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.2345e8", "-5e-7".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if exp < low || exp >= high {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    } else if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let point = (exp + 1) as usize;
        if digits.len() <= point {
            out.push_str(&digits);
            for _ in digits.len()..point {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_go_does() {
        for (x, want) in [
            (3.0, "3"),
            (0.5, "0.5"),
            (1e6, "1e+06"),
            (123_456.0, "123456"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (-2.25, "-2.25"),
            (1e21, "1e+21"),
            (123_456_789.0, "1.23456789e+08"),
            (f64::INFINITY, "+Inf"),
        ] {
            assert_eq!(Value::Float(x).to_string(), want, "{x}");
        }
    }

    #[test]
    fn maps_and_lists_print_as_go_does() {
        let m = Value::map(BTreeMap::from([
            ("b".to_string(), Value::list(vec![Value::Int(1), Value::Nil])),
            ("a".to_string(), Value::str("x")),
        ]));
        assert_eq!(m.to_string(), "map[a:x b:[1 <nil>]]");
    }
}
