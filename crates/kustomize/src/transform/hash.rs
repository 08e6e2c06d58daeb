//! Hash suffixes for generated objects.

use crate::resource::Resource;

/// Appends hash suffixes to generated objects that want them.
pub(crate) fn add_hash_suffixes(resources: &mut [Resource]) {
    for resource in resources.iter_mut() {
        if !resource.needs_hash {
            continue;
        }
        let hash = crate::generate::hash(&resource.object);
        resource.store_previous_id();
        let name = format!("{}-{hash}", resource.name());
        resource.set_name(&name);
    }
}
