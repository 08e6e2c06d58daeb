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
    /// Remote resources are disabled.
    #[error(
        "{path}: field {field}: remote resource {url:?} refused: remote bases are not supported (no network in builds)"
    )]
    Remote {
        /// The kustomization file.
        path: PathBuf,
        /// The field.
        field: String,
        /// The URL.
        url: String,
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

impl Error {
    pub(crate) fn invalid(path: &std::path::Path, field: &str, message: impl Into<String>) -> Self {
        Error::Invalid {
            path: path.to_path_buf(),
            field: field.to_owned(),
            message: message.into(),
        }
    }
}
