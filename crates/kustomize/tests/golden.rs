//! Golden tests: every corpus case built and compared with `kubectl kustomize` output.

use std::path::{Path, PathBuf};

use capstan_kustomize::{BuildOptions, build, parse_documents, to_yaml};
use serde_json::Value;

/// Cases allowed to fail, each with the reason. Keep in sync with README.md.
const EXCEPTIONS: &[(&str, &str)] = &[];

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus")
}

struct Case {
    name: String,
    dir: PathBuf,
    expected: Option<PathBuf>,
    expected_error: Option<PathBuf>,
}

fn cases() -> Vec<Case> {
    let root = corpus();
    let mut out = Vec::new();
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("kustomize/index.json")).unwrap())
            .unwrap();
    for entry in index.as_array().unwrap() {
        let name = entry["case"].as_str().unwrap().to_owned();
        let build_path = entry["build_path"].as_str().unwrap();
        let base = root.join("kustomize");
        let expected = base.join(format!("{name}.expected.yaml"));
        let error = base.join(format!("{name}.expected-error.txt"));
        out.push(Case {
            dir: base.join(&name).join(build_path),
            expected: expected.exists().then_some(expected),
            expected_error: error.exists().then_some(error),
            name,
        });
    }
    let index: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("flux-podinfo-index.json")).unwrap(),
    )
    .unwrap();
    for entry in index.as_array().unwrap() {
        let group = entry["group"].as_str().unwrap();
        let name = entry["case"].as_str().unwrap().to_owned();
        let base = root.join(group);
        let expected = base.join(format!("{name}.expected.yaml"));
        let error = base.join(format!("{name}.expected-error.txt"));
        out.push(Case {
            dir: base.join(entry["build_path"].as_str().unwrap()),
            expected: expected.exists().then_some(expected),
            expected_error: error.exists().then_some(error),
            name: format!("{group}/{name}"),
        });
    }
    out
}

fn normalise(mut value: Value) -> Value {
    if let Some(labels) = value
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
        && let Some(Value::String(v)) = labels.get_mut("app.kubernetes.io/managed-by")
        && v.starts_with("kustomize-")
    {
        *v = "kustomize-VERSION".into();
    }
    value
}

enum Outcome {
    Pass { identical: bool },
    Fail(String),
}

fn run(case: &Case) -> Outcome {
    let result = build(&case.dir, &BuildOptions::default());
    if case.expected_error.is_some() {
        return match result {
            Err(_) => Outcome::Pass { identical: true },
            Ok(_) => Outcome::Fail("expected an error, build succeeded".into()),
        };
    }
    let Some(expected_path) = &case.expected else {
        return Outcome::Fail("no expected file".into());
    };
    let objects = match result {
        Ok(objects) => objects,
        Err(error) => return Outcome::Fail(format!("build failed: {error}")),
    };
    let expected_text = std::fs::read_to_string(expected_path).unwrap();
    let expected: Vec<Value> = parse_documents(&expected_text)
        .unwrap()
        .into_iter()
        .map(normalise)
        .collect();
    let ours_text = to_yaml(&objects);
    let ours: Vec<Value> = parse_documents(&ours_text)
        .unwrap()
        .into_iter()
        .map(normalise)
        .collect();
    if ours.len() != expected.len() {
        let ids = |v: &[Value]| {
            v.iter()
                .map(|o| {
                    format!(
                        "{}/{}",
                        o["kind"].as_str().unwrap_or(""),
                        o["metadata"]["name"].as_str().unwrap_or("")
                    )
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        return Outcome::Fail(format!(
            "{} objects, expected {}: ours [{}] expected [{}]",
            ours.len(),
            expected.len(),
            ids(&ours),
            ids(&expected)
        ));
    }
    for (index, (a, b)) in ours.iter().zip(&expected).enumerate() {
        if a != b {
            let first_diff = first_difference(a, b, "").unwrap_or_default();
            return Outcome::Fail(format!(
                "object {index} ({}/{}) differs at {first_diff}",
                b["kind"].as_str().unwrap_or(""),
                b["metadata"]["name"].as_str().unwrap_or("")
            ));
        }
    }
    Outcome::Pass {
        identical: ours_text == expected_text,
    }
}

fn first_difference(ours: &Value, expected: &Value, path: &str) -> Option<String> {
    match (ours, expected) {
        (Value::Object(ours_map), Value::Object(expected_map)) => {
            for key in ours_map.keys().chain(expected_map.keys()) {
                match (ours_map.get(key), expected_map.get(key)) {
                    (Some(ours_value), Some(expected_value)) => {
                        let at = format!("{path}.{key}");
                        if let Some(found) = first_difference(ours_value, expected_value, &at) {
                            return Some(found);
                        }
                    }
                    (ours_value, expected_value) => {
                        return Some(format!(
                            "{path}.{key}: ours {ours_value:?} expected {expected_value:?}"
                        ));
                    }
                }
            }
            None
        }
        (Value::Array(ours_items), Value::Array(expected_items))
            if ours_items.len() == expected_items.len() =>
        {
            ours_items
                .iter()
                .zip(expected_items)
                .enumerate()
                .find_map(|(i, (o, e))| first_difference(o, e, &format!("{path}[{i}]")))
        }
        _ if ours == expected => None,
        _ => Some(format!("{path}: ours {ours} expected {expected}")),
    }
}

#[test]
fn corpus_golden() {
    let cases = cases();
    let mut passed = 0;
    let mut identical = 0;
    let mut failures = Vec::new();
    let mut unexpected = Vec::new();
    for case in &cases {
        match run(case) {
            Outcome::Pass { identical: same } => {
                passed += 1;
                if same {
                    identical += 1;
                } else {
                    println!("not byte-identical: {}", case.name);
                }
            }
            Outcome::Fail(reason) => {
                let excused = EXCEPTIONS.iter().any(|(name, _)| *name == case.name);
                println!(
                    "FAIL{} {}: {reason}",
                    if excused { " (excepted)" } else { "" },
                    case.name
                );
                failures.push(case.name.clone());
                if !excused {
                    unexpected.push(case.name.clone());
                }
            }
        }
    }
    println!(
        "kustomize golden: {passed}/{} passed, {identical} byte-identical, {} failed",
        cases.len(),
        failures.len()
    );
    assert!(unexpected.is_empty(), "unexpected failures: {unexpected:?}");
}
