//! Go's builtin template functions that are plain functions of their (already evaluated)
//! arguments: comparisons, `index`, `slice`, `len`, the printers and escapers. `and`, `or` and
//! `call`, which need the executor, live in `exec.rs`.

use std::fmt::Write as _;
use std::rc::Rc;

use crate::value::{ListKind, Value};

/// A builtin function of `text/template`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    And,
    Call,
    Html,
    Index,
    Slice,
    Js,
    Len,
    Not,
    Or,
    Print,
    Printf,
    Println,
    Urlquery,
    Eq,
    Ge,
    Gt,
    Le,
    Lt,
    Ne,
}

/// How many arguments a builtin takes: exactly `n`, or at least `n`.
pub(crate) enum Arity {
    Exactly(usize),
    AtLeast(usize),
}

impl Builtin {
    pub fn from_name(name: &str) -> Option<Builtin> {
        Some(match name {
            "and" => Builtin::And,
            "call" => Builtin::Call,
            "html" => Builtin::Html,
            "index" => Builtin::Index,
            "slice" => Builtin::Slice,
            "js" => Builtin::Js,
            "len" => Builtin::Len,
            "not" => Builtin::Not,
            "or" => Builtin::Or,
            "print" => Builtin::Print,
            "printf" => Builtin::Printf,
            "println" => Builtin::Println,
            "urlquery" => Builtin::Urlquery,
            "eq" => Builtin::Eq,
            "ge" => Builtin::Ge,
            "gt" => Builtin::Gt,
            "le" => Builtin::Le,
            "lt" => Builtin::Lt,
            "ne" => Builtin::Ne,
            _ => return None,
        })
    }

    pub fn arity(self) -> Arity {
        match self {
            Builtin::And
            | Builtin::Or
            | Builtin::Call
            | Builtin::Index
            | Builtin::Slice
            | Builtin::Printf
            | Builtin::Eq => Arity::AtLeast(1),
            Builtin::Html | Builtin::Js | Builtin::Print | Builtin::Println | Builtin::Urlquery => {
                Arity::AtLeast(0)
            }
            Builtin::Len | Builtin::Not => Arity::Exactly(1),
            Builtin::Ge | Builtin::Gt | Builtin::Le | Builtin::Lt | Builtin::Ne => {
                Arity::Exactly(2)
            }
        }
    }

    /// Applies a builtin other than `and`, `or` and `call`. `iface_nil[i]` tells whether a nil
    /// argument came from an `interface{}` slot (a map element) rather than being untyped.
    pub fn apply(self, args: &[Value], first_iface: bool) -> Result<Value, String> {
        match self {
            Builtin::Not => Ok(Value::Bool(!args.first().is_some_and(Value::truth))),
            Builtin::Len => length(args.first().unwrap_or(&Value::Nil), first_iface),
            Builtin::Index => index(args),
            Builtin::Slice => slice(args),
            Builtin::Print => Ok(Value::from(crate::fmt::sprint(args))),
            Builtin::Println => Ok(Value::from(crate::fmt::sprintln(args))),
            Builtin::Printf => {
                let format = args.first().and_then(Value::as_str).unwrap_or("");
                Ok(Value::from(crate::fmt::sprintf(
                    format,
                    args.get(1..).unwrap_or(&[]),
                )))
            }
            Builtin::Html => Ok(Value::from(html_escape(&eval_args(args)))),
            Builtin::Js => Ok(Value::from(js_escape(&eval_args(args)))),
            Builtin::Urlquery => Ok(Value::from(query_escape(&eval_args(args)))),
            Builtin::Eq => eq(args).map(Value::Bool),
            Builtin::Ne => eq(args).map(|b| Value::Bool(!b)),
            Builtin::Lt | Builtin::Le | Builtin::Gt | Builtin::Ge => {
                let [a, b] = args else {
                    return Err(format!("wrong number of args: want 2 got {}", args.len()));
                };
                match self {
                    Builtin::Lt => lt(a, b).map(Value::Bool),
                    Builtin::Le => le(a, b).map(Value::Bool),
                    Builtin::Gt => le(a, b).map(|t| Value::Bool(!t)),
                    _ => lt(a, b).map(|t| Value::Bool(!t)),
                }
            }
            Builtin::And | Builtin::Or | Builtin::Call => Err("internal error".into()),
        }
    }
}

/// Go's `evalArgs`: a single string as is, else `fmt.Sprint` with nil as `<no value>`.
fn eval_args(args: &[Value]) -> String {
    if let [Value::String(s)] = args {
        return s.to_string();
    }
    let printable: Vec<Value> = args
        .iter()
        .map(|a| match a {
            Value::Nil => Value::str("<no value>"),
            other => other.clone(),
        })
        .collect();
    crate::fmt::sprint(&printable)
}

fn length(item: &Value, iface: bool) -> Result<Value, String> {
    let n = match item {
        Value::Nil if iface => return Err("len of nil pointer".into()),
        Value::Nil => return Err("reflect: call of reflect.Value.Type on zero Value".into()),
        Value::String(s) => s.len(),
        Value::Bytes(b) => b.len(),
        Value::List(items, _) => items.len(),
        Value::Map(m) => m.borrow().len(),
        // Go map and slice types with methods (Helm's `.Files`, `.Capabilities.APIVersions`).
        Value::Object(o) if matches!(o.kind_name(), "map" | "slice") => {
            return length(&o.to_data(), iface);
        }
        other => return Err(format!("len of type {}", other.type_name())),
    };
    Ok(Value::Int(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// An integer index argument (Go's `indexArg`).
fn index_arg(index: &Value, cap: usize) -> Result<usize, String> {
    let x = match index {
        Value::Int(i) | Value::Int64(i) => *i,
        Value::Nil => return Err("cannot index slice/array with nil".into()),
        other => {
            return Err(format!(
                "cannot index slice/array with type {}",
                other.type_name()
            ));
        }
    };
    if x < 0 || x as u64 > cap as u64 {
        return Err(format!("index out of range: {x}"));
    }
    Ok(x as usize)
}

fn index(args: &[Value]) -> Result<Value, String> {
    let mut item = args.first().cloned().unwrap_or_default();
    if item.is_nil() {
        return Err("index of untyped nil".into());
    }
    for (i, idx) in args.iter().enumerate().skip(1) {
        item = match &item {
            Value::Nil if i > 1 => return Err("index of nil pointer".into()),
            Value::List(items, _) => {
                let x = index_arg(idx, items.len())?;
                match items.get(x) {
                    Some(v) => v.clone(),
                    None => return Err("reflect: slice index out of range".to_string()),
                }
            }
            Value::Bytes(b) => {
                let x = index_arg(idx, b.len())?;
                match b.get(x) {
                    Some(v) => Value::Int(i64::from(*v)),
                    None => return Err("reflect: slice index out of range".into()),
                }
            }
            Value::String(s) => {
                let x = index_arg(idx, s.len())?;
                match s.as_bytes().get(x) {
                    Some(v) => Value::Int(i64::from(*v)),
                    None => return Err("reflect: string index out of range".into()),
                }
            }
            Value::Map(m) => match idx {
                Value::String(k) => m.borrow().get(&**k).cloned().unwrap_or_default(),
                Value::Nil => return Err("value is nil; should be of type string".into()),
                other => {
                    return Err(format!(
                        "value has type {}; should be string",
                        other.type_name()
                    ));
                }
            },
            other => return Err(format!("can't index item of type {}", other.type_name())),
        };
    }
    Ok(item)
}

fn slice(args: &[Value]) -> Result<Value, String> {
    let item = args.first().cloned().unwrap_or_default();
    if item.is_nil() {
        return Err("slice of untyped nil".into());
    }
    let indexes = args.get(1..).unwrap_or(&[]);
    if indexes.len() > 3 {
        return Err(format!("too many slice indexes: {}", indexes.len()));
    }
    let len = match &item {
        Value::String(s) => {
            if indexes.len() == 3 {
                return Err("cannot 3-index slice a string".into());
            }
            s.len()
        }
        Value::List(items, _) => items.len(),
        Value::Bytes(b) => b.len(),
        other => return Err(format!("can't slice item of type {}", other.type_name())),
    };
    let mut idx = [0, len, len];
    for (i, index) in indexes.iter().enumerate() {
        idx[i] = index_arg(index, len)?;
    }
    if idx[0] > idx[1] {
        return Err(format!("invalid slice index: {} > {}", idx[0], idx[1]));
    }
    if indexes.len() == 3 && idx[1] > idx[2] {
        return Err(format!("invalid slice index: {} > {}", idx[1], idx[2]));
    }
    let (a, b) = (idx[0], idx[1]);
    Ok(match &item {
        Value::String(s) => match s.as_bytes().get(a..b) {
            Some(bytes) => Value::from(String::from_utf8_lossy(bytes).into_owned()),
            None => Value::str(""),
        },
        Value::List(items, kind) => {
            Value::List(Rc::new(items.get(a..b).unwrap_or(&[]).to_vec()), *kind)
        }
        Value::Bytes(bytes) => Value::Bytes(Rc::from(bytes.get(a..b).unwrap_or(&[]))),
        _ => Value::Nil,
    })
}

/// Go's comparison classes (`basicKind`).
#[derive(PartialEq, Eq, Clone, Copy)]
enum BasicKind {
    Bool,
    Int,
    Float,
    String,
    /// Nil, or a kind that is not basic.
    Invalid,
}

fn basic_kind(v: &Value) -> BasicKind {
    match v {
        Value::Bool(_) => BasicKind::Bool,
        Value::Int(_) | Value::Int64(_) => BasicKind::Int,
        Value::Float(_) => BasicKind::Float,
        Value::String(_) => BasicKind::String,
        _ => BasicKind::Invalid,
    }
}

fn incompatible(a: &Value, b: &Value) -> String {
    format!(
        "incompatible types for comparison: {} and {}",
        a.type_name(),
        b.type_name()
    )
}

fn eq(args: &[Value]) -> Result<bool, String> {
    let Some((a, rest)) = args.split_first() else {
        return Err("missing argument for comparison".into());
    };
    if rest.is_empty() {
        return Err("missing argument for comparison".into());
    }
    let k1 = basic_kind(a);
    for b in rest {
        let k2 = basic_kind(b);
        let truth = if k1 == k2 {
            match (a, b) {
                (Value::Bool(x), Value::Bool(y)) => x == y,
                (Value::Int(x) | Value::Int64(x), Value::Int(y) | Value::Int64(y)) => x == y,
                (Value::Float(x), Value::Float(y)) => x == y,
                (Value::String(x), Value::String(y)) => x == y,
                _ => compare_other(a, b)?,
            }
        } else {
            if !a.is_nil() && !b.is_nil() {
                return Err(incompatible(a, b));
            }
            false
        };
        if truth {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `eq` on values that are not basic: nil compares with anything, maps and slices are not
/// comparable, objects compare by identity.
fn compare_other(a: &Value, b: &Value) -> Result<bool, String> {
    if a.is_nil() || b.is_nil() {
        return Ok(a.is_nil() == b.is_nil());
    }
    if a.type_name() != b.type_name() {
        return Err(format!(
            "non-comparable types {}: {}, {}: {}",
            percent_s(a),
            a.type_name(),
            b.type_name(),
            percent_s(b)
        ));
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => Ok(Rc::ptr_eq(x, y)),
        _ => Err(format!(
            "non-comparable type {}: {}",
            percent_s(b),
            b.type_name()
        )),
    }
}

fn percent_s(v: &Value) -> String {
    crate::fmt::sprintf("%s", std::slice::from_ref(v))
}

fn lt(a: &Value, b: &Value) -> Result<bool, String> {
    let k1 = basic_kind(a);
    if k1 == BasicKind::Invalid {
        return Err("invalid type for comparison".into());
    }
    let k2 = basic_kind(b);
    if k2 == BasicKind::Invalid {
        return Err("invalid type for comparison".into());
    }
    if k1 != k2 {
        return Err(incompatible(a, b));
    }
    match (a, b) {
        (Value::Int(x) | Value::Int64(x), Value::Int(y) | Value::Int64(y)) => Ok(x < y),
        (Value::Float(x), Value::Float(y)) => Ok(x < y),
        (Value::String(x), Value::String(y)) => Ok(x < y),
        _ => Err("invalid type for comparison".into()),
    }
}

fn le(a: &Value, b: &Value) -> Result<bool, String> {
    if lt(a, b)? {
        return Ok(true);
    }
    eq(&[a.clone(), b.clone()])
}

/// Go's `template.HTMLEscapeString`.
pub(crate) fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\0' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Go's `template.JSEscapeString`.
pub(crate) fn js_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            c if c.is_ascii() && (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c if c.is_ascii() || super::lex::is_go_print(c) => out.push(c),
            c => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
        }
    }
    out
}

/// Go's `url.QueryEscape`.
pub(crate) fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char);
            }
            b' ' => out.push('+'),
            b => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// The element kind of a list: whether its elements sit in `interface{}` slots.
pub(crate) fn elements_are_interfaces(kind: ListKind) -> bool {
    kind == ListKind::Any
}
