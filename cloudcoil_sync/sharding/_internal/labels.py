"""The labels of a ring: assignment, drain request, and the ring label on shard Leases,
and the guarded JSON patches that change them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "COORDINATOR_MANAGER",
    "RING_LABEL",
    "SHARD_MANAGER",
    "assign_patch",
    "drain_key",
    "drain_patch",
    "place_patch",
    "release_patch",
    "shard_key",
    "shard_label_value",
]

RING_LABEL = "sharding.cloudcoil.dev/ring"
#: Field managers of the label patches (managedFields and audit logs tell them apart).
COORDINATOR_MANAGER = "cloudcoil-sharding-coordinator"
SHARD_MANAGER = "cloudcoil-sharding-shard"
_PREFIX_SHARD = "shard.sharding.cloudcoil.dev/"
_PREFIX_DRAIN = "drain.sharding.cloudcoil.dev/"
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")

JSON = dict[str, Any]


def shard_key(ring: str) -> str:
    """The label whose value is the shard an object is assigned to."""
    return _PREFIX_SHARD + ring


def drain_key(ring: str) -> str:
    """The label the coordinator sets to ask an object's shard to let go of it."""
    return _PREFIX_DRAIN + ring


def shard_label_value(identity: str) -> str:
    """`identity` if it can be a label value (the shard's name on objects), else ValueError."""
    if not isinstance(identity, str) or not _LABEL_VALUE.match(identity):
        raise ValueError(
            f"Shard identity {identity!r} must be a label value: at most 63 characters, "
            "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
        )
    return identity


def _pointer(key: str) -> str:
    return "/metadata/labels/" + key.replace("~", "~0").replace("/", "~1")


def _guards(obj: Mapping[str, Any]) -> list[JSON]:
    metadata = obj.get("metadata") or {}
    return [
        {"op": "test", "path": "/metadata/uid", "value": metadata.get("uid")},
        {
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": metadata.get("resourceVersion"),
        },
    ]


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else None


def assign_patch(obj: Mapping[str, Any], ring: str, shard: str) -> list[JSON]:
    """Label `obj` for `shard`, dropping a drain request (guarded by uid and version)."""
    return [*_guards(obj), *place_patch(obj, ring, shard)]


def place_patch(obj: Mapping[str, Any], ring: str, shard: str) -> list[JSON]:
    """Label `obj` for `shard`, dropping a drain request (unguarded: for an admission
    webhook's answer, applied to the object in flight)."""
    labels = _labels(obj)
    operations: list[JSON] = []
    if labels is None:
        operations.append({"op": "add", "path": "/metadata/labels", "value": {}})
    operations.append({"op": "add", "path": _pointer(shard_key(ring)), "value": shard})
    if labels is not None and drain_key(ring) in labels:
        operations.append({"op": "remove", "path": _pointer(drain_key(ring))})
    return operations


def drain_patch(obj: Mapping[str, Any], ring: str) -> list[JSON]:
    """Ask the object's shard to let go of it."""
    return [*_guards(obj), {"op": "add", "path": _pointer(drain_key(ring)), "value": "true"}]


def release_patch(obj: Mapping[str, Any], ring: str) -> list[JSON]:
    """The old shard's acknowledgement: both labels removed."""
    labels = _labels(obj) or {}
    operations = _guards(obj)
    for key in (shard_key(ring), drain_key(ring)):
        if key in labels:
            operations.append({"op": "remove", "path": _pointer(key)})
    return operations
