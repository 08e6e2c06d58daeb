//! Unit tests of the release model and codec.
