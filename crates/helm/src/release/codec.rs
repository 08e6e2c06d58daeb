//! The storage drivers' codec: release JSON → gzip (best compression) → base64, and back,
//! accepting plain JSON after the base64 as Helm does for records older than compression.

use std::io::{Read as _, Write as _};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::Release;

/// The most a record may hold once decompressed: a chart is at most 100 MiB
/// ([`crate::chart::MAX_CHART_SIZE`]); base64 inside JSON makes that a third more.
pub const MAX_RELEASE_SIZE: u64 = 160 * 1024 * 1024;

/// The three bytes that open a gzip stream written by Go (`magicGzip`).
const GZIP_MAGIC: [u8; 3] = [0x1f, 0x8b, 0x08];

/// A record that cannot be read. The messages never quote the record: values may hold secrets.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The text is not standard base64.
    #[error("the release is not valid base64 (at byte {offset})")]
    Base64 {
        /// The offset of the first bad byte.
        offset: usize,
    },
    /// The gzip stream is corrupt or truncated.
    #[error("the release's gzip stream is corrupt")]
    Gzip(#[source] std::io::Error),
    /// The decompressed record is larger than [`MAX_RELEASE_SIZE`].
    #[error("the release is larger than {MAX_RELEASE_SIZE} bytes once decompressed")]
    TooLarge,
    /// The JSON is malformed or a field has the wrong type.
    #[error("the release JSON is invalid at {field}: {reason}")]
    Json {
        /// The failing field as a path (`info.status`, `hooks[0].events[1]`, `.` for the whole).
        field: String,
        /// What is wrong, without the value (`expected a string`, `syntax error at line 1`).
        reason: String,
    },
}

/// A record that cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// Serialising the JSON failed (a value JSON cannot hold).
    #[error("cannot encode the release as JSON: {0}")]
    Json(String),
    /// Compressing failed.
    #[error("cannot compress the release")]
    Gzip(#[source] std::io::Error),
}

/// The release as Helm's JSON (`json.Marshal` of `release.Release`).
///
/// # Errors
///
/// A value JSON cannot represent (never for records built from JSON values).
pub fn to_json(release: &Release) -> Result<Vec<u8>, EncodeError> {
    let mut value =
        serde_json::to_value(release).map_err(|e| EncodeError::Json(e.classify_text()))?;
    go_numbers(&mut value);
    // Go writes a map's keys sorted (struct fields keep their order).
    if let Some(config) = value.get_mut("config") {
        sorted_keys(config);
    }
    if let Some(values) = value.pointer_mut("/chart/values") {
        sorted_keys(values);
    }
    let mut json = Vec::new();
    serde::Serialize::serialize(
        &value,
        &mut serde_json::Serializer::with_formatter(&mut json, GoFormatter),
    )
    .map_err(|e| EncodeError::Json(e.classify_text()))?;
    Ok(json)
}

/// Go's `encoding/json` string escaping on top of serde_json's: `<`, `>`, `&`, U+2028 and
/// U+2029 as `\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029` (HTML-safe output).
struct GoFormatter;

impl serde_json::ser::Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (at, c) in fragment.char_indices() {
            let escaped = match c {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[start..at])?;
            writer.write_all(escaped.as_bytes())?;
            start = at + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

fn sorted_keys(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Array(items) => items.iter_mut().for_each(sorted_keys),
        serde_json::Value::Object(map) => {
            map.sort_keys();
            map.values_mut().for_each(sorted_keys);
        }
        _ => {}
    }
}

/// Numbers as Go's `encoding/json` writes a `float64` (what YAML and JSON values are in
/// Helm): a whole number without a fraction (`1`, not `1.0`).
pub(super) fn go_numbers(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Number(number) => {
            if let Some(float) = number.as_f64().filter(|_| number.is_f64())
                && float.fract() == 0.0
                && float.abs() < 1e15
            {
                #[expect(
                    clippy::cast_possible_truncation,
                    reason = "a whole number below 1e15 is exact in an i64"
                )]
                let whole = float as i64;
                *number = whole.into();
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(go_numbers),
        serde_json::Value::Object(map) => map.values_mut().for_each(go_numbers),
        _ => {}
    }
}

/// Encodes a release as Helm's storage drivers do: JSON, gzip at best compression, standard
/// base64. The result is what Helm puts in a Secret's `data.release` (before Kubernetes'
/// own base64 of Secret data).
///
/// # Errors
///
/// See [`to_json`]; compression failing.
pub fn encode(release: &Release) -> Result<String, EncodeError> {
    let json = to_json(release)?;
    let mut gzip = flate2::GzBuilder::new()
        .operating_system(255)
        .write(Vec::new(), flate2::Compression::best());
    gzip.write_all(&json).map_err(EncodeError::Gzip)?;
    let compressed = gzip.finish().map_err(EncodeError::Gzip)?;
    Ok(STANDARD.encode(compressed))
}

/// Decodes a record as Helm's storage drivers do: standard base64, then gzip when the bytes
/// open with gzip's magic, else plain JSON.
///
/// # Errors
///
/// [`DecodeError`]: bad base64, a corrupt gzip stream, a record over [`MAX_RELEASE_SIZE`], or
/// JSON that is not a release (naming the field).
pub fn decode(data: &[u8]) -> Result<Release, DecodeError> {
    let bytes = STANDARD.decode(data).map_err(|e| DecodeError::Base64 {
        offset: match e {
            base64::DecodeError::InvalidByte(offset, _)
            | base64::DecodeError::InvalidLastSymbol(offset, _) => offset,
            base64::DecodeError::InvalidLength(length) => length,
            base64::DecodeError::InvalidPadding => data.len(),
        },
    })?;
    if bytes.len() > 3 && bytes[..3] == GZIP_MAGIC {
        let mut json = Vec::new();
        flate2::read::GzDecoder::new(bytes.as_slice())
            .take(MAX_RELEASE_SIZE + 1)
            .read_to_end(&mut json)
            .map_err(DecodeError::Gzip)?;
        if json.len() as u64 > MAX_RELEASE_SIZE {
            return Err(DecodeError::TooLarge);
        }
        return decode_json(&json);
    }
    decode_json(&bytes)
}

/// Reads a release from its JSON (no base64, no gzip).
///
/// # Errors
///
/// [`DecodeError::Json`], naming the field and never the value.
pub fn decode_json(json: &[u8]) -> Result<Release, DecodeError> {
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let release: Release = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let field = e.path().to_string();
        DecodeError::Json {
            field,
            reason: e.into_inner().classify_text(),
        }
    })?;
    deserializer.end().map_err(|e| DecodeError::Json {
        field: ".".to_string(),
        reason: e.classify_text(),
    })?;
    Ok(release)
}

/// serde_json's error, told without the value it quotes (`invalid type: string "hunter2",
/// expected …` keeps only `expected …`).
trait ClassifyText {
    fn classify_text(&self) -> String;
}

impl ClassifyText for serde_json::Error {
    fn classify_text(&self) -> String {
        let position = format!("line {} column {}", self.line(), self.column());
        match self.classify() {
            serde_json::error::Category::Io => format!("read error at {position}"),
            serde_json::error::Category::Eof => format!("unexpected end at {position}"),
            serde_json::error::Category::Syntax => format!("syntax error at {position}"),
            serde_json::error::Category::Data => {
                let text = self.to_string();
                let text = text
                    .rsplit_once(" at line ")
                    .map_or(text.as_str(), |(head, _)| head);
                let quotes_the_value = ["invalid type", "invalid value", "unknown variant"]
                    .iter()
                    .any(|prefix| text.starts_with(prefix));
                if !quotes_the_value {
                    // serde's own and this module's messages name fields, never values.
                    return text.to_string();
                }
                match text.find("expected") {
                    Some(at) => format!("wrong type or value ({})", &text[at..]),
                    None => "wrong type or value".to_string(),
                }
            }
        }
    }
}
