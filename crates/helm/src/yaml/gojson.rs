//! Reading JSON as Go's `encoding/json` does into `interface{}`: numbers become `float64`,
//! duplicate keys keep the last value, and a malformed document fails with Go's own words
//! (`invalid character 'b' looking for beginning of object key string`), which Helm's
//! `fromJson` puts in the result for the chart to see.

use std::collections::BTreeMap;

use crate::value::Value;

/// Nesting deeper than this is refused (Go's decoder allows 10000; real documents stay far
/// below this bound, which keeps the recursion within a small thread stack).
const MAX_DEPTH: usize = 1_000;

/// Parses `text` as Go's `json.Unmarshal` into `interface{}` does.
pub fn parse(text: &str) -> Result<Value, String> {
    let mut parser = Reader {
        bytes: text.as_bytes(),
        text,
        pos: 0,
    };
    parser.skip_space();
    let value = parser.value(0)?;
    parser.skip_space();
    if let Some(c) = parser.peek_char() {
        return Err(format!(
            "invalid character {} after top-level value",
            quote_char(c)
        ));
    }
    Ok(value)
}

/// The JSON kind Go names in "cannot unmarshal KIND into Go value of type …".
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Nil => "null",
        Value::Bool(_) => "bool",
        Value::Int(_) | Value::Int64(_) | Value::Float(_) => "number",
        Value::String(_) | Value::Bytes(_) => "string",
        Value::List(..) => "array",
        Value::Map(_) | Value::Object(_) => "object",
    }
}

/// Go's `quoteChar`: `'x'`, with `\'` and `"` special-cased and controls escaped.
fn quote_char(c: char) -> String {
    match c {
        '\'' => "'\\''".into(),
        '"' => "'\"'".into(),
        c => {
            let quoted = format!("{:?}", c.to_string());
            // Rust's debug quoting matches strconv.Quote for the characters that reach here
            // except for a few controls; both give \n, \t, \r, \\ and \u{..} forms differ.
            let inner = &quoted[1..quoted.len() - 1];
            let inner = if inner.starts_with("\\u{") {
                go_escape(c)
            } else {
                inner.to_string()
            };
            format!("'{inner}'")
        }
    }
}

fn go_escape(c: char) -> String {
    let code = u32::from(c);
    match c {
        '\u{7}' => "\\a".into(),
        '\u{8}' => "\\b".into(),
        '\u{c}' => "\\f".into(),
        '\u{b}' => "\\v".into(),
        _ if code < 0x80 => format!("\\x{code:02x}"),
        _ if code <= 0xFFFF => format!("\\u{code:04x}"),
        _ => format!("\\U{code:08x}"),
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
}

const END: &str = "unexpected end of JSON input";

impl Reader<'_> {
    fn peek_char(&self) -> Option<char> {
        self.text
            .get(self.pos..)
            .and_then(|rest| rest.chars().next())
    }

    fn skip_space(&mut self) {
        while matches!(self.bytes.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn invalid(&self, context: &str) -> String {
        match self.peek_char() {
            Some(c) => format!("invalid character {} {context}", quote_char(c)),
            None => END.into(),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err("exceeded max depth".into());
        }
        match self.bytes.get(self.pos) {
            None => Err(END.into()),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Value::from),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Nil),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.invalid("looking for beginning of value")),
        }
    }

    fn literal(&mut self, word: &str, value: Value) -> Result<Value, String> {
        for expected in word.chars() {
            match self.peek_char() {
                Some(c) if c == expected => self.pos += 1,
                Some(c) => {
                    return Err(format!(
                        "invalid character {} in literal {word} (expecting {})",
                        quote_char(c),
                        quote_char(expected)
                    ));
                }
                None => return Err(END.into()),
            }
        }
        Ok(value)
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.pos;
        let digits = |r: &mut Self| {
            let s = r.pos;
            while r.bytes.get(r.pos).is_some_and(u8::is_ascii_digit) {
                r.pos += 1;
            }
            r.pos - s
        };
        if self.bytes.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        match self.bytes.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            Some(_) => return Err(self.invalid("in numeric literal")),
            None => return Err(END.into()),
        }
        if self.bytes.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if digits(self) == 0 {
                return Err(if self.pos >= self.bytes.len() {
                    END.into()
                } else {
                    self.invalid("after decimal point in numeric literal")
                });
            }
        }
        if matches!(self.bytes.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.bytes.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Err(if self.pos >= self.bytes.len() {
                    END.into()
                } else {
                    self.invalid("in exponent of numeric literal")
                });
            }
        }
        let literal = &self.text[start..self.pos];
        match literal.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Value::Float(f)),
            _ => Err(format!(
                "json: cannot unmarshal number {literal} into Go value of type float64"
            )),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        // At the opening quote.
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek_char() else {
                return Err(END.into());
            };
            match c {
                '"' => {
                    self.pos += 1;
                    return Ok(out);
                }
                '\\' => {
                    self.pos += 1;
                    let Some(e) = self.peek_char() else {
                        return Err(END.into());
                    };
                    self.pos += e.len_utf8();
                    match e {
                        '"' => out.push('"'),
                        '\\' => out.push('\\'),
                        '/' => out.push('/'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'u' => {
                            let first = self.hex4()?;
                            if (0xD800..0xDC00).contains(&first) {
                                // A high surrogate: Go pairs it with a following \uDC00-\uDFFF
                                // escape, else writes U+FFFD.
                                let save = self.pos;
                                if self.bytes.get(self.pos) == Some(&b'\\')
                                    && self.bytes.get(self.pos + 1) == Some(&b'u')
                                {
                                    self.pos += 2;
                                    let second = self.hex4()?;
                                    if (0xDC00..0xE000).contains(&second) {
                                        let code =
                                            0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                                        continue;
                                    }
                                }
                                self.pos = save;
                                out.push('\u{fffd}');
                            } else {
                                out.push(char::from_u32(first).unwrap_or('\u{fffd}'));
                            }
                        }
                        other => {
                            return Err(format!(
                                "invalid character {} in string escape code",
                                quote_char(other)
                            ));
                        }
                    }
                }
                c if u32::from(c) < 0x20 => {
                    return Err(format!(
                        "invalid character {} in string literal",
                        quote_char(c)
                    ));
                }
                c => {
                    out.push(c);
                    self.pos += c.len_utf8();
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let mut code = 0;
        for _ in 0..4 {
            let Some(c) = self.peek_char() else {
                return Err(END.into());
            };
            let Some(d) = c.to_digit(16) else {
                return Err(format!(
                    "invalid character {} in \\u hexadecimal character escape",
                    quote_char(c)
                ));
            };
            code = code * 16 + d;
            self.pos += 1;
        }
        Ok(code)
    }

    fn array(&mut self, depth: usize) -> Result<Value, String> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_space();
        if self.bytes.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Ok(Value::list(items));
        }
        loop {
            self.skip_space();
            items.push(self.value(depth + 1)?);
            self.skip_space();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::list(items));
                }
                _ => return Err(self.invalid("after array element")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, String> {
        self.pos += 1;
        let mut map = BTreeMap::new();
        self.skip_space();
        if self.bytes.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(Value::map(map));
        }
        loop {
            self.skip_space();
            if self.bytes.get(self.pos) != Some(&b'"') {
                return Err(self.invalid("looking for beginning of object key string"));
            }
            let key = self.string()?;
            self.skip_space();
            if self.bytes.get(self.pos) != Some(&b':') {
                return Err(self.invalid("after object key"));
            }
            self.pos += 1;
            self.skip_space();
            let value = self.value(depth + 1)?;
            map.insert(key, value);
            self.skip_space();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::map(map));
                }
                _ => return Err(self.invalid("after object key:value pair")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_go_writes_them() {
        for (text, want) in [
            (
                "{bad",
                "invalid character 'b' looking for beginning of object key string",
            ),
            ("", "unexpected end of JSON input"),
            ("{\"a\":1", "unexpected end of JSON input"),
            ("[1 2]", "invalid character '2' after array element"),
            ("{\"a\" 1}", "invalid character '1' after object key"),
            (
                "{\"a\":1 \"b\"}",
                "invalid character '\"' after object key:value pair",
            ),
            ("tru", "unexpected end of JSON input"),
            (
                "trux",
                "invalid character 'x' in literal true (expecting 'e')",
            ),
            ("1 2", "invalid character '2' after top-level value"),
            ("\"a\nb\"", "invalid character '\\n' in string literal"),
            ("x", "invalid character 'x' looking for beginning of value"),
            ("-", "unexpected end of JSON input"),
            ("1.", "unexpected end of JSON input"),
            (
                "1.x",
                "invalid character 'x' after decimal point in numeric literal",
            ),
            (
                "1e400",
                "json: cannot unmarshal number 1e400 into Go value of type float64",
            ),
        ] {
            assert_eq!(parse(text).err().as_deref(), Some(want), "{text}");
        }
    }

    #[test]
    fn values_read_as_go() {
        let v = parse(r#"{"b": [1, 2.5, true, null, "\u00e9\ud83d\ude00"], "a": {}, "b2": 1e3}"#);
        assert_eq!(
            v.map(|v| v.to_string()).unwrap_or_default(),
            "map[a:map[] b:[1 2.5 true <nil> é😀] b2:1000]"
        );
    }
}
