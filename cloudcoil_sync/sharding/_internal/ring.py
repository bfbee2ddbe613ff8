"""Rendezvous (highest random weight) hashing of objects onto live shards.

Every shard scores an object; the highest score wins. A shard that joins takes only the
objects it now scores highest on (≈1/N, from every other shard); a shard that leaves gives
away only its own. Scores are stable across processes and Python runs (no `hash()`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ObjectRef", "pick_shard", "score"]


@dataclass(frozen=True, order=True, slots=True)  # one per object in a full round
class ObjectRef:
    """What an object is hashed by: (group, kind, namespace, name); "" for none."""

    group: str
    kind: str
    namespace: str
    name: str


def score(shard: str, ref: ObjectRef) -> int:
    """The weight of `shard` for `ref` (64 bits of BLAKE2b over both)."""
    text = "\0".join((shard, ref.group, ref.kind, ref.namespace, ref.name))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def pick_shard(shards: Iterable[str], ref: ObjectRef) -> str | None:
    """The shard that owns `ref` among `shards` (None when there is none)."""
    best: tuple[int, str] | None = None
    for shard in shards:
        candidate = (score(shard, ref), shard)
        if best is None or candidate > best:
            best = candidate
    return None if best is None else best[1]
