//! The parser: tokens into trees (Go's `text/template/parse`), with Go's error messages and
//! node positions, and the nodes' `String()` forms that execution errors quote.

use std::fmt::Write as _;
use std::rc::Rc;

use super::builtins::Builtin;
use super::fasthash::FastMap;
use super::lex::{self, Kind, Token, go_quote};
use super::{FuncMap, Function};
use crate::value::Value;

/// How deep control structures (`if`, `range`, …) may nest in one template: a bound of ours
/// (Go has none) that keeps memory in check on hostile input.
const MAX_NESTING: usize = 10_000;

/// How deep parentheses may nest (Go's `maxStackDepth`).
const MAX_PAREN_DEPTH: usize = 10_000;

const RED_ZONE: usize = 128 * 1024;
const STACK_CHUNK: usize = 2 * 1024 * 1024;

/// A parsed template: a file's top level or a `define`/`block`.
#[derive(Debug)]
pub(crate) struct Tree {
    /// The template's name.
    pub name: Rc<str>,
    /// The name of the text it was parsed from (error locations use it).
    pub parse_name: Rc<str>,
    /// The whole text parsed (text nodes are ranges of it).
    pub text: Rc<str>,
    pub root: Vec<Node>,
}

impl Tree {
    /// Go's `parse.IsEmptyTree`: only blank text and comments.
    pub fn is_empty(&self) -> bool {
        self.root.iter().all(|n| match n {
            Node::Text(a, b) => self.text.get(*a..*b).is_none_or(|t| {
                t.trim_matches([' ', '\t', '\n', '\r', '\u{b}', '\u{c}'])
                    .is_empty()
            }),
            _ => false,
        })
    }
}

/// A node of a template body.
#[derive(Debug)]
pub(crate) enum Node {
    /// Literal text: a byte range of the tree's text.
    Text(usize, usize),
    Action(Pipe),
    // Boxed: a branch is twice an action's size, and every node of a list is as large as
    // the largest kind.
    If(Box<Branch>),
    With(Box<Branch>),
    Range(Box<Branch>),
    Template {
        pos: usize,
        name: Rc<str>,
        pipe: Option<Box<Pipe>>,
    },
    Break(usize),
    Continue(usize),
}

/// `if`, `with` and `range`: a pipeline, a body and an optional `else` body.
#[derive(Debug)]
pub(crate) struct Branch {
    pub pos: usize,
    pub pipe: Pipe,
    pub list: Vec<Node>,
    pub else_list: Option<Vec<Node>>,
}

/// A pipeline: optional variable declarations or assignment, then commands joined by `|`.
#[derive(Debug)]
pub(crate) struct Pipe {
    pub pos: usize,
    pub is_assign: bool,
    pub decl: Vec<(usize, Rc<str>)>,
    pub cmds: Vec<Command>,
}

/// One command: a function, method, field or value with its arguments.
#[derive(Debug)]
pub(crate) struct Command {
    pub pos: usize,
    pub args: Vec<Arg>,
}

/// A resolved function name.
#[derive(Clone, Copy)]
pub(crate) enum Func {
    Builtin(Builtin),
    User(Function),
}

impl std::fmt::Debug for Func {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Func::Builtin(b) => write!(f, "{b:?}"),
            Func::User(_) => f.write_str("User"),
        }
    }
}

/// A number literal's value as execution sees it without context (Go's `idealConstant`).
#[derive(Debug, Clone)]
pub(crate) enum Number {
    Int(i64),
    Float(f64),
    /// An unsigned literal beyond `int`: an error when used.
    Overflow,
}

/// An operand.
#[derive(Debug)]
pub(crate) enum Arg {
    /// `.a.b`.
    Field {
        pos: usize,
        idents: Box<[Rc<str>]>,
    },
    /// `$x.a.b`: the variable name, then the fields.
    Variable {
        pos: usize,
        name: Rc<str>,
        fields: Box<[Rc<str>]>,
    },
    /// `(pipe).a.b` and other terms followed by fields.
    Chain {
        pos: usize,
        node: Box<Arg>,
        fields: Box<[Rc<str>]>,
    },
    Ident {
        pos: usize,
        name: Rc<str>,
        func: Func,
    },
    Dot(usize),
    Nil(usize),
    Bool(usize, bool),
    Number {
        pos: usize,
        text: Rc<str>,
        value: Number,
    },
    String {
        pos: usize,
        quoted: Rc<str>,
        value: Value,
    },
    Pipe(Box<Pipe>),
}

impl Arg {
    pub fn pos(&self) -> usize {
        match self {
            Arg::Field { pos, .. }
            | Arg::Variable { pos, .. }
            | Arg::Chain { pos, .. }
            | Arg::Ident { pos, .. }
            | Arg::Dot(pos)
            | Arg::Nil(pos)
            | Arg::Bool(pos, _)
            | Arg::Number { pos, .. }
            | Arg::String { pos, .. } => *pos,
            Arg::Pipe(p) => p.pos,
        }
    }

    /// Go's `Node.String()`.
    pub fn write_to(&self, out: &mut String) {
        match self {
            Arg::Field { idents, .. } => {
                for i in idents {
                    out.push('.');
                    out.push_str(i);
                }
            }
            Arg::Variable { name, fields, .. } => {
                out.push_str(name);
                for f in fields {
                    out.push('.');
                    out.push_str(f);
                }
            }
            Arg::Chain { node, fields, .. } => {
                if let Arg::Pipe(p) = &**node {
                    out.push('(');
                    p.write_to(out);
                    out.push(')');
                } else {
                    node.write_to(out);
                }
                for f in fields {
                    out.push('.');
                    out.push_str(f);
                }
            }
            Arg::Ident { name, .. } => out.push_str(name),
            Arg::Dot(_) => out.push('.'),
            Arg::Nil(_) => out.push_str("nil"),
            Arg::Bool(_, b) => out.push_str(if *b { "true" } else { "false" }),
            Arg::Number { text, .. } => out.push_str(text),
            Arg::String { quoted, .. } => out.push_str(quoted),
            Arg::Pipe(p) => p.write_to(out),
        }
    }

    pub fn to_go_string(&self) -> String {
        let mut s = String::new();
        self.write_to(&mut s);
        s
    }
}

impl Pipe {
    pub fn write_to(&self, out: &mut String) {
        if !self.decl.is_empty() {
            for (i, (_, name)) in self.decl.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(name);
            }
            out.push_str(if self.is_assign { " = " } else { " := " });
        }
        for (i, c) in self.cmds.iter().enumerate() {
            if i > 0 {
                out.push_str(" | ");
            }
            c.write_to(out);
        }
    }
}

impl Command {
    pub fn write_to(&self, out: &mut String) {
        for (i, a) in self.args.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            if let Arg::Pipe(p) = a {
                out.push('(');
                p.write_to(out);
                out.push(')');
            } else {
                a.write_to(out);
            }
        }
    }
}

impl Node {
    pub fn pos(&self) -> usize {
        match self {
            Node::Text(a, _) => *a,
            Node::Action(p) => p.pos,
            Node::If(b) | Node::With(b) | Node::Range(b) => b.pos,
            Node::Template { pos, .. } | Node::Break(pos) | Node::Continue(pos) => *pos,
        }
    }

    pub fn write_to(&self, text: &str, out: &mut String) {
        match self {
            Node::Text(a, b) => out.push_str(text.get(*a..*b).unwrap_or("")),
            Node::Action(p) => {
                out.push_str("{{");
                p.write_to(out);
                out.push_str("}}");
            }
            Node::If(b) | Node::With(b) | Node::Range(b) => {
                let name = match self {
                    Node::If(_) => "if",
                    Node::With(_) => "with",
                    _ => "range",
                };
                let _ = write!(out, "{{{{{name} ");
                b.pipe.write_to(out);
                out.push_str("}}");
                for n in &b.list {
                    n.write_to(text, out);
                }
                if let Some(e) = &b.else_list {
                    out.push_str("{{else}}");
                    for n in e {
                        n.write_to(text, out);
                    }
                }
                out.push_str("{{end}}");
            }
            Node::Template { name, pipe, .. } => {
                let _ = write!(out, "{{{{template {}", go_quote(name));
                if let Some(p) = pipe {
                    out.push(' ');
                    p.write_to(out);
                }
                out.push_str("}}");
            }
            Node::Break(_) => out.push_str("{{break}}"),
            Node::Continue(_) => out.push_str("{{continue}}"),
        }
    }
}

// Deeply nested trees are taken apart iteratively: the derived recursive drop would need one
// native stack frame per nesting level.
impl Drop for Pipe {
    fn drop(&mut self) {
        let nested = self.cmds.iter().any(|c| {
            c.args
                .iter()
                .any(|a| matches!(a, Arg::Pipe(_) | Arg::Chain { .. }))
        });
        if !nested {
            return;
        }
        let mut cmds = std::mem::take(&mut self.cmds);
        let mut args: Vec<Arg> = Vec::new();
        loop {
            if let Some(cmd) = cmds.pop() {
                args.extend(cmd.args);
            } else if let Some(arg) = args.pop() {
                match arg {
                    Arg::Pipe(mut p) => cmds.append(&mut p.cmds),
                    Arg::Chain { node, .. } => args.push(*node),
                    _ => {}
                }
            } else {
                break;
            }
        }
    }
}

impl Drop for Branch {
    fn drop(&mut self) {
        let branchy = |list: &[Node]| {
            list.iter()
                .any(|n| matches!(n, Node::If(_) | Node::With(_) | Node::Range(_)))
        };
        if !branchy(&self.list) && !self.else_list.as_deref().is_some_and(branchy) {
            return;
        }
        let mut nodes = std::mem::take(&mut self.list);
        nodes.extend(self.else_list.take().unwrap_or_default());
        while let Some(node) = nodes.pop() {
            if let Node::If(mut b) | Node::With(mut b) | Node::Range(mut b) = node {
                nodes.append(&mut b.list);
                nodes.extend(b.else_list.take().unwrap_or_default());
            }
        }
    }
}

/// 1-based line of byte offset `pos` (only computed for error messages).
#[allow(clippy::naive_bytecount)]
pub(crate) fn line_at(text: &str, pos: usize) -> usize {
    let end = pos.min(text.len());
    1 + text.as_bytes()[..end]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
}

/// What ends a list of nodes.
enum End {
    End,
    Else,
}

/// Parses `text` named `name`: the top-level tree first, then every `define`/`block`, in the
/// order Go adds them to its tree set. Errors are Go's full message.
pub(crate) fn parse(name: &str, text: &str, funcs: &FuncMap) -> Result<Vec<Tree>, String> {
    let text: Rc<str> = Rc::from(text);
    let mut tokens = TOKENS.with(std::cell::Cell::take);
    lex::lex_into(
        &text,
        !funcs.contains_key("break"),
        !funcs.contains_key("continue"),
        &mut tokens,
    );
    let parsed = parse_tokens(name, &text, &tokens, funcs);
    // The buffer serves the next parse on this thread (unless it grew unusually large).
    if tokens.list.capacity() <= MAX_KEPT_TOKENS {
        TOKENS.with(|t| t.replace(tokens));
    }
    parsed
}

/// The most tokens whose buffer a thread keeps between parses (12 bytes each).
const MAX_KEPT_TOKENS: usize = 1 << 20;

thread_local! {
    /// The lexer's token buffer, kept between parses: a chart's templates are parsed one
    /// after another, and a fresh buffer for each would be allocated and faulted in anew.
    static TOKENS: std::cell::Cell<lex::Tokens> = std::cell::Cell::default();
}

fn parse_tokens(
    name: &str,
    text: &Rc<str>,
    tokens: &lex::Tokens,
    funcs: &FuncMap,
) -> Result<Vec<Tree>, String> {
    let parse_name: Rc<str> = Rc::from(name);
    let mut p = Parser {
        text,
        tokens: &tokens.list,
        error: &tokens.error,
        i: 0,
        seen: 0,
        funcs,
        parse_name: &parse_name,
        vars: vec![Rc::from("$")],
        range_depth: 0,
        paren_depth: 0,
        names: FastMap::default(),
        resolved: FastMap::default(),
        action_pos: None,
        defined: Vec::new(),
        depth: 0,
    };
    let root = p.parse_top()?;
    let mut trees = std::mem::take(&mut p.defined);
    let top = Tree {
        name: parse_name.clone(),
        parse_name: parse_name.clone(),
        text: text.clone(),
        root,
    };
    add_tree(&mut trees, top).map_err(|m| p.error_msg(&m))?;
    Ok(trees)
}

/// Go's `Tree.add`: a second non-empty definition of a name in one parse is an error; an empty
/// one never replaces a non-empty one.
fn add_tree(trees: &mut Vec<Tree>, tree: Tree) -> Result<(), String> {
    if let Some(i) = trees.iter().position(|t| t.name == tree.name) {
        if trees[i].is_empty() {
            trees[i] = tree;
        } else if !tree.is_empty() {
            return Err(format!(
                "template: multiple definition of template {}",
                go_quote(&tree.name)
            ));
        }
        return Ok(());
    }
    trees.push(tree);
    Ok(())
}

struct Parser<'t> {
    text: &'t Rc<str>,
    tokens: &'t [Token],
    /// The message of the stream's error token, if it ends in one.
    error: &'t str,
    i: usize,
    /// The furthest token looked at (Go's `token[0]`, whose line errors report).
    seen: usize,
    funcs: &'t FuncMap,
    parse_name: &'t Rc<str>,
    vars: Vec<Rc<str>>,
    range_depth: usize,
    paren_depth: usize,
    names: FastMap<&'t str, Rc<str>>,
    /// Functions already resolved in this parse.
    resolved: FastMap<&'t str, Func>,
    /// Where the action being parsed starts (for "unclosed action started at").
    action_pos: Option<usize>,
    defined: Vec<Tree>,
    depth: usize,
}

type PResult<T> = Result<T, String>;

impl<'t> Parser<'t> {
    fn tok(&self, i: usize) -> Token {
        // The stream always ends with EOF or an error token, which repeats.
        let last = self.tokens.len().saturating_sub(1);
        self.tokens[i.min(last)]
    }

    fn next(&mut self) -> Token {
        let t = self.tok(self.i);
        self.seen = self.seen.max(self.i);
        if self.i < self.tokens.len() {
            self.i += 1;
        }
        t
    }

    fn backup(&mut self) {
        self.i = self.i.saturating_sub(1);
    }

    fn peek(&mut self) -> Token {
        let t = self.tok(self.i);
        self.seen = self.seen.max(self.i);
        t
    }

    fn next_non_space(&mut self) -> Token {
        loop {
            let t = self.next();
            if t.kind != Kind::Space {
                return t;
            }
        }
    }

    fn peek_non_space(&mut self) -> Token {
        let t = self.next_non_space();
        self.backup();
        t
    }

    /// A token's text in the input ("" for an error token).
    fn val(&self, t: &Token) -> &'t str {
        let text: &'t str = self.text;
        t.text(text, "")
    }

    /// One shared `Rc<str>` per distinct name in a parse.
    fn intern(&mut self, name: &'t str) -> Rc<str> {
        if let Some(rc) = self.names.get(name) {
            return rc.clone();
        }
        let rc: Rc<str> = Rc::from(name);
        self.names.insert(name, rc.clone());
        rc
    }

    fn error_msg(&self, msg: &str) -> String {
        let t = self.tok(self.seen);
        let line = line_at(self.text, t.pos());
        format!("template: {}:{}: {}", self.parse_name, line, msg)
    }

    fn err<T>(&self, msg: impl AsRef<str>) -> PResult<T> {
        Err(self.error_msg(msg.as_ref()))
    }

    fn unexpected<T>(&self, t: &Token, context: &str) -> PResult<T> {
        if t.kind == Kind::Error {
            let mut extra = String::new();
            let line = line_at(self.text, t.pos());
            let action_line = self.action_pos.map(|p| line_at(self.text, p));
            if let Some(action_line) = action_line.filter(|l| *l != line) {
                extra = format!(" in action started at {}:{}", self.parse_name, action_line);
                if t.text(self.text, self.error).ends_with(" action") {
                    extra = extra[" in action".len()..].to_string();
                }
            }
            return self.err(format!("{}{extra}", t.text(self.text, self.error)));
        }
        self.err(format!(
            "unexpected {} in {context}",
            t.describe(self.text, self.error)
        ))
    }

    fn expect(&mut self, kind: Kind, context: &str) -> PResult<Token> {
        let t = self.next_non_space();
        if t.kind != kind {
            return self.unexpected(&t, context);
        }
        Ok(t)
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return self.err(format!("template nests deeper than {MAX_NESTING} levels"));
        }
        Ok(())
    }

    fn parse_top(&mut self) -> PResult<Vec<Node>> {
        let mut root = Vec::new();
        while self.peek().kind != Kind::Eof {
            if self.peek().kind == Kind::LeftDelim {
                let delim = self.i;
                self.next();
                if self.next_non_space().kind == Kind::Define {
                    self.parse_definition()?;
                    continue;
                }
                self.i = delim;
            }
            match self.text_or_action()? {
                Item::Node(n) => root.push(n),
                Item::End => return self.err("unexpected {{end}}"),
                Item::Else => return self.err("unexpected {{else}}"),
            }
        }
        root.shrink_to_fit();
        Ok(root)
    }

    /// Runs `f` as the parser of a new tree (`define`/`block`): fresh variables, no range.
    /// The body of a `define` or `block` up to its `{{end}}`, parsed as a tree of its own: its
    /// variables start afresh with `$`, and no `{{break}}`/`{{continue}}` reaches an outer range.
    fn template_body(&mut self, context: &str) -> PResult<Vec<Node>> {
        let vars = std::mem::replace(&mut self.vars, vec![Rc::from("$")]);
        let range_depth = std::mem::replace(&mut self.range_depth, 0);
        let r = self.item_list().and_then(|(list, end)| match end {
            End::Else => self.err(format!("unexpected {{{{else}}}} in {context}")),
            End::End => Ok(list),
        });
        self.vars = vars;
        self.range_depth = range_depth;
        r
    }

    fn parse_definition(&mut self) -> PResult<()> {
        const CONTEXT: &str = "define clause";
        let t = self.next_non_space();
        if !matches!(t.kind, Kind::String | Kind::RawString) {
            return self.unexpected(&t, CONTEXT);
        }
        let name = self.unquote(&t)?;
        self.expect(Kind::RightDelim, CONTEXT)?;
        let root = self.template_body(CONTEXT)?;
        self.add(name, root)
    }

    fn add(&mut self, name: String, root: Vec<Node>) -> PResult<()> {
        let tree = Tree {
            name: Rc::from(name),
            parse_name: self.parse_name.clone(),
            text: self.text.clone(),
            root,
        };
        let mut defined = std::mem::take(&mut self.defined);
        let r = add_tree(&mut defined, tree);
        self.defined = defined;
        r.map_err(|m| self.error_msg(&m))
    }

    fn item_list(&mut self) -> PResult<(Vec<Node>, End)> {
        self.enter()?;
        stacker::maybe_grow(RED_ZONE, STACK_CHUNK, || self.item_list_inner())
    }

    fn item_list_inner(&mut self) -> PResult<(Vec<Node>, End)> {
        let mut list = Vec::new();
        while self.peek_non_space().kind != Kind::Eof {
            match self.text_or_action()? {
                Item::Node(n) => list.push(n),
                Item::End => {
                    self.depth -= 1;
                    list.shrink_to_fit();
                    return Ok((list, End::End));
                }
                Item::Else => {
                    self.depth -= 1;
                    list.shrink_to_fit();
                    return Ok((list, End::Else));
                }
            }
        }
        self.err("unexpected EOF")
    }

    fn text_or_action(&mut self) -> PResult<Item> {
        let t = self.next_non_space();
        match t.kind {
            Kind::Text => {
                let start = t.pos();
                Ok(Item::Node(Node::Text(start, start + self.val(&t).len())))
            }
            Kind::LeftDelim => {
                let saved = self.action_pos;
                self.action_pos = Some(t.pos());
                let r = self.action();
                self.action_pos = saved;
                r
            }
            _ => self.unexpected(&t, "input"),
        }
    }

    fn action(&mut self) -> PResult<Item> {
        let t = self.next_non_space();
        match t.kind {
            Kind::Block => return self.block_control().map(Item::Node),
            Kind::Break => {
                return self
                    .break_control(t.pos(), "{{break}}")
                    .map(|()| Item::Node(Node::Break(t.pos())));
            }
            Kind::Continue => {
                return self
                    .break_control(t.pos(), "{{continue}}")
                    .map(|()| Item::Node(Node::Continue(t.pos())));
            }
            Kind::Else => return self.else_control(),
            Kind::End => {
                self.expect(Kind::RightDelim, "end")?;
                return Ok(Item::End);
            }
            Kind::If => return self.branch("if").map(|b| Item::Node(Node::If(Box::new(b)))),
            Kind::Range => {
                return self
                    .branch("range")
                    .map(|b| Item::Node(Node::Range(Box::new(b))));
            }
            Kind::Template => return self.template_control().map(Item::Node),
            Kind::With => {
                return self
                    .branch("with")
                    .map(|b| Item::Node(Node::With(Box::new(b))));
            }
            _ => {}
        }
        self.backup();
        let pipe = self.pipeline("command", Kind::RightDelim)?;
        Ok(Item::Node(Node::Action(pipe)))
    }

    fn break_control(&mut self, _pos: usize, context: &str) -> PResult<()> {
        let t = self.next_non_space();
        if t.kind != Kind::RightDelim {
            return self.unexpected(&t, context);
        }
        if self.range_depth == 0 {
            return self.err(format!("{context} outside {{{{range}}}}"));
        }
        Ok(())
    }

    fn else_control(&mut self) -> PResult<Item> {
        let peek = self.peek_non_space();
        if matches!(peek.kind, Kind::If | Kind::With) {
            return Ok(Item::Else);
        }
        self.expect(Kind::RightDelim, "else")?;
        Ok(Item::Else)
    }

    fn branch(&mut self, context: &str) -> PResult<Branch> {
        self.enter()?;
        let mark = self.vars.len();
        let r = self.branch_inner(context);
        self.vars.truncate(mark);
        self.depth -= 1;
        r
    }

    fn branch_inner(&mut self, context: &str) -> PResult<Branch> {
        let pipe = self.pipeline(context, Kind::RightDelim)?;
        if context == "range" {
            self.range_depth += 1;
        }
        let listed = self.item_list();
        if context == "range" {
            self.range_depth -= 1;
        }
        let (list, end) = listed?;
        let mut else_list = None;
        if let End::Else = end {
            let peek = self.peek().kind;
            if context == "if" && peek == Kind::If {
                self.next();
                else_list = Some(vec![Node::If(Box::new(self.branch("if")?))]);
            } else if context == "with" && peek == Kind::With {
                self.next();
                else_list = Some(vec![Node::With(Box::new(self.branch("with")?))]);
            } else {
                let (list, end) = self.item_list()?;
                if let End::Else = end {
                    return self.err("expected end; found {{else}}");
                }
                else_list = Some(list);
            }
        }
        Ok(Branch {
            pos: pipe.pos,
            pipe,
            list,
            else_list,
        })
    }

    fn template_name(&mut self, t: &Token, context: &str) -> PResult<String> {
        match t.kind {
            Kind::String | Kind::RawString => self.unquote(t),
            _ => self.unexpected(t, context),
        }
    }

    fn template_control(&mut self) -> PResult<Node> {
        const CONTEXT: &str = "template clause";
        let t = self.next_non_space();
        let name = self.template_name(&t, CONTEXT)?;
        let pipe = if self.next_non_space().kind == Kind::RightDelim {
            None
        } else {
            self.backup();
            Some(Box::new(self.pipeline(CONTEXT, Kind::RightDelim)?))
        };
        Ok(Node::Template {
            pos: t.pos(),
            name: Rc::from(name),
            pipe,
        })
    }

    fn block_control(&mut self) -> PResult<Node> {
        const CONTEXT: &str = "block clause";
        let t = self.next_non_space();
        let name = self.template_name(&t, CONTEXT)?;
        let pipe = self.pipeline(CONTEXT, Kind::RightDelim)?;
        let root = self.template_body(CONTEXT)?;
        self.add(name.clone(), root)?;
        Ok(Node::Template {
            pos: t.pos(),
            name: Rc::from(name),
            pipe: Some(Box::new(pipe)),
        })
    }

    fn pipeline(&mut self, context: &str, end: Kind) -> PResult<Pipe> {
        stacker::maybe_grow(RED_ZONE, STACK_CHUNK, || self.pipeline_inner(context, end))
    }

    fn pipeline_inner(&mut self, context: &str, end: Kind) -> PResult<Pipe> {
        let start = self.peek_non_space();
        let mut pipe = Pipe {
            pos: start.pos(),
            is_assign: false,
            decl: Vec::new(),
            cmds: Vec::new(),
        };
        loop {
            let v = self.peek_non_space();
            if v.kind != Kind::Variable {
                break;
            }
            let v_index = self.i;
            self.next_non_space();
            let next = self.peek_non_space();
            let name = self.intern(self.val(&v));
            match next.kind {
                Kind::Assign | Kind::Declare => {
                    pipe.is_assign = next.kind == Kind::Assign;
                    self.next_non_space();
                    pipe.decl.push((v.pos(), name.clone()));
                    self.vars.push(name);
                }
                Kind::Char if self.val(&next) == "," => {
                    self.next_non_space();
                    pipe.decl.push((v.pos(), name.clone()));
                    self.vars.push(name);
                    if context == "range" && pipe.decl.len() < 2 {
                        match self.peek_non_space().kind {
                            Kind::Variable | Kind::RightDelim | Kind::RightParen => continue,
                            _ => return self.err("range can only initialize variables"),
                        }
                    }
                    return self.err(format!("too many declarations in {context}"));
                }
                _ => self.i = v_index,
            }
            break;
        }
        loop {
            let t = self.next_non_space();
            match t.kind {
                k if k == end => {
                    if pipe.cmds.is_empty() {
                        return self.err(format!("missing value for {context}"));
                    }
                    for (i, c) in pipe.cmds.iter().enumerate().skip(1) {
                        if matches!(
                            c.args.first(),
                            Some(
                                Arg::Bool(..)
                                    | Arg::Dot(_)
                                    | Arg::Nil(_)
                                    | Arg::Number { .. }
                                    | Arg::String { .. }
                            )
                        ) {
                            return self.err(format!(
                                "non executable command in pipeline stage {}",
                                i + 1
                            ));
                        }
                    }
                    // Lists are trimmed as they are finished: a parse tree lives as long as
                    // its chart's render, and a large chart has tens of thousands of them.
                    pipe.cmds.shrink_to_fit();
                    return Ok(pipe);
                }
                Kind::Bool
                | Kind::CharConstant
                | Kind::Dot
                | Kind::Field
                | Kind::Identifier
                | Kind::Number
                | Kind::Nil
                | Kind::RawString
                | Kind::String
                | Kind::Variable
                | Kind::LeftParen => {
                    self.backup();
                    let cmd = self.command()?;
                    pipe.cmds.push(cmd);
                }
                _ => return self.unexpected(&t, context),
            }
        }
    }

    fn command(&mut self) -> PResult<Command> {
        let mut cmd = Command {
            pos: self.peek_non_space().pos(),
            args: Vec::new(),
        };
        loop {
            self.peek_non_space();
            if let Some(op) = self.operand()? {
                cmd.args.push(op);
            }
            let t = self.next();
            match t.kind {
                Kind::Space => continue,
                Kind::RightDelim | Kind::RightParen => self.backup(),
                Kind::Pipe => {}
                _ => return self.unexpected(&t, "operand"),
            }
            break;
        }
        if cmd.args.is_empty() {
            return self.err("empty command");
        }
        cmd.args.shrink_to_fit();
        Ok(cmd)
    }

    fn operand(&mut self) -> PResult<Option<Arg>> {
        let Some(node) = self.term()? else {
            return Ok(None);
        };
        if self.peek().kind != Kind::Field {
            return Ok(Some(node));
        }
        let chain_pos = self.peek().pos();
        let mut fields: Vec<Rc<str>> = Vec::new();
        while self.peek().kind == Kind::Field {
            let t = self.next();
            let v = self.val(&t);
            fields.push(self.intern(v.get(1..).unwrap_or("")));
        }
        Ok(Some(match node {
            Arg::Field { idents, .. } => {
                let mut all = idents.into_vec();
                all.extend(fields);
                Arg::Field {
                    pos: chain_pos,
                    idents: all.into_boxed_slice(),
                }
            }
            Arg::Variable {
                name, fields: f0, ..
            } => {
                let mut all = f0.into_vec();
                all.extend(fields);
                Arg::Variable {
                    pos: chain_pos,
                    name,
                    fields: all.into_boxed_slice(),
                }
            }
            Arg::Bool(..) | Arg::String { .. } | Arg::Number { .. } | Arg::Nil(_) | Arg::Dot(_) => {
                return self.err(format!(
                    "unexpected . after term {}",
                    go_quote(&node.to_go_string())
                ));
            }
            other => Arg::Chain {
                pos: chain_pos,
                node: Box::new(other),
                fields: fields.into_boxed_slice(),
            },
        }))
    }

    fn term(&mut self) -> PResult<Option<Arg>> {
        let t = self.next_non_space();
        let v = self.val(&t);
        Ok(Some(match t.kind {
            Kind::Identifier => {
                let func = if let Some(f) = self.resolved.get(v) {
                    *f
                } else {
                    let f = if let Some(f) = self.funcs.get(v) {
                        Func::User(*f)
                    } else if let Some(b) = Builtin::from_name(v) {
                        Func::Builtin(b)
                    } else {
                        return self.err(format!("function {} not defined", go_quote(v)));
                    };
                    self.resolved.insert(v, f);
                    f
                };
                Arg::Ident {
                    pos: t.pos(),
                    name: self.intern(v),
                    func,
                }
            }
            Kind::Dot => Arg::Dot(t.pos()),
            Kind::Nil => Arg::Nil(t.pos()),
            Kind::Variable => {
                if !self.vars.iter().any(|x| **x == *v) {
                    return self.err(format!("undefined variable {}", go_quote(v)));
                }
                Arg::Variable {
                    pos: t.pos(),
                    name: self.intern(v),
                    fields: Box::new([]),
                }
            }
            Kind::Field => Arg::Field {
                pos: t.pos(),
                idents: Box::new([self.intern(v.get(1..).unwrap_or(""))]),
            },
            Kind::Bool => Arg::Bool(t.pos(), v == "true"),
            Kind::CharConstant | Kind::Number => {
                let (value, _is_int) = match parse_number(v, t.kind == Kind::CharConstant) {
                    Ok(n) => n,
                    Err(e) => return self.err(e),
                };
                Arg::Number {
                    pos: t.pos(),
                    text: Rc::from(v),
                    value,
                }
            }
            Kind::LeftParen => {
                if self.paren_depth >= MAX_PAREN_DEPTH {
                    return self.err("max expression depth exceeded");
                }
                self.paren_depth += 1;
                let p = self.pipeline("parenthesized pipeline", Kind::RightParen);
                self.paren_depth -= 1;
                Arg::Pipe(Box::new(p?))
            }
            Kind::String | Kind::RawString => {
                let s = self.unquote(&t)?;
                Arg::String {
                    pos: t.pos(),
                    quoted: Rc::from(v),
                    value: Value::from(s),
                }
            }
            _ => {
                self.backup();
                return Ok(None);
            }
        }))
    }

    fn unquote(&self, t: &Token) -> PResult<String> {
        match go_unquote(t.text(self.text, self.error)) {
            Some(s) => Ok(s),
            None => self.err("invalid syntax"),
        }
    }
}

enum Item {
    Node(Node),
    End,
    Else,
}

/// Go's `strconv.Unquote` for `"…"` and `` `…` `` literals (invalid UTF-8 produced by `\x`
/// escapes is replaced, as Rust strings must be UTF-8).
pub(crate) fn go_unquote(s: &str) -> Option<String> {
    if let Some(raw) = s.strip_prefix('`').and_then(|r| r.strip_suffix('`')) {
        return Some(raw.replace('\r', ""));
    }
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let mut bytes: Vec<u8> = Vec::with_capacity(inner.len());
    let mut rest = inner;
    while !rest.is_empty() {
        let (piece, tail) = unquote_char(rest, b'"')?;
        match piece {
            Piece::Char(c) => {
                let mut buf = [0u8; 4];
                bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
            Piece::Byte(b) => bytes.push(b),
        }
        rest = tail;
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

enum Piece {
    Char(char),
    Byte(u8),
}

/// Go's `strconv.UnquoteChar`: one (possibly escaped) character of a quoted literal.
fn unquote_char(s: &str, quote: u8) -> Option<(Piece, &str)> {
    let mut chars = s.chars();
    let c = chars.next()?;
    if c as u32 == u32::from(quote) && (quote == b'\'' || quote == b'"') {
        return None;
    }
    if c != '\\' {
        if c == '\n' {
            return None;
        }
        return Some((Piece::Char(c), chars.as_str()));
    }
    let e = chars.next()?;
    let rest = chars.as_str();
    let simple = match e {
        'a' => Some('\u{7}'),
        'b' => Some('\u{8}'),
        'f' => Some('\u{c}'),
        'n' => Some('\n'),
        'r' => Some('\r'),
        't' => Some('\t'),
        'v' => Some('\u{b}'),
        '\\' => Some('\\'),
        '\'' | '"' => {
            if e as u32 != u32::from(quote) {
                return None;
            }
            Some(e)
        }
        _ => None,
    };
    if let Some(c) = simple {
        return Some((Piece::Char(c), rest));
    }
    let hex = |n: usize| -> Option<(u32, &str)> {
        let digits = rest.get(..n)?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some((u32::from_str_radix(digits, 16).ok()?, rest.get(n..)?))
    };
    match e {
        'x' => {
            let (v, tail) = hex(2)?;
            if quote == b'\'' {
                return Some((Piece::Char(char::from_u32(v)?), tail));
            }
            Some((Piece::Byte(v as u8), tail))
        }
        'u' => {
            let (v, tail) = hex(4)?;
            Some((Piece::Char(char::from_u32(v)?), tail))
        }
        'U' => {
            let (v, tail) = hex(8)?;
            Some((Piece::Char(char::from_u32(v)?), tail))
        }
        '0'..='7' => {
            let digits = s.get(1..4)?;
            if !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                return None;
            }
            let v = u32::from_str_radix(digits, 8).ok()?;
            if v > 255 {
                return None;
            }
            let tail = s.get(4..)?;
            if quote == b'\'' {
                return Some((Piece::Char(char::from_u32(v)?), tail));
            }
            Some((Piece::Byte(v as u8), tail))
        }
        _ => None,
    }
}

/// Go's `parse.newNumber` followed by `idealConstant`'s choice of type. Returns the value and
/// whether the literal is an integer.
fn parse_number(text: &str, is_char: bool) -> Result<(Number, bool), String> {
    if is_char {
        let inner = text.get(1..).unwrap_or("");
        let Some((piece, tail)) = unquote_char(inner, b'\'') else {
            return Err("invalid syntax".into());
        };
        if tail != "'" {
            return Err(format!("malformed character constant: {text}"));
        }
        let v = match piece {
            Piece::Char(c) => i64::from(u32::from(c)),
            Piece::Byte(b) => i64::from(b),
        };
        return Ok((Number::Int(v), true));
    }
    if text.len() < 19
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'))
        && let Ok(i) = text.parse::<i64>()
    {
        return Ok((Number::Int(i), true));
    }
    if text.ends_with('i') {
        return Err(format!("illegal number syntax: {}", go_quote(text)));
    }
    let int = go_parse_int(text);
    if let Some(IntParse::Int(i)) = int {
        let is_hex_int = text.len() > 2
            && text.starts_with('0')
            && matches!(text.as_bytes().get(1), Some(b'x' | b'X'))
            && !text.contains(['p', 'P']);
        if !is_hex_int && text.contains(['.', 'e', 'E', 'p', 'P']) {
            return Ok((Number::Float(i as f64), true));
        }
        return Ok((Number::Int(i), true));
    }
    if let Some(IntParse::Uint) = int {
        return Ok((Number::Overflow, false));
    }
    let Some(f) = go_parse_float(text) else {
        return Err(format!("illegal number syntax: {}", go_quote(text)));
    };
    if !text.contains(['.', 'e', 'E', 'p', 'P']) {
        return Err(format!("integer overflow: {}", go_quote(text)));
    }
    let is_int = f.fract() == 0.0 && f.abs() < 9.2e18;
    Ok((Number::Float(f), is_int))
}

enum IntParse {
    Int(i64),
    Uint,
}

/// `strconv.ParseInt`/`ParseUint` with base 0: sign, base prefixes, `_` between digits.
fn go_parse_int(text: &str) -> Option<IntParse> {
    let (neg, body) = match text.as_bytes().first()? {
        b'-' => (true, text.get(1..)?),
        b'+' => (false, text.get(1..)?),
        _ => (false, text),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits, prefixed) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d, true)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d, true)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d, true)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..], true)
    } else {
        (10, lower.as_str(), false)
    };
    if !underscores_ok(digits, prefixed) {
        return None;
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    if clean.is_empty() || !clean.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let mag = u128::from_str_radix(&clean, radix).ok()?;
    if neg {
        let v = -(i128::try_from(mag).ok()?);
        return i64::try_from(v).ok().map(IntParse::Int);
    }
    if let Ok(i) = i64::try_from(mag) {
        return Some(IntParse::Int(i));
    }
    u64::try_from(mag).ok().map(|_| IntParse::Uint)
}

/// Go's rule: `_` only between digits (or right after a base prefix).
fn underscores_ok(digits: &str, prefixed: bool) -> bool {
    if !digits.contains('_') {
        return true;
    }
    let b = digits.as_bytes();
    if b.last() == Some(&b'_') || b.windows(2).any(|w| w == b"__") {
        return false;
    }
    prefixed || b.first() != Some(&b'_')
}

/// `strconv.ParseFloat(s, 64)` for the literals the lexer produces: decimal and hexadecimal
/// (`0x1p-2`) forms with `_` separators.
fn go_parse_float(text: &str) -> Option<f64> {
    let (neg, body) = match text.as_bytes().first()? {
        b'-' => (true, text.get(1..)?),
        b'+' => (false, text.get(1..)?),
        _ => (false, text),
    };
    let lower = body.to_ascii_lowercase();
    let v = if let Some(hex) = lower.strip_prefix("0x") {
        let hex: String = hex.chars().filter(|c| *c != '_').collect();
        let (mant, exp) = hex.split_once('p')?;
        let exp: i32 = exp.parse().ok()?;
        let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let mut v = 0f64;
        for c in int.chars() {
            v = v * 16.0 + f64::from(c.to_digit(16)?);
        }
        let mut scale = 1.0 / 16.0;
        for c in frac.chars() {
            v += f64::from(c.to_digit(16)?) * scale;
            scale /= 16.0;
        }
        v * 2f64.powi(exp)
    } else {
        if lower.contains('_') && !underscores_ok(&lower, false) {
            return None;
        }
        let clean: String = lower.chars().filter(|c| *c != '_').collect();
        if !clean
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'+' | b'-'))
        {
            return None;
        }
        clean.parse::<f64>().ok().filter(|f| f.is_finite())?
    };
    Some(if neg { -v } else { v })
}

#[cfg(test)]
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert!(matches!(parse_number("1e3", false), Ok((Number::Float(f), true)) if f == 1000.0));
        assert!(matches!(
            parse_number("0x10", false),
            Ok((Number::Int(16), true))
        ));
        assert!(matches!(
            parse_number("'a'", true),
            Ok((Number::Int(97), true))
        ));
        assert!(matches!(
            parse_number("1_000", false),
            Ok((Number::Int(1000), true))
        ));
        assert!(matches!(
            parse_number("017", false),
            Ok((Number::Int(15), true))
        ));
        assert!(
            matches!(parse_number("0x1p-2", false), Ok((Number::Float(f), false)) if f == 0.25)
        );
        assert!(matches!(
            parse_number("18446744073709551615", false),
            Ok((Number::Overflow, false))
        ));
    }

    #[test]
    fn unquote() {
        assert_eq!(go_unquote(r#""a\tb\x41\u00e9""#).unwrap(), "a\tbAé");
        assert_eq!(go_unquote("`a\\n`").unwrap(), "a\\n");
        assert!(go_unquote(r#""\q""#).is_none());
    }
}
