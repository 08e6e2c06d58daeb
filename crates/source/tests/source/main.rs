//! Integration tests of capstan-source against real servers on 127.0.0.1: Debian's
//! `docker-registry` (checked with `skopeo`), the artifact storage HTTP server, and Git served by
//! `git http-backend`, `sshd` and `file://`, and object stores: `moto_server` (S3) and
//! `azurite-blob` (Azure Blob).
//! Run `./scripts/setup` first; missing tools fail the tests with that hint.

mod bucket;
mod fetch;
mod git;
mod helm;
mod helm_oci;
mod oci;
mod oci_tls;
mod oci_verify;
mod support;
