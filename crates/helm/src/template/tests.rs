//! Go `text/template` behaviour, each expectation confirmed against Helm's Go SDK (Helm
//! v4.2.3, Go 1.24): the texts are Go's raw messages (Helm reformats some of them later).

use std::rc::Rc;

use super::{Call, Env, FuncMap, Set};
use crate::value::Value;

const NAME: &str = "t/templates/t.yaml";

fn include(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let name = args
        .first()
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let data = args.get(1).cloned().unwrap_or_default();
    call.include(&name, data).map(Value::from)
}

fn tpl(call: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    let text = args
        .first()
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let data = args.get(1).cloned().unwrap_or_default();
    call.tpl(&text, data).map(Value::from)
}

#[allow(clippy::unnecessary_wraps)]
fn fail(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    Err(args.first().map(ToString::to_string).unwrap_or_default())
}

#[allow(clippy::unnecessary_wraps)]
fn upper(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    Ok(Value::from(
        args.first()
            .map(ToString::to_string)
            .unwrap_or_default()
            .to_uppercase(),
    ))
}

#[allow(clippy::unnecessary_wraps)]
fn list(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
    Ok(Value::list(args.to_vec()))
}

fn funcs() -> Rc<FuncMap> {
    let mut f = FuncMap::new();
    f.insert("include", include);
    f.insert("tpl", tpl);
    f.insert("fail", fail);
    f.insert("upper", upper);
    f.insert("list", list);
    Rc::new(f)
}

/// Renders `text` as Helm's `eval` does (dot = `{Values: …}`), with `<no value>` removed.
fn render(text: &str, values: &str) -> Result<String, String> {
    let mut set = Set::new(funcs());
    set.parse(NAME, text).map_err(|e| e.message)?;
    let values = Value::from_json_floats(&serde_json::from_str(values).expect("test JSON"));
    let data = Value::map(std::collections::BTreeMap::from([(
        "Values".to_string(),
        values,
    )]));
    let mut env = Env::new();
    set.execute(NAME, data, &mut env)
        .map(|s| s.replace("<no value>", ""))
        .map_err(|e| e.message)
}

#[allow(clippy::needless_raw_string_hashes)]
const CASES: &[(&str, &str, Result<&str, &str>)] = &[
    (
        "{{ if }}",
        "{}",
        Err("template: t/templates/t.yaml:1: missing value for if"),
    ),
    (
        "{{ .Values.a.b.c }}",
        "{\"a\":{}}",
        Err(
            "template: t/templates/t.yaml:1:10: executing \"t/templates/t.yaml\" at <.Values.a.b.c>: nil pointer evaluating interface {}.c",
        ),
    ),
    ("{{ $x := .Values.missing }}{{ $x.foo }}", "{}", Ok("")),
    ("{{ (.Values.missing).foo }}", "{}", Ok("")),
    (
        "{{ range .Values.l }}{{ .x }}{{ end }}",
        "{\"l\":[1,null]}",
        Err(
            "template: t/templates/t.yaml:1:24: executing \"t/templates/t.yaml\" at <.x>: can't evaluate field x in type interface {}",
        ),
    ),
    (
        "{{ range .Values.l }}{{ .x }}{{ end }}",
        "{\"l\":[null,1]}",
        Err(
            "template: t/templates/t.yaml:1:24: executing \"t/templates/t.yaml\" at <.x>: nil pointer evaluating interface {}.x",
        ),
    ),
    (
        "{{ eq .Values.n 1 }}",
        "{\"n\":1}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <eq .Values.n 1>: error calling eq: incompatible types for comparison: float64 and int",
        ),
    ),
    (
        "{{ eq \"a\" 1 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <eq \"a\" 1>: error calling eq: incompatible types for comparison: string and int",
        ),
    ),
    (
        "{{ foo }}",
        "{}",
        Err("template: t/templates/t.yaml:1: function \"foo\" not defined"),
    ),
    (
        "{{ index .Values.l 5 }}",
        "{\"l\":[1,null]}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <index .Values.l 5>: error calling index: index out of range: 5",
        ),
    ),
    (
        "{{ index .Values.l 2 }}",
        "{\"l\":[1,null]}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <index .Values.l 2>: error calling index: reflect: slice index out of range",
        ),
    ),
    (
        "{{ 1e3 }} {{ 0x10 }} {{ 'a' }} {{ 1_000 }} {{ 1.5 }} {{ 0b101 }} {{ 0o17 }} {{ 017 }} {{ 1.0 }} {{ -3 }} {{ +4 }} {{ 0x1p4 }}",
        "{}",
        Ok("1000 16 97 1000 1.5 5 15 15 1 -3 4 16"),
    ),
    (
        "{{ template \"nope\" }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:12: executing \"t/templates/t.yaml\" at <{{template \"nope\"}}>: template \"nope\" not defined",
        ),
    ),
    ("{{ range 3 }}{{ . }}{{ end }}", "{}", Ok("012")),
    ("{{ range $i := 3 }}{{ $i }}{{ end }}", "{}", Ok("012")),
    (
        "{{ range $i, $v := 3 }}{{ $i }}{{ end }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:19: executing \"t/templates/t.yaml\" at <3>: can't use 3 to iterate over more than one variable",
        ),
    ),
    (
        "{{ len 3 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <len 3>: error calling len: len of type int",
        ),
    ),
    (
        "{{ .Values.n.foo }}",
        "{\"n\":1}",
        Err(
            "template: t/templates/t.yaml:1:10: executing \"t/templates/t.yaml\" at <.Values.n.foo>: can't evaluate field foo in type interface {}",
        ),
    ),
    (
        "{{ and 1 0 2 }} {{ or 0 \"\" \"x\" }} {{ and 1 2 }} {{ or 0 \"\" }}",
        "{}",
        Ok("0 x 2 "),
    ),
    (
        "{{ and }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <and>: wrong number of args for and: want at least 1 got 0",
        ),
    ),
    (
        "{{ html \"<a&'\\\">\" }}",
        "{}",
        Ok("&lt;a&amp;&#39;&#34;&gt;"),
    ),
    (
        "{{ js \"<a'\\\"=`>&\" }}",
        "{}",
        Ok("\\u003Ca\\'\\\"\\u003D`\\u003E\\u0026"),
    ),
    (
        "{{ urlquery \"a b&c/\u{e9}\" }}",
        "{}",
        Ok("a+b%26c%2F%C3%A9"),
    ),
    ("{{ 1 | printf \"%d %d\" 2 }}", "{}", Ok("2 1")),
    (
        "{{ eq .Values.missing nil }} {{ eq nil nil }} {{ eq .Values.l nil }}",
        "{\"l\":[1,null],\"m\":{\"a\":1}}",
        Ok("true true false"),
    ),
    (
        "{{ eq 1 2 3 1 }} {{ eq 1 2 }} {{ ne 1 2 }} {{ ne \"a\" \"a\" }}",
        "{}",
        Ok("true false true false"),
    ),
    (
        "{{ lt 1 2.0 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <lt 1 2.0>: error calling lt: incompatible types for comparison: int and float64",
        ),
    ),
    (
        "{{ lt \"a\" \"b\" }} {{ le 2 2 }} {{ gt 3 2 }} {{ ge 1 2 }} {{ lt 1.5 2.5 }}",
        "{}",
        Ok("true true true false true"),
    ),
    (
        "{{ lt true false }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <lt true false>: error calling lt: invalid type for comparison",
        ),
    ),
    (
        "{{ lt .Values.l 1 }}",
        "{\"l\":[1]}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <lt .Values.l 1>: error calling lt: invalid type for comparison",
        ),
    ),
    (
        "{{ len .Values.missing }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <len .Values.missing>: error calling len: len of nil pointer",
        ),
    ),
    (
        "{{ index .Values.missing \"a\" }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <index .Values.missing \"a\">: error calling index: index of untyped nil",
        ),
    ),
    (
        "{{ index .Values.m \"zz\" }}|{{ index .Values.m \"a\" }}",
        "{\"m\":{\"a\":1}}",
        Ok("|1"),
    ),
    (
        "{{ index .Values.m 1 }}",
        "{\"m\":{\"a\":1}}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <index .Values.m 1>: error calling index: value has type int; should be string",
        ),
    ),
    (
        "{{ index .Values.l \"a\" }}",
        "{\"l\":[1,null]}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <index .Values.l \"a\">: error calling index: cannot index slice/array with type string",
        ),
    ),
    (
        "{{ index .Values.l -1 }}",
        "{\"l\":[1,null]}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <index .Values.l -1>: error calling index: index out of range: -1",
        ),
    ),
    (
        "{{ index .Values.m \"a\" \"b\" 1 }}",
        "{\"m\":{\"a\":{\"b\":[5,6]}}}",
        Ok("6"),
    ),
    ("{{ slice .Values.l 1 }}", "{\"l\":[1,null]}", Ok("[<nil>]")),
    (
        "{{ not }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <not>: wrong number of args for not: want 1 got 0",
        ),
    ),
    ("{{ not 0 }} {{ not \"x\" }}", "{}", Ok("true false")),
    ("{{ print 1 2 \"a\" 3 nil }}", "{}", Ok("1 2a3 <nil>")),
    ("{{ println 1 \"a\" }}", "{}", Ok("1 a\n")),
    (
        "{{ .Values.m.a 1 }}",
        "{\"m\":{\"a\":1}}",
        Err(
            "template: t/templates/t.yaml:1:10: executing \"t/templates/t.yaml\" at <.Values.m.a>: a is not a method but has arguments",
        ),
    ),
    (
        "{{ 3 | .Values.m.a }}",
        "{\"m\":{\"a\":1}}",
        Err(
            "template: t/templates/t.yaml:1:14: executing \"t/templates/t.yaml\" at <.Values.m.a>: a is not a method but has arguments",
        ),
    ),
    (
        "{{ nil }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <nil>: nil is not a command",
        ),
    ),
    (
        "{{ $x }}",
        "{}",
        Err("template: t/templates/t.yaml:1: undefined variable \"$x\""),
    ),
    (
        "{{ range $i, $v := .Values.m }}{{ $i }}={{ $v }};{{ end }}",
        "{\"m\":{\"a\":1,\"b\":\"x\"}}",
        Ok("a=1;b=x;"),
    ),
    (
        "{{ range $i, $v, $w := .Values.m }}{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: too many declarations in range"),
    ),
    (
        "{{ break }}",
        "{}",
        Err("template: t/templates/t.yaml:1: {{break}} outside {{range}}"),
    ),
    (
        "{{ range .Values.l }}{{ if . }}{{ break }}{{ end }}x{{ end }}",
        "{\"l\":[0,1,2]}",
        Ok("x"),
    ),
    (
        "{{ range .Values.l }}{{ if . }}{{ continue }}{{ end }}x{{ . }}{{ end }}",
        "{\"l\":[0,1,2]}",
        Ok("x0"),
    ),
    (
        "{{ range .Values.e }}x{{ else }}E{{ end }}",
        "{\"e\":[]}",
        Ok("E"),
    ),
    (
        "{{ with .Values.missing }}x{{ else with .Values.m }}{{ .a }}{{ end }}",
        "{\"m\":{\"a\":1}}",
        Ok("1"),
    ),
    (
        "{{ if 0 }}a{{ else if 1 }}b{{ else }}c{{ end }}",
        "{}",
        Ok("b"),
    ),
    ("{{- /* c */ -}}  x  {{- 1 -}} y", "{}", Ok("x1y")),
    ("{{/* c */}}", "{}", Ok("")),
    ("{{ \"a\" | len }}", "{}", Ok("1")),
    (
        "{{ (1) 2 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <(1) 2>: can't give argument to non-function 1",
        ),
    ),
    (
        "{{ .Values.m.a.b }}",
        "{\"m\":{\"a\":1}}",
        Err(
            "template: t/templates/t.yaml:1:10: executing \"t/templates/t.yaml\" at <.Values.m.a.b>: can't evaluate field b in type interface {}",
        ),
    ),
    ("{{ $.Values.m.a }}", "{\"m\":{\"a\":1}}", Ok("1")),
    ("{{ $x := 1 }}{{ $x = 2 }}{{ $x }}", "{}", Ok("2")),
    (
        "{{ $y = 2 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:8: executing \"t/templates/t.yaml\" at <2>: undefined variable: $y",
        ),
    ),
    (
        "{{ printf \"%v\" (index .Values.l 1) }}",
        "{\"l\":[1,null]}",
        Ok("<nil>"),
    ),
    (
        "{{ call .Values.m }}",
        "{\"m\":{\"a\":1}}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <call .Values.m>: error calling call: non-function .Values.m of type map[string]interface {}",
        ),
    ),
    (
        "{{ define \"x\" }}a{{ end }}{{ block \"y\" . }}b{{ end }}{{ template \"x\" }}",
        "{}",
        Ok("ba"),
    ),
    (
        "{{ define \"a\" }}{{ include \"a\" . }}{{ end }}{{ include \"nope\" . }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:47: executing \"t/templates/t.yaml\" at <include \"nope\" .>: error calling include: template: no template \"nope\" associated with template \"gotpl\"",
        ),
    ),
    (
        "{{ tpl \"{{ if }}\" . }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <tpl \"{{ if }}\" .>: error calling tpl: cannot parse template \"{{ if }}\": template: gotpl:1: missing value for if",
        ),
    ),
    (
        "{{ tpl \"{{ index 1 2 }}\" . }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <tpl \"{{ index 1 2 }}\" .>: error calling tpl: error during tpl function execution for \"{{ index 1 2 }}\": template: gotpl:1:3: executing \"gotpl\" at <index 1 2>: error calling index: can't index item of type int",
        ),
    ),
    ("{{ tpl \"{{ .Values.missing }}x\" . }}", "{}", Ok("x")),
    (
        "{{ tpl \"{{ define \\\"q\\\" }}Q{{ end }}{{ template \\\"q\\\" }}\" . }}{{ template \"q\" }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:74: executing \"t/templates/t.yaml\" at <{{template \"q\"}}>: template \"q\" not defined",
        ),
    ),
    (
        "{{ define \"d\" }}D{{ . }}{{ end }}{{ include \"d\" 3 }}{{ template \"d\" 4 }}",
        "{}",
        Ok("D3D4"),
    ),
    (
        "{{ if }}",
        "{}",
        Err("template: t/templates/t.yaml:1: missing value for if"),
    ),
    (
        "{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected {{end}}"),
    ),
    (
        "{{ else }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected {{else}}"),
    ),
    (
        "{{ range }}",
        "{}",
        Err("template: t/templates/t.yaml:1: missing value for range"),
    ),
    (
        "{{ with 1 }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected EOF"),
    ),
    (
        "{{ .x | 1 }}",
        "{}",
        Err("template: t/templates/t.yaml:1: non executable command in pipeline stage 2"),
    ),
    ("{{ 1 | }}", "{}", Ok("1")),
    (
        "{{ | 1 }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected \"|\" in command"),
    ),
    (
        "{{ ( }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unclosed left paren"),
    ),
    (
        "{{ ) }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected right paren"),
    ),
    (
        "{{ (1 }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unclosed left paren"),
    ),
    (
        "{{ \"abc }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unterminated quoted string"),
    ),
    (
        "{{ `abc }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unterminated raw quoted string"),
    ),
    (
        "{{ 'ab' }}",
        "{}",
        Err("template: t/templates/t.yaml:1: malformed character constant: 'ab'"),
    ),
    (
        "{{ 3x }}",
        "{}",
        Err("template: t/templates/t.yaml:1: bad number syntax: \"3x\""),
    ),
    (
        "{{ .a# }}",
        "{}",
        Err("template: t/templates/t.yaml:1: bad character U+0023 '#'"),
    ),
    (
        "{{ @ }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected \"@\" in command"),
    ),
    (
        "{{ $x := 1 }}{{ $x.y.z }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:18: executing \"t/templates/t.yaml\" at <$x.y.z>: can't evaluate field y in type int",
        ),
    ),
    (
        "{{ .x\n",
        "{}",
        Err("template: t/templates/t.yaml:2: unclosed action started at t/templates/t.yaml:1"),
    ),
    (
        "a\n{{ .x\n}}\n{{ if 1 }}",
        "{}",
        Err("template: t/templates/t.yaml:4: unexpected EOF"),
    ),
    (
        "{{ define \"x\" }}a{{ end }}{{ define \"x\" }}b{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: template: multiple definition of template \"x\""),
    ),
    (
        "{{ define \"x\" }}a{{ end }}{{ define \"x\" }} {{ end }}{{ template \"x\" }}",
        "{}",
        Ok("a"),
    ),
    (
        "{{ define \"x\" }}{{ else }}{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected {{else}} in define clause"),
    ),
    (
        "{{ if 1 }}{{ else }}{{ else }}{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: expected end; found {{else}}"),
    ),
    (
        "{{ \"a\" .b }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <\"a\">: can't give argument to non-function \"a\"",
        ),
    ),
    (
        "{{ true.x }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected . after term \"true\""),
    ),
    (
        "{{ nil.x }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected . after term \"nil\""),
    ),
    (
        "{{ 1 2 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <1>: can't give argument to non-function 1",
        ),
    ),
    (
        "{{ . 1 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <.>: can't give argument to non-function .",
        ),
    ),
    (
        "{{ printf 1 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:10: executing \"t/templates/t.yaml\" at <1>: expected string; found 1",
        ),
    ),
    (
        "{{ printf .Values.n }}",
        "{\"n\":1}",
        Err(
            "template: t/templates/t.yaml:1:17: executing \"t/templates/t.yaml\" at <.Values.n>: wrong type for value; expected string; got float64",
        ),
    ),
    (
        "{{ printf .Values.missing }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:17: executing \"t/templates/t.yaml\" at <.Values.missing>: wrong type for value; expected string; got interface {}",
        ),
    ),
    (
        "{{ printf nil }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:10: executing \"t/templates/t.yaml\" at <nil>: cannot assign nil to string",
        ),
    ),
    (
        "{{ printf \"%s\" \"x\" | printf \"%s-%s\" \"y\" }}",
        "{}",
        Ok("y-x"),
    ),
    (
        "{{ 18446744073709551615 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <18446744073709551615>: 18446744073709551615 overflows int",
        ),
    ),
    (
        "{{ 99999999999999999999 }}",
        "{}",
        Err("template: t/templates/t.yaml:1: integer overflow: \"99999999999999999999\""),
    ),
    (
        "{{ 1e400 }}",
        "{}",
        Err("template: t/templates/t.yaml:1: illegal number syntax: \"1e400\""),
    ),
    (
        "{{ range .Values.s }}{{ end }}",
        "{\"s\":\"abc\"}",
        Err(
            "template: t/templates/t.yaml:1:16: executing \"t/templates/t.yaml\" at <.Values.s>: range can't iterate over abc",
        ),
    ),
    (
        "{{ range .Values.f }}{{ end }}",
        "{\"f\":2}",
        Err(
            "template: t/templates/t.yaml:1:16: executing \"t/templates/t.yaml\" at <.Values.f>: range can't iterate over 2",
        ),
    ),
    (
        "{{ range .Values.missing }}x{{ else }}none{{ end }}",
        "{}",
        Ok("none"),
    ),
    (
        "{{ range $i, $e := .Values.l }}{{ $i }}{{ $e }}{{ end }}{{ $i }}",
        "{\"l\":[\"a\",\"b\"]}",
        Err("template: t/templates/t.yaml:1: undefined variable \"$i\""),
    ),
    (
        "{{ $x := 1 }}{{ if true }}{{ $x := 2 }}{{ $x }}{{ end }}{{ $x }}",
        "{}",
        Ok("21"),
    ),
    (
        "{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}",
        "{}",
        Ok("2"),
    ),
    (
        "{{ with $v := .Values.m.a }}{{ $v.b }}{{ .b }}{{ end }}",
        "{\"m\":{\"a\":{\"b\":\"c\"}}}",
        Ok("cc"),
    ),
    (
        "{{ \"\\u00e9\\x41\\t\" }}|{{ `raw\n` }}",
        "{}",
        Ok("\u{e9}A\t|raw\n"),
    ),
    ("{{ print \"a\" \"b\" 1 2 \"c\" }}", "{}", Ok("ab1 2c")),
    (
        "{{ .Values.f }} {{ .Values.i }} {{ .Values.b }} {{ .Values.s }} {{ .Values.n }} {{ .Values }}",
        "{\"f\":1.5,\"i\":3,\"b\":true,\"s\":\"x\",\"n\":null}",
        Ok("1.5 3 true x  map[b:true f:1.5 i:3 n:<nil> s:x]"),
    ),
    (
        "{{ .Values.l }}",
        "{\"l\":[1,\"a\",[2],{\"k\":\"v\"}]}",
        Ok("[1 a [2] map[k:v]]"),
    ),
    (
        "{{ .Values.missing.x }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:10: executing \"t/templates/t.yaml\" at <.Values.missing.x>: nil pointer evaluating interface {}.x",
        ),
    ),
    ("{{ .Values.nope }}", "{}", Ok("")),
    (
        "{{ .Values.m.a.b }}",
        "{\"m\":{}}",
        Err(
            "template: t/templates/t.yaml:1:10: executing \"t/templates/t.yaml\" at <.Values.m.a.b>: nil pointer evaluating interface {}.b",
        ),
    ),
    ("{{ index . \"Values\" }}", "{}", Ok("map[]")),
    (
        "{{ js \"\\u2028\u{e9}\\x01\" }}",
        "{}",
        Ok("\\u2028\u{e9}\\u0001"),
    ),
    (
        "{{ eq 1 1.0 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <eq 1 1.0>: error calling eq: incompatible types for comparison: int and float64",
        ),
    ),
    (
        "{{ eq .Values.a \"x\" \"y\" }}",
        "{\"a\":\"x\"}",
        Ok("true"),
    ),
    ("{{ and 0 (fail \"x\") }}", "{}", Ok("0")),
    ("{{ or 1 (fail \"x\") }}", "{}", Ok("1")),
    (
        "{{ 0 | and 1 }} {{ 0 | or 1 }} {{ 5 | and 1 }} {{ 5 | or 0 }}",
        "{}",
        Ok("0 1 5 5"),
    ),
    (
        "{{ tpl \"{{ include \\\"a\\\" . }}\" . }}{{ define \"a\" }}A{{ .Values.x }}{{ end }}",
        "{}",
        Ok("A"),
    ),
    (
        "{{ tpl .Values.t . }}",
        "{\"t\":\"{{ .Values.x }}\",\"x\":\"X\"}",
        Ok("X"),
    ),
    (
        "{{ define \"x\" }}{{ fail \"boom\" }}{{ end }}\n\n{{ template \"x\" . }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:19: executing \"x\" at <fail \"boom\">: error calling fail: boom",
        ),
    ),
    (
        "{{ define \"x\" }}{{ .missing.y }}{{ end }}{{ include \"x\" . }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:44: executing \"t/templates/t.yaml\" at <include \"x\" .>: error calling include: template: t/templates/t.yaml:1:27: executing \"x\" at <.missing.y>: nil pointer evaluating interface {}.y",
        ),
    ),
    (
        "{{ range .Values.a }}{{ . }}{{ range $.Values.b }}{{ else }}{{ break }}{{ end }}x{{ end }}",
        "{\"a\":[1,2],\"b\":[]}",
        Ok("1x2x"),
    ),
    (
        "{{ range .Values.a }}{{ . }}{{ range $.Values.b }}{{ else }}{{ continue }}{{ end }}x{{ end }}",
        "{\"a\":[1,2],\"b\":[]}",
        Ok("12"),
    ),
    (
        "{{ range .Values.a }}{{ with . }}{{ continue }}{{ end }}x{{ end }}y",
        "{\"a\":[1,2]}",
        Ok("y"),
    ),
    (
        "{{ range $i, $v := .Values.a }}{{ $i }}{{ $v }}{{ end }}",
        "{\"a\":[1,2]}",
        Ok("0112"),
    ),
    (
        "{{ range $v := .Values.a }}{{ $v }}{{ end }}",
        "{\"a\":{\"x\":1}}",
        Ok("1"),
    ),
    (
        "{{ range $i, $v := list }}{{ else }}{{ $i }}|{{ $v }}{{ end }}",
        "{}",
        Ok("[]|[]"),
    ),
    (
        "{{ $x := 1 }}{{ range $x := 2 }}{{ $x }}{{ end }}{{ $x }}",
        "{}",
        Ok("011"),
    ),
    (
        "{{ print }}|{{ println }}|{{ print nil }}|{{ print \"a\" nil 1 }}",
        "{}",
        Ok("|\n|<nil>|a<nil> 1"),
    ),
    (
        "{{ html 1 2 }} {{ urlquery \"a\" 1 }} {{ js nil }}",
        "{}",
        Ok("1 2 a1 \\u003Cno value\\u003E"),
    ),
    ("{{ .Values.missing | html }}", "{}", Ok("&lt;no value&gt;")),
    (
        "{{ .Values.s | js }}{{ js .Values.s .Values.s }}",
        "{\"s\":\"a'b\"}",
        Ok("a\\'ba\\'ba\\'b"),
    ),
    (
        "{{ index .Values.l 1 }}{{ len .Values.l }}{{ index \"abc\" 1 }}",
        "{\"l\":[\"a\",\"b\"]}",
        Ok("b298"),
    ),
    (
        "a\n  {{- \"b\" }}  \n  {{- \"c\" -}}  \n  d",
        "{}",
        Ok("abcd"),
    ),
    (
        "{{ if true -}}\n  x\n{{- else -}}\n  y\n{{- end }}",
        "{}",
        Ok("x"),
    ),
    ("{{- /* a comment */}}x", "{}", Ok("x")),
    (
        "{{ /* bad */ }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected \"/\" in command"),
    ),
    (
        "{{/* unclosed",
        "{}",
        Err("template: t/templates/t.yaml:1: unclosed comment"),
    ),
    (
        "{{ define \"t\" }}{{ $ }}|{{ . }}{{ end }}{{ $x := 5 }}{{ template \"t\" 3 }}",
        "{}",
        Ok("3|3"),
    ),
    (
        "{{ define \"t\" }}{{ $x }}{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: undefined variable \"$x\""),
    ),
    (
        "{{ with .Values.a }}{{ with .b }}{{ .c }}{{ $.Values.a.b.c }}{{ end }}{{ end }}",
        "{\"a\":{\"b\":{\"c\":\"d\"}}}",
        Ok("dd"),
    ),
    (
        "{{ block \"b\" \"x\" }}[{{ . }}]{{ end }}{{ define \"b\" }}<{{ . }}>{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: template: multiple definition of template \"b\""),
    ),
    (
        "{{ define \"b\" }}<{{ . }}>{{ end }}{{ block \"b\" \"x\" }}[{{ . }}]{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: template: multiple definition of template \"b\""),
    ),
    (
        "{{ template \"b\" \"z\" }}{{ block \"b\" \"x\" }}[{{ . }}]{{ end }}",
        "{}",
        Ok("[z][x]"),
    ),
    (
        "{{ printf \"%s-%v\" .Values.x 3 }}",
        "{\"x\":\"X\"}",
        Ok("X-3"),
    ),
    (
        "{{ (printf \"%s\" \"a\") }}{{ (\"b\") }}{{ (1) }}",
        "{}",
        Ok("ab1"),
    ),
    (
        "{{ ( printf \"%s\" \"a\" | printf \"%s%s\" \"b\" ) }}",
        "{}",
        Ok("ba"),
    ),
    (
        "{{ (index .Values \"m\").k }}{{ (.Values.m).k }}",
        "{\"m\":{\"k\":\"v\"}}",
        Ok("vv"),
    ),
    (
        "{{ $m := .Values.m }}{{ $m.k }}{{ $m.nope }}",
        "{\"m\":{\"k\":\"v\"}}",
        Ok("v"),
    ),
    (
        "{{ $x := 1 }}{{ with $x := 2 }}{{ $x }}{{ end }}{{ $x }}",
        "{}",
        Ok("21"),
    ),
    (
        "{{ $x, $y := 1 }}",
        "{}",
        Err("template: t/templates/t.yaml:1: too many declarations in command"),
    ),
    (
        "{{ range $x, $y := 1 }}{{ end }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:19: executing \"t/templates/t.yaml\" at <1>: can't use 1 to iterate over more than one variable",
        ),
    ),
    (
        "{{ range $x, 1 := 2 }}{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: range can only initialize variables"),
    ),
    (
        "{{ if 1 }}a{{ else with 2 }}b{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected <with> in input"),
    ),
    (
        "{{ with 0 }}a{{ else if 2 }}b{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected <if> in input"),
    ),
    (
        "{{ with 0 }}a{{ else with 2 }}{{ . }}{{ else }}c{{ end }}",
        "{}",
        Ok("2"),
    ),
    (
        "{{ \"\\x\" }}",
        "{}",
        Err("template: t/templates/t.yaml:1: invalid syntax"),
    ),
    (
        "{{ `a",
        "{}",
        Err("template: t/templates/t.yaml:1: unterminated raw quoted string"),
    ),
    ("b` }}", "{}", Ok("b` }}")),
    (
        "{{ 'a }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unterminated character constant"),
    ),
    (
        "{{ -1.5 }} {{ .5 }} {{ 5. }} {{ 1e-7 }} {{ 123456789.0 }} {{ 1e21 }}",
        "{}",
        Ok("-1.5 0.5 5 1e-07 1.23456789e+08 1e+21"),
    ),
    (
        "{{ .Values.f }} {{ .Values.g }} {{ .Values.h }} {{ .Values.i }}",
        "{\"f\":1e21,\"g\":100000,\"h\":1000000,\"i\":0.00001}",
        Ok("1e+21 100000 1e+06 1e-05"),
    ),
    (
        "{{ template \"x }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unterminated quoted string"),
    ),
    (
        "{{ template x }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected \"x\" in template clause"),
    ),
    (
        "{{ template \"x\" | }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected \"|\" in template clause"),
    ),
    (
        "{{ define }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected \"}}\" in define clause"),
    ),
    (
        "{{ define \"a\" }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected EOF"),
    ),
    (
        "{{ define \"a\" \"b\" }}{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected \"\\\"b\\\"\" in define clause"),
    ),
    (
        "{{ end }}{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected {{end}}"),
    ),
    (
        "{{ if 1 }}{{ end }}{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected {{end}}"),
    ),
    (
        "{{ range . }}{{ break 1 }}{{ end }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected \"1\" in {{break}}"),
    ),
    (
        "{{ continue }}",
        "{}",
        Err("template: t/templates/t.yaml:1: {{continue}} outside {{range}}"),
    ),
    (
        "{{ .a .b }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <.a>: a is not a method but has arguments",
        ),
    ),
    (
        "{{ $.a.b }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:4: executing \"t/templates/t.yaml\" at <$.a.b>: nil pointer evaluating interface {}.b",
        ),
    ),
    (
        "{{ $ 1 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <$>: can't give argument to non-function $",
        ),
    ),
    (
        "{{ $x := 1 }}{{ $x 1 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:16: executing \"t/templates/t.yaml\" at <$x>: can't give argument to non-function $x",
        ),
    ),
    (
        "{{ 1 | $x := 2 }}",
        "{}",
        Err("template: t/templates/t.yaml:1: undefined variable \"$x\""),
    ),
    (
        "{{ (1) | . }}",
        "{}",
        Err("template: t/templates/t.yaml:1: non executable command in pipeline stage 2"),
    ),
    (
        "{{ len | len }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <len>: wrong number of args for len: want 1 got 0",
        ),
    ),
    (
        "{{ 0x1.8p1 }} {{ 1_0.5 }} {{ 0b_1 }} {{ 0x_1F }} {{ 0X1f }} {{ 1E2 }} {{ 0.1e1 }}",
        "{}",
        Ok("3 10.5 1 31 31 100 1"),
    ),
    (
        "{{ '\\x41' }} {{ '\\u00e9' }} {{ '\u{e9}' }} {{ '\\'' }} {{ '\"' }}",
        "{}",
        Ok("65 233 233 39 34"),
    ),
    (
        "{{ 1__0 }}",
        "{}",
        Err("template: t/templates/t.yaml:1: illegal number syntax: \"1__0\""),
    ),
    (
        "{{ _1 }}",
        "{}",
        Err("template: t/templates/t.yaml:1: function \"_1\" not defined"),
    ),
    (
        "{{ 1_ }}",
        "{}",
        Err("template: t/templates/t.yaml:1: illegal number syntax: \"1_\""),
    ),
    (
        "{{ 08 }}",
        "{}",
        Err("template: t/templates/t.yaml:1: integer overflow: \"08\""),
    ),
    (
        "{{ 0o8 }}",
        "{}",
        Err("template: t/templates/t.yaml:1: bad number syntax: \"0o8\""),
    ),
    (
        "{{ 1.5.5 }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unexpected \".5\" in operand"),
    ),
    (
        "{{ 9223372036854775807 }} {{ -9223372036854775808 }}",
        "{}",
        Ok("9223372036854775807 -9223372036854775808"),
    ),
    (
        "{{ 9223372036854775808 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <9223372036854775808>: 9223372036854775808 overflows int",
        ),
    ),
    (
        "{{ 1e19 }} {{ 0x7fffffffffffffff }}",
        "{}",
        Ok("1e+19 9223372036854775807"),
    ),
    ("{{ \"\\101\\t\\\"\" }}", "{}", Ok("A\t\"")),
    (
        "a:\n  b: {{- .Values.x.y }}\n",
        "{}",
        Err(
            "template: t/templates/t.yaml:2:16: executing \"t/templates/t.yaml\" at <.Values.x.y>: nil pointer evaluating interface {}.y",
        ),
    ),
    (
        "{{- if true }}\nline2\n  {{ index 1 2 }}\n{{- end }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:3:5: executing \"t/templates/t.yaml\" at <index 1 2>: error calling index: can't index item of type int",
        ),
    ),
    (
        "{{ define \"d\" }}\n\n  {{ .q.r }}{{ end }}x{{ template \"d\" .Values }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:3:7: executing \"d\" at <.q.r>: nil pointer evaluating interface {}.r",
        ),
    ),
    (
        "{{/* c\nc */}}\n{{ len 1 }}",
        "{}",
        Err(
            "template: t/templates/t.yaml:3:3: executing \"t/templates/t.yaml\" at <len 1>: error calling len: len of type int",
        ),
    ),
    (
        "{{ \"multi\nline\" }}{{ $y := 1 }}\n{{ len $y }}",
        "{}",
        Err("template: t/templates/t.yaml:1: unterminated quoted string"),
    ),
    (
        "{{ range $i, $e := .Values.m }}\n{{ $e.z.w }}{{ end }}",
        "{}",
        Ok(""),
    ),
];

#[test]
fn go_text_template_cases() {
    check_cases(CASES, render);
}

/// Renders every `(template, values JSON, expected)` case with `render` and reports all that
/// differ at once.
fn check_cases(
    cases: &[(&str, &str, Result<&str, &str>)],
    render: fn(&str, &str) -> Result<String, String>,
) {
    let mut failures = Vec::new();
    for (text, values, want) in cases {
        let got = render(text, values);
        let want = want.map(str::to_string).map_err(str::to_string);
        if got != want {
            failures.push(format!("{text:?}\n   got {got:?}\n  want {want:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// `eq`'s complaint quotes the operands with `%s`, which needs `crate::fmt`'s full verb set.
#[test]
#[ignore = "needs crate::fmt's %s verb (fmt helper)"]
fn eq_non_comparable_quotes_with_percent_s() {
    let cases: &[(&str, &str, Result<&str, &str>)] = &[
        (
            "{{ eq .Values.l .Values.l }}",
            "{\"l\":[1]}",
            Err(
                "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <eq .Values.l .Values.l>: error calling eq: non-comparable type [%!s(float64=1)]: []interface {}",
            ),
        ),
        (
            "{{ eq .Values.l .Values.m }}",
            "{\"l\":[1],\"m\":{}}",
            Err(
                "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <eq .Values.l .Values.m>: error calling eq: non-comparable types [%!s(float64=1)]: []interface {}, map[string]interface {}: map[]",
            ),
        ),
    ];
    for (text, values, want) in cases {
        let want = want.map(str::to_string).map_err(str::to_string);
        assert_eq!(render(text, values), want, "{text}");
    }
}

/// Helm's include guard: more than 1000 nested includes of one name fail, each level wrapping
/// the error of the one below (Helm: 1002 "error calling include" for a self-include).
#[test]
fn include_recursion_is_bounded_like_helm() {
    let err = render(
        r#"{{ define "a" }}{{ include "a" . }}{{ end }}{{ include "a" . }}"#,
        "{}",
    )
    .expect_err("recursion fails");
    assert_eq!(err.matches("error calling include").count(), 1002);
    assert!(err.starts_with(r#"template: t/templates/t.yaml:1:47: executing "t/templates/t.yaml" at <include "a" .>: error calling include: template: t/templates/t.yaml:1:19: executing "a" at <include "a" .>: "#));
    assert!(err.ends_with(
        "error calling include: rendering template has a nested reference name: a: unable to execute template"
    ));
    let err = render(
        r#"{{ define "a" }}x{{ include "b" . }}{{ end }}{{ define "b" }}y{{ include "a" . }}{{ end }}{{ include "a" . }}"#,
        "{}",
    )
    .expect_err("recursion fails");
    assert_eq!(err.matches("error calling include").count(), 2003);
}

/// `{{template}}` recursion stops at our depth cap with Go's message form (Go: 100000).
#[test]
fn template_recursion_is_bounded() {
    let err = render(
        r#"{{ define "r" }}{{ template "r" . }}{{ end }}{{ template "r" . }}"#,
        "{}",
    )
    .expect_err("recursion fails");
    assert_eq!(
        err,
        format!(
            r#"template: t/templates/t.yaml:1:28: executing "r" at <{{{{template "r" .}}}}>: exceeded maximum template depth ({})"#,
            super::exec::MAX_TEMPLATE_DEPTH
        )
    );
}

/// Helm overflows Go's stack on a `tpl` that renders itself; we stop with an error.
#[test]
fn tpl_recursion_is_bounded() {
    let err = render("{{ tpl .Values.t . }}", r#"{"t":"{{ tpl .Values.t . }}"}"#)
        .expect_err("recursion fails");
    assert!(
        err.ends_with("exceeded maximum template depth (1000)"),
        "{}",
        &err[err.len() - 200..]
    );
}

#[test]
fn deep_parentheses_do_not_overflow() {
    let deep = |n: usize| format!("{{{{ {}1{} }}}}", "(".repeat(n), ")".repeat(n));
    assert_eq!(render(&deep(9999), "{}"), Ok("1".to_string()));
    assert_eq!(
        render(&deep(10001), "{}"),
        Err("template: t/templates/t.yaml:1: max expression depth exceeded".to_string())
    );
    let ifs = format!("{}x{}", "{{ if 1 }}".repeat(3000), "{{ end }}".repeat(3000));
    assert_eq!(render(&ifs, "{}"), Ok("x".to_string()));
    let too_deep = "{{ if 1 }}".repeat(100_000);
    assert!(render(&too_deep, "{}").is_err());
}

#[test]
fn break_and_continue_are_functions_when_defined() {
    #[allow(clippy::unnecessary_wraps)]
    fn brk(_: &mut Call<'_>, _: &[Value]) -> Result<Value, String> {
        Ok(Value::str("B"))
    }
    let mut f = FuncMap::new();
    f.insert("break", brk);
    let mut set = Set::new(Rc::new(f));
    set.parse("t", "{{ break }}").expect("parses");
    assert_eq!(
        set.execute("t", Value::Nil, &mut Env::new()).as_deref(),
        Ok("B")
    );
}

/// A struct with a field, a method with arguments and a failing method.
#[derive(Debug)]
struct Files;

impl crate::value::Object for Files {
    fn type_name(&self) -> String {
        "files.Files".into()
    }
    fn field(&self, name: &str) -> Option<Value> {
        (name == "Name").then(|| Value::str("files"))
    }
    fn method(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        match name {
            "Get" => Some(Ok(Value::from(format!(
                "content of {}",
                args.first().map(ToString::to_string).unwrap_or_default()
            )))),
            "Fail" => Some(Err("no such file".into())),
            _ => None,
        }
    }
    fn format(&self) -> String {
        "{files}".into()
    }
    fn to_data(&self) -> Value {
        Value::Nil
    }
}

#[test]
fn objects_have_fields_and_methods() {
    let mut set = Set::new(funcs());
    let data = Value::map(std::collections::BTreeMap::from([(
        "Files".to_string(),
        Value::Object(Rc::new(Files)),
    )]));
    let run = |set: &mut Set, text: &str| {
        set.parse("o", text).map_err(|e| e.message)?;
        set.execute("o", data.clone(), &mut Env::new())
            .map_err(|e| e.message)
    };
    assert_eq!(
        run(
            &mut set,
            r#"{{ .Files.Name }} {{ .Files.Get "a" }} {{ "b" | .Files.Get }} {{ .Files }}"#
        )
        .as_deref(),
        Ok("files content of a content of b {files}")
    );
    assert_eq!(
        run(&mut set, r"{{ .Files.Fail }}"),
        Err(
            r#"template: o:1:9: executing "o" at <.Files.Fail>: error calling Fail: no such file"#
                .to_string()
        )
    );
    assert_eq!(
        run(&mut set, r"{{ .Files.Nope }}"),
        Err(r#"template: o:1:9: executing "o" at <.Files.Nope>: can't evaluate field Nope in type files.Files"#.to_string())
    );
    assert_eq!(
        run(&mut set, r"{{ .Files.Name 1 }}"),
        Err(r#"template: o:1:9: executing "o" at <.Files.Name>: Name has arguments but cannot be invoked as function"#.to_string())
    );
}

#[test]
fn sets_clone_cheaply_and_redefinitions_follow_go() {
    let mut set = Set::new(funcs());
    set.parse("a", r#"{{ define "x" }}one{{ end }}"#)
        .expect("parses");
    let snapshot = set.clone();
    set.parse("b", r#"{{ define "x" }}two{{ end }}"#)
        .expect("parses");
    set.parse("c", r#"{{ define "x" }}  {{ end }}"#)
        .expect("parses");
    let mut env = Env::new();
    assert_eq!(set.execute("x", Value::Nil, &mut env).as_deref(), Ok("two"));
    assert_eq!(
        snapshot.execute("x", Value::Nil, &mut env).as_deref(),
        Ok("one")
    );
    assert!(set.has("a") && set.has("x") && !set.has("y"));
    assert_eq!(
        set.execute("y", Value::Nil, &mut env)
            .map_err(|e| e.message),
        Err(r#"template: no template "y" associated with template "gotpl""#.to_string())
    );
}

/// Parse throughput on a real chart and execution speed on a synthetic template (run with
/// `cargo test --release -p capstan-helm template_speed -- --ignored --nocapture`).
#[test]
#[ignore = "benchmark"]
#[allow(clippy::too_many_lines)]
fn template_speed() {
    #[allow(clippy::unnecessary_wraps)]
    fn stub(_: &mut Call<'_>, args: &[Value]) -> Result<Value, String> {
        Ok(args.last().cloned().unwrap_or_default())
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/helm-charts/kube-prometheus-stack/chart");
    let mut files = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.to_string_lossy().contains("/templates/")
                && p.extension().is_some_and(|x| x == "yaml" || x == "tpl")
            {
                files.push((
                    p.to_string_lossy().to_string(),
                    std::fs::read_to_string(&p).unwrap_or_default(),
                ));
            }
        }
    }
    let mut f = FuncMap::new();
    for name in ["include", "tpl"] {
        f.insert(name, stub);
    }
    // Stub every function the chart uses.
    let funcs = loop {
        let mut set = Set::new(Rc::new(f.clone()));
        let mut missing = None;
        for (name, text) in &files {
            if let Err(e) = set.parse(name, text) {
                if let Some(rest) = e.message.split("function \"").nth(1) {
                    missing = rest.split('"').next().map(str::to_string);
                    break;
                }
                panic!("{}", e.message);
            }
        }
        match missing {
            Some(m) => {
                f.insert(Box::leak(m.into_boxed_str()), stub);
            }
            None => break Rc::new(f),
        }
    };
    let bytes: usize = files.iter().map(|(_, t)| t.len()).sum();
    // CPU time of this thread (clock ticks), less noisy than wall time on a busy machine.
    let cpu = || {
        std::fs::read_to_string("/proc/thread-self/stat")
            .ok()
            .and_then(|s| {
                let after = s.rsplit_once(')')?.1.to_string();
                after.split_whitespace().nth(11)?.parse::<u64>().ok()
            })
            .unwrap_or(0)
    };
    let cpu0 = cpu();
    let start = std::time::Instant::now();
    let rounds = 40;
    for _ in 0..rounds {
        let mut set = Set::new(funcs.clone());
        for (name, text) in &files {
            set.parse(name, text).expect("parses");
        }
    }
    let per = start.elapsed() / rounds;
    eprintln!(
        "parse: {} files, {bytes} bytes in {per:?} (cpu {} ms per round)",
        files.len(),
        (cpu() - cpu0) * 10 / u64::from(rounds)
    );

    let text = r#"{{- range $i, $c := .Values.containers }}
- name: {{ $c.name }}
  image: "{{ $c.image.repository }}:{{ $c.image.tag }}"
  {{- if $c.ports }}
  ports:
  {{- range $c.ports }}
    - containerPort: {{ .port }}
      protocol: {{ .protocol | default "TCP" }}
  {{- end }}
  {{- end }}
  {{- with $c.env }}
  env: {{ .A }}
  {{- end }}
  {{ template "labels" $ }}
{{- end }}"#;
    let mut set = Set::new(funcs.clone());
    set.parse("bench", text).expect("parses");
    set.parse(
        "l",
        r#"{{ define "labels" }}app: {{ .Values.name }}{{ end }}"#,
    )
    .expect("parses");
    let containers: Vec<serde_json::Value> = (0..200)
        .map(|i| {
            serde_json::json!({"name": format!("c{i}"), "image": {"repository": "r", "tag": "t"},
            "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443}], "env": {"A": "b"}})
        })
        .collect();
    let values =
        Value::from_json_floats(&serde_json::json!({"containers": containers, "name": "x"}));
    let data = Value::map(std::collections::BTreeMap::from([(
        "Values".to_string(),
        values,
    )]));
    let mut env = Env::new();
    let start = std::time::Instant::now();
    let mut n = 0;
    for _ in 0..rounds {
        n += set
            .execute("bench", data.clone(), &mut env)
            .expect("runs")
            .len();
    }
    eprintln!(
        "exec: {} bytes out per run in {:?}",
        n / rounds as usize,
        start.elapsed() / rounds
    );
}

mod typed {
    //! Functions declared with Go signatures get Go's argument checks. The test functions
    //! mimic Sprig's and Helm's signatures (bodies are minimal).
    use super::*;
    use crate::template::{Param, Signature, Signatures};

    fn s(args: &[Value], i: usize) -> String {
        args.get(i).map(ToString::to_string).unwrap_or_default()
    }

    #[allow(clippy::unnecessary_wraps)]
    fn upper(_: &mut Call<'_>, a: &[Value]) -> Result<Value, String> {
        Ok(Value::from(s(a, 0).to_uppercase()))
    }
    #[allow(clippy::unnecessary_wraps)]
    fn indent(_: &mut Call<'_>, a: &[Value]) -> Result<Value, String> {
        let n = match a.first() {
            Some(Value::Int(n)) => usize::try_from(*n).unwrap_or(0),
            _ => 0,
        };
        Ok(Value::from(format!("{}{}", " ".repeat(n), s(a, 1))))
    }
    #[allow(clippy::unnecessary_wraps)]
    fn add(_: &mut Call<'_>, a: &[Value]) -> Result<Value, String> {
        let n = |v: Option<&Value>| match v {
            Some(Value::Int(i) | Value::Int64(i)) => *i,
            _ => 0,
        };
        Ok(Value::Int64(n(a.first()) + n(a.get(1))))
    }
    #[allow(clippy::unnecessary_wraps)]
    fn ternary(_: &mut Call<'_>, a: &[Value]) -> Result<Value, String> {
        let pick = a.get(2).is_some_and(Value::truth);
        Ok(a.get(usize::from(!pick)).cloned().unwrap_or_default())
    }
    #[allow(clippy::unnecessary_wraps)]
    fn has_key(_: &mut Call<'_>, a: &[Value]) -> Result<Value, String> {
        let key = s(a, 1);
        Ok(Value::Bool(
            a.first()
                .and_then(Value::as_map)
                .is_some_and(|m| m.borrow().contains_key(&key)),
        ))
    }
    #[allow(clippy::unnecessary_wraps)]
    fn default(_: &mut Call<'_>, a: &[Value]) -> Result<Value, String> {
        Ok(match a.get(1) {
            Some(v) if v.truth() => v.clone(),
            _ => a.first().cloned().unwrap_or_default(),
        })
    }
    #[allow(clippy::unnecessary_wraps)]
    fn trunc(_: &mut Call<'_>, a: &[Value]) -> Result<Value, String> {
        let n = match a.first() {
            Some(Value::Int(n)) => usize::try_from(*n).unwrap_or(0),
            _ => 0,
        };
        Ok(Value::from(s(a, 1).chars().take(n).collect::<String>()))
    }
    #[allow(clippy::unnecessary_wraps)]
    fn list(_: &mut Call<'_>, a: &[Value]) -> Result<Value, String> {
        Ok(Value::list(a.to_vec()))
    }
    #[allow(clippy::unnecessary_wraps)]
    fn keys(_: &mut Call<'_>, a: &[Value]) -> Result<Value, String> {
        let mut k: Vec<String> = Vec::new();
        for m in a.iter().filter_map(Value::as_map) {
            k.extend(m.borrow().keys().cloned());
        }
        Ok(Value::string_list(k))
    }

    pub(super) fn render_any(text: &str) -> Result<String, String> {
        render(text, r#"{"n":1,"m":{"a":null}}"#)
    }

    fn render(text: &str, values: &str) -> Result<String, String> {
        use Param::{Any, Bool, Int, Map, String};
        let mut f = FuncMap::new();
        let mut sig = Signatures::new();
        let mut add_fn = |name: &'static str,
                          func: crate::template::Function,
                          params: &'static [Param],
                          variadic: Option<Param>| {
            f.insert(name, func);
            sig.insert(name, Signature { params, variadic });
        };
        add_fn("upper", upper, &[String], None);
        add_fn("include", super::include, &[String, Any], None);
        add_fn("indent", indent, &[Int, String], None);
        add_fn("add", add, &[Any, Any], None);
        add_fn("ternary", ternary, &[Any, Any, Bool], None);
        add_fn("hasKey", has_key, &[Map, String], None);
        add_fn("default", default, &[Any], Some(Any));
        add_fn("trunc", trunc, &[Int, String], None);
        add_fn("list", list, &[], Some(Any));
        add_fn("keys", keys, &[], Some(Map));
        let mut set = Set::with_signatures(Rc::new(f), Rc::new(sig));
        set.parse(NAME, text).map_err(|e| e.message)?;
        let values = Value::from_json_floats(&serde_json::from_str(values).expect("test JSON"));
        let data = Value::map(std::collections::BTreeMap::from([(
            "Values".to_string(),
            values,
        )]));
        set.execute(NAME, data, &mut Env::new())
            .map(|s| s.replace("<no value>", ""))
            .map_err(|e| e.message)
    }

    const CASES: &[(&str, &str, Result<&str, &str>)] = &[
        (
            "{{ upper .Values.missing }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:16: executing \"t/templates/t.yaml\" at <.Values.missing>: wrong type for value; expected string; got interface {}",
            ),
        ),
        (
            "{{ .Values.missing | upper }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:21: executing \"t/templates/t.yaml\" at <upper>: invalid value; expected string",
            ),
        ),
        (
            "{{ upper .Values.n }}",
            "{\"n\":1}",
            Err(
                "template: t/templates/t.yaml:1:16: executing \"t/templates/t.yaml\" at <.Values.n>: wrong type for value; expected string; got float64",
            ),
        ),
        (
            "{{ upper 1 }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:9: executing \"t/templates/t.yaml\" at <1>: expected string; found 1",
            ),
        ),
        (
            "{{ upper nil }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:9: executing \"t/templates/t.yaml\" at <nil>: cannot assign nil to string",
            ),
        ),
        (
            "{{ upper true }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:9: executing \"t/templates/t.yaml\" at <true>: expected string; found true",
            ),
        ),
        (
            "{{ upper }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <upper>: wrong number of args for upper: want 1 got 0",
            ),
        ),
        (
            "{{ upper \"a\" \"b\" }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <upper>: wrong number of args for upper: want 1 got 2",
            ),
        ),
        (
            "{{ \"a\" | upper \"b\" }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:9: executing \"t/templates/t.yaml\" at <upper>: wrong number of args for upper: want 1 got 2",
            ),
        ),
        (
            "{{ include \"x\" }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <include>: wrong number of args for include: want 2 got 1",
            ),
        ),
        (
            "{{ indent 1.5 \"x\" }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:10: executing \"t/templates/t.yaml\" at <1.5>: expected integer; found 1.5",
            ),
        ),
        (
            "{{ indent \"2\" \"x\" }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:10: executing \"t/templates/t.yaml\" at <\"2\">: expected integer; found \"2\"",
            ),
        ),
        (
            "{{ indent .Values.n \"x\" }}",
            "{\"n\":2}",
            Err(
                "template: t/templates/t.yaml:1:17: executing \"t/templates/t.yaml\" at <.Values.n>: wrong type for value; expected int; got float64",
            ),
        ),
        (
            "{{ indent (add 1 1) \"x\" }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:17: executing \"t/templates/t.yaml\" at <1>: wrong type for value; expected int; got int64",
            ),
        ),
        ("{{ indent 1e1 \"x\" }}|", "{}", Ok("          x|")),
        (
            "{{ ternary \"a\" \"b\" .Values.missing }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:26: executing \"t/templates/t.yaml\" at <.Values.missing>: wrong type for value; expected bool; got interface {}",
            ),
        ),
        (
            "{{ ternary \"a\" \"b\" .Values.b }}",
            "{\"b\":true}",
            Ok("a"),
        ),
        (
            "{{ hasKey .Values.missing \"a\" }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:17: executing \"t/templates/t.yaml\" at <.Values.missing>: wrong type for value; expected map[string]interface {}; got interface {}",
            ),
        ),
        ("{{ hasKey nil \"a\" }}", "{}", Ok("false")),
        (
            "{{ hasKey (list 1) \"a\" }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:16: executing \"t/templates/t.yaml\" at <1>: wrong type for value; expected map[string]interface {}; got []interface {}",
            ),
        ),
        (
            "{{ hasKey \"x\" \"a\" }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:10: executing \"t/templates/t.yaml\" at <\"x\">: can't handle \"x\" for arg of type map[string]interface {}",
            ),
        ),
        (
            "{{ hasKey .Values.m \"a\" }}",
            "{\"m\":{\"a\":1}}",
            Ok("true"),
        ),
        (
            "{{ default }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:3: executing \"t/templates/t.yaml\" at <default>: wrong number of args for default: want at least 1 got 0",
            ),
        ),
        ("{{ default 1 }}", "{}", Ok("1")),
        ("{{ default 1 2 3 }}", "{}", Ok("2")),
        ("{{ trunc 2 \"abc\" }}", "{}", Ok("ab")),
        (
            "{{ $x := 1.5 }}{{ trunc $x \"abc\" }}",
            "{}",
            Err(
                "template: t/templates/t.yaml:1:24: executing \"t/templates/t.yaml\" at <$x>: wrong type for value; expected int; got float64",
            ),
        ),
        (
            "{{ keys .Values }} {{ keys .Values .Values }}",
            "{}",
            Ok("[] []"),
        ),
        ("{{ keys nil }}", "{}", Ok("[]")),
    ];

    #[test]
    fn typed_arguments_follow_go() {
        super::check_cases(CASES, render);
    }
}

/// Random template-ish input never panics the lexer, parser or executor.
#[test]
fn random_input_never_panics() {
    use rand::{RngExt as _, SeedableRng as _};
    const PIECES: &[&str] = &[
        "{{", "}}", "{{- ", " -}}", "/*", "*/", " ", "\n", ".", ".a", ".Values", ".b.c", "$", "$x",
        ":=", "=", "|", "(", ")", "\"s\"", "`r`", "'c'", "1", "-2", "0x1f", "1.5e3", "1_0", "if",
        "else", "end", "range", "with", "define", "template", "block", "break", "continue",
        "\"t\"", "nil", "true", "and", "or", "not", "eq", "lt", "index", "slice", "len", "printf",
        "print", "html", "js", "urlquery", "call", "include", "tpl", "fail", "é", "\\", "\"", "'",
        ",", "#", "list",
    ];
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let values = r#"{"a":{"b":[1,null,"x"]},"l":[0,1],"m":{"k":null},"s":"{{ .Values.s }}"}"#;
    for _ in 0..4000 {
        let n = rng.random_range(1..40);
        let text: String = (0..n)
            .map(|_| PIECES[rng.random_range(0..PIECES.len())])
            .collect();
        let _ = render(&text, values);
        let _ = typed::render_any(&text);
    }
}

#[test]
fn output_is_bounded() {
    let err = render(
        "{{ range 100000000000 }}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{{ end }}",
        "{}",
    )
    .expect_err("bounded");
    assert!(
        err.ends_with(&format!(
            "template output exceeds {} bytes",
            super::MAX_OUTPUT
        )),
        "{err}"
    );
}
