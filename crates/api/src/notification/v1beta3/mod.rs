//! `notification.toolkit.fluxcd.io/v1beta3`: Provider and Alert.
//!
//! As in Flux, these kinds have no status: they are static configuration read by the
//! notification dispatcher.

mod alert;
mod provider;

pub use alert::*;
pub use provider::*;

/// The API version, `notification.toolkit.fluxcd.io/v1beta3`.
pub const API_VERSION: &str = "notification.toolkit.fluxcd.io/v1beta3";
