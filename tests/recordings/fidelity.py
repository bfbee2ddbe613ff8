"""Run the differential cases against one server and compare two servers' answers.

Used by ``bench/fidelity.py`` (real kube-apiserver vs the emulator) and by
``tests/testing/test_fidelity.py`` (the recorded answers vs the emulator, no cluster).
"""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

__all__ = [
    "FIDELITY",
    "Server",
    "compare",
    "normalised",
    "run_cases",
    "setup",
    "teardown",
]

JSON = dict[str, Any]
FIDELITY = Path(__file__).resolve().parent / "fidelity"
# Values that differ between any two servers (or two runs) by nature.
_VOLATILE = {"uid", "resourceVersion", "creationTimestamp", "time", "continue"}


class Server:
    """Plain HTTPS requests to one API server (bearer token or client certificate)."""

    def __init__(self, url: str, session: requests.Session) -> None:
        self.url = url.rstrip("/")
        self.session = session
        self.session.trust_env = False

    def send(self, method: str, path: str, body: Any, ctype: str, query: dict[str, str]) -> JSON:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": ctype, "Accept": "application/json"}
        response = self.session.request(
            method, self.url + path, data=data, params=query, headers=headers, timeout=30
        )
        warnings = [w for k, w in response.raw.headers.items() if k.lower() == "warning"]
        try:
            answer: Any = response.json()
        except ValueError:
            answer = response.text
        return {"status": response.status_code, "warnings": warnings, "body": answer}


def setup(server: Server, namespace: str, crds: list[JSON], wait: Callable[[], None]) -> None:
    """A fresh namespace and the CRDs, established."""
    teardown(server, namespace, crds)
    deadline = time.monotonic() + 120
    while server.send("GET", f"/api/v1/namespaces/{namespace}", None, "", {})["status"] != 404:
        if time.monotonic() > deadline:  # a real server finalizes a namespace's contents first
            raise TimeoutError(f"namespace {namespace} still there after 120 s")
        wait()
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    _ok(server.send("POST", "/api/v1/namespaces", ns, "application/json", {}))
    for crd in crds:
        _ok(server.send("POST", _crd_path(), crd, "application/json", {}))
    for crd in crds:
        name = crd["metadata"]["name"]
        deadline = time.monotonic() + 30
        while not _established(server.send("GET", _crd_path(name), None, "", {})["body"]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not established in 30 s")
            wait()
    wait()  # discovery of the new types settles on a real server


def teardown(server: Server, namespace: str, crds: list[JSON]) -> None:
    from recordings.fidelity_cases import BINDINGS, POLICIES, policies

    for policy in policies():
        name = policy["metadata"]["name"]
        server.send("DELETE", f"{BINDINGS}/{name}", None, "application/json", {})
        server.send("DELETE", f"{POLICIES}/{name}", None, "application/json", {})
    for crd in crds:
        server.send("DELETE", _crd_path(crd["metadata"]["name"]), None, "application/json", {})
    server.send("DELETE", f"/api/v1/namespaces/{namespace}", None, "application/json", {})


def _crd_path(name: str = "") -> str:
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    return f"{path}/{name}" if name else path


def _ok(answer: JSON) -> None:
    if answer["status"] >= 300:
        raise RuntimeError(f"setup request failed: {answer['status']} {answer['body']}")


def _established(crd: Any) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def run_cases(
    server: Server, cases: list[JSON], settle: Callable[[], None] = lambda: None
) -> list[JSON]:
    """Each case with the server's answer; ``settle`` runs after cases marked ``settle``
    (a changed CRD takes effect asynchronously)."""
    out = []
    for case in cases:
        body = case["body"]
        if case.get("fresh_rv"):  # a PUT carries the object's current resourceVersion
            current = server.send("GET", case["fresh_rv"], None, "", {})["body"]
            body = copy.deepcopy(body)
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        answer = server.send(case["method"], case["path"], body, case["ctype"], case["query"])
        if case.get("settle"):
            settle()
        out.append({**case, "response": answer})
    return out


def normalised(body: Any) -> Any:
    """An answer without volatile values; generated names reduced to their prefix."""
    body = _strip(copy.deepcopy(body))
    if isinstance(body, dict):
        for item in [body, *(body.get("items") or [])]:
            meta = item.get("metadata") if isinstance(item, dict) else None
            if isinstance(meta, dict) and meta.get("generateName") and "name" in meta:
                meta["name"] = meta["generateName"] + "*"
        if body.get("kind") == "Status":
            _unordered(body)
    return body


def _unordered(body: Any) -> None:
    """kube-apiserver lists one object's property errors in Go map order (random per
    request): compare causes, and the message's bracketed list, as sets."""
    causes = (body.get("details") or {}).get("causes")
    if causes:
        causes.sort(key=lambda c: json.dumps(c, sort_keys=True))
    message = body.get("message") or ""
    head, sep, listed = message.partition(": [")
    if sep and listed.endswith("]") and causes:
        texts = [f"{c['field']}: {c['message']}" for c in causes]
        inner = listed[:-1]
        if len(inner) == len(", ".join(texts)) and all(t in inner for t in texts):
            body["message"] = head + sep + ", ".join(sorted(texts)) + "]"


_IN_TEXT = (
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"), "<time>"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uid>"),
    (re.compile(r'(resourceVersion\\+":\\+")\d+'), r"\1<rv>"),
    (re.compile(r"\bselfType\d+"), "selfType<n>"),  # a CEL object type's random name
    (re.compile(r"\(\*bool\)\(0x[0-9a-f]+\)"), "(*bool)(<address>)"),  # a Go pointer
)


def _strip(value: Any) -> Any:
    """Volatile values removed (also inside texts, e.g. an object quoted in a message);
    managedFields entries sorted, as their order follows their (removed) times."""
    if isinstance(value, dict):
        for key in _VOLATILE & value.keys():
            del value[key]
        for key, item in value.items():
            value[key] = _strip(item)
        if isinstance(value.get("managedFields"), list):
            value["managedFields"].sort(key=lambda e: json.dumps(e, sort_keys=True))
    elif isinstance(value, list):
        value[:] = [_strip(item) for item in value]
    elif isinstance(value, str):
        for pattern, replacement in _IN_TEXT:
            value = pattern.sub(replacement, value)
    return value


def compare(expected: JSON, actual: JSON, status_only: bool = False) -> list[str]:
    """Where ``actual`` answers differently from ``expected`` (empty: identical);
    ``status_only``: the status code alone (setup requests whose bodies are not the point)."""
    out: list[str] = []
    if expected["status"] != actual["status"]:
        out.append(f"status {expected['status']} != {actual['status']}")
    if status_only:
        return out
    if sorted(expected["warnings"]) != sorted(actual["warnings"]):
        out.append(f"warnings {expected['warnings']} != {actual['warnings']}")
    _diff(normalised(expected["body"]), normalised(actual["body"]), "body", out)
    return out


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(a.keys() | b.keys()):
            if key not in b:
                out.append(f"{path}.{key}: missing (expected {json.dumps(a[key])[:200]})")
            elif key not in a:
                out.append(f"{path}.{key}: unexpected {json.dumps(b[key])[:200]}")
            else:
                _diff(a[key], b[key], f"{path}.{key}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b or type(a) is not type(b):
        out.append(f"{path}: expected {json.dumps(a)[:300]}, got {json.dumps(b)[:300]}")
