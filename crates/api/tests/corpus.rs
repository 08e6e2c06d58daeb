//! Every Flux object in the shared corpus (`flux-example`, `flux-extra`) must decode into its
//! typed struct and encode back to the same document: a lost or renamed field is a failure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use capstan_api::object::{is_flux_api_version, is_served};
use capstan_api::{Error, FluxObject};
use serde_json::Value;

fn corpus_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus")
        .join(name)
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs_err::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

fn parse_documents(path: &Path) -> Vec<Value> {
    let text = fs_err::read_to_string(path).unwrap();
    let options = serde_saphyr::options! { strict_booleans: true };
    let docs: Vec<Option<Value>> = serde_saphyr::from_multiple_with_options(&text, options)
        .unwrap_or_else(|e| panic!("{}: invalid yaml: {e}", path.display()));
    docs.into_iter()
        .flatten()
        .filter(|d| !d.is_null())
        .collect()
}

/// Files that kustomization.yaml files use as patches: partial objects by design.
fn patch_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut patches = BTreeSet::new();
    for file in files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "kustomization.yaml"))
    {
        let dir = file.parent().unwrap();
        for doc in parse_documents(file) {
            let mut paths: Vec<&str> = Vec::new();
            if let Some(list) = doc.get("patches").and_then(Value::as_array) {
                paths.extend(
                    list.iter()
                        .filter_map(|p| p.get("path").and_then(Value::as_str)),
                );
            }
            if let Some(list) = doc.get("patchesStrategicMerge").and_then(Value::as_array) {
                paths.extend(list.iter().filter_map(Value::as_str));
            }
            patches.extend(paths.into_iter().map(|p| dir.join(p)));
        }
    }
    patches
}

/// Removes `null` members, recursively: absent and null mean the same to Kubernetes.
fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// The first path at which two documents differ.
fn first_difference(before: &Value, after: &Value, path: &str) -> Option<String> {
    match (before, after) {
        (Value::Object(left), Value::Object(right)) => {
            let keys: BTreeSet<&String> = left.keys().chain(right.keys()).collect();
            keys.into_iter()
                .find_map(|key| match (left.get(key), right.get(key)) {
                    (Some(old), Some(new)) => first_difference(old, new, &format!("{path}.{key}")),
                    (Some(_), None) => Some(format!("{path}.{key} lost in round trip")),
                    (None, _) => Some(format!("{path}.{key} added in round trip")),
                })
        }
        (Value::Array(left), Value::Array(right)) if left.len() == right.len() => left
            .iter()
            .zip(right)
            .enumerate()
            .find_map(|(i, (old, new))| first_difference(old, new, &format!("{path}[{i}]"))),
        _ if before == after => None,
        _ => Some(format!("{path}: {before} became {after}")),
    }
}

#[derive(Default)]
struct Report {
    checked: BTreeMap<String, usize>,
    skipped: Vec<String>,
    failures: Vec<String>,
}

fn check_tree(name: &str, report: &mut Report) {
    let root = corpus_dir(name);
    let mut files = Vec::new();
    yaml_files(&root, &mut files);
    assert!(!files.is_empty(), "no yaml files under {}", root.display());
    let patches = patch_files(&files);
    for file in &files {
        let shown = file
            .strip_prefix(corpus_dir(""))
            .unwrap_or(file)
            .display()
            .to_string();
        for (index, doc) in parse_documents(file).into_iter().enumerate() {
            let api_version = doc
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let kind = doc
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if !is_flux_api_version(&api_version) {
                continue;
            }
            let at = format!("{shown}#{index} {kind} {api_version}");
            if !is_served(&api_version, &kind) {
                report
                    .skipped
                    .push(format!("{at}: kind/version not served"));
                continue;
            }
            if patches.contains(file) {
                report
                    .skipped
                    .push(format!("{at}: kustomize patch (partial object)"));
                continue;
            }
            if doc.get("spec").is_none() {
                // Flux's CRDs accept a spec-less object; ours require `spec` (kube derive),
                // so such an object must be rejected, naming the field.
                match FluxObject::from_value(doc) {
                    Err(Error::InvalidObject { source, .. })
                        if source.to_string().contains("`spec`") =>
                    {
                        report
                            .skipped
                            .push(format!("{at}: no spec (rejected: {source})"));
                    }
                    other => report
                        .failures
                        .push(format!("{at}: spec-less object gave {other:?}")),
                }
                continue;
            }
            let mut original = doc.clone();
            let decoded = match FluxObject::from_value(doc) {
                Ok(o) => o,
                Err(e) => {
                    let cause = std::error::Error::source(&e)
                        .map(ToString::to_string)
                        .unwrap_or_default();
                    report.failures.push(format!("{at}: {e}: {cause}"));
                    continue;
                }
            };
            let mut encoded = decoded.to_value().unwrap();
            strip_nulls(&mut original);
            strip_nulls(&mut encoded);
            if let Some(diff) = first_difference(&original, &encoded, "") {
                report.failures.push(format!("{at}: {diff}"));
                continue;
            }
            *report.checked.entry(kind).or_default() += 1;
        }
    }
}

#[test]
fn corpus_flux_objects_round_trip() {
    let mut report = Report::default();
    check_tree("flux-example", &mut report);
    check_tree("flux-extra", &mut report);
    let total: usize = report.checked.values().sum();
    println!("checked {total} Flux objects: {:?}", report.checked);
    println!("skipped {}:", report.skipped.len());
    for s in &report.skipped {
        println!("  {s}");
    }
    assert!(
        report.failures.is_empty(),
        "round-trip failures:\n{}",
        report.failures.join("\n")
    );
    // The corpus holds GitRepository, OCIRepository, HelmRepository, Kustomization and
    // HelmRelease objects; all of them must have been checked.
    for kind in [
        "GitRepository",
        "OCIRepository",
        "HelmRepository",
        "Kustomization",
        "HelmRelease",
    ] {
        assert!(
            report.checked.get(kind).is_some_and(|n| *n > 0),
            "no {kind} checked"
        );
    }
    assert!(total >= 40, "only {total} objects checked");
}

#[test]
fn round_trip_detects_unknown_fields() {
    let doc: Value = serde_json::json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": "podinfo"},
        "spec": {"interval": "1m", "url": "https://example.com/repo", "notAField": true},
    });
    let encoded = FluxObject::from_value(doc.clone())
        .unwrap()
        .to_value()
        .unwrap();
    assert_eq!(
        first_difference(&doc, &encoded, "").as_deref(),
        Some(".spec.notAField lost in round trip")
    );
}

/// Flattens a schema into `path -> {type, enum, default, ...}` for comparison.
fn summarize(node: &Value, path: &str, out: &mut BTreeMap<String, Value>) {
    let mut summary = serde_json::Map::new();
    // Condition comes from k8s-openapi, which has no validation markers; compare names only.
    if !path.starts_with(".status.conditions[]") {
        for key in [
            "type",
            "enum",
            "default",
            "pattern",
            "minLength",
            "maxLength",
            "x-kubernetes-validations",
        ] {
            if let Some(v) = node.get(key) {
                summary.insert(key.to_owned(), v.clone());
            }
        }
        if let Some(Value::Array(required)) = node.get("required") {
            let mut r: Vec<&Value> = required.iter().collect();
            r.sort_by_key(|v| v.as_str().unwrap_or_default().to_owned());
            summary.insert(
                "required".to_owned(),
                Value::from(r.into_iter().cloned().collect::<Vec<_>>()),
            );
        }
    }
    out.insert(path.to_owned(), Value::Object(summary));
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            summarize(v, &format!("{path}.{k}"), out);
        }
    }
    if let Some(items) = node.get("items") {
        summarize(items, &format!("{path}[]"), out);
    }
    if let Some(extra) = node.get("additionalProperties").filter(|v| v.is_object()) {
        summarize(extra, &format!("{path}{{}}"), out);
    }
}

/// The kustomize-controller CRD in the corpus is Flux's own; our Kustomization schema must
/// declare the same fields with the same types, enums, defaults, patterns and required lists.
#[test]
fn kustomization_schema_matches_flux_crd() {
    let path = corpus_dir(
        "flux-extra/kustomize-controller/config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml",
    );
    let flux = parse_documents(&path).remove(0);
    let flux_schema = flux["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "v1")
        .unwrap()["schema"]["openAPIV3Schema"]
        .clone();
    let ours = capstan_api::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "Kustomization")
        .unwrap();
    let ours_schema = serde_json::to_value(
        &ours.spec.versions[0]
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema,
    )
    .unwrap();

    let mut theirs = BTreeMap::new();
    let mut mine = BTreeMap::new();
    summarize(&flux_schema, "", &mut theirs);
    summarize(&ours_schema, "", &mut mine);
    // The root differs by design: kube's derive requires `spec`, Flux does not.
    theirs.remove("");
    mine.remove("");
    assert!(
        theirs.len() > 100,
        "flux schema has only {} fields",
        theirs.len()
    );
    let mut problems = Vec::new();
    for (path, want) in &theirs {
        match mine.get(path) {
            None => problems.push(format!("{path}: missing")),
            Some(got) if got != want => problems.push(format!("{path}: flux {want} ours {got}")),
            Some(_) => {}
        }
    }
    for path in mine.keys().filter(|p| !theirs.contains_key(*p)) {
        problems.push(format!("{path}: not in flux"));
    }
    assert!(
        problems.is_empty(),
        "schema differences:\n{}",
        problems.join("\n")
    );
    let theirs_columns = &flux["spec"]["versions"][0]["additionalPrinterColumns"];
    let ours_columns =
        serde_json::to_value(&ours.spec.versions[0].additional_printer_columns).unwrap();
    assert_eq!(&ours_columns, theirs_columns);
    assert_eq!(
        flux["spec"]["names"]["shortNames"],
        serde_json::json!(ours.spec.names.short_names)
    );
    assert_eq!(
        flux["spec"]["names"]["categories"],
        serde_json::json!(ours.spec.names.categories)
    );
}
