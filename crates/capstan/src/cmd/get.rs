//! `capstan get` (status tables) and `capstan export` (manifests without status).

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Map, Value};

use super::{
    ALL, BUCKET, ClusterArgs, GIT, HELM_CHART, HELM_RELEASE, HELM_REPOSITORY, KUSTOMIZATION, Kind,
    OCI, Output, SOURCES, Target, say,
};

/// `capstan get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// List the objects of every namespace.
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// After listing, keep printing a row each time an object of the kind changes (one kind).
    #[arg(short = 'w', long, global = true)]
    pub watch: bool,
    #[command(subcommand)]
    pub command: GetCommand,
}

/// What to list.
#[derive(Debug, Subcommand)]
pub enum GetCommand {
    /// Sources: `git`, `oci`, `bucket`, `helm`, `chart` or `all`.
    #[command(subcommand, alias = "source")]
    Sources(GetSources),
    /// Kustomizations.
    #[command(alias = "ks", alias = "kustomization")]
    Kustomizations(GetName),
    /// HelmReleases.
    #[command(alias = "hr", alias = "helmrelease")]
    Helmreleases(GetHelmReleases),
    /// Every source, Kustomization and HelmRelease.
    All(GetName),
}

/// The source kinds.
#[derive(Debug, Subcommand)]
pub enum GetSources {
    /// GitRepositories.
    Git(GetName),
    /// OCIRepositories.
    Oci(GetName),
    /// Buckets.
    Bucket(GetName),
    /// HelmRepositories.
    Helm(GetName),
    /// HelmCharts.
    Chart(GetName),
    /// Every source kind.
    All(GetName),
}

/// An optional name to show one object only.
#[derive(Debug, Args)]
pub struct GetName {
    /// Show only the object of this name.
    pub name: Option<String>,
}

/// `get helmreleases`.
#[derive(Debug, Args)]
pub struct GetHelmReleases {
    #[command(flatten)]
    pub name: GetName,
    /// Show the source reference of each HelmRelease (`<kind>/<namespace>/<name>`).
    #[arg(long)]
    pub show_source: bool,
}

/// The chart source of a HelmRelease as Flux's `--show-source` prints it: `chartRef`, else the
/// template's `sourceRef`, as `<kind>/<namespace>/<name>` (the HelmRelease's namespace when the
/// reference has none).
pub fn helm_release_source(object: &Value) -> String {
    let spec = &object["spec"];
    let reference = if spec["chartRef"].is_object() {
        &spec["chartRef"]
    } else {
        &spec["chart"]["spec"]["sourceRef"]
    };
    let namespace = reference["namespace"]
        .as_str()
        .unwrap_or_else(|| super::namespace_of(object));
    format!(
        "{}/{namespace}/{}",
        reference["kind"].as_str().unwrap_or_default(),
        reference["name"].as_str().unwrap_or_default()
    )
}

/// One row of Flux's status table (a static object — an OCI HelmRepository — is always ready,
/// as Flux prints it).
fn row(
    kind: &Kind,
    object: &Value,
    prefixed: bool,
    all_namespaces: bool,
    show_source: bool,
) -> Vec<String> {
    let (ready, message) = if kind.is_static(object) {
        ("True".to_owned(), "Helm repository is Ready".to_owned())
    } else {
        super::ready_status(object)
    };
    let name = super::name_of(object);
    let mut row = Vec::with_capacity(6);
    if all_namespaces {
        row.push(super::namespace_of(object).to_owned());
    }
    row.push(if prefixed {
        format!("{}/{name}", kind.short)
    } else {
        name.to_owned()
    });
    if show_source {
        row.push(helm_release_source(object));
    }
    row.push(kind.revision(object).to_owned());
    row.push(
        if super::suspended(object) {
            "True"
        } else {
            "False"
        }
        .to_owned(),
    );
    row.push(ready);
    row.push(message);
    row
}

/// Lists `kinds` and prints them; one table per kind (names prefixed by the kind) when several.
/// As Flux, a kind with nothing to show prints `✗ <Kind> object '<name>' not found in "<ns>"
/// namespace` when a name was given, `✗ no <Kind> objects found in "<ns>" namespace` otherwise,
/// and nothing at all for `get all`/`get sources all` without a name; the exit code stays 0.
pub async fn run(args: GetArgs) -> anyhow::Result<ExitCode> {
    let (kinds, name): (Vec<&Kind>, Option<&String>) = match &args.command {
        GetCommand::Sources(GetSources::Git(n)) => (vec![&GIT], n.name.as_ref()),
        GetCommand::Sources(GetSources::Oci(n)) => (vec![&OCI], n.name.as_ref()),
        GetCommand::Sources(GetSources::Bucket(n)) => (vec![&BUCKET], n.name.as_ref()),
        GetCommand::Sources(GetSources::Helm(n)) => (vec![&HELM_REPOSITORY], n.name.as_ref()),
        GetCommand::Sources(GetSources::Chart(n)) => (vec![&HELM_CHART], n.name.as_ref()),
        GetCommand::Sources(GetSources::All(n)) => (SOURCES.to_vec(), n.name.as_ref()),
        GetCommand::Kustomizations(n) => (vec![&KUSTOMIZATION], n.name.as_ref()),
        GetCommand::Helmreleases(a) => (vec![&HELM_RELEASE], a.name.name.as_ref()),
        GetCommand::All(n) => (ALL.to_vec(), n.name.as_ref()),
    };
    let show_source = matches!(&args.command, GetCommand::Helmreleases(a) if a.show_source);
    if args.watch && (kinds.len() > 1 || args.output != Output::Table) {
        anyhow::bail!("--watch takes one kind and the table output (e.g. `get ks --watch`)");
    }
    let client = args.cluster.client().await?;
    let namespace = (!args.all_namespaces).then_some(args.cluster.namespace.as_str());
    if args.watch {
        let row = |o: &Value| row(kinds[0], o, false, args.all_namespaces, show_source);
        return watch(
            &client,
            kinds[0],
            namespace,
            name,
            &headers(&args, show_source),
            row,
        )
        .await;
    }
    let get_all = kinds.len() > 1;
    let scope = match namespace {
        Some(ns) => format!("{ns:?}"),
        None => "any".to_owned(),
    };
    let mut found = Vec::new();
    for kind in &kinds {
        let mut objects = kind.list(&client, namespace).await?;
        if let Some(name) = name {
            objects.retain(|o| super::name_of(o) == name);
        }
        if !objects.is_empty() {
            found.push((*kind, objects));
        } else if let Some(name) = name {
            say::failure(&format!(
                "{} object '{name}' not found in {scope} namespace",
                kind.type_name
            ));
        } else if !get_all {
            say::failure(&format!(
                "no {} objects found in {scope} namespace",
                kind.type_name
            ));
        }
    }
    if found.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    if args.output != Output::Table {
        let objects: Vec<Value> = found.into_iter().flat_map(|(_, o)| o).collect();
        super::print_objects(&objects, args.output)?;
        return Ok(ExitCode::SUCCESS);
    }
    let prefixed = get_all;
    let headers = headers(&args, show_source);
    for (index, (kind, objects)) in found.iter().enumerate() {
        if index > 0 {
            outln!();
        }
        let rows: Vec<Vec<String>> = objects
            .iter()
            .map(|o| row(kind, o, prefixed, args.all_namespaces, show_source))
            .collect();
        super::print_table(&headers, &rows);
    }
    Ok(ExitCode::SUCCESS)
}

/// The status table's columns.
fn headers(args: &GetArgs, show_source: bool) -> Vec<&'static str> {
    let mut headers = vec!["NAME", "REVISION", "SUSPENDED", "READY", "MESSAGE"];
    if show_source {
        headers.insert(1, "SOURCE");
    }
    if args.all_namespaces {
        headers.insert(0, "NAMESPACE");
    }
    headers
}

/// `get <kind> --watch`: the header once, then one row for each object as listed and each time
/// one changes, until interrupted (Ctrl-C) or the stream ends.
async fn watch(
    client: &kube::Client,
    kind: &Kind,
    namespace: Option<&str>,
    name: Option<&String>,
    headers: &[&str],
    row: impl Fn(&Value) -> Vec<String>,
) -> anyhow::Result<ExitCode> {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let mut config = watcher::Config::default();
    if let Some(name) = name {
        config = config.fields(&format!("metadata.name={name}"));
    }
    let stream = watcher::watcher(kind.api(client, namespace), config);
    let mut stream = std::pin::pin!(stream);
    let mut header = true;
    while let Some(event) = stream.next().await {
        let object = match event.with_context(|| format!("watching {}", kind.type_name))? {
            watcher::Event::Apply(object) | watcher::Event::InitApply(object) => object,
            watcher::Event::Delete(_) | watcher::Event::Init | watcher::Event::InitDone => {
                continue;
            }
        };
        let value = serde_json::to_value(&object)?;
        let table = super::format_table(headers, &[row(&value)]);
        if header {
            out!("{table}");
            header = false;
        } else {
            out!("{}", table.split_once('\n').map_or("", |(_, rows)| rows));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `capstan export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Export every object of the kind in the namespace.
    #[arg(long, global = true)]
    pub all: bool,
    #[command(subcommand)]
    pub target: Target,
}

/// The object as Flux exports it: `apiVersion`, `kind`, `metadata` (name, namespace, labels,
/// annotations) and `spec`; no status, no server-set fields.
pub fn exported(kind: &Kind, object: &Value) -> Value {
    let mut metadata = Map::new();
    metadata.insert("name".into(), super::name_of(object).into());
    metadata.insert("namespace".into(), super::namespace_of(object).into());
    for field in ["labels", "annotations"] {
        if let Some(map) = object["metadata"][field]
            .as_object()
            .filter(|m| !m.is_empty())
        {
            metadata.insert(field.into(), Value::Object(map.clone()));
        }
    }
    serde_json::json!({
        "apiVersion": kind.api_version(),
        "kind": kind.type_name,
        "metadata": metadata,
        "spec": object["spec"].clone(),
    })
}

/// Prints one object or, with `--all`, every object of the kind, as YAML documents.
pub async fn export(args: ExportArgs) -> anyhow::Result<ExitCode> {
    let (kind, name) = args.target.resolve();
    let client = args.cluster.client().await?;
    let namespace = &args.cluster.namespace;
    let objects = if args.all {
        kind.list(&client, Some(namespace)).await?
    } else {
        let name = super::required_name(name, kind)?;
        vec![kind.get(&client, namespace, &name).await?]
    };
    let exported: Vec<Value> = objects.iter().map(|o| exported(kind, o)).collect();
    out!("{}", super::yaml_documents(&exported));
    Ok(ExitCode::SUCCESS)
}
