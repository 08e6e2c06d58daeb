//! `toYaml`'s writer: what `sigs.k8s.io/yaml.Marshal` prints. That is a JSON round trip (Go's
//! `encoding/json`, read back by `yaml.v2` as YAML, so every key is a string and numbers become
//! YAML ints or floats) and then `yaml.v2`'s emitter: keys in its "natural" order, two-space
//! indentation with sequences not indented under their key, quoting chosen per string, long
//! plain and quoted strings folded past column 80.
//!
//! The emitter is `yaml.v2`'s (a port of libyaml's) state machine unrolled into recursion; the
//! state it keeps (column, indentation, whether the last character was whitespace or an
//! indentation) is the same, so line breaks fall where Go puts them.

use super::Error;
use super::resolve::{Scalar, is_base60_float, resolve};
use crate::value::Value;

/// Lines are folded at spaces once they pass this column.
const BEST_WIDTH: usize = 80;
/// Indentation step.
const BEST_INDENT: i64 = 2;
/// Keys longer than this (in bytes) are written as `? key`.
const MAX_SIMPLE_KEY: usize = 128;
/// Nesting deeper than this is refused (Go has no bound; this one keeps the recursion within a
/// small thread stack).
const MAX_DEPTH: usize = 1_000;

/// Writes `value` as `sigs.k8s.io/yaml.Marshal` does, with the trailing newline.
pub(crate) fn to_yaml(value: &Value) -> Result<String, Error> {
    to_yaml_with(value, Flavour::V2)
}

/// Which Go emitter to imitate.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Flavour {
    /// `sigs.k8s.io/yaml.Marshal` (`toYaml`).
    V2,
    /// `yaml.v3`'s encoder with `SetIndent(2)` (`toYamlPretty`): sequences indented under
    /// their key.
    V3,
}

pub(crate) fn to_yaml_with(value: &Value, flavour: Flavour) -> Result<String, Error> {
    let mut emitter = Emitter {
        out: String::new(),
        column: 0,
        indent: -1,
        whitespace: true,
        indention: true,
        flavour,
        best_width: match flavour {
            Flavour::V2 => BEST_WIDTH,
            Flavour::V3 => usize::MAX,
        },
    };
    emitter.node(value, Context::ROOT, 0)?;
    // Document end: finish the last line.
    emitter.write_indent();
    Ok(emitter.out)
}

/// Where a node is written, as far as the emitter's choices depend on it: a mapping value
/// (sequences there are not indented) and a simple key (no block scalars, no folding).
#[derive(Clone, Copy)]
struct Context {
    mapping: bool,
    simple_key: bool,
}

impl Context {
    const ROOT: Context = Context {
        mapping: false,
        simple_key: false,
    };
    const ITEM: Context = Context {
        mapping: false,
        simple_key: false,
    };
    const VALUE: Context = Context {
        mapping: true,
        simple_key: false,
    };
    const SIMPLE_KEY: Context = Context {
        mapping: true,
        simple_key: true,
    };
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
}

struct Emitter {
    out: String,
    /// The column, in characters.
    column: usize,
    indent: i64,
    /// Whether the last thing written was whitespace (an indicator needing none after it).
    whitespace: bool,
    /// Whether only indentation has been written on this line.
    indention: bool,
    flavour: Flavour,
    best_width: usize,
}

/// A node after the JSON round trip.
enum Node<'a> {
    Scalar(std::borrow::Cow<'a, str>, Style),
    Sequence(Vec<Value>),
    Mapping(Vec<(String, Value)>),
}

fn json_error(x: f64) -> Error {
    Error {
        message: format!(
            "error marshaling into JSON: json: unsupported value: {}",
            crate::value::format_float_g(x)
        ),
    }
}

/// A string as `yaml.v2`'s encoder asks for it: literal when it has a newline, plain when it
/// would read back as a string, else double-quoted.
fn string_style(s: &str) -> Style {
    if s.contains('\n') {
        Style::Literal
    } else if resolve(s) == Scalar::Str && !is_base60_float(s) {
        Style::Plain
    } else {
        Style::DoubleQuoted
    }
}

/// A float64 as Go's JSON writes it and `yaml.v2` reads it back and prints it: integral values
/// below 1e21 come back as YAML integers (while they fit 64 bits), others as `%g` floats.
fn float_text(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e21 {
        // Integral and below 1e21: JSON writes the shortest digits padded with zeros
        // (`9223372036854776000` for 2^63), which YAML reads as an int64 or a uint64 when
        // they fit.
        let digits = crate::value::format_float_shortest(x, -7, 21);
        if let Ok(i) = digits.parse::<i128>()
            && i >= i128::from(i64::MIN)
            && i <= i128::from(u64::MAX)
        {
            return if i == 0 { "0".into() } else { digits };
        }
    }
    crate::value::format_float_g(x)
}

/// What a string becomes on its way through Go's JSON text and `yaml.v2`'s reader: JSON leaves
/// DEL, the C1 controls and U+FFFE/U+FFFF raw, which the YAML reader refuses, and NEL (U+0085)
/// raw, which the reader folds like a line break inside a double-quoted scalar.
fn json_round_trip(s: &str, key: bool) -> Result<std::borrow::Cow<'_, str>, Error> {
    if s.chars()
        .any(|c| matches!(u32::from(c), 0x7F..=0x84 | 0x86..=0x9F | 0xFFFE | 0xFFFF))
    {
        return Err(Error {
            message: "yaml: control characters are not allowed".into(),
        });
    }
    if !s.contains('\u{85}') {
        return Ok(std::borrow::Cow::Borrowed(s));
    }
    if key {
        // A key that spans lines is no simple key for the reader.
        return Err(Error {
            message: "yaml: line 1: did not find expected ',' or '}'".into(),
        });
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        while i < chars.len() && chars[i] != ' ' && chars[i] != '\u{85}' {
            out.push(chars[i]);
            i += 1;
        }
        if i >= chars.len() {
            break;
        }
        // A run of spaces and breaks: spaces before the first break are kept when no break
        // follows; one break becomes a space, n breaks n-1 newlines.
        let mut spaces = 0;
        let mut breaks = 0;
        while i < chars.len() && (chars[i] == ' ' || chars[i] == '\u{85}') {
            if chars[i] == ' ' {
                if breaks == 0 {
                    spaces += 1;
                }
            } else {
                breaks += 1;
            }
            i += 1;
        }
        match breaks {
            0 => out.extend(std::iter::repeat_n(' ', spaces)),
            1 => out.push(' '),
            n => out.extend(std::iter::repeat_n('\n', n - 1)),
        }
    }
    Ok(std::borrow::Cow::Owned(out))
}

impl<'a> Node<'a> {
    fn of(value: &'a Value, flavour: Flavour) -> Result<Node<'a>, Error> {
        use std::borrow::Cow;
        Ok(match value {
            Value::Nil => Node::Scalar(Cow::Borrowed("null"), Style::Plain),
            Value::Bool(true) => Node::Scalar(Cow::Borrowed("true"), Style::Plain),
            Value::Bool(false) => Node::Scalar(Cow::Borrowed("false"), Style::Plain),
            Value::Int(i) | Value::Int64(i) => {
                Node::Scalar(Cow::Owned(i.to_string()), Style::Plain)
            }
            Value::Float(x) if flavour == Flavour::V3 => {
                let text = if x.is_nan() {
                    ".nan".into()
                } else if x.is_infinite() {
                    if *x > 0.0 {
                        ".inf".into()
                    } else {
                        "-.inf".into()
                    }
                } else {
                    crate::value::format_float_g(*x)
                };
                Node::Scalar(Cow::Owned(text), Style::Plain)
            }
            Value::Float(x) => {
                if !x.is_finite() {
                    return Err(json_error(*x));
                }
                Node::Scalar(Cow::Owned(float_text(*x)), Style::Plain)
            }
            Value::String(s) if flavour == Flavour::V3 => {
                Node::Scalar(Cow::Borrowed(s), string_style(s))
            }
            Value::String(s) => {
                let s = json_round_trip(s, false)?;
                let style = string_style(&s);
                Node::Scalar(s, style)
            }
            Value::Bytes(b) => {
                use base64::Engine as _;
                let s = base64::engine::general_purpose::STANDARD.encode(b);
                let style = string_style(&s);
                Node::Scalar(Cow::Owned(s), style)
            }
            Value::List(items, _) => Node::Sequence(items.to_vec()),
            Value::Map(m) => {
                let mut entries = Vec::with_capacity(m.borrow().len());
                for (k, v) in m.borrow().iter() {
                    let key = match flavour {
                        Flavour::V2 => json_round_trip(k, true)?.into_owned(),
                        Flavour::V3 => k.clone(),
                    };
                    entries.push((key, v.clone()));
                }
                sort_keys(&mut entries);
                Node::Mapping(entries)
            }
            Value::Object(o) => {
                return Ok(match Node::of(&o.to_data(), flavour)? {
                    Node::Scalar(s, style) => Node::Scalar(Cow::Owned(s.into_owned()), style),
                    Node::Sequence(items) => Node::Sequence(items),
                    Node::Mapping(entries) => Node::Mapping(entries),
                });
            }
        })
    }
}

/// Sorts map keys in `yaml.v2`'s order (a merge sort: the comparison is not guaranteed to be a
/// total order, and the standard sorts may panic on such).
fn sort_keys(entries: &mut Vec<(String, Value)>) {
    if entries.len() < 2 {
        return;
    }
    // BTreeMap order first: most keys need no move.
    if entries.windows(2).all(|w| !key_less(&w[1].0, &w[0].0)) {
        return;
    }
    let mut items: Vec<(Vec<char>, (String, Value))> = entries
        .drain(..)
        .map(|entry| (entry.0.chars().collect(), entry))
        .collect();
    merge_sort(&mut items);
    entries.extend(items.into_iter().map(|(_, entry)| entry));
}

fn merge_sort<T>(items: &mut Vec<(Vec<char>, T)>) {
    if items.len() < 2 {
        return;
    }
    let mut right = items.split_off(items.len() / 2);
    merge_sort(items);
    merge_sort(&mut right);
    let left = std::mem::take(items);
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    while let (Some(l), Some(r)) = (left.peek(), right.peek()) {
        let take_right = runes_less(&r.0, &l.0);
        let next = if take_right {
            right.next()
        } else {
            left.next()
        };
        items.extend(next);
    }
    items.extend(left);
    items.extend(right);
}

fn key_less(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return runes_less(a.as_bytes(), b.as_bytes());
    }
    runes_less(
        &a.chars().collect::<Vec<_>>(),
        &b.chars().collect::<Vec<_>>(),
    )
}

fn is_letter(c: char) -> bool {
    c.is_alphabetic()
}

fn is_digit(c: char) -> bool {
    c.is_ascii_digit() || (!c.is_ascii() && c.is_numeric())
}

/// `yaml.v2`'s key order for two strings: letters by code point, runs of digits by value,
/// and a non-letter before a letter.
fn runes_less<T: Copy + Into<char>>(a: &[T], b: &[T]) -> bool {
    let at = |i: usize| -> char { a[i].into() };
    let bt = |i: usize| -> char { b[i].into() };
    for i in 0..a.len().min(b.len()) {
        let (ca, cb) = (at(i), bt(i));
        if ca == cb {
            continue;
        }
        let (letter_a, letter_b) = (is_letter(ca), is_letter(cb));
        if letter_a && letter_b {
            return ca < cb;
        }
        if letter_a || letter_b {
            return letter_b;
        }
        let (mut an, mut bn): (i64, i64) = (0, 0);
        if ca == '0' || cb == '0' {
            // A zero inside a number (after a non-zero digit) counts as a digit of it.
            let mut j = i;
            while j > 0 && is_digit(at(j - 1)) {
                j -= 1;
                if at(j) != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < a.len() && is_digit(at(ai)) {
            an = an
                .wrapping_mul(10)
                .wrapping_add(i64::from(u32::from(at(ai))) - 48);
            ai += 1;
        }
        let mut bi = i;
        while bi < b.len() && is_digit(bt(bi)) {
            bn = bn
                .wrapping_mul(10)
                .wrapping_add(i64::from(u32::from(bt(bi))) - 48);
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ca < cb;
    }
    a.len() < b.len()
}

/// What the emitter learns about a scalar before choosing its style.
#[derive(Clone, Copy, Debug)]
struct Analysis {
    multiline: bool,
    flow_plain_allowed: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

fn is_blankz(c: char) -> bool {
    is_blank(c) || is_break(c) || c == '\0'
}

/// libyaml's printable set as `yaml.v2` tests it on UTF-8 bytes (which leaves out every
/// character beyond the Basic Multilingual Plane).
fn is_printable(c: char) -> bool {
    let c = u32::from(c);
    c == 0x0A
        || (0x20..=0x7E).contains(&c)
        || (0xA0..=0xD7FF).contains(&c)
        || ((0xE000..=0xFFFF).contains(&c) && c != 0xFEFF && c != 0xFFFE && c != 0xFFFF)
}

#[allow(clippy::too_many_lines)] // one pass, as libyaml's analysis
fn analyze(value: &str, flavour: Flavour) -> Analysis {
    if value.is_empty() {
        return Analysis {
            multiline: false,
            flow_plain_allowed: false,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: false,
        };
    }
    let mut block_indicators = false;
    let mut flow_indicators = false;
    let mut line_breaks = false;
    let mut special_characters = false;
    let mut tab_characters = false;
    let mut leading_space = false;
    let mut leading_break = false;
    let mut trailing_space = false;
    let mut trailing_break = false;
    let mut break_space = false;
    let mut space_break = false;
    let mut previous_space = false;
    let mut previous_break = false;

    if value.starts_with("---") || value.starts_with("...") {
        block_indicators = true;
        flow_indicators = true;
    }
    let mut preceded_by_whitespace = true;
    let mut chars = value.chars().peekable();
    let mut first = true;
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        let followed_by_whitespace = next.is_none_or(is_blank);
        let last = next.is_none();
        if first {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"'
                | '%' | '@' | '`' => {
                    flow_indicators = true;
                    block_indicators = true;
                }
                '?' | ':' => {
                    flow_indicators = true;
                    if followed_by_whitespace {
                        block_indicators = true;
                    }
                }
                '-' if followed_by_whitespace => {
                    flow_indicators = true;
                    block_indicators = true;
                }
                _ => {}
            }
        } else {
            match c {
                ',' | '?' | '[' | ']' | '{' | '}' => flow_indicators = true,
                ':' => {
                    flow_indicators = true;
                    if followed_by_whitespace {
                        block_indicators = true;
                    }
                }
                '#' if preceded_by_whitespace => {
                    flow_indicators = true;
                    block_indicators = true;
                }
                _ => {}
            }
        }
        if c == '\t' && flavour == Flavour::V3 {
            // yaml.v3 lets tabs into block scalars (never into plain or single-quoted ones).
            tab_characters = true;
        } else if !is_printable(c) {
            special_characters = true;
        }
        if c == ' ' {
            if first {
                leading_space = true;
            }
            if last {
                trailing_space = true;
            }
            if previous_break {
                break_space = true;
            }
            previous_space = true;
            previous_break = false;
        } else if is_break(c) {
            line_breaks = true;
            if first {
                leading_break = true;
            }
            if last {
                trailing_break = true;
            }
            if previous_space {
                space_break = true;
            }
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = is_blankz(c);
        first = false;
    }
    let mut analysis = Analysis {
        multiline: line_breaks,
        flow_plain_allowed: true,
        block_plain_allowed: true,
        single_quoted_allowed: true,
        block_allowed: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        analysis.flow_plain_allowed = false;
        analysis.block_plain_allowed = false;
    }
    if trailing_space {
        analysis.block_allowed = false;
    }
    if break_space {
        analysis.flow_plain_allowed = false;
        analysis.block_plain_allowed = false;
        analysis.single_quoted_allowed = false;
    }
    if space_break || tab_characters || special_characters {
        analysis.flow_plain_allowed = false;
        analysis.block_plain_allowed = false;
        analysis.single_quoted_allowed = false;
    }
    if space_break || special_characters {
        analysis.block_allowed = false;
    }
    if line_breaks {
        analysis.flow_plain_allowed = false;
        analysis.block_plain_allowed = false;
    }
    if flow_indicators {
        analysis.flow_plain_allowed = false;
    }
    if block_indicators {
        analysis.block_plain_allowed = false;
    }
    analysis
}

impl Emitter {
    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    /// Copies a break character: `\n` as a newline, the others as they are (starting a line).
    fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.put_break();
        } else {
            self.out.push(c);
            self.column = 0;
        }
    }

    fn write_indent(&mut self) {
        let indent = usize::try_from(self.indent.max(0)).unwrap_or(0);
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
        self.indention = true;
    }

    fn write_indicator(
        &mut self,
        indicator: &str,
        need_whitespace: bool,
        is_whitespace: bool,
        is_indention: bool,
    ) {
        if need_whitespace && !self.whitespace {
            self.put(' ');
        }
        self.out.push_str(indicator);
        self.column += indicator.chars().count();
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
    }

    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        if self.indent < 0 {
            self.indent = if flow { BEST_INDENT } else { 0 };
        } else if !indentless {
            self.indent += BEST_INDENT;
        }
    }

    fn node(&mut self, value: &Value, context: Context, depth: usize) -> Result<(), Error> {
        if depth > MAX_DEPTH {
            return Err(Error {
                message: "error marshaling into JSON: json: exceeded max depth".into(),
            });
        }
        match Node::of(value, self.flavour)? {
            Node::Scalar(text, style) => {
                self.scalar(&text, style, context);
                Ok(())
            }
            Node::Sequence(items) => {
                if items.is_empty() {
                    self.empty("[", "]");
                    return Ok(());
                }
                let saved = self.indent;
                let indentless = match self.flavour {
                    Flavour::V2 => context.mapping && !self.indention,
                    Flavour::V3 => false,
                };
                self.increase_indent(false, indentless);
                for item in &items {
                    self.write_indent();
                    self.write_indicator("-", true, false, true);
                    self.node(item, Context::ITEM, depth + 1)?;
                }
                self.indent = saved;
                Ok(())
            }
            Node::Mapping(entries) => {
                if entries.is_empty() {
                    self.empty("{", "}");
                    return Ok(());
                }
                let saved = self.indent;
                self.increase_indent(false, false);
                for (key, value) in &entries {
                    self.write_indent();
                    let style = string_style(key);
                    let analysis = analyze(key, self.flavour);
                    if !analysis.multiline && key.len() <= MAX_SIMPLE_KEY {
                        self.scalar_analyzed(key, style, analysis, Context::SIMPLE_KEY);
                        self.write_indicator(":", false, false, false);
                    } else {
                        self.write_indicator("?", true, false, true);
                        self.scalar_analyzed(key, style, analysis, Context::VALUE);
                        self.write_indent();
                        self.write_indicator(":", true, false, true);
                    }
                    self.node(value, Context::VALUE, depth + 1)?;
                }
                self.indent = saved;
                Ok(())
            }
        }
    }

    fn empty(&mut self, open: &str, close: &str) {
        self.write_indicator(open, true, true, false);
        self.write_indicator(close, false, false, false);
    }

    fn scalar(&mut self, text: &str, requested: Style, context: Context) {
        let analysis = analyze(text, self.flavour);
        self.scalar_analyzed(text, requested, analysis, context);
    }

    fn scalar_analyzed(
        &mut self,
        text: &str,
        requested: Style,
        analysis: Analysis,
        context: Context,
    ) {
        let mut style = requested;
        if context.simple_key && analysis.multiline {
            style = Style::DoubleQuoted;
        }
        if style == Style::Plain
            && (!analysis.block_plain_allowed || (text.is_empty() && context.simple_key))
        {
            style = Style::SingleQuoted;
        }
        if style == Style::SingleQuoted && !analysis.single_quoted_allowed {
            style = Style::DoubleQuoted;
        }
        if style == Style::Literal && (!analysis.block_allowed || context.simple_key) {
            style = Style::DoubleQuoted;
        }
        let saved = self.indent;
        self.increase_indent(true, false);
        let allow_breaks = !context.simple_key;
        match style {
            Style::Plain => self.write_plain(text, allow_breaks),
            Style::SingleQuoted => self.write_single_quoted(text, allow_breaks),
            Style::DoubleQuoted => self.write_double_quoted(text, allow_breaks),
            Style::Literal => self.write_literal(text),
        }
        self.indent = saved;
    }

    fn write_plain(&mut self, value: &str, allow_breaks: bool) {
        if !self.whitespace {
            self.put(' ');
        }
        let mut spaces = false;
        let mut breaks = false;
        let mut chars = value.chars().peekable();
        while let Some(c) = chars.next() {
            if c == ' ' {
                let next_is_space = chars.peek() == Some(&' ');
                if allow_breaks && !spaces && self.column > self.best_width && !next_is_space {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else if is_break(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.put(c);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.whitespace = false;
        self.indention = false;
    }

    fn write_single_quoted(&mut self, value: &str, allow_breaks: bool) {
        self.write_indicator("'", true, false, false);
        let mut spaces = false;
        let mut breaks = false;
        let count = value.chars().count();
        let mut chars = value.chars().enumerate().peekable();
        while let Some((i, c)) = chars.next() {
            if c == ' ' {
                let next_is_space = chars.peek().is_some_and(|(_, n)| *n == ' ');
                if allow_breaks
                    && !spaces
                    && self.column > self.best_width
                    && i > 0
                    && i + 1 < count
                    && !next_is_space
                {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else if is_break(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if c == '\'' {
                    self.put('\'');
                }
                self.put(c);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.write_indicator("'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_double_quoted(&mut self, value: &str, allow_breaks: bool) {
        self.write_indicator("\"", true, false, false);
        let mut spaces = false;
        // libyaml's BOM test looks at the start of the value, whatever the position.
        let bom = value.starts_with('\u{feff}');
        let count = value.chars().count();
        let mut chars = value.chars().enumerate().peekable();
        while let Some((i, c)) = chars.next() {
            if !is_printable(c) || bom || is_break(c) || c == '"' || c == '\\' {
                self.put('\\');
                let code = u32::from(c);
                match c {
                    '\0' => self.put('0'),
                    '\u{7}' => self.put('a'),
                    '\u{8}' => self.put('b'),
                    '\t' => self.put('t'),
                    '\n' => self.put('n'),
                    '\u{b}' => self.put('v'),
                    '\u{c}' => self.put('f'),
                    '\r' => self.put('r'),
                    '\u{1b}' => self.put('e'),
                    '"' => self.put('"'),
                    '\\' => self.put('\\'),
                    '\u{85}' => self.put('N'),
                    '\u{a0}' => self.put('_'),
                    '\u{2028}' => self.put('L'),
                    '\u{2029}' => self.put('P'),
                    _ => {
                        let (letter, width) = if code <= 0xFF {
                            ('x', 2)
                        } else if code <= 0xFFFF {
                            ('u', 4)
                        } else {
                            ('U', 8)
                        };
                        self.put(letter);
                        let hex = format!("{code:0width$X}");
                        self.out.push_str(&hex);
                        self.column += hex.len();
                    }
                }
                spaces = false;
            } else if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > self.best_width
                    && i > 0
                    && i + 1 < count
                {
                    self.write_indent();
                    if chars.peek().is_some_and(|(_, n)| *n == ' ') {
                        self.put('\\');
                    }
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                self.put(c);
                spaces = false;
            }
        }
        self.write_indicator("\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_block_hints(&mut self, value: &str) {
        if value.starts_with(' ') || value.starts_with(is_break) {
            let hint = BEST_INDENT.to_string();
            self.write_indicator(&hint, false, false, false);
        }
        let mut tail = value.chars().rev();
        let chomp = match (tail.next(), tail.next()) {
            (None, _) => Some("-"),
            (Some(last), _) if !is_break(last) => Some("-"),
            (Some(_), None) => Some("+"),
            (Some(_), Some(before)) if is_break(before) => Some("+"),
            _ => None,
        };
        if let Some(chomp) = chomp {
            self.write_indicator(chomp, false, false, false);
        }
    }

    fn write_literal(&mut self, value: &str) {
        self.write_indicator("|", true, false, false);
        self.write_block_hints(value);
        self.put_break();
        self.indention = true;
        self.whitespace = true;
        let mut breaks = true;
        for c in value.chars() {
            if is_break(c) {
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.put(c);
                self.indention = false;
                breaks = false;
            }
        }
    }
}

#[cfg(test)]
mod tests;
