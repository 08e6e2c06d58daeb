//! Template functions: reflection (`typeOf`, `typeIs`, `typeIsLike`, `kindOf`, `kindIs`,
//! `deepEqual`), plus the argument checks Go's `text/template` applies before it calls a
//! function with typed parameters.
//!
//! Go converts each argument to the parameter type of the Go function (`until` takes an `int`,
//! `get` a `map[string]interface {}`); a value of another type fails the call before the function
//! runs. Our functions take untyped [`Value`]s, so each checks its own arguments with the helpers
//! here, which phrase the failures as Go does.

use std::rc::Rc;

use crate::cast;
use crate::template::{Call, FuncMap};
use crate::value::{ListKind, Map, Value};

/// How deep the recursive helpers (`deepEqual`, `merge`, `deepCopy`) follow nested values before
/// they give up: far beyond real values. They grow the stack as they go (see
/// [`STACK_RED_ZONE`]), so the bound is about time and memory, not stack size.
pub(crate) const MAX_NESTING: usize = 10_000;

/// When less stack than this is left, the recursive helpers continue on a new segment…
pub(crate) const STACK_RED_ZONE: usize = 64 * 1024;
/// …of this size.
pub(crate) const STACK_GROWTH: usize = 1024 * 1024;

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("typeOf", type_of);
    map.insert("typeIs", type_is);
    map.insert("typeIsLike", type_is_like);
    map.insert("kindOf", kind_of);
    map.insert("kindIs", kind_is);
    map.insert("deepEqual", deep_equal_fn);
}

fn type_of(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    Ok(Value::str(args[0].type_name()))
}

fn type_is(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let target = string_arg(&args[0])?;
    Ok(Value::Bool(target == args[1].type_name()))
}

/// Like `typeIs`, but a pointer type matches its element type's name too.
fn type_is_like(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let target = string_arg(&args[0])?;
    let name = args[1].type_name();
    Ok(Value::Bool(
        name == target || name.strip_prefix('*') == Some(target),
    ))
}

fn kind_of(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    Ok(Value::str(args[0].kind_name()))
}

fn kind_is(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let target = string_arg(&args[0])?;
    Ok(Value::Bool(target == args[1].kind_name()))
}

fn deep_equal_fn(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 2)?;
    Ok(Value::Bool(deep_equal(&args[0], &args[1])))
}

/// Go's `reflect.DeepEqual` on template values: the same Go type and equal contents (so `1` and
/// `int64 1` differ, as do `[]string` and `[]interface {}` with the same items; NaN is unequal to
/// itself).
pub(crate) fn deep_equal(a: &Value, b: &Value) -> bool {
    deep_equal_at(a, b, 0)
}

fn deep_equal_at(a: &Value, b: &Value, depth: usize) -> bool {
    stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || {
        deep_equal_step(a, b, depth)
    })
}

fn deep_equal_step(a: &Value, b: &Value, depth: usize) -> bool {
    if depth > MAX_NESTING {
        return false;
    }
    match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) | (Value::Int64(x), Value::Int64(y)) => x == y,
        #[expect(clippy::float_cmp, reason = "DeepEqual compares floats with ==")]
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Bytes(x), Value::Bytes(y)) => x == y,
        (Value::List(x, kx), Value::List(y, ky)) => {
            kx == ky
                && a.is_nil_list() == b.is_nil_list()
                && x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|(x, y)| deep_equal_at(x, y, depth + 1))
        }
        (Value::Map(x), Value::Map(y)) => {
            if Rc::ptr_eq(x, y) {
                return true;
            }
            let (x, y) = (x.borrow(), y.borrow());
            x.len() == y.len()
                && x.iter()
                    .all(|(k, xv)| y.get(k).is_some_and(|yv| deep_equal_at(xv, yv, depth + 1)))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.type_name() == y.type_name()
                && (Rc::ptr_eq(x, y) || deep_equal_at(&x.to_data(), &y.to_data(), depth + 1))
        }
        _ => false,
    }
}

/// Sprig's `empty`: nil, `false`, zero numbers and empty strings, lists and maps are empty;
/// structs and pointers to them never are.
pub(crate) fn is_empty(v: &Value) -> bool {
    match v {
        Value::Nil => true,
        Value::Object(o) => match o.kind_name() {
            // A named map or slice type (`.Files`, `.Capabilities.APIVersions`) is empty when it
            // has no entries, like any map or slice.
            "map" | "slice" | "array" | "string" => !o.to_data().truth(),
            _ => false,
        },
        other => !other.truth(),
    }
}

/// A list-like argument's items as Sprig's reflection sees them (`[]interface {}`, `[]string`,
/// `[]int`, `[]byte`, named slice types), with the element kind; `None` for anything else.
pub(crate) fn list_items(v: &Value) -> Option<(Rc<Vec<Value>>, ListKind)> {
    match v {
        Value::List(items, kind) => Some((Rc::clone(items), *kind)),
        Value::Bytes(bytes) => Some((
            Rc::new(bytes.iter().map(|b| Value::Int(i64::from(*b))).collect()),
            ListKind::Any,
        )),
        Value::Object(o) if matches!(o.kind_name(), "slice" | "array") => match o.to_data() {
            Value::List(items, kind) => Some((items, kind)),
            _ => None,
        },
        _ => None,
    }
}

/// The message of a Sprig list function given a non-list: Go's nil dereference for nil, else
/// `Cannot {what} on type {kind}` (Sprig's own wording, which varies per function; `what`
/// carries it).
pub(crate) fn not_a_list(what: &str, v: &Value) -> String {
    if v.is_nil() {
        NIL_DEREFERENCE.to_string()
    } else {
        format!("{what} {}", v.kind_name())
    }
}

/// Go's panic text when a function dereferences nil (`first nil`).
pub(crate) const NIL_DEREFERENCE: &str =
    "runtime error: invalid memory address or nil pointer dereference";

/// Fails unless exactly `n` arguments were given, as Go does for a fixed-arity function.
pub(crate) fn want_args(call: &Call<'_>, args: &[Value], n: usize) -> Result<(), String> {
    cast::want_args(call.name, args, n)
}

/// Fails unless at least `n` arguments were given, as Go does for a variadic function.
pub(crate) fn want_at_least(call: &Call<'_>, args: &[Value], n: usize) -> Result<(), String> {
    cast::want_at_least(call.name, args, n)
}

fn wrong_type(expected: &str, v: &Value) -> String {
    // A nil reaching a typed parameter comes out of a map or a function as an empty
    // `interface {}`, which is the type Go names.
    let got = if v.is_nil() {
        "interface {}".to_string()
    } else {
        v.type_name()
    };
    format!("wrong type for value; expected {expected}; got {got}")
}

/// An `int` parameter: only a Go `int` converts (template number literals, `len`, `int`), not
/// `int64` (`add`) nor `float64` (YAML numbers), exactly as Go refuses them.
pub(crate) fn int_arg(v: &Value) -> Result<i64, String> {
    cast::go_int(v)
}

/// A `float64` parameter: a float, or an integer literal (Go converts untyped constants).
pub(crate) fn float_arg(v: &Value) -> Result<f64, String> {
    match v {
        Value::Float(f) => Ok(*f),
        Value::Int(i) => Ok(*i as f64),
        other => Err(wrong_type("float64", other)),
    }
}

/// A `string` parameter.
pub(crate) fn string_arg(v: &Value) -> Result<&str, String> {
    cast::go_string(v)
}

/// A `bool` parameter.
pub(crate) fn bool_arg(v: &Value) -> Result<bool, String> {
    match v {
        Value::Bool(b) => Ok(*b),
        other => Err(wrong_type("bool", other)),
    }
}

/// A `map[string]interface {}` parameter: `Ok(None)` is Go's nil map (a nil argument).
pub(crate) fn map_arg(v: &Value) -> Result<Option<&Map>, String> {
    match v {
        Value::Map(m) => Ok(Some(m)),
        Value::Nil => Ok(None),
        other => Err(wrong_type("map[string]interface {}", other)),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::template::{Env, Function, Runtime};
    use std::collections::BTreeMap;

    /// A runtime for calling functions outside a template: `include` and `tpl` fail.
    pub(crate) struct NoRuntime;

    impl Runtime for NoRuntime {
        fn include(&mut self, _: &mut Env, _: &str, _: Value) -> Result<String, String> {
            Err("no templates".into())
        }
        fn tpl(&mut self, _: &mut Env, _: &str, _: Value) -> Result<String, String> {
            Err("no templates".into())
        }
    }

    /// Calls the function registered as `name` in Helm's map with `args`.
    pub(crate) fn call(name: &str, args: &[Value]) -> Result<Value, String> {
        let mut map = FuncMap::new();
        super::super::register_sprig(&mut map);
        let function: Function = *map
            .get(name)
            .unwrap_or_else(|| panic!("{name} is not registered"));
        let mut env = Env::fixed(1, jiff::Zoned::now());
        let mut runtime = NoRuntime;
        let mut call = Call::new(name, &mut env, &mut runtime);
        function(&mut call, args)
    }

    /// `call`, then the result as `%v` and its Go type, `"x (string)"`-style.
    pub(crate) fn show(name: &str, args: &[Value]) -> String {
        match call(name, args) {
            Ok(v) => format!("{v} ({})", v.type_name()),
            Err(e) => format!("error: {e}"),
        }
    }

    pub(crate) fn int(i: i64) -> Value {
        Value::Int(i)
    }

    pub(crate) fn s(text: &str) -> Value {
        Value::str(text)
    }

    pub(crate) fn list(items: &[Value]) -> Value {
        Value::list(items.to_vec())
    }

    pub(crate) fn dict(entries: &[(&str, Value)]) -> Value {
        Value::map(
            entries
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.clone()))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    #[test]
    fn types_and_kinds_as_go_prints_them() {
        // Oracle: `typeOf 1` int, `typeOf 1.5` float64, `typeOf nil` <nil>, `typeOf (list)`
        // []interface {}, `typeOf (dict)` map[string]interface {}, `kindOf (dict)` map,
        // `kindOf nil` invalid, `kindOf (list)` slice.
        assert_eq!(show("typeOf", &[int(1)]), "int (string)");
        assert_eq!(show("typeOf", &[Value::Float(1.5)]), "float64 (string)");
        assert_eq!(show("typeOf", &[Value::Nil]), "<nil> (string)");
        assert_eq!(show("typeOf", &[list(&[])]), "[]interface {} (string)");
        assert_eq!(
            show("typeOf", &[dict(&[])]),
            "map[string]interface {} (string)"
        );
        assert_eq!(show("kindOf", &[dict(&[])]), "map (string)");
        assert_eq!(show("kindOf", &[Value::Nil]), "invalid (string)");
        assert_eq!(show("kindOf", &[list(&[])]), "slice (string)");
        assert_eq!(show("kindIs", &[s("int"), int(1)]), "true (bool)");
        assert_eq!(show("kindIs", &[s("invalid"), Value::Nil]), "true (bool)");
        assert_eq!(show("typeIs", &[s("int"), int(1)]), "true (bool)");
        assert_eq!(show("typeIsLike", &[s("int"), int(1)]), "true (bool)");
        assert_eq!(
            show("typeOf", &[]),
            "error: wrong number of args for typeOf: want 1 got 0"
        );
        assert_eq!(
            show("typeIs", &[int(1), int(1)]),
            "error: wrong type for value; expected string; got int"
        );
    }

    #[test]
    fn deep_equal_compares_go_types() {
        // Oracle: `deepEqual 1 1` true, `deepEqual (add 1 0) 1` false, `deepEqual (list 1)
        // (list 1)` true, `deepEqual (list "a") (splitList "," "a")` false, `deepEqual (dict)
        // (dict)` true, `deepEqual nil nil` true.
        assert_eq!(show("deepEqual", &[int(1), int(1)]), "true (bool)");
        assert_eq!(
            show("deepEqual", &[Value::Int64(1), int(1)]),
            "false (bool)"
        );
        assert_eq!(
            show("deepEqual", &[list(&[int(1)]), list(&[int(1)])]),
            "true (bool)"
        );
        assert_eq!(
            show("deepEqual", &[list(&[s("a")]), Value::string_list(["a"])]),
            "false (bool)"
        );
        assert_eq!(show("deepEqual", &[dict(&[]), dict(&[])]), "true (bool)");
        assert_eq!(show("deepEqual", &[Value::Nil, Value::Nil]), "true (bool)");
        assert_eq!(
            show(
                "deepEqual",
                &[Value::Float(f64::NAN), Value::Float(f64::NAN)]
            ),
            "false (bool)"
        );
    }

    #[test]
    fn maps_holding_themselves_do_not_overflow() {
        let (a, b) = (dict(&[]), dict(&[]));
        for m in [&a, &b] {
            m.as_map()
                .expect("a map")
                .borrow_mut()
                .insert("self".into(), m.clone());
        }
        // Go would find them equal; we stop at the nesting bound instead of overflowing.
        assert!(!deep_equal(&a, &b));
        for m in [&a, &b] {
            m.as_map().expect("a map").borrow_mut().clear();
        }
    }
}
