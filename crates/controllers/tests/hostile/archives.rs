//! Hostile-input cases: archives (filled in below).
