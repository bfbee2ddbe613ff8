"""A real API server for the reconcile benchmark (SPEC §9: a real cluster when KUBECONFIG is set).

`ClusterTarget` answers what the driver asks of `common.EmulatorProcess` (seed a namespace,
count converged objects, credentials for the children) over the API itself: seeding is
POSTs, counting is a label-selected list + watch kept by the driver. What only the emulator
can tell (requests per namespace, the API server's CPU) is ``None``. Every namespace it
creates is deleted, and waited for, before the next run starts.

`raw_session` turns a kubeconfig into a bare `requests.Session` (TLS, credentials): the
floor's loop and the driver's observers use it, so the floor stays plain `requests`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import requests
from common import KEY, LABEL, VALUE, configmap

__all__ = ["ClusterTarget", "WatchCounter", "raw_session", "shutdown_stream"]

NAMESPACE_GONE_TIMEOUT = 600.0
QUIET_CPU, SETTLE_LIMIT = 0.15, 60.0  # a quiet control plane: under 15 % of a core, 1 s
# What a local control plane's CPU is summed over (its controller-manager watches too).
SERVER_PROCESSES = frozenset({"kube-apiserver", "etcd", "kube-controller-manager"})


def raw_session(kubeconfig: str | None, pool: int = 10) -> tuple[requests.Session, str]:
    """A plain session carrying the kubeconfig's TLS settings and credentials, and the server.

    Credential files given as data are written to a private directory kept with the session.
    """
    from cloudcoil_sync.client._internal.kubeconfig import load_kubeconfig

    kwargs = load_kubeconfig(kubeconfig)
    unsupported = [k.replace("_", "-") for k in ("proxy_url", "tls_server_name") if kwargs.get(k)]
    if unsupported:  # a bare session would silently ignore them
        names = ", ".join(unsupported)
        raise SystemExit(f"the bench's plain requests sessions do not support kubeconfig {names}")
    files = tempfile.TemporaryDirectory(prefix="cc-bench-creds-")

    def write(name: str, data: bytes) -> str:
        path = os.path.join(files.name, name)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as out:
            out.write(data)
        return path

    session = requests.Session()
    session.trust_env = False
    session.mount("https://", requests.adapters.HTTPAdapter(pool_maxsize=pool))
    session._cc_files = files  # type: ignore[attr-defined]  # lives as long as the session
    if kwargs.get("insecure_skip_tls_verify"):
        session.verify = False
    elif "ca_file" in kwargs:
        session.verify = kwargs["ca_file"]
    elif "ca_data" in kwargs:
        session.verify = write("ca.crt", kwargs["ca_data"])
    cert = kwargs.get("client_cert_file") or (
        write("client.crt", kwargs["client_cert_data"]) if "client_cert_data" in kwargs else None
    )
    key = kwargs.get("client_key_file") or (
        write("client.key", kwargs["client_key_data"]) if "client_key_data" in kwargs else None
    )
    if cert and key:
        session.cert = (cert, key)
    authorization = None
    if kwargs.get("token"):
        authorization = f"Bearer {kwargs['token']}"
    elif kwargs.get("token_file"):
        with open(kwargs["token_file"]) as token:
            authorization = f"Bearer {token.read().strip()}"
    elif kwargs.get("exec_provider") is not None:
        authorization, exec_cert = kwargs["exec_provider"].credentials()
        session.cert = exec_cert or session.cert
    session.headers["Accept"] = "application/json"
    if authorization:
        session.headers["Authorization"] = authorization
    return session, str(kwargs["server"]).rstrip("/")


def shutdown_stream(resp: requests.Response | None) -> None:
    """Unblock another thread reading `resp` (closing an SSL stream mid-read blocks)."""
    connection = getattr(getattr(resp, "raw", None), "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class LabelledConfigMaps:
    """The labelled ConfigMaps of a namespace, listed then watched on a thread of its own.

    A subclass keeps what it needs of each object in `_seen` (holding `cond`, which it
    notifies); it sets up its own state before calling `__init__`, which lists at once.
    """

    def __init__(self, kubeconfig: str, namespace: str) -> None:
        self.session, server = raw_session(kubeconfig)
        self.base = f"{server}/api/v1/namespaces/{namespace}/configmaps"
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.stream: Any = None
        self.version = self._list()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _seen(self, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def _list(self) -> str:
        params = {"labelSelector": f"{LABEL}=true", "limit": "500"}
        while True:
            doc = self.session.get(self.base, params=params, timeout=60).json()
            for obj in doc["items"]:
                self._seen(obj)
            if not doc["metadata"].get("continue"):
                return str(doc["metadata"]["resourceVersion"])
            params["continue"] = doc["metadata"]["continue"]

    def _run(self) -> None:
        while not self.stop.is_set():
            params = {
                "labelSelector": f"{LABEL}=true",
                "watch": "1",
                "resourceVersion": self.version,
                "timeoutSeconds": "60",
            }
            with (
                contextlib.suppress(Exception),
                self.session.get(self.base, params=params, stream=True, timeout=90) as resp,
            ):
                self.stream = resp
                for line in resp.iter_lines(chunk_size=None):
                    if line:
                        event = json.loads(line)
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self.version = event["object"]["metadata"]["resourceVersion"]
                            self._seen(event["object"])

    def close(self) -> None:
        self.stop.set()
        shutdown_stream(self.stream)


class WatchCounter:
    """How many labelled ConfigMaps of a namespace hold the target value: list, then watch."""

    def __init__(self, kubeconfig: str | None, namespace: str) -> None:
        self.session, server = raw_session(kubeconfig)
        self.base = f"{server}/api/v1/namespaces/{namespace}/configmaps"
        self.selector = f"{LABEL}=true"
        self.done: set[str] = set()
        self.lock = threading.Condition()
        self.reached: tuple[int, float] = (0, 0.0)  # (a count reached, wall-clock time first)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.stream: requests.Response | None = None
        self.version = self._list()
        self.thread = threading.Thread(target=self._run, name=f"count-{namespace}")
        self.thread.start()

    def _list(self) -> str:
        done: set[str] = set()
        params = {"labelSelector": self.selector, "limit": "500"}
        while True:
            resp = self.session.get(self.base, params=params, timeout=60)
            resp.raise_for_status()
            doc = resp.json()
            done.update(o["metadata"]["name"] for o in doc["items"] if _converged(o))
            token = doc["metadata"].get("continue")
            if not token:
                break
            params = {**params, "continue": token}
        with self.lock:
            self.done = done
            self._changed()
        return str(doc["metadata"]["resourceVersion"])

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self._watch()
            except requests.HTTPError as error:
                if error.response is None or error.response.status_code != 410:
                    self._fail(error)
                    return
                self.version = self._list()  # history expired: start over
            except requests.RequestException:
                self.stop.wait(1.0)  # a broken stream: resume from the last version
            except BaseException as error:
                self._fail(error)
                return

    def _fail(self, error: BaseException) -> None:
        with self.lock:
            self.error = error
            self.lock.notify_all()

    def _watch(self) -> None:
        params = {
            "labelSelector": self.selector,
            "watch": "1",
            "resourceVersion": self.version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "60",
        }
        with self.session.get(self.base, params=params, stream=True, timeout=(10, 90)) as resp:
            self.stream = resp
            resp.raise_for_status()
            for line in resp.iter_lines(chunk_size=None):
                if self.stop.is_set():
                    return
                if line:
                    self._event(json.loads(line))

    def _event(self, event: dict[str, Any]) -> None:
        obj = event["object"]
        if event["type"] == "ERROR":
            if obj.get("code") != 410:
                raise RuntimeError(f"watch of {self.base} failed: {obj.get('message')}")
            self.version = self._list()  # history expired: start over
            return
        self.version = obj["metadata"]["resourceVersion"]
        if event["type"] == "BOOKMARK":
            return
        name = obj["metadata"]["name"]
        with self.lock:
            if event["type"] != "DELETED" and _converged(obj):
                self.done.add(name)
            else:
                self.done.discard(name)
            self._changed()

    def _changed(self) -> None:
        if len(self.done) > self.reached[0]:
            self.reached = (len(self.done), time.time())  # stamped as the event arrives
        self.lock.notify_all()

    def wait(self, count: int, timeout: float) -> float | None:
        """Wall-clock time at which `count` objects were first seen converged, or None."""
        with self.lock:
            self.lock.wait_for(lambda: len(self.done) >= count or self.error is not None, timeout)
            if self.error is not None:
                raise RuntimeError(f"the convergence watch failed: {self.error!r}")
            return self.reached[1] if len(self.done) >= count else None

    def close(self) -> None:
        self.stop.set()
        shutdown_stream(self.stream)
        self.thread.join(15)
        self.session.close()


def _converged(obj: dict[str, Any]) -> bool:
    return (obj.get("data") or {}).get(KEY) == VALUE


class ClusterTarget:
    """The cluster of `kubeconfig` in the role of the emulator child."""

    def __init__(self, kubeconfig: str) -> None:
        from cloudcoil_sync.client._internal.errors import ConfigError

        self.path = kubeconfig
        self.counters: dict[str, WatchCounter] = {}
        try:
            self.session, self.url = raw_session(kubeconfig, pool=16)
            resp = self.session.get(f"{self.url}/version", timeout=30)
            resp.raise_for_status()
        except (ConfigError, OSError, requests.RequestException) as error:
            raise SystemExit(f"cannot use the cluster of {kubeconfig}: {error}") from None
        self.version = resp.json().get("gitVersion", "?")
        # A local etcd to compact and defragment before each seed (CC_BENCH_ETCD, its client
        # URL): runs add and delete thousands of objects, and an etcd left to grow served the
        # later runs of a session ~2x slower than its first (bench/results-real.md).
        self.etcd = os.environ.get("CC_BENCH_ETCD") or None

    def kubeconfig(self, namespace: str) -> str:
        return self.path  # children pass the namespace explicitly

    def compact_etcd(self) -> None:
        """Compact the local etcd's history to now and defragment it (CC_BENCH_ETCD)."""
        if self.etcd is None:
            return
        try:
            status = requests.post(f"{self.etcd}/v3/maintenance/status", json={}, timeout=30)
            revision = status.json()["header"]["revision"]
            body = {"revision": revision, "physical": True}
            compacted = requests.post(f"{self.etcd}/v3/kv/compaction", json=body, timeout=120)
            if compacted.status_code != 200 and "compacted" not in compacted.text:
                compacted.raise_for_status()
            defrag = requests.post(f"{self.etcd}/v3/maintenance/defragment", json={}, timeout=300)
            defrag.raise_for_status()
        except (requests.RequestException, ValueError, KeyError) as error:
            raise SystemExit(f"cannot compact the etcd at {self.etcd}: {error!r}") from None

    def seed(self, namespace: str, count: int) -> None:
        self.compact_etcd()
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        resp = self.session.post(f"{self.url}/api/v1/namespaces", json=ns, timeout=30)
        if resp.status_code == 409:
            raise SystemExit(
                f"namespace {namespace} already exists in {self.url} (left by an earlier run?): "
                f"delete it first (kubectl delete namespace {namespace})"
            )
        resp.raise_for_status()
        base = f"{self.url}/api/v1/namespaces/{namespace}/configmaps"

        def create(i: int) -> None:
            self.session.post(base, json=configmap(namespace, i), timeout=60).raise_for_status()

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(count)))
        self.counters[namespace] = WatchCounter(self.path, namespace)
        self.settle()

    def settle(self, busy: float = QUIET_CPU, limit: float = SETTLE_LIMIT) -> float:
        """Wait until a local control plane is quiet (under `busy` CPU seconds per second,
        at most `limit` s): the previous run's namespace deletion, the seeding's tail and
        etcd's compactions would otherwise land on the next contender. Seconds waited."""
        start = time.monotonic()
        before = self.cpu()
        while before is not None and time.monotonic() - start < limit:
            time.sleep(1.0)
            now = self.cpu()
            if now is None or now - before < busy:
                break
            before = now
        return time.monotonic() - start

    def wait_converged(self, namespace: str, count: int, timeout: float) -> float | None:
        return self.counters[namespace].wait(count, timeout)

    def requests(self, namespace: str) -> dict[str, int] | None:
        return None  # a real API server does not tell; its audit log is not ours to read

    def cpu(self) -> float | None:
        """CPU seconds of the control plane's processes when it runs on this machine."""
        host = urlsplit(self.url).hostname or ""
        if host not in ("127.0.0.1", "localhost", "::1"):
            return None
        import psutil

        total = 0.0
        for proc in psutil.process_iter(["name", "cpu_times"]):
            if proc.info["name"] in SERVER_PROCESSES and proc.info["cpu_times"] is not None:
                total += proc.info["cpu_times"].user + proc.info["cpu_times"].system
        return total or None

    def finish(self, namespace: str) -> None:
        """Delete the run's namespace and wait until it is gone: the next run starts clean."""
        counter = self.counters.pop(namespace, None)
        if counter is not None:
            counter.close()
        url = f"{self.url}/api/v1/namespaces/{namespace}"
        resp = self.session.delete(url, timeout=30)
        if resp.status_code not in (200, 202, 404):
            resp.raise_for_status()
        deadline = time.monotonic() + NAMESPACE_GONE_TIMEOUT
        while self.session.get(url, timeout=30).status_code != 404:
            if time.monotonic() > deadline:
                raise RuntimeError(f"namespace {namespace} still exists after deletion")
            time.sleep(0.5)

    def close(self) -> None:
        for namespace in list(self.counters):
            self.finish(namespace)
        self.session.close()
