"""Definition check: no two controllers may reconcile the same objects.

Each controller has its own work queue, so two controllers of one kind whose scopes overlap
would run passes on the same object at once (and fight over its `Ready` condition), which
breaks the promise of one pass per object at a time. Scopes are disjoint when the
controllers watch different namespaces, or when their label selectors cannot both match
(`a=x` and `a=y`, `a in (x)` and `a notin (x)`, `a` and `!a`, ...). Anything else is
refused offline, naming both controllers, as duplicate admission paths are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.controller._internal.cache import LabelSelector
from cloudcoil_sync.crd import Versions

if TYPE_CHECKING:
    from cloudcoil_sync.controller._internal.definition import Controller

__all__ = ["check_overlap"]


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
    mine = first.watched_namespace(operator_namespace or "")
    theirs = second.watched_namespace(operator_namespace or "")
    return mine is None or theirs is None or mine == theirs


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
