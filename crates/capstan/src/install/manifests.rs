//! The install manifests, generated from the code: what `capstan install` applies and
//! `capstan install --export` prints (checked in as `manifests/install.yaml`, with a drift test).
//!
//! The objects follow Flux's own install manifests (`gotk-components.yaml`) where Flux has an
//! equivalent; Capstan is one binary, so one Deployment (`capstan-controller`) runs what Flux runs
//! in four. Every object carries [`PART_OF`], [`INSTANCE`] (the namespace) and [`VERSION`]
//! labels; the controller's Pods carry [`PART_OF`] and [`COMPONENT`]` = controller`, which
//! `capstan uninstall`, `capstan check` and `capstan logs` select on.

use serde_json::{Value, json};

/// The label every generated object carries, value `capstan`.
pub const PART_OF: &str = "app.kubernetes.io/part-of";
/// The label naming the installation: the namespace Capstan is installed in.
pub const INSTANCE: &str = "app.kubernetes.io/instance";
/// The label holding the Capstan version ([`crate::version::CLIENT_VERSION`], `vX.Y.Z`).
pub const VERSION: &str = "app.kubernetes.io/version";
/// The label of the controller's Pods (and Deployment), value `controller`.
pub const COMPONENT: &str = "app.kubernetes.io/component";
/// The name of the Deployment and of its ServiceAccount; its ClusterRole and binding are
/// `capstan-controller-<namespace>` (cluster-scoped names carry the namespace, as Flux's do).
pub const CONTROLLER: &str = "capstan-controller";
/// The ServiceAccounts Flux's multi-tenant repositories name (`spec.serviceAccountName`) and
/// bind; both are cluster administrators through the `cluster-reconciler` binding, as in Flux.
pub const TENANCY_ACCOUNTS: [&str; 2] = ["kustomize-controller", "helm-controller"];
/// Flux's ClusterRoleBinding of the appliers to `cluster-admin` (named
/// `cluster-reconciler-<namespace>`, see [`cluster_name`]).
pub const CLUSTER_RECONCILER: &str = "cluster-reconciler";
/// The port of the artifact, metrics and health server in the Pod.
pub const HTTP_PORT: u16 = 9090;
/// The port of the Receivers' webhook server in the Pod (Flux's receiver port).
pub const RECEIVER_PORT: u16 = 9292;
/// Flux's optional controllers, accepted by `--components-extra`.
pub const FLUX_EXTRA_COMPONENTS: [&str; 3] = [
    "image-reflector-controller",
    "image-automation-controller",
    "source-watcher",
];

/// What to generate (`capstan install`'s flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The namespace Capstan is installed in (`flux-system`).
    pub namespace: String,
    /// Flux's optional controllers asked for; Capstan runs none of them (they are validated and
    /// otherwise add nothing, see [`extra_components_note`]).
    pub components_extra: Vec<String>,
    /// The registry (and path) the image is pulled from: `<registry>/capstan:<version>`.
    pub registry: String,
    /// The image tag (the version of this binary by default).
    pub version: String,
    /// A Secret (in [`Options::namespace`]) the kubelet pulls the image with.
    pub image_pull_secret: Option<String>,
    /// Taint keys the controller tolerates (`operator: Exists`).
    pub toleration_keys: Vec<String>,
    /// Watch every namespace (Flux's default); `false` makes the controller watch only the
    /// namespace it runs in (`--watch-all-namespaces=false` and `RUNTIME_NAMESPACE` from the
    /// downward API, as Flux's manifests).
    pub watch_all_namespaces: bool,
    /// Reconciles of one kind at once (`--concurrent` of the controller).
    pub concurrent: u16,
    /// Ship Flux's NetworkPolicies.
    pub network_policy: bool,
    /// The cluster's DNS domain, for the advertised artifact address.
    pub cluster_domain: String,
}

/// The default registry of Capstan's image.
pub const DEFAULT_REGISTRY: &str = "ghcr.io/capstan";

impl Default for Options {
    fn default() -> Self {
        Self {
            namespace: "flux-system".to_owned(),
            components_extra: Vec::new(),
            registry: DEFAULT_REGISTRY.to_owned(),
            version: crate::version::CLIENT_VERSION.to_owned(),
            image_pull_secret: None,
            toleration_keys: Vec::new(),
            watch_all_namespaces: true,
            concurrent: 4,
            network_policy: true,
            cluster_domain: "cluster.local".to_owned(),
        }
    }
}

/// Checks the options a user can get wrong, before anything is generated or applied.
pub fn validate(options: &Options) -> anyhow::Result<()> {
    anyhow::ensure!(
        is_dns_label(&options.namespace),
        "--namespace {:?} is not a valid namespace name (a DNS label: lowercase letters, digits \
         and '-', at most 63 characters)",
        options.namespace
    );
    for component in &options.components_extra {
        anyhow::ensure!(
            FLUX_EXTRA_COMPONENTS.contains(&component.as_str()),
            "--components-extra: unknown component {component:?} (Flux's are {})",
            FLUX_EXTRA_COMPONENTS.join(", ")
        );
    }
    if let Some(secret) = &options.image_pull_secret {
        anyhow::ensure!(
            !secret.is_empty(),
            "--image-pull-secret needs a Secret name"
        );
        anyhow::ensure!(
            is_dns_subdomain(secret),
            "--image-pull-secret {secret:?} is not a valid Secret name (a DNS subdomain: \
             lowercase letters, digits, '-' and '.', at most 253 characters)"
        );
    }
    let registry = &options.registry;
    anyhow::ensure!(
        !registry.contains("://"),
        "--registry {registry:?} must not have a scheme: give the registry host and path, as \
         in {DEFAULT_REGISTRY:?}"
    );
    anyhow::ensure!(
        !registry.trim_end_matches('/').is_empty()
            && !registry
                .chars()
                .any(|c| c.is_whitespace() || c.is_control()),
        "--registry {registry:?} is not a registry host and path (as in {DEFAULT_REGISTRY:?})"
    );
    for key in &options.toleration_keys {
        anyhow::ensure!(
            !key.is_empty(),
            "--toleration-keys has an empty key (an empty key tolerates every taint)"
        );
        anyhow::ensure!(
            is_qualified_name(key),
            "--toleration-keys: {key:?} is not a valid taint key ([prefix/]name: a name of at \
             most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or \
             digit)"
        );
    }
    Ok(())
}

/// A Kubernetes object name of the DNS subdomain kind (RFC 1123).
fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A label (and taint) key: an optional DNS subdomain prefix and `/`, then a name of at most 63
/// alphanumerics, `-`, `_` and `.`, beginning and ending with an alphanumeric.
fn is_qualified_name(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    prefix.is_none_or(is_dns_subdomain)
        && !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// What `--components-extra` means for Capstan, for the terminal: `None` when none was asked.
#[must_use]
pub fn extra_components_note(options: &Options) -> Option<String> {
    (!options.components_extra.is_empty()).then(|| {
        format!(
            "--components-extra {}: Capstan runs all its controllers in one Deployment and has no \
             image automation or source watcher, so nothing is added",
            options.components_extra.join(",")
        )
    })
}

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// The labels of every object of this installation.
#[must_use]
pub fn labels(options: &Options) -> Value {
    json!({
        PART_OF: "capstan",
        INSTANCE: options.namespace,
        VERSION: options.version,
    })
}

/// The labels of the controller's Pods: the installation's, `app` (the Deployment's selector)
/// and [`crate::logging::CONTROLLER_LABELS`] (what `capstan logs` selects on).
fn pod_labels(options: &Options) -> Value {
    let mut labels = labels(options);
    labels["app"] = json!(CONTROLLER);
    for (key, value) in crate::logging::CONTROLLER_LABELS {
        labels[key] = json!(value);
    }
    labels
}

/// The name of a cluster-scoped object of this installation: `<base>-<namespace>`, as Flux's
/// (`cluster-reconciler-flux-system`), so that two installations never share one.
#[must_use]
pub fn cluster_name(options: &Options, base: &str) -> String {
    format!("{base}-{}", options.namespace)
}

fn meta(options: &Options, name: &str, namespaced: bool) -> Value {
    let mut meta = json!({"name": name, "labels": labels(options)});
    if namespaced {
        meta["namespace"] = json!(options.namespace);
    }
    meta
}

/// Every object to install, in apply order: the namespace, the CRDs, the ServiceAccounts, the
/// RBAC (the controller's role, `cluster-reconciler`, Flux's aggregated `flux-edit` and
/// `flux-view`), the ResourceQuota admitting the critical priority class, the Services, the
/// Deployment and the NetworkPolicies.
pub fn manifests(options: &Options) -> anyhow::Result<Vec<Value>> {
    validate(options)?;
    let mut objects = vec![namespace(options)];
    for crd in capstan_api::crds() {
        let mut crd = serde_json::to_value(&crd)?;
        let merged = labels(options);
        let own = crd["metadata"]["labels"].as_object().cloned();
        crd["metadata"]["labels"] = merged;
        if let Some(own) = own {
            for (k, v) in own {
                crd["metadata"]["labels"][k] = v;
            }
        }
        objects.push(crd);
    }
    objects.extend(service_accounts(options));
    objects.push(controller_role(options));
    objects.push(controller_binding(options));
    objects.push(cluster_reconciler(options));
    objects.extend(aggregated_roles(options));
    objects.push(critical_pods_quota(options));
    objects.extend(services(options));
    objects.push(deployment(options));
    if options.network_policy {
        objects.extend(network_policies(options));
    }
    Ok(objects)
}

/// The tenancy objects (issue 13) `capstan dev` creates: the namespace, the ServiceAccounts
/// and the `cluster-reconciler` binding, the same objects [`manifests`] generates.
#[must_use]
pub fn tenancy_objects(options: &Options) -> Vec<Value> {
    let mut objects = vec![namespace(options)];
    objects.extend(service_accounts(options));
    objects.push(cluster_reconciler(options));
    objects
}

/// [`manifests`] as one multi-document YAML stream (each document starts with `---`), ready
/// for `kubectl apply --server-side -f`.
pub fn manifests_yaml(options: &Options) -> anyhow::Result<String> {
    let mut out = String::new();
    for object in manifests(options)? {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&object)?);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

fn namespace(options: &Options) -> Value {
    let mut meta = meta(options, &options.namespace, false);
    // As Flux: warn of Pods that break the restricted Pod Security Standard.
    meta["labels"]["pod-security.kubernetes.io/warn"] = json!("restricted");
    meta["labels"]["pod-security.kubernetes.io/warn-version"] = json!("latest");
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
}

fn service_accounts(options: &Options) -> Vec<Value> {
    std::iter::once(CONTROLLER)
        .chain(TENANCY_ACCOUNTS)
        .map(|name| {
            json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": meta(options, name, true),
            })
        })
        .collect()
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

/// The rules of the controller's own identity: what the reconcilers, the triggers, the event
/// recorder and the leader election call. Applying the objects of Kustomizations and
/// HelmReleases is not here: that is `cluster-reconciler`'s (or the impersonated
/// ServiceAccount's) business, as in Flux.
#[must_use]
pub fn controller_rules() -> Vec<Value> {
    let mut rules = Vec::new();
    let mut by_group: Vec<(String, Vec<String>)> = Vec::new();
    for crd in capstan_api::crds() {
        let group = crd.spec.group.clone();
        let plural = crd.spec.names.plural.clone();
        let resources = [
            plural.clone(),
            format!("{plural}/status"),
            format!("{plural}/finalizers"),
        ];
        match by_group.iter_mut().find(|(g, _)| *g == group) {
            Some((_, list)) => list.extend(resources),
            None => by_group.push((group, resources.to_vec())),
        }
    }
    for (group, resources) in &by_group {
        let resources: Vec<&str> = resources.iter().map(String::as_str).collect();
        rules.push(rule(
            &[group],
            &resources,
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ));
    }
    // Source credentials, values and substitutions; the triggers watch both.
    rules.push(rule(
        &[""],
        &["secrets", "configmaps"],
        &["get", "list", "watch"],
    ));
    // Events of the reconciled objects (events.k8s.io, as the recorder writes them).
    rules.push(rule(
        &["events.k8s.io"],
        &["events"],
        &["create", "patch", "update"],
    ));
    rules.push(rule(&[""], &["events"], &["create", "patch"]));
    // Leader election.
    rules.push(rule(
        &["coordination.k8s.io"],
        &["leases"],
        &["get", "list", "watch", "create", "update", "patch"],
    ));
    // spec.serviceAccountName: the account is read, then impersonated.
    rules.push(rule(
        &[""],
        &["serviceaccounts"],
        &["get", "list", "watch", "impersonate"],
    ));
    rules.push(rule(&[""], &["namespaces"], &["get", "list", "watch"]));
    rules
}

fn controller_role(options: &Options) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": meta(options, &cluster_name(options, CONTROLLER), false),
        "rules": controller_rules(),
    })
}

fn subject(options: &Options, name: &str) -> Value {
    json!({"kind": "ServiceAccount", "name": name, "namespace": options.namespace})
}

fn controller_binding(options: &Options) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": meta(options, &cluster_name(options, CONTROLLER), false),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": cluster_name(options, CONTROLLER),
        },
        "subjects": [subject(options, CONTROLLER)],
    })
}

/// Flux's `cluster-reconciler`: `cluster-admin` for the appliers. Capstan's controller applies
/// as itself when an object names no ServiceAccount, as Flux's kustomize-controller and
/// helm-controller do, so it is a subject beside Flux's two accounts.
fn cluster_reconciler(options: &Options) -> Value {
    let subjects: Vec<Value> = TENANCY_ACCOUNTS
        .iter()
        .chain(std::iter::once(&CONTROLLER))
        .map(|name| subject(options, name))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": meta(options, &cluster_name(options, CLUSTER_RECONCILER), false),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": subjects,
    })
}

/// Flux's `flux-edit` and `flux-view`: the Flux kinds aggregated into the built-in `admin`,
/// `edit` and `view` roles, so that namespace users manage them as they manage Deployments.
fn aggregated_roles(options: &Options) -> Vec<Value> {
    let groups: Vec<String> = {
        let mut groups: Vec<String> = capstan_api::crds()
            .into_iter()
            .map(|c| c.spec.group)
            .collect();
        groups.dedup();
        groups
    };
    let role = |base: &str, aggregate: &[&str], verbs: &[&str]| {
        let mut meta = meta(options, &cluster_name(options, base), false);
        for to in aggregate {
            meta["labels"][format!("rbac.authorization.k8s.io/aggregate-to-{to}")] = json!("true");
        }
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": meta,
            "rules": [{"apiGroups": groups, "resources": ["*"], "verbs": verbs}],
        })
    };
    vec![
        role(
            "flux-edit",
            &["edit", "admin"],
            &["create", "delete", "deletecollection", "patch", "update"],
        ),
        role(
            "flux-view",
            &["admin", "edit", "view"],
            &["get", "list", "watch"],
        ),
    ]
}

/// Pods of the `system-cluster-critical` priority class are admitted outside `kube-system` only
/// under a ResourceQuota naming the class (Flux ships the same).
fn critical_pods_quota(options: &Options) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": meta(options, &cluster_name(options, "critical-pods"), true),
        "spec": {
            "hard": {"pods": "1000"},
            "scopeSelector": {"matchExpressions": [{
                "operator": "In",
                "scopeName": "PriorityClass",
                "values": ["system-node-critical", "system-cluster-critical"],
            }]},
        },
    })
}

fn service(options: &Options, name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(options, name, true),
        "spec": {
            "type": "ClusterIP",
            "selector": {"app": CONTROLLER},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}],
        },
    })
}

/// `source-controller` (the host of Flux's artifact URLs), `notification-controller` and
/// `webhook-receiver` (Flux's names; the latter on the receivers' port), and `capstan-controller`
/// for metrics on the Pod's port.
fn services(options: &Options) -> Vec<Value> {
    let mut metrics = service(options, CONTROLLER);
    metrics["spec"]["ports"] = json!([{
        "name": "http-metrics",
        "port": HTTP_PORT,
        "protocol": "TCP",
        "targetPort": "http",
    }]);
    let mut webhooks = service(options, "webhook-receiver");
    webhooks["spec"]["ports"][0]["targetPort"] = json!("http-webhook");
    vec![
        service(options, "source-controller"),
        service(options, "notification-controller"),
        webhooks,
        metrics,
    ]
}

/// The restricted security context of the container (Pod Security Standard `restricted`).
fn container_security_context() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": true,
        "runAsNonRoot": true,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

/// The controller's arguments.
fn controller_args(options: &Options) -> Vec<String> {
    vec![
        "controller".to_owned(),
        "--enable-leader-election=true".to_owned(),
        format!("--watch-all-namespaces={}", options.watch_all_namespaces),
        format!("--concurrent={}", options.concurrent),
        "--storage-path=/data".to_owned(),
        format!("--storage-addr=0.0.0.0:{HTTP_PORT}"),
        format!("--receiver-addr=0.0.0.0:{RECEIVER_PORT}"),
        format!(
            "--storage-adv-addr=source-controller.{}.svc.{}.",
            options.namespace, options.cluster_domain
        ),
        "--log-format=json".to_owned(),
    ]
}

fn deployment(options: &Options) -> Value {
    let mut meta = meta(options, CONTROLLER, true);
    meta["labels"][COMPONENT] = json!("controller");
    let image = format!(
        "{}/capstan:{}",
        options.registry.trim_end_matches('/'),
        options.version
    );
    let http_probe = |path: &str| json!({"httpGet": {"path": path, "port": "http"}});
    let mut liveness = http_probe("/healthz");
    liveness["initialDelaySeconds"] = json!(5);
    let mut readiness = http_probe("/readyz");
    readiness["periodSeconds"] = json!(5);
    let mut pod = json!({
        "serviceAccountName": CONTROLLER,
        "terminationGracePeriodSeconds": 10,
        "priorityClassName": "system-cluster-critical",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "securityContext": {
            "fsGroup": 1337,
            "runAsNonRoot": true,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [{
            "name": crate::logging::CONTAINER,
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "args": controller_args(options),
            "env": [
                {
                    "name": "RUNTIME_NAMESPACE",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                },
                {"name": "TMPDIR", "value": "/tmp"},
                {"name": "HOME", "value": "/tmp"},
            ],
            "ports": [
                {"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"},
                {"name": "http-webhook", "containerPort": RECEIVER_PORT, "protocol": "TCP"},
            ],
            "livenessProbe": liveness,
            "readinessProbe": readiness,
            "resources": {
                "limits": {"cpu": "1000m", "memory": "1Gi"},
                "requests": {"cpu": "100m", "memory": "64Mi"},
            },
            "securityContext": container_security_context(),
            "volumeMounts": [
                {"name": "data", "mountPath": "/data"},
                {"name": "tmp", "mountPath": "/tmp"},
            ],
        }],
        "volumes": [
            {"name": "data", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {}},
        ],
    });
    if let Some(secret) = &options.image_pull_secret {
        pod["imagePullSecrets"] = json!([{"name": secret}]);
    }
    if !options.toleration_keys.is_empty() {
        pod["tolerations"] = options
            .toleration_keys
            .iter()
            .map(|key| json!({"key": key, "operator": "Exists"}))
            .collect();
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": CONTROLLER}},
            "template": {
                "metadata": {
                    "labels": pod_labels(options),
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": HTTP_PORT.to_string(),
                    },
                },
                "spec": pod,
            },
        },
    })
}

/// Flux's three NetworkPolicies: egress anywhere and ingress from the namespace's own Pods
/// (`allow-egress`), metrics scraping from any namespace (`allow-scraping`) and webhooks from
/// any namespace (`allow-webhooks`): the artifact and metrics port to every Pod of the
/// namespace, the receivers' port to the controller.
fn network_policies(options: &Options) -> Vec<Value> {
    let policy = |name: &str, spec: Value| {
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": meta(options, name, true),
            "spec": spec,
        })
    };
    let from_anywhere = |port: u16| {
        json!([{
            "from": [{"namespaceSelector": {}}],
            "ports": [{"port": port, "protocol": "TCP"}],
        }])
    };
    vec![
        policy(
            "allow-egress",
            json!({
                "podSelector": {},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": [{"podSelector": {}}]}],
                "egress": [{}],
            }),
        ),
        policy(
            "allow-scraping",
            json!({
                "podSelector": {},
                "policyTypes": ["Ingress"],
                "ingress": from_anywhere(HTTP_PORT),
            }),
        ),
        policy(
            "allow-webhooks",
            json!({
                "podSelector": {"matchLabels": {"app": CONTROLLER}},
                "policyTypes": ["Ingress"],
                "ingress": from_anywhere(RECEIVER_PORT),
            }),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn committed_path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../manifests/install.yaml")
    }

    #[test]
    fn install_yaml_is_up_to_date() {
        let generated = manifests_yaml(&Options::default()).unwrap();
        let path = committed_path();
        if std::env::var_os("UPDATE_MANIFESTS").is_some_and(|v| v == "1") {
            fs_err::write(&path, &generated).unwrap();
            return;
        }
        let committed = fs_err::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{} is out of date with the code\nhint: run: UPDATE_MANIFESTS=1 cargo test -p capstan \
             --bin capstan -- install_yaml_is_up_to_date",
            path.display()
        );
    }

    #[test]
    fn every_object_carries_the_contract_labels() {
        let options = Options {
            namespace: "capstan".to_owned(),
            ..Options::default()
        };
        for object in manifests(&options).unwrap() {
            let labels = &object["metadata"]["labels"];
            assert_eq!(labels[PART_OF], "capstan", "{object}");
            assert_eq!(labels[INSTANCE], "capstan", "{object}");
            assert_eq!(labels[VERSION], crate::version::CLIENT_VERSION, "{object}");
            if object["metadata"].get("namespace").is_some() {
                assert_eq!(object["metadata"]["namespace"], "capstan");
            }
        }
        let all = manifests(&options).unwrap();
        let deployment = all.iter().find(|o| o["kind"] == "Deployment").unwrap();
        assert_eq!(deployment["metadata"]["name"], CONTROLLER);
        let pod = &deployment["spec"]["template"]["metadata"]["labels"];
        assert_eq!(pod[PART_OF], "capstan");
        assert_eq!(pod[COMPONENT], "controller");
        for (key, value) in crate::logging::CONTROLLER_LABELS {
            assert_eq!(pod[key], value, "capstan logs selects the Pods by {key}");
        }
        let container = &deployment["spec"]["template"]["spec"]["containers"][0]["name"];
        assert_eq!(
            container,
            crate::logging::CONTAINER,
            "capstan logs reads it"
        );
        let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
        assert!(
            args.contains("source-controller.capstan.svc.cluster.local."),
            "{args}"
        );
    }

    #[test]
    fn options_reach_the_deployment_and_bad_ones_are_refused() {
        let options = Options {
            registry: "registry.internal/mirror/".to_owned(),
            image_pull_secret: Some("pull".to_owned()),
            toleration_keys: vec!["dedicated".to_owned()],
            concurrent: 10,
            network_policy: false,
            ..Options::default()
        };
        let all = manifests(&options).unwrap();
        assert!(all.iter().all(|o| o["kind"] != "NetworkPolicy"));
        let pod =
            &all.iter().find(|o| o["kind"] == "Deployment").unwrap()["spec"]["template"]["spec"];
        assert_eq!(
            pod["containers"][0]["image"],
            format!(
                "registry.internal/mirror/capstan:{}",
                crate::version::CLIENT_VERSION
            )
        );
        assert_eq!(pod["imagePullSecrets"], json!([{"name": "pull"}]));
        assert_eq!(
            pod["tolerations"],
            json!([{"key": "dedicated", "operator": "Exists"}])
        );
        assert!(
            pod["containers"][0]["args"]
                .as_array()
                .unwrap()
                .contains(&json!("--concurrent=10"))
        );
        let bad = |o: Options| manifests(&o).unwrap_err().to_string();
        assert!(
            bad(Options {
                namespace: "Flux_System".to_owned(),
                ..Options::default()
            })
            .contains("--namespace")
        );
        assert!(
            bad(Options {
                components_extra: vec!["image-thing".to_owned()],
                ..Options::default()
            })
            .contains("image-reflector-controller")
        );
        for (options, flag) in [
            (
                Options {
                    toleration_keys: vec!["a".to_owned(), String::new(), "b".to_owned()],
                    ..Options::default()
                },
                "--toleration-keys has an empty key",
            ),
            (
                Options {
                    toleration_keys: vec!["bad key".to_owned()],
                    ..Options::default()
                },
                "--toleration-keys: \"bad key\"",
            ),
            (
                Options {
                    registry: "https://registry.internal/mirror".to_owned(),
                    ..Options::default()
                },
                "--registry \"https://registry.internal/mirror\" must not have a scheme",
            ),
            (
                Options {
                    registry: "registry internal".to_owned(),
                    ..Options::default()
                },
                "--registry \"registry internal\"",
            ),
            (
                Options {
                    image_pull_secret: Some("x y".to_owned()),
                    ..Options::default()
                },
                "--image-pull-secret \"x y\" is not a valid Secret name",
            ),
        ] {
            let error = bad(options);
            assert!(error.contains(flag), "{flag:?} in {error}");
        }
        // Well-formed values pass.
        manifests(&Options {
            toleration_keys: vec![
                "node-role.kubernetes.io/control-plane".to_owned(),
                "dedicated".to_owned(),
            ],
            image_pull_secret: Some("regcred.v1".to_owned()),
            registry: "localhost:5000/capstan-mirror".to_owned(),
            ..Options::default()
        })
        .unwrap();
    }

    /// The Deployment's arguments are flags `capstan controller` has, with the values meant.
    #[test]
    fn the_deployment_arguments_parse_as_capstan_controller() {
        use clap::Parser;
        let args = controller_args(&Options::default());
        let cli =
            crate::cli::Cli::try_parse_from(std::iter::once("capstan".to_owned()).chain(args))
                .unwrap();
        let crate::cli::Command::Controller(controller) = cli.command else {
            panic!("not the controller command");
        };
        assert!(controller.election.enable_leader_election);
        assert_eq!(controller.serve.concurrent, 4);
        assert_eq!(controller.serve.storage_path, std::path::Path::new("/data"));
        assert_eq!(controller.serve.storage_addr.port(), HTTP_PORT);
        assert_eq!(controller.serve.receiver_addr.port(), RECEIVER_PORT);
        assert_eq!(
            controller.serve.storage_adv_addr.as_deref(),
            Some("source-controller.flux-system.svc.cluster.local.")
        );
        assert!(controller.serve.watch_all_namespaces);
        let args = controller_args(&Options {
            watch_all_namespaces: false,
            ..Options::default()
        });
        let cli =
            crate::cli::Cli::try_parse_from(std::iter::once("capstan".to_owned()).chain(args))
                .unwrap();
        let crate::cli::Command::Controller(controller) = cli.command else {
            panic!("not the controller command");
        };
        assert!(!controller.serve.watch_all_namespaces);
    }

    #[test]
    fn tenancy_objects_are_the_generated_ones() {
        let options = Options::default();
        let all = manifests(&options).unwrap();
        for object in tenancy_objects(&options) {
            assert!(all.contains(&object), "{object}");
        }
    }
}
