"""Shared benchmark plumbing: the emulator in its own process, child-process meters.

The emulator runs in a child process so that the operator under test is measured alone
(its CPU seconds and peak RSS come from /proc, not from this driver). The emulator child
also answers a few JSON-line commands on stdin (seed objects, wait for convergence, count
write requests) so the driver never pays for HTTP bookkeeping it does not measure.

    python bench/common.py --serve   # (internal) the emulator child
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
LABEL = "bench.cloudcoil.io/managed"
KEY, VALUE = "managed-by", "cloudcoil"
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

__all__ = [
    "KEY",
    "LABEL",
    "ROOT",
    "VALUE",
    "EmulatorProcess",
    "configmap",
    "cpu_seconds",
    "emit",
    "machine",
    "peak_rss",
]


def configmap(namespace: str, i: int) -> dict[str, Any]:
    """The seeded object: labelled, a few small keys (~400 bytes of JSON)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"cm-{i:05d}",
            "namespace": namespace,
            "labels": {LABEL: "true", "app": "bench"},
            "annotations": {"bench.cloudcoil.io/owner": "team-a"},
        },
        "data": {"index": str(i), "mode": "standard", "settings": "k=v;" * 24},
    }


# -- the emulator child ---------------------------------------------------------------------


class Convergence:
    """Converged objects per namespace, followed through the store's event history.

    Each look reads only the events since the last one, where counting would rescan every
    object (about a tenth of the emulator's CPU at 5k objects, competing with the requests
    it serves). It looks every `POLL` seconds rather than on every write: a waiter woken by
    each write would cost the emulator a thread switch per request.
    """

    POLL = 0.01

    def __init__(self, store: Any, key: Any) -> None:
        self.store, self.key = store, key
        self.done: dict[str, set[str]] = {}
        self.seen: dict[str, int] = {}  # namespace -> resourceVersion followed up to

    def wait(self, namespace: str, count: int, timeout: float) -> dict[str, Any]:
        """{"count": converged now, "at": wall-clock time `count` was seen, or None}."""
        deadline = time.monotonic() + timeout
        while True:
            done = self._follow(namespace)
            if len(done) >= count:
                return {"count": len(done), "at": time.time()}
            if time.monotonic() >= deadline:
                return {"count": len(done), "at": None}
            time.sleep(self.POLL)

    def _follow(self, namespace: str) -> set[str]:
        store = self.store
        with store.lock:
            if namespace not in self.seen or self.seen[namespace] < store.compacted_rv:
                entries, rv = store.scan(self.key, namespace)
                self.done[namespace] = {e.obj["metadata"]["name"] for e in entries if _holds(e.obj)}
                self.seen[namespace] = rv
            events = store.events_after(self.seen[namespace])
        done = self.done[namespace]
        for ev in events:
            if ev.key == self.key and ev.namespace == namespace:
                converged = ev.type != "DELETED" and _holds(ev.obj)
                (done.add if converged else done.discard)(ev.obj["metadata"]["name"])
            self.seen[namespace] = ev.rv
        return done


def _holds(obj: dict[str, Any]) -> bool:
    return bool((obj.get("data") or {}).get(KEY) == VALUE)


def _serve() -> None:
    """Run the emulator; answer one JSON command per stdin line; stop at EOF."""
    from cloudcoil_sync.testing import Emulator

    latency = os.environ.get("CC_BENCH_LATENCY") or None  # a profile of testing/latency.py
    emu = Emulator(history_size=200_000, log_size=200_000, latency=latency).start()
    rt = emu.registry.by_kind("v1", "ConfigMap")
    assert rt is not None
    print(
        json.dumps({"url": emu.url, "token": emu.admin_token, "ca": emu.ca_pem.decode()}),
        flush=True,
    )

    progress = Convergence(emu.store, rt.key)

    def writes(namespace: str) -> dict[str, int]:
        marker = f"/namespaces/{namespace}/"
        counts: dict[str, int] = {}
        for entry in emu.request_log:
            if marker in entry.path:
                counts[entry.method] = counts.get(entry.method, 0) + 1
        return counts

    for line in sys.stdin:
        cmd = json.loads(line)
        op, ns = cmd["op"], cmd.get("namespace", "")
        reply: Any = None
        if op == "seed":
            emu.create_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            for i in range(cmd["count"]):
                emu.create_object(configmap(ns, i))
            emu.clear_log()
        elif op == "wait":
            reply = progress.wait(ns, cmd["count"], cmd["timeout"])
        elif op == "requests":
            reply = writes(ns)
            emu.clear_log()
        elif op == "cpu":
            reply = time.process_time()
        elif op == "count":  # requests whose path contains `path`, since the last count
            reply = sum(1 for entry in emu.request_log if cmd["path"] in entry.path)
            emu.clear_log()
        print(json.dumps({"reply": reply}), flush=True)
    emu.stop()


class EmulatorProcess:
    """The emulator child plus its credentials as files (CA, kubeconfig) for other children."""

    def __init__(self, latency: str | None = None) -> None:
        env = {**os.environ, "CC_BENCH_LATENCY": latency or ""}
        self.latency = latency
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.kill()
            raise SystemExit("emulator subprocess failed to start")
        info = json.loads(line)
        self.url: str = info["url"]
        self.token: str = info["token"]
        self.ca_pem: str = info["ca"]
        self._dir = tempfile.TemporaryDirectory(prefix="cc-bench-")
        self.ca_file = os.path.join(self._dir.name, "ca.crt")
        Path(self.ca_file).write_text(self.ca_pem)
        self._lock = threading.Lock()

    def kubeconfig(self, namespace: str) -> str:
        """A kubeconfig file for the emulator (token, inline CA data), default `namespace`."""
        import base64

        path = os.path.join(self._dir.name, f"kubeconfig-{namespace}")
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "bench",
            "clusters": [
                {
                    "name": "emulator",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(
                            self.ca_pem.encode()
                        ).decode(),
                    },
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [
                {
                    "name": "bench",
                    "context": {"cluster": "emulator", "user": "admin", "namespace": namespace},
                }
            ],
        }
        Path(path).write_text(yaml.safe_dump(doc))
        return path

    def call(self, op: str, **args: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self._lock:
            self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the emulator subprocess exited")
        return json.loads(line)["reply"]

    def seed(self, namespace: str, count: int) -> None:
        self.call("seed", namespace=namespace, count=count)

    def wait_converged(self, namespace: str, count: int, timeout: float) -> float | None:
        """Wall-clock time at which `count` objects held the value, or None after `timeout`."""
        reply = self.call("wait", namespace=namespace, count=count, timeout=timeout)
        return None if reply["at"] is None else float(reply["at"])

    def requests(self, namespace: str) -> dict[str, int]:
        """Requests per method on `namespace` since the last call (the log is then cleared)."""
        return dict(self.call("requests", namespace=namespace))

    def cpu(self) -> float:
        return float(self.call("cpu"))

    def count(self, path: str) -> int:
        """Requests whose path contains `path` since the last count (the log is cleared)."""
        return int(self.call("count", path=path))

    def finish(self, namespace: str) -> None:
        """Nothing to clean: the emulator process goes away with its namespaces."""

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._dir.cleanup()

    def __enter__(self) -> EmulatorProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# -- meters ---------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` (not its children)."""
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def _status_bytes(pid: int, field: str) -> int:
    """A memory field of /proc/PID/status, in bytes (a zombie has none: RuntimeError)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} for process {pid}")


def peak_rss(pid: int) -> int:
    """Peak resident set size of `pid` in bytes (VmHWM)."""
    return _status_bytes(pid, "VmHWM")


def rss(pid: int) -> int:
    """Resident set size of `pid` in bytes (VmRSS)."""
    return _status_bytes(pid, "VmRSS")


def machine() -> dict[str, Any]:
    """What the figures were measured on (the load average shows other users of the CPU)."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def emit(result: dict[str, Any], path: str | None) -> None:
    """Print a bench's JSON result, and write it to ``path`` (its --json) when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if path:
        Path(path).write_text(text)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        _serve()
    else:
        raise SystemExit(__doc__)
