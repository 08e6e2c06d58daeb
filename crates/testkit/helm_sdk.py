#!/usr/bin/env python3
"""Helm's own Go SDK (PyPI helm-python-sdk: Helm v4.2.3) as the judge of Capstan's Helm work:
release storage, packaged charts, OCI charts and chart repositories. Run through
`capstan_testkit::helm_repo::helm_sdk`.

    helm_sdk.py REQUEST_JSON

REQUEST_JSON is {"op": OP, ...arguments by name}.
Releases, in the cluster of "kubeconfig" (a path), in "namespace":
  op "install":    chart, name, values?,       op "upgrade":  chart, name, values?, max_history?,
                   server_side_apply? (false:                   force_conflicts? (--force-conflicts)
                   --server-side=false)
  op "list":       all_states?                 op "history":  name
  op "status":     name, revision?             op "get_values": name, revision?, all_values?
  op "rollback":   name, version?              op "uninstall": name, keep_history?
Charts and registries (plain HTTP; "user" and "password" log in first):
  op "package":    chart, destination, version?      -> the archive's path
  op "render":     chart                             -> {"<template path>": "<text>"}
  op "push":       archive, remote (oci://HOST/PATH), user?, password?
  op "pull":       ref (oci://HOST/PATH/NAME), version?, destination, user?, password?
  op "tags":       ref (oci://HOST/PATH/NAME)        -> ["<version>", ...]
  op "repo_index": directory, base_url?              (`helm repo index`: writes index.yaml)
The answer (stdout) is JSON: {"ok": <what the SDK returned>} or
{"error": "<ExceptionClass>: <Helm's message>"}.
"""
import json
import sys

import helm_python
from helm_python import Chart


def registry_client(ref, request):
    client = helm_python.RegistryClient(plain_http=True)
    if request.get("user"):
        host = ref.removeprefix("oci://").split("/")[0]
        client.login(host, request["user"], request["password"], plain_http=True)
    return client


def native_release_call(config, function, request, options):
    """helm_install/helm_upgrade with options Config.install/upgrade do not take (the SDK's
    native library reads them: "force_conflicts" is `helm upgrade --force-conflicts`,
    "server_side_apply": false is `helm install --server-side=false`); the same call as
    Config.install/upgrade otherwise."""
    from helm_python import _native

    handle, ref = config._chart_args(request["chart"])
    values = request.get("values")
    if request.get("max_history") is not None:
        options["max_history"] = request["max_history"]
    payload = _native.call_string(
        function, config._raw(), config._context_arg(None), handle, ref,
        request["name"], None if values is None else json.dumps(values), json.dumps(options),
    )
    return json.loads(payload)


def release_op(op, request):
    config = helm_python.Config(
        kubeconfig_path=request["kubeconfig"], namespace=request["namespace"]
    )
    if op == "install" and request.get("server_side_apply") is False:
        return native_release_call(config, "helm_install", request, {"server_side_apply": False})
    if op == "install":
        return config.install(request["chart"], request["name"], request.get("values"))
    if op == "upgrade" and request.get("force_conflicts"):
        return native_release_call(config, "helm_upgrade", request, {"force_conflicts": True})
    if op == "upgrade":
        return config.upgrade(
            request["chart"], request["name"], request.get("values"),
            max_history=request.get("max_history"),
        )
    if op == "list":
        return config.list(all_states=request.get("all_states", False))
    if op == "history":
        return config.history(request["name"])
    if op == "status":
        return config.status(request["name"], revision=request.get("revision"))
    if op == "get_values":
        return config.get_values(
            request["name"], revision=request.get("revision"),
            all_values=request.get("all_values", False),
        )
    if op == "rollback":
        config.rollback(request["name"], version=request.get("version"))
        return None
    if op == "uninstall":
        return config.uninstall(request["name"], keep_history=request.get("keep_history", False))
    raise ValueError(f"unknown op {op!r}")


def run(request):
    op = request["op"]
    if op == "package":
        return helm_python.package(
            request["chart"], destination=request["destination"],
            version=request.get("version") or None,
        )
    if op == "render":
        with Chart.load(request["chart"]) as chart:
            return chart.render({}, name="r", namespace="ns", is_install=True)
    if op == "push":
        remote = request["remote"]
        return registry_client(remote, request).push(request["archive"], remote, plain_http=True)
    if op == "pull":
        ref = request["ref"]
        return registry_client(ref, request).pull(
            ref, version=request.get("version") or None,
            destination=request["destination"], plain_http=True,
        )
    if op == "tags":
        ref = request["ref"]
        return registry_client(ref, request).tags(ref.removeprefix("oci://"))
    if op == "repo_index_json":
        # Helm's IndexFile as Go's json.Marshal writes it, after Helm loaded (validated, sorted)
        # the index at `url` — the bytes Flux's stored index is the indented form of.
        from helm_python import _native, registry

        return _native.call_string("helm_repo_index_download", request["url"], registry._opts())
    if op == "repo_index":
        return helm_python.registry.repo_index_generate(
            request["directory"], base_url=request.get("base_url")
        )
    return release_op(op, request)


def main():
    request = json.loads(sys.argv[1])
    try:
        answer = {"ok": run(request)}
    except Exception as e:  # HelmReleaseError, HelmRegistryError, HelmChartLoadError, ...
        answer = {"error": f"{type(e).__name__}: {e}"}
    json.dump(answer, sys.stdout, default=str)


if __name__ == "__main__":
    main()
