//! Sprig's string functions (v3.3.0 as Helm v4 ships it): case, trimming, slicing, quoting,
//! wrapping, splitting and joining, Go's `path` helpers, `urlParse`/`urlJoin`, and
//! `toString`/`toStrings`/`atoi`.
//!
//! Each function behaves as its Go original, including the odd corners charts can hit:
//! byte-based slicing in `trunc`/`substr`/`abbrev`/`wrapWith` (a cut inside a multi-byte
//! character gives one U+FFFD per stray byte, as Helm's SDK reports Go's broken bytes),
//! `initials`/`nospace` reading bytes as Latin-1 as goutils does, Go's runtime errors for bad `substr` bounds, and Go's refusal of
//! mistyped arguments (`upper 1` is an error: templates do not convert arguments).
//!
//! Outputs are capped at [`MAX_OUTPUT`] bytes (`repeat`, `indent`, `replace`, …) so a template
//! cannot exhaust memory.

use std::collections::BTreeMap;

use crate::cast::{self, go_int, go_string, want_args};
use crate::template::{Call, FuncMap};
use crate::value::{ListKind, Value};

/// The largest string a function here builds: 64 MiB.
pub const MAX_OUTPUT: usize = 64 << 20;

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    map.insert("hello", hello);
    map.insert("abbrev", abbrev);
    map.insert("abbrevboth", abbrevboth);
    map.insert("trunc", trunc);
    map.insert("trim", trim);
    map.insert("upper", upper);
    map.insert("lower", lower);
    map.insert("title", title);
    map.insert("untitle", untitle);
    map.insert("substr", substr);
    map.insert("repeat", repeat);
    map.insert("trimall", trim_all);
    map.insert("trimAll", trim_all);
    map.insert("trimSuffix", trim_suffix);
    map.insert("trimPrefix", trim_prefix);
    map.insert("nospace", nospace);
    map.insert("initials", initials);
    map.insert("swapcase", swapcase);
    map.insert("shuffle", shuffle);
    map.insert("snakecase", snakecase);
    map.insert("camelcase", camelcase);
    map.insert("kebabcase", kebabcase);
    map.insert("wrap", wrap);
    map.insert("wrapWith", wrap_with);
    map.insert("contains", contains);
    map.insert("hasPrefix", has_prefix);
    map.insert("hasSuffix", has_suffix);
    map.insert("quote", quote);
    map.insert("squote", squote);
    map.insert("cat", cat);
    map.insert("indent", indent);
    map.insert("nindent", nindent);
    map.insert("replace", replace);
    map.insert("plural", plural);
    map.insert("toString", to_string);
    map.insert("atoi", atoi);
    map.insert("split", split);
    map.insert("splitList", split_list);
    map.insert("splitn", splitn);
    map.insert("toStrings", to_strings);
    map.insert("join", join);
    map.insert("sortAlpha", sort_alpha);
    map.insert("base", base);
    map.insert("dir", dir);
    map.insert("clean", clean);
    map.insert("ext", ext);
    map.insert("isAbs", is_abs);
    map.insert("osBase", base);
    map.insert("osDir", dir);
    map.insert("osClean", clean);
    map.insert("osExt", ext);
    map.insert("osIsAbs", is_abs);
    map.insert("urlParse", url::url_parse);
    map.insert("urlJoin", url::url_join);
}

mod url;

type Result = std::result::Result<Value, String>;

/// One string parameter.
fn one_string<'a>(call: &Call<'_>, args: &'a [Value]) -> std::result::Result<&'a str, String> {
    want_args(call.name, args, 1)?;
    go_string(&args[0])
}

/// Two string parameters.
fn two_strings<'a>(
    call: &Call<'_>,
    args: &'a [Value],
) -> std::result::Result<(&'a str, &'a str), String> {
    want_args(call.name, args, 2)?;
    Ok((go_string(&args[0])?, go_string(&args[1])?))
}

/// `size` when it is within [`MAX_OUTPUT`] (`None`: it overflowed), else the error for `name`.
fn check_size(name: &str, size: Option<usize>) -> std::result::Result<usize, String> {
    match size {
        Some(n) if n <= MAX_OUTPUT => Ok(n),
        _ => Err(format!(
            "{name}: the result would be over the {} MiB limit",
            MAX_OUTPUT >> 20
        )),
    }
}

/// Bytes cut out of a string at any byte offsets, as Go's slicing does (a broken character
/// becomes U+FFFD).
fn from_bytes(bytes: &[u8]) -> Value {
    Value::from(crate::fmt::lossy_utf8(bytes))
}

fn hello(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 0)?;
    Ok(Value::str("Hello!"))
}

/// goutils' `AbbreviateFull`: `...` and a window of `str` at most `max_width` bytes long;
/// `None` for Go's "illegal argument" errors (Sprig turns them into "").
fn abbreviate_full(bytes: &[u8], offset: i64, max_width: i64) -> Option<Vec<u8>> {
    let len = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    if max_width < 4 {
        return None;
    }
    if len <= max_width {
        return Some(bytes.to_vec());
    }
    // Go's int arithmetic wraps; so does this (a huge negative offset lands here).
    let mut offset = offset.min(len);
    if len.wrapping_sub(offset) < max_width - 3 {
        offset = len - (max_width - 3);
    }
    let at = |i: i64| usize::try_from(i).unwrap_or(0).min(bytes.len());
    let mut out = b"...".to_vec();
    if offset <= 4 {
        let mut head = bytes[..at(max_width - 3)].to_vec();
        head.extend_from_slice(b"...");
        return Some(head);
    }
    if max_width < 7 {
        return None;
    }
    if offset + max_width - 3 < len {
        out.extend(abbreviate_full(&bytes[at(offset)..], 0, max_width - 3).unwrap_or_default());
        return Some(out);
    }
    out.extend_from_slice(&bytes[at(len - (max_width - 3))..]);
    Some(out)
}

fn abbrev(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 2)?;
    let width = go_int(&args[0])?;
    let s = go_string(&args[1])?;
    if width < 4 {
        return Ok(Value::str(s));
    }
    Ok(from_bytes(
        &abbreviate_full(s.as_bytes(), 0, width).unwrap_or_default(),
    ))
}

fn abbrevboth(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 3)?;
    let left = go_int(&args[0])?;
    let right = go_int(&args[1])?;
    let s = go_string(&args[2])?;
    if right < 4 || (left > 0 && right < 7) {
        return Ok(Value::str(s));
    }
    Ok(from_bytes(
        &abbreviate_full(s.as_bytes(), left, right).unwrap_or_default(),
    ))
}

fn trunc(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 2)?;
    let count = go_int(&args[0])?;
    let s = go_string(&args[1])?;
    let bytes = s.as_bytes();
    let len = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
    // A negative count keeps the last bytes, a positive one the first.
    if count < 0 && len + count > 0 {
        let start = usize::try_from(len + count).unwrap_or(0);
        return Ok(from_bytes(&bytes[start..]));
    }
    if count >= 0 && len > count {
        let end = usize::try_from(count).unwrap_or(0);
        return Ok(from_bytes(&bytes[..end]));
    }
    Ok(Value::str(s))
}

fn trim(call: &mut Call<'_>, args: &[Value]) -> Result {
    // Go's unicode.IsSpace is Unicode's White_Space, as Rust's `trim`.
    Ok(Value::str(one_string(call, args)?.trim()))
}

fn upper(call: &mut Call<'_>, args: &[Value]) -> Result {
    Ok(Value::str(go_to_upper(one_string(call, args)?)))
}

fn lower(call: &mut Call<'_>, args: &[Value]) -> Result {
    Ok(Value::str(go_to_lower(one_string(call, args)?)))
}

fn title(call: &mut Call<'_>, args: &[Value]) -> Result {
    Ok(Value::str(go_title(one_string(call, args)?)))
}

fn untitle(call: &mut Call<'_>, args: &[Value]) -> Result {
    // goutils' Uncapitalize: the first letter of each space-separated word lowered.
    let s = one_string(call, args)?;
    let mut out = String::with_capacity(s.len());
    let mut next = true;
    for c in s.chars() {
        if c.is_whitespace() {
            next = true;
            out.push(c);
        } else if next {
            out.push(lower_rune(c));
            next = false;
        } else {
            out.push(c);
        }
    }
    Ok(Value::str(out))
}

fn substr(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 3)?;
    let start = go_int(&args[0])?;
    let end = go_int(&args[1])?;
    let s = go_string(&args[2])?;
    let bytes = s.as_bytes();
    let len = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
    let index = |i: i64| usize::try_from(i).unwrap_or(0);
    // Go's slice rules, with its runtime error for out-of-range bounds.
    let (from, to) = if start < 0 {
        if end < 0 {
            return Err(format!("runtime error: slice bounds out of range [:{end}]"));
        }
        if end > len {
            return Err(format!(
                "runtime error: slice bounds out of range [:{end}] with length {len}"
            ));
        }
        (0, end)
    } else if end < 0 || end > len {
        if start > len {
            return Err(format!(
                "runtime error: slice bounds out of range [{start}:{len}]"
            ));
        }
        (start, len)
    } else {
        if start > end {
            return Err(format!(
                "runtime error: slice bounds out of range [{start}:{end}]"
            ));
        }
        (start, end)
    };
    Ok(from_bytes(&bytes[index(from)..index(to)]))
}

fn repeat(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 2)?;
    let count = go_int(&args[0])?;
    let s = go_string(&args[1])?;
    let Ok(count) = usize::try_from(count) else {
        return Err("strings: negative Repeat count".into());
    };
    check_size("repeat", s.len().checked_mul(count))?;
    Ok(Value::str(s.repeat(count)))
}

fn trim_all(call: &mut Call<'_>, args: &[Value]) -> Result {
    let (cutset, s) = two_strings(call, args)?;
    Ok(Value::str(s.trim_matches(|c| cutset.contains(c))))
}

fn trim_suffix(call: &mut Call<'_>, args: &[Value]) -> Result {
    let (suffix, s) = two_strings(call, args)?;
    Ok(Value::str(s.strip_suffix(suffix).unwrap_or(s)))
}

fn trim_prefix(call: &mut Call<'_>, args: &[Value]) -> Result {
    let (prefix, s) = two_strings(call, args)?;
    Ok(Value::str(s.strip_prefix(prefix).unwrap_or(s)))
}

/// Whether a byte read as a Latin-1 character is Go's `unicode.IsSpace`.
fn latin1_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ' | 0x85 | 0xA0)
}

fn nospace(call: &mut Call<'_>, args: &[Value]) -> Result {
    let s = one_string(call, args)?;
    // goutils walks bytes as Latin-1 characters: when anything is dropped, the other bytes
    // are re-encoded one by one (what Helm prints for non-ASCII text).
    if !s.bytes().any(latin1_space) {
        return Ok(Value::str(s));
    }
    let out: String = s
        .bytes()
        .filter(|b| !latin1_space(*b))
        .map(char::from)
        .collect();
    Ok(Value::str(out))
}

fn initials(call: &mut Call<'_>, args: &[Value]) -> Result {
    let s = one_string(call, args)?;
    // Bytes read as Latin-1 characters, as goutils does.
    let mut out = String::new();
    let mut gap = true;
    for b in s.bytes() {
        if latin1_space(b) {
            gap = true;
        } else if gap {
            out.push(char::from(b));
            gap = false;
        }
    }
    Ok(Value::str(out))
}

fn swapcase(call: &mut Call<'_>, args: &[Value]) -> Result {
    use unicode_general_category::GeneralCategory as G;
    let s = one_string(call, args)?;
    // goutils' word-based swap: a lower-case letter starting a word becomes title case.
    let mut out = String::with_capacity(s.len());
    let mut whitespace = true;
    for c in s.chars() {
        match category(c) {
            G::UppercaseLetter | G::TitlecaseLetter => {
                out.push(lower_rune(c));
                whitespace = false;
            }
            G::LowercaseLetter => {
                out.push(if whitespace {
                    title_rune(c)
                } else {
                    upper_rune(c)
                });
                whitespace = false;
            }
            _ => {
                whitespace = c.is_whitespace();
                out.push(c);
            }
        }
    }
    Ok(Value::str(out))
}

fn shuffle(call: &mut Call<'_>, args: &[Value]) -> Result {
    use rand::seq::SliceRandom as _;
    let s = one_string(call, args)?;
    let mut chars: Vec<char> = s.chars().collect();
    chars.shuffle(&mut call.env.rng);
    Ok(Value::str(chars.into_iter().collect::<String>()))
}

fn snakecase(call: &mut Call<'_>, args: &[Value]) -> Result {
    Ok(Value::str(words_to_lower(one_string(call, args)?, '_')))
}

fn kebabcase(call: &mut Call<'_>, args: &[Value]) -> Result {
    Ok(Value::str(words_to_lower(one_string(call, args)?, '-')))
}

fn camelcase(call: &mut Call<'_>, args: &[Value]) -> Result {
    Ok(Value::str(pascal_case(one_string(call, args)?)))
}

fn wrap(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 2)?;
    let width = go_int(&args[0])?;
    let s = go_string(&args[1])?;
    Ok(from_bytes(&wrap_custom(s.as_bytes(), width, b"\n", false)))
}

fn wrap_with(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 3)?;
    let width = go_int(&args[0])?;
    let separator = go_string(&args[1])?;
    let s = go_string(&args[2])?;
    let separator = if separator.is_empty() {
        "\n"
    } else {
        separator
    };
    // Every break adds the separator: bound the result before building it.
    let breaks = s.len() / usize::try_from(width.max(1)).unwrap_or(1) + 1;
    check_size(
        "wrapWith",
        separator
            .len()
            .checked_mul(breaks)
            .and_then(|n| n.checked_add(s.len())),
    )?;
    Ok(from_bytes(&wrap_custom(
        s.as_bytes(),
        width,
        separator.as_bytes(),
        true,
    )))
}

/// goutils' `WrapCustom`: breaks at the last space within `width` bytes; a word longer than
/// the width is cut when `wrap_long`, else kept whole up to the next space.
fn wrap_custom(s: &[u8], width: i64, newline: &[u8], wrap_long: bool) -> Vec<u8> {
    if s.is_empty() {
        return Vec::new();
    }
    let width = usize::try_from(width.max(1)).unwrap_or(usize::MAX);
    let len = s.len();
    let mut offset = 0;
    let mut out = Vec::with_capacity(len + len / width.max(1) * newline.len());
    while len - offset > width {
        if s[offset] == b' ' {
            offset += 1;
            continue;
        }
        let end = width + offset + 1;
        if let Some(space) = s[offset..end].iter().rposition(|b| *b == b' ') {
            let at = offset + space;
            out.extend_from_slice(&s[offset..at]);
            out.extend_from_slice(newline);
            offset = at + 1;
        } else if wrap_long {
            out.extend_from_slice(&s[offset..offset + width]);
            out.extend_from_slice(newline);
            offset += width;
        } else {
            let end = width + offset;
            match s[end..].iter().position(|b| *b == b' ') {
                None => {
                    out.extend_from_slice(&s[offset..]);
                    offset = len;
                }
                Some(space) => {
                    let at = end + space;
                    out.extend_from_slice(&s[offset..at]);
                    out.extend_from_slice(newline);
                    offset = at + 1;
                }
            }
        }
    }
    out.extend_from_slice(&s[offset..]);
    out
}

fn contains(call: &mut Call<'_>, args: &[Value]) -> Result {
    let (needle, s) = two_strings(call, args)?;
    Ok(Value::Bool(s.contains(needle)))
}

fn has_prefix(call: &mut Call<'_>, args: &[Value]) -> Result {
    let (prefix, s) = two_strings(call, args)?;
    Ok(Value::Bool(s.starts_with(prefix)))
}

fn has_suffix(call: &mut Call<'_>, args: &[Value]) -> Result {
    let (suffix, s) = two_strings(call, args)?;
    Ok(Value::Bool(s.ends_with(suffix)))
}

#[allow(clippy::unnecessary_wraps)] // the shape of every template function
fn quote(_: &mut Call<'_>, args: &[Value]) -> Result {
    let quoted: Vec<String> = args
        .iter()
        .filter(|v| !v.is_nil())
        .map(|v| crate::fmt::quote(&cast::to_string(v)))
        .collect();
    Ok(Value::str(quoted.join(" ")))
}

#[allow(clippy::unnecessary_wraps)] // the shape of every template function
fn squote(_: &mut Call<'_>, args: &[Value]) -> Result {
    let quoted: Vec<String> = args
        .iter()
        .filter(|v| !v.is_nil())
        .map(|v| format!("'{}'", crate::fmt::sprint(std::slice::from_ref(v))))
        .collect();
    Ok(Value::str(quoted.join(" ")))
}

#[allow(clippy::unnecessary_wraps)] // the shape of every template function
fn cat(_: &mut Call<'_>, args: &[Value]) -> Result {
    let parts: Vec<String> = args
        .iter()
        .filter(|v| !v.is_nil())
        .map(|v| crate::fmt::sprint(std::slice::from_ref(v)))
        .collect();
    Ok(Value::str(parts.join(" ")))
}

/// Sprig's `indent`: `spaces` spaces before the text and after every newline in it.
fn indent_text(spaces: i64, s: &str) -> std::result::Result<String, String> {
    let Ok(spaces) = usize::try_from(spaces) else {
        return Err("strings: negative Repeat count".into());
    };
    let lines = s.bytes().filter(|b| *b == b'\n').count() + 1;
    check_size(
        "indent",
        spaces
            .checked_mul(lines)
            .and_then(|n| n.checked_add(s.len() + 1)),
    )?;
    let pad = " ".repeat(spaces);
    let mut out = String::with_capacity(s.len() + spaces * lines);
    out.push_str(&pad);
    for (i, line) in s.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str(&pad);
        }
        out.push_str(line);
    }
    Ok(out)
}

fn indent(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 2)?;
    let spaces = go_int(&args[0])?;
    Ok(Value::str(indent_text(spaces, go_string(&args[1])?)?))
}

fn nindent(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 2)?;
    let spaces = go_int(&args[0])?;
    let mut out = String::from("\n");
    out.push_str(&indent_text(spaces, go_string(&args[1])?)?);
    Ok(Value::str(out))
}

fn replace(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 3)?;
    let old = go_string(&args[0])?;
    let new = go_string(&args[1])?;
    let s = go_string(&args[2])?;
    if new.len() > old.len() {
        // An empty `old` matches before every character and at the end, as in Go.
        let matches = if old.is_empty() {
            s.chars().count() + 1
        } else {
            s.matches(old).count()
        };
        check_size(
            "replace",
            (new.len() - old.len())
                .checked_mul(matches)
                .and_then(|n| n.checked_add(s.len())),
        )?;
    }
    Ok(Value::str(s.replace(old, new)))
}

fn plural(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 3)?;
    let one = go_string(&args[0])?;
    let many = go_string(&args[1])?;
    let count = go_int(&args[2])?;
    Ok(Value::str(if count == 1 { one } else { many }))
}

fn to_string(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 1)?;
    Ok(Value::str(cast::to_string(&args[0])))
}

/// `strconv.Atoi` with its error ignored: 0 for bad input, the nearest `int` on overflow.
fn go_atoi(s: &str) -> i64 {
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return 0;
    }
    match digits.parse::<i64>() {
        Ok(n) if negative => -n,
        Ok(n) => n,
        Err(_) if negative => {
            // "-9223372036854775808" does not fit the positive parse; everything below
            // clamps to it anyway.
            i64::MIN
        }
        Err(_) => i64::MAX,
    }
}

fn atoi(call: &mut Call<'_>, args: &[Value]) -> Result {
    Ok(Value::Int(go_atoi(one_string(call, args)?)))
}

/// Go's `strings.Split`: an empty separator splits into characters; an empty string splits
/// into one empty piece (none when the separator is empty too).
fn go_split<'a>(s: &'a str, sep: &str, limit: Option<usize>) -> Vec<&'a str> {
    if limit == Some(0) {
        return Vec::new();
    }
    if sep.is_empty() {
        let mut pieces: Vec<&str> = Vec::new();
        let mut rest = s;
        while let Some(c) = rest.chars().next() {
            if limit.is_some_and(|n| pieces.len() + 1 == n) {
                break;
            }
            let (head, tail) = rest.split_at(c.len_utf8());
            pieces.push(head);
            rest = tail;
        }
        if !rest.is_empty() {
            pieces.push(rest);
        }
        return pieces;
    }
    match limit {
        Some(n) => s.splitn(n, sep).collect(),
        None => s.split(sep).collect(),
    }
}

fn indexed_map(pieces: &[&str]) -> Value {
    Value::map(
        pieces
            .iter()
            .enumerate()
            .map(|(i, piece)| (format!("_{i}"), Value::str(piece)))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn split(call: &mut Call<'_>, args: &[Value]) -> Result {
    let (sep, s) = two_strings(call, args)?;
    Ok(indexed_map(&go_split(s, sep, None)))
}

fn split_list(call: &mut Call<'_>, args: &[Value]) -> Result {
    let (sep, s) = two_strings(call, args)?;
    Ok(Value::string_list(go_split(s, sep, None)))
}

fn splitn(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 3)?;
    let sep = go_string(&args[0])?;
    let n = go_int(&args[1])?;
    let s = go_string(&args[2])?;
    // A negative count means no limit.
    let limit = usize::try_from(n).ok();
    Ok(indexed_map(&go_split(s, sep, limit)))
}

/// Sprig's `strslice`: typed and untyped lists item by item (nil items dropped), `[]byte` as
/// its numbers, nil as no items, anything else as one item.
fn string_slice(v: &Value) -> Vec<String> {
    match v {
        Value::Bytes(bytes) => bytes.iter().map(ToString::to_string).collect(),
        other => cast::to_string_list(other),
    }
}

fn to_strings(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 1)?;
    Ok(Value::string_list(string_slice(&args[0])))
}

fn join(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 2)?;
    let sep = go_string(&args[0])?;
    Ok(Value::str(string_slice(&args[1]).join(sep)))
}

fn sort_alpha(call: &mut Call<'_>, args: &[Value]) -> Result {
    want_args(call.name, args, 1)?;
    let mut items = match &args[0] {
        list @ (Value::List(..) | Value::Bytes(_)) => string_slice(list),
        // Not a slice: the value's text as the only item (`<nil>` for nil).
        other => vec![cast::to_string(other)],
    };
    items.sort_unstable();
    Ok(Value::List(
        std::rc::Rc::new(items.into_iter().map(Value::from).collect()),
        ListKind::String,
    ))
}

/// Go's `path.Clean`: the shortest equivalent slash path, lexically.
pub fn clean_path(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

fn base(call: &mut Call<'_>, args: &[Value]) -> Result {
    let path = one_string(call, args)?;
    if path.is_empty() {
        return Ok(Value::str("."));
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok(Value::str("/"));
    }
    Ok(Value::str(
        trimmed.rsplit_once('/').map_or(trimmed, |(_, last)| last),
    ))
}

fn dir(call: &mut Call<'_>, args: &[Value]) -> Result {
    let path = one_string(call, args)?;
    let head = path.rfind('/').map_or("", |at| &path[..=at]);
    Ok(Value::str(clean_path(head)))
}

fn clean(call: &mut Call<'_>, args: &[Value]) -> Result {
    Ok(Value::str(clean_path(one_string(call, args)?)))
}

fn ext(call: &mut Call<'_>, args: &[Value]) -> Result {
    let path = one_string(call, args)?;
    let last = path.rsplit('/').next().unwrap_or(path);
    Ok(Value::str(last.rfind('.').map_or("", |at| &last[at..])))
}

fn is_abs(call: &mut Call<'_>, args: &[Value]) -> Result {
    Ok(Value::Bool(one_string(call, args)?.starts_with('/')))
}

// ---- Unicode as Go's `unicode` package sees it ----

fn category(c: char) -> unicode_general_category::GeneralCategory {
    unicode_general_category::get_general_category(c)
}

fn is_upper(c: char) -> bool {
    category(c) == unicode_general_category::GeneralCategory::UppercaseLetter
}

fn is_letter(c: char) -> bool {
    use unicode_general_category::GeneralCategory as G;
    matches!(
        category(c),
        G::UppercaseLetter
            | G::LowercaseLetter
            | G::TitlecaseLetter
            | G::ModifierLetter
            | G::OtherLetter
    )
}

fn is_number(c: char) -> bool {
    use unicode_general_category::GeneralCategory as G;
    matches!(
        category(c),
        G::DecimalNumber | G::LetterNumber | G::OtherNumber
    )
}

fn is_punct(c: char) -> bool {
    use unicode_general_category::GeneralCategory as G;
    matches!(
        category(c),
        G::ConnectorPunctuation
            | G::DashPunctuation
            | G::OpenPunctuation
            | G::ClosePunctuation
            | G::InitialPunctuation
            | G::FinalPunctuation
            | G::OtherPunctuation
    )
}

/// Go's `unicode.ToUpper`: one character to one character (no `ß` → `SS`).
fn upper_rune(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_uppercase();
    }
    // Greek letters with a subscript iota have a one-character upper case in Go's tables.
    match u32::from(c) {
        0x1F80..=0x1F87 | 0x1F90..=0x1F97 | 0x1FA0..=0x1FA7 => {
            return char::from_u32(u32::from(c) + 8).unwrap_or(c);
        }
        0x1FB3 | 0x1FC3 | 0x1FF3 => return char::from_u32(u32::from(c) + 9).unwrap_or(c),
        _ => {}
    }
    let mut upper = c.to_uppercase();
    match (upper.next(), upper.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// Go's `unicode.ToLower`.
fn lower_rune(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    // Only U+0130 lowers to two characters in Rust; Go keeps the first.
    c.to_lowercase().next().unwrap_or(c)
}

/// Go's `unicode.ToTitle`: upper case, except the digraphs with a title-case form.
fn title_rune(c: char) -> char {
    match c {
        '\u{1C4}'..='\u{1C6}' => '\u{1C5}',
        '\u{1C7}'..='\u{1C9}' => '\u{1C8}',
        '\u{1CA}'..='\u{1CC}' => '\u{1CB}',
        '\u{1F1}'..='\u{1F3}' => '\u{1F2}',
        _ => upper_rune(c),
    }
}

/// Go's `strings.ToUpper`.
pub fn go_to_upper(s: &str) -> String {
    if s.is_ascii() {
        return s.to_ascii_uppercase();
    }
    s.chars().map(upper_rune).collect()
}

/// Go's `strings.ToLower`.
pub fn go_to_lower(s: &str) -> String {
    if s.is_ascii() {
        return s.to_ascii_lowercase();
    }
    s.chars().map(lower_rune).collect()
}

/// Go's `strings.Title`: the first letter of each word in title case, words being separated
/// by anything but letters, digits and `_`.
pub fn go_title(s: &str) -> String {
    let separator = |c: char| {
        if c.is_ascii() {
            !(c.is_ascii_alphanumeric() || c == '_')
        } else if is_letter(c)
            || category(c) == unicode_general_category::GeneralCategory::DecimalNumber
        {
            false
        } else {
            c.is_whitespace()
        }
    };
    let mut previous = ' ';
    s.chars()
        .map(|c| {
            let out = if separator(previous) {
                title_rune(c)
            } else {
                c
            };
            previous = c;
            out
        })
        .collect()
}

// ---- xstrings' case conversions ----

fn is_connector(c: char) -> bool {
    c == '-' || c == '_' || c.is_whitespace()
}

/// xstrings' `isAlphabet`: letters, except the common CJK ideographs.
fn is_alphabet(c: char) -> bool {
    is_letter(c)
        && !matches!(c, '\u{4E00}'..='\u{9FCC}' | '\u{3400}'..='\u{4D85}' | '\u{20000}'..='\u{2B81D}')
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Word {
    Invalid,
    Number,
    Upper,
    Alphabet,
    Connector,
    Punct,
    Other,
}

/// xstrings' `nextValidRune`: the first character of `s` that is not U+FFFD (Go decodes a
/// literal U+FFFD as its decoding error and skips it) and the bytes up to and including it;
/// `prev` and all of `s` when there is none.
fn next_valid(s: &str, prev: char) -> (char, usize) {
    for (at, c) in s.char_indices() {
        if c != '\u{FFFD}' {
            return (c, at + c.len_utf8());
        }
    }
    (prev, s.len())
}

/// The next word of `s` (xstrings' tokenizer): its kind, its text and the rest. Stray U+FFFD
/// characters join the word after them, as in xstrings.
fn next_word(s: &str) -> (Word, &str, &str) {
    if s.is_empty() {
        return (Word::Invalid, "", "");
    }
    let (mut r, mut size) = next_valid(s, '\u{FFFD}');
    let mut offset = size;
    if r == '\u{FFFD}' {
        return (Word::Invalid, &s[..offset], &s[offset..]);
    }
    // Extends the word while `accept` holds for the next valid character; `r` ends as the
    // character that stopped it.
    let extend = |offset: &mut usize, r: &mut char, accept: &dyn Fn(char) -> bool| {
        while *offset < s.len() {
            let (next, width) = next_valid(&s[*offset..], *r);
            *r = next;
            if !accept(next) {
                break;
            }
            *offset += width;
        }
    };
    let kind = if is_connector(r) {
        extend(&mut offset, &mut r, &is_connector);
        Word::Connector
    } else if is_punct(r) {
        extend(&mut offset, &mut r, &is_punct);
        Word::Punct
    } else if is_upper(r) {
        if offset < s.len() {
            (r, size) = next_valid(&s[offset..], r);
            if is_upper(r) {
                // A run of capitals; its last one starts the next word when a letter follows
                // ("HTTPServer" → "HTTP", "Server").
                let mut last_size = size;
                offset += size;
                while offset < s.len() {
                    (r, size) = next_valid(&s[offset..], r);
                    if !is_upper(r) {
                        break;
                    }
                    last_size = size;
                    offset += size;
                }
                if offset < s.len() && is_alphabet(r) {
                    offset -= last_size;
                }
            } else if is_alphabet(r) {
                offset += size;
                extend(&mut offset, &mut r, &|c| is_alphabet(c) && !is_upper(c));
            }
        }
        Word::Upper
    } else if is_alphabet(r) {
        extend(&mut offset, &mut r, &|c| is_alphabet(c) && !is_upper(c));
        Word::Alphabet
    } else if is_number(r) {
        extend(&mut offset, &mut r, &is_number);
        Word::Number
    } else {
        extend(&mut offset, &mut r, &|c| {
            !(is_connector(c) || is_alphabet(c) || is_number(c) || is_punct(c))
        });
        Word::Other
    };
    (kind, &s[..offset], &s[offset..])
}

/// xstrings' `toLower` of one word: upper-case words lowered, connectors replaced.
fn push_lower(out: &mut String, kind: Word, word: &str, connector: char) {
    if kind != Word::Upper && kind != Word::Connector {
        out.push_str(word);
        return;
    }
    for c in word.chars() {
        if is_connector(c) {
            out.push(connector);
        } else if is_upper(c) {
            out.push(lower_rune(c));
        } else {
            out.push(c);
        }
    }
}

/// xstrings' `ToSnakeCase`/`ToKebabCase`: words lowered and joined by `connector`, numbers
/// kept with the letters after them (`HTTP20xOK` → `http_20x_ok`).
fn words_to_lower(s: &str, connector: char) -> String {
    use Word::{Alphabet, Connector, Invalid, Number, Punct};
    if s.is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(s.len() + s.len() / 2);
    let (mut kind, mut word, mut rest) = next_word(s);
    while !rest.is_empty() {
        if kind != Connector {
            push_lower(&mut out, kind, word, connector);
        }
        let previous = kind;
        let last = word;
        (kind, word, rest) = next_word(rest);
        match previous {
            Number => {
                while kind == Alphabet || kind == Number {
                    push_lower(&mut out, kind, word, connector);
                    (kind, word, rest) = next_word(rest);
                }
                if !matches!(kind, Invalid | Punct | Connector) {
                    out.push(connector);
                }
            }
            Connector => push_lower(&mut out, previous, last, connector),
            Punct => {}
            _ => {
                if kind != Number {
                    if kind != Connector && kind != Punct {
                        out.push(connector);
                    }
                    continue;
                }
                if rest.is_empty() {
                    continue;
                }
                let number = word;
                (kind, word, rest) = next_word(rest);
                if kind != Alphabet {
                    push_lower(&mut out, Number, number, connector);
                    if kind != Connector && kind != Punct {
                        out.push(connector);
                    }
                    continue;
                }
                out.push(connector);
                push_lower(&mut out, Number, number, connector);
                while kind == Alphabet || kind == Number {
                    push_lower(&mut out, kind, word, connector);
                    (kind, word, rest) = next_word(rest);
                }
                if !matches!(kind, Invalid | Connector | Punct) {
                    out.push(connector);
                }
            }
        }
    }
    push_lower(&mut out, kind, word, connector);
    out
}

/// xstrings' `ToPascalCase` (v1.5): words split at connectors (`_`, `-`, spaces), each with its
/// first letter upper case; a word opening with two capitals has that run of capitals lowered
/// (`HTTPServer` → `Httpserver`, `ABcD` → `AbcD`), other words keep their case (`fooBAR` →
/// `FooBAR`). Leading and trailing
/// connectors stay, of an inner run of connectors all but the last stay (`_complex__case_` →
/// `_Complex_Case_`), and a string of connectors only gets its last one twice, as xstrings does.
fn pascal_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() && is_connector(chars[i]) {
        out.push(chars[i]);
        i += 1;
    }
    if i == chars.len() {
        if let Some(last) = chars.last() {
            out.push(*last);
        }
        return out;
    }
    while i < chars.len() {
        // A word.
        let start = i;
        while i < chars.len() && !is_connector(chars[i]) {
            i += 1;
        }
        let word = &chars[start..i];
        // After two capitals, the run of capitals that follows is lowered.
        let mut lowering = word.len() > 1 && is_upper(word[0]) && is_upper(word[1]);
        out.push(upper_rune(word[0]));
        for c in &word[1..] {
            lowering = lowering && is_upper(*c);
            out.push(if lowering { lower_rune(*c) } else { *c });
        }
        // The connectors after it.
        let start = i;
        while i < chars.len() && is_connector(chars[i]) {
            i += 1;
        }
        let run = &chars[start..i];
        let kept = if i == chars.len() {
            run
        } else {
            &run[..run.len().saturating_sub(1)]
        };
        out.extend(kept);
    }
    out
}

#[cfg(test)]
mod tests;
