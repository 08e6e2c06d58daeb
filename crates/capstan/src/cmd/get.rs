//! `capstan get` (status tables) and `capstan export` (manifests without status).

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Map, Value};

use super::{
    ALERT, BUCKET, ClusterArgs, EXTERNAL_ARTIFACT, GIT, HELM_CHART, HELM_RELEASE, HELM_REPOSITORY,
    KUSTOMIZATION, Kind, OCI, Output, PROVIDER, RECEIVER, Target, say,
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
    /// Show only the objects whose condition has this status: `ready=false`, `ready!=true`
    /// (condition type and status in any case).
    #[arg(long, global = true, value_name = "TYPE=STATUS")]
    pub status_selector: Option<String>,
    /// Show only the objects with these labels (`app=web,tier!=db`, Kubernetes' syntax).
    #[arg(short = 'l', long, global = true, value_name = "SELECTOR")]
    pub label_selector: Option<String>,
    /// Print the tables without their header line.
    #[arg(long, global = true)]
    pub no_header: bool,
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
    /// Receivers.
    #[command(alias = "receiver", alias = "rcv")]
    Receivers(GetName),
    /// Alerts.
    #[command(alias = "alert")]
    Alerts(GetName),
    /// Alert Providers.
    #[command(alias = "alert-provider")]
    AlertProviders(GetName),
    /// Every kind Capstan serves: sources, HelmReleases, Kustomizations, Receivers, Providers,
    /// Alerts.
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
    /// ExternalArtifacts (produced by another controller).
    External(GetName),
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

/// `get sources all`, in Flux's order.
pub const GET_SOURCES_ALL: [&Kind; 6] = [
    &OCI,
    &BUCKET,
    &GIT,
    &HELM_REPOSITORY,
    &HELM_CHART,
    &EXTERNAL_ARTIFACT,
];

/// `get all`, in Flux's order: the sources (as `get sources all`), then HelmReleases,
/// Kustomizations, Receivers, Providers and Alerts. Every kind of [`super::ALL`] is here.
pub const GET_ALL: [&Kind; 11] = [
    &OCI,
    &BUCKET,
    &GIT,
    &HELM_REPOSITORY,
    &HELM_CHART,
    &EXTERNAL_ARTIFACT,
    &HELM_RELEASE,
    &KUSTOMIZATION,
    &RECEIVER,
    &PROVIDER,
    &ALERT,
];

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

/// The Ready message Flux prints for an object no controller reports on: an OCI HelmRepository
/// (static), and Providers and Alerts (they have no status). `None` for every other object.
fn static_ready(kind: &Kind, object: &Value) -> Option<&'static str> {
    if kind == &PROVIDER {
        Some("Provider is Ready")
    } else if kind == &ALERT {
        Some("Alert is Ready")
    } else if kind.is_static(object) {
        Some("Helm repository is Ready")
    } else {
        None
    }
}

/// Whether Flux prints a REVISION column for the kind (not for the notification kinds).
fn has_revision(kind: &Kind) -> bool {
    ![&RECEIVER, &PROVIDER, &ALERT].contains(&kind)
}

/// Whether Flux prints a SUSPENDED column for the kind (not for Providers, nor for
/// ExternalArtifacts, which print their SOURCE there: [`external_source`]).
fn has_suspended(kind: &Kind) -> bool {
    kind != &PROVIDER && kind != &EXTERNAL_ARTIFACT
}

/// An ExternalArtifact's SOURCE column as Flux prints it: `spec.sourceRef` as
/// `<kind>/<namespace>/<name>` (the namespace as written, possibly empty), empty without one.
fn external_source(object: &Value) -> String {
    let reference = &object["spec"]["sourceRef"];
    if !reference.is_object() {
        return String::new();
    }
    let field = |name: &str| reference[name].as_str().unwrap_or_default().to_owned();
    format!("{}/{}/{}", field("kind"), field("namespace"), field("name"))
}

/// `--status-selector`: a condition type and status, matched or (with `!=`) not matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusSelector {
    /// The condition type (`ready`), compared in any case.
    pub type_: String,
    /// The status (`false`), compared in any case.
    pub status: String,
    /// `type!=status`: the objects that do not match.
    pub negated: bool,
}

impl StatusSelector {
    /// Parses `type=status` or `type!=status`, as Flux does.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let (separator, negated) = if text.contains("!=") {
            ("!=", true)
        } else {
            ("=", false)
        };
        let Some((type_, status)) = text.split_once(separator) else {
            anyhow::bail!(
                "expected status selector in type=status or type!=status format, but found: {text}"
            );
        };
        Ok(Self {
            type_: type_.to_owned(),
            status: status.to_owned(),
            negated,
        })
    }

    /// Whether the object is selected. As Flux: the last condition of the type decides (an
    /// object without it does not match); Providers and Alerts, which have no status, match
    /// `ready=true` only.
    pub fn selects(&self, kind: &Kind, object: &Value) -> bool {
        let matched = if kind == &PROVIDER || kind == &ALERT {
            self.type_
                .eq_ignore_ascii_case(capstan_api::meta::condition::READY)
                && self.status.eq_ignore_ascii_case("True")
        } else {
            object["status"]["conditions"]
                .as_array()
                .and_then(|conditions| {
                    conditions.iter().rev().find(|c| {
                        c["type"]
                            .as_str()
                            .is_some_and(|t| t.eq_ignore_ascii_case(&self.type_))
                    })
                })
                .is_some_and(|c| {
                    c["status"]
                        .as_str()
                        .is_some_and(|s| s.eq_ignore_ascii_case(&self.status))
                })
        };
        matched != self.negated
    }
}

/// How rows are printed.
#[derive(Clone, Copy, Debug)]
struct RowStyle {
    /// Names prefixed by the kind (`get all`, `get sources all`).
    prefixed: bool,
    /// A NAMESPACE column first (`-A`).
    all_namespaces: bool,
    /// A SOURCE column (`get helmreleases --show-source`).
    show_source: bool,
    /// No header line (`--no-header`).
    no_header: bool,
}

/// A table as [`super::format_table`] prints it, without its header line with `--no-header`.
fn table_text(headers: &[&str], rows: &[Vec<String>], style: RowStyle) -> String {
    let table = super::format_table(headers, rows);
    if style.no_header {
        table
            .split_once('\n')
            .map_or_else(String::new, |(_, rows)| rows.to_owned())
    } else {
        table
    }
}

/// Flux's `TruncateHex`: every run of 40 to 128 lower-case hex digits standing as a word of its
/// own (a SHA-1 to SHA-512 digest) is cut to its first 8 (`main@sha1:67e2c98a`).
pub fn truncate_hex(text: &str) -> String {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(is_word) {
        out.push_str(&rest[..start]);
        let word_len = rest[start..]
            .find(|c| !is_word(c))
            .unwrap_or(rest.len() - start);
        let word = &rest[start..start + word_len];
        let digest = (40..=128).contains(&word.len())
            && word
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        out.push_str(if digest { &word[..8] } else { word });
        rest = &rest[start + word_len..];
    }
    out.push_str(rest);
    out
}

/// One row of Flux's status table for the kind (see [`headers`]). As Flux, digests in the
/// revision and message of sources and Kustomizations are shortened ([`truncate_hex`]; a
/// HelmChart's revision, a chart version, is left whole).
fn row(kind: &Kind, object: &Value, style: RowStyle) -> Vec<String> {
    let (ready, mut message) = match static_ready(kind, object) {
        Some(message) => ("True".to_owned(), message.to_owned()),
        None => super::ready_status(object),
    };
    let shortened = kind.is_source || kind == &KUSTOMIZATION;
    if shortened {
        message = truncate_hex(&message);
    }
    let name = super::name_of(object);
    let mut row = Vec::with_capacity(6);
    if style.all_namespaces {
        row.push(super::namespace_of(object).to_owned());
    }
    row.push(if style.prefixed {
        format!("{}/{name}", kind.short)
    } else {
        name.to_owned()
    });
    if style.show_source {
        row.push(helm_release_source(object));
    }
    if has_revision(kind) {
        let revision = kind.revision(object);
        row.push(if shortened && kind != &HELM_CHART {
            truncate_hex(revision)
        } else {
            revision.to_owned()
        });
    }
    if kind == &EXTERNAL_ARTIFACT {
        row.push(external_source(object));
    }
    if has_suspended(kind) {
        let suspended = if super::suspended(object) {
            "True"
        } else {
            "False"
        };
        row.push(suspended.to_owned());
    }
    row.push(ready);
    row.push(message);
    row
}

/// The status table's columns for the kind.
fn headers(kind: &Kind, style: RowStyle) -> Vec<&'static str> {
    let mut headers = vec!["NAME"];
    if style.show_source {
        headers.push("SOURCE");
    }
    if has_revision(kind) {
        headers.push("REVISION");
    }
    if kind == &EXTERNAL_ARTIFACT {
        headers.push("SOURCE");
    }
    if has_suspended(kind) {
        headers.push("SUSPENDED");
    }
    headers.extend(["READY", "MESSAGE"]);
    if style.all_namespaces {
        headers.insert(0, "NAMESPACE");
    }
    headers
}

/// The kinds a `get` lists and the name asked for.
fn kinds_of(command: &GetCommand) -> (Vec<&'static Kind>, Option<&String>) {
    match command {
        GetCommand::Sources(GetSources::Git(n)) => (vec![&GIT], n.name.as_ref()),
        GetCommand::Sources(GetSources::Oci(n)) => (vec![&OCI], n.name.as_ref()),
        GetCommand::Sources(GetSources::Bucket(n)) => (vec![&BUCKET], n.name.as_ref()),
        GetCommand::Sources(GetSources::Helm(n)) => (vec![&HELM_REPOSITORY], n.name.as_ref()),
        GetCommand::Sources(GetSources::Chart(n)) => (vec![&HELM_CHART], n.name.as_ref()),
        GetCommand::Sources(GetSources::External(n)) => (vec![&EXTERNAL_ARTIFACT], n.name.as_ref()),
        GetCommand::Sources(GetSources::All(n)) => (GET_SOURCES_ALL.to_vec(), n.name.as_ref()),
        GetCommand::Kustomizations(n) => (vec![&KUSTOMIZATION], n.name.as_ref()),
        GetCommand::Helmreleases(a) => (vec![&HELM_RELEASE], a.name.name.as_ref()),
        GetCommand::Receivers(n) => (vec![&RECEIVER], n.name.as_ref()),
        GetCommand::Alerts(n) => (vec![&ALERT], n.name.as_ref()),
        GetCommand::AlertProviders(n) => (vec![&PROVIDER], n.name.as_ref()),
        GetCommand::All(n) => (GET_ALL.to_vec(), n.name.as_ref()),
    }
}

/// Lists `kinds` and prints them; one table per kind (names prefixed by the kind) when several.
/// As Flux, a kind with nothing to show prints `✗ <Kind> object '<name>' not found in "<ns>"
/// namespace` when a name was given, `✗ no <Kind> objects found in "<ns>" namespace` otherwise,
/// and nothing at all for `get all`/`get sources all` without a name; the exit code stays 0.
/// `get all` and `get sources all` print each table followed by an empty line, as Flux does,
/// and leave out a kind none of whose objects `--status-selector` selects; one kind whose
/// objects are all filtered out prints its header alone.
pub async fn run(args: GetArgs) -> anyhow::Result<ExitCode> {
    let (kinds, name) = kinds_of(&args.command);
    let show_source = matches!(&args.command, GetCommand::Helmreleases(a) if a.show_source);
    let selector = args
        .status_selector
        .as_deref()
        .map(StatusSelector::parse)
        .transpose()?;
    if args.watch && (kinds.len() > 1 || args.output != Output::Table) {
        anyhow::bail!("--watch takes one kind and the table output (e.g. `get ks --watch`)");
    }
    let client = args.cluster.client().await?;
    let namespace = (!args.all_namespaces).then_some(args.cluster.namespace.as_str());
    let get_all = kinds.len() > 1;
    let style = RowStyle {
        prefixed: get_all,
        all_namespaces: args.all_namespaces,
        show_source,
        no_header: args.no_header,
    };
    let labels = args.label_selector.as_deref();
    if args.watch {
        let filter = (selector.as_ref(), labels);
        return watch(&client, kinds[0], namespace, name, style, filter).await;
    }
    let scope = match namespace {
        Some(ns) => format!("{ns:?}"),
        None => "any".to_owned(),
    };
    let mut found = Vec::new();
    for kind in &kinds {
        let mut objects = kind.list_labelled(&client, namespace, labels).await?;
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
    if let Some(selector) = &selector {
        for (kind, objects) in &mut found {
            objects.retain(|o| selector.selects(kind, o));
        }
        if get_all {
            found.retain(|(_, objects)| !objects.is_empty());
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
    for (kind, objects) in &found {
        let rows: Vec<Vec<String>> = objects.iter().map(|o| row(kind, o, style)).collect();
        out!("{}", table_text(&headers(kind, style), &rows, style));
        if get_all {
            outln!();
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `get <kind> --watch`: the header once, then one row for each object as listed and each time
/// one changes (those `--status-selector` selects), until interrupted (Ctrl-C) or the stream
/// ends.
async fn watch(
    client: &kube::Client,
    kind: &Kind,
    namespace: Option<&str>,
    name: Option<&String>,
    style: RowStyle,
    (selector, labels): (Option<&StatusSelector>, Option<&str>),
) -> anyhow::Result<ExitCode> {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let mut config = watcher::Config::default();
    if let Some(name) = name {
        config = config.fields(&format!("metadata.name={name}"));
    }
    if let Some(labels) = labels {
        config = config.labels(labels);
    }
    let stream = watcher::watcher(kind.api(client, namespace), config);
    let mut stream = std::pin::pin!(stream);
    let headers = headers(kind, style);
    let mut header = true;
    while let Some(event) = stream.next().await {
        let object = match event.with_context(|| format!("watching {}", kind.type_name))? {
            watcher::Event::Apply(object) | watcher::Event::InitApply(object) => object,
            watcher::Event::Delete(_) | watcher::Event::Init | watcher::Event::InitDone => {
                continue;
            }
        };
        let value = serde_json::to_value(&object)?;
        let rows: Vec<Vec<String>> = selector
            .is_none_or(|s| s.selects(kind, &value))
            .then(|| row(kind, &value, style))
            .into_iter()
            .collect();
        let table = super::format_table(&headers, &rows);
        if header && !style.no_header {
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
    let (kind, name) = args.target.resolve()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_all_covers_every_served_kind_in_flux_order() {
        let mut listed: Vec<&str> = GET_ALL.iter().map(|k| k.type_name).collect();
        listed.sort_unstable();
        let mut served: Vec<&str> = capstan_api::KINDS.iter().map(|k| k.kind).collect();
        served.sort_unstable();
        assert_eq!(listed, served);
        assert_eq!(GET_ALL[..GET_SOURCES_ALL.len()], GET_SOURCES_ALL);
        assert!(GET_SOURCES_ALL.iter().all(|k| k.is_source));
    }

    #[test]
    fn status_selectors_match_as_flux_does() {
        let object = |conditions: Value| serde_json::json!({"status": {"conditions": conditions}});
        let failed = object(serde_json::json!([
            {"type": "Reconciling", "status": "True"},
            {"type": "Ready", "status": "False"}
        ]));
        let none = object(Value::Null);
        let selector = |text| StatusSelector::parse(text).unwrap();
        assert!(selector("ready=false").selects(&KUSTOMIZATION, &failed));
        assert!(selector("READY=False").selects(&KUSTOMIZATION, &failed));
        assert!(!selector("ready=true").selects(&KUSTOMIZATION, &failed));
        assert!(selector("reconciling=true").selects(&KUSTOMIZATION, &failed));
        assert!(!selector("ready!=false").selects(&KUSTOMIZATION, &failed));
        // Without the condition: no match, so `!=` selects it.
        assert!(!selector("ready=false").selects(&RECEIVER, &none));
        assert!(selector("ready!=true").selects(&RECEIVER, &none));
        // Providers and Alerts have no status: Ready=True always.
        assert!(selector("ready=true").selects(&PROVIDER, &none));
        assert!(!selector("ready=false").selects(&ALERT, &none));
        assert!(!selector("stalled=true").selects(&ALERT, &none));
        // `a=b!=c` splits at `!=`, as Flux checks it first; no separator is refused.
        assert_eq!(
            selector("a=b!=c"),
            StatusSelector {
                type_: "a=b".into(),
                status: "c".into(),
                negated: true
            }
        );
        let error = StatusSelector::parse("ready").unwrap_err().to_string();
        assert_eq!(
            error,
            "expected status selector in type=status or type!=status format, but found: ready"
        );
    }

    #[test]
    fn digests_are_shortened_as_flux_does() {
        let sha1 = "67e2c98a0b1c2d3e4f5061728394a5b6c7d8e9f0";
        assert_eq!(
            truncate_hex(&format!("main@sha1:{sha1}")),
            "main@sha1:67e2c98a"
        );
        let sha256 = "a".repeat(64);
        assert_eq!(
            truncate_hex(&format!("Applied revision: v1@sha256:{sha256}, {sha1}.")),
            "Applied revision: v1@sha256:aaaaaaaa, 67e2c98a."
        );
        // Too short, too long, upper case, or part of a longer word: left alone.
        for whole in [
            "a".repeat(39),
            "a".repeat(129),
            "A".repeat(40),
            format!("x{sha1}"),
            format!("{sha1}_1"),
            "0.1.0+67e2c98a0b1c".to_owned(),
        ] {
            assert_eq!(truncate_hex(&whole), whole);
        }
        assert_eq!(truncate_hex("ümlaut é"), "ümlaut é");
    }

    #[test]
    fn notification_kinds_have_flux_columns() {
        let style = RowStyle {
            prefixed: true,
            all_namespaces: false,
            show_source: false,
            no_header: false,
        };
        let provider =
            serde_json::json!({"metadata": {"name": "slack"}, "spec": {"suspend": true}});
        assert_eq!(headers(&PROVIDER, style), ["NAME", "READY", "MESSAGE"]);
        assert_eq!(
            row(&PROVIDER, &provider, style),
            ["provider/slack", "True", "Provider is Ready"]
        );
        assert_eq!(
            row(&ALERT, &provider, style),
            ["alert/slack", "True", "True", "Alert is Ready"]
        );
        assert_eq!(
            headers(&RECEIVER, style),
            ["NAME", "SUSPENDED", "READY", "MESSAGE"]
        );
        assert_eq!(
            row(&RECEIVER, &provider, style),
            [
                "receiver/slack",
                "True",
                "False",
                "waiting to be reconciled"
            ]
        );
    }
}
