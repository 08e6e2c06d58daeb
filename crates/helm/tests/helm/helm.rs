//! `../shared/corpus/helm`: Helm's own `helm template` goldens (cmd/helm/testdata), compared
//! byte for byte with stdout (and `Error: …` for the failing cases). Helm v4's goldens and
//! charts are used where the corpus has them.
//!
//! Two tests: [`helm_goldens`] runs the whole command as a library call
//! ([`capstan_helm::output::Template`]: our loader, values, engine and output);
//! [`helm_goldens_output_layer`] has the Helm SDK render the templates and checks only
//! `output.rs` (splitting, sorting, hooks, CRDs, `--show-only`) on its answer, so a failure
//! there is the output layer's own.
//!
//! One known difference is tolerated: the corpus's v4 goldens come from Helm's main branch,
//! which since helm/helm#32327 (after v4.2.3) splits documents on `^---` only and so keeps the
//! blank lines before a `---`; Helm v4.2.3, the version this crate follows, drops them. Outputs
//! equal but for blank lines before separators pass, and are counted separately.

use std::path::{Path, PathBuf};

use capstan_helm::output::{self, Template, ValueSource};
use capstan_helm::template::Env;

use crate::common::{self, Oracle};

/// One golden: the chart dir, the expected file and the `helm template` arguments.
struct Case {
    name: String,
    chart_dir: PathBuf,
    expected: String,
    args: Vec<String>,
}

fn cases() -> Vec<Case> {
    let root = common::corpus().join("helm");
    let index = common::read_json(&root.join("index.json"));
    let entries = index.as_array().cloned().unwrap_or_default();
    assert_eq!(entries.len(), 22, "the corpus has 22 Helm goldens");
    entries.iter().map(|e| case(&root, e)).collect()
}

fn case(root: &Path, entry: &serde_json::Value) -> Case {
    let name = entry["case"].as_str().unwrap_or_default().to_owned();
    let dir = root.join(&name);
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
    let expected = std::fs::read_to_string(&expected_path)
        .unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
    Case {
        name,
        chart_dir,
        expected,
        args,
    }
}

/// How an output compares with a golden.
enum Verdict {
    Equal,
    /// Equal but for blank lines before `---` (Helm main vs v4.2.3; see the module docs).
    BlankLines,
    Differs(String),
}

fn verdict(want: &str, got: &str) -> Verdict {
    if want == got {
        return Verdict::Equal;
    }
    if without_blank_lines_before_separators(want) == without_blank_lines_before_separators(got) {
        return Verdict::BlankLines;
    }
    Verdict::Differs(common::first_text_difference(want, got))
}

/// The text with the empty lines that directly precede a `---` line (or the end) removed.
fn without_blank_lines_before_separators(text: &str) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            let next = lines[i + 1..].iter().find(|l| !l.trim().is_empty());
            if next.is_none_or(|l| l.starts_with("---")) {
                continue;
            }
        }
        out.push(*line);
    }
    out.join("\n")
}

/// What `helm template` prints for an error: stdout so far, then `Error: …` on stderr.
fn error_output(e: &output::Error) -> String {
    format!("{}Error: {}\n", e.output, e.message)
}

fn report(results: &[(String, Verdict)], what: &str) -> Vec<String> {
    let mut failures = Vec::new();
    let (mut equal, mut blank) = (0, 0);
    for (name, verdict) in results {
        match verdict {
            Verdict::Equal => equal += 1,
            Verdict::BlankLines => blank += 1,
            Verdict::Differs(summary) => {
                println!("  {name}: FAIL {summary}");
                failures.push(name.clone());
            }
        }
    }
    println!(
        "{}/{} Helm goldens pass ({what}; {equal} byte-identical, {blank} equal but for Helm \
         main's blank lines before ---)",
        equal + blank,
        results.len()
    );
    failures
}

#[test]
fn helm_goldens() {
    let mut results = Vec::new();
    for case in cases() {
        let got = match Template::from_args(&case.args) {
            Ok(template) => match template.execute(&case.chart_dir, &mut Env::new()) {
                Ok(rendered) => rendered.stdout,
                Err(e) => error_output(&e),
            },
            Err(e) => error_output(&e),
        };
        results.push((case.name.clone(), verdict(&case.expected, &got)));
    }
    let failures = report(&results, "the whole command");
    assert!(
        failures.is_empty(),
        "failing goldens: {}",
        failures.join(", ")
    );
}

#[test]
fn helm_goldens_output_layer() {
    let mut oracle = Oracle::start();
    let mut results = Vec::new();
    for case in cases() {
        let template = Template::from_args(&case.args).expect("the corpus args are valid");
        match sdk_render_printed(&mut oracle, &case, &template) {
            Some(got) => results.push((case.name.clone(), verdict(&case.expected, &got))),
            None => println!("  {}: skipped (the chart does not load in Helm)", case.name),
        }
    }
    let failures = report(&results, "output layer on the Helm SDK's renders");
    assert!(
        failures.is_empty(),
        "failing goldens: {}",
        failures.join(", ")
    );
}

/// The SDK's render of a case printed by `output.rs`; `None` when Helm refuses to load the
/// chart (those cases test the loader, not the output).
fn sdk_render_printed(oracle: &mut Oracle, case: &Case, template: &Template) -> Option<String> {
    // Values as Helm merges them; `-f` files read by the SDK's own reader through `set`-free
    // JSON, `--set` parsed by the SDK.
    let mut values = serde_json::Map::new();
    for source in &template.values {
        let parsed = match source {
            ValueSource::File(path) => {
                let text = std::fs::read_to_string(case.chart_dir.join(path)).ok()?;
                serde_saphyr::from_str::<serde_json::Value>(&text).ok()?
            }
            ValueSource::Set(expr) => oracle
                .request(&serde_json::json!({"op": "set", "kind": "set", "expression": expr}))
                .ok()?,
            other => panic!("the corpus does not use {other:?}"),
        };
        if let serde_json::Value::Object(map) = parsed {
            output::merge_maps(&mut values, map);
        }
    }
    let name = match &template.name_template {
        Some(text) => oracle
            .request(&serde_json::json!({"op": "eval", "text": text}))
            .ok()?
            .as_str()?
            .to_owned(),
        None => "release-name".to_owned(),
    };
    let mut api_versions = Vec::new();
    for entry in &template.api_versions {
        api_versions.extend(entry.split(',').map(str::to_owned));
    }
    let options = serde_json::json!({
        "name": name, "namespace": "default", "is_install": true,
        "kube_version": template.kube_version, "api_versions": api_versions,
    });
    let files = oracle.render(&case.chart_dir, &values, &options).ok()?;
    let chart_name = files
        .keys()
        .next()
        .and_then(|k| k.split('/').next())
        .unwrap_or_default()
        .to_owned();
    let (files, _) = output::without_notes(&chart_name, files);
    let mut crds = Vec::new();
    if template.print.include_crds {
        let mut paths: Vec<_> = std::fs::read_dir(case.chart_dir.join("crds"))
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        paths.sort();
        for path in paths {
            crds.push(output::Crd {
                filename: format!(
                    "{chart_name}/crds/{}",
                    path.file_name().unwrap_or_default().to_string_lossy()
                ),
                data: std::fs::read_to_string(&path).ok()?,
            });
        }
    }
    Some(match output::print(&files, &crds, &template.print) {
        Ok(text) => text,
        Err(mut e) => {
            // As `Template::run` words it: Helm's hint, or the raw templates with --debug.
            if template.debug {
                error_output(&e)
            } else {
                e.output.clear();
                e.message
                    .push_str("\n\nUse --debug flag to render out invalid YAML");
                error_output(&e)
            }
        }
    })
}

/// `leak_thread_caches` gives the caches up, it does not break them: a render after it parses
/// the chart again and gives the same files.
#[test]
fn renders_again_after_the_caches_are_leaked() {
    use capstan_helm::chart::{File, load_dir_files};
    use capstan_helm::engine::{Options, render};
    let file = |name: &str, data: &str| File {
        name: name.to_owned(),
        data: data.as_bytes().to_vec(),
    };
    let chart = load_dir_files(vec![
        file("Chart.yaml", "apiVersion: v2\nname: c\nversion: 0.1.0\n"),
        file("values.yaml", "greeting: hello\n"),
        file("values.schema.json", r#"{"type": "object"}"#),
        file(
            "templates/cm.yaml",
            "kind: ConfigMap\ndata:\n  g: {{ .Values.greeting }}\n",
        ),
    ])
    .unwrap();
    let values = serde_json::Map::new();
    let first = render(&chart, &values, &Options::default(), &mut Env::new()).unwrap();
    assert!(
        first["c/templates/cm.yaml"].contains("g: hello"),
        "{first:?}"
    );
    capstan_helm::leak_thread_caches();
    let again = render(&chart, &values, &Options::default(), &mut Env::new()).unwrap();
    assert_eq!(again, first);
}
