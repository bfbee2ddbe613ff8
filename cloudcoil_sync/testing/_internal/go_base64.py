"""Go's base64.StdEncoding decoding errors, at the byte offset Go reports them.

kube-apiserver decodes a Secret's ``data`` and a ConfigMap's ``binaryData`` ([]byte fields)
with encoding/json, which answers a bad value with a 400 naming the offset Go's decoder
stopped at ("illegal base64 data at input byte N"). Newlines are skipped as Go skips them.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from cloudcoil_sync.testing._internal.status import bad_request

__all__ = ["check_bytes_fields"]

_ALPHABET = re.compile(rb"[A-Za-z0-9+/]")
_NEWLINES = (ord("\n"), ord("\r"))
_PAD = ord("=")
_JSON_TYPES = {bool: "bool", int: "number", float: "number", dict: "object", list: "array"}


def _skip_newlines(data: bytes, si: int) -> int:
    while si < len(data) and data[si] in _NEWLINES:
        si += 1
    return si


def _padding_error(data: bytes, si: int, j: int) -> int | None:
    """After a '=' read as the (j+1)th character of a quantum (si: just past it)."""
    if j < 2:
        return si - 1
    if j == 2:  # "==" expected
        si = _skip_newlines(data, si)
        if si == len(data):
            return len(data)
        if data[si] != _PAD:
            return si - 1
        si += 1
    si = _skip_newlines(data, si)
    return si if si < len(data) else None


def error_offset(text: str) -> int | None:
    """Where Go's StdEncoding decoder fails on ``text`` (None: it decodes)."""
    data, si = text.encode(), 0
    while True:
        j = 0
        while j < 4:
            if si == len(data):
                return None if j == 0 else si - j
            char = data[si]
            si += 1
            if _ALPHABET.fullmatch(bytes([char])):
                j += 1
            elif char in _NEWLINES:
                continue
            elif char == _PAD:
                return _padding_error(data, si, j)
            else:
                return si - 1


def check_bytes_fields(kind: str, obj: dict[str, Any], field: str) -> None:
    """A 400 as kube-apiserver's decoder gives for a bad value in a map of []byte; good
    values are stored re-encoded, as the server holds bytes (newlines gone)."""
    values = obj.get(field)
    if not isinstance(values, dict):
        return
    for key, value in values.items():
        reason = _problem(value, kind, field)
        if reason:
            raise bad_request(f'{kind} in version "v1" cannot be handled as a {kind}: {reason}')
        if isinstance(value, str) and ("\n" in value or "\r" in value):
            values[key] = base64.b64encode(base64.b64decode(value)).decode()


def _problem(value: Any, kind: str, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        what = _JSON_TYPES.get(type(value), "value")
        return f"json: cannot unmarshal {what} into Go struct field {kind}.{field} of type []uint8"
    offset = error_offset(value)
    return None if offset is None else f"illegal base64 data at input byte {offset}"
