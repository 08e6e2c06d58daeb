//! Differential test: value sets generated (seeded) from each corpus chart's own values.yaml —
//! booleans flipped, replica counts changed, name overrides and pull policies set — rendered by
//! us and by the Helm SDK (`oracle.py serve`, one process) in the same run, compared like the
//! stored goldens. `HELM_DIFF_SEED` picks another seed, `HELM_DIFF_SETS` the sets per chart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use capstan_helm::engine;
use capstan_helm::template::Env;

use crate::common::{self, Oracle, compare, render_docs};

/// SplitMix64: a tiny seeded generator, so the sets are the same for a seed everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A values path that can be varied, and how.
#[derive(Debug, Clone)]
enum Knob {
    Bool(Vec<String>, bool),
    Replicas(Vec<String>),
    Name(Vec<String>),
    PullPolicy(Vec<String>),
}

/// The knobs of a values tree, down to four levels.
fn knobs(value: &serde_json::Value, path: &mut Vec<String>, out: &mut Vec<Knob>) {
    let serde_json::Value::Object(map) = value else {
        return;
    };
    for (key, v) in map {
        path.push(key.clone());
        match v {
            serde_json::Value::Bool(b) => out.push(Knob::Bool(path.clone(), *b)),
            serde_json::Value::Number(_) if key.to_lowercase().contains("replica") => {
                out.push(Knob::Replicas(path.clone()));
            }
            serde_json::Value::String(_) | serde_json::Value::Null
                if matches!(key.as_str(), "nameOverride" | "fullnameOverride") =>
            {
                out.push(Knob::Name(path.clone()));
            }
            serde_json::Value::String(_) if key == "pullPolicy" => {
                out.push(Knob::PullPolicy(path.clone()));
            }
            serde_json::Value::Object(_) if path.len() < 4 => knobs(v, path, out),
            _ => {}
        }
        path.pop();
    }
}

fn set_path(
    values: &mut serde_json::Map<String, serde_json::Value>,
    path: &[String],
    v: serde_json::Value,
) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut map = values;
    for p in parents {
        let entry = map
            .entry(p.clone())
            .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
        if !entry.is_object() {
            *entry = serde_json::Value::Object(serde_json::Map::new());
        }
        let serde_json::Value::Object(next) = entry else {
            return;
        };
        map = next;
    }
    map.insert(last.clone(), v);
}

/// One generated value set: up to four knobs turned.
fn generate(knobs: &[Knob], rng: &mut Rng) -> serde_json::Map<String, serde_json::Value> {
    let mut values = serde_json::Map::new();
    if knobs.is_empty() {
        return values;
    }
    for _ in 0..=rng.below(4) {
        match &knobs[rng.below(knobs.len())] {
            Knob::Bool(path, b) => set_path(&mut values, path, serde_json::Value::Bool(!b)),
            Knob::Replicas(path) => {
                // Helm's values are float64, as the SDK reads JSON numbers.
                let n = serde_json::Number::from_f64((1 + rng.below(4)) as f64)
                    .expect("small numbers are finite");
                set_path(&mut values, path, serde_json::Value::Number(n));
            }
            Knob::Name(path) => {
                let name = ["dx", "diff-test", "a"][rng.below(3)];
                set_path(&mut values, path, serde_json::Value::String(name.into()));
            }
            Knob::PullPolicy(path) => {
                let policy = ["Always", "IfNotPresent", "Never"][rng.below(3)];
                set_path(&mut values, path, serde_json::Value::String(policy.into()));
            }
        }
    }
    values
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Renders one generated set on both sides: `Ok(())` or `Err(summary)`.
fn check(
    oracle: &mut Oracle,
    chart_dir: &Path,
    case: &serde_json::Value,
    values: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    let options = serde_json::json!({
        "name": case["release"], "namespace": case["namespace"], "is_install": true,
    });
    let want = oracle.render(chart_dir, values, &options);
    let chart = common::load_chart(chart_dir).map_err(|e| format!("load: {e}"))?;
    let ours = engine::Options {
        release_name: case["release"]
            .as_str()
            .unwrap_or("release-name")
            .to_owned(),
        namespace: case["namespace"].as_str().unwrap_or("default").to_owned(),
        ..engine::Options::default()
    };
    let got = engine::render(&chart, values, &ours, &mut Env::new());
    match (want, got) {
        // Both refuse: error wordings are compared in the stored corpus, not here.
        (Err(_), Err(_)) => Ok(()),
        (Err(w), Ok(_)) => Err(format!("rendered, but Helm fails: {}", common::short(&w))),
        (Ok(_), Err(g)) => Err(format!(
            "failed, Helm renders: {}",
            common::short(&g.message)
        )),
        (Ok(first), Ok(files)) => {
            // A second SDK render finds the templates with random output.
            let second = oracle
                .render(chart_dir, values, &options)
                .unwrap_or_default();
            let unstable: BTreeSet<String> = first
                .keys()
                .chain(second.keys())
                .filter(|k| first.get(*k) != second.get(*k))
                .cloned()
                .collect();
            let cmp = compare(&render_docs(&first), &render_docs(&files), &unstable);
            let mut problems = cmp.diffs;
            let notes = |m: &BTreeMap<String, String>| {
                m.iter()
                    .find(|(k, _)| {
                        k.ends_with("/templates/NOTES.txt") && k.matches("/charts/").count() == 0
                    })
                    .map(|(_, v)| v.trim().to_owned())
                    .unwrap_or_default()
            };
            if notes(&first) != notes(&files) {
                problems.push("NOTES.txt differs".into());
            }
            if problems.is_empty() {
                return Ok(());
            }
            let shown: Vec<String> = problems.iter().take(3).cloned().collect();
            Err(format!(
                "{} differences: {}",
                problems.len(),
                shown.join("; ")
            ))
        }
    }
}

#[test]
fn differential_against_helm_sdk() {
    let seed = env_number("HELM_DIFF_SEED", 11);
    let per_chart = env_number("HELM_DIFF_SETS", 3);
    let root = common::corpus().join("helm-charts");
    let mut oracle = Oracle::start();
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .expect("the helm-charts corpus is readable")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("case.json").is_file())
        .collect();
    cases.sort();
    let mut rng = Rng(seed);
    let (mut total, mut passed) = (0, 0);
    let mut failures = Vec::new();
    for dir in &cases {
        let case = common::read_json(&dir.join("case.json"));
        let chart_dir = dir.join("chart");
        let defaults = std::fs::read_to_string(chart_dir.join("values.yaml")).unwrap_or_default();
        let defaults: serde_json::Value =
            serde_saphyr::from_str(&defaults).unwrap_or(serde_json::Value::Null);
        let mut found = Vec::new();
        knobs(&defaults, &mut Vec::new(), &mut found);
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        for i in 0..per_chart {
            let values = generate(&found, &mut rng);
            total += 1;
            match check(&mut oracle, &chart_dir, &case, &values) {
                Ok(()) => passed += 1,
                Err(summary) => {
                    println!(
                        "  {name} #{i} {}: FAIL {summary}",
                        common::short(&serde_json::Value::Object(values).to_string())
                    );
                    failures.push(format!("{name}#{i}"));
                }
            }
        }
    }
    println!("{passed}/{total} generated value sets match the Helm SDK (seed {seed})");
    assert!(
        failures.is_empty(),
        "differing sets: {}",
        failures.join(", ")
    );
}
