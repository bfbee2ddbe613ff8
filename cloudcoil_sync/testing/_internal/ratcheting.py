"""Validation ratcheting (kube-apiserver 1.30+, ``CRDValidationRatcheting``): on an update, a
schema error in a value the update leaves unchanged is not reported, so objects stored before
a CRD was tightened can still be updated elsewhere. CEL rules ratchet the same way
(``cel_rules.py`` skips a rule without ``oldSelf`` whose node is unchanged)."""

from __future__ import annotations

import re
from typing import Any

from cloudcoil_sync.testing._internal.schema_validation import Cause

__all__ = ["ratchet"]

_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_ABSENT = object()


def _at(obj: Any, path: str) -> Any:
    for key, index in _TOKEN.findall(path):
        if key:
            obj = obj.get(key, _ABSENT) if isinstance(obj, dict) else _ABSENT
        else:
            i = int(index)
            obj = obj[i] if isinstance(obj, list) and i < len(obj) else _ABSENT
        if obj is _ABSENT:
            return _ABSENT
    return obj


def ratchet(causes: list[Cause], new: Any, old: Any) -> list[Cause]:
    """``causes`` without those at a path whose value ``old`` already had (``old`` None: a
    create, nothing is ratcheted). Paths starting with ``.`` (the /scale replica checks) and
    ``metadata`` are never ratcheted."""
    if old is None:
        return causes
    return [
        cause
        for cause in causes
        if cause[1].startswith((".", "metadata", "<nil>"))
        or _at(new, cause[1]) != _at(old, cause[1])
    ]
