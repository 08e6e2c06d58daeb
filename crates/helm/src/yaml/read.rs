//! Reading YAML as Helm does: `sigs.k8s.io/yaml.Unmarshal`, that is `yaml.v2` into
//! `interface{}`, keys turned into strings, then a JSON round trip (every number a `float64`).
//!
//! The syntax comes from `granit-parser`'s events; what the scalars mean is `yaml.v2`'s
//! (YAML 1.1: `yes`/`off` booleans, `0777` octal, `<<` merge keys), as are the error messages
//! charts can see through `fromYaml`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::rc::Rc;

use granit_parser::{Event, Options, Parser, ScalarStyle, ScanError};

use super::Error;
use super::base64_decode;
use super::resolve::{Scalar, go_parse_float, go_parse_int, resolve};

/// How deep collections may nest (`yaml.v2`'s own parser limit).
const MAX_DEPTH: usize = 10_000;
/// How deep the decoder recurses; deeper documents are refused rather than overflowing the
/// stack.
const MAX_DECODE_DEPTH: usize = 1_000;

const CORE: &str = "tag:yaml.org,2002:";

enum Node {
    Scalar {
        value: String,
        plain: bool,
        tag: Option<String>,
    },
    Sequence(Vec<Rc<Node>>),
    Mapping(Vec<(Rc<Node>, Rc<Node>)>),
}

fn error(message: impl Into<String>) -> Error {
    Error {
        message: format!("error converting YAML to JSON: {}", message.into()),
    }
}

/// `yaml: line N: problem` from a parser error, with `yaml.v2`'s line numbering.
fn syntax_error(e: &ScanError, text: &str) -> Error {
    let info = e.info();
    // Where Go's scanner stands at the end of the input (its line counted from 0).
    let eof_line =
        text.matches('\n').count() + usize::from(!text.is_empty() && !text.ends_with('\n'));
    let with_line = |line: usize, problem: &str| {
        if line == 0 {
            error(format!("yaml: {problem}"))
        } else {
            error(format!("yaml: line {line}: {problem}"))
        }
    };
    if let Some(rest) = info.strip_prefix("unclosed bracket '") {
        // At the end of the input Go expects either another entry (after `[`, `{` or `,`) or
        // the closing bracket.
        let last = text.trim_end().chars().last();
        if matches!(last, Some('[' | '{' | ',')) {
            return with_line(eof_line, "did not find expected node content");
        }
        let close = if rest.starts_with('{') { '}' } else { ']' };
        return with_line(eof_line, &format!("did not find expected ',' or '{close}'"));
    }
    if info.contains("illegal placement of ':' indicator") {
        // Inside a flow collection Go wants the next entry or the closing bracket.
        let close = innermost_open_bracket(text, e.marker().line())
            .map_or(']', |open| if open == '{' { '}' } else { ']' });
        return with_line(
            e.marker().line().saturating_sub(1),
            &format!("did not find expected ',' or '{close}'"),
        );
    }
    if info.contains("unclosed quote") {
        // Go's scanner reaches the end of the input inside the quotes (its line counted from
        // 0, printed plus one, and not at all on the first line).
        let line = text.matches('\n').count();
        return with_line(
            if line == 0 { 0 } else { line + 1 },
            "found unexpected end of stream",
        );
    }
    if info.contains("simple key expected ':'") {
        // Go notices the missing ':' only at the end of the input, a line past it.
        return with_line(eof_line + 1, "could not find expected ':'");
    }
    // libyaml's messages carry a "while parsing …, " context that Go does not print.
    let problem = info
        .split_once(", ")
        .filter(|(context, _)| context.starts_with("while "))
        .map_or(info.as_str(), |(_, problem)| problem)
        .to_string();
    let problem = match problem.as_str() {
        "unexpected eof" | "unexpected end of plain scalar" | "unclosed quote" => {
            "found unexpected end of stream"
        }
        p if p.starts_with("tabs disallowed") || p.starts_with("unexpected character") => {
            "found character that cannot start any token"
        }
        p if p.starts_with("invalid trailing content after") => "did not find expected key",
        p if p.starts_with("misplaced bracket") || p.starts_with("mismatched bracket") => {
            "did not find expected node content"
        }
        "found a tab" => "found a tab character that violates indentation",
        p if p.contains("cannot start with a tab") => {
            "found a tab character where an indentation space is expected"
        }
        // Go's own spelling.
        p if p.starts_with("did not find expected hexadecimal number") => {
            "did not find expected hexdecimal number"
        }
        other => other,
    };
    let parser_error =
        problem.starts_with("did not find expected") && !problem.contains("hexdecimal");
    let line = e.marker().line();
    // Go counts from 0 and adds 1 for scanner errors only; line 0 is not printed.
    let line = if parser_error {
        line.saturating_sub(1)
    } else if line > 1 {
        line
    } else {
        0
    };
    if problem.starts_with("found a tab character") {
        return with_line(first_indenting_tab(text), problem);
    }
    with_line(line, problem)
}

/// libyaml refuses a tab where a block scalar's indentation is still being measured (or short
/// of it): `|` then a line of spaces and a tab. Lines are 1-based, `first` is the header's.
fn check_block_tabs(lines: &[&str], first: usize, last: usize) -> Result<(), Error> {
    // The event's span may start at the header (`key: |`) or at the first content line.
    let Some(start) = first.checked_sub(1) else {
        return Ok(());
    };
    let (header, content) = match lines.get(start) {
        Some(line) if block_header(line).is_some() => (block_header(line), start + 1),
        _ => (
            start
                .checked_sub(1)
                .and_then(|i| lines.get(i))
                .and_then(|l| block_header(l)),
            start,
        ),
    };
    // An explicit indentation indicator (`|2`) fixes the indentation: not measured here.
    if header != Some(false) {
        return Ok(());
    }
    let mut indent: Option<usize> = None;
    for (index, line) in lines.iter().enumerate().take(last).skip(content) {
        let spaces = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[spaces..];
        if rest.starts_with('\t') && indent.is_none_or(|indent| spaces < indent) {
            return Err(error(format!(
                "yaml: line {}: found a tab character where an indentation space is expected",
                index + 1
            )));
        }
        if indent.is_none() && !rest.trim().is_empty() {
            indent = Some(spaces);
        }
    }
    Ok(())
}

/// Whether `line` ends with a block scalar header (`|`, `>-`, `|2+`, …): `Some(true)` when it
/// has an indentation indicator, `Some(false)` when not, `None` when it is no header.
fn block_header(line: &str) -> Option<bool> {
    let code = line.split(" #").next().unwrap_or(line).trim_end();
    let token = code.rsplit([' ', '\t']).next().unwrap_or(code);
    let rest = token.strip_prefix(['|', '>'])?;
    if !rest
        .chars()
        .all(|c| c == '+' || c == '-' || c.is_ascii_digit())
    {
        return None;
    }
    Some(rest.chars().any(|c| c.is_ascii_digit()))
}

/// The 1-based line of the first tab in a line's leading whitespace.
fn first_indenting_tab(text: &str) -> usize {
    text.lines()
        .position(|line| line.trim_start_matches(' ').starts_with('\t'))
        .map_or(0, |index| index + 1)
}

/// libyaml does not skip a tab where a line may start a key: before the first token of the
/// stream (or of a document after `---`) a tab in the indentation is an error.
fn check_leading_tabs(text: &str) -> Result<(), Error> {
    for (index, line) in text.lines().enumerate() {
        let content = line.trim_start_matches([' ', '\t']);
        let indentation = &line[..line.len() - content.len()];
        if indentation.contains('\t') {
            return Err(if index == 0 {
                error("yaml: found character that cannot start any token")
            } else {
                error(format!(
                    "yaml: line {}: found character that cannot start any token",
                    index + 1
                ))
            });
        }
        let directive = indentation.is_empty()
            && (content.starts_with('%')
                || content
                    .strip_prefix("---")
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t'])));
        if !(content.is_empty() || content.starts_with('#') || directive) {
            return Ok(());
        }
        if directive && content.starts_with("---") {
            // Content may follow the marker on its line: it starts the document.
            let rest = content
                .trim_start_matches('-')
                .trim_start_matches([' ', '\t']);
            if !rest.is_empty() && !rest.starts_with('#') {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The innermost bracket still open before `line` (1-based), quotes and comments aside.
fn innermost_open_bracket(text: &str, line: usize) -> Option<char> {
    let mut stack = Vec::new();
    for source in text.lines().take(line.saturating_sub(1)) {
        let mut quote: Option<char> = None;
        for c in source.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (None, '\'' | '"') => quote = Some(c),
                (None, '#') => break,
                (None, '[' | '{') => stack.push(c),
                (None, ']' | '}') => {
                    stack.pop();
                }
                // Inside quotes, or any other character.
                _ => {}
            }
        }
    }
    stack.last().copied()
}

/// Go's YAML reader accepts only printable characters (tab, line breaks and NEL included).
fn check_characters(text: &str) -> Result<(), Error> {
    let allowed = |c: char| {
        matches!(u32::from(c),
            0x09 | 0x0A | 0x0D | 0x20..=0x7E | 0x85 | 0xA0..=0xD7FF | 0xE000..=0xFFFD
            | 0x10000..=0x0010_FFFF)
    };
    if text.chars().all(allowed) {
        Ok(())
    } else {
        Err(error("yaml: control characters are not allowed"))
    }
}

/// Reads the first document's tree (aliases shared, not expanded).
#[allow(clippy::too_many_lines)] // one loop over the events, its state kept together
fn read_tree(text: &str) -> Result<Option<Rc<Node>>, Error> {
    enum Open {
        Sequence(usize, Vec<Rc<Node>>),
        Mapping(usize, Vec<Rc<Node>>),
    }
    let mut options = Options::default();
    options.emit_unresolved_aliases = true;
    options.emit_anchor_events = true;
    // Comments mean nothing to Helm; emitting them would also cap how many may sit between a key
    // and its value (the parser buffers at most 96), which real values files exceed.
    options.emit_comments = false;
    let mut parser = Parser::new_from_str_with_options(text, options);
    let mut names: HashMap<usize, String> = HashMap::new();
    let mut anchors: HashMap<usize, Rc<Node>> = HashMap::new();
    let mut stack: Vec<Open> = Vec::new();
    let mut root: Option<Rc<Node>> = None;
    let mut in_document = false;
    let mut layout = Layout::default();
    // The text's lines, split once when a block scalar needs them.
    let mut lines: Option<Vec<&str>> = None;
    while let Some(event) = parser.next_event() {
        let (event, span) = event.map_err(|e| syntax_error(&e, text))?;
        layout.record(&event, &span);
        let (node, anchor) = match event {
            Event::DocumentStart(..) => {
                in_document = true;
                continue;
            }
            Event::DocumentEnd => {
                if in_document {
                    // Only the first document counts, as with Go's `yaml.Unmarshal`.
                    break;
                }
                continue;
            }
            Event::StreamEnd => break,
            Event::Anchor(id, name) => {
                names.insert(id, name.into_owned());
                continue;
            }
            Event::UnresolvedAlias(name) => {
                let open = stack.iter().any(|open| {
                    let (Open::Sequence(id, _) | Open::Mapping(id, _)) = open;
                    names.get(id).is_some_and(|n| *n == name)
                });
                return Err(if open {
                    error(format!("yaml: anchor '{name}' value contains itself"))
                } else {
                    error(format!("yaml: unknown anchor '{name}' referenced"))
                });
            }
            Event::Alias(id) => {
                let Some(node) = anchors.get(&id).cloned() else {
                    // Known to the parser but not finished: the alias is inside its anchor.
                    let name = names.get(&id).cloned().unwrap_or_default();
                    return Err(error(format!(
                        "yaml: anchor '{name}' value contains itself"
                    )));
                };
                (node, 0)
            }
            Event::Scalar(value, style, anchor, tag) => {
                if matches!(style, ScalarStyle::Literal | ScalarStyle::Folded) {
                    let lines = lines.get_or_insert_with(|| text.lines().collect());
                    check_block_tabs(lines, span.start.line(), span.end.line())?;
                }
                let tag = tag.map(|t| format!("{}{}", t.handle(), t.suffix()));
                (
                    Rc::new(Node::Scalar {
                        value: value.into_owned(),
                        plain: style == ScalarStyle::Plain,
                        tag,
                    }),
                    anchor,
                )
            }
            Event::SequenceStart(_, anchor, _) | Event::MappingStart(_, anchor, _) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(error(format!("yaml: exceeded max depth of {MAX_DEPTH}")));
                }
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Open::Sequence(anchor, Vec::new())
                } else {
                    Open::Mapping(anchor, Vec::new())
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Open::Sequence(anchor, items)) => (Rc::new(Node::Sequence(items)), anchor),
                Some(Open::Mapping(anchor, items)) => {
                    let mut pairs = Vec::with_capacity(items.len() / 2);
                    let mut items = items.into_iter();
                    while let (Some(k), Some(v)) = (items.next(), items.next()) {
                        pairs.push((k, v));
                    }
                    (Rc::new(Node::Mapping(pairs)), anchor)
                }
                None => continue,
            },
            _ => continue,
        };
        if anchor != 0 {
            anchors.insert(anchor, Rc::clone(&node));
        }
        match stack.last_mut() {
            Some(Open::Sequence(_, items) | Open::Mapping(_, items)) => items.push(node),
            None => root = Some(node),
        }
    }
    layout.check_tab_lines(text)?;
    Ok(root)
}

/// Where scalars and flow collections lie, for the tab checks libyaml makes between tokens.
#[derive(Default)]
struct Layout {
    /// (first line, last line, last column, plain) of each scalar.
    scalars: Vec<(usize, usize, usize, bool)>,
    /// (first line, last line) of each flow collection.
    flows: Vec<(usize, usize)>,
    open_flows: Vec<Option<usize>>,
}

impl Layout {
    fn record(&mut self, event: &Event<'_>, span: &granit_parser::Span) {
        use granit_parser::StructureStyle;
        match event {
            Event::Scalar(_, style, ..) => self.scalars.push((
                span.start.line(),
                span.end.line(),
                span.end.col(),
                *style == ScalarStyle::Plain,
            )),
            Event::SequenceStart(style, ..) | Event::MappingStart(style, ..) => self
                .open_flows
                .push((*style == StructureStyle::Flow).then(|| span.start.line())),
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(Some(start)) = self.open_flows.pop() {
                    self.flows.push((start, span.end.line()));
                }
            }
            _ => {}
        }
    }

    /// Whether `line` (1-based `number`) is a block entry or key indicator followed by
    /// whitespace holding a tab and then content, outside any scalar or flow collection.
    fn tab_after_indicator(&self, line: &str, number: usize) -> bool {
        let Some(after) = line.trim_start_matches(' ').strip_prefix(['-', '?']) else {
            return false;
        };
        let content = after.trim_start_matches([' ', '\t']);
        let gap = &after[..after.len() - content.len()];
        if !gap.contains('\t') || content.is_empty() || content.starts_with('#') {
            return false;
        }
        let covered = self
            .scalars
            .iter()
            .any(|&(start, end, _, _)| start < number && number <= end)
            || self
                .flows
                .iter()
                .any(|&(start, end)| start <= number && number <= end);
        !covered
    }

    /// A line starting with a tab and holding nothing else (or a comment), in block context:
    /// after a plain scalar libyaml reports the tab as breaking the indentation, elsewhere as a
    /// character that cannot start a token. Lines are 1-based.
    fn check_tab_lines(&self, text: &str) -> Result<(), Error> {
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            let number = index + 1;
            if self.tab_after_indicator(line, number) {
                // `- \tx`, `? \tx`: after these indicators a line may start a key, so the tab
                // is not skipped.
                return Err(if index == 0 {
                    error("yaml: found character that cannot start any token")
                } else {
                    error(format!(
                        "yaml: line {number}: found character that cannot start any token"
                    ))
                });
            }
            let rest = line.trim_start_matches([' ', '\t']);
            if !line.starts_with('\t') || !(rest.is_empty() || rest.starts_with('#')) {
                continue;
            }
            let in_flow = self
                .flows
                .iter()
                .any(|&(start, end)| start <= number && number <= end);
            let in_scalar = self
                .scalars
                .iter()
                .any(|&(start, end, _, plain)| !plain && start < number && number <= end);
            if in_flow || in_scalar {
                continue;
            }
            // The last line with content before this one, and whether it ends in a plain
            // scalar.
            let previous = lines[..index].iter().rposition(|l| {
                let t = l.trim_start_matches([' ', '\t']);
                !t.is_empty() && !t.starts_with('#')
            });
            let after_plain = previous.is_some_and(|p| {
                let content = lines[p].split(" #").next().unwrap_or(lines[p]).trim_end();
                let width = content.chars().count();
                self.scalars
                    .iter()
                    .any(|&(_, end, col, plain)| plain && end == p + 1 && col == width)
            });
            let problem = if after_plain {
                "found a tab character that violates indentation"
            } else {
                "found character that cannot start any token"
            };
            return Err(if index == 0 {
                error(format!("yaml: {problem}"))
            } else {
                error(format!("yaml: line {number}: {problem}"))
            });
        }
        Ok(())
    }
}

/// A value as `yaml.v2` decodes it into `interface{}`, before the JSON conversion.
enum Go {
    Nil,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Go>),
    Map(Vec<(Go, Go)>),
}

impl Go {
    /// `%+#v`, as the key errors print values (a nil inside a container is typed).
    fn go_syntax(&self) -> String {
        match self {
            Go::Nil => "<nil>".into(),
            _ => self.go_syntax_inner(),
        }
    }

    fn go_syntax_inner(&self) -> String {
        match self {
            Go::Nil => "interface {}(nil)".into(),
            Go::Bool(b) => b.to_string(),
            Go::Int(i) => i.to_string(),
            Go::Uint(u) => format!("0x{u:x}"),
            Go::Float(f) => crate::value::format_float_g(*f),
            Go::Str(s) => format!("{s:?}"),
            Go::Seq(items) => format!(
                "[]interface {{}}{{{}}}",
                items
                    .iter()
                    .map(Go::go_syntax)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Go::Map(entries) => {
                // fmt prints map keys sorted: by type, then by value.
                let mut sorted: Vec<&(Go, Go)> = entries.iter().collect();
                sorted.sort_by(|(a, _), (b, _)| {
                    a.sort_class()
                        .cmp(&b.sort_class())
                        .then_with(|| a.sort_key(b))
                });
                format!(
                    "map[interface {{}}]interface {{}}{{{}}}",
                    sorted
                        .iter()
                        .map(|(k, v)| format!("{}:{}", k.go_syntax_inner(), v.go_syntax_inner()))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        }
    }

    fn sort_class(&self) -> u8 {
        match self {
            Go::Nil => 0,
            Go::Str(_) => 1,
            Go::Int(_) => 2,
            Go::Uint(_) => 3,
            Go::Float(_) => 4,
            Go::Bool(_) => 5,
            Go::Seq(_) | Go::Map(_) => 6,
        }
    }

    fn sort_key(&self, other: &Go) -> std::cmp::Ordering {
        match (self, other) {
            (Go::Str(a), Go::Str(b)) => a.cmp(b),
            (Go::Int(a), Go::Int(b)) => a.cmp(b),
            (Go::Uint(a), Go::Uint(b)) => a.cmp(b),
            (Go::Float(a), Go::Float(b)) => a.total_cmp(b),
            (Go::Bool(a), Go::Bool(b)) => a.cmp(b),
            _ => std::cmp::Ordering::Equal,
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Go::Nil => "%!s(<nil>)",
            Go::Bool(_) => "bool",
            Go::Int(_) => "int",
            Go::Uint(_) => "uint64",
            Go::Float(_) => "float64",
            Go::Str(_) => "string",
            Go::Seq(_) => "[]interface {}",
            Go::Map(_) => "map[interface {}]interface {}",
        }
    }
}

struct Decoder {
    decode_count: u64,
    alias_count: u64,
    alias_depth: usize,
    /// Whether a key `sigs.k8s.io/yaml` may refuse (nil, uint64) was decoded: only then is
    /// the tree searched for the first such key.
    odd_key: bool,
    /// Whether a NaN or infinity was decoded: only then is the tree searched for the one the
    /// JSON encoder would meet first.
    non_finite: bool,
}

/// `yaml.v2`'s tolerance for alias expansion (its defence against "billion laughs").
fn allowed_alias_ratio(decode_count: u64) -> f64 {
    const LOW: u64 = 400_000;
    const HIGH: u64 = 4_000_000;
    if decode_count <= LOW {
        0.99
    } else if decode_count >= HIGH {
        0.10
    } else {
        0.99 - 0.89 * ((decode_count - LOW) as f64 / (HIGH - LOW) as f64)
    }
}

/// Whether a key is `yaml.v2`'s merge key: `<<` resolved implicitly (plain and untagged, or
/// under the non-specific tag `!`, quoted or not, as libyaml counts it) or tagged `!!merge`.
fn is_merge(node: &Node) -> bool {
    let Node::Scalar { value, plain, tag } = node else {
        return false;
    };
    value == "<<"
        && match tag.as_deref() {
            None => *plain,
            Some(tag) => tag == "!" || tag.strip_prefix(CORE) == Some("merge"),
        }
}

impl Decoder {
    fn count(&mut self) -> Result<(), Error> {
        self.decode_count += 1;
        if self.alias_depth > 0 {
            self.alias_count += 1;
        }
        if self.alias_count > 100
            && self.decode_count > 1000
            && self.alias_count as f64 / self.decode_count as f64
                > allowed_alias_ratio(self.decode_count)
        {
            return Err(error("yaml: document contains excessive aliasing"));
        }
        Ok(())
    }

    fn decode(&mut self, node: &Rc<Node>, depth: usize) -> Result<Go, Error> {
        self.count()?;
        if depth > MAX_DECODE_DEPTH {
            return Err(error(format!(
                "yaml: exceeded max depth of {MAX_DECODE_DEPTH}"
            )));
        }
        // A shared node (an alias target) counts as alias expansion when reached again.
        let shared = Rc::strong_count(node) > 1;
        if shared {
            self.alias_depth += 1;
        }
        let result = match &**node {
            Node::Scalar { value, plain, tag } => {
                let go = scalar(value, *plain, tag.as_deref());
                if let Ok(Go::Float(f)) = &go {
                    self.non_finite |= !f.is_finite();
                }
                go
            }
            Node::Sequence(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.decode(item, depth + 1)?);
                }
                Ok(Go::Seq(out))
            }
            Node::Mapping(pairs) => {
                let mut out = MapBuilder::default();
                self.mapping(pairs, &mut out, depth)?;
                Ok(Go::Map(out.entries))
            }
        };
        if shared {
            self.alias_depth -= 1;
        }
        result
    }

    fn mapping(
        &mut self,
        pairs: &[(Rc<Node>, Rc<Node>)],
        out: &mut MapBuilder,
        depth: usize,
    ) -> Result<(), Error> {
        for (key, value) in pairs {
            if is_merge(key) {
                self.merge(value, out, depth)?;
                continue;
            }
            let key = self.decode(key, depth + 1)?;
            self.odd_key |= !matches!(key, Go::Str(_) | Go::Int(_) | Go::Bool(_) | Go::Float(_));
            if matches!(key, Go::Seq(_) | Go::Map(_)) {
                return Err(error(format!("yaml: invalid map key: {}", key.go_syntax())));
            }
            let value = self.decode(value, depth + 1)?;
            out.set(key, value);
        }
        Ok(())
    }

    fn merge(&mut self, node: &Rc<Node>, out: &mut MapBuilder, depth: usize) -> Result<(), Error> {
        let want_map = || error("yaml: map merge requires map or sequence of maps as the value");
        match &**node {
            Node::Mapping(pairs) => {
                self.count()?;
                self.mapping(pairs, out, depth + 1)
            }
            Node::Sequence(items) => {
                // Earlier maps win: apply them last.
                for item in items.iter().rev() {
                    let Node::Mapping(pairs) = &**item else {
                        return Err(want_map());
                    };
                    self.count()?;
                    self.mapping(pairs, out, depth + 1)?;
                }
                Ok(())
            }
            Node::Scalar { .. } => Err(want_map()),
        }
    }
}

/// A Go map's key identity: the same value of the same type.
#[derive(PartialEq, Eq, Hash)]
enum KeyId {
    Nil,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(u64),
    Str(String),
}

impl KeyId {
    fn of(key: &Go) -> Option<KeyId> {
        Some(match key {
            Go::Nil => KeyId::Nil,
            Go::Bool(b) => KeyId::Bool(*b),
            Go::Int(i) => KeyId::Int(*i),
            Go::Uint(u) => KeyId::Uint(*u),
            Go::Float(f) => KeyId::Float(f.to_bits()),
            Go::Str(s) => KeyId::Str(s.clone()),
            Go::Seq(_) | Go::Map(_) => return None,
        })
    }
}

/// A Go map being filled: entries in document order, a later value for a key replacing the
/// earlier one in place.
#[derive(Default)]
struct MapBuilder {
    entries: Vec<(Go, Go)>,
    index: HashMap<KeyId, usize>,
}

impl MapBuilder {
    fn set(&mut self, key: Go, value: Go) {
        let Some(id) = KeyId::of(&key) else {
            self.entries.push((key, value));
            return;
        };
        if let Some(&at) = self.index.get(&id)
            && let Some(entry) = self.entries.get_mut(at)
        {
            entry.1 = value;
            return;
        }
        self.index.insert(id, self.entries.len());
        self.entries.push((key, value));
    }
}

/// A scalar as `yaml.v2` decodes it into `interface{}`.
fn scalar(value: &str, plain: bool, tag: Option<&str>) -> Result<Go, Error> {
    let core = tag.and_then(|t| t.strip_prefix(CORE));
    match (tag, core) {
        (None, _) if !plain => return Ok(Go::Str(value.to_string())),
        (Some(_), None) | (_, Some("str" | "map" | "seq" | "set" | "omap" | "pairs")) => {
            // Unknown tags leave the text as it is.
            return Ok(Go::Str(value.to_string()));
        }
        (_, Some("binary")) => {
            let data = base64_decode(value.as_bytes())
                .map_err(|_| error("yaml: !!binary value contains invalid base64 data"))?;
            return Ok(Go::Str(super::go_lossy(&data)));
        }
        _ => {}
    }
    let resolved = match core {
        // An explicit tag skips the timestamp guess but otherwise resolves the same way.
        Some(_) if !value.is_empty() && resolve(value) == Scalar::Timestamp => {
            let plain = value.replace('_', "");
            if let Some(i) = go_parse_int(&plain) {
                Scalar::Int(i)
            } else if let Some(f) = go_parse_float(&plain) {
                Scalar::Float(f)
            } else {
                Scalar::Str
            }
        }
        _ => resolve(value),
    };
    let go = match resolved {
        Scalar::Null => Go::Nil,
        Scalar::Bool(b) => Go::Bool(b),
        Scalar::Int(i) => match i64::try_from(i) {
            Ok(i) => Go::Int(i),
            Err(_) => Go::Uint(u64::try_from(i).unwrap_or(u64::MAX)),
        },
        Scalar::Float(f) => Go::Float(f),
        Scalar::Timestamp | Scalar::Str => Go::Str(value.to_string()),
    };
    if let Some(want) = core {
        let (got, ok) = match &go {
            Go::Nil => ("null", want == "null"),
            Go::Bool(_) => ("bool", want == "bool"),
            Go::Int(_) => ("int", want == "int" || want == "float"),
            Go::Uint(_) => ("int", want == "int"),
            Go::Float(_) => ("float", want == "float"),
            _ => ("str", want == "timestamp"),
        };
        if !ok {
            return Err(error(format!(
                "yaml: cannot decode !!{got} `{value}` as a !!{want}"
            )));
        }
        if want == "float"
            && let Go::Int(i) = go
        {
            return Ok(Go::Float(i as f64));
        }
    }
    Ok(go)
}

/// `sigs.k8s.io/yaml`'s key conversion.
fn key_string(key: &Go, value: &Go) -> Result<String, Error> {
    Ok(match key {
        Go::Str(s) => s.clone(),
        Go::Int(i) => i.to_string(),
        Go::Bool(b) => b.to_string(),
        Go::Float(f) => float32_g(*f),
        other => {
            return Err(error(format!(
                "unsupported map key of type: {}, key: {}, value: {}",
                other.type_name(),
                other.go_syntax(),
                value.go_syntax()
            )));
        }
    })
}

/// `strconv.FormatFloat(f, 'g', -1, 32)` with YAML's names for the infinities.
fn float32_g(f: f64) -> String {
    if f.is_nan() {
        return ".nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            ".inf".into()
        } else {
            "-.inf".into()
        };
    }
    #[allow(clippy::cast_possible_truncation)]
    let single = f as f32;
    if single.is_infinite() {
        // Go formats "+Inf" and then renames it as YAML spells it.
        return if f > 0.0 {
            ".inf".into()
        } else {
            "-.inf".into()
        };
    }
    if single == 0.0 {
        return if single.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // `{:e}` of an f32 gives its shortest round-trip digits.
    let sci = format!("{single:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::new();
    if mantissa.starts_with('-') {
        out.push('-');
    }
    let (head, tail) = digits.split_at(1.min(digits.len()));
    if !(-4..6).contains(&exp) {
        out.push_str(head);
        if !tail.is_empty() {
            out.push('.');
            out.push_str(tail);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let _ = write!(out, "{:02}", exp.abs());
    } else if exp < 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', exp.unsigned_abs() as usize - 1));
        out.push_str(&digits);
    } else {
        let point = exp.unsigned_abs() as usize + 1;
        if digits.len() <= point {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', point - digits.len()));
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
    out
}

/// The JSON round trip: keys become strings, numbers `float64`, non-finite floats an error.
fn to_json(value: Go) -> Result<serde_json::Value, Error> {
    Ok(match value {
        Go::Nil => serde_json::Value::Null,
        Go::Bool(b) => serde_json::Value::Bool(b),
        Go::Int(i) => number(i as f64)?,
        Go::Uint(u) => number(u as f64)?,
        Go::Float(f) => number(f)?,
        Go::Str(s) => serde_json::Value::String(s),
        Go::Seq(items) => serde_json::Value::Array(
            items
                .into_iter()
                .map(to_json)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Go::Map(entries) => {
            let mut map = serde_json::Map::with_capacity(entries.len());
            for (key, value) in entries {
                let key = owned_key(key, &value)?;
                map.insert(key, to_json(value)?);
            }
            serde_json::Value::Object(map)
        }
    })
}

/// [`key_string`] taking the key, so that a string key moves instead of being copied.
fn owned_key(key: Go, value: &Go) -> Result<String, Error> {
    match key {
        Go::Str(s) => Ok(s),
        other => key_string(&other, value),
    }
}

/// Which parts of a document [`to_json_head`] converts.
#[derive(Clone, Copy)]
enum HeadLevel {
    /// The document: `apiVersion`, `kind` and `metadata` (by any case of their names).
    Top,
    /// `metadata`: `name` and `annotations`.
    Metadata,
}

/// The JSON round trip of the parts of a document Helm's `SimpleHead` reads; every other
/// value of the maps on the way becomes `null` (its key kept, so that repeated and
/// case-insensitive keys resolve as in the full conversion).
fn to_json_head(value: Go, level: HeadLevel) -> Result<serde_json::Value, Error> {
    let Go::Map(entries) = value else {
        return to_json(value);
    };
    let mut map = serde_json::Map::with_capacity(entries.len());
    for (key, value) in entries {
        let key = owned_key(key, &value)?;
        let value = match level {
            HeadLevel::Top if key.eq_ignore_ascii_case("metadata") => {
                to_json_head(value, HeadLevel::Metadata)?
            }
            HeadLevel::Top
                if key.eq_ignore_ascii_case("apiVersion") || key.eq_ignore_ascii_case("kind") =>
            {
                to_json(value)?
            }
            HeadLevel::Metadata
                if key.eq_ignore_ascii_case("name") || key.eq_ignore_ascii_case("annotations") =>
            {
                to_json(value)?
            }
            _ => serde_json::Value::Null,
        };
        map.insert(key, value);
    }
    Ok(serde_json::Value::Object(map))
}

/// The first key that `sigs.k8s.io/yaml` cannot turn into a string (checked before any value
/// is encoded, as Go converts the keys first).
fn check_keys(value: &Go) -> Result<(), Error> {
    match value {
        Go::Seq(items) => items.iter().try_for_each(check_keys),
        Go::Map(entries) => entries.iter().try_for_each(|(key, value)| {
            key_string(key, value)?;
            check_keys(value)
        }),
        _ => Ok(()),
    }
}

/// The first NaN or infinity in the order Go's JSON encoder meets them: map entries by key, a
/// repeated key counting once with its last value.
fn first_non_finite(value: &Go) -> Option<f64> {
    match value {
        Go::Float(f) if !f.is_finite() => Some(*f),
        Go::Seq(items) => items.iter().find_map(first_non_finite),
        Go::Map(entries) => {
            let by_key: std::collections::BTreeMap<String, &Go> = entries
                .iter()
                .filter_map(|(k, v)| key_string(k, v).ok().map(|k| (k, v)))
                .collect();
            by_key.values().find_map(|v| first_non_finite(v))
        }
        _ => None,
    }
}

fn number(f: f64) -> Result<serde_json::Value, Error> {
    serde_json::Number::from_f64(f)
        .map(serde_json::Value::Number)
        .ok_or_else(|| {
            error(format!(
                "json: unsupported value: {}",
                crate::value::format_float_g(f)
            ))
        })
}

/// The 1-based line of the parser's first error when that error is a quoted scalar's
/// continuation line indented too little.
fn underindented_quote_line(text: &str) -> Option<usize> {
    let mut parser = Parser::new_from_str(text);
    while let Some(event) = parser.next_event() {
        if let Err(e) = event {
            return matches!(
                e.kind(),
                granit_parser::ErrorKind::InvalidQuotedScalarIndent
            )
            .then(|| e.marker().line());
        }
    }
    None
}

/// `text` with line `line` (1-based) indented past every line before it.
fn indent_line(text: &str, line: usize) -> String {
    let deepest = text
        .lines()
        .take(line.saturating_sub(1))
        .map(|l| l.len() - l.trim_start_matches(' ').len())
        .max()
        .unwrap_or(0);
    let mut out = String::with_capacity(text.len() + deepest + 1);
    for (index, source) in text.split_inclusive('\n').enumerate() {
        if index + 1 == line {
            out.extend(std::iter::repeat_n(' ', deepest + 1));
        }
        out.push_str(source);
    }
    out
}

/// How many under-indented quoted-scalar lines are re-indented before giving up.
const MAX_REINDENTS: usize = 64;

pub(crate) fn parse(text: &str) -> Result<serde_json::Value, Error> {
    match decode_document(text)? {
        Some(go) => to_json(go),
        None => Ok(serde_json::Value::Null),
    }
}

/// [`parse`] for reading a manifest's head: the same checks and errors, but only
/// `apiVersion`, `kind`, `metadata.name` and `metadata.annotations` (found by any case of
/// their names, as Go's JSON decoder finds struct fields) are converted; every other value of
/// the top map and of `metadata` is `null`.
pub(crate) fn parse_head(text: &str) -> Result<serde_json::Value, Error> {
    if let Some(head) = fast::head(text) {
        let head = to_json_head(head, HeadLevel::Top);
        // Debug builds (the tests, the fuzz targets) check the fast path against the full one.
        #[cfg(debug_assertions)]
        {
            let full = full_head(text);
            assert!(
                matches!((&head, &full), (Ok(a), Ok(b)) if a == b)
                    || matches!((&head, &full), (Err(a), Err(b)) if a.message == b.message),
                "the fast head reader disagrees with the full one on {text:?}"
            );
        }
        return head;
    }
    full_head(text)
}

/// [`parse_head`] through the full reader.
fn full_head(text: &str) -> Result<serde_json::Value, Error> {
    match decode_document(text)? {
        Some(go) => to_json_head(go, HeadLevel::Top),
        None => Ok(serde_json::Value::Null),
    }
}

/// The first document decoded as `yaml.v2` does and checked for what the JSON round trip
/// refuses (keys it cannot turn into strings, then NaN and infinities), in Go's order.
fn decode_document(text: &str) -> Result<Option<Go>, Error> {
    check_characters(text)?;
    check_leading_tabs(text)?;
    // libyaml accepts a quoted scalar's continuation lines at any indentation (their leading
    // whitespace is folded away); the YAML 1.2 parser wants them inside the enclosing block.
    // Such lines are indented further and the text read again.
    // Each pass must move the error to a later line: a line that is still refused after being
    // indented (or a line number that does not match our split, as with lone `\r` breaks) ends
    // the attempts, so the text never grows more than MAX_REINDENTS lines' worth.
    let mut current = std::borrow::Cow::Borrowed(text);
    let mut reindents = 0;
    let mut last_line = 0;
    let root = loop {
        match read_tree(&current) {
            Ok(root) => break root,
            Err(e) => {
                let line = (reindents < MAX_REINDENTS)
                    .then(|| underindented_quote_line(&current))
                    .flatten()
                    .filter(|&line| line > last_line);
                let Some(line) = line else {
                    return Err(e);
                };
                current = std::borrow::Cow::Owned(indent_line(&current, line));
                last_line = line;
                reindents += 1;
            }
        }
    };
    let Some(root) = root else {
        return Ok(None);
    };
    let mut decoder = Decoder {
        decode_count: 0,
        alias_count: 0,
        alias_depth: 0,
        odd_key: false,
        non_finite: false,
    };
    let go = decoder.decode(&root, 0)?;
    drop(root);
    if decoder.odd_key {
        check_keys(&go)?;
    }
    if decoder.non_finite
        && let Some(bad) = first_non_finite(&go)
    {
        return Err(error(format!(
            "json: unsupported value: {}",
            crate::value::format_float_g(bad)
        )));
    }
    Ok(Some(go))
}

mod fast;

#[cfg(test)]
mod tests;
