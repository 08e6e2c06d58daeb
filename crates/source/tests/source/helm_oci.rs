//! Chart packaging and Helm OCI charts, judged by Helm's own SDK (Helm v4.2.3 through PyPI
//! `helm-python-sdk`, driven by `crates/testkit/helm_sdk.py`): what Capstan packages and
//! pushes, Helm loads, renders and pulls; what Helm packages and pushes, Capstan loads and
//! pulls. Against a real `docker-registry` and against Capstan's own registry
//! (`oci::registry`), which `skopeo` also copies through.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use capstan_helm::chart::{self, package};
use capstan_source::helm::oci;
use capstan_source::oci::{Credentials, RegistryOptions, registry};
use serde_json::{Value, json};

use crate::support::{PASSWORD, Registry, USER};

/// Runs one request of Helm's SDK (`capstan_testkit::helm_repo::helm_sdk`) and returns its
/// answer; panics with Helm's error.
pub fn sdk(request: &Value) -> Value {
    capstan_testkit::helm_repo::helm_sdk_ok(request)
}

/// `request` with the registry credentials of `auth` (`{"user", "password"}` or `{}`).
fn authed(mut request: Value, auth: &Value) -> Value {
    if let (Some(request), Some(auth)) = (request.as_object_mut(), auth.as_object()) {
        request.extend(auth.clone());
    }
    request
}

fn podinfo() -> PathBuf {
    capstan_testkit::corpus("podinfo/src/charts/podinfo")
}

/// A chart with a subchart directory, `Chart.lock` and `values.schema.json`.
fn nginx() -> PathBuf {
    capstan_testkit::corpus("helm-charts/bitnami-nginx/chart")
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("a gzip stream");
    out
}

fn insecure() -> RegistryOptions {
    RegistryOptions {
        insecure: true,
        ..RegistryOptions::default()
    }
}

/// What Helm renders from `chart` (a directory or an archive), template path → text, with the
/// five random characters podinfo's test pods take from `randAlphaNum` masked.
fn sdk_render(chart: &Path) -> std::collections::BTreeMap<String, String> {
    let rendered = sdk(&json!({"op": "render", "chart": chart}));
    let mask = |text: &str| {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find("-test-") {
            let (head, tail) = rest.split_at(at + "-test-".len());
            out.push_str(head);
            let random = tail
                .chars()
                .take(5)
                .filter(char::is_ascii_alphanumeric)
                .count();
            if random == 5 {
                out.push_str("*****");
                rest = &tail[5..];
            } else {
                rest = tail;
            }
        }
        out.push_str(rest);
        out
    };
    rendered
        .as_object()
        .expect("templates")
        .iter()
        .map(|(path, text)| (path.clone(), mask(text.as_str().unwrap_or_default())))
        .collect()
}

/// Helm renders `chart` as it renders the directory `dir`: the same templates, the same
/// text for every template whose output does not change from one render to the next (random
/// certificates). The first differing template is named, not the whole output.
fn assert_renders_as(chart: &Path, dir: &Path, what: &str) {
    let ours = sdk_render(chart);
    let reference = sdk_render(dir);
    let again = sdk_render(dir);
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        reference.keys().collect::<Vec<_>>(),
        "{what}: templates"
    );
    let mut compared = 0;
    for (path, text) in &reference {
        if again[path] == *text {
            assert_eq!(&ours[path], text, "{what}: {path}");
            compared += 1;
        }
    }
    assert!(compared > 0, "{what}: nothing rendered the same twice");
}

/// The parts of a loaded chart a render sees, comparable.
fn shape(chart: &chart::Chart) -> Value {
    let files = |files: &[chart::File]| -> Value {
        files
            .iter()
            .map(|f| {
                (
                    f.name.clone(),
                    Value::String(String::from_utf8_lossy(&f.data).into_owned()),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    serde_json::json!({
        "name": chart.metadata.name,
        "version": chart.metadata.version,
        "appVersion": chart.metadata.app_version,
        "extra": chart.metadata.extra,
        "templates": files(&chart.templates),
        "files": files(&chart.files),
        "values": chart.values,
        "schema": chart.schema.as_deref().map(String::from_utf8_lossy),
        "dependencies": chart.dependencies.iter().map(shape).collect::<Vec<_>>(),
    })
}

#[test]
fn packages_as_helm_does_and_each_loads_the_others() {
    for dir in [podinfo(), nginx()] {
        let ours = package::package(&dir).expect("capstan packages");
        let out = tempfile::tempdir().unwrap();
        let path = ours.write_to(out.path()).expect("write");
        let helm_path = sdk(&json!({
            "op": "package", "chart": dir, "destination": out.path().join("helm"),
        }));
        let helm_path = PathBuf::from(helm_path.as_str().unwrap());
        assert_eq!(
            helm_path.file_name().unwrap().to_str().unwrap(),
            ours.file_name,
            "the archive name"
        );
        let helm_bytes = std::fs::read(&helm_path).unwrap();
        // The same tar stream: entries, order, Chart.yaml as Helm writes it, times, headers.
        assert!(
            gunzip(&ours.bytes) == gunzip(&helm_bytes),
            "{}: the tar stream differs from helm package's",
            dir.display()
        );
        // Helm loads and renders ours as it renders the directory.
        assert_renders_as(&path, &dir, &dir.display().to_string());
        // Capstan loads Helm's archive as it loads the directory.
        let from_helm = chart::load_archive(&helm_bytes).expect("capstan loads helm's archive");
        let from_dir = chart::load(&dir).expect("capstan loads the directory");
        assert_eq!(shape(&from_helm), shape(&from_dir), "{}", dir.display());
    }
}

#[test]
fn version_flags_and_ignored_files_match_helm() {
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("demo");
    capstan_testkit::write_files(
        &chart,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: demo\nversion: 0.1.0\nappVersion: \"1.0\"\nkeywords: [a, b]\nmaintainers:\n- name: Ann\n  email: ann@example.com\nannotations:\n  team: <core>\n",
            ),
            ("values.yaml", "# comments stay\nimage:\n  tag: \"1.0\"\n"),
            (
                "templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  tag: {{ .Values.image.tag | quote }}\n  app: {{ .Chart.AppVersion | quote }}\n",
            ),
            (".helmignore", "secret.txt\nscratch/\n"),
            ("secret.txt", "left out\n"),
            ("scratch/notes.md", "left out\n"),
            ("crds/crd.yaml", "kind: CustomResourceDefinition\n"),
        ],
    );
    let options = package::Options {
        version: Some("1.2.3+build.4".to_owned()),
        app_version: Some("2.0".to_owned()),
        source_date_epoch: None,
    };
    let ours = package::package_with(&chart, &options).expect("packages");
    assert_eq!(ours.file_name, "demo-1.2.3+build.4.tgz");
    let out = tempfile::tempdir().unwrap();
    let path = ours.write_to(out.path()).unwrap();
    let rendered = sdk_render(&path);
    let text = &rendered["demo/templates/cm.yaml"];
    assert!(text.contains("app: \"2.0\""), "{text}");
    let loaded = chart::load_archive(&ours.bytes).unwrap();
    assert_eq!(loaded.metadata.version, "1.2.3+build.4");
    let names: Vec<&str> = loaded.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, [".helmignore", "crds/crd.yaml"]);

    // Helm's own package of the directory: the same tar stream as ours.
    let helm_bytes = {
        let path = sdk(&json!({
            "op": "package", "chart": chart, "destination": out.path().join("helm"),
        }));
        std::fs::read(path.as_str().unwrap()).unwrap()
    };
    let plain = package::package(&chart).unwrap();
    assert!(
        gunzip(&plain.bytes) == gunzip(&helm_bytes),
        "the tar stream differs from helm package's"
    );
}

/// A subchart packed as a `.tgz` under `charts/` is written out as files, and `Chart.lock` is
/// written again with its `generated` time, as Helm does.
#[test]
fn packed_subcharts_and_locks_match_helm() {
    let work = tempfile::tempdir().unwrap();
    let sub = work.path().join("sub");
    capstan_testkit::write_files(
        &sub,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: sub\nversion: 0.1.0\n"),
            ("values.yaml", "x: 1\n"),
            ("templates/a.yaml", "kind: ConfigMap\n"),
        ],
    );
    let parent = work.path().join("parent");
    capstan_testkit::write_files(
        &parent,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: parent\nversion: 1.0.0\ndependencies:\n- name: sub\n  version: 0.1.x\n  repository: file://../sub\n",
            ),
            (
                "Chart.lock",
                "dependencies:\n- name: sub\n  repository: file://../sub\n  version: 0.1.0\ndigest: sha256:abc\ngenerated: \"2025-08-13T19:31:58.740987883Z\"\n",
            ),
            ("templates/b.yaml", "kind: Secret\n"),
        ],
    );
    sdk(&json!({"op": "package", "chart": sub, "destination": parent.join("charts")}));
    let helm = sdk(&json!({
        "op": "package", "chart": parent, "destination": work.path().join("helm"),
    }));
    let helm_bytes = std::fs::read(helm.as_str().unwrap()).unwrap();
    let ours = package::package(&parent).unwrap();
    assert!(
        gunzip(&ours.bytes) == gunzip(&helm_bytes),
        "the tar stream differs from helm package's"
    );
    let loaded = chart::load_archive(&ours.bytes).unwrap();
    assert_eq!(loaded.dependencies[0].metadata.name, "sub");
}

/// Pushes with Capstan and pulls with Helm, pushes with Helm and pulls with Capstan, on the
/// registry at `address` (plain HTTP, optional basic auth).
async fn round_trip(address: &str, credentials: Option<Credentials>) {
    let registry = RegistryOptions {
        credentials: credentials.clone(),
        ..insecure()
    };
    let auth = credentials.as_ref().map_or(
        json!({}),
        |c| json!({"user": c.username, "password": c.password}),
    );
    let work = tempfile::tempdir().unwrap();
    capstan_pushes_helm_pulls(address, &registry, &auth, work.path()).await;
    versions_are_tags_both_ways(address, &registry, &auth, work.path()).await;
}

/// Capstan packages and pushes; Helm pulls by constraint and renders the same chart. Helm
/// pushes the same archive: the same manifest digest as Capstan's push.
async fn capstan_pushes_helm_pulls(
    address: &str,
    registry: &RegistryOptions,
    auth: &Value,
    work: &Path,
) {
    let packaged = package::package(&podinfo()).unwrap();
    let remote = format!("oci://{address}/charts");
    let created = "2026-01-02T03:04:05Z";
    let pushed = oci::push(&packaged.bytes, &remote, Some(created), registry)
        .await
        .expect("capstan pushes");
    assert_eq!(
        pushed.reference,
        format!("{address}/charts/podinfo:{}", packaged.version)
    );
    let dest = work.join("pulled-by-helm");
    std::fs::create_dir_all(&dest).unwrap();
    let reference = format!("{remote}/podinfo");
    sdk(&authed(
        json!({"op": "pull", "ref": reference, "version": "6.x", "destination": dest}),
        auth,
    ));
    let pulled_path = dest.join(&packaged.file_name);
    assert_eq!(
        std::fs::read(&pulled_path).unwrap(),
        packaged.bytes,
        "the same archive"
    );
    assert_renders_as(&pulled_path, &podinfo(), "pulled by Helm");

    // Helm pushes the same archive (created = the file's time): the same manifest digest, so
    // the manifest, config and annotations are Helm's byte for byte.
    let file = work.join(&packaged.file_name);
    std::fs::write(&file, &packaged.bytes).unwrap();
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    let mtime = jiff::Timestamp::try_from(mtime).unwrap();
    let created = mtime.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let helm_remote = format!("oci://{address}/helm");
    sdk(&authed(
        json!({"op": "push", "archive": file, "remote": helm_remote}),
        auth,
    ));
    let ours = oci::push(
        &packaged.bytes,
        &format!("oci://{address}/capstan"),
        Some(&created),
        registry,
    )
    .await
    .unwrap();
    let helm_pulled = oci::pull(&format!("{helm_remote}/podinfo"), "", registry, 10 << 20)
        .await
        .expect("capstan pulls helm's chart");
    assert_eq!(helm_pulled.digest, ours.digest, "Helm's manifest and ours");
    assert_eq!(helm_pulled.bytes, packaged.bytes);
    assert_eq!(
        helm_pulled.revision,
        format!("{}@{}", packaged.version, helm_pulled.digest)
    );
}

/// Build metadata: Helm tags `+` as `_`; both read it back as `+`; constraints select among
/// the tags as Helm does.
async fn versions_are_tags_both_ways(
    address: &str,
    registry: &RegistryOptions,
    auth: &Value,
    work: &Path,
) {
    let helm_remote = format!("oci://{address}/helm");
    let chart = work.join("demo");
    capstan_testkit::write_files(
        &chart,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: demo\nversion: 0.1.0\n"),
            ("templates/cm.yaml", "kind: ConfigMap\n"),
        ],
    );
    for version in ["1.0.0", "1.1.0+build.7", "2.0.0-rc.1"] {
        let packaged = package::package_with(
            &chart,
            &package::Options {
                version: Some(version.to_owned()),
                ..package::Options::default()
            },
        )
        .unwrap();
        let path = packaged.write_to(&work.join("out")).unwrap();
        sdk(&authed(
            json!({"op": "push", "archive": path, "remote": helm_remote}),
            auth,
        ));
    }
    let demo = format!("{helm_remote}/demo");
    assert_eq!(
        oci::list_versions(&demo, registry).await.unwrap(),
        ["2.0.0-rc.1", "1.1.0+build.7", "1.0.0"]
    );
    let latest = oci::pull(&demo, "", registry, 10 << 20).await.unwrap();
    assert_eq!(
        (latest.version.as_str(), latest.tag.as_str()),
        ("1.1.0+build.7", "1.1.0_build.7")
    );
    let pre = oci::pull(&demo, ">=2.0.0-0", registry, 10 << 20)
        .await
        .unwrap();
    assert_eq!(pre.version, "2.0.0-rc.1");
    let err = oci::pull(&demo, "3.x", registry, 10 << 20)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("could not locate a version matching provided version string 3.x"),
        "{err}"
    );
    let too_small = oci::pull(&demo, "1.0.0", registry, 16).await.unwrap_err();
    assert!(
        too_small.to_string().contains("exceeds the limit"),
        "{too_small}"
    );
}

#[tokio::test]
async fn charts_move_both_ways_through_docker_registry() {
    let registry = Registry::start().await;
    round_trip(&registry.address, None).await;
}

#[tokio::test]
async fn charts_move_both_ways_with_basic_auth() {
    let registry = Registry::start_with_auth().await;
    round_trip(
        &registry.address,
        Some(Credentials {
            username: USER.to_owned(),
            password: PASSWORD.to_owned(),
        }),
    )
    .await;
    let anonymous = oci::push(
        &package::package(&podinfo()).unwrap().bytes,
        &format!("oci://{}/charts", registry.address),
        None,
        &insecure(),
    )
    .await
    .unwrap_err();
    let message = capstan_source::redact::error_chain(&anonymous);
    assert!(message.contains("podinfo"), "{message}");
}

/// Capstan's own registry (`oci::registry`) on 127.0.0.1, storing into a temporary directory,
/// served from its own thread and runtime (the tests block on Helm's SDK and skopeo).
struct OwnRegistry {
    address: String,
    storage: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl OwnRegistry {
    async fn start(limits: registry::Limits) -> Self {
        Self::start_with(limits, None).await
    }

    /// The registry requiring `auth` when given.
    async fn start_with(limits: registry::Limits, auth: Option<registry::BasicAuth>) -> Self {
        let storage = tempfile::tempdir().unwrap();
        let mut served = registry::Registry::new(storage.path(), limits).unwrap();
        if let Some(auth) = auth {
            served = served.with_basic_auth(auth);
        }
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound, address) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let _ = bound.send(listener.local_addr().unwrap().to_string());
                let _ = axum::serve(listener, served.router())
                    .with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        Self {
            address: address.await.unwrap(),
            storage,
            stop: Some(stop),
        }
    }
}

impl Drop for OwnRegistry {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

#[tokio::test]
async fn charts_move_both_ways_through_capstans_registry() {
    let registry = OwnRegistry::start(registry::Limits::default()).await;
    round_trip(&registry.address, None).await;
    assert!(
        registry
            .storage
            .path()
            .join("repositories/helm/demo/_tags/1.1.0_build.7")
            .exists()
    );
}

/// skopeo (containers/image: chunked `PATCH` uploads, `mount`, manifest `HEAD`s) copies an
/// artifact into Capstan's registry and out again, unchanged.
#[tokio::test]
async fn skopeo_copies_in_and_out_of_capstans_registry() {
    let docker = Registry::start().await;
    let own = OwnRegistry::start(registry::Limits::default()).await;
    let source = crate::support::sample_source();
    let pushed = capstan_source::oci::push(
        source.path(),
        &format!("{}:v1", docker.url("fleet/apps")),
        &capstan_source::oci::PushOptions::default(),
        &insecure(),
    )
    .await
    .unwrap();
    let copy = |from: String, to: String| {
        crate::support::skopeo(&[
            "copy",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
            "--src-no-creds",
            "--dest-no-creds",
            &from,
            &to,
        ])
    };
    copy(
        format!("docker://{}/fleet/apps:v1", docker.address),
        format!("docker://{}/mirror/apps:v1", own.address),
    );
    // Within the registry (skopeo mounts the blobs it already holds).
    copy(
        format!("docker://{}/mirror/apps:v1", own.address),
        format!("docker://{}/other/apps:v2", own.address),
    );
    copy(
        format!("docker://{}/other/apps:v2", own.address),
        format!("docker://{}/back/apps:v1", docker.address),
    );
    let digest_of = |reference: String| {
        let raw = crate::support::skopeo(&[
            "inspect",
            "--raw",
            "--tls-verify=false",
            "--no-creds",
            &reference,
        ]);
        capstan_source::Digest::of(raw.as_bytes())
    };
    assert_eq!(
        digest_of(format!("docker://{}/mirror/apps:v1", own.address)),
        pushed.digest
    );
    assert_eq!(
        digest_of(format!("docker://{}/back/apps:v1", docker.address)),
        pushed.digest
    );
    let tags = crate::support::skopeo(&[
        "list-tags",
        "--tls-verify=false",
        "--no-creds",
        &format!("docker://{}/other/apps", own.address),
    ]);
    let tags: Value = serde_json::from_str(&tags).unwrap();
    assert_eq!(tags["Tags"], serde_json::json!(["v2"]));

    // oci-client pulls it by tag and by digest, the content verified.
    let target = tempfile::tempdir().unwrap();
    let pulled = capstan_source::oci::pull(
        &format!("oci://{}/mirror/apps@{}", own.address, pushed.digest),
        &target.path().join("out"),
        &capstan_source::oci::PullOptions::default(),
        &insecure(),
    )
    .await
    .unwrap();
    assert_eq!(pulled.digest, pushed.digest);
    assert_eq!(
        crate::support::tree(&target.path().join("out")),
        crate::support::tree(source.path())
    );
}

/// The registry refuses what does not add up: a blob whose digest is not the one claimed, a
/// manifest naming a blob it does not hold, names leaving the repository space, oversized
/// blobs; none of it is stored.
#[tokio::test]
async fn capstans_registry_refuses_bad_uploads() {
    let own = OwnRegistry::start(registry::Limits {
        max_blob_bytes: 1024,
        max_manifest_bytes: 4096,
    })
    .await;
    let http = crate::support::http_client();
    let base = format!("http://{}/v2", own.address);
    let code = |body: &str| -> String {
        let json: Value = serde_json::from_str(body).unwrap_or_default();
        json["errors"][0]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    let check = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(check.status(), 200);
    assert_eq!(
        check.headers()["docker-distribution-api-version"],
        "registry/2.0"
    );

    let wrong = capstan_source::Digest::of(b"something else");
    let response = http
        .post(format!("{base}/charts/blobs/uploads/?digest={wrong}"))
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(code(&response.text().await.unwrap()), "DIGEST_INVALID");
    let response = http
        .head(format!("{base}/charts/blobs/{wrong}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);

    // Chunked: POST, two PATCHes, PUT with the digest.
    let started = http
        .post(format!("{base}/charts/blobs/uploads/"))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 202);
    let location = started.headers()["location"].to_str().unwrap().to_owned();
    let url = format!("http://{}{location}", own.address);
    for (chunk, range) in [("hel", "0-2"), ("lo", "0-4")] {
        let patched = http.patch(&url).body(chunk).send().await.unwrap();
        assert_eq!(patched.status(), 202);
        assert_eq!(patched.headers()["range"], range);
    }
    let good = capstan_source::Digest::of(b"hello");
    let put = http
        .put(format!("{url}?digest={good}"))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);
    assert_eq!(
        put.headers()["docker-content-digest"],
        good.to_string().as_str()
    );
    let blob = http
        .get(format!("{base}/charts/blobs/{good}"))
        .send()
        .await
        .unwrap();
    assert_eq!(blob.bytes().await.unwrap().as_ref(), b"hello");

    let too_big = http
        .post(format!("{base}/charts/blobs/uploads/?digest={good}"))
        .body(vec![b'x'; 2048])
        .send()
        .await
        .unwrap();
    assert_eq!(too_big.status(), 413);

    refuses_bad_manifests_and_names(&own, &good, &wrong).await;
}

/// A manifest naming a blob the registry lacks, names outside the grammar: refused, nothing
/// stored beside the one good blob.
async fn refuses_bad_manifests_and_names(
    own: &OwnRegistry,
    good: &capstan_source::Digest,
    wrong: &capstan_source::Digest,
) {
    let http = crate::support::http_client();
    let base = format!("http://{}/v2", own.address);
    let code = |body: &str| -> String {
        let json: Value = serde_json::from_str(body).unwrap_or_default();
        json["errors"][0]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": good.to_string(), "size": 5},
        "layers": [{"mediaType": "application/octet-stream", "digest": wrong.to_string(), "size": 14}],
    });
    let refused = http
        .put(format!("{base}/charts/manifests/v1"))
        .header("content-type", "application/vnd.oci.image.manifest.v1+json")
        .body(manifest.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    assert_eq!(
        code(&refused.text().await.unwrap()),
        "MANIFEST_BLOB_UNKNOWN"
    );
    let missing = http
        .get(format!("{base}/charts/manifests/v1"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);

    for path in [
        "../etc/manifests/v1",
        "Charts/manifests/v1",
        "charts/manifests/..%2Fx",
    ] {
        let response = http.get(format!("{base}/{path}")).send().await.unwrap();
        assert!(
            response.status() == 400 || response.status() == 404,
            "{path}: {}",
            response.status()
        );
    }
    let stored: Vec<_> = std::fs::read_dir(own.storage.path().join("blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(stored, [std::ffi::OsString::from(good.hex())]);
}

/// Upload sessions are bounded while they are open, and a restarted registry drops those an
/// earlier process left.
#[tokio::test]
async fn capstans_registry_bounds_open_uploads() {
    let own = OwnRegistry::start(registry::Limits::default()).await;
    let http = crate::support::http_client();
    let start = format!("http://{}/v2/charts/blobs/uploads/", own.address);
    let mut refused = None;
    for opened in 0..300 {
        let response = http.post(&start).send().await.unwrap();
        if response.status() != 202 {
            refused = Some((opened, response.status()));
            break;
        }
    }
    assert_eq!(refused, Some((256, reqwest::StatusCode::TOO_MANY_REQUESTS)));
    let uploads = own.storage.path().join("uploads");
    assert_eq!(std::fs::read_dir(&uploads).unwrap().count(), 256);
    registry::Registry::new(own.storage.path(), registry::Limits::default()).unwrap();
    assert_eq!(std::fs::read_dir(&uploads).unwrap().count(), 0);
}

/// The registry with basic auth (`user:password`, as `capstan dev` could be given): skopeo
/// (`--creds`) and Helm's SDK push and pull through it with the user's credentials, anything
/// else is refused with a Basic challenge; `_catalog` lists the repositories and a blob `GET`
/// with a `Range` returns that part.
#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn capstans_registry_with_basic_auth_catalog_and_ranges() {
    let auth = registry::BasicAuth::parse(&format!("{USER}:{PASSWORD}")).unwrap();
    let own = OwnRegistry::start_with(registry::Limits::default(), Some(auth)).await;
    let creds = format!("{USER}:{PASSWORD}");
    let source = crate::support::sample_source();
    let refused = capstan_source::oci::push(
        source.path(),
        &format!("oci://{}/fleet/apps:v1", own.address),
        &capstan_source::oci::PushOptions::default(),
        &insecure(),
    )
    .await
    .expect_err("anonymous pushes are refused");
    assert!(
        capstan_source::redact::error_chain(&refused).contains("401")
            || capstan_source::redact::error_chain(&refused)
                .to_lowercase()
                .contains("unauthorized"),
        "{}",
        capstan_source::redact::error_chain(&refused)
    );
    let with_credentials = RegistryOptions {
        credentials: Some(Credentials {
            username: USER.to_owned(),
            password: PASSWORD.to_owned(),
        }),
        ..insecure()
    };
    let pushed = capstan_source::oci::push(
        source.path(),
        &format!("oci://{}/fleet/apps:v1", own.address),
        &capstan_source::oci::PushOptions::default(),
        &with_credentials,
    )
    .await
    .expect("pushes with the credentials");

    // skopeo, an independent client, with --creds.
    crate::support::skopeo(&[
        "copy",
        "--src-tls-verify=false",
        "--dest-tls-verify=false",
        "--src-creds",
        &creds,
        "--dest-creds",
        &creds,
        &format!("docker://{}/fleet/apps:v1", own.address),
        &format!("docker://{}/mirror/apps:v2", own.address),
    ]);
    let tags = crate::support::skopeo(&[
        "list-tags",
        "--tls-verify=false",
        "--creds",
        &creds,
        &format!("docker://{}/mirror/apps", own.address),
    ]);
    assert_eq!(
        serde_json::from_str::<Value>(&tags).unwrap()["Tags"],
        json!(["v2"])
    );
    let raw = crate::support::skopeo(&[
        "inspect",
        "--raw",
        "--tls-verify=false",
        "--creds",
        &creds,
        &format!("docker://{}/mirror/apps:v2", own.address),
    ]);
    assert_eq!(capstan_source::Digest::of(raw.as_bytes()), pushed.digest);
    for wrong in [
        format!("{USER}:not-the-password"),
        format!("other:{PASSWORD}"),
    ] {
        let output = std::process::Command::new("skopeo")
            .args([
                "inspect",
                "--raw",
                "--tls-verify=false",
                "--creds",
                &wrong,
                &format!("docker://{}/mirror/apps:v2", own.address),
            ])
            .output()
            .unwrap();
        assert!(!output.status.success(), "{wrong} is refused");
    }

    // Helm's SDK pushes and pulls a chart with the same user.
    round_trip(
        &own.address,
        Some(Credentials {
            username: USER.to_owned(),
            password: PASSWORD.to_owned(),
        }),
    )
    .await;

    // The API: the challenge, the catalog (paged), ranges.
    let http = reqwest::Client::new();
    let base = format!("http://{}", own.address);
    for path in ["/v2/", "/v2/_catalog", "/v2/mirror/apps/tags/list"] {
        let response = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status(), 401, "{path}");
        assert_eq!(
            response.headers()["www-authenticate"],
            "Basic realm=\"capstan-registry\"",
            "{path}"
        );
        let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        assert_eq!(body["errors"][0]["code"], "UNAUTHORIZED");
    }
    let get = |path: String| {
        http.get(format!("{base}{path}"))
            .basic_auth(USER, Some(PASSWORD))
    };
    let catalog: Value = get("/v2/_catalog".to_owned())
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap();
    let expected: Vec<&str> = catalog["repositories"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mut sorted = expected.clone();
    sorted.sort_unstable();
    assert_eq!(expected, sorted, "sorted");
    for name in ["charts/podinfo", "fleet/apps", "mirror/apps"] {
        assert!(expected.contains(&name), "{name} in {expected:?}");
    }
    let page = get("/v2/_catalog?n=1".to_owned()).send().await.unwrap();
    assert_eq!(
        page.headers()["link"],
        format!("</v2/_catalog?n=1&last={}>; rel=\"next\"", expected[0])
    );
    let page: Value = serde_json::from_slice(&page.bytes().await.unwrap()).unwrap();
    assert_eq!(page["repositories"], json!([expected[0]]));
    let next: Value = get(format!("/v2/_catalog?n=1&last={}", expected[0]))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap();
    assert_eq!(next["repositories"], json!([expected[1]]));

    let manifest: Value = serde_json::from_str(&raw).unwrap();
    let layer = manifest["layers"][0]["digest"].as_str().unwrap().to_owned();
    let whole = get(format!("/v2/mirror/apps/blobs/{layer}"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert!(whole.len() > 20);
    let part = get(format!("/v2/mirror/apps/blobs/{layer}"))
        .header("range", "bytes=10-19")
        .send()
        .await
        .unwrap();
    assert_eq!(part.status(), 206);
    assert_eq!(
        part.headers()["content-range"],
        format!("bytes 10-19/{}", whole.len())
    );
    assert_eq!(part.bytes().await.unwrap(), whole[10..20]);
    let tail = get(format!("/v2/mirror/apps/blobs/{layer}"))
        .header("range", "bytes=-5")
        .send()
        .await
        .unwrap();
    assert_eq!(tail.status(), 206);
    assert_eq!(tail.bytes().await.unwrap(), whole[whole.len() - 5..]);
    let beyond = get(format!("/v2/mirror/apps/blobs/{layer}"))
        .header("range", format!("bytes={}-", whole.len()))
        .send()
        .await
        .unwrap();
    assert_eq!(beyond.status(), 416);
}
