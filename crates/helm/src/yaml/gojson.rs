//! Reading JSON as Go's `encoding/json` does into `interface{}`: numbers become `float64`,
//! duplicate keys keep the last value, and a malformed document fails with Go's own words
//! (`invalid character 'b' looking for beginning of object key string`), which Helm's
//! `fromJson` puts in the result for the chart to see.

use std::collections::BTreeMap;

use crate::value::Value;

/// Nesting deeper than this is refused (Go's decoder allows 10000; real documents stay far
/// below this bound, which keeps the recursion within a small thread stack).
const MAX_DEPTH: usize = 1_000;

/// A decoded document and the first error Go's decoder saved while going on (a number out of
/// `float64`'s range decodes as nil and is reported after the whole document).
#[derive(Debug)]
pub struct Decoded {
    /// The value, with nil where a number was out of range.
    pub value: Value,
    /// The first saved error (`json: cannot unmarshal number 1e400 into Go value of type
    /// float64`).
    pub error: Option<String>,
}

/// Decodes `text` as Go's `json.Unmarshal` into `interface{}` does; `Err` is a syntax error,
/// found before any decoding, as Go checks the whole document first.
pub fn decode(text: &str) -> Result<Decoded, String> {
    let mut parser = Reader {
        bytes: text.as_bytes(),
        text,
        pos: 0,
        saved: None,
    };
    parser.skip_space();
    let value = parser.value(0)?;
    parser.skip_space();
    if parser.pos < parser.bytes.len() {
        return Err(parser.invalid("after top-level value"));
    }
    Ok(Decoded {
        value,
        error: parser.saved,
    })
}

/// Parses `text` as Go's `json.Unmarshal` into `interface{}` does: the value, or the syntax
/// error, or the first saved decoding error.
pub fn parse(text: &str) -> Result<Value, String> {
    let decoded = decode(text)?;
    match decoded.error {
        Some(error) => Err(error),
        None => Ok(decoded.value),
    }
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

/// Go's `quoteChar` of one input byte (Go's scanner reports bytes, so the first byte of `é`
/// shows as `'Ã'`).
fn quote_byte(b: u8) -> String {
    let c = char::from(b);
    let inner = match c {
        '\'' => "\\'".to_string(),
        '"' => "\"".to_string(),
        '\\' => "\\\\".to_string(),
        '\n' => "\\n".to_string(),
        '\r' => "\\r".to_string(),
        '\t' => "\\t".to_string(),
        '\u{7}' => "\\a".to_string(),
        '\u{8}' => "\\b".to_string(),
        '\u{c}' => "\\f".to_string(),
        '\u{b}' => "\\v".to_string(),
        _ if b < 0x20 || b == 0x7f => format!("\\x{b:02x}"),
        // strconv.Quote escapes what Go's IsPrint refuses: C1 controls, NBSP, soft hyphen.
        _ if (0x80..=0xa0).contains(&b) || b == 0xad => format!("\\u{b:04x}"),
        _ => c.to_string(),
    };
    format!("'{inner}'")
}

struct Reader<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
    /// The first decoding (not syntax) error, which Go saves and reports at the end.
    saved: Option<String>,
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

    /// Go's complaint about the byte at the cursor. At the end of the input Go's scanner is fed
    /// a space: where a space is wrong that is the complaint, else the input ended early.
    fn invalid(&self, context: &str) -> String {
        match self.bytes.get(self.pos) {
            Some(&b) => format!("invalid character {} {context}", quote_byte(b)),
            None => END.into(),
        }
    }

    /// As [`Reader::invalid`] where a space would be wrong too.
    fn invalid_or_space(&self, context: &str) -> String {
        let b = self.bytes.get(self.pos).copied().unwrap_or(b' ');
        format!("invalid character {} {context}", quote_byte(b))
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
        for expected in word.bytes() {
            if self.bytes.get(self.pos) == Some(&expected) {
                self.pos += 1;
            } else {
                return Err(self.invalid_or_space(&format!(
                    "in literal {word} (expecting {})",
                    quote_byte(expected)
                )));
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
            _ => return Err(self.invalid_or_space("in numeric literal")),
        }
        if self.bytes.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if digits(self) == 0 {
                return Err(self.invalid_or_space("after decimal point in numeric literal"));
            }
        }
        if matches!(self.bytes.get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.bytes.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Err(self.invalid_or_space("in exponent of numeric literal"));
            }
        }
        let literal = &self.text[start..self.pos];
        match literal.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Value::Float(f)),
            _ => {
                // Go saves the error, leaves the value nil and decodes on.
                if self.saved.is_none() {
                    self.saved = Some(format!(
                        "json: cannot unmarshal number {literal} into Go value of type float64"
                    ));
                }
                Ok(Value::Nil)
            }
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
                        return Err(self.invalid_or_space("in string escape code"));
                    };
                    if !matches!(e, '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' | 'u') {
                        return Err(self.invalid("in string escape code"));
                    }
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
                        _ => {}
                    }
                }
                c if u32::from(c) < 0x20 => {
                    return Err(self.invalid("in string literal"));
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
            let Some(d) = self
                .bytes
                .get(self.pos)
                .and_then(|&b| char::from(b).to_digit(16))
            else {
                return Err(self.invalid_or_space("in \\u hexadecimal character escape"));
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
            (
                "tru",
                "invalid character ' ' in literal true (expecting 'e')",
            ),
            (
                "nul",
                "invalid character ' ' in literal null (expecting 'l')",
            ),
            ("{\"\\", "invalid character ' ' in string escape code"),
            (
                "{\"a\":é",
                "invalid character 'Ã' looking for beginning of value",
            ),
            (
                "trux",
                "invalid character 'x' in literal true (expecting 'e')",
            ),
            ("1 2", "invalid character '2' after top-level value"),
            ("\"a\nb\"", "invalid character '\\n' in string literal"),
            ("x", "invalid character 'x' looking for beginning of value"),
            ("-", "invalid character ' ' in numeric literal"),
            (
                "1.",
                "invalid character ' ' after decimal point in numeric literal",
            ),
            (
                "[1e+",
                "invalid character ' ' in exponent of numeric literal",
            ),
            ("[\"a", "unexpected end of JSON input"),
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
