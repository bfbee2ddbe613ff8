"""Independent steps on the emulator: own retries, temporary vs permanent errors, sub-steps,
progress that survives a restart and goes once done (issue 43)."""

from __future__ import annotations

import json
from typing import Any

from waiting import wait_until

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import (
    Context,
    Controller,
    ResourceKey,
    TemporaryError,
    TerminalError,
    Wait,
)
from cloudcoil_sync.testing import Emulator

from .accounts import Account, create_account, install_accounts
from .conftest import Calls, Harness

PROGRESS = "handlers.cloudcoil.dev/progress"


def stored(kube: Emulator, name: str) -> dict[str, Any]:
    return kube.get_object("example.com", "accounts", "default", name) or {}


def progress(kube: Emulator, name: str) -> dict[str, Any]:
    text = ((stored(kube, name).get("metadata") or {}).get("annotations") or {}).get(PROGRESS)
    return json.loads(text) if text else {}


def test_steps_retry_on_their_own_and_leave_no_progress_once_done(
    kube_config: Config, kube_emulator: Emulator, harness: Harness
) -> None:
    install_accounts(kube_config)
    calls = Calls()
    retries: list[int] = []
    controller: Controller[Account] = Controller(Account)

    @controller.step()
    def flaky(account: Account, ctx: Context[Account]) -> None:
        retries.append(ctx.retry)
        assert ctx.reason == "step"
        if calls.hit("flaky") <= 2:
            raise TemporaryError("not yet", delay=0)

    @controller.step()
    def steady(account: Account) -> None:
        calls.hit("steady")

    harness.run(controller, name="accounts")
    create_account(kube_config, "s")
    assert calls.reached("flaky", 3)
    assert retries[:3] == [0, 1, 2]  # its own count, visible in ctx.retry
    assert harness.runtimes[0].queue.join(10)
    assert calls["steady"] >= 3  # a failing step does not stop the other (in each pass)
    assert progress(kube_emulator, "s") == {}  # garbage-collected once done


def test_a_step_fails_for_good_after_its_retries_until_the_object_changes(
    kube_config: Config, kube_emulator: Emulator, harness: Harness
) -> None:
    install_accounts(kube_config)
    calls = Calls()
    controller: Controller[Account] = Controller(Account)

    @controller.step(retries=2, backoff=0)
    def doomed(account: Account) -> None:
        calls.hit("doomed")
        raise RuntimeError("quota service down")

    @controller.step()
    def refused(account: Account) -> None:
        calls.hit("refused")
        if account.spec.owner == "ann":
            raise TerminalError("owner ann is not allowed")

    runtime = harness.run(controller, name="accounts")
    create_account(kube_config, "p")

    def failed() -> bool:
        found = progress(kube_emulator, "p")
        return all(found.get(step, {}).get("failure") for step in ("doomed", "refused"))

    assert kube_emulator.wait_for(failed, timeout=10)
    entry = progress(kube_emulator, "p")["doomed"]
    assert entry["retries"] == 2 and "gave up after 2 attempts" in entry["message"]
    assert "owner ann is not allowed" in progress(kube_emulator, "p")["refused"]["message"]
    assert runtime.queue.join(10)
    assert calls["doomed"] == 2 and calls["refused"] == 1  # not retried: failed for good
    reasons = [
        e.get("reason") for e in kube_emulator.list_objects("events.k8s.io", "events", "default")
    ]
    assert "HandlerFailed" in reasons  # (one: the recorder drops repeats of a reason for 60 s)
    # A change of the object gives both another chance.
    kube_config.client(Account).raw.merge_patch("p", {"spec": {"owner": "bob"}})
    assert calls.reached("doomed", 4) and calls.reached("refused", 2)
    assert kube_emulator.wait_for(lambda: "refused" not in progress(kube_emulator, "p"))


def test_progress_survives_a_restart(kube_config: Config, kube_emulator: Emulator) -> None:
    install_accounts(kube_config)
    calls = Calls()
    seen: list[int] = []

    def controller() -> Controller[Account]:
        made: Controller[Account] = Controller(Account)

        @made.step()
        def provision(account: Account, ctx: Context[Account]) -> None:
            seen.append(ctx.retry)
            if calls.hit("provision") == 1:
                raise TemporaryError("backend warming up", delay=3600)

        return made

    first = Harness(kube_config)
    try:
        first.run(controller(), name="accounts")
        create_account(kube_config, "r")
        assert kube_emulator.wait_for(lambda: "provision" in progress(kube_emulator, "r"))
    finally:
        first.close()
    entry = progress(kube_emulator, "r")["provision"]
    assert entry["retries"] == 1 and entry["message"] == "TemporaryError: backend warming up"
    # Time passes while the operator is down (the delay moved into the past by hand).
    entry["delayed"] = entry["started"]
    kube_config.client(Account).raw.merge_patch(
        "r", {"metadata": {"annotations": {PROGRESS: json.dumps({"provision": entry})}}}
    )
    second = Harness(kube_config)
    try:
        second.run(controller(), name="accounts")
        assert calls.reached("provision", 2)
        assert seen[:2] == [0, 1]  # the new process continued the count
        assert kube_emulator.wait_for(lambda: progress(kube_emulator, "r") == {})
    finally:
        second.close()


def test_substeps_per_item_each_with_its_own_progress(
    kube_config: Config, kube_emulator: Emulator, harness: Harness
) -> None:
    install_accounts(kube_config)
    calls = Calls()
    controller: Controller[Account] = Controller(Account)

    @controller.on_create()
    def buckets(account: Account, ctx: Context[Account]) -> None:
        def make(bucket: str) -> None:
            if calls.hit(bucket) == 1 and bucket == "logs":
                raise TemporaryError("name taken", delay=0)

        ctx.substeps({bucket: (lambda b=bucket: make(b)) for bucket in account.spec.buckets})
        calls.hit("parent-done")

    harness.run(controller, name="accounts")
    create_account(kube_config, "b", buckets=["data", "logs", "media"])
    assert calls.reached("parent-done")
    assert harness.runtimes[0].queue.join(10)
    assert (calls["data"], calls["logs"], calls["media"]) == (1, 2, 1)
    assert progress(kube_emulator, "b") == {}
    assert (
        "handlers.cloudcoil.dev/last-handled"
        in stored(kube_emulator, "b")["metadata"]["annotations"]
    )


def test_progress_in_status(kube_config: Config, kube_emulator: Emulator, harness: Harness) -> None:
    install_accounts(kube_config)
    controller: Controller[Account] = Controller(Account, progress="status")

    @controller.step()
    def waiting(account: Account) -> None:
        raise TemporaryError("later", delay=3600)

    harness.run(controller, name="accounts")
    create_account(kube_config, "st")

    def recorded() -> bool:
        status = stored(kube_emulator, "st").get("status") or {}
        return (status.get("progress") or {}).get("waiting", {}).get("retries") == 1

    assert kube_emulator.wait_for(recorded, timeout=10)
    assert PROGRESS not in (stored(kube_emulator, "st")["metadata"].get("annotations") or {})


def test_wait_in_a_step_looks_again_later_without_counting_a_retry(
    kube_config: Config, kube_emulator: Emulator, harness: Harness
) -> None:
    install_accounts(kube_config)
    calls = Calls()
    controller: Controller[Account] = Controller(Account)

    @controller.step(backoff=3600)
    def pending(account: Account) -> None:
        calls.hit("pending")
        raise Wait("DiskAttaching", "the disk is not attached yet")  # no after: its backoff

    runtime = harness.run(controller, name="accounts")
    create_account(kube_config, "w")
    assert kube_emulator.wait_for(lambda: "pending" in progress(kube_emulator, "w"), timeout=10)
    entry = progress(kube_emulator, "w")["pending"]
    assert entry["retries"] == 0 and entry["message"].startswith("DiskAttaching")
    # The echo of that write was queued before the marker's creation: its pass skipped it.
    create_account(kube_config, "marker")
    assert kube_emulator.wait_for(lambda: "pending" in progress(kube_emulator, "marker"))
    # A pass of "w" may still be in flight on another worker: it ends by scheduling the wait.
    assert wait_until(lambda: runtime.queue.due(ResourceKey("w", "default")) is not None, 10)
    assert calls["pending"] == 2  # once each: not at once again (after an hour)
