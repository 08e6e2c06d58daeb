//! `capstan reconcile`, `suspend`, `resume` and `delete`: one implementation over the kinds.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use kube::Client;
use kube::api::{DeleteParams, Patch, PatchParams};

use capstan_api::meta::annotation;
use serde_json::Value;

use super::{
    ClusterArgs, EXTERNAL_ARTIFACT, HELM_CHART, HELM_RELEASE, KUSTOMIZATION, Kind, OCI, Target, say,
};

/// `capstan reconcile`.
#[derive(Debug, Args)]
pub struct ReconcileArgs {
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

/// `capstan suspend`.
#[derive(Debug, Args)]
pub struct SuspendArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Suspend every object of the kind in the namespace (with `-A`, in every namespace).
    #[arg(long, global = true)]
    pub all: bool,
    /// With `--all`: the objects of every namespace.
    #[arg(short = 'A', long, global = true, requires = "all")]
    pub all_namespaces: bool,
    #[command(subcommand)]
    pub target: Target,
}

/// `capstan resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Resume every object of the kind in the namespace (with `-A`, in every namespace).
    #[arg(long, global = true)]
    pub all: bool,
    /// With `--all`: the objects of every namespace.
    #[arg(short = 'A', long, global = true, requires = "all")]
    pub all_namespaces: bool,
    /// Wait for the objects to be reconciled and Ready. As Flux: the default for one object
    /// named, not for several or `--all` (`--wait` asks for it, `--wait=false` turns it off).
    #[arg(
        long,
        global = true,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub wait: Option<bool>,
    /// How long to wait for each object to become Ready (default `5m`; only when waiting).
    #[arg(long, global = true)]
    pub timeout: Option<String>,
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
    timeout: Duration,
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
        // Another controller produces an ExternalArtifact: Flux's message.
        if source == &EXTERNAL_ARTIFACT {
            anyhow::bail!("cannot reconcile source of kind {}", source.type_name);
        }
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

/// Runs `reconcile`: requests a reconcile of the object and waits until it is Ready.
pub async fn reconcile(args: ReconcileArgs) -> anyhow::Result<ExitCode> {
    let (kind, name) = args.target.resolve()?;
    let name = super::required_name(name, kind)?;
    let timeout = super::duration_flag("timeout", &args.timeout)?;
    let namespace = args.cluster.namespace.clone();
    let client = args.cluster.client().await?;
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
    Ok(ExitCode::SUCCESS)
}

/// The objects `suspend`/`resume` work on: those named (each once), or with `--all` every
/// object of the kind in the namespace (every namespace with `-A`). Names and `--all` together
/// are refused; `--all` finding nothing is an error, as in Flux. A name not found is reported
/// (`✗ Kustomization 'x' not found in namespace 'apps'`) and the others are still worked on;
/// the second value counts those not found.
async fn targets(
    client: &Client,
    kind: &Kind,
    names: &[String],
    cluster: &ClusterArgs,
    all: bool,
    all_namespaces: bool,
) -> anyhow::Result<(Vec<Value>, usize)> {
    let namespace = cluster.namespace.as_str();
    if all {
        if !names.is_empty() {
            anyhow::bail!("give {} names or --all, not both", kind.short);
        }
        let scope = (!all_namespaces).then_some(namespace);
        let objects = kind.list(client, scope).await?;
        if objects.is_empty() {
            let scope = scope.map_or_else(|| "any".to_owned(), |ns| format!("{ns:?}"));
            anyhow::bail!("no {} objects found in {scope} namespace", kind.type_name);
        }
        return Ok((objects, 0));
    }
    if names.is_empty() {
        anyhow::bail!("{} name is required (or --all)", kind.type_name);
    }
    let mut seen = std::collections::HashSet::new();
    let (mut objects, mut missing) = (Vec::new(), 0);
    for name in names.iter().filter(|n| seen.insert(n.as_str())) {
        match kind.get(client, namespace, name).await {
            Ok(object) => objects.push(object),
            Err(e) if names.len() > 1 => {
                say::failure(&format!("{e:#}"));
                missing += 1;
            }
            Err(e) => return Err(e),
        }
    }
    Ok((objects, missing))
}

/// The error of a `suspend`/`resume` that could not find some of the objects named.
fn not_found(kind: &Kind, missing: usize) -> anyhow::Result<ExitCode> {
    if missing > 0 {
        anyhow::bail!(
            "{missing} of the {} objects named not found or not readable",
            kind.type_name
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Sets or clears `spec.suspend` of one object, with Flux's lines.
async fn set_suspended(
    client: &Client,
    kind: &Kind,
    object: &Value,
    suspend: bool,
) -> anyhow::Result<()> {
    let (namespace, name) = (super::namespace_of(object), super::name_of(object));
    let (doing, done) = if suspend {
        ("suspending", "suspended")
    } else {
        ("resuming", "resumed")
    };
    say::action(&format!(
        "{doing} {} {name} in {namespace} namespace",
        kind.short
    ));
    let patch = serde_json::json!({"spec": {"suspend": if suspend { Value::Bool(true) } else { Value::Null }}});
    kind.api(client, Some(namespace))
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("{doing} {} {namespace}/{name}", kind.type_name))?;
    say::success(&format!("{} {done}", kind.short));
    Ok(())
}

/// Runs `suspend`: sets `spec.suspend` on the object named, or on every object with `--all`.
pub async fn suspend(args: SuspendArgs) -> anyhow::Result<ExitCode> {
    let (kind, names) = args.target.resolve_names();
    let client = args.cluster.client().await?;
    let (objects, missing) = targets(
        &client,
        kind,
        names,
        &args.cluster,
        args.all,
        args.all_namespaces,
    )
    .await?;
    for object in &objects {
        set_suspended(&client, kind, object, true).await?;
    }
    not_found(kind, missing)
}

/// Runs `resume`: clears `spec.suspend` on the object named, or on every object with `--all`,
/// then (for one object named, or with `--wait`) requests a reconcile of each and waits for them
/// all together; prints, by name, `✔ <Kind> <name> reconciliation completed` and the revision,
/// or `✗ <Kind> <name> reconciliation failed: …`, and fails when one did, as Flux does. A static
/// object (an OCI HelmRepository) has nothing to wait for.
pub async fn resume(args: ResumeArgs) -> anyhow::Result<ExitCode> {
    let (kind, names) = args.target.resolve_names();
    let wait = args.wait.unwrap_or(names.len() == 1);
    let timeout = super::duration_flag("timeout", args.timeout.as_deref().unwrap_or("5m"))?;
    if !wait && args.timeout.is_some() {
        anyhow::bail!("--timeout applies only when resume waits (one name, or --wait)");
    }
    let client = args.cluster.client().await?;
    let (objects, missing) = targets(
        &client,
        kind,
        names,
        &args.cluster,
        args.all,
        args.all_namespaces,
    )
    .await?;
    for object in &objects {
        set_suspended(&client, kind, object, false).await?;
    }
    if !wait {
        return not_found(kind, missing);
    }
    let waits = objects
        .iter()
        .filter(|object| !kind.is_static(object))
        .map(|object| wait_resumed(&client, kind, object, timeout));
    let mut results = futures::future::join_all(waits).await;
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let mut failed = 0;
    for (name, result) in results {
        match result {
            Ok(ready) => {
                say::success(&format!(
                    "{} {name} reconciliation completed",
                    kind.type_name
                ));
                say::success(&kind.revision_message(&ready));
            }
            Err(e) => {
                failed += 1;
                say::failure(&format!(
                    "{} {name} reconciliation failed: {e:#}",
                    kind.type_name
                ));
            }
        }
    }
    if failed > 0 {
        anyhow::bail!("reconciliation failed for {failed} {}(s)", kind.type_name);
    }
    not_found(kind, missing)
}

/// Requests a reconcile of a resumed object and waits until it is Ready; returns its name with
/// the outcome.
async fn wait_resumed(
    client: &Client,
    kind: &Kind,
    object: &Value,
    timeout: Duration,
) -> (String, anyhow::Result<Value>) {
    let (namespace, name) = (super::namespace_of(object), super::name_of(object));
    let result = async {
        let token = super::request_reconcile(client, kind, namespace, name, &[]).await?;
        say::waiting(&format!("waiting for {} reconciliation", kind.type_name));
        super::wait_ready(client, kind, namespace, name, Some(&token), timeout).await
    }
    .await;
    (name.to_owned(), result)
}

/// Asks `Are you sure …` and reads the answer from stdin (a terminal, or a pipe such as
/// `yes |`); only `y`/`yes` confirms. `None` when stdin is closed before an answer.
pub(crate) fn confirm(question: &str) -> Option<bool> {
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
    let (kind, name) = args.target.resolve()?;
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
