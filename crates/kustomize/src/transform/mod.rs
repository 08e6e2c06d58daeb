//! The builtin transformers, one module each: patches, namespace, prefix/suffix, labels and
//! annotations, images, replicas, replacements, value-add, and the top-level hash, name-reference,
//! vars and sort steps. `builtin` runs those a kustomization's fields ask for, in kustomize's
//! order; `configs` runs transformer configurations listed under `transformers:`.

mod builtin;
mod configs;
mod crd;
mod field_path;
mod hash;
mod images;
mod labels;
mod name_reference;
mod namespace;
mod patch;
mod prefix_suffix;
mod replacements;
mod replicas;
mod select;
mod sort;
mod value_add;
mod vars;

pub(crate) use builtin::run_builtin_transformers;
pub(crate) use configs::run_transformer_configs;
pub(crate) use crd::config_from_crd;
pub(crate) use hash::add_hash_suffixes;
pub(crate) use name_reference::fix_name_references;
pub(crate) use sort::sort;
pub(crate) use vars::resolve_vars;

#[cfg(test)]
mod tests;
