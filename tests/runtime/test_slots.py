"""`workers` bounds the handlers running at once, not the passes' own writes."""

from __future__ import annotations

import threading

from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller
from cloudcoil_sync.controller._internal.slots import HandlerSlots
from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.request import Req

from .conftest import Calls, Harness
from .test_passes import managed, marking_controller


class HeldWrites:
    """An emulator admission hook that holds the PATCH of one object until released."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, verb: str, req: Req) -> None:
        if verb == "patch" and req.name == self.name:
            self.entered.set()
            assert self.release.wait(30)  # longer than the test waits for the other key


def test_a_pass_waiting_for_its_write_holds_no_handler_slot(
    kube_emulator: Emulator, kube_config: Config, harness: Harness
) -> None:
    held = HeldWrites("first")
    kube_emulator.admission_hooks.append(held)
    try:
        calls = Calls()
        harness.run(marking_controller(calls, workers=1), name="one-slot")
        api = kube_config.client(ConfigMap).raw
        api.create({"metadata": {"name": "first"}})
        assert held.entered.wait(10)  # first's handler returned; its write is on the wire
        api.create({"metadata": {"name": "second"}})
        # workers=1: one handler at a time, and first's write does not keep second's waiting.
        assert calls.reached("second")
        assert kube_emulator.wait_for(lambda: managed(kube_emulator, "second"), timeout=10)
        assert not managed(kube_emulator, "first")
    finally:
        held.release.set()
    assert kube_emulator.wait_for(lambda: managed(kube_emulator, "first"), timeout=10)


def test_handlers_never_outnumber_workers(kube_config: Config, harness: Harness) -> None:
    lock = threading.Lock()
    running = {"now": 0, "peak": 0}
    calls = Calls()
    controller: Controller[ConfigMap] = Controller(ConfigMap, workers=2)
    pair = threading.Barrier(2, timeout=10)  # two handlers meet: the bound is reached

    @controller.reconcile()
    def paired(cm: ConfigMap) -> ConfigMap:
        with lock:
            running["now"] += 1
            running["peak"] = max(running["peak"], running["now"])
        try:
            pair.wait()
        finally:
            with lock:
                running["now"] -= 1
        calls.hit(cm.name or "")
        cm.data = {"managed": "yes"}
        return cm

    runtime = harness.run(controller, name="paired")
    api = kube_config.client(ConfigMap).raw
    names = [f"p{i}" for i in range(12)]
    for name in names:
        api.create({"metadata": {"name": name}})
    assert calls.wait(lambda: all(calls[n] >= 1 for n in names))
    assert runtime.queue.join(10)
    assert running["peak"] == 2  # twelve pass threads, two handler slots
    text = harness.metrics.render().decode()
    assert 'controller_runtime_active_workers{controller="paired"} 0.0' in text
    assert 'controller_runtime_max_concurrent_reconciles{controller="paired"} 2.0' in text


def test_closing_the_slots_wakes_every_waiting_taker() -> None:
    slots = HandlerSlots(1)
    first = slots.take()
    assert first is not None
    got: list[object] = []
    waiters = [threading.Thread(target=lambda: got.append(slots.take())) for _ in range(3)]
    for waiter in waiters:
        waiter.start()
    slots.close()
    for waiter in waiters:
        waiter.join(10)
    assert got == [None, None, None]
    first.give()
    first.give()  # once only
    assert slots.take() is None  # closed stays closed
