//! `values.schema.json` validation with the `jsonschema` crate, errors worded as Helm v4
//! prints them (Helm uses `santhosh-tekuri/jsonschema`: an error tree of `- at '<pointer>':
//! <message>` lines, where a subschema with several failures reads `validation failed` and
//! nests them).

use std::fmt::Write as _;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value as Json;

use super::Chart;
use super::values::Values;

/// Validates the coalesced values against the chart's schema and every subchart's (each with
/// its own scope); the text of every failure, or `None` when all pass.
pub(crate) fn validate_chart(chart: &Chart, values: &Values, depth: usize) -> Option<String> {
    let mut out = String::new();
    if let Some(schema) = &chart.schema
        && let Err(message) = validate_one(schema, values)
    {
        let _ = writeln!(out, "{}:", chart.metadata.name);
        out.push_str(&message);
    }
    if depth < 64 {
        let empty = Values::new();
        for sub in &chart.dependencies {
            let scoped = match values.get(&sub.metadata.name) {
                Some(Json::Object(map)) => map,
                _ => &empty,
            };
            if let Some(message) = validate_chart(sub, scoped, depth + 1) {
                out.push_str(&message);
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// How many compiled schemas a thread keeps (see [`compiled`]).
const SCHEMA_CACHE_SIZE: usize = 32;
/// The largest schema text kept compiled (bigger ones are compiled at each use).
const SCHEMA_CACHE_MAX_TEXT: usize = 1 << 20;

/// Leaks the thread's compiled schemas (see [`crate::leak_thread_caches`]).
pub(super) fn leak_cache() {
    crate::leak(&SCHEMAS);
}

thread_local! {
    /// Compiled validators by schema text: compiling a schema (and checking it against its
    /// metaschema) costs more than validating, and a process renders the same charts again
    /// and again (a controller's reconciles, repeated renders).
    static SCHEMAS: std::cell::RefCell<std::collections::HashMap<Vec<u8>, std::rc::Rc<jsonschema::Validator>>> =
        std::cell::RefCell::default();
}

/// The validator of `schema`, compiled once per thread; `Err` with Helm's text.
fn compiled(schema: &[u8]) -> Result<std::rc::Rc<jsonschema::Validator>, String> {
    if let Some(validator) = SCHEMAS.with(|cache| cache.borrow().get(schema).cloned()) {
        return Ok(validator);
    }
    let json: Json = serde_json::from_slice(schema).map_err(|e| {
        let text = String::from_utf8_lossy(schema);
        format!("{}\n", crate::strvals::json_error(&e, &text).message)
    })?;
    // No resolver is configured: a remote `$ref` fails here instead of being fetched (Helm
    // would download it).
    let validator = jsonschema::options()
        .build(&json)
        .map_err(|e| match e.kind() {
            ValidationErrorKind::Referencing(reference) => format!("failing loading {reference}\n"),
            _ => format!("\"file:///values.schema.json#\" is not valid against metaschema: {e}\n"),
        })?;
    let validator = std::rc::Rc::new(validator);
    if schema.len() > SCHEMA_CACHE_MAX_TEXT {
        return Ok(validator);
    }
    SCHEMAS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= SCHEMA_CACHE_SIZE {
            cache.clear();
        }
        cache.insert(schema.to_vec(), validator.clone());
    });
    Ok(validator)
}

/// One schema against one values tree: `Err` with Helm's text (each line ending in `\n`).
fn validate_one(schema: &[u8], values: &Values) -> Result<(), String> {
    let validator = compiled(schema)?;
    let instance = Json::Object(values.clone());
    let errors: Vec<Leaf> = validator.iter_errors(&instance).map(|e| leaf(&e)).collect();
    if errors.is_empty() {
        return Ok(());
    }
    let tree = build(errors);
    let mut out = String::new();
    for child in tree.flattened_children() {
        child.write(&mut out, 0);
    }
    Err(out)
}

/// A failure as Helm's tree shows it.
#[derive(Debug, Clone)]
struct Leaf {
    /// Subschema steps from the root to the failing keyword's schema.
    steps: Vec<String>,
    instance: String,
    message: String,
    children: Vec<Node>,
}

#[derive(Debug, Clone, Default)]
struct Node {
    step: String,
    /// The text of a group that has one (`'allOf' failed`) instead of `validation failed`.
    label: Option<&'static str>,
    instance: Option<String>,
    message: Option<String>,
    children: Vec<Node>,
}

impl Node {
    /// Children with single-cause groups replaced by their cause, as Helm prints them.
    fn flattened_children(&self) -> Vec<&Node> {
        self.children.iter().map(Node::flattened).collect()
    }

    fn flattened(&self) -> &Node {
        let mut node = self;
        while node.message.is_none() && node.label.is_none() && node.children.len() == 1 {
            node = &node.children[0];
        }
        node
    }

    fn instance_path(&self) -> String {
        if let Some(instance) = &self.instance {
            return instance.clone();
        }
        // A group sits at the common prefix of what failed beneath it.
        let paths: Vec<String> = self.children.iter().map(Node::instance_path).collect();
        let mut common: Vec<&str> = match paths.first() {
            Some(first) => first.split('/').collect(),
            None => return String::new(),
        };
        for path in &paths[1..] {
            let parts: Vec<&str> = path.split('/').collect();
            let shared = common
                .iter()
                .zip(&parts)
                .take_while(|(a, b)| a == b)
                .count();
            common.truncate(shared);
        }
        common.join("/")
    }

    fn write(&self, out: &mut String, indent: usize) {
        let message = self
            .message
            .as_deref()
            .or(self.label)
            .unwrap_or("validation failed");
        let _ = writeln!(
            out,
            "{:indent$}- at '{}': {message}",
            "",
            self.instance_path(),
            indent = indent
        );
        for child in self.flattened_children() {
            child.write(out, indent + 2);
        }
    }
}

/// Builds the tree of subschemas from failures, merging `required` failures of one schema.
fn build(leaves: Vec<Leaf>) -> Node {
    let mut root = Node::default();
    for leaf in leaves {
        let mut node = &mut root;
        for step in &leaf.steps {
            let found = node
                .children
                .iter()
                .position(|c| c.message.is_none() && &c.step == step);
            let index = if let Some(i) = found {
                i
            } else {
                node.children.push(Node {
                    step: step.clone(),
                    label: (step == "allOf").then_some("'allOf' failed"),
                    ..Node::default()
                });
                node.children.len() - 1
            };
            node = &mut node.children[index];
        }
        node.children.push(Node {
            instance: Some(leaf.instance),
            message: Some(leaf.message),
            children: leaf.children,
            ..Node::default()
        });
    }
    merge_required(&mut root);
    root
}

/// jsonschema reports each missing property apart; Helm lists them in one line.
fn merge_required(node: &mut Node) {
    const MARKER: &str = "\u{0}required:";
    let names: Vec<String> = node
        .children
        .iter()
        .filter_map(|c| {
            c.message
                .as_deref()?
                .strip_prefix(MARKER)
                .map(str::to_string)
        })
        .collect();
    if !names.is_empty() {
        let mut seen = false;
        node.children.retain(|c| {
            if c.message.as_deref().is_some_and(|m| m.starts_with(MARKER)) {
                let keep = !seen;
                seen = true;
                keep
            } else {
                true
            }
        });
        let quoted: Vec<String> = names.iter().map(|m| format!("'{m}'")).collect();
        let word = if names.len() == 1 {
            "property"
        } else {
            "properties"
        };
        if let Some(first) = node
            .children
            .iter_mut()
            .find(|c| c.message.as_deref().is_some_and(|m| m.starts_with(MARKER)))
        {
            first.message = Some(format!("missing {word} {}", quoted.join(", ")));
        }
    }
    for child in &mut node.children {
        merge_required(child);
    }
}

/// Keywords whose next segment names one of several subschemas; any other keyword on the
/// way to the failing one (`$ref`, `items`, `not`, …) holds a single subschema.
const NAMED: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "allOf",
    "anyOf",
    "oneOf",
    "prefixItems",
];

fn steps(evaluation_path: &str) -> Vec<String> {
    let segments: Vec<&str> = evaluation_path
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let mut steps = Vec::new();
    let mut i = 0;
    // The last segment is the failing keyword itself.
    while i + 1 < segments.len() {
        let segment = segments[i];
        let named = NAMED.contains(&segment)
            || (segment == "items" && segments[i + 1].bytes().all(|b| b.is_ascii_digit()));
        if named && i + 2 < segments.len() {
            if segment == "allOf" {
                // Helm groups the failing branches of an allOf under one `'allOf' failed`.
                steps.push("allOf".to_string());
            }
            steps.push(format!("{segment}/{}", segments[i + 1]));
            i += 2;
        } else {
            steps.push(segment.to_string());
            i += 1;
        }
    }
    steps
}

fn leaf(error: &jsonschema::ValidationError<'_>) -> Leaf {
    let instance = error.instance();
    let mut children = Vec::new();
    let message = match error.kind() {
        ValidationErrorKind::AnyOf { context } => {
            children = branches(context);
            "'anyOf' failed".to_string()
        }
        ValidationErrorKind::OneOfNotValid { context } => {
            children = branches(context);
            "'oneOf' failed, none matched".to_string()
        }
        ValidationErrorKind::OneOfMultipleValid { context } => {
            let valid: Vec<String> = context
                .iter()
                .enumerate()
                .filter(|(_, errors)| errors.is_empty())
                .map(|(i, _)| i.to_string())
                .collect();
            format!("'oneOf' failed, subschemas {} matched", valid.join(", "))
        }
        kind => message(kind, instance),
    };
    Leaf {
        steps: steps(error.evaluation_path().as_str()),
        instance: error.instance_path().as_str().to_string(),
        message,
        children,
    }
}

fn branches(context: &[Vec<jsonschema::ValidationError<'static>>]) -> Vec<Node> {
    context
        .iter()
        .filter(|errors| !errors.is_empty())
        .map(|errors| {
            let tree = build(errors.iter().map(leaf).collect());
            let flat = tree.flattened();
            if flat.message.is_some() || flat.label.is_some() {
                flat.clone()
            } else {
                Node {
                    children: tree.flattened_children().into_iter().cloned().collect(),
                    ..Node::default()
                }
            }
        })
        .collect()
}

/// A value as Go's `%v` shows it inside Helm's messages (strings quoted).
fn quoted(value: &Json) -> String {
    match value {
        Json::String(s) => format!("'{s}'"),
        Json::Null => "<nil>".into(),
        other => number_or_json(other),
    }
}

fn number_or_json(value: &Json) -> String {
    match value {
        Json::Number(n) => n.as_f64().map_or_else(
            || n.to_string(),
            |f| crate::value::Value::Float(f).to_string(),
        ),
        other => other.to_string(),
    }
}

fn type_name(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Json::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

fn got_want(keyword: &str, got: impl std::fmt::Display, want: impl std::fmt::Display) -> String {
    format!("{keyword}: got {got}, want {want}")
}

/// `type`: what was found against what the schema wants (`got number, want integer or string`).
fn type_message(kind: &TypeKind, instance: &Json) -> String {
    let want: Vec<String> = match kind {
        TypeKind::Single(t) => vec![t.to_string()],
        TypeKind::Multiple(set) => set.iter().map(|t| t.to_string()).collect(),
    };
    // jsonschema's type order (null, boolean, integer, number, …) is the one Helm prints.
    let mut got = type_name(instance);
    // An integral number fails `type: integer` only when it is not integral; a whole
    // number failing another type reads as a number, as Go's float64 does.
    if got == "integer" && !want.iter().any(|w| w == "number") {
        got = "number";
    }
    format!("got {got}, want {}", want.join(" or "))
}

/// The numeric and size limits: `minimum: got 1, want 3`.
fn limit_message(kind: &ValidationErrorKind, instance: &Json) -> Option<String> {
    let length = |v: &Json| match v {
        Json::String(s) => s.chars().count(),
        Json::Array(a) => a.len(),
        Json::Object(o) => o.len(),
        _ => 0,
    };
    Some(match kind {
        ValidationErrorKind::Minimum { limit } => {
            got_want("minimum", number_or_json(instance), number_or_json(limit))
        }
        ValidationErrorKind::Maximum { limit } => {
            got_want("maximum", number_or_json(instance), number_or_json(limit))
        }
        ValidationErrorKind::ExclusiveMinimum { limit } => got_want(
            "exclusiveMinimum",
            number_or_json(instance),
            number_or_json(limit),
        ),
        ValidationErrorKind::ExclusiveMaximum { limit } => got_want(
            "exclusiveMaximum",
            number_or_json(instance),
            number_or_json(limit),
        ),
        ValidationErrorKind::MultipleOf { multiple_of } => got_want(
            "multipleOf",
            number_or_json(instance),
            crate::value::Value::Float(*multiple_of),
        ),
        ValidationErrorKind::MinLength { limit } => got_want("minLength", length(instance), limit),
        ValidationErrorKind::MaxLength { limit } => got_want("maxLength", length(instance), limit),
        ValidationErrorKind::MinItems { limit } => got_want("minItems", length(instance), limit),
        ValidationErrorKind::MaxItems { limit } => got_want("maxItems", length(instance), limit),
        ValidationErrorKind::MinProperties { limit } => {
            got_want("minProperties", length(instance), limit)
        }
        ValidationErrorKind::MaxProperties { limit } => {
            got_want("maxProperties", length(instance), limit)
        }
        _ => return None,
    })
}

fn message(kind: &ValidationErrorKind, instance: &Json) -> String {
    if let Some(text) = limit_message(kind, instance) {
        return text;
    }
    match kind {
        ValidationErrorKind::Type { kind } => type_message(kind, instance),
        ValidationErrorKind::Required { property } => {
            format!("\u{0}required:{}", property.as_str().unwrap_or_default())
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            let mut names: Vec<String> = unexpected.iter().map(|u| format!("'{u}'")).collect();
            names.sort();
            format!("additional properties {} not allowed", names.join(", "))
        }
        // With a list or map among the choices Helm gives up on listing them.
        ValidationErrorKind::Enum { options }
            if options
                .as_array()
                .is_some_and(|items| items.iter().any(|i| i.is_array() || i.is_object())) =>
        {
            "'enum' failed".into()
        }
        ValidationErrorKind::Constant { expected_value }
            if expected_value.is_array() || expected_value.is_object() =>
        {
            "'const' failed".into()
        }
        ValidationErrorKind::Enum { options } => match options.as_ref() {
            Json::Array(items) if items.len() == 1 => {
                format!("value must be {}", quoted(&items[0]))
            }
            Json::Array(items) => format!(
                "value must be one of {}",
                items.iter().map(quoted).collect::<Vec<_>>().join(", ")
            ),
            other => format!("value must be one of {}", quoted(other)),
        },
        ValidationErrorKind::Constant { expected_value } => {
            format!("value must be {}", quoted(expected_value))
        }
        ValidationErrorKind::Pattern { pattern } => {
            format!("{} does not match pattern '{pattern}'", quoted(instance))
        }
        ValidationErrorKind::Format { format } => {
            // Helm's validator adds its reason; the commonest one is reproduced.
            let reason = match instance {
                Json::String(s) if format == "email" && !s.contains('@') => ": missing @",
                _ => "",
            };
            format!("{} is not valid {format}{reason}", quoted(instance))
        }
        ValidationErrorKind::UniqueItems => {
            let (mut first, mut second) = (0, 0);
            if let Json::Array(items) = instance {
                'outer: for (i, a) in items.iter().enumerate() {
                    for (j, b) in items.iter().enumerate().skip(i + 1) {
                        if a == b {
                            (first, second) = (i, j);
                            break 'outer;
                        }
                    }
                }
            }
            format!("items at {first} and {second} are equal")
        }
        ValidationErrorKind::FalseSchema => "false schema".into(),
        ValidationErrorKind::Not { .. } => "'not' failed".into(),
        ValidationErrorKind::Contains => "no items match contains schema".into(),
        other => format!("{} failed", other.keyword()),
    }
}
