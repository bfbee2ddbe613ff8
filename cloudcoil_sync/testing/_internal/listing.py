"""Lists: selectors, limit/continue pagination and fast encoding of the items."""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.request import Req
from cloudcoil_sync.testing._internal.selectors import field_selector, label_selector
from cloudcoil_sync.testing._internal.store import Entry, Store, dumps
from cloudcoil_sync.testing._internal.validation import from_storage

__all__ = ["list_body"]

JSON = dict[str, Any]


def list_body(store: Store, req: Req) -> bytes:
    rt = req.rt
    labels = label_selector(req.query.get("labelSelector"))
    fields = field_selector(req.query.get("fieldSelector"))
    filtered = bool(req.query.get("labelSelector") or req.query.get("fieldSelector"))
    start = ""
    token = req.query.get("continue")
    if token:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            rv, start = int(decoded["rv"]), str(decoded["start"])
        except (ValueError, KeyError, TypeError) as exc:
            raise st.bad_request(f"continue key is not valid: {exc}") from exc
    first_rv = rv if token else None
    with store.lock:  # a consistent snapshot; encoding happens after
        entries, count, rv = store.scan_lazily(rt.key, req.namespace or None, start)
        rv = first_rv if first_rv is not None else rv
        limit = int(req.query.get("limit") or 0)
        if filtered:
            chosen: list[Entry] = []
            more = False
            for entry in entries:
                if labels(entry.obj) and fields(entry.obj):
                    if limit and len(chosen) >= limit:
                        more = True  # kube does not count the rest when filtering
                        break
                    chosen.append(entry)
            remaining = 0
        else:
            chosen = list(itertools.islice(entries, limit) if limit else entries)
            remaining = count - len(chosen)
            more = remaining > 0
    list_meta: JSON = {"resourceVersion": str(rv)}
    if more:
        last = chosen[-1].obj["metadata"]
        key = last["name"] if req.namespace else f"{last.get('namespace', '')}/{last['name']}"
        next_start = key + "\x00"
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": next_start})
        list_meta["continue"] = base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")
        if not filtered:
            list_meta["remainingItemCount"] = remaining
    if rt.builtin and rt.storage == ("", ""):
        items = b",".join(e.item_raw for e in chosen)
    elif rt.builtin:
        items = b",".join(dumps(_strip_type(from_storage(rt, e.obj))) for e in chosen)
    else:
        items = b",".join(
            e.raw if e.obj.get("apiVersion") == rt.api_version else dumps(from_storage(rt, e.obj))
            for e in chosen
        )
    head = dumps({"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": list_meta})
    return head[:-1] + b',"items":[' + items + b"]}"


def _strip_type(obj: JSON) -> JSON:
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
