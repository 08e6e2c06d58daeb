//! `../shared/corpus/helm-charts`: 15 real charts, 63 value sets, each against the Helm SDK's
//! stored output (see that directory's README for the layout and how to compare).

use std::collections::BTreeSet;
use std::path::Path;

use capstan_helm::engine::{self, Options};
use capstan_helm::template::Env;

use crate::common::{self, compare, expected_docs, render_docs};

/// The value sets of every case: (case dir, set name, set description from index.json).
pub fn value_sets() -> Vec<(std::path::PathBuf, String, serde_json::Value)> {
    let root = common::corpus().join("helm-charts");
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .expect("the helm-charts corpus is readable")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("case.json").is_file())
        .collect();
    cases.sort();
    let mut sets = Vec::new();
    for dir in cases {
        let case = common::read_json(&dir.join("case.json"));
        let index = common::read_json(&dir.join("expected/index.json"));
        for name in case["value_sets"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
        {
            let mut set = case["value_sets"][name].clone();
            if let (Some(set), Some(entry)) = (set.as_object_mut(), index[name].as_object()) {
                for (k, v) in entry {
                    set.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            sets.push((dir.clone(), name.clone(), set));
        }
    }
    sets
}

/// Render options for a value set of a case.
pub fn options(case: &serde_json::Value, set: &serde_json::Value) -> Options {
    Options {
        release_name: case["release"]
            .as_str()
            .unwrap_or("release-name")
            .to_owned(),
        namespace: case["namespace"].as_str().unwrap_or("default").to_owned(),
        revision: 1,
        is_install: true,
        is_upgrade: false,
        kube_version: set["kube_version"].as_str().map(str::to_owned),
        api_versions: set["api_versions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn strings(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Renders one value set and compares it with the stored output: `Ok(note)` or
/// `Err(summary of the differences)`.
fn check(dir: &Path, name: &str, set: &serde_json::Value) -> Result<String, String> {
    let case = common::read_json(&dir.join("case.json"));
    let values = common::values_files(dir, &strings(&set["values"]))?;
    let chart = common::load_chart(&dir.join("chart")).map_err(|e| format!("load: {e}"))?;
    let options = options(&case, set);
    let result = engine::render(&chart, &values, &options, &mut Env::new());
    let expected = dir.join("expected");
    if set["status"] == "error" {
        let want = std::fs::read_to_string(expected.join(format!("{name}.error.txt")))
            .map_err(|e| format!("expected error file: {e}"))?;
        return match result {
            Ok(_) => Err(format!(
                "rendered, but Helm fails: {}",
                common::short(want.trim())
            )),
            Err(e) if common::error_matches(&want, &e.message) => Ok(String::new()),
            Err(e) => Ok(format!(
                "error wording differs: want {:?} got {:?}",
                common::short(want.trim()),
                common::short(&e.message)
            )),
        };
    }
    let files = result.map_err(|e| format!("render failed: {}", common::short(&e.message)))?;
    let want = std::fs::read_to_string(expected.join(format!("{name}.yaml")))
        .map_err(|e| format!("expected file: {e}"))?;
    let unstable: BTreeSet<String> = strings(&set["unstable"]).into_iter().collect();
    let cmp = compare(&expected_docs(&want), &render_docs(&files), &unstable);
    let mut problems = cmp.diffs.clone();
    let notes_path = expected.join(format!("{name}.NOTES.txt"));
    let want_notes = std::fs::read_to_string(&notes_path).unwrap_or_default();
    let chart_name = &chart.metadata.name;
    let got_notes = files
        .get(&format!("{chart_name}/templates/NOTES.txt"))
        .map(|n| n.trim())
        .unwrap_or_default();
    if want_notes.trim() != got_notes {
        problems.push(format!(
            "NOTES.txt: {}",
            common::first_text_difference(want_notes.trim(), got_notes)
        ));
    }
    if problems.is_empty() {
        let note = if cmp.text_only > 0 {
            format!(
                "{} of {} documents differ in text only",
                cmp.text_only, cmp.docs
            )
        } else {
            String::new()
        };
        return Ok(note);
    }
    let shown: Vec<String> = problems.iter().take(5).cloned().collect();
    let more = problems.len().saturating_sub(shown.len());
    Err(format!(
        "{} of {} documents differ: {}{}",
        problems.len(),
        cmp.docs,
        shown.join("; "),
        if more > 0 {
            format!("; … {more} more")
        } else {
            String::new()
        }
    ))
}

#[test]
fn helm_charts_corpus() {
    let sets = value_sets();
    assert_eq!(sets.len(), 63, "the corpus has 63 value sets");
    let mut passed = 0;
    let mut failures = Vec::new();
    for (dir, name, set) in &sets {
        let case = dir.file_name().unwrap_or_default().to_string_lossy();
        match check(dir, name, set) {
            Ok(note) => {
                passed += 1;
                if !note.is_empty() {
                    println!("  {case}/{name}: ok ({note})");
                }
            }
            Err(summary) => {
                println!("  {case}/{name}: FAIL {summary}");
                failures.push(format!("{case}/{name}"));
            }
        }
    }
    println!("{passed}/{} value sets pass", sets.len());
    assert!(
        failures.is_empty(),
        "failing value sets: {}",
        failures.join(", ")
    );
}
