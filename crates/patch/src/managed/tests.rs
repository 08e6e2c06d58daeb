//! Server-side apply and update bookkeeping tests.

use capstan_schema::Schema;
use serde_json::{Value, json};

use super::{
    ApplyError, Conflict, WriteContext, apply, conflict_message, managed_fields, record_update,
};

const T1: &str = "2026-01-01T10:00:00Z";
const T2: &str = "2026-01-01T11:00:00Z";
const T3: &str = "2026-01-01T12:00:00Z";

fn schema() -> Schema {
    capstan_schema::builtin::schema("apps", "v1", "Deployment").expect("Deployment schema")
}

fn ctx<'a>(manager: &'a str, now: &'a str) -> WriteContext<'a> {
    WriteContext {
        manager,
        api_version: "apps/v1",
        subresource: None,
        now,
    }
}

fn deployment(replicas: u32, labels: &Value, containers: &Value) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}}
        }
    })
}

fn app() -> Value {
    json!([{"name": "app", "image": "app:1"}])
}

fn do_apply(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    now: &str,
    force: bool,
) -> Result<Value, ApplyError> {
    apply(live, config, &ctx(manager, now), force, Some(&schema()))
}

/// (manager, operation, paths) of every entry, in order.
fn owners(object: &Value) -> Vec<(String, String, Vec<String>)> {
    managed_fields(object)
        .into_iter()
        .map(|(entry, set)| (entry.manager, entry.operation, set.paths()))
        .collect()
}

fn paths_of(object: &Value, manager: &str) -> Vec<String> {
    owners(object)
        .into_iter()
        .find(|(name, _, _)| name == manager)
        .map(|(_, _, paths)| paths)
        .unwrap_or_default()
}

#[test]
fn create_records_one_apply_entry() {
    let config = deployment(1, &json!({"app": "web"}), &app());
    let created = do_apply(None, &config, "flux", T1, false).expect("applies");
    let entries = &created["metadata"]["managedFields"];
    assert_eq!(entries.as_array().map(Vec::len), Some(1));
    let entry = &entries[0];
    assert_eq!(entry["manager"], "flux");
    assert_eq!(entry["operation"], "Apply");
    assert_eq!(entry["apiVersion"], "apps/v1");
    assert_eq!(entry["time"], T1);
    assert_eq!(entry["fieldsType"], "FieldsV1");
    assert!(entry.get("subresource").is_none());
    let mut without = created.clone();
    without["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("managedFields");
    assert_eq!(without, config);
    assert!(paths_of(&created, "flux").contains(&".spec.replicas".to_owned()));
    assert!(
        paths_of(&created, "flux")
            .contains(&r#".spec.template.spec.containers[name="app"].image"#.to_owned())
    );
    assert!(
        !paths_of(&created, "flux")
            .iter()
            .any(|path| path.starts_with(".metadata.name") || path == ".kind")
    );
}

#[test]
fn repeated_identical_apply_returns_a_byte_identical_object() {
    let config = deployment(1, &json!({"app": "web"}), &app());
    let first = do_apply(None, &config, "flux", T1, false).expect("applies");
    let second = do_apply(Some(&first), &config, "flux", T2, false).expect("applies");
    assert_eq!(
        serde_json::to_string(&second).expect("json"),
        serde_json::to_string(&first).expect("json")
    );
    // A change moves the time.
    let changed = deployment(2, &json!({"app": "web"}), &app());
    let third = do_apply(Some(&second), &changed, "flux", T3, false).expect("applies");
    assert_eq!(third["metadata"]["managedFields"][0]["time"], T3);
    assert_eq!(third["spec"]["replicas"], 2);
}

#[test]
fn conflicts_with_another_manager_are_listed_and_force_moves_ownership() {
    let config = deployment(1, &json!({"app": "web"}), &app());
    let created = do_apply(None, &config, "flux", T1, false).expect("applies");
    // `kubectl scale` (an Update) takes `.spec.replicas`.
    let mut scaled = created.clone();
    scaled["spec"]["replicas"] = json!(5);
    let scaled = record_update(
        Some(&created),
        &scaled,
        &ctx("kubectl", T2),
        Some(&schema()),
    );
    assert_eq!(paths_of(&scaled, "kubectl"), [".spec.replicas"]);
    assert!(!paths_of(&scaled, "flux").contains(&".spec.replicas".to_owned()));

    // Re-applying replicas: 1 conflicts with kubectl.
    let error = do_apply(Some(&scaled), &config, "flux", T3, false).expect_err("conflicts");
    let ApplyError::Conflicts(conflicts) = error else {
        panic!("expected conflicts, got {error:?}");
    };
    assert_eq!(
        conflicts,
        [Conflict {
            manager: "kubectl".to_owned(),
            field: ".spec.replicas".to_owned()
        }]
    );
    assert_eq!(
        conflict_message(&conflicts),
        r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#
    );

    // Applying the live value is not a conflict: ownership is shared.
    let shared = do_apply(
        Some(&scaled),
        &deployment(5, &json!({"app": "web"}), &app()),
        "flux",
        T3,
        false,
    )
    .expect("applies");
    assert_eq!(paths_of(&shared, "kubectl"), [".spec.replicas"]);
    assert!(paths_of(&shared, "flux").contains(&".spec.replicas".to_owned()));

    // Force takes the field.
    let forced = do_apply(Some(&scaled), &config, "flux", T3, true).expect("forced apply");
    assert_eq!(forced["spec"]["replicas"], 1);
    assert!(paths_of(&forced, "flux").contains(&".spec.replicas".to_owned()));
    // kubectl owned nothing else: its entry is gone.
    assert_eq!(owners(&forced).len(), 1);
}

#[test]
fn conflicts_with_another_applier_on_list_items() {
    let flux = deployment(1, &json!({"app": "web"}), &app());
    let created = do_apply(None, &flux, "flux", T1, false).expect("applies");
    let other = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}
    });
    let ApplyError::Conflicts(conflicts) =
        do_apply(Some(&created), &other, "other", T2, false).expect_err("conflicts")
    else {
        panic!("expected conflicts");
    };
    assert_eq!(
        conflicts,
        [Conflict {
            manager: "flux".to_owned(),
            field: r#".spec.template.spec.containers[name="app"].image"#.to_owned()
        }]
    );
    let message = conflict_message(&[
        Conflict {
            manager: "b".to_owned(),
            field: ".x".to_owned(),
        },
        Conflict {
            manager: "a".to_owned(),
            field: ".y".to_owned(),
        },
    ]);
    assert_eq!(
        message,
        "Apply failed with 2 conflicts: conflicts with \"a\":\n- .y\nconflicts with \"b\":\n- .x"
    );
}

#[test]
fn fields_no_longer_applied_are_removed_unless_someone_else_owns_them() {
    let first = deployment(
        1,
        &json!({"app": "web", "tier": "front", "team": "a"}),
        &app(),
    );
    let created = do_apply(None, &first, "flux", T1, false).expect("applies");
    // Another manager co-owns `team` by applying the same value.
    let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"team": "a"}}});
    let shared = do_apply(Some(&created), &other, "other", T2, false).expect("applies");

    let second = deployment(1, &json!({"app": "web"}), &app());
    let pruned = do_apply(Some(&shared), &second, "flux", T3, false).expect("applies");
    assert_eq!(
        pruned["metadata"]["labels"],
        json!({"app": "web", "team": "a"})
    );
    assert!(!paths_of(&pruned, "flux").contains(&".metadata.labels.team".to_owned()));
    assert_eq!(paths_of(&pruned, "other"), [".metadata.labels.team"]);
}

#[test]
fn list_map_items_are_owned_and_removed_by_key() {
    let two = json!([{"name": "app", "image": "app:1"}, {"name": "sidecar", "image": "envoy:1", "args": ["-v"]}]);
    let created = do_apply(
        None,
        &deployment(1, &json!({"app": "web"}), &two),
        "flux",
        T1,
        false,
    )
    .expect("applies");
    let flux_paths = paths_of(&created, "flux");
    assert!(flux_paths.contains(&r#".spec.template.spec.containers[name="sidecar"]"#.to_owned()));
    assert!(
        flux_paths.contains(&r#".spec.template.spec.containers[name="sidecar"].args"#.to_owned())
    );

    // Dropping the sidecar removes the whole item.
    let one = do_apply(
        Some(&created),
        &deployment(1, &json!({"app": "web"}), &app()),
        "flux",
        T2,
        false,
    )
    .expect("applies");
    assert_eq!(one["spec"]["template"]["spec"]["containers"], app());

    // If another manager owns part of the item, the item stays with what is still owned.
    let other = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "envoy:1"}]}}}
    });
    let shared = do_apply(Some(&created), &other, "other", T2, false).expect("applies");
    let kept = do_apply(
        Some(&shared),
        &deployment(1, &json!({"app": "web"}), &app()),
        "flux",
        T3,
        false,
    )
    .expect("applies");
    assert_eq!(
        kept["spec"]["template"]["spec"]["containers"],
        json!([{"name": "app", "image": "app:1"}, {"name": "sidecar", "image": "envoy:1"}])
    );

    // New items are appended after live ones; existing items merge in place.
    let reordered =
        json!([{"name": "init", "image": "busybox"}, {"name": "app", "image": "app:2"}]);
    let merged = do_apply(
        Some(&one),
        &deployment(1, &json!({"app": "web"}), &reordered),
        "flux",
        T3,
        false,
    )
    .expect("applies");
    assert_eq!(
        merged["spec"]["template"]["spec"]["containers"],
        json!([{"name": "app", "image": "app:2"}, {"name": "init", "image": "busybox"}])
    );
}

#[test]
fn set_lists_union_and_prune_their_own_values() {
    let with_finalizers = |values: Value| json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "finalizers": values}});
    let created =
        do_apply(None, &with_finalizers(json!(["a", "b"])), "flux", T1, false).expect("applies");
    assert_eq!(
        paths_of(&created, "flux"),
        [
            r#".metadata.finalizers[="a"]"#,
            r#".metadata.finalizers[="b"]"#
        ]
    );
    // A controller adds its own finalizer through an update.
    let mut updated = created.clone();
    updated["metadata"]["finalizers"] = json!(["a", "b", "c"]);
    let updated = record_update(
        Some(&created),
        &updated,
        &ctx("controller", T2),
        Some(&schema()),
    );
    assert_eq!(
        paths_of(&updated, "controller"),
        [r#".metadata.finalizers[="c"]"#]
    );
    // Flux now applies only `a`: `b` goes, `c` (someone else's) stays.
    let applied = do_apply(
        Some(&updated),
        &with_finalizers(json!(["a", "d"])),
        "flux",
        T3,
        false,
    )
    .expect("applies");
    assert_eq!(applied["metadata"]["finalizers"], json!(["a", "c", "d"]));
}

#[test]
fn managed_fields_in_the_configuration_are_rejected_unless_empty() {
    let mut config = deployment(1, &json!({"app": "web"}), &app());
    config["metadata"]["managedFields"] =
        json!([{"manager": "x", "operation": "Apply", "apiVersion": "v1"}]);
    assert!(matches!(
        do_apply(None, &config, "flux", T1, false),
        Err(ApplyError::Invalid(_))
    ));
    config["metadata"]["managedFields"] = json!([]);
    let created = do_apply(None, &config, "flux", T1, false).expect("empty managedFields is fine");
    assert_eq!(owners(&created).len(), 1);
    assert!(matches!(
        do_apply(None, &json!([1]), "flux", T1, false),
        Err(ApplyError::Invalid(_))
    ));
    assert!(matches!(
        do_apply(Some(&json!("x")), &config, "flux", T1, false),
        Err(ApplyError::Invalid(_))
    ));
}

#[test]
fn entries_are_sorted_apply_first_then_by_time() {
    let config = deployment(1, &json!({"app": "web"}), &app());
    let created = record_update(None, &config, &ctx("kubectl-create", T1), Some(&schema()));
    let mut relabelled = created.clone();
    relabelled["metadata"]["labels"]["extra"] = json!("x");
    let relabelled = record_update(
        Some(&created),
        &relabelled,
        &ctx("labeller", T2),
        Some(&schema()),
    );
    let applied = do_apply(
        Some(&relabelled),
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "annotations": {"a": "b"}}}),
        "zz-flux",
        T3,
        false,
    )
    .expect("applies");
    let order: Vec<(String, String)> = owners(&applied)
        .into_iter()
        .map(|(manager, operation, _)| (manager, operation))
        .collect();
    assert_eq!(
        order,
        [
            ("zz-flux".to_owned(), "Apply".to_owned()),
            ("kubectl-create".to_owned(), "Update".to_owned()),
            ("labeller".to_owned(), "Update".to_owned())
        ]
    );
}

#[test]
fn record_update_takes_changed_fields_and_drops_removed_ones() {
    let schema = schema();
    let object = deployment(1, &json!({"app": "web"}), &app());
    let created = record_update(None, &object, &ctx("creator", T1), Some(&schema));
    let creator = paths_of(&created, "creator");
    for expected in [
        ".metadata.labels",
        ".metadata.labels.app",
        ".spec",
        ".spec.replicas",
        r#".spec.template.spec.containers[name="app"].image"#,
    ] {
        assert!(
            creator.contains(&expected.to_owned()),
            "{expected} missing from {creator:#?}"
        );
    }
    assert!(
        !creator
            .iter()
            .any(|path| path == ".metadata" || path == ".metadata.name" || path == ".apiVersion")
    );
    assert_eq!(
        created["metadata"]["managedFields"][0]["operation"],
        "Update"
    );
    assert_eq!(created["metadata"]["managedFields"][0]["time"], T1);

    // A no-op update changes nothing, not even the time.
    let same = record_update(Some(&created), &created, &ctx("creator", T2), Some(&schema));
    assert_eq!(
        serde_json::to_string(&same).expect("json"),
        serde_json::to_string(&created).expect("json")
    );

    // Another manager edits the image and removes the labels.
    let mut edited = created.clone();
    edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("app:2");
    edited["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("labels");
    let edited = record_update(Some(&created), &edited, &ctx("editor", T2), Some(&schema));
    assert_eq!(
        paths_of(&edited, "editor"),
        [r#".spec.template.spec.containers[name="app"].image"#]
    );
    let creator = paths_of(&edited, "creator");
    assert!(
        !creator
            .iter()
            .any(|path| path.starts_with(".metadata.labels") || path.contains("].image"))
    );
    assert!(creator.contains(&".spec.replicas".to_owned()));
    // The creator's time did not move: its entry shrank but it wrote nothing.
    let creator_entry = managed_fields(&edited)
        .into_iter()
        .find(|(entry, _)| entry.manager == "creator")
        .expect("creator");
    assert_eq!(creator_entry.0.time.as_deref(), Some(T1));

    // The editor's earlier ownership is kept when it edits something else.
    let mut again = edited.clone();
    again["spec"]["replicas"] = json!(3);
    let again = record_update(Some(&edited), &again, &ctx("editor", T3), Some(&schema));
    assert_eq!(
        paths_of(&again, "editor"),
        [
            ".spec.replicas",
            r#".spec.template.spec.containers[name="app"].image"#
        ]
    );
}

#[test]
fn record_update_drops_empty_entries_and_honours_resets() {
    let schema = schema();
    let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"paused": true}});
    let created = record_update(None, &object, &ctx("a", T1), Some(&schema));
    let mut changed = created.clone();
    changed["spec"]["paused"] = json!(false);
    let changed = record_update(Some(&created), &changed, &ctx("b", T2), Some(&schema));
    // `a` still owns `.spec` (the map it created); `b` owns the leaf.
    assert_eq!(paths_of(&changed, "b"), [".spec.paused"]);
    let mut removed = changed.clone();
    removed.as_object_mut().expect("object").remove("spec");
    let removed = record_update(Some(&changed), &removed, &ctx("c", T3), Some(&schema));
    assert!(
        removed["metadata"].get("managedFields").is_none(),
        "{removed:#}"
    );

    // `[{}]` in the new object resets ownership; the writer then owns what it changed.
    let mut reset = changed.clone();
    reset["metadata"]["managedFields"] = json!([{}]);
    reset["spec"]["replicas"] = json!(2);
    let reset = record_update(Some(&changed), &reset, &ctx("d", T3), Some(&schema));
    assert_eq!(
        owners(&reset),
        [(
            "d".to_owned(),
            "Update".to_owned(),
            vec![".spec.replicas".to_owned()]
        )]
    );
}

#[test]
fn subresource_and_api_version_identify_entries() {
    let schema = schema();
    let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 1}});
    let created = record_update(None, &object, &ctx("m", T1), Some(&schema));
    let mut with_status = created.clone();
    with_status["status"] = json!({"replicas": 1});
    let status_ctx = WriteContext {
        subresource: Some("status"),
        ..ctx("m", T2)
    };
    let with_status = record_update(Some(&created), &with_status, &status_ctx, Some(&schema));
    let entries = managed_fields(&with_status);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].0.subresource.as_deref(), Some("status"));
    assert_eq!(entries[1].1.paths(), [".status", ".status.replicas"]);
    assert_eq!(
        with_status["metadata"]["managedFields"][1]["subresource"],
        "status"
    );
}

#[test]
fn apply_without_schema_treats_lists_as_atomic() {
    let config = json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"items": [1, 2], "map": {"a": 1}}});
    let created = apply(None, &config, &ctx("flux", T1), false, None).expect("applies");
    assert_eq!(paths_of(&created, "flux"), [".spec.items", ".spec.map.a"]);
    let next = json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"items": [3]}});
    let updated = apply(Some(&created), &next, &ctx("flux", T2), false, None).expect("applies");
    // `.spec.map.a` was dropped: removed, and the emptied map with it.
    assert_eq!(updated["spec"], json!({"items": [3]}));
}

#[test]
fn list_items_missing_a_key_field_match_the_live_item() {
    // The server defaulted `protocol: TCP`; the configuration leaves it out.
    let ports = |ports: Value| json!([{"name": "app", "image": "app:1", "ports": ports}]);
    let config = deployment(
        1,
        &json!({"app": "web"}),
        &ports(json!([{"containerPort": 80}])),
    );
    let created = do_apply(None, &config, "flux", T1, false).expect("applies");
    let mut defaulted = created.clone();
    defaulted["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = json!("TCP");
    let again = do_apply(Some(&defaulted), &config, "flux", T2, false).expect("applies");
    assert_eq!(
        again["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}])
    );
    assert!(
        paths_of(&again, "flux").contains(
            &r#".spec.template.spec.containers[name="app"].ports[containerPort=80,protocol="TCP"]"#
                .to_owned()
        )
    );
}
