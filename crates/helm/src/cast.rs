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
        Value::Float(f) if f.is_finite() => f.trunc() as i64,
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
        Value::String(s) => s.trim().parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

/// Sprig's `strval`: strings as they are, `[]byte` as text, objects through their `%v` (Go's
/// `String()`), everything else as `fmt.Sprintf("%v")`.
pub fn to_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
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
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.replace('_', ""))
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.replace('_', ""))
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.replace('_', ""))
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].replace('_', ""))
    } else {
        (10, lower.clone())
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    let magnitude = i128::from_str_radix(&digits, radix).ok()?;
    let value = if negative { -magnitude } else { magnitude };
    i64::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_follow_cast() {
        assert_eq!(to_i64(&Value::str("0x1f")), 31);
        assert_eq!(to_i64(&Value::str("010")), 8);
        assert_eq!(to_i64(&Value::str("3.00")), 3);
        assert_eq!(to_i64(&Value::str("x")), 0);
        assert_eq!(to_i64(&Value::Float(-2.9)), -2);
        assert_eq!(to_string(&Value::Float(1e6)), "1e+06");
        assert_eq!(to_string_list(&Value::str("a")), vec!["a"]);
    }
}
