//! How Go's `yaml.v2` reads a plain (unquoted) scalar: YAML 1.1 booleans (`yes`, `off`, `y`),
//! nulls (`~`), integers in Go's base syntax (`0x1f`, `0o17`, `0777`, `1_000`), floats
//! (`.inf`, `1e3`) and timestamps, which `yaml.v2` keeps as strings but the writer must quote.

/// What a plain scalar means.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
    /// `~`, `null`, the empty scalar.
    Null,
    /// `true`, `yes`, `on`, `y`, …
    Bool(bool),
    /// An integer (`int64` or `uint64` in Go).
    Int(i128),
    /// A float.
    Float(f64),
    /// A timestamp (`2001-12-14`), kept as text by the reader.
    Timestamp,
    /// Anything else.
    Str,
}

/// Resolves a plain scalar the way `yaml.v2`'s `resolve("", text)` does.
pub(crate) fn resolve(text: &str) -> Scalar {
    let Some(&first) = text.as_bytes().first() else {
        return Scalar::Null;
    };
    match first {
        b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~' => {
            keyword(text).unwrap_or(Scalar::Str)
        }
        b'.' => {
            if let Some(word) = keyword(text) {
                return word;
            }
            go_parse_float(text).map_or(Scalar::Str, Scalar::Float)
        }
        b'+' | b'-' | b'0'..=b'9' => {
            if let Some(word) = keyword(text) {
                return word;
            }
            if is_timestamp(text) {
                return Scalar::Timestamp;
            }
            let plain = text.replace('_', "");
            if let Some(i) = go_parse_int(&plain) {
                return Scalar::Int(i);
            }
            if is_yaml_float(&plain)
                && let Some(f) = go_parse_float(&plain)
            {
                return Scalar::Float(f);
            }
            Scalar::Str
        }
        _ => Scalar::Str,
    }
}

fn keyword(text: &str) -> Option<Scalar> {
    Some(match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Scalar::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Scalar::Bool(false)
        }
        "~" | "null" | "Null" | "NULL" => Scalar::Null,
        ".nan" | ".NaN" | ".NAN" => Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Scalar::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Scalar::Float(f64::NEG_INFINITY),
        _ => return None,
    })
}

/// `strconv.ParseInt(s, 0, 64)` then `strconv.ParseUint(s, 0, 64)`: the integer when either
/// accepts `s` (underscores already removed).
pub(crate) fn go_parse_int(s: &str) -> Option<i128> {
    let (negative, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let bytes = rest.as_bytes();
    let (radix, digits) = if bytes.len() >= 2 && bytes[0] == b'0' {
        match bytes[1] {
            b'x' | b'X' => (16, &rest[2..]),
            b'o' | b'O' => (8, &rest[2..]),
            b'b' | b'B' => (2, &rest[2..]),
            _ => (8, &rest[1..]),
        }
    } else {
        (10, rest)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) || digits.len() > 70 {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok()?;
    if negative {
        // ParseUint refuses a sign; ParseInt allows down to -2^63.
        (magnitude <= 1 << 63).then(|| -magnitude.cast_signed())
    } else {
        (magnitude <= u128::from(u64::MAX)).then_some(magnitude.cast_signed())
    }
}

/// `strconv.ParseFloat(s, 64)` for the decimal forms YAML lets through: `None` on a syntax
/// error or an overflow (Go reports "value out of range" for those).
pub(crate) fn go_parse_float(s: &str) -> Option<f64> {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let lower = body.to_ascii_lowercase();
    if matches!(lower.as_str(), "inf" | "infinity" | "nan") {
        return Some(match (lower.as_str(), s.starts_with('-')) {
            ("nan", _) => f64::NAN,
            (_, true) => f64::NEG_INFINITY,
            _ => f64::INFINITY,
        });
    }
    if !body
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-' | b'_'))
    {
        return None;
    }
    let value: f64 = if s.contains('_') {
        if !underscores_ok(body) {
            return None;
        }
        s.replace('_', "").parse().ok()?
    } else {
        s.parse().ok()?
    };
    value.is_finite().then_some(value)
}

/// Go's rule for `_` in number literals: only between digits.
fn underscores_ok(s: &str) -> bool {
    let mut previous = b'^';
    for b in s.bytes() {
        if b.is_ascii_digit() {
            previous = b'0';
        } else if b == b'_' {
            if previous != b'0' {
                return false;
            }
            previous = b'_';
        } else {
            if previous == b'_' {
                return false;
            }
            previous = b'!';
        }
    }
    previous != b'_'
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// `yaml.v2`'s `isBase60Float`: `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`, which the
/// writer quotes for YAML 1.1 readers.
pub(crate) fn is_base60_float(s: &str) -> bool {
    let b = s.as_bytes();
    if !s.contains(':') {
        return false;
    }
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    if !b.get(i).is_some_and(u8::is_ascii_digit) {
        return false;
    }
    while b.get(i).is_some_and(|c| c.is_ascii_digit() || *c == b'_') {
        i += 1;
    }
    let mut groups = 0;
    while b.get(i) == Some(&b':') {
        i += 1;
        // `[0-5]?[0-9]`: one or two digits, the first of two at most 5.
        match (b.get(i), b.get(i + 1)) {
            (Some(d1), Some(d2)) if (b'0'..=b'5').contains(d1) && d2.is_ascii_digit() => i += 2,
            (Some(d), _) if d.is_ascii_digit() => i += 1,
            _ => return false,
        }
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while b.get(i).is_some_and(|c| c.is_ascii_digit() || *c == b'_') {
            i += 1;
        }
    }
    i == b.len()
}

/// Whether Go's `time.Parse` accepts `s` in one of the layouts `yaml.v2` tries:
/// `2006-1-2T15:4:5.999999999Z07:00` (also with `t`), `2006-1-2 15:4:5.999999999`, `2006-1-2`.
pub(crate) fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let year: i32 = (i32::from(b[0] - b'0') * 1000)
        + (i32::from(b[1] - b'0') * 100)
        + (i32::from(b[2] - b'0') * 10)
        + i32::from(b[3] - b'0');
    let mut i = 5;
    let Some(month) = small_number(b, &mut i) else {
        return false;
    };
    if b.get(i) != Some(&b'-') {
        return false;
    }
    i += 1;
    let Some(day) = small_number(b, &mut i) else {
        return false;
    };
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return false;
    }
    if i == b.len() {
        return true;
    }
    let zone = match b[i] {
        b'T' | b't' => true,
        b' ' => false,
        _ => return false,
    };
    i += 1;
    let (Some(hour), true) = (small_number(b, &mut i), b.get(i) == Some(&b':')) else {
        return false;
    };
    i += 1;
    let (Some(minute), true) = (small_number(b, &mut i), b.get(i) == Some(&b':')) else {
        return false;
    };
    i += 1;
    let Some(second) = small_number(b, &mut i) else {
        return false;
    };
    if hour > 23 || minute > 59 || second > 59 {
        return false;
    }
    if matches!(b.get(i), Some(b'.' | b',')) && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i += 1;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
    }
    if !zone {
        return i == b.len();
    }
    match b.get(i) {
        Some(b'Z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            let rest = &b[i + 1..];
            rest.len() == 5
                && rest[0].is_ascii_digit()
                && rest[1].is_ascii_digit()
                && rest[2] == b':'
                && rest[3].is_ascii_digit()
                && rest[4].is_ascii_digit()
                && (rest[0] - b'0') * 10 + (rest[1] - b'0') <= 24
                && (rest[3] - b'0') * 10 + (rest[4] - b'0') <= 59
        }
        _ => false,
    }
}

/// One or two digits, as Go's `getnum(s, false)` reads them.
fn small_number(b: &[u8], i: &mut usize) -> Option<u32> {
    let first = *b.get(*i).filter(|c| c.is_ascii_digit())?;
    *i += 1;
    let mut n = u32::from(first - b'0');
    if let Some(second) = b.get(*i).filter(|c| c.is_ascii_digit()) {
        n = n * 10 + u32::from(second - b'0');
        *i += 1;
    }
    Some(n)
}

fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_scalars_resolve_as_yaml_v2() {
        for (text, want) in [
            ("yes", Scalar::Bool(true)),
            ("Off", Scalar::Bool(false)),
            ("y", Scalar::Bool(true)),
            ("tRue", Scalar::Str),
            ("~", Scalar::Null),
            ("", Scalar::Null),
            ("0x1f", Scalar::Int(31)),
            ("0o17", Scalar::Int(15)),
            ("0777", Scalar::Int(511)),
            ("1_000", Scalar::Int(1000)),
            ("0x_1f", Scalar::Int(31)),
            ("+0x10", Scalar::Int(16)),
            ("-0b11", Scalar::Int(-3)),
            ("08", Scalar::Float(8.0)),
            ("09.5", Scalar::Float(9.5)),
            ("1e3", Scalar::Float(1000.0)),
            ("1.e1", Scalar::Float(10.0)),
            (".5", Scalar::Float(0.5)),
            (".e1", Scalar::Str),
            ("1e400", Scalar::Str),
            ("0o8", Scalar::Str),
            ("_1", Scalar::Str),
            (".51_000", Scalar::Float(0.51)),
            ("._5", Scalar::Str),
            ("-", Scalar::Str),
            (
                "9223372036854775808",
                Scalar::Int(9_223_372_036_854_775_808),
            ),
            (
                "18446744073709551616",
                Scalar::Float(18_446_744_073_709_551_616.0),
            ),
            ("2020-01-01", Scalar::Timestamp),
            ("2020-1-2", Scalar::Timestamp),
            ("2020-01-01T10:00:00Z", Scalar::Timestamp),
            ("2020-01-01 10:00:00", Scalar::Timestamp),
            ("2001-12-14 21:59:43.10 -5", Scalar::Str),
            ("2020-02-30", Scalar::Str),
            ("12:30", Scalar::Str),
        ] {
            assert_eq!(resolve(text), want, "{text}");
        }
        assert!(is_base60_float("1:20:30"));
        assert!(is_base60_float("12:30"));
        assert!(!is_base60_float("12:60"));
    }
}
