//! `capstan uninstall`: removes Capstan from a cluster and leaves what it deployed in place.
//!
//! The order is Flux's (`flux uninstall`): the installed components first (so that no controller
//! acts on what follows), then the finalizers of every custom object of Capstan's kinds in all
//! namespaces, the objects themselves, the CustomResourceDefinitions and, unless
//! `--keep-namespace`, the namespace. With the finalizers gone no controller cleanup runs: a
//! Kustomization's objects and a HelmRelease's release stay in the cluster.
//!
//! When Capstan remains installed in another namespace (a Deployment labelled
//! `app.kubernetes.io/part-of: capstan` elsewhere), only this installation's components go: that
//! installation reconciles every namespace with the same CRDs, so the CRDs and every custom
//! object stay, and so does the namespace if it holds any of them.
//!
//! Controllers may still be running while this happens (a Deployment being terminated, or
//! `capstan dev`'s in-process controllers): one could put its finalizer back between our two
//! writes and then prune on the deletion. So an object is deleted only with a `resourceVersion`
//! precondition equal to the version this command left without finalizers; any change in between
//! fails the deletion (409) and the object is read and stripped again.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
    Preconditions,
};
use kube::{Api, Client, ResourceExt};

use crate::cmd::{ClusterArgs, say};
use crate::install::manifests::{self, INSTANCE};

/// The label every installed object carries: `app.kubernetes.io/part-of: capstan`.
pub const PART_OF: (&str, &str) = (manifests::PART_OF, "capstan");

/// How many times one object is stripped of its finalizers and deleted before giving up (each
/// retry follows a write by someone else).
const ATTEMPTS: usize = 10;

#[derive(Debug, Args)]
pub struct UninstallArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Keep the namespace Capstan is installed in.
    #[arg(long)]
    pub keep_namespace: bool,
    /// Only print what would be deleted (every write is sent as a server-side dry run).
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(short = 's', long)]
    pub silent: bool,
}

/// One kind of installed component, found by its labels.
struct Component {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
}

/// The kinds `capstan install` creates, in deletion order (workloads first, RBAC last).
const COMPONENTS: [Component; 12] = [
    component("apps", "v1", "Deployment", "deployments", true),
    component("", "v1", "Service", "services", true),
    component(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
    component("", "v1", "ConfigMap", "configmaps", true),
    component("", "v1", "Secret", "secrets", true),
    component("", "v1", "ServiceAccount", "serviceaccounts", true),
    component("", "v1", "ResourceQuota", "resourcequotas", true),
    component(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    component("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    component(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    component(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    component(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        false,
    ),
];

const fn component(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Component {
    Component {
        group,
        version,
        kind,
        plural,
        namespaced,
    }
}

impl Component {
    fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }
}

/// What went wrong, counted: the command goes on and fails at the end, as Flux does.
#[derive(Default)]
struct Outcome {
    failures: usize,
    dry_run: bool,
}

impl Outcome {
    fn suffix(&self) -> &'static str {
        if self.dry_run { " (dry run)" } else { "" }
    }

    fn done(&self, what: &str) {
        say::success(&format!("{what}{}", self.suffix()));
    }

    fn failed(&mut self, what: &str, error: &anyhow::Error) {
        self.failures += 1;
        say::failure(&format!("{what} failed: {error:#}"));
    }
}

/// Runs `capstan uninstall`.
pub async fn run(args: UninstallArgs) -> anyhow::Result<ExitCode> {
    let namespace = args.cluster.namespace.clone();
    let client = args.cluster.client().await?;
    let others = crate::install::other_installations(&client, &namespace).await?;
    if !args.dry_run && !args.silent {
        let question = if others.is_empty() {
            "Are you sure you want to delete Capstan and its custom resource definitions"
        } else {
            "Are you sure you want to delete this Capstan installation (the other one keeps the \
             custom resource definitions)"
        };
        match crate::cmd::lifecycle::confirm(question) {
            Some(true) => {}
            Some(false) => anyhow::bail!("aborting"),
            None => anyhow::bail!(
                "aborting: no answer on stdin; pass --silent to uninstall without confirmation"
            ),
        }
    }
    let mut outcome = Outcome {
        dry_run: args.dry_run,
        ..Outcome::default()
    };

    say::action(&format!("deleting components in {namespace} namespace"));
    delete_components(&client, &namespace, &mut outcome).await;

    // Another installation reconciles the custom objects of every namespace with these CRDs:
    // they stay, and so does this namespace if it holds any (deleting it would delete them,
    // and the remaining controller would run their finalizers and prune).
    if !others.is_empty() {
        let crds = capstan_crds(&client).await?;
        let mut here = 0;
        for crd in &crds {
            here += count_custom_objects(&client, crd, &namespace).await?;
        }
        say::success(&format!(
            "Capstan is still installed in namespace {}: keeping the toolkit.fluxcd.io custom \
             resource definitions and every custom object",
            others.join(", ")
        ));
        if args.keep_namespace {
            // Kept as asked.
        } else if here > 0 {
            say::success(&format!(
                "Namespace/{namespace} kept: it holds {here} toolkit.fluxcd.io object(s) the \
                 other installation reconciles"
            ));
        } else {
            delete_namespace(&client, &namespace, &mut outcome).await;
        }
        return finish(&outcome);
    }

    say::action("deleting toolkit.fluxcd.io finalizers and objects in all namespaces");
    let crds = capstan_crds(&client).await?;
    for crd in &crds {
        delete_custom_objects(&client, crd, &mut outcome).await;
    }

    say::action("deleting toolkit.fluxcd.io custom resource definitions");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in &crds {
        let name = crd.name_any();
        let what = format!("CustomResourceDefinition/{name}");
        match delete(&api, &name, None, args.dry_run).await {
            Ok(_) => outcome.done(&format!("{what} deleted")),
            Err(e) => outcome.failed(&format!("{what} deletion"), &e),
        }
    }

    if !args.keep_namespace {
        delete_namespace(&client, &namespace, &mut outcome).await;
    }
    finish(&outcome)
}

/// Deletes the installation's namespace.
async fn delete_namespace(client: &Client, namespace: &str, outcome: &mut Outcome) {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let what = format!("Namespace/{namespace}");
    match delete(&api, namespace, None, outcome.dry_run).await {
        Ok(true) => outcome.done(&format!("{what} deleted")),
        Ok(false) => say::success(&format!("{what} not found")),
        Err(e) => outcome.failed(&format!("{what} deletion"), &e),
    }
}

/// The command's end: a failure if any step failed (the others ran), success otherwise.
fn finish(outcome: &Outcome) -> anyhow::Result<ExitCode> {
    if outcome.failures > 0 {
        anyhow::bail!(
            "uninstall finished with {} failure(s); run it again to retry",
            outcome.failures
        );
    }
    say::success(&format!("uninstall finished{}", outcome.suffix()));
    Ok(ExitCode::SUCCESS)
}

/// How many objects of a CRD's kind `namespace` holds (none for a cluster-scoped kind).
async fn count_custom_objects(
    client: &Client,
    crd: &CustomResourceDefinition,
    namespace: &str,
) -> anyhow::Result<usize> {
    let Some(resource) = crd_resource(crd) else {
        return Ok(0);
    };
    if crd.spec.scope != "Namespaced" {
        return Ok(0);
    }
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items.len()),
        Err(e) if status_code(&e) == Some(404) => Ok(0),
        Err(e) => Err(anyhow::Error::new(e).context(format!("listing {}", resource.plural))),
    }
}

/// Deletes the objects `capstan install` made for the installation in `namespace`: those
/// labelled `app.kubernetes.io/part-of: capstan` and `app.kubernetes.io/instance: <namespace>`
/// (namespaced ones in `namespace` only). A kind the cluster does not serve is skipped.
async fn delete_components(client: &Client, namespace: &str, outcome: &mut Outcome) {
    let selector = format!("{}={},{INSTANCE}={namespace}", PART_OF.0, PART_OF.1);
    for component in &COMPONENTS {
        let resource = component.resource();
        let api: Api<DynamicObject> = if component.namespaced {
            Api::namespaced_with(client.clone(), namespace, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        let list = match api.list(&ListParams::default().labels(&selector)).await {
            Ok(list) => list,
            Err(e) if status_code(&e) == Some(404) => continue,
            Err(e) => {
                outcome.failed(
                    &format!("listing {}", component.plural),
                    &anyhow::Error::new(e),
                );
                continue;
            }
        };
        for object in list.items {
            let name = object.name_any();
            let what = if component.namespaced {
                format!("{}/{namespace}/{name}", component.kind)
            } else {
                format!("{}/{name}", component.kind)
            };
            match delete(&api, &name, None, outcome.dry_run).await {
                Ok(_) => outcome.done(&format!("{what} deleted")),
                Err(e) => outcome.failed(&format!("{what} deletion"), &e),
            }
        }
    }
}

/// The CustomResourceDefinitions to remove, as the cluster holds them: Capstan's own (by name)
/// and any labelled `app.kubernetes.io/part-of: capstan`.
async fn capstan_crds(client: &Client) -> anyhow::Result<Vec<CustomResourceDefinition>> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut found = Vec::new();
    for crd in capstan_api::crds() {
        let name = crd.metadata.name.unwrap_or_default();
        if let Some(crd) = api
            .get_opt(&name)
            .await
            .with_context(|| format!("reading CustomResourceDefinition {name}"))?
        {
            found.push(crd);
        }
    }
    let labelled = api
        .list(&ListParams::default().labels(&format!("{}={}", PART_OF.0, PART_OF.1)))
        .await
        .context("listing CustomResourceDefinitions")?;
    for crd in labelled.items {
        if !found.iter().any(|f| f.name_any() == crd.name_any()) {
            found.push(crd);
        }
    }
    Ok(found)
}

/// The resource of a CRD's storage version (else its first served one).
fn crd_resource(crd: &CustomResourceDefinition) -> Option<ApiResource> {
    let spec = &crd.spec;
    let version = spec
        .versions
        .iter()
        .find(|v| v.storage)
        .or_else(|| spec.versions.iter().find(|v| v.served))?;
    Some(ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&spec.group, &version.name, &spec.names.kind),
        &spec.names.plural,
    ))
}

/// Removes the finalizers of every object of a CRD's kind, in all namespaces, and deletes it.
async fn delete_custom_objects(
    client: &Client,
    crd: &CustomResourceDefinition,
    outcome: &mut Outcome,
) {
    let Some(resource) = crd_resource(crd) else {
        return;
    };
    let kind = resource.kind.clone();
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let list = match all.list(&ListParams::default()).await {
        Ok(list) => list,
        Err(e) if status_code(&e) == Some(404) => return,
        Err(e) => {
            outcome.failed(&format!("listing {}", resource.plural), &e.into());
            return;
        }
    };
    for object in list.items {
        let namespace = object.namespace();
        let name = object.name_any();
        let what = match &namespace {
            Some(ns) => format!("{kind}/{ns}/{name}"),
            None => format!("{kind}/{name}"),
        };
        let api: Api<DynamicObject> = match &namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        match strip_and_delete(&api, object, outcome.dry_run).await {
            Ok(stripped) => {
                if stripped {
                    outcome.done(&format!("{what} finalizers deleted"));
                }
                outcome.done(&format!("{what} deleted"));
            }
            Err(e) => outcome.failed(&format!("{what} deletion"), &e),
        }
    }
}

/// Empties an object's finalizers and deletes it at exactly that version, again after any
/// concurrent write. Returns whether it had finalizers.
async fn strip_and_delete(
    api: &Api<DynamicObject>,
    mut object: DynamicObject,
    dry_run: bool,
) -> anyhow::Result<bool> {
    let name = object.name_any();
    let mut stripped = false;
    for _ in 0..ATTEMPTS {
        let mut version = object.resource_version();
        if !object.finalizers().is_empty() {
            object.metadata.finalizers = None;
            let params = PostParams {
                dry_run,
                ..PostParams::default()
            };
            match api.replace(&name, &params, &object).await {
                Ok(written) => {
                    stripped = true;
                    version = written.resource_version();
                }
                Err(e) if status_code(&e) == Some(404) => return Ok(stripped),
                Err(e) if status_code(&e) == Some(409) => {
                    object = match api.get_opt(&name).await? {
                        Some(object) => object,
                        None => return Ok(stripped),
                    };
                    continue;
                }
                Err(e) => return Err(anyhow::Error::new(e).context("removing the finalizers")),
            }
        }
        // A dry run changed nothing, so there is no version of ours to insist on.
        let precondition = if dry_run { None } else { version };
        match delete(api, &name, precondition, dry_run).await {
            Ok(_) => return Ok(stripped),
            Err(e) if conflict(&e) => {
                object = match api.get_opt(&name).await? {
                    Some(object) => object,
                    None => return Ok(stripped),
                };
            }
            Err(e) => return Err(e),
        }
    }
    anyhow::bail!("the object kept changing (a controller still running?); {ATTEMPTS} attempts")
}

/// Deletes one object (background propagation, optionally at a resourceVersion). `Ok(false)`
/// when it did not exist.
async fn delete<K>(
    api: &Api<K>,
    name: &str,
    resource_version: Option<String>,
    dry_run: bool,
) -> anyhow::Result<bool>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = DeleteParams {
        dry_run,
        preconditions: resource_version.map(|rv| Preconditions {
            resource_version: Some(rv),
            uid: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(true),
        Err(e) if status_code(&e) == Some(404) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The HTTP status of an API error.
fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Whether a deletion failed on its precondition (409 Conflict).
fn conflict(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<kube::Error>()
        .and_then(status_code)
        .is_some_and(|code| code == 409)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_installed_kind_is_deleted() {
        let objects = manifests::manifests(&manifests::Options::default()).unwrap();
        for object in &objects {
            let kind = object["kind"].as_str().unwrap();
            if matches!(kind, "CustomResourceDefinition" | "Namespace") {
                continue; // deleted by their own steps
            }
            let api_version = object["apiVersion"].as_str().unwrap();
            let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
            assert!(
                COMPONENTS
                    .iter()
                    .any(|c| c.kind == kind && c.group == group),
                "uninstall would leave {api_version} {kind} behind"
            );
        }
    }
}
