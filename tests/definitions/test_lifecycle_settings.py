"""Lifespans (registration and event types) and the RBACRule / WebhookServer settings."""

from __future__ import annotations

import contextlib

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.application import (
    Application,
    LifecycleEvent,
    LifecycleType,
    RBACRule,
    WebhookServer,
)
from cloudcoil_sync.application._internal.lifecycle import Lifespans
from cloudcoil_sync.controller._internal.leader import LeadershipLost


def lifespans() -> Lifespans:
    return Lifespans(lambda: None)


def test_lifespan_registration_errors():
    app = Application("ops")
    with pytest.raises(ValueError, match="Lifespan scope must be process or leader"):
        app.lifespan(scope="cluster")  # type: ignore[arg-type]

    @app.lifespan()
    def process():
        yield

    with pytest.raises(ValueError, match="Only one process lifespan"):
        app.lifespan()(process)

    async def asynchronous():
        yield

    with pytest.raises(TypeError, match="asynchronous: lifespans must be generator functions"):
        app.lifespan(scope="leader")(asynchronous)

    def plain():
        return None

    with pytest.raises(TypeError, match="Lifespan must be a generator function taking optional"):
        app.lifespan(scope="leader")(plain)

    def two(a, b):
        yield

    with pytest.raises(TypeError, match="Lifespan must be a generator function taking optional"):
        app.lifespan(scope="leader")(two)
    assert app.lifespan(scope="leader")(process) is process
    assert "leader" in app.lifespans and "process" in app.lifespans


def test_event_types_before_cleanup():
    spans = lifespans()
    seen: list[tuple[str, LifecycleType, BaseException | None]] = []

    @spans.register(scope="process")
    def process(event: LifecycleEvent):
        seen.append(("enter", event.type, event.error))
        try:
            yield
        finally:
            seen.append(("exit", event.type, event.error))

    with spans.enter("process", identity="me") as event:
        assert event.scope == "process" and event.identity == "me"
    boom = RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"), spans.enter("process"):
        raise boom
    assert seen == [
        ("enter", LifecycleType.STARTUP, None),
        ("exit", LifecycleType.SHUTDOWN, None),
        ("enter", LifecycleType.STARTUP, None),
        ("exit", LifecycleType.FAILURE, boom),
    ]


def test_leader_scope_leadership_lost_and_interrupt():
    spans = lifespans()
    types: list[LifecycleType] = []

    @spans.register(scope="leader")
    def leader(event):
        assert event.type is LifecycleType.LEADERSHIP_ACQUIRED
        try:
            yield
        finally:
            types.append(event.type)

    lost = LeadershipLost("renew deadline exceeded")
    with pytest.raises(LeadershipLost), spans.enter("leader"):
        raise lost
    with pytest.raises(KeyboardInterrupt), spans.enter("leader"):
        raise KeyboardInterrupt
    with spans.enter("leader") as event:
        event.type, event.error = LifecycleType.LEADERSHIP_LOST, lost  # set by the runtime
    assert types == [
        LifecycleType.LEADERSHIP_LOST,
        LifecycleType.SHUTDOWN,
        LifecycleType.LEADERSHIP_LOST,
    ]


def test_no_lifespan_still_yields_an_event_and_without_parameter():
    spans = lifespans()
    with spans.enter("leader") as event:
        assert event.type is LifecycleType.LEADERSHIP_ACQUIRED
    entered = []

    @spans.register()
    def process():
        entered.append(True)
        yield

    with spans.enter("process"):
        assert entered == [True]


def test_lifespan_must_yield_exactly_once_and_not_swallow_failures():
    spans = lifespans()

    @spans.register()
    def twice():
        yield
        yield

    with pytest.raises(RuntimeError, match="generator didn't stop"), spans.enter("process"):
        pass
    swallow = lifespans()

    @swallow.register()
    def swallowing():
        with contextlib.suppress(Exception):
            yield

    with pytest.raises(ValueError, match="inner"), swallow.enter("process"):
        raise ValueError("inner")


def test_lifespans_are_not_entered_at_registration():
    entered = []
    app = Application("ops", leader_election=True)

    @app.lifespan()
    def process():
        entered.append(True)
        yield

    app.controller(ConfigMap).reconcile()(lambda c: None)
    app.validate_definition()
    assert entered == []


# RBACRule.


def test_rbac_rule_sorts_and_deduplicates():
    rule = RBACRule(ConfigMap, ("watch", "get", "get"), resource_names=("b", "a"))
    assert rule.verbs == ("get", "watch") and rule.resource_names == ("a", "b")
    assert (rule.plural, rule.scope, rule.namespace, rule.all_namespaces) == (
        None,
        None,
        None,
        False,
    )


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"resource": "ConfigMap"}, TypeError, "RBACRule.resource must be a Resource class"),
        ({"verbs": "get"}, ValueError, "RBACRule.verbs must contain nonempty strings"),
        ({"verbs": ("",)}, ValueError, "RBACRule.verbs must contain nonempty strings"),
        ({"verbs": ()}, ValueError, "RBACRule.verbs must not be empty"),
        ({"subresources": ("",)}, ValueError, "RBACRule.subresources must contain nonempty"),
        ({"resource_names": (1,)}, ValueError, "RBACRule.resource_names must contain nonempty"),
        ({"plural": "ConfigMaps"}, ValueError, "Resource plural must be a Kubernetes DNS label"),
        ({"scope": "Global"}, ValueError, "RBACRule.scope must be Namespaced or Cluster"),
        ({"namespace": "A"}, ValueError, "RBAC namespace must be a Kubernetes DNS label"),
        (
            {"namespace": "a", "all_namespaces": True},
            ValueError,
            "RBACRule.namespace and all_namespaces are mutually exclusive",
        ),
        (
            {"scope": "Cluster", "namespace": "a"},
            ValueError,
            "Cluster resources cannot have a namespaced RBACRule",
        ),
        (
            {"verbs": ("create",), "resource_names": ("x",)},
            ValueError,
            "Kubernetes cannot restrict create/deletecollection by resource_names",
        ),
        ({"subresources": ("Status",)}, ValueError, "Subresource must be a Kubernetes DNS label"),
    ],
)
def test_rbac_rule_validation(options, error, message):
    arguments = {"resource": ConfigMap, "verbs": ("get",), **options}
    with pytest.raises(error, match=message):
        RBACRule(**arguments)


# WebhookServer.


def test_webhook_server_defaults():
    server = WebhookServer()
    assert (server.ca_bundle, server.tls_secret) == (b"", "operator-tls")
    assert (server.certfile, server.keyfile) == (
        "/var/run/cloudcoil/tls/tls.crt",
        "/var/run/cloudcoil/tls/tls.key",
    )
    assert (server.host, server.port, server.service_port) == ("0.0.0.0", 9443, 443)
    assert (server.startup_timeout, server.shutdown_timeout) == (30, 10)
    assert server.drain_delay == 5
    assert WebhookServer(drain_delay=0).drain_delay == 0  # off
    with pytest.raises(AttributeError):
        server.port = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"port": 0}, "Webhook ports must be integers between 1 and 65535"),
        ({"service_port": 70000}, "Webhook ports must be integers between 1 and 65535"),
        ({"port": True}, "Webhook ports must be integers between 1 and 65535"),
        ({"startup_timeout": 0}, "Webhook timeouts must be finite and positive"),
        ({"shutdown_timeout": float("inf")}, "Webhook timeouts must be finite and positive"),
        ({"drain_delay": -1}, "drain_delay must be a finite number of seconds >= 0, got -1"),
        ({"drain_delay": float("nan")}, "drain_delay must be a finite number of seconds"),
        ({"drain_delay": True}, "drain_delay must be a finite number of seconds >= 0, got True"),
    ],
)
def test_webhook_server_validation(options, message):
    with pytest.raises(ValueError, match=message):
        WebhookServer(**options)
