//! Helm's `--set` family: `--set`, `--set-string`, `--set-json`, `--set-literal` and
//! `--set-file` expressions (`a.b[0].c=x,d={1,2}`) read into a values tree, with Helm's typing
//! rules and its error texts.
//!
//! Typing: `--set` turns `true`/`false` (any case) into bools, `null` into null, and decimal
//! integers without a leading zero into `int64` (stored as an `i64` JSON number, which
//! [`crate::Value::from_json`] reads back as `Int64`); `--set-json` numbers are `float64`
//! (stored as `f64` numbers); everything else is a string. `\` escapes the next character in
//! keys and values (`a\.b=c\,d`), except with `--set-literal`, whose value is the whole rest of
//! the expression.

use serde_json::{Map, Value as Json};

/// What `--set-file` reads a path with: the file's text, or the error to report.
pub type ReadFile<'r> = &'r mut dyn FnMut(&str) -> Result<String, String>;

/// The deepest `a.b.c…` key Helm accepts (`MaxNestedNameLevel`).
pub const MAX_NESTED_NAME_LEVEL: usize = 30;
/// The largest list index Helm accepts (`MaxIndex`).
pub const MAX_INDEX: i64 = 65536;
/// How deep `a[0][0]…` may nest (Helm has no limit; this keeps the stack bounded).
const MAX_LIST_NESTING: usize = 100;

/// A malformed expression, worded as Helm words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// The message.
    pub message: String,
}

fn err<T>(message: impl Into<String>) -> Result<T, Error> {
    Err(Error {
        message: message.into(),
    })
}

/// Reads a `--set` expression into `dest`.
pub fn parse_into(expression: &str, dest: &mut Map<String, Json>) -> Result<(), Error> {
    Parser::new(expression, Mode::Typed, None).parse(dest)
}

/// Reads a `--set-string` expression into `dest`: every value a string.
pub fn parse_string_into(expression: &str, dest: &mut Map<String, Json>) -> Result<(), Error> {
    Parser::new(expression, Mode::Strings, None).parse(dest)
}

/// Reads a `--set-json` expression into `dest`: every value JSON (`a={"b":1},c=[1,2]`).
pub fn parse_json_into(expression: &str, dest: &mut Map<String, Json>) -> Result<(), Error> {
    Parser::new(expression, Mode::Json, None).parse(dest)
}

/// Reads a `--set-literal` expression into `dest`: the value is everything after the first
/// `=`, as is.
pub fn parse_literal_into(expression: &str, dest: &mut Map<String, Json>) -> Result<(), Error> {
    Parser::new(expression, Mode::Literal, None).parse(dest)
}

/// Reads a `--set-file` expression into `dest`: each value is a path, and `read` gives that
/// file's contents (or the error to report, e.g. `open x: no such file or directory`).
pub fn parse_file_into(
    expression: &str,
    dest: &mut Map<String, Json>,
    read: &mut dyn FnMut(&str) -> Result<String, String>,
) -> Result<(), Error> {
    Parser::new(expression, Mode::File, Some(read)).parse(dest)
}

/// Reads one `--set` expression into a new values tree.
pub fn parse(expression: &str) -> Result<Map<String, Json>, Error> {
    let mut out = Map::new();
    parse_into(expression, &mut out)?;
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Typed,
    Strings,
    Json,
    Literal,
    File,
}

/// Where a scan for stop characters ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Stop(char),
    Eof,
}

/// Why reading stopped: the end of the expression (which ends parsing quietly, as Go's
/// `io.EOF` does even when wrapped) or a real error.
enum Fail {
    Eof,
    Error(Error),
}

impl From<Error> for Fail {
    fn from(error: Error) -> Self {
        Fail::Error(error)
    }
}

fn fail<T>(message: impl Into<String>) -> Result<T, Fail> {
    Err(Fail::Error(Error {
        message: message.into(),
    }))
}

/// What a `{a,b}` list attempt found.
enum ListRead {
    List(Vec<Json>),
    NotList,
    Eof,
}

struct Parser<'r> {
    chars: Vec<char>,
    pos: usize,
    mode: Mode,
    read_file: Option<ReadFile<'r>>,
}

/// Go's `%T`-style name of a value, as the interface-conversion panics Helm reports show it.
fn go_type(value: &Json) -> &'static str {
    match value {
        Json::Null => "nil",
        Json::Bool(_) => "bool",
        Json::Number(n) if n.is_f64() => "float64",
        Json::Number(_) => "int64",
        Json::String(_) => "string",
        Json::Array(_) => "[]interface {}",
        Json::Object(_) => "map[string]interface {}",
    }
}

fn conversion_error(found: &Json, want: &str) -> Error {
    Error {
        message: format!(
            "unable to parse key: interface conversion: interface {{}} is {}, not {want}",
            go_type(found)
        ),
    }
}

use crate::fmt::quote as go_quote;

/// Go's `%q` of a `[]rune`: each rune quoted, `['a' 'b']`.
fn go_quote_runes(runes: &[char]) -> String {
    let items: Vec<String> = runes.iter().map(|&c| crate::fmt::quote_rune(c)).collect();
    format!("[{}]", items.join(" "))
}

/// Go's `strconv.Atoi`, with its error text.
fn atoi(text: &str) -> Result<i64, Error> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return err(format!(
            "strconv.Atoi: parsing {}: invalid syntax",
            go_quote(text)
        ));
    }
    text.parse::<i64>().or_else(|_| {
        err(format!(
            "strconv.Atoi: parsing {}: value out of range",
            go_quote(text)
        ))
    })
}

/// `--set`'s typing of a scalar.
fn typed(text: &str) -> Json {
    if text.eq_ignore_ascii_case("true") {
        return Json::Bool(true);
    }
    if text.eq_ignore_ascii_case("false") {
        return Json::Bool(false);
    }
    if text.eq_ignore_ascii_case("null") {
        return Json::Null;
    }
    if text == "0" {
        return Json::from(0_i64);
    }
    if !text.is_empty()
        && !text.starts_with('0')
        && let Ok(i) = parse_go_int64(text)
    {
        return Json::from(i);
    }
    Json::String(text.to_string())
}

/// `strconv.ParseInt(s, 10, 64)`: an optional sign and decimal digits.
fn parse_go_int64(text: &str) -> Result<i64, ()> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(());
    }
    text.parse::<i64>().map_err(|_| ())
}

/// Every JSON number as a `float64`, as Go's decoder produces them.
fn json_floats(value: Json) -> Json {
    match value {
        Json::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Json::Number(n), Json::Number),
        Json::Array(items) => Json::Array(items.into_iter().map(json_floats).collect()),
        Json::Object(map) => {
            Json::Object(map.into_iter().map(|(k, v)| (k, json_floats(v))).collect())
        }
        other => other,
    }
}

fn set(data: &mut Map<String, Json>, key: &str, value: Json) {
    if !key.is_empty() {
        data.insert(key.to_string(), value);
    }
}

fn set_index(mut list: Vec<Json>, index: i64, value: Json) -> Result<Vec<Json>, Error> {
    if index < 0 {
        return err(format!("negative {index} index not allowed"));
    }
    if index > MAX_INDEX {
        return err(format!(
            "index of {index} is greater than maximum supported index of {MAX_INDEX}"
        ));
    }
    let index = usize::try_from(index).unwrap_or(usize::MAX);
    if list.len() <= index {
        list.resize(index + 1, Json::Null);
    }
    list[index] = value;
    Ok(list)
}

impl<'r> Parser<'r> {
    fn new(text: &str, mode: Mode, read_file: Option<ReadFile<'r>>) -> Self {
        Parser {
            chars: text.chars().collect(),
            pos: 0,
            mode,
            read_file,
        }
    }

    fn parse(mut self, dest: &mut Map<String, Json>) -> Result<(), Error> {
        loop {
            match self.key(dest, 0) {
                Ok(()) => {}
                Err(Fail::Eof) => return Ok(()),
                Err(Fail::Error(e)) => return Err(e),
            }
        }
    }

    fn read(&mut self) -> Option<char> {
        let c = self.chars.get(self.pos).copied();
        if c.is_some() {
            self.pos += 1;
        }
        c
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    /// Characters up to one of `stop` (consumed), `\` escaping the next one unless literal.
    fn until(&mut self, stop: &[char]) -> (Vec<char>, End) {
        let mut out = Vec::new();
        loop {
            let Some(c) = self.read() else {
                return (out, End::Eof);
            };
            if stop.contains(&c) {
                return (out, End::Stop(c));
            }
            if c == '\\' && self.mode != Mode::Literal {
                match self.read() {
                    Some(next) => out.push(next),
                    None => return (out, End::Eof),
                }
                continue;
            }
            out.push(c);
        }
    }

    /// The scalar a value's characters stand for.
    fn value_of(&mut self, runes: &[char]) -> Result<Json, Error> {
        let text: String = runes.iter().collect();
        match self.mode {
            Mode::Typed => Ok(typed(&text)),
            Mode::File => match self.read_file.as_mut() {
                Some(read) => read(&text)
                    .map(Json::String)
                    .map_err(|message| Error { message }),
                None => Ok(Json::String(text)),
            },
            _ => Ok(Json::String(text)),
        }
    }

    fn key(&mut self, data: &mut Map<String, Json>, level: usize) -> Result<(), Fail> {
        let stops: &[char] = if self.mode == Mode::Literal {
            &['=', '[', '.']
        } else {
            &['=', '[', ',', '.']
        };
        let (runes, end) = self.until(stops);
        let key: String = runes.iter().collect();
        match end {
            End::Eof if key.is_empty() => Err(Fail::Eof),
            End::Eof => fail(format!("key {} has no value", go_quote(&key))),
            End::Stop('[') => {
                let index = self.key_index()?;
                let list = match data.get(&key) {
                    None => Vec::new(),
                    Some(Json::Array(items)) => items.clone(),
                    Some(other) => return Err(conversion_error(other, "[]interface {}").into()),
                };
                let (list, result) = self.list_item(list, index, level, 0);
                set(data, &key, Json::Array(list));
                result
            }
            End::Stop('=') => self.assign(data, &key),
            End::Stop(',') => {
                set(data, &key, Json::String(String::new()));
                fail(format!(
                    "key {} has no value (cannot end with ,)",
                    go_quote(&key)
                ))
            }
            End::Stop(_) => {
                let level = level + 1;
                if level > MAX_NESTED_NAME_LEVEL {
                    return fail(format!(
                        "value name nested level is greater than maximum supported nested level of {MAX_NESTED_NAME_LEVEL}"
                    ));
                }
                let mut inner = match data.get(&key) {
                    None => Map::new(),
                    Some(Json::Object(map)) => map.clone(),
                    Some(other) => {
                        return Err(conversion_error(other, "map[string]interface {}").into());
                    }
                };
                let result = self.key(&mut inner, level);
                let empty = inner.is_empty();
                if !empty {
                    set(data, &key, Json::Object(inner));
                }
                match result {
                    Ok(()) if empty => fail(format!("key map {} has no value", go_quote(&key))),
                    other => other,
                }
            }
        }
    }

    /// After `key=`: the value in this parser's mode.
    fn assign(&mut self, data: &mut Map<String, Json>, key: &str) -> Result<(), Fail> {
        match self.mode {
            Mode::Literal => {
                let (runes, _) = self.until(&[]);
                set(data, key, Json::String(runes.iter().collect()));
                Ok(())
            }
            Mode::Json => {
                let value = self.json_value()?;
                set(data, key, value);
                Ok(())
            }
            _ => match self.value_list()? {
                ListRead::List(items) => {
                    set(data, key, Json::Array(items));
                    Ok(())
                }
                ListRead::Eof => {
                    set(data, key, Json::String(String::new()));
                    Err(Fail::Eof)
                }
                ListRead::NotList => {
                    let (runes, _) = self.until(&[',']);
                    match self.value_of(&runes) {
                        Ok(value) => {
                            set(data, key, value);
                            Ok(())
                        }
                        Err(e) => {
                            set(data, key, Json::String(String::new()));
                            Err(e.into())
                        }
                    }
                }
            },
        }
    }

    /// The value after `[i]=`, in this parser's mode.
    fn item_value(&mut self) -> Result<Json, Error> {
        match self.mode {
            Mode::Literal => {
                let (runes, _) = self.until(&[]);
                Ok(Json::String(runes.iter().collect()))
            }
            Mode::Json => self.json_value(),
            _ => match self.value_list()? {
                ListRead::List(items) => Ok(Json::Array(items)),
                ListRead::Eof => Ok(Json::String(String::new())),
                ListRead::NotList => {
                    let (runes, _) = self.until(&[',']);
                    self.value_of(&runes)
                }
            },
        }
    }

    /// A `--set-json` value: blanks and a comma mean null; otherwise one JSON document,
    /// then optional blanks and a comma.
    fn json_value(&mut self) -> Result<Json, Error> {
        if self.empty_value() {
            return Ok(Json::Null);
        }
        let rest = &self.chars[self.pos..];
        let (value, consumed) = decode_json_prefix(rest)?;
        self.pos += consumed;
        self.empty_value();
        Ok(json_floats(value))
    }

    /// Consumes blanks up to a comma or the end (an empty value: true) or stops before
    /// anything else (false).
    fn empty_value(&mut self) -> bool {
        loop {
            match self.read() {
                None | Some(',') => return true,
                Some(c) if c.is_whitespace() => {}
                Some(_) => {
                    self.unread();
                    return false;
                }
            }
        }
    }

    /// The index inside `[…]`; the end of the expression ends parsing quietly.
    fn key_index(&mut self) -> Result<i64, Fail> {
        let (runes, end) = self.until(&[']']);
        if end == End::Eof {
            return Err(Fail::Eof);
        }
        let text: String = runes.iter().collect();
        atoi(&text).map_err(|e| {
            Fail::Error(Error {
                message: format!("error parsing index: {}", e.message),
            })
        })
    }

    /// `{a,b,c}` after `=`, or word that this is not a list.
    fn value_list(&mut self) -> Result<ListRead, Error> {
        match self.read() {
            None => return Ok(ListRead::Eof),
            Some('{') => {}
            Some(_) => {
                self.unread();
                return Ok(ListRead::NotList);
            }
        }
        let mut list = Vec::new();
        loop {
            let (runes, end) = self.until(&[',', '}']);
            match end {
                End::Eof => return err("list must terminate with '}'"),
                End::Stop('}') => {
                    match self.read() {
                        Some(',') | None => {}
                        Some(_) => self.unread(),
                    }
                    list.push(self.value_of(&runes)?);
                    return Ok(ListRead::List(list));
                }
                End::Stop(_) => list.push(self.value_of(&runes)?),
            }
        }
    }

    /// What follows `[i]`: `=value`, `.key…` or another `[j]`. Returns the list (unchanged
    /// when reading failed, as Helm's parser leaves it) and the outcome.
    fn list_item(
        &mut self,
        list: Vec<Json>,
        index: i64,
        level: usize,
        depth: usize,
    ) -> (Vec<Json>, Result<(), Fail>) {
        if index < 0 {
            return (list, fail(format!("negative {index} index not allowed")));
        }
        if depth > MAX_LIST_NESTING {
            return (
                list,
                fail(format!("lists nest deeper than {MAX_LIST_NESTING} levels")),
            );
        }
        let (runes, end) = self.until(&['[', '.', '=']);
        if !runes.is_empty() {
            let message = format!(
                "unexpected data at end of array index: {}",
                go_quote_runes(&runes)
            );
            return (list, fail(message));
        }
        let slot = usize::try_from(index)
            .ok()
            .and_then(|i| list.get(i))
            .cloned();
        let value = match end {
            End::Eof => return (list, Err(Fail::Eof)),
            End::Stop('=') => match self.item_value() {
                Ok(value) => value,
                Err(e) => return (list, Err(e.into())),
            },
            End::Stop('[') => {
                let next = match self.key_index() {
                    Ok(next) => next,
                    Err(e) => return (list, Err(e)),
                };
                let inner = match slot {
                    None | Some(Json::Null) => Vec::new(),
                    Some(Json::Array(items)) => items,
                    Some(other) => {
                        return (list, Err(conversion_error(&other, "[]interface {}").into()));
                    }
                };
                match self.list_item(inner, next, level, depth + 1) {
                    (inner, Ok(())) => Json::Array(inner),
                    (_, Err(e)) => return (list, Err(e)),
                }
            }
            End::Stop(_) => {
                // Out-of-order indices: whatever sat in the slot is replaced by a map.
                let mut inner = match slot {
                    Some(Json::Object(map)) => map,
                    _ => Map::new(),
                };
                if let Err(e) = self.key(&mut inner, level) {
                    return (list, Err(e));
                }
                Json::Object(inner)
            }
        };
        match set_index(list.clone(), index, value) {
            Ok(list) => (list, Ok(())),
            Err(e) => (list, Err(e.into())),
        }
    }
}

/// Go's quoting of a character in JSON syntax errors (`'x'`, `'\\'`, `'\x01'`).
fn quote_json_char(c: char) -> String {
    match c {
        '\'' => "'\\''".into(),
        '"' => "'\"'".into(),
        '\\' => "'\\\\'".into(),
        '\n' => "'\\n'".into(),
        '\r' => "'\\r'".into(),
        '\t' => "'\\t'".into(),
        c if c.is_control() => format!("'\\x{:02x}'", u32::from(c)),
        c => format!("'{c}'"),
    }
}

fn invalid(c: char, context: &str) -> Error {
    Error {
        message: format!("invalid character {} {context}", quote_json_char(c)),
    }
}

/// Reads the first JSON value at the start of `chars` as Go's `json.Decoder` does: a number
/// or literal ends at the first character that cannot continue it (`10b` reads `10`), and the
/// rest stays for the caller. Returns the value and how many characters it took.
fn decode_json_prefix(chars: &[char]) -> Result<(Json, usize), Error> {
    let start = chars.iter().take_while(|c| c.is_whitespace()).count();
    let Some(&first) = chars.get(start) else {
        return err("EOF");
    };
    let end = match first {
        '{' | '[' | '"' => structured_end(chars, start),
        't' | 'f' | 'n' => literal_end(chars, start)?,
        '-' | '0'..='9' => number_end(chars, start)?,
        c => return Err(invalid(c, "looking for beginning of value")),
    };
    let Some(end) = end else {
        // The value runs to the end: let serde_json say what is wrong or incomplete.
        let text: String = chars[start..].iter().collect();
        return match serde_json::from_str::<Json>(&text) {
            Ok(value) => Ok((value, chars.len())),
            Err(e) => Err(json_error(&e, &text)),
        };
    };
    let text: String = chars[start..end].iter().collect();
    match serde_json::from_str::<Json>(&text) {
        Ok(value) => Ok((value, end)),
        Err(e) => Err(json_error(&e, &text)),
    }
}

/// Where a bracketed value or string ends (`None` when it never closes).
fn structured_end(chars: &[char], start: usize) -> Option<usize> {
    let mut depth = 0_usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in chars.iter().enumerate().skip(start) {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

fn literal_end(chars: &[char], start: usize) -> Result<Option<usize>, Error> {
    let word = match chars[start] {
        't' => "true",
        'f' => "false",
        _ => "null",
    };
    for (offset, want) in word.chars().enumerate().skip(1) {
        match chars.get(start + offset) {
            None => return Ok(None),
            Some(&c) if c == want => {}
            Some(&c) => {
                return Err(invalid(
                    c,
                    &format!("in literal {word} (expecting {})", quote_json_char(want)),
                ));
            }
        }
    }
    Ok(Some(start + word.len()))
}

/// Go's number scanner: `-? (0 | [1-9][0-9]*) (\.[0-9]+)? ([eE][+-]?[0-9]+)?`.
fn number_end(chars: &[char], start: usize) -> Result<Option<usize>, Error> {
    let digit = |i: usize| chars.get(i).is_some_and(char::is_ascii_digit);
    let need_digit = |i: usize, context: &str| match chars.get(i) {
        None => Ok(None),
        Some(c) if c.is_ascii_digit() => Ok(Some(())),
        Some(&c) => Err(invalid(c, context)),
    };
    let mut i = start;
    if chars[i] == '-' {
        i += 1;
        if need_digit(i, "in numeric literal")?.is_none() {
            return Ok(None);
        }
    }
    if chars[i] == '0' {
        i += 1;
    } else {
        while digit(i) {
            i += 1;
        }
    }
    if chars.get(i) == Some(&'.') {
        i += 1;
        if need_digit(i, "after decimal point in numeric literal")?.is_none() {
            return Ok(None);
        }
        while digit(i) {
            i += 1;
        }
    }
    if matches!(chars.get(i), Some('e' | 'E')) {
        i += 1;
        if matches!(chars.get(i), Some('+' | '-')) {
            i += 1;
        }
        if need_digit(i, "in exponent of numeric literal")?.is_none() {
            return Ok(None);
        }
        while digit(i) {
            i += 1;
        }
    }
    Ok(Some(i))
}

/// Go's `encoding/json` wording for serde_json's syntax errors (shared with the schema
/// reader, whose parse errors Helm prints the same way).
pub(crate) fn json_error(error: &serde_json::Error, text: &str) -> Error {
    if error.is_eof() {
        return Error {
            message: "unexpected EOF".into(),
        };
    }
    // serde_json counts columns in characters from 1 on the failing line.
    let line_start: usize = text
        .split_inclusive('\n')
        .take(error.line().saturating_sub(1))
        .map(|l| l.chars().count())
        .sum();
    let found = text
        .chars()
        .nth(line_start + error.column().saturating_sub(1))
        .unwrap_or(' ');
    let description = error.to_string();
    let context = if description.starts_with("key must be a string") {
        "looking for beginning of object key string"
    } else if description.starts_with("expected `:`") {
        "after object key"
    } else if description.starts_with("expected `,` or `}`") {
        "after object key:value pair"
    } else if description.starts_with("expected `,` or `]`") {
        "after array element"
    } else if description.starts_with("trailing comma") {
        if found == '}' {
            "looking for beginning of object key string"
        } else {
            "looking for beginning of value"
        }
    } else if description.starts_with("invalid number") {
        "in numeric literal"
    } else {
        "looking for beginning of value"
    };
    invalid(found, context)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(kind: &str, expression: &str) -> Result<Json, String> {
        let mut out = Map::new();
        let result = match kind {
            "set" => parse_into(expression, &mut out),
            "string" => parse_string_into(expression, &mut out),
            "json" => parse_json_into(expression, &mut out),
            "literal" => parse_literal_into(expression, &mut out),
            _ => parse_file_into(expression, &mut out, &mut |path| {
                if path == "f.txt" {
                    Ok("hi\n".into())
                } else {
                    Err(format!("open {path}: no such file or directory"))
                }
            }),
        };
        result.map(|()| Json::Object(out)).map_err(|e| e.message)
    }

    // Every expectation below is what Helm v4.2.3's strvals gave for the same expression.
    #[test]
    fn set_values() {
        assert_eq!(
            run("set", "a=1,b.c[0]=x"),
            Ok(json!({"a": 1, "b": {"c": ["x"]}}))
        );
        assert_eq!(run("set", "a={}"), Ok(json!({"a": [""]})));
        assert_eq!(run("set", "a=1,"), Ok(json!({"a": 1})));
        assert_eq!(
            run(
                "set",
                "a=0,b=007,c=-5,d=TRUE,e=Null,f=1e3,g=9223372036854775808"
            ),
            Ok(
                json!({"a": 0, "b": "007", "c": -5, "d": true, "e": null, "f": "1e3",
                      "g": "9223372036854775808"})
            )
        );
        assert_eq!(run("set", "a\\.b=c\\,d"), Ok(json!({"a.b": "c,d"})));
        assert_eq!(
            run("set", "a[1]=x,a[0].b=2"),
            Ok(json!({"a": [{"b": 2}, "x"]}))
        );
        assert_eq!(run("set", "a[0][1]=3"), Ok(json!({"a": [[null, 3]]})));
        assert_eq!(
            run("set", "a.b=1,a.c=2"),
            Ok(json!({"a": {"b": 1, "c": 2}}))
        );
        assert_eq!(run("set", ""), Ok(json!({})));
        // The end of the expression, even inside an index or a dotted key, ends parsing
        // quietly with what was read so far.
        assert_eq!(run("set", " =,[1"), Ok(json!({" ": ""})));
        assert_eq!(run("set", "-."), Ok(json!({})));
        assert_eq!(run("set", "a[0]["), Ok(json!({"a": []})));
        assert_eq!(run("set", "a=1,b[0]"), Ok(json!({"a": 1, "b": []})));
        assert_eq!(run("set", "a.b."), Ok(json!({})));
        assert_eq!(run("set", "a.b"), Err("key \"b\" has no value".into()));
    }

    #[test]
    fn error_keys_are_quoted_as_go_does() {
        // Helm escapes C1 controls and other unprintable runes as `\uXXXX`.
        assert_eq!(
            run("set", "a\u{85}"),
            Err("key \"a\\u0085\" has no value".into())
        );
        assert_eq!(
            run("set", "a\u{ad}"),
            Err("key \"a\\u00ad\" has no value".into())
        );
    }

    #[test]
    fn set_errors() {
        let cases = [
            ("a", "key \"a\" has no value"),
            ("a,b=1", "key \"a\" has no value (cannot end with ,)"),
            (
                "x[70000]=1",
                "index of 70000 is greater than maximum supported index of 65536",
            ),
            (
                "a=x,a[0]=1",
                "unable to parse key: interface conversion: interface {} is string, not []interface {}",
            ),
            (
                "a=x,a.b=1",
                "unable to parse key: interface conversion: interface {} is string, not map[string]interface {}",
            ),
            (
                "a[x]=1",
                "error parsing index: strconv.Atoi: parsing \"x\": invalid syntax",
            ),
            ("a[-1]=1", "negative -1 index not allowed"),
            ("a[0]b=1", "unexpected data at end of array index: ['b']"),
            ("a={x,y", "list must terminate with '}'"),
            ("a.=1", "key map \"a\" has no value"),
            ("a..b=1", "key map \"a\" has no value"),
        ];
        for (expression, message) in cases {
            assert_eq!(
                run("set", expression),
                Err(message.to_string()),
                "{expression}"
            );
        }
        let deep = format!("{}=1", vec!["k"; 40].join("."));
        assert_eq!(
            run("set", &deep),
            Err(
                "value name nested level is greater than maximum supported nested level of 30"
                    .into()
            )
        );
        let nested = format!("a{}=1", "[0]".repeat(5000));
        assert!(run("set", &nested).is_err());
    }

    #[test]
    fn other_kinds() {
        assert_eq!(
            run("string", "a=1,b=true,c={x,2}"),
            Ok(json!({"a": "1", "b": "true", "c": ["x", "2"]}))
        );
        assert_eq!(
            run("string", "a.b[0]=007"),
            Ok(json!({"a": {"b": ["007"]}}))
        );
        assert_eq!(
            run("json", "a={\"x\":1},b=[1,2.5]"),
            Ok(json!({"a": {"x": 1.0}, "b": [1.0, 2.5]}))
        );
        assert_eq!(run("json", "a=null"), Ok(json!({"a": null})));
        assert_eq!(run("json", "a="), Ok(json!({"a": null})));
        assert_eq!(
            run("json", "a=x"),
            Err("invalid character 'x' looking for beginning of value".into())
        );
        assert_eq!(
            run("json", "a= 1 , b=\"s\""),
            Ok(json!({"a": 1.0, " b": "s"}))
        );
        assert_eq!(
            run("json", "a[0]={\"q\":1}"),
            Ok(json!({"a": [{"q": 1.0}]}))
        );
        assert_eq!(run("json", "a=1 2"), Err("key \"2\" has no value".into()));
        assert_eq!(run("json", "a={\"x\":"), Err("unexpected EOF".into()));
        // Go's decoder stops a number or literal where it can no longer continue.
        assert_eq!(run("json", ".-=10b"), Err("key \"b\" has no value".into()));
        assert_eq!(run("json", "a=truex=1"), Ok(json!({"a": true, "x": 1.0})));
        assert_eq!(
            run("json", "a=2.x"),
            Err("invalid character 'x' after decimal point in numeric literal".into())
        );
        assert_eq!(
            run("json", "a={a"),
            Err("invalid character 'a' looking for beginning of object key string".into())
        );
        assert_eq!(
            run("json", "a=\\b"),
            Err("invalid character '\\\\' looking for beginning of value".into())
        );
        assert_eq!(run("literal", "a=b,c=d"), Ok(json!({"a": "b,c=d"})));
        assert_eq!(
            run("literal", "a.b[0]=x=y"),
            Ok(json!({"a": {"b": ["x=y"]}}))
        );
        assert_eq!(run("literal", "a\\.b=1"), Ok(json!({"a\\": {"b": "1"}})));
        assert_eq!(run("literal", "a"), Err("key \"a\" has no value".into()));
        assert_eq!(run("literal", "a[0].b=1"), Ok(json!({"a": [{"b": "1"}]})));
        assert_eq!(run("file", "a=f.txt"), Ok(json!({"a": "hi\n"})));
        assert_eq!(
            run("file", "a=nonexist"),
            Err("open nonexist: no such file or directory".into())
        );
    }

    /// No expression, however malformed, panics or overflows the stack.
    #[test]
    fn arbitrary_expressions_never_panic() {
        const ALPHABET: &[&str] = &[
            "a", "b", ".", "[", "]", "0", "1", "=", ",", "{", "}", "\\", "\"", ":", " ", "-",
            "null", "true", "65537", "[0]",
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..5000 {
            let len = next() % 40;
            let expression: String = (0..len)
                .map(|_| ALPHABET[usize::try_from(next() % ALPHABET.len() as u64).unwrap_or(0)])
                .collect();
            for kind in ["set", "string", "json", "literal", "file"] {
                let _ = run(kind, &expression);
            }
        }
    }
}
