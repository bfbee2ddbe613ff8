"""The raw event hook on the emulator: type, object, old object; errors never fatal; no
reconciler needed (issue 43)."""

from __future__ import annotations

import threading

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller, RawEvent
from cloudcoil_sync.testing import Emulator

from .accounts import Account, create_account, install_accounts
from .conftest import Harness


def test_every_event_with_its_old_object_and_errors_are_not_fatal(
    kube_config: Config, kube_emulator: Emulator, harness: Harness
) -> None:
    install_accounts(kube_config)
    controller: Controller[Account] = Controller(Account)  # no reconcile, no dummy
    seen: list[tuple[str, str | None, str | None]] = []
    lock = threading.Condition()
    failures = 0

    @controller.on_event()
    def explode(event: RawEvent) -> None:
        nonlocal failures
        failures += 1
        raise RuntimeError("the audit sink is down")

    @controller.on_event()
    def audit(event: RawEvent) -> None:
        old = event.old.spec.owner if event.old is not None else None
        new = event.object.spec.owner if event.object is not None else None
        with lock:
            seen.append((event.type, old, new))
            lock.notify_all()

    runtime = harness.run(controller, name="accounts")
    api = kube_config.client(Account).raw
    create_account(kube_config, "e")
    api.merge_patch("e", {"spec": {"owner": "bob"}})
    api.delete("e")
    with lock:
        assert lock.wait_for(lambda: len(seen) >= 3, timeout=10)
    assert seen == [("ADDED", None, "ann"), ("MODIFIED", "ann", "bob"), ("DELETED", "bob", "bob")]
    assert failures == 3  # logged, and the informer and the other handler went on
    assert runtime.ready and runtime.primary.healthy()
    assert controller.registry.raw_events.errors == 3
