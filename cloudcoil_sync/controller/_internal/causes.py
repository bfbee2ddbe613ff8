"""Why a pass runs: `Cause`, computed where a key is added and kept through the queue.

The queue keeps, per pending key, the set of causes of the adds it coalesced (bounded:
`MAX_CAUSES` distinct causes, then one `more` cause counting the rest), and hands them to
the pass that takes the key. Level-based reconciliation is kept: a pass still reads the
whole current object; the causes only say what woke it.

Kinds (`CAUSE_KINDS`, the only values of the `cause` metric label):

| kind       | what happened                                            | `paths` / `object` |
|------------|----------------------------------------------------------|--------------------|
| `added`    | the primary appeared in the cache (created, or listed)   |                    |
| `spec`, `metadata`, `status`, `fields` | the primary changed there | changed paths      |
| `deleted`  | the primary left the cache                               |                    |
| `child`    | an owned child was added, updated or deleted (`event`)   | its paths, `object`|
| `mapped`   | a watched object mapped to this key changed              | its paths, `object`|
| `resync`   | the periodic relist (nothing changed)                    |                    |
| `requeue`  | the last pass asked for it (`Result(requeue_after)`, `Wait`) |                |
| `timer`    | `@reconcile(every=...)`                                  |                    |
| `retry`    | the last pass failed (`event`: its outcome)              |                    |
| `takeover` | this replica started leading: the keys listed before     |                    |
| `enqueue`  | `controller.enqueue(key)`                                |                    |
| `more`     | causes beyond `MAX_CAUSES` (`event`: how many)           |                    |
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CAUSE_KINDS",
    "ENQUEUE",
    "MAX_CAUSES",
    "MAX_PATHS",
    "REQUEUE",
    "RESYNC",
    "TAKEOVER",
    "TIMER",
    "Cause",
    "comparable",
    "describe",
    "diff",
    "object_cause",
    "object_name",
    "primary_causes",
    "retry",
]

CAUSE_KINDS = (
    "added",
    "spec",
    "metadata",
    "status",
    "fields",
    "deleted",
    "child",
    "mapped",
    "resync",
    "requeue",
    "timer",
    "retry",
    "takeover",
    "enqueue",
    "more",
)
MAX_CAUSES = 16  # distinct causes kept per pending key
MAX_PATHS = 8  # paths kept per cause (then "+N more")
_VOLATILE = ("resourceVersion", "managedFields", "generation")  # generation: follows spec
_SECTIONS = ("spec", "metadata", "status")

JSON = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Cause:
    """One reason a pass runs.

    `kind` is one of `CAUSE_KINDS`; `paths` the changed fields (dotted, `[i]` for list
    items, e.g. `spec.replicas`); `object` names the child or mapped object
    (`Kind namespace/name`); `event` is `added`/`updated`/`deleted` for a child or mapped
    object, the failed outcome for a retry, the count for `more`.
    """

    kind: str
    paths: tuple[str, ...] = ()
    object: str | None = None
    event: str | None = None

    def __str__(self) -> str:
        text = self.kind
        if self.object is not None:
            text += f" {self.object}"
        if self.event is not None:
            text += f" {self.event}"
        if self.paths:
            text += f" ({', '.join(self.paths)})"
        return text


RESYNC = Cause("resync")
REQUEUE = Cause("requeue")
TIMER = Cause("timer")
TAKEOVER = Cause("takeover")
ENQUEUE = Cause("enqueue")
ADDED = Cause("added")
DELETED = Cause("deleted")


def retry(outcome: str) -> Cause:
    return Cause("retry", event=outcome)


def describe(causes: tuple[Cause, ...] | list[Cause]) -> str:
    return "; ".join(str(cause) for cause in causes) or "unknown"


def diff(old: Any, new: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(path, before, after) for each changed leaf; equal subtrees are skipped whole (one
    C-level comparison), so the cost follows the size of what changed."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old.keys() | new.keys():
            before, after = old.get(key, _ABSENT), new.get(key, _ABSENT)
            if before != after:
                yield from diff(before, after, f"{path}.{key}" if path else str(key))
        return
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (before, after) in enumerate(zip(old, new, strict=True)):
            if before != after:
                yield from diff(before, after, f"{path}[{index}]")
        return
    yield path, _plain(old), _plain(new)


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()


def _plain(value: Any) -> Any:
    return None if value is _ABSENT else value


def comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` without the metadata that moves with every write (for diffs of what changed)."""
    comparable = dict(obj)
    metadata = dict(comparable.get("metadata") or {})
    for key in _VOLATILE:
        metadata.pop(key, None)
    comparable["metadata"] = metadata
    return comparable


def _paths(old: JSON, new: JSON) -> dict[str, list[str]]:
    """Changed paths by section (spec, metadata, status, fields), at most MAX_PATHS each."""
    found: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for path, _, _ in diff(comparable(old), comparable(new)):
        top = path.split(".", 1)[0].split("[", 1)[0]
        section = top if top in _SECTIONS else "fields"
        counts[section] = counts.get(section, 0) + 1
        if counts[section] <= MAX_PATHS:
            found.setdefault(section, []).append(path)
    for section, count in counts.items():
        if count > MAX_PATHS:
            found[section].append(f"+{count - MAX_PATHS} more")
    return found


def _version(obj: JSON) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")


def primary_causes(old: JSON, new: JSON) -> tuple[Cause, ...]:
    """The causes of an update of the primary: a resync, or one cause per changed section."""
    if _version(old) == _version(new):
        return (RESYNC,)
    return tuple(Cause(section, tuple(paths)) for section, paths in _paths(old, new).items())


def object_name(label: str, obj: JSON) -> str:
    """`Kind namespace/name` (or `Kind name`) of an object."""
    metadata = obj.get("metadata") or {}
    namespace, name = metadata.get("namespace"), metadata.get("name", "?")
    return f"{label} {namespace}/{name}" if namespace else f"{label} {name}"


def object_cause(kind: str, label: str, old: JSON | None, new: JSON | None) -> Cause:
    """A child's or mapped object's event: `kind` is `child` or `mapped`, `label` its Kind."""
    current = new if new is not None else old
    assert current is not None
    where = object_name(label, current)
    if old is None:
        return Cause(kind, object=where, event="added")
    if new is None:
        return Cause(kind, object=where, event="deleted")
    if _version(old) == _version(new):
        return Cause(kind, object=where, event="resync")
    paths = tuple(path for paths in _paths(old, new).values() for path in paths)
    return Cause(kind, paths, object=where, event="updated")
