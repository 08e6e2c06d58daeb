//! `../shared/corpus/helm`: Helm's own `helm template` goldens (cmd/helm/testdata), run through
//! the command as a library call ([`capstan_helm::output::Template`]) and compared byte for
//! byte with stdout (and `Error: …` for the failing cases). Helm v4's goldens and charts are
//! used where the corpus has them.

use std::path::Path;

use capstan_helm::output::Template;
use capstan_helm::template::Env;

use crate::common;

/// Runs one case: `Ok(())` or `Err(what differs)`.
fn check(dir: &Path, entry: &serde_json::Value) -> Result<(), String> {
    let v4_chart = dir.join("chart.helm-v4");
    let v4_expected = dir.join("expected.helm-v4.yaml");
    let chart_dir = if v4_chart.is_dir() {
        v4_chart
    } else {
        dir.join(entry["chart_dir"].as_str().unwrap_or("chart"))
    };
    let expected_path = if v4_expected.is_file() {
        v4_expected
    } else {
        dir.join(entry["expected"].as_str().unwrap_or("expected.yaml"))
    };
    let args_value = if entry["helm_v4_args"].is_array() {
        &entry["helm_v4_args"]
    } else {
        &entry["helm_args"]
    };
    let mut args: Vec<String> = args_value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    // Helm's test harness runs with the capabilities of an SDK built without version
    // ldflags: Kubernetes v1.20.0 unless the case names one.
    if !args.iter().any(|a| a.starts_with("--kube-version")) {
        args.extend(["--kube-version".into(), "1.20.0".into()]);
    }
    // Value-file paths in the args are relative to the chart dir, so the command runs there.
    args.push(".".into());
    let want = std::fs::read_to_string(&expected_path)
        .map_err(|e| format!("{}: {e}", expected_path.display()))?;
    let template = Template::from_args(&args).map_err(|e| format!("args: {e}"))?;
    let got = match template.execute(&chart_dir, &mut Env::new()) {
        Ok(rendered) => rendered.stdout,
        Err(e) => format!("{}Error: {}\n", e.output, e.message),
    };
    if got == want {
        return Ok(());
    }
    Err(common::first_text_difference(&want, &got))
}

#[test]
fn helm_goldens() {
    let root = common::corpus().join("helm");
    let index = common::read_json(&root.join("index.json"));
    let entries = index.as_array().cloned().unwrap_or_default();
    assert_eq!(entries.len(), 22, "the corpus has 22 Helm goldens");
    let mut passed = 0;
    let mut failures = Vec::new();
    for entry in &entries {
        let case = entry["case"].as_str().unwrap_or_default();
        match check(&root.join(case), entry) {
            Ok(()) => passed += 1,
            Err(summary) => {
                println!("  {case}: FAIL {summary}");
                failures.push(case.to_owned());
            }
        }
    }
    println!("{passed}/{} Helm goldens pass", entries.len());
    assert!(
        failures.is_empty(),
        "failing goldens: {}",
        failures.join(", ")
    );
}
