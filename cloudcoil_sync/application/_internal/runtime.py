"""`Application.run`: the process lifecycle of an operator.

Start-up: validate and freeze the definition, load the Config (unless one was supplied),
enter the process lifespan, start the webhook host (every replica) and the Manager
(controllers; leader election inside). `run` then waits for `stop` or for a component to end.

The webhook host and the manager (itself a `Service`: its own group holds the health server,
the election and the leader work) are the members of one `ServiceGroup`, started in that
order and stopped in reverse. `run` waits on its `stop` event alone: a component that ends on
its own sets it through its exit callback (so `stop` is set after a failure too), nothing
polls.

Shutdown order: readiness cleared, the webhook host drains (serves on, each answer closing
its connection) → no pass starts (the manager reads `stop` itself at each pass start) →
in-flight passes finish within shutdown_timeout or are abandoned, their writes fenced
(`controller.term`) → informers stopped → Lease released → webhook host stopped, once its
`drain_delay` has passed since the stop began → process lifespan exited → owned Config
closed. A component ending on its own is a failure:
its error, or ``RuntimeError("An operator component stopped unexpectedly")``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, Protocol

from cloudcoil_sync._internal.service import ServiceGroup, await_ready
from cloudcoil_sync.application._internal.composition import stop_plan
from cloudcoil_sync.application._internal.scope import warn_outside_scope
from cloudcoil_sync.controller import Manager
from cloudcoil_sync.controller._internal import budgets
from cloudcoil_sync.controller._internal.checks import HealthChecks, serve_checks
from cloudcoil_sync.controller._internal.metrics import OperatorMetrics
from cloudcoil_sync.controller._internal.user_metrics import UserMetrics

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from cloudcoil_sync.admission._internal.routes import AdmissionRoutes
    from cloudcoil_sync.application._internal.lifecycle import Lifespans
    from cloudcoil_sync.application._internal.settings import WebhookServer
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller import Controller, HealthServer, LeaderElection
    from cloudcoil_sync.sharding import Sharding
    from cloudcoil_sync.sharding._internal.replica import RingElection

__all__ = ["ATTACHED", "IDLE", "RunState", "RunnableApp", "run", "wait_ready"]

log = logging.getLogger("cloudcoil_sync.application")

_UNEXPECTED = "An operator component stopped unexpectedly"
#: Held while an application attaches its run state, and notified after (so that a
#: `wait_ready` called before `run` wakes when the run begins).
ATTACHED = threading.Condition()


class RunnableApp(Protocol):
    """What a run reads of its (validated, frozen) `Application`."""

    name: str
    namespace: str
    config: Config | None
    controllers: tuple[Controller[Any], ...]
    lifespans: Lifespans
    leader_election: LeaderElection | None
    sharding: Sharding | None
    health: HealthServer | None
    webhook: WebhookServer | None
    checks: HealthChecks
    registry: CollectorRegistry

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

    def touch(self) -> None:
        """Something `ready`/`healthy` read changed (the manager's listener)."""
        self.set()

    @property
    def healthy(self) -> bool:
        serving = self.serving
        return (
            self.running
            and self.failure is None
            and (serving is None or serving())
            and (self.manager is None or self.manager.healthy())
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
    with ATTACHED:
        ATTACHED.wait_for(lambda: current() is not IDLE, timeout)
    state = current()
    if state is not IDLE and await_ready(
        state.changed,
        lambda: state.ready,
        failure=lambda: state.failure,
        finished=lambda: state.finished,
        what="Application",
        timeout=max(0.0, give_up - time.monotonic()),
    ):
        return
    raise TimeoutError(f"Application did not become ready within {timeout:g}s")


def run(app: RunnableApp, state: RunState, stop: threading.Event | None = None) -> None:
    """Serve admission and run controllers until `stop` is set or a component fails.

    `app` is validated and frozen; `state` is the fresh run state the application holds.
    """
    stop = stop if stop is not None else threading.Event()
    try:
        if stop.is_set():
            return
        with ExitStack() as stack:
            stack.callback(app.checks.close)  # the named checks' threads, whoever served them
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
    """The webhook host and the manager of one run, started and stopped in order."""

    def __init__(
        self, app: RunnableApp, config: Config, state: RunState, stop: threading.Event
    ) -> None:
        self.app = app
        self.config = config
        self.state = state
        self.stop = stop
        self.metrics = OperatorMetrics()
        self.metrics.registry.register(UserMetrics(app.registry))  # app.registry's metrics
        self.group = ServiceGroup(f"operator {app.name}", stop_event=stop)
        self.manager: Manager | None = None
        self.host: Any = None
        self.admission: Any = None
        self.metrics_access: Any = None
        self.ring: RingElection | None = None  # a sharded replica's bid for the ring Lease
        self.shard_election: LeaderElection | None = None  # a sharded replica's own Lease
        self.announced = False  # "Operator ... is running" was logged
        # The stop budgets (the Deployment's grace period comes from the same plan).
        self.plan = stop_plan(
            app.controllers,
            webhook=app.webhook,
            health=app.health,
            leader_election=app.leader_election,
            sharding=app.sharding,
        )
        election = app.leader_election
        self.identity = election.identity if election is not None else None
        if app.sharding is not None:
            self.identity = app.sharding.identity

    def run(self) -> None:
        app = self.app
        with app.lifespans.enter("process", self.identity):
            errors: list[BaseException] = []
            try:
                self.state.set(running=True)
                if app.controllers:
                    warn_outside_scope(app.controllers, self.config, app.namespace)
                self._build_manager()
                if app.webhook is not None:
                    self._add_webhook()
                if self.manager is not None:
                    self.group.add(self.manager, stop_timeout=self.plan.manager())
                    self._add_ring()
                self.group.start()
                if self.host is not None:
                    host = self.host
                    self.state.set(serving=lambda: host.serving)
                self.state.set(started=True)
                self._announce()
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

        election, shard = app.leader_election, None
        if app.sharding is not None:
            from cloudcoil_sync.sharding._internal.replica import shard_members

            election, shard = shard_members(app.sharding, self.config, self.metrics.registry)
            self.shard_election = election
        manager = Manager(
            *app.controllers,
            config=self.config,
            leader_election=election,
            health=app.health,
            leader_lifespan=leader,
            metrics=self.metrics,
            shard=shard,
            also_stop=(self.stop,),  # no pass starts once the run's stop is set
        )
        # Named checks (the user's, informers, certificate) on every host of the endpoints.
        serve_checks(
            app.checks,
            synced=manager.synced,
            certfile=None if app.webhook is None else app.webhook.certfile,
        )
        if app.health is not None:
            app.health.checks = app.checks
        manager.subscribe(self.state.touch)
        manager.subscribe(self._running)
        self.manager = manager
        self.state.set(manager=manager)

    def _announce(self) -> None:
        """ "Started", and what it waits for; "is running" comes once the controllers run."""
        name, manager = self.app.name, self.manager
        if manager is None:
            log.info("Operator %s is running (admission webhooks only)", name)
            return
        election = self.shard_election or self.app.leader_election
        if election is not None and not election.is_leader:
            namespace = election.namespace or self.config.namespace
            log.info(
                "Operator %s started; waiting for leadership of Lease %s/%s before running "
                "its controllers",
                name,
                namespace,
                election.name,
            )
        else:
            log.info("Operator %s started; its controllers are syncing", name)
        self._running()  # ready already

    def _running(self) -> None:
        """Once the controllers run (leading, caches synced): "Operator ... is running"."""
        manager = self.manager
        if self.announced or not self.state.started or manager is None or not manager.ready:
            return
        with self.state.changed:
            if self.announced:
                return
            self.announced = True
        log.info("Operator %s is running", self.app.name)

    def _add_webhook(self) -> None:
        from cloudcoil_sync.admission import AdmissionWebhook
        from cloudcoil_sync.admission._internal.hosting import webhook_host

        app, state = self.app, self.state
        webhook = app.webhook
        assert webhook is not None  # added only for an application with a webhook server
        manager = state.manager
        cache = None if manager is None else manager.cached
        self.admission = AdmissionWebhook(app.admission_routes(self.config), cache=cache)
        self.host, self.metrics_access = webhook_host(
            self.admission,
            webhook,
            config=self.config,
            metrics=self.metrics,
            registry=self.metrics.registry,
            healthy=lambda: state.healthy,
            ready=lambda: state.ready,
            controllers_ready=lambda: state.manager is not None and state.manager.ready,
        )
        self.host.app.named = app.checks.answer  # the named checks, as the HealthServer's
        timeout = float(webhook.shutdown_timeout)
        self.group.add(self.host, stop_timeout=timeout)

    def _add_ring(self) -> None:
        """A sharded replica claims the new objects whose target it is, and competes for
        the ring Lease (to coordinate): members after the manager, so they stop first."""
        sharding, election = self.app.sharding, self.shard_election
        if sharding is None or election is None:
            return
        from cloudcoil_sync.sharding._internal.replica import ring_members

        claimer, self.ring = ring_members(
            sharding, self.config, self.app.controllers, election, self.metrics.registry
        )
        self.group.add(claimer, stop_timeout=budgets.SHARDING_STOP)
        self.group.add(self.ring, stop_timeout=budgets.SHARDING_STOP)

    def _wait(self) -> None:
        """Until stop, or until a component ends by itself (a failure): one event, both."""
        self.group.wait()
        if self.group.exited is None:
            log.info("Stopping operator %s", self.app.name)
            return
        if self.group.exit_error is not None:
            raise self.group.exit_error
        raise RuntimeError(_UNEXPECTED)

    def _shutdown(self, errors: list[BaseException]) -> None:
        if self.host is not None:
            self.host.drain()  # lame duck from the stop's start: it stops last (see drain)
        self.state.set(started=False)
        try:
            self.group.stop()
        finally:
            self.state.set(serving=None)
        manager = self.manager
        if manager is not None and manager.name in self.group.late:
            limit = self.plan.manager()
            errors.append(RuntimeError(f"The controller manager did not stop within {limit:g}s"))
        if self.ring is not None and self.ring.name in self.group.late:
            errors.append(RuntimeError("The ring coordinator did not stop in time"))
        if self.host is not None and self.host.name in self.group.late:
            log.warning("Admission requests still running after the webhook's shutdown_timeout")
        for error in (*([manager.failure] if manager is not None else []), *self.group.stop_errors):
            if error is not None and all(error is not seen for seen in errors):
                errors.append(error)
        if self.admission is not None:
            self.admission.close()
        if self.metrics_access is not None:
            self.metrics_access.close()  # its own connections to the API server


def _raise(errors: list[BaseException]) -> None:
    if not errors:
        return
    if len(errors) == 1:
        raise errors[0]
    raise BaseExceptionGroup("Application failed while stopping components", errors)
