"""In-process controllers: garbage collection, namespace finalization, CRD establishment.

They play kube-controller-manager's and apiextensions' roles on one thread owned by the
emulator. The store calls ``observe`` under its lock for every event; work happens later on the
controller thread, outside the lock, through the same write paths as API requests.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from cloudcoil_sync.testing._internal.crud import Objects, Req, now_iso
from cloudcoil_sync.testing._internal.deletion import CRD_CLEANUP, set_condition
from cloudcoil_sync.testing._internal.resources import Registry, ResourceType, crd_types
from cloudcoil_sync.testing._internal.status import ApiError
from cloudcoil_sync.testing._internal.store import Store, WatchEvent

__all__ = ["Controllers"]

JSON = dict[str, Any]
Ref = tuple[tuple[str, str], str, str]  # (storage key, namespace, name)
_RETRIES = 5
CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
NS_KEY = ("", "namespaces")


class Controllers:
    def __init__(self, store: Store, objects: Objects, registry: Registry) -> None:
        self.store = store
        self.objects = objects
        self.registry = registry
        self._queue: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        self._children: dict[str, set[Ref]] = {}  # owner uid → dependents
        self._owners: dict[Ref, set[str]] = {}  # dependent → owner uids
        self._uids: dict[str, Ref] = {}
        self._thread: threading.Thread | None = None
        self.crd_hook: Callable[[JSON], None] | None = None
        # Storage keys of the custom resources of CRDs being deleted -> the CRD's name.
        self._terminating: dict[tuple[str, str], str] = {}
        store.listeners.append(self.observe)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="emulator-controllers", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        retries: dict[tuple[str, str], int] = {}
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                what, arg = item
                ident = (what, repr(arg))
                try:
                    getattr(self, "_do_" + what)(arg)
                    retries.pop(ident, None)
                except ApiError as err:
                    # The object changed under us: try again (a few times; later events also
                    # bring the work back).
                    retries[ident] = retries.get(ident, 0) + 1
                    if err.code == 409 and retries[ident] <= _RETRIES:
                        self._queue.put(item)
                    else:
                        retries.pop(ident, None)
            finally:
                self._queue.task_done()

    def idle(self, timeout: float) -> bool:
        """Wait until every queued piece of work is done (GC, namespaces, CRDs)."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._queue.all_tasks_done.wait(left)
        return True

    # -- observation (under the store lock) ---------------------------------------------------
    def observe(self, ev: WatchEvent) -> None:
        meta = ev.obj["metadata"]
        ref: Ref = (ev.key, meta.get("namespace", ""), meta["name"])
        uid = meta.get("uid", "")
        if ev.type == "DELETED":
            self._uids.pop(uid, None)
            for owner in self._owners.pop(ref, set()):
                children = self._children.get(owner)
                if children is not None:
                    children.discard(ref)
                    if not children:
                        del self._children[owner]
                if owner in self._uids:
                    self._queue.put(("foreground", self._uids[owner]))
            if uid in self._children:
                self._queue.put(("owner_gone", uid))
            if ref[1]:
                self._queue.put(("namespace", ref[1]))
            if ev.key == CRD_KEY:
                self._terminating.pop(_served_key(ev.obj), None)
                self._queue.put(("crd_removed", ev.obj))
            elif ev.key in self._terminating:  # one custom resource fewer to wait for
                self._queue.put(("crd_cleanup", self._terminating[ev.key]))
            return
        self._uids[uid] = ref
        owners = {o.get("uid", "") for o in meta.get("ownerReferences") or []}
        for gone in self._owners.get(ref, set()) - owners:
            self._children.get(gone, set()).discard(ref)
        if owners:
            self._owners[ref] = owners
            for owner in owners:
                self._children.setdefault(owner, set()).add(ref)
                if owner not in self._uids:
                    self._queue.put(("owner_gone", owner))
        else:
            self._owners.pop(ref, None)
        if meta.get("deletionTimestamp"):
            finalizers = meta.get("finalizers") or []
            if "foregroundDeletion" in finalizers:
                self._queue.put(("foreground", ref))
            if "orphan" in finalizers:
                self._queue.put(("orphan", ref))
            if ev.key == NS_KEY:
                self._queue.put(("namespace", meta["name"]))
            if ev.key == CRD_KEY and CRD_CLEANUP in finalizers:
                self._terminating[_served_key(ev.obj)] = meta["name"]
                self._queue.put(("crd_cleanup", meta["name"]))
        if ev.key == CRD_KEY:
            if ev.type == "ADDED":
                # Served as soon as the create returns (kube: a few ms later), so clients that
                # skip waiting for Established do not race; the conditions follow.
                self.registry.add_crd(ev.obj)
            self._queue.put(("establish" if ev.type == "ADDED" else "crd_changed", meta["name"]))

    # -- work ------------------------------------------------------------------------------
    def _type(self, key: tuple[str, str]) -> ResourceType | None:
        for rt in self.registry.all():
            if rt.key == key and not (
                rt.storage != ("", "") and rt.storage != (rt.group, rt.plural)
            ):
                return rt
        return None

    def _req(self, ref: Ref, **query: str) -> Req | None:
        rt = self._type(ref[0])
        if rt is None:
            return None
        return Req(rt, ref[1], ref[2], query=dict(query), user_agent="kube-controller-manager")

    def _delete(self, ref: Ref, policy: str = "Background") -> None:
        req = self._req(ref, propagationPolicy=policy)
        if req is not None and self.store.get(ref[0], ref[1], ref[2]) is not None:
            self.objects.delete(req)

    def _drop_finalizer(self, ref: Ref, finalizer: str) -> None:
        req = self._req(ref)
        old = self.store.get(*ref)
        if req is None or old is None or finalizer not in (old["metadata"].get("finalizers") or []):
            return
        new = copy.deepcopy(old)
        new["metadata"]["finalizers"] = [f for f in new["metadata"]["finalizers"] if f != finalizer]
        self.objects.update(req, new, old)

    def _do_owner_gone(self, uid: str) -> None:
        with self.store.lock:
            if uid in self._uids:
                return
            children = list(self._children.get(uid, set()))
        for child in children:
            obj = self.store.get(*child)
            if obj is None:
                continue
            refs = obj["metadata"].get("ownerReferences") or []
            alive = [r for r in refs if r.get("uid") in self._uids]
            if not alive:
                self._delete(child)
            elif len(alive) != len(refs):
                req = self._req(child)
                if req is not None:
                    new = copy.deepcopy(obj)
                    new["metadata"]["ownerReferences"] = alive
                    self.objects.update(req, new, obj)

    def _do_foreground(self, ref: Ref) -> None:
        owner = self.store.get(*ref)
        if owner is None or "foregroundDeletion" not in (owner["metadata"].get("finalizers") or []):
            return
        uid = owner["metadata"]["uid"]
        with self.store.lock:
            children = list(self._children.get(uid, set()))
        for child in children:
            obj = self.store.get(*child)
            if obj is not None and not obj["metadata"].get("deletionTimestamp"):
                self._delete(child, "Foreground")
        with self.store.lock:
            remaining = self._children.get(uid)
        if not remaining:
            self._drop_finalizer(ref, "foregroundDeletion")

    def _do_orphan(self, ref: Ref) -> None:
        owner = self.store.get(*ref)
        if owner is None:
            return
        uid = owner["metadata"]["uid"]
        with self.store.lock:
            children = list(self._children.get(uid, set()))
        for child in children:
            obj = self.store.get(*child)
            req = self._req(child)
            if obj is None or req is None:
                continue
            new = copy.deepcopy(obj)
            refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
            new["metadata"]["ownerReferences"] = refs
            if not refs:
                del new["metadata"]["ownerReferences"]
            self.objects.update(req, new, obj)
        self._drop_finalizer(ref, "orphan")

    def _do_namespace(self, name: str) -> None:
        ns = self.store.get(NS_KEY, "", name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        left = 0
        for key in self.store.storage_keys():
            entries, _ = self.store.scan(key, name)
            for entry in entries:
                left += 1
                meta = entry.obj["metadata"]
                if not meta.get("deletionTimestamp"):
                    self._delete((key, name, meta["name"]))
        if left == 0 and not ns["metadata"].get("finalizers"):
            with self.store.lock:
                current = self.store.get(NS_KEY, "", name)
                if current is ns:
                    self.store.remove(NS_KEY, ns)

    def _do_establish(self, name: str) -> None:
        crd = self.store.get(CRD_KEY, "", name)
        if crd is None:
            return
        conditions = (crd.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            return  # restored from a saved state: already established and served
        now = now_iso()
        new = copy.deepcopy(crd)
        names = dict(new["spec"].get("names") or {})
        names.setdefault("singular", names.get("kind", "").lower())
        names.setdefault("listKind", names.get("kind", "") + "List")
        new["status"] = {
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "lastTransitionTime": now,
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                },
                {
                    "type": "Established",
                    "status": "True",
                    "lastTransitionTime": now,
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                },
            ],
            "acceptedNames": names,
            "storedVersions": crd.get("status", {}).get("storedVersions") or [],
        }
        self.registry.add_crd(crd)
        crd_rt = self._type(CRD_KEY)
        if crd_rt is not None:
            req = Req(crd_rt, "", name, "status", user_agent="kube-apiserver")
            self.objects.update(req, new, crd)

    def _do_crd_changed(self, name: str) -> None:
        """Serve versions added to an established CRD (its status is left alone)."""
        crd = self.store.get(CRD_KEY, "", name)
        conditions = ((crd or {}).get("status") or {}).get("conditions") or []
        if crd is None or not any(c.get("type") == "Established" for c in conditions):
            return
        self.registry.add_crd(crd)
        storage = next((rt for rt in crd_types(crd) if rt.version == _storage_version(crd)), None)
        if storage is not None:  # new schema defaults show on stored objects (read defaulting)
            custom = self.objects.custom
            version = storage.api_version  # objects stored in another version keep theirs

            def default(obj: JSON) -> None:
                if obj.get("apiVersion") == version:
                    custom.default(storage, obj)

            self.store.default_in_place(storage.key, default)

    def _do_crd_cleanup(self, name: str) -> None:
        """A CRD being deleted: delete its custom resources (their finalizers still hold
        them), and remove its finalizer once none is left, as apiextensions' finalizer does."""
        crd = self.store.get(CRD_KEY, "", name)
        if crd is None or CRD_CLEANUP not in (crd["metadata"].get("finalizers") or []):
            return
        key = _served_key(crd)
        entries, _ = self.store.scan(key, None)
        for entry in entries:
            meta = entry.obj["metadata"]
            if not meta.get("deletionTimestamp"):
                self._delete((key, meta.get("namespace", ""), meta["name"]))
        left = len(self.store.scan(key, None)[0])
        crd_rt = self._type(CRD_KEY)
        if crd_rt is None:
            return
        new = copy.deepcopy(crd)
        if left:
            message = f"could not confirm zero CustomResources remaining: {left} left"
            if set_condition(new, "Terminating", "True", "InstanceDeletionCheck", message):
                self.objects.update(Req(crd_rt, "", name, "status"), new, crd)
            return
        set_condition(
            new, "Terminating", "False", "InstanceDeletionCompleted", "removed all instances"
        )
        crd = self.objects.update(Req(crd_rt, "", name, "status"), new, crd)
        stored = self.store.get(CRD_KEY, "", name)
        if stored is not None:
            done = copy.deepcopy(stored)
            finalizers = done["metadata"].get("finalizers") or []
            done["metadata"]["finalizers"] = [f for f in finalizers if f != CRD_CLEANUP]
            self.objects.update(Req(crd_rt, "", name), done, stored)

    def _do_crd_removed(self, crd: JSON) -> None:
        spec = crd.get("spec") or {}
        group, plural = spec.get("group", ""), (spec.get("names") or {}).get("plural", "")
        self.registry.remove_group_plural(group, plural)
        self.store.drop_key((group, plural))


def _served_key(crd: JSON) -> tuple[str, str]:
    """The storage key of a CRD's custom resources: (group, plural)."""
    spec = crd.get("spec") or {}
    return spec.get("group", ""), (spec.get("names") or {}).get("plural", "")


def _storage_version(crd: JSON) -> str:
    versions = (crd.get("spec") or {}).get("versions") or []
    return next((v["name"] for v in versions if v.get("storage")), "")
