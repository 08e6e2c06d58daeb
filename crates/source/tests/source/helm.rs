//! Helm chart repositories and chart builds against a repository served over HTTP on
//! 127.0.0.1 whose charts and `index.yaml` Helm's own SDK wrote.

use std::path::Path;

use capstan_source::helm::Error;
use capstan_source::helm::build::{BuildErrorReason, BuildOptions, build_local};
use capstan_source::helm::dependencies::DependencyOptions;
use capstan_source::helm::repository::{ClientOptions, Repository};
use capstan_testkit::corpus;
use capstan_testkit::helm_repo::{HelmRepoServer, sdk_repository};
use sha2::Digest as _;

const USER: &str = "reader";
const PASSWORD: &str = "hunter2-chart";

fn hex_of(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn basic() -> ClientOptions {
    ClientOptions {
        basic_auth: Some((USER.to_owned(), PASSWORD.to_owned())),
        ..ClientOptions::default()
    }
}

async fn sdk_repo(dir: &Path, base_url: Option<String>) -> Vec<String> {
    let podinfo = corpus("podinfo/src/charts/podinfo");
    let out = dir.to_owned();
    tokio::task::spawn_blocking(move || sdk_repository(&[&podinfo], &out, base_url.as_deref()))
        .await
        .unwrap()
}

#[tokio::test]
async fn the_sdk_index_and_its_charts_are_read_with_basic_auth() {
    let dir = tempfile::tempdir().unwrap();
    let packages = sdk_repo(dir.path(), None).await;
    assert_eq!(packages, ["podinfo-6.14.1.tgz"]);
    let server = HelmRepoServer::start(dir.path(), Some((USER, PASSWORD))).await;

    let repository = Repository::new(&server.url(), basic()).unwrap();
    let fetched = repository.fetch_index().await.unwrap();
    let served = std::fs::read(dir.path().join("index.yaml")).unwrap();
    assert_eq!(
        fetched.revision,
        format!("sha256:{}", hex_of(&sha2::Sha256::digest(&served)))
    );
    let version = fetched.index.select("podinfo", "6.x").unwrap();
    assert_eq!(version.version, "6.14.1");
    assert!(
        !version.digest.is_empty(),
        "Helm writes the digest into the index"
    );
    let chart = repository.download_chart(version).await.unwrap();
    assert_eq!(
        chart.bytes,
        std::fs::read(dir.path().join("podinfo-6.14.1.tgz")).unwrap()
    );

    // Refused without credentials; never showing them.
    let anonymous = Repository::new(&server.url(), ClientOptions::default()).unwrap();
    let error = anonymous.fetch_index().await.unwrap_err();
    assert!(error.is_authentication(), "{error}");
    let wrong = ClientOptions {
        basic_auth: Some((USER.to_owned(), "wrong-pass".to_owned())),
        ..ClientOptions::default()
    };
    let error = Repository::new(&server.url(), wrong)
        .unwrap()
        .fetch_index()
        .await
        .unwrap_err();
    let message = capstan_source::redact::error_chain(&error);
    assert!(
        message.contains(&format!("{}/index.yaml", server.url())) && message.contains("401"),
        "{message}"
    );
    assert!(!message.contains("wrong-pass"), "{message}");

    // A chart that does not match the index's digest is refused.
    std::fs::write(dir.path().join("podinfo-6.14.1.tgz"), b"tampered").unwrap();
    let error = repository.download_chart(version).await.unwrap_err();
    assert!(matches!(error, Error::DigestMismatch { .. }), "{error}");
}

#[tokio::test]
async fn credentials_reach_chart_hosts_other_than_the_repository_only_with_pass_credentials() {
    let charts = tempfile::tempdir().unwrap();
    let index = tempfile::tempdir().unwrap();
    let chart_server = HelmRepoServer::start(charts.path(), Some((USER, PASSWORD))).await;
    sdk_repo(charts.path(), Some(chart_server.url())).await;
    std::fs::copy(
        charts.path().join("index.yaml"),
        index.path().join("index.yaml"),
    )
    .unwrap();
    let index_server = HelmRepoServer::start(index.path(), Some((USER, PASSWORD))).await;

    let repository = Repository::new(&index_server.url(), basic()).unwrap();
    let fetched = repository.fetch_index().await.unwrap();
    let version = fetched.index.select("podinfo", "*").unwrap();
    assert!(
        version.urls[0].starts_with(&chart_server.url()),
        "{:?}",
        version.urls
    );
    let error = repository.download_chart(version).await.unwrap_err();
    assert!(
        matches!(error, Error::HttpStatus { status: 401, .. }),
        "credentials stay with the repository host: {error}"
    );

    let passing = ClientOptions {
        pass_credentials: true,
        ..basic()
    };
    let repository = Repository::new(&index_server.url(), passing).unwrap();
    assert!(repository.download_chart(version).await.is_ok());
}

#[tokio::test]
async fn an_index_that_is_not_yaml_is_an_error_naming_the_url() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.yaml"), "<html>\n  not: [ an index\n").unwrap();
    let server = HelmRepoServer::start(dir.path(), None).await;
    let error = Repository::new(&server.url(), ClientOptions::default())
        .unwrap()
        .fetch_index()
        .await
        .unwrap_err();
    assert!(matches!(error, Error::InvalidIndex { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains(&format!("{}/index.yaml", server.url())),
        "{error}"
    );
}

#[tokio::test]
async fn downloads_stop_at_the_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = String::from("apiVersion: v1\nentries: {}\n");
    index.push_str(&"# padding\n".repeat(1000));
    std::fs::write(dir.path().join("index.yaml"), &index).unwrap();
    let server = HelmRepoServer::start(dir.path(), None).await;
    let small = ClientOptions {
        limits: capstan_source::artifact::Limits {
            max_archive_bytes: 1024,
            ..capstan_source::artifact::Limits::default()
        },
        ..ClientOptions::default()
    };
    let error = Repository::new(&server.url(), small)
        .unwrap()
        .fetch_index()
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::TooLarge { limit: 1024, .. }),
        "{error}"
    );
}

const APP_CHART: &str = "apiVersion: v2
name: app
version: 0.1.0
dependencies:
  - name: podinfo
    version: '>=6.0.0'
    repository: file://../podinfo
";

fn source_tree() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    copy_dir(
        &corpus("podinfo/src/charts/podinfo"),
        &root.path().join("charts/podinfo"),
    );
    let app = root.path().join("charts/app");
    std::fs::create_dir_all(app.join("templates")).unwrap();
    std::fs::write(app.join("Chart.yaml"), APP_CHART).unwrap();
    std::fs::write(app.join("values.yaml"), "a: 1\nb: {c: 2}\n").unwrap();
    std::fs::write(app.join("templates/cm.yaml"), "kind: ConfigMap\n").unwrap();
    std::fs::write(root.path().join("prod.yaml"), "b: {d: 3}\n").unwrap();
    root
}

#[tokio::test]
async fn a_local_chart_is_built_with_its_file_dependency_values_and_version_metadata() {
    let root = source_tree();
    let options = BuildOptions {
        values_files: vec![
            "charts/app/values.yaml".into(),
            "prod.yaml".into(),
            "missing.yaml".into(),
        ],
        ignore_missing_values_files: true,
        version_metadata: Some("abcdef012345.2".into()),
    };
    let built = build_local(
        root.path(),
        "charts/app",
        &options,
        &DependencyOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(built.version, "0.1.0+abcdef012345.2");
    assert_eq!(built.file_name(), "app-0.1.0+abcdef012345.2.tgz");
    assert_eq!(built.values_files, ["charts/app/values.yaml", "prod.yaml"]);
    assert_eq!(built.dependencies.len(), 1);
    let chart = capstan_helm::chart::load_archive(&built.bytes).unwrap();
    assert_eq!(chart.metadata.version, "0.1.0+abcdef012345.2");
    assert_eq!(chart.dependencies[0].metadata.name, "podinfo");
    assert_eq!(
        serde_json::Value::Object(chart.values),
        serde_json::json!({"a": 1.0, "b": {"c": 2.0, "d": 3.0}})
    );
    // The source tree is left as it was.
    assert!(!root.path().join("charts/app/charts").exists());

    let strict = BuildOptions {
        values_files: vec!["missing.yaml".into()],
        ..BuildOptions::default()
    };
    let error = build_local(
        root.path(),
        "charts/app",
        &strict,
        &DependencyOptions::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(error.reason, BuildErrorReason::ValuesFilesMerge);
    assert!(
        error
            .to_string()
            .contains("no values file found at path 'missing.yaml'"),
        "{error}"
    );
}

#[tokio::test]
async fn nothing_outside_the_source_is_read() {
    let root = source_tree();
    let outside = tempfile::tempdir().unwrap();
    copy_dir(
        &corpus("podinfo/src/charts/podinfo"),
        &outside.path().join("podinfo"),
    );
    let escape = format!(
        "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n  - name: podinfo\n    version: '*'\n    repository: file://../../../{}\n",
        outside.path().file_name().unwrap().to_string_lossy()
    );
    std::fs::write(root.path().join("charts/app/Chart.yaml"), escape).unwrap();
    let error = build_local(
        root.path(),
        "charts/app",
        &BuildOptions::default(),
        &DependencyOptions::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(error.reason, BuildErrorReason::DependencyBuild);
    assert!(error.to_string().contains("outside the source"), "{error}");

    let error = build_local(
        root.path(),
        "../x",
        &BuildOptions::default(),
        &DependencyOptions::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(error.reason, BuildErrorReason::ChartReference);

    std::os::unix::fs::symlink(
        outside.path(),
        root.path().join("charts/app/templates/link"),
    )
    .unwrap();
    std::fs::write(
        root.path().join("charts/app/Chart.yaml"),
        "apiVersion: v2\nname: app\nversion: 0.1.0\n",
    )
    .unwrap();
    let error = build_local(
        root.path(),
        "charts/app",
        &BuildOptions::default(),
        &DependencyOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains("outside the source"),
        "a link leaving the source: {error}"
    );
}

#[tokio::test]
async fn a_dependency_name_never_names_a_file_outside_charts() {
    // A Chart.yaml from Git is untrusted: its dependency names become archive file names.
    for name in ["../../../escaped", "sub/dir", ".."] {
        let root = source_tree();
        let chart = format!(
            "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n  - name: {name:?}\n    version: '*'\n    repository: http://127.0.0.1:9/charts\n"
        );
        std::fs::write(root.path().join("charts/app/Chart.yaml"), chart).unwrap();
        let error = build_local(
            root.path(),
            "charts/app",
            &BuildOptions::default(),
            &DependencyOptions::default(),
        )
        .await
        .unwrap_err();
        assert_eq!(error.reason, BuildErrorReason::DependencyBuild, "{name}");
        assert!(
            error.to_string().contains("is not a plain chart name"),
            "{name}: {error}"
        );
        let parent = root.path().parent().unwrap();
        assert!(
            !std::fs::read_dir(parent).unwrap().any(|e| e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("escaped")),
            "{name}: a file was written outside the source"
        );
    }
}

fn copy_dir(from: &Path, to: &Path) {
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

/// The subcharts of a chart archive: name, version and template names.
fn subcharts(chart: &capstan_helm::chart::Chart) -> Vec<(String, String, Vec<String>)> {
    let mut out: Vec<_> = chart
        .dependencies
        .iter()
        .map(|c| {
            let mut templates: Vec<String> = c.templates.iter().map(|t| t.name.clone()).collect();
            templates.sort();
            (
                c.metadata.name.clone(),
                c.metadata.version.clone(),
                templates,
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn dependencies_are_what_helms_dependency_update_resolves() {
    let repo = tempfile::tempdir().unwrap();
    let (podinfo, sealed) = (
        corpus("podinfo/src/charts/podinfo"),
        corpus("helm-charts/sealed-secrets/chart"),
    );
    let out = repo.path().to_owned();
    tokio::task::spawn_blocking(move || sdk_repository(&[&podinfo, &sealed], &out, None))
        .await
        .unwrap();
    let server = HelmRepoServer::start(repo.path(), None).await;
    let root = source_tree();
    let chart_yaml = format!(
        "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n  - name: podinfo\n    version: 6.x\n    repository: file://../podinfo\n  - name: sealed-secrets\n    version: ^2.0.0\n    repository: {}\n",
        server.url()
    );
    std::fs::write(root.path().join("charts/app/Chart.yaml"), &chart_yaml).unwrap();

    let built = build_local(
        root.path(),
        "charts/app",
        &BuildOptions::default(),
        &DependencyOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(built.dependencies.len(), 2);
    let ours = capstan_helm::chart::load_archive(&built.bytes).unwrap();

    // Helm's SDK on a copy of the same tree.
    let judge = tempfile::tempdir().unwrap();
    copy_dir(&root.path().join("charts"), &judge.path().join("charts"));
    let app = judge.path().join("charts/app");
    // Off the runtime: the repository server answers the SDK from this runtime.
    let dir = app.clone();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(capstan_testkit::helm_repo::helm_python())
            .arg("-c")
            .arg("import sys, helm_python; helm_python.registry.dependency_update(sys.argv[1])")
            .arg(&dir)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let helms = capstan_helm::chart::load(&app).unwrap();
    assert_eq!(subcharts(&ours), subcharts(&helms));
    assert_eq!(
        subcharts(&ours)
            .iter()
            .map(|(n, v, _)| format!("{n}-{v}"))
            .collect::<Vec<_>>(),
        ["podinfo-6.14.1", "sealed-secrets-2.18.5"]
    );
}

/// An index Helm's SDK did not write: every `Chart.yaml` field of the index, HTML characters,
/// a time with an offset and one without `created`, a version that is not SemVer (dropped),
/// `serverInfo` and annotations.
const HAND_WRITTEN_INDEX: &str = r#"apiVersion: v1
entries:
  podinfo:
  - apiVersion: v2
    appVersion: 6.5.4
    created: "2024-01-02T03:04:05.123400+02:00"
    description: "Podinfo Helm chart for Kubernetes & <friends>\tand tabs"
    digest: abc123
    home: https://github.com/stefanprodan/podinfo
    icon: https://example.com/icon.png
    keywords: [podinfo, "go\u2028lang"]
    kubeVersion: ">=1.23.0-0"
    maintainers:
    - email: stefanprodan@users.noreply.github.com
      name: stefanprodan
    - name: other
      url: https://example.com
    name: podinfo
    sources:
    - https://github.com/stefanprodan/podinfo
    urls:
    - https://stefanprodan.github.io/podinfo/podinfo-6.5.4.tgz
    version: 6.5.4
    deprecated: true
    type: application
    annotations:
      b: "2"
      a: "1"
    dependencies:
    - name: redis
      version: 1.x
      repository: https://charts.example
      condition: redis.enabled
      tags: [cache]
      enabled: true
      import-values: [child, {parent: p, child: c}]
      alias: cache
    - name: local
  - name: podinfo
    version: 6.10.0
    urls: [podinfo-6.10.0.tgz]
  - name: podinfo
    version: not-semver
  - name: podinfo
    version: 6.10.0-rc.1
    created: "2024-05-06T07:08:09Z"
    urls: [podinfo-6.10.0-rc.1.tgz]
  zeta:
  - name: zeta
    version: 0.1.0
    created: "2023-01-01T00:00:00+00:00"
    urls: [zeta-0.1.0.tgz]
generated: "2024-01-02T03:04:05.500Z"
serverInfo:
  contextPath: /x
  b: [1, 2.5]
annotations:
  z: last
  a: first
"#;

/// The index a HelmRepository stores is Flux's, byte for byte: Helm's `IndexFile` loaded as
/// Helm loads it and written as Go's `encoding/json` writes it (`json.MarshalIndent`) — judged
/// against Helm's SDK, which loads the same served index and marshals it with Go.
#[tokio::test]
async fn the_stored_index_is_go_json_of_helms_index_file() {
    let dir = tempfile::tempdir().unwrap();
    let written = dir.path().join("written");
    let podinfo = corpus("podinfo/src/charts/podinfo");
    let sealed = corpus("helm-charts/sealed-secrets/chart");
    let out = written.clone();
    tokio::task::spawn_blocking(move || sdk_repository(&[&podinfo, &sealed], &out, None))
        .await
        .unwrap();
    let hand = dir.path().join("hand");
    std::fs::create_dir_all(&hand).unwrap();
    std::fs::write(hand.join("index.yaml"), HAND_WRITTEN_INDEX).unwrap();
    for root in [&written, &hand] {
        let server = HelmRepoServer::start(root, None).await;
        let url = format!("{}/", server.url());
        let go = tokio::task::spawn_blocking(move || {
            capstan_testkit::helm_repo::helm_sdk_ok(
                &serde_json::json!({"op": "repo_index_json", "url": url}),
            )
        })
        .await
        .unwrap();
        let go = go.as_str().unwrap();
        let repository = Repository::new(&server.url(), ClientOptions::default()).unwrap();
        let fetched = repository.fetch_index().await.unwrap();
        assert_eq!(
            fetched.index.to_go_json(0),
            go,
            "json.Marshal of Helm's IndexFile ({})",
            root.display()
        );
        // The artifact: the same, indented as json.MarshalIndent(index, "", "  ") does, and
        // still an index.
        let stored = fetched.index.to_json();
        let text = String::from_utf8(stored.clone()).unwrap();
        assert!(
            text.starts_with("{\n  \"") && text.ends_with("\n}"),
            "{text}"
        );
        let compact: String = {
            let mut out = String::new();
            let mut in_string = false;
            let mut escaped = false;
            let mut chars = text.chars().peekable();
            while let Some(c) = chars.next() {
                if in_string {
                    out.push(c);
                    match (escaped, c) {
                        (true, _) => escaped = false,
                        (false, '\\') => escaped = true,
                        (false, '"') => in_string = false,
                        _ => {}
                    }
                    continue;
                }
                match c {
                    '"' => {
                        in_string = true;
                        out.push(c);
                    }
                    '\n' => {
                        while chars.peek() == Some(&' ') {
                            chars.next();
                        }
                    }
                    ':' if chars.peek() == Some(&' ') => {
                        out.push(':');
                        chars.next();
                    }
                    c => out.push(c),
                }
            }
            out
        };
        assert_eq!(compact, go, "the indented form holds the same bytes");
        let again = capstan_source::helm::index::Index::parse(&stored).unwrap();
        assert_eq!(
            again.to_go_json(0),
            go,
            "the stored index reads back the same"
        );
    }
}
