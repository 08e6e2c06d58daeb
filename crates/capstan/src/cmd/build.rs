//! `capstan build kustomization` (render a local directory as kustomize-controller would) and
//! `capstan diff kustomization` (compare that render with the cluster by server-side dry-run);
//! `build`/`diff helmrelease` in [`helm`].

mod helm;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use capstan_api::Kustomization;
use capstan_apply::{
    ApplyOptions, Comparison, DriftKind, Inventory, ObjectError, ObjectRef, ResourceManager,
};
use clap::{Args, Subcommand};
use futures::StreamExt as _;
use kube::Client;
use kube::api::DynamicObject;
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
    /// A HelmRelease: its release of a local chart, as helm-controller would render it.
    #[command(alias = "hr")]
    Helmrelease(helm::BuildHelmRelease),
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
    /// A HelmRelease: its release of a local chart against the cluster.
    #[command(alias = "hr")]
    Helmrelease(helm::HelmRenderArgs),
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
    let variables = capstan_controllers::kustomization::variables::collect(
        object.spec.post_build.as_ref(),
        client,
        &namespace,
    )
    .await?;
    let (root, path) = source_root(&args.path)?;
    let mut local = object.clone();
    local.spec.path = Some(path);
    let mut objects =
        capstan_controllers::kustomization::render_local(&root, &local, variables.as_ref())?;
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
    let build = match &args.target {
        BuildTarget::Kustomization(build) => build,
        BuildTarget::Helmrelease(build) => {
            helm::build(build, &args.cluster).await?;
            return Ok(ExitCode::SUCCESS);
        }
    };
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
    out!("{}", super::yaml_documents(&values));
    Ok(ExitCode::SUCCESS)
}

/// Prints what applying the render of `--path` would change; exit code 1 when anything would.
pub async fn diff(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let render_args = match &args.target {
        DiffTarget::Kustomization(render_args) => render_args,
        DiffTarget::Helmrelease(render_args) => {
            let changed = helm::diff(render_args, &args.cluster).await?;
            return Ok(if changed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            });
        }
    };
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
    let (comparisons, failures) = compare_each(&manager, &objects, &options).await;
    let mut changed = print_comparisons(&comparisons);
    if object.spec.prune
        && let Some(status) = object.status.as_ref().and_then(|s| s.inventory.as_ref())
    {
        let old = Inventory::from_status(status).map_err(|e| anyhow::anyhow!("{e}"))?;
        let new = Inventory::new(
            objects
                .iter()
                .filter_map(|o| ObjectRef::from_object(o).ok()),
        );
        for stale in old.diff(&new) {
            changed = true;
            outln!("► {stale} deleted");
        }
    }
    not_diffed(&failures, objects.len())?;
    Ok(if changed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Compares each object with the cluster on its own (one GET and one dry-run each, as
/// [`ResourceManager::compare`]), so an object that cannot be compared (a kind the cluster does
/// not serve, a dry-run the server refuses) hides none of the others: the comparisons of the
/// others, in the render's order, and one error per object that failed.
async fn compare_each(
    manager: &ResourceManager,
    objects: &[DynamicObject],
    options: &ApplyOptions,
) -> (Vec<Comparison>, Vec<ObjectError>) {
    let results: Vec<Result<Vec<Comparison>, Vec<ObjectError>>> = futures::stream::iter(objects)
        .map(|object| async move {
            match manager.compare(std::slice::from_ref(object), options).await {
                Ok(comparisons) => Ok(comparisons),
                Err(capstan_apply::Error::Diff { errors, .. }) => Err(errors),
                Err(error) => {
                    let name = ObjectRef::from_object(object)
                        .map_or_else(|_| "an object".to_owned(), |o| o.to_string());
                    Err(vec![ObjectError::new(name, error.to_string())])
                }
            }
        })
        .buffered(options.concurrency.max(1))
        .collect()
        .await;
    let mut comparisons = Vec::new();
    let mut failures = Vec::new();
    for result in results {
        match result {
            Ok(mut some) => comparisons.append(&mut some),
            Err(mut errors) => failures.append(&mut errors),
        }
    }
    (comparisons, failures)
}

/// Fails, after the diffs were printed, listing every object that could not be diffed with
/// its reason (`flux diff` gathers them the same way and exits 2).
fn not_diffed(failures: &[ObjectError], total: usize) -> anyhow::Result<()> {
    if failures.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = failures.iter().map(|f| format!("  {f}")).collect();
    bail!(
        "{} of {total} objects could not be diffed:\n{}",
        failures.len(),
        listed.join("\n")
    )
}

/// Prints the objects a comparison found created (`► X created`), drifted (`► X drifted` and
/// a line diff, Secret values masked) or skipped (`► X skipped`: `kustomize.toolkit.fluxcd.io/
/// ssa: ignore` or `reconcile: disabled`, as Flux prints them); returns whether any was
/// created or drifted.
fn print_comparisons(comparisons: &[Comparison]) -> bool {
    let mut changed = false;
    for comparison in comparisons {
        let drift = &comparison.drift;
        match &drift.kind {
            DriftKind::Created => {
                changed = true;
                outln!("► {} created", drift.object);
            }
            DriftKind::Changed(_) => {
                changed = true;
                outln!("► {} drifted", drift.object);
                if let Some((before, after)) = comparison.shown() {
                    out!(
                        "{}",
                        unified_diff(
                            &capstan_kustomize::to_yaml_document(&before),
                            &capstan_kustomize::to_yaml_document(&after),
                        )
                    );
                }
            }
            DriftKind::Skipped => outln!("► {} skipped", drift.object),
            DriftKind::Unchanged => {}
        }
    }
    changed
}

/// Lines of context around each change in a diff.
const CONTEXT: usize = 3;

/// How long one line diff may search for the smallest edit script; past it `similar` returns a
/// correct but possibly longer one, so a huge rewrite costs bounded time.
const DIFF_DEADLINE: Duration = Duration::from_secs(1);

/// The edit script turning `old` into `new`: each line with ' ' (kept), '-' or '+'.
fn edit_script<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<(char, &'a str)> {
    let deadline = Instant::now() + DIFF_DEADLINE;
    let ops =
        similar::capture_diff_slices_deadline(similar::Algorithm::Myers, old, new, Some(deadline));
    ops.iter()
        .flat_map(|op| op.iter_changes(old, new))
        .map(|change| {
            let marker = match change.tag() {
                similar::ChangeTag::Equal => ' ',
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
            };
            (marker, change.value())
        })
        .collect()
}

/// A unified-style line diff of two texts, with three lines of context around each change.
pub fn unified_diff(before: &str, after: &str) -> String {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    let lines = edit_script(&a, &b);
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
            let script = edit_script(&a, &b);
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
