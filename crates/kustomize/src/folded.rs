//! Folded block scalars (`>`, `>-`, `>+`) in resources and patches, read as kustomize reads
//! them.
//!
//! kustomize keeps each scalar's style when it loads a resource or a patch and writes the
//! node out again through go-yaml v3 before the values are read. go-yaml v3's folded writer
//! keeps an extra line break after every line that does not start with a space (it looks at
//! the first character of the whole value, not of the next line, to decide whether the
//! break needs the extra one), and that break survives reading back wherever the next line
//! is more indented or empty. So `a\n  b` (a line, then a more-indented line) comes out as
//! `a\n\n  b`, and a kept (`>+`) tail gains one newline. Values go-yaml would not write as
//! a folded block (a space before a line break or at the end, tabs and other non-printable
//! characters) are written quoted and come back unchanged.
//!
//! The kustomization file itself is not round-tripped (its fields are decoded directly), so
//! only resource and patch documents go through [`parse_resource_documents`].

use granit_parser::{Event, Parser, ScalarStyle};
use serde_json::Value;

use crate::yaml::{YamlError, parse_documents_located};

/// Parses resource or patch documents, folded block scalars read as kustomize reads them.
pub(crate) fn parse_resource_documents(text: &str) -> Result<Vec<Value>, YamlError> {
    match rewrite_folded(text) {
        Some(rewritten) => parse_documents_located(&rewritten),
        None => parse_documents_located(text),
    }
}

/// `text` with every folded block scalar whose value go-yaml's round trip changes replaced
/// by the changed value, double-quoted, followed by as many line breaks as the block held
/// (so later line numbers stay right). `None` when nothing changes or the text does not
/// parse (the regular parse then reports the error).
fn rewrite_folded(text: &str) -> Option<String> {
    if !text.contains('>') || !header_pattern().is_match(text) {
        return None;
    }
    let mut edits = Vec::new();
    let mut parser = Parser::new_from_str(text);
    // Open collections: for a mapping, whether its next node is a key, and its last key.
    let mut open: Vec<Option<(bool, String)>> = Vec::new();
    while let Some(event) = parser.next_event() {
        let (event, span) = event.ok()?;
        let is_key = matches!(open.last(), Some(Some((true, _))));
        let annotation = open.len() == 3
            && matches!(&open[0], Some((_, key)) if key == "metadata")
            && matches!(&open[1], Some((_, key)) if key == "annotations");
        match &event {
            Event::MappingStart(..) => open.push(Some((true, String::new()))),
            Event::SequenceStart(..) => open.push(None),
            Event::MappingEnd | Event::SequenceEnd => {
                open.pop();
            }
            Event::Scalar(value, ..) if is_key => {
                if let Some(Some(frame)) = open.last_mut() {
                    *frame = (false, value.to_string());
                }
                continue;
            }
            _ => {}
        }
        if !matches!(event, Event::MappingStart(..) | Event::SequenceStart(..))
            && let Some(Some((expect_key, _))) = open.last_mut()
        {
            *expect_key = true;
        }
        // A resource's own annotations are rebuilt by kustomize before it prints them, so
        // they lose their style and are not round-tripped.
        if let Event::Scalar(value, ScalarStyle::Folded, _, _) = &event
            && !annotation
            && let Some(changed) = round_trip(value)
            && changed != value.as_ref()
        {
            let start = span.start.byte_offset()?;
            let end = span.end.byte_offset()?;
            edits.push((start, end, changed));
        }
    }
    if edits.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 64);
    let mut at = 0;
    for (start, end, value) in edits {
        let start = header_start(text.get(..start)?)?;
        let mut block = text.get(start..end)?;
        if start < at {
            return None;
        }
        // The span may end inside the next line's indentation: keep that text.
        if let Some(last) = block.rfind('\n')
            && block[last + 1..].trim().is_empty()
        {
            block = &block[..=last];
        }
        let end = start + block.len();
        out.push_str(&text[at..start]);
        out.push_str(&serde_json::to_string(&value).ok()?);
        out.extend(std::iter::repeat_n('\n', block.matches('\n').count()));
        at = end;
    }
    out.push_str(&text[at..]);
    Some(out)
}

/// A line ending with a folded block scalar header (`>`, `>-`, `>2+`, then maybe a comment);
/// multi-line mode, so it also tells whether a text holds one at all.
fn header_pattern() -> &'static regex::Regex {
    static HEADER: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    HEADER.get_or_init(|| {
        regex::Regex::new(r"(?m)(?:^|[ \t:?-])(>[0-9+-]{0,2}[ \t]*(?:#.*)?)$")
            .unwrap_or_else(|_| unreachable!("the header pattern is valid"))
    })
}

/// Where the `>` indicator of a block scalar whose content starts at the end of `before`
/// is: on the last line before the content that is not blank, followed only by hints and
/// a comment.
fn header_start(before: &str) -> Option<usize> {
    let header = header_pattern();
    let mut end = before.len();
    loop {
        let line_start = before[..end].rfind('\n').map_or(0, |i| i + 1);
        let line = &before[line_start..end];
        if !line.trim().is_empty() {
            let found = header.captures(line)?.get(1)?;
            return Some(line_start + found.start());
        }
        if line_start == 0 {
            return None;
        }
        end = line_start - 1;
    }
}

/// go-yaml v3's `is_printable` (tabs and carriage returns are not).
fn is_printable(c: char) -> bool {
    matches!(c, '\n' | ' '..='~' | '\u{85}' | '\u{A0}'..='\u{D7FF}' | '\u{10000}'..)
        || (('\u{E000}'..='\u{FFFD}').contains(&c) && c != '\u{FEFF}')
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// What a value written by go-yaml v3 as a folded block reads back as; `None` when go-yaml
/// would write it quoted instead (then it reads back unchanged).
fn round_trip(value: &str) -> Option<String> {
    let chars: Vec<char> = value.chars().collect();
    let (&first, &last) = (chars.first()?, chars.last()?);
    let space_break = chars.windows(2).any(|w| w[0] == ' ' && is_break(w[1]));
    if last == ' ' || space_break || !chars.iter().all(|&c| is_printable(c)) {
        return None;
    }
    // The header: an indentation hint when the value starts with a space or a break, the
    // chomping hint from the value's tail.
    let mut text = String::from("v: >");
    if first == ' ' || is_break(first) {
        text.push('2');
    }
    if !is_break(last) {
        text.push('-');
    } else if chars.len() == 1 || is_break(chars[chars.len() - 2]) {
        text.push('+');
    }
    text.push('\n');
    // The body, as go-yaml v3's `yaml_emitter_write_folded_scalar` writes it (lines are
    // never wrapped: kyaml turns line wrapping off).
    let first_text = chars.iter().find(|&&c| !is_break(c));
    let first_is_blank = first_text.is_none_or(|&c| c == ' ' || c == '\t' || c == '\0');
    let mut breaks = true;
    let mut leading_spaces = true;
    for &c in &chars {
        if is_break(c) {
            if !breaks && !leading_spaces && c == '\n' && !first_is_blank {
                text.push('\n');
            }
            text.push(c);
            breaks = true;
        } else {
            if breaks {
                text.push_str("  ");
                leading_spaces = c == ' ' || c == '\t';
            }
            text.push(c);
            breaks = false;
        }
    }
    let documents = parse_documents_located(&text).ok()?;
    match documents.first()?.get("v")? {
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_resource_documents, round_trip};

    fn value(text: &str, key: &str) -> String {
        let documents = parse_resource_documents(text).unwrap();
        documents[0][key].as_str().unwrap().to_owned()
    }

    #[test]
    fn more_indented_lines_keep_the_extra_break_kustomize_gives_them() {
        // Values as `kubectl kustomize` (kustomize v5.5.0) prints them.
        let text = "a: >-\n  x &&\n    y\n  || z\nb: >\n  one\n   two\n  three\nc: >+\n  keep\n\nd: >-\n  plain\n  folded\n";
        assert_eq!(value(text, "a"), "x &&\n\n  y\n|| z");
        assert_eq!(value(text, "b"), "one\n\n two\nthree\n");
        assert_eq!(value(text, "c"), "keep\n\n\n");
        assert_eq!(value(text, "d"), "plain folded");
    }

    #[test]
    fn non_ascii_text_and_sequences_and_comments_are_handled() {
        let text = "é: ünïcode\nlist:\n- >- # note > here\n  ä\n    ö\n- plain\nz: >\n  ü\n";
        let documents = parse_resource_documents(text).unwrap();
        assert_eq!(documents[0]["list"][0], "ä\n\n  ö");
        assert_eq!(documents[0]["list"][1], "plain");
        assert_eq!(documents[0]["z"], "ü\n");
        assert_eq!(documents[0]["é"], "ünïcode");
    }

    #[test]
    fn values_go_yaml_quotes_are_unchanged() {
        assert_eq!(round_trip("trailing "), None);
        assert_eq!(round_trip("tab\tx\n  y"), None);
        assert_eq!(round_trip("space \n  y"), None);
        assert_eq!(
            round_trip("  starts indented\nx").as_deref(),
            Some("  starts indented\nx")
        );
    }

    #[test]
    fn line_numbers_of_later_errors_are_kept() {
        let text = "a: >-\n  x\n    y\nb: 1\nb: 2\n";
        let error = parse_resource_documents(text).unwrap_err();
        let plain = crate::yaml::parse_documents_located(text).unwrap_err();
        assert_eq!(error.line, plain.line);
    }
}
