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

/// The annotation `kubectl apply` stores the whole applied manifest in (Secret values included).
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Replaces Secret values with `***`, marking changed ones `*** (before)` / `*** (after)`:
/// `data`, `stringData` and the `kubectl apply` annotation, which holds a copy of them.
/// (`managedFields`, which can name the keys, is already gone: see [`comparable`].)
fn mask_secret(before: &mut Value, after: &mut Value) {
    let mask_map = |before: &mut Value, after: &mut Value| {
        let old = before.as_object().cloned().unwrap_or_default();
        let new = after.as_object().cloned().unwrap_or_default();
        let mask = |map: &mut Value, other: &serde_json::Map<String, Value>, suffix: &str| {
            if let Some(values) = map.as_object_mut() {
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
    };
    for field in ["data", "stringData"] {
        let (mut old, mut new) = (before[field].take(), after[field].take());
        mask_map(&mut old, &mut new);
        for (object, value) in [(&mut *before, old), (&mut *after, new)] {
            if !value.is_null()
                && let Some(map) = object.as_object_mut()
            {
                map.insert(field.to_owned(), value);
            }
        }
    }
    let annotations = |object: &mut Value| {
        let mut only = serde_json::Map::new();
        if let Some(value) = object["metadata"]["annotations"]
            .as_object_mut()
            .and_then(|a| a.remove(LAST_APPLIED))
        {
            only.insert(LAST_APPLIED.to_owned(), value);
        }
        Value::Object(only)
    };
    let (mut old, mut new) = (annotations(before), annotations(after));
    mask_map(&mut old, &mut new);
    for (object, value) in [(before, old), (after, new)] {
        if let Some(masked) = value.get(LAST_APPLIED)
            && let Some(map) = object["metadata"]["annotations"].as_object_mut()
        {
            map.insert(LAST_APPLIED.to_owned(), masked.clone());
        }
    }
}

/// Lines of context around each change in a diff.
const CONTEXT: usize = 3;

/// The most edits one search of the line diff explores before it gives up on finding common
/// lines in a region and reports the region as removed then added: bounds the time of huge
/// rewrites to `O((n + m) * MAX_EDITS)`.
const MAX_EDITS: isize = 4096;

/// Line `i` of `lines` (the caller keeps `i` in bounds).
fn at<'a>(lines: &[&'a str], i: isize) -> &'a str {
    lines[usize::try_from(i).unwrap_or_default()]
}

/// Myers' middle snake: a point `(x, y)` on an optimal edit path of `a` into `b`, found in
/// linear space by searching forward from the start and backward from the end until the two
/// searches overlap. `None` when no overlap is found within [`MAX_EDITS`].
fn middle_snake(old: &[&str], new: &[&str]) -> Option<(usize, usize)> {
    let (old_len, new_len) = (old.len().cast_signed(), new.len().cast_signed());
    let max_edits = ((old_len + new_len + 1) / 2).min(MAX_EDITS);
    let offset = max_edits + 1;
    let width = usize::try_from(2 * offset + 1).ok()?;
    // Furthest x reached on each diagonal (x - y), from the start and from the end.
    let mut forward = vec![-1isize; width];
    let mut backward = vec![-1isize; width];
    let slot = |diagonal: isize| usize::try_from(offset + diagonal).ok();
    forward[slot(1)?] = 0;
    backward[slot(1)?] = 0;
    let delta = old_len - new_len;
    let odd = delta % 2 != 0;
    let inside = |x: isize, y: isize| y >= 0 && x <= old_len && y <= new_len;
    for edits in 0..max_edits {
        for diagonal in (-edits..=edits).step_by(2) {
            let here = slot(diagonal)?;
            let mut x = if diagonal == -edits
                || (diagonal != edits && forward[here - 1] < forward[here + 1])
            {
                forward[here + 1]
            } else {
                forward[here - 1] + 1
            };
            let mut y = x - diagonal;
            while x < old_len && y >= 0 && y < new_len && at(old, x) == at(new, y) {
                x += 1;
                y += 1;
            }
            forward[here] = x;
            // The backward search on this diagonal has run `edits - 1` steps.
            if odd
                && (delta - diagonal).abs() < edits
                && inside(x, y)
                && let Some(there) = slot(delta - diagonal)
                && backward[there] >= 0
                && x >= old_len - backward[there]
            {
                return Some((usize::try_from(x).ok()?, usize::try_from(y).ok()?));
            }
        }
        for diagonal in (-edits..=edits).step_by(2) {
            let here = slot(diagonal)?;
            let mut x = if diagonal == -edits
                || (diagonal != edits && backward[here - 1] < backward[here + 1])
            {
                backward[here + 1]
            } else {
                backward[here - 1] + 1
            };
            let mut y = x - diagonal;
            while x < old_len
                && y >= 0
                && y < new_len
                && at(old, old_len - x - 1) == at(new, new_len - y - 1)
            {
                x += 1;
                y += 1;
            }
            backward[here] = x;
            if !odd
                && (delta - diagonal).abs() <= edits
                && inside(x, y)
                && let Some(there) = slot(delta - diagonal)
                && forward[there] >= 0
                && forward[there] >= old_len - x
            {
                let split_x = forward[there];
                let split_y = split_x - (delta - diagonal);
                if split_y >= 0 && split_x <= old_len && split_y <= new_len {
                    return Some((
                        usize::try_from(split_x).ok()?,
                        usize::try_from(split_y).ok()?,
                    ));
                }
            }
        }
    }
    None
}

/// Appends the edit script turning `a` into `b`: common prefix and suffix first, then Myers'
/// divide and conquer on what is left (linear space).
fn diff_lines<'a>(a: &[&'a str], b: &[&'a str], out: &mut Vec<(char, &'a str)>) {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (a_rest, b_rest) = (&a[prefix..], &b[prefix..]);
    let suffix = a_rest
        .iter()
        .rev()
        .zip(b_rest.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let middle_a = &a_rest[..a_rest.len() - suffix];
    let middle_b = &b_rest[..b_rest.len() - suffix];
    out.extend(a[..prefix].iter().map(|l| (' ', *l)));
    if middle_a.is_empty() || middle_b.is_empty() {
        out.extend(middle_a.iter().map(|l| ('-', *l)));
        out.extend(middle_b.iter().map(|l| ('+', *l)));
    } else {
        match middle_snake(middle_a, middle_b) {
            Some((x, y)) if (x, y) != (0, 0) && (x, y) != (middle_a.len(), middle_b.len()) => {
                diff_lines(&middle_a[..x], &middle_b[..y], out);
                diff_lines(&middle_a[x..], &middle_b[y..], out);
            }
            _ => {
                out.extend(middle_a.iter().map(|l| ('-', *l)));
                out.extend(middle_b.iter().map(|l| ('+', *l)));
            }
        }
    }
    out.extend(a_rest[a_rest.len() - suffix..].iter().map(|l| (' ', *l)));
}

/// A unified-style line diff of two texts, with three lines of context around each change.
pub fn unified_diff(before: &str, after: &str) -> String {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    let mut lines: Vec<(char, &str)> = Vec::with_capacity(a.len().max(b.len()));
    diff_lines(&a, &b, &mut lines);
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
    use std::fmt::Write as _;

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

    #[test]
    fn secret_values_in_the_kubectl_annotation_are_masked() {
        let applied = |value: &str| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "s", "annotations": {
                    LAST_APPLIED: format!("{{\"stringData\":{{\"password\":\"{value}\"}}}}"),
                    "team": "a"
                }},
                "data": {"password": "c2VjcmV0"},
                "stringData": {"token": value}
            })
        };
        let mut before = applied("old-value");
        let mut after = applied("new-value");
        mask_secret(&mut before, &mut after);
        let text = unified_diff(
            &capstan_kustomize::to_yaml_document(&before),
            &capstan_kustomize::to_yaml_document(&after),
        );
        assert!(
            !text.contains("old-value") && !text.contains("new-value"),
            "{text}"
        );
        assert_eq!(
            before["metadata"]["annotations"][LAST_APPLIED],
            "*** (before)"
        );
        assert_eq!(
            after["metadata"]["annotations"][LAST_APPLIED],
            "*** (after)"
        );
        assert_eq!(after["metadata"]["annotations"]["team"], "a");
        assert_eq!(after["stringData"]["token"], "*** (after)");
        assert_eq!(after["data"]["password"], "***");
    }

    /// The length of the longest common subsequence, by the quadratic table (small inputs).
    fn lcs_length(a: &[&str], b: &[&str]) -> usize {
        let mut table = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for i in (0..a.len()).rev() {
            for j in (0..b.len()).rev() {
                table[i][j] = if a[i] == b[j] {
                    table[i + 1][j + 1] + 1
                } else {
                    table[i + 1][j].max(table[i][j + 1])
                };
            }
        }
        table[0][0]
    }

    #[test]
    fn line_diffs_are_minimal_and_rebuild_both_sides() {
        let mut seed = 0x2545_f491_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let words = ["a", "b", "c", "d"];
        for _ in 0..500 {
            let mut side = || -> Vec<&str> {
                let len = next() % 12;
                (0..len)
                    .map(|_| words[usize::try_from(next() % 4).unwrap()])
                    .collect()
            };
            let a = side();
            let b = side();
            let mut script = Vec::new();
            diff_lines(&a, &b, &mut script);
            let old: Vec<&str> = script.iter().filter(|l| l.0 != '+').map(|l| l.1).collect();
            let new: Vec<&str> = script.iter().filter(|l| l.0 != '-').map(|l| l.1).collect();
            assert_eq!((old, new), (a.clone(), b.clone()));
            let kept = script.iter().filter(|l| l.0 == ' ').count();
            assert_eq!(kept, lcs_length(&a, &b), "{a:?} -> {b:?}: {script:?}");
        }
    }

    #[test]
    fn a_one_line_change_in_a_huge_object_diffs_fast() {
        let lines = |range: &mut dyn Iterator<Item = i32>| {
            range.fold(String::new(), |mut text, i| {
                let _ = writeln!(text, "    line {i}");
                text
            })
        };
        let before = lines(&mut (0..20_000));
        let after = before.replace("    line 10000\n", "    line ten thousand\n");
        let mut reordered = lines(&mut (0..20_000).rev());
        reordered.push_str("end\n");
        let start = std::time::Instant::now();
        let text = unified_diff(&before, &after);
        assert_eq!(
            text,
            "@@\n      line 9997\n      line 9998\n      line 9999\n-     line 10000\n\
             +     line ten thousand\n      line 10001\n      line 10002\n      line 10003\n"
        );
        // Nothing in common but single lines: bounded by the edit cap, not quadratic memory.
        let text = unified_diff(&before, &reordered);
        assert!(text.contains("+ end"));
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "took {:?}",
            start.elapsed()
        );
    }
}
