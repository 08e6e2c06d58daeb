//! `notification.toolkit.fluxcd.io/v1`: Receiver.

mod receiver;

pub use receiver::*;

/// The API version, `notification.toolkit.fluxcd.io/v1`.
pub const API_VERSION: &str = "notification.toolkit.fluxcd.io/v1";
