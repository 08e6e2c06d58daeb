//! The CLI habits a `flux` user relies on (issue 13): a closed pipe is not a crash, cluster
//! flags before the verb, `capstan version`, plain HTTP for loopback registries.

use std::process::Stdio;
use std::time::Duration;

use capstan_testkit::Run;

use crate::commands::{Env, assert_contains, table};

/// A Kustomization `apps` in `flux-system` (its source need not exist to be listed).
const KUSTOMIZATION: &str = "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  path: ./apps
  prune: true
  suspend: true
  sourceRef:
    kind: GitRepository
    name: fleet
";

async fn env_with_kustomization() -> Env {
    let env = Env::start().await;
    let file = env.dir.path().join("ks.yaml");
    std::fs::write(&file, KUSTOMIZATION).unwrap();
    env.kubectl(&["apply", "-f", &file.to_string_lossy()])
        .await
        .ok();
    env
}

/// Runs `capstan <args>` with stdout a pipe whose reader is gone before anything is written.
async fn capstan_into_closed_pipe(args: &[&str]) -> Run {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output();
    tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .unwrap_or_else(|_| panic!("capstan {args:?} timed out"))
        .unwrap()
        .into()
}

/// `capstan get ks -A -o yaml | head -1` ends quietly with 0 when `head` has gone, as a filter
/// in a pipeline should; it used to panic ("failed printing to stdout") with 101.
#[tokio::test(flavor = "multi_thread")]
async fn cli_habits_a_closed_pipe_ends_quietly() {
    let env = env_with_kustomization().await;
    let kubeconfig = env.kubeconfig.to_string_lossy().into_owned();
    for args in [
        vec!["get", "ks", "-A", "-o", "yaml", "--kubeconfig", &kubeconfig],
        vec!["get", "ks", "--kubeconfig", &kubeconfig],
        vec!["export", "ks", "--all", "--kubeconfig", &kubeconfig],
        vec!["install", "--export"],
    ] {
        let run = capstan_into_closed_pipe(&args).await;
        assert_eq!(run.status, 0, "capstan {args:?}: {}", run.stderr);
        assert!(
            !run.stderr.contains("panicked"),
            "capstan {args:?} panicked: {}",
            run.stderr
        );
    }
}

/// `capstan --kubeconfig KC -n NS get ks`, the cluster flags before the verb, as `flux` takes
/// them; after the verb they still work, and the namespace given first is the one used.
#[tokio::test(flavor = "multi_thread")]
async fn cli_habits_cluster_flags_before_the_verb() {
    let env = env_with_kustomization().await;
    let kubeconfig = env.kubeconfig.to_string_lossy().into_owned();
    let capstan = |args: Vec<String>| async move {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        Run::from(out)
    };
    let own = |args: &[&str]| args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();

    let before = capstan(own(&[
        "--kubeconfig",
        &kubeconfig,
        "-n",
        "flux-system",
        "get",
        "ks",
    ]))
    .await
    .ok();
    let rows = table(&before.stdout);
    assert!(
        rows.iter().any(|row| row[0] == "apps"),
        "lists apps: {}",
        before.stdout
    );

    let attached = capstan(own(&[
        &format!("--kubeconfig={kubeconfig}"),
        "--namespace=flux-system",
        "--log-level",
        "warn",
        "get",
        "ks",
        "apps",
    ]))
    .await
    .ok();
    assert_contains(&attached.stdout, "apps");

    let elsewhere = capstan(own(&[
        "--kubeconfig",
        &kubeconfig,
        "-n",
        "default",
        "get",
        "ks",
        "apps",
    ]))
    .await
    .ok();
    assert_contains(&elsewhere.stderr, "not found in \"default\" namespace");

    // After the verb, as before.
    env.capstan(&["get", "ks", "-n", "flux-system"]).await.ok();
}

/// `capstan version --client` prints the client's version without a cluster; `capstan version`
/// adds the controllers' version, which `capstan dev` records in its control plane's
/// `/version`; a cluster that records none gets `unknown`, never a guess.
#[tokio::test(flavor = "multi_thread")]
async fn cli_habits_version_of_client_and_controllers() {
    let client = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["version", "--client", "--kubeconfig", "/nonexistent"])
        .output()
        .await
        .unwrap();
    let client = Run::from(client).ok();
    assert_eq!(
        client.stdout,
        format!("capstan: v{}\n", env!("CARGO_PKG_VERSION"))
    );

    let env = Env::start().await;
    let both = env.capstan(&["version"]).await.ok();
    assert_eq!(
        both.stdout,
        format!(
            "capstan: v{0}\ncontrollers: v{0} (embedded, capstan dev)\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// `capstan push artifact oci://127.0.0.1:PORT/…` and `oci://localhost:PORT/…` speak plain
/// HTTP without `--insecure`, as the flux CLI does for loopback registries; pull too.
#[tokio::test(flavor = "multi_thread")]
async fn cli_habits_loopback_registries_use_plain_http() {
    let registry = capstan_testkit::Registry::start().await;
    let port = registry.address.rsplit_once(':').unwrap().1.to_owned();
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    std::fs::create_dir_all(&source).unwrap();
    std::fs::write(source.join("app.yaml"), "kind: ConfigMap\n").unwrap();
    let path = source.to_string_lossy().into_owned();
    for host in ["127.0.0.1", "localhost"] {
        let url = format!("oci://{host}:{port}/apps/loopback:v1");
        let pushed = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args(["push", "artifact", &url, "--path", &path])
            .args(["--source", "https://example.invalid/fleet.git"])
            .args([
                "--revision",
                "main@sha1:0123456789abcdef0123456789abcdef01234567",
            ])
            .output()
            .await
            .unwrap();
        let pushed = Run::from(pushed).ok();
        assert!(pushed.stdout.starts_with("sha256:"), "{}", pushed.stdout);

        let out = dir.path().join(format!("pulled-{host}"));
        let pulled = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args(["pull", "artifact", &url, "-o", &out.to_string_lossy()])
            .output()
            .await
            .unwrap();
        Run::from(pulled).ok();
        assert_eq!(
            std::fs::read_to_string(out.join("app.yaml")).unwrap(),
            "kind: ConfigMap\n"
        );
    }
}

/// `capstan completion bash` prints a script that bash completes verbs and flags with;
/// `zsh` and `fish` print theirs.
#[tokio::test]
async fn cli_habits_completion_scripts() {
    let completion = |shell: &'static str| async move {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
            .args(["completion", shell])
            .output()
            .await
            .unwrap();
        Run::from(out).ok().stdout
    };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("capstan.bash");
    std::fs::write(&script, completion("bash").await).unwrap();
    let completed = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}
             COMP_WORDS=(capstan ge); COMP_CWORD=1; _capstan capstan ge capstan
             echo \"${{COMPREPLY[@]}}\"
             COMP_WORDS=(capstan get --kubec); COMP_CWORD=2; _capstan capstan --kubec get
             echo \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .output()
        .await
        .unwrap();
    let completed = Run::from(completed).ok();
    assert_eq!(completed.stdout, "get\n--kubeconfig\n");

    assert!(completion("zsh").await.starts_with("#compdef capstan"));
    assert_contains(
        &completion("fish").await,
        "complete -c capstan -n \"__fish_capstan_needs_command\"",
    );
}

/// `capstan get ks --watch` prints the header and a row as a Kustomization appears, then a
/// row each time it changes; `get all --watch` is refused (one kind at a time).
#[tokio::test(flavor = "multi_thread")]
async fn cli_habits_get_watch_prints_changes() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let env = Env::start().await;
    let refused = env.capstan(&["get", "all", "--watch"]).await;
    assert_eq!(refused.status, 1);
    assert_contains(&refused.stderr, "--watch takes one kind");

    let mut watch = tokio::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .args(["get", "ks", "--watch", "--kubeconfig"])
        .arg(&env.kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut next_line = async || {
        tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("a line within 60 s")
            .unwrap()
            .expect("the watch goes on")
    };
    let file = env.dir.path().join("ks.yaml");
    std::fs::write(&file, KUSTOMIZATION).unwrap();
    env.kubectl(&["apply", "-f", &file.to_string_lossy()])
        .await
        .ok();
    let header = next_line().await;
    assert!(header.starts_with("NAME"), "{header}");
    let first = next_line().await;
    let cells: Vec<&str> = first.split_whitespace().collect();
    assert_eq!((cells[0], cells[1]), ("apps", "True"), "{first}");

    env.kubectl(&[
        "label",
        "kustomization",
        "apps",
        "-n",
        "flux-system",
        "changed=yes",
    ])
    .await
    .ok();
    let second = next_line().await;
    assert!(second.starts_with("apps"), "{second}");
}
