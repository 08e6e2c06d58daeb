//! `capstan check [--pre]`: is the cluster fit for Capstan, and is Capstan healthy in it?
//!
//! As `flux check`: `--pre` checks the Kubernetes version only (Flux's minimum, 1.33); without
//! it, also the controllers of the installation (labelled `app.kubernetes.io/part-of: capstan` in
//! the namespace: its Deployments, each Ready for its generation with all replicas updated and
//! ready, and the Pods no Deployment owns, as `capstan dev`'s, each `Ready`; waited for up to
//! `--timeout`) and Capstan's
//! CustomResourceDefinitions (present, established, serving the version Capstan reads). Every
//! check is printed (`✔`/`✗`); any failure makes the command fail at the end.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use crate::cmd::{ClusterArgs, say};
use crate::uninstall::PART_OF;

/// The oldest Kubernetes Capstan supports, as Flux's `flux check` constraint (`>=1.33.0-0`).
pub const MIN_KUBERNETES: (u64, u64) = (1, 33);

/// How often the Deployments are looked at while waiting for them.
const POLL: Duration = Duration::from_secs(2);

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Only run the pre-installation checks (the Kubernetes version).
    #[arg(long)]
    pub pre: bool,
    /// How long to wait for the controllers to become ready (Go duration).
    #[arg(long, default_value = "5m")]
    pub timeout: String,
}

/// Runs `capstan check`.
pub async fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let timeout = crate::cmd::duration_flag("timeout", &args.timeout)?;
    say::action("checking prerequisites");
    let client = args.cluster.client().await?;
    let mut ok = kubernetes(&client).await;
    if args.pre {
        if !ok {
            anyhow::bail!("prerequisites checks failed");
        }
        say::success("prerequisites checks passed");
        return Ok(ExitCode::SUCCESS);
    }
    say::action("checking controllers");
    ok &= controllers(&client, &args.cluster.namespace, timeout).await;
    say::action("checking crds");
    ok &= crds(&client).await;
    say::action("checking for Flux");
    ok &= no_flux(&client).await;
    if !ok {
        anyhow::bail!("check failed");
    }
    say::success("all checks passed");
    Ok(ExitCode::SUCCESS)
}

/// The Kubernetes version against [`MIN_KUBERNETES`].
async fn kubernetes(client: &Client) -> bool {
    let info = match client.apiserver_version().await {
        Ok(info) => info,
        Err(e) => {
            say::failure(&format!("Kubernetes API call failed: {e}"));
            return false;
        }
    };
    let Some((major, minor, version)) = parse_version(&info.git_version) else {
        say::failure(&format!(
            "Kubernetes version can't be determined from {:?}",
            info.git_version
        ));
        return false;
    };
    let constraint = format!(">={}.{}.0-0", MIN_KUBERNETES.0, MIN_KUBERNETES.1);
    if (major, minor) < MIN_KUBERNETES {
        say::failure(&format!(
            "Kubernetes version {version} does not match {constraint}"
        ));
        return false;
    }
    say::success(&format!("Kubernetes {version} {constraint}"));
    true
}

/// `v1.33.2-gke.1+abc` → major 1, minor 33 and the version without the `v`.
pub fn parse_version(git_version: &str) -> Option<(u64, u64, &str)> {
    let version = git_version.strip_prefix('v').unwrap_or(git_version);
    let core = version.split(['-', '+']).next()?;
    let mut parts = core.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor, version))
}

/// A controller of the installation: a Deployment, or a Pod that no Deployment owns (the
/// Pod `capstan dev` holds for its in-process controllers).
struct Controller {
    name: String,
    /// `deployment` or `pod`.
    what: &'static str,
    /// Why it is not ready, or `None`.
    unready: Option<String>,
    images: Vec<String>,
    version: Option<String>,
}

/// The controllers labelled `selector` in `namespace`: the Deployments, then the Pods that no
/// ReplicaSet (so no Deployment) owns.
async fn list_controllers(
    client: &Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<Controller>, String> {
    let params = ListParams::default().labels(selector);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deployments = deployments
        .list(&params)
        .await
        .map_err(|e| format!("listing Deployments in {namespace}: {e}"))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pods = pods
        .list(&params)
        .await
        .map_err(|e| format!("listing Pods in {namespace}: {e}"))?;
    let mut found: Vec<Controller> = deployments
        .iter()
        .map(|d| Controller {
            name: d.name_any(),
            what: "deployment",
            unready: unready(d),
            images: images(d),
            version: version_note(d.labels()),
        })
        .collect();
    found.extend(
        pods.iter()
            .filter(|pod| {
                !pod.owner_references()
                    .iter()
                    .any(|owner| owner.kind == "ReplicaSet")
            })
            .map(|pod| Controller {
                name: pod.name_any(),
                what: "pod",
                unready: unready(pod),
                images: pod
                    .spec
                    .iter()
                    .flat_map(|spec| spec.containers.iter().filter_map(|c| c.image.clone()))
                    .collect(),
                version: version_note(pod.labels()),
            }),
    );
    Ok(found)
}

/// Why a controller (a Deployment or a Pod) is not ready by kstatus' rules, the health checks'
/// [`capstan_apply::compute_health`] (a Pod or Deployment without a status is not ready), or
/// `None` when it is.
fn unready(object: &impl serde::Serialize) -> Option<String> {
    match serde_json::to_value(object) {
        Ok(value) => match capstan_apply::compute_health(&value) {
            (capstan_apply::Status::Current, _) => None,
            (_, message) => Some(message),
        },
        Err(e) => Some(format!("unreadable: {e}")),
    }
}

/// Every controller of the installation in `namespace` (its Deployments, or the Pods no
/// Deployment owns), waited for until ready.
async fn controllers(client: &Client, namespace: &str, timeout: Duration) -> bool {
    let selector = format!("{}={}", PART_OF.0, PART_OF.1);
    let start = Instant::now();
    loop {
        let list = match list_controllers(client, namespace, &selector).await {
            Ok(list) => list,
            Err(e) => {
                say::failure(&e);
                return false;
            }
        };
        if list.is_empty() {
            say::failure(&format!(
                "no controllers found in the '{namespace}' namespace with the label selector '{selector}'"
            ));
            return false;
        }
        let ready = list.iter().all(|c| c.unready.is_none());
        if ready || start.elapsed() >= timeout {
            for controller in &list {
                let (name, what) = (&controller.name, controller.what);
                match &controller.unready {
                    Some(why) => say::failure(&format!("{name}: {what} not ready: {why}")),
                    None => say::success(&format!("{name}: {what} ready")),
                }
                for image in &controller.images {
                    say::action(image);
                }
                if let Some(note) = &controller.version {
                    say::action(note);
                }
            }
            return ready;
        }
        tokio::time::sleep(POLL.min(timeout.saturating_sub(start.elapsed()))).await;
    }
}

/// The installed version (the `app.kubernetes.io/version` label `capstan install` sets), and
/// whether this CLI is another one.
fn version_note(labels: &std::collections::BTreeMap<String, String>) -> Option<String> {
    let installed = labels.get("app.kubernetes.io/version")?;
    let cli = crate::version::CLIENT_VERSION;
    Some(if installed == cli {
        format!("version {installed}")
    } else {
        format!(
            "version {installed}; this CLI is {cli}: `capstan install` upgrades the controllers"
        )
    })
}

/// The container images of a Deployment.
fn images(deployment: &Deployment) -> Vec<String> {
    deployment
        .spec
        .template
        .spec
        .as_ref()
        .map(|pod| {
            pod.containers
                .iter()
                .filter_map(|c| c.image.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// No Flux controllers anywhere in the cluster ([`crate::install::flux::detect_all`]): Flux's
/// and Capstan's controllers would fight over the same objects. Each installation found fails
/// the check, with its migration steps.
async fn no_flux(client: &Client) -> bool {
    match crate::install::flux::detect_all(client).await {
        Ok(found) if found.is_empty() => {
            say::success("no Flux controllers found");
            true
        }
        Ok(found) => {
            for flux in found {
                say::failure(flux.explain().trim_end());
            }
            false
        }
        Err(e) => {
            say::failure(&format!("looking for Flux: {e:#}"));
            false
        }
    }
}

/// Capstan's CustomResourceDefinitions: each present, established and serving the version
/// Capstan reads; printed as Flux does, `<name>/<stored version>`.
async fn crds(client: &Client) -> bool {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut ok = true;
    for expected in capstan_api::crds() {
        let name = expected.name_any();
        let found = match api.get_opt(&name).await {
            Ok(found) => found,
            Err(e) => {
                say::failure(&format!("reading CustomResourceDefinition {name}: {e}"));
                ok = false;
                continue;
            }
        };
        let Some(crd) = found else {
            say::failure(&format!(
                "CustomResourceDefinition {name} not found (run capstan install)"
            ));
            ok = false;
            continue;
        };
        if let Some(problem) = crd_problem(&expected, &crd) {
            say::failure(&format!("{name}: {problem}"));
            ok = false;
            continue;
        }
        let stored = crd
            .status
            .as_ref()
            .and_then(|s| s.stored_versions.as_ref())
            .and_then(|v| v.last().cloned())
            .or_else(|| {
                crd.spec
                    .versions
                    .iter()
                    .find(|v| v.storage)
                    .map(|v| v.name.clone())
            })
            .unwrap_or_default();
        say::success(&format!("{name}/{stored}"));
    }
    ok
}

/// What is wrong with an installed CRD compared with Capstan's own: a version Capstan serves
/// that the cluster does not, or the CRD not established.
fn crd_problem(
    expected: &CustomResourceDefinition,
    found: &CustomResourceDefinition,
) -> Option<String> {
    let served: Vec<&str> = found
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.as_str())
        .collect();
    let missing: Vec<&str> = expected
        .spec
        .versions
        .iter()
        .filter(|v| v.served && !served.contains(&v.name.as_str()))
        .map(|v| v.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "version(s) {} not served (served: {}); run capstan install to upgrade the CRDs",
            missing.join(", "),
            served.join(", ")
        ));
    }
    let established = found
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
    (!established).then(|| "not established".to_owned())
}

#[cfg(test)]
mod tests {
    use super::{parse_version, unready};
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Pod;

    #[test]
    fn controllers_without_a_status_are_not_ready() {
        let pod = |status: serde_json::Value| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "capstan-controller-0"}, "status": status,
            }))
            .unwrap()
        };
        assert!(unready(&pod(serde_json::json!(null))).is_some());
        assert!(unready(&pod(serde_json::json!({"phase": "Pending"}))).is_some());
        assert_eq!(
            unready(&pod(serde_json::json!({
                "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
            }))),
            None
        );
        let deployment: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "capstan-controller", "generation": 1},
            "spec": {"selector": {}, "template": {}},
        }))
        .unwrap();
        assert!(unready(&deployment).is_some());
    }

    #[test]
    fn kubernetes_versions_are_read_as_flux_reads_them() {
        assert_eq!(
            parse_version("v1.33.0-capstan.0.1.0"),
            Some((1, 33, "1.33.0-capstan.0.1.0"))
        );
        assert_eq!(parse_version("v1.30.4+k3s1"), Some((1, 30, "1.30.4+k3s1")));
        assert_eq!(parse_version("1.35.1"), Some((1, 35, "1.35.1")));
        assert_eq!(parse_version("garbage"), None);
    }
}
