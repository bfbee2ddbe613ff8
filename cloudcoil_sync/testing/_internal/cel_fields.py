"""The one check of kube-apiserver's typed CEL compilation the emulator's dynamically typed
``self`` cannot make itself: ``self.x`` (or ``oldSelf.x``, ``has(self.x)``) on an object whose
schema declares no ``x`` does not compile, and the CRD is refused with cel-go's message."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["undeclared_field"]

JSON = dict[str, Any]
_SELECT = re.compile(r"(?<![\w.])(self|oldSelf)\.\??([A-Za-z_]\w*)(?!\w)(\s*\()?")
_KEPT = ("apiVersion", "kind", "metadata")


def _declared(node: JSON, root: bool) -> set[str] | None:
    """Field names ``self`` may select, or None where any name is allowed."""
    if node.get("type") != "object" or node.get("x-kubernetes-preserve-unknown-fields"):
        return None
    if node.get("additionalProperties") not in (None, False):
        return None
    fields = set(node.get("properties") or {})
    if root or node.get("x-kubernetes-embedded-resource"):
        fields.update(_KEPT)
    return fields


def undeclared_field(node: JSON, rule: str, root: bool) -> str:
    """cel-go's compile error for the first undeclared field ``rule`` selects, or ``""``."""
    fields = _declared(node, root)
    if fields is None:
        return ""
    for match in _SELECT.finditer(rule):
        if match.group(3) or match.group(2) in fields:
            continue  # a method call, or a declared field
        before = rule[: match.start()].rstrip()
        dot = match.start(1) + len(match.group(1))
        # cel-go reports a has() macro at its parenthesis, a selection at its dot.
        where = len(before) - 1 if before.endswith("has(") else dot
        line_start = rule.rfind("\n", 0, where) + 1
        line_end = rule.find("\n", where)
        text = rule[line_start : line_end if line_end >= 0 else len(rule)]
        line, column = rule.count("\n", 0, where) + 1, where - line_start + 1
        return (
            f"ERROR: <input>:{line}:{column}: undefined field '{match.group(2)}'\n"
            f" | {text}\n | {'.' * (column - 1)}^"
        )
    return ""
