//! Decoding a Helm release record (a Secret's `data.release`: base64, gzip, JSON) from bytes
//! nobody vouched for: `release::decode` and `release::decode_json` must refuse or decode,
//! never panic, hang or exhaust memory (the decompressed size is capped). What decodes encodes,
//! and encoding is stable: the JSON written, read back and written again is the same bytes.

#![no_main]

use capstan_helm::release;
use libfuzzer_sys::fuzz_target;

fn check(record: &release::Release) {
    let json = release::to_json(record).expect("a decoded record encodes");
    let again = release::decode_json(&json).expect("an encoded record decodes");
    assert_eq!(
        release::to_json(&again).expect("it encodes again"),
        json,
        "encoding is stable"
    );
    let text = release::encode(record).expect("a decoded record compresses");
    release::decode(text.as_bytes()).expect("an encoded record decodes");
}

fuzz_target!(|data: &[u8]| {
    if let Ok(record) = release::decode_json(data) {
        check(&record);
    }
    if let Ok(record) = release::decode(data) {
        check(&record);
    }
});
