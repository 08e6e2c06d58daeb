//! Request bodies in Kubernetes' protobuf encoding (what kubectl's typed commands send), and
//! Secret data in base64: whatever the bytes, decoding must not panic, hang or blow up memory,
//! and what decodes is a JSON object naming its `apiVersion` and `kind`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(object) = capstan_apiserver::protobuf::decode(data) {
        assert!(object.is_object(), "decoded to a non-object: {object}");
        assert!(object.get("apiVersion").is_some_and(serde_json::Value::is_string));
        assert!(object.get("kind").is_some_and(serde_json::Value::is_string));
    }
    // Go-compatible base64 of Secret data: an error is an offset inside the input.
    match capstan_apiserver::secrets::decode_base64(data) {
        Ok(decoded) => assert!(decoded.len() <= data.len()),
        Err(offset) => assert!(offset <= data.len(), "offset {offset} past {}", data.len()),
    }
});
