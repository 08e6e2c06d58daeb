//! Helm's release records (`release.v1`): the JSON Helm v4.2.3 stores for every revision of a
//! release, and the codec its storage drivers wrap it in.
//!
//! Expected flow: build a [`Release`] from a chart loaded and prepared with [`crate::chart`]
//! ([`Chart::from_loaded`]), the user's values, the rendered manifest and hooks
//! ([`Hook::from_output`]); [`encode`] it into the text a Helm Secret holds under
//! `data.release`; [`decode`] what Helm (or Capstan) stored.
//!
//! Guarantees: the JSON has Helm's field names, omissions and encodings (`[]byte` as base64,
//! times as RFC 3339 with nanoseconds, `null` for absent charts' locks), so Helm's SDK reads what
//! Capstan writes; fields this model does not know (written by a newer Helm) are kept through a
//! decode and re-encode. [`decode`] accepts gzipped and plain JSON, as Helm does.
//!
//! Errors name the failing field (`info.status`) or stage (base64, gzip) and never quote the
//! payload: values may hold secrets.
//!
//! ```no_run
//! use capstan_helm::{chart, release};
//!
//! let loaded = chart::load("charts/podinfo")?;
//! let mut record = release::Release::new("podinfo", "apps", 1, release::Chart::from_loaded(&loaded));
//! record.info.status = release::Status::Deployed;
//! record.info.description = "Install complete".into();
//! let text = release::encode(&record)?;
//! assert_eq!(release::decode(text.as_bytes())?.name, "podinfo");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod codec;
mod model;
mod serde_helpers;

pub use codec::{DecodeError, EncodeError, MAX_RELEASE_SIZE, decode, decode_json, encode, to_json};
pub use model::{
    Chart, Dependency, File, Hook, HookExecution, HookPhase, Info, Lock, Maintainer, Metadata,
    Release, Status,
};

/// The Secret (or ConfigMap) type Helm's storage drivers give a release record.
pub const SECRET_TYPE: &str = "helm.sh/release.v1";

/// The key of a release's record: `sh.helm.release.v1.<name>.v<version>` (Helm's `makeKey`).
pub fn storage_key(name: &str, version: i64) -> String {
    format!("sh.helm.release.v1.{name}.v{version}")
}

/// A release's `manifest`: the engine's sorted non-hook documents
/// ([`crate::output::sort_manifests`]), each as `---\n# Source: <template path>\n<document>\n`,
/// as Helm's install, upgrade and rollback write it.
pub fn manifest_text(manifests: &[crate::output::Manifest]) -> String {
    use std::fmt::Write as _;
    manifests.iter().fold(String::new(), |mut text, manifest| {
        let _ = write!(
            text,
            "---\n# Source: {}\n{}\n",
            manifest.name, manifest.content
        );
        text
    })
}

#[cfg(test)]
mod tests;
