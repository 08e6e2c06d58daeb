//! Pod logs (`GET /api/v1/namespaces/NS/pods/NAME/log`) for Pods whose log is kept in-process.
//!
//! There is no kubelet here: a Pod has a log only when the embedding process registers one for it
//! ([`ApiServer::register_pod_log`](crate::ApiServer::register_pod_log)), as `capstan dev` does for
//! the Pod standing for its in-process controllers. A [`PodLog`] is a bounded ring buffer of lines
//! with the time each arrived; the route answers kubelet's query parameters (`tailLines`,
//! `sinceSeconds`, `sinceTime`, `timestamps`, `limitBytes`, `follow`, `container`) over it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use crate::error::{ApiError, ApiResult};

/// One line of a log and when it was written.
#[derive(Clone, Debug)]
pub struct Line {
    pub time: jiff::Timestamp,
    /// The line without its newline.
    pub text: String,
}

/// A bounded, in-memory container log: the newest lines up to a byte budget, and a feed of new
/// lines for `follow`.
#[derive(Debug)]
pub struct PodLog {
    max_bytes: usize,
    state: Mutex<Buffer>,
    feed: broadcast::Sender<Arc<Line>>,
}

#[derive(Debug, Default)]
struct Buffer {
    lines: VecDeque<Arc<Line>>,
    bytes: usize,
}

impl PodLog {
    /// A log keeping at most `max_bytes` of lines (the oldest go first; kubelet rotates at 10 MiB).
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            state: Mutex::new(Buffer::default()),
            feed: broadcast::channel(1024).0,
        }
    }

    /// Appends a line (a trailing newline is dropped), stamped now.
    pub fn push(&self, text: &str) {
        let line = Arc::new(Line {
            time: jiff::Timestamp::now(),
            text: text.strip_suffix('\n').unwrap_or(text).to_owned(),
        });
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.bytes += line.text.len() + 1;
        state.lines.push_back(line.clone());
        while state.bytes > self.max_bytes {
            let Some(old) = state.lines.pop_front() else {
                break;
            };
            state.bytes -= old.text.len() + 1;
        }
        // Sent under the lock, so a reader's snapshot and its feed neither overlap nor leave a gap.
        let _ = self.feed.send(line);
    }

    /// The lines held now and a receiver of every later line.
    fn snapshot(&self) -> (Vec<Arc<Line>>, broadcast::Receiver<Arc<Line>>) {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        (state.lines.iter().cloned().collect(), self.feed.subscribe())
    }

    /// The lines held now.
    pub fn lines(&self) -> Vec<Arc<Line>> {
        self.snapshot().0
    }
}

/// The registered logs, by namespace and Pod name.
#[derive(Clone, Debug, Default)]
pub struct PodLogs(Arc<Mutex<Registered>>);

type Registered = HashMap<(String, String), Arc<PodLog>>;

impl PodLogs {
    /// Registers (or replaces) the log of Pod `namespace/name`.
    pub fn register(&self, namespace: &str, name: &str, log: Arc<PodLog>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((namespace.to_owned(), name.to_owned()), log);
    }

    fn get(&self, namespace: &str, name: &str) -> Option<Arc<PodLog>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }
}

/// kubelet's log options, from the query.
#[derive(Debug, Default)]
struct Options {
    follow: bool,
    timestamps: bool,
    tail_lines: Option<usize>,
    since: Option<jiff::Timestamp>,
    limit_bytes: Option<usize>,
}

fn parse_bool(q: &HashMap<String, String>, key: &str) -> ApiResult<bool> {
    match q.get(key).map(String::as_str) {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "invalid {key}: {other:?} is not a boolean"
        ))),
    }
}

fn parse_count(q: &HashMap<String, String>, key: &str, min: i64) -> ApiResult<Option<i64>> {
    let Some(text) = q.get(key) else {
        return Ok(None);
    };
    let value: i64 = text
        .parse()
        .map_err(|_| ApiError::bad_request(format!("invalid {key}: {text:?} is not an integer")))?;
    if value < min {
        return Err(invalid_option(
            key,
            &format!("must be greater than or equal to {min}"),
        ));
    }
    Ok(Some(value))
}

fn invalid_option(field: &str, detail: &str) -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        format!("PodLogOptions \"\" is invalid: {field}: Invalid value: {detail}"),
    )
}

impl Options {
    fn parse(q: &HashMap<String, String>) -> ApiResult<Self> {
        let since_seconds = parse_count(q, "sinceSeconds", 1)?;
        let since_time = match q.get("sinceTime") {
            Some(text) => Some(text.parse::<jiff::Timestamp>().map_err(|_| {
                ApiError::bad_request(format!("invalid sinceTime: {text:?} is not RFC 3339"))
            })?),
            None => None,
        };
        let since = match (since_seconds, since_time) {
            (Some(_), Some(_)) => {
                return Err(invalid_option(
                    "sinceSeconds",
                    "at most one of sinceTime or sinceSeconds may be specified",
                ));
            }
            (Some(seconds), None) => jiff::Timestamp::now()
                .checked_sub(jiff::SignedDuration::from_secs(seconds))
                .ok(),
            (None, time) => time,
        };
        let size = |v: i64| usize::try_from(v).unwrap_or(usize::MAX);
        Ok(Self {
            follow: parse_bool(q, "follow")?,
            timestamps: parse_bool(q, "timestamps")?,
            tail_lines: parse_count(q, "tailLines", 0)?.map(size),
            since,
            limit_bytes: parse_count(q, "limitBytes", 1)?.map(size),
        })
    }

    fn wanted(&self, line: &Line) -> bool {
        self.since.is_none_or(|since| line.time >= since)
    }

    fn render(&self, line: &Line) -> Vec<u8> {
        let mut out = Vec::with_capacity(line.text.len() + 40);
        if self.timestamps {
            out.extend_from_slice(format!("{} ", line.time).as_bytes());
        }
        out.extend_from_slice(line.text.as_bytes());
        out.push(b'\n');
        out
    }
}

/// Answers `GET .../pods/NAME/log` for `pod` (the stored object).
pub(crate) fn response(
    logs: &PodLogs,
    pod: &Value,
    namespace: &str,
    name: &str,
    q: &HashMap<String, String>,
) -> ApiResult<Response> {
    let options = Options::parse(q)?;
    let containers: Vec<&str> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    match q.get("container").map(String::as_str) {
        None | Some("") if containers.len() > 1 => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )));
        }
        Some(c) if !c.is_empty() && !containers.contains(&c) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )));
        }
        _ => {}
    }
    let Some(log) = logs.get(namespace, name) else {
        return Err(ApiError::bad_request(format!(
            "pod {name} has no log here: this control plane has no kubelet, and only Pods whose \
             log is kept in-process have one"
        )));
    };
    let (held, feed) = log.snapshot();
    let mut lines: Vec<Arc<Line>> = held.into_iter().filter(|l| options.wanted(l)).collect();
    if let Some(tail) = options.tail_lines {
        lines.drain(..lines.len().saturating_sub(tail));
    }
    let mut budget = options.limit_bytes.unwrap_or(usize::MAX);
    let mut first = Vec::new();
    for line in &lines {
        if !take(&mut first, &options.render(line), &mut budget) {
            break;
        }
    }
    let body = if options.follow && budget > 0 {
        let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
        tokio::spawn(follow(options, budget, first, feed, tx));
        Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
    } else {
        Body::from(first)
    };
    let mut r = Response::new(body);
    *r.status_mut() = StatusCode::OK;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(r)
}

/// Appends `bytes` to `out` within `budget`; false once the budget is spent.
fn take(out: &mut Vec<u8>, bytes: &[u8], budget: &mut usize) -> bool {
    let n = bytes.len().min(*budget);
    out.extend_from_slice(&bytes[..n]);
    *budget -= n;
    *budget > 0
}

/// Streams `first`, then every new line, until the client goes, the log is dropped or the byte
/// budget is spent.
async fn follow(
    options: Options,
    mut budget: usize,
    first: Vec<u8>,
    mut feed: broadcast::Receiver<Arc<Line>>,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    if !first.is_empty() && tx.send(Ok(Bytes::from(first))).await.is_err() {
        return;
    }
    loop {
        let line = tokio::select! {
            line = feed.recv() => line,
            () = tx.closed() => return,
        };
        let line = match line {
            Ok(line) => line,
            // A reader too slow for the writers loses lines, as a rotated kubelet log would.
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let mut chunk = Vec::new();
        let more = take(&mut chunk, &options.render(&line), &mut budget);
        if tx.send(Ok(Bytes::from(chunk))).await.is_err() || !more {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_lines_go_past_the_byte_budget() {
        let log = PodLog::new(10);
        for text in ["one", "two", "three\n"] {
            log.push(text);
        }
        let kept: Vec<String> = log.lines().iter().map(|l| l.text.clone()).collect();
        assert_eq!(kept, ["two", "three"]);
    }

    #[test]
    fn options_follow_kubelet() {
        let q = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<HashMap<_, _>>()
        };
        let o = Options::parse(&q(&[("tailLines", "2"), ("timestamps", "true")])).unwrap();
        assert_eq!(o.tail_lines, Some(2));
        assert!(o.timestamps && !o.follow);
        assert_eq!(
            Options::parse(&q(&[("tailLines", "-1")])).unwrap_err().code,
            422
        );
        assert_eq!(
            Options::parse(&q(&[
                ("sinceSeconds", "5"),
                ("sinceTime", "2026-01-01T00:00:00Z")
            ]))
            .unwrap_err()
            .code,
            422
        );
        assert_eq!(
            Options::parse(&q(&[("follow", "yes")])).unwrap_err().code,
            400
        );
    }
}
