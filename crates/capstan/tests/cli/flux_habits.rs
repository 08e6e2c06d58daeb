//! More of the `flux` habits of issue 13, through the binary against `capstan dev`: `get all`
//! over every served kind in Flux's sections, `--status-selector` on `get`, `suspend`/`resume`
//! `--all` (one namespace or `-A`; `resume` waiting as Flux does) and `tree kustomization -o
//! json|yaml` in Flux's shape.

use std::time::Duration;

use capstan_testkit::eventually;

use crate::commands::{Env, assert_contains, table};

/// One ConfigMap, applied by the Kustomizations of these tests.
const DEMO: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: demo
  namespace: default
data:
  key: value
";

/// A Kustomization `name` in `namespace` applying `path` of the GitRepository
/// `flux-system/fleet`.
fn kustomization(name: &str, namespace: &str, path: &str) -> String {
    format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: {name}
  namespace: {namespace}
spec:
  interval: 1h
  path: {path}
  prune: true
  sourceRef:
    kind: GitRepository
    name: fleet
    namespace: flux-system
"
    )
}

/// The notification kinds Capstan serves (the Receiver is reconciled, with its token Secret).
const NOTIFICATION: &str = "apiVersion: v1
kind: Secret
metadata:
  name: webhook-token
  namespace: flux-system
stringData:
  token: a-token-of-this-test
---
apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Provider
metadata:
  name: slack
  namespace: flux-system
spec:
  type: slack
  channel: general
---
apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Alert
metadata:
  name: on-call
  namespace: flux-system
spec:
  providerRef:
    name: slack
  eventSources:
    - kind: Kustomization
      name: '*'
---
apiVersion: notification.toolkit.fluxcd.io/v1
kind: Receiver
metadata:
  name: github
  namespace: flux-system
spec:
  type: github
  resources:
    - kind: GitRepository
      name: fleet
  secretRef:
    name: webhook-token
";

impl Env {
    /// Writes `yaml` to a file and `kubectl apply`s it.
    async fn apply(&self, file: &str, yaml: &str) {
        let path = self.dir.path().join(file);
        std::fs::write(&path, yaml).unwrap();
        self.kubectl(&["apply", "-f", &path.to_string_lossy()])
            .await
            .ok();
    }

    /// `capstan create source git fleet` on the test Git server (which must hold a commit),
    /// Ready.
    async fn create_source(&self) {
        let run = self.create_git_fleet().await;
        assert_contains(&run.stderr, "✔ fetched revision main@sha1:");
    }

    /// Waits until the Kustomization `namespace/name` has a Ready condition of `status`.
    async fn wait_ready_status(&self, namespace: &str, name: &str, status: &str) {
        eventually(
            Duration::from_secs(60),
            &format!("Kustomization {namespace}/{name} Ready={status}"),
            || async {
                let run = self
                    .kubectl(&["get", "ks", name, "-n", namespace, "-o", "json"])
                    .await;
                let object = (run.status == 0).then(|| run.json())?;
                object["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == status)
                    .then_some(())
            },
        )
        .await;
    }
}

/// The tables of `get all`: Flux prints each followed by an empty line.
fn sections(stdout: &str) -> Vec<Vec<Vec<String>>> {
    assert!(stdout.ends_with("\n\n"), "{stdout:?}");
    stdout
        .trim_end()
        .split("\n\n")
        .map(table)
        .collect::<Vec<_>>()
}

/// `get all` lists every kind Capstan serves — sources, HelmReleases, Kustomizations and the
/// notification kinds (Receiver, Provider, Alert) — in Flux's order and columns, each table
/// followed by an empty line; `get receivers|alerts|alert-providers` list one kind.
/// `--status-selector` filters every `get` as Flux's does.
#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn flux_habits_get_all_and_status_selector() {
    let env = Env::start().await;
    env.commit(&[("apps/demo.yaml", DEMO)]);
    env.create_source().await;
    env.apply("notification.yaml", NOTIFICATION).await;
    env.apply("ok.yaml", &kustomization("ok", "flux-system", "./apps"))
        .await;
    env.apply(
        "broken.yaml",
        &kustomization("broken", "flux-system", "./missing"),
    )
    .await;
    env.wait_ready_status("flux-system", "ok", "True").await;
    env.wait_ready_status("flux-system", "broken", "False")
        .await;
    eventually(Duration::from_secs(30), "the Receiver Ready", || async {
        let rows = table(&env.capstan(&["get", "receivers"]).await.ok().stdout);
        (rows.len() == 2 && rows[1][2] == "True").then_some(())
    })
    .await;

    let stdout = env.capstan(&["get", "all"]).await.ok().stdout;
    let tables = sections(&stdout);
    let kinds: Vec<&str> = tables
        .iter()
        .map(|s| s[1][0].split('/').next().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "gitrepository",
            "kustomization",
            "receiver",
            "provider",
            "alert"
        ],
        "{stdout}"
    );
    let kustomizations = &tables[1];
    assert_eq!(
        kustomizations[0],
        ["NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE"]
    );
    let names: Vec<&str> = kustomizations[1..].iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, ["kustomization/broken", "kustomization/ok"]);
    assert_eq!(tables[2][0], ["NAME", "SUSPENDED", "READY", "MESSAGE"]);
    assert_eq!(tables[2][1][..3], ["receiver/github", "False", "True"]);
    assert!(
        tables[2][1][3].starts_with("Receiver initialized for path: /hook/"),
        "{stdout}"
    );
    assert_eq!(
        tables[3],
        [
            vec!["NAME", "READY", "MESSAGE"],
            vec!["provider/slack", "True", "Provider is Ready"],
        ]
    );
    assert_eq!(
        tables[4],
        [
            vec!["NAME", "SUSPENDED", "READY", "MESSAGE"],
            vec!["alert/on-call", "False", "True", "Alert is Ready"],
        ]
    );
    // -A puts the namespace first in every section.
    let stdout = env.capstan(&["get", "all", "-A"]).await.ok().stdout;
    for section in sections(&stdout) {
        assert_eq!(section[0][..2], ["NAMESPACE", "NAME"], "{stdout}");
    }
    // The notification kinds one at a time, as `flux get alert-providers` etc.
    let rows = table(&env.capstan(&["get", "alert-providers"]).await.ok().stdout);
    assert_eq!(
        rows,
        [
            ["NAME", "READY", "MESSAGE"],
            ["slack", "True", "Provider is Ready"]
        ]
    );
    let rows = table(&env.capstan(&["get", "alerts"]).await.ok().stdout);
    assert_eq!(rows[1][..3], ["on-call", "False", "True"]);
    let rows = table(&env.capstan(&["get", "receivers", "-A"]).await.ok().stdout);
    assert_eq!(rows[1][..2], ["flux-system", "github"]);

    // --status-selector: the failing objects only; a kind with none is left out of `get all`
    // (the Receiver and the Provider are Ready).
    let stdout = env
        .capstan(&["get", "all", "--status-selector", "ready=false"])
        .await
        .ok()
        .stdout;
    let selected = sections(&stdout);
    assert_eq!(selected.len(), 1, "{stdout}");
    assert_eq!(selected[0][1][0], "kustomization/broken", "{stdout}");
    assert_eq!(selected[0][1][3], "False", "{stdout}");
    // Negated, in any case: everything not Ready=False, including the Receiver.
    let stdout = env
        .capstan(&["get", "all", "--status-selector", "Ready!=False"])
        .await
        .ok()
        .stdout;
    let names: Vec<String> = sections(&stdout)
        .into_iter()
        .flat_map(|s| s.into_iter().skip(1).map(|r| r[0].clone()))
        .collect();
    assert_eq!(
        names,
        [
            "gitrepository/fleet",
            "kustomization/ok",
            "receiver/github",
            "provider/slack",
            "alert/on-call"
        ],
        "{stdout}"
    );
    // One kind: the rows selected; none selected prints the header alone.
    let rows = table(
        &env.capstan(&["get", "ks", "--status-selector", "ready=true"])
            .await
            .ok()
            .stdout,
    );
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[1][0], "ok");
    let rows = table(
        &env.capstan(&["get", "sources", "git", "--status-selector", "ready=false"])
            .await
            .ok()
            .stdout,
    );
    assert_eq!(
        rows,
        [["NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE"]]
    );
    // -l selects by label, --no-header leaves the header out (in `get all` too).
    env.kubectl(&["label", "ks", "ok", "-n", "flux-system", "team=a"])
        .await
        .ok();
    let stdout = env
        .capstan(&["get", "ks", "-l", "team=a", "--no-header"])
        .await
        .ok()
        .stdout;
    let rows = table(&stdout);
    assert_eq!(rows.len(), 1, "{stdout}");
    assert_eq!(
        (rows[0][0].as_str(), rows[0][3].as_str()),
        ("ok", "True"),
        "{stdout}"
    );
    assert!(rows[0][1].starts_with("main@sha1:"), "{stdout}");
    let stdout = env
        .capstan(&["get", "all", "-l", "team=a", "--no-header"])
        .await
        .ok()
        .stdout;
    assert_eq!(
        sections(&stdout)
            .iter()
            .map(|s| s.iter().map(|r| r[0].clone()).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        [["kustomization/ok"]]
    );
    let json = env
        .capstan(&[
            "get",
            "ks",
            "-o",
            "json",
            "--status-selector",
            "ready=false",
        ])
        .await
        .ok()
        .json();
    assert_eq!(json["metadata"]["name"], "broken");
    // A selector that is not `type=status` is refused with Flux's message.
    let run = env
        .capstan(&["get", "ks", "--status-selector", "ready"])
        .await
        .fails();
    assert_eq!(run.status, 1);
    assert_contains(
        &run.stderr,
        "✗ expected status selector in type=status or type!=status format, but found: ready",
    );

    // The lifecycle verbs take the notification kinds as Flux's do; a Provider or an Alert is
    // static (no status), so resuming one has nothing to wait for.
    let run = env.capstan(&["suspend", "alert", "--all"]).await.ok();
    assert_eq!(
        run.stderr,
        "► suspending alert on-call in flux-system namespace\n✔ alert suspended\n"
    );
    let rows = table(&env.capstan(&["get", "alerts"]).await.ok().stdout);
    assert_eq!(rows[1], ["on-call", "True", "True", "Alert is Ready"]);
    let run = env.capstan(&["resume", "alert", "on-call"]).await.ok();
    assert_eq!(
        run.stderr,
        "► resuming alert on-call in flux-system namespace\n✔ alert resumed\n"
    );
    let run = env
        .capstan(&["reconcile", "alert-provider", "slack"])
        .await
        .ok();
    assert_eq!(run.stderr, "✔ reconciliation not supported by the object\n");
    let exported = env
        .capstan(&["export", "alert-provider", "slack"])
        .await
        .ok()
        .stdout;
    let exported = capstan_kustomize::parse_documents(&exported).unwrap();
    assert_eq!(exported[0]["kind"], "Provider");
    assert_eq!(
        exported[0]["spec"],
        serde_json::json!({"channel": "general", "type": "slack"})
    );
    assert!(exported[0].get("status").is_none());
    let run = env
        .capstan(&["delete", "receiver", "github", "--silent"])
        .await
        .ok();
    assert_contains(&run.stderr, "✔ receiver deleted");
    let run = env.capstan(&["get", "receivers"]).await.ok();
    assert_contains(
        &run.stderr,
        "✗ no Receiver objects found in \"flux-system\" namespace",
    );
}

/// `suspend ks --all` suspends every Kustomization of the namespace (`-A`: of every
/// namespace); `resume ks --all` resumes them without waiting unless `--wait`, as Flux; `resume`
/// of one object waits for it unless `--wait=false`.
#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn flux_habits_suspend_and_resume_all() {
    let env = Env::start().await;
    env.commit(&[("apps/demo.yaml", DEMO)]);
    env.create_source().await;
    env.kubectl(&["create", "namespace", "team"]).await.ok();
    env.kubectl(&["create", "namespace", "empty"]).await.ok();
    for (name, namespace) in [("a", "flux-system"), ("b", "flux-system"), ("c", "team")] {
        env.apply(
            &format!("{name}.yaml"),
            &kustomization(name, namespace, "./apps"),
        )
        .await;
    }
    for (name, namespace) in [("a", "flux-system"), ("b", "flux-system"), ("c", "team")] {
        env.wait_ready_status(namespace, name, "True").await;
    }
    let suspended = async || {
        let stdout = env.capstan(&["get", "ks", "-A"]).await.ok().stdout;
        table(&stdout)[1..]
            .iter()
            .map(|r| (r[1].clone(), r[3] == "True"))
            .collect::<Vec<_>>()
    };
    let state = |a: bool, b: bool, c: bool| {
        vec![
            ("a".to_owned(), a),
            ("b".to_owned(), b),
            ("c".to_owned(), c),
        ]
    };

    let run = env.capstan(&["suspend", "ks", "--all"]).await.ok();
    assert_eq!(
        run.stderr,
        "► suspending kustomization a in flux-system namespace\n✔ kustomization suspended\n\
         ► suspending kustomization b in flux-system namespace\n✔ kustomization suspended\n"
    );
    assert_eq!(suspended().await, state(true, true, false));
    env.capstan(&["suspend", "ks", "--all", "-A"]).await.ok();
    assert_eq!(suspended().await, state(true, true, true));

    // resume --all: resumed, no wait (Flux's default for several objects).
    let run = env.capstan(&["resume", "ks", "--all"]).await.ok();
    assert_eq!(
        run.stderr,
        "► resuming kustomization a in flux-system namespace\n✔ kustomization resumed\n\
         ► resuming kustomization b in flux-system namespace\n✔ kustomization resumed\n"
    );
    assert_eq!(suspended().await, state(false, false, true));

    // resume --all -A --wait: each reconciled and Ready, reported by name.
    env.capstan(&["suspend", "ks", "--all", "-A"]).await.ok();
    let run = env
        .capstan(&["resume", "ks", "--all", "-A", "--wait"])
        .await
        .ok();
    for name in ["a", "b", "c"] {
        assert_contains(
            &run.stderr,
            &format!(
                "✔ Kustomization {name} reconciliation completed\n✔ applied revision main@sha1:"
            ),
        );
    }
    assert_eq!(
        run.stderr
            .matches("◎ waiting for Kustomization reconciliation")
            .count(),
        3
    );
    assert_eq!(suspended().await, state(false, false, false));

    // One object: waits by default, not with --wait=false.
    env.capstan(&["suspend", "ks", "a"]).await.ok();
    let run = env.capstan(&["resume", "ks", "a"]).await.ok();
    assert_contains(&run.stderr, "✔ Kustomization a reconciliation completed");
    env.capstan(&["suspend", "ks", "a"]).await.ok();
    let run = env
        .capstan(&["resume", "ks", "a", "--wait=false"])
        .await
        .ok();
    assert_eq!(
        run.stderr,
        "► resuming kustomization a in flux-system namespace\n✔ kustomization resumed\n"
    );

    // Several names, as Flux takes them: each worked on; resume does not wait for several
    // unless --wait; a name not found is reported, the others still done, and the exit code
    // says so. The verbs that take one name refuse several.
    let run = env.capstan(&["suspend", "ks", "a", "b", "a"]).await.ok();
    assert_eq!(run.stderr.matches("✔ kustomization suspended").count(), 2);
    assert_eq!(suspended().await, state(true, true, false));
    let run = env.capstan(&["resume", "ks", "a", "b"]).await.ok();
    assert!(!run.stderr.contains("◎ waiting"), "{}", run.stderr);
    assert_eq!(suspended().await, state(false, false, false));
    let run = env.capstan(&["suspend", "ks", "nope", "b"]).await.fails();
    assert_eq!(run.status, 1);
    assert_contains(
        &run.stderr,
        "✗ Kustomization 'nope' not found in namespace 'flux-system'\n\
         ► suspending kustomization b in flux-system namespace\n✔ kustomization suspended\n",
    );
    assert_eq!(suspended().await, state(false, true, false));
    let run = env
        .capstan(&["resume", "ks", "b", "nope", "--wait"])
        .await
        .fails();
    assert_contains(&run.stderr, "✔ Kustomization b reconciliation completed");
    assert_contains(
        &run.stderr,
        "✗ 1 of the Kustomization objects named not found or not readable",
    );
    let run = env.capstan(&["reconcile", "ks", "a", "b"]).await.fails();
    assert_contains(
        &run.stderr,
        "✗ one kustomization name expected, found 2: a b",
    );

    // Refusals: nothing to do in a namespace, a name with --all, -A without --all.
    let run = env
        .capstan(&["suspend", "ks", "--all", "-n", "empty"])
        .await
        .fails();
    assert_eq!(run.status, 1);
    assert_contains(
        &run.stderr,
        "✗ no Kustomization objects found in \"empty\" namespace",
    );
    let run = env.capstan(&["suspend", "ks", "a", "--all"]).await.fails();
    assert_contains(&run.stderr, "give kustomization names or --all, not both");
    let run = env.capstan(&["resume", "ks", "-A"]).await.fails();
    assert_eq!(run.status, 2, "{}", run.stderr);
    let run = env
        .capstan(&["resume", "ks", "--all", "--timeout", "1m"])
        .await
        .fails();
    assert_contains(
        &run.stderr,
        "✗ --timeout applies only when resume waits (one name, or --wait)",
    );
    assert_eq!(suspended().await, state(false, false, false));
}

/// `tree kustomization NAME -o json|yaml` prints Flux's tree shape: `resource` (Go's field
/// names of cli-utils' object metadata) and nested `resources`.
#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, the expected documents written out whole
async fn flux_habits_tree_as_json_and_yaml() {
    let env = Env::start().await;
    env.commit(&[
        ("apps/demo.yaml", DEMO),
        (
            "clusters/apps.yaml",
            &kustomization("apps", "flux-system", "./apps"),
        ),
    ]);
    env.create_source().await;
    env.apply(
        "root.yaml",
        &kustomization("root", "flux-system", "./clusters"),
    )
    .await;
    env.wait_ready_status("flux-system", "root", "True").await;
    env.wait_ready_status("flux-system", "apps", "True").await;

    let run = env
        .capstan(&["tree", "ks", "root", "-o", "json"])
        .await
        .ok();
    assert_eq!(
        run.stdout,
        r#"{
  "resource": {
    "Namespace": "flux-system",
    "Name": "root",
    "GroupKind": {
      "Group": "kustomize.toolkit.fluxcd.io",
      "Kind": "Kustomization"
    }
  },
  "resources": [
    {
      "resource": {
        "Namespace": "flux-system",
        "Name": "apps",
        "GroupKind": {
          "Group": "kustomize.toolkit.fluxcd.io",
          "Kind": "Kustomization"
        }
      },
      "resources": [
        {
          "resource": {
            "Namespace": "default",
            "Name": "demo",
            "GroupKind": {
              "Group": "",
              "Kind": "ConfigMap"
            }
          }
        }
      ]
    }
  ]
}
"#
    );
    let run = env
        .capstan(&["tree", "kustomization", "root", "--output", "yaml"])
        .await
        .ok();
    assert_eq!(
        run.stdout,
        r#"resource:
  GroupKind:
    Group: kustomize.toolkit.fluxcd.io
    Kind: Kustomization
  Name: root
  Namespace: flux-system
resources:
- resource:
    GroupKind:
      Group: kustomize.toolkit.fluxcd.io
      Kind: Kustomization
    Name: apps
    Namespace: flux-system
  resources:
  - resource:
      GroupKind:
        Group: ""
        Kind: ConfigMap
      Name: demo
      Namespace: default

"#
    );
    // --compact: Flux's objects only; the text tree is as before.
    let run = env.capstan(&["tree", "ks", "root", "--compact"]).await.ok();
    assert_eq!(
        run.stdout,
        "Kustomization/flux-system/root\n└── Kustomization/flux-system/apps\n"
    );
    let run = env.capstan(&["tree", "ks", "root"]).await.ok();
    assert_eq!(
        run.stdout,
        "Kustomization/flux-system/root\n└── Kustomization/flux-system/apps\n    └── ConfigMap/default/demo\n"
    );
    let run = env
        .capstan(&["tree", "ks", "root", "-o", "table"])
        .await
        .fails();
    assert_eq!(run.status, 2);
}

/// An ExternalArtifact (Flux 2.7; produced by another controller, e.g. source-watcher) and a
/// Kustomization reading it, as fluxcd/flux2-kustomize-helm-example writes them.
const EXTERNAL: &str = "apiVersion: source.toolkit.fluxcd.io/v1
kind: ExternalArtifact
metadata:
  name: podinfo
  namespace: flux-system
spec:
  sourceRef:
    apiVersion: source.extensions.fluxcd.io/v1beta1
    kind: ArtifactGenerator
    name: podinfo
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: from-external
  namespace: flux-system
spec:
  interval: 1h
  path: ./
  prune: true
  sourceRef:
    kind: ExternalArtifact
    name: podinfo
";

/// ExternalArtifact is served: `kubectl apply` accepts it, `get sources external`, `get sources
/// all` and `get all` list it after the HelmCharts as Flux does, and `reconcile --with-source` of
/// a Kustomization reading one refuses with Flux's message (nothing in Capstan produces it).
#[tokio::test(flavor = "multi_thread")]
async fn flux_habits_external_artifact_is_served_without_a_reconciler() {
    let env = Env::start().await;
    env.commit(&[("apps/demo.yaml", DEMO)]);
    env.create_source().await;
    let path = env.dir.path().join("external.yaml");
    std::fs::write(&path, EXTERNAL).unwrap();
    env.kubectl(&["apply", "-f", &path.to_string_lossy()])
        .await
        .ok();

    let rows = table(
        &env.capstan(&["get", "sources", "external"])
            .await
            .ok()
            .stdout,
    );
    // Flux's columns: the producer's reference where other sources print SUSPENDED.
    assert_eq!(
        rows[0],
        ["NAME", "REVISION", "SOURCE", "READY", "MESSAGE"],
        "{rows:?}"
    );
    assert_eq!(
        rows[1][..3],
        ["podinfo", "", "ArtifactGenerator//podinfo"],
        "{rows:?}"
    );
    let stdout = env.capstan(&["get", "sources", "all"]).await.ok().stdout;
    let tables = sections(&stdout);
    let kinds: Vec<&str> = tables
        .iter()
        .map(|s| s[1][0].split('/').next().unwrap())
        .collect();
    assert_eq!(kinds, ["gitrepository", "externalartifact"], "{stdout}");
    let stdout = env.capstan(&["get", "all"]).await.ok().stdout;
    assert_contains(&stdout, "externalartifact/podinfo");

    let run = env
        .capstan(&["reconcile", "ks", "from-external", "--with-source"])
        .await
        .fails();
    assert_contains(
        &run.stderr,
        "cannot reconcile source of kind ExternalArtifact",
    );
}
