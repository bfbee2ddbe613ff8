"""JSON patch (RFC 6902, including ``test``) and JSON merge patch (RFC 7386)."""

from __future__ import annotations

import copy
from typing import Any

from cloudcoil_sync._internal.patches import merge_patch
from cloudcoil_sync.testing._internal.status import ApiError

__all__ = ["PatchError", "apply_json_patch", "apply_merge_patch"]

apply_merge_patch = merge_patch  # RFC 7386: the one the product uses too


class PatchError(ApiError):
    """A JSON patch that cannot be applied; kube-apiserver answers 422 with a generic message."""

    def __init__(self, why: str) -> None:
        super().__init__(
            422, "Invalid", "the server rejected our request due to an error in our request", {}
        )
        self.why = why


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _parts(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"path {path!r} does not start with /")
    return [_unescape(p) for p in path[1:].split("/")]


def _index(container: list[Any], token: str, adding: bool) -> int:
    if token == "-" and adding:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"invalid array index {token!r}")
    idx = int(token)
    limit = len(container) if adding else len(container) - 1
    if idx > limit:
        raise PatchError(f"array index {idx} out of range")
    return idx


def _step(node: Any, token: str) -> str | int:
    """The key of `node` that path segment `token` names (it must exist)."""
    if isinstance(node, dict):
        if token not in node:
            raise PatchError(f"missing path segment {token!r}")
        return token
    if isinstance(node, list):
        return _index(node, token, False)
    raise PatchError(f"cannot traverse into {type(node).__name__}")


def _parent(doc: Any, parts: list[str]) -> Any:
    node = doc
    for token in parts[:-1]:
        node = node[_step(node, token)]
    return node


def _get(doc: Any, path: str) -> Any:
    parts = _parts(path)
    if not parts:
        return doc
    parent = _parent(doc, parts)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {path!r} not found")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, False)]
    raise PatchError(f"path {path!r} not found")


class _CopyOnWrite:
    """The document being patched. Containers on a written path are copied once, the rest
    stays shared with the original, which is never changed (the emulator's stored objects
    are immutable): a deep copy of the whole object per patch cost more than the write."""

    def __init__(self, doc: Any) -> None:
        self.root = doc
        self._owned: dict[int, Any] = {}  # id -> container copied here (kept alive by this)

    def _own(self, node: Any) -> Any:
        if id(node) in self._owned:
            return node
        node = dict(node) if isinstance(node, dict) else list(node)
        self._owned[id(node)] = node
        return node

    def _parent(self, parts: list[str]) -> Any:
        if isinstance(self.root, dict | list):
            self.root = self._own(self.root)
        node = self.root
        for token in parts[:-1]:
            key = _step(node, token)
            child = node[key]
            if isinstance(child, dict | list):
                child = node[key] = self._own(child)
            node = child
        return node

    def add(self, path: str, value: Any) -> None:
        parts = _parts(path)
        if not parts:
            self.root = value
            return
        parent = self._parent(parts)
        last = parts[-1]
        if isinstance(parent, dict):
            parent[last] = value
        elif isinstance(parent, list):
            parent.insert(_index(parent, last, True), value)
        else:
            raise PatchError(f"cannot add to {type(parent).__name__}")

    def remove(self, path: str) -> None:
        parts = _parts(path)
        if not parts:
            raise PatchError("cannot remove the whole document")
        parent = self._parent(parts)
        last = parts[-1]
        if isinstance(parent, dict):
            if last not in parent:
                raise PatchError(f"path {path!r} not found")
            del parent[last]
        elif isinstance(parent, list):
            del parent[_index(parent, last, False)]
        else:
            raise PatchError(f"path {path!r} not found")


def apply_json_patch(doc: Any, ops: Any) -> Any:
    """Apply RFC 6902 ``ops`` to ``doc`` without changing it: the result shares whatever
    the operations did not write (callers treat both as immutable)."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    target = _CopyOnWrite(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"malformed operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            target.add(path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            target.remove(path)
        elif kind == "replace":
            _get(target.root, path)
            target.remove(path)
            target.add(path, copy.deepcopy(op.get("value")))
        elif kind == "move":
            value = _get(target.root, op["from"])
            target.remove(op["from"])
            target.add(path, value)
        elif kind == "copy":
            target.add(path, copy.deepcopy(_get(target.root, op["from"])))
        elif kind == "test":
            if _get(target.root, path) != op.get("value"):
                raise PatchError(f"test failed at {path!r}")
        else:
            raise PatchError(f"unknown operation {kind!r}")
    return target.root
