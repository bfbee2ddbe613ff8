"""Route deadlines when handlers run on the connection's thread: the watchdog's late 504."""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.admission._internal.deadlines import Watchdog
from cloudcoil_sync.admission._internal.request import AdmissionRequest
from cloudcoil_sync.admission._internal.routes import AdmissionRoutes
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook

from .reviews import review
from .test_http import read_answers, tls_socket

Factory = Callable[..., WebhookHost]


@pytest.fixture
def watchdog() -> Iterator[Watchdog]:
    watchdog = Watchdog()
    watchdog.start()
    yield watchdog
    assert watchdog.stop(timeout=5)


def test_timer_fires_at_its_deadline(watchdog: Watchdog) -> None:
    fired = threading.Event()
    started = time.monotonic()
    timer = watchdog.schedule(started + 0.2, fired.set)
    assert fired.wait(5)
    assert time.monotonic() - started >= 0.2
    assert timer.cancel() is False  # too late: it ran


def test_cancelled_timer_never_fires(watchdog: Watchdog) -> None:
    ran: list[str] = []
    later = threading.Event()
    now = time.monotonic()
    assert watchdog.schedule(now + 0.1, lambda: ran.append("cancelled")).cancel() is True
    watchdog.schedule(now + 0.3, later.set)
    assert later.wait(5)
    assert ran == []


def test_earlier_timer_wakes_the_watchdog(watchdog: Watchdog) -> None:
    fired = threading.Event()
    far = watchdog.schedule(time.monotonic() + 60, lambda: None)
    started = time.monotonic()
    watchdog.schedule(started + 0.1, fired.set)
    assert fired.wait(5)  # woken for it: the watchdog slept towards the 60 s timer
    assert far.cancel() is True


def test_steady_schedules_and_cancels_do_not_wake_the_watchdog(watchdog: Watchdog) -> None:
    # Deadlines a second or more away, as routes have (timeout_seconds >= 1).
    watchdog.schedule(time.monotonic() + 1, lambda: None).cancel()  # the first may wake it
    started = time.monotonic()
    before = watchdog.wakeups
    for _ in range(2000):
        assert watchdog.schedule(time.monotonic() + 1, lambda: None).cancel() is True
        time.sleep(0)  # let the watchdog thread take the GIL if it was woken
    elapsed = time.monotonic() - started
    # At most one periodic wake a second while busy, never one per timer.
    assert watchdog.wakeups - before <= int(elapsed) + 2


def test_cancel_waits_for_a_running_callback(watchdog: Watchdog) -> None:
    entered, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def callback() -> None:
        entered.set()
        release.wait(10)
        finished.append("callback")

    timer = watchdog.schedule(time.monotonic(), callback)
    assert entered.wait(5)
    outcome: list[bool] = []
    canceller = threading.Thread(target=lambda: outcome.append(timer.cancel()))
    canceller.start()
    canceller.join(0.3)
    assert canceller.is_alive()  # held until the callback returns
    release.set()
    canceller.join(5)
    assert outcome == [False] and finished == ["callback"]


def test_stop_drops_pending_timers() -> None:
    watchdog = Watchdog()
    watchdog.start()
    ran: list[int] = []
    watchdog.schedule(time.monotonic() + 0.2, lambda: ran.append(1))
    assert watchdog.stop(timeout=5)  # joined: no callback can run any more
    assert ran == []


class Slow:
    """A handler that blocks until released and records the thread it ran on."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()
        self.threads: list[str] = []
        self.fail = False

    def __call__(self, request: AdmissionRequest[ConfigMap]) -> None:
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        self.release.wait(10)
        self.finished.set()
        if self.fail:
            raise ValueError("late failure")


@pytest.fixture
def slow() -> Iterator[Slow]:
    slow = Slow()
    yield slow
    slow.release.set()


def served(host_factory: Factory, slow: Slow, max_workers: int = 4) -> WebhookHost:
    table = AdmissionRoutes()
    table.validating(ConfigMap, path="/validate/fast")(lambda request: None)
    table.validating(ConfigMap, path="/validate/slow", timeout_seconds=1)(slow)
    return host_factory(AdmissionWebhook(table, max_workers=max_workers))


def post(path: str, document: Any = None) -> bytes:
    body = json.dumps(review() if document is None else document).encode()
    return (
        b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(body), body)
    )


def test_late_handler_gets_504_on_time_and_its_answer_is_never_written(
    host_factory: Factory,
    client_context: ssl.SSLContext,
    slow: Slow,
    caplog: pytest.LogCaptureFixture,
) -> None:
    slow.fail = True
    host = served(host_factory, slow)
    with (
        caplog.at_level(logging.INFO, logger="cloudcoil_sync.admission"),
        tls_socket(host, client_context) as tls,
    ):
        tls.settimeout(10)
        tls.sendall(post("/validate/fast"))  # keep-alive: the same connection goes on
        assert read_answers(tls, 1)[0][0] == 200
        started = time.monotonic()
        tls.sendall(post("/validate/slow"))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = tls.recv(65536)
            assert chunk
            head += chunk
        elapsed = time.monotonic() - started
        assert head.startswith(b"HTTP/1.1 504 ") and b"Connection: close" in head
        assert head.endswith(b'{"message":"Admission webhook timed out"}')
        # Not before the 1 s deadline, and answered by it while the handler still runs.
        assert elapsed >= 0.9 and not slow.finished.is_set()
        # The handler ran on the connection's own thread, not on a pool thread.
        assert slow.threads[0].startswith("webhook-tls-")
        slow.release.set()
        assert slow.finished.wait(5)
        assert tls.recv(65536) == b""  # closed with nothing after the 504
    assert "exceeded its 1s deadline; abandoned" in caplog.text
    assert "An abandoned admission handler later failed: ValueError('late failure')" in (
        caplog.text
    )


def test_other_connections_are_served_while_a_handler_is_late(
    host_factory: Factory, client_context: ssl.SSLContext, slow: Slow
) -> None:
    host = served(host_factory, slow)
    with (
        tls_socket(host, client_context) as late,
        tls_socket(host, client_context) as other,
    ):
        late.settimeout(10)
        other.settimeout(10)
        late.sendall(post("/validate/slow"))
        assert slow.entered.wait(5)
        other.sendall(post("/validate/fast"))
        assert read_answers(other, 1)[0][0] == 200
        assert read_answers(late, 1)[0][0] == 504
        other.sendall(post("/validate/fast"))  # still served after the 504 went out
        assert read_answers(other, 1)[0][0] == 200


def test_handlers_beyond_max_workers_time_out_without_running(
    host_factory: Factory, client_context: ssl.SSLContext, slow: Slow
) -> None:
    host = served(host_factory, slow, max_workers=1)
    with (
        tls_socket(host, client_context) as first,
        tls_socket(host, client_context) as second,
    ):
        first.settimeout(10)
        second.settimeout(10)
        first.sendall(post("/validate/slow"))
        assert slow.entered.wait(5)
        second.sendall(post("/validate/slow"))
        assert read_answers(second, 1) == [(504, b'{"message":"Admission webhook timed out"}')]
        assert read_answers(first, 1)[0][0] == 504
    assert len(slow.threads) == 1  # the second request never ran its handler
