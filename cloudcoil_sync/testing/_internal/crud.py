"""Object semantics: create, read, list, replace, patch, apply and delete on the store."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from typing import Any

from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.conversion import note_storage_version, stored_version_causes
from cloudcoil_sync.testing._internal.custom import CustomResources, invalid
from cloudcoil_sync.testing._internal.deletion import delete, delete_collection
from cloudcoil_sync.testing._internal.hooks import ObjectAdmission
from cloudcoil_sync.testing._internal.listing import list_body
from cloudcoil_sync.testing._internal.managed import Writer, apply_patch, record_update
from cloudcoil_sync.testing._internal.patch import apply_json_patch, apply_merge_patch
from cloudcoil_sync.testing._internal.request import Req, now_iso
from cloudcoil_sync.testing._internal.resources import ResourceType
from cloudcoil_sync.testing._internal.store import Store
from cloudcoil_sync.testing._internal.strategic import apply_strategic_merge_patch
from cloudcoil_sync.testing._internal.validation import (
    apply_defaults,
    check_kind,
    from_storage,
    prepare_for_create,
    to_storage,
    validate,
    write_warnings,
)

__all__ = ["Objects", "Req", "now_iso"]

JSON = dict[str, Any]
_RETRIES = 16
_GEN_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    "application/strategic-merge-patch+json",
)


def _spec_part(obj: JSON, status_split: bool) -> JSON:
    skip = {"metadata", "status"} if status_split else {"metadata"}
    return {k: v for k, v in obj.items() if k not in skip}


class Objects:
    """The write and read paths shared by HTTP handlers and the in-process controllers."""

    def __init__(self, store: Store, require_namespaces: bool = True) -> None:
        self.store = store
        self.require_namespaces = require_namespaces
        self.admission: ObjectAdmission | None = None  # webhook calls (admission.py)
        self.custom = CustomResources(store)  # CRD schemas: pruning, defaults, validation

    # -- reads -------------------------------------------------------------------------------
    def get(self, req: Req) -> JSON:
        obj = self.store.get(req.rt.key, req.namespace, req.name)
        if obj is None:
            raise st.not_found(req.rt.plural, req.rt.group, req.name)
        return from_storage(req.rt, obj)

    def list_body(self, req: Req) -> bytes:
        return list_body(self.store, req)

    # -- writes ------------------------------------------------------------------------------
    def _check_namespace(self, req: Req) -> None:
        if not req.rt.namespaced or not self.require_namespaces:
            return
        ns = self.store.get(("", "namespaces"), "", req.namespace)
        if ns is None:
            raise st.not_found("namespaces", "", req.namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise st.ApiError(
                403,
                "Forbidden",
                f'{req.rt.plural} "{req.name}" is forbidden: unable to create new content in '
                f"namespace {req.namespace} because it is being terminated",
                {"name": req.name, "kind": req.rt.plural},
            )

    def create(
        self, req: Req, body: JSON | None = None, managed: list[JSON] | None = None
    ) -> tuple[int, JSON]:
        rt = req.rt
        self._schema(req)
        # The body is owned by this call (freshly decoded or built by the caller).
        obj = body if body is not None else req.body
        if not isinstance(obj, dict):
            raise st.bad_request("the body of the request must be a JSON object")
        check_kind(rt, obj)
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and body_ns != req.namespace:
                raise st.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            meta["namespace"] = req.namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(random.choices(_GEN_CHARS, k=5))
            meta["name"] = meta["generateName"] + suffix
        req.name = meta.get("name", "")
        obj = {"kind": rt.kind, "apiVersion": rt.api_version, **_untyped(obj)}
        self.custom.check_unknown(req, obj, "create")
        self.custom.normalise(rt, obj)
        if rt.status_subresource:
            obj.pop("status", None)
        apply_defaults(rt, obj, creating=True)
        obj = self._mutated("CREATE", req, obj, None)
        self._validate(req, obj)
        meta = obj["metadata"]
        now = now_iso()
        given = meta.get("resourceVersion") if managed is None else None  # a POST's
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now
        if rt.has_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if managed is None:
            managed = record_update(None, obj, req.writer(now), rt.status_subresource, [])
        meta["managedFields"] = managed
        if not meta["managedFields"]:
            del meta["managedFields"]
        prepare_for_create(rt, obj)
        if self.admission is not None:
            self.admission.validate("CREATE", req, obj, None)
        return 201, self._store_new(req, obj, given)

    def _store_new(self, req: Req, obj: JSON, given: Any) -> JSON:
        """Store an admitted create; ``given`` is the resourceVersion a POST's body carried
        (None for an apply's create), which storage refuses as kube-apiserver's does."""
        rt = req.rt
        with self.store.lock:
            self._check_namespace(req)
            if not req.dry_run and _version_set(given):  # before storage's existence check
                raise st.ApiError(
                    500, "", "resourceVersion should not be set on objects to be created"
                )
            if self.store.get(rt.key, req.namespace, req.name) is not None:
                raise st.already_exists(rt.plural, rt.group, req.name)
            if req.dry_run:  # a dry run never reaches that check; it echoes the version
                if given:
                    obj["metadata"]["resourceVersion"] = given
                return obj
            stored = self.store.put(rt.key, to_storage(rt, obj))
        return from_storage(rt, stored)

    def update(self, req: Req, new: Any, old: JSON, apply_w: Writer | None = None) -> JSON:
        """Write ``new`` (the client's intended object) over stored ``old`` (storage form)."""
        rt = req.rt
        self._schema(req)
        view_old = from_storage(rt, old)
        intended = _intended(req, new, old, view_old)
        self.custom.normalise(rt, intended)
        apply_defaults(rt, intended, creating=False)
        intended = self._mutated("UPDATE", req, intended, view_old)
        self._validate(req, intended, view_old)
        _check_finalizers(rt, view_old["metadata"], intended["metadata"])
        _record_update(req, intended, view_old, apply_w)
        if self.admission is not None:
            self.admission.validate("UPDATE", req, intended, view_old)
        unchanged = intended == view_old or _same_but_managed(intended, view_old)
        if unchanged and not _restore(rt, old):
            return view_old
        return self._store_update(req, intended, old)

    def _store_update(self, req: Req, new: JSON, old: JSON) -> JSON:
        """Store an admitted update (a finalized deletion removes the object instead)."""
        rt, meta = req.rt, new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            if not req.dry_run:
                with self.store.lock:
                    self._check_current(req, old)
                    self.store.remove(rt.key, to_storage(rt, new))
            return new
        if req.dry_run:
            return new
        with self.store.lock:
            self._check_current(req, old)
            stored = self.store.put(rt.key, to_storage(rt, new), old)
        return from_storage(rt, stored)

    def _mutated(self, operation: str, req: Req, obj: JSON, old: JSON | None) -> JSON:
        """The object after mutating admission; what webhooks changed is validated again."""
        if self.admission is None:
            return obj
        changed = self.admission.mutate(operation, req, obj, old)
        if changed is not obj:
            self.custom.normalise(req.rt, changed)
            self._validate(req, changed, old)
        return changed

    def _schema(self, req: Req) -> None:
        custom = self.custom.lookup(req.rt)
        if custom is not None:
            req.schema = custom.schema

    def _validate(self, req: Req, obj: JSON, old: JSON | None = None) -> None:
        if self.custom.lookup(req.rt) is not None:  # metadata, schema, list types, CEL
            self.custom.validate(req, obj, old)
            return
        validate(req.rt, obj, req.rt.group)
        for text in write_warnings(req.rt, obj):
            req.warn(text)
        if req.rt.kind == "CustomResourceDefinition" and req.subresource != "status":
            if old is not None:
                note_storage_version(obj)
            causes = self.custom.crd_default_causes(obj) + self.custom.crd_causes(obj)
            causes += stored_version_causes(obj)
            if causes:
                name = obj["metadata"].get("name", "")
                raise invalid(req.rt.kind, req.rt.group, name, causes)

    def _check_current(self, req: Req, old: JSON) -> None:
        current = self.store.get(req.rt.key, req.namespace, req.name)
        if current is None:
            raise st.not_found(req.rt.plural, req.rt.group, req.name)
        if current is not old:
            raise StaleRead(req.rt.plural, req.rt.group, req.name)

    def _retrying(self, req: Req, once: Callable[[Req], tuple[int, JSON]]) -> tuple[int, JSON]:
        """Redo a write whose read went stale (kube-apiserver's GuaranteedUpdate loop)."""
        for _ in range(_RETRIES):
            try:
                return once(req)
            except StaleRead:
                continue
        return once(req)

    def replace(self, req: Req) -> tuple[int, JSON]:
        return self._retrying(req, self._replace)

    def patch(self, req: Req) -> tuple[int, JSON]:
        return self._retrying(req, self._patch)

    def _replace(self, req: Req) -> tuple[int, JSON]:
        old = self.store.get(req.rt.key, req.namespace, req.name)
        if old is None:
            raise st.not_found(req.rt.plural, req.rt.group, req.name)
        body = req.body if isinstance(req.body, dict) else {}
        self.custom.check_unknown(req, body, "update")
        if (body.get("metadata") or {}).get("name", req.name) != req.name:
            raise st.bad_request("the name of the object does not match the name on the URL")
        if not req.rt.builtin and not (body.get("metadata") or {}).get("resourceVersion"):
            raise _unconditional(req)
        return 200, self.update(req, body, old)

    def _patch(self, req: Req) -> tuple[int, JSON]:
        rt = req.rt
        ctype = req.content_type.split(";")[0].strip()
        if ctype == "application/apply-patch+yaml":
            return self._apply(req)
        old = self.store.get(rt.key, req.namespace, req.name)
        if old is None:
            raise st.not_found(rt.plural, rt.group, req.name)
        view = from_storage(rt, old)
        if ctype == "application/json-patch+json":
            new = apply_json_patch(view, req.body)
        elif ctype == "application/merge-patch+json":
            if not isinstance(req.body, dict):
                raise st.bad_request("a merge patch must be a JSON object")
            new = apply_merge_patch(view, req.body)
        elif ctype == "application/strategic-merge-patch+json" and rt.builtin:
            new = apply_strategic_merge_patch(view, req.body)
        else:  # custom resources take no strategic merge patch, as in kube-apiserver
            raise st.ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join(_types(rt))} (got {ctype})",
            )
        self.custom.check_unknown(req, new, "patch")
        return 200, self.update(req, new, old)

    def _apply(self, req: Req) -> tuple[int, JSON]:
        rt = req.rt
        if not req.query.get("fieldManager"):
            raise st.ApiError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
                "required for apply patch",
                {
                    "group": "meta.k8s.io",
                    "kind": "PatchOptions",
                    "causes": [
                        {
                            "reason": "FieldValueRequired",
                            "message": "Required value: is required for apply patch",
                            "field": "fieldManager",
                        }
                    ],
                },
            )
        applied = req.body
        if not isinstance(applied, dict):
            raise st.bad_request("an apply patch must be an object")
        check_kind(rt, applied)
        self.custom.check_apply(req, applied)
        self._schema(req)
        force = req.query.get("force") in ("true", "1")
        w = req.writer(now_iso())
        old = self.store.get(rt.key, req.namespace, req.name)
        if old is None:
            merged = apply_patch(None, applied, w, force, rt.status_subresource)
            merged.setdefault("metadata", {})["name"] = req.name
            managed = merged["metadata"].pop("managedFields")
            try:
                return self.create(req, merged, managed)
            except st.ApiError as err:
                if err.reason == "AlreadyExists":
                    raise StaleRead(rt.plural, rt.group, req.name) from err
                raise
        view = from_storage(rt, old)
        merged = apply_patch(view, applied, w, force, rt.status_subresource)
        return 200, self.update(req, merged, old, apply_w=w)

    def delete(self, req: Req) -> tuple[int, JSON]:
        return delete(self.store, req)

    def delete_collection(self, req: Req) -> JSON:
        return delete_collection(self.store, req)


def _types(rt: ResourceType) -> tuple[str, ...]:
    smp = "application/strategic-merge-patch+json"
    return _PATCH_TYPES if rt.builtin else tuple(t for t in _PATCH_TYPES if t != smp)


def _check_finalizers(rt: ResourceType, old_meta: JSON, meta: JSON) -> None:
    """No finalizer may be added once deletion started (kube-apiserver's ObjectMeta rule)."""
    if not old_meta.get("deletionTimestamp"):
        return
    before = old_meta.get("finalizers") or []
    added = [f for f in meta.get("finalizers") or [] if f not in before]
    if added:
        found = ", ".join(json.dumps(f) for f in added)
        message = (
            "Forbidden: no new finalizers can be added if the object is being deleted, "
            f"found new finalizers []string{{{found}}}"
        )
        group = "" if rt.kind == "Event" else rt.group
        name = meta.get("name", "")
        raise st.invalid(
            rt.kind, group, name, [("FieldValueForbidden", "metadata.finalizers", message)]
        )


def _unconditional(req: Req) -> st.ApiError:
    """Custom resources take no update without a resourceVersion (kube-apiserver's rule)."""
    plural, group, name = req.rt.plural, req.rt.group, req.name
    message = "Invalid value: 0x0: must be specified for an update"
    cause = {"reason": "FieldValueInvalid", "message": message, "field": "metadata.resourceVersion"}
    details = {"name": name, "group": group, "kind": plural, "causes": [cause]}
    text = f'{plural}.{group} "{name}" is invalid: metadata.resourceVersion: {message}'
    return st.ApiError(422, "Invalid", text, details)


def _untyped(obj: JSON) -> JSON:
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


class StaleRead(st.ApiError):
    """The object changed between read and write; retried internally, else a 409."""

    def __init__(self, plural: str, group: str, name: str) -> None:
        err = st.conflict(plural, group, name)
        super().__init__(err.code, err.reason, err.message, err.details)


def _same_but_managed(a: JSON, b: JSON) -> bool:
    """Equal apart from managedFields timestamps (a no-op write keeps the stored object)."""
    ma, mb = dict(a.get("metadata") or {}), dict(b.get("metadata") or {})
    fa = [{k: v for k, v in e.items() if k != "time"} for e in ma.pop("managedFields", []) or []]
    fb = [{k: v for k, v in e.items() if k != "time"} for e in mb.pop("managedFields", []) or []]
    return fa == fb and {**a, "metadata": ma} == {**b, "metadata": mb}


def _restore(rt: ResourceType, stored: JSON) -> bool:
    """An unchanged update still rewrites an object stored in another version than the
    storage version (what storage migration relies on)."""
    converter = rt.converter
    return converter is not None and stored.get("apiVersion") != converter.storage_api_version


def _intended(req: Req, new: Any, old: JSON, view_old: JSON) -> JSON:
    """The object an update asks for, with the fields the server keeps carried over.

    Nested values may be shared with the stored object: only top level and metadata are
    rebuilt here, and defaulting only fills fields a stored object already has.
    """
    rt = req.rt
    if not isinstance(new, dict):
        raise st.bad_request("the body of the request must be a JSON object")
    check_kind(rt, new)
    meta = new.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise st.bad_request("metadata must be an object")
    intended: JSON = {
        "kind": rt.kind,
        "apiVersion": rt.api_version,
        **_untyped(new),
        "metadata": dict(meta),
    }
    meta = intended["metadata"]
    sent_rv = meta.get("resourceVersion")
    if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
        raise st.conflict(rt.plural, rt.group, req.name)
    if meta.get("uid") and meta["uid"] != old["metadata"]["uid"]:
        raise st.conflict(rt.plural, rt.group, req.name)
    old_meta = view_old["metadata"]
    split = rt.status_subresource
    if split and req.subresource == "status":
        intended = {**view_old, "status": intended.get("status")}
        if intended["status"] is None:
            del intended["status"]
        sent_managed = meta.get("managedFields")  # a status apply's new ownership
        meta = intended["metadata"] = dict(old_meta)
        if sent_managed is not None:
            meta["managedFields"] = sent_managed
    elif split:
        intended.pop("status", None)
        if "status" in view_old:
            intended["status"] = view_old["status"]
    intended["apiVersion"], intended["kind"] = rt.api_version, rt.kind
    for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp"):
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    if "deletionGracePeriodSeconds" in old_meta:
        meta["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"]
    meta["resourceVersion"] = old_meta["resourceVersion"]
    return intended


def _record_update(req: Req, new: JSON, view_old: JSON, apply_w: Writer | None) -> None:
    """Bump the generation on a spec change and record the writer's managedFields."""
    rt, meta, old_meta = req.rt, new["metadata"], view_old["metadata"]
    split = rt.status_subresource
    if rt.has_generation:
        generation = int(old_meta.get("generation", 1))
        if _spec_part(new, split) != _spec_part(view_old, split):
            generation += 1
        meta["generation"] = generation
    if apply_w is None:
        base = meta.get("managedFields")
        if base is not None and base == old_meta.get("managedFields"):
            base = None
        meta["managedFields"] = record_update(
            view_old, new, req.writer(now_iso()), split, base if base else None
        )
    if not meta.get("managedFields"):
        meta.pop("managedFields", None)


def _version_set(value: Any) -> bool:
    """kube-apiserver's storage refuses a create carrying a resourceVersion it can parse as a
    non-zero integer (500); "", "0" and unparsable ones pass."""
    return isinstance(value, str) and value.isascii() and value.isdigit() and int(value) != 0
