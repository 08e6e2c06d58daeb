//! Transformer configuration: which fields each builtin transformer touches.

use crate::error::TransformError;
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

use serde_json::Value;

use crate::types::FieldSpec;

/// A kind whose name other objects refer to, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NameBackRef {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub referrers: Vec<FieldSpec>,
}

/// Field specs per transformer, as kustomize's `builtinconfig.TransformerConfig`.
#[derive(Clone, Debug, Default)]
pub(crate) struct TransformerConfig {
    pub name_prefix: Vec<FieldSpec>,
    pub name_suffix: Vec<FieldSpec>,
    pub common_labels: Vec<FieldSpec>,
    pub template_labels: Vec<FieldSpec>,
    pub common_annotations: Vec<FieldSpec>,
    pub namespace: Vec<FieldSpec>,
    pub var_reference: Vec<FieldSpec>,
    pub name_reference: Vec<NameBackRef>,
    pub images: Vec<FieldSpec>,
    pub replicas: Vec<FieldSpec>,
}

const BUILTIN: &str = include_str!("builtin_fieldspecs.txt");

fn dash(s: &str) -> String {
    if s == "-" {
        String::new()
    } else {
        s.to_owned()
    }
}

impl TransformerConfig {
    /// kustomize's default configuration (parsed once, then cloned).
    pub fn builtin() -> Self {
        static BUILTIN_CONFIG: OnceLock<TransformerConfig> = OnceLock::new();
        BUILTIN_CONFIG.get_or_init(Self::parse_builtin).clone()
    }

    fn parse_builtin() -> Self {
        let mut config = TransformerConfig::default();
        for line in BUILTIN.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            if parts.len() != 6 {
                continue;
            }
            let spec = FieldSpec {
                kind: dash(parts[1]),
                group: dash(parts[2]),
                version: dash(parts[3]),
                path: parts[4].to_owned(),
                create: parts[5] == "create",
            };
            if let Some(target) = parts[0].strip_prefix("nameReference=") {
                let t: Vec<&str> = target.split(':').collect();
                config.add_name_reference(NameBackRef {
                    kind: dash(t[0]),
                    group: dash(t.get(1).copied().unwrap_or("-")),
                    version: dash(t.get(2).copied().unwrap_or("-")),
                    referrers: vec![spec],
                });
                continue;
            }
            let list = match parts[0] {
                "commonLabels" => &mut config.common_labels,
                "templateLabels" => &mut config.template_labels,
                "commonAnnotations" => &mut config.common_annotations,
                "namespace" => &mut config.namespace,
                "images" => &mut config.images,
                "replicas" => &mut config.replicas,
                "varReference" => &mut config.var_reference,
                "namePrefix" => &mut config.name_prefix,
                "nameSuffix" => &mut config.name_suffix,
                _ => continue,
            };
            list.push(spec);
        }
        config
    }

    fn add_name_reference(&mut self, reference: NameBackRef) {
        self.add_name_references(vec![reference]);
    }

    /// Adds name references, merging the referrers of targets already present (linear time:
    /// every accumulator holds the builtin table, so merges are frequent).
    fn add_name_references(&mut self, references: Vec<NameBackRef>) {
        let mut index: HashMap<(String, String, String), usize> = self
            .name_reference
            .iter()
            .enumerate()
            .map(|(i, r)| ((r.kind.clone(), r.group.clone(), r.version.clone()), i))
            .collect();
        for reference in references {
            let key = (
                reference.kind.clone(),
                reference.group.clone(),
                reference.version.clone(),
            );
            if let Some(&at) = index.get(&key) {
                add_specs(&mut self.name_reference[at].referrers, reference.referrers);
            } else {
                index.insert(key, self.name_reference.len());
                self.name_reference.push(reference);
            }
        }
    }

    /// Merges another configuration (from `configurations:` or CRDs) into this one.
    pub fn merge(&mut self, other: TransformerConfig) {
        add_specs(&mut self.name_prefix, other.name_prefix);
        add_specs(&mut self.name_suffix, other.name_suffix);
        add_specs(&mut self.common_labels, other.common_labels);
        add_specs(&mut self.template_labels, other.template_labels);
        add_specs(&mut self.common_annotations, other.common_annotations);
        add_specs(&mut self.namespace, other.namespace);
        add_specs(&mut self.var_reference, other.var_reference);
        add_specs(&mut self.images, other.images);
        add_specs(&mut self.replicas, other.replicas);
        self.add_name_references(other.name_reference);
    }

    /// Reads a `configurations:` file.
    pub fn from_value(value: &Value) -> Result<Self, TransformError> {
        let mut config = TransformerConfig::default();
        let Some(map) = value.as_object() else {
            return Err("transformer configuration must be a mapping".into());
        };
        for (key, specs) in map {
            if key == "nameReference" {
                for entry in specs.as_array().into_iter().flatten() {
                    let get = |k: &str| {
                        entry
                            .get(k)
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned()
                    };
                    let referrers: Vec<FieldSpec> = serde_json::from_value(
                        entry
                            .get("fieldSpecs")
                            .cloned()
                            .unwrap_or(Value::Array(Vec::new())),
                    )
                    .map_err(|e| TransformError::decode("nameReference.fieldSpecs", e))?;
                    config.add_name_reference(NameBackRef {
                        kind: get("kind"),
                        group: get("group"),
                        version: get("version"),
                        referrers,
                    });
                }
                continue;
            }
            let parsed: Vec<FieldSpec> = serde_json::from_value(specs.clone())
                .map_err(|e| TransformError::decode(key, e))?;
            let list = match key.as_str() {
                "commonLabels" => &mut config.common_labels,
                "templateLabels" => &mut config.template_labels,
                "commonAnnotations" => &mut config.common_annotations,
                "namespace" => &mut config.namespace,
                "images" => &mut config.images,
                "replicas" => &mut config.replicas,
                "varReference" => &mut config.var_reference,
                "namePrefix" => &mut config.name_prefix,
                "nameSuffix" => &mut config.name_suffix,
                _ => continue,
            };
            list.extend(parsed);
        }
        Ok(config)
    }
}

/// Appends the specs of `from` that `into` lacks, keeping order.
fn add_specs(into: &mut Vec<FieldSpec>, from: Vec<FieldSpec>) {
    if from.is_empty() {
        return;
    }
    let mut seen: HashSet<FieldSpec> = into.iter().cloned().collect();
    for spec in from {
        if !seen.contains(&spec) {
            seen.insert(spec.clone());
            into.push(spec);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_tables_load() {
        let config = TransformerConfig::builtin();
        assert!(
            config
                .common_labels
                .iter()
                .any(|s| s.kind == "Service" && s.path == "spec/selector" && s.create)
        );
        let configmap = config
            .name_reference
            .iter()
            .find(|r| r.kind == "ConfigMap")
            .unwrap();
        assert!(
            configmap
                .referrers
                .iter()
                .any(|s| s.kind == "Deployment" && s.path.ends_with("configMapKeyRef/name"))
        );
        assert_eq!(config.name_prefix[0].path, "metadata/name");
    }

    #[test]
    fn configurations_merge() {
        let mut config = TransformerConfig::builtin();
        let extra = TransformerConfig::from_value(&serde_json::json!({
            "nameReference": [{"kind": "Bee", "version": "v1", "fieldSpecs": [{"path": "spec/bee", "kind": "Hive"}]}],
            "commonLabels": [{"path": "spec/x", "kind": "Hive", "create": true}],
        })).unwrap();
        config.merge(extra);
        assert!(config.name_reference.iter().any(|r| r.kind == "Bee"));
        assert!(config.common_labels.iter().any(|s| s.path == "spec/x"));
    }
}
