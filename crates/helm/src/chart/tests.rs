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
                    // The corpus files end with the newline the recorder added.
                    assert_eq!(format!("HelmValuesError: {e}\n"), text, "{set}");
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

/// Every keyword's message as Helm v4.2.3 words it. Helm lists a schema's property failures
/// in Go's random map order, so the lines are compared as a set.
#[test]
fn schema_messages_as_helm() {
    let schema = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/chart/testdata/schema/values.schema.json"),
    )
    .expect("schema");
    let mut chart = Chart::default();
    chart.metadata.name = "s".into();
    chart.schema = Some(schema);
    let Json::Object(values) = serde_json::json!({"e":"z","e1":"b","c":"j","m":1,"mx":5,"xm":3,"ml":"ab","p":"b","mi":[1],"u":[1,1],"mo":3,"t":1.5,"i":1.5,"n":"s","a":true,"o":[],"f":1,"nest":{"q":1,"w":2},"nb":null,"ob":[]})
    else {
        panic!("values");
    };
    let message = prepare(&chart, &values).expect_err("invalid").message;
    let want = "values don't meet the specifications of the schema(s) in the following chart(s):
s:
- at '': missing properties 'r1', 'r2'
- at '/i': got number, want integer
- at '/p': 'b' does not match pattern '^a+$'
- at '/nb': got null, want boolean
- at '/mi': minItems: got 1, want 2
- at '/m': minimum: got 1, want 3
- at '/nest': validation failed
  - at '/nest/q': got number, want string
  - at '/nest/w': got number, want string
- at '/ob': got array, want object
- at '/e1': value must be 'a'
- at '/t': got number, want integer or string
- at '/n': 'not' failed
- at '/c': value must be 'k'
- at '/xm': exclusiveMinimum: got 3, want 3
- at '/a': 'anyOf' failed
  - at '/a': got boolean, want string
  - at '/a': got boolean, want integer
- at '/mo': multipleOf: got 3, want 2
- at '/e': value must be one of 'a', 1, <nil>
- at '/f': false schema
- at '/mx': maximum: got 5, want 3
- at '/o': 'oneOf' failed, none matched
  - at '/o': got array, want string
  - at '/o': got array, want integer
- at '/u': items at 0 and 1 are equal
- at '/ml': minLength: got 2, want 3
";
    // Group each top-level entry with its nested lines, then compare as sets.
    let entries = |text: &str| {
        let mut out: Vec<String> = Vec::new();
        for line in text.lines() {
            if line.starts_with("  ") {
                if let Some(last) = out.last_mut() {
                    last.push('\n');
                    last.push_str(line);
                }
            } else {
                out.push(line.to_string());
            }
        }
        out.sort();
        out
    };
    assert_eq!(entries(&message), entries(want));
    assert!(message.ends_with('\n') && !message.ends_with("\n\n"));

    let mut chart = Chart::default();
    chart.metadata.name = "s3".into();
    chart.schema = Some(br#"{"properties":{"a":{"type":"string"},"b":{"type":["boolean","null"]},"c":{"type":"object"},"d":{"enum":[{"x":1},[1,2],true,2.5]}, "e":{"const":{"x":"y"}}}}"#.to_vec());
    let Json::Object(values) = serde_json::json!({"a":1,"b":1,"c":"1","d":3,"e":1}) else {
        panic!("values");
    };
    let message = prepare(&chart, &values).expect_err("invalid").message;
    let want = "values don't meet the specifications of the schema(s) in the following chart(s):
s3:
- at '/e': 'const' failed
- at '/a': got number, want string
- at '/b': got number, want null or boolean
- at '/c': got string, want object
- at '/d': 'enum' failed
";
    assert_eq!(schema_entries(&message), schema_entries(want), "{message}");
}

/// Groups each top-level entry of a schema failure with its nested lines, sorted, since Helm
/// lists property failures in Go's random map order.
fn schema_entries(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        if !line.starts_with(' ') && !line.starts_with('-') {
            section = line.to_string();
            out.push(section.clone());
            continue;
        }
        // Lines under a group (`validation failed`, `'anyOf' failed`) stay with it; a group's
        // direct children are entries of their own.
        if line.starts_with("    ") {
            if let Some(last) = out.last_mut() {
                last.push('\n');
                last.push_str(line);
            }
        } else {
            out.push(format!("{section} {line}"));
        }
    }
    out.sort();
    out
}

/// A draft-07 schema behind a root `$ref`, allOf/oneOf/items/additionalProperties/if-then,
/// and a subchart's own schema, as Helm v4.2.3 reported them.
#[test]
fn schema_groups_as_helm() {
    let chart = load(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/chart/testdata/schema2"))
        .expect("chart");
    let Json::Object(values) = serde_json::json!({"fm":"nope","o2":1,"l":["a",1,2],"ap":{"x":1,"y":2,"w":3},"mx":"abc","it":"abc","req":{},"allof":1,"sub":{"k":"s"}})
    else {
        panic!("values");
    };
    let message = prepare(&chart, &values).expect_err("invalid").message;
    let want = "values don't meet the specifications of the schema(s) in the following chart(s):
s2:
- at '': validation failed
  - at '/l': validation failed
    - at '/l/1': got number, want string
    - at '/l/2': got number, want string
  - at '/req': missing property 'z'
  - at '/ap': additional properties 'w', 'y' not allowed
  - at '/it': minLength: got 3, want 5
  - at '/fm': 'nope' is not valid email: missing @
  - at '/mx': maxLength: got 3, want 2
  - at '/o2': 'oneOf' failed, subschemas 0, 1 matched
  - at '/allof': 'allOf' failed
    - at '/allof': got number, want string
    - at '/allof': minimum: got 1, want 3
sub:
- at '': missing property 'must'
- at '/k': got string, want integer
";
    assert_eq!(schema_entries(&message), schema_entries(want), "{message}");
}

/// An apiVersion v1 chart (no apiVersion in Chart.yaml) with requirements.yaml: an aliased,
/// conditional subchart; requirements.yaml and .lock stay in `.Files`. Helm v4.2.3 rendered
/// `.Values` as below for each user value set.
#[test]
fn v1_requirements_as_helm() {
    let chart = load(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/chart/testdata/v1"))
        .expect("v1 chart");
    assert_eq!(chart.metadata.api_version, "v1");
    let files: Vec<&str> = chart.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(files, ["requirements.lock", "requirements.yaml"]);
    let cases = [
        ("{}", r#"{"renamed":{"global":{},"x":1}}"#, 1),
        (
            r#"{"sub":{"on":false},"renamed":{"on":false}}"#,
            r#"{"renamed":{"on":false},"sub":{"on":false}}"#,
            0,
        ),
    ];
    for (user, want, deps) in cases {
        let Json::Object(user_values) = json(user) else {
            panic!("user values");
        };
        let (prepared, values) = prepare(&chart, &user_values).expect("prepare");
        assert_eq!(floats(Json::Object(values)), json(want), "{user}");
        assert_eq!(prepared.metadata.dependencies.len(), deps, "{user}");
    }
    let mut missing = chart.clone();
    missing.dependencies.clear();
    assert_eq!(
        super::check_dependencies(&missing)
            .expect_err("missing")
            .message,
        "found in Chart.yaml, but missing in charts/ directory: sub"
    );
    assert_eq!(super::version_matches(">=1.20.0-0", "v1.29.0"), Some(true));
}

/// `import-values` in both forms landing in one table: Helm merges the child's tables by
/// reference, so the second import also grows the first's source in the subchart's values.
/// Expected: Helm v4.2.3's `.Values` for this chart (found by a generated differential run).
#[test]
fn overlapping_imports_as_helm() {
    let chart = load(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/chart/testdata/imports"))
        .expect("chart");
    let Json::Object(user) = json(r#"{"al": {"a": [1, null], "c": 1, "b": {"b": true}}}"#) else {
        panic!("user values");
    };
    let (_, values) = prepare(&chart, &user).expect("prepare");
    assert_eq!(
        floats(Json::Object(values)),
        json(
            r#"{"a":{"d":{"a":{"b":{}}}},"al":{"a":[1,null],"b":{"b":true},"c":1,"exports":{"data":{"a":{"d":{"a":{"b":{}}}},"c":{"a":"s"},"d":{"c":null,"d":1}}},"global":{}},"b":[1,null],"c":{"a":"s"},"d":{"d":1}}"#
        )
    );
}

/// Formats are asserted only by drafts before 2019-09, as with Helm v4.2.3.
#[test]
fn schema_formats_by_draft() {
    let mut chart = Chart::default();
    chart.metadata.name = "f1".into();
    let Json::Object(values) =
        serde_json::json!({"fm": "nope", "ip": "1.2.3", "u": "::", "d": "yesterday"})
    else {
        panic!("values");
    };
    for schema in [
        r#"{"properties":{"fm":{"format":"email"},"ip":{"format":"ipv4"},"u":{"format":"uri"},"d":{"format":"date-time"}}}"#,
        r#"{"$schema":"https://json-schema.org/draft/2019-09/schema","properties":{"fm":{"format":"email"}}}"#,
    ] {
        chart.schema = Some(schema.as_bytes().to_vec());
        assert!(prepare(&chart, &values).is_ok(), "{schema}");
    }
    chart.schema = Some(
        br#"{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"fm":{"format":"email"}}}"#
            .to_vec(),
    );
    assert_eq!(
        prepare(&chart, &values).expect_err("draft-07").message,
        "values don't meet the specifications of the schema(s) in the following chart(s):\nf1:\n- at '/fm': 'nope' is not valid email: missing @\n"
    );
}

/// A schema that is not JSON fails with Go's decoder message under the chart's name.
#[test]
fn broken_schema() {
    let mut chart = Chart::default();
    chart.metadata.name = "f1".into();
    chart.schema = Some(b"{\"properties\": \n".to_vec());
    assert_eq!(
        prepare(&chart, &Values::new()).expect_err("broken").message,
        "values don't meet the specifications of the schema(s) in the following chart(s):\nf1:\nunexpected EOF\n"
    );
    chart.schema = Some(br#"{"$ref": "https://example.invalid/x.json"}"#.to_vec());
    let message = prepare(&chart, &Values::new()).expect_err("remote").message;
    assert!(message.contains("failing loading"), "{message}");
    chart.schema = Some(br#"{"type": 5}"#.to_vec());
    let message = prepare(&chart, &Values::new())
        .expect_err("metaschema")
        .message;
    assert!(
        message.contains("is not valid against metaschema"),
        "{message}"
    );
}

#[test]
fn constraints() {
    let cases = [
        ("1.2.3", "1.2.3", true),
        ("1.2.x", "1.2.9", true),
        ("1.2.x", "1.3.0", false),
        ("~1.2.0", "1.2.5", true),
        ("~1.2.0", "1.3.0", false),
        ("^1.2.0", "1.9.0", true),
        ("^1.2.0", "2.0.0", false),
        ("^0.2.3", "0.2.9", true),
        ("^0.2.3", "0.3.0", false),
        (">=1.2.0 <2.0.0", "1.5.0", true),
        (">=1.2.0, <2.0.0", "2.0.0", false),
        ("^1 || ^2", "2.3.0", true),
        ("1.2 - 1.4.5", "1.4.5", true),
        ("1.2 - 1.4.5", "1.4.6", false),
        (">= 1.20", "1.29.0", true),
        (">=1.0.0", "1.1.0-rc.1", false),
        ("*", "3.1.0", true),
        ("2.x.x", "2.31.4", true),
    ];
    for (constraint, version, want) in cases {
        assert_eq!(
            super::version_matches(constraint, version),
            Some(want),
            "{constraint} {version}"
        );
    }
    assert_eq!(super::version_matches("", "1.0.0"), None);
    assert_eq!(super::version_matches("nonsense", "1.0.0"), None);
}
