//! `capstan create source helm`, `create source chart` and `create helmrelease`: the objects as
//! `flux create … --export` builds them (the same flags, defaults and checks, in Flux's order).

use std::path::PathBuf;

use anyhow::{Context, bail};
use capstan_api::helm::v2::{
    ChartReference, CrdsPolicy, CrossNamespaceObjectReference, HelmChartTemplate,
    HelmChartTemplateSpec, HelmReleaseSpec, Install, Upgrade,
};
use capstan_api::meta::{
    DependencyReference, KubeConfigReference, LocalObjectReference, ValuesReference,
};
use capstan_api::source::v1::{
    HelmChartSpec, HelmRepositorySpec, HelmRepositoryType, LocalHelmChartSourceReference,
};
use capstan_api::{HelmChart, HelmRelease, HelmRepository};
use clap::Args;
use kube::api::{ObjectMeta, Patch, PatchParams};
use serde_json::{Map, Value};

use super::required_only;

/// `create source helm`.
#[derive(Debug, Args)]
pub struct CreateHelm {
    /// Name of the HelmRepository.
    pub name: String,
    /// Helm repository address (`http(s)://`, or `oci://` for an OCI registry: `type: oci`).
    #[arg(long)]
    pub url: String,
    /// Name of an existing Secret with basic auth, TLS or docker-config credentials.
    #[arg(long)]
    pub secret_ref: Option<String>,
    /// Basic authentication username (stored in the Secret `helm-NAME`).
    #[arg(short = 'u', long)]
    pub username: Option<String>,
    /// Basic authentication password (stored in the Secret `helm-NAME`).
    #[arg(short = 'p', long)]
    pub password: Option<String>,
    /// TLS client certificate file (PEM; with `--key-file`), stored in the Secret `helm-NAME`.
    #[arg(long)]
    pub cert_file: Option<PathBuf>,
    /// TLS client key file (PEM; with `--cert-file`), stored in the Secret `helm-NAME`.
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// TLS CA file (PEM) to trust, stored in the Secret `helm-NAME`.
    #[arg(long)]
    pub ca_file: Option<PathBuf>,
    /// OCI provider for authentication (`generic`, `aws`, `azure`, `gcp`; `oci://` only).
    #[arg(long)]
    pub oci_provider: Option<String>,
    /// Pass the credentials to every domain (chart hosts other than the repository's).
    #[arg(long)]
    pub pass_credentials: bool,
    /// Timeout of the index download (Go duration).
    #[arg(long)]
    pub fetch_timeout: Option<String>,
}

/// `create source chart`.
#[derive(Debug, Args)]
pub struct CreateChart {
    /// Name of the HelmChart.
    pub name: String,
    /// Helm chart name or path.
    #[arg(long)]
    pub chart: String,
    /// Helm chart version, a semver range (charts from a HelmRepository only).
    #[arg(long)]
    pub chart_version: Option<String>,
    /// Source holding the chart, `<kind>/<name>`; kind `HelmRepository`, `GitRepository` or
    /// `Bucket`.
    #[arg(long)]
    pub source: String,
    /// What makes a new artifact: `ChartVersion` or `Revision`.
    #[arg(long, default_value = "ChartVersion")]
    pub reconcile_strategy: String,
    /// The OCI verify provider name to use for signature verification, available options are:
    /// (cosign).
    #[arg(long)]
    pub verify_provider: Option<String>,
    /// The name of a Secret to use for signature verification (cosign public keys).
    #[arg(long)]
    pub verify_secret_ref: Option<String>,
    /// Regular expression to use for the OIDC subject during signature verification.
    #[arg(long)]
    pub verify_subject: Option<String>,
    /// Regular expression to use for the OIDC issuer during signature verification.
    #[arg(long)]
    pub verify_issuer: Option<String>,
}

/// Checks a `--verify-provider` as Flux's flag does (`cosign` only).
fn verify_provider(value: &str) -> anyhow::Result<&str> {
    const SUPPORTED: [&str; 1] = ["cosign"];
    let invalid = |why: String| {
        anyhow::anyhow!("invalid argument \"{value}\" for \"--verify-provider\" flag: {why}")
    };
    if value.trim().is_empty() {
        return Err(invalid(format!(
            "no source OCI verify provider given, please specify the OCI verify provider name to \
             use for signature verification, available options are: ({})",
            SUPPORTED.join(", ")
        )));
    }
    if !SUPPORTED.contains(&value) {
        return Err(invalid(format!(
            "source OCI verify provider '{value}' is not supported, must be one of: {}",
            SUPPORTED.join(", ")
        )));
    }
    Ok(value)
}

/// `create helmrelease`.
#[derive(Debug, Args)]
pub struct CreateHelmRelease {
    /// Name of the HelmRelease.
    pub name: String,
    /// Helm release name; `[<target-namespace>-]<name>` when absent.
    #[arg(long)]
    pub release_name: Option<String>,
    /// Source holding the chart, `<kind>/<name>[.<namespace>]`; kind `HelmRepository`,
    /// `GitRepository` or `Bucket` (with `--chart`).
    #[arg(long, requires = "chart")]
    pub source: Option<String>,
    /// Helm chart name or path.
    #[arg(long)]
    pub chart: Option<String>,
    /// Helm chart version, a semver range (with `--chart` from a HelmRepository).
    #[arg(long, requires = "chart")]
    pub chart_version: Option<String>,
    /// An existing chart source, `<kind>/<name>[.<namespace>]`; kind `OCIRepository` or
    /// `HelmChart` (instead of `--chart`).
    #[arg(long)]
    pub chart_ref: Option<String>,
    /// HelmReleases that must be ready first, `[<namespace>/]<name>` (repeatable).
    #[arg(long, value_delimiter = ',')]
    pub depends_on: Vec<String>,
    /// Namespace the release is installed into; the HelmRelease's own when absent.
    #[arg(long)]
    pub target_namespace: Option<String>,
    /// Namespace of the Helm storage; the target namespace when absent.
    #[arg(long)]
    pub storage_namespace: Option<String>,
    /// Create the target namespace if it does not exist.
    #[arg(long)]
    pub create_target_namespace: bool,
    /// Service account to impersonate when reconciling.
    #[arg(long)]
    pub service_account: Option<String>,
    /// What makes a new chart artifact: `ChartVersion` or `Revision`.
    #[arg(long, default_value = "ChartVersion")]
    pub reconcile_strategy: String,
    /// How often the chart source is checked for new versions (Go duration; with `--chart`).
    #[arg(long, requires = "chart")]
    pub chart_interval: Option<String>,
    /// Local values files merged in order into `spec.values` (repeatable, or comma separated).
    #[arg(long, value_delimiter = ',')]
    pub values: Vec<PathBuf>,
    /// Values from a `<kind>/<name>` ConfigMap or Secret (key `values.yaml`; repeatable).
    #[arg(long, value_delimiter = ',')]
    pub values_from: Vec<String>,
    /// Upgrade CRDs policy: `Skip`, `Create` or `CreateReplace` (install creates them).
    #[arg(long)]
    pub crds: Option<String>,
    /// Name of the Secret holding the kubeconfig of a remote target cluster.
    #[arg(long)]
    pub kubeconfig_secret_ref: Option<String>,
}

/// The HelmRepository. The type is `oci` when the address is `oci://`, as Flux derives it.
/// `--pass-credentials` is kept only with credentials (a `--secret-ref`, or `--username` once
/// its Secret exists: see [`credentials_secret`]).
pub fn helm_repository(
    args: &CreateHelm,
    meta: ObjectMeta,
    interval: String,
) -> anyhow::Result<Value> {
    let (scheme, rest) = args
        .url
        .split_once("://")
        .ok_or_else(|| anyhow::anyhow!("url parse failed: '{}' has no scheme", args.url))?;
    if !matches!(scheme, "http" | "https" | "oci") {
        bail!("url scheme '{scheme}' not supported, can be: http, https and oci");
    }
    if rest
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default()
        .is_empty()
    {
        bail!("url host is required");
    }
    let timeout = args
        .fetch_timeout
        .as_ref()
        .map(|t| super::super::normalized_duration("fetch-timeout", t))
        .transpose()?;
    let object = HelmRepository {
        metadata: meta,
        spec: HelmRepositorySpec {
            url: args.url.clone(),
            interval: Some(interval),
            type_: (scheme == "oci").then_some(HelmRepositoryType::Oci),
            // Flux sets the provider of OCI repositories only.
            provider: match &args.oci_provider {
                Some(provider) if scheme == "oci" && !provider.is_empty() => Some(
                    serde_json::from_value(Value::from(provider.as_str())).map_err(|_| {
                        anyhow::anyhow!(
                            "invalid --oci-provider '{provider}': must be one of generic, aws, \
                             azure, gcp"
                        )
                    })?,
                ),
                _ => None,
            },
            timeout,
            secret_ref: args
                .secret_ref
                .as_ref()
                .map(|name| LocalObjectReference { name: name.clone() }),
            pass_credentials: (args.secret_ref.is_some() && args.pass_credentials).then_some(true),
            ..required_only(serde_json::json!({"url": ""}))?
        },
        status: None,
    };
    Ok(serde_json::to_value(object)?)
}

/// The Secret `helm-NAME` of `create source helm` without `--secret-ref`, as Flux's
/// `sourcesecret.GenerateHelm` makes it (its priorities included): a client certificate
/// (`--cert-file` and `--key-file`, both needed) makes a `kubernetes.io/tls` Secret with
/// `tls.crt`, `tls.key` and `ca.crt` (and no basic auth); otherwise `--username`/`--password`
/// make `username`/`password` (and `ca.crt`); a CA alone a `ca.crt` Secret. `None` when
/// nothing is given. The files are read before anything is applied.
pub fn credentials_secret_object(
    args: &CreateHelm,
    namespace: &str,
) -> anyhow::Result<Option<Value>> {
    if args.secret_ref.is_some() {
        return Ok(None);
    }
    let ca = match &args.ca_file {
        Some(path) => Some(fs_err::read_to_string(path).context("unable to read TLS CA file")?),
        None => None,
    };
    let pair = match (&args.cert_file, &args.key_file) {
        (Some(cert), Some(key)) => Some((
            fs_err::read_to_string(cert).context("failed to read cert file")?,
            fs_err::read_to_string(key).context("failed to read key file")?,
        )),
        _ => None,
    };
    let mut data = Map::new();
    let mut type_ = "Opaque";
    if let Some((cert, key)) = pair.filter(|(c, k)| !c.is_empty() || !k.is_empty()) {
        type_ = "kubernetes.io/tls";
        data.insert("tls.crt".into(), Value::from(cert));
        data.insert("tls.key".into(), Value::from(key));
    } else {
        for (key, value) in [("username", &args.username), ("password", &args.password)] {
            if let Some(value) = value.as_ref().filter(|v| !v.is_empty()) {
                data.insert(key.into(), Value::from(value.as_str()));
            }
        }
    }
    if let Some(ca) = ca.filter(|ca| !ca.is_empty()) {
        data.insert("ca.crt".into(), Value::from(ca));
    }
    if data.is_empty() {
        return Ok(None);
    }
    Ok(Some(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("helm-{}", args.name), "namespace": namespace},
        "type": type_,
        "stringData": data,
    })))
}

/// Without `--secret-ref`, as Flux: the Secret `helm-NAME` ([`credentials_secret_object`]) is
/// applied and the HelmRepository refers to it. Returns whether it did.
pub async fn credentials_secret(
    client: &kube::Client,
    args: &CreateHelm,
    namespace: &str,
    object: &mut Value,
) -> anyhow::Result<bool> {
    let Some(secret) = credentials_secret_object(args, namespace)? else {
        return Ok(false);
    };
    let name = format!("helm-{}", args.name);
    super::super::say::action("applying secret with repository credentials");
    kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), namespace)
        .patch(
            &name,
            &PatchParams::apply("capstan").force(),
            &Patch::Apply(secret),
        )
        .await
        .with_context(|| format!("applying Secret {namespace}/{name}"))?;
    object["spec"]["secretRef"] = serde_json::json!({"name": name});
    if args.pass_credentials {
        object["spec"]["passCredentials"] = Value::Bool(true);
    }
    super::super::say::success("authentication configured");
    Ok(true)
}

/// Checks a `--reconcile-strategy` as Flux does.
fn reconcile_strategy(value: &str) -> anyhow::Result<Value> {
    if !matches!(value, "Revision" | "ChartVersion") {
        bail!("'{value}' is an invalid reconcile strategy(valid: Revision, ChartVersion)");
    }
    Ok(Value::from(value))
}

/// Splits `<kind>/<name>[.<namespace>]` as Flux's `ParseObjectKindNameNamespace` does: the kind
/// only when there is exactly one `/`; the namespace after the last `.`.
fn kind_name_namespace(text: &str) -> (&str, &str, Option<&str>) {
    let (kind, name) = match text.split('/').collect::<Vec<_>>()[..] {
        [kind, name] => (kind, name),
        _ => ("", text),
    };
    match name.rsplit_once('.') {
        Some((name, namespace)) => (kind, name, Some(namespace)),
        None => (kind, name, None),
    }
}

/// The chart source kinds of `--source`, matched in any case as Flux does.
const CHART_SOURCE_KINDS: [&str; 3] = ["HelmRepository", "GitRepository", "Bucket"];

/// Parses `--source` (Flux's `HelmChartSource` flag).
fn chart_source(text: &str) -> anyhow::Result<(&'static str, String, Option<String>)> {
    if text.trim().is_empty() {
        bail!(
            "no helm chart source given, please specify source that contains the chart in the \
             format '<kind>/<name>.<namespace>', where kind must be one of: (HelmRepository, \
             GitRepository, Bucket)"
        );
    }
    let (kind, name, namespace) = kind_name_namespace(text);
    if kind.is_empty() || name.is_empty() {
        bail!("invalid helm chart source '{text}', must be in format <kind>/<name>");
    }
    let Some(kind) = CHART_SOURCE_KINDS
        .into_iter()
        .find(|k| k.eq_ignore_ascii_case(kind))
    else {
        bail!(
            "invalid argument \"{text}\" for \"--source\" flag: source kind '{kind}' is not \
             supported, must be one of: {}",
            CHART_SOURCE_KINDS.join(", ")
        );
    };
    Ok((kind, name.to_owned(), namespace.map(str::to_owned)))
}

/// Refuses `--chart-version` for a chart from a GitRepository or Bucket, whose version is the
/// one at the source's revision (source-controller ignores `spec.version` there).
fn refuse_ignored_version(kind: &str, version: Option<&str>) -> anyhow::Result<()> {
    if kind != "HelmRepository" && version.is_some_and(|v| !v.is_empty()) {
        bail!(
            "--chart-version applies to charts from a HelmRepository only: a chart from a \
             {kind} is the one at the source's revision"
        );
    }
    Ok(())
}

/// The HelmChart of `create source chart`.
pub fn helm_chart(args: &CreateChart, meta: ObjectMeta, interval: String) -> anyhow::Result<Value> {
    let (kind, name, namespace) = chart_source(&args.source)?;
    // A HelmChart's source is in its own namespace: as Flux reads `<kind>/<name>`, a dot
    // belongs to the name.
    let name = namespace.map_or_else(|| name.clone(), |ns| format!("{name}.{ns}"));
    refuse_ignored_version(kind, args.chart_version.as_deref())?;
    let strategy = reconcile_strategy(&args.reconcile_strategy)?;
    let verify = match &args.verify_provider {
        Some(provider) => {
            let mut verify = serde_json::json!({"provider": verify_provider(provider)?});
            if let Some(secret) = args.verify_secret_ref.as_ref().filter(|s| !s.is_empty()) {
                verify["secretRef"] = serde_json::json!({"name": secret});
            }
            let issuer = args.verify_issuer.clone().unwrap_or_default();
            let subject = args.verify_subject.clone().unwrap_or_default();
            if !issuer.is_empty() || !subject.is_empty() {
                verify["matchOIDCIdentity"] =
                    serde_json::json!([{"issuer": issuer, "subject": subject}]);
            }
            Some(serde_json::from_value(verify)?)
        }
        None if args
            .verify_secret_ref
            .as_ref()
            .is_some_and(|s| !s.is_empty()) =>
        {
            bail!("a verification provider must be specified when a secret is specified")
        }
        None if [&args.verify_issuer, &args.verify_subject]
            .iter()
            .any(|v| v.as_ref().is_some_and(|v| !v.is_empty())) =>
        {
            bail!("a verification provider must be specified when OIDC issuer/subject is specified")
        }
        None => None,
    };
    let object = HelmChart {
        metadata: meta,
        spec: HelmChartSpec {
            chart: args.chart.clone(),
            version: args.chart_version.clone().filter(|v| !v.is_empty()),
            source_ref: LocalHelmChartSourceReference {
                api_version: None,
                kind: serde_json::from_value(Value::from(kind))?,
                name,
            },
            interval,
            reconcile_strategy: Some(serde_json::from_value(strategy)?),
            verify,
            ..required_only(serde_json::json!({
                "chart": "", "interval": "", "sourceRef": {"kind": "HelmRepository", "name": ""}
            }))?
        },
        status: None,
    };
    Ok(serde_json::to_value(object)?)
}

/// Reads values files and merges them in order (maps deeply, anything else replaced), as
/// `flux create hr --values` does; YAML is read as `sigs.k8s.io/yaml` reads it.
fn values_files(files: &[PathBuf]) -> anyhow::Result<Map<String, Value>> {
    let mut merged = Map::new();
    for file in files {
        let text = fs_err::read_to_string(file)
            .with_context(|| format!("reading values from {} failed", file.display()))?;
        let value = capstan_helm::yaml::parse(&text).map_err(|e| {
            anyhow::anyhow!(
                "converting values to JSON from {} failed: {e}",
                file.display()
            )
        })?;
        let map = match integral_numbers(value) {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            _ => bail!(
                "unmarshaling values from {} failed: the document is not a map",
                file.display()
            ),
        };
        merge_maps(&mut merged, map);
    }
    Ok(merged)
}

/// Numbers as Go's `encoding/json` writes the `float64`s `sigs.k8s.io/yaml` reads: an
/// integral value without a fraction (`2`, not `2.0`).
fn integral_numbers(value: Value) -> Value {
    match value {
        Value::Number(n) => match n.as_f64() {
            #[allow(clippy::cast_possible_truncation)] // checked: integral and in range
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(integral_numbers).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, integral_numbers(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Flux's `transform.MergeMaps`: `overlay` over `base`, maps merged key by key.
fn merge_maps(base: &mut Map<String, Value>, overlay: Map<String, Value>) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(Value::Object(inner)), Value::Object(over)) => merge_maps(inner, over),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// `--values-from` references (`<kind>/<name>`, kind `Secret` or `ConfigMap` in any case).
fn values_from(references: &[String]) -> anyhow::Result<Vec<ValuesReference>> {
    references
        .iter()
        .map(|text| {
            let (kind, name) = match text.split('/').collect::<Vec<_>>()[..] {
                [kind, name] => (kind, name),
                _ => ("", text.as_str()),
            };
            if kind.is_empty() {
                bail!(
                    "invalid Kubernetes object reference '{text}', must be in format <kind>/<name>"
                );
            }
            let Some(kind) = ["Secret", "ConfigMap"]
                .into_iter()
                .find(|k| k.eq_ignore_ascii_case(kind))
            else {
                bail!(
                    "reference kind '{kind}' is not supported, must be one of: Secret, ConfigMap"
                );
            };
            Ok(serde_json::from_value(
                serde_json::json!({"kind": kind, "name": name}),
            )?)
        })
        .collect()
}

/// `--depends-on` as Flux's `MakeDependsOn`: `<namespace>/<name>` or `<name>`.
fn depends_on(references: &[String]) -> Vec<DependencyReference> {
    references
        .iter()
        .map(|d| match d.split('/').collect::<Vec<_>>()[..] {
            [namespace, name] => DependencyReference {
                name: name.to_owned(),
                namespace: Some(namespace.to_owned()),
                ready_expr: None,
            },
            _ => DependencyReference {
                name: d.clone(),
                ..DependencyReference::default()
            },
        })
        .collect()
}

/// The HelmRelease of `create helmrelease`, checked in Flux's order.
pub fn helm_release(
    args: &CreateHelmRelease,
    meta: ObjectMeta,
    interval: &str,
) -> anyhow::Result<Value> {
    let storage_namespace = args
        .storage_namespace
        .clone()
        .or_else(|| args.target_namespace.clone());
    let (chart, chart_ref) = match (&args.chart, &args.chart_ref) {
        (None, None) => bail!("chart or chart-ref is required"),
        (Some(_), Some(_)) => bail!("cannot use --chart in combination with --chart-ref"),
        pair => pair,
    };
    let strategy = reconcile_strategy(&args.reconcile_strategy)?;
    let mut spec: HelmReleaseSpec = required_only(serde_json::json!({"interval": interval}))?;
    spec.release_name.clone_from(&args.release_name);
    spec.target_namespace.clone_from(&args.target_namespace);
    spec.storage_namespace = storage_namespace;
    spec.depends_on = depends_on(&args.depends_on);
    if let Some(chart) = chart {
        let source = args
            .source
            .as_deref()
            .ok_or_else(|| anyhow::anyhow!("--source is required with --chart"))?;
        let (kind, name, namespace) = chart_source(source)?;
        refuse_ignored_version(kind, args.chart_version.as_deref())?;
        let interval = args
            .chart_interval
            .as_ref()
            .map(|i| super::super::normalized_duration("chart-interval", i))
            .transpose()?;
        spec.chart = Some(HelmChartTemplate {
            metadata: None,
            spec: HelmChartTemplateSpec {
                chart: chart.clone(),
                version: args.chart_version.clone().filter(|v| !v.is_empty()),
                source_ref: CrossNamespaceObjectReference {
                    api_version: None,
                    kind: serde_json::from_value(Value::from(kind))?,
                    name,
                    namespace,
                },
                interval,
                reconcile_strategy: Some(serde_json::from_value(strategy)?),
                values_files: Vec::new(),
                ignore_missing_values_files: None,
                verify: None,
            },
        });
    }
    if let Some(reference) = chart_ref {
        let (kind, name, namespace) = kind_name_namespace(reference);
        if !matches!(kind, "OCIRepository" | "HelmChart") {
            bail!(
                "chart reference kind '{kind}' is not supported, must be one of: OCIRepository, \
                 HelmChart"
            );
        }
        spec.chart_ref = Some(ChartReference {
            api_version: None,
            kind: serde_json::from_value(Value::from(kind))?,
            name: name.to_owned(),
            namespace: namespace.map(str::to_owned),
        });
    }
    if let Some(secret) = &args.kubeconfig_secret_ref {
        spec.kube_config = Some(KubeConfigReference {
            config_map_ref: None,
            secret_ref: Some(serde_json::from_value(serde_json::json!({"name": secret}))?),
        });
    }
    if args.create_target_namespace {
        spec.install
            .get_or_insert_with(Install::default)
            .create_namespace = Some(true);
    }
    spec.service_account_name.clone_from(&args.service_account);
    if let Some(policy) = &args.crds {
        let policy: CrdsPolicy =
            serde_json::from_value(Value::from(policy.as_str())).map_err(|_| {
                anyhow::anyhow!(
                    "unsupported upgrade CRDs policy '{policy}', must be one of: Skip, Create, \
                 CreateReplace"
                )
            })?;
        spec.install.get_or_insert_with(Install::default).crds = Some(CrdsPolicy::Create);
        spec.upgrade = Some(Upgrade {
            crds: Some(policy),
            ..Upgrade::default()
        });
    }
    if !args.values.is_empty() {
        spec.values = Some(values_files(&args.values)?);
    }
    spec.values_from = values_from(&args.values_from)?;
    let object = HelmRelease {
        metadata: meta,
        spec,
        status: None,
    };
    Ok(serde_json::to_value(object)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_as_flux_splits_them() {
        assert_eq!(
            kind_name_namespace("HelmRepository/podinfo.flux-system"),
            ("HelmRepository", "podinfo", Some("flux-system"))
        );
        assert_eq!(
            kind_name_namespace("OCIRepository/a.b.c"),
            ("OCIRepository", "a.b", Some("c"))
        );
        assert_eq!(kind_name_namespace("podinfo"), ("", "podinfo", None));
        assert_eq!(kind_name_namespace("a/b/c"), ("", "a/b/c", None));
        assert_eq!(
            chart_source("helmrepository/x").unwrap().0,
            "HelmRepository"
        );
        let e = chart_source("foobar/podinfo").unwrap_err().to_string();
        assert!(
            e.ends_with(
                "source kind 'foobar' is not supported, must be one of: HelmRepository, \
                 GitRepository, Bucket"
            ),
            "{e}"
        );
    }

    #[test]
    fn values_files_merge_deeply_with_go_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.yaml");
        let b = dir.path().join("b.yaml");
        std::fs::write(
            &a,
            "image:\n  tag: 1.0.0\n  repository: x\nreplicas: 2\nflag: yes\n",
        )
        .unwrap();
        std::fs::write(&b, "image:\n  tag: 1.1.0\nratio: 0.5\n").unwrap();
        let merged = values_files(&[a, b]).unwrap();
        assert_eq!(
            Value::Object(merged),
            serde_json::json!({
                "image": {"tag": "1.1.0", "repository": "x"},
                "replicas": 2, "flag": true, "ratio": 0.5,
            })
        );
    }

    /// Flux's `sourcesecret.GenerateHelm` priorities: a client certificate pair makes a TLS
    /// Secret (basic auth left out), else basic auth (with the CA), else the CA alone; one file
    /// of the pair alone is ignored; nothing given, no Secret; `--secret-ref`, no Secret.
    #[test]
    fn the_credentials_secret_follows_flux_priorities() {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in [("ca", "CA"), ("crt", "CRT"), ("key", "KEY")] {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        let file = |name: &str| Some(dir.path().join(name));
        let args = |username: Option<&str>, ca, cert, key| CreateHelm {
            name: "repo".into(),
            url: "https://charts.example".into(),
            secret_ref: None,
            username: username.map(str::to_owned),
            password: username.map(|_| "pw".to_owned()),
            cert_file: cert,
            key_file: key,
            ca_file: ca,
            oci_provider: None,
            pass_credentials: false,
            fetch_timeout: None,
        };
        let secret = |args: &CreateHelm| credentials_secret_object(args, "ns").unwrap();
        let tls = secret(&args(Some("u"), file("ca"), file("crt"), file("key"))).unwrap();
        assert_eq!(tls["type"], "kubernetes.io/tls");
        assert_eq!(
            tls["stringData"],
            serde_json::json!({"tls.crt": "CRT", "tls.key": "KEY", "ca.crt": "CA"})
        );
        assert_eq!(tls["metadata"]["name"], "helm-repo");
        let basic = secret(&args(Some("u"), file("ca"), file("crt"), None)).unwrap();
        assert_eq!(basic["type"], "Opaque");
        assert_eq!(
            basic["stringData"],
            serde_json::json!({"username": "u", "password": "pw", "ca.crt": "CA"})
        );
        let ca = secret(&args(None, file("ca"), None, None)).unwrap();
        assert_eq!(ca["stringData"], serde_json::json!({"ca.crt": "CA"}));
        assert!(secret(&args(None, None, None, file("key"))).is_none());
        let mut referenced = args(Some("u"), file("ca"), None, None);
        referenced.secret_ref = Some("mine".into());
        assert!(secret(&referenced).is_none());
        let missing = args(None, file("nonexistent"), None, None);
        let error = credentials_secret_object(&missing, "ns").unwrap_err();
        assert!(
            format!("{error:#}").starts_with("unable to read TLS CA file"),
            "{error:#}"
        );
    }
}
