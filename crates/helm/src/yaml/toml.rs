//! TOML as Helm's `toToml` writes it: BurntSushi's encoder, which puts a table's plain keys
//! first and its sub-tables after (each group sorted), indents nested tables by two spaces,
//! writes arrays whose items are all maps as `[[array]]` tables, and drops nil map values.
//! Values read from YAML are `float64`, so `1` comes out as `1.0`.

use std::fmt::Write as _;

use crate::value::Value;

/// Nesting deeper than this is refused.
const MAX_DEPTH: usize = 1_000;

/// `toToml`'s text, or the encoder's error message (which `toToml` returns as its text).
pub fn encode(value: &Value) -> Result<String, String> {
    let value = plain(value);
    if value.is_nil() {
        return Err("reflect: call of reflect.Value.Type on zero Value".into());
    }
    check_nil_items(&value, 0)?;
    let mut encoder = Encoder { out: String::new() };
    match &value {
        Value::Map(_) => encoder.table(&[], &value, 0)?,
        other => encoder.element(other, 0)?,
    }
    Ok(encoder.out)
}

/// Objects as their data; everything else as it is.
fn plain(value: &Value) -> Value {
    match value {
        Value::Object(o) => o.to_data(),
        other => other.clone(),
    }
}

/// BurntSushi refuses a nil anywhere in an array (it checks while typing every array).
fn check_nil_items(value: &Value, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err("toml: nesting too deep".into());
    }
    match value {
        Value::List(items, _) => {
            for item in items.iter() {
                let item = plain(item);
                if item.is_nil() {
                    return Err("toml: cannot encode array with nil element".into());
                }
                check_nil_items(&item, depth + 1)?;
            }
            Ok(())
        }
        Value::Map(m) => m
            .borrow()
            .values()
            .try_for_each(|v| check_nil_items(&plain(v), depth + 1)),
        _ => Ok(()),
    }
}

/// Whether an array is written as `[[key]]` tables: not empty, and every item a map.
fn is_table_array(items: &[Value]) -> bool {
    !items.is_empty()
        && items
            .iter()
            .all(|item| matches!(plain(item), Value::Map(_)))
}

/// Whether a value is written as a table (a header of its own) rather than `key = value`.
fn is_table(value: &Value) -> bool {
    match value {
        Value::Map(_) => true,
        Value::List(items, _) => is_table_array(items),
        _ => false,
    }
}

fn is_bare(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn key_part(out: &mut String, key: &str) {
    if is_bare(key) {
        out.push_str(key);
    } else {
        quoted(out, key);
    }
}

/// A float as BurntSushi writes it: Go's shortest `%g`, with `.0` added when that has neither
/// a point nor an exponent.
fn float(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    let mut text = crate::value::format_float_g(x);
    if !text.contains(['.', 'e', 'E']) {
        text.push_str(".0");
    }
    text
}

struct Encoder {
    out: String,
}

impl Encoder {
    /// BurntSushi's `newline`: only once something has been written.
    fn newline(&mut self) {
        if !self.out.is_empty() {
            self.out.push('\n');
        }
    }

    fn indent(&mut self, key: &[String]) {
        for _ in 1..key.len() {
            self.out.push_str("  ");
        }
    }

    fn header(&mut self, key: &[String], array: bool) {
        self.indent(key);
        self.out.push_str(if array { "[[" } else { "[" });
        for (i, part) in key.iter().enumerate() {
            if i > 0 {
                self.out.push('.');
            }
            key_part(&mut self.out, part);
        }
        self.out.push_str(if array { "]]" } else { "]" });
        self.newline();
    }

    /// A table: its header (top-level tables after a blank line), plain keys, sub-tables.
    fn table(&mut self, key: &[String], value: &Value, depth: usize) -> Result<(), String> {
        if key.len() == 1 {
            self.newline();
        }
        if !key.is_empty() {
            self.header(key, false);
        }
        self.map_body(key, value, depth)
    }

    fn map_body(&mut self, key: &[String], value: &Value, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("toml: nesting too deep".into());
        }
        let Value::Map(m) = value else {
            return Ok(());
        };
        let entries: Vec<(String, Value)> = m
            .borrow()
            .iter()
            .map(|(k, v)| (k.clone(), plain(v)))
            .collect();
        let (sub, direct): (Vec<_>, Vec<_>) = entries.into_iter().partition(|(_, v)| is_table(v));
        for (name, item) in direct.iter().chain(sub.iter()) {
            if item.is_nil() {
                continue;
            }
            let mut path = key.to_vec();
            path.push(name.clone());
            match item {
                Value::Map(_) => self.table(&path, item, depth + 1)?,
                Value::List(items, _) if is_table_array(items) => {
                    for element in items.iter() {
                        self.newline();
                        self.header(&path, true);
                        self.map_body(&path, &plain(element), depth + 1)?;
                    }
                }
                other => {
                    self.indent(&path);
                    key_part(&mut self.out, name);
                    self.out.push_str(" = ");
                    self.element(other, depth + 1)?;
                    self.newline();
                }
            }
        }
        Ok(())
    }

    /// A value after `key = `, or inside an array.
    fn element(&mut self, value: &Value, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("toml: nesting too deep".into());
        }
        match value {
            Value::Nil => return Err("toml: cannot encode a nil value".into()),
            Value::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Value::Int(i) | Value::Int64(i) => {
                let _ = write!(self.out, "{i}");
            }
            Value::Float(x) => self.out.push_str(&float(*x)),
            Value::String(s) => quoted(&mut self.out, s),
            Value::Bytes(b) => {
                // A []byte is an array of uint8.
                let items: Vec<String> = b.iter().map(u8::to_string).collect();
                let _ = write!(self.out, "[{}]", items.join(", "));
            }
            Value::List(items, _) => {
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.element(&plain(item), depth + 1)?;
                }
                self.out.push(']');
            }
            Value::Map(m) => {
                // An inline table: plain keys, then tables, all inline.
                let entries: Vec<(String, Value)> = m
                    .borrow()
                    .iter()
                    .map(|(k, v)| (k.clone(), plain(v)))
                    .collect();
                let (sub, direct): (Vec<_>, Vec<_>) =
                    entries.into_iter().partition(|(_, v)| is_table(v));
                let trailing_comma = !sub.is_empty();
                self.out.push('{');
                for group in [(&direct, trailing_comma), (&sub, false)] {
                    let (items, trail) = group;
                    for (i, (name, item)) in items.iter().enumerate() {
                        if item.is_nil() {
                            continue;
                        }
                        key_part(&mut self.out, name);
                        self.out.push_str(" = ");
                        self.element(item, depth + 1)?;
                        if trail || i + 1 != items.len() {
                            self.out.push_str(", ");
                        }
                    }
                }
                self.out.push('}');
            }
            Value::Object(o) => self.element(&o.to_data(), depth)?,
        }
        Ok(())
    }
}

/// `fromToml`'s map, or the decoder's error message (`toml: line N: …`; the wording after the
/// line is the `toml` crate's, not BurntSushi's).
pub fn decode(text: &str) -> Result<Value, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e.span().map_or(1, |span| {
            text.get(..span.start)
                .map_or(1, |t| t.matches('\n').count() + 1)
        });
        format!("toml: line {line}: {}", e.message().trim_end())
    })?;
    Ok(from_toml(toml::Value::Table(table)))
}

/// A TOML value as BurntSushi decodes it into `interface{}`: integers `int64`, floats
/// `float64`, datetimes `time.Time` (here its RFC 3339 text, as `toJson` shows it).
fn from_toml(value: toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::from(s),
        toml::Value::Integer(i) => Value::Int64(i),
        toml::Value::Float(f) => Value::Float(f),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::from(datetime(&d)),
        toml::Value::Array(items) => Value::list(items.into_iter().map(from_toml).collect()),
        toml::Value::Table(table) => {
            Value::map(table.into_iter().map(|(k, v)| (k, from_toml(v))).collect())
        }
    }
}

/// Go's `time.RFC3339Nano` text of a TOML datetime (local ones in UTC, as Helm runs them).
fn datetime(d: &toml::value::Datetime) -> String {
    let mut out = String::new();
    match d.date {
        Some(date) => {
            let _ = write!(out, "{:04}-{:02}-{:02}", date.year, date.month, date.day);
        }
        None => out.push_str("0000-01-01"),
    }
    out.push('T');
    match d.time {
        Some(time) => {
            let _ = write!(
                out,
                "{:02}:{:02}:{:02}",
                time.hour, time.minute, time.second
            );
            let nanos = time.nanosecond;
            if nanos > 0 {
                let fraction = format!("{nanos:09}");
                out.push('.');
                out.push_str(fraction.trim_end_matches('0'));
            }
        }
        None => out.push_str("00:00:00"),
    }
    match d.offset {
        Some(toml::value::Offset::Custom { minutes }) if minutes != 0 => {
            let sign = if minutes < 0 { '-' } else { '+' };
            let minutes = minutes.unsigned_abs();
            let _ = write!(out, "{sign}{:02}:{:02}", minutes / 60, minutes % 60);
        }
        _ => out.push('Z'),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toml_of(json: &str) -> String {
        let value: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
        encode(&Value::from_json_floats(&value)).unwrap_or_else(|e| e)
    }

    #[test]
    fn values_encode_as_helm() {
        // Helm v4.2.3: `toToml .Values` for these values.
        let values = r#"{"a": 1, "b": 1.5, "c": "str", "d": true, "e": null, "f": [1, 2],
            "g": {"h": "i", "j": {"k": 1}},
            "l": [{"m": 1}, {"n": 2, "sub": {"x": 1}, "arr": [{"y": 1}]}], "o": [], "p": {},
            "q key": "x\"y\n\tz\u00e9\ud83d\ude00\u0001\u007f\\", "r": 1e21, "s": 1e-7,
            "t": [[1, 2], ["a"]], "u": [1, "a"], "v": 123456789, "w": -0.0, "x.y": 1, "": 2,
            "aa": [{}], "bb": {"cc": [{"dd": {"ee": 1}}]}, "big": 1e20, "small": 0.0001,
            "neg": -3, "Z": 1, "1": 2, "emptys": "", "mixed": [{"a": 1}, 1]}"#;
        assert_eq!(
            toml_of(values),
            "\"\" = 2.0\n1 = 2.0\nZ = 1.0\na = 1.0\nb = 1.5\nbig = 1e+20\nc = \"str\"\nd = true\nemptys = \"\"\nf = [1.0, 2.0]\nmixed = [{a = 1.0}, 1.0]\nneg = -3.0\no = []\n\"q key\" = \"x\\\"y\\n\\tz\u{e9}\u{1F600}\\u0001\\u007f\\\\\"\nr = 1e+21\ns = 1e-07\nsmall = 0.0001\nt = [[1.0, 2.0], [\"a\"]]\nu = [1.0, \"a\"]\nv = 1.23456789e+08\nw = -0.0\n\"x.y\" = 1.0\n\n[[aa]]\n\n[bb]\n\n  [[bb.cc]]\n    [bb.cc.dd]\n      ee = 1.0\n\n[g]\n  h = \"i\"\n  [g.j]\n    k = 1.0\n\n[[l]]\n  m = 1.0\n\n[[l]]\n  n = 2.0\n\n  [[l.arr]]\n    y = 1.0\n  [l.sub]\n    x = 1.0\n\n[p]\n"
        );
        assert_eq!(toml_of("[1, 2]"), "[1.0, 2.0]");
        assert_eq!(
            toml_of("{\"a\": [1, null]}"),
            "toml: cannot encode array with nil element"
        );
        assert_eq!(toml_of("{\"a\": null}"), "");
        assert_eq!(
            encode(&Value::Nil).unwrap_err(),
            "reflect: call of reflect.Value.Type on zero Value"
        );
    }

    #[test]
    fn toml_decodes_as_helm() {
        let text = "a = 1\nb = 1.5\nc = [1, \"x\"]\n[d]\ne = true\nf = 1979-05-27T07:32:00Z\ng = 1979-05-27\nh = 0x10\n";
        let value = decode(text).unwrap_or_default();
        assert_eq!(
            crate::yaml::json::marshal(&value).unwrap_or_default(),
            r#"{"a":1,"b":1.5,"c":[1,"x"],"d":{"e":true,"f":"1979-05-27T07:32:00Z","g":"1979-05-27T00:00:00Z","h":16}}"#
        );
        let arrays = decode("[[x]]\na = 1\n[[x]]\nb = \"s\"\n").unwrap_or_default();
        assert_eq!(
            crate::yaml::json::marshal(&arrays).unwrap_or_default(),
            r#"{"x":[{"a":1},{"b":"s"}]}"#
        );
        assert!(
            decode("a = 1\na = 2")
                .unwrap_err()
                .starts_with("toml: line 2")
        );
        assert!(decode("a = ").unwrap_err().starts_with("toml: line 1"));
    }

    /// 300 values and what Helm v4.2.3's `toToml` gave for each.
    #[test]
    fn helm_answers() {
        let cases: Vec<(String, String)> =
            serde_json::from_str(include_str!("testdata/to_toml.json")).unwrap_or_default();
        assert_eq!(cases.len(), 300);
        for (input, want) in &cases {
            assert_eq!(&toml_of(input), want, "{input}");
        }
    }

    /// Compares with `toToml` answers from the Helm SDK (set `TOML_CASES` to a JSON file of
    /// `[[value_json, expected], …]`).
    #[test]
    #[ignore = "needs a case file from the Helm SDK"]
    fn oracle_cases_from_file() {
        let Ok(path) = std::env::var("TOML_CASES") else {
            return;
        };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let cases: Vec<(String, String)> = serde_json::from_str(&text).unwrap_or_default();
        let mut failures = 0;
        for (input, want) in &cases {
            let got = toml_of(input);
            if &got != want {
                failures += 1;
                if failures < 20 {
                    eprintln!("input {input}\n want {want:?}\n  got {got:?}");
                }
            }
        }
        eprintln!("{failures} of {} cases differ", cases.len());
        assert_eq!(failures, 0);
    }
}
