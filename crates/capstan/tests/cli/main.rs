//! Integration tests of the `capstan` binary as a user runs it (`CARGO_BIN_EXE_capstan`): `dev`,
//! `install --export`, `kustomize build` and the Flux-like verbs, beside the real `kubectl`. They
//! stay in this crate because they need the binary; the control plane's own kubectl and kube-rs
//! tests live with it, in `crates/apiserver/tests/apiserver`.

mod bootstrap;
mod chart;
mod cli;
mod commands;
mod flux_habits;
mod flux_migration;
mod forge;
mod habits;
mod helm_cli;
mod helm_commands;
mod install;
mod logs;
mod ops;
mod receiver;
mod support;
mod verbs;
