//! Integration tests of the controllers against the embedded control plane (in-process), with
//! Git served by `git http-backend` behind a python3 bridge on 127.0.0.1. Each test gets its own
//! control plane, controller, storage directory and Git repository.

mod git_repository;
mod support;
