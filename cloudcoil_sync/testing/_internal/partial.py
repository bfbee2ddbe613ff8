"""Metadata-only answers (``meta.k8s.io`` ``PartialObjectMetadata`` and its List), which
client-go's metadata client and cloudcoil_sync's ``client.metadata`` ask for.

As kube-apiserver 1.32 (tests/recordings/partial-metadata): the first Accept clause that
is served decides; a clause asking for the List form on one object (or the object form on a
list) is answered 406, even when a plain JSON clause follows. Watches send each event's
object as ``PartialObjectMetadata``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cloudcoil_sync.client._internal import codec
from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.resources import ResourceType
from cloudcoil_sync.testing._internal.store import dumps

__all__ = ["ITEM", "LIST", "check", "convert_events", "convert_list", "convert_object", "wanted"]

JSON = dict[str, Any]
ITEM = "PartialObjectMetadata"
LIST = "PartialObjectMetadataList"
_GROUP = "meta.k8s.io"
_VERSIONS = ("v1", "v1beta1")
_JSON_TYPES = ("application/json", "application/*", "*/*")


def wanted(accept: str) -> tuple[str, str] | None:
    """``(kind, apiVersion)`` of partial metadata when the first served Accept clause asks
    for it, else None (plain JSON, or a form this server does not send)."""
    for clause in accept.split(","):
        media, *rest = (part.strip() for part in clause.split(";"))
        if media not in _JSON_TYPES:
            continue  # protobuf, YAML, ...: this emulator answers JSON
        params = dict(part.split("=", 1) for part in rest if "=" in part)
        form = params.get("as")
        if form is None:
            return None
        if form in (ITEM, LIST) and params.get("g") == _GROUP and params.get("v") in _VERSIONS:
            return form, f"{_GROUP}/{params['v']}"
    return None


def check(rt: ResourceType, form: str, listing: bool) -> None:
    """406 when `form` does not fit the answer (a List for one object, or the reverse)."""
    if (form == LIST) == listing:
        return
    go_type = "unstructured.Unstructured" if not rt.builtin else f"{_package(rt)}.{rt.kind}"
    what = "is a list" if listing else "is not a list"
    suffix = "List" if listing else ""
    raise st.ApiError(
        406,
        "NotAcceptable",
        f"you requested {form}, but the requested object {what} (*{go_type}{suffix})",
    )


def _package(rt: ResourceType) -> str:
    return rt.group.split(".")[0] if rt.group else "core"


def convert_object(obj: JSON, api_version: str) -> JSON:
    return {"kind": ITEM, "apiVersion": api_version, "metadata": obj.get("metadata") or {}}


def convert_list(body: bytes, api_version: str) -> bytes:
    """A List's encoding as ``PartialObjectMetadataList`` (its list metadata kept)."""
    listed = codec.loads(body)
    items = [convert_object(item, api_version) for item in listed.get("items") or []]
    meta = listed.get("metadata") or {}
    return dumps({"kind": LIST, "apiVersion": api_version, "metadata": meta, "items": items})


def convert_events(write: Callable[[bytes], None], api_version: str) -> Callable[[bytes], None]:
    """Wrap a watch stream's ``write``: every event's object but an ERROR's becomes
    ``PartialObjectMetadata``."""

    def convert(chunk: bytes) -> None:
        lines = []
        for line in chunk.splitlines():
            event = codec.loads(line)
            if event.get("type") != "ERROR":
                event = {
                    "type": event["type"],
                    "object": convert_object(event["object"], api_version),
                }
            lines.append(dumps(event) + b"\n")
        write(b"".join(lines))

    return convert
