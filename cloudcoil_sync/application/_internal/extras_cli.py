"""The flags of the optional objects (`extras`), shared by ``manifests`` and ``install``:
``--pod-disruption-budget``, ``--network-policy`` with ``--api-server-cidr`` and
``--metrics-namespace``, and ``--cert-manager``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from cloudcoil_sync.application._internal.extras import Extras

__all__ = ["extra_options", "extras_from"]

F = TypeVar("F", bound=Callable[..., Any])


def extra_options(function: F) -> F:
    """Add the optional objects' flags to a command."""
    options = [
        click.option(
            "--pod-disruption-budget",
            is_flag=True,
            help="Add a PodDisruptionBudget (maxUnavailable 1); needs --replicas 2 or more.",
        ),
        click.option(
            "--network-policy",
            is_flag=True,
            help="Add a NetworkPolicy: webhook port from --api-server-cidr, metrics port from "
            "--metrics-namespace, nothing else.",
        ),
        click.option(
            "--api-server-cidr",
            multiple=True,
            metavar="CIDR",
            help="The API server's address range (repeatable), for --network-policy.",
        ),
        click.option(
            "--metrics-namespace",
            metavar="NAMESPACE",
            help="The namespace whose Pods may scrape /metrics, for --network-policy.",
        ),
        click.option(
            "--cert-manager",
            is_flag=True,
            help="Add a cert-manager Issuer and Certificate for the webhook's TLS Secret and "
            "let cert-manager inject the webhooks' CA (no --ca-file).",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def extras_from(params: Mapping[str, Any]) -> Extras | None:
    """The flags as `Extras` (None if none is set); ``click.UsageError`` for a bad mix."""
    from cloudcoil_sync.application._internal.extras import Extras, NetworkPolicyOptions

    cidrs = tuple(params.get("api_server_cidr") or ())
    metrics = params.get("metrics_namespace")
    policy = None
    if params.get("network_policy"):
        try:
            policy = NetworkPolicyOptions(cidrs, metrics)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    elif cidrs or metrics:
        raise click.UsageError("--api-server-cidr and --metrics-namespace need --network-policy")
    extras = Extras(
        pod_disruption_budget=bool(params.get("pod_disruption_budget")),
        network_policy=policy,
        cert_manager=bool(params.get("cert_manager")),
    )
    return extras if extras.any else None
