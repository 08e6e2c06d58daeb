//! Errors of the apply engine.

use std::fmt;
use std::time::Duration;

use crate::changeset::ChangeSet;
use crate::health::HealthResult;

/// Why one object could not be applied, diffed or deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectError {
    /// The object, as `Kind/namespace/name`.
    pub object: String,
    /// What went wrong, with the API server's message when it gave one.
    pub message: String,
    /// Whether the error is an immutable-field conflict (retrying with force recreates the object).
    pub immutable: bool,
}

impl ObjectError {
    /// An error about `object`.
    pub fn new(object: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            object: object.into(),
            message: message.into(),
            immutable: false,
        }
    }
}

impl fmt::Display for ObjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.object, self.message)
    }
}

impl std::error::Error for ObjectError {}

/// Errors of the apply engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Some objects failed; the others were applied (or deleted) and are in the change set.
    #[error("{}", join(&format!("{} of {} objects failed: ", .errors.len(), .errors.len() + .changeset.entries.len()), .errors))]
    Partial {
        /// What was done to the objects that did not fail.
        changeset: Box<ChangeSet>,
        /// One error per failed object.
        errors: Vec<ObjectError>,
    },
    /// Some objects could not be compared with the cluster.
    #[error("{}", join(&format!("diff failed for {} objects: ", .errors.len()), .errors))]
    Diff {
        /// The drift of the objects that could be compared.
        drifts: Vec<crate::manager::Drift>,
        /// One error per failed object.
        errors: Vec<ObjectError>,
    },
    /// CustomResourceDefinitions did not become Established in time.
    #[error("timed out after {timeout:?} waiting for CRDs to be established: {}", .pending.join(", "))]
    CrdTimeout {
        /// How long the engine waited.
        timeout: Duration,
        /// The CRDs still not established.
        pending: Vec<String>,
    },
    /// Health checks found a failed object.
    #[error("{}", join("health check failed: ", .failed))]
    HealthFailed {
        /// The failed objects with their reasons.
        failed: Vec<HealthResult>,
    },
    /// Health checks did not all pass before the timeout.
    #[error("{}", join(&format!("timed out after {timeout:?} waiting for: "), .pending))]
    HealthTimeout {
        /// How long the engine waited.
        timeout: Duration,
        /// The objects that were not ready, with their reasons.
        pending: Vec<HealthResult>,
    },
    /// An inventory entry id is not `<namespace>_<name>_<group>_<kind>`.
    #[error("invalid inventory id {id:?}: expected <namespace>_<name>_<group>_<kind>")]
    InventoryId {
        /// The id.
        id: String,
    },
    /// A request the engine needs failed before any object was touched.
    #[error("{what}")]
    Kube {
        /// What the engine was doing.
        what: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
}

/// `prefix` and the entries (object errors, health results), summarised when there are many,
/// the whole bounded (`capstan_api::message::summarize_after`).
fn join<T: fmt::Display>(prefix: &str, entries: &[T]) -> String {
    let entries: Vec<String> = entries.iter().map(ToString::to_string).collect();
    capstan_api::message::summarize_after(prefix, &entries)
}

/// The API server's message for a client error, or the error's own text.
pub(crate) fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// The HTTP code of an API error.
pub(crate) fn api_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Whether an API error says the object does not exist.
pub(crate) fn is_not_found(error: &kube::Error) -> bool {
    api_code(error) == Some(404)
}

/// Whether an API error is an immutable-field rejection (`422 ... field is immutable`), as Flux
/// recognises them.
pub(crate) fn is_immutable(error: &kube::Error) -> bool {
    let kube::Error::Api(status) = error else {
        return false;
    };
    let message = status.message.to_ascii_lowercase();
    (status.code == 422 || status.code == 400)
        && (message.contains("field is immutable")
            || message.contains("is immutable")
            || message.contains("cannot change")
            || message.contains("may not change"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, "Invalid")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn immutable_errors_are_recognised() {
        assert!(is_immutable(&api_error(
            422,
            "Job.batch \"x\" is invalid: spec.template: Invalid value: ...: field is immutable"
        )));
        assert!(!is_immutable(&api_error(
            422,
            "spec.replicas: Invalid value: -1"
        )));
        assert!(!is_immutable(&api_error(500, "field is immutable")));
    }

    #[test]
    fn partial_errors_name_every_failed_object() {
        let error = Error::Partial {
            changeset: Box::default(),
            errors: vec![
                ObjectError::new("ConfigMap/default/a", "boom"),
                ObjectError::new("Service/default/b", "bad port"),
            ],
        };
        assert_eq!(
            error.to_string(),
            "2 of 2 objects failed: ConfigMap/default/a: boom; Service/default/b: bad port"
        );
    }
}
