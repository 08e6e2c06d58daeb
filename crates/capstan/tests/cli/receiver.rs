//! Receivers as a user meets them: `capstan dev` prints where webhooks are served (and, with
//! the example fleet, the `curl` that reconciles it), `capstan create receiver` prints the
//! webhook path once the Receiver is Ready, and a `curl`-style POST to that URL annotates the
//! named object.

use std::path::Path;
use std::time::Duration;

use capstan_testkit::{Run, eventually, http_client};

use crate::support::{Dev, capstan, capstan_command, kubectl, spawn_dev};

#[tokio::test]
async fn create_receiver_then_post_to_the_url_capstan_dev_prints() {
    let dev = Dev::start(&[]).await;
    let base = dev
        .said
        .iter()
        .find_map(|line| {
            let rest = line.split("Receiver webhooks at ").nth(1)?;
            Some(rest.split("/hook/").next()?.to_owned())
        })
        .unwrap_or_else(|| panic!("no receiver address in {:?}", dev.said));
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    let home = dev.dir.path();
    kubectl(
        &dev.kubeconfig,
        home,
        &[
            "-n",
            "flux-system",
            "create",
            "secret",
            "generic",
            "webhook-token",
            "--from-literal=token=a-token-of-this-test",
        ],
    )
    .await
    .ok();
    let source = home.join("source.yaml");
    std::fs::write(
        &source,
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: app\n  \
         namespace: flux-system\nspec:\n  url: http://127.0.0.1:9/none.git\n  interval: 1h\n  \
         suspend: true\n",
    )
    .unwrap();
    kubectl(
        &dev.kubeconfig,
        home,
        &["apply", "-f", source.to_str().unwrap()],
    )
    .await
    .ok();

    let created: Run = capstan(
        &dev.kubeconfig,
        &[
            "create",
            "receiver",
            "hook",
            "-n",
            "flux-system",
            "--type",
            "generic",
            "--secret-ref",
            "webhook-token",
            "--resource",
            "GitRepository/app",
            "--timeout",
            "30s",
        ],
    )
    .output()
    .await
    .unwrap()
    .into();
    let created = created.ok();
    let said = format!("{}{}", created.stdout, created.stderr);
    let path = said
        .split("generated webhook URL ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no webhook URL in {said}"))
        .to_owned();
    assert!(path.starts_with("/hook/") && path.len() == 6 + 64, "{path}");
    assert!(!said.contains("a-token-of-this-test"), "{said}");

    let status = http_client()
        .post(format!("{base}{path}"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 200);
    eventually(
        Duration::from_secs(10),
        "the requestedAt annotation",
        || {
            let (kubeconfig, home) = (dev.kubeconfig.clone(), home.to_owned());
            async move {
                let said = reconcile_request(&kubeconfig, &home, "app").await;
                (!said.split(' ').next()?.is_empty()).then_some(())
            }
        },
    )
    .await;
}

/// `<requestedAt annotation> <status.lastHandledReconcileAt>` of the GitRepository `name` in
/// `flux-system`.
async fn reconcile_request(kubeconfig: &Path, home: &Path, name: &str) -> String {
    let run = kubectl(
        kubeconfig,
        home,
        &[
            "-n",
            "flux-system",
            "get",
            "gitrepository",
            name,
            "-o",
            "jsonpath={.metadata.annotations.reconcile\\.fluxcd\\.io/requestedAt} \
             {.status.lastHandledReconcileAt}",
        ],
    )
    .await;
    run.stdout.trim_end().to_owned()
}

#[tokio::test]
async fn capstan_dev_prints_the_example_receivers_curl_and_it_reconciles_the_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (_child, said) = spawn_dev(
        capstan_command()
            .args([
                "dev",
                "--listen",
                "127.0.0.1:0",
                "--storage-addr",
                "127.0.0.1:0",
                "--git-listen",
                "127.0.0.1:0",
                "--registry-listen",
                "127.0.0.1:0",
                "--kubeconfig",
            ])
            .arg(&kubeconfig)
            .arg("--storage-path")
            .arg(dir.path().join("artifacts"))
            .arg("--git-root")
            .arg(dir.path().join("git"))
            .arg("--registry-root")
            .arg(dir.path().join("registry")),
        None,
    )
    .await;
    let url = said
        .iter()
        .find_map(|line| Some(line.split("curl -X POST ").nth(1)?.trim().to_owned()))
        .unwrap_or_else(|| panic!("no curl line in {said:?}"));
    let home = dir.path();
    // The Receiver is Ready (its path served) once the controller reconciled it.
    eventually(
        Duration::from_secs(30),
        "the example Receiver served",
        || {
            let url = url.clone();
            async move {
                let status = http_client().post(&url).send().await.ok()?.status();
                (status.as_u16() == 200).then_some(())
            }
        },
    )
    .await;
    eventually(
        Duration::from_secs(15),
        "the fleet reconciled on request",
        || {
            let (kubeconfig, home) = (kubeconfig.clone(), home.to_owned());
            async move {
                let said = reconcile_request(&kubeconfig, &home, "fleet").await;
                let (requested, last) = said.split_once(' ')?;
                (!requested.is_empty() && requested == last).then_some(())
            }
        },
    )
    .await;
}
