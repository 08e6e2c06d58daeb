//! Bad input gets a Kubernetes `Status` error with the right code, and the server keeps serving.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::harness::TestCluster;

/// Sends a raw request; returns the error status (code, reason, message) or panics on success.
async fn expect_status(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, String, String) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type)
        .body(body)
        .unwrap();
    match client.request_text(request).await {
        Ok(text) => panic!("{method} {path} unexpectedly succeeded: {text}"),
        Err(kube::Error::Api(status)) => {
            (status.code, status.reason.clone(), status.message.clone())
        }
        Err(other) => panic!("{method} {path}: expected a Status error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_get_status_errors_and_the_server_keeps_serving() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let cms = "/api/v1/namespaces/default/configmaps";

    let (code, reason, message) = expect_status(
        &client,
        "POST",
        cms,
        "application/json",
        b"{\"apiVersion\": \"v1\", \"kind\": ".to_vec(),
    )
    .await;
    assert_eq!((code, reason.as_str()), (400, "BadRequest"), "{message}");
    assert!(message.contains("JSON"), "{message}");

    let (code, reason, message) = expect_status(
        &client,
        "POST",
        cms,
        "application/yaml",
        b"apiVersion: v1\nkind: [unclosed\n".to_vec(),
    )
    .await;
    assert_eq!((code, reason.as_str()), (400, "BadRequest"), "{message}");

    let (code, reason, _) = expect_status(
        &client,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!((code, reason.as_str()), (404, "NotFound"));

    let body = serde_json::to_vec(
        &json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
    )
    .unwrap();
    let (code, _, message) = expect_status(&client, "POST", cms, "application/json", body).await;
    assert_eq!(code, 400);
    assert!(message.contains("API version"), "{message}");

    let body = serde_json::to_vec(
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}),
    )
    .unwrap();
    let (code, _, message) = expect_status(&client, "POST", cms, "application/json", body).await;
    assert_eq!(code, 400);
    assert!(message.contains("kind"), "{message}");

    let huge = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"}, "data": {"blob": "x".repeat(4 * 1024 * 1024)}});
    let (code, reason, _) = expect_status(
        &client,
        "POST",
        cms,
        "application/json",
        serde_json::to_vec(&huge).unwrap(),
    )
    .await;
    assert_eq!((code, reason.as_str()), (413, "RequestEntityTooLarge"));

    let (code, _, _) = expect_status(
        &client,
        "PATCH",
        &format!("{cms}/missing"),
        "text/plain",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 415);

    let (code, reason, _) = expect_status(
        &client,
        "POST",
        "/api/v1/namespaces/nowhere/configmaps",
        "application/json",
        serde_json::to_vec(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
        )
        .unwrap(),
    )
    .await;
    assert_eq!(
        (code, reason.as_str()),
        (404, "NotFound"),
        "creating in a missing namespace"
    );

    let (code, reason, message) = expect_status(
        &client,
        "POST",
        cms,
        "application/json",
        serde_json::to_vec(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_Valid"}}),
        )
        .unwrap(),
    )
    .await;
    assert_eq!((code, reason.as_str()), (422, "Invalid"), "{message}");
    assert!(message.contains("metadata.name"), "{message}");

    // Still serving.
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "after"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    assert!(api.get("after").await.is_ok());
}

/// kube-apiserver's request-deadline filter: an unparsable `?timeout=` is a 400 (a valid one, as
/// `kubectl --request-timeout` sends, is served; watches are long-running and skip it).
#[tokio::test(flavor = "multi_thread")]
async fn an_unparsable_timeout_is_a_bad_request() {
    let cluster = TestCluster::start().await;
    let client = cluster.client().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, reason, message) = expect_status(
        &client,
        "GET",
        &format!("{cms}?timeout=soon"),
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!((code, reason.as_str()), (400, "BadRequest"), "{message}");
    assert_eq!(
        message,
        r#"invalid timeout specified in the request URL - time: invalid duration "soon""#
    );
    let (code, _, message) = expect_status(
        &client,
        "GET",
        "/version?timeout=10",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!(code, 400, "{message}");
    assert!(
        message.ends_with(r#"missing unit in duration "10""#),
        "{message}"
    );
    for path in [
        format!("{cms}?timeout=32s"),
        format!("{cms}?timeout=0"),
        format!("{cms}?watch=true&timeout=soon&timeoutSeconds=1"),
    ] {
        let request = http::Request::builder()
            .uri(path.as_str())
            .body(Vec::new())
            .unwrap();
        client
            .request_text(request)
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
    }
}
