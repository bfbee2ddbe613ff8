"""Token bucket and retry policy."""

from __future__ import annotations

import threading

from cloudcoil_sync.client._internal.ratelimit import TokenBucket
from cloudcoil_sync.client._internal.retry import RetryPolicy


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_burst_then_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, 5, clock=clock, sleep=clock.sleep)
    waits = [bucket.acquire() for _ in range(8)]
    assert waits[:5] == [0.0] * 5
    assert waits[5:] == [0.1, 0.1, 0.1] or all(abs(w - 0.1) < 1e-9 for w in waits[5:])
    clock.now += 10  # refills to burst, never beyond
    assert [bucket.reserve() for _ in range(5)] == [0.0] * 5
    assert bucket.reserve() > 0


def test_disabled_when_qps_not_positive() -> None:
    for qps in (0, -1):
        bucket = TokenBucket(qps, 1)
        assert not bucket.enabled
        assert all(bucket.acquire() == 0.0 for _ in range(1000))


def test_threads_share_the_budget() -> None:
    clock = FakeClock()
    lock = threading.Lock()
    bucket = TokenBucket(100, 10, clock=clock, sleep=lambda s: None)
    delays: list[float] = []

    def take() -> None:
        for _ in range(20):
            d = bucket.reserve()
            with lock:
                delays.append(d)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    # 80 reservations with no time passing: 10 free, the rest queued 10 ms apart.
    assert sorted(delays)[-1] == 70 * 0.01 or abs(sorted(delays)[-1] - 0.7) < 1e-9
    assert sum(1 for d in delays if d == 0) == 10


def test_retry_policy() -> None:
    policy = RetryPolicy(max_retries=3, base=0.1, cap=1.0)
    assert policy.should_retry_status("POST", 429)
    assert policy.should_retry_status("PATCH", 429)
    assert policy.should_retry_status("GET", 503)
    assert policy.should_retry_status("PUT", 500)
    assert not policy.should_retry_status("POST", 500)
    assert not policy.should_retry_status("PATCH", 503)
    assert not policy.should_retry_status("DELETE", 500)
    assert not policy.should_retry_status("GET", 404)
    assert policy.delay(0, retry_after=7) == 7
    assert policy.delay(0, retry_after=1000) == policy.max_retry_after
    assert 0.05 <= policy.delay(0) <= 0.1
    assert 0.5 <= policy.delay(10) <= 1.0
