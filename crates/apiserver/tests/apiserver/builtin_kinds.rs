//! The built-in kinds of Kubernetes 1.33+ that fleets apply (DRA, service CIDRs, admission
//! policies, runtime and storage classes, …): `kubectl apply` (client- and server-side),
//! discovery and `get` work for them as on a real cluster.

use crate::harness::TestCluster;

const MANIFESTS: &str = r#"apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-gpu, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com}
---
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: extra}
spec:
  cidrs: [10.100.0.0/16]
---
apiVersion: networking.k8s.io/v1
kind: IPAddress
metadata: {name: 10.100.0.10}
spec:
  parentRef: {group: "", resource: services, namespace: default, name: web}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replica-limit}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: object.spec.replicas <= 5
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replica-limit}
spec:
  policyName: replica-limit
  validationActions: [Deny]
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: external-1
  namespace: default
  labels: {kubernetes.io/service-name: external}
addressType: IPv4
ports: [{name: http, port: 80, protocol: TCP}]
endpoints:
- addresses: [192.0.2.10]
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttributesClass
metadata: {name: fast}
driverName: ebs.csi.aws.com
parameters: {iops: "3000"}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: ebs.csi.aws.com}
spec: {attachRequired: true}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: batch}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 10
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: batch}
spec:
  priorityLevelConfiguration: {name: batch}
  matchingPrecedence: 1000
  rules:
  - subjects: [{kind: Group, group: {name: batch-jobs}}]
    resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"]}]
---
apiVersion: v1
kind: PodTemplate
metadata: {name: worker, namespace: default}
template:
  metadata: {labels: {app: worker}}
  spec:
    containers: [{name: worker, image: busybox:1.36}]
"#;

#[tokio::test]
async fn kinds_of_current_kubernetes_apply_and_list() {
    let c = TestCluster::start().await;
    let applied = c.kubectl_stdin(&["apply", "-f", "-"], MANIFESTS).await.ok();
    for object in [
        "deviceclass.resource.k8s.io/gpu.example.com created",
        "resourceclaimtemplate.resource.k8s.io/one-gpu created",
        "resourceclaim.resource.k8s.io/shared-gpu created",
        "servicecidr.networking.k8s.io/extra created",
        "ipaddress.networking.k8s.io/10.100.0.10 created",
        "validatingadmissionpolicy.admissionregistration.k8s.io/replica-limit created",
        "validatingadmissionpolicybinding.admissionregistration.k8s.io/replica-limit created",
        "runtimeclass.node.k8s.io/gvisor created",
        "endpointslice.discovery.k8s.io/external-1 created",
        "volumeattributesclass.storage.k8s.io/fast created",
        "csidriver.storage.k8s.io/ebs.csi.aws.com created",
        "prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/batch created",
        "flowschema.flowcontrol.apiserver.k8s.io/batch created",
        "podtemplate/worker created",
    ] {
        assert!(
            applied.stdout.contains(object),
            "{object}: {}",
            applied.stdout
        );
    }
    // Server-side apply of the same is a no-op that succeeds (what Capstan's apply engine does).
    c.kubectl_stdin(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        MANIFESTS,
    )
    .await
    .ok();
    let resources = c.kubectl(&["api-resources", "-o", "name"]).await.ok();
    for name in [
        "deviceclasses.resource.k8s.io",
        "resourceclaims.resource.k8s.io",
        "resourceclaimtemplates.resource.k8s.io",
        "resourceslices.resource.k8s.io",
        "ipaddresses.networking.k8s.io",
        "servicecidrs.networking.k8s.io",
        "validatingadmissionpolicies.admissionregistration.k8s.io",
        "validatingadmissionpolicybindings.admissionregistration.k8s.io",
        "endpointslices.discovery.k8s.io",
        "runtimeclasses.node.k8s.io",
        "volumeattributesclasses.storage.k8s.io",
        "csidrivers.storage.k8s.io",
        "csinodes.storage.k8s.io",
        "csistoragecapacities.storage.k8s.io",
        "volumeattachments.storage.k8s.io",
        "flowschemas.flowcontrol.apiserver.k8s.io",
        "prioritylevelconfigurations.flowcontrol.apiserver.k8s.io",
        "certificatesigningrequests.certificates.k8s.io",
        "podtemplates",
    ] {
        assert!(
            resources.stdout.lines().any(|l| l == name),
            "{name}: {}",
            resources.stdout
        );
    }
    let ips = c.kubectl(&["get", "ip"]).await.ok();
    assert!(ips.stdout.contains("10.100.0.10"), "{}", ips.stdout);
    let vac = c
        .kubectl(&["get", "vac", "fast", "-o", "json"])
        .await
        .ok()
        .json();
    assert_eq!(vac["parameters"]["iops"], "3000");
    // Schemas are enforced as kube-apiserver's: a DeviceClass selector is a list.
    let refused = c
        .kubectl_stdin(
            &["apply", "-f", "-"],
            "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: bad}\nspec: {selectors: 3}\n",
        )
        .await
        .fails();
    assert!(refused.stderr.contains("selectors"), "{}", refused.stderr);
}
