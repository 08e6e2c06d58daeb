//! What every consumer of a kind needs to know about it, kept once on the API type: the
//! [`FluxKind`] trait (group, version, plural, short names, printer columns, how Flux names it,
//! its role) and the status accessors (ready, revision, artifact), with [`readiness`], the one
//! reading of a status that says whether an object is Ready, failed or still on its way.
//!
//! The CRD list ([`crate::crds`]), the served kinds ([`crate::SERVED_KINDS`]), the controllers'
//! runtime shape and the CLI's kind table are all derived from the [`KINDS`] list and the trait.
//!
//! The `#[kube(...)]` attributes of each type must be literals (a derive cannot read a `const`),
//! so [`KindInfo`]'s kind, group, version, plural and short names restate them; a test checks
//! that both agree for every kind.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition,
};
use kube::core::{CustomResourceExt, Resource};

use crate::meta::{Artifact, Condition, ReconcileRequestStatus, condition, reason};

/// What a kind does in a Flux installation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Produces artifacts (`status.artifact`): GitRepository, OCIRepository, Bucket,
    /// HelmRepository, HelmChart.
    Source,
    /// Applies what a source produced: Kustomization, HelmRelease.
    Applier,
    /// Notification configuration: Provider, Alert, Receiver.
    Notification,
}

/// The static facts of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindInfo {
    /// `GitRepository`.
    pub kind: &'static str,
    /// `source.toolkit.fluxcd.io`.
    pub group: &'static str,
    /// `v1`.
    pub version: &'static str,
    /// `source.toolkit.fluxcd.io/v1`.
    pub api_version: &'static str,
    /// `gitrepositories`.
    pub plural: &'static str,
    /// `gitrepository`: the lower-cased kind, as Flux names it in `get all` rows and in
    /// `suspend`/`delete` messages.
    pub singular: &'static str,
    /// `["gitrepo"]`.
    pub short_names: &'static [&'static str],
    /// How Flux names the kind in messages: `GitRepository source`, `Kustomization`.
    pub display: &'static str,
    /// What the kind does.
    pub role: Role,
}

impl KindInfo {
    /// Whether the kind is a source (its revision is `status.artifact.revision`).
    pub const fn is_source(&self) -> bool {
        matches!(self.role, Role::Source)
    }
}

/// The status fields Flux kinds share. Implemented by every status type.
pub trait FluxStatus {
    /// `status.conditions`.
    fn conditions(&self) -> &[Condition];
    /// `status.conditions`, mutable.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
    /// `status.observedGeneration`.
    fn observed_generation(&self) -> Option<i64>;
    /// Sets `status.observedGeneration`.
    fn set_observed_generation(&mut self, generation: Option<i64>);
    /// `status.lastHandledReconcileAt`, mutable.
    fn reconcile_request_mut(&mut self) -> &mut ReconcileRequestStatus;
    /// The revision the object stands at: `status.artifact.revision` for sources,
    /// `status.lastAppliedRevision` for a Kustomization, `status.lastAttemptedRevision` for a
    /// HelmRelease.
    fn revision(&self) -> Option<&str> {
        self.artifact().map(|a| a.revision.as_str())
    }
    /// `status.artifact` (sources only).
    fn artifact(&self) -> Option<&Artifact> {
        None
    }
}

/// The status of kinds that have none (Provider, Alert: static configuration). It has no
/// values, so [`FluxKind::status`] of such a kind is always `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoStatus {}

impl FluxStatus for NoStatus {
    fn conditions(&self) -> &[Condition] {
        match *self {}
    }
    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        match *self {}
    }
    fn observed_generation(&self) -> Option<i64> {
        match *self {}
    }
    fn set_observed_generation(&mut self, _: Option<i64>) {
        match *self {}
    }
    fn reconcile_request_mut(&mut self) -> &mut ReconcileRequestStatus {
        match *self {}
    }
}

/// One Flux kind: its facts and its status, on the API type.
pub trait FluxKind: Resource<DynamicType = ()> + CustomResourceExt {
    /// The kind's static facts.
    const INFO: KindInfo;
    /// The status type ([`NoStatus`] for kinds without one).
    type Status: FluxStatus;

    /// The current status, if any.
    fn status(&self) -> Option<&Self::Status>;
    /// Whether `spec.suspend` is set.
    fn suspended(&self) -> bool;

    /// The status conditions (empty without a status).
    fn conditions(&self) -> &[Condition] {
        self.status().map_or(&[], FluxStatus::conditions)
    }
    /// The `Ready` condition.
    fn ready_condition(&self) -> Option<&Condition> {
        self.conditions()
            .iter()
            .find(|c| c.type_ == condition::READY)
    }
    /// The revision the object stands at (see [`FluxStatus::revision`]).
    fn revision(&self) -> Option<&str> {
        self.status().and_then(FluxStatus::revision)
    }
    /// `status.artifact` (sources only).
    fn artifact(&self) -> Option<&Artifact> {
        self.status().and_then(FluxStatus::artifact)
    }
    /// Where the object stands (see [`readiness`]).
    fn readiness(&self) -> Readiness {
        readiness(
            self.meta().generation,
            self.status().and_then(FluxStatus::observed_generation),
            self.conditions().iter().map(ConditionView::from),
        )
    }
    /// Whether the object is Ready for its current generation.
    fn is_ready(&self) -> bool {
        self.readiness() == Readiness::Ready
    }
    /// The printer columns of the kind's CRD (`kubectl get`).
    fn printer_columns() -> Vec<CustomResourceColumnDefinition> {
        Self::crd()
            .spec
            .versions
            .into_iter()
            .next()
            .and_then(|v| v.additional_printer_columns)
            .unwrap_or_default()
    }
}

/// Where an object stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Ready for its current generation.
    Ready,
    /// Failed for its current generation; the message says why.
    Failed(String),
    /// Not reconciled yet (or still progressing); the message says what is awaited.
    Pending(String),
}

/// The fields of a condition that [`readiness`] reads, borrowed from a typed [`Condition`] or
/// from an untyped object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConditionView<'a> {
    /// `type`.
    pub type_: &'a str,
    /// `status`: `True`, `False` or `Unknown`.
    pub status: &'a str,
    /// `reason`.
    pub reason: &'a str,
    /// `message`.
    pub message: &'a str,
    /// `observedGeneration`.
    pub observed_generation: Option<i64>,
}

impl<'a> From<&'a Condition> for ConditionView<'a> {
    fn from(c: &'a Condition) -> Self {
        Self {
            type_: &c.type_,
            status: &c.status,
            reason: &c.reason,
            message: &c.message,
            observed_generation: c.observed_generation,
        }
    }
}

/// The readiness of an object, as Flux's `kstatus` reading of the conditions: ready when
/// `Ready=True` for the current generation; failed when `Stalled=True`, or `Ready=False` while
/// not reconciling (or retrying after a failure); pending otherwise.
///
/// The generation compared is the `Ready` condition's `observedGeneration` when it has one (a
/// failure that is retried does not move `status.observedGeneration`; the conditions carry the
/// generation they were written for), else `status.observedGeneration`.
pub fn readiness<'a>(
    generation: Option<i64>,
    observed_generation: Option<i64>,
    conditions: impl IntoIterator<Item = ConditionView<'a>>,
) -> Readiness {
    let conditions: Vec<ConditionView<'a>> = conditions.into_iter().collect();
    let find = |type_: &str| conditions.iter().find(|c| c.type_ == type_);
    let ready = find(condition::READY);
    let observed = ready
        .and_then(|c| c.observed_generation)
        .or(observed_generation);
    if generation.is_some() && observed != generation {
        return Readiness::Pending("waiting for the object to be reconciled".into());
    }
    if let Some(stalled) = find(condition::STALLED)
        && stalled.status == "True"
    {
        return Readiness::Failed(stalled.message.to_owned());
    }
    let Some(ready) = ready else {
        return Readiness::Pending("waiting to be reconciled".into());
    };
    match ready.status {
        "True" => Readiness::Ready,
        "False" => {
            let reconciling = find(condition::RECONCILING)
                .filter(|c| c.status == "True")
                .map(|c| c.reason);
            match reconciling {
                Some(r) if r != reason::PROGRESSING_WITH_RETRY => {
                    Readiness::Pending(ready.message.to_owned())
                }
                _ => Readiness::Failed(ready.message.to_owned()),
            }
        }
        _ => Readiness::Pending(ready.message.to_owned()),
    }
}

/// Calls `$callback!` with the list of every served type, in CRD order: sources, Kustomization,
/// HelmRelease, notification kinds. The one list the CRDs, the served kinds and
/// [`FluxObject`](crate::FluxObject) are generated from; adding a kind is adding it here.
#[macro_export]
macro_rules! for_each_kind {
    ($callback:ident) => {
        $callback!(
            GitRepository,
            OCIRepository,
            Bucket,
            HelmRepository,
            HelmChart,
            ExternalArtifact,
            Kustomization,
            HelmRelease,
            Provider,
            Alert,
            Receiver,
        );
    };
}

macro_rules! kind_list {
    ($($kind:ident),* $(,)?) => {
        /// The facts of every served kind, in CRD order.
        pub const KINDS: &[KindInfo] = &[$(<crate::$kind as FluxKind>::INFO,)*];

        /// The CRD of every served kind, in [`KINDS`] order.
        pub(crate) fn kind_crds() -> Vec<CustomResourceDefinition> {
            vec![$(<crate::$kind as CustomResourceExt>::crd(),)*]
        }

        #[cfg(test)]
        pub(crate) fn derive_facts() -> Vec<(KindInfo, [String; 4], &'static [&'static str])> {
            vec![$((
                <crate::$kind as FluxKind>::INFO,
                [
                    <crate::$kind as Resource>::kind(&()).into_owned(),
                    <crate::$kind as Resource>::group(&()).into_owned(),
                    <crate::$kind as Resource>::version(&()).into_owned(),
                    <crate::$kind as Resource>::plural(&()).into_owned(),
                ],
                <crate::$kind as CustomResourceExt>::shortnames(),
            ),)*]
        }
    };
}

for_each_kind!(kind_list);

/// The facts of the kind named `kind` (case-insensitive), if served.
pub fn by_kind(kind: &str) -> Option<&'static KindInfo> {
    KINDS.iter().find(|k| k.kind.eq_ignore_ascii_case(kind))
}

/// Implements [`FluxStatus`] for a status type with the usual fields: `conditions`,
/// `observed_generation` and a flattened `reconcile_request`
/// ([`ReconcileRequestStatus`]). The second argument says where the revision is read:
///
/// - `flux_status!(MyStatus, artifact)`: a source, whose revision is `status.artifact.revision`
///   (the status has `artifact: Option<Artifact>`);
/// - `flux_status!(MyStatus, revision = field)`: the revision is `status.<field>`, an
///   `Option<String>` (`last_applied_revision` for a Kustomization);
/// - `flux_status!(MyStatus)`: the kind has no revision.
///
/// Used by every kind of this crate and by kinds defined elsewhere (see [`flux_kind!`]).
#[macro_export]
macro_rules! flux_status {
    ($status:ty, artifact) => {
        $crate::flux_status!(@impl $status,
            fn artifact(&self) -> Option<&$crate::meta::Artifact> {
                self.artifact.as_ref()
            }
        );
    };
    ($status:ty, revision = $field:ident) => {
        $crate::flux_status!(@impl $status,
            fn revision(&self) -> Option<&str> {
                self.$field.as_deref()
            }
        );
    };
    ($status:ty) => {
        $crate::flux_status!(@impl $status,);
    };
    (@impl $status:ty, $($extra:item)*) => {
        impl $crate::kind::FluxStatus for $status {
            fn conditions(&self) -> &[$crate::meta::Condition] {
                &self.conditions
            }
            fn conditions_mut(&mut self) -> &mut Vec<$crate::meta::Condition> {
                &mut self.conditions
            }
            fn observed_generation(&self) -> Option<i64> {
                self.observed_generation
            }
            fn set_observed_generation(&mut self, generation: Option<i64>) {
                self.observed_generation = generation;
            }
            fn reconcile_request_mut(&mut self) -> &mut $crate::meta::ReconcileRequestStatus {
                &mut self.reconcile_request
            }
            $($extra)*
        }
    };
}

/// Declares a group module's `GROUP`, `VERSION` and `API_VERSION` from two literals.
macro_rules! group_version {
    ($group:literal, $version:literal) => {
        #[doc = concat!("The API group, `", $group, "`.")]
        pub const GROUP: &str = $group;
        #[doc = concat!("The version, `", $version, "`.")]
        pub const VERSION: &str = $version;
        #[doc = concat!("The API version, `", $group, "/", $version, "`.")]
        pub const API_VERSION: &str = concat!($group, "/", $version);
    };
}
pub(crate) use group_version;

/// Implements [`FluxKind`] for a `#[derive(CustomResource)]` type whose spec has
/// `suspend: Option<bool>`: its [`KindInfo`] from the facts given (`kind` is the type's name),
/// its status (`status`, or none for `NoStatus`) and `suspended`.
///
/// The group and version are either given as literals (a kind defined outside this crate;
/// they must agree with the `#[kube(group, version)]` attributes), or read from the `GROUP`,
/// `VERSION` and `API_VERSION` constants of the module above the type's (this crate's group
/// modules). Pair it with [`flux_status!`] for the status type.
///
/// ```
/// use capstan_api::meta::{Condition, ReconcileRequestStatus};
/// use kube::CustomResource;
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
/// #[kube(group = "example.dev", version = "v1", kind = "Probe", namespaced)]
/// #[kube(status = "ProbeStatus")]
/// pub struct ProbeSpec {
///     suspend: Option<bool>,
/// }
///
/// #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
/// #[serde(rename_all = "camelCase")]
/// pub struct ProbeStatus {
///     #[serde(default)]
///     conditions: Vec<Condition>,
///     observed_generation: Option<i64>,
///     #[serde(flatten)]
///     reconcile_request: ReconcileRequestStatus,
///     revision: Option<String>,
/// }
///
/// capstan_api::flux_kind! {
///     Probe: ProbeStatus,
///     group = "example.dev",
///     version = "v1",
///     singular = "probe",
///     plural = "probes",
///     short_names = [],
///     display = "Probe",
///     role = Applier,
/// }
/// capstan_api::flux_status!(ProbeStatus, revision = revision);
///
/// use capstan_api::FluxKind;
/// assert_eq!(Probe::INFO.api_version, "example.dev/v1");
/// ```
#[macro_export]
macro_rules! flux_kind {
    (@status $kind:ident, NoStatus, $gv:tt, $($facts:tt)*) => {
        $crate::flux_kind!(@impl $kind, $crate::kind::NoStatus, |_object| None, $gv, $($facts)*);
    };
    (@status $kind:ident, $status:ty, $gv:tt, $($facts:tt)*) => {
        $crate::flux_kind!(@impl $kind, $status, |object| object.status.as_ref(), $gv, $($facts)*);
    };
    (
        @impl $kind:ident, $status:ty, |$object:ident| $read:expr,
        ($group:expr, $version:expr, $api_version:expr),
        singular = $singular:literal,
        plural = $plural:literal,
        short_names = [$($short:literal),* $(,)?],
        display = $display:expr,
        role = $role:ident $(,)?
    ) => {
        impl $crate::kind::FluxKind for $kind {
            const INFO: $crate::kind::KindInfo = $crate::kind::KindInfo {
                kind: stringify!($kind),
                group: $group,
                version: $version,
                api_version: $api_version,
                plural: $plural,
                singular: $singular,
                short_names: &[$($short),*],
                display: $display,
                role: $crate::kind::Role::$role,
            };
            type Status = $status;

            fn status(&self) -> Option<&$status> {
                let $object = self;
                $read
            }
            fn suspended(&self) -> bool {
                self.spec.suspend.unwrap_or(false)
            }
        }
    };
    (
        $kind:ident: $status:tt,
        group = $group:literal,
        version = $version:literal,
        $($facts:tt)*
    ) => {
        $crate::flux_kind!(
            @status $kind, $status, ($group, $version, concat!($group, "/", $version)), $($facts)*
        );
    };
    ($kind:ident: $status:tt, $($facts:tt)*) => {
        $crate::flux_kind!(
            @status $kind, $status, (super::GROUP, super::VERSION, super::API_VERSION), $($facts)*
        );
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_agree_with_the_derive() {
        for (info, [kind, group, version, plural], short_names) in derive_facts() {
            assert_eq!(
                [info.kind, info.group, info.version, info.plural],
                [kind.as_str(), &group, &version, &plural],
                "{}",
                info.kind
            );
            assert_eq!(info.api_version, format!("{group}/{version}"));
            assert_eq!(info.singular, info.kind.to_ascii_lowercase());
            assert_eq!(info.short_names, short_names, "{}", info.kind);
        }
        assert_eq!(KINDS.len(), 11);
        assert_eq!(
            by_kind("kustomization").map(|k| k.plural),
            Some("kustomizations")
        );
        assert!(by_kind("ImagePolicy").is_none());
    }

    #[test]
    fn printer_columns_come_from_the_crd() {
        let names: Vec<String> = <crate::GitRepository as FluxKind>::printer_columns()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["URL", "Age", "Ready", "Status"]);
        assert!(<crate::Alert as FluxKind>::printer_columns().len() == 1);
    }

    fn view<'a>(
        type_: &'a str,
        status: &'a str,
        reason: &'a str,
        message: &'a str,
    ) -> ConditionView<'a> {
        ConditionView {
            type_,
            status,
            reason,
            message,
            observed_generation: None,
        }
    }

    #[test]
    fn readiness_follows_generation_and_conditions() {
        let ready = [view("Ready", "True", "Succeeded", "ok")];
        assert_eq!(readiness(Some(2), Some(2), ready), Readiness::Ready);
        assert!(matches!(
            readiness(Some(2), Some(1), ready),
            Readiness::Pending(_)
        ));
        let failed = [view("Ready", "False", "Failed", "boom")];
        assert_eq!(
            readiness(Some(2), Some(2), failed),
            Readiness::Failed("boom".into())
        );
        let progressing = [
            view("Ready", "False", "Progressing", "building"),
            view("Reconciling", "True", "Progressing", ""),
        ];
        assert_eq!(
            readiness(Some(2), Some(2), progressing),
            Readiness::Pending("building".into())
        );
        let retrying = [
            view("Ready", "False", "Failed", "boom"),
            view("Reconciling", "True", "ProgressingWithRetry", ""),
        ];
        assert_eq!(
            readiness(Some(2), Some(2), retrying),
            Readiness::Failed("boom".into())
        );
        let stalled = [
            view("Ready", "False", "Failed", "boom"),
            view("Stalled", "True", "InvalidInterval", "bad interval"),
        ];
        assert_eq!(
            readiness(Some(2), Some(2), stalled),
            Readiness::Failed("bad interval".into())
        );
        // A retried failure keeps status.observedGeneration; the condition carries its own.
        let mut current = view("Ready", "False", "Failed", "boom");
        current.observed_generation = Some(3);
        assert_eq!(
            readiness(Some(3), Some(2), [current]),
            Readiness::Failed("boom".into())
        );
        assert_eq!(
            readiness(None, None, []),
            Readiness::Pending("waiting to be reconciled".into())
        );
    }

    #[test]
    fn typed_objects_read_their_status() {
        let object = |status: serde_json::Value| -> crate::GitRepository {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "source.toolkit.fluxcd.io/v1",
                "kind": "GitRepository",
                "metadata": {"name": "podinfo", "generation": 1},
                "spec": {"interval": "1m", "url": "https://example.com/podinfo"},
                "status": status,
            }))
            .unwrap()
        };
        let repository = object(serde_json::Value::Null);
        assert!(!repository.is_ready());
        assert_eq!(repository.revision(), None);
        let mut repository = object(serde_json::json!({
            "observedGeneration": 1,
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "Succeeded",
                "message": "stored artifact", "lastTransitionTime": "2024-01-01T00:00:00Z",
            }],
            "artifact": {
                "path": "p", "url": "http://x/p", "revision": "main@sha1:1", "digest": "sha256:0",
                "lastUpdateTime": "2024-01-01T00:00:00Z",
            },
        }));
        assert!(repository.is_ready());
        assert_eq!(repository.revision(), Some("main@sha1:1"));
        assert_eq!(
            repository.ready_condition().map(|c| c.message.as_str()),
            Some("stored artifact")
        );
        assert!(!repository.suspended());
        let status = repository.status.as_mut().unwrap();
        status.set_observed_generation(Some(0));
        assert!(!repository.is_ready());
    }
}
