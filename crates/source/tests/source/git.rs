//! Git fetch against a bare repository served over smart HTTP (`capstan_testkit::GitServer`),
//! HTTPS and authenticated HTTP (`git http-backend` behind a small CGI bridge in python3), SSH
//! (`sshd`) and `file://`.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use capstan_source::git::{self, FetchOptions, GitAuth, GitReference};
use capstan_testkit::sshd::{SshServer, keygen};
use capstan_testkit::{CertifiedKey, GitServer, git};

use crate::support::{TestCa, eventually, require, tree};

/// Tags HEAD of `upstream`'s work tree (annotated when `annotated`) and pushes the tag.
fn tag(upstream: &GitServer, name: &str, annotated: bool) {
    let work = upstream.work();
    if annotated {
        git(&work, &["tag", "-a", "-m", name, name]);
    } else {
        git(&work, &["tag", name]);
    }
    git(&work, &["push", "-q", "origin", name]);
}

/// Asserts that `url` resolves and fetches `main` at `commit` (one file `a.yaml`) with `auth`.
async fn assert_fetches_main(url: &str, auth: &GitAuth, commit: &str) {
    let main = GitReference::branch("main");
    assert_eq!(
        git::remote_revision(url, &main, auth, &FetchOptions::default())
            .await
            .unwrap(),
        format!("main@sha1:{commit}")
    );
    let out = tempfile::tempdir().unwrap();
    let result = git::fetch(url, &main, auth, out.path(), &FetchOptions::default())
        .await
        .unwrap();
    assert_eq!(result.revision, format!("main@sha1:{commit}"));
    assert_eq!(result.commit, commit);
    assert_eq!(std::fs::read(out.path().join("a.yaml")).unwrap(), b"a\n");
}

fn assert_git_error(error: &capstan_source::Error) {
    assert!(
        matches!(error, capstan_source::Error::Git { .. }),
        "{error}"
    );
}

/// Asserts that listing `main` of `url` with `auth` fails as a Git error.
async fn assert_refused(url: &str, auth: &GitAuth) {
    let error = git::remote_revision(
        url,
        &GitReference::branch("main"),
        auth,
        &FetchOptions::default(),
    )
    .await
    .unwrap_err();
    assert_git_error(&error);
}

/// `git http-backend` behind a python3 CGI bridge on 127.0.0.1, killed on drop: what
/// `GitServer` does not do, authentication and HTTPS (with or without client certificates).
struct HttpServer {
    child: Child,
    port: u16,
    tls: bool,
    _pem: tempfile::TempDir,
}

const BRIDGE: &str = r#"
import http.server, os, subprocess, sys
root, port = sys.argv[1], int(sys.argv[2])
expected_auth = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None
tls = sys.argv[4:7]
class Bridge(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args): pass
    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))
    def handle_git(self):
        if expected_auth and self.headers.get("Authorization") != expected_auth:
            self.body()
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        env = dict(os.environ, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1",
                   PATH_INFO=path, QUERY_STRING=query, REQUEST_METHOD=self.command,
                   CONTENT_TYPE=self.headers.get("Content-Type", ""), REMOTE_ADDR="127.0.0.1",
                   GIT_PROTOCOL=self.headers.get("Git-Protocol") or "version=2")
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        data = self.body()
        env["CONTENT_LENGTH"] = str(len(data))
        out = subprocess.run(["git", "http-backend"], input=data, env=env, capture_output=True).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode().split("\r\n"):
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.strip().split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
    do_GET = handle_git
    do_POST = handle_git
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Bridge)
if tls:
    import ssl
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls[0], tls[1])
    if len(tls) > 2:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(tls[2])
    server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"#;

impl HttpServer {
    /// A server for `upstream`'s repository answering 401 unless the `Authorization` header is
    /// exactly `authorization`.
    async fn start_with_auth(upstream: &GitServer, authorization: &str) -> Self {
        Self::spawn(upstream, Some(authorization), None).await
    }

    /// A server for `upstream`'s repository speaking HTTPS with `server`; with `client_ca`
    /// (PEM), it requires a client certificate signed by that CA.
    async fn start_tls(
        upstream: &GitServer,
        server: &CertifiedKey,
        client_ca: Option<&str>,
    ) -> Self {
        Self::spawn(upstream, None, Some((server, client_ca))).await
    }

    async fn spawn(
        upstream: &GitServer,
        authorization: Option<&str>,
        tls: Option<(&CertifiedKey, Option<&str>)>,
    ) -> Self {
        require("python3");
        require("git");
        let pem = tempfile::tempdir().unwrap();
        let mut tls_args = Vec::new();
        if let Some((server, client_ca)) = tls {
            for (file, content) in [("server.crt", &server.cert), ("server.key", &server.key)] {
                std::fs::write(pem.path().join(file), content).unwrap();
                tls_args.push(pem.path().join(file));
            }
            if let Some(client_ca) = client_ca {
                std::fs::write(pem.path().join("client-ca.crt"), client_ca).unwrap();
                tls_args.push(pem.path().join("client-ca.crt"));
            }
        }
        let bare = upstream.bare();
        let (child, port) = capstan_testkit::spawn_listening("the git http bridge", |port| {
            let mut command = Command::new("python3");
            command
                .arg("-c")
                .arg(BRIDGE)
                .arg(bare.parent().unwrap())
                .arg(port.to_string())
                .arg(authorization.unwrap_or(""))
                .args(&tls_args)
                .stdout(Stdio::null());
            command
        })
        .await;
        Self {
            child,
            port,
            tls: tls.is_some(),
            _pem: pem,
        }
    }

    fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}/repo.git", self.port)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn fetch_into(url: &str, reference: &GitReference) -> (tempfile::TempDir, git::FetchResult) {
    let out = tempfile::tempdir().unwrap();
    let result = git::fetch(
        url,
        reference,
        &GitAuth::None,
        &out.path().join("checkout"),
        &FetchOptions::default(),
    )
    .await
    .unwrap();
    (out, result)
}

/// The shared scenario: new commits become new revisions, tags/semver/commit refs pick the
/// right commit, `remote_revision` agrees with `fetch`.
#[allow(clippy::too_many_lines)] // one scenario, read top to bottom
async fn scenario(upstream: &GitServer, url: &str) {
    let first = upstream.commit(
        &[("app/config.yaml", "v: 1\n"), ("README.md", "hello\n")],
        "first",
    );
    tag(upstream, "v1.0.0", false);
    let second = upstream.commit(&[("app/config.yaml", "v: 2\n")], "second");
    tag(upstream, "v1.1.0", true);
    tag(upstream, "v2.0.0-rc.1", false);

    let main = GitReference::branch("main");
    let (out, result) = fetch_into(url, &main).await;
    assert_eq!(result.revision, format!("main@sha1:{second}"));
    assert_eq!(result.commit, second);
    let files = tree(&out.path().join("checkout"));
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["README.md", "app/", "app/config.yaml"],
        "no .git is written"
    );
    assert_eq!(files["app/config.yaml"], b"v: 2\n");
    assert_eq!(
        git::remote_revision(url, &main, &GitAuth::None, &FetchOptions::default())
            .await
            .unwrap(),
        result.revision
    );

    // A pushed commit is the new revision, seen by remote_revision and fetch alike.
    let third = upstream.commit(&[("app/new.yaml", "new\n")], "third");
    assert_eq!(
        git::remote_revision(url, &main, &GitAuth::None, &FetchOptions::default())
            .await
            .unwrap(),
        format!("main@sha1:{third}")
    );
    let (_out, result) = fetch_into(url, &main).await;
    assert_eq!(result.revision, format!("main@sha1:{third}"));

    // Tags, lightweight and annotated (peeled to the commit).
    let (out, result) = fetch_into(url, &GitReference::tag("v1.0.0")).await;
    assert_eq!(result.revision, format!("v1.0.0@sha1:{first}"));
    assert_eq!(
        std::fs::read(out.path().join("checkout/app/config.yaml")).unwrap(),
        b"v: 1\n"
    );
    let (_out, result) = fetch_into(url, &GitReference::tag("v1.1.0")).await;
    assert_eq!(result.revision, format!("v1.1.0@sha1:{second}"));

    // Semver: the highest release tag matching; pre-releases only when asked for.
    let (_out, result) = fetch_into(url, &GitReference::semver(">=1.0.0 <2.0.0")).await;
    assert_eq!(result.revision, format!("v1.1.0@sha1:{second}"));
    let (_out, result) = fetch_into(url, &GitReference::semver("~1.0")).await;
    assert_eq!(result.revision, format!("v1.0.0@sha1:{first}"));
    let (_out, result) = fetch_into(url, &GitReference::semver(">=2.0.0-0")).await;
    assert_eq!(result.revision, format!("v2.0.0-rc.1@sha1:{second}"));

    // Name and commit references.
    let (_out, result) = fetch_into(url, &GitReference::name("refs/tags/v1.0.0")).await;
    assert_eq!(result.revision, format!("refs/tags/v1.0.0@sha1:{first}"));
    let (out, result) = fetch_into(url, &GitReference::commit(&first)).await;
    assert_eq!(result.revision, format!("sha1:{first}"));
    assert_eq!(
        std::fs::read(out.path().join("checkout/app/config.yaml")).unwrap(),
        b"v: 1\n"
    );
    let on_branch = GitReference {
        branch: Some("main".into()),
        commit: Some(second.clone()),
        ..GitReference::default()
    };
    let (_out, result) = fetch_into(url, &on_branch).await;
    assert_eq!(result.revision, format!("main@sha1:{second}"));

    // Unknown references are clear errors.
    let out = tempfile::tempdir().unwrap();
    let error = git::fetch(
        url,
        &GitReference::branch("nope"),
        &GitAuth::None,
        out.path(),
        &FetchOptions::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(error.to_string(), format!("branch nope not found in {url}"));
    let error = git::remote_revision(
        url,
        &GitReference::semver("^9"),
        &GitAuth::None,
        &FetchOptions::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("tag matching semver \"^9\" not found in {url}")
    );
    let missing_commit = "0123456789012345678901234567890123456789";
    let error = git::fetch(
        url,
        &GitReference::commit(missing_commit),
        &GitAuth::None,
        out.path(),
        &FetchOptions::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("commit {missing_commit} not found in {url}")
    );
}

#[tokio::test]
async fn fetches_over_smart_http() {
    let upstream = GitServer::start().await;
    scenario(&upstream, &upstream.url()).await;
}

#[tokio::test]
async fn fetches_over_file_url() {
    let upstream = GitServer::start().await;
    scenario(&upstream, &upstream.file_url()).await;
}

#[tokio::test]
async fn sourceignore_excludes_files_from_the_artifact() {
    use capstan_source::artifact::IgnoreFilter;
    let upstream = GitServer::start().await;
    upstream.commit(
        &[
            (".sourceignore", "secrets/\n*.md\n"),
            ("deploy/app.yaml", "kind: ConfigMap\n"),
            ("secrets/token", "hunter2\n"),
            ("NOTES.md", "notes\n"),
        ],
        "ignore",
    );
    let (out, _result) = fetch_into(&upstream.file_url(), &GitReference::branch("main")).await;
    let checkout = out.path().join("checkout");
    let filter = IgnoreFilter::for_source(&checkout, None).unwrap();
    let tarball = out.path().join("artifact.tar.gz");
    let options = capstan_source::artifact::PackOptions {
        filter: Some(&filter),
        ..Default::default()
    };
    capstan_source::artifact::pack_to_file(&checkout, &tarball, &options).unwrap();
    let extracted = out.path().join("extracted");
    capstan_source::artifact::extract(
        std::fs::File::open(&tarball).unwrap(),
        &extracted,
        &capstan_source::artifact::Limits::default(),
    )
    .unwrap();
    let files = tree(&extracted);
    assert!(files.contains_key("deploy/app.yaml"), "{:?}", files.keys());
    assert!(
        !files
            .keys()
            .any(|k| k.starts_with("secrets") || k.as_str() == "NOTES.md"),
        "{:?}",
        files.keys()
    );
}

#[tokio::test]
async fn ssh_without_a_key_is_refused() {
    let error = git::remote_revision(
        "ssh://git@127.0.0.1:22/repo.git",
        &GitReference::branch("main"),
        &GitAuth::None,
        &FetchOptions::default(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "unsupported git authentication: ssh url ssh://git@127.0.0.1:22/repo.git needs identity and known_hosts in the secret"
    );
}

fn secret(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), value.as_bytes().to_vec()))
        .collect()
}

#[tokio::test]
async fn http_basic_and_bearer_auth() {
    let upstream = GitServer::start().await;
    let commit = upstream.commit(&[("a.yaml", "a\n")], "first");
    let main = GitReference::branch("main");
    // "capstan:s3cret" in base64.
    let basic = HttpServer::start_with_auth(&upstream, "Basic Y2Fwc3RhbjpzM2NyZXQ=").await;
    let auth =
        GitAuth::from_secret(&secret(&[("username", "capstan"), ("password", "s3cret")])).unwrap();
    assert_fetches_main(&basic.url(), &auth, &commit).await;

    let wrong =
        GitAuth::from_secret(&secret(&[("username", "capstan"), ("password", "nope")])).unwrap();
    let error = git::remote_revision(&basic.url(), &main, &wrong, &FetchOptions::default())
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(&format!("cannot list references of {}", basic.url())),
        "{error}"
    );
    assert_refused(&basic.url(), &GitAuth::None).await;

    let bearer = HttpServer::start_with_auth(&upstream, "Bearer t0ken").await;
    let auth = GitAuth::from_secret(&secret(&[("bearerToken", "t0ken")])).unwrap();
    assert_eq!(
        git::remote_revision(&bearer.url(), &main, &auth, &FetchOptions::default())
            .await
            .unwrap(),
        format!("main@sha1:{commit}")
    );
}

#[tokio::test]
async fn fetches_over_ssh_and_refuses_unknown_hosts() {
    let upstream = GitServer::start().await;
    let commit = upstream.commit(&[("a.yaml", "a\n")], "first");
    let server = SshServer::start().await;
    let url = server.url(&upstream.bare());
    let main = GitReference::branch("main");
    let auth = GitAuth::from_secret(&secret(&[
        ("identity", &server.client_key()),
        ("known_hosts", &server.known_hosts()),
    ]))
    .unwrap();
    assert_fetches_main(&url, &auth, &commit).await;

    // Hosts are refused when known_hosts has a different key for them, or does not list them
    // at all (ssh's output goes to stderr; the error names the operation and URL).
    let other_host = tempfile::tempdir().unwrap();
    let other_key = keygen(&other_host.path().join("key"));
    let server_key = server.host_key();
    for known_hosts in [
        format!("[127.0.0.1]:{} {other_key}", server.port()),
        format!("[127.0.0.1]:{} {server_key}", server.port() + 1),
    ] {
        let untrusted = GitAuth::from_secret(&secret(&[
            ("identity", &server.client_key()),
            ("known_hosts", &known_hosts),
        ]))
        .unwrap();
        let error = git::remote_revision(&url, &main, &untrusted, &FetchOptions::default())
            .await
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with(&format!("cannot list references of {url}")),
            "{error}"
        );
        let out = tempfile::tempdir().unwrap();
        let error = git::fetch(
            &url,
            &main,
            &untrusted,
            out.path(),
            &FetchOptions::default(),
        )
        .await
        .unwrap_err();
        assert_git_error(&error);
        assert!(tree(out.path()).is_empty(), "nothing is checked out");
    }
}

/// Flux's `password` next to an encrypted `identity` is its passphrase: Capstan decrypts the
/// key itself (ssh runs in batch mode). A wrong or missing passphrase, and a key the server
/// does not accept, say so; an ssh URL never talks of HTTP 401.
#[tokio::test]
async fn fetches_over_ssh_with_a_passphrase_protected_key() {
    let upstream = GitServer::start().await;
    let commit = upstream.commit(&[("a.yaml", "a\n")], "first");
    let server = SshServer::start().await;
    let url = server.url(&upstream.bare());
    let main = GitReference::branch("main");
    // The server's authorized key, encrypted with a passphrase by ssh-keygen.
    let keys = tempfile::tempdir().unwrap();
    let encrypted_path = keys.path().join("encrypted");
    std::fs::write(&encrypted_path, server.client_key()).unwrap();
    std::fs::set_permissions(
        &encrypted_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let status = Command::new("ssh-keygen")
        .args(["-q", "-p", "-P", "", "-N", "correct horse", "-f"])
        .arg(&encrypted_path)
        .status()
        .unwrap();
    assert!(status.success(), "ssh-keygen -p failed");
    let encrypted = std::fs::read_to_string(&encrypted_path).unwrap();
    assert_ne!(encrypted, server.client_key(), "the key is encrypted");
    let known_hosts = server.known_hosts();
    let with = |pairs: &[(&str, &str)]| {
        let mut all = vec![
            ("identity", encrypted.as_str()),
            ("known_hosts", &known_hosts),
        ];
        all.extend_from_slice(pairs);
        GitAuth::from_secret(&secret(&all)).unwrap()
    };
    assert_fetches_main(&url, &with(&[("password", "correct horse")]), &commit).await;

    for (auth, expected) in [
        (
            with(&[("password", "battery staple")]),
            "the secret's password does not decrypt its identity (wrong passphrase)",
        ),
        (
            with(&[]),
            "the secret's identity is encrypted and the secret has no password",
        ),
    ] {
        let error = git::remote_revision(&url, &main, &auth, &FetchOptions::default())
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{error}");
        assert!(!error.contains("HTTP"), "{error}");
    }

    // A key the server does not know: refused by the server, said so without HTTP.
    let stranger = tempfile::tempdir().unwrap();
    keygen(&stranger.path().join("key"));
    let stranger_key = std::fs::read_to_string(stranger.path().join("key")).unwrap();
    let auth = GitAuth::from_secret(&secret(&[
        ("identity", &stranger_key),
        ("known_hosts", &known_hosts),
    ]))
    .unwrap();
    let error = git::remote_revision(&url, &main, &auth, &FetchOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("the ssh server refused the key"), "{error}");
    assert!(!error.contains("HTTP"), "{error}");
}

#[tokio::test]
async fn https_with_a_custom_ca() {
    let upstream = GitServer::start().await;
    let commit = upstream.commit(&[("a.yaml", "a\n")], "first");
    let ca = TestCa::new();
    let server = HttpServer::start_tls(&upstream, &ca.server(), None).await;

    // Without the CA the server is not trusted.
    assert_refused(&server.url(), &GitAuth::None).await;

    let auth = GitAuth::from_secret(&secret(&[("ca.crt", ca.pem())])).unwrap();
    assert_fetches_main(&server.url(), &auth, &commit).await;
}

#[tokio::test]
async fn https_with_a_client_certificate() {
    let upstream = GitServer::start().await;
    let commit = upstream.commit(&[("a.yaml", "a\n")], "first");
    let ca = TestCa::new();
    // The server asks for a client certificate signed by the test CA and refuses others.
    let server = HttpServer::start_tls(&upstream, &ca.server(), Some(ca.pem())).await;

    // Trusting the server is not enough: the handshake fails without a client certificate.
    let only_ca = GitAuth::from_secret(&secret(&[("ca.crt", ca.pem())])).unwrap();
    assert_refused(&server.url(), &only_ca).await;

    // A certificate the server does not trust (issued by another CA) is refused too.
    let other = TestCa::new().client();
    let untrusted = GitAuth::from_secret(&secret(&[
        ("ca.crt", ca.pem()),
        ("tls.crt", &other.cert),
        ("tls.key", &other.key),
    ]))
    .unwrap();
    assert_refused(&server.url(), &untrusted).await;

    // Flux's keys: ca.crt, tls.crt, tls.key.
    let client = ca.client();
    let auth = GitAuth::from_secret(&secret(&[
        ("ca.crt", ca.pem()),
        ("tls.crt", &client.cert),
        ("tls.key", &client.key),
    ]))
    .unwrap();
    assert_fetches_main(&server.url(), &auth, &commit).await;
}

/// A TCP server on 127.0.0.1 that accepts connections, never answers, and counts the
/// connections the client has closed.
struct SilentServer {
    address: std::net::SocketAddr,
    closed: Arc<AtomicUsize>,
}

impl SilentServer {
    fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let closed = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&closed);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let counter = Arc::clone(&counter);
                std::thread::spawn(move || {
                    use std::io::Read as _;
                    let mut buffer = [0u8; 4096];
                    // Read the request, never answer; a read of 0 bytes means the client
                    // closed the connection.
                    while matches!(stream.read(&mut buffer), Ok(n) if n > 0) {}
                    counter.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Self { address, closed }
    }

    fn url(&self) -> String {
        format!("http://{}/repo.git", self.address)
    }
}

/// Waits until `flag` is only held by the test: the blocking Git thread has finished.
async fn blocking_work_finished(flag: &Arc<AtomicBool>) {
    eventually(
        Duration::from_secs(3),
        "the blocking git thread to finish",
        || async { (Arc::strong_count(flag) == 1).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn a_timed_out_operation_stops_its_blocking_thread() {
    let server = SilentServer::start();
    let main = GitReference::branch("main");
    let timeout = Duration::from_secs(1);

    // The caller gives up after `timeout`: the future is dropped, the interrupt flag is set,
    // and the blocking thread ends shortly after (the HTTP request is bounded too).
    for operation in ["remote_revision", "fetch"] {
        let flag = Arc::new(AtomicBool::new(false));
        let options = FetchOptions {
            timeout: Some(timeout),
            interrupt: Arc::clone(&flag),
            ..FetchOptions::default()
        };
        let out = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let timed_out = match operation {
            "remote_revision" => tokio::time::timeout(
                timeout,
                git::remote_revision(&server.url(), &main, &GitAuth::None, &options),
            )
            .await
            .is_err(),
            _ => tokio::time::timeout(
                timeout,
                git::fetch(&server.url(), &main, &GitAuth::None, out.path(), &options),
            )
            .await
            .is_err(),
        };
        assert!(timed_out, "{operation} answered from a silent server");
        assert!(started.elapsed() < timeout + Duration::from_millis(500));
        assert!(
            flag.load(Ordering::SeqCst),
            "{operation}: interrupt flag not set"
        );
        drop(options);
        blocking_work_finished(&flag).await;
        assert!(
            started.elapsed() < timeout + Duration::from_secs(3),
            "{operation}: {:?}",
            started.elapsed()
        );
    }
    // Every connection the client opened has been closed.
    eventually(Duration::from_secs(3), "connections to close", || async {
        (server.closed.load(Ordering::SeqCst) >= 2).then_some(())
    })
    .await;

    // Without an outer timeout, `FetchOptions::timeout` alone ends the operation with an error.
    let flag = Arc::new(AtomicBool::new(false));
    let options = FetchOptions {
        timeout: Some(timeout),
        interrupt: Arc::clone(&flag),
        ..FetchOptions::default()
    };
    let started = Instant::now();
    let error = git::remote_revision(&server.url(), &main, &GitAuth::None, &options)
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < timeout + Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(
        error
            .to_string()
            .starts_with(&format!("cannot list references of {}", server.url())),
        "{error}"
    );
    drop(options);
    blocking_work_finished(&flag).await;
}
