"""The ``Emulator``: store, controllers, RBAC, faults and the HTTP(S) server, owned together."""

from __future__ import annotations

import collections
import copy
import secrets
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.admission import WebhookCaller
from cloudcoil_sync.testing._internal.api import LogEntry, handle
from cloudcoil_sync.testing._internal.backend import AccessRecord
from cloudcoil_sync.testing._internal.controllers import Controllers
from cloudcoil_sync.testing._internal.conversion import converter_for
from cloudcoil_sync.testing._internal.crud import Objects, Req
from cloudcoil_sync.testing._internal.custom import at, scale_paths
from cloudcoil_sync.testing._internal.faults import Faults
from cloudcoil_sync.testing._internal.hooks import AdmissionHook
from cloudcoil_sync.testing._internal.http import Exchange, HTTPServer
from cloudcoil_sync.testing._internal.latency import LatencyModel, ServiceSlots, latency_model
from cloudcoil_sync.testing._internal.rbac import Authorizer
from cloudcoil_sync.testing._internal.resources import Registry, ResourceType
from cloudcoil_sync.testing._internal.rollout import RolloutMode, RolloutSimulator
from cloudcoil_sync.testing._internal.store import Store
from cloudcoil_sync.testing._internal.tls import CertificateAuthority, default_ca, server_context
from cloudcoil_sync.testing._internal.validation import from_storage
from cloudcoil_sync.testing._internal.watch import WatchRegistry

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["Emulator"]

JSON = dict[str, Any]
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class Emulator:
    """An in-process Kubernetes API server for tests (see the package docstring)."""

    def __init__(
        self,
        tls: bool = True,
        *,
        history_size: int = 10000,
        bookmark_interval: float = 60.0,
        require_namespaces: bool = True,
        admin_token: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        log_size: int = 100_000,
        deployments: RolloutMode | None = None,
        latency: str | LatencyModel | None = None,
        ca: CertificateAuthority | None = None,
    ) -> None:
        self.tls = tls
        self.host = host
        self._port = port
        self.bookmark_interval = bookmark_interval
        self.admin_token = admin_token or "admin-" + secrets.token_urlsafe(16)
        self.store = Store(history_size=history_size)
        self.registry = Registry.with_builtins()
        self.objects = Objects(self.store, require_namespaces)
        self.authorizer = Authorizer(self.store, self.admin_token)
        self.controllers = Controllers(self.store, self.objects, self.registry)
        self.watches = WatchRegistry(self.store)
        self.faults = Faults()
        # Service times of a real API server (latency.py); None answers at once.
        model = latency_model(latency)
        self.latency = ServiceSlots(model) if model is not None else None
        self.stopping = threading.Event()
        # Admission webhooks (admission.py): creates/updates via Objects, deletes via the hook.
        self.webhooks = WebhookCaller(self.store)
        transport = self.webhooks.transport  # conversion webhooks are called the same way
        self.registry.converters = lambda crd: converter_for(crd, transport)
        self.objects.admission = self.webhooks
        self.admission_hooks: list[AdmissionHook] = [self.webhooks]
        # Deployment-status simulator (see rollout.py); None leaves Deployment status alone.
        self.rollouts = (
            RolloutSimulator(self.store, self.objects, self.registry, deployments)
            if deployments is not None
            else None
        )
        self._log: collections.deque[LogEntry] = collections.deque(maxlen=log_size)
        self._access: collections.deque[AccessRecord] = collections.deque(maxlen=log_size)
        self._server: HTTPServer | None = None
        self._ca = (ca or default_ca()) if tls else None
        self.ca_pem: bytes = self._ca.cert_pem if self._ca else b""
        for name in SYSTEM_NAMESPACES:
            self._seed_namespace(name)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> Emulator:
        if self._server is not None:
            return self
        self.stopping.clear()
        context = server_context(self._ca.issue()) if self._ca else None
        self._server = HTTPServer(self._handle, self.host, self._port, context)
        self._port = self._server.port
        self.controllers.start()
        if self.rollouts is not None:
            self.rollouts.start()
        self._server.start()
        return self

    def stop(self) -> None:
        """End open watches, close connections and join every thread this emulator started."""
        server, self._server = self._server, None
        if server is None:
            return
        self.stopping.set()
        self.watches.drop_all()
        self.watches.wait_closed(2.0)  # let streams send their final chunk
        server.stop()
        self.webhooks.close()
        self.controllers.stop()
        if self.rollouts is not None:
            self.rollouts.stop()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _handle(self, ex: Exchange) -> None:
        handle(self, ex)

    # -- addresses and credentials -------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self._port}"

    def config(self, namespace: str = "default", token: str | None = None) -> Config:
        """A ``cloudcoil_sync.client.Config`` for this emulator (admin unless ``token``)."""
        from cloudcoil_sync.client import Config

        return Config(
            server=self.url,
            token=token or self.admin_token,
            ca_data=self.ca_pem or None,
            namespace=namespace,
        )

    def add_token(self, token: str, user: str, groups: tuple[str, ...] | list[str] = ()) -> None:
        """Accept ``token`` as ``user`` (in ``groups``); it is authorized by RBAC."""
        self.authorizer.add_token(token, user, groups)

    def route_service(
        self, namespace: str, name: str, host: str, port: int, server_name: str | None = None
    ) -> None:
        """Send admission webhook calls for Service ``namespace/name`` to ``host:port``.

        The webhook's certificate is verified for ``server_name``, by default
        ``<name>.<namespace>.svc`` as kube-apiserver does.
        """
        self.webhooks.route_service(namespace, name, host, port, server_name)

    def service_account_token(self, namespace: str, name: str) -> str:
        """A token for ``system:serviceaccount:<namespace>:<name>``."""
        return self.authorizer.service_account_token(namespace, name)

    # -- observation ---------------------------------------------------------------------------
    def log_request(self, entry: LogEntry) -> None:
        self._log.append(entry)

    @property
    def request_log(self) -> list[LogEntry]:
        return list(self._log)

    def log_access(self, record: AccessRecord) -> None:
        self._access.append(record)

    @property
    def access_log(self) -> list[AccessRecord]:
        """Authorization decisions for non-admin users (allowed and denied), oldest first."""
        return list(self._access)

    def clear_log(self) -> None:
        self._log.clear()

    @property
    def connections_accepted(self) -> int:
        return self._server.accepted if self._server else 0

    @property
    def open_watches(self) -> int:
        return self.watches.count()

    def create_object(self, body: JSON) -> JSON:
        """Create ``body`` (any served kind, by apiVersion/kind) directly, as the admin."""
        rt = self.registry.by_kind(body.get("apiVersion", ""), body.get("kind", ""))
        if rt is None:
            raise ValueError(
                f"the emulator does not serve {body.get('apiVersion')}/{body.get('kind')}"
            )
        meta = body.get("metadata") or {}
        namespace = (meta.get("namespace") or "default") if rt.namespaced else ""
        req = Req(
            rt,
            namespace,
            meta.get("name", ""),
            body=copy.deepcopy(body),
            user_agent="cloudcoil-sync-emulator",
        )
        return self.objects.create(req)[1]

    def _served(self, group: str, plural: str) -> ResourceType | None:
        return next(
            (rt for rt in self.registry.all() if (rt.group, rt.plural) == (group, plural)), None
        )

    def get_object(self, group: str, plural: str, namespace: str, name: str) -> JSON | None:
        """A copy of an object as its API group serves it (``""`` namespace if cluster-scoped)."""
        rt = self._served(group, plural)
        obj = self.store.get(rt.key if rt else (group, plural), namespace, name)
        if obj is None:
            return None
        return copy.deepcopy(from_storage(rt, obj) if rt else obj)

    def list_objects(self, group: str, plural: str, namespace: str | None = None) -> list[JSON]:
        """Copies of the objects of a kind (all namespaces when ``namespace`` is None)."""
        rt = self._served(group, plural)
        entries, _ = self.store.scan(rt.key if rt else (group, plural), namespace)
        return [copy.deepcopy(from_storage(rt, e.obj) if rt else e.obj) for e in entries]

    def settle(self, timeout: float = 5.0) -> bool:
        """Wait until the in-process controllers (GC, namespaces, CRDs) have no work left."""
        return self.controllers.idle(timeout)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Wait until ``predicate()`` holds, re-checking on every store change."""
        deadline = time.monotonic() + timeout
        while not predicate():  # outside the lock: the predicate may call the API
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self.store.changed:
                self.store.changed.wait(min(left, 0.05))
        return True

    # -- state -------------------------------------------------------------------------------
    @property
    def ca(self) -> CertificateAuthority | None:
        """The CA of the serving certificate (None without TLS)."""
        return self._ca

    def save_state(self, path: str) -> list[str]:
        """Write objects, resourceVersion and tokens to ``path`` atomically (see ``state.py``);
        the objects that could not be encoded (left out, the rest saved)."""
        from cloudcoil_sync.testing._internal.state import save_state

        return save_state(self, path)

    @classmethod
    def from_state(cls, path: str, **options: Any) -> Emulator:
        """A new (not started) emulator holding what ``save_state`` wrote to ``path``: its
        objects, tokens, admin token, CA and port (unless ``options`` give others).

        ``StateError`` if the file is unreadable or not a state file.
        """
        from cloudcoil_sync.testing._internal.state import apply_state, read_state, saved_options

        data = read_state(path)
        emulator = cls(**{**saved_options(data), **options})
        apply_state(emulator, data)
        return emulator

    # -- faults ----------------------------------------------------------------------------------
    def drop_watches(self, abort: bool = False) -> int:
        """End every open watch now (``abort`` cuts the connection without a final chunk)."""
        return self.watches.drop_all(abort)

    def forget_history(self) -> None:
        """Watches from any resourceVersion before now get 410 Expired."""
        self.store.forget_history()

    def restart(self, lose_history: bool = True) -> None:
        """Simulate an API server restart: connections cut, optionally history lost."""
        self.watches.drop_all(abort=True)
        if lose_history:
            self.store.forget_history()
        if self._server is not None:
            self._server.close_connections()

    # -- hooks -----------------------------------------------------------------------------------
    def admit(self, verb: str, req: Req) -> None:
        for hook in self.admission_hooks:
            hook(verb, req)

    def scale(self, verb: str, req: Req) -> tuple[int, JSON]:
        """The ``/scale`` subresource over ``spec.replicas``."""
        obj = self.objects.get(req)
        meta = obj["metadata"]
        spec_path, status_path = scale_paths(self.objects.custom.lookup(req.rt))
        scale: JSON = {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in meta
            },
            "spec": {"replicas": at(obj, spec_path)[1] or 0},
            "status": {"replicas": at(obj, status_path)[1] or 0},
        }
        if verb == "get":
            return 200, scale
        body = req.body if isinstance(req.body, dict) else {}
        if verb == "patch":
            replicas = (body.get("spec") or {}).get("replicas", scale["spec"]["replicas"])
        elif verb == "update":
            replicas = (body.get("spec") or {}).get("replicas", 0)
        else:
            raise st.method_not_allowed()
        new = copy.deepcopy(obj)
        *parents, leaf = spec_path.strip(".").split(".")
        node = new
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = replicas
        # Recorded in managedFields as an Update with subresource "scale", as kube does.
        main = Req(
            req.rt, req.namespace, req.name, "scale", req.query, new, user_agent=req.user_agent
        )
        stored = self.store.get(req.rt.key, req.namespace, req.name)
        assert stored is not None
        updated = self.objects.update(main, new, stored)
        scale["spec"]["replicas"] = replicas
        scale["metadata"]["resourceVersion"] = updated["metadata"].get("resourceVersion")
        return 200, scale

    def _seed_namespace(self, name: str) -> None:
        rt = self.registry.get("", "v1", "namespaces")
        assert rt is not None
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        self.objects.create(Req(rt, "", name, body=body, user_agent="kube-apiserver"))
