//! Reading and writing the file formats: where the metadata is, and how values are laid out.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::tree::Metadata;
use crate::{Error, Format};

/// The key under which sops keeps its metadata (YAML, JSON, binary) or the prefix of the
/// flattened metadata keys (dotenv: `sops_mac`, `sops_age__list_0__map_enc`, ...).
const SOPS: &str = "sops";

fn malformed(format: Format, reason: impl Into<String>) -> Error {
    Error::Malformed {
        format: format.name(),
        reason: reason.into(),
    }
}

/// Whether `content` is a sops-encrypted file of `format`: it parses as that format and carries
/// sops metadata with a `mac` or `lastmodified`. Anything else (plain files, other formats,
/// garbage) is not encrypted and passes through.
pub fn is_encrypted(content: &[u8], format: Format) -> bool {
    // Cheap filter first: every encrypted file names its metadata.
    let Ok(text) = std::str::from_utf8(content) else {
        return false;
    };
    if !text.contains("lastmodified") {
        return false;
    }
    load(content, format).is_ok()
}

/// Parses an encrypted file: its values (without the metadata) and its metadata.
pub(crate) fn load(content: &[u8], format: Format) -> Result<(Value, Metadata), Error> {
    let text = std::str::from_utf8(content)
        .map_err(|_| malformed(format, "the file is not UTF-8 text"))?;
    match format {
        Format::Yaml | Format::Json | Format::Binary => {
            let mut document: Value = if format == Format::Yaml {
                let options = serde_saphyr::options! { strict_booleans: true, with_snippet: false };
                serde_saphyr::from_str_with_options(text, options).map_err(|e| {
                    malformed(
                        format,
                        format!("does not parse: {}", first_line(&e.to_string())),
                    )
                })?
            } else {
                serde_json::from_str(text).map_err(|e| {
                    malformed(
                        format,
                        format!(
                            "does not parse as JSON: line {}, column {}",
                            e.line(),
                            e.column()
                        ),
                    )
                })?
            };
            let object = document
                .as_object_mut()
                .ok_or_else(|| malformed(format, "the top level is not a mapping"))?;
            let metadata = object
                .shift_remove(SOPS)
                .ok_or_else(|| malformed(format, "no top-level sops metadata"))?;
            if format == Format::Binary && !object.get("data").is_some_and(Value::is_string) {
                return Err(malformed(format, "no data value"));
            }
            Ok((document, Metadata::from_value(&metadata, format.name())?))
        }
        Format::Dotenv => load_dotenv(text, format),
        Format::Ini => load_ini(text, format),
    }
}

fn load_dotenv(text: &str, format: Format) -> Result<(Value, Metadata), Error> {
    let mut values = Map::new();
    let mut metadata = Value::Object(Map::new());
    for line in text.split('\n') {
        if line.is_empty() || line.starts_with('#') {
            // Comments are not covered by the MAC; they are dropped.
            continue;
        }
        let (name, value) = line
            .split_once('=')
            .ok_or_else(|| malformed(format, "a line is not KEY=value"))?;
        let value = value.replace("\\n", "\n");
        match name.strip_prefix("sops_") {
            Some(flat) => unflatten(&mut metadata, flat, Value::String(value)),
            None => {
                values.insert(name.to_string(), Value::String(value));
            }
        }
    }
    if metadata.as_object().is_some_and(Map::is_empty) {
        return Err(malformed(format, "no sops_* metadata"));
    }
    Ok((
        Value::Object(values),
        Metadata::from_value(&metadata, format.name())?,
    ))
}

fn load_ini(text: &str, format: Format) -> Result<(Value, Metadata), Error> {
    let mut sections: Map<String, Value> = Map::new();
    let mut current = "DEFAULT".to_string();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = name.trim().to_string();
            sections
                .entry(current.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            continue;
        }
        let (name, value) = line
            .split_once('=')
            .ok_or_else(|| malformed(format, "a line is not key = value"))?;
        let section = sections
            .entry(current.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(section) = section {
            section.insert(
                name.trim().to_string(),
                Value::String(unquote(value.trim()).replace("\\n", "\n")),
            );
        }
    }
    let flat = sections
        .shift_remove(SOPS)
        .ok_or_else(|| malformed(format, "no [sops] section"))?;
    let mut metadata = Value::Object(Map::new());
    for (name, value) in flat.as_object().into_iter().flatten() {
        unflatten(&mut metadata, name, value.clone());
    }
    Ok((
        Value::Object(sections),
        Metadata::from_value(&metadata, format.name())?,
    ))
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

fn unquote(value: &str) -> &str {
    for quote in ["\"\"\"", "\"", "`"] {
        if value.len() >= 2 * quote.len()
            && let Some(inner) = value
                .strip_prefix(quote)
                .and_then(|v| v.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}

/// A path token of sops's flattened metadata keys.
enum Token {
    Map(String),
    List(usize),
}

/// The longest list a flattened key may index (recipients, key groups): a hostile index
/// (`age__list_4000000000__map_enc`) must not make the list that long.
const MAX_LIST: usize = 1024;

/// Sets the value of a flattened key (`age__list_0__map_enc`) in a nested value; a key
/// indexing past [`MAX_LIST`] is dropped.
fn unflatten(root: &mut Value, flat: &str, value: Value) {
    const MAP: &str = "__map_";
    const LIST: &str = "__list_";
    let mut tokens = Vec::new();
    let mut rest = flat;
    let mut kind_is_map = true;
    loop {
        let next = [rest.find(MAP), rest.find(LIST)]
            .into_iter()
            .flatten()
            .min();
        let (head, tail) = match next {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, ""),
        };
        if kind_is_map {
            tokens.push(Token::Map(head.to_string()));
        } else {
            tokens.push(Token::List(head.parse().unwrap_or(0)));
        }
        if let Some(t) = tail.strip_prefix(MAP) {
            kind_is_map = true;
            rest = t;
        } else if let Some(t) = tail.strip_prefix(LIST) {
            kind_is_map = false;
            rest = t;
        } else {
            break;
        }
    }
    let mut node = root;
    for (index, token) in tokens.iter().enumerate() {
        let last = index + 1 == tokens.len();
        let child_default = || match tokens.get(index + 1) {
            Some(Token::List(_)) => Value::Array(Vec::new()),
            _ => Value::Object(Map::new()),
        };
        node = match token {
            Token::Map(name) => {
                if !node.is_object() {
                    *node = Value::Object(Map::new());
                }
                let Value::Object(map) = node else { return };
                if last {
                    map.insert(name.clone(), value);
                    return;
                }
                map.entry(name.clone()).or_insert_with(child_default)
            }
            Token::List(position) => {
                if *position >= MAX_LIST {
                    return;
                }
                if !node.is_array() {
                    *node = Value::Array(Vec::new());
                }
                let Value::Array(items) = node else { return };
                while items.len() <= *position {
                    items.push(Value::Null);
                }
                if last {
                    items[*position] = value;
                    return;
                }
                if items[*position].is_null() {
                    items[*position] = child_default();
                }
                &mut items[*position]
            }
        };
    }
}

/// Writes decrypted values in `format`.
pub(crate) fn emit(document: &Value, format: Format) -> Result<Vec<u8>, Error> {
    let scalar = |value: &Value| match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    match format {
        Format::Yaml => serde_saphyr::to_string(document)
            .map(String::into_bytes)
            .map_err(|_| malformed(format, "the decrypted document cannot be written as YAML")),
        Format::Json => {
            let mut out = serde_json::to_vec_pretty(document).map_err(|_| {
                malformed(format, "the decrypted document cannot be written as JSON")
            })?;
            out.push(b'\n');
            Ok(out)
        }
        Format::Binary => Ok(document
            .get("data")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .as_bytes()
            .to_vec()),
        Format::Dotenv => {
            let mut out = String::new();
            for (name, value) in document.as_object().into_iter().flatten() {
                out.push_str(name);
                out.push('=');
                out.push_str(&scalar(value).replace('\n', "\\n"));
                out.push('\n');
            }
            Ok(out.into_bytes())
        }
        Format::Ini => {
            let mut out = String::new();
            for (section, values) in document.as_object().into_iter().flatten() {
                let Some(values) = values.as_object() else {
                    continue;
                };
                if section != "DEFAULT" {
                    let _ = writeln!(out, "[{section}]");
                } else if values.is_empty() {
                    continue;
                }
                for (name, value) in values {
                    let _ = writeln!(out, "{name} = {}", scalar(value).replace('\n', "\\n"));
                }
                out.push('\n');
            }
            Ok(out.into_bytes())
        }
    }
}
