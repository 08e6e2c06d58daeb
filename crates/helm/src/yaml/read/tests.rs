use std::fmt::Write as _;

use super::*;

fn json(text: &str) -> String {
    match parse(text) {
        Ok(v) => crate::yaml::json::marshal(&crate::value::Value::from_json_floats(&v))
            .unwrap_or_else(|e| e.message),
        Err(e) => format!("ERR {}", e.message),
    }
}

#[test]
fn yaml_1_1_scalars_as_helm_reads_them() {
    // Expectations from Helm v4.2.3 (`fromYaml ... | toJson`).
    assert_eq!(json("a: yes"), r#"{"a":true}"#);
    assert_eq!(
        json(
            "a: [y, n, on, off, Yes, NO, ~, null, 0x1f, 0o17, 0777, 1_000, 1e3, 2020-01-01, 12:30, 1:20:30, +12, -0x1F, 0b101, 1.5e3, 12e3, .5, 5., 1_0.5, 0x_1f, 9223372036854775808, 18446744073709551616, 2020-01-01T10:00:00Z, 2001-12-14 21:59:43.10 -5, True, tRue, 0.1e-2,08,09.5, -0b11, 1e400, 0o8, +0x10, 1__0, _1, +, .e1, 1.e1, 2020-1-2, 2020-01-01 10:00:00 ]"
        ),
        r#"{"a":[true,false,true,false,true,false,null,null,31,15,511,1000,1000,"2020-01-01","12:30","1:20:30",12,-31,5,1500,12000,0.5,5,10.5,31,9223372036854776000,18446744073709552000,"2020-01-01T10:00:00Z","2001-12-14 21:59:43.10 -5",true,"tRue",0.001,8,9.5,-3,"1e400","0o8",16,10,"_1","+",".e1",10,"2020-1-2","2020-01-01 10:00:00"]}"#
    );
}

#[test]
fn structure_as_helm_reads_it() {
    assert_eq!(json("a: 1\na: 2"), r#"{"a":2}"#);
    assert_eq!(json("a: 1\n---\nb: 2"), r#"{"a":1}"#);
    assert_eq!(json(""), "null");
    assert_eq!(
        json("a: &x {b: 1}\nc: *x\nd:\n  <<: *x\n  e: 2"),
        r#"{"a":{"b":1},"c":{"b":1},"d":{"b":1,"e":2}}"#
    );
    assert_eq!(
        json("{1: a, true: b, 1.5: d, 0x10: x, 100000000000000000000: z}"),
        r#"{"1":"a","1.5":"d","16":"x","1e+20":"z","true":"b"}"#
    );
    assert_eq!(
        json("a: !!str 1\nb: !!int \"3\"\nc: !!binary aGk=\nd: !foo bar"),
        r#"{"a":"1","b":3,"c":"hi","d":"bar"}"#
    );
    assert_eq!(
        json("a: \"x\n  y\"\nb: |\n  l1\n  l2\nc: >\n  f1\n  f2\n"),
        r#"{"a":"x y","b":"l1\nl2\n","c":"f1 f2\n"}"#
    );
    assert_eq!(json("a: b\n c"), r#"{"a":"b c"}"#);
}

#[test]
fn errors_as_helm_words_them() {
    assert_eq!(
        json("a: .nan"),
        "ERR error converting YAML to JSON: json: unsupported value: NaN"
    );
    assert_eq!(
        json("a: -.inf"),
        "ERR error converting YAML to JSON: json: unsupported value: -Inf"
    );
    assert_eq!(
        json("a: 1\nb: c: d\n"),
        "ERR error converting YAML to JSON: yaml: line 2: mapping values are not allowed in this context"
    );
    assert_eq!(
        json("1: a\ntrue: b\n~: c\n1.5: d"),
        r#"ERR error converting YAML to JSON: unsupported map key of type: %!s(<nil>), key: <nil>, value: "c""#
    );
    assert_eq!(
        json("[1,2]: e"),
        "ERR error converting YAML to JSON: yaml: invalid map key: []interface {}{1, 2}"
    );
    assert_eq!(
        json("a: 1\n- b"),
        "ERR error converting YAML to JSON: yaml: line 1: did not find expected key"
    );
    assert_eq!(
        json("- a\nb: 1"),
        "ERR error converting YAML to JSON: yaml: line 1: did not find expected '-' indicator"
    );
    assert_eq!(
        json("a: [1, 2"),
        "ERR error converting YAML to JSON: yaml: line 1: did not find expected ',' or ']'"
    );
    assert_eq!(
        json("a:\n\tb: 1"),
        "ERR error converting YAML to JSON: yaml: line 2: found character that cannot start any token"
    );
    assert_eq!(
        json("a: @b"),
        "ERR error converting YAML to JSON: yaml: found character that cannot start any token"
    );
    assert_eq!(
        json("a: \"b"),
        "ERR error converting YAML to JSON: yaml: found unexpected end of stream"
    );
    assert_eq!(
        json("a: 1\n  b: 2"),
        "ERR error converting YAML to JSON: yaml: line 2: mapping values are not allowed in this context"
    );
}

#[test]
fn more_errors_as_helm_words_them() {
    let prefix = "ERR error converting YAML to JSON: ";
    for (doc, want) in [
        ("[", "yaml: line 1: did not find expected node content"),
        ("{a: 1,", "yaml: line 1: did not find expected node content"),
        (
            "a:\n  - 1\n  - [2,\n",
            "yaml: line 3: did not find expected node content",
        ),
        (
            "key: value\n:bad",
            "yaml: line 3: could not find expected ':'",
        ),
        (
            "a: >\n x\n  y\nb",
            "yaml: line 5: could not find expected ':'",
        ),
        (
            "a: 1\n\tb: 2",
            "yaml: line 2: found a tab character that violates indentation",
        ),
        (
            "- |\n\tx",
            "yaml: line 2: found a tab character where an indentation space is expected",
        ),
        (
            "a: |\n  \tx",
            "yaml: line 2: found a tab character where an indentation space is expected",
        ),
        ("a: \u{7}", "yaml: control characters are not allowed"),
        ("a: 'b'c", "yaml: did not find expected key"),
        ("a: {b: [}", "yaml: did not find expected node content"),
        ("a: ]", "yaml: did not find expected node content"),
        (
            "x: \"\\u12\"",
            "yaml: did not find expected hexdecimal number",
        ),
        ("a: *nope", "yaml: unknown anchor 'nope' referenced"),
        (
            "\ta: 1",
            "yaml: found character that cannot start any token",
        ),
        (
            "\t# comment\na: 1",
            "yaml: found character that cannot start any token",
        ),
        (
            "---\n\ta: 1",
            "yaml: line 2: found character that cannot start any token",
        ),
        (
            "\n\ta: 1",
            "yaml: line 2: found character that cannot start any token",
        ),
        ("a: &a [*a]", "yaml: anchor 'a' value contains itself"),
        (
            "d:\n  <<: 1\n",
            "yaml: map merge requires map or sequence of maps as the value",
        ),
        (
            "k: !!float 18446744073709551615",
            "yaml: cannot decode !!int `18446744073709551615` as a !!float",
        ),
    ] {
        assert_eq!(json(doc), format!("{prefix}{want}"), "{doc:?}");
    }
    // A quoted scalar's continuation lines may sit at any indentation, as in libyaml.
    assert_eq!(json("a: \"x\ny\""), r#"{"a":"x y"}"#);
    assert_eq!(json("a:\n  b: 'x\ny'"), r#"{"a":{"b":"x y"}}"#);
    assert_eq!(
        json("a: 'one\n\n  two\nthree'\nb: 2"),
        r#"{"a":"one\ntwo three","b":2}"#
    );
    assert_eq!(
        json("k: \"x\ny"),
        "ERR error converting YAML to JSON: yaml: line 2: found unexpected end of stream"
    );
    // Tabs after a value indicator, inside flow collections and inside scalars are fine.
    assert_eq!(json("a:\t1"), r#"{"a":1}"#);
    assert_eq!(json("a: [1,\t2]"), r#"{"a":[1,2]}"#);
    assert_eq!(json("a: b\n  \tc"), r#"{"a":"b c"}"#);
    // Tabs after a block scalar's indentation are content.
    assert_eq!(
        json("a: |-\n    x {\n    \ty\n    }\n"),
        r#"{"a":"x {\n\ty\n}"}"#
    );
}

#[test]
fn alias_bombs_are_refused() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let p = i - 1;
        let _ = writeln!(
            text,
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]"
        );
    }
    assert!(json(&text).contains("excessive aliasing"));
    let deep = "[".repeat(100_000);
    assert!(json(&deep).starts_with("ERR"));
}

#[test]
fn values_documents_split_as_helm() {
    use crate::yaml::split_documents;
    fn docs(text: &str) -> Result<Vec<&str>, String> {
        split_documents(text).map_err(|e| e.message)
    }
    assert_eq!(
        docs("a: 1\nb: {c: 1}\n---\nb: {c: 3}\n"),
        Ok(vec!["a: 1\nb: {c: 1}\n", "b: {c: 3}\n"])
    );
    assert_eq!(docs("---\na: 1"), Ok(vec!["a: 1"]));
    assert_eq!(docs("a: 1\n---\n"), Ok(vec!["a: 1\n"]));
    assert_eq!(docs("a: 1\n--- # c\nb: 2\n"), Ok(vec!["a: 1\n", "b: 2\n"]));
    assert_eq!(docs(""), Ok(vec![]));
    assert_eq!(docs("a: |\n  x\n  ---\n"), Ok(vec!["a: |\n  x\n  ---\n"]));
    assert_eq!(
        docs("a: 1\n---x\nb: 2"),
        Err("invalid Yaml document separator: x".to_string())
    );
}

/// Times each stage of reading a large values file (run with `--ignored --nocapture`, set
/// `YAML_BENCH` to the file).
#[test]
#[ignore = "a timing, not a test"]
fn timing_stages() {
    let Ok(path) = std::env::var("YAML_BENCH") else {
        return;
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let _ = check_characters(&text);
        let _ = check_leading_tabs(&text);
        eprintln!("checks: {:?}", t.elapsed());
        let t = std::time::Instant::now();
        let root = read_tree(&text).ok().flatten();
        eprintln!("read_tree: {:?}", t.elapsed());
        let t = std::time::Instant::now();
        let mut decoder = Decoder {
            decode_count: 0,
            alias_count: 0,
            alias_depth: 0,
            odd_key: false,
            non_finite: false,
        };
        let go = root.map(|r| decoder.decode(&r, 0));
        eprintln!("decode: {:?}", t.elapsed());
        let t = std::time::Instant::now();
        if let Some(Ok(go)) = go {
            let _ = check_keys(&go);
            let _ = first_non_finite(&go);
            eprintln!("checks2: {:?}", t.elapsed());
            let t = std::time::Instant::now();
            let _ = to_json(go);
            eprintln!("to_json: {:?}", t.elapsed());
        }
    }
}

#[test]
fn merge_keys_as_helm_reads_them() {
    // Expectations from Helm v4.2.3 (`fromYaml ... | toJson`): `<<` merges when plain, under
    // the non-specific tag `!` (quoted too) or tagged `!!merge`; quoted and untagged it is a key.
    assert_eq!(json("b: &b {a: 1}\n! <<: *b\n"), r#"{"a":1,"b":{"a":1}}"#);
    assert_eq!(json("! '<<': {a: 1}\n"), r#"{"a":1}"#);
    assert_eq!(json("!!merge <<: {a: 1}\nb: 2\n"), r#"{"a":1,"b":2}"#);
    assert_eq!(json("\"<<\": {a: 1}\n"), r#"{"\u003c\u003c":{"a":1}}"#);
}

#[test]
fn long_comment_runs_between_entries_are_read() {
    use std::fmt::Write as _;
    // A key whose value starts after a hundred comment lines, as real charts carry
    // (opentelemetry-demo's `components:`); Helm reads it.
    let mut text = String::from("components:\n");
    for i in 0..120 {
        let _ = writeln!(text, "  # - commented out entry {i}");
    }
    text.push_str("  c: 2\n");
    assert_eq!(json(&text), r#"{"components":{"c":2}}"#);
}

#[test]
fn unfixable_quoted_scalar_indentation_fails_fast() {
    // Found by fuzzing (the input is the fuzz seed of the same name): an unterminated quoted
    // scalar whose continuation line the parser refuses again after re-indenting (lone `\r`
    // breaks shift its line numbers). Each pass doubled the text; it must end in an error at once.
    let text =
        include_str!("../../../fuzz/corpus/values_yaml/regression-quoted-indent-growth.yaml");
    let started = std::time::Instant::now();
    let error = crate::yaml::parse(text).unwrap_err();
    assert!(error.message.contains("line 33"), "{}", error.message);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn head_reads_as_the_full_parse() {
    let doc = "apiVersion: v1\nKind: ConfigMap\nmetadata:\n  name: x\n  labels: {a: b}\n  \
               annotations: {h: '1'}\ndata: {k: [1, 2]}\n";
    let full = parse(doc).expect("parses");
    let head = parse_head(doc).expect("parses");
    assert_eq!(head["apiVersion"], full["apiVersion"]);
    assert_eq!(head["Kind"], full["Kind"]);
    assert_eq!(head["metadata"]["name"], full["metadata"]["name"]);
    assert_eq!(
        head["metadata"]["annotations"],
        full["metadata"]["annotations"]
    );
    // What the head does not read is left out, keys kept.
    assert_eq!(head["data"], serde_json::Value::Null);
    assert_eq!(head["metadata"]["labels"], serde_json::Value::Null);
    // Errors anywhere in the document are the full parse's.
    for bad in [
        "kind: A\ndata: {x: .inf}\n",
        "kind: A\ndata: {~: 1, x: .nan}\n",
        "kind: A\ndata: {18446744073709551615: 1}\n",
        "kind: A\ndata: [\n",
    ] {
        assert_eq!(
            parse_head(bad).map_err(|e| e.message),
            parse(bad)
                .map(|_| serde_json::Value::Null)
                .map_err(|e| e.message),
            "{bad}"
        );
    }
    assert_eq!(parse_head("").expect("empty"), serde_json::Value::Null);
    assert_eq!(
        parse_head("[1]").expect("list"),
        parse("[1]").expect("list")
    );
}
