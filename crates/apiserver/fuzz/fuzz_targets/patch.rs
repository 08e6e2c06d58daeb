//! Patches as clients send them: arbitrary bytes split on the first NUL into an original object
//! and a patch (both JSON), applied as an RFC 7386 merge patch, an RFC 6902 JSON patch and a
//! strategic merge patch against the Deployment schema (merge keys, `$patch`, `$retainKeys`,
//! `$setElementOrder`, `$deleteFromPrimitiveList` directives). No panic, no hang; a refused JSON
//! patch leaves the object unchanged.
#![no_main]

use std::sync::OnceLock;

use capstan_schema::Schema;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn deployment() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        capstan_schema::builtin::schema("apps", "v1", "Deployment").expect("the Deployment schema")
    })
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(2, |b| *b == 0);
    let (Some(original), Some(patch)) = (parts.next(), parts.next()) else {
        return;
    };
    let (Ok(original), Ok(patch)) = (
        serde_json::from_slice::<Value>(original),
        serde_json::from_slice::<Value>(patch),
    ) else {
        return;
    };

    let mut merged = original.clone();
    capstan_patch::merge_patch(&mut merged, &patch);

    let mut patched = original.clone();
    if capstan_patch::json_patch(&mut patched, &patch).is_err() {
        assert_eq!(patched, original, "a refused JSON patch changed the object");
    }

    if original.is_object() && patch.is_object() {
        let _ = capstan_patch::strategic_merge(&original, &patch, Some(deployment()));
        let _ = capstan_patch::strategic_merge(&original, &patch, None);
    }
});
