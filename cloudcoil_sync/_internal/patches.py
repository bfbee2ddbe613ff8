"""RFC 6902 JSON patches: plain diffs, guarded resource diffs and admission mutation patches.

No third-party patch library: the operations generated here are ``add``, ``remove``,
``replace`` and ``test`` only, with object members diffed recursively and arrays replaced
whole (Kubernetes strategic-merge keys are not inferred).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from copy import deepcopy
from typing import Any, Final

from cloudcoil.resources import Resource

__all__ = [
    "MutationBase",
    "diff",
    "json_copy",
    "json_diff",
    "merge_patch",
    "mutation_patch",
    "pointer",
    "split_status",
]

Patch = list[dict[str, Any]]


def pointer(*tokens: str) -> str:
    """A JSON pointer (RFC 6901) from unescaped reference tokens."""
    text = ""  # a loop, not a generator: a pointer is built per changed member
    for token in tokens:
        text += "/" + token.replace("~", "~0").replace("/", "~1")
    return text


def _check_json(value: Any, where: str) -> None:
    """Reject values that have no exact JSON form (NaN, infinities, non-string keys...)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(key, str) for key in item):
                raise TypeError(f"{where} has a non-string object key")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError(f"{where} contains {item!r}, which JSON cannot represent")
        elif item is not None and not isinstance(item, (str, int, bool)):
            raise TypeError(f"{where} contains {type(item).__name__}, which is not a JSON value")


# Types whose Python equality is JSON equality when both sides have the same type
# (not float: -0.0 == 0.0 but they serialise differently).
_SCALARS: Final = frozenset({str, int, bool, type(None)})


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 and True differ, 1 and 1.0 differ, object key order is ignored."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind in _SCALARS:  # most leaves
        return bool(a == b)
    # Python-unequal JSON values are JSON-unequal; Python-equal ones may still differ in
    # number types (1 == 1.0 == True), so those are walked.
    return bool(a == b) and _strictly_same(a, b)


def _strictly_same(a: Any, b: Any) -> bool:
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return _members_same(a.values(), map(b.__getitem__, a))
    if kind is list:
        return _members_same(a, b)
    if kind is float:
        return math.copysign(1.0, a) == math.copysign(1.0, b)
    return True


def _members_same(xs: Iterable[Any], ys: Iterable[Any]) -> bool:
    # Scalar members inline, not one call each: an object's metadata is walked whole.
    for x, y in zip(xs, ys, strict=True):
        if type(x) is not type(y):
            return False
        if type(x) not in _SCALARS and not _strictly_same(x, y):
            return False
    return True


def json_diff(before: Any, after: Any) -> Patch:
    """RFC 6902 operations turning JSON value ``before`` into ``after``.

    Object members are compared recursively in sorted key order; any other difference
    (arrays included) is one ``replace`` of the whole value. Explicit nulls are kept.
    Values are deep-copied, so editing ``after`` later cannot change the patch.
    """
    _check_json(before, "before")
    _check_json(after, "after")
    operations: Patch = []
    _diff_into(operations, before, after, "", deepcopy)
    return operations


def _diff_into(
    operations: Patch, old: Any, new: Any, path: str, copy: Callable[[Any], Any]
) -> None:
    if not (isinstance(old, dict) and isinstance(new, dict)):
        if not _same(old, new):
            operations.append({"op": "replace", "path": path, "value": copy(new)})
        return
    keys = old.keys() if old.keys() == new.keys() else old.keys() | new.keys()
    for key in sorted(keys):
        if key not in new:
            operations.append({"op": "remove", "path": path + pointer(key)})
        elif key not in old:
            operations.append({"op": "add", "path": path + pointer(key), "value": copy(new[key])})
        else:
            before, after = old[key], new[key]
            if before is after:  # a subtree shared by both documents (mutation patches)
                continue
            # Pointers are built only where something changed (most members did not).
            if isinstance(before, dict) and isinstance(after, dict):
                if not _same(before, after):
                    _diff_into(operations, before, after, path + pointer(key), copy)
            elif not _same(before, after):
                value = copy(after)
                operations.append({"op": "replace", "path": path + pointer(key), "value": value})


def diff(before: Resource, after: Resource) -> Patch:
    """A JSON patch from a fetched resource to an edited copy, guarded against races.

    Both are dumped as written to the API (``by_alias``, ``exclude_none``: setting a field
    to None removes it). A non-empty patch starts with ``test`` operations on
    ``/metadata/uid`` and ``/metadata/resourceVersion``, so the API server refuses it
    (422) if the object was replaced or changed meanwhile. Returns ``[]`` if nothing changed.
    """
    meta, after_meta = before.metadata, after.metadata  # not the models' properties: Python
    where = (None, None) if meta is None else (meta.name, meta.namespace)
    after_where = (None, None) if after_meta is None else (after_meta.name, after_meta.namespace)
    if (before.api_version, before.kind, where) != (after.api_version, after.kind, after_where):
        raise ValueError("A resource diff cannot change kind, name, or namespace")
    if meta is None or not meta.uid or not meta.resource_version:
        raise ValueError("An optimistic diff needs a fetched resource with UID and resourceVersion")
    ids = (meta.uid, meta.resource_version)
    if after_meta is None or (after_meta.uid, after_meta.resource_version) != ids:
        raise ValueError("A resource diff cannot change UID or resourceVersion")
    # Both dumps are fresh and ours: no copies; only what is written needs checking.
    operations: Patch = []
    wired = _wire(after)
    _diff_into(operations, _wire(before), wired, "", _no_copy)
    # Fields the model filled with defaults are not on the server: write their nearest
    # absent ancestor whole instead of a member of it (which the server would refuse).
    stored = before.model_dump(mode="json", by_alias=True, exclude_unset=True)
    operations = _applicable(operations, stored, wired)
    for operation in operations:
        if "value" in operation:
            _check_json(operation["value"], f"the value at {operation['path'] or '/'}")
    if not operations:
        return []
    guards: Patch = [
        {"op": "test", "path": "/metadata/uid", "value": meta.uid},
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.resource_version},
    ]
    return guards + operations


def _no_copy(value: Any) -> Any:
    return value


def _applicable(operations: Patch, stored: Any, after: dict[str, Any]) -> Patch:
    """`operations` rewritten to apply to `stored` (the members the server sent): a change
    under a missing member becomes one `add` of that member's new value, a `replace` of a
    missing member an `add`, a `remove` of one nothing."""
    result: Patch = []
    added: set[str] = set()
    for operation in operations:
        tokens = operation["path"].split("/")[1:]
        node, depth = stored, 0
        while depth < len(tokens) and isinstance(node, dict):
            key = tokens[depth].replace("~1", "/").replace("~0", "~")
            if key not in node:
                break
            node, depth = node[key], depth + 1
        if depth == len(tokens):  # the member is there: the operation applies as it is
            result.append(operation)
            continue
        if operation["op"] == "remove" and depth == len(tokens) - 1:
            continue  # removing what the server does not have
        prefix = "/" + "/".join(tokens[: depth + 1])
        if prefix in added:
            continue
        value: Any = after
        for token in tokens[: depth + 1]:
            key = token.replace("~1", "/").replace("~0", "~")
            value = value.get(key, _ABSENT) if isinstance(value, dict) else _ABSENT
        if value is _ABSENT:
            continue  # gone in the new object too: nothing to write there
        added.add(prefix)
        result.append({"op": "add", "path": prefix, "value": value})
    return result


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 applied to `target` (unchanged): objects merge recursively, ``null``
    deletes, anything else replaces (copied)."""
    if not isinstance(patch, dict):
        return deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _is_status(operation: dict[str, Any]) -> bool:
    path = str(operation.get("path", ""))
    return path == "/status" or path.startswith("/status/")


def split_status(operations: Patch) -> tuple[Patch, Patch]:
    """(main operations, status operations) of an unguarded patch."""
    main = [op for op in operations if not _is_status(op)]
    status = [op for op in operations if _is_status(op)]
    return main, status


def _wire(resource: Resource) -> dict[str, Any]:
    return resource.model_dump(mode="json", by_alias=True, exclude_none=True)


# -- admission mutation ------------------------------------------------------------------

_ABSENT: Final = object()  # a member missing from a JSON object (distinct from null)


class MutationBase:
    """What `mutation_patch` needs of the object a mutator was given, taken before it runs
    (cheaper than keeping a deep copy of the model: both dumps are needed anyway).
    """

    __slots__ = ("api_version", "explicit", "full", "kind")

    def __init__(self, resource: Resource) -> None:
        self.api_version, self.kind = resource.api_version, resource.kind
        self.full: dict[str, Any] = resource.model_dump(mode="json", by_alias=True)
        self.explicit: dict[str, Any] = resource.model_dump(
            mode="json", by_alias=True, exclude_unset=True
        )


def mutation_patch(raw: dict[str, Any], before: Resource | MutationBase, after: Resource) -> Patch:
    """The JSON patch an admission mutator's changes make to the object as received.

    ``before`` is the typed object the handler was given (or its `MutationBase`, taken
    before the handler ran), ``after`` what it returned.
    Only what the handler changed is applied, onto ``raw``: fields the model does not
    know and defaults the model filled in stay as they arrived. A default assigned
    explicitly is written. List elements with a ``name`` are matched by name, others by
    equality and position; where unknown fields could be lost or misplaced a
    ``ValueError`` is raised rather than guessing. Identity changes are refused.
    ``raw`` is not changed; the patch shares no values with it.
    """
    base = before if isinstance(before, MutationBase) else MutationBase(before)
    if (base.api_version, base.kind) != (after.api_version, after.kind):
        raise ValueError("An admission mutator cannot change apiVersion or kind")
    old = base.full
    new = after.model_dump(mode="json", by_alias=True)
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    for key in ("name", "namespace", "uid", "resourceVersion"):
        if old_meta.get(key) != new_meta.get(key):
            raise ValueError(f"An admission mutator cannot change metadata.{key}")
    edits = _Edits(base.explicit, after.model_dump(mode="json", by_alias=True, exclude_unset=True))
    # `desired` shares every unchanged subtree with `raw` (and new values with `new`):
    # nothing is copied but the values the patch writes, and shared subtrees are skipped
    # by identity when diffing. Only those written values need checking: raw is parsed JSON.
    desired = _overlay(raw, old, new, edits)
    operations: Patch = []
    _diff_into(operations, raw, desired, "", deepcopy)
    for operation in operations:
        if "value" in operation:
            _check_json(operation["value"], f"the value at {operation['path'] or '/'}")
    return operations


class _Edits:
    """The explicitly set (``exclude_unset``) dumps at one position of both models.

    They reveal an assignment that the full dumps hide: a default set explicitly.
    """

    __slots__ = ("new", "old")

    def __init__(self, old: Any, new: Any) -> None:
        self.old, self.new = old, new

    def member(self, key: str) -> _Edits:
        return _Edits(
            self.old.get(key, _ABSENT) if isinstance(self.old, dict) else _ABSENT,
            self.new.get(key, _ABSENT) if isinstance(self.new, dict) else _ABSENT,
        )

    def element(self, old_index: int | None, new_index: int) -> _Edits:
        old = _ABSENT
        if old_index is not None and isinstance(self.old, list) and old_index < len(self.old):
            old = self.old[old_index]
        new = (
            self.new[new_index]
            if isinstance(self.new, list) and new_index < len(self.new)
            else _ABSENT
        )
        return _Edits(old, new)

    def unchanged(self) -> bool:
        return _same_or_absent(self.old, self.new)


def _same_or_absent(a: Any, b: Any) -> bool:
    if a is _ABSENT or b is _ABSENT:
        return a is b
    return _same(a, b)


def _overlay(raw: Any, old: Any, new: Any, edits: _Edits) -> Any:
    """The desired value at one position: ``raw`` plus the change from ``old`` to ``new``.

    Returns ``_ABSENT`` when the member should stay missing.
    """
    if _same_or_absent(old, new) and edits.unchanged():
        return raw
    if _same_or_absent(old, new) and raw is not _ABSENT and not isinstance(old, (dict, list)):
        return raw  # a scalar re-assigned its current value: keep the raw form
    if isinstance(old, dict) and isinstance(new, dict):
        return _overlay_object(raw, old, new, edits)
    if isinstance(old, list) and isinstance(new, list) and isinstance(raw, list):
        return _overlay_array(raw, old, new, edits)
    return new


def _overlay_object(raw: Any, old: dict[str, Any], new: dict[str, Any], edits: _Edits) -> Any:
    result = dict(raw) if isinstance(raw, dict) else {}  # raw itself is never changed
    for key in old.keys() | new.keys():
        if key not in new:
            result.pop(key, None)
            continue
        value = _overlay(
            result.get(key, _ABSENT), old.get(key, _ABSENT), new[key], edits.member(key)
        )
        if value is not _ABSENT:
            result[key] = value
    return result if result or raw is not _ABSENT else _ABSENT


def _overlay_array(raw: list[Any], old: list[Any], new: list[Any], edits: _Edits) -> list[Any]:
    if len(raw) != len(old):
        raise ValueError(
            "A model validator changed array length; mutation cannot preserve raw fields"
        )
    old_names, new_names, raw_names = _names(old), _names(new), _names(raw)
    if old_names is not None and new_names is not None and raw_names is not None:
        return _overlay_named(raw, old, new, edits, (old_names, new_names, raw_names))
    return _overlay_unnamed(raw, old, new, edits)


def _names(values: list[Any]) -> list[str] | None:
    """Element names when every element is an object with a distinct nonempty ``name``."""
    names = [value.get("name") if isinstance(value, dict) else None for value in values]
    if all(isinstance(name, str) and name for name in names) and len(set(names)) == len(names):
        return [str(name) for name in names]
    return None


def _overlay_named(
    raw: list[Any],
    old: list[Any],
    new: list[Any],
    edits: _Edits,
    names: tuple[list[str], list[str], list[str]],
) -> list[Any]:
    old_names, new_names, raw_names = names
    if set(old_names) != set(raw_names):
        raise ValueError(
            "A model validator changed array identity; mutation cannot preserve raw fields"
        )
    old_at = {name: index for index, name in enumerate(old_names)}
    raw_at = {name: index for index, name in enumerate(raw_names)}
    added = set(new_names) - set(old_names)
    dropped = set(old_names) - set(new_names)
    if added and any(_has_unknown(raw[raw_at[name]], old[old_at[name]]) for name in dropped):
        # Possibly a rename: the new element would silently lose the old one's fields.
        raise ValueError("Cannot safely replace named array elements containing unknown fields")
    result = []
    for index, (name, value) in enumerate(zip(new_names, new, strict=True)):
        if name not in old_at:
            result.append(value)
            continue
        source = old_at[name]
        result.append(_overlay(raw[raw_at[name]], old[source], value, edits.element(source, index)))
    return result


def _overlay_unnamed(raw: list[Any], old: list[Any], new: list[Any], edits: _Edits) -> list[Any]:
    if not all(_known_part_equal(r, o) for r, o in zip(raw, old, strict=True)):
        raise ValueError(
            "A model validator changed unnamed array elements; mutation cannot preserve raw fields"
        )
    sources = _match_equal(raw, old, new)
    unmatched_new = [index for index, source in enumerate(sources) if source is None]
    unused_old = [index for index in range(len(old)) if index not in sources]
    in_place = len(old) == len(new) and all(
        source is None or source == index for index, source in enumerate(sources)
    )
    if in_place:
        # Same length, nothing moved: changed elements are edits at their position.
        if len(unmatched_new) > 1 and any(_has_unknown(raw[i], old[i]) for i in unmatched_new):
            raise ValueError(
                "Cannot safely match multiple changed unnamed array elements "
                "containing unknown fields"
            )
        sources = list(range(len(new)))
    elif unmatched_new and any(_has_unknown(raw[i], old[i]) for i in unused_old):
        raise ValueError(
            "Cannot safely match changed array elements with unknown fields; "
            "edit elements in place or separate structural edits"
        )
    return [
        value
        if source is None
        else _overlay(raw[source], old[source], value, edits.element(source, index))
        for index, (source, value) in enumerate(zip(sources, new, strict=True))
    ]


def _match_equal(raw: list[Any], old: list[Any], new: list[Any]) -> list[int | None]:
    """For each new element, the first unused old element equal to it (or None)."""
    used: set[int] = set()
    sources: list[int | None] = []
    for value in new:
        equal = [i for i, candidate in enumerate(old) if i not in used and _same(candidate, value)]
        if len(equal) > 1 and any(not _same(raw[equal[0]], raw[i]) for i in equal[1:]):
            raise ValueError(
                "Cannot safely distinguish duplicate array elements containing unknown fields"
            )
        source = equal[0] if equal else None
        if source is not None:
            used.add(source)
        sources.append(source)
    return sources


def _has_unknown(raw: Any, typed: Any) -> bool:
    """Whether ``raw`` holds members the typed dump lacks (at any depth)."""
    if isinstance(raw, dict) and isinstance(typed, dict):
        return any(
            key not in typed or _has_unknown(value, typed[key]) for key, value in raw.items()
        )
    if isinstance(raw, list) and isinstance(typed, list):
        return len(raw) != len(typed) or any(
            _has_unknown(a, b) for a, b in zip(raw, typed, strict=True)
        )
    return False


def _known_part_equal(raw: Any, typed: Any) -> bool:
    """Whether the members of ``raw`` that the model knows equal its typed dump."""
    if isinstance(raw, dict) and isinstance(typed, dict):
        return all(key not in typed or _known_part_equal(v, typed[key]) for key, v in raw.items())
    if isinstance(raw, list) and isinstance(typed, list):
        return len(raw) == len(typed) and all(
            _known_part_equal(a, b) for a, b in zip(raw, typed, strict=True)
        )
    if _is_number(raw) and _is_number(typed):
        return bool(raw == typed)  # a float field parses the raw 1 as 1.0
    return _same(raw, typed)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_copy(value: Any) -> Any:
    """A deep copy of parsed JSON (dicts, lists, immutable scalars); ~4x copy.deepcopy."""
    kind = type(value)
    if kind is dict:
        return {key: json_copy(item) for key, item in value.items()}
    if kind is list:
        return [json_copy(item) for item in value]
    return value
