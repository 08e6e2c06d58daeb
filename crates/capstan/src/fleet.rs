//! The example fleet of `capstan dev`: a Git repository (a base and dev/prod overlays, and the
//! Kustomizations of a local cluster) served over smart HTTP on this machine, and the
//! GitRepository + Kustomization that make the control plane reconcile it.
//!
//! The repository is created once, in `<state dir>/git/fleet.git`, from the files in
//! `crates/capstan/fleet/`; later runs keep it, with whatever the user pushed. The objects in
//! the cluster are (re)applied at every start, so a fresh control plane converges from Git alone.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use capstan_api::{FluxKind, GitRepository, Kustomization};
use capstan_source::git::server::{self, ServerOptions};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The repository's files, as committed when it is created.
const FILES: [(&str, &str); 11] = [
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
    (".sourceignore", "README.md\n"),
];

/// The namespace of the fleet's GitRepository and root Kustomization (Flux's).
pub const NAMESPACE: &str = "flux-system";
/// The name of the fleet's GitRepository and root Kustomization.
pub const NAME: &str = "fleet";

/// The running Git server.
pub struct GitServer {
    /// The clone URL of the fleet repository.
    pub url: String,
    /// The bare repository on disk.
    pub path: PathBuf,
    task: JoinHandle<()>,
    stop: CancellationToken,
}

impl GitServer {
    /// Stops serving.
    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Creates the fleet repository below `root` unless it exists, and serves `root` at `listen`.
pub async fn serve(root: &Path, listen: SocketAddr) -> anyhow::Result<GitServer> {
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
    let stop = CancellationToken::new();
    let cancelled = stop.clone();
    let task = tokio::spawn(async move {
        let serve = axum::serve(listener, app)
            .with_graceful_shutdown(async move { cancelled.cancelled().await });
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "Git server stopped");
        }
    });
    Ok(GitServer {
        url: format!("http://{address}/fleet.git"),
        path,
        task,
        stop,
    })
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

/// Applies the GitRepository pointing at `url` and the root Kustomization of `clusters/local`.
pub async fn apply(client: &Client, url: &str) -> anyhow::Result<()> {
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
    let kustomization = serde_json::json!({
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
    Api::<Kustomization>::namespaced(client.clone(), NAMESPACE)
        .patch(NAME, &params, &Patch::Apply(kustomization))
        .await
        .context("creating the fleet Kustomization")?;
    Ok(())
}

/// Prints, for the terminal of `capstan dev`, every change of readiness of the sources and
/// Kustomizations in [`NAMESPACE`], so a pushed change is seen landing. Runs until aborted.
pub async fn report_progress(client: Client) {
    let mut seen: BTreeMap<String, (String, String)> = BTreeMap::new();
    let repositories: Api<GitRepository> = Api::namespaced(client.clone(), NAMESPACE);
    let kustomizations: Api<Kustomization> = Api::namespaced(client, NAMESPACE);
    let params = kube::api::ListParams::default();
    loop {
        let mut current = Vec::new();
        if let Ok(list) = repositories.list(&params).await {
            for object in list {
                let ready = ready_of(&object);
                current.push((format!("GitRepository/{}", object.name_any()), ready));
            }
        }
        if let Ok(list) = kustomizations.list(&params).await {
            for object in list {
                let ready = ready_of(&object);
                current.push((format!("Kustomization/{}", object.name_any()), ready));
            }
        }
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

/// The `Ready` condition's status and message, as the API type reads them.
fn ready_of(object: &impl FluxKind) -> Option<(String, String)> {
    object
        .ready_condition()
        .map(|c| (c.status.clone(), c.message.clone()))
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
        for overlay in ["apps/dev", "apps/prod", "infrastructure"] {
            let objects = capstan_kustomize::build(
                &dir.path().join(overlay),
                &capstan_kustomize::BuildOptions::default(),
            )
            .unwrap();
            assert!(!objects.is_empty(), "{overlay} renders objects");
        }
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
