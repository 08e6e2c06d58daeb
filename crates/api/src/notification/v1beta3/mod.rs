//! `notification.toolkit.fluxcd.io/v1beta3`: Provider and Alert.
//!
//! As in Flux, these kinds have no status: they are static configuration read by the
//! notification dispatcher.

mod alert;
mod provider;

pub use alert::*;
pub use provider::*;

crate::kind::group_version!("notification.toolkit.fluxcd.io", "v1beta3");
