//! Hostile-input cases for Helm sources: what a chart repository server can feed the
//! HelmRepository and HelmChart controllers. An index that expands without bound is refused
//! before it is stored; a chart archive whose entries leave its directory is refused whether it
//! is only loaded (kept as pulled) or unpacked (repackaged with values files), and nothing is
//! written outside the storage.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;

use capstan_api::{HelmChart, HelmRepository};
use capstan_testkit::helm_repo::HelmRepoServer;
use kube::api::{Api, PostParams};
use sha2::Digest as _;

use crate::support::{Env, wait_for};

fn ready(conditions: &[capstan_api::meta::Condition]) -> Option<(String, String, String)> {
    conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn create<K>(env: &Env, namespace: &str, value: serde_json::Value)
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Clone
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value).unwrap();
    Api::<K>::namespaced(env.client.clone(), namespace)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

/// A gzip tarball whose entry names are written as given (`..` included), as a hostile server
/// would serve them.
fn raw_tgz(entries: &[(&str, &str)]) -> Vec<u8> {
    let mut tar = Vec::new();
    for (name, data) in entries {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        tar.extend_from_slice(header.as_bytes());
        tar.extend_from_slice(data.as_bytes());
        tar.resize(tar.len().div_ceil(512) * 512, 0);
    }
    tar.resize(tar.len() + 1024, 0);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&tar).unwrap();
    gz.finish().unwrap()
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

#[tokio::test]
async fn an_index_that_expands_without_bound_is_refused() {
    let env = Env::start().await;
    let ns = env.namespace("hostile-index").await;
    let dir = tempfile::tempdir().unwrap();
    let mut index = String::from("apiVersion: v1\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..12 {
        let refs = vec![format!("*a{}", level - 1); 10].join(", ");
        let _ = writeln!(index, "a{level}: &a{level} [{refs}]");
    }
    index.push_str("entries: {}\n");
    std::fs::write(dir.path().join("index.yaml"), index).unwrap();
    let server = HelmRepoServer::start(dir.path(), None).await;
    create::<HelmRepository>(
        &env,
        &ns,
        serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
            "metadata": {"name": "bomb"}, "spec": {"url": server.url(), "interval": "1m"},
        }),
    )
    .await;
    let api: Api<HelmRepository> = Api::namespaced(env.client.clone(), &ns);
    let failed = wait_for(&api, "bomb", "Ready=False", |o| {
        o.status
            .as_ref()
            .and_then(|s| ready(&s.conditions))
            .is_some_and(|(s, ..)| s == "False")
    })
    .await;
    let status = failed.status.unwrap();
    let (_, reason, _) = ready(&status.conditions).unwrap();
    assert_eq!(reason, "IndexationFailed");
    assert!(status.artifact.is_none());
}

#[tokio::test]
async fn a_chart_archive_leaving_its_directory_is_refused() {
    let env = Env::start().await;
    let ns = env.namespace("hostile-chart").await;
    let dir = tempfile::tempdir().unwrap();
    let outside = format!("capstan-hostile-{}", std::process::id());
    let escape = format!("evil/../../../../../../tmp/{outside}");
    let archive = raw_tgz(&[
        (
            "evil/Chart.yaml",
            "apiVersion: v2\nname: evil\nversion: 1.0.0\n",
        ),
        ("evil/values.yaml", "a: 1\n"),
        (escape.as_str(), "escaped\n"),
    ]);
    std::fs::write(dir.path().join("evil-1.0.0.tgz"), &archive).unwrap();
    let index = format!(
        "apiVersion: v1\nentries:\n  evil:\n  - name: evil\n    version: 1.0.0\n    apiVersion: v2\n    urls: [evil-1.0.0.tgz]\n    digest: {}\n",
        hex_of(&sha2::Sha256::digest(&archive))
    );
    std::fs::write(dir.path().join("index.yaml"), index).unwrap();
    let server = HelmRepoServer::start(dir.path(), None).await;
    create::<HelmRepository>(
        &env,
        &ns,
        serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
            "metadata": {"name": "charts"}, "spec": {"url": server.url(), "interval": "1m"},
        }),
    )
    .await;
    for (name, values) in [("pulled", None), ("repackaged", Some(["values.yaml"]))] {
        let mut spec = serde_json::json!({
            "chart": "evil", "interval": "1m",
            "sourceRef": {"kind": "HelmRepository", "name": "charts"},
        });
        if let Some(values) = values {
            spec["valuesFiles"] = serde_json::json!(values);
        }
        create::<HelmChart>(
            &env,
            &ns,
            serde_json::json!({
                "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmChart",
                "metadata": {"name": name}, "spec": spec,
            }),
        )
        .await;
    }
    let api: Api<HelmChart> = Api::namespaced(env.client.clone(), &ns);
    let mut reasons = BTreeMap::new();
    for name in ["pulled", "repackaged"] {
        let failed = wait_for(&api, name, "Ready=False", |o| {
            o.status
                .as_ref()
                .and_then(|s| ready(&s.conditions))
                .is_some_and(|(s, reason, _)| s == "False" && reason != "NoSourceArtifact")
        })
        .await;
        let status = failed.status.unwrap();
        assert!(status.artifact.is_none(), "{name}: nothing stored");
        let (_, reason, message) = ready(&status.conditions).unwrap();
        reasons.insert(name, (reason, message));
    }
    for (name, (reason, message)) in &reasons {
        assert_eq!(reason, "ChartPullError", "{name}: {message}");
        assert!(
            message.contains("chart illegally references parent directory"),
            "{name}: {message}"
        );
    }
    assert!(
        !std::path::Path::new("/tmp").join(&outside).exists(),
        "nothing written outside"
    );
}
