//! Go's `text/template`: parsing, execution and the builtin functions, with Go's semantics and
//! error messages.
//!
//! A [`Set`] holds named templates (files and `define`s) parsed against a [`FuncMap`]; executing
//! one writes its text. Functions get a [`Call`]: the per-render [`Env`] (random source, clock,
//! cluster lookups) and, for Helm's `include` and `tpl`, the running set.
//!
//! What matches Go 1.24 (as Helm v4 uses it, `missingkey=zero`), checked against Helm's SDK:
//! the lexer and parser with their error texts (`template: NAME:LINE: …`), trim markers and
//! comments, all actions (`if`/`else if`, `with`/`else with`, `range` over lists, maps in key
//! order and integers with `break`/`continue`, `define`, `template`, `block`), variables and
//! assignment with Go's scoping, the builtins (`and`/`or` short-circuit, `eq` with several
//! operands, `lt`/`le`/`gt`/`ge`, `index`, `slice`, `len`, `not`, `print`/`printf`/`println`,
//! `html`, `js`, `urlquery`, `call`), Go's distinction between a missing value (prints
//! `<no value>`, field access yields nil) and a nil map element (field access fails with
//! `nil pointer evaluating interface {}.x`), and execution errors in Go's form
//! (`template: NAME:LINE:COL: executing "NAME" at <NODE>: MSG`). Functions declared with a
//! [`Signature`] get Go's argument checks (`wrong number of args for …`, `wrong type for
//! value; …`); `include` and `tpl` follow Helm (`include` fails past 1000 nested calls of one
//! name; `tpl` parses into a layer over the running set as the template `gotpl`).
//!
//! Deliberate limits, where Go would exhaust memory or crash: `{{template}}` calls nest at most
//! [`MAX_TEMPLATE_DEPTH`] deep (Go: 100000), with Go's message; `tpl` calls nest at most
//! [`Env::max_depth`] deep (Helm overflows its stack); control structures nest at most 10000
//! deep in one template; one execution writes at most [`MAX_OUTPUT`] bytes. Native stack grows
//! on the heap (`stacker`), so deep but legal input
//! never overflows the stack.

use std::collections::HashMap;
use std::rc::Rc;

use crate::value::Value;

mod builtins;
mod exec;
mod fasthash;
pub use exec::{MAX_OUTPUT, MAX_STEPS, MAX_TEMPLATE_DEPTH};
mod lex;
mod parse;
mod signatures;
pub use signatures::helm_signatures;
#[cfg(test)]
mod tests;

/// A template function: Sprig's, Helm's or a caller's. Returns the value, or the message Go
/// prints after `error calling NAME: `.
pub type Function = fn(&mut Call<'_>, &[Value]) -> Result<Value, String>;

/// Functions by name, as `template.FuncMap`. Parsing refuses names that are neither here nor
/// builtins (`function "x" not defined`).
pub type FuncMap = HashMap<&'static str, Function>;

/// A Go parameter type. Go's `text/template` checks and converts arguments against the called
/// function's parameter types before the call; a [`Signature`] lets a [`Function`] get the same
/// checks and error messages (`wrong number of args for NAME: want 2 got 1`, `wrong type for
/// value; expected string; got float64`, `expected integer; found 1.5`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// `interface{}`: anything, nil included.
    Any,
    /// `string`.
    String,
    /// `int`.
    Int,
    /// `int64`.
    Int64,
    /// `float64`.
    Float64,
    /// `bool`.
    Bool,
    /// `[]interface{}`.
    List,
    /// `[]string`.
    StringList,
    /// `map[string]interface{}`.
    Map,
}

impl Param {
    /// The Go type's name as Go's messages print it.
    pub fn go_name(self) -> &'static str {
        match self {
            Param::Any => "interface {}",
            Param::String => "string",
            Param::Int => "int",
            Param::Int64 => "int64",
            Param::Float64 => "float64",
            Param::Bool => "bool",
            Param::List => "[]interface {}",
            Param::StringList => "[]string",
            Param::Map => "map[string]interface {}",
        }
    }
}

/// A function's Go parameter list: the fixed parameters, then the element type of a final
/// variadic parameter (`...interface{}` is `Some(Param::Any)`).
#[derive(Debug, Clone, Copy)]
pub struct Signature {
    /// The fixed parameters.
    pub params: &'static [Param],
    /// The variadic parameter's element type, if the function is variadic.
    pub variadic: Option<Param>,
}

/// Signatures by function name. A function without one takes any number of arguments of any
/// type, unchecked.
pub type Signatures = HashMap<&'static str, Signature>;

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

/// How many parses a thread keeps (see [`parsed`]), and how much template text in all.
const PARSE_CACHE_ENTRIES: usize = 4096;
const PARSE_CACHE_TEXT: usize = 32 << 20;

/// A kept parse: the function map it was parsed against (held weakly, so its address cannot
/// be reused while the entry exists), and the trees.
struct Parsed {
    funcs: std::rc::Weak<FuncMap>,
    /// The text parsed (the trees' own copy): the key holds only its hash, a hit must also
    /// equal it.
    text: Rc<str>,
    trees: Rc<[Rc<parse::Tree>]>,
}

/// Parses by function map address, template name and hash of the text ([`quick_hash`]).
#[derive(Default)]
struct ParseCache {
    entries: HashMap<(usize, u64, Box<str>), Parsed>,
    text: usize,
}

/// A quick hash for cache keys over large texts (template text, values files, archives):
/// hashing megabytes with the default SipHash on every render costs more than it needs to.
/// Not collision-resistant: every cache using it keeps the bytes and compares them on a hit.
pub(crate) fn quick_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut hash = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        hash = (hash.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    for &byte in chunks.remainder() {
        hash = (hash.rotate_left(5) ^ u64::from(byte)).wrapping_mul(K);
    }
    hash
}

thread_local! {
    /// Parsed trees by function map, name and text. The same templates are parsed again and
    /// again (every render of a chart, every `tpl` call with the same text) and a parse costs
    /// far more than finding it here; trees are immutable once parsed, so sharing them is
    /// invisible. Failed parses are not kept.
    static PARSES: std::cell::RefCell<ParseCache> = std::cell::RefCell::default();
}

/// Leaks the thread's parse cache (see [`crate::leak_thread_caches`]).
pub(crate) fn leak_cache() {
    crate::leak(&PARSES);
}

/// The trees of `text` parsed as `name` against `funcs`, from the thread's cache when it was
/// parsed before against the same (live) function map.
fn parsed(funcs: &Rc<FuncMap>, name: &str, text: &str) -> Result<Rc<[Rc<parse::Tree>]>, String> {
    let key = (
        Rc::as_ptr(funcs) as usize,
        quick_hash(text.as_bytes()),
        Box::from(name),
    );
    let hit = PARSES.with(|cache| {
        let cache = cache.borrow();
        let entry = cache.entries.get(&key)?;
        let live = entry.funcs.upgrade().is_some_and(|f| Rc::ptr_eq(&f, funcs));
        (live && *entry.text == *text).then(|| entry.trees.clone())
    });
    if let Some(trees) = hit {
        return Ok(trees);
    }
    let trees: Rc<[Rc<parse::Tree>]> = stacker::maybe_grow(128 * 1024, 4 * 1024 * 1024, || {
        parse::parse(name, text, funcs)
    })?
    .into_iter()
    .map(Rc::new)
    .collect();
    PARSES.with(|cache| {
        let mut cache = cache.borrow_mut();
        let size = name.len() + text.len();
        if cache.entries.len() >= PARSE_CACHE_ENTRIES || cache.text + size > PARSE_CACHE_TEXT {
            // Entries whose function map is gone can never be hit again; if that frees
            // too little, start over.
            cache.entries.retain(|_, e| e.funcs.strong_count() > 0);
            cache.text = cache
                .entries
                .iter()
                .map(|(k, e)| k.2.len() + e.text.len())
                .sum();
            if cache.entries.len() >= PARSE_CACHE_ENTRIES || cache.text + size > PARSE_CACHE_TEXT {
                cache.entries.clear();
                cache.text = 0;
            }
        }
        if let Some(first) = trees.first()
            && size <= PARSE_CACHE_TEXT
        {
            cache.text += size;
            let entry = Parsed {
                funcs: Rc::downgrade(funcs),
                text: first.text.clone(),
                trees: trees.clone(),
            };
            if let Some(old) = cache.entries.insert(key, entry) {
                cache.text -= (name.len() + old.text.len()).min(cache.text);
            }
        }
    });
    Ok(trees)
}

/// The name Helm gives the template `tpl` parses, and the name of its root template.
pub(crate) const TPL_NAME: &str = "gotpl";

/// One layer of templates by name. `tpl` stacks a new layer over the running set instead of
/// copying it, so a `tpl` call costs one parse, not a copy of every template.
#[derive(Clone, Default)]
struct Layer {
    templates: fasthash::FastMap<Rc<str>, Rc<parse::Tree>>,
    parent: Option<Rc<Layer>>,
}

/// A set of named templates sharing one function map (Go's `*template.Template` tree).
///
/// Cloning is cheap: the parsed templates are shared.
#[derive(Clone)]
pub struct Set {
    funcs: Rc<FuncMap>,
    signatures: Rc<Signatures>,
    layer: Rc<Layer>,
    /// The name `$`, shared by every execution's variable stack.
    dollar: Rc<str>,
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
        Set::with_signatures(funcs, Rc::new(Signatures::new()))
    }

    /// An empty set using `funcs`, whose arguments are checked against `signatures` as Go
    /// checks them against the functions' parameter types.
    pub fn with_signatures(funcs: Rc<FuncMap>, signatures: Rc<Signatures>) -> Self {
        Set {
            funcs,
            signatures,
            layer: Rc::new(Layer::default()),
            dollar: Rc::from("$"),
        }
    }

    /// Parses `text` as the template `name`, adding it and every `define`/`block` in it to the
    /// set (a later definition of a name replaces the earlier one, as Go's `Parse` does, except
    /// that an empty definition never replaces a non-empty one).
    pub fn parse(&mut self, name: &str, text: &str) -> Result<(), Error> {
        let trees = parsed(&self.funcs, name, text).map_err(|message| Error { message })?;
        for tree in trees.iter() {
            if tree.is_empty() && self.lookup(&tree.name).is_some() {
                continue;
            }
            let layer = Rc::make_mut(&mut self.layer);
            layer.templates.insert(tree.name.clone(), tree.clone());
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
            includes: fasthash::FastMap::default(),
            tpl_depth: 0,
            steps: 0,
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

    fn signature(&self, name: &str) -> Option<Signature> {
        self.signatures.get(name).copied()
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
            signatures: self.signatures.clone(),
            layer: Rc::new(Layer {
                templates: fasthash::FastMap::default(),
                parent: Some(self.layer.clone()),
            }),
            dollar: self.dollar.clone(),
        }
    }
}
