//! `capstan logs`: the controllers' log lines, filtered by object, as `flux logs` prints them.
//!
//! The logs are read as `flux logs` reads Flux's: through the Kubernetes `pods/log` API, from the
//! controller Pods in the install namespace (`--flux-namespace`), found by their labels
//! ([`crate::logging::CONTROLLER_LABELS`]). So the verb works the same against `capstan dev`,
//! whose control plane serves its in-process controllers' log as a Pod's, and against a cluster
//! running Capstan's Deployment. Lines that are not JSON are skipped (Flux's rule).

use std::pin::Pin;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use futures::AsyncBufReadExt;
use futures::stream::{self, BoxStream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, LogParams};
use serde::Deserialize;

use super::ClusterArgs;
use crate::logging::{CONTAINER, CONTROLLER_LABELS};

/// `capstan logs`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Only lines of this level.
    #[arg(long, value_enum)]
    pub level: Option<Level>,
    /// Only lines about objects of this kind (e.g. `GitRepository`; any case).
    #[arg(long)]
    pub kind: Option<String>,
    /// Only lines about objects of this name.
    #[arg(long)]
    pub name: Option<String>,
    /// Lines about objects of every namespace (default: those of `--namespace`).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Keep printing new lines as the controllers write them.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Lines of the end of each log to read (-1: all).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub tail: i64,
    /// Only lines newer than this (`5s`, `2m`, `3h`).
    #[arg(long, value_parser = parse_duration, conflicts_with = "since_time")]
    pub since: Option<Duration>,
    /// Only lines after this time (RFC 3339).
    #[arg(long)]
    pub since_time: Option<String>,
    /// The namespace the controllers run in.
    #[arg(long, default_value = "flux-system")]
    pub flux_namespace: String,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    capstan_api::duration::parse_go_duration(text).map_err(|e| e.to_string())
}

/// The levels of Flux's logs (zap through logr).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Level {
    Debug,
    Info,
    Error,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Error => "error",
        }
    }
}

/// The fields of a controller log line that `flux logs` reads.
#[derive(Debug, Default, Deserialize)]
struct Entry {
    #[serde(default)]
    ts: String,
    #[serde(default)]
    level: String,
    #[serde(default)]
    msg: String,
    #[serde(default)]
    error: String,
    /// The kind as older Flux controllers named it.
    #[serde(default, rename = "reconciler kind")]
    reconciler_kind: String,
    #[serde(default, rename = "controllerKind")]
    controller_kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
}

impl Entry {
    fn kind(&self) -> &str {
        if self.reconciler_kind.is_empty() {
            &self.controller_kind
        } else {
            &self.reconciler_kind
        }
    }

    /// Flux's line: `TS LEVEL KIND/NAME.NAMESPACE - MSG ERROR`.
    fn render(&self) -> String {
        let object = if self.name.is_empty() {
            String::new()
        } else {
            format!("/{}.{}", self.name, self.namespace)
        };
        format!(
            "{} {} {}{object} - {} {}",
            self.ts,
            self.level,
            self.kind(),
            self.msg,
            self.error
        )
    }
}

impl LogsArgs {
    /// Flux's filter: level, kind (either field), name (any case) and, without `-A`, namespace.
    fn wanted(&self, entry: &Entry) -> bool {
        self.level.is_none_or(|l| l.name() == entry.level)
            && self.kind.as_deref().is_none_or(|k| {
                k.eq_ignore_ascii_case(&entry.reconciler_kind)
                    || k.eq_ignore_ascii_case(&entry.controller_kind)
            })
            && self
                .name
                .as_deref()
                .is_none_or(|n| n.eq_ignore_ascii_case(&entry.name))
            && (self.all_namespaces
                || self
                    .cluster
                    .namespace
                    .eq_ignore_ascii_case(&entry.namespace))
    }

    fn params(&self) -> anyhow::Result<LogParams> {
        let since_time = match &self.since_time {
            Some(text) => Some(
                text.parse::<jiff::Timestamp>()
                    .with_context(|| format!("{text} is not a valid (RFC3339) time"))?,
            ),
            None => None,
        };
        Ok(LogParams {
            follow: self.follow,
            tail_lines: (self.tail > -1).then_some(self.tail),
            // Rounded to the second, as Flux does.
            since_seconds: self
                .since
                .map(|d| i64::try_from(d.as_millis().div_ceil(1000)).unwrap_or(i64::MAX)),
            since_time,
            ..LogParams::default()
        })
    }
}

/// The controller Pods to read: those running, else any (one each is enough to show why).
async fn controller_pods(api: &Api<Pod>, namespace: &str) -> anyhow::Result<Vec<Pod>> {
    let selector = CONTROLLER_LABELS
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let pods = api
        .list(&ListParams::default().labels(&selector))
        .await
        .with_context(|| format!("listing the controller Pods in namespace {namespace:?}"))?
        .items;
    let running = |p: &Pod| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            && p.metadata.deletion_timestamp.is_none()
    };
    let (running, other): (Vec<Pod>, Vec<Pod>) = pods.into_iter().partition(running);
    let pods = if running.is_empty() { other } else { running };
    if pods.is_empty() {
        bail!("no Capstan controller pods found in namespace {namespace:?} (labels {selector})");
    }
    Ok(pods)
}

type Lines = BoxStream<'static, (String, std::io::Result<String>)>;

/// The lines of one Pod's log, each with the Pod's name.
async fn pod_lines(api: &Api<Pod>, pod: &Pod, params: &LogParams) -> anyhow::Result<Lines> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let mut params = params.clone();
    let containers = pod.spec.as_ref().map_or(0, |s| s.containers.len());
    if containers > 1 {
        params.container = Some(CONTAINER.to_owned());
    }
    let log = api
        .log_stream(&name, &params)
        .await
        .with_context(|| format!("reading the log of Pod {name}"))?;
    let lines: Pin<Box<_>> = Box::pin(log.lines());
    Ok(lines.map(move |line| (name.clone(), line)).boxed())
}

/// Prints the controllers' log lines that pass the filters; with `--follow`, until interrupted.
pub async fn run(args: LogsArgs) -> anyhow::Result<ExitCode> {
    let params = args.params()?;
    let client = args.cluster.client().await?;
    let api: Api<Pod> = Api::namespaced(client, &args.flux_namespace);
    let pods = controller_pods(&api, &args.flux_namespace).await?;
    let mut failed = false;
    let mut streams = Vec::new();
    for pod in &pods {
        match pod_lines(&api, pod, &params).await {
            Ok(lines) => streams.push(lines),
            Err(e) => {
                eprintln!("failed getting logs: {e:#}");
                failed = true;
            }
        }
    }
    // Followed logs interleave as lines arrive; whole logs are printed one Pod after another.
    let mut lines: Lines = if args.follow {
        stream::select_all(streams).boxed()
    } else {
        stream::iter(streams).flatten().boxed()
    };
    while let Some((pod, line)) = lines.next().await {
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                eprintln!("failed getting logs of Pod {pod}: {e}");
                failed = true;
                continue;
            }
        };
        if !line.starts_with('{') {
            continue;
        }
        match serde_json::from_str::<Entry>(&line) {
            Ok(entry) if args.wanted(&entry) => outln!("{}", entry.render()),
            Ok(_) => {}
            Err(e) => super::say::failure(&format!("parse error in the log of Pod {pod}: {e}")),
        }
    }
    if failed {
        bail!("failed to collect logs from all controller pods");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_print_as_flux_prints_them() {
        let entry: Entry = serde_json::from_str(
            r#"{"level":"error","ts":"2026-01-01T00:00:00.000Z","msg":"reconcile failed",
                "controllerKind":"Kustomization","name":"web","namespace":"apps","error":"boom"}"#,
        )
        .unwrap();
        assert_eq!(
            entry.render(),
            "2026-01-01T00:00:00.000Z error Kustomization/web.apps - reconcile failed boom"
        );
        let plain: Entry = serde_json::from_str(r#"{"level":"info","msg":"started"}"#).unwrap();
        assert_eq!(plain.render(), " info  - started ");
    }
}
