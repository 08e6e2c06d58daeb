//! Helm's rewriting of template errors: parse errors shortened to
//! `parse error at (FILE:LINE): MESSAGE`, `fail`/`required` messages to
//! `execution error at (FILE:LINE:COL): MESSAGE`, and other execution errors laid out one
//! template location per block — or left exactly as Go wrote them when a link of the error
//! chain is not a template error (a failing `tpl`, a function's own error).
//!
//! Go's errors form a chain (`error calling include: %w` wraps the included template's error);
//! the template engine hands over the flattened text, so the chain is recovered from it: an
//! `error calling NAME: ` prefix is where Go wraps the function's error.

use crate::funcs::helm::{ERR_END, ERR_START};

/// Helm's `cleanupParseError` for a template parse error `message` of `filename`.
pub fn parse_error(filename: &str, message: &str) -> String {
    let tokens: Vec<&str> = message.split(": ").collect();
    if tokens.len() == 1 {
        return format!("parse error in ({filename}): {message}");
    }
    let location = tokens[1];
    let last = tokens[tokens.len() - 1];
    format!("parse error at ({location}): {last}")
}

/// Helm's `reformatExecErrorMsg` for an execution error `message` of `filename`.
pub fn exec_error(filename: &str, message: &str) -> String {
    let tokens: Vec<&str> = message.splitn(3, ": ").collect();
    let [_, location, rest] = tokens.as_slice() else {
        return format!("execution error in ({filename}): {message}");
    };
    if let Some(text) = marked_message(rest) {
        return format!("execution error at ({location}): {text}");
    }
    let mut chain: Vec<Traceable<'_>> = Vec::new();
    let mut current = Some(message);
    while let Some(text) = current {
        let Some((traceable, next)) = Traceable::parse(text) else {
            return message.to_string();
        };
        if chain.last() != Some(&traceable) {
            chain.push(traceable);
        }
        current = next;
    }
    let mut out = String::new();
    for traceable in &chain {
        traceable.write(&mut out);
    }
    out.trim_matches(is_go_space).to_string()
}

/// The text between the first start marker and the last end marker after it.
fn marked_message(text: &str) -> Option<&str> {
    let start = text.find(ERR_START)? + ERR_START.len();
    let end = text[start..].rfind(ERR_END)? + start;
    Some(&text[start..end])
}

fn is_go_space(c: char) -> bool {
    // Go's strings.TrimSpace: Unicode white space.
    c.is_whitespace()
}

/// One template location of an error chain (Helm's `TraceableError`).
#[derive(Debug, PartialEq, Eq)]
struct Traceable<'a> {
    location: &'a str,
    executed: Option<(&'a str, &'a str)>,
    message: &'a str,
}

impl<'a> Traceable<'a> {
    /// Parses one link of the chain, returning it and the text of the error it wraps.
    fn parse(text: &'a str) -> Option<(Self, Option<&'a str>)> {
        let remainder = text.strip_prefix("template: ")?;
        if remainder.starts_with("no template ") {
            let link = Traceable {
                location: "",
                executed: None,
                message: text,
            };
            return Some((link, None));
        }
        if let Some(parsed) = Self::parse_executing(remainder) {
            return Some(parsed);
        }
        let separator = remainder.rfind(": ")?;
        let link = Traceable {
            location: &remainder[..separator],
            executed: None,
            message: cut_chained(&remainder[separator + 2..]),
        };
        Some((link, None))
    }

    /// `NAME: executing "FUNC" at <NODE>: MESSAGE`.
    fn parse_executing(remainder: &'a str) -> Option<(Self, Option<&'a str>)> {
        let (location, after) = remainder.split_once(": executing ")?;
        let after = after.strip_prefix('"')?;
        let quote = after.find('"')?;
        let function = &after[..quote];
        let after = after[quote + 1..].strip_prefix(" at <")?;
        let (node, message) = after.split_once(">: ")?;
        let wrapped = message
            .strip_prefix("error calling ")
            .and_then(|rest| rest.split_once(": "))
            .map(|(_, inner)| inner);
        let link = Traceable {
            location,
            executed: Some((function, node)),
            message: cut_chained(message),
        };
        Some((link, wrapped))
    }

    fn write(&self, out: &mut String) {
        if !self.location.is_empty() {
            out.push_str(self.location);
            out.push_str("\n  ");
        }
        if let Some((function, node)) = self.executed {
            out.push_str("executing \"");
            out.push_str(function);
            out.push_str("\" at <");
            out.push_str(node);
            out.push_str(">:\n    ");
        }
        if !self.message.is_empty() {
            out.push_str(self.message);
            out.push('\n');
        }
    }
}

/// A message up to where a chained template error starts.
fn cut_chained(message: &str) -> &str {
    message
        .find(" template:")
        .map_or(message, |cut| &message[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "t/templates/t.yaml";

    #[test]
    fn parse_errors_as_helm() {
        assert_eq!(
            parse_error(FILE, "template: t/templates/t.yaml:1: missing value for if"),
            "parse error at (t/templates/t.yaml:1): missing value for if"
        );
        assert_eq!(
            parse_error(FILE, "boom"),
            "parse error in (t/templates/t.yaml): boom"
        );
    }

    #[test]
    fn marked_messages_as_helm() {
        let go = "template: t/templates/t.yaml:1:45: executing \"t/templates/t.yaml\" at \
                  <include \"x\" .>: error calling include: template: t/templates/t.yaml:1:17: \
                  executing \"x\" at <fail \"in x\">: error calling fail: \
                  HELM_ERR_STARTin\nxHELM_ERR_END";
        assert_eq!(
            exec_error(FILE, go),
            "execution error at (t/templates/t.yaml:1:45): in\nx"
        );
    }

    #[test]
    fn chains_as_helm() {
        // Each expectation is Helm v4.2.3's answer for the template that produced the input.
        let include_missing = "template: t/templates/t.yaml:1:3: executing \
            \"t/templates/t.yaml\" at <include \"nope\" .>: error calling include: template: \
            no template \"nope\" associated with template \"gotpl\"";
        assert_eq!(
            exec_error(FILE, include_missing),
            "t/templates/t.yaml:1:3\n  executing \"t/templates/t.yaml\" at <include \"nope\" \
             .>:\n    error calling include:\ntemplate: no template \"nope\" associated with \
             template \"gotpl\""
        );
        let nil = "template: t/templates/t.yaml:1:26: executing \"t/templates/t.yaml\" at \
                   <.Values.x.y>: nil pointer evaluating interface {}.y";
        assert_eq!(
            exec_error(FILE, nil),
            "t/templates/t.yaml:1:26\n  executing \"t/templates/t.yaml\" at <.Values.x.y>:\n    \
             nil pointer evaluating interface {}.y"
        );
        let nested = "template: t/templates/t.yaml:1:45: executing \"t/templates/t.yaml\" at \
                      <include \"x\" .>: error calling include: template: \
                      t/templates/t.yaml:1:26: executing \"x\" at <.Values.a.b>: nil pointer \
                      evaluating interface {}.b";
        assert_eq!(
            exec_error(FILE, nested),
            "t/templates/t.yaml:1:45\n  executing \"t/templates/t.yaml\" at <include \"x\" \
             .>:\n    error calling include:\nt/templates/t.yaml:1:26\n  executing \"x\" at \
             <.Values.a.b>:\n    nil pointer evaluating interface {}.b"
        );
        // A function's own error (not a template error) leaves Go's text as it is.
        let index = "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at \
                     <index .Values.a 5>: error calling index: index out of range: 5";
        assert_eq!(exec_error(FILE, index), index);
        let tpl = "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <tpl \
                   \"{{ .a.b.c }}\" .>: error calling tpl: error during tpl function execution \
                   for \"{{ .a.b.c }}\": template: gotpl:1:5: executing \"gotpl\" at <.a.b.c>: \
                   nil pointer evaluating interface {}.b";
        assert_eq!(exec_error(FILE, tpl), tpl);
        let missing = "template: t/templates/t.yaml:1:12: executing \"t/templates/t.yaml\" at \
                       <{{template \"nope\" .}}>: template \"nope\" not defined";
        assert_eq!(
            exec_error(FILE, missing),
            "t/templates/t.yaml:1:12\n  executing \"t/templates/t.yaml\" at <{{template \
             \"nope\" .}}>:\n    template \"nope\" not defined"
        );
        assert_eq!(
            exec_error(FILE, "odd"),
            "execution error in (t/templates/t.yaml): odd"
        );
    }
}
