"""Label and field selectors, parsed once into predicates over objects."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from cloudcoil_sync.testing._internal.status import bad_request

__all__ = ["Predicate", "field_selector", "label_selector", "match_all"]

JSON = dict[str, Any]
Predicate = Callable[[JSON], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([^\s!=()]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")


def match_all(_: JSON) -> bool:
    return True


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return [t.strip() for t in terms if t.strip()]


def _label_term(term: str) -> Callable[[dict[str, str]], bool]:
    for op in ("!=", "==", "="):
        if op in term:
            key, _, value = term.partition(op)
            key, value = key.strip(), value.strip()
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    m = _SET_RE.match(term)
    if not m:
        raise bad_request(f"unable to parse requirement: {term!r}")
    negate, key, op, values = m.groups()
    if op:
        allowed = {v.strip() for v in values.split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in allowed
        return lambda labels: labels.get(key) not in allowed
    if negate:
        return lambda labels: key not in labels
    return lambda labels: key in labels


def label_selector(text: str | None) -> Predicate:
    """``a=b,c!=d,e in (f,g),h notin (i),j,!k`` as a predicate over objects."""
    if not text:
        return match_all
    terms = [_label_term(t) for t in _split_terms(text)]

    def predicate(obj: JSON) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(term(labels) for term in terms)

    return predicate


def _field_value(obj: JSON, path: str) -> str | None:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    if isinstance(node, bool):
        return "true" if node else "false"
    return None if node is None else str(node)


def field_selector(text: str | None) -> Predicate:
    """Equality/inequality on simple dotted paths (``metadata.name=x,status.phase!=Done``)."""
    if not text:
        return match_all
    checks: list[tuple[str, bool, str]] = []
    for term in _split_terms(text):
        for op in ("!=", "==", "="):
            if op in term:
                path, _, value = term.partition(op)
                checks.append((path.strip(), op == "!=", value.strip()))
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")

    def predicate(obj: JSON) -> bool:
        for path, negate, value in checks:
            actual = _field_value(obj, path)
            if actual is None and path == "metadata.namespace":
                actual = ""
            if (actual == value) == negate:
                return False
        return True

    return predicate
