//! `capstan helm package` and `capstan helm push` as a user runs them, against a real
//! `docker-registry`, the pushed chart inspected with `skopeo` and pulled back.

use std::path::Path;
use std::process::Output;

use capstan_source::helm::oci;
use capstan_source::oci::RegistryOptions;
use capstan_testkit::Registry;

async fn capstan(dir: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(args)
        .current_dir(dir)
        .output()
        .await
        .expect("run capstan")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A small chart `hello` at `dir`.
fn write_hello_chart(dir: &Path) {
    capstan_testkit::write_files(
        dir,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: hello\nversion: 0.1.0\ndescription: Hello\n",
            ),
            ("values.yaml", "message: hi\n"),
            (
                "templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello\ndata:\n  message: {{ .Values.message }}\n",
            ),
        ],
    );
}

/// Asserts that `manifest` is a Helm chart's: Helm's config and chart layer media types.
#[track_caller]
pub(crate) fn assert_helm_media_types(manifest: &serde_json::Value) {
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.cncf.helm.config.v1+json"
    );
    assert_eq!(
        manifest["layers"][0]["mediaType"],
        "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
    );
}

/// The raw manifest at `reference`, as skopeo reads it from a plain-HTTP registry.
pub(crate) fn skopeo_manifest(reference: &str) -> serde_json::Value {
    let raw = std::process::Command::new("skopeo")
        .args([
            "inspect",
            "--raw",
            "--tls-verify=false",
            "--no-creds",
            reference,
        ])
        .output()
        .unwrap();
    assert!(raw.status.success(), "{}", text(&raw.stderr));
    serde_json::from_slice(&raw.stdout).unwrap()
}

/// `helm package` prints the archive's path cleaned as Helm does: `-d <dir>/.` gives no `./`,
/// and the default destination `.` the working directory.
#[tokio::test]
async fn helm_package_prints_the_saved_path_as_helm() {
    let work = tempfile::tempdir().unwrap();
    write_hello_chart(&work.path().join("hello"));
    let destination = format!("{}/out/./", work.path().display());
    let out = capstan(
        work.path(),
        &["helm", "package", "hello", "-d", &destination],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let archive = work.path().join("out").join("hello-0.1.0.tgz");
    assert!(archive.is_file(), "{}", text(&out.stdout));
    assert_eq!(
        text(&out.stdout),
        format!(
            "Successfully packaged chart and saved it to: {}\n",
            archive.display()
        )
    );
    let out = capstan(&work.path().join("out"), &["helm", "package", "../hello"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!(
            "Successfully packaged chart and saved it to: {}\n",
            archive.display()
        )
    );
}

#[tokio::test]
async fn helm_package_and_push_publish_a_chart_helm_clients_read() {
    capstan_testkit::require("skopeo");
    let registry = Registry::start().await;
    let work = tempfile::tempdir().unwrap();
    write_hello_chart(&work.path().join("hello"));

    let out = capstan(
        work.path(),
        &[
            "helm",
            "package",
            "hello",
            "-d",
            "dist",
            "--version",
            "1.2.0+ci.7",
            "--app-version",
            "v2",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let archive = work.path().join("dist/hello-1.2.0+ci.7.tgz");
    // As Helm: a destination other than `.` is printed as given (here relative).
    assert_eq!(
        text(&out.stdout),
        "Successfully packaged chart and saved it to: dist/hello-1.2.0+ci.7.tgz\n"
    );

    let remote = format!("oci://{}/charts", registry.address);
    let out = capstan(
        work.path(),
        &[
            "helm",
            "push",
            "dist/hello-1.2.0+ci.7.tgz",
            &remote,
            "--plain-http",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some(format!("Pushed: {}/charts/hello:1.2.0_ci.7", registry.address).as_str())
    );
    let digest = lines
        .next()
        .and_then(|line| line.strip_prefix("Digest: sha256:"))
        .unwrap_or_else(|| panic!("no digest line in {stdout:?}"));
    assert_eq!(digest.len(), 64);

    // An independent client sees Helm's media types and annotations.
    let manifest = skopeo_manifest(&format!(
        "docker://{}/charts/hello:1.2.0_ci.7",
        registry.address
    ));
    assert_helm_media_types(&manifest);
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.version"],
        "1.2.0+ci.7"
    );
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.description"],
        "Hello"
    );

    // Pulled back by version, the archive is the one packaged.
    let pulled = oci::pull(
        &format!("{remote}/hello"),
        "1.2.0+ci.7",
        &RegistryOptions {
            insecure: true,
            ..RegistryOptions::default()
        },
        1 << 20,
    )
    .await
    .unwrap();
    assert_eq!(pulled.bytes, std::fs::read(&archive).unwrap());
    assert_eq!(pulled.digest.to_string(), format!("sha256:{digest}"));
    assert_eq!(
        pulled.annotations["org.opencontainers.image.title"],
        "hello"
    );
}

#[tokio::test]
async fn helm_package_and_push_fail_as_helm_does() {
    let work = tempfile::tempdir().unwrap();
    capstan_testkit::write_files(
        &work.path().join("bad"),
        &[("Chart.yaml", "apiVersion: v2\nname: bad\nversion: 0.1.0\n")],
    );
    let out = capstan(work.path(), &["helm", "package", "bad", "--version", "one"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), "Error: invalid semantic version\n");
    assert!(!work.path().join("bad-one.tgz").exists());

    let out = capstan(
        work.path(),
        &["helm", "push", "bad", "oci://127.0.0.1:1/charts"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "Error: cannot push directory, must provide chart archive (.tgz)\n"
    );
    let out = capstan(
        work.path(),
        &["helm", "push", "missing.tgz", "127.0.0.1:1/charts"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("oci://"),
        "{}",
        text(&out.stderr)
    );
}

/// `capstan helm push hello-0.1.0.tgz <remote> --plain-http --registry-config <config>` in
/// `work`.
async fn push_with_config(work: &Path, remote: &str, config: &Path) -> Output {
    capstan(
        work,
        &[
            "helm",
            "push",
            "hello-0.1.0.tgz",
            remote,
            "--plain-http",
            "--registry-config",
            config.to_str().unwrap(),
        ],
    )
    .await
}

/// `helm registry login`'s config file authenticates a push; without it the registry's refusal
/// is reported, with no secret in it.
#[tokio::test]
async fn helm_push_reads_the_registry_config() {
    let registry = Registry::start_with_auth().await;
    let work = tempfile::tempdir().unwrap();
    write_hello_chart(&work.path().join("hello"));
    let out = capstan(work.path(), &["helm", "package", "hello"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let remote = format!("oci://{}/charts", registry.address);
    let config = work.path().join("config.json");
    let entry = serde_json::json!({
        "username": capstan_testkit::REGISTRY_USER,
        "password": capstan_testkit::REGISTRY_PASSWORD,
    });
    let auths = serde_json::json!({ "auths": { registry.address.clone(): entry } });
    std::fs::write(&config, auths.to_string()).unwrap();
    let empty = work.path().join("empty.json");
    std::fs::write(&empty, r#"{"auths": {}}"#).unwrap();
    let refused = push_with_config(work.path(), &remote, &empty).await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).starts_with("Error: "),
        "{}",
        text(&refused.stderr)
    );
    let pushed = push_with_config(work.path(), &remote, &config).await;
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    assert!(text(&pushed.stdout).starts_with("Pushed: "));
    for out in [&refused, &pushed] {
        assert!(!text(&out.stderr).contains(capstan_testkit::REGISTRY_PASSWORD));
        assert!(!text(&out.stdout).contains(capstan_testkit::REGISTRY_PASSWORD));
    }
}

/// `helm push` over TLS to a registry with a private CA, with Helm's flags: refused without
/// trust, accepted with `--ca-file` or `--insecure-skip-tls-verify`.
#[tokio::test]
async fn helm_push_over_tls_with_ca_file_or_insecure_skip_tls_verify() {
    let ca = capstan_testkit::TestCa::new();
    let registry = Registry::start_tls(&ca.server()).await;
    let dir = tempfile::tempdir().unwrap();
    write_hello_chart(&dir.path().join("hello"));
    let packaged = capstan(dir.path(), &["helm", "package", "hello"]).await;
    assert!(packaged.status.success(), "{}", text(&packaged.stderr));
    std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
    let remote = registry.url("charts");

    let untrusted = capstan(dir.path(), &["helm", "push", "hello-0.1.0.tgz", &remote]).await;
    assert!(!untrusted.status.success());
    let stderr = text(&untrusted.stderr);
    assert!(
        stderr
            .lines()
            .any(|line| line.starts_with("Error: ") && line.contains("certificate")),
        "{stderr}"
    );

    let mut digests = Vec::new();
    for flags in [
        ["--ca-file", "ca.pem"].as_slice(),
        &["--insecure-skip-tls-verify"],
    ] {
        let args = [&["helm", "push", "hello-0.1.0.tgz", &remote][..], flags].concat();
        let pushed = capstan(dir.path(), &args).await;
        assert!(
            pushed.status.success(),
            "{flags:?}: {}",
            text(&pushed.stderr)
        );
        let stdout = text(&pushed.stdout);
        assert!(
            stdout.starts_with(&format!(
                "Pushed: {}/charts/hello:0.1.0\n",
                registry.address
            )),
            "{stdout}"
        );
        digests.push(stdout.lines().nth(1).unwrap().to_owned());
    }
    assert_eq!(digests[0], digests[1], "the same chart, the same manifest");
    // Read back through the CA.
    let pulled = oci::pull(
        &format!("{remote}/hello"),
        "0.1.0",
        &RegistryOptions {
            ca_certificates: vec![ca.pem().as_bytes().to_vec()],
            ..RegistryOptions::default()
        },
        1 << 20,
    )
    .await
    .unwrap();
    assert_eq!(format!("Digest: {}", pulled.digest), digests[0]);
}
