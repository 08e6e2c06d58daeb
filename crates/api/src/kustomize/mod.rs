//! The `kustomize.toolkit.fluxcd.io` API group: applying kustomize overlays from sources.

pub mod v1;

/// The API group name.
pub const GROUP: &str = "kustomize.toolkit.fluxcd.io";
