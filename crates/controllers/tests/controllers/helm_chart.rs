//! The HelmChart controller: charts from a HelmRepository (served over HTTP with basic auth,
//! indexed by Helm's SDK) and from a GitRepository (a chart with a `file://` dependency), with
//! values files, the Revision strategy and a missing version.

use std::collections::BTreeMap;

use capstan_api::HelmChart;
use capstan_testkit::corpus;
use kube::api::Api;

use crate::helm_repository::{ChartRepository, create_repository, create_secret};
use crate::support::{
    Env, GitServer, condition, download, request_reconcile, wait_failed, wait_for, wait_ready,
};

async fn create_chart(env: &Env, namespace: &str, name: &str, spec: serde_json::Value) {
    env.create::<HelmChart>(namespace, name, spec).await;
}

/// The GitRepository `repo` of `git`'s `main`, every minute, in `namespace`.
async fn create_git_source(env: &Env, namespace: &str, git: &GitServer) {
    env.create_git_repository(
        namespace,
        "repo",
        serde_json::json!({"url": git.url(), "interval": "1m", "ref": {"branch": "main"}}),
    )
    .await;
}

/// The HelmChart `name` of the chart at `chart` in the GitRepository `repo`, every minute,
/// with the spec fields of `extra`.
async fn create_git_chart(
    env: &Env,
    namespace: &str,
    name: &str,
    chart: &str,
    extra: serde_json::Value,
) {
    let mut spec = serde_json::json!({
        "chart": chart, "interval": "1m",
        "sourceRef": {"kind": "GitRepository", "name": "repo"},
    });
    if let serde_json::Value::Object(extra) = extra {
        spec.as_object_mut().unwrap().extend(extra);
    }
    create_chart(env, namespace, name, spec).await;
}

/// Commits the chart `name` (`<name>/Chart.yaml` = `chart_yaml`, empty values) to a new Git
/// server, and creates the GitRepository `repo` and the HelmChart `name` of it; returns the
/// HelmChart once Ready.
async fn chart_from_git(env: &Env, namespace: &str, name: &str, chart_yaml: &str) -> HelmChart {
    let git = GitServer::start().await;
    git.commit(
        &[
            (format!("{name}/Chart.yaml").as_str(), chart_yaml),
            (format!("{name}/values.yaml").as_str(), "{}\n"),
        ],
        name,
    );
    create_git_source(env, namespace, &git).await;
    create_git_chart(env, namespace, name, name, serde_json::json!({})).await;
    wait_ready(
        &Api::<HelmChart>::namespaced(env.client.clone(), namespace),
        name,
    )
    .await
}

/// A `docker-registry` with basic auth, the Secret `registry` of its credentials and the OCI
/// HelmRepository `oci` of `oci://<registry>/charts` in `namespace`; returns the registry, that
/// URL and the options to push to it.
async fn oci_helm_repository(
    env: &Env,
    namespace: &str,
) -> (
    capstan_testkit::Registry,
    String,
    capstan_source::oci::RegistryOptions,
) {
    use capstan_source::oci::{Credentials, RegistryOptions};
    use capstan_testkit::{REGISTRY_PASSWORD, REGISTRY_USER, Registry};

    let registry = Registry::start_with_auth().await;
    let remote = format!("oci://{}/charts", registry.address);
    let options = RegistryOptions {
        credentials: Some(Credentials {
            username: REGISTRY_USER.to_owned(),
            password: REGISTRY_PASSWORD.to_owned(),
        }),
        insecure: true,
        ..RegistryOptions::default()
    };
    create_secret(
        env,
        namespace,
        "registry",
        &BTreeMap::from([("username", REGISTRY_USER), ("password", REGISTRY_PASSWORD)]),
    )
    .await;
    create_repository(
        env,
        namespace,
        "oci",
        serde_json::json!({
            "url": remote, "type": "oci", "insecure": true, "secretRef": {"name": "registry"},
        }),
    )
    .await;
    (registry, remote, options)
}

/// The chart stored as the artifact of `object`.
async fn stored_chart(object: HelmChart) -> capstan_helm::chart::Chart {
    let artifact = object.status.unwrap().artifact.unwrap();
    capstan_helm::chart::load_archive(&download(&artifact.url).await).unwrap()
}

fn values_of(archive: &[u8]) -> serde_json::Map<String, serde_json::Value> {
    capstan_helm::chart::load_archive(archive).unwrap().values
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn charts_from_a_helm_repository_with_basic_auth() {
    let env = Env::start().await;
    let ns = env.namespace("helmchart-repo").await;
    let repo = ChartRepository::serve(&env, &ns, "charts").await;
    let source = |chart: &str| {
        serde_json::json!({
            "chart": chart, "interval": "1m",
            "sourceRef": {"kind": "HelmRepository", "name": "charts"},
        })
    };
    let mut podinfo = source("podinfo");
    podinfo["version"] = "6.x".into();
    create_chart(&env, &ns, "podinfo", podinfo).await;
    create_chart(&env, &ns, "sealed", source("sealed-secrets")).await;
    let mut missing = source("podinfo");
    missing["version"] = "9.x".into();
    create_chart(&env, &ns, "missing", missing).await;
    let mut prod = source("podinfo");
    prod["valuesFiles"] = serde_json::json!(["values.yaml", "values-prod.yaml"]);
    create_chart(&env, &ns, "prod", prod).await;
    let mut lenient = source("podinfo");
    lenient["valuesFiles"] = serde_json::json!(["values-prod.yaml", "values-missing.yaml"]);
    lenient["ignoreMissingValuesFiles"] = true.into();
    create_chart(&env, &ns, "lenient", lenient).await;

    let api: Api<HelmChart> = Api::namespaced(env.client.clone(), &ns);
    let pulled = wait_ready(&api, "podinfo").await;
    let status = pulled.status.clone().unwrap();
    let artifact = status.artifact.clone().unwrap();
    assert_eq!(artifact.revision, "6.14.1");
    assert_eq!(
        artifact.path,
        format!("helmchart/{ns}/podinfo/podinfo-6.14.1.tgz")
    );
    assert_eq!(
        condition(&pulled, "Ready").unwrap(),
        (
            "True".into(),
            "ChartPullSucceeded".into(),
            "pulled 'podinfo' chart with version '6.14.1'".into()
        )
    );
    assert_eq!(status.observed_chart_name.as_deref(), Some("podinfo"));
    let repository = Api::<capstan_api::HelmRepository>::namespaced(env.client.clone(), &ns)
        .get("charts")
        .await
        .unwrap();
    assert_eq!(
        status.observed_source_artifact_revision,
        repository.status.unwrap().artifact.map(|a| a.revision)
    );
    // Without values files the chart is kept as Helm packaged it, byte for byte.
    assert_eq!(
        download(&artifact.url).await,
        repo.file("podinfo-6.14.1.tgz")
    );

    let latest = wait_ready(&api, "sealed").await;
    assert_eq!(
        latest.status.unwrap().artifact.unwrap().revision,
        "2.18.5",
        "`*` is the latest"
    );

    let failed = wait_failed(&api, "missing").await;
    let (_, reason, message) = condition(&failed, "Ready").unwrap();
    assert_eq!(reason, "InvalidChartReference");
    assert!(
        message.contains("no 'podinfo' chart with version matching '9.x' found"),
        "{message}"
    );
    assert!(
        condition(&failed, "Stalled").is_some_and(|(s, ..)| s == "True"),
        "a missing version waits for a spec change"
    );
    assert!(condition(&failed, "FetchFailed").is_some_and(|(s, ..)| s == "True"));

    let packaged = wait_ready(&api, "prod").await;
    let (_, reason, message) = condition(&packaged, "Ready").unwrap();
    assert_eq!(reason, "ChartPackageSucceeded");
    assert_eq!(
        message,
        "packaged 'podinfo' chart with version '6.14.1+1' and merged values files [values.yaml values-prod.yaml]"
    );
    let artifact = packaged.status.unwrap().artifact.unwrap();
    assert_eq!(
        artifact.revision, "6.14.1+1",
        "values files add the generation as build metadata"
    );
    let bytes = download(&artifact.url).await;
    let chart = capstan_helm::chart::load_archive(&bytes).unwrap();
    assert_eq!(chart.metadata.version, "6.14.1+1");
    let values = values_of(&bytes);
    assert_eq!(values["hpa"]["enabled"], true, "values-prod.yaml overrides");
    assert_eq!(values["redis"]["enabled"], true);
    assert_eq!(
        values["prefix"], "/",
        "values.yaml listed first keeps the defaults"
    );

    let lenient = wait_ready(&api, "lenient").await;
    let status = lenient.status.unwrap();
    assert_eq!(
        status.observed_values_files,
        ["values-prod.yaml"],
        "the values files found"
    );
    let values = values_of(&download(&status.artifact.unwrap().url).await);
    assert_eq!(values["hpa"]["enabled"], true);
    assert!(
        values.get("prefix").is_none(),
        "values files replace values.yaml (Flux's alternative values)"
    );

    // A new version in the repository: the index's new revision brings the chart along.
    let work = tempfile::tempdir().unwrap();
    let next = work.path().join("podinfo");
    copy_dir(&corpus("podinfo/src/charts/podinfo"), &next);
    let chart_yaml = std::fs::read_to_string(next.join("Chart.yaml")).unwrap();
    std::fs::write(
        next.join("Chart.yaml"),
        chart_yaml.replace("version: 6.14.1", "version: 6.15.0"),
    )
    .unwrap();
    let root = repo.server.root().to_owned();
    tokio::task::spawn_blocking(move || {
        capstan_testkit::helm_repo::sdk_repository(&[&next], &root, None)
    })
    .await
    .unwrap();
    let repositories: Api<capstan_api::HelmRepository> = Api::namespaced(env.client.clone(), &ns);
    request_reconcile(&repositories, "charts", "new-version").await;
    let upgraded = wait_for(&api, "podinfo", "version 6.15.0", |o| {
        o.status
            .as_ref()
            .and_then(|s| s.artifact.as_ref())
            .is_some_and(|a| a.revision == "6.15.0")
    })
    .await;
    assert_eq!(
        download(&upgraded.status.unwrap().artifact.unwrap().url).await,
        repo.file("podinfo-6.15.0.tgz")
    );
}

const APP_CHART: &str = "apiVersion: v2
name: app
version: 1.0.0
dependencies:
  - name: podinfo
    version: 6.x
    repository: file://../podinfo
";

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn a_chart_from_git_with_a_file_dependency_values_files_and_the_revision_strategy() {
    let env = Env::start().await;
    let ns = env.namespace("helmchart-git").await;
    let git = GitServer::start().await;
    let app = write_app_chart(&git, "greeting: hello\npodinfo:\n  replicaCount: 1\n");
    std::fs::write(
        app.join("templates/configmap.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  greeting: {{ .Values.greeting }}\n",
    )
    .unwrap();
    let commit = git.commit(
        &[(
            "envs/prod.yaml",
            "greeting: prod\npodinfo:\n  replicaCount: 3\n",
        )],
        "charts",
    );
    create_git_source(&env, &ns, &git).await;
    create_git_chart(
        &env,
        &ns,
        "app",
        "charts/app",
        serde_json::json!({
            "reconcileStrategy": "Revision",
            "valuesFiles": ["charts/app/values.yaml", "envs/prod.yaml"],
        }),
    )
    .await;
    create_git_chart(&env, &ns, "escape", "../../etc", serde_json::json!({})).await;

    let api: Api<HelmChart> = Api::namespaced(env.client.clone(), &ns);
    let ready = wait_ready(&api, "app").await;
    let status = ready.status.clone().unwrap();
    let artifact = status.artifact.clone().unwrap();
    let version = format!("1.0.0+{}.1", &commit[..12]);
    assert_eq!(
        artifact.revision, version,
        "Flux's Revision strategy: <version>+<12 hex>.<generation>"
    );
    assert_eq!(
        artifact.path,
        format!("helmchart/{ns}/app/app-{version}.tgz")
    );
    assert_eq!(
        condition(&ready, "Ready").unwrap(),
        (
            "True".into(),
            "ChartPackageSucceeded".into(),
            format!(
                "packaged 'app' chart with version '{version}' and merged values files [charts/app/values.yaml envs/prod.yaml]"
            )
        )
    );
    assert_eq!(
        status.observed_source_artifact_revision,
        Some(format!("main@sha1:{commit}"))
    );
    let bytes = download(&artifact.url).await;
    let chart = capstan_helm::chart::load_archive(&bytes).unwrap();
    assert_eq!(chart.metadata.version, version);
    let dependencies: Vec<_> = chart
        .dependencies
        .iter()
        .map(|c| (c.metadata.name.as_str(), c.metadata.version.as_str()))
        .collect();
    assert_eq!(
        dependencies,
        [("podinfo", "6.14.1")],
        "the file:// dependency is packaged into charts/"
    );
    assert_eq!(chart.values["greeting"], "prod");
    assert_eq!(
        chart.values["podinfo"]["replicaCount"], 3.0,
        "numbers read as Helm reads them (float64)"
    );

    // A new commit is a new revision: a new chart version.
    let next = git.commit(&[("envs/prod.yaml", "greeting: again\n")], "values");
    env.patch(
        &ns,
        "repo",
        serde_json::json!({
            "metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "next"}},
        }),
    )
    .await;
    let updated = wait_for(&api, "app", "the new revision", |o| {
        o.status
            .as_ref()
            .and_then(|s| s.artifact.as_ref())
            .is_some_and(|a| a.revision.contains(&next[..12]))
    })
    .await;
    let bytes = download(&updated.status.unwrap().artifact.unwrap().url).await;
    assert_eq!(values_of(&bytes)["greeting"], "again");

    let refused = wait_failed(&api, "escape").await;
    let (_, reason, message) = condition(&refused, "Ready").unwrap();
    assert_eq!(reason, "InvalidChartReference");
    assert!(message.contains("is outside the source"), "{message}");
}

/// Writes into `git`'s work tree (uncommitted) podinfo's chart at `charts/podinfo` and the chart
/// `charts/app` ([`APP_CHART`], depending on it by `file://`) with `values` and an empty
/// `templates/`; returns the app chart's directory.
fn write_app_chart(git: &GitServer, values: &str) -> std::path::PathBuf {
    copy_dir(
        &corpus("podinfo/src/charts/podinfo"),
        &git.work().join("charts/podinfo"),
    );
    let app = git.work().join("charts/app");
    std::fs::create_dir_all(app.join("templates")).unwrap();
    std::fs::write(app.join("Chart.yaml"), APP_CHART).unwrap();
    std::fs::write(app.join("values.yaml"), values).unwrap();
    app
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn charts_from_an_oci_helm_repository_verified_with_cosign() {
    use capstan_source::oci::SigningKey;

    let env = Env::start().await;
    let ns = env.namespace("helmchart-oci").await;
    let (_registry, remote, options) = oci_helm_repository(&env, &ns).await;
    let podinfo =
        capstan_helm::chart::package::package(&corpus("podinfo/src/charts/podinfo")).unwrap();
    let sealed =
        capstan_helm::chart::package::package(&corpus("helm-charts/sealed-secrets/chart")).unwrap();
    let pushed = capstan_source::helm::oci::push(&podinfo.bytes, &remote, None, &options)
        .await
        .unwrap();
    capstan_source::helm::oci::push(&sealed.bytes, &remote, None, &options)
        .await
        .unwrap();
    let key = SigningKey::generate();
    capstan_source::oci::sign(
        &format!("{remote}/podinfo@{}", pushed.digest),
        &key,
        &options,
    )
    .await
    .unwrap();

    let public = key.public_key("cosign.pub").to_pem();
    create_secret(
        &env,
        &ns,
        "cosign",
        &BTreeMap::from([("cosign.pub", public.as_str())]),
    )
    .await;
    let chart = |name: &str| {
        serde_json::json!({
            "chart": name, "interval": "1m", "version": "*",
            "sourceRef": {"kind": "HelmRepository", "name": "oci"},
            "verify": {"provider": "cosign", "secretRef": {"name": "cosign"}},
        })
    };
    create_chart(&env, &ns, "podinfo", chart("podinfo")).await;
    create_chart(&env, &ns, "unsigned", chart("sealed-secrets")).await;

    let api: Api<HelmChart> = Api::namespaced(env.client.clone(), &ns);
    let ready = wait_ready(&api, "podinfo").await;
    assert_eq!(
        condition(&ready, "Ready").unwrap(),
        (
            "True".into(),
            "ChartPullSucceeded".into(),
            "pulled 'podinfo' chart with version '6.14.1'".into()
        )
    );
    assert_eq!(
        condition(&ready, "SourceVerified").unwrap(),
        (
            "True".into(),
            "Succeeded".into(),
            "verified signature of version 6.14.1".into()
        )
    );
    let artifact = ready.status.unwrap().artifact.unwrap();
    assert_eq!(artifact.revision, "6.14.1");
    assert_eq!(
        download(&artifact.url).await,
        podinfo.bytes,
        "the pushed chart, byte for byte"
    );

    let refused = wait_failed(&api, "unsigned").await;
    let (status, reason, message) = condition(&refused, "SourceVerified").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "VerificationError")
    );
    assert!(
        message.contains("failed to verify the signature using provider 'cosign'"),
        "{message}"
    );
    assert!(
        refused.status.unwrap().artifact.is_none(),
        "an unverified chart is never stored"
    );
}

#[tokio::test]
async fn repository_dependencies_use_the_credentials_of_the_helm_repository_of_their_url() {
    let env = Env::start().await;
    let ns = env.namespace("helmchart-deps").await;
    let repo = ChartRepository::serve(&env, &ns, "charts").await;
    let chart = format!(
        "apiVersion: v2\nname: umbrella\nversion: 2.0.0\ndependencies:\n  - name: sealed-secrets\n    version: 2.x\n    repository: {}\n",
        repo.server.url()
    );
    let ready = chart_from_git(&env, &ns, "umbrella", &chart).await;
    let artifact = ready.status.as_ref().unwrap().artifact.as_ref().unwrap();
    assert_eq!(artifact.revision, "2.0.0");
    let chart = stored_chart(ready).await;
    assert_eq!(chart.dependencies[0].metadata.name, "sealed-secrets");
    assert_eq!(chart.dependencies[0].metadata.version, "2.18.5");
}

#[tokio::test]
async fn a_chart_from_a_bucket_with_the_revision_strategy() {
    use capstan_testkit::buckets::{BUCKET, Moto};

    let env = Env::start().await;
    let ns = env.namespace("helmchart-bucket").await;
    let moto = Moto::start_without_auth().await;
    moto.put(&[
        ("charts/hello/Chart.yaml", "apiVersion: v2\nname: hello\nversion: 0.3.0\n"),
        ("charts/hello/values.yaml", "message: hi\n"),
        (
            "charts/hello/templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\ndata:\n  message: {{ .Values.message }}\n",
        ),
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
    env.create::<capstan_api::Bucket>(
        &ns,
        "charts",
        serde_json::json!({
            "provider": "generic", "bucketName": BUCKET, "region": "us-east-1",
            "endpoint": moto.endpoint.trim_start_matches("http://"), "insecure": true,
            "interval": "10m", "secretRef": {"name": "s3-keys"},
        }),
    )
    .await;
    create_chart(
        &env,
        &ns,
        "hello",
        serde_json::json!({
            "chart": "charts/hello", "interval": "1m", "reconcileStrategy": "Revision",
            "sourceRef": {"kind": "Bucket", "name": "charts"},
        }),
    )
    .await;
    let api: Api<HelmChart> = Api::namespaced(env.client.clone(), &ns);
    let ready = wait_ready(&api, "hello").await;
    let status = ready.status.unwrap();
    let source = status.observed_source_artifact_revision.clone().unwrap();
    let hex = source.strip_prefix("sha256:").unwrap();
    let artifact = status.artifact.unwrap();
    assert_eq!(artifact.revision, format!("0.3.0+{}", &hex[..12]));
    let chart = capstan_helm::chart::load_archive(&download(&artifact.url).await).unwrap();
    assert_eq!(chart.metadata.name, "hello");
    assert_eq!(chart.values["message"], "hi");
}

#[tokio::test]
async fn oci_dependencies_are_pulled_with_the_oci_helm_repository_of_their_url() {
    let env = Env::start().await;
    let ns = env.namespace("helmchart-oci-deps").await;
    let (_registry, remote, options) = oci_helm_repository(&env, &ns).await;
    let sealed =
        capstan_helm::chart::package::package(&corpus("helm-charts/sealed-secrets/chart")).unwrap();
    capstan_source::helm::oci::push(&sealed.bytes, &remote, None, &options)
        .await
        .unwrap();
    let chart = format!(
        "apiVersion: v2\nname: platform\nversion: 1.2.3\ndependencies:\n  - name: sealed-secrets\n    version: 2.x\n    repository: {remote}\n"
    );
    let chart = stored_chart(chart_from_git(&env, &ns, "platform", &chart).await).await;
    assert_eq!(chart.dependencies[0].metadata.name, "sealed-secrets");
    assert_eq!(chart.dependencies[0].metadata.version, "2.18.5");
}

/// The Events of `object` in `namespace` as `kubectl events` lists them: (type, reason, note,
/// how many times: a repeated Event is one object with a series count).
async fn chart_events(
    env: &Env,
    namespace: &str,
    object: &str,
) -> Vec<(String, String, String, i32)> {
    let api: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(env.client.clone(), namespace);
    let mut events: Vec<_> = api
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(object))
        .collect();
    events.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
    events
        .into_iter()
        .map(|e| {
            let count = e.series.as_ref().map_or(1, |s| s.count);
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
                count,
            )
        })
        .collect()
}

/// Flux's Events and stable URL: a packaged chart with dependencies announces
/// `ResolvedDependencies` then `ChartPackageSucceeded` with the build summary; `status.url` is the
/// stable `latest.tar.gz` serving the current package; the same version rebuilt with new
/// content (a new generation) is a new artifact under the same `Ready`, announced again.
#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn flux_events_and_the_stable_latest_url() {
    let env = Env::start().await;
    let ns = env.namespace("helmchart-events").await;
    let git = GitServer::start().await;
    write_app_chart(&git, "greeting: hello\n");
    git.commit(
        &[(
            "charts/app/templates/configmap.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n",
        )],
        "charts",
    );
    create_git_source(&env, &ns, &git).await;
    create_git_chart(&env, &ns, "app", "charts/app", serde_json::json!({})).await;
    let api: Api<HelmChart> = Api::namespaced(env.client.clone(), &ns);
    let ready = wait_ready(&api, "app").await;
    let status = ready.status.clone().unwrap();
    let artifact = status.artifact.clone().unwrap();
    let summary = "packaged 'app' chart with version '1.0.0'";
    let url = status.url.clone().unwrap();
    assert_eq!(
        url,
        artifact.url.replace("app-1.0.0.tgz", "latest.tar.gz"),
        "Flux's status.url: the stable latest.tar.gz beside the artifact"
    );
    assert_eq!(download(&url).await, download(&artifact.url).await);

    let announced = |events: &[(String, String, String, i32)]| -> i32 {
        events
            .iter()
            .filter(|e| e.1 == "ChartPackageSucceeded" && e.2 == summary)
            .map(|e| e.3)
            .sum()
    };
    let events = capstan_testkit::eventually(
        std::time::Duration::from_secs(20),
        "the build's Events",
        || async {
            let events = chart_events(&env, &ns, "app").await;
            (announced(&events) == 1).then_some(events)
        },
    )
    .await;
    let resolved = events
        .iter()
        .position(|e| e.1 == "ResolvedDependencies")
        .unwrap_or_else(|| panic!("no ResolvedDependencies in {events:#?}"));
    assert_eq!(
        events[resolved],
        (
            "Normal".to_owned(),
            "ResolvedDependencies".to_owned(),
            "resolved 1 chart dependencies".to_owned(),
            1
        )
    );
    let package = events
        .iter()
        .position(|e| e.1 == "ChartPackageSucceeded")
        .unwrap();
    assert!(resolved < package, "{events:#?}");
    assert_eq!(events[package].0, "Normal");

    // New content under the same version: kept until the generation changes (as Flux), then
    // a new artifact with the same Ready, announced once more.
    git.commit(
        &[(
            "charts/app/templates/configmap.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-renamed\n",
        )],
        "new template, same version",
    );
    env.patch(
        &ns,
        "repo",
        serde_json::json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "1"}}}),
    )
    .await;
    wait_for(&env.git_repositories(&ns), "repo", "the new commit", |o| {
        o.status
            .as_ref()
            .and_then(|s| s.artifact.as_ref())
            .is_some_and(|a| {
                a.revision
                    != status
                        .observed_source_artifact_revision
                        .clone()
                        .unwrap_or_default()
            })
    })
    .await;
    api.patch(
        "app",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {"interval": "2m"}})),
    )
    .await
    .unwrap();
    let rebuilt = wait_for(&api, "app", "a new digest", |o| {
        o.status.as_ref().is_some_and(|s| {
            s.observed_generation == Some(2)
                && s.artifact
                    .as_ref()
                    .is_some_and(|a| a.digest != artifact.digest)
        })
    })
    .await;
    assert_eq!(
        condition(&rebuilt, "Ready").unwrap(),
        (
            "True".into(),
            "ChartPackageSucceeded".into(),
            summary.into()
        )
    );
    let rebuilt_url = rebuilt.status.unwrap().artifact.unwrap().url;
    assert_eq!(download(&url).await, download(&rebuilt_url).await);
    capstan_testkit::eventually(
        std::time::Duration::from_secs(20),
        "the new artifact announced",
        || async { (announced(&chart_events(&env, &ns, "app").await) == 2).then_some(()) },
    )
    .await;
}
