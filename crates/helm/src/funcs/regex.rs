//! Template functions: regex — `regexMatch`, `regexFind`, `regexFindAll`, `regexReplaceAll`,
//! `regexReplaceAllLiteral`, `regexSplit`, `regexQuoteMeta` and their `must` forms.
//!
//! Patterns use Go's RE2 syntax. The Rust `regex` crate reads nearly the same language; the
//! differences that matter are bridged by [`translate`], which also reports Go's parse errors
//! in Go's words (`error parsing regexp: missing closing ): `(``):
//! - `\d`, `\w`, `\s`, `\b` are ASCII-only in Go and Unicode-aware in Rust: they are rewritten
//!   to explicit ASCII classes.
//! - Inside brackets Go reads `[`, `&&`, `~~` and `--` literally; Rust would nest or combine
//!   classes: they are escaped.
//! - Go's limit on counted repetition (1000), its refusal of nested repetition (`a**`) and of
//!   the `x`/`u` flags are checked here.
//!
//! Matching iterates as Go's `FindAll` does (an empty match right after a match is skipped), and
//! replacement templates expand `$1`, `${1}`, `$name` and `$$` by Go's rules.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use super::crypto::{int_arg, str_arg, want_args};
use crate::template::{Call, FuncMap};
use crate::value::{ListKind, Value};

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("regexMatch", regex_match);
    map.insert("mustRegexMatch", must_regex_match);
    map.insert("regexFind", regex_find);
    map.insert("mustRegexFind", must_regex_find);
    map.insert("regexFindAll", regex_find_all);
    map.insert("mustRegexFindAll", must_regex_find_all);
    map.insert("regexReplaceAll", regex_replace_all);
    map.insert("mustRegexReplaceAll", must_regex_replace_all);
    map.insert("regexReplaceAllLiteral", regex_replace_all_literal);
    map.insert("mustRegexReplaceAllLiteral", must_regex_replace_all_literal);
    map.insert("regexSplit", regex_split);
    map.insert("mustRegexSplit", must_regex_split);
    map.insert("regexQuoteMeta", regex_quote_meta);
}

/// The POSIX class names Go knows (`[[:alpha:]]`).
const POSIX_CLASSES: [&str; 14] = [
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
];

/// Go's repetition count limit.
const MAX_REPEAT: u32 = 1000;

/// How many compiled patterns to keep per thread.
const CACHE_LIMIT: usize = 256;

thread_local! {
    static CACHE: RefCell<HashMap<String, Result<Rc<regex::Regex>, String>>> =
        RefCell::new(HashMap::new());
}

/// Compiles a Go regexp; the error is Go's `regexp.Compile` message.
pub fn compile(pattern: &str) -> Result<Rc<regex::Regex>, String> {
    if let Some(hit) = CACHE.with(|cache| cache.borrow().get(pattern).cloned()) {
        return hit;
    }
    let compiled = translate(pattern)
        .map_err(|e| format!("error parsing regexp: {e}"))
        .and_then(|rust| {
            regex::RegexBuilder::new(&rust)
                .size_limit(16 << 20)
                .build()
                .map(Rc::new)
                .map_err(|e| match e {
                    regex::Error::CompiledTooBig(_) => {
                        format!("error parsing regexp: expression too large: `{pattern}`")
                    }
                    other => format!("error parsing regexp: {other}"),
                })
        });
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(pattern.to_owned(), compiled.clone());
    });
    compiled
}

/// What `regexp.MustCompile` panics with (the message the non-`must` functions fail with).
fn must_compile(pattern: &str) -> Result<Rc<regex::Regex>, String> {
    compile(pattern).map_err(|e| format!("regexp: Compile({}): {e}", go_backquote(pattern)))
}

/// Go's `regexp` quoting of a pattern: backquoted when it can be, else `strconv.Quote`.
fn go_backquote(text: &str) -> String {
    if text.contains('`') || text.chars().any(|c| c.is_control() && c != '\t') {
        super::crypto::go_quote(text)
    } else {
        format!("`{text}`")
    }
}

/// Rewrites a Go RE2 pattern into the Rust `regex` dialect with the same meaning, or reports
/// Go's parse error (`missing closing ): `(``).
pub fn translate(pattern: &str) -> Result<String, String> {
    Translator {
        pattern,
        chars: pattern.char_indices().collect(),
        at: 0,
        out: String::with_capacity(pattern.len() + 8),
        names: HashMap::new(),
    }
    .run()
}

struct Translator<'p> {
    pattern: &'p str,
    chars: Vec<(usize, char)>,
    at: usize,
    out: String,
    /// Group names seen, with how often: Go allows a name twice, Rust does not, so repeats
    /// are renamed `name.2`, `name.3` (a `.` cannot appear in a Go name).
    names: HashMap<String, usize>,
}

/// What the previous item was, for Go's repetition checks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    /// Nothing to repeat: the start, `(`, `|`.
    Nothing,
    /// An atom.
    Atom,
    /// A repetition operator starting at this byte offset.
    Repeat(usize),
}

impl Translator<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).map(|(_, c)| *c)
    }

    fn offset(&self, index: usize) -> usize {
        self.chars
            .get(index)
            .map_or(self.pattern.len(), |(offset, _)| *offset)
    }

    fn run(mut self) -> Result<String, String> {
        let mut depth = 0_usize;
        let mut last = Last::Nothing;
        while let Some(c) = self.peek(0) {
            let start = self.offset(self.at);
            match c {
                '(' => {
                    if self.group(start)? {
                        depth += 1;
                    }
                    last = Last::Nothing;
                }
                ')' => {
                    if depth == 0 {
                        return Err(format!("unexpected ): `{}`", self.pattern));
                    }
                    depth -= 1;
                    self.out.push(')');
                    self.at += 1;
                    last = Last::Atom;
                }
                '|' => {
                    self.out.push('|');
                    self.at += 1;
                    last = Last::Nothing;
                }
                '*' | '+' | '?' => {
                    self.at += 1;
                    if self.peek(0) == Some('?') {
                        self.at += 1;
                    }
                    let end = self.offset(self.at);
                    self.repeat(last, start, end)?;
                    self.out.push_str(&self.pattern[start..end]);
                    last = Last::Repeat(start);
                }
                '{' => {
                    if let Some((end_index, min, max)) = self.counted() {
                        let mut end = self.offset(end_index);
                        let text = &self.pattern[start..end];
                        if min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT || m < min) {
                            return Err(format!("invalid repeat count: `{text}`"));
                        }
                        self.at = end_index;
                        if self.peek(0) == Some('?') {
                            self.at += 1;
                            end = self.offset(self.at);
                        }
                        self.repeat(last, start, end)?;
                        self.out.push_str(&self.pattern[start..end]);
                        last = Last::Repeat(start);
                    } else {
                        // Not a valid count: Go reads `{` as a literal.
                        self.out.push_str("\\{");
                        self.at += 1;
                        last = Last::Atom;
                    }
                }
                '[' => {
                    self.class(start)?;
                    last = Last::Atom;
                }
                '\\' => {
                    self.escape(start, false)?;
                    last = Last::Atom;
                }
                c => {
                    self.out.push(c);
                    self.at += 1;
                    last = Last::Atom;
                }
            }
        }
        if depth > 0 {
            return Err(format!("missing closing ): `{}`", self.pattern));
        }
        Ok(self.out)
    }

    /// Checks a repetition operator `pattern[start..end]` against what precedes it.
    fn repeat(&self, last: Last, start: usize, end: usize) -> Result<(), String> {
        match last {
            Last::Nothing => Err(format!(
                "missing argument to repetition operator: `{}`",
                &self.pattern[start..end]
            )),
            Last::Repeat(previous) => Err(format!(
                "invalid nested repetition operator: `{}`",
                &self.pattern[previous..end]
            )),
            Last::Atom => Ok(()),
        }
    }

    /// A counted repetition at `{`: the index after `}`, the minimum and the maximum.
    fn counted(&self) -> Option<(usize, u32, Option<u32>)> {
        let mut i = self.at + 1;
        let number = |i: &mut usize| -> Option<u32> {
            let begin = *i;
            let mut n: u32 = 0;
            while let Some((_, c)) = self.chars.get(*i) {
                let Some(d) = c.to_digit(10) else { break };
                // Saturate: anything past the limit is refused anyway.
                n = n.saturating_mul(10).saturating_add(d).min(100_000);
                *i += 1;
            }
            (*i > begin).then_some(n)
        };
        let min = number(&mut i)?;
        let max = match self.chars.get(i).map(|(_, c)| *c) {
            Some('}') => Some(min),
            Some(',') => {
                i += 1;
                if self.chars.get(i).map(|(_, c)| *c) == Some('}') {
                    None
                } else {
                    Some(number(&mut i)?)
                }
            }
            _ => return None,
        };
        (self.chars.get(i).map(|(_, c)| *c) == Some('}')).then_some((i + 1, min, max))
    }

    /// `(`: a plain group, `(?flags)`, `(?flags:…)`, `(?P<name>…)` or `(?<name>…)`; whether
    /// it opened a group.
    fn group(&mut self, start: usize) -> Result<bool, String> {
        if self.peek(1) != Some('?') {
            self.out.push('(');
            self.at += 1;
            return Ok(true);
        }
        let rest = &self.pattern[start..];
        let named = if rest.starts_with("(?P<") {
            Some(4)
        } else if rest.starts_with("(?<") && !rest.starts_with("(?<=") && !rest.starts_with("(?<!")
        {
            Some(3)
        } else {
            None
        };
        if let Some(prefix) = named {
            let Some(close) = rest.find('>') else {
                return Err(format!("invalid named capture: `{rest}`"));
            };
            let name = &rest[prefix..close];
            if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
                return Err(format!("invalid named capture: `{}`", &rest[..=close]));
            }
            let seen = self.names.entry(name.to_owned()).or_insert(0);
            *seen += 1;
            self.out.push_str("(?P<");
            self.out.push_str(name);
            if *seen > 1 {
                self.out.push('.');
                self.out.push_str(&seen.to_string());
            }
            self.out.push('>');
            let end = start + close + 1;
            while self.offset(self.at) < end {
                self.at += 1;
            }
            return Ok(true);
        }
        // Flags: `(?i)`, `(?i-s:`; Go knows i, m, s and U.
        let mut i = 2;
        let mut negated = false;
        let bytes = rest.as_bytes();
        loop {
            match bytes.get(i) {
                Some(b'i' | b'm' | b's' | b'U') => {}
                Some(b'-') if !negated => negated = true,
                // `(?:` is a plain non-capturing group and `(?)` an empty flag list; a dangling
                // `-` is refused.
                Some(b':' | b')') if bytes[i - 1] != b'-' => break,
                Some(_) => {
                    let end = rest[i..]
                        .chars()
                        .next()
                        .map_or(rest.len(), |c| i + c.len_utf8());
                    return Err(format!(
                        "invalid or unsupported Perl syntax: `{}`",
                        &rest[..end]
                    ));
                }
                None => {
                    return Err(format!("invalid or unsupported Perl syntax: `{rest}`"));
                }
            }
            i += 1;
        }
        // `(?)` sets nothing; Rust would refuse the empty flag list.
        if i > 2 || bytes[i] == b':' {
            self.out.push_str(&rest[..=i]);
        }
        let end = start + i + 1;
        while self.offset(self.at) < end {
            self.at += 1;
        }
        // `(?i)` only sets flags; `(?i:` opens a group.
        Ok(bytes[i] == b':')
    }

    /// The character after a backslash at `self.at`, advancing past both.
    fn escaped_char(&mut self, start: usize) -> Result<char, String> {
        self.at += 1;
        let Some(c) = self.peek(0) else {
            return Err("trailing backslash at end of expression: ``".into());
        };
        self.at += 1;
        let _ = start;
        Ok(c)
    }

    /// A single-character escape's value: `\n`, `\x41`, `\x{263a}`, `\012`, `\.`; `None` for
    /// class escapes (`\d`, `\pL`) and assertions. `self.at` is past the escape's letter.
    fn single_escape(&mut self, c: char, start: usize) -> Result<Option<char>, String> {
        let invalid = |this: &Self| {
            format!(
                "invalid escape sequence: `{}`",
                &this.pattern[start..this.offset(this.at)]
            )
        };
        Ok(Some(match c {
            'a' => '\u{7}',
            'f' => '\u{c}',
            't' => '\t',
            'n' => '\n',
            'r' => '\r',
            'v' => '\u{b}',
            '0'..='7' => {
                // Octal: `\0` or up to three digits; `\1`–`\7` alone would be a backreference.
                if c != '0' && !self.peek(0).is_some_and(|d| d.is_digit(8)) {
                    return Err(invalid(self));
                }
                let mut value = c.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match self.peek(0).and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            self.at += 1;
                        }
                        None => break,
                    }
                }
                char::from_u32(value).ok_or_else(|| invalid(self))?
            }
            'x' => {
                let value = if self.peek(0) == Some('{') {
                    self.at += 1;
                    let mut value: u32 = 0;
                    let mut digits = 0;
                    loop {
                        match self.peek(0) {
                            Some('}') if digits > 0 => {
                                self.at += 1;
                                break;
                            }
                            Some(d) if d.is_ascii_hexdigit() && value <= 0x10_FFFF => {
                                value = value * 16 + d.to_digit(16).unwrap_or(0);
                                digits += 1;
                                self.at += 1;
                            }
                            _ => return Err(invalid(self)),
                        }
                    }
                    value
                } else {
                    // Go reads both characters before checking them.
                    let mut value = 0;
                    let mut valid = true;
                    for _ in 0..2 {
                        let Some(c) = self.peek(0) else {
                            return Err(invalid(self));
                        };
                        self.at += 1;
                        match c.to_digit(16) {
                            Some(d) => value = value * 16 + d,
                            None => valid = false,
                        }
                    }
                    if !valid {
                        return Err(invalid(self));
                    }
                    value
                };
                char::from_u32(value).ok_or_else(|| invalid(self))?
            }
            c if c.is_ascii_punctuation() => c,
            'd' | 'D' | 'w' | 'W' | 's' | 'S' | 'p' | 'P' | 'b' | 'B' | 'A' | 'z' | 'Q' => {
                return Ok(None);
            }
            _ => return Err(invalid(self)),
        }))
    }

    /// A Unicode class escape's body after `\p` or `\P` (`L` or `{Greek}`), copied through
    /// when Rust knows the class too.
    fn unicode_class(&mut self, start: usize) -> Result<String, String> {
        let body = self.unicode_class_text(start)?;
        let bad = || {
            format!(
                "invalid character class range: `{}`",
                &self.pattern[start..self.offset(self.at)]
            )
        };
        let name = body.trim_start_matches('{').trim_end_matches('}');
        let name = name.strip_prefix('^').unwrap_or(name);
        // Go takes category and script names (any case), not Rust's `Script=…` forms.
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || regex::Regex::new(&format!("\\p{{{name}}}")).is_err()
        {
            return Err(bad());
        }
        Ok(body)
    }

    fn unicode_class_text(&mut self, start: usize) -> Result<String, String> {
        let begin = self.at;
        match self.peek(0) {
            Some('{') => {
                while let Some(c) = self.peek(0) {
                    self.at += 1;
                    if c == '}' {
                        return Ok(self.pattern[self.offset(begin)..self.offset(self.at)].into());
                    }
                }
                Err(format!(
                    "invalid character class range: `{}`",
                    &self.pattern[start..]
                ))
            }
            Some(_) => {
                self.at += 1;
                Ok(self.pattern[self.offset(begin)..self.offset(self.at)].into())
            }
            None => Err(format!(
                "invalid character class range: `{}`",
                &self.pattern[start..]
            )),
        }
    }

    /// A backslash outside brackets.
    fn escape(&mut self, start: usize, _in_class: bool) -> Result<(), String> {
        let c = self.escaped_char(start)?;
        match c {
            'd' => self.out.push_str("[0-9]"),
            'D' => self.out.push_str("[^0-9]"),
            'w' => self.out.push_str("[0-9A-Za-z_]"),
            'W' => self.out.push_str("[^0-9A-Za-z_]"),
            's' => self.out.push_str("[\\t\\n\\f\\r ]"),
            'S' => self.out.push_str("[^\\t\\n\\f\\r ]"),
            'b' => self.out.push_str("(?-u:\\b)"),
            'B' => self.out.push_str("(?-u:\\B)"),
            'A' => self.out.push_str("\\A"),
            'z' => self.out.push_str("\\z"),
            'p' | 'P' => {
                let body = self.unicode_class(start)?;
                push_unicode_class(&mut self.out, c, &body);
            }
            'Q' => {
                // Literal text up to `\E` (or the end).
                let rest_start = self.offset(self.at);
                let rest = &self.pattern[rest_start..];
                let (literal, consumed) = match rest.find("\\E") {
                    Some(end) => (&rest[..end], end + 2),
                    None => (rest, rest.len()),
                };
                self.out.push_str(&regex::escape(literal));
                let end = rest_start + consumed;
                while self.offset(self.at) < end {
                    self.at += 1;
                }
            }
            c => {
                if let Some(value) = self.single_escape(c, start)? {
                    push_literal(&mut self.out, value);
                }
            }
        }
        Ok(())
    }

    /// A bracket expression at `[`.
    fn class(&mut self, start: usize) -> Result<(), String> {
        let missing = || format!("missing closing ]: `{}`", &self.pattern[start..]);
        self.at += 1;
        self.out.push('[');
        if self.peek(0) == Some('^') {
            self.out.push('^');
            self.at += 1;
        }
        let mut first = true;
        loop {
            let Some(c) = self.peek(0) else {
                return Err(missing());
            };
            if c == ']' && !first {
                self.at += 1;
                self.out.push(']');
                return Ok(());
            }
            first = false;
            let item_start = self.offset(self.at);
            // POSIX classes pass through (`[:alpha:]`, `[:^digit:]`).
            if c == '[' && self.peek(1) == Some(':') {
                let rest = &self.pattern[item_start..];
                if let Some(end) = rest[2..].find(":]") {
                    let text = &rest[..end + 4];
                    let class = text[2..text.len() - 2].trim_start_matches('^');
                    if !POSIX_CLASSES.contains(&class) {
                        return Err(format!("invalid character class range: `{text}`"));
                    }
                    self.out.push_str(text);
                    let stop = item_start + text.len();
                    while self.offset(self.at) < stop {
                        self.at += 1;
                    }
                    continue;
                }
            }
            let Some(low) = self.class_char(item_start)? else {
                continue;
            };
            if self.peek(0) == Some('-') && self.peek(1).is_some_and(|c| c != ']') {
                self.at += 1;
                let high_start = self.offset(self.at);
                let Some(high) = self.class_char(high_start)? else {
                    return Err(format!(
                        "invalid character class range: `{}`",
                        &self.pattern[item_start..self.offset(self.at)]
                    ));
                };
                if high < low {
                    return Err(format!(
                        "invalid character class range: `{}`",
                        &self.pattern[item_start..self.offset(self.at)]
                    ));
                }
                push_class_char(&mut self.out, low);
                self.out.push('-');
                push_class_char(&mut self.out, high);
            } else {
                push_class_char(&mut self.out, low);
            }
        }
    }

    /// One bracket item: a character (returned), or a class escape (written, `None`).
    fn class_char(&mut self, item_start: usize) -> Result<Option<char>, String> {
        let Some(c) = self.peek(0) else {
            return Err(format!(
                "missing closing ]: `{}`",
                &self.pattern[item_start..]
            ));
        };
        if c != '\\' {
            self.at += 1;
            return Ok(Some(c));
        }
        let e = self.escaped_char(item_start)?;
        let text = match e {
            'd' => "0-9",
            'D' => "[^0-9]",
            'w' => "0-9A-Za-z_",
            'W' => "[^0-9A-Za-z_]",
            's' => "\\t\\n\\f\\r ",
            'S' => "[^\\t\\n\\f\\r ]",
            'p' | 'P' => {
                let body = self.unicode_class(item_start)?;
                push_unicode_class(&mut self.out, e, &body);
                return Ok(None);
            }
            _ => {
                return match self.single_escape(e, item_start)? {
                    Some(value) => Ok(Some(value)),
                    None => Err(format!(
                        "invalid escape sequence: `{}`",
                        &self.pattern[item_start..self.offset(self.at)]
                    )),
                };
            }
        };
        self.out.push_str(text);
        Ok(None)
    }
}

/// Writes `\p…`/`\P…` (`letter`) with `body` (`L` or `{Greek}`); Go's `{^Greek}` negation is
/// written as the opposite letter, which is how Rust spells it.
fn push_unicode_class(out: &mut String, letter: char, body: &str) {
    out.push('\\');
    if let Some(name) = body.strip_prefix("{^") {
        out.push(if letter == 'p' { 'P' } else { 'p' });
        out.push('{');
        out.push_str(name);
    } else {
        out.push(letter);
        out.push_str(body);
    }
}

/// Writes a literal character outside brackets.
fn push_literal(out: &mut String, c: char) {
    let mut buffer = [0_u8; 4];
    out.push_str(&regex::escape(c.encode_utf8(&mut buffer)));
}

/// Writes a literal character inside brackets, escaping what Rust's classes treat specially.
fn push_class_char(out: &mut String, c: char) {
    if matches!(c, '[' | ']' | '\\' | '-' | '^' | '&' | '~') {
        out.push('\\');
        out.push(c);
    } else if c.is_control() {
        use std::fmt::Write as _;
        let _ = write!(out, "\\x{{{:x}}}", c as u32);
    } else {
        out.push(c);
    }
}

// ---- Matching as Go's regexp package does.

/// Go's `FindAll…Index`: successive non-overlapping matches, at most `n` when `n >= 0`; an
/// empty match right where the previous match ended is skipped.
fn find_all(re: &regex::Regex, text: &str, n: i64) -> Vec<(usize, usize)> {
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    let mut found = Vec::new();
    let mut pos = 0;
    let mut previous_end = None;
    while found.len() < limit && pos <= text.len() {
        let Some(m) = re.find_at(text, pos) else {
            break;
        };
        let accept = !(m.is_empty() && previous_end == Some(m.start()));
        if m.end() == pos {
            // An empty match here: step over one character.
            pos += text[pos..].chars().next().map_or(1, char::len_utf8);
        } else {
            pos = m.end();
        }
        previous_end = Some(m.end());
        if accept {
            found.push((m.start(), m.end()));
        }
    }
    found
}

/// Go's `Regexp.Expand` of a replacement template for one match.
fn expand(out: &mut String, template: &str, re: &regex::Regex, caps: &regex::Captures<'_>) {
    let mut rest = template;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        rest = &rest[dollar..];
        if rest.starts_with("$$") {
            out.push('$');
            rest = &rest[2..];
            continue;
        }
        let (name, consumed) = if let Some(braced) = rest.strip_prefix("${") {
            match braced.find('}') {
                Some(end)
                    if end > 0
                        && braced[..end]
                            .chars()
                            .all(|c| c.is_alphanumeric() || c == '_') =>
                {
                    (&braced[..end], end + 3)
                }
                _ => ("", 0),
            }
        } else {
            let len = rest[1..]
                .char_indices()
                .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
                .map_or(rest.len() - 1, |(i, _)| i);
            (&rest[1..=len], len + 1)
        };
        if name.is_empty() {
            // Malformed: the `$` stays as text.
            out.push('$');
            rest = &rest[1..];
            continue;
        }
        rest = &rest[consumed..];
        let number = if name.bytes().all(|b| b.is_ascii_digit())
            && !(name.len() > 1 && name.starts_with('0'))
            && name.len() <= 8
        {
            name.parse::<usize>().ok()
        } else {
            None
        };
        let group = match number {
            Some(i) => caps.get(i),
            // The first group of that name that took part in the match (see `Translator`).
            None => re
                .capture_names()
                .enumerate()
                .filter(|(_, n)| {
                    n.is_some_and(|n| {
                        n == name
                            || n.strip_prefix(name)
                                .is_some_and(|rest| rest.starts_with('.'))
                    })
                })
                .find_map(|(i, _)| caps.get(i)),
        };
        if let Some(group) = group {
            out.push_str(group.as_str());
        }
    }
    out.push_str(rest);
}

fn replace_all(re: &regex::Regex, text: &str, replacement: &str, literal: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (start, end) in find_all(re, text, -1) {
        out.push_str(&text[last..start]);
        if literal {
            out.push_str(replacement);
        } else if let Some(caps) = re.captures_at(text, start) {
            expand(&mut out, replacement, re, &caps);
        }
        last = end;
    }
    out.push_str(&text[last..]);
    out
}

fn split(re: &regex::Regex, text: &str, n: i64) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    if !re.as_str().is_empty() && text.is_empty() {
        return vec![String::new()];
    }
    let mut parts = Vec::new();
    let (mut begin, mut end) = (0, 0);
    for (start, stop) in find_all(re, text, n) {
        if n > 0 && i64::try_from(parts.len()).unwrap_or(i64::MAX) == n - 1 {
            break;
        }
        end = start;
        if stop != 0 {
            parts.push(text[begin..end].to_owned());
        }
        begin = stop;
    }
    if end != text.len() {
        parts.push(text[begin..].to_owned());
    }
    parts
}

/// Go's `regexp.QuoteMeta`.
fn quote_meta(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

// ---- The functions.

type Compiler = fn(&str) -> Result<Rc<regex::Regex>, String>;

fn match_with(call: &Call<'_>, args: &[Value], compile: Compiler) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let re = compile(str_arg(&args[0])?)?;
    Ok(Value::Bool(re.is_match(str_arg(&args[1])?)))
}

fn regex_match(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    // Sprig ignores a bad pattern here: it simply does not match.
    match match_with(call, args, compile) {
        Err(e) if e.starts_with("error parsing regexp") => Ok(Value::Bool(false)),
        other => other,
    }
}

fn must_regex_match(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    match_with(call, args, compile)
}

fn find_with(call: &Call<'_>, args: &[Value], compile: Compiler) -> Result<Value, String> {
    want_args(call, args, 2)?;
    let re = compile(str_arg(&args[0])?)?;
    let text = str_arg(&args[1])?;
    Ok(Value::str(re.find(text).map_or("", |m| m.as_str())))
}

fn regex_find(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    find_with(call, args, must_compile)
}

fn must_regex_find(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    find_with(call, args, compile)
}

fn find_all_with(call: &Call<'_>, args: &[Value], compile: Compiler) -> Result<Value, String> {
    want_args(call, args, 3)?;
    let re = compile(str_arg(&args[0])?)?;
    let text = str_arg(&args[1])?;
    let n = int_arg(&args[2])?;
    let found = find_all(&re, text, n);
    Ok(Value::List(
        Rc::new(
            found
                .into_iter()
                .map(|(s, e)| Value::str(&text[s..e]))
                .collect(),
        ),
        ListKind::String,
    ))
}

fn regex_find_all(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    find_all_with(call, args, must_compile)
}

fn must_regex_find_all(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    find_all_with(call, args, compile)
}

fn replace_with(
    call: &Call<'_>,
    args: &[Value],
    compile: Compiler,
    literal: bool,
) -> Result<Value, String> {
    want_args(call, args, 3)?;
    let re = compile(str_arg(&args[0])?)?;
    let text = str_arg(&args[1])?;
    let replacement = str_arg(&args[2])?;
    Ok(Value::str(replace_all(&re, text, replacement, literal)))
}

fn regex_replace_all(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    replace_with(call, args, must_compile, false)
}

fn must_regex_replace_all(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    replace_with(call, args, compile, false)
}

fn regex_replace_all_literal(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    replace_with(call, args, must_compile, true)
}

fn must_regex_replace_all_literal(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    replace_with(call, args, compile, true)
}

fn split_with(call: &Call<'_>, args: &[Value], compile: Compiler) -> Result<Value, String> {
    want_args(call, args, 3)?;
    let re = compile(str_arg(&args[0])?)?;
    let text = str_arg(&args[1])?;
    let n = int_arg(&args[2])?;
    Ok(Value::string_list(split(&re, text, n)))
}

fn regex_split(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    split_with(call, args, must_compile)
}

fn must_regex_split(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    split_with(call, args, compile)
}

fn regex_quote_meta(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    want_args(call, args, 1)?;
    Ok(Value::str(quote_meta(str_arg(&args[0])?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::funcs::crypto::test_call;

    fn s(text: &str) -> Value {
        Value::str(text)
    }

    fn run(f: crate::template::Function, args: &[Value]) -> String {
        match test_call(f, args) {
            Ok(v) => v.to_string(),
            Err(e) => format!("ERR {e}"),
        }
    }

    #[test]
    #[allow(clippy::too_many_lines)] // One table of Helm's answers.
    fn behaves_as_sprig() {
        let n = Value::Int;
        for (got, want) in [
            (run(regex_match, &[s("("), s("x")]), "false"),
            (
                run(must_regex_match, &[s("("), s("x")]),
                "ERR error parsing regexp: missing closing ): `(`",
            ),
            (
                run(regex_find, &[s("("), s("x")]),
                "ERR regexp: Compile(`(`): error parsing regexp: missing closing ): `(`",
            ),
            (
                run(regex_find_all, &[s("a*"), s("baaab"), n(-1)]),
                "[ aaa ]",
            ),
            (run(regex_find_all, &[s("a*"), s("baaab"), n(2)]), "[ aaa]"),
            (run(regex_find_all, &[s("a*"), s("baaab"), n(0)]), "[]"),
            (run(regex_split, &[s("a*"), s("baaab"), n(-1)]), "[b b]"),
            (run(regex_split, &[s(","), s("a,b,c"), n(2)]), "[a b,c]"),
            (run(regex_split, &[s("x*"), s("abc"), n(-1)]), "[a b c]"),
            (run(regex_split, &[s(""), s("abc"), n(-1)]), "[a b c]"),
            (
                run(
                    regex_replace_all,
                    &[s("a(x*)b"), s("-ab-axxb-"), s("${1}W")],
                ),
                "-W-xxW-",
            ),
            (
                run(regex_replace_all, &[s("a(x*)b"), s("-ab-axxb-"), s("$1W")]),
                "---",
            ),
            (
                run(
                    regex_replace_all,
                    &[s("(?P<n>x+)"), s("axxb"), s("[$n][$$][$2][$]")],
                ),
                "a[xx][$][][$]b",
            ),
            (
                run(
                    regex_replace_all_literal,
                    &[s("a(x*)b"), s("-ab-axxb-"), s("${1}")],
                ),
                "-${1}-${1}-",
            ),
            (
                run(regex_quote_meta, &[s("a.b*c[d]{e}$^|\\")]),
                "a\\.b\\*c\\[d\\]\\{e\\}\\$\\^\\|\\\\",
            ),
            (run(regex_match, &[s("\\d"), s("٣")]), "false"),
            (run(regex_match, &[s("\\w"), s("é")]), "false"),
            (run(regex_match, &[s("\\s"), s("\u{a0}")]), "false"),
            (run(regex_match, &[s("\\bé"), s("é")]), "false"),
            (run(regex_match, &[s("[\\d]"), s("٣")]), "false"),
            (run(regex_match, &[s("^$"), s("")]), "true"),
            (run(regex_match, &[s("[[:alpha:]]+"), s("abc")]), "true"),
            (run(regex_match, &[s("\\pL"), s("é")]), "true"),
            (run(regex_match, &[s("(?i)É"), s("é")]), "true"),
            (run(regex_find, &[s("b+"), s("abbbc")]), "bbb"),
            (run(regex_find, &[s("."), s("é")]), "é"),
            (run(regex_match, &[s("[a[]"), s("[")]), "true"),
            (run(regex_match, &[s("[&&]"), s("&")]), "true"),
            (run(regex_match, &[s("a{2}{"), s("aa{")]), "true"),
            (run(regex_find, &[s("\\Qa.b\\E+"), s("xa.bbb")]), "a.bbb"),
            (run(regex_find, &[s("(?s)a.b"), s("a\nb")]), "a\nb"),
            (run(regex_find, &[s("a.b"), s("a\nb")]), ""),
            (
                run(regex_find_all, &[s("(?m)^\\w+$"), s("ab\ncd"), n(-1)]),
                "[ab cd]",
            ),
            (run(regex_find, &[s("a+?"), s("aaa")]), "a"),
            (run(regex_find, &[s("(?U)a+"), s("aaa")]), "a"),
            (run(regex_find, &[s("[[:^alpha:]]+"), s("ab12cd")]), "12"),
            (run(regex_find, &[s("\\pN+"), s("ab١٢cd")]), "١٢"),
            (run(regex_find, &[s("\\p{Greek}+"), s("abαβ")]), "αβ"),
            (run(regex_find, &[s("[^\\n]+"), s("ab\ncd")]), "ab"),
            (run(regex_find, &[s("\\x{263a}"), s("x☺")]), "☺"),
            (run(regex_find, &[s("\\141"), s("xa")]), "a"),
            (run(regex_find, &[s("\\x41"), s("xA")]), "A"),
            (run(regex_find, &[s("[a-c\\d]+"), s("xab12")]), "ab12"),
            (run(regex_find, &[s("[\\w-]+"), s("a-b c")]), "a-b"),
            (
                run(
                    regex_replace_all,
                    &[s("(\\w+)@(\\w+)"), s("me@host you@there"), s("$2.$1")],
                ),
                "host.me there.you",
            ),
            (
                run(
                    regex_replace_all,
                    &[
                        s("(?P<first>\\w+) (?P<last>\\w+)"),
                        s("John Smith"),
                        s("${last}, ${first}"),
                    ],
                ),
                "Smith, John",
            ),
            (
                run(regex_replace_all, &[s("a"), s("aaa"), s("${")]),
                "${${${",
            ),
            (
                run(regex_replace_all, &[s("a"), s("aaa"), s("$}")]),
                "$}$}$}",
            ),
            (
                run(regex_replace_all, &[s("(a)"), s("aaa"), s("${1 }")]),
                "${1 }${1 }${1 }",
            ),
            (
                run(regex_replace_all, &[s(""), s("abc"), s("-")]),
                "-a-b-c-",
            ),
            (
                run(regex_replace_all, &[s("x*"), s("abc"), s("-")]),
                "-a-b-c-",
            ),
            (
                run(regex_split, &[s("\\s+"), s("  a b  c "), n(-1)]),
                "[ a b c ]",
            ),
            (run(regex_split, &[s(""), s(""), n(-1)]), "[]"),
            (run(regex_split, &[s("a"), s(""), n(-1)]), "[]"),
            (
                run(must_regex_match, &[s("(?P<n>a)(?P<n>b)"), s("ab")]),
                "true",
            ),
            (
                run(
                    regex_replace_all,
                    &[s("(?P<n>a)|(?P<n>b)"), s("ab"), s("<$n>")],
                ),
                "<a><b>",
            ),
            (run(must_regex_match, &[s("()"), s("")]), "true"),
            (run(must_regex_match, &[s("(|a)"), s("")]), "true"),
            (run(must_regex_match, &[s("a{,5}"), s("a{,5}")]), "true"),
            (run(must_regex_match, &[s("x{1000}"), s("x")]), "false"),
            (run(regex_find, &[s("\\bfoo\\b"), s("a foo b")]), "foo"),
            (run(regex_find, &[s("\\Bo"), s("foo")]), "o"),
            (run(regex_find, &[s("\\Aab"), s("abab")]), "ab"),
            (run(regex_find, &[s("ab\\z"), s("abab")]), "ab"),
            (run(regex_quote_meta, &[s("é-_")]), "é-_"),
            (run(must_regex_match, &[s("\\p{greek}"), s("α")]), "true"),
            (run(must_regex_match, &[s("\\p{Letter}"), s("α")]), "true"),
            (run(must_regex_match, &[s("\\p{^Greek}"), s("a")]), "true"),
            (run(must_regex_match, &[s("\\p{Any}"), s("a")]), "true"),
            (
                run(must_regex_match, &[s("[\\p{Greek}\\d]"), s("1")]),
                "true",
            ),
            (run(must_regex_match, &[s("\\p{Common}"), s("1")]), "true"),
        ] {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn parse_errors_are_gos() {
        for (pattern, want) in [
            ("a**", "invalid nested repetition operator: `**`"),
            ("[a", "missing closing ]: `[a`"),
            ("a)", "unexpected ): `a)`"),
            ("\\y", "invalid escape sequence: `\\y`"),
            ("a{1001}", "invalid repeat count: `{1001}`"),
            ("*", "missing argument to repetition operator: `*`"),
            ("[z-a]", "invalid character class range: `z-a`"),
            ("(?<n", "invalid named capture: `(?<n`"),
            ("(?z)", "invalid or unsupported Perl syntax: `(?z`"),
            ("\\8", "invalid escape sequence: `\\8`"),
            ("a(?=b)", "invalid or unsupported Perl syntax: `(?=`"),
            ("a{2,1}", "invalid repeat count: `{2,1}`"),
            ("a{1,1001}", "invalid repeat count: `{1,1001}`"),
            ("(?i", "invalid or unsupported Perl syntax: `(?i`"),
            ("\\", "trailing backslash at end of expression: ``"),
            ("x{2}{3}", "invalid nested repetition operator: `{2}{3}`"),
            ("(?P<>a)", "invalid named capture: `(?P<>`"),
            ("(?P<a-b>a)", "invalid named capture: `(?P<a-b>`"),
            ("[[:foo:]]", "invalid character class range: `[:foo:]`"),
            ("\\p{Foo}", "invalid character class range: `\\p{Foo}`"),
            ("a|*", "missing argument to repetition operator: `*`"),
            ("\\p{L&}", "invalid character class range: `\\p{L&}`"),
            (
                "\\p{Latin_Extended}",
                "invalid character class range: `\\p{Latin_Extended}`",
            ),
            (
                "\\p{Script=Greek}",
                "invalid character class range: `\\p{Script=Greek}`",
            ),
            ("\\p{Greek", "invalid character class range: `\\p{Greek`"),
        ] {
            assert_eq!(
                run(must_regex_match, &[s(pattern), s("x")]),
                format!("ERR error parsing regexp: {want}"),
                "{pattern}"
            );
        }
    }

    /// Random patterns, texts and replacements with the answers Helm v4.2.3 gave (results as
    /// JSON; an empty result stands for Go's nil slice, which `toJson` writes as `null`).
    #[test]
    #[allow(clippy::too_many_lines)] // One table of Helm's answers.
    fn random_cases_match_helm() {
        let mut map = crate::template::FuncMap::new();
        register(&mut map);
        for (name, args, want) in [
            (
                "mustRegexReplaceAll",
                "[\"(?:ab){2}[ab](?:ab)+?[\\\\w-]{1,2}\", \"\\u00c9\\u00e9 a1_b-c\", \"${g}x\"]",
                "\"\u{00c9}\u{00e9} a1_b-c\"",
            ),
            (
                "mustRegexSplit",
                "[\"\\\\d{1,2}\", \"aaa bbb\", 1]",
                "[\"aaa bbb\"]",
            ),
            (
                "mustRegexFindAll",
                "[\"$*?\\\\w+\\\\d+\", \"x\", 1]",
                "null",
            ),
            (
                "mustRegexReplaceAll",
                "[\"[[:digit:]]{1,2}\", \"x\", \"[${1}]\"]",
                "\"x\"",
            ),
            (
                "mustRegexSplit",
                "[\"\\u00e9+\", \"ab\\nab\", 2]",
                "[\"ab\\nab\"]",
            ),
            ("mustRegexSplit", "[\"[a-c]+\", \"ab\\nab\", 0]", "null"),
            ("mustRegexFind", "[\"(?:ab)?\\\\b\", \"ab\\nab\"]", "\"ab\""),
            (
                "mustRegexFindAll",
                "[\"(?:ab){2}(?P<g>a)(?i)A\", \"x\", -1]",
                "null",
            ),
            (
                "mustRegexFindAll",
                "[\"\\u00e9\\\\d+?(?:ab)\", \"\\u00c9\\u00e9 a1_b-c\", -1]",
                "null",
            ),
            (
                "mustRegexReplaceAll",
                "[\"\\\\.+\", \"foo bar\\nbaz 42\", \"$g$$\"]",
                "\"foo bar\\nbaz 42\"",
            ),
            (
                "mustRegexMatch",
                "[\"[ab]\", \"\\u00c9\\u00e9 a1_b-c\"]",
                "true",
            ),
            (
                "mustRegexMatch",
                "[\"x{1,2}c[\\\\w-]{1,2}\", \"foo bar\\nbaz 42\"]",
                "false",
            ),
            (
                "mustRegexReplaceAll",
                "[\"\\u00e9x?\", \"foo bar\\nbaz 42\", \"<$0>\"]",
                "\"foo bar\\nbaz 42\"",
            ),
            ("mustRegexSplit", "[\"\\\\d+\", \"\", -1]", "[\"\"]"),
            (
                "mustRegexReplaceAll",
                "[\"[a-c]*(a|b)\", \"ab\\nab\", \"<$0>\"]",
                "\"\\u003cab\\u003e\\n\\u003cab\\u003e\"",
            ),
            ("mustRegexMatch", "[\"\\\\pL?\", \"\"]", "true"),
            (
                "mustRegexReplaceAll",
                "[\"[a-c]+\\\\b+[^a]{2}\", \"aaa bbb\", \"[${1}]\"]",
                "\"[]bb\"",
            ),
            (
                "mustRegexReplaceAll",
                "[\"\\\\b[a-c]*\\\\.{2}\", \"\", \"$g$$\"]",
                "\"\"",
            ),
            (
                "mustRegexReplaceAll",
                "[\"[\\\\w-]{2}(?i)A[ab](?:ab)\", \"abc aab 12 x.y\", \"${g}x\"]",
                "\"abc aab 12 x.y\"",
            ),
            (
                "mustRegexFind",
                "[\"${2}[^a]{2}\\\\d\\\\s\", \"ab\\nab\"]",
                "\"\"",
            ),
            ("mustRegexFindAll", "[\"[^a](a|b)+\", \"x\", 0]", "null"),
            (
                "mustRegexSplit",
                "[\"\\u00e9\", \"foo bar\\nbaz 42\", 1]",
                "[\"foo bar\\nbaz 42\"]",
            ),
            ("mustRegexMatch", "[\"\\\\d{2}\\\\w[ab]?\", \"x\"]", "false"),
            (
                "mustRegexReplaceAll",
                "[\"c[ab]{1,2}\", \"aaa bbb\", \"${g}x\"]",
                "\"aaa bbb\"",
            ),
            ("mustRegexFind", "[\"[^a]{2}x+?${1,2}\", \"x\"]", "\"\""),
            (
                "mustRegexFindAll",
                "[\"(?\\\\x4a+\", \"A]b\", -1]",
                "ERR error parsing regexp: invalid or unsupported Perl syntax: `(?\\`",
            ),
            (
                "mustRegexMatch",
                "[\"\\\\<[a--b]\\\\Z{2}\", \"foo bar\\nbaz 42\"]",
                "ERR error parsing regexp: invalid character class range: `a--`",
            ),
            (
                "mustRegexMatch",
                "[\"\\\\PL(?P<x>\", \"aaa bbb\"]",
                "ERR error parsing regexp: missing closing ): `\\PL(?P<x>`",
            ),
            (
                "mustRegexReplaceAll",
                "[\"\\\\/\\\\PL(?\", \"A]b\", \"<$0>\"]",
                "ERR error parsing regexp: invalid or unsupported Perl syntax: `(?`",
            ),
            (
                "mustRegexFindAll",
                "[\"[a-][&&][a--b]\", \"A]b\", -1]",
                "ERR error parsing regexp: invalid character class range: `a--`",
            ),
            (
                "mustRegexMatch",
                "[\"(\", \"A]b\"]",
                "ERR error parsing regexp: missing closing ): `(`",
            ),
            (
                "mustRegexReplaceAll",
                "[\"(?\", \"abc aab 12 x.y\", \"<$0>\"]",
                "ERR error parsing regexp: invalid or unsupported Perl syntax: `(?`",
            ),
            (
                "mustRegexMatch",
                "[\"#)\", \"\"]",
                "ERR error parsing regexp: unexpected ): `#)`",
            ),
            (
                "mustRegexFindAll",
                "[\"*\\\\\\\\0\\\\n\", \"foo bar\\nbaz 42\", -1]",
                "ERR error parsing regexp: missing argument to repetition operator: `*`",
            ),
            (
                "mustRegexReplaceAll",
                "[\"\\\\Qa*\\\\E[b(?i-s:x)\", \"\", \"<$0>\"]",
                "ERR error parsing regexp: missing closing ]: `[b(?i-s:x)`",
            ),
            (
                "mustRegexFindAll",
                "[\"(?x)\", \"aaa bbb\", -1]",
                "ERR error parsing regexp: invalid or unsupported Perl syntax: `(?x`",
            ),
            (
                "mustRegexFindAll",
                "[\"+\\\\Z(?-i)[]a]\", \"a&b~c-d\", -1]",
                "ERR error parsing regexp: missing argument to repetition operator: `+`",
            ),
            (
                "mustRegexFindAll",
                "[\"(?\\\\Qa*\\\\E\", \"aaa bbb\", -1]",
                "ERR error parsing regexp: invalid or unsupported Perl syntax: `(?\\`",
            ),
            (
                "mustRegexMatch",
                "[\"\\\\x{41}(?i-s:x)[\", \"\"]",
                "ERR error parsing regexp: missing closing ]: `[`",
            ),
            (
                "mustRegexReplaceAll",
                "[\"[a--b]\", \"A]b\", \"<$0>\"]",
                "ERR error parsing regexp: invalid character class range: `a--`",
            ),
            (
                "mustRegexMatch",
                "[\"&&\\\\8\\\\t(?i)\", \"abc aab 12 x.y\"]",
                "ERR error parsing regexp: invalid escape sequence: `\\8`",
            ),
            (
                "mustRegexFindAll",
                "[\"+[&&]\", \"abc aab 12 x.y\", -1]",
                "ERR error parsing regexp: missing argument to repetition operator: `+`",
            ),
            (
                "mustRegexMatch",
                "[\"(#\", \"foo bar\\nbaz 42\"]",
                "ERR error parsing regexp: missing closing ): `(#`",
            ),
            (
                "mustRegexFindAll",
                "[\"\\\\e]\", \"a&b~c-d\", -1]",
                "ERR error parsing regexp: invalid escape sequence: `\\e`",
            ),
            (
                "mustRegexFindAll",
                "[\"(?\", \"\", -1]",
                "ERR error parsing regexp: invalid or unsupported Perl syntax: `(?`",
            ),
            (
                "mustRegexReplaceAll",
                "[\"{2}\", \"foo bar\\nbaz 42\", \"<$0>\"]",
                "ERR error parsing regexp: missing argument to repetition operator: `{2}`",
            ),
            (
                "mustRegexReplaceAll",
                "[\"(?x)[a&&b]]\", \"\", \"<$0>\"]",
                "ERR error parsing regexp: invalid or unsupported Perl syntax: `(?x`",
            ),
            (
                "mustRegexReplaceAll",
                "[\"?][:alpha:] \", \"foo bar\\nbaz 42\", \"<$0>\"]",
                "ERR error parsing regexp: missing argument to repetition operator: `?`",
            ),
            (
                "mustRegexMatch",
                "[\"b(?:\", \"A]b\"]",
                "ERR error parsing regexp: missing closing ): `b(?:`",
            ),
            (
                "mustRegexFindAll",
                "[\"(?s:.)(\", \"foo bar\\nbaz 42\", -1]",
                "ERR error parsing regexp: missing closing ): `(?s:.)(`",
            ),
            ("mustRegexMatch", "[\"\\\\t\", \"a&b~c-d\"]", "false"),
            (
                "mustRegexMatch",
                "[\"\\\\0 +\\\\/\", \"foo bar\\nbaz 42\"]",
                "false",
            ),
            (
                "mustRegexMatch",
                "[\"[-a][a&&b](?i)\", \"abc aab 12 x.y\"]",
                "true",
            ),
            (
                "mustRegexFindAll",
                "[\"(?-i)[^]a]+\\\\0\", \"foo bar\\nbaz 42\", -1]",
                "null",
            ),
            (
                "mustRegexFindAll",
                "[\"a\\\\n\\\\/[&&]\", \"abc aab 12 x.y\", -1]",
                "null",
            ),
            (
                "mustRegexReplaceAll",
                "[\"\\\\x{41}a[:alpha:]\", \"A]b\", \"<$0>\"]",
                "\"A]b\"",
            ),
            ("mustRegexMatch", "[\"\\\\/\", \"a&b~c-d\"]", "false"),
            (
                "mustRegexReplaceAll",
                "[\"[~~]}\\\\n\", \"abc aab 12 x.y\", \"<$0>\"]",
                "\"abc aab 12 x.y\"",
            ),
            (
                "mustRegexFindAll",
                "[\"[:alpha:][]a][\\\\d-z]\", \"abc aab 12 x.y\", -1]",
                "null",
            ),
            (
                "mustRegexFindAll",
                "[\"{,3}\\\\PL*\", \"a&b~c-d\", -1]",
                "null",
            ),
            (
                "mustRegexFindAll",
                "[\"(?-i)]\\\\x{41}}\", \"foo bar\\nbaz 42\", -1]",
                "null",
            ),
            ("mustRegexFindAll", "[\"\\\\n\\\\-\", \"A]b\", -1]", "null"),
            (
                "mustRegexMatch",
                "[\"[]a]\\\\x{41}\\\\t\", \"A]b\"]",
                "false",
            ),
            (
                "mustRegexFindAll",
                "[\"]\", \"foo bar\\nbaz 42\", -1]",
                "null",
            ),
            ("mustRegexFindAll", "[\"{{,3}[a-]\", \"\", -1]", "null"),
            (
                "mustRegexReplaceAll",
                "[\"\\\\x4[~~](\\\\t\", \"a&b~c-d\", \"<$0>\"]",
                "ERR error parsing regexp: invalid escape sequence: `\\x4[`",
            ),
            (
                "mustRegexReplaceAll",
                "[\"\\\\Z\", \"foo bar\\nbaz 42\", \"<$0>\"]",
                "ERR error parsing regexp: invalid escape sequence: `\\Z`",
            ),
            (
                "mustRegexReplaceAll",
                "[\"[a--b]]\", \"A]b\", \"<$0>\"]",
                "ERR error parsing regexp: invalid character class range: `a--`",
            ),
            (
                "mustRegexReplaceAll",
                "[\"\\\\Z\", \"aaa bbb\", \"<$0>\"]",
                "ERR error parsing regexp: invalid escape sequence: `\\Z`",
            ),
            (
                "mustRegexFindAll",
                "[\"(?)\", \"a&b~c-d\", -1]",
                "[\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\"]",
            ),
        ] {
            let args: Vec<serde_json::Value> = serde_json::from_str(args).unwrap();
            let values: Vec<Value> = args
                .iter()
                .map(|a| match a.as_i64() {
                    Some(n) => Value::Int(n),
                    None => Value::from_json(a),
                })
                .collect();
            let got = match test_call(map[name], &values) {
                Ok(v) => v.to_json(),
                Err(e) => serde_json::Value::String(format!("ERR {e}")),
            };
            let want: serde_json::Value = if want.starts_with("ERR ") {
                serde_json::Value::String(want.to_owned())
            } else {
                serde_json::from_str(want).unwrap()
            };
            let nil_slice = want.is_null() && got.as_array().is_some_and(Vec::is_empty);
            assert!(got == want || nil_slice, "{name} {args:?}: {got} != {want}");
        }
    }

    #[test]
    fn odd_patterns_never_panic() {
        for pattern in crate::funcs::crypto::random_texts(
            "()[]{}*+?|^$.\\-:=<>!P0123456789aAxpQEdwsbz,é☺",
            5000,
            12,
        ) {
            if let Ok(re) = compile(&pattern) {
                let _ = replace_all(&re, "aé☺ b\nc", "$1${x}$$", false);
                let _ = split(&re, "aé☺ b", -1);
            }
        }
    }
}
