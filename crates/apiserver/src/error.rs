//! Errors as Kubernetes `Status` objects.

use serde_json::{Value, json};

/// A cause inside a `Status`'s `details.causes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// e.g. `FieldValueInvalid`, `FieldValueRequired`, `FieldManagerConflict`.
    pub reason: String,
    pub message: String,
    pub field: String,
}

/// An API error: renders as a Kubernetes `Status` with the matching HTTP code.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: u16,
    /// `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, `BadRequest`, ...
    pub reason: &'static str,
    pub message: String,
    /// `details.name`, `details.group`, `details.kind` (the resource).
    pub name: Option<String>,
    pub group: Option<String>,
    pub kind: Option<String>,
    pub causes: Vec<Cause>,
    /// `details.retryAfterSeconds`
    pub retry_after_seconds: Option<u32>,
}

/// Shorthand result type.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            name: None,
            group: None,
            kind: None,
            causes: Vec::new(),
            retry_after_seconds: None,
        }
    }

    /// Attaches `details` naming the object.
    #[must_use]
    pub fn with_details(mut self, group: &str, resource: &str, name: &str) -> Self {
        self.group = Some(group.to_owned());
        self.kind = Some(resource.to_owned());
        if !name.is_empty() {
            self.name = Some(name.to_owned());
        }
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    /// Optimistic-concurrency failure.
    pub fn conflict(group: &str, resource: &str, name: &str, detail: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {detail}",
                qualified(group, resource)
            ),
        )
        .with_details(group, resource, name)
    }

    /// 422 with field causes.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let list = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect::<Vec<_>>();
        let joined = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        let gk = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{gk} \"{name}\" is invalid: {joined}"),
        );
        e.group = Some(group.to_owned());
        e.kind = Some(kind.to_owned());
        e.name = Some(name.to_owned());
        e.causes = causes;
        e
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut details = serde_json::Map::new();
        if let Some(n) = &self.name {
            details.insert("name".into(), json!(n));
        }
        if let Some(g) = &self.group {
            details.insert("group".into(), json!(g));
        }
        if let Some(k) = &self.kind {
            details.insert("kind".into(), json!(k));
        }
        if !self.causes.is_empty() {
            details.insert(
                "causes".into(),
                Value::Array(
                    self.causes
                        .iter()
                        .map(
                            |c| json!({"reason": c.reason, "message": c.message, "field": c.field}),
                        )
                        .collect(),
                ),
            );
        }
        if let Some(s) = self.retry_after_seconds {
            details.insert("retryAfterSeconds".into(), json!(s));
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // `StatusReasonUnknown`, which kube-apiserver omits.
            status.as_object_mut().map(|o| o.remove("reason"));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

/// `deployments.apps` or `configmaps`.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    }
}
