use std::time::Duration;

use super::*;
use crate::DurationError;

fn git(spec: &str) -> GitRepository {
    serde_saphyr::from_str(&format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: podinfo\nspec:\n{spec}"
    ))
    .unwrap()
}

#[test]
fn git_repository_defaults() {
    let repo = git("  interval: 5m\n  url: https://github.com/stefanprodan/podinfo\n");
    assert_eq!(repo.interval().unwrap(), Duration::from_secs(300));
    assert_eq!(repo.requeue_after().unwrap(), Duration::from_secs(300));
    assert_eq!(repo.timeout().unwrap(), DEFAULT_TIMEOUT);
    assert_eq!(repo.reference().branch.as_deref(), Some(DEFAULT_BRANCH));
    assert_eq!(repo.provider(), GitProvider::Generic);
    assert!(!Source::suspended(&repo));
    assert!(Source::artifact(&repo).is_none());
    assert!(Source::conditions(&repo).is_empty());
}

#[test]
fn git_repository_explicit_values() {
    let repo = git(
        "  interval: 1h30m\n  timeout: 2m\n  url: ssh://git@example.com/repo\n  provider: azure\n  suspend: true\n  ref:\n    semver: \"6.3.5\"\n  verify:\n    mode: TagAndHEAD\n    secretRef:\n      name: keys\n  include:\n  - repository:\n      name: other\n",
    );
    assert_eq!(repo.interval().unwrap(), Duration::from_secs(5400));
    assert_eq!(repo.timeout().unwrap(), Duration::from_secs(120));
    let reference = repo.reference();
    assert_eq!(reference.semver.as_deref(), Some("6.3.5"));
    assert_eq!(reference.branch, None);
    assert_eq!(repo.provider(), GitProvider::Azure);
    assert!(Source::suspended(&repo));
    let mode = repo.spec.verify.as_ref().unwrap().mode();
    assert!(mode.verifies_head() && mode.verifies_tag());
    assert_eq!(repo.spec.include[0].to_path(), "other");
}

#[test]
fn git_repository_verify_mode_defaults_to_head() {
    let verify = GitRepositoryVerification {
        mode: None,
        secret_ref: LocalObjectReference { name: "k".into() },
    };
    assert_eq!(verify.mode(), GitVerificationMode::Head);
    assert!(!verify.mode().verifies_tag());
    let legacy: GitVerificationMode = serde_json::from_str("\"head\"").unwrap();
    assert_eq!(legacy, GitVerificationMode::LegacyHead);
    assert!(legacy.verifies_head());
    assert_eq!(serde_json::to_string(&legacy).unwrap(), "\"head\"");
}

#[test]
fn invalid_durations_name_the_field() {
    let repo = git("  interval: 5 minutes\n  timeout: 1d\n  url: https://example.com/x\n");
    let err = repo.interval().unwrap_err();
    assert_eq!(err.to_string(), "invalid duration in spec.interval");
    let crate::Error::InvalidDuration { source, .. } = repo.timeout().unwrap_err() else {
        panic!()
    };
    assert_eq!(
        source,
        DurationError::UnknownUnit {
            input: "1d".into(),
            unit: "d".into()
        }
    );
}

#[test]
fn oci_repository_defaults() {
    let repo: OCIRepository = serde_saphyr::from_str(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: x\nspec:\n  interval: 24h\n  url: oci://ghcr.io/org/repo\n  layerSelector:\n    mediaType: application/x\n",
    )
    .unwrap();
    assert_eq!(repo.interval().unwrap(), Duration::from_secs(86_400));
    assert_eq!(repo.timeout().unwrap(), Duration::from_secs(60));
    assert_eq!(repo.reference().tag.as_deref(), Some(DEFAULT_TAG));
    assert_eq!(repo.provider(), CloudProvider::Generic);
    assert_eq!(
        repo.spec.layer_selector.as_ref().unwrap().operation(),
        OCILayerOperation::Extract
    );
}

#[test]
fn helm_repository_interval_is_optional() {
    let repo: HelmRepository = serde_saphyr::from_str(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: x\nspec:\n  type: oci\n  url: oci://ghcr.io/org/charts\n",
    )
    .unwrap();
    assert_eq!(repo.interval().unwrap(), DEFAULT_HELM_REPOSITORY_INTERVAL);
    assert_eq!(repo.timeout().unwrap(), DEFAULT_HELM_REPOSITORY_TIMEOUT);
    assert_eq!(repo.repository_type(), HelmRepositoryType::Oci);
}

#[test]
fn helm_chart_defaults() {
    let chart: HelmChart = serde_saphyr::from_str(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmChart\nmetadata:\n  name: x\nspec:\n  chart: podinfo\n  interval: 10m\n  sourceRef:\n    kind: HelmRepository\n    name: podinfo\n",
    )
    .unwrap();
    assert_eq!(chart.version(), DEFAULT_CHART_VERSION);
    assert_eq!(chart.reconcile_strategy(), ReconcileStrategy::ChartVersion);
    assert_eq!(
        chart.spec.source_ref.kind,
        HelmChartSourceKind::HelmRepository
    );
}

#[test]
fn bucket_requires_its_fields() {
    let err = serde_json::from_value::<Bucket>(serde_json::json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "Bucket",
        "metadata": {"name": "b"}, "spec": {"interval": "1m", "endpoint": "minio:9000"},
    }))
    .unwrap_err();
    assert!(err.to_string().contains("bucketName"), "{err}");
    let bucket: Bucket = serde_json::from_value(serde_json::json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "Bucket",
        "metadata": {"name": "b"},
        "spec": {"interval": "1m", "endpoint": "minio:9000", "bucketName": "b", "provider": "aws",
                 "sts": {"provider": "aws", "endpoint": "https://sts.amazonaws.com"}},
        "status": {"artifact": {"path": "bucket/b/x.tar.gz", "url": "http://s/x.tar.gz",
                   "revision": "sha256:9c8e2c9a0d3b7f1e6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f",
                   "digest": "sha256:9c8e2c9a0d3b7f1e6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f",
                   "lastUpdateTime": "2024-05-01T10:00:00Z", "size": 42},
                   "lastHandledReconcileAt": "now"},
    }))
    .unwrap();
    assert_eq!(bucket.provider(), CloudProvider::Aws);
    assert_eq!(bucket.timeout().unwrap(), DEFAULT_TIMEOUT);
    let artifact = Source::artifact(&bucket).unwrap();
    assert_eq!(artifact.size, Some(42));
    assert!(artifact.parsed_revision().unwrap().name().is_none());
    let status = bucket.status.as_ref().unwrap();
    assert_eq!(
        status
            .reconcile_request
            .last_handled_reconcile_at
            .as_deref(),
        Some("now")
    );
    let back = serde_json::to_value(&bucket).unwrap();
    assert_eq!(back["status"]["lastHandledReconcileAt"], "now");
    assert_eq!(
        back["status"]["artifact"]["lastUpdateTime"],
        "2024-05-01T10:00:00Z"
    );
}
