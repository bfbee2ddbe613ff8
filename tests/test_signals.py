"""A signal whose handler is left pending (it landed on another thread, as it can land just
before the main thread blocks) still runs while the main thread waits in `wait_event` and
`join_thread`; a plain untimed wait would sleep through it. Each case runs in a fresh process,
where the waiting thread is surely the main thread."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = """
import os, signal, threading, sys, time
from cloudcoil_sync._internal.signals import join_thread, wait_event

handled = threading.Event()
signal.signal(signal.SIGUSR1, lambda signum, frame: handled.set())
go = threading.Event()
WAITS = ("wait", "join", "_wait_for_tstate_lock")

def blocked() -> bool:  # the main thread is inside threading's wait (a lock acquire)
    frame = sys._current_frames()[threading.main_thread().ident]
    code = frame.f_code
    return code.co_filename == threading.__file__ and code.co_name in WAITS

def send() -> None:  # created before the block below: this thread receives the signal
    go.wait()
    for _ in range(3000):  # no event tells that another thread is blocked: look at it
        if blocked():
            break
        time.sleep(0.001)
    os.kill(os.getpid(), signal.SIGUSR1)

sender = threading.Thread(target=send)
sender.start()
stopped = threading.Event()
waiter = threading.Thread(target=lambda: handled.wait(30) and stopped.set())
waiter.start()  # ends once the handler ran: the join below waits for it
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})  # so the kernel picks `sender`
go.set()
if sys.argv[1] == "wait":
    print(wait_event(handled, timeout=30))
else:
    join_thread(waiter, timeout=30)
    print(stopped.is_set())
"""


@pytest.mark.parametrize("call", ["wait", "join"])
def test_a_pending_handler_runs_while_the_main_thread_waits(call: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), call],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True", done.stdout + done.stderr
