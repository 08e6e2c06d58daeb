//! Error types: schema construction errors and validation field errors.

use std::fmt;

/// One validation failure, Kubernetes style.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Path like `spec.replicas` or `spec.template.spec.containers[0].name`; empty for the
    /// node validation started at.
    pub field: String,
    /// The class of failure.
    pub kind: FieldErrorKind,
    /// Human detail, e.g. `Invalid value: "string": spec.replicas in body must be of type integer: "string"`.
    pub message: String,
}

impl fmt::Display for FieldError {
    /// Formats as Kubernetes does in a `Status` cause list: `spec.replicas: Invalid value: ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// The class of a [`FieldError`], mirroring Kubernetes' `field.ErrorType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// `FieldValueInvalid`: wrong type, pattern, range, format, duplicate list entries, ...
    Invalid,
    /// `FieldValueRequired`: a required field is missing.
    Required,
    /// `FieldValueNotSupported`: the value is not in the `enum`.
    NotSupported,
    /// `FieldValueTooLong`: a string exceeds `maxLength`.
    TooLong,
    /// `FieldValueTooMany`: a list or map exceeds `maxItems`/`maxProperties`.
    TooMany,
    /// `FieldValueForbidden`: a property that `additionalProperties: false` forbids.
    Forbidden,
}

impl FieldErrorKind {
    /// The reason Kubernetes reports in `Status.details.causes[].reason`.
    pub fn reason(self) -> &'static str {
        match self {
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
        }
    }
}

/// Why a schema could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// A `$ref` names a definition that is not in the definitions map.
    #[error("unresolved reference {0}")]
    UnresolvedRef(String),
    /// A keyword has a value of the wrong shape, or a `pattern` does not compile.
    #[error("invalid schema at {path}: {message}")]
    Invalid {
        /// JSON-pointer-like location of the offending keyword.
        path: String,
        /// What is wrong with it.
        message: String,
    },
}
