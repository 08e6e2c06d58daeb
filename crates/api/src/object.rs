//! Decoding untyped Kubernetes documents into the typed kinds of this crate.

use kube::Resource;
use serde_json::Value;

use crate::error::Error;
use crate::helm::v2::HelmRelease;
use crate::kind::FluxKind;
use crate::kustomize::v1::Kustomization;
use crate::notification::v1::Receiver;
use crate::notification::v1beta3::{Alert, Provider};
use crate::source::v1::{
    Bucket, ExternalArtifact, GitRepository, HelmChart, HelmRepository, OCIRepository,
};

macro_rules! flux_objects {
    ($($kind:ident),* $(,)?) => {
        /// Any object of a kind this crate serves.
        #[derive(Clone, Debug, PartialEq)]
        pub enum FluxObject {
            $(
                #[doc = concat!("A ", stringify!($kind), ".")]
                $kind(Box<$kind>),
            )*
        }

        /// `(apiVersion, kind)` of every served kind, in CRD order.
        pub const SERVED_KINDS: &[(&str, &str)] = &[
            $((<$kind as FluxKind>::INFO.api_version, <$kind as FluxKind>::INFO.kind),)*
        ];

        impl FluxObject {
            /// Decodes a document by its `apiVersion` and `kind`.
            ///
            /// Fails with [`Error::UnsupportedKind`] for kinds or versions not served here
            /// (for example `v1beta2` objects or `ImagePolicy`) and with
            /// [`Error::InvalidObject`] when the document does not match the kind's schema.
            pub fn from_value(value: Value) -> Result<Self, Error> {
                let (api_version, kind) = type_of(&value)?;
                $(
                    if api_version == <$kind as FluxKind>::INFO.api_version && kind == <$kind as FluxKind>::INFO.kind {
                        return serde_json::from_value::<$kind>(value)
                            .map(|o| Self::$kind(Box::new(o)))
                            .map_err(|source| Error::InvalidObject { kind: <$kind as FluxKind>::INFO.kind, source });
                    }
                )*
                Err(Error::UnsupportedKind { api_version: api_version.to_owned(), kind: kind.to_owned() })
            }

            /// Encodes the object back into a JSON document.
            pub fn to_value(&self) -> Result<Value, serde_json::Error> {
                match self {
                    $(Self::$kind(o) => serde_json::to_value(o),)*
                }
            }

            /// The object's kind.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Self::$kind(_) => <$kind as FluxKind>::INFO.kind,)*
                }
            }

            /// The object's metadata.
            pub fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                match self {
                    $(Self::$kind(o) => o.meta(),)*
                }
            }
        }
    };
}

crate::for_each_kind!(flux_objects);

/// Whether `apiVersion`/`kind` names a kind served by this crate.
pub fn is_served(api_version: &str, kind: &str) -> bool {
    SERVED_KINDS
        .iter()
        .any(|(v, k)| *v == api_version && *k == kind)
}

/// Whether `apiVersion` belongs to a Flux API group (`*.toolkit.fluxcd.io`).
pub fn is_flux_api_version(api_version: &str) -> bool {
    api_version
        .split_once('/')
        .is_some_and(|(group, _)| group.ends_with(".toolkit.fluxcd.io"))
}

fn type_of(value: &Value) -> Result<(&str, &str), Error> {
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or(Error::MissingTypeField("apiVersion"))?;
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .ok_or(Error::MissingTypeField("kind"))?;
    Ok((api_version, kind))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn decodes_by_type() {
        let object = FluxObject::from_value(json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": "podinfo", "namespace": "flux-system"},
            "spec": {"interval": "1m", "url": "https://github.com/stefanprodan/podinfo"},
        }))
        .unwrap();
        assert_eq!(object.kind(), "GitRepository");
        assert_eq!(object.metadata().name.as_deref(), Some("podinfo"));
        assert_eq!(object.to_value().unwrap()["spec"]["interval"], "1m");
    }

    #[test]
    fn rejects_unserved_kinds() {
        let err = FluxObject::from_value(json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1beta2",
            "kind": "GitRepository",
            "metadata": {"name": "x"},
        }))
        .unwrap_err();
        assert!(matches!(err, Error::UnsupportedKind { .. }));
        assert_eq!(
            err.to_string(),
            "unsupported kind GitRepository in source.toolkit.fluxcd.io/v1beta2"
        );
        assert!(matches!(
            FluxObject::from_value(json!({"kind": "X"})),
            Err(Error::MissingTypeField("apiVersion"))
        ));
    }

    #[test]
    fn reports_invalid_objects_with_field() {
        let err = FluxObject::from_value(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "apps"},
            "spec": {"interval": "1m", "sourceRef": {"kind": "GitRepository", "name": "x"}},
        }))
        .unwrap_err();
        let Error::InvalidObject { kind, source } = err else {
            panic!("expected InvalidObject")
        };
        assert_eq!(kind, "Kustomization");
        assert!(source.to_string().contains("prune"), "{source}");
    }

    #[test]
    fn served_kinds_are_flux_kinds() {
        assert_eq!(SERVED_KINDS.len(), 11);
        for (api_version, kind) in SERVED_KINDS {
            assert!(is_flux_api_version(api_version), "{api_version}");
            assert!(is_served(api_version, kind));
        }
        assert!(!is_served("image.toolkit.fluxcd.io/v1beta2", "ImagePolicy"));
        assert!(!is_flux_api_version("kustomize.config.k8s.io/v1beta1"));
    }
}
