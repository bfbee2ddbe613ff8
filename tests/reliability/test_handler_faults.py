"""Scenario 4: handlers that raise for some keys, hang past reconcile_timeout, or are stuck
when the operator stops — per-key backoff, other keys unaffected, every wait bounded."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config
from cloudcoil_sync.testing import Emulator

from .conftest import Record, Running, configmap, converge, echo_operator, unconverged, wait_until

RECONCILE_TIMEOUT = 4.0
SHUTDOWN_TIMEOUT = 0.5


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Lets hung handlers return at the end of the test (their threads then end)."""
    event = threading.Event()
    yield event
    event.set()


class Faulty:
    """The reconcile hook: `bad-*` raise twice, `hung` hangs once, `stuck` hangs always."""

    def __init__(self, release: threading.Event) -> None:
        self.release = release
        self.unhang = threading.Event()
        self.lock = threading.Lock()
        self.attempts: dict[str, list[float]] = {}
        self.hung = threading.Event()
        self.stuck = threading.Event()

    def __call__(self, cm: ConfigMap) -> None:
        name = cm.name or ""
        with self.lock:
            self.attempts.setdefault(name, []).append(time.monotonic())
            attempt = len(self.attempts[name])
        if name.startswith("bad-") and attempt <= 2:
            raise RuntimeError(f"handler defect for {name} (attempt {attempt})")
        if name == "hung" and attempt == 1:
            self.hung.set()
            self.unhang.wait(20)
        if name == "stuck":
            self.stuck.set()
            self.release.wait(20)


def test_failing_and_hung_handlers_back_off_per_key_and_stop_is_bounded(
    kube_emulator: Emulator,
    kube_config: Config,
    operators: Callable[[Application], Running],
    release: threading.Event,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kube = kube_emulator
    faulty = Faulty(release)
    record = Record()
    app, configs = echo_operator(
        kube_config,
        record,
        hook=faulty,
        workers=2,
        reconcile_timeout=RECONCILE_TIMEOUT,
        shutdown_timeout=SHUTDOWN_TIMEOUT,
    )
    good = {f"good-{i:02d}": f"g{i}" for i in range(30)}
    bad = {f"bad-{i}": f"b{i}" for i in range(3)}
    for name, value in {"hung": "h", **bad, **good}.items():
        kube.create_object(configmap(name, value))
    running = operators(app)

    # Other keys flow while one worker is held by the hung handler and bad keys back off.
    assert faulty.hung.wait(10)

    def good_done() -> bool:
        return not [name for name in unconverged(kube, good) if name in good]

    assert wait_until(good_done, timeout=RECONCILE_TIMEOUT)
    assert len(faulty.attempts["hung"]) == 1 and not release.is_set()

    # Bad keys converge after two failures, while the hung pass is still blocked.
    everything = {**good, **bad, "hung": "h"}
    assert wait_until(lambda: unconverged(kube, everything) == ["hung"], timeout=20)
    for name in bad:
        first, second, third = faulty.attempts[name][:3]
        # 1 s then 2 s, ±10 % jitter (the pass itself takes milliseconds).
        assert second - first >= 0.85, name
        assert third - second >= 1.75, name
        # After the success at most the no-op pass its own write's event may cause.
        assert len(faulty.attempts[name]) <= 4, name
    assert all(len(faulty.attempts[name]) <= 2 for name in good)  # untouched by the faults
    # The hung pass outlives reconcile_timeout: abandoned (its writes fenced), its worker
    # replaced, its key released and retried after backoff while the handler still hangs.
    runtime: Any = configs.runtime
    assert wait_until(lambda: runtime.workers.timed_out == 1, timeout=RECONCILE_TIMEOUT + 5)
    assert converge(kube, everything, timeout=10) == []
    assert not faulty.unhang.is_set()  # converged without the hung handler returning
    faulty.unhang.set()
    hung = faulty.attempts["hung"]
    assert len(hung) in (2, 3) and hung[1] - hung[0] >= RECONCILE_TIMEOUT + 0.85  # + 1 s backoff
    assert runtime.status.errors >= 2 * len(bad) + 1
    assert app.healthy

    # A handler stuck when the operator stops: stop waits shutdown_timeout, not longer.
    kube.create_object(configmap("stuck", "s"))
    assert faulty.stuck.wait(10)
    started = time.monotonic()
    error = running.close(timeout=15)
    elapsed = time.monotonic() - started
    assert elapsed < RECONCILE_TIMEOUT - 0.2, f"stop took {elapsed:.2f}s with a stuck handler"
    assert error is None  # a clean stop; the stuck pass is reported, not waited for
    assert "still running after shutdown_timeout" in caplog.text
