//! Request bodies in the Kubernetes protobuf encoding (`application/vnd.kubernetes.protobuf`).
//!
//! client-go's typed clientsets send built-in objects this way (`kubectl create namespace`,
//! `kubectl create configmap`, ...), and a real API server accepts it. Only decoding is needed:
//! responses stay JSON, which those clients also accept.
//!
//! The wire format is the `k8s\0` magic followed by a `runtime.Unknown` envelope holding the
//! object's `apiVersion`/`kind` and its encoded bytes. Field numbers and JSON names come from
//! `protobuf/messages.txt`, a table generated from the upstream `generated.proto` files by
//! `scripts/protobuf-table.py`.
//!
//! # Errors
//! A kind missing from the table is `415 Unsupported Media Type` (send JSON instead); malformed
//! bytes and unknown field numbers are `400 Bad Request` naming the message and field.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

/// The media type of the Kubernetes protobuf encoding.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

const MAGIC: &[u8] = b"k8s\0";
const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.";

/// Singular fields whose zero value is meaningful (pointers in the Go types): kept when zero.
/// Every other zero scalar is what Go's encoder writes for an unset value, and is dropped.
const KEEP_ZERO: &[&str] = &[
    "replicas",
    "automountServiceAccountToken",
    "immutable",
    "suspend",
    "parallelism",
    "completions",
    "backoffLimit",
    "optional",
    "minAvailable",
    "maxUnavailable",
    "maxSurge",
    "value",
    "terminationGracePeriodSeconds",
    "runAsUser",
    "runAsGroup",
    "runAsNonRoot",
    "readOnlyRootFilesystem",
    "allowPrivilegeEscalation",
    "privileged",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Optional,
    Repeated,
    Map,
}

#[derive(Debug)]
struct Field {
    name: String,
    label: Label,
    /// A scalar type name or a message's full name; for maps, the value type.
    type_: String,
}

type Messages = HashMap<String, HashMap<u32, Field>>;

fn messages() -> &'static Messages {
    static TABLE: OnceLock<Messages> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut out = Messages::new();
        let mut current: Option<&mut HashMap<u32, Field>> = None;
        for line in include_str!("protobuf/messages.txt").lines() {
            if let Some(name) = line.strip_prefix("M ") {
                current = Some(out.entry(name.to_owned()).or_default());
                continue;
            }
            let parts: Vec<&str> = line.split(' ').collect();
            let (Some(fields), [number, name, label, type_]) = (current.as_mut(), parts.as_slice()) else { continue };
            let Ok(number) = number.parse() else { continue };
            let (label, type_) = match *label {
                "r" => (Label::Repeated, *type_),
                "m" => (Label::Map, type_.split_once(',').map_or(*type_, |(_, v)| v)),
                _ => (Label::Optional, *type_),
            };
            fields.insert(number, Field { name: (*name).to_owned(), label, type_: type_.to_owned() });
        }
        out
    })
}

/// Whether a `Content-Type` names the protobuf encoding.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type.split(';').next().is_some_and(|t| t.trim() == MEDIA_TYPE)
}

/// The message of a kind: `apps/v1` `Deployment` is `k8s.io.api.apps.v1.Deployment`.
fn message_name(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let package = if group.is_empty() { "core" } else { group.split('.').next().unwrap_or(group) };
    format!("k8s.io.api.{package}.{version}.{kind}")
}

/// Decodes a protobuf-encoded object into its JSON form (with `apiVersion` and `kind`).
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| ApiError::bad_request("protobuf body: missing the k8s\\0 prefix"))?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    let mut reader = Reader { bytes: envelope, message: "runtime.Unknown" };
    while let Some((number, wire)) = reader.key()? {
        match (number, wire) {
            (1, Wire::Len) => {
                let mut meta = Reader { bytes: reader.len_delimited()?, message: "runtime.TypeMeta" };
                while let Some((n, w)) = meta.key()? {
                    match (n, w) {
                        (1, Wire::Len) => api_version = meta.string()?,
                        (2, Wire::Len) => kind = meta.string()?,
                        _ => meta.skip(w)?,
                    }
                }
            }
            (2, Wire::Len) => raw = reader.len_delimited()?,
            (3, Wire::Len) => {
                let encoding = reader.string()?;
                if !encoding.is_empty() {
                    return Err(ApiError::unsupported_media_type(format!(
                        "protobuf body: unsupported content encoding {encoding:?}"
                    )));
                }
            }
            _ => reader.skip(wire)?,
        }
    }
    if api_version.is_empty() || kind.is_empty() {
        return Err(ApiError::bad_request("protobuf body: the envelope has no apiVersion or kind"));
    }
    let message = message_name(&api_version, &kind);
    if !messages().contains_key(&message) {
        return Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format: {kind} in {api_version} cannot be decoded from protobuf - accepted media types include: application/json, application/yaml"
        )));
    }
    let mut object = Map::new();
    object.insert("apiVersion".into(), Value::String(api_version));
    object.insert("kind".into(), Value::String(kind));
    if let Value::Object(fields) = decode_message(&message, raw)? {
        object.extend(fields);
    }
    Ok(Value::Object(object))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    Varint,
    Fixed64,
    Len,
    Fixed32,
}

struct Reader<'a> {
    bytes: &'a [u8],
    message: &'a str,
}

impl<'a> Reader<'a> {
    fn error(&self, what: &str) -> ApiError {
        ApiError::bad_request(format!("protobuf body: {what} in {}", self.message))
    }

    fn varint(&mut self) -> ApiResult<u64> {
        let mut value = 0u64;
        for (i, b) in self.bytes.iter().enumerate().take(10) {
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                self.bytes = &self.bytes[i + 1..];
                return Ok(value);
            }
        }
        Err(self.error("a truncated varint"))
    }

    fn take(&mut self, n: usize) -> ApiResult<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(self.error("a truncated field"));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn key(&mut self) -> ApiResult<Option<(u32, Wire)>> {
        if self.bytes.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let wire = match key & 7 {
            0 => Wire::Varint,
            1 => Wire::Fixed64,
            2 => Wire::Len,
            5 => Wire::Fixed32,
            other => return Err(self.error(&format!("unsupported wire type {other}"))),
        };
        let number = u32::try_from(key >> 3).map_err(|_| self.error("a field number out of range"))?;
        Ok(Some((number, wire)))
    }

    fn len_delimited(&mut self) -> ApiResult<&'a [u8]> {
        let n = usize::try_from(self.varint()?).map_err(|_| self.error("a length out of range"))?;
        self.take(n)
    }

    fn string(&mut self) -> ApiResult<String> {
        let bytes = self.len_delimited()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.error("a string that is not UTF-8"))
    }

    fn fixed(&mut self, wire: Wire) -> ApiResult<u64> {
        Ok(match wire {
            Wire::Fixed64 => u64::from_le_bytes(self.take(8)?.try_into().unwrap_or([0; 8])),
            _ => u64::from(u32::from_le_bytes(self.take(4)?.try_into().unwrap_or([0; 4]))),
        })
    }

    fn skip(&mut self, wire: Wire) -> ApiResult<()> {
        match wire {
            Wire::Varint => self.varint().map(drop),
            Wire::Fixed64 => self.take(8).map(drop),
            Wire::Fixed32 => self.take(4).map(drop),
            Wire::Len => self.len_delimited().map(drop),
        }
    }
}

/// One scalar value of `type_` read from `reader` with wire type `wire`.
fn scalar(reader: &mut Reader<'_>, type_: &str, wire: Wire) -> ApiResult<Value> {
    let mismatch = |r: &Reader<'_>| r.error(&format!("a {type_} field with the wrong wire type"));
    Ok(match (type_, wire) {
        ("string", Wire::Len) => Value::String(reader.string()?),
        ("bytes", Wire::Len) => Value::String(crate::defaults::base64_encode(reader.len_delimited()?)),
        ("bool", Wire::Varint) => Value::Bool(reader.varint()? != 0),
        // Negative int32s are sign-extended to ten bytes: the low 32 bits carry the value.
        #[allow(clippy::cast_possible_truncation)]
        ("int32", Wire::Varint) => Value::from(reader.varint()? as u32 as i32),
        #[allow(clippy::cast_possible_wrap)]
        ("int64", Wire::Varint) => Value::from(reader.varint()? as i64),
        ("uint32" | "uint64", Wire::Varint) => Value::from(reader.varint()?),
        ("fixed64", Wire::Fixed64) => Value::from(reader.fixed(wire)?),
        #[allow(clippy::cast_possible_wrap)]
        ("sfixed64", Wire::Fixed64) => Value::from(reader.fixed(wire)? as i64),
        ("double", Wire::Fixed64) => Value::from(f64::from_bits(reader.fixed(wire)?)),
        #[allow(clippy::cast_possible_truncation)]
        ("float", Wire::Fixed32) => Value::from(f64::from(f32::from_bits(reader.fixed(wire)? as u32))),
        _ => return Err(mismatch(reader)),
    })
}

fn is_scalar(type_: &str) -> bool {
    !type_.contains('.')
}

/// Whether a decoded singular value is Go's zero value for an unset field.
fn is_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Null => true,
        _ => false,
    }
}

/// Decodes `bytes` as the message `name`, special-casing the types whose JSON form is not an object.
fn decode_message(name: &str, bytes: &[u8]) -> ApiResult<Value> {
    let short = name.rsplit('.').next().unwrap_or(name);
    let mut reader = Reader { bytes, message: short };
    let mut object = Map::new();
    let fields = messages()
        .get(name)
        .ok_or_else(|| ApiError::unsupported_media_type(format!("protobuf body: message {name} is not supported")))?;
    let mut numbers: HashMap<&str, Value> = HashMap::new();
    while let Some((number, wire)) = reader.key()? {
        let Some(field) = fields.get(&number) else {
            return Err(reader.error(&format!("unknown field number {number}")));
        };
        match field.label {
            Label::Map => {
                let mut entry = Reader { bytes: reader.len_delimited()?, message: short };
                let (mut key, mut value) = (String::new(), None);
                while let Some((n, w)) = entry.key()? {
                    match n {
                        1 => key = entry.string()?,
                        2 if is_scalar(&field.type_) => value = Some(scalar(&mut entry, &field.type_, w)?),
                        2 => value = Some(decode_message(&field.type_, entry.len_delimited()?)?),
                        _ => entry.skip(w)?,
                    }
                }
                let value = value.unwrap_or_else(|| match field.type_.as_str() {
                    "string" | "bytes" => Value::String(String::new()),
                    _ => Value::Null,
                });
                object
                    .entry(field.name.clone())
                    .or_insert_with(|| Value::Object(Map::new()))
                    .as_object_mut()
                    .map(|m| m.insert(key, value));
            }
            Label::Repeated => {
                let list = object.entry(field.name.clone()).or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(list) = list else { continue };
                if !is_scalar(&field.type_) {
                    list.push(decode_message(&field.type_, reader.len_delimited()?)?);
                } else if wire == Wire::Len && !matches!(field.type_.as_str(), "string" | "bytes") {
                    // A packed run of numbers.
                    let mut packed = Reader { bytes: reader.len_delimited()?, message: short };
                    let inner = match field.type_.as_str() {
                        "double" | "fixed64" | "sfixed64" => Wire::Fixed64,
                        "float" => Wire::Fixed32,
                        _ => Wire::Varint,
                    };
                    while !packed.bytes.is_empty() {
                        list.push(scalar(&mut packed, &field.type_, inner)?);
                    }
                } else {
                    list.push(scalar(&mut reader, &field.type_, wire)?);
                }
            }
            Label::Optional => {
                let value = if is_scalar(&field.type_) {
                    scalar(&mut reader, &field.type_, wire)?
                } else if wire == Wire::Len {
                    decode_message(&field.type_, reader.len_delimited()?)?
                } else {
                    return Err(reader.error(&format!("field {} with the wrong wire type", field.name)));
                };
                numbers.insert(field.name.as_str(), value.clone());
                object.insert(field.name.clone(), value);
            }
        }
    }
    if let Some(special) = special(name, &numbers)? {
        return Ok(special);
    }
    object.retain(|k, v| {
        let singular = numbers.contains_key(k.as_str());
        !(singular && is_zero(v) && !KEEP_ZERO.contains(&k.as_str()))
    });
    Ok(Value::Object(object))
}

/// The JSON form of the types that do not encode as objects; `None` for ordinary messages.
fn special(name: &str, fields: &HashMap<&str, Value>) -> ApiResult<Option<Value>> {
    let int = |k: &str| fields.get(k).and_then(Value::as_i64).unwrap_or(0);
    let text = |k: &str| fields.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let Some(short) = name.strip_prefix(META) else {
        return Ok(match name {
            "k8s.io.apimachinery.pkg.api.resource.Quantity" => Some(Value::String(text("string"))),
            "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => Some(if int("type") == 1 {
                Value::String(text("strVal"))
            } else {
                Value::from(int("intVal"))
            }),
            "k8s.io.apimachinery.pkg.runtime.RawExtension" => Some(raw_json(fields.get("raw"))?),
            _ => None,
        });
    };
    Ok(match short {
        "Time" | "MicroTime" => Some(timestamp(int("seconds"), int("nanos"), short == "MicroTime")),
        "Duration" => Some(Value::String(go_duration(int("duration")))),
        "FieldsV1" => Some(raw_json(fields.get("Raw"))?),
        _ => None,
    })
}

/// Bytes holding JSON (`FieldsV1`, `RawExtension`), decoded from their base64 form.
fn raw_json(encoded: Option<&Value>) -> ApiResult<Value> {
    let Some(encoded) = encoded.and_then(Value::as_str).filter(|s| !s.is_empty()) else { return Ok(Value::Null) };
    let bytes = base64_decode(encoded).ok_or_else(|| ApiError::bad_request("protobuf body: bad raw bytes"))?;
    serde_json::from_slice(&bytes).map_err(|e| ApiError::bad_request(format!("protobuf body: raw JSON: {e}")))
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).ok()?);
        }
    }
    Some(out)
}

/// `metav1.Time` (seconds) or `metav1.MicroTime` (microseconds) as RFC 3339; the zero time is null.
fn timestamp(seconds: i64, nanos: i64, micro: bool) -> Value {
    if seconds == 0 && nanos == 0 {
        return Value::Null;
    }
    let Ok(ts) = jiff::Timestamp::from_second(seconds) else { return Value::Null };
    let base = ts.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    if micro { Value::String(format!("{base}.{:06}Z", nanos / 1000)) } else { Value::String(format!("{base}Z")) }
}

/// Go's `time.Duration.String()` for whole and fractional seconds (`1h2m3s`, `1.5s`, `0s`).
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let (secs, frac) = (n / 1_000_000_000, n % 1_000_000_000);
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::from(sign);
    if h > 0 {
        out.push_str(&format!("{h}h{m}m"));
    } else if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if frac == 0 {
        out.push_str(&format!("{s}s"));
    } else {
        let f = format!("{frac:09}");
        out.push_str(&format!("{s}.{}s", f.trim_end_matches('0')));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = u8::try_from(v & 0x7f).unwrap();
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn len_field(number: u64, bytes: &[u8], out: &mut Vec<u8>) {
        varint(number << 3 | 2, out);
        varint(bytes.len() as u64, out);
        out.extend_from_slice(bytes);
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut type_meta = Vec::new();
        len_field(1, api_version.as_bytes(), &mut type_meta);
        len_field(2, kind.as_bytes(), &mut type_meta);
        let mut out = MAGIC.to_vec();
        len_field(1, &type_meta, &mut out);
        len_field(2, raw, &mut out);
        out
    }

    #[test]
    fn decodes_a_config_map_dropping_zero_values() {
        let mut meta = Vec::new();
        len_field(1, b"c1", &mut meta);
        len_field(2, b"", &mut meta);
        varint(7 << 3, &mut meta);
        varint(0, &mut meta);
        len_field(8, &[], &mut meta);
        let mut entry = Vec::new();
        len_field(1, b"a", &mut entry);
        len_field(2, b"b", &mut entry);
        let mut raw = Vec::new();
        len_field(1, &meta, &mut raw);
        len_field(2, &entry, &mut raw);
        let v = decode(&envelope("v1", "ConfigMap", &raw)).unwrap();
        assert_eq!(v, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {"a": "b"}}));
    }

    #[test]
    fn decodes_secret_bytes_as_base64_and_keeps_meaningful_zeros() {
        let mut entry = Vec::new();
        len_field(1, b"k", &mut entry);
        len_field(2, b"hi", &mut entry);
        let mut raw = Vec::new();
        len_field(2, &entry, &mut raw);
        varint(5 << 3, &mut raw);
        varint(0, &mut raw);
        let v = decode(&envelope("v1", "Secret", &raw)).unwrap();
        assert_eq!(v["data"], json!({"k": "aGk="}));
        assert_eq!(v["immutable"], json!(false));
    }

    #[test]
    fn decodes_int_or_string_and_time() {
        let mut port = Vec::new();
        varint(1 << 3, &mut port);
        varint(1, &mut port);
        len_field(3, b"http", &mut port);
        let v = decode_message("k8s.io.apimachinery.pkg.util.intstr.IntOrString", &port).unwrap();
        assert_eq!(v, json!("http"));
        let mut time = Vec::new();
        varint(1 << 3, &mut time);
        varint(1_700_000_000, &mut time);
        let v = decode_message("k8s.io.apimachinery.pkg.apis.meta.v1.Time", &time).unwrap();
        assert_eq!(v, json!("2023-11-14T22:13:20Z"));
    }

    #[test]
    fn refuses_bad_input() {
        assert_eq!(decode(b"{}").unwrap_err().code, 400);
        assert_eq!(decode(&envelope("example.com/v1", "Widget", &[])).unwrap_err().code, 415);
        let mut raw = Vec::new();
        len_field(99, b"x", &mut raw);
        let e = decode(&envelope("v1", "ConfigMap", &raw)).unwrap_err();
        assert!(e.message.contains("unknown field number 99"), "{}", e.message);
        assert_eq!(decode(&envelope("v1", "ConfigMap", &[0x0a, 0x05])).unwrap_err().code, 400);
    }

    #[test]
    fn formats_go_durations() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(3_723_000_000_000), "1h2m3s");
    }
}
