//! Benchmark: capstan's Git fetch (depth 1, the way the GitRepository reconciler fetches, with
//! the checkout) of a generated 10,000-file repository served by `git http-backend`, against
//! `git clone --depth 1` of the same URL. The artifact packing time (tar.gz of the checkout,
//! as the reconciler stores it) is reported separately.
//!
//! Run with `cargo bench -p capstan-source --bench git_fetch` (or `scripts/bench-sources`).

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use capstan_source::artifact::{IgnoreFilter, ModePolicy, PackOptions, pack_to_file};
use capstan_source::git::{self, FetchOptions, GitAuth, GitReference};

use common::{RUNS, Rng, free_port, ratio, report, require, run, time, wait_for_port};

/// Files in the generated repository.
const FILES: usize = 10_000;
/// Files per directory.
const PER_DIR: usize = 100;

/// A CGI bridge from HTTP/1.1 to `git http-backend`, threaded, one process per request.
const BRIDGE: &str = r#"
import http.server, os, subprocess, sys
root, port = sys.argv[1], int(sys.argv[2])
class Bridge(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args): pass
    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))
    def handle_git(self):
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
http.server.ThreadingHTTPServer(("127.0.0.1", port), Bridge).serve_forever()
"#;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes `FILES` files in a work tree, commits them and makes the bare `repo.git` in `root`.
fn generate(root: &Path) {
    let work = root.join("work");
    let mut rng = Rng::new(42);
    for index in 0..FILES {
        let dir = work.join(format!("apps/team-{:03}", index / PER_DIR));
        if index % PER_DIR == 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let len = 200 + usize::try_from(rng.next() % 800).unwrap();
        std::fs::write(
            dir.join(format!("config-{index:05}.yaml")),
            rng.manifest(index, len),
        )
        .unwrap();
    }
    run("git", &["init", "-q", "-b", "main"], Some(&work));
    run("git", &["add", "-A"], Some(&work));
    run("git", &["commit", "-q", "-m", "generated"], Some(&work));
    run(
        "git",
        &["clone", "-q", "--bare", "work", "repo.git"],
        Some(root),
    );
}

fn git_clone(url: &str, dest: &Path, home: &Path) {
    let output = Command::new("git")
        .args([
            "clone",
            "-q",
            "--depth",
            "1",
            "--branch",
            "main",
            "--single-branch",
            url,
        ])
        .arg(dest)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git clone failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn main() {
    require("git");
    require("python3");
    capstan_source::tls::install_default_provider();
    let root = tempfile::tempdir().unwrap();
    let (generated, ()) = time(|| generate(root.path()));
    println!(
        "generated {FILES} files in {} directories ({} to create and commit)",
        FILES / PER_DIR,
        common::ms(generated)
    );
    let port = free_port();
    let _server = Server(
        Command::new("python3")
            .arg("-c")
            .arg(BRIDGE)
            .arg(root.path())
            .arg(port.to_string())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_port(port, "the git http bridge");
    let url = format!("http://127.0.0.1:{port}/repo.git");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let reference = GitReference::branch("main");
    let scratch = tempfile::tempdir().unwrap();

    let capstan_fetch = |run: usize| {
        let dest = scratch.path().join(format!("capstan-{run}"));
        let (elapsed, result) = time(|| {
            runtime.block_on(git::fetch(
                &url,
                &reference,
                &GitAuth::None,
                &dest,
                &FetchOptions::default(),
            ))
        });
        let result = result.unwrap();
        assert!(result.revision.starts_with("main@sha1:"));
        (elapsed, dest)
    };
    let git_fetch = |run: usize| {
        let dest = scratch.path().join(format!("git-{run}"));
        let (elapsed, ()) = time(|| git_clone(&url, &dest, scratch.path()));
        elapsed
    };

    // One warm-up of each (page cache, python), then alternating measured runs.
    let (_, warm) = capstan_fetch(100);
    let files = count_files(&warm);
    assert_eq!(files, FILES, "capstan checked out every file");
    git_fetch(100);
    let mut capstan = Vec::new();
    let mut git = Vec::new();
    let mut checkouts = Vec::new();
    for run in 0..RUNS {
        let (elapsed, dest) = capstan_fetch(run);
        capstan.push(elapsed);
        checkouts.push(dest);
        git.push(git_fetch(run));
    }

    // Packing the artifact as the reconciler does (.sourceignore rules, normalised modes).
    let mut pack = Vec::new();
    let mut size = 0;
    for (run, checkout) in checkouts.iter().enumerate() {
        let filter = IgnoreFilter::for_source(checkout, None).unwrap();
        let out = scratch.path().join(format!("artifact-{run}.tar.gz"));
        let options = PackOptions {
            filter: Some(&filter),
            modes: ModePolicy::Normalize,
        };
        let (elapsed, packed) = time(|| pack_to_file(checkout, &out, &options).unwrap());
        size = packed.size;
        pack.push(elapsed);
    }

    println!();
    println!("git fetch, depth 1, {FILES} files, served by git http-backend ({url})");
    let capstan = report("capstan git::fetch (fetch + checkout)", &mut capstan);
    let git = report("git clone --depth 1 --single-branch", &mut git);
    ratio("git", capstan, git);
    report(
        &format!("capstan artifact pack (tar.gz, {} KiB)", size / 1024),
        &mut pack,
    );
}

fn count_files(dir: &Path) -> usize {
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            count += count_files(&entry.path());
        } else {
            count += 1;
        }
    }
    count
}
