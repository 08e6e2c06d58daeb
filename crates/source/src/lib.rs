//! Flux-compatible source artifacts for Capstan: the library the source reconcilers build on.
//!
//! - [`artifact`]: packing a directory into a gzip-compressed tarball exactly as Flux does,
//!   `.sourceignore` / `spec.ignore` filtering, and safe extraction with [`artifact::Limits`].
//! - [`storage`]: content-addressed artifact storage in Flux's layout
//!   (`<kind>/<namespace>/<name>/<file>`), atomic writes, garbage collection and an HTTP
//!   router serving the files.
//! - [`fetch`]: the consumer side — download an artifact URL, verify its digest, extract it.
//! - [`oci`]: push and pull Flux OCI artifacts (`flux push artifact` compatible).
//! - [`git`]: fetch a Git reference (`GitRepository.spec.ref`) into a directory, or resolve it
//!   to a Flux revision without downloading objects.
//! - [`bucket`]: fetch a Flux `Bucket` (S3-compatible or Azure Blob) into a directory, with
//!   Flux's `sha256:` object-index revision, or compute that revision from a listing alone.
//! - [`helm`]: Helm chart repositories (`index.yaml`, chart downloads), chart builds and
//!   `helm dependency build`, for the HelmRepository and HelmChart reconcilers.
//! - [`redact`]: URLs without credentials and error chains, for every message naming a URL.
//! - [`temp`]: recognisable temporary directories, and the sweep of those a crash left.
//! - [`semver_constraint`]: Masterminds-compatible version constraints (`>=1.2 <2`, `^1.2 || ~2.0`).
//!
//! # Expected flow
//! A source reconciler fetches upstream content into a directory, builds an
//! [`artifact::IgnoreFilter`], and calls [`storage::Storage::archive`]; it records the returned
//! [`storage::Artifact`] (path, URL, revision, `sha256:` digest, size) in `status.artifact` and
//! garbage-collects older files. Consumers call [`fetch::fetch_artifact`] with the URL and
//! digest from that status.
//!
//! ```no_run
//! # async fn example() -> capstan_source::Result<()> {
//! use std::path::Path;
//! use capstan_source::artifact::{IgnoreFilter, Limits};
//! use capstan_source::storage::{Storage, revision_file_name, DEFAULT_RETENTION};
//!
//! let storage = Storage::new("/data", "source-controller.flux-system.svc.cluster.local.")?;
//! let revision = "main@sha1:0123456789abcdef0123456789abcdef01234567";
//! let file = revision_file_name(revision, "tar.gz");
//! let mut artifact = storage.new_artifact("GitRepository", "flux-system", "app", revision, &file);
//! let checkout = Path::new("/tmp/checkout");
//! let filter = IgnoreFilter::for_source(checkout, None)?;
//! storage.archive(&mut artifact, checkout, Some(&filter))?;
//! storage.garbage_collect(&artifact, DEFAULT_RETENTION)?;
//!
//! // Elsewhere, a consumer:
//! let digest = artifact.digest.parse()?;
//! capstan_source::fetch::fetch_artifact(&artifact.url, &digest, Path::new("/tmp/app"), &Limits::default())
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Guarantees
//! - Tarballs are deterministic: the same tree gives the same digest.
//! - Nothing is ever written outside a target or storage directory, whatever a tarball,
//!   an artifact path or an HTTP request contains; refused input leaves no partial output.
//! - Stored files are replaced atomically; downloaded and pulled content is verified against
//!   its digest before it is extracted.
//!
//! # Errors
//! One [`Error`] type; its messages are short, lower-case and name the path, tar entry, URL or
//! OCI reference involved, ready for a condition message.
//!
//! TLS uses rustls with the `ring` provider, installed as the process default on first use
//! when no provider is installed yet.

pub mod artifact;
pub mod bucket;
pub mod digest;
mod error;
pub mod fetch;
pub mod git;
pub mod helm;
pub mod oci;
pub mod redact;
/// Masterminds-compatible version constraints, now in their own crate ([`capstan_semver`]).
pub use capstan_semver as semver_constraint;
pub mod storage;
pub mod temp;
pub mod tls;

pub use digest::Digest;
pub use error::{Error, Result};
