//! The hostile-input suite: what an adversary with push access to a Git repository, an OCI
//! registry or a bucket, or the author of a custom resource, can feed Capstan, and what
//! production faults (kills, servers going away, deletes during applies) can do to it. Every
//! case asserts the refusal *and* that nothing leaked, escaped or was lost. Each module owns
//! one way data enters; a new parser brings its cases here.
//!
//! Run alone: `cargo test -p capstan-controllers --test hostile`.

#[allow(dead_code, unused_imports)]
#[path = "../controllers/support.rs"]
mod support;

#[allow(dead_code, unused_imports)]
#[path = "../controllers/kustomize_support.rs"]
mod kustomize_support;

use capstan_testkit::sops;

mod archives;
mod build;
mod fetches;
mod helm_sources;
mod reconcile;
mod secrets;
