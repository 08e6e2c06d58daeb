//! OpenAPI v3 documents (`/openapi/v3` and one per group/version), as kubectl reads them to find
//! patch strategies, to check that the server validates fields (`fieldValidation`), and for
//! `kubectl explain`. `/openapi/v2` is not served: clients fall back to v3.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Map, Value, json};

use crate::registry::{Registry, ResourceType};

fn component_name(rt: &ResourceType) -> String {
    if rt.builtin
        && let Some(r) = rt
            .openapi
            .as_ref()
            .and_then(|o| o.get("$ref"))
            .and_then(Value::as_str)
    {
        return r.trim_start_matches("#/components/schemas/").to_owned();
    }
    let reversed: Vec<&str> = rt.group.split('.').rev().collect();
    format!("{}.{}.{}", reversed.join("."), rt.version, rt.kind)
}

fn collect_refs(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(m) => {
            for (k, v) in m {
                if k == "$ref" {
                    if let Some(r) = v.as_str() {
                        out.insert(
                            r.trim_start_matches("#/components/schemas/")
                                .trim_start_matches("#/definitions/")
                                .to_owned(),
                        );
                    }
                } else {
                    collect_refs(v, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

fn param(name: &str) -> Value {
    json!({"name": name, "in": "query", "description": "", "schema": {"type": "string", "uniqueItems": true}})
}

fn gvk(rt: &ResourceType) -> Value {
    json!({"group": rt.group, "version": rt.version, "kind": rt.kind})
}

fn operation(rt: &ResourceType, action: &str, schema_ref: &str, params: &[&str]) -> Value {
    let ok = json!({"description": "OK", "content": {"application/json": {"schema": {"$ref": schema_ref}}}});
    let mut op = json!({
        "operationId": format!("{action}{}", rt.kind),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(rt),
        "parameters": params.iter().map(|p| param(p)).collect::<Vec<_>>(),
        "responses": {"200": ok},
    });
    if matches!(action, "put" | "patch" | "post") {
        let types: &[&str] = if action == "patch" {
            &[
                "application/apply-patch+yaml",
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
            ]
        } else {
            &["application/json"]
        };
        let content: Map<String, Value> = types
            .iter()
            .map(|t| ((*t).to_owned(), json!({"schema": {"$ref": schema_ref}})))
            .collect();
        op["requestBody"] = json!({"content": content, "required": true});
    }
    op
}

/// The document for one group/version.
pub fn group_version_document(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let groups = registry.groups();
    let (_, versions) = groups.iter().find(|(g, _)| g == group)?;
    let (_, types) = versions.iter().find(|(v, _)| v == version)?;
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let builtin_defs = capstan_schema::builtin::definitions();
    let mut paths = Map::new();
    let mut schemas: BTreeMap<String, Value> = BTreeMap::new();
    let mut wanted = BTreeSet::new();
    for rt in types {
        let name = component_name(rt);
        let schema_ref = format!("#/components/schemas/{name}");
        if rt.builtin {
            wanted.insert(name.clone());
        } else if let Some(schema) = &rt.openapi {
            let mut s = schema.clone();
            s["x-kubernetes-group-version-kind"] = json!([gvk(rt)]);
            collect_refs(&s, &mut wanted);
            schemas.insert(name.clone(), s);
        }
        let write = ["dryRun", "fieldManager", "fieldValidation", "pretty"];
        let patch = [
            "dryRun",
            "fieldManager",
            "fieldValidation",
            "force",
            "pretty",
        ];
        let item = json!({
            "get": operation(rt, "get", &schema_ref, &["pretty"]),
            "put": operation(rt, "put", &schema_ref, &write),
            "patch": operation(rt, "patch", &schema_ref, &patch),
            "delete": operation(rt, "delete", &schema_ref, &["dryRun", "gracePeriodSeconds", "propagationPolicy"]),
        });
        let collection = json!({
            "get": operation(rt, "list", &schema_ref, &["labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "watch"]),
            "post": operation(rt, "post", &schema_ref, &write),
        });
        let base = if rt.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("{prefix}/{}", rt.plural)
        };
        paths.insert(format!("{base}/{{name}}"), item);
        paths.insert(base, collection);
        if rt.status {
            let mut status = json!({
                "get": operation(rt, "get", &schema_ref, &["pretty"]),
                "put": operation(rt, "put", &schema_ref, &write),
                "patch": operation(rt, "patch", &schema_ref, &patch),
            });
            // Only the main resource path names the kind for patch discovery.
            if let Some(p) = status.get_mut("patch").and_then(Value::as_object_mut) {
                p.remove("x-kubernetes-group-version-kind");
            }
            let base = if rt.namespaced {
                format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
            } else {
                format!("{prefix}/{}", rt.plural)
            };
            paths.insert(format!("{base}/{{name}}/status"), status);
        }
    }
    // Close over references into the built-in definitions.
    let mut queue: Vec<String> = wanted.into_iter().collect();
    while let Some(name) = queue.pop() {
        if schemas.contains_key(&name) {
            continue;
        }
        if let Some(def) = builtin_defs.get(&name) {
            let mut refs = BTreeSet::new();
            collect_refs(def, &mut refs);
            schemas.insert(name, def.clone());
            queue.extend(refs.into_iter().filter(|r| !schemas.contains_key(r)));
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v{}.{}.0", crate::discovery::KUBERNETES_VERSION.0, crate::discovery::KUBERNETES_VERSION.1)},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// A short content hash (FNV-1a) for `?hash=` cache busting.
pub fn content_hash(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// Group/version paths of the root document, e.g. `api/v1`, `apis/apps/v1`.
pub fn group_versions(registry: &Registry) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (g, versions) in registry.groups() {
        for (v, _) in versions {
            let path = if g.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{g}/{v}")
            };
            out.push((path, g.clone(), v));
        }
    }
    out
}

/// Cached serialised documents, keyed by group/version path; invalidated when the registry changes.
#[derive(Default, Debug)]
pub struct Cache {
    generation: u64,
    docs: BTreeMap<String, (Arc<Vec<u8>>, String)>,
}

impl Cache {
    /// The serialised document and its hash for a group/version.
    pub fn get(
        &mut self,
        registry: &Registry,
        path: &str,
        group: &str,
        version: &str,
    ) -> Option<(Arc<Vec<u8>>, String)> {
        if self.generation != registry.generation() {
            self.docs.clear();
            self.generation = registry.generation();
        }
        if let Some(hit) = self.docs.get(path) {
            return Some(hit.clone());
        }
        // Documents of built-in kinds only are the same in every server of the process: build once.
        let builtin_key = builtin_key(registry, path, group, version);
        if let Some(key) = &builtin_key
            && let Some(hit) = shared()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(key)
        {
            self.docs.insert(path.to_owned(), hit.clone());
            return Some(hit.clone());
        }
        let doc = group_version_document(registry, group, version)?;
        let bytes = serde_json::to_vec(&doc).ok()?;
        let hash = content_hash(&bytes);
        let entry = (Arc::new(bytes), hash);
        self.docs.insert(path.to_owned(), entry.clone());
        if let Some(key) = builtin_key {
            shared()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(key, entry.clone());
        }
        Some(entry)
    }
}

type Shared = Mutex<BTreeMap<String, (Arc<Vec<u8>>, String)>>;

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(Shared::default)
}

/// A key naming a group/version's document when every kind in it is built in.
fn builtin_key(registry: &Registry, path: &str, group: &str, version: &str) -> Option<String> {
    let groups = registry.groups();
    let (_, versions) = groups.iter().find(|(g, _)| g == group)?;
    let (_, types) = versions.iter().find(|(v, _)| v == version)?;
    if !types.iter().all(|t| t.builtin) {
        return None;
    }
    let plurals: Vec<&str> = types.iter().map(|t| t.plural.as_str()).collect();
    Some(format!("{path}:{}", plurals.join(",")))
}
