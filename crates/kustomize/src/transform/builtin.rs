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

/// One step of [`run_builtin_transformers`]: the transformers for one group of fields.
type Step = fn(&Builder<'_>, &Target, &mut Accumulator) -> Result<(), Error>;

/// The kustomization's fields in the order kustomize transforms them.
const STEPS: &[Step] = &[
    strategic_merge_patches,
    patches,
    namespace,
    prefix_and_suffix,
    labels_and_annotations,
    json6902_patches,
    replicas_and_images,
    replacements,
];

/// Runs the kustomization's builtin transformers in kustomize's order.
pub(crate) fn run_builtin_transformers(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    STEPS.iter().try_for_each(|step| step(builder, target, acc))
}

/// Records `kind` as the transformer that last touched every resource (`buildMetadata`).
fn record(builder: &Builder<'_>, target: &Target, kind: &str, acc: &mut Accumulator) {
    builder.record_transformer(target, kind, &mut acc.resources);
}

/// `patchesStrategicMerge`: file names or inline patches, recorded once for all.
fn strategic_merge_patches(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    let k = &target.kustomization;
    for entry in &k.patches_strategic_merge {
        let text = load_patch_text(builder, target, entry, "patchesStrategicMerge")?;
        apply_patch(
            &mut acc.resources,
            &builder.schemas,
            &text,
            None,
            &BTreeMap::new(),
        )
        .map_err(|m| Error::transform(&target.file, "patchesStrategicMerge", m))?;
    }
    if !k.patches_strategic_merge.is_empty() {
        record(builder, target, "PatchStrategicMergeTransformer", acc);
    }
    Ok(())
}

/// `patches`: strategic merge or JSON 6902, each with an optional target.
fn patches(builder: &Builder<'_>, target: &Target, acc: &mut Accumulator) -> Result<(), Error> {
    for patch in &target.kustomization.patches {
        let text = patch_body(builder, target, patch, "patches")?;
        apply_patch(
            &mut acc.resources,
            &builder.schemas,
            &text,
            patch.target.as_ref(),
            &patch.options,
        )
        .map_err(|m| Error::transform(&target.file, "patches", m))?;
        record(builder, target, "PatchTransformer", acc);
    }
    Ok(())
}

/// `namespace`.
#[allow(clippy::unnecessary_wraps)] // every step of `STEPS` has the same signature
fn namespace(builder: &Builder<'_>, target: &Target, acc: &mut Accumulator) -> Result<(), Error> {
    let k = &target.kustomization;
    if !k.namespace.is_empty() {
        set_namespace(
            &mut acc.resources,
            &k.namespace,
            &acc.config.namespace,
            false,
            "",
        );
        record(builder, target, "NamespaceTransformer", acc);
    }
    Ok(())
}

/// `namePrefix`, then `nameSuffix`.
#[allow(clippy::unnecessary_wraps)] // every step of `STEPS` has the same signature
fn prefix_and_suffix(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    let k = &target.kustomization;
    if !k.name_prefix.is_empty() {
        add_prefix_suffix(
            &mut acc.resources,
            &k.name_prefix,
            "",
            &acc.config.name_prefix,
        );
        record(builder, target, "PrefixTransformer", acc);
    }
    if !k.name_suffix.is_empty() {
        add_prefix_suffix(
            &mut acc.resources,
            "",
            &k.name_suffix,
            &acc.config.name_suffix,
        );
        record(builder, target, "SuffixTransformer", acc);
    }
    Ok(())
}

/// `labels` (each with its own reach), then `commonLabels` and `commonAnnotations`.
#[allow(clippy::unnecessary_wraps)] // every step of `STEPS` has the same signature
fn labels_and_annotations(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    let k = &target.kustomization;
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
        record(builder, target, "LabelTransformer", acc);
    }
    if !k.common_labels.is_empty() {
        set_map_entries(
            &mut acc.resources,
            &k.common_labels,
            &acc.config.common_labels,
        );
        record(builder, target, "LabelTransformer", acc);
    }
    if !k.common_annotations.is_empty() {
        set_map_entries(
            &mut acc.resources,
            &k.common_annotations,
            &acc.config.common_annotations,
        );
        record(builder, target, "AnnotationsTransformer", acc);
    }
    Ok(())
}

/// `patchesJson6902`: each needs a target.
fn json6902_patches(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    let file = &target.file;
    for patch in &target.kustomization.patches_json6902 {
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
        .map_err(|m| Error::transform(file, "patchesJson6902", m))?;
        record(builder, target, "PatchJson6902Transformer", acc);
    }
    Ok(())
}

/// `replicas`, then `images`.
#[allow(clippy::unnecessary_wraps)] // every step of `STEPS` has the same signature
fn replicas_and_images(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    let k = &target.kustomization;
    for replica in &k.replicas {
        set_replicas(
            &mut acc.resources,
            &replica.name,
            replica.count,
            &acc.config.replicas,
        );
        record(builder, target, "ReplicaCountTransformer", acc);
    }
    for image in &k.images {
        set_images(&mut acc.resources, image, &acc.config.images);
        record(builder, target, "ImageTagTransformer", acc);
    }
    Ok(())
}

/// `replacements`: inline or read from files (a document or a list of them).
fn replacements(
    builder: &Builder<'_>,
    target: &Target,
    acc: &mut Accumulator,
) -> Result<(), Error> {
    let k = &target.kustomization;
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
                .map_err(|m| Error::transform(&target.file, "replacements", m))?;
        }
    }
    if !k.replacements.is_empty() {
        record(builder, target, "ReplacementTransformer", acc);
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
