//! Error types of this crate.

use std::time::Duration;

/// How a failed reconcile is handled; the class picks the condition reason and status, the
/// Event type, the metric label and the requeue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// Nothing changes until the spec changes: `Stalled=True`, a Warning event, no requeue.
    Stalled,
    /// A precondition is not met yet (e.g. a dependency): `Reconciling=True` (`Progressing`),
    /// a Normal event, requeue after the delay.
    Waiting(Duration),
    /// A failure worth retrying: `Reconciling=True` (`ProgressingWithRetry`), a Warning event,
    /// requeue with exponential backoff.
    Transient,
}

impl ErrorClass {
    /// The label used for this class in metrics and logs.
    pub fn label(self) -> &'static str {
        match self {
            Self::Stalled => "stalled",
            Self::Waiting(_) => "waiting",
            Self::Transient => "transient",
        }
    }
}

/// A reconcile step failure: its class, the condition reason (`GitOperationFailed`, ...) and a
/// message ready for `Ready.message`.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ReconcileError {
    /// How the failure is handled.
    pub class: ErrorClass,
    /// The reason written into the `Ready` (and `Stalled`) condition.
    pub reason: String,
    /// The message written into the `Ready` condition.
    pub message: String,
    /// The underlying error, when there is one.
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ReconcileError {
    /// A failure of `class` with `reason` and `message`.
    pub fn new(class: ErrorClass, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            class,
            reason: reason.into(),
            message: message.into(),
            source: None,
        }
    }

    /// A failure that needs a spec change.
    pub fn stalled(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Stalled, reason, message)
    }

    /// A failure retried with backoff.
    pub fn transient(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Transient, reason, message)
    }

    /// A precondition not met yet; retried after `delay`.
    pub fn waiting(delay: Duration, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Waiting(delay), reason, message)
    }

    /// Attaches the underlying error.
    #[must_use]
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }
}

/// A Secret named in a spec (`secretRef`, `certSecretRef`, `verify.secretRef`) could not be
/// read or used. Condition messages render it with its causes
/// ([`capstan_source::redact::error_chain`]): "invalid secret 'ns/name': <why>".
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The Secret could not be read.
    #[error("failed to get secret '{secret}'")]
    Get {
        /// `<namespace>/<name>`.
        secret: String,
        /// The underlying error.
        #[source]
        source: kube::Error,
    },
    /// The Secret lacks a key the spec needs.
    #[error("secret '{secret}' has no {key} key")]
    MissingKey {
        /// `<namespace>/<name>`.
        secret: String,
        /// The key.
        key: &'static str,
    },
    /// A value of the Secret cannot be used.
    #[error("invalid secret '{secret}'")]
    Invalid {
        /// `<namespace>/<name>`.
        secret: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A key of the Secret cannot be used (its error names the key).
    #[error("secret '{secret}'")]
    Key {
        /// `<namespace>/<name>`.
        secret: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The Secret holds something this controller cannot use, or not what it needs.
    #[error("secret '{secret}' {problem}")]
    Unusable {
        /// `<namespace>/<name>`.
        secret: String,
        /// What is wrong, and what to do when that helps.
        problem: String,
    },
}

impl ReconcileError {
    /// A failure of `class` with `reason` whose message is `error` with its causes (URLs
    /// without credentials), keeping `error` as the source.
    pub fn from_error(
        class: ErrorClass,
        reason: impl Into<String>,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::new(class, reason, capstan_source::redact::error_chain(&error)).with_source(error)
    }

    /// A failure of `class` with `reason` whose message is `context: ` followed by `error`
    /// with its causes, keeping `error` as the source.
    pub fn with_context(
        class: ErrorClass,
        reason: impl Into<String>,
        context: impl std::fmt::Display,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        let message = format!("{context}: {}", capstan_source::redact::error_chain(&error));
        Self::new(class, reason, message).with_source(error)
    }
}

/// Failures of the runtime itself (talking to the API server), outside the steps.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed.
    #[error("cannot {action} {object}")]
    Kube {
        /// What was being done (`add finalizer to`, `patch status of`, ...).
        action: &'static str,
        /// `<kind> <namespace>/<name>`.
        object: String,
        /// The underlying error.
        #[source]
        source: kube::Error,
    },
    /// The object has no name or namespace.
    #[error("{kind} object has no {field}")]
    MissingMetadata {
        /// The kind.
        kind: String,
        /// `metadata.name` or `metadata.namespace`.
        field: &'static str,
    },
    /// The status could not be serialized.
    #[error("cannot serialize the status of {object}")]
    Serialize {
        /// `<kind> <namespace>/<name>`.
        object: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// Cleanup on deletion failed.
    #[error("cannot clean up {object}: {source}")]
    Cleanup {
        /// `<kind> <namespace>/<name>`.
        object: String,
        /// The underlying error.
        #[source]
        source: ReconcileError,
    },
    /// The controller could not start.
    #[error("cannot start the {kind} controller")]
    Start {
        /// The kind.
        kind: String,
        /// The underlying error.
        #[source]
        source: kube::Error,
    },
}
