//! Feeds arbitrary bytes to the SOPS decryptor as every format, with the age identity the seed
//! files were encrypted for (a test key, public on purpose), so mutations of real encrypted
//! files reach the data key, the values and the MAC.
#![no_main]

use capstan_sops::{Format, Keys, decrypt, decrypt_document, is_encrypted};
use libfuzzer_sys::fuzz_target;

/// The identity of `corpus/sops_decrypt/seed-*` (made with age-keygen for this target only).
const IDENTITY: &str = "AGE-SECRET-KEY-140R8CLLV6LWHAQQP9AXJNPRE8SYTFA06SLY86W8JQVDRJJJ3QJDQU8Q9LC";

fuzz_target!(|data: &[u8]| {
    let mut keys = Keys::default();
    keys.add_age_identities(IDENTITY).unwrap();
    // Must never panic, whatever the input.
    for format in [
        Format::Yaml,
        Format::Json,
        Format::Dotenv,
        Format::Ini,
        Format::Binary,
    ] {
        let _ = is_encrypted(data, format);
        let _ = decrypt(data, format, &keys);
    }
    if let Ok(document) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = decrypt_document(&document, &keys, true);
        let _ = decrypt_document(&document, &keys, false);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Keys::default().add_age_identities(text);
        let _ = Keys::from_entries([("k.agekey", data), ("k.asc", data)]);
    }
});
