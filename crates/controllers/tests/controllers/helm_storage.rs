//! Helm's Secret storage driver against Helm itself: Helm v4.2.3's Go SDK (PyPI
//! `helm-python-sdk`, driven by `crates/testkit/helm_sdk.py`) writes and reads releases in the embedded
//! control plane, and Capstan's [`HelmStorage`] reads and writes the same records.

use std::path::PathBuf;

use capstan_apiserver::{ApiServer, Config};
use capstan_controllers::helm_storage::{HelmStorage, StorageError};
use capstan_helm::release::{self, Hook, Release, Status};
use capstan_helm::{chart, engine, output};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, PostParams};
use serde_json::{Value as Json, json};

use crate::support::client_from_kubeconfig;

/// The control plane and a kubeconfig file for the SDK.
struct Cluster {
    client: kube::Client,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    _server: ApiServer,
}

impl Cluster {
    async fn start() -> Self {
        let server = ApiServer::start(Config::default())
            .await
            .expect("start the control plane");
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, server.kubeconfig()).unwrap();
        let client = client_from_kubeconfig(&server.kubeconfig()).await;
        Cluster {
            client,
            kubeconfig,
            _dir: dir,
            _server: server,
        }
    }

    async fn namespace(&self, name: &str) -> String {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
        name.to_string()
    }

    /// Runs one request of Helm's SDK (`capstan_testkit::helm_repo::helm_sdk`) in
    /// `namespace`; `Err` carries the SDK's error.
    async fn sdk(&self, namespace: &str, mut request: Json) -> Result<Json, String> {
        request["kubeconfig"] = json!(self.kubeconfig);
        request["namespace"] = json!(namespace);
        tokio::task::spawn_blocking(move || capstan_testkit::helm_repo::helm_sdk(&request))
            .await
            .unwrap()
    }
}

fn podinfo() -> PathBuf {
    capstan_testkit::corpus("podinfo/src/charts/podinfo")
}

fn map(value: Json) -> serde_json::Map<String, Json> {
    match value {
        Json::Object(map) => map,
        other => panic!("not a map: {other}"),
    }
}

/// A revision of podinfo as Helm's install or upgrade would store it: the chart, the user's
/// values, the engine's manifest (Helm's `---\n# Source: …` layout) and hooks.
fn podinfo_release(
    name: &str,
    namespace: &str,
    version: i64,
    values: &serde_json::Map<String, Json>,
) -> Release {
    let loaded = chart::load(podinfo()).unwrap();
    let options = engine::Options {
        release_name: name.to_string(),
        namespace: namespace.to_string(),
        revision: u32::try_from(version).unwrap(),
        is_install: version == 1,
        is_upgrade: version > 1,
        ..engine::Options::default()
    };
    let files = engine::render(
        &loaded,
        values,
        &options,
        &mut capstan_helm::template::Env::new(),
    )
    .unwrap();
    let (files, notes) = output::without_notes(loaded.name(), files);
    let (hooks, manifests) = output::sort_manifests(&files).unwrap();
    let mut record = Release::new(
        name,
        namespace,
        version,
        release::Chart::from_loaded(&loaded),
    );
    record.config.clone_from(values);
    record.manifest = release::manifest_text(&manifests);
    record.hooks = hooks.iter().map(Hook::from_output).collect();
    record.info.notes = notes;
    let now = jiff::Timestamp::now();
    record.info.first_deployed = Some(now);
    record.info.last_deployed = Some(now);
    record
}

/// The raw `data.release` of a record, decoded by Kubernetes' base64 only.
async fn raw_record(client: &kube::Client, namespace: &str, secret: &str) -> Secret {
    Api::<Secret>::namespaced(client.clone(), namespace)
        .get(secret)
        .await
        .unwrap()
}

#[tokio::test]
async fn capstan_reads_a_release_the_helm_sdk_installed() {
    let cluster = Cluster::start().await;
    let ns = cluster.namespace("sdk-install").await;
    let values = json!({"replicaCount": 2, "ui": {"message": "from the SDK"}});
    cluster
        .sdk(
            &ns,
            json!({"op": "install", "chart": podinfo(), "name": "web", "values": values}),
        )
        .await
        .unwrap();
    cluster
        .sdk(
            &ns,
            json!({"op": "upgrade", "chart": podinfo(), "name": "web", "values": {"replicaCount": 3}}),
        )
        .await
        .unwrap();

    let storage = HelmStorage::new(cluster.client.clone(), &ns);
    let history = storage.history("web").await.unwrap();
    let versions: Vec<(i64, Status)> = history.iter().map(|r| (r.version, r.status())).collect();
    assert_eq!(
        versions,
        [(1, Status::Superseded), (2, Status::Deployed)],
        "history as the SDK wrote it"
    );
    let first = &history[0];
    assert_eq!(first.name, "web");
    assert_eq!(first.namespace, ns);
    assert_eq!(first.config, map(values));
    assert_eq!(first.info.description, "Install complete");
    assert!(first.info.first_deployed.is_some() && first.info.last_deployed.is_some());
    assert_eq!(first.chart_name(), "podinfo");
    assert_eq!(first.chart_version(), "6.14.1");
    assert_eq!(first.app_version(), "6.14.1");
    let chart = first.chart.as_ref().unwrap();
    let metadata = chart.metadata.as_ref().unwrap();
    assert_eq!(metadata.kube_version, ">=1.23.0-0");
    assert_eq!(metadata.maintainers[0].name, "stefanprodan");
    assert!(
        chart
            .templates
            .iter()
            .any(|t| t.name == "templates/deployment.yaml"
                && String::from_utf8_lossy(&t.data).contains("kind: Deployment")),
        "the stored chart keeps its templates"
    );
    assert_eq!(chart.values["replicaCount"], json!(1));
    assert!(
        first
            .manifest
            .contains("# Source: podinfo/templates/deployment.yaml")
    );
    assert!(first.manifest.contains("replicas: 2"));
    assert!(
        first
            .hooks
            .iter()
            .any(|h| h.events == [output::HookEvent::Test] && h.kind == "Pod"),
        "the test hooks are recorded: {:?}",
        first.hooks.iter().map(|h| &h.name).collect::<Vec<_>>()
    );

    assert_capstan_stores_what_helm_stored(first);

    let last = storage.last("web").await.unwrap().unwrap();
    assert_eq!((last.version, last.status()), (2, Status::Deployed));
    assert_eq!(last.config, map(json!({"replicaCount": 3})));
    let deployed = storage.deployed("web").await.unwrap().unwrap();
    assert_eq!(deployed.version, 2);
    let got = storage.get("web", 1).await.unwrap().unwrap();
    assert_eq!(&got, first);
    assert!(storage.get("web", 9).await.unwrap().is_none());
    assert!(storage.history("absent").await.unwrap().is_empty());
    assert!(storage.deployed("absent").await.unwrap().is_none());

    // Every field the SDK wrote survives a decode and re-encode, byte for byte: Capstan's
    // JSON is Helm's (field order, omissions, number and string encodings, map key order).
    let secret = raw_record(&cluster.client, &ns, "sh.helm.release.v1.web.v2").await;
    let data = &secret.data.as_ref().unwrap()["release"].0;
    let helm_bytes = sdk_release_bytes(data);
    let our_bytes = release::to_json(&release::decode(data).unwrap()).unwrap();
    assert!(
        helm_bytes == our_bytes,
        "the re-encoded JSON differs from Helm's from byte {:?}",
        helm_bytes.iter().zip(&our_bytes).position(|(a, b)| a != b)
    );
}

/// What Capstan would store for the same install is what Helm stored: the manifest, the
/// hooks, the notes, the chart (but the files' modification times, which a loaded chart lacks).
fn assert_capstan_stores_what_helm_stored(first: &Release) {
    let ours = podinfo_release("web", &first.namespace, 1, &first.config);
    assert_eq!(
        ours.manifest, first.manifest,
        "the manifest as Helm lays it out"
    );
    // podinfo's test Pods end in `randAlphaNum 5`.
    let random = regex::Regex::new(r"-test-[a-z0-9]{5}\b").unwrap();
    let masked = |hooks: &[Hook]| -> Vec<Hook> {
        hooks
            .iter()
            .map(|hook| Hook {
                name: random.replace_all(&hook.name, "-test-RANDOM").into_owned(),
                manifest: random
                    .replace_all(&hook.manifest, "-test-RANDOM")
                    .into_owned(),
                ..hook.clone()
            })
            .collect()
    };
    assert_eq!(
        masked(&ours.hooks),
        masked(&first.hooks),
        "the hooks as Helm records them"
    );
    assert_eq!(ours.info.notes, first.info.notes);
    let mut theirs = first.chart.clone().unwrap();
    for file in theirs.templates.iter_mut().chain(theirs.files.iter_mut()) {
        file.modtime = None;
    }
    theirs.modtime = None;
    theirs.schemamodtime = None;
    assert_eq!(
        ours.chart.as_ref(),
        Some(&theirs),
        "the chart as Helm stores it"
    );
}

/// The JSON inside a record, read with nothing of Capstan's: base64, gunzip.
fn sdk_release_bytes(data: &[u8]) -> Vec<u8> {
    use base64::Engine as _;
    use std::io::Read as _;
    let compressed = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(compressed.as_slice())
        .read_to_end(&mut json)
        .unwrap();
    json
}

/// Capstan's install (revision 1) and upgrade (revision 2, with a custom label `team: web`)
/// of podinfo as `web`, written as Helm writes them: the new revision pending, the old one
/// superseded, the new one deployed.
async fn write_two_revisions(storage: &HelmStorage, ns: &str) -> (Release, Release) {
    let v1_values = map(json!({"replicaCount": 2, "ui": {"message": "one"}}));
    let mut v1 = podinfo_release("web", ns, 1, &v1_values);
    v1.set_status(Status::Deployed, "Install complete");
    storage.create(&v1).await.unwrap();

    let v2_values = map(json!({"replicaCount": 3}));
    let mut v2 = podinfo_release("web", ns, 2, &v2_values);
    v2.info.first_deployed = v1.info.first_deployed;
    v2.labels.insert("team".into(), "web".into());
    v2.set_status(Status::PendingUpgrade, "Preparing upgrade");
    storage.create(&v2).await.unwrap();
    v1.set_status(Status::Superseded, "Superseded");
    storage.update(&v1).await.unwrap();
    v2.set_status(Status::Deployed, "Upgrade complete");
    storage.update(&v2).await.unwrap();

    (v1, v2)
}

#[tokio::test]
async fn the_helm_sdk_reads_and_rolls_back_releases_capstan_wrote() {
    let cluster = Cluster::start().await;
    let ns = cluster.namespace("capstan-install").await;
    let storage = HelmStorage::new(cluster.client.clone(), &ns);

    let (v1, v2) = write_two_revisions(&storage, &ns).await;
    let (v1_values, v2_values) = (v1.config.clone(), v2.config.clone());

    // The Secrets are Helm's: name, type, labels.
    let secret = raw_record(&cluster.client, &ns, "sh.helm.release.v1.web.v2").await;
    assert_eq!(secret.type_.as_deref(), Some("helm.sh/release.v1"));
    let labels = secret.metadata.labels.clone().unwrap();
    assert_eq!(labels["name"], "web");
    assert_eq!(labels["owner"], "helm");
    assert_eq!(labels["status"], "deployed");
    assert_eq!(labels["version"], "2");
    assert!(labels.contains_key("modifiedAt"));

    // A second create of the same revision is refused, naming the Secret.
    let error = storage.create(&v2).await.unwrap_err();
    assert!(matches!(error, StorageError::Exists { .. }));
    assert!(
        error.to_string().contains("sh.helm.release.v1.web.v2"),
        "{error}"
    );

    // What `helm list`, `helm history`, `helm status` and `helm get values` show.
    let summary = |record: &Release, status: &str| {
        json!({
            "name": "web",
            "namespace": ns,
            "revision": record.version,
            "status": status,
            "notes": record.info.notes,
            "deployed_at": record.info.last_deployed.unwrap().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            "chart_name": "podinfo",
            "chart_version": "6.14.1",
            "app_version": "6.14.1",
        })
    };
    let without_labels = |mut value: Json| {
        value.as_object_mut().unwrap().remove("labels");
        value
    };
    let list = cluster.sdk(&ns, json!({"op": "list"})).await.unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "helm list: {list:?}");
    assert_eq!(without_labels(list[0].clone()), summary(&v2, "deployed"));
    let labels = &list[0]["labels"];
    assert_eq!(
        (&labels["team"], &labels["status"], &labels["version"]),
        (&json!("web"), &json!("deployed"), &json!("2")),
        "the custom label and Helm's: {labels}"
    );

    let history = cluster
        .sdk(&ns, json!({"op": "history", "name": "web"}))
        .await
        .unwrap();
    let history: Vec<Json> = history
        .as_array()
        .unwrap()
        .iter()
        .cloned()
        .map(without_labels)
        .collect();
    assert_eq!(
        history,
        [summary(&v1, "superseded"), summary(&v2, "deployed")]
    );

    let status = cluster
        .sdk(&ns, json!({"op": "status", "name": "web"}))
        .await
        .unwrap();
    assert_eq!(status["revision"], 2);
    assert_eq!(status["status"], "deployed");
    assert_eq!(status["manifest"], json!(v2.manifest));

    let values = cluster
        .sdk(&ns, json!({"op": "get_values", "name": "web"}))
        .await
        .unwrap();
    assert_eq!(values, Json::Object(v2_values.clone()));
    let values = cluster
        .sdk(
            &ns,
            json!({"op": "get_values", "name": "web", "revision": 1}),
        )
        .await
        .unwrap();
    assert_eq!(values, Json::Object(v1_values.clone()));

    // The SDK rolls back to Capstan's revision 1: revision 3 deployed with 1's values.
    cluster
        .sdk(&ns, json!({"op": "rollback", "name": "web", "version": 1}))
        .await
        .unwrap();
    let history = storage.history("web").await.unwrap();
    let versions: Vec<(i64, Status)> = history.iter().map(|r| (r.version, r.status())).collect();
    assert_eq!(
        versions,
        [
            (1, Status::Superseded),
            (2, Status::Superseded),
            (3, Status::Deployed)
        ]
    );
    assert_eq!(history[2].config, v1_values);
    assert_eq!(history[2].manifest, v1.manifest);
    assert_eq!(history[2].info.description, "Rollback to 1");
}

#[tokio::test]
async fn prune_keeps_max_history_and_the_last_deployed_revision() {
    let cluster = Cluster::start().await;
    let ns = cluster.namespace("prune").await;
    let storage = HelmStorage::new(cluster.client.clone(), &ns);
    let values = serde_json::Map::new();
    let base = podinfo_release("web", &ns, 1, &values);
    // Revision 2 is the last deployed one; 3 to 6 failed.
    for version in 1..=6 {
        let mut record = base.clone();
        record.version = version;
        let status = match version {
            1 => Status::Superseded,
            2 => Status::Deployed,
            _ => Status::Failed,
        };
        record.set_status(status, "");
        storage.create(&record).await.unwrap();
    }

    assert!(
        storage.prune("web", 0).await.unwrap().is_empty(),
        "0 keeps everything"
    );
    assert_eq!(storage.prune("web", 3).await.unwrap(), [1, 3, 4]);
    let kept: Vec<i64> = storage
        .history("web")
        .await
        .unwrap()
        .iter()
        .map(|r| r.version)
        .collect();
    assert_eq!(kept, [2, 5, 6], "the newest, and the last deployed one");
    assert!(storage.prune("web", 3).await.unwrap().is_empty());

    // Helm's SDK agrees on what is left, and prunes Capstan's records by the same rule: an
    // upgrade with maxHistory 3 keeps 2 (the last deployed), drops 5, keeps 6 and writes 7.
    let revisions = |history: Json| -> Vec<i64> {
        history
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["revision"].as_i64().unwrap())
            .collect()
    };
    let history = cluster
        .sdk(&ns, json!({"op": "history", "name": "web"}))
        .await
        .unwrap();
    assert_eq!(revisions(history), [2, 5, 6]);
    cluster
        .sdk(
            &ns,
            json!({"op": "upgrade", "chart": podinfo(), "name": "web", "max_history": 3}),
        )
        .await
        .unwrap();
    let history = cluster
        .sdk(&ns, json!({"op": "history", "name": "web"}))
        .await
        .unwrap();
    assert_eq!(revisions(history), [2, 6, 7], "Helm's own pruning");

    assert_eq!(storage.uninstall_all("web").await.unwrap(), 3);
    assert!(storage.history("web").await.unwrap().is_empty());
    let list = cluster
        .sdk(&ns, json!({"op": "list", "all_states": true}))
        .await
        .unwrap();
    assert!(list.as_array().is_none_or(Vec::is_empty), "{list}");
}

#[tokio::test]
async fn an_undecodable_record_fails_the_history_naming_the_secret() {
    let cluster = Cluster::start().await;
    let ns = cluster.namespace("corrupt").await;
    let storage = HelmStorage::new(cluster.client.clone(), &ns);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {
            "name": "sh.helm.release.v1.web.v1",
            "labels": {"name": "web", "owner": "helm", "status": "deployed", "version": "1"},
        },
        "type": "helm.sh/release.v1",
        // base64 of plain JSON whose status is not Helm's: {"name":"web","info":{"status":"hunter2"}}
        "stringData": {"release": "eyJuYW1lIjoid2ViIiwiaW5mbyI6eyJzdGF0dXMiOiJodW50ZXIyIn19"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(cluster.client.clone(), &ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let error = storage.history("web").await.unwrap_err();
    let message = capstan_source::redact::error_chain(&error);
    assert!(message.contains("sh.helm.release.v1.web.v1"), "{message}");
    assert!(message.contains("data.release"), "{message}");
    assert!(message.contains("info.status"), "{message}");
    assert!(
        !message.contains("hunter2"),
        "no payload in errors: {message}"
    );
}

#[tokio::test]
async fn capstan_upgrades_a_release_the_helm_sdk_installed_keeping_its_history() {
    let cluster = Cluster::start().await;
    let ns = cluster.namespace("adopt").await;
    let storage = HelmStorage::new(cluster.client.clone(), &ns);
    cluster
        .sdk(
            &ns,
            json!({"op": "install", "chart": podinfo(), "name": "web", "values": {"replicaCount": 2}}),
        )
        .await
        .unwrap();
    let record = |version| {
        let client = cluster.client.clone();
        let ns = ns.clone();
        async move {
            let secret = raw_record(&client, &ns, &release::storage_key("web", version)).await;
            serde_json::from_slice::<Json>(&sdk_release_bytes(
                &secret.data.as_ref().unwrap()["release"].0,
            ))
            .unwrap()
        }
    };
    let helm_v1 = record(1).await;

    // Capstan's upgrade over Helm's revision 1.
    let mut v1 = storage.deployed("web").await.unwrap().unwrap();
    assert_eq!(v1.version, 1);
    let mut v2 = podinfo_release("web", &ns, 2, &map(json!({"replicaCount": 4})));
    v2.info.first_deployed = v1.info.first_deployed;
    v2.set_status(Status::PendingUpgrade, "Preparing upgrade");
    storage.create(&v2).await.unwrap();
    v1.set_status(Status::Superseded, "Superseded");
    storage.update(&v1).await.unwrap();
    v2.set_status(Status::Deployed, "Upgrade complete");
    storage.update(&v2).await.unwrap();

    // Helm's record keeps everything Helm wrote but the status Capstan changed.
    let mut expected = helm_v1;
    expected["info"]["status"] = json!("superseded");
    expected["info"]["description"] = json!("Superseded");
    assert_eq!(record(1).await, expected);

    let history = cluster
        .sdk(&ns, json!({"op": "history", "name": "web"}))
        .await
        .unwrap();
    let summary: Vec<(i64, &str)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["revision"].as_i64().unwrap(),
                r["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(summary, [(1, "superseded"), (2, "deployed")]);
    let values = cluster
        .sdk(&ns, json!({"op": "get_values", "name": "web"}))
        .await
        .unwrap();
    assert_eq!(values, json!({"replicaCount": 4}));

    // And Helm carries on from Capstan's revision.
    cluster
        .sdk(
            &ns,
            json!({"op": "upgrade", "chart": podinfo(), "name": "web", "values": {"replicaCount": 5}}),
        )
        .await
        .unwrap();
    let versions: Vec<(i64, Status)> = storage
        .history("web")
        .await
        .unwrap()
        .iter()
        .map(|r| (r.version, r.status()))
        .collect();
    assert_eq!(
        versions,
        [
            (1, Status::Superseded),
            (2, Status::Superseded),
            (3, Status::Deployed)
        ]
    );
}
