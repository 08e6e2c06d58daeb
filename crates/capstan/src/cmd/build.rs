//! `capstan build kustomization` (render a local directory as kustomize-controller would) and
//! `capstan diff kustomization` (compare that render with the cluster by server-side dry-run).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use capstan_api::Kustomization;
use capstan_apply::{ApplyOptions, DriftKind, Inventory, ObjectRef, ResourceManager};
use clap::{Args, Subcommand};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::discovery::Scope;
use serde_json::Value;

use super::{ClusterArgs, KUSTOMIZATION};

/// `capstan build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(subcommand)]
    pub target: BuildTarget,
}

/// What to build.
#[derive(Debug, Subcommand)]
pub enum BuildTarget {
    /// A Kustomization.
    #[command(alias = "ks")]
    Kustomization(BuildKustomization),
}

/// `build kustomization`.
#[derive(Debug, Args)]
pub struct BuildKustomization {
    #[command(flatten)]
    pub render: RenderArgs,
    /// Do not contact the cluster: needs `--kustomization-file`; `substituteFrom` is skipped.
    #[arg(long)]
    pub dry_run: bool,
}

/// `capstan diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(subcommand)]
    pub target: DiffTarget,
}

/// What to diff.
#[derive(Debug, Subcommand)]
pub enum DiffTarget {
    /// A Kustomization.
    #[command(alias = "ks")]
    Kustomization(RenderArgs),
}

/// The Kustomization and the local directory standing in for its `spec.path`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Name of the Kustomization.
    pub name: String,
    /// Local directory to build instead of the source's `spec.path`.
    #[arg(long)]
    pub path: PathBuf,
    /// Read the Kustomization from this YAML file instead of the cluster.
    #[arg(long)]
    pub kustomization_file: Option<PathBuf>,
}

/// Reads the Kustomization `name` from a YAML file.
fn kustomization_from_file(path: &PathBuf, name: &str) -> anyhow::Result<Kustomization> {
    let text = fs_err::read_to_string(path)?;
    let documents = capstan_kustomize::parse_documents(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let document = documents
        .into_iter()
        .find(|d| d["kind"] == KUSTOMIZATION.type_name && d["metadata"]["name"] == name)
        .ok_or_else(|| anyhow::anyhow!("{}: no Kustomization named '{name}'", path.display()))?;
    serde_json::from_value(document)
        .with_context(|| format!("{}: invalid Kustomization '{name}'", path.display()))
}

/// The `postBuild` variables: `substituteFrom` (read from the cluster when a client is given),
/// then `substitute`, which wins.
async fn variables(
    object: &Kustomization,
    namespace: &str,
    client: Option<&Client>,
) -> anyhow::Result<Option<BTreeMap<String, String>>> {
    let Some(post_build) = &object.spec.post_build else {
        return Ok(None);
    };
    let mut variables = BTreeMap::new();
    if let Some(client) = client {
        for reference in &post_build.substitute_from {
            let optional = reference.optional.unwrap_or(false);
            let kind = serde_json::to_value(reference.kind)?;
            let data = if kind == "Secret" {
                let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
                api.get_opt(&reference.name).await?.map(|s| {
                    s.data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                        .collect::<BTreeMap<_, _>>()
                })
            } else {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
                api.get_opt(&reference.name)
                    .await?
                    .map(|m| m.data.unwrap_or_default())
            };
            match data {
                Some(data) => variables.extend(data),
                None if optional => {}
                None => bail!(
                    "substitute from '{}/{}' failed: not found",
                    kind.as_str().unwrap_or_default(),
                    reference.name
                ),
            }
        }
    }
    variables.extend(post_build.substitute.clone());
    Ok(Some(variables))
}

/// The Kustomization (from the file or the cluster) and its render of `--path`, labelled with
/// the owner labels as kustomize-controller applies them.
async fn render(
    args: &RenderArgs,
    namespace: &str,
    client: Option<&Client>,
) -> anyhow::Result<(Kustomization, Vec<DynamicObject>)> {
    let mut object = match (&args.kustomization_file, client) {
        (Some(file), _) => kustomization_from_file(file, &args.name)?,
        (None, Some(client)) => {
            let value = KUSTOMIZATION.get(client, namespace, &args.name).await?;
            serde_json::from_value(value)
                .with_context(|| format!("invalid Kustomization {namespace}/{}", args.name))?
        }
        (None, None) => bail!("--dry-run needs --kustomization-file"),
    };
    let namespace = object
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| namespace.to_owned());
    if !args.path.is_dir() {
        bail!("invalid --path '{}': not a directory", args.path.display());
    }
    let variables = variables(&object, &namespace, client).await?;
    let (root, path) = source_root(&args.path)?;
    let mut local = object.clone();
    local.spec.path = Some(path);
    let mut objects =
        capstan_controllers::kustomization::render_local(&root, &local, variables.as_ref())
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    capstan_apply::set_owner_labels(&mut objects, &args.name, &namespace);
    object.metadata.namespace = Some(namespace);
    Ok((object, objects))
}

/// The root standing in for the source artifact and `--path` relative to it: the enclosing Git
/// work tree when there is one (so that `../base` references resolve as they do in the
/// artifact), otherwise `--path` itself.
fn source_root(path: &Path) -> anyhow::Result<(PathBuf, String)> {
    let path = fs_err::canonicalize(path)?;
    let root = path
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(&path)
        .to_path_buf();
    let relative = path.strip_prefix(&root).unwrap_or(Path::new(""));
    let relative = relative.to_string_lossy().replace('\\', "/");
    Ok((root, format!("./{relative}")))
}

/// Prints the render of `--path` as YAML documents.
pub async fn build(args: BuildArgs) -> anyhow::Result<ExitCode> {
    let BuildTarget::Kustomization(build) = &args.target;
    let client = if build.dry_run {
        None
    } else {
        Some(args.cluster.client().await?)
    };
    let (_, objects) = render(&build.render, &args.cluster.namespace, client.as_ref()).await?;
    let values: Vec<Value> = objects
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    print!("{}", super::yaml_documents(&values));
    Ok(ExitCode::SUCCESS)
}

/// Prints what applying the render of `--path` would change; exit code 1 when anything would.
pub async fn diff(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let DiffTarget::Kustomization(render_args) = &args.target;
    let client = args.cluster.client().await?;
    let (object, objects) = render(render_args, &args.cluster.namespace, Some(&client)).await?;
    let manager = ResourceManager::new(
        client.clone(),
        capstan_controllers::kustomization::FIELD_MANAGER,
    );
    let options = ApplyOptions {
        force: object.spec.force.unwrap_or(false),
        ..ApplyOptions::default()
    };
    let drifts = manager
        .diff(&objects, &options)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let by_ref: HashMap<ObjectRef, &DynamicObject> = objects
        .iter()
        .filter_map(|o| ObjectRef::from_object(o).ok().map(|r| (r, o)))
        .collect();
    let mut changed = false;
    for drift in &drifts {
        match &drift.kind {
            DriftKind::Created => {
                changed = true;
                println!("► {} created", drift.object);
            }
            DriftKind::Changed(_) => {
                changed = true;
                println!("► {} drifted", drift.object);
                if let Some(manifest) = by_ref.get(&drift.object) {
                    let text = object_diff(&client, &drift.object, manifest).await?;
                    print!("{text}");
                }
            }
            DriftKind::Unchanged | DriftKind::Skipped => {}
        }
    }
    if object.spec.prune
        && let Some(status) = object.status.as_ref().and_then(|s| s.inventory.as_ref())
    {
        let old = Inventory::from_status(status).map_err(|e| anyhow::anyhow!("{e}"))?;
        let new = Inventory::new(by_ref.keys().cloned());
        for stale in old.diff(&new) {
            changed = true;
            println!("► {stale} deleted");
        }
    }
    Ok(if changed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The unified diff between the live object and its server-side dry-run apply.
async fn object_diff(
    client: &Client,
    reference: &ObjectRef,
    manifest: &DynamicObject,
) -> anyhow::Result<String> {
    let (resource, capabilities): (ApiResource, _) =
        kube::discovery::pinned_kind(client, &reference.gvk())
            .await
            .with_context(|| format!("resolving the kind of {reference}"))?;
    let api: Api<DynamicObject> = if capabilities.scope == Scope::Namespaced {
        Api::namespaced_with(client.clone(), &reference.namespace, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    let live = api
        .get(&reference.name)
        .await
        .with_context(|| format!("reading {reference}"))?;
    let params = PatchParams::apply(capstan_controllers::kustomization::FIELD_MANAGER)
        .force()
        .dry_run();
    let applied = api
        .patch(&reference.name, &params, &Patch::Apply(manifest))
        .await
        .with_context(|| format!("dry-run applying {reference}"))?;
    let mut before = comparable(serde_json::to_value(live)?);
    let mut after = comparable(serde_json::to_value(applied)?);
    if reference.kind == "Secret" && reference.group.is_empty() {
        mask_secret(&mut before, &mut after);
    }
    Ok(unified_diff(
        &capstan_kustomize::to_yaml_document(&before),
        &capstan_kustomize::to_yaml_document(&after),
    ))
}

/// The object without the fields the server owns.
fn comparable(mut object: Value) -> Value {
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    if let Some(metadata) = object["metadata"].as_object_mut() {
        for field in [
            "managedFields",
            "resourceVersion",
            "generation",
            "uid",
            "creationTimestamp",
        ] {
            metadata.remove(field);
        }
    }
    object
}

/// Replaces Secret values with `***`, marking changed ones `*** (before)` / `*** (after)`.
fn mask_secret(before: &mut Value, after: &mut Value) {
    for field in ["data", "stringData"] {
        let old = before[field].as_object().cloned().unwrap_or_default();
        let new = after[field].as_object().cloned().unwrap_or_default();
        let mask = |map: &mut Value, other: &serde_json::Map<String, Value>, suffix: &str| {
            if let Some(values) = map.get_mut(field).and_then(Value::as_object_mut) {
                for (key, value) in values.iter_mut() {
                    let same = other.get(key) == Some(value);
                    *value = Value::from(if same {
                        "***".to_owned()
                    } else {
                        format!("*** ({suffix})")
                    });
                }
            }
        };
        mask(before, &new, "before");
        mask(after, &old, "after");
    }
}

/// Lines of context around each change in a diff.
const CONTEXT: usize = 3;

/// A unified-style line diff of two texts, with three lines of context around each change.
pub fn unified_diff(before: &str, after: &str) -> String {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    // Longest common subsequence table, from the end.
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut lines: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            lines.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            lines.push(('-', a[i]));
            i += 1;
        } else {
            lines.push(('+', b[j]));
            j += 1;
        }
    }
    let changed: Vec<usize> = (0..lines.len()).filter(|&k| lines[k].0 != ' ').collect();
    let mut out = String::new();
    let mut shown_until = 0usize;
    for &k in &changed {
        let start = k.saturating_sub(CONTEXT).max(shown_until);
        if out.is_empty() || start > shown_until {
            out.push_str("@@\n");
        }
        let end = (k + CONTEXT + 1).min(lines.len());
        for (marker, text) in &lines[start..end] {
            out.push(*marker);
            out.push(' ');
            out.push_str(text);
            out.push('\n');
        }
        shown_until = shown_until.max(end);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_diff_shows_changes_with_context() {
        let before = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let after = "a\nb\nc\nd\nE\nf\ng\nh\n";
        assert_eq!(
            unified_diff(before, after),
            "@@\n  b\n  c\n  d\n- e\n+ E\n  f\n  g\n  h\n"
        );
        assert_eq!(unified_diff(before, before), "");
    }

    #[test]
    fn secrets_are_masked() {
        let mut before = serde_json::json!({"data": {"a": "eA==", "b": "eQ=="}});
        let mut after = serde_json::json!({"data": {"a": "eA==", "b": "eg=="}});
        mask_secret(&mut before, &mut after);
        assert_eq!(before["data"]["a"], "***");
        assert_eq!(before["data"]["b"], "*** (before)");
        assert_eq!(after["data"]["b"], "*** (after)");
    }
}
