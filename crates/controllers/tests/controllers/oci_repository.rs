//! The OCIRepository controller end to end, against a real `docker-registry`.

use std::time::Duration;

use capstan_api::OCIRepository;
use capstan_source::oci::{self, Created, Credentials, PushOptions, Pushed, RegistryOptions};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

use crate::support::{Env, Registry, eventually, http_client, tar_entries};

const SOURCE: &str = "https://github.com/example/fleet";

fn condition(object: &OCIRepository, type_: &str) -> Option<(String, String, String)> {
    object
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn ready_is(object: &OCIRepository, status: &str) -> bool {
    condition(object, "Ready").is_some_and(|(s, ..)| s == status)
}

fn revision(object: &OCIRepository) -> Option<&str> {
    Some(object.status.as_ref()?.artifact.as_ref()?.revision.as_str())
}

/// Pushes a directory holding `files` under `url:tag` (`created` at now, so contents differ).
async fn push(url: &str, tag: &str, files: &[(&str, &str)], source_revision: &str) -> Pushed {
    push_as(url, tag, files, source_revision, None).await
}

async fn push_as(
    url: &str,
    tag: &str,
    files: &[(&str, &str)],
    source_revision: &str,
    credentials: Option<Credentials>,
) -> Pushed {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let options = PushOptions {
        source: SOURCE.to_owned(),
        revision: source_revision.to_owned(),
        created: Created::Reproducible,
        ..PushOptions::default()
    };
    let registry = RegistryOptions {
        insecure: true,
        credentials,
        ..RegistryOptions::default()
    };
    oci::push(dir.path(), &format!("{url}:{tag}"), &options, &registry)
        .await
        .unwrap()
}

fn api(env: &Env, namespace: &str) -> Api<OCIRepository> {
    Api::namespaced(env.client.clone(), namespace)
}

async fn create(env: &Env, namespace: &str, name: &str, spec: serde_json::Value) {
    let object: OCIRepository = serde_json::from_value(serde_json::json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "OCIRepository",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }))
    .unwrap();
    api(env, namespace)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

async fn wait_for(
    env: &Env,
    namespace: &str,
    name: &str,
    what: &str,
    check: impl Fn(&OCIRepository) -> bool,
) -> OCIRepository {
    let api = api(env, namespace);
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

fn handled(object: &OCIRepository) -> Option<&str> {
    object
        .status
        .as_ref()?
        .reconcile_request
        .last_handled_reconcile_at
        .as_deref()
}

async fn request_reconcile(env: &Env, namespace: &str, name: &str, token: &str) {
    api(env, namespace)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
                "reconcile.fluxcd.io/requestedAt": token
            }}})),
        )
        .await
        .unwrap();
}

async fn download(url: &str) -> Vec<u8> {
    let response = http_client().get(url).send().await.unwrap();
    assert_eq!(response.status(), 200, "GET {url}");
    response.bytes().await.unwrap().to_vec()
}

#[tokio::test]
async fn latest_tag_is_stored_with_annotations_and_follows_requested_reconciles() {
    let env = Env::start().await;
    let ns = env.namespace("oci-latest").await;
    let registry = Registry::start().await;
    let url = registry.url("fleet/apps");
    let first = push(
        &url,
        "latest",
        &[("apps/config.yaml", "v: 1\n"), ("notes.md", "left out\n")],
        "main@sha1:1111111111111111111111111111111111111111",
    )
    .await;
    create(
        &env,
        &ns,
        "apps",
        serde_json::json!({"url": url, "interval": "10m", "insecure": true, "ignore": "*.md\n"}),
    )
    .await;

    let expected = format!("latest@{}", first.digest);
    let object = wait_for(&env, &ns, "apps", "Ready=True", |o| ready_is(o, "True")).await;
    assert_eq!(revision(&object), Some(expected.as_str()));
    let (_, reason, message) = condition(&object, "Ready").unwrap();
    assert_eq!(reason, "Succeeded");
    assert_eq!(message, format!("stored artifact for digest '{expected}'"));
    assert_eq!(
        condition(&object, "ArtifactInStorage").map(|c| c.0),
        Some("True".to_owned())
    );
    assert!(condition(&object, "FetchFailed").is_none());
    let status = object.status.as_ref().unwrap();
    let artifact = status.artifact.as_ref().unwrap();
    assert_eq!(
        artifact.path,
        format!(
            "ocirepository/{ns}/apps/{}.tar.gz",
            first.digest.to_string().trim_start_matches("sha256:")
        )
    );
    assert_eq!(status.url.as_deref(), Some(artifact.url.as_str()));
    assert_eq!(
        artifact
            .metadata
            .get(oci::SOURCE_ANNOTATION)
            .map(String::as_str),
        Some(SOURCE)
    );
    assert_eq!(
        artifact
            .metadata
            .get(oci::REVISION_ANNOTATION)
            .map(String::as_str),
        Some("main@sha1:1111111111111111111111111111111111111111")
    );
    let bytes = download(&artifact.url).await;
    assert_eq!(
        artifact.digest,
        capstan_source::Digest::of(&bytes).to_string()
    );
    let entries = tar_entries(&bytes);
    assert!(
        entries.iter().any(|e| e.ends_with("config.yaml")),
        "{entries:?}"
    );
    assert!(
        !entries.iter().any(|e| e.ends_with("notes.md")),
        "{entries:?}"
    );

    // An unchanged digest is not pulled again: the stored file is left as it is.
    let file = env.storage_path(&artifact.path);
    let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
    request_reconcile(&env, &ns, "apps", "now-0").await;
    let object = wait_for(&env, &ns, "apps", "the request handled", |o| {
        handled(o) == Some("now-0")
    })
    .await;
    assert_eq!(revision(&object), Some(expected.as_str()));
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        modified
    );

    // A new digest under the same tag shows up once a reconcile is requested.
    let second = push(
        &url,
        "latest",
        &[("apps/config.yaml", "v: 2\n")],
        "main@sha1:2222222222222222222222222222222222222222",
    )
    .await;
    assert_ne!(first.digest, second.digest);
    request_reconcile(&env, &ns, "apps", "now-1").await;
    let expected = format!("latest@{}", second.digest);
    let object = wait_for(&env, &ns, "apps", "the new digest", |o| {
        revision(o) == Some(expected.as_str())
    })
    .await;
    let status = object.status.as_ref().unwrap();
    assert_eq!(
        status
            .reconcile_request
            .last_handled_reconcile_at
            .as_deref(),
        Some("now-1")
    );
    let artifact = status.artifact.as_ref().unwrap();
    assert_eq!(
        artifact
            .metadata
            .get(oci::REVISION_ANNOTATION)
            .map(String::as_str),
        Some("main@sha1:2222222222222222222222222222222222222222")
    );
    assert!(env.storage_path(&artifact.path).is_file());

    // Deletion removes every stored artifact.
    api(&env, &ns)
        .delete("apps", &DeleteParams::default())
        .await
        .unwrap();
    let dir = env.storage_path(&format!("ocirepository/{ns}/apps"));
    let api = api(&env, &ns);
    eventually(Duration::from_secs(30), "deletion and cleanup", || {
        let api = api.clone();
        let dir = dir.clone();
        async move {
            let gone = api.get_opt("apps").await.ok()?.is_none();
            (gone && !dir.exists()).then_some(())
        }
    })
    .await;
    env.stop().await;
}

#[tokio::test]
async fn semver_picks_the_newest_matching_tag_and_digests_pin() {
    let env = Env::start().await;
    let ns = env.namespace("oci-semver").await;
    let registry = Registry::start().await;
    let url = registry.url("fleet/semver");
    let mut pushed = Vec::new();
    for tag in ["v1.0.0", "v1.1.0", "v2.0.0"] {
        pushed.push(push(&url, tag, &[("version.txt", tag)], tag).await);
    }
    create(
        &env,
        &ns,
        "ranged",
        serde_json::json!({"url": url, "interval": "10m", "insecure": true,
                           "ref": {"semver": ">=1.0.0 <2.0.0"}}),
    )
    .await;
    create(
        &env,
        &ns,
        "pinned",
        serde_json::json!({"url": url, "interval": "10m", "insecure": true,
                           "ref": {"digest": pushed[0].digest.to_string(), "tag": "v2.0.0"}}),
    )
    .await;

    let object = wait_for(&env, &ns, "ranged", "Ready=True", |o| ready_is(o, "True")).await;
    let expected = format!("v1.1.0@{}", pushed[1].digest);
    assert_eq!(revision(&object), Some(expected.as_str()));
    let artifact = object.status.as_ref().unwrap().artifact.as_ref().unwrap();
    let bytes = download(&artifact.url).await;
    assert!(tar_entries(&bytes).contains(&"version.txt".to_owned()));
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
    let content = archive
        .entries()
        .unwrap()
        .map(Result::unwrap)
        .find(|entry| entry.path().unwrap().ends_with("version.txt"))
        .map(|mut entry| {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            text
        });
    assert_eq!(content.as_deref(), Some("v1.1.0"));

    let object = wait_for(&env, &ns, "pinned", "Ready=True", |o| ready_is(o, "True")).await;
    let expected = pushed[0].digest.to_string();
    assert_eq!(revision(&object), Some(expected.as_str()));
    env.stop().await;
}

#[tokio::test]
async fn missing_tags_fail_the_fetch_and_verify_is_refused() {
    let env = Env::start().await;
    let ns = env.namespace("oci-missing").await;
    let registry = Registry::start().await;
    let url = registry.url("fleet/missing");
    push(&url, "v1", &[("a.txt", "a")], "v1").await;
    create(
        &env,
        &ns,
        "missing",
        serde_json::json!({"url": url, "interval": "10m", "insecure": true,
                           "ref": {"tag": "does-not-exist"}}),
    )
    .await;
    create(
        &env,
        &ns,
        "verified",
        serde_json::json!({"url": url, "interval": "10m", "insecure": true,
                           "verify": {"provider": "cosign"}}),
    )
    .await;

    let object = wait_for(&env, &ns, "missing", "Ready=False", |o| {
        ready_is(o, "False")
    })
    .await;
    let (_, reason, message) = condition(&object, "Ready").unwrap();
    assert_eq!(reason, "OCIArtifactPullFailed");
    assert!(message.contains("does-not-exist"), "{message}");
    let (status, fetch_reason, _) = condition(&object, "FetchFailed").unwrap();
    assert_eq!(
        (status.as_str(), fetch_reason.as_str()),
        ("True", "OCIArtifactPullFailed")
    );
    assert!(revision(&object).is_none());

    let object = wait_for(&env, &ns, "verified", "Stalled=True", |o| {
        condition(o, "Stalled").is_some_and(|(s, ..)| s == "True")
    })
    .await;
    let (_, reason, message) = condition(&object, "Ready").unwrap();
    assert_eq!(reason, "FeatureGateDisabled");
    assert!(message.contains("spec.verify"), "{message}");
    env.stop().await;
}

#[tokio::test]
async fn docker_config_secrets_authenticate_pulls() {
    const USER: &str = "capstan";
    const PASSWORD: &str = "s3cret-pass";
    let env = Env::start().await;
    let ns = env.namespace("oci-auth").await;
    let registry = Registry::start_with_auth(USER, PASSWORD).await;
    let url = registry.url("private/apps");
    let credentials = Credentials {
        username: USER.to_owned(),
        password: PASSWORD.to_owned(),
    };
    let pushed = push_as(&url, "v1", &[("a.txt", "a")], "v1", Some(credentials)).await;
    let docker_config = serde_json::json!({"auths": {
        registry.address.clone(): {"username": USER, "password": PASSWORD}
    }});
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "registry-auth"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": docker_config.to_string()},
    }))
    .unwrap();
    Api::<Secret>::namespaced(env.client.clone(), &ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let spec = |secret: bool| {
        let mut spec = serde_json::json!({"url": url, "interval": "10m", "insecure": true,
                                          "ref": {"tag": "v1"}});
        if secret {
            spec["secretRef"] = serde_json::json!({"name": "registry-auth"});
        }
        spec
    };
    create(&env, &ns, "with-secret", spec(true)).await;
    create(&env, &ns, "anonymous", spec(false)).await;

    let object = wait_for(&env, &ns, "with-secret", "Ready=True", |o| {
        ready_is(o, "True")
    })
    .await;
    let expected = format!("v1@{}", pushed.digest);
    assert_eq!(revision(&object), Some(expected.as_str()));

    let object = wait_for(&env, &ns, "anonymous", "Ready=False", |o| {
        ready_is(o, "False")
    })
    .await;
    let (status, reason, _) = condition(&object, "FetchFailed").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "OCIArtifactPullFailed")
    );
    env.stop().await;
}
