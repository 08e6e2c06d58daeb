//! The real-world charts of the corpus: every one loads, and every value set's values pass
//! dependency processing, coalescing and the schemas exactly where Helm's did.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::{Chart, Values, load, merge_maps, prepare, read_values};

fn corpus() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/helm-charts");
    dir.is_dir().then_some(dir)
}

fn cases(root: &Path) -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root)
        .expect("corpus")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("case.json").is_file())
        .collect();
    cases.sort();
    cases
}

fn count(chart: &Chart) -> usize {
    1 + chart.dependencies.iter().map(count).sum::<usize>()
}

#[test]
fn corpus_charts_load() {
    let Some(root) = corpus() else {
        return;
    };
    let mut loaded = 0;
    for case in cases(&root) {
        let chart = load(case.join("chart")).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
        assert!(!chart.templates.is_empty() || chart.is_library());
        loaded += 1;
        // Archived subcharts load too (argo-cd's redis-ha, kube-prometheus-stack's crds).
        let name = case
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name == "argo-cd" {
            let redis = chart
                .dependencies
                .iter()
                .find(|c| c.name() == "redis-ha")
                .expect("redis-ha from its .tgz");
            assert!(
                redis
                    .templates
                    .iter()
                    .any(|t| t.name.starts_with("templates/"))
            );
        }
        if name == "bitnami-wordpress" {
            // Three copies of the common library: the parent's and one in each subchart.
            assert_eq!(
                count(&chart),
                6,
                "wordpress, common, mariadb(+common), memcached(+common)"
            );
        }
    }
    assert_eq!(loaded, 15);
}

#[test]
fn corpus_value_sets_prepare_as_helm() {
    let Some(root) = corpus() else {
        return;
    };
    let mut checked = 0;
    for case in cases(&root) {
        let chart = load(case.join("chart")).expect("chart");
        let index: Json = serde_json::from_slice(
            &std::fs::read(case.join("expected/index.json")).expect("index.json"),
        )
        .expect("index");
        let Json::Object(sets) = index else {
            continue;
        };
        for (set, spec) in sets {
            if set.starts_with('_') {
                continue;
            }
            let mut values = Values::new();
            for file in spec["values"].as_array().into_iter().flatten() {
                let path = case.join(file.as_str().unwrap_or_default());
                let read = read_values(&std::fs::read(&path).expect("values file"))
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                values = merge_maps(&values, &read);
            }
            let result = prepare(&chart, &values);
            let error_file = case.join(format!("expected/{set}.error.txt"));
            let expected = std::fs::read_to_string(&error_file).ok();
            match (result, expected) {
                (Ok(_), None) => {}
                (Err(e), Some(text)) => {
                    assert_eq!(format!("HelmValuesError: {e}"), text, "{set}");
                }
                (Ok(_), Some(text)) => {
                    assert!(
                        !text.starts_with("HelmValuesError"),
                        "{}/{set}: expected {text}",
                        case.display()
                    );
                }
                (Err(e), None) => panic!("{}/{set}: {e}", case.display()),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 63);
}

/// Numbers as `f64` so YAML readers that keep integers compare equal to Helm's `float64`s.
fn floats(value: Json) -> Json {
    match value {
        Json::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Json::Number(n), Json::Number),
        Json::Array(items) => Json::Array(items.into_iter().map(floats).collect()),
        Json::Object(map) => Json::Object(map.into_iter().map(|(k, v)| (k, floats(v))).collect()),
        other => other,
    }
}

fn json(text: &str) -> Json {
    floats(serde_json::from_str(text).expect("json"))
}

/// `testdata/deps`: one subchart three times under aliases (a comma condition, a tag, and
/// import-values in both forms) plus a library chart. Expectations are Helm v4.2.3's
/// `{{ toJson .Values }} {{ toJson .Chart.Dependencies }}` in the parent and the list of
/// subcharts it rendered.
#[test]
fn dependencies_as_helm() {
    let chart = load(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/chart/testdata/deps"))
        .expect("deps chart");
    let sub = r#"{"cfg":{"k":"v","other":"o"},"enabled":true,"exports":{"data":{"fromExport":1}},"global":{},"name":"subDefault"}"#;
    let cases = [
        (
            "{}",
            format!(
                r#"{{"fromExport":1,"imported":{{"k":"parentWins","other":"o"}},"lib":{{"global":{{}}}},"one":{{"enabled":false}},"tags":{{"t":true}},"three":{{"cfg":{{"k":"v","other":"o"}},"enabled":true,"exports":{{"data":{{"fromExport":1}}}},"global":{{}},"name":"fromParent"}},"two":{sub}}}"#
            ),
            r#"[{"Alias":"two","Condition":"","Enabled":true,"ImportValues":[],"Name":"two","Repository":"","Tags":["t"],"Version":">=0.1.0"},{"Alias":"three","Condition":"three.missing,three.enabled","Enabled":true,"ImportValues":[{"child":"exports.data","parent":"."},{"child":"cfg","parent":"imported"}],"Name":"three","Repository":"","Tags":[],"Version":"~0.1"},{"Alias":"","Condition":"","Enabled":true,"ImportValues":[],"Name":"lib","Repository":"","Tags":[],"Version":"1.x"}]"#,
            vec!["two", "three", "lib"],
        ),
        (
            r#"{"tags": {"t": false}, "global": {"oneEnabled": true}, "one": {"enabled": null}}"#,
            r#"{"fromExport":1,"global":{"oneEnabled":true},"imported":{"k":"parentWins","other":"o"},"lib":{"global":{"oneEnabled":true}},"one":{"cfg":{"k":"v","other":"o"},"exports":{"data":{"fromExport":1}},"global":{"oneEnabled":true},"name":"subDefault"},"tags":{"t":false},"three":{"cfg":{"k":"v","other":"o"},"enabled":true,"exports":{"data":{"fromExport":1}},"global":{"oneEnabled":true},"name":"fromParent"}}"#.to_string(),
            r#"[{"Alias":"one","Condition":"one.enabled,global.oneEnabled","Enabled":true,"ImportValues":[],"Name":"one","Repository":"","Tags":[],"Version":"0.1.0"},{"Alias":"three","Condition":"three.missing,three.enabled","Enabled":true,"ImportValues":[{"child":"exports.data","parent":"."},{"child":"cfg","parent":"imported"}],"Name":"three","Repository":"","Tags":[],"Version":"~0.1"},{"Alias":"","Condition":"","Enabled":true,"ImportValues":[],"Name":"lib","Repository":"","Tags":[],"Version":"1.x"}]"#,
            vec!["one", "three", "lib"],
        ),
        (
            r#"{"three": {"enabled": false}, "one": {"enabled": true}}"#,
            format!(
                r#"{{"imported":{{"k":"parentWins"}},"lib":{{"global":{{}}}},"one":{sub},"tags":{{"t":true}},"three":{{"enabled":false,"name":"fromParent"}},"two":{sub}}}"#
            ),
            r#"[{"Alias":"one","Condition":"one.enabled,global.oneEnabled","Enabled":true,"ImportValues":[],"Name":"one","Repository":"","Tags":[],"Version":"0.1.0"},{"Alias":"two","Condition":"","Enabled":true,"ImportValues":[],"Name":"two","Repository":"","Tags":["t"],"Version":">=0.1.0"},{"Alias":"","Condition":"","Enabled":true,"ImportValues":[],"Name":"lib","Repository":"","Tags":[],"Version":"1.x"}]"#,
            vec!["one", "two", "lib"],
        ),
    ];
    for (user, want_values, want_deps, want_charts) in cases {
        let Json::Object(user_values) = json(user) else {
            panic!("user values");
        };
        let (prepared, values) = prepare(&chart, &user_values).expect("prepare");
        assert_eq!(floats(Json::Object(values)), json(&want_values), "{user}");
        let deps = Json::Array(
            prepared
                .metadata
                .dependencies
                .iter()
                .map(|d| d.to_value().to_json())
                .collect(),
        );
        assert_eq!(floats(deps), json(want_deps), "{user}");
        let mut names: Vec<&str> = prepared.dependencies.iter().map(Chart::name).collect();
        let mut want: Vec<&str> = want_charts;
        names.sort_unstable();
        want.sort_unstable();
        assert_eq!(names, want, "{user}");
    }
}
