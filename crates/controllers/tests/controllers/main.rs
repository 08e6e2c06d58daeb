//! Integration tests of the controllers against the embedded control plane (in-process), with
//! Git served by `git http-backend` behind a python3 bridge, a `docker-registry` and a
//! `moto_server` on 127.0.0.1. Each test gets its own control plane, controllers, storage
//! directory and servers.

mod bucket;
mod events;
mod fleet;
mod git_repository;
mod health_exprs;
mod helm_chart;
mod helm_release;
mod helm_release_fidelity;
mod helm_release_hooks;
mod helm_release_options;
mod helm_release_ordering;
mod helm_repository;
mod helm_storage;
mod helm_support;
mod honest_status;
mod kustomization;
mod kustomization_acceptance;
mod kustomization_decrypt;
mod kustomization_features;
mod kustomization_remote;
mod kustomize_support;
mod leader;
mod oci_repository;
mod receiver;
use capstan_testkit::sops;
mod support;
mod tenancy;
mod test_kind;
mod triggers;
mod watch_namespace;
