//! Request bodies in the Kubernetes protobuf encoding (`application/vnd.kubernetes.protobuf`).
//!
//! client-go's typed clients send built-in objects this way — `kubectl create deployment`,
//! `kubectl create configmap`, `kubectl run` and friends — and a real API server accepts it. Only
//! decoding is needed: those clients also accept JSON responses.
//!
//! # Expected flow
//! A body is the magic `k8s\0` followed by a `runtime.Unknown` message: `typeMeta`
//! (`apiVersion`, `kind`), `raw` (the object's own message, e.g. `k8s.io.api.apps.v1.Deployment`),
//! `contentEncoding` and `contentType`. [`decode`] reads the envelope, finds the object's message
//! in a generated table (`table.rs`, built by `scripts/gen-protobuf-table` from the k8s-pb crate and
//! the upstream Go types) and turns it into the JSON object a client would have sent.
//!
//! # Guarantees
//! - The result equals the object's JSON encoding by Go: `omitempty` scalars at their zero value
//!   are dropped (Go's protobuf encoder writes them, its JSON encoder does not), pointers and
//!   non-`omitempty` fields are kept as sent, inlined structs (`Volume.volumeSource`) are merged,
//!   and the types with their own JSON form become it: `Time` and `MicroTime` (RFC 3339 strings,
//!   dropped when zero), `Duration` (`1m30s`), `Quantity` (`500m`), `IntOrString`,
//!   `RawExtension`/`FieldsV1`/`JSON` (embedded JSON) and `bytes` (base64).
//! - Unknown field numbers are skipped, as Go's decoder does.
//! - Nothing panics on hostile input; nesting is limited to [`MAX_DEPTH`] messages.
//!
//! # Errors
//! Malformed bytes are `400 Bad Request` naming the message; a kind outside the table (a custom
//! resource) or a content encoding is `415 Unsupported Media Type`, so the client can send JSON.

mod schema;
#[rustfmt::skip]
mod table;
mod wire;

#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use schema::{Card, Field, Message, Shape, Ty};
use wire::{Fail, Reader, Wire};

/// The decoder's result: see [`Fail`].
type Decoded<T> = Result<T, Fail>;

/// The media type of the Kubernetes protobuf encoding.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Nested messages allowed below the object (a deeply nested CRD schema needs two per level).
pub const MAX_DEPTH: usize = 64;

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8; 4] = b"k8s\0";

/// Whether a `Content-Type` header names the Kubernetes protobuf encoding.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case(MEDIA_TYPE))
}

/// Decodes a Kubernetes protobuf body into the object's JSON form, `apiVersion` and `kind` first.
///
/// # Errors
/// `400 Bad Request` for malformed bytes, `415 Unsupported Media Type` for a kind or content
/// encoding that cannot be decoded.
#[allow(clippy::result_large_err)] // `ApiResult` is what the HTTP layer returns.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    decode_at(body, 0).map_err(|e| *e)
}

fn decode_at(body: &[u8], depth: usize) -> Decoded<Value> {
    let envelope = body.strip_prefix(MAGIC).ok_or_else(|| {
        Box::new(ApiError::bad_request(
            "protobuf body: missing the \"k8s\\x00\" prefix of the Kubernetes protobuf encoding",
        ))
    })?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let mut reader = Reader::new(envelope, "runtime.Unknown");
    while let Some((number, wire)) = reader.key()? {
        match (number, wire) {
            (1, Wire::Len) => {
                let mut type_meta = Reader::new(reader.len_delimited()?, "runtime.TypeMeta");
                while let Some((number, wire)) = type_meta.key()? {
                    match (number, wire) {
                        (1, Wire::Len) => api_version = type_meta.string()?,
                        (2, Wire::Len) => kind = type_meta.string()?,
                        (1 | 2, _) => return Err(wrong_wire(&type_meta, "apiVersion/kind", wire)),
                        _ => type_meta.skip(wire)?,
                    }
                }
            }
            (2, Wire::Len) => raw = reader.len_delimited()?,
            (3, Wire::Len) => {
                let encoding = reader.string()?;
                if !encoding.is_empty() {
                    return Err(Box::new(ApiError::unsupported_media_type(format!(
                        "protobuf body: unsupported contentEncoding {encoding:?}"
                    ))));
                }
            }
            (1..=3, _) => return Err(wrong_wire(&reader, "typeMeta/raw/contentEncoding", wire)),
            _ => reader.skip(wire)?,
        }
    }
    if api_version.is_empty() || kind.is_empty() {
        return Err(Box::new(ApiError::bad_request(
            "protobuf body: the runtime.Unknown envelope has no apiVersion or kind",
        )));
    }
    let message = message_for(&api_version, &kind).ok_or_else(|| {
        Box::new(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format: {kind} in {api_version} has no protobuf encoding here - accepted media types include: application/json, application/yaml"
        )))
    })?;
    let mut object = Map::new();
    object.insert("apiVersion".into(), Value::String(api_version));
    object.insert("kind".into(), Value::String(kind));
    match decode_message(message, raw, depth + 1)? {
        Some(Value::Object(fields)) => object.extend(fields),
        _ => {
            return Err(Box::new(ApiError::bad_request(format!(
                "protobuf body: {} is not an object",
                message.0
            ))));
        }
    }
    Ok(Value::Object(object))
}

/// The message of a built-in kind: `apps/v1` `Deployment` is `k8s.io.api.apps.v1.Deployment`.
/// Groups outside Kubernetes' own (`*.k8s.io` and the legacy unsuffixed ones) have none.
fn message_for(api_version: &str, kind: &str) -> Option<&'static Message> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let package = match group {
        "" | "core" => "k8s.io.api.core".to_owned(),
        "apiextensions.k8s.io" => {
            "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions".to_owned()
        }
        "apiregistration.k8s.io" => "k8s.io.kube_aggregator.pkg.apis.apiregistration".to_owned(),
        "internal.apiserver.k8s.io" => "k8s.io.api.apiserverinternal".to_owned(),
        "meta.k8s.io" => "k8s.io.apimachinery.pkg.apis.meta".to_owned(),
        _ if !group.contains('.') || group.ends_with(".k8s.io") => {
            format!("k8s.io.api.{}", group.split('.').next().unwrap_or(group))
        }
        _ => return None,
    };
    schema::find(&format!("{package}.{version}.{kind}")).or_else(|| {
        // Option kinds (`DeleteOptions`) are registered in every group version.
        kind.ends_with("Options")
            .then(|| schema::find(&format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}")))
            .flatten()
    })
}

#[cold]
#[inline(never)]
fn wrong_wire(reader: &Reader<'_>, field: &str, wire: Wire) -> Fail {
    reader.error(format_args!(
        "field {field} with the wrong wire type ({})",
        wire.name()
    ))
}

#[cold]
#[inline(never)]
fn nesting_error(message: &str) -> Fail {
    Box::new(ApiError::bad_request(format!(
        "protobuf body: messages nested deeper than {MAX_DEPTH} levels at {message}"
    )))
}

#[cold]
#[inline(never)]
fn table_error(name: &str) -> Fail {
    Box::new(ApiError::bad_request(format!(
        "protobuf body: the message table has no type for a field of {name}"
    )))
}

/// Decodes `bytes` as `message`; `None` for a value whose JSON form is absent (a zero `Time`).
fn decode_message(message: &'static Message, bytes: &[u8], depth: usize) -> Decoded<Option<Value>> {
    let Message(name, shape, fields) = message;
    let short = name.rsplit('.').next().unwrap_or(name);
    if depth > MAX_DEPTH {
        return Err(nesting_error(short));
    }
    let mut reader = Reader::new(bytes, short);
    if *shape == Shape::Object {
        decode_object(&mut reader, fields, depth).map(|o| Some(Value::Object(o)))
    } else {
        decode_special(&mut reader, *shape, fields, depth)
    }
}

/// The messages with a JSON form of their own (kept apart so that the common path, nested
/// objects, has small stack frames).
#[inline(never)]
fn decode_special(
    reader: &mut Reader<'_>,
    shape: Shape,
    fields: &'static [Field],
    depth: usize,
) -> Decoded<Option<Value>> {
    match shape {
        Shape::Object => decode_object(reader, fields, depth).map(|o| Some(Value::Object(o))),
        Shape::Time | Shape::MicroTime => {
            let [seconds, nanos] = read_ints(reader)?;
            Ok(timestamp(reader, seconds, nanos, shape == Shape::MicroTime)?.map(Value::String))
        }
        Shape::Duration => Ok(Some(Value::String(go_duration(read_ints(reader)?[0])))),
        Shape::Quantity => {
            let object = decode_object(reader, fields, depth)?;
            Ok(Some(
                object
                    .into_iter()
                    .next()
                    .map_or_else(|| Value::String(String::new()), |(_, v)| v),
            ))
        }
        Shape::IntOrString => {
            let mut object = decode_object(reader, fields, depth)?;
            let is_string = object.remove("type").and_then(|t| t.as_i64()) == Some(1);
            let value = object.remove(if is_string { "strVal" } else { "intVal" });
            Ok(Some(value.unwrap_or_else(|| {
                if is_string {
                    Value::String(String::new())
                } else {
                    Value::from(0)
                }
            })))
        }
        Shape::RawJson => raw_json(reader, depth),
        Shape::List => {
            let mut object = decode_object(reader, fields, depth)?;
            let items = fields.first().and_then(|f| object.remove(f.1));
            Ok(Some(items.unwrap_or_else(|| Value::Array(Vec::new()))))
        }
        Shape::SchemaOrArray | Shape::SchemaOrBool => {
            let mut object = decode_object(reader, fields, depth)?;
            let mut by_number = |n: u32| {
                fields
                    .iter()
                    .find(|f| f.0 == n)
                    .and_then(|f| object.remove(f.1))
            };
            let (schema, other) = if shape == Shape::SchemaOrArray {
                (
                    by_number(1),
                    by_number(2).unwrap_or_else(|| Value::Array(Vec::new())),
                )
            } else {
                (by_number(2), by_number(1).unwrap_or(Value::Bool(false)))
            };
            Ok(Some(schema.unwrap_or(other)))
        }
    }
}

/// The fields of an ordinary message as a JSON object.
fn decode_object(
    reader: &mut Reader<'_>,
    fields: &'static [Field],
    depth: usize,
) -> Decoded<Map<String, Value>> {
    let mut object = Map::new();
    while let Some((number, wire)) = reader.key()? {
        let Some(field) = fields.iter().find(|f| f.0 == number) else {
            reader.skip(wire)?;
            continue;
        };
        let Field(_, name, ty, card) = *field;
        match card {
            Card::Rep => {
                let list = object
                    .entry(name)
                    .or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(list) = list else {
                    return Err(reader.error(format_args!("field {name} both repeated and not")));
                };
                if wire == Wire::Len && matches!(ty, Ty::Bool | Ty::I32 | Ty::I64 | Ty::F64) {
                    // A packed run of numbers.
                    let mut packed = Reader::new(reader.len_delimited()?, reader.context);
                    let inner = if ty == Ty::F64 {
                        Wire::Fixed64
                    } else {
                        Wire::Varint
                    };
                    while !packed.is_empty() {
                        list.push(
                            value(&mut packed, name, ty, inner, depth)?.unwrap_or(Value::Null),
                        );
                    }
                } else {
                    list.push(value(reader, name, ty, wire, depth)?.unwrap_or(Value::Null));
                }
            }
            Card::Map(key_ty) => {
                if wire != Wire::Len {
                    return Err(wrong_wire(reader, name, wire));
                }
                let mut entry = Reader::new(reader.len_delimited()?, reader.context);
                let (mut key, mut entry_value) = (None, None);
                while let Some((number, wire)) = entry.key()? {
                    match number {
                        1 => key = value(&mut entry, name, key_ty, wire, depth)?,
                        2 => entry_value = value(&mut entry, name, ty, wire, depth)?,
                        _ => entry.skip(wire)?,
                    }
                }
                let key = match key {
                    Some(Value::String(key)) => key,
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                let entry_value = match entry_value {
                    Some(v) => v,
                    None => zero(ty, depth)?,
                };
                if let Value::Object(map) = object
                    .entry(name)
                    .or_insert_with(|| Value::Object(Map::new()))
                {
                    map.insert(key, entry_value);
                }
            }
            Card::Inline => match value(reader, name, ty, wire, depth)? {
                Some(Value::Object(inner)) => object.extend(inner),
                _ => {
                    return Err(
                        reader.error(format_args!("inlined field {number} that is not an object"))
                    );
                }
            },
            Card::Opt | Card::One => match value(reader, name, ty, wire, depth)? {
                Some(v) if !(card == Card::Opt && is_zero(&v)) => {
                    object.insert(name.to_owned(), v);
                }
                _ => {
                    object.remove(name);
                }
            },
        }
    }
    Ok(object)
}

/// The JSON of a map entry without a value: the type's zero value.
fn zero(ty: Ty, depth: usize) -> Decoded<Value> {
    Ok(match ty {
        Ty::Str | Ty::Bytes => Value::String(String::new()),
        Ty::Bool => Value::Bool(false),
        Ty::I32 | Ty::I64 | Ty::F64 => Value::from(0),
        Ty::Message(index) => {
            let message = schema::message(index).ok_or_else(|| table_error("a map"))?;
            decode_message(message, &[], depth + 1)?.unwrap_or(Value::Null)
        }
    })
}

/// Go's zero value of a scalar.
fn is_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Null => true,
        Value::Array(_) | Value::Object(_) => false,
    }
}

/// One value of type `ty`; `None` when its JSON form is absent.
fn value(
    reader: &mut Reader<'_>,
    name: &str,
    ty: Ty,
    wire: Wire,
    depth: usize,
) -> Decoded<Option<Value>> {
    let value = match (ty, wire) {
        (Ty::Str, Wire::Len) => Value::String(reader.string()?),
        (Ty::Bytes, Wire::Len) => Value::String(base64_encode(reader.len_delimited()?)),
        (Ty::Bool, Wire::Varint) => Value::Bool(reader.varint()? != 0),
        // Negative int32s are sign-extended to 64 bits on the wire: the low 32 bits carry the value.
        (Ty::I32, Wire::Varint) => Value::from((reader.varint()? as u32).cast_signed()),
        (Ty::I64, Wire::Varint) => Value::from(reader.varint()?.cast_signed()),
        (Ty::F64, Wire::Fixed64) => {
            let number = f64::from_bits(reader.fixed64()?);
            serde_json::Number::from_f64(number)
                .map(Value::Number)
                .ok_or_else(|| reader.error(format_args!("field {name} is not a finite number")))?
        }
        (Ty::Message(index), Wire::Len) => {
            let message = schema::message(index).ok_or_else(|| table_error(reader.context))?;
            return decode_message(message, reader.len_delimited()?, depth + 1);
        }
        _ => return Err(wrong_wire(reader, name, wire)),
    };
    Ok(Some(value))
}

/// Varint fields 1 and 2 as signed 64-bit integers (0 when absent): `Time`, `Duration`.
fn read_ints(reader: &mut Reader<'_>) -> Decoded<[i64; 2]> {
    let mut out = [0; 2];
    while let Some((number, wire)) = reader.key()? {
        match (number, wire) {
            (1 | 2, Wire::Varint) => out[number as usize - 1] = reader.varint()?.cast_signed(),
            (1 | 2, _) => return Err(wrong_wire(reader, "seconds/nanos", wire)),
            _ => reader.skip(wire)?,
        }
    }
    Ok(out)
}

/// Bytes holding JSON, or a nested Kubernetes protobuf object; `None` when empty.
fn raw_json(reader: &mut Reader<'_>, depth: usize) -> Decoded<Option<Value>> {
    let mut raw: &[u8] = &[];
    while let Some((number, wire)) = reader.key()? {
        match (number, wire) {
            (1, Wire::Len) => raw = reader.len_delimited()?,
            (1, _) => return Err(wrong_wire(reader, "raw", wire)),
            _ => reader.skip(wire)?,
        }
    }
    if raw.is_empty() {
        return Ok(None);
    }
    if raw.starts_with(MAGIC) {
        return decode_at(raw, depth).map(Some);
    }
    serde_json::from_slice(raw)
        .map(Some)
        .map_err(|e| reader.error(format_args!("embedded JSON that does not parse ({e})")))
}

/// `metav1.Time` (RFC 3339 in seconds) or `MicroTime` (in microseconds), UTC; `None` when zero.
fn timestamp(
    reader: &Reader<'_>,
    seconds: i64,
    nanos: i64,
    micro: bool,
) -> Decoded<Option<String>> {
    if seconds == 0 && nanos == 0 {
        return Ok(None);
    }
    let nanos = i32::try_from(nanos)
        .ok()
        .filter(|n| (0..1_000_000_000).contains(n));
    let time = nanos
        .and_then(|nanos| jiff::Timestamp::new(seconds, nanos).ok())
        .ok_or_else(|| reader.error(format_args!("a time out of range ({seconds}s)")))?;
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(Some(time.strftime(format).to_string()))
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `1.5s`, `250ms`, `3µs`, `0s`.
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let fraction = |value: u64, digits: u32| {
        let unit = 10u64.pow(digits);
        let (whole, part) = (value / unit, value % unit);
        if part == 0 {
            whole.to_string()
        } else {
            let width = digits as usize;
            format!(
                "{whole}.{}",
                format!("{part:0width$}").trim_end_matches('0')
            )
        }
    };
    if n < 1_000 {
        return format!("{sign}{n}ns");
    }
    if n < 1_000_000 {
        return format!("{sign}{}µs", fraction(n, 3));
    }
    if n < 1_000_000_000 {
        return format!("{sign}{}ms", fraction(n, 6));
    }
    let seconds = n / 1_000_000_000;
    let (hours, minutes) = (seconds / 3600, seconds / 60 % 60);
    let rest = fraction(n % 60_000_000_000, 9);
    match (hours, minutes) {
        (0, 0) => format!("{sign}{rest}s"),
        (0, _) => format!("{sign}{minutes}m{rest}s"),
        _ => format!("{sign}{hours}h{minutes}m{rest}s"),
    }
}

/// Standard base64 with padding, as Go's JSON encoder writes `[]byte`.
fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> shift & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}
