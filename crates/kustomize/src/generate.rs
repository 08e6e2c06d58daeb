//! ConfigMap and Secret generators, and the content hash kustomize appends to their names.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use base64::Engine as _;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::build::{Accumulator, Builder, Target};
use crate::error::{Error, TransformError};
use crate::resource::{Behavior, Resource};
use crate::types::{GeneratorArgs, GeneratorOptions};

/// Runs `configMapGenerator`, `secretGenerator` and builtin `generators:` configs.
pub(crate) fn run_generators(
    builder: &mut Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    let k = &target.kustomization;
    for args in &k.config_map_generator {
        let resource = generate(builder, target, args, false, k.generator_options.as_ref())?;
        absorb(acc, resource)
            .map_err(|m| Error::transform(&target.file, "configMapGenerator", m))?;
    }
    for args in &k.secret_generator {
        let resource = generate(builder, target, args, true, k.generator_options.as_ref())?;
        absorb(acc, resource).map_err(|m| Error::transform(&target.file, "secretGenerator", m))?;
    }
    // kustomize's builtin generators run in this order, before the `generators:` entries.
    crate::helm::run(builder, target, acc)?;
    for entry in &k.generators {
        let documents = if entry.contains('\n') || entry.contains(": ") {
            crate::yaml::parse_documents(entry).map_err(|message| Error::Yaml {
                path: target.file.clone(),
                message: message.message,
            })?
        } else {
            let path = crate::fs::normalize(&target.dir.join(entry));
            if builder.fs.is_dir(&path) {
                builder.build_subtree(&path, "generators")?
            } else {
                builder.read_field_documents(target, entry, "generators")?
            }
        };
        for document in documents {
            let kind = document.get("kind").and_then(Value::as_str).unwrap_or("");
            let builtin = document.get("apiVersion").and_then(Value::as_str) == Some("builtin");
            let secret = match (builtin, kind) {
                (true, "ConfigMapGenerator") => false,
                (true, "SecretGenerator") => true,
                (true, "HelmChartInflationGenerator") => {
                    let (globals, chart) = crate::helm::plugin_config(document).map_err(|e| {
                        Error::transform(&target.file, "generators", TransformError::Json(e))
                    })?;
                    crate::helm::run_one(builder, target, &globals, &chart, "generators", acc)?;
                    continue;
                }
                _ => {
                    return Err(Error::Unsupported {
                        path: target.file.clone(),
                        field: "generators".into(),
                        hint: format!(
                            ": generator {kind:?} (only builtin ConfigMapGenerator, SecretGenerator and HelmChartInflationGenerator; no exec plugins)"
                        ),
                    });
                }
            };
            let mut args_value = document.clone();
            if let Some(map) = args_value.as_object_mut() {
                let name = map.get("metadata").and_then(|m| m.get("name")).cloned();
                let namespace = map
                    .get("metadata")
                    .and_then(|m| m.get("namespace"))
                    .cloned();
                map.remove("apiVersion");
                map.remove("kind");
                map.remove("metadata");
                if let Some(name) = name {
                    map.insert("name".into(), name);
                }
                if let Some(namespace) = namespace {
                    map.insert("namespace".into(), namespace);
                }
            }
            let args: GeneratorArgs = serde_json::from_value(args_value).map_err(|e| {
                Error::transform(&target.file, "generators", TransformError::Json(e))
            })?;
            let resource = generate(builder, target, &args, secret, None)?;
            absorb(acc, resource).map_err(|m| Error::transform(&target.file, "generators", m))?;
        }
    }
    Ok(())
}

fn merged_options(
    local: Option<&GeneratorOptions>,
    global: Option<&GeneratorOptions>,
) -> GeneratorOptions {
    let mut options = local.cloned().unwrap_or_default();
    if let Some(global) = global {
        for (k, v) in &global.labels {
            options.labels.insert(k.clone(), v.clone());
        }
        for (k, v) in &global.annotations {
            options.annotations.insert(k.clone(), v.clone());
        }
        options.disable_name_suffix_hash |= global.disable_name_suffix_hash;
        options.immutable |= global.immutable;
    }
    options
}

fn strip_quotes(value: &str) -> &str {
    let bytes = value.as_bytes();
    if bytes.len() >= 2
        && (bytes[0] == b'"' || bytes[0] == b'\'')
        && bytes[bytes.len() - 1] == bytes[0]
    {
        &value[1..value.len() - 1]
    } else {
        value
    }
}

/// Generates one ConfigMap (or Secret, when `secret`) from its `args`, `global` options
/// merged into its own.
fn generate(
    builder: &Builder<'_>,
    target: &Target,
    args: &GeneratorArgs,
    secret: bool,
    global: Option<&GeneratorOptions>,
) -> Result<Resource, Error> {
    let field = if secret {
        "secretGenerator"
    } else {
        "configMapGenerator"
    };
    let invalid = |message: String| Error::invalid(&target.file, field, message);
    let pairs = read_pairs(builder, target, args, field)?;
    let options = merged_options(args.options.as_ref(), global);
    let object = generated_object(args, secret, &options, pairs);
    let mut resource = Resource::new(object);
    resource.needs_hash = !options.disable_name_suffix_hash;
    resource.behavior = match args.behavior.as_str() {
        "" | "create" => Behavior::Create,
        "merge" => Behavior::Merge,
        "replace" => Behavior::Replace,
        other => {
            return Err(invalid(format!(
                "{}: unknown behavior {other:?}",
                args.name
            )));
        }
    };
    if builder.track_origins() {
        let kind = if secret {
            "SecretGenerator"
        } else {
            "ConfigMapGenerator"
        };
        resource.origin = Some(builder.configured_origin(target, kind));
    }
    Ok(resource)
}

/// The key/value pairs of a generator in kustomize's order (env files, literals, files);
/// a key given twice is an error.
fn read_pairs(
    builder: &Builder<'_>,
    target: &Target,
    args: &GeneratorArgs,
    field: &str,
) -> Result<Vec<(String, Vec<u8>)>, Error> {
    let invalid = |message: String| Error::invalid(&target.file, field, message);
    let mut pairs: Vec<(String, Vec<u8>)> = Vec::new();
    let mut add = |key: String, value: Vec<u8>| -> Result<(), Error> {
        if pairs.iter().any(|(k, _)| *k == key) {
            return Err(Error::invalid(
                &target.file,
                field,
                format!(
                    "{}: cannot add key {key}, another key by that name already exists",
                    args.name
                ),
            ));
        }
        pairs.push((key, value));
        Ok(())
    };
    let mut envs = args.envs.clone();
    if !args.env.is_empty() {
        envs.push(args.env.clone());
    }
    for env in &envs {
        let text = builder.read_field_text(target, env, field)?;
        for pair in env_pairs(&text) {
            let (key, value) = pair.map_err(|m| invalid(format!("{env}: {m}")))?;
            add(key, value.into_bytes())?;
        }
    }
    for literal in &args.literals {
        let Some((key, value)) = literal.split_once('=') else {
            return Err(invalid(format!(
                "invalid literal source {literal:?}, expected key=value"
            )));
        };
        add(key.to_owned(), strip_quotes(value).as_bytes().to_vec())?;
    }
    for file in &args.files {
        let (key, path) = match file.split_once('=') {
            Some((key, path)) => {
                if key.is_empty() {
                    return Err(invalid(format!("key for file source {file:?} is missing")));
                }
                (key.to_owned(), path)
            }
            None => (
                file.rsplit('/').next().unwrap_or(file).to_owned(),
                file.as_str(),
            ),
        };
        let bytes = builder.read_field_file(target, path, field)?;
        add(key, bytes)?;
    }
    Ok(pairs)
}

/// The `KEY=value` lines of an env file, in order (a leading byte-order mark, blank lines and
/// `#` comments skipped; a line without `=` is a key with an empty value).
fn env_pairs(text: &str) -> impl Iterator<Item = Result<(String, String), TransformError>> + '_ {
    text.lines().enumerate().filter_map(|(number, line)| {
        let line = if number == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let (key, value) = match line.split_once('=') {
            Some((key, value)) => (key, value.to_owned()),
            None => (line, String::new()),
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Some(Err(
                format!("line {}: invalid key {key:?}", number + 1).into()
            ));
        }
        Some(Ok((key.to_owned(), value)))
    })
}

/// The ConfigMap or Secret object: metadata from `args` and `options`, `pairs` as `data`
/// (base64 for a Secret; a ConfigMap's non-UTF-8 values go to `binaryData`).
fn generated_object(
    args: &GeneratorArgs,
    secret: bool,
    options: &GeneratorOptions,
    pairs: Vec<(String, Vec<u8>)>,
) -> Value {
    let mut metadata = Map::new();
    metadata.insert("name".into(), Value::String(args.name.clone()));
    if !args.namespace.is_empty() {
        metadata.insert("namespace".into(), Value::String(args.namespace.clone()));
    }
    if !options.labels.is_empty() {
        metadata.insert("labels".into(), string_map(&options.labels));
    }
    if !options.annotations.is_empty() {
        metadata.insert("annotations".into(), string_map(&options.annotations));
    }
    let mut object = Map::new();
    object.insert("apiVersion".into(), Value::String("v1".into()));
    object.insert(
        "kind".into(),
        Value::String(if secret { "Secret" } else { "ConfigMap" }.into()),
    );
    object.insert("metadata".into(), Value::Object(metadata));
    let mut data = Map::new();
    let mut binary = Map::new();
    for (key, value) in pairs {
        if secret {
            data.insert(key, Value::String(encode_base64_lines(&value)));
        } else {
            match String::from_utf8(value) {
                Ok(text) => {
                    data.insert(key, Value::String(text));
                }
                Err(error) => {
                    binary.insert(
                        key,
                        Value::String(
                            base64::engine::general_purpose::STANDARD.encode(error.as_bytes()),
                        ),
                    );
                }
            }
        }
    }
    if secret {
        let kind = if args.kind.is_empty() {
            "Opaque"
        } else {
            &args.kind
        };
        object.insert("type".into(), Value::String(kind.to_owned()));
    }
    if !data.is_empty() {
        object.insert("data".into(), Value::Object(data));
    }
    if !binary.is_empty() {
        object.insert("binaryData".into(), Value::Object(binary));
    }
    if options.immutable {
        object.insert("immutable".into(), Value::Bool(true));
    }
    Value::Object(object)
}

/// Base64 as kustomize writes secret data: lines of 70 characters, each ending in a newline,
/// once the encoding needs more than one line.
fn encode_base64_lines(value: &[u8]) -> String {
    const LINE: usize = 70;
    let encoded = base64::engine::general_purpose::STANDARD.encode(value);
    let lines = encoded.len() / LINE + 1;
    if lines == 1 {
        return encoded;
    }
    let mut out = String::with_capacity(encoded.len() + lines);
    for chunk in encoded.as_bytes().chunks(LINE) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out
}

fn string_map(map: &BTreeMap<String, String>) -> Value {
    Value::Object(
        map.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

/// Adds a generated object, or merges/replaces an existing one per its behavior.
pub(crate) fn absorb(acc: &mut Accumulator, mut resource: Resource) -> Result<(), TransformError> {
    let id = resource.current_id();
    let matches: Vec<usize> = acc
        .resources
        .iter()
        .enumerate()
        .filter(|(_, r)| r.any_id_matches(&id))
        .map(|(i, _)| i)
        .collect();
    match matches.as_slice() {
        [] => match resource.behavior {
            Behavior::Create => acc.append(resource, "generator"),
            _ => Err(format!("id {id} does not exist; cannot merge or replace").into()),
        },
        [index] => {
            let old = &acc.resources[*index];
            match resource.behavior {
                Behavior::Create => {
                    return Err(format!("id {id} exists; behavior must be merge or replace").into());
                }
                Behavior::Replace => {}
                Behavior::Merge => {
                    for field in ["data", "binaryData"] {
                        let mut merged = old
                            .object
                            .get(field)
                            .and_then(Value::as_object)
                            .cloned()
                            .unwrap_or_default();
                        if let Some(new) = resource.object.get(field).and_then(Value::as_object) {
                            for (k, v) in new {
                                merged.insert(k.clone(), v.clone());
                            }
                        }
                        if let Some(map) = resource.object.as_object_mut()
                            && !merged.is_empty()
                        {
                            map.insert(field.into(), Value::Object(merged));
                        }
                    }
                    resource.origin.clone_from(&old.origin);
                }
            }
            let mut labels = old.labels();
            labels.extend(resource.labels());
            let mut annotations = old.annotations();
            annotations.extend(resource.annotations());
            resource.set_string_map("labels", labels);
            resource.set_string_map("annotations", annotations);
            resource.set_name(old.name());
            let namespace = old.namespace().to_owned();
            resource.set_namespace(&namespace);
            resource.previous.clone_from(&old.previous);
            resource.prefixes.clone_from(&old.prefixes);
            resource.suffixes.clone_from(&old.suffixes);
            resource.needs_hash = resource.needs_hash || old.needs_hash;
            resource.behavior = Behavior::Create;
            acc.resources[*index] = resource;
            Ok(())
        }
        _ => Err(format!("found multiple objects that could accept merge of {id}").into()),
    }
}

/// kustomize's content hash of a ConfigMap or Secret (or any object), 10 characters.
pub(crate) fn hash(object: &Value) -> String {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let field = |name: &str| {
        object
            .get(name)
            .cloned()
            .unwrap_or(Value::String(String::new()))
    };
    // kustomize v5.5 hashes generated objects with an empty name.
    let name = Value::String(String::new());
    let encoded = match kind {
        "ConfigMap" => {
            let mut map = Map::new();
            map.insert("kind".into(), Value::String("ConfigMap".into()));
            map.insert("name".into(), name);
            map.insert("data".into(), field("data"));
            if object.get("binaryData").is_some_and(Value::is_object) {
                map.insert("binaryData".into(), field("binaryData"));
            }
            go_json(&Value::Object(map))
        }
        "Secret" => {
            let mut map = Map::new();
            map.insert("kind".into(), Value::String("Secret".into()));
            map.insert("type".into(), field("type"));
            map.insert("name".into(), name);
            map.insert("data".into(), field("data"));
            if object.get("stringData").is_some_and(Value::is_object) {
                map.insert("stringData".into(), field("stringData"));
            }
            go_json(&Value::Object(map))
        }
        _ => go_json(object),
    };
    let digest = Sha256::digest(encoded.as_bytes());
    let hex: String = digest.iter().fold(String::new(), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    });
    hex[..10]
        .chars()
        .map(|c| match c {
            '0' => 'g',
            '1' => 'h',
            '3' => 'k',
            'a' => 'm',
            'e' => 't',
            other => other,
        })
        .collect()
}

/// Go's `encoding/json` output: sorted keys, HTML-safe escapes.
pub(crate) fn go_json(value: &Value) -> String {
    let mut out = String::new();
    write_go_json(value, &mut out);
    out
}

fn write_go_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(key, out);
                out.push(':');
                write_go_json(&map[key.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_json(item, out);
            }
            out.push(']');
        }
        Value::String(s) => write_go_string(s, out),
        other => out.push_str(&other.to_string()),
    }
}

fn write_go_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') || (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_json_escapes_html_and_sorts() {
        assert_eq!(
            go_json(&json!({"b": "<&>", "a": 1})),
            r#"{"a":1,"b":"\u003c\u0026\u003e"}"#
        );
    }

    #[test]
    fn configmap_hash_matches_kustomize() {
        // kustomize's hasher test vector: ConfigMap "" with empty data hashes to 42745tchd9
        let cm =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ""}, "data": {}});
        assert_eq!(hash(&cm), "42745tchd9");
    }

    #[test]
    fn quotes_are_stripped_from_literals() {
        assert_eq!(strip_quotes("\"a b\""), "a b");
        assert_eq!(strip_quotes("'x'"), "x");
        assert_eq!(strip_quotes("\"x"), "\"x");
    }
}
