"""Deployment-status simulator: plays the Deployment controller so rollouts can complete.

Enabled with ``Emulator(deployments=...)``:

- ``"available"``: every new Deployment generation becomes available at once;
- a number of seconds: the generation is first reported progressing (replicas updated, none
  available) and becomes available after that delay;
- ``"never"``: generations are observed and reported progressing but never available, so an
  installer's rollout wait runs into its timeout.

The mode can be changed later through ``emulator.rollouts.mode``; it applies to generations
observed afterwards. Simplifications: no ReplicaSets or Pods exist, ``readyReplicas`` equals
``availableReplicas``, and the ``deployment.kubernetes.io/revision`` annotation is not written.
Status is written through the ``status`` subresource as ``kube-controller-manager``, from one
thread owned by the simulator (started and joined by the emulator).
"""

from __future__ import annotations

import contextlib
import copy
import heapq
import queue
import threading
import time
from typing import Any, Literal

from cloudcoil_sync.testing._internal.crud import Objects, Req, now_iso
from cloudcoil_sync.testing._internal.resources import Registry
from cloudcoil_sync.testing._internal.status import ApiError
from cloudcoil_sync.testing._internal.store import Store, WatchEvent

__all__ = ["DEPLOYMENT_KEY", "RolloutMode", "RolloutSimulator"]

JSON = dict[str, Any]
RolloutMode = Literal["available", "never"] | float
DEPLOYMENT_KEY = ("apps", "deployments")
Target = tuple[str, str, str, int]  # namespace, name, uid, generation
_WRITE_ATTEMPTS = 5


def _check_mode(mode: Any) -> RolloutMode:
    if mode == "available" or mode == "never":
        return "available" if mode == "available" else "never"
    if isinstance(mode, int | float) and not isinstance(mode, bool) and mode >= 0:
        return float(mode)
    raise ValueError(f'deployments must be "available", "never" or a delay >= 0, not {mode!r}')


class RolloutSimulator:
    """Observes Deployments in ``store`` and writes their rollout status after ``mode``."""

    def __init__(
        self, store: Store, objects: Objects, registry: Registry, mode: RolloutMode
    ) -> None:
        self.store = store
        self.objects = objects
        self.registry = registry
        self._mode = _check_mode(mode)
        self._queue: queue.Queue[Target | None] = queue.Queue()
        self._seen: dict[tuple[str, str], Target] = {}  # guarded by the store lock
        self._thread: threading.Thread | None = None
        self._pending = 0  # observed generations whose writes are not done yet
        self._idle = threading.Condition()
        store.listeners.append(self.observe)

    @property
    def mode(self) -> RolloutMode:
        return self._mode

    @mode.setter
    def mode(self, value: RolloutMode) -> None:
        self._mode = _check_mode(value)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="emulator-rollouts", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join(timeout=10)

    # -- observation (under the store lock: record and queue only) --------------------------
    def observe(self, ev: WatchEvent) -> None:
        if ev.key != DEPLOYMENT_KEY:
            return
        meta = ev.obj["metadata"]
        ref = (meta.get("namespace", ""), meta["name"])
        if ev.type == "DELETED" or meta.get("deletionTimestamp"):
            self._seen.pop(ref, None)
            return
        target = (*ref, meta.get("uid", ""), int(meta.get("generation", 1)))
        if self._seen.get(ref) != target:
            self._seen[ref] = target
            with self._idle:
                self._pending += 1
            self._queue.put(target)

    def idle(self, timeout: float) -> bool:
        """Wait until every observed generation has its final status written (for
        ``"never"``: its progressing status); False if ``timeout`` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def _finished(self) -> None:
        with self._idle:
            self._pending -= 1
            if not self._pending:
                self._idle.notify_all()

    # -- work (simulator thread) -------------------------------------------------------------
    def _run(self) -> None:
        due: list[tuple[float, Target]] = []
        while True:
            wait = max(0.0, due[0][0] - time.monotonic()) if due else None
            try:
                item: Target | bool | None = self._queue.get(timeout=wait)
            except queue.Empty:
                item = False  # a scheduled write is due
            if item is None:
                return
            if item is not False:
                assert isinstance(item, tuple)
                mode = self._mode
                if mode != "available":
                    self._write(item, available=False)
                if mode != "never":
                    delay = 0.0 if mode == "available" else float(mode)
                    heapq.heappush(due, (time.monotonic() + delay, item))
                else:
                    self._finished()
            while due and due[0][0] <= time.monotonic():
                self._write(heapq.heappop(due)[1], available=True)
                self._finished()

    def _write(self, target: Target, *, available: bool) -> None:
        namespace, name, uid, generation = target
        rt = self.registry.get("apps", "v1", "deployments")
        if rt is None:
            return
        for _ in range(_WRITE_ATTEMPTS):
            old = self.store.get(DEPLOYMENT_KEY, namespace, name)
            meta = (old or {}).get("metadata") or {}
            if old is None or meta.get("uid") != uid or meta.get("generation", 1) != generation:
                return  # gone or changed: a newer event brings its own target
            new = copy.deepcopy(old)
            new["status"] = rollout_status(old, available)
            req = Req(rt, namespace, name, "status", user_agent="kube-controller-manager")
            with contextlib.suppress(ApiError):  # raced with another write: read again
                self.objects.update(req, new, old)
                return


def rollout_status(deployment: JSON, available: bool) -> JSON:
    """The status the Deployment controller reports for the current generation."""
    spec = deployment.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    ready = replicas if available else 0
    now = now_iso()
    name = deployment["metadata"]["name"]
    progressing = {
        "type": "Progressing",
        "status": "True",
        "lastUpdateTime": now,
        "lastTransitionTime": now,
        "reason": "NewReplicaSetAvailable" if available else "ReplicaSetUpdated",
        "message": f'ReplicaSet "{name}" '
        + ("has successfully progressed." if available else "is progressing."),
    }
    availability = {
        "type": "Available",
        "status": "True" if available else "False",
        "lastUpdateTime": now,
        "lastTransitionTime": now,
        "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
        "message": "Deployment has minimum availability."
        if available
        else "Deployment does not have minimum availability.",
    }
    status: JSON = {
        "observedGeneration": int(deployment["metadata"].get("generation", 1)),
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "conditions": [availability, progressing],
    }
    if replicas - ready:
        status["unavailableReplicas"] = replicas - ready
    if not ready:
        del status["readyReplicas"], status["availableReplicas"]
    return status
