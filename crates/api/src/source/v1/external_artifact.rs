//! The ExternalArtifact kind (Flux 2.7): an artifact produced by a controller outside Flux's
//! source-controller (e.g. source-watcher's ArtifactGenerator). Capstan serves the kind and its
//! consumers read `status.artifact`; nothing in Capstan reconciles it.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::meta::{Artifact, Condition, NamespacedObjectKindReference, ReconcileRequestStatus};

/// Desired state of an ExternalArtifact: what the artifact is generated for.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "source.toolkit.fluxcd.io",
    version = "v1",
    kind = "ExternalArtifact",
    plural = "externalartifacts",
    shortname = "ea",
    namespaced,
    status = "ExternalArtifactStatus",
    derive = "PartialEq",
    category = "all",
    category = "fluxcd",
    category = "fluxcd-sources",
    doc = "ExternalArtifact is the Schema for the external artifacts API",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message"}"#,
    printcolumn = r#"{"name":"Source","type":"string","jsonPath":".spec.sourceRef.name"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ExternalArtifactSpec {
    /// The custom resource the artifact is generated for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_ref: Option<NamespacedObjectKindReference>,
}

/// Observed state of an ExternalArtifact, written by the controller that produces it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalArtifactStatus {
    /// The artifact the producing controller published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Not part of Flux's schema (the kind has no `observedGeneration` nor reconcile
    /// requests); kept so the status fits [`crate::kind::FluxStatus`], never serialised.
    #[serde(skip)]
    #[schemars(skip)]
    pub observed_generation: Option<i64>,
    /// See `observed_generation`.
    #[serde(skip)]
    #[schemars(skip)]
    pub reconcile_request: ReconcileRequestStatus,
}

impl super::Source for ExternalArtifact {
    fn artifact(&self) -> Option<&Artifact> {
        self.status.as_ref().and_then(|s| s.artifact.as_ref())
    }
    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[], |s| s.conditions.as_slice())
    }
    /// An ExternalArtifact has no interval: its producer decides when it changes. Flux's
    /// `GetRequeueAfter` is one minute.
    fn interval(&self) -> Result<std::time::Duration, crate::Error> {
        Ok(std::time::Duration::from_secs(60))
    }
    fn suspended(&self) -> bool {
        false
    }
}

impl crate::kind::FluxKind for ExternalArtifact {
    const INFO: crate::kind::KindInfo = crate::kind::KindInfo {
        kind: "ExternalArtifact",
        group: super::GROUP,
        version: super::VERSION,
        api_version: super::API_VERSION,
        plural: "externalartifacts",
        singular: "externalartifact",
        short_names: &["ea"],
        display: "ExternalArtifact source",
        role: crate::kind::Role::Source,
    };
    type Status = ExternalArtifactStatus;

    fn status(&self) -> Option<&ExternalArtifactStatus> {
        self.status.as_ref()
    }
    fn suspended(&self) -> bool {
        false
    }
}
crate::flux_status!(ExternalArtifactStatus, artifact);
