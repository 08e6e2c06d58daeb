use serde_json::{Map, Value, json};

use super::*;

fn compile(schema: &Value) -> Schema {
    Schema::from_openapi(schema, &Map::new()).expect("schema compiles")
}

fn with_definitions(schema: &Value, definitions: &Value) -> Schema {
    Schema::from_openapi(schema, definitions.as_object().expect("object")).expect("schema compiles")
}

fn fields(errors: &[FieldError]) -> Vec<&str> {
    errors.iter().map(|e| e.field.as_str()).collect()
}

/// A recursive definition set in the style schemars emits (allOf wrappers, refs with siblings).
fn recursive_definitions() -> Value {
    json!({
        "Node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
                "parent": {"allOf": [{"$ref": "#/components/schemas/Node"}], "description": "up"},
                "strategy": {
                    "$ref": "#/definitions/Strategy",
                    "description": "how",
                    "x-kubernetes-patch-strategy": "retainKeys",
                },
            },
        },
        "Strategy": {
            "type": "object",
            "properties": {"type": {"type": "string", "enum": ["A", "B"]}},
            "x-kubernetes-map-type": "atomic",
        },
    })
}

#[test]
fn resolves_refs_wrappers_and_recursion() {
    let root = with_definitions(
        &json!({"$ref": "#/components/schemas/Node"}),
        &recursive_definitions(),
    );
    assert_eq!(root.definition_name(), Some("Node"));
    let mut node = root.clone();
    for _ in 0..50 {
        node = node
            .property("children")
            .and_then(|c| c.items())
            .expect("children items");
    }
    assert!(node.property("name").is_some());
    let parent = root.property("parent").expect("allOf wrapper resolves");
    assert_eq!(parent.definition_name(), Some("Node"));
    assert!(
        parent
            .property("parent")
            .and_then(|p| p.property("name"))
            .is_some()
    );
    assert_eq!(
        root.property_names().collect::<Vec<_>>(),
        ["children", "name", "parent", "strategy"]
    );
}

#[test]
fn ref_siblings_overlay_the_target() {
    let root = with_definitions(
        &json!({"$ref": "#/definitions/Node"}),
        &recursive_definitions(),
    );
    let strategy = root.property("strategy").expect("strategy");
    assert_eq!(strategy.patch_strategy().as_deref(), Some("retainKeys"));
    assert_eq!(
        strategy.map_type(),
        MapType::Atomic,
        "target's extensions are kept"
    );
    assert!(strategy.property("type").is_some());
    let plain = with_definitions(
        &json!({"$ref": "#/definitions/Strategy"}),
        &recursive_definitions(),
    );
    assert_eq!(
        plain.patch_strategy(),
        None,
        "the overlay does not leak into the target"
    );
}

#[test]
fn unresolved_and_invalid_schemas_are_errors() {
    let error = Schema::from_openapi(
        &json!({"$ref": "#/components/schemas/Missing"}),
        &Map::new(),
    )
    .unwrap_err();
    assert!(matches!(&error, SchemaError::UnresolvedRef(r) if r == "#/components/schemas/Missing"));
    assert_eq!(
        error.to_string(),
        "unresolved reference #/components/schemas/Missing"
    );
    let error = Schema::from_openapi(
        &json!({"properties": {"a": {"type": "string", "pattern": "("}}}),
        &Map::new(),
    )
    .unwrap_err();
    assert!(
        matches!(&error, SchemaError::Invalid { path, .. } if path == "#/properties/a/pattern"),
        "{error}"
    );
    let error = Schema::from_openapi(&json!({"type": "text"}), &Map::new()).unwrap_err();
    assert!(error.to_string().contains("unknown type"), "{error}");
}

#[test]
fn child_falls_back_to_additional_properties_then_preserve() {
    let schema = compile(&json!({
        "type": "object",
        "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "closed": {"type": "object", "properties": {"a": {"type": "string"}}},
        },
    }));
    let labels = schema.child("labels").expect("labels");
    assert!(
        labels
            .child("app")
            .is_some_and(|s| !s.preserves_unknown_fields())
    );
    let free = schema.child("free").expect("free");
    let anything = free.child("whatever").expect("preserved");
    assert!(anything.preserves_unknown_fields());
    assert!(anything.child("deeper").is_some());
    assert!(anything.items().is_some());
    assert!(schema.child("closed").and_then(|c| c.child("b")).is_none());
    assert!(schema.child("missing").is_none());
    assert!(Schema::any().child("x").is_some());
}

#[test]
fn list_type_from_extensions_and_patch_strategy() {
    let schema = compile(&json!({
        "type": "object",
        "properties": {
            "map": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["port", "protocol"],
                    "items": {"type": "object"}},
            "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "atomic": {"type": "array", "x-kubernetes-list-type": "atomic",
                       "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "type",
                       "items": {"type": "object"}},
            "merged": {"type": "array", "x-kubernetes-patch-strategy": "merge,retainKeys",
                       "x-kubernetes-patch-merge-key": "name", "items": {"type": "object"}},
            "scalars": {"type": "array", "x-kubernetes-patch-strategy": "merge", "items": {"type": "string"}},
            "plain": {"type": "array", "items": {"type": "string"}},
        },
    }));
    let list = |name: &str| schema.property(name).expect(name).list_type();
    assert_eq!(
        list("map"),
        ListType::Map(vec!["port".into(), "protocol".into()])
    );
    assert_eq!(list("set"), ListType::Set);
    assert_eq!(list("atomic"), ListType::Atomic);
    assert_eq!(list("merged"), ListType::Map(vec!["name".into()]));
    assert_eq!(list("scalars"), ListType::Set);
    assert_eq!(list("plain"), ListType::Atomic);
    let merged = schema.property("merged").expect("merged");
    assert_eq!(merged.patch_strategy().as_deref(), Some("merge,retainKeys"));
    assert_eq!(merged.patch_merge_key().as_deref(), Some("name"));
    assert_eq!(schema.map_type(), MapType::Granular);
}

fn deployment_like() -> Schema {
    compile(&json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["containers"],
                "properties": {
                    "replicas": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 10},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "name": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 5},
                    "port": {"x-kubernetes-int-or-string": true},
                    "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0, "multipleOf": 0.5},
                    "note": {"type": "string", "nullable": true},
                    "created": {"type": "string", "format": "date-time"},
                    "blob": {"type": "string", "format": "byte"},
                    "tags": {"type": "array", "maxItems": 2, "minItems": 1,
                             "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "containers": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {"name": {"type": "string"}, "image": {"type": "string"}},
                        },
                    },
                    "data": {"type": "object", "maxProperties": 1,
                             "additionalProperties": {"type": "string"}},
                    "closed": {"type": "object", "additionalProperties": false,
                               "properties": {"a": {"type": "string"}}},
                },
            },
        },
    }))
}

#[test]
fn valid_value_has_no_errors() {
    let value = json!({"spec": {
        "replicas": 3, "mode": "a", "name": "web", "port": "http", "ratio": 1.5, "note": null,
        "created": "2024-05-01T10:00:00Z", "blob": "aGVsbG8=", "tags": ["x"],
        "containers": [{"name": "a", "image": "nginx"}, {"name": "b"}],
        "data": {"k": "v"}, "closed": {"a": "x"},
    }});
    assert_eq!(deployment_like().validate(&value), []);
    let port = json!({"spec": {"containers": [], "port": 8080}});
    assert_eq!(deployment_like().validate(&port), []);
}

#[test]
fn type_errors_read_like_kubernetes() {
    let errors =
        deployment_like().validate(&json!({"spec": {"replicas": "string", "containers": []}}));
    assert_eq!(
        errors,
        [FieldError {
            field: "spec.replicas".into(),
            kind: FieldErrorKind::Invalid,
            message: r#"Invalid value: "string": spec.replicas in body must be of type integer: "string""#.into(),
        }]
    );
    assert_eq!(
        errors[0].to_string(),
        r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
    );
    let errors = deployment_like().validate(&json!({"spec": {"containers": [], "port": true}}));
    assert_eq!(
        errors[0].message,
        r#"Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#
    );
    let errors = deployment_like().validate(&json!("text"));
    assert_eq!(errors[0].field, "");
    assert_eq!(
        errors[0].message,
        r#"Invalid value: "string": body must be of type object: "string""#
    );
}

#[test]
fn reports_each_constraint_at_its_path() {
    let value = json!({"spec": {
        "replicas": 11, "mode": "c", "name": "Web-Server", "ratio": 0.0,
        "created": "yesterday", "blob": "not base64!", "tags": ["x", "y", "x"],
        "containers": [{"name": "a"}, {"image": "nginx"}, {"name": "a"}],
        "data": {"k": "v", "l": 1}, "closed": {"b": "x"},
    }});
    let errors = deployment_like().validate(&value);
    let find = |field: &str| {
        errors
            .iter()
            .filter(|e| e.field == field)
            .map(|e| (e.kind, e.message.as_str()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        find("spec.replicas"),
        [(
            FieldErrorKind::Invalid,
            "Invalid value: 11: spec.replicas in body should be less than or equal to 10"
        )]
    );
    assert_eq!(
        find("spec.mode"),
        [(
            FieldErrorKind::NotSupported,
            r#"Unsupported value: "c": supported values: "a", "b""#
        )]
    );
    assert_eq!(
        find("spec.name"),
        [
            (
                FieldErrorKind::Invalid,
                r#"Invalid value: "Web-Server": spec.name in body should match '^[a-z]+$'"#
            ),
            (
                FieldErrorKind::TooLong,
                "Too long: may not be longer than 5"
            ),
        ]
    );
    assert_eq!(
        find("spec.ratio"),
        [(
            FieldErrorKind::Invalid,
            "Invalid value: 0.0: spec.ratio in body should be greater than 0"
        )]
    );
    assert_eq!(
        find("spec.created")[0].1,
        r#"Invalid value: "yesterday": spec.created in body must be of type date-time: "yesterday""#
    );
    assert_eq!(find("spec.blob").len(), 1);
    assert_eq!(
        find("spec.tags"),
        [(
            FieldErrorKind::TooMany,
            "Too many: 3: must have at most 2 items"
        )]
    );
    assert_eq!(
        find("spec.tags[2]"),
        [(FieldErrorKind::Invalid, r#"Duplicate value: "x""#)]
    );
    assert_eq!(
        find("spec.containers[1].name"),
        [(FieldErrorKind::Required, "Required value")]
    );
    assert_eq!(
        find("spec.containers[2]"),
        [(FieldErrorKind::Invalid, r#"Duplicate value: {"name":"a"}"#)]
    );
    assert_eq!(find("spec.data[l]")[0].0, FieldErrorKind::Invalid);
    assert_eq!(
        find("spec.data"),
        [(
            FieldErrorKind::TooMany,
            "Too many: 2: must have at most 1 items"
        )]
    );
    assert_eq!(
        find("spec.closed.b"),
        [(
            FieldErrorKind::Forbidden,
            "Forbidden: spec.closed.b in body is a forbidden property"
        )]
    );
    assert_eq!(errors.len(), 14, "{errors:#?}");
}

#[test]
fn required_nulls_and_nullable() {
    let errors = deployment_like().validate(&json!({"spec": {"replicas": null, "note": null}}));
    assert_eq!(fields(&errors), ["spec.containers"]);
    assert_eq!(errors[0].kind, FieldErrorKind::Required);
    let errors = deployment_like().validate(&json!({"spec": {"containers": null}}));
    assert_eq!(
        fields(&errors),
        ["spec.containers"],
        "a non-nullable null counts as absent"
    );
    let errors = deployment_like().validate(&json!({"spec": {"containers": [null]}}));
    assert_eq!(
        errors[0].message,
        r#"Invalid value: "null": spec.containers[0] in body must be of type object: "null""#
    );
}

#[test]
fn int32_format_and_integral_floats() {
    let schema = compile(&json!({"type": "integer", "format": "int32"}));
    assert_eq!(schema.validate(&json!(2)), []);
    assert_eq!(
        schema.validate(&json!(2.0)),
        [],
        "a whole float is an integer"
    );
    assert_eq!(schema.validate(&json!(5_000_000_000_i64)).len(), 1);
    assert_eq!(
        schema.validate(&json!(2.5))[0].message,
        r#"Invalid value: "number": body must be of type integer: "number""#
    );
}

#[test]
fn junctors_validate_values() {
    let schema = compile(&json!({
        "type": "object",
        "properties": {
            "one": {"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]},
            "any": {"type": "integer", "anyOf": [{"minimum": 10}, {"maximum": 0}]},
            "all": {"type": "string", "allOf": [{"minLength": 2}, {"pattern": "^x"}]},
            "not": {"type": "string", "not": {"enum": ["forbidden"]}},
        },
    }));
    assert_eq!(
        schema.validate(&json!({"one": "ax", "any": 11, "all": "xy", "not": "ok"})),
        []
    );
    let errors = schema.validate(&json!({"one": "ab", "any": 5, "all": "y", "not": "forbidden"}));
    assert_eq!(fields(&errors), ["one", "any", "all", "all", "not"]);
    assert!(
        errors[0]
            .message
            .ends_with("must validate one and only one schema (oneOf)")
    );
    assert!(
        errors[1]
            .message
            .ends_with("must validate at least one schema (anyOf)")
    );
    assert!(
        errors[4]
            .message
            .ends_with("should not validate the given schema")
    );
}

#[test]
fn embedded_resources_need_api_version_and_kind() {
    let schema = compile(&json!({
        "type": "object",
        "properties": {"template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                     "x-kubernetes-preserve-unknown-fields": true}},
    }));
    let errors = schema.validate(&json!({"template": {"kind": "", "metadata": {}}}));
    assert_eq!(fields(&errors), ["template.apiVersion", "template.kind"]);
    assert_eq!(errors[0].message, "Required value: must not be empty");
    assert_eq!(
        schema.validate(&json!({"template": {"apiVersion": "v1", "kind": "Pod"}})),
        []
    );
}

fn crd_like() -> Schema {
    compile(&json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "properties": {
                    "interval": {"type": "string", "default": "5m"},
                    "suspend": {"type": "boolean", "default": false},
                    "note": {"type": "string", "nullable": true, "default": "n"},
                    "items": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "weight": {"type": "integer", "default": 1}},
                    }},
                    "byName": {"type": "object", "additionalProperties": {
                        "type": "object",
                        "properties": {"enabled": {"type": "boolean", "default": true}},
                    }},
                    "values": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                               "properties": {"known": {"type": "object",
                                                        "properties": {"a": {"type": "string"}}}}},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                 "properties": {"spec": {"type": "object",
                                                         "properties": {"x": {"type": "string"}}}}},
                    "gone": {"type": "string"},
                    "kept": {"type": "string", "default": "d"},
                },
            },
        },
    }))
}

#[test]
fn defaults_fill_missing_fields_recursively() {
    let mut value = json!({"spec": {
        "suspend": true, "note": null,
        "items": [{"name": "a"}, {"name": "b", "weight": 5}],
        "byName": {"x": {}, "y": {"enabled": false}},
    }});
    crd_like().apply_defaults(&mut value);
    assert_eq!(
        value,
        json!({"spec": {
            "suspend": true, "note": null,
            "items": [{"name": "a", "weight": 1}, {"name": "b", "weight": 5}],
            "byName": {"x": {"enabled": true}, "y": {"enabled": false}},
            "interval": "5m", "kept": "d",
        }})
    );
    let mut empty = json!({});
    crd_like().apply_defaults(&mut empty);
    assert_eq!(empty, json!({}), "defaults apply to present objects only");
}

#[test]
fn prune_removes_unknown_fields_and_reports_paths() {
    let mut value = json!({
        "apiVersion": "example.com/v1", "kind": "Thing",
        "metadata": {"name": "t", "labels": {"a": "b"}, "bogus": 1},
        "spec": {
            "interval": "1m", "foo": 1, "gone": null, "kept": null,
            "items": [{"name": "a", "extra": true}],
            "byName": {"x": {"enabled": true, "junk": 1}},
            "values": {"anything": {"deep": [1]}, "known": {"a": "x", "b": "y"}},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                         "spec": {"x": "1", "y": "2"}, "status": {}},
        },
        "status": {"phase": "x"},
    });
    let pruned = crd_like().prune(&mut value);
    assert_eq!(
        pruned,
        [
            "metadata.bogus",
            "spec.foo",
            "spec.items[0].extra",
            "spec.byName[x].junk",
            "spec.values.known.b",
            "spec.template.spec.y",
            "spec.template.status",
            "status",
        ]
    );
    assert_eq!(
        value,
        json!({
            "apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": "t", "labels": {"a": "b"}},
            "spec": {
                "interval": "1m", "kept": null,
                "items": [{"name": "a"}],
                "byName": {"x": {"enabled": true}},
                "values": {"anything": {"deep": [1]}, "known": {"a": "x"}},
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                             "spec": {"x": "1"}},
            },
        })
    );
    crd_like().apply_defaults(&mut value);
    assert_eq!(
        value["spec"]["kept"], "d",
        "a defaulted null survives pruning and is defaulted"
    );
}

#[test]
fn any_accepts_and_keeps_everything() {
    let mut value = json!({"a": [1, {"b": null}], "c": "d"});
    let original = value.clone();
    assert_eq!(Schema::any().validate(&value), []);
    assert_eq!(Schema::any().prune(&mut value), Vec::<String>::new());
    assert_eq!(value, original);
}

#[test]
fn draft2020_type_arrays_and_const() {
    let schema = compile(&json!({"type": ["string", "null"], "const": "x"}));
    assert_eq!(schema.validate(&json!(null)), []);
    assert_eq!(schema.validate(&json!("x")), []);
    assert_eq!(
        schema.validate(&json!("y"))[0].kind,
        FieldErrorKind::NotSupported
    );
}

#[test]
fn schemas_are_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Schema>();
    assert_send_sync::<FieldError>();
}

#[test]
fn int_or_string_rejects_decimals() {
    let schema = compile(&json!({"x-kubernetes-int-or-string": true, "type": "string"}));
    assert_eq!(schema.validate(&json!(3)), []);
    assert_eq!(schema.validate(&json!("3")), []);
    assert_eq!(schema.validate(&json!(1.5)).len(), 1);
    let v2 = compile(&json!({"type": "string", "format": "int-or-string"}));
    assert!(v2.is_int_or_string());
    assert_eq!(v2.validate(&json!(3)), []);
}

#[test]
fn ref_with_direct_all_of_keeps_value_validations() {
    let definitions = json!({"Name": {"type": "string"}});
    let schema = with_definitions(
        &json!({"$ref": "#/definitions/Name", "allOf": [{"minLength": 3}]}),
        &definitions,
    );
    assert_eq!(schema.validate(&json!("abcd")), []);
    assert_eq!(schema.validate(&json!("ab")).len(), 1);
    assert_eq!(schema.validate(&json!(5)).len(), 1);
}
