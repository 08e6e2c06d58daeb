//! `capstan create source git|oci|bucket|helm|chart`, `capstan create kustomization`,
//! `capstan create helmrelease` and `capstan create receiver`: build the object from Capstan's
//! typed API structs, then print it (`--export`) or server-side apply it and wait until it is
//! Ready.

mod helm;
mod receiver;

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{Context, bail};
use capstan_api::kustomize::v1::{CrossNamespaceSourceReference, KustomizationSpec, SourceKind};
use capstan_api::meta::{DependencyReference, LocalObjectReference};
use capstan_api::source::v1::{
    BucketSpec, CloudProvider, GitRepositoryRef, GitRepositorySpec, OCIRepositoryRef,
    OCIRepositorySpec,
};
use capstan_api::{Bucket, GitRepository, Kustomization, OCIRepository};
use clap::{Args, Subcommand, ValueEnum};
use kube::api::{DynamicObject, ObjectMeta, PostParams};
use serde_json::Value;

use super::{
    BUCKET, ClusterArgs, GIT, HELM_CHART, HELM_RELEASE, HELM_REPOSITORY, KUSTOMIZATION, Kind, OCI,
    RECEIVER, say,
};

/// `capstan create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Print the object as YAML instead of applying it.
    #[arg(long, global = true)]
    pub export: bool,
    /// How often the object is reconciled (Go duration).
    #[arg(long, global = true, default_value = "1m")]
    pub interval: String,
    /// How long to wait for the object to become Ready.
    #[arg(long, global = true, default_value = "5m")]
    pub timeout: String,
    /// Labels to set, `key=value` (repeatable, or comma separated).
    #[arg(long, global = true, value_delimiter = ',')]
    pub label: Vec<String>,
    #[command(subcommand)]
    pub command: CreateCommand,
}

/// What to create.
#[derive(Debug, Subcommand)]
pub enum CreateCommand {
    /// A source.
    #[command(subcommand)]
    Source(CreateSource),
    /// A Kustomization.
    #[command(alias = "ks")]
    Kustomization(CreateKustomization),
    /// A HelmRelease.
    #[command(alias = "hr")]
    Helmrelease(Box<helm::CreateHelmRelease>),
    /// A Receiver (a webhook that reconciles objects now).
    Receiver(receiver::CreateReceiver),
}

/// The source kinds.
#[derive(Debug, Subcommand)]
pub enum CreateSource {
    /// A GitRepository.
    Git(CreateGit),
    /// An OCIRepository.
    Oci(CreateOci),
    /// A Bucket.
    Bucket(CreateBucket),
    /// A HelmRepository (`type: oci` for an `oci://` address).
    Helm(helm::CreateHelm),
    /// A HelmChart.
    Chart(helm::CreateChart),
}

/// `create source git`.
#[derive(Debug, Args)]
pub struct CreateGit {
    /// Name of the GitRepository.
    pub name: String,
    /// Git address (`http(s)://` or `ssh://`).
    #[arg(long)]
    pub url: String,
    /// Git branch.
    #[arg(long)]
    pub branch: Option<String>,
    /// Git tag (not with `--branch`, `--tag-semver` or `--commit`, which would override it or
    /// be ignored).
    #[arg(long, conflicts_with_all = ["branch", "tag_semver", "commit"])]
    pub tag: Option<String>,
    /// Git tag semver range (not with `--branch` or `--commit`).
    #[arg(long, conflicts_with_all = ["branch", "commit"])]
    pub tag_semver: Option<String>,
    /// Git commit SHA.
    #[arg(long)]
    pub commit: Option<String>,
    /// Name of the Secret holding the Git credentials.
    #[arg(long)]
    pub secret_ref: Option<String>,
}

/// `create source oci`.
#[derive(Debug, Args)]
pub struct CreateOci {
    /// Name of the OCIRepository.
    pub name: String,
    /// OCI repository address (`oci://`).
    #[arg(long)]
    pub url: String,
    /// Artifact tag (one of `--tag`, `--tag-semver`, `--digest`).
    #[arg(long, conflicts_with_all = ["tag_semver", "digest"])]
    pub tag: Option<String>,
    /// Artifact tag semver range.
    #[arg(long, conflicts_with = "digest")]
    pub tag_semver: Option<String>,
    /// Artifact digest.
    #[arg(long)]
    pub digest: Option<String>,
    /// Name of the Secret holding the registry credentials.
    #[arg(long)]
    pub secret_ref: Option<String>,
    /// Allow plain HTTP to the registry.
    #[arg(long)]
    pub insecure: bool,
}

/// The Bucket providers the CLI offers.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BucketProvider {
    /// S3-compatible.
    Generic,
    /// Azure Blob Storage.
    Azure,
}

/// `create source bucket`.
#[derive(Debug, Args)]
pub struct CreateBucket {
    /// Name of the Bucket.
    pub name: String,
    /// Name of the bucket.
    #[arg(long)]
    pub bucket_name: String,
    /// Bucket endpoint address.
    #[arg(long)]
    pub endpoint: String,
    /// Storage provider.
    #[arg(long, value_enum, default_value_t = BucketProvider::Generic)]
    pub provider: BucketProvider,
    /// Bucket region.
    #[arg(long)]
    pub region: Option<String>,
    /// Allow plain HTTP to the endpoint.
    #[arg(long)]
    pub insecure: bool,
    /// Name of the Secret holding the credentials.
    #[arg(long)]
    pub secret_ref: Option<String>,
}

/// `create kustomization`.
#[derive(Debug, Args)]
pub struct CreateKustomization {
    /// Name of the Kustomization.
    pub name: String,
    /// Source reference, `[<kind>/]<name>[.<namespace>]`; kind `GitRepository` (default),
    /// `OCIRepository` or `Bucket`.
    #[arg(long)]
    pub source: String,
    /// Path to the directory with the manifests in the source.
    #[arg(long, default_value = "./")]
    pub path: String,
    /// Delete objects that leave the build.
    #[arg(long)]
    pub prune: bool,
    /// Wait for every applied object to become healthy (`spec.wait`).
    #[arg(long)]
    pub wait: bool,
    /// Timeout of the health checks and apply (`spec.timeout`).
    #[arg(long)]
    pub health_check_timeout: Option<String>,
    /// Namespace every object is moved into.
    #[arg(long)]
    pub target_namespace: Option<String>,
    /// Kustomizations this one depends on, `[<namespace>/]<name>` (repeatable).
    #[arg(long, value_delimiter = ',')]
    pub depends_on: Vec<String>,
    /// Service account to impersonate when applying.
    #[arg(long)]
    pub service_account: Option<String>,
    /// How soon a failed reconcile is retried (Go duration).
    #[arg(long)]
    pub retry_interval: Option<String>,
}

/// A spec holding only its required fields (given as JSON, with Flux's field names), for the
/// `..` of a struct literal: the API types have no `Default`.
fn required_only<T: serde::de::DeserializeOwned>(fields: Value) -> anyhow::Result<T> {
    Ok(serde_json::from_value(fields)?)
}

fn secret_ref(name: Option<&String>) -> Option<LocalObjectReference> {
    name.map(|name| LocalObjectReference { name: name.clone() })
}

fn metadata(name: &str, namespace: &str, labels: &[String]) -> anyhow::Result<ObjectMeta> {
    let mut parsed = BTreeMap::new();
    for label in labels {
        let Some((key, value)) = label.split_once('=') else {
            bail!("invalid --label '{label}': expected key=value");
        };
        parsed.insert(key.to_owned(), value.to_owned());
    }
    Ok(ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: (!parsed.is_empty()).then_some(parsed),
        ..ObjectMeta::default()
    })
}

fn git(args: &CreateGit, meta: ObjectMeta, interval: String) -> anyhow::Result<Value> {
    if !["http://", "https://", "ssh://"]
        .iter()
        .any(|s| args.url.starts_with(s))
    {
        bail!(
            "invalid --url '{}': the scheme must be http, https or ssh",
            args.url
        );
    }
    let reference = GitRepositoryRef {
        branch: args.branch.clone(),
        tag: args.tag.clone(),
        semver: args.tag_semver.clone(),
        commit: args.commit.clone(),
        name: None,
    };
    if reference == GitRepositoryRef::default() {
        bail!("a Git ref is required, use one of: --branch, --tag, --tag-semver or --commit");
    }
    let object = GitRepository {
        metadata: meta,
        spec: GitRepositorySpec {
            url: args.url.clone(),
            secret_ref: secret_ref(args.secret_ref.as_ref()),
            interval,
            reference: Some(reference),
            ..required_only(serde_json::json!({"url": "", "interval": ""}))?
        },
        status: None,
    };
    Ok(serde_json::to_value(object)?)
}

fn oci(args: &CreateOci, meta: ObjectMeta, interval: String) -> anyhow::Result<Value> {
    if !args.url.starts_with("oci://") {
        bail!("invalid --url '{}': the scheme must be oci://", args.url);
    }
    let reference = OCIRepositoryRef {
        tag: args.tag.clone(),
        semver: args.tag_semver.clone(),
        digest: args.digest.clone(),
        semver_filter: None,
    };
    if reference == OCIRepositoryRef::default() {
        bail!("an artifact ref is required, use one of: --tag, --tag-semver or --digest");
    }
    let object = OCIRepository {
        metadata: meta,
        spec: OCIRepositorySpec {
            url: args.url.clone(),
            reference: Some(reference),
            secret_ref: secret_ref(args.secret_ref.as_ref()),
            interval,
            insecure: args.insecure.then_some(true),
            ..required_only(serde_json::json!({"url": "", "interval": ""}))?
        },
        status: None,
    };
    Ok(serde_json::to_value(object)?)
}

fn bucket(args: &CreateBucket, meta: ObjectMeta, interval: String) -> anyhow::Result<Value> {
    let provider = match args.provider {
        BucketProvider::Generic => CloudProvider::Generic,
        BucketProvider::Azure => CloudProvider::Azure,
    };
    let object = Bucket {
        metadata: meta,
        spec: BucketSpec {
            provider: Some(provider),
            bucket_name: args.bucket_name.clone(),
            endpoint: args.endpoint.clone(),
            insecure: args.insecure.then_some(true),
            region: args.region.clone(),
            secret_ref: secret_ref(args.secret_ref.as_ref()),
            interval,
            ..required_only(serde_json::json!({"bucketName": "", "endpoint": "", "interval": ""}))?
        },
        status: None,
    };
    Ok(serde_json::to_value(object)?)
}

/// Parses `[<kind>/]<name>[.<namespace>]`.
fn source_reference(text: &str) -> anyhow::Result<CrossNamespaceSourceReference> {
    let (kind, rest) = match text.split_once('/') {
        Some((kind, rest)) => (kind, rest),
        None => ("GitRepository", text),
    };
    let kind = match Kind::by_name(kind) {
        Some(k) if [&GIT, &OCI, &BUCKET].contains(&k) => {
            serde_json::from_value::<SourceKind>(Value::from(k.type_name))?
        }
        _ => bail!(
            "invalid --source '{text}': the kind must be GitRepository, OCIRepository or Bucket"
        ),
    };
    let (name, namespace) = match rest.split_once('.') {
        Some((name, namespace)) => (name, Some(namespace.to_owned())),
        None => (rest, None),
    };
    if name.is_empty() {
        bail!("invalid --source '{text}': the name is empty");
    }
    Ok(CrossNamespaceSourceReference {
        api_version: None,
        kind,
        name: name.to_owned(),
        namespace,
    })
}

/// `--path` made relative to the source root as Flux's `safeRelativePath` flag does: `\\` and
/// `/` separate, `.` and empty parts go, `..` climbs but never above the root (`../x` is
/// `./x`), a leading `/` is the root (`/apps` is `./apps`); the result starts with `./`.
fn safe_relative_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.trim().split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    format!("./{}", parts.join("/"))
}

fn kustomization(
    args: &CreateKustomization,
    meta: ObjectMeta,
    interval: String,
) -> anyhow::Result<Value> {
    let depends_on = args
        .depends_on
        .iter()
        .map(|d| match d.split_once('/') {
            Some((namespace, name)) => DependencyReference {
                name: name.to_owned(),
                namespace: Some(namespace.to_owned()),
                ready_expr: None,
            },
            None => DependencyReference {
                name: d.clone(),
                namespace: None,
                ready_expr: None,
            },
        })
        .collect();
    let optional_duration = |flag: &str, value: Option<&String>| {
        value
            .map(|v| super::normalized_duration(flag, v))
            .transpose()
    };
    let path = safe_relative_path(&args.path);
    let object = Kustomization {
        metadata: meta,
        spec: KustomizationSpec {
            depends_on,
            interval,
            retry_interval: optional_duration("retry-interval", args.retry_interval.as_ref())?,
            path: Some(path),
            prune: args.prune,
            service_account_name: args.service_account.clone(),
            source_ref: source_reference(&args.source)?,
            target_namespace: args.target_namespace.clone(),
            timeout: optional_duration("health-check-timeout", args.health_check_timeout.as_ref())?,
            wait: args.wait.then_some(true),
            ..required_only(serde_json::json!({
                "interval": "", "prune": false,
                "sourceRef": {"kind": "GitRepository", "name": ""}
            }))?
        },
        status: None,
    };
    Ok(serde_json::to_value(object)?)
}

/// Creates the object, or, when it exists, replaces its `spec` and labels as Flux's upsert does
/// (fields the new spec leaves out are dropped; annotations and status stay) and updates it with
/// the `resourceVersion` read, so a concurrent change fails instead of being overwritten.
/// Returns whether the object existed.
async fn upsert(
    client: &kube::Client,
    kind: &Kind,
    namespace: &str,
    name: &str,
    object: Value,
) -> anyhow::Result<bool> {
    let api = kind.api(client, Some(namespace));
    let context = || format!("applying {} {namespace}/{name}", kind.type_name);
    let desired: DynamicObject = serde_json::from_value(object)?;
    let Some(mut existing) = api.get_opt(name).await.with_context(context)? else {
        api.create(&PostParams::default(), &desired)
            .await
            .with_context(context)?;
        return Ok(false);
    };
    existing.metadata.labels = desired.metadata.labels;
    existing.data["spec"] = desired.data["spec"].clone();
    api.replace(name, &PostParams::default(), &existing)
        .await
        .with_context(context)?;
    Ok(true)
}

/// Builds the object; prints it with `--export`, otherwise applies it and waits until Ready.
pub async fn run(args: CreateArgs) -> anyhow::Result<ExitCode> {
    let interval = super::normalized_duration("interval", &args.interval)?;
    let timeout = super::duration_flag("timeout", &args.timeout)?;
    let namespace = &args.cluster.namespace;
    let (kind, name, object): (&Kind, &str, Value) = match &args.command {
        CreateCommand::Source(CreateSource::Git(a)) => (
            &GIT,
            &a.name,
            git(a, metadata(&a.name, namespace, &args.label)?, interval)?,
        ),
        CreateCommand::Source(CreateSource::Oci(a)) => (
            &OCI,
            &a.name,
            oci(a, metadata(&a.name, namespace, &args.label)?, interval)?,
        ),
        CreateCommand::Source(CreateSource::Bucket(a)) => (
            &BUCKET,
            &a.name,
            bucket(a, metadata(&a.name, namespace, &args.label)?, interval)?,
        ),
        CreateCommand::Kustomization(a) => (
            &KUSTOMIZATION,
            &a.name,
            kustomization(a, metadata(&a.name, namespace, &args.label)?, interval)?,
        ),
        CreateCommand::Source(CreateSource::Helm(a)) => (
            &HELM_REPOSITORY,
            &a.name,
            helm::helm_repository(a, metadata(&a.name, namespace, &args.label)?, interval)?,
        ),
        CreateCommand::Source(CreateSource::Chart(a)) => (
            &HELM_CHART,
            &a.name,
            helm::helm_chart(a, metadata(&a.name, namespace, &args.label)?, interval)?,
        ),
        CreateCommand::Helmrelease(a) => (
            &HELM_RELEASE,
            &a.name,
            helm::helm_release(a, metadata(&a.name, namespace, &args.label)?, &interval)?,
        ),
        CreateCommand::Receiver(a) => (
            &RECEIVER,
            &a.name,
            receiver::receiver(a, metadata(&a.name, namespace, &args.label)?)?,
        ),
    };
    if args.export {
        out!("{}", super::yaml_documents(&[object]));
        return Ok(ExitCode::SUCCESS);
    }
    say::generate(&format!("generating {}", kind.display));
    let client = args.cluster.client().await?;
    let mut object = object;
    if let CreateCommand::Source(CreateSource::Helm(a)) = &args.command {
        helm::credentials_secret(&client, a, namespace, &mut object).await?;
    }
    say::action(&format!("applying {}", kind.display));
    let existed = upsert(&client, kind, namespace, name, object).await?;
    // Flux names Helm sources "source" here ("✔ source created").
    let created = if kind == &HELM_REPOSITORY || kind == &HELM_CHART {
        "source"
    } else {
        kind.display
    };
    say::success(&format!(
        "{created} {}",
        if existed { "updated" } else { "created" }
    ));
    say::waiting(&format!("waiting for {} reconciliation", kind.display));
    match super::wait_ready(&client, kind, namespace, name, None, timeout).await {
        Ok(ready) => {
            if kind.is_source {
                say::success(&format!("{} reconciliation completed", kind.display));
            } else {
                say::success(&format!("{} {name} is ready", kind.display));
            }
            if kind == &RECEIVER {
                let path = ready["status"]["webhookPath"].as_str().unwrap_or_default();
                say::success(&format!("generated webhook URL {path}"));
            } else if kind.is_static(&ready) {
                // An OCI HelmRepository has no artifact.
            } else if kind == &HELM_REPOSITORY || kind == &HELM_CHART {
                say::success(&format!("fetched revision: {}", kind.revision(&ready)));
            } else {
                say::success(&kind.revision_message(&ready));
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            say::failure(&format!("{e:#}"));
            Ok(ExitCode::FAILURE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_references_default_to_git_and_take_a_namespace() {
        let r = source_reference("podinfo").unwrap();
        assert_eq!(r.kind, SourceKind::GitRepository);
        assert_eq!((r.name.as_str(), r.namespace), ("podinfo", None));
        let r = source_reference("OCIRepository/app.apps").unwrap();
        assert_eq!(r.kind, SourceKind::OciRepository);
        assert_eq!(r.namespace.as_deref(), Some("apps"));
        assert!(source_reference("Kustomization/x").is_err());
    }

    #[test]
    fn paths_are_made_safe_and_relative_as_flux_does() {
        for (given, stored) in [
            ("", "./"),
            ("./", "./"),
            (".", "./"),
            ("/abs", "./abs"),
            ("/abs/dir/", "./abs/dir"),
            ("apps", "./apps"),
            ("./clusters//prod/", "./clusters/prod"),
            ("a/../b", "./b"),
            ("../../etc", "./etc"),
            ("a/../../b/./c", "./b/c"),
            (" .\\win\\path ", "./win/path"),
        ] {
            assert_eq!(safe_relative_path(given), stored, "{given}");
        }
    }
}
