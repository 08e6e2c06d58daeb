//! The example fleet of `capstan dev`: a Git repository (a base and dev/prod overlays, an app
//! config releasing a Helm chart, and the Kustomizations of a local cluster) served over smart
//! HTTP on this machine, an OCI registry holding that chart, and the GitRepository +
//! Kustomization that make the control plane reconcile it.
//!
//! The repository is created once, in `<state dir>/git/fleet.git`, from the files in
//! `crates/capstan/fleet/`; later runs keep it, with whatever the user pushed. The chart
//! (`charts/hello`) is published to the registry at every start, as CI would publish it, at the
//! version its Chart.yaml gives (versions the user pushed stay). The objects in the cluster are
//! (re)applied at every start, so a fresh control plane converges from Git alone.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use capstan_api::{FluxKind, GitRepository, HelmRelease, Kustomization, OCIRepository};
use capstan_source::git::server::{self, ServerOptions};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The repository's files, as committed when it is created.
const FILES: [(&str, &str); 21] = [
    ("README.md", include_str!("../fleet/README.md")),
    (
        "clusters/local/infrastructure.yaml",
        include_str!("../fleet/clusters/local/infrastructure.yaml"),
    ),
    (
        "clusters/local/apps.yaml",
        include_str!("../fleet/clusters/local/apps.yaml"),
    ),
    (
        "infrastructure/kustomization.yaml",
        include_str!("../fleet/infrastructure/kustomization.yaml"),
    ),
    (
        "infrastructure/namespaces.yaml",
        include_str!("../fleet/infrastructure/namespaces.yaml"),
    ),
    (
        "apps/base/kustomization.yaml",
        include_str!("../fleet/apps/base/kustomization.yaml"),
    ),
    (
        "apps/base/deployment.yaml",
        include_str!("../fleet/apps/base/deployment.yaml"),
    ),
    (
        "apps/base/service.yaml",
        include_str!("../fleet/apps/base/service.yaml"),
    ),
    (
        "apps/dev/kustomization.yaml",
        include_str!("../fleet/apps/dev/kustomization.yaml"),
    ),
    (
        "apps/prod/kustomization.yaml",
        include_str!("../fleet/apps/prod/kustomization.yaml"),
    ),
    (
        "clusters/local/apps-helm.yaml",
        include_str!("../fleet/clusters/local/apps-helm.yaml"),
    ),
    (
        "apps/helm/kustomization.yaml",
        include_str!("../fleet/apps/helm/kustomization.yaml"),
    ),
    (
        "apps/helm/app-config.yaml",
        include_str!("../fleet/apps/helm/app-config.yaml"),
    ),
    (
        "charts/hello/Chart.yaml",
        include_str!("../fleet/charts/hello/Chart.yaml"),
    ),
    (
        "charts/hello/values.yaml",
        include_str!("../fleet/charts/hello/values.yaml"),
    ),
    (
        "charts/hello/templates/_helpers.tpl",
        include_str!("../fleet/charts/hello/templates/_helpers.tpl"),
    ),
    (
        "charts/hello/templates/configmap.yaml",
        include_str!("../fleet/charts/hello/templates/configmap.yaml"),
    ),
    (
        "charts/hello/templates/deployment.yaml",
        include_str!("../fleet/charts/hello/templates/deployment.yaml"),
    ),
    (
        "charts/hello/templates/service.yaml",
        include_str!("../fleet/charts/hello/templates/service.yaml"),
    ),
    (
        "charts/hello/templates/NOTES.txt",
        include_str!("../fleet/charts/hello/templates/NOTES.txt"),
    ),
    (".sourceignore", "README.md\n"),
];

/// The directory of the example chart in [`FILES`], which `capstan dev` publishes to its
/// registry.
pub const CHART_DIR: &str = "charts/hello/";

/// The namespace of the fleet's GitRepository and root Kustomization (Flux's).
pub const NAMESPACE: &str = "flux-system";
/// The name of the fleet's GitRepository and root Kustomization.
pub const NAME: &str = "fleet";

/// A running server of the example: the Git server or the registry.
pub struct LocalServer {
    /// Its address: the fleet's clone URL, or the registry's `host:port`.
    pub url: String,
    /// What it serves, on disk: the bare repository, or the registry's storage.
    pub path: PathBuf,
    task: JoinHandle<()>,
    stop: CancellationToken,
}

impl LocalServer {
    /// Serves `app` on `listener` until [`shutdown`](Self::shutdown).
    fn spawn(
        listener: tokio::net::TcpListener,
        app: axum::Router,
        what: &'static str,
        url: String,
        path: PathBuf,
    ) -> Self {
        let stop = CancellationToken::new();
        let cancelled = stop.clone();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app)
                .with_graceful_shutdown(async move { cancelled.cancelled().await });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "{what} stopped");
            }
        });
        Self {
            url,
            path,
            task,
            stop,
        }
    }

    /// Stops serving.
    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Creates the fleet repository below `root` unless it exists, and serves `root` at `listen`.
pub async fn serve(root: &Path, listen: SocketAddr) -> anyhow::Result<LocalServer> {
    fs_err::create_dir_all(root)?;
    let root = fs_err::canonicalize(root)?;
    let path = root.join("fleet.git");
    if !path.exists() {
        create(&path)
            .with_context(|| format!("creating the example fleet in {}", path.display()))?;
    }
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| {
        format!("cannot listen on {listen}\nhint: pick another address with --git-listen 127.0.0.1:0, or pass --no-example")
    })?;
    let address = listener.local_addr()?;
    let app = server::router(root, ServerOptions { receive_pack: true });
    Ok(LocalServer::spawn(
        listener,
        app,
        "Git server",
        format!("http://{address}/fleet.git"),
        path,
    ))
}

/// The repository of the example chart in the registry (`oci://<registry>/charts/hello`).
pub const CHART_REPOSITORY: &str = "charts";

/// Serves an OCI registry (Capstan's, storing in `root`) at `listen`; its `url` is the
/// registry's `host:port`.
pub async fn serve_registry(root: &Path, listen: SocketAddr) -> anyhow::Result<LocalServer> {
    fs_err::create_dir_all(root)?;
    let root = fs_err::canonicalize(root)?;
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| {
        format!("cannot listen on {listen}\nhint: pick another address with --registry-listen 127.0.0.1:0, or pass --no-example")
    })?;
    let address = listener.local_addr()?;
    let registry = capstan_source::oci::registry::Registry::new(
        &root,
        capstan_source::oci::registry::Limits::default(),
    )
    .with_context(|| format!("opening the registry storage {}", root.display()))?;
    let app = registry.router();
    Ok(LocalServer::spawn(
        listener,
        app,
        "OCI registry",
        address.to_string(),
        root,
    ))
}

/// Publishes the example chart ([`CHART_DIR`] of [`FILES`]) to `registry` (`host:port`, plain
/// HTTP) as `helm package` + `helm push` would, reproducibly (entries and the
/// `org.opencontainers.image.created` annotation at the Unix epoch), so a restart republishes the
/// same digest. Returns the chart's reference, `oci://<registry>/charts/hello:<version>`.
pub async fn publish_chart(registry: &str) -> anyhow::Result<String> {
    let dir = tempfile::tempdir()?;
    write_chart(dir.path())?;
    let options = capstan_helm::chart::package::Options {
        source_date_epoch: Some(0),
        ..capstan_helm::chart::package::Options::default()
    };
    let package = capstan_helm::chart::package::package_with(dir.path(), &options)
        .map_err(|e| anyhow::anyhow!("packaging the example chart: {}", e.message))?;
    let registry_options = capstan_source::oci::RegistryOptions {
        insecure: true,
        ..capstan_source::oci::RegistryOptions::default()
    };
    let pushed = capstan_source::helm::oci::push(
        &package.bytes,
        &format!("oci://{registry}/{CHART_REPOSITORY}"),
        Some("1970-01-01T00:00:00Z"),
        &registry_options,
    )
    .await
    .context("pushing the example chart")?;
    Ok(format!("oci://{}", pushed.reference))
}

/// Whether the `git` program runs here (the fleet's server is Git's own `git http-backend`).
pub fn git_available() -> bool {
    Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "Capstan")
        .env("GIT_AUTHOR_EMAIL", "capstan@localhost")
        .env("GIT_COMMITTER_NAME", "Capstan")
        .env("GIT_COMMITTER_EMAIL", "capstan@localhost")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .context("cannot run `git`\nhint: install Git, or pass --no-example")?;
    if !output.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// A bare repository at `path` whose `main` holds [`FILES`] in one commit.
fn create(path: &Path) -> anyhow::Result<()> {
    let work = tempfile::tempdir()?;
    for (name, content) in FILES {
        let file = work.path().join(name);
        if let Some(parent) = file.parent() {
            fs_err::create_dir_all(parent)?;
        }
        fs_err::write(file, content)?;
    }
    git(work.path(), &["init", "-q", "-b", "main"])?;
    git(work.path(), &["add", "-A"])?;
    git(
        work.path(),
        &[
            "commit",
            "-q",
            "-m",
            "Example fleet: infrastructure, apps with dev and prod overlays",
        ],
    )?;
    // Clone into a temporary name and rename, so a failed start leaves no half-made repository.
    let partial = path.with_extension("git.partial");
    let _ = fs_err::remove_dir_all(&partial);
    let source = work.path().to_string_lossy().into_owned();
    let target = partial.to_string_lossy().into_owned();
    git(work.path(), &["clone", "-q", "--bare", &source, &target])?;
    fs_err::rename(&partial, path)?;
    Ok(())
}

/// Applies the GitRepository pointing at `url` and the root Kustomization of `clusters/local`,
/// which substitutes `${registry}` with the registry's `host:port` (the app config's chart
/// address).
pub async fn apply(client: &Client, url: &str, registry: Option<&str>) -> anyhow::Result<()> {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let params = PatchParams::apply("capstan-dev").force();
    let namespace = serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE},
    });
    namespaces
        .patch(NAMESPACE, &params, &Patch::Apply(namespace))
        .await
        .context("creating the flux-system namespace")?;
    let repository = serde_json::json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {"url": url, "interval": "10s", "ref": {"branch": "main"}},
    });
    Api::<GitRepository>::namespaced(client.clone(), NAMESPACE)
        .patch(NAME, &params, &Patch::Apply(repository))
        .await
        .context("creating the fleet GitRepository")?;
    let mut kustomization = serde_json::json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "interval": "10m",
            "sourceRef": {"kind": "GitRepository", "name": NAME},
            "path": "./clusters/local",
            "prune": true,
        },
    });
    if let Some(registry) = registry {
        kustomization["spec"]["postBuild"] =
            serde_json::json!({"substitute": {"registry": registry}});
    }
    Api::<Kustomization>::namespaced(client.clone(), NAMESPACE)
        .patch(NAME, &params, &Patch::Apply(kustomization))
        .await
        .context("creating the fleet Kustomization")?;
    Ok(())
}

/// Prints, for the terminal of `capstan dev`, every change of readiness of the sources and
/// Kustomizations in [`NAMESPACE`], and of OCIRepositories and HelmReleases anywhere (`Kind/name`
/// in [`NAMESPACE`], `Kind/namespace/name` elsewhere), so a pushed change is seen landing. Runs
/// until aborted.
pub async fn report_progress(client: Client) {
    let mut seen: BTreeMap<String, (String, String)> = BTreeMap::new();
    loop {
        let mut current = Vec::new();
        readiness::<GitRepository>(&client, Some(NAMESPACE), &mut current).await;
        readiness::<Kustomization>(&client, Some(NAMESPACE), &mut current).await;
        readiness::<OCIRepository>(&client, None, &mut current).await;
        readiness::<HelmRelease>(&client, None, &mut current).await;
        for (name, ready) in current {
            let Some((status, message)) = ready else {
                continue;
            };
            if status == "Unknown" || seen.get(&name) == Some(&(status.clone(), message.clone())) {
                continue;
            }
            let mark = if status == "True" { "✔" } else { "✗" };
            eprintln!("capstan dev: {mark} {name}: {message}");
            seen.insert(name, (status, message));
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// Appends `Kind/[namespace/]name` and the `Ready` condition of every object of `K` (in
/// `namespace`, or everywhere); a failed list adds nothing.
async fn readiness<K>(
    client: &Client,
    namespace: Option<&str>,
    out: &mut Vec<(String, Option<(String, String)>)>,
) where
    K: FluxKind
        + kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let Ok(list) = api.list(&kube::api::ListParams::default()).await else {
        return;
    };
    for object in list {
        let name = match object.namespace() {
            Some(ns) if ns != NAMESPACE => format!("{ns}/{}", object.name_any()),
            _ => object.name_any(),
        };
        out.push((format!("{}/{name}", K::INFO.kind), ready_of(&object)));
    }
}

/// The `Ready` condition's status and message, as the API type reads them.
fn ready_of(object: &impl FluxKind) -> Option<(String, String)> {
    object
        .ready_condition()
        .map(|c| (c.status.clone(), c.message.clone()))
}

/// Writes the example chart of [`FILES`] ([`CHART_DIR`]) into `dir`.
pub fn write_chart(dir: &Path) -> anyhow::Result<()> {
    for (name, content) in FILES {
        if let Some(relative) = name.strip_prefix(CHART_DIR) {
            let file = dir.join(relative);
            if let Some(parent) = file.parent() {
                fs_err::create_dir_all(parent)?;
            }
            fs_err::write(file, content)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_builds_with_the_native_engine() {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in FILES {
            let file = dir.path().join(name);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, content).unwrap();
        }
        for overlay in ["apps/dev", "apps/prod", "apps/helm", "infrastructure"] {
            let objects = capstan_kustomize::build(
                &dir.path().join(overlay),
                &capstan_kustomize::BuildOptions::default(),
            )
            .unwrap();
            assert!(!objects.is_empty(), "{overlay} renders objects");
        }
    }

    #[test]
    fn the_chart_renders_with_the_native_helm_engine() {
        let dir = tempfile::tempdir().unwrap();
        write_chart(dir.path()).unwrap();
        let template = capstan_helm::output::Template {
            args: vec!["hello".into(), dir.path().to_string_lossy().into_owned()],
            namespace: Some("hello-helm".into()),
            values: vec![capstan_helm::output::ValueSource::Set(
                "image.tag=6.7.2".into(),
            )],
            name_template: None,
            is_upgrade: false,
            kube_version: None,
            api_versions: Vec::new(),
            print: capstan_helm::output::PrintOptions::default(),
            skip_crds: false,
            debug: false,
        };
        let rendered = template
            .execute(dir.path(), &mut capstan_helm::template::Env::new())
            .map_err(|e| e.message)
            .unwrap();
        let objects = capstan_kustomize::parse_documents(&rendered.stdout).unwrap();
        let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert_eq!(kinds, ["ConfigMap", "Service", "Deployment"]);
        assert_eq!(
            objects[2]["spec"]["template"]["spec"]["containers"][0]["image"],
            "ghcr.io/stefanprodan/podinfo:6.7.2"
        );
    }

    #[test]
    fn every_file_of_the_fleet_directory_is_committed() {
        fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, base, out);
                } else {
                    out.push(
                        path.strip_prefix(base)
                            .unwrap()
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
            }
        }
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("fleet");
        let mut on_disk = Vec::new();
        walk(&base, &base, &mut on_disk);
        for file in on_disk {
            assert!(
                FILES.iter().any(|(name, _)| *name == file),
                "fleet/{file} is missing from fleet::FILES"
            );
        }
    }
}
