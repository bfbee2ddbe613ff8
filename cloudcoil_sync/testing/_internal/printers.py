"""The cells of kube-apiserver's Table printers for common built-in kinds.

ConfigMaps (DATA), Secrets (TYPE, DATA), Deployments (READY, UP-TO-DATE, AVAILABLE, and with
``-o wide`` CONTAINERS, IMAGES, SELECTOR), Services (TYPE, CLUSTER-IP, EXTERNAL-IP, PORT(S),
SELECTOR), Pods (READY, STATUS, RESTARTS, IP, NODE...) and Namespaces (STATUS), checked
against kube-apiserver 1.32's answers (tests/testing/kube_apiserver_tables/). Simplification:
a Pod's STATUS is its phase or reason (kube's printer also reads container states), and label
selectors print their matchLabels only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cloudcoil_sync.testing._internal.printer_columns import AGE, COLUMNS, NAME

__all__ = ["definitions", "printed"]

JSON = dict[str, Any]
NONE = "<none>"


def _selector(labels: Any) -> str:
    if not isinstance(labels, dict) or not labels:
        return NONE
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _configmap(obj: JSON) -> list[Any]:
    return [len(obj.get("data") or {}) + len(obj.get("binaryData") or {})]


def _secret(obj: JSON) -> list[Any]:
    return [obj.get("type") or "Opaque", len(obj.get("data") or {})]


def _deployment(obj: JSON) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return [
        f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
        status.get("updatedReplicas", 0),
        status.get("availableReplicas", 0),
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
        _selector((spec.get("selector") or {}).get("matchLabels")),
    ]


def _external_ip(spec: JSON, status: JSON) -> str:
    kind = spec.get("type") or "ClusterIP"
    external = list(spec.get("externalIPs") or [])
    if kind == "ExternalName":
        return str(spec.get("externalName") or NONE)
    if kind == "LoadBalancer":
        ingress = (status.get("loadBalancer") or {}).get("ingress") or []
        found = [i.get("ip") or i.get("hostname") for i in ingress] + external
        return ",".join(str(i) for i in found if i) or "<pending>"
    return ",".join(external) or NONE


def _ports(spec: JSON) -> str:
    out = []
    for port in spec.get("ports") or []:
        node = f":{port['nodePort']}" if port.get("nodePort") else ""
        out.append(f"{port.get('port')}{node}/{port.get('protocol') or 'TCP'}")
    return ",".join(out) or NONE


def _service(obj: JSON) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return [
        spec.get("type") or "ClusterIP",
        spec.get("clusterIP") or NONE,
        _external_ip(spec, status),
        _ports(spec),
        _selector(spec.get("selector")),
    ]


def _pod(obj: JSON) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    gates = spec.get("readinessGates") or []
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    passed = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
    return [
        f"{ready}/{len(spec.get('containers') or [])}",
        status.get("reason") or status.get("phase") or "Pending",  # kube sets Pending on create
        str(sum(int(s.get("restartCount") or 0) for s in statuses)),
        status.get("podIP") or NONE,
        spec.get("nodeName") or NONE,
        status.get("nominatedNodeName") or NONE,
        f"{passed}/{len(gates)}" if gates else NONE,
    ]


def _namespace(obj: JSON) -> list[Any]:
    return [(obj.get("status") or {}).get("phase") or "Active"]


_CELLS: dict[tuple[str, str], Callable[[JSON], list[Any]]] = {
    ("", "configmaps"): _configmap,
    ("", "secrets"): _secret,
    ("apps", "deployments"): _deployment,
    ("", "services"): _service,
    ("", "pods"): _pod,
    ("", "namespaces"): _namespace,
}


def _split(key: tuple[str, str]) -> tuple[list[JSON], list[JSON]]:
    """The columns before Age (priority 0) and after it (priority 1, ``-o wide``)."""
    columns = COLUMNS[key]
    return [c for c in columns if c["priority"] == 0], [c for c in columns if c["priority"]]


def definitions(key: tuple[str, str]) -> list[JSON] | None:
    """kube's column definitions of the kind ``key``; None for kinds without a printer here."""
    if key not in _CELLS:
        return None
    before, after = _split(key)
    return [NAME, *before, AGE, *after]


def printed(key: tuple[str, str], obj: JSON, name: str, age: str) -> list[Any]:
    """The row of ``obj`` (a kind ``definitions`` knows)."""
    before, _ = _split(key)
    cells = _CELLS[key](obj)
    return [name, *cells[: len(before)], age, *cells[len(before) :]]
