//! Helm's Secret storage driver over kube-rs: every revision of a release is a Secret
//! `sh.helm.release.v1.<name>.v<N>` of type `helm.sh/release.v1` in the storage namespace,
//! labelled `name`, `owner: helm`, `status`, `version` (and `createdAt` when created,
//! `modifiedAt` when updated), holding [`capstan_helm::release::encode`]'s text under
//! `data.release` — the records Helm v4's SDK and CLI read and write, so `helm list`,
//! `helm history` and `helm rollback` work on Capstan's releases, and Capstan reads Helm's.
//!
//! Expected flow (an upgrade): [`HelmStorage::last`] and [`HelmStorage::deployed`] to find
//! where the release stands; [`HelmStorage::prune`] with `maxHistory - 1` (Helm prunes before
//! it writes the next revision); [`HelmStorage::create`] of revision N+1 as `pending-upgrade`;
//! after applying, [`HelmStorage::update`] of N as `superseded` and N+1 as `deployed` (or N+1
//! as `failed`).
//!
//! Guarantees: the records are Helm's, byte for byte in layout (the JSON fields, gzip and base64
//! of Helm's codec, the labels); records are listed with Helm's label selector, and a record
//! that cannot be decoded fails the listing (naming the Secret) instead of being skipped.
//!
//! Errors name the Secret and the failing field or request; release payloads (values may hold
//! secrets) never appear in errors or logs.

use std::collections::BTreeMap;

use capstan_helm::release::{self, DecodeError, EncodeError, Release, Status};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};

/// The key of a Secret's data that holds the record.
pub const RELEASE_KEY: &str = "release";
/// The `owner` label Helm gives its records.
pub const OWNER: &str = "helm";
/// The labels Helm's driver owns; the others on a record are the release's custom labels.
pub const SYSTEM_LABELS: [&str; 6] = [
    "name",
    "owner",
    "status",
    "version",
    "createdAt",
    "modifiedAt",
];

/// A storage failure: the Secret (or the release's records, `sh.helm.release.v1.<name>.*`) and
/// what failed.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A request to the API server failed.
    #[error("{action} Secret {namespace}/{secret}")]
    Api {
        /// `get`, `list`, `create`, `update`, `delete`.
        action: &'static str,
        /// The storage namespace.
        namespace: String,
        /// The Secret (or `sh.helm.release.v1.<name>.*` for a listing).
        secret: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
    /// A record exists already (Helm's `ErrReleaseExists`).
    #[error("Secret {namespace}/{secret} exists already: release {name} has a revision {version}")]
    Exists {
        /// The storage namespace.
        namespace: String,
        /// The Secret.
        secret: String,
        /// The release.
        name: String,
        /// The revision.
        version: i64,
    },
    /// A record's `data.release` cannot be decoded.
    #[error("Secret {namespace}/{secret}: field data.release")]
    Decode {
        /// The storage namespace.
        namespace: String,
        /// The Secret.
        secret: String,
        /// What is wrong with it (never the payload).
        #[source]
        source: DecodeError,
    },
    /// A record has no `data.release` at all.
    #[error("Secret {namespace}/{secret}: field data.release is missing")]
    MissingData {
        /// The storage namespace.
        namespace: String,
        /// The Secret.
        secret: String,
    },
    /// A record cannot be encoded.
    #[error("Secret {namespace}/{secret}: encoding field data.release")]
    Encode {
        /// The storage namespace.
        namespace: String,
        /// The Secret.
        secret: String,
        /// What failed.
        #[source]
        source: EncodeError,
    },
    /// The release's name cannot be a label value, so Helm could not list it either.
    #[error(
        "release name {name:?} is not valid: a release name is at most 53 characters of lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
    )]
    InvalidName {
        /// The name.
        name: String,
    },
}

/// The records of one storage namespace (Helm's `storage.Storage` over the Secret driver).
#[derive(Clone)]
pub struct HelmStorage {
    secrets: Api<Secret>,
    namespace: String,
}

impl std::fmt::Debug for HelmStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HelmStorage")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl HelmStorage {
    /// The records in `namespace` (a HelmRelease's `storageNamespace`), through `client`.
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        HelmStorage {
            secrets: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
        }
    }

    /// The storage namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Every revision of the release `name`, oldest first (Helm's `History`); empty when there
    /// is none.
    ///
    /// # Errors
    ///
    /// The listing fails, or a record cannot be decoded (naming its Secret).
    pub async fn history(&self, name: &str) -> Result<Vec<Release>, StorageError> {
        self.query(name, None).await
    }

    /// Revision `version` of `name`; `None` when there is no such record.
    ///
    /// # Errors
    ///
    /// The request fails, or the record cannot be decoded.
    pub async fn get(&self, name: &str, version: i64) -> Result<Option<Release>, StorageError> {
        let key = release::storage_key(name, version);
        let secret = self
            .secrets
            .get_opt(&key)
            .await
            .map_err(|source| self.api_error("get", &key, source))?;
        secret.map(|secret| self.decode(&secret)).transpose()
    }

    /// The newest revision of `name`, whatever its status (Helm's `Last`); `None` when the
    /// release has no records.
    ///
    /// # Errors
    ///
    /// See [`HelmStorage::history`].
    pub async fn last(&self, name: &str) -> Result<Option<Release>, StorageError> {
        Ok(self.history(name).await?.pop())
    }

    /// The newest revision of `name` with status `deployed` (Helm's `Deployed`); `None` when
    /// none is deployed.
    ///
    /// # Errors
    ///
    /// See [`HelmStorage::history`].
    pub async fn deployed(&self, name: &str) -> Result<Option<Release>, StorageError> {
        Ok(self.query(name, Some(Status::Deployed)).await?.pop())
    }

    /// Writes a new revision (Helm's `Create`): the Secret with Helm's labels, `createdAt` now.
    ///
    /// # Errors
    ///
    /// [`StorageError::Exists`] when the revision exists; encoding or the request failing.
    pub async fn create(&self, release: &Release) -> Result<(), StorageError> {
        check_name(&release.name)?;
        let key = release::storage_key(&release.name, release.version);
        let secret = self.secret_object(&key, release, "createdAt")?;
        match self.secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => {
                tracing::debug!(secret = %key, status = %release.status(), "created a Helm release record");
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Err(StorageError::Exists {
                namespace: self.namespace.clone(),
                secret: key,
                name: release.name.clone(),
                version: release.version,
            }),
            Err(source) => Err(self.api_error("create", &key, source)),
        }
    }

    /// Rewrites an existing revision (Helm's `Update`, e.g. to mark it `superseded`): the
    /// whole Secret is replaced, its labels Helm's plus the release's custom ones, `modifiedAt`
    /// now.
    ///
    /// # Errors
    ///
    /// Encoding or the request failing (a missing record is an API error 404).
    pub async fn update(&self, release: &Release) -> Result<(), StorageError> {
        check_name(&release.name)?;
        let key = release::storage_key(&release.name, release.version);
        let secret = self.secret_object(&key, release, "modifiedAt")?;
        self.secrets
            .replace(&key, &PostParams::default(), &secret)
            .await
            .map_err(|source| self.api_error("update", &key, source))?;
        tracing::debug!(secret = %key, status = %release.status(), "updated a Helm release record");
        Ok(())
    }

    /// Deletes revision `version` of `name`, returning it; `None` when there was no such record.
    ///
    /// # Errors
    ///
    /// The request fails, or the record cannot be decoded.
    pub async fn delete(&self, name: &str, version: i64) -> Result<Option<Release>, StorageError> {
        let Some(record) = self.get(name, version).await? else {
            return Ok(None);
        };
        let key = release::storage_key(name, version);
        match self.secrets.delete(&key, &DeleteParams::default()).await {
            Ok(_) => Ok(Some(record)),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(source) => Err(self.api_error("delete", &key, source)),
        }
    }

    /// Deletes the oldest revisions of `name` until at most `max_history` remain, never the
    /// newest deployed one (Helm's `removeLeastRecent`); `max_history` 0 or less keeps every
    /// revision (Helm's and Flux's "no limit"). Returns the revisions deleted, oldest first.
    ///
    /// Helm prunes before it writes a revision, with `maxHistory - 1`, so that `maxHistory`
    /// remain after the write.
    ///
    /// # Errors
    ///
    /// Listing fails, or a deletion fails (the others are still attempted; the first error is
    /// returned).
    pub async fn prune(&self, name: &str, max_history: i64) -> Result<Vec<i64>, StorageError> {
        let Ok(max_history) = usize::try_from(max_history) else {
            return Ok(Vec::new());
        };
        if max_history == 0 {
            return Ok(Vec::new());
        }
        let history = self.history(name).await?;
        if history.len() <= max_history {
            return Ok(Vec::new());
        }
        let last_deployed = history
            .iter()
            .rev()
            .find(|r| r.status() == Status::Deployed)
            .map(|r| r.version);
        let mut doomed = Vec::new();
        for record in &history {
            if history.len() - doomed.len() == max_history {
                break;
            }
            if Some(record.version) != last_deployed {
                doomed.push(record.version);
            }
        }
        let mut first_error = None;
        let mut deleted = Vec::new();
        for version in doomed {
            match self.delete_record(name, version).await {
                Ok(()) => deleted.push(version),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        tracing::debug!(
            release = name,
            count = deleted.len(),
            "pruned Helm release records"
        );
        match first_error {
            Some(error) => Err(error),
            None => Ok(deleted),
        }
    }

    /// Deletes every revision of `name` (an uninstall without `--keep-history`); returns how
    /// many were deleted.
    ///
    /// # Errors
    ///
    /// Listing or a deletion fails.
    pub async fn uninstall_all(&self, name: &str) -> Result<usize, StorageError> {
        let history = self.history(name).await?;
        let mut deleted = 0;
        for record in &history {
            self.delete_record(name, record.version).await?;
            deleted += 1;
        }
        Ok(deleted)
    }

    async fn delete_record(&self, name: &str, version: i64) -> Result<(), StorageError> {
        let key = release::storage_key(name, version);
        match self.secrets.delete(&key, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(source) => Err(self.api_error("delete", &key, source)),
        }
    }

    /// The records of `name` (with `status`), by Helm's label selector, oldest first.
    async fn query(
        &self,
        name: &str,
        status: Option<Status>,
    ) -> Result<Vec<Release>, StorageError> {
        check_name(name)?;
        let mut selector = format!("name={name},owner={OWNER}");
        if let Some(status) = status {
            selector.push_str(",status=");
            selector.push_str(status.as_str());
        }
        let list = self
            .secrets
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|source| {
                self.api_error("list", &format!("sh.helm.release.v1.{name}.*"), source)
            })?;
        let mut records = list
            .items
            .iter()
            .map(|secret| self.decode(secret))
            .collect::<Result<Vec<_>, _>>()?;
        records.sort_by_key(|r| r.version);
        Ok(records)
    }

    fn decode(&self, secret: &Secret) -> Result<Release, StorageError> {
        let key = secret.metadata.name.clone().unwrap_or_default();
        let data = secret
            .data
            .as_ref()
            .and_then(|data| data.get(RELEASE_KEY))
            .ok_or_else(|| StorageError::MissingData {
                namespace: self.namespace.clone(),
                secret: key.clone(),
            })?;
        let mut record = release::decode(&data.0).map_err(|source| StorageError::Decode {
            namespace: self.namespace.clone(),
            secret: key,
            source,
        })?;
        record.labels = secret
            .metadata
            .labels
            .iter()
            .flatten()
            .filter(|(key, _)| !SYSTEM_LABELS.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        Ok(record)
    }

    /// The Secret Helm's `newSecretsObject` makes, with the `stamp` label (`createdAt` or
    /// `modifiedAt`) set to now in Unix seconds.
    fn secret_object(
        &self,
        key: &str,
        release: &Release,
        stamp: &str,
    ) -> Result<Secret, StorageError> {
        let text = release::encode(release).map_err(|source| StorageError::Encode {
            namespace: self.namespace.clone(),
            secret: key.to_string(),
            source,
        })?;
        let mut labels: BTreeMap<String, String> = release.labels.clone();
        labels.insert(
            stamp.to_string(),
            jiff::Timestamp::now().as_second().to_string(),
        );
        labels.insert("name".to_string(), release.name.clone());
        labels.insert("owner".to_string(), OWNER.to_string());
        labels.insert("status".to_string(), release.status().as_str().to_string());
        labels.insert("version".to_string(), release.version.to_string());
        Ok(Secret {
            metadata: ObjectMeta {
                name: Some(key.to_string()),
                namespace: Some(self.namespace.clone()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            type_: Some(release::SECRET_TYPE.to_string()),
            data: Some(BTreeMap::from([(
                RELEASE_KEY.to_string(),
                ByteString(text.into_bytes()),
            )])),
            ..Secret::default()
        })
    }

    fn api_error(&self, action: &'static str, secret: &str, source: kube::Error) -> StorageError {
        StorageError::Api {
            action,
            namespace: self.namespace.clone(),
            secret: secret.to_string(),
            source: Box::new(source),
        }
    }
}

/// Helm's release name rule (`chartutil.ValidateReleaseName`): at most 53 characters matching
/// this DNS-1123 subdomain pattern — so every name is a valid label value.
static RELEASE_NAME: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
        .expect("the release name pattern is valid")
});

fn check_name(name: &str) -> Result<(), StorageError> {
    if name.len() <= 53 && RELEASE_NAME.is_match(name) {
        Ok(())
    } else {
        Err(StorageError::InvalidName {
            name: name.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::check_name;

    #[test]
    fn release_names_follow_helms_rule() {
        for name in ["web", "web-1", "a.b", "x", &"a".repeat(53)] {
            assert!(check_name(name).is_ok(), "{name}");
        }
        for name in [
            "",
            "Web",
            "web_1",
            "-web",
            "web-",
            "a..b",
            "a.-b",
            &"a".repeat(54),
        ] {
            assert!(check_name(name).is_err(), "{name}");
        }
    }
}
