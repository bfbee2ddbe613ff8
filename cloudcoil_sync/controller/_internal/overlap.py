"""Definition check: no two controllers may reconcile the same objects.

Each controller has its own work queue, so two controllers of one kind whose scopes overlap
would run passes on the same object at once (and fight over its `Ready` condition), which
breaks the promise of one pass per object at a time. Scopes are disjoint when the
controllers watch namespaces none of which both watch (`namespace=`, `watch_namespaces(...)`;
two namespace selectors that cannot both match), or when their label selectors cannot both
match (`a=x` and `a=y`, `a in (x)` and `a notin (x)`, `a` and `!a`, ...); namespaces never
separate a cluster-scoped kind. Anything else is refused offline, naming both controllers, as
duplicate admission paths are: a namespace selector against listed namespaces among them
(which namespaces it selects is known only while running).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.client import UnknownKind
from cloudcoil_sync.client._internal.rest import lookup
from cloudcoil_sync.controller._internal.cache import LabelSelector
from cloudcoil_sync.crd import Versions

if TYPE_CHECKING:
    from cloudcoil_sync.controller._internal.definition import Controller

__all__ = ["check_overlap"]

#: What a controller watches of a namespaced kind: every namespace (None), the namespaces a
#: label selector picks (str), or these.
Scope = frozenset[str] | str | None


def check_overlap(controllers: Sequence[Controller[Any]], operator_namespace: str | None) -> None:
    """ValueError naming the first two controllers that would reconcile the same objects."""
    for index, first in enumerate(controllers):
        for later, second in enumerate(controllers[index + 1 :], index + 1):
            if not _same_kind(first.resource, second.resource):
                continue
            if _namespaces_overlap(first, second, operator_namespace) and not _disjoint(
                first.label_selector, second.label_selector
            ):
                kind = first.resource.__name__
                raise ValueError(
                    f"Two controllers reconcile the same {kind} objects: "
                    f"{_label(first, index)} and {_label(second, later)}; they would run "
                    "passes on one object at the same time. Give them different namespaces "
                    "or label selectors that exclude each other, or merge them into one "
                    "controller (stages)"
                )


def _same_kind(first: type[Any], second: type[Any]) -> bool:
    """One model, or two versions of one kind (the same objects, converted)."""
    if first is second:
        return True
    versions = Versions.of(first)
    return versions is not None and versions is Versions.of(second)


def _label(controller: Controller[Any], index: int) -> str:
    kind = controller.resource.__name__
    if controller.name:
        return f"controller {controller.name!r} ({kind})"
    return f"the unnamed {kind} controller #{index + 1}"


def _namespaces_overlap(
    first: Controller[Any], second: Controller[Any], operator_namespace: str | None
) -> bool:
    if _cluster_scoped(first.resource):
        return True
    mine = _namespaces(first, operator_namespace or "")
    theirs = _namespaces(second, operator_namespace or "")
    if mine is None or theirs is None:
        return True
    if isinstance(mine, str) and isinstance(theirs, str):
        return not _disjoint(mine, theirs)
    if isinstance(mine, str) or isinstance(theirs, str):
        return True
    return bool(mine & theirs)


def _namespaces(controller: Controller[Any], operator_namespace: str) -> Scope:
    """Every namespace (None), those a label selector picks (the selector), or these."""
    if controller.namespace_selector:
        return controller.namespace_selector
    if controller.namespaces:
        return frozenset(controller.namespaces)
    watched = controller.watched_namespace(operator_namespace)
    return None if watched is None else frozenset((watched,))


def _cluster_scoped(resource: type[Any]) -> bool:
    """Known offline to be cluster-scoped (a custom resource's marker, the REST table)."""
    try:
        return not lookup(resource).namespaced
    except UnknownKind:
        return False


def _disjoint(first: str | None, second: str | None) -> bool:
    """Whether no label set can match both selectors (None matches everything)."""
    if not first or not second:
        return False
    mine = _requirements(LabelSelector(first))
    theirs = _requirements(LabelSelector(second))
    return any(
        _exclusive(a, b) or _exclusive(b, a)
        for key, a_list in mine.items()
        for a in a_list
        for b in theirs.get(key, ())
    )


def _requirements(selector: LabelSelector) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for expression in selector.expressions:
        found.setdefault(expression["key"], []).append(expression)
    return found


def _exclusive(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Requirements on one key that no value (or absence) satisfies together."""
    ops = (a["operator"], b["operator"])
    if ops == ("In", "In"):
        return not set(a["values"]) & set(b["values"])
    if ops == ("In", "NotIn"):
        return set(a["values"]) <= set(b["values"])
    return ops in (("In", "DoesNotExist"), ("Exists", "DoesNotExist"))
