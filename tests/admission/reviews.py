"""AdmissionReview documents and a direct WSGI caller for webhook tests."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["call", "config_map", "review"]


def config_map(name: str = "settings", namespace: str = "default", **fields: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "uid": "u-1", "resourceVersion": "7"},
    }
    document.update(fields)
    return document


def review(
    operation: str = "CREATE",
    *,
    obj: dict[str, Any] | None = None,
    old: dict[str, Any] | None = None,
    uid: str = "review-1",
    kind: tuple[str, str, str] = ("", "v1", "ConfigMap"),
    resource: tuple[str, str, str] = ("", "v1", "configmaps"),
    namespace: str = "default",
    name: str = "settings",
    **request: Any,
) -> dict[str, Any]:
    if obj is None and old is None:
        obj = config_map() if operation != "DELETE" else None
        old = config_map() if operation != "CREATE" else None
    body: dict[str, Any] = {
        "uid": uid,
        "kind": dict(zip(("group", "version", "kind"), kind, strict=True)),
        "resource": dict(zip(("group", "version", "resource"), resource, strict=True)),
        "operation": operation,
        "name": name,
        "namespace": namespace,
        "object": obj,
        "oldObject": old,
        "dryRun": False,
        "userInfo": {"username": "alice", "uid": "a-1", "groups": ["dev"], "extra": {}},
    }
    body.update(request)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}


WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def call(
    app: WSGIApp,
    path: str,
    body: bytes | dict[str, Any] = b"",
    *,
    method: str = "POST",
    content_type: str = "application/json",
    content_length: int | None = None,
) -> tuple[int, dict[str, str], Any]:
    """Call a WSGI app in-process; (status, headers, decoded JSON or text)."""
    raw = json.dumps(body).encode() if isinstance(body, dict) else body
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "CONTENT_TYPE": content_type,
        "CONTENT_LENGTH": str(len(raw) if content_length is None else content_length),
        "wsgi.input": io.BytesIO(raw),
        "wsgi.url_scheme": "https",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "9443",
    }
    captured: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        captured["status"] = int(status.split()[0])
        captured["headers"] = dict(headers)

    answer = b"".join(app(environ, start_response))
    headers = captured["headers"]
    assert int(headers["Content-Length"]) == len(answer)
    if headers["Content-Type"].startswith("application/json"):
        return captured["status"], headers, json.loads(answer)
    return captured["status"], headers, answer.decode()
