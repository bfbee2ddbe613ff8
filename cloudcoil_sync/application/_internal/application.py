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
from typing import TYPE_CHECKING, Any, TypeVar

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.names import dns_label
from cloudcoil_sync._internal.script_errors import install_for_script
from cloudcoil_sync.admission._internal.routes import (
    AdmissionRoutes,
    Route,
    RouteTable,
    ScopedAdmission,
)
from cloudcoil_sync.application._internal import composition
from cloudcoil_sync.application._internal.lifecycle import Lifespans, LifespanScope
from cloudcoil_sync.application._internal.settings import RBACRule, WebhookServer
from cloudcoil_sync.controller._internal.definition import Controller
from cloudcoil_sync.controller._internal.health import HealthServer
from cloudcoil_sync.controller._internal.leader import LeaderElection
from cloudcoil_sync.crd import CRD

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

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
        resources: Sequence[type[Resource] | CRD] = (),
        namespace: str | None = None,
        config: Config | None = None,
        rules: Sequence[RBACRule] = (),
        admission: RouteTable | None = None,
        webhook: WebhookServer | None = None,
        leader_election: LeaderElection | bool | None = None,
        health: HealthServer | None = None,
    ) -> None:
        install_for_script()
        self.name = dns_label(name, "Application name")
        self.namespace = dns_label(resolve_namespace(namespace, config), "Application namespace")
        if config is not None and getattr(config, "namespace", None) != self.namespace:
            raise ValueError("Config.namespace must match Application.namespace")
        self.config = config
        self.resources = tuple(resources)
        self.rules = tuple(_typed(rules, RBACRule, "rules"))
        self.webhook = _optional(webhook, WebhookServer, "webhook")
        self.health = _optional(health, HealthServer, "health")
        if admission is not None and not isinstance(getattr(admission, "routes", None), dict):
            raise TypeError("admission must be an AdmissionWebhook or AdmissionRoutes")
        self.admission = admission
        if admission is not None and admission.config not in (None, config):
            raise ValueError("AdmissionWebhook must share the operator Config")
        election = LeaderElection(name) if leader_election is True else leader_election or None
        self.leader_election = _optional(election, LeaderElection, "leader_election")
        if self.leader_election is not None and self.leader_election.config not in (None, config):
            raise ValueError("Application leader election must share the operator Config")
        self.controllers: tuple[Controller[Any], ...] = ()
        self.crds: tuple[CRD, ...] = ()
        self.manager: Any = None  # Set by the runtime when run() builds its Manager.
        self.lifespans = Lifespans(self._check_registration)
        self.admission_registry = ScopedAdmission(self._check_registration, admission)
        self._frozen = False
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
            raise TypeError("include expects a Controller")
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
        namespace_selector, timeout_seconds, failure_policy.
        """
        return self.admission_registry.validate(model, **options)

    def mutate(self, model: type[Resource], **options: Any) -> Callable[[F], F]:
        """An app-level mutating route; the handler returns the edited object or None."""
        return self.admission_registry.mutate(model, **options)

    def lifespan(self, *, scope: LifespanScope = "process") -> Callable[[F], F]:
        """Pair setup and cleanup around the process or around held leadership."""
        return self.lifespans.register(scope=scope)

    # Definition -----------------------------------------------------------------

    @property
    def frozen(self) -> bool:
        return self._frozen

    def validate_definition(self, *, freeze: bool = False) -> None:
        """Check the completed definition offline (manifests, run); `freeze` ends registration."""
        composition.validate(self)
        if freeze and not self._frozen:
            for controller in self.controllers:
                controller.validate_definition(freeze=True)
            self._frozen = True

    def admission_routes(self, config: Config | None = None) -> AdmissionRoutes:
        """Every admission route (app, controllers, CRD model methods) in one table."""
        self.crds = composition.collect_crds(self.resources, self.controllers)
        return composition.admission_table(self, config)

    @property
    def routes(self) -> tuple[Route, ...]:
        return tuple(self.admission_routes().routes.values())

    def webhook_configurations(self, ca_bundle: bytes | None = None) -> list[dict[str, Any]]:
        """Mutating/ValidatingWebhookConfigurations for this app's Service and routes."""
        return composition.configurations(self, self.routes, ca_bundle)

    # Commands (implemented in their own modules) ------------------------------------

    def manifests(self, **options: Any) -> list[dict[str, Any]]:
        """Offline CRD/RBAC/Service/Deployment/webhook documents (see `manifests`)."""
        from cloudcoil_sync.application._internal.manifests import build_manifests

        return build_manifests(self, **options)

    def to_yaml(self, **options: Any) -> str:
        import yaml

        return str(yaml.safe_dump_all(self.manifests(**options), sort_keys=False))

    def install(self, **options: Any) -> None:
        """Server-side apply of the manifests, waiting for CRDs and rollout."""
        from cloudcoil_sync.application._internal.install import install

        install(self, **options)

    def uninstall(self, **options: Any) -> None:
        """Remove what `install` applied, admission registrations first (see `uninstall`)."""
        from cloudcoil_sync.application._internal.uninstall import uninstall

        uninstall(self, **options)

    def run(self, *, stop: threading.Event | None = None) -> None:
        """Serve admission and run controllers until `stop` is set (no signal handlers)."""
        from cloudcoil_sync.application._internal.runtime import run

        run(self, stop=stop)

    @property
    def ready(self) -> bool:
        """Admission available (every replica), or without a webhook the manager is ready."""
        from cloudcoil_sync.application._internal.runtime import state_of

        return state_of(self).ready

    @property
    def healthy(self) -> bool:
        """Running, no failure, webhook serving (if any) and the manager healthy (if any)."""
        from cloudcoil_sync.application._internal.runtime import state_of

        return state_of(self).healthy

    def wait_ready(self, timeout: float = 30) -> None:
        """Block until `ready`; raises the run's failure, or if it stopped first."""
        from cloudcoil_sync.application._internal.runtime import wait_ready

        wait_ready(self, timeout)

    def main(self, argv: Sequence[str] | None = None) -> None:
        """The `manifests` / `install` / `run` command line."""
        from cloudcoil_sync.application._internal.cli import main

        main(self, argv)

    def __repr__(self) -> str:
        return f"<Application {self.name!r} namespace={self.namespace!r}>"


def _optional(value: Any, kind: type, name: str) -> Any:
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind.__name__} or None")
    return value


def _typed(values: Sequence[Any], kind: type, name: str) -> list[Any]:
    if isinstance(values, str | bytes) or any(not isinstance(v, kind) for v in values):
        raise TypeError(f"{name} must contain {kind.__name__} values")
    return list(values)
