//! The commit status key ("context" on GitHub, "name" on GitLab, …): Flux's default
//! `<kind>/<name>/<first UID segment of the Provider>` in lower case, or `spec.commitStatusExpr`
//! (internal/server/provider_commit_status.go).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::event::Event;

/// The longest `commitStatusExpr` accepted, in bytes.
pub const MAX_EXPRESSION_LEN: usize = 4096;

/// Parsing and evaluation recurse per nesting level; run them on a stack of this size.
const STACK: usize = 64 << 20;

/// Flux's default status key: `<kind>/<name>/<uid up to the first '-'>`, lower-cased.
pub fn default_key(provider_uid: &str, event: &Event) -> String {
    let uid = provider_uid.split('-').next().unwrap_or_default();
    format!(
        "{}/{}/{uid}",
        event.involved_object.kind, event.involved_object.name
    )
    .to_lowercase()
}

/// A compiled `spec.commitStatusExpr`: a CEL expression over `event`, `alert` and `provider`
/// (the objects as JSON) that must yield a string.
#[derive(Clone)]
pub struct StatusExpr {
    source: String,
    env: Arc<cel::Env>,
    program: Arc<cel::Program>,
}

impl fmt::Debug for StatusExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.source)
    }
}

impl StatusExpr {
    /// Parses an expression; the error names the parser's complaint.
    pub fn compile(source: &str) -> Result<Self, String> {
        if source.len() > MAX_EXPRESSION_LEN {
            return Err(format!(
                "expression is longer than {MAX_EXPRESSION_LEN} bytes"
            ));
        }
        let mut env = cel::Env::stdlib();
        // Extensions only add overloads to a fresh standard environment: they cannot conflict.
        let _ = env.add_extension(cel::extensions::strings);
        let program = stacker::grow(STACK, || env.compile(source))
            .map_err(|e| format!("failed to compile expression '{source}': {e}"))?;
        Ok(Self {
            source: source.to_owned(),
            env: Arc::new(env),
            program: Arc::new(program),
        })
    }

    /// Evaluates the expression for one event; `alert` is the Alert object as JSON (`{}` when
    /// the caller has none).
    pub fn evaluate(
        &self,
        event: &Event,
        alert: &Value,
        provider: &Value,
    ) -> Result<String, String> {
        let mut context = cel::Context::with_env(Arc::clone(&self.env));
        let event = serde_json::to_value(event).unwrap_or_default();
        context.add_variable_from_value("event", to_cel(&event));
        context.add_variable_from_value("alert", to_cel(alert));
        context.add_variable_from_value("provider", to_cel(provider));
        match stacker::grow(STACK, || self.program.execute(&context)) {
            Ok(cel::Value::String(s)) => Ok(s.to_string()),
            Ok(other) => Err(format!(
                "failed to evaluate the spec.commitStatusExpr CEL expression for the event: the result is a {}, not a string",
                other.type_of()
            )),
            Err(e) => Err(format!(
                "failed to evaluate the spec.commitStatusExpr CEL expression for the event: {e}"
            )),
        }
    }
}

fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                cel::Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                cel::Value::UInt(u)
            } else {
                cel::Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(fields) => {
            let map: HashMap<cel::objects::Key, cel::Value> = fields
                .iter()
                .map(|(k, v)| (cel::objects::Key::from(k.clone()), to_cel(v)))
                .collect();
            cel::Value::Map(cel::objects::Map::from(map))
        }
    }
}
