//! Expected results were produced with `kubectl patch --local --type strategic` (v1.32) on the
//! same documents, except where a test says otherwise.

use capstan_schema::Schema;
use serde_json::{Value, json};

use crate::{PatchError, strategic_merge};

fn deployment_schema() -> Schema {
    capstan_schema::builtin::schema("apps", "v1", "Deployment").expect("Deployment schema")
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"a": "1", "b": "2"}, "finalizers": ["f1", "f2", "f3"]},
        "spec": {
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "template": {
                "metadata": {"labels": {"x": "y"}},
                "spec": {
                    "containers": [
                        {"name": "a", "image": "a:1", "args": ["x", "y"]},
                        {"name": "b", "image": "b:1"}
                    ]
                }
            }
        }
    })
}

/// Applies `patch` to the test Deployment and returns the value at `pointer`.
fn patched(patch: &Value, pointer: &str) -> Value {
    let schema = deployment_schema();
    let result = strategic_merge(&deployment(), patch, Some(&schema))
        .unwrap_or_else(|error| panic!("{patch}: {error}"));
    result.pointer(pointer).cloned().unwrap_or(Value::Null)
}

fn names(containers: &Value) -> Vec<&str> {
    containers
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item["name"].as_str())
                .collect()
        })
        .unwrap_or_default()
}

const CONTAINERS: &str = "/spec/template/spec/containers";

#[test]
fn directive_table() {
    // (name, patch, pointer, expected)
    let cases: Vec<(&str, Value, &str, Value)> = vec![
        (
            "map merge and null delete",
            json!({"metadata": {"labels": {"b": null, "c": "3"}}}),
            "/metadata/labels",
            json!({"a": "1", "c": "3"}),
        ),
        (
            "$patch: delete on a map leaves an empty map",
            json!({"spec": {"strategy": {"rollingUpdate": {"$patch": "delete"}}}}),
            "/spec/strategy",
            json!({"type": "RollingUpdate", "rollingUpdate": {}}),
        ),
        (
            "$patch: replace on a map",
            json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
            "/metadata/labels",
            json!({"c": "3"}),
        ),
        (
            "$patch: merge on a map is a plain merge",
            json!({"metadata": {"labels": {"$patch": "merge", "c": "3"}}}),
            "/metadata/labels",
            json!({"a": "1", "b": "2", "c": "3"}),
        ),
        (
            "$retainKeys clears unlisted fields",
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
            "/spec/strategy",
            json!({"type": "Recreate"}),
        ),
        (
            "$retainKeys tolerates nulls for cleared fields",
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null}}}),
            "/spec/strategy",
            json!({"type": "Recreate"}),
        ),
        (
            "null removes a whole field",
            json!({"spec": {"strategy": null}}),
            "/spec/strategy",
            Value::Null,
        ),
        (
            "atomic list (args) is replaced",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "args": ["z"]}]}}}}),
            "/spec/template/spec/containers/0/args",
            json!(["z"]),
        ),
        (
            "merging item keeps unpatched fields",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "a:2"}]}}}}),
            "/spec/template/spec/containers/0",
            json!({"name": "a", "image": "a:2", "args": ["x", "y"]}),
        ),
        (
            "$deleteFromPrimitiveList",
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["f2"]}}),
            "/metadata/finalizers",
            json!(["f1", "f3"]),
        ),
        (
            "merging scalars: patch items first, then server-only ones",
            json!({"metadata": {"finalizers": ["c", "f1"]}}),
            "/metadata/finalizers",
            json!(["c", "f1", "f2", "f3"]),
        ),
        (
            "$setElementOrder on scalars",
            json!({"metadata": {"$setElementOrder/finalizers": ["f3", "c", "f1"], "finalizers": ["c"]}}),
            "/metadata/finalizers",
            json!(["f2", "f3", "c", "f1"]),
        ),
        (
            "new nested values lose nulls and directives",
            json!({"spec": {"paused": true, "minReadySeconds": null, "revisionHistoryLimit": 3}}),
            "/spec/paused",
            json!(true),
        ),
    ];
    for (name, patch, pointer, expected) in cases {
        assert_eq!(patched(&patch, pointer), expected, "{name}");
    }
}

#[test]
fn list_orders_match_the_api_server() {
    // (name, patch of the containers' parent, expected container order)
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "new and existing items follow the patch order",
            json!({"containers": [{"name": "c", "image": "c:1"}, {"name": "a", "image": "a:2"}]}),
            vec!["c", "a", "b"],
        ),
        (
            "$patch: delete item",
            json!({"containers": [{"name": "b", "$patch": "delete"}]}),
            vec!["a"],
        ),
        (
            "$patch: replace item",
            json!({"containers": [{"name": "z", "image": "z"}, {"$patch": "replace"}]}),
            vec!["z"],
        ),
        (
            "$setElementOrder puts server items where it says",
            json!({"$setElementOrder/containers": [{"name": "b"}, {"name": "c"}, {"name": "a"}], "containers": [{"name": "c", "image": "c"}]}),
            vec!["b", "c", "a"],
        ),
        (
            "$setElementOrder with an unlisted server item",
            json!({"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}], "containers": [{"name": "c", "image": "c"}]}),
            vec!["c", "a", "b"],
        ),
        (
            "$setElementOrder and a deletion",
            json!({"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}], "containers": [{"name": "c", "image": "c"}, {"name": "b", "$patch": "delete"}]}),
            vec!["c", "a"],
        ),
    ];
    for (name, spec_patch, expected) in cases {
        let patch = json!({"spec": {"template": {"spec": spec_patch}}});
        assert_eq!(names(&patched(&patch, CONTAINERS)), expected, "{name}");
    }
}

/// A patch as `kubectl apply` (client-side) computes it: last-applied annotation, changed
/// scalars, `$setElementOrder` for every merged list, a deleted port, `$retainKeys` on a volume.
#[test]
fn kubectl_client_side_apply_patch() {
    let live = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "finalizers": ["f1", "f2", "f3"],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"old\":true}"}
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "volumes": [{"name": "data", "emptyDir": {}}],
                    "containers": [
                        {"name": "sidecar", "image": "envoy:1"},
                        {
                            "name": "app",
                            "image": "app:1",
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "LIVE", "value": "x"}],
                            "ports": [{"containerPort": 80, "protocol": "TCP"}]
                        }
                    ]
                }
            }
        }
    });
    let patch = json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"new\":true}"}},
        "spec": {
            "replicas": 3,
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
                    "containers": [
                        {
                            "$setElementOrder/env": [{"name": "A"}, {"name": "C"}, {"name": "B"}],
                            "env": [{"name": "C", "value": "3"}, {"name": "B", "value": "22"}],
                            "image": "app:2",
                            "name": "app"
                        },
                        {
                            "$setElementOrder/ports": [{"containerPort": 8080}],
                            "ports": [{"containerPort": 8080}, {"containerPort": 80, "$patch": "delete"}],
                            "name": "sidecar"
                        }
                    ],
                    "volumes": [{"$retainKeys": ["configMap", "name"], "configMap": {"name": "cfg"}, "name": "data"}]
                }
            }
        }
    });
    let expected = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "finalizers": ["f1", "f2", "f3"],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"new\":true}"}
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "volumes": [{"name": "data", "configMap": {"name": "cfg"}}],
                    "containers": [
                        {
                            "name": "app",
                            "image": "app:2",
                            "env": [
                                {"name": "A", "value": "1"},
                                {"name": "C", "value": "3"},
                                {"name": "B", "value": "22"},
                                {"name": "LIVE", "value": "x"}
                            ],
                            "ports": [{"containerPort": 80, "protocol": "TCP"}]
                        },
                        {"name": "sidecar", "image": "envoy:1", "ports": [{"containerPort": 8080}]}
                    ]
                }
            }
        }
    });
    let schema = deployment_schema();
    let result = strategic_merge(&live, &patch, Some(&schema)).expect("patch applies");
    assert_eq!(result, expected);
    // Orders matter and `assert_eq!` on objects ignores none of them for arrays; check the text too.
    assert_eq!(
        serde_json::to_string(&result["spec"]["template"]["spec"]["containers"])
            .expect("serialises"),
        serde_json::to_string(&expected["spec"]["template"]["spec"]["containers"])
            .expect("serialises")
    );
}

#[test]
fn service_ports_merge_by_the_patch_merge_key() {
    let schema = capstan_schema::builtin::schema("", "v1", "Service").expect("Service schema");
    let live = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}, {"port": 443, "protocol": "TCP"}]}});
    let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}});
    let result = strategic_merge(&live, &patch, Some(&schema)).expect("patch applies");
    assert_eq!(
        result["spec"]["ports"],
        json!([{"port": 80, "protocol": "TCP", "targetPort": 9090}, {"port": 443, "protocol": "TCP"}])
    );
}

#[test]
fn without_a_schema_lists_are_replaced_and_maps_merged() {
    let live = json!({"spec": {"items": [{"name": "a"}, {"name": "b"}], "map": {"x": 1, "y": 2}}});
    let patch = json!({"spec": {"items": [{"name": "c"}], "map": {"y": null, "z": 3}}});
    let expected = json!({"spec": {"items": [{"name": "c"}], "map": {"x": 1, "z": 3}}});
    assert_eq!(
        strategic_merge(&live, &patch, None).expect("patch applies"),
        expected
    );
    let any = Schema::any();
    assert_eq!(
        strategic_merge(&live, &patch, Some(&any)).expect("patch applies"),
        expected
    );
}

#[test]
fn patch_strategy_replace_and_list_types_from_a_hand_written_schema() {
    let schema = Schema::from_openapi(
        &json!({
            "type": "object",
            "properties": {
                "replaced": {
                    "type": "object",
                    "x-kubernetes-patch-strategy": "replace",
                    "additionalProperties": {"type": "string"}
                },
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "items": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["id"],
                    "items": {"type": "object", "properties": {"id": {"type": "integer"}, "v": {"type": "string"}}}
                },
                "atomic": {"type": "array", "items": {"type": "string"}}
            }
        }),
        &serde_json::Map::new(),
    )
    .expect("schema compiles");
    let live = json!({"replaced": {"a": "1"}, "tags": ["x", "y"], "items": [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], "atomic": ["p"]});
    let patch = json!({"replaced": {"b": "2"}, "tags": ["y", "z"], "items": [{"id": 2, "v": "c"}, {"id": 3}], "atomic": ["q"]});
    let result = strategic_merge(&live, &patch, Some(&schema)).expect("patch applies");
    assert_eq!(
        result,
        json!({"replaced": {"b": "2"}, "tags": ["x", "y", "z"], "items": [{"id": 1, "v": "a"}, {"id": 2, "v": "c"}, {"id": 3}], "atomic": ["q"]})
    );
}

#[test]
fn malformed_patches_are_rejected() {
    let schema = deployment_schema();
    let cases: Vec<(&str, Value, Value)> = vec![
        ("patch not an object", deployment(), json!([1])),
        ("original not an object", json!("x"), json!({})),
        (
            "field missing from $retainKeys",
            deployment(),
            json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 2}}}}),
        ),
        (
            "$retainKeys not a list",
            deployment(),
            json!({"spec": {"strategy": {"$retainKeys": "type"}}}),
        ),
        (
            "unknown $patch",
            deployment(),
            json!({"metadata": {"labels": {"$patch": "frobnicate"}}}),
        ),
        (
            "item without merge key",
            deployment(),
            json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}),
        ),
        (
            "patch order contradicts $setElementOrder",
            deployment(),
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                "containers": [{"name": "b", "image": "1"}, {"name": "a", "image": "2"}]
            }}}}),
        ),
        (
            "mixed element types",
            deployment(),
            json!({"metadata": {"finalizers": [{"name": "x"}]}}),
        ),
        (
            "$setElementOrder not a list",
            deployment(),
            json!({"metadata": {"$setElementOrder/finalizers": "x"}}),
        ),
    ];
    for (name, original, patch) in cases {
        let result = strategic_merge(&original, &patch, Some(&schema));
        assert!(
            matches!(result, Err(PatchError::Invalid(_))),
            "{name}: {result:?}"
        );
    }
}

#[test]
fn original_is_not_modified_and_null_original_is_empty() {
    let schema = deployment_schema();
    let original = deployment();
    let copy = original.clone();
    let _ = strategic_merge(&original, &json!({"spec": {"replicas": 9}}), Some(&schema))
        .expect("patch applies");
    assert_eq!(original, copy);
    assert_eq!(
        strategic_merge(&Value::Null, &json!({"a": {"b": null, "c": 1}}), None)
            .expect("patch applies"),
        json!({"a": {"c": 1}})
    );
}
