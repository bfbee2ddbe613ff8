"""`Application.run`: the process lifecycle of an operator.

Start-up: validate and freeze the definition, load the Config (unless one was supplied),
enter the process lifespan, start the webhook host (every replica) and the Manager thread
(controllers; leader election inside). `run` then waits for `stop` or for a component to end.

Shutdown order: readiness cleared → no pass starts (the manager reads `stop` itself at each
pass start) → in-flight passes finish within shutdown_timeout or are abandoned, their writes
fenced (`controller.term`) → informers stopped → Lease released → webhook host stopped →
process lifespan exited → owned Config closed. A component ending on its own is a failure:
its error, or ``RuntimeError("An operator component stopped unexpectedly")``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, Protocol

from cloudcoil_sync.controller._internal.manager import Manager
from cloudcoil_sync.controller._internal.metrics import OperatorMetrics

if TYPE_CHECKING:
    from cloudcoil_sync.admission._internal.routes import AdmissionRoutes
    from cloudcoil_sync.application._internal.lifecycle import Lifespans
    from cloudcoil_sync.application._internal.settings import WebhookServer
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller._internal.definition import Controller
    from cloudcoil_sync.controller._internal.health import HealthServer
    from cloudcoil_sync.controller._internal.leader import LeaderElection

__all__ = ["IDLE", "RunState", "RunnableApp", "run", "wait_ready"]

log = logging.getLogger("cloudcoil_sync.application")

_TICK = 0.05
_UNEXPECTED = "An operator component stopped unexpectedly"
# Beyond the controllers' shutdown_timeout: informer stop, lifespan cleanup, Lease release.
_MANAGER_STOP_MARGIN = 40.0


class RunnableApp(Protocol):
    """What a run reads of its (validated, frozen) `Application`."""

    name: str
    namespace: str
    config: Config | None
    controllers: tuple[Controller[Any], ...]
    lifespans: Lifespans
    leader_election: LeaderElection | None
    health: HealthServer | None
    webhook: WebhookServer | None

    def admission_routes(self, config: Config | None = None) -> AdmissionRoutes: ...


class RunState:
    """What `app.ready`, `app.healthy` and `app.wait_ready` read."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.running = False
        self.started = False
        self.finished = False
        self.failure: BaseException | None = None
        self.manager: Manager | None = None
        self.serving: Callable[[], bool] | None = None  # set while a webhook host runs

    def set(self, **fields: Any) -> None:
        with self.changed:
            for name, value in fields.items():
                setattr(self, name, value)
            self.changed.notify_all()

    @property
    def healthy(self) -> bool:
        serving = self.serving
        return (
            self.running
            and self.failure is None
            and (serving is None or serving())
            and (self.manager is None or self.manager.healthy)
        )

    @property
    def ready(self) -> bool:
        """With a webhook: admission available (standbys too); else the manager's readiness."""
        manager = self.manager
        return (
            self.healthy
            and self.started
            and (self.serving is not None or (manager is not None and manager.ready))
        )


#: The state of an application that has not run.
IDLE = RunState()


def wait_ready(current: Callable[[], RunState], timeout: float = 30) -> None:
    """Block until the `current()` run state is ready; raise the run's failure, or if it
    stopped first.

    May be called before `run` starts (from another thread); TimeoutError after `timeout`.
    """
    give_up = time.monotonic() + timeout
    while True:
        state = current()
        if state.ready:
            return
        if state.failure is not None:
            raise state.failure
        if state.finished:
            raise RuntimeError("Application stopped before becoming ready")
        remaining = give_up - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"Application did not become ready within {timeout:g}s")
        with state.changed:
            state.changed.wait(min(_TICK, remaining))


def run(app: RunnableApp, state: RunState, stop: threading.Event | None = None) -> None:
    """Serve admission and run controllers until `stop` is set or a component fails.

    `app` is validated and frozen; `state` is the fresh run state the application holds.
    """
    stop = stop if stop is not None else threading.Event()
    try:
        if stop.is_set():
            return
        with ExitStack() as stack:
            config = _config(app, stack)
            _Components(app, config, state, stop).run()
    except BaseException as error:
        state.set(failure=error)
        raise
    finally:
        state.set(finished=True, running=False, started=False)


def _config(app: RunnableApp, stack: ExitStack) -> Config:
    """The supplied Config (left open), or one loaded for this run (closed at the end)."""
    if app.config is not None:
        return app.config
    from cloudcoil_sync.client import Config

    config = Config.load(namespace=app.namespace)
    stack.callback(config.close)
    if config.namespace != app.namespace:
        raise ValueError("Config.namespace must match Application.namespace")
    return config


class _Components:
    """The webhook host and the manager thread of one run, started and stopped in order."""

    def __init__(
        self, app: RunnableApp, config: Config, state: RunState, stop: threading.Event
    ) -> None:
        self.app = app
        self.config = config
        self.state = state
        self.stop = stop
        self.metrics = OperatorMetrics()
        self.component_stop = threading.Event()
        self.wake = threading.Event()
        self.manager_error: BaseException | None = None
        self.manager_thread: threading.Thread | None = None
        self.host: Any = None
        self.admission: Any = None
        election = app.leader_election
        self.identity = election.identity if election is not None else None

    def run(self) -> None:
        app = self.app
        with app.lifespans.enter("process", self.identity):
            errors: list[BaseException] = []
            try:
                self.state.set(running=True)
                self._build_manager()
                if app.webhook is not None:
                    self._start_webhook()
                if self.state.manager is not None:
                    self._start_manager()
                self.state.set(started=True)
                log.info("Operator %s is running", app.name)
                self._wait()
            except BaseException as error:
                errors.append(error)
            finally:
                self._shutdown(errors)
            _raise(errors)

    def _build_manager(self) -> None:
        app = self.app
        if not app.controllers:
            return
        lifespans = app.lifespans
        leader = None
        if "leader" in lifespans:

            def leader() -> Any:
                return lifespans.enter("leader", self.identity)

        manager = Manager(
            *app.controllers,
            config=self.config,
            leader_election=app.leader_election,
            health=app.health,
            leader_lifespan=leader,
            metrics=self.metrics,
        )
        self.state.set(manager=manager)

    def _start_webhook(self) -> None:
        from cloudcoil_sync.admission._internal.metrics import InstrumentedAdmission
        from cloudcoil_sync.admission._internal.metrics_access import MetricsAccess
        from cloudcoil_sync.admission._internal.server import WebhookHost
        from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook

        app, state = self.app, self.state
        webhook = app.webhook
        assert webhook is not None  # started only for an application with a webhook server
        manager = state.manager
        cache = None if manager is None else manager.cached
        self.admission = AdmissionWebhook(app.admission_routes(self.config), cache=cache)
        self.metrics.registry.register(self.admission.slots)  # per-route saturation
        host = WebhookHost.from_settings(
            InstrumentedAdmission(self.admission, self.admission.routes, self.metrics),
            webhook,
            healthy=lambda: state.healthy,
            ready=lambda: state.ready,
            controllers_ready=lambda: state.manager is not None and state.manager.ready,
            registry=self.metrics.registry,
            max_request_body_size=self.admission.max_body_bytes,
            metrics_access=MetricsAccess(self.config).decide if webhook.secure_metrics else None,
        )
        self.host = host
        host.start()
        state.set(serving=lambda: host.serving)

    def _start_manager(self) -> None:
        manager = self.state.manager
        assert manager is not None

        def target() -> None:
            try:
                manager.run(self.component_stop, also_stop=(self.stop,))
            except BaseException as error:
                self.manager_error = error
            finally:
                self.wake.set()

        self.manager_thread = threading.Thread(target=target, name="cloudcoil-manager")
        self.manager_thread.start()

    def _wait(self) -> None:
        """Until stop, or until a component ends by itself (a failure)."""
        while not self.stop.is_set():
            thread, host = self.manager_thread, self.host
            if thread is not None and not thread.is_alive():
                break
            if host is not None and not host.serving:
                break
            self.wake.wait(_TICK)
        if self.stop.is_set():
            log.info("Stopping operator %s", self.app.name)
            return
        if self.manager_error is not None:
            raise self.manager_error
        raise RuntimeError(_UNEXPECTED)

    def _shutdown(self, errors: list[BaseException]) -> None:
        self.state.set(started=False)
        self.component_stop.set()
        thread = self.manager_thread
        if thread is not None:
            limit = max(c.shutdown_timeout for c in self.app.controllers) + _MANAGER_STOP_MARGIN
            thread.join(limit)
            if thread.is_alive():
                errors.append(
                    RuntimeError(f"The controller manager did not stop within {limit:g}s")
                )
            error = self.manager_error
            if error is not None and all(error is not seen for seen in errors):
                errors.append(error)
        if self.host is not None:
            timeout = float(getattr(self.app.webhook, "shutdown_timeout", 10.0))
            try:
                if not self.host.stop(timeout=timeout):
                    log.warning("Admission requests still running after %gs", timeout)
            except Exception as error:
                errors.append(error)
            finally:
                self.state.set(serving=None)
        if self.admission is not None:
            self.admission.close()


def _raise(errors: list[BaseException]) -> None:
    if not errors:
        return
    if len(errors) == 1:
        raise errors[0]
    raise BaseExceptionGroup("Application failed while stopping components", errors)
