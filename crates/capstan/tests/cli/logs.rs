//! `capstan logs` and the controllers' Pod of `capstan dev`: the controllers' log read through the
//! Kubernetes `pods/log` API, by `kubectl logs` and by `capstan logs` with Flux's filters.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use capstan_testkit::{Run, eventually};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::{self, Dev};

const WAIT: Duration = Duration::from_secs(60);

/// A Kustomization of Flux's namespace whose source does not exist (its reconciles wait, at info),
/// and a GitRepository whose server refuses connections (its fetch fails, at error).
fn objects(kustomizations: &[&str]) -> String {
    use std::fmt::Write;
    let mut yaml = String::from(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  \
         name: refused\n  namespace: flux-system\nspec:\n  interval: 1m\n  \
         url: http://127.0.0.1:1/fleet.git\n  ref: {branch: main}\n",
    );
    for name in kustomizations {
        write!(
            yaml,
            "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  \
             name: {name}\n  namespace: flux-system\nspec:\n  interval: 1m\n  path: ./\n  \
             prune: true\n  sourceRef: {{kind: GitRepository, name: missing-{name}}}\n"
        )
        .unwrap();
    }
    yaml
}

impl Dev {
    async fn kubectl(&self, args: &[&str]) -> Run {
        support::kubectl(&self.kubeconfig, self.dir.path(), args).await
    }

    fn capstan_command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = support::capstan(&self.kubeconfig, args);
        command.env("HOME", self.dir.path());
        command
    }

    async fn capstan(&self, args: &[&str]) -> Run {
        self.capstan_command(args).output().await.unwrap().into()
    }

    async fn apply(&self, yaml: &str) {
        let file = self.dir.path().join("objects.yaml");
        fs_write(&file, yaml);
        self.kubectl(&["apply", "-f", file.to_str().unwrap()])
            .await
            .ok();
    }
}

fn fs_write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// `capstan check` on `capstan dev`: its controllers are the Pod no Deployment owns.
#[tokio::test(flavor = "multi_thread")]
async fn capstan_check_passes_on_capstan_dev() {
    let dev = Dev::start(&[]).await;
    let run = dev.capstan(&["check", "--timeout", "30s"]).await.ok();
    let output = format!("{}{}", run.stdout, run.stderr);
    assert!(
        output.contains("capstan-controller-0: pod ready"),
        "{output}"
    );
    assert!(output.contains("all checks passed"), "{output}");
}

/// `capstan dev` takes the controllers' lockdown flags: with `--no-cross-namespace-refs` a
/// Kustomization whose source is in another namespace is refused as Flux refuses it.
#[tokio::test(flavor = "multi_thread")]
async fn capstan_dev_takes_the_lockdown_flags() {
    let dev = Dev::start(&[
        "--no-cross-namespace-refs",
        "--default-service-account",
        "reconciler",
        "--no-remote-bases",
    ])
    .await;
    dev.apply(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  \
         name: across\n  namespace: flux-system\nspec:\n  interval: 1m\n  path: ./\n  \
         prune: true\n  sourceRef: {kind: GitRepository, name: fleet, namespace: default}\n",
    )
    .await;
    let message = eventually(WAIT, "the Kustomization refused", || async {
        let out = dev
            .kubectl(&[
                "get",
                "kustomization",
                "-n",
                "flux-system",
                "across",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].reason} \
                 {.status.conditions[?(@.type==\"Ready\")].message}",
            ])
            .await
            .ok();
        out.stdout.starts_with("AccessDenied").then_some(out.stdout)
    })
    .await;
    assert!(
        message.contains("cross-namespace references have been blocked"),
        "{message}"
    );
}

/// `capstan dev` holds a Running Pod labelled as the install manifests label the controllers'
/// Pods, and `kubectl logs` reads the in-process controllers' log from it: Flux's JSON lines.
/// `capstan logs` filters that log as `flux logs` does: by kind and name, by level, `--tail`
/// lines of the end, and `--follow` prints a line written after it started; without the Pods,
/// it names the namespace it looked in.
#[tokio::test(flavor = "multi_thread")]
async fn capstan_logs_reads_the_controllers_log_of_capstan_dev() {
    let dev = Dev::start(&[]).await;
    let pods = dev
        .kubectl(&[
            "get",
            "pods",
            "-n",
            "flux-system",
            "-l",
            "app.kubernetes.io/part-of=capstan,app.kubernetes.io/component=controller",
            "-o",
            "jsonpath={.items[*].metadata.name} {.items[*].status.phase}",
        ])
        .await
        .ok();
    assert_eq!(pods.stdout, "capstan-controller-0 Running");

    dev.apply(&objects(&["shown", "hidden"])).await;
    // kubectl (a client nobody here wrote) reads the log through pods/log.
    let line = eventually(WAIT, "a reconcile line of Kustomization shown", || async {
        let out = dev
            .kubectl(&["logs", "-n", "flux-system", "capstan-controller-0"])
            .await
            .ok();
        out.stdout
            .lines()
            .find(|l| l.contains(r#""name":"shown""#))
            .map(str::to_owned)
    })
    .await;
    let line: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
    for field in ["level", "ts", "msg", "reconcileID"] {
        assert!(line.get(field).is_some(), "no {field} in {line}");
    }
    assert_eq!(line["controllerKind"], "Kustomization");
    assert_eq!(line["namespace"], "flux-system");
    let tail = dev
        .kubectl(&[
            "logs",
            "-n",
            "flux-system",
            "capstan-controller-0",
            "--tail=1",
        ])
        .await
        .ok();
    assert_eq!(tail.stdout.lines().count(), 1, "{}", tail.stdout);

    // --kind and --name: that object's lines, no other object's.
    let shown = dev
        .capstan(&["logs", "--kind", "Kustomization", "--name", "shown"])
        .await
        .ok();
    assert!(
        shown
            .stdout
            .lines()
            .any(|l| l.contains(" info Kustomization/shown.flux-system - ")),
        "{}",
        shown.stdout
    );
    assert!(
        shown
            .stdout
            .lines()
            .all(|l| l.contains("Kustomization/shown.flux-system")),
        "{}",
        shown.stdout
    );

    // --level error: the refused fetch, and nothing at another level.
    let errors = eventually(WAIT, "the refused fetch at level error", || async {
        let out = dev.capstan(&["logs", "--level", "error"]).await.ok();
        out.stdout
            .contains(" error GitRepository/refused.flux-system - ")
            .then_some(out.stdout)
    })
    .await;
    assert!(
        errors.lines().all(|l| l.split(' ').nth(1) == Some("error")),
        "{errors}"
    );

    // --tail: lines of the end of the log only.
    let all = dev.capstan(&["logs", "-A"]).await.ok();
    assert!(all.stdout.lines().count() > 2, "{}", all.stdout);
    let tail = dev.capstan(&["logs", "-A", "--tail", "2"]).await.ok();
    assert!(tail.stdout.lines().count() <= 2, "{}", tail.stdout);

    follows_a_new_kustomization(&dev).await;

    // Without the controllers' Pods, it says where it looked.
    let out = dev.capstan(&["logs", "--flux-namespace", "default"]).await;
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains(r#"no Capstan controller pods found in namespace "default""#),
        "{}",
        out.stderr
    );
    let mut child = dev.child;
    child.kill().await.ok();
}

/// `--follow`: a Kustomization created after the verb printed the log's last line shows up.
async fn follows_a_new_kustomization(dev: &Dev) {
    let mut follow = dev
        .capstan_command(&["logs", "--follow", "-A", "--tail", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follow.stdout.take().unwrap()).lines();
    // The last line already written: the stream is open, so what follows was written after.
    let last = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .expect("capstan logs --follow --tail 1 printed the last line")
        .unwrap()
        .expect("a line");
    assert!(!last.contains("/late."), "{last}");
    dev.apply(&objects(&["shown", "hidden", "late"])).await;
    let seen = tokio::time::timeout(WAIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("Kustomization/late.flux-system") {
                return line;
            }
        }
        panic!("capstan logs --follow ended");
    })
    .await
    .expect("capstan logs --follow printed the new Kustomization's line within 60 s");
    assert!(seen.contains(" - "), "{seen}");
    follow.kill().await.ok();
}
