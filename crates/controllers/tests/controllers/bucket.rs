//! The Bucket controller end to end, against `moto_server` (S3 with IAM authentication).
//! Objects are written with the source crate's independent boto3 helper.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use capstan_api::Bucket;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

use crate::support::{Env, download, eventually, require, tar_entries};

const BUCKET: &str = "flux";

fn helper(request: &serde_json::Value) -> serde_json::Value {
    require("python3");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../source/tests/source/testdata/bucket_client.py"
    );
    let output = Command::new("python3")
        .arg(script)
        .arg(request.to_string())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "bucket_client.py {} failed: {}",
        request["op"],
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// A `moto_server` with IAM authentication, one bucket and one access key pair, killed on drop.
struct Moto {
    child: Child,
    endpoint: String,
    access_key: String,
    secret_key: String,
}

impl Moto {
    async fn start() -> Self {
        require("moto_server");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            // The IAM user, access key and policy requests need no signature; later ones do.
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "3")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut moto = Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            access_key: String::new(),
            secret_key: String::new(),
        };
        eventually(
            Duration::from_secs(30),
            "moto_server to listen",
            || async move { TcpStream::connect(("127.0.0.1", port)).ok().map(|_| ()) },
        )
        .await;
        let keys = helper(&serde_json::json!({
            "op": "s3-setup", "endpoint": moto.endpoint, "bucket": BUCKET,
        }));
        keys["access_key"]
            .as_str()
            .unwrap()
            .clone_into(&mut moto.access_key);
        keys["secret_key"]
            .as_str()
            .unwrap()
            .clone_into(&mut moto.secret_key);
        moto
    }

    fn put(&self, objects: &[(&str, &str)]) {
        let objects: serde_json::Map<String, serde_json::Value> = objects
            .iter()
            .map(|(key, content)| ((*key).to_owned(), (*content).into()))
            .collect();
        helper(&serde_json::json!({
            "op": "s3-put", "endpoint": self.endpoint, "bucket": BUCKET,
            "access_key": self.access_key, "secret_key": self.secret_key, "objects": objects,
        }));
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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

async fn wait_for(
    api: &Api<Bucket>,
    name: &str,
    what: &str,
    check: impl Fn(&Bucket) -> bool,
) -> Bucket {
    let check = &check;
    eventually(Duration::from_secs(30), what, || {
        let api = api.clone();
        async move {
            api.get_opt(name)
                .await
                .ok()
                .flatten()
                .filter(|object| check(object))
        }
    })
    .await
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
