"""Where change handlers and steps keep what survives a restart.

Two records, both on the object itself (no other store, so a restarted or newly elected
operator reads them from its informer cache):

- `handlers.cloudcoil.dev/last-handled` (an annotation, always): the object's essence as
  the last completed change left it, compact JSON: every top-level field but `apiVersion`,
  `kind`, `metadata` and `status`, plus `metadata.labels` and `metadata.annotations`
  (without this prefix's and `kubectl.kubernetes.io/last-applied-configuration`). It is the
  base of `old`/`new`/`diff` and what tells create (absent) from update (differs) after a
  restart. Cost: the essence's size once more on the object (the spec, mostly); kube-apiserver
  refuses more than 256 KiB of annotations in total, so an object whose spec nears that
  cannot use change handlers (its write fails with a 422 naming the limit). Written with the
  pass's one patch, only when a change was handled.
- progress: one entry per handler or step in flight, by id (`started`, `retries`,
  `delayed`, `success`, `failure`, `message`, as kopf's), in the annotation
  `handlers.cloudcoil.dev/progress` (default) or in `status.progress` (`progress="status"`,
  which the status model must allow: a `progress` field or `extra="allow"`). Entries go once
  their change is handled, a step's as soon as it succeeds: an object at rest carries none.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

__all__ = [
    "FINALIZER",
    "LAST_HANDLED",
    "PREFIX",
    "PROGRESS",
    "Entry",
    "Progress",
    "ProgressStorage",
    "essence",
    "fingerprint",
    "last_handled",
]

PREFIX = "handlers.cloudcoil.dev/"
LAST_HANDLED = PREFIX + "last-handled"
PROGRESS = PREFIX + "progress"
FINALIZER = PREFIX + "delete"
_IGNORED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
ProgressStorage = Literal["annotations", "status"]

JSON = Mapping[str, Any]


def essence(body: JSON) -> dict[str, Any]:
    """What a change is: the object without status and volatile metadata (module doc)."""
    found = {k: v for k, v in body.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    metadata = body.get("metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = {
        key: value
        for key, value in (metadata.get("annotations") or {}).items()
        if not key.startswith(PREFIX) and key not in _IGNORED_ANNOTATIONS
    }
    if labels or annotations:
        found["metadata"] = {
            **({"labels": labels} if labels else {}),
            **({"annotations": annotations} if annotations else {}),
        }
    return found


def fingerprint(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _annotations(body: JSON) -> Mapping[str, Any]:
    return (body.get("metadata") or {}).get("annotations") or {}


def last_handled(body: JSON) -> dict[str, Any] | None:
    """The essence the last completed change left (None: never handled, or unreadable)."""
    text = _annotations(body).get(LAST_HANDLED)
    if not isinstance(text, str):
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _time(value: float | None) -> str | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value, UTC).isoformat(timespec="milliseconds")


def _epoch(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


@dataclass
class Entry:
    """One handler's or step's progress (times in epoch seconds)."""

    started: float
    retries: int = 0
    delayed: float | None = None
    success: bool = False
    failure: bool = False
    message: str | None = None
    essence: str | None = None  # the fingerprint a permanent failure was for

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"started": _time(self.started), "retries": self.retries}
        if self.delayed is not None:
            found["delayed"] = _time(self.delayed)
        if self.success:
            found["success"] = True
        if self.failure:
            found["failure"] = True
        if self.message:
            found["message"] = self.message[:512]
        if self.essence:
            found["essence"] = self.essence
        return found

    @classmethod
    def from_json(cls, value: Any, now: float) -> Entry | None:
        if not isinstance(value, dict):
            return None
        retries = value.get("retries")
        return cls(
            started=_epoch(value.get("started")) or now,
            retries=retries if isinstance(retries, int) and retries >= 0 else 0,
            delayed=_epoch(value.get("delayed")),
            success=value.get("success") is True,
            failure=value.get("failure") is True,
            message=value.get("message") if isinstance(value.get("message"), str) else None,
            essence=value.get("essence") if isinstance(value.get("essence"), str) else None,
        )


class Progress:
    """The progress entries of one object, as read at the start of a pass."""

    def __init__(self, storage: ProgressStorage, body: JSON, now: float) -> None:
        self.storage = storage
        raw: Any
        if storage == "status":
            raw = (body.get("status") or {}).get("progress")
        else:
            text = _annotations(body).get(PROGRESS)
            try:
                raw = orjson.loads(text) if isinstance(text, str) else None
            except orjson.JSONDecodeError:
                raw = None
        self.entries: dict[str, Entry] = {}
        for key, value in (raw if isinstance(raw, dict) else {}).items():
            entry = Entry.from_json(value, now)
            if entry is not None:
                self.entries[str(key)] = entry
        self._read = self.encoded()

    def encoded(self) -> dict[str, Any] | None:
        found = {key: entry.to_json() for key, entry in sorted(self.entries.items())}
        return found or None

    @property
    def changed(self) -> bool:
        return self.encoded() != self._read

    def drop(self, ids: set[str]) -> None:
        """Forget the entries of `ids` and of their sub-steps (`id/...`)."""
        for key in list(self.entries):
            if key in ids or key.split("/", 1)[0] in ids:
                del self.entries[key]

    def annotation(self) -> str | None:
        encoded = self.encoded()
        return None if encoded is None else orjson.dumps(encoded).decode()


def encode_essence(value: dict[str, Any]) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
