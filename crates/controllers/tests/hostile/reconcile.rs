//! Hostile-input cases: reconcile (filled in below).
