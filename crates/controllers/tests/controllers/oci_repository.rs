//! The OCIRepository controller end to end, against a real `docker-registry`.

use std::time::Duration;

use capstan_api::OCIRepository;
use capstan_source::oci::{
    self, Created, Credentials, PushOptions, Pushed, RegistryOptions, SigningKey,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

use crate::support::{
    Env, REGISTRY_PASSWORD as PASSWORD, REGISTRY_USER as USER, Registry, TestCa, download,
    eventually, tar_entries, wait_for,
};

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
    capstan_testkit::write_files(dir.path(), files);
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

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
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
    let object = wait_for(&api(&env, &ns), "apps", "Ready=True", |o| {
        ready_is(o, "True")
    })
    .await;
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
    let object = wait_for(&api(&env, &ns), "apps", "the request handled", |o| {
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
    let object = wait_for(&api(&env, &ns), "apps", "the new digest", |o| {
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

    let object = wait_for(&api(&env, &ns), "ranged", "Ready=True", |o| {
        ready_is(o, "True")
    })
    .await;
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

    let object = wait_for(&api(&env, &ns), "pinned", "Ready=True", |o| {
        ready_is(o, "True")
    })
    .await;
    let expected = pushed[0].digest.to_string();
    assert_eq!(revision(&object), Some(expected.as_str()));
    env.stop().await;
}

#[tokio::test]
async fn missing_tags_fail_the_fetch_and_keyless_verify_is_refused() {
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

    let object = wait_for(&api(&env, &ns), "missing", "Ready=False", |o| {
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

    let object = wait_for(&api(&env, &ns), "verified", "Stalled=True", |o| {
        condition(o, "Stalled").is_some_and(|(s, ..)| s == "True")
    })
    .await;
    let (_, reason, message) = condition(&object, "Ready").unwrap();
    assert_eq!(reason, "FeatureGateDisabled");
    assert!(
        message.contains("keyless verification is not supported yet"),
        "{message}"
    );
    let (status, reason, verified_message) = condition(&object, "SourceVerified").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "VerificationError")
    );
    assert!(
        verified_message
            .starts_with("failed to verify the signature using provider 'cosign keyless'"),
        "{verified_message}"
    );
    assert!(revision(&object).is_none());
    env.stop().await;
}

/// A semver reference no tag satisfies says so, with Flux's "failed to determine the artifact
/// tag" and what the tags offered, for a plain constraint, a `semverFilter` that keeps nothing
/// and a repository that does not exist: never a login error about a `latest` tag nobody asked
/// for.
#[tokio::test]
async fn semver_without_a_matching_tag_says_no_tag_matches() {
    let env = Env::start().await;
    let ns = env.namespace("oci-nomatch").await;
    let registry = Registry::start().await;
    let url = registry.url("fleet/nomatch");
    for tag in ["v1.0.0", "v1.1.0", "v2.0.0"] {
        push(&url, tag, &[("version.txt", tag)], tag).await;
    }
    let missing = registry.url("fleet/never-pushed");
    for (name, spec_url, reference) in [
        ("sixty-nine", &url, serde_json::json!({"semver": "69.x"})),
        (
            "filtered",
            &url,
            serde_json::json!({"semver": ">=1.0.0", "semverFilter": ".*-rc"}),
        ),
        ("missing", &missing, serde_json::json!({"semver": "1.x"})),
    ] {
        create(
            &env,
            &ns,
            name,
            serde_json::json!({"url": spec_url, "interval": "10m", "insecure": true,
                               "ref": reference}),
        )
        .await;
    }
    let mut messages = Vec::new();
    for name in ["sixty-nine", "filtered", "missing"] {
        let object = wait_for(&api(&env, &ns), name, "Ready=False", |o| {
            ready_is(o, "False")
        })
        .await;
        let (_, reason, message) = condition(&object, "Ready").unwrap();
        assert_eq!(reason, "OCIArtifactPullFailed", "{message}");
        assert!(!message.contains("latest"), "{message}");
        assert!(!message.contains("log in"), "{message}");
        messages.push(message);
    }
    assert_eq!(
        messages[0],
        format!(
            "failed to determine the artifact tag for '{url}': no tag matches semver '69.x' \
             (newest of 3 versions: v2.0.0, v1.1.0, v1.0.0)"
        )
    );
    assert_eq!(
        messages[1],
        format!(
            "failed to determine the artifact tag for '{url}': no tag matches semver '>=1.0.0' \
             (none of its 3 tags matches semverFilter '.*-rc')"
        )
    );
    assert!(
        messages[2].starts_with(&format!(
            "failed to determine the artifact tag for '{missing}': cannot list the tags of "
        )),
        "{}",
        messages[2]
    );
    env.stop().await;
}

#[tokio::test]
async fn docker_config_secrets_authenticate_pulls() {
    let env = Env::start().await;
    let ns = env.namespace("oci-auth").await;
    let registry = Registry::start_with_auth().await;
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

    let object = wait_for(&api(&env, &ns), "with-secret", "Ready=True", |o| {
        ready_is(o, "True")
    })
    .await;
    let expected = format!("v1@{}", pushed.digest);
    assert_eq!(revision(&object), Some(expected.as_str()));

    let object = wait_for(&api(&env, &ns), "anonymous", "Ready=False", |o| {
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

async fn create_secret(env: &Env, namespace: &str, name: &str, data: &[(&str, &str)]) {
    let string_data: serde_json::Map<String, serde_json::Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
        .collect();
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "type": "Opaque",
        "stringData": string_data,
    }))
    .unwrap();
    let api = Api::<Secret>::namespaced(env.client.clone(), namespace);
    if api.get_opt(name).await.unwrap().is_some() {
        api.replace(name, &PostParams::default(), &secret)
            .await
            .unwrap();
    } else {
        api.create(&PostParams::default(), &secret).await.unwrap();
    }
}

fn insecure() -> RegistryOptions {
    RegistryOptions {
        insecure: true,
        ..RegistryOptions::default()
    }
}

fn verification_failure(object: &OCIRepository) -> Option<String> {
    let (status, reason, message) = condition(object, "SourceVerified")?;
    (status == "False" && reason == "VerificationError" && ready_is(object, "False"))
        .then_some(message)
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn cosign_signatures_gate_what_is_stored() {
    let env = Env::start().await;
    let ns = env.namespace("oci-cosign").await;
    let registry = Registry::start().await;
    let url = registry.url("fleet/signed");
    let team = SigningKey::generate();
    let stranger = SigningKey::generate();

    let signed = push(&url, "signed", &[("a.txt", "signed")], "signed").await;
    oci::sign(&format!("{url}:signed"), &team, &insecure())
        .await
        .unwrap();
    let unsigned = push(&url, "unsigned", &[("a.txt", "unsigned")], "unsigned").await;
    push(&url, "foreign", &[("a.txt", "foreign")], "foreign").await;
    oci::sign(&format!("{url}:foreign"), &stranger, &insecure())
        .await
        .unwrap();
    let replayed = push(&url, "replayed", &[("a.txt", "replayed")], "replayed").await;
    registry
        .copy_manifest(
            "fleet/signed",
            &oci::cosign::signature_tag(&signed.digest),
            &oci::cosign::signature_tag(&replayed.digest),
        )
        .await;

    // Any `*.pub` key verifying is enough; other keys of the Secret are not read.
    let old_key = SigningKey::generate().public_key("old.pub").to_pem();
    let team_key = team.public_key("team.pub").to_pem();
    create_secret(
        &env,
        &ns,
        "cosign-keys",
        &[
            ("old.pub", &old_key),
            ("team.pub", &team_key),
            ("README", "not a key"),
        ],
    )
    .await;
    for tag in ["signed", "unsigned", "foreign", "replayed"] {
        create(
            &env,
            &ns,
            tag,
            serde_json::json!({"url": url, "interval": "10m", "insecure": true,
                               "ref": {"tag": tag},
                               "verify": {"provider": "cosign",
                                          "secretRef": {"name": "cosign-keys"}}}),
        )
        .await;
    }

    let object = wait_for(&api(&env, &ns), "signed", "Ready=True", |o| {
        ready_is(o, "True")
    })
    .await;
    let expected = format!("signed@{}", signed.digest);
    assert_eq!(revision(&object), Some(expected.as_str()));
    assert_eq!(
        condition(&object, "SourceVerified"),
        Some((
            "True".to_owned(),
            "Succeeded".to_owned(),
            format!("verified signature of revision {expected}")
        ))
    );

    let prefix = "failed to verify the signature using provider 'cosign': ";
    let failures = [
        ("unsigned", "no signatures found for '"),
        ("foreign", "no matching signatures were found for '"),
        ("replayed", "signature payload for '"),
    ];
    for (name, cause) in failures {
        let object = wait_for(&api(&env, &ns), name, "SourceVerified=False", |o| {
            verification_failure(o).is_some()
        })
        .await;
        let message = verification_failure(&object).unwrap();
        assert!(
            message.starts_with(&format!("{prefix}{cause}")),
            "{name}: {message}"
        );
        let (_, reason, ready_message) = condition(&object, "Ready").unwrap();
        assert_eq!(reason, "VerificationError", "{name}");
        assert_eq!(ready_message, message, "{name}");
        // Nothing was pulled or stored.
        assert!(revision(&object).is_none(), "{name}");
        assert!(
            !env.storage_path(&format!("ocirepository/{ns}/{name}"))
                .exists(),
            "{name}: nothing stored"
        );
    }
    let object = api(&env, &ns).get("unsigned").await.unwrap();
    assert!(
        verification_failure(&object)
            .unwrap()
            .contains(&unsigned.digest.to_string()),
        "the message names the artifact"
    );
    let object = api(&env, &ns).get("replayed").await.unwrap();
    let message = verification_failure(&object).unwrap();
    assert!(
        message.contains(&format!("names digest {}", signed.digest)),
        "{message}"
    );

    // An unchanged digest is not verified again (as in Flux): rotating the keys away keeps
    // the verified artifact ready...
    let stranger_key = stranger.public_key("stranger.pub").to_pem();
    create_secret(&env, &ns, "cosign-keys", &[("stranger.pub", &stranger_key)]).await;
    request_reconcile(&env, &ns, "signed", "rotated").await;
    let object = wait_for(&api(&env, &ns), "signed", "the request handled", |o| {
        handled(o) == Some("rotated")
    })
    .await;
    assert!(ready_is(&object, "True"));
    assert_eq!(revision(&object), Some(expected.as_str()));
    assert_eq!(
        condition(&object, "SourceVerified").map(|c| c.0),
        Some("True".to_owned())
    );

    // ...but a new digest is verified with the keys of now, and refused.
    let second = push(&url, "signed", &[("a.txt", "signed again")], "signed-2").await;
    oci::sign(&format!("{url}:signed"), &team, &insecure())
        .await
        .unwrap();
    request_reconcile(&env, &ns, "signed", "new-digest").await;
    let object = wait_for(&api(&env, &ns), "signed", "the new digest refused", |o| {
        handled(o) == Some("new-digest") && verification_failure(o).is_some()
    })
    .await;
    let message = verification_failure(&object).unwrap();
    assert!(
        message.contains(&second.digest.to_string()) && message.contains("stranger.pub"),
        "{message}"
    );
    assert_eq!(
        revision(&object),
        Some(expected.as_str()),
        "the last verified artifact stays"
    );

    // The team key back: the new digest verifies and is stored.
    create_secret(&env, &ns, "cosign-keys", &[("team.pub", &team_key)]).await;
    request_reconcile(&env, &ns, "signed", "team-again").await;
    let expected = format!("signed@{}", second.digest);
    let object = wait_for(&api(&env, &ns), "signed", "the new digest stored", |o| {
        revision(o) == Some(expected.as_str()) && ready_is(o, "True")
    })
    .await;
    assert_eq!(
        condition(&object, "SourceVerified").map(|c| c.2),
        Some(format!("verified signature of revision {expected}"))
    );

    // Without spec.verify the condition goes away.
    api(&env, &ns)
        .patch(
            "signed",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"verify": null}})),
        )
        .await
        .unwrap();
    wait_for(&api(&env, &ns), "signed", "SourceVerified removed", |o| {
        condition(o, "SourceVerified").is_none() && ready_is(o, "True")
    })
    .await;
    env.stop().await;
}

#[tokio::test]
async fn cert_secret_ref_ca_trusts_a_private_registry() {
    let env = Env::start().await;
    let ns = env.namespace("oci-tls").await;
    let test_ca = TestCa::new();
    let ca = test_ca.pem().to_owned();
    let registry = Registry::start_tls(&test_ca.server()).await;
    let url = registry.url("fleet/tls");
    let tls = RegistryOptions {
        ca_certificates: vec![ca.clone().into_bytes()],
        ..RegistryOptions::default()
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "over TLS").unwrap();
    let pushed = oci::push(
        dir.path(),
        &format!("{url}:v1"),
        &PushOptions::default(),
        &tls,
    )
    .await
    .unwrap();
    let key = SigningKey::generate();
    oci::sign(&format!("{url}:v1"), &key, &tls).await.unwrap();
    create_secret(&env, &ns, "registry-ca", &[("ca.crt", &ca)]).await;
    let public = key.public_key("tls.pub").to_pem();
    create_secret(&env, &ns, "cosign-keys", &[("tls.pub", &public)]).await;
    let spec = |with_ca: bool| {
        let mut spec = serde_json::json!({"url": url, "interval": "10m", "ref": {"tag": "v1"},
                                          "verify": {"provider": "cosign",
                                                     "secretRef": {"name": "cosign-keys"}}});
        if with_ca {
            spec["certSecretRef"] = serde_json::json!({"name": "registry-ca"});
        }
        spec
    };
    create(&env, &ns, "with-ca", spec(true)).await;
    create(&env, &ns, "without-ca", spec(false)).await;

    let object = wait_for(&api(&env, &ns), "with-ca", "Ready=True", |o| {
        ready_is(o, "True")
    })
    .await;
    let expected = format!("v1@{}", pushed.digest);
    assert_eq!(revision(&object), Some(expected.as_str()));
    assert_eq!(
        condition(&object, "SourceVerified").map(|c| c.0),
        Some("True".to_owned())
    );

    let object = wait_for(&api(&env, &ns), "without-ca", "Ready=False", |o| {
        ready_is(o, "False") && condition(o, "FetchFailed").is_some()
    })
    .await;
    let (_, reason, message) = condition(&object, "FetchFailed").unwrap();
    assert_eq!(reason, "OCIArtifactPullFailed");
    assert!(
        message.contains("certificate") && message.contains("UnknownIssuer"),
        "{message}"
    );
    assert!(revision(&object).is_none());

    // A client certificate cannot be presented yet: refused, never silently left out.
    let client = test_ca.client();
    create_secret(
        &env,
        &ns,
        "registry-mtls",
        &[
            ("ca.crt", &ca),
            ("tls.crt", &client.cert),
            ("tls.key", &client.key),
        ],
    )
    .await;
    let mut mtls = spec(true);
    mtls["certSecretRef"] = serde_json::json!({"name": "registry-mtls"});
    create(&env, &ns, "with-client-cert", mtls).await;
    let object = wait_for(&api(&env, &ns), "with-client-cert", "Ready=False", |o| {
        ready_is(o, "False")
    })
    .await;
    let (_, reason, message) = condition(&object, "Ready").unwrap();
    assert_eq!(reason, "AuthenticationFailed");
    assert!(
        message.contains("mutual TLS to OCI registries is not supported yet"),
        "{message}"
    );
    assert!(
        !message.contains("PRIVATE KEY"),
        "no key material in the message"
    );
    assert!(revision(&object).is_none());
    env.stop().await;
}

/// A Helm chart pushed as Helm pushes it (`capstan helm push`), selected with Helm's chart
/// layer media type and `operation: copy`: the artifact is the chart archive byte for byte (what
/// a HelmRelease `chartRef` of kind OCIRepository consumes), with Helm's annotations; extracting
/// it instead gives the chart's files.
#[tokio::test]
async fn helm_chart_layers_are_copied_unchanged() {
    let env = Env::start().await;
    let ns = env.namespace("oci-helm").await;
    let registry = Registry::start().await;
    let chart = tempfile::tempdir().unwrap();
    capstan_testkit::write_files(
        chart.path(),
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: hello\nversion: 1.2.0\n",
            ),
            ("templates/cm.yaml", "kind: ConfigMap\n"),
        ],
    );
    let packaged = capstan_helm::chart::package::package(chart.path()).unwrap();
    let pushed = capstan_source::helm::oci::push(
        &packaged.bytes,
        &registry.url("charts"),
        None,
        &insecure(),
    )
    .await
    .unwrap();
    let url = registry.url("charts/hello");
    for (name, operation) in [("copied", "copy"), ("extracted", "extract")] {
        create(
            &env,
            &ns,
            name,
            serde_json::json!({"url": url, "interval": "10m", "insecure": true,
                               "ref": {"tag": "1.2.0"},
                               "layerSelector": {
                                   "mediaType": capstan_source::helm::oci::CHART_LAYER_MEDIA_TYPE,
                                   "operation": operation}}),
        )
        .await;
    }
    let object = wait_for(&api(&env, &ns), "copied", "Ready=True", |o| {
        ready_is(o, "True")
    })
    .await;
    let artifact = object.status.as_ref().unwrap().artifact.as_ref().unwrap();
    assert_eq!(artifact.revision, format!("1.2.0@{}", pushed.digest));
    assert_eq!(download(&artifact.url).await, packaged.bytes);
    let metadata = &artifact.metadata;
    assert_eq!(metadata["org.opencontainers.image.title"], "hello");
    assert_eq!(metadata["org.opencontainers.image.version"], "1.2.0");

    let object = wait_for(&api(&env, &ns), "extracted", "Ready=True", |o| {
        ready_is(o, "True")
    })
    .await;
    let artifact = object.status.as_ref().unwrap().artifact.as_ref().unwrap();
    let entries = tar_entries(&download(&artifact.url).await);
    assert!(
        entries.contains(&"hello/Chart.yaml".to_owned()),
        "{entries:?}"
    );
    env.stop().await;
}
