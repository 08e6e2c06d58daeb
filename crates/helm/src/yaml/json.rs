//! JSON as Go's `encoding/json` writes it.
