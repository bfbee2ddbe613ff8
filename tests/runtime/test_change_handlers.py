"""Change handlers on the emulator: create, update, field, resume across a restart, delete
with and without a finalizer (issue 43)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Context, Controller
from cloudcoil_sync.testing import Emulator

from .accounts import Account, create_account, install_accounts
from .conftest import Calls, Harness

LAST_HANDLED = "handlers.cloudcoil.dev/last-handled"


def stored(kube: Emulator, name: str) -> dict[str, Any]:
    return kube.get_object("example.com", "accounts", "default", name) or {}


def annotations(kube: Emulator, name: str) -> dict[str, str]:
    return (stored(kube, name).get("metadata") or {}).get("annotations") or {}


def change_controller(calls: Calls, seen: list[tuple[str, Any, Any, Any]]) -> Controller[Account]:
    controller: Controller[Account] = Controller(Account)

    @controller.on_create()
    def created(account: Account, ctx: Context[Account]) -> None:
        seen.append(("create", ctx.old, ctx.new["spec"]["owner"], ctx.reason))
        calls.hit("create")

    @controller.on_update()
    def updated(account: Account, ctx: Context[Account]) -> None:
        seen.append(("update", ctx.old["spec"]["owner"], ctx.new["spec"]["owner"], ctx.diff))
        calls.hit("update")

    @controller.on_field("spec.quota.storage")
    def storage(account: Account, ctx: Context[Account]) -> None:
        seen.append(("field", ctx.old, ctx.new, [str(c) for c in ctx.diff]))
        calls.hit("field")

    @controller.on_resume()
    def resumed(account: Account, ctx: Context[Account]) -> None:
        seen.append(("resume", None, account.spec.owner, ctx.reason))
        calls.hit("resume")

    return controller


def test_create_update_field_and_resume_after_a_restart(
    kube_config: Config, kube_emulator: Emulator
) -> None:
    install_accounts(kube_config)
    calls, seen = Calls(), []  # type: ignore[var-annotated]
    first = Harness(kube_config)
    try:
        first.run(change_controller(calls, seen), name="accounts")
        create_account(kube_config, "a", quota={"storage": 5})
        assert calls.reached("create") and calls.reached("field")
        assert kube_emulator.wait_for(lambda: LAST_HANDLED in annotations(kube_emulator, "a"))
        handled = json.loads(annotations(kube_emulator, "a")[LAST_HANDLED])
        assert handled == {"spec": {"owner": "ann", "buckets": [], "quota": {"storage": 5}}}
        assert ("create", None, "ann", "create") in seen
        assert ("field", None, 5, ["spec.quota.storage: None -> 5"]) in seen
        assert calls["resume"] == 0 and calls["update"] == 0  # created here: no resume

        api = kube_config.client(Account).raw
        api.merge_patch("a", {"spec": {"owner": "bob"}})
        assert calls.reached("update")
        update = next(entry for entry in seen if entry[0] == "update")
        assert update[1:3] == ("ann", "bob")
        assert [(c.path, c.before, c.after) for c in update[3]] == [("spec.owner", "ann", "bob")]
        assert calls["field"] == 1  # the quota did not change
        api.merge_patch("a", {"spec": {"quota": {"storage": 7}}})
        assert calls.reached("field", 2) and calls.reached("update", 2)
        assert ("field", 5, 7, ["spec.quota.storage: 5 -> 7"]) in seen
        assert kube_emulator.wait_for(
            lambda: '"storage":7' in annotations(kube_emulator, "a").get(LAST_HANDLED, "")
        )
    finally:
        first.close()
    # A new process: the object was handled before, so it resumes (no create, no update).
    second = Harness(kube_config)
    try:
        second.run(change_controller(calls, seen), name="accounts")
        assert calls.reached("resume")
        assert calls["create"] == 1 and calls["update"] == 2 and calls["field"] == 2
        assert ("resume", None, "bob", "resume") in seen
        # A change made while the operator was down is an update after the resume.
    finally:
        second.close()
    kube_config.client(Account).raw.merge_patch("a", {"spec": {"owner": "cid"}})
    third = Harness(kube_config)
    try:
        third.run(change_controller(calls, seen), name="accounts")
        assert calls.reached("resume", 2) and calls.reached("update", 3)
        assert calls["create"] == 1
    finally:
        third.close()


def test_delete_with_a_finalizer_runs_before_the_object_goes(
    kube_config: Config, kube_emulator: Emulator, harness: Harness
) -> None:
    install_accounts(kube_config)
    calls = Calls()
    controller: Controller[Account] = Controller(Account)
    cleaned: list[str] = []

    @controller.on_delete(backoff=0)  # retried at once, so the test does not wait a minute
    def cleanup(account: Account, ctx: Context[Account]) -> None:
        cleaned.append(f"{account.spec.owner}:{ctx.reason}:{ctx.retry}")
        if calls.hit("delete") == 1:
            raise RuntimeError("backend busy")

    @controller.on_delete(id="second")
    def second_cleanup(account: Account) -> None:
        calls.hit("second")

    harness.run(controller, name="accounts")
    create_account(kube_config, "d")
    finalizer = "handlers.cloudcoil.dev/delete"
    assert kube_emulator.wait_for(
        lambda: (
            finalizer in (stored(kube_emulator, "d").get("metadata") or {}).get("finalizers", [])
        )
    )
    kube_config.client(Account).raw.delete("d")
    assert kube_emulator.wait_for(lambda: not stored(kube_emulator, "d"), timeout=10)
    assert cleaned == ["ann:delete:0", "ann:delete:1"]  # retried, its count in ctx.retry
    assert calls["second"] == 1  # independent: not repeated when the first one failed


def test_delete_without_a_finalizer_gets_the_last_object_once(
    kube_config: Config, kube_emulator: Emulator, harness: Harness
) -> None:
    install_accounts(kube_config)
    calls = Calls()
    controller: Controller[Account] = Controller(Account)
    last: list[str] = []
    done = threading.Event()

    @controller.on_delete(requires_finalizer=False)
    def forget(account: Account) -> None:
        last.append(account.spec.owner)
        calls.hit("delete")
        done.set()

    harness.run(controller, name="accounts")
    create_account(kube_config, "gone")
    kube_config.client(Account).raw.merge_patch("gone", {"spec": {"owner": "zoe"}})
    assert kube_emulator.wait_for(
        lambda: (stored(kube_emulator, "gone").get("spec") or {}).get("owner") == "zoe"
    )
    assert not (stored(kube_emulator, "gone").get("metadata") or {}).get("finalizers")
    kube_config.client(Account).raw.delete("gone")
    assert done.wait(10)
    assert calls.reached("delete") and last == ["zoe"]
    assert harness.runtimes[0].queue.join(10)
    assert calls["delete"] == 1


def test_definition_errors_are_clear() -> None:
    controller: Controller[Account] = Controller(Account)

    @controller.on_create()
    def handler(account: Account) -> None: ...

    with pytest.raises(ValueError, match="used twice"):
        controller.on_update(id="handler")(lambda account: None)
    with pytest.raises(ValueError, match="dotted path"):
        controller.on_field("spec..x")
    with pytest.raises(ValueError, match="retries must be a positive integer"):
        controller.step(id="x", retries=0)(lambda account: None)
    with pytest.raises(ValueError, match="id"):
        controller.step()(lambda account: None)
    with pytest.raises(ValueError, match="progress must be"):
        Controller(Account, progress="etcd")  # type: ignore[arg-type]
    controller.validate_definition()  # change handlers alone are a whole controller
    from .widgets import Widget  # a ReconcileStatus without `progress`

    in_status: Controller[Widget] = Controller(Widget, progress="status")
    in_status.step()(handler)
    with pytest.raises(TypeError, match="progress='status' needs a status model"):
        in_status.validate_definition()

    @controller.finalize("example.com/cleanup")
    def own_cleanup(account: Account) -> None: ...

    @controller.on_delete()
    def delete(account: Account) -> None: ...

    with pytest.raises(ValueError, match="cannot be combined"):
        controller.validate_definition()


def test_edits_a_handler_makes_are_written_and_are_no_change_of_their_own(
    kube_config: Config, kube_emulator: Emulator, harness: Harness
) -> None:
    install_accounts(kube_config)
    calls = Calls()
    controller: Controller[Account] = Controller(Account)

    @controller.on_create()
    def label(account: Account) -> None:
        assert account.metadata is not None
        account.metadata.labels = {**(account.metadata.labels or {}), "tier": "gold"}
        calls.hit("create")

    @controller.on_update()
    def updated(account: Account) -> None:
        calls.hit("update")

    @controller.step()
    def shout(account: Account) -> None:
        account.spec.owner = account.spec.owner.upper()  # a step's edit is written too

    runtime = harness.run(controller, name="accounts")
    kube_config.client(Account).raw.create(
        {"metadata": {"name": "l", "labels": {"team": "a"}}, "spec": {"owner": "ann"}}
    )

    def written() -> bool:
        obj = stored(kube_emulator, "l")
        return (obj.get("metadata") or {}).get("labels", {}).get("tier") == "gold" and (
            obj.get("spec") or {}
        ).get("owner") == "ANN"

    assert kube_emulator.wait_for(written, timeout=10)
    assert runtime.queue.join(10)
    assert calls["create"] == 1 and calls["update"] == 0
