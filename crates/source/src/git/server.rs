//! A Git server over the smart HTTP protocol, for `capstan dev` and for tests: an axum router
//! that runs `git http-backend` (the CGI program shipped with Git) for each request.
//!
//! It serves every bare repository below a root directory at `/<name>.git`. Clone and fetch
//! always work; push works when [`ServerOptions::receive_pack`] is set (no authentication:
//! bind it to a loopback address only).
//!
//! ```no_run
//! # async fn example() -> std::io::Result<()> {
//! use capstan_source::git::server::{self, ServerOptions};
//! let app = server::router("/srv/git".into(), ServerOptions { receive_pack: true });
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Limits
//! Request bodies (pushes) are read whole, up to [`ServerOptions::MAX_REQUEST_BYTES`]; the
//! answer of `git http-backend` is buffered before it is sent. That suits development fleets,
//! not a production Git host.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::io::AsyncWriteExt as _;

/// What the server allows.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerOptions {
    /// Accept pushes (`git-receive-pack`).
    pub receive_pack: bool,
}

impl ServerOptions {
    /// The largest request body (a push) accepted.
    pub const MAX_REQUEST_BYTES: usize = 512 * 1024 * 1024;
}

struct Shared {
    root: PathBuf,
    options: ServerOptions,
}

/// A router serving the bare repositories below `root`.
pub fn router(root: PathBuf, options: ServerOptions) -> axum::Router {
    axum::Router::new()
        .fallback(handle)
        .with_state(Arc::new(Shared { root, options }))
}

fn plain(status: StatusCode, text: &str) -> Response {
    (status, format!("{text}\n")).into_response()
}

/// Whether `path` names something inside the root: no `..`, no empty or hidden segments
/// other than the Git protocol's own files.
fn valid_path(path: &str) -> bool {
    path.starts_with('/')
        && path[1..]
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != ".." && !s.contains('\\'))
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    if !valid_path(&path) {
        return plain(StatusCode::NOT_FOUND, "not found");
    }
    let query = parts.uri.query().unwrap_or_default().to_owned();
    let pushing = path.ends_with("/git-receive-pack") || query.contains("service=git-receive-pack");
    if pushing && !shared.options.receive_pack {
        return plain(StatusCode::FORBIDDEN, "pushing is disabled on this server");
    }
    let Ok(body) = axum::body::to_bytes(body, ServerOptions::MAX_REQUEST_BYTES).await else {
        return plain(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
    };
    let header = |name: HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let mut command = tokio::process::Command::new("git");
    if shared.options.receive_pack {
        command.args(["-c", "http.receivepack=true"]);
    }
    command
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", &shared.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("PATH_INFO", &path)
        .env("QUERY_STRING", &query)
        .env("REQUEST_METHOD", parts.method.as_str())
        .env("CONTENT_TYPE", header(header::CONTENT_TYPE))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let protocol = header(HeaderName::from_static("git-protocol"));
    if !protocol.is_empty() {
        command.env("GIT_PROTOCOL", protocol);
    }
    let encoding = header(header::CONTENT_ENCODING);
    if !encoding.is_empty() {
        command.env("HTTP_CONTENT_ENCODING", encoding);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            tracing::error!(error = %e, "cannot run `git http-backend`");
            return plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot run `git http-backend`: is Git installed?",
            );
        }
    };
    // Feed stdin while stdout is read, so neither side blocks on a full pipe.
    let stdin = child.stdin.take();
    let writer = tokio::spawn(async move {
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(&body).await;
        }
    });
    let output = match child.wait_with_output().await {
        Ok(output) => output,
        Err(e) => {
            tracing::error!(error = %e, "`git http-backend` failed");
            return plain(StatusCode::INTERNAL_SERVER_ERROR, "git http-backend failed");
        }
    };
    let _ = writer.await;
    if !output.stderr.is_empty() {
        tracing::debug!(stderr = %String::from_utf8_lossy(&output.stderr), %path, "git http-backend");
    }
    cgi_response(&output.stdout)
}

/// Turns a CGI answer (headers, a blank line, the body) into an HTTP response.
fn cgi_response(output: &[u8]) -> Response {
    let split = output
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, at + 4))
        .or_else(|| {
            output
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|at| (at, at + 2))
        });
    let Some((head_end, body_start)) = split else {
        return plain(
            StatusCode::BAD_GATEWAY,
            "git http-backend gave no CGI headers",
        );
    };
    let head = String::from_utf8_lossy(&output[..head_end]);
    let mut status = StatusCode::OK;
    let mut headers = HeaderMap::new();
    for line in head.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if key.eq_ignore_ascii_case("status") {
            if let Some(code) = value
                .split_whitespace()
                .next()
                .and_then(|c| c.parse::<u16>().ok())
                .and_then(|c| StatusCode::from_u16(c).ok())
            {
                status = code;
            }
        } else if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.trim().as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.append(name, value);
        }
    }
    let mut response = Response::new(Body::from(output[body_start..].to_vec()));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_root() {
        assert!(valid_path("/fleet.git/info/refs"));
        assert!(!valid_path("/../etc/passwd"));
        assert!(!valid_path("/fleet.git/../../x"));
        assert!(!valid_path("//x"));
        assert!(!valid_path("relative"));
    }

    #[tokio::test]
    async fn cgi_headers_become_the_response() {
        let response =
            cgi_response(b"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nmissing");
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "text/plain");
        let body = axum::body::to_bytes(response.into_body(), 100)
            .await
            .unwrap();
        assert_eq!(&body[..], b"missing");
        let bad = cgi_response(b"no header end");
        assert_eq!(bad.status(), StatusCode::BAD_GATEWAY);
    }
}
