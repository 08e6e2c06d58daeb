//! The replica count transformer.

use serde_json::Value;

use crate::fieldspec::{self, applies};
use crate::resource::Resource;
use crate::types::FieldSpec;

/// The replica count transformer.
pub(crate) fn set_replicas(
    resources: &mut [Resource],
    name: &str,
    count: i64,
    specs: &[FieldSpec],
) {
    for resource in resources.iter_mut() {
        let matches =
            resource.current_id().name == name || resource.previous.iter().any(|p| p.name == name);
        if !matches {
            continue;
        }
        let id = resource.current_id();
        for spec in specs.iter().filter(|s| applies(s, &id)) {
            let _ = fieldspec::visit(&mut resource.object, &spec.path, spec.create, &mut |v| {
                *v = Value::from(count);
                Ok(())
            });
        }
    }
}
