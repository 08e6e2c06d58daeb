//! Go's `fmt` as templates reach it: `print`, `println`, `printf` and Sprig's `printf`-based
//! functions, with Go's verbs, flags, widths and `%!verb(type=value)` complaints.
//!
//! Operands are template [`Value`]s, so the Go types that matter are the ones a chart can hold:
//! `bool`, `int`, `int64`, `float64`, `string`, `[]byte`, slices, `map[string]interface{}` and
//! structs ([`crate::value::Object`]). Every verb Go applies to those types is here, with Go's
//! exact output: flags `+ - # 0 space`, width and precision (also `*` and `%[n]` argument
//! indexes), correctly rounded floats (ties to even on the exact binary value, as Go's
//! `strconv`), `strconv.Quote` quoting, and the error forms (`%!d(string=x)`, `%!v(MISSING)`,
//! `%!(EXTRA int=1)`, `%!(NOVERB)`, `%!(BADWIDTH)`, `%!(BADPREC)`, `%!d(BADINDEX)`).

use std::fmt::Write as _;

use crate::value::{ListKind, Value};

/// `fmt.Sprint`: operands concatenated, with a space between two operands when neither is a
/// string.
pub fn sprint(args: &[Value]) -> String {
    let mut printer = Printer::default();
    let mut previous_string = false;
    for (i, arg) in args.iter().enumerate() {
        let is_string = matches!(arg, Value::String(_));
        if i > 0 && !is_string && !previous_string {
            printer.buf.push(' ');
        }
        printer.print_arg(arg, 'v');
        previous_string = is_string;
    }
    printer.buf
}

/// `fmt.Sprintln`: operands separated by spaces, then a newline.
pub fn sprintln(args: &[Value]) -> String {
    let mut printer = Printer::default();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            printer.buf.push(' ');
        }
        printer.print_arg(arg, 'v');
    }
    printer.buf.push('\n');
    printer.buf
}

/// `fmt.Sprintf`.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let mut printer = Printer::default();
    printer.do_printf(format, args);
    printer.buf
}

/// `strconv.Quote`: `s` in double quotes with Go's escapes; printable runes stay as they are.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    append_quoted(&mut out, s.as_bytes(), '"', false);
    out
}

/// `strconv.Quote` of bytes that may not be UTF-8 (stray bytes come out as `\xNN`).
pub fn quote_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    append_quoted(&mut out, bytes, '"', false);
    out
}

/// `strconv.QuoteToASCII`: as [`quote`], with every non-ASCII rune escaped.
pub fn quote_to_ascii(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    append_quoted(&mut out, s.as_bytes(), '"', true);
    out
}

/// `strconv.QuoteRune`: `c` in single quotes with Go's escapes.
pub fn quote_rune(c: char) -> String {
    let mut out = String::with_capacity(6);
    append_quoted_rune(&mut out, c, false);
    out
}

/// Go's `tooLarge`: widths, precisions and argument indexes beyond a million are refused, which
/// also bounds what one verb can allocate.
const LIMIT: usize = 1_000_000;

const LOWER_HEX: &[u8; 16] = b"0123456789abcdef";
const UPPER_HEX: &[u8; 16] = b"0123456789ABCDEF";

#[derive(Default, Clone, Copy)]
struct Flags {
    plus: bool,
    minus: bool,
    sharp: bool,
    space: bool,
    zero: bool,
    /// `%+v`.
    plus_v: bool,
    /// `%#v`.
    sharp_v: bool,
    wid: Option<usize>,
    prec: Option<usize>,
}

#[derive(Default)]
struct Printer {
    buf: String,
    f: Flags,
    /// Arguments were addressed by index: no `%!(EXTRA …)` check.
    reordered: bool,
    good_arg_num: bool,
}

/// `parsenum`: a decimal number at `s[i..end]`, if any; an overlong one counts as none and
/// skips to `end`, as Go does.
fn parse_num(s: &[u8], start: usize, end: usize) -> (Option<usize>, usize) {
    if start >= end {
        return (None, end);
    }
    let mut num = 0usize;
    let mut found = false;
    let mut i = start;
    while i < end && s[i].is_ascii_digit() {
        if num > LIMIT {
            return (None, end);
        }
        num = num * 10 + usize::from(s[i] - b'0');
        found = true;
        i += 1;
    }
    (found.then_some(num), i)
}

/// An integer operand for `*` widths and precisions (any Go integer type, within the limit).
fn int_from_arg(args: &[Value], arg_num: usize) -> (Option<i64>, usize) {
    let Some(arg) = args.get(arg_num) else {
        return (None, arg_num);
    };
    let num = match arg {
        Value::Int(i) | Value::Int64(i) if i.unsigned_abs() <= LIMIT as u64 => Some(*i),
        _ => None,
    };
    (num, arg_num + 1)
}

impl Printer {
    fn pad_bytes(&mut self, count: usize) {
        // Zero padding only ever goes on the left.
        let byte = if self.f.zero && !self.f.minus {
            '0'
        } else {
            ' '
        };
        self.buf.extend(std::iter::repeat_n(byte, count));
    }

    /// Writes `s` padded to the width (counted in runes), on the left unless `-`.
    fn pad(&mut self, s: &str) {
        let Some(wid) = self.f.wid.filter(|w| *w > 0) else {
            self.buf.push_str(s);
            return;
        };
        let fill = wid.saturating_sub(s.chars().count());
        if self.f.minus {
            self.buf.push_str(s);
            self.pad_bytes(fill);
        } else {
            self.pad_bytes(fill);
            self.buf.push_str(s);
        }
    }

    /// `pad` with zero padding switched off (numbers that did their own zero filling).
    fn pad_no_zero(&mut self, s: &str) {
        let zero = self.f.zero;
        self.f.zero = false;
        self.pad(s);
        self.f.zero = zero;
    }

    #[allow(clippy::too_many_lines)] // one pass over the format, as Go's doPrintf
    fn do_printf(&mut self, format: &str, args: &[Value]) {
        let bytes = format.as_bytes();
        let end = bytes.len();
        let mut arg_num = 0usize;
        let mut after_index;
        let mut i = 0usize;
        'format: while i < end {
            self.good_arg_num = true;
            let start = i;
            while i < end && bytes[i] != b'%' {
                i += 1;
            }
            if i > start {
                self.buf.push_str(&format[start..i]);
            }
            if i >= end {
                break;
            }
            i += 1; // the '%'
            self.f = Flags::default();
            // Flags, and the common case of a plain lower-case verb.
            while i < end {
                match bytes[i] {
                    b'#' => self.f.sharp = true,
                    b'0' => self.f.zero = true,
                    b'+' => self.f.plus = true,
                    b'-' => self.f.minus = true,
                    b' ' => self.f.space = true,
                    c if c.is_ascii_lowercase() && arg_num < args.len() => {
                        if c == b'v' {
                            self.f.sharp_v = self.f.sharp;
                            self.f.sharp = false;
                            self.f.plus_v = self.f.plus;
                            self.f.plus = false;
                        }
                        self.print_arg(&args[arg_num], char::from(c));
                        arg_num += 1;
                        i += 1;
                        continue 'format;
                    }
                    _ => break,
                }
                i += 1;
            }

            (arg_num, i, after_index) = self.arg_number(arg_num, format, i, args.len());

            // Width.
            if i < end && bytes[i] == b'*' {
                i += 1;
                let (num, next) = int_from_arg(args, arg_num);
                arg_num = next;
                if let Some(w) = num {
                    // A negative width means left-justified.
                    if w < 0 {
                        self.f.minus = true;
                        self.f.zero = false;
                    }
                    self.f.wid = usize::try_from(w.unsigned_abs()).ok();
                } else {
                    self.f.wid = None;
                    self.buf.push_str("%!(BADWIDTH)");
                }
                after_index = false;
            } else {
                let (wid, next) = parse_num(bytes, i, end);
                self.f.wid = wid;
                i = next;
                if after_index && wid.is_some() {
                    self.good_arg_num = false;
                }
            }

            // Precision.
            if i + 1 < end && bytes[i] == b'.' {
                i += 1;
                if after_index {
                    self.good_arg_num = false;
                }
                (arg_num, i, after_index) = self.arg_number(arg_num, format, i, args.len());
                if i < end && bytes[i] == b'*' {
                    i += 1;
                    let (num, next) = int_from_arg(args, arg_num);
                    arg_num = next;
                    // A negative precision is as bad as a missing one.
                    self.f.prec = num.and_then(|p| usize::try_from(p).ok());
                    if self.f.prec.is_none() {
                        self.buf.push_str("%!(BADPREC)");
                    }
                    after_index = false;
                } else {
                    let (prec, next) = parse_num(bytes, i, end);
                    self.f.prec = Some(prec.unwrap_or(0));
                    i = next;
                }
            }

            if !after_index {
                (arg_num, i, _) = self.arg_number(arg_num, format, i, args.len());
            }

            let Some(verb) = format.get(i..).and_then(|rest| rest.chars().next()) else {
                self.buf.push_str("%!(NOVERB)");
                break;
            };
            i += verb.len_utf8();

            if verb == '%' {
                self.buf.push('%');
            } else if !self.good_arg_num {
                let _ = write!(self.buf, "%!{verb}(BADINDEX)");
            } else if arg_num >= args.len() {
                let _ = write!(self.buf, "%!{verb}(MISSING)");
            } else {
                if verb == 'v' {
                    self.f.sharp_v = self.f.sharp;
                    self.f.sharp = false;
                    self.f.plus_v = self.f.plus;
                    self.f.plus = false;
                }
                self.print_arg(&args[arg_num], verb);
                arg_num += 1;
            }
        }

        if !self.reordered && arg_num < args.len() {
            self.f = Flags::default();
            self.buf.push_str("%!(EXTRA ");
            for (n, arg) in args[arg_num..].iter().enumerate() {
                if n > 0 {
                    self.buf.push_str(", ");
                }
                if arg.is_nil() {
                    self.buf.push_str("<nil>");
                } else {
                    self.buf.push_str(&arg.type_name());
                    self.buf.push('=');
                    self.print_arg(arg, 'v');
                }
            }
            self.buf.push(')');
        }
    }

    /// An explicit argument index `[n]` at `format[i..]`: the new argument number, the new
    /// position and whether an index was found.
    fn arg_number(
        &mut self,
        arg_num: usize,
        format: &str,
        i: usize,
        num_args: usize,
    ) -> (usize, usize, bool) {
        let bytes = format.as_bytes();
        if i >= bytes.len() || bytes[i] != b'[' {
            return (arg_num, i, false);
        }
        self.reordered = true;
        let rest = &bytes[i..];
        // `[n]`: at least three bytes and a closing bracket.
        let (index, width, ok) = match rest.iter().position(|b| *b == b']') {
            Some(close) if rest.len() >= 3 => match parse_num(rest, 1, close) {
                (Some(n), next) if next == close => (n.checked_sub(1), close + 1, true),
                _ => (None, close + 1, false),
            },
            _ => (None, 1, false),
        };
        if ok && let Some(index) = index.filter(|n| *n < num_args) {
            return (index, i + width, true);
        }
        self.good_arg_num = false;
        (arg_num, i + width, ok)
    }

    fn bad_verb(&mut self, verb: char, arg: &Value) {
        let _ = write!(self.buf, "%!{verb}(");
        if arg.is_nil() {
            self.buf.push_str("<nil>");
        } else {
            self.buf.push_str(&arg.type_name());
            self.buf.push('=');
            self.print_value(arg, 'v', 0);
        }
        self.buf.push(')');
    }

    /// `printArg`: one top-level operand.
    fn print_arg(&mut self, arg: &Value, verb: char) {
        if arg.is_nil() {
            match verb {
                'T' | 'v' => self.pad("<nil>"),
                _ => self.bad_verb(verb, arg),
            }
            return;
        }
        if verb == 'T' {
            let name = arg.type_name();
            self.fmt_s(&name);
            return;
        }
        self.print_value(arg, verb, 0);
    }

    /// `printValue`: a value at some nesting depth (list items and map entries are depth > 0).
    fn print_value(&mut self, value: &Value, verb: char, depth: usize) {
        match value {
            Value::Nil => {
                // Inside a slice or map, nil is an empty interface: `<nil>` whatever the verb.
                if self.f.sharp_v {
                    self.buf.push_str("interface {}(nil)");
                } else if depth == 0 && verb != 'v' {
                    self.bad_verb(verb, value);
                } else {
                    self.buf.push_str("<nil>");
                }
            }
            Value::Bool(b) => match verb {
                't' | 'v' => self.pad(if *b { "true" } else { "false" }),
                _ => self.bad_verb(verb, value),
            },
            Value::Int(i) | Value::Int64(i) => self.fmt_integer_verb(*i, verb, value),
            Value::Float(x) => self.fmt_float_verb(*x, verb, value),
            Value::String(s) => self.fmt_string(s, verb, value),
            Value::Bytes(b) => self.fmt_bytes(b, verb, depth),
            Value::List(items, kind) => {
                if self.f.sharp_v {
                    self.buf.push_str(&value.type_name());
                    self.buf.push('{');
                    for (n, item) in items.iter().enumerate() {
                        if n > 0 {
                            self.buf.push_str(", ");
                        }
                        self.print_item(item, *kind, verb, depth + 1);
                    }
                    self.buf.push('}');
                } else {
                    self.buf.push('[');
                    for (n, item) in items.iter().enumerate() {
                        if n > 0 {
                            self.buf.push(' ');
                        }
                        self.print_item(item, *kind, verb, depth + 1);
                    }
                    self.buf.push(']');
                }
            }
            Value::Map(map) => {
                let map = map.borrow();
                if self.f.sharp_v {
                    self.buf.push_str(&value.type_name());
                    self.buf.push('{');
                } else {
                    self.buf.push_str("map[");
                }
                for (n, (key, item)) in map.iter().enumerate() {
                    if n > 0 {
                        self.buf.push_str(if self.f.sharp_v { ", " } else { " " });
                    }
                    self.fmt_key(key, verb);
                    self.buf.push(':');
                    self.print_value(item, verb, depth + 1);
                }
                self.buf.push(if self.f.sharp_v { '}' } else { ']' });
            }
            Value::Object(object) => {
                // Helm's structs print through their `String()` (or Go's struct form, which
                // `format` gives): as a string for the string verbs.
                let text = object.format();
                match verb {
                    'v' | 's' => self.fmt_s(&text),
                    'q' | 'x' | 'X' => self.fmt_string(&text, verb, value),
                    _ => {
                        let _ = write!(self.buf, "%!{verb}({}={text})", object.type_name());
                    }
                }
            }
        }
    }

    /// A list item: `[]interface{}` items are interfaces (nil prints as `<nil>`); typed
    /// lists hold their element type directly.
    fn print_item(&mut self, item: &Value, kind: ListKind, verb: char, depth: usize) {
        if kind == ListKind::Any || !item.is_nil() {
            self.print_value(item, verb, depth);
        } else {
            self.bad_verb(verb, item);
        }
    }

    fn fmt_integer_verb(&mut self, i: i64, verb: char, value: &Value) {
        #[allow(clippy::cast_sign_loss)] // Go formats the two's complement bits
        let u = i as u64;
        match verb {
            'v' | 'd' => self.fmt_integer(u, 10, true, verb, LOWER_HEX),
            'b' => self.fmt_integer(u, 2, true, verb, LOWER_HEX),
            'o' | 'O' => self.fmt_integer(u, 8, true, verb, LOWER_HEX),
            'x' => self.fmt_integer(u, 16, true, verb, LOWER_HEX),
            'X' => self.fmt_integer(u, 16, true, verb, UPPER_HEX),
            'c' => {
                let c = rune_or_replacement(u);
                self.pad(c.encode_utf8(&mut [0; 4]));
            }
            'q' => {
                let c = rune_or_replacement(u);
                let mut out = String::new();
                append_quoted_rune(&mut out, c, self.f.plus);
                self.pad(&out);
            }
            'U' => self.fmt_unicode(u),
            _ => self.bad_verb(verb, value),
        }
    }

    /// `fmt.fmtInteger`.
    fn fmt_integer(&mut self, u: u64, base: u64, signed: bool, verb: char, digits: &[u8; 16]) {
        #[allow(clippy::cast_possible_wrap)]
        let negative = signed && (u as i64) < 0;
        let mut u = if negative { u.wrapping_neg() } else { u };
        let wid = self.f.wid.unwrap_or(0);
        // Two ways to ask for leading zeros: a precision, or the 0 flag with a width (the 0
        // flag is ignored when a precision is given).
        let mut prec = 0usize;
        if let Some(p) = self.f.prec {
            prec = p;
            if p == 0 && u == 0 {
                let zero = self.f.zero;
                self.f.zero = false;
                self.pad_bytes(wid);
                self.f.zero = zero;
                return;
            }
        } else if self.f.zero && !self.f.minus && self.f.wid.is_some() {
            prec = wid;
            if negative || self.f.plus || self.f.space {
                prec = prec.saturating_sub(1);
            }
        }
        // Digits right to left.
        let mut out: Vec<u8> = Vec::with_capacity(24 + prec);
        loop {
            #[allow(clippy::cast_possible_truncation)] // u % base < 16
            out.push(digits[(u % base) as usize]);
            u /= base;
            if u == 0 {
                break;
            }
        }
        while out.len() < prec {
            out.push(b'0');
        }
        if self.f.sharp {
            match base {
                2 => out.extend_from_slice(b"b0"),
                8 if out.last() != Some(&b'0') => out.push(b'0'),
                16 => {
                    out.push(if digits[10] == b'a' { b'x' } else { b'X' });
                    out.push(b'0');
                }
                _ => {}
            }
        }
        if verb == 'O' {
            out.extend_from_slice(b"o0");
        }
        if negative {
            out.push(b'-');
        } else if self.f.plus {
            out.push(b'+');
        } else if self.f.space {
            out.push(b' ');
        }
        out.reverse();
        let text = String::from_utf8_lossy(&out).into_owned();
        self.pad_no_zero(&text);
    }

    /// `%U`: `U+0041`, with `#` also the character (`U+0041 'A'`).
    fn fmt_unicode(&mut self, u: u64) {
        let prec = self.f.prec.filter(|p| *p > 4).unwrap_or(4);
        let mut text = format!("U+{u:0prec$X}");
        if self.f.sharp
            && let Some(c) = u32::try_from(u).ok().and_then(char::from_u32)
            && is_print(c)
        {
            let _ = write!(text, " '{c}'");
        }
        self.pad_no_zero(&text);
    }

    fn fmt_float_verb(&mut self, x: f64, verb: char, value: &Value) {
        match verb {
            'v' => self.fmt_float(x, 'g', -1),
            'b' | 'g' | 'G' | 'x' | 'X' => self.fmt_float(x, verb, -1),
            'f' | 'F' | 'e' | 'E' => self.fmt_float(x, verb, 6),
            _ => self.bad_verb(verb, value),
        }
    }

    /// `fmt.fmtFloat`.
    fn fmt_float(&mut self, x: f64, verb: char, default_prec: i32) {
        let prec = self
            .f
            .prec
            .map_or(default_prec, |p| i32::try_from(p).unwrap_or(i32::MAX));
        let formatted = format_float(x, if verb == 'F' { 'f' } else { verb }, prec);
        // A sign in front, always, to simplify what follows.
        let mut num: Vec<u8> = if formatted.starts_with(['-', '+']) {
            formatted.into_bytes()
        } else {
            let mut v = Vec::with_capacity(formatted.len() + 1);
            v.push(b'+');
            v.extend_from_slice(formatted.as_bytes());
            v
        };
        if self.f.space && num[0] == b'+' && !self.f.plus {
            num[0] = b' ';
        }
        // Infinities and NaN are not padded with zeros; NaN drops its sign unless asked.
        if num.get(1).is_some_and(|c| matches!(c, b'I' | b'N')) {
            if num[1] == b'N' && !self.f.space && !self.f.plus {
                num.remove(0);
            }
            let text = String::from_utf8_lossy(&num).into_owned();
            self.pad_no_zero(&text);
            return;
        }
        if self.f.sharp && verb != 'b' {
            let mut digits: i64 = 0;
            if matches!(verb, 'v' | 'g' | 'G' | 'x') {
                digits = if prec == -1 { 6 } else { i64::from(prec) };
            }
            let mut tail: Vec<u8> = Vec::new();
            let mut has_point = false;
            let mut saw_nonzero = false;
            let mut n = 1;
            while n < num.len() {
                match num[n] {
                    b'.' => has_point = true,
                    b'p' | b'P' => {
                        tail = num.split_off(n);
                        break;
                    }
                    b'e' | b'E' if !matches!(verb, 'x' | 'X') => {
                        tail = num.split_off(n);
                        break;
                    }
                    c => {
                        if c != b'0' {
                            saw_nonzero = true;
                        }
                        if saw_nonzero {
                            digits -= 1;
                        }
                    }
                }
                n += 1;
            }
            if !has_point {
                if num.len() == 2 && num[1] == b'0' {
                    digits -= 1;
                }
                num.push(b'.');
            }
            while digits > 0 {
                num.push(b'0');
                digits -= 1;
            }
            num.extend_from_slice(&tail);
        }
        if self.f.plus || num[0] != b'+' {
            let wid = self.f.wid.unwrap_or(0);
            if self.f.zero && !self.f.minus && self.f.wid.is_some() && wid > num.len() {
                self.buf.push(char::from(num[0]));
                self.pad_bytes(wid - num.len());
                self.buf.push_str(&String::from_utf8_lossy(&num[1..]));
                return;
            }
            let text = String::from_utf8_lossy(&num).into_owned();
            self.pad(&text);
            return;
        }
        let text = String::from_utf8_lossy(&num[1..]).into_owned();
        self.pad(&text);
    }

    fn fmt_string(&mut self, s: &str, verb: char, value: &Value) {
        match verb {
            'v' if self.f.sharp_v => self.fmt_q(s.as_bytes()),
            'v' | 's' => self.fmt_s(s),
            'x' => self.fmt_sx(s.as_bytes(), LOWER_HEX),
            'X' => self.fmt_sx(s.as_bytes(), UPPER_HEX),
            'q' => self.fmt_q(s.as_bytes()),
            _ => self.bad_verb(verb, value),
        }
    }

    /// A map key: a string operand, without building a [`Value`] for it.
    fn fmt_key(&mut self, key: &str, verb: char) {
        match verb {
            'v' | 's' | 'x' | 'X' | 'q' => self.fmt_string(key, verb, &Value::Nil),
            _ => {
                let _ = write!(self.buf, "%!{verb}(string=");
                self.fmt_s(key);
                self.buf.push(')');
            }
        }
    }

    /// `%s`: at most `precision` runes, padded.
    fn fmt_s(&mut self, s: &str) {
        let s = match self.f.prec {
            Some(p) => s.char_indices().nth(p).map_or(s, |(at, _)| &s[..at]),
            None => s,
        };
        self.pad(s);
    }

    /// `%x` of a string or bytes: two hex digits a byte, `#` adds `0x`, space separates bytes.
    fn fmt_sx(&mut self, bytes: &[u8], digits: &[u8; 16]) {
        let length = self.f.prec.map_or(bytes.len(), |p| p.min(bytes.len()));
        let mut width = 2 * length;
        if width == 0 {
            if let Some(wid) = self.f.wid {
                self.pad_bytes(wid);
            }
            return;
        }
        if self.f.space {
            if self.f.sharp {
                width *= 2;
            }
            width += length - 1;
        } else if self.f.sharp {
            width += 2;
        }
        let wid = self.f.wid.unwrap_or(0);
        if wid > width && !self.f.minus {
            self.pad_bytes(wid - width);
        }
        let x = if digits[10] == b'a' { 'x' } else { 'X' };
        if self.f.sharp {
            self.buf.push('0');
            self.buf.push(x);
        }
        for (n, byte) in bytes[..length].iter().enumerate() {
            if self.f.space && n > 0 {
                self.buf.push(' ');
                if self.f.sharp {
                    self.buf.push('0');
                    self.buf.push(x);
                }
            }
            self.buf.push(char::from(digits[usize::from(byte >> 4)]));
            self.buf.push(char::from(digits[usize::from(byte & 0xF)]));
        }
        if wid > width && self.f.minus {
            self.pad_bytes(wid - width);
        }
    }

    /// `%q` of a string: Go-quoted (`+`: ASCII only; `#`: backquoted when possible).
    fn fmt_q(&mut self, bytes: &[u8]) {
        let bytes = match self.f.prec {
            Some(p) => truncate_runes(bytes, p),
            None => bytes,
        };
        if self.f.sharp
            && let Ok(s) = std::str::from_utf8(bytes)
            && can_backquote(s)
        {
            let text = format!("`{s}`");
            self.pad(&text);
            return;
        }
        let mut out = String::with_capacity(bytes.len() + 2);
        append_quoted(&mut out, bytes, '"', self.f.plus);
        self.pad(&out);
    }

    /// `[]byte` operands (`.Files.GetBytes`).
    fn fmt_bytes(&mut self, bytes: &[u8], verb: char, depth: usize) {
        match verb {
            'v' | 'd' => {
                if self.f.sharp_v {
                    self.buf
                        .push_str(if depth == 0 { "[]byte{" } else { "[]uint8{" });
                    for (n, byte) in bytes.iter().enumerate() {
                        if n > 0 {
                            self.buf.push_str(", ");
                        }
                        let _ = write!(self.buf, "{byte:#x}");
                    }
                    self.buf.push('}');
                } else {
                    self.buf.push('[');
                    for (n, byte) in bytes.iter().enumerate() {
                        if n > 0 {
                            self.buf.push(' ');
                        }
                        self.fmt_integer(u64::from(*byte), 10, false, verb, LOWER_HEX);
                    }
                    self.buf.push(']');
                }
            }
            's' => {
                let text = lossy_utf8(bytes);
                self.fmt_s(&text);
            }
            'x' => self.fmt_sx(bytes, LOWER_HEX),
            'X' => self.fmt_sx(bytes, UPPER_HEX),
            'q' => self.fmt_q(bytes),
            _ => {
                self.buf.push('[');
                for (n, byte) in bytes.iter().enumerate() {
                    if n > 0 {
                        self.buf.push(' ');
                    }
                    match verb {
                        'b' | 'o' | 'O' | 'x' | 'X' | 'c' | 'q' | 'U' => {
                            self.fmt_integer_verb(i64::from(*byte), verb, &Value::Nil);
                        }
                        _ => {
                            let _ = write!(self.buf, "%!{verb}(uint8={byte})");
                        }
                    }
                }
                self.buf.push(']');
            }
        }
    }
}

fn rune_or_replacement(u: u64) -> char {
    u32::try_from(u)
        .ok()
        .and_then(char::from_u32)
        .unwrap_or('\u{FFFD}')
}

/// The first `n` runes of `bytes` (invalid bytes count as one rune each, as in Go).
fn truncate_runes(bytes: &[u8], n: usize) -> &[u8] {
    let mut at = 0;
    for _ in 0..n {
        if at >= bytes.len() {
            return bytes;
        }
        at += utf8_width(&bytes[at..]);
    }
    &bytes[..at.min(bytes.len())]
}

/// Text from bytes that may not be UTF-8, as Go's decoders see them: every byte that does not
/// start a valid sequence becomes one U+FFFD (what Helm's output shows where Go slices a
/// character apart; Rust's `from_utf8_lossy` would merge some of them).
pub fn lossy_utf8(bytes: &[u8]) -> String {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return s.to_string();
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    let mut rest = bytes;
    while !rest.is_empty() {
        let width = utf8_width(rest);
        match std::str::from_utf8(&rest[..width]) {
            Ok(s) if width > 1 || rest[0] < 0x80 => out.push_str(s),
            _ => out.push('\u{FFFD}'),
        }
        rest = &rest[width..];
    }
    out
}

/// The length of the UTF-8 sequence at the start of `bytes`, or 1 for an invalid one.
fn utf8_width(bytes: &[u8]) -> usize {
    let len = match bytes.first() {
        Some(b) if *b < 0x80 => return 1,
        Some(b) if b & 0xE0 == 0xC0 => 2,
        Some(b) if b & 0xF0 == 0xE0 => 3,
        Some(b) if b & 0xF8 == 0xF0 => 4,
        _ => return 1,
    };
    match bytes.get(..len) {
        Some(seq) if std::str::from_utf8(seq).is_ok() => len,
        _ => 1,
    }
}

/// `strconv.CanBackquote`: a single-line string with no control characters but tab, no
/// backquote and no U+FEFF.
fn can_backquote(s: &str) -> bool {
    s.chars()
        .all(|c| c != '`' && c != '\u{FEFF}' && (c == '\t' || (c >= ' ' && c != '\u{7F}')))
}

/// Go's `strconv.appendQuotedWith` for `quote` (`"` or `'`) over possibly invalid UTF-8.
fn append_quoted(out: &mut String, bytes: &[u8], quote: char, ascii_only: bool) {
    out.push(quote);
    if let Ok(text) = std::str::from_utf8(bytes) {
        // The common case (`quote` runs on most chart values): valid text, mostly plain ASCII.
        for c in text.chars() {
            if (' '..='~').contains(&c) && c != quote && c != '\\' {
                out.push(c);
            } else {
                append_escaped_rune(out, c, quote, ascii_only);
            }
        }
        out.push(quote);
        return;
    }
    let mut rest = bytes;
    while !rest.is_empty() {
        let width = utf8_width(rest);
        match std::str::from_utf8(&rest[..width])
            .ok()
            .and_then(|s| s.chars().next())
        {
            Some(c) => append_escaped_rune(out, c, quote, ascii_only),
            None => {
                let _ = write!(out, "\\x{:02x}", rest[0]);
            }
        }
        rest = &rest[width..];
    }
    out.push(quote);
}

/// `strconv.QuoteRune` (`QuoteRuneToASCII` when `ascii_only`).
fn append_quoted_rune(out: &mut String, c: char, ascii_only: bool) {
    out.push('\'');
    append_escaped_rune(out, c, '\'', ascii_only);
    out.push('\'');
}

fn append_escaped_rune(out: &mut String, c: char, quote: char, ascii_only: bool) {
    if c == quote || c == '\\' {
        out.push('\\');
        out.push(c);
        return;
    }
    let printable = if ascii_only {
        c.is_ascii() && is_print(c)
    } else {
        is_print(c)
    };
    if printable {
        out.push(c);
        return;
    }
    match c {
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{C}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{B}' => out.push_str("\\v"),
        c if c < ' ' || c == '\u{7F}' => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c if u32::from(c) < 0x10000 => {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        }
        c => {
            let _ = write!(out, "\\U{:08x}", u32::from(c));
        }
    }
}

/// `strconv.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space.
pub fn is_print(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    matches!(
        get_general_category(c),
        G::UppercaseLetter
            | G::LowercaseLetter
            | G::TitlecaseLetter
            | G::ModifierLetter
            | G::OtherLetter
            | G::NonspacingMark
            | G::SpacingMark
            | G::EnclosingMark
            | G::DecimalNumber
            | G::LetterNumber
            | G::OtherNumber
            | G::ConnectorPunctuation
            | G::DashPunctuation
            | G::OpenPunctuation
            | G::ClosePunctuation
            | G::InitialPunctuation
            | G::FinalPunctuation
            | G::OtherPunctuation
            | G::MathSymbol
            | G::CurrencySymbol
            | G::ModifierSymbol
            | G::OtherSymbol
    )
}

/// Decimal digits of a non-negative finite float: `digits` without leading or trailing
/// zeros, the value being `0.digits × 10^point` (Go's `decimal`).
struct Decimal {
    digits: Vec<u8>,
    point: i32,
}

impl Decimal {
    /// The shortest digits that read back as `x` (Go's and Rust's shortest forms agree).
    fn shortest(x: f64) -> Decimal {
        Self::from_scientific(&format!("{x:e}"))
    }

    /// Every digit of `x`: a binary float has a finite decimal expansion (at most 767
    /// significant digits).
    fn exact(x: f64) -> Decimal {
        Self::from_scientific(&format!("{x:.767e}"))
    }

    fn from_scientific(s: &str) -> Decimal {
        let (mantissa, exp) = s.split_once('e').unwrap_or((s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let mut digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
        while digits.last() == Some(&b'0') {
            digits.pop();
        }
        if digits.is_empty() {
            return Decimal { digits, point: 0 };
        }
        Decimal {
            digits,
            point: exp + 1,
        }
    }

    /// Rounds to `nd` significant digits, ties to even (the expansion is exact, so a `5`
    /// followed by nothing is a true tie).
    fn round(&mut self, nd: i64) {
        let Ok(nd) = usize::try_from(nd) else {
            return;
        };
        if nd >= self.digits.len() {
            return;
        }
        let up = if self.digits[nd] == b'5' && nd + 1 == self.digits.len() {
            nd > 0 && (self.digits[nd - 1] - b'0') % 2 == 1
        } else {
            self.digits[nd] >= b'5'
        };
        self.digits.truncate(nd);
        if up {
            let mut i = nd;
            loop {
                if i == 0 {
                    // All nines: 1 followed by nothing, one place further left.
                    self.digits.clear();
                    self.digits.push(b'1');
                    self.point += 1;
                    break;
                }
                i -= 1;
                if self.digits[i] < b'9' {
                    self.digits[i] += 1;
                    self.digits.truncate(i + 1);
                    break;
                }
            }
        }
        while self.digits.last() == Some(&b'0') {
            self.digits.pop();
        }
        if self.digits.is_empty() {
            self.point = 0;
        }
    }

    fn digit(&self, i: i64) -> u8 {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.digits.get(i))
            .copied()
            .unwrap_or(b'0')
    }

    /// `%e`: `d.ddde±dd` with `prec` digits after the point.
    fn fmt_e(&self, out: &mut String, prec: i64, e: char) {
        out.push(char::from(self.digits.first().copied().unwrap_or(b'0')));
        if prec > 0 {
            out.push('.');
            for i in 1..=prec {
                out.push(char::from(self.digit(i)));
            }
        }
        out.push(e);
        let exp = if self.digits.is_empty() {
            0
        } else {
            self.point - 1
        };
        out.push(if exp < 0 { '-' } else { '+' });
        let _ = write!(out, "{:02}", exp.unsigned_abs());
    }

    /// `%f` with `prec` digits after the point.
    fn fmt_f(&self, out: &mut String, prec: i64) {
        if self.point > 0 {
            for i in 0..i64::from(self.point) {
                out.push(char::from(self.digit(i)));
            }
        } else {
            out.push('0');
        }
        if prec > 0 {
            out.push('.');
            for i in 1..=prec {
                out.push(char::from(self.digit(i64::from(self.point) + i - 1)));
            }
        }
    }
}

/// `strconv.FormatFloat(x, verb, prec, 64)` for the verbs `b e E f g G x X` (`prec` -1: the
/// shortest representation).
pub fn format_float(x: f64, verb: char, prec: i32) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    let mut out = String::new();
    if x.is_sign_negative() {
        out.push('-');
    }
    match verb {
        'b' => {
            let (mantissa, exp) = binary_parts(x);
            let exp = exp - 52;
            let _ = write!(out, "{mantissa}p{}{exp}", if exp >= 0 { "+" } else { "" });
            return out;
        }
        'x' | 'X' => {
            format_hex_float(&mut out, x, verb, prec);
            return out;
        }
        _ => {}
    }
    let abs = x.abs();
    let shortest = prec < 0;
    let mut prec = i64::from(prec);
    let mut digits;
    if shortest {
        digits = Decimal::shortest(abs);
        let nd = i64::try_from(digits.digits.len()).unwrap_or(i64::MAX);
        prec = match verb {
            'e' | 'E' => nd - 1,
            'f' => (nd - i64::from(digits.point)).max(0),
            _ => nd,
        };
    } else {
        digits = Decimal::exact(abs);
        match verb {
            'e' | 'E' => digits.round(prec + 1),
            'f' => digits.round(i64::from(digits.point) + prec),
            _ => {
                if prec == 0 {
                    prec = 1;
                }
                digits.round(prec);
            }
        }
    }
    let nd = i64::try_from(digits.digits.len()).unwrap_or(i64::MAX);
    let point = i64::from(digits.point);
    match verb {
        'e' | 'E' => digits.fmt_e(&mut out, prec, verb),
        'f' => digits.fmt_f(&mut out, prec),
        _ => {
            let mut eprec = prec;
            if eprec > nd && nd >= point {
                eprec = nd;
            }
            if shortest {
                eprec = 6;
            }
            let exp = point - 1;
            let e = if verb == 'G' { 'E' } else { 'e' };
            if exp < -4 || exp >= eprec {
                digits.fmt_e(&mut out, prec.min(nd) - 1, e);
            } else {
                if prec > point {
                    prec = nd;
                }
                digits.fmt_f(&mut out, (prec - point).max(0));
            }
        }
    }
    out
}

/// The mantissa (with the implicit bit) and unbiased exponent of `x`.
fn binary_parts(x: f64) -> (u64, i64) {
    let bits = x.to_bits();
    let mut exp = i64::try_from((bits >> 52) & 0x7FF).unwrap_or(0);
    let mut mantissa = bits & ((1 << 52) - 1);
    if exp == 0 {
        exp += 1;
    } else {
        mantissa |= 1 << 52;
    }
    (mantissa, exp - 1023)
}

/// `%x` of a float: `0x1.8p+00`.
fn format_hex_float(out: &mut String, x: f64, verb: char, prec: i32) {
    let (mut mantissa, mut exp) = binary_parts(x);
    if mantissa == 0 {
        exp = 0;
    }
    mantissa <<= 60 - 52;
    while mantissa != 0 && mantissa & (1 << 60) == 0 {
        mantissa <<= 1;
        exp -= 1;
    }
    if (0..15).contains(&prec) {
        let shift = u32::try_from(prec * 4).unwrap_or(0);
        let extra = (mantissa << shift) & ((1 << 60) - 1);
        mantissa >>= 60 - shift;
        if extra | (mantissa & 1) > 1 << 59 {
            mantissa += 1;
        }
        mantissa <<= 60 - shift;
        if mantissa & (1 << 61) != 0 {
            mantissa >>= 1;
            exp += 1;
        }
    }
    let hex = if verb == 'X' { UPPER_HEX } else { LOWER_HEX };
    out.push('0');
    out.push(verb);
    out.push(if (mantissa >> 60) & 1 == 1 { '1' } else { '0' });
    mantissa <<= 4;
    let hex_digit = |m: u64| char::from(hex[usize::try_from((m >> 60) & 15).unwrap_or(0)]);
    if prec < 0 && mantissa != 0 {
        out.push('.');
        while mantissa != 0 {
            out.push(hex_digit(mantissa));
            mantissa <<= 4;
        }
    } else if prec > 0 {
        out.push('.');
        for _ in 0..prec {
            out.push(hex_digit(mantissa));
            mantissa <<= 4;
        }
    }
    out.push(if verb == 'X' { 'P' } else { 'p' });
    out.push(if exp < 0 { '-' } else { '+' });
    let _ = write!(out, "{:02}", exp.unsigned_abs());
}

#[cfg(test)]
mod tests;
