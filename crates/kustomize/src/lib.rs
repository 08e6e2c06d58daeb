//! A native kustomize engine: a kustomization directory in, the objects
//! `kubectl kustomize` (kustomize v5.5) prints out.
//!
//! The engine is a pure library: no cluster, no network, no async runtime. It reads through a
//! [`FileSystem`] (the disk, or [`MemoryFs`] for unpacked artifacts and tests).
//!
//! ```no_run
//! use std::path::Path;
//! use capstan_kustomize::{BuildOptions, build, to_yaml};
//!
//! let objects = build(Path::new("overlays/production"), &BuildOptions::default())?;
//! print!("{}", to_yaml(&objects));
//! # Ok::<(), capstan_kustomize::Error>(())
//! ```
//!
//! # Expected flow
//!
//! As kustomize: `resources` (files, directories, nested kustomizations) are accumulated,
//! then transformer `configurations` and `crds` are merged, generators run
//! (`configMapGenerator`, `secretGenerator`), `components` are applied, then the builtin
//! transformers in kustomize's order (strategic-merge patches, `patches`, namespace, prefix,
//! suffix, labels, annotations, JSON 6902 patches, replicas, images, replacements) and the
//! builtin configs under `transformers:`. At the top, generated names get their hash suffix,
//! references to renamed objects are fixed, `vars` are substituted, local-config objects are
//! dropped and the output is sorted (`legacy` order unless `sortOptions` says otherwise).
//!
//! # Guarantees
//!
//! * Output values and order match `kubectl kustomize`; [`to_yaml`] prints them the way
//!   kubectl does (sorted keys, go-yaml quoting and folding).
//! * Files are only read in or below the root of the kustomization naming them
//!   ([`LoadRestrictor::RootOnly`], kustomize's default); symlinks are resolved before the
//!   check, so links leaving the root are refused.
//! * With [`BuildOptions::boundary`] set, no file outside that directory is ever read, by
//!   any field, even through symbolic links; the refusal is the same whether or not the path
//!   exists outside.
//! * The engine never uses the network: remote bases (Git URLs under `resources:`) are
//!   fetched by the caller's [`RemoteLoader`] ([`BuildOptions::remote`]) and refused without
//!   one; exec/Go plugins are never used. `helmCharts` is rendered natively
//!   (no `helm` binary, no chart pulls) only with [`BuildOptions::enable_helm`]; without it,
//!   it fails as kustomize does without `--enable-helm`.
//! * No panics on bad input.
//!
//! # Errors
//!
//! Every [`Error`] names the file and, where it applies, the field: malformed YAML, a missing
//! resource, a patch whose target matches nothing, a cycle of bases, a path escaping the root.

mod build;
mod config;
mod error;
mod fieldspec;
mod folded;
mod fs;
mod generate;
mod helm;
mod remote;
mod resource;
mod smp;
mod transform;
mod types;
mod yaml;

use std::path::Path;

pub use build::{BuildOptions, LoadRestrictor, MANAGED_BY_VERSION, build_with};
pub use error::Error;
pub use fs::{Boundary, Confined, DiskFs, FileSystem, MemoryFs, OverlayFs};
pub use remote::{
    DEFAULT_REMOTE_TIMEOUT, RemoteLoader, RemoteTarget, is_remote, parse_remote_target,
};
pub use types::Kustomization;
pub use yaml::{YamlError, parse_documents, parse_documents_located, to_yaml, to_yaml_document};

/// Builds the kustomization in `dir` on the local disk.
pub fn build(dir: &Path, options: &BuildOptions) -> Result<Vec<serde_json::Value>, Error> {
    build_with(&DiskFs, dir, options)
}

/// Parses a kustomization file's text (for tools and fuzzing); `file` names it in errors.
pub fn parse_kustomization(text: &str, file: &Path) -> Result<Kustomization, Error> {
    build::parse_kustomization(text, file)
}
