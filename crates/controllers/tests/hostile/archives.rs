//! Hostile-input cases: what a registry, a Git server or a repository's content can send the
//! source controllers. Layers come from a tiny registry on 127.0.0.1 that speaks the
//! distribution API paths a pull needs and serves whatever the case crafts (endless bodies,
//! lying sizes, hand-made tar headers), counting the bytes it sent so a case can assert that
//! the reader stopped early. Every case asserts the refusal, that no artifact was stored, that
//! nothing escaped, and that the temporary bytes stayed far below 100 MiB.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use capstan_api::OCIRepository;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};

use crate::kustomize_support::{NAMESPACE, create_kustomization, setup, wait_ready};
use crate::support::{Env, GitServer, condition, eventually};

const MIB: u64 = 1 << 20;

// ----- a hostile registry -----

/// What the registry answers for the manifest or a blob.
#[derive(Clone)]
enum Serve {
    /// These bytes, with or without a `Content-Length`.
    Bytes { bytes: Bytes, length: bool },
    /// Zeros (or spaces), chunk after chunk, up to `total` bytes, announcing
    /// `content_length` if any.
    Endless {
        fill: u8,
        total: u64,
        content_length: Option<u64>,
    },
}

#[derive(Clone)]
struct Registry {
    manifest: Serve,
    manifest_digest: String,
    blobs: Arc<HashMap<String, Serve>>,
    /// Bytes of bodies produced so far.
    served: Arc<AtomicU64>,
}

struct HostileRegistry {
    address: std::net::SocketAddr,
    served: Arc<AtomicU64>,
    stop: tokio_util::sync::CancellationToken,
}

impl Drop for HostileRegistry {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl HostileRegistry {
    async fn start(manifest: Serve, manifest_digest: String, blobs: Vec<(String, Serve)>) -> Self {
        let state = Registry {
            manifest,
            manifest_digest,
            blobs: Arc::new(blobs.into_iter().collect()),
            served: Arc::default(),
        };
        let served = Arc::clone(&state.served);
        let app = axum::Router::new().fallback(move |method: Method, uri: Uri| {
            let state = state.clone();
            async move { answer(&state, &method, &uri) }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let stop = tokio_util::sync::CancellationToken::new();
        let cancelled = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { cancelled.cancelled().await })
                .await;
        });
        Self {
            address,
            served,
            stop,
        }
    }

    /// A Flux artifact: a manifest whose single layer is `layer` as described by
    /// `(digest, size)`, served as `blob`.
    async fn artifact(descriptor: (&str, u64), blob: Serve) -> Self {
        let (manifest, digest) = manifest(descriptor.0, descriptor.1);
        Self::start(
            Serve::Bytes {
                bytes: manifest,
                length: true,
            },
            digest,
            vec![(descriptor.0.to_owned(), blob)],
        )
        .await
    }

    /// A well-formed artifact whose layer is `layer` (digest and size true).
    async fn layer(layer: Vec<u8>) -> Self {
        let digest = sha256(&layer);
        let size = layer.len() as u64;
        Self::artifact(
            (&digest, size),
            Serve::Bytes {
                bytes: layer.into(),
                length: true,
            },
        )
        .await
    }

    fn url(&self) -> String {
        format!("oci://{}/hostile/app", self.address)
    }

    fn served(&self) -> u64 {
        self.served.load(Ordering::SeqCst)
    }
}

fn answer(state: &Registry, method: &Method, uri: &Uri) -> Response {
    let path = uri.path();
    if path == "/v2/" || path == "/v2" {
        return Response::new(Body::empty());
    }
    let (body, digest) = if path.contains("/manifests/") {
        (Some(state.manifest.clone()), state.manifest_digest.clone())
    } else if let Some((_, digest)) = path.split_once("/blobs/") {
        (state.blobs.get(digest).cloned(), digest.to_owned())
    } else {
        (None, String::new())
    };
    let Some(body) = body else {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        "application/vnd.oci.image.manifest.v1+json"
            .parse()
            .unwrap(),
    );
    headers.insert("docker-content-digest", digest.parse().unwrap());
    if method == Method::HEAD {
        let mut response = Response::new(Body::empty());
        *response.headers_mut() = headers;
        return response;
    }
    let served = Arc::clone(&state.served);
    let (stream, length) = match body {
        Serve::Bytes { bytes, length } => {
            let total = bytes.len() as u64;
            let chunks: Vec<Bytes> = bytes
                .chunks(64 * 1024)
                .map(Bytes::copy_from_slice)
                .collect();
            let stream = futures::stream::iter(chunks).map(move |chunk| {
                served.fetch_add(chunk.len() as u64, Ordering::SeqCst);
                Ok::<_, std::io::Error>(chunk)
            });
            (Body::from_stream(stream), length.then_some(total))
        }
        Serve::Endless {
            fill,
            total,
            content_length,
        } => {
            let chunk = Bytes::from(vec![fill; 64 * 1024]);
            let count = total.div_ceil(64 * 1024);
            let stream = futures::stream::iter(0..count).map(move |_| {
                served.fetch_add(chunk.len() as u64, Ordering::SeqCst);
                Ok::<_, std::io::Error>(chunk.clone())
            });
            (Body::from_stream(stream), content_length)
        }
    };
    if let Some(length) = length {
        headers.insert(header::CONTENT_LENGTH, length.into());
    }
    let mut response = Response::new(stream);
    *response.headers_mut() = headers;
    response
}

use futures::StreamExt as _;

fn sha256(bytes: &[u8]) -> String {
    capstan_source::Digest::of(bytes).to_string()
}

/// A Flux artifact manifest with one layer; returns it and its digest.
fn manifest(layer_digest: &str, layer_size: u64) -> (Bytes, String) {
    let config = b"{}";
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.cncf.flux.config.v1+json",
            "size": config.len(),
            "digest": sha256(config),
        },
        "layers": [{
            "mediaType": "application/vnd.cncf.flux.content.v1.tar+gzip",
            "size": layer_size,
            "digest": layer_digest,
        }],
        "annotations": {"org.opencontainers.image.revision": "main@sha1:0000000000000000000000000000000000000000"},
    });
    let bytes = serde_json::to_vec(&manifest).unwrap();
    let digest = sha256(&bytes);
    (bytes.into(), digest)
}

// ----- hand-made tarballs -----

/// A tar header with `name` (raw bytes, `..` and `/` allowed), `kind`, `size` and `link`.
fn header(name: &[u8], kind: u8, size: u64, link: &[u8]) -> [u8; 512] {
    let mut header = tar::Header::new_gnu();
    header.as_old_mut().name[..name.len()].copy_from_slice(name);
    header.as_old_mut().linkname[..link.len()].copy_from_slice(link);
    header.set_mode(0o644);
    header.set_size(size);
    header.set_entry_type(tar::EntryType::new(kind));
    header.set_cksum();
    *header.as_bytes()
}

/// A tar stream of `(header, data)` members, each padded to 512 bytes, and the end marker.
fn tar_stream(members: &[([u8; 512], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (header, data) in members {
        out.extend_from_slice(header);
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.extend_from_slice(&[0; 1024]);
    out
}

fn gzip(bytes: &[u8], level: flate2::Compression) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), level);
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// `len` bytes that do not compress (xorshift), so that no compression-ratio check fires.
fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect()
}

const CONFIG_MAP: &[u8] =
    b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\ndata:\n  a: b\n";

// ----- OCIRepository helpers -----

async fn create_oci_repository(env: &Env, name: &str, url: &str) {
    let object: OCIRepository = serde_json::from_value(serde_json::json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "OCIRepository",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"url": url, "ref": {"tag": "latest"}, "interval": "10m", "insecure": true},
    }))
    .unwrap();
    Api::<OCIRepository>::namespaced(env.client.clone(), NAMESPACE)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

/// The `Ready` condition of an OCIRepository once it is `False`: its message.
async fn oci_refused(env: &Env, name: &str) -> String {
    let api = Api::<OCIRepository>::namespaced(env.client.clone(), NAMESPACE);
    let object = eventually(Duration::from_secs(60), "Ready=False", || {
        let api = api.clone();
        async move {
            api.get_opt(name).await.ok().flatten().filter(|o| {
                o.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "False")
                })
            })
        }
    })
    .await;
    let status = object.status.unwrap();
    assert!(status.artifact.is_none(), "no artifact recorded");
    status
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap()
        .message
}

/// Creates the OCIRepository `name` on `registry`, waits for the refusal and checks what must hold after every refusal: no
/// artifact in storage, temporary bytes bounded. Returns the `Ready` message.
async fn refused_pull(env: &Env, registry: &HostileRegistry, name: &str) -> String {
    create_oci_repository(env, name, &registry.url()).await;
    let message = oci_refused(env, name).await;
    let stored = env.storage_path(&format!("ocirepository/{NAMESPACE}/{name}"));
    assert!(
        !stored.exists() || std::fs::read_dir(&stored).unwrap().next().is_none(),
        "nothing stored for a refused pull: {}",
        stored.display()
    );
    assert!(
        temp_bytes() < 64 * MIB,
        "temporary bytes stay bounded: {}",
        temp_bytes()
    );
    message
}

/// Bytes under this process's `capstan-<pid>-*` temporary directories.
fn temp_bytes() -> u64 {
    fn size(path: &std::path::Path) -> u64 {
        let Ok(metadata) = std::fs::symlink_metadata(path) else {
            return 0;
        };
        if metadata.is_dir() {
            std::fs::read_dir(path).map_or(0, |entries| {
                entries.flatten().map(|e| size(&e.path())).sum()
            })
        } else {
            metadata.len()
        }
    }
    let prefix = format!("capstan-{}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir()).map_or(0, |entries| {
        entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| size(&e.path()))
            .sum()
    })
}

fn assert_contains(message: &str, expected: &str) {
    assert!(
        message.contains(expected),
        "expected {expected:?} in the message: {message}"
    );
}

// ----- tar extension records (item 4) -----

#[tokio::test]
async fn gnu_long_name_record_is_refused_from_its_header() {
    let env = oci_env().await;
    // 8 MiB of incompressible name: no ratio check fires, only the record limit can.
    let name = noise(8 << 20);
    let tar = tar_stream(&[
        (
            header(b"././@LongLink", b'L', name.len() as u64, b""),
            &name,
        ),
        (
            header(b"x.yaml", b'0', CONFIG_MAP.len() as u64, b""),
            CONFIG_MAP,
        ),
    ]);
    let registry = HostileRegistry::layer(gzip(&tar, flate2::Compression::none())).await;
    let message = refused_pull(&env, &registry, "long-name").await;
    assert_contains(
        &message,
        "GNU long name record of 8388608 bytes exceeds the limit of 1048576",
    );
}

#[tokio::test]
async fn pax_record_is_refused_from_its_header() {
    let env = oci_env().await;
    let value = vec![b'a'; 2 << 20];
    let mut record = Vec::new();
    // `<length> comment=<value>\n`, the length counting its own digits.
    let body = " comment=".len() + value.len() + 1;
    let digits = (1..20)
        .find(|&d| (body + d).to_string().len() == d)
        .unwrap();
    write!(record, "{} comment=", body + digits).unwrap();
    record.extend_from_slice(&value);
    record.push(b'\n');
    let tar = tar_stream(&[
        (
            header(b"PaxHeader", b'x', record.len() as u64, b""),
            &record,
        ),
        (
            header(b"x.yaml", b'0', CONFIG_MAP.len() as u64, b""),
            CONFIG_MAP,
        ),
    ]);
    let registry = HostileRegistry::layer(gzip(&tar, flate2::Compression::fast())).await;
    let message = refused_pull(&env, &registry, "pax").await;
    assert_contains(&message, "PAX extended header record of");
    assert_contains(&message, "exceeds the limit of 1048576");
}

// ----- blobs and manifests bounded while they stream (item 4) -----

#[tokio::test]
async fn blob_larger_than_its_descriptor_stops_at_the_descriptor_size() {
    let env = oci_env().await;
    // The descriptor says 1 MiB; the registry announces and streams 256 MiB.
    let registry = HostileRegistry::artifact(
        (&sha256(b"whatever"), MIB),
        Serve::Endless {
            fill: 0,
            total: 256 * MIB,
            content_length: Some(256 * MIB),
        },
    )
    .await;
    let message = refused_pull(&env, &registry, "blob-larger").await;
    assert_contains(&message, "digest mismatch for layer");
    assert!(
        registry.served() < 32 * MIB,
        "the reader stopped early: {} bytes served",
        registry.served()
    );
}

#[tokio::test]
async fn blob_without_content_length_stops_at_the_descriptor_size() {
    let env = oci_env().await;
    let registry = HostileRegistry::artifact(
        (&sha256(b"whatever"), MIB),
        Serve::Endless {
            fill: 0,
            total: 256 * MIB,
            content_length: None,
        },
    )
    .await;
    let message = refused_pull(&env, &registry, "blob-no-length").await;
    assert_contains(&message, "more than 1048576 bytes");
    assert!(
        registry.served() < 32 * MIB,
        "the reader stopped early: {} bytes served",
        registry.served()
    );
}

#[tokio::test]
async fn oversize_manifest_is_refused_while_it_streams() {
    let env = oci_env().await;
    let registry = HostileRegistry::start(
        Serve::Endless {
            fill: b' ',
            total: 256 * MIB,
            content_length: None,
        },
        sha256(b"not checked before the size"),
        Vec::new(),
    )
    .await;
    let message = refused_pull(&env, &registry, "manifest").await;
    assert_contains(&message, "manifest size");
    assert_contains(&message, "exceeds the limit of 4194304");
    assert!(
        registry.served() < 32 * MIB,
        "the reader stopped early: {} bytes served",
        registry.served()
    );
}

// ----- attacks that already failed: traversal, links, devices, bombs, lies -----

#[tokio::test]
async fn traversal_and_absolute_names_are_refused() {
    let env = oci_env().await;
    let outside = format!("capstan-hostile-escaped-{}", std::process::id());
    let absolute = std::env::temp_dir().join(&outside);
    for (case, name) in [
        ("dotdot", format!("../../../../../../tmp/{outside}")),
        ("absolute", absolute.display().to_string()),
    ] {
        let tar = tar_stream(&[(
            header(name.as_bytes(), b'0', CONFIG_MAP.len() as u64, b""),
            CONFIG_MAP,
        )]);
        let registry = HostileRegistry::layer(gzip(&tar, flate2::Compression::fast())).await;
        let message = refused_pull(&env, &registry, case).await;
        assert_contains(&message, "tar entry");
        assert!(!absolute.exists(), "{case}: nothing written outside");
    }
}

#[tokio::test]
async fn symlinks_out_and_devices_are_refused() {
    let env = oci_env().await;
    for (case, member, expected) in [
        (
            "symlink",
            header(b"link", b'2', 0, b"../../../../etc"),
            "points outside the target directory",
        ),
        (
            "absolute-symlink",
            header(b"link", b'2', 0, b"/etc/passwd"),
            "is absolute",
        ),
        (
            "device",
            header(b"null", b'3', 0, b""),
            "unsupported entry type",
        ),
    ] {
        let tar = tar_stream(&[(member, b"")]);
        let registry = HostileRegistry::layer(gzip(&tar, flate2::Compression::fast())).await;
        let message = refused_pull(&env, &registry, case).await;
        assert_contains(&message, expected);
    }
}

#[tokio::test]
async fn gzip_bomb_is_refused() {
    let env = oci_env().await;
    let zeros = vec![0u8; 64 << 20];
    let tar = tar_stream(&[(header(b"bomb", b'0', zeros.len() as u64, b""), &zeros)]);
    let registry = HostileRegistry::layer(gzip(&tar, flate2::Compression::best())).await;
    let message = refused_pull(&env, &registry, "bomb").await;
    assert_contains(&message, "compression ratio");
}

#[tokio::test]
async fn digest_and_size_lies_are_refused() {
    let env = oci_env().await;
    let tar = tar_stream(&[(
        header(b"x.yaml", b'0', CONFIG_MAP.len() as u64, b""),
        CONFIG_MAP,
    )]);
    let layer = gzip(&tar, flate2::Compression::fast());
    let size = layer.len() as u64;
    // The right size, other bytes.
    let mut other = layer.clone();
    *other.last_mut().unwrap() ^= 0xff;
    let registry = HostileRegistry::artifact(
        (&sha256(&layer), size),
        Serve::Bytes {
            bytes: other.into(),
            length: true,
        },
    )
    .await;
    let message = refused_pull(&env, &registry, "digest-lie").await;
    assert_contains(&message, "digest mismatch");
    // The descriptor says more bytes than the blob has.
    let registry = HostileRegistry::artifact(
        (&sha256(&layer), size + 100),
        Serve::Bytes {
            bytes: layer.into(),
            length: false,
        },
    )
    .await;
    let message = refused_pull(&env, &registry, "size-lie").await;
    assert_contains(&message, "digest mismatch");
}

// ----- consistent limits (item 5) -----

#[tokio::test]
async fn a_compressible_file_anywhere_in_the_repository_does_not_fail_consumers() {
    let zeros = "0".repeat(20 << 20);
    let config_map = String::from_utf8(CONFIG_MAP.to_vec()).unwrap();
    let (env, _upstream, _controller, _) = setup(&[
        ("app/config.yaml", config_map.as_str()),
        ("data/zeros.txt", zeros.as_str()),
    ])
    .await;
    create_kustomization(
        &env,
        "app",
        serde_json::json!({"path": "./app", "targetNamespace": NAMESPACE}),
    )
    .await;
    wait_ready(&env, "app", "Ready=True", |status, _, _| status == "True").await;
}

#[tokio::test]
async fn too_many_entries_are_refused_by_the_source_naming_the_limit() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let upstream = GitServer::start().await;
    let work = upstream.work();
    for dir in 0..100 {
        let dir_path = work.join(format!("d{dir:03}"));
        std::fs::create_dir_all(&dir_path).unwrap();
        for file in 0..1000 {
            std::fs::write(dir_path.join(format!("f{file:04}")), "x").unwrap();
        }
    }
    upstream.commit_all("many files");
    env.create_git_repository(
        NAMESPACE,
        "repo",
        serde_json::json!({"url": upstream.url(), "interval": "10m", "ref": {"branch": "main"}}),
    )
    .await;
    // Checking out and packing 100,000 files takes a while on a loaded machine.
    let api = env.git_repositories(NAMESPACE);
    let object =
        eventually(Duration::from_secs(240), "Ready=False", || {
            let api = api.clone();
            async move {
                api.get_opt("repo").await.ok().flatten().filter(|o| {
                    condition(o, "Ready").is_some_and(|(status, _, _)| status == "False")
                })
            }
        })
        .await;
    let (_, _, message) = condition(&object, "Ready").unwrap();
    assert_contains(&message, "entry count 100001 exceeds the limit of 100000");
    assert!(object.status.unwrap().artifact.is_none());
}

// ----- Git errors name their cause; credentials never shown (items 9 and 3c) -----

const MARKER: &str = "hostile-git-password-marker";

/// A server answering 401 to everything.
async fn unauthorized_server() -> (std::net::SocketAddr, tokio_util::sync::CancellationToken) {
    let app = axum::Router::new().fallback(|| async {
        let mut response = Response::new(Body::from("no"));
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            "Basic realm=\"hostile\"".parse().unwrap(),
        );
        response
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let cancelled = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { cancelled.cancelled().await })
            .await;
    });
    (address, stop)
}

/// Creates the GitRepository `name` on `url`, waits for `Ready=False`, and checks that
/// `MARKER` appears in no condition and no Event of the namespace. Returns the message.
async fn git_refused(env: &Env, name: &str, url: &str) -> String {
    env.create_git_repository(
        NAMESPACE,
        name,
        serde_json::json!({"url": url, "interval": "10m", "timeout": "20s", "ref": {"branch": "main"}}),
    )
    .await;
    let object = env
        .wait_for(NAMESPACE, name, "Ready=False", |o| {
            condition(o, "Ready").is_some_and(|(status, _, _)| status == "False")
        })
        .await;
    let status = serde_json::to_string(&object.status).unwrap();
    assert!(
        !status.contains(MARKER),
        "no password in the status: {status}"
    );
    let events: Api<Event> = Api::namespaced(env.client.clone(), NAMESPACE);
    let events = eventually(Duration::from_secs(20), "an Event", || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            (!list.items.is_empty()).then_some(list.items)
        }
    })
    .await;
    let events = serde_json::to_string(&events).unwrap();
    assert!(!events.contains(MARKER), "no password in Events: {events}");
    condition(&object, "Ready").unwrap().2
}

#[tokio::test]
async fn git_http_401_names_the_cause() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let (address, _stop) = unauthorized_server().await;
    let message = git_refused(&env, "unauthorized", &format!("http://{address}/repo.git")).await;
    assert!(
        message.contains("401") || message.to_lowercase().contains("unauthorized"),
        "the cause is named: {message}"
    );
}

#[tokio::test]
async fn git_connection_refused_names_the_cause() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    // A port nobody listens on: bind, note, close.
    let address = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let message = git_refused(&env, "refused", &format!("http://{address}/repo.git")).await;
    assert!(
        message.to_lowercase().contains("connection refused"),
        "the cause is named: {message}"
    );
}

#[tokio::test]
async fn credentials_in_a_git_url_never_appear_in_status_or_events() {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    let (address, _stop) = unauthorized_server().await;
    // Refused before any request (credentials over plain HTTP), then over a dead port.
    let message = git_refused(
        &env,
        "userinfo",
        &format!("http://user:{MARKER}@{address}/repo.git"),
    )
    .await;
    assert_contains(&message, &format!("http://{address}/repo.git"));
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let message = git_refused(
        &env,
        "userinfo-https",
        &format!("https://user:{MARKER}@{closed}/repo.git"),
    )
    .await;
    assert_contains(&message, &format!("https://{closed}/repo.git"));
}

/// An environment with the namespace of these cases.
async fn oci_env() -> Env {
    let env = Env::start().await;
    env.namespace(NAMESPACE).await;
    env
}
