//! JSON as Go's `encoding/json` writes it: map keys sorted, `<`, `>` and `&` escaped as
//! `\u003c`… unless asked not to, U+2028/U+2029 always escaped, floats in Go's form (`1e+21`,
//! `1e-7`, `100000000000000000000`), `[]byte` as base64, `MarshalIndent`'s layout.

use std::fmt::Write as _;

use super::Error;
use crate::value::Value;

/// How to write JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Escape `<`, `>` and `&` (`json.Marshal` does; Sprig's `toRawJson` does not).
    pub escape_html: bool,
    /// Indent nested values by this many spaces per level (`json.MarshalIndent(v, "", "  ")`
    /// is 2); 0 writes everything on one line.
    pub indent: usize,
}

/// `json.Marshal(value)`.
pub fn marshal(value: &Value) -> Result<String, Error> {
    write(
        value,
        Options {
            escape_html: true,
            indent: 0,
        },
    )
}

/// Writes `value` as Go's `encoding/json` does with `options`.
pub fn write(value: &Value, options: Options) -> Result<String, Error> {
    let mut out = String::new();
    write_value(&mut out, value, options, 0)?;
    Ok(out)
}

/// Nesting deeper than this is refused (Go's encoder reports a cycle past 1000 levels).
const MAX_DEPTH: usize = 1_000;

fn newline(out: &mut String, options: Options, level: usize) {
    out.push('\n');
    out.extend(std::iter::repeat_n(' ', options.indent * level));
}

fn write_value(
    out: &mut String,
    value: &Value,
    options: Options,
    level: usize,
) -> Result<(), Error> {
    if level > MAX_DEPTH {
        return Err(Error {
            message: "json: unsupported value: encountered a cycle".into(),
        });
    }
    match value {
        Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) | Value::Int64(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(x) => out.push_str(&float(*x)?),
        Value::String(s) => string(out, s, options.escape_html),
        Value::Bytes(b) => {
            use base64::Engine as _;
            string(
                out,
                &base64::engine::general_purpose::STANDARD.encode(b),
                options.escape_html,
            );
        }
        Value::List(items, _) => {
            out.push('[');
            if !items.is_empty() {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    if options.indent > 0 {
                        newline(out, options, level + 1);
                    }
                    write_value(out, item, options, level + 1)?;
                }
                if options.indent > 0 {
                    newline(out, options, level);
                }
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push('{');
            let map = m.borrow();
            if !map.is_empty() {
                // BTreeMap order is byte order, as Go sorts map keys.
                for (i, (key, item)) in map.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    if options.indent > 0 {
                        newline(out, options, level + 1);
                    }
                    string(out, key, options.escape_html);
                    out.push(':');
                    if options.indent > 0 {
                        out.push(' ');
                    }
                    write_value(out, item, options, level + 1)?;
                }
                if options.indent > 0 {
                    newline(out, options, level);
                }
            }
            out.push('}');
        }
        Value::Object(o) => write_value(out, &o.to_data(), options, level)?,
    }
    Ok(())
}

/// A float64 as Go's JSON encoder writes it: `%f`-style between 1e-6 and 1e21, else
/// exponent form with at least one exponent digit (`1e-7`, `1e+21`).
pub fn float(x: f64) -> Result<String, Error> {
    if !x.is_finite() {
        return Err(Error {
            message: format!(
                "json: unsupported value: {}",
                crate::value::format_float_g(x)
            ),
        });
    }
    let abs = x.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = crate::value::format_float_shortest(x, 0, 0);
        // Go trims the exponent's leading zero: e-07 → e-7.
        if let Some((mantissa, exp)) = text.split_once('e') {
            let (sign, digits) = exp.split_at(1.min(exp.len()));
            let digits = digits
                .strip_prefix('0')
                .filter(|d| !d.is_empty())
                .unwrap_or(digits);
            return Ok(format!("{mantissa}e{sign}{digits}"));
        }
        return Ok(text);
    }
    Ok(crate::value::format_float_shortest(x, -1000, 1000))
}

/// A JSON string as Go writes it.
pub fn string(out: &mut String, s: &str, escape_html: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' if escape_html => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go_json(json: &str, options: Options) -> String {
        let value: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
        write(&Value::from_json_floats(&value), options).unwrap_or_else(|e| e.message)
    }

    #[test]
    fn strings_escape_as_go() {
        // Helm v4.2.3: toJson / toRawJson of the same string.
        let s = "\"<a>&\\b\\f\\u0001\\u001f\\u2028\\u2029\u{7f}\u{e9}\u{1F600}\\\"\\\\\\n\\r\\t\"";
        let plain = Options {
            escape_html: true,
            indent: 0,
        };
        let raw = Options {
            escape_html: false,
            indent: 0,
        };
        assert_eq!(
            go_json(s, plain),
            "\"\\u003ca\\u003e\\u0026\\b\\f\\u0001\\u001f\\u2028\\u2029\u{7f}\u{e9}\u{1F600}\\\"\\\\\\n\\r\\t\""
        );
        assert_eq!(
            go_json(s, raw),
            "\"<a>&\\b\\f\\u0001\\u001f\\u2028\\u2029\u{7f}\u{e9}\u{1F600}\\\"\\\\\\n\\r\\t\""
        );
    }

    #[test]
    fn numbers_and_layout_as_go() {
        let v =
            r#"{"z": [1, 1.5, 1e21, 1e-7, 1e20, 0.000001, {}, [], null, true], "a": {"c": "d"}}"#;
        assert_eq!(
            go_json(
                v,
                Options {
                    escape_html: true,
                    indent: 0
                }
            ),
            r#"{"a":{"c":"d"},"z":[1,1.5,1e+21,1e-7,100000000000000000000,0.000001,{},[],null,true]}"#
        );
        assert_eq!(
            go_json(
                v,
                Options {
                    escape_html: true,
                    indent: 2
                }
            ),
            "{\n  \"a\": {\n    \"c\": \"d\"\n  },\n  \"z\": [\n    1,\n    1.5,\n    1e+21,\n    1e-7,\n    100000000000000000000,\n    0.000001,\n    {},\n    [],\n    null,\n    true\n  ]\n}"
        );
        assert_eq!(
            go_json(
                "[[], {\"a\": []}]",
                Options {
                    escape_html: true,
                    indent: 2
                }
            ),
            "[\n  [],\n  {\n    \"a\": []\n  }\n]"
        );
        assert_eq!(
            float(f64::NAN).unwrap_err().message,
            "json: unsupported value: NaN"
        );
        assert_eq!(float(-2.5e-8).unwrap_or_default(), "-2.5e-8");
        assert_eq!(float(123_456_789.0).unwrap_or_default(), "123456789");
    }
}
