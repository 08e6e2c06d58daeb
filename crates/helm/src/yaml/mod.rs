//! YAML and JSON as Helm reads and writes them: values files and `fromYaml` through
//! `sigs.k8s.io/yaml` (YAML 1.1 scalars, numbers as `float64`), `toYaml` byte-for-byte as Go's
//! `yaml.v2` emits it, `toJson` as `encoding/json` writes it, `toToml` as BurntSushi's encoder.

use crate::value::Value;

mod emit;
pub mod gojson;
pub mod json;
mod read;
mod resolve;
pub mod toml;

/// An error reading YAML or JSON, with Go's wording where charts can see it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// The message.
    pub message: String,
}

/// Reads one YAML document as Helm's `yaml.Unmarshal` into `interface{}` does (numbers become
/// `float64`); an empty document is `null`. Only the first document of a stream counts, as in
/// Go; errors read as Go's (`error converting YAML to JSON: yaml: line 3: …`).
pub fn parse(text: &str) -> Result<serde_json::Value, Error> {
    read::parse(text)
}

/// [`parse`] for reading a Kubernetes manifest's head (Helm's `SimpleHead`): the same checks
/// and errors, but only `apiVersion`, `kind`, `metadata.name` and `metadata.annotations` are
/// converted (found by any case of their names); other values of the top map and of
/// `metadata` are `null`.
pub(crate) fn parse_head(text: &str) -> Result<serde_json::Value, Error> {
    read::parse_head(text)
}

/// `toYaml`: the value as `sigs.k8s.io/yaml.Marshal` writes it (with its trailing newline).
pub fn to_yaml(value: &Value) -> Result<String, Error> {
    emit::to_yaml(value)
}

/// `toYamlPretty`: the value as `yaml.v3`'s encoder with an indent of 2 writes it (sequences
/// indented under their key), with its trailing newline.
pub fn to_yaml_pretty(value: &Value) -> Result<String, Error> {
    emit::to_yaml_with(value, emit::Flavour::V3)
}

/// Splits a values file into its YAML documents as Helm's `LoadValues` does (Kubernetes'
/// `YAMLReader`): a line starting with `---` ends a document and may be followed only by
/// spaces or a comment; empty documents are skipped. Helm reads each document with [`parse`]
/// and merges them in order (a chart's `values.yaml` may hold several).
///
/// The error is Kubernetes' (`invalid Yaml document separator: x`); Helm prefixes it with
/// `error reading yaml document: `.
pub fn split_documents(text: &str) -> Result<Vec<&str>, Error> {
    let mut documents = Vec::new();
    let mut start = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("---") {
            let trimmed = rest.trim();
            if !trimmed.is_empty() && !trimmed.starts_with('#') {
                return Err(Error {
                    message: format!("invalid Yaml document separator: {trimmed}"),
                });
            }
            if offset > start {
                documents.push(&text[start..offset]);
            }
            start = offset + line.len();
        }
        offset += line.len();
    }
    if text.len() > start {
        documents.push(&text[start..]);
    }
    Ok(documents)
}

/// Bytes as a Go string seen through `range` or `encoding/json`: each byte that is not part
/// of valid UTF-8 becomes U+FFFD on its own (Rust's lossy conversion merges runs).
pub fn go_lossy(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for _ in chunk.invalid() {
            out.push('\u{fffd}');
        }
    }
    out
}

fn base64_value(c: u8) -> Option<u32> {
    match c {
        b'A'..=b'Z' => Some(u32::from(c - b'A')),
        b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
        b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Go's `base64.StdEncoding.DecodeString`: newlines skipped, padding required; the error is
/// the input offset Go reports (`illegal base64 data at input byte N`).
pub fn base64_decode(src: &[u8]) -> Result<Vec<u8>, usize> {
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    let skip_newlines = |si: &mut usize| {
        while *si < src.len() && matches!(src[*si], b'\n' | b'\r') {
            *si += 1;
        }
    };
    loop {
        let mut quantum = [0u32; 4];
        let mut len = 4;
        let mut j = 0;
        let mut done = false;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                // Padding is required: a short final quantum is corrupt.
                return Err(si - j);
            }
            let c = src[si];
            si += 1;
            if let Some(v) = base64_value(c) {
                quantum[j] = v;
                j += 1;
                continue;
            }
            if c == b'\n' || c == b'\r' {
                continue;
            }
            if c != b'=' {
                return Err(si - 1);
            }
            match j {
                0 | 1 => return Err(si - 1),
                2 => {
                    skip_newlines(&mut si);
                    if si == src.len() {
                        return Err(src.len());
                    }
                    if src[si] != b'=' {
                        return Err(si - 1);
                    }
                    si += 1;
                }
                _ => {}
            }
            skip_newlines(&mut si);
            if si < src.len() {
                return Err(si);
            }
            len = j;
            done = true;
            break;
        }
        let bits = (quantum[0] << 18) | (quantum[1] << 12) | (quantum[2] << 6) | quantum[3];
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..len]);
        if done {
            return Ok(out);
        }
    }
}
