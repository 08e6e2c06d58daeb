//! `notification.toolkit.fluxcd.io/v1`: Receiver.

mod receiver;

pub use receiver::*;

crate::kind::group_version!("notification.toolkit.fluxcd.io", "v1");
