//! The image tag transformer.

use regex::Regex;
use serde_json::Value;

use crate::fieldspec::{self, applies};
use crate::resource::Resource;
use crate::types::{FieldSpec, Image};

/// Splits an image reference into name, tag and digest as kustomize does.
pub(crate) fn split_image(image: &str) -> (String, String, String) {
    let slash = image.find('/').filter(|&i| i > 0).unwrap_or(0);
    let search = &image[slash..];
    let at = search.find('@');
    let colon = search.find(':');
    match (at, colon) {
        (Some(at), colon) if colon.is_none_or(|c| at < c) => {
            let at = at + slash;
            (
                image[..at].to_owned(),
                String::new(),
                image[at + 1..].to_owned(),
            )
        }
        (Some(at), Some(colon)) => {
            let (at, colon) = (at + slash, colon + slash);
            (
                image[..colon].to_owned(),
                image[colon + 1..at].to_owned(),
                image[at + 1..].to_owned(),
            )
        }
        (_, Some(colon)) => {
            let colon = colon + slash;
            (
                image[..colon].to_owned(),
                image[colon + 1..].to_owned(),
                String::new(),
            )
        }
        (_, None) => (image.to_owned(), String::new(), String::new()),
    }
}

/// Matches image references naming `name` (kustomize builds the same pattern, unescaped).
fn image_pattern(name: &str) -> Option<Regex> {
    Regex::new(&format!(
        "^{name}(:[a-zA-Z0-9_.{{}}-]*)?(@sha256:[a-zA-Z0-9_.{{}}-]*)?$"
    ))
    .ok()
}

fn rewrite_image(value: &mut Value, image: &Image, pattern: &Regex) {
    let Some(current) = value.as_str() else {
        return;
    };
    if !pattern.is_match(current) {
        return;
    }
    let (mut name, mut tag, mut digest) = split_image(current);
    if !image.new_name.is_empty() {
        name.clone_from(&image.new_name);
    }
    if !image.new_tag.is_empty() && !image.digest.is_empty() {
        tag.clone_from(&image.new_tag);
        digest.clone_from(&image.digest);
    } else if !image.new_tag.is_empty() {
        tag.clone_from(&image.new_tag);
        digest.clear();
    } else if !image.digest.is_empty() {
        tag.clear();
        digest.clone_from(&image.digest);
    }
    if !tag.is_empty() {
        name = format!("{name}:{tag}");
    }
    if !digest.is_empty() {
        name = format!("{name}@{digest}");
    }
    *value = Value::String(name);
}

fn walk_containers(node: &mut Value, image: &Image, pattern: &Regex) {
    match node {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                walk_containers(child, image, pattern);
                if (key == "containers" || key == "initContainers")
                    && let Some(list) = child.as_array_mut()
                {
                    for container in list {
                        if let Some(slot) = container.get_mut("image") {
                            rewrite_image(slot, image, pattern);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                walk_containers(item, image, pattern);
            }
        }
        _ => {}
    }
}

/// The image tag transformer.
pub(crate) fn set_images(resources: &mut [Resource], image: &Image, specs: &[FieldSpec]) {
    // A name that is no valid pattern matches nothing, as in kustomize.
    let Some(pattern) = image_pattern(&image.name) else {
        return;
    };
    for resource in resources.iter_mut() {
        if resource.kind() != "CustomResourceDefinition" {
            walk_containers(&mut resource.object, image, &pattern);
        }
        let id = resource.current_id();
        for spec in specs.iter().filter(|s| applies(s, &id)) {
            let _ = fieldspec::visit(&mut resource.object, &spec.path, false, &mut |v| {
                rewrite_image(v, image, &pattern);
                Ok(())
            });
        }
    }
}
