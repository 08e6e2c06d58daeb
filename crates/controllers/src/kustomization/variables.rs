//! The `postBuild` variables of a Kustomization, collected once for the controller and the CLI
//! (`capstan build`/`diff kustomization`), so both substitute the same values.

use std::collections::BTreeMap;

use capstan_api::kustomize::v1::{PostBuild, SubstituteKind};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};

/// Why the variables could not be collected. The messages are Flux's.
#[derive(Debug, thiserror::Error)]
pub enum VariablesError {
    /// A `substituteFrom` object that is not `optional` does not exist.
    #[error("substitute from '{kind}/{name}' failed: not found")]
    NotFound {
        /// `ConfigMap` or `Secret`.
        kind: &'static str,
        /// Its name.
        name: String,
    },
    /// Reading a `substituteFrom` object failed. The message shows the cause (as Flux words
    /// it); it is also the `source`, so a cause chain adds only the causes below it.
    #[error("substitute from '{kind}/{name}' failed: {source}")]
    Read {
        /// `ConfigMap` or `Secret`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// What the API server answered.
        #[source]
        source: kube::Error,
    },
}

/// The variables of `post_build`: `substituteFrom` in order (later objects win), then
/// `substitute`, which wins over all of them, newlines removed from every value as Flux does;
/// `None` without a `postBuild`.
///
/// The objects are read in `namespace` through `client`; without a client (an offline
/// `capstan build --dry-run`) `substituteFrom` is skipped. Secret values are decoded as UTF-8
/// (invalid bytes replaced).
pub async fn collect(
    post_build: Option<&PostBuild>,
    client: Option<&Client>,
    namespace: &str,
) -> Result<Option<BTreeMap<String, String>>, VariablesError> {
    let Some(post_build) = post_build else {
        return Ok(None);
    };
    let mut variables = BTreeMap::new();
    if let Some(client) = client {
        for reference in &post_build.substitute_from {
            let name = reference.name.clone();
            let data = match reference.kind {
                SubstituteKind::Secret => {
                    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
                    api.get_opt(&reference.name).await.map(|found| {
                        found.map(|secret| {
                            secret
                                .data
                                .unwrap_or_default()
                                .into_iter()
                                .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                                .collect::<BTreeMap<_, _>>()
                        })
                    })
                }
                SubstituteKind::ConfigMap => {
                    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
                    api.get_opt(&reference.name)
                        .await
                        .map(|found| found.map(|map| map.data.unwrap_or_default()))
                }
            };
            let kind = kind_name(reference.kind);
            match data {
                Ok(Some(data)) => variables.extend(data.into_iter().map(without_newlines)),
                Ok(None) if reference.optional.unwrap_or(false) => {}
                Ok(None) => return Err(VariablesError::NotFound { kind, name }),
                Err(source) => return Err(VariablesError::Read { kind, name, source }),
            }
        }
    }
    variables.extend(
        post_build
            .substitute
            .clone()
            .into_iter()
            .map(without_newlines),
    );
    Ok(Some(variables))
}

/// Flux drops every newline of a variable's value (inline or from a ConfigMap or Secret), so a
/// multi-line value lands on one line.
fn without_newlines((name, value): (String, String)) -> (String, String) {
    if value.contains('\n') {
        (name, value.replace('\n', ""))
    } else {
        (name, value)
    }
}

pub(super) fn kind_name(kind: SubstituteKind) -> &'static str {
    match kind {
        SubstituteKind::Secret => "Secret",
        SubstituteKind::ConfigMap => "ConfigMap",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn offline_collection_keeps_only_substitute() {
        let post_build: PostBuild = serde_json::from_value(serde_json::json!({
            "substitute": {"greeting": "hi"},
            "substituteFrom": [{"kind": "ConfigMap", "name": "vars"}],
        }))
        .unwrap();
        let variables = collect(Some(&post_build), None, "apps").await.unwrap();
        assert_eq!(
            variables,
            Some(BTreeMap::from([("greeting".into(), "hi".into())]))
        );
        assert_eq!(collect(None, None, "apps").await.unwrap(), None);
        let multi_line: PostBuild = serde_json::from_value(serde_json::json!({
            "substitute": {"hosts": "a.example\nb.example\n"},
        }))
        .unwrap();
        assert_eq!(
            collect(Some(&multi_line), None, "apps").await.unwrap(),
            Some(BTreeMap::from([(
                "hosts".into(),
                "a.exampleb.example".into()
            )]))
        );
        assert_eq!(
            VariablesError::NotFound {
                kind: kind_name(SubstituteKind::Secret),
                name: "vars".into()
            }
            .to_string(),
            "substitute from 'Secret/vars' failed: not found"
        );
    }
}
