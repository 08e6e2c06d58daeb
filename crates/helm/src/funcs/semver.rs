//! Template functions: semver.

use crate::template::FuncMap;

/// Adds this module's functions to `map`.
pub fn register(map: &mut FuncMap) {
    let _ = map;
}
