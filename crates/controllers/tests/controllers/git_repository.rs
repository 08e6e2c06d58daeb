//! The GitRepository controller end to end.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use capstan_api::GitRepository;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams};
use sha2::Digest as _;

use crate::support::{Env, GitServer, condition, download, eventually, http_client, tar_entries};

fn ready(object: &GitRepository) -> Option<(String, String, String)> {
    condition(object, "Ready")
}

fn revision(object: &GitRepository) -> Option<&str> {
    Some(object.status.as_ref()?.artifact.as_ref()?.revision.as_str())
}

fn handled(object: &GitRepository) -> Option<&str> {
    object
        .status
        .as_ref()?
        .reconcile_request
        .last_handled_reconcile_at
        .as_deref()
}

/// `gotk_reconcile_duration_seconds_count` of one object, 0 before its first reconcile.
async fn reconcile_count(env: &Env, namespace: &str, name: &str) -> u64 {
    let text = http_client()
        .get(format!("{}/metrics", env.http))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let prefix = format!(
        r#"gotk_reconcile_duration_seconds_count{{kind="GitRepository",name="{name}",namespace="{namespace}"}} "#
    );
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map_or(0, |count| count.trim().parse().unwrap())
}

fn spec(url: &str) -> serde_json::Value {
    serde_json::json!({"url": url, "interval": "10m", "ref": {"branch": "main"}})
}

/// Waits until condition `type_` of the GitRepository is True, and returns the object.
async fn wait_until_true(env: &Env, namespace: &str, name: &str, type_: &str) -> GitRepository {
    env.wait_for(namespace, name, &format!("{name} {type_}=True"), |o| {
        condition(o, type_).is_some_and(|(status, ..)| status == "True")
    })
    .await
}

async fn events(env: &Env, namespace: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(env.client.clone(), namespace);
    api.list(&ListParams::default()).await.unwrap().items
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn becomes_ready_serves_the_artifact_and_follows_requested_reconciles() {
    let env = Env::start().await;
    let ns = env.namespace("ready").await;
    let upstream = GitServer::start().await;
    let first = upstream.commit(
        &[
            ("apps/config.yaml", "v: 1\n"),
            ("secrets/token.txt", "do not ship\n"),
            (".sourceignore", "secrets/\n"),
        ],
        "first",
    );
    env.create_git_repository(&ns, "app", spec(&upstream.url()))
        .await;

    let expected = format!("main@sha1:{first}");
    let object = wait_until_true(&env, &ns, "app", "Ready").await;
    assert_eq!(revision(&object), Some(expected.as_str()));
    assert_eq!(
        ready(&object).unwrap(),
        (
            "True".to_owned(),
            "Succeeded".to_owned(),
            format!("stored artifact for revision '{expected}'")
        )
    );
    assert_eq!(
        condition(&object, "ArtifactInStorage").map(|c| c.0),
        Some("True".to_owned())
    );
    assert!(condition(&object, "Reconciling").is_none());
    assert!(condition(&object, "FetchFailed").is_none());
    let status = object.status.clone().unwrap();
    assert_eq!(status.observed_generation, object.metadata.generation);
    assert!(
        object
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == "finalizers.fluxcd.io"))
    );

    // The artifact is served, matches its digest, and respects .sourceignore.
    let artifact = status.artifact.unwrap();
    assert_eq!(
        artifact.path,
        format!("gitrepository/{ns}/app/{first}.tar.gz")
    );
    assert_eq!(artifact.url, format!("{}/{}", env.http, artifact.path));
    let client = http_client();
    let body = download(&artifact.url).await;
    assert_eq!(
        artifact.digest,
        format!(
            "sha256:{}",
            sha2::Sha256::digest(&body)
                .iter()
                .fold(String::new(), |mut hex, b| {
                    use std::fmt::Write as _;
                    let _ = write!(hex, "{b:02x}");
                    hex
                })
        )
    );
    assert_eq!(artifact.size, Some(i64::try_from(body.len()).unwrap()));
    let entries = tar_entries(&body);
    assert!(
        entries.iter().any(|e| e == "apps/config.yaml"),
        "{entries:?}"
    );
    assert!(
        !entries.iter().any(|e| e.contains("token.txt")),
        "{entries:?}"
    );

    // A Normal event announcing the new artifact (Flux's NewArtifact; the transition to Ready is
    // not announced a second time).
    let found = eventually(Duration::from_secs(10), "a Normal event", || {
        let env = &env;
        let ns = ns.clone();
        async move {
            events(env, &ns)
                .await
                .into_iter()
                .find(|e| e.type_.as_deref() == Some("Normal"))
        }
    })
    .await;
    assert_eq!(found.reason.as_deref(), Some("NewArtifact"));
    assert_eq!(
        found.note.as_deref(),
        Some(format!("stored artifact for revision '{expected}'").as_str())
    );

    // A new commit shows up at once when a reconcile is requested (the interval is 10m).
    let second = upstream.commit(&[("apps/config.yaml", "v: 2\n")], "second");
    env.patch(
        &ns,
        "app",
        serde_json::json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "t1"}}}),
    )
    .await;
    let expected_second = format!("main@sha1:{second}");
    let object = env
        .wait_for(&ns, "app", "the second revision", |o| {
            revision(o) == Some(expected_second.as_str()) && handled(o) == Some("t1")
        })
        .await;
    let status = object.status.unwrap();
    assert_eq!(
        status
            .reconcile_request
            .last_handled_reconcile_at
            .as_deref(),
        Some("t1"),
        "{status:#?}"
    );

    // A third commit: garbage collection keeps two artifacts.
    let third = upstream.commit(&[("apps/config.yaml", "v: 3\n")], "third");
    env.patch(
        &ns,
        "app",
        serde_json::json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "t2"}}}),
    )
    .await;
    let expected_third = format!("main@sha1:{third}");
    env.wait_for(&ns, "app", "the third revision", |o| {
        revision(o) == Some(expected_third.as_str())
    })
    .await;
    let dir = env.storage_path(&format!("gitrepository/{ns}/app"));
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect();
    files.sort();
    let mut expected_files = vec![format!("{second}.tar.gz"), format!("{third}.tar.gz")];
    expected_files.sort();
    assert_eq!(files, expected_files);

    // An unchanged remote revision is not fetched again: artifact and messages stay as they are.
    let before = env.git_repositories(&ns).get("app").await.unwrap();
    env.patch(
        &ns,
        "app",
        serde_json::json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "t3"}}}),
    )
    .await;
    let after = env
        .wait_for(&ns, "app", "the t3 request", |o| handled(o) == Some("t3"))
        .await;
    let (before, after) = (before.status.unwrap(), after.status.unwrap());
    assert_eq!(before.artifact, after.artifact);
    assert_eq!(before.conditions, after.conditions);

    // spec.ignore is applied and rebuilds the artifact of the same revision.
    env.patch(
        &ns,
        "app",
        serde_json::json!({"spec": {"ignore": "apps/\n"}}),
    )
    .await;
    let object = env
        .wait_for(&ns, "app", "observedIgnore", |o| {
            o.status
                .as_ref()
                .is_some_and(|s| s.observed_ignore.as_deref() == Some("apps/\n"))
        })
        .await;
    let artifact = object.status.unwrap().artifact.unwrap();
    assert_eq!(artifact.revision, expected_third);
    let body = download(&artifact.url).await;
    let entries = tar_entries(&body);
    assert!(
        !entries.iter().any(|e| e.starts_with("apps")),
        "{entries:?}"
    );

    // Metrics and health endpoints.
    let metrics = client
        .get(format!("{}/metrics", env.http))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            r#"gotk_reconcile_duration_seconds_count{{kind="GitRepository",name="app",namespace="{ns}"}}"#
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(r#"revision="{expected_third}""#)),
        "{metrics}"
    );
    for path in ["/healthz", "/readyz"] {
        let status = client
            .get(format!("{}{path}", env.http))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 200, "{path}");
    }
    env.stop().await;
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn unknown_branch_and_unreachable_url_report_fetch_failed() {
    let env = Env::start().await;
    let ns = env.namespace("failing").await;
    let upstream = GitServer::start().await;
    upstream.commit(&[("a.yaml", "a: 1\n")], "first");
    env.create_git_repository(
        &ns,
        "unknown-branch",
        serde_json::json!({"url": upstream.url(), "interval": "10m", "ref": {"branch": "nope"}}),
    )
    .await;
    env.create_git_repository(
        &ns,
        "unreachable",
        serde_json::json!({"url": "http://127.0.0.1:1/missing.git", "interval": "10m"}),
    )
    .await;

    // A missing secret: AuthenticationFailed, retried.
    env.create_git_repository(
        &ns,
        "missing-secret",
        serde_json::json!({"url": upstream.url(), "interval": "10m", "secretRef": {"name": "absent"}}),
    )
    .await;
    let object = env
        .wait_for(&ns, "missing-secret", "Ready=False", |o| {
            ready(o).is_some_and(|(status, ..)| status == "False")
        })
        .await;
    let (_, reason, message) = ready(&object).unwrap();
    assert_eq!(reason, "AuthenticationFailed");
    assert!(message.contains(&format!("'{ns}/absent'")), "{message}");
    assert_eq!(
        condition(&object, "FetchFailed").map(|c| c.1),
        Some("AuthenticationFailed".to_owned())
    );

    // An invalid commit reference needs a spec change: Stalled, not Reconciling.
    env.create_git_repository(
        &ns,
        "bad-commit",
        serde_json::json!({"url": upstream.url(), "interval": "10m", "ref": {"commit": "xyz"}}),
    )
    .await;
    let object = wait_until_true(&env, &ns, "bad-commit", "Stalled").await;
    let (status, reason, message) = ready(&object).unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "GitOperationFailed")
    );
    assert!(message.contains("xyz"), "{message}");
    assert!(
        condition(&object, "Reconciling").is_none(),
        "{:#?}",
        object.status
    );
    assert_eq!(
        object.status.as_ref().unwrap().observed_generation,
        object.metadata.generation
    );

    for name in ["unknown-branch", "unreachable"] {
        let object = env
            .wait_for(&ns, name, "Ready=False", |o| {
                ready(o).is_some_and(|(status, ..)| status == "False")
            })
            .await;
        let (_, reason, message) = ready(&object).unwrap();
        assert_eq!(reason, "GitOperationFailed", "{name}");
        assert!(
            message.starts_with("failed to checkout and determine revision: "),
            "{name}: {message}"
        );
        assert_eq!(
            condition(&object, "FetchFailed"),
            Some((
                "True".to_owned(),
                "GitOperationFailed".to_owned(),
                message.clone()
            )),
            "{name}"
        );
        assert_eq!(
            condition(&object, "Reconciling").map(|c| c.1),
            Some("ProgressingWithRetry".to_owned()),
            "{name}: {:#?}",
            object.status
        );
        assert!(object.status.as_ref().unwrap().artifact.is_none());
        if name == "unknown-branch" {
            assert!(message.contains("nope"), "{message}");
            assert!(message.contains("not found"), "{message}");
        } else {
            assert!(message.contains("127.0.0.1:1"), "{message}");
        }
    }
    let warning = eventually(Duration::from_secs(10), "a Warning event", || {
        let env = &env;
        let ns = ns.clone();
        async move {
            events(env, &ns)
                .await
                .into_iter()
                .find(|e| e.type_.as_deref() == Some("Warning"))
        }
    })
    .await;
    assert_eq!(warning.reason.as_deref(), Some("GitOperationFailed"));

    // Fixing the spec recovers: FetchFailed and Reconciling disappear.
    env.patch(
        &ns,
        "unknown-branch",
        serde_json::json!({"spec": {"ref": {"branch": "main"}}}),
    )
    .await;
    let object = wait_until_true(&env, &ns, "unknown-branch", "Ready").await;
    assert!(condition(&object, "FetchFailed").is_none());
    assert!(condition(&object, "Reconciling").is_none());
    env.stop().await;
}

#[tokio::test]
async fn suspend_stops_reconciling_until_resumed() {
    let env = Env::start().await;
    let ns = env.namespace("suspend").await;
    let upstream = GitServer::start().await;
    let first = upstream.commit(&[("a.yaml", "a: 1\n")], "first");
    env.create_git_repository(&ns, "app", spec(&upstream.url()))
        .await;
    let first_revision = format!("main@sha1:{first}");
    env.wait_for(&ns, "app", "the first revision", |o| {
        revision(o) == Some(first_revision.as_str())
    })
    .await;

    env.patch(&ns, "app", serde_json::json!({"spec": {"suspend": true}}))
        .await;
    // The controller has seen the suspended object once the metric says so.
    let client = http_client();
    let url = format!("{}/metrics", env.http);
    eventually(
        Duration::from_secs(30),
        "suspended=\"true\" in metrics",
        || {
            let request = client.get(&url).send();
            async move {
                let text = request.await.ok()?.text().await.ok()?;
                text.lines()
                    .any(|l| {
                        l.starts_with("gotk_resource_info") && l.contains(r#"suspended="true""#)
                    })
                    .then_some(())
            }
        },
    )
    .await;

    // A new commit and a reconcile request while suspended change nothing.
    let second = upstream.commit(&[("a.yaml", "a: 2\n")], "second");
    let before = reconcile_count(&env, &ns, "app").await;
    env.patch(
        &ns,
        "app",
        serde_json::json!({
            "metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "while-suspended"}},
        }),
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "the requested reconcile to run",
        || {
            let env = &env;
            let ns = ns.clone();
            async move { (reconcile_count(env, &ns, "app").await > before).then_some(()) }
        },
    )
    .await;
    let object = env.git_repositories(&ns).get("app").await.unwrap();
    assert_eq!(revision(&object), Some(first_revision.as_str()));
    assert_ne!(handled(&object), Some("while-suspended"));

    env.patch(&ns, "app", serde_json::json!({"spec": {"suspend": false}}))
        .await;
    let second_revision = format!("main@sha1:{second}");
    env.wait_for(&ns, "app", "the second revision after resume", |o| {
        revision(o) == Some(second_revision.as_str())
    })
    .await;
    env.stop().await;
}

#[tokio::test]
async fn deletion_removes_stored_artifacts() {
    let env = Env::start().await;
    let ns = env.namespace("deletion").await;
    let upstream = GitServer::start().await;
    upstream.commit(&[("a.yaml", "a: 1\n")], "first");
    env.create_git_repository(&ns, "app", spec(&upstream.url()))
        .await;
    let object = env
        .wait_for(&ns, "app", "an artifact", |o| revision(o).is_some())
        .await;
    let artifact = object.status.unwrap().artifact.unwrap();
    let file = env.storage_path(&artifact.path);
    assert!(file.is_file(), "{}", file.display());

    env.git_repositories(&ns)
        .delete("app", &DeleteParams::default())
        .await
        .unwrap();
    let api = env.git_repositories(&ns);
    eventually(Duration::from_secs(30), "the object to be gone", || {
        let api = api.clone();
        async move {
            api.get_opt("app")
                .await
                .ok()
                .filter(Option::is_none)
                .map(|_| ())
        }
    })
    .await;
    assert!(!file.exists());
    assert!(
        !env.storage_path(&format!("gitrepository/{ns}/app"))
            .exists()
    );
    env.stop().await;
}

#[tokio::test]
async fn spec_timeout_bounds_git_operations() {
    let env = Env::start().await;
    let ns = env.namespace("timeout").await;
    // A server that accepts connections, never answers, and counts the connections the client
    // closed (a read of 0 bytes).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let closed = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&closed);
    let hold = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let counter = Arc::clone(&counter);
            tokio::spawn(async move {
                use tokio::io::AsyncReadExt as _;
                let mut buffer = [0u8; 4096];
                while matches!(stream.read(&mut buffer).await, Ok(n) if n > 0) {}
                counter.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    env.create_git_repository(
        &ns,
        "slow",
        serde_json::json!({"url": format!("http://{address}/repo.git"), "interval": "10m", "timeout": "1s"}),
    )
    .await;
    let object = env
        .wait_for(&ns, "slow", "Ready=False", |o| {
            ready(o).is_some_and(|(status, ..)| status == "False")
        })
        .await;
    let (_, reason, message) = ready(&object).unwrap();
    assert_eq!(reason, "GitOperationFailed");
    assert!(message.contains("timed out after 1s"), "{message}");
    // The abandoned Git work does not keep its connection open.
    eventually(
        Duration::from_secs(5),
        "the timed-out connection to close",
        || async { (closed.load(Ordering::SeqCst) >= 1).then_some(()) },
    )
    .await;
    hold.abort();
    env.stop().await;
}

fn artifact_of(object: &GitRepository) -> Option<capstan_api::meta::Artifact> {
    object.status.as_ref()?.artifact.clone()
}

/// The content of `name` in a gzip tarball.
fn tar_file(bytes: &[u8], name: &str) -> Option<String> {
    use std::io::Read as _;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().display().to_string() == name {
            let mut content = String::new();
            entry.read_to_string(&mut content).unwrap();
            return Some(content);
        }
    }
    None
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn include_copies_other_artifacts_and_follows_their_changes() {
    let env = Env::start().await;
    let ns = env.namespace("include").await;
    let app_upstream = GitServer::start().await;
    let lib_upstream = GitServer::start().await;
    let app_commit = app_upstream.commit(&[("app.yaml", "app: 1\n")], "app");
    lib_upstream.commit(
        &[("deploy/lib.yaml", "lib: 1\n"), ("README.md", "lib\n")],
        "lib",
    );

    // `app` includes `lib` twice: whole, at the default path `lib`, and `deploy` at
    // `vendor/deploy`. The interval (2s) is what picks up changes of `lib`.
    env.create_git_repository(
        &ns,
        "app",
        serde_json::json!({
            "url": app_upstream.url(), "interval": "2s", "ref": {"branch": "main"},
            "include": [
                {"repository": {"name": "lib"}},
                {"repository": {"name": "lib"}, "fromPath": "deploy", "toPath": "vendor/deploy"},
            ],
        }),
    )
    .await;

    // The included repository does not exist yet.
    let object = env
        .wait_for(&ns, "app", "IncludeUnavailable NotFound", |o| {
            ready(o).is_some_and(|(status, reason, _)| status == "False" && reason == "NotFound")
        })
        .await;
    let (_, _, message) = ready(&object).unwrap();
    assert!(
        message.starts_with("could not get resource for include 'lib'"),
        "{message}"
    );
    assert_eq!(
        condition(&object, "IncludeUnavailable").map(|c| (c.0, c.1)),
        Some(("True".to_owned(), "NotFound".to_owned()))
    );
    // Waiting for a dependency: Reconciling (Progressing), not Stalled.
    assert_eq!(
        condition(&object, "Reconciling").map(|c| c.1),
        Some("Progressing".to_owned())
    );
    assert!(condition(&object, "Stalled").is_none());
    assert!(artifact_of(&object).is_none());

    // It exists but has no artifact (unknown branch).
    env.create_git_repository(
        &ns,
        "lib",
        serde_json::json!({"url": lib_upstream.url(), "interval": "10m", "ref": {"branch": "nope"}}),
    )
    .await;
    let object = env
        .wait_for(&ns, "app", "IncludeUnavailable NoArtifact", |o| {
            ready(o).is_some_and(|(status, reason, _)| status == "False" && reason == "NoArtifact")
        })
        .await;
    assert_eq!(
        ready(&object).unwrap().2,
        "no artifact available for include 'lib'"
    );

    // Once `lib` has an artifact, `app` is retried and becomes ready with the included files.
    env.patch(
        &ns,
        "lib",
        serde_json::json!({"spec": {"ref": {"branch": "main"}}}),
    )
    .await;
    let lib = wait_until_true(&env, &ns, "lib", "Ready").await;
    let lib_artifact = artifact_of(&lib).unwrap();
    let object = wait_until_true(&env, &ns, "app", "Ready").await;
    assert!(condition(&object, "IncludeUnavailable").is_none());
    let status = object.status.clone().unwrap();
    assert_eq!(
        status.included_artifacts,
        vec![lib_artifact.clone(), lib_artifact.clone()]
    );
    assert_eq!(status.observed_include, object.spec.include);
    let first = status.artifact.unwrap();
    assert_eq!(first.revision, format!("main@sha1:{app_commit}"));
    let body = download(&first.url).await;
    let entries = tar_entries(&body);
    for expected in [
        "app.yaml",
        "lib/deploy/lib.yaml",
        "lib/README.md",
        "vendor/deploy/lib.yaml",
    ] {
        assert!(
            entries.iter().any(|e| e == expected),
            "{expected}: {entries:?}"
        );
    }
    assert!(
        !entries.iter().any(|e| e == "vendor/deploy/README.md"),
        "{entries:?}"
    );
    assert_eq!(
        tar_file(&body, "vendor/deploy/lib.yaml").as_deref(),
        Some("lib: 1\n")
    );

    // A new artifact of `lib`: the next reconcile of `app` packs a new artifact for the same
    // revision, with a new digest and the new content.
    lib_upstream.commit(&[("deploy/lib.yaml", "lib: 2\n")], "lib 2");
    env.patch(
        &ns,
        "lib",
        serde_json::json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "t1"}}}),
    )
    .await;
    let lib = env
        .wait_for(&ns, "lib", "lib's second artifact", |o| {
            artifact_of(o).is_some_and(|a| a.digest != lib_artifact.digest)
        })
        .await;
    let lib_second = artifact_of(&lib).unwrap();
    let object = env
        .wait_for(&ns, "app", "app to follow lib's new artifact", |o| {
            o.status
                .as_ref()
                .is_some_and(|s| s.included_artifacts.first() == Some(&lib_second))
        })
        .await;
    let second = artifact_of(&object).unwrap();
    assert_eq!(second.revision, first.revision);
    assert_ne!(second.digest, first.digest);
    let body = download(&second.url).await;
    assert_eq!(
        tar_file(&body, "vendor/deploy/lib.yaml").as_deref(),
        Some("lib: 2\n")
    );
    assert_eq!(ready(&object).unwrap().0, "True", "{:?}", object.status);
    env.stop().await;
}

#[tokio::test]
async fn include_paths_leaving_the_artifact_and_verify_stall() {
    let env = Env::start().await;
    let ns = env.namespace("include-illegal").await;
    env.create_git_repository(
        &ns,
        "escape",
        serde_json::json!({
            "url": "http://127.0.0.1:1/unused.git", "interval": "10m",
            "include": [{"repository": {"name": "lib"}, "toPath": "../outside"}],
        }),
    )
    .await;
    env.create_git_repository(
        &ns,
        "signed",
        serde_json::json!({
            "url": "http://127.0.0.1:1/unused.git", "interval": "10m",
            "verify": {"mode": "HEAD", "secretRef": {"name": "keys"}},
        }),
    )
    .await;
    let object = wait_until_true(&env, &ns, "escape", "Stalled").await;
    let (_, reason, message) = ready(&object).unwrap();
    assert_eq!(reason, "IllegalPath");
    assert!(message.contains(r#"toPath "../outside""#), "{message}");
    assert_eq!(
        condition(&object, "StorageOperationFailed").map(|c| c.1),
        Some("IllegalPath".to_owned())
    );
    let object = wait_until_true(&env, &ns, "signed", "Stalled").await;
    let (_, reason, message) = ready(&object).unwrap();
    assert_eq!(reason, "FeatureGateDisabled");
    assert_eq!(
        message,
        "spec.verify (commit signature verification) not supported by this controller yet"
    );
    env.stop().await;
}
