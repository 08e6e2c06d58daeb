//! YAML and JSON as Helm reads and writes them: values files and `fromYaml` through
//! `sigs.k8s.io/yaml` (YAML 1.1 scalars, numbers as `float64`), `toYaml` byte-for-byte as Go's
//! `yaml.v2` emits it, `toJson` as `encoding/json` writes it, `toToml` as BurntSushi's encoder.

use crate::value::Value;

mod emit;
pub mod json;
mod read;
mod resolve;
pub mod toml;

/// An error reading YAML or JSON, with Go's wording where charts can see it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// The message.
    pub message: String,
}

/// Reads one YAML document as Helm's `yaml.Unmarshal` into `interface{}` does (numbers become
/// `float64`); an empty document is `null`. Only the first document of a stream counts, as in
/// Go; errors read as Go's (`error converting YAML to JSON: yaml: line 3: …`).
pub fn parse(text: &str) -> Result<serde_json::Value, Error> {
    read::parse(text)
}

/// `toYaml`: the value as `sigs.k8s.io/yaml.Marshal` writes it (with its trailing newline).
pub fn to_yaml(value: &Value) -> Result<String, Error> {
    emit::to_yaml(value)
}

/// `toYamlPretty`: the value as `yaml.v3`'s encoder with an indent of 2 writes it (sequences
/// indented under their key), with its trailing newline.
pub fn to_yaml_pretty(value: &Value) -> Result<String, Error> {
    emit::to_yaml_with(value, emit::Flavour::V3)
}
