//! Hostile-input cases: build (filled in below).
