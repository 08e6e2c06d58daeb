//! Corpus tests of the Helm engine, one binary: Helm's own goldens, real charts against the Helm
//! SDK's stored output, the ingress-nginx helm-template + kustomize pipeline, and a differential
//! run against the Helm SDK (`oracle.py serve`) in the same process.
//!
//! The Helm SDK comes from `scripts/setup` (a venv at `.tools/helm-venv`); a test needing it
//! fails with a message naming that command when it is missing.

mod bad_input;
mod common;
mod differential;
mod helm;
mod helm_charts;
mod helm_pipeline;
