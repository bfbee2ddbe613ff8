"""The informer over the real client and HTTP, against the emulator and its faults."""

import queue
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller._internal.informer import ClientListWatch, Informer, InformerFailed
from cloudcoil_sync.testing import Emulator

Event = tuple[str, str, Any]


class Events:
    def __init__(self, informer: Informer) -> None:
        self.queue: queue.Queue[Event] = queue.Queue()
        informer.add_handler(
            on_add=lambda o: self.queue.put(("add", _name(o), _uid(o))),
            on_update=lambda old, new: self.queue.put(("update", _name(new), _data(new))),
            on_delete=lambda o: self.queue.put(("delete", _name(o), _uid(o))),
        )

    def take(self, count: int) -> list[Event]:
        return [self.queue.get(timeout=10) for _ in range(count)]

    def until(self, wanted: Event) -> list[Event]:
        """Events up to and including `wanted` (fails after 10 s without it)."""
        seen = []
        while True:
            event = self.queue.get(timeout=10)
            seen.append(event)
            if event == wanted:
                return seen


def _name(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _uid(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["uid"])


def _data(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(obj.get("data") or {})


@pytest.fixture
def started() -> Iterator[list[Informer]]:
    informers: list[Informer] = []
    yield informers
    for informer in informers:
        assert informer.stop(timeout=5)


def informer_for(
    config: Config, started: list[Informer], namespace: str | None = "default", **options: Any
) -> Informer:
    options.setdefault("min_backoff", 0.01)
    options.setdefault("max_backoff", 0.05)
    source = ClientListWatch(
        config.client(ConfigMap),
        namespace=namespace,
        label_selector=options.pop("label_selector", None),
    )
    informer = Informer(source, name="configmaps", **options)
    started.append(informer)
    return informer


def create(config: Config, name: str, **data: str) -> dict[str, Any]:
    api = config.client(ConfigMap).raw
    return api.create({"metadata": {"name": name}, "data": data})


def test_lists_pages_then_watches(kube_config: Config, started: list[Informer]) -> None:
    for i in range(7):
        create(kube_config, f"cm{i}")
    informer = informer_for(kube_config, started, page_size=3)
    events = Events(informer)
    informer.start()
    assert informer.wait_synced(timeout=10)
    assert sorted(e[1] for e in events.take(7)) == [f"cm{i}" for i in range(7)]
    create(kube_config, "later", v="1")
    kube_config.client(ConfigMap).raw.merge_patch("later", {"data": {"v": "2"}})
    kube_config.client(ConfigMap).delete("cm0")
    assert [e[:2] for e in events.take(3)] == [
        ("add", "later"),
        ("update", "later"),
        ("delete", "cm0"),
    ]
    assert sorted(o["metadata"]["name"] for o in informer.store.list()) == sorted(
        ["later"] + [f"cm{i}" for i in range(1, 7)]
    )


def test_dropped_watch_resumes_without_loss_or_relist(
    kube_emulator: Emulator, kube_config: Config, started: list[Informer]
) -> None:
    informer = informer_for(kube_config, started)
    events = Events(informer)
    informer.start()
    assert informer.wait_synced(timeout=10)
    assert kube_emulator.wait_for(lambda: kube_emulator.open_watches == 1)
    for abort in (False, True):
        kube_emulator.drop_watches(abort=abort)
        create(kube_config, f"after-drop-{abort!s}".lower())
        assert events.take(1)[0][:2] == ("add", f"after-drop-{abort!s}".lower())
    assert informer.list_count == 1


class Gate:
    """A handler that holds the informer thread when it sees the object named "gate"."""

    def __init__(self, informer: Informer) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        informer.add_handler(on_add=self._on_add)

    def _on_add(self, obj: dict[str, Any]) -> None:
        if _name(obj) == "gate":
            self.reached.set()
            assert self.release.wait(timeout=10)


def test_410_relist_reports_what_changed_in_the_gap(
    kube_emulator: Emulator, kube_config: Config, started: list[Informer]
) -> None:
    api = kube_config.client(ConfigMap).raw
    create(kube_config, "kept")
    doomed = create(kube_config, "doomed")
    create(kube_config, "changed", v="old")
    reborn = create(kube_config, "reborn")
    informer = informer_for(kube_config, started)
    gate = Gate(informer)
    events = Events(informer)
    informer.start()
    assert informer.wait_synced(timeout=10)
    events.take(4)
    assert kube_emulator.wait_for(lambda: kube_emulator.open_watches == 1)

    # Hold the informer thread, cut its watch, change things and lose their history.
    create(kube_config, "gate")
    assert gate.reached.wait(timeout=10)
    kube_emulator.drop_watches(abort=True)
    assert kube_emulator.wait_for(lambda: kube_emulator.open_watches == 0)
    api.delete("doomed")
    api.merge_patch("changed", {"data": {"v": "new"}})
    api.delete("reborn")
    reborn_again = create(kube_config, "reborn")
    born = create(kube_config, "born")
    kube_emulator.forget_history()
    gate.release.set()

    seen = events.take(8)
    assert ("add", "gate", _uid(api.get("gate"))) == seen[0]
    assert sorted(seen[1:]) == sorted(
        [
            ("update", "kept", {}),
            ("update", "gate", {}),
            ("update", "changed", {"v": "new"}),
            ("delete", "doomed", _uid(doomed)),
            ("delete", "reborn", _uid(reborn)),
            ("add", "reborn", _uid(reborn_again)),
            ("add", "born", _uid(born)),
        ]
    )
    assert seen.index(("delete", "reborn", _uid(reborn))) < seen.index(
        ("add", "reborn", _uid(reborn_again))
    )
    assert informer.store.get("default", "doomed") is None
    assert informer.list_count == 2


def test_restart_with_history_loss_converges(
    kube_emulator: Emulator, kube_config: Config, started: list[Informer]
) -> None:
    first = create(kube_config, "a")
    informer = informer_for(kube_config, started)
    events = Events(informer)
    informer.start()
    assert informer.wait_synced(timeout=10)
    events.take(1)
    assert kube_emulator.wait_for(lambda: kube_emulator.open_watches == 1)
    kube_emulator.restart(lose_history=True)
    kube_config.client(ConfigMap).delete("a")
    assert ("delete", "a", _uid(first)) in events.until(("delete", "a", _uid(first)))
    assert informer.store.get("default", "a") is None


def test_403_on_list_is_fatal(
    kube_emulator: Emulator, kube_config: Config, started: list[Informer]
) -> None:
    token = kube_emulator.service_account_token("default", "nobody")
    config = kube_emulator.config(token=token)
    failures: list[BaseException] = []
    informer = informer_for(config, started, on_failure=failures.append)
    informer.start()
    with pytest.raises(InformerFailed, match=r"403 Forbidden.*check the operator's Role"):
        informer.wait_synced(timeout=10)
    assert informer.wait_finished(timeout=5)
    assert len(failures) == 1


def test_5xx_storm_on_list_is_retried(
    kube_emulator: Emulator, kube_config: Config, started: list[Informer]
) -> None:
    create(kube_config, "a")
    kube_emulator.faults.inject(500, count=4, method="GET", path="configmaps")
    # No client-level retries: the informer's own backoff must carry it through.
    config = Config(
        kube_emulator.url,
        token=kube_emulator.admin_token,
        ca_data=kube_emulator.ca_pem,
        max_retries=0,
    )
    informer = informer_for(config, started)
    events = Events(informer)
    informer.start()
    assert informer.wait_synced(timeout=20)
    assert events.take(1)[0][:2] == ("add", "a")


def test_label_selector_scopes_the_cache(kube_config: Config, started: list[Informer]) -> None:
    api = kube_config.client(ConfigMap).raw
    api.create({"metadata": {"name": "in", "labels": {"pick": "yes"}}})
    api.create({"metadata": {"name": "out"}})
    informer = informer_for(kube_config, started, label_selector="pick=yes")
    events = Events(informer)
    informer.start()
    assert informer.wait_synced(timeout=10)
    assert events.take(1)[0][:2] == ("add", "in")
    # Dropping the label makes the object leave the watched scope.
    api.merge_patch("in", {"metadata": {"labels": {"pick": None}}})
    assert events.take(1)[0][:2] == ("delete", "in")
    assert len(informer.store) == 0


def test_stop_closes_the_watch_promptly(
    kube_emulator: Emulator, kube_config: Config, started: list[Informer]
) -> None:
    informer = informer_for(kube_config, started, namespace=None)
    informer.start()
    assert informer.wait_synced(timeout=10)
    assert kube_emulator.wait_for(lambda: kube_emulator.open_watches == 1)
    assert informer.stop(timeout=2)
    assert informer.error is None
    # The server notices the closed connection when its writes to the stream fail.
    for i in range(10):
        create(kube_config, f"poke{i}")
        if kube_emulator.wait_for(lambda: kube_emulator.open_watches == 0, timeout=0.2):
            break
    assert kube_emulator.open_watches == 0


def test_cache_and_dispatch_converge_under_repeated_faults(
    kube_emulator: Emulator, kube_config: Config, started: list[Informer]
) -> None:
    rng = random.Random(1234)
    api = kube_config.client(ConfigMap).raw
    last: dict[str, tuple[str, str]] = {}  # name -> (last dispatched kind, resourceVersion)
    guard = threading.Lock()

    def seen(kind: str, obj: dict[str, Any]) -> None:
        with guard:
            last[_name(obj)] = (kind, obj["metadata"]["resourceVersion"])

    informer = informer_for(kube_config, started)
    informer.add_handler(
        on_add=lambda o: seen("add", o),
        on_update=lambda old, new: seen("update", new),
        on_delete=lambda o: seen("delete", o),
    )
    informer.start()
    assert informer.wait_synced(timeout=10)
    present: set[str] = set()
    for step in range(240):
        name = f"obj{rng.randrange(20)}"
        if name not in present:
            api.create({"metadata": {"name": name}, "data": {"step": str(step)}})
            present.add(name)
        elif rng.random() < 0.3:
            api.delete(name)
            present.discard(name)
        else:
            api.merge_patch(name, {"data": {"step": str(step)}})
        if step % 20 == 10:
            fault = (step // 20) % 3
            if fault == 2:
                kube_emulator.forget_history()
            kube_emulator.drop_watches(abort=fault == 1)

    final = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in api.list().items}
    assert set(final) == present

    def caught_up() -> bool:
        cached = {
            o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store.list()
        }
        with guard:
            dispatched_alive = {n for n, (kind, _) in last.items() if kind != "delete"}
        return cached == final and dispatched_alive == set(final)

    assert kube_emulator.wait_for(caught_up, timeout=20)
    with guard:
        for name, version in final.items():
            assert last[name][1] == version  # handlers saw the final state of every object
    assert informer.error is None


def test_an_event_too_long_for_the_client_relists(
    kube_emulator: Emulator,
    kube_config: Config,
    started: list[Informer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 37, finding 5: an over-long watch line is a typed error and a relist (the list
    # has no line limit), never an endless re-watch from the same resourceVersion.
    monkeypatch.setattr("cloudcoil_sync.client._internal.watch.MAX_EVENT_BYTES", 2048)
    informer = informer_for(kube_config, started)
    events = Events(informer)
    informer.start()
    assert informer.wait_synced(timeout=10)
    assert kube_emulator.wait_for(lambda: kube_emulator.open_watches == 1)
    create(kube_config, "big", blob="x" * 4096)
    assert events.until(("add", "big", ANY_UID))[-1][:2] == ("add", "big")
    assert informer.list_count == 2
    create(kube_config, "small", note="fits")  # the watch goes on after the relist
    assert events.until(("add", "small", ANY_UID))[-1][:2] == ("add", "small")
    assert informer.list_count == 2


class _Any:
    def __eq__(self, other: object) -> bool:
        return True


ANY_UID: Any = _Any()
