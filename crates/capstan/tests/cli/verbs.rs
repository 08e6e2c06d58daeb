//! `capstan envsubst`, `stats` and `migrate` as a `flux` user runs them, and verbs refusing
//! flags they would ignore (issue 13).

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use capstan_testkit::{Run, eventually};

use crate::commands::{Env, assert_contains, table};

/// Runs `capstan <args>` in `dir` with `env` set and `stdin` written to its standard input.
fn capstan_in(dir: &Path, args: &[&str], env: &[(&str, &str)], stdin: &str) -> Run {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_capstan"))
        .current_dir(dir)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap().into()
}

/// `kustomize build . | capstan envsubst`: `${VAR}`, defaults and `$${…}` escapes resolved from
/// the environment as the Kustomization's post-build substitution does; unset variables become
/// empty, and under `--strict` fail naming the variable.
#[test]
fn verbs_envsubst_substitutes_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let input = "apiVersion: v1
kind: ConfigMap
metadata:
  name: ${REPO_NAME}
data:
  region: ${REGION:=eu-central-1}
  literal: $${REPO_NAME}
  plain: $HOME
  unset: \"${CAPSTAN_TEST_UNSET_VARIABLE}\"
";
    let run = capstan_in(
        dir.path(),
        &["envsubst"],
        &[("REPO_NAME", "test"), ("HOME", "/var/empty")],
        input,
    )
    .ok();
    assert_eq!(
        run.stdout,
        "apiVersion: v1
kind: ConfigMap
metadata:
  name: test
data:
  region: eu-central-1
  literal: ${REPO_NAME}
  plain: $HOME
  unset: \"\"
"
    );

    let strict = capstan_in(
        dir.path(),
        &["envsubst", "--strict"],
        &[("REPO_NAME", "test")],
        input,
    );
    assert_eq!(strict.status, 1, "{strict:?}");
    assert_contains(
        &strict.stderr,
        "variable not set (strict mode): \"CAPSTAN_TEST_UNSET_VARIABLE\"",
    );
    // Defaults satisfy strict mode.
    let defaulted = capstan_in(
        dir.path(),
        &["envsubst", "--strict"],
        &[],
        "region: ${CAPSTAN_TEST_UNSET_VARIABLE:=here}\n",
    )
    .ok();
    assert_eq!(defaulted.stdout, "region: here\n");

    let malformed = capstan_in(dir.path(), &["envsubst"], &[], "name: ${bad-name}\n");
    assert_eq!(malformed.status, 1);
    assert_contains(
        &malformed.stderr,
        "line 1: invalid variable name 'bad-name'",
    );
    // No arguments, as Flux's.
    capstan_in(dir.path(), &["envsubst", "extra"], &[], "").fails();
}

const OLD_FLEET: &str = "# The fleet's sources.
apiVersion: source.toolkit.fluxcd.io/v1beta2 # was beta
kind: GitRepository
metadata:
  name: fleet
  namespace: flux-system
spec:
  interval: 1m   # every minute
  url: https://example.invalid/fleet.git
---
apiVersion: kustomize.toolkit.fluxcd.io/v1beta2
kind: Kustomization
metadata:
  name: apps
spec:
  healthChecks:
    - apiVersion: \"helm.toolkit.fluxcd.io/v2beta1\"
      kind: HelmRelease
      name: podinfo
    - apiVersion: apps/v1
      kind: Deployment
      name: web
---
kind: Alert
apiVersion: notification.toolkit.fluxcd.io/v1beta2
metadata:
  name: slack
---
apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImagePolicy
";

/// `capstan migrate -f PATH`: lists each older `apiVersion` of a served kind as
/// `file:line: Kind old -> new`; `--dry-run` writes nothing; `--yes` rewrites only those
/// versions (comments, quotes, spacing and other files as they were); a second run finds
/// nothing. Flags that only apply to `--path` are refused without it.
#[test]
fn verbs_migrate_rewrites_old_api_versions_in_files() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    capstan_testkit::write_files(
        repo,
        &[
            ("clusters/prod/fleet.yaml", OLD_FLEET),
            (
                "clusters/prod/release.yml",
                "apiVersion: helm.toolkit.fluxcd.io/v2beta2\nkind: HelmRelease\n",
            ),
            (
                "clusters/prod/notes.txt",
                "apiVersion: source.toolkit.fluxcd.io/v1beta2\nkind: GitRepository\n",
            ),
            (
                "clusters/prod/current.yaml",
                "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\n",
            ),
        ],
    );
    let fleet = Path::new("clusters/prod/fleet.yaml");

    let dry = capstan_in(repo, &["migrate", "-f", "clusters", "--dry-run"], &[], "").ok();
    for line in [
        "✚ clusters/prod/fleet.yaml:2: GitRepository v1beta2 -> v1",
        "✚ clusters/prod/fleet.yaml:11: Kustomization v1beta2 -> v1",
        "✚ clusters/prod/fleet.yaml:17: HelmRelease v2beta1 -> v2",
        "✚ clusters/prod/fleet.yaml:25: Alert v1beta2 -> v1beta3",
        "✚ clusters/prod/release.yml:1: HelmRelease v2beta2 -> v2",
        "✔ dry-run mode enabled, no changes will be made",
    ] {
        assert_contains(&dry.stderr, line);
    }
    assert!(!dry.stderr.contains("notes.txt"), "{}", dry.stderr);
    assert!(!dry.stderr.contains("current.yaml"), "{}", dry.stderr);
    assert!(!dry.stderr.contains("ImagePolicy"), "{}", dry.stderr);
    assert_eq!(
        std::fs::read_to_string(repo.join(fleet)).unwrap(),
        OLD_FLEET
    );

    // Without --yes, a "no" (or no answer) leaves the files alone.
    let declined = capstan_in(repo, &["migrate", "--path", "clusters"], &[], "n\n");
    assert_eq!(declined.status, 1);
    assert_contains(&declined.stderr, "migration aborted");
    assert_eq!(
        std::fs::read_to_string(repo.join(fleet)).unwrap(),
        OLD_FLEET
    );

    let done = capstan_in(repo, &["migrate", "--path", "clusters/", "--yes"], &[], "").ok();
    assert_contains(
        &done.stderr,
        "✔ file clusters/prod/fleet.yaml migrated successfully",
    );
    assert_contains(&done.stderr, "✔ custom resources migrated successfully");
    let expected = OLD_FLEET
        .replace(
            "source.toolkit.fluxcd.io/v1beta2 # was beta",
            "source.toolkit.fluxcd.io/v1 # was beta",
        )
        .replace(
            "kustomize.toolkit.fluxcd.io/v1beta2",
            "kustomize.toolkit.fluxcd.io/v1",
        )
        .replace(
            "\"helm.toolkit.fluxcd.io/v2beta1\"",
            "\"helm.toolkit.fluxcd.io/v2\"",
        )
        .replace(
            "notification.toolkit.fluxcd.io/v1beta2",
            "notification.toolkit.fluxcd.io/v1beta3",
        );
    assert_eq!(std::fs::read_to_string(repo.join(fleet)).unwrap(), expected);
    assert_eq!(
        std::fs::read_to_string(repo.join("clusters/prod/release.yml")).unwrap(),
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("clusters/prod/notes.txt")).unwrap(),
        "apiVersion: source.toolkit.fluxcd.io/v1beta2\nkind: GitRepository\n"
    );
    // The migrated objects are ones `capstan build`'s decoder serves: a second run finds none.
    let again = capstan_in(repo, &["migrate", "-f", "clusters", "-y"], &[], "").ok();
    assert_contains(
        &again.stderr,
        "✔ no custom resources found that require migration",
    );

    // One file, with its extension checked.
    let single = capstan_in(
        repo,
        &["migrate", "-f", "clusters/prod/notes.txt", "--dry-run"],
        &[],
        "",
    );
    assert_eq!(single.status, 1);
    assert_contains(&single.stderr, "does not match the specified extensions");

    // --dry-run, --yes and --extensions only mean something with --path.
    for flag in ["--dry-run", "--yes", "--extensions=.tpl"] {
        let refused = capstan_in(repo, &["migrate", flag], &[], "");
        assert_eq!(refused.status, 2, "{flag}: {refused:?}");
        assert_contains(&refused.stderr, "--path");
    }
}

/// A GitRepository that cannot fetch and a suspended Kustomization.
const BROKEN_AND_SUSPENDED: &str = "apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: broken
  namespace: flux-system
spec:
  interval: 10m
  timeout: 5s
  url: http://127.0.0.1:1/nothing.git
  ref:
    branch: main
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
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

/// `capstan stats`: a row per served kind with running, failing and suspended counts and the
/// storage of the artifacts, for the namespace (or `-A`); `capstan migrate` without `--path`
/// migrates the objects in the cluster to the storage version.
#[tokio::test(flavor = "multi_thread")]
async fn verbs_stats_and_cluster_migrate() {
    let env = Env::start().await;
    env.commit(&[(
        "apps/demo.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  namespace: default\n",
    )]);
    env.create_git_fleet().await;
    let objects = env.dir.path().join("objects.yaml");
    std::fs::write(&objects, BROKEN_AND_SUSPENDED).unwrap();
    env.kubectl(&["apply", "-f", &objects.to_string_lossy()])
        .await
        .ok();

    let rows = eventually(
        Duration::from_secs(60),
        "a failing GitRepository",
        || async {
            let run = env.capstan(&["stats"]).await.ok();
            let rows = table(&run.stdout);
            let git = rows.iter().find(|r| r[0] == "GitRepository")?;
            (git[2] == "1").then_some(rows)
        },
    )
    .await;
    assert_eq!(
        rows[0],
        ["RECONCILERS", "RUNNING", "FAILING", "SUSPENDED", "STORAGE"]
    );
    let row = |kind: &str| rows.iter().find(|r| r[0] == kind).unwrap().clone();
    let git = row("GitRepository");
    assert_eq!(git[1..4], ["2", "1", "0"], "{rows:?}");
    assert!(git[4].ends_with(" B") || git[4].ends_with("iB"), "{rows:?}");
    assert_eq!(row("Kustomization")[1..], ["0", "0", "1", "-"], "{rows:?}");
    assert_eq!(row("HelmRelease")[1..], ["0", "0", "0", "-"], "{rows:?}");
    for kind in ["OCIRepository", "Bucket", "HelmChart", "HelmRepository"] {
        assert_eq!(row(kind)[1..], ["0", "0", "0", "-"], "{kind}: {rows:?}");
    }
    // Another namespace has none; -A counts them all.
    let elsewhere = env.capstan(&["stats", "-n", "default"]).await.ok();
    let other = table(&elsewhere.stdout);
    assert!(
        other.iter().skip(1).all(|r| r[1..4] == ["0", "0", "0"]),
        "{other:?}"
    );
    let all = env.capstan(&["stats", "-A"]).await.ok();
    assert!(
        table(&all.stdout)
            .iter()
            .any(|r| r[0] == "GitRepository" && r[1] == "2"),
        "{}",
        all.stdout
    );

    let migrated = env.capstan(&["migrate"]).await.ok();
    assert_contains(
        &migrated.stderr,
        "✔ GitRepository/flux-system/fleet migrated to version v1",
    );
    assert_contains(
        &migrated.stderr,
        "✔ Kustomization/flux-system/apps migrated to version v1",
    );
    assert_contains(&migrated.stderr, "✔ custom resources migrated successfully");
    let crd = env
        .kubectl(&[
            "get",
            "crd",
            "gitrepositories.source.toolkit.fluxcd.io",
            "-o",
            "json",
        ])
        .await
        .ok()
        .json();
    assert_eq!(crd["status"]["storedVersions"], serde_json::json!(["v1"]));
}

/// Flags a verb would ignore are refused, not dropped: Git and OCI references that another
/// one overrides, chart flags beside `--chart-ref`, a chart version for a chart whose version
/// is the source's revision. A dot in a HelmChart's `--source` stays in the name (the source
/// is in the chart's namespace), where it used to be dropped as a namespace.
#[test]
fn verbs_flags_they_would_ignore_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let capstan = |args: &[&str]| {
        let args = [args, &["--export"]].concat();
        capstan_in(dir.path(), &args, &[], "")
    };
    let git = [
        "create",
        "source",
        "git",
        "fleet",
        "--url",
        "https://example.invalid/fleet.git",
    ];
    let oci = [
        "create",
        "source",
        "oci",
        "app",
        "--url",
        "oci://example.invalid/app",
    ];
    let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    for args in [
        [&git[..], &["--branch", "main", "--tag", "v1"]].concat(),
        [&git[..], &["--tag", "v1", "--tag-semver", ">=1.0.0"]].concat(),
        [
            &git[..],
            &["--commit", "0123abcd", "--tag-semver", ">=1.0.0"],
        ]
        .concat(),
        [&oci[..], &["--tag", "v1", "--digest", digest]].concat(),
        [&oci[..], &["--tag-semver", "1.x", "--digest", digest]].concat(),
    ] {
        let refused = capstan(&args);
        assert_eq!(refused.status, 2, "{args:?}: {refused:?}");
        assert_contains(&refused.stderr, "cannot be used with");
    }
    // A commit on a branch is one reference (the branch is fetched shallowly).
    let pinned = capstan(&[&git[..], &["--branch", "main", "--commit", "0123abcd"]].concat()).ok();
    assert_contains(&pinned.stdout, "branch: main\n    commit: 0123abcd");

    let chart_ref = ["create", "hr", "app", "--chart-ref", "OCIRepository/app"];
    for extra in [
        ["--chart-version", "1.x"],
        ["--source", "HelmRepository/charts"],
        ["--chart-interval", "5m"],
    ] {
        let refused = capstan(&[&chart_ref[..], &extra[..]].concat());
        assert_eq!(refused.status, 2, "{extra:?}: {refused:?}");
        assert_contains(&refused.stderr, "--chart <CHART>");
    }

    for args in [
        vec![
            "create",
            "source",
            "chart",
            "app",
            "--source",
            "GitRepository/fleet",
            "--chart",
            "./charts/app",
            "--chart-version",
            "1.x",
        ],
        vec![
            "create",
            "hr",
            "app",
            "--source",
            "Bucket/charts",
            "--chart",
            "./charts/app",
            "--chart-version",
            "1.x",
        ],
    ] {
        let refused = capstan(&args);
        assert_eq!(refused.status, 1, "{args:?}: {refused:?}");
        assert_contains(
            &refused.stderr,
            "--chart-version applies to charts from a HelmRepository only",
        );
    }
    let dotted = capstan(&[
        "create",
        "source",
        "chart",
        "app",
        "--source",
        "HelmRepository/charts.example.com",
        "--chart",
        "app",
    ])
    .ok();
    assert_contains(&dotted.stdout, "name: charts.example.com\n");
}
