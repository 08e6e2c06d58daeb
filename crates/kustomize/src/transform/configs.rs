//! Builtin transformer configurations listed under `transformers:`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::field_path::scalar_text;
use super::images::set_images;
use super::labels::set_map_entries;
use super::namespace::set_namespace;
use super::patch::apply_patch;
use super::prefix_suffix::add_prefix_suffix;
use super::replacements::apply_replacement;
use super::replicas::set_replicas;
use super::value_add::value_add;
use crate::build::{Accumulator, Builder, Target};
use crate::error::{Error, TransformError};
use crate::types::{FieldSpec, Image, Selector};
use crate::yaml;

/// Runs builtin transformer configurations listed under `transformers:`.
pub(crate) fn run_transformer_configs(
    builder: &mut Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    let file = &target.file;
    for entry in &target.kustomization.transformers {
        let documents = if entry.contains('\n') || entry.contains(": ") {
            yaml::parse_documents(entry).map_err(|message| Error::Yaml {
                path: file.clone(),
                message: message.message,
            })?
        } else {
            let path = crate::fs::normalize(&target.dir.join(entry));
            if builder.fs.is_dir(&path) {
                builder.build_subtree(&path, "transformers")?
            } else {
                builder.read_field_documents(target, entry, "transformers")?
            }
        };
        for document in documents {
            apply_transformer_config(builder, target, acc, &document)
                .map_err(|m| Error::transform(file, "transformers", m))?;
        }
    }
    Ok(())
}

fn specs_of(config: &Value, key: &str) -> Result<Vec<FieldSpec>, TransformError> {
    match config.get(key) {
        Some(value) => {
            serde_json::from_value(value.clone()).map_err(|e| TransformError::decode(key, e))
        }
        None => Ok(Vec::new()),
    }
}

fn string_map(config: &Value, key: &str) -> BTreeMap<String, String> {
    config
        .get(key)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), scalar_text(v).unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

fn apply_transformer_config(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
    config: &Value,
) -> Result<(), TransformError> {
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if api_version != "builtin" {
        return Err(format!(
            "transformer {kind} ({api_version}): only builtin transformers are supported (no exec or Go plugins)"
        ).into());
    }
    match kind {
        "PrefixSuffixTransformer" | "PrefixTransformer" | "SuffixTransformer" => {
            let prefix = config.get("prefix").and_then(Value::as_str).unwrap_or("");
            let suffix = config.get("suffix").and_then(Value::as_str).unwrap_or("");
            let specs = specs_of(config, "fieldSpecs")?;
            add_prefix_suffix(&mut acc.resources, prefix, suffix, &specs);
        }
        "LabelTransformer" => {
            set_map_entries(
                &mut acc.resources,
                &string_map(config, "labels"),
                &specs_of(config, "fieldSpecs")?,
            );
        }
        "AnnotationsTransformer" => {
            set_map_entries(
                &mut acc.resources,
                &string_map(config, "annotations"),
                &specs_of(config, "fieldSpecs")?,
            );
        }
        "NamespaceTransformer" => namespace(acc, config)?,
        "ImageTagTransformer" => images(acc, config)?,
        "ReplicaCountTransformer" => replicas(acc, config)?,
        "PatchTransformer" | "PatchJson6902Transformer" => patch(builder, target, acc, config)?,
        "PatchStrategicMergeTransformer" => strategic_merge_patches(builder, target, acc, config)?,
        "ReplacementTransformer" => {
            for replacement in config
                .get("replacements")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                apply_replacement(&mut acc.resources, replacement)?;
            }
        }
        "ValueAddTransformer" => value_add(target, &mut acc.resources, config)?,
        "SortOrderTransformer" => {}
        "HelmChartInflationGenerator" => return Err("helmCharts: not supported yet".into()),
        other => return Err(format!("builtin transformer {other:?} is not supported").into()),
    }
    Ok(())
}

/// `NamespaceTransformer`: `metadata.namespace`, `unsetOnly`, `setRoleBindingSubjects`.
fn namespace(acc: &mut Accumulator, config: &Value) -> Result<(), TransformError> {
    let namespace = config
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let unset_only = config
        .get("unsetOnly")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let subjects = config
        .get("setRoleBindingSubjects")
        .and_then(Value::as_str)
        .unwrap_or("");
    let subjects = match subjects {
        "allServiceAccounts" => "allServiceAccounts",
        "none" => "none",
        _ => "",
    };
    set_namespace(
        &mut acc.resources,
        namespace,
        &specs_of(config, "fieldSpecs")?,
        unset_only,
        subjects,
    );
    Ok(())
}

/// `ImageTagTransformer`: `imageTag`, on the builtin image fields unless `fieldSpecs` name others.
fn images(acc: &mut Accumulator, config: &Value) -> Result<(), TransformError> {
    let image: Image = serde_json::from_value(config.get("imageTag").cloned().unwrap_or_default())
        .map_err(|e| TransformError::decode("imageTag", e))?;
    let mut specs = specs_of(config, "fieldSpecs")?;
    if specs.is_empty() {
        specs.clone_from(&acc.config.images);
    }
    set_images(&mut acc.resources, &image, &specs);
    Ok(())
}

/// `ReplicaCountTransformer`: `replica.name` and `replica.count`.
fn replicas(acc: &mut Accumulator, config: &Value) -> Result<(), TransformError> {
    let name = config
        .pointer("/replica/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let count = config
        .pointer("/replica/count")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    set_replicas(
        &mut acc.resources,
        name,
        count,
        &specs_of(config, "fieldSpecs")?,
    );
    Ok(())
}

/// `PatchTransformer` and `PatchJson6902Transformer`: `patch`/`jsonOp` inline or `path`,
/// with an optional `target`.
fn patch(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
    config: &Value,
) -> Result<(), TransformError> {
    let selector: Option<Selector> = match config.get("target") {
        Some(t) => Some(
            serde_json::from_value(t.clone()).map_err(|e| TransformError::decode("target", e))?,
        ),
        None => None,
    };
    let options: BTreeMap<String, bool> = config
        .get("options")
        .and_then(|o| serde_json::from_value(o.clone()).ok())
        .unwrap_or_default();
    let text = if let Some(path) = config.get("path").and_then(Value::as_str) {
        builder
            .read_field_text(target, path, "transformers")
            .map_err(|e| TransformError::File(Box::new(e)))?
    } else {
        config
            .get("patch")
            .or_else(|| config.get("jsonOp"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    apply_patch(
        &mut acc.resources,
        &builder.schemas,
        &text,
        selector.as_ref(),
        &options,
    )
}

/// `PatchStrategicMergeTransformer`: the files under `paths`, then inline `patches`.
fn strategic_merge_patches(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
    config: &Value,
) -> Result<(), TransformError> {
    for entry in config
        .get("paths")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let path = entry.as_str().unwrap_or("");
        let text = builder
            .read_field_text(target, path, "transformers")
            .map_err(|e| TransformError::File(Box::new(e)))?;
        apply_patch(
            &mut acc.resources,
            &builder.schemas,
            &text,
            None,
            &BTreeMap::new(),
        )?;
    }
    if let Some(patches) = config.get("patches").and_then(Value::as_str) {
        apply_patch(
            &mut acc.resources,
            &builder.schemas,
            patches,
            None,
            &BTreeMap::new(),
        )?;
    }
    Ok(())
}
