//! Push and pull against a real `docker-registry`, checked with `skopeo`.

use capstan_source::Error;
use capstan_source::artifact::IgnoreFilter;
use capstan_source::oci::{
    self, CONFIG_MEDIA_TYPE, CONTENT_MEDIA_TYPE, CREATED_ANNOTATION, Created, Credentials,
    LayerOperation, LayerSelector, MANIFEST_MEDIA_TYPE, PullOptions, PushOptions,
    REVISION_ANNOTATION, RegistryOptions, SOURCE_ANNOTATION,
};
use serde_json::Value;

use crate::support::{PASSWORD, Registry, USER, sample_source, skopeo, tree};

const SOURCE: &str = "https://github.com/example/fleet";
const REVISION: &str = "main@sha1:0123456789abcdef0123456789abcdef01234567";

fn push_options(created: Created) -> PushOptions {
    PushOptions {
        source: SOURCE.to_owned(),
        revision: REVISION.to_owned(),
        created,
        ..PushOptions::default()
    }
}

fn insecure() -> RegistryOptions {
    RegistryOptions {
        insecure: true,
        ..RegistryOptions::default()
    }
}

fn docker_url(registry: &Registry, repository: &str) -> String {
    format!("docker://{}/{repository}", registry.address)
}

#[tokio::test]
async fn push_is_inspected_by_skopeo_and_pulls_back() {
    let registry = Registry::start().await;
    let source = sample_source();
    let url = format!("{}:v1.0.0", registry.url("fleet/apps"));
    let pushed = oci::push(
        source.path(),
        &url,
        &push_options(Created::Now),
        &insecure(),
    )
    .await
    .unwrap();
    assert_eq!(
        pushed.reference,
        format!("{}/fleet/apps@{}", registry.address, pushed.digest)
    );

    let target = format!("{}:v1.0.0", docker_url(&registry, "fleet/apps"));
    let raw = skopeo(&[
        "inspect",
        "--raw",
        "--tls-verify=false",
        "--no-creds",
        &target,
    ]);
    assert_eq!(
        capstan_source::Digest::of(raw.as_bytes()),
        pushed.digest,
        "skopeo sees the manifest we pushed"
    );
    let manifest: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(manifest["mediaType"], MANIFEST_MEDIA_TYPE);
    assert_eq!(manifest["config"]["mediaType"], CONFIG_MEDIA_TYPE);
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    assert_eq!(layers[0]["mediaType"], CONTENT_MEDIA_TYPE);
    let annotations = &manifest["annotations"];
    assert_eq!(annotations[SOURCE_ANNOTATION], SOURCE);
    assert_eq!(annotations[REVISION_ANNOTATION], REVISION);
    let created = annotations[CREATED_ANNOTATION].as_str().unwrap();
    assert!(
        created.parse::<k8s_openapi::jiff::Timestamp>().is_ok() && created.ends_with('Z'),
        "{created}"
    );

    let config = skopeo(&[
        "inspect",
        "--config",
        "--raw",
        "--tls-verify=false",
        "--no-creds",
        &target,
    ]);
    let config: Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["created"], created);
    assert_eq!(config["rootfs"]["type"], "layers");
    assert_eq!(config["rootfs"]["diff_ids"].as_array().unwrap().len(), 1);

    // Pull back by tag.
    let out = tempfile::tempdir().unwrap();
    let pulled = oci::pull(
        &url,
        &out.path().join("apps"),
        &PullOptions::default(),
        &insecure(),
    )
    .await
    .unwrap();
    assert_eq!(pulled.digest, pushed.digest);
    assert_eq!(pulled.revision, format!("v1.0.0@{}", pushed.digest));
    assert_eq!(
        pulled
            .annotations
            .get(SOURCE_ANNOTATION)
            .map(String::as_str),
        Some(SOURCE)
    );
    assert_eq!(pulled.layer.media_type, CONTENT_MEDIA_TYPE);
    assert_eq!(tree(&out.path().join("apps")), tree(source.path()));
    let hook = std::fs::metadata(out.path().join("apps/hook.sh")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&hook.permissions()) & 0o777,
        0o755
    );

    // And by digest: the revision is the bare digest.
    let by_digest = format!("{}@{}", registry.url("fleet/apps"), pushed.digest);
    let pulled = oci::pull(
        &by_digest,
        &out.path().join("by-digest"),
        &PullOptions::default(),
        &insecure(),
    )
    .await
    .unwrap();
    assert_eq!(pulled.revision, pushed.digest.to_string());
    assert_eq!(
        oci::resolve_digest(&url, &insecure()).await.unwrap(),
        pushed.digest
    );
}

#[tokio::test]
async fn ignore_paths_are_left_out() {
    let registry = Registry::start().await;
    let source = sample_source();
    let url = format!("{}:ignored", registry.url("fleet/apps"));
    let options = PushOptions {
        ignore: Some(IgnoreFilter::from_patterns("*.txt\n", "--ignore-paths").unwrap()),
        ..push_options(Created::Now)
    };
    oci::push(source.path(), &url, &options, &insecure())
        .await
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("apps");
    oci::pull(&url, &target, &PullOptions::default(), &insecure())
        .await
        .unwrap();
    assert!(!target.join("infra/notes.txt").exists());
    assert!(target.join("infra").is_dir() && target.join("apps/kustomization.yaml").is_file());
}

#[tokio::test]
async fn reproducible_pushes_give_the_same_digest() {
    let registry = Registry::start().await;
    let source = sample_source();
    let first = oci::push(
        source.path(),
        &format!("{}:one", registry.url("repro")),
        &push_options(Created::Reproducible),
        &insecure(),
    )
    .await
    .unwrap();
    // New modification times and a new tag change nothing.
    std::fs::write(
        source.path().join("apps/kustomization.yaml"),
        "resources:\n- podinfo/deployment.yaml\n",
    )
    .unwrap();
    let second = oci::push(
        source.path(),
        &format!("{}:two", registry.url("repro")),
        &push_options(Created::Reproducible),
        &insecure(),
    )
    .await
    .unwrap();
    assert_eq!(first.digest, second.digest);
    let raw = skopeo(&[
        "inspect",
        "--raw",
        "--tls-verify=false",
        "--no-creds",
        &format!("{}:two", docker_url(&registry, "repro")),
    ]);
    let manifest: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(
        manifest["annotations"][CREATED_ANNOTATION],
        "1970-01-01T00:00:00Z"
    );
    // Different content, different digest.
    std::fs::write(source.path().join("apps/new.yaml"), "new: true\n").unwrap();
    let third = oci::push(
        source.path(),
        &format!("{}:three", registry.url("repro")),
        &push_options(Created::Reproducible),
        &insecure(),
    )
    .await
    .unwrap();
    assert_ne!(first.digest, third.digest);
}

#[tokio::test]
async fn basic_auth_is_required_and_used() {
    let registry = Registry::start_with_auth().await;
    let source = sample_source();
    let url = format!("{}:v1", registry.url("private/apps"));

    let error = oci::push(
        source.path(),
        &url,
        &push_options(Created::Now),
        &insecure(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, Error::Registry { .. }), "{error}");

    let wrong = RegistryOptions {
        credentials: Some("capstan:wrong".parse().unwrap()),
        ..insecure()
    };
    assert!(
        oci::push(source.path(), &url, &push_options(Created::Now), &wrong)
            .await
            .is_err()
    );

    // Credentials as a docker config secret would carry them.
    let docker_config = serde_json::json!({"auths": {registry.address.clone(): {"username": USER, "password": PASSWORD}}});
    let credentials =
        Credentials::from_docker_config(docker_config.to_string().as_bytes(), &registry.address)
            .unwrap();
    let options = RegistryOptions {
        credentials,
        ..insecure()
    };
    let pushed = oci::push(source.path(), &url, &push_options(Created::Now), &options)
        .await
        .unwrap();

    let creds = format!("{USER}:{PASSWORD}");
    let raw = skopeo(&[
        "inspect",
        "--raw",
        "--tls-verify=false",
        "--creds",
        &creds,
        &format!("{}:v1", docker_url(&registry, "private/apps")),
    ]);
    assert_eq!(capstan_source::Digest::of(raw.as_bytes()), pushed.digest);

    let out = tempfile::tempdir().unwrap();
    let error = oci::pull(
        &url,
        &out.path().join("anon"),
        &PullOptions::default(),
        &insecure(),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, Error::Registry { .. }), "{error}");
    assert!(!out.path().join("anon").exists());
    oci::pull(
        &url,
        &out.path().join("apps"),
        &PullOptions::default(),
        &options,
    )
    .await
    .unwrap();
    assert_eq!(tree(&out.path().join("apps")), tree(source.path()));
}

#[tokio::test]
async fn a_tampered_layer_is_refused() {
    let registry = Registry::start().await;
    let source = sample_source();
    let url = format!("{}:v1", registry.url("tamper"));
    let pushed = oci::push(
        source.path(),
        &url,
        &push_options(Created::Now),
        &insecure(),
    )
    .await
    .unwrap();
    let layer = &pushed.manifest.layers[0];
    let blob = registry.blob_path(&layer.digest);
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last / 2] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();

    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("apps");
    let error = oci::pull(&url, &target, &PullOptions::default(), &insecure())
        .await
        .unwrap_err();
    match &error {
        Error::DigestMismatch {
            subject,
            expected,
            actual,
        } => {
            assert_eq!(expected, &layer.digest);
            assert_ne!(actual, &layer.digest);
            assert!(subject.contains(&layer.digest), "{subject}");
        }
        other => panic!("expected a digest mismatch, got {other}"),
    }
    assert!(
        error
            .to_string()
            .starts_with("digest mismatch for layer sha256:"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "nothing extracted, no temporary file left"
    );

    // A digest reference that does not match the manifest is refused as well.
    let wrong = format!(
        "{}@{}",
        registry.url("tamper"),
        capstan_source::Digest::of(b"other")
    );
    let error = oci::pull(&wrong, &target, &PullOptions::default(), &insecure())
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::Registry { .. } | Error::DigestMismatch { .. }),
        "{error}"
    );
    assert!(!target.exists());
}

#[tokio::test]
async fn layer_selector_copy_and_missing_media_type() {
    let registry = Registry::start().await;
    let source = sample_source();
    let url = format!("{}:v1", registry.url("select"));
    let pushed = oci::push(
        source.path(),
        &url,
        &push_options(Created::Now),
        &insecure(),
    )
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();

    let copy = PullOptions {
        layer_selector: LayerSelector {
            media_type: Some(CONTENT_MEDIA_TYPE.to_owned()),
            operation: LayerOperation::Copy,
        },
        ..PullOptions::default()
    };
    let file = out.path().join("layer.tar.gz");
    let pulled = oci::pull(&url, &file, &copy, &insecure()).await.unwrap();
    assert!(pulled.extracted.is_none());
    assert_eq!(
        capstan_source::Digest::of(&std::fs::read(&file).unwrap()).to_string(),
        pushed.manifest.layers[0].digest
    );

    let missing = PullOptions {
        layer_selector: LayerSelector {
            media_type: Some("application/x-other".to_owned()),
            ..LayerSelector::default()
        },
        ..PullOptions::default()
    };
    let error = oci::pull(&url, &out.path().join("missing"), &missing, &insecure())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::LayerNotFound { .. }), "{error}");
}

#[tokio::test]
async fn oversize_layers_are_refused_before_download() {
    let registry = Registry::start().await;
    let source = sample_source();
    let url = format!("{}:v1", registry.url("limits"));
    oci::push(
        source.path(),
        &url,
        &push_options(Created::Now),
        &insecure(),
    )
    .await
    .unwrap();
    let options = PullOptions {
        limits: capstan_source::artifact::Limits {
            max_archive_bytes: 16,
            ..Default::default()
        },
        ..PullOptions::default()
    };
    let out = tempfile::tempdir().unwrap();
    let error = oci::pull(&url, &out.path().join("apps"), &options, &insecure())
        .await
        .unwrap_err();
    assert!(matches!(error, Error::LimitExceeded { .. }), "{error}");
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}
