//! kubectl conformance: the real `kubectl` drives the embedded control plane, and every test
//! asserts what a user would see (exit codes, messages, the objects read back).

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::harness::{Run, TestCluster, corpus, eventually};

const CRD: &str = r"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, shortNames: [wd], listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer}
              color: {type: string, enum: [red, green, blue]}
              replicas: {type: integer, default: 1}
              tier: {type: string, default: standard}
          status:
            type: object
            properties:
              phase: {type: string}
";

const DEPLOYMENT: &str = r"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, team: blue}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.25
        ports: [{containerPort: 80}]
      - name: sidecar
        image: busybox:1.36
";

const LONG: Duration = Duration::from_secs(20);

async fn started_with_crd() -> TestCluster {
    let c = TestCluster::start().await;
    c.kubectl_stdin(&["apply", "-f", "-"], CRD).await.ok();
    c
}

async fn get_json(c: &TestCluster, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    c.kubectl(&all).await.ok().json()
}

/// `metadata.resourceVersion` of every object of a `-o json` list, keyed by kind/namespace/name.
fn resource_versions(list: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = list["items"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|o| {
            let key = format!(
                "{}/{}/{}",
                o["kind"].as_str().unwrap_or(""),
                o["metadata"]["namespace"].as_str().unwrap_or(""),
                o["metadata"]["name"].as_str().unwrap_or("")
            );
            (
                key,
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

fn assert_mentions(run: &Run, needles: &[&str]) {
    let text = format!("{}{}", run.stdout, run.stderr);
    for n in needles {
        assert!(
            text.contains(n),
            "expected {n:?} in kubectl output:\nstdout: {}\nstderr: {}",
            run.stdout,
            run.stderr
        );
    }
}

/// The names in a list, sorted, without the `kube-root-ca.crt` ConfigMap every namespace holds.
fn names(list: &Value) -> Vec<String> {
    let mut v: Vec<String> = list["items"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap_or("").to_owned())
        .filter(|name| name != "kube-root-ca.crt")
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------------
// Discovery

#[tokio::test(flavor = "multi_thread")]
async fn api_resources_lists_builtins_and_api_versions() {
    let c = TestCluster::start().await;
    let run = c.kubectl(&["api-resources", "--no-headers"]).await.ok();
    let rows: Vec<Vec<&str>> = run
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let row = |name: &str| {
        rows.iter()
            .find(|r| r[0] == name)
            .unwrap_or_else(|| panic!("{name} missing:\n{}", run.stdout))
    };
    assert_eq!(
        *row("deployments"),
        ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    );
    assert_eq!(
        *row("configmaps"),
        ["configmaps", "cm", "v1", "true", "ConfigMap"]
    );
    assert_eq!(
        *row("customresourcedefinitions"),
        [
            "customresourcedefinitions",
            "crd,crds",
            "apiextensions.k8s.io/v1",
            "false",
            "CustomResourceDefinition"
        ]
    );
    assert_eq!(row("namespaces")[3], "false");
    let versions = c.kubectl(&["api-versions"]).await.ok();
    let versions: Vec<&str> = versions.stdout.lines().collect();
    for v in [
        "v1",
        "apps/v1",
        "batch/v1",
        "apiextensions.k8s.io/v1",
        "rbac.authorization.k8s.io/v1",
    ] {
        assert!(versions.contains(&v), "{v} missing from {versions:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn applied_crd_appears_in_discovery_with_short_names() {
    let c = started_with_crd().await;
    let run = c
        .kubectl(&["api-resources", "--api-group=example.com", "--no-headers"])
        .await
        .ok();
    let row: Vec<&str> = run.stdout.split_whitespace().collect();
    assert_eq!(row, ["widgets", "wd", "example.com/v1", "true", "Widget"]);
    let versions = c.kubectl(&["api-versions"]).await.ok();
    assert!(
        versions.stdout.lines().any(|l| l == "example.com/v1"),
        "{}",
        versions.stdout
    );
    // The short name resolves.
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 3}\n",
    )
    .await
    .ok();
    let w = get_json(&c, &["wd", "w"]).await;
    assert_eq!(w["spec"]["size"], 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn raw_version_and_apis() {
    let c = TestCluster::start().await;
    let version = c.kubectl(&["get", "--raw", "/version"]).await.ok().json();
    assert_eq!(version["major"], "1");
    assert!(
        version["gitVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with('v'))
    );
    let apis = c.kubectl(&["get", "--raw", "/apis"]).await.ok().json();
    assert_eq!(apis["kind"], "APIGroupList");
    let groups: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert!(
        groups.contains(&"apps") && groups.contains(&"apiextensions.k8s.io"),
        "{groups:?}"
    );
    // `kubectl version` talks to /version too.
    let v = c.kubectl(&["version", "-o", "json"]).await.ok().json();
    assert_eq!(v["serverVersion"]["major"], "1");
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_uses_openapi_v3() {
    let c = TestCluster::start().await;
    let run = c
        .kubectl(&["explain", "deployment.spec.replicas"])
        .await
        .ok();
    assert_mentions(&run, &["KIND:", "Deployment", "FIELD: replicas <integer>"]);
    let run = c.kubectl(&["explain", "configmaps"]).await.ok();
    assert_mentions(&run, &["data", "<map[string]string>"]);
}

// ---------------------------------------------------------------------------------------------
// Server-side apply

#[tokio::test(flavor = "multi_thread")]
async fn server_side_apply_of_podinfo_bases_is_idempotent() {
    let c = TestCluster::start().await;
    let files = [
        "podinfo/podinfo-kustomize.expected.yaml",
        "podinfo/podinfo-deploy-base-backend.expected.yaml",
        "podinfo/podinfo-deploy-base-cache.expected.yaml",
        "podinfo/podinfo-deploy-base-database.expected.yaml",
        "podinfo/podinfo-deploy-base-frontend.expected.yaml",
    ];
    let args: Vec<String> = files
        .iter()
        .flat_map(|f| ["-f".to_owned(), corpus(f).display().to_string()])
        .collect();
    let mut apply = vec!["apply", "--server-side"];
    apply.extend(args.iter().map(String::as_str));
    let first = c.kubectl(&apply).await.ok();
    assert_mentions(
        &first,
        &[
            "deployment.apps/podinfo serverside-applied",
            "horizontalpodautoscaler.autoscaling/podinfo serverside-applied",
        ],
    );
    let kinds = "deployments,services,configmaps,horizontalpodautoscalers,serviceaccounts,statefulsets,cronjobs,persistentvolumeclaims";
    let before = resource_versions(&get_json(&c, &[kinds]).await);
    assert!(before.len() >= 10, "{before:?}");
    c.kubectl(&apply).await.ok();
    let after = resource_versions(&get_json(&c, &[kinds]).await);
    assert_eq!(
        before, after,
        "a second identical apply changed resourceVersions"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn server_side_apply_of_podinfo_overlays_into_their_namespaces() {
    let c = TestCluster::start().await;
    let c = &c;
    let one = |env: &'static str| async move {
        let file = corpus(&format!(
            "podinfo/podinfo-deploy-overlay-{env}.expected.yaml"
        ));
        let file = file.display().to_string();
        c.kubectl(&["create", "namespace", env]).await.ok();
        c.kubectl(&["apply", "--server-side", "-f", &file])
            .await
            .ok();
        let kinds = "deployments,services,configmaps,cronjobs,statefulsets,serviceaccounts,horizontalpodautoscalers";
        let before = resource_versions(&get_json(c, &[kinds, "-n", env]).await);
        assert!(before.len() >= 20, "{env}: {before:?}");
        c.kubectl(&["apply", "--server-side", "-f", &file])
            .await
            .ok();
        let after = resource_versions(&get_json(c, &[kinds, "-n", env]).await);
        assert_eq!(
            before, after,
            "{env}: second apply changed resourceVersions"
        );
    };
    tokio::join!(one("dev"), one("staging"), one("production"));
    // Every namespace got its own copy.
    let all = get_json(c, &["deployments", "-A"]).await;
    let namespaces: std::collections::BTreeSet<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["metadata"]["namespace"].as_str())
        .collect();
    assert!(
        ["dev", "staging", "production"]
            .iter()
            .all(|n| namespaces.contains(n)),
        "{namespaces:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn server_side_apply_conflict_and_force_conflicts() {
    let c = TestCluster::start().await;
    c.kubectl_stdin(&["apply", "--server-side", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    let change = DEPLOYMENT.replace("replicas: 2", "replicas: 5");
    let run = c
        .kubectl_stdin(
            &[
                "apply",
                "--server-side",
                "--field-manager=intruder",
                "-f",
                "-",
            ],
            &change,
        )
        .await
        .fails();
    assert_mentions(&run, &["conflict", "\"kubectl\"", ".spec.replicas"]);
    assert_eq!(
        get_json(&c, &["deploy", "web"]).await["spec"]["replicas"],
        2
    );
    c.kubectl_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager=intruder",
            "--force-conflicts",
            "-f",
            "-",
        ],
        &change,
    )
    .await
    .ok();
    let d = get_json(&c, &["deploy", "web", "--show-managed-fields"]).await;
    assert_eq!(d["spec"]["replicas"], 5);
    let managers = d["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields");
    let owner_of_replicas: Vec<&str> = managers
        .iter()
        .filter(|m| m["fieldsV1"]["f:spec"].get("f:replicas").is_some())
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(owner_of_replicas, ["intruder"]);
    let intruder = managers
        .iter()
        .find(|m| m["manager"] == "intruder")
        .unwrap();
    assert_eq!(intruder["operation"], "Apply");
}

#[tokio::test(flavor = "multi_thread")]
async fn server_side_apply_removes_fields_dropped_from_the_configuration() {
    let c = TestCluster::start().await;
    c.kubectl_stdin(&["apply", "--server-side", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    let without_team = DEPLOYMENT.replace(", team: blue", "");
    c.kubectl_stdin(&["apply", "--server-side", "-f", "-"], &without_team)
        .await
        .ok();
    let d = get_json(&c, &["deploy", "web"]).await;
    assert!(
        d["metadata"]["labels"].get("team").is_none(),
        "{}",
        d["metadata"]["labels"]
    );
    assert_eq!(d["metadata"]["labels"]["app"], "web");
}

// ---------------------------------------------------------------------------------------------
// Client-side apply

#[tokio::test(flavor = "multi_thread")]
async fn client_side_apply_updates_and_removes_fields() {
    let c = TestCluster::start().await;
    let file = c.file("web.yaml", DEPLOYMENT);
    let file = file.display().to_string();
    let run = c.kubectl(&["apply", "-f", &file]).await.ok();
    assert_mentions(&run, &["deployment.apps/web created"]);
    let d = get_json(&c, &["deploy", "web"]).await;
    let last = d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .expect("last-applied");
    let last: Value = serde_json::from_str(last).unwrap();
    assert_eq!(last["spec"]["replicas"], 2);

    // Unchanged file: nothing happens.
    let run = c.kubectl(&["apply", "-f", &file]).await.ok();
    assert_mentions(&run, &["deployment.apps/web unchanged"]);

    let changed = DEPLOYMENT
        .replace("nginx:1.25", "nginx:1.27")
        .replace("containerPort: 80", "containerPort: 8080")
        .replace(", team: blue", "");
    c.file("web.yaml", &changed);
    let run = c.kubectl(&["apply", "-f", &file]).await.ok();
    assert_mentions(&run, &["deployment.apps/web configured"]);
    let d = get_json(&c, &["deploy", "web"]).await;
    let containers = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 2);
    assert_eq!(containers[0]["image"], "nginx:1.27");
    assert_eq!(containers[0]["ports"].as_array().unwrap().len(), 1);
    assert_eq!(containers[0]["ports"][0]["containerPort"], 8080);
    assert_eq!(containers[1]["image"], "busybox:1.36");
    assert!(
        d["metadata"]["labels"].get("team").is_none(),
        "label not removed: {}",
        d["metadata"]["labels"]
    );
    assert_eq!(d["metadata"]["generation"], 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn client_side_apply_keeps_fields_set_by_others() {
    let c = TestCluster::start().await;
    let file = c.file("web.yaml", DEPLOYMENT);
    let file = file.display().to_string();
    c.kubectl(&["apply", "-f", &file]).await.ok();
    c.kubectl(&["label", "deploy", "web", "owner=ops"])
        .await
        .ok();
    c.file(
        "web.yaml",
        &DEPLOYMENT.replace("replicas: 2", "replicas: 3"),
    );
    c.kubectl(&["apply", "-f", &file]).await.ok();
    let d = get_json(&c, &["deploy", "web"]).await;
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(
        d["metadata"]["labels"]["owner"], "ops",
        "a label the file never had was removed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn diff_exit_codes() {
    let c = TestCluster::start().await;
    let file = c.file("web.yaml", DEPLOYMENT);
    let file = file.display().to_string();
    c.kubectl(&["apply", "-f", &file]).await.ok();
    let same = c.kubectl(&["diff", "-f", &file]).await;
    assert_eq!(same.status, 0, "diff of an unchanged file: {same:?}");
    c.file("web.yaml", &DEPLOYMENT.replace("nginx:1.25", "nginx:1.27"));
    let changed = c.kubectl(&["diff", "-f", &file]).await;
    assert_eq!(changed.status, 1, "diff of a changed file: {changed:?}");
    assert!(changed.stdout.contains("nginx:1.27"), "{}", changed.stdout);
    // diff changed nothing.
    let d = get_json(&c, &["deploy", "web"]).await;
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.25"
    );
}

// ---------------------------------------------------------------------------------------------
// get

#[tokio::test(flavor = "multi_thread")]
async fn get_yaml_shows_managed_fields_only_when_asked() {
    let c = TestCluster::start().await;
    c.kubectl_stdin(&["apply", "--server-side", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    let plain = c
        .kubectl(&["get", "deploy", "web", "-o", "yaml"])
        .await
        .ok();
    assert!(!plain.stdout.contains("managedFields"), "{}", plain.stdout);
    let shown = c
        .kubectl(&[
            "get",
            "deploy",
            "web",
            "-o",
            "yaml",
            "--show-managed-fields",
        ])
        .await
        .ok();
    assert_mentions(
        &shown,
        &[
            "managedFields:",
            "manager: kubectl",
            "operation: Apply",
            "fieldsType: FieldsV1",
            "f:replicas: {}",
        ],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn get_table_output_for_deployments() {
    let c = TestCluster::start().await;
    c.kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    let run = eventually(LONG, "deployment ready in table", || async {
        let run = c.kubectl(&["get", "deployments"]).await.ok();
        run.stdout
            .lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().nth(1) == Some("2/2"))
            .then_some(run)
    })
    .await;
    let header: Vec<&str> = run
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
    let row: Vec<&str> = run
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(&row[..4], ["web", "2/2", "2", "2"]);
    // -o wide adds the containers and images.
    let wide = c.kubectl(&["get", "deployments", "-o", "wide"]).await.ok();
    assert_mentions(&wide, &["NAME", "READY"]);
    // A ConfigMap table has DATA.
    c.kubectl(&[
        "create",
        "configmap",
        "c",
        "--from-literal=a=1",
        "--from-literal=b=2",
    ])
    .await
    .ok();
    let cm = c.kubectl(&["get", "cm", "c"]).await.ok();
    let header: Vec<&str> = cm
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "DATA", "AGE"]);
    assert_eq!(
        cm.stdout.lines().nth(1).unwrap().split_whitespace().nth(1),
        Some("2")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn get_output_name_and_jsonpath() {
    let c = TestCluster::start().await;
    c.kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    c.kubectl(&["create", "configmap", "one", "--from-literal=k=v"])
        .await
        .ok();
    let run = c
        .kubectl(&["get", "deploy/web", "cm/one", "-o", "name"])
        .await
        .ok();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines.contains(&"deployment.apps/web") && lines.contains(&"configmap/one"),
        "{lines:?}"
    );
    let run = c
        .kubectl(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.replicas} {.spec.template.spec.containers[*].name}",
        ])
        .await
        .ok();
    assert_eq!(run.stdout, "2 app sidecar");
    let run = c
        .kubectl(&[
            "get",
            "cm",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.data.k};{end}",
        ])
        .await
        .ok();
    assert!(run.stdout.contains("one=v;"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn get_with_label_and_field_selectors() {
    let c = TestCluster::start().await;
    for (name, tier) in [("a", "front"), ("b", "back"), ("c", "front")] {
        c.kubectl(&["create", "configmap", name, "--from-literal=x=y"])
            .await
            .ok();
        c.kubectl(&["label", "cm", name, &format!("tier={tier}")])
            .await
            .ok();
    }
    assert_eq!(
        names(&get_json(&c, &["cm", "-l", "tier=front"]).await),
        ["a", "c"]
    );
    assert_eq!(
        names(&get_json(&c, &["cm", "-l", "tier!=front,tier"]).await),
        ["b"]
    );
    assert_eq!(
        names(&get_json(&c, &["cm", "-l", "tier in (back,none)"]).await),
        ["b"]
    );
    assert_eq!(
        names(&get_json(&c, &["cm", "--field-selector", "metadata.name=c"]).await),
        ["c"]
    );
    let not_a = names(
        &get_json(
            &c,
            &["cm", "--field-selector", "metadata.name!=a", "-l", "tier"],
        )
        .await,
    );
    assert_eq!(not_a, ["b", "c"]);
    let run = c.kubectl(&["get", "cm", "-l", "tier=none"]).await.ok();
    assert_mentions(&run, &["No resources found in default namespace."]);
}

#[tokio::test(flavor = "multi_thread")]
async fn get_all_namespaces() {
    let c = TestCluster::start().await;
    c.kubectl(&["create", "namespace", "team-a"]).await.ok();
    c.kubectl(&[
        "create",
        "configmap",
        "x",
        "-n",
        "team-a",
        "--from-literal=a=b",
    ])
    .await
    .ok();
    c.kubectl(&["create", "configmap", "y", "--from-literal=a=b"])
        .await
        .ok();
    let all = get_json(&c, &["cm", "--all-namespaces"]).await;
    let pairs: Vec<(String, String)> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["namespace"].as_str().unwrap().to_owned(),
                o["metadata"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        pairs.contains(&("team-a".into(), "x".into()))
            && pairs.contains(&("default".into(), "y".into())),
        "{pairs:?}"
    );
    let table = c.kubectl(&["get", "cm", "-A"]).await.ok();
    assert!(table.stdout.starts_with("NAMESPACE"), "{}", table.stdout);
    // Only the namespace asked for.
    assert_eq!(names(&get_json(&c, &["cm", "-n", "team-a"]).await), ["x"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn get_missing_object_is_not_found() {
    let c = TestCluster::start().await;
    let run = c.kubectl(&["get", "configmap", "nope"]).await.fails();
    assert_eq!(run.status, 1);
    assert_mentions(
        &run,
        &["Error from server (NotFound): configmaps \"nope\" not found"],
    );
    let run = c
        .kubectl(&["get", "deploy", "nope", "-n", "kube-system"])
        .await
        .fails();
    assert_mentions(&run, &["deployments.apps \"nope\" not found"]);
    // --ignore-not-found turns it into success.
    c.kubectl(&["get", "configmap", "nope", "--ignore-not-found"])
        .await
        .ok();
    let run = c.kubectl(&["get", "nosuchkind"]).await.fails();
    assert_mentions(
        &run,
        &["the server doesn't have a resource type \"nosuchkind\""],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn get_watch_streams_updates() {
    let c = TestCluster::start().await;
    c.kubectl(&["create", "configmap", "watched", "--from-literal=v=1"])
        .await
        .ok();
    let mut child = c.kubectl_spawn(&["get", "cm", "watched", "-w", "-o", "json"]);
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    // kubectl prints JSON objects pretty-printed, one after another: collect until v=2 shows up.
    let seen = tokio::time::timeout(LONG, async {
        let mut text = String::new();
        let mut patched = false;
        while let Some(line) = lines.next_line().await.expect("read") {
            text.push_str(&line);
            text.push('\n');
            if !patched && line == "}" {
                // The initial state arrived: change the object.
                c.kubectl(&[
                    "patch",
                    "cm",
                    "watched",
                    "--type=merge",
                    "-p",
                    r#"{"data":{"v":"2"}}"#,
                ])
                .await
                .ok();
                patched = true;
            }
            if patched && line == "}" && text.contains("\"v\": \"2\"") {
                return text;
            }
        }
        text
    })
    .await
    .expect("watch delivered the update");
    assert!(
        seen.contains("\"v\": \"1\"") && seen.contains("\"v\": \"2\""),
        "{seen}"
    );
    child.kill().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn get_watch_names_new_objects() {
    let c = TestCluster::start().await;
    let mut child = c.kubectl_spawn(&["get", "cm", "-w", "-o", "name", "-l", "w=1"]);
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fresh, labels: {w: '1'}}\n",
    )
    .await
    .ok();
    let line = tokio::time::timeout(LONG, lines.next_line())
        .await
        .expect("a line in time")
        .expect("read");
    assert_eq!(line.as_deref(), Some("configmap/fresh"));
    child.kill().await.ok();
}

// ---------------------------------------------------------------------------------------------
// Workloads: wait, rollout

#[tokio::test(flavor = "multi_thread")]
async fn wait_for_available_and_rollout_status() {
    let c = TestCluster::start().await;
    let file = corpus("podinfo/podinfo-kustomize.expected.yaml")
        .display()
        .to_string();
    c.kubectl(&["apply", "--server-side", "-f", &file])
        .await
        .ok();
    let run = c
        .kubectl(&[
            "wait",
            "--for=condition=Available",
            "deploy/podinfo",
            "--timeout=20s",
        ])
        .await
        .ok();
    assert_mentions(&run, &["deployment.apps/podinfo condition met"]);
    let run = c
        .kubectl(&["rollout", "status", "deploy/podinfo", "--timeout=20s"])
        .await
        .ok();
    assert_mentions(&run, &["successfully rolled out"]);
    let d = get_json(&c, &["deploy", "podinfo"]).await;
    assert_eq!(
        d["status"]["observedGeneration"],
        d["metadata"]["generation"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_times_out_on_a_hanging_rollout() {
    let c = TestCluster::start().await;
    let hang = DEPLOYMENT.replace(
        "  labels: {app: web, team: blue}",
        "  labels: {app: web}\n  annotations: {sim.capstan.dev/rollout: hang}",
    );
    c.kubectl_stdin(&["apply", "-f", "-"], &hang).await.ok();
    let (wait, rollout) = tokio::join!(
        c.kubectl(&[
            "wait",
            "--for=condition=Available",
            "deploy/web",
            "--timeout=2s"
        ]),
        c.kubectl(&["rollout", "status", "deploy/web", "--timeout=2s"]),
    );
    assert_mentions(&wait.fails(), &["timed out"]);
    assert_mentions(
        &rollout.fails(),
        &["Waiting for deployment \"web\" rollout to finish"],
    );
    let d = get_json(&c, &["deploy", "web"]).await;
    let available = d["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Available")
        .unwrap();
    assert_eq!(available["status"], "False");
}

#[tokio::test(flavor = "multi_thread")]
async fn wait_for_jsonpath_and_delete() {
    let c = TestCluster::start().await;
    c.kubectl(&["create", "configmap", "gone-soon", "--from-literal=a=b"])
        .await
        .ok();
    c.kubectl(&[
        "wait",
        "--for=jsonpath={.data.a}=b",
        "cm/gone-soon",
        "--timeout=10s",
    ])
    .await
    .ok();
    let mut waiter = c.kubectl_spawn(&["wait", "--for=delete", "cm/gone-soon", "--timeout=20s"]);
    c.kubectl(&["delete", "cm", "gone-soon"]).await.ok();
    let status = tokio::time::timeout(LONG, waiter.wait())
        .await
        .expect("wait --for=delete returned")
        .unwrap();
    assert!(status.success());
}

// ---------------------------------------------------------------------------------------------
// Deletion: finalizers, namespaces, garbage collection

#[tokio::test(flavor = "multi_thread")]
async fn delete_waits_for_finalizers() {
    let c = TestCluster::start().await;
    c.kubectl_stdin(&["apply", "-f", "-"], "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, finalizers: [example.com/hold]}\ndata: {a: b}\n").await.ok();
    let mut deleting = c.kubectl_spawn(&["delete", "cm", "held"]);
    let cm = eventually(LONG, "deletionTimestamp set", || async {
        let cm = get_json(&c, &["cm", "held"]).await;
        cm["metadata"]
            .get("deletionTimestamp")
            .is_some()
            .then_some(cm)
    })
    .await;
    assert_eq!(cm["metadata"]["finalizers"][0], "example.com/hold");
    // While the object is there (a bounded number of observations), kubectl keeps waiting.
    for _ in 0..5 {
        c.kubectl(&["get", "cm", "held"]).await.ok();
        assert!(
            deleting.try_wait().unwrap().is_none(),
            "kubectl delete returned before the finalizer was removed"
        );
    }
    c.kubectl(&[
        "patch",
        "cm",
        "held",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await
    .ok();
    let status = tokio::time::timeout(LONG, deleting.wait())
        .await
        .expect("delete finished")
        .unwrap();
    assert!(status.success());
    c.kubectl(&["get", "cm", "held"]).await.fails();
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_with_wait_false_returns_at_once() {
    let c = TestCluster::start().await;
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, finalizers: [example.com/hold]}\n",
    )
    .await
    .ok();
    c.kubectl(&["delete", "cm", "held", "--wait=false"])
        .await
        .ok();
    let cm = get_json(&c, &["cm", "held"]).await;
    assert!(cm["metadata"]["deletionTimestamp"].is_string());
    // New finalizers cannot be added to an object being deleted.
    let run = c
        .kubectl(&[
            "patch",
            "cm",
            "held",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":["example.com/hold","example.com/more"]}}"#,
        ])
        .await
        .fails();
    assert_mentions(&run, &["finalizers"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn deleting_a_namespace_removes_its_objects() {
    let c = TestCluster::start().await;
    c.kubectl(&["create", "namespace", "doomed"]).await.ok();
    c.kubectl(&[
        "create",
        "configmap",
        "a",
        "-n",
        "doomed",
        "--from-literal=x=y",
    ])
    .await
    .ok();
    c.kubectl_stdin(&["apply", "-n", "doomed", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    c.kubectl(&["delete", "namespace", "doomed", "--timeout=20s"])
        .await
        .ok();
    c.kubectl(&["get", "namespace", "doomed"]).await.fails();
    let all = get_json(&c, &["cm,deploy", "-A"]).await;
    assert!(
        all["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["metadata"]["namespace"] != "doomed")
    );
    // A new namespace of the same name starts empty.
    c.kubectl(&["create", "namespace", "doomed"]).await.ok();
    let run = c
        .kubectl(&["get", "cm,deploy", "-n", "doomed", "-o", "name"])
        .await
        .ok();
    assert!(!run.stdout.contains("configmap/a"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn creating_in_a_missing_namespace_fails() {
    let c = TestCluster::start().await;
    let run = c
        .kubectl(&[
            "create",
            "configmap",
            "a",
            "-n",
            "nowhere",
            "--from-literal=x=y",
        ])
        .await
        .fails();
    assert_mentions(&run, &["namespaces \"nowhere\" not found"]);
}

async fn owner_and_dependents(c: &TestCluster) -> String {
    c.kubectl(&["create", "configmap", "owner", "--from-literal=a=b"])
        .await
        .ok();
    let uid = c
        .kubectl(&["get", "cm", "owner", "-o", "jsonpath={.metadata.uid}"])
        .await
        .ok()
        .stdout;
    for name in ["dep-1", "dep-2"] {
        let yaml = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  ownerReferences:\n  - {{apiVersion: v1, kind: ConfigMap, name: owner, uid: {uid}, blockOwnerDeletion: true}}\n"
        );
        c.kubectl_stdin(&["apply", "-f", "-"], &yaml).await.ok();
    }
    uid
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_collection_background() {
    let c = TestCluster::start().await;
    owner_and_dependents(&c).await;
    c.kubectl(&["delete", "cm", "owner"]).await.ok();
    eventually(LONG, "dependents collected", || async {
        let run = c
            .kubectl(&[
                "get",
                "cm",
                "dep-1",
                "dep-2",
                "--ignore-not-found",
                "-o",
                "name",
            ])
            .await
            .ok();
        run.stdout.trim().is_empty().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_collection_orphan() {
    let c = TestCluster::start().await;
    owner_and_dependents(&c).await;
    c.kubectl(&["delete", "cm", "owner", "--cascade=orphan"])
        .await
        .ok();
    c.kubectl(&["get", "cm", "owner"]).await.fails();
    let deps = eventually(LONG, "ownerReferences removed", || async {
        let list = get_json(&c, &["cm", "dep-1", "dep-2"]).await;
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["metadata"].get("ownerReferences").is_none())
            .then_some(list)
    })
    .await;
    assert_eq!(names(&deps), ["dep-1", "dep-2"]);
    // They stay: a later collection (another owner deleted, its dependent collected) has run
    // and left them alone.
    c.kubectl(&["create", "configmap", "owner-2", "--from-literal=a=b"])
        .await
        .ok();
    let uid = c
        .kubectl(&["get", "cm", "owner-2", "-o", "jsonpath={.metadata.uid}"])
        .await
        .ok()
        .stdout;
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dep-3\n  ownerReferences:\n  - {{apiVersion: v1, kind: ConfigMap, name: owner-2, uid: {uid}}}\n"
    );
    c.kubectl_stdin(&["apply", "-f", "-"], &yaml).await.ok();
    c.kubectl(&["delete", "cm", "owner-2"]).await.ok();
    eventually(LONG, "the later dependent collected", || async {
        let run = c
            .kubectl(&["get", "cm", "dep-3", "--ignore-not-found", "-o", "name"])
            .await
            .ok();
        run.stdout.trim().is_empty().then_some(())
    })
    .await;
    c.kubectl(&["get", "cm", "dep-1", "dep-2"]).await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_collection_foreground() {
    let c = TestCluster::start().await;
    owner_and_dependents(&c).await;
    // Hold one dependent with a finalizer so the foreground ordering is observable.
    c.kubectl(&[
        "patch",
        "cm",
        "dep-1",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ])
    .await
    .ok();
    let mut deleting = c.kubectl_spawn(&["delete", "cm", "owner", "--cascade=foreground"]);
    let owner = eventually(LONG, "owner marked with foregroundDeletion", || async {
        let o = get_json(&c, &["cm", "owner"]).await;
        o["metadata"]
            .get("deletionTimestamp")
            .is_some()
            .then_some(o)
    })
    .await;
    assert!(
        owner["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "foregroundDeletion"),
        "{}",
        owner["metadata"]
    );
    eventually(LONG, "unblocked dependent deleted", || async {
        c.kubectl(&["get", "cm", "dep-2", "--ignore-not-found", "-o", "name"])
            .await
            .ok()
            .stdout
            .trim()
            .is_empty()
            .then_some(())
    })
    .await;
    // The owner waits for the held dependent.
    c.kubectl(&["get", "cm", "owner"]).await.ok();
    assert!(
        deleting.try_wait().unwrap().is_none(),
        "foreground delete finished while a dependent remained"
    );
    c.kubectl(&[
        "patch",
        "cm",
        "dep-1",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ])
    .await
    .ok();
    let status = tokio::time::timeout(LONG, deleting.wait())
        .await
        .expect("delete finished")
        .unwrap();
    assert!(status.success());
    c.kubectl(&["get", "cm", "owner"]).await.fails();
    c.kubectl(&["get", "cm", "dep-1"]).await.fails();
}

// ---------------------------------------------------------------------------------------------
// Custom resources: validation, pruning, defaults, status

#[tokio::test(flavor = "multi_thread")]
async fn invalid_custom_resources_are_refused_naming_the_field() {
    let c = started_with_crd().await;
    let wrong_type = c
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: big}\n",
        )
        .await
        .fails();
    assert_mentions(&wrong_type, &["spec.size", "integer"]);
    let missing = c
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {color: red}\n",
        )
        .await
        .fails();
    assert_mentions(&missing, &["spec.size", "Required value"]);
    let bad_enum = c.kubectl_stdin(&["apply", "-f", "-"], "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1, color: purple}\n").await.fails();
    assert_mentions(
        &bad_enum,
        &["spec.color", "Unsupported value", "\"purple\""],
    );
    assert_mentions(&bad_enum, &["The Widget \"w\" is invalid"]);
    c.kubectl(&["get", "wd", "w"]).await.fails();
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_fields_are_refused_strictly_and_pruned_without_validation() {
    let c = started_with_crd().await;
    let body = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1, bogus: 1}\n";
    let run = c.kubectl_stdin(&["apply", "-f", "-"], body).await.fails();
    assert_mentions(
        &run,
        &[
            "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.bogus\"",
        ],
    );
    let run = c
        .kubectl_stdin(&["apply", "--validate=false", "-f", "-"], body)
        .await
        .ok();
    assert_mentions(&run, &["widget.example.com/w created"]);
    let w = get_json(&c, &["wd", "w"]).await;
    assert!(
        w["spec"].get("bogus").is_none(),
        "not pruned: {}",
        w["spec"]
    );
    assert_eq!(w["spec"]["size"], 1);
    // --validate=warn: accepted with a warning.
    let run = c
        .kubectl_stdin(
            &["apply", "--validate=warn", "-f", "-"],
            &body.replace("name: w", "name: w2"),
        )
        .await
        .ok();
    assert_mentions(&run, &["unknown field \"spec.bogus\""]);
    // Built-in kinds too.
    let run = c
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\nbogus: 1\n",
        )
        .await
        .fails();
    assert_mentions(&run, &["unknown field \"bogus\""]);
}

#[tokio::test(flavor = "multi_thread")]
async fn crd_defaults_are_applied() {
    let c = started_with_crd().await;
    c.kubectl_stdin(&["create", "-f", "-"], "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 2, tier: gold}\n").await.ok();
    let w = get_json(&c, &["wd", "w"]).await;
    assert_eq!(w["spec"]["replicas"], 1);
    assert_eq!(
        w["spec"]["tier"], "gold",
        "an explicit value was overridden by the default"
    );
    assert_eq!(w["metadata"]["generation"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn status_subresource_separates_status_from_spec() {
    let c = started_with_crd().await;
    c.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 2}\n",
    )
    .await
    .ok();
    c.kubectl(&[
        "patch",
        "wd",
        "w",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Ready"}}"#,
    ])
    .await
    .ok();
    let w = get_json(&c, &["wd", "w"]).await;
    assert_eq!(w["status"]["phase"], "Ready");
    assert_eq!(
        w["metadata"]["generation"], 1,
        "a status write bumped generation"
    );
    // A main-resource patch of status is ignored; one of spec bumps generation.
    c.kubectl(&[
        "patch",
        "wd",
        "w",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Hacked"},"spec":{"size":3}}"#,
    ])
    .await
    .ok();
    let w = get_json(&c, &["wd", "w"]).await;
    assert_eq!(w["status"]["phase"], "Ready");
    assert_eq!(w["spec"]["size"], 3);
    assert_eq!(w["metadata"]["generation"], 2);
    // The status subresource reads back through kubectl get --subresource.
    let s = c
        .kubectl(&[
            "get",
            "wd",
            "w",
            "--subresource=status",
            "-o",
            "jsonpath={.status.phase}",
        ])
        .await
        .ok();
    assert_eq!(s.stdout, "Ready");
}

#[tokio::test(flavor = "multi_thread")]
async fn custom_resources_list_in_tables_and_delete() {
    let c = started_with_crd().await;
    for n in ["a", "b"] {
        c.kubectl_stdin(&["create", "-f", "-"], &format!("apiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: {n}}}\nspec: {{size: 1}}\n")).await.ok();
    }
    let table = c.kubectl(&["get", "widgets"]).await.ok();
    let header: Vec<&str> = table
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "AGE"]);
    assert_eq!(table.stdout.lines().count(), 3);
    c.kubectl(&["delete", "widgets", "--all"]).await.ok();
    let run = c.kubectl(&["get", "widgets"]).await.ok();
    assert_mentions(&run, &["No resources found"]);
    // Deleting the CRD removes the API.
    c.kubectl(&["delete", "crd", "widgets.example.com"])
        .await
        .ok();
    eventually(LONG, "widgets gone from discovery", || async {
        let run = c
            .kubectl(&["api-resources", "--api-group=example.com", "--no-headers"])
            .await
            .ok();
        run.stdout.trim().is_empty().then_some(())
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Dry runs

#[tokio::test(flavor = "multi_thread")]
async fn dry_run_server_changes_nothing() {
    let c = TestCluster::start().await;
    let run = c
        .kubectl(&[
            "create",
            "configmap",
            "x",
            "--from-literal=a=b",
            "--dry-run=server",
            "-o",
            "json",
        ])
        .await
        .ok();
    assert_eq!(run.json()["data"]["a"], "b");
    c.kubectl(&["get", "cm", "x"]).await.fails();
    let run = c
        .kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    assert_mentions(&run, &["deployment.apps/web created (server dry run)"]);
    c.kubectl(&["get", "deploy", "web"]).await.fails();
    let run = c
        .kubectl_stdin(
            &["apply", "--server-side", "--dry-run=server", "-f", "-"],
            DEPLOYMENT,
        )
        .await
        .ok();
    assert_mentions(&run, &["serverside-applied (server dry run)"]);
    c.kubectl(&["get", "deploy", "web"]).await.fails();

    c.kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    let rv = get_json(&c, &["deploy", "web"]).await["metadata"]["resourceVersion"].clone();
    c.kubectl(&[
        "patch",
        "deploy",
        "web",
        "--dry-run=server",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":9}}"#,
    ])
    .await
    .ok();
    c.kubectl(&["scale", "deploy", "web", "--replicas=7", "--dry-run=server"])
        .await
        .ok();
    c.kubectl(&["label", "deploy", "web", "x=y", "--dry-run=server"])
        .await
        .ok();
    let run = c
        .kubectl(&["delete", "deploy", "web", "--dry-run=server"])
        .await
        .ok();
    assert_mentions(&run, &["deployment.apps \"web\" deleted (server dry run)"]);
    let d = get_json(&c, &["deploy", "web"]).await;
    assert_eq!(d["spec"]["replicas"], 2);
    assert!(d["metadata"]["labels"].get("x").is_none());
    assert_eq!(d["metadata"]["resourceVersion"], rv);
}

// ---------------------------------------------------------------------------------------------
// patch, label, annotate, scale, replace, edit

#[tokio::test(flavor = "multi_thread")]
async fn patch_merge_json_and_strategic() {
    let c = TestCluster::start().await;
    c.kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    c.kubectl(&[
        "patch",
        "deploy",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":4}}"#,
    ])
    .await
    .ok();
    c.kubectl(&["patch", "deploy", "web", "--type=json", "-p", r#"[{"op":"replace","path":"/spec/template/spec/containers/1/image","value":"busybox:1.37"},{"op":"add","path":"/metadata/labels/patched","value":"json"}]"#]).await.ok();
    // Strategic merge: containers merge by name, so this keeps `sidecar` and updates `app`.
    let run = c
        .kubectl(&["patch", "deploy", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:2"},{"name":"extra","image":"redis:7"}]}}}}"#])
        .await
        .ok();
    assert_mentions(&run, &["deployment.apps/web patched"]);
    let d = get_json(&c, &["deploy", "web"]).await;
    assert_eq!(d["spec"]["replicas"], 4);
    assert_eq!(d["metadata"]["labels"]["patched"], "json");
    let containers: Vec<(String, String)> = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["image"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(containers.len(), 3, "{containers:?}");
    assert!(
        containers.contains(&("app".into(), "nginx:2".into())),
        "{containers:?}"
    );
    assert!(
        containers.contains(&("sidecar".into(), "busybox:1.37".into())),
        "{containers:?}"
    );
    assert!(
        containers.contains(&("extra".into(), "redis:7".into())),
        "{containers:?}"
    );
    // A merge patch replaces the whole list.
    c.kubectl(&[
        "patch",
        "deploy",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"only","image":"x:1"}]}}}}"#,
    ])
    .await
    .ok();
    let d = get_json(&c, &["deploy", "web"]).await;
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Unchanged patch: kubectl says so, and the resourceVersion stays.
    let rv = d["metadata"]["resourceVersion"].clone();
    let run = c
        .kubectl(&[
            "patch",
            "deploy",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":4}}"#,
        ])
        .await
        .ok();
    assert_mentions(&run, &["(no change)"]);
    assert_eq!(
        get_json(&c, &["deploy", "web"]).await["metadata"]["resourceVersion"],
        rv
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn patch_errors_are_reported() {
    let c = started_with_crd().await;
    c.kubectl(&["create", "configmap", "c", "--from-literal=a=b"])
        .await
        .ok();
    let run = c.kubectl(&["patch", "cm", "c", "--type=json", "-p", r#"[{"op":"test","path":"/data/a","value":"zzz"},{"op":"replace","path":"/data/a","value":"c"}]"#]).await.fails();
    assert_mentions(&run, &["The request is invalid", "/data/a"]);
    assert_eq!(get_json(&c, &["cm", "c"]).await["data"]["a"], "b");
    c.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1}\n",
    )
    .await
    .ok();
    // Custom resources have no strategic merge patch.
    let run = c
        .kubectl(&["patch", "wd", "w", "-p", r#"{"spec":{"size":2}}"#])
        .await
        .fails();
    assert_mentions(
        &run,
        &["application/strategic-merge-patch+json is not supported"],
    );
    c.kubectl(&[
        "patch",
        "wd",
        "w",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":2}}"#,
    ])
    .await
    .ok();
    let run = c
        .kubectl(&[
            "patch",
            "wd",
            "w",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":"two"}}"#,
        ])
        .await
        .fails();
    assert_mentions(&run, &["spec.size"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn label_and_annotate() {
    let c = TestCluster::start().await;
    c.kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    assert_mentions(
        &c.kubectl(&["label", "deploy", "web", "env=prod"])
            .await
            .ok(),
        &["deployment.apps/web labeled"],
    );
    let run = c
        .kubectl(&["label", "deploy", "web", "env=dev"])
        .await
        .fails();
    assert_mentions(&run, &["already has a value (prod)"]);
    c.kubectl(&["label", "deploy", "web", "env=dev", "--overwrite"])
        .await
        .ok();
    c.kubectl(&["label", "deploy", "web", "team-"]).await.ok();
    assert_mentions(
        &c.kubectl(&["annotate", "deploy", "web", "note=hello world"])
            .await
            .ok(),
        &["deployment.apps/web annotated"],
    );
    let d = get_json(&c, &["deploy", "web"]).await;
    assert_eq!(d["metadata"]["labels"]["env"], "dev");
    assert!(d["metadata"]["labels"].get("team").is_none());
    assert_eq!(d["metadata"]["annotations"]["note"], "hello world");
    // Bad label values are refused by the server.
    let run = c
        .kubectl(&[
            "patch",
            "deploy",
            "web",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"bad":"-no-"}}}"#,
        ])
        .await
        .fails();
    assert_mentions(&run, &["metadata.labels", "Invalid value"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn scale_deployment() {
    let c = TestCluster::start().await;
    c.kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    assert_mentions(
        &c.kubectl(&["scale", "deploy", "web", "--replicas=5"])
            .await
            .ok(),
        &["deployment.apps/web scaled"],
    );
    assert_eq!(
        get_json(&c, &["deploy", "web"]).await["spec"]["replicas"],
        5
    );
    // --current-replicas is a precondition.
    let run = c
        .kubectl(&[
            "scale",
            "deploy",
            "web",
            "--current-replicas=2",
            "--replicas=1",
        ])
        .await
        .fails();
    assert_mentions(&run, &["Expected replicas to be 2, was 5"]);
    eventually(LONG, "status follows the scale", || async {
        let d = get_json(&c, &["deploy", "web"]).await;
        (d["status"]["readyReplicas"] == 5).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn replace_and_stale_resource_version_conflict() {
    let c = TestCluster::start().await;
    c.kubectl(&["create", "configmap", "r", "--from-literal=a=1"])
        .await
        .ok();
    let cm = get_json(&c, &["cm", "r"]).await;
    let mut stale = cm.clone();
    stale["data"]["a"] = "2".into();
    let replaced = c
        .kubectl_stdin(&["replace", "-f", "-"], &stale.to_string())
        .await
        .ok();
    assert_mentions(&replaced, &["configmap/r replaced"]);
    assert_eq!(get_json(&c, &["cm", "r"]).await["data"]["a"], "2");
    // Same resourceVersion again: now stale.
    stale["data"]["a"] = "3".into();
    let run = c
        .kubectl_stdin(&["replace", "-f", "-"], &stale.to_string())
        .await
        .fails();
    assert_mentions(&run, &["Conflict", "the object has been modified"]);
    assert_eq!(get_json(&c, &["cm", "r"]).await["data"]["a"], "2");
    // Without a resourceVersion, replace wins; --force deletes and recreates.
    let mut fresh = stale.clone();
    fresh["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    c.kubectl_stdin(&["replace", "-f", "-"], &fresh.to_string())
        .await
        .ok();
    assert_eq!(get_json(&c, &["cm", "r"]).await["data"]["a"], "3");
    let old_uid = get_json(&c, &["cm", "r"]).await["metadata"]["uid"].clone();
    c.kubectl_stdin(&["replace", "--force", "-f", "-"], &fresh.to_string())
        .await
        .ok();
    assert_ne!(get_json(&c, &["cm", "r"]).await["metadata"]["uid"], old_uid);
    // replace of a missing object.
    let run = c
        .kubectl_stdin(
            &["replace", "-f", "-"],
            &fresh.to_string().replace("\"r\"", "\"missing\""),
        )
        .await
        .fails();
    assert_mentions(&run, &["not found"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn create_generate_name_and_already_exists() {
    let c = TestCluster::start().await;
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: job-}\ndata: {a: b}\n";
    let first = c
        .kubectl_stdin(&["create", "-f", "-", "-o", "name"], yaml)
        .await
        .ok();
    let second = c
        .kubectl_stdin(&["create", "-f", "-", "-o", "name"], yaml)
        .await
        .ok();
    let (a, b) = (first.stdout.trim(), second.stdout.trim());
    assert!(
        a.starts_with("configmap/job-") && a.len() > "configmap/job-".len(),
        "{a}"
    );
    assert_ne!(a, b);
    c.kubectl(&["create", "configmap", "dup"]).await.ok();
    let run = c.kubectl(&["create", "configmap", "dup"]).await.fails();
    assert_mentions(&run, &["configmaps \"dup\" already exists"]);
    let run = c
        .kubectl(&["create", "configmap", "Bad_Name"])
        .await
        .fails();
    assert_mentions(&run, &["metadata.name", "Invalid value"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn create_configmap_and_secret_generic() {
    let c = TestCluster::start().await;
    let file = c.file("app.properties", "color=blue\n");
    let from_file = format!("--from-file={}", file.display());
    c.kubectl(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=mode=fast",
        &from_file,
    ])
    .await
    .ok();
    let cm = get_json(&c, &["cm", "settings"]).await;
    assert_eq!(cm["data"]["mode"], "fast");
    assert_eq!(cm["data"]["app.properties"], "color=blue\n");
    c.kubectl(&[
        "create",
        "secret",
        "generic",
        "creds",
        "--from-literal=user=admin",
        "--from-literal=password=s3cr3t",
    ])
    .await
    .ok();
    let s = get_json(&c, &["secret", "creds"]).await;
    assert_eq!(s["type"], "Opaque");
    assert_eq!(s["data"]["user"], "YWRtaW4=");
    assert_eq!(s["data"]["password"], "czNjcjN0");
    let pw = c
        .kubectl(&[
            "get",
            "secret",
            "creds",
            "-o",
            "go-template={{.data.password | base64decode}}",
        ])
        .await
        .ok();
    assert_eq!(pw.stdout, "s3cr3t");
    // stringData is folded into data.
    c.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Secret\nmetadata: {name: sd}\nstringData: {token: abc}\n",
    )
    .await
    .ok();
    let s = get_json(&c, &["secret", "sd"]).await;
    assert_eq!(s["data"]["token"], "YWJj");
    assert!(s.get("stringData").is_none());
    // Other typed-client generators.
    c.kubectl(&["create", "namespace", "other"]).await.ok();
    c.kubectl(&["create", "serviceaccount", "robot", "-n", "other"])
        .await
        .ok();
    c.kubectl(&[
        "create",
        "deployment",
        "gen",
        "--image=nginx",
        "--replicas=3",
        "--port=80",
    ])
    .await
    .ok();
    let d = get_json(&c, &["deploy", "gen"]).await;
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        80
    );
    c.kubectl(&["create", "service", "clusterip", "gen", "--tcp=80:8080"])
        .await
        .ok();
    let svc = get_json(&c, &["svc", "gen"]).await;
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    assert!(svc["spec"]["clusterIP"].is_string());
    c.kubectl(&[
        "create",
        "job",
        "once",
        "--image=busybox",
        "--",
        "echo",
        "hi",
    ])
    .await
    .ok();
    c.kubectl(&[
        "wait",
        "--for=condition=Complete",
        "job/once",
        "--timeout=20s",
    ])
    .await
    .ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn describe_does_not_error() {
    let c = started_with_crd().await;
    c.kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    c.kubectl(&["create", "configmap", "c", "--from-literal=a=b"])
        .await
        .ok();
    c.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1}\n",
    )
    .await
    .ok();
    let run = c.kubectl(&["describe", "deploy", "web"]).await.ok();
    assert_mentions(
        &run,
        &["Name:", "web", "Replicas:", "2 desired", "nginx:1.25"],
    );
    let run = c.kubectl(&["describe", "cm", "c"]).await.ok();
    assert_mentions(&run, &["Data", "a:"]);
    let run = c.kubectl(&["describe", "wd", "w"]).await.ok();
    assert_mentions(&run, &["Kind:", "Widget", "Size:"]);
    c.kubectl(&["describe", "namespace", "default"]).await.ok();
    c.kubectl(&["describe", "crd", "widgets.example.com"])
        .await
        .ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn rollout_restart_and_set_image() {
    let c = TestCluster::start().await;
    c.kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    c.kubectl(&["set", "image", "deploy/web", "app=nginx:1.99"])
        .await
        .ok();
    c.kubectl(&["rollout", "restart", "deploy/web"]).await.ok();
    let d = get_json(&c, &["deploy", "web"]).await;
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.99"
    );
    assert!(
        d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .is_string()
    );
    assert_eq!(d["metadata"]["generation"], 3);
    c.kubectl(&["rollout", "status", "deploy/web", "--timeout=20s"])
        .await
        .ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_by_label_and_from_file() {
    let c = TestCluster::start().await;
    for n in ["a", "b", "c"] {
        c.kubectl(&["create", "configmap", n]).await.ok();
    }
    c.kubectl(&["label", "cm", "a", "b", "group=x"]).await.ok();
    let run = c.kubectl(&["delete", "cm", "-l", "group=x"]).await.ok();
    assert_mentions(
        &run,
        &["configmap \"a\" deleted", "configmap \"b\" deleted"],
    );
    let file = c.file("web.yaml", DEPLOYMENT);
    let file = file.display().to_string();
    c.kubectl(&["apply", "-f", &file]).await.ok();
    c.kubectl(&["delete", "-f", &file]).await.ok();
    c.kubectl(&["get", "deploy", "web"]).await.fails();
    let left = names(&get_json(&c, &["cm"]).await);
    assert!(
        left.contains(&"c".to_owned()) && !left.contains(&"a".to_owned()),
        "{left:?}"
    );
    let run = c.kubectl(&["delete", "cm", "a"]).await.fails();
    assert_mentions(&run, &["configmaps \"a\" not found"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn edit_with_an_editor() {
    let c = TestCluster::start().await;
    c.kubectl(&["create", "configmap", "e", "--from-literal=color=blue"])
        .await
        .ok();
    let editor = c.file(
        "editor.sh",
        "#!/bin/sh\nsed -i 's/color: blue/color: green/' \"$1\"\n",
    );
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let editor = editor.display().to_string();
    let run = c
        .kubectl_env(&["edit", "cm", "e"], &[("KUBE_EDITOR", &editor)])
        .await
        .ok();
    assert_mentions(&run, &["configmap/e edited"]);
    assert_eq!(get_json(&c, &["cm", "e"]).await["data"]["color"], "green");
    // An edit that changes nothing.
    let run = c
        .kubectl_env(&["edit", "cm", "e"], &[("KUBE_EDITOR", "true")])
        .await
        .ok();
    assert_mentions(&run, &["Edit cancelled, no changes made."]);
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_can_i_and_whoami() {
    let c = TestCluster::start().await;
    let run = c
        .kubectl(&["auth", "can-i", "create", "deployments"])
        .await
        .ok();
    assert_eq!(run.stdout.trim(), "yes");
    let run = c.kubectl(&["auth", "can-i", "--list"]).await.ok();
    assert_mentions(&run, &["*.*", "[*]"]);
    let run = c.kubectl(&["auth", "whoami", "-o", "json"]).await.ok();
    assert_eq!(
        run.json()["status"]["userInfo"]["username"],
        "kubernetes-admin"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn list_pagination_sorting_and_custom_columns() {
    let c = TestCluster::start().await;
    for i in [3, 1, 5, 2, 4] {
        c.kubectl(&[
            "create",
            "configmap",
            &format!("page-{i}"),
            &format!("--from-literal=n={i}"),
        ])
        .await
        .ok();
    }
    // --chunk-size makes kubectl follow continue tokens; every object arrives once.
    let paged = get_json(&c, &["cm", "--chunk-size=2", "-l", "!missing"]).await;
    assert_eq!(
        names(&paged),
        ["page-1", "page-2", "page-3", "page-4", "page-5"]
    );
    let run = c
        .kubectl(&["get", "cm", "--chunk-size=2", "-o", "name"])
        .await
        .ok();
    assert_eq!(
        run.stdout
            .lines()
            .filter(|l| l.starts_with("configmap/page-"))
            .count(),
        5
    );
    let run = c
        .kubectl(&[
            "get",
            "cm",
            "--sort-by=.data.n",
            "-o",
            "custom-columns=NAME:.metadata.name,N:.data.n",
            "--no-headers",
        ])
        .await
        .ok();
    let rows: Vec<Vec<&str>> = run
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|r: &Vec<&str>| r[0].starts_with("page-"))
        .collect();
    assert_eq!(
        rows,
        [
            ["page-1", "1"],
            ["page-2", "2"],
            ["page-3", "3"],
            ["page-4", "4"],
            ["page-5", "5"]
        ]
    );
    let run = c
        .kubectl(&["get", "cm", "page-1", "--show-labels"])
        .await
        .ok();
    assert_mentions(&run, &["LABELS", "<none>"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn expose_autoscale_and_run() {
    let c = TestCluster::start().await;
    c.kubectl_stdin(&["apply", "-f", "-"], DEPLOYMENT)
        .await
        .ok();
    assert_mentions(
        &c.kubectl(&["expose", "deploy", "web", "--port=80", "--target-port=8080"])
            .await
            .ok(),
        &["service/web exposed"],
    );
    let svc = get_json(&c, &["svc", "web"]).await;
    assert_eq!(svc["spec"]["selector"]["app"], "web");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    let table = c.kubectl(&["get", "svc", "web"]).await.ok();
    let header: Vec<&str> = table
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    assert_mentions(&table, &["80/TCP"]);
    assert_mentions(
        &c.kubectl(&["autoscale", "deploy", "web", "--max=5", "--cpu-percent=80"])
            .await
            .ok(),
        &["autoscaled"],
    );
    let hpa = get_json(&c, &["hpa", "web"]).await;
    assert_eq!(hpa["spec"]["maxReplicas"], 5);
    assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], "web");
    c.kubectl(&["run", "one", "--image=nginx", "--labels=run=one"])
        .await
        .ok();
    let pod = get_json(&c, &["pod", "one"]).await;
    assert_eq!(pod["spec"]["containers"][0]["image"], "nginx");
    assert_eq!(pod["status"]["phase"], "Pending");
    let table = c.kubectl(&["get", "pods"]).await.ok();
    assert_mentions(&table, &["Pending"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn namespaces_list_with_status_and_cluster_info() {
    let c = TestCluster::start().await;
    let run = c.kubectl(&["get", "namespaces", "--no-headers"]).await.ok();
    let rows: Vec<Vec<&str>> = run
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(
            rows.iter().any(|r| r[0] == ns && r[1] == "Active"),
            "{ns} missing: {}",
            run.stdout
        );
    }
    let run = c.kubectl(&["cluster-info"]).await.ok();
    assert_mentions(
        &run,
        &["Kubernetes control plane is running at", &c.server.url()],
    );
    // The server refuses to delete a namespace twice over: a second delete of a terminating one is fine.
    c.kubectl(&["create", "namespace", "x"]).await.ok();
    let ns = get_json(&c, &["namespace", "x"]).await;
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(ns["spec"]["finalizers"][0], "kubernetes");
}

/// The GitRepository CRD from the committed Capstan CRDs.
fn git_repository_crd() -> String {
    let all = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../api/crds/capstan-crds.yaml"
    ))
    .unwrap();
    all.split("\n---")
        .find(|doc| doc.contains("name: gitrepositories.source.toolkit.fluxcd.io"))
        .expect("the GitRepository CRD")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn object_names_are_validated_as_kubernetes_does() {
    let c = TestCluster::start().await;
    c.kubectl_stdin(
        &["apply", "--server-side", "-f", "-"],
        &git_repository_crd(),
    )
    .await
    .ok();
    let repo = |name: &str| {
        format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {{name: {name}}}\nspec: {{url: 'https://example.com/repo', interval: 1m}}\n"
        )
    };
    // Custom resources need DNS-1123 subdomain names, with kube-apiserver's message.
    let run = c
        .kubectl_stdin(&["create", "-f", "-"], &repo("Bad_Name"))
        .await
        .fails();
    assert_mentions(
        &run,
        &[
            r#"The GitRepository "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
        ],
    );
    c.kubectl_stdin(&["create", "-f", "-"], &repo("a:b"))
        .await
        .fails();
    let listed = c
        .kubectl(&["get", "gitrepositories", "-o", "name"])
        .await
        .ok();
    assert_eq!(listed.stdout.trim(), "", "nothing was created");
    c.kubectl_stdin(&["create", "-f", "-"], &repo("good.name-1"))
        .await
        .ok();
    let listed = c
        .kubectl(&["get", "gitrepositories", "-o", "name"])
        .await
        .ok();
    assert_eq!(
        listed.stdout.trim(),
        "gitrepository.source.toolkit.fluxcd.io/good.name-1"
    );
    // Namespaces need a DNS-1123 label.
    let run = c.kubectl(&["create", "namespace", "a.b"]).await.fails();
    assert_mentions(
        &run,
        &[
            r#"Invalid value: "a.b": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"#,
        ],
    );
    // RBAC objects only need a valid path segment, as the bootstrap `system:` roles show.
    c.kubectl(&[
        "create",
        "clusterrole",
        "team:Viewer",
        "--verb=get",
        "--resource=pods",
    ])
    .await
    .ok();
    c.kubectl(&["get", "clusterrole", "team:Viewer"]).await.ok();
    c.kubectl(&["create", "configmap", "team:viewer"])
        .await
        .fails();
}
