//! Hostile-input cases: the build. What a pusher to the Git repository can write into the
//! kustomizations and manifests a Kustomization builds, or into `spec.components` and a
//! `substituteFrom` Secret: paths leading out of the artifact (directories, components, files,
//! links), manifests that do not parse in a pruned path, values that break the YAML after
//! substitution. Each case asserts the refusal, that nothing from the controller's filesystem
//! reached the cluster or a message, and that nothing already applied was lost.

use std::path::{Path, PathBuf};
use std::time::Duration;

use capstan_api::Kustomization;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::kustomize_support::{
    NAMESPACE, create_kustomization, inventory_ids, kustomizations, request_reconcile, setup,
    wait_ready, wait_source_revision,
};
use crate::support::{Env, eventually};

/// Content only the controller's own filesystem holds: it must never reach a message or the
/// cluster.
const HOST_MARKER: &str = "host-only-4d1c9";

/// The manifests stand-in for the controller's filesystem: a kustomization directory, a
/// component and a file, in a temporary directory outside any artifact.
fn host_tree() -> tempfile::TempDir {
    let host = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = host.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let stolen = |name: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\ndata:\n  secret: {HOST_MARKER}\n"
        )
    };
    write("dir/kustomization.yaml", "resources: [cm.yaml]\n");
    write("dir/cm.yaml", &stolen("stolen-dir"));
    write(
        "component/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [cm.yaml]\ncommonLabels:\n  stolen: \"yes\"\n",
    );
    write("component/cm.yaml", &stolen("stolen-component"));
    host
}

/// `path` (absolute) written as a relative path climbing out of any artifact directory:
/// enough `../` to reach `/` from wherever the controller extracts it.
fn climb(path: &Path) -> String {
    let relative = path.strip_prefix("/").unwrap().display();
    format!("{}{relative}", "../".repeat(32))
}

fn config_map(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\ndata:\n  env: dev\n"
    )
}

fn config_maps(env: &Env) -> Api<ConfigMap> {
    Api::namespaced(env.client.clone(), NAMESPACE)
}

/// Names of the ConfigMaps in the namespace.
async fn config_map_names(env: &Env) -> Vec<String> {
    config_maps(env)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect()
}

/// Every Event of the namespace (core and `events.k8s.io`), as text.
async fn events_text(env: &Env) -> String {
    let core: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(env.client.clone(), NAMESPACE);
    let new: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(env.client.clone(), NAMESPACE);
    let mut text = String::new();
    if let Ok(list) = core.list(&ListParams::default()).await {
        text.push_str(&serde_json::to_string(&list.items).unwrap());
    }
    if let Ok(list) = new.list(&ListParams::default()).await {
        text.push_str(&serde_json::to_string(&list.items).unwrap());
    }
    text
}

/// Waits for `name` to be Ready=False with a message containing `expected`, and returns the
/// message after checking it shows neither host content nor the controller's own paths.
async fn refused(env: &Env, name: &str, expected: &str) -> String {
    let object = wait_ready(env, name, expected, |status, _, message| {
        status == "False" && message.contains(expected)
    })
    .await;
    let message = crate::kustomize_support::ready(&object).unwrap().2;
    assert!(!message.contains(HOST_MARKER), "{name}: {message}");
    assert!(
        !message.contains("capstan-kustomization-") && !message.contains("/source/"),
        "{name}: the controller's paths show: {message}"
    );
    assert!(
        object
            .status
            .as_ref()
            .and_then(|s| s.inventory.as_ref())
            .is_none_or(|i| i.entries.is_empty()),
        "{name}: something was applied"
    );
    message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_leading_out_of_the_artifact_are_refused_and_nothing_is_applied() {
    let host = host_tree();
    let dir = climb(&host.path().join("dir"));
    let component = climb(&host.path().join("component"));
    let file = climb(&host.path().join("dir/cm.yaml"));
    let absolute = host.path().join("dir").display().to_string();
    let cases = [
        ("dir", format!("resources: [cm.yaml, {dir}]\n")),
        (
            "component",
            format!("resources: [cm.yaml]\ncomponents: [{component}]\n"),
        ),
        ("spec-component", "resources: [cm.yaml]\n".to_owned()),
        ("file", format!("resources: [cm.yaml, {file}]\n")),
        ("absolute", format!("resources: [cm.yaml, {absolute}]\n")),
        (
            "generator",
            format!("resources: [cm.yaml]\nconfigMapGenerator:\n- name: g\n  files: [{file}]\n"),
        ),
        (
            "patch",
            format!("resources: [cm.yaml]\npatches:\n- path: {file}\n"),
        ),
    ];
    let mut files: Vec<(String, String)> = Vec::new();
    for (name, text) in &cases {
        files.push((format!("{name}/kustomization.yaml"), text.clone()));
        files.push((
            format!("{name}/cm.yaml"),
            config_map(&format!("settings-{name}")),
        ));
    }
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_str()))
        .collect();
    let (env, _upstream, _controller, _) = setup(&borrowed).await;
    for (name, _) in &cases {
        let mut spec = json!({"path": format!("./{name}"), "prune": true});
        if *name == "spec-component" {
            spec["components"] = json!([component]);
        }
        create_kustomization(&env, name, spec).await;
    }
    for (name, _) in &cases {
        let message = refused(&env, name, "outside the root of the source").await;
        assert!(message.contains("refused"), "{name}: {message}");
    }
    let live = config_map_names(&env).await;
    assert!(
        !live
            .iter()
            .any(|n| n.starts_with("stolen") || n.starts_with("settings-")),
        "applied: {live:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refusal_reads_the_same_whether_the_outside_path_exists() {
    let host = host_tree();
    let dir = climb(&host.path().join("dir"));
    let kustomization = format!("resources: [cm.yaml, {dir}]\n");
    let (env, _upstream, _controller, _) = setup(&[
        ("apps/kustomization.yaml", kustomization.as_str()),
        ("apps/cm.yaml", &config_map("settings")),
    ])
    .await;
    create_kustomization(&env, "present", json!({"path": "./apps"})).await;
    let present = refused(&env, "present", "outside the root of the source").await;
    std::fs::remove_dir_all(host.path().join("dir")).unwrap();
    create_kustomization(&env, "absent", json!({"path": "./apps"})).await;
    let absent = refused(&env, "absent", "outside the root of the source").await;
    assert_eq!(
        present, absent,
        "the message tells whether the host path exists"
    );
    assert!(
        !config_map_names(&env)
            .await
            .contains(&"settings".to_owned())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_committed_to_git_never_reach_the_build() {
    let host = host_tree();
    let (env, upstream, _controller, _) = setup(&[
        (
            "apps/kustomization.yaml",
            "resources: [cm.yaml, link.yaml, linkdir]\n",
        ),
        ("apps/cm.yaml", &config_map("settings")),
    ])
    .await;
    let work = upstream.work();
    std::os::unix::fs::symlink(host.path().join("dir/cm.yaml"), work.join("apps/link.yaml"))
        .unwrap();
    std::os::unix::fs::symlink(host.path().join("dir"), work.join("apps/linkdir")).unwrap();
    let commit = upstream.commit_all("links out");
    request_reconcile(&env.git_repositories(NAMESPACE), "repo", "links").await;
    wait_source_revision(&env, &format!("main@sha1:{commit}")).await;
    create_kustomization(&env, "links", json!({"path": "./apps"})).await;
    // The artifact leaves links out (as Flux does), so the kustomization names missing files.
    let message = refused(&env, "links", "link.yaml").await;
    assert!(
        !message.contains(&host.path().display().to_string()),
        "{message}"
    );
    let live = config_map_names(&env).await;
    assert!(
        !live
            .iter()
            .any(|n| n == "settings" || n.starts_with("stolen")),
        "{live:?}"
    );
}

/// `capstan build kustomization` renders a local directory, where links are kept: the same
/// boundary holds there.
#[test]
fn links_out_of_a_local_source_are_refused_by_the_cli_render() {
    let host = host_tree();
    let source = tempfile::tempdir().unwrap();
    let apps = source.path().join("apps");
    std::fs::create_dir_all(&apps).unwrap();
    std::fs::write(apps.join("cm.yaml"), config_map("settings")).unwrap();
    let object: Kustomization = serde_json::from_value(json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "local", "namespace": NAMESPACE},
        "spec": {"interval": "1m", "prune": true, "path": "./apps",
                 "sourceRef": {"kind": "GitRepository", "name": "repo"}},
    }))
    .unwrap();
    let render = || {
        capstan_controllers::kustomization::render_local(source.path(), &object, None)
            .map_err(|e| capstan_source::redact::error_chain(&e))
    };
    let link = |target: PathBuf, name: &str| {
        let path = apps.join(name);
        let _ = std::fs::remove_file(&path);
        std::os::unix::fs::symlink(target, path).unwrap();
    };
    let host_path = host.path().display().to_string();
    let mut messages = Vec::new();
    // A plain directory (generated kustomization) with a link to a host file, existing or not.
    for target in ["dir/cm.yaml", "dir/missing.yaml"] {
        link(host.path().join(target), "link.yaml");
        let error = render().unwrap_err();
        assert!(
            error.contains("'link.yaml'") && error.contains("outside the source"),
            "{error}"
        );
        assert!(
            !error.contains(HOST_MARKER) && !error.contains(&host_path),
            "{error}"
        );
        messages.push(error);
    }
    assert_eq!(messages[0], messages[1]);
    std::fs::remove_file(apps.join("link.yaml")).unwrap();
    // A kustomization naming a linked directory out.
    link(host.path().join("dir"), "linkdir");
    std::fs::write(
        apps.join("kustomization.yaml"),
        "resources: [cm.yaml, linkdir]\n",
    )
    .unwrap();
    let error = render().unwrap_err();
    assert!(error.contains("outside the root of the source"), "{error}");
    assert!(
        !error.contains(HOST_MARKER) && !error.contains(&host_path),
        "{error}"
    );
    // A kustomization file that is a dangling link out: never written through.
    std::fs::remove_file(apps.join("kustomization.yaml")).unwrap();
    std::fs::remove_file(apps.join("linkdir")).unwrap();
    link(host.path().join("planted.yaml"), "kustomization.yaml");
    let error = render().unwrap_err();
    assert!(error.contains("kustomization.yaml"), "{error}");
    assert!(
        !host.path().join("planted.yaml").exists(),
        "the render wrote on the host"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_that_no_longer_parses_fails_the_build_and_prunes_nothing() {
    let (env, upstream, _controller, first) = setup(&[
        ("apps/settings.yaml", &config_map("settings")),
        ("apps/other.yaml", &config_map("other")),
    ])
    .await;
    create_kustomization(&env, "apps", json!({"path": "./apps", "prune": true})).await;
    let applied = wait_ready(&env, "apps", "the first apply", |status, _, _| {
        status == "True"
    })
    .await;
    let inventory = inventory_ids(&applied);
    assert_eq!(inventory.len(), 2, "{inventory:?}");
    let broken = [
        // A duplicate key, and `${VAR}` inside a flow mapping.
        "apiVersion: v1\nkind: ConfigMap\nkind: ConfigMap\nmetadata:\n  name: other\n  namespace: apps\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: apps}\ndata: {env: ${ENV}}\n",
    ];
    for (round, text) in broken.into_iter().enumerate() {
        let commit = upstream.commit(&[("apps/other.yaml", text)], "a typo");
        request_reconcile(
            &env.git_repositories(NAMESPACE),
            "repo",
            &format!("typo-{round}"),
        )
        .await;
        wait_source_revision(&env, &format!("main@sha1:{commit}")).await;
        let revision = format!("main@sha1:{commit}");
        let failed = eventually(Duration::from_secs(40), "the build failure", || {
            let api = kustomizations(&env);
            let revision = revision.clone();
            async move {
                api.get("apps").await.ok().filter(|o| {
                    o.status
                        .as_ref()
                        .and_then(|s| s.last_attempted_revision.as_deref())
                        == Some(revision.as_str())
                        && crate::kustomize_support::ready(o).is_some_and(|r| r.0 == "False")
                })
            }
        })
        .await;
        let message = crate::kustomize_support::ready(&failed).unwrap().2;
        assert!(
            message.contains("failed to decode Kubernetes YAML from 'other.yaml'"),
            "{message}"
        );
        assert_eq!(inventory_ids(&failed), inventory, "the inventory shrank");
        assert_eq!(
            failed
                .status
                .as_ref()
                .unwrap()
                .last_applied_revision
                .as_deref(),
            Some(format!("main@sha1:{first}").as_str())
        );
        let live = config_map_names(&env).await;
        assert!(
            live.contains(&"settings".to_owned()) && live.contains(&"other".to_owned()),
            "pruned: {live:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_value_breaking_the_yaml_is_never_shown() {
    let marker = "planted-7f3e2a";
    let (env, _upstream, _controller, _) = setup(&[(
        "apps/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: apps\ndata:\n  user: ${user}\n  password: ${password}\n",
    )])
    .await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NAMESPACE);
    for (name, value) in [
        ("colon", format!("{marker}: [unclosed")),
        ("newline", format!("x\n  {marker}: {{")),
        ("quote", format!("\"{marker}")),
    ] {
        let secret: Secret = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "stringData": {"user": "admin", "password": value},
        }))
        .unwrap();
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
        create_kustomization(
            &env,
            name,
            json!({"path": "./apps", "postBuild": {"substituteFrom": [{"kind": "Secret", "name": name}]}}),
        )
        .await;
        let object = wait_ready(
            &env,
            name,
            "the substitution failure",
            |status, _, message| status == "False" && message.contains("ConfigMap/apps/settings"),
        )
        .await;
        let message = crate::kustomize_support::ready(&object).unwrap().2;
        assert!(!message.contains(marker), "{name}: {message}");
        assert!(message.contains("${password}"), "{name}: {message}");
        assert!(message.contains("line "), "{name}: {message}");
    }
    let events = events_text(&env).await;
    assert!(
        !events.contains(marker),
        "an Event shows the value: {events}"
    );
    let statuses = serde_json::to_string(
        &kustomizations(&env)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items,
    )
    .unwrap();
    assert!(!statuses.contains(marker), "a status shows the value");
    assert!(
        !config_map_names(&env)
            .await
            .contains(&"settings".to_owned())
    );
}
