//! Flux-compatible Kubernetes API types for Capstan.
//!
//! This crate holds the custom resources Capstan serves, wire-compatible with Flux 2.x:
//!
//! | group | version | kinds |
//! |---|---|---|
//! | `source.toolkit.fluxcd.io` | `v1` | [`GitRepository`], [`OCIRepository`], [`Bucket`], [`HelmRepository`], [`HelmChart`], [`ExternalArtifact`] |
//! | `kustomize.toolkit.fluxcd.io` | `v1` | [`Kustomization`] |
//! | `helm.toolkit.fluxcd.io` | `v2` | [`HelmRelease`] |
//! | `notification.toolkit.fluxcd.io` | `v1beta3` | [`Provider`], [`Alert`] |
//! | `notification.toolkit.fluxcd.io` | `v1` | [`Receiver`] |
//!
//! Field names, defaults, enums and status shapes follow Flux's API. Fields that Flux marks
//! optional are `Option`s (or empty collections) so that a manifest survives a decode/encode
//! round trip unchanged; defaults Flux applies live in typed accessors on each kind
//! (`interval()`, `timeout()`, `retry_interval()`, ...) and, where Flux declares them, as
//! `default:` in the CRD schema.
//!
//! Shared pieces:
//! - [`meta`]: references, [`meta::Artifact`], condition types and reasons, annotation and label
//!   keys, the [`meta::FINALIZER`].
//! - [`duration`]: Go duration strings ([`parse_go_duration`], [`format_go_duration`]).
//! - [`revision`]: Flux revision strings ([`Revision`]).
//! - [`crd`]: the CustomResourceDefinitions ([`crds`], [`crds_yaml`]); the rendered YAML is
//!   committed as `crds/capstan-crds.yaml`.
//! - [`kind`]: the facts of every kind and its status accessors ([`FluxKind`], [`KINDS`]), and
//!   [`readiness`], the one reading of whether an object is Ready.
//! - [`object`]: decoding untyped documents by `apiVersion`/`kind` ([`FluxObject`]).
//!
//! # Example
//!
//! ```no_run
//! use capstan_api::{FluxObject, Kustomization, crds_yaml};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let document: serde_json::Value = serde_json::from_str(&std::fs::read_to_string("ks.json")?)?;
//! if let FluxObject::Kustomization(ks) = FluxObject::from_value(document)? {
//!     let ks: Kustomization = *ks;
//!     println!(
//!         "{} every {:?}, timeout {:?}, source {}",
//!         ks.metadata.name.as_deref().unwrap_or_default(),
//!         ks.interval()?,
//!         ks.timeout()?,
//!         ks.spec.source_ref,
//!     );
//! }
//! std::fs::write("crds.yaml", crds_yaml()?)?;
//! # Ok(())
//! # }
//! ```

pub mod crd;
pub mod duration;
pub mod error;
pub mod helm;
pub mod kind;
pub mod kustomize;
pub mod message;
pub mod meta;
pub mod notification;
pub mod object;
pub mod revision;
pub mod source;

pub use crd::{crds, crds_yaml};
pub use duration::{format_go_duration, parse_go_duration};
pub use error::{DurationError, Error, RevisionError};
pub use helm::v2::HelmRelease;
pub use kind::{FluxKind, FluxStatus, KINDS, KindInfo, Readiness, Role, readiness};
pub use kustomize::v1::Kustomization;
pub use meta::FINALIZER;
pub use notification::v1::Receiver;
pub use notification::v1beta3::{Alert, Provider};
pub use object::{FluxObject, SERVED_KINDS};
pub use revision::{Digest, Revision};
pub use source::v1::{
    Bucket, ExternalArtifact, GitRepository, HelmChart, HelmRepository, OCIRepository,
};
