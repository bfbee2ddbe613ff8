"""CPU per event of the same small work handed to a thread back to back or spaced out.

    python bench/wake_cost.py

Each event is 20 JSON decodes of a ~400-byte object, put on a queue that one consumer thread
drains. Reports process CPU microseconds per event with no gap and with 10 ms and 40 ms
between events: what a process that idles between watch events pays on this machine (cold
caches, the CPU's wake-up), which a replica holding 1/N of the objects meets N times as often
(bench/sharding-results.md).
"""

from __future__ import annotations

import json
import queue
import threading
import time

DOC = json.dumps(
    {
        "metadata": {"name": "x" * 20, "labels": {f"k{i}": "v" * 10 for i in range(10)}},
        "data": {"s": "k=v;" * 24},
    }
)


def cpu_per_event(count: int, gap: float) -> float:
    """Process CPU microseconds per event, `gap` seconds between events."""
    events: queue.Queue[int] = queue.Queue()

    def consume() -> None:
        for _ in range(count):
            events.get()
            for _ in range(20):
                json.loads(DOC)

    consumer = threading.Thread(target=consume)
    consumer.start()
    began = time.process_time()
    for _ in range(count):
        if gap:
            time.sleep(gap)
        events.put(1)
    consumer.join()
    return (time.process_time() - began) / count * 1e6


def main() -> None:
    for label, count, gap in (
        ("back to back", 2000, 0.0),
        ("10 ms", 300, 0.01),
        ("40 ms", 100, 0.04),
    ):
        print(f"{label:>12}: {cpu_per_event(count, gap):6.1f} us CPU per event")


if __name__ == "__main__":
    main()
