//! The Flux-like verbs of the `capstan` binary (`create`, `get`, `reconcile`, `suspend`,
//! `resume`, `delete`, `export`, `build`, `diff`, `tree`, `trace`, `events`).
//!
//! Every verb works on the same small table of kinds ([`Kind`], built from the [`FluxKind`] facts
//! on each API type): GitRepository, OCIRepository, Bucket, HelmRepository, HelmChart,
//! Kustomization, HelmRelease and the notification kinds (Provider, Alert, Receiver), reached
//! as [`DynamicObject`]s through their [`ApiResource`], so one implementation serves all kinds.
//! Progress goes to stderr with Flux's markers (`►`, `◎`, `✔`, `✗`, `✚`); tables and documents
//! go to stdout.

pub mod build;
pub mod create;
pub mod envsubst;
pub mod events;
pub mod get;
pub mod lifecycle;
pub mod logs;
pub mod migrate;
pub mod stats;
pub mod tree;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use capstan_api::kind::ConditionView;
use capstan_api::meta::{annotation, condition};
use capstan_api::{
    Alert, Bucket, ExternalArtifact, FluxKind, GitRepository, HelmChart, HelmRelease,
    HelmRepository, Kustomization, OCIRepository, Provider, Receiver,
};
use clap::{Args, Subcommand, ValueEnum};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client};
use serde_json::Value;

/// How to reach the cluster and which namespace to work in (kubectl's flags).
#[derive(Clone, Debug, Args)]
pub struct ClusterArgs {
    /// Path to the kubeconfig file (default: `$KUBECONFIG`, then `~/.kube/config`).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The namespace scope of the operation.
    #[arg(short = 'n', long, global = true, default_value = "flux-system")]
    pub namespace: String,
}

impl ClusterArgs {
    /// A kube client for these flags.
    pub async fn client(&self) -> anyhow::Result<Client> {
        capstan_source::tls::install_default_provider();
        crate::controller::client(self.kubeconfig.as_ref(), self.context.as_deref()).await
    }
}

/// How objects are printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Columns, as Flux prints them.
    #[default]
    Table,
    /// YAML documents.
    Yaml,
    /// JSON (a `List` when there are several objects).
    Json,
}

/// One Flux kind the verbs work on.
#[derive(Debug, PartialEq, Eq)]
pub struct Kind {
    /// `GitRepository`.
    pub type_name: &'static str,
    /// `source.toolkit.fluxcd.io`.
    pub group: &'static str,
    /// `v1`.
    pub version: &'static str,
    /// `gitrepositories`.
    pub plural: &'static str,
    /// How Flux names the kind in messages: `GitRepository source`, `Kustomization`.
    pub display: &'static str,
    /// How Flux names the kind in `get all` rows and `suspend`/`delete` messages: `gitrepository`.
    pub short: &'static str,
    /// Whether this is a source (its revision is `status.artifact.revision`).
    pub is_source: bool,
}

/// GitRepository.
pub const GIT: Kind = Kind::of::<GitRepository>();

/// OCIRepository.
pub const OCI: Kind = Kind::of::<OCIRepository>();

/// Bucket.
pub const BUCKET: Kind = Kind::of::<Bucket>();

/// HelmRepository.
pub const HELM_REPOSITORY: Kind = Kind::of::<HelmRepository>();

/// HelmChart.
pub const HELM_CHART: Kind = Kind::of::<HelmChart>();

/// ExternalArtifact (a source produced by another controller; no Capstan reconciler).
pub const EXTERNAL_ARTIFACT: Kind = Kind::of::<ExternalArtifact>();

/// Kustomization.
pub const KUSTOMIZATION: Kind = Kind::of::<Kustomization>();

/// HelmRelease.
pub const HELM_RELEASE: Kind = Kind::of::<HelmRelease>();

/// Receiver (notification; `capstan_controllers::receiver`).
pub const RECEIVER: Kind = Kind::of::<Receiver>();

/// Provider (notification; no status: Flux prints it Ready).
pub const PROVIDER: Kind = Kind::of::<Provider>();

/// Alert (notification; no status: Flux prints it Ready).
pub const ALERT: Kind = Kind::of::<Alert>();

/// Every kind Capstan serves, in the CRD order of [`capstan_api::KINDS`]: the one list of the
/// CLI's kinds (`get all` prints them in Flux's order, [`get::GET_ALL`]).
pub const ALL: [&Kind; 11] = [
    &GIT,
    &OCI,
    &BUCKET,
    &HELM_REPOSITORY,
    &HELM_CHART,
    &EXTERNAL_ARTIFACT,
    &KUSTOMIZATION,
    &HELM_RELEASE,
    &PROVIDER,
    &ALERT,
    &RECEIVER,
];

impl Kind {
    /// The row of a kind, from the facts on its API type.
    pub const fn of<T: FluxKind>() -> Kind {
        let info = T::INFO;
        Kind {
            type_name: info.kind,
            group: info.group,
            version: info.version,
            plural: info.plural,
            display: info.display,
            short: info.singular,
            is_source: info.is_source(),
        }
    }

    /// The kind of a source reference (`GitRepository`, `OCIRepository`, `Bucket`).
    pub fn by_name(kind: &str) -> Option<&'static Kind> {
        ALL.into_iter()
            .find(|k| k.type_name.eq_ignore_ascii_case(kind))
    }

    /// `group/version`.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    /// The API resource.
    pub fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.type_name),
            self.plural,
        )
    }

    /// The API in `namespace`, or across namespaces when `None`.
    pub fn api(&self, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &self.resource()),
            None => Api::all_with(client.clone(), &self.resource()),
        }
    }

    /// Reads one object as JSON; errors name it when it does not exist.
    pub async fn get(&self, client: &Client, namespace: &str, name: &str) -> anyhow::Result<Value> {
        let object = self
            .api(client, Some(namespace))
            .get_opt(name)
            .await
            .with_context(|| format!("reading {} {namespace}/{name}", self.type_name))?;
        match object {
            Some(object) => Ok(serde_json::to_value(object)?),
            None => bail!(
                "{} '{name}' not found in namespace '{namespace}'",
                self.type_name
            ),
        }
    }

    /// Lists objects as JSON, sorted by namespace and name.
    pub async fn list(
        &self,
        client: &Client,
        namespace: Option<&str>,
    ) -> anyhow::Result<Vec<Value>> {
        self.list_labelled(client, namespace, None).await
    }

    /// Lists objects as JSON (with a label selector, `app=web,tier!=db`, those it selects),
    /// sorted by namespace and name. The error keeps the [`kube::Error`] for `downcast_ref`.
    pub async fn list_labelled(
        &self,
        client: &Client,
        namespace: Option<&str>,
        labels: Option<&str>,
    ) -> anyhow::Result<Vec<Value>> {
        let params = match labels {
            Some(labels) => kube::api::ListParams::default().labels(labels),
            None => kube::api::ListParams::default(),
        };
        let list = self
            .api(client, namespace)
            .list(&params)
            .await
            .with_context(|| match labels {
                Some(labels) => format!("listing {} with labels {labels:?}", self.plural),
                None => format!("listing {}", self.plural),
            })?;
        let mut items: Vec<Value> = list
            .items
            .into_iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?;
        items.sort_by_key(|o| (namespace_of(o).to_owned(), name_of(o).to_owned()));
        Ok(items)
    }

    /// The revision of an object: `status.artifact.revision` for sources,
    /// `status.lastAppliedRevision` for Kustomizations, and for HelmReleases, as Flux prints it,
    /// the chart version of the newest `status.history` snapshot (else
    /// `status.lastAttemptedRevision`).
    pub fn revision<'a>(&self, object: &'a Value) -> &'a str {
        let status = &object["status"];
        let revision = if self.is_source {
            &status["artifact"]["revision"]
        } else if self == &HELM_RELEASE {
            match &status["history"][0]["chartVersion"] {
                Value::String(version) => return version,
                _ => &status["lastAttemptedRevision"],
            }
        } else {
            &status["lastAppliedRevision"]
        };
        revision.as_str().unwrap_or_default()
    }

    /// Whether the object is static: no controller reconciles it, so it is ready as it exists
    /// (Flux's HelmRepository of `type: oci`, and Providers and Alerts, which have no status).
    pub fn is_static(&self, object: &Value) -> bool {
        (self == &HELM_REPOSITORY && object["spec"]["type"] == "oci")
            || self == &PROVIDER
            || self == &ALERT
    }

    /// What Flux prints once the object is ready: `fetched revision X` / `applied revision X`.
    pub fn revision_message(&self, object: &Value) -> String {
        let verb = if self.is_source { "fetched" } else { "applied" };
        format!("{verb} revision {}", self.revision(object))
    }
}

/// `metadata.name`.
pub fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// `metadata.namespace`.
pub fn namespace_of(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}

/// The condition of `type_` in `status.conditions`.
pub fn condition_of<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The `Ready` status and message as Flux's `get` prints them (`False` and `waiting to be
/// reconciled` when there is no condition yet).
pub fn ready_status(object: &Value) -> (String, String) {
    match condition_of(object, condition::READY) {
        Some(c) => (
            c["status"].as_str().unwrap_or("Unknown").to_owned(),
            c["message"].as_str().unwrap_or_default().to_owned(),
        ),
        None => ("False".to_owned(), "waiting to be reconciled".to_owned()),
    }
}

/// `spec.suspend`.
pub fn suspended(object: &Value) -> bool {
    object["spec"]["suspend"].as_bool().unwrap_or(false)
}

/// Where an object stands while waiting for it.
pub use capstan_api::Readiness;

/// The readiness of an object, as [`capstan_api::readiness`] reads its status.
pub fn readiness(object: &Value) -> Readiness {
    fn view(c: &Value) -> ConditionView<'_> {
        ConditionView {
            type_: c["type"].as_str().unwrap_or_default(),
            status: c["status"].as_str().unwrap_or_default(),
            reason: c["reason"].as_str().unwrap_or_default(),
            message: c["message"].as_str().unwrap_or_default(),
            observed_generation: c["observedGeneration"].as_i64(),
        }
    }
    let conditions = object["status"]["conditions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    capstan_api::readiness(
        object["metadata"]["generation"].as_i64(),
        object["status"]["observedGeneration"].as_i64(),
        conditions.iter().map(view),
    )
}

/// Polls the object until it is ready (and, when `requested` is given, has handled that
/// `reconcile.fluxcd.io/requestedAt` token). Errors carry the condition message on failure and
/// the last message on timeout.
pub async fn wait_ready(
    client: &Client,
    kind: &Kind,
    namespace: &str,
    name: &str,
    requested: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<Value> {
    let start = Instant::now();
    loop {
        let object = kind.get(client, namespace, name).await?;
        if kind.is_static(&object) {
            return Ok(object);
        }
        let handled = requested
            .is_none_or(|token| object["status"]["lastHandledReconcileAt"].as_str() == Some(token));
        let last = if handled {
            match readiness(&object) {
                Readiness::Ready => return Ok(object),
                Readiness::Failed(message) => bail!("{message}"),
                Readiness::Pending(message) => message,
            }
        } else {
            "waiting for the reconcile request to be handled".to_owned()
        };
        if start.elapsed() > timeout {
            bail!(
                "timed out after {} waiting for {} {namespace}/{name}: {last}",
                capstan_api::format_go_duration(timeout),
                kind.type_name
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Sets `reconcile.fluxcd.io/requestedAt` (and each annotation of `also`, e.g. a HelmRelease's
/// `reconcile.fluxcd.io/forceAt`, as Flux does) to now and returns the token.
pub async fn request_reconcile(
    client: &Client,
    kind: &Kind,
    namespace: &str,
    name: &str,
    also: &[&str],
) -> anyhow::Result<String> {
    let token = jiff::Timestamp::now().to_string();
    let mut annotations = serde_json::Map::new();
    for key in std::iter::once(&annotation::RECONCILE_REQUESTED_AT).chain(also) {
        annotations.insert((*key).to_owned(), Value::from(token.clone()));
    }
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    kind.api(client, Some(namespace))
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .with_context(|| format!("annotating {} {namespace}/{name}", kind.type_name))?;
    Ok(token)
}

/// Parses a Go duration flag (`1m`, `30s`, `1h30m`).
pub fn duration_flag(flag: &str, value: &str) -> anyhow::Result<Duration> {
    capstan_api::parse_go_duration(value)
        .map_err(|e| anyhow::anyhow!("invalid --{flag} '{value}': {e}"))
}

/// A Go duration flag normalised as Kubernetes stores `metav1.Duration` (`1m` → `1m0s`).
pub fn normalized_duration(flag: &str, value: &str) -> anyhow::Result<String> {
    Ok(capstan_api::format_go_duration(duration_flag(flag, value)?))
}

/// Flux's progress lines, on stderr.
pub mod say {
    /// `► …`: an action starts.
    pub fn action(message: &str) {
        eprintln!("► {message}");
    }
    /// `✚ …`: something is generated.
    pub fn generate(message: &str) {
        eprintln!("✚ {message}");
    }
    /// `◎ …`: waiting.
    pub fn waiting(message: &str) {
        eprintln!("◎ {message}");
    }
    /// `✔ …`: success.
    pub fn success(message: &str) {
        eprintln!("✔ {message}");
    }
    /// `✗ …`: failure.
    pub fn failure(message: &str) {
        eprintln!("✗ {message}");
    }
}

/// YAML documents, each introduced by `---` (as Flux prints them).
pub fn yaml_documents(objects: &[Value]) -> String {
    let mut out = String::new();
    for object in objects {
        out.push_str("---\n");
        out.push_str(&capstan_kustomize::to_yaml_document(object));
    }
    out
}

/// Prints objects as YAML documents or JSON (one object, or a `List`).
pub fn print_objects(objects: &[Value], output: Output) -> anyhow::Result<()> {
    match output {
        Output::Yaml | Output::Table => out!("{}", yaml_documents(objects)),
        Output::Json => {
            let value = match objects {
                [one] => one.clone(),
                many => serde_json::json!({"apiVersion": "v1", "kind": "List", "items": many}),
            };
            outln!("{}", serde_json::to_string_pretty(&value)?);
        }
    }
    Ok(())
}

/// Prints a table as Flux does: columns padded to their widest cell, separated by a tab.
pub fn print_table(headers: &[&str], rows: &[Vec<String>]) {
    out!("{}", format_table(headers, rows));
}

/// Formats a table: columns padded to their widest cell, separated by a tab.
pub fn format_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, cell) in cells.enumerate() {
            if i + 1 == widths.len() {
                text.push_str(cell);
            } else {
                let pad = widths[i].saturating_sub(cell.chars().count());
                text.push_str(cell);
                text.push_str(&" ".repeat(pad));
                text.push('\t');
            }
        }
        text.trim_end().to_owned() + "\n"
    };
    let mut out = line(&mut headers.iter().copied());
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

/// Whether a name was given; the verbs that need one say so.
pub fn required_name(name: Option<&String>, kind: &Kind) -> anyhow::Result<String> {
    name.cloned()
        .ok_or_else(|| anyhow::anyhow!("{} name is required", kind.type_name))
}

/// The target kind of `reconcile`/`suspend`/`resume`/`delete`/`export`.
#[derive(Clone, Debug, Subcommand)]
pub enum Target {
    /// A source: `git`, `oci`, `bucket`, `helm` or `chart`.
    #[command(subcommand)]
    Source(SourceTarget),
    /// A Kustomization.
    #[command(alias = "ks")]
    Kustomization(NameArg),
    /// A HelmRelease.
    #[command(alias = "hr")]
    Helmrelease(NameArg),
    /// A Receiver.
    #[command(alias = "rcv")]
    Receiver(NameArg),
    /// An Alert.
    Alert(NameArg),
    /// An alert Provider.
    AlertProvider(NameArg),
}

/// The source kinds.
#[derive(Clone, Debug, Subcommand)]
pub enum SourceTarget {
    /// A GitRepository.
    Git(NameArg),
    /// An OCIRepository.
    Oci(NameArg),
    /// A Bucket.
    Bucket(NameArg),
    /// A HelmRepository.
    Helm(NameArg),
    /// A HelmChart.
    Chart(NameArg),
}

/// The object's name (`suspend` and `resume` take several, as Flux's do).
#[derive(Clone, Debug, Args)]
pub struct NameArg {
    /// The object's name.
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
}

impl Target {
    /// The kind and the names given.
    pub fn resolve_names(&self) -> (&'static Kind, &[String]) {
        let (kind, names) = match self {
            Target::Source(SourceTarget::Git(n)) => (&GIT, n),
            Target::Source(SourceTarget::Oci(n)) => (&OCI, n),
            Target::Source(SourceTarget::Bucket(n)) => (&BUCKET, n),
            Target::Source(SourceTarget::Helm(n)) => (&HELM_REPOSITORY, n),
            Target::Source(SourceTarget::Chart(n)) => (&HELM_CHART, n),
            Target::Kustomization(n) => (&KUSTOMIZATION, n),
            Target::Helmrelease(n) => (&HELM_RELEASE, n),
            Target::Receiver(n) => (&RECEIVER, n),
            Target::Alert(n) => (&ALERT, n),
            Target::AlertProvider(n) => (&PROVIDER, n),
        };
        (kind, &names.names)
    }

    /// The kind and the name given, for the verbs that take one (`reconcile`, `delete`,
    /// `export`): several names are refused.
    pub fn resolve(&self) -> anyhow::Result<(&'static Kind, Option<&String>)> {
        let (kind, names) = self.resolve_names();
        if names.len() > 1 {
            bail!(
                "one {} name expected, found {}: {}",
                kind.short,
                names.len(),
                names.join(" ")
            );
        }
        Ok((kind, names.first()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_table_follows_the_api_facts() {
        let crd_order: Vec<&str> = capstan_api::KINDS.iter().map(|k| k.kind).collect();
        let positions: Vec<usize> = ALL
            .iter()
            .map(|k| crd_order.iter().position(|c| *c == k.type_name).unwrap())
            .collect();
        assert!(positions.is_sorted(), "{positions:?}");
        let sources: Vec<&str> = ALL
            .iter()
            .filter(|k| k.is_source)
            .map(|k| k.type_name)
            .collect();
        assert_eq!(
            sources,
            [
                "GitRepository",
                "OCIRepository",
                "Bucket",
                "HelmRepository",
                "HelmChart",
                "ExternalArtifact"
            ]
        );
        assert_eq!(ALL.len(), capstan_api::KINDS.len(), "every served kind");
        assert_eq!(Kind::by_name("bucket"), Some(&BUCKET));
    }

    #[test]
    fn readiness_follows_generation_and_conditions() {
        let object = |observed: i64, conditions: Value| {
            serde_json::json!({
                "metadata": {"generation": 2},
                "status": {"observedGeneration": observed, "conditions": conditions}
            })
        };
        let ready = serde_json::json!([{"type": "Ready", "status": "True", "message": "ok"}]);
        assert_eq!(readiness(&object(2, ready.clone())), Readiness::Ready);
        assert!(matches!(
            readiness(&object(1, ready)),
            Readiness::Pending(_)
        ));
        let failed = serde_json::json!([{"type": "Ready", "status": "False", "message": "boom"}]);
        assert_eq!(
            readiness(&object(2, failed)),
            Readiness::Failed("boom".into())
        );
        let progressing = serde_json::json!([
            {"type": "Ready", "status": "False", "message": "building"},
            {"type": "Reconciling", "status": "True", "reason": "Progressing"}
        ]);
        assert!(matches!(
            readiness(&object(2, progressing)),
            Readiness::Pending(_)
        ));
    }

    #[test]
    fn tables_pad_columns_with_tabs() {
        let table = format_table(
            &["NAME", "READY"],
            &[
                vec!["podinfo".into(), "True".into()],
                vec!["a".into(), "False".into()],
            ],
        );
        assert_eq!(table, "NAME   \tREADY\npodinfo\tTrue\na      \tFalse\n");
    }
}
