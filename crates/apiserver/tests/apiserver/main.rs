//! Integration tests of the embedded control plane: `kubectl` (a client nobody here wrote) and
//! kube-rs drive a real server over HTTP on 127.0.0.1, one control plane per test.

mod bad_input;
mod builtin_kinds;
mod events;
mod harness;
mod kube_client;
mod kubectl;
mod pod_logs;
mod rbac;
mod root_ca;
mod secrets;
