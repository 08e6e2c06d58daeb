//! `helm.toolkit.fluxcd.io/v2`: HelmRelease.

mod helm_release;

pub use helm_release::*;

/// The API version, `helm.toolkit.fluxcd.io/v2`.
pub const API_VERSION: &str = "helm.toolkit.fluxcd.io/v2";
