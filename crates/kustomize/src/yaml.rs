//! YAML in and out, the way kustomize reads and prints it.
//!
//! Reading follows kyaml (YAML 1.2 core schema: only `true`/`false` are booleans, `0777` is
//! octal). Printing follows `kubectl kustomize`, which renders each object through JSON and
//! go-yaml v2: keys sorted (digits compared as numbers), block style, sequences not indented
//! under their key, strings quoted only when they would read back as something else, plain
//! and quoted scalars folded past column 80, multi-line strings as literal blocks.

use serde_json::{Map, Number, Value};

/// Parses every document of a YAML stream into JSON values (empty documents skipped).
///
/// The parser's resource budget is raised from serde-saphyr's defaults (1,024 documents,
/// 250,000 nodes), which real manifests exceed — a rendered fleet or a CRD bundle easily holds
/// more — to bounds sized by the artifact limits instead; anchors and aliases keep the
/// defaults' protection against expansion bombs.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, YamlError> {
    parse_documents_located(text)
}

/// Why a YAML stream did not parse: the parser's message (which quotes the offending lines)
/// and, apart from it, where — for callers that must not show the text, such as a document
/// holding substituted secret values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YamlError {
    /// The parser's message, with an excerpt of the input.
    pub message: String,
    /// The 1-based line of the error, when known.
    pub line: Option<u64>,
    /// The 1-based column of the error, when known.
    pub column: Option<u64>,
}

impl std::fmt::Display for YamlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for YamlError {}

/// [`parse_documents`], for callers that read the error's location apart from its message.
pub fn parse_documents_located(text: &str) -> Result<Vec<Value>, YamlError> {
    let options = serde_saphyr::options! {
        strict_booleans: true,
        legacy_octal_numbers: true,
        // Comments carry no data; emitting them would cap how many may sit before a value (the
        // parser buffers 96), and real files have longer commented-out blocks.
        emit_comments: false,
        budget: serde_saphyr::budget! {
            max_documents: 1_000_000,
            max_nodes: 50_000_000,
            max_events: 200_000_000,
            max_depth: 256,
            max_total_scalar_bytes: 1024 * 1024 * 1024,
        },
    };
    serde_saphyr::from_multiple_with_options::<Value>(text, options)
        .map(|documents| documents.into_iter().filter(|d| !d.is_null()).collect())
        .map_err(|error| {
            let location = error.location().filter(|l| l.line() > 0);
            YamlError {
                // The user-facing wording (no parser-configuration advice), with the excerpt.
                message: error.render_with_formatter(&serde_saphyr::UserMessageFormatter),
                line: location.map(|l| l.line()),
                column: location.map(|l| l.column()),
            }
        })
}

/// Prints objects as a multi-document YAML stream, as `kubectl kustomize` does.
pub fn to_yaml(objects: &[Value]) -> String {
    let mut out = String::new();
    for (index, object) in objects.iter().enumerate() {
        if index > 0 {
            out.push_str("---\n");
        }
        out.push_str(&to_yaml_document(object));
    }
    out
}

/// Prints one value as a YAML document (no `---` marker).
pub fn to_yaml_document(value: &Value) -> String {
    emit_document(value, true)
}

/// Prints one value as a YAML document keeping map keys in insertion order, as kyaml
/// prints the build annotations (`config.kubernetes.io/origin`).
pub(crate) fn to_yaml_document_in_order(value: &Value) -> String {
    emit_document(value, false)
}

fn emit_document(value: &Value, sort_keys: bool) -> String {
    let mut emitter = Emitter {
        out: String::new(),
        column: 0,
        sort_keys,
    };
    match value {
        Value::Object(map) if !map.is_empty() => emitter.mapping(map, 0),
        Value::Array(items) if !items.is_empty() => emitter.sequence(items, 0),
        other => {
            emitter.inline(other, 0, false);
            emitter.newline();
        }
    }
    emitter.out
}

struct Emitter {
    out: String,
    column: usize,
    /// Sort map keys as go-yaml v2 does (else keep insertion order).
    sort_keys: bool,
}

const BEST_WIDTH: usize = 80;

impl Emitter {
    fn write(&mut self, text: &str) {
        self.out.push_str(text);
        self.column += text.chars().count();
    }

    fn write_char(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn newline(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    fn pad(&mut self, indent: usize) {
        for _ in 0..indent {
            self.out.push(' ');
        }
        self.column = indent;
    }

    /// A block mapping whose keys sit at `indent`; the cursor is already at `indent`.
    fn mapping(&mut self, map: &Map<String, Value>, indent: usize) {
        let mut keys: Vec<&String> = map.keys().collect();
        if self.sort_keys {
            keys.sort_by(|a, b| natural_cmp(a, b));
        }
        for (index, key) in keys.into_iter().enumerate() {
            if index > 0 {
                self.pad(indent);
            }
            self.scalar_string(key, indent, true);
            self.write_char(':');
            self.value_after_key(&map[key.as_str()], indent);
        }
    }

    fn value_after_key(&mut self, value: &Value, indent: usize) {
        match value {
            Value::Object(child) if !child.is_empty() => {
                self.newline();
                self.pad(indent + 2);
                self.mapping(child, indent + 2);
            }
            Value::Array(items) if !items.is_empty() => {
                self.newline();
                self.pad(indent);
                self.sequence(items, indent);
            }
            other => {
                self.write_char(' ');
                self.inline(other, indent + 2, false);
                self.end_line();
            }
        }
    }

    /// A block sequence whose dashes sit at `indent`; the cursor is already at `indent`.
    fn sequence(&mut self, items: &[Value], indent: usize) {
        for (index, item) in items.iter().enumerate() {
            if index > 0 {
                self.pad(indent);
            }
            self.write("- ");
            match item {
                Value::Object(map) if !map.is_empty() => self.mapping(map, indent + 2),
                Value::Array(inner) if !inner.is_empty() => self.sequence(inner, indent + 2),
                other => {
                    self.inline(other, indent + 2, false);
                    self.end_line();
                }
            }
        }
    }

    fn end_line(&mut self) {
        if self.column != 0 {
            self.newline();
        }
    }

    fn inline(&mut self, value: &Value, indent: usize, key: bool) {
        match value {
            Value::Null => self.write("null"),
            Value::Bool(b) => self.write(if *b { "true" } else { "false" }),
            Value::Number(n) => self.write(&format_number(n)),
            Value::String(s) => self.scalar_string(s, indent, key),
            Value::Object(_) => self.write("{}"),
            Value::Array(_) => self.write("[]"),
        }
    }

    fn scalar_string(&mut self, s: &str, indent: usize, key: bool) {
        let analysis = analyze(s);
        let plain_requested = !s.contains('\n') && resolves_to_string(s) && !is_base60_float(s);
        let style = if s.contains('\n') && !key {
            if analysis.block_allowed {
                Style::Literal
            } else {
                Style::Double
            }
        } else if plain_requested {
            if !analysis.block_plain_allowed || (s.is_empty() && key) {
                if analysis.single_quoted_allowed {
                    Style::Single
                } else {
                    Style::Double
                }
            } else {
                Style::Plain
            }
        } else {
            Style::Double
        };
        let allow_breaks = !key;
        match style {
            Style::Plain => self.write_plain(s, indent, allow_breaks),
            Style::Single => self.write_single(s, indent, allow_breaks),
            Style::Double => self.write_double(s, indent, allow_breaks),
            Style::Literal => self.write_literal(s, indent),
        }
    }

    fn fold(&mut self, indent: usize) {
        self.newline();
        self.pad(indent);
    }

    fn write_plain(&mut self, s: &str, indent: usize, allow_breaks: bool) {
        let chars: Vec<char> = s.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                let next_space = chars.get(i + 1) == Some(&' ');
                if allow_breaks && !spaces && self.column > BEST_WIDTH && !next_space {
                    self.fold(indent);
                } else {
                    self.write_char(c);
                }
                spaces = true;
            } else {
                self.write_char(c);
                spaces = false;
            }
        }
    }

    fn write_single(&mut self, s: &str, indent: usize, allow_breaks: bool) {
        let chars: Vec<char> = s.chars().collect();
        self.write_char('\'');
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                let next_space = chars.get(i + 1) == Some(&' ');
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i != 0
                    && i + 1 != chars.len()
                    && !next_space
                {
                    self.fold(indent);
                } else {
                    self.write_char(c);
                }
                spaces = true;
            } else {
                if c == '\'' {
                    self.write_char('\'');
                }
                self.write_char(c);
                spaces = false;
            }
        }
        self.write_char('\'');
    }

    fn write_double(&mut self, s: &str, indent: usize, allow_breaks: bool) {
        let chars: Vec<char> = s.chars().collect();
        self.write_char('"');
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if !is_printable(c) || c == '\u{feff}' || is_break(c) || c == '"' || c == '\\' {
                self.write_char('\\');
                match c {
                    '\0' => self.write_char('0'),
                    '\u{7}' => self.write_char('a'),
                    '\u{8}' => self.write_char('b'),
                    '\t' => self.write_char('t'),
                    '\n' => self.write_char('n'),
                    '\u{b}' => self.write_char('v'),
                    '\u{c}' => self.write_char('f'),
                    '\r' => self.write_char('r'),
                    '\u{1b}' => self.write_char('e'),
                    '"' => self.write_char('"'),
                    '\\' => self.write_char('\\'),
                    '\u{85}' => self.write_char('N'),
                    '\u{a0}' => self.write_char('_'),
                    '\u{2028}' => self.write_char('L'),
                    '\u{2029}' => self.write_char('P'),
                    other => {
                        let code = other as u32;
                        if code <= 0xff {
                            self.write(&format!("x{code:02X}"));
                        } else if code <= 0xffff {
                            self.write(&format!("u{code:04X}"));
                        } else {
                            self.write(&format!("U{code:08X}"));
                        }
                    }
                }
                spaces = false;
            } else if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i != 0
                    && i + 1 != chars.len()
                {
                    self.fold(indent);
                    if chars.get(i + 1) == Some(&' ') {
                        self.write_char('\\');
                    }
                } else {
                    self.write_char(c);
                }
                spaces = true;
            } else {
                self.write_char(c);
                spaces = false;
            }
        }
        self.write_char('"');
    }

    fn write_literal(&mut self, s: &str, indent: usize) {
        self.write_char('|');
        if s.starts_with(' ') || s.starts_with('\n') {
            self.write_char('2');
        }
        let chomp = if !s.ends_with('\n') {
            Some('-')
        } else if s == "\n" || s.ends_with("\n\n") {
            Some('+')
        } else {
            None
        };
        if let Some(c) = chomp {
            self.write_char(c);
        }
        self.newline();
        let mut breaks = true;
        for c in s.chars() {
            if c == '\n' {
                self.newline();
                breaks = true;
            } else {
                if breaks {
                    self.pad(indent);
                    breaks = false;
                }
                self.write_char(c);
            }
        }
    }
}

enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

#[derive(Debug)]
struct Analysis {
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_blankz(c: Option<char>) -> bool {
    matches!(c, None | Some(' ' | '\t' | '\0')) || c.is_some_and(is_break)
}

fn is_printable(c: char) -> bool {
    let code = c as u32;
    code == 0x0a
        || (0x20..=0x7e).contains(&code)
        || code == 0x85
        || (0xa0..=0xd7ff).contains(&code)
        || ((0xe000..=0xfffd).contains(&code) && code != 0xfeff)
        || (0x1_0000..=0x10_ffff).contains(&code)
}

/// libyaml's scalar analysis, reduced to what block context needs.
fn analyze(s: &str) -> Analysis {
    if s.is_empty() {
        return Analysis {
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: false,
        };
    }
    let chars: Vec<char> = s.chars().collect();
    let mut block_indicators = s.starts_with("---") || s.starts_with("...");
    let mut special = false;
    let mut line_breaks = false;
    let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) =
        (false, false, false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut previous_space, mut previous_break) = (false, false);
    let mut preceded_by_whitespace = true;
    for (i, &c) in chars.iter().enumerate() {
        let followed_by_whitespace = is_blankz(chars.get(i + 1).copied());
        let last = i + 1 == chars.len();
        if i == 0 {
            if "#,[]{}&*!|>'\"%@`".contains(c) {
                block_indicators = true;
            }
            if (c == '?' || c == ':') && followed_by_whitespace {
                block_indicators = true;
            }
            if c == '-' && followed_by_whitespace {
                block_indicators = true;
            }
        } else {
            if c == ':' && followed_by_whitespace {
                block_indicators = true;
            }
            if c == '#' && preceded_by_whitespace {
                block_indicators = true;
            }
        }
        if !is_printable(c) || c == '\u{feff}' {
            special = true;
        }
        if is_break(c) {
            line_breaks = true;
        }
        if c == ' ' {
            if i == 0 {
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
            if i == 0 {
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
        preceded_by_whitespace = is_blankz(Some(c));
    }
    let mut analysis = Analysis {
        block_plain_allowed: true,
        single_quoted_allowed: true,
        block_allowed: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        analysis.block_plain_allowed = false;
    }
    if trailing_space {
        analysis.block_allowed = false;
    }
    if break_space {
        analysis.block_plain_allowed = false;
        analysis.single_quoted_allowed = false;
    }
    if space_break || special {
        analysis.block_plain_allowed = false;
        analysis.single_quoted_allowed = false;
        analysis.block_allowed = false;
    }
    if line_breaks || block_indicators {
        analysis.block_plain_allowed = false;
    }
    analysis
}

/// Whether go-yaml v2 reads `s`, unquoted, back as a string.
fn resolves_to_string(s: &str) -> bool {
    const SPECIAL: &[&str] = &[
        "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
        "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF",
        ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
        "-.Inf", "-.INF", "<<",
    ];
    if SPECIAL.contains(&s) {
        return false;
    }
    let Some(first) = s.chars().next() else {
        return false;
    };
    match first {
        '.' => !is_dot_float(s),
        '0'..='9' | '+' | '-' => {
            if first.is_ascii_digit() && is_timestamp(s) {
                return false;
            }
            let plain = s.replace('_', "");
            !(is_go_int(&plain) || is_yaml_float(&plain) || is_binary(&plain))
        }
        _ => true,
    }
}

fn is_dot_float(s: &str) -> bool {
    let rest = &s[1..];
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    if mantissa.is_empty() || !mantissa.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    })
}

fn is_timestamp(s: &str) -> bool {
    let bytes = s.as_bytes();
    if bytes.len() < 8 || !bytes[..4].iter().all(u8::is_ascii_digit) || bytes[4] != b'-' {
        return false;
    }
    let rest = &s[5..];
    let mut parts = rest.splitn(2, '-');
    let month = parts.next().unwrap_or("");
    let Some(tail) = parts.next() else {
        return false;
    };
    let day_len = tail.bytes().take_while(u8::is_ascii_digit).count();
    let valid_month = (1..=2).contains(&month.len())
        && month.bytes().all(|b| b.is_ascii_digit())
        && month.parse::<u32>().is_ok_and(|m| (1..=12).contains(&m));
    let valid_day = (1..=2).contains(&day_len)
        && tail[..day_len]
            .parse::<u32>()
            .is_ok_and(|d| (1..=31).contains(&d));
    if !valid_month || !valid_day {
        return false;
    }
    let after = &tail[day_len..];
    after.is_empty() || after.starts_with(['T', 't', ' '])
}

/// Go's `strconv.ParseInt(s, 0, 64)` / `ParseUint` acceptance.
fn is_go_int(s: &str) -> bool {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let negative = s.starts_with('-');
    let (digits, radix) = if let Some(hex) = unsigned
        .strip_prefix("0x")
        .or_else(|| unsigned.strip_prefix("0X"))
    {
        (hex, 16)
    } else if let Some(oct) = unsigned
        .strip_prefix("0o")
        .or_else(|| unsigned.strip_prefix("0O"))
    {
        (oct, 8)
    } else if let Some(bin) = unsigned
        .strip_prefix("0b")
        .or_else(|| unsigned.strip_prefix("0B"))
    {
        (bin, 2)
    } else if unsigned.len() > 1 && unsigned.starts_with('0') {
        (&unsigned[1..], 8)
    } else {
        (unsigned, 10)
    };
    if digits.is_empty() {
        return false;
    }
    match u128::from_str_radix(digits, radix) {
        Ok(value) => {
            if negative {
                value <= 1 << 63
            } else {
                value <= u128::from(u64::MAX)
            }
        }
        Err(_) => false,
    }
}

fn is_yaml_float(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(at) => (&body[..at], Some(&body[at + 1..])),
        None => (body, None),
    };
    let mantissa_ok = if let Some(fraction) = mantissa.strip_prefix('.') {
        !fraction.is_empty() && fraction.bytes().all(|b| b.is_ascii_digit())
    } else {
        let mut parts = mantissa.splitn(2, '.');
        let whole = parts.next().unwrap_or("");
        let fraction = parts.next().unwrap_or("");
        !whole.is_empty()
            && whole.bytes().all(|b| b.is_ascii_digit())
            && fraction.bytes().all(|b| b.is_ascii_digit())
    };
    mantissa_ok
        && exponent.is_none_or(|e| {
            let e = e.strip_prefix(['+', '-']).unwrap_or(e);
            !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
        })
}

fn is_binary(s: &str) -> bool {
    let digits = s
        .strip_prefix("0b")
        .or_else(|| s.strip_prefix("-0b"))
        .unwrap_or("");
    !digits.is_empty() && digits.bytes().all(|b| b == b'0' || b == b'1')
}

fn is_base60_float(s: &str) -> bool {
    // ^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (main, fraction) = match body.find('.') {
        Some(at) => (&body[..at], Some(&body[at + 1..])),
        None => (body, None),
    };
    if fraction.is_some_and(|f| !f.bytes().all(|b| b.is_ascii_digit() || b == b'_')) {
        return false;
    }
    let mut parts = main.split(':');
    let head = parts.next().unwrap_or("");
    if !head.starts_with(|c: char| c.is_ascii_digit())
        || !head.bytes().all(|b| b.is_ascii_digit() || b == b'_')
    {
        return false;
    }
    let mut count = 0;
    for part in parts {
        count += 1;
        let ok = match part.as_bytes() {
            [d] => d.is_ascii_digit(),
            [a, b] => (b'0'..=b'5').contains(a) && b.is_ascii_digit(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    count > 0
}

/// go-yaml v2's map key order: runs of digits compare numerically, letters before others.
pub(crate) fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    if a.is_ascii() && b.is_ascii() {
        natural_cmp_units(a.as_bytes(), b.as_bytes())
    } else {
        let ar: Vec<char> = a.chars().collect();
        let br: Vec<char> = b.chars().collect();
        natural_cmp_units(&ar, &br)
    }
}

/// [`natural_cmp`] over characters (bytes when both keys are ASCII, which is the common case).
fn natural_cmp_units<T: Copy + Into<char> + Ord>(ar: &[T], br: &[T]) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let ch = |units: &[T], i: usize| -> char { units[i].into() };
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            i += 1;
            continue;
        }
        let al = ch(ar, i).is_alphabetic();
        let bl = ch(br, i).is_alphabetic();
        if al && bl {
            return ar[i].cmp(&br[i]);
        }
        if al || bl {
            return if bl {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        // Both non-letters: compare digit runs numerically.
        let mut an = 0u64;
        let mut bn = 0u64;
        let mut ai = i;
        let mut bi = i;
        if ch(ar, i).is_ascii_digit() || ch(br, i).is_ascii_digit() {
            // go-yaml backs up to the start of the digit run
            let mut start = i;
            while start > 0 && ch(ar, start - 1).is_ascii_digit() {
                start -= 1;
            }
            ai = start;
            bi = start;
        }
        while ai < ar.len() && ch(ar, ai).is_ascii_digit() {
            an = an
                .saturating_mul(10)
                .saturating_add(u64::from(ch(ar, ai).to_digit(10).unwrap_or(0)));
            ai += 1;
        }
        while bi < br.len() && ch(br, bi).is_ascii_digit() {
            bn = bn
                .saturating_mul(10)
                .saturating_add(u64::from(ch(br, bi).to_digit(10).unwrap_or(0)));
            bi += 1;
        }
        if an != bn {
            return an.cmp(&bn);
        }
        return ar[i].cmp(&br[i]);
    }
    ar.len().cmp(&br.len())
}

/// Formats a number as JSON-then-go-yaml-v2 does.
fn format_number(n: &Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    if f.fract() == 0.0 && f.abs() < 1e21 {
        // encoding/json prints it without a fraction; go-yaml then reads an integer back
        // when it fits in 64 bits.
        if (-(2f64.powi(63))..2f64.powi(64)).contains(&f) {
            #[allow(clippy::cast_possible_truncation)]
            return if f < 0.0 {
                format!("{}", f as i64)
            } else {
                format!("{}", f as u64)
            };
        }
    }
    go_format_g(f)
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`.
fn go_format_g(f: f64) -> String {
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if !(-4..6).contains(&exponent) {
        return format_e(sign, &digits, exponent);
    }
    // %f
    let dp = exponent + 1;
    let mut out = String::from(sign);
    if dp <= 0 {
        out.push_str("0.");
        for _ in 0..(-dp) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let dp = dp as usize;
        if digits.len() <= dp {
            out.push_str(&digits);
            for _ in digits.len()..dp {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..dp]);
            out.push('.');
            out.push_str(&digits[dp..]);
        }
    }
    out
}

fn format_e(sign: &str, digits: &str, exponent: i32) -> String {
    let mut out = String::from(sign);
    out.push_str(&digits[..1]);
    if digits.len() > 1 {
        out.push('.');
        out.push_str(&digits[1..]);
    }
    out.push('e');
    out.push(if exponent < 0 { '-' } else { '+' });
    let magnitude = exponent.unsigned_abs();
    if magnitude < 10 {
        out.push('0');
    }
    out.push_str(&magnitude.to_string());
    out
}

#[cfg(test)]
mod budget_tests {
    use super::parse_documents;

    #[test]
    fn streams_with_thousands_of_documents_parse() {
        let stream: String = (0..5_000)
            .map(|i| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\n"))
            .collect::<Vec<_>>()
            .join("---\n");
        let documents = parse_documents(&stream).unwrap();
        assert_eq!(documents.len(), 5_000);
        assert_eq!(documents[4_999]["metadata"]["name"], "c4999");
    }

    #[test]
    fn long_comment_blocks_before_a_value_parse() {
        use std::fmt::Write as _;
        // kubectl reads a value that follows a hundred commented-out lines (real values files
        // and manifests carry such blocks); the parser must not buffer comments for it.
        let mut text =
            String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n");
        for i in 0..120 {
            let _ = writeln!(text, "  # commented out {i}");
        }
        text.push_str("  a: b\n");
        let documents = parse_documents(&text).unwrap();
        assert_eq!(documents[0]["data"]["a"], "b");
    }

    #[test]
    fn errors_speak_to_the_author_of_the_file_not_to_the_parser_configuration() {
        let error =
            super::parse_documents_located("metadata:\n  name: a\n  name: b\n").unwrap_err();
        assert!(
            error
                .message
                .contains("duplicate mapping key `name` is not allowed here"),
            "{}",
            error.message
        );
        assert!(!error.message.contains("Options"), "{}", error.message);
        assert_eq!((error.line, error.column), (Some(3), Some(3)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quotes_like_go_yaml() {
        let value = json!({"a": "false", "b": "y", "c": "1.0", "d": "2001-12-14", "e": "1.2.3",
            "f": "a: b", "g": "*x", "h": "?x", "i": "", "j": "abc ", "k": "\tx", "l": "1:20",
            "m": "on", "n": "héllo", "o": "0777"});
        let text = to_yaml_document(&value);
        assert_eq!(
            text,
            "a: \"false\"\nb: \"y\"\nc: \"1.0\"\nd: \"2001-12-14\"\ne: 1.2.3\nf: 'a: b'\ng: '*x'\nh: ?x\ni: \"\"\nj: 'abc '\nk: \"\\tx\"\nl: \"1:20\"\nm: \"on\"\n\"n\": héllo\no: \"0777\"\n"
        );
    }

    #[test]
    fn literal_blocks_and_sequences() {
        let value = json!({"s": ["x", {"k": "line1\nline2"}, ["a", "b"]], "t": "\nabc", "u": "\n",
            "v": "a\n"});
        assert_eq!(
            to_yaml_document(&value),
            "s:\n- x\n- k: |-\n    line1\n    line2\n- - a\n  - b\nt: |2-\n\n  abc\nu: |2+\n\nv: |\n  a\n"
        );
    }

    #[test]
    fn folds_long_plain_scalars() {
        let long = "this is a very long string with many spaces in it that goes past the eighty column limit for sure yes";
        let text = to_yaml_document(&json!({"data": {"long": long}}));
        assert_eq!(
            text,
            "data:\n  long: this is a very long string with many spaces in it that goes past the eighty\n    column limit for sure yes\n"
        );
    }

    #[test]
    fn numbers_follow_go() {
        let value = json!({"a": 1.0, "b": 1.5, "c": 123_456_789.123, "d": 0.000_001, "e": 1e21,
            "f": 1.5e10, "g": 1e23, "h": 0.1});
        assert_eq!(
            to_yaml_document(&value),
            "a: 1\nb: 1.5\nc: 1.23456789123e+08\nd: 1e-06\ne: 1e+21\nf: 15000000000\ng: 1e+23\nh: 0.1\n"
        );
    }

    #[test]
    fn natural_key_order() {
        let mut keys = vec!["z10", "z9", "Z1", "a_b"];
        keys.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(keys, ["Z1", "a_b", "z9", "z10"]);
    }

    #[test]
    fn parses_yaml_1_2_scalars() {
        let docs =
            parse_documents("a: [x, y, on, yes, True, 0777, 0x1F]\n---\n---\nb: 1\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["a"], json!(["x", "y", "on", "yes", true, 511, 31]));
    }
}
