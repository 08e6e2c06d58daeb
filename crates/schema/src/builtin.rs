//! Built-in Kubernetes kinds the embedded control plane serves, and their OpenAPI schemas.
//!
//! The schemas come from k8s-openapi's `schemars` implementations (Kubernetes 1.37 API types),
//! with `description`s stripped to save memory. k8s-openapi does not carry the strategic merge
//! patch and list/map topology extensions, so they are injected from a table
//! (`src/builtin/patch_metadata.rs`) generated from the Kubernetes **1.21** OpenAPI document in the shared
//! corpus: fields added to the API after 1.21 get no metadata (they merge atomically), and
//! extensions changed since 1.21 keep their 1.21 form. The test
//! `patch_metadata_table_is_up_to_date` regenerates the table (set `UPDATE_PATCH_METADATA=1`)
//! and fails when the committed file drifts.
//!
//! Other adjustments to k8s-openapi's output:
//! * free-form objects (`RawExtension`, `FieldsV1`, apiextensions `JSON` and the
//!   `JSONSchemaPropsOr*` unions) get `x-kubernetes-preserve-unknown-fields: true` so pruning
//!   keeps their content, and `JSON` loses its `type: object` (it holds any JSON value);
//! * `Quantity` gets `format: quantity`: strings must match the quantity syntax and any
//!   number (`cpu: 0.5`) is accepted, where a plain int-or-string takes integers only;
//! * `metadata`, `spec` and `status` are not `required` on root kinds (k8s-openapi marks them
//!   so because its Rust fields are not optional; the Kubernetes API does not);
//! * each root kind's definition carries `x-kubernetes-group-version-kind`.

use std::sync::{Arc, OnceLock};

use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use crate::Schema;
use crate::compile::{Compiler, Registry};

mod patch_metadata;

/// A built-in resource type.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinKind {
    /// API group; empty for the core group.
    pub group: &'static str,
    /// API version, e.g. `v1`.
    pub version: &'static str,
    /// Kind, e.g. `Deployment`.
    pub kind: &'static str,
    /// Resource name, e.g. `deployments`.
    pub plural: &'static str,
    /// Singular resource name, e.g. `deployment`.
    pub singular: &'static str,
    /// Short names as `kubectl api-resources` lists them, e.g. `deploy`.
    pub short_names: &'static [&'static str],
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Categories, e.g. `all`.
    pub categories: &'static [&'static str],
    /// Subresources served: `status`, `scale`.
    pub subresources: &'static [&'static str],
    /// OpenAPI definition name, e.g. `io.k8s.api.apps.v1.Deployment`.
    pub schema_name: &'static str,
}

impl BuiltinKind {
    /// `group/version`, or just `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Adds `T`'s definition (and everything it references) to the generator.
type Generator = fn(&mut SchemaGenerator);

fn add<T: JsonSchema>(generator: &mut SchemaGenerator) {
    let _ = generator.subschema_for::<T>();
}

/// Every built-in kind, in discovery order.
static KINDS: &[BuiltinKind] = &[
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        singular: "namespace",
        short_names: &["ns"],
        namespaced: false,
        categories: &[],
        subresources: &["status"],
        schema_name: "io.k8s.api.core.v1.Namespace",
    },
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        singular: "configmap",
        short_names: &["cm"],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.core.v1.ConfigMap",
    },
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        singular: "secret",
        short_names: &[],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.core.v1.Secret",
    },
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        short_names: &["sa"],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.core.v1.ServiceAccount",
    },
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        singular: "service",
        short_names: &["svc"],
        namespaced: true,
        categories: &["all"],
        subresources: &["status"],
        schema_name: "io.k8s.api.core.v1.Service",
    },
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "Endpoints",
        plural: "endpoints",
        singular: "endpoints",
        short_names: &["ep"],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.core.v1.Endpoints",
    },
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        singular: "pod",
        short_names: &["po"],
        namespaced: true,
        categories: &["all"],
        subresources: &["status"],
        schema_name: "io.k8s.api.core.v1.Pod",
    },
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "ReplicationController",
        plural: "replicationcontrollers",
        singular: "replicationcontroller",
        short_names: &["rc"],
        namespaced: true,
        categories: &["all"],
        subresources: &["status", "scale"],
        schema_name: "io.k8s.api.core.v1.ReplicationController",
    },
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        short_names: &["pvc"],
        namespaced: true,
        categories: &[],
        subresources: &["status"],
        schema_name: "io.k8s.api.core.v1.PersistentVolumeClaim",
    },
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "PersistentVolume",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        short_names: &["pv"],
        namespaced: false,
        categories: &[],
        subresources: &["status"],
        schema_name: "io.k8s.api.core.v1.PersistentVolume",
    },
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        short_names: &["ev"],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.core.v1.Event",
    },
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "LimitRange",
        plural: "limitranges",
        singular: "limitrange",
        short_names: &["limits"],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.core.v1.LimitRange",
    },
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "ResourceQuota",
        plural: "resourcequotas",
        singular: "resourcequota",
        short_names: &["quota"],
        namespaced: true,
        categories: &[],
        subresources: &["status"],
        schema_name: "io.k8s.api.core.v1.ResourceQuota",
    },
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        singular: "node",
        short_names: &["no"],
        namespaced: false,
        categories: &[],
        subresources: &["status"],
        schema_name: "io.k8s.api.core.v1.Node",
    },
    BuiltinKind {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        singular: "deployment",
        short_names: &["deploy"],
        namespaced: true,
        categories: &["all"],
        subresources: &["status", "scale"],
        schema_name: "io.k8s.api.apps.v1.Deployment",
    },
    BuiltinKind {
        group: "apps",
        version: "v1",
        kind: "ReplicaSet",
        plural: "replicasets",
        singular: "replicaset",
        short_names: &["rs"],
        namespaced: true,
        categories: &["all"],
        subresources: &["status", "scale"],
        schema_name: "io.k8s.api.apps.v1.ReplicaSet",
    },
    BuiltinKind {
        group: "apps",
        version: "v1",
        kind: "StatefulSet",
        plural: "statefulsets",
        singular: "statefulset",
        short_names: &["sts"],
        namespaced: true,
        categories: &["all"],
        subresources: &["status", "scale"],
        schema_name: "io.k8s.api.apps.v1.StatefulSet",
    },
    BuiltinKind {
        group: "apps",
        version: "v1",
        kind: "DaemonSet",
        plural: "daemonsets",
        singular: "daemonset",
        short_names: &["ds"],
        namespaced: true,
        categories: &["all"],
        subresources: &["status"],
        schema_name: "io.k8s.api.apps.v1.DaemonSet",
    },
    BuiltinKind {
        group: "apps",
        version: "v1",
        kind: "ControllerRevision",
        plural: "controllerrevisions",
        singular: "controllerrevision",
        short_names: &[],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.apps.v1.ControllerRevision",
    },
    BuiltinKind {
        group: "batch",
        version: "v1",
        kind: "Job",
        plural: "jobs",
        singular: "job",
        short_names: &[],
        namespaced: true,
        categories: &["all"],
        subresources: &["status"],
        schema_name: "io.k8s.api.batch.v1.Job",
    },
    BuiltinKind {
        group: "batch",
        version: "v1",
        kind: "CronJob",
        plural: "cronjobs",
        singular: "cronjob",
        short_names: &["cj"],
        namespaced: true,
        categories: &["all"],
        subresources: &["status"],
        schema_name: "io.k8s.api.batch.v1.CronJob",
    },
    BuiltinKind {
        group: "autoscaling",
        version: "v2",
        kind: "HorizontalPodAutoscaler",
        plural: "horizontalpodautoscalers",
        singular: "horizontalpodautoscaler",
        short_names: &["hpa"],
        namespaced: true,
        categories: &["all"],
        subresources: &["status"],
        schema_name: "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler",
    },
    BuiltinKind {
        group: "networking.k8s.io",
        version: "v1",
        kind: "Ingress",
        plural: "ingresses",
        singular: "ingress",
        short_names: &["ing"],
        namespaced: true,
        categories: &[],
        subresources: &["status"],
        schema_name: "io.k8s.api.networking.v1.Ingress",
    },
    BuiltinKind {
        group: "networking.k8s.io",
        version: "v1",
        kind: "IngressClass",
        plural: "ingressclasses",
        singular: "ingressclass",
        short_names: &[],
        namespaced: false,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.networking.v1.IngressClass",
    },
    BuiltinKind {
        group: "networking.k8s.io",
        version: "v1",
        kind: "NetworkPolicy",
        plural: "networkpolicies",
        singular: "networkpolicy",
        short_names: &["netpol"],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.networking.v1.NetworkPolicy",
    },
    BuiltinKind {
        group: "policy",
        version: "v1",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        short_names: &["pdb"],
        namespaced: true,
        categories: &[],
        subresources: &["status"],
        schema_name: "io.k8s.api.policy.v1.PodDisruptionBudget",
    },
    BuiltinKind {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "Role",
        plural: "roles",
        singular: "role",
        short_names: &[],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.rbac.v1.Role",
    },
    BuiltinKind {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "RoleBinding",
        plural: "rolebindings",
        singular: "rolebinding",
        short_names: &[],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.rbac.v1.RoleBinding",
    },
    BuiltinKind {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRole",
        plural: "clusterroles",
        singular: "clusterrole",
        short_names: &[],
        namespaced: false,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.rbac.v1.ClusterRole",
    },
    BuiltinKind {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRoleBinding",
        plural: "clusterrolebindings",
        singular: "clusterrolebinding",
        short_names: &[],
        namespaced: false,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.rbac.v1.ClusterRoleBinding",
    },
    BuiltinKind {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        singular: "lease",
        short_names: &[],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.coordination.v1.Lease",
    },
    BuiltinKind {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        short_names: &["ev"],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.events.v1.Event",
    },
    BuiltinKind {
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        singular: "customresourcedefinition",
        short_names: &["crd", "crds"],
        namespaced: false,
        categories: &["api-extensions"],
        subresources: &["status"],
        schema_name: "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    },
    BuiltinKind {
        group: "storage.k8s.io",
        version: "v1",
        kind: "StorageClass",
        plural: "storageclasses",
        singular: "storageclass",
        short_names: &["sc"],
        namespaced: false,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.storage.v1.StorageClass",
    },
    BuiltinKind {
        group: "scheduling.k8s.io",
        version: "v1",
        kind: "PriorityClass",
        plural: "priorityclasses",
        singular: "priorityclass",
        short_names: &["pc"],
        namespaced: false,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.scheduling.v1.PriorityClass",
    },
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingWebhookConfiguration",
        plural: "validatingwebhookconfigurations",
        singular: "validatingwebhookconfiguration",
        short_names: &[],
        namespaced: false,
        categories: &["api-extensions"],
        subresources: &[],
        schema_name: "io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration",
    },
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "MutatingWebhookConfiguration",
        plural: "mutatingwebhookconfigurations",
        singular: "mutatingwebhookconfiguration",
        short_names: &[],
        namespaced: false,
        categories: &["api-extensions"],
        subresources: &[],
        schema_name: "io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration",
    },
    BuiltinKind {
        group: "apiregistration.k8s.io",
        version: "v1",
        kind: "APIService",
        plural: "apiservices",
        singular: "apiservice",
        short_names: &[],
        namespaced: false,
        categories: &["api-extensions"],
        subresources: &["status"],
        schema_name: "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService",
    },
    // Kinds of Kubernetes 1.33+ (GA) that fleets apply.
    BuiltinKind {
        group: "",
        version: "v1",
        kind: "PodTemplate",
        plural: "podtemplates",
        singular: "podtemplate",
        short_names: &[],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.core.v1.PodTemplate",
    },
    BuiltinKind {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        plural: "endpointslices",
        singular: "endpointslice",
        short_names: &[],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.discovery.v1.EndpointSlice",
    },
    BuiltinKind {
        group: "networking.k8s.io",
        version: "v1",
        kind: "IPAddress",
        plural: "ipaddresses",
        singular: "ipaddress",
        short_names: &["ip"],
        namespaced: false,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.networking.v1.IPAddress",
    },
    BuiltinKind {
        group: "networking.k8s.io",
        version: "v1",
        kind: "ServiceCIDR",
        plural: "servicecidrs",
        singular: "servicecidr",
        short_names: &[],
        namespaced: false,
        categories: &[],
        subresources: &["status"],
        schema_name: "io.k8s.api.networking.v1.ServiceCIDR",
    },
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingAdmissionPolicy",
        plural: "validatingadmissionpolicies",
        singular: "validatingadmissionpolicy",
        short_names: &[],
        namespaced: false,
        categories: &["api-extensions"],
        subresources: &["status"],
        schema_name: "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicy",
    },
    BuiltinKind {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingAdmissionPolicyBinding",
        plural: "validatingadmissionpolicybindings",
        singular: "validatingadmissionpolicybinding",
        short_names: &[],
        namespaced: false,
        categories: &["api-extensions"],
        subresources: &[],
        schema_name: "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1",
        kind: "DeviceClass",
        plural: "deviceclasses",
        singular: "deviceclass",
        short_names: &[],
        namespaced: false,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.resource.v1.DeviceClass",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1",
        kind: "ResourceClaim",
        plural: "resourceclaims",
        singular: "resourceclaim",
        short_names: &[],
        namespaced: true,
        categories: &[],
        subresources: &["status"],
        schema_name: "io.k8s.api.resource.v1.ResourceClaim",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1",
        kind: "ResourceClaimTemplate",
        plural: "resourceclaimtemplates",
        singular: "resourceclaimtemplate",
        short_names: &[],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.resource.v1.ResourceClaimTemplate",
    },
    BuiltinKind {
        group: "resource.k8s.io",
        version: "v1",
        kind: "ResourceSlice",
        plural: "resourceslices",
        singular: "resourceslice",
        short_names: &[],
        namespaced: false,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.resource.v1.ResourceSlice",
    },
    BuiltinKind {
        group: "node.k8s.io",
        version: "v1",
        kind: "RuntimeClass",
        plural: "runtimeclasses",
        singular: "runtimeclass",
        short_names: &[],
        namespaced: false,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.node.v1.RuntimeClass",
    },
    BuiltinKind {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSIDriver",
        plural: "csidrivers",
        singular: "csidriver",
        short_names: &[],
        namespaced: false,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.storage.v1.CSIDriver",
    },
    BuiltinKind {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSINode",
        plural: "csinodes",
        singular: "csinode",
        short_names: &[],
        namespaced: false,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.storage.v1.CSINode",
    },
    BuiltinKind {
        group: "storage.k8s.io",
        version: "v1",
        kind: "CSIStorageCapacity",
        plural: "csistoragecapacities",
        singular: "csistoragecapacity",
        short_names: &[],
        namespaced: true,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.storage.v1.CSIStorageCapacity",
    },
    BuiltinKind {
        group: "storage.k8s.io",
        version: "v1",
        kind: "VolumeAttachment",
        plural: "volumeattachments",
        singular: "volumeattachment",
        short_names: &[],
        namespaced: false,
        categories: &[],
        subresources: &["status"],
        schema_name: "io.k8s.api.storage.v1.VolumeAttachment",
    },
    BuiltinKind {
        group: "storage.k8s.io",
        version: "v1",
        kind: "VolumeAttributesClass",
        plural: "volumeattributesclasses",
        singular: "volumeattributesclass",
        short_names: &["vac"],
        namespaced: false,
        categories: &[],
        subresources: &[],
        schema_name: "io.k8s.api.storage.v1.VolumeAttributesClass",
    },
    BuiltinKind {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1",
        kind: "FlowSchema",
        plural: "flowschemas",
        singular: "flowschema",
        short_names: &[],
        namespaced: false,
        categories: &[],
        subresources: &["status"],
        schema_name: "io.k8s.api.flowcontrol.v1.FlowSchema",
    },
    BuiltinKind {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1",
        kind: "PriorityLevelConfiguration",
        plural: "prioritylevelconfigurations",
        singular: "prioritylevelconfiguration",
        short_names: &[],
        namespaced: false,
        categories: &[],
        subresources: &["status"],
        schema_name: "io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration",
    },
    BuiltinKind {
        group: "certificates.k8s.io",
        version: "v1",
        kind: "CertificateSigningRequest",
        plural: "certificatesigningrequests",
        singular: "certificatesigningrequest",
        short_names: &["csr"],
        namespaced: false,
        categories: &[],
        subresources: &["status"],
        schema_name: "io.k8s.api.certificates.v1.CertificateSigningRequest",
    },
];

/// How to generate the root definition of each kind, by definition name.
static GENERATORS: &[(&str, Generator)] = &[
    ("io.k8s.api.core.v1.Namespace", add::<k8s_openapi::api::core::v1::Namespace>),
    ("io.k8s.api.core.v1.ConfigMap", add::<k8s_openapi::api::core::v1::ConfigMap>),
    ("io.k8s.api.core.v1.Secret", add::<k8s_openapi::api::core::v1::Secret>),
    ("io.k8s.api.core.v1.ServiceAccount", add::<k8s_openapi::api::core::v1::ServiceAccount>),
    ("io.k8s.api.core.v1.Service", add::<k8s_openapi::api::core::v1::Service>),
    ("io.k8s.api.core.v1.Endpoints", add::<k8s_openapi::api::core::v1::Endpoints>),
    ("io.k8s.api.core.v1.Pod", add::<k8s_openapi::api::core::v1::Pod>),
    ("io.k8s.api.core.v1.ReplicationController", add::<k8s_openapi::api::core::v1::ReplicationController>),
    ("io.k8s.api.core.v1.PersistentVolumeClaim", add::<k8s_openapi::api::core::v1::PersistentVolumeClaim>),
    ("io.k8s.api.core.v1.PersistentVolume", add::<k8s_openapi::api::core::v1::PersistentVolume>),
    ("io.k8s.api.core.v1.Event", add::<k8s_openapi::api::core::v1::Event>),
    ("io.k8s.api.core.v1.LimitRange", add::<k8s_openapi::api::core::v1::LimitRange>),
    ("io.k8s.api.core.v1.ResourceQuota", add::<k8s_openapi::api::core::v1::ResourceQuota>),
    ("io.k8s.api.core.v1.Node", add::<k8s_openapi::api::core::v1::Node>),
    ("io.k8s.api.apps.v1.Deployment", add::<k8s_openapi::api::apps::v1::Deployment>),
    ("io.k8s.api.apps.v1.ReplicaSet", add::<k8s_openapi::api::apps::v1::ReplicaSet>),
    ("io.k8s.api.apps.v1.StatefulSet", add::<k8s_openapi::api::apps::v1::StatefulSet>),
    ("io.k8s.api.apps.v1.DaemonSet", add::<k8s_openapi::api::apps::v1::DaemonSet>),
    ("io.k8s.api.apps.v1.ControllerRevision", add::<k8s_openapi::api::apps::v1::ControllerRevision>),
    ("io.k8s.api.batch.v1.Job", add::<k8s_openapi::api::batch::v1::Job>),
    ("io.k8s.api.batch.v1.CronJob", add::<k8s_openapi::api::batch::v1::CronJob>),
    ("io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler", add::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>),
    ("io.k8s.api.networking.v1.Ingress", add::<k8s_openapi::api::networking::v1::Ingress>),
    ("io.k8s.api.networking.v1.IngressClass", add::<k8s_openapi::api::networking::v1::IngressClass>),
    ("io.k8s.api.networking.v1.NetworkPolicy", add::<k8s_openapi::api::networking::v1::NetworkPolicy>),
    ("io.k8s.api.policy.v1.PodDisruptionBudget", add::<k8s_openapi::api::policy::v1::PodDisruptionBudget>),
    ("io.k8s.api.rbac.v1.Role", add::<k8s_openapi::api::rbac::v1::Role>),
    ("io.k8s.api.rbac.v1.RoleBinding", add::<k8s_openapi::api::rbac::v1::RoleBinding>),
    ("io.k8s.api.rbac.v1.ClusterRole", add::<k8s_openapi::api::rbac::v1::ClusterRole>),
    ("io.k8s.api.rbac.v1.ClusterRoleBinding", add::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>),
    ("io.k8s.api.coordination.v1.Lease", add::<k8s_openapi::api::coordination::v1::Lease>),
    ("io.k8s.api.events.v1.Event", add::<k8s_openapi::api::events::v1::Event>),
    ("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition", add::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>),
    ("io.k8s.api.storage.v1.StorageClass", add::<k8s_openapi::api::storage::v1::StorageClass>),
    ("io.k8s.api.scheduling.v1.PriorityClass", add::<k8s_openapi::api::scheduling::v1::PriorityClass>),
    ("io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration", add::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>),
    ("io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration", add::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>),
    ("io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService", add::<k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService>),
    ("io.k8s.api.core.v1.PodTemplate", add::<k8s_openapi::api::core::v1::PodTemplate>),
    ("io.k8s.api.discovery.v1.EndpointSlice", add::<k8s_openapi::api::discovery::v1::EndpointSlice>),
    ("io.k8s.api.networking.v1.IPAddress", add::<k8s_openapi::api::networking::v1::IPAddress>),
    ("io.k8s.api.networking.v1.ServiceCIDR", add::<k8s_openapi::api::networking::v1::ServiceCIDR>),
    ("io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicy", add::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy>),
    ("io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding", add::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding>),
    ("io.k8s.api.resource.v1.DeviceClass", add::<k8s_openapi::api::resource::v1::DeviceClass>),
    ("io.k8s.api.resource.v1.ResourceClaim", add::<k8s_openapi::api::resource::v1::ResourceClaim>),
    ("io.k8s.api.resource.v1.ResourceClaimTemplate", add::<k8s_openapi::api::resource::v1::ResourceClaimTemplate>),
    ("io.k8s.api.resource.v1.ResourceSlice", add::<k8s_openapi::api::resource::v1::ResourceSlice>),
    ("io.k8s.api.node.v1.RuntimeClass", add::<k8s_openapi::api::node::v1::RuntimeClass>),
    ("io.k8s.api.storage.v1.CSIDriver", add::<k8s_openapi::api::storage::v1::CSIDriver>),
    ("io.k8s.api.storage.v1.CSINode", add::<k8s_openapi::api::storage::v1::CSINode>),
    ("io.k8s.api.storage.v1.CSIStorageCapacity", add::<k8s_openapi::api::storage::v1::CSIStorageCapacity>),
    ("io.k8s.api.storage.v1.VolumeAttachment", add::<k8s_openapi::api::storage::v1::VolumeAttachment>),
    ("io.k8s.api.storage.v1.VolumeAttributesClass", add::<k8s_openapi::api::storage::v1::VolumeAttributesClass>),
    ("io.k8s.api.flowcontrol.v1.FlowSchema", add::<k8s_openapi::api::flowcontrol::v1::FlowSchema>),
    ("io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration", add::<k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration>),
    ("io.k8s.api.certificates.v1.CertificateSigningRequest", add::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>),
];

/// Definitions served besides the root kinds.
static EXTRA: &[Generator] = &[
    add::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    add::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>,
    add::<k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions>,
];

/// Definition name of `ObjectMeta`.
pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// `resource.Quantity`: int-or-string that also takes decimals, with the quantity syntax.
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// apiextensions `JSON`: any JSON value.
const JSON: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON";

/// Free-form objects whose content must survive pruning.
const OPAQUE: &[&str] = &[
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    JSON,
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
];

/// Every built-in kind served.
pub fn kinds() -> &'static [BuiltinKind] {
    KINDS
}

/// The built-in kind with this group, version and kind.
pub fn find(group: &str, version: &str, kind: &str) -> Option<&'static BuiltinKind> {
    KINDS
        .iter()
        .find(|k| k.group == group && k.version == version && k.kind == kind)
}

/// OpenAPI component schemas for every built-in kind and what they reference, descriptions
/// stripped, patch and list extensions injected, `x-kubernetes-group-version-kind` on root kinds.
/// References have the form `#/components/schemas/<name>`. Built once, on first use.
pub fn definitions() -> &'static Map<String, Value> {
    DEFINITIONS.get_or_init(generate)
}

static DEFINITIONS: OnceLock<Map<String, Value>> = OnceLock::new();

/// Whether `definitions` is [`definitions()`], without building it.
pub(crate) fn is_builtin(definitions: &Map<String, Value>) -> bool {
    DEFINITIONS
        .get()
        .is_some_and(|built| std::ptr::eq(built, definitions))
}

/// The schema of a built-in kind.
pub fn schema(group: &str, version: &str, kind: &str) -> Option<Schema> {
    named(find(group, version, kind)?.schema_name)
}

/// The schema of `io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`.
pub fn object_meta() -> Schema {
    named(OBJECT_META).expect("ObjectMeta is generated")
}

/// The schema of any built-in definition by name, e.g. `io.k8s.api.core.v1.PodSpec`.
pub fn named(definition: &str) -> Option<Schema> {
    let registry = registry();
    let id = *registry.names.get(definition)?;
    Some(Schema::from_registry(Arc::clone(registry), id))
}

/// A bare `$ref` into [`definitions`], served from the shared registry.
pub(crate) fn lookup_reference(schema: &Value) -> Option<Schema> {
    let reference = crate::compile::bare_reference(schema)?;
    let name = reference
        .strip_prefix("#/components/schemas/")
        .or_else(|| reference.strip_prefix("#/definitions/"))?;
    named(name)
}

/// All definitions compiled once.
fn registry() -> &'static Arc<Registry> {
    static REGISTRY: OnceLock<Arc<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let definitions = definitions();
        let mut compiler = Compiler::new(definitions);
        for name in definitions.keys() {
            compiler
                .add_definition(name)
                .unwrap_or_else(|e| panic!("built-in definition {name} does not compile: {e}"));
        }
        Arc::new(
            compiler
                .finish()
                .unwrap_or_else(|e| panic!("built-in definitions do not compile: {e}")),
        )
    })
}

fn generate() -> Map<String, Value> {
    let mut generator = SchemaSettings::openapi3()
        .with(|settings| {
            settings.transforms.clear();
            settings.meta_schema = None;
        })
        .into_generator();
    for (_, add) in GENERATORS {
        add(&mut generator);
    }
    for add in EXTRA {
        add(&mut generator);
    }
    let mut definitions = generator.take_definitions(false);
    for schema in definitions.values_mut() {
        strip_descriptions(schema);
    }
    for entry in patch_metadata::PATCH_METADATA {
        let Some(definition) = definitions.get_mut(entry.definition) else {
            continue;
        };
        let target = if entry.property.is_empty() {
            Some(definition)
        } else {
            definition
                .get_mut("properties")
                .and_then(|properties| properties.get_mut(entry.property))
        };
        if let Some(Value::Object(target)) = target {
            entry.inject(target);
        }
    }
    for name in OPAQUE {
        if let Some(Value::Object(definition)) = definitions.get_mut(*name) {
            definition.insert(
                "x-kubernetes-preserve-unknown-fields".into(),
                Value::Bool(true),
            );
            if *name == JSON {
                definition.remove("type");
            }
        }
    }
    if let Some(Value::Object(quantity)) = definitions.get_mut(QUANTITY) {
        quantity.insert("format".into(), Value::String("quantity".into()));
    }
    for kind in KINDS {
        let Some(Value::Object(definition)) = definitions.get_mut(kind.schema_name) else {
            continue;
        };
        if let Some(Value::Array(required)) = definition.get_mut("required") {
            required.retain(|name| !matches!(name.as_str(), Some("metadata" | "spec" | "status")));
            if required.is_empty() {
                definition.remove("required");
            }
        }
        definition.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": kind.group, "kind": kind.kind, "version": kind.version}]),
        );
    }
    definitions
}

/// Removes `description` annotations from a schema and its subschemas (not from property
/// names: JSONSchemaProps has a property called `description`).
fn strip_descriptions(schema: &mut Value) {
    let Value::Object(object) = schema else {
        return;
    };
    if object.get("description").is_some_and(Value::is_string) {
        object.remove("description");
    }
    for (key, value) in object.iter_mut() {
        match key.as_str() {
            "properties" | "patternProperties" | "definitions" | "$defs" => {
                if let Value::Object(children) = value {
                    children.values_mut().for_each(strip_descriptions);
                }
            }
            "items" | "additionalProperties" | "not" | "additionalItems" => {
                strip_descriptions(value);
            }
            "allOf" | "anyOf" | "oneOf" => {
                if let Value::Array(list) = value {
                    list.iter_mut().for_each(strip_descriptions);
                }
            }
            _ => {}
        }
    }
}

/// One row of the generated patch metadata table: the extensions of a property (or, with an
/// empty `property`, of the definition itself) in the Kubernetes OpenAPI document.
#[derive(Debug)]
pub(crate) struct PatchMetadata {
    pub definition: &'static str,
    pub property: &'static str,
    pub patch_strategy: Option<&'static str>,
    pub patch_merge_key: Option<&'static str>,
    pub list_type: Option<&'static str>,
    pub list_map_keys: &'static [&'static str],
    pub map_type: Option<&'static str>,
}

impl PatchMetadata {
    fn inject(&self, target: &mut Map<String, Value>) {
        let mut set = |key: &str, value: Option<&str>| {
            if let Some(value) = value {
                target.insert(key.to_owned(), Value::String(value.to_owned()));
            }
        };
        set("x-kubernetes-patch-strategy", self.patch_strategy);
        set("x-kubernetes-patch-merge-key", self.patch_merge_key);
        set("x-kubernetes-list-type", self.list_type);
        set("x-kubernetes-map-type", self.map_type);
        if !self.list_map_keys.is_empty() {
            target.insert(
                "x-kubernetes-list-map-keys".to_owned(),
                json!(self.list_map_keys),
            );
        }
    }
}

#[cfg(test)]
mod tests;
