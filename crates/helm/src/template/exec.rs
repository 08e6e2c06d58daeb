//! The executor: walks parsed trees with Go's evaluation rules and writes one output buffer.
//!
//! Go distinguishes an untyped nil (a missing value: printing `<no value>`, field access on
//! it yielding nil again) from a nil sitting in an `interface{}` slot (a map element or list
//! item: field access on it fails with `nil pointer evaluating interface {}.x`). Values carry
//! that bit as [`Val::iface`] while they travel through field chains, range variables and dot;
//! pipelines drop it, as Go's `evalPipeline` does.

use std::fmt::Write as _;
use std::rc::Rc;

use super::builtins::{Arity, Builtin, elements_are_interfaces};
use super::lex::go_quote;
use super::parse::{Arg, Command, Func, Node, Number, Pipe, Tree, line_at};
use super::{Call, Env, Error, Param, Runtime, Set, Signature};
use crate::value::{ListKind, Value};

/// How deep `{{template}}` calls may nest. Go allows 100000; each level costs native stack
/// (grown on the heap by `stacker`), so the cap is lower, with Go's message.
pub const MAX_TEMPLATE_DEPTH: usize = 10_000;

/// How many lists of nodes (a template body, each loop iteration's body, each branch taken;
/// counted across every `include`, `tpl` and `{{template}}` it makes) one execution may walk.
/// Go has no limit and runs for hours on nested ranges over large integers
/// (`{{range 100000}}{{range 100000}}…`). A chart template walks thousands to tens of
/// thousands of lists, so the cap leaves a wide margin while bounding a hostile one to about
/// a second.
pub const MAX_STEPS: u64 = 10_000_000;

/// The most text one execution (a file, an `include`, a `tpl`) may produce: 256 MiB.
pub const MAX_OUTPUT: usize = 256 << 20;

const RED_ZONE: usize = 128 * 1024;
const STACK_CHUNK: usize = 2 * 1024 * 1024;

/// A value as execution holds it: whether it sits in an `interface{}` slot.
#[derive(Clone, Debug)]
pub(crate) struct Val {
    pub v: Value,
    pub iface: bool,
}

impl Val {
    fn plain(v: Value) -> Val {
        Val { v, iface: false }
    }
}

/// What a walk step asks of the enclosing range.
#[derive(PartialEq, Eq)]
enum Flow {
    Normal,
    Break,
    Continue,
}

/// The node errors are reported at (Go's `state.node`).
#[derive(Clone, Copy)]
enum At<'a> {
    None,
    Node(&'a Node),
    Pipe(&'a Pipe),
    Cmd(&'a Command),
    Arg(&'a Arg),
}

/// State shared by an execution and every `include`/`tpl` it makes.
pub(crate) struct Shared {
    /// Helm's per-name count of nested `include`s.
    pub includes: super::fasthash::FastMap<String, usize>,
    /// How many `tpl` calls are running inside each other.
    pub tpl_depth: usize,
    /// Steps taken so far (see [`MAX_STEPS`]).
    pub steps: u64,
}

pub(crate) struct Exec<'a, 's> {
    set: &'a Set,
    env: &'s mut Env,
    shared: &'s mut Shared,
    tmpl: &'a Tree,
    vars: Vec<(Rc<str>, Val)>,
    at: At<'a>,
    depth: usize,
    pub out: String,
}

type R<T> = Result<T, Error>;

impl<'a, 's> Exec<'a, 's> {
    pub fn new(set: &'a Set, tmpl: &'a Tree, env: &'s mut Env, shared: &'s mut Shared) -> Self {
        Exec {
            set,
            env,
            shared,
            tmpl,
            vars: Vec::new(),
            at: At::None,
            depth: 0,
            out: String::new(),
        }
    }

    /// Executes the template with `data` as dot and `$`.
    pub fn run(&mut self, data: Value) -> R<()> {
        let dot = Val::plain(data);
        self.vars.push((self.set.dollar.clone(), dot.clone()));
        let root = &self.tmpl.root;
        self.walk_list(&dot, root).map(|_| ())
    }

    fn error(&self, msg: impl AsRef<str>) -> Error {
        let msg = msg.as_ref();
        let name = &self.tmpl.name;
        let (pos, context) = match self.at {
            At::None => {
                return Error {
                    message: format!("template: {name}: {msg}"),
                };
            }
            At::Node(n) => {
                let mut s = String::new();
                n.write_to(&self.tmpl.text, &mut s);
                (n.pos(), s)
            }
            At::Pipe(p) => {
                let mut s = String::new();
                p.write_to(&mut s);
                (p.pos, s)
            }
            At::Cmd(c) => {
                let mut s = String::new();
                c.write_to(&mut s);
                (c.pos, s)
            }
            At::Arg(a) => (a.pos(), a.to_go_string()),
        };
        let text = &self.tmpl.text;
        let line = line_at(text, pos);
        let before = text.get(..pos).unwrap_or("");
        let col = match before.rfind('\n') {
            Some(nl) => pos - (nl + 1),
            None => pos,
        };
        Error {
            message: format!(
                "template: {}:{line}:{col}: executing {} at <{context}>: {msg}",
                self.tmpl.parse_name,
                go_quote(name)
            ),
        }
    }

    /// Counts one walked list against [`MAX_STEPS`]. A list is as long as the text it came
    /// from, so this bounds the work of loops and recursion, not of straight-line text.
    fn step(&mut self) -> R<()> {
        self.shared.steps += 1;
        if self.shared.steps > MAX_STEPS {
            return Err(self.error(format!(
                "exceeded maximum template execution steps ({MAX_STEPS})"
            )));
        }
        Ok(())
    }

    fn walk_list(&mut self, dot: &Val, list: &'a [Node]) -> R<Flow> {
        // Every list, even an empty loop body, is a step.
        self.step()?;
        for node in list {
            let flow = self.walk(dot, node)?;
            if flow != Flow::Normal {
                return Ok(flow);
            }
        }
        Ok(Flow::Normal)
    }

    fn walk(&mut self, dot: &Val, node: &'a Node) -> R<Flow> {
        if let Node::Text(a, b) = node {
            self.out.push_str(self.tmpl.text.get(*a..*b).unwrap_or(""));
            return self.check_output();
        }
        stacker::maybe_grow(RED_ZONE, STACK_CHUNK, || self.walk_inner(dot, node))
    }

    /// Fails once the output passes [`MAX_OUTPUT`]: a bound on memory for hostile templates
    /// (`{{ range 100000000000 }}…`), far above what any chart renders.
    fn check_output(&self) -> R<Flow> {
        if self.out.len() > MAX_OUTPUT {
            return Err(self.error(format!("template output exceeds {MAX_OUTPUT} bytes")));
        }
        Ok(Flow::Normal)
    }

    fn walk_inner(&mut self, dot: &Val, node: &'a Node) -> R<Flow> {
        self.at = At::Node(node);
        match node {
            Node::Text(..) => {}
            Node::Action(pipe) => {
                let v = self.eval_pipeline(dot, pipe)?;
                if pipe.decl.is_empty() {
                    match &v {
                        Value::Nil => self.out.push_str("<no value>"),
                        Value::String(s) => self.out.push_str(s),
                        // Go prints a struct reached through a pointer with its `String`
                        // method (Helm's `.Capabilities.KubeVersion` prints `v1.36.0`), where
                        // `printf "%v"` of the copy shows the fields.
                        Value::Object(o) => match o.method("String", &[]) {
                            Some(Ok(Value::String(s))) => self.out.push_str(&s),
                            _ => {
                                let _ = write!(self.out, "{v}");
                            }
                        },
                        other => {
                            let _ = write!(self.out, "{other}");
                        }
                    }
                    return self.check_output();
                }
            }
            Node::If(b) | Node::With(b) => {
                let mark = self.vars.len();
                let v = self.eval_pipeline(dot, &b.pipe)?;
                let flow = if v.truth() {
                    if matches!(node, Node::With(_)) {
                        self.walk_list(&Val::plain(v), &b.list)?
                    } else {
                        self.walk_list(dot, &b.list)?
                    }
                } else if let Some(e) = &b.else_list {
                    self.walk_list(dot, e)?
                } else {
                    Flow::Normal
                };
                self.vars.truncate(mark);
                return Ok(flow);
            }
            Node::Range(b) => {
                let mark = self.vars.len();
                // Only the `else` part can pass a `continue` on to an enclosing range.
                let flow = self.walk_range(dot, b)?;
                self.vars.truncate(mark);
                return Ok(flow);
            }
            Node::Template { name, pipe, .. } => {
                self.walk_template(dot, node, name, pipe.as_deref())?;
            }
            Node::Break(_) => return Ok(Flow::Break),
            Node::Continue(_) => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    fn walk_range(&mut self, dot: &Val, b: &'a super::parse::Branch) -> R<Flow> {
        let mut v = self.eval_pipeline(dot, &b.pipe)?;
        // A Go map or slice type with methods (Helm's `.Files`, `.Files.Glob`) ranges over
        // its data.
        if let Value::Object(o) = &v
            && matches!(o.kind_name(), "map" | "slice")
        {
            v = o.to_data();
        }
        let mark = self.vars.len();
        let decls = b.pipe.decl.len();
        // Runs the body once; returns whether the range must stop.
        let one = |this: &mut Self, index: Val, elem: Val| -> R<bool> {
            let n = this.vars.len();
            if decls > 0 && n >= 1 {
                this.vars[n - 1].1 = elem.clone();
            }
            if decls > 1 && n >= 2 {
                this.vars[n - 2].1 = index;
            }
            let flow = this.walk_list(&elem, &b.list)?;
            this.vars.truncate(mark);
            Ok(flow == Flow::Break)
        };
        match &v {
            Value::List(items, kind) if !items.is_empty() => {
                let iface = elements_are_interfaces(*kind);
                for (i, item) in items.iter().enumerate() {
                    let elem = Val {
                        v: item.clone(),
                        iface,
                    };
                    if one(
                        self,
                        Val::plain(Value::Int(i64::try_from(i).unwrap_or(i64::MAX))),
                        elem,
                    )? {
                        break;
                    }
                }
                return Ok(Flow::Normal);
            }
            Value::Bytes(bytes) if !bytes.is_empty() => {
                for (i, byte) in bytes.iter().enumerate() {
                    let elem = Val::plain(Value::Int(i64::from(*byte)));
                    if one(
                        self,
                        Val::plain(Value::Int(i64::try_from(i).unwrap_or(i64::MAX))),
                        elem,
                    )? {
                        break;
                    }
                }
                return Ok(Flow::Normal);
            }
            Value::Map(m) => {
                // A snapshot: the body may modify the map (Sprig's `set`).
                let entries: Vec<(String, Value)> = m
                    .borrow()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if !entries.is_empty() {
                    for (k, item) in entries {
                        let elem = Val {
                            v: item,
                            iface: true,
                        };
                        if one(self, Val::plain(Value::from(k)), elem)? {
                            break;
                        }
                    }
                    return Ok(Flow::Normal);
                }
            }
            Value::Int(n) | Value::Int64(n) => {
                if decls > 1 {
                    return Err(self.error(format!(
                        "can't use {v} to iterate over more than one variable"
                    )));
                }
                let wrap = |i: i64| match v {
                    Value::Int64(_) => Value::Int64(i),
                    _ => Value::Int(i),
                };
                if *n > 0 {
                    for i in 0..*n {
                        if one(self, Val::plain(Value::Nil), Val::plain(wrap(i)))? {
                            break;
                        }
                    }
                    return Ok(Flow::Normal);
                }
            }
            Value::Nil | Value::List(..) | Value::Bytes(_) => {}
            other => return Err(self.error(format!("range can't iterate over {other}"))),
        }
        // As in Go, a `break` ends the innermost range even from its `else` part, while a
        // `continue` there continues the enclosing range.
        match &b.else_list {
            Some(e) => match self.walk_list(dot, e)? {
                Flow::Break => Ok(Flow::Normal),
                flow => Ok(flow),
            },
            None => Ok(Flow::Normal),
        }
    }

    fn walk_template(
        &mut self,
        dot: &Val,
        node: &'a Node,
        name: &'a str,
        pipe: Option<&'a Pipe>,
    ) -> R<()> {
        self.at = At::Node(node);
        let Some(tmpl) = self.set.lookup(name) else {
            return Err(self.error(format!("template {} not defined", go_quote(name))));
        };
        if self.depth >= MAX_TEMPLATE_DEPTH {
            return Err(self.error(format!(
                "exceeded maximum template depth ({MAX_TEMPLATE_DEPTH})"
            )));
        }
        let new_dot = match pipe {
            Some(p) => self.eval_pipeline(dot, p)?,
            None => Value::Nil,
        };
        let new_dot = Val::plain(new_dot);
        let vars = std::mem::replace(
            &mut self.vars,
            vec![(self.set.dollar.clone(), new_dot.clone())],
        );
        let saved_tmpl = std::mem::replace(&mut self.tmpl, tmpl);
        let saved_at = self.at;
        self.depth += 1;
        let r = self.walk_list(&new_dot, &tmpl.root);
        self.depth -= 1;
        self.tmpl = saved_tmpl;
        self.vars = vars;
        self.at = saved_at;
        r.map(|_| ())
    }

    fn eval_pipeline(&mut self, dot: &Val, pipe: &'a Pipe) -> R<Value> {
        stacker::maybe_grow(RED_ZONE, STACK_CHUNK, || {
            self.at = At::Pipe(pipe);
            let mut value: Option<Value> = None;
            for cmd in &pipe.cmds {
                value = Some(self.eval_command(dot, cmd, value)?.v);
            }
            let value = value.unwrap_or_default();
            for (_, name) in &pipe.decl {
                if pipe.is_assign {
                    self.set_var(name, Val::plain(value.clone()))?;
                } else {
                    self.vars.push((name.clone(), Val::plain(value.clone())));
                }
            }
            Ok(value)
        })
    }

    fn set_var(&mut self, name: &str, v: Val) -> R<()> {
        for (n, slot) in self.vars.iter_mut().rev() {
            if **n == *name {
                *slot = v;
                return Ok(());
            }
        }
        Err(self.error(format!("undefined variable: {name}")))
    }

    fn var_value(&self, name: &str) -> R<Val> {
        for (n, v) in self.vars.iter().rev() {
            if **n == *name {
                return Ok(v.clone());
            }
        }
        Err(self.error(format!("undefined variable: {name}")))
    }

    fn not_a_function(&self, args: &'a [Arg], has_final: bool) -> R<()> {
        if args.len() > 1 || has_final {
            let first = args.first().map(Arg::to_go_string).unwrap_or_default();
            return Err(self.error(format!("can't give argument to non-function {first}")));
        }
        Ok(())
    }

    fn eval_command(&mut self, dot: &Val, cmd: &'a Command, fin: Option<Value>) -> R<Val> {
        let Some(first) = cmd.args.first() else {
            return Ok(Val::plain(Value::Nil));
        };
        match first {
            Arg::Field { idents, .. } => {
                self.at = At::Arg(first);
                return self.eval_field_chain(dot, dot.clone(), first, idents, &cmd.args, fin);
            }
            Arg::Chain { .. } => return self.eval_chain(dot, first, &cmd.args, fin),
            Arg::Ident { name, func, .. } => {
                return self.eval_function(dot, first, name, *func, At::Cmd(cmd), &cmd.args, fin);
            }
            Arg::Pipe(p) => {
                self.not_a_function(&cmd.args, fin.is_some())?;
                return self.eval_pipeline(dot, p).map(Val::plain);
            }
            Arg::Variable { .. } => return self.eval_variable(dot, first, &cmd.args, fin),
            _ => {}
        }
        self.at = At::Arg(first);
        self.not_a_function(&cmd.args, fin.is_some())?;
        match first {
            Arg::Bool(_, b) => Ok(Val::plain(Value::Bool(*b))),
            Arg::Dot(_) => Ok(dot.clone()),
            Arg::Nil(_) => Err(self.error("nil is not a command")),
            Arg::Number { .. } => self.ideal_constant(first).map(Val::plain),
            Arg::String { value, .. } => Ok(Val::plain(value.clone())),
            _ => Err(self.error(format!(
                "can't evaluate command {}",
                go_quote(&first.to_go_string())
            ))),
        }
    }

    fn ideal_constant(&mut self, n: &'a Arg) -> R<Value> {
        self.at = At::Arg(n);
        match n {
            Arg::Number { value, text, .. } => match value {
                Number::Int(i) => Ok(Value::Int(*i)),
                Number::Float(f) => Ok(Value::Float(*f)),
                Number::Overflow => Err(self.error(format!("{text} overflows int"))),
            },
            _ => Ok(Value::Nil),
        }
    }

    fn eval_chain(
        &mut self,
        dot: &Val,
        chain: &'a Arg,
        args: &'a [Arg],
        fin: Option<Value>,
    ) -> R<Val> {
        self.at = At::Arg(chain);
        let Arg::Chain { node, fields, .. } = chain else {
            return Ok(Val::plain(Value::Nil));
        };
        if fields.is_empty() {
            return Err(self.error("internal error: no fields in evalChainNode"));
        }
        if let Arg::Nil(_) = **node {
            return Err(self.error(format!(
                "indirection through explicit nil in {}",
                chain.to_go_string()
            )));
        }
        let receiver = self.eval_arg(dot, node)?;
        self.eval_field_chain(dot, receiver, chain, fields, args, fin)
    }

    fn eval_variable(
        &mut self,
        dot: &Val,
        var: &'a Arg,
        args: &'a [Arg],
        fin: Option<Value>,
    ) -> R<Val> {
        self.at = At::Arg(var);
        let Arg::Variable { name, fields, .. } = var else {
            return Ok(Val::plain(Value::Nil));
        };
        let value = self.var_value(name)?;
        if fields.is_empty() {
            self.not_a_function(args, fin.is_some())?;
            return Ok(value);
        }
        self.eval_field_chain(dot, value, var, fields, args, fin)
    }

    fn eval_field_chain(
        &mut self,
        dot: &Val,
        mut receiver: Val,
        node: &'a Arg,
        idents: &'a [Rc<str>],
        args: &'a [Arg],
        fin: Option<Value>,
    ) -> R<Val> {
        let Some((last, init)) = idents.split_last() else {
            return Ok(receiver);
        };
        for ident in init {
            receiver = self.eval_field(dot, ident, node, &[], None, receiver)?;
        }
        self.eval_field(dot, last, node, args, fin, receiver)
    }

    // `fin` and `receiver` are moved into results on most paths.
    #[allow(clippy::needless_pass_by_value)]
    fn eval_field(
        &mut self,
        dot: &Val,
        name: &str,
        node: &'a Arg,
        args: &'a [Arg],
        fin: Option<Value>,
        receiver: Val,
    ) -> R<Val> {
        let has_args = args.len() > 1 || fin.is_some();
        match &receiver.v {
            Value::Nil if !receiver.iface => Ok(Val::plain(Value::Nil)),
            Value::Nil => Err(self.error(format!("nil pointer evaluating interface {{}}.{name}"))),
            Value::Map(m) => {
                if has_args {
                    return Err(self.error(format!("{name} is not a method but has arguments")));
                }
                let v = m.borrow().get(name).cloned().unwrap_or_default();
                Ok(Val { v, iface: true })
            }
            Value::Object(o) => {
                let o = o.clone();
                let mut argv = Vec::with_capacity(args.len());
                for a in args.iter().skip(1) {
                    argv.push(self.eval_arg(dot, a)?.v);
                }
                if let Some(f) = fin.clone() {
                    argv.push(f);
                }
                self.at = At::Arg(node);
                if let Some(result) = o.method(name, &argv) {
                    return match result {
                        Ok(v) => Ok(Val::plain(v)),
                        Err(e) => {
                            self.at = At::Arg(node);
                            Err(self.error(format!("error calling {name}: {e}")))
                        }
                    };
                }
                if let Some(v) = o.field(name) {
                    if has_args {
                        return Err(self.error(format!(
                            "{name} has arguments but cannot be invoked as function"
                        )));
                    }
                    let iface = v.is_nil();
                    return Ok(Val { v, iface });
                }
                Err(self.error(format!(
                    "can't evaluate field {name} in type {}",
                    o.type_name()
                )))
            }
            other => {
                let typ = if receiver.iface {
                    "interface {}".to_string()
                } else {
                    other.type_name()
                };
                Err(self.error(format!("can't evaluate field {name} in type {typ}")))
            }
        }
    }

    /// Evaluates an argument for an `interface{}` parameter (Go's `evalArg`).
    fn eval_arg(&mut self, dot: &Val, n: &'a Arg) -> R<Val> {
        self.at = At::Arg(n);
        match n {
            Arg::Dot(_) => Ok(dot.clone()),
            Arg::Nil(_) => Ok(Val::plain(Value::Nil)),
            Arg::Field { idents, .. } => {
                self.eval_field_chain(dot, dot.clone(), n, idents, std::slice::from_ref(n), None)
            }
            Arg::Variable { .. } => self.eval_variable(dot, n, &[], None),
            Arg::Pipe(p) => self.eval_pipeline(dot, p).map(Val::plain),
            Arg::Ident { name, func, .. } => {
                self.eval_function(dot, n, name, *func, At::Arg(n), &[], None)
            }
            Arg::Chain { .. } => self.eval_chain(dot, n, &[], None),
            Arg::Bool(_, b) => Ok(Val::plain(Value::Bool(*b))),
            Arg::Number { .. } => self.ideal_constant(n).map(Val::plain),
            Arg::String { value, .. } => Ok(Val::plain(value.clone())),
        }
    }

    fn check_arity(&self, name: &str, sig: &Signature, args: usize, num_in: usize) -> R<()> {
        let fixed = sig.params.len();
        if sig.variadic.is_some() {
            if num_in < fixed {
                return Err(self.error(format!(
                    "wrong number of args for {name}: want at least {fixed} got {args}"
                )));
            }
        } else if num_in != fixed {
            return Err(self.error(format!(
                "wrong number of args for {name}: want {fixed} got {num_in}"
            )));
        }
        Ok(())
    }

    /// Evaluates an argument for a parameter of type `param` (Go's `evalArg`).
    fn eval_typed_arg(&mut self, dot: &Val, param: Param, n: &'a Arg) -> R<Value> {
        if param == Param::Any {
            return self.eval_arg(dot, n).map(|v| v.v);
        }
        self.at = At::Arg(n);
        let t = param.go_name();
        match n {
            Arg::Nil(_) => {
                if matches!(param, Param::List | Param::StringList | Param::Map) {
                    Ok(Value::Nil)
                } else {
                    Err(self.error(format!("cannot assign nil to {t}")))
                }
            }
            Arg::Bool(_, b) => match param {
                Param::Bool => Ok(Value::Bool(*b)),
                _ => Err(self.literal_mismatch(param, n)),
            },
            Arg::String { value, .. } => match param {
                Param::String => Ok(value.clone()),
                _ => Err(self.literal_mismatch(param, n)),
            },
            Arg::Number { value, .. } => match (param, value) {
                (Param::Int, Number::Int(i)) => Ok(Value::Int(*i)),
                (Param::Int64, Number::Int(i)) => Ok(Value::Int64(*i)),
                (Param::Int | Param::Int64, Number::Float(f))
                    if f.fract() == 0.0 && f.abs() < 9.2e18 =>
                {
                    let i = *f as i64;
                    Ok(if param == Param::Int {
                        Value::Int(i)
                    } else {
                        Value::Int64(i)
                    })
                }
                (Param::Float64, Number::Int(i)) => Ok(Value::Float(*i as f64)),
                (Param::Float64, Number::Float(f)) => Ok(Value::Float(*f)),
                _ => Err(self.literal_mismatch(param, n)),
            },
            _ => {
                let v = self.eval_arg(dot, n)?;
                self.validate_type(v, param)
            }
        }
    }

    fn literal_mismatch(&self, param: Param, n: &Arg) -> Error {
        let found = n.to_go_string();
        match param {
            Param::Bool => self.error(format!("expected bool; found {found}")),
            Param::String => self.error(format!("expected string; found {found}")),
            Param::Int | Param::Int64 => self.error(format!("expected integer; found {found}")),
            Param::Float64 => self.error(format!("expected float; found {found}")),
            _ => self.error(format!(
                "can't handle {found} for arg of type {}",
                param.go_name()
            )),
        }
    }

    /// Go's `validateType`: the value must have exactly the parameter's type.
    fn validate_type(&self, v: Val, param: Param) -> R<Value> {
        let t = param.go_name();
        let ok = match (&v.v, param) {
            (Value::Nil, _) if !v.iface && param != Param::Any => {
                if matches!(param, Param::List | Param::StringList | Param::Map) {
                    return Ok(Value::Nil);
                }
                return Err(self.error(format!("invalid value; expected {t}")));
            }
            (Value::String(_), Param::String)
            | (_, Param::Any)
            | (Value::Int(_), Param::Int)
            | (Value::Int64(_), Param::Int64)
            | (Value::Float(_), Param::Float64)
            | (Value::Bool(_), Param::Bool)
            | (Value::List(_, ListKind::Any), Param::List)
            | (Value::List(_, ListKind::String), Param::StringList)
            | (Value::Map(_), Param::Map) => true,
            _ => false,
        };
        if ok {
            return Ok(v.v);
        }
        let got = if v.v.is_nil() {
            "interface {}".to_string()
        } else {
            v.v.type_name()
        };
        Err(self.error(format!("wrong type for value; expected {t}; got {got}")))
    }

    /// Evaluates an argument for a `string` parameter (`printf`'s format).
    fn eval_string_arg(&mut self, dot: &Val, n: &'a Arg) -> R<Value> {
        self.at = At::Arg(n);
        match n {
            Arg::String { value, .. } => Ok(value.clone()),
            Arg::Nil(_) => Err(self.error("cannot assign nil to string")),
            Arg::Bool(..) | Arg::Number { .. } => {
                Err(self.error(format!("expected string; found {}", n.to_go_string())))
            }
            _ => {
                let v = self.eval_arg(dot, n)?;
                self.check_string(v)
            }
        }
    }

    fn check_string(&self, v: Val) -> R<Value> {
        match v.v {
            Value::String(_) => Ok(v.v),
            Value::Nil if !v.iface => Err(self.error("invalid value; expected string")),
            Value::Nil => {
                Err(self.error("wrong type for value; expected string; got interface {}"))
            }
            other => Err(self.error(format!(
                "wrong type for value; expected string; got {}",
                other.type_name()
            ))),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_function(
        &mut self,
        dot: &Val,
        ident: &'a Arg,
        name: &'a str,
        func: Func,
        call_node: At<'a>,
        args: &'a [Arg],
        fin: Option<Value>,
    ) -> R<Val> {
        self.at = At::Arg(ident);
        let args = args.get(1..).unwrap_or(&[]);
        let num_in = args.len() + usize::from(fin.is_some());
        match func {
            Func::User(f) => {
                let signature = self.set.signature(name);
                let mut argv = Vec::with_capacity(num_in);
                if let Some(sig) = signature {
                    self.check_arity(name, &sig, args.len(), num_in)?;
                    for (i, a) in args.iter().enumerate() {
                        let param = sig
                            .params
                            .get(i)
                            .copied()
                            .or(sig.variadic)
                            .unwrap_or(Param::Any);
                        argv.push(self.eval_typed_arg(dot, param, a)?);
                    }
                    if let Some(v) = fin {
                        let i = num_in - 1;
                        let param = sig
                            .params
                            .get(i)
                            .copied()
                            .or(sig.variadic)
                            .unwrap_or(Param::Any);
                        argv.push(self.validate_type(Val::plain(v), param)?);
                    }
                } else {
                    for a in args {
                        argv.push(self.eval_arg(dot, a)?.v);
                    }
                    if let Some(v) = fin {
                        argv.push(v);
                    }
                }
                let result = {
                    let mut rt = Rt {
                        set: self.set,
                        shared: &mut *self.shared,
                    };
                    let mut call = Call::new(name, &mut *self.env, &mut rt);
                    f(&mut call, &argv)
                };
                match result {
                    Ok(v) => Ok(Val::plain(v)),
                    Err(e) => {
                        self.at = call_node;
                        Err(self.error(format!("error calling {name}: {e}")))
                    }
                }
            }
            Func::Builtin(b) => {
                match b.arity() {
                    Arity::Exactly(n) if num_in != n => {
                        return Err(self.error(format!(
                            "wrong number of args for {name}: want {n} got {num_in}"
                        )));
                    }
                    Arity::AtLeast(n) if num_in < n => {
                        return Err(self.error(format!(
                            "wrong number of args for {name}: want at least {n} got {}",
                            args.len()
                        )));
                    }
                    _ => {}
                }
                self.eval_builtin(dot, b, name, call_node, args, fin)
            }
        }
    }

    fn eval_builtin(
        &mut self,
        dot: &Val,
        b: Builtin,
        name: &'a str,
        call_node: At<'a>,
        args: &'a [Arg],
        fin: Option<Value>,
    ) -> R<Val> {
        match b {
            Builtin::And | Builtin::Or => {
                let want = b == Builtin::Or;
                let mut v = Value::Nil;
                for a in args {
                    v = self.eval_arg(dot, a)?.v;
                    if v.truth() == want {
                        return Ok(Val::plain(v));
                    }
                }
                if let Some(f) = fin {
                    v = f;
                }
                return Ok(Val::plain(v));
            }
            Builtin::Call => {
                let callee = args.first().map(Arg::to_go_string).unwrap_or_default();
                let f = match args.first() {
                    Some(a) => self.eval_arg(dot, a)?.v,
                    None => fin.clone().unwrap_or_default(),
                };
                for a in args.iter().skip(1) {
                    self.eval_arg(dot, a)?;
                }
                self.at = call_node;
                let msg = if f.is_nil() {
                    "call of nil".to_string()
                } else {
                    format!("non-function {callee} of type {}", f.type_name())
                };
                return Err(self.error(format!("error calling call: {msg}")));
            }
            _ => {}
        }
        let mut argv = Vec::with_capacity(args.len() + 1);
        let mut first_iface = false;
        for (i, a) in args.iter().enumerate() {
            if i == 0 && b == Builtin::Printf {
                argv.push(self.eval_string_arg(dot, a)?);
                continue;
            }
            let v = self.eval_arg(dot, a)?;
            if i == 0 {
                first_iface = v.iface;
            }
            argv.push(v.v);
        }
        if let Some(f) = fin {
            if argv.is_empty() && b == Builtin::Printf {
                argv.push(self.check_string(Val::plain(f))?);
            } else {
                argv.push(f);
            }
        }
        match b.apply(&argv, first_iface) {
            Ok(v) => Ok(Val {
                iface: b == Builtin::Index && v.is_nil(),
                v,
            }),
            Err(e) => {
                self.at = call_node;
                Err(self.error(format!("error calling {name}: {e}")))
            }
        }
    }
}

/// The running set as functions see it (`include`, `tpl`).
struct Rt<'a, 's> {
    set: &'a Set,
    shared: &'s mut Shared,
}

impl Runtime for Rt<'_, '_> {
    fn include(&mut self, env: &mut Env, name: &str, data: Value) -> Result<String, String> {
        let limit = env.max_depth;
        match self.shared.includes.get_mut(name) {
            Some(n) if *n > limit => {
                return Err(format!(
                    "rendering template has a nested reference name: {name}: unable to execute template"
                ));
            }
            Some(n) => *n += 1,
            None => {
                self.shared.includes.insert(name.to_string(), 1);
            }
        }
        let r = self.set.execute_shared(name, data, env, self.shared);
        if let Some(n) = self.shared.includes.get_mut(name) {
            *n = n.saturating_sub(1);
        }
        r.map_err(|e| e.message)
    }

    fn tpl(&mut self, env: &mut Env, text: &str, data: Value) -> Result<String, String> {
        if self.shared.tpl_depth >= env.max_depth {
            return Err(format!(
                "error during tpl function execution for {}: exceeded maximum template depth ({})",
                go_quote(text),
                env.max_depth
            ));
        }
        let mut set = self.set.layered();
        if let Err(e) = set.parse(super::TPL_NAME, text) {
            return Err(format!(
                "cannot parse template {}: {}",
                go_quote(text),
                e.message
            ));
        }
        self.shared.tpl_depth += 1;
        let r = set.execute_shared(super::TPL_NAME, data, env, self.shared);
        self.shared.tpl_depth -= 1;
        match r {
            Ok(s) => Ok(if s.contains("<no value>") {
                s.replace("<no value>", "")
            } else {
                s
            }),
            Err(e) => Err(format!(
                "error during tpl function execution for {}: {}",
                go_quote(text),
                e.message
            )),
        }
    }
}
