//! The Flux-like verbs on Helm kinds (`create source helm|chart`, `create helmrelease`, `get`,
//! `reconcile --with-source --force --reset`, `suspend`, `resume`, `export`, `delete`) and
//! Capstan's `tree`/`build`/`diff helmrelease`, run as a user runs them against `capstan dev`
//! and a real registry (`docker-registry`) holding the example fleet's chart.

use std::path::{Path, PathBuf};
use std::time::Duration;

use capstan_testkit::{Run, eventually};

use crate::commands::{Env, assert_contains, table};

/// Runs `capstan <args>` without a cluster (the `--export` paths never contact one).
async fn offline(args: &[&str]) -> Run {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(args)
        .arg("--kubeconfig")
        .arg("/nonexistent/kubeconfig")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("run capstan")
        .into()
}

/// `flux create … --export` for Helm kinds: the expected documents are written from Flux's
/// code (`cmd/flux/create_source_helm.go`, `create_source_chart.go`, `create_helmrelease.go`:
/// which fields are set, their defaults, `sigs.k8s.io/yaml`'s sorted keys and quoting).
#[tokio::test]
#[allow(clippy::too_many_lines)] // a table of cases, read top to bottom
async fn create_exports_helm_objects_as_flux_does() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.yaml");
    let second = dir.path().join("second.yaml");
    std::fs::write(
        &first,
        "image:\n  repository: ghcr.io/stefanprodan/podinfo\n  tag: 6.7.0\nreplicaCount: 2\n",
    )
    .unwrap();
    std::fs::write(&second, "image:\n  tag: 6.7.1\nui:\n  message: hello\n").unwrap();
    let values = format!("{},{}", first.display(), second.display());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "create",
                "source",
                "helm",
                "podinfo",
                "--url",
                "https://stefanprodan.github.io/podinfo",
                "--interval",
                "10m",
            ],
            "---
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: podinfo
  namespace: flux-system
spec:
  interval: 10m0s
  url: https://stefanprodan.github.io/podinfo
",
        ),
        (
            vec![
                "create",
                "source",
                "helm",
                "charts",
                "--url",
                "oci://ghcr.io/stefanprodan/charts",
                "--secret-ref",
                "regcred",
                "--pass-credentials",
                "--fetch-timeout",
                "90s",
            ],
            "---
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: charts
  namespace: flux-system
spec:
  interval: 1m0s
  passCredentials: true
  secretRef:
    name: regcred
  timeout: 1m30s
  type: oci
  url: oci://ghcr.io/stefanprodan/charts
",
        ),
        (
            // Credentials go to a Secret only when applying: the export has no secretRef and
            // never the password.
            vec![
                "create",
                "source",
                "helm",
                "private",
                "--url",
                "https://charts.example.com",
                "-u",
                "user",
                "-p",
                "hunter2",
                "--pass-credentials",
            ],
            "---
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: private
  namespace: flux-system
spec:
  interval: 1m0s
  url: https://charts.example.com
",
        ),
        (
            vec![
                "create",
                "source",
                "chart",
                "podinfo",
                "--source",
                "HelmRepository/podinfo",
                "--chart",
                "podinfo",
                "--chart-version",
                "6.x",
                "--reconcile-strategy",
                "Revision",
            ],
            "---
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmChart
metadata:
  name: podinfo
  namespace: flux-system
spec:
  chart: podinfo
  interval: 1m0s
  reconcileStrategy: Revision
  sourceRef:
    kind: HelmRepository
    name: podinfo
  version: 6.x
",
        ),
        (
            vec![
                "create",
                "hr",
                "podinfo",
                "--source",
                "Helmrepository/podinfo",
                "--chart",
                "podinfo",
            ],
            "---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: podinfo
  namespace: flux-system
spec:
  chart:
    spec:
      chart: podinfo
      reconcileStrategy: ChartVersion
      sourceRef:
        kind: HelmRepository
        name: podinfo
  interval: 1m0s
",
        ),
        (
            vec![
                "create",
                "helmrelease",
                "podinfo",
                "-n",
                "apps",
                "--label",
                "team=web",
                "--source",
                "HelmRepository/podinfo.flux-system",
                "--chart",
                "podinfo",
                "--chart-version",
                ">=6.0.0 <7.0.0",
                "--chart-interval",
                "5m",
                "--interval",
                "10m",
                "--release-name",
                "web",
                "--target-namespace",
                "prod",
                "--depends-on",
                "flux-system/infra",
                "--values",
                &values,
                "--values-from",
                "ConfigMap/shared",
                "--values-from",
                "secret/creds",
                "--crds",
                "CreateReplace",
                "--create-target-namespace",
                "--service-account",
                "deployer",
            ],
            "---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  labels:
    team: web
  name: podinfo
  namespace: apps
spec:
  chart:
    spec:
      chart: podinfo
      interval: 5m0s
      reconcileStrategy: ChartVersion
      sourceRef:
        kind: HelmRepository
        name: podinfo
        namespace: flux-system
      version: '>=6.0.0 <7.0.0'
  dependsOn:
  - name: infra
    namespace: flux-system
  install:
    crds: Create
    createNamespace: true
  interval: 10m0s
  releaseName: web
  serviceAccountName: deployer
  storageNamespace: prod
  targetNamespace: prod
  upgrade:
    crds: CreateReplace
  values:
    image:
      repository: ghcr.io/stefanprodan/podinfo
      tag: 6.7.1
    replicaCount: 2
    ui:
      message: hello
  valuesFrom:
  - kind: ConfigMap
    name: shared
  - kind: Secret
    name: creds
",
        ),
        (
            vec![
                "create",
                "hr",
                "app",
                "--chart-ref",
                "OCIRepository/app.flux-system",
                "--storage-namespace",
                "helm-storage",
                "--target-namespace",
                "prod",
            ],
            "---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: app
  namespace: flux-system
spec:
  chartRef:
    kind: OCIRepository
    name: app
    namespace: flux-system
  interval: 1m0s
  storageNamespace: helm-storage
  targetNamespace: prod
",
        ),
    ];
    for (args, expected) in cases {
        let args = [&args[..], &["--export"]].concat();
        let run = offline(&args).await.ok();
        assert_eq!(run.stdout, expected, "capstan {args:?}");
        assert!(!run.stdout.contains("hunter2"));
    }

    // Flux's checks, in Flux's words.
    for (args, message) in [
        (
            vec!["create", "hr", "podinfo"],
            "✗ chart or chart-ref is required",
        ),
        (
            vec![
                "create",
                "hr",
                "podinfo",
                "--chart",
                "podinfo",
                "--chart-ref",
                "HelmChart/x",
            ],
            "✗ cannot use --chart in combination with --chart-ref",
        ),
        (
            vec![
                "create",
                "hr",
                "podinfo",
                "--source",
                "foobar/podinfo",
                "--chart",
                "podinfo",
            ],
            "✗ invalid argument \"foobar/podinfo\" for \"--source\" flag: source kind 'foobar' is \
             not supported, must be one of: HelmRepository, GitRepository, Bucket",
        ),
        (
            vec!["create", "hr", "podinfo", "--chart-ref", "foobar/podinfo"],
            "✗ chart reference kind 'foobar' is not supported, must be one of: OCIRepository, \
             HelmChart",
        ),
        (
            vec![
                "create",
                "hr",
                "podinfo",
                "--chart-ref",
                "HelmChart/x",
                "--reconcile-strategy",
                "Always",
            ],
            "✗ 'Always' is an invalid reconcile strategy(valid: Revision, ChartVersion)",
        ),
        (
            vec![
                "create",
                "hr",
                "podinfo",
                "--chart-ref",
                "HelmChart/x",
                "--values-from",
                "Pod/x",
            ],
            "✗ reference kind 'Pod' is not supported, must be one of: Secret, ConfigMap",
        ),
        (
            vec![
                "create",
                "hr",
                "podinfo",
                "--chart-ref",
                "HelmChart/x",
                "--crds",
                "Always",
            ],
            "✗ unsupported upgrade CRDs policy 'Always', must be one of: Skip, Create, \
             CreateReplace",
        ),
        (
            vec![
                "create",
                "source",
                "helm",
                "x",
                "--url",
                "ftp://example.com/charts",
            ],
            "✗ url scheme 'ftp' not supported, can be: http, https and oci",
        ),
    ] {
        let args = [&args[..], &["--export"]].concat();
        let run = offline(&args).await.fails();
        assert_eq!(run.stderr.trim_end(), message, "capstan {args:?}");
    }
}

/// `build helmrelease --dry-run` renders a local chart as the controller would release it,
/// without a cluster: `spec.values` over the chart's, `postRenderers`, the origin labels; hooks
/// after the objects.
#[tokio::test]
async fn build_helmrelease_dry_run_renders_without_a_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("chart");
    let fleet_chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleet/charts/hello");
    for file in [
        "Chart.yaml",
        "values.yaml",
        "templates/_helpers.tpl",
        "templates/configmap.yaml",
        "templates/deployment.yaml",
        "templates/service.yaml",
    ] {
        let text = std::fs::read_to_string(fleet_chart.join(file)).unwrap();
        capstan_testkit::write_files(&chart, &[(file, &text)]);
    }
    capstan_testkit::write_files(
        &chart,
        &[(
            "templates/test.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}-test\n  \
             annotations:\n    helm.sh/hook: test\nspec:\n  containers: []\n",
        )],
    );
    let file = dir.path().join("hr.yaml");
    std::fs::write(
        &file,
        "apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: hello
  namespace: apps
spec:
  interval: 10m
  targetNamespace: web
  chartRef:
    kind: OCIRepository
    name: hello
  valuesFrom:
    - kind: ConfigMap
      name: absent
  values:
    greeting: hi
  postRenderers:
    - kustomize:
        images:
          - name: ghcr.io/stefanprodan/podinfo
            newTag: 6.8.0
",
    )
    .unwrap();
    let run = offline(&[
        "build",
        "hr",
        "hello",
        "--path",
        chart.to_str().unwrap(),
        "--helmrelease-file",
        file.to_str().unwrap(),
        "--dry-run",
    ])
    .await
    .ok();
    assert!(run.stderr.contains("valuesFrom skipped"), "{}", run.stderr);
    let documents = capstan_kustomize::parse_documents(&run.stdout).unwrap();
    let kinds: Vec<&str> = documents
        .iter()
        .filter_map(|d| d["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["ConfigMap", "Service", "Deployment", "Pod"]);
    assert_eq!(documents[0]["data"]["greeting"], "hi");
    assert_eq!(
        documents[0]["metadata"]["labels"]["app.kubernetes.io/instance"], "web-hello",
        "the release name is `<targetNamespace>-<name>`"
    );
    assert_eq!(
        documents[2]["metadata"]["labels"]["helm.toolkit.fluxcd.io/namespace"],
        "apps"
    );
    assert_eq!(
        documents[2]["spec"]["template"]["spec"]["containers"][0]["image"],
        "ghcr.io/stefanprodan/podinfo:6.8.0"
    );
    assert_eq!(documents[3]["metadata"]["name"], "web-hello-test");
}

/// The example fleet's chart, packaged at `version` (the chart directory of the repository).
fn chart_package(version: &str) -> capstan_helm::chart::package::Package {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleet/charts/hello");
    let options = capstan_helm::chart::package::Options {
        version: Some(version.to_owned()),
        ..Default::default()
    };
    capstan_helm::chart::package::package_with(&dir, &options)
        .map_err(|e| e.message)
        .unwrap()
}

/// Pushes the example chart at `version` to `registry` under `charts/hello`; returns the
/// archive, written into `dir`.
async fn push_chart(registry: &capstan_testkit::Registry, version: &str, dir: &Path) -> PathBuf {
    let package = chart_package(version);
    let options = capstan_source::oci::RegistryOptions {
        insecure: true,
        ..Default::default()
    };
    capstan_source::helm::oci::push(&package.bytes, &registry.url("charts"), None, &options)
        .await
        .unwrap();
    package.write_to(dir).unwrap()
}

/// The `Key: value` lines of `capstan trace`'s output.
fn trace_fields(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

/// The lines of `run`'s stderr, each expected in order.
#[track_caller]
fn assert_lines_in_order(run: &Run, lines: &[String]) {
    let mut rest = run.stderr.as_str();
    for line in lines {
        let Some(at) = rest.find(line.as_str()) else {
            panic!("missing {line:?} (in order) in:\n{}", run.stderr);
        };
        rest = &rest[at + line.len()..];
    }
}

#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn helm_release_verbs_from_create_to_delete() {
    let env = Env::start().await;
    let registry = capstan_testkit::Registry::start().await;
    push_chart(&registry, "0.1.0", env.dir.path()).await;
    let upgraded = push_chart(&registry, "0.2.0", env.dir.path()).await;
    let source = format!(
        "apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: hello
  namespace: flux-system
spec:
  interval: 10m
  url: {}
  insecure: true
  ref:
    tag: 0.1.0
  layerSelector:
    mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip
    operation: copy
",
        registry.url("charts/hello")
    );
    let file = env.dir.path().join("source.yaml");
    std::fs::write(&file, &source).unwrap();
    env.kubectl(&["apply", "-f", file.to_str().unwrap()])
        .await
        .ok();
    let values = env.dir.path().join("values.yaml");
    std::fs::write(
        &values,
        "image:\n  tag: 6.7.2\ngreeting: hello from the CLI\n",
    )
    .unwrap();

    // create waits for the release, as `flux create hr` does.
    let run = env
        .capstan(&[
            "create",
            "hr",
            "hello",
            "--chart-ref",
            "OCIRepository/hello",
            "--values",
            values.to_str().unwrap(),
        ])
        .await
        .ok();
    assert_lines_in_order(
        &run,
        &[
            "✚ generating HelmRelease".into(),
            "► applying HelmRelease".into(),
            "✔ HelmRelease created".into(),
            "◎ waiting for HelmRelease reconciliation".into(),
            "✔ HelmRelease hello is ready".into(),
            "✔ applied revision 0.1.0".into(),
        ],
    );
    let image = env
        .kubectl(&[
            "get",
            "deploy",
            "hello",
            "-n",
            "flux-system",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ])
        .await
        .ok()
        .stdout;
    assert_eq!(image, "ghcr.io/stefanprodan/podinfo:6.7.2");

    // get: the chart version as the revision; --show-source; `get all` lists it.
    let rows = table(&env.capstan(&["get", "hr"]).await.ok().stdout);
    assert_eq!(
        rows[0],
        ["NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE"]
    );
    // An OCI chart's version carries its digest, as Flux's (`0.1.0+<12 hex>`).
    let revision = rows[1][1].clone();
    assert!(revision.starts_with("0.1.0+"), "{rows:?}");
    assert_eq!(
        rows[1][..4],
        ["hello", revision.as_str(), "False", "True"],
        "{rows:?}"
    );
    let rows = table(
        &env.capstan(&["get", "helmreleases", "--show-source"])
            .await
            .ok()
            .stdout,
    );
    assert_eq!(rows[0][..3], ["NAME", "SOURCE", "REVISION"]);
    assert_eq!(
        rows[1][..3],
        [
            "hello",
            "OCIRepository/flux-system/hello",
            revision.as_str()
        ]
    );
    let stdout = env.capstan(&["get", "all"]).await.ok().stdout;
    let rows = table(&stdout);
    for name in ["ocirepository/hello", "helmrelease/hello"] {
        assert!(rows.iter().any(|r| r[0] == name), "{name} in:\n{stdout}");
    }

    // A reconcile with nothing changed makes no new release.
    let run = env.capstan(&["reconcile", "hr", "hello"]).await.ok();
    assert_contains(&run.stderr, "✔ applied revision 0.1.0");
    let object = env.get_json("hr", "hello").await;
    let history = &object["status"]["history"];
    assert_eq!(history.as_array().map(Vec::len), Some(1), "{history}");

    // The release's objects, from Helm's storage.
    let run = env.capstan(&["tree", "hr", "hello"]).await.ok();
    assert_eq!(
        run.stdout,
        "HelmRelease/flux-system/hello
├── ConfigMap/flux-system/hello
├── Service/flux-system/hello
└── Deployment/flux-system/hello
"
    );
    // A Kustomization's tree expands a HelmRelease of its inventory with the release's
    // objects, as `flux tree ks` does (`--compact`: Flux's objects only). The Kustomization is
    // suspended, so its inventory stays as written here.
    let wrapper = env.dir.path().join("wrapper.yaml");
    std::fs::write(
        &wrapper,
        "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: wrapper
  namespace: flux-system
spec:
  suspend: true
  interval: 1h
  path: ./
  prune: false
  sourceRef:
    kind: OCIRepository
    name: hello
",
    )
    .unwrap();
    env.kubectl(&["apply", "-f", wrapper.to_str().unwrap()])
        .await
        .ok();
    env.kubectl(&[
        "patch",
        "ks",
        "wrapper",
        "-n",
        "flux-system",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"inventory":{"entries":[
            {"id":"flux-system_hello_helm.toolkit.fluxcd.io_HelmRelease","v":"v2"},
            {"id":"flux-system_extra__ConfigMap","v":"v1"}]}}}"#,
    ])
    .await
    .ok();
    let run = env.capstan(&["tree", "ks", "wrapper"]).await.ok();
    assert_eq!(
        run.stdout,
        "Kustomization/flux-system/wrapper
├── HelmRelease/flux-system/hello
│   ├── ConfigMap/flux-system/hello
│   ├── Service/flux-system/hello
│   └── Deployment/flux-system/hello
└── ConfigMap/flux-system/extra
"
    );
    let run = env
        .capstan(&["tree", "ks", "wrapper", "--compact"])
        .await
        .ok();
    assert_eq!(
        run.stdout,
        "Kustomization/flux-system/wrapper\n└── HelmRelease/flux-system/hello\n"
    );

    // trace: from a released object to its HelmRelease and the chart's source.
    let run = env
        .capstan(&["trace", "deployment", "hello", "--api-version", "apps/v1"])
        .await
        .ok();
    let fields = trace_fields(&run.stdout);
    for (key, value) in [
        ("Object", "Deployment/hello"),
        ("Status", "Managed by Flux"),
        ("HelmRelease", "hello"),
        ("Revision", revision.as_str()),
        ("OCIRepository", "hello"),
        ("Tag", "0.1.0"),
    ] {
        assert!(
            fields.contains(&(key.to_owned(), value.to_owned())),
            "{key}: {value} in:\n{}",
            run.stdout
        );
    }

    // A new chart version: --with-source fetches it first, --force and --reset are Flux's
    // annotations with the request's token.
    env.kubectl(&[
        "patch",
        "ocirepository",
        "hello",
        "-n",
        "flux-system",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"ref":{"tag":"0.2.0"}}}"#,
    ])
    .await
    .ok();
    let run = env
        .capstan(&[
            "reconcile",
            "hr",
            "hello",
            "--with-source",
            "--force",
            "--reset",
        ])
        .await
        .ok();
    assert_lines_in_order(
        &run,
        &[
            "► annotating OCIRepository hello in flux-system namespace".into(),
            "✔ OCIRepository annotated".into(),
            "✔ fetched revision 0.2.0@sha256:".into(),
            "► annotating HelmRelease hello in flux-system namespace".into(),
            "✔ HelmRelease annotated".into(),
            "◎ waiting for HelmRelease reconciliation".into(),
            "✔ applied revision 0.2.0".into(),
        ],
    );
    let object = env.get_json("hr", "hello").await;
    let annotations = &object["metadata"]["annotations"];
    let token = &annotations["reconcile.fluxcd.io/requestedAt"];
    assert!(token.is_string(), "{annotations}");
    assert_eq!(&annotations["reconcile.fluxcd.io/forceAt"], token);
    assert_eq!(&annotations["reconcile.fluxcd.io/resetAt"], token);
    let run = env
        .capstan(&["reconcile", "ks", "x", "--force"])
        .await
        .fails();
    assert!(
        run.stderr
            .contains("--force and --reset apply to `reconcile helmrelease` only"),
        "{}",
        run.stderr
    );

    // build: the controller's render of a local chart archive; diff: nothing to change for
    // the chart that is released, a drift and a deletion for a changed chart.
    let run = env
        .capstan(&["build", "hr", "hello", "--path", upgraded.to_str().unwrap()])
        .await
        .ok();
    let documents = capstan_kustomize::parse_documents(&run.stdout).unwrap();
    assert_eq!(documents.len(), 3, "{}", run.stdout);
    assert_eq!(documents[0]["data"]["greeting"], "hello from the CLI");
    assert_eq!(
        documents[2]["metadata"]["labels"]["helm.toolkit.fluxcd.io/name"],
        "hello"
    );
    let run = env
        .capstan(&["diff", "hr", "hello", "--path", upgraded.to_str().unwrap()])
        .await;
    assert_eq!(run.status, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, "");
    let changed = env.dir.path().join("changed");
    capstan_testkit::write_files(
        &changed,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: hello\nversion: 0.2.0\nappVersion: \"6.7.1\"\n",
            ),
            (
                "templates/configmap.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n\
                 data:\n  greeting: {{ .Values.greeting | upper | quote }}\n",
            ),
        ],
    );
    let run = env
        .capstan(&["diff", "hr", "hello", "--path", changed.to_str().unwrap()])
        .await;
    assert_eq!(run.status, 1, "{}\n{}", run.stdout, run.stderr);
    assert_contains(&run.stdout, "► ConfigMap/flux-system/hello drifted");
    assert_contains(&run.stdout, "+   greeting: HELLO FROM THE CLI");
    for gone in ["Service/flux-system/hello", "Deployment/flux-system/hello"] {
        assert_contains(&run.stdout, &format!("► {gone} deleted"));
    }

    // suspend and resume.
    let run = env.capstan(&["suspend", "hr", "hello"]).await.ok();
    assert_contains(&run.stderr, "✔ helmrelease suspended");
    let rows = table(&env.capstan(&["get", "hr", "hello"]).await.ok().stdout);
    assert_eq!(rows[1][2], "True", "{rows:?}");
    let run = env.capstan(&["resume", "hr", "hello"]).await.ok();
    assert_contains(&run.stderr, "✔ applied revision 0.2.0");

    // export: what create wrote, applied back unchanged.
    let run = env.capstan(&["export", "hr", "hello"]).await.ok();
    let exported = capstan_kustomize::parse_documents(&run.stdout).unwrap();
    assert_eq!(
        exported[0]["spec"],
        serde_json::json!({
            "chartRef": {"kind": "OCIRepository", "name": "hello"},
            "interval": "1m0s",
            "values": {"image": {"tag": "6.7.2"}, "greeting": "hello from the CLI"},
        })
    );

    // An OCI HelmRepository is static, as in Flux: ready as created, nothing to reconcile.
    let run = env
        .capstan(&[
            "create",
            "source",
            "helm",
            "charts",
            "--url",
            &registry.url("charts"),
        ])
        .await
        .ok();
    assert!(
        run.stderr
            .contains("✔ HelmRepository source reconciliation completed"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("fetched revision"), "{}", run.stderr);
    let rows = table(&env.capstan(&["get", "sources", "helm"]).await.ok().stdout);
    assert_eq!(
        rows[1],
        ["charts", "", "False", "True", "Helm repository is Ready"],
        "{rows:?}"
    );
    let run = env
        .capstan(&["reconcile", "source", "helm", "charts"])
        .await
        .ok();
    assert_eq!(run.stderr, "✔ reconciliation not supported by the object\n");
    env.capstan(&["suspend", "source", "helm", "charts"])
        .await
        .ok();
    let run = env
        .capstan(&["resume", "source", "helm", "charts"])
        .await
        .ok();
    assert_eq!(
        run.stderr,
        "► resuming helmrepository charts in flux-system namespace\n✔ helmrepository resumed\n"
    );

    // A HelmRelease releasing to a remote cluster keeps its storage there: tree says so.
    let exported = env
        .capstan(&[
            "create",
            "hr",
            "remote",
            "--chart-ref",
            "OCIRepository/hello",
            "--kubeconfig-secret-ref",
            "remote-kubeconfig",
            "--export",
        ])
        .await
        .ok()
        .stdout;
    let file = env.dir.path().join("remote.yaml");
    std::fs::write(&file, exported).unwrap();
    env.kubectl(&["apply", "-f", file.to_str().unwrap()])
        .await
        .ok();
    let run = env.capstan(&["tree", "hr", "remote"]).await.fails();
    assert!(
        run.stderr
            .contains("releases to a remote cluster (spec.kubeConfig)"),
        "{}",
        run.stderr
    );

    // delete uninstalls the release.
    let run = env
        .capstan(&["delete", "hr", "hello", "--silent"])
        .await
        .ok();
    assert_contains(&run.stderr, "✔ helmrelease deleted");
    eventually(
        Duration::from_secs(60),
        "the release to be uninstalled",
        || async {
            let run = env
                .kubectl(&["get", "deploy", "hello", "-n", "flux-system"])
                .await;
            (run.status != 0).then_some(())
        },
    )
    .await;
}

/// A chart from an HTTP Helm repository behind basic auth (its index written by Helm's SDK):
/// `create source helm -u -p` stores the credentials in `helm-NAME`, `create hr --source
/// HelmRepository/…` makes the controller template the HelmChart `<namespace>-<name>`, and
/// `reconcile hr --with-source` goes through the HelmChart and its HelmRepository first, as
/// Flux does.
#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn helm_repository_charts_and_the_reconcile_chain() {
    let env = Env::start().await;
    let repository = env.dir.path().join("repository");
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleet/charts/hello");
    capstan_testkit::helm_repo::sdk_repository(&[&chart], &repository, None);
    let server =
        capstan_testkit::helm_repo::HelmRepoServer::start(&repository, Some(("ci", "s3cret")))
            .await;

    let run = env
        .capstan(&[
            "create",
            "source",
            "helm",
            "charts",
            "--url",
            &server.url(),
            "--username",
            "ci",
            "--password",
            "s3cret",
        ])
        .await
        .ok();
    assert_lines_in_order(
        &run,
        &[
            "✚ generating HelmRepository source".into(),
            "► applying secret with repository credentials".into(),
            "✔ authentication configured".into(),
            "► applying HelmRepository source".into(),
            "✔ source created".into(),
            "◎ waiting for HelmRepository source reconciliation".into(),
            "✔ HelmRepository source reconciliation completed".into(),
            "✔ fetched revision: sha256:".into(),
        ],
    );
    assert!(!run.stderr.contains("s3cret"), "{}", run.stderr);
    let secret = env.get_json("secret", "helm-charts").await;
    assert_eq!(secret["data"]["username"], "Y2k=", "base64 of `ci`");
    let repository_object = env.get_json("helmrepository", "charts").await;
    assert_eq!(
        repository_object["spec"]["secretRef"],
        serde_json::json!({"name": "helm-charts"})
    );

    let run = env
        .capstan(&[
            "create",
            "hr",
            "hello",
            "--source",
            "HelmRepository/charts",
            "--chart",
            "hello",
            "--chart-version",
            "0.1.x",
        ])
        .await
        .ok();
    assert_contains(&run.stderr, "✔ applied revision 0.1.0");
    let stdout = env.capstan(&["get", "sources", "all"]).await.ok().stdout;
    let rows = table(&stdout);
    assert!(
        rows.iter()
            .any(|r| r[0] == "helmrepository/charts" && r[1].starts_with("sha256:")),
        "{stdout}"
    );
    assert!(
        rows.iter()
            .any(|r| r[..2] == ["helmchart/flux-system-hello", "0.1.0"]),
        "{stdout}"
    );

    let run = env
        .capstan(&["reconcile", "helmrelease", "hello", "--with-source"])
        .await
        .ok();
    assert_lines_in_order(
        &run,
        &[
            "► annotating HelmRepository charts in flux-system namespace".into(),
            "✔ HelmRepository annotated".into(),
            "✔ fetched revision sha256:".into(),
            "► annotating HelmChart flux-system-hello in flux-system namespace".into(),
            "✔ HelmChart annotated".into(),
            "◎ waiting for HelmChart reconciliation".into(),
            "✔ fetched revision 0.1.0".into(),
            "► annotating HelmRelease hello in flux-system namespace".into(),
            "✔ applied revision 0.1.0".into(),
        ],
    );
    let run = env
        .capstan(&[
            "reconcile",
            "source",
            "chart",
            "flux-system-hello",
            "--with-source",
        ])
        .await
        .ok();
    assert_lines_in_order(
        &run,
        &[
            "► annotating HelmRepository charts in flux-system namespace".into(),
            "► annotating HelmChart flux-system-hello in flux-system namespace".into(),
            "✔ fetched revision 0.1.0".into(),
        ],
    );
    let run = env.capstan(&["trace", "configmap", "hello"]).await.ok();
    let fields = trace_fields(&run.stdout);
    for (key, value) in [
        ("HelmRelease", "hello"),
        ("HelmChart", "flux-system-hello"),
        ("Chart", "hello"),
        ("Version", "0.1.x"),
        ("HelmRepository", "charts"),
    ] {
        assert!(
            fields.contains(&(key.to_owned(), value.to_owned())),
            "{key}: {value} in:\n{}",
            run.stdout
        );
    }
    let run = env
        .capstan(&["export", "source", "chart", "--all"])
        .await
        .ok();
    let exported = capstan_kustomize::parse_documents(&run.stdout).unwrap();
    assert_eq!(exported[0]["spec"]["chart"], "hello", "{}", run.stdout);
    assert_eq!(exported[0]["spec"]["version"], "0.1.x", "{}", run.stdout);
}

/// The flags of `flux create source helm|chart` beyond the basics, exported as Flux writes them
/// (`--oci-provider` on `oci://` only; `--verify-*` as `spec.verify`) and refused as Flux refuses
/// them.
#[tokio::test]
#[allow(clippy::too_many_lines)] // a table of cases, read top to bottom
async fn create_source_helm_and_chart_provider_and_verify_flags() {
    let run = offline(&[
        "create",
        "source",
        "helm",
        "podinfo",
        "--url",
        "oci://ghcr.io/stefanprodan/charts",
        "--oci-provider",
        "aws",
        "--export",
    ])
    .await
    .ok();
    assert_eq!(
        run.stdout,
        "---
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: podinfo
  namespace: flux-system
spec:
  interval: 1m0s
  provider: aws
  type: oci
  url: oci://ghcr.io/stefanprodan/charts
"
    );
    // The provider of an HTTP repository is not set; the TLS files are not read for --export.
    let run = offline(&[
        "create",
        "source",
        "helm",
        "podinfo",
        "--url",
        "https://stefanprodan.github.io/podinfo",
        "--oci-provider",
        "aws",
        "--ca-file",
        "/nonexistent/ca.crt",
        "--export",
    ])
    .await
    .ok();
    assert!(!run.stdout.contains("provider"), "{}", run.stdout);
    let run = offline(&[
        "create",
        "source",
        "chart",
        "podinfo",
        "--source",
        "HelmRepository/podinfo",
        "--chart",
        "podinfo",
        "--chart-version",
        "6.6.2",
        "--verify-provider",
        "cosign",
        "--verify-secret-ref",
        "cosign-keys",
        "--verify-issuer",
        "https://token.actions.githubusercontent.com",
        "--verify-subject",
        "https://github.com/stefanprodan/podinfo/.github/workflows/release.yml@refs/tags/6.6.2",
        "--export",
    ])
    .await
    .ok();
    assert_eq!(
        run.stdout,
        "---
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmChart
metadata:
  name: podinfo
  namespace: flux-system
spec:
  chart: podinfo
  interval: 1m0s
  reconcileStrategy: ChartVersion
  sourceRef:
    kind: HelmRepository
    name: podinfo
  verify:
    matchOIDCIdentity:
    - issuer: https://token.actions.githubusercontent.com
      subject: https://github.com/stefanprodan/podinfo/.github/workflows/release.yml@refs/tags/6.6.2
    provider: cosign
    secretRef:
      name: cosign-keys
  version: 6.6.2
"
    );
    let chart = [
        "create",
        "source",
        "chart",
        "p",
        "--source",
        "HelmRepository/p",
        "--chart",
        "p",
    ];
    for (flags, message) in [
        (
            vec!["--verify-provider", "notation"],
            "✗ invalid argument \"notation\" for \"--verify-provider\" flag: source OCI verify \
             provider 'notation' is not supported, must be one of: cosign",
        ),
        (
            vec!["--verify-secret-ref", "keys"],
            "✗ a verification provider must be specified when a secret is specified",
        ),
        (
            vec!["--verify-issuer", "https://issuer"],
            "✗ a verification provider must be specified when OIDC issuer/subject is specified",
        ),
    ] {
        let args = [&chart[..], &flags, &["--export"]].concat();
        let run = offline(&args).await.fails();
        assert_eq!(run.stderr.trim_end(), message, "capstan {args:?}");
    }
}

/// `create source helm --ca-file --cert-file --key-file`, as Flux: the files go into the
/// `kubernetes.io/tls` Secret `helm-NAME` (`ca.crt`, `tls.crt`, `tls.key`) the HelmRepository
/// refers to, and the controller fetches the index from a server asking for the client
/// certificate, trusting the private CA.
#[tokio::test(flavor = "multi_thread")]
async fn create_source_helm_with_tls_files_makes_flux_tls_secret() {
    let env = Env::start().await;
    let repository = env.dir.path().join("repository");
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleet/charts/hello");
    capstan_testkit::helm_repo::sdk_repository(&[&chart], &repository, None);
    let ca = capstan_testkit::TestCa::new();
    let server = capstan_testkit::helm_repo::HelmRepoServer::start_tls(
        &repository,
        &ca.server(),
        Some(ca.pem()),
    )
    .await;
    let client = ca.client();
    let files = env.dir.path().join("tls");
    std::fs::create_dir_all(&files).unwrap();
    for (name, content) in [
        ("ca.crt", ca.pem()),
        ("tls.crt", client.cert.as_str()),
        ("tls.key", client.key.as_str()),
    ] {
        std::fs::write(files.join(name), content).unwrap();
    }
    let path = |name: &str| files.join(name).display().to_string();
    let run = env
        .capstan(&[
            "create",
            "source",
            "helm",
            "secure",
            "--url",
            &server.https_url(),
            "--ca-file",
            &path("ca.crt"),
            "--cert-file",
            &path("tls.crt"),
            "--key-file",
            &path("tls.key"),
        ])
        .await
        .ok();
    assert_lines_in_order(
        &run,
        &[
            "► applying secret with repository credentials".into(),
            "✔ authentication configured".into(),
            "✔ HelmRepository source reconciliation completed".into(),
            "✔ fetched revision: sha256:".into(),
        ],
    );
    assert!(!run.stderr.contains("PRIVATE KEY"), "{}", run.stderr);
    let secret = env.get_json("secret", "helm-secure").await;
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let keys: Vec<&str> = secret["data"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["ca.crt", "tls.crt", "tls.key"]);
    let object = env.get_json("helmrepository", "secure").await;
    assert_eq!(
        object["spec"]["secretRef"],
        serde_json::json!({"name": "helm-secure"})
    );
}
