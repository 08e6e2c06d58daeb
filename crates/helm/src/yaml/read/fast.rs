//! A fast path for [`super::parse_head`]: a line scanner for the plain block YAML that charts
//! render (CRDs above all: a megabyte of `key: value` lines), reading the document only as far
//! as Helm's `SimpleHead` needs while checking that the whole of it is well formed.
//!
//! It accepts a subset of YAML on which the full reader can neither fail nor disagree:
//! printable ASCII and line feeds only (no tabs, no carriage returns), block mappings and
//! sequences, one-line plain and quoted scalars, block scalars without an indentation
//! indicator, and `[]`/`{}`. Anything else — anchors, aliases, tags, flow collections with
//! content, multi-line flow scalars, merge keys, keys Go's JSON conversion refuses, NaN or
//! infinities, an indentation it is not sure of — makes it give up (`None`), and the caller
//! reads the document with the full parser, which then reports Helm's error if there is one.

use super::super::resolve::{Scalar, resolve};
use super::{Go, MapBuilder, scalar};

/// Nesting beyond which the scanner gives up (the full reader's limit is higher).
const MAX_DEPTH: usize = 200;
/// Longest key the scanner accepts (libyaml refuses simple keys over 1024 characters).
const MAX_KEY: usize = 1000;

/// The document's head as [`super::decode_document`] would decode it for
/// [`super::to_json_head`], with every value the head does not read left `Nil`; `None` when the
/// document is outside the subset this scanner is sure of.
pub(super) fn head(text: &str) -> Option<Go> {
    if !text
        .bytes()
        .all(|b| b == b'\n' || (0x20..0x7f).contains(&b))
    {
        return None;
    }
    let lines: Vec<&str> = text.split('\n').collect();
    if lines
        .iter()
        .any(|l| l.starts_with("---") || l.starts_with("...") || l.starts_with('%'))
    {
        return None;
    }
    let mut scanner = Scanner {
        lines,
        at: 0,
        depth: 0,
    };
    let indent = scanner.next_content()?;
    let line = scanner.lines[scanner.at];
    if is_entry(&line[indent..]) {
        return None;
    }
    let root = scanner.mapping(indent, &line[indent..], Want::Top)?;
    // Nothing may follow the root mapping.
    if scanner.next_content().is_some() {
        return None;
    }
    Some(root)
}

/// What the caller needs of a node.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    /// Only that it is well formed.
    Check,
    /// The document: a mapping whose `apiVersion`, `kind` and `metadata` are read.
    Top,
    /// `metadata`: a mapping whose `name` and `annotations` are read.
    Metadata,
    /// `annotations`: a mapping of scalars.
    Annotations,
    /// A scalar's value.
    Scalar,
}

struct Scanner<'a> {
    lines: Vec<&'a str>,
    /// The line being read.
    at: usize,
    depth: usize,
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// A line holding nothing but spaces or a comment.
fn is_blank(line: &str) -> bool {
    let rest = line.trim_start_matches(' ');
    rest.is_empty() || rest.starts_with('#')
}

/// Content starting a block sequence entry (`-` then a space or the end of the line).
fn is_entry(content: &str) -> bool {
    content == "-" || content.starts_with("- ")
}

/// The rest of a line after a scalar: nothing, or spaces and maybe a comment.
fn only_comment(rest: &str) -> bool {
    rest.is_empty() || (rest.starts_with(' ') && is_blank(rest))
}

/// A key at the start of `content`: its text, whether quoted, and what follows the `:` (spaces
/// skipped). `Some(None)` when the content is no key; `None` when unsure.
#[allow(clippy::option_option)] // give up, no key, or a key
fn key(content: &str) -> Option<Option<(&str, Option<u8>, &str)>> {
    let first = *content.as_bytes().first()?;
    let (text, quoted, after) = match first {
        b'"' | b'\'' => {
            let (text, after) = quoted_span(content)?;
            let Some(rest) = after.strip_prefix(':') else {
                // A quoted scalar, not a key (or something the scanner does not know).
                return only_comment(after).then_some(None);
            };
            if !(rest.is_empty() || rest.starts_with(' ')) {
                return None;
            }
            (text, Some(first), rest)
        }
        // `-` then a space starts an entry (the callers look for those first).
        b'-' if content.len() == 1 || content.as_bytes()[1] == b' ' => return None,
        b'?' | b':' | b',' | b'[' | b']' | b'{' | b'}' | b'#' | b'&' | b'*' | b'!' | b'|'
        | b'>' | b'%' | b'@' | b'`' => return None,
        _ => {
            let bytes = content.as_bytes();
            let mut colon = None;
            let mut from = 0;
            while let Some(pos) = content[from..].find(':') {
                let pos = from + pos;
                if matches!(bytes.get(pos + 1), None | Some(b' ')) {
                    colon = Some(pos);
                    break;
                }
                from = pos + 1;
            }
            let Some(pos) = colon else {
                return Some(None);
            };
            let text = content[..pos].trim_end_matches(' ');
            if text.contains(" #") {
                return None;
            }
            (text, None, &content[pos + 1..])
        }
    };
    if text.len() > MAX_KEY || text == "<<" {
        return None;
    }
    Some(Some((text, quoted, after.trim_start_matches(' '))))
}

/// A one-line quoted scalar at the start of `content`: its raw text between the quotes and
/// what follows the closing quote. Escapes are checked, not decoded.
fn quoted_span(content: &str) -> Option<(&str, &str)> {
    let quote = content.as_bytes()[0];
    match quote_end(content, 1, quote)? {
        Some(end) => Some((&content[1..end], &content[end + 1..])),
        // Not closed on this line: a multi-line scalar.
        None => None,
    }
}

/// Where the quoted text going on at `from` in `line` closes (`Some(None)` when it goes on
/// past the line's end); `None` for an escape the scanner does not know.
#[allow(clippy::option_option)] // give up, not closed, or closed
fn quote_end(line: &str, from: usize, quote: u8) -> Option<Option<usize>> {
    let bytes = line.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quote == b'"' => {
                // An escaped line break too is left to the full reader.
                let escape = *bytes.get(i + 1)?;
                let hex = match escape {
                    b'0' | b'a' | b'b' | b't' | b'n' | b'v' | b'f' | b'r' | b'e' | b' ' | b'"'
                    | b'/' | b'\\' | b'N' | b'_' | b'L' | b'P' => 0,
                    b'x' => 2,
                    b'u' => 4,
                    b'U' => 8,
                    _ => return None,
                };
                let digits = bytes.get(i + 2..i + 2 + hex)?;
                if !digits.iter().all(u8::is_ascii_hexdigit) {
                    return None;
                }
                i += 2 + hex;
            }
            b'\'' if quote == b'\'' && bytes.get(i + 1) == Some(&b'\'') => i += 2,
            b if b == quote => return Some(Some(i)),
            _ => i += 1,
        }
    }
    Some(None)
}

/// Whether `content` (a line's text after its indentation) may go on a plain scalar: not a
/// comment, key, entry or flow indicator first, no `: `, ` #` or final `:`.
fn plain_continuation(content: &str) -> bool {
    let bytes = content.as_bytes();
    let Some(&first) = bytes.first() else {
        return false;
    };
    let indicator = match first {
        b'#' | b':' | b',' | b'[' | b']' | b'{' | b'}' => true,
        b'-' | b'?' => matches!(bytes.get(1), None | Some(b' ')),
        _ => false,
    };
    !indicator
        && !content.contains(": ")
        && !content.contains(" #")
        && !content.trim_end_matches(' ').ends_with(':')
}

/// A one-line flow sequence of simple scalars (`["get", "list"]`, `[a, b]`, `[]`) or an empty
/// flow mapping at the start of `rest`, followed by nothing or a comment.
fn simple_flow(rest: &str) -> bool {
    if let Some(after) = rest.strip_prefix("{}") {
        return only_comment(after);
    }
    let Some(mut inner) = rest.strip_prefix('[') else {
        return false;
    };
    inner = inner.trim_start_matches(' ');
    if let Some(after) = inner.strip_prefix(']') {
        return only_comment(after);
    }
    loop {
        let after = match inner.as_bytes().first() {
            Some(b'"' | b'\'') => match quoted_span(inner) {
                Some((_, after)) => after,
                None => return false,
            },
            Some(c) if c.is_ascii_alphanumeric() => {
                let end = inner
                    .bytes()
                    .position(|b| {
                        !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-'))
                    })
                    .unwrap_or(inner.len());
                let word = &inner[..end];
                // NaN and the infinities fail the JSON conversion.
                if matches!(resolve(word), Scalar::Float(f) if !f.is_finite()) {
                    return false;
                }
                &inner[end..]
            }
            _ => return false,
        };
        let after = after.trim_start_matches(' ');
        if let Some(next) = after.strip_prefix(',') {
            inner = next.trim_start_matches(' ');
            // A trailing comma before `]` is left to the full reader.
            continue;
        }
        return after.strip_prefix(']').is_some_and(only_comment);
    }
}

/// A key's value as `yaml.v2` decodes it: quoted keys are strings, plain keys resolved.
/// `None` for keys the JSON conversion would refuse or the scanner does not decode.
fn key_value(text: &str, quoted: Option<u8>, decode: bool) -> Option<Go> {
    if let Some(quote) = quoted {
        return if decode {
            Some(Go::Str(unquote(text, quote)?))
        } else {
            Some(Go::Nil)
        };
    }
    match resolve(text) {
        Scalar::Null => None,
        Scalar::Int(i) if i64::try_from(i).is_err() => None,
        Scalar::Float(f) if !f.is_finite() => None,
        _ if decode => scalar(text, true, None).ok(),
        _ => Some(Go::Nil),
    }
}

/// A quoted scalar's raw text (between its quotes) decoded: single quotes undoubled;
/// double-quoted text only when it holds no escape.
fn unquote(raw: &str, quote: u8) -> Option<String> {
    if quote == b'"' {
        return (!raw.contains('\\')).then(|| raw.to_owned());
    }
    Some(raw.replace("''", "'"))
}

impl<'a> Scanner<'a> {
    /// Moves to the next line with content and returns its indentation.
    fn next_content(&mut self) -> Option<usize> {
        while let Some(line) = self.lines.get(self.at) {
            if !is_blank(line) {
                return Some(indent_of(line));
            }
            self.at += 1;
        }
        None
    }

    /// A block mapping at column `indent`, its first entry `first` (the current line's content
    /// from that column on, which may follow a sequence entry's `- `).
    fn mapping(&mut self, indent: usize, first: &'a str, want: Want) -> Option<Go> {
        if !matches!(
            want,
            Want::Check | Want::Top | Want::Metadata | Want::Annotations
        ) {
            return None;
        }
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let decode = want != Want::Check;
        let mut map = MapBuilder::default();
        let mut content = first;
        loop {
            let (text, quoted, rest) = key(content)??;
            let key = key_value(text, quoted, decode)?;
            let wanted = match want {
                Want::Top if quoted.is_some() || matches!(key, Go::Str(_)) => {
                    if text.eq_ignore_ascii_case("apiVersion") || text.eq_ignore_ascii_case("kind")
                    {
                        Want::Scalar
                    } else if text.eq_ignore_ascii_case("metadata") {
                        Want::Metadata
                    } else {
                        Want::Check
                    }
                }
                Want::Metadata if quoted.is_some() || matches!(key, Go::Str(_)) => {
                    if text.eq_ignore_ascii_case("name") {
                        Want::Scalar
                    } else if text.eq_ignore_ascii_case("annotations") {
                        Want::Annotations
                    } else {
                        Want::Check
                    }
                }
                Want::Annotations => Want::Scalar,
                _ => Want::Check,
            };
            // Quoted key text with `''` is decoded above; the name checks see the raw text,
            // which differs from the decoded one only by such quotes (then no name matches).
            let value = self.value(indent, rest, wanted, true)?;
            if decode {
                map.set(key, value);
            }
            self.at += 1;
            match self.after_node(indent)? {
                Next::Same => {
                    let line = self.lines[self.at];
                    content = &line[indent..];
                    if is_entry(content) {
                        return None;
                    }
                }
                Next::Out => break,
            }
        }
        self.depth -= 1;
        Some(if decode {
            Go::Map(map.entries)
        } else {
            Go::Nil
        })
    }

    /// A block sequence at column `indent`, starting on the current line.
    fn sequence(&mut self, indent: usize, want: Want) -> Option<Go> {
        if want != Want::Check {
            return None;
        }
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        loop {
            let line = self.lines[self.at];
            let content = &line[indent..];
            if !is_entry(content) {
                // The mapping holding this sequence at its own column goes on.
                break;
            }
            let after = &content[1..];
            let item = after.trim_start_matches(' ');
            let column = line.len() - item.len();
            if is_entry(item) {
                return None;
            }
            // Values that cannot be keys go to `value` (which knows them) directly.
            let entry = if item.is_empty() || item.starts_with(['|', '>', '[', '{', '#']) {
                None
            } else {
                key(item)?
            };
            if entry.is_some() {
                self.mapping(column, item, Want::Check)?;
            } else {
                self.value(indent, item, Want::Check, false)?;
                self.at += 1;
            }
            match self.after_node(indent)? {
                Next::Same => {}
                Next::Out => break,
            }
        }
        self.depth -= 1;
        Some(Go::Nil)
    }

    /// Where the next content line stands after a node of a collection at column `indent`.
    fn after_node(&mut self, indent: usize) -> Option<Next> {
        match self.next_content() {
            None => Some(Next::Out),
            Some(next) if next == indent => Some(Next::Same),
            Some(next) if next < indent => Some(Next::Out),
            // More indented where no node may start: a continuation or an error.
            Some(_) => None,
        }
    }

    /// The value after a key or `- ` on the current line (`rest`), of a collection at column
    /// `indent`; `in_mapping` when that collection is a mapping (whose value may be a sequence
    /// at the mapping's own column). Leaves the current line on the value's last line.
    fn value(&mut self, indent: usize, rest: &'a str, want: Want, in_mapping: bool) -> Option<Go> {
        let Some(&first) = rest.as_bytes().first() else {
            return self.nested(indent, want, in_mapping);
        };
        match first {
            b'#' => self.nested(indent, want, in_mapping),
            b'"' | b'\'' => {
                let Some((raw, after)) = quoted_span(rest) else {
                    if want != Want::Check {
                        return None;
                    }
                    self.quoted_lines(indent, rest)?;
                    return Some(Go::Nil);
                };
                if !only_comment(after) {
                    return None;
                }
                Some(match want {
                    Want::Check => Go::Nil,
                    Want::Scalar => Go::Str(unquote(raw, first)?),
                    _ => return None,
                })
            }
            b'|' | b'>' => {
                if want != Want::Check {
                    return None;
                }
                let header = &rest[1..];
                let chomp = header.trim_start_matches(['+', '-']);
                if header.len() - chomp.len() > 1 || !only_comment(chomp) {
                    return None;
                }
                self.block_scalar(indent)?;
                Some(Go::Nil)
            }
            b'[' | b'{' => flow(rest, want),
            b'-' if rest.len() == 1 || rest.as_bytes()[1] == b' ' => None,
            b'?' | b':' | b',' | b']' | b'}' | b'&' | b'*' | b'!' | b'%' | b'@' | b'`' => None,
            _ => {
                let text = match rest.find(" #") {
                    Some(pos) => &rest[..pos],
                    None => rest,
                }
                .trim_end_matches(' ');
                if text.ends_with(':') || text.contains(": ") {
                    return None;
                }
                // Lines indented further go on the scalar (a comment ends it).
                let mut lines = 0;
                if text.len() == rest.trim_end_matches(' ').len() {
                    while let Some(next) = self.lines.get(self.at + 1) {
                        let spaces = indent_of(next);
                        if spaces <= indent || is_blank(next) {
                            break;
                        }
                        if !plain_continuation(&next[spaces..]) {
                            return None;
                        }
                        self.at += 1;
                        lines += 1;
                    }
                }
                if lines > 0 {
                    return (want == Want::Check).then_some(Go::Nil);
                }
                // NaN and the infinities fail the JSON conversion.
                if matches!(first, b'.' | b'+' | b'-' | b'0'..=b'9')
                    && matches!(resolve(text), Scalar::Float(f) if !f.is_finite())
                {
                    return None;
                }
                match want {
                    Want::Check => Some(Go::Nil),
                    Want::Scalar => scalar(text, true, None).ok(),
                    _ => None,
                }
            }
        }
    }

    /// A value that starts on the lines after its key or `-`: a collection indented further
    /// (or a sequence at a mapping's own column), else null.
    fn nested(&mut self, indent: usize, want: Want, in_mapping: bool) -> Option<Go> {
        self.at += 1;
        let found = self.next_content();
        let result = match found {
            Some(next) if next > indent => {
                let line = self.lines[self.at];
                let content = &line[next..];
                if content.starts_with(['[', '{']) {
                    // A flow collection on its own line: the caller steps past it.
                    return flow(content, want);
                }
                if is_entry(content) {
                    self.sequence(next, want)
                } else {
                    self.mapping(next, content, want)
                }
            }
            Some(next)
                if next == indent && in_mapping && is_entry(&self.lines[self.at][next..]) =>
            {
                self.sequence(next, want)
            }
            _ => Some(Go::Nil),
        };
        // The caller steps past the value's last line; a nested collection already stands on
        // the line after it, so step back to a line the caller's step leaves behind.
        self.at -= 1;
        result
    }

    /// A quoted scalar going on past its first line (`rest`), of a collection at column
    /// `indent`: its lines empty or indented further. Leaves the current line on its last
    /// line.
    fn quoted_lines(&mut self, indent: usize, rest: &str) -> Option<()> {
        let quote = rest.as_bytes()[0];
        if quote_end(rest, 1, quote)?.is_some() {
            return None;
        }
        loop {
            self.at += 1;
            let line = *self.lines.get(self.at)?;
            let spaces = indent_of(line);
            if spaces == line.len() {
                // An empty line folds into a line break.
                continue;
            }
            if spaces <= indent {
                return None;
            }
            if let Some(end) = quote_end(line, spaces, quote)? {
                return only_comment(&line[end + 1..]).then_some(());
            }
        }
    }

    /// A block scalar's content after its header (the current line), of a collection at
    /// column `indent`. Leaves the current line on its last line.
    fn block_scalar(&mut self, indent: usize) -> Option<()> {
        let first = *self.lines.get(self.at + 1)?;
        let width = indent_of(first);
        if first.len() == width || width <= indent {
            // Leading empty lines or an empty scalar: left to the full reader.
            return None;
        }
        let mut last = self.at + 1;
        for (i, line) in self.lines.iter().enumerate().skip(self.at + 2) {
            let spaces = indent_of(line);
            if spaces == line.len() || spaces >= width {
                last = i;
            } else {
                break;
            }
        }
        self.at = last;
        Some(())
    }
}

/// A simple flow collection (see [`simple_flow`]) as a value: only `{}` is decoded.
fn flow(rest: &str, want: Want) -> Option<Go> {
    if !simple_flow(rest) {
        return None;
    }
    match want {
        Want::Check => Some(Go::Nil),
        Want::Annotations | Want::Metadata if rest.starts_with("{}") => Some(Go::Map(Vec::new())),
        _ => None,
    }
}

enum Next {
    /// Another node of the same collection follows.
    Same,
    /// The collection ends.
    Out,
}

#[cfg(test)]
mod tests {
    use super::super::{HeadLevel, full_head, to_json_head};
    use super::head;

    /// The fast reader's head where it reads one, checked against the full reader.
    fn fast(text: &str) -> Option<Result<serde_json::Value, String>> {
        let fast = to_json_head(head(text)?, HeadLevel::Top).map_err(|e| e.message);
        let full = full_head(text).map_err(|e| e.message);
        assert_eq!(fast, full, "on {text:?}");
        Some(fast)
    }

    #[test]
    fn reads_plain_block_documents() {
        let docs = [
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n    \"helm.sh/hook\": pre-install\n    b: 'it''s'\n    c: \"1\"\n    d: 3\ndata:\n  a: |\n    line\n\n    # not a comment\n  b: >-\n    folded\n",
            "kind: A\nspec:\n  list:\n  - a\n  - name: x\n    args:\n    - --port=80\n    - -1\n  -\n  - |\n    text\n  empty:\n  flow: []\n  map: {}\n# comment\n  # indented comment\nstatus: {}\n",
            "metadata: {}\n",
            "metadata:\n  name: 12\n",
            "metadata:\n  annotations:\n    a: true\n",
            "metadata:\n  annotations: {}\n",
            "Kind: a\nkind: b\nKIND: c\n",
            "kind: a\nkind: b\n",
            "  kind: indented\n  x: y\n",
            "kind: x # comment\nmetadata:\n  name: \"quoted\" # c\n",
            "a:b: c\nkind: v\nurl: http://x:80/\nx: a,b]\n",
            "1: one\ntrue: t\n1.5: f\nkind: k\n",
            "-foo: bar\nk: \"a\\tb\\u00e9\"\n",
            "metadata:\n  name:\n  labels:\n    a: b\n",
            "spec:\n  description: a long\n    text, wrapped\n    over lines\n  x: 'quoted\n    and wrapped'\n  y: \"double\n     wrapped \\\" too\"\nkind: k\n",
            "a: 'x\n\n  y\n    '\nres:\n  {}\nlist:\n  []\nverbs: [\"get\", 'list', watch]\ngroups: [\"\"]\n",
            "x:\n- a\n  b\n- c\n- |\n  block\n- []\n- # comment\n  a: \"multi\n    line\"\n",
        ];
        for doc in docs {
            assert!(fast(doc).is_some(), "not read fast: {doc:?}");
        }
    }

    #[test]
    fn leaves_the_rest_to_the_full_reader() {
        let docs = [
            "",
            "# only a comment\n",
            "- a\n- b\n",
            "plain\n",
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: [1, 2,]\n",
            "a: [*x]\n",
            "a: [.inf]\n",
            "a: [a b]\n",
            "a:\n  [x]\n  b: c\n",
            "a: {b: c}\n",
            "a: b: c\n",
            "a:\tb\n",
            "a: b\r\n",
            "a: caf\u{e9}\n",
            "<<: {}\n",
            "~: null key\n",
            "null: x\n",
            "18446744073709551615: big\n",
            "a: .inf\n",
            "kind: -.Inf\n",
            "a: |2\n   x\n",
            "a: |\n\n  x\n",
            "a: |\nb: c\n",
            "? a\n: b\n",
            "a:\n  b: 1\n c: 2\n",
            "a:\n  b: 1\n  - c\n",
            "a: 1\n- b\n",
            "metadata:\n  name: \"esc\\n\"\n",
            "kind:\n  nested: map\n",
            "metadata: x\n",
            "metadata:\n- a\n",
            "--- \na: b\n",
            "a: b\n---\nc: d\n",
            "%YAML 1.1\na: b\n",
            "a: - b\n",
            "- - a\n",
            "a: \"unclosed\n",
            "a: \"x\" y\n",
            "a #b: c\n",
            "a: 'x':\n",
            "a: \"\\q\"\n",
            "a: b\n  c: d\n",
            "a: b\n  - c\n",
            "a: b # c\n  d\n",
            "a: 'x\ny'\n",
            "a: \"x\\\n  y\"\n",
            "kind: wrapped\n  kind\n",
        ];
        for doc in docs {
            assert!(fast(doc).is_none(), "read fast: {doc:?}");
        }
    }

    #[test]
    fn errors_come_from_the_head_conversion_alike() {
        // Read fast, and the same errors (or values) as the full reader give.
        for doc in [
            "kind: 1\n",
            "metadata:\n  annotations:\n    a: 1\n",
            "metadata:\n  name: [] \n",
        ] {
            let _ = fast(doc);
        }
    }
}
