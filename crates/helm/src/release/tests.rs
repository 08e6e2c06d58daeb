//! Unit tests of the release model and codec. The decode of records written by Helm's own SDK
//! is tested against a cluster in `capstan-controllers` (`tests/controllers/helm_storage.rs`).

use std::io::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value as Json, json};

use super::*;
use crate::output::HookEvent;

/// A record as Helm v4.2.3 writes one (fields and encodings as `json.Marshal` gives them),
/// plus a field of a newer Helm (`rollback_revision`) and one of a future one (`future`).
fn helm_json() -> Json {
    json!({
        "name": "web",
        "info": {
            "first_deployed": "2026-11-24T13:05:22.123456789Z",
            "last_deployed": "2026-11-24T13:06:00Z",
            "description": "Rollback to 1",
            "status": "pending-rollback",
            "rollback_revision": 1,
            "notes": "1. Get the application URL"
        },
        "chart": {
            "metadata": {
                "name": "podinfo",
                "home": "https://github.com/stefanprodan/podinfo",
                "sources": ["https://github.com/stefanprodan/podinfo"],
                "version": "6.14.1",
                "description": "Podinfo Helm chart for Kubernetes",
                "maintainers": [{"name": "stefanprodan", "email": "s@example.com"}],
                "apiVersion": "v1",
                "appVersion": "6.14.1",
                "annotations": {"category": "demo"},
                "kubeVersion": ">=1.23.0-0",
                "dependencies": [{"name": "redis", "version": "1.x", "repository": "", "enabled": true}]
            },
            "lock": null,
            "templates": [{"name": "templates/a.yaml", "data": "a2luZDogQQo=", "modtime": "2026-01-02T03:04:05Z"}],
            "values": {"replicaCount": 1, "nested": {"list": [1, "two", null]}},
            "schema": null,
            "schemamodtime": "0001-01-01T00:00:00Z",
            "files": [{"name": "README.md", "data": ""}],
            "modtime": "2026-01-02T03:04:05Z"
        },
        "config": {"replicaCount": 2, "secret": "hunter2"},
        "manifest": "---\n# Source: podinfo/templates/a.yaml\nkind: A\n",
        "hooks": [{
            "name": "web-test",
            "kind": "Pod",
            "path": "podinfo/templates/tests/t.yaml",
            "manifest": "kind: Pod\n",
            "events": ["test"],
            "last_run": {"started_at": "2026-11-24T13:07:00Z", "completed_at": "2026-11-24T13:07:05.5Z", "phase": "Succeeded"},
            "weight": -5,
            "delete_policies": ["before-hook-creation", "hook-succeeded"]
        }, {
            "name": "web-pre",
            "kind": "Job",
            "path": "podinfo/templates/hooks/job.yaml",
            "manifest": "kind: Job\n",
            "events": ["pre-install", "pre-upgrade"],
            "last_run": {"phase": ""}
        }],
        "version": 3,
        "namespace": "apps",
        "apply_method": "ssa",
        "future": {"kept": true}
    })
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

#[test]
fn helm_json_is_read_field_for_field() {
    let text = helm_json().to_string();
    let record = decode(STANDARD.encode(gzip(text.as_bytes())).as_bytes()).unwrap();
    assert_eq!(record.name, "web");
    assert_eq!(record.version, 3);
    assert_eq!(record.namespace, "apps");
    assert_eq!(record.status(), Status::PendingRollback);
    assert!(record.status().is_pending());
    assert_eq!(record.info.description, "Rollback to 1");
    assert_eq!(
        record.info.first_deployed.unwrap().to_string(),
        "2026-11-24T13:05:22.123456789Z"
    );
    assert_eq!(record.info.deleted, None);
    assert_eq!(record.info.extra["rollback_revision"], json!(1));
    assert_eq!(record.chart_name(), "podinfo");
    assert_eq!(record.chart_version(), "6.14.1");
    assert_eq!(record.app_version(), "6.14.1");
    let chart = record.chart.as_ref().unwrap();
    assert_eq!(chart.templates[0].data, b"kind: A\n");
    assert!(chart.templates[0].modtime.is_some());
    assert_eq!(chart.schema, None);
    assert_eq!(chart.schemamodtime, None, "Go's zero time is no time");
    let metadata = chart.metadata.as_ref().unwrap();
    assert_eq!(metadata.maintainers[0].email, "s@example.com");
    assert_eq!(metadata.annotations["category"], "demo");
    assert!(metadata.dependencies[0].enabled);
    assert_eq!(record.config["replicaCount"], json!(2));
    assert_eq!(record.hooks[0].events, [HookEvent::Test]);
    assert_eq!(record.hooks[0].weight, -5);
    assert_eq!(record.hooks[0].last_run.phase, HookPhase::Succeeded);
    assert_eq!(record.hooks[1].last_run.phase, HookPhase::NotRun);
    assert_eq!(
        record.hooks[1].events,
        [HookEvent::PreInstall, HookEvent::PreUpgrade]
    );
    assert_eq!(record.apply_method, Release::APPLY_METHOD_SERVER_SIDE);
    assert_eq!(record.extra["future"], json!({"kept": true}));
}

#[test]
fn encoding_writes_back_what_helm_wrote() {
    let record = decode_json(helm_json().to_string().as_bytes()).unwrap();
    let written: Json = serde_json::from_slice(&to_json(&record).unwrap()).unwrap();
    assert_eq!(written, helm_json());
}

#[test]
fn encode_then_decode_round_trips() {
    let record = decode_json(helm_json().to_string().as_bytes()).unwrap();
    let text = encode(&record).unwrap();
    let compressed = STANDARD.decode(&text).unwrap();
    assert_eq!(compressed[..3], [0x1f, 0x8b, 0x08], "gzip, as Helm writes");
    assert_eq!(decode(text.as_bytes()).unwrap(), record);
}

#[test]
fn plain_json_records_are_read_as_helm_reads_them() {
    let text = STANDARD.encode(helm_json().to_string());
    assert_eq!(decode(text.as_bytes()).unwrap().name, "web");
}

#[test]
fn helm_omits_what_is_empty() {
    let record = Release::new("web", "apps", 1, Chart::default());
    let written: Json = serde_json::from_slice(&to_json(&record).unwrap()).unwrap();
    assert_eq!(
        written,
        json!({
            "name": "web",
            "info": {"status": "unknown"},
            "chart": {
                "metadata": null, "lock": null, "templates": [], "values": {}, "schema": null,
                "schemamodtime": "0001-01-01T00:00:00Z", "files": []
            },
            "version": 1,
            "namespace": "apps",
            "apply_method": "ssa"
        })
    );
}

#[test]
fn nulls_and_empty_times_read_as_empty() {
    let record = decode_json(
        br#"{"name":"web","info":{"first_deployed":"","status":"deployed","resources":null},
            "chart":{"metadata":null,"templates":null,"values":null,"files":null},
            "config":null,"hooks":[{"events":null,"last_run":{"started_at":""}}],"version":1}"#,
    )
    .unwrap();
    assert_eq!(record.info.first_deployed, None);
    assert!(record.config.is_empty());
    assert!(record.hooks[0].events.is_empty());
}

#[test]
fn errors_name_the_field_and_never_the_value() {
    let error = decode_json(br#"{"name":"web","info":{"status":"hunter2"}}"#).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("info.status"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");

    let error = decode_json(br#"{"hooks":[{"weight":"hunter2"}]}"#).unwrap_err();
    let message = error.to_string();
    assert!(message.contains("hooks[0].weight"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");

    let error = decode_json(br#"{"config":{"password":"hunter2"}"#).unwrap_err();
    assert!(!error.to_string().contains("hunter2"), "{error}");

    assert!(matches!(
        decode(b"not base64!").unwrap_err(),
        DecodeError::Base64 { offset: 3 }
    ));
    let mut truncated = gzip(helm_json().to_string().as_bytes());
    truncated.truncate(truncated.len() / 2);
    let error = decode(STANDARD.encode(truncated).as_bytes()).unwrap_err();
    assert!(matches!(error, DecodeError::Gzip(_)), "{error}");
}

#[test]
fn a_record_inflating_past_the_limit_is_refused() {
    // 200 MiB of zeros compress to a few hundred KiB.
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![b' '; 1024 * 1024];
    for _ in 0..200 {
        encoder.write_all(&zeros).unwrap();
    }
    let text = STANDARD.encode(encoder.finish().unwrap());
    assert!(matches!(
        decode(text.as_bytes()).unwrap_err(),
        DecodeError::TooLarge
    ));
}

#[test]
fn status_names_are_helms() {
    for status in Status::ALL {
        assert_eq!(Status::parse(status.as_str()), Some(status));
        assert_eq!(
            serde_json::to_value(status).unwrap(),
            json!(status.as_str())
        );
    }
    assert_eq!(Status::PendingUpgrade.to_string(), "pending-upgrade");
    assert_eq!(Status::parse("Deployed"), None);
}

#[test]
fn a_loaded_chart_is_stored_as_helm_stores_it() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    };
    write(
        "Chart.yaml",
        "apiVersion: v2\nname: web\nversion: 1.2.3\nappVersion: \"4.5\"\ndescription: A web app\n\
         keywords: [web, demo]\nmaintainers:\n- name: ops\n  email: ops@example.com\n\
         annotations:\n  team: platform\ndeprecated: true\ntype: application\n",
    );
    write("values.yaml", "replicaCount: 1\n");
    write("values.schema.json", "{\"type\": \"object\"}\n");
    write("templates/deployment.yaml", "kind: Deployment\n");
    write("crds/crd.yaml", "kind: CustomResourceDefinition\n");
    write(
        "Chart.lock",
        "dependencies: []\ndigest: sha256:abc\ngenerated: \"2026-01-02T03:04:05.5Z\"\n",
    );
    let loaded = crate::chart::load(dir.path()).unwrap();
    let mut stored = Chart::from_loaded(&loaded);
    stored.lock =
        Some(Lock::from_yaml(&std::fs::read(dir.path().join("Chart.lock")).unwrap()).unwrap());
    let metadata = stored.metadata.as_ref().unwrap();
    assert_eq!(
        (metadata.name.as_str(), metadata.version.as_str()),
        ("web", "1.2.3")
    );
    assert_eq!(metadata.app_version, "4.5");
    assert_eq!(metadata.api_version, "v2");
    assert_eq!(metadata.description, "A web app");
    assert_eq!(metadata.keywords, ["web", "demo"]);
    assert_eq!(metadata.maintainers[0].email, "ops@example.com");
    assert_eq!(metadata.annotations["team"], "platform");
    assert!(metadata.deprecated);
    assert_eq!(metadata.chart_type, "application");
    assert_eq!(stored.templates[0].name, "templates/deployment.yaml");
    assert_eq!(stored.templates[0].data, b"kind: Deployment\n");
    assert!(stored.files.iter().any(|f| f.name == "crds/crd.yaml"));
    assert_eq!(stored.values["replicaCount"], json!(1), "as it reads back");
    assert_eq!(
        stored.schema.as_deref(),
        Some(&b"{\"type\": \"object\"}\n"[..])
    );
    let lock = stored.lock.as_ref().unwrap();
    assert_eq!(lock.digest, "sha256:abc");
    assert_eq!(
        lock.generated.unwrap().to_string(),
        "2026-01-02T03:04:05.5Z"
    );

    let mut record = Release::new("web", "apps", 1, stored);
    record.set_status(Status::Deployed, "Install complete");
    let json = String::from_utf8(to_json(&record).unwrap()).unwrap();
    assert!(
        json.contains(r#""values":{"replicaCount":1}"#),
        "whole numbers as Go writes a float64: {json}"
    );
    let back = decode(encode(&record).unwrap().as_bytes()).unwrap();
    assert_eq!(back, record);
}

#[test]
fn engine_hooks_become_records_not_yet_run() {
    let hook = crate::output::Hook {
        name: "pre".into(),
        kind: "Job".into(),
        path: "web/templates/pre.yaml".into(),
        manifest: "kind: Job\n".into(),
        events: vec![HookEvent::PreInstall],
        weight: 5,
        delete_policies: vec!["hook-succeeded".into()],
        output_log_policies: Vec::new(),
    };
    let record = Hook::from_output(&hook);
    assert_eq!(record.last_run, HookExecution::default());
    let written = serde_json::to_value(&record).unwrap();
    assert_eq!(
        written,
        json!({
            "name": "pre", "kind": "Job", "path": "web/templates/pre.yaml",
            "manifest": "kind: Job\n", "events": ["pre-install"], "last_run": {"phase": ""},
            "weight": 5, "delete_policies": ["hook-succeeded"]
        })
    );
}

#[test]
fn storage_keys_are_helms() {
    assert_eq!(storage_key("web", 12), "sh.helm.release.v1.web.v12");
}

#[test]
fn values_are_written_with_sorted_keys_as_go_writes_maps() {
    let mut record = Release::new("web", "apps", 1, Chart::default());
    record.config =
        serde_json::from_str(r#"{"b": {"z": 1, "a": 2.0}, "a": [{"y": 1, "x": 0.5}]}"#).unwrap();
    let json = String::from_utf8(to_json(&record).unwrap()).unwrap();
    assert!(
        json.contains(r#""config":{"a":[{"x":0.5,"y":1}],"b":{"a":2,"z":1}}"#),
        "{json}"
    );
}

#[test]
fn strings_are_escaped_as_go_escapes_them() {
    let mut record = Release::new("web", "apps", 1, Chart::default());
    record.manifest = "a<b>&c\u{2028}\"\n\u{1}é".into();
    let json = String::from_utf8(to_json(&record).unwrap()).unwrap();
    assert!(
        json.contains(r#""manifest":"a\u003cb\u003e\u0026c\u2028\"\n\u0001é""#),
        "{json}"
    );
    assert_eq!(
        decode_json(json.as_bytes()).unwrap().manifest,
        record.manifest
    );
}

#[test]
fn debug_output_leaves_values_and_manifests_out() {
    let record = decode_json(helm_json().to_string().as_bytes()).unwrap();
    let debug = format!("{record:?}");
    assert!(
        debug.contains("podinfo-6.14.1") && debug.contains("web-test"),
        "{debug}"
    );
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(!debug.contains("kind: A"), "{debug}");
}
