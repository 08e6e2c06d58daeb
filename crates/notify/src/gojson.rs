//! JSON as Go's `encoding/json` writes it: compact, with `<`, `>`, `&`, U+2028 and U+2029
//! escaped as `\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029` (`json.Marshal`'s HTML-safe
//! default). Signatures (generic-hmac) and transaction IDs (Matrix) are computed over these
//! bytes, so a receiver verifying Flux's format sees the same bytes from Capstan.

use std::io;

use serde::Serialize;
use serde_json::ser::Formatter;

/// Go's `json.Marshal` with HTML escaping.
pub(crate) fn to_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    write(value, true)
}

/// Go's `json.Encoder` with `SetEscapeHTML(false)` (go-github), without the trailing newline.
pub(crate) fn to_vec_unescaped<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    write(value, false)
}

fn write<T: Serialize + ?Sized>(value: &T, escape_html: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut serializer =
        serde_json::Serializer::with_formatter(&mut out, GoFormatter { escape_html });
    // Serialising plain data into a Vec cannot fail: maps have string keys.
    value
        .serialize(&mut serializer)
        .expect("serialising notification JSON");
    out
}

struct GoFormatter {
    escape_html: bool,
}

impl Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            let escape = match c {
                '<' | '>' | '&' if self.escape_html => true,
                '\u{2028}' | '\u{2029}' => true,
                _ => false,
            };
            if escape {
                writer.write_all(&fragment.as_bytes()[start..i])?;
                write!(writer, "\\u{:04x}", c as u32)?;
                start = i + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_like_go() {
        // Go sorts map keys; control characters as serde_json (\n, \u0001 in lower-case hex).
        let value = std::collections::BTreeMap::from([("b", "a<b>&c\u{2028}\n\u{1}é"), ("a", "1")]);
        assert_eq!(
            String::from_utf8(super::to_vec(&value)).unwrap(),
            r#"{"a":"1","b":"a\u003cb\u003e\u0026c\u2028\n\u0001é"}"#
        );
        assert_eq!(
            String::from_utf8(super::to_vec_unescaped(&value)).unwrap(),
            r#"{"a":"1","b":"a<b>&c\u2028\n\u0001é"}"#
        );
    }
}
