//! Capstan's own Helm chart (`charts/capstan`): rendered by Capstan's Helm engine (`capstan helm
//! template`) it installs exactly what `capstan install --export` generates for the equivalent
//! flags, object by object (the drift guard: a change to the generator the chart does not follow
//! fails here); Helm's own SDK renders it byte for byte as our engine does, installs it into the
//! embedded control plane and uninstalls it leaving the CRDs; its schema rejects wrong values.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use capstan_testkit::{Run, eventually};

use crate::support;

/// Helm's own labels, the only labels the chart adds to the generator's objects.
const HELM_LABELS: [&str; 2] = ["helm.sh/chart", "app.kubernetes.io/managed-by"];

/// The annotation the chart's CRDs carry (and the generator's do not): `helm uninstall` leaves
/// them, and with them every GitRepository, Kustomization and HelmRelease in the cluster.
const KEEP: &str = "helm.sh/resource-policy";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chart_dir() -> PathBuf {
    repo_root().join("charts/capstan")
}

/// The generated template of the CRDs, checked in as `charts/capstan/templates/crds.yaml`.
const CRDS_TEMPLATE: &str = "templates/crds.yaml";

/// The placeholder the labels line replaces in the serialized CRDs.
const LABELS_PLACEHOLDER: &str = "capstan-chart-labels-placeholder";

/// `charts/capstan/templates/crds.yaml` as generated from `capstan_api::crds()`: every CRD as
/// `capstan install` writes it, its labels the chart's, annotated [`KEEP`], all under
/// `installCRDs`.
fn crds_template() -> String {
    let mut out = String::from(
        "{{- /* Generated from capstan_api::crds() by crates/capstan/tests/cli/chart.rs; do not \
         edit.\nRegenerate: UPDATE_MANIFESTS=1 cargo test -p capstan --test cli -- \
         chart::crd_template_is_generated */}}\n{{- if .Values.installCRDs }}\n",
    );
    for crd in capstan_api::crds() {
        let mut crd = serde_json::to_value(&crd).unwrap();
        let own = crd["metadata"]["labels"].as_object().cloned();
        let mut labels = serde_json::Map::new();
        labels.insert(LABELS_PLACEHOLDER.to_owned(), json!(""));
        labels.extend(own.unwrap_or_default());
        let name = crd["metadata"]["name"].clone();
        let mut metadata = crd["metadata"].as_object().cloned().unwrap_or_default();
        metadata.remove("labels");
        metadata.remove("name");
        let mut annotations = metadata
            .remove("annotations")
            .and_then(|a| a.as_object().cloned())
            .unwrap_or_default();
        annotations.insert(KEEP.to_owned(), json!("keep"));
        let mut meta = serde_json::Map::new();
        meta.insert("name".to_owned(), name);
        meta.insert("labels".to_owned(), Value::Object(labels));
        meta.insert("annotations".to_owned(), Value::Object(annotations));
        meta.extend(metadata);
        crd["metadata"] = Value::Object(meta);
        let text = serde_saphyr::to_string(&crd).unwrap();
        assert!(
            !text.contains("{{"),
            "a CRD holds template delimiters; the chart must escape them"
        );
        out.push_str("---\n");
        for line in text.lines() {
            if line.trim_start().starts_with(LABELS_PLACEHOLDER) {
                out.push_str("    {{- include \"capstan.labels\" . | nindent 4 }}\n");
            } else {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out.push_str("{{- end }}\n");
    out
}

#[test]
fn crd_template_is_generated_from_the_api() {
    let path = chart_dir().join(CRDS_TEMPLATE);
    let generated = crds_template();
    if std::env::var_os("UPDATE_MANIFESTS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is out of date with capstan_api's CRDs\nhint: run: UPDATE_MANIFESTS=1 cargo test -p \
         capstan --test cli -- chart::crd_template_is_generated",
        path.display()
    );
}

/// Chart.yaml names the crate's version: `version` as is, `appVersion` (the image tag and the
/// `app.kubernetes.io/version` label) as `capstan version` prints it.
#[test]
fn chart_version_is_the_crate_version() {
    let text = std::fs::read_to_string(chart_dir().join("Chart.yaml")).unwrap();
    let meta = capstan_helm::yaml::parse(&text).unwrap();
    assert_eq!(meta["apiVersion"], "v2");
    assert_eq!(meta["name"], "capstan");
    assert_eq!(meta["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        meta["appVersion"],
        format!("v{}", env!("CARGO_PKG_VERSION"))
    );
}

/// The objects of a multi-document YAML stream.
fn documents(text: &str) -> Vec<Value> {
    capstan_helm::output::split_manifests(text)
        .into_iter()
        .filter_map(|doc| {
            let value = capstan_helm::yaml::parse(doc)
                .unwrap_or_else(|e| panic!("a document does not parse: {e}\n{doc}"));
            (!value.is_null()).then_some(value)
        })
        .collect()
}

async fn run(args: &[&str], dir: &Path) -> Run {
    support::capstan_command()
        .args(args)
        .current_dir(dir)
        .output()
        .await
        .unwrap()
        .into()
}

/// `capstan install --export -n <namespace> <flags>`: the generator's objects.
async fn generated(namespace: &str, flags: &[&str], dir: &Path) -> Vec<Value> {
    let mut args = vec!["install", "--export", "-n", namespace];
    args.extend(flags);
    documents(&run(&args, dir).await.ok().stdout)
}

/// `capstan helm template capstan charts/capstan -n <namespace> -f <values>`.
async fn template(namespace: &str, values: &Value, dir: &Path) -> Run {
    let file = dir.join(format!("values-{namespace}.json"));
    std::fs::write(&file, values.to_string()).unwrap();
    let chart = chart_dir();
    run(
        &[
            "helm",
            "template",
            "capstan",
            chart.to_str().unwrap(),
            "-n",
            namespace,
            "-f",
            file.to_str().unwrap(),
        ],
        dir,
    )
    .await
}

/// The chart's objects, Helm's labels checked and removed (the difference the drift guard
/// ignores).
async fn rendered(namespace: &str, values: &Value, dir: &Path) -> Vec<Value> {
    let mut objects = documents(&template(namespace, values, dir).await.ok().stdout);
    for object in &mut objects {
        let Some(labels) = object["metadata"]["labels"].as_object_mut() else {
            panic!("an object of the chart has no labels: {object}");
        };
        for label in HELM_LABELS {
            assert!(
                labels.remove(label).is_some(),
                "{label} missing on {}",
                key(object)
            );
        }
    }
    objects
}

fn key(object: &Value) -> String {
    format!(
        "{}/{}/{}",
        object["kind"].as_str().unwrap_or_default(),
        object["metadata"]["namespace"].as_str().unwrap_or("-"),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

fn by_key(objects: Vec<Value>) -> BTreeMap<String, Value> {
    let mut map = BTreeMap::new();
    for object in objects {
        let key = key(&object);
        assert!(map.insert(key.clone(), object).is_none(), "{key} twice");
    }
    map
}

/// The differences the chart is allowed, applied to the generator's objects: no Namespace (a
/// release lives in a namespace that exists before it: `helm install --create-namespace`),
/// the CRDs annotated [`KEEP`] (or left out with `installCRDs: false`).
fn as_the_chart_installs(generated: Vec<Value>, install_crds: bool) -> Vec<Value> {
    generated
        .into_iter()
        .filter(|o| o["kind"] != "Namespace")
        .filter(|o| install_crds || o["kind"] != "CustomResourceDefinition")
        .map(|mut o| {
            if o["kind"] == "CustomResourceDefinition" {
                o["metadata"]["annotations"][KEEP] = json!("keep");
            }
            o
        })
        .collect()
}

#[track_caller]
fn assert_same_objects(chart: Vec<Value>, expected: Vec<Value>, what: &str) {
    let chart = by_key(chart);
    let expected = by_key(expected);
    let only_chart: Vec<&String> = chart
        .keys()
        .filter(|k| !expected.contains_key(*k))
        .collect();
    let only_generated: Vec<&String> = expected
        .keys()
        .filter(|k| !chart.contains_key(*k))
        .collect();
    assert!(
        only_chart.is_empty() && only_generated.is_empty(),
        "{what}: only in the chart: {only_chart:?}; only in `capstan install`: {only_generated:?}"
    );
    for (key, object) in &chart {
        assert!(
            *object == expected[key],
            "{what}: {key} differs\nchart:\n{}\ncapstan install:\n{}",
            serde_json::to_string_pretty(object).unwrap(),
            serde_json::to_string_pretty(&expected[key]).unwrap()
        );
    }
}

/// The value sets of the drift guard, each with the `capstan install` flags it means.
fn value_sets() -> Vec<(&'static str, Value, Vec<&'static str>)> {
    vec![
        ("flux-system", json!({}), vec![]),
        (
            "capstan-system",
            json!({
                "image": {"repository": "registry.internal/mirror/capstan"},
                "imagePullSecrets": [{"name": "pull"}],
                "tolerationKeys": ["dedicated", "gpu"],
                "watchAllNamespaces": false,
                "concurrent": 10,
                "networkPolicy": false,
                "clusterDomain": "corp.internal",
            }),
            vec![
                "--registry",
                "registry.internal/mirror",
                "--image-pull-secret",
                "pull",
                "--toleration-keys",
                "dedicated,gpu",
                "--watch-all-namespaces=false",
                "--concurrent",
                "10",
                "--network-policy=false",
                "--cluster-domain",
                "corp.internal",
            ],
        ),
        (
            "tenant-a",
            json!({"installCRDs": false, "networkPolicy": true, "concurrent": 2}),
            vec!["--concurrent", "2"],
        ),
    ]
}

/// The drift guard: for each value set the chart, rendered by `capstan helm template`, holds the
/// objects `capstan install --export` generates for the same options, field for field, except
/// Helm's labels and the differences [`as_the_chart_installs`] lists.
#[tokio::test]
async fn the_chart_installs_what_capstan_install_generates() {
    let dir = tempfile::tempdir().unwrap();
    for (namespace, values, flags) in value_sets() {
        let install_crds = values["installCRDs"].as_bool().unwrap_or(true);
        let chart = rendered(namespace, &values, dir.path()).await;
        let expected =
            as_the_chart_installs(generated(namespace, &flags, dir.path()).await, install_crds);
        assert_same_objects(chart, expected, &format!("{namespace} {values}"));
    }
}

/// The chart-only values (no `capstan install` flag) change exactly what they name in the
/// generator's Deployment; the ServiceMonitor is the one object they add.
#[tokio::test]
async fn chart_only_values_change_only_what_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let values = json!({
        "image": {"tag": "v9.8.7", "pullPolicy": "Always"},
        "tolerationKeys": ["dedicated"],
        "tolerations": [{"key": "spot", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}],
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}},
        "nodeSelector": {"pool": "system"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
        "podLabels": {"team": "platform", "app": "not-the-selector"},
        "podAnnotations": {
            "cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
            "prometheus.io/port": "1",
        },
        "extraArgs": ["--default-service-account=default"],
        "extraEnv": [{"name": "RUST_BACKTRACE", "value": "1"}],
        "serviceMonitor": {"enabled": true, "interval": "30s", "labels": {"release": "prom"}},
    });
    let mut chart = by_key(rendered("flux-system", &values, dir.path()).await);
    let mut expected = by_key(as_the_chart_installs(
        generated(
            "flux-system",
            &["--toleration-keys", "dedicated"],
            dir.path(),
        )
        .await,
        true,
    ));

    let monitor = chart
        .remove("ServiceMonitor/flux-system/capstan-controller")
        .expect("the ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prom");
    assert_eq!(
        monitor["spec"]["endpoints"],
        json!([{"port": "http-metrics", "path": "/metrics", "interval": "30s"}])
    );

    // What the version means moves every object's version label with the image tag.
    for object in expected.values_mut() {
        object["metadata"]["labels"]["app.kubernetes.io/version"] = json!("v9.8.7");
    }
    let deployment = expected
        .get_mut("Deployment/flux-system/capstan-controller")
        .unwrap();
    let template = &mut deployment["spec"]["template"];
    template["metadata"]["labels"]["app.kubernetes.io/version"] = json!("v9.8.7");
    template["metadata"]["labels"]["team"] = json!("platform");
    template["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] =
        json!("true");
    let pod = &mut template["spec"];
    // Maps merge with the defaults, as Helm merges values (a key set to null removes one).
    pod["nodeSelector"]["pool"] = json!("system");
    pod["affinity"] = values["affinity"].clone();
    pod["tolerations"]
        .as_array_mut()
        .unwrap()
        .push(values["tolerations"][0].clone());
    let container = &mut pod["containers"][0];
    container["image"] = json!("ghcr.io/capstan/capstan:v9.8.7");
    container["imagePullPolicy"] = json!("Always");
    container["resources"]["requests"] = values["resources"]["requests"].clone();
    container["args"]
        .as_array_mut()
        .unwrap()
        .push(json!("--default-service-account=default"));
    container["env"]
        .as_array_mut()
        .unwrap()
        .push(values["extraEnv"][0].clone());
    assert_same_objects(
        chart.into_values().collect(),
        expected.into_values().collect(),
        "chart-only values",
    );
}

/// values.schema.json refuses a wrong type or an unknown value before anything renders, naming
/// the value, in our engine as in Helm.
#[tokio::test]
async fn the_schema_rejects_wrong_values_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    for (values, name) in [
        (json!({"concurrent": "many"}), "concurrent"),
        (json!({"watchAllNamespaces": "no"}), "watchAllNamespaces"),
        (json!({"image": {"pullPolicy": "Sometimes"}}), "pullPolicy"),
        (json!({"watchAllNamespace": false}), "watchAllNamespace"),
    ] {
        let out = template("flux-system", &values, dir.path()).await;
        assert_ne!(out.status, 0, "{values} rendered: {}", out.stdout);
        assert!(
            out.stderr
                .contains("values don't meet the specifications of the schema"),
            "{}",
            out.stderr
        );
        assert!(out.stderr.contains(name), "{values}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{}", out.stdout);
    }
}

/// Helm's SDK (`crates/helm/tests/oracle.py render`): the chart's templates rendered by Helm
/// v4.2.3 itself, by path; `Err` is Helm's error.
fn helm_render(namespace: &str, values: &Value) -> Result<BTreeMap<String, String>, String> {
    helm_render_chart(&chart_dir(), namespace, values)
}

/// [`helm_render`] of the chart at `chart` (a directory or an archive).
fn helm_render_chart(
    chart: &Path,
    namespace: &str,
    values: &Value,
) -> Result<BTreeMap<String, String>, String> {
    let out = std::process::Command::new(capstan_testkit::helm_repo::helm_python())
        .arg(repo_root().join("crates/helm/tests/oracle.py"))
        .arg("render")
        .arg(chart)
        .arg(values.to_string())
        .arg(json!({"name": "capstan", "namespace": namespace}).to_string())
        .output()
        .unwrap();
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "oracle.py answered no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    if let Some(error) = answer.get("error") {
        return Err(error.as_str().unwrap_or_default().to_owned());
    }
    Ok(answer["ok"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect())
}

/// The same render by Capstan's engine, as a library.
fn capstan_render(namespace: &str, values: &Value) -> Result<BTreeMap<String, String>, String> {
    let chart = capstan_helm::output::load_chart(&chart_dir()).map_err(|e| e.message)?;
    let options = capstan_helm::engine::Options {
        release_name: "capstan".to_owned(),
        namespace: namespace.to_owned(),
        ..capstan_helm::engine::Options::default()
    };
    let mut env = capstan_helm::template::Env::new();
    capstan_helm::engine::render(&chart, values.as_object().unwrap(), &options, &mut env)
        .map_err(|e| e.message)
}

/// Helm itself is the judge: for every value set of the drift guard (and the chart-only ones)
/// Helm's SDK renders every template of the chart, NOTES.txt included, to the same bytes as
/// Capstan's engine; a value the schema refuses fails in both, naming the value.
#[tokio::test]
async fn helm_renders_the_chart_byte_for_byte_as_capstan() {
    let mut sets: Vec<(&str, Value)> = value_sets()
        .into_iter()
        .map(|(namespace, values, _)| (namespace, values))
        .collect();
    sets.push((
        "flux-system",
        json!({
            "image": {"tag": "v9.8.7"},
            "tolerations": [{"key": "spot", "operator": "Exists"}],
            "affinity": {"podAntiAffinity": {}},
            "podLabels": {"team": "platform", "app": "not-the-selector"},
            "podAnnotations": {"a": "b"},
            "extraArgs": ["--default-service-account=default"],
            "extraEnv": [{"name": "RUST_BACKTRACE", "value": "1"}],
            "serviceMonitor": {"enabled": true, "interval": "30s", "labels": {"release": "prom"}},
        }),
    ));
    for (namespace, values) in sets {
        let (helm, ours) = tokio::task::spawn_blocking({
            let values = values.clone();
            move || {
                (
                    helm_render(namespace, &values),
                    capstan_render(namespace, &values),
                )
            }
        })
        .await
        .unwrap();
        let helm = helm.unwrap_or_else(|e| panic!("Helm refused {values}: {e}"));
        let ours = ours.unwrap_or_else(|e| panic!("Capstan refused {values}: {e}"));
        assert_eq!(
            helm.keys().collect::<Vec<_>>(),
            ours.keys().collect::<Vec<_>>(),
            "{values}"
        );
        for (path, text) in &helm {
            assert!(
                *text == ours[path],
                "{namespace} {values}: {path} differs\nhelm:\n{text}\ncapstan:\n{}",
                ours[path]
            );
        }
        assert!(helm.contains_key("capstan/templates/NOTES.txt"));
    }
    let wrong = json!({"concurrent": "many"});
    let helm = tokio::task::spawn_blocking(move || helm_render("flux-system", &wrong))
        .await
        .unwrap()
        .unwrap_err();
    assert!(helm.contains("concurrent"), "{helm}");
    let ours = capstan_render("flux-system", &json!({"concurrent": "many"})).unwrap_err();
    assert!(ours.contains("concurrent"), "{ours}");
}

/// `capstan helm package` of the chart gives the archive `helm install` takes: Helm's SDK
/// renders it as Capstan renders the chart's directory (every template packaged, the values
/// and the schema too: a wrong value is still refused).
#[tokio::test]
async fn the_packaged_chart_renders_as_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let chart = chart_dir();
    let out = run(
        &["helm", "package", chart.to_str().unwrap(), "-d", "."],
        dir.path(),
    )
    .await
    .ok();
    let archive = dir
        .path()
        .join(format!("capstan-{}.tgz", env!("CARGO_PKG_VERSION")));
    assert!(
        out.stdout.contains(archive.to_str().unwrap()),
        "{}",
        out.stdout
    );
    let (helm, wrong) = tokio::task::spawn_blocking(move || {
        (
            helm_render_chart(&archive, "flux-system", &json!({})),
            helm_render_chart(&archive, "flux-system", &json!({"concurrent": "many"})),
        )
    })
    .await
    .unwrap();
    assert_eq!(
        helm.unwrap(),
        capstan_render("flux-system", &json!({})).unwrap()
    );
    assert!(wrong.unwrap_err().contains("/concurrent"));
}

/// `helm lint --strict` (Helm's SDK) finds nothing beyond the missing icon (an info), for the
/// default values and the other value sets; it finds the wrong value as our engine does.
#[tokio::test]
async fn helm_lint_strict_passes() {
    const LINT: &str = "import helm_python, json, sys\n\
        print(json.dumps(helm_python.lint(sys.argv[1], json.loads(sys.argv[2]), strict=True, \
        namespace=sys.argv[3]), default=str))";
    let lint = |namespace: &str, values: &Value| {
        let out = std::process::Command::new(capstan_testkit::helm_repo::helm_python())
            .args(["-c", LINT])
            .arg(chart_dir())
            .arg(values.to_string())
            .arg(namespace)
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("helm lint: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        report
    };
    tokio::task::spawn_blocking(move || {
        for (namespace, values, _) in value_sets() {
            let report = lint(namespace, &values);
            let findings: Vec<&Value> = report["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["severity"].as_u64() != Some(1))
                .collect();
            assert!(findings.is_empty(), "{values}: {report}");
            assert_eq!(report["errors"], json!([]), "{report}");
        }
        let report = lint("flux-system", &json!({"concurrent": "many"}));
        assert!(
            report["errors"].to_string().contains("/concurrent"),
            "{report}"
        );
    })
    .await
    .unwrap();
}

/// Runs one request of Helm's SDK (`capstan_testkit::helm_repo::helm_sdk`) off the runtime.
async fn helm_sdk(request: Value) -> Result<Value, String> {
    tokio::task::spawn_blocking(move || capstan_testkit::helm_repo::helm_sdk(&request))
        .await
        .unwrap()
}

/// The control plane alone, with what the chart tests add to it.
struct Plane(support::ControlPlane);

impl std::ops::Deref for Plane {
    type Target = support::ControlPlane;
    fn deref(&self) -> &support::ControlPlane {
        &self.0
    }
}

impl Plane {
    async fn start() -> Self {
        Self(support::ControlPlane::start().await)
    }

    /// Lets the release `capstan` in `namespace` adopt the CRDs the control plane already
    /// serves (as in a cluster where `capstan install` ran before): Helm takes over objects
    /// carrying its release's two annotations and its `managed-by` label.
    async fn adopt_crds(&self, namespace: &str) {
        let owner = format!("meta.helm.sh/release-namespace={namespace}");
        for crd in &crd_names() {
            let annotate = [
                "annotate",
                "crd",
                crd,
                "meta.helm.sh/release-name=capstan",
                &owner,
            ];
            self.kubectl(&annotate).await.ok();
            let label = ["label", "crd", crd, "app.kubernetes.io/managed-by=Helm"];
            self.kubectl(&label).await.ok();
        }
    }

    /// `kind/namespace/name` of the objects labelled as the installation in `namespace`.
    async fn installed(&self, namespace: &str) -> Vec<String> {
        let selector =
            format!("app.kubernetes.io/part-of=capstan,app.kubernetes.io/instance={namespace}");
        let listed = self
            .kubectl(&[
                "get",
                "deployments,services,serviceaccounts,networkpolicies,resourcequotas,\
                 clusterroles,clusterrolebindings,customresourcedefinitions",
                "-A",
                "-l",
                &selector,
                "-o",
                "json",
            ])
            .await
            .ok()
            .json();
        let mut found: Vec<String> = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(key)
            .collect();
        found.sort();
        found
    }
}

/// The CRDs of Capstan's kinds, by name.
fn crd_names() -> Vec<String> {
    capstan_api::crds()
        .into_iter()
        .map(|crd| crd.metadata.name.unwrap())
        .collect()
}

/// `helm install` of the chart with Helm's SDK into the embedded control plane: Capstan's
/// objects are there, labelled so that `capstan check` finds the controller and the CRDs; the
/// CRDs `capstan dev` serves are adopted as Helm's documentation says (its two annotations and
/// label); `helm uninstall` removes the installation and keeps the CRDs and the objects of
/// their kinds.
#[tokio::test]
async fn helm_installs_the_chart_and_uninstall_keeps_the_crds() {
    const NS: &str = "capstan-chart";
    let plane = Plane::start().await;
    plane.kubectl(&["create", "namespace", NS]).await.ok();
    plane.adopt_crds(NS).await;

    let installed = helm_sdk(json!({
        "op": "install", "kubeconfig": plane.kubeconfig, "namespace": NS,
        "chart": chart_dir(), "name": "capstan",
    }))
    .await
    .unwrap_or_else(|e| panic!("helm install: {e}"));
    assert_eq!(installed["status"], "deployed", "{installed}");

    // Every object the chart renders is in the cluster, labelled as `capstan install` labels.
    let mut wanted: Vec<String> = rendered(NS, &json!({}), plane.dir.path())
        .await
        .iter()
        .map(key)
        .collect();
    wanted.sort();
    assert_eq!(plane.installed(NS).await, wanted);

    // `capstan check` finds the controller by its labels, and every CRD.
    let check: Run = support::capstan(&plane.kubeconfig, &["check", "-n", NS, "--timeout", "30s"])
        .output()
        .await
        .unwrap()
        .into();
    let check = check.ok();
    for line in [
        "✔ capstan-controller",
        "✔ kustomizations.kustomize.toolkit.fluxcd.io/v1",
    ] {
        assert!(check.stderr.contains(line), "{}", check.stderr);
    }

    // `helm upgrade` changes what the values say; without the CRDs in the chart any more
    // (`installCRDs=false`) the kept CRDs stay.
    let upgraded = helm_sdk(json!({
        "op": "upgrade", "kubeconfig": plane.kubeconfig, "namespace": NS,
        "chart": chart_dir(), "name": "capstan",
        "values": {"concurrent": 10, "installCRDs": false},
    }))
    .await
    .unwrap_or_else(|e| panic!("helm upgrade: {e}"));
    assert_eq!(upgraded["revision"], 2, "{upgraded}");
    let deployment = plane
        .kubectl(&[
            "-n",
            NS,
            "get",
            "deployment",
            "capstan-controller",
            "-o",
            "json",
        ])
        .await
        .ok()
        .json();
    let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array().unwrap().contains(&json!("--concurrent=10")),
        "{args}"
    );
    assert_eq!(plane.installed(NS).await, wanted);

    let repo = plane.dir.path().join("repo.yaml");
    std::fs::write(
        &repo,
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: app\n  \
         namespace: default\nspec:\n  url: https://git.example.invalid/app\n  interval: 1m\n",
    )
    .unwrap();
    plane
        .kubectl(&["apply", "-f", repo.to_str().unwrap()])
        .await
        .ok();

    helm_sdk(json!({
        "op": "uninstall", "kubeconfig": plane.kubeconfig, "namespace": NS, "name": "capstan",
    }))
    .await
    .unwrap_or_else(|e| panic!("helm uninstall: {e}"));
    // What is left of the installation is the CRDs, every one of them, and the objects of
    // their kinds.
    let mut crds: Vec<String> = crd_names()
        .iter()
        .map(|name| format!("CustomResourceDefinition/-/{name}"))
        .collect();
    crds.sort();
    let plane = &plane;
    let crds = &crds;
    eventually(
        Duration::from_secs(30),
        "the installation is gone",
        || async move { (plane.installed(NS).await == *crds).then_some(()) },
    )
    .await;
    plane
        .kubectl(&["-n", "default", "get", "gitrepository", "app"])
        .await
        .ok();
}
