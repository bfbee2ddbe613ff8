"""Decoding the protobuf request bodies kubectl sends for built-in kinds (``kubectl create``).

kubectl 1.32 sends ``application/vnd.kubernetes.protobuf`` bodies when it creates built-in
objects with its typed clients: ``create namespace|configmap|secret|serviceaccount|role|
rolebinding|clusterrole|clusterrolebinding``, ``create token`` (TokenRequest) and ``auth
can-i`` (SelfSubjectAccessReview). The body is ``k8s\\x00`` and a ``runtime.Unknown`` holding
the apiVersion, kind and the object's message. Only the messages of those kinds are known here
(field numbers as kubectl encodes them, checked by tests/kubectl); any other kind is a 415
naming the kinds that are. Go's encoder writes every non-pointer field, so empty strings,
zeros, false and empty messages are dropped, as ``omitempty`` drops them in JSON; answers are
always JSON (kubectl accepts it).
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

from . import status as st

__all__ = ["MAGIC", "decode", "supported_kinds"]

JSON = dict[str, Any]
MAGIC = b"k8s\x00"
# A field: (JSON name, type); a type is a scalar, a message name, "[]<type>" (repeated) or
# "map" / "bytesmap" (map<string,string> / map<string,bytes>).
Message = dict[int, tuple[str, str]]

_MESSAGES: dict[str, Message] = {
    "Time": {1: ("seconds", "int"), 2: ("nanos", "int")},
    "OwnerReference": {
        1: ("kind", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
        5: ("apiVersion", "string"),
        6: ("controller", "bool"),
        7: ("blockOwnerDeletion", "bool"),
    },
    "ObjectMeta": {
        1: ("name", "string"),
        2: ("generateName", "string"),
        3: ("namespace", "string"),
        5: ("uid", "string"),
        6: ("resourceVersion", "string"),
        7: ("generation", "int"),
        8: ("creationTimestamp", "Time"),
        10: ("deletionGracePeriodSeconds", "int"),
        11: ("labels", "map"),
        12: ("annotations", "map"),
        13: ("ownerReferences", "[]OwnerReference"),
        14: ("finalizers", "[]string"),
    },
    "NamespaceSpec": {1: ("finalizers", "[]string")},
    "ObjectReference": {
        1: ("kind", "string"),
        2: ("namespace", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
        5: ("apiVersion", "string"),
        6: ("resourceVersion", "string"),
        7: ("fieldPath", "string"),
    },
    "LocalObjectReference": {1: ("name", "string")},
    "PolicyRule": {
        1: ("verbs", "[]string"),
        2: ("apiGroups", "[]string"),
        3: ("resources", "[]string"),
        4: ("resourceNames", "[]string"),
        5: ("nonResourceURLs", "[]string"),
    },
    "Subject": {
        1: ("kind", "string"),
        2: ("apiGroup", "string"),
        3: ("name", "string"),
        4: ("namespace", "string"),
    },
    "RoleRef": {1: ("apiGroup", "string"), 2: ("kind", "string"), 3: ("name", "string")},
    "BoundObjectReference": {
        1: ("kind", "string"),
        2: ("apiVersion", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
    },
    "TokenRequestSpec": {
        1: ("audiences", "[]string"),
        3: ("boundObjectRef", "BoundObjectReference"),
        4: ("expirationSeconds", "int"),
    },
    "ResourceAttributes": {
        1: ("namespace", "string"),
        2: ("verb", "string"),
        3: ("group", "string"),
        4: ("version", "string"),
        5: ("resource", "string"),
        6: ("subresource", "string"),
        7: ("name", "string"),
    },
    "NonResourceAttributes": {1: ("path", "string"), 2: ("verb", "string")},
    "SelfSubjectAccessReviewSpec": {
        1: ("resourceAttributes", "ResourceAttributes"),
        2: ("nonResourceAttributes", "NonResourceAttributes"),
    },
}
_META = (1, ("metadata", "ObjectMeta"))
# (apiVersion, kind) → the object's fields (status is never read from a request).
_KINDS: dict[tuple[str, str], Message] = {
    ("v1", "Namespace"): dict([_META, (2, ("spec", "NamespaceSpec"))]),
    ("v1", "ConfigMap"): dict(
        [_META, (2, ("data", "map")), (3, ("binaryData", "bytesmap")), (4, ("immutable", "bool"))]
    ),
    ("v1", "Secret"): dict(
        [
            _META,
            (2, ("data", "bytesmap")),
            (3, ("type", "string")),
            (4, ("stringData", "map")),
            (5, ("immutable", "bool")),
        ]
    ),
    ("v1", "ServiceAccount"): dict(
        [
            _META,
            (2, ("secrets", "[]ObjectReference")),
            (3, ("imagePullSecrets", "[]LocalObjectReference")),
            (4, ("automountServiceAccountToken", "bool")),
        ]
    ),
    ("rbac.authorization.k8s.io/v1", "Role"): dict([_META, (2, ("rules", "[]PolicyRule"))]),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): dict([_META, (2, ("rules", "[]PolicyRule"))]),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): dict(
        [_META, (2, ("subjects", "[]Subject")), (3, ("roleRef", "RoleRef"))]
    ),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): dict(
        [_META, (2, ("subjects", "[]Subject")), (3, ("roleRef", "RoleRef"))]
    ),
    ("authentication.k8s.io/v1", "TokenRequest"): dict([_META, (2, ("spec", "TokenRequestSpec"))]),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): dict(
        [_META, (2, ("spec", "SelfSubjectAccessReviewSpec"))]
    ),
}


class _Truncated(ValueError):
    pass


def supported_kinds() -> list[str]:
    return [kind for _, kind in _KINDS]


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
    return _decode_fields(_MESSAGES[name], data)


def _empty(value: Any) -> bool:
    return value in ("", 0, False, None) or value == {}


def _decode_fields(schema: Message, data: bytes) -> JSON:
    out: JSON = {}
    for number, value in _fields(data):
        if number not in schema:
            continue  # a field kubectl does not send for these commands
        name, kind = schema[number]
        if kind in ("map", "bytesmap"):
            if not isinstance(value, bytes):
                raise _Truncated("a map entry is not length-delimited")
            entry = dict(_fields(value))
            key, item = entry.get(1, b""), entry.get(2, b"")
            if not isinstance(key, bytes) or not isinstance(item, bytes):
                raise _Truncated("a map entry is not length-delimited")
            text = base64.b64encode(item).decode() if kind == "bytesmap" else item.decode()
            out.setdefault(name, {})[key.decode()] = text
        elif kind.startswith("[]"):
            out.setdefault(name, []).append(_scalar(kind[2:], value))  # empty items are kept
        else:
            decoded = _scalar(kind, value)
            if kind == "Time":
                decoded = _time(decoded)
            if not _empty(decoded):
                out[name] = decoded
    return out


def _time(value: JSON) -> str | None:
    seconds = value.get("seconds", 0)
    if not seconds:
        return None
    when = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


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
        schema = _KINDS.get(key)
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
