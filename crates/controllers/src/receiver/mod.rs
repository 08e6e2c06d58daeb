//! The Receiver (`notification.toolkit.fluxcd.io/v1`): a webhook that asks Flux objects to
//! reconcile now, as Flux's notification-controller serves it.
//!
//! Two halves:
//! - [`ReceiverReconciler`] reads the token of `spec.secretRef` (key `token`) and publishes the
//!   webhook path in `status.webhookPath`: `/hook/` followed by the hex SHA-256 of the token,
//!   the name and the namespace concatenated ([`webhook_path`], Flux's digest), with `Ready=True`
//!   ("Receiver initialized for path: …"). A missing Secret or key is `Ready=False`, reason
//!   `TokenNotFound`, and clears the path (retried with backoff, and at once when a Secret
//!   labelled `reconcile.fluxcd.io/watch: Enabled` changes).
//! - [`server::ReceiverServer`] serves `POST /hook/<digest>` on its own listener
//!   (`capstan controller --receiver-addr`, Flux's port 9292): the Receiver is found through an
//!   in-memory index of webhook paths kept by a watch, the request is checked per type
//!   ([`validate`]) and every object of `spec.resources` is annotated
//!   `reconcile.fluxcd.io/requestedAt`, which the controllers' watches turn into a reconcile.
//!
//! # Guarantees
//! - `status.webhookPath` is Flux's for the same token, name and namespace, so webhooks
//!   configured for Flux keep working.
//! - Secrets never reach conditions, Events, logs or responses: messages name the Secret,
//!   never its data; responses carry a status code only.
//! - Types Capstan cannot check as Flux does are refused at reconcile (`Stalled`), so their
//!   webhooks never reconcile anything unauthenticated: `generic-oidc` and `gcr` (Google's
//!   OIDC token is not verified yet).
//! - `spec.resourceFilter` and `resources[].filter` are CEL expressions over `res` (the object's
//!   `apiVersion`, `kind` and `metadata`) and `req` (the JSON body, `{}` unless the request's
//!   `Content-Type` is `application/json`), as Flux's: an object is annotated only when every
//!   filter that applies is true. One that does not parse stalls the Receiver
//!   (`InvalidCELExpression`).

pub mod server;
pub mod validate;

use std::time::Duration;

use capstan_api::Receiver;
use capstan_api::meta::reason;
use capstan_api::notification::v1::{ReceiverType, WEBHOOK_PATH_PREFIX};
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use sha2::{Digest, Sha256};

use crate::error::{ReconcileError, SecretError};
use crate::runtime::depends::{ObjectKey, References};
use crate::runtime::{self, Step, StepContext, StepFuture, StepOutcome, triggers};

/// The Event reporter, Flux's controller name.
pub const CONTROLLER_NAME: &str = "notification-controller";

/// The key of the Secret holding the token.
pub const TOKEN_KEY: &str = "token";

/// The reason of `Ready=False` when the token cannot be read (Flux's).
pub const TOKEN_NOT_FOUND: &str = "TokenNotFound";

/// The reason of a Receiver Capstan refuses to serve (Flux's `ValidationFailed`).
pub const VALIDATION_FAILED: &str = "ValidationFailed";

/// The webhook path of a Receiver: [`WEBHOOK_PATH_PREFIX`] followed by the lower-case hex
/// SHA-256 of `token`, `name` and `namespace` concatenated (Flux's `GetWebhookPath`).
pub fn webhook_path(token: &str, name: &str, namespace: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(token.as_bytes());
    hasher.update(name.as_bytes());
    hasher.update(namespace.as_bytes());
    let mut path = String::from(WEBHOOK_PATH_PREFIX);
    path.push_str(&hex(&hasher.finalize()));
    path
}

/// A new random token for a Receiver's Secret: 64 hex characters (244 random bits).
pub fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

impl runtime::Kind for Receiver {
    fn interval(&self) -> Result<Option<Duration>, capstan_api::Error> {
        Receiver::interval(self).map(Some)
    }
}

impl References for Receiver {
    fn config_refs(&self) -> Vec<ObjectKey> {
        let namespace = self.namespace().unwrap_or_default();
        let secret = self.spec.secret_ref.as_ref();
        secret
            .map(|secret| ObjectKey::new("Secret", &namespace, &secret.name))
            .into_iter()
            .collect()
    }
}

/// Reconciles Receivers: checks what Capstan can serve, reads the token and publishes the
/// webhook path.
#[derive(Clone, Debug, Default)]
pub struct ReceiverReconciler;

impl ReceiverReconciler {
    /// The reconciler.
    pub fn new() -> Self {
        Self
    }
}

const STEPS: &[Step<ReceiverReconciler>] = &[
    Step {
        name: "validate",
        run: validate_step,
    },
    Step {
        name: "token",
        run: token_step,
    },
];

impl runtime::Reconciler for ReceiverReconciler {
    type Object = Receiver;
    type State = ();
    const CONTROLLER_NAME: &'static str = CONTROLLER_NAME;

    fn steps(&self) -> &[Step<Self>] {
        STEPS
    }

    fn triggers(
        &self,
        client: &Client,
        store: Store<Receiver>,
    ) -> Vec<BoxStream<'static, ObjectRef<Receiver>>> {
        triggers::configs(client, &store)
    }
}

/// What Capstan refuses to serve, as a terminal configuration error.
fn unsupported(receiver: &Receiver) -> Option<(&'static str, String)> {
    if receiver.spec.type_ == ReceiverType::GenericOidc {
        return Some((
            VALIDATION_FAILED,
            "generic-oidc receivers are not supported by Capstan yet".to_owned(),
        ));
    }
    if receiver.spec.type_ == ReceiverType::Gcr {
        return Some((
            VALIDATION_FAILED,
            "gcr receivers are not supported by Capstan yet: Google's OIDC token of the \
             Pub/Sub push request cannot be verified"
                .to_owned(),
        ));
    }
    if receiver.spec.secret_ref.is_none() {
        return Some((
            VALIDATION_FAILED,
            "secretRef is required when type is not generic-oidc".to_owned(),
        ));
    }
    if let Some(filter) = receiver.spec.resource_filter.as_deref()
        && let Err(e) = capstan_apply::BoolExpr::parse(filter)
    {
        return Some((
            reason::INVALID_CEL_EXPRESSION,
            format!("invalid resourceFilter expression: {e}"),
        ));
    }
    for (index, resource) in receiver.spec.resources.iter().enumerate() {
        let Some(filter) = resource.filter.as_deref() else {
            continue;
        };
        if let Err(e) = capstan_apply::BoolExpr::parse(filter) {
            let kind = server::kind_name(resource.reference.kind);
            return Some((
                reason::INVALID_CEL_EXPRESSION,
                format!(
                    "invalid filter expression for resources[{index}] (kind={kind:?}, name={:?}): {e}",
                    resource.reference.name
                ),
            ));
        }
    }
    None
}

fn validate_step(cx: &mut StepContext<ReceiverReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        if let Some((reason, problem)) = unsupported(&cx.object) {
            cx.status.webhook_path = None;
            return Err(ReconcileError::stalled(
                reason,
                format!("Reconciliation failed terminally due to configuration error: {problem}"),
            ));
        }
        Ok(StepOutcome::next())
    })
}

/// Reads the token of `spec.secretRef`.
async fn token(cx: &StepContext<ReceiverReconciler>) -> Result<String, SecretError> {
    let name = cx
        .object
        .spec
        .secret_ref
        .as_ref()
        .map(|r| r.name.clone())
        .unwrap_or_default();
    let secret_name = format!("{}/{name}", cx.namespace());
    let secret = cx
        .api::<Secret>()
        .get(&name)
        .await
        .map_err(|source| SecretError::Get {
            secret: secret_name.clone(),
            source,
        })?;
    let value = secret
        .data
        .and_then(|mut data| data.remove(TOKEN_KEY))
        .ok_or_else(|| SecretError::MissingKey {
            secret: secret_name.clone(),
            key: TOKEN_KEY,
        })?;
    String::from_utf8(value.0).map_err(|_| SecretError::Invalid {
        secret: secret_name,
        source: "the token is not UTF-8".into(),
    })
}

fn token_step(cx: &mut StepContext<ReceiverReconciler>) -> StepFuture<'_> {
    Box::pin(async move {
        let token = match token(cx).await {
            Ok(token) => token,
            Err(error) => {
                cx.status.webhook_path = None;
                return Err(ReconcileError::from_error(
                    crate::ErrorClass::Transient,
                    TOKEN_NOT_FOUND,
                    error,
                ));
            }
        };
        let path = webhook_path(&token, &cx.name(), &cx.namespace());
        cx.set_ready_message(format!("Receiver initialized for path: {path}"));
        if cx.status.webhook_path.as_deref() != Some(path.as_str()) {
            tracing::info!(path, "Receiver initialized");
            cx.status.webhook_path = Some(path);
        }
        Ok(StepOutcome::next())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receiver(spec: &serde_json::Value) -> Receiver {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "notification.toolkit.fluxcd.io/v1",
            "kind": "Receiver",
            "metadata": {"name": "r", "namespace": "ns"},
            "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn what_capstan_cannot_check_as_flux_does_is_refused() {
        let resources = serde_json::json!([{"kind": "GitRepository", "name": "app"}]);
        let refused = |spec: serde_json::Value| unsupported(&receiver(&spec));
        let secret = serde_json::json!({"name": "token"});
        assert_eq!(
            refused(
                serde_json::json!({"type": "github", "secretRef": secret, "resources": resources})
            ),
            None
        );
        for type_ in ["gcr", "generic-oidc"] {
            let (reason, message) = refused(
                serde_json::json!({"type": type_, "secretRef": secret, "resources": resources}),
            )
            .unwrap();
            assert_eq!(reason, VALIDATION_FAILED);
            assert!(message.contains(type_), "{message}");
        }
        let (reason, message) = refused(serde_json::json!({
            "type": "generic", "secretRef": secret, "resources": resources,
            "resourceFilter": "res.metadata.name ==",
        }))
        .unwrap();
        assert_eq!(reason, reason::INVALID_CEL_EXPRESSION);
        assert!(
            message.starts_with("invalid resourceFilter expression"),
            "{message}"
        );
        assert_eq!(
            refused(serde_json::json!({
                "type": "generic", "secretRef": secret, "resources": resources,
                "resourceFilter": "res.metadata.name == req.name",
            })),
            None
        );
        assert!(refused(serde_json::json!({"type": "generic", "resources": resources})).is_some());
    }

    #[test]
    fn webhook_path_is_the_sha256_of_token_name_namespace() {
        // `printf tokenrecvns | sha256sum`
        assert_eq!(
            webhook_path("token", "recv", "ns"),
            "/hook/a8539bf17bbd0279f20b3e728d1f82f0f448c8683aa26a6c8863e8dc3ee523d8"
        );
    }
}
