use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::merge2;
use crate::{BuildOptions, DiskFs, Error, MemoryFs, build_with};

/// The shared corpus beside the repository (`$CAPSTAN_CORPUS` overrides it).
fn corpus() -> PathBuf {
    std::env::var_os("CAPSTAN_CORPUS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
        PathBuf::from,
    )
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn helm_on() -> BuildOptions {
    BuildOptions {
        enable_helm: true,
        ..BuildOptions::default()
    }
}

/// A small chart in memory: one ConfigMap and one test hook.
fn tiny_chart(fs: &mut MemoryFs, dir: &str) {
    fs.insert(
        format!("{dir}/Chart.yaml"),
        "apiVersion: v2\nname: tiny\nversion: 1.0.0\n",
    );
    fs.insert(
        format!("{dir}/values.yaml"),
        "greeting: hello\nlist: [a, b]\nnested:\n  keep: 1\n  drop: 2\n",
    );
    fs.insert(
        format!("{dir}/templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\n  namespace: {{ .Release.Namespace }}\ndata:\n  greeting: {{ .Values.greeting | quote }}\n  list: {{ .Values.list | join \",\" | quote }}\n  nested: {{ .Values.nested | toJson | quote }}\n",
    );
    fs.insert(
        format!("{dir}/templates/test.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}-test\n  annotations:\n    helm.sh/hook: test\n",
    );
    fs.insert(format!("{dir}/.helmignore"), "ignored.txt\n");
    fs.insert(
        format!("{dir}/templates/ignored.txt"),
        "{{ fail \"ignored\" }}",
    );
}

fn build_memory(fs: &MemoryFs, options: &BuildOptions) -> Result<Vec<Value>, Error> {
    build_with(fs, Path::new("/app"), options)
}

#[test]
fn chart_output_equals_the_rendered_chart_kustomized_as_a_plain_file() {
    let chart = corpus().join("helm-charts/sealed-secrets/chart");
    if !chart.is_dir() {
        eprintln!("skipped: no corpus at {}", chart.display());
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let app = scratch.path().join("app");
    copy_dir(&chart, &app.join("charts/sealed-secrets"));
    let transformers = "namePrefix: pre-\nnamespace: tools\ncommonLabels:\n  team: ops\n";
    std::fs::write(
        app.join("kustomization.yaml"),
        format!(
            "{transformers}helmCharts:\n- name: sealed-secrets\n  releaseName: sealed\n  includeCRDs: true\n  valuesInline:\n    fullnameOverride: sealer\n    commonLabels:\n      tier: infra\n    resources:\n      limits:\n        cpu: 200m\n"
        ),
    )
    .unwrap();
    let objects = build_with(&DiskFs, &app, &helm_on()).unwrap();

    // The same chart rendered by capstan-helm alone, with the values `helm template -f`
    // would get: the chart's values.yaml with the inline values over it.
    let loaded = capstan_helm::chart::load(&chart).unwrap();
    let mut values =
        capstan_helm::chart::read_values(&std::fs::read(chart.join("values.yaml")).unwrap())
            .unwrap();
    let inline = capstan_helm::chart::read_values(
        b"fullnameOverride: sealer\ncommonLabels:\n  tier: infra\nresources:\n  limits:\n    cpu: 200m\n",
    )
    .unwrap();
    capstan_helm::output::merge_maps(&mut values, inline);
    let template = capstan_helm::output::Template {
        args: vec!["sealed".into(), "chart".into()],
        print: capstan_helm::output::PrintOptions {
            include_crds: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let rendered = template
        .run(
            "sealed",
            &loaded,
            &values,
            &mut capstan_helm::template::Env::new(),
        )
        .unwrap();
    let plain = scratch.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::write(plain.join("rendered.yaml"), &rendered.stdout).unwrap();
    std::fs::write(
        plain.join("kustomization.yaml"),
        format!("{transformers}resources: [rendered.yaml]\n"),
    )
    .unwrap();
    let expected = build_with(&DiskFs, &plain, &BuildOptions::default()).unwrap();

    assert!(objects.len() > 5, "{}", objects.len());
    assert_eq!(objects, expected);
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment");
    assert_eq!(deployment["metadata"]["name"], "pre-sealer");
    assert_eq!(deployment["metadata"]["namespace"], "tools");
    assert_eq!(deployment["metadata"]["labels"]["tier"], "infra");
    assert_eq!(deployment["metadata"]["labels"]["team"], "ops");
    assert!(
        objects
            .iter()
            .any(|o| o["kind"] == "CustomResourceDefinition")
    );
}

#[test]
fn values_merge_modes_and_additional_files() {
    let mut fs = MemoryFs::new();
    tiny_chart(&mut fs, "app/charts/tiny");
    fs.insert("app/extra.yaml", "greeting: from-extra\n");
    let data = |merge: &str, extra: bool| -> Value {
        let mut fs = fs.clone();
        let extra = if extra {
            "  additionalValuesFiles: [extra.yaml]\n"
        } else {
            ""
        };
        fs.insert(
            "app/kustomization.yaml",
            format!(
                "helmCharts:\n- name: tiny\n  releaseName: r\n  valuesMerge: {merge}\n{extra}  valuesInline:\n    greeting: inline\n    list: [c]\n    nested:\n      drop: null\n      add: 3\n"
            ),
        );
        let objects = build_memory(&fs, &helm_on()).unwrap();
        let cm = objects.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
        cm["data"].clone()
    };
    // override: inline wins, lists replace, a null removes the key from the file's values (the
    // chart's default comes back underneath, as with helm).
    assert_eq!(
        data("override", false),
        json!({"greeting": "inline", "list": "c", "nested": "{\"add\":3,\"drop\":2,\"keep\":1}"})
    );
    // merge: the file wins where both have a key.
    assert_eq!(
        data("merge", false),
        json!({"greeting": "hello", "list": "a,b", "nested": "{\"add\":3,\"drop\":2,\"keep\":1}"})
    );
    // replace: the inline values alone, so null deletes the chart default.
    assert_eq!(
        data("replace", false),
        json!({"greeting": "inline", "list": "c", "nested": "{\"add\":3,\"keep\":1}"})
    );
    // additional values files come last.
    assert_eq!(data("override", true)["greeting"], "from-extra");
}

#[test]
fn release_namespace_hooks_tests_and_origins() {
    let mut fs = MemoryFs::new();
    tiny_chart(&mut fs, "app/charts/tiny");
    fs.insert(
        "app/kustomization.yaml",
        "buildMetadata: [originAnnotations]\nhelmCharts:\n- name: tiny\n  namespace: ns1\n",
    );
    let objects = build_memory(&fs, &helm_on()).unwrap();
    let names: Vec<&str> = objects
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    // No release name: Helm's `release-name`; the test hook is printed after the manifests.
    assert_eq!(names, ["release-name-cm", "release-name-test"]);
    assert_eq!(objects[0]["metadata"]["namespace"], "ns1");
    assert_eq!(
        objects[0]["metadata"]["annotations"]["config.kubernetes.io/origin"],
        "configuredIn: kustomization.yaml\nconfiguredBy:\n  apiVersion: builtin\n  kind: HelmChartInflationGenerator\n"
    );
    fs.insert(
        "app/kustomization.yaml",
        "helmCharts:\n- name: tiny\n  skipTests: true\n  nameTemplate: '{{ \"named\" }}'\n",
    );
    let objects = build_memory(&fs, &helm_on()).unwrap();
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0]["metadata"]["name"], "named-cm");
    assert_eq!(objects[0]["metadata"]["namespace"], "default");
}

#[test]
fn chart_home_version_and_legacy_field() {
    let mut fs = MemoryFs::new();
    tiny_chart(&mut fs, "app/vendor/tiny-1.0.0/tiny");
    fs.insert(
        "app/kustomization.yaml",
        "helmGlobals:\n  chartHome: vendor\nhelmCharts:\n- name: tiny\n  version: 1.0.0\n  repo: https://charts.example.com\n  releaseName: v\n",
    );
    let objects = build_memory(&fs, &helm_on()).unwrap();
    assert_eq!(objects[0]["metadata"]["name"], "v-cm");
    fs.insert(
        "app/kustomization.yaml",
        "helmChartInflationGenerator:\n- chartName: tiny\n  chartHome: vendor/tiny-1.0.0\n  releaseName: legacy\n  valuesLocal:\n    greeting: old\n",
    );
    let objects = build_memory(&fs, &helm_on()).unwrap();
    assert_eq!(objects[0]["metadata"]["name"], "legacy-cm");
    assert_eq!(objects[0]["data"]["greeting"], "old");
}

#[test]
fn without_enable_helm_charts_are_refused() {
    let mut fs = MemoryFs::new();
    tiny_chart(&mut fs, "app/charts/tiny");
    fs.insert("app/kustomization.yaml", "helmCharts:\n- name: tiny\n");
    let error = build_memory(&fs, &BuildOptions::default()).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("must specify --enable-helm"), "{message}");
    assert!(message.contains("/app/kustomization.yaml"), "{message}");
    // The legacy field too; globals alone configure nothing, as in kustomize.
    fs.insert(
        "app/kustomization.yaml",
        "helmChartInflationGenerator:\n- chartName: tiny\n",
    );
    let error = build_memory(&fs, &BuildOptions::default()).unwrap_err();
    assert!(error.to_string().contains("must specify --enable-helm"));
    fs.insert(
        "app/kustomization.yaml",
        "helmGlobals:\n  chartHome: charts\nresources: []\n",
    );
    assert!(
        build_memory(&fs, &BuildOptions::default())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn missing_charts_are_never_pulled() {
    let mut fs = MemoryFs::new();
    fs.insert("app/kustomization.yaml", "helmCharts:\n- name: gone\n");
    let message = build_memory(&fs, &helm_on()).unwrap_err().to_string();
    assert!(
        message.contains("no repo specified for pull, no chart found at '/app/charts/gone'"),
        "{message}"
    );
    fs.insert(
        "app/kustomization.yaml",
        "helmCharts:\n- name: gone\n  repo: https://charts.example.com\n",
    );
    let message = build_memory(&fs, &helm_on()).unwrap_err().to_string();
    assert!(
        message.contains("Capstan renders only charts present under chartHome"),
        "{message}"
    );
    assert!(message.contains("https://charts.example.com"), "{message}");
}

#[test]
fn charts_outside_the_boundary_are_refused() {
    let mut fs = MemoryFs::new();
    tiny_chart(&mut fs, "outside/tiny");
    fs.insert(
        "src/app/kustomization.yaml",
        "helmGlobals:\n  chartHome: ../../outside\nhelmCharts:\n- name: tiny\n",
    );
    let options = BuildOptions {
        boundary: Some(PathBuf::from("/src")),
        ..helm_on()
    };
    let error = build_with(&fs, Path::new("/src/app"), &options).unwrap_err();
    assert!(matches!(error, Error::OutsideBoundary { .. }), "{error}");
    assert!(error.to_string().contains("helmCharts"), "{error}");
    // The same refusal when nothing exists there.
    let mut empty = MemoryFs::new();
    empty.insert(
        "src/app/kustomization.yaml",
        "helmGlobals:\n  chartHome: ../../outside\nhelmCharts:\n- name: tiny\n",
    );
    let again = build_with(&empty, Path::new("/src/app"), &options).unwrap_err();
    assert_eq!(error.to_string(), again.to_string());
}

#[test]
fn chart_links_leaving_the_chart_are_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let app = scratch.path().join("app");
    let chart = app.join("charts/tiny");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        "apiVersion: v2\nname: tiny\nversion: 1.0.0\n",
    )
    .unwrap();
    std::fs::write(chart.join("values.yaml"), "").unwrap();
    std::fs::write(scratch.path().join("secret.txt"), "s3cret").unwrap();
    std::os::unix::fs::symlink(scratch.path().join("secret.txt"), chart.join("leak.txt")).unwrap();
    std::fs::write(
        app.join("kustomization.yaml"),
        "helmCharts:\n- name: tiny\n",
    )
    .unwrap();
    let message = build_with(&DiskFs, &app, &helm_on())
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("leak.txt: the link points outside the chart directory"),
        "{message}"
    );
}

#[test]
fn render_errors_name_the_chart_and_template() {
    let mut fs = MemoryFs::new();
    tiny_chart(&mut fs, "app/charts/tiny");
    fs.insert(
        "app/charts/tiny/templates/bad.yaml",
        "x: {{ required \"need x\" .Values.x }}\n",
    );
    fs.insert("app/kustomization.yaml", "helmCharts:\n- name: tiny\n");
    let message = build_memory(&fs, &helm_on()).unwrap_err().to_string();
    assert!(message.contains("chart \"tiny\""), "{message}");
    assert!(message.contains("tiny/templates/bad.yaml"), "{message}");
    assert!(message.contains("need x"), "{message}");
    fs.insert(
        "app/kustomization.yaml",
        "helmCharts:\n- name: tiny\n  valuesMerge: sideways\n",
    );
    let message = build_memory(&fs, &helm_on()).unwrap_err().to_string();
    assert!(
        message.contains("valuesMerge must be one of [merge override replace]"),
        "{message}"
    );
}

#[test]
fn duplicate_objects_from_a_chart_and_resources_conflict() {
    let mut fs = MemoryFs::new();
    tiny_chart(&mut fs, "app/charts/tiny");
    fs.insert(
        "app/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r-cm\n  namespace: default\n",
    );
    fs.insert(
        "app/kustomization.yaml",
        "resources: [cm.yaml]\nhelmCharts:\n- name: tiny\n  releaseName: r\n",
    );
    let message = build_memory(&fs, &helm_on()).unwrap_err().to_string();
    assert!(
        message.contains("behavior must be merge or replace"),
        "{message}"
    );
}

#[test]
fn merge2_follows_kyaml() {
    assert_eq!(
        merge2(
            json!({"a": {"b": 1, "c": null}, "l": [1]}),
            json!({"a": {"c": 2, "d": null}, "l": [2, 3], "k": 0})
        )
        .unwrap(),
        json!({"a": {"b": 1}, "l": [1], "k": 0})
    );
    let error = merge2(json!({"a": [1]}), json!({"a": {"b": 1}})).unwrap_err();
    assert_eq!(
        error,
        "wrong node kind: expected MappingNode but got SequenceNode"
    );
}

#[test]
fn charts_load_through_an_overlay_and_a_boundary() {
    let mut lower = MemoryFs::new();
    tiny_chart(&mut lower, "checkout/repo/app/charts/tiny");
    lower.insert("checkout/elsewhere.yaml", "greeting: outside\n");
    let mut overlay =
        crate::OverlayFs::mounted(lower, Path::new("/checkout/repo"), Path::new("/src"));
    overlay.insert(
        "src/app/kustomization.yaml",
        "helmCharts:\n- name: tiny\n  releaseName: o\n",
    );
    overlay.insert(
        "src/app/charts/tiny/templates/extra.yaml",
        "kind: Secret\napiVersion: v1\nmetadata:\n  name: extra\n",
    );
    let options = BuildOptions {
        boundary: Some(PathBuf::from("/src")),
        ..helm_on()
    };
    let objects = build_with(&overlay, Path::new("/src/app"), &options).unwrap();
    let names: Vec<&str> = objects
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    // Files of both layers make the chart; sorted as kustomize's legacy order prints them.
    assert_eq!(names, ["o-cm", "extra", "o-test"]);
    // A values file outside the mount is neither read nor named differently from a missing one.
    overlay.insert(
        "src/app/kustomization.yaml",
        "helmCharts:\n- name: tiny\n  valuesFile: ../../elsewhere.yaml\n",
    );
    let error = build_with(&overlay, Path::new("/src/app"), &options).unwrap_err();
    assert!(matches!(error, Error::OutsideBoundary { .. }), "{error}");
}

#[test]
fn builtin_generator_configs_render_charts_too() {
    let mut fs = MemoryFs::new();
    tiny_chart(&mut fs, "app/vendor/tiny");
    fs.insert(
        "app/helm.yaml",
        "apiVersion: builtin\nkind: HelmChartInflationGenerator\nmetadata:\n  name: tiny\nname: tiny\nchartHome: vendor\nreleaseName: g\nskipTests: true\n",
    );
    fs.insert("app/kustomization.yaml", "generators: [helm.yaml]\n");
    let objects = build_memory(&fs, &helm_on()).unwrap();
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0]["metadata"]["name"], "g-cm");
    let message = build_memory(&fs, &BuildOptions::default())
        .unwrap_err()
        .to_string();
    assert!(message.contains("generators"), "{message}");
    assert!(message.contains("must specify --enable-helm"), "{message}");
}
