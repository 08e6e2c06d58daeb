//! Errors returned by this crate.

use thiserror::Error;

/// Why a Go duration string (`"1h30m"`) could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DurationError {
    /// The string was empty.
    #[error("empty duration")]
    Empty,
    /// The duration had a leading minus sign; Flux durations are never negative.
    #[error("negative duration {0:?}")]
    Negative(String),
    /// A number was expected but something else was found.
    #[error("invalid duration {input:?}: expected a number at byte {offset}")]
    ExpectedNumber {
        /// The whole input.
        input: String,
        /// Byte offset of the offending character.
        offset: usize,
    },
    /// A number was not followed by a unit (only `"0"` may omit the unit).
    #[error("invalid duration {0:?}: missing unit")]
    MissingUnit(String),
    /// The unit is not one of `ns`, `us`, `µs`, `ms`, `s`, `m`, `h`.
    #[error("invalid duration {input:?}: unknown unit {unit:?}")]
    UnknownUnit {
        /// The whole input.
        input: String,
        /// The unit that was not recognised.
        unit: String,
    },
    /// The value does not fit Go's `time.Duration` (about 292 years).
    #[error("invalid duration {0:?}: out of range")]
    Overflow(String),
}

/// Why a Flux revision string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RevisionError {
    /// The string was empty.
    #[error("empty revision")]
    Empty,
    /// The part before `@` was empty (`"@sha1:…"`).
    #[error("invalid revision {0:?}: empty name before '@'")]
    EmptyName(String),
    /// The digest algorithm is not a valid OCI digest algorithm name.
    #[error("invalid revision {input:?}: bad digest algorithm {algorithm:?}")]
    InvalidAlgorithm {
        /// The whole input.
        input: String,
        /// The offending algorithm.
        algorithm: String,
    },
    /// The encoded digest has the wrong characters or length for its algorithm.
    #[error("invalid revision {input:?}: bad {algorithm} digest {encoded:?}")]
    InvalidDigest {
        /// The whole input.
        input: String,
        /// The digest algorithm.
        algorithm: String,
        /// The offending encoded part.
        encoded: String,
    },
}

/// Errors from typed accessors and object helpers.
#[derive(Debug, Error)]
pub enum Error {
    /// A duration field holds a value that is not a valid Go duration.
    #[error("invalid duration in {field}")]
    InvalidDuration {
        /// The field path, e.g. `spec.interval`.
        field: &'static str,
        /// What was wrong with it.
        #[source]
        source: DurationError,
    },
    /// A document has no `apiVersion` or `kind`.
    #[error("document has no {0}")]
    MissingTypeField(&'static str),
    /// The document's `apiVersion`/`kind` is not one this crate serves.
    #[error("unsupported kind {kind} in {api_version}")]
    UnsupportedKind {
        /// The document's `apiVersion`.
        api_version: String,
        /// The document's `kind`.
        kind: String,
    },
    /// The document does not match the typed schema of its kind.
    #[error("invalid {kind} object")]
    InvalidObject {
        /// The kind that was being decoded.
        kind: &'static str,
        /// The decoding error, naming the offending field.
        #[source]
        source: serde_json::Error,
    },
    /// Serialising a CRD to YAML failed.
    #[error("cannot render crd {name} as yaml")]
    RenderCrd {
        /// The CRD name.
        name: String,
        /// The serialiser error.
        #[source]
        source: serde_saphyr::SerializeError,
    },
}
