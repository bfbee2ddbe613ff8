"""`Application`: one definition of an operator's CRDs, controllers, admission and RBAC.

Construction and registration are offline and run no handler code. The same object
generates manifests, installs them and runs the operator; those commands live in
their own modules and are imported only when used (so a controller-only operator
never imports the webhook server, and `manifests` never opens a connection).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.names import dns_label
from cloudcoil_sync.admission._internal.routes import (
    AdmissionRoutes,
    Route,
    RouteTable,
    ScopedAdmission,
)
from cloudcoil_sync.application._internal import composition, runtime
from cloudcoil_sync.application._internal.lifecycle import Lifespans, LifespanScope
from cloudcoil_sync.application._internal.manifests import Definition
from cloudcoil_sync.application._internal.options import ManifestKeywords, ManifestOptions
from cloudcoil_sync.application._internal.placing import placing_routes
from cloudcoil_sync.application._internal.progress import Operation
from cloudcoil_sync.application._internal.runtime import ATTACHED, IDLE, RunState
from cloudcoil_sync.application._internal.settings import RBACRule, WebhookServer
from cloudcoil_sync.controller import Controller, HealthServer, LeaderElection
from cloudcoil_sync.controller._internal.checks import HealthChecks
from cloudcoil_sync.controller._internal.user_metrics import user_registry
from cloudcoil_sync.crd import CRD, Versions
from cloudcoil_sync.sharding import Sharding

if TYPE_CHECKING:
    from cloudcoil_sync.application._internal.install import Applied
    from cloudcoil_sync.application._internal.progress import Progress
    from cloudcoil_sync.application._internal.uninstall import Removed
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller import Manager

__all__ = ["Application", "resolve_namespace"]

T = TypeVar("T", bound=Resource)
F = TypeVar("F", bound=Callable[..., Any])

NAMESPACE_ENV = "CLOUDCOIL_NAMESPACE"


def resolve_namespace(namespace: str | None, config: Config | None) -> str:
    """Explicit > the Config's namespace > `$CLOUDCOIL_NAMESPACE` > "default"."""
    if namespace is not None:
        return namespace
    if config is not None and getattr(config, "namespace", None):
        return str(config.namespace)
    return os.environ.get(NAMESPACE_ENV) or "default"


class Application:
    """Describe, install and run controllers and admission policies as one operator.

    A passed `config` stays owned by the caller; otherwise one is created at
    install/run time. Generated RBAC covers the framework's own calls; declare
    what handlers call with `rules=(RBACRule(...), ...)`.
    """

    def __init__(
        self,
        name: str,
        *controllers: Controller[Any],
        resources: Sequence[type[Resource] | CRD | Versions] = (),
        namespace: str | None = None,
        config: Config | None = None,
        rules: Sequence[RBACRule] = (),
        admission: RouteTable | None = None,
        webhook: WebhookServer | None = None,
        leader_election: LeaderElection | bool | None = None,
        health: HealthServer | None = None,
        sharding: Sharding | None = None,
    ) -> None:
        self.name = dns_label(name, "Application name")
        self.namespace = dns_label(resolve_namespace(namespace, config), "Application namespace")
        if config is not None and getattr(config, "namespace", None) != self.namespace:
            raise ValueError("Config.namespace must match Application.namespace")
        self.config = config
        self.resources = tuple(resources)
        self.rules = tuple(_typed(rules, RBACRule, "rules"))
        self.webhook: WebhookServer | None = _optional(webhook, WebhookServer, "webhook")
        self.health: HealthServer | None = _optional(health, HealthServer, "health")
        self.checks = HealthChecks()  # `@app.health_check()`, served by `health`
        self.registry = user_registry()  # your own metrics, served on the same /metrics
        if admission is not None and not isinstance(getattr(admission, "routes", None), dict):
            raise TypeError("admission must be an AdmissionWebhook or AdmissionRoutes")
        self.admission = admission
        if admission is not None and admission.config not in (None, config):
            raise ValueError("AdmissionWebhook must share the operator Config")
        election = LeaderElection(name) if leader_election is True else leader_election or None
        self.leader_election: LeaderElection | None = _optional(
            election, LeaderElection, "leader_election"
        )
        if self.leader_election is not None and self.leader_election.config not in (None, config):
            raise ValueError("Application leader election must share the operator Config")
        self.sharding = _optional(sharding, Sharding, "sharding")
        if self.sharding is not None:
            if self.leader_election is not None:
                raise ValueError(
                    "leader_election and sharding are mutually exclusive: sharding runs every "
                    "replica on its own share (pass one of them)"
                )
            self.sharding.bind(self.name, self.namespace)
            if self.sharding.placing_webhook and self.webhook is None:
                raise ValueError(
                    "Sharding(placing_webhook=True) needs webhook=WebhookServer(...): the "
                    "placing webhook is served by every replica"
                )
        self.controllers: tuple[Controller[Any], ...] = ()
        self.crds: tuple[CRD, ...] = ()
        self.lifespans = Lifespans(self._check_registration)
        self.admission_registry = ScopedAdmission(self._check_registration, admission)
        self._frozen = False
        self._run_state: RunState | None = None  # the one run's, from its start
        for controller in controllers:
            self.include(controller)

    # Registration ---------------------------------------------------------------

    def _check_registration(self) -> None:
        if self._frozen:
            raise RuntimeError("Register application components before running")

    def include(self, controller: Controller[Any]) -> Application:
        """Add a reusable controller (group) defined elsewhere."""
        self._check_registration()
        if not isinstance(controller, Controller):
            raise TypeError(f"include expects a Controller, got {controller!r}")
        if any(item is controller for item in self.controllers):
            raise ValueError("A controller cannot be registered twice")
        if controller.config is not None and controller.config is not self.config:
            raise ValueError("Application controllers must share the operator Config")
        self.controllers = (*self.controllers, controller)
        return self

    def controller(self, resource: type[T], **options: Any) -> Controller[T]:
        """Create a `Controller(resource, **options)` and include it."""
        controller: Controller[T] = Controller(resource, **options)
        self.include(controller)
        return controller

    def validate(self, model: type[Resource], **options: Any) -> Callable[[F], F]:
        """An app-level validating route for `model` (no CRD or controller implied).

        Options: path, target, resource, operations, subresource, scope,
        namespace_selector, object_selector, timeout_seconds, failure_policy.
        """
        return self.admission_registry.validate(model, **options)

    def mutate(self, model: type[Resource], **options: Any) -> Callable[[F], F]:
        """An app-level mutating route; the handler returns the edited object or None."""
        return self.admission_registry.mutate(model, **options)

    def lifespan(self, *, scope: LifespanScope = "process") -> Callable[[F], F]:
        """Pair setup and cleanup around the process or around held leadership."""
        return self.lifespans.register(scope=scope)

    def health_check(
        self,
        name: str | None = None,
        *,
        timeout: float = 5.0,
        period: float = 10.0,
        liveness: bool = False,
        readiness: bool = True,
    ) -> Callable[[F], F]:
        """Add a check to `/readyz` (and `/healthz` with `liveness=True`); see
        docs/observability.md. The function returns True/None when fine, False or raises
        when not; it runs at most once per `period`, bounded by `timeout`."""

        def register(fn: F) -> F:
            label = name or fn.__name__.replace("_", "-")
            self.checks.add(
                label, fn, timeout=timeout, period=period, liveness=liveness, readiness=readiness
            )
            return fn

        return register

    # Definition -----------------------------------------------------------------

    @property
    def frozen(self) -> bool:
        return self._frozen

    def validate_definition(self, *, freeze: bool = False) -> None:
        """Check the completed definition offline (manifests, run); `freeze` ends registration."""
        self._validated_routes()
        if freeze and not self._frozen:
            for controller in self.controllers:
                controller.validate_definition(freeze=True)
            self._frozen = True

    def _validated_routes(self) -> AdmissionRoutes:
        for controller in self.controllers:
            controller.validate_definition()
        table = self.admission_routes()
        composition.check_definition(
            table,
            controllers=self.controllers,
            webhook=self.webhook,
            leader_lifespan="leader" in self.lifespans,
            leader_election=self.leader_election is not None,
            namespace=self.namespace,
        )
        return table

    def admission_routes(self, config: Config | None = None) -> AdmissionRoutes:
        """Every admission route (app, controllers, CRD model methods) in one table."""
        self.crds = composition.collect_crds(self.resources, self.controllers)
        tables = (
            self.admission_registry.routes,
            *(c.admission.routes for c in self.controllers),
            placing_routes(self.sharding, self.controllers, self.namespace),
        )
        return composition.admission_table(
            tables,
            self.crds,
            max_body_bytes=composition.max_body_bytes(self.admission),
            config=config,
        )

    @property
    def routes(self) -> tuple[Route, ...]:
        return tuple(self.admission_routes().routes.values())

    def webhook_configurations(self, ca_bundle: bytes | None = None) -> list[dict[str, Any]]:
        """Mutating/ValidatingWebhookConfigurations for this app's Service and routes."""
        if self.webhook is None:
            raise ValueError("Webhook configurations need webhook=WebhookServer(...)")
        return composition.configurations(
            self.routes,
            name=self.name,
            namespace=self.namespace,
            webhook=self.webhook,
            controllers=self.controllers,
            ca_bundle=ca_bundle,
        )

    def definition(self) -> Definition:
        """Validate offline (no Config, no discovery) and return what manifests, install and
        uninstall need; does not end registration."""
        table = self._validated_routes()
        election = self.leader_election
        namespace = self.namespace
        return Definition(
            name=self.name,
            namespace=namespace,
            controllers=[composition.controller_access(c, namespace) for c in self.controllers],
            crds=[(crd.resource, crd.manifest()) for crd in self.crds],
            rules=self.rules,
            lease=None if election is None else (election.name, election.namespace),
            sharding=None if self.sharding is None else self.sharding.namespace,
            webhook=self.webhook,
            routes=list(table.routes.values()) if self.webhook is not None else [],
            health=self.health,
            stop=composition.stop_plan(
                self.controllers,
                webhook=self.webhook,
                health=self.health,
                leader_election=election,
                sharding=self.sharding,
            ),
            selector_namespaces=composition.controller_namespaces(self.controllers, namespace),
        )

    def replace_webhook(self, webhook: WebhookServer) -> None:
        """Serve admission with `webhook` instead (``run --tls-dir/--webhook-host/--port``)."""
        self._check_registration()
        if self.webhook is None:
            raise ValueError("replace_webhook needs an application with a WebhookServer")
        self.webhook = _optional(webhook, WebhookServer, "webhook")

    # Commands (implemented in their own modules) ------------------------------------

    def manifests(self, **options: Unpack[ManifestKeywords]) -> list[dict[str, Any]]:
        """Offline CRD/RBAC/Service/Deployment/webhook documents, in install order.

        Keywords (`ManifestOptions`, the flags of ``manifests``): ``image=None`` adds the
        Deployment, ``command=None`` its container command, ``replicas=1``;
        ``include_webhooks=True``; ``ca_bundle=None`` replaces ``WebhookServer.ca_bundle``
        (``--ca-file``); ``requests=None``/``limits=None`` the container's default resources
        (``{}``: none); ``extras=None`` the optional objects (PodDisruptionBudget,
        NetworkPolicy, cert-manager).
        """
        from cloudcoil_sync.application._internal.manifests import assemble

        return assemble(self.definition(), ManifestOptions(**options))

    def to_yaml(self, **options: Unpack[ManifestKeywords]) -> str:
        """`manifests` as one YAML stream."""
        import yaml

        return str(yaml.safe_dump_all(self.manifests(**options), sort_keys=False))

    def install(
        self,
        *,
        timeout: float = 120.0,
        force: bool = False,
        dry_run: bool = False,
        config: Config | None = None,
        progress: Progress | None = None,
        **options: Unpack[ManifestKeywords],
    ) -> list[Applied]:
        """Server-side apply of the manifests (the keywords of `manifests`), waiting for CRDs
        and rollout; each outcome.

        ``config`` defaults to the application's (else one is loaded and closed after).
        """
        from cloudcoil_sync.application._internal.install import install

        config = config if config is not None else self.config
        operation = Operation(timeout, dry_run, config, progress)
        return install(
            self.definition(), ManifestOptions(**options), force=force, operation=operation
        )

    def uninstall(
        self,
        *,
        include_crds: bool = False,
        timeout: float = 120.0,
        dry_run: bool = False,
        config: Config | None = None,
        progress: Progress | None = None,
    ) -> list[Removed]:
        """Remove what `install` applied, admission registrations first (see `uninstall`)."""
        from cloudcoil_sync.application._internal.uninstall import uninstall

        config = config if config is not None else self.config
        operation = Operation(timeout, dry_run, config, progress)
        return uninstall(self.definition(), include_crds=include_crds, operation=operation)

    def run(self, *, stop: threading.Event | None = None) -> None:
        """Serve admission and run controllers until `stop` is set (no signal handlers)."""
        if self._run_state is not None:
            raise RuntimeError("Application instances can only run once")
        self.validate_definition(freeze=True)
        with ATTACHED:
            if self._run_state is not None:
                raise RuntimeError("Application instances can only run once")
            self._run_state = state = RunState()
            ATTACHED.notify_all()  # a wait_ready called before run
        runtime.run(self, state, stop=stop)

    def _state(self) -> RunState:
        return self._run_state if self._run_state is not None else IDLE

    @property
    def manager(self) -> Manager | None:
        """The controller manager of the run (None before it is built, or without controllers)."""
        return None if self._run_state is None else self._run_state.manager

    @property
    def ready(self) -> bool:
        """Admission available (every replica), or without a webhook the manager is ready."""
        return self._state().ready

    @property
    def healthy(self) -> bool:
        """Running, no failure, webhook serving (if any) and the manager healthy (if any)."""
        return self._state().healthy

    def wait_ready(self, timeout: float = 30) -> None:
        """Block until `ready`; raises the run's failure, or if it stopped first."""
        runtime.wait_ready(self._state, timeout)

    def main(self, argv: Sequence[str] | None = None) -> None:
        """The `manifests` / `install` / `uninstall` / `run` / `certs` command line."""
        from cloudcoil_sync.application._internal.cli import main

        main(self, argv)

    def __repr__(self) -> str:
        return f"<Application {self.name!r} namespace={self.namespace!r}>"


def _optional(value: Any, kind: type, name: str) -> Any:
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind.__name__} or None, got {value!r}")
    return value


def _typed(values: Sequence[Any], kind: type, name: str) -> list[Any]:
    if isinstance(values, str | bytes) or any(not isinstance(v, kind) for v in values):
        raise TypeError(f"{name} must contain {kind.__name__} values, got {values!r}")
    return list(values)
