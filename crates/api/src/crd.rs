//! CustomResourceDefinitions for every kind this crate serves.
//!
//! The schemas are derived from the Rust types by `kube`'s `CustomResource` derive, which makes
//! them structural; Flux's defaults, patterns, enums and CEL rules are carried over as schema
//! extensions on the fields.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::error::Error;

/// The CRDs of every served kind, in a stable order ([`crate::kind::KINDS`]): sources,
/// Kustomization, HelmRelease, notification kinds.
pub fn crds() -> Vec<CustomResourceDefinition> {
    crate::kind::kind_crds()
}

/// [`crds`] as one multi-document YAML stream (each document starts with `---`), ready for
/// `kubectl apply -f`.
pub fn crds_yaml() -> Result<String, Error> {
    let mut out = String::new();
    for crd in crds() {
        let yaml = serde_saphyr::to_string(&crd).map_err(|source| Error::RenderCrd {
            name: crd.metadata.name.clone().unwrap_or_default(),
            source,
        })?;
        out.push_str("---\n");
        out.push_str(&yaml);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
