import re
import threading
import time
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace
from waiting import wait_until

from cloudcoil_sync.client import Config
from cloudcoil_sync.controller._internal.events import EVENTS, EventRecorder
from cloudcoil_sync.testing import Emulator


class FakeClock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def configmap(kube_config: Config) -> ConfigMap:
    return kube_config.client(ConfigMap).create({"metadata": {"name": "subject"}})


def events(config: Config, namespace: str = "default") -> list[dict[str, Any]]:
    return config.client(EVENTS).list(namespace=namespace).items


def test_event_wire_format(
    kube_emulator: Emulator, kube_config: Config, configmap: ConfigMap
) -> None:
    recorder = EventRecorder("cloudcoil/widgets", config=kube_config)
    assert recorder.emit(configmap, "Reconciled", "all good", action="Provision")
    [event] = events(kube_config)
    assert event["metadata"]["name"].startswith("cloudcoil-")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", event["eventTime"])
    assert configmap.metadata is not None
    assert event["regarding"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "subject",
        "namespace": "default",
        "uid": configmap.metadata.uid,
    }
    assert {k: event[k] for k in ("reason", "action", "note", "type")} == {
        "reason": "Reconciled",
        "action": "Provision",
        "note": "all good",
        "type": "Normal",
    }
    assert event["reportingController"] == "cloudcoil/widgets"
    assert event["reportingInstance"] == recorder.instance


def test_repeats_are_suppressed_for_the_interval(
    kube_emulator: Emulator, kube_config: Config, configmap: ConfigMap, clock: FakeClock
) -> None:
    recorder = EventRecorder(config=kube_config, clock=clock)
    assert recorder.emit(configmap, "Failed", "first", type="Warning")
    assert not recorder.emit(configmap, "Failed", "a different message", type="Warning")
    assert recorder.emit(configmap, "Failed", "other type")  # Normal is another key
    assert recorder.emit(configmap, "Other", "other reason")
    assert recorder.emit(configmap, "Failed", "other action", type="Warning", action="Cleanup")
    clock.now += 59.999
    assert not recorder.emit(configmap, "Failed", "still quiet", type="Warning")
    clock.now += 0.001
    assert recorder.emit(configmap, "Failed", "again", type="Warning")
    notes = sorted(e["note"] for e in events(kube_config))
    assert notes == ["again", "first", "other action", "other reason", "other type"]


def test_interval_zero_suppresses_no_repeat(
    kube_emulator: Emulator, kube_config: Config, configmap: ConfigMap, clock: FakeClock
) -> None:
    recorder = EventRecorder(config=kube_config, clock=clock, interval=0)
    assert recorder.emit(configmap, "Failed", "first", type="Warning")
    assert recorder.emit(configmap, "Failed", "first", type="Warning")
    assert recorder.emit(configmap, "Failed", "second", type="Warning")
    assert sorted(e["note"] for e in events(kube_config)) == ["first", "first", "second"]


def test_by_message_suppresses_only_repeats_of_the_same_message(
    kube_emulator: Emulator, kube_config: Config, configmap: ConfigMap, clock: FakeClock
) -> None:
    recorder = EventRecorder(config=kube_config, clock=clock, by_message=True)
    assert recorder.emit(configmap, "Failed", "disk full", type="Warning")
    assert not recorder.emit(configmap, "Failed", "disk full", type="Warning")
    assert recorder.emit(configmap, "Failed", "quota exceeded", type="Warning")
    clock.now += 60
    assert recorder.emit(configmap, "Failed", "disk full", type="Warning")
    notes = sorted(e["note"] for e in events(kube_config))
    assert notes == ["disk full", "disk full", "quota exceeded"]


def test_dict_objects_and_missing_uids(
    kube_emulator: Emulator, kube_config: Config, configmap: ConfigMap
) -> None:
    recorder = EventRecorder(config=kube_config)
    raw = kube_config.client(ConfigMap).raw.get("subject")
    assert recorder.emit(raw, "FromDict", "raw JSON objects work too")
    assert not recorder.emit({"metadata": {"name": "x"}}, "NoUid", "skipped")
    assert not recorder.emit(ConfigMap.model_validate({"metadata": {"name": "x"}}), "NoUid", "")
    assert [e["reason"] for e in events(kube_config)] == ["FromDict"]


def test_cluster_scoped_objects_use_the_recorder_or_config_namespace(
    kube_emulator: Emulator, kube_config: Config
) -> None:
    namespace = kube_config.client(Namespace).get("default")
    assert EventRecorder(config=kube_config).emit(namespace, "Seen", "in config namespace")
    kube_config.client(Namespace).create({"metadata": {"name": "operators"}})
    recorder = EventRecorder(config=kube_config, namespace="operators")
    assert recorder.emit(namespace, "Seen", "in recorder namespace")
    [first] = events(kube_config, "default")
    [second] = events(kube_config, "operators")
    assert "namespace" not in first["regarding"] and "namespace" not in second["regarding"]
    assert first["regarding"]["kind"] == "Namespace"


def test_burst_then_five_per_second(
    kube_emulator: Emulator, kube_config: Config, configmap: ConfigMap, clock: FakeClock
) -> None:
    recorder = EventRecorder(config=kube_config, clock=clock)
    sent = [recorder.emit(configmap, f"R{i}", "") for i in range(25)]
    assert sent == [True] * 20 + [False] * 5
    clock.now += 1
    sent = [recorder.emit(configmap, f"S{i}", "") for i in range(7)]
    assert sent == [True] * 5 + [False] * 2
    assert len(events(kube_config)) == 25


def test_recent_keys_are_a_bounded_lru(kube_config: Config, configmap: ConfigMap) -> None:
    recorder = EventRecorder(config=kube_config, max_keys=2)
    assert recorder.emit(configmap, "A", "")
    assert recorder.emit(configmap, "B", "")
    assert not recorder.emit(configmap, "A", "")  # refreshes nothing: still suppressed
    assert recorder.emit(configmap, "C", "")  # evicts A (least recently reserved)
    assert recorder.emit(configmap, "A", "")
    assert not recorder.emit(configmap, "C", "")


def test_notes_are_truncated(
    kube_emulator: Emulator, kube_config: Config, configmap: ConfigMap
) -> None:
    assert EventRecorder(config=kube_config).emit(configmap, "Long", "x" * 5000)
    assert events(kube_config)[0]["note"] == "x" * 1024


def test_api_failures_return_false_and_keep_the_reservation(
    kube_emulator: Emulator, configmap: ConfigMap, caplog: pytest.LogCaptureFixture
) -> None:
    token = kube_emulator.service_account_token("default", "no-events")
    config = kube_emulator.config(token=token)
    recorder = EventRecorder(config=config)
    assert not recorder.emit(configmap, "Denied", "forbidden")
    assert "Could not record Event Denied for ConfigMap/subject" in caplog.text
    caplog.clear()
    assert not recorder.emit(configmap, "Denied", "again")
    assert caplog.text == ""  # suppressed without another attempt


def test_slow_api_is_bounded_by_the_timeout(
    kube_emulator: Emulator, kube_config: Config, configmap: ConfigMap
) -> None:
    kube_emulator.faults.add_latency(1.0, method="POST", path="events")
    recorder = EventRecorder(config=kube_config, timeout=0.2)
    assert not recorder.emit(configmap, "Slow", "")
    gave_up = time.monotonic()

    def answered() -> list[float]:
        log = kube_emulator.request_log
        return [e.at for e in log if e.method == "POST" and e.path.endswith("/events")]

    assert wait_until(lambda: bool(answered()), 10)
    assert gave_up < answered()[0]  # it did not wait for the slow answer


def test_concurrent_repeats_coalesce(
    kube_emulator: Emulator, kube_config: Config, configmap: ConfigMap
) -> None:
    recorder = EventRecorder(config=kube_config)
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def emit() -> None:
        barrier.wait(timeout=5)
        results.append(recorder.emit(configmap, "Same", "race"))

    threads = [threading.Thread(target=emit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(results) == [False] * 7 + [True]
    assert len(events(kube_config)) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reason": "bad reason"}, "Event reason must be a nonempty identifier"),
        ({"reason": "1st"}, "Event reason must be a nonempty identifier"),
        ({"reason": ""}, "Event reason must be a nonempty identifier"),
        ({"reason": "R" * 129}, "at most 128 characters"),
        ({"reason": "R", "type": "Info"}, "Event type must be Normal or Warning"),
        ({"reason": "R", "action": ""}, "Event action must contain 1-128 characters"),
        ({"reason": "R", "action": "a" * 129}, "Event action must contain 1-128 characters"),
    ],
)
def test_programming_errors_raise(kwargs: dict[str, Any], message: str) -> None:
    recorder = EventRecorder()
    subject = {"metadata": {"name": "x", "uid": "u"}}
    with pytest.raises(ValueError, match=message):
        recorder.emit(subject, message="m", **kwargs)


def test_settings_validation_and_missing_config() -> None:
    with pytest.raises(ValueError, match="reporting_controller must contain 1-128"):
        EventRecorder("")
    with pytest.raises(ValueError, match="interval must be finite and not negative"):
        EventRecorder(interval=-1)
    with pytest.raises(ValueError, match="interval must be finite and not negative"):
        EventRecorder(interval=float("nan"))
    with pytest.raises(ValueError, match="finite and positive"):
        EventRecorder(timeout=float("inf"))
    with pytest.raises(ValueError, match="max_keys must be a positive integer"):
        EventRecorder(max_keys=0)
    with pytest.raises(RuntimeError, match="pass config= or bind"):
        EventRecorder().emit({"metadata": {"name": "x", "uid": "u"}}, "R", "m")
