"""managedFields: ownership changes for Update operations and server-side apply."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from cloudcoil_sync.testing._internal.fields import (
    ATOMIC_STRUCTS,
    KEYED_LISTS,
    SET_LISTS,
    FieldSet,
    Path,
    fields_of,
    from_tree,
    leaves,
    path_text,
    to_tree,
)
from cloudcoil_sync.testing._internal.status import ApiError

__all__ = ["Writer", "answered_fields", "apply_patch", "manager_name", "record_update"]

JSON = dict[str, Any]


@dataclass(frozen=True)
class Writer:
    """Who writes: field manager, the apiVersion used and the subresource (``""``, status or
    scale)."""

    manager: str
    api_version: str
    subresource: str
    custom: bool | JSON  # a custom resource's CRD schema when known (fields.fields_of)
    now: str


def manager_name(user_agent: str | None, field_manager: str | None) -> str:
    """kube-apiserver's default manager is the User-Agent up to the first ``/``."""
    if field_manager:
        return field_manager
    return (user_agent or "unknown").split("/", 1)[0] or "unknown"


def _restricted(
    obj: JSON,
    custom: bool | JSON,
    status_split: bool,
    subresource: str,
    fields: dict[Path, Any] | None = None,
) -> dict[Path, Any]:
    if fields is None:
        fields = fields_of(obj, custom)
    if not status_split:
        return fields
    if subresource == "status":
        return {p: v for p, v in fields.items() if p[0] == "f:status"}
    return {p: v for p, v in fields.items() if p[0] != "f:status"}


def _entry(w: Writer, operation: str, paths: FieldSet) -> JSON:
    entry: JSON = {
        "manager": w.manager,
        "operation": operation,
        "apiVersion": w.api_version,
        "time": w.now,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_tree(paths),
    }
    if w.subresource:
        entry["subresource"] = w.subresource
    return entry


def answered_fields(w: Writer, request: JSON) -> list[JSON]:
    """managedFields of an answered create (a review, a TokenRequest): kube-apiserver records
    the request's fields as an Update though nothing is stored."""
    paths = set(fields_of(request, w.custom))
    return [_entry(w, "Update", paths)] if paths else []


def _is(entry: JSON, w: Writer, operation: str) -> bool:
    return (
        entry.get("manager") == w.manager
        and entry.get("operation") == operation
        and entry.get("subresource", "") == w.subresource
    )


def _order(entry: JSON) -> tuple[str, str, str, str, str]:
    return (
        entry.get("operation", ""),
        entry.get("time", ""),
        entry.get("manager", ""),
        entry.get("subresource", ""),
        entry.get("apiVersion", ""),
    )


def sort_entries(entries: list[JSON]) -> list[JSON]:
    """kube-apiserver's order: operation, time (seconds), manager, subresource, apiVersion."""
    return sorted(entries, key=_order)


def record_update(
    old: JSON | None, new: JSON, w: Writer, status_split: bool, base: list[JSON] | None
) -> list[JSON]:
    """managedFields after an Update-operation write of ``new`` over ``old``."""
    old_fields = _restricted(old or {}, w.custom, status_split, w.subresource)
    all_new = fields_of(new, w.custom)
    new_fields = _restricted(new, w.custom, status_split, w.subresource, all_new)
    changed = {p for p, v in new_fields.items() if p not in old_fields or old_fields[p] != v}
    present = set(all_new)
    entries = (
        base
        if base is not None
        else list((old or {}).get("metadata", {}).get("managedFields") or [])
    )
    out: list[JSON] = []
    found = False
    for entry in entries:
        paths = from_tree(entry.get("fieldsV1") or {})
        if _is(entry, w, "Update"):
            found = True
            mine = (paths | changed) & present
            if mine:
                out.append(entry if mine == paths else _entry(w, "Update", mine))
            continue
        kept = (paths - changed) & present
        if kept == paths:
            out.append(entry)
        elif kept:
            out.append({**entry, "fieldsV1": to_tree(kept)})
    if not found and changed:
        out.append(_entry(w, "Update", changed & present))
    return sort_entries(out)


def _merge(live: Any, applied: Any, name: str) -> Any:
    if isinstance(live, dict) and isinstance(applied, dict) and name not in ATOMIC_STRUCTS:
        out = dict(live)
        for key, value in applied.items():
            out[key] = _merge(live.get(key), value, key) if key in live else copy.deepcopy(value)
        return out
    if isinstance(live, list) and isinstance(applied, list):
        if name in SET_LISTS:
            return live + [v for v in applied if v not in live]
        keys = KEYED_LISTS.get(name)
        if keys:
            out_list = list(live)
            for element in applied:
                ident = {k: element.get(k) for k in keys} if isinstance(element, dict) else None
                for i, current in enumerate(out_list):
                    if (
                        ident
                        and isinstance(current, dict)
                        and all(current.get(k) == v for k, v in ident.items())
                    ):
                        out_list[i] = _merge(current, element, "")
                        break
                else:
                    out_list.append(copy.deepcopy(element))
            return out_list
    return copy.deepcopy(applied)


def _delete_at(obj: Any, path: Path) -> None:
    node = obj
    for token in path[:-1]:
        kind, _, rest = token.partition(":")
        if kind == "f" and isinstance(node, dict) and rest in node:
            node = node[rest]
        elif kind == "k" and isinstance(node, list):
            wanted = json.loads(rest)
            node = next((e for e in node if all(e.get(k) == v for k, v in wanted.items())), None)
            if node is None:
                return
        else:
            return
    kind, _, rest = path[-1].partition(":")
    if kind == "f" and isinstance(node, dict):
        node.pop(rest, None)
    elif kind == "v" and isinstance(node, list):
        value = json.loads(rest)
        if value in node:
            node.remove(value)


def _conflict_name(entry: JSON) -> str:
    name = json.dumps(entry.get("manager", ""))
    if entry.get("subresource"):
        name += f" with subresource {json.dumps(entry['subresource'])}"
    if entry.get("operation") == "Update":
        return f"{name} using {entry.get('apiVersion', '')}"
    return name


def _conflict_error(conflicts: list[tuple[JSON, Path]]) -> ApiError:
    count = len(conflicts)
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {_conflict_name(e)}",
            "field": path_text(p),
        }
        for e, p in conflicts
    ]
    if count == 1:
        text = f"conflict with {_conflict_name(conflicts[0][0])}: {path_text(conflicts[0][1])}"
    else:
        by_manager: dict[str, list[str]] = {}
        for e, p in conflicts:
            by_manager.setdefault(_conflict_name(e), []).append(path_text(p))
        lines = []
        for manager in sorted(by_manager):
            lines.append(f"conflicts with {manager}:")
            lines.extend(f"- {p}" for p in by_manager[manager])
        text = "\n".join(lines)
    plural = "" if count == 1 else "s"
    return ApiError(
        409, "Conflict", f"Apply failed with {count} conflict{plural}: {text}", {"causes": causes}
    )


def apply_patch(
    live: JSON | None, applied: JSON, w: Writer, force: bool, status_split: bool
) -> JSON:
    """The object after ``w`` applies ``applied`` to ``live`` (409 on conflicts unless forced)."""
    applied_fields = _restricted(applied, w.custom, status_split, w.subresource)
    mine = leaves(applied_fields)
    live = copy.deepcopy(live) if live else {}
    live_fields = fields_of(live, w.custom) if live else {}
    entries = list(live.get("metadata", {}).get("managedFields") or [])
    conflicts: list[tuple[JSON, Path]] = []
    lost: dict[int, FieldSet] = {}
    for index, entry in enumerate(entries):
        if _is(entry, w, "Apply"):  # the same name's Update entries are other managers
            continue
        owned = from_tree(entry.get("fieldsV1") or {})
        for path in sorted(mine & owned):
            if live_fields.get(path) != applied_fields[path]:
                conflicts.append((entry, path))
                lost.setdefault(index, set()).add(path)
    if conflicts and not force:
        raise _conflict_error(conflicts)
    merged: JSON = _merge(live, {k: v for k, v in applied.items() if k != "metadata"}, "")
    meta = dict(live.get("metadata") or {})
    for key, value in (applied.get("metadata") or {}).items():
        if key not in ("managedFields", "resourceVersion", "uid", "creationTimestamp"):
            meta[key] = _merge(meta.get(key), value, key) if key in meta else copy.deepcopy(value)
    merged["metadata"] = meta
    previous: FieldSet = set()
    out: list[JSON] = []
    # kube-apiserver drops a manager whose set is empty (an apply of only name/namespace).
    for index, entry in enumerate(entries):
        if _is(entry, w, "Apply"):
            previous = from_tree(entry.get("fieldsV1") or {})
            if mine:
                out.append(_entry(w, "Apply", mine))
            continue
        if index in lost:
            kept = from_tree(entry.get("fieldsV1") or {}) - lost[index]
            if kept:
                out.append({**entry, "fieldsV1": to_tree(kept)})
            continue
        out.append(entry)
    if mine and not any(_is(e, w, "Apply") for e in entries):
        out.append(_entry(w, "Apply", mine))
    others: FieldSet = set()
    for entry in out:
        if not _is(entry, w, "Apply"):
            others |= from_tree(entry.get("fieldsV1") or {})
    for path in sorted(previous - mine - others, key=len, reverse=True):
        _delete_at(merged, path)
    for key in ("labels", "annotations"):  # ObjectMeta omits them when empty
        if merged["metadata"].get(key) == {}:
            del merged["metadata"][key]
    merged["metadata"]["managedFields"] = sort_entries(out)
    return merged
