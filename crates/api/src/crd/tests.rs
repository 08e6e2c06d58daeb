use std::path::PathBuf;

use serde_json::Value;

use super::*;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crds")
        .join("capstan-crds.yaml")
}

#[test]
fn crds_yaml_is_up_to_date() {
    let generated = crds_yaml().unwrap();
    let path = committed_path();
    if std::env::var_os("UPDATE_CRDS").is_some_and(|v| v == "1") {
        fs_err::write(&path, &generated).unwrap();
        return;
    }
    let committed = fs_err::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is out of date with the Rust types\nhint: run: UPDATE_CRDS=1 cargo test -p capstan-api",
        path.display()
    );
}

#[test]
fn crds_yaml_parses_back_into_the_same_crds() {
    let yaml = crds_yaml().unwrap();
    let parsed: Vec<CustomResourceDefinition> = serde_saphyr::from_multiple(&yaml).unwrap();
    assert_eq!(parsed, crds());
}

fn by_kind(kind: &str) -> CustomResourceDefinition {
    crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .unwrap()
}

fn schema(kind: &str) -> Value {
    let crd = by_kind(kind);
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap();
    serde_json::to_value(schema).unwrap()
}

/// Walks `.spec.foo.bar` through `properties`.
fn field<'a>(schema: &'a Value, path: &str) -> &'a Value {
    path.split('.')
        .filter(|p| !p.is_empty())
        .fold(schema, |node, part| &node["properties"][part])
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
fn names_match_flux() {
    let expected = [
        (
            "GitRepository",
            "source.toolkit.fluxcd.io",
            "v1",
            "gitrepositories",
            Some("gitrepo"),
            "fluxcd-sources",
        ),
        (
            "OCIRepository",
            "source.toolkit.fluxcd.io",
            "v1",
            "ocirepositories",
            Some("ocirepo"),
            "fluxcd-sources",
        ),
        (
            "Bucket",
            "source.toolkit.fluxcd.io",
            "v1",
            "buckets",
            None,
            "fluxcd-sources",
        ),
        (
            "HelmRepository",
            "source.toolkit.fluxcd.io",
            "v1",
            "helmrepositories",
            Some("helmrepo"),
            "fluxcd-sources",
        ),
        (
            "HelmChart",
            "source.toolkit.fluxcd.io",
            "v1",
            "helmcharts",
            Some("hc"),
            "fluxcd-sources",
        ),
        (
            "ExternalArtifact",
            "source.toolkit.fluxcd.io",
            "v1",
            "externalartifacts",
            Some("ea"),
            "fluxcd-sources",
        ),
        (
            "Kustomization",
            "kustomize.toolkit.fluxcd.io",
            "v1",
            "kustomizations",
            Some("ks"),
            "fluxcd-appliers",
        ),
        (
            "HelmRelease",
            "helm.toolkit.fluxcd.io",
            "v2",
            "helmreleases",
            Some("hr"),
            "fluxcd-appliers",
        ),
        (
            "Provider",
            "notification.toolkit.fluxcd.io",
            "v1beta3",
            "providers",
            None,
            "fluxcd-notifications",
        ),
        (
            "Alert",
            "notification.toolkit.fluxcd.io",
            "v1beta3",
            "alerts",
            None,
            "fluxcd-notifications",
        ),
        (
            "Receiver",
            "notification.toolkit.fluxcd.io",
            "v1",
            "receivers",
            None,
            "fluxcd-notifications",
        ),
    ];
    let crds = crds();
    assert_eq!(crds.len(), expected.len());
    for (crd, (kind, group, version, plural, short, category)) in crds.iter().zip(expected) {
        assert_eq!(crd.spec.names.kind, kind);
        assert_eq!(crd.spec.group, group, "{kind}");
        assert_eq!(crd.spec.scope, "Namespaced", "{kind}");
        assert_eq!(crd.spec.names.plural, plural, "{kind}");
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some(format!("{plural}.{group}").as_str())
        );
        assert_eq!(
            crd.spec.names.short_names,
            short.map(|s| vec![s.to_owned()]),
            "{kind}"
        );
        let categories = crd.spec.names.categories.clone().unwrap_or_default();
        assert_eq!(categories, ["all", "fluxcd", category], "{kind}");
        assert_eq!(crd.spec.versions.len(), 1);
        assert_eq!(crd.spec.versions[0].name, version, "{kind}");
        assert!(
            crd.spec.versions[0].served && crd.spec.versions[0].storage,
            "{kind}"
        );
    }
}

#[test]
fn status_subresource_and_printer_columns() {
    for crd in crds() {
        let kind = crd.spec.names.kind.as_str();
        let version = &crd.spec.versions[0];
        let columns: Vec<&str> = version
            .additional_printer_columns
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert!(columns.contains(&"Age"), "{kind} has no Age column");
        let has_status = version
            .subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some());
        // Flux's v1beta3 Provider and Alert are status-less; every other kind has status.
        if matches!(kind, "Provider" | "Alert") {
            assert!(!has_status, "{kind} should not have a status subresource");
            assert!(schema(kind)["properties"].get("status").is_none());
        } else {
            assert!(has_status, "{kind} has no status subresource");
            assert!(
                columns.contains(&"Ready") && columns.contains(&"Status"),
                "{kind}: {columns:?}"
            );
            let status = field(&schema(kind), ".status").clone();
            // Flux's ExternalArtifact status has neither observedGeneration nor reconcile
            // requests: another controller writes it.
            if kind == "ExternalArtifact" {
                assert!(status["default"].is_null());
                assert!(status["properties"].get("lastHandledReconcileAt").is_none());
                assert!(status["properties"]["artifact"].is_object());
                continue;
            }
            assert_eq!(
                status["default"],
                serde_json::json!({"observedGeneration": -1}),
                "{kind}"
            );
            assert_eq!(
                status["properties"]["lastHandledReconcileAt"]["type"], "string",
                "{kind}"
            );
        }
    }
    let columns = |kind: &str| -> Vec<(String, String)> {
        by_kind(kind).spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.name, c.json_path))
            .collect()
    };
    assert_eq!(
        columns("GitRepository")[0],
        ("URL".to_owned(), ".spec.url".to_owned())
    );
    assert_eq!(
        columns("Bucket")[0],
        ("Endpoint".to_owned(), ".spec.endpoint".to_owned())
    );
    assert_eq!(columns("HelmChart").len(), 7);
    assert_eq!(
        columns("Kustomization")
            .iter()
            .map(|c| c.0.as_str())
            .collect::<Vec<_>>(),
        ["Age", "Ready", "Status"]
    );
    assert_eq!(
        columns("HelmRelease")[1].1,
        r#".status.conditions[?(@.type=="Ready")].status"#
    );
}

/// Kubernetes structural-schema rules that derive output could break.
fn assert_structural(node: &Value, path: &str) {
    let Some(obj) = node.as_object() else { return };
    assert!(!obj.contains_key("$ref"), "{path}: $ref");
    assert!(
        !obj.contains_key("definitions") && !obj.contains_key("$defs"),
        "{path}: definitions"
    );
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    assert!(
        obj.contains_key("type") || preserve || int_or_string,
        "{path}: schema node without type"
    );
    for combinator in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = obj.get(combinator) {
            assert!(
                obj.contains_key("type") || int_or_string,
                "{path}: {combinator} without type"
            );
            for branch in branches.as_array().unwrap() {
                assert!(
                    branch.get("type").is_none(),
                    "{path}: typed {combinator} branch"
                );
            }
        }
    }
    if obj.get("type") == Some(&Value::String("array".into())) {
        assert!(obj.contains_key("items"), "{path}: array without items");
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        assert!(
            !obj.contains_key("additionalProperties"),
            "{path}: properties and additionalProperties"
        );
        for (name, child) in props {
            assert_structural(child, &format!("{path}.{name}"));
        }
    }
    if let Some(items) = obj.get("items") {
        assert_structural(items, &format!("{path}[]"));
    }
    if let Some(extra) = obj.get("additionalProperties").filter(|v| v.is_object()) {
        assert_structural(extra, &format!("{path}{{}}"));
    }
}

#[test]
fn schemas_are_structural() {
    for crd in crds() {
        let kind = crd.spec.names.kind.clone();
        let schema = schema(&kind);
        assert_eq!(schema["type"], "object", "{kind}");
        assert_structural(&schema, &kind);
        assert_eq!(field(&schema, ".spec")["type"], "object", "{kind}");
    }
}

#[test]
fn flux_defaults_are_in_the_schema() {
    let cases = [
        ("GitRepository", ".spec.timeout", Value::from("60s")),
        ("GitRepository", ".spec.verify.mode", Value::from("HEAD")),
        ("OCIRepository", ".spec.timeout", Value::from("60s")),
        ("OCIRepository", ".spec.provider", Value::from("generic")),
        (
            "OCIRepository",
            ".spec.verify.provider",
            Value::from("cosign"),
        ),
        ("Bucket", ".spec.timeout", Value::from("60s")),
        ("Bucket", ".spec.provider", Value::from("generic")),
        ("HelmRepository", ".spec.provider", Value::from("generic")),
        ("HelmChart", ".spec.version", Value::from("*")),
        (
            "HelmChart",
            ".spec.reconcileStrategy",
            Value::from("ChartVersion"),
        ),
        ("Kustomization", ".spec.force", Value::from(false)),
        ("HelmRelease", ".spec.chart.spec.version", Value::from("*")),
        (
            "HelmRelease",
            ".spec.uninstall.deletionPropagation",
            Value::from("background"),
        ),
        ("Alert", ".spec.eventSeverity", Value::from("info")),
        ("Receiver", ".spec.interval", Value::from("10m")),
    ];
    for (kind, path, default) in cases {
        assert_eq!(
            field(&schema(kind), path)["default"],
            default,
            "{kind} {path}"
        );
    }
}

#[test]
fn required_fields_match_flux() {
    let required = |kind: &str, path: &str| -> Vec<String> {
        let mut r: Vec<String> =
            serde_json::from_value(field(&schema(kind), path)["required"].clone())
                .unwrap_or_default();
        r.sort();
        r
    };
    assert_eq!(
        required("Kustomization", ".spec"),
        ["interval", "prune", "sourceRef"]
    );
    assert_eq!(required("GitRepository", ".spec"), ["interval", "url"]);
    assert_eq!(required("HelmRelease", ".spec"), ["interval"]);
    assert_eq!(
        required("HelmChart", ".spec"),
        ["chart", "interval", "sourceRef"]
    );
    assert_eq!(
        required("Bucket", ".spec"),
        ["bucketName", "endpoint", "interval"]
    );
    assert_eq!(required("HelmRepository", ".spec"), ["url"]);
    assert_eq!(required("Alert", ".spec"), ["eventSources", "providerRef"]);
    assert_eq!(required("Receiver", ".spec"), ["resources", "type"]);
    assert_eq!(required("Provider", ".spec"), ["type"]);
}

#[test]
fn helm_values_preserve_unknown_fields() {
    let schema = schema("HelmRelease");
    let values = field(&schema, ".spec.values");
    assert_eq!(values["x-kubernetes-preserve-unknown-fields"], true);
    assert!(values.get("properties").is_none());
}

#[test]
fn enums_match_flux() {
    let enum_of = |kind: &str, path: &str| field(&schema(kind), path)["enum"].clone();
    assert_eq!(
        enum_of("Kustomization", ".spec.sourceRef.kind"),
        serde_json::json!([
            "OCIRepository",
            "GitRepository",
            "Bucket",
            "ExternalArtifact"
        ])
    );
    assert_eq!(
        enum_of("GitRepository", ".spec.verify.mode"),
        serde_json::json!(["head", "HEAD", "Tag", "TagAndHEAD"])
    );
    assert_eq!(
        enum_of("HelmRelease", ".spec.chartRef.kind"),
        serde_json::json!(["OCIRepository", "HelmChart", "ExternalArtifact"])
    );
    assert_eq!(
        enum_of("Provider", ".spec.type").as_array().unwrap().len(),
        34
    );
    assert_eq!(
        enum_of("Receiver", ".spec.type").as_array().unwrap().len(),
        13
    );
}
