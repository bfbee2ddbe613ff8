"""The latency model: per-verb service times and bounded concurrency, as a real server has."""

from __future__ import annotations

import threading
import time

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.testing import PROFILES, Emulator, LatencyModel

_SLOW = LatencyModel(
    "test", get=0.0, list_base=0.0, list_per_kib=0.0, create=0.0, update=0.0, patch=0.15,
    delete=0.0, slots=1,
)  # fmt: skip


def test_unknown_profile_and_bad_times_are_named() -> None:
    with pytest.raises(ValueError, match=r"unknown latency profile 'kube-9'.*kube-apiserver-1\.32"):
        Emulator(latency="kube-9")
    with pytest.raises(ValueError, match="'bad': times must be >= 0"):
        LatencyModel("bad", -1, 0, 0, 0, 0, 0, 0)


def test_service_times_per_verb() -> None:
    model = PROFILES["kube-apiserver-1.32"]
    assert model.service_time("patch") == model.patch > 0
    assert model.service_time("list", 10 * 1024) == pytest.approx(
        model.list_base + 10 * model.list_per_kib
    )
    assert model.service_time("watch") == 0.0


def test_requests_wait_for_a_slot_and_take_their_service_time() -> None:
    with Emulator(latency=_SLOW) as kube:
        client = kube.config().client(ConfigMap)
        for i in range(3):
            client.create(ConfigMap.model_validate({"metadata": {"name": f"c{i}"}}))
        assert kube.latency is not None and kube.latency.served["create"] == 0  # free verb

        def patch(i: int) -> None:
            client.merge_patch(f"c{i}", {"data": {"k": str(i)}})

        started = time.monotonic()
        threads = [threading.Thread(target=patch, args=(i,)) for i in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        elapsed = time.monotonic() - started
        assert kube.latency.served["patch"] == 3
        assert kube.latency.peak == 1, "one slot: requests must be served one at a time"
        assert elapsed >= 3 * _SLOW.patch  # a lower bound: sleeps never end early
        assert all(client.get(f"c{i}").data == {"k": str(i)} for i in range(3))
