//! The Bucket controller end to end, against `moto_server` (S3 with IAM authentication).
//! Objects are written with capstan-testkit's independent boto3 client.

use std::collections::BTreeMap;
use std::time::Duration;

use capstan_api::Bucket;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

use capstan_testkit::buckets::{BUCKET, Moto};

use crate::support::{Env, download, eventually, tar_entries, wait_for};

fn condition(object: &Bucket, type_: &str) -> Option<(String, String, String)> {
    object
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn ready_is(object: &Bucket, status: &str) -> bool {
    condition(object, "Ready").is_some_and(|(s, ..)| s == status)
}

fn revision(object: &Bucket) -> Option<&str> {
    Some(object.status.as_ref()?.artifact.as_ref()?.revision.as_str())
}

fn handled(object: &Bucket) -> Option<&str> {
    object
        .status
        .as_ref()?
        .reconcile_request
        .last_handled_reconcile_at
        .as_deref()
}

async fn create_secret(env: &Env, namespace: &str, name: &str, data: &BTreeMap<&str, &str>) {
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": namespace},
        "stringData": data,
    }))
    .unwrap();
    Api::<Secret>::namespaced(env.client.clone(), namespace)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

async fn create(api: &Api<Bucket>, name: &str, spec: serde_json::Value) {
    let object: Bucket = serde_json::from_value(serde_json::json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "Bucket",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn bucket_objects_are_stored_filtered_and_followed() {
    let env = Env::start().await;
    let ns = env.namespace("bucket").await;
    let moto = Moto::start().await;
    moto.put(&[
        ("apps/config.yaml", "v: 1\n"),
        ("apps/notes.md", "left out\n"),
        ("other/skip.yaml", "outside the prefix\n"),
    ]);
    create_secret(
        &env,
        &ns,
        "s3-keys",
        &BTreeMap::from([
            ("accesskey", moto.access_key.as_str()),
            ("secretkey", moto.secret_key.as_str()),
        ]),
    )
    .await;
    let api: Api<Bucket> = Api::namespaced(env.client.clone(), &ns);
    let spec = serde_json::json!({
        "provider": "generic", "bucketName": BUCKET,
        "endpoint": moto.endpoint.trim_start_matches("http://"), "insecure": true,
        "region": "us-east-1", "interval": "10m", "prefix": "apps",
        "ignore": "*.md\n", "secretRef": {"name": "s3-keys"},
    });
    create(&api, "objects", spec.clone()).await;

    let object = wait_for(&api, "objects", "Ready=True", |o| ready_is(o, "True")).await;
    let first = revision(&object).unwrap().to_owned();
    assert!(
        first.starts_with("sha256:") && first.len() == 7 + 64,
        "{first}"
    );
    let (_, reason, message) = condition(&object, "Ready").unwrap();
    assert_eq!(reason, "Succeeded");
    assert!(message.contains(&first), "{message}");
    let artifact = object.status.as_ref().unwrap().artifact.as_ref().unwrap();
    assert_eq!(
        artifact.path,
        format!(
            "bucket/{ns}/objects/{}.tar.gz",
            first.trim_start_matches("sha256:")
        )
    );
    let bytes = download(&artifact.url).await;
    assert_eq!(
        artifact.digest,
        capstan_source::Digest::of(&bytes).to_string()
    );
    let entries = tar_entries(&bytes);
    assert!(
        entries.iter().any(|e| e.ends_with("apps/config.yaml")),
        "{entries:?}"
    );
    assert!(
        !entries
            .iter()
            .any(|e| e.ends_with("notes.md") || e.contains("other")),
        "{entries:?}"
    );

    // Unchanged objects are not downloaded again: the stored file is left as it is.
    let file = env.storage_path(&artifact.path);
    let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
    let request = |token: &str| serde_json::json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": token}}});
    api.patch(
        "objects",
        &PatchParams::default(),
        &Patch::Merge(request("t0")),
    )
    .await
    .unwrap();
    let object = wait_for(&api, "objects", "the request handled", |o| {
        handled(o) == Some("t0")
    })
    .await;
    assert_eq!(revision(&object), Some(first.as_str()));
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        modified
    );

    // A changed object gives a new revision.
    moto.put(&[("apps/config.yaml", "v: 2\n")]);
    api.patch(
        "objects",
        &PatchParams::default(),
        &Patch::Merge(request("t1")),
    )
    .await
    .unwrap();
    let object = wait_for(&api, "objects", "a new revision", |o| {
        handled(o) == Some("t1") && revision(o) != Some(first.as_str())
    })
    .await;
    assert!(ready_is(&object, "True"));

    // Wrong credentials fail the fetch.
    create_secret(
        &env,
        &ns,
        "wrong-keys",
        &BTreeMap::from([("accesskey", "nobody"), ("secretkey", "nothing")]),
    )
    .await;
    let mut wrong = spec;
    wrong["secretRef"] = serde_json::json!({"name": "wrong-keys"});
    create(&api, "wrong", wrong).await;
    let object = wait_for(&api, "wrong", "Ready=False", |o| ready_is(o, "False")).await;
    let (status, reason, _) = condition(&object, "FetchFailed").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "BucketOperationFailed")
    );

    // Deletion removes every stored artifact.
    api.delete("objects", &DeleteParams::default())
        .await
        .unwrap();
    let dir = env.storage_path(&format!("bucket/{ns}/objects"));
    eventually(Duration::from_secs(30), "deletion and cleanup", || {
        let api = api.clone();
        let dir = dir.clone();
        async move {
            let gone = api.get_opt("objects").await.ok()?.is_none();
            (gone && !dir.exists()).then_some(())
        }
    })
    .await;
    env.stop().await;
}
