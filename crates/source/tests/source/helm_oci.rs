//! Chart packaging and Helm OCI charts, judged by Helm's own SDK (Helm v4.2.3 through PyPI
//! `helm-python-sdk`, driven by `helm_sdk.py`): what Capstan packages and pushes, Helm loads,
//! renders and pulls; what Helm packages and pushes, Capstan loads and pulls. Against a real
//! `docker-registry`.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use capstan_helm::chart::{self, package};
use capstan_source::helm::oci;
use capstan_source::oci::{Credentials, RegistryOptions};
use serde_json::Value;

use crate::support::{PASSWORD, Registry, USER};

/// Runs `helm_sdk.py` with `args` and returns its `ok` answer; panics with Helm's error.
pub fn sdk(args: &[&str]) -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".tools/helm-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run ./scripts/setup",
        python.display()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/source/helm_sdk.py");
    let output = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .expect("run helm_sdk.py");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let answer: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "helm_sdk.py {args:?}: {e}: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    match answer.get("ok") {
        Some(ok) => ok.clone(),
        None => panic!("helm_sdk.py {args:?}: {}", answer["error"]),
    }
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
    let rendered = sdk(&["render", &chart.display().to_string()]);
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
        let helm_path = sdk(&[
            "package",
            &dir.display().to_string(),
            &out.path().join("helm").display().to_string(),
        ]);
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
        let path = sdk(&[
            "package",
            &chart.display().to_string(),
            &out.path().join("helm").display().to_string(),
        ]);
        std::fs::read(path.as_str().unwrap()).unwrap()
    };
    let plain = package::package(&chart).unwrap();
    assert!(
        gunzip(&plain.bytes) == gunzip(&helm_bytes),
        "the tar stream differs from helm package's"
    );
}

/// Pushes with Capstan and pulls with Helm, pushes with Helm and pulls with Capstan, on the
/// registry at `address` (plain HTTP, optional basic auth).
async fn round_trip(address: &str, credentials: Option<Credentials>) {
    let registry = RegistryOptions {
        credentials: credentials.clone(),
        ..insecure()
    };
    let auth: Vec<String> = credentials
        .iter()
        .flat_map(|c| [c.username.clone(), c.password.clone()])
        .collect();
    let auth: Vec<&str> = auth.iter().map(String::as_str).collect();
    let work = tempfile::tempdir().unwrap();

    // Capstan packages and pushes; Helm pulls by constraint and renders the same chart.
    let packaged = package::package(&podinfo()).unwrap();
    let remote = format!("oci://{address}/charts");
    let created = "2026-01-02T03:04:05Z";
    let pushed = oci::push(&packaged.bytes, &remote, Some(created), &registry)
        .await
        .expect("capstan pushes");
    assert_eq!(
        pushed.reference,
        format!("{address}/charts/podinfo:{}", packaged.version)
    );
    let dest = work.path().join("pulled-by-helm");
    std::fs::create_dir_all(&dest).unwrap();
    let reference = format!("{remote}/podinfo");
    let mut args = vec!["pull", reference.as_str(), "6.x", dest.to_str().unwrap()];
    args.extend(&auth);
    sdk(&args);
    let pulled_path = dest.join(&packaged.file_name);
    assert_eq!(
        std::fs::read(&pulled_path).unwrap(),
        packaged.bytes,
        "the same archive"
    );
    assert_renders_as(&pulled_path, &podinfo(), "pulled by Helm");

    // Helm pushes the same archive (created = the file's time): the same manifest digest, so
    // the manifest, config and annotations are Helm's byte for byte.
    let file = work.path().join(&packaged.file_name);
    std::fs::write(&file, &packaged.bytes).unwrap();
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    let mtime = jiff::Timestamp::try_from(mtime).unwrap();
    let created = mtime.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let helm_remote = format!("oci://{address}/helm");
    let mut args = vec!["push", file.to_str().unwrap(), helm_remote.as_str()];
    args.extend(&auth);
    sdk(&args);
    let ours = oci::push(
        &packaged.bytes,
        &format!("oci://{address}/capstan"),
        Some(&created),
        &registry,
    )
    .await
    .unwrap();
    let helm_pulled = oci::pull(&format!("{helm_remote}/podinfo"), "", &registry, 10 << 20)
        .await
        .expect("capstan pulls helm's chart");
    assert_eq!(helm_pulled.digest, ours.digest, "Helm's manifest and ours");
    assert_eq!(helm_pulled.bytes, packaged.bytes);
    assert_eq!(
        helm_pulled.revision,
        format!("{}@{}", packaged.version, helm_pulled.digest)
    );

    // Build metadata: Helm tags `+` as `_`; both read it back as `+`.
    let chart = work.path().join("demo");
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
        let path = packaged.write_to(&work.path().join("out")).unwrap();
        let mut args = vec!["push", path.to_str().unwrap(), helm_remote.as_str()];
        args.extend(&auth);
        sdk(&args);
    }
    let demo = format!("{helm_remote}/demo");
    assert_eq!(
        oci::list_versions(&demo, &registry).await.unwrap(),
        ["2.0.0-rc.1", "1.1.0+build.7", "1.0.0"]
    );
    let latest = oci::pull(&demo, "", &registry, 10 << 20).await.unwrap();
    assert_eq!(
        (latest.version.as_str(), latest.tag.as_str()),
        ("1.1.0+build.7", "1.1.0_build.7")
    );
    let pre = oci::pull(&demo, ">=2.0.0-0", &registry, 10 << 20)
        .await
        .unwrap();
    assert_eq!(pre.version, "2.0.0-rc.1");
    let err = oci::pull(&demo, "3.x", &registry, 10 << 20)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("could not locate a version matching provided version string 3.x"),
        "{err}"
    );
    let too_small = oci::pull(&demo, "1.0.0", &registry, 16).await.unwrap_err();
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
