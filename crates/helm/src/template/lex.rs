//! The lexer: template text into tokens, with Go's rules for delimiters, trim markers,
//! comments, quoting and numbers, and Go's lexical error messages.
//!
//! The whole input is lexed up front (up to and including the first error token): the lexer's
//! state never depends on the parser's, so this gives the same token stream Go's concurrent
//! lexer would, in one tight loop.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A lexical error; the token's text is the message.
    Error,
    Bool,
    /// A single printable ASCII character not otherwise meaningful (`,` in declarations).
    Char,
    CharConstant,
    Assign,
    Declare,
    Dot,
    Eof,
    Field,
    Identifier,
    LeftDelim,
    LeftParen,
    Number,
    Pipe,
    RawString,
    RightDelim,
    RightParen,
    Space,
    String,
    Text,
    Variable,
    // Keywords.
    Block,
    Break,
    Continue,
    Define,
    Else,
    End,
    If,
    Nil,
    Range,
    Template,
    With,
}

impl Kind {
    fn is_keyword(self) -> bool {
        matches!(
            self,
            Kind::Block
                | Kind::Break
                | Kind::Continue
                | Kind::Define
                | Kind::Else
                | Kind::End
                | Kind::If
                | Kind::Nil
                | Kind::Range
                | Kind::Template
                | Kind::With
        )
    }
}

/// One token: its kind and the byte range of its text in the input (the start is the token's
/// position). Twelve bytes and `Copy`: a large chart lexes hundreds of thousands of them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Token {
    pub kind: Kind,
    start: u32,
    end: u32,
}

/// A lexed input: its tokens, the last being [`Kind::Eof`] or [`Kind::Error`], and the
/// message of that error token.
#[derive(Debug, Default)]
pub(crate) struct Tokens {
    pub list: Vec<Token>,
    pub error: String,
}

impl Token {
    /// The token's byte offset in the input.
    pub fn pos(self) -> usize {
        self.start as usize
    }

    /// The token's text: a range of `input`, or `error` (the lexer's message) for
    /// [`Kind::Error`].
    pub fn text<'a>(self, input: &'a str, error: &'a str) -> &'a str {
        if self.kind == Kind::Error {
            return error;
        }
        input
            .get(self.start as usize..self.end as usize)
            .unwrap_or("")
    }

    /// Go's `item.String()`, used in "unexpected X in Y" messages.
    pub fn describe(self, input: &str, error: &str) -> String {
        let text = self.text(input, error);
        match self.kind {
            Kind::Eof => "EOF".into(),
            Kind::Error => text.to_string(),
            k if k.is_keyword() => format!("<{text}>"),
            _ if text.len() > 10 => {
                // Go's `%.10q`: the first ten characters, quoted.
                let head: String = text.chars().take(10).collect();
                format!("{}...", go_quote(&head))
            }
            _ => go_quote(text),
        }
    }
}

pub(crate) use crate::fmt::{is_print as is_go_print, quote as go_quote};

/// Go's `%#U` of a rune: `U+0041 'A'`.
fn go_rune_u(c: char) -> String {
    if is_go_print(c) {
        format!("U+{:04X} '{c}'", c as u32)
    } else {
        format!("U+{:04X}", c as u32)
    }
}

const LEFT: &[u8] = b"{{";
const RIGHT: &[u8] = b"}}";

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_alnum(c: char) -> bool {
    c == '_' || c.is_alphabetic() || c.is_numeric()
}

/// Lexes `input`; the last token is [`Kind::Eof`] or [`Kind::Error`]. `break`/`continue` are
/// keywords unless the function map defines functions of those names.
#[cfg(test)]
pub(crate) fn lex(input: &str, break_ok: bool, continue_ok: bool) -> Tokens {
    let mut tokens = Tokens::default();
    lex_into(input, break_ok, continue_ok, &mut tokens);
    tokens
}

/// [`lex`] into `out` (cleared first), whose buffer a caller may reuse from one input to the
/// next. Token offsets are 32 bits: a larger input is refused (no template comes near it;
/// execution's output is bounded far below).
pub(crate) fn lex_into(input: &str, break_ok: bool, continue_ok: bool, out: &mut Tokens) {
    out.list.clear();
    out.error.clear();
    let mut l = Lexer {
        input,
        bytes: input.as_bytes(),
        pos: 0,
        start: 0,
        paren_depth: 0,
        tokens: std::mem::take(&mut out.list),
        error: std::mem::take(&mut out.error),
        break_ok,
        continue_ok,
    };
    if u32::try_from(input.len()).is_err() {
        l.error("template text larger than 4 GiB".into());
    } else {
        l.tokens.reserve(input.len() / 8 + 4);
        l.run();
    }
    out.list = l.tokens;
    out.error = l.error;
}

struct Lexer<'a> {
    input: &'a str,
    bytes: &'a [u8],
    pos: usize,
    start: usize,
    paren_depth: i32,
    tokens: Vec<Token>,
    error: String,
    break_ok: bool,
    continue_ok: bool,
}

enum State {
    Text,
    LeftDelim,
    InsideAction,
    Done,
}

impl Lexer<'_> {
    fn rest(&self) -> &[u8] {
        self.bytes.get(self.pos..).unwrap_or(&[])
    }

    fn peek_char(&self) -> Option<char> {
        self.input.get(self.pos..).and_then(|s| s.chars().next())
    }

    fn next_char(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    /// A token from `start` to `end` (offsets fit in 32 bits: [`lex_into`] checks the input's
    /// length).
    #[allow(clippy::cast_possible_truncation)]
    fn push(&mut self, kind: Kind, start: usize, end: usize) {
        self.tokens.push(Token {
            kind,
            start: start as u32,
            end: end as u32,
        });
    }

    fn emit(&mut self, kind: Kind) {
        self.push(kind, self.start, self.pos);
        self.start = self.pos;
    }

    fn error(&mut self, msg: String) -> State {
        self.push(Kind::Error, self.start, self.start);
        self.error = msg;
        State::Done
    }

    fn run(&mut self) {
        let mut state = State::Text;
        loop {
            state = match state {
                State::Text => self.lex_text(),
                State::LeftDelim => self.lex_left_delim(),
                State::InsideAction => self.lex_inside_action(),
                State::Done => return,
            };
        }
    }

    fn lex_text(&mut self) -> State {
        let Some(x) = find(self.rest(), LEFT) else {
            self.pos = self.bytes.len();
            if self.pos > self.start {
                self.emit(Kind::Text);
            }
            self.emit(Kind::Eof);
            return State::Done;
        };
        if x > 0 {
            self.pos += x;
            let delim_end = self.pos + LEFT.len();
            let trim = if has_left_trim(self.bytes.get(delim_end..).unwrap_or(&[])) {
                let text = self.bytes.get(self.start..self.pos).unwrap_or(&[]);
                text.len()
                    - text
                        .iter()
                        .rposition(|b| !is_space(*b))
                        .map_or(0, |i| i + 1)
            } else {
                0
            };
            let end = self.pos - trim;
            if end > self.start {
                self.push(Kind::Text, self.start, end);
            }
            self.start = self.pos;
        }
        State::LeftDelim
    }

    fn lex_left_delim(&mut self) -> State {
        self.pos += LEFT.len();
        let trim = has_left_trim(self.rest());
        let after = if trim { 2 } else { 0 };
        if self
            .bytes
            .get(self.pos + after..)
            .is_some_and(|r| r.starts_with(b"/*"))
        {
            self.pos += after;
            self.start = self.pos;
            return self.lex_comment();
        }
        self.emit(Kind::LeftDelim);
        self.pos += after;
        self.start = self.pos;
        self.paren_depth = 0;
        State::InsideAction
    }

    fn lex_comment(&mut self) -> State {
        self.pos += 2;
        let Some(x) = find(self.rest(), b"*/") else {
            return self.error("unclosed comment".into());
        };
        self.pos += x + 2;
        let (delim, trim) = self.at_right_delim();
        if !delim {
            return self.error("comment ends before closing delimiter".into());
        }
        if trim {
            self.pos += 2;
        }
        self.pos += RIGHT.len();
        if trim {
            self.pos += self.rest().iter().take_while(|b| is_space(**b)).count();
        }
        self.start = self.pos;
        State::Text
    }

    fn at_right_delim(&self) -> (bool, bool) {
        let rest = self.rest();
        if has_right_trim(rest) && rest.get(2..).is_some_and(|r| r.starts_with(RIGHT)) {
            return (true, true);
        }
        (rest.starts_with(RIGHT), false)
    }

    fn lex_right_delim(&mut self) -> State {
        let (_, trim) = self.at_right_delim();
        if trim {
            self.pos += 2;
            self.start = self.pos;
        }
        self.pos += RIGHT.len();
        self.emit(Kind::RightDelim);
        if trim {
            self.pos += self.rest().iter().take_while(|b| is_space(**b)).count();
            self.start = self.pos;
        }
        State::Text
    }

    fn lex_inside_action(&mut self) -> State {
        let (delim, _) = self.at_right_delim();
        if delim {
            if self.paren_depth == 0 {
                return self.lex_right_delim();
            }
            return self.error("unclosed left paren".into());
        }
        let Some(c) = self.next_char() else {
            return self.error("unclosed action".into());
        };
        match c {
            ' ' | '\t' | '\r' | '\n' => {
                self.pos -= 1;
                return self.lex_space();
            }
            '=' => self.emit(Kind::Assign),
            ':' => {
                if self.next_char() != Some('=') {
                    return self.error("expected :=".into());
                }
                self.emit(Kind::Declare);
            }
            '|' => self.emit(Kind::Pipe),
            '"' => return self.lex_quote(),
            '`' => return self.lex_raw_quote(),
            '$' => return self.lex_field_or_variable(Kind::Variable),
            '\'' => return self.lex_char(),
            '.' if self.rest().first().is_none_or(|b| !b.is_ascii_digit()) => {
                return self.lex_field_or_variable(Kind::Field);
            }
            '.' | '+' | '-' | '0'..='9' => {
                self.pos -= 1;
                return self.lex_number();
            }
            c if is_alnum(c) => {
                self.pos -= c.len_utf8();
                return self.lex_identifier();
            }
            '(' => {
                self.paren_depth += 1;
                self.emit(Kind::LeftParen);
            }
            ')' => {
                self.paren_depth -= 1;
                if self.paren_depth < 0 {
                    return self.error("unexpected right paren".into());
                }
                self.emit(Kind::RightParen);
            }
            c if c.is_ascii() && !c.is_ascii_control() => self.emit(Kind::Char),
            c => {
                return self.error(format!(
                    "unrecognized character in action: {}",
                    go_rune_u(c)
                ));
            }
        }
        State::InsideAction
    }

    fn lex_space(&mut self) -> State {
        let mut n = 0;
        while self.rest().first().is_some_and(|b| is_space(*b)) {
            self.pos += 1;
            n += 1;
        }
        // A space before "-}}" belongs to the trim marker.
        let from_last = self.bytes.get(self.pos - 1..).unwrap_or(&[]);
        if has_right_trim(from_last) && from_last.get(2..).is_some_and(|r| r.starts_with(RIGHT)) {
            self.pos -= 1;
            if n == 1 {
                return self.lex_right_delim();
            }
        }
        self.emit(Kind::Space);
        State::InsideAction
    }

    fn lex_quote(&mut self) -> State {
        loop {
            match self.next_char() {
                Some('\\') => match self.next_char() {
                    Some('\n') | None => {
                        return self.error("unterminated quoted string".into());
                    }
                    Some(_) => {}
                },
                Some('\n') | None => return self.error("unterminated quoted string".into()),
                Some('"') => break,
                Some(_) => {}
            }
        }
        self.emit(Kind::String);
        State::InsideAction
    }

    fn lex_raw_quote(&mut self) -> State {
        match find(self.rest(), b"`") {
            Some(x) => {
                self.pos += x + 1;
                self.emit(Kind::RawString);
                State::InsideAction
            }
            None => self.error("unterminated raw quoted string".into()),
        }
    }

    fn lex_char(&mut self) -> State {
        loop {
            match self.next_char() {
                Some('\\') => match self.next_char() {
                    Some('\n') | None => {
                        return self.error("unterminated character constant".into());
                    }
                    Some(_) => {}
                },
                Some('\n') | None => return self.error("unterminated character constant".into()),
                Some('\'') => break,
                Some(_) => {}
            }
        }
        self.emit(Kind::CharConstant);
        State::InsideAction
    }

    fn at_terminator(&self) -> bool {
        match self.rest().first() {
            None | Some(b'.' | b',' | b'|' | b':' | b')' | b'(') => true,
            Some(b) if is_space(*b) => true,
            Some(_) => self.rest().starts_with(RIGHT),
        }
    }

    fn lex_field_or_variable(&mut self, kind: Kind) -> State {
        if self.at_terminator() {
            self.emit(if kind == Kind::Variable {
                Kind::Variable
            } else {
                Kind::Dot
            });
            return State::InsideAction;
        }
        self.scan_alnum();
        if !self.at_terminator() {
            let c = self.peek_char().unwrap_or('\0');
            return self.error(format!("bad character {}", go_rune_u(c)));
        }
        self.emit(kind);
        State::InsideAction
    }

    /// Skips letters, digits and `_` (ASCII fast, Unicode correct).
    fn scan_alnum(&mut self) {
        loop {
            match self.bytes.get(self.pos) {
                Some(b) if b.is_ascii_alphanumeric() || *b == b'_' => self.pos += 1,
                Some(b) if b.is_ascii() => return,
                None => return,
                Some(_) => match self.peek_char() {
                    Some(c) if is_alnum(c) => self.pos += c.len_utf8(),
                    _ => return,
                },
            }
        }
    }

    fn lex_identifier(&mut self) -> State {
        self.scan_alnum();
        if !self.at_terminator() {
            let c = self.peek_char().unwrap_or('\0');
            return self.error(format!("bad character {}", go_rune_u(c)));
        }
        let word = self.input.get(self.start..self.pos).unwrap_or("");
        let kind = match word {
            "block" => Kind::Block,
            "break" if self.break_ok => Kind::Break,
            "continue" if self.continue_ok => Kind::Continue,
            "define" => Kind::Define,
            "else" => Kind::Else,
            "end" => Kind::End,
            "if" => Kind::If,
            "range" => Kind::Range,
            "nil" => Kind::Nil,
            "template" => Kind::Template,
            "with" => Kind::With,
            "true" | "false" => Kind::Bool,
            _ if word.starts_with('.') => Kind::Field,
            _ => Kind::Identifier,
        };
        self.emit(kind);
        State::InsideAction
    }

    fn accept(&mut self, valid: &[u8]) -> bool {
        if self.rest().first().is_some_and(|b| valid.contains(b)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn accept_run(&mut self, valid: &[u8]) {
        while self.accept(valid) {}
    }

    fn lex_number(&mut self) -> State {
        if !self.scan_number() {
            let text = self.input.get(self.start..self.pos).unwrap_or("");
            return self.error(format!("bad number syntax: {}", go_quote(text)));
        }
        self.emit(Kind::Number);
        State::InsideAction
    }

    fn scan_number(&mut self) -> bool {
        self.accept(b"+-");
        let mut digits: &[u8] = b"0123456789_";
        if self.accept(b"0") {
            if self.accept(b"xX") {
                digits = b"0123456789abcdefABCDEF_";
            } else if self.accept(b"oO") {
                digits = b"01234567_";
            } else if self.accept(b"bB") {
                digits = b"01_";
            }
        }
        self.accept_run(digits);
        if self.accept(b".") {
            self.accept_run(digits);
        }
        if digits.len() == 11 && self.accept(b"eE") {
            self.accept(b"+-");
            self.accept_run(b"0123456789_");
        }
        if digits.len() == 23 && self.accept(b"pP") {
            self.accept(b"+-");
            self.accept_run(b"0123456789_");
        }
        self.accept(b"i");
        if self.peek_char().is_some_and(is_alnum) {
            self.next_char();
            return false;
        }
        true
    }
}

fn has_left_trim(s: &[u8]) -> bool {
    s.len() >= 2 && s[0] == b'-' && is_space(s[1])
}

fn has_right_trim(s: &[u8]) -> bool {
    s.len() >= 2 && is_space(s[0]) && s[1] == b'-'
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let mut from = 0;
    while let Some(i) = hay.get(from..)?.iter().position(|b| *b == first) {
        let at = from + i;
        if hay.get(at + 1..)?.starts_with(rest) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<Kind> {
        lex(s, true, true).list.iter().map(|t| t.kind).collect()
    }

    #[test]
    fn actions_and_trim() {
        use Kind::*;
        assert_eq!(
            kinds("a {{- .x | f 1 -}} b"),
            [
                Text, LeftDelim, Field, Space, Pipe, Space, Identifier, Space, Number, RightDelim,
                Text, Eof
            ]
        );
        let toks = lex("a  {{- 1 -}}  b", true, true);
        assert_eq!(toks.list[0].text("a  {{- 1 -}}  b", ""), "a");
        assert_eq!(toks.list[4].text("a  {{- 1 -}}  b", ""), "b");
    }

    #[test]
    fn errors() {
        let t = lex("{{ \"abc }}", true, true);
        assert_eq!(t.list.last().unwrap().kind, Kind::Error);
        assert_eq!(t.error, "unterminated quoted string");
        let t = lex("{{ 3x }}", true, true);
        assert_eq!(t.error, "bad number syntax: \"3x\"");
        let t = lex("{{/* x */ y}}", true, true);
        assert_eq!(t.error, "comment ends before closing delimiter");
        // A buffer used again starts afresh.
        let mut out = Tokens::default();
        lex_into("{{ 3x }}", true, true, &mut out);
        lex_into("a {{ 1 }}", true, true, &mut out);
        assert_eq!(out.error, "");
        assert_eq!(out.list.last().unwrap().kind, Kind::Eof);
    }
}
