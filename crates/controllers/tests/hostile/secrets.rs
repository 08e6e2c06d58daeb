//! Hostile-input cases: secrets never reach a condition, an Event or a log line.
//!
//! One run plants unique marker values in every kind of credential Capstan reads — Secrets used by
//! `postBuild.substituteFrom` (one that breaks the YAML, one that is not base64 in a Secret the
//! Kustomization applies), `kubeConfig.secretRef` kubeconfigs (token, password, exec and
//! auth-provider plugins, a password in the server URL, a kubeconfig that does not parse, servers
//! that refuse), SOPS-encrypted Secrets (for a key the Kustomization does not hold; for one it
//! holds, whose decrypted value fails to apply) and the age key of the decryption Secret, Git
//! credentials (a basic-auth Secret for a server that refuses, `user:password@` in the URL),
//! registry credentials (a dockerconfigjson Secret with a wrong password), bucket
//! keys, Helm repository credentials and HelmRelease values from Secrets (values that break
//! the YAML, values that fail the chart's schema, a kubeconfig for a cluster that refuses) —
//! drives every one of them into its failure path, then greps every status of every Flux
//! object, every Event (core and `events.k8s.io`) and every log line for the markers.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use capstan_testkit::buckets::{BUCKET, Moto};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

use crate::kustomize_support::{NAMESPACE, create_kustomization, setup};
use crate::support::{Env, REGISTRY_USER, Registry, eventually};

/// Every marker shares this, so a truncated echo is caught too.
const TAG: &str = "s3kr1t";

fn marker(case: &str) -> String {
    // `-` makes every marker invalid base64 (Go stops at the first `-`).
    format!("{case}-{TAG}-{case}")
}

// ---- log capture -------------------------------------------------------------------------------

/// A global tracing subscriber keeping every event and span field as text: capstan crates at
/// DEBUG and everything else at INFO, as an operator would raise them.
#[derive(Default)]
struct Capture {
    text: Mutex<String>,
    next_id: AtomicU64,
}

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, " {}={value}", field.name());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

fn wanted(metadata: &Metadata<'_>) -> bool {
    if metadata.target().starts_with("capstan") {
        *metadata.level() <= tracing::Level::DEBUG
    } else {
        *metadata.level() <= tracing::Level::INFO
    }
}

impl Capture {
    fn push(&self, line: &str) {
        let mut text = self.text.lock().unwrap();
        text.push_str(line);
        text.push('\n');
    }
}

impl Subscriber for Capture {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if wanted(metadata) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        wanted(metadata)
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut line = format!("span {}:", span.metadata().name());
        span.record(&mut Fields(&mut line));
        self.push(&line);
        Id::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _span: &Id, values: &Record<'_>) {
        let mut line = String::from("span record:");
        values.record(&mut Fields(&mut line));
        self.push(&line);
    }

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let metadata = event.metadata();
        let mut line = format!("{} {}:", metadata.level(), metadata.target());
        event.record(&mut Fields(&mut line));
        self.push(&line);
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

/// The process's log capture, installed once; `None` when another subscriber won the race.
fn capture() -> Option<&'static Arc<Capture>> {
    static CAPTURE: OnceLock<Option<Arc<Capture>>> = OnceLock::new();
    CAPTURE
        .get_or_init(|| {
            let capture = Arc::new(Capture::default());
            tracing::subscriber::set_global_default(capture.clone())
                .ok()
                .map(|()| capture)
        })
        .as_ref()
}

// ---- servers that refuse -----------------------------------------------------------------------

/// An HTTP server answering every request `401` with a Basic challenge: a Git server, a cluster
/// or anything else that refuses the credentials it is sent.
async fn refusing_server() -> String {
    use axum::http::{StatusCode, header};
    let app = axum::Router::new().fallback(|| async {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic realm=\"capstan-test\"")],
            "Unauthorized",
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{address}")
}

/// `http://127.0.0.1:<port>` where nothing listens.
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{address}")
}

// ---- objects -----------------------------------------------------------------------------------

async fn create_secret(env: &Env, namespace: &str, name: &str, body: Value) {
    let mut object = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}});
    object
        .as_object_mut()
        .unwrap()
        .extend(body.as_object().unwrap().clone());
    let secret: Secret = serde_json::from_value(object).unwrap();
    Api::<Secret>::namespaced(env.client.clone(), namespace)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("create Secret {name}: {e}"));
}

fn flux(group: &str, version: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}

fn source(kind: &str) -> ApiResource {
    flux("source.toolkit.fluxcd.io", "v1", kind)
}

fn kustomization_resource() -> ApiResource {
    flux("kustomize.toolkit.fluxcd.io", "v1", "Kustomization")
}

fn helm_release_resource() -> ApiResource {
    flux("helm.toolkit.fluxcd.io", "v2", "HelmRelease")
}

async fn create_object(env: &Env, resource: &ApiResource, name: &str, spec: Value) {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": resource.api_version, "kind": resource.kind,
        "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec,
    }))
    .unwrap();
    Api::<DynamicObject>::namespaced_with(env.client.clone(), NAMESPACE, resource)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create {} {name}: {e}", resource.kind));
}

fn ready_false(object: &DynamicObject) -> bool {
    object.data["status"]["conditions"]
        .as_array()
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "False")
        })
}

/// The message of the Ready condition of `object` (as JSON text).
fn ready_message(object: &DynamicObject) -> String {
    object.data["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()["message"]
        .to_string()
}

/// Waits until every `(resource, name)` has failed (Ready=False): its failure path ran.
async fn wait_all_failed(env: &Env, objects: &[(ApiResource, &str)]) {
    for (resource, name) in objects {
        let api: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), NAMESPACE, resource);
        let what = format!("{} {name} Ready=False", resource.kind);
        eventually(Duration::from_secs(60), &what, || {
            let api = api.clone();
            async move { api.get_opt(name).await.ok().flatten().filter(ready_false) }
        })
        .await;
    }
}

/// Every place a marker must not reach, each as `(where, text)`.
async fn everything_shown(env: &Env) -> Vec<(String, String)> {
    let mut shown = Vec::new();
    for resource in [
        source("GitRepository"),
        source("OCIRepository"),
        source("Bucket"),
        source("HelmRepository"),
        source("HelmChart"),
        kustomization_resource(),
        helm_release_resource(),
    ] {
        let api: Api<DynamicObject> = Api::all_with(env.client.clone(), &resource);
        for object in api.list(&ListParams::default()).await.unwrap() {
            let name = object.metadata.name.clone().unwrap_or_default();
            shown.push((
                format!("{} {name} status", resource.kind),
                object.data["status"].to_string(),
            ));
        }
    }
    let core: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Event")),
    );
    let events: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk("events.k8s.io", "v1", "Event")),
    );
    for api in [core, events] {
        for event in api.list(&ListParams::default()).await.unwrap() {
            shown.push((
                format!("Event {}", event.metadata.name.clone().unwrap_or_default()),
                serde_json::to_string(&event).unwrap(),
            ));
        }
    }
    if let Some(capture) = capture() {
        let logs = capture.text.lock().unwrap().clone();
        for line in logs.lines() {
            shown.push(("log".to_owned(), line.to_owned()));
        }
    }
    shown
}

fn base64(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn kubeconfig(server: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: remote\n  cluster:\n    server: {server}\ncontexts:\n- name: remote\n  context:\n    cluster: remote\n    user: remote\ncurrent-context: remote\nusers:\n- name: remote\n  user:\n{user}"
    )
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn no_secret_reaches_conditions_events_or_logs() {
    let installed = capture().is_some();
    let ok = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n  namespace: {NAMESPACE}\ndata:\n  a: b\n"
    );
    let breaks_yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\n  namespace: {NAMESPACE}\ndata:\n  before: line\n  value: ${{BREAK}}\n  after: line\n"
    );
    let bad_base64 = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: applied\n  namespace: {NAMESPACE}\ndata:\n  token: ${{TOKEN}}\n"
    );
    // (h) SOPS: a Secret encrypted for a key the Kustomization does not hold, and one it holds
    // whose decrypted value (not base64) fails to apply.
    let held = crate::sops::AgeKey::generate();
    let foreign = crate::sops::AgeKey::generate();
    let sops_secret = |name: &str, value: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\ndata:\n  token: {value}\n"
        )
    };
    let sops_wrong = foreign.encrypt_secret(&sops_secret("sops-wrong", &marker("h1")));
    let sops_apply = held.encrypt_secret(&sops_secret("sops-apply", &marker("h2")));
    let (env, git, _controller, _) = setup(&[
        ("sops-wrong/secret.enc.yaml", &sops_wrong),
        ("sops-apply/secret.enc.yaml", &sops_apply),
        ("ok/cm.yaml", &ok),
        ("subst-yaml/cm.yaml", &breaks_yaml),
        ("subst-b64/secret.yaml", &bad_base64),
        ("chart/Chart.yaml", "apiVersion: v2\nname: app\nversion: 1.0.0\n"),
        ("chart/values.yaml", "replicas: 1\n"),
        (
            "chart/values.schema.json",
            r#"{"type": "object", "properties": {"replicas": {"type": "integer"}}}"#,
        ),
        (
            "chart/templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  replicas: {{ .Values.replicas | quote }}\n",
        ),
    ])
    .await;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let helm = capstan_controllers::runtime::Controllers::new(
        env.client.clone(),
        capstan_controllers::runtime::RuntimeConfig::default(),
    )
    .register(capstan_controllers::helm_release::HelmReleaseReconciler::new(env.client.clone()));
    tokio::spawn(helm.run(shutdown.clone()));
    let _helm = shutdown.drop_guard();
    let refusing = refusing_server().await;
    let mut markers: Vec<String> = Vec::new();
    let mut failing: Vec<(ApiResource, &str)> = Vec::new();

    // (a) postBuild.substituteFrom: a value that breaks the YAML, one that is not base64.
    let a1 = format!("{}: [unclosed", marker("a1"));
    let a2 = marker("a2");
    markers.extend([marker("a1"), a2.clone()]);
    create_secret(
        &env,
        NAMESPACE,
        "vars",
        json!({"stringData": {"BREAK": a1, "TOKEN": a2}}),
    )
    .await;
    for (name, path) in [("subst-yaml", "./subst-yaml"), ("subst-b64", "./subst-b64")] {
        create_kustomization(
            &env,
            name,
            json!({"path": path, "postBuild": {"substituteFrom": [{"kind": "Secret", "name": "vars"}]}}),
        )
        .await;
        failing.push((kustomization_resource(), name));
    }

    // (b) kubeConfig.secretRef: credentials for servers that refuse, plugins, a broken file.
    let b = |case: &str| marker(case);
    let kubeconfigs = [
        (
            "kc-token",
            kubeconfig(&refusing, &format!("    token: {}\n", b("b1"))),
        ),
        (
            "kc-password",
            kubeconfig(
                &refusing,
                &format!("    username: admin\n    password: {}\n", b("b2")),
            ),
        ),
        (
            "kc-exec",
            kubeconfig(
                &refusing,
                &format!(
                    "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/echo\n      args: [\"{0}\"]\n      env:\n      - name: TOKEN\n        value: \"{0}\"\n",
                    b("b3")
                ),
            ),
        ),
        (
            "kc-provider",
            kubeconfig(
                &refusing,
                &format!(
                    "    auth-provider:\n      name: oidc\n      config:\n        client-secret: \"{0}\"\n        id-token: \"{0}\"\n",
                    b("b4")
                ),
            ),
        ),
        (
            "kc-closed",
            kubeconfig(&closed_port(), &format!("    token: {}\n", b("b5"))),
        ),
        (
            "kc-userinfo",
            kubeconfig(
                &format!(
                    "http://admin:{}@{}",
                    b("b7"),
                    refusing.trim_start_matches("http://")
                ),
                "    {}\n",
            ),
        ),
        (
            "kc-unparsable",
            format!(
                "apiVersion: v1\nkind: Config\nusers:\n- name: x\n  user:\n    token: {}: [\n",
                b("b6")
            ),
        ),
    ];
    markers.extend(["b1", "b2", "b3", "b4", "b5", "b6", "b7"].map(marker));
    for (name, text) in &kubeconfigs {
        create_secret(
            &env,
            NAMESPACE,
            name,
            json!({"stringData": {"value": text}}),
        )
        .await;
        create_kustomization(
            &env,
            name,
            json!({"path": "./ok", "kubeConfig": {"secretRef": {"name": name, "key": "value"}}}),
        )
        .await;
        failing.push((kustomization_resource(), name));
    }

    // (c) Git credentials: a basic-auth Secret the server refuses; a password in the URL.
    let c1 = marker("c1");
    let c2 = marker("c2");
    let c3 = marker("c3");
    markers.extend([c1.clone(), c2.clone(), c3.clone()]);
    markers.push(base64(&format!("git:{c1}")));
    markers.push(base64(&format!("git:{c2}")));
    create_secret(
        &env,
        NAMESPACE,
        "git-auth",
        json!({"stringData": {"username": "git", "password": c1}}),
    )
    .await;
    let git_base = git.url();
    let git_host = git_base
        .trim_start_matches("http://")
        .trim_end_matches("/repo.git");
    let refusing_host = refusing.trim_start_matches("http://");
    let git_sources = [
        (
            "git-auth",
            json!({"url": format!("{refusing}/repo.git"), "secretRef": {"name": "git-auth"}}),
        ),
        (
            "git-userinfo",
            json!({"url": format!("http://git:{c2}@{refusing_host}/repo.git")}),
        ),
        (
            "git-userinfo-missing",
            json!({"url": format!("http://git:{c3}@{git_host}/missing.git")}),
        ),
    ];
    for (name, mut spec) in git_sources {
        spec["interval"] = json!("10m");
        spec["ref"] = json!({"branch": "main"});
        create_object(&env, &source("GitRepository"), name, spec).await;
        failing.push((source("GitRepository"), name));
    }

    // (d) Registry credentials: a dockerconfigjson Secret with a wrong password.
    let registry = Registry::start_with_auth().await;
    let d1 = marker("d1");
    markers.push(d1.clone());
    markers.push(base64(&format!("{REGISTRY_USER}:{d1}")));
    let docker_config = json!({"auths": {registry.address.clone(): {
        "username": REGISTRY_USER, "password": d1,
        "auth": base64(&format!("{REGISTRY_USER}:{d1}")),
    }}});
    create_secret(
        &env,
        NAMESPACE,
        "registry-auth",
        json!({"type": "kubernetes.io/dockerconfigjson",
               "stringData": {".dockerconfigjson": docker_config.to_string()}}),
    )
    .await;
    create_object(
        &env,
        &source("OCIRepository"),
        "oci-auth",
        json!({"url": registry.url("private/apps"), "interval": "10m", "insecure": true,
               "ref": {"tag": "v1"}, "secretRef": {"name": "registry-auth"}}),
    )
    .await;
    failing.push((source("OCIRepository"), "oci-auth"));

    // (e) A bucket with wrong keys.
    let moto = Moto::start().await;
    let e1 = marker("e1");
    let e2 = marker("e2");
    markers.extend([e1.clone(), e2.clone()]);
    create_secret(
        &env,
        NAMESPACE,
        "bucket-keys",
        json!({"stringData": {"accesskey": e1, "secretkey": e2}}),
    )
    .await;
    create_object(
        &env,
        &source("Bucket"),
        "bucket-auth",
        json!({"provider": "generic", "bucketName": BUCKET,
               "endpoint": moto.endpoint.trim_start_matches("http://"), "insecure": true,
               "region": "us-east-1", "interval": "10m", "secretRef": {"name": "bucket-keys"}}),
    )
    .await;
    failing.push((source("Bucket"), "bucket-auth"));

    // (f) Helm repository credentials: a basic-auth Secret the server refuses.
    let f1 = marker("f1");
    markers.extend([f1.clone(), base64(&format!("helm:{f1}"))]);
    create_secret(
        &env,
        NAMESPACE,
        "helm-auth",
        json!({"stringData": {"username": "helm", "password": f1}}),
    )
    .await;
    create_object(
        &env,
        &source("HelmRepository"),
        "helm-auth",
        json!({"url": refusing, "interval": "10m", "secretRef": {"name": "helm-auth"}}),
    )
    .await;
    failing.push((source("HelmRepository"), "helm-auth"));

    // (g) HelmRelease values from Secrets: a values file that is not YAML, a value the chart's
    // schema refuses; and a kubeconfig for a cluster that refuses its token.
    let g1 = marker("g1");
    let g2 = marker("g2");
    let g3 = marker("g3");
    markers.extend([g1.clone(), g2.clone(), g3.clone()]);
    create_secret(
        &env,
        NAMESPACE,
        "release-values",
        json!({"stringData": {
            "broken.yaml": format!("replicas: [{g1}\nother: {g1}\n"),
            "schema.yaml": format!("replicas: {g2}\n"),
        }}),
    )
    .await;
    create_secret(
        &env,
        NAMESPACE,
        "release-kubeconfig",
        json!({"stringData": {"value": kubeconfig(&refusing, &format!("    token: {g3}\n"))}}),
    )
    .await;
    let chart = json!({"spec": {"chart": "./chart",
                                "sourceRef": {"kind": "GitRepository", "name": "repo"}}});
    let releases = [
        (
            "values-yaml",
            json!({"valuesFrom": [{"kind": "Secret", "name": "release-values",
                                   "valuesKey": "broken.yaml"}]}),
        ),
        (
            "values-schema",
            json!({"valuesFrom": [{"kind": "Secret", "name": "release-values",
                                   "valuesKey": "schema.yaml"}]}),
        ),
        (
            "release-kubeconfig",
            json!({"kubeConfig": {"secretRef": {"name": "release-kubeconfig", "key": "value"}}}),
        ),
    ];
    for (name, mut spec) in releases {
        spec["interval"] = json!("10m");
        spec["chart"] = chart.clone();
        create_object(&env, &helm_release_resource(), name, spec).await;
        failing.push((helm_release_resource(), name));
    }

    let held_identity = held
        .identity
        .lines()
        .find(|l| l.starts_with("AGE-SECRET-KEY-"))
        .unwrap()
        .to_owned();
    markers.extend([marker("h1"), marker("h2"), held_identity]);
    create_secret(
        &env,
        NAMESPACE,
        "sops-keys",
        json!({"stringData": {"held.agekey": held.identity}}),
    )
    .await;
    for name in ["sops-wrong", "sops-apply"] {
        create_kustomization(
            &env,
            name,
            json!({"path": format!("./{name}"),
                   "decryption": {"provider": "sops", "secretRef": {"name": "sops-keys"}}}),
        )
        .await;
        failing.push((kustomization_resource(), name));
    }

    wait_all_failed(&env, &failing).await;

    // The Secret the Kustomization applies with a value that is not base64 is refused with the
    // control plane's decoding error, which names the offset only.
    let applied: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), NAMESPACE, &kustomization_resource());
    let message = ready_message(&applied.get("subst-b64").await.unwrap());
    assert!(
        message.contains("illegal base64 data at input byte 2"),
        "{message}"
    );
    assert!(
        Api::<Secret>::namespaced(env.client.clone(), NAMESPACE)
            .get_opt("applied")
            .await
            .unwrap()
            .is_none(),
        "nothing applied"
    );

    // SOPS: the foreign key fails naming the file; the held key decrypts, and the decrypted
    // value (not base64) is refused by the control plane, naming the offset only.
    for (name, expected) in [
        (
            "sops-wrong",
            "failed to decrypt 'sops-wrong/secret.enc.yaml'",
        ),
        ("sops-apply", "illegal base64 data at input byte"),
    ] {
        let message = ready_message(&applied.get(name).await.unwrap());
        assert!(message.contains(expected), "{name}: {message}");
    }

    // Each release failed where its input broke, naming what it read, not what it holds.
    let releases: Api<DynamicObject> =
        Api::namespaced_with(env.client.clone(), NAMESPACE, &helm_release_resource());
    for (name, expected) in [
        ("values-yaml", "release-values"),
        ("values-schema", "replicas"),
        ("release-kubeconfig", "Unauthorized"),
    ] {
        // A failed release is retried (Ready=Unknown meanwhile): wait for its failure to show.
        let what = format!("HelmRelease {name} failed naming {expected}");
        eventually(Duration::from_secs(30), &what, || {
            let api = releases.clone();
            async move {
                let object = api.get_opt(name).await.ok()??;
                (ready_false(&object) && ready_message(&object).contains(expected)).then_some(())
            }
        })
        .await;
    }

    let shown = everything_shown(&env).await;
    if installed {
        assert!(
            shown
                .iter()
                .any(|(place, text)| place == "log" && text.contains("kc-token")),
            "the log capture sees the reconciles"
        );
    }
    let leaks: Vec<String> = shown
        .iter()
        .filter(|(_, text)| text.contains(TAG) || markers.iter().any(|m| text.contains(m.as_str())))
        .map(|(place, text)| {
            let found: Vec<&str> = markers
                .iter()
                .filter(|m| text.contains(m.as_str()))
                .map(String::as_str)
                .collect();
            format!("{place}: {found:?}: {text}")
        })
        .collect();
    assert!(
        leaks.is_empty(),
        "{} leaks of secret values:\n{}",
        leaks.len(),
        leaks.join("\n")
    );
    drop(moto);
    drop(registry);
    env.stop().await;
}
