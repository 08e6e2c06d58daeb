//! Sprig's string functions against outputs recorded from Helm's Go SDK (`tests/oracle.py`).

use super::*;
use crate::template::Env;

mod cases;

use crate::funcs::reflect::tests::NoRuntime;

fn json(text: &str) -> Value {
    Value::from_json_floats(&serde_json::from_str(text).expect("test JSON"))
}

fn run(env: &mut Env, name: &str, args: &[Value]) -> Result {
    let mut map = FuncMap::new();
    register(&mut map);
    let function = map
        .get(name)
        .copied()
        .unwrap_or_else(|| panic!("{name} not registered"));
    let mut runtime = NoRuntime;
    let mut call = Call::new(name, env, &mut runtime);
    function(&mut call, args)
}

fn env() -> Env {
    Env::fixed(7, jiff::Zoned::now())
}

#[test]
fn functions_match_sprig() {
    let mut env = env();
    let all = cases::cases();
    let mut failures = Vec::new();
    for (name, args, want) in &all {
        let got = run(&mut env, name, args).map(|v| crate::fmt::sprint(&[v]));
        let want = want.map(str::to_string).map_err(|e| (*e).to_string());
        if got != want {
            failures.push(format!("{name} {args:?}\n   got {got:?}\n  want {want:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn result_types_are_sprigs() {
    let mut env = env();
    let list = run(&mut env, "splitList", &[Value::str(","), Value::str("a,b")]).unwrap();
    assert_eq!(list.type_name(), "[]string");
    let sorted = run(&mut env, "sortAlpha", &[json(r#"["b","a"]"#)]).unwrap();
    assert_eq!(sorted.type_name(), "[]string");
    let n = run(&mut env, "atoi", &[Value::str("5")]).unwrap();
    assert_eq!(n.type_name(), "int");
    let b = run(&mut env, "contains", &[Value::str("a"), Value::str("cat")]).unwrap();
    assert_eq!(b.type_name(), "bool");
}

#[test]
fn shuffle_permutes_characters_with_the_seeded_source() {
    let mut env = env();
    let shuffled = run(&mut env, "shuffle", &[Value::str("héllo wörld")]).unwrap();
    let mut got: Vec<char> = shuffled.to_string().chars().collect();
    let mut want: Vec<char> = "héllo wörld".chars().collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
    let again = run(
        &mut Env::fixed(7, jiff::Zoned::now()),
        "shuffle",
        &[Value::str("héllo wörld")],
    );
    assert_eq!(again.unwrap().to_string(), shuffled.to_string());
}

#[test]
fn huge_results_are_refused() {
    let mut env = env();
    let err = run(&mut env, "repeat", &[Value::Int(1 << 40), Value::str("ab")]).unwrap_err();
    assert!(err.contains("64 MiB"), "{err}");
    let err = run(
        &mut env,
        "indent",
        &[Value::Int(1 << 30), Value::str("a\nb")],
    )
    .unwrap_err();
    assert!(err.contains("64 MiB"), "{err}");
    let big = Value::str("x".repeat(1 << 20));
    let err = run(
        &mut env,
        "replace",
        &[Value::str("x"), Value::str("y".repeat(100)), big],
    )
    .unwrap_err();
    assert!(err.contains("64 MiB"), "{err}");
    let ok = run(&mut env, "repeat", &[Value::Int(3), Value::str("ab")]).unwrap();
    assert_eq!(ok.to_string(), "ababab");
}

#[test]
fn no_function_panics_on_odd_arguments() {
    let values = [
        Value::Nil,
        Value::Bool(true),
        Value::Int(i64::MIN),
        Value::Int(-1),
        Value::Int(0),
        Value::Int(3),
        Value::Int(5),
        Value::Int(9),
        Value::Int(i64::MAX),
        Value::Int64(5),
        Value::Float(f64::NAN),
        Value::str(""),
        Value::str("héllo wörld-Foo_BAR 12"),
        Value::str("%zz[::1]:x//a/../b?#"),
        Value::Bytes(std::rc::Rc::from(&[0xE6_u8, 0x9C, b' ', b'a'][..])),
        json(r#"[1, "a", null]"#),
        json(r#"{"scheme": "http", "host": 1}"#),
    ];
    let mut map = FuncMap::new();
    register(&mut map);
    let mut names: Vec<&str> = map.keys().copied().collect();
    names.sort_unstable();
    let mut env = env();
    let mut runtime = NoRuntime;
    for name in names {
        let function = map[name];
        let mut call = Call::new(name, &mut env, &mut runtime);
        let _ = function(&mut call, &[]);
        for a in &values {
            let _ = function(&mut call, std::slice::from_ref(a));
            for b in &values {
                let _ = function(&mut call, &[a.clone(), b.clone()]);
                for c in &values {
                    let _ = function(&mut call, &[a.clone(), b.clone(), c.clone()]);
                }
            }
        }
    }
}
