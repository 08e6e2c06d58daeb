//! `capstan events`: the Events of Flux objects, from both the core (`v1`) and the
//! `events.k8s.io/v1` APIs, as one table.

use std::collections::HashSet;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use super::ClusterArgs;

/// `capstan events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// List the events of every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only the events of this object, `<kind>/<name>`.
    #[arg(long = "for")]
    pub for_object: Option<String>,
    /// After listing, keep printing new events.
    #[arg(short = 'w', long)]
    pub watch: bool,
}

/// The kinds whose events are shown without `--for`.
const FLUX_KINDS: [&str; 10] = [
    "GitRepository",
    "OCIRepository",
    "Bucket",
    "HelmRepository",
    "HelmChart",
    "Kustomization",
    "HelmRelease",
    "Alert",
    "Provider",
    "Receiver",
];

/// One event, whichever API it came from.
#[derive(Debug)]
struct Row {
    key: String,
    namespace: String,
    seen: Option<jiff::Timestamp>,
    type_: String,
    reason: String,
    kind: String,
    name: String,
    message: String,
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn timestamp(candidates: &[&Value]) -> Option<jiff::Timestamp> {
    candidates
        .iter()
        .filter_map(|v| v.as_str())
        .find_map(|s| s.parse().ok())
}

/// Normalises a core or `events.k8s.io` Event.
fn row(event: &Value, core: bool) -> Row {
    let metadata = &event["metadata"];
    let (regarding, message, seen) = if core {
        (
            &event["involvedObject"],
            text(&event["message"]),
            timestamp(&[
                &event["series"]["lastObservedTime"],
                &event["lastTimestamp"],
                &event["eventTime"],
                &metadata["creationTimestamp"],
            ]),
        )
    } else {
        (
            &event["regarding"],
            text(&event["note"]),
            timestamp(&[
                &event["series"]["lastObservedTime"],
                &event["deprecatedLastTimestamp"],
                &event["eventTime"],
                &metadata["creationTimestamp"],
            ]),
        )
    };
    let uid = text(&metadata["uid"]);
    Row {
        key: if uid.is_empty() {
            format!(
                "{}/{}",
                text(&metadata["namespace"]),
                text(&metadata["name"])
            )
        } else {
            uid
        },
        namespace: text(&metadata["namespace"]),
        seen,
        type_: text(&event["type"]),
        reason: text(&event["reason"]),
        kind: text(&regarding["kind"]),
        name: text(&regarding["name"]),
        message: message.trim().to_owned(),
    }
}

/// A kubectl-style age: `45s`, `3m12s`, `17m`, `5h3m`, `20h`, `3d`.
fn age(seen: Option<jiff::Timestamp>) -> String {
    let Some(seen) = seen else {
        return "<unknown>".to_owned();
    };
    let seconds = (jiff::Timestamp::now().as_second() - seen.as_second()).max(0);
    let (m, h) = (seconds / 60, seconds / 3600);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{m}m{}s", s % 60),
        s if s < 3 * 3600 => format!("{m}m"),
        s if s < 8 * 3600 => format!("{h}h{}m", m % 60),
        s if s < 48 * 3600 => format!("{h}h"),
        s => format!("{}d", s / 86400),
    }
}

async fn list(client: &Client, namespace: Option<&str>) -> anyhow::Result<Vec<(Row, String)>> {
    let apis = [
        (GroupVersionKind::gvk("", "v1", "Event"), true),
        (GroupVersionKind::gvk("events.k8s.io", "v1", "Event"), false),
    ];
    let mut rows = Vec::new();
    let mut seen = HashSet::new();
    for (gvk, core) in apis {
        let resource = ApiResource::from_gvk_with_plural(&gvk, "events");
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let events = api
            .list(&ListParams::default())
            .await
            .with_context(|| format!("listing {} events", resource.api_version))?;
        for event in events.items {
            let version = event.metadata.resource_version.clone().unwrap_or_default();
            let row = row(&serde_json::to_value(event)?, core);
            // The two APIs are views of one store on real clusters: show each event once.
            if seen.insert(row.key.clone()) {
                rows.push((row, version));
            }
        }
    }
    rows.sort_by_key(|(r, _)| r.seen);
    Ok(rows)
}

fn wanted(args: &EventsArgs, row: &Row) -> bool {
    match &args.for_object {
        Some(target) => {
            let (kind, name) = target.split_once('/').unwrap_or(("", target));
            (kind.is_empty() || row.kind.eq_ignore_ascii_case(kind)) && row.name == name
        }
        None => FLUX_KINDS.contains(&row.kind.as_str()),
    }
}

fn cells(row: &Row, all_namespaces: bool) -> Vec<String> {
    let mut cells = Vec::with_capacity(6);
    if all_namespaces {
        cells.push(row.namespace.clone());
    }
    cells.extend([
        age(row.seen),
        row.type_.clone(),
        row.reason.clone(),
        format!("{}/{}", row.kind, row.name),
        row.message.clone(),
    ]);
    cells
}

/// Prints the events table; with `--watch`, keeps polling and printing new or updated events.
pub async fn run(args: EventsArgs) -> anyhow::Result<ExitCode> {
    if let Some(target) = &args.for_object
        && !target.contains('/')
    {
        anyhow::bail!("invalid --for '{target}': expected <kind>/<name>");
    }
    let client = args.cluster.client().await?;
    let namespace = (!args.all_namespaces).then_some(args.cluster.namespace.as_str());
    let mut headers = vec!["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"];
    if args.all_namespaces {
        headers.insert(0, "NAMESPACE");
    }
    let rows = list(&client, namespace).await?;
    let mut printed: HashSet<(String, String)> = HashSet::new();
    let mut table = Vec::new();
    for (row, version) in &rows {
        printed.insert((row.key.clone(), version.clone()));
        if wanted(&args, row) {
            table.push(cells(row, args.all_namespaces));
        }
    }
    if table.is_empty() && !args.watch {
        super::say::failure(&format!(
            "no events found in {} namespace",
            namespace.unwrap_or("any")
        ));
        return Ok(ExitCode::SUCCESS);
    }
    super::print_table(&headers, &table);
    if !args.watch {
        return Ok(ExitCode::SUCCESS);
    }
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        for (row, version) in list(&client, namespace).await? {
            if printed.insert((row.key.clone(), version)) && wanted(&args, &row) {
                outln!("{}", cells(&row, args.all_namespaces).join("\t"));
            }
        }
    }
}
