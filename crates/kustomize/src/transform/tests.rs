use std::collections::BTreeMap;

use super::images::{set_images, split_image};
use super::labels::set_map_entries;
use super::namespace::set_namespace;
use super::patch::apply_patch;
use super::prefix_suffix::add_prefix_suffix;
use super::replacements::apply_replacement;
use super::replicas::set_replicas;
use super::select::matches_label_selector;
use super::value_add::{insert_segment, value_add};
use super::*;
use crate::build::Target;
use crate::config::TransformerConfig;
use crate::resource::Resource;
use crate::smp::Schemas;
use crate::types::{Image, Selector};
use serde_json::json;

fn deployment(name: &str) -> Resource {
    Resource::new(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.0", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}
    }))
}

fn config() -> TransformerConfig {
    TransformerConfig::builtin()
}

#[test]
fn prefix_then_name_references_follow() {
    let mut resources = vec![
        deployment("web"),
        Resource::new(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b"}}),
        ),
    ];
    add_prefix_suffix(&mut resources, "p-", "", &config().name_prefix);
    fix_name_references(&mut resources, &config()).unwrap();
    assert_eq!(resources[0].name(), "p-web");
    assert_eq!(resources[1].name(), "p-cfg");
    assert_eq!(
        resources[0].object["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["configMapRef"]
            ["name"],
        "p-cfg"
    );
}

#[test]
fn common_labels_reach_selectors() {
    let mut resources = vec![deployment("web")];
    let labels = BTreeMap::from([("team".to_owned(), "a".to_owned())]);
    set_map_entries(&mut resources, &labels, &config().common_labels);
    let object = &resources[0].object;
    assert_eq!(object["metadata"]["labels"]["team"], "a");
    assert_eq!(object["spec"]["selector"]["matchLabels"]["team"], "a");
    assert_eq!(
        object["spec"]["template"]["metadata"]["labels"]["team"],
        "a"
    );
}

#[test]
fn namespace_skips_cluster_scoped() {
    let mut resources = vec![
        deployment("web"),
        Resource::new(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}}),
        ),
    ];
    set_namespace(&mut resources, "prod", &config().namespace, false, "");
    assert_eq!(resources[0].namespace(), "prod");
    assert_eq!(resources[1].namespace(), "");
}

#[test]
fn images_rewrite_name_tag_digest() {
    let mut resources = vec![deployment("web")];
    let image = Image {
        name: "nginx".into(),
        new_name: "reg/nginx".into(),
        new_tag: "2".into(),
        ..Image::default()
    };
    set_images(&mut resources, &image, &config().images);
    assert_eq!(
        resources[0].object["spec"]["template"]["spec"]["containers"][0]["image"],
        "reg/nginx:2"
    );
    assert_eq!(
        split_image("localhost:5000/a/b:t@sha256:x"),
        ("localhost:5000/a/b".into(), "t".into(), "sha256:x".into())
    );
}

#[test]
fn replicas_and_json_patch_with_selector() {
    let mut resources = vec![deployment("web"), deployment("api-a")];
    set_replicas(&mut resources, "web", 3, &config().replicas);
    assert_eq!(resources[0].object["spec"]["replicas"], 3);
    assert!(resources[1].object["spec"].get("replicas").is_none());
    let selector = Selector {
        name: "api-.*".into(),
        ..Selector::default()
    };
    apply_patch(
        &mut resources,
        &Schemas::default(),
        "- op: add\n  path: /spec/paused\n  value: true\n",
        Some(&selector),
        &BTreeMap::new(),
    )
    .unwrap();
    assert_eq!(resources[1].object["spec"]["paused"], true);
    assert!(resources[0].object["spec"].get("paused").is_none());
}

#[test]
fn strategic_patch_without_match_is_an_error() {
    let mut resources = vec![deployment("web")];
    let error = apply_patch(
        &mut resources,
        &Schemas::default(),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: nope\n",
        None,
        &BTreeMap::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("no resource matches strategic merge patch"),
        "{error}"
    );
}

#[test]
fn replacement_copies_a_field() {
    let mut resources = vec![deployment("web"), deployment("api")];
    let replacement = json!({
        "source": {"kind": "Deployment", "name": "web", "fieldPath": "spec.template.spec.containers.[name=c].image"},
        "targets": [{"select": {"name": "api"}, "fieldPaths": ["metadata.annotations.[example.com/image]"], "options": {"create": true}}]
    });
    apply_replacement(&mut resources, &replacement).unwrap();
    assert_eq!(
        resources[1].object["metadata"]["annotations"]["example.com/image"],
        "nginx:1.0"
    );
}

#[test]
fn label_selectors() {
    let labels = json!({"tier": "backend", "env": "prod"})
        .as_object()
        .unwrap()
        .clone();
    assert!(matches_label_selector(&labels, "tier=backend,env in (prod, dev)").unwrap());
    assert!(!matches_label_selector(&labels, "tier!=backend").unwrap());
    assert!(matches_label_selector(&labels, "!missing").unwrap());
}

#[test]
fn legacy_sort_puts_namespaces_first() {
    let mut resources = vec![
        deployment("web"),
        Resource::new(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})),
    ];
    sort(&mut resources, None).unwrap();
    assert_eq!(resources[0].kind(), "Namespace");
}

#[test]
fn value_add_inserts_path_segments() {
    assert_eq!(insert_segment(Some("projects"), "dog", 2), "projects/dog");
    assert_eq!(insert_segment(Some("projects"), "dog", 1), "dog/projects");
    assert_eq!(insert_segment(Some("a/b"), "dog", 9), "a/b/dog");
    assert_eq!(insert_segment(Some("a/b"), "dog", 0), "dog");
    assert_eq!(insert_segment(None, "dog", 2), "dog");
}

#[test]
fn value_add_defaults_to_the_directory_name() {
    let target = Target {
        dir: std::path::PathBuf::from("/projects/dog-222"),
        file: std::path::PathBuf::from("/projects/dog-222/kustomization.yaml"),
        kustomization: crate::types::Kustomization::default(),
    };
    let mut resources = vec![
        deployment("web"),
        Resource::new(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"path": "projects"}}),
        ),
    ];
    let config = json!({"targets": [
        {"fieldPath": "metadata/namespace"},
        {"selector": {"kind": "ConfigMap"}, "fieldPath": "data/path", "filePathPosition": 2},
    ]});
    value_add(&target, &mut resources, &config).unwrap();
    assert_eq!(resources[0].namespace(), "dog-222");
    assert_eq!(resources[1].object["data"]["path"], "projects/dog-222");
    assert!(resources[0].object.get("data").is_none());
}

#[test]
fn images_rewrite_matching_names_only() {
    let mut resources = vec![deployment("web")];
    let image = Image {
        name: "nginx".into(),
        new_tag: "2.0".into(),
        ..Image::default()
    };
    set_images(&mut resources, &image, &config().images);
    let path = &resources[0].object["spec"]["template"]["spec"]["containers"][0]["image"];
    assert_eq!(path, "nginx:2.0");
    let other = Image {
        name: "ngin".into(),
        new_tag: "3.0".into(),
        ..Image::default()
    };
    set_images(&mut resources, &other, &config().images);
    let path = &resources[0].object["spec"]["template"]["spec"]["containers"][0]["image"];
    assert_eq!(path, "nginx:2.0");
}

#[test]
fn legacy_sort_puts_namespaces_first_and_webhooks_last() {
    let object = |kind: &str, name: &str| {
        Resource::new(json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}))
    };
    let mut resources = vec![
        object("ValidatingWebhookConfiguration", "w"),
        object("Service", "b"),
        object("Service", "a"),
        object("Namespace", "n"),
    ];
    sort(&mut resources, None).unwrap();
    let order: Vec<String> = resources
        .iter()
        .map(|r| format!("{}/{}", r.kind(), r.name()))
        .collect();
    assert_eq!(
        order,
        [
            "Namespace/n",
            "Service/a",
            "Service/b",
            "ValidatingWebhookConfiguration/w"
        ]
    );
}

#[test]
fn name_references_follow_hashed_generator_names() {
    let mut generated = Resource::new(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "b"}}),
    );
    generated.needs_hash = true;
    let mut resources = vec![deployment("web"), generated];
    add_hash_suffixes(&mut resources);
    fix_name_references(&mut resources, &config()).unwrap();
    let renamed = resources[1].name().to_owned();
    assert!(
        renamed.starts_with("cfg-") && renamed.len() == "cfg-".len() + 10,
        "{renamed}"
    );
    assert_eq!(
        resources[0].object["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["configMapRef"]
            ["name"],
        renamed.as_str()
    );
}
