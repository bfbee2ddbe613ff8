"""The checks of `LeaderElection`'s arguments (Lease name and namespace, timings)."""

from __future__ import annotations

import math
from typing import Any

from cloudcoil_sync._internal.names import is_dns_label, is_dns_subdomain
from cloudcoil_sync._internal.numbers import is_number

__all__ = ["TIMING_RANGE", "dns_name", "lease_duration_value", "seconds"]

INT32_MAX = 2**31 - 1
TIMING_RANGE = "Require 0 < retry_period < renew_deadline < lease_duration"


def dns_name(value: Any, *, label: bool) -> str:
    """A DNS subdomain (Lease name) or a DNS label (namespace), else ValueError."""
    if not (is_dns_label(value) if label else is_dns_subdomain(value)):
        raise ValueError(
            f"Lease name and namespace must be valid Kubernetes DNS names, got {value!r}"
        )
    return str(value)


def seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(TIMING_RANGE)
    return float(value)


def lease_duration_value(value: Any) -> float:
    if not (is_number(value) and 0 < value <= INT32_MAX):
        raise ValueError("lease_duration must be a positive int32 number of seconds")
    return value
