"""Where a process's resident memory is, from /proc/PID/smaps (Linux, glibc, CPython 3.11).

    python bench/memory_map.py PID [PID ...]

Anonymous mappings are told apart by shape: glibc's thread arenas live in heaps aligned to
64 MiB, and threads' stacks are the default 8 MiB mappings (`ulimit -s`). The rest,
`other anonymous`, is mostly CPython's object allocator (1 MiB arenas, which the kernel
merges into one mapping when they are adjacent, so they cannot be counted apart) and mallocs
too large for an arena (mmapped one by one); file-backed pages are the code and data of
Python and its libraries.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

__all__ = ["breakdown"]

ARENA_HEAP = 64 << 20  # glibc HEAP_MAX_SIZE on 64-bit: each thread arena's heap is aligned to it
THREAD_STACK = 8 << 20  # glibc's default stack size (ulimit -s 8192), guard page apart
MAPPING = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \d+\s*(.*)$")


def breakdown(pid: int) -> dict[str, float]:
    """Resident MB of `pid` by kind of mapping (an unreadable process raises OSError)."""
    kinds: dict[str, float] = {}
    kind = ""
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = MAPPING.match(line)
        if head:
            start, end = int(head[1], 16), int(head[2], 16)
            kind = _kind(start, end - start, head[3], head[4])
        elif line.startswith("Rss:"):
            kinds[kind] = kinds.get(kind, 0.0) + int(line.split()[1]) / 1024
    return {name: round(mb, 2) for name, mb in sorted(kinds.items())}


def _kind(start: int, size: int, perms: str, path: str) -> str:
    if path == "[heap]":
        return "main malloc heap"
    if path == "[stack]":
        return "main thread stack"
    if path.startswith("["):
        return "kernel"
    if path:
        return "file-backed"
    if start % ARENA_HEAP == 0 and size <= ARENA_HEAP:
        return "thread malloc arenas"
    if size == THREAD_STACK and "w" in perms:
        return "thread stacks"
    return "other anonymous"


def main() -> None:
    for pid in sys.argv[1:]:
        print(pid, breakdown(int(pid)))


if __name__ == "__main__":
    main()
