//! Arbitrary text as a values file: `yaml::parse` must accept or refuse it, never panic, hang
//! or exhaust memory. What parses must survive `toYaml` (Go's writer) and a second read
//! unchanged: the JSON data read back equals the data read first.

#![no_main]

use capstan_helm::{Value, yaml};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(json) = yaml::parse(text) else {
        return;
    };
    let value = Value::from_json_floats(&json);
    let written = yaml::to_yaml(&value).expect("toYaml of parsed values");
    let again = yaml::parse(&written)
        .unwrap_or_else(|e| panic!("toYaml output does not parse back: {e}\n{written}"));
    assert_eq!(
        again, json,
        "round trip changed the data; toYaml wrote:\n{written}"
    );
});
