#!/usr/bin/env python3
"""Regenerates src/protobuf/messages.txt: the protobuf field table of the built-in kinds.

Usage: protobuf-table.py API_CHECKOUT APIMACHINERY_CHECKOUT > src/protobuf/messages.txt

Reads the `generated.proto` files of k8s.io/api and k8s.io/apimachinery and writes, for every
message reachable from the root kinds below, one `M <full name>` line followed by one
`<number> <json name> <o|r|m> <type>` line per field (`m`: a map, type `K,V`).
"""
import pathlib
import re
import sys

ROOTS = {
    "core/v1": ["Namespace", "ConfigMap", "Secret", "ServiceAccount", "Service", "Pod", "ResourceQuota",
                "LimitRange", "PersistentVolumeClaim", "Endpoints", "ReplicationController", "Event"],
    "apps/v1": ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ControllerRevision"],
    "batch/v1": ["Job", "CronJob"],
    "rbac/v1": ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"],
    "policy/v1": ["PodDisruptionBudget"],
    "networking/v1": ["Ingress", "IngressClass", "NetworkPolicy"],
    "scheduling/v1": ["PriorityClass"],
    "coordination/v1": ["Lease"],
    "autoscaling/v1": ["Scale"],
    "autoscaling/v2": ["HorizontalPodAutoscaler"],
}
META = ["pkg/apis/meta/v1", "pkg/runtime", "pkg/util/intstr", "pkg/api/resource"]
SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "double", "float", "fixed64", "sfixed64"}

messages = {}


def load(path):
    text = path.read_text()
    package = re.search(r"^package ([\w.]+);", text, re.M).group(1)
    for m in re.finditer(r"^message (\w+) \{(.*?)^\}", text, re.M | re.S):
        fields = []
        for line in m.group(2).splitlines():
            line = line.strip()
            if line.startswith("//"):
                continue
            f = re.match(r"(optional|repeated) ([\w.]+) (\w+) = (\d+);", line)
            if f:
                fields.append((int(f.group(4)), f.group(3), f.group(1)[0], qualify(package, f.group(2))))
                continue
            f = re.match(r"map<([\w.]+), ?([\w.]+)> (\w+) = (\d+);", line)
            if f:
                fields.append((int(f.group(4)), f.group(3), "m",
                               qualify(package, f.group(1)) + "," + qualify(package, f.group(2))))
        messages[package + "." + m.group(1)] = fields
    return package


def qualify(package, t):
    if t in SCALARS:
        return t
    if t.startswith("."):
        return t[1:]
    return package + "." + t


def main():
    api, machinery = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    for p in META:
        load(machinery / p / "generated.proto")
    roots = []
    for gv, kinds in ROOTS.items():
        package = load(api / gv / "generated.proto")
        roots += [package + "." + k for k in kinds]
    roots.append("k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions")
    seen, todo = [], list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in messages:
            continue
        seen.append(name)
        for _, _, _, t in messages[name]:
            todo += [x for x in t.split(",") if x not in SCALARS]
    for name in sorted(seen):
        print("M " + name)
        for number, field, label, t in messages[name]:
            print(f"{number} {field} {label} {t}")


main()
