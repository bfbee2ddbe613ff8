"""Deletion: preconditions, finalizers, propagation policies, namespaces, collections."""

from __future__ import annotations

import copy
from typing import Any

from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.request import Req, now_iso
from cloudcoil_sync.testing._internal.selectors import field_selector, label_selector
from cloudcoil_sync.testing._internal.store import Store
from cloudcoil_sync.testing._internal.validation import from_storage

__all__ = ["CRD_CLEANUP", "CRD_KEY", "delete", "delete_collection", "set_condition"]

JSON = dict[str, Any]
CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
# kube-apiserver puts it on a CRD at its deletion; removed once its custom resources are gone.
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"


def delete(store: Store, req: Req) -> tuple[int, JSON]:
    rt = req.rt
    opts = req.body if isinstance(req.body, dict) else {}
    policy = req.query.get("propagationPolicy") or opts.get("propagationPolicy") or ""
    if opts.get("dryRun") == ["All"]:
        req.query["dryRun"] = "All"
    pre = opts.get("preconditions") or {}
    with store.lock:
        old = store.get(rt.key, req.namespace, req.name)
        if old is None:
            raise st.not_found(rt.plural, rt.group, req.name)
        meta = old["metadata"]
        _check_preconditions(req, meta, pre)
        finalizers = list(meta.get("finalizers") or [])
        if policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        elif policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        crd = rt.key == CRD_KEY and not meta.get("deletionTimestamp")
        if crd and CRD_CLEANUP not in finalizers:
            finalizers.append(CRD_CLEANUP)
        if rt.plural == "namespaces" and not rt.group:
            return 200, _terminate_namespace(store, req, old)
        if not finalizers:
            if req.dry_run:
                return 200, st.success(rt.plural, rt.group, req.name, meta["uid"])
            store.remove(rt.key, old)
            return 200, st.success(rt.plural, rt.group, req.name, meta["uid"])
        if meta.get("deletionTimestamp") and finalizers == meta.get("finalizers"):
            return 200, from_storage(rt, old)
        new = copy.deepcopy(old)
        new_meta = new["metadata"]
        new_meta["finalizers"] = finalizers
        new_meta.setdefault("deletionTimestamp", now_iso())
        new_meta.setdefault("deletionGracePeriodSeconds", 0)
        if crd:
            set_condition(
                new,
                "Terminating",
                "True",
                "InstanceDeletionPending",
                "CustomResourceDefinition marked for deletion; CustomResource deletion will "
                "begin soon",
            )
        if req.dry_run:
            return 200, from_storage(rt, new)
        return 200, from_storage(rt, store.put(rt.key, new, old))


def _check_preconditions(req: Req, meta: JSON, pre: JSON) -> None:
    """kube-apiserver's 409 when a delete's preconditions (uid, resourceVersion) do not hold."""
    rt = req.rt
    for what, label, hint in (
        ("uid", "UID", "deleted and then recreated"),
        ("resourceVersion", "ResourceVersion", "modified"),
    ):
        if pre.get(what) and pre[what] != meta.get(what):
            detail = {"name": req.name}
            if rt.group:
                detail["group"] = rt.group
            detail["kind"] = rt.kind
            raise st.ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {rt.kind} "{req.name}": the {label} '
                f"in the precondition ({pre[what]}) does not match the {label} in record "
                f"({meta.get(what)}). The object might have been {hint}",
                detail,
            )


def set_condition(obj: JSON, kind: str, status: str, reason: str, message: str) -> bool:
    """Set a status condition of ``obj`` (its transition time when the status changes);
    whether anything changed."""
    current = obj.setdefault("status", {})
    # A CRD is served before its establishing controller writes conditions (null until then).
    conditions = current["conditions"] = current.get("conditions") or []
    for condition in conditions:
        if condition.get("type") == kind:
            if (condition.get("status"), condition.get("reason"), condition.get("message")) == (
                status,
                reason,
                message,
            ):
                return False
            if condition.get("status") != status:
                condition["lastTransitionTime"] = now_iso()
            condition.update(status=status, reason=reason, message=message)
            return True
    conditions.append(
        {
            "type": kind,
            "status": status,
            "lastTransitionTime": now_iso(),
            "reason": reason,
            "message": message,
        }
    )
    return True


def _terminate_namespace(store: Store, req: Req, old: JSON) -> JSON:
    if old["metadata"].get("deletionTimestamp"):
        return from_storage(req.rt, old)
    new = copy.deepcopy(old)
    new["metadata"]["deletionTimestamp"] = now_iso()
    new.setdefault("status", {})["phase"] = "Terminating"
    if req.dry_run:
        return new
    return store.put(req.rt.key, new, old)


def delete_collection(store: Store, req: Req) -> JSON:
    labels = label_selector(req.query.get("labelSelector"))
    fields = field_selector(req.query.get("fieldSelector"))
    entries, _ = store.scan(req.rt.key, req.namespace or None)
    for entry in entries:
        obj = entry.obj
        if labels(obj) and fields(obj):
            meta = obj["metadata"]
            sub = Req(req.rt, meta.get("namespace", ""), meta["name"], query=dict(req.query))
            try:
                delete(store, sub)
            except st.ApiError:
                continue
    head = {"kind": req.rt.list_kind, "apiVersion": req.rt.api_version}
    return {
        **head,
        "metadata": {"resourceVersion": str(store.resource_version)},
        "items": [],
    }
