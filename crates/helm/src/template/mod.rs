//! Go's `text/template`: parsing, execution and the builtin functions, with Go's semantics and
//! error messages.
//!
//! A [`Set`] holds named templates (files and `define`s) parsed against a [`FuncMap`]; executing
//! one writes its text. Functions get a [`Call`]: the per-render [`Env`] (random source, clock,
//! cluster lookups) and, for Helm's `include` and `tpl`, the running set.

use std::collections::HashMap;
use std::rc::Rc;

use crate::value::Value;

mod builtins;
mod exec;
mod lex;
mod parse;
#[cfg(test)]
mod tests;

/// A template function: Sprig's, Helm's or a caller's. Returns the value, or the message Go
/// prints after `error calling NAME: `.
pub type Function = fn(&mut Call<'_>, &[Value]) -> Result<Value, String>;

/// Functions by name, as `template.FuncMap`. Parsing refuses names that are neither here nor
/// builtins (`function "x" not defined`).
pub type FuncMap = HashMap<&'static str, Function>;

/// What a render provides to functions beyond their arguments.
pub struct Env {
    /// The random source of `randAlphaNum`, `uuidv4`, `genPrivateKey`, … (seed it for tests).
    pub rng: rand::rngs::StdRng,
    /// What `now` returns.
    pub now: jiff::Zoned,
    /// Answers Helm's `lookup`.
    pub lookup: Box<dyn crate::Lookup>,
    /// How deep `include`/`tpl`/`template` may nest before the render fails (Helm: 1000).
    pub max_depth: usize,
}

impl Env {
    /// An environment with an OS-seeded random source, the current time and empty lookups.
    pub fn new() -> Self {
        Env {
            rng: rand::make_rng(),
            now: jiff::Zoned::now(),
            lookup: Box::new(crate::NoLookup),
            max_depth: 1000,
        }
    }

    /// An environment whose random source and clock are fixed: identical renders every time.
    pub fn fixed(seed: u64, now: jiff::Zoned) -> Self {
        use rand::SeedableRng as _;
        Env {
            rng: rand::rngs::StdRng::seed_from_u64(seed),
            now,
            ..Env::new()
        }
    }
}

impl Default for Env {
    fn default() -> Self {
        Env::new()
    }
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// The running executor as functions see it (implemented by the executor).
pub trait Runtime {
    /// Executes the named template with `data` and returns its text (Helm's `include`).
    fn include(&mut self, env: &mut Env, name: &str, data: Value) -> Result<String, String>;
    /// Parses `text` into a copy of the running set and executes it with `data` (Helm's `tpl`).
    fn tpl(&mut self, env: &mut Env, text: &str, data: Value) -> Result<String, String>;
}

/// One function call: its name, the render's [`Env`] and the running executor.
pub struct Call<'a> {
    /// The function's name as written in the template.
    pub name: &'a str,
    /// The render's environment.
    pub env: &'a mut Env,
    runtime: &'a mut dyn Runtime,
}

impl<'a> Call<'a> {
    /// A call of `name` against `runtime` (used by the executor).
    pub fn new(name: &'a str, env: &'a mut Env, runtime: &'a mut dyn Runtime) -> Self {
        Call { name, env, runtime }
    }

    /// Helm's `include`: the named template's text.
    pub fn include(&mut self, name: &str, data: Value) -> Result<String, String> {
        self.runtime.include(self.env, name, data)
    }

    /// Helm's `tpl`: `text` rendered as a template with `data`.
    pub fn tpl(&mut self, text: &str, data: Value) -> Result<String, String> {
        self.runtime.tpl(self.env, text, data)
    }
}

/// A parse or execution error, displayed as Go prints it
/// (`template: NAME:LINE:COL: executing "NAME" at <.x>: …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// The whole message, Go's form.
    pub message: String,
}

/// The name Helm gives the template `tpl` parses, and the name of its root template.
pub(crate) const TPL_NAME: &str = "gotpl";

/// One layer of templates by name. `tpl` stacks a new layer over the running set instead of
/// copying it, so a `tpl` call costs one parse, not a copy of every template.
#[derive(Clone, Default)]
struct Layer {
    templates: HashMap<Rc<str>, Rc<parse::Tree>>,
    parent: Option<Rc<Layer>>,
}

/// A set of named templates sharing one function map (Go's `*template.Template` tree).
///
/// Cloning is cheap: the parsed templates are shared.
#[derive(Clone)]
pub struct Set {
    funcs: Rc<FuncMap>,
    layer: Rc<Layer>,
}

impl std::fmt::Debug for Set {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Set").finish_non_exhaustive()
    }
}

impl Set {
    /// An empty set using `funcs` (plus the builtins; a function in `funcs` replaces the
    /// builtin of the same name).
    pub fn new(funcs: Rc<FuncMap>) -> Self {
        Set {
            funcs,
            layer: Rc::new(Layer::default()),
        }
    }

    /// Parses `text` as the template `name`, adding it and every `define`/`block` in it to the
    /// set (a later definition of a name replaces the earlier one, as Go's `Parse` does, except
    /// that an empty definition never replaces a non-empty one).
    pub fn parse(&mut self, name: &str, text: &str) -> Result<(), Error> {
        let trees = stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || {
            parse::parse(name, text, &self.funcs)
        })
        .map_err(|message| Error { message })?;
        for tree in trees {
            if tree.is_empty() && self.lookup(&tree.name).is_some() {
                continue;
            }
            let layer = Rc::make_mut(&mut self.layer);
            layer.templates.insert(tree.name.clone(), Rc::new(tree));
        }
        Ok(())
    }

    /// Whether the set holds a template `name`.
    pub fn has(&self, name: &str) -> bool {
        self.lookup(name).is_some()
    }

    /// Executes the template `name` with `data` as dot and returns its text. `missingkey=zero`:
    /// a missing map key is nil and prints as `<no value>`, as in Helm.
    pub fn execute(&self, name: &str, data: Value, env: &mut Env) -> Result<String, Error> {
        let mut shared = exec::Shared {
            includes: HashMap::new(),
            tpl_depth: 0,
        };
        self.execute_shared(name, data, env, &mut shared)
    }

    fn execute_shared(
        &self,
        name: &str,
        data: Value,
        env: &mut Env,
        shared: &mut exec::Shared,
    ) -> Result<String, Error> {
        let Some(tree) = self.lookup(name) else {
            return Err(Error {
                message: format!(
                    "template: no template {} associated with template {}",
                    lex::go_quote(name),
                    lex::go_quote(TPL_NAME)
                ),
            });
        };
        let mut state = exec::Exec::new(self, tree, env, shared);
        state.run(data)?;
        Ok(state.out)
    }

    fn lookup(&self, name: &str) -> Option<&Rc<parse::Tree>> {
        let mut layer = &*self.layer;
        loop {
            if let Some(t) = layer.templates.get(name) {
                return Some(t);
            }
            layer = layer.parent.as_deref()?;
        }
    }

    /// A set over this one whose parses do not touch it (what `tpl` parses into).
    fn layered(&self) -> Set {
        Set {
            funcs: self.funcs.clone(),
            layer: Rc::new(Layer {
                templates: HashMap::new(),
                parent: Some(self.layer.clone()),
            }),
        }
    }
}
