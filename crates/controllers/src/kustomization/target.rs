//! The cluster and identity a Kustomization applies with: `spec.kubeConfig.secretRef` (a
//! remote cluster) and `spec.serviceAccountName` (impersonation).

use capstan_api::Kustomization;
use capstan_apply::{ResourceManager, impersonating_client, service_account_user};
use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, ResourceExt};

use crate::error::{ErrorClass, ReconcileError};

use super::FIELD_MANAGER;

/// Keys tried, in order, when `spec.kubeConfig.secretRef.key` is not set (Flux's).
pub const KUBECONFIG_KEYS: [&str; 2] = ["value", "value.yaml"];

/// The reason of kubeconfig errors.
pub const INVALID_KUBECONFIG: &str = "InvalidKubeConfig";

/// The apply engine for `object`: `None` when it applies with the controller's own client
/// and identity; otherwise one reaching the remote cluster of `spec.kubeConfig` and/or
/// impersonating `spec.serviceAccountName` (in the Kustomization's namespace), or
/// `default_service_account` when that is empty (`--default-service-account`).
///
/// # Errors
/// A missing Secret or key (retried), a kubeconfig that does not parse or uses an exec
/// credential plugin or an auth provider (stalled, naming the field).
pub async fn manager_for(
    client: &Client,
    object: &Kustomization,
    default_service_account: Option<&str>,
) -> Result<Option<ResourceManager>, ReconcileError> {
    let namespace = object.namespace().unwrap_or_default();
    let service_account = crate::tenancy::service_account(
        object.spec.service_account_name.as_deref(),
        default_service_account,
    );
    let secret_ref = object
        .spec
        .kube_config
        .as_ref()
        .and_then(|k| k.secret_ref.as_ref());
    let identity = service_account.map(|name| service_account_user(&namespace, name));
    let Some(secret_ref) = secret_ref else {
        let Some(user) = identity else {
            return Ok(None);
        };
        return impersonating_manager(client, &user).map(Some);
    };

    let field = "spec.kubeConfig.secretRef";
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let display = format!("Secret '{namespace}/{}'", secret_ref.name);
    let secret = secrets
        .get_opt(&secret_ref.name)
        .await
        .map_err(|e| {
            ReconcileError::with_context(
                ErrorClass::Transient,
                capstan_api::meta::reason::RECONCILIATION_FAILED,
                format!("{field}: cannot get {display}"),
                e,
            )
        })?
        .ok_or_else(|| {
            ReconcileError::transient(
                capstan_api::meta::reason::RECONCILIATION_FAILED,
                format!("{field}: {display} not found"),
            )
        })?;
    let data = secret.data.unwrap_or_default();
    let (key, value) = match &secret_ref.key {
        Some(key) => (key.as_str(), data.get(key)),
        None => KUBECONFIG_KEYS
            .iter()
            .find_map(|key| data.get(*key).map(|v| (*key, Some(v))))
            .unwrap_or((KUBECONFIG_KEYS[0], None)),
    };
    let Some(value) = value else {
        return Err(ReconcileError::stalled(
            INVALID_KUBECONFIG,
            format!("{field}: {display} has no key '{key}'"),
        ));
    };
    let text = String::from_utf8_lossy(&value.0);
    // The parser's message may quote the document (credentials included): not shown.
    let mut kubeconfig = Kubeconfig::from_yaml(&text).map_err(|_| {
        ReconcileError::stalled(
            INVALID_KUBECONFIG,
            format!("{field}: the kubeconfig in {display} key '{key}' is not a valid kubeconfig"),
        )
    })?;
    check_no_plugins(&kubeconfig).map_err(|found| {
        ReconcileError::stalled(
            INVALID_KUBECONFIG,
            format!(
                "{field}: the kubeconfig in {display} key '{key}' uses {found}, which is not allowed"
            ),
        )
    })?;
    if let Some(user) = identity {
        for named in &mut kubeconfig.auth_infos {
            if let Some(auth) = named.auth_info.as_mut() {
                auth.impersonate = Some(user.clone());
            }
        }
    }
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| {
            ReconcileError::with_context(
                ErrorClass::Stalled,
                INVALID_KUBECONFIG,
                format!("{field}: the kubeconfig in {display} key '{key}' is unusable"),
                e,
            )
        })?;
    let remote = Client::try_from(config).map_err(|e| {
        ReconcileError::with_context(
            ErrorClass::Stalled,
            INVALID_KUBECONFIG,
            format!("{field}: cannot build a client from {display} key '{key}'"),
            e,
        )
    })?;
    Ok(Some(ResourceManager::new(remote, FIELD_MANAGER)))
}

/// The apply engine of the controller's cluster impersonating `user`.
fn impersonating_manager(client: &Client, user: &str) -> Result<ResourceManager, ReconcileError> {
    let client = impersonating_client(client.clone(), user, &[]).map_err(|e| {
        ReconcileError::with_context(
            ErrorClass::Stalled,
            capstan_api::meta::reason::RECONCILIATION_FAILED,
            "spec.serviceAccountName: invalid name",
            e,
        )
    })?;
    Ok(ResourceManager::new(client, FIELD_MANAGER))
}

/// Refuses what would make the controller run programs or read its own files on behalf of
/// the kubeconfig's author: credential plugins (`exec`, `auth-provider`) and file references
/// (`tokenFile`, `client-certificate`, `client-key`, `certificate-authority`; the `-data`
/// forms are fine). Returns what was found, with its path (`users[<name>].user.exec`).
fn check_no_plugins(kubeconfig: &Kubeconfig) -> Result<(), Forbidden> {
    for named in &kubeconfig.auth_infos {
        let Some(auth) = named.auth_info.as_ref() else {
            continue;
        };
        let user = format!("users[{}].user", named.name);
        if auth.exec.is_some() {
            return Err(Forbidden::Exec(user));
        }
        if auth.auth_provider.is_some() {
            return Err(Forbidden::AuthProvider(user));
        }
        let files = [
            ("tokenFile", &auth.token_file),
            ("client-certificate", &auth.client_certificate),
            ("client-key", &auth.client_key),
        ];
        if let Some((field, _)) = files.iter().find(|(_, value)| value.is_some()) {
            return Err(Forbidden::ControllerFile(format!("{user}.{field}")));
        }
    }
    for named in &kubeconfig.clusters {
        if named
            .cluster
            .as_ref()
            .is_some_and(|c| c.certificate_authority.is_some())
        {
            return Err(Forbidden::ControllerFile(format!(
                "clusters[{}].cluster.certificate-authority",
                named.name
            )));
        }
    }
    Ok(())
}

/// What a kubeconfig uses that it may not ([`check_no_plugins`]), with its path.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum Forbidden {
    /// `users[<name>].user`, which has an `exec` plugin.
    #[error("an exec credential plugin ({0}.exec)")]
    Exec(String),
    /// `users[<name>].user`, which has an `auth-provider`.
    #[error("an auth provider ({0}.auth-provider)")]
    AuthProvider(String),
    /// The field naming a file of the controller.
    #[error("a file of the controller ({0})")]
    ControllerFile(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_plugins_and_controller_files() {
        let base = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user:\n";
        let plain = Kubeconfig::from_yaml(&format!("{base}    token: abc\n")).unwrap();
        assert!(check_no_plugins(&plain).is_ok());
        let exec = Kubeconfig::from_yaml(&format!(
            "{base}    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n"
        ))
        .unwrap();
        assert_eq!(
            check_no_plugins(&exec).unwrap_err().to_string(),
            "an exec credential plugin (users[u].user.exec)"
        );
        let provider = Kubeconfig::from_yaml(&format!(
            "{base}    auth-provider:\n      name: oidc\n      config: {{}}\n"
        ))
        .unwrap();
        assert!(
            check_no_plugins(&provider)
                .unwrap_err()
                .to_string()
                .contains("auth-provider")
        );
        let token_file = Kubeconfig::from_yaml(&format!(
            "{base}    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n"
        ))
        .unwrap();
        assert_eq!(
            check_no_plugins(&token_file).unwrap_err().to_string(),
            "a file of the controller (users[u].user.tokenFile)"
        );
        let ca_file = Kubeconfig::from_yaml(&format!("{base}    token: abc\n").replace(
            "server: http://127.0.0.1:1",
            "server: https://127.0.0.1:1\n    certificate-authority: /etc/ca.pem",
        ))
        .unwrap();
        assert!(
            check_no_plugins(&ca_file)
                .unwrap_err()
                .to_string()
                .contains("clusters[c].cluster.certificate-authority")
        );
    }
}
