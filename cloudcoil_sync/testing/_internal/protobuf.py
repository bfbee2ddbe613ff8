"""Decoding the protobuf request bodies kubectl sends for built-in kinds (``kubectl create``).

kubectl 1.32 sends ``application/vnd.kubernetes.protobuf`` bodies when it creates built-in
objects with its typed clients: ``create namespace|configmap|secret|serviceaccount|role|
rolebinding|clusterrole|clusterrolebinding|deployment|service|job|cronjob|priorityclass|quota|
poddisruptionbudget|ingress``, ``create token`` (TokenRequest) and ``auth can-i``
(SelfSubjectAccessReview); client-go's leader election sends its Lease so (a compiled
controller, configured as controller-runtime does). The body is ``k8s\\x00`` and a
``runtime.Unknown`` holding the apiVersion, kind and the object's message. Only the messages of
those kinds are known (``protobuf_schemas.py``, checked by tests/kubectl and the recorded
bodies); any other kind is a 415 naming the kinds that are. Go's encoder writes every
non-pointer field, so empty strings, zeros, false and empty messages are dropped, as
``omitempty`` drops them in JSON; a pointer field is written when set, and kept. Answers are
always JSON (client-go's typed clients accept it).
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.protobuf_schemas import KINDS, MESSAGES, Message

__all__ = ["MAGIC", "decode", "supported_kinds"]

JSON = dict[str, Any]
MAGIC = b"k8s\x00"


class _Truncated(ValueError):
    pass


def supported_kinds() -> list[str]:
    return [kind for _, kind in KINDS]


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(data) or shift > 63:
            raise _Truncated("truncated varint")
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, i


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: varints as int, length-delimited fields as bytes."""
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _varint(data, i)
            if i + size > len(data):
                raise _Truncated("truncated field")
            out.append((number, data[i : i + size]))
            i += size
        elif wire in (1, 5):  # fixed64 / fixed32: no field of ours, skipped
            i += 8 if wire == 1 else 4
        else:
            raise _Truncated(f"unsupported wire type {wire}")
    return out


def _scalar(kind: str, value: int | bytes) -> Any:
    if kind == "string":
        if not isinstance(value, bytes):
            raise _Truncated("a string field is not length-delimited")
        return value.decode()
    if kind == "bool":
        return bool(value)
    if kind == "int":
        if not isinstance(value, int):
            raise _Truncated("an integer field is length-delimited")
        return value - (1 << 64) if value >= 1 << 63 else value
    if not isinstance(value, bytes):
        raise _Truncated(f"a {kind} field is not length-delimited")
    return _message(kind, value)


def _message(name: str, data: bytes) -> JSON:
    return _decode_fields(MESSAGES[name], data)


def _empty(value: Any) -> bool:
    return value in ("", 0, False, None) or value == {}


def _decode_fields(schema: Message, data: bytes) -> JSON:
    out: JSON = {}
    for number, value in _fields(data):
        if number not in schema:
            continue  # a field kubectl does not send for these commands
        name, kind = schema[number]
        if kind in ("map", "bytesmap", "quantitymap"):
            if not isinstance(value, bytes):
                raise _Truncated("a map entry is not length-delimited")
            entry = dict(_fields(value))
            key, item = entry.get(1, b""), entry.get(2, b"")
            if not isinstance(key, bytes) or not isinstance(item, bytes):
                raise _Truncated("a map entry is not length-delimited")
            text = _map_value(kind, item)
            out.setdefault(name, {})[key.decode()] = text
        elif kind.startswith("[]"):
            out.setdefault(name, []).append(_scalar(kind[2:], value))  # empty items are kept
        elif kind == "IntOrString":
            out[name] = _int_or_string(value)  # a pointer: present means set, even 0
        elif kind.startswith("?"):
            out[name] = _scalar(kind[1:], value)  # likewise
        else:
            decoded = _scalar(kind, value)
            if kind in ("Time", "MicroTime"):
                decoded = _time(decoded, micro=kind == "MicroTime")
            if not name:
                out.update(decoded)
            elif not _empty(decoded):
                out[name] = decoded
    return out


def _map_value(kind: str, item: bytes) -> str:
    if kind == "bytesmap":
        return base64.b64encode(item).decode()
    if kind == "quantitymap":  # a Quantity message: its string form is field 1
        text = dict(_fields(item)).get(1, b"")
        if not isinstance(text, bytes):
            raise _Truncated("a quantity is not length-delimited")
        return text.decode()
    return item.decode()


def _int_or_string(value: int | bytes) -> int | str:
    if not isinstance(value, bytes):
        raise _Truncated("an int-or-string field is not length-delimited")
    fields = dict(_fields(value))  # 1: type (1 = string), 2: intVal, 3: strVal
    if fields.get(1, 0) == 1:
        text = fields.get(3, b"")
        if not isinstance(text, bytes):
            raise _Truncated("an int-or-string's string is not length-delimited")
        return text.decode()
    number = fields.get(2, 0)
    if not isinstance(number, int):
        raise _Truncated("an int-or-string's integer is length-delimited")
    return number


def _time(value: JSON, *, micro: bool) -> str | None:
    """RFC 3339 in UTC as Go's JSON has it: whole seconds (Time) or six digits (MicroTime)."""
    seconds, nanos = value.get("seconds", 0), value.get("nanos", 0)
    if not seconds and not nanos:
        return None  # Go's zero time: null in JSON
    when = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    if not micro:
        return when.strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{when:%Y-%m-%dT%H:%M:%S}.{nanos // 1000:06d}Z"


def decode(raw: bytes) -> JSON:
    """The JSON form of a protobuf request body; a 415 ``ApiError`` for kinds not known here,
    a 400 for a body that is not a Kubernetes protobuf envelope."""
    if not raw.startswith(MAGIC):
        raise st.bad_request("the body of the request could not be decoded: no protobuf prefix")
    try:
        envelope = dict(_fields(raw[len(MAGIC) :]))
        type_meta = envelope.get(1, b"")
        body = envelope.get(2, b"")
        if not isinstance(type_meta, bytes) or not isinstance(body, bytes):
            raise _Truncated("malformed envelope")
        meta = {number: value for number, value in _fields(type_meta)}
        api_version = meta.get(1, b"")
        kind = meta.get(2, b"")
        if not isinstance(api_version, bytes) or not isinstance(kind, bytes):
            raise _Truncated("malformed type")
        key = (api_version.decode(), kind.decode())
        schema = KINDS.get(key)
        if schema is None:
            raise st.ApiError(
                415,
                "UnsupportedMediaType",
                f"the emulator decodes protobuf bodies only for {', '.join(supported_kinds())}, "
                f"not {key[0]} {key[1]}: send application/json",
            )
        obj = {"apiVersion": key[0], "kind": key[1], **_decode_fields(schema, body)}
    except (_Truncated, UnicodeDecodeError, KeyError) as exc:
        raise st.bad_request(f"the body of the request could not be decoded: {exc}") from None
    return obj
