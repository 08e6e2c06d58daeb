//! Field set tests.

use capstan_schema::Schema;
use serde_json::{Value, json};

use super::{FieldSet, PathElement, compare};

/// `fieldsV1` of a Deployment created by `kubectl apply` (client-side), as Kubernetes records
/// it for the `kubectl-client-side-apply` Update entry, written by hand from the documented format.
const KUBECTL_FIELDS: &str = r#"{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:progressDeadlineSeconds":{},"f:replicas":{},"f:revisionHistoryLimit":{},"f:selector":{},"f:strategy":{"f:rollingUpdate":{".":{},"f:maxSurge":{},"f:maxUnavailable":{}},"f:type":{}},"f:template":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}}}"#;

/// The `kube-controller-manager` status entry of the same Deployment.
const STATUS_FIELDS: &str = r#"{"f:metadata":{"f:annotations":{"f:deployment.kubernetes.io/revision":{}}},"f:status":{"f:availableReplicas":{},"f:conditions":{".":{},"k:{\"type\":\"Available\"}":{".":{},"f:lastTransitionTime":{},"f:lastUpdateTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Progressing\"}":{".":{},"f:lastTransitionTime":{},"f:lastUpdateTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:observedGeneration":{},"f:readyReplicas":{},"f:replicas":{},"f:updatedReplicas":{}}}"#;

fn parse(text: &str) -> FieldSet {
    let value: Value = serde_json::from_str(text).expect("valid JSON");
    FieldSet::from_fields_v1(&value).expect("valid fieldsV1")
}

fn set_of(paths: &[&[PathElement]]) -> FieldSet {
    let mut set = FieldSet::default();
    for path in paths {
        set.insert(path);
    }
    set
}

fn f(name: &str) -> PathElement {
    PathElement::Field(name.to_owned())
}

fn k(name: &str, value: Value) -> PathElement {
    PathElement::key(vec![(name.to_owned(), value)])
}

#[test]
fn fields_v1_round_trips_byte_for_byte() {
    for text in [KUBECTL_FIELDS, STATUS_FIELDS] {
        let set = parse(text);
        let encoded = serde_json::to_string(&set.to_fields_v1()).expect("serialises");
        assert_eq!(encoded, text);
        assert_eq!(
            FieldSet::from_fields_v1(&set.to_fields_v1()).expect("re-parses"),
            set
        );
    }
}

#[test]
fn fields_v1_members_and_paths() {
    let set = parse(KUBECTL_FIELDS);
    let paths = set.paths();
    for expected in [
        ".metadata.labels",
        ".metadata.labels.app",
        ".metadata.annotations.kubectl.kubernetes.io/last-applied-configuration",
        ".spec.replicas",
        ".spec.selector",
        r#".spec.template.spec.containers[name="nginx"]"#,
        r#".spec.template.spec.containers[name="nginx"].image"#,
        r#".spec.template.spec.containers[name="nginx"].ports[containerPort=80,protocol="TCP"].protocol"#,
    ] {
        assert!(
            paths.iter().any(|path| path == expected),
            "{expected} missing from {paths:#?}"
        );
    }
    // `.spec` and `.spec.template` are not members: they only hold members.
    assert!(
        !paths
            .iter()
            .any(|path| path == ".spec" || path == ".spec.template")
    );
    assert_eq!(set.len(), paths.len());
    assert_eq!(paths.len(), 30);
}

#[test]
fn path_elements_sort_as_structured_merge_diff_does() {
    let set = set_of(&[
        &[f("ports"), k("port", json!(10))],
        &[f("ports"), k("port", json!(9))],
        &[f("ports"), PathElement::Index(1)],
        &[f("ports"), PathElement::Value(json!("v"))],
        &[f("ports"), f("zzz")],
    ]);
    let encoded = serde_json::to_string(&set.to_fields_v1()).expect("serialises");
    assert_eq!(
        encoded,
        r#"{"f:ports":{"f:zzz":{},"k:{\"port\":9}":{},"k:{\"port\":10}":{},"v:\"v\"":{},"i:1":{}}}"#
    );
    // Multi-field keys are written with their fields sorted by name.
    let element = PathElement::key(vec![
        ("protocol".to_owned(), json!("TCP")),
        ("containerPort".to_owned(), json!(80)),
    ]);
    assert_eq!(
        element.encode(),
        r#"k:{"containerPort":80,"protocol":"TCP"}"#
    );
    assert_eq!(element.to_string(), r#"[containerPort=80,protocol="TCP"]"#);
    assert_eq!(
        PathElement::parse(&element.encode()).expect("parses"),
        element
    );
}

#[test]
fn malformed_fields_v1_is_rejected() {
    for bad in [
        json!([]),
        json!({"f:a": []}),
        json!({"x:a": {}}),
        json!({"nonsense": {}}),
        json!({"k:[1]": {}}),
        json!({"k:{}": {}}),
        json!({"i:minus": {}}),
        json!({"v:{not json": {}}),
    ] {
        assert!(FieldSet::from_fields_v1(&bad).is_err(), "{bad}");
    }
}

#[test]
fn set_algebra() {
    let a = set_of(&[
        &[f("spec"), f("replicas")],
        &[f("spec"), f("paused")],
        &[f("metadata"), f("labels"), f("app")],
    ]);
    let b = set_of(&[&[f("spec"), f("replicas")], &[f("data"), f("x")]]);
    assert_eq!(
        a.union(&b).paths(),
        [
            ".data.x",
            ".metadata.labels.app",
            ".spec.paused",
            ".spec.replicas"
        ]
    );
    assert_eq!(a.intersection(&b).paths(), [".spec.replicas"]);
    assert_eq!(
        a.difference(&b).paths(),
        [".metadata.labels.app", ".spec.paused"]
    );
    assert!(a.difference(&a).is_empty());
    assert_eq!(a.difference(&a), FieldSet::default());
    assert!(a.intersection(&FieldSet::default()).is_empty());
    // A node that is a member and has members below keeps both through the algebra.
    let item = [f("containers"), k("name", json!("app"))];
    let image = [f("containers"), k("name", json!("app")), f("image")];
    let both = set_of(&[&item, &image]);
    let only_image = set_of(&[&image]);
    assert_eq!(
        both.difference(&only_image).paths(),
        [r#".containers[name="app"]"#]
    );
    assert!(both.contains(&item) && !only_image.contains(&item));
    assert!(only_image.contains_prefix(&item));
}

fn test_schema() -> Schema {
    Schema::from_openapi(
        &json!({
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "spec": {
                    "type": "object",
                    "properties": {
                        "replicas": {"type": "integer"},
                        "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
                        "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                        "args": {"type": "array", "items": {"type": "string"}},
                        "containers": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {
                                "type": "object",
                                "properties": {
                                    "name": {"type": "string"},
                                    "image": {"type": "string"},
                                    "ports": {
                                        "type": "array",
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                                        "items": {"type": "object", "properties": {"containerPort": {"type": "integer"}, "protocol": {"type": "string"}}}
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }),
        &serde_json::Map::new(),
    )
    .expect("schema compiles")
}

#[test]
fn from_object_lists_leaves_and_keyed_items() {
    let object = json!({
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "x", "namespace": "ns", "uid": "u", "resourceVersion": "1", "labels": {"app": "web"}, "managedFields": [{}]},
        "spec": {
            "replicas": 3,
            "selector": {"app": "web"},
            "finalizers": ["a", "b"],
            "args": ["--x"],
            "containers": [{"name": "app", "image": "app:1", "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
            "empty": {}
        }
    });
    let set = FieldSet::from_object(&object, Some(&test_schema()));
    assert_eq!(
        serde_json::to_string(&set.to_fields_v1()).expect("serialises"),
        concat!(
            r#"{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:args":{},"#,
            r#""f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{},"#,
            r#""f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}}}},"#,
            r#""f:finalizers":{"v:\"a\"":{},"v:\"b\"":{}},"f:replicas":{},"f:selector":{}}}"#
        )
    );
    // Without a schema, lists are atomic leaves and maps recurse.
    let deduced = FieldSet::from_object(&object, None);
    assert_eq!(
        deduced.paths(),
        [
            ".metadata.labels.app",
            ".spec.args",
            ".spec.containers",
            ".spec.finalizers",
            ".spec.replicas",
            ".spec.selector.app"
        ]
    );
}

#[test]
fn from_object_with_the_builtin_deployment_schema() {
    let schema =
        capstan_schema::builtin::schema("apps", "v1", "Deployment").expect("Deployment schema");
    let object = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "finalizers": ["example.com/x"]},
        "spec": {
            "replicas": 1,
            "template": {"spec": {"containers": [{"name": "app", "image": "app:1", "args": ["a"], "env": [{"name": "A", "value": "1"}]}]}}
        }
    });
    let paths = FieldSet::from_object(&object, Some(&schema)).paths();
    assert_eq!(
        paths,
        [
            r#".metadata.finalizers[="example.com/x"]"#,
            ".spec.replicas",
            r#".spec.template.spec.containers[name="app"]"#,
            r#".spec.template.spec.containers[name="app"].args"#,
            r#".spec.template.spec.containers[name="app"].env[name="A"]"#,
            r#".spec.template.spec.containers[name="app"].env[name="A"].name"#,
            r#".spec.template.spec.containers[name="app"].env[name="A"].value"#,
            r#".spec.template.spec.containers[name="app"].image"#,
            r#".spec.template.spec.containers[name="app"].name"#,
        ]
    );
}

#[test]
fn compare_reports_added_modified_and_removed_nodes() {
    let schema = test_schema();
    let old = json!({"metadata": {"name": "x"}, "spec": {"replicas": 1, "finalizers": ["a"], "containers": [{"name": "app", "image": "1"}, {"name": "old", "image": "1"}]}});
    let new = json!({"metadata": {"name": "y", "labels": {"a": "b"}}, "spec": {"replicas": 2, "finalizers": ["a", "b"], "containers": [{"name": "app", "image": "2"}]}});
    let comparison = compare(Some(&old), Some(&new), Some(&schema));
    assert_eq!(
        comparison.added.paths(),
        [
            ".metadata.labels",
            ".metadata.labels.a",
            r#".spec.finalizers[="b"]"#
        ]
    );
    assert_eq!(
        comparison.modified.paths(),
        [r#".spec.containers[name="app"].image"#, ".spec.replicas"]
    );
    assert_eq!(
        comparison.removed.paths(),
        [
            r#".spec.containers[name="old"]"#,
            r#".spec.containers[name="old"].image"#,
            r#".spec.containers[name="old"].name"#
        ]
    );
    // From nothing: every node is added, except `metadata` itself and the ignored fields.
    let created = compare(None, Some(&new), Some(&schema));
    assert_eq!(
        created.added.paths().first().map(String::as_str),
        Some(".metadata.labels")
    );
    assert!(created.added.contains(&[f("spec")]));
    assert!(created.modified.is_empty() && created.removed.is_empty());
}
