"""Server-side tables (``meta.k8s.io/v1`` ``Table``), which ``kubectl get`` asks for.

Custom resources get their CRD version's ``additionalPrinterColumns`` (Name and Age when it
has none), evaluated from the simple JSONPath forms CRDs use (``.a.b``, ``.a[0]``,
``.a[?(@.k=="v")].b``). ConfigMaps, Secrets, Deployments, Services, Pods and Namespaces get
kube-apiserver's printer columns (``printers.py``); other built-in kinds only Name and Age.
Each row carries
the object's metadata (``includeObject=Metadata``, the default), the whole object
(``Object``) or nothing (``None``).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

from cloudcoil_sync.client._internal import codec
from cloudcoil_sync.testing._internal import printers
from cloudcoil_sync.testing._internal.resources import ResourceType
from cloudcoil_sync.testing._internal.store import Store, dumps

__all__ = ["human_duration", "table", "table_events", "wants_table"]

JSON = dict[str, Any]
_CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
_NAME = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "description": "Name must be unique within a namespace. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    "priority": 0,
}
_AGE = {
    "name": "Age",
    "type": "date",
    "format": "",
    "description": "CreationTimestamp is a timestamp representing the server time when this "
    "object was created.",
    "priority": 0,
}
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\?\(@\.([\w.-]+)\s*==\s*[\"']([^\"']*)[\"']\)\]")


def wants_table(accept: str) -> str | None:
    """The Table apiVersion an Accept header asks for (v1 preferred), else None."""
    offered = [part.replace(" ", "") for part in accept.split(",")]
    for version in ("v1", "v1beta1"):
        for part in offered:
            params = set(part.split(";")[1:])
            if {"as=Table", "g=meta.k8s.io", f"v={version}"} <= params:
                return f"meta.k8s.io/{version}"
    return None


def human_duration(seconds: float) -> str:
    """Ages as kubectl and kube-apiserver print them (``45s``, ``3m20s``, ``5h``, ``12d``)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes, hours = s // 60, s // 3600
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        return f"{years}y{days % 365}d" if days % 365 else f"{years}y"
    return f"{years}y"


def _age(obj: JSON) -> str:
    created = (obj.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return "<unknown>"
    when = datetime.datetime.fromisoformat(str(created).replace("Z", "+00:00"))
    return human_duration((datetime.datetime.now(datetime.UTC) - when).total_seconds())


def _evaluate(obj: Any, path: str) -> Any:
    """The value at a CRD printer column's JSONPath, or None."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    position, value = 0, obj
    while position < len(text):
        match = _STEP.match(text, position)
        if match is None:
            return None
        key, index, field, wanted = match.groups()
        position = match.end()
        if key is not None:
            value = value.get(key) if isinstance(value, dict) else None
        elif index is not None:
            value = (
                value[int(index)] if isinstance(value, list) and int(index) < len(value) else None
            )
        else:
            found = [
                item
                for item in value or []
                if isinstance(item, dict) and str(_evaluate(item, "." + field)) == wanted
            ]
            value = found[0] if found else None
        if value is None:
            return None
    return value


def _crd_columns(rt: ResourceType, store: Store) -> list[JSON] | None:
    crd = store.get(_CRD_KEY, "", f"{rt.plural}.{rt.group}") or {}
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("name") == rt.version:
            return list(version.get("additionalPrinterColumns") or []) or None
    return None


def _cell(column: JSON, obj: JSON) -> Any:
    value = _evaluate(obj, column.get("jsonPath", ""))
    if value is None:
        return None
    kind = column.get("type")
    if kind == "date":
        when = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        return human_duration((datetime.datetime.now(datetime.UTC) - when).total_seconds())
    if kind in ("integer", "number", "boolean"):
        return value
    return value if isinstance(value, str) else str(value)


def _row_object(obj: JSON, include: str, api_version: str) -> JSON | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": obj.get("metadata") or {},
    }


def table(
    rt: ResourceType,
    objects: list[JSON],
    list_meta: JSON,
    store: Store,
    api_version: str,
    include: str = "Metadata",
) -> JSON:
    """A Table of ``objects`` (all of kind ``rt``)."""
    columns = None if rt.builtin else _crd_columns(rt, store)
    printer = printers.definitions(rt.key) if rt.builtin else None
    definitions = [_NAME]
    if printer is not None:
        definitions = printer
    elif columns is None:
        definitions.append(_AGE)
    else:
        definitions += [
            {
                "name": c.get("name", ""),
                "type": c.get("type", "string"),
                "format": c.get("format", ""),
                "description": c.get("description", ""),
                "priority": int(c.get("priority", 0)),
            }
            for c in columns
        ]
    rows = []
    for obj in objects:
        name = (obj.get("metadata") or {}).get("name", "")
        if printer is not None:
            cells = printers.printed(rt.key, obj, name, _age(obj))
        elif columns is None:
            cells = [name, _age(obj)]
        else:
            cells = [name] + [_cell(c, obj) for c in columns]
        row: JSON = {"cells": cells}
        partial = _row_object(obj, include, api_version)
        if partial is not None:
            row["object"] = partial
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": list_meta,
        "columnDefinitions": definitions,
        "rows": rows,
    }


def table_events(
    write: Callable[[bytes], None],
    rt: ResourceType,
    store: Store,
    api_version: str,
    include: str = "Metadata",
) -> Callable[[bytes], None]:
    """Wrap a watch stream's ``write``: each event's object becomes a one-row Table (column
    definitions only in the first, as kube-apiserver sends them); ERROR and BOOKMARK events
    pass unchanged."""
    first = True

    def convert(chunk: bytes) -> None:
        nonlocal first
        lines = []
        for line in chunk.splitlines():
            event = codec.loads(line)
            if event.get("type") not in ("ERROR", "BOOKMARK"):
                obj = event["object"]
                meta = {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")}
                converted = table(rt, [obj], meta, store, api_version, include)
                if not first:
                    converted["columnDefinitions"] = []
                first = False
                event = {"type": event["type"], "object": converted}
            lines.append(dumps(event) + b"\n")
        write(b"".join(lines))

    return convert
