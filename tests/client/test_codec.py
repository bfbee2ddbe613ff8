"""The API JSON codec: strict decoding, exact-size cached bytes, the big-integer fallback."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from cloudcoil_sync.client._internal import codec


def test_round_trip_keeps_order_unicode_and_numbers() -> None:
    value = {"z": "é→", "a": [1, 2.5, -0.0, None, True], "big": 2**70, "neg": -(2**63)}
    encoded = codec.dumps(value)
    assert json.loads(encoded) == value
    assert list(codec.loads(encoded)) == ["z", "a", "big", "neg"]
    assert b"\\u" not in encoded  # UTF-8, not escapes


@pytest.mark.parametrize("text", [b'{"a": NaN}', b"[Infinity]", b'{"a": 1', b"\xff"])
def test_decoding_is_strict_json(text: bytes) -> None:
    with pytest.raises(ValueError):
        codec.loads(text)


def test_cached_bytes_take_about_their_length_in_memory() -> None:
    value = {"metadata": {"name": "x", "labels": {"a": "b"}}, "data": {"k": "v" * 600}}
    size = len(codec.dumps(value))
    tracemalloc.start()
    try:
        kept = [codec.dumps(value) for _ in range(200)]
        used = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(kept) == 200
    assert used / 200 < 1.5 * size  # orjson's own bytes hold an ~8 KB buffer each
