//! Integration tests of capstan-source against real servers on 127.0.0.1: Debian's
//! `docker-registry` (checked with `skopeo`) and the artifact storage HTTP server.
//! Run `./scripts/setup` first; missing tools fail the tests with that hint.

mod fetch;
mod oci;
mod support;
