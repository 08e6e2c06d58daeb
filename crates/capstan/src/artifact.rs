//! `capstan push artifact` and `capstan pull artifact`: Flux OCI artifacts from the command line,
//! compatible with `flux push artifact` / `flux pull artifact`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use capstan_source::artifact::{IgnoreFilter, Limits};
use capstan_source::oci::{
    self, Created, Credentials, LayerSelector, PullOptions, PushOptions, RegistryOptions,
};
use clap::{Args, Subcommand};

/// `capstan push …`
#[derive(Debug, Subcommand)]
pub enum PushCommand {
    /// Push a directory to a container registry as a Flux OCI artifact.
    Artifact(PushArtifactArgs),
}

/// `capstan pull …`
#[derive(Debug, Subcommand)]
pub enum PullCommand {
    /// Pull a Flux OCI artifact and extract it into a directory.
    Artifact(PullArtifactArgs),
}

/// Connection flags shared by push and pull.
#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// Use plain HTTP instead of HTTPS (implied for loopback registries: localhost, 127.x, ::1).
    #[arg(long, alias = "insecure-registry")]
    pub insecure: bool,
    /// Registry credentials as `<username>:<password>`; anonymous when absent.
    #[arg(long, value_name = "USER:PASSWORD")]
    pub creds: Option<String>,
    /// A PEM file with CA certificates to trust in addition to the system roots.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
}

impl RegistryArgs {
    /// The options for `url`: plain HTTP when `--insecure` is given or the registry is on the
    /// loopback interface (`localhost`, `127.x.x.x`, `[::1]`), as the flux CLI does.
    fn options(&self, url: &str) -> anyhow::Result<RegistryOptions> {
        let credentials = self
            .creds
            .as_deref()
            .map(str::parse::<Credentials>)
            .transpose()
            .context("--creds")?;
        let ca_certificates = match &self.ca_file {
            Some(path) => vec![fs_err::read(path)?],
            None => Vec::new(),
        };
        Ok(RegistryOptions {
            credentials,
            insecure: self.insecure || is_loopback_registry(url),
            ca_certificates,
            ..RegistryOptions::default()
        })
    }
}

/// `capstan push artifact oci://HOST/REPOSITORY:TAG --path DIR --source URL --revision REV`
#[derive(Debug, Args)]
pub struct PushArtifactArgs {
    /// Where to push: `oci://<registry>/<repository>:<tag>`.
    #[arg(value_name = "URL")]
    pub url: String,
    /// The directory to package.
    #[arg(long, value_name = "DIR")]
    pub path: PathBuf,
    /// The source address, e.g. the Git URL (annotation `org.opencontainers.image.source`).
    #[arg(long)]
    pub source: String,
    /// The source revision, e.g. `main@sha1:<sha>` (annotation `org.opencontainers.image.revision`).
    #[arg(long)]
    pub revision: String,
    /// Set the created time to 1970-01-01T00:00:00Z so the same content always gives the same digest.
    #[arg(long)]
    pub reproducible: bool,
    /// Paths to leave out, in .gitignore syntax (comma-separated or repeated).
    #[arg(long, value_delimiter = ',', value_name = "PATTERN")]
    pub ignore_paths: Vec<String>,
    /// Extra manifest annotations as `key=value` (repeatable).
    #[arg(long = "annotations", short = 'a', value_name = "KEY=VALUE")]
    pub annotations: Vec<String>,
    /// Sign the pushed artifact with this cosign private key (unencrypted PEM, PKCS#8 or SEC1,
    /// ECDSA P-256); the signature goes to the tag `sha256-<hex>.sig`, as `cosign sign` does.
    #[arg(long, value_name = "FILE")]
    pub sign_key: Option<PathBuf>,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// `capstan pull artifact oci://HOST/REPOSITORY:TAG --output DIR`
#[derive(Debug, Args)]
pub struct PullArtifactArgs {
    /// What to pull: `oci://<registry>/<repository>:<tag>` or `…@sha256:<digest>`.
    #[arg(value_name = "URL")]
    pub url: String,
    /// The directory to extract into; it must not exist or be empty.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: PathBuf,
    /// Use the first layer with this media type instead of the first layer.
    #[arg(long, value_name = "MEDIA_TYPE")]
    pub layer_media_type: Option<String>,
    /// Refuse the artifact unless a cosign signature verifies with this public key (PEM;
    /// repeatable: any key verifying is enough). The verified digest is what gets pulled.
    #[arg(long, value_name = "FILE")]
    pub verify_key: Vec<PathBuf>,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Runs `capstan push …`.
pub async fn run_push(command: PushCommand) -> anyhow::Result<ExitCode> {
    match command {
        PushCommand::Artifact(args) => push(args).await,
    }
}

/// Runs `capstan pull …`.
pub async fn run_pull(command: PullCommand) -> anyhow::Result<ExitCode> {
    match command {
        PullCommand::Artifact(args) => pull(args).await,
    }
}

/// Whether the registry of `oci://HOST[:PORT]/...` is on the loopback interface.
fn is_loopback_registry(url: &str) -> bool {
    let rest = url.strip_prefix("oci://").unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or_default();
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Refuses an artifact address without the `oci://` scheme, before any network call: without
/// it a typo such as `localhost:5000/app` or `ghcr.io/app` could resolve to Docker Hub.
fn require_oci_scheme(url: &str) -> anyhow::Result<()> {
    if url.starts_with("oci://") {
        Ok(())
    } else {
        bail!(
            "invalid URL '{url}': an artifact address must start with oci://, e.g. oci://ghcr.io/org/app:tag"
        )
    }
}

/// Packs `--path` and pushes it; prints the artifact digest on stdout.
pub async fn push(args: PushArtifactArgs) -> anyhow::Result<ExitCode> {
    require_oci_scheme(&args.url)?;
    if !args.path.is_dir() {
        bail!("--path {} is not a directory", args.path.display());
    }
    let mut annotations = BTreeMap::new();
    for pair in &args.annotations {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("--annotations {pair:?}: expected key=value");
        };
        annotations.insert(key.to_owned(), value.to_owned());
    }
    let ignore = if args.ignore_paths.is_empty() {
        None
    } else {
        Some(IgnoreFilter::from_patterns(
            &args.ignore_paths.join("\n"),
            "--ignore-paths",
        )?)
    };
    let options = PushOptions {
        source: args.source,
        revision: args.revision,
        created: if args.reproducible {
            Created::Reproducible
        } else {
            Created::Now
        },
        annotations,
        ignore,
    };
    let registry = args.registry.options(&args.url)?;
    let key = match &args.sign_key {
        Some(path) => {
            let pem = fs_err::read(path)?;
            Some(oci::SigningKey::from_pem(
                &path.display().to_string(),
                &pem,
            )?)
        }
        None => None,
    };
    eprintln!("pushing {} to {}", args.path.display(), args.url);
    let pushed = oci::push(&args.path, &args.url, &options, &registry)
        .await
        .with_context(|| format!("pushing {}", args.url))
        .map_err(with_hint)?;
    eprintln!("pushed {}", pushed.reference);
    if let Some(key) = key {
        let signed = oci::sign(&pushed.reference, &key, &registry)
            .await
            .with_context(|| format!("signing {}", pushed.reference))?;
        eprintln!("signed {}", signed.signature);
    }
    outln!("{}", pushed.digest);
    Ok(ExitCode::SUCCESS)
}

/// Pulls `URL` and extracts it into `--output`; prints the artifact revision on stdout.
pub async fn pull(args: PullArtifactArgs) -> anyhow::Result<ExitCode> {
    require_oci_scheme(&args.url)?;
    let registry = args.registry.options(&args.url)?;
    let options = PullOptions {
        layer_selector: LayerSelector {
            media_type: args.layer_media_type,
            ..LayerSelector::default()
        },
        limits: Limits::default(),
    };
    let mut url = args.url.clone();
    if !args.verify_key.is_empty() {
        let keys = args
            .verify_key
            .iter()
            .map(|path| {
                let pem = fs_err::read(path)?;
                Ok(oci::PublicKey::from_pem(&path.display().to_string(), &pem)?)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let verified = oci::verify(&args.url, &keys, &registry)
            .await
            .with_context(|| format!("verifying the signature of {}", args.url))?;
        eprintln!("verified {} with {}", verified.digest, verified.key);
        // Pull exactly what was verified, even if the tag moves meanwhile.
        let repository = args.url.split('@').next().unwrap_or(&args.url);
        let repository = match repository.rfind(':') {
            Some(at) if at > repository.rfind('/').unwrap_or(0) => &repository[..at],
            _ => repository,
        };
        url = format!("{repository}@{}", verified.digest);
    }
    eprintln!("pulling {url} into {}", args.output.display());
    let pulled = oci::pull(&url, &args.output, &options, &registry)
        .await
        .with_context(|| format!("pulling {}", args.url))
        .map_err(with_hint)?;
    for key in [oci::SOURCE_ANNOTATION, oci::REVISION_ANNOTATION] {
        if let Some(value) = pulled.annotations.get(key).filter(|v| !v.is_empty()) {
            eprintln!("{key}: {value}");
        }
    }
    outln!("{}", pulled.revision);
    Ok(ExitCode::SUCCESS)
}

/// Adds a `hint:` line for the errors users can fix with a flag.
fn with_hint(error: anyhow::Error) -> anyhow::Error {
    let hint = error.chain().find_map(|cause| match cause.downcast_ref::<capstan_source::Error>() {
        Some(capstan_source::Error::Registry { .. }) => Some(
            "check the address and credentials (--creds); use --insecure for a plain-HTTP registry",
        ),
        Some(capstan_source::Error::TargetNotEmpty { .. }) => Some("choose an empty or new --output directory"),
        _ => None,
    });
    match hint {
        // `main` prints errors with `{:#}`; the hint goes on its own line at the end.
        Some(hint) => anyhow::anyhow!("{error:#}\nhint: {hint}"),
        None => error,
    }
}

#[cfg(test)]
mod tests {
    use super::is_loopback_registry;

    #[test]
    fn loopback_registries_are_recognised_by_host() {
        for url in [
            "oci://localhost:5000/app:v1",
            "oci://LOCALHOST/app",
            "oci://127.0.0.1:5000/app",
            "oci://127.1.2.3/app",
            "oci://[::1]:5000/app",
            "oci://user@localhost:5000/app",
        ] {
            assert!(is_loopback_registry(url), "{url}");
        }
        for url in [
            "oci://ghcr.io/org/app",
            "oci://10.0.0.1:5000/app",
            "oci://localhost.example.com/app",
            "oci://127.0.0.1.nip.io/app",
            "oci://[::2]:5000/app",
            "oci://registry/localhost/app",
        ] {
            assert!(!is_loopback_registry(url), "{url}");
        }
    }
}
