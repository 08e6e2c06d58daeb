//! The HelmRepository controller against a chart repository served over HTTP with basic auth,
//! whose charts and `index.yaml` Helm's own SDK wrote (`helm package`, `helm repo index`).

use std::collections::BTreeMap;

use capstan_api::HelmRepository;
use capstan_testkit::corpus;
use capstan_testkit::helm_repo::{HelmRepoServer, sdk_repository};
use kube::api::Api;
use sha2::Digest as _;

use crate::support::{
    Env, condition, download, request_reconcile, wait_failed, wait_for, wait_ready,
};

pub const USER: &str = "chart-reader";
pub const PASSWORD: &str = "s3cr3t-chart-pass";

/// A chart repository of podinfo (../shared/corpus/podinfo) and sealed-secrets
/// (../shared/corpus/helm-charts), packaged and indexed by Helm's SDK, served with basic auth.
pub struct ChartRepository {
    pub server: HelmRepoServer,
    pub packages: Vec<String>,
    _dir: tempfile::TempDir,
}

impl ChartRepository {
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let podinfo = corpus("podinfo/src/charts/podinfo");
        let sealed = corpus("helm-charts/sealed-secrets/chart");
        let out = dir.path().join("repo");
        let packages =
            tokio::task::spawn_blocking(move || sdk_repository(&[&podinfo, &sealed], &out, None))
                .await
                .unwrap();
        let server = HelmRepoServer::start(&dir.path().join("repo"), Some((USER, PASSWORD))).await;
        Self {
            server,
            packages,
            _dir: dir,
        }
    }

    /// [`ChartRepository::start`], with the Secret `auth` holding its credentials and the
    /// HelmRepository `name` (every minute, `secretRef: auth`) in `namespace`.
    pub async fn serve(env: &Env, namespace: &str, name: &str) -> Self {
        let repo = Self::start().await;
        create_secret(
            env,
            namespace,
            "auth",
            &BTreeMap::from([("username", USER), ("password", PASSWORD)]),
        )
        .await;
        create_repository(
            env,
            namespace,
            name,
            serde_json::json!({
                "url": repo.server.url(), "interval": "1m", "secretRef": {"name": "auth"},
            }),
        )
        .await;
        repo
    }

    pub fn file(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.server.root().join(name)).unwrap()
    }
}

pub async fn create_secret(env: &Env, namespace: &str, name: &str, data: &BTreeMap<&str, &str>) {
    env.create_secret(namespace, name, data).await;
}

pub async fn create_repository(env: &Env, namespace: &str, name: &str, spec: serde_json::Value) {
    env.create::<HelmRepository>(namespace, name, spec).await;
}

fn hex_of(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

#[tokio::test]
async fn the_index_helm_wrote_is_stored_and_a_wrong_password_is_reported_without_it() {
    let env = Env::start().await;
    let ns = env.namespace("helmrepo").await;
    let repo = ChartRepository::serve(&env, &ns, "charts").await;
    create_secret(
        &env,
        &ns,
        "wrong",
        &BTreeMap::from([("username", USER), ("password", "not-the-password")]),
    )
    .await;
    create_repository(&env, &ns, "refused", serde_json::json!({
        "url": format!("{}/", repo.server.url()), "interval": "1m", "secretRef": {"name": "wrong"},
    }))
    .await;

    let api: Api<HelmRepository> = Api::namespaced(env.client.clone(), &ns);
    let ready = wait_ready(&api, "charts").await;
    let index = repo.file("index.yaml");
    let hex = hex_of(&sha2::Sha256::digest(&index));
    let artifact = ready.status.as_ref().unwrap().artifact.clone().unwrap();
    assert_eq!(
        artifact.revision,
        format!("sha256:{hex}"),
        "Flux's revision: the digest of the index as served"
    );
    assert_eq!(
        artifact.path,
        format!("helmrepository/{ns}/charts/index-{hex}.yaml")
    );
    let (_, reason, message) = condition(&ready, "Ready").unwrap();
    assert_eq!(reason, "Succeeded");
    assert_eq!(message, format!("stored artifact: revision 'sha256:{hex}'"));
    assert_eq!(
        ready.status.as_ref().unwrap().url.as_deref(),
        Some(
            artifact
                .url
                .replace(&format!("index-{hex}"), "index")
                .as_str()
        ),
        "status.url: the stable index.yaml"
    );
    // The stored index lists what Helm packaged, and matches its digest.
    let stored = download(&artifact.url).await;
    assert_eq!(
        artifact.digest,
        format!("sha256:{}", hex_of(&sha2::Sha256::digest(&stored)))
    );
    let parsed = capstan_source::helm::index::Index::parse(&stored).unwrap();
    assert_eq!(parsed.entries["podinfo"][0].version, "6.14.1");
    assert_eq!(parsed.entries["sealed-secrets"][0].version, "2.18.5");
    assert_eq!(repo.packages.len(), 2);

    let refused = wait_failed(&api, "refused").await;
    let (_, reason, message) = condition(&refused, "Ready").unwrap();
    assert_eq!(reason, "Failed");
    assert!(
        message.starts_with("failed to fetch Helm repository index: "),
        "{message}"
    );
    assert!(
        message.contains(&format!("{}/index.yaml", repo.server.url())),
        "names the repository: {message}"
    );
    assert!(message.contains("401"), "{message}");
    assert!(
        !message.contains("not-the-password") && !message.contains(USER),
        "no secret: {message}"
    );
    assert!(condition(&refused, "FetchFailed").is_some_and(|(s, ..)| s == "True"));
    assert!(refused.status.as_ref().unwrap().artifact.is_none());
}

#[tokio::test]
async fn an_index_that_is_not_yaml_is_an_error_not_an_empty_repository() {
    let env = Env::start().await;
    let ns = env.namespace("helmrepo-bad").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("index.yaml"),
        "<html><body>maintenance: [ }</body></html>\n",
    )
    .unwrap();
    let server = HelmRepoServer::start(dir.path(), None).await;
    create_repository(
        &env,
        &ns,
        "broken",
        serde_json::json!({"url": server.url(), "interval": "1m"}),
    )
    .await;
    let api: Api<HelmRepository> = Api::namespaced(env.client.clone(), &ns);
    let failed = wait_failed(&api, "broken").await;
    let (_, reason, message) = condition(&failed, "Ready").unwrap();
    assert_eq!(reason, "IndexationFailed");
    assert!(
        message.starts_with(
            "failed to load Helm repository from index YAML: invalid Helm repository index from "
        ),
        "{message}"
    );
    assert!(!message.contains("no chart"), "{message}");
    assert!(failed.status.as_ref().unwrap().artifact.is_none());
}

#[tokio::test]
async fn an_oci_repository_is_static_and_ready_without_artifact() {
    let env = Env::start().await;
    let ns = env.namespace("helmrepo-oci").await;
    create_repository(
        &env,
        &ns,
        "oci",
        serde_json::json!({
            "url": "oci://127.0.0.1:5000/charts", "type": "oci",
        }),
    )
    .await;
    let api: Api<HelmRepository> = Api::namespaced(env.client.clone(), &ns);
    let ready = wait_ready(&api, "oci").await;
    let (_, _, message) = condition(&ready, "Ready").unwrap();
    assert_eq!(message, "Helm repository is ready");
    assert!(ready.status.as_ref().unwrap().artifact.is_none());
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn cert_secret_ref_trusts_a_private_ca_and_presents_a_client_certificate() {
    let env = Env::start().await;
    let ns = env.namespace("helmrepo-tls").await;
    let dir = tempfile::tempdir().unwrap();
    let podinfo = corpus("podinfo/src/charts/podinfo");
    let out = dir.path().to_owned();
    tokio::task::spawn_blocking(move || sdk_repository(&[&podinfo], &out, None))
        .await
        .unwrap();
    let ca = capstan_testkit::TestCa::new();
    let tls = HelmRepoServer::start_tls(dir.path(), &ca.server(), None).await;
    let mutual = HelmRepoServer::start_tls(dir.path(), &ca.server(), Some(ca.pem())).await;
    let client = ca.client();
    create_secret(&env, &ns, "ca", &BTreeMap::from([("ca.crt", ca.pem())])).await;
    create_secret(
        &env,
        &ns,
        "client",
        &BTreeMap::from([
            ("ca.crt", ca.pem()),
            ("tls.crt", client.cert.as_str()),
            ("tls.key", client.key.as_str()),
        ]),
    )
    .await;
    let repository = |url: String, secret: Option<&str>| {
        let mut spec = serde_json::json!({"url": url, "interval": "1m"});
        if let Some(secret) = secret {
            spec["certSecretRef"] = serde_json::json!({"name": secret});
        }
        spec
    };
    create_repository(
        &env,
        &ns,
        "trusted",
        repository(tls.https_url(), Some("ca")),
    )
    .await;
    create_repository(&env, &ns, "untrusted", repository(tls.https_url(), None)).await;
    create_repository(
        &env,
        &ns,
        "mutual",
        repository(mutual.https_url(), Some("client")),
    )
    .await;
    create_repository(
        &env,
        &ns,
        "anonymous",
        repository(mutual.https_url(), Some("ca")),
    )
    .await;

    // Flux's deprecated form: TLS data in the secretRef Secret, with the old key names.
    create_secret(&env, &ns, "legacy", &BTreeMap::from([("caFile", ca.pem())])).await;
    let mut legacy = repository(tls.https_url(), None);
    legacy["secretRef"] = serde_json::json!({"name": "legacy"});
    create_repository(&env, &ns, "legacy", legacy).await;

    let api: Api<HelmRepository> = Api::namespaced(env.client.clone(), &ns);
    for name in ["trusted", "mutual", "legacy"] {
        let ready = wait_ready(&api, name).await;
        assert!(ready.status.unwrap().artifact.is_some(), "{name}");
    }
    for name in ["untrusted", "anonymous"] {
        let failed = wait_failed(&api, name).await;
        let (_, reason, message) = condition(&failed, "Ready").unwrap();
        assert_eq!(reason, "Failed", "{name}: {message}");
        assert!(
            message.starts_with("failed to fetch Helm repository index: cannot download https://"),
            "{name}: {message}"
        );
        assert!(!message.contains("PRIVATE KEY"), "{message}");
    }
}

/// Flux's `status.url`: the stable `index.yaml` beside the artifact, serving the current index
/// (the JSON Flux stores) and following a new revision; the previous artifact is still kept.
#[tokio::test]
async fn status_url_is_the_stable_index_yaml_and_follows_new_revisions() {
    let env = Env::start().await;
    let ns = env.namespace("helmrepo-url").await;
    let repo = ChartRepository::serve(&env, &ns, "charts").await;
    let api: Api<HelmRepository> = Api::namespaced(env.client.clone(), &ns);
    let ready = wait_ready(&api, "charts").await;
    let status = ready.status.clone().unwrap();
    let first = status.artifact.clone().unwrap();
    let url = status.url.clone().unwrap();
    assert_eq!(
        url,
        first.url.replace(
            &format!("index-{}.yaml", &first.revision[7..]),
            "index.yaml"
        )
    );
    assert!(
        url.ends_with(&format!("/helmrepository/{ns}/charts/index.yaml")),
        "{url}"
    );
    assert_eq!(download(&url).await, download(&first.url).await);

    // The same index served with other bytes is a new revision (the digest of the bytes as
    // served); the stable URL follows it.
    let mut index = repo.file("index.yaml");
    index.extend_from_slice(b"# re-generated\n");
    std::fs::write(repo.server.root().join("index.yaml"), &index).unwrap();
    request_reconcile(&api, "charts", "1").await;
    let updated = wait_for(&api, "charts", "the new revision", |o| {
        o.status
            .as_ref()
            .and_then(|s| s.artifact.as_ref())
            .is_some_and(|a| a.revision != first.revision)
    })
    .await;
    let status = updated.status.unwrap();
    let second = status.artifact.unwrap();
    assert_eq!(
        second.revision,
        format!("sha256:{}", hex_of(&sha2::Sha256::digest(&index)))
    );
    assert_eq!(status.url.as_deref(), Some(url.as_str()));
    assert_eq!(
        second.digest, first.digest,
        "the stored JSON is the same index: the same digest under another revision"
    );
    assert_ne!(second.path, first.path);
    assert_eq!(download(&url).await, download(&second.url).await);
    assert_eq!(
        download(&first.url).await,
        download(&second.url).await,
        "both kept"
    );
}
