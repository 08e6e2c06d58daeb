//! The prefix and suffix transformers.

use serde_json::Value;

use crate::fieldspec::{self, applies};
use crate::resource::Resource;
use crate::types::FieldSpec;

/// The prefix and suffix transformers.
pub(crate) fn add_prefix_suffix(
    resources: &mut [Resource],
    prefix: &str,
    suffix: &str,
    specs: &[FieldSpec],
) {
    for resource in resources.iter_mut() {
        let original = resource.original_id();
        let skip = original.kind == "CustomResourceDefinition"
            || (original.kind == "APIService" && original.group == "apiregistration.k8s.io")
            || original.kind == "Namespace";
        if skip {
            continue;
        }
        let id = resource.current_id();
        let matching: Vec<&FieldSpec> = specs.iter().filter(|s| applies(s, &id)).collect();
        if matching.is_empty() {
            continue;
        }
        resource.store_previous_id();
        if !prefix.is_empty() {
            resource.prefixes.push(prefix.to_owned());
        }
        if !suffix.is_empty() {
            resource.suffixes.push(suffix.to_owned());
        }
        for spec in matching {
            let _ = fieldspec::visit(&mut resource.object, &spec.path, spec.create, &mut |v| {
                if let Some(s) = v.as_str() {
                    *v = Value::String(format!("{prefix}{s}{suffix}"));
                }
                Ok(())
            });
        }
    }
}
