//! Helm's own template functions that are not about encodings: `include`, `tpl`, `required`,
//! `fail`, `lookup`, and `getHostByName` as Helm leaves it without `--enable-dns`.
//!
//! `required` and `fail` mark their message the way Helm does (between `HELM_ERR_START` and
//! `HELM_ERR_END`), so that the engine can report it as `execution error at (…): message`
//! whatever template nesting it came through.

use crate::cast;
use crate::template::{Call, FuncMap};
use crate::value::Value;

/// Starts a message of `fail`/`required` inside an error text.
pub const ERR_START: &str = "HELM_ERR_START";
/// Ends a message of `fail`/`required` inside an error text.
pub const ERR_END: &str = "HELM_ERR_END";

/// Adds this module's functions to `map` (over Sprig's of the same names).
pub fn register(map: &mut FuncMap) {
    map.insert("include", include);
    map.insert("tpl", tpl);
    map.insert("required", required);
    map.insert("fail", fail);
    map.insert("lookup", lookup);
    map.insert("getHostByName", get_host_by_name);
}

/// `message` marked as a `fail`/`required` message.
pub fn wrap_message(message: &str) -> String {
    format!("{ERR_START}{message}{ERR_END}")
}

/// A `string` parameter: Go's template engine refuses anything else, in these words (it
/// reports them at the argument, which a function cannot; the text is the same).
fn string_arg(value: &Value) -> Result<&str, String> {
    match value {
        Value::String(s) => Ok(s),
        Value::Nil => Err("wrong type for value; expected string; got interface {}".into()),
        other => Err(format!("expected string; found {other}")),
    }
}

/// `include NAME DATA`: the named template's text.
fn include(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    cast::want_args("include", args, 2)?;
    let name = string_arg(&args[0])?;
    call.include(name, args[1].clone()).map(Value::from)
}

/// `tpl TEXT DATA`: `TEXT` rendered as a template with `DATA`.
fn tpl(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    cast::want_args("tpl", args, 2)?;
    let text = string_arg(&args[0])?;
    call.tpl(text, args[1].clone()).map(Value::from)
}

/// `required MESSAGE VALUE`: `VALUE`, unless it is nil or an empty string.
fn required(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    cast::want_args("required", args, 2)?;
    let message = string_arg(&args[0])?;
    match &args[1] {
        Value::Nil => Err(wrap_message(message)),
        Value::String(s) if s.is_empty() => Err(wrap_message(message)),
        other => Ok(other.clone()),
    }
}

/// `fail MESSAGE`: fails the render with `MESSAGE`.
fn fail(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    cast::want_args("fail", args, 1)?;
    Err(wrap_message(string_arg(&args[0])?))
}

/// `lookup API_VERSION KIND NAMESPACE NAME`: through the render's [`crate::Lookup`].
fn lookup(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    cast::want_args("lookup", args, 4)?;
    let api_version = string_arg(&args[0])?;
    let kind = string_arg(&args[1])?;
    let namespace = string_arg(&args[2])?;
    let name = string_arg(&args[3])?;
    call.env.lookup.lookup(api_version, kind, namespace, name)
}

/// `getHostByName`: Helm answers "" unless DNS lookups are enabled, which a pure renderer
/// never does.
fn get_host_by_name(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    cast::want_args("getHostByName", args, 1)?;
    string_arg(&args[0])?;
    Ok(Value::str(""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::{Env, Runtime};

    struct Echo;

    impl Runtime for Echo {
        fn include(&mut self, _: &mut Env, name: &str, data: Value) -> Result<String, String> {
            Ok(format!("include {name} {data}"))
        }
        fn tpl(&mut self, _: &mut Env, text: &str, data: Value) -> Result<String, String> {
            Ok(format!("tpl {text} {data}"))
        }
    }

    fn run(name: &'static str, args: &[Value]) -> Result<Value, String> {
        let mut map = FuncMap::new();
        register(&mut map);
        let mut env = Env::fixed(1, jiff::Zoned::now());
        let mut runtime = Echo;
        let mut call = Call::new(name, &mut env, &mut runtime);
        map[name](&mut call, args)
    }

    #[test]
    fn required_and_fail_mark_their_message() {
        let msg = Value::str("need x");
        assert_eq!(
            run("required", &[msg.clone(), Value::Nil]).unwrap_err(),
            "HELM_ERR_STARTneed xHELM_ERR_END"
        );
        assert_eq!(
            run("required", &[msg.clone(), Value::str("")]).unwrap_err(),
            "HELM_ERR_STARTneed xHELM_ERR_END"
        );
        assert_eq!(
            run("required", &[msg.clone(), Value::Bool(false)])
                .unwrap()
                .to_string(),
            "false"
        );
        assert_eq!(
            run("fail", &[Value::str("a\nb")]).unwrap_err(),
            "HELM_ERR_STARTa\nbHELM_ERR_END"
        );
        assert_eq!(
            run("fail", &[]).unwrap_err(),
            "wrong number of args for fail: want 1 got 0"
        );
    }

    #[test]
    fn include_tpl_and_lookup_go_through_the_call() {
        assert_eq!(
            run("include", &[Value::str("x"), Value::Int(1)])
                .unwrap()
                .to_string(),
            "include x 1"
        );
        assert_eq!(
            run("tpl", &[Value::str("{{ . }}"), Value::Int(2)])
                .unwrap()
                .to_string(),
            "tpl {{ . }} 2"
        );
        let found = run("lookup", &["v1", "Secret", "ns", "x"].map(Value::str)).unwrap();
        assert_eq!(found.to_string(), "map[]");
        assert_eq!(
            run("getHostByName", &[Value::str("example.com")])
                .unwrap()
                .to_string(),
            ""
        );
    }
}
