//! Files encrypted at test time by the real `sops` for keys made by the real `age-keygen` and
//! `gpg` (`capstan_testkit::sops`; a missing tool fails the test).

use capstan_testkit::sops::{AgeKey, PgpKey};
use serde_json::{Value, json};

use crate::{Error, Format, Keys, decrypt, decrypt_document, is_encrypted};

#[test]
fn pgp_encrypted_secret_decrypts_with_the_exported_private_key() {
    let key = PgpKey::generate();
    let encrypted = key.encrypt_secret(SECRET).into_bytes();
    let pgp_keys = Keys::from_entries([("private.asc", key.armored.as_bytes())]).unwrap();
    let plain = decrypt(&encrypted, Format::Yaml, &pgp_keys).unwrap();
    let value: Value = serde_saphyr::from_str(std::str::from_utf8(&plain).unwrap()).unwrap();
    assert_eq!(value, serde_saphyr::from_str::<Value>(SECRET).unwrap());

    // An age identity alone does not open it; the message names the PGP fingerprint.
    let error = decrypt(
        &encrypted,
        Format::Yaml,
        &keys(&AgeKey::generate().identity),
    )
    .unwrap_err();
    assert!(error.to_string().contains(&key.fingerprint), "{error}");
    let (name, error) = Keys::from_entries([("bad.asc", b"garbage".as_slice())]).unwrap_err();
    assert_eq!(name, "bad.asc");
    assert!(
        matches!(
            error,
            Error::InvalidKey {
                kind: "OpenPGP",
                ..
            }
        ),
        "{error}"
    );
}

fn keys(identity: &str) -> Keys {
    let mut keys = Keys::default();
    keys.add_age_identities(identity).unwrap();
    keys
}

const SECRET: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: marker-plaintext-7f3a\n  port: 5432\n  ratio: 1.5\n  enabled: true\n  empty: \"\"\n  list:\n    - a\n    - b\n";

#[test]
fn yaml_secret_with_encrypted_regex_decrypts_with_types_and_mac() {
    let key = AgeKey::generate();
    let encrypted = key.encrypt_secret(SECRET).into_bytes();
    assert!(!String::from_utf8_lossy(&encrypted).contains("marker-plaintext"));
    assert!(is_encrypted(&encrypted, Format::Yaml));
    let plain = decrypt(&encrypted, Format::Yaml, &keys(&key.identity)).unwrap();
    let value: Value = serde_saphyr::from_str(std::str::from_utf8(&plain).unwrap()).unwrap();
    let expected: Value = serde_saphyr::from_str(SECRET).unwrap();
    assert_eq!(value, expected);
}

#[test]
fn json_dotenv_ini_and_binary_round_trip() {
    let key = AgeKey::generate();
    let keys = keys(&key.identity);
    let encrypt = |name: &str, text: &str| key.encrypt(name, text, &[]).into_bytes();

    let json_text = r#"{"user": "admin", "nested": {"token": "t-123", "n": 7, "on": false}}"#;
    let encrypted = encrypt("a.json", json_text);
    let plain = decrypt(&encrypted, Format::Json, &keys).unwrap();
    let value: Value = serde_json::from_slice(&plain).unwrap();
    assert_eq!(value, serde_json::from_str::<Value>(json_text).unwrap());

    let dotenv = "# a comment\nUSER=admin\nPASSWORD=s3cr=t\nMULTI=line1\\nline2\n";
    let encrypted = encrypt("a.env", dotenv);
    assert!(is_encrypted(&encrypted, Format::Dotenv));
    let plain = decrypt(&encrypted, Format::Dotenv, &keys).unwrap();
    assert_eq!(
        String::from_utf8(plain).unwrap(),
        "USER=admin\nPASSWORD=s3cr=t\nMULTI=line1\\nline2\n"
    );

    let ini = "[database]\nuser = admin\npassword = hunter2\n\n[cache]\nhost = redis\n";
    let encrypted = encrypt("a.ini", ini);
    assert!(is_encrypted(&encrypted, Format::Ini));
    let plain = String::from_utf8(decrypt(&encrypted, Format::Ini, &keys).unwrap()).unwrap();
    assert!(
        plain.contains("[database]\nuser = admin\npassword = hunter2\n"),
        "{plain}"
    );
    assert!(plain.contains("[cache]\nhost = redis\n"), "{plain}");

    let binary = "any bytes: not a format\n\u{e9}t\u{e9}\n";
    let encrypted = encrypt("a.bin", binary);
    assert!(is_encrypted(&encrypted, Format::Binary));
    let plain = decrypt(&encrypted, Format::Binary, &keys).unwrap();
    assert_eq!(plain, binary.as_bytes());
}

#[test]
fn wrong_key_names_the_recipients_and_no_value() {
    let (owner, other) = (AgeKey::generate(), AgeKey::generate());
    let recipient = &owner.recipient;
    let encrypted = owner.encrypt("s.yaml", SECRET, &[]).into_bytes();
    let error = decrypt(&encrypted, Format::Yaml, &keys(&other.identity)).unwrap_err();
    assert!(matches!(error, Error::NoMatchingKey { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains(recipient), "{message}");
    assert!(message.contains("1 age identities"), "{message}");
    assert!(!message.contains("marker-plaintext"), "{message}");

    let error = decrypt(&encrypted, Format::Yaml, &Keys::default()).unwrap_err();
    assert!(error.to_string().contains("(none)"), "{error}");
}

#[test]
fn tampering_fails_the_mac_or_the_value() {
    let key = AgeKey::generate();
    let keys = keys(&key.identity);
    let encrypted = key.encrypt("s.yaml", SECRET, &["--encrypted-regex", "^stringData$"]);
    // An unencrypted value changed: only the MAC notices.
    let renamed = encrypted.replace("name: db", "name: other");
    assert_ne!(renamed, encrypted);
    let error = decrypt(renamed.as_bytes(), Format::Yaml, &keys).unwrap_err();
    assert!(matches!(error, Error::MacMismatch), "{error}");
    // An encrypted value moved to another key: its additional data no longer matches.
    let moved = encrypted.replacen("password:", "passwd:", 1);
    let error = decrypt(moved.as_bytes(), Format::Yaml, &keys).unwrap_err();
    assert!(
        matches!(&error, Error::Value { path, .. } if path == "stringData:passwd:"),
        "{error}"
    );
    assert!(!error.to_string().contains("marker-plaintext"));
}

#[test]
fn document_after_a_build_decrypts_without_the_mac() {
    let key = AgeKey::generate();
    let keys = keys(&key.identity);
    let encrypted = key.encrypt_secret(SECRET);
    let mut document: Value = serde_saphyr::from_str(&encrypted).unwrap();
    document["metadata"]["namespace"] = json!("apps");
    let error = decrypt_document(&document, &keys, true).unwrap_err();
    assert!(matches!(error, Error::MacMismatch), "{error}");
    let plain = decrypt_document(&document, &keys, false).unwrap();
    assert_eq!(
        plain["stringData"]["password"],
        json!("marker-plaintext-7f3a")
    );
    assert_eq!(plain["metadata"]["namespace"], json!("apps"));
    assert!(plain.get("sops").is_none());
}

#[test]
fn plain_files_are_not_encrypted() {
    for (text, format) in [
        (SECRET, Format::Yaml),
        ("{\"a\": 1}", Format::Json),
        ("A=1\n", Format::Dotenv),
        ("[s]\na = 1\n", Format::Ini),
        ("lastmodified but not sops", Format::Binary),
        ("sops:\n  lastmodified: [\n", Format::Yaml),
    ] {
        assert!(!is_encrypted(text.as_bytes(), format), "{text}");
    }
    assert_eq!(Format::from_path("dir/a.enc.yaml"), Format::Yaml);
    assert_eq!(Format::from_path("a.yml"), Format::Yaml);
    assert_eq!(Format::from_path("x/.env"), Format::Dotenv);
    assert_eq!(Format::from_path("app.env"), Format::Dotenv);
    assert_eq!(Format::from_path("a.ini"), Format::Ini);
    assert_eq!(Format::from_path("a.json"), Format::Json);
    assert_eq!(Format::from_path("tls.crt"), Format::Binary);
}

#[test]
fn keys_from_secret_entries() {
    let key = AgeKey::generate();
    let keys = Keys::from_entries([
        ("identity.agekey", key.identity.as_bytes()),
        ("README", b"ignored".as_slice()),
    ])
    .unwrap();
    assert!(!keys.is_empty());
    assert!(!format!("{keys:?}").contains("AGE-SECRET-KEY"));
    let (name, error) = Keys::from_entries([("bad.agekey", b"not a key".as_slice())]).unwrap_err();
    assert_eq!(name, "bad.agekey");
    assert!(
        matches!(error, Error::InvalidKey { kind: "age", .. }),
        "{error}"
    );
    assert!(!error.to_string().contains("not a key"));
}

const RULES: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: rules\nstringData:\n  password: marker-plaintext-7f3a\n  user_plain: admin\n  note_unencrypted: kept\n  port: 5432\n";

#[test]
fn each_encryption_rule_picks_the_values_it_encrypted() {
    let key = AgeKey::generate();
    let keys = keys(&key.identity);
    let expected: Value = serde_saphyr::from_str(RULES).unwrap();
    // The flags, and a value the rule leaves in clear text.
    let cases: [(&[&str], &str); 5] = [
        (&[], "note_unencrypted: kept"),
        (&["--unencrypted-suffix", "_plain"], "user_plain: admin"),
        (&["--encrypted-suffix", "word"], "user_plain: admin"),
        (
            &[
                "--unencrypted-regex",
                "^(apiVersion|kind|metadata|user_plain)$",
            ],
            "user_plain: admin",
        ),
        (&["--encrypted-regex", "^password$"], "user_plain: admin"),
    ];
    for (flags, clear) in cases {
        let encrypted = key.encrypt("s.yaml", RULES, flags);
        assert!(!encrypted.contains("marker-plaintext"), "{flags:?}");
        assert!(encrypted.contains(clear), "{flags:?}: {encrypted}");
        let plain = decrypt(encrypted.as_bytes(), Format::Yaml, &keys)
            .unwrap_or_else(|error| panic!("{flags:?}: {error}"));
        let value: Value = serde_saphyr::from_str(std::str::from_utf8(&plain).unwrap()).unwrap();
        assert_eq!(value, expected, "{flags:?}");
    }
}

#[test]
fn mac_only_encrypted_leaves_clear_values_out_of_the_mac() {
    let key = AgeKey::generate();
    let keys = keys(&key.identity);
    let flags = ["--encrypted-regex", "^password$", "--mac-only-encrypted"];
    let encrypted = key.encrypt("s.yaml", RULES, &flags);
    // A clear value changed: outside the MAC, so it decrypts (without the flag it fails, above).
    let renamed = encrypted.replace("name: rules", "name: other");
    assert_ne!(renamed, encrypted);
    let plain = decrypt(renamed.as_bytes(), Format::Yaml, &keys).unwrap();
    let value: Value = serde_saphyr::from_str(std::str::from_utf8(&plain).unwrap()).unwrap();
    assert_eq!(value["metadata"]["name"], json!("other"));
    assert_eq!(
        value["stringData"]["password"],
        json!("marker-plaintext-7f3a")
    );
}

#[test]
fn a_hostile_list_index_in_flattened_metadata_allocates_nothing() {
    // Without a bound, the index would make a list of four billion entries.
    for (text, format) in [
        (
            "sops_lastmodified=x\nsops_age__list_4000000000__map_enc=y\n",
            Format::Dotenv,
        ),
        (
            "[sops]\nlastmodified = x\nage__list_4000000000__map_enc = y\n",
            Format::Ini,
        ),
    ] {
        assert!(is_encrypted(text.as_bytes(), format), "{text}");
        let error = decrypt(text.as_bytes(), format, &Keys::default()).unwrap_err();
        assert!(error.to_string().contains("no recipient"), "{error}");
    }
}
