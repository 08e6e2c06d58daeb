//! Errors of a kustomize build.

use std::path::PathBuf;

/// Why a build failed. Messages name the file and, where it helps, the field.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file is not valid YAML.
    #[error("{path}: malformed yaml: {message}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// A kustomization file has an unknown or ill-typed field.
    #[error("{path}: invalid kustomization: {message}")]
    Kustomization {
        /// The kustomization file.
        path: PathBuf,
        /// What is wrong, naming the field.
        message: String,
    },
    /// A directory holds no kustomization file.
    #[error("{path}: no kustomization.yaml, kustomization.yml or Kustomization in directory")]
    NoKustomization {
        /// The directory.
        path: PathBuf,
    },
    /// A path is refused by the load restrictor or leaves the root through a symlink.
    #[error(
        "{path}: security: file is not in or below the kustomization root {root} (field {field}); hint: use --load-restrictor LoadRestrictionsNone if you trust it"
    )]
    Restricted {
        /// The refused path.
        path: PathBuf,
        /// The root it must stay in.
        root: PathBuf,
        /// The field that named it.
        field: String,
    },
    /// A path leaves the outer boundary of the build ([`crate::BuildOptions::boundary`]),
    /// lexically or through a symbolic link. The message is the same whether or not the path
    /// exists, and names only what the kustomization wrote.
    #[error(
        "{file}: field {field}: '{entry}' is outside the root of the source: refused (files are read only from the source artifact)"
    )]
    OutsideBoundary {
        /// The kustomization file naming the path.
        file: PathBuf,
        /// The field.
        field: String,
        /// The entry as written.
        entry: String,
    },
    /// Remote resources are disabled (no [`RemoteLoader`](crate::RemoteLoader) given), or
    /// a remote URL is named where only local files may be (patches, generators, …).
    #[error("{path}: field {field}: remote base {url:?} refused: remote bases are disabled")]
    Remote {
        /// The kustomization file.
        path: PathBuf,
        /// The field.
        field: String,
        /// The URL.
        url: String,
    },
    /// A remote base could not be fetched or is not a kustomization.
    #[error("{path}: field {field}: remote base {url:?}: {message}")]
    RemoteFetch {
        /// The kustomization file.
        path: PathBuf,
        /// The field.
        field: String,
        /// The entry as written.
        url: String,
        /// What went wrong (from the loader; holds no secret).
        message: String,
    },
    /// A kustomization refers back to one already being built.
    #[error("cycle detected: {path} is already being built (via {chain})")]
    Cycle {
        /// The directory seen twice.
        path: PathBuf,
        /// The chain of directories.
        chain: String,
    },
    /// A feature kustomize has that this engine does not.
    #[error("{path}: field {field}: not supported yet{hint}")]
    Unsupported {
        /// The kustomization file.
        path: PathBuf,
        /// The field.
        field: String,
        /// An optional hint, starting with a separator.
        hint: String,
    },
    /// A transformer, generator, patch or configuration of the kustomization failed.
    #[error("{path}: {field}: {source}")]
    Transform {
        /// The kustomization file (or resource file).
        path: PathBuf,
        /// The field concerned.
        field: String,
        /// What failed, with its cause.
        #[source]
        source: Box<TransformError>,
    },
    /// Anything else wrong with the input, with its context.
    #[error("{path}: {field}: {message}")]
    Invalid {
        /// The kustomization file (or resource file).
        path: PathBuf,
        /// The field or object concerned.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// Why a transformer, generator, patch or configuration failed, before the build names the
/// file and field it comes from ([`Error::Transform`]). Where another error is the cause it is
/// the `source`; the message shows it too.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransformError {
    /// What is wrong with the input, in words: there is no underlying error.
    #[error("{0}")]
    Invalid(String),
    /// A file a transformer configuration names cannot be used.
    #[error(transparent)]
    File(Box<Error>),
    /// A value does not decode as its type (the field is named around it).
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    /// A failure within one entry of a field (a file, a definition).
    #[error("{context}: {source}")]
    In {
        /// The entry.
        context: String,
        /// What failed.
        #[source]
        source: Box<TransformError>,
    },
    /// A value does not decode as its field's type.
    #[error("{context}: {source}")]
    Decode {
        /// What was decoded.
        context: String,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A selector's pattern is not a regular expression.
    #[error("{context}: {source}")]
    Regex {
        /// The pattern.
        context: String,
        /// The regex compiler's error.
        #[source]
        source: regex::Error,
    },
    /// A patch is not YAML.
    #[error("{context}: {source}")]
    Yaml {
        /// What was parsed.
        context: String,
        /// The parser's error.
        #[source]
        source: crate::YamlError,
    },
    /// A patch does not apply to an object.
    #[error("{context}: {source}")]
    Patch {
        /// The patch and the object.
        context: String,
        /// The patch engine's error.
        #[source]
        source: capstan_patch::PatchError,
    },
    /// A schema of an `openapi:` document does not compile.
    #[error("{context}: {source}")]
    Schema {
        /// The definition.
        context: String,
        /// The schema compiler's error.
        #[source]
        source: capstan_schema::SchemaError,
    },
}

impl TransformError {
    /// This failure within `context` (an entry of a field).
    pub(crate) fn within(self, context: impl std::fmt::Display) -> Self {
        TransformError::In {
            context: context.to_string(),
            source: Box::new(self),
        }
    }

    /// A value of `context` that does not decode.
    pub(crate) fn decode(context: impl std::fmt::Display, source: serde_json::Error) -> Self {
        TransformError::Decode {
            context: context.to_string(),
            source,
        }
    }
}

impl From<String> for TransformError {
    fn from(message: String) -> Self {
        TransformError::Invalid(message)
    }
}

impl From<&str> for TransformError {
    fn from(message: &str) -> Self {
        TransformError::Invalid(message.to_owned())
    }
}

impl Error {
    /// A transformer failure of `field` of the kustomization file `path`.
    pub(crate) fn transform(
        path: &std::path::Path,
        field: &str,
        source: impl Into<TransformError>,
    ) -> Self {
        Error::Transform {
            path: path.to_path_buf(),
            field: field.to_owned(),
            source: Box::new(source.into()),
        }
    }

    pub(crate) fn invalid(path: &std::path::Path, field: &str, message: impl Into<String>) -> Self {
        Error::Invalid {
            path: path.to_path_buf(),
            field: field.to_owned(),
            message: message.into(),
        }
    }
}
