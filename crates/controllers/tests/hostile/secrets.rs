//! Hostile-input cases: secrets (filled in below).
