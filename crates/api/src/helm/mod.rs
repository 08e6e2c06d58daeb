//! The `helm.toolkit.fluxcd.io` API group: Helm releases.

pub mod v2;

/// The API group name.
pub const GROUP: &str = "helm.toolkit.fluxcd.io";
