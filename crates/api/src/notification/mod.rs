//! The `notification.toolkit.fluxcd.io` API group: alerting providers, alerts and webhook
//! receivers.

pub mod v1;
pub mod v1beta3;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group name.
pub const GROUP: &str = "notification.toolkit.fluxcd.io";

/// The Flux kinds that emit events and accept webhook-triggered reconciles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum EventSourceKind {
    /// source.toolkit.fluxcd.io Bucket.
    Bucket,
    /// source.toolkit.fluxcd.io GitRepository.
    GitRepository,
    /// kustomize.toolkit.fluxcd.io Kustomization.
    Kustomization,
    /// helm.toolkit.fluxcd.io HelmRelease.
    HelmRelease,
    /// source.toolkit.fluxcd.io HelmChart.
    HelmChart,
    /// source.toolkit.fluxcd.io HelmRepository.
    HelmRepository,
    /// image.toolkit.fluxcd.io ImageRepository.
    ImageRepository,
    /// image.toolkit.fluxcd.io ImagePolicy.
    ImagePolicy,
    /// image.toolkit.fluxcd.io ImageUpdateAutomation.
    ImageUpdateAutomation,
    /// source.toolkit.fluxcd.io OCIRepository.
    #[serde(rename = "OCIRepository")]
    OciRepository,
    /// source.extensions.fluxcd.io ArtifactGenerator.
    ArtifactGenerator,
    /// source.toolkit.fluxcd.io ExternalArtifact.
    ExternalArtifact,
}

/// A reference to Flux objects by kind and name (or `*`) or by labels, in any namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrossNamespaceObjectReference {
    /// API version of the referent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the referent.
    pub kind: EventSourceKind,
    /// Name of the referent; `*` matches all (with `matchLabels`, all matching).
    #[schemars(extend("minLength" = 1, "maxLength" = 253))]
    pub name: String,
    /// Namespace of the referent; the referrer's own when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minLength" = 1, "maxLength" = 253))]
    pub namespace: Option<String>,
    /// Labels the referents must carry (only with `name: "*"`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
}
