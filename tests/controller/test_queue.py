import math
import random
import threading
from collections import Counter

import pytest
from fake_clock import FakeClock

from cloudcoil_sync.controller._internal.queue import QueueClosed, WorkQueue


class RecordingMetrics:
    def __init__(self) -> None:
        self.adds = 0
        self.retries = 0
        self.queued: list[float] = []
        self.worked: list[float] = []

    def added(self) -> None:
        self.adds += 1

    def retried(self) -> None:
        self.retries += 1

    def queued_for(self, seconds: float) -> None:
        self.queued.append(seconds)

    def worked_for(self, seconds: float) -> None:
        self.worked.append(seconds)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def queue(clock: FakeClock) -> WorkQueue[str]:
    return WorkQueue(clock=clock, rng=random.Random(7))


def drain(queue: WorkQueue[str]) -> list[str]:
    keys = []
    while (key := queue.get(timeout=0)) is not None:
        keys.append(key)
        queue.done(key)
    return keys


def test_repeated_adds_coalesce_and_order_is_fifo(queue: WorkQueue[str]) -> None:
    for key in ["a", "b", "a", "c", "b", "a"]:
        queue.add(key)
    assert queue.depth == 3
    assert drain(queue) == ["a", "b", "c"]
    assert queue.get(timeout=0) is None


def test_key_added_while_processing_runs_once_more_after_done(queue: WorkQueue[str]) -> None:
    queue.add("a")
    assert queue.get() == "a"
    queue.add("a")
    queue.add("a")
    assert queue.depth == 0
    assert queue.processing == 1
    assert queue.get(timeout=0) is None  # never handed to a second worker
    queue.done("a")
    assert queue.depth == 1
    assert drain(queue) == ["a"]


def test_done_requires_a_processing_key(queue: WorkQueue[str]) -> None:
    with pytest.raises(ValueError, match="'a', which is not being processed"):
        queue.done("a")
    queue.add("a")
    with pytest.raises(ValueError, match="not being processed"):
        queue.done("a")


def test_add_after_fires_at_deadline(queue: WorkQueue[str], clock: FakeClock) -> None:
    queue.add_after("a", 10)
    assert (queue.depth, queue.delayed) == (0, 1)
    clock.advance(9.99)
    assert queue.get(timeout=0) is None
    clock.advance(0.01)
    assert queue.get(timeout=0) == "a"
    assert queue.delayed == 0


def test_add_after_keeps_the_earliest_deadline(queue: WorkQueue[str], clock: FakeClock) -> None:
    queue.add_after("a", 10)
    queue.add_after("a", 5)
    queue.add_after("a", 8)
    assert queue.delayed == 1
    clock.advance(5)
    assert drain(queue) == ["a"]
    clock.advance(100)
    assert drain(queue) == []  # the superseded timers are gone


def test_delayed_keys_release_in_deadline_order(queue: WorkQueue[str], clock: FakeClock) -> None:
    queue.add_after("late", 3)
    queue.add_after("early", 1)
    queue.add_after("middle", 2)
    clock.advance(3)
    assert drain(queue) == ["early", "middle", "late"]


def test_fresh_add_cancels_a_pending_timer(queue: WorkQueue[str], clock: FakeClock) -> None:
    queue.add_after("a", 10)
    queue.add("a")
    assert queue.delayed == 0
    assert drain(queue) == ["a"]
    clock.advance(60)
    assert drain(queue) == []


def test_add_after_is_ignored_for_a_pending_key(queue: WorkQueue[str], clock: FakeClock) -> None:
    queue.add("a")
    queue.add_after("a", 5)
    assert queue.delayed == 0
    assert drain(queue) == ["a"]
    clock.advance(10)
    assert drain(queue) == []


def test_add_after_during_processing_schedules_a_later_pass(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add("a")
    assert queue.get() == "a"
    queue.add_after("a", 5)
    queue.done("a")
    assert queue.get(timeout=0) is None
    clock.advance(5)
    assert drain(queue) == ["a"]


def test_add_after_zero_adds_now_and_bad_delays_raise(queue: WorkQueue[str]) -> None:
    queue.add_after("a", 0)
    assert queue.depth == 1
    for bad in (-1, math.nan, math.inf, "1", None):
        with pytest.raises(ValueError, match="delay must be finite and nonnegative"):
            queue.add_after("a", bad)  # type: ignore[arg-type]


def test_retry_backoff_doubles_to_the_cap_without_jitter(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(jitter=0, clock=clock)
    delays = []
    for _ in range(9):
        delays.append(queue.retry("a"))
        clock.advance(delays[-1])
        assert drain(queue) == ["a"]
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert queue.num_retries("a") == 9
    queue.forget("a")
    assert queue.num_retries("a") == 0
    assert queue.retry("a") == 1


def test_retry_fires_exactly_after_its_delay(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(jitter=0, clock=clock)
    queue.retry("a")
    clock.advance(0.999)
    assert queue.get(timeout=0) is None
    clock.advance(0.001)
    assert queue.get(timeout=0) == "a"


def test_retry_jitter_stays_within_ten_percent_and_under_the_cap(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=clock, rng=random.Random(1))
    for attempt in range(12):
        key = f"k{attempt}"
        for _ in range(attempt):
            queue.retry(key)
        delay = queue.retry(key)
        nominal = min(60.0, 2.0**attempt)
        assert nominal * 0.9 <= delay <= min(60.0, nominal * 1.1)
    samples = [WorkQueue[str](rng=random.Random(seed)).retry("a") for seed in range(50)]
    assert min(samples) < 0.97 and max(samples) > 1.03  # jitter actually applied


def test_retry_is_per_key_and_small_settings_cap(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=0.001, max_delay=0.004, jitter=0, clock=clock)
    assert [queue.retry("a") for _ in range(4)] == [0.001, 0.002, 0.004, 0.004]
    assert queue.retry("b") == 0.001


def test_fresh_event_supersedes_backoff(clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(jitter=0, clock=clock)
    queue.retry("a")
    queue.retry("a")
    queue.add("a")
    assert drain(queue) == ["a"]
    assert queue.num_retries("a") == 2  # counting continues until forget


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base_delay": 0},
        {"base_delay": 2, "max_delay": 1},
        {"jitter": -0.1},
        {"jitter": 1.5},
        {"base_delay": math.nan},
        {"max_delay": math.inf},
    ],
)
def test_invalid_settings_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        WorkQueue(**kwargs)  # type: ignore[arg-type]


def test_shutdown_drains_ready_work_and_drops_timers(
    queue: WorkQueue[str], clock: FakeClock
) -> None:
    queue.add("a")
    queue.add("b")
    queue.add_after("later", 1)
    queue.retry("c")
    queue.shutdown()
    assert queue.closed
    queue.add("new")
    queue.add_after("new", 1)
    assert queue.retry("c") == 0.0
    assert queue.num_retries("c") == 0
    clock.advance(100)
    assert queue.get() == "a"
    queue.done("a")
    assert queue.get() == "b"
    queue.done("b")
    with pytest.raises(QueueClosed):
        queue.get()
    with pytest.raises(QueueClosed):
        queue.get(timeout=0)


def test_shutdown_keeps_a_dirty_in_flight_key_for_draining(queue: WorkQueue[str]) -> None:
    queue.add("a")
    assert queue.get() == "a"
    queue.add("a")
    queue.shutdown()
    queue.done("a")
    assert queue.get() == "a"
    queue.done("a")
    with pytest.raises(QueueClosed):
        queue.get()


def test_immediate_shutdown_discards_pending_work(queue: WorkQueue[str]) -> None:
    queue.add("a")
    queue.add("b")
    assert queue.get() == "a"
    queue.add("a")
    queue.shutdown(immediate=True)
    queue.done("a")
    with pytest.raises(QueueClosed):
        queue.get()
    assert queue.join(timeout=0)


def test_join_waits_for_in_flight_and_delayed_work(queue: WorkQueue[str], clock: FakeClock) -> None:
    assert queue.join(timeout=0)
    queue.add("a")
    assert not queue.join(timeout=0)
    key = queue.get()
    assert not queue.join(timeout=0)
    queue.done(key)
    assert queue.join(timeout=0)
    queue.add_after("b", 1)
    assert not queue.join(timeout=0)
    clock.advance(1)
    assert drain(queue) == ["b"]
    assert queue.join(timeout=0)


def test_blocked_getters_are_woken_by_add_and_by_shutdown() -> None:
    queue: WorkQueue[str] = WorkQueue()
    got: list[str] = []
    closed: list[bool] = []

    def worker() -> None:
        try:
            while True:
                key = queue.get()
                got.append(key)
                queue.done(key)
        except QueueClosed:
            closed.append(True)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    queue.add("a")
    queue.add("b")
    queue.shutdown()
    for thread in threads:
        thread.join(timeout=5)
        assert not thread.is_alive()
    assert sorted(got) == ["a", "b"]
    assert closed == [True, True, True]


def test_blocked_getter_wakes_for_a_delayed_key_on_the_real_clock() -> None:
    queue: WorkQueue[str] = WorkQueue()
    result: list[str | None] = []
    waiting = threading.Thread(target=lambda: result.append(queue.get(timeout=10)))
    waiting.start()
    queue.add_after("soon", 0.05)  # earlier than the getter's 10 s timeout: it must re-plan
    waiting.join(timeout=5)
    assert not waiting.is_alive()
    assert result == ["soon"]


def test_get_timeout_returns_none() -> None:
    queue: WorkQueue[str] = WorkQueue()
    assert queue.get(timeout=0.01) is None


def test_keys_are_never_processed_concurrently_under_load() -> None:
    queue: WorkQueue[int] = WorkQueue(base_delay=0.001, max_delay=0.002)
    lock = threading.Lock()
    active: set[int] = set()
    violations: list[int] = []
    passes: Counter[int] = Counter()
    last_pass_after_final_add: dict[int, bool] = {}
    final_adds_done = threading.Event()

    def worker() -> None:
        while True:
            try:
                key = queue.get()
            except QueueClosed:
                return
            with lock:
                if key in active:
                    violations.append(key)
                active.add(key)
                passes[key] += 1
                if final_adds_done.is_set():
                    last_pass_after_final_add[key] = True
            if key % 7 == 0 and passes[key] < 3:
                queue.retry(key)
            with lock:
                active.discard(key)
            queue.done(key)

    def producer(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(2000):
            queue.add(rng.randrange(40))

    workers = [threading.Thread(target=worker) for _ in range(8)]
    producers = [threading.Thread(target=producer, args=(seed,)) for seed in range(4)]
    for thread in workers + producers:
        thread.start()
    for thread in producers:
        thread.join(timeout=30)
    final_adds_done.set()
    for key in range(40):
        queue.add(key)
    assert queue.join(timeout=30)
    queue.shutdown()
    for thread in workers:
        thread.join(timeout=10)
        assert not thread.is_alive()
    assert violations == []
    assert set(last_pass_after_final_add) == set(range(40))  # every last add got a pass
    assert sum(passes.values()) < 8000 + 40 + 40 * 3  # coalescing happened or at worst none


def test_metrics_hooks_follow_client_go(clock: FakeClock) -> None:
    metrics = RecordingMetrics()
    queue: WorkQueue[str] = WorkQueue(clock=clock, metrics=metrics, jitter=0)
    queue.add("a")
    queue.add("a")
    queue.add("b")
    assert metrics.adds == 2
    assert (queue.pending, queue.delayed) == (2, 0)
    clock.advance(2)
    key = queue.get()
    assert metrics.queued == [2.0]
    clock.advance(3)
    assert queue.unfinished_work_seconds() == 3
    assert queue.longest_running_processor_seconds() == 3
    other = queue.get()
    clock.advance(1)
    assert queue.unfinished_work_seconds() == 4 + 1
    assert queue.longest_running_processor_seconds() == 4
    queue.done(key)
    queue.done(other)
    assert metrics.worked == [4.0, 1.0]
    assert queue.longest_running_processor_seconds() == 0
    queue.retry("c")
    queue.add_after("d", 0)
    assert metrics.retries == 1
    assert (queue.pending, queue.delayed) == (1, 1)
    clock.advance(1)
    assert queue.get() == "d"
    queue.done("d")
    assert queue.get() == "c"
    assert metrics.queued[-1] == 0
    assert (queue.pending, queue.delayed) == (0, 0)


def test_cancelled_timers_do_not_accumulate(queue: WorkQueue[str]) -> None:
    for i in range(5000):
        queue.add_after("a", 10 - i * 0.001)  # each supersedes the previous deadline
    assert queue.delayed == 1
    assert len(queue._timers) <= 2 * 1 + 65


class _Entered(threading.Condition):
    """A queue's condition that counts the threads that went to sleep on it."""

    def __init__(self, lock: threading.Lock, sleepers: int) -> None:
        super().__init__(lock)
        self.sleepers = sleepers
        self.all_asleep = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.sleepers -= 1  # under the queue's lock
        if self.sleepers == 0:
            self.all_asleep.set()
        return super().wait(timeout)


def test_getters_asleep_are_each_woken_by_an_add_from_another_thread() -> None:
    queue: WorkQueue[str] = WorkQueue()
    available = queue._available = _Entered(queue._lock, 2)
    got: list[str] = []
    getters = [
        threading.Thread(target=lambda: got.append(queue.get(timeout=3600)), daemon=True)
        for _ in range(2)
    ]
    for getter in getters:
        getter.start()
    assert available.all_asleep.wait(10)  # both wait: nothing is ready
    adder = threading.Thread(target=lambda: [queue.add("a"), queue.add("b")])
    adder.start()
    adder.join(10)
    for getter in getters:
        getter.join(10)
        assert not getter.is_alive()  # woken by the add, not by its timeout
    assert sorted(got) == ["a", "b"]


def test_a_join_asleep_is_woken_when_the_last_key_is_done() -> None:
    queue: WorkQueue[str] = WorkQueue()
    idle = queue._idle = _Entered(queue._lock, 1)
    queue.add("a")
    assert queue.get() == "a"
    joined: list[bool] = []
    joiner = threading.Thread(target=lambda: joined.append(queue.join(3600)), daemon=True)
    joiner.start()
    assert idle.all_asleep.wait(10)
    threading.Thread(target=queue.done, args=("a",)).start()
    joiner.join(10)
    assert not joiner.is_alive() and joined == [True]
