//! Object stores for the bucket tests: S3 served by `moto_server` (PyPI) and Azure Blob served
//! by `azurite-blob` (npm), each killed on drop. Objects are written by an independent client,
//! `testdata/bucket_client.py` (boto3, and hand-signed Azure REST calls).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::{require, spawn_listening};

/// The bucket (S3) or container (Azure) every store is created with.
pub const BUCKET: &str = "flux";
/// Azurite's well-known development account.
pub const AZURE_ACCOUNT: &str = "devstoreaccount1";
/// Azurite's well-known development account key.
pub const AZURE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Runs one operation of the independent client and returns its JSON answer.
fn client(request: &serde_json::Value) -> serde_json::Value {
    require("python3");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/bucket_client.py");
    // The request goes on stdin: object contents may be larger than an argument may be.
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bucket_client.py");
    child
        .stdin
        .take()
        .expect("a piped stdin")
        .write_all(request.to_string().as_bytes())
        .expect("write the request to bucket_client.py");
    let output = child.wait_with_output().expect("wait for bucket_client.py");
    assert!(
        output.status.success(),
        "bucket_client.py {} failed: {}",
        request["op"],
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("bucket_client.py answers JSON")
}

fn objects_json(objects: &[(&str, &str)]) -> serde_json::Map<String, serde_json::Value> {
    objects
        .iter()
        .map(|(key, content)| ((*key).to_owned(), (*content).into()))
        .collect()
}

/// A `moto_server` with bucket [`BUCKET`] and one access key pair.
pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    /// The access key of the IAM user created at start.
    pub access_key: String,
    /// Its secret key.
    pub secret_key: String,
}

impl Moto {
    /// A Bucket spec (S3-compatible, `generic`) pointing at this server's [`BUCKET`].
    pub fn spec(&self) -> capstan_api::source::v1::BucketSpec {
        serde_json::from_value(serde_json::json!({
            "provider": "generic",
            "bucketName": BUCKET,
            "endpoint": self.endpoint.trim_start_matches("http://"),
            "insecure": true,
            "region": "us-east-1",
            "interval": "1m",
        }))
        .expect("a valid Bucket spec")
    }

    /// The credentials of the IAM user created at start, as a Bucket's secret gives them.
    pub fn credentials(&self) -> capstan_source::bucket::Credentials {
        let secret = BTreeMap::from([
            ("accesskey".to_owned(), self.access_key.as_bytes().to_vec()),
            ("secretkey".to_owned(), self.secret_key.as_bytes().to_vec()),
        ]);
        capstan_source::bucket::Credentials::from_secret(
            capstan_api::source::v1::CloudProvider::Generic,
            &secret,
        )
        .expect("credentials from the secret")
    }

    /// A server that checks signatures against its IAM.
    pub async fn start() -> Self {
        Self::spawn(true).await
    }

    /// A server that does not check signatures. moto 5 rejects every signed list request with
    /// a `/` in its `prefix` (boto3's too), so prefix tests run without authentication.
    pub async fn start_without_auth() -> Self {
        Self::spawn(false).await
    }

    async fn spawn(with_auth: bool) -> Self {
        require("moto_server");
        let (child, port) = spawn_listening("moto_server", |port| {
            let mut command = Command::new("moto_server");
            command.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
            if with_auth {
                // The first three requests (IAM user, access key, policy) need no signature;
                // all later ones are checked against moto's IAM.
                command.env("INITIAL_NO_AUTH_ACTION_COUNT", "3");
            }
            command.stdout(Stdio::null()).stderr(Stdio::null());
            command
        })
        .await;
        let endpoint = format!("http://127.0.0.1:{port}");
        let keys = client(&serde_json::json!({
            "op": "s3-setup", "endpoint": endpoint, "bucket": BUCKET,
        }));
        let key = |name: &str| keys[name].as_str().expect("a key").to_owned();
        Self {
            child,
            access_key: key("access_key"),
            secret_key: key("secret_key"),
            endpoint,
        }
    }

    /// Writes objects; returns their ETags as boto3 reports them (without quotes).
    pub fn put(&self, objects: &[(&str, &str)]) -> BTreeMap<String, String> {
        let etags = client(&serde_json::json!({
            "op": "s3-put", "endpoint": self.endpoint, "bucket": BUCKET,
            "access_key": self.access_key, "secret_key": self.secret_key,
            "objects": objects_json(objects),
        }));
        serde_json::from_value(etags).expect("ETags by key")
    }

    /// Deletes objects.
    pub fn delete(&self, keys: &[&str]) {
        client(&serde_json::json!({
            "op": "s3-delete", "endpoint": self.endpoint, "bucket": BUCKET,
            "access_key": self.access_key, "secret_key": self.secret_key, "keys": keys,
        }));
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `azurite-blob` from the project's `.tools/node_modules/.bin` (where `scripts/setup` puts
/// it) or from PATH.
fn azurite_binary() -> PathBuf {
    let local =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/node_modules/.bin/azurite-blob");
    if local.is_file() {
        return local;
    }
    require("azurite-blob");
    PathBuf::from("azurite-blob")
}

/// An `azurite-blob` process with container [`BUCKET`] in account [`AZURE_ACCOUNT`].
pub struct Azurite {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

impl Azurite {
    /// Starts the server and creates the container.
    pub async fn start() -> Self {
        let binary = azurite_binary();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (child, port) = spawn_listening("azurite-blob", |port| {
            let mut command = Command::new(&binary);
            command
                .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
                .arg("--location")
                .arg(dir.path())
                .args(["--skipApiVersionCheck", "--loose", "--silent"])
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            command
        })
        .await;
        let azurite = Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        client(&serde_json::json!({
            "op": "azure-create", "endpoint": azurite.endpoint, "account": AZURE_ACCOUNT,
            "key": AZURE_KEY, "container": BUCKET,
        }));
        azurite
    }

    /// A container SAS token (without the leading `?`) made by the independent client from
    /// the account key.
    pub fn sas_token(&self) -> String {
        let answer = client(&serde_json::json!({
            "op": "azure-sas", "account": AZURE_ACCOUNT, "key": AZURE_KEY,
        }));
        answer["sas"].as_str().expect("a SAS token").to_owned()
    }

    /// Writes objects.
    pub fn put(&self, objects: &[(&str, &str)]) {
        client(&serde_json::json!({
            "op": "azure-put", "endpoint": self.endpoint, "account": AZURE_ACCOUNT,
            "key": AZURE_KEY, "container": BUCKET, "objects": objects_json(objects),
        }));
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
