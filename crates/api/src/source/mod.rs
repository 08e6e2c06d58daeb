//! The `source.toolkit.fluxcd.io` API group: where artifacts come from.

pub mod v1;

/// The API group name.
pub const GROUP: &str = "source.toolkit.fluxcd.io";
