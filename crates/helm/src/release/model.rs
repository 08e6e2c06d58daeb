//! The `release.v1` types, field for field as Helm v4.2.3 marshals them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use super::serde_helpers::{
    base64_bytes, base64_option, go_time, go_time_required, hook_events, is_false, is_zero,
    nullable,
};
use crate::output::HookEvent;

/// One revision of a release (Helm's `release.Release`).
///
/// Its `Debug` leaves out the values, the manifest and the hooks' documents (they may hold
/// secrets), showing their sizes instead.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Release {
    /// The release name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Times, status, description, notes.
    #[serde(default, deserialize_with = "nullable")]
    pub info: Info,
    /// The chart released (without its subcharts: Helm does not store them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<Chart>,
    /// The user-supplied values (`helm get values`), not the chart's defaults.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Map::is_empty"
    )]
    pub config: Map<String, Json>,
    /// The rendered manifest: the non-hook documents, each after `---\n# Source: <path>\n`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub manifest: String,
    /// The hooks of this revision, with their last runs.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub hooks: Vec<Hook>,
    /// The revision, from 1.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub version: i64,
    /// The namespace the release's objects live in.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// `ssa` (server-side apply) or `csa`; empty means client-side apply (Helm v3 releases).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub apply_method: String,
    /// The record's custom labels (Helm keeps them on the Secret, not in the JSON; the storage
    /// driver fills them in and writes them back, without Helm's own labels).
    #[serde(skip)]
    pub labels: BTreeMap<String, String>,
    /// Fields a newer Helm wrote that this model does not know, kept as they were.
    #[serde(flatten)]
    pub extra: Map<String, Json>,
}

impl std::fmt::Debug for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Release")
            .field("name", &self.name)
            .field("namespace", &self.namespace)
            .field("version", &self.version)
            .field("status", &self.info.status)
            .field("description", &self.info.description)
            .field("first_deployed", &self.info.first_deployed)
            .field("last_deployed", &self.info.last_deployed)
            .field(
                "chart",
                &format_args!("{}-{}", self.chart_name(), self.chart_version()),
            )
            .field(
                "config",
                &format_args!("<{} top-level keys>", self.config.len()),
            )
            .field("manifest", &format_args!("<{} bytes>", self.manifest.len()))
            .field(
                "hooks",
                &self
                    .hooks
                    .iter()
                    .map(|h| h.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("apply_method", &self.apply_method)
            .field("labels", &self.labels)
            .finish_non_exhaustive()
    }
}

impl Release {
    /// `ssa`: the release was applied with server-side apply (as Capstan applies).
    pub const APPLY_METHOD_SERVER_SIDE: &'static str = "ssa";
    /// `csa`: client-side apply.
    pub const APPLY_METHOD_CLIENT_SIDE: &'static str = "csa";

    /// A revision of `name` in `namespace` made of `chart`: status `unknown`, no times, values,
    /// manifest or hooks yet, applied with server-side apply.
    pub fn new(name: &str, namespace: &str, version: i64, chart: Chart) -> Self {
        Release {
            name: name.to_string(),
            info: Info::default(),
            chart: Some(chart),
            config: Map::new(),
            manifest: String::new(),
            hooks: Vec::new(),
            version,
            namespace: namespace.to_string(),
            apply_method: Self::APPLY_METHOD_SERVER_SIDE.to_string(),
            labels: BTreeMap::new(),
            extra: Map::new(),
        }
    }

    /// The status of this revision.
    pub fn status(&self) -> Status {
        self.info.status
    }

    /// Sets the status and the description (Helm's `SetStatus`).
    pub fn set_status(&mut self, status: Status, description: impl Into<String>) {
        self.info.status = status;
        self.info.description = description.into();
    }

    /// The chart's metadata, when the record has a chart with metadata.
    pub fn metadata(&self) -> Option<&Metadata> {
        self.chart
            .as_ref()
            .and_then(|chart| chart.metadata.as_ref())
    }

    /// The chart's name (empty when the record has none).
    pub fn chart_name(&self) -> &str {
        self.metadata().map_or("", |m| m.name.as_str())
    }

    /// The chart's version (empty when the record has none).
    pub fn chart_version(&self) -> &str {
        self.metadata().map_or("", |m| m.version.as_str())
    }

    /// The chart's `appVersion` (empty when the record has none).
    pub fn app_version(&self) -> &str {
        self.metadata().map_or("", |m| m.app_version.as_str())
    }
}

/// The state of a revision (Helm's `common.Status`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// `unknown`: in an uncertain state.
    #[default]
    Unknown,
    /// `deployed`: the current revision.
    Deployed,
    /// `uninstalled`: uninstalled with `--keep-history`.
    Uninstalled,
    /// `superseded`: a later revision replaced it.
    Superseded,
    /// `failed`: the install, upgrade or rollback failed.
    Failed,
    /// `uninstalling`: an uninstall is under way.
    Uninstalling,
    /// `pending-install`: an install is under way.
    PendingInstall,
    /// `pending-upgrade`: an upgrade is under way.
    PendingUpgrade,
    /// `pending-rollback`: a rollback is under way.
    PendingRollback,
}

impl Status {
    /// Every status, in Helm's order.
    pub const ALL: [Status; 9] = [
        Status::Unknown,
        Status::Deployed,
        Status::Uninstalled,
        Status::Superseded,
        Status::Failed,
        Status::Uninstalling,
        Status::PendingInstall,
        Status::PendingUpgrade,
        Status::PendingRollback,
    ];

    /// The name as Helm writes it (`pending-upgrade`), also the Secret's `status` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Unknown => "unknown",
            Status::Deployed => "deployed",
            Status::Uninstalled => "uninstalled",
            Status::Superseded => "superseded",
            Status::Failed => "failed",
            Status::Uninstalling => "uninstalling",
            Status::PendingInstall => "pending-install",
            Status::PendingUpgrade => "pending-upgrade",
            Status::PendingRollback => "pending-rollback",
        }
    }

    /// Reads a status as Helm writes it; `None` for anything else.
    pub fn parse(text: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether an operation is under way (`pending-*`; Helm's `IsPending`).
    pub fn is_pending(self) -> bool {
        matches!(
            self,
            Status::PendingInstall | Status::PendingUpgrade | Status::PendingRollback
        )
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When and how a revision was deployed (Helm's `release.Info`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Info {
    /// When the release was first deployed (carried over by upgrades).
    #[serde(default, with = "go_time", skip_serializing_if = "Option::is_none")]
    pub first_deployed: Option<jiff::Timestamp>,
    /// When this revision was deployed.
    #[serde(default, with = "go_time", skip_serializing_if = "Option::is_none")]
    pub last_deployed: Option<jiff::Timestamp>,
    /// When the release was uninstalled.
    #[serde(default, with = "go_time", skip_serializing_if = "Option::is_none")]
    pub deleted: Option<jiff::Timestamp>,
    /// The log line of this revision (`Install complete`, `Upgrade "x" failed: …`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The status.
    #[serde(default)]
    pub status: Status,
    /// The rendered `NOTES.txt`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub notes: String,
    /// The deployed resources, when Helm recorded them (`resources`), as written.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Map::is_empty"
    )]
    pub resources: Map<String, Json>,
    /// Fields a newer Helm wrote (`rollback_revision`, …), kept as they were.
    #[serde(flatten)]
    pub extra: Map<String, Json>,
}

/// A chart as a release stores it (Helm's `chart.Chart` in JSON): metadata, lock, templates,
/// default values, schema and other files — not its subcharts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Chart {
    /// `Chart.yaml`.
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// `Chart.lock` (`requirements.lock` for v1 charts); `null` when the chart has none.
    #[serde(default)]
    pub lock: Option<Lock>,
    /// `templates/**`.
    #[serde(default, deserialize_with = "nullable")]
    pub templates: Vec<File>,
    /// `values.yaml`.
    #[serde(default, deserialize_with = "nullable")]
    pub values: Map<String, Json>,
    /// `values.schema.json`.
    #[serde(default, with = "base64_option")]
    pub schema: Option<Vec<u8>>,
    /// When the schema was last modified (Helm writes Go's zero time when unknown).
    #[serde(default, with = "go_time_required")]
    pub schemamodtime: Option<jiff::Timestamp>,
    /// Every other file (what `.Files` sees, `crds/**` included).
    #[serde(default, deserialize_with = "nullable")]
    pub files: Vec<File>,
    /// When the chart was last modified.
    #[serde(default, with = "go_time", skip_serializing_if = "Option::is_none")]
    pub modtime: Option<jiff::Timestamp>,
    /// Fields a newer Helm wrote, kept as they were.
    #[serde(flatten)]
    pub extra: Map<String, Json>,
}

/// A file of a stored chart (Helm's `common.File`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct File {
    /// Path relative to the chart root (`templates/deployment.yaml`).
    #[serde(default)]
    pub name: String,
    /// Contents (base64 in JSON).
    #[serde(default, with = "base64_bytes")]
    pub data: Vec<u8>,
    /// When the file was last modified.
    #[serde(default, with = "go_time", skip_serializing_if = "Option::is_none")]
    pub modtime: Option<jiff::Timestamp>,
}

/// `Chart.yaml` as a release stores it (Helm's `chart.Metadata`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// `name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `home`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub home: String,
    /// `sources`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sources: Vec<String>,
    /// `version`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// `description`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// `keywords`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub keywords: Vec<String>,
    /// `maintainers`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub maintainers: Vec<Maintainer>,
    /// `icon`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub icon: String,
    /// `apiVersion`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `condition`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub condition: String,
    /// `tags` (a string in `Chart.yaml`, unlike a dependency's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tags: String,
    /// `appVersion`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app_version: String,
    /// `deprecated`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub deprecated: bool,
    /// `annotations`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub annotations: BTreeMap<String, String>,
    /// `kubeVersion`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kube_version: String,
    /// `dependencies`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub dependencies: Vec<Dependency>,
    /// `type`: `application` or `library`.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub chart_type: String,
    /// Fields a newer Helm wrote, kept as they were.
    #[serde(flatten)]
    pub extra: Map<String, Json>,
}

/// One entry of `maintainers` (Helm's `chart.Maintainer`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Maintainer {
    /// `name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `email`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub email: String,
    /// `url`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
}

/// One entry of `dependencies` (Helm's `chart.Dependency`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dependency {
    /// `name`.
    #[serde(default)]
    pub name: String,
    /// `version` constraint.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// `repository`.
    #[serde(default)]
    pub repository: String,
    /// `condition`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub condition: String,
    /// `tags`.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tags: Vec<String>,
    /// `enabled`, as dependency processing left it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub enabled: bool,
    /// `import-values`.
    #[serde(
        default,
        rename = "import-values",
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub import_values: Vec<Json>,
    /// `alias`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub alias: String,
}

/// `Chart.lock` (Helm's `chart.Lock`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lock {
    /// When the lock was generated.
    #[serde(default, with = "go_time_required")]
    pub generated: Option<jiff::Timestamp>,
    /// The digest of the dependencies it locks.
    #[serde(default)]
    pub digest: String,
    /// The locked dependencies.
    #[serde(default, deserialize_with = "nullable")]
    pub dependencies: Vec<Dependency>,
}

/// A hook of a revision (Helm's `release.Hook`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hook {
    /// `metadata.name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `kind`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The template path (`podinfo/templates/tests/jwt.yaml`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// The document text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub manifest: String,
    /// The events it runs on.
    #[serde(default, with = "hook_events", skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<HookEvent>,
    /// Its last run.
    #[serde(default, deserialize_with = "nullable")]
    pub last_run: HookExecution,
    /// `helm.sh/hook-weight`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight: i64,
    /// `helm.sh/hook-delete-policy` entries.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub delete_policies: Vec<String>,
    /// `helm.sh/hook-output-log-policy` entries.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub output_log_policies: Vec<String>,
}

impl Hook {
    /// The record of a hook the engine found ([`crate::output::Hook`]), not yet run.
    pub fn from_output(hook: &crate::output::Hook) -> Self {
        Hook {
            name: hook.name.clone(),
            kind: hook.kind.clone(),
            path: hook.path.clone(),
            manifest: hook.manifest.clone(),
            events: hook.events.clone(),
            last_run: HookExecution::default(),
            weight: hook.weight,
            delete_policies: hook.delete_policies.clone(),
            output_log_policies: hook.output_log_policies.clone(),
        }
    }
}

/// A hook's last run (Helm's `release.HookExecution`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookExecution {
    /// When it started.
    #[serde(default, with = "go_time", skip_serializing_if = "Option::is_none")]
    pub started_at: Option<jiff::Timestamp>,
    /// When it completed.
    #[serde(default, with = "go_time", skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<jiff::Timestamp>,
    /// How it ended.
    #[serde(default)]
    pub phase: HookPhase,
}

/// How a hook's run went (Helm's `release.HookPhase`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HookPhase {
    /// `""`: never run.
    #[default]
    #[serde(rename = "")]
    NotRun,
    /// `Unknown`.
    Unknown,
    /// `Running`.
    Running,
    /// `Succeeded`.
    Succeeded,
    /// `Failed`.
    Failed,
}

impl Chart {
    /// The chart as Helm's install and upgrade store it, from a chart loaded (and, for what
    /// Helm stores after dependency processing, prepared) with [`crate::chart`]: metadata,
    /// templates, default values, schema and files. `lock` is `None`: the loader does not keep
    /// `Chart.lock`; set it with [`Lock::from_yaml`] when the chart has one.
    pub fn from_loaded(chart: &crate::chart::Chart) -> Self {
        let files = |files: &[crate::chart::File]| {
            files
                .iter()
                .map(|file| File {
                    name: file.name.clone(),
                    data: file.data.clone(),
                    modtime: None,
                })
                .collect()
        };
        Chart {
            metadata: Some(Metadata::from_loaded(&chart.metadata)),
            lock: None,
            templates: files(&chart.templates),
            values: {
                // As the record reads back: whole numbers are integers once written.
                let mut values = Json::Object(chart.values.clone());
                super::codec::go_numbers(&mut values);
                match values {
                    Json::Object(map) => map,
                    _ => Map::new(),
                }
            },
            schema: chart.schema.clone(),
            schemamodtime: None,
            files: files(&chart.files),
            modtime: None,
            extra: Map::new(),
        }
    }
}

impl Metadata {
    /// `Chart.yaml` as a release stores it, from the loader's [`crate::chart::Metadata`]
    /// (its typed fields and the others it keeps as written).
    pub fn from_loaded(metadata: &crate::chart::Metadata) -> Self {
        let extra = &metadata.extra;
        let text = |key: &str| extra.get(key).map(json_text).unwrap_or_default();
        let texts = |key: &str| -> Vec<String> {
            extra
                .get(key)
                .and_then(Json::as_array)
                .map(|items| items.iter().map(json_text).collect())
                .unwrap_or_default()
        };
        let maintainers = extra
            .get("maintainers")
            .and_then(Json::as_array)
            .map(|items| {
                items
                    .iter()
                    .map(|item| {
                        let field = |key: &str| item.get(key).map(json_text).unwrap_or_default();
                        Maintainer {
                            name: field("name"),
                            email: field("email"),
                            url: field("url"),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let annotations = extra
            .get("annotations")
            .and_then(Json::as_object)
            .map(|map| {
                map.iter()
                    .map(|(key, value)| (key.clone(), json_text(value)))
                    .collect()
            })
            .unwrap_or_default();
        Metadata {
            name: metadata.name.clone(),
            home: text("home"),
            sources: texts("sources"),
            version: metadata.version.clone(),
            description: text("description"),
            keywords: texts("keywords"),
            maintainers,
            icon: text("icon"),
            api_version: metadata.api_version.clone(),
            condition: text("condition"),
            tags: text("tags"),
            app_version: metadata.app_version.clone(),
            deprecated: extra.get("deprecated").and_then(Json::as_bool) == Some(true),
            annotations,
            kube_version: metadata.kube_version.clone(),
            dependencies: metadata
                .dependencies
                .iter()
                .map(Dependency::from_loaded)
                .collect(),
            chart_type: metadata.chart_type.clone(),
            extra: Map::new(),
        }
    }
}

impl Dependency {
    /// A dependency as a release stores it, from the loader's [`crate::chart::Dependency`].
    pub fn from_loaded(dependency: &crate::chart::Dependency) -> Self {
        Dependency {
            name: dependency.name.clone(),
            version: dependency.version.clone(),
            repository: dependency.repository.clone(),
            condition: dependency.condition.clone(),
            tags: dependency.tags.clone(),
            enabled: dependency.enabled,
            import_values: dependency.import_values.clone(),
            alias: dependency.alias.clone(),
        }
    }
}

impl Lock {
    /// Reads `Chart.lock` (or `requirements.lock`).
    ///
    /// # Errors
    ///
    /// The YAML is malformed or is not a lock file; the message names the field.
    pub fn from_yaml(data: &[u8]) -> Result<Lock, String> {
        let map = crate::chart::read_values(data)?;
        serde_path_to_error::deserialize(Json::Object(map))
            .map_err(|e| format!("Chart.lock: {}: wrong type or value", e.path()))
    }
}

/// A scalar as Go's YAML-to-JSON reading leaves it in a string field.
fn json_text(value: &Json) -> String {
    match value {
        Json::String(text) => text.clone(),
        Json::Null => String::new(),
        other => other.to_string(),
    }
}
