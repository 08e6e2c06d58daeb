//! Arbitrary text as a values file: `yaml::parse` must accept or refuse it, never panic, hang
//! or exhaust memory. What parses goes through `to_yaml` (Go's `toYaml`) and a second read.
//!
//! The round trip is not an invariant of Go's writer for every value, and `to_yaml` follows
//! Go: a string holding DEL, a C1 control or U+FFFE/U+FFFF, or a key holding NEL (U+0085),
//! makes `toYaml` fail (Helm prints nothing), and NEL inside a string value is folded like a
//! line break on the way back (`"a\u0085b"` returns as `"a b"`); a key `<<` (from a quoted
//! `"<<"`) is written plain and so reads back as a merge key. All three are checked against
//! Helm's SDK. Everywhere else the data read back must equal the data read first.

#![no_main]

use capstan_helm::{Value, yaml};
use libfuzzer_sys::fuzz_target;

/// Whether Go's round trip changes `json`: NEL in a key or string (folded), a key `<<`
/// (merged on the way back).
fn unstable(json: &serde_json::Value) -> bool {
    match json {
        serde_json::Value::String(s) => s.contains('\u{85}'),
        serde_json::Value::Array(items) => items.iter().any(unstable),
        serde_json::Value::Object(map) => map
            .iter()
            .any(|(k, v)| k == "<<" || k.contains('\u{85}') || unstable(v)),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(json) = yaml::parse(text) else {
        return;
    };
    let value = Value::from_json_floats(&json);
    let Ok(written) = yaml::to_yaml(&value) else {
        // Go's writer refuses this data too (control characters; see above).
        return;
    };
    if unstable(&json) {
        // Go's round trip changes this data (a `<<` key may not even read back); no panic is
        // all that holds.
        let _ = yaml::parse(&written);
        return;
    }
    let again = yaml::parse(&written)
        .unwrap_or_else(|e| panic!("toYaml output does not parse back: {e}\n{written}"));
    assert_eq!(
        again, json,
        "round trip changed the data; toYaml wrote:\n{written}"
    );
});
