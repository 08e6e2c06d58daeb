//! Template functions: encodings. YAML, JSON and TOML as Helm has them (`toYaml`,
//! `fromYaml`, `toJson`, `fromJson`, `toToml`, … — Helm's versions, which replace Sprig's in a
//! chart and put parse errors in the result instead of failing), Sprig's `toPrettyJson` and
//! `toRawJson`, and Sprig's base64/base32 functions with Go's error texts.

use std::collections::BTreeMap;

use crate::template::{Call, FuncMap};
use crate::value::Value;
use crate::yaml;
use crate::yaml::gojson;
use crate::yaml::json::{self, Options};

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("toYaml", to_yaml);
    map.insert("mustToYaml", must_to_yaml);
    map.insert("toYamlPretty", to_yaml_pretty);
    map.insert("fromYaml", from_yaml);
    map.insert("fromYamlArray", from_yaml_array);
    map.insert("toJson", to_json);
    map.insert("mustToJson", must_to_json);
    map.insert("toPrettyJson", to_pretty_json);
    map.insert("mustToPrettyJson", must_to_pretty_json);
    map.insert("toRawJson", to_raw_json);
    map.insert("mustToRawJson", to_raw_json);
    map.insert("fromJson", from_json);
    map.insert("mustFromJson", must_from_json);
    map.insert("fromJsonArray", from_json_array);
    map.insert("toToml", to_toml);
    map.insert("mustToToml", must_to_toml);
    map.insert("fromToml", from_toml);
    map.insert("b64enc", b64enc);
    map.insert("b64dec", b64dec);
    map.insert("b32enc", b32enc);
    map.insert("b32dec", b32dec);
}

/// The single argument of a one-argument function, or Go's arity complaint.
fn one<'v>(call: &Call<'_>, args: &'v [Value]) -> Result<&'v Value, String> {
    match args {
        [arg] => Ok(arg),
        _ => Err(format!(
            "wrong number of args for {}: want 1 got {}",
            call.name,
            args.len()
        )),
    }
}

/// A `string` parameter: Go's template engine refuses other types before the call.
fn string_arg<'v>(call: &Call<'_>, args: &'v [Value]) -> Result<&'v str, String> {
    match one(call, args)? {
        Value::String(s) => Ok(s),
        Value::Nil => Err("invalid value; expected string".into()),
        other => Err(format!(
            "wrong type for value; expected string; got {}",
            other.type_name()
        )),
    }
}

/// The text of a YAML document without the trailing newline, as Helm's `toYaml` returns it.
fn trim_newline(mut text: String) -> String {
    if text.ends_with('\n') {
        text.pop();
    }
    text
}

/// `toYaml`: the value as YAML; an unencodable value (NaN) gives "".
fn to_yaml(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let v = one(call, args)?;
    Ok(Value::from(
        yaml::to_yaml(v).map(trim_newline).unwrap_or_default(),
    ))
}

/// `mustToYaml`: as `toYaml`, failing where it gives "".
fn must_to_yaml(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let v = one(call, args)?;
    yaml::to_yaml(v)
        .map(|text| Value::from(trim_newline(text)))
        .map_err(|e| e.message)
}

/// `toYamlPretty`: `yaml.v3`'s layout with sequences indented under their key.
fn to_yaml_pretty(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let v = one(call, args)?;
    Ok(Value::from(
        yaml::to_yaml_pretty(v)
            .map(trim_newline)
            .unwrap_or_default(),
    ))
}

fn error_map(message: String) -> Value {
    Value::map(BTreeMap::from([(
        "Error".to_string(),
        Value::from(message),
    )]))
}

/// `fromYaml`: a map; a parse error is in its `Error` key.
fn from_yaml(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let text = string_arg(call, args)?;
    Ok(match yaml::parse(text) {
        Err(e) => error_map(e.message),
        Ok(serde_json::Value::Null) => Value::empty_map(),
        Ok(json @ serde_json::Value::Object(_)) => Value::from_json_floats(&json),
        Ok(other) => error_map(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            gojson::kind(&Value::from_json_floats(&other))
        )),
    })
}

/// `fromYamlArray`: a list; a parse error is its only item.
fn from_yaml_array(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let text = string_arg(call, args)?;
    Ok(match yaml::parse(text) {
        Err(e) => Value::list(vec![Value::from(e.message)]),
        Ok(serde_json::Value::Null) => Value::list(Vec::new()),
        Ok(json @ serde_json::Value::Array(_)) => Value::from_json_floats(&json),
        Ok(other) => Value::list(vec![Value::from(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type []interface {{}}",
            gojson::kind(&Value::from_json_floats(&other))
        ))]),
    })
}

const COMPACT: Options = Options {
    escape_html: true,
    indent: 0,
};

/// `toJson`: `json.Marshal`; an unencodable value gives "".
fn to_json(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let v = one(call, args)?;
    Ok(Value::from(json::write(v, COMPACT).unwrap_or_default()))
}

/// `mustToJson`: as `toJson`, failing where it gives "".
fn must_to_json(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let v = one(call, args)?;
    json::write(v, COMPACT)
        .map(Value::from)
        .map_err(|e| e.message)
}

const PRETTY: Options = Options {
    escape_html: true,
    indent: 2,
};

/// `toPrettyJson`: `json.MarshalIndent(v, "", "  ")`; an unencodable value gives "".
fn to_pretty_json(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let v = one(call, args)?;
    Ok(Value::from(json::write(v, PRETTY).unwrap_or_default()))
}

/// `mustToPrettyJson`: as `toPrettyJson`, failing where it gives "".
fn must_to_pretty_json(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let v = one(call, args)?;
    json::write(v, PRETTY)
        .map(Value::from)
        .map_err(|e| e.message)
}

/// `toRawJson` and `mustToRawJson`: JSON without HTML escaping; both fail on an unencodable
/// value (Sprig's `toRawJson` panics).
fn to_raw_json(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let v = one(call, args)?;
    json::write(
        v,
        Options {
            escape_html: false,
            indent: 0,
        },
    )
    .map(Value::from)
    .map_err(|e| e.message)
}

/// `fromJson` (Helm's): a map; a parse error is in its `Error` key (beside whatever Go
/// decoded before giving up on a number).
fn from_json(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let text = string_arg(call, args)?;
    Ok(match gojson::decode(text) {
        Err(message) => error_map(message),
        // Go's decoder sets the map to nil, which prints as `null`.
        Ok(gojson::Decoded {
            value: Value::Nil, ..
        }) => Value::Nil,
        Ok(gojson::Decoded {
            value: map @ Value::Map(_),
            error,
        }) => {
            if let (Some(message), Value::Map(m)) = (error, &map) {
                m.borrow_mut()
                    .insert("Error".to_string(), Value::from(message));
            }
            map
        }
        Ok(other) => error_map(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            gojson::kind(&other.value)
        )),
    })
}

/// `mustFromJson` (Sprig's): any JSON value; a parse error fails the call.
fn must_from_json(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let text = string_arg(call, args)?;
    gojson::parse(text)
}

/// `fromJsonArray`: a list; a parse error is its only item.
fn from_json_array(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let text = string_arg(call, args)?;
    Ok(match gojson::decode(text) {
        Err(message)
        | Ok(gojson::Decoded {
            value: Value::List(..),
            error: Some(message),
        }) => Value::list(vec![Value::from(message)]),
        Ok(gojson::Decoded {
            value: Value::Nil, ..
        }) => Value::Nil,
        Ok(gojson::Decoded {
            value: list @ Value::List(..),
            error: None,
        }) => list,
        Ok(other) => Value::list(vec![Value::from(format!(
            "json: cannot unmarshal {} into Go value of type []interface {{}}",
            gojson::kind(&other.value)
        ))]),
    })
}

/// `toToml`: TOML as BurntSushi's encoder writes it; an error gives its message as the text.
fn to_toml(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let v = one(call, args)?;
    if v.is_nil() {
        // BurntSushi's encoder panics on a nil document; the panic becomes the call's error.
        return yaml::toml::encode(v).map(Value::from);
    }
    Ok(Value::from(yaml::toml::encode(v).unwrap_or_else(|e| e)))
}

/// `mustToToml`: as `toToml`, failing on an error.
fn must_to_toml(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let v = one(call, args)?;
    yaml::toml::encode(v).map(Value::from)
}

/// `fromToml`: a map; a parse error is in its `Error` key.
fn from_toml(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let text = string_arg(call, args)?;
    Ok(yaml::toml::decode(text).unwrap_or_else(error_map))
}

fn b64enc(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    use base64::Engine as _;
    // `.Files.Get` of a file that is not UTF-8 is a Go string holding raw bytes, which
    // `Value::String` cannot; the engine hands it over as `[]byte`, encoded here as Go would.
    if let [Value::Bytes(bytes)] = args {
        return Ok(Value::from(
            base64::engine::general_purpose::STANDARD.encode(bytes),
        ));
    }
    let text = string_arg(call, args)?;
    Ok(Value::from(
        base64::engine::general_purpose::STANDARD.encode(text),
    ))
}

/// `b64dec`: the decoded text, or Go's error message as the result.
fn b64dec(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let text = string_arg(call, args)?;
    Ok(Value::from(match yaml::base64_decode(text.as_bytes()) {
        Ok(bytes) => yaml::go_lossy(&bytes),
        Err(at) => format!("illegal base64 data at input byte {at}"),
    }))
}

fn b32enc(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let text = string_arg(call, args)?;
    Ok(Value::from(base32_encode(text.as_bytes())))
}

/// `b32dec`: the decoded text, or Go's error message as the result.
fn b32dec(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let text = string_arg(call, args)?;
    Ok(Value::from(match base32_decode(text.as_bytes()) {
        Ok(bytes) => yaml::go_lossy(&bytes),
        Err(at) => format!("illegal base32 data at input byte {at}"),
    }))
}

/// RFC 4648 base32 with padding (`base32.StdEncoding`).
fn base32_encode(src: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::with_capacity(src.len().div_ceil(5) * 8);
    for chunk in src.chunks(5) {
        let mut block = [0u8; 8];
        block[3..3 + chunk.len()].copy_from_slice(chunk);
        let bits = u64::from_be_bytes(block);
        let symbols = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < symbols {
                let index = (bits >> (35 - 5 * i)) & 31;
                out.push(char::from(ALPHABET[usize::try_from(index).unwrap_or(0)]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Go's `base32.StdEncoding.DecodeString`: newlines removed first, padding required.
fn base32_decode(input: &[u8]) -> Result<Vec<u8>, usize> {
    let src: Vec<u8> = input
        .iter()
        .copied()
        .filter(|c| !matches!(c, b'\n' | b'\r'))
        .collect();
    let total = src.len();
    let mut rest = &src[..];
    let mut out = Vec::with_capacity(total / 8 * 5);
    let mut end = false;
    while !rest.is_empty() && !end {
        let mut quantum = [0u8; 8];
        let mut len = 8;
        let mut j = 0;
        while j < 8 {
            let Some((&c, tail)) = rest.split_first() else {
                return Err(total - j);
            };
            rest = tail;
            if c == b'=' && j >= 2 && rest.len() < 8 {
                if rest.len() + j < 7 {
                    return Err(total);
                }
                for k in 0..7 - j {
                    if rest.len() > k && rest[k] != b'=' {
                        return Err(total - rest.len() + k - 1);
                    }
                }
                len = j;
                end = true;
                if matches!(len, 1 | 3 | 6) {
                    return Err(total - rest.len() - 1);
                }
                break;
            }
            let value = match c {
                b'A'..=b'Z' => c - b'A',
                b'2'..=b'7' => c - b'2' + 26,
                _ => return Err(total - rest.len() - 1),
            };
            quantum[j] = value;
            j += 1;
        }
        let bits = quantum
            .iter()
            .fold(0u64, |acc, &v| (acc << 5) | u64::from(v));
        let bytes = bits.to_be_bytes();
        let produced = match len {
            8 => 5,
            7 => 4,
            5 => 3,
            4 => 2,
            2 => 1,
            _ => 0,
        };
        out.extend_from_slice(&bytes[3..3 + produced]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
