//! Secret data never appears in an error.
//!
//! kube-apiserver decodes a Secret's `data` into bytes before anything looks at the object, so a
//! value that is not base64 fails as a decoding error that names the byte offset and never the
//! value, and its validation prints `<secret contents redacted>` where other kinds print the value.
//! The control plane here keeps objects as JSON and validates them with a generic structural
//! schema whose causes read `Invalid value: <value>: ...`; this module keeps Secrets apart:
//!
//! - `data` is decoded as Go's `base64.StdEncoding` decodes it (padding required, `\r` and `\n`
//!   skipped) at the point where kube-apiserver decodes it, and stored canonical;
//! - a value that does not decode fails with kube-apiserver's own wording for that request:
//!   `400` for create and update, the `500` of server-side apply, the `422` of other patches —
//!   each with the offset (`illegal base64 data at input byte N`) and never the value;
//! - any validation cause under `data` or `stringData` that could carry a value is redacted.

use serde_json::Value;

use crate::error::{ApiError, Cause};
use crate::registry::ResourceType;

/// What kube-apiserver prints in place of Secret data in validation errors.
pub const REDACTED: &str = "<secret contents redacted>";

/// Whether `rt` is the core `Secret` kind.
pub fn is_secret(rt: &ResourceType) -> bool {
    rt.builtin && rt.group.is_empty() && rt.plural == "secrets"
}

/// The first value of a Secret's `data` that is not base64, as the byte offset Go's decoder
/// reports. Valid values are rewritten in canonical form (kube-apiserver stores the decoded bytes,
/// so `aGVs\nbG8=` is read back as `aGVsbG8=`). Objects of other kinds are left alone.
pub fn decode_data(rt: &ResourceType, obj: &mut Value) -> Result<(), usize> {
    if !is_secret(rt) {
        return Ok(());
    }
    let Some(data) = obj.get_mut("data").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    for value in data.values_mut() {
        let Value::String(text) = value else {
            continue;
        };
        let bytes = decode_base64(text.as_bytes())?;
        let canonical = crate::defaults::base64_encode(&bytes);
        if canonical != *text {
            *text = canonical;
        }
    }
    Ok(())
}

/// `illegal base64 data at input byte N`: Go's `base64.CorruptInputError`.
fn illegal(offset: usize) -> String {
    format!("illegal base64 data at input byte {offset}")
}

/// The `400` of a create or update whose Secret `data` is not base64, as kube-apiserver words
/// its decoding errors.
pub fn create_error(rt: &ResourceType, offset: usize) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} in version {version:?} cannot be handled as a {kind}: {}",
        illegal(offset),
        kind = rt.kind,
        version = rt.version,
    ))
}

/// The error of a server-side apply whose result is not a valid Secret: kube-apiserver's field
/// manager fails converting the merged object back to its type, an error without a `Status`,
/// which it serves as a `500` without a reason.
pub fn apply_error(
    rt: &ResourceType,
    namespace: Option<&str>,
    name: &str,
    offset: usize,
) -> ApiError {
    let gvk = format!("{}/{}, Kind={}", rt.group, rt.version, rt.kind);
    ApiError::new(
        500,
        "",
        format!(
            "failed to convert new object ({}/{name}; {gvk}) to proper version: unable to convert unstructured object to {gvk}: error decoding from json: {}",
            namespace.unwrap_or(""),
            illegal(offset),
        ),
    )
}

/// The `422` of a JSON, merge or strategic merge patch whose result is not a valid Secret.
/// kube-apiserver names the field `patch` and prints the whole patched object as its value; a
/// Secret's is redacted here.
pub fn patch_error(offset: usize) -> ApiError {
    ApiError::invalid(
        "",
        "",
        "",
        vec![Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {REDACTED:?}: {}", illegal(offset)),
            field: "patch".into(),
        }],
    )
}

/// Redacts the causes of a Secret's validation that could carry a value of `data` or
/// `stringData`: type errors (which name JSON types), required, too-long, too-many and forbidden
/// causes are kept; any other cause under those fields prints [`REDACTED`] in place of the value.
pub fn redact_causes(rt: &ResourceType, causes: &mut [Cause]) {
    if !is_secret(rt) {
        return;
    }
    for cause in causes {
        let under = |root: &str| {
            cause.field.strip_prefix(root).is_some_and(|rest| {
                rest.is_empty() || rest.starts_with('[') || rest.starts_with('.')
            })
        };
        if !(under("data") || under("stringData")) || value_free(&cause.message) {
            continue;
        }
        cause.message = format!("Invalid value: {REDACTED:?}: invalid value");
    }
}

/// Whether a validation message cannot carry a value of the object.
fn value_free(message: &str) -> bool {
    const TYPES: [&str; 7] = [
        "string", "integer", "number", "boolean", "object", "array", "null",
    ];
    if let Some(rest) = message.strip_prefix("Invalid value: \"") {
        return TYPES.iter().any(|t| {
            rest.strip_prefix(t)
                .and_then(|r| r.strip_prefix("\": "))
                .is_some_and(|detail| {
                    // `<path> in body must be of type <types>: "<type>"`
                    detail.contains(" in body must be of type ")
                        && detail.ends_with(&format!(": \"{t}\""))
                })
        });
    }
    message == "Required value"
        || message.starts_with("Required value: ")
        || message.starts_with("Too long: ")
        || message.starts_with("Too many: ")
        || message.starts_with("Forbidden: ")
}

/// The value of one base64 character, or `None`.
fn sextet(byte: u8) -> Option<u8> {
    match byte {
        b'A'..=b'Z' => Some(byte - b'A'),
        b'a'..=b'z' => Some(byte - b'a' + 26),
        b'0'..=b'9' => Some(byte - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

fn is_newline(byte: u8) -> bool {
    byte == b'\n' || byte == b'\r'
}

/// Decodes standard base64 as Go's `base64.StdEncoding.DecodeString` does: padding is required,
/// `\r` and `\n` are skipped anywhere, trailing bits need not be zero. The error is the offset of
/// Go's `CorruptInputError`, quantum by quantum as Go computes it.
pub fn decode_base64(src: &[u8]) -> Result<Vec<u8>, usize> {
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    while si < src.len() {
        let mut quantum = [0u8; 4];
        let mut length = 4;
        let mut j = 0;
        let mut finished = false;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                // Padding is required: an incomplete quantum is corrupt.
                return Err(si - j);
            }
            let byte = src[si];
            si += 1;
            if let Some(value) = sextet(byte) {
                quantum[j] = value;
                j += 1;
                continue;
            }
            if is_newline(byte) {
                continue;
            }
            if byte != b'=' || j < 2 {
                return Err(si - 1);
            }
            if j == 2 {
                // "==" is expected; the first '=' is consumed.
                while si < src.len() && is_newline(src[si]) {
                    si += 1;
                }
                if si == src.len() {
                    return Err(src.len());
                }
                if src[si] != b'=' {
                    return Err(si - 1);
                }
                si += 1;
            }
            while si < src.len() && is_newline(src[si]) {
                si += 1;
            }
            if si < src.len() {
                // Trailing garbage after the padding.
                return Err(si);
            }
            length = j;
            finished = true;
            break;
        }
        let value = (u32::from(quantum[0]) << 18)
            | (u32::from(quantum[1]) << 12)
            | (u32::from(quantum[2]) << 6)
            | u32::from(quantum[3]);
        let bytes = value.to_be_bytes();
        out.extend_from_slice(&bytes[1..length]);
        if finished {
            break;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
