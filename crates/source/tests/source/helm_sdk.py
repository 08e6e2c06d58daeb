#!/usr/bin/env python3
"""Helm's own Go SDK (PyPI helm-python-sdk: Helm v4.2.3) as the judge of packaged and OCI charts.

    helm_sdk.py package DIR DEST                      -> {"ok": "<archive path>"}
    helm_sdk.py render CHART                          -> {"ok": {"<template path>": "<text>"}}
    helm_sdk.py push TGZ oci://HOST/PATH [USER PASS]  -> {"ok": <push result>}
    helm_sdk.py pull oci://HOST/PATH/NAME VERSION DEST [USER PASS] -> {"ok": <pull result>}
    helm_sdk.py tags oci://HOST/PATH/NAME             -> {"ok": ["<version>", ...]}

Registries are reached over plain HTTP. Every answer is JSON: {"ok": ...} or {"error": "..."}.
"""
import json, sys
import helm_python
from helm_python import Chart


def client(host, user=None, password=None):
    c = helm_python.RegistryClient(plain_http=True)
    if user:
        c.login(host, user, password, plain_http=True)
    return c


def host_of(ref):
    return ref.removeprefix("oci://").split("/")[0]


def main(op, *args):
    if op == "package":
        return helm_python.package(args[0], destination=args[1])
    if op == "render":
        with Chart.load(args[0]) as c:
            return c.render({}, name="r", namespace="ns", is_install=True)
    if op == "push":
        tgz, remote, *auth = args
        return client(host_of(remote), *auth).push(tgz, remote, plain_http=True)
    if op == "pull":
        ref, version, dest, *auth = args
        return client(host_of(ref), *auth).pull(ref, version=version or None, destination=dest, plain_http=True)
    if op == "tags":
        return client(host_of(args[0])).tags(args[0].removeprefix("oci://"))
    raise ValueError(f"unknown op {op}")


if __name__ == "__main__":
    try:
        print(json.dumps({"ok": main(*sys.argv[1:])}, default=str))
    except Exception as e:  # HelmRegistryError, HelmChartLoadError, ...
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
