//! Template functions: defaults and flow control (`default`, `empty`, `coalesce`, `all`, `any`,
//! `ternary`, `fail`).
//!
//! "Empty" is Sprig's notion: nil, `false`, zero numbers, and empty strings, lists and maps.
//! Structs never are, so `default "x" .Capabilities` keeps the capabilities.

use super::reflect::{bool_arg, is_empty, string_arg, want_args, want_at_least};
use crate::template::{Call, FuncMap};
use crate::value::Value;

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("default", default);
    map.insert("empty", empty);
    map.insert("coalesce", coalesce);
    map.insert("all", all);
    map.insert("any", any);
    map.insert("ternary", ternary);
    map.insert("fail", fail);
}

/// `default DEFAULT [VALUE]`: VALUE unless it is empty (or absent), else DEFAULT.
fn default(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_at_least(call, args, 1)?;
    Ok(match args.get(1) {
        Some(given) if !is_empty(given) => given.clone(),
        _ => args[0].clone(),
    })
}

fn empty(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    Ok(Value::Bool(is_empty(&args[0])))
}

/// `coalesce VALUE…`: the first non-empty value, nil when there is none.
#[expect(
    clippy::unnecessary_wraps,
    reason = "every template function returns a Result"
)]
fn coalesce(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    Ok(args
        .iter()
        .find(|v| !is_empty(v))
        .cloned()
        .unwrap_or_default())
}

#[expect(
    clippy::unnecessary_wraps,
    reason = "every template function returns a Result"
)]
fn all(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    Ok(Value::Bool(args.iter().all(|v| !is_empty(v))))
}

#[expect(
    clippy::unnecessary_wraps,
    reason = "every template function returns a Result"
)]
fn any(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    Ok(Value::Bool(args.iter().any(|v| !is_empty(v))))
}

/// `ternary IF_TRUE IF_FALSE CONDITION`; the condition must be a real bool.
fn ternary(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 3)?;
    let condition = bool_arg(&args[2])?;
    Ok(if condition {
        args[0].clone()
    } else {
        args[1].clone()
    })
}

/// `fail MESSAGE`: fails the render with MESSAGE (Helm shows it as
/// `execution error at (TEMPLATE:LINE:COL): MESSAGE`).
fn fail(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    Err(string_arg(&args[0])?.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::reflect::tests::{dict, int, list, s, show};
    use super::*;

    #[test]
    fn default_and_empty_follow_sprig() {
        // Oracle: `default "d" X` is d for "", 0, false, (list), (dict), nil, a missing value,
        // 0.0 and no X; x for "x"; `empty (list 0)` false; `empty .Values.z` (0) true.
        for given in [
            s(""),
            int(0),
            Value::Bool(false),
            list(&[]),
            dict(&[]),
            Value::Nil,
            Value::Float(0.0),
            Value::Int64(0),
        ] {
            assert_eq!(
                show("default", &[s("d"), given.clone()]),
                "d (string)",
                "{given:?}"
            );
            assert_eq!(
                show("empty", std::slice::from_ref(&given)),
                "true (bool)",
                "{given:?}"
            );
        }
        assert_eq!(show("default", &[s("d")]), "d (string)");
        assert_eq!(show("default", &[s("d"), s("x")]), "x (string)");
        assert_eq!(show("empty", &[list(&[int(0)])]), "false (bool)");
        assert_eq!(
            show("empty", &[]),
            "error: wrong number of args for empty: want 1 got 0"
        );
        assert_eq!(
            show("default", &[]),
            "error: wrong number of args for default: want at least 1 got 0"
        );
    }

    #[test]
    fn coalesce_all_any() {
        // Oracle: `coalesce 0 "" "a" "b"` a, `coalesce` and `coalesce nil 0` print "" (nil),
        // `all 1 "a"` true, `all 1 ""` false, `all` true, `any 0 ""` false, `any 0 "x"` true,
        // `any` false.
        assert_eq!(
            show("coalesce", &[int(0), s(""), s("a"), s("b")]),
            "a (string)"
        );
        assert_eq!(show("coalesce", &[]), "<nil> (<nil>)");
        assert_eq!(show("coalesce", &[Value::Nil, int(0)]), "<nil> (<nil>)");
        assert_eq!(show("all", &[int(1), s("a")]), "true (bool)");
        assert_eq!(show("all", &[int(1), s("")]), "false (bool)");
        assert_eq!(show("all", &[]), "true (bool)");
        assert_eq!(show("any", &[int(0), s("")]), "false (bool)");
        assert_eq!(show("any", &[int(0), s("x")]), "true (bool)");
        assert_eq!(show("any", &[]), "false (bool)");
    }

    #[test]
    fn ternary_and_fail() {
        // Oracle: `ternary "a" "b" true` a, `… false` b; `ternary "a" "b" .Values.t` fails
        // (expected bool); `fail "boom"` fails with boom; `fail 1` fails (expected string).
        assert_eq!(
            show("ternary", &[s("a"), s("b"), Value::Bool(true)]),
            "a (string)"
        );
        assert_eq!(
            show("ternary", &[s("a"), s("b"), Value::Bool(false)]),
            "b (string)"
        );
        assert_eq!(
            show("ternary", &[s("a"), s("b"), int(1)]),
            "error: wrong type for value; expected bool; got int"
        );
        assert_eq!(
            show("ternary", &[s("a"), s("b"), Value::Nil]),
            "error: wrong type for value; expected bool; got interface {}"
        );
        assert_eq!(show("fail", &[s("boom")]), "error: boom");
        assert_eq!(
            show("fail", &[int(1)]),
            "error: wrong type for value; expected string; got int"
        );
    }
}
