//! Built-in resource types, from `capstan_schema::builtin`.

use serde_json::json;

use crate::registry::{PrinterColumn, ResourceType};

fn column(name: &str, type_: &str, json_path: &str) -> PrinterColumn {
    PrinterColumn {
        name: name.to_owned(),
        type_: type_.to_owned(),
        format: String::new(),
        json_path: json_path.to_owned(),
        priority: 0,
        description: String::new(),
    }
}

/// Table columns of built-in kinds, after NAME (AGE is appended by the table printer).
fn columns(group: &str, plural: &str) -> Vec<PrinterColumn> {
    match (group, plural) {
        ("", "namespaces") => vec![column("Status", "string", ".status.phase")],
        ("", "configmaps") => vec![column("Data", "integer", "@count:.data,.binaryData")],
        ("", "secrets") => vec![
            column("Type", "string", ".type"),
            column("Data", "integer", "@count:.data"),
        ],
        ("", "services") => vec![
            column("Type", "string", ".spec.type"),
            column("Cluster-IP", "string", ".spec.clusterIP"),
            column("External-IP", "string", "@externalip"),
            column("Port(s)", "string", "@ports"),
        ],
        ("apps", "deployments") => vec![
            column(
                "Ready",
                "string",
                "@ready:.status.readyReplicas,.spec.replicas",
            ),
            column("Up-to-date", "integer", ".status.updatedReplicas"),
            column("Available", "integer", ".status.availableReplicas"),
        ],
        ("apps", "statefulsets") => vec![column(
            "Ready",
            "string",
            "@ready:.status.readyReplicas,.spec.replicas",
        )],
        ("apps", "replicasets") => vec![
            column("Desired", "integer", ".spec.replicas"),
            column("Current", "integer", ".status.replicas"),
            column("Ready", "integer", ".status.readyReplicas"),
        ],
        ("apps", "daemonsets") => vec![
            column("Desired", "integer", ".status.desiredNumberScheduled"),
            column("Current", "integer", ".status.currentNumberScheduled"),
            column("Ready", "integer", ".status.numberReady"),
            column("Up-to-date", "integer", ".status.updatedNumberScheduled"),
            column("Available", "integer", ".status.numberAvailable"),
        ],
        ("batch", "jobs") => vec![
            column("Status", "string", "@jobstatus"),
            column("Completions", "string", "@completions"),
        ],
        ("", "pods") => vec![
            column("Ready", "string", "@podready"),
            column("Status", "string", ".status.phase"),
        ],
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            vec![column("Created At", "date", ".metadata.creationTimestamp")]
        }
        _ => Vec::new(),
    }
}

/// Every built-in resource type.
pub fn resource_types() -> Vec<ResourceType> {
    capstan_schema::builtin::kinds()
        .iter()
        .map(|k| ResourceType {
            group: k.group.to_owned(),
            version: k.version.to_owned(),
            kind: k.kind.to_owned(),
            plural: k.plural.to_owned(),
            singular: k.singular.to_owned(),
            short_names: k.short_names.iter().map(|s| (*s).to_owned()).collect(),
            namespaced: k.namespaced,
            categories: k.categories.iter().map(|s| (*s).to_owned()).collect(),
            status: k.subresources.contains(&"status"),
            scale: k.subresources.contains(&"scale"),
            schema: capstan_schema::builtin::schema(k.group, k.version, k.kind),
            openapi: Some(json!({"$ref": format!("#/components/schemas/{}", k.schema_name)})),
            builtin: true,
            printer_columns: columns(k.group, k.plural),
            storage_version: k.version.to_owned(),
        })
        .collect()
}
