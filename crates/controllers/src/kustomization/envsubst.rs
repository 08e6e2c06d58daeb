//! The post-build substitution engine shared by Kustomizations (`spec.postBuild`) and
//! `capstan envsubst`: Flux's `fluxcd/pkg/envsubst` syntax and behaviour, bash string functions
//! included.
//!
//! * `${var}`; `${var:=default}`, `${var=default}`, `${var:-default}` (and `${var:?…}`,
//!   `${var:+…}`, which Flux parses as the same "default when empty"): the default is used when
//!   the value is empty or unset, and may mix text and nested `${…}`.
//! * `${#var}` (length in bytes), `${var^}`, `${var^^}`, `${var,}`, `${var,,}`,
//!   `${var:pos}`, `${var:pos:len}` (byte offsets; a negative `pos` counts from the end),
//!   `${var#glob}`, `${var##glob}`, `${var%glob}`, `${var%%glob}` (globs: `*`, `?`, `[a-z]`,
//!   `[^…]`, `\x`; `*` also matches `/`), `${var/old/new}`, `${var//old/new}`,
//!   `${var/#old/new}`, `${var/%old/new}` (literal text, not globs; `\/` is a slash).
//! * `$$` is a literal `$` (so `$${var}` yields `${var}`); `$var` without braces is text.
//! * A variable name is letters, digits and `_` (any order). Anything Flux refuses to parse is
//!   an error, reported before any variable is looked up; nothing is ever half substituted.
//! * Strict mode: a variable that is not set fails every expression except the default ones,
//!   also where it is nested in a default that is not used (Flux evaluates arguments first).
//!
//! Flux's quirks are kept where a fleet could depend on them: `${var-default}` is not
//! supported (Flux reports a missing closing brace), `${var/#old/}` and `${var/%old/}` leave
//! the value unchanged, the pattern of `%`/`%%` is matched reversed (so bracket classes only
//! work in `#`/`##`), and a replacement or pattern is either text or one nested `${…}`.
//! Where Flux's Go code would panic (a negative `${var:pos:len}` length) this is an error.

use std::collections::BTreeMap;
use std::ops::Range;

/// A malformed variable expression, or (strict mode) a variable that is not set. Messages show
/// the expression's text from the template, never a variable's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubstituteError {
    /// `${` whose expression runs to the end of the text; the text after it (20 characters at
    /// most).
    #[error("unterminated variable expression '${{{0}' (missing closing brace or delimiter)")]
    Unterminated(String),
    /// A name that is not a variable name (letters, digits, `_`).
    #[error("invalid variable name '{name}' in '${{{body}}}'")]
    InvalidName {
        /// The name.
        name: String,
        /// The expression between the braces (60 characters at most).
        body: String,
    },
    /// An expression Flux does not parse (`bad substitution`, as Flux says).
    #[error("bad substitution '${{{body}': {reason}")]
    Malformed {
        /// The expression after `${` up to its `}` (60 characters at most).
        body: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A variable without a default that is not set ([`substitute_strict`]).
    #[error("variable not set (strict mode): \"{0}\"")]
    Unset(String),
}

/// Replaces variable expressions (see the module documentation) with values from `variables`;
/// undefined variables become empty, as Flux's non-strict substitution does.
pub fn substitute(
    text: &str,
    variables: &BTreeMap<String, String>,
) -> Result<String, SubstituteError> {
    substitute_tracked(text, variables, false).map(|(out, _)| out)
}

/// [`substitute`], failing on a variable that is not set where no default applies (Flux's
/// strict mode, as `flux envsubst --strict`).
pub fn substitute_strict(
    text: &str,
    variables: &BTreeMap<String, String>,
) -> Result<String, SubstituteError> {
    substitute_tracked(text, variables, true).map(|(out, _)| out)
}

/// A variable's value placed in the output of [`substitute_tracked`]: the byte range of the
/// expression that read it (its result may be the value transformed) and the variable's name.
pub(crate) type Placed = (Range<usize>, String);

/// [`substitute`], also returning where each set variable's value went.
pub(crate) fn substitute_tracked(
    text: &str,
    variables: &BTreeMap<String, String>,
    strict: bool,
) -> Result<(String, Vec<Placed>), SubstituteError> {
    if !text.contains('$') {
        return Ok((text.to_owned(), Vec::new()));
    }
    let nodes = Parser::new(text).parse_all()?;
    let mut out = String::with_capacity(text.len());
    let mut placed = Vec::new();
    let mut eval = Eval {
        variables,
        strict,
        read: Vec::new(),
    };
    for node in &nodes {
        match node {
            Node::Text(text) => out.push_str(text),
            Node::Func(func) => {
                eval.read.clear();
                let value = eval.func(func)?;
                let start = out.len();
                out.push_str(&value);
                for name in eval.read.drain(..) {
                    placed.push((start..out.len(), name));
                }
            }
        }
    }
    Ok((out, placed))
}

/// A parsed template: text, or an expression.
#[derive(Debug)]
enum Node {
    Text(String),
    Func(Func),
}

/// `${param<op><args>}`: `op` as Flux names it (`""` for `${var}`, `":="`, `"//"`, …); each
/// argument is a list of nodes (only a default's holds more than one).
#[derive(Debug)]
struct Func {
    param: String,
    op: String,
    args: Vec<Vec<Node>>,
    /// The expression's text in the template, for errors.
    source: String,
}

/// Why parsing failed and where (a char index).
struct Fail {
    at: usize,
    kind: FailKind,
}

enum FailKind {
    /// No name, or a name followed by something that is no operator (Flux: "unable to parse
    /// variable name", "missing closing brace").
    Name,
    Bad(&'static str),
}

/// Which escapes a run of text honours: `$$` (always outside expressions, and in the
/// arguments of `/`), `\/` and `\\` (arguments of `/`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Escapes {
    None,
    Dollar,
    All,
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

impl Parser {
    fn new(text: &str) -> Self {
        Self {
            chars: text.chars().collect(),
            pos: 0,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn at_open(&self) -> bool {
        self.peek() == Some('$') && self.peek_at(1) == Some('{')
    }

    fn fail<T>(&self, kind: FailKind) -> Result<T, Fail> {
        Err(Fail { at: self.pos, kind })
    }

    /// The whole template, the error naming the top-level expression it is in.
    fn parse_all(&mut self) -> Result<Vec<Node>, SubstituteError> {
        let mut nodes = Vec::new();
        while self.pos < self.chars.len() {
            if self.at_open() {
                let start = self.pos;
                self.pos += 2;
                match self.func(start) {
                    Ok(func) => nodes.push(Node::Func(func)),
                    Err(fail) => return Err(self.error(start + 2, &fail)),
                }
            } else {
                let text = self.text(|_| true, Escapes::Dollar);
                nodes.push(Node::Text(text));
            }
        }
        Ok(nodes)
    }

    fn error(&self, body_start: usize, fail: &Fail) -> SubstituteError {
        let text = |range: Range<usize>| -> String { self.chars[range].iter().collect() };
        if fail.at >= self.chars.len() {
            let end = self.chars.len().min(body_start + 20);
            return SubstituteError::Unterminated(text(body_start..end));
        }
        // The expression up to its closing brace after the failure (60 characters at most).
        let close = self.chars[fail.at..]
            .iter()
            .position(|&c| c == '}')
            .map_or(self.chars.len(), |i| fail.at + i);
        let end = close.min(body_start + 60);
        match fail.kind {
            FailKind::Name => {
                let body = text(body_start..end);
                let name_end = self.chars[body_start..end]
                    .iter()
                    .position(|&c| c.is_whitespace())
                    .map_or(end, |i| body_start + i);
                SubstituteError::InvalidName {
                    name: text(body_start..name_end),
                    body,
                }
            }
            FailKind::Bad(reason) => SubstituteError::Malformed {
                body: text(body_start..(close + 1).min(self.chars.len()).min(body_start + 60)),
                reason,
            },
        }
    }

    /// A run of text of characters `accept` takes, stopping before `${`; escapes as told.
    fn text(&mut self, accept: impl Fn(char) -> bool, escapes: Escapes) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek() {
            if self.at_open() {
                break;
            }
            let next = self.peek_at(1);
            if escapes != Escapes::None && c == '$' && next == Some('$') {
                out.push('$');
                self.pos += 2;
                continue;
            }
            if escapes == Escapes::All && c == '\\' && matches!(next, Some('/' | '\\')) {
                out.extend(next);
                self.pos += 2;
                continue;
            }
            if !accept(c) {
                break;
            }
            out.push(c);
            self.pos += 1;
        }
        out
    }

    /// Up to `max` characters of `set` (an operator).
    fn operator(&mut self, max: usize, allowed: impl Fn(usize, char) -> bool) -> String {
        let mut op = String::new();
        while op.chars().count() < max {
            match self.peek() {
                Some(c) if allowed(op.chars().count(), c) => {
                    op.push(c);
                    self.pos += 1;
                }
                _ => break,
            }
        }
        op
    }

    fn close(&mut self) -> Result<(), Fail> {
        if self.peek() == Some('}') {
            self.pos += 1;
            Ok(())
        } else {
            self.fail(FailKind::Bad("expected '}'"))
        }
    }

    /// One argument: a nested expression, or text (never empty).
    fn param(&mut self, accept: impl Fn(char) -> bool, escapes: Escapes) -> Result<Node, Fail> {
        if self.at_open() {
            let start = self.pos;
            self.pos += 2;
            return self.func(start).map(Node::Func);
        }
        let text = self.text(accept, escapes);
        if text.is_empty() {
            return self.fail(FailKind::Bad(
                "unable to parse substitution within function",
            ));
        }
        Ok(Node::Text(text))
    }

    /// An expression after its `${` (at `start`).
    fn func(&mut self, start: usize) -> Result<Func, Fail> {
        let mut func = if self.peek() == Some('#') {
            self.pos += 1;
            let param = self.text(is_name_char, Escapes::None);
            if param.is_empty() {
                return self.fail(FailKind::Bad("a variable name must follow '#'"));
            }
            self.close()?;
            Func {
                param,
                op: "#".to_owned(),
                args: Vec::new(),
                source: String::new(),
            }
        } else {
            self.operation()?
        };
        func.source = self.chars[start..self.pos].iter().collect();
        Ok(func)
    }

    fn operation(&mut self) -> Result<Func, Fail> {
        let param = self.text(is_name_char, Escapes::None);
        if param.is_empty() {
            return self.fail(FailKind::Name);
        }
        let mut func = Func {
            param,
            op: String::new(),
            args: Vec::new(),
            source: String::new(),
        };
        match self.peek() {
            Some('}') => self.pos += 1,
            Some(':') if matches!(self.peek_at(1), Some('=' | '-' | '?' | '+')) => {
                func.op = self.chars[self.pos..self.pos + 2].iter().collect();
                self.pos += 2;
                func.args.push(self.default_args()?);
            }
            Some('=') => {
                self.pos += 1;
                func.op.push('=');
                func.args.push(self.default_args()?);
            }
            Some(':') => {
                self.pos += 1;
                func.op.push(':');
                func.args
                    .push(vec![self.param(|c| c != ':' && c != '}', Escapes::None)?]);
                // The delimiter: one or more ':' (as Flux scans it), or the end.
                if self.peek() == Some('}') {
                    self.pos += 1;
                    return Ok(func);
                }
                if self.operator(usize::MAX, |_, c| c == ':').is_empty() {
                    return self.fail(FailKind::Bad("expected ':' or '}'"));
                }
                func.args
                    .push(vec![self.param(|c| c != '}', Escapes::None)?]);
                self.close()?;
            }
            Some(',' | '^') => {
                func.op = self.operator(2, |_, c| c == ',' || c == '^');
                self.close()?;
            }
            Some('/') => {
                func.op = self.operator(2, |i, c| c == '/' || (i == 1 && (c == '#' || c == '%')));
                func.args
                    .push(vec![self.param(|c| c != '/', Escapes::All)?]);
                if self.operator(usize::MAX, |_, c| c == '/').is_empty() {
                    return self.fail(FailKind::Bad("expected '/' after the pattern"));
                }
                if self.peek() == Some('}') {
                    self.pos += 1;
                    return Ok(func);
                }
                func.args
                    .push(vec![self.param(|c| c != '}', Escapes::All)?]);
                self.close()?;
            }
            Some(c @ ('#' | '%')) => {
                func.op = self.operator(2, |_, d| d == c);
                func.args
                    .push(vec![self.param(|c| c != '}', Escapes::None)?]);
                self.close()?;
            }
            _ => return self.fail(FailKind::Name),
        }
        Ok(func)
    }

    /// A default's text and nested expressions, up to its `}`.
    fn default_args(&mut self) -> Result<Vec<Node>, Fail> {
        let mut nodes = Vec::new();
        loop {
            if self.peek() == Some('}') {
                self.pos += 1;
                return Ok(nodes);
            }
            nodes.push(self.param(|c| c != '}', Escapes::None)?);
        }
    }
}

struct Eval<'a> {
    variables: &'a BTreeMap<String, String>,
    strict: bool,
    /// Set variables read by the current top-level expression.
    read: Vec<String>,
}

impl Eval<'_> {
    fn func(&mut self, func: &Func) -> Result<String, SubstituteError> {
        // Arguments first, as Flux evaluates them (their strict errors too).
        let mut args = Vec::with_capacity(func.args.len());
        for arg in &func.args {
            let mut value = String::new();
            for node in arg {
                match node {
                    Node::Text(text) => value.push_str(text),
                    Node::Func(nested) => value.push_str(&self.func(nested)?),
                }
            }
            args.push(value);
        }
        let value = match self.variables.get(&func.param) {
            Some(value) => {
                if !self.read.contains(&func.param) {
                    self.read.push(func.param.clone());
                }
                value.as_str()
            }
            None if self.strict && !matches!(func.op.as_str(), ":=" | "=" | ":-" | ":?" | ":+") => {
                return Err(SubstituteError::Unset(func.param.clone()));
            }
            None => "",
        };
        apply(&func.op, value, &args).ok_or_else(|| SubstituteError::Malformed {
            body: func.source.get(2..).unwrap_or_default().to_owned(),
            reason: "a negative substring length",
        })
    }
}

/// The function `op` on `value`; `None` where Flux's code would panic.
fn apply(op: &str, value: &str, args: &[String]) -> Option<String> {
    let first = |f: fn(char) -> String| {
        let mut chars = value.chars();
        chars
            .next()
            .map_or_else(String::new, |c| f(c) + chars.as_str())
    };
    Some(match (op, args) {
        (",", _) => first(|c| c.to_lowercase().collect()),
        (",,", _) => value.to_lowercase(),
        ("^", _) => first(|c| c.to_uppercase().collect()),
        ("^^", _) => value.to_uppercase(),
        ("#", []) => value.len().to_string(),
        ("#", [pattern, ..]) => trim_prefix(value, pattern, false),
        ("##", [pattern, ..]) => trim_prefix(value, pattern, true),
        ("%", [pattern, ..]) => trim_suffix(value, pattern, false),
        ("%%", [pattern, ..]) => trim_suffix(value, pattern, true),
        (":", [pos, rest @ ..]) => return substring(value, pos, rest.first()),
        ("/", [old]) => value.replacen(old.as_str(), "", 1),
        ("/", [old, new, ..]) => value.replacen(old.as_str(), new, 1),
        ("//", [old]) => value.replace(old.as_str(), ""),
        ("//", [old, new, ..]) => value.replace(old.as_str(), new),
        ("/#", [old, new]) if value.starts_with(old.as_str()) => {
            format!("{new}{}", &value[old.len()..])
        }
        ("/%", [old, new]) if value.ends_with(old.as_str()) => {
            format!("{}{new}", &value[..value.len() - old.len()])
        }
        ("/#" | "/%", _) => value.to_owned(),
        // Defaults, plain `${var}`, and what Flux does nothing with (`${var,^}`, `${var/#a/}`).
        _ if value.is_empty() && !args.is_empty() => args.concat(),
        _ => value.to_owned(),
    })
}

/// `${var:pos}` / `${var:pos:len}` in bytes (as Flux): an unparsable number leaves the value.
fn substring(value: &str, pos: &str, length: Option<&String>) -> Option<String> {
    let bytes = value.as_bytes();
    let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
    let Ok(mut pos) = pos.parse::<i64>() else {
        return Some(value.to_owned());
    };
    if pos < 0 {
        pos = (size + pos).max(0);
    }
    let slice = |from: i64, to: i64| {
        let at = |i: i64| usize::try_from(i).unwrap_or(0);
        String::from_utf8_lossy(&bytes[at(from)..at(to)]).into_owned()
    };
    let rest = || {
        if pos < size {
            slice(pos, size)
        } else {
            String::new()
        }
    };
    let Some(length) = length else {
        return Some(rest());
    };
    let Ok(length) = length.parse::<i64>() else {
        return Some(value.to_owned());
    };
    let end = pos.saturating_add(length);
    if end >= size {
        Some(rest())
    } else if length < 0 {
        None
    } else {
        Some(slice(pos, end))
    }
}

/// `${var#p}` (`longest`: `##`): the shortest (longest) non-empty prefix matching the glob
/// removed; a malformed glob leaves the value.
fn trim_prefix(value: &str, pattern: &str, longest: bool) -> String {
    let chars: Vec<char> = value.chars().collect();
    let pattern: Vec<char> = pattern.chars().collect();
    trim_chars(&chars, &pattern, longest).iter().collect()
}

/// `${var%p}` (`%%`): as Flux, the prefix trim of the reversed value with the reversed pattern.
fn trim_suffix(value: &str, pattern: &str, longest: bool) -> String {
    let chars: Vec<char> = value.chars().rev().collect();
    let pattern: Vec<char> = pattern.chars().rev().collect();
    trim_chars(&chars, &pattern, longest).iter().rev().collect()
}

fn trim_chars<'a>(value: &'a [char], pattern: &[char], longest: bool) -> &'a [char] {
    let mut found = None;
    for len in (1..=value.len()).rev() {
        match glob_match(pattern, &value[..len]) {
            Err(BadPattern) => return value,
            Ok(true) => {
                found = Some(len);
                if longest {
                    break;
                }
            }
            Ok(false) => {}
        }
    }
    found.map_or(value, |len| &value[len..])
}

/// A malformed glob (an unclosed `[`, a trailing `\`).
#[derive(Debug)]
struct BadPattern;

/// Whether `name` matches the glob `pattern` as Flux's `envsubst/path.Match` does: `*` any
/// run of characters (`/` included), `?` one character, `[…]` a class (`^` negates, `a-z`
/// ranges), `\` escapes.
fn glob_match(mut pattern: &[char], mut name: &[char]) -> Result<bool, BadPattern> {
    'chunks: while !pattern.is_empty() {
        let (star, chunk, rest) = scan_chunk(pattern);
        pattern = rest;
        if star && chunk.is_empty() {
            return Ok(true);
        }
        // The chunk here, unless it must match all that is left and does not.
        if let Some(after) = match_chunk(chunk, name)?
            && (after.is_empty() || !pattern.is_empty())
        {
            name = after;
            continue;
        }
        if star {
            for skip in 1..=name.len() {
                if let Some(after) = match_chunk(chunk, &name[skip..])? {
                    if pattern.is_empty() && !after.is_empty() {
                        continue;
                    }
                    name = after;
                    continue 'chunks;
                }
            }
        }
        return Ok(false);
    }
    Ok(name.is_empty())
}

/// The leading stars of `pattern`, the literal chunk after them, and the rest.
fn scan_chunk(pattern: &[char]) -> (bool, &[char], &[char]) {
    let stars = pattern.iter().take_while(|&&c| c == '*').count();
    let pattern = &pattern[stars..];
    let mut in_range = false;
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            '\\' if i + 1 < pattern.len() => i += 1,
            '[' => in_range = true,
            ']' => in_range = false,
            '*' if !in_range => break,
            _ => {}
        }
        i += 1;
    }
    (stars > 0, &pattern[..i], &pattern[i..])
}

/// `name` after `chunk` (no stars) matched its start, or `None`.
fn match_chunk<'a>(
    mut chunk: &[char],
    mut name: &'a [char],
) -> Result<Option<&'a [char]>, BadPattern> {
    while let Some(&c) = chunk.first() {
        let Some((&n, rest)) = name.split_first() else {
            return Ok(None);
        };
        name = rest;
        chunk = &chunk[1..];
        match c {
            '[' => {
                let negated = chunk.first() == Some(&'^');
                if negated {
                    chunk = &chunk[1..];
                }
                let mut matched = false;
                let mut ranges = 0;
                loop {
                    if chunk.first() == Some(&']') && ranges > 0 {
                        chunk = &chunk[1..];
                        break;
                    }
                    let (lo, rest) = class_char(chunk)?;
                    chunk = rest;
                    let mut hi = lo;
                    if chunk.first() == Some(&'-') {
                        (hi, chunk) = class_char(&chunk[1..])?;
                    }
                    matched |= lo <= n && n <= hi;
                    ranges += 1;
                }
                if matched == negated {
                    return Ok(None);
                }
            }
            '?' => {}
            '\\' => {
                let (&literal, rest) = chunk.split_first().ok_or(BadPattern)?;
                chunk = rest;
                if literal != n {
                    return Ok(None);
                }
            }
            literal => {
                if literal != n {
                    return Ok(None);
                }
            }
        }
    }
    Ok(Some(name))
}

/// One (possibly escaped) character of a class, which must not end the pattern.
fn class_char(chunk: &[char]) -> Result<(char, &[char]), BadPattern> {
    let chunk = match chunk.first() {
        None | Some('-' | ']') => return Err(BadPattern),
        Some('\\') => &chunk[1..],
        Some(_) => chunk,
    };
    match chunk.split_first() {
        Some((&c, rest)) if !rest.is_empty() => Ok((c, rest)),
        _ => Err(BadPattern),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Each `(template, expected)` substituted with `variables`, in both modes when all are set.
    fn check(variables: &[(&str, &str)], cases: &[(&str, &str)]) {
        let variables = vars(variables);
        for (template, expected) in cases {
            assert_eq!(
                substitute(template, &variables).as_deref(),
                Ok(*expected),
                "{template}"
            );
        }
    }

    #[test]
    fn case_functions() {
        check(
            &[("name", "HomeLab-Cluster"), ("low", "abc"), ("empty", "")],
            &[
                ("${name,,}", "homelab-cluster"),
                ("${name^^}", "HOMELAB-CLUSTER"),
                ("${name,}", "homeLab-Cluster"),
                ("${low^}", "Abc"),
                ("${empty^}", ""),
                ("${unset,,}", ""),
                // A combination Flux has no function for leaves the value.
                ("${low,^}", "abc"),
                ("prefix-${name,,}-suffix", "prefix-homelab-cluster-suffix"),
            ],
        );
    }

    #[test]
    fn length_and_substrings_count_bytes() {
        check(
            &[
                ("path", "/srv/fleet/apps/podinfo.yaml"),
                ("v", "abcdef"),
                ("utf", "é"),
            ],
            &[
                ("${#v}", "6"),
                ("${#utf}", "2"),
                ("${#unset}", "0"),
                ("${path:11}", "apps/podinfo.yaml"),
                ("${path:11:4}", "apps"),
                ("${v:-2}", "abcdef"), // `:-` is a default, not a negative offset
                ("${v:0-2}", "abcdef"),
                ("${v:1:100}", "bcdef"),
                ("${v:10}", ""),
                ("${v:10:2}", ""),
                ("${v:x}", "abcdef"),
                ("${v:1:y}", "abcdef"),
                ("${v:1::2}", "bc"),
                ("${v:1:2:3}", "abcdef"),
            ],
        );
        // A negative position counts from the end (written without `:-`).
        let variables = vars(&[("v", "abcdef"), ("n", "-2")]);
        assert_eq!(substitute("${v:${n}}", &variables).unwrap(), "ef");
        assert_eq!(substitute("${v:${n}:1}", &variables).unwrap(), "e");
        // Flux's Go panics on a negative length; here it is an error naming the expression.
        let error = substitute("${v:1:-1}", &variables).unwrap_err();
        assert!(error.to_string().contains("${v:1:-1}"), "{error}");
    }

    #[test]
    fn prefix_and_suffix_removal_with_globs() {
        check(
            &[
                ("file", "app.config.yaml"),
                ("path", "/path/to/file"),
                ("version", "v1.2.3"),
            ],
            &[
                ("${file#*.}", "config.yaml"),
                ("${file##*.}", "yaml"),
                ("${file%.*}", "app.config"),
                ("${file%%.*}", "app"),
                ("${path#*/}", "path/to/file"),
                ("${path##*/}", "file"),
                ("${version#v}", "1.2.3"),
                ("${version#x}", "v1.2.3"),
                ("${version#?}", "1.2.3"),
                ("${version#[a-z]}", "1.2.3"),
                ("${version#[^a-z]}", "v1.2.3"),
                ("${version%.3}", "v1.2"),
                ("${version%.?}", "v1.2"),
                // Flux matches `%` patterns reversed: a class or an escape there does not work.
                ("${version%.[0-9]}", "v1.2.3"),
                ("${version%\\.3}", "v1.2.3"),
                ("${unset#v}", ""),
                // A malformed glob leaves the value.
                ("${version#[v}", "v1.2.3"),
            ],
        );
    }

    #[test]
    fn replacements_are_literal() {
        check(
            &[
                ("z", "dev-DEV-1-DEV-dev"),
                ("p", "foo/bar/baz"),
                ("dots", "a.b.c"),
            ],
            &[
                ("${z/dev/prod}", "prod-DEV-1-DEV-dev"),
                ("${z//dev/prod}", "prod-DEV-1-DEV-prod"),
                ("${z/#dev/PROD}", "PROD-DEV-1-DEV-dev"),
                ("${z/%dev/PROD}", "dev-DEV-1-DEV-PROD"),
                ("${z/#DEV/PROD}", "dev-DEV-1-DEV-dev"),
                ("${z/%DEV/PROD}", "dev-DEV-1-DEV-dev"),
                ("${p/\\//-}", "foo-bar/baz"),
                ("${p//\\//-}", "foo-bar-baz"),
                ("${dots/./}", "ab.c"),
                ("${dots//./}", "abc"),
                ("${dots//*/x}", "a.b.c"),
                // Flux leaves the value when an anchored replacement is empty.
                ("${dots/#a/}", "a.b.c"),
                ("${dots/%c/}", "a.b.c"),
            ],
        );
        let variables = vars(&[("v", "a-b"), ("sep", "-"), ("to", "_")]);
        assert_eq!(substitute("${v/${sep}/${to}}", &variables).unwrap(), "a_b");
    }

    #[test]
    fn defaults_take_text_and_nested_expressions() {
        check(
            &[
                ("var", "abc"),
                ("empty", ""),
                ("d", "foo1"),
                ("up", "abcdEF"),
            ],
            &[
                ("${var=xyz}", "abc"),
                ("${unset=xyz}", "xyz"),
                ("${unset:=xyz}", "xyz"),
                ("${unset:-xyz}", "xyz"),
                ("${empty=xyz}", "xyz"),
                ("${empty:-xyz}", "xyz"),
                ("${unset:=}", ""),
                ("${unset=${d}}", "foo1"),
                ("foo: ${unset=prefix${d}-suffix}", "foo: prefixfoo1-suffix"),
                ("${unset=${up^^}}", "ABCDEF"),
                ("${unset:=${also:=deep}}", "deep"),
                ("${unset:=a b: c}", "a b: c"),
                // Flux parses these as the same default.
                ("${unset:+x}", "x"),
                ("${unset:?x}", "x"),
                ("${var:+x}", "abc"),
            ],
        );
    }

    #[test]
    fn dollars_escape_and_bare_names_stay() {
        check(
            &[("var01", "abcdEFGH28ij"), ("d", "foo")],
            &[
                ("$${var01}", "${var01}"),
                (
                    "some text ${var01}$${var$${var01}$var01${var01}",
                    "some text abcdEFGH28ij${var${var01}$var01abcdEFGH28ij",
                ),
                ("something $${var=${d}}", "something ${var=foo}"),
                ("$var01 $ a$b", "$var01 $ a$b"),
                ("cost: $$5", "cost: $5"),
                ("$$$${var01}", "$${var01}"),
                ("$$${var01}", "$abcdEFGH28ij"),
                ("\\\\x ${var01}", "\\\\x abcdEFGH28ij"),
                ("no variables at all", "no variables at all"),
            ],
        );
    }

    #[test]
    fn names_are_letters_digits_and_underscores() {
        check(
            &[("_a1", "x"), ("1st", "y"), ("ünï", "z")],
            &[("${_a1}", "x"), ("${1st}", "y"), ("${ünï}", "z")],
        );
    }

    #[test]
    fn malformed_expressions_are_errors_naming_them() {
        let variables = vars(&[("v", "SECRET-VALUE")]);
        for (template, expected) in [
            ("${v", "unterminated"),
            ("a: ${v:=x", "unterminated"),
            ("${v/a}", "unterminated"),
            ("${bad-name}", "invalid variable name 'bad-name'"),
            ("${v-default}", "invalid variable name 'v-default'"),
            ("${v+x}", "invalid variable name 'v+x'"),
            ("${}", "invalid variable name"),
            ("${a b}", "invalid variable name 'a'"),
            ("${v:}", "bad substitution '${v:}'"),
            ("${v#}", "bad substitution"),
            ("${#}", "bad substitution"),
            ("${#v:1}", "bad substitution"),
            ("${v^^x}", "bad substitution"),
            ("${v/a${v}/b}", "bad substitution"),
        ] {
            let error = substitute(template, &variables)
                .expect_err(template)
                .to_string();
            assert!(error.contains(expected), "{template}: {error}");
            assert!(!error.contains("SECRET"), "{template}: {error}");
        }
        // The whole text is parsed first: an error later on wins over what comes before.
        assert!(
            substitute_strict("${missing} ${v", &variables)
                .unwrap_err()
                .to_string()
                .contains("unterminated")
        );
    }

    #[test]
    fn strict_mode_fails_unset_variables_except_under_defaults() {
        let variables = vars(&[("set", "x"), ("empty", "")]);
        for template in [
            "${missing}",
            "${#missing}",
            "${missing^}",
            "${missing,,}",
            "${missing:0:10}",
            "${missing/a/b}",
            "${missing//a/b}",
            "${missing/#a/b}",
            "${missing%%a}",
            // Arguments are evaluated first, used or not.
            "${set:=${missing}}",
        ] {
            assert_eq!(
                substitute_strict(template, &variables),
                Err(SubstituteError::Unset("missing".to_owned())),
                "{template}"
            );
            assert!(substitute(template, &variables).is_ok(), "{template}");
        }
        for (template, expected) in [
            ("${missing:-fallback}", "fallback"),
            ("${missing:=assigned}", "assigned"),
            ("${missing=assigned}", "assigned"),
            ("${empty}", ""),
            ("${set^^}", "X"),
        ] {
            assert_eq!(
                substitute_strict(template, &variables).as_deref(),
                Ok(expected),
                "{template}"
            );
        }
    }

    #[test]
    fn tracking_names_the_variables_behind_each_expression() {
        let variables = vars(&[("a", "Secret"), ("b", "x")]);
        let (out, placed) =
            substitute_tracked("k: ${a,,} ${unset:=${b}} ${none}", &variables, false).unwrap();
        assert_eq!(out, "k: secret x ");
        assert_eq!(
            placed,
            vec![(3..9, "a".to_owned()), (10..11, "b".to_owned())]
        );
    }

    /// Every short template over the characters that matter parses to a result or an error,
    /// never a panic (a cheap stand-in for fuzzing).
    #[test]
    fn short_templates_never_panic() {
        let alphabet: Vec<char> = "${}:=-#%/,^a\\*[]?é".chars().collect();
        let variables = vars(&[("a", "aé/a.b-"), ("b", "")]);
        let mut template = String::new();
        let mut indices = [0usize; 4];
        loop {
            template.clear();
            template.push_str("${a");
            template.extend(indices.iter().map(|&i| alphabet[i]));
            for text in [&template[..], &template[3..]] {
                let _ = substitute_tracked(text, &variables, false);
                let _ = substitute_tracked(text, &variables, true);
            }
            let Some(last) = indices.iter().rposition(|&i| i + 1 < alphabet.len()) else {
                break;
            };
            indices[last] += 1;
            for i in &mut indices[last + 1..] {
                *i = 0;
            }
        }
    }

    #[test]
    fn glob_matching_follows_flux() {
        let m = |p: &str, n: &str| {
            let p: Vec<char> = p.chars().collect();
            let n: Vec<char> = n.chars().collect();
            glob_match(&p, &n).ok()
        };
        assert_eq!(m("*", "a/b"), Some(true));
        assert_eq!(m("a*c", "abbbc"), Some(true));
        assert_eq!(m("a*c", "abbbd"), Some(false));
        assert_eq!(m("a?c", "abc"), Some(true));
        assert_eq!(m("[a-c]x", "bx"), Some(true));
        assert_eq!(m("[^a-c]x", "bx"), Some(false));
        assert_eq!(m("\\*", "*"), Some(true));
        assert_eq!(m("*.txt", "a.b.txt"), Some(true));
        assert_eq!(m("[a", "a"), None);
        assert_eq!(m("a\\", "a"), Some(false));
    }
}
