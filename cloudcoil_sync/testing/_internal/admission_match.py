"""Which admission webhooks a write calls: kube-apiserver's rule, namespace and object
selector matching (see :mod:`cloudcoil_sync.testing._internal.admission`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cloudcoil_sync.testing._internal.request import Req
from cloudcoil_sync.testing._internal.store import Store

__all__ = [
    "Attempt",
    "is_namespace",
    "labels_of",
    "namespace_matches",
    "rule_matches",
    "selector_matches",
]

JSON = dict[str, Any]
NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass
class Attempt:
    """One admission decision: the operation, its request and the objects involved."""

    operation: str
    req: Req
    obj: JSON | None
    old: JSON | None
    options: JSON
    dry_run: bool


def is_namespace(req: Req) -> bool:
    return req.rt.group == "" and req.rt.plural == "namespaces"


def namespace_matches(store: Store, selector: JSON | None, attempt: Attempt) -> bool:
    """Whether the namespace of the attempt (or the Namespace itself) matches ``selector``."""
    req = attempt.req
    namespace = is_namespace(req)
    if not selector or (not req.rt.namespaced and not namespace):
        return True  # cluster-scoped objects other than namespaces always match
    if namespace and not req.subresource and attempt.operation != "DELETE":
        labels = labels_of(attempt.obj)
        name = req.name
    else:
        name = req.name if namespace else req.namespace
        stored = store.get(("", "namespaces"), "", name)
        labels = labels_of(stored)
    labels.setdefault(NAME_LABEL, name)
    return selector_matches(selector, labels)


def labels_of(obj: JSON | None) -> dict[str, str]:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return dict(labels) if isinstance(labels, dict) else {}


def _listed(values: Any, wanted: str) -> bool:
    return isinstance(values, list) and ("*" in values or wanted in values)


def rule_matches(rule: Any, attempt: Attempt) -> bool:
    """kube-apiserver's rule matcher: ``*`` is every resource but no subresource, ``x/*``
    the resource and all its subresources, ``*/*`` everything."""
    if not isinstance(rule, dict):
        return False
    rt, req = attempt.req.rt, attempt.req
    if not (
        _listed(rule.get("operations"), attempt.operation)
        and _listed(rule.get("apiGroups"), rt.group)
        and _listed(rule.get("apiVersions"), rt.version)
    ):
        return False
    scope = rule.get("scope") or "*"
    namespace = is_namespace(req)
    if scope == "Namespaced" and (namespace or not rt.namespaced):
        return False
    if scope == "Cluster" and rt.namespaced:
        return False
    for entry in rule.get("resources") or []:
        resource, _, sub = str(entry).partition("/")
        if resource in ("*", rt.plural) and sub in ("*", req.subresource):
            return True
    return False


def selector_matches(selector: JSON, labels: dict[str, str]) -> bool:
    """A ``LabelSelector`` (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        if operator == "In":
            ok = key in labels and labels[key] in values
        elif operator == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif operator == "Exists":
            ok = key in labels
        elif operator == "DoesNotExist":
            ok = key not in labels
        else:
            return False  # kube rejects such a selector when the configuration is stored
        if not ok:
            return False
    return True
