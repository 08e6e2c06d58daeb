//! `kustomize.toolkit.fluxcd.io/v1`: Kustomization.

mod kustomization;

pub use kustomization::*;

/// The API version, `kustomize.toolkit.fluxcd.io/v1`.
pub const API_VERSION: &str = "kustomize.toolkit.fluxcd.io/v1";
