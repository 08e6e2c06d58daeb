//! `capstan migrate`: moves Flux objects to the API version Capstan serves, as `flux migrate`
//! does.
//!
//! - File system mode (`--path/-f`): the YAML files under a path (a repository checkout) are
//!   scanned for `apiVersion:` lines of a served kind at an older version
//!   (`source.toolkit.fluxcd.io/v1beta2` GitRepository, `helm.toolkit.fluxcd.io/v2beta1`
//!   HelmRelease, …); each is listed as `file:line: Kind old -> new` and, unless `--dry-run`,
//!   rewritten in place after a confirmation (`--yes` skips it). Only the version on those lines
//!   changes: comments, quoting, order and every other line stay byte for byte. The kind is
//!   read from the sibling `kind:` key of the same mapping, before or after `apiVersion`, so
//!   list items and nested references (`healthChecks`) are found too.
//! - Cluster mode (no `--path`): every object of each served kind is rewritten at the CRD's
//!   storage version and the CRD's `status.storedVersions` is reduced to it.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::say;
use anyhow::{Context, bail};
use clap::Args;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};

/// `capstan migrate [-f PATH [--dry-run] [--yes] [-e .yaml,.yml]]`.
#[derive(Clone, Debug, Args)]
pub struct MigrateArgs {
    /// The directory (or one file) holding the manifests to migrate; without it, the objects in
    /// the cluster are migrated.
    #[arg(short = 'f', long)]
    pub path: Option<PathBuf>,
    /// The file name endings to consider under `--path`.
    #[arg(
        short = 'e',
        long,
        value_delimiter = ',',
        default_value = ".yaml,.yml",
        requires = "path"
    )]
    pub extensions: Vec<String>,
    /// List what would change under `--path` without writing anything.
    #[arg(long, requires = "path")]
    pub dry_run: bool,
    /// Rewrite the files under `--path` without asking for confirmation.
    #[arg(short = 'y', long, requires = "path")]
    pub yes: bool,
    /// Path to the kubeconfig file (cluster mode; default: `$KUBECONFIG`, then
    /// `~/.kube/config`).
    #[arg(long, conflicts_with = "path")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (cluster mode).
    #[arg(long, conflicts_with = "path")]
    pub context: Option<String>,
}

/// Runs the migration.
pub async fn run(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    match &args.path {
        Some(path) => migrate_files(path, &args),
        None => migrate_cluster(&args).await,
    }
}

/// The served version of each Flux group and kind.
fn served_versions() -> BTreeMap<(&'static str, &'static str), &'static str> {
    capstan_api::KINDS
        .iter()
        .map(|info| ((info.group, info.kind), info.version))
        .collect()
}

/// One `apiVersion` line to rewrite.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Upgrade {
    /// The line index (0-based).
    line: usize,
    /// The byte range of the version in the line.
    range: std::ops::Range<usize>,
    kind: String,
    old: String,
    new: &'static str,
}

fn migrate_files(path: &Path, args: &MigrateArgs) -> anyhow::Result<ExitCode> {
    say::action("starting migration of custom resources");
    let files = list_files(path, &args.extensions)?;
    let versions = served_versions();
    let mut changes = Vec::new();
    for file in files {
        let text = fs_err::read_to_string(&file)?;
        let upgrades = detect(&text, &versions);
        if upgrades.is_empty() {
            continue;
        }
        for upgrade in &upgrades {
            say::generate(&format!(
                "{}:{}: {} {} -> {}",
                file.display(),
                upgrade.line + 1,
                upgrade.kind,
                upgrade.old,
                upgrade.new
            ));
        }
        changes.push((file, text, upgrades));
    }
    if changes.is_empty() {
        say::success("no custom resources found that require migration");
        return Ok(ExitCode::SUCCESS);
    }
    if args.dry_run {
        say::success("dry-run mode enabled, no changes will be made");
        return Ok(ExitCode::SUCCESS);
    }
    if !args.yes && !confirm("Are you sure you want to proceed with the above upgrades")? {
        bail!("migration aborted; hint: answer 'y', or pass --yes");
    }
    for (file, text, upgrades) in changes {
        fs_err::write(&file, apply(&text, &upgrades))?;
        say::success(&format!("file {} migrated successfully", file.display()));
    }
    say::success("custom resources migrated successfully");
    Ok(ExitCode::SUCCESS)
}

/// Asks on stderr and reads the answer from stdin (no answer is no).
fn confirm(question: &str) -> anyhow::Result<bool> {
    eprint!("{question}? [y/N] ");
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .context("reading the answer from standard input")?;
    if !std::io::stdin().is_terminal() {
        // The answer was not echoed: end the question's line.
        eprintln!();
    }
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "Yes"))
}

/// The regular files under `path` (sorted) whose names end with one of `extensions`. A single
/// file must match them; links are skipped in a directory and refused as the path itself.
fn list_files(path: &Path, extensions: &[String]) -> anyhow::Result<Vec<PathBuf>> {
    let matches = |file: &Path| {
        let name = file.to_string_lossy();
        extensions.iter().any(|ext| name.ends_with(ext.as_str()))
    };
    let meta = fs_err::symlink_metadata(path)?;
    if !meta.is_dir() {
        if !matches(path) {
            bail!(
                "file {} does not match the specified extensions: {}",
                path.display(),
                extensions.join(", ")
            );
        }
        if !meta.is_file() {
            bail!("file {} is irregular", path.display());
        }
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut pending = vec![path.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs_err::read_dir(&dir)? {
            let entry = entry?;
            // `-f .` lists `clusters/app.yaml`, not `./clusters/app.yaml`.
            let file = match entry.path().strip_prefix(".") {
                Ok(relative) => relative.to_path_buf(),
                Err(_) => entry.path(),
            };
            let kind = entry
                .file_type()
                .with_context(|| format!("reading {}", file.display()))?;
            if kind.is_dir() {
                pending.push(file);
            } else if matches(&file) {
                if kind.is_file() {
                    files.push(file);
                } else {
                    eprintln!("⚠️ skipping irregular file {}", file.display());
                }
            }
        }
    }
    files.sort();
    Ok(files)
}

/// One line's shape: its indentation, the column of its mapping key (after any `- `), whether
/// it starts a list item, and its key and value when it is a `key: value` line.
struct Shape<'a> {
    indent: usize,
    key_column: usize,
    item: bool,
    key: &'a str,
    /// The value's byte range in the line, quotes and comment excluded.
    value: std::ops::Range<usize>,
}

/// The shape of a line; `None` for blank and comment lines.
fn shape(line: &str) -> Option<Shape<'_>> {
    let line = line.trim_end_matches(['\n', '\r']);
    let indent = line.len() - line.trim_start_matches(' ').len();
    let mut key_column = indent;
    let mut item = false;
    while line[key_column..].starts_with("- ") || &line[key_column..] == "-" {
        item = true;
        key_column += 1;
        key_column += line[key_column..].len() - line[key_column..].trim_start_matches(' ').len();
    }
    let content = &line[key_column..];
    if content.is_empty() || content.starts_with('#') {
        return (item).then_some(Shape {
            indent,
            key_column,
            item,
            key: "",
            value: key_column..key_column,
        });
    }
    let (key, value) = match content.find(':') {
        Some(colon)
            if content[colon + 1..].is_empty() || content[colon + 1..].starts_with([' ', '\t']) =>
        {
            (&content[..colon], &content[colon + 1..])
        }
        _ => ("", ""),
    };
    // The value: the first token, without a comment or quotes.
    let start = line.len() - value.trim_start().len();
    let mut token = value.trim_start();
    if let Some(hash) = token.find(" #") {
        token = &token[..hash];
    }
    token = token.trim_end();
    let (mut from, mut to) = (start, start + token.len());
    if token.len() >= 2
        && ((token.starts_with('"') && token.ends_with('"'))
            || (token.starts_with('\'') && token.ends_with('\'')))
    {
        from += 1;
        to -= 1;
    }
    Some(Shape {
        indent,
        key_column,
        item,
        key: key.trim_matches(['"', '\'']),
        value: from..to,
    })
}

/// The value of the sibling `kind:` key of the mapping holding the `apiVersion` line `at`.
fn sibling_kind<'a>(lines: &[&'a str], at: usize, column: usize, item: bool) -> Option<&'a str> {
    let document_marker = |line: &str| line.starts_with("---") || line.starts_with("...");
    let kind_of = |index: usize, shape: &Shape<'_>| {
        (shape.key == "kind").then(|| &lines[index][shape.value.clone()])
    };
    for (index, line) in lines.iter().enumerate().skip(at + 1) {
        if document_marker(line) {
            break;
        }
        let Some(shape) = shape(line) else { continue };
        if shape.indent < column {
            break;
        }
        if !shape.item
            && shape.indent == column
            && let Some(kind) = kind_of(index, &shape)
        {
            return Some(kind);
        }
    }
    if item {
        return None;
    }
    for index in (0..at).rev() {
        let line = lines[index];
        if document_marker(line) {
            break;
        }
        let Some(shape) = shape(line) else { continue };
        if shape.item && shape.key_column == column {
            // The first key of this mapping, on its list item's line.
            return kind_of(index, &shape);
        }
        if shape.indent < column {
            break;
        }
        if !shape.item
            && shape.indent == column
            && let Some(kind) = kind_of(index, &shape)
        {
            return Some(kind);
        }
    }
    None
}

/// The `apiVersion` lines of `text` naming a served kind at an older version.
fn detect(text: &str, versions: &BTreeMap<(&str, &str), &'static str>) -> Vec<Upgrade> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut upgrades = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let Some(shape) = shape(line) else { continue };
        if shape.key != "apiVersion" {
            continue;
        }
        let value = &line[shape.value.clone()];
        let Some((group, version)) = value.split_once('/') else {
            continue;
        };
        let Some(kind) = sibling_kind(&lines, index, shape.key_column, shape.item) else {
            continue;
        };
        let Some(&new) = versions.get(&(group, kind)) else {
            continue;
        };
        if version_priority(version, new) != Some(Ordering::Less) {
            continue;
        }
        let start = shape.value.start + group.len() + 1;
        upgrades.push(Upgrade {
            line: index,
            range: start..shape.value.end,
            kind: kind.to_owned(),
            old: version.to_owned(),
            new,
        });
    }
    upgrades
}

/// `text` with each upgrade's version replaced; every other byte as it was.
fn apply(text: &str, upgrades: &[Upgrade]) -> String {
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_owned).collect();
    for upgrade in upgrades {
        lines[upgrade.line].replace_range(upgrade.range.clone(), upgrade.new);
    }
    lines.concat()
}

/// How two Kubernetes API versions order by Kubernetes' version priority (GA above beta above
/// alpha, then by major and minor number); `None` when one is not such a version.
fn version_priority(a: &str, b: &str) -> Option<Ordering> {
    fn key(version: &str) -> Option<(u8, u64, u64)> {
        let rest = version.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let rest = &rest[digits..];
        if rest.is_empty() {
            return Some((2, major, 0));
        }
        let (stability, minor) = if let Some(minor) = rest.strip_prefix("beta") {
            (1, minor)
        } else {
            (0, rest.strip_prefix("alpha")?)
        };
        Some((stability, major, minor.parse().ok()?))
    }
    Some(key(a)?.cmp(&key(b)?))
}

/// Cluster mode: every object of each served kind rewritten at its CRD's storage version, then
/// the CRD's `status.storedVersions` reduced to that version.
async fn migrate_cluster(args: &MigrateArgs) -> anyhow::Result<ExitCode> {
    say::action("starting migration of custom resources");
    capstan_source::tls::install_default_provider();
    let client =
        crate::controller::client(args.kubeconfig.as_ref(), args.context.as_deref()).await?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for info in capstan_api::KINDS {
        let name = format!("{}.{}", info.plural, info.group);
        let Some(crd) = crds
            .get_opt(&name)
            .await
            .with_context(|| format!("reading CRD {name}"))?
        else {
            continue;
        };
        let Some(storage) = crd
            .spec
            .versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.clone())
        else {
            bail!("no storage version found for CRD {name}");
        };
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(info.group, &storage, info.kind),
            info.plural,
        );
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let objects = api
            .list(&ListParams::default())
            .await
            .with_context(|| format!("listing {name}"))?;
        for object in objects {
            let namespace = object.metadata.namespace.clone().unwrap_or_default();
            let object_name = object.metadata.name.clone().unwrap_or_default();
            let namespaced: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &namespace, &resource);
            let target = format!("{}/{storage}", info.group);
            // Without managedFields to move, a write that changes nothing still rewrites the
            // object at the storage version.
            let patch =
                managed_fields_patch(&object, &target).unwrap_or_else(|| serde_json::json!({}));
            let written = namespaced
                .patch(&object_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            match written {
                Ok(_) => say::success(&format!(
                    "{}/{namespace}/{object_name} migrated to version {storage}",
                    info.kind
                )),
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("{}/{namespace}/{object_name} failed to migrate", info.kind)
                    });
                }
            }
        }
        let stored = crd
            .status
            .as_ref()
            .and_then(|s| s.stored_versions.clone())
            .unwrap_or_default();
        if stored != [storage.clone()] {
            let patch = serde_json::json!({"status": {"storedVersions": [storage]}});
            crds.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("updating the status of CRD {name}"))?;
            say::success(&format!("{name} migrated to storage version {storage}"));
        }
    }
    say::success("custom resources migrated successfully");
    Ok(ExitCode::SUCCESS)
}

/// A merge patch moving the object's `managedFields` entries of other versions to `target`
/// (`group/version`), as Flux's migration does, so that server-side apply never meets a version
/// the CRD no longer serves; `None` when every entry is at `target` already. The list is
/// replaced whole, under the object's `resourceVersion` (a concurrent write makes it fail).
fn managed_fields_patch(object: &DynamicObject, target: &str) -> Option<serde_json::Value> {
    let entries = object
        .metadata
        .managed_fields
        .as_deref()
        .unwrap_or_default();
    if entries
        .iter()
        .all(|entry| entry.api_version.as_deref().is_none_or(|v| v == target))
    {
        return None;
    }
    let entries: Vec<_> = entries
        .iter()
        .cloned()
        .map(|mut entry| {
            if entry.api_version.is_some() {
                entry.api_version = Some(target.to_owned());
            }
            entry
        })
        .collect();
    Some(serde_json::json!({"metadata": {
        "resourceVersion": object.metadata.resource_version,
        "managedFields": entries,
    }}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upgrades(text: &str) -> Vec<(usize, String, String, &'static str)> {
        detect(text, &served_versions())
            .into_iter()
            .map(|u| (u.line + 1, u.kind, u.old, u.new))
            .collect()
    }

    #[test]
    fn older_versions_of_served_kinds_are_found_by_their_sibling_kind() {
        let text = "\
# a comment
apiVersion: source.toolkit.fluxcd.io/v1beta2 # keep me
kind: GitRepository
---
kind: HelmRelease
metadata:
  name: podinfo
apiVersion: \"helm.toolkit.fluxcd.io/v2beta1\"
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
spec:
  healthChecks:
  - apiVersion: helm.toolkit.fluxcd.io/v2beta2
    kind: HelmRelease
  - kind: Deployment
    apiVersion: apps/v1
  - name: x
    apiVersion: source.toolkit.fluxcd.io/v1beta1
    kind: Bucket
---
apiVersion: source.toolkit.fluxcd.io/v2
kind: GitRepository
---
apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImagePolicy
---
apiVersion: v1
kind: ConfigMap
data:
  nested: |
    apiVersion: source.toolkit.fluxcd.io/v1beta2
";
        assert_eq!(
            upgrades(text),
            [
                (2, "GitRepository".into(), "v1beta2".into(), "v1"),
                (8, "HelmRelease".into(), "v2beta1".into(), "v2"),
                (14, "HelmRelease".into(), "v2beta2".into(), "v2"),
                (19, "Bucket".into(), "v1beta1".into(), "v1"),
            ]
        );
        let migrated = apply(text, &detect(text, &served_versions()));
        let changed: Vec<(&str, &str)> = text
            .lines()
            .zip(migrated.lines())
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(
            changed,
            [
                (
                    "apiVersion: source.toolkit.fluxcd.io/v1beta2 # keep me",
                    "apiVersion: source.toolkit.fluxcd.io/v1 # keep me"
                ),
                (
                    "apiVersion: \"helm.toolkit.fluxcd.io/v2beta1\"",
                    "apiVersion: \"helm.toolkit.fluxcd.io/v2\""
                ),
                (
                    "  - apiVersion: helm.toolkit.fluxcd.io/v2beta2",
                    "  - apiVersion: helm.toolkit.fluxcd.io/v2"
                ),
                (
                    "    apiVersion: source.toolkit.fluxcd.io/v1beta1",
                    "    apiVersion: source.toolkit.fluxcd.io/v1"
                ),
            ]
        );
    }

    #[test]
    fn managed_fields_of_other_versions_move_to_the_storage_version() {
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": "fleet", "resourceVersion": "7", "managedFields": [
                {"manager": "flux", "operation": "Apply",
                 "apiVersion": "source.toolkit.fluxcd.io/v1beta2", "fieldsType": "FieldsV1"},
                {"manager": "capstan", "operation": "Update",
                 "apiVersion": "source.toolkit.fluxcd.io/v1", "fieldsType": "FieldsV1"}
            ]}
        }))
        .unwrap();
        let patch = managed_fields_patch(&object, "source.toolkit.fluxcd.io/v1").unwrap();
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        let versions: Vec<&str> = patch["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["apiVersion"].as_str().unwrap())
            .collect();
        assert_eq!(versions, ["source.toolkit.fluxcd.io/v1"; 2]);
        assert_eq!(patch["metadata"]["managedFields"][0]["manager"], "flux");
        assert!(managed_fields_patch(&object, "source.toolkit.fluxcd.io/v1beta2").is_some());
        let current: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "fleet", "managedFields": [
                {"manager": "capstan", "apiVersion": "source.toolkit.fluxcd.io/v1"}]}
        }))
        .unwrap();
        assert!(managed_fields_patch(&current, "source.toolkit.fluxcd.io/v1").is_none());
    }

    #[test]
    fn crlf_files_keep_their_line_ends() {
        let text = "apiVersion: source.toolkit.fluxcd.io/v1beta2\r\nkind: HelmRepository\r\n";
        assert_eq!(
            apply(text, &detect(text, &served_versions())),
            "apiVersion: source.toolkit.fluxcd.io/v1\r\nkind: HelmRepository\r\n"
        );
    }

    #[test]
    fn versions_order_as_kubernetes_orders_them() {
        assert_eq!(version_priority("v1beta2", "v1"), Some(Ordering::Less));
        assert_eq!(version_priority("v2beta1", "v2"), Some(Ordering::Less));
        assert_eq!(version_priority("v1beta2", "v1beta3"), Some(Ordering::Less));
        assert_eq!(
            version_priority("v1alpha1", "v1beta1"),
            Some(Ordering::Less)
        );
        assert_eq!(version_priority("v1", "v1"), Some(Ordering::Equal));
        assert_eq!(version_priority("v2", "v1"), Some(Ordering::Greater));
        assert_eq!(version_priority("latest", "v1"), None);
    }
}
