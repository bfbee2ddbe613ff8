"""Kubernetes name rules that admission paths and registrations must follow."""

from __future__ import annotations

import re

__all__ = ["dns_label", "dns_subdomain"]

_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")


def dns_subdomain(value: str) -> str:
    parts = value.split(".") if isinstance(value, str) else []
    if (
        not value
        or len(value) > 253
        or any(len(part) > 63 or not _LABEL.fullmatch(part) for part in parts)
    ):
        raise ValueError(f"Invalid DNS subdomain: {value!r}")
    return value


def dns_label(value: str) -> str:
    if not isinstance(value, str) or len(value) > 63 or not _LABEL.fullmatch(value):
        raise ValueError(f"Invalid DNS label: {value!r}")
    return value
