import queue
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from waiting import wait_until

from cloudcoil_sync._internal.service import Service
from cloudcoil_sync.client._internal.errors import ServerError, TransportError
from cloudcoil_sync.controller._internal.informer import Informer, InformerFailed

from .fake_source import FakeSource, http_error

Event = tuple[str, str, str]  # (handler, name, resourceVersion or uid)


class Recorder:
    """Handlers that record (kind, name, detail) and let tests wait for them."""

    def __init__(self, informer: Informer) -> None:
        self.events: queue.Queue[tuple[str, str, Any]] = queue.Queue()
        informer.add_handler(
            on_add=lambda obj: self.events.put(("add", _name(obj), _data(obj))),
            on_update=lambda old, new: self.events.put(
                ("update", _name(new), (_rv(old), _rv(new)))
            ),
            on_delete=lambda obj: self.events.put(("delete", _name(obj), _uid(obj))),
        )

    def take(self, count: int) -> list[tuple[str, str, Any]]:
        return [self.events.get(timeout=5) for _ in range(count)]

    def empty(self) -> bool:
        return self.events.empty()


def _name(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _rv(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


def _uid(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["uid"])


def _data(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj.get("data") or {})


@pytest.fixture
def source() -> FakeSource:
    return FakeSource()


@pytest.fixture
def informers() -> Iterator[list[Informer]]:
    started: list[Informer] = []
    yield started
    for informer in started:
        assert informer.stop(timeout=5)


def make(source: FakeSource, informers: list[Informer], **options: Any) -> Informer:
    options.setdefault("min_backoff", 0.001)
    options.setdefault("max_backoff", 0.01)
    informer = Informer(source, name="configmaps", **options)
    informers.append(informer)
    return informer


def test_initial_list_adds_everything(source: FakeSource, informers: list[Informer]) -> None:
    for i in range(5):
        source.put(f"cm{i}", value=str(i))
    informer = make(source, informers, page_size=2)
    recorder = Recorder(informer)
    informer.start()
    assert informer.wait_synced(timeout=5)
    assert sorted(recorder.take(5)) == [("add", f"cm{i}", {"value": str(i)}) for i in range(5)]
    assert source.list_calls == [2]
    assert len(informer.store) == 5
    assert informer.resource_version == str(source.rv)
    stored = informer.store.get("ns", "cm3")
    assert stored is not None and "managedFields" not in stored["metadata"]


def test_watch_events_update_the_store_before_handlers_run(
    source: FakeSource, informers: list[Informer]
) -> None:
    informer = make(source, informers)
    seen: queue.Queue[Any] = queue.Queue()
    informer.add_handler(
        on_add=lambda obj: seen.put(("add", informer.store.get("ns", _name(obj)) == obj)),
        on_update=lambda old, new: seen.put(
            ("update", informer.store.get("ns", _name(new)) == new)
        ),
        on_delete=lambda obj: seen.put(("delete", informer.store.get("ns", _name(obj)))),
    )
    informer.start()
    assert informer.wait_synced(timeout=5)
    assert source.wait_watching(1)
    source.put("a", v="1")
    source.put("a", v="2")
    source.delete("a")
    assert [seen.get(timeout=5) for _ in range(3)] == [
        ("add", True),
        ("update", True),
        ("delete", None),
    ]
    assert len(informer.store) == 0


def test_dropped_stream_resumes_from_the_last_resource_version(
    source: FakeSource, informers: list[Informer]
) -> None:
    informer = make(source, informers)
    recorder = Recorder(informer)
    informer.start()
    assert informer.wait_synced(timeout=5)
    assert source.wait_watching(1)
    source.put("a", v="1")
    assert recorder.take(1) == [("add", "a", {"v": "1"})]
    source.drop_watches()
    assert source.wait_watching(2)
    assert source.watch_calls[1] == source.objects[("ns", "a")]["metadata"]["resourceVersion"]
    source.put("b")
    assert recorder.take(1) == [("add", "b", {})]
    assert source.list_calls == [500]  # no relist needed


def test_changes_made_while_disconnected_are_replayed_once(
    source: FakeSource, informers: list[Informer]
) -> None:
    source.watch_errors = []
    informer = make(source, informers)
    recorder = Recorder(informer)
    informer.start()
    assert informer.wait_synced(timeout=5)
    assert source.wait_watching(1)
    # The next reconnect fails once with a transport error, then succeeds.
    source.watch_errors.append(TransportError("connection reset"))
    source.drop_watches()
    source.put("a")
    source.put("a", v="2")
    assert source.wait_watching(3)
    assert recorder.take(2) == [("add", "a", {}), ("update", "a", ("101", "102"))]
    assert recorder.empty()


def test_bookmarks_advance_the_resume_point(source: FakeSource, informers: list[Informer]) -> None:
    informer = make(source, informers)
    informer.start()
    assert informer.wait_synced(timeout=5)
    assert source.wait_watching(1)
    source.bookmark()
    source.drop_watches()  # queued after the bookmark: it is applied first
    assert source.wait_watching(2)
    assert source.watch_calls == ["100", str(source.rv)]


def test_expired_watch_relists_and_reports_the_gap(
    source: FakeSource, informers: list[Informer]
) -> None:
    source.put("kept")
    source.put("changed", v="old")
    source.put("deleted")
    source.put("recreated")
    informer = make(source, informers)
    recorder = Recorder(informer)
    informer.start()
    assert informer.wait_synced(timeout=5)
    assert len(recorder.take(4)) == 4
    assert source.wait_watching(1)
    uid_before = _uid(source.objects[("ns", "recreated")])

    # Change things unseen by the open stream, lose that history, then disconnect.
    source.silent = True
    source.put("changed", v="new")
    source.delete("deleted")
    source.delete("recreated")
    source.put("recreated")
    source.put("new")
    source.forget_history()
    source.silent = False
    source.drop_watches()
    events = recorder.take(6)
    assert len(source.list_calls) == 2
    assert sorted(e[:2] for e in events) == [
        ("add", "new"),
        ("add", "recreated"),
        ("delete", "deleted"),
        ("delete", "recreated"),
        ("update", "changed"),
        ("update", "kept"),
    ]
    order = [e[:2] for e in events]
    assert order.index(("delete", "recreated")) < order.index(("add", "recreated"))
    deletes = [detail for kind, name, detail in events if (kind, name) == ("delete", "recreated")]
    assert deletes == [uid_before]
    assert informer.store.get("ns", "deleted") is None
    assert informer.store.get("ns", "changed")["data"] == {"v": "new"}  # type: ignore[index]


def test_watch_error_event_410_relists(source: FakeSource, informers: list[Informer]) -> None:
    source.put("a")
    informer = make(source, informers)
    recorder = Recorder(informer)
    informer.start()
    assert informer.wait_synced(timeout=5)
    assert recorder.take(1) == [("add", "a", {})]
    assert source.wait_watching(1)
    source.send_error(410, "Expired")
    assert recorder.take(1)[0][:2] == ("update", "a")  # the relist's dispatch
    assert informer.list_count == 2


def test_resync_dispatches_updates_for_unchanged_objects(
    source: FakeSource, informers: list[Informer]
) -> None:
    source.put("a")
    source.put("b")
    informer = make(source, informers)
    recorder = Recorder(informer)
    informer.start()
    assert informer.wait_synced(timeout=5)
    recorder.take(2)
    assert source.wait_watching(1)
    informer.resync()
    assert sorted(recorder.take(2)) == [
        ("update", "a", ("101", "101")),
        ("update", "b", ("102", "102")),
    ]
    assert informer.list_count == 2
    assert source.wait_watching(2)


def test_periodic_resync_uses_the_clock(source: FakeSource, informers: list[Informer]) -> None:
    now = [0.0]
    source.put("a")
    informer = make(source, informers, resync_period=30, clock=lambda: now[0])
    recorder = Recorder(informer)
    informer.start()
    assert informer.wait_synced(timeout=5)
    recorder.take(1)
    assert source.wait_watching(1)
    now[0] = 31.0
    source.drop_watches()  # the server ends the stream (timeoutSeconds was <= 30)
    assert recorder.take(1) == [("update", "a", ("101", "101"))]
    assert informer.list_count == 2


def test_watch_timeout_never_exceeds_the_time_to_resync(source: FakeSource) -> None:
    calls: list[int] = []
    original = source.watch

    def watch(*, resource_version: str, timeout_seconds: int) -> Any:
        calls.append(timeout_seconds)
        return original(resource_version=resource_version, timeout_seconds=timeout_seconds)

    source.watch = watch  # type: ignore[method-assign]
    informer = Informer(source, name="x", resync_period=45, watch_timeout=300)
    informer.start()
    try:
        assert informer.wait_synced(timeout=5)
        assert source.wait_watching(1)
        assert 1 <= calls[0] <= 45
    finally:
        assert informer.stop(timeout=5)


@pytest.mark.parametrize(
    ("code", "reason"), [(403, "Forbidden"), (401, "Unauthorized"), (404, "NotFound")]
)
def test_fatal_list_errors_surface_to_the_owner(
    source: FakeSource, informers: list[Informer], code: int, reason: str
) -> None:
    failures: list[BaseException] = []
    source.list_errors.append(http_error(code, reason))
    informer = make(source, informers, on_failure=failures.append)
    informer.start()
    with pytest.raises(InformerFailed, match=f"configmaps failed: {code} {reason}") as caught:
        informer.wait_synced(timeout=5)
    assert caught.value.__cause__ is informer.error
    assert informer.wait_finished(timeout=5)
    assert not informer.running
    assert len(failures) == 1 and getattr(failures[0], "status_code", None) == code
    assert len(source.list_calls) == 1  # never retried


def test_the_informer_is_a_service_reporting_its_end_through_on_exit(
    source: FakeSource, informers: list[Informer]
) -> None:
    source.list_errors.append(http_error(403, "Forbidden"))
    informer = make(source, informers, on_synced=lambda: synced.append(True))
    synced: list[bool] = []
    exits: list[BaseException | None] = []
    ended = threading.Event()

    def on_exit(error: BaseException | None) -> None:
        exits.append(error)
        ended.set()

    assert isinstance(informer, Service) and informer.healthy()
    informer.start(on_exit=on_exit)
    assert ended.wait(5)
    assert exits == [informer.error] and not informer.healthy() and synced == []
    with pytest.raises(InformerFailed):
        informer.wait_ready(1)


def test_a_stopped_informer_does_not_call_on_exit_and_on_synced_fires_once(
    source: FakeSource, informers: list[Informer]
) -> None:
    synced: list[bool] = []
    exits: list[BaseException | None] = []
    informer = make(source, informers, on_synced=lambda: synced.append(True))
    informer.start(on_exit=exits.append)
    assert informer.wait_ready(5) and informer.healthy()
    informer.resync()  # a relist: not a first sync
    assert wait_until(lambda: informer.list_count >= 2, timeout=5)
    assert informer.stop(timeout=5)
    assert exits == [] and synced == [True] and informer.healthy()


def test_transient_list_errors_are_retried(source: FakeSource, informers: list[Informer]) -> None:
    source.put("a")
    source.list_errors.extend(
        [
            http_error(500, "InternalError"),
            http_error(429, "TooManyRequests"),
            ServerError(503, "x", "y"),
        ]
    )
    informer = make(source, informers)
    recorder = Recorder(informer)
    informer.start()
    assert informer.wait_synced(timeout=5)
    assert recorder.take(1) == [("add", "a", {})]
    assert len(source.list_calls) == 4


def test_handler_errors_are_fatal(source: FakeSource, informers: list[Informer]) -> None:
    source.put("a")
    informer = make(source, informers)

    def broken(obj: dict[str, Any]) -> None:
        raise KeyError("mapper bug")

    informer.add_handler(on_add=broken)
    informer.start()
    with pytest.raises(InformerFailed, match="mapper bug"):
        informer.wait_synced(timeout=5)
    assert isinstance(informer.error, KeyError)


def test_stop_closes_an_open_watch_promptly(source: FakeSource) -> None:
    informer = Informer(source, name="x")
    informer.start()
    assert informer.wait_synced(timeout=5)
    assert source.wait_watching(1)
    stream = source.streams[0]
    assert informer.stop(timeout=2)
    assert stream.closed.is_set()
    assert informer.error is None
    assert not informer.wait_synced(timeout=0) or informer.synced


def test_registration_and_settings_rules(source: FakeSource) -> None:
    with pytest.raises(ValueError, match="at least 30 seconds"):
        Informer(source, name="x", resync_period=10)
    informer = Informer(source, name="x")
    informer.start()
    try:
        with pytest.raises(RuntimeError, match="before starting"):
            informer.add_handler(on_add=lambda obj: None)
        with pytest.raises(RuntimeError, match="only be started once"):
            informer.start()
    finally:
        assert informer.stop(timeout=5)


def test_indexers_follow_changes(source: FakeSource, informers: list[Informer]) -> None:
    def by_value(obj: dict[str, Any]) -> list[str]:
        return [str(v) for v in (obj.get("data") or {}).values()]

    informer = make(source, informers, indexers={"value": by_value})
    recorder = Recorder(informer)
    source.put("a", v="x")
    informer.start()
    assert informer.wait_synced(timeout=5)
    recorder.take(1)
    assert [_name(o) for o in informer.store.by_index("value", "x")] == ["a"]
    assert source.wait_watching(1)
    source.put("a", v="y")
    recorder.take(1)
    assert informer.store.by_index("value", "x") == []
    assert [_name(o) for o in informer.store.by_index("value", "y")] == ["a"]
    with pytest.raises(KeyError, match="No index named 'missing'"):
        informer.store.by_index("missing", "x")


def test_stop_from_the_informer_thread_does_not_deadlock(source: FakeSource) -> None:
    source.put("a")
    informer = Informer(source, name="x")
    results: list[bool] = []
    informer.add_handler(on_add=lambda obj: results.append(informer.stop()))
    informer.start()
    assert informer.wait_finished(timeout=5)
    assert results == [False]
    assert informer.error is None


class FailsOnSecondPage(FakeSource):
    """Lists fail once, after the first page was delivered (a broken `continue`)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def pages(self, *, limit: int) -> Iterator[tuple[list[dict[str, Any]], str]]:
        for number, page in enumerate(super().pages(limit=limit)):
            if number == 1 and not self.failed:
                self.failed = True
                raise http_error(500, "InternalError")
            yield page


def test_a_list_failing_mid_pages_changes_nothing_then_retries(
    informers: list[Informer],
) -> None:
    source = FailsOnSecondPage()
    source.put("a", v="1")
    informer = make(source, informers, page_size=1)
    recorder = Recorder(informer)
    informer.start()
    assert informer.wait_synced(timeout=5)
    assert recorder.take(1) == [("add", "a", {"v": "1"})]
    assert source.wait_watching(1)
    for name in ("b", "c"):
        source.silent = True
        source.put(name)
    source.silent = False
    source.forget_history()
    source.drop_watches()
    # The relist breaks after page one ("a"): nothing of it reaches the store or handlers;
    # the retry lists everything and reports what the gap hid.
    events = recorder.take(3)
    assert source.failed and len(source.list_calls) == 3
    assert sorted(e[:2] for e in events) == [("add", "b"), ("add", "c"), ("update", "a")]
    assert sorted(o["metadata"]["name"] for o in informer.store.list()) == ["a", "b", "c"]
