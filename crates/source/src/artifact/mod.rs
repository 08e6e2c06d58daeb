//! Artifact tarballs: packing a directory the way Flux does, ignore rules, and safe extraction.
//!
//! # Expected flow
//! A producer builds an [`IgnoreFilter`] ([`IgnoreFilter::for_source`] for Git and Bucket
//! sources, [`IgnoreFilter::from_patterns`] for `--ignore-paths`), then calls [`pack`] or
//! [`pack_to_file`]. A consumer verifies the digest of what it received and calls
//! [`extract`] with [`Limits`].
//!
//! # Guarantees
//! - Packing is deterministic: the same tree gives the same bytes and the same digest.
//! - Extraction never writes outside the target directory, and a refused tarball leaves no
//!   target directory behind.
//!
//! # Errors
//! [`crate::Error::UnsafeEntry`] and [`crate::Error::LimitExceeded`] name the offending entry;
//! [`crate::Error::InvalidArchive`] covers streams that are not gzip-compressed tarballs.

mod extract;
mod ignore;
mod pack;

pub use extract::{Extracted, Limits, extract, extract_file};
pub use ignore::{EXCLUDE_CI, EXCLUDE_EXT, EXCLUDE_EXTRA, EXCLUDE_VCS, IGNORE_FILE, IgnoreFilter};
pub(crate) use pack::write_atomically;
pub use pack::{
    ModePolicy, PackOptions, Packed, STORAGE_DIR_MODE, STORAGE_EXE_MODE, STORAGE_FILE_MODE, pack,
    pack_to_file,
};

#[cfg(test)]
mod tests;
