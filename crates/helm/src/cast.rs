//! Loose conversions as Sprig applies them to its arguments (spf13/cast and Sprig's `strval`).
//!
//! Sprig functions take `interface{}` and convert quietly: `add "3" 4` is 7, `int "x"` is 0,
//! `upper 12` is "12". These helpers are those conversions, one place for every function.

use crate::value::Value;

/// `cast.ToInt64`: integers as they are, floats truncated, strings parsed (Go base prefixes
/// `0x`, `0o`, `0b` and a leading `0` for octal; a trailing `.0…` is dropped), bools 1/0,
/// anything else (or a failed parse) 0.
pub fn to_i64(v: &Value) -> i64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i,
        Value::Float(f) => float_to_int(*f),
        Value::Bool(b) => i64::from(*b),
        Value::String(s) => parse_go_int(trim_zero_decimal(s)).unwrap_or(0),
        _ => 0,
    }
}

/// `cast.ToFloat64`: numbers converted, strings parsed, bools 1/0, anything else 0.
pub fn to_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::String(s) => parse_go_float(s).unwrap_or(0.0),
        _ => 0.0,
    }
}

/// Go's `int64(f)` conversion as amd64 performs it: truncation toward zero, and the smallest
/// int64 for NaN and for values out of range (Go leaves those to the hardware; Helm runs there).
pub fn float_to_int(f: f64) -> i64 {
    // -2^63 and 2^63 are exact in f64; the valid range is [-2^63, 2^63).
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if f.is_nan() || !(-LIMIT..LIMIT).contains(&f) {
        i64::MIN
    } else {
        f as i64
    }
}

/// `strconv.ParseFloat(s, 64)` for decimal input: no surrounding spaces, `_` only between digits,
/// `inf`/`infinity`/`nan` in any case (a sign only before the infinities), and `None` when the
/// value overflows (Go's range error). Hexadecimal floats (`0x1p4`) are not read.
pub fn parse_go_float(s: &str) -> Option<f64> {
    let (sign, body) = match s.as_bytes().first() {
        Some(b'-') => (-1.0, &s[1..]),
        Some(b'+') => (1.0, &s[1..]),
        _ => (1.0, s),
    };
    if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
        return Some(sign * f64::INFINITY);
    }
    if s.eq_ignore_ascii_case("nan") {
        return Some(f64::NAN);
    }
    let bytes = body.as_bytes();
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        return None;
    }
    let mut digits = String::with_capacity(body.len());
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-' => digits.push(char::from(b)),
            b'_' => {
                let between_digits = i > 0
                    && bytes[i - 1].is_ascii_digit()
                    && bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
                if !between_digits {
                    return None;
                }
            }
            _ => return None,
        }
    }
    // Rust accepts the same decimal grammar once the characters are restricted as above.
    let value: f64 = digits.parse().ok()?;
    if value.is_infinite() {
        return None;
    }
    Some(sign * value)
}

/// Sprig's `strval`: strings as they are, `[]byte` as text, objects through their `%v` (Go's
/// `String()`), everything else as `fmt.Sprintf("%v")`.
pub fn to_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        Value::Bytes(b) => crate::fmt::lossy_utf8(b),
        other => other.to_string(),
    }
}

/// `cast.ToBool`: bools, non-zero numbers, strings `strconv.ParseBool` accepts.
pub fn to_bool(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Int(i) | Value::Int64(i) => *i != 0,
        Value::Float(f) => *f != 0.0,
        Value::String(s) => matches!(&**s, "1" | "t" | "T" | "TRUE" | "true" | "True"),
        _ => false,
    }
}

/// Sprig's `strslice`: a list's items as strings (nil items dropped), a single string as a
/// one-item list, nil as an empty list, anything else as its `%v`.
pub fn to_string_list(v: &Value) -> Vec<String> {
    match v {
        Value::List(items, _) => items
            .iter()
            .filter(|item| !item.is_nil())
            .map(to_string)
            .collect(),
        Value::Nil => Vec::new(),
        other => vec![to_string(other)],
    }
}

fn trim_zero_decimal(s: &str) -> &str {
    // cast drops a trailing ".0…" before parsing integers ("3.00" is 3).
    if let Some((int, frac)) = s.split_once('.')
        && !frac.is_empty()
        && frac.bytes().all(|b| b == b'0')
    {
        return int;
    }
    s
}

/// `strconv.ParseInt(s, 0, 64)`: optional sign, Go base prefixes, `_` separators after a prefix.
pub fn parse_go_int(s: &str) -> Option<i64> {
    let (negative, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = rest.to_ascii_lowercase();
    let prefixed = ["0x", "0o", "0b"].iter().any(|p| lower.starts_with(p));
    if !underscores_ok(lower.as_bytes(), if prefixed { 2 } else { 0 }) {
        return None;
    }
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.replace('_', ""))
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.replace('_', ""))
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.replace('_', ""))
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].replace('_', ""))
    } else {
        (10, lower.replace('_', ""))
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    let magnitude = i128::from_str_radix(&digits, radix).ok()?;
    let value = if negative { -magnitude } else { magnitude };
    i64::try_from(value).ok()
}

/// Go's rule for `_` in a number: each one sits between two digits, or right after a base
/// prefix (of length `prefix`) and before a digit.
fn underscores_ok(bytes: &[u8], prefix: usize) -> bool {
    bytes.iter().enumerate().all(|(i, &b)| {
        b != b'_'
            || ((i == prefix && prefix > 0 || i > prefix && bytes[i - 1].is_ascii_alphanumeric())
                && bytes.get(i + 1).is_some_and(u8::is_ascii_alphanumeric))
    })
}

/// Go's check that a function with `want` parameters got as many arguments; the message is the
/// one `text/template` gives (`wrong number of args for NAME: want 2 got 1`).
pub fn want_args(name: &str, args: &[Value], want: usize) -> Result<(), String> {
    if args.len() == want {
        Ok(())
    } else {
        Err(format!(
            "wrong number of args for {name}: want {want} got {}",
            args.len()
        ))
    }
}

/// As [`want_args`] for a variadic function with `want` fixed parameters before the `...`.
pub fn want_at_least(name: &str, args: &[Value], want: usize) -> Result<(), String> {
    if args.len() >= want {
        Ok(())
    } else {
        Err(format!(
            "wrong number of args for {name}: want at least {want} got {}",
            args.len()
        ))
    }
}

/// Whether a function's error is one of Go's argument checks ([`want_args`], [`go_string`],
/// [`go_int`], …) rather than the function's own failure. Go reports those without the
/// `error calling NAME: ` prefix, at the call (arity) or at the offending argument (type); an
/// executor can use this to print them Go's way.
pub fn is_argument_check(message: &str) -> bool {
    message.starts_with("wrong number of args for ")
        || message.starts_with("wrong type for value; ")
        || message.starts_with("invalid value; expected ")
}

/// The Go type `text/template` reports for an argument it cannot pass: nil values come out of
/// maps and functions as empty `interface {}`s.
fn reported_type(v: &Value) -> String {
    if v.is_nil() {
        "interface {}".into()
    } else {
        v.type_name()
    }
}

/// A Go `string` parameter: only strings pass (templates do not convert arguments), anything
/// else fails as `text/template` does.
pub fn go_string(v: &Value) -> Result<&str, String> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(format!(
            "wrong type for value; expected string; got {}",
            reported_type(other)
        )),
    }
}

/// A Go `int` parameter: only `int` values pass (not `int64`, not `float64`).
pub fn go_int(v: &Value) -> Result<i64, String> {
    match v {
        Value::Int(i) => Ok(*i),
        other => Err(format!(
            "wrong type for value; expected int; got {}",
            reported_type(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[expect(clippy::float_cmp, reason = "the conversions are exact")]
    fn conversions_follow_cast() {
        assert_eq!(to_i64(&Value::str("0x1f")), 31);
        assert_eq!(to_i64(&Value::str("010")), 8);
        assert_eq!(to_i64(&Value::str("3.00")), 3);
        assert_eq!(to_i64(&Value::str("x")), 0);
        assert_eq!(to_i64(&Value::Float(-2.9)), -2);
        assert_eq!(to_string(&Value::Float(1e6)), "1e+06");
        assert_eq!(to_string_list(&Value::str("a")), vec!["a"]);
        let type_error = go_string(&Value::Int(1)).unwrap_err();
        assert_eq!(type_error, "wrong type for value; expected string; got int");
        assert!(is_argument_check(&type_error));
        assert!(is_argument_check(&want_args("f", &[], 1).unwrap_err()));
        assert!(!is_argument_check("strings: negative Repeat count"));
        // Oracle (`float64 "…"`, `int 1e30`): Go's ParseFloat and amd64 conversions.
        assert_eq!(to_f64(&Value::str("1_0.5")), 10.5);
        assert_eq!(to_f64(&Value::str(" 2")), 0.0);
        assert_eq!(to_f64(&Value::str("0x10")), 0.0);
        assert_eq!(to_f64(&Value::str("inf")), f64::INFINITY);
        assert_eq!(to_f64(&Value::str("1e400")), 0.0);
        assert_eq!(to_f64(&Value::str("-.5")), -0.5);
        assert_eq!(to_i64(&Value::Float(1e30)), i64::MIN);
        assert_eq!(to_i64(&Value::Float(-1e30)), i64::MIN);
    }
}
