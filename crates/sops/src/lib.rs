//! Decrypts files written by [SOPS](https://getsops.io) without the `sops` program.
//!
//! SOPS encrypts each value of a structured file (YAML, JSON, dotenv, INI; or a whole file as
//! "binary") with AES-256-GCM under a random 32-byte *data key*, and stores beside the values a
//! `sops` metadata block: the data key wrapped for each recipient (age X25519, OpenPGP, cloud
//! KMS), `lastmodified`, the rules that chose which values were encrypted
//! (`encrypted_regex`, `unencrypted_suffix`, ...) and a `mac`: SHA-512 over the plaintext
//! values in document order, itself encrypted with the data key.
//!
//! This crate:
//! - reads the five formats as sops writes them ([`Format`]), dotenv and INI with their
//!   flattened `sops_*` metadata;
//! - unwraps the data key with the age identities (`AGE-SECRET-KEY-1...` lines, as in a
//!   `*.agekey` file) or the OpenPGP private keys (armored, as `gpg --export-secret-keys
//!   --armor` writes them, without a passphrase) of a [`Keys`];
//! - decrypts every value with the additional data sops uses (the key path joined with `:`),
//!   restoring its type (`str`, `int`, `float`, `bool`);
//! - verifies the MAC ([`decrypt`] always; [`decrypt_document`] when asked, since a
//!   document changed by a build after encryption no longer matches it).
//!
//! Errors never contain a decrypted value: they name key paths, recipients and formats only.
//!
//! ```no_run
//! let mut keys = capstan_sops::Keys::default();
//! keys.add_age_identities("AGE-SECRET-KEY-1...")?;
//! let encrypted = std::fs::read("secret.enc.yaml")?;
//! let format = capstan_sops::Format::from_path("secret.enc.yaml");
//! let plain = capstan_sops::decrypt(&encrypted, format, &keys)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod formats;
mod tree;

use std::io::Read;
use std::str::FromStr;

use serde_json::Value;

pub use formats::is_encrypted;

/// A file format as sops reads and writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// YAML (`.yaml`, `.yml`): one document with a top-level `sops` mapping.
    Yaml,
    /// JSON (`.json`): one object with a top-level `sops` object.
    Json,
    /// dotenv (`.env`): `KEY=value` lines, metadata flattened as `sops_*` keys.
    Dotenv,
    /// INI (`.ini`): sections of `key = value`, metadata flattened in a `[sops]` section.
    Ini,
    /// Any other file: sops stores it as JSON `{"data": ..., "sops": ...}`; the whole plaintext
    /// is the `data` value.
    Binary,
}

impl Format {
    /// The format sops infers from a file name's extension (anything unknown is binary).
    pub fn from_path(path: &str) -> Self {
        let name = path.rsplit('/').next().unwrap_or(path);
        let extension = name.rsplit_once('.').map_or("", |(_, ext)| ext);
        match extension.to_ascii_lowercase().as_str() {
            "yaml" | "yml" => Self::Yaml,
            "json" => Self::Json,
            "env" => Self::Dotenv,
            "ini" => Self::Ini,
            _ => Self::Binary,
        }
    }

    /// The format's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Yaml => "YAML",
            Self::Json => "JSON",
            Self::Dotenv => "dotenv",
            Self::Ini => "INI",
            Self::Binary => "binary",
        }
    }
}

/// Why a file could not be decrypted. Messages name key paths, recipients and formats, never a
/// decrypted value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input is not a file of the format, or its `sops` metadata is malformed.
    #[error("not a valid sops-encrypted {format} file: {reason}")]
    Malformed {
        /// The format the input was read as.
        format: &'static str,
        /// What is wrong (structure only).
        reason: String,
    },
    /// No key given unwraps the data key.
    #[error(
        "no decryption key matches the file: it is encrypted for {recipients}, and the keys given \
         ({available}) do not decrypt its data key"
    )]
    NoMatchingKey {
        /// The file's recipients (age recipients, PGP fingerprints, KMS key names).
        recipients: String,
        /// What the caller provided, e.g. "2 age identities".
        available: String,
    },
    /// A feature of sops this crate does not implement.
    #[error("{0} is not supported")]
    Unsupported(String),
    /// A key given to [`Keys`] does not parse.
    #[error("invalid {kind} key: {reason}")]
    InvalidKey {
        /// `age` or `OpenPGP`.
        kind: &'static str,
        /// Why (never the key material).
        reason: String,
    },
    /// A value does not decrypt with the data key (tampered ciphertext, or a path that changed).
    #[error("the value at '{path}' does not decrypt: {reason}")]
    Value {
        /// The key path of the value (`data:password:`).
        path: String,
        /// Why.
        reason: &'static str,
    },
    /// The MAC does not match the values: the file was changed after it was encrypted.
    #[error(
        "the MAC does not match the file's values: it was modified after encryption (sops data integrity check failed)"
    )]
    MacMismatch,
}

/// Decryption keys: age X25519 identities and OpenPGP private keys.
#[derive(Default)]
pub struct Keys {
    age: Vec<age::x25519::Identity>,
    pgp: Vec<pgp::composed::SignedSecretKey>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key material.
        f.debug_struct("Keys")
            .field("age_identities", &self.age.len())
            .field("pgp_keys", &self.pgp.len())
            .finish()
    }
}

impl Keys {
    /// Adds the age identities of a `*.agekey` file: `AGE-SECRET-KEY-1...` lines; blank
    /// lines and `#` comments are skipped. Returns how many were added.
    pub fn add_age_identities(&mut self, text: &str) -> Result<usize, Error> {
        let mut added = 0;
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let identity =
                age::x25519::Identity::from_str(line).map_err(|_| Error::InvalidKey {
                    kind: "age",
                    reason: format!(
                        "line {} is not an age X25519 identity (AGE-SECRET-KEY-1...)",
                        index + 1
                    ),
                })?;
            self.age.push(identity);
            added += 1;
        }
        if added == 0 {
            return Err(Error::InvalidKey {
                kind: "age",
                reason: "no AGE-SECRET-KEY-1... line found".to_string(),
            });
        }
        Ok(added)
    }

    /// Adds the OpenPGP private keys of an armored key file (`*.asc`, as `gpg
    /// --export-secret-keys --armor` writes it; keys must not be protected by a passphrase).
    /// Public keys in the file are skipped. Returns how many secret keys were added.
    pub fn add_pgp_key(&mut self, armored: &[u8]) -> Result<usize, Error> {
        use pgp::composed::{Deserializable as _, SignedSecretKey};
        let invalid = |reason: &str| Error::InvalidKey {
            kind: "OpenPGP",
            reason: reason.to_string(),
        };
        let (keys, _) = SignedSecretKey::from_armor_many(armored)
            .map_err(|_| invalid("not an armored OpenPGP private key block"))?;
        let mut added = 0;
        for key in keys {
            let key = key.map_err(|_| invalid("a key in the block does not parse"))?;
            self.pgp.push(key);
            added += 1;
        }
        if added == 0 {
            return Err(invalid("no private key in the block"));
        }
        Ok(added)
    }

    /// The keys of a decryption Secret's data, as Flux reads them: entries named `*.agekey`
    /// are age identities, `*.asc` OpenPGP keys; other entries are ignored. The error names
    /// the entry.
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Result<Self, (String, Error)> {
        let mut keys = Self::default();
        for (name, value) in entries {
            if extension_is(name, "agekey") {
                let text = std::str::from_utf8(value).map_err(|_| {
                    (
                        name.to_string(),
                        Error::InvalidKey {
                            kind: "age",
                            reason: "not UTF-8 text".to_string(),
                        },
                    )
                })?;
                keys.add_age_identities(text)
                    .map_err(|e| (name.to_string(), e))?;
            } else if extension_is(name, "asc") {
                keys.add_pgp_key(value).map_err(|e| (name.to_string(), e))?;
            }
        }
        Ok(keys)
    }

    /// Whether no key was added.
    pub fn is_empty(&self) -> bool {
        self.age.is_empty() && self.pgp.is_empty()
    }

    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.age.is_empty() {
            parts.push(format!("{} age identities", self.age.len()));
        }
        if !self.pgp.is_empty() {
            parts.push(format!("{} OpenPGP keys", self.pgp.len()));
        }
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    }

    /// Unwraps the data key with the first matching age identity, then OpenPGP key.
    fn data_key(&self, metadata: &tree::Metadata) -> Result<[u8; 32], Error> {
        if metadata.key_groups > 1 {
            return Err(Error::Unsupported(
                "a data key split across several key groups (Shamir secret sharing)".to_string(),
            ));
        }
        let identities: Vec<&dyn age::Identity> =
            self.age.iter().map(|i| i as &dyn age::Identity).collect();
        if !identities.is_empty() {
            for stanza in &metadata.age {
                let reader = age::armor::ArmoredReader::new(stanza.enc.as_bytes());
                let Ok(decryptor) = age::Decryptor::new(reader) else {
                    continue;
                };
                let Ok(mut plain) = decryptor.decrypt(identities.iter().copied()) else {
                    continue;
                };
                let mut key = Vec::new();
                if plain.read_to_end(&mut key).is_ok()
                    && let Ok(key) = <[u8; 32]>::try_from(key.as_slice())
                {
                    return Ok(key);
                }
            }
        }
        for (_, enc) in &metadata.pgp {
            for secret in &self.pgp {
                if let Some(key) = pgp_data_key(enc, secret) {
                    return Ok(key);
                }
            }
        }
        Err(Error::NoMatchingKey {
            recipients: metadata.recipients(),
            available: self.describe(),
        })
    }
}

/// The data key of an armored PGP message, if `secret` decrypts it.
fn pgp_data_key(enc: &str, secret: &pgp::composed::SignedSecretKey) -> Option<[u8; 32]> {
    let (message, _) = pgp::composed::Message::from_string(enc).ok()?;
    let mut message = message
        .decrypt(&pgp::types::Password::empty(), secret)
        .ok()?;
    if message.is_compressed() {
        message = message.decompress().ok()?;
    }
    let key = message.as_data_vec().ok()?;
    <[u8; 32]>::try_from(key.as_slice()).ok()
}

/// Whether a Secret entry name has this extension (exactly, as Go's `filepath.Ext`).
fn extension_is(name: &str, extension: &str) -> bool {
    name.rsplit_once('.')
        .is_some_and(|(_, ext)| ext == extension)
}

/// Decrypts a sops-encrypted file of `format` and returns the plaintext file in the same
/// format (YAML, JSON, dotenv, INI; binary: the original bytes). The MAC is verified.
pub fn decrypt(content: &[u8], format: Format, keys: &Keys) -> Result<Vec<u8>, Error> {
    let (document, metadata) = formats::load(content, format)?;
    let plain = decrypt_tree(document, &metadata, keys, true)?;
    formats::emit(&plain, format)
}

/// Decrypts a Kubernetes-object-like document (a JSON value with a top-level `sops` object, as
/// an encrypted Secret reads after a build) and returns it without its `sops` block. With
/// `verify_mac` false the MAC is not checked (a build that added a namespace or labels changes
/// the values the MAC covers); the values themselves are still authenticated by AES-GCM.
pub fn decrypt_document(document: &Value, keys: &Keys, verify_mac: bool) -> Result<Value, Error> {
    let mut document = document.clone();
    let metadata = match document
        .as_object_mut()
        .and_then(|o| o.shift_remove("sops"))
    {
        Some(metadata) => tree::Metadata::from_value(&metadata, "JSON")?,
        None => {
            return Err(Error::Malformed {
                format: "JSON",
                reason: "no top-level sops metadata".to_string(),
            });
        }
    };
    decrypt_tree(document, &metadata, keys, verify_mac)
}

fn decrypt_tree(
    mut document: Value,
    metadata: &tree::Metadata,
    keys: &Keys,
    verify_mac: bool,
) -> Result<Value, Error> {
    let key = keys.data_key(metadata)?;
    let mac = tree::decrypt_values(&mut document, metadata, &key)?;
    if verify_mac {
        let expected = tree::decrypt_mac(metadata, &key)?;
        if !expected.eq_ignore_ascii_case(&mac) {
            return Err(Error::MacMismatch);
        }
    }
    Ok(document)
}

#[cfg(test)]
mod tests;
