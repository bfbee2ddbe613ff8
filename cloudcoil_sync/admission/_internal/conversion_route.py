"""`ConversionRoute`: where and how a multi-version kind's conversion webhook is served
(the endpoint itself is `conversion.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from cloudcoil_sync.crd import Versions

__all__ = ["ConversionRoute", "conversion_route"]


@dataclass(frozen=True)
class ConversionRoute:
    """One CRD's conversion endpoint: its kind's `Versions`, deadline and concurrency."""

    versions: Versions
    path: str
    timeout_seconds: int = 10
    max_concurrency: int | None = None  # None: the webhook's max_workers


def conversion_route(versions: Versions, *, timeout_seconds: int = 10) -> ConversionRoute:
    """The route of a multi-version kind, at ``/convert/<plural>.<group>``."""
    return ConversionRoute(versions, versions.conversion_path, timeout_seconds)
