//! Notification providers: Flux's event shape, the request each Provider type sends for an
//! event, and the HTTP sender (issue 15).
//!
//! This is the layer under Alert matching and the durable outbox:
//!
//! 1. [`Event`]: the event Flux's controllers POST (`involvedObject`, `severity`, `timestamp`,
//!    `message`, `reason`, `metadata`, `reportingController`, `reportingInstance`), serialised
//!    as Go's `encoding/json` does, so a Flux controller's POST parses and a forwarded event
//!    (generic, generic-hmac, GitHub dispatch) has Flux's bytes.
//! 2. [`ProviderSettings::resolve`]: a Provider with its Secrets, validated; errors name the
//!    Provider and the field. Secrets are [`Secret`]s, redacted in every `Debug`/`Display`.
//! 3. [`build`]: the pure function `(settings, event) -> Vec<Request>` for each provider type,
//!    payloads as notification-controller's `internal/notifier` writes them. Every request
//!    carries [`IDEMPOTENCY_KEY_HEADER`], stable for the same event and provider.
//! 4. [`send`]: one attempt through a [`Transport`] (timeout, CA, client certificate, proxy),
//!    classified as retryable (connection, timeout, 408, 429, 5xx, with `Retry-After`) or
//!    permanent.
//!
//! ```no_run
//! # async fn example(provider: &capstan_api::notification::v1beta3::Provider,
//! #                  secrets: &capstan_notify::ProviderSecrets,
//! #                  event: &capstan_notify::Event) -> Result<(), Box<dyn std::error::Error>> {
//! let settings = capstan_notify::ProviderSettings::resolve(provider, secrets)?;
//! let transport = capstan_notify::Transport::new(&settings)?;
//! for request in capstan_notify::build(&settings, event, None)? {
//!     match capstan_notify::send(&request, &transport).await {
//!         Ok(_) => {}
//!         Err(e) if e.is_retryable() => { /* queue again after e.retry_after() */ }
//!         Err(e) => return Err(e.into()),
//!     }
//! }
//! # Ok(()) }
//! ```

mod commit_status;
mod event;
mod gojson;
mod providers;
mod request;
mod secret;
mod send;
mod settings;

pub use commit_status::{StatusExpr, default_key as default_commit_status_key};
pub use event::{
    EVENT_GROUP, Event, META_COMMIT, META_COMMIT_STATUS, META_ORIGIN_REVISION, META_REVISION,
    META_SUMMARY, META_TOKEN, MetadataConflict, ObjectReference, PROGRESSING_REASON, Severity,
    commit_of, rfc3339,
};
pub use providers::{BuildError, build, dispatches_to};
pub use request::{Header, Method, Request};
pub use secret::{REDACTED, Secret};
pub use send::{Delivered, SLACK_API_URL, SendError, Transport, parse_retry_after, send};
pub use settings::{
    ProviderSecrets, ProviderSettings, SUPPORTED, SecretData, SettingsError, TlsSettings,
};

/// The header every request carries so receivers can drop duplicates of an at-least-once
/// delivery: 32 hex characters, the same for every attempt of the same request (derived from
/// the Provider's namespace, name and UID, the event's JSON and the request's position).
pub const IDEMPOTENCY_KEY_HEADER: &str = "Capstan-Idempotency-Key";
