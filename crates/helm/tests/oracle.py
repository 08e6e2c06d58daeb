#!/usr/bin/env python3
"""Helm's own Go SDK (PyPI helm-python-sdk: Helm v4.2.3 as libhelm_c.so) as an oracle.

    oracle.py eval 'TEMPLATE TEXT' [VALUES_JSON]     render one template in a throw-away chart
    oracle.py render CHART [VALUES_JSON] [OPTIONS_JSON]
    oracle.py set KIND EXPRESSION                     KIND: set|string|json|literal|file
    oracle.py serve                                   one JSON request per stdin line, one answer per line

Every answer is JSON: {"ok": ...} or {"error": "<ExceptionClass>: <Helm's message>"}.
render: {"ok": {"<template path>": "<text>", ...}}; OPTIONS_JSON as helm_render takes it
({"name", "namespace", "is_install", "is_upgrade", "revision", "kube_version", "api_versions"}).
eval renders `templates/t.yaml` of a chart named `t` (release "r", namespace "ns") and answers
with that template's text; extra files come from {"files": {"path": "text"}} in a serve request.
serve requests: {"op": "render"|"eval"|"set"|"render_many", ...the arguments above by name...};
"render_many" renders the same chart `times` times and answers with the median seconds.
"""
import json, os, statistics, sys, tempfile, time
from helm_python import Chart, _native
import helm_python

DEFAULT_OPTIONS = {"name": "r", "namespace": "ns", "is_install": True}


def render(chart, values=None, options=None):
    opts = dict(DEFAULT_OPTIONS)
    opts.update(options or {})
    with Chart.load(chart) as c:
        return json.loads(_native.call_string("helm_render", c._raw(), json.dumps(values or {}), json.dumps(opts)))


def eval_template(text, values=None, files=None, options=None):
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "templates"))
        with open(os.path.join(d, "Chart.yaml"), "w") as f:
            f.write("apiVersion: v2\nname: t\nversion: 0.1.0\nappVersion: 1.0.0\n")
        for path, body in (files or {}).items():
            full = os.path.join(d, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(body)
        with open(os.path.join(d, "templates", "t.yaml"), "w") as f:
            f.write(text)
        return render(d, values, options).get("t/templates/t.yaml", "")


def parse_set(kind, expression):
    fn = {"set": helm_python.parse_set_string, "string": helm_python.parse_set_string_values,
          "json": helm_python.parse_set_json, "literal": helm_python.parse_set_literal,
          "file": helm_python.parse_set_file}[kind]
    return fn(expression)


def answer(fn, *args, **kwargs):
    try:
        return {"ok": fn(*args, **kwargs)}
    except Exception as e:  # HelmRenderError, HelmValuesError, ...
        return {"error": f"{type(e).__name__}: {e}"}


def render_many(chart, values=None, options=None, times=5):
    render(chart, values, options)  # warm-up
    runs = []
    for _ in range(times):
        start = time.perf_counter()
        render(chart, values, options)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def serve():
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        op = req.pop("op")
        if op == "render":
            out = answer(render, req["chart"], req.get("values"), req.get("options"))
        elif op == "eval":
            out = answer(eval_template, req["text"], req.get("values"), req.get("files"), req.get("options"))
        elif op == "set":
            out = answer(parse_set, req["kind"], req["expression"])
        elif op == "render_many":
            out = answer(render_many, req["chart"], req.get("values"), req.get("options"), req.get("times", 5))
        else:
            out = {"error": f"unknown op {op!r}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


def main(argv):
    if not argv:
        sys.exit(__doc__)
    cmd, rest = argv[0], argv[1:]
    if cmd == "serve":
        return serve()
    if cmd == "eval":
        out = answer(eval_template, rest[0], json.loads(rest[1]) if len(rest) > 1 else None)
    elif cmd == "render":
        out = answer(render, rest[0], json.loads(rest[1]) if len(rest) > 1 else None,
                     json.loads(rest[2]) if len(rest) > 2 else None)
    elif cmd == "set":
        out = answer(parse_set, rest[0], rest[1])
    else:
        sys.exit(__doc__)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
