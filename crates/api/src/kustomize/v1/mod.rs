//! `kustomize.toolkit.fluxcd.io/v1`: Kustomization.

mod kustomization;

pub use kustomization::*;

crate::kind::group_version!("kustomize.toolkit.fluxcd.io", "v1");
