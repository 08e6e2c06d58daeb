//! The transformers a kustomization's own fields ask for, run in kustomize's order.

use std::collections::BTreeMap;

use serde_json::Value;

use super::images::set_images;
use super::labels::set_map_entries;
use super::namespace::set_namespace;
use super::patch::apply_patch;
use super::prefix_suffix::add_prefix_suffix;
use super::replacements::apply_replacement;
use super::replicas::set_replicas;
use crate::build::{Accumulator, Builder, Target};
use crate::error::Error;
use crate::types::{FieldSpec, Patch};

/// Runs the kustomization's builtin transformers in kustomize's order.
pub(crate) fn run_builtin_transformers(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    let k = &target.kustomization;
    let file = &target.file;
    let record = |kind: &str, acc: &mut Accumulator| {
        builder.record_transformer(target, kind, &mut acc.resources);
    };
    for entry in &k.patches_strategic_merge {
        let text = load_patch_text(builder, target, entry, "patchesStrategicMerge")?;
        apply_patch(
            &mut acc.resources,
            &builder.schemas,
            &text,
            None,
            &BTreeMap::new(),
        )
        .map_err(|m| Error::invalid(file, "patchesStrategicMerge", m))?;
    }
    if !k.patches_strategic_merge.is_empty() {
        record("PatchStrategicMergeTransformer", acc);
    }
    for patch in &k.patches {
        let text = patch_body(builder, target, patch, "patches")?;
        apply_patch(
            &mut acc.resources,
            &builder.schemas,
            &text,
            patch.target.as_ref(),
            &patch.options,
        )
        .map_err(|m| Error::invalid(file, "patches", m))?;
        record("PatchTransformer", acc);
    }
    if !k.namespace.is_empty() {
        set_namespace(
            &mut acc.resources,
            &k.namespace,
            &acc.config.namespace,
            false,
            "",
        );
        record("NamespaceTransformer", acc);
    }
    if !k.name_prefix.is_empty() {
        add_prefix_suffix(
            &mut acc.resources,
            &k.name_prefix,
            "",
            &acc.config.name_prefix,
        );
        record("PrefixTransformer", acc);
    }
    if !k.name_suffix.is_empty() {
        add_prefix_suffix(
            &mut acc.resources,
            "",
            &k.name_suffix,
            &acc.config.name_suffix,
        );
        record("SuffixTransformer", acc);
    }
    for label in &k.labels {
        let mut specs = label.fields.clone();
        if label.include_selectors {
            merge_specs(&mut specs, &acc.config.common_labels);
        } else {
            if label.include_templates {
                merge_specs(&mut specs, &acc.config.template_labels);
            }
            merge_specs(
                &mut specs,
                &[FieldSpec {
                    path: "metadata/labels".into(),
                    create: true,
                    ..FieldSpec::default()
                }],
            );
        }
        set_map_entries(&mut acc.resources, &label.pairs, &specs);
        record("LabelTransformer", acc);
    }
    if !k.common_labels.is_empty() {
        set_map_entries(
            &mut acc.resources,
            &k.common_labels,
            &acc.config.common_labels,
        );
        record("LabelTransformer", acc);
    }
    if !k.common_annotations.is_empty() {
        set_map_entries(
            &mut acc.resources,
            &k.common_annotations,
            &acc.config.common_annotations,
        );
        record("AnnotationsTransformer", acc);
    }
    for patch in &k.patches_json6902 {
        let text = patch_body(builder, target, patch, "patchesJson6902")?;
        if patch.target.is_none() {
            return Err(Error::invalid(
                file,
                "patchesJson6902",
                "must specify a target for patch",
            ));
        }
        apply_patch(
            &mut acc.resources,
            &builder.schemas,
            &text,
            patch.target.as_ref(),
            &patch.options,
        )
        .map_err(|m| Error::invalid(file, "patchesJson6902", m))?;
        record("PatchJson6902Transformer", acc);
    }
    for replica in &k.replicas {
        set_replicas(
            &mut acc.resources,
            &replica.name,
            replica.count,
            &acc.config.replicas,
        );
        record("ReplicaCountTransformer", acc);
    }
    for image in &k.images {
        set_images(&mut acc.resources, image, &acc.config.images);
        record("ImageTagTransformer", acc);
    }
    for entry in &k.replacements {
        let replacements = match entry {
            crate::types::ReplacementField::Path { path } => builder
                .read_field_documents(target, path, "replacements")?
                .into_iter()
                .flat_map(|d| match d {
                    Value::Array(items) => items,
                    other => vec![other],
                })
                .collect(),
            crate::types::ReplacementField::Inline(value) => vec![value.clone()],
        };
        for replacement in &replacements {
            apply_replacement(&mut acc.resources, replacement)
                .map_err(|m| Error::invalid(file, "replacements", m))?;
        }
    }
    if !k.replacements.is_empty() {
        record("ReplacementTransformer", acc);
    }
    Ok(())
}

fn merge_specs(into: &mut Vec<FieldSpec>, from: &[FieldSpec]) {
    for spec in from {
        if !into.iter().any(|s| {
            s.path == spec.path
                && s.kind == spec.kind
                && s.group == spec.group
                && s.version == spec.version
        }) {
            into.push(spec.clone());
        }
    }
}

fn load_patch_text(
    builder: &Builder<'_>,
    target: &Target,
    entry: &str,
    field: &str,
) -> Result<String, Error> {
    // An entry is an inline patch when it spans lines, or when no such file exists and it
    // reads as YAML.
    let inline = entry.contains('\n')
        || (entry.contains(':')
            && !builder
                .fs
                .exists(&crate::fs::normalize(&target.dir.join(entry))));
    if inline {
        return Ok(entry.to_owned());
    }
    builder.read_field_text(target, entry, field)
}

fn patch_body(
    builder: &Builder<'_>,
    target: &Target,
    patch: &Patch,
    field: &str,
) -> Result<String, Error> {
    match (patch.path.is_empty(), patch.patch.is_empty()) {
        (false, true) => builder.read_field_text(target, &patch.path, field),
        (true, false) => Ok(patch.patch.clone()),
        (false, false) => Err(Error::invalid(
            &target.file,
            field,
            "patch and path can't be set at the same time",
        )),
        (true, true) => Err(Error::invalid(
            &target.file,
            field,
            "must specify one of patch and path",
        )),
    }
}
