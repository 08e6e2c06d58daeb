//! A [`kube::Client`] that acts as another user through Kubernetes impersonation headers.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{HeaderValue, Request, Response};
use kube::client::Body;

/// The header naming the impersonated user.
pub const IMPERSONATE_USER: &str = "impersonate-user";
/// The header naming one impersonated group (repeated per group).
pub const IMPERSONATE_GROUP: &str = "impersonate-group";

/// The user name of a ServiceAccount, `system:serviceaccount:<namespace>:<name>`.
///
/// Impersonate it without groups, as Flux does: the API server then adds the ServiceAccount's
/// groups (`system:serviceaccounts`, `system:serviceaccounts:<namespace>`) itself, and the
/// controller needs permission to impersonate the ServiceAccount only, not also groups.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// A client sending every request of `client` with `Impersonate-User: user` and one
/// `Impersonate-Group` header per group, so that the API server authorises it as that user.
///
/// # Errors
/// A user or group that is not a valid header value.
pub fn impersonating_client(
    client: kube::Client,
    user: &str,
    groups: &[String],
) -> Result<kube::Client, http::header::InvalidHeaderValue> {
    let service = Impersonate {
        user: HeaderValue::from_str(user)?,
        groups: groups
            .iter()
            .map(|g| HeaderValue::from_str(g))
            .collect::<Result<_, _>>()?,
        default_namespace: client.default_namespace().to_owned(),
        inner: client,
    };
    let namespace = service.default_namespace.clone();
    Ok(kube::Client::new(service, namespace))
}

#[derive(Clone)]
struct Impersonate {
    inner: kube::Client,
    user: HeaderValue,
    groups: Vec<HeaderValue>,
    default_namespace: String,
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response<Body>, kube::Error>> + Send>>;

impl tower::Service<Request<Body>> for Impersonate {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let headers = request.headers_mut();
        headers.remove(IMPERSONATE_GROUP);
        headers.insert(IMPERSONATE_USER, self.user.clone());
        for group in &self.groups {
            headers.append(IMPERSONATE_GROUP, group.clone());
        }
        let client = self.inner.clone();
        Box::pin(async move { client.send(request).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_accounts_map_to_kubernetes_user_names() {
        assert_eq!(
            service_account_user("apps", "deployer"),
            "system:serviceaccount:apps:deployer"
        );
    }
}
