use super::*;

fn pretty_of(json: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    to_yaml_with(&Value::from_json_floats(&value), Flavour::V3).unwrap_or_default()
}

fn yaml_of(json: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    to_yaml(&Value::from_json_floats(&value)).unwrap_or_default()
}

/// Compares with cases the Helm SDK answered (set `YAML_CASES` to a JSON file of
/// `[[input_json, expected], …]`).
#[test]
#[ignore = "needs a case file from the Helm SDK"]
fn oracle_cases_from_file() {
    let Ok(path) = std::env::var("YAML_CASES") else {
        return;
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let cases: Vec<(String, String)> = serde_json::from_str(&text).unwrap_or_default();
    let pretty = std::env::var("YAML_PRETTY").is_ok();
    let mut failures = 0;
    for (input, want) in &cases {
        let got = if pretty {
            pretty_of(input)
        } else {
            yaml_of(input)
        };
        let got = got.strip_suffix('\n').unwrap_or(&got);
        if got != want {
            failures += 1;
            if failures < 40 {
                eprintln!("input {input}\n want {want:?}\n  got {got:?}");
            }
        }
    }
    eprintln!("{} of {} cases differ", failures, cases.len());
    assert_eq!(failures, 0);
}

/// 1200 values (awkward strings in every position, long lines, numbers, key orders) and the
/// text Helm v4.2.3's `toYaml` gave for each.
#[test]
fn helm_answers() {
    let cases: Vec<(String, String)> =
        serde_json::from_str(include_str!("../testdata/to_yaml.json")).unwrap_or_default();
    assert_eq!(cases.len(), 1200);
    for (input, want) in &cases {
        let got = yaml_of(input);
        assert_eq!(got.strip_suffix('\n').unwrap_or(&got), want, "{input}");
    }
}

/// 400 values and what Helm v4.2.3's `toYamlPretty` (yaml.v3, indent 2) gave for each.
#[test]
fn helm_answers_pretty() {
    let cases: Vec<(String, String)> =
        serde_json::from_str(include_str!("../testdata/to_yaml_pretty.json")).unwrap_or_default();
    assert_eq!(cases.len(), 400);
    for (input, want) in &cases {
        let got = pretty_of(input);
        assert_eq!(got.strip_suffix('\n').unwrap_or(&got), want, "{input}");
    }
}

#[test]
fn basics() {
    assert_eq!(
        yaml_of(r#"{"b":[1,2],"a":{"c":"x"}}"#),
        "a:\n  c: x\nb:\n- 1\n- 2\n"
    );
}

/// Times reading and writing a large values file (run with `--ignored --nocapture`, set
/// `YAML_BENCH` to the file).
#[test]
#[ignore = "a timing, not a test"]
fn timing() {
    let Ok(path) = std::env::var("YAML_BENCH") else {
        return;
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let start = std::time::Instant::now();
    let json = crate::yaml::parse(&text).unwrap_or_default();
    eprintln!("parse: {:?}", start.elapsed());
    let value = Value::from_json_floats(&json);
    let start = std::time::Instant::now();
    let mut total = 0;
    for _ in 0..20 {
        total += to_yaml(&value).map(|s| s.len()).unwrap_or_default();
    }
    eprintln!("to_yaml x20: {:?} ({total} bytes)", start.elapsed());
}
