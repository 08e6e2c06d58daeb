//! Waiting for the cluster to reconcile itself from Git at the pushed revision.

use std::future::Future;
use std::time::Duration;

use anyhow::Context;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use super::Progress;
use super::layout::SYNC_NAME;

/// Calls `check` every second until it says `Ok(())`; after `timeout`, fails with `what` and
/// the last reason `check` gave.
pub async fn until<F, Fut>(timeout: Duration, what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Result<(), String>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = match check().await? {
            Ok(()) => return Ok(()),
            Err(reason) => reason,
        };
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "timed out after {} waiting for {what}: {last}",
            capstan_api::format_go_duration(timeout)
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn api(
    client: &kube::Client,
    namespace: &str,
    group: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1", kind), plural);
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// The Ready condition: `Ok(())` when True, else its message.
fn ready(object: &Value) -> Result<(), String> {
    let condition = object["status"]["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Ready"));
    match condition {
        Some(c) if c["status"] == "True" => Ok(()),
        Some(c) => Err(c["message"].as_str().unwrap_or("not ready").to_owned()),
        None => Err("not reconciled yet".to_owned()),
    }
}

/// Asks for an immediate reconcile (`reconcile.fluxcd.io/requestedAt`, as `flux reconcile`).
async fn request(api: &Api<DynamicObject>) -> anyhow::Result<()> {
    let now = jiff::Timestamp::now().to_string();
    let patch = json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": now}}});
    api.patch(SYNC_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("requesting a reconcile of {SYNC_NAME}"))?;
    Ok(())
}

/// Waits until the GitRepository `flux-system` has the artifact of `revision` and the
/// Kustomization `flux-system` applied it, both Ready; asks them to reconcile when they are
/// not there yet (so a re-run at the same revision writes nothing).
pub async fn synced(
    client: &kube::Client,
    namespace: &str,
    revision: &str,
    timeout: Duration,
    out: &mut Progress,
) -> anyhow::Result<()> {
    let source = api(
        client,
        namespace,
        "source.toolkit.fluxcd.io",
        "GitRepository",
        "gitrepositories",
    );
    let kustomization = api(
        client,
        namespace,
        "kustomize.toolkit.fluxcd.io",
        "Kustomization",
        "kustomizations",
    );
    let current = kustomization.get(SYNC_NAME).await?;
    let applied = serde_json::to_value(&current)?["status"]["lastAppliedRevision"] == revision;
    if !applied {
        request(&source).await?;
        request(&kustomization).await?;
    }
    out.waiting(&format!(
        "waiting for GitRepository \"{namespace}/{SYNC_NAME}\" to be reconciled"
    ));
    let what = format!("GitRepository {namespace}/{SYNC_NAME} to fetch {revision}");
    until(timeout, &what, || async {
        let object = serde_json::to_value(source.get(SYNC_NAME).await?)?;
        let fetched = object["status"]["artifact"]["revision"]
            .as_str()
            .unwrap_or_default();
        Ok(ready(&object).and_then(|()| {
            if fetched == revision {
                Ok(())
            } else {
                Err(format!("its artifact is at revision '{fetched}'"))
            }
        }))
    })
    .await?;
    out.success("GitRepository reconciled successfully");
    out.waiting(&format!(
        "waiting for Kustomization \"{namespace}/{SYNC_NAME}\" to be reconciled"
    ));
    let what = format!("Kustomization {namespace}/{SYNC_NAME} to apply {revision}");
    until(timeout, &what, || async {
        let object = serde_json::to_value(kustomization.get(SYNC_NAME).await?)?;
        let applied = object["status"]["lastAppliedRevision"]
            .as_str()
            .unwrap_or_default();
        Ok(ready(&object).and_then(|()| {
            if applied == revision {
                Ok(())
            } else {
                Err(format!("the last applied revision is '{applied}'"))
            }
        }))
    })
    .await?;
    out.success("Kustomization reconciled successfully");
    Ok(())
}
