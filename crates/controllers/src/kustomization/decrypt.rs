//! SOPS decryption for `spec.decryption` (`provider: sops`), with [`capstan_sops`].
//!
//! As kustomize-controller does:
//! - the keys come from the Secret `spec.decryption.secretRef` in the Kustomization's
//!   namespace: entries named `*.agekey` are age identities, `*.asc` OpenPGP private keys
//!   (without a passphrase), other entries are ignored;
//! - files are decrypted as the build reads them ([`DecryptingFs`]): a file that sops encrypted
//!   (the format from its extension; an unknown extension is tried as binary, then as dotenv,
//!   for `envs:` written with `--input-type dotenv`) is handed to the engine decrypted, with its
//!   MAC verified; every other file passes through unchanged. This covers `secretGenerator`
//!   `envs`/`files`, patches, and encrypted Secret manifests, which sops wrote whole;
//! - after the build, a Secret that still carries a `sops` block (from a base read another way)
//!   is decrypted; its MAC is not checked there, since the build changed what it covers
//!   (namespace, labels), as kustomize-controller does by default. A Secret whose `data` values
//!   are whole sops-encrypted files (base64) has those values decrypted.
//!
//! Errors name the file (relative to the source) or the object, and the key recipients; a
//! decrypted value never reaches an error, a log line or an event.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use capstan_api::Kustomization;
use capstan_kustomize::{DiskFs, FileSystem};
use capstan_sops::{Format, Keys};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::DynamicObject;
use kube::{Api, Client, ResourceExt};

use super::render::{RenderError, build_with_remote, finish_objects};
use crate::error::{ErrorClass, ReconcileError};

/// Why a build with decryption failed.
#[derive(Debug, thiserror::Error)]
pub enum DecryptError {
    /// The build itself (a file that does not decrypt is reported by the engine, naming it).
    #[error(transparent)]
    Render(#[from] RenderError),
    /// A built Secret carrying sops metadata does not decrypt.
    #[error("failed to decrypt {object} with sops: {source}")]
    Object {
        /// `Secret/<namespace>/<name>`.
        object: String,
        /// Why.
        #[source]
        source: capstan_sops::Error,
    },
}

/// The decryption keys of `object`: `None` without `spec.decryption`; empty keys without a
/// `secretRef` (an encrypted file then fails, naming its recipients).
pub(super) async fn keys(
    client: &Client,
    object: &Kustomization,
) -> Result<Option<Arc<Keys>>, ReconcileError> {
    let Some(decryption) = object.spec.decryption.as_ref() else {
        return Ok(None);
    };
    let Some(reference) = decryption.secret_ref.as_ref() else {
        return Ok(Some(Arc::new(Keys::default())));
    };
    let namespace = object.namespace().unwrap_or_default();
    let display = format!("{namespace}/{}", reference.name);
    let failed = |message: String| {
        ReconcileError::new(
            ErrorClass::Transient,
            capstan_api::meta::reason::BUILD_FAILED,
            message,
        )
    };
    let secret = Api::<Secret>::namespaced(client.clone(), &namespace)
        .get_opt(&reference.name)
        .await
        .map_err(|e| {
            failed(format!(
                "cannot get the decryption Secret '{display}': {}",
                capstan_source::redact::error_chain(&e)
            ))
        })?
        .ok_or_else(|| failed(format!("the decryption Secret '{display}' was not found")))?;
    let data = secret.data.unwrap_or_default();
    let keys = Keys::from_entries(
        data.iter()
            .map(|(name, value)| (name.as_str(), &value.0[..])),
    )
    .map_err(|(entry, error)| {
        failed(format!(
            "failed to import '{entry}' from the decryption Secret '{display}': {error}"
        ))
    })?;
    Ok(Some(Arc::new(keys)))
}

/// [`super::render_with`] with SOPS decryption: files decrypted as the engine reads them, then
/// Secrets still carrying sops metadata.
pub(super) fn render(
    root: &Path,
    object: &Kustomization,
    variables: Option<&BTreeMap<String, String>>,
    remote: Option<Arc<dyn capstan_kustomize::RemoteLoader>>,
    keys: &Keys,
) -> Result<Vec<DynamicObject>, DecryptError> {
    let disk = DecryptingFs {
        inner: &DiskFs,
        root,
        keys,
    };
    let mut objects = build_with_remote(&disk, root, object, remote)?;
    for value in &mut objects {
        decrypt_object(value, keys)?;
    }
    Ok(finish_objects(objects, object, variables)?)
}

/// Decrypts a built `v1` Secret with a top-level `sops` block (MAC not checked: the build
/// changed what it covers), or, as Flux does, the `data` values of a Secret that are whole
/// sops-encrypted files (YAML, JSON, dotenv, INI; written back in their own format, MAC
/// checked); other objects are left alone.
fn decrypt_object(value: &mut serde_json::Value, keys: &Keys) -> Result<(), DecryptError> {
    let is_secret = value.get("apiVersion").and_then(|v| v.as_str()) == Some("v1")
        && value.get("kind").and_then(|v| v.as_str()) == Some("Secret");
    if !is_secret {
        return Ok(());
    }
    let object = describe_secret(value);
    if value.get("sops").is_some_and(serde_json::Value::is_object) {
        *value = capstan_sops::decrypt_document(value, keys, false)
            .map_err(|source| DecryptError::Object { object, source })?;
        return Ok(());
    }
    let Some(data) = value
        .get_mut("data")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return Ok(());
    };
    for (key, encoded) in data.iter_mut() {
        let Ok(ByteString(bytes)) = serde_json::from_value::<ByteString>(encoded.clone()) else {
            continue;
        };
        let format = [Format::Json, Format::Yaml, Format::Dotenv, Format::Ini]
            .into_iter()
            .find(|format| capstan_sops::is_encrypted(&bytes, *format));
        let Some(format) = format else {
            continue;
        };
        let plain =
            capstan_sops::decrypt(&bytes, format, keys).map_err(|source| DecryptError::Object {
                object: format!("{object} data '{key}'"),
                source,
            })?;
        *encoded = serde_json::to_value(ByteString(plain)).unwrap_or_default();
    }
    Ok(())
}

/// `Secret/[<namespace>/]<name>` of a built Secret.
fn describe_secret(value: &serde_json::Value) -> String {
    let field = |name: &str| {
        value
            .get("metadata")
            .and_then(|m| m.get(name))
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (namespace, name) = (field("namespace"), field("name"));
    if namespace.is_empty() {
        format!("Secret/{name}")
    } else {
        format!("Secret/{namespace}/{name}")
    }
}

/// A file system handing sops-encrypted files to the engine decrypted (MAC verified); other
/// files pass through.
struct DecryptingFs<'a> {
    inner: &'a dyn FileSystem,
    /// The source root, to name files relative to it.
    root: &'a Path,
    keys: &'a Keys,
}

impl DecryptingFs<'_> {
    fn decrypt(&self, path: &Path, bytes: Vec<u8>) -> io::Result<Vec<u8>> {
        let name = path.to_string_lossy();
        let mut format = Format::from_path(&name);
        if !capstan_sops::is_encrypted(&bytes, format) {
            if format != Format::Binary || !capstan_sops::is_encrypted(&bytes, Format::Dotenv) {
                return Ok(bytes);
            }
            format = Format::Dotenv;
        }
        capstan_sops::decrypt(&bytes, format, self.keys).map_err(|error| {
            let relative = path.strip_prefix(self.root).unwrap_or(path);
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "failed to decrypt '{}' ({} file) with sops: {error}",
                    relative.display(),
                    format.name()
                ),
            )
        })
    }
}

impl FileSystem for DecryptingFs<'_> {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let bytes = self.inner.read(path)?;
        self.decrypt(path, bytes)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.inner.is_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        self.inner.canonicalize(path)
    }
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        self.inner.read_link(path)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.read_dir(path)
    }
}
