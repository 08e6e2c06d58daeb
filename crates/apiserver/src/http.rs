//! The HTTP surface: routing of the Kubernetes REST paths, content negotiation, watch streams.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use crate::cluster::{
    Cluster, DeleteOptions, DeleteOutcome, FieldValidation, PatchType, Propagation, WriteOptions,
    WriteOutcome,
};
use crate::error::{ApiError, ApiResult};
use crate::registry::ResourceType;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{EventType, Stored, Subscription, WatchEvent};
use crate::{authz, discovery, openapi, table};

/// Shared state of the HTTP layer.
#[derive(Clone)]
pub struct AppState {
    pub cluster: Cluster,
    pub max_body_bytes: usize,
    pub bookmark_interval: Duration,
    /// Longest a watch stays open without `timeoutSeconds`.
    pub max_watch: Duration,
    pub openapi: Arc<Mutex<openapi::Cache>>,
    /// Logs of the Pods that have one (`pods/log`).
    pub pod_logs: crate::logs::PodLogs,
}

type Query = HashMap<String, String>;

fn parse_query(uri: &http::Uri) -> Query {
    uri.query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default()
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    bytes_response(
        status,
        Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
    )
}

fn bytes_response(status: StatusCode, body: Bytes) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn error_response(e: &ApiError) -> Response {
    json_response(
        StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.to_status(),
    )
}

fn with_warnings(mut r: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {w:?}");
        if let Ok(v) = HeaderValue::from_str(&text) {
            r.headers_mut().append("Warning", v);
        }
    }
    r
}

/// What representation the client asked for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Representation {
    Object,
    Table,
    PartialMetadata,
}

fn representation(headers: &HeaderMap) -> Representation {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    // The first acceptable alternative wins.
    for alt in accept.split(',') {
        let alt = alt.replace(' ', "");
        if alt.contains("as=Table") && alt.contains("g=meta.k8s.io") {
            return Representation::Table;
        }
        if alt.contains("as=PartialObjectMetadata") && alt.contains("g=meta.k8s.io") {
            return Representation::PartialMetadata;
        }
        if alt.starts_with("application/json")
            || alt.starts_with("*/*")
            || alt.starts_with("application/yaml")
        {
            return Representation::Object;
        }
    }
    Representation::Object
}

/// Parses a JSON (or YAML) request body into a value.
fn parse_body(headers: &HeaderMap, body: &[u8]) -> ApiResult<Value> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if crate::protobuf::is_protobuf(ct) {
        return crate::protobuf::decode(body);
    }
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    if ct.contains("yaml") {
        let text = std::str::from_utf8(body)
            .map_err(|_| ApiError::bad_request("the request body is not UTF-8"))?;
        // No snippet of the input: kube-apiserver's YAML errors name the line only, and the
        // input may be a Secret.
        let options = serde_saphyr::options! { strict_booleans: true, with_snippet: false, emit_comments: false };
        return serde_saphyr::from_str_with_options::<Value>(text, options)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => Ok(v),
        Err(e) => Err(ApiError::bad_request(format!("error decoding JSON: {e}"))),
    }
}

fn user_agent_manager(headers: &HeaderMap) -> String {
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown");
    let product = ua.split('/').next().unwrap_or("unknown").trim();
    if product.is_empty() {
        "unknown".into()
    } else {
        product.chars().take(128).collect()
    }
}

fn write_options(q: &Query, headers: &HeaderMap, default_manager: bool) -> ApiResult<WriteOptions> {
    let dry_run = match q.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: {other:?}: supported values: \"All\""
            )));
        }
    };
    let field_manager = match q.get("fieldManager") {
        Some(m) if !m.is_empty() => m.clone(),
        _ if default_manager => user_agent_manager(headers),
        _ => String::new(),
    };
    let force = match q.get("force").map(String::as_str) {
        None | Some("" | "false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "force: invalid value {other:?}"
            )));
        }
    };
    Ok(WriteOptions {
        dry_run,
        field_manager,
        field_validation: FieldValidation::parse(
            q.get("fieldValidation").map_or("", String::as_str),
        )?,
        force,
    })
}

/// A parsed resource path.
#[derive(Debug)]
struct ResourcePath {
    group: String,
    version: String,
    namespace: Option<String>,
    plural: String,
    name: Option<String>,
    subresource: Option<String>,
    watch_prefix: bool,
}

fn parse_resource_path(segments: &[&str]) -> Option<ResourcePath> {
    let (group, version, mut rest) = match segments {
        ["api", v, rest @ ..] => (String::new(), (*v).to_owned(), rest),
        ["apis", g, v, rest @ ..] => ((*g).to_owned(), (*v).to_owned(), rest),
        _ => return None,
    };
    let mut watch_prefix = false;
    if rest.first() == Some(&"watch") {
        watch_prefix = true;
        rest = &rest[1..];
    }
    let (namespace, rest) = match rest {
        ["namespaces", ns, r, tail @ ..] if !matches!(*r, "status" | "finalize") => {
            (Some((*ns).to_owned()), {
                let mut v = vec![*r];
                v.extend_from_slice(tail);
                v
            })
        }
        other => (None, other.to_vec()),
    };
    let (plural, name, subresource) = match rest.as_slice() {
        [p] => ((*p).to_owned(), None, None),
        [p, n] => ((*p).to_owned(), Some((*n).to_owned()), None),
        [p, n, s] => (
            (*p).to_owned(),
            Some((*n).to_owned()),
            Some((*s).to_owned()),
        ),
        _ => return None,
    };
    Some(ResourcePath {
        group,
        version,
        namespace,
        plural,
        name,
        subresource,
        watch_prefix,
    })
}

/// The single entry point for every request.
pub async fn handle(State(state): State<AppState>, request: Request) -> Response {
    let method = request.method().clone();
    let uri = request.uri().clone();
    let started = std::time::Instant::now();
    let response = match route(&state, request).await {
        Ok(r) => r,
        Err(e) if e.code == 413 => {
            // The rest of the oversize body was never read: this connection cannot carry another
            // request, so tell the client not to reuse it.
            let mut r = error_response(&e);
            r.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            r
        }
        Err(e) => error_response(&e),
    };
    tracing::debug!(%method, %uri, status = response.status().as_u16(), elapsed_ms = started.elapsed().as_millis() as u64, "request");
    response
}

/// Reads a request body of at most `limit` bytes. A larger body is read on (and dropped) up to a
/// bound, so the client finishes sending and reads the 413 instead of a reset connection; past that
/// bound the connection is given up.
async fn read_body(body: Body, limit: usize) -> ApiResult<Bytes> {
    use http_body_util::BodyExt;
    let too_large = || {
        ApiError::too_large(format!(
            "the request body is larger than the limit of {limit} bytes"
        ))
    };
    let drain_limit = limit.saturating_mul(8).max(32 * 1024 * 1024);
    let mut body = body;
    let mut buf = BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Err(ApiError::bad_request("the request body could not be read"));
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len());
        if seen > drain_limit {
            return Err(too_large());
        }
        if seen <= limit {
            buf.put_slice(&data);
        }
    }
    if seen > limit {
        return Err(too_large());
    }
    Ok(buf.freeze())
}

async fn route(state: &AppState, request: Request) -> ApiResult<Response> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().trim_end_matches('/').to_owned();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let q = parse_query(&parts.uri);
    check_request_timeout(&q, &segments)?;
    let body = read_body(body, state.max_body_bytes).await?;
    let cluster = &state.cluster;
    // Without impersonation headers the caller is the cluster administrator: no RBAC at all.
    let user = authz::impersonated_user(&parts.headers)?;
    if let Some(user) = &user {
        let attrs = authz::RequestAttributes::from_request(&parts.method, parts.uri.path(), &q);
        authz::check(cluster, user, &attrs)?;
    }
    if let Some(response) = non_resource(state, &parts.method, &parts.headers, &segments)? {
        return Ok(response);
    }
    match segments.as_slice() {
        [
            "apis",
            group @ ("authorization.k8s.io" | "authentication.k8s.io"),
            "v1",
            review,
        ] if discovery::is_review(group, review) => {
            if parts.method != Method::POST {
                return Err(ApiError::method_not_allowed(format!(
                    "the server does not allow this method ({}) on the requested resource",
                    parts.method
                )));
            }
            let request = parse_body(&parts.headers, &body)?;
            let answer = match &user {
                Some(user) => authz::review(cluster, user, &request)?,
                None => discovery::review(&request)?,
            };
            Ok(json_response(StatusCode::CREATED, &answer))
        }
        ["openapi", "v2"] => Err(ApiError::new(
            404,
            "NotFound",
            "OpenAPI v2 is not served; use /openapi/v3",
        )),
        _ => {
            let path = parse_resource_path(&segments).ok_or_else(not_found)?;
            resource_request(
                state,
                user.as_ref(),
                &parts.method,
                &parts.headers,
                &q,
                &path,
                &body,
            )
        }
    }
}

/// kube-apiserver's 404 for a path it does not serve.
fn not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

/// Refuses every method but GET (non-resource paths are read-only).
fn get_only(method: &Method) -> ApiResult<()> {
    if *method == Method::GET {
        Ok(())
    } else {
        Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method ({method}) on the requested resource"
        )))
    }
}

/// The read-only paths that are not resources: the root, health, version, discovery and
/// OpenAPI v3; `None` for every other path.
fn non_resource(
    state: &AppState,
    method: &Method,
    headers: &HeaderMap,
    segments: &[&str],
) -> ApiResult<Option<Response>> {
    let registry = || state.cluster.registry();
    let document = |d: Option<Value>| {
        d.map(|d| json_response(StatusCode::OK, &d))
            .ok_or_else(not_found)
    };
    let response = match segments {
        [] => {
            get_only(method)?;
            json_response(
                StatusCode::OK,
                &json!({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v3", "/readyz", "/version"]}),
            )
        }
        ["healthz" | "readyz" | "livez"] => {
            let mut r = Response::new(Body::from("ok"));
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            r
        }
        ["version"] => {
            get_only(method)?;
            json_response(StatusCode::OK, &discovery::version())
        }
        ["api"] => {
            get_only(method)?;
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("127.0.0.1");
            json_response(StatusCode::OK, &discovery::core_versions(host))
        }
        ["apis"] => {
            get_only(method)?;
            json_response(StatusCode::OK, &discovery::group_list(&registry()))
        }
        ["api", v] => {
            get_only(method)?;
            document(discovery::resource_list(&registry(), "", v))?
        }
        ["apis", g] => {
            get_only(method)?;
            document(discovery::group(&registry(), g))?
        }
        ["apis", g, v] => {
            get_only(method)?;
            document(discovery::resource_list(&registry(), g, v))?
        }
        ["openapi", "v3"] => {
            get_only(method)?;
            openapi_index(state)
        }
        ["openapi", "v3", rest @ ..] => {
            get_only(method)?;
            openapi_document(state, rest)?
        }
        _ => return Ok(None),
    };
    Ok(Some(response))
}

/// `/openapi/v3`: every group version's document path with its content hash.
fn openapi_index(state: &AppState) -> Response {
    let registry = state.cluster.registry();
    let mut cache = state
        .openapi
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut paths = serde_json::Map::new();
    for (p, g, v) in openapi::group_versions(&registry) {
        if let Some((_, hash)) = cache.get(&registry, &p, &g, &v) {
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={hash}")}),
            );
        }
    }
    json_response(StatusCode::OK, &json!({"paths": paths}))
}

/// `/openapi/v3/api/<v>` and `/openapi/v3/apis/<g>/<v>`: one group version's document.
fn openapi_document(state: &AppState, rest: &[&str]) -> ApiResult<Response> {
    let doc_path = rest.join("/");
    let (group, version) = match rest {
        ["api", v] => (String::new(), (*v).to_owned()),
        ["apis", g, v] => ((*g).to_owned(), (*v).to_owned()),
        _ => return Err(not_found()),
    };
    let registry = state.cluster.registry();
    let mut cache = state
        .openapi
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (bytes, _) = cache
        .get(&registry, &doc_path, &group, &version)
        .ok_or_else(not_found)?;
    let mut response = bytes_response(StatusCode::OK, Bytes::from(bytes.as_ref().clone()));
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, immutable"),
    );
    Ok(response)
}

fn present_object(rt: &ResourceType, obj: Value, repr: Representation, rv: &str) -> Value {
    match repr {
        Representation::Object => obj,
        Representation::PartialMetadata => table::partial_metadata(&obj),
        Representation::Table => table::table(rt, std::slice::from_ref(&obj), rv, "Metadata"),
    }
}

fn write_response(
    rt: &ResourceType,
    outcome: WriteOutcome,
    repr: Representation,
    created_status: StatusCode,
) -> Response {
    let status = if outcome.created {
        created_status
    } else {
        StatusCode::OK
    };
    let rv = outcome
        .object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let r = json_response(status, &present_object(rt, outcome.object, repr, &rv));
    with_warnings(r, &outcome.warnings)
}

#[allow(clippy::too_many_arguments)]
fn resource_request(
    state: &AppState,
    user: Option<&authz::UserInfo>,
    method: &Method,
    headers: &HeaderMap,
    q: &Query,
    path: &ResourcePath,
    body: &[u8],
) -> ApiResult<Response> {
    let cluster = &state.cluster;
    let rt = cluster.resource(&path.group, &path.version, &path.plural)?;
    if !rt.namespaced && path.namespace.is_some() {
        return Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    }
    let ns = path.namespace.as_deref();
    let repr = representation(headers);
    // `?watch` only turns a collection GET into a watch; a GET of a named object stays a get (as
    // in kube-apiserver, and as authorization judged it). `/watch/` paths watch either.
    let watch = path.watch_prefix || (path.name.is_none() && authz::watch_requested(q));
    if let Some(sub) = path.subresource.as_deref() {
        let ok = (sub == "status" && rt.status)
            || (sub == "scale" && rt.scale)
            || (sub == "finalize" && rt.group.is_empty() && rt.plural == "namespaces")
            || (sub == "log" && rt.group.is_empty() && rt.plural == "pods");
        if !ok {
            return Err(ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ));
        }
        if sub == "log" {
            get_only(method)?;
            let name = path.name.as_deref().unwrap_or("");
            let pod = cluster.get(&rt, ns, name)?;
            return crate::logs::response(&state.pod_logs, &pod, ns.unwrap_or(""), name, q);
        }
        if sub == "scale" {
            return scale_request(
                cluster,
                &rt,
                method,
                headers,
                q,
                ns,
                path.name.as_deref().unwrap_or(""),
                body,
            );
        }
    }
    // `finalize` writes the namespace's spec.finalizers: treat it as an update of the main resource.
    let subresource = path.subresource.as_deref().filter(|s| *s != "finalize");
    match (method.clone(), path.name.as_deref()) {
        (Method::GET, None) if watch => Ok(watch_response(state, rt, ns, q, repr)?),
        (Method::GET, Some(name)) if watch => {
            let mut q = q.clone();
            q.insert("fieldSelector".into(), format!("metadata.name={name}"));
            Ok(watch_response(state, rt, ns, &q, repr)?)
        }
        (Method::GET, None) => list_response(cluster, &rt, ns, q, repr),
        (Method::GET, Some(name)) => get_one(cluster, &rt, ns, name, repr),
        (Method::POST, None) => {
            let opts = write_options(q, headers, true)?;
            let body = parse_body(headers, body)?;
            let outcome = cluster.create(&rt, ns, body, &opts)?;
            Ok(write_response(&rt, outcome, repr, StatusCode::CREATED))
        }
        (Method::PUT, Some(name)) => {
            let opts = write_options(q, headers, true)?;
            let body = parse_body(headers, body)?;
            let outcome = cluster.update(&rt, ns, name, subresource, &body, &opts)?;
            Ok(write_response(&rt, outcome, repr, StatusCode::CREATED))
        }
        (Method::PATCH, Some(name)) => patch_request(
            cluster,
            user,
            &rt,
            &Target {
                ns,
                name,
                subresource: path.subresource.as_deref(),
            },
            headers,
            q,
            body,
        )
        .map(|outcome| write_response(&rt, outcome, repr, StatusCode::CREATED)),
        (Method::DELETE, Some(name)) => {
            let opts = delete_options(q, headers, body)?;
            match cluster.delete(&rt, ns, name, &opts)? {
                DeleteOutcome::Pending(obj) => Ok(json_response(StatusCode::OK, &obj)),
                DeleteOutcome::Deleted(obj) => {
                    let uid = obj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null);
                    Ok(json_response(
                        StatusCode::OK,
                        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                            "details": {"name": name, "group": rt.group, "kind": rt.plural, "uid": uid}}),
                    ))
                }
            }
        }
        (Method::DELETE, None) => delete_collection(cluster, &rt, ns, headers, q, body),
        (m, _) => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method ({m}) on the requested resource"
        ))),
    }
}

/// GET of one object, in the representation asked for.
fn get_one(
    cluster: &Cluster,
    rt: &ResourceType,
    ns: Option<&str>,
    name: &str,
    repr: Representation,
) -> ApiResult<Response> {
    let obj = cluster.get(rt, ns, name)?;
    let rv = obj
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    Ok(json_response(
        StatusCode::OK,
        &present_object(rt, obj, repr, &rv),
    ))
}

/// The object a PATCH names: namespace, name and subresource as the path gave them.
struct Target<'a> {
    ns: Option<&'a str>,
    name: &'a str,
    subresource: Option<&'a str>,
}

/// PATCH of one object in any of the patch types; an apply that creates also needs `create`.
fn patch_request(
    cluster: &Cluster,
    user: Option<&authz::UserInfo>,
    rt: &ResourceType,
    target: &Target<'_>,
    headers: &HeaderMap,
    q: &Query,
    body: &[u8],
) -> ApiResult<WriteOutcome> {
    let Target {
        ns,
        name,
        subresource,
    } = *target;
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let patch_type = PatchType::from_content_type(ct).ok_or_else(|| {
        ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml{}",
            if rt.builtin { ", application/strategic-merge-patch+json" } else { "" }
        ))
    })?;
    let opts = write_options(q, headers, patch_type != PatchType::Apply)?;
    let patch = parse_body(headers, body)?;
    // Applying an object that does not exist creates it: Kubernetes then also checks `create`.
    if let Some(user) = user
        && patch_type == PatchType::Apply
        && cluster.get_stored(rt, ns, name).is_err()
    {
        let attrs = authz::RequestAttributes {
            verb: "create".to_owned(),
            resource_request: true,
            group: rt.group.clone(),
            version: rt.version.clone(),
            resource: rt.plural.clone(),
            subresource: subresource.unwrap_or_default().to_owned(),
            namespace: ns.unwrap_or("").to_owned(),
            name: name.to_owned(),
            path: String::new(),
        };
        authz::check_create_on_apply(cluster, user, &attrs)?;
    }
    // `finalize` writes the namespace's spec.finalizers: treat it as an update of the main resource.
    let subresource = subresource.filter(|s| *s != "finalize");
    cluster.patch(rt, ns, name, subresource, patch_type, &patch, &opts)
}

/// DELETE of a collection: every object the label and field selectors match.
fn delete_collection(
    cluster: &Cluster,
    rt: &ResourceType,
    ns: Option<&str>,
    headers: &HeaderMap,
    q: &Query,
    body: &[u8],
) -> ApiResult<Response> {
    let opts = delete_options(q, headers, body)?;
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?;
    let fields = FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))?;
    let (items, _) = cluster.list(rt, ns);
    let mut deleted = Vec::new();
    for item in items {
        if !labels.matches(item.value.pointer("/metadata/labels"))
            || !fields_match(rt, &fields, &item)
        {
            continue;
        }
        let item_ns = item.namespace().to_owned();
        match cluster.delete(rt, Some(&item_ns), item.name(), &opts) {
            Ok(DeleteOutcome::Deleted(o) | DeleteOutcome::Pending(o)) => deleted.push(o),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({"kind": rt.list_kind(), "apiVersion": rt.api_version(), "metadata": {"resourceVersion": cluster.store().current_rv().to_string()}, "items": deleted}),
    ))
}

fn delete_options(q: &Query, headers: &HeaderMap, body: &[u8]) -> ApiResult<DeleteOptions> {
    let mut opts = DeleteOptions::default();
    let body_opts = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        parse_body(headers, body)?
    };
    let policy = q.get("propagationPolicy").cloned().or_else(|| {
        body_opts
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    opts.propagation = match policy.as_deref() {
        None | Some("") => {
            if body_opts.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
                Some(Propagation::Orphan)
            } else {
                None
            }
        }
        Some("Background") => Some(Propagation::Background),
        Some("Foreground") => Some(Propagation::Foreground),
        Some("Orphan") => Some(Propagation::Orphan),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
    };
    let dry_run = q.get("dryRun").cloned().or_else(|| {
        body_opts
            .get("dryRun")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    opts.dry_run = match dry_run.as_deref() {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: {other:?}: supported values: \"All\""
            )));
        }
    };
    opts.precondition_uid = body_opts
        .pointer("/preconditions/uid")
        .and_then(Value::as_str)
        .map(str::to_owned);
    opts.precondition_rv = body_opts
        .pointer("/preconditions/resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(opts)
}

#[allow(clippy::too_many_arguments)]
fn scale_request(
    cluster: &Cluster,
    rt: &Arc<ResourceType>,
    method: &Method,
    headers: &HeaderMap,
    q: &Query,
    ns: Option<&str>,
    name: &str,
    body: &[u8],
) -> ApiResult<Response> {
    let to_scale = |obj: &Value| {
        let selector = obj
            .pointer("/spec/selector/matchLabels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        json!({
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": obj.pointer("/metadata/name"), "namespace": obj.pointer("/metadata/namespace"), "uid": obj.pointer("/metadata/uid"), "resourceVersion": obj.pointer("/metadata/resourceVersion"), "creationTimestamp": obj.pointer("/metadata/creationTimestamp")},
            "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(0))},
            "status": {"replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)), "selector": selector},
        })
    };
    let current = cluster.get(rt, ns, name)?;
    if *method == Method::GET {
        return Ok(json_response(StatusCode::OK, &to_scale(&current)));
    }
    let mut scale = to_scale(&current);
    let input = parse_body(headers, body)?;
    match *method {
        Method::PUT => scale = input,
        Method::PATCH => {
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            match PatchType::from_content_type(ct) {
                Some(PatchType::Json) => capstan_patch::json_patch(&mut scale, &input)
                    .map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?,
                Some(PatchType::Merge | PatchType::Strategic | PatchType::Apply) => {
                    capstan_patch::merge_patch(&mut scale, &input);
                }
                None => {
                    return Err(ApiError::unsupported_media_type(
                        "unsupported patch type for scale",
                    ));
                }
            }
        }
        _ => {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on scale",
            ));
        }
    }
    let replicas = scale
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .ok_or_else(|| {
            ApiError::invalid(
                "autoscaling",
                "Scale",
                name,
                vec![crate::error::Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value".into(),
                    field: "spec.replicas".into(),
                }],
            )
        })?;
    let opts = write_options(q, headers, true)?;
    if let Some(rv) = scale
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|rv| !rv.is_empty())
        && current
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            != Some(rv)
    {
        return Err(ApiError::conflict(
            &rt.group,
            &rt.plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    if opts.dry_run {
        let mut shown = current;
        shown["spec"]["replicas"] = json!(replicas);
        return Ok(json_response(StatusCode::OK, &to_scale(&shown)));
    }
    let updated = cluster.mutate(rt, ns, name, None, &opts.field_manager, |obj| {
        obj["spec"]["replicas"] = json!(replicas);
        true
    })?;
    Ok(json_response(
        StatusCode::OK,
        &to_scale(&updated.unwrap_or(current)),
    ))
}

fn continue_token(rv: u64, ns: &str, name: &str) -> String {
    let raw = format!("{rv}\n{ns}\n{name}");
    raw.bytes()
        .fold(String::with_capacity(raw.len() * 2), |mut out, b| {
            use std::fmt::Write as _;
            let _ = write!(out, "{b:02x}");
            out
        })
}

fn parse_continue(token: &str) -> ApiResult<(u64, String, String)> {
    let invalid = || ApiError::bad_request("continue key is not valid: the token is malformed");
    if !token.len().is_multiple_of(2) {
        return Err(invalid());
    }
    let bytes: Vec<u8> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&token[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let mut parts = text.splitn(3, '\n');
    let rv = parts
        .next()
        .and_then(|r| r.parse().ok())
        .ok_or_else(invalid)?;
    let ns = parts.next().ok_or_else(invalid)?.to_owned();
    let name = parts.next().ok_or_else(invalid)?.to_owned();
    Ok((rv, ns, name))
}

/// Whether `stored` matches a field selector, on the fields of the form `rt` serves
/// (`events.k8s.io` Events select on `regarding.name`, stored `involvedObject.name`).
fn fields_match(rt: &ResourceType, fields: &FieldSelector, stored: &Stored) -> bool {
    if fields.is_empty() {
        return true;
    }
    if crate::events::is_events_group(rt) {
        fields.matches(&Cluster::present(rt, stored))
    } else {
        fields.matches(&stored.value)
    }
}

fn list_response(
    cluster: &Cluster,
    rt: &Arc<ResourceType>,
    ns: Option<&str>,
    q: &Query,
    repr: Representation,
) -> ApiResult<Response> {
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?;
    let fields = FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))?;
    let limit: usize = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(0);
    let (items, current_rv) = cluster.list(rt, ns);
    let (list_rv, after) = match q.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let (rv, cns, cname) = parse_continue(token)?;
            (rv, Some((cns, cname)))
        }
        None => (current_rv, None),
    };
    let mut selected: Vec<&Arc<Stored>> = Vec::new();
    let mut next = None;
    let mut remaining = 0usize;
    for item in &items {
        if let Some((cns, cname)) = &after
            && (item.namespace(), item.name()) <= (cns.as_str(), cname.as_str())
        {
            continue;
        }
        if !labels.matches(item.value.pointer("/metadata/labels"))
            || !fields_match(rt, &fields, item)
        {
            continue;
        }
        if limit > 0 && selected.len() == limit {
            if next.is_none() {
                let last = selected.last().expect("limit > 0");
                next = Some(continue_token(list_rv, last.namespace(), last.name()));
            }
            remaining += 1;
            continue;
        }
        selected.push(item);
    }
    let rv_string = list_rv.to_string();
    match repr {
        Representation::Table | Representation::PartialMetadata => {
            let objects: Vec<Value> = selected.iter().map(|s| Cluster::present(rt, s)).collect();
            let mut doc = if repr == Representation::Table {
                let include = q.get("includeObject").map_or("Metadata", String::as_str);
                table::table(rt, &objects, &rv_string, include)
            } else {
                json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv_string},
                    "items": objects.iter().map(table::partial_metadata).collect::<Vec<_>>()})
            };
            if let Some(token) = &next {
                doc["metadata"]["continue"] = json!(token);
                doc["metadata"]["remainingItemCount"] = json!(remaining);
            }
            Ok(json_response(StatusCode::OK, &doc))
        }
        Representation::Object => {
            let mut meta = json!({"resourceVersion": rv_string});
            if let Some(token) = &next {
                meta["continue"] = json!(token);
                meta["remainingItemCount"] = json!(remaining);
            }
            let head = format!(
                "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":[",
                Value::String(rt.list_kind()),
                Value::String(rt.api_version()),
                meta
            );
            let mut buf = BytesMut::with_capacity(
                head.len() + selected.iter().map(|s| s.json.len() + 1).sum::<usize>() + 2,
            );
            buf.put_slice(head.as_bytes());
            for (i, item) in selected.iter().enumerate() {
                if i > 0 {
                    buf.put_u8(b',');
                }
                if Cluster::served_as_stored(rt, item) {
                    buf.put_slice(&item.json);
                } else {
                    buf.put_slice(
                        &serde_json::to_vec(&Cluster::present(rt, item)).unwrap_or_default(),
                    );
                }
            }
            buf.put_slice(b"]}");
            Ok(bytes_response(StatusCode::OK, buf.freeze()))
        }
    }
}

/// A watch's filter and rendering.
struct Watcher {
    rt: Arc<ResourceType>,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    repr: Representation,
}

impl Watcher {
    fn matches(&self, stored: &Stored) -> bool {
        if let Some(ns) = &self.namespace
            && stored.namespace() != ns
        {
            return false;
        }
        self.labels
            .matches(stored.value.pointer("/metadata/labels"))
            && fields_match(&self.rt, &self.fields, stored)
    }

    fn line(&self, type_: &str, stored: &Stored) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_slice(b"{\"type\":\"");
        buf.put_slice(type_.as_bytes());
        buf.put_slice(b"\",\"object\":");
        if self.repr == Representation::Object && Cluster::served_as_stored(&self.rt, stored) {
            buf.put_slice(&stored.json);
        } else {
            let obj = Cluster::present(&self.rt, stored);
            let rendered = present_object(&self.rt, obj, self.repr, &stored.rv.to_string());
            buf.put_slice(&serde_json::to_vec(&rendered).unwrap_or_default());
        }
        buf.put_slice(b"}\n");
        buf.freeze()
    }

    /// The line for one event, if this watch sees it.
    fn event_line(&self, event: &WatchEvent) -> Option<Bytes> {
        let now = self.matches(&event.object);
        let before = event.previous.as_ref().is_some_and(|p| self.matches(p));
        match event.type_ {
            EventType::Added if now => Some(self.line("ADDED", &event.object)),
            EventType::Deleted if now || before => Some(self.line("DELETED", &event.object)),
            EventType::Modified => match (before, now) {
                (true, true) => Some(self.line("MODIFIED", &event.object)),
                (false, true) => Some(self.line("ADDED", &event.object)),
                (true, false) => Some(self.line("DELETED", &event.object)),
                (false, false) => None,
            },
            _ => None,
        }
    }

    fn bookmark(&self, rv: u64, initial_events_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj =
            json!({"kind": self.rt.kind, "apiVersion": self.rt.api_version(), "metadata": meta});
        let mut line =
            serde_json::to_vec(&json!({"type": "BOOKMARK", "object": obj})).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }
}

fn gone_line(requested: u64) -> Bytes {
    let status = ApiError::gone(format!("too old resource version: {requested}")).to_status();
    let mut line =
        serde_json::to_vec(&json!({"type": "ERROR", "object": status})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

fn watch_response(
    state: &AppState,
    rt: Arc<ResourceType>,
    ns: Option<&str>,
    q: &Query,
    repr: Representation,
) -> ApiResult<Response> {
    let watcher = Watcher {
        namespace: if rt.namespaced {
            ns.map(str::to_owned)
        } else {
            None
        },
        labels: LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?,
        fields: FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str))?,
        repr,
        rt,
    };
    let opts = WatchOptions::parse(state, q)?;
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(256);
    tokio::spawn(stream_watch(state.cluster.clone(), watcher, opts, tx));
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(r)
}

/// Where a watch starts and how long it stays open, from its query.
struct WatchOptions {
    /// The requested resourceVersion (`None`: the current state).
    since: Option<u64>,
    send_initial: bool,
    bookmarks: bool,
    timeout: Duration,
    bookmark_interval: Duration,
}

impl WatchOptions {
    fn parse(state: &AppState, q: &Query) -> ApiResult<Self> {
        let since = match q.get("resourceVersion").map_or("", String::as_str) {
            "" | "0" => None,
            other => Some(other.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version: {other:?}"))
            })?),
        };
        let timeout = q
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map_or(state.max_watch, |t| {
                Duration::from_secs(t).min(state.max_watch)
            });
        Ok(Self {
            since,
            send_initial: q.get("sendInitialEvents").map(String::as_str) == Some("true"),
            bookmarks: q.get("allowWatchBookmarks").map(String::as_str) == Some("true"),
            timeout,
            bookmark_interval: state.bookmark_interval,
        })
    }
}

/// Refuses an unparsable `?timeout=` with kube-apiserver's 400 (its request-deadline filter),
/// except on long-running requests (watches, logs, exec, attach, port-forward, proxy), which
/// that filter leaves alone. A valid timeout needs no deadline here: no request waits.
fn check_request_timeout(q: &Query, segments: &[&str]) -> ApiResult<()> {
    let Some(value) = q.get("timeout").filter(|v| !v.is_empty()) else {
        return Ok(());
    };
    let long_running = authz::watch_requested(q)
        || parse_resource_path(segments).is_some_and(|path| {
            path.watch_prefix
                || matches!(
                    path.subresource.as_deref(),
                    Some("log" | "exec" | "attach" | "portforward" | "proxy")
                )
        });
    if long_running {
        return Ok(());
    }
    go_duration_nanos(value).map(|_| ()).map_err(|error| {
        ApiError::bad_request(format!(
            "invalid timeout specified in the request URL - {error}"
        ))
    })
}

/// Go's `time.ParseDuration` (what kube-apiserver reads `?timeout=` with): the duration in
/// nanoseconds, or Go's error text.
fn go_duration_nanos(text: &str) -> Result<i128, String> {
    let quoted = serde_json::to_string(text).unwrap_or_default();
    let invalid = || format!("time: invalid duration {quoted}");
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_end];
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(invalid());
        }
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let scale: i128 = match unit {
            "" => return Err(format!("time: missing unit in duration {quoted}")),
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            other => {
                let unit = serde_json::to_string(other).unwrap_or_default();
                return Err(format!("time: unknown unit {unit} in duration {quoted}"));
            }
        };
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| invalid())?
        };
        let mut part = whole.checked_mul(scale).ok_or_else(invalid)?;
        let mut divisor = 1i128;
        for digit in fraction.bytes().take(30) {
            divisor *= 10;
            part += i128::from(digit - b'0') * scale / divisor;
        }
        total = total.checked_add(part).ok_or_else(invalid)?;
        if total > i128::from(i64::MAX) + i128::from(negative) {
            return Err(invalid());
        }
    }
    Ok(if negative { -total } else { total })
}

type LineSender = mpsc::Sender<Result<Bytes, std::io::Error>>;

/// Streams one watch into `tx`: its start (see [`start_watch`]), then live events and periodic
/// bookmarks until the timeout passes or the client goes away.
async fn stream_watch(cluster: Cluster, watcher: Watcher, opts: WatchOptions, tx: LineSender) {
    let Some((mut sub, mut last_rv)) = start_watch(&cluster, &watcher, &opts, &tx).await else {
        return;
    };
    let deadline = tokio::time::Instant::now() + opts.timeout;
    let mut ticker = tokio::time::interval(opts.bookmark_interval);
    ticker.tick().await;
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => return,
            () = tx.closed() => return,
            _ = ticker.tick(), if opts.bookmarks => {
                if !send_bookmark(&cluster, &watcher, &mut sub, &mut last_rv, &tx).await {
                    return;
                }
            }
            event = sub.receiver.recv() => match event {
                Ok(event) => {
                    if !forward(&watcher, &event, &mut last_rv, &tx).await {
                        return;
                    }
                }
                // A watcher that cannot keep up is closed; it resumes from its last resourceVersion.
                Err(RecvError::Lagged(_) | RecvError::Closed) => return,
            },
        }
    }
}

/// Starts a watch: subscribes at the requested resourceVersion (or lists the current state as
/// `ADDED` events when there is none or initial events are asked for), sends what precedes the
/// live events, and returns the subscription with the resourceVersion sent up to. `None`: the
/// watch is over (too old a resourceVersion, or the client went away).
async fn start_watch(
    cluster: &Cluster,
    watcher: &Watcher,
    opts: &WatchOptions,
    tx: &LineSender,
) -> Option<(Subscription, u64)> {
    let key = watcher.rt.storage_key();
    let mut initial = Vec::new();
    let start_rv = match opts.since {
        Some(rv) if !opts.send_initial => rv,
        _ => {
            let (items, rv) = cluster.list(&watcher.rt, watcher.namespace.as_deref());
            for item in items.iter().filter(|i| watcher.matches(i)) {
                initial.push(watcher.line("ADDED", item));
            }
            rv
        }
    };
    let Some(mut sub) = cluster.store().subscribe(&key, start_rv) else {
        let _ = tx.send(Ok(gone_line(start_rv))).await;
        return None;
    };
    for line in initial {
        if tx.send(Ok(line)).await.is_err() {
            return None;
        }
    }
    if opts.send_initial
        && opts.bookmarks
        && tx.send(Ok(watcher.bookmark(start_rv, true))).await.is_err()
    {
        return None;
    }
    let mut last_rv = start_rv;
    for event in sub.backlog.drain(..) {
        last_rv = event.object.rv;
        if let Some(line) = watcher.event_line(&event)
            && tx.send(Ok(line)).await.is_err()
        {
            return None;
        }
    }
    Some((sub, last_rv))
}

/// Sends a live event the watch has not sent yet (if it matches). Returns whether the client is
/// still there.
async fn forward(
    watcher: &Watcher,
    event: &WatchEvent,
    last_rv: &mut u64,
    tx: &LineSender,
) -> bool {
    if event.object.rv <= *last_rv {
        return true;
    }
    *last_rv = event.object.rv;
    match watcher.event_line(event) {
        Some(line) => tx.send(Ok(line)).await.is_ok(),
        None => true,
    }
}

/// Sends a bookmark at the current resourceVersion, after the events before it. Returns whether
/// the watch goes on.
async fn send_bookmark(
    cluster: &Cluster,
    watcher: &Watcher,
    sub: &mut Subscription,
    last_rv: &mut u64,
    tx: &LineSender,
) -> bool {
    // Everything up to `current` has been sent into the channel (writes broadcast before they
    // publish their resourceVersion), so drain it, then bookmark.
    let current = cluster.store().current_rv();
    loop {
        match sub.receiver.try_recv() {
            Ok(event) => {
                if !forward(watcher, &event, last_rv, tx).await {
                    return false;
                }
            }
            Err(tokio::sync::broadcast::error::TryRecvError::Empty) => break,
            Err(_) => return false,
        }
    }
    *last_rv = (*last_rv).max(current);
    tx.send(Ok(watcher.bookmark(*last_rv, false))).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_go_does() {
        for (text, nanos) in [
            ("0", 0),
            ("30s", 30_000_000_000),
            ("1m30s", 90_000_000_000),
            ("1.5h", 5_400_000_000_000),
            (".5s", 500_000_000),
            ("-2ms", -2_000_000),
            ("+3us", 3_000),
            ("3\u{b5}s", 3_000),
            ("1h2m3s4ms5us6ns", 3_723_004_005_006),
        ] {
            assert_eq!(go_duration_nanos(text), Ok(nanos), "{text}");
        }
        for (text, message) in [
            ("abc", r#"time: invalid duration "abc""#),
            ("", r#"time: invalid duration """#),
            ("-", r#"time: invalid duration "-""#),
            (".s", r#"time: invalid duration ".s""#),
            ("10", r#"time: missing unit in duration "10""#),
            ("10x", r#"time: unknown unit "x" in duration "10x""#),
            ("1e3s", r#"time: unknown unit "e" in duration "1e3s""#),
            (
                "9999999999999h",
                r#"time: invalid duration "9999999999999h""#,
            ),
        ] {
            assert_eq!(go_duration_nanos(text).unwrap_err(), message, "{text}");
        }
    }

    #[test]
    fn resource_paths() {
        let p = parse_resource_path(&[
            "apis",
            "apps",
            "v1",
            "namespaces",
            "d",
            "deployments",
            "web",
            "status",
        ])
        .unwrap();
        assert_eq!(
            (p.group.as_str(), p.namespace.as_deref(), p.plural.as_str()),
            ("apps", Some("d"), "deployments")
        );
        assert_eq!(
            (p.name.as_deref(), p.subresource.as_deref()),
            (Some("web"), Some("status"))
        );
        let p = parse_resource_path(&["api", "v1", "namespaces", "d"]).unwrap();
        assert_eq!(
            (p.plural.as_str(), p.name.as_deref(), p.namespace),
            ("namespaces", Some("d"), None)
        );
        let p = parse_resource_path(&["api", "v1", "namespaces", "d", "finalize"]).unwrap();
        assert_eq!(p.subresource.as_deref(), Some("finalize"));
        let p = parse_resource_path(&["api", "v1", "watch", "namespaces", "d", "pods"]).unwrap();
        assert!(p.watch_prefix);
        assert!(parse_resource_path(&["api"]).is_none());
    }

    #[test]
    fn continue_tokens_round_trip() {
        let t = continue_token(42, "ns", "a-b");
        assert_eq!(parse_continue(&t).unwrap(), (42, "ns".into(), "a-b".into()));
        assert!(parse_continue("zz").is_err());
    }
}
