"""JSON for the API hot paths: orjson where it is exact, the standard library otherwise.

Decoding is strict RFC 8259 (no NaN or Infinity, valid UTF-8), as the API server writes.
``dumps`` is for values that came from JSON (cached objects): orjson cannot encode
integers beyond 64 bits, so those fall back to the standard library. Request bodies built
by users keep ``json.dumps(allow_nan=False)`` in the transport: orjson would turn NaN
into null silently.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["dumps", "loads"]


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON text; ``ValueError`` (a ``json.JSONDecodeError``) if it is not JSON."""
    return orjson.loads(data)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON of a value parsed from JSON (key order kept)."""
    try:
        # orjson's bytes keep their whole growth buffer (~8 KB for a 0.6 KB object); the
        # informer caches these, so copy them to their exact size.
        return bytes(memoryview(orjson.dumps(value)))
    except TypeError:  # an integer beyond 64 bits
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
