//! Go's `fmt` as templates reach it: `print`, `println`, `printf` and Sprig's `printf`-based
//! functions, with Go's verbs, flags, widths and `%!verb(type=value)` complaints.

use crate::value::Value;

/// `fmt.Sprint`: operands concatenated, with a space between two operands when neither is a
/// string.
pub fn sprint(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, arg) in args.iter().enumerate() {
        let is_string = matches!(arg, Value::String(_));
        if i > 0 && !is_string && !matches!(args[i - 1], Value::String(_)) {
            out.push(' ');
        }
        out.push_str(&arg.to_string());
    }
    out
}

/// `fmt.Sprintln`: operands separated by spaces, then a newline.
pub fn sprintln(args: &[Value]) -> String {
    let mut out = args
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ");
    out.push('\n');
    out
}

/// `fmt.Sprintf`.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    // Placeholder until the full verb set lands: `%v`/`%s`/`%d` only.
    let mut out = String::new();
    let mut args = args.iter();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some(_) => out.push_str(&args.next().map(ToString::to_string).unwrap_or_default()),
            None => out.push_str("%!(NOVERB)"),
        }
    }
    out
}
