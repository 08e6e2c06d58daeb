//! The sops metadata block, the walk over the values (which are encrypted, in which order the
//! MAC covers them) and the AES-256-GCM value format `ENC[AES256_GCM,data:...,iv:...,tag:...,type:...]`.

use std::fmt::Write as _;

use aes_gcm::aead::consts::U32;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{AesGcm, aes::Aes256};
use base64::Engine as _;
use regex::Regex;
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha512};

use crate::Error;

/// The bytes sops hashes first when `mac_only_encrypted` is set, so that such a MAC always
/// differs from one over all values.
const MAC_ONLY_ENCRYPTED_INIT: [u8; 32] = [
    0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0x0b,
    0x0b, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69,
];

/// One age recipient of the data key.
#[derive(Debug)]
pub(crate) struct AgeStanza {
    pub recipient: String,
    /// The data key as an armored age file.
    pub enc: String,
}

/// What of the `sops` block decryption needs.
#[derive(Debug, Default)]
pub(crate) struct Metadata {
    pub lastmodified: String,
    pub mac: String,
    pub mac_only_encrypted: bool,
    pub unencrypted_suffix: Option<String>,
    pub encrypted_suffix: Option<String>,
    pub unencrypted_regex: Option<Regex>,
    pub encrypted_regex: Option<Regex>,
    /// Comment rules: this crate keeps no comments, so with either set a value counts as
    /// encrypted exactly when it has the `ENC[...]` form.
    pub comment_rules: bool,
    pub age: Vec<AgeStanza>,
    /// PGP recipients: (fingerprint, the data key as an armored PGP message).
    pub pgp: Vec<(String, String)>,
    /// Other recipients (KMS and the like), for messages.
    pub others: Vec<String>,
    pub key_groups: usize,
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl Metadata {
    /// Reads the `sops` block (already a JSON value: nested for YAML/JSON, unflattened for
    /// dotenv/INI).
    pub(crate) fn from_value(value: &Value, format: &'static str) -> Result<Self, Error> {
        let malformed = |reason: &str| Error::Malformed {
            format,
            reason: reason.to_string(),
        };
        let object = value
            .as_object()
            .ok_or_else(|| malformed("the sops metadata is not a mapping"))?;
        let field = |name: &str| object.get(name).and_then(text).filter(|s| !s.is_empty());
        let regex = |name: &str| -> Result<Option<Regex>, Error> {
            field(name)
                .map(|r| {
                    Regex::new(&r).map_err(|_| {
                        malformed(&format!("sops.{name} is not a valid regular expression"))
                    })
                })
                .transpose()
        };
        let mut metadata = Metadata {
            lastmodified: field("lastmodified")
                .ok_or_else(|| malformed("sops.lastmodified is missing"))?,
            mac: field("mac").unwrap_or_default(),
            mac_only_encrypted: field("mac_only_encrypted").is_some_and(|v| v == "true"),
            unencrypted_suffix: field("unencrypted_suffix"),
            encrypted_suffix: field("encrypted_suffix"),
            unencrypted_regex: regex("unencrypted_regex")?,
            encrypted_regex: regex("encrypted_regex")?,
            comment_rules: field("unencrypted_comment_regex").is_some()
                || field("encrypted_comment_regex").is_some(),
            ..Metadata::default()
        };
        if let Some(groups) = object.get("key_groups").and_then(Value::as_array) {
            metadata.key_groups = groups.len();
            for group in groups {
                metadata.read_recipients(group);
            }
        } else {
            metadata.key_groups = 1;
            metadata.read_recipients(value);
        }
        Ok(metadata)
    }

    fn read_recipients(&mut self, group: &Value) {
        let list = |name: &str| {
            group
                .get(name)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        for entry in list("age") {
            if let (Some(recipient), Some(enc)) = (
                entry.get("recipient").and_then(text),
                entry.get("enc").and_then(text),
            ) {
                self.age.push(AgeStanza { recipient, enc });
            }
        }
        for entry in list("pgp") {
            if let (Some(fp), Some(enc)) = (
                entry.get("fp").and_then(text),
                entry.get("enc").and_then(text),
            ) {
                self.pgp.push((fp, enc));
            }
        }
        for (name, id) in [
            ("kms", "arn"),
            ("gcp_kms", "resource_id"),
            ("azure_kv", "name"),
            ("hc_vault", "vault_address"),
        ] {
            for entry in list(name) {
                let what = entry.get(id).and_then(text).unwrap_or_default();
                self.others.push(format!("{name} {what}"));
            }
        }
    }

    /// The file's recipients, for messages.
    pub(crate) fn recipients(&self) -> String {
        let mut all: Vec<String> = self
            .age
            .iter()
            .map(|s| format!("age {}", s.recipient))
            .collect();
        all.extend(self.pgp.iter().map(|(fp, _)| format!("PGP {fp}")));
        all.extend(self.others.iter().cloned());
        if all.is_empty() {
            "no recipient".to_string()
        } else {
            all.join(", ")
        }
    }

    /// Whether sops encrypted the value at `path` (its rules, in its order: suffixes, then
    /// regular expressions; the last rule that is set decides).
    fn should_encrypt(&self, path: &[String]) -> bool {
        let mut encrypted = true;
        if let Some(suffix) = &self.unencrypted_suffix
            && path.iter().any(|p| p.ends_with(suffix.as_str()))
        {
            encrypted = false;
        }
        if let Some(suffix) = &self.encrypted_suffix {
            encrypted = path.iter().any(|p| p.ends_with(suffix.as_str()));
        }
        if let Some(regex) = &self.unencrypted_regex
            && path.iter().any(|p| regex.is_match(p))
        {
            encrypted = false;
        }
        if let Some(regex) = &self.encrypted_regex {
            encrypted = path.iter().any(|p| regex.is_match(p));
        }
        encrypted
    }
}

/// A parsed `ENC[AES256_GCM,...]` value.
struct Sealed {
    data: Vec<u8>,
    iv: Vec<u8>,
    tag: Vec<u8>,
    kind: String,
}

fn parse_sealed(value: &str) -> Option<Sealed> {
    let inner = value.strip_prefix("ENC[AES256_GCM,")?;
    let inner = &inner[..inner.find(']')?];
    let mut fields = inner.split(',');
    let mut next = |name: &str| fields.next()?.strip_prefix(name).map(str::to_string);
    let b64 = base64::engine::general_purpose::STANDARD;
    let data = b64.decode(next("data:")?).ok()?;
    let iv = b64.decode(next("iv:")?).ok()?;
    let tag = b64.decode(next("tag:")?).ok()?;
    let kind = next("type:")?;
    Some(Sealed {
        data,
        iv,
        tag,
        kind,
    })
}

/// Whether a string has the form of an encrypted value.
pub(crate) fn looks_sealed(value: &str) -> bool {
    value.starts_with("ENC[AES256_GCM,")
}

/// Opens a sealed value with the data key and the additional data; returns the plaintext bytes
/// and the type tag.
fn open(value: &str, key: &[u8; 32], aad: &str) -> Result<(Vec<u8>, String), &'static str> {
    let sealed = parse_sealed(value).ok_or("not in sops's ENC[AES256_GCM,...] form")?;
    if sealed.iv.len() != 32 || sealed.tag.len() != 16 {
        return Err("unexpected nonce or tag length");
    }
    let cipher = AesGcm::<Aes256, U32>::new(key.into());
    let mut message = sealed.data;
    message.extend_from_slice(&sealed.tag);
    let plain = cipher
        .decrypt(
            aes_gcm::Nonce::<U32>::from_slice(&sealed.iv),
            Payload {
                msg: &message,
                aad: aad.as_bytes(),
            },
        )
        .map_err(|_| "authentication failed (wrong data key, tampered value, or moved key)")?;
    Ok((plain, sealed.kind))
}

/// The bytes a value contributes to the MAC (sops's conversion of a plaintext value).
fn mac_bytes(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Bool(true) => Some(b"True".to_vec()),
        Value::Bool(false) => Some(b"False".to_vec()),
        Value::Number(n) => Some(
            if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                format!("{f}")
            } else {
                n.to_string()
            }
            .into_bytes(),
        ),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

/// The typed value of a decrypted plaintext.
fn typed(plain: Vec<u8>, kind: &str, path: &str) -> Result<Value, Error> {
    let bad = |reason| Error::Value {
        path: path.to_string(),
        reason,
    };
    let text = String::from_utf8(plain).map_err(|_| bad("the plaintext is not UTF-8"))?;
    Ok(match kind {
        "str" | "bytes" | "time" | "comment" => Value::String(text),
        "int" => Value::Number(
            text.parse::<i64>()
                .map(Number::from)
                .map_err(|_| bad("type int, but not an integer"))?,
        ),
        // JSON numbers are float64 in sops: `7` comes back as type float, text "7".
        "float" => Value::Number(
            text.parse::<i64>()
                .ok()
                .map(Number::from)
                .or_else(|| text.parse::<f64>().ok().and_then(Number::from_f64))
                .ok_or_else(|| bad("type float, but not a number"))?,
        ),
        "bool" => Value::Bool(match text.as_str() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => true,
            "0" | "f" | "F" | "FALSE" | "false" | "False" => false,
            _ => return Err(bad("type bool, but not a boolean")),
        }),
        _ => return Err(bad("unknown value type")),
    })
}

/// Decrypts every encrypted value of `document` in place and returns the MAC over the values
/// (upper-case hex SHA-512), as sops computes it.
pub(crate) fn decrypt_values(
    document: &mut Value,
    metadata: &Metadata,
    key: &[u8; 32],
) -> Result<String, Error> {
    let mut hash = Sha512::new();
    if metadata.mac_only_encrypted {
        hash.update(MAC_ONLY_ENCRYPTED_INIT);
    }
    let mut path = Vec::new();
    walk(document, &mut path, metadata, key, &mut hash)?;
    let mut hex = String::with_capacity(128);
    for byte in hash.finalize() {
        let _ = write!(hex, "{byte:02X}");
    }
    Ok(hex)
}

fn walk(
    value: &mut Value,
    path: &mut Vec<String>,
    metadata: &Metadata,
    key: &[u8; 32],
    hash: &mut Sha512,
) -> Result<(), Error> {
    match value {
        Value::Object(map) => walk_map(map, path, metadata, key, hash),
        // List items share the list's path.
        Value::Array(items) => items
            .iter_mut()
            .try_for_each(|item| walk(item, path, metadata, key, hash)),
        Value::Null => Ok(()),
        leaf => {
            let encrypted = if metadata.comment_rules {
                leaf.as_str().is_some_and(looks_sealed)
            } else {
                metadata.should_encrypt(path)
            };
            if encrypted {
                let aad = format!("{}:", path.join(":"));
                match leaf {
                    // sops leaves empty strings as they are.
                    Value::String(s) if s.is_empty() => {}
                    Value::String(s) => {
                        let (plain, kind) = open(s, key, &aad).map_err(|reason| Error::Value {
                            path: aad.clone(),
                            reason,
                        })?;
                        *leaf = typed(plain, &kind, &aad)?;
                    }
                    _ => {
                        return Err(Error::Value {
                            path: aad,
                            reason: "expected an encrypted string",
                        });
                    }
                }
            }
            if (!metadata.mac_only_encrypted || encrypted)
                && let Some(bytes) = mac_bytes(leaf)
            {
                hash.update(&bytes);
            }
            Ok(())
        }
    }
}

fn walk_map(
    map: &mut Map<String, Value>,
    path: &mut Vec<String>,
    metadata: &Metadata,
    key: &[u8; 32],
    hash: &mut Sha512,
) -> Result<(), Error> {
    for (name, value) in map.iter_mut() {
        path.push(name.clone());
        let result = walk(value, path, metadata, key, hash);
        path.pop();
        result?;
    }
    Ok(())
}

/// The MAC stored in the metadata, decrypted (its additional data is `lastmodified`).
pub(crate) fn decrypt_mac(metadata: &Metadata, key: &[u8; 32]) -> Result<String, Error> {
    if metadata.mac.is_empty() {
        return Err(Error::Malformed {
            format: "sops",
            reason: "sops.mac is missing".to_string(),
        });
    }
    let (plain, _) =
        open(&metadata.mac, key, &metadata.lastmodified).map_err(|reason| Error::Value {
            path: "sops.mac".to_string(),
            reason,
        })?;
    String::from_utf8(plain).map_err(|_| Error::MacMismatch)
}
