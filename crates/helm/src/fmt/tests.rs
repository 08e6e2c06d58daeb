//! Go `fmt` against outputs recorded from Helm's Go SDK (`tests/oracle.py`).

use super::*;

mod cases;

#[test]
fn sprintf_matches_go() {
    let mut failures = Vec::new();
    let all = cases::cases();
    for (format, args, want) in &all {
        let got = sprintf(format, args);
        if got != *want {
            failures.push(format!("{format:?}\n   got {got:?}\n  want {want:?}"));
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
fn sprint_spaces_between_non_strings() {
    let args = [
        Value::Int(1),
        Value::Int(2),
        Value::str("a"),
        Value::Int(3),
        Value::Nil,
        Value::str("b"),
        Value::str("c"),
    ];
    assert_eq!(sprint(&args), "1 2a3 <nil>bc");
    assert_eq!(sprintln(&args), "1 2 a 3 <nil> b c\n");
    assert_eq!(sprint(&[]), "");
}

#[test]
fn oversized_widths_are_refused_as_go_does() {
    assert_eq!(
        sprintf("%1234567890d|", &[Value::Int(1)]),
        "%!(NOVERB)%!(EXTRA int=1)"
    );
    let args = [
        Value::Int(10_000_001),
        Value::Int(1),
        Value::Int(-10_000_001),
        Value::Int(2),
    ];
    assert_eq!(sprintf("%.*d|%*d", &args), "%!(BADPREC)1|%!(BADWIDTH)2");
}

#[test]
fn no_format_panics() {
    use rand::{RngExt as _, SeedableRng as _};
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let alphabet: Vec<char> = "%%%#+- 0123456789.*[]vdsqxXtTcUeEfFgGbOopé☃"
        .chars()
        .collect();
    let args = [
        Value::Nil,
        Value::Int(i64::MIN),
        Value::Int(-3),
        Value::Int(2),
        Value::Int64(i64::MAX),
        Value::Float(-0.0),
        Value::Float(f64::MAX),
        Value::Float(5e-324),
        Value::Float(f64::NAN),
        Value::str("x\u{1}é"),
        Value::Bytes(std::rc::Rc::from(&[0xFF_u8, b'a'][..])),
        Value::from_json_floats(&serde_json::json!({"a": [1, null, "b"]})),
    ];
    for _ in 0..20_000 {
        let len = rng.random_range(0..12);
        let format: String = (0..len)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())])
            .collect();
        let count = rng.random_range(0..4);
        let operands: Vec<Value> = (0..count)
            .map(|_| args[rng.random_range(0..args.len())].clone())
            .collect();
        let _ = sprintf(&format, &operands);
    }
}
