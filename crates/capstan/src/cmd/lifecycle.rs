//! `capstan reconcile`, `suspend`, `resume` and `delete`: one implementation over the kinds.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use kube::Client;
use kube::api::{DeleteParams, Patch, PatchParams};

use capstan_api::meta::annotation;
use serde_json::Value;

use super::{ClusterArgs, HELM_CHART, HELM_RELEASE, KUSTOMIZATION, Kind, OCI, Target, say};

/// `capstan reconcile`, `suspend` and `resume`.
#[derive(Debug, Args)]
pub struct LifecycleArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Reconcile the object's source first (`reconcile kustomization|helmrelease|source chart`;
    /// a HelmRelease's HelmChart is reconciled with its own source, as Flux does).
    #[arg(long, global = true)]
    pub with_source: bool,
    /// Force a one-off install or upgrade (`reconcile helmrelease` only:
    /// `reconcile.fluxcd.io/forceAt`).
    #[arg(long, global = true)]
    pub force: bool,
    /// Reset the failure counters (`reconcile helmrelease` only: `reconcile.fluxcd.io/resetAt`).
    #[arg(long, global = true)]
    pub reset: bool,
    /// How long to wait for the object to become Ready.
    #[arg(long, global = true, default_value = "5m")]
    pub timeout: String,
    #[command(subcommand)]
    pub target: Target,
}

/// `capstan delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Delete without asking for confirmation.
    #[arg(short = 's', long, global = true)]
    pub silent: bool,
    #[command(subcommand)]
    pub target: Target,
}

/// The lifecycle verbs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Request a reconcile and wait for it.
    Reconcile,
    /// Set `spec.suspend`.
    Suspend,
    /// Clear `spec.suspend`, request a reconcile and wait for it.
    Resume,
}

/// A source to reconcile before the object: its kind, namespace, name, and whether it is itself
/// reconciled with its source.
type SourceStep = (&'static Kind, String, String, bool);

/// Requests a reconcile of one object (of its source first when `with_source`) and waits until
/// it is handled and Ready; prints Flux's lines, ending with the revision. A static object (an
/// OCI HelmRepository) is not annotated: Flux says "reconciliation not supported by the object".
fn reconcile_one<'a>(
    client: &'a Client,
    kind: &'static Kind,
    namespace: &'a str,
    name: &'a str,
    with_source: bool,
    also: &'a [&'a str],
    timeout: std::time::Duration,
) -> futures::future::BoxFuture<'a, anyhow::Result<()>> {
    Box::pin(async move {
        let object = kind.get(client, namespace, name).await?;
        if kind.is_static(&object) {
            say::success("reconciliation not supported by the object");
            return Ok(());
        }
        if super::suspended(&object) {
            anyhow::bail!("resource is suspended");
        }
        if with_source
            && let Some((source, source_ns, source_name, nested)) = source_step(kind, &object)?
        {
            reconcile_one(
                client,
                source,
                &source_ns,
                &source_name,
                nested,
                &[],
                timeout,
            )
            .await?;
        }
        say::action(&format!(
            "annotating {} {name} in {namespace} namespace",
            kind.type_name
        ));
        let token = super::request_reconcile(client, kind, namespace, name, also).await?;
        say::success(&format!("{} annotated", kind.type_name));
        say::waiting(&format!("waiting for {} reconciliation", kind.type_name));
        let ready = super::wait_ready(client, kind, namespace, name, Some(&token), timeout).await?;
        say::success(&kind.revision_message(&ready));
        Ok(())
    })
}

/// The source `reconcile --with-source` goes through first, as Flux picks it: a Kustomization's
/// `sourceRef`; a HelmChart's `sourceRef` (in the chart's namespace); a HelmRelease's `chartRef`
/// (a HelmChart is then reconciled with its own source) or the HelmChart
/// `<namespace>-<name>` the controller made from `spec.chart` (in the `sourceRef` namespace),
/// reconciled with its source. `None` for kinds without a source.
fn source_step(kind: &Kind, object: &Value) -> anyhow::Result<Option<SourceStep>> {
    let own_namespace = super::namespace_of(object);
    let spec = &object["spec"];
    if kind == &KUSTOMIZATION {
        let (source, namespace, name) = source_of(object)?;
        return Ok(Some((source, namespace, name, false)));
    }
    if kind == &HELM_CHART {
        let reference = &spec["sourceRef"];
        let kind_name = reference["kind"].as_str().unwrap_or_default();
        let source = Kind::by_name(kind_name)
            .filter(|k| k.is_source)
            .ok_or_else(|| anyhow::anyhow!("cannot reconcile source of kind {kind_name}"))?;
        let name = reference["name"].as_str().unwrap_or_default();
        return Ok(Some((
            source,
            own_namespace.to_owned(),
            name.to_owned(),
            false,
        )));
    }
    if kind != &HELM_RELEASE {
        return Ok(None);
    }
    let reference = &spec["chartRef"];
    if reference.is_object() {
        let kind_name = reference["kind"].as_str().unwrap_or_default();
        let namespace = reference["namespace"].as_str().unwrap_or(own_namespace);
        let name = reference["name"].as_str().unwrap_or_default();
        let (source, nested) = match kind_name {
            "HelmChart" => (&HELM_CHART, true),
            "OCIRepository" => (&OCI, false),
            other => anyhow::bail!("cannot reconcile source of kind {other}"),
        };
        return Ok(Some((
            source,
            namespace.to_owned(),
            name.to_owned(),
            nested,
        )));
    }
    let namespace = spec["chart"]["spec"]["sourceRef"]["namespace"]
        .as_str()
        .unwrap_or(own_namespace);
    let chart = format!("{own_namespace}-{}", super::name_of(object));
    Ok(Some((&HELM_CHART, namespace.to_owned(), chart, true)))
}

/// The source a Kustomization refers to: its kind, namespace and name.
pub fn source_of(
    kustomization: &serde_json::Value,
) -> anyhow::Result<(&'static Kind, String, String)> {
    let reference = &kustomization["spec"]["sourceRef"];
    let kind_name = reference["kind"].as_str().unwrap_or_default();
    let kind = Kind::by_name(kind_name)
        .filter(|k| k.is_source)
        .ok_or_else(|| anyhow::anyhow!("unsupported source kind '{kind_name}'"))?;
    let namespace = reference["namespace"]
        .as_str()
        .unwrap_or_else(|| super::namespace_of(kustomization));
    let name = reference["name"].as_str().unwrap_or_default();
    Ok((kind, namespace.to_owned(), name.to_owned()))
}

/// Runs `reconcile`, `suspend` or `resume`.
pub async fn run(verb: Verb, args: LifecycleArgs) -> anyhow::Result<ExitCode> {
    let (kind, name) = args.target.resolve();
    let name = super::required_name(name, kind)?;
    let timeout = super::duration_flag("timeout", &args.timeout)?;
    let namespace = args.cluster.namespace.clone();
    let client = args.cluster.client().await?;
    let api = kind.api(&client, Some(&namespace));
    match verb {
        Verb::Reconcile => {
            let mut also = Vec::new();
            if args.force {
                also.push(annotation::FORCE_REQUESTED_AT);
            }
            if args.reset {
                also.push(annotation::RESET_REQUESTED_AT);
            }
            if !also.is_empty() && kind != &HELM_RELEASE {
                anyhow::bail!("--force and --reset apply to `reconcile helmrelease` only");
            }
            reconcile_one(
                &client,
                kind,
                &namespace,
                &name,
                args.with_source,
                &also,
                timeout,
            )
            .await?;
        }
        Verb::Suspend => {
            kind.get(&client, &namespace, &name).await?;
            say::action(&format!(
                "suspending {} {name} in {namespace} namespace",
                kind.short
            ));
            let patch = serde_json::json!({"spec": {"suspend": true}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("suspending {} {namespace}/{name}", kind.type_name))?;
            say::success(&format!("{} suspended", kind.short));
        }
        Verb::Resume => {
            let object = kind.get(&client, &namespace, &name).await?;
            say::action(&format!(
                "resuming {} {name} in {namespace} namespace",
                kind.short
            ));
            let patch = serde_json::json!({"spec": {"suspend": null}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("resuming {} {namespace}/{name}", kind.type_name))?;
            say::success(&format!("{} resumed", kind.short));
            if kind.is_static(&object) {
                // Nothing reconciles a static object (an OCI HelmRepository): nothing to wait for.
                return Ok(ExitCode::SUCCESS);
            }
            let token = super::request_reconcile(&client, kind, &namespace, &name, &[]).await?;
            say::waiting(&format!("waiting for {} reconciliation", kind.type_name));
            let ready =
                super::wait_ready(&client, kind, &namespace, &name, Some(&token), timeout).await?;
            say::success(&format!("{} reconciliation completed", kind.type_name));
            say::success(&kind.revision_message(&ready));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Asks `Are you sure …` and reads the answer from stdin (a terminal, or a pipe such as
/// `yes |`); only `y`/`yes` confirms. `None` when stdin is closed before an answer.
fn confirm(question: &str) -> Option<bool> {
    eprint!("{question}? [y/N]: ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    match std::io::stdin().lock().read_line(&mut answer) {
        Ok(0) | Err(_) => {
            eprintln!();
            None
        }
        Ok(_) => Some(matches!(answer.trim(), "y" | "Y" | "yes")),
    }
}

/// Deletes one object. As Flux, it asks for confirmation unless `--silent`, terminal or not:
/// without an answer (stdin closed, as in CI) or with anything but `y` it aborts, exit code 1.
pub async fn delete(args: DeleteArgs) -> anyhow::Result<ExitCode> {
    let (kind, name) = args.target.resolve();
    let name = super::required_name(name, kind)?;
    let namespace = args.cluster.namespace.clone();
    let client = args.cluster.client().await?;
    kind.get(&client, &namespace, &name).await?;
    if !args.silent {
        match confirm(&format!(
            "Are you sure you want to delete this {}",
            kind.short
        )) {
            Some(true) => {}
            Some(false) => anyhow::bail!("aborting"),
            None => anyhow::bail!(
                "aborting: no answer on stdin; pass --silent to delete without confirmation"
            ),
        }
    }
    say::action(&format!(
        "deleting {} {name} in {namespace} namespace",
        kind.short
    ));
    kind.api(&client, Some(&namespace))
        .delete(&name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting {} {namespace}/{name}", kind.type_name))?;
    say::success(&format!("{} deleted", kind.short));
    Ok(ExitCode::SUCCESS)
}
