//! Custom health checks written in CEL: `spec.healthCheckExprs` of Kustomizations and
//! HelmReleases, evaluated as Flux's `runtime/cel` status reader does.
//!
//! - Each entry matches objects by API group (the version in `apiVersion` is ignored) and, when
//!   given, kind; an entry with a kind takes precedence over a group-only entry of the same group.
//!   Two entries for the same group and kind are refused.
//! - A matching entry replaces the built-in kstatus rules of the kind ([`crate::compute_health`]).
//! - The object's top-level fields are the variables (`status`, `metadata`, `spec`, ...): there
//!   is no `self`. A field the object lacks is an evaluation error, not `false`.
//! - Evaluation: an object whose integer `status.observedGeneration` differs from its
//!   `metadata.generation` is InProgress; otherwise `inProgress`, `failed`, then `current` are
//!   evaluated in that order (absent ones skipped) and the first that is true decides; none true
//!   is InProgress. An evaluation error (a missing field, a result that is not a bool) makes the
//!   object Unknown with the error as message: the wait goes on until it times out, as in Flux.
//! - Expressions are parsed once, when [`HealthExprs::new`] is called (at reconcile start): a
//!   syntax error is an [`InvalidHealthExpr`] naming the entry, its apiVersion/kind and the
//!   expression, never a per-object status.
//!
//! Functions: the CEL standard library with its macros (`has`, `all`, `exists`, `exists_one`,
//! `map`, `filter`), the strings extension (`lowerAscii`, `split`, `trim`, `replace`, ...),
//! `base64.encode`/`base64.decode` and `sets.contains`/`sets.equivalent`/`sets.intersects`. Not
//! Flux's `timestamp`/`duration` types (the crate's `chrono` feature is off).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use capstan_api::meta::CustomHealthCheck;
use serde_json::Value;

use crate::health::Status;
use crate::object::split_api_version;

/// A `spec.healthCheckExprs` list that could not be used: the reconcile stalls with this
/// message (reason `InvalidCELExpression`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("healthCheckExprs[{index}] ({target}): {reason}")]
pub struct InvalidHealthExpr {
    /// The position of the entry in the list.
    pub index: usize,
    /// `apiVersion <a>, kind <k>` (or `apiVersion <a>` for a group-only entry).
    pub target: String,
    /// What is wrong: the expression and the parser's message, or the duplicate.
    pub reason: String,
}

/// The longest expression accepted, in bytes (health expressions are a line or two).
pub const MAX_EXPRESSION_LEN: usize = 10_000;

/// The deepest expression tree accepted: parsing and evaluating recurse once per level.
pub const MAX_EXPRESSION_DEPTH: usize = 100;

/// The stack parsing and evaluation run on: the parser and the interpreter recurse deeply per
/// level (tens of KiB in a debug build), more than a worker thread's stack holds for
/// [`MAX_EXPRESSION_DEPTH`] levels. Reserved, not committed, until used.
const STACK: usize = 64 << 20;

/// One parsed expression with its source.
struct Expr {
    /// `current`, `inProgress` or `failed`.
    field: &'static str,
    source: String,
    program: ::cel::Program,
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {:?}", self.field, self.source)
    }
}

/// The parsed expressions of one entry.
#[derive(Debug)]
struct Evaluator {
    in_progress: Option<Expr>,
    failed: Option<Expr>,
    current: Expr,
}

/// Group and kind; an empty kind is a group-only entry.
type GroupKind = (String, String);

/// The parsed `spec.healthCheckExprs` of one object: which kinds they judge, and how.
#[derive(Clone, Default)]
pub struct HealthExprs {
    inner: Option<Arc<Inner>>,
    /// Whether batch Jobs keep the built-in rule whatever the entries say.
    builtin_jobs: bool,
}

struct Inner {
    env: Arc<::cel::Env>,
    evaluators: HashMap<GroupKind, Evaluator>,
}

impl fmt::Debug for HealthExprs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_map();
        if let Some(inner) = &self.inner {
            for (gk, evaluator) in &inner.evaluators {
                list.entry(gk, evaluator);
            }
        }
        list.finish()
    }
}

/// The environment expressions are parsed and evaluated in: the standard library, the strings
/// and encoders extensions, and the sets functions.
fn environment() -> ::cel::Env {
    use ::cel::common::types::LIST_TYPE;
    let mut env = ::cel::Env::stdlib();
    // The extensions only add overloads to a fresh standard environment: they cannot conflict.
    let _ = env.add_extension(::cel::extensions::strings);
    let _ = env.add_extension(::cel::extensions::encoders);
    let lists = || vec![LIST_TYPE, LIST_TYPE];
    let _ = env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        lists(),
        sets_contains,
    );
    let _ = env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        lists(),
        sets_equivalent,
    );
    let _ = env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        lists(),
        sets_intersects,
    );
    env
}

type CowVal<'b, 'v> = ::cel::common::value::CowVal<'b, 'v>;
type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ::cel::ExecutionError>;

/// The two list arguments of a `sets.*` function.
fn two_lists<'a, 'b, 'v>(
    function: &str,
    args: &'a [CowVal<'b, 'v>],
) -> Result<
    (
        &'a (dyn ::cel::common::value::Val + 'v),
        &'a (dyn ::cel::common::value::Val + 'v),
    ),
    ::cel::ExecutionError,
> {
    match args {
        [a, b] => Ok((a.as_ref(), b.as_ref())),
        _ => Err(::cel::ExecutionError::function_error(
            function,
            format!("expected 2 arguments, got {}", args.len()),
        )),
    }
}

/// How many elements of `items` are in `set` (stopping at the first miss when `all`, at the
/// first hit otherwise); `true` when the answer is `all`.
fn count_in(
    function: &str,
    set: &dyn ::cel::common::value::Val,
    items: &dyn ::cel::common::value::Val,
    all: bool,
) -> Result<bool, ::cel::ExecutionError> {
    let not_a_list = || ::cel::ExecutionError::function_error(function, "expected two lists");
    let container = set.as_container().ok_or_else(not_a_list)?;
    let iterable = items.as_iterable().ok_or_else(not_a_list)?;
    let mut iter = iterable.iter();
    while let Some(item) = iter.next() {
        if container.contains(item)? != all {
            return Ok(!all);
        }
    }
    Ok(all)
}

/// `sets.contains(a, b)`: every element of `b` is in `a`.
#[allow(clippy::needless_pass_by_value)] // the signature of `cel`'s overloads
fn sets_contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let (a, b) = two_lists("sets.contains", &args)?;
    let result = count_in("sets.contains", a, b, true)?;
    Ok(CowVal::owned(::cel::common::types::CelBool::from(result)))
}

/// `sets.equivalent(a, b)`: the same elements, whatever the order and repetitions.
#[allow(clippy::needless_pass_by_value)] // the signature of `cel`'s overloads
fn sets_equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let (a, b) = two_lists("sets.equivalent", &args)?;
    let result =
        count_in("sets.equivalent", a, b, true)? && count_in("sets.equivalent", b, a, true)?;
    Ok(CowVal::owned(::cel::common::types::CelBool::from(result)))
}

/// `sets.intersects(a, b)`: an element in both.
#[allow(clippy::needless_pass_by_value)] // the signature of `cel`'s overloads
fn sets_intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let (a, b) = two_lists("sets.intersects", &args)?;
    let result = count_in("sets.intersects", a, b, false)?;
    Ok(CowVal::owned(::cel::common::types::CelBool::from(result)))
}

impl HealthExprs {
    /// Parses `checks`.
    ///
    /// # Errors
    /// [`InvalidHealthExpr`] for the first entry with an empty `current`, an expression that
    /// does not parse, or a group and kind already given by an earlier entry.
    pub fn new(checks: &[CustomHealthCheck]) -> Result<Self, InvalidHealthExpr> {
        if checks.is_empty() {
            return Ok(Self::default());
        }
        let env = environment();
        let mut evaluators = HashMap::with_capacity(checks.len());
        for (index, check) in checks.iter().enumerate() {
            let kind = check.kind.clone().unwrap_or_default();
            let target = if kind.is_empty() {
                format!("apiVersion {}", check.api_version)
            } else {
                format!("apiVersion {}, kind {kind}", check.api_version)
            };
            let invalid = |reason: String| InvalidHealthExpr {
                index,
                target: target.clone(),
                reason,
            };
            let group = split_api_version(&check.api_version).0.to_owned();
            let key = (group, kind);
            if evaluators.contains_key(&key) {
                return Err(invalid(format!(
                    "duplicate custom health check for {}",
                    if key.1.is_empty() {
                        format!("group {:?}", key.0)
                    } else {
                        format!("{}.{}", key.1, key.0)
                            .trim_end_matches('.')
                            .to_owned()
                    }
                )));
            }
            if check.current.trim().is_empty() {
                return Err(invalid("expression current not specified".to_owned()));
            }
            let parse = |field: &'static str, source: &str| -> Result<Expr, InvalidHealthExpr> {
                if source.len() > MAX_EXPRESSION_LEN {
                    return Err(invalid(format!(
                        "the {field} expression is longer than {MAX_EXPRESSION_LEN} bytes"
                    )));
                }
                let program = stacker::grow(STACK, || env.compile(source)).map_err(|e| {
                    invalid(format!(
                        "failed to parse the {field} expression '{source}': {}",
                        one_line(&e.to_string())
                    ))
                })?;
                if depth(program.expression()) > MAX_EXPRESSION_DEPTH {
                    return Err(invalid(format!(
                        "the {field} expression '{source}' is nested deeper than \
                         {MAX_EXPRESSION_DEPTH} levels"
                    )));
                }
                Ok(Expr {
                    field,
                    source: source.to_owned(),
                    program,
                })
            };
            let optional = |field, source: &Option<String>| {
                source
                    .as_deref()
                    .filter(|s| !s.is_empty())
                    .map(|s| parse(field, s))
                    .transpose()
            };
            let evaluator = Evaluator {
                in_progress: optional("inProgress", &check.in_progress)?,
                failed: optional("failed", &check.failed)?,
                current: parse("current", &check.current)?,
            };
            evaluators.insert(key, evaluator);
        }
        Ok(Self {
            inner: Some(Arc::new(Inner {
                env: Arc::new(env),
                evaluators,
            })),
            builtin_jobs: false,
        })
    }

    /// These expressions, except that batch Jobs keep the built-in rule: kustomize-controller
    /// consults its Job status reader before the expressions when it applies with its own
    /// identity (no `serviceAccountName` impersonation, no `kubeConfig`).
    #[must_use]
    pub fn with_builtin_jobs(mut self) -> Self {
        self.builtin_jobs = true;
        self
    }

    /// Whether there are no expressions.
    pub fn is_empty(&self) -> bool {
        self.inner.is_none()
    }

    /// The entry judging `group`/`kind`: the one naming the kind, else the group-only one.
    fn evaluator(&self, group: &str, kind: &str) -> Option<(&Inner, &Evaluator)> {
        let inner = self.inner.as_deref()?;
        if self.builtin_jobs && group == "batch" && kind == "Job" {
            return None;
        }
        let evaluator = inner
            .evaluators
            .get(&(group.to_owned(), kind.to_owned()))
            .or_else(|| inner.evaluators.get(&(group.to_owned(), String::new())))?;
        Some((inner, evaluator))
    }

    /// The status of a live object (its full JSON) by the expressions, or `None` when no entry
    /// matches its group and kind (the built-in rules apply).
    pub fn evaluate(&self, object: &Value) -> Option<(Status, String)> {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let (inner, evaluator) = self.evaluator(split_api_version(api_version).0, kind)?;
        Some(stacker::grow(STACK, || evaluate(inner, evaluator, object)))
    }
}

fn evaluate(inner: &Inner, evaluator: &Evaluator, object: &Value) -> (Status, String) {
    let kind = object["kind"].as_str().unwrap_or_default();
    if let (Some(observed), Some(generation)) = (
        object["status"]["observedGeneration"].as_i64(),
        object["metadata"]["generation"].as_i64(),
    ) && observed != generation
    {
        return (
            Status::InProgress,
            format!(
                "{kind} generation is {generation}, but latest observed generation is {observed}"
            ),
        );
    }
    let mut context = ::cel::Context::with_env(Arc::clone(&inner.env));
    if let Value::Object(fields) = object {
        for (name, value) in fields {
            context.add_variable_from_value(name.as_str(), to_cel(value));
        }
    }
    let steps = [
        (evaluator.in_progress.as_ref(), Status::InProgress),
        (evaluator.failed.as_ref(), Status::Failed),
        (Some(&evaluator.current), Status::Current),
    ];
    for (expr, status) in steps {
        let Some(expr) = expr else { continue };
        match expr.program.execute(&context) {
            Ok(::cel::Value::Bool(true)) => {
                return (
                    status,
                    format!("{} expression is true: {}", expr.field, expr.source),
                );
            }
            Ok(::cel::Value::Bool(false)) => {}
            Ok(other) => {
                return (
                    Status::Unknown,
                    format!(
                        "the {} expression '{}' is not a bool: it evaluates to a {}",
                        expr.field,
                        expr.source,
                        other.type_of()
                    ),
                );
            }
            Err(e) => {
                return (
                    Status::Unknown,
                    format!(
                        "failed to evaluate the {} expression '{}': {e}",
                        expr.field, expr.source
                    ),
                );
            }
        }
    }
    (
        Status::InProgress,
        "no health check expression is true yet".to_owned(),
    )
}

/// A JSON value as CEL sees an object read from the API server: integers are `int` (`uint`
/// only beyond `int`'s range), other numbers `double`.
fn to_cel(value: &Value) -> ::cel::Value {
    match value {
        Value::Null => ::cel::Value::Null,
        Value::Bool(b) => ::cel::Value::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                ::cel::Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                ::cel::Value::UInt(u)
            } else {
                ::cel::Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => ::cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => ::cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(fields) => {
            let map: HashMap<::cel::objects::Key, ::cel::Value> = fields
                .iter()
                .map(|(k, v)| (::cel::objects::Key::from(k.clone()), to_cel(v)))
                .collect();
            ::cel::Value::Map(::cel::objects::Map::from(map))
        }
    }
}

/// The depth of an expression tree, walked without recursion.
fn depth(root: &::cel::IdedExpr) -> usize {
    use ::cel::common::ast::{EntryExpr, Expr};
    let mut deepest = 0;
    let mut pending = vec![(root, 1)];
    while let Some((node, level)) = pending.pop() {
        deepest = deepest.max(level);
        let next = level + 1;
        match &node.expr {
            Expr::Call(call) => {
                pending.extend(call.target.as_deref().map(|t| (t, next)));
                pending.extend(call.args.iter().map(|a| (a, next)));
            }
            Expr::Comprehension(c) => pending.extend(
                [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ]
                .map(|e| (e, next)),
            ),
            Expr::List(list) => pending.extend(list.elements.iter().map(|e| (e, next))),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(e) = &entry.expr {
                        pending.extend([(&e.key, next), (&e.value, next)]);
                    }
                }
            }
            Expr::Struct(st) => {
                for entry in &st.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        pending.push((&f.value, next));
                    }
                }
            }
            Expr::Select(select) => pending.push((&select.operand, next)),
            Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
        }
    }
    deepest
}

/// A multi-line parser message on one line (condition messages are one line).
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One CEL expression of a `bool` over named JSON variables (e.g. a Receiver's
/// `resourceFilter` over `res` and `req`), in the environment and within the limits of the
/// health expressions ([`MAX_EXPRESSION_LEN`], [`MAX_EXPRESSION_DEPTH`], a grown stack).
#[derive(Clone)]
pub struct BoolExpr {
    env: Arc<::cel::Env>,
    program: Arc<::cel::Program>,
    source: String,
}

impl fmt::Debug for BoolExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BoolExpr").field(&self.source).finish()
    }
}

impl BoolExpr {
    /// Parses `source`.
    ///
    /// # Errors
    /// What is wrong (length, syntax, depth), on one line, with the expression.
    pub fn parse(source: &str) -> Result<Self, String> {
        if source.len() > MAX_EXPRESSION_LEN {
            return Err(format!(
                "the expression is longer than {MAX_EXPRESSION_LEN} bytes"
            ));
        }
        let env = environment();
        let program = stacker::grow(STACK, || env.compile(source)).map_err(|e| {
            format!(
                "failed to parse the expression '{source}': {}",
                one_line(&e.to_string())
            )
        })?;
        if depth(program.expression()) > MAX_EXPRESSION_DEPTH {
            return Err(format!(
                "the expression '{source}' is nested deeper than {MAX_EXPRESSION_DEPTH} levels"
            ));
        }
        Ok(Self {
            env: Arc::new(env),
            program: Arc::new(program),
            source: source.to_owned(),
        })
    }

    /// The expression's value with `variables` bound.
    ///
    /// # Errors
    /// An evaluation error (e.g. a missing field), or a value that is not a `bool`.
    pub fn evaluate(&self, variables: &[(&str, &Value)]) -> Result<bool, String> {
        stacker::grow(STACK, || {
            let mut context = ::cel::Context::with_env(Arc::clone(&self.env));
            for (name, value) in variables {
                context.add_variable_from_value(*name, to_cel(value));
            }
            match self.program.execute(&context) {
                Ok(::cel::Value::Bool(value)) => Ok(value),
                Ok(other) => Err(format!(
                    "the expression '{}' is not a bool: it evaluates to a {}",
                    self.source,
                    other.type_of()
                )),
                Err(e) => Err(format!(
                    "failed to evaluate the expression '{}': {e}",
                    self.source
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(api_version: &str, kind: Option<&str>, current: &str) -> CustomHealthCheck {
        CustomHealthCheck {
            api_version: api_version.to_owned(),
            kind: kind.map(str::to_owned),
            current: current.to_owned(),
            in_progress: None,
            failed: None,
        }
    }

    const READY: &str = "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')";
    const NOT_READY: &str =
        "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')";

    fn widget(status: &serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "generation": 1}, "spec": {"size": 3}, "status": status})
    }

    fn widget_exprs() -> HealthExprs {
        HealthExprs::new(&[CustomHealthCheck {
            failed: Some(NOT_READY.to_owned()),
            in_progress: Some("has(status.phase) && status.phase == 'Pending'".to_owned()),
            ..check("example.com/v1", Some("Widget"), READY)
        }])
        .unwrap()
    }

    fn status_of(exprs: &HealthExprs, object: &serde_json::Value) -> Status {
        exprs.evaluate(object).expect("an entry matches").0
    }

    #[test]
    fn order_is_in_progress_failed_current() {
        let exprs = widget_exprs();
        let ready = widget(&json!({"conditions": [{"type": "Ready", "status": "True"}]}));
        assert_eq!(
            exprs.evaluate(&ready),
            Some((
                Status::Current,
                format!("current expression is true: {READY}")
            ))
        );
        let failed = widget(&json!({"conditions": [{"type": "Ready", "status": "False"}]}));
        assert_eq!(status_of(&exprs, &failed), Status::Failed);
        // inProgress is evaluated first: it wins over failed.
        let pending = widget(
            &json!({"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}),
        );
        assert_eq!(status_of(&exprs, &pending), Status::InProgress);
        // None true: InProgress.
        let unknown = widget(&json!({"conditions": [{"type": "Ready", "status": "Unknown"}]}));
        assert_eq!(
            exprs.evaluate(&unknown),
            Some((
                Status::InProgress,
                "no health check expression is true yet".to_owned()
            ))
        );
        // `all` over no Ready condition is true: current (and failed, first) hold vacuously.
        let empty = widget(&json!({"conditions": []}));
        assert_eq!(status_of(&exprs, &empty), Status::Failed);
    }

    #[test]
    fn a_stale_observed_generation_is_in_progress() {
        let exprs = widget_exprs();
        let stale = widget(&json!({"observedGeneration": 0,
            "conditions": [{"type": "Ready", "status": "True"}]}));
        assert_eq!(status_of(&exprs, &stale), Status::InProgress);
        let observed = widget(&json!({"observedGeneration": 1,
            "conditions": [{"type": "Ready", "status": "True"}]}));
        assert_eq!(status_of(&exprs, &observed), Status::Current);
        // A string observedGeneration is not compared (some CRDs type it so).
        let string = widget(&json!({"observedGeneration": "0",
            "conditions": [{"type": "Ready", "status": "True"}]}));
        assert_eq!(status_of(&exprs, &string), Status::Current);
    }

    #[test]
    fn missing_fields_are_unknown_not_errors() {
        let exprs = widget_exprs();
        // No status at all: `status` is not a variable.
        let bare = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w"}});
        let (status, message) = exprs.evaluate(&bare).unwrap();
        assert_eq!(status, Status::Unknown);
        assert!(message.contains("inProgress expression"), "{message}");
        // A status without conditions: `status.conditions` is a missing key.
        let (status, message) = exprs.evaluate(&widget(&json!({}))).unwrap();
        assert_eq!(status, Status::Unknown);
        assert!(message.contains("failed expression"), "{message}");
        assert!(message.contains("conditions"), "{message}");
    }

    #[test]
    fn a_result_that_is_not_a_bool_is_unknown() {
        let exprs = HealthExprs::new(&[check("example.com/v1", None, "spec.size")]).unwrap();
        let (status, message) = exprs.evaluate(&widget(&json!({}))).unwrap();
        assert_eq!(status, Status::Unknown);
        assert!(message.contains("not a bool"), "{message}");
    }

    #[test]
    fn variables_are_the_top_level_fields() {
        let exprs = HealthExprs::new(&[check(
            "v1",
            Some("ConfigMap"),
            "data.ready == 'yes' && metadata.name.startsWith('c') && kind == 'ConfigMap'",
        )])
        .unwrap();
        let cm = |ready: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                "data": {"ready": ready}})
        };
        assert_eq!(status_of(&exprs, &cm("yes")), Status::Current);
        assert_eq!(status_of(&exprs, &cm("no")), Status::InProgress);
        let self_ = HealthExprs::new(&[check("v1", None, "self.data.ready == 'yes'")]).unwrap();
        assert_eq!(status_of(&self_, &cm("yes")), Status::Unknown);
    }

    #[test]
    fn numbers_strings_and_macros() {
        let cases = [
            ("spec.size == 3", true),
            ("spec.size > 2.5", true),
            ("spec.size >= 3 && spec.size < 4", true),
            ("has(spec.size) && !has(spec.color)", true),
            ("has(status.conditions) == false", true),
            ("['a', 'b'].exists(x, x == 'b')", true),
            ("[1, 2, 3].exists_one(x, x > 2)", true),
            ("[1, 2, 3].map(x, x * 2) == [2, 4, 6]", true),
            ("metadata.name.lowerAscii() == 'w'", true),
            ("'a,b'.split(',').size() == 2", true),
            ("metadata.name.matches('^w$')", true),
            ("'Ready' in ['Ready', 'Stalled']", true),
            ("metadata.?labels.orValue({}).size() == 0", true),
            ("base64.encode(b'w') == 'dw=='", true),
            ("sets.contains(['a', 'b', 'c'], ['c', 'a'])", true),
            ("sets.contains(['a'], ['a', 'z'])", false),
            ("sets.contains([1, 2], [])", true),
            ("sets.equivalent([1, 2, 2], [2, 1])", true),
            ("sets.equivalent([1], [1, 3])", false),
            ("sets.intersects(['x', 'y'], ['y'])", true),
            ("sets.intersects(['x'], [])", false),
            ("size(metadata.name) == 2", false),
        ];
        for (source, want) in cases {
            let exprs = HealthExprs::new(&[check("example.com/v1", None, source)]).unwrap();
            let (status, message) = exprs.evaluate(&widget(&json!({}))).unwrap();
            let want = if want {
                Status::Current
            } else {
                Status::InProgress
            };
            assert_eq!(status, want, "{source}: {message}");
        }
    }

    #[test]
    fn matching_by_group_and_kind() {
        let exprs = HealthExprs::new(&[
            check("example.com/v1", None, "false"),
            check("example.com/v2", Some("Widget"), "true"),
        ])
        .unwrap();
        // The version is ignored; the kind entry wins over the group-only one.
        assert_eq!(status_of(&exprs, &widget(&json!({}))), Status::Current);
        let gadget = json!({"apiVersion": "example.com/v1beta1", "kind": "Gadget",
            "metadata": {"name": "g"}});
        assert_eq!(status_of(&exprs, &gadget), Status::InProgress);
        let other =
            json!({"apiVersion": "other.io/v1", "kind": "Widget", "metadata": {"name": "o"}});
        assert_eq!(exprs.evaluate(&other), None);
        let config_map =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert_eq!(exprs.evaluate(&config_map), None);
        assert!(HealthExprs::new(&[]).unwrap().is_empty());
        let jobs = HealthExprs::new(&[check("batch/v1", None, "true")]).unwrap();
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}});
        assert_eq!(status_of(&jobs, &job), Status::Current);
        assert_eq!(jobs.with_builtin_jobs().evaluate(&job), None);
    }

    #[test]
    fn invalid_lists_are_refused_with_the_entry_named() {
        let error = HealthExprs::new(&[
            check("example.com/v1", Some("Widget"), "true"),
            CustomHealthCheck {
                failed: Some("status.(".to_owned()),
                ..check("example.com/v1", Some("Gadget"), "true")
            },
        ])
        .unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(
                "healthCheckExprs[1] (apiVersion example.com/v1, kind Gadget): \
                 failed to parse the failed expression 'status.(': "
            ),
            "{message}"
        );
        assert!(!message.contains('\n'), "{message}");
        let duplicate = HealthExprs::new(&[
            check("example.com/v1", Some("Widget"), "true"),
            check("example.com/v2", Some("Widget"), "true"),
        ])
        .unwrap_err();
        assert_eq!(duplicate.index, 1);
        assert!(duplicate.reason.contains("duplicate"), "{duplicate}");
        // Deep or long expressions are refused, not a stack overflow of the controller.
        let deep = format!("{}1 == 1", "1 + ".repeat(MAX_EXPRESSION_DEPTH));
        let error = HealthExprs::new(&[check("example.com/v1", None, &deep)]).unwrap_err();
        assert!(
            error.reason.contains("nested deeper than 100 levels"),
            "{error}"
        );
        let parens = format!("{}true{}", "(".repeat(500), ")".repeat(500));
        let error = HealthExprs::new(&[check("example.com/v1", None, &parens)]).unwrap_err();
        assert!(error.reason.starts_with("failed to parse"), "{error}");
        let long = format!("{}1 == 1", "1 + ".repeat(MAX_EXPRESSION_LEN / 4));
        let error = HealthExprs::new(&[check("example.com/v1", None, &long)]).unwrap_err();
        assert!(error.reason.contains("longer than 10000 bytes"), "{error}");
        // Just within the limits: parsed and evaluated.
        let chain = format!("{}1 == {}", "1 + ".repeat(90), 91);
        let exprs = HealthExprs::new(&[check("example.com/v1", None, &chain)]).unwrap();
        assert_eq!(status_of(&exprs, &widget(&json!({}))), Status::Current);
        let empty = HealthExprs::new(&[check("example.com/v1", None, " ")]).unwrap_err();
        assert_eq!(
            empty.to_string(),
            "healthCheckExprs[0] (apiVersion example.com/v1): expression current not specified"
        );
    }

    #[test]
    fn a_bool_expression_over_named_variables() {
        let expr = BoolExpr::parse("res.metadata.name == req.name && size(req.tags) > 0").unwrap();
        let res = serde_json::json!({"metadata": {"name": "app"}});
        let yes = serde_json::json!({"name": "app", "tags": ["v1"]});
        let no = serde_json::json!({"name": "other", "tags": ["v1"]});
        assert_eq!(expr.evaluate(&[("res", &res), ("req", &yes)]), Ok(true));
        assert_eq!(expr.evaluate(&[("res", &res), ("req", &no)]), Ok(false));
        assert!(expr.evaluate(&[("res", &res)]).is_err(), "req unbound");
        assert!(BoolExpr::parse("res.metadata.name ==").is_err());
        let not_bool = BoolExpr::parse("res.metadata.name").unwrap();
        assert!(not_bool.evaluate(&[("res", &res)]).is_err());
    }
}
