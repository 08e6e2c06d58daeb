//! The label and annotation transformers: string entries in maps.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::fieldspec::{self, applies};
use crate::resource::Resource;
use crate::types::FieldSpec;

/// Sets string entries in the maps at `specs` (labels, annotations, selectors).
pub(crate) fn set_map_entries(
    resources: &mut [Resource],
    entries: &BTreeMap<String, String>,
    specs: &[FieldSpec],
) {
    if entries.is_empty() {
        return;
    }
    for resource in resources.iter_mut() {
        let id = resource.current_id();
        for spec in specs.iter().filter(|s| applies(s, &id)) {
            let _ = fieldspec::visit(&mut resource.object, &spec.path, spec.create, &mut |v| {
                if v.is_null() {
                    *v = Value::Object(Map::new());
                }
                if let Some(map) = v.as_object_mut() {
                    for (key, value) in entries {
                        map.insert(key.clone(), Value::String(value.clone()));
                    }
                }
                Ok(())
            });
        }
    }
}
