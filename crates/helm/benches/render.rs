//! Render time of every corpus chart, in process, against the Helm SDK in the same run.
//!
//! `cargo bench -p capstan-helm --bench render` (scripts/bench-helm runs it and then times the
//! `capstan helm template` process). Per chart: the first value set that renders, a warm-up,
//! then the median of `HELM_BENCH_RUNS` (default 10) renders on both sides — ours is chart
//! load + render (`output::load_chart` + `engine::render`), the SDK's is `Chart.load` + render
//! (`oracle.py serve`'s `render_many`). Prints a table and writes nothing.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use capstan_helm::engine::{self, Options};
use capstan_helm::output;
use capstan_helm::template::Env;

fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::canonicalize(&root).unwrap_or(root)
}

fn read_json(path: &Path) -> serde_json::Value {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null)
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

/// A chart to time: its dir, values, and options on both sides.
struct Case {
    name: String,
    chart: PathBuf,
    values: serde_json::Map<String, serde_json::Value>,
    options: Options,
    sdk_options: serde_json::Value,
}

fn cases(corpus: &Path) -> Vec<Case> {
    let root = corpus.join("helm-charts");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    dirs.retain(|d| d.join("case.json").is_file());
    dirs.sort();
    let mut out = Vec::new();
    for dir in dirs {
        let case = read_json(&dir.join("case.json"));
        let index = read_json(&dir.join("expected/index.json"));
        let Some(sets) = case["value_sets"].as_object() else {
            continue;
        };
        let Some((set_name, set)) = sets.iter().find(|(n, _)| index[*n]["status"] == "ok") else {
            continue;
        };
        let mut values = serde_json::Map::new();
        for file in strings(&set["values"]) {
            let text = std::fs::read_to_string(dir.join(&file)).unwrap_or_default();
            if let Ok(serde_json::Value::Object(map)) = capstan_helm::yaml::parse(&text) {
                output::merge_maps(&mut values, map);
            }
        }
        let release = case["release"]
            .as_str()
            .unwrap_or("release-name")
            .to_owned();
        let namespace = case["namespace"].as_str().unwrap_or("default").to_owned();
        let kube_version = set["kube_version"].as_str().map(str::to_owned);
        let api_versions = strings(&set["api_versions"]);
        let mut sdk_options = serde_json::json!({
            "name": release, "namespace": namespace, "is_install": true,
        });
        if let Some(k) = &kube_version {
            sdk_options["kube_version"] = k.clone().into();
        }
        if !api_versions.is_empty() {
            sdk_options["api_versions"] = api_versions.clone().into();
        }
        out.push(Case {
            name: format!(
                "{}/{set_name}",
                dir.file_name().unwrap_or_default().to_string_lossy()
            ),
            chart: dir.join("chart"),
            values,
            options: Options {
                release_name: release,
                namespace,
                kube_version,
                api_versions,
                ..Options::default()
            },
            sdk_options,
        });
    }
    out
}

/// Median seconds of `runs` load + render rounds after one warm-up; `Err` if a render fails.
fn ours(case: &Case, runs: usize) -> Result<f64, String> {
    let round = || -> Result<f64, String> {
        let start = Instant::now();
        let chart = output::load_chart(&case.chart).map_err(|e| e.message)?;
        engine::render(&chart, &case.values, &case.options, &mut Env::new())
            .map_err(|e| e.message)?;
        Ok(start.elapsed().as_secs_f64())
    };
    round()?;
    let mut times = (0..runs).map(|_| round()).collect::<Result<Vec<_>, _>>()?;
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is read from the command line.
    let runs: usize = std::env::var("HELM_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
        .max(1);
    let corpus = std::env::var_os("CAPSTAN_CORPUS")
        .map_or_else(|| repo_root().join("../shared/corpus"), PathBuf::from);
    let python = repo_root().join(".tools/helm-venv/bin/python");
    assert!(
        python.is_file(),
        "the Helm SDK is missing ({}): run scripts/setup",
        python.display()
    );
    let mut oracle = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle.py"))
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the oracle starts");
    let mut to_sdk = oracle.stdin.take().expect("piped stdin");
    let mut from_sdk = BufReader::new(oracle.stdout.take().expect("piped stdout"));
    let mut sdk = |case: &Case| -> Result<f64, String> {
        let request = serde_json::json!({
            "op": "render_many", "chart": case.chart, "values": case.values,
            "options": case.sdk_options, "times": runs,
        });
        writeln!(to_sdk, "{request}").map_err(|e| e.to_string())?;
        to_sdk.flush().map_err(|e| e.to_string())?;
        let mut line = String::new();
        from_sdk.read_line(&mut line).map_err(|e| e.to_string())?;
        let answer: serde_json::Value = serde_json::from_str(&line).map_err(|e| e.to_string())?;
        answer["ok"]
            .as_f64()
            .ok_or_else(|| answer["error"].as_str().unwrap_or("no answer").to_owned())
    };

    println!("median of {runs} renders after a warm-up (chart load + render), in process");
    println!(
        "{:<36} {:>10} {:>10} {:>8}",
        "chart/value set", "capstan", "helm sdk", "ratio"
    );
    let (mut sum_ours, mut sum_sdk) = (0.0, 0.0);
    let mut log_ratios = Vec::new();
    for case in cases(&corpus) {
        let theirs = sdk(&case);
        let mine = ours(&case, runs);
        match (mine, theirs) {
            (Ok(a), Ok(b)) => {
                sum_ours += a;
                sum_sdk += b;
                log_ratios.push((a / b).ln());
                println!(
                    "{:<36} {:>8.2}ms {:>8.2}ms {:>7.3}x",
                    case.name,
                    a * 1e3,
                    b * 1e3,
                    a / b
                );
            }
            (Err(e), _) => println!("{:<36} capstan fails: {}", case.name, first_line(&e)),
            (_, Err(e)) => println!("{:<36} helm sdk fails: {}", case.name, first_line(&e)),
        }
    }
    if !log_ratios.is_empty() {
        let geomean = (log_ratios.iter().sum::<f64>() / log_ratios.len() as f64).exp();
        println!(
            "total {:.1}ms vs {:.1}ms: ratio {:.3}x (geometric mean of ratios {:.3}x, target <= 0.2x)",
            sum_ours * 1e3,
            sum_sdk * 1e3,
            sum_ours / sum_sdk,
            geomean
        );
    }
    drop(to_sdk);
    let _ = oracle.wait();
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}
