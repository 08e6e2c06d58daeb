//! Expectations are Helm v4.2.3's answers for the same calls.

use super::*;
use crate::template::{Env, Runtime};

struct NoRuntime;

impl Runtime for NoRuntime {
    fn include(&mut self, _: &mut Env, _: &str, _: Value) -> Result<String, String> {
        Err("no templates".into())
    }
    fn tpl(&mut self, _: &mut Env, _: &str, _: Value) -> Result<String, String> {
        Err("no templates".into())
    }
}

fn call(name: &str, args: &[Value]) -> Result<Value, String> {
    let mut map = FuncMap::new();
    register(&mut map);
    let function = map.get(name).copied().ok_or("no such function")?;
    let mut env = Env::new();
    let mut runtime = NoRuntime;
    let mut call = Call::new(name, &mut env, &mut runtime);
    function(&mut call, args)
}

/// `NAME "arg" | toJson`.
fn json_of(name: &str, arg: &str) -> String {
    match call(name, &[Value::str(arg)]) {
        Ok(v) => json::marshal(&v).unwrap_or_else(|e| e.message),
        Err(e) => format!("ERR {e}"),
    }
}

fn text_of(name: &str, arg: &str) -> String {
    match call(name, &[Value::str(arg)]) {
        Ok(v) => v.to_string(),
        Err(e) => format!("ERR {e}"),
    }
}

#[test]
fn base64_and_base32_as_sprig() {
    assert_eq!(text_of("b64enc", "hello"), "aGVsbG8=");
    for (input, want) in [
        ("aGVsbG8=", "hello"),
        ("aGVsbG8", "illegal base64 data at input byte 4"),
        ("aGV*bG8=", "illegal base64 data at input byte 3"),
        ("aGVsbA==x", "illegal base64 data at input byte 8"),
        ("aG\nVsbG8=", "hello"),
        ("a===", "illegal base64 data at input byte 1"),
        ("aGVsbA=", "illegal base64 data at input byte 7"),
    ] {
        assert_eq!(text_of("b64dec", input), want, "{input:?}");
    }
    for (input, want) in [
        ("hello", "NBSWY3DP"),
        ("", ""),
        ("a", "ME======"),
        ("abcdef", "MFRGGZDFMY======"),
    ] {
        assert_eq!(text_of("b32enc", input), want, "{input:?}");
    }
    for (input, want) in [
        ("NBSWY3DP", "hello"),
        ("NBSWY3D", "illegal base32 data at input byte 0"),
        ("NBSWY3DP1", "illegal base32 data at input byte 8"),
        ("NBSWY===", "hel"),
        ("NBSWY3A=", "hell"),
    ] {
        assert_eq!(text_of("b32dec", input), want, "{input:?}");
    }
}

#[test]
fn from_yaml_and_from_json_as_helm() {
    let not_map = |kind: &str| {
        format!(
            "{{\"Error\":\"error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}\"}}"
        )
    };
    assert_eq!(json_of("fromYaml", "- 1"), not_map("array"));
    assert_eq!(json_of("fromYaml", "a"), not_map("string"));
    assert_eq!(json_of("fromYaml", "1"), not_map("number"));
    assert_eq!(json_of("fromYaml", "true"), not_map("bool"));
    assert_eq!(json_of("fromYaml", "null"), "{}");
    assert_eq!(json_of("fromYaml", "a: yes"), r#"{"a":true}"#);
    assert_eq!(json_of("fromYamlArray", ""), "[]");
    assert_eq!(json_of("fromYamlArray", "- 1\n- a: b"), r#"[1,{"a":"b"}]"#);
    assert_eq!(
        json_of("fromYamlArray", "a"),
        r#"["error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go value of type []interface {}"]"#
    );
    assert_eq!(
        json_of("fromJson", "[1]"),
        r#"{"Error":"json: cannot unmarshal array into Go value of type map[string]interface {}"}"#
    );
    assert_eq!(
        json_of("fromJson", "{bad"),
        r#"{"Error":"invalid character 'b' looking for beginning of object key string"}"#
    );
    assert_eq!(json_of("fromJson", "null"), "null");
    assert_eq!(json_of("fromJsonArray", "null"), "null");
    assert_eq!(
        json_of("fromJsonArray", r#"[1, {"a": 2}]"#),
        r#"[1,{"a":2}]"#
    );
    assert_eq!(
        json_of("fromJsonArray", "{"),
        r#"["unexpected end of JSON input"]"#
    );
    assert_eq!(
        json_of("fromJsonArray", "{}"),
        r#"["json: cannot unmarshal object into Go value of type []interface {}"]"#
    );
    assert_eq!(json_of("mustFromJson", "[1,2]"), "[1,2]");
    assert_eq!(
        json_of("mustFromJson", "{x"),
        "ERR invalid character 'x' looking for beginning of object key string"
    );
}

#[test]
fn writers_as_helm() {
    let list = Value::list(vec![
        Value::Int(1),
        Value::map(BTreeMap::from([("a".to_string(), Value::str("b"))])),
    ]);
    let text = |name: &str, v: Value| call(name, &[v]).map(|v| v.to_string());
    assert_eq!(text("toYaml", list).as_deref(), Ok("- 1\n- a: b"));
    assert_eq!(text("toYaml", Value::str("")).as_deref(), Ok("\"\""));
    assert_eq!(text("toYaml", Value::Nil).as_deref(), Ok("null"));
    assert_eq!(text("toJson", Value::Nil).as_deref(), Ok("null"));
    assert_eq!(text("toYaml", Value::Float(f64::NAN)).as_deref(), Ok(""));
    assert!(text("mustToYaml", Value::Float(f64::NAN)).is_err());
    let html = Value::map(BTreeMap::from([("a".to_string(), Value::str("<b>"))]));
    assert_eq!(
        text("toPrettyJson", html.clone()).as_deref(),
        Ok("{\n  \"a\": \"\\u003cb\\u003e\"\n}")
    );
    assert_eq!(text("toRawJson", html).as_deref(), Ok("{\"a\":\"<b>\"}"));
    assert_eq!(
        call("toYaml", &[Value::Nil, Value::Nil]).err().as_deref(),
        Some("wrong number of args for toYaml: want 1 got 2")
    );
}

/// 1151 documents (YAML 1.1 scalars in every position, tags, anchors, merge keys, block
/// scalars, errors) and what Helm v4.2.3's `fromYaml DOC | toJson` gave for each.
#[test]
fn from_yaml_helm_answers() {
    let cases: Vec<(String, String)> =
        serde_json::from_str(include_str!("../../yaml/testdata/from_yaml.json"))
            .unwrap_or_default();
    assert_eq!(cases.len(), 1151);
    for (doc, want) in &cases {
        assert_eq!(&json_of("fromYaml", doc), want, "{doc:?}");
    }
}

/// Compares `fromYaml DOC | toJson` with the Helm SDK's answers (set `FROM_YAML_CASES` to a
/// JSON file of `[[document, expected], …]`).
#[test]
#[ignore = "needs a case file from the Helm SDK"]
fn from_yaml_cases_from_file() {
    let Ok(path) = std::env::var("FROM_YAML_CASES") else {
        return;
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let cases: Vec<(String, String)> = serde_json::from_str(&text).unwrap_or_default();
    let mut failures = 0;
    for (doc, want) in &cases {
        let got = json_of("fromYaml", doc);
        if &got != want {
            failures += 1;
            eprintln!("doc {doc:?}\n want {want}\n  got {got}");
        }
    }
    eprintln!("{} of {} documents differ", failures, cases.len());
    assert_eq!(failures, 0);
}

/// Deeply nested input is refused or handled, never a stack overflow (tests run on 2 MiB
/// stacks).
#[test]
fn deep_nesting_is_bounded() {
    for depth in [100, 999, 1_001, 2_500, 50_000] {
        let flow = format!("a: {}{}", "[".repeat(depth), "]".repeat(depth));
        let _ = json_of("fromYaml", &flow);
        let mut block = String::new();
        for i in 0..depth.min(3_000) {
            block.push_str(&"  ".repeat(i));
            block.push_str("- \n");
        }
        let _ = json_of("fromYamlArray", &block);
        let json = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let _ = json_of("fromJsonArray", &json);
    }
    let mut value = Value::Nil;
    for _ in 0..20_000 {
        value = Value::list(vec![value]);
    }
    for name in ["toYaml", "toJson", "toToml", "toYamlPretty", "toPrettyJson"] {
        let _ = call(name, std::slice::from_ref(&value));
    }
    // Dropping a deep list is itself recursive: unwind it by hand.
    while let Value::List(items, _) = value {
        value = items.first().cloned().unwrap_or(Value::Nil);
    }
}
