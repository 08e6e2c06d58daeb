//! Detecting an existing Flux installation, and the way from it to Capstan.
//!
//! Capstan serves Flux's API groups and kinds and names its objects as Flux does, so it must not
//! run beside Flux's controllers: both would reconcile every GitRepository, Kustomization and
//! HelmRelease, overwrite each other's status and take each other's fields with forced
//! server-side apply. [`detect`] finds Flux by what its installs carry:
//!
//! - Deployments labelled `app.kubernetes.io/part-of: flux` (in any namespace), with the
//!   `app.kubernetes.io/instance` (the namespace `flux install` was given) and
//!   `app.kubernetes.io/version` labels of `flux install` and `flux bootstrap`;
//! - CustomResourceDefinitions labelled `app.kubernetes.io/part-of: flux` (the version label
//!   tells which Flux put them there);
//! - whether it was bootstrapped: `flux bootstrap` commits the install to
//!   `<path>/flux-system/gotk-components.yaml` and the `flux-system` Kustomization applies it, so
//!   the controllers carry that Kustomization's `kustomize.toolkit.fluxcd.io/name` and
//!   `…/namespace` labels.
//!
//! [`FluxInstallation::explain`] prints the migration, which differs for a bootstrapped
//! installation (Git owns the controllers there: deleting them in the cluster is undone by the next
//! sync, so the change goes through Git with `capstan bootstrap git`). docs/migrating-from-flux.md
//! is the long form.

use std::collections::BTreeMap;
use std::fmt;

use anyhow::Context;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client, ResourceExt};

/// The label Flux's install puts on every object: `app.kubernetes.io/part-of: flux`.
pub const PART_OF_FLUX: (&str, &str) = ("app.kubernetes.io/part-of", "flux");
/// `app.kubernetes.io/version`: the Flux version (`v2.7.3`).
pub const VERSION: &str = "app.kubernetes.io/version";
/// `app.kubernetes.io/managed-by`: set by Helm (`Helm`) or an operator when they own the install.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The label a Kustomization puts on what it applies: its name.
pub const KUSTOMIZATION_NAME: &str = "kustomize.toolkit.fluxcd.io/name";
/// The label a Kustomization puts on what it applies: its namespace.
pub const KUSTOMIZATION_NAMESPACE: &str = "kustomize.toolkit.fluxcd.io/namespace";
/// The namespaced kinds of Flux's components (`flux install`'s objects but the CRDs and the
/// namespace).
pub const NAMESPACED_KINDS: &str = "deployment,service,serviceaccount,networkpolicy,resourcequota";
/// The cluster-scoped kinds of Flux's components but the CRDs.
pub const CLUSTER_KINDS: &str = "clusterrole,clusterrolebinding";
/// The page that explains the migration at length.
pub const DOC: &str = "docs/migrating-from-flux.md";

/// A Flux controller: one Deployment labelled `app.kubernetes.io/part-of: flux`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FluxController {
    pub name: String,
    /// `spec.replicas` (1 when unset); 0 once scaled down.
    pub replicas: i32,
    /// Its `app.kubernetes.io/version` label.
    pub version: Option<String>,
}

/// The Kustomization that applies Flux's own components (`flux bootstrap`'s `flux-system`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FluxBootstrap {
    pub namespace: String,
    pub name: String,
    /// The Kustomization's `spec.path` (`./clusters/NAME`), when it could be read.
    pub path: Option<String>,
    /// The GitRepository it reads (`spec.sourceRef`), its `spec.url` and `spec.ref.branch`.
    pub url: Option<String>,
    pub branch: Option<String>,
}

/// A Flux installation: the controllers found in one namespace, with what tells how it was
/// installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FluxInstallation {
    /// The namespace of the controllers.
    pub namespace: String,
    /// The controllers, by name.
    pub controllers: Vec<FluxController>,
    /// The Flux version (the controllers' most common `app.kubernetes.io/version`), if labelled.
    pub version: Option<String>,
    /// Set when the controllers were applied by a Kustomization (`flux bootstrap`).
    pub bootstrap: Option<FluxBootstrap>,
    /// Who else manages the controllers (`app.kubernetes.io/managed-by`: `Helm`, an operator).
    pub managed_by: Option<String>,
    /// CustomResourceDefinitions labelled `part-of: flux`, by name.
    pub crds: Vec<String>,
    /// Of [`Self::crds`], those Capstan does not ship (the image automation kinds, source-watcher's):
    /// `capstan install` leaves them alone, but a Kustomization pruning Flux's components
    /// would delete them and every object of their kinds.
    pub foreign_crds: Vec<String>,
}

/// Every Flux installation in the cluster, one per namespace holding Flux's controllers (the
/// installation's own namespace first when several), or none. CRDs labelled as Flux's without
/// any controller are not an installation (what a migration leaves; `capstan install` takes them
/// over).
///
/// # Errors
/// Listing Deployments or CRDs fails (other than for lack of the kind).
pub async fn detect_all(client: &Client) -> anyhow::Result<Vec<FluxInstallation>> {
    let selector = format!("{}={}", PART_OF_FLUX.0, PART_OF_FLUX.1);
    let params = ListParams::default().labels(&selector);
    let deployments: Api<Deployment> = Api::all(client.clone());
    let deployments = deployments
        .list(&params)
        .await
        .with_context(|| format!("listing Deployments labelled {selector}"))?;
    let mut by_namespace: BTreeMap<String, Vec<Deployment>> = BTreeMap::new();
    for deployment in deployments {
        by_namespace
            .entry(deployment.namespace().unwrap_or_default())
            .or_default()
            .push(deployment);
    }
    if by_namespace.is_empty() {
        return Ok(Vec::new());
    }
    let (crds, foreign_crds) = flux_crds(client).await?;
    let mut found = Vec::new();
    for (namespace, deployments) in by_namespace {
        let mut installation = installation(namespace, &deployments);
        installation.crds.clone_from(&crds);
        installation.foreign_crds.clone_from(&foreign_crds);
        if let Some(bootstrap) = &mut installation.bootstrap {
            read_sync(client, bootstrap).await;
        }
        found.push(installation);
    }
    // The namespace named by the instance label of its own controllers first.
    found.sort_by_key(|i| i.namespace != "flux-system");
    Ok(found)
}

/// The Flux installation in the cluster (the first of [`detect_all`]), or `None`.
///
/// # Errors
/// As [`detect_all`].
pub async fn detect(client: &Client) -> anyhow::Result<Option<FluxInstallation>> {
    Ok(detect_all(client).await?.into_iter().next())
}

/// The CRDs labelled `part-of: flux`: all of them, and those Capstan does not ship.
///
/// # Errors
/// Listing CRDs fails.
pub async fn flux_crds(client: &Client) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let selector = format!("{}={}", PART_OF_FLUX.0, PART_OF_FLUX.1);
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default().labels(&selector))
        .await
        .with_context(|| format!("listing CustomResourceDefinitions labelled {selector}"))?;
    let ours: Vec<String> = capstan_api::crds()
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    let mut all: Vec<String> = list.iter().map(ResourceExt::name_any).collect();
    all.sort();
    let foreign = all.iter().filter(|n| !ours.contains(n)).cloned().collect();
    Ok((all, foreign))
}

/// The installation made of `deployments` (all in `namespace`).
fn installation(namespace: String, deployments: &[Deployment]) -> FluxInstallation {
    let mut controllers: Vec<FluxController> = deployments
        .iter()
        .map(|d| FluxController {
            name: d.name_any(),
            replicas: d.spec.replicas.unwrap_or(1),
            version: d.labels().get(VERSION).cloned(),
        })
        .collect();
    controllers.sort_by(|a, b| a.name.cmp(&b.name));
    let mut versions: BTreeMap<&str, usize> = BTreeMap::new();
    for version in controllers.iter().filter_map(|c| c.version.as_deref()) {
        *versions.entry(version).or_default() += 1;
    }
    let version = versions
        .iter()
        .max_by_key(|(_, count)| **count)
        .map(|(version, _)| (*version).to_owned());
    let bootstrap = deployments.iter().find_map(|d| {
        let labels = d.labels();
        let name = labels.get(KUSTOMIZATION_NAME)?;
        Some(FluxBootstrap {
            namespace: labels
                .get(KUSTOMIZATION_NAMESPACE)
                .cloned()
                .unwrap_or_else(|| namespace.clone()),
            name: name.clone(),
            path: None,
            url: None,
            branch: None,
        })
    });
    let managed_by = deployments
        .iter()
        .find_map(|d| d.labels().get(MANAGED_BY).cloned());
    FluxInstallation {
        namespace,
        controllers,
        version,
        bootstrap,
        managed_by,
        crds: Vec::new(),
        foreign_crds: Vec::new(),
    }
}

/// Fills the path and source of the bootstrap Kustomization; what cannot be read stays `None`
/// (the explanation then names placeholders).
async fn read_sync(client: &Client, bootstrap: &mut FluxBootstrap) {
    let kustomization = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kustomize.toolkit.fluxcd.io", "v1", "Kustomization"),
        "kustomizations",
    );
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &bootstrap.namespace, &kustomization);
    let Ok(Some(object)) = api.get_opt(&bootstrap.name).await else {
        return;
    };
    let spec = &object.data["spec"];
    bootstrap.path = spec["path"].as_str().map(str::to_owned);
    if spec["sourceRef"]["kind"] != "GitRepository" {
        return;
    }
    let Some(source) = spec["sourceRef"]["name"].as_str() else {
        return;
    };
    let source_namespace = spec["sourceRef"]["namespace"]
        .as_str()
        .unwrap_or(&bootstrap.namespace)
        .to_owned();
    let git = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("source.toolkit.fluxcd.io", "v1", "GitRepository"),
        "gitrepositories",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &source_namespace, &git);
    if let Ok(Some(object)) = api.get_opt(source).await {
        let spec = &object.data["spec"];
        bootstrap.url = spec["url"].as_str().map(str::to_owned);
        bootstrap.branch = spec["ref"]["branch"].as_str().map(str::to_owned);
    }
}

impl FluxInstallation {
    /// The names of the controllers, comma-separated.
    #[must_use]
    pub fn controller_names(&self) -> String {
        self.controllers
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether every controller is scaled to zero.
    #[must_use]
    pub fn stopped(&self) -> bool {
        self.controllers.iter().all(|c| c.replicas == 0)
    }

    /// The migration steps for this installation, numbered, as the commands to run.
    #[must_use]
    pub fn explain(&self) -> String {
        let namespace = &self.namespace;
        let selector = format!("{}={}", PART_OF_FLUX.0, PART_OF_FLUX.1);
        let mut steps: Vec<String> = Vec::new();
        if let Some(manager) = &self.managed_by {
            steps.push(format!(
                "the controllers are managed by {manager} (label {MANAGED_BY}): stop it from \
                 recreating them first (for Helm: remove the release's Deployments from the chart \
                 or `helm uninstall` with the CRDs kept, as the chart's docs say)"
            ));
        }
        if let Some(sync) = &self.bootstrap
            && !self.foreign_crds.is_empty()
        {
            steps.push(format!(
                "kubectl annotate crd {} kustomize.toolkit.fluxcd.io/prune=disabled\n     \
                 (Capstan does not ship these CRDs: without this, the Kustomization {}/{} \
                 prunes them, and every object of their kinds, once gotk-components.yaml is \
                 Capstan's)",
                self.foreign_crds.join(" "),
                sync.namespace,
                sync.name
            ));
        }
        steps.push(format!(
            "kubectl -n {namespace} delete {NAMESPACED_KINDS} -l {selector}\n     \
             kubectl delete {CLUSTER_KINDS} -l {selector}\n     (stops Flux and removes its \
             components but the CRDs and the namespace: its sources, Kustomizations, \
             HelmReleases and everything they deployed stay; not `flux uninstall`, which \
             deletes the CRDs and with them every Flux object)"
        ));
        match &self.bootstrap {
            None => {
                steps.push(format!(
                    "capstan install -n {namespace}\n     (takes over the CRDs; Capstan \
                     reconciles the existing objects and adopts their inventories)"
                ));
            }
            Some(sync) => {
                let url = sync
                    .url
                    .as_deref()
                    .unwrap_or("<the flux-system GitRepository's url>");
                let branch = sync.branch.as_deref().unwrap_or("<its branch>");
                let path = sync.path.as_deref().map_or_else(
                    || "<the Kustomization's spec.path>".to_owned(),
                    |p| p.trim_start_matches("./").trim_end_matches('/').to_owned(),
                );
                steps.push(format!(
                    "capstan bootstrap git --url {url} --branch {branch} --path {path}\n     \
                     (the same repository and path: commits Capstan's gotk-components.yaml and \
                     gotk-sync.yaml, then installs Capstan; the Kustomization {}/{}, now run by \
                     Capstan, keeps the CRDs, which both files hold, and prunes what of Flux's \
                     is left in its inventory)\n     \
                     or by hand: capstan install --export -n {namespace} > \
                     {path}/flux-system/gotk-components.yaml; commit and push it; then \
                     capstan install -n {namespace} (never before the push: Capstan would \
                     apply Flux's controllers back from Git)",
                    sync.namespace, sync.name
                ));
            }
        }
        steps.push("capstan check".to_owned());
        let mut lines = vec![self.to_string()];
        if let Some(sync) = &self.bootstrap {
            lines.push(format!(
                "It was bootstrapped: the Kustomization {}/{} applies it from Git, so \
                 Capstan's components must be in Git before Capstan runs (or it would apply \
                 Flux's controllers back).",
                sync.namespace, sync.name
            ));
        }
        lines.push("To migrate (Flux's objects and the workloads they deployed stay):".to_owned());
        for (index, step) in steps.iter().enumerate() {
            lines.push(format!("  {}. {step}", index + 1));
        }
        lines.push(format!("See {DOC}."));
        lines.join("\n") + "\n"
    }
}

impl fmt::Display for FluxInstallation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Flux")?;
        if let Some(version) = &self.version {
            write!(f, " {version}")?;
        }
        write!(
            f,
            " is installed in namespace {}: {} ({})",
            self.namespace,
            self.controller_names(),
            if self.stopped() {
                "scaled to zero"
            } else {
                "running"
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(name: &str, labels: &serde_json::Value, replicas: i32) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "flux-system", "labels": labels},
            "spec": {"replicas": replicas, "selector": {}, "template": {}},
        }))
        .unwrap()
    }

    #[test]
    fn an_installation_reads_its_version_and_bootstrap_from_the_labels() {
        let labels = serde_json::json!({
            "app.kubernetes.io/part-of": "flux",
            "app.kubernetes.io/instance": "flux-system",
            "app.kubernetes.io/version": "v2.7.3",
            "kustomize.toolkit.fluxcd.io/name": "flux-system",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
        });
        let found = installation(
            "flux-system".into(),
            &[
                deployment("source-controller", &labels, 1),
                deployment("kustomize-controller", &labels, 1),
            ],
        );
        assert_eq!(found.version.as_deref(), Some("v2.7.3"));
        assert_eq!(
            found.controller_names(),
            "kustomize-controller, source-controller"
        );
        assert!(!found.stopped());
        let sync = found.bootstrap.as_ref().unwrap();
        assert_eq!(
            (sync.namespace.as_str(), sync.name.as_str()),
            ("flux-system", "flux-system")
        );
        let text = found.explain();
        assert!(text.contains("capstan bootstrap git --url"), "{text}");
        assert!(text.contains("flux-system/gotk-components.yaml"), "{text}");
        assert!(!text.contains("2. capstan install"), "{text}");
        assert!(
            text.starts_with("Flux v2.7.3 is installed in namespace flux-system"),
            "{text}"
        );
    }

    #[test]
    fn an_installation_without_a_kustomization_label_is_migrated_in_the_cluster() {
        let labels = serde_json::json!({"app.kubernetes.io/part-of": "flux"});
        let found = installation(
            "gitops".into(),
            &[deployment("source-controller", &labels, 0)],
        );
        assert!(found.stopped());
        assert_eq!(found.version, None);
        let text = found.explain();
        assert!(
            text.contains(
                "kubectl -n gitops delete deployment,service,serviceaccount,networkpolicy,\
                 resourcequota -l app.kubernetes.io/part-of=flux"
            ),
            "{text}"
        );
        assert!(text.contains("capstan install -n gitops"), "{text}");
        assert!(!text.contains("bootstrap"), "{text}");
    }
}
