//! `helm.toolkit.fluxcd.io/v2`: HelmRelease.

mod helm_release;

pub use helm_release::*;

crate::kind::group_version!("helm.toolkit.fluxcd.io", "v2");
