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
