//! SOPS decryption (`spec.decryption.provider: sops`) end to end: files encrypted by the real
//! `sops` for real age keys, pushed to a Git server, decrypted by the Kustomization controller
//! and applied to the embedded control plane.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;

use crate::kustomize_support::{
    KustomizeController, NAMESPACE, create_kustomization, kustomizations, request_reconcile, setup,
    wait_ready,
};
use crate::sops::{AgeKey, PgpKey};
use crate::support::{Env, GitServer};

const MARKER: &str = "decrypt-marker-91c2";

fn secret_manifest() -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: {NAMESPACE}\ntype: Opaque\nstringData:\n  password: {MARKER}\n  user: admin\n"
    )
}

fn kustomization_yaml() -> String {
    format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {NAMESPACE}\nresources:\n- secret.enc.yaml\n- config.yaml\n- wrapped.yaml\nsecretGenerator:\n- name: app-env\n  envs:\n  - app.enc.env\n  options:\n    disableNameSuffixHash: true\n- name: app-files\n  files:\n  - settings.json=settings.enc.json\n  - plain.txt\n  options:\n    disableNameSuffixHash: true\n"
    )
}

fn config_yaml() -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n  namespace: {NAMESPACE}\ndata:\n  env: dev\n"
    )
}

/// The repository's files: an encrypted Secret, an encrypted dotenv and JSON file in
/// generators, and plain files beside them.
fn files(key: &AgeKey) -> Vec<(String, String)> {
    vec![
        ("apps/kustomization.yaml".into(), kustomization_yaml()),
        (
            "apps/secret.enc.yaml".into(),
            key.encrypt_secret(&secret_manifest()),
        ),
        ("apps/config.yaml".into(), config_yaml()),
        (
            "apps/app.enc.env".into(),
            key.encrypt("app.env", &format!("API_TOKEN={MARKER}\nMODE=prod\n"), &[]),
        ),
        (
            "apps/settings.enc.json".into(),
            key.encrypt(
                "settings.json",
                &format!("{{\"token\": \"{MARKER}\"}}"),
                &[],
            ),
        ),
        ("apps/plain.txt".into(), "not encrypted\n".into()),
        ("apps/wrapped.yaml".into(), wrapped_secret(key)),
    ]
}

/// A plain Secret whose `data` value is a whole sops-encrypted dotenv file (base64).
fn wrapped_secret(key: &AgeKey) -> String {
    let encrypted = key.encrypt("inner.env", &format!("INNER={MARKER}\n"), &[]);
    let value = serde_json::to_value(k8s_openapi::ByteString(encrypted.into_bytes())).unwrap();
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: wrapped\n  namespace: {NAMESPACE}\ndata:\n  inner.env: {}\n",
        value.as_str().unwrap()
    )
}

/// The environment of [`setup`] with the repository of `files`, and the Kustomization `apps`
/// of `./apps` decrypting with sops, with the keys of the Secret `secret_ref` when given (the
/// Secret created first holding `keys`, unless those are none).
async fn decrypting<P: AsRef<str>, C: AsRef<str>>(
    files: &[(P, C)],
    secret_ref: Option<&str>,
    keys: &[(&str, &str)],
) -> (Env, GitServer, KustomizeController) {
    let borrowed: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_ref(), c.as_ref()))
        .collect();
    let (env, git, controller, _) = setup(&borrowed).await;
    let mut decryption = serde_json::json!({"provider": "sops"});
    if let Some(name) = secret_ref {
        if !keys.is_empty() {
            env.create_secret(
                NAMESPACE,
                name,
                &keys.iter().copied().collect::<BTreeMap<_, _>>(),
            )
            .await;
        }
        decryption["secretRef"] = serde_json::json!({"name": name});
    }
    create_kustomization(
        &env,
        "apps",
        serde_json::json!({"path": "./apps", "decryption": decryption}),
    )
    .await;
    (env, git, controller)
}

fn decoded(secret: &Secret, key: &str) -> String {
    let data = secret.data.as_ref().expect("data");
    String::from_utf8(data[key].0.clone()).unwrap()
}

#[tokio::test]
async fn decrypt_age_secret_and_dotenv_generator_apply() {
    let key = AgeKey::generate();
    let (env, _git, _controller) = decrypting(
        &files(&key),
        Some("sops-keys"),
        &[("identity.agekey", key.identity.as_str())],
    )
    .await;
    let object = wait_ready(&env, "apps", "Ready=True", |s, _, _| s == "True").await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NAMESPACE);
    let db = secrets.get("db").await.unwrap();
    assert_eq!(decoded(&db, "password"), MARKER);
    assert_eq!(decoded(&db, "user"), "admin");
    let app_env = secrets.get("app-env").await.unwrap();
    assert_eq!(decoded(&app_env, "API_TOKEN"), MARKER);
    assert_eq!(decoded(&app_env, "MODE"), "prod");
    let app_files = secrets.get("app-files").await.unwrap();
    let settings: serde_json::Value =
        serde_json::from_str(&decoded(&app_files, "settings.json")).unwrap();
    assert_eq!(settings["token"], MARKER);
    assert_eq!(decoded(&app_files, "plain.txt"), "not encrypted\n");
    let wrapped = secrets.get("wrapped").await.unwrap();
    assert_eq!(decoded(&wrapped, "inner.env"), format!("INNER={MARKER}\n"));
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert_eq!(
        config_maps.get("plain").await.unwrap().data.unwrap()["env"],
        "dev"
    );
    let status = serde_json::to_string(&object.status).unwrap();
    assert!(!status.contains(MARKER), "{status}");
    env.stop().await;
}

#[tokio::test]
async fn decrypt_pgp_secret_applies() {
    let key = PgpKey::generate();
    let (env, _git, _controller) = decrypting(
        &[(
            "apps/secret.enc.yaml",
            key.encrypt_secret(&secret_manifest()),
        )],
        Some("sops-gpg"),
        &[("private.asc", key.armored.as_str())],
    )
    .await;
    wait_ready(&env, "apps", "Ready=True", |s, _, _| s == "True").await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert_eq!(
        decoded(&secrets.get("db").await.unwrap(), "password"),
        MARKER
    );
    env.stop().await;
}

#[tokio::test]
async fn decrypt_with_a_wrong_key_fails_naming_the_file() {
    let owner = AgeKey::generate();
    let other = AgeKey::generate();
    let (env, _git, _controller) = decrypting(
        &files(&owner),
        Some("sops-keys"),
        &[("other.agekey", other.identity.as_str())],
    )
    .await;
    let object = wait_ready(&env, "apps", "Ready=False", |s, _, _| s == "False").await;
    let (_, reason, message) = crate::kustomize_support::ready(&object).unwrap();
    assert_eq!(reason, "BuildFailed", "{message}");
    assert!(
        message.contains("failed to decrypt 'apps/secret.enc.yaml' (YAML file) with sops"),
        "{message}"
    );
    assert!(message.contains(&owner.recipient), "{message}");
    assert!(!message.contains(MARKER), "{message}");
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert!(secrets.get_opt("db").await.unwrap().is_none());
    env.stop().await;
}

#[tokio::test]
async fn decrypt_set_on_a_tree_without_encrypted_files_applies_it() {
    let (env, _git, _controller) =
        decrypting(&[("apps/config.yaml", config_yaml())], None, &[]).await;
    wait_ready(&env, "apps", "Ready=True", |s, _, _| s == "True").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), NAMESPACE);
    assert!(config_maps.get_opt("plain").await.unwrap().is_some());
    env.stop().await;
}

#[tokio::test]
async fn decrypt_without_the_key_secret_fails_naming_it() {
    let (env, _git, _controller) = decrypting(
        &[("apps/config.yaml", config_yaml())],
        Some("missing-keys"),
        &[],
    )
    .await;
    let object = wait_ready(&env, "apps", "Ready=False", |s, _, _| s == "False").await;
    let (_, _, message) = crate::kustomize_support::ready(&object).unwrap();
    assert!(
        message.contains(&format!("decryption Secret '{NAMESPACE}/missing-keys'")),
        "{message}"
    );
    env.stop().await;
}

#[tokio::test]
async fn decrypt_reads_the_keys_again_on_every_reconcile() {
    // Decrypting builds are not cached: a deleted keys Secret shows at the next reconcile,
    // as in Flux, though the artifact did not change.
    let key = AgeKey::generate();
    let (env, _git, _controller) = decrypting(
        &[(
            "apps/secret.enc.yaml",
            key.encrypt_secret(&secret_manifest()),
        )],
        Some("sops-keys"),
        &[("identity.agekey", key.identity.as_str())],
    )
    .await;
    wait_ready(&env, "apps", "Ready=True", |s, _, _| s == "True").await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), NAMESPACE);
    secrets
        .delete("sops-keys", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    request_reconcile(&kustomizations(&env), "apps", "keys-deleted").await;
    let object = wait_ready(&env, "apps", "Ready=False", |s, _, _| s == "False").await;
    let (_, _, message) = crate::kustomize_support::ready(&object).unwrap();
    assert!(
        message.contains(&format!(
            "the decryption Secret '{NAMESPACE}/sops-keys' was not found"
        )),
        "{message}"
    );
    env.stop().await;
}
