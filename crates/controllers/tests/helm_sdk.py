#!/usr/bin/env python3
"""Helm's own Go SDK (PyPI helm-python-sdk: Helm v4.2.3) as the judge of Capstan's release storage.

    helm_sdk.py REQUEST_JSON

REQUEST_JSON: {"kubeconfig": PATH, "namespace": NS, "op": OP, ...arguments by name}
  op "install":    chart, name, values?        op "upgrade":  chart, name, values?, max_history?
  op "list":       all_states?                 op "history":  name
  op "status":     name, revision?             op "get_values": name, revision?, all_values?
  op "rollback":   name, version?              op "uninstall": name, keep_history?
The answer (stdout) is JSON: {"ok": <what the SDK returned>} or
{"error": "<ExceptionClass>: <Helm's message>"}.
"""
import json
import sys

import helm_python


def run(request):
    op = request.pop("op")
    config = helm_python.Config(
        kubeconfig_path=request.pop("kubeconfig"), namespace=request.pop("namespace")
    )
    if op == "install":
        return config.install(request["chart"], request["name"], request.get("values"))
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


def main():
    request = json.loads(sys.argv[1])
    try:
        answer = {"ok": run(request)}
    except Exception as e:  # HelmReleaseError, HelmNotFoundError, HelmStorageError, ...
        answer = {"error": f"{type(e).__name__}: {e}"}
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
