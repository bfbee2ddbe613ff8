"""Why a pass ran (`ctx.causes`), what changed (`ctx.changes`), and the pass's log context,
on the emulator: the informer's events, the queue and the worker, end to end."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from cloudcoil.apimachinery import ObjectMeta
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync._internal.logs import JSONFormatter, TextFormatter
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Cause, Change, Context, Controller, LogContextFilter
from cloudcoil_sync.testing import Emulator

from .conftest import Harness, Widget, create_widget

user_log = logging.getLogger("tests.user_handler")


class Passes:
    """What each pass saw, waited on with a timeout."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.seen: list[tuple[tuple[Cause, ...], tuple[Change, ...] | None]] = []

    def add(self, causes: tuple[Cause, ...], changes: tuple[Change, ...] | None) -> None:
        with self._cond:
            self.seen.append((causes, changes))
            self._cond.notify_all()

    def wait_for(self, cause: Cause, timeout: float = 10.0) -> tuple[Change, ...] | None:
        def found() -> tuple[tuple[Cause, ...], Any] | None:
            return next((seen for seen in self.seen if cause in seen[0]), None)

        with self._cond:
            assert self._cond.wait_for(lambda: found() is not None, timeout), self.seen
            hit = found()
            assert hit is not None
            return hit[1]


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    kept: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = kept.append  # type: ignore[method-assign]
    handler.addFilter(LogContextFilter())
    loggers = [logging.getLogger("tests.user_handler"), logging.getLogger("cloudcoil_sync")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    yield kept
    for logger, level in zip(loggers, levels, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


def _notes(kube: Emulator, reason: str) -> list[str]:
    """The notes of the Events with `reason` (events.k8s.io/v1, as the recorder posts)."""
    events = kube.list_objects("events.k8s.io", "events", "default")
    return [e.get("note", "") for e in events if e.get("reason") == reason]


def parents(passes: Passes) -> Controller[Widget]:
    controller: Controller[Widget] = Controller(Widget)
    controller.owns(ConfigMap)

    @controller.reconcile()
    def reconcile(w: Widget, ctx: Context[Widget]) -> None:
        user_log.info("reconciling %s", w.name)
        passes.add(ctx.causes, ctx.changes)
        size = w.spec.size if w.spec else 0
        ctx.ensure(ConfigMap(metadata=ObjectMeta(name=f"{w.name}-0"), data={"size": str(size)}))

    return controller


def test_each_pass_knows_its_causes_and_changes_and_logs_with_its_context(
    kube_emulator: Emulator, widgets: Config, harness: Harness, records: list[logging.LogRecord]
) -> None:
    passes = Passes()
    runtime = harness.run(parents(passes), name="parents")
    create_widget(widgets, "w1", size=1)
    assert passes.wait_for(Cause("added")) is None  # the first pass: no earlier success
    assert kube_emulator.wait_for(
        lambda: kube_emulator.get_object("", "configmaps", "default", "w1-0") is not None,
        timeout=10,
    )
    assert runtime.queue.join(10)

    widgets.client(ConfigMap).delete("w1-0")
    passes.wait_for(Cause("child", object="ConfigMap default/w1-0", event="deleted"))
    assert runtime.queue.join(10)
    assert kube_emulator.wait_for(lambda: _notes(kube_emulator, "ChildDeleted"), timeout=10)
    assert _notes(kube_emulator, "ChildDeleted") == ["ConfigMap default/w1-0 deleted; reconciling"]

    widgets.client(Widget).raw.merge_patch("w1", {"spec": {"size": 2}})
    changes = passes.wait_for(Cause("spec", ("spec.size",)))
    assert changes == (Change("spec.size", 1, 2),)  # not our own status write
    assert runtime.queue.join(10)

    mine = [r for r in records if r.name == "tests.user_handler"]
    assert mine and all(
        (r.controller, r.kind, r.namespace, r.object_name) == ("parents", "Widget", "default", "w1")  # type: ignore[attr-defined]
        for r in mine
    )
    assert len({r.pass_id for r in mine}) == len(mine)  # type: ignore[attr-defined]
    debug = [r.getMessage() for r in records if r.name == "cloudcoil_sync.controller.parents"]
    assert any("child ConfigMap default/w1-0 deleted" in line for line in debug), debug
    assert any("spec.size: 1 -> 2" in line for line in debug), debug
    framework = [r for r in records if r.name.startswith("cloudcoil_sync.controller")]
    assert all(hasattr(r, "pass_id") for r in framework if "Pass " in r.getMessage())

    text = TextFormatter().format(mine[-1])
    assert text.endswith(f"[pass={mine[-1].pass_id} Widget default/w1]")  # type: ignore[attr-defined]
    document = json.loads(JSONFormatter().format(mine[-1]))
    assert (document["controller"], document["kind"], document["name"]) == (
        "parents",
        "Widget",
        "w1",
    )
    assert document["logger"] == "tests.user_handler"

    metrics = harness.metrics.render().decode()
    assert 'cloudcoil_reconcile_causes_total{cause="child",controller="parents"}' in metrics
    assert 'cloudcoil_reconcile_causes_total{cause="spec",controller="parents"}' in metrics
    assert "w1" not in "".join(x for x in metrics.splitlines() if "causes_total" in x)


def test_a_line_logged_outside_a_pass_has_no_pass_context() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(LogContextFilter())
    handler.setFormatter(JSONFormatter())
    user_log.addHandler(handler)
    try:
        user_log.warning("outside")
    finally:
        user_log.removeHandler(handler)
    assert "pass_id" not in json.loads(stream.getvalue())
