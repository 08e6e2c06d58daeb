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
    match condition(object, "Ready") {
        Some(c) if c["status"] == "True" => Ok(()),
        Some(c) => Err(c["message"].as_str().unwrap_or("not ready").to_owned()),
        None => Err("not reconciled yet".to_owned()),
    }
}

/// Asks for an immediate reconcile (`reconcile.fluxcd.io/requestedAt`, as `flux reconcile`);
/// returns the token, which the controller echoes in `status.lastHandledReconcileAt` once a
/// reconcile that saw it has finished.
async fn request(api: &Api<DynamicObject>) -> anyhow::Result<String> {
    let now = jiff::Timestamp::now().to_string();
    let patch = json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": now}}});
    api.patch(SYNC_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("requesting a reconcile of {SYNC_NAME}"))?;
    Ok(now)
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == type_))
}

/// Why waiting for `object` is pointless, as Flux's bootstrap stops: it is suspended, it is
/// `Stalled`, or the reconcile asked for with `token` has finished and left it `Ready=False`
/// (the message is the controller's).
fn terminal(object: &Value, kind: &str, namespace: &str, token: Option<&str>) -> Option<String> {
    if object["spec"]["suspend"] == true {
        return Some(format!("{kind} '{namespace}/{SYNC_NAME}' is suspended"));
    }
    let message = |c: &Value| {
        format!(
            "{kind} '{namespace}/{SYNC_NAME}' failed: {}",
            c["message"].as_str().unwrap_or_default()
        )
    };
    if let Some(stalled) = condition(object, "Stalled").filter(|c| c["status"] == "True") {
        return Some(message(stalled));
    }
    let handled = token.is_some()
        && object["status"]["lastHandledReconcileAt"].as_str() == token
        && object["status"]["observedGeneration"] == object["metadata"]["generation"];
    condition(object, "Ready")
        .filter(|c| handled && c["status"] == "False")
        .map(message)
}

/// Waits until the `flux-system` object of `api` is Ready and `at(object)` says it reached
/// the revision; fails at once when [`terminal`].
async fn ready_at(
    api: &Api<DynamicObject>,
    (kind, namespace): (&str, &str),
    token: Option<&str>,
    timeout: Duration,
    what: &str,
    at: impl Fn(&Value) -> Result<(), String>,
) -> anyhow::Result<()> {
    until(timeout, what, || async {
        let object = serde_json::to_value(api.get(SYNC_NAME).await?)?;
        if let Some(reason) = terminal(&object, kind, namespace, token) {
            anyhow::bail!(reason);
        }
        Ok(ready(&object).and_then(|()| at(&object)))
    })
    .await
}

/// Waits until the GitRepository `flux-system` has the artifact of `revision` and the
/// Kustomization `flux-system` applied it, both Ready. When they are not there yet, asks the
/// GitRepository to reconcile, and the Kustomization only once the GitRepository's artifact
/// is at `revision`: a Kustomization reconciled earlier would apply the previous artifact,
/// whose `gotk-sync.yaml` may restore a previous URL (so a re-run at the same revision writes
/// nothing, and a re-run with another URL converges). Stops at once on a suspended,
/// stalled or failed object, with its message.
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
    let token = if applied {
        None
    } else {
        Some(request(&source).await?)
    };
    out.waiting(&format!(
        "waiting for GitRepository \"{namespace}/{SYNC_NAME}\" to be reconciled"
    ));
    let what = format!("GitRepository {namespace}/{SYNC_NAME} to fetch {revision}");
    ready_at(
        &source,
        ("GitRepository", namespace),
        token.as_deref(),
        timeout,
        &what,
        |object| {
            let fetched = object["status"]["artifact"]["revision"]
                .as_str()
                .unwrap_or_default();
            if fetched == revision {
                Ok(())
            } else {
                Err(format!("its artifact is at revision '{fetched}'"))
            }
        },
    )
    .await?;
    out.success("GitRepository reconciled successfully");
    let current = serde_json::to_value(kustomization.get(SYNC_NAME).await?)?;
    let token = if current["status"]["lastAppliedRevision"] == revision {
        None
    } else {
        Some(request(&kustomization).await?)
    };
    out.waiting(&format!(
        "waiting for Kustomization \"{namespace}/{SYNC_NAME}\" to be reconciled"
    ));
    let what = format!("Kustomization {namespace}/{SYNC_NAME} to apply {revision}");
    ready_at(
        &kustomization,
        ("Kustomization", namespace),
        token.as_deref(),
        timeout,
        &what,
        |object| {
            let applied = object["status"]["lastAppliedRevision"]
                .as_str()
                .unwrap_or_default();
            if applied == revision {
                Ok(())
            } else {
                Err(format!("the last applied revision is '{applied}'"))
            }
        },
    )
    .await?;
    out.success("Kustomization reconciled successfully");
    Ok(())
}
