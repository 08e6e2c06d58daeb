use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};

use super::*;
use crate::cluster::{Cluster, ClusterConfig, PatchType, WriteOptions};
use crate::http::{AppState, handle};

/// A value no error may carry. Not base64 (`!`), so it fails at its first byte that is not.
const MARKER: &str = "MARKER-s3cr3t-7d1f!";

fn secrets(cluster: &Cluster) -> Arc<ResourceType> {
    cluster.resource("", "v1", "secrets").expect("secrets")
}

fn opts(manager: &str) -> WriteOptions {
    WriteOptions {
        field_manager: manager.into(),
        ..WriteOptions::default()
    }
}

fn secret(name: &str, data: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"}, "data": data})
}

/// Everything an error shows a client: the whole `Status`.
fn shown(e: &ApiError) -> String {
    e.to_status().to_string()
}

fn assert_clean(e: &ApiError) {
    let text = shown(e);
    assert!(!text.contains("MARKER"), "secret data in {text}");
    assert!(!text.contains("s3cr3t"), "secret data in {text}");
}

#[test]
fn decodes_as_go_does() {
    // Offsets as Go's `base64.StdEncoding.DecodeString` reports them.
    assert_eq!(decode_base64(b"aGVsbG8="), Ok(b"hello".to_vec()));
    assert_eq!(decode_base64(b""), Ok(Vec::new()));
    assert_eq!(decode_base64(b"Zm9v"), Ok(b"foo".to_vec()));
    assert_eq!(decode_base64(b"Zg=="), Ok(b"f".to_vec()));
    assert_eq!(decode_base64(b"aGVs\nbG8=\r\n"), Ok(b"hello".to_vec()));
    assert_eq!(decode_base64(b"Zg=\n="), Ok(b"f".to_vec()));
    // kubernetes/kubernetes#7817 and #31548: "admin", "wombat", "billy" fail at byte 4.
    assert_eq!(decode_base64(b"admin"), Err(4));
    assert_eq!(decode_base64(b"wombat"), Err(4));
    assert_eq!(decode_base64(b"billy"), Err(4));
    assert_eq!(decode_base64(b"not base64!"), Err(3));
    assert_eq!(decode_base64(b"<foo>"), Err(0));
    assert_eq!(decode_base64(b"=AAA"), Err(0));
    assert_eq!(decode_base64(b"A=AA"), Err(1));
    assert_eq!(decode_base64(b"AA="), Err(3));
    assert_eq!(decode_base64(b"AA=A"), Err(2));
    assert_eq!(decode_base64(b"Zm8=Zm8="), Err(4));
    assert_eq!(decode_base64(b"Zm9vYg"), Err(4));
}

#[test]
fn create_and_update_refuse_bad_base64_without_the_value() {
    let cluster = Cluster::new(&ClusterConfig::default());
    let rt = secrets(&cluster);
    for dry_run in [false, true] {
        let o = WriteOptions {
            dry_run,
            ..opts("test")
        };
        let e = cluster
            .create(
                &rt,
                Some("default"),
                secret("s", &json!({"token": MARKER})),
                &o,
            )
            .unwrap_err();
        assert_eq!((e.code, e.reason), (400, "BadRequest"));
        assert_eq!(
            e.message,
            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 6"
        );
        assert_clean(&e);
    }
    let good = secret("s", &json!({"token": "aGVs\nbG8="}));
    let created = cluster
        .create(&rt, Some("default"), good, &opts("test"))
        .unwrap();
    assert_eq!(
        created.object["data"]["token"], "aGVsbG8=",
        "stored canonical"
    );
    let e = cluster
        .update(
            &rt,
            Some("default"),
            "s",
            None,
            &secret("s", &json!({"token": MARKER})),
            &opts("test"),
        )
        .unwrap_err();
    assert_eq!(e.code, 400);
    assert!(e.message.ends_with("illegal base64 data at input byte 6"));
    assert_clean(&e);
}

#[test]
fn patches_refuse_bad_base64_without_the_value() {
    let cluster = Cluster::new(&ClusterConfig::default());
    let rt = secrets(&cluster);
    cluster
        .create(
            &rt,
            Some("default"),
            secret("s", &json!({"token": "aGVsbG8="})),
            &opts("test"),
        )
        .unwrap();
    let cases = [
        (
            PatchType::Json,
            json!([{"op": "replace", "path": "/data/token", "value": MARKER}]),
        ),
        (PatchType::Merge, json!({"data": {"token": MARKER}})),
        (PatchType::Strategic, json!({"data": {"token": MARKER}})),
    ];
    for (patch_type, patch) in cases {
        for dry_run in [false, true] {
            let o = WriteOptions {
                dry_run,
                ..opts("test")
            };
            let e = cluster
                .patch(&rt, Some("default"), "s", None, patch_type, &patch, &o)
                .unwrap_err();
            assert_eq!((e.code, e.reason), (422, "Invalid"), "{patch_type:?}");
            assert_eq!(e.causes[0].field, "patch");
            assert!(
                e.message.contains("<secret contents redacted>")
                    && e.message.ends_with("illegal base64 data at input byte 6"),
                "{}",
                e.message
            );
            assert_clean(&e);
        }
    }
    assert_eq!(
        cluster.get(&rt, Some("default"), "s").unwrap()["data"]["token"],
        "aGVsbG8=",
        "nothing written"
    );
}

#[test]
fn server_side_apply_refuses_bad_base64_without_the_value() {
    let cluster = Cluster::new(&ClusterConfig::default());
    let rt = secrets(&cluster);
    let config = secret("s", &json!({"ok": "aGVsbG8=", "token": MARKER}));
    for dry_run in [true, false] {
        let o = WriteOptions {
            dry_run,
            force: true,
            ..opts("kustomize-controller")
        };
        let e = cluster
            .patch(
                &rt,
                Some("default"),
                "s",
                None,
                PatchType::Apply,
                &config,
                &o,
            )
            .unwrap_err();
        assert_eq!(e.code, 500);
        assert_eq!(
            e.message,
            "failed to convert new object (default/s; /v1, Kind=Secret) to proper version: unable to convert unstructured object to /v1, Kind=Secret: error decoding from json: illegal base64 data at input byte 6"
        );
        assert!(
            e.to_status().get("reason").is_none(),
            "StatusReasonUnknown is omitted"
        );
        assert_clean(&e);
    }
    assert!(
        cluster.get(&rt, Some("default"), "s").is_err(),
        "nothing created"
    );
}

#[test]
fn conflicts_and_managed_fields_name_keys_never_values() {
    let cluster = Cluster::new(&ClusterConfig::default());
    let rt = secrets(&cluster);
    // "MARKER-s3cr3t-7d1f" in base64: a valid value that must not appear either.
    let value = crate::defaults::base64_encode(b"MARKER-s3cr3t-7d1f");
    let other = crate::defaults::base64_encode(b"other-MARKER-s3cr3t");
    let apply = |manager: &str, data: &str, force: bool| {
        cluster.patch(
            &rt,
            Some("default"),
            "s",
            None,
            PatchType::Apply,
            &secret("s", &json!({"token": data})),
            &WriteOptions {
                force,
                ..opts(manager)
            },
        )
    };
    apply("a", &value, false).unwrap();
    let e = apply("b", &other, false).unwrap_err();
    assert_eq!(e.code, 409);
    assert!(e.message.contains(".data.token"), "{}", e.message);
    assert!(!shown(&e).contains(&value) && !shown(&e).contains(&other));
    assert_clean(&e);

    // A client-supplied managedFields entry that does not parse.
    let mut body = cluster.get(&rt, Some("default"), "s").unwrap();
    body["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:token": {}, "bogus": {}}}}]);
    body["data"]["token"] = json!(other);
    if let Err(e) = cluster.update(&rt, Some("default"), "s", None, &body, &opts("x")) {
        assert!(!shown(&e).contains(&other));
        assert_clean(&e);
    } else {
        // Accepted: whatever managedFields the server kept name keys, never values.
        let stored = cluster.get(&rt, Some("default"), "s").unwrap();
        let fields = stored["metadata"]["managedFields"].to_string();
        assert!(!fields.contains(&other), "{fields}");
    }
}

#[test]
fn validation_causes_under_data_are_redacted() {
    let cluster = Cluster::new(&ClusterConfig::default());
    let rt = secrets(&cluster);
    // A type error names JSON types only and is kept as it is.
    let e = cluster
        .create(
            &rt,
            Some("default"),
            secret("s", &json!({"token": 5})),
            &opts("test"),
        )
        .unwrap_err();
    assert_eq!(e.code, 422);
    assert!(
        e.message.contains("must be of type string"),
        "{}",
        e.message
    );

    // Any other cause under data or stringData loses its value.
    let mut causes = vec![
        Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {MARKER:?}: data[token] in body should match '^x$'"),
            field: "data[token]".into(),
        },
        Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!("Unsupported value: {MARKER:?}: supported values: \"a\""),
            field: "stringData[token]".into(),
        },
        Cause {
            reason: "FieldValueInvalid".into(),
            message:
                "Invalid value: \"integer\": data[n] in body must be of type string: \"integer\""
                    .into(),
            field: "data[n]".into(),
        },
        Cause {
            reason: "FieldValueInvalid".into(),
            message: "Invalid value: \"Opaquee\": type is not supported".into(),
            field: "type".into(),
        },
    ];
    redact_causes(&rt, &mut causes);
    assert_eq!(
        causes[0].message,
        "Invalid value: \"<secret contents redacted>\": invalid value"
    );
    assert_eq!(
        causes[1].message,
        "Invalid value: \"<secret contents redacted>\": invalid value"
    );
    assert!(
        causes[2].message.contains("\"integer\""),
        "type errors kept"
    );
    assert!(causes[3].message.contains("Opaquee"), "other fields kept");

    // Other kinds keep their values, as kube-apiserver prints them.
    let configmaps = cluster.resource("", "v1", "configmaps").unwrap();
    let mut causes = vec![Cause {
        reason: "FieldValueInvalid".into(),
        message: "Invalid value: \"x\": data[a] in body should match '^y$'".into(),
        field: "data[a]".into(),
    }];
    redact_causes(&configmaps, &mut causes);
    assert!(causes[0].message.contains("\"x\""));

    // stringData is accepted and folded into data, whatever it holds.
    let mut body = secret("plain", &json!({}));
    body["stringData"] = json!({"token": MARKER});
    let created = cluster
        .create(&rt, Some("default"), body, &opts("test"))
        .unwrap();
    assert_eq!(
        created.object["data"]["token"],
        crate::defaults::base64_encode(MARKER.as_bytes())
    );
}

async fn request(cluster: &Cluster, method: &str, uri: &str, ct: &str, body: String) -> Value {
    let state = AppState {
        cluster: cluster.clone(),
        max_body_bytes: 3 * 1024 * 1024,
        bookmark_interval: Duration::from_secs(5),
        max_watch: Duration::from_secs(60),
        openapi: Arc::new(Mutex::new(crate::openapi::Cache::default())),
        pod_logs: crate::logs::PodLogs::default(),
    };
    let request = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", ct)
        .body(Body::from(body))
        .unwrap();
    let response = handle(State(state), request).await;
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn http_errors_never_echo_secret_data() {
    let cluster = Cluster::new(&ClusterConfig::default());
    let base = "/api/v1/namespaces/default/secrets";
    let apply = format!("{base}/s?fieldManager=test&force=true");

    // A YAML apply body that does not parse, on the line of the value.
    let yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  token: {MARKER}\n   bad: [indent\n"
    );
    let status = request(
        &cluster,
        "PATCH",
        &apply,
        "application/apply-patch+yaml",
        yaml,
    )
    .await;
    assert_eq!(status["code"], 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("error decoding YAML:")
    );
    assert!(!status.to_string().contains("MARKER"), "{status}");

    // Invalid base64 through every write verb.
    let body = secret("s", &json!({"token": MARKER})).to_string();
    let post = request(&cluster, "POST", base, "application/json", body.clone()).await;
    assert_eq!(post["code"], 400, "{post}");
    let ssa = request(
        &cluster,
        "PATCH",
        &apply,
        "application/apply-patch+yaml",
        body.clone(),
    )
    .await;
    assert_eq!(ssa["code"], 500, "{ssa}");
    let dry_run = request(
        &cluster,
        "PATCH",
        &format!("{apply}&dryRun=All"),
        "application/apply-patch+yaml",
        body.clone(),
    )
    .await;
    assert_eq!(dry_run["code"], 500, "{dry_run}");
    for status in [post, ssa, dry_run] {
        assert!(
            status["message"]
                .as_str()
                .unwrap()
                .ends_with("illegal base64 data at input byte 6")
        );
        assert!(!status.to_string().contains("MARKER"), "{status}");
    }
}
