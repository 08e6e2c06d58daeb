//! Benchmark: capstan's Git fetch (depth 1, the way the GitRepository reconciler fetches, with
//! the checkout) of a generated 10,000-file repository served by `git http-backend` (behind
//! `capstan_testkit::GitServer`), against
//! `git clone --depth 1` of the same URL. The artifact packing time (tar.gz of the checkout,
//! as the reconciler stores it) is reported separately.
//!
//! Run with `cargo bench -p capstan-source --bench git_fetch` (or `scripts/bench-sources`).

mod common;

use std::path::Path;
use std::process::Command;

use capstan_source::artifact::{IgnoreFilter, ModePolicy, PackOptions, pack_to_file};
use capstan_source::git::{self, FetchOptions, GitAuth, GitReference};
use capstan_testkit::GitServer;

use common::{RUNS, Rng, ratio, report, time};

/// Files in the generated repository.
const FILES: usize = 10_000;
/// Files per directory.
const PER_DIR: usize = 100;

/// Writes `FILES` files in the server's work tree and commits (and pushes) them.
fn generate(server: &GitServer) {
    let work = server.work();
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
    server.commit_all("generated");
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
    capstan_source::tls::install_default_provider();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(GitServer::start());
    let (generated, ()) = time(|| generate(&server));
    println!(
        "generated {FILES} files in {} directories ({} to create and commit)",
        FILES / PER_DIR,
        common::ms(generated)
    );
    let url = server.url();
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

    // One warm-up of each (page cache), then alternating measured runs.
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
            limits: None,
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
