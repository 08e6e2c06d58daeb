//! Reading YAML as `sigs.k8s.io/yaml` does.

use super::Error;

pub(crate) fn parse(text: &str) -> Result<serde_json::Value, Error> {
    let _ = text;
    Err(Error {
        message: "not yet".into(),
    })
}
