//! Logging: `tracing` to stderr as text or as Flux's JSON lines, and, under `capstan dev`, a copy
//! of the controllers' log in a bounded in-memory buffer that the embedded control plane serves as
//! the log of the Pod standing for the controllers (`kubectl logs`, `capstan logs`).
//!
//! The JSON shape is what Flux's controllers (zap through controller-runtime) write and what
//! `flux logs`/`capstan logs` parse: `level` (`debug`, `info`, `error`), `ts` (ISO 8601, UTC),
//! `logger`, `msg`, then the fields. Inside a reconcile (the runtime's `reconcile` span) a line
//! also carries the object as controller-runtime names it: `controller`, `controllerGroup`,
//! `controllerKind`, `<Kind>: {name, namespace}`, `name`, `namespace` and `reconcileID`.

use std::io::Write;
use std::sync::{Arc, OnceLock};

use capstan_apiserver::logs::PodLog;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// The name of the controllers runtime's span around one reconcile.
const RECONCILE_SPAN: &str = "reconcile";

/// The most of the controllers' log `capstan dev` keeps in memory (kubelet rotates at 10 MiB).
const POD_LOG_BYTES: usize = 10 * 1024 * 1024;

/// The in-process controllers' log (JSON lines), filled once [`init`] was asked for it.
pub fn controller_log() -> Arc<PodLog> {
    static LOG: OnceLock<Arc<PodLog>> = OnceLock::new();
    LOG.get_or_init(|| Arc::new(PodLog::new(POD_LOG_BYTES)))
        .clone()
}

/// Installs the global subscriber: `filter` (an `EnvFilter` directive) for everything; stderr as
/// text or Flux JSON; with `pod_log`, Flux JSON lines into [`controller_log`] as well (the
/// control plane's own lines, `capstan_apiserver`, stay out of it: it is the controllers' log).
pub fn init(filter: &str, json: bool, pod_log: bool) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let stderr = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let stderr = if json {
        stderr
            .fmt_fields(JsonFields::new())
            .event_format(FluxJson)
            .boxed()
    } else {
        stderr.boxed()
    };
    let buffer = pod_log.then(|| {
        tracing_subscriber::fmt::layer()
            .fmt_fields(JsonFields::new())
            .event_format(FluxJson)
            .with_writer(ToPodLog(controller_log()))
            .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                !meta.target().starts_with("capstan_apiserver")
            }))
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(stderr)
        .with(buffer)
        .init();
}

/// The labels of the controllers' Pods, in `capstan dev` and in the install manifests: `capstan
/// logs` finds the Pods to read by them.
pub const CONTROLLER_LABELS: [(&str, &str); 2] = [
    ("app.kubernetes.io/part-of", "capstan"),
    ("app.kubernetes.io/component", "controller"),
];

/// The Pod of `capstan dev` that stands for its in-process controllers.
pub const DEV_POD: &str = "capstan-controller-0";

/// The container of the controllers' Pods (Flux's name: `flux logs` picks it in a Pod of several).
pub const CONTAINER: &str = "manager";

/// Creates, in Flux's namespace of the embedded control plane, the Pod standing for the
/// in-process controllers ([`DEV_POD`], labelled [`CONTROLLER_LABELS`], Running) and serves
/// [`controller_log`] as its log, so `kubectl logs` and `capstan logs` read the controllers'
/// log as they would in a cluster.
pub fn register_dev_pod(server: &capstan_apiserver::ApiServer) -> anyhow::Result<()> {
    use capstan_apiserver::cluster::WriteOptions;
    let error = |e: capstan_apiserver::ApiError| anyhow::anyhow!("{e}");
    let cluster = server.cluster();
    let opts = WriteOptions {
        field_manager: "capstan".into(),
        ..WriteOptions::default()
    };
    let namespace = crate::fleet::NAMESPACE;
    let namespaces = cluster.resource("", "v1", "namespaces").map_err(error)?;
    if cluster.get(&namespaces, None, namespace).is_err() {
        let body = serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace},
        });
        cluster
            .create(&namespaces, None, body, &opts)
            .map_err(error)?;
    }
    let pods = cluster.resource("", "v1", "pods").map_err(error)?;
    let labels: Map<String, Value> = CONTROLLER_LABELS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
        .collect();
    let pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": DEV_POD, "namespace": namespace, "labels": labels},
        "spec": {"containers": [{
            "name": CONTAINER,
            "image": format!("capstan:{}", env!("CARGO_PKG_VERSION")),
            "args": ["dev"],
        }]},
    });
    server.register_pod_log(namespace, DEV_POD, controller_log());
    cluster
        .create(&pods, Some(namespace), pod, &opts)
        .map_err(error)?;
    let now = jiff::Timestamp::now().to_string();
    let status = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": DEV_POD, "namespace": namespace},
        "status": {
            "phase": "Running",
            "startTime": now,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
            "containerStatuses": [{
                "name": CONTAINER, "ready": true, "started": true, "restartCount": 0,
                "image": format!("capstan:{}", env!("CARGO_PKG_VERSION")), "imageID": "",
                "state": {"running": {"startedAt": now}},
            }],
        },
    });
    cluster
        .update(
            &pods,
            Some(namespace),
            DEV_POD,
            Some("status"),
            &status,
            &opts,
        )
        .map_err(error)?;
    Ok(())
}

/// Flux's JSON log line (see the module documentation).
pub struct FluxJson;

/// Flux's level names: zap through logr has `debug`, `info` and `error` (a failed reconcile is an
/// error there; Capstan logs it as a warning).
fn level_name(level: Level) -> &'static str {
    match level {
        Level::ERROR | Level::WARN => "error",
        Level::INFO => "info",
        Level::DEBUG | Level::TRACE => "debug",
    }
}

/// The fields of one line in order; a later value replaces an earlier one in place, except for
/// the reconciled object's identity, which the event's own fields never replace.
#[derive(Default)]
struct Entry {
    fields: Vec<(String, Value)>,
    /// The keys of the reconciled object's identity, set by [`Entry::reconcile`] and kept.
    locked: Vec<String>,
}

impl Entry {
    fn set(&mut self, key: &str, value: Value) {
        if self.locked.iter().any(|k| k == key) {
            return;
        }
        match self.fields.iter().position(|(k, _)| k == key) {
            Some(i) => self.fields[i].1 = value,
            None => self.fields.push((key.to_owned(), value)),
        }
    }

    /// The reconcile span's fields under controller-runtime's names.
    fn reconcile(&mut self, span: Map<String, Value>) {
        let text = |key: &str| span.get(key).and_then(Value::as_str).unwrap_or_default();
        let (kind, name, namespace) = (text("kind"), text("name"), text("namespace"));
        self.set("controller", Value::from(kind.to_ascii_lowercase()));
        if let Some(known) = crate::cmd::Kind::by_name(kind) {
            self.set("controllerGroup", Value::from(known.group));
        }
        self.set("controllerKind", Value::from(kind));
        if !kind.is_empty() {
            self.set(
                kind,
                serde_json::json!({"name": name, "namespace": namespace}),
            );
        }
        self.set("namespace", Value::from(namespace));
        self.set("name", Value::from(name));
        if let Some(id) = span.get("reconcile_id") {
            self.set("reconcileID", id.clone());
        }
        self.locked = [
            "controller",
            "controllerGroup",
            "controllerKind",
            kind,
            "namespace",
            "name",
            "reconcileID",
        ]
        .map(str::to_owned)
        .to_vec();
        for (key, value) in span {
            if !matches!(key.as_str(), "kind" | "name" | "namespace" | "reconcile_id") {
                self.set(&key, value);
            }
        }
    }

    fn to_line(&self) -> String {
        let mut line = String::from("{");
        for (i, (key, value)) in self.fields.iter().enumerate() {
            if i > 0 {
                line.push(',');
            }
            line.push_str(&Value::from(key.as_str()).to_string());
            line.push(':');
            line.push_str(&value.to_string());
        }
        line.push('}');
        line
    }
}

impl<S, N> FormatEvent<S, N> for FluxJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let meta = event.metadata();
        let mut entry = Entry::default();
        entry.set("level", Value::from(level_name(*meta.level())));
        entry.set("ts", Value::from(format!("{:.3}", jiff::Timestamp::now())));
        entry.set("logger", Value::from(meta.target()));
        entry.set("msg", Value::from(""));
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(fields) = extensions.get::<FormattedFields<N>>() else {
                    continue;
                };
                let Ok(Value::Object(fields)) = serde_json::from_str(&fields.fields) else {
                    continue;
                };
                if span.name() == RECONCILE_SPAN {
                    entry.reconcile(fields);
                } else {
                    for (key, value) in fields {
                        entry.set(&key, value);
                    }
                }
            }
        }
        let mut visitor = Fields::default();
        event.record(&mut visitor);
        for (key, value) in visitor.0 {
            let key = if key == "message" { "msg" } else { key };
            entry.set(key, value);
        }
        writeln!(writer, "{}", entry.to_line())
    }
}

/// An event's fields as JSON values (`%display` and `?debug` become strings).
#[derive(Default)]
struct Fields(Vec<(&'static str, Value)>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name(), Value::from(value)));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.push((field.name(), Value::from(value)));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.push((field.name(), Value::from(value)));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.push((field.name(), Value::from(value)));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.push((field.name(), Value::from(value)));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .push((field.name(), Value::from(format!("{value:?}"))));
    }
}

/// A `MakeWriter` into a [`PodLog`]: each event's line is pushed when its writer is dropped.
struct ToPodLog(Arc<PodLog>);

struct LineWriter {
    log: Arc<PodLog>,
    buffer: Vec<u8>,
}

impl<'a> MakeWriter<'a> for ToPodLog {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> LineWriter {
        LineWriter {
            log: self.0.clone(),
            buffer: Vec::new(),
        }
    }
}

impl Write for LineWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        for line in String::from_utf8_lossy(&self.buffer).lines() {
            if !line.is_empty() {
                self.log.push(line);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One event inside a reconcile span, formatted as the JSON layer does.
    fn line_of(emit: impl FnOnce()) -> Value {
        let log = Arc::new(PodLog::new(1 << 20));
        let layer = tracing_subscriber::fmt::layer()
            .fmt_fields(JsonFields::new())
            .event_format(FluxJson)
            .with_writer(ToPodLog(log.clone()));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, emit);
        let lines = log.lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        serde_json::from_str(&lines[0].text).expect("a JSON line")
    }

    #[test]
    fn reconcile_lines_carry_what_flux_logs_reads() {
        let line = line_of(|| {
            let span = tracing::info_span!(
                "reconcile",
                kind = "Kustomization",
                namespace = "apps",
                name = "web",
                reconcile_id = "id-1"
            );
            let _entered = span.enter();
            tracing::warn!(error = %"boom", name = "other", "reconcile failed");
        });
        assert_eq!(line["level"], "error");
        assert_eq!(line["msg"], "reconcile failed");
        assert_eq!(line["error"], "boom");
        assert_eq!(line["controllerKind"], "Kustomization");
        assert_eq!(line["controller"], "kustomization");
        assert_eq!(line["controllerGroup"], "kustomize.toolkit.fluxcd.io");
        assert_eq!(line["Kustomization"]["namespace"], "apps");
        assert_eq!(line["name"], "web", "the object's identity wins");
        assert_eq!(line["namespace"], "apps");
        assert_eq!(line["reconcileID"], "id-1");
        let ts = line["ts"].as_str().unwrap();
        assert!(
            ts.ends_with('Z') && ts.parse::<jiff::Timestamp>().is_ok(),
            "{ts}"
        );
    }

    #[test]
    fn lines_outside_a_reconcile_keep_their_fields() {
        let line = line_of(|| tracing::debug!(kind = "GitRepository", count = 3, "changed"));
        assert_eq!(line["level"], "debug");
        assert_eq!(line["kind"], "GitRepository");
        assert_eq!(line["count"], 3);
        assert!(line.get("controllerKind").is_none());
        let keys: Vec<&String> = line.as_object().unwrap().keys().collect();
        assert!(keys.contains(&&"logger".to_owned()));
    }
}
