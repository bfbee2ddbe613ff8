"""No import cycle anywhere in cloudcoil_sync, and the packages import in one direction only.

The graph is read from the source (``tests/source_graph.py``): every import counts, including
those under ``TYPE_CHECKING`` and inside functions. Layers, top to bottom:
application → sharding → controller, admission, crd → client; ``testing`` may import anything,
but nothing in the product imports ``testing``.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from tests.source_graph import PACKAGE, cycles, import_graph, modules

#: package → packages it must never import (directly, in any module).
FORBIDDEN = {
    "client": {"application", "sharding", "controller", "admission", "crd", "testing"},
    "controller": {"application", "sharding", "testing"},
    "admission": {"application", "sharding", "testing"},
    "crd": {"application", "sharding", "testing"},
    "sharding": {"application", "admission", "testing"},
    "application": {"testing"},
}
#: Modules outside the packages (helpers and ``_compat``) import no package of the product.
PACKAGES = {"application", "sharding", "controller", "admission", "crd", "client", "testing"}


def package_of(module: str) -> str:
    """``cloudcoil_sync.client._internal.rest`` → ``client``; the root → ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """``importer -> imported`` for every import that goes against the layer order."""
    found = []
    for importer, targets in sorted(graph.items()):
        source = package_of(importer)
        if importer == PACKAGE:
            continue  # the root facade re-exports the everyday names of every package
        forbidden = FORBIDDEN.get(source, PACKAGES if source not in PACKAGES else set())
        for target in sorted(targets):
            if package_of(target) in forbidden:
                found.append(f"{importer} -> {target}")
    return found


def test_the_package_has_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_packages_import_only_downwards() -> None:
    assert layer_violations(import_graph()) == []


def test_every_kind_of_import_is_an_edge(tmp_path: Path) -> None:
    """The graph sees what a reader sees: TYPE_CHECKING, function-level and relative imports,
    and `from package import submodule`."""
    root = tmp_path / PACKAGE
    (root / "a").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a/__init__.py": "from . import b\n",
        "a/b.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from cloudcoil_sync.a.c import C\n"
        ),
        "a/c.py": "def f():\n    from ..a.d import x\n",
        "a/d.py": "import cloudcoil_sync.a.b\nimport json\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)
    graph = import_graph(modules(root))
    assert graph["cloudcoil_sync.a"] == {"cloudcoil_sync.a.b"}
    assert graph["cloudcoil_sync.a.b"] == {"cloudcoil_sync.a.c"}
    assert graph["cloudcoil_sync.a.c"] == {"cloudcoil_sync.a.d"}
    assert graph["cloudcoil_sync.a.d"] == {"cloudcoil_sync.a.b"}
    assert cycles(graph) == [["cloudcoil_sync.a.b", "cloudcoil_sync.a.c", "cloudcoil_sync.a.d"]]


@pytest.mark.parametrize(
    ("importer", "target", "wrong"),
    [
        ("cloudcoil_sync.client._internal.api", "cloudcoil_sync.controller._internal.store", True),
        (
            "cloudcoil_sync.controller._internal.worker",
            "cloudcoil_sync.application._internal.cli",
            True,
        ),
        (
            "cloudcoil_sync.application._internal.certs_cli",
            "cloudcoil_sync.testing._internal.tls",
            True,
        ),
        ("cloudcoil_sync._internal.names", "cloudcoil_sync.client._internal.rest", True),
        (
            "cloudcoil_sync.testing._internal.emulator",
            "cloudcoil_sync.application._internal.cli",
            False,
        ),
        (
            "cloudcoil_sync.application._internal.cli",
            "cloudcoil_sync.controller._internal.leader",
            False,
        ),
        (
            "cloudcoil_sync.controller._internal.worker",
            "cloudcoil_sync.client._internal.api",
            False,
        ),
    ],
)
def test_layer_rules(importer: str, target: str, wrong: bool) -> None:
    assert layer_violations({importer: {target}}) == ([f"{importer} -> {target}"] if wrong else [])


#: The `_internal` modules of other packages that the controller package may import: its
#: named seams. Everything else it needs of the client is public (`cloudcoil_sync.client`).
CONTROLLER_SEAMS = {
    # build/identify: a model from stored JSON, or a typed InvalidObject naming its fields.
    "cloudcoil_sync.client._internal.invalid",
    # api_error: a watch stream's ERROR event as the typed error of its status.
    "cloudcoil_sync.client._internal.errors",
    # The orjson codec the informer store shares with the client's responses.
    "cloudcoil_sync.client._internal.codec",
    # Controller.validate/mutate register admission routes scoped to the controller.
    "cloudcoil_sync.admission._internal.routes",
    # lookup: whether a kind is cluster-scoped, offline (namespaces never separate two
    # controllers of such a kind).
    "cloudcoil_sync.client._internal.rest",
}


#: Every package's named seams: the `_internal` modules of another package it may import, each
#: with why. Everything else it needs of another package goes through that package's facade
#: (`from cloudcoil_sync.client import Conflict`). `cloudcoil_sync._internal` is shared by
#: every package by design (service, endpoints, patches, ...). `testing` (the emulator, a fake
#: API server) may use any package's public names, and of their internals only its seams here.
SEAMS: dict[str, dict[str, str]] = {
    "client": {},
    "crd": {},
    "controller": {seam: "see CONTROLLER_SEAMS" for seam in CONTROLLER_SEAMS},
    "admission": {
        "cloudcoil_sync.client._internal.rest": "lookup: a built-in kind's plural and scope "
        "for a route's rules, offline",
        "cloudcoil_sync.crd._internal.decorator": "resource_options: a custom resource's plural "
        "and scope for a route's rules",
    },
    "sharding": {
        "cloudcoil_sync.controller._internal.fence": "WriteFence: the ring Lease's fence, "
        "which the coordinator checks between rounds (its writes go through `fenced`)",
        "cloudcoil_sync.controller._internal.event_relay": "StopEvent, relay: a stop event that "
        "wakes the ring election's and the coordinator's waits",
        "cloudcoil_sync.controller._internal.informer": "Informer: the claimer's and the shard's "
        "watches (shard Leases, unplaced objects), as the controllers' informers",
    },
    "application": {
        "cloudcoil_sync.admission._internal.conversion": "conversion_route: the conversion "
        "webhook of a multi-version CRD, beside its admission routes",
        "cloudcoil_sync.admission._internal.configurations": "webhook_configurations: the "
        "Mutating/ValidatingWebhookConfigurations of the manifests",
        "cloudcoil_sync.admission._internal.decorators": "admission_methods: "
        "Application.validate/mutate are the admission decorators",
        "cloudcoil_sync.admission._internal.hosting": "webhook_host: the admission app, "
        "instrumented, behind the TLS host with its /metrics access, built in one place",
        "cloudcoil_sync.admission._internal.limits": "ConnectionLimits: public in application, "
        "defined where the webhook host enforces it",
        "cloudcoil_sync.admission._internal.route": "Route, build_route, gvk_key: the placing "
        "webhook's route and the manifests' view of routes",
        "cloudcoil_sync.admission._internal.routes": "AdmissionRoutes, ScopedAdmission: the "
        "application's route table, merged with its controllers'",
        "cloudcoil_sync.client._internal.rest": "lookup: RBAC rules for built-in kinds, offline",
        "cloudcoil_sync.controller._internal.budgets": "the stop budgets the application adds "
        "its own to (margins, the write grace in the Pod's grace period)",
        "cloudcoil_sync.controller._internal.cache": "LabelSelector: the placing webhook matches "
        "a controller's selector as its informer does",
        "cloudcoil_sync.controller._internal.checks": "HealthChecks, serve_checks: the named "
        "health checks of @app.health_check and the framework's, served by the health app",
        "cloudcoil_sync.controller._internal.health": "HealthServer, public, still typed from "
        "here by manifests.py (left to the ManifestOptions part of issue 38)",
        "cloudcoil_sync.controller._internal.metrics": "OperatorMetrics: one registry for the "
        "manager, the webhook and the ring",
        "cloudcoil_sync.controller._internal.user_metrics": "user_registry, UserMetrics: "
        "app.registry, served with the operator's metrics (clashing names refused)",
        "cloudcoil_sync.controller._internal.overlap": "check_overlap: two controllers of one "
        "kind, checked across the application",
        "cloudcoil_sync.crd._internal.versions": "versions_of: the Versions a model belongs "
        "to, for the overlap check of controllers on two versions of one kind",
        "cloudcoil_sync.crd._internal.decorator": "resource_options: a custom resource's plural "
        "and scope for RBAC, routes and the scope check",
        "cloudcoil_sync.sharding._internal.kinds": "ShardedKind, primary_kind: the kinds the "
        "placing webhook places",
        "cloudcoil_sync.sharding._internal.replica": "shard_members, ring_members: a sharded "
        "replica's parts, built in one place",
    },
    "testing": {
        "cloudcoil_sync.client._internal.codec": "the emulator reads and writes JSON with the "
        "client's codec (orjson, the same strictness)",
        "cloudcoil_sync.client._internal.rest": "builtin_mappings: the emulator serves the "
        "built-in kinds the client maps",
        "cloudcoil_sync.crd._internal.convert": "round_trip_problems: check_round_trip reports "
        "what a conversion round trip lost",
    },
}


@functools.cache
def source_reaches() -> dict[str, set[str]]:
    """`reached_internals` of the source, read once for the tests below."""
    return reached_internals(import_graph())


def reached_internals(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """package → the `_internal` modules of other packages its modules import."""
    reached: dict[str, set[str]] = {package: set() for package in PACKAGES}
    for importer, targets in graph.items():
        source = package_of(importer)
        if source not in PACKAGES or importer == f"{PACKAGE}.{source}":
            continue  # a facade re-exports its own package's names
        for target in targets:
            if "._internal" in target and package_of(target) not in (source, "", "_internal"):
                reached[source].add(target)
    return reached


def test_the_controller_reaches_other_internals_only_through_its_named_seams() -> None:
    reached = source_reaches()["controller"]
    assert reached <= CONTROLLER_SEAMS, sorted(reached - CONTROLLER_SEAMS)


#: The path of one key from watch event to write (docs/architecture.md, "The path of one
#: key"), top to bottom: each module is handed what it calls below it, never what called it.
KEY_PATH = (
    "cloudcoil_sync.controller._internal.informer",
    "cloudcoil_sync.controller._internal.triggers",
    "cloudcoil_sync.controller._internal.queue",
    "cloudcoil_sync.controller._internal.workers",
    "cloudcoil_sync.controller._internal.reconciler",
    "cloudcoil_sync.controller._internal.handling",
    "cloudcoil_sync.client._internal.api",
    "cloudcoil_sync.client._internal.transport",
)
ARCHITECTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module `start` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), set()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_drawn_path_of_one_key_is_the_checked_one_and_crosses_at_most_eight_modules() -> None:
    text = ARCHITECTURE.read_text()
    drawing = text[text.index("## The path of one key") : text.index("`Outcome` (`outcome.py`)")]
    drawn = dict(re.findall(r"\b([1-9]) (?:client )?(\w+)\.py", drawing))
    assert [drawn[str(n)] for n in range(1, len(drawn) + 1)] == [
        module.rsplit(".", 1)[1] for module in KEY_PATH
    ]
    assert len(KEY_PATH) <= 8


#: The same path as the call stacks it runs on, caller first: the informer thread's, and the
#: worker thread's (a pass, its write, and the settling of the key with the queue).
KEY_STACKS = (
    ("informer", "triggers", "queue"),
    ("workers", "reconciler", "handling"),
    ("workers", "reconciler", "api", "transport"),
    ("workers", "queue"),
)


def test_no_module_on_the_path_of_one_key_imports_one_that_calls_it() -> None:
    graph = import_graph()
    by_name = {module.rsplit(".", 1)[1]: module for module in KEY_PATH}
    assert {name for stack in KEY_STACKS for name in stack} == set(by_name)
    for stack in KEY_STACKS:
        for depth, name in enumerate(stack):
            callers = {by_name[caller] for caller in stack[:depth]}
            assert by_name[name] in graph
            assert not reachable(graph, by_name[name]) & callers, f"{name} reaches back up"


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_each_package_reaches_other_internals_only_through_its_named_seams(package: str) -> None:
    """Exactly the listed seams: a new one must be named (with why), a seam no longer used
    must be struck off."""
    assert source_reaches()[package] == set(SEAMS[package])


def test_every_seam_says_why_in_a_line() -> None:
    assert set(SEAMS) == PACKAGES
    for package, seams in SEAMS.items():
        for seam, why in seams.items():
            assert package_of(seam) not in (package, "", "_internal") and "._internal." in seam
            assert why.strip() and "\n" not in why and len(why) < 160, seam


def test_a_new_reach_into_another_internal_is_caught() -> None:
    graph = {
        "cloudcoil_sync.sharding._internal.claim": {"cloudcoil_sync.client._internal.transport"},
        "cloudcoil_sync.client": {"cloudcoil_sync.client._internal.api"},
        "cloudcoil_sync.crd._internal.schema": {"cloudcoil_sync._internal.names"},
    }
    reached = reached_internals(graph)
    assert reached["sharding"] == {"cloudcoil_sync.client._internal.transport"}
    assert reached["client"] == reached["crd"] == set()
