//! The Flux-like verbs of the `capstan` binary (`create`, `get`, `reconcile`, `suspend`,
//! `resume`, `delete`, `export`, `build`, `diff`, `tree`, `trace`, `events`) run as a user runs
//! them, against `capstan dev` (control plane and controllers) and a Git server over HTTP.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::{self, Dev};

use capstan_testkit::{Run, eventually, kubectl_binary};

/// `capstan dev` in a temp dir, plus a Git server serving `fleet.git` and a work tree pushing
/// to it.
pub(crate) struct Env {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) git_url: String,
    _dev: tokio::process::Child,
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=Capstan Test",
            "-c",
            "user.email=test@capstan.dev",
        ])
        .args(args)
        .output()
        .expect("git must be installed (scripts/setup installs it)");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl Env {
    pub(crate) async fn start() -> Self {
        let Dev {
            dir,
            kubeconfig,
            child: dev,
            ..
        } = Dev::start(&["--log-level", "warn"]).await;

        let root = dir.path().join("git");
        std::fs::create_dir_all(&root).unwrap();
        git(&root, &["init", "--bare", "-q", "-b", "main", "fleet.git"]);
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        git(&work, &["init", "-q", "-b", "main"]);
        git(
            &work,
            &[
                "remote",
                "add",
                "origin",
                root.join("fleet.git").to_str().unwrap(),
            ],
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let app = capstan_source::git::server::router(
            root,
            capstan_source::git::server::ServerOptions::default(),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        let env = Self {
            dir,
            kubeconfig,
            git_url: format!("http://{address}/fleet.git"),
            _dev: dev,
        };
        // capstan dev creates flux-system (with the tenancy ServiceAccounts).
        env.kubectl(&["get", "namespace", "flux-system"]).await.ok();
        env
    }

    /// Writes `files` (path, content; empty content deletes) into the work tree, commits and
    /// pushes; returns the commit SHA.
    pub(crate) fn commit(&self, files: &[(&str, &str)]) -> String {
        let work = self.dir.path().join("work");
        for (path, content) in files {
            let path = work.join(path);
            if content.is_empty() {
                let _ = std::fs::remove_file(&path);
            } else {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, content).unwrap();
            }
        }
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "-m", "change"]);
        git(&work, &["push", "-q", "origin", "main"]);
        git(&work, &["rev-parse", "HEAD"])
    }

    fn work(&self, path: &str) -> PathBuf {
        self.dir.path().join("work").join(path)
    }

    /// Runs `capstan <args> --kubeconfig <this cluster>` with stdin closed.
    pub(crate) async fn capstan(&self, args: &[&str]) -> Run {
        self.capstan_with(&self.kubeconfig, args).await
    }

    /// Runs `capstan <args> --kubeconfig <kubeconfig>` with stdin closed.
    async fn capstan_with(&self, kubeconfig: &Path, args: &[&str]) -> Run {
        let out = support::capstan(kubeconfig, args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        tokio::time::timeout(Duration::from_secs(120), out)
            .await
            .unwrap_or_else(|_| panic!("capstan {args:?} timed out"))
            .expect("run capstan")
            .into()
    }

    pub(crate) async fn kubectl(&self, args: &[&str]) -> Run {
        let out = tokio::process::Command::new(kubectl_binary())
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path())
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        tokio::time::timeout(Duration::from_secs(60), out)
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} timed out"))
            .expect("run kubectl")
            .into()
    }

    /// `kubectl get <kind> <name> -n flux-system -o json`, which must succeed.
    pub(crate) async fn get_json(&self, kind: &str, name: &str) -> Value {
        self.kubectl(&["get", kind, name, "-n", "flux-system", "-o", "json"])
            .await
            .ok()
            .json()
    }

    /// `data` of a ConfigMap in `default`, or `None` when it does not exist.
    async fn config_map(&self, name: &str) -> Option<Value> {
        let run = self
            .kubectl(&["get", "configmap", name, "-n", "default", "-o", "json"])
            .await;
        (run.status == 0).then(|| run.json()["data"].clone())
    }

    /// `capstan create source git fleet --url <the test Git server> --branch main`, succeeded.
    pub(crate) async fn create_git_fleet(&self) -> Run {
        self.capstan(&[
            "create",
            "source",
            "git",
            "fleet",
            "--url",
            &self.git_url,
            "--branch",
            "main",
        ])
        .await
        .ok()
    }

    /// Creates the GitRepository `fleet` and the Kustomization `name` for `path`, both Ready.
    async fn create_fleet(&self, name: &str, path: &str, sha: &str) {
        let run = self.create_git_fleet().await;
        assert!(
            run.stderr
                .contains(&format!("✔ fetched revision main@sha1:{sha}")),
            "{}",
            run.stderr
        );
        let run = self
            .capstan(&[
                "create",
                "kustomization",
                name,
                "--source",
                "GitRepository/fleet",
                "--path",
                path,
                "--prune",
            ])
            .await
            .ok();
        assert!(
            run.stderr
                .contains(&format!("✔ Kustomization {name} is ready")),
            "{}",
            run.stderr
        );
    }
}

/// What one connection sent, in order.
type Sent = std::sync::Arc<std::sync::Mutex<Vec<u8>>>;

/// A TCP proxy in front of the control plane of a kubeconfig, recording the request lines
/// clients send through it (plain HTTP/1), each connection apart (concurrent requests never
/// interleave in the record).
struct RecordingProxy {
    /// A kubeconfig whose server is the proxy.
    kubeconfig: PathBuf,
    connections: std::sync::Arc<std::sync::Mutex<Vec<Sent>>>,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl RecordingProxy {
    async fn start(kubeconfig: &Path) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let config = std::fs::read_to_string(kubeconfig).unwrap();
        let server = config
            .lines()
            .find_map(|l| l.trim().strip_prefix("server: "))
            .expect("a server in the kubeconfig")
            .to_owned();
        let upstream = server
            .strip_prefix("http://")
            .expect("a plain-HTTP control plane")
            .trim_end_matches('/')
            .to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxied = format!("http://{}", listener.local_addr().unwrap());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, config.replace(&server, &proxied)).unwrap();
        let connections = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Sent>::new()));
        let all = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let record = Sent::default();
                all.lock().unwrap().push(record.clone());
                tokio::spawn(async move {
                    let Ok(outbound) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let (mut in_read, mut in_write) = inbound.into_split();
                    let (mut out_read, mut out_write) = outbound.into_split();
                    let upload = async move {
                        let mut buffer = vec![0u8; 16 * 1024];
                        while let Ok(n) = in_read.read(&mut buffer).await {
                            if n == 0 {
                                break;
                            }
                            record.lock().unwrap().extend_from_slice(&buffer[..n]);
                            if out_write.write_all(&buffer[..n]).await.is_err() {
                                break;
                            }
                        }
                        let _ = out_write.shutdown().await;
                    };
                    let download = async move {
                        let _ = tokio::io::copy(&mut out_read, &mut in_write).await;
                        let _ = in_write.shutdown().await;
                    };
                    tokio::join!(upload, download);
                });
            }
        });
        Self {
            kubeconfig: path,
            connections,
            _dir: dir,
            task,
        }
    }

    /// The path of every dry-run write sent so far, one entry per request.
    fn dry_runs(&self) -> Vec<String> {
        let connections = self.connections.lock().unwrap();
        let mut paths = Vec::new();
        for sent in connections.iter() {
            let sent = String::from_utf8_lossy(&sent.lock().unwrap()).into_owned();
            // A request line follows the previous request's body directly (no line break), so
            // find each one by its method rather than by splitting lines.
            for method in ["PATCH /", "PUT /", "POST /"] {
                for (start, _) in sent.match_indices(method) {
                    let line = sent[start..].split("\r\n").next().unwrap_or_default();
                    let Some(target) = line
                        .split_once(' ')
                        .and_then(|(_, rest)| rest.strip_suffix(" HTTP/1.1"))
                    else {
                        continue;
                    };
                    if let Some((path, query)) = target.split_once('?')
                        && query.split('&').any(|p| p == "dryRun=All")
                    {
                        paths.push(path.to_owned());
                    }
                }
            }
        }
        paths
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const DEMO: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: demo
  namespace: default
data:
  revision: \"1\"
  greeting: ${greeting:=hello}
";

const OTHER: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: other
  namespace: default
data:
  key: value
";

/// Asserts that `output` (a command's stdout or stderr) contains `needle`, showing it if not.
#[track_caller]
pub(crate) fn assert_contains(output: &str, needle: &str) {
    assert!(output.contains(needle), "{needle:?} not in:\n{output}");
}

/// The rows of a Flux table, cells trimmed.
pub(crate) fn table(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split('\t').map(|c| c.trim().to_owned()).collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn create_get_export_and_delete_sources_and_kustomizations() {
    let env = Env::start().await;
    let sha = env.commit(&[("apps/demo.yaml", DEMO)]);

    // --export prints Flux's YAML: sorted keys, normalised durations, no status, no empty fields.
    let run = env
        .capstan(&[
            "create",
            "source",
            "git",
            "fleet",
            "--url",
            &env.git_url,
            "--branch",
            "main",
            "--export",
        ])
        .await
        .ok();
    assert!(
        run.stdout
            .starts_with("---\napiVersion: source.toolkit.fluxcd.io/v1\n")
    );
    let exported = capstan_kustomize::parse_documents(&run.stdout).unwrap();
    assert_eq!(
        exported,
        vec![serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": "fleet", "namespace": "flux-system"},
            "spec": {"interval": "1m0s", "ref": {"branch": "main"}, "url": env.git_url},
        })]
    );
    let run = env
        .capstan(&[
            "create",
            "ks",
            "apps",
            "--source",
            "fleet",
            "--path",
            "./apps",
            "--prune",
            "--interval",
            "10m",
            "--export",
        ])
        .await
        .ok();
    assert_eq!(
        capstan_kustomize::parse_documents(&run.stdout).unwrap(),
        vec![serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "apps", "namespace": "flux-system"},
            "spec": {
                "interval": "10m0s", "path": "./apps", "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "fleet"},
            },
        })]
    );
    // Nothing was applied by --export; `get` says so as Flux does, `get all` prints nothing.
    let run = env.capstan(&["get", "sources", "git"]).await.ok();
    assert_eq!(
        run.stderr, "✗ no GitRepository objects found in \"flux-system\" namespace\n",
        "{}",
        run.stderr
    );
    let run = env.capstan(&["get", "ks", "apps"]).await.ok();
    assert_eq!(
        run.stderr,
        "✗ Kustomization object 'apps' not found in \"flux-system\" namespace\n"
    );
    let run = env
        .capstan(&["get", "sources", "git", "fleet", "-A"])
        .await
        .ok();
    assert_eq!(
        run.stderr,
        "✗ GitRepository object 'fleet' not found in any namespace\n"
    );
    let run = env.capstan(&["get", "all"]).await.ok();
    assert_eq!((run.stdout.as_str(), run.stderr.as_str()), ("", ""));

    env.create_fleet("apps", "./apps", &sha).await;
    let data = env
        .config_map("demo")
        .await
        .expect("the Kustomization applied demo");
    assert_eq!(data["revision"], "1");

    // create on an existing object replaces its spec (Flux's upsert), whoever wrote it before:
    // --tag on a source made with --branch by another client drops the branch.
    let work = env.work("");
    git(&work, &["tag", "v1"]);
    git(&work, &["push", "-q", "origin", "v1"]);
    let mut args = vec!["create", "source", "git", "pinned", "--url", &env.git_url];
    let exported = env
        .capstan(&[&args[..], &["--branch", "main", "--export"]].concat())
        .await
        .ok()
        .stdout;
    let pinned_file = env.dir.path().join("pinned.yaml");
    std::fs::write(&pinned_file, exported).unwrap();
    env.kubectl(&["apply", "-f", pinned_file.to_str().unwrap()])
        .await
        .ok();
    args.extend(["--tag", "v1"]);
    let run = env.capstan(&args).await.ok();
    assert_contains(&run.stderr, "✔ GitRepository source updated");
    assert_contains(&run.stderr, "✔ fetched revision v1@sha1:");
    let pinned = env.get_json("gitrepository", "pinned").await;
    assert_eq!(pinned["spec"]["ref"], serde_json::json!({"tag": "v1"}));
    env.capstan(&["delete", "source", "git", "pinned", "--silent"])
        .await
        .ok();

    let rows = table(&env.capstan(&["get", "sources", "git"]).await.ok().stdout);
    assert_eq!(
        rows[0],
        ["NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE"]
    );
    // Digests shortened to 8 hex digits in revisions and messages, as Flux prints them.
    assert_eq!(
        rows[1][..4],
        [
            "fleet",
            format!("main@sha1:{}", &sha[..8]).as_str(),
            "False",
            "True"
        ]
    );
    let rows = table(&env.capstan(&["get", "ks"]).await.ok().stdout);
    assert_eq!(
        rows[1][..4],
        [
            "apps",
            format!("main@sha1:{}", &sha[..8]).as_str(),
            "False",
            "True"
        ]
    );
    assert_eq!(
        rows[1][4],
        format!("Applied revision: main@sha1:{}", &sha[..8]),
        "{rows:?}"
    );
    let stdout = env.capstan(&["get", "all", "-A"]).await.ok().stdout;
    let rows = table(&stdout);
    assert_eq!(rows[0][..2], ["NAMESPACE", "NAME"]);
    assert!(
        rows.iter()
            .any(|r| r[..2] == ["flux-system", "gitrepository/fleet"]),
        "{stdout}"
    );
    assert!(
        rows.iter()
            .any(|r| r[..2] == ["flux-system", "kustomization/apps"]),
        "{stdout}"
    );
    let json = env
        .capstan(&["get", "ks", "apps", "-o", "json"])
        .await
        .ok()
        .json();
    assert_eq!(json["kind"], "Kustomization");
    assert_eq!(
        json["status"]["lastAppliedRevision"],
        format!("main@sha1:{sha}")
    );

    // export: no status or server fields; applying it back changes nothing.
    let run = env
        .capstan(&["export", "source", "git", "fleet"])
        .await
        .ok();
    let docs = capstan_kustomize::parse_documents(&run.stdout).unwrap();
    assert_eq!(docs.len(), 1);
    assert_eq!(
        docs[0]["metadata"],
        serde_json::json!({"name": "fleet", "namespace": "flux-system"})
    );
    assert!(docs[0].get("status").is_none());
    assert_eq!(docs[0]["spec"]["url"], env.git_url.as_str());
    let run = env.capstan(&["export", "ks", "--all"]).await.ok();
    let before = env.get_json("ks", "apps").await;
    let file = env.dir.path().join("export.yaml");
    std::fs::write(&file, &run.stdout).unwrap();
    env.kubectl(&[
        "apply",
        "--server-side",
        "--field-manager",
        "capstan",
        "-f",
        file.to_str().unwrap(),
    ])
    .await
    .ok();
    let after = env.get_json("ks", "apps").await;
    assert_eq!(
        before["metadata"]["generation"],
        after["metadata"]["generation"]
    );
    assert_eq!(before["spec"], after["spec"]);

    // delete asks first, as Flux does: with stdin closed there is no answer and nothing is
    // deleted; --silent deletes, then the pruned objects go with the Kustomization.
    let run = env.capstan(&["delete", "ks", "apps"]).await.fails();
    assert!(run.stderr.contains("✗ aborting"), "{}", run.stderr);
    env.kubectl(&["get", "ks", "apps", "-n", "flux-system"])
        .await
        .ok();
    let run = env
        .capstan(&["delete", "ks", "apps", "--silent"])
        .await
        .ok();
    assert_contains(&run.stderr, "✔ kustomization deleted");
    eventually(Duration::from_secs(30), "demo to be pruned", || async {
        env.config_map("demo").await.is_none().then_some(())
    })
    .await;
    let run = env
        .capstan(&["delete", "source", "git", "fleet", "--silent"])
        .await
        .ok();
    assert_contains(&run.stderr, "✔ gitrepository deleted");
    eventually(Duration::from_secs(30), "fleet to be deleted", || async {
        let run = env
            .kubectl(&["get", "gitrepository", "fleet", "-n", "flux-system"])
            .await;
        (run.status != 0).then_some(())
    })
    .await;
    let run = env.capstan(&["delete", "ks", "apps", "-s"]).await.fails();
    assert_contains(&run.stderr, "✗ Kustomization 'apps' not found");
}

#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn reconcile_with_source_suspend_and_resume() {
    let env = Env::start().await;
    let first = env.commit(&[("apps/demo.yaml", DEMO)]);
    env.create_fleet("apps", "./apps", &first).await;

    let second = env.commit(&[("apps/demo.yaml", &DEMO.replace("\"1\"", "\"2\""))]);
    let run = env
        .capstan(&["reconcile", "ks", "apps", "--with-source"])
        .await
        .ok();
    for line in [
        "► annotating GitRepository fleet in flux-system namespace".to_owned(),
        format!("✔ fetched revision main@sha1:{second}"),
        "► annotating Kustomization apps in flux-system namespace".to_owned(),
        format!("✔ applied revision main@sha1:{second}"),
    ] {
        assert!(
            run.stderr.contains(&line),
            "missing {line:?} in:\n{}",
            run.stderr
        );
    }
    assert_eq!(env.config_map("demo").await.unwrap()["revision"], "2");

    let run = env.capstan(&["suspend", "ks", "apps"]).await.ok();
    assert_contains(&run.stderr, "✔ kustomization suspended");
    let rows = table(&env.capstan(&["get", "ks", "apps"]).await.ok().stdout);
    assert_eq!(rows[1][2], "True", "{rows:?}");
    let run = env.capstan(&["reconcile", "ks", "apps"]).await.fails();
    assert_eq!(run.status, 1);
    assert_contains(&run.stderr, "✗ resource is suspended");

    // A commit while suspended is not applied until resume.
    let third = env.commit(&[("apps/demo.yaml", &DEMO.replace("\"1\"", "\"3\""))]);
    env.capstan(&["reconcile", "source", "git", "fleet"])
        .await
        .ok();
    assert_eq!(env.config_map("demo").await.unwrap()["revision"], "2");
    let run = env.capstan(&["resume", "ks", "apps"]).await.ok();
    assert!(
        run.stderr
            .contains(&format!("✔ applied revision main@sha1:{third}")),
        "{}",
        run.stderr
    );
    assert_eq!(env.config_map("demo").await.unwrap()["revision"], "3");
    let rows = table(&env.capstan(&["get", "ks", "apps"]).await.ok().stdout);
    assert_eq!(rows[1][2], "False", "{rows:?}");

    env.capstan(&["suspend", "source", "git", "fleet"])
        .await
        .ok();
    let rows = table(&env.capstan(&["get", "sources", "all"]).await.ok().stdout);
    assert_eq!(
        rows[1][..3],
        [
            "gitrepository/fleet",
            format!("main@sha1:{}", &third[..8]).as_str(),
            "True"
        ]
    );
    let run = env
        .capstan(&["resume", "source", "git", "fleet"])
        .await
        .ok();
    assert!(run.stderr.contains("✔ fetched revision"), "{}", run.stderr);

    // A source that cannot be fetched fails with the condition message and exit code 1; a
    // `events --watch` started before sees its Warning arrive.
    let mut watch = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args([
            "events",
            "--watch",
            "--for",
            "GitRepository/missing",
            "--kubeconfig",
        ])
        .arg(&env.kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut watched = BufReader::new(watch.stdout.take().unwrap()).lines();
    let header = watched.next_line().await.unwrap().unwrap();
    assert!(header.starts_with("LAST SEEN"), "{header}");
    let run = env
        .capstan(&[
            "create",
            "source",
            "git",
            "missing",
            "--url",
            &env.git_url.replace("fleet", "nothing"),
            "--branch",
            "main",
            "--timeout",
            "30s",
        ])
        .await
        .fails();
    assert_eq!(run.status, 1);
    assert!(run.stderr.contains("✗ "), "{}", run.stderr);
    let event = tokio::time::timeout(Duration::from_secs(30), watched.next_line())
        .await
        .expect("events --watch printed the new event within 30 s")
        .unwrap()
        .unwrap();
    let cells: Vec<&str> = event.split('\t').map(str::trim).collect();
    assert_eq!(cells[1], "Warning", "{event}");
    assert_eq!(cells[3], "GitRepository/missing", "{event}");
    watch.kill().await.unwrap();
    let run = env
        .capstan(&[
            "create", "ks", "broken", "--source", "fleet", "--path", "./nope",
        ])
        .await
        .fails();
    assert_eq!(run.status, 1);
    assert!(
        run.stderr
            .contains("✗ kustomization path not found: './nope' does not exist in the source"),
        "{}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn build_diff_tree_trace_and_events() {
    let env = Env::start().await;
    let secret = "apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: default
data:
  token: c2VjcmV0
";
    let child = "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 1h
  path: ./apps
  prune: true
  sourceRef:
    kind: GitRepository
    name: fleet
";
    // As `flux bootstrap` lays it out, `root` applies itself too (it is in its own inventory).
    let root = "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: root
  namespace: flux-system
spec:
  interval: 1m0s
  path: ./clusters
  prune: true
  sourceRef:
    kind: GitRepository
    name: fleet
";
    let sha = env.commit(&[
        ("apps/demo.yaml", DEMO),
        ("apps/other.yaml", OTHER),
        ("apps/creds.yaml", secret),
        ("clusters/apps.yaml", child),
        ("clusters/root.yaml", root),
    ]);
    env.create_fleet("root", "./clusters", &sha).await;
    // `root` applied the Kustomization `apps`; wait until it applied its objects too.
    let run = env.capstan(&["reconcile", "ks", "apps"]).await.ok();
    assert!(
        run.stderr
            .contains(&format!("applied revision main@sha1:{sha}")),
        "{}",
        run.stderr
    );

    // tree: nested Kustomizations expanded; root's own entry left out.
    let inventory = env.get_json("ks", "root").await["status"]["inventory"].to_string();
    assert!(
        inventory.contains("flux-system_root_kustomize.toolkit.fluxcd.io_Kustomization"),
        "{inventory}"
    );
    let stdout = env
        .capstan(&["tree", "kustomization", "root"])
        .await
        .ok()
        .stdout;
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "Kustomization/flux-system/root", "{stdout}");
    assert_eq!(lines[1], "└── Kustomization/flux-system/apps", "{stdout}");
    let mut nested: Vec<&str> = lines[2..]
        .iter()
        .map(|l| l.trim_start_matches([' ', '├', '└', '─']))
        .collect();
    nested.sort_unstable();
    assert_eq!(
        nested,
        [
            "ConfigMap/default/demo",
            "ConfigMap/default/other",
            "Secret/default/creds"
        ],
        "{stdout}"
    );
    assert!(
        lines[2..]
            .iter()
            .all(|l| l.starts_with("    ├── ") || l.starts_with("    └── "))
    );

    // tree: a Kustomization that targets a remote cluster lists its inventory, children not
    // expanded (they live in the other cluster).
    let remote_file = env.dir.path().join("remote.yaml");
    std::fs::write(
        &remote_file,
        child
            .replace("name: apps", "name: remote")
            .replace("spec:\n", "spec:\n  suspend: true\n  kubeConfig:\n    secretRef:\n      name: remote-kubeconfig\n"),
    )
    .unwrap();
    env.kubectl(&["apply", "-f", remote_file.to_str().unwrap()])
        .await
        .ok();
    env.kubectl(&[
        "patch",
        "ks",
        "remote",
        "-n",
        "flux-system",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"inventory":{"entries":[{"id":"flux-system_apps_kustomize.toolkit.fluxcd.io_Kustomization","v":"v1"}]}}}"#,
    ])
    .await
    .ok();
    let stdout = env.capstan(&["tree", "ks", "remote"]).await.ok().stdout;
    assert_eq!(
        stdout,
        "Kustomization/flux-system/remote\n└── Kustomization/flux-system/apps\n"
    );

    // trace: object → Kustomization → source, every spelling.
    for args in [
        vec!["trace", "configmap/demo", "-n", "default"],
        vec![
            "trace",
            "ConfigMap/demo",
            "--api-version",
            "v1",
            "-n",
            "default",
        ],
        vec![
            "trace",
            "configmap",
            "demo",
            "--api-version",
            "v1",
            "-n",
            "default",
        ],
        vec![
            "trace",
            "ConfigMap",
            "demo",
            "--api-version",
            "v1",
            "-n",
            "default",
        ],
    ] {
        let stdout = env.capstan(&args).await.ok().stdout;
        let fields: Vec<(String, String)> = stdout
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect();
        let has = |k: &str, v: &str| fields.iter().any(|(a, b)| a == k && b == v);
        assert!(has("Object", "ConfigMap/demo"), "{stdout}");
        assert!(has("Status", "Managed by Flux"), "{stdout}");
        assert!(has("Kustomization", "apps"), "{stdout}");
        assert!(has("Path", "./apps"), "{stdout}");
        assert!(has("GitRepository", "fleet"), "{stdout}");
        assert!(has("URL", &env.git_url), "{stdout}");
        assert!(has("Branch", "main"), "{stdout}");
        assert!(has("Revision", &format!("main@sha1:{sha}")), "{stdout}");
    }
    let run = env.capstan(&["trace", "namespace/default"]).await.fails();
    assert!(run.stderr.contains("not managed by Flux"), "{}", run.stderr);

    // diff: no drift, then drift in the cluster, a new file and a removed one.
    let local = env.work("apps");
    let local = local.to_str().unwrap();
    let run = env.capstan(&["diff", "ks", "apps", "--path", local]).await;
    assert_eq!(run.status, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, "");
    env.kubectl(&[
        "patch",
        "configmap",
        "demo",
        "-n",
        "default",
        "-p",
        r#"{"data":{"revision":"changed"}}"#,
    ])
    .await
    .ok();
    env.kubectl(&[
        "patch",
        "secret",
        "creds",
        "-n",
        "default",
        "-p",
        r#"{"data":{"token":"b3RoZXI="}}"#,
    ])
    .await
    .ok();
    // A Secret created by `kubectl apply` carries its values in the last-applied annotation.
    let applied = "apiVersion: v1
kind: Secret
metadata:
  name: applied
  namespace: default
stringData:
  password: plain-old-value
";
    let applied_file = env.dir.path().join("applied.yaml");
    std::fs::write(&applied_file, applied).unwrap();
    env.kubectl(&["apply", "-f", applied_file.to_str().unwrap()])
        .await
        .ok();
    std::fs::write(
        env.work("apps/applied.yaml"),
        applied.replace("plain-old-value", "plain-new-value"),
    )
    .unwrap();
    std::fs::write(env.work("apps/new.yaml"), OTHER.replace("other", "fresh")).unwrap();
    std::fs::remove_file(env.work("apps/other.yaml")).unwrap();
    let run = env.capstan(&["diff", "ks", "apps", "--path", local]).await;
    assert_eq!(run.status, 1, "{}\n{}", run.stdout, run.stderr);
    for line in [
        "► ConfigMap/default/demo drifted",
        "► Secret/default/creds drifted",
        "► ConfigMap/default/fresh created",
        "► ConfigMap/default/other deleted",
    ] {
        assert!(
            run.stdout.contains(line),
            "missing {line:?} in:\n{}",
            run.stdout
        );
    }
    assert_contains(&run.stdout, "-   revision: changed\n");
    assert_contains(&run.stdout, "+   revision: \"1\"\n");
    assert!(run.stdout.contains("*** (before)") && run.stdout.contains("*** (after)"));
    assert!(!run.stdout.contains("c2VjcmV0") && !run.stdout.contains("b3RoZXI="));
    // The annotation is shown (the new owner labels sit next to it), masked.
    assert_contains(&run.stdout, "► Secret/default/applied drifted");
    let annotation = run
        .stdout
        .lines()
        .find(|l| l.contains("kubectl.kubernetes.io/last-applied-configuration:"))
        .unwrap_or_else(|| panic!("no annotation line in:\n{}", run.stdout));
    assert!(annotation.contains("***"), "{annotation}");
    for value in [
        "plain-old-value",
        "plain-new-value",
        "cGxhaW4tb2xkLXZhbHVl",
        "cGxhaW4tbmV3LXZhbHVl",
    ] {
        assert!(
            !run.stdout.contains(value),
            "{value} leaked:\n{}",
            run.stdout
        );
    }
    // The dry run changed nothing.
    assert_eq!(env.config_map("demo").await.unwrap()["revision"], "changed");
    // Through a recording proxy: the same output, and one dry-run apply per existing object
    // (the comparison the apply engine made is what is shown; nothing is asked twice).
    let proxy = RecordingProxy::start(&env.kubeconfig).await;
    let proxied = env
        .capstan_with(&proxy.kubeconfig, &["diff", "ks", "apps", "--path", local])
        .await;
    assert_eq!(proxied.status, 1, "{}", proxied.stderr);
    assert_eq!(proxied.stdout, run.stdout);
    let dry_runs = proxy.dry_runs();
    let mut objects: Vec<&str> = dry_runs.iter().map(String::as_str).collect();
    objects.sort_unstable();
    objects.dedup();
    assert_eq!(objects.len(), dry_runs.len(), "{dry_runs:#?}");
    for object in [
        "/api/v1/namespaces/default/configmaps/demo",
        "/api/v1/namespaces/default/secrets/creds",
        "/api/v1/namespaces/default/secrets/applied",
    ] {
        assert!(
            objects.contains(&object),
            "{object} not dry-run: {dry_runs:#?}"
        );
    }
    // `fresh` does not exist yet: nothing to dry-run.
    assert!(
        !objects.iter().any(|o| o.ends_with("/configmaps/fresh")),
        "{dry_runs:#?}"
    );
    let run = env
        .capstan(&["diff", "ks", "nothing", "--path", local])
        .await;
    assert_eq!(run.status, 2, "{}", run.stderr);

    // build: postBuild substitutions, inline and from the cluster (not with --dry-run).
    env.kubectl(&[
        "create",
        "configmap",
        "vars",
        "-n",
        "flux-system",
        "--from-literal=extra=from-cluster",
    ])
    .await
    .ok();
    let dir = env.dir.path().join("local");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: built\n  namespace: default\ndata:\n  greeting: ${greeting}\n  extra: x${extra:=}\n",
    )
    .unwrap();
    let ks_file = env.dir.path().join("ks.yaml");
    std::fs::write(
        &ks_file,
        format!(
            "{child}  postBuild:\n    substitute:\n      greeting: hi\n    substituteFrom:\n    - kind: ConfigMap\n      name: vars\n"
        ),
    )
    .unwrap();
    let docs = build_docs(&env, &dir, &ks_file, &[]).await;
    assert_eq!(docs.len(), 1);
    assert_eq!(
        docs[0]["data"],
        serde_json::json!({"greeting": "hi", "extra": "xfrom-cluster"})
    );
    assert_eq!(
        docs[0]["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"],
        "apps"
    );
    let docs = build_docs(&env, &dir, &ks_file, &["--dry-run"]).await;
    assert_eq!(
        docs[0]["data"],
        serde_json::json!({"greeting": "hi", "extra": "x"})
    );

    // events: the controllers' Events about Flux objects.
    let stdout = eventually(
        Duration::from_secs(30),
        "events of the Kustomization",
        || async {
            let run = env
                .capstan(&["events", "--for", "Kustomization/apps"])
                .await
                .ok();
            run.stdout
                .contains("Kustomization/apps")
                .then_some(run.stdout)
        },
    )
    .await;
    assert_eq!(
        table(&stdout)[0],
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
}

/// `capstan diff kustomization` prints the diff of every object it could compare even when
/// some cannot be (a kind the cluster does not serve, a dry-run the server refuses), then lists
/// those with their reasons and exits 2, as `flux diff` gathers such errors.
#[tokio::test(flavor = "multi_thread")]
async fn diff_shows_what_it_could_diff_and_lists_the_rest() {
    let env = Env::start().await;
    let (dir, kustomization) = partially_diffable(&env).await;
    let run = env
        .capstan(&[
            "diff",
            "ks",
            "partial",
            "--path",
            dir.to_str().unwrap(),
            "--kustomization-file",
            kustomization.to_str().unwrap(),
        ])
        .await;
    assert_eq!(run.status, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("► ConfigMap/default/existing drifted\n"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("+   a: \"2\"\n"), "{}", run.stdout);
    assert!(
        run.stdout.contains("► ConfigMap/default/fresh created\n"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("locked") && !run.stdout.contains("Widget"),
        "{}",
        run.stdout
    );
    let stderr: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(
        stderr.first().copied(),
        Some("✗ 2 of 4 objects could not be diffed:"),
        "{}",
        run.stderr
    );
    let reason = |object: &str| {
        stderr
            .iter()
            .find_map(|line| line.strip_prefix(&format!("  {object}: ")))
            .unwrap_or_else(|| panic!("{object} not listed in:\n{}", run.stderr))
    };
    assert!(
        reason("ConfigMap/default/locked").contains("immutable"),
        "{}",
        run.stderr
    );
    assert!(
        reason("Widget/default/w").contains("Widget"),
        "{}",
        run.stderr
    );
}

/// A directory (and a Kustomization file for it) whose render `capstan diff` can only partly
/// compare: a drifted ConfigMap, a new one, a change to an `immutable` ConfigMap (the dry-run
/// is refused) and a kind the cluster does not serve.
async fn partially_diffable(env: &Env) -> (PathBuf, PathBuf) {
    let locked = "apiVersion: v1
kind: ConfigMap
metadata:
  name: locked
  namespace: default
immutable: true
data:
  a: \"1\"
";
    let file = env.dir.path().join("locked.yaml");
    std::fs::write(&file, locked).unwrap();
    env.kubectl(&["apply", "-f", file.to_str().unwrap()])
        .await
        .ok();
    env.kubectl(&[
        "create",
        "configmap",
        "existing",
        "-n",
        "default",
        "--from-literal=a=1",
    ])
    .await
    .ok();
    let dir = env.dir.path().join("partial");
    std::fs::create_dir_all(&dir).unwrap();
    let config_map = |name: &str, value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n\
             data:\n  a: \"{value}\"\n"
        )
    };
    std::fs::write(dir.join("existing.yaml"), config_map("existing", "2")).unwrap();
    std::fs::write(dir.join("fresh.yaml"), config_map("fresh", "1")).unwrap();
    std::fs::write(
        dir.join("locked.yaml"),
        locked.replace("a: \"1\"", "a: \"2\""),
    )
    .unwrap();
    std::fs::write(
        dir.join("widget.yaml"),
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: default\n",
    )
    .unwrap();
    let kustomization = env.dir.path().join("partial-ks.yaml");
    std::fs::write(
        &kustomization,
        "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: partial
  namespace: flux-system
spec:
  interval: 10m
  path: ./
  prune: true
  sourceRef:
    kind: GitRepository
    name: fleet
",
    )
    .unwrap();
    (dir, kustomization)
}

/// `capstan build kustomization apps` of `dir` with the Kustomization from `file`, parsed.
async fn build_docs(env: &Env, dir: &Path, file: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec![
        "build",
        "kustomization",
        "apps",
        "--path",
        dir.to_str().unwrap(),
        "--kustomization-file",
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let run = env.capstan(&args).await.ok();
    capstan_kustomize::parse_documents(&run.stdout).unwrap()
}
