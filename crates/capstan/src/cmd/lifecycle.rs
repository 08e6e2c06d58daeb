//! `capstan reconcile`, `suspend`, `resume` and `delete`: one implementation over the kinds.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use kube::Client;
use kube::api::{DeleteParams, Patch, PatchParams};

use super::{ClusterArgs, KUSTOMIZATION, Kind, Target, say};

/// `capstan reconcile`, `suspend` and `resume`.
#[derive(Debug, Args)]
pub struct LifecycleArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Reconcile the Kustomization's source first (`reconcile kustomization` only).
    #[arg(long, global = true)]
    pub with_source: bool,
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

/// Requests a reconcile of one object and waits until it is handled and Ready.
async fn reconcile_one(
    client: &Client,
    kind: &Kind,
    namespace: &str,
    name: &str,
    timeout: std::time::Duration,
) -> anyhow::Result<serde_json::Value> {
    let object = kind.get(client, namespace, name).await?;
    if super::suspended(&object) {
        anyhow::bail!("resource is suspended");
    }
    say::action(&format!(
        "annotating {} {name} in {namespace} namespace",
        kind.type_name
    ));
    let token = super::request_reconcile(client, kind, namespace, name).await?;
    say::success(&format!("{} annotated", kind.type_name));
    say::waiting(&format!("waiting for {} reconciliation", kind.type_name));
    super::wait_ready(client, kind, namespace, name, Some(&token), timeout).await
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
            if args.with_source && kind == &KUSTOMIZATION {
                let object = kind.get(&client, &namespace, &name).await?;
                let (source, source_ns, source_name) = source_of(&object)?;
                let ready =
                    reconcile_one(&client, source, &source_ns, &source_name, timeout).await?;
                say::success(&source.revision_message(&ready));
            }
            let ready = reconcile_one(&client, kind, &namespace, &name, timeout).await?;
            say::success(&kind.revision_message(&ready));
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
            kind.get(&client, &namespace, &name).await?;
            say::action(&format!(
                "resuming {} {name} in {namespace} namespace",
                kind.short
            ));
            let patch = serde_json::json!({"spec": {"suspend": null}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("resuming {} {namespace}/{name}", kind.type_name))?;
            say::success(&format!("{} resumed", kind.short));
            let token = super::request_reconcile(&client, kind, &namespace, &name).await?;
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
